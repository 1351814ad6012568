//! The host serves `wasmbox:sandbox@0.1.2` and still runs guests built against 0.1.0 and
//! 0.1.1 (docs/guests.md, "Versioning the world"): wasmtime matches a `0.1.0` or `0.1.1`
//! import to the host's `0.1.2` interface, and the host's `0.1.2` runner binding finds an
//! older export.
//! The built-in guests are rebuilt with each WIT change, so this component, built against
//! 0.1.0 and kept as text, is what holds that promise.

use serde_json::json;
use wasmbox::{ImportPolicy, Runtime, Sandbox, Scope, Status};

use crate::support::{engine, tools};

const GUEST_0_1_0: &str = include_str!("guest_wit_0_1_0.wat");

fn runtime(version: &str) -> Runtime {
    // The 0.1.1 guest is the same component naming 0.1.1: 0.1.1 added an interface it
    // need not import, and changed nothing it does.
    let text = GUEST_0_1_0.replace("@0.1.0", &format!("@{version}"));
    let bytes = wat::parse_str(text).expect("valid WAT");
    Runtime::from_bytes_with(&engine(), "guest", &bytes, ImportPolicy::Strict).expect("an older guest loads")
}

#[tokio::test]
async fn a_guest_built_against_wit_0_1_0_loads_runs_and_calls_tools() {
    a_guest_built_against_an_older_wit_loads_runs_and_calls_tools("0.1.0").await;
}

#[tokio::test]
async fn a_guest_built_against_wit_0_1_1_loads_runs_and_calls_tools() {
    a_guest_built_against_an_older_wit_loads_runs_and_calls_tools("0.1.1").await;
}

async fn a_guest_built_against_an_older_wit_loads_runs_and_calls_tools(version: &str) {
    let sandbox = Sandbox::new(runtime(version), tools()).scope(Scope::only(["add"]));
    let outcome = sandbox.run_with_input("add", &json!({"a": 2, "b": 40})).await;
    assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
    assert_eq!(outcome.value, Some(json!(42)));
    assert_eq!(outcome.tool_calls.len(), 1);

    let refused = sandbox.run_with_input("secret", &json!({})).await;
    assert_eq!(refused.status, Status::Error, "{refused:?}");
    assert!(refused.error.is_some_and(|e| e.message.contains("tool refused")));
}
