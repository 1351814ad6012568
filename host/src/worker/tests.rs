//! The parent's side of the protocol against fake workers over in-memory pipes: what a
//! hostile or broken worker can and cannot get out of the parent.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

use super::process::{drive, Fault, WorkerFrames};
use super::protocol::{
    encode, max_reply_frame_bytes, read_frame, write_frame, FromWorker, RunRequest, ToWorker, PROTOCOL_VERSION,
};
use super::{serve, WorkerConfig, WorkerError};
use crate::broker::{BrokerCtx, CallError, Scope, Tool, Tools};
use crate::cancel::CancelToken;
use crate::import_check::ImportPolicy;
use crate::limits::Limits;
use crate::live_output::{LiveOutput, Message, OutputStream};
use crate::outcome::{ErrorDetail, Outcome, Status};
use crate::termination::vouch_for;

/// The parent's ends of a pipe pair.
struct Parent {
    frames: WorkerFrames,
    to_worker: DuplexStream,
}

/// The fake worker's ends.
struct Fake {
    worker_in: DuplexStream,
    worker_out: DuplexStream,
}

fn pipes(limits: &Limits) -> (Parent, Fake) {
    let (to_worker, worker_in) = tokio::io::duplex(1 << 16);
    let (worker_out, from_worker) = tokio::io::duplex(1 << 16);
    let frames = WorkerFrames::spawn(from_worker);
    frames.expect(max_reply_frame_bytes(limits));
    (Parent { frames, to_worker }, Fake { worker_in, worker_out })
}

fn request(limits: &Limits) -> RunRequest {
    RunRequest {
        guest: "/guests/python.wasm".into(),
        policy: ImportPolicy::AllowInertWasi,
        code: "1".into(),
        input_json: "null".into(),
        limits: limits.clone(),
        tools: Vec::new(),
        files: Default::default(),
        live_output: false,
    }
}

/// Tools `public` and `secret`; the run may call only `public`. Counts secret's calls.
fn broker(limits: &Limits) -> (BrokerCtx, Arc<AtomicU32>) {
    let secret_calls = Arc::new(AtomicU32::new(0));
    let mut tools = Tools::new();
    tools.register(Tool::new("public", "", json!({"type": "object"}), |_| async { Ok(json!("hello")) })).unwrap();
    let counter = Arc::clone(&secret_calls);
    tools
        .register(Tool::new("secret", "", json!({"type": "object"}), move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!("the crown jewels")) }
        }))
        .unwrap();
    (BrokerCtx::new(Arc::new(tools), Scope::only(["public"]), limits.clone()), secret_calls)
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

async fn expect_run(worker_in: &mut DuplexStream) {
    let frame = read_frame::<_, ToWorker>(worker_in, u32::MAX).await.unwrap();
    assert!(matches!(frame, Some(ToWorker::Run(_))), "{frame:?}");
}

async fn forge_call(p: &mut Fake, call_id: u32, name: &str) -> Result<String, CallError> {
    let call = FromWorker::ToolCall { call_id, name: name.into(), args_json: "{}".into() };
    write_frame(&mut p.worker_out, &call).await.unwrap();
    match read_frame::<_, ToWorker>(&mut p.worker_in, u32::MAX).await.unwrap() {
        Some(ToWorker::ToolResult { call_id: id, result }) if id == call_id => result,
        other => panic!("expected the result of call {call_id}, got {other:?}"),
    }
}

fn ok_outcome() -> FromWorker {
    let mut outcome = Outcome::early(Status::Ok, ErrorDetail::new("", ""));
    outcome.error = None;
    outcome.value = Some(json!(1));
    FromWorker::Outcome { outcome: Box::new(outcome) }
}

#[tokio::test]
async fn a_forged_call_outside_the_scope_is_refused_by_the_parent() {
    let limits = Limits { max_tool_calls: 2, ..Limits::default() };
    let (mut broker, secret_calls) = broker(&limits);
    let (mut p, mut w) = pipes(&limits);
    let cancel = CancelToken::new();
    let parent = drive(&mut p.frames.received, &mut p.to_worker, request(&limits), &mut broker, soon(), &cancel, None);
    let fake_worker = async {
        expect_run(&mut w.worker_in).await;
        let denied = forge_call(&mut w, 1, "secret").await;
        assert!(matches!(denied, Err(CallError::Denied(_))), "{denied:?}");
        assert_eq!(forge_call(&mut w, 2, "public").await, Ok("\"hello\"".into()));
        assert_eq!(forge_call(&mut w, 3, "public").await, Ok("\"hello\"".into()));
        let over = forge_call(&mut w, 4, "public").await;
        assert!(matches!(over, Err(CallError::BudgetExhausted(_))), "the parent counts calls: {over:?}");
        write_frame(&mut w.worker_out, &ok_outcome()).await.unwrap();
    };
    let (outcome, ()) = tokio::join!(parent, fake_worker);
    assert_eq!(secret_calls.load(Ordering::SeqCst), 0, "the secret tool never ran");
    let (trail, breach) = broker.into_report();
    assert_eq!(trail.len(), 4, "the parent's trail has every forged call");
    let outcome = vouch_for(outcome.unwrap(), &limits, breach);
    assert_eq!(outcome.status, Status::ToolLimit, "the worker's `ok` does not hide the breach");
    assert_eq!(outcome.error.unwrap().kind, "max_tool_calls");
}

/// A worker's started calls go through the parent's broker as an in-process guest's do:
/// refused out of scope, running at the same time (a barrier of two is met), their
/// answers collected by `await_any`, the trail in start order.
#[tokio::test]
async fn a_worker_s_started_calls_overlap_in_the_parent_s_broker() {
    let limits = Limits::default();
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut tools = Tools::new();
    tools
        .register(Tool::new("meet", "", json!({"type": "object"}), move |_| {
            let barrier = Arc::clone(&barrier);
            async move {
                match tokio::time::timeout(Duration::from_secs(20), barrier.wait()).await {
                    Ok(_) => Ok(json!("met")),
                    Err(_) => Err(crate::ToolFailure::new("the other call never came")),
                }
            }
        }))
        .unwrap();
    let mut broker = BrokerCtx::new(Arc::new(tools), Scope::only(["meet"]), limits.clone());
    let (mut p, mut w) = pipes(&limits);
    let cancel = CancelToken::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let parent =
        drive(&mut p.frames.received, &mut p.to_worker, request(&limits), &mut broker, deadline, &cancel, None);
    let fake_worker = async {
        expect_run(&mut w.worker_in).await;
        let mut ids = Vec::new();
        for (request, name) in [(1, "meet"), (2, "secret"), (3, "meet")] {
            let start = FromWorker::StartCall { request, name: name.into(), args_json: "{}".into() };
            write_frame(&mut w.worker_out, &start).await.unwrap();
            match read_frame::<_, ToWorker>(&mut w.worker_in, u32::MAX).await.unwrap() {
                Some(ToWorker::CallStarted { request: r, result }) if r == request => ids.push(result),
                other => panic!("expected call_started {request}, got {other:?}"),
            }
        }
        assert!(matches!(ids[1], Err(CallError::Denied(_))), "{:?}", ids[1]);
        let mut finished = Vec::new();
        for request in 4.. {
            write_frame(&mut w.worker_out, &FromWorker::AwaitAny { request, timeout_ms: None }).await.unwrap();
            match read_frame::<_, ToWorker>(&mut w.worker_in, u32::MAX).await.unwrap() {
                Some(ToWorker::CallsEnded { request: r, finished: f }) if r == request => finished.extend(f),
                other => panic!("expected calls_ended {request}, got {other:?}"),
            }
            if finished.len() == 2 {
                break;
            }
        }
        finished.sort_by_key(|(id, _)| *id);
        let expected = vec![
            (ids[0].clone().unwrap(), Ok("\"met\"".to_owned())),
            (ids[2].clone().unwrap(), Ok("\"met\"".to_owned())),
        ];
        assert_eq!(finished, expected, "both calls were in flight at once");
        write_frame(&mut w.worker_out, &ok_outcome()).await.unwrap();
    };
    let (outcome, ()) = tokio::join!(parent, fake_worker);
    assert_eq!(outcome.unwrap().status, Status::Ok);
    let (trail, breach) = broker.into_report();
    assert_eq!(trail.iter().map(|r| r.call_id).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(breach.is_none());
}

async fn fault_after_run(send: Vec<u8>, limits: Limits) -> Fault {
    let (mut broker, _) = broker(&limits);
    let (mut p, mut w) = pipes(&limits);
    let cancel = CancelToken::new();
    let parent = drive(&mut p.frames.received, &mut p.to_worker, request(&limits), &mut broker, soon(), &cancel, None);
    let fake_worker = async {
        expect_run(&mut w.worker_in).await;
        w.worker_out.write_all(&send).await.unwrap();
        w.worker_out.shutdown().await.unwrap();
        // Keep the parent's side open, so only the frame (or its end) decides.
        w.worker_in
    };
    let (result, _keep) = tokio::join!(parent, fake_worker);
    result.unwrap_err()
}

fn output(stream: OutputStream, bytes: &[u8]) -> FromWorker {
    use base64::Engine as _;
    FromWorker::Output { stream, base64: base64::engine::general_purpose::STANDARD.encode(bytes) }
}

/// A worker's `output` frames reach the run's live output, in order, also while a tool
/// call waits; the parent holds them to the run's caps whatever the worker sends, and
/// a frame that is not base64 is a crash.
#[tokio::test]
async fn a_worker_s_live_output_is_passed_on_within_the_run_s_caps() {
    let limits = Limits { max_stdout_bytes: 5, max_stderr_bytes: 2, ..Limits::default() };
    let (mut broker, _) = broker(&limits);
    let (mut p, mut w) = pipes(&limits);
    let (live, mut chunks) = LiveOutput::channel(&limits);
    let cancel = CancelToken::new();
    let asking = RunRequest { live_output: true, ..request(&limits) };
    let parent = drive(&mut p.frames.received, &mut p.to_worker, asking, &mut broker, soon(), &cancel, Some(&live));
    let fake_worker = async {
        expect_run(&mut w.worker_in).await;
        write_frame(&mut w.worker_out, &output(OutputStream::Stdout, b"abc")).await.unwrap();
        let call = FromWorker::ToolCall { call_id: 1, name: "public".into(), args_json: "{}".into() };
        write_frame(&mut w.worker_out, &call).await.unwrap();
        // Written before the call, arriving while the parent answers it.
        write_frame(&mut w.worker_out, &output(OutputStream::Stderr, b"e")).await.unwrap();
        let answer = read_frame::<_, ToWorker>(&mut w.worker_in, u32::MAX).await.unwrap();
        assert!(matches!(answer, Some(ToWorker::ToolResult { call_id: 1, result: Ok(_) })), "{answer:?}");
        // Past both caps: an honest worker never sends this much.
        write_frame(&mut w.worker_out, &output(OutputStream::Stdout, b"defgh")).await.unwrap();
        write_frame(&mut w.worker_out, &output(OutputStream::Stderr, b"rrrr")).await.unwrap();
        write_frame(&mut w.worker_out, &ok_outcome()).await.unwrap();
    };
    let (outcome, ()) = tokio::join!(parent, fake_worker);
    assert_eq!(outcome.unwrap().status, Status::Ok);
    let mut got = Vec::new();
    while let Ok(Message::Chunk(stream, bytes)) = chunks.try_recv() {
        got.push((stream, String::from_utf8(bytes).unwrap()));
    }
    let expected = [
        (OutputStream::Stdout, "abc"),
        (OutputStream::Stderr, "e"),
        (OutputStream::Stdout, "de"),
        (OutputStream::Stderr, "r"),
    ];
    assert_eq!(got, expected.map(|(stream, text)| (stream, text.to_owned())), "the caps of 5 and 2 hold");

    let (mut p, mut w) = pipes(&limits);
    let asking = RunRequest { live_output: true, ..request(&limits) };
    let parent = drive(&mut p.frames.received, &mut p.to_worker, asking, &mut broker, soon(), &cancel, Some(&live));
    let fake_worker = async {
        expect_run(&mut w.worker_in).await;
        let bad = FromWorker::Output { stream: OutputStream::Stdout, base64: "not base64!".into() };
        write_frame(&mut w.worker_out, &bad).await.unwrap();
        w
    };
    let (fault, _keep) = tokio::join!(parent, fake_worker);
    assert!(matches!(fault, Err(Fault::Crashed(_))), "{fault:?}");
}

#[tokio::test]
async fn garbage_oversized_truncated_and_silent_ends_are_crashes() {
    let limits = Limits { max_stdout_bytes: 1024, max_stderr_bytes: 1024, max_result_bytes: 1024, ..Limits::default() };
    let cap = max_reply_frame_bytes(&limits);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"\x00\x00\x00\x05hello".to_vec()),
        ("oversized", (cap + 1).to_be_bytes().to_vec()),
        ("truncated", encode(&ok_outcome()).unwrap()[..7].to_vec()),
        ("unknown message", {
            let body = br#"{"type": "exfiltrate"}"#;
            [(body.len() as u32).to_be_bytes().as_slice(), body].concat()
        }),
        ("exit", Vec::new()),
        ("second hello", encode(&FromWorker::Hello { version: PROTOCOL_VERSION, pid: 1 }).unwrap()),
        ("fatal", encode(&FromWorker::Fatal { message: "nope".into() }).unwrap()),
        ("output the run did not ask for", encode(&output(OutputStream::Stdout, b"hi")).unwrap()),
    ];
    for (case, bytes) in cases {
        let fault = fault_after_run(bytes, limits.clone()).await;
        assert!(matches!(fault, Fault::Crashed(_)), "{case}: {fault:?}");
    }
}

#[tokio::test]
async fn a_silent_worker_times_out_and_a_cancelled_one_is_given_a_grace_period() {
    let limits = Limits::default();
    let (mut broker, _) = broker(&limits);
    let (mut p, _w) = pipes(&limits);
    let deadline = Instant::now() + Duration::from_millis(100);
    let cancel = CancelToken::new();
    let fault =
        drive(&mut p.frames.received, &mut p.to_worker, request(&limits), &mut broker, deadline, &cancel, None).await;
    assert!(matches!(fault, Err(Fault::Timeout)), "{fault:?}");

    // A worker that honours `cancel` keeps its outcome (and can be reused) ...
    let (mut p, mut w) = pipes(&limits);
    let cancel = CancelToken::new();
    let parent = drive(&mut p.frames.received, &mut p.to_worker, request(&limits), &mut broker, soon(), &cancel, None);
    let fake_worker = async {
        expect_run(&mut w.worker_in).await;
        cancel.cancel();
        let frame = read_frame::<_, ToWorker>(&mut w.worker_in, u32::MAX).await.unwrap();
        assert_eq!(frame, Some(ToWorker::Cancel));
        let outcome = Outcome::early(Status::Cancelled, ErrorDetail::new("cancelled", "stopped"));
        write_frame(&mut w.worker_out, &FromWorker::Outcome { outcome: Box::new(outcome) }).await.unwrap();
    };
    let (outcome, ()) = tokio::join!(parent, fake_worker);
    assert_eq!(outcome.unwrap().status, Status::Cancelled);

    // ... one that ignores it is given up on after the grace period.
    let (mut p, _w) = pipes(&limits);
    let cancel = CancelToken::new();
    cancel.cancel();
    let started = std::time::Instant::now();
    let fault =
        drive(&mut p.frames.received, &mut p.to_worker, request(&limits), &mut broker, soon(), &cancel, None).await;
    assert!(matches!(fault, Err(Fault::Cancelled)), "{fault:?}");
    assert!(started.elapsed() < Duration::from_secs(4), "the grace period, not the deadline");
}

#[test]
fn the_parent_caps_what_a_worker_reports() {
    let limits = Limits { max_stdout_bytes: 8, max_result_bytes: 16, ..Limits::default() };
    let mut outcome = Outcome::early(Status::Ok, ErrorDetail::new("", ""));
    outcome.stdout.text = "ééééééééééé".into();
    outcome.value = Some(json!("x".repeat(100)));
    let outcome = vouch_for(outcome, &limits, None);
    assert_eq!((outcome.stdout.text.as_str(), outcome.stdout.truncated), ("éééé", true));
    assert_eq!(outcome.status, Status::OutputLimit);
    assert_eq!(outcome.value, None);

    // A worker's `error` with a value keeps no value; its `ok` keeps no error.
    let mut outcome = Outcome::early(Status::Error, ErrorDetail::new("ValueError", "x"));
    outcome.value = Some(json!(1));
    assert_eq!(vouch_for(outcome, &limits, None).value, None);
    let mut outcome = Outcome::early(Status::Ok, ErrorDetail::new("ValueError", "x"));
    outcome.value = Some(json!(1));
    assert_eq!(vouch_for(outcome, &limits, None).error, None);
}

async fn worker_reply(frames: Vec<ToWorker>) -> (Vec<FromWorker>, Result<(), WorkerError>) {
    let (mut parent_out, worker_in) = tokio::io::duplex(1 << 16);
    let (worker_out, mut parent_in) = tokio::io::duplex(1 << 16);
    let config = WorkerConfig {
        cache_dir: std::env::temp_dir().join("wasmbox-worker-test-cache"),
        epoch_tick_ms: 10,
        fuel_metering: false,
        keep_resident_bytes: 0,
        max_data_bytes: None,
    };
    let worker = tokio::spawn(serve(config, worker_in, worker_out));
    for frame in &frames {
        write_frame(&mut parent_out, frame).await.unwrap();
    }
    drop(parent_out);
    let result = worker.await.unwrap();
    let mut replies = Vec::new();
    while let Some(frame) = read_frame::<_, FromWorker>(&mut parent_in, u32::MAX).await.unwrap() {
        replies.push(frame);
    }
    (replies, result)
}

#[tokio::test]
async fn the_worker_checks_the_handshake() {
    let (replies, result) = worker_reply(vec![ToWorker::Hello { version: PROTOCOL_VERSION + 1 }]).await;
    assert!(matches!(&replies[..], [FromWorker::Fatal { message }] if message.contains("version")), "{replies:?}");
    assert!(matches!(result, Err(WorkerError::Protocol(_))));

    let (replies, result) = worker_reply(vec![ToWorker::Cancel]).await;
    assert!(matches!(&replies[..], [FromWorker::Fatal { .. }]), "{replies:?}");
    assert!(result.is_err());

    let (replies, result) = worker_reply(vec![ToWorker::Hello { version: PROTOCOL_VERSION }, ToWorker::Shutdown]).await;
    assert!(matches!(&replies[..], [FromWorker::Hello { version: PROTOCOL_VERSION, .. }]), "{replies:?}");
    result.unwrap();
}

#[tokio::test]
async fn a_worker_reports_an_unloadable_guest_and_a_stray_result_ends_it() {
    let mut run = request(&Limits::default());
    run.guest = "/nonexistent/guest.wasm".into();
    let frames = vec![ToWorker::Hello { version: PROTOCOL_VERSION }, ToWorker::Run(run)];
    let (replies, result) = worker_reply(frames).await;
    match &replies[..] {
        [FromWorker::Hello { .. }, FromWorker::Outcome { outcome }] => {
            assert_eq!(outcome.status, Status::Internal);
            assert_eq!(outcome.error.as_ref().unwrap().kind, "worker_guest");
        }
        other => panic!("{other:?}"),
    }
    result.unwrap();

    let stray = ToWorker::ToolResult { call_id: 7, result: Ok("1".into()) };
    let (_, result) = worker_reply(vec![ToWorker::Hello { version: PROTOCOL_VERSION }, stray]).await;
    assert!(matches!(result, Err(WorkerError::Protocol(m)) if m.contains("unknown tool call 7")));
}

/// Each run's frames are held to that run's cap from the first one on, whatever the cap
/// of the exchange before it (the handshake's, or a previous run's smaller or larger).
#[tokio::test]
async fn every_run_reads_its_frames_under_its_own_cap() {
    let (mut to_worker, mut worker_in) = tokio::io::duplex(1 << 16);
    let (mut worker_out, from_worker) = tokio::io::duplex(1 << 20);
    let mut frames = WorkerFrames::spawn(from_worker);
    let small = Limits {
        max_stdout_bytes: 16,
        max_stderr_bytes: 16,
        max_result_bytes: 16,
        max_fs_bytes: 16,
        ..Limits::default()
    };
    let large = Limits::default();
    let outcome_printing = |bytes: usize| {
        let mut outcome = Outcome::early(Status::Ok, ErrorDetail::new("", ""));
        outcome.error = None;
        outcome.stdout.text = "x".repeat(bytes);
        FromWorker::Outcome { outcome: Box::new(outcome) }
    };
    // The handshake's cap is tiny; the first run's must already apply to its first frame.
    frames.expect(4 << 10);
    write_frame(&mut worker_out, &FromWorker::Hello { version: PROTOCOL_VERSION, pid: 1 }).await.unwrap();
    assert!(matches!(frames.received.recv().await, Some(Ok(FromWorker::Hello { .. }))));
    // (limits, stdout the worker reports, whether the frame fits the run's cap)
    // The small run's cap is ~1.3 MB (its caps, the error text, JSON escaping, slack).
    let runs = [(&large, 3_000_000, true), (&small, 8, true), (&large, 3_000_000, true), (&small, 3_000_000, false)];
    for (limits, printed, fits) in runs {
        let (mut broker, _) = broker(limits);
        frames.expect(max_reply_frame_bytes(limits));
        let cancel = CancelToken::new();
        let parent = drive(&mut frames.received, &mut to_worker, request(limits), &mut broker, soon(), &cancel, None);
        let fake_worker = async {
            expect_run(&mut worker_in).await;
            // A refused frame is never read to its end: the write cannot finish then.
            let frame = outcome_printing(printed);
            let _ = tokio::time::timeout(Duration::from_secs(2), write_frame(&mut worker_out, &frame)).await;
        };
        let (outcome, ()) = tokio::join!(parent, fake_worker);
        match outcome {
            Ok(outcome) => {
                assert!(fits, "a frame over the cap was taken ({printed} bytes printed)");
                assert_eq!(outcome.stdout.text.len(), printed);
            }
            Err(Fault::Crashed(message)) => assert!(!fits && message.contains("over the cap"), "{message}"),
            Err(other) => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_worker_command_line_round_trips_and_refuses_what_it_does_not_know() {
    let config = WorkerConfig {
        cache_dir: "/cache dir/wasmbox".into(),
        epoch_tick_ms: 3,
        fuel_metering: false,
        keep_resident_bytes: 0,
        max_data_bytes: None,
    };
    assert_eq!(WorkerConfig::from_args(config.to_args()).unwrap(), config);
    let metering = WorkerConfig { fuel_metering: true, ..config.clone() };
    assert_eq!(WorkerConfig::from_args(metering.to_args()).unwrap(), metering);
    let capped = WorkerConfig { max_data_bytes: Some(640 << 20), ..config.clone() };
    assert_eq!(WorkerConfig::from_args(capped.to_args()).unwrap(), capped);
    let refused = |args: &[&str]| WorkerConfig::from_args(args.iter().map(std::ffi::OsString::from)).unwrap_err();
    for (args, says) in [
        (&["--cache-dir", "/c", "--epoch-tick-ms", "3"][..], "--keep-resident-bytes is missing"),
        (&["--cache-dir", "/c", "--cache-dir", "/d"], "given twice"),
        (&["--epoch-tick-ms", "soon"], "takes a number"),
        (&["--cache-dir"], "needs a value"),
        (&["--network", "on"], "unknown option --network"),
    ] {
        let err = refused(args).to_string();
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
