//! What a guest can do to end its own run badly — exit, raise a huge error — and how the
//! outcome reports it: the guest's `error`, never `internal`, never unbounded.

use wasmbox::{
    Outcome, Sandbox, Status, Tools, MAX_ERROR_KIND_BYTES, MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_TRACEBACK_BYTES,
};

use crate::support::{javascript, python};

fn assert_capped(outcome: &Outcome) {
    assert_eq!(outcome.status, Status::Error, "{:?}", outcome.error);
    let error = outcome.error.as_ref().unwrap();
    assert!(error.kind.len() <= MAX_ERROR_KIND_BYTES, "kind of {} bytes", error.kind.len());
    assert!(error.message.len() <= MAX_ERROR_MESSAGE_BYTES, "message of {} bytes", error.message.len());
    assert!(error.traceback.len() <= MAX_ERROR_TRACEBACK_BYTES, "traceback of {} bytes", error.traceback.len());
}

#[tokio::test]
async fn os_exit_is_the_guests_error_with_its_code_and_no_host_backtrace() {
    let sandbox = Sandbox::new(python(), Tools::new());
    // WASI 0.2's `exit` carries success or failure only: a non-zero code arrives as 1.
    for (code, exit_code) in [("import os\nos._exit(0)", 0), ("import os\nprint('bye')\nos._exit(3)", 1)] {
        let outcome = sandbox.run(code).await;
        assert_eq!(outcome.status, Status::Error, "{outcome:#?}");
        let error = outcome.error.unwrap();
        assert_eq!(error.kind, "exit");
        assert!(error.message.contains(&format!("code {exit_code}")), "{}", error.message);
        assert!(!error.message.contains("backtrace") && !error.message.contains("wasm"), "{}", error.message);
    }
    // sys.exit is an exception the runner catches, not a WASI exit.
    let outcome = sandbox.run("import sys\nsys.exit(3)").await;
    assert_eq!((outcome.status, outcome.error.unwrap().kind.as_str()), (Status::Error, "SystemExit"));
}

#[tokio::test]
async fn huge_python_errors_are_capped_with_a_marker() {
    let sandbox = Sandbox::new(python(), Tools::new());
    for size in [10_000_000, 100_000_000] {
        let outcome = sandbox.run(&format!("raise Exception('x' * {size})")).await;
        assert_capped(&outcome);
        let error = outcome.error.unwrap();
        assert_eq!(error.kind, "Exception");
        assert!(error.message.starts_with("xxxx") && error.message.ends_with("characters cut]"), "{size}");
        assert!(error.traceback.contains("characters cut]"), "{size}");
    }
    // A huge class name and a huge chained cause.
    let code = "E = type('E' * 100_000, (Exception,), {})\n\
                try:\n    raise ValueError('v' * 5_000_000)\nexcept ValueError as cause:\n    raise E('e' * 5_000_000) from cause";
    let outcome = sandbox.run(code).await;
    assert_capped(&outcome);
    assert!(outcome.error.unwrap().kind.starts_with("EEEE"));
}

#[tokio::test]
async fn huge_js_errors_are_capped_with_a_marker_and_do_not_time_out() {
    let sandbox = Sandbox::new(javascript(), Tools::new());
    for code in [
        "throw new Error('x'.repeat(5e7))",
        "throw 'y'.repeat(2e7)",
        "const e = new Error('m'); e.name = 'N'.repeat(1e6); throw e",
        "throw new Error('outer', {cause: new Error('c'.repeat(1e7))})",
    ] {
        let outcome = sandbox.run(code).await;
        assert_capped(&outcome);
    }
}
