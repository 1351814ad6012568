//! Broker policy tested without wasm: every rule with a case that fails without it.

use super::*;
use serde_json::json;

use crate::audit::{AuditConfig, AuditEvent, TracingSink};

fn registry() -> Arc<Tools> {
    let mut tools = Tools::new();
    let schema = json!({"type": "object"});
    tools
        .register(Tool::new("echo", "returns its args", schema.clone(), |args| async move { Ok(args) }))
        .unwrap()
        .register(Tool::new("big", "returns n bytes", schema.clone(), |args| async move {
            Ok(json!("x".repeat(args["n"].as_u64().unwrap_or(0) as usize)))
        }))
        .unwrap()
        .register(Tool::new("boom", "panics", schema.clone(), |_| async { panic!("tool bug") }))
        .unwrap()
        .register(Tool::new("refuse", "fails", schema.clone(), |_| async { Err(ToolFailure::new("no such city")) }))
        .unwrap()
        .register(
            Tool::new("hang", "never answers", schema, |_| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(Value::Null)
            })
            .with_timeout(Duration::from_millis(50)),
        )
        .unwrap();
    Arc::new(tools)
}

fn broker(limits: Limits) -> BrokerCtx {
    BrokerCtx::new(registry(), Scope::All, limits)
}

/// A top-level run's broker over `tools` with every tool in scope, in the run tree `tree`.
fn top_level_run(tools: Arc<Tools>, limits: Limits, tree: Arc<RunTree>, observers: Observers) -> BrokerCtx {
    BrokerCtx::for_run(tools, Scope::All, limits, RunIdentity::top_level(), tree, observers)
}

#[tokio::test]
async fn a_call_in_scope_returns_the_result_and_is_recorded() {
    let mut b = broker(Limits::default());
    assert_eq!(b.call("echo", r#"{"a":1}"#).await.unwrap(), r#"{"a":1}"#);
    let record = &b.trail()[0];
    assert_eq!((record.call_id, record.status, record.args_bytes, record.result_bytes), (1, CallStatus::Ok, 7, 7));
    assert!(b.breach().is_none());
}

#[tokio::test]
async fn unknown_and_out_of_scope_tools_are_denied_alike() {
    let mut b = BrokerCtx::new(registry(), Scope::only(["echo"]), Limits::default());
    let unknown = b.call("nope", "{}").await.unwrap_err();
    let outside = b.call("big", "{}").await.unwrap_err();
    assert_eq!(unknown.status(), CallStatus::Denied);
    assert_eq!(outside.status(), CallStatus::Denied);
    assert_eq!(unknown.message().replace("nope", "big"), outside.message());
    assert_eq!(b.list().iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["echo"]);
    assert!(BrokerCtx::new(registry(), Scope::default(), Limits::default()).list().is_empty());
}

#[tokio::test]
async fn refused_attempts_cannot_grow_the_trail_without_bound() {
    let mut b = BrokerCtx::new(registry(), Scope::only(["echo"]), Limits { max_tool_calls: 10, ..Limits::default() });
    for _ in 0..1_000 {
        let _ = b.call("secret", "{}").await;
    }
    assert_eq!(b.trail().len(), 120, "2 x 10 calls + 100 refused attempts are recorded, no more");
    assert!(b.trail().iter().all(|r| r.status == CallStatus::Denied));
    assert_eq!(b.breach().unwrap().kind, "max_tool_calls");
    let late = b.call("echo", "{}").await.unwrap_err();
    assert_eq!(late.status(), CallStatus::BudgetExhausted, "even an allowed call is refused now");
}

#[tokio::test]
async fn the_eleventh_of_ten_calls_is_refused_and_latched() {
    let mut b = broker(Limits { max_tool_calls: 10, ..Limits::default() });
    for _ in 0..10 {
        b.call("echo", "{}").await.unwrap();
    }
    let err = b.call("echo", "{}").await.unwrap_err();
    assert_eq!(err.status(), CallStatus::BudgetExhausted);
    assert_eq!(b.breach().unwrap().kind, "max_tool_calls");
}

#[tokio::test]
async fn oversized_and_deep_args_are_refused_before_parsing() {
    let mut b = broker(Limits { max_tool_args_bytes: 16, ..Limits::default() });
    let err = b.call("echo", r#"{"a": "0123456789abcdef"}"#).await.unwrap_err();
    assert_eq!(err.status(), CallStatus::InvalidArgs);
    assert_eq!(b.breach().unwrap().kind, "max_tool_args_bytes");

    let mut b = broker(Limits::default());
    let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(10_000), "]".repeat(10_000));
    let err = b.call("echo", &deep).await.unwrap_err();
    assert_eq!(err.status(), CallStatus::InvalidArgs);
    assert!(err.message().contains("deeper"), "{err}");
    assert_eq!(b.breach().unwrap().kind, "max_json_depth");
}

#[tokio::test]
async fn nan_lone_surrogates_and_non_objects_are_invalid_args() {
    let mut b = broker(Limits::default());
    for bad in [r#"{"a": NaN}"#, r#"{"a": "\udc00"}"#, "[1, 2]", "3", "not json"] {
        let err = b.call("echo", bad).await.unwrap_err();
        assert_eq!(err.status(), CallStatus::InvalidArgs, "{bad}");
    }
    assert!(b.call("echo", "[]").await.unwrap_err().message().contains("must be a JSON object, got array"));
    // Validation failures are the guest's mistakes, not budget breaches.
    assert!(b.breach().is_none());
}

#[tokio::test]
async fn an_oversized_result_fails_and_is_latched() {
    let mut b = broker(Limits { max_tool_result_bytes: 100, max_cumulative_result_bytes: 1000, ..Limits::default() });
    let err = b.call("big", r#"{"n": 200}"#).await.unwrap_err();
    assert_eq!(err.status(), CallStatus::Failed);
    assert_eq!(b.breach().unwrap().kind, "max_tool_result_bytes");
}

#[tokio::test]
async fn the_cumulative_result_cap_spans_calls() {
    let mut b = broker(Limits { max_tool_result_bytes: 100, max_cumulative_result_bytes: 250, ..Limits::default() });
    b.call("big", r#"{"n": 90}"#).await.unwrap(); // 92 bytes with quotes
    b.call("big", r#"{"n": 90}"#).await.unwrap(); // 184
    let err = b.call("big", r#"{"n": 90}"#).await.unwrap_err(); // 276 > 250
    assert_eq!(err.status(), CallStatus::BudgetExhausted);
    assert_eq!(b.breach().unwrap().kind, "max_cumulative_result_bytes");
    b.call("big", r#"{"n": 10}"#).await.unwrap(); // still room for a small one
}

#[tokio::test]
async fn a_panicking_tool_is_a_failed_call_and_the_broker_goes_on() {
    let mut b = broker(Limits::default());
    let err = b.call("boom", "{}").await.unwrap_err();
    assert_eq!(err, CallError::Failed("tool `boom` failed unexpectedly".into()));
    assert_eq!(b.call("echo", "{}").await.unwrap(), "{}");
}

#[tokio::test]
async fn a_tool_failure_reaches_the_guest_with_its_message() {
    let mut b = broker(Limits::default());
    let err = b.call("refuse", "{}").await.unwrap_err();
    assert_eq!(err, CallError::Failed("tool `refuse`: no such city".into()));
}

#[tokio::test]
async fn a_hanging_tool_times_out_at_its_own_deadline() {
    let mut b = broker(Limits::default());
    let started = Instant::now();
    let err = b.call("hang", "{}").await.unwrap_err();
    assert_eq!(err.status(), CallStatus::Timeout);
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(b.breach().unwrap().kind, "tool_timeout_ms");
}

fn strict_tools() -> Arc<Tools> {
    let mut tools = Tools::new();
    let schema = json!({"type": "object", "properties": {"limit": {"type": "integer"}}, "required": ["limit"]});
    tools
        .register(Tool::new("search", "strict args", schema, |args| async move { Ok(args) }))
        .unwrap()
        .register(
            Tool::new("users", "big payload", json!({"type": "object"}), |_| async {
                Ok(json!({"users": [{"name": "a", "password": "x", "bio": "long"}, {"name": "b"}], "next": null}))
            })
            .with_projection(["/users/*/name"])
            .unwrap(),
        )
        .unwrap();
    Arc::new(tools)
}

#[tokio::test]
async fn schema_mismatches_tell_the_model_what_to_fix() {
    let mut b = BrokerCtx::new(strict_tools(), Scope::All, Limits::default());
    let err = b.call("search", r#"{"limit": "10"}"#).await.unwrap_err();
    assert_eq!(err, CallError::InvalidArgs("tool `search`: `limit`: expected integer, got string".into()));
    assert!(b.call("search", "{}").await.unwrap_err().message().contains("required"));
    assert_eq!(b.call("search", r#"{"limit": 3}"#).await.unwrap(), r#"{"limit":3}"#);
}

#[tokio::test]
async fn projection_trims_the_result_before_the_guest_sees_it() {
    let limits = Limits { max_tool_result_bytes: 40, max_cumulative_result_bytes: 1000, ..Limits::default() };
    let mut b = BrokerCtx::new(strict_tools(), Scope::All, limits);
    // The full payload is over 40 bytes; the projection fits.
    assert_eq!(b.call("users", "{}").await.unwrap(), r#"{"users":[{"name":"a"},{"name":"b"}]}"#);
}

#[tokio::test]
async fn recorded_payloads_are_redacted() {
    let (sink, mut events) = crate::ChannelSink::new(64);
    let config = AuditConfig { record_payloads: true, ..AuditConfig::default() };
    let observers = Observers::new(Arc::new(sink), &config, Arc::default());
    let mut b = top_level_run(registry(), Limits::default(), Arc::default(), observers);
    b.call(
        "echo",
        r#"{"user": "ann", "request": {"headers": [{"Authorization": "Bearer s3cr3t"}]}, "auth": {"a": 1}}"#,
    )
    .await
    .unwrap();
    let record = &b.trail()[0];
    let expected = json!({
        "user": "ann",
        "request": {"headers": [{"Authorization": crate::REDACTED}]},
        "auth": crate::REDACTED,
    });
    assert_eq!(record.args.as_ref(), Some(&expected));
    assert_eq!(record.result.as_ref(), Some(&expected));
    assert!(matches!(events.try_recv().unwrap(), AuditEvent::ToolCallStarted { call_id: 1, .. }));
    match events.try_recv().unwrap() {
        AuditEvent::ToolCallFinished(finished) => assert_eq!(&finished, record),
        other => panic!("unexpected {other:?}"),
    }
    // Without opt-in, nothing is recorded.
    let mut plain = broker(Limits::default());
    plain.call("echo", r#"{"password": "x"}"#).await.unwrap();
    assert!(plain.trail()[0].args.is_none());
}

#[tokio::test]
async fn unknown_tool_names_share_one_metrics_label() {
    let metrics: Arc<crate::metrics::Metrics> = Arc::default();
    let observers = Observers::new(Arc::new(TracingSink), &AuditConfig::default(), Arc::clone(&metrics));
    let mut b = top_level_run(registry(), Limits::default(), Arc::default(), observers);
    for name in ["x1", "x2", &"x".repeat(1 << 20)] {
        b.call(name, "{}").await.unwrap_err();
    }
    b.call("echo", "{}").await.unwrap();
    let snapshot = metrics.snapshot();
    assert_eq!(snapshot.tool_calls(crate::UNKNOWN_TOOL_LABEL, CallStatus::Denied), 3);
    assert_eq!(snapshot.tool_calls("echo", CallStatus::Ok), 1);
    assert_eq!(snapshot.tool_calls.len(), 2);
}

#[tokio::test]
async fn calls_in_flight_across_the_run_tree_are_bounded() {
    let tree: Arc<RunTree> = Arc::default();
    // A parent call is in flight (e.g. a sub-agent tool running a nested run).
    tree.calls_in_flight.fetch_add(1, Ordering::AcqRel);
    let limits = Limits { max_concurrent_tool_calls: 1, ..Limits::default() };
    let mut nested = top_level_run(registry(), limits, Arc::clone(&tree), Observers::default());
    let err = nested.call("echo", "{}").await.unwrap_err();
    assert_eq!(err.status(), CallStatus::BudgetExhausted);
    assert_eq!(nested.breach().unwrap().kind, "max_concurrent_tool_calls");
    tree.calls_in_flight.fetch_sub(1, Ordering::AcqRel);
    nested.call("echo", "{}").await.unwrap();
    assert_eq!(tree.calls_in_flight.load(Ordering::Acquire), 0, "the slot is released after the call");
}

fn audited(tools: Arc<Tools>, config: &AuditConfig) -> (BrokerCtx, tokio::sync::mpsc::Receiver<AuditEvent>) {
    let (sink, events) = crate::ChannelSink::new(1024);
    let observers = Observers::new(Arc::new(sink), config, Arc::default());
    let broker = top_level_run(tools, Limits::default(), Arc::default(), observers);
    (broker, events)
}

/// Every audit event as JSON, for checks on what reached the record.
fn drain(events: &mut tokio::sync::mpsc::Receiver<AuditEvent>) -> Vec<String> {
    std::iter::from_fn(|| events.try_recv().ok()).map(|event| serde_json::to_string(&event).unwrap()).collect()
}

#[tokio::test]
async fn an_overlong_tool_name_is_refused_and_recorded_as_a_bounded_prefix() {
    let (mut b, mut events) = audited(registry(), &AuditConfig::default());
    // Two-byte characters: the recorded prefix must end on a character boundary.
    let huge = "é".repeat(1 << 20);
    let err = b.call(&huge, "{}").await.unwrap_err();
    assert_eq!(err.status(), CallStatus::Denied);
    assert!(err.message().len() < 256, "{} bytes", err.message().len());
    let record = &b.trail()[0];
    assert!(record.tool.len() <= 128, "the trail keeps {} bytes of the name", record.tool.len());
    assert!(record.tool.starts_with('é') && record.tool.contains("2097152 bytes"), "{}", record.tool);
    assert!(record.message.as_ref().unwrap().len() < 256);
    for event in drain(&mut events) {
        assert!(event.len() < 1024, "an audit event of {} bytes", event.len());
    }
}

#[tokio::test]
async fn a_name_as_long_as_the_longest_legal_one_is_recorded_whole() {
    let mut b = broker(Limits::default());
    let longest = "a".repeat(64);
    assert_eq!(b.call(&longest, "{}").await.unwrap_err().status(), CallStatus::Denied);
    assert_eq!(b.trail()[0].tool, longest);
    let over = "a".repeat(65);
    assert_eq!(b.call(&over, "{}").await.unwrap_err().status(), CallStatus::Denied);
    assert_ne!(b.trail()[1].tool, over, "one byte over is recorded as a prefix and a length");
    assert!(b.trail()[1].tool.contains("65 bytes"), "{}", b.trail()[1].tool);
}

fn secretive_tools() -> Arc<Tools> {
    let mut tools = Tools::new();
    let schema = json!({
        "type": "object",
        "properties": {
            "pin": {"type": "string", "maxLength": 4, "pattern": "^[0-9]+$"},
            "mode": {"enum": ["fast", "slow"]},
            "level": {"type": "integer", "maximum": 3},
            "fixed": {"const": "x"},
            "tags": {"type": "array", "uniqueItems": true, "maxItems": 1},
            "pick": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            "not_this": {"not": {"type": "string"}}
        },
        "additionalProperties": false
    });
    tools
        .register(Tool::new("login", "strict", schema, |args| async move { Ok(args) }))
        .unwrap()
        .register(Tool::new("lookup", "fails quoting its argument", json!({"type": "object"}), |args| async move {
            Err(ToolFailure::new(format!("no account for {} (Authorization: Bearer abcdef0123456789)", args["user"])))
        }))
        .unwrap();
    Arc::new(tools)
}

#[tokio::test]
async fn schema_errors_do_not_quote_argument_values() {
    let (mut b, mut events) = audited(secretive_tools(), &AuditConfig::default());
    let cases = [
        json!({"pin": "hunter2secret"}),
        json!({"mode": "hunter2secret"}),
        json!({"level": 1234567}),
        json!({"fixed": "hunter2secret"}),
        json!({"tags": ["hunter2secret", "hunter2secret"]}),
        json!({"pick": "hunter2secret"}),
        json!({"not_this": "hunter2secret"}),
    ];
    for args in cases {
        let err = b.call("login", &args.to_string()).await.unwrap_err();
        assert_eq!(err.status(), CallStatus::InvalidArgs, "{args}");
        for secret in ["hunter2", "1234567"] {
            assert!(!err.message().contains(secret), "{args}: {}", err.message());
        }
    }
    // The rule and the path are still there for the model to act on.
    let err = b.call("login", r#"{"pin": "hunter2secret"}"#).await.unwrap_err();
    assert!(err.message().contains("`pin`") && err.message().contains('4'), "{}", err.message());
    for event in drain(&mut events) {
        assert!(!event.contains("hunter2") && !event.contains("1234567"), "{event}");
    }
}

#[tokio::test]
async fn without_payload_recording_a_tool_failure_message_stays_out_of_the_record() {
    let (mut b, mut events) = audited(secretive_tools(), &AuditConfig::default());
    let err = b.call("lookup", r#"{"user": "hunter2"}"#).await.unwrap_err();
    // The guest still gets the tool's own words (the tool author vouches for them)…
    assert!(err.message().contains("hunter2"), "{err}");
    // …the record only that it failed.
    let record = &b.trail()[0];
    assert_eq!(record.status, CallStatus::Failed);
    let message = record.message.as_deref().unwrap();
    assert!(!message.contains("hunter2") && !message.contains("abcdef0123456789"), "{message}");
    assert!(message.contains("lookup"), "{message}");
    for event in drain(&mut events) {
        assert!(!event.contains("hunter2") && !event.contains("abcdef0123456789"), "{event}");
    }
}

#[tokio::test]
async fn with_payload_recording_a_tool_failure_message_is_recorded_redacted() {
    let config = AuditConfig { record_payloads: true, ..AuditConfig::default() };
    let (mut b, mut events) = audited(secretive_tools(), &config);
    b.call("lookup", r#"{"user": "ann"}"#).await.unwrap_err();
    let message = b.trail()[0].message.as_deref().unwrap();
    assert!(message.contains("ann"), "{message}");
    assert!(!message.contains("abcdef0123456789"), "{message}");
    for event in drain(&mut events) {
        assert!(!event.contains("abcdef0123456789"), "{event}");
    }
}

#[tokio::test]
async fn the_run_tree_shares_one_call_budget() {
    let limits = Limits { max_tool_calls: 3, ..Limits::default() };
    let tree = Arc::new(RunTree::new(&limits));
    let run =
        |tree: &Arc<RunTree>, limits: Limits| top_level_run(registry(), limits, Arc::clone(tree), Observers::default());
    let mut parent = run(&tree, limits.clone());
    parent.call("echo", "{}").await.unwrap();
    // A nested run with a ceiling of its own (and a wider tree budget it cannot use:
    // the tree's is its top-level run's).
    let nested_limits = Limits { max_tool_calls: 10, max_tree_tool_calls: Some(100), ..Limits::default() };
    let mut nested = run(&tree, nested_limits);
    nested.call("echo", "{}").await.unwrap();
    nested.call("echo", "{}").await.unwrap();
    let err = nested.call("echo", "{}").await.unwrap_err();
    assert_eq!(err.status(), CallStatus::BudgetExhausted);
    assert_eq!(nested.breach().unwrap().kind, "max_tree_tool_calls");
    assert_eq!(parent.call("echo", "{}").await.unwrap_err().status(), CallStatus::BudgetExhausted);
    assert_eq!(parent.breach().unwrap().kind, "max_tree_tool_calls");
    // Refused calls do not spend the budget of a fresh tree.
    let mut fresh = BrokerCtx::new(registry(), Scope::only(["echo"]), limits);
    for _ in 0..5 {
        fresh.call("nope", "{}").await.unwrap_err();
    }
    for _ in 0..3 {
        fresh.call("echo", "{}").await.unwrap();
    }
}

#[test]
fn a_tree_holds_at_most_its_share_of_nested_runs() {
    let tree: Arc<RunTree> = Arc::default();
    let first = tree.enter_nested(2).unwrap();
    let second = tree.enter_nested(2).unwrap();
    let refused = tree.enter_nested(2).unwrap_err();
    assert_eq!(refused.kind, "instance_pool");
    drop(first);
    let third = tree.enter_nested(2).unwrap();
    drop((second, third));
    assert_eq!(tree.nested_runs.load(Ordering::Acquire), 0);
}

/// Tools for overlapping calls: `meet` answers once `parties` calls of it are in flight
/// at once (and fails if that never happens), `count` notes the most calls of it in
/// flight at once, `held` never answers and says when its future is dropped.
struct Overlapping {
    tools: Arc<Tools>,
    most_at_once: Arc<AtomicU32>,
    dropped: tokio::sync::mpsc::UnboundedReceiver<()>,
}

fn overlapping(parties: usize) -> Overlapping {
    overlapping_within(parties, Duration::from_secs(20))
}

/// `overlapping` whose `meet` gives up after `patience`.
fn overlapping_within(parties: usize, patience: Duration) -> Overlapping {
    let barrier = Arc::new(tokio::sync::Barrier::new(parties));
    let (in_flight, most_at_once) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (dropped_tx, dropped) = tokio::sync::mpsc::unbounded_channel();
    let schema = json!({"type": "object"});
    let mut tools = Tools::new();
    let most = Arc::clone(&most_at_once);
    tools
        .register(Tool::new("meet", "answers when all parties are in", schema.clone(), move |_| {
            let barrier = Arc::clone(&barrier);
            async move {
                // Generous: only a broker that runs the calls one after another misses it.
                match tokio::time::timeout(patience, barrier.wait()).await {
                    Ok(_) => Ok(json!("met")),
                    Err(_) => Err(ToolFailure::new("the other calls never came")),
                }
            }
        }))
        .unwrap()
        .register(Tool::new("count", "notes calls in flight at once", schema.clone(), move |args| {
            let (in_flight, most) = (Arc::clone(&in_flight), Arc::clone(&most));
            async move {
                let now = in_flight.fetch_add(1, Ordering::AcqRel) + 1;
                most.fetch_max(now, Ordering::AcqRel);
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                in_flight.fetch_sub(1, Ordering::AcqRel);
                Ok(args)
            }
        }))
        .unwrap()
        .register(Tool::new("held", "never answers", schema, move |_| {
            let guard = DropSignal(dropped_tx.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                Ok(Value::Null)
            }
        }))
        .unwrap();
    Overlapping { tools: Arc::new(tools), most_at_once, dropped }
}

/// Says when it is dropped, with the future that holds it.
struct DropSignal(tokio::sync::mpsc::UnboundedSender<()>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// Awaits every started call; answers by id.
async fn await_all(b: &mut BrokerCtx, mut started: usize) -> Vec<(u32, Result<String, CallError>)> {
    let mut answers = Vec::new();
    while started > 0 {
        let finished = b.await_any(None).await;
        assert!(!finished.is_empty(), "await_any without a timeout returns a call");
        assert!(finished.windows(2).all(|w| w[0].0 < w[1].0), "oldest first");
        started -= finished.len();
        answers.extend(finished);
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn started_calls_run_at_the_same_time() {
    let tools = overlapping(3);
    let mut b = BrokerCtx::new(tools.tools, Scope::All, Limits::default());
    let ids: Vec<u32> = (0..3).map(|_| b.start_call("meet", "{}").unwrap()).collect();
    assert_eq!(ids, [1, 2, 3]);
    let answers = await_all(&mut b, 3).await;
    assert_eq!(answers.len(), 3);
    for (_, answer) in &answers {
        assert_eq!(answer.as_deref(), Ok(r#""met""#), "the three calls were in flight together");
    }
    let trail: Vec<u32> = b.trail().iter().map(|r| r.call_id).collect();
    assert_eq!(trail, [1, 2, 3], "the trail is in start order");
    assert!(b.trail().iter().all(|r| r.status == CallStatus::Ok));
    assert_eq!(b.tree.calls_in_flight.load(Ordering::Acquire), 0);
}

#[tokio::test]
async fn sequential_calls_do_not_meet() {
    // The counter-proof of the test above: the same tool called one at a time fails.
    let tools = overlapping_within(2, Duration::from_millis(50));
    let mut b = BrokerCtx::new(tools.tools, Scope::All, Limits::default());
    let err = b.call("meet", "{}").await.unwrap_err();
    assert_eq!(err, CallError::Failed("tool `meet`: the other calls never came".into()));
}

#[tokio::test]
async fn started_calls_past_the_concurrency_bound_wait_for_the_runs_own() {
    let tools = overlapping(1);
    let limits = Limits { max_concurrent_tool_calls: 2, ..Limits::default() };
    let mut b = BrokerCtx::new(tools.tools, Scope::All, limits);
    for i in 0..6 {
        b.start_call("count", &format!(r#"{{"i":{i}}}"#)).unwrap();
    }
    let answers = await_all(&mut b, 6).await;
    let mut values: Vec<String> = answers.into_iter().map(|(_, answer)| answer.unwrap()).collect();
    values.sort();
    assert_eq!(values.len(), 6);
    assert_eq!(tools.most_at_once.load(Ordering::Acquire), 2, "never more than the bound in flight");
    assert!(b.breach().is_none(), "waiting for a slot is not a breach");
    assert_eq!(b.trail().iter().map(|r| r.call_id).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
}

#[tokio::test]
async fn a_started_call_is_refused_when_the_tree_holds_every_slot() {
    let tree: Arc<RunTree> = Arc::default();
    // A parent call is in flight; this run has nothing running that would free a slot.
    tree.calls_in_flight.fetch_add(1, Ordering::AcqRel);
    let limits = Limits { max_concurrent_tool_calls: 1, ..Limits::default() };
    let mut nested = top_level_run(registry(), limits, Arc::clone(&tree), Observers::default());
    let err = nested.start_call("echo", "{}").unwrap_err();
    assert_eq!(err.status(), CallStatus::BudgetExhausted);
    assert_eq!(nested.breach().unwrap().kind, "max_concurrent_tool_calls");
    assert_eq!(nested.trail()[0].status, CallStatus::BudgetExhausted, "recorded as from call");
    assert!(nested.await_any(Some(Duration::ZERO)).await.is_empty());
    tree.calls_in_flight.fetch_sub(1, Ordering::AcqRel);
}

#[tokio::test]
async fn a_waiting_call_is_refused_once_the_run_has_nothing_running() {
    let tree: Arc<RunTree> = Arc::default();
    let limits = Limits { max_concurrent_tool_calls: 2, ..Limits::default() };
    let mut b = top_level_run(registry(), limits, Arc::clone(&tree), Observers::default());
    b.start_call("echo", r#"{"n":1}"#).unwrap();
    // Another run of the tree takes the other slot, then the freed one, and keeps them.
    tree.calls_in_flight.fetch_add(1, Ordering::AcqRel);
    let waiting = b.start_call("echo", r#"{"n":2}"#).unwrap();
    let first = b.await_any(None).await;
    tree.calls_in_flight.fetch_add(1, Ordering::AcqRel);
    let mut answers = first;
    while answers.len() < 2 {
        answers.extend(b.await_any(None).await);
    }
    let (_, refused) = answers.iter().find(|(id, _)| *id == waiting).unwrap();
    // Either it started before the other run took the freed slot, or it was refused.
    if let Err(err) = refused {
        assert_eq!(err.status(), CallStatus::BudgetExhausted);
        assert_eq!(b.breach().unwrap().kind, "max_concurrent_tool_calls");
    }
    tree.calls_in_flight.fetch_sub(2, Ordering::AcqRel);
    assert_eq!(tree.calls_in_flight.load(Ordering::Acquire), 0);
}

#[tokio::test]
async fn started_calls_spend_the_same_budgets() {
    let mut b = broker(Limits { max_tool_calls: 3, ..Limits::default() });
    b.call("echo", "{}").await.unwrap();
    b.start_call("echo", "{}").unwrap();
    b.start_call("echo", "{}").unwrap();
    let err = b.start_call("echo", "{}").unwrap_err();
    assert_eq!(err.status(), CallStatus::BudgetExhausted);
    assert_eq!(b.breach().unwrap().kind, "max_tool_calls");
    let err = b.start_call("nope", "{}").unwrap_err();
    assert_eq!(err.status(), CallStatus::Denied);
    assert_eq!(await_all(&mut b, 2).await.len(), 2);
    let statuses: Vec<CallStatus> = b.trail().iter().map(|r| r.status).collect();
    use CallStatus::*;
    assert_eq!(statuses, [Ok, Ok, Ok, BudgetExhausted, Denied], "in start order, refusals at their place");

    let mut b = broker(Limits { max_tool_result_bytes: 100, max_cumulative_result_bytes: 150, ..Limits::default() });
    for _ in 0..2 {
        b.start_call("big", r#"{"n": 90}"#).unwrap();
    }
    let answers = await_all(&mut b, 2).await;
    assert_eq!(answers.iter().filter(|(_, a)| a.is_ok()).count(), 1, "the cumulative cap spans started calls");
    assert_eq!(b.breach().unwrap().kind, "max_cumulative_result_bytes");
}

#[tokio::test]
async fn a_started_call_keeps_its_timeout_and_failures() {
    let mut b = broker(Limits::default());
    let hang = b.start_call("hang", "{}").unwrap();
    let boom = b.start_call("boom", "{}").unwrap();
    let mut answers = await_all(&mut b, 2).await;
    answers.sort_by_key(|(id, _)| *id);
    assert_eq!(answers[0].0, hang);
    assert_eq!(answers[0].1.as_ref().unwrap_err().status(), CallStatus::Timeout);
    assert_eq!(answers[1], (boom, Err(CallError::Failed("tool `boom` failed unexpectedly".into()))));
    assert_eq!(b.breach().unwrap().kind, "tool_timeout_ms");
}

#[tokio::test]
async fn await_any_returns_at_its_timeout_and_at_once_with_nothing_started() {
    let mut tools = overlapping(1);
    let mut b = BrokerCtx::new(Arc::clone(&tools.tools), Scope::All, Limits::default());
    assert!(b.await_any(None).await.is_empty(), "nothing started: no wait");
    b.start_call("held", "{}").unwrap();
    assert!(b.await_any(Some(Duration::from_millis(1))).await.is_empty());
    assert_eq!(b.tree.calls_in_flight.load(Ordering::Acquire), 1);
    let tree = Arc::clone(&b.tree);
    // A call the run never saw end is not in its trail, as a call dropped mid-way never was.
    assert!(b.trail().is_empty());
    // Dropping the run's broker drops the tool futures it started, and their slots.
    drop(b);
    let dropped = tokio::time::timeout(Duration::from_secs(20), tools.dropped.recv()).await;
    assert_eq!(dropped.ok().flatten(), Some(()), "the held call's future was dropped");
    assert_eq!(tree.calls_in_flight.load(Ordering::Acquire), 0);
}
