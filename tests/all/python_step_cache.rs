//! A Python session's step whose source an earlier step had runs that step's compiled
//! code again (guests/python/app.py, `_COMPILED`) instead of compiling it. These hold it
//! to what compiling again gives, in the guest's own CPython: the step's own name in
//! tracebacks, and compile-time warnings shown as often as compiling shows them.

use serde_json::json;
use wasmbox::{Outcome, Sandbox, Session, SessionConfig};

use crate::support::{python, tools, value};

async fn open() -> Session {
    Sandbox::new(python(), tools()).session(SessionConfig::default()).await.expect("the session opens")
}

fn traceback(outcome: &Outcome) -> &str {
    &outcome.error.as_ref().expect("an error").traceback
}

#[tokio::test]
async fn a_repeated_step_names_itself_in_tracebacks() {
    let session = open().await;
    let code = "def g():\n    return [1 / i for i in (1, 0)]\ng()";
    for step in 1..=3 {
        let outcome = session.run(code).await;
        let traceback = traceback(&outcome);
        assert!(traceback.contains(&format!("File \"<code-{step}>\", line 3, in <module>\n    g()")), "{traceback}");
        assert!(traceback.contains(&format!("File \"<code-{step}>\", line 2, in g")), "{traceback}");
    }
    for _ in 0..3 {
        assert_eq!(value(&session.run("1 + 1").await), json!(2));
    }
    let name = "import sys\nsys._getframe().f_code.co_filename";
    assert_eq!(value(&session.run(name).await), json!("<code-7>"));
    assert_eq!(value(&session.run(name).await), json!("<code-8>"));
}

/// CPython 3.14 shows a compile-time SyntaxWarning once per location until a call
/// changes the warning filters, even one that leaves them as they were (the second
/// `simplefilter('default')`); a step that reran earlier code without compiling it
/// would miss the warnings after such a call. The expected list is what the guest gave
/// before steps could rerun code (git 268a7c7), and gives with the rerun.
#[tokio::test]
async fn a_repeated_step_warns_as_compiling_it_again_would() {
    let session = open().await;
    let warns = "x = 1\n1 is 1";
    let steps = [
        warns,
        warns,
        "import warnings\nwarnings.simplefilter('default')",
        warns,
        warns,
        "warnings.simplefilter('default')",
        warns,
        "warnings.resetwarnings()",
        warns,
        warns,
        "warnings.simplefilter('error')",
        warns,
    ];
    let mut shown = Vec::new();
    for code in steps {
        let outcome = session.run(code).await;
        shown.push((outcome.stderr.text.contains("SyntaxWarning"), outcome.status.as_str()));
    }
    let expected = [
        (true, "ok"),
        (false, "ok"),
        (false, "ok"),
        (true, "ok"),
        (false, "ok"),
        (false, "ok"),
        (true, "ok"),
        (false, "ok"),
        (true, "ok"),
        (false, "ok"),
        (false, "ok"),
        (false, "error"),
    ];
    assert_eq!(shown, expected);
}
