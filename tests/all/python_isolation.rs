//! The guest has no ambient authority, and runs do not see each other.

use serde_json::json;

use crate::support::{run, value};

async fn fails_in_guest(code: &str) -> serde_json::Value {
    // Each probe catches its own exception and reports its type, so the test sees
    // *that* it failed inside the guest, not just that the run errored.
    let wrapped =
        format!("try:\n    {code}\n    r = 'succeeded'\nexcept BaseException as e:\n    r = type(e).__name__\nr");
    value(&run(&wrapped).await)
}

/// The guest's files are its own in-memory tree (tests/all/files.rs): no host path.
#[tokio::test]
async fn the_host_filesystem_is_unreachable() {
    assert_ne!(fails_in_guest("open('/etc/passwd').read()").await, json!("succeeded"));
    assert_ne!(fails_in_guest("import os; os.listdir('/usr')").await, json!("succeeded"));
    assert_eq!(value(&run("import os\nsorted(os.listdir('/'))").await), json!(["input", "output", "tmp"]));
}

#[tokio::test]
async fn the_environment_is_empty() {
    std::env::set_var("WASMBOX_TEST_SECRET", "hunter2");
    let outcome = run("import os\n[dict(os.environ), os.getcwd() if hasattr(os, 'getcwd') else None]").await;
    let result = value(&outcome);
    assert_eq!(result[0], json!({}));
    assert!(!outcome.stdout.text.contains("hunter2"));
}

#[tokio::test]
async fn sockets_and_subprocesses_fail() {
    assert_ne!(fails_in_guest("import socket; socket.socket().connect(('127.0.0.1', 80))").await, json!("succeeded"));
    assert_ne!(fails_in_guest("import socket; socket.getaddrinfo('localhost', 80)").await, json!("succeeded"));
    assert_ne!(fails_in_guest("import subprocess; subprocess.run(['ls'])").await, json!("succeeded"));
    assert_ne!(fails_in_guest("import os; os.system('ls')").await, json!("succeeded"));
}

#[tokio::test]
async fn a_global_from_one_run_is_not_visible_in_the_next() {
    assert_eq!(value(&run("import json\njson.leak = 1\nleaked = 42\nleaked").await), json!(42));
    assert_eq!(value(&run("import json\n['leaked' in globals(), hasattr(json, 'leak')]").await), json!([false, false]));
}
