//! The Python guest's batteries: the standard library the README promises (each module
//! imported in the guest), `sqlite3` on in-memory databases and `zoneinfo` with IANA's
//! zones built in.

use serde_json::json;

use crate::support::{run, sandbox, value};

/// The modules between the README's `python-stdlib` markers.
fn readme_stdlib() -> Vec<String> {
    let readme = include_str!("../../README.md");
    let start = readme.find("<!-- python-stdlib").expect("README.md has a <!-- python-stdlib --> list");
    let end = readme[start..].find("<!-- /python-stdlib -->").expect("the README's list is closed") + start;
    let list = &readme[start..end];
    let list = &list[list.find("-->").expect("the opening marker is a comment") + 3..];
    list.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// The README's list of modules is the guest's `STDLIB`, nothing missing from the guest
/// (`STDLIB_MISSING`), and every module on it imports inside a run.
#[tokio::test]
async fn the_readme_lists_the_guests_stdlib() {
    let listed = readme_stdlib();
    assert!(listed.len() > 50, "{listed:?}");
    let code = r#"
import importlib, sys
app = sys.modules["app"]
failed = {}
for name in INPUT:
    try:
        importlib.import_module(name)
    except Exception as e:
        failed[name] = repr(e)
{"stdlib": sorted(app.STDLIB), "missing": list(app.STDLIB_MISSING),
 "support_missing": list(app.SUPPORT_MISSING), "failed": failed}
"#;
    let outcome = sandbox().run_with_input(code, &json!(listed)).await;
    let value = value(&outcome);
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(value["failed"], json!({}), "README modules that do not import in the guest");
    assert_eq!(value["missing"], json!([]), "modules app.py promises that did not import at build time");
    assert_eq!(value["support_missing"], json!([]));
    assert_eq!(value["stdlib"], json!(sorted), "README.md's list and app.py's STDLIB differ");
}

/// `sqlite3` on `:memory:` databases, including what spills to SQLite's temporary
/// storage (a sort larger than its page cache, a temporary table), which by default
/// wants a file in a writable directory: app.py's `connect` keeps it in memory. A
/// database file in the run's in-memory `/tmp` works too.
#[tokio::test]
async fn sqlite3_works_in_memory_with_its_temporary_storage() {
    let code = r#"
import sqlite3
db = sqlite3.connect(":memory:")
db.execute("create table t(k integer, pad text)")
db.executemany("insert into t values (?, ?)", ((i * 7919 % 100003, "x" * 300) for i in range(20_000)))
db.commit()
top = db.execute("select k from t order by pad || k desc limit 1").fetchone()[0]
db.execute("create temp table big as select * from t order by k")
count = db.execute("select count(*), min(k) from big").fetchone()
with sqlite3.connect(":memory:", autocommit=False) as other:
    other.execute("create table u(v)")
    other.execute("insert into u values (json_array(1, 2))")
    rows = other.execute("select v, sqlite_version() from u").fetchall()
on_file = sqlite3.connect("/tmp/scratch.db")
on_file.execute("create table f(x)")
on_file.execute("insert into f values (42)")
on_file.commit()
on_file.close()
reopened = sqlite3.connect("/tmp/scratch.db").execute("select x from f").fetchone()[0]
[top, list(count), rows[0][0], rows[0][1].split(".")[0], db.execute("pragma temp_store").fetchone()[0], reopened]
"#;
    assert_eq!(value(&run(code).await), json!([99999, [20_000, 0], "[1,2]", "3", 2, 42]));
}

/// `zoneinfo` finds IANA's zones inside the guest (both sides of a DST change, a
/// southern-hemisphere zone, the list of zones), refuses an unknown key with
/// ZoneInfoNotFoundError and a path-like one with ValueError.
#[tokio::test]
async fn zoneinfo_knows_the_iana_time_zones() {
    let code = r#"
import datetime, sys, zoneinfo
paris = zoneinfo.ZoneInfo("Europe/Paris")
utc = datetime.timezone.utc
def local(tz, *ymdh):
    return datetime.datetime(*ymdh, tzinfo=utc).astimezone(tz).isoformat()
errors = []
for key in ("Mars/Olympus_Mons", "../../etc/passwd"):
    try:
        zoneinfo.ZoneInfo(key)
    except Exception as e:
        errors.append(type(e).__name__)
zones = zoneinfo.available_timezones()
[
    local(paris, 2026, 1, 15, 12), local(paris, 2026, 7, 15, 12),
    local(zoneinfo.ZoneInfo("America/New_York"), 2026, 3, 8, 7),
    local(zoneinfo.ZoneInfo("Australia/Sydney"), 2026, 1, 1, 0),
    datetime.datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=paris).tzname(),
    errors, len(zones) > 500, "Asia/Kolkata" in zones, sys.modules["app"].TZDATA_VERSION[:2],
]
"#;
    assert_eq!(
        value(&run(code).await),
        json!([
            "2026-01-15T13:00:00+01:00",
            "2026-07-15T14:00:00+02:00",
            "2026-03-08T03:00:00-04:00",
            "2026-01-01T11:00:00+11:00",
            "CET",
            ["ZoneInfoNotFoundError", "ValueError"],
            true,
            true,
            "20"
        ])
    );
}

/// SQL's `random()` and `randomblob()` differ from run to run: componentize-py builds
/// SQLite without a source of randomness, so they began from the same state in every
/// fresh instance until app.py's `connect` replaced them.
#[tokio::test]
async fn sqlite3s_random_differs_from_run_to_run() {
    let code = r#"
import sqlite3
db = sqlite3.connect(":memory:")
row = db.execute("select random(), hex(randomblob(16)), length(randomblob(0)), length(randomblob(3.5))").fetchone()
[str(row[0]), row[1], row[2], row[3], row[1] != db.execute("select hex(randomblob(16))").fetchone()[0]]
"#;
    let (first, second) = (value(&run(code).await), value(&run(code).await));
    assert_eq!((&first[2], &first[3], &first[4]), (&json!(1), &json!(3), &json!(true)), "{first}");
    assert_ne!(first[0], second[0], "random() repeats across runs");
    assert_ne!(first[1], second[1], "randomblob() repeats across runs");
}
