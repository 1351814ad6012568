//! `random` in the Python guest: every fresh instance seeds it once, at its first call,
//! so runs and sessions never share the build snapshot's random state, and what guest
//! code sees is CPython's `random` (its genuine `seed`, its sequences). The guest seeds
//! with its own function in place of componentize-py's `random.seed()`
//! (guests/python/app.py, `_install_instance_seeding`): a build that skipped the seeding
//! repeats the snapshot's numbers in every run, and one that did not put `random.seed`
//! back shows another function to guest code; these tests fail on both.

use serde_json::{json, Value};
use wasmbox::{Sandbox, SessionConfig, Tools};

use crate::support::{python, value};

fn sandbox() -> Sandbox {
    Sandbox::new(python(), Tools::new())
}

/// What a fresh instance's `random` starts from, and its first draws: each an int as
/// text (JSON numbers lose 64-bit ints).
const FIRST_DRAWS: &str = "import random\n\
     state = random.getstate()\n\
     [str(hash(state[1])), str(state[1][-1]), repr(state[2]), str(random.getrandbits(64)), repr(random.random())]";

/// The parts of FIRST_DRAWS that must differ between instances (the index, 624, and the
/// Gaussian cache, None, are the same in every freshly seeded state).
fn fresh_parts(draws: &Value) -> Vec<String> {
    let parts: Vec<String> =
        draws.as_array().expect("a list").iter().map(|part| part.as_str().expect("text").to_owned()).collect();
    assert_eq!((parts[1].as_str(), parts[2].as_str()), ("624", "None"), "a freshly seeded state: {parts:?}");
    vec![parts[0].clone(), parts[3].clone(), parts[4].clone()]
}

/// Fresh runs, each on a new instance: no two start from the same state or draw the
/// same numbers (a build that did not seed would give the snapshot's in every run).
#[tokio::test]
async fn python_instances_seed_random_each_run_afresh() {
    let sandbox = sandbox();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..4 {
        for part in fresh_parts(&value(&sandbox.run(FIRST_DRAWS).await)) {
            assert!(seen.insert(part.clone()), "{part} came back in two runs");
        }
    }
}

/// A session is one instance: seeded once, at its first step, and then one stream across
/// its steps (no reseed between them); two sessions start from different states.
#[tokio::test]
async fn python_instances_seed_random_once_per_session() {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2 {
        let session = sandbox().session(SessionConfig::default()).await.expect("the session opens");
        for part in fresh_parts(&value(&session.run(FIRST_DRAWS).await)) {
            assert!(seen.insert(part.clone()), "{part} came back in two sessions");
        }
        // What the stream gives next, from a copy of its state, is what the next step draws.
        let copy = "copy = random.Random()\ncopy.setstate(random.getstate())\nstr(copy.getrandbits(64))";
        let expected = value(&session.run(copy).await);
        assert_eq!(value(&session.run("str(random.getrandbits(64))").await), expected, "the stream went on");
    }
}

/// Inside a run, `random.seed` is the genuine bound method of `random._inst` (not the
/// guest's seeding function), and it gives CPython's sequences.
#[tokio::test]
async fn python_instances_seed_random_with_the_genuine_seed_left_in_place() {
    let code = "import random\n\
                genuine = [random.seed == random._inst.seed, random.seed.__self__ is random._inst,\n\
                           random.seed.__func__ is random.Random.seed]\n\
                random.seed(42)\n\
                forty_two = [random.random(), random.random(), random.random(), str(random.getrandbits(64))]\n\
                random.seed('wasmbox')\n\
                text = [random.random(), random.randrange(10**9)]\n\
                random.seed()\n\
                [genuine, forty_two, text, random.getstate()[1][-1]]";
    let sandbox = sandbox();
    let session = sandbox.session(SessionConfig::default()).await.expect("the session opens");
    // CPython's own values (python3 -c 'import random; random.seed(42); ...').
    let expected = json!([
        [true, true, true],
        [0.6394267984578837, 0.025010755222666936, 0.27502931836911926, "2574020394472462046"],
        [0.01936433122557535, 479607105],
        624
    ]);
    assert_eq!(value(&sandbox.run(code).await), expected, "a run");
    assert_eq!(value(&session.run(code).await), expected, "a session's first step");
    assert_eq!(value(&session.run(code).await), expected, "a later step");
}
