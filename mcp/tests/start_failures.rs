//! Downstream servers that crash, hang or speak garbage at start-up: each is down with a
//! reason and its allowlisted tools fail saying so (cli/tests/mcp.rs has a server that
//! crashes mid-session beside healthy ones). Real processes (`sh`), the broker's public
//! `BrokerCtx`, no guest.

#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;

use wasmbox::{BrokerCtx, CallError, Limits, Scope, Tools};
use wasmbox_mcp::{Downstream, McpConfig};

fn config(text: &str) -> McpConfig {
    McpConfig::parse(text, false, Path::new("/")).expect("a valid servers file")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_fail_at_start_fail_only_their_tools() {
    let servers = config(
        r#"
[servers.crashes]
command = "sh"
args = ["-c", "echo dying >&2; exit 3"]
tools = ["lookup"]

[servers.hangs]
command = "sh"
args = ["-c", "sleep 60"]
tools = ["lookup"]
startup_timeout_ms = 300

[servers.garbage]
command = "sh"
args = ["-c", "echo 'this is not JSON-RPC'; echo '{\"jsonrpc\": \"2.0\", \"id\": 99, \"result\": 1}'; sleep 60"]
tools = ["lookup"]
startup_timeout_ms = 2000

[servers.nobody]
url = "http://127.0.0.1:9/mcp?api_key=hunter2"
headers = { Authorization = "Bearer hunter3" }
tools = ["lookup"]

[servers.every]
command = "sh"
args = ["-c", "exit 1"]
tools = ["*"]
"#,
    );
    let downstream = Downstream::start(&servers).await;
    let status = downstream.status();
    assert_eq!(status.len(), 5);
    for server in &status {
        let reason = server.down.as_deref().unwrap_or_else(|| panic!("`{}` is up", server.name));
        eprintln!("{}: {reason}", server.name);
        if server.name == "hangs" {
            assert!(reason.contains("within 300 ms"), "{reason}");
        }
        if server.name == "nobody" {
            assert!(reason.starts_with("it could not be reached"), "{reason}");
        }
        // The reason reaches the model (descriptions) and the guest (errors): the
        // transport's own words may quote a URL with its credentials; they go to the log.
        assert!(!reason.contains("hunter"), "{reason}");
    }

    let (offered, refused) = downstream.tools();
    assert!(refused.is_empty(), "{refused:?}");
    let names: Vec<&str> = offered.iter().map(|t| t.name()).collect();
    // A down server with `["*"]` offers nothing: its tools are unknown.
    assert_eq!(names, ["crashes__lookup", "garbage__lookup", "hangs__lookup", "nobody__lookup"]);
    let mut tools = Tools::new();
    for tool in offered {
        tools.register(tool).unwrap();
    }
    let mut broker = BrokerCtx::new(Arc::new(tools), Scope::All, Limits::default());
    for name in ["crashes__lookup", "hangs__lookup", "garbage__lookup", "nobody__lookup"] {
        let server = name.split("__").next().unwrap();
        match broker.call(name, "{}").await {
            Err(CallError::Failed(message)) => {
                assert!(message.contains(&format!("the MCP server `{server}` is not available")), "{message}");
                assert!(!message.contains("hunter"), "{message}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}
