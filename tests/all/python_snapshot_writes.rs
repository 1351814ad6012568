//! What a Python run writes of the build's snapshot, which the slot's reset then copies
//! back (docs/performance.md, "What a Python run writes of the snapshot"): the
//! snapshot's objects are immortal (guests/python/app.py, `_immortal_snapshot`;
//! native/immortal.c), so counting references to them writes nothing, and a run's small
//! blocks come from empty pools (native/small_alloc.c, `small_alloc_fresh_pools`), on as
//! few pages as they fill. What a run makes itself stays mortal and is freed as before,
//! and a run that drops or replaces snapshot objects leaves later runs unharmed. A build
//! without either change fails the first test or the last.

use serde_json::json;
use wasmbox::{Limits, Sandbox, SessionConfig, Tools};

use crate::support::{python, value};

fn sandbox() -> Sandbox {
    Sandbox::new(python(), Tools::new())
}

/// Immortal as CPython sees it: `sys._is_immortal`, and a count that references do not move.
const IMMORTAL: &str = "import sys\n\
    def immortal(obj):\n\
    \x20   before = sys.getrefcount(obj)\n\
    \x20   held = [obj] * 8\n\
    \x20   return sys._is_immortal(obj) and sys.getrefcount(obj) == before\n";

#[tokio::test]
async fn the_snapshots_objects_are_immortal_and_a_runs_own_are_not() {
    let code = format!(
        "{IMMORTAL}import json, re\n\
         class Mine:\n\
         \x20   pass\n\
         [immortal(json.dumps), immortal(json), immortal(re.compile), immortal(json.JSONEncoder),\n\
         \x20immortal(tools), immortal(output), immortal(Mine), immortal(Mine()), immortal([1, 2]), immortal(immortal)]"
    );
    assert_eq!(
        value(&sandbox().run(&code).await),
        json!([true, true, true, true, true, true, false, false, false, false])
    );
}

/// Objects a run makes are reclaimed: finalizers and weak references see them go, cycles
/// are collected, and a run that allocates far more than its memory cap in turn, holding
/// little at a time, ends `ok`.
#[tokio::test]
async fn a_runs_own_objects_are_still_freed() {
    let code = "import gc, weakref\n\
        gone = []\n\
        class Item:\n\
        \x20   def __del__(self):\n\
        \x20       gone.append('del')\n\
        item = Item()\n\
        ref = weakref.ref(item, lambda _: gone.append('weakref'))\n\
        del item\n\
        a, b = Item(), Item()\n\
        a.other, b.other = b, a\n\
        del a, b\n\
        gc.collect()\n\
        for _ in range(300):\n\
        \x20   block = bytearray(1 << 20)\n\
        sorted(gone)";
    let limits = Limits { max_memory_bytes: 64 << 20, ..Limits::default() };
    let sandbox = sandbox().limits(limits);
    assert_eq!(value(&sandbox.run(code).await), json!(["del", "del", "del", "weakref"]));
}

/// A run may drop, replace or mutate what the snapshot holds (modules, their functions,
/// the runner's globals): the next fresh run starts from the snapshot as built, and a
/// session that does so at every step keeps working.
#[tokio::test]
async fn dropping_snapshot_objects_harms_no_later_run() {
    let sandbox = sandbox();
    let vandal = "import sys, json, re\n\
        del sys.modules['json']\n\
        json.dumps = None\n\
        re.compile = None\n\
        json.__dict__.clear()\n\
        'done'";
    assert_eq!(value(&sandbox.run(vandal).await), json!("done"));
    assert_eq!(value(&sandbox.run("import json\njson.dumps({'a': [1, 2]})").await), json!("{\"a\": [1, 2]}"));

    let session = sandbox.session(SessionConfig::default()).await.expect("the session opens");
    for step in 0..20 {
        let code = format!("import json\njson.loads = lambda text, n={step}: n\njson.loads('x')");
        assert_eq!(value(&session.run(&code).await), json!(step));
    }
}

/// A run's first small blocks of a size lie on a page or two, not wherever the build
/// happened to free blocks of that size (docs/performance.md has the old guest's count).
#[tokio::test]
async fn a_runs_small_blocks_come_from_empty_pools() {
    let code = "tuples = [(i, -i) for i in range(200, 264)]\n\
                texts = [str(i) * 3 for i in range(1000, 1064)]\n\
                [len({id(x) >> 12 for x in made}) for made in (tuples, texts)]";
    let pages = value(&sandbox().run(code).await);
    let pages: Vec<u64> = serde_json::from_value(pages).expect("two counts");
    assert!(pages.iter().all(|&count| count <= 4), "64 small blocks of one size took {pages:?} pages");
}
