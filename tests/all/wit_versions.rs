//! The host serves `wasmbox:sandbox@0.1.1` and still runs guests built against 0.1.0
//! (docs/guests.md, "Versioning the world"): wasmtime matches a `0.1.0` import to the
//! host's `0.1.1` interface, and the host's `0.1.1` runner binding finds a `0.1.0` export.
//! The built-in guests are rebuilt with each WIT change, so this component, built against
//! 0.1.0 and kept as text, is what holds that promise.

use serde_json::json;
use wasmbox::{ImportPolicy, Runtime, Sandbox, Scope, Status};

use crate::support::{engine, tools};

const GUEST_0_1_0: &str = include_str!("guest_wit_0_1_0.wat");

fn runtime() -> Runtime {
    let bytes = wat::parse_str(GUEST_0_1_0).expect("valid WAT");
    Runtime::from_bytes_with(&engine(), "guest_0_1_0", &bytes, ImportPolicy::Strict).expect("a 0.1.0 guest loads")
}

#[tokio::test]
async fn a_guest_built_against_wit_0_1_0_loads_runs_and_calls_tools() {
    let sandbox = Sandbox::new(runtime(), tools()).scope(Scope::only(["add"]));
    let outcome = sandbox.run_with_input("add", &json!({"a": 2, "b": 40})).await;
    assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
    assert_eq!(outcome.value, Some(json!(42)));
    assert_eq!(outcome.tool_calls.len(), 1);

    let refused = sandbox.run_with_input("secret", &json!({})).await;
    assert_eq!(refused.status, Status::Error, "{refused:?}");
    assert!(refused.error.is_some_and(|e| e.message.contains("tool refused")));
}
