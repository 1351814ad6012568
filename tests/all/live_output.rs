//! Live output (docs/live-output.md): a run's stdout and stderr reach an [`OutputSink`]
//! while the guest writes them, in order, exactly as the outcome keeps them and never
//! past the caps; a sink that panics does not hurt the host.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio::sync::watch;
use wasmbox::{
    Limits, OutputSink, OutputStream, RunRequest, Runtime, Sandbox, Scope, Status, Tool, ToolFailure, Tools,
};

use crate::support::{javascript, python, value};

/// Records every chunk, and publishes the stdout seen so far for the `seen` tool.
struct Recorder {
    chunks: Mutex<Vec<(OutputStream, Vec<u8>)>>,
    stdout: watch::Sender<Vec<u8>>,
}

impl Recorder {
    fn new() -> Arc<Self> {
        Arc::new(Recorder { chunks: Mutex::default(), stdout: watch::Sender::new(Vec::new()) })
    }

    /// The concatenated bytes of `stream`.
    fn stream(&self, stream: OutputStream) -> String {
        let chunks = self.chunks.lock().unwrap();
        let bytes: Vec<u8> =
            chunks.iter().filter(|(s, _)| *s == stream).flat_map(|(_, bytes)| bytes.iter().copied()).collect();
        String::from_utf8(bytes).unwrap()
    }

    /// The streams in the order their chunks came, adjacent repeats merged.
    fn order(&self) -> Vec<OutputStream> {
        let mut order: Vec<OutputStream> = Vec::new();
        for (stream, _) in self.chunks.lock().unwrap().iter() {
            if order.last() != Some(stream) {
                order.push(*stream);
            }
        }
        order
    }
}

impl OutputSink for Recorder {
    fn write(&self, stream: OutputStream, bytes: &[u8]) {
        self.chunks.lock().unwrap().push((stream, bytes.to_vec()));
        if stream == OutputStream::Stdout {
            self.stdout.send_modify(|seen| seen.extend_from_slice(bytes));
        }
    }
}

/// A sandbox whose tool `seen(text)` returns once the recorder's stdout holds `text`:
/// a guest that prints and then calls it gets `true` only if the print reached the sink
/// while the run was still going (else the call times out and the guest sees an error).
fn sandbox_seeing(runtime: Runtime, recorder: &Arc<Recorder>, limits: Limits) -> Sandbox {
    let seen = recorder.stdout.subscribe();
    let mut tools = Tools::new();
    tools
        .register(Tool::new("seen", "Waits until the text was printed live", json!({"type": "object"}), move |args| {
            let mut seen = seen.clone();
            async move {
                let text = args["text"].as_str().unwrap_or_default().as_bytes().to_vec();
                let found = seen.wait_for(|printed| printed.windows(text.len()).any(|w| w == text)).await;
                found.map(|_| json!(true)).map_err(|_| ToolFailure::new("the recorder is gone"))
            }
        }))
        .unwrap();
    Sandbox::new(runtime, tools).scope(Scope::All).limits(limits)
}

fn limits() -> Limits {
    // A print that never reached the sink would make `seen` wait this long, then fail.
    Limits { tool_timeout_ms: 20_000, timeout_ms: 30_000, ..Limits::default() }
}

async fn run_live(sandbox: &Sandbox, recorder: &Arc<Recorder>, code: &str) -> wasmbox::Outcome {
    let sink: Arc<dyn OutputSink> = Arc::clone(recorder) as Arc<dyn OutputSink>;
    sandbox.run_with(RunRequest::new(code).output_sink(sink)).await
}

fn assert_sink_matches_outcome(recorder: &Recorder, outcome: &wasmbox::Outcome) {
    assert_eq!(recorder.stream(OutputStream::Stdout), outcome.stdout.text);
    assert_eq!(recorder.stream(OutputStream::Stderr), outcome.stderr.text);
}

#[tokio::test]
async fn python_output_arrives_while_the_run_goes_on_in_order() {
    let recorder = Recorder::new();
    let sandbox = sandbox_seeing(python(), &recorder, limits());
    let code = "import sys\n\
                print('first')\n\
                print('oops', file=sys.stderr)\n\
                live = tools.seen(text='first\\n')\n\
                print('second: é')\n\
                live";
    let outcome = run_live(&sandbox, &recorder, code).await;
    assert_eq!(value(&outcome), json!(true), "`first` reached the sink before the run ended");
    assert_eq!(outcome.stdout.text, "first\nsecond: é\n");
    assert_eq!(outcome.stderr.text, "oops\n");
    assert_sink_matches_outcome(&recorder, &outcome);
    assert_eq!(recorder.order(), [OutputStream::Stdout, OutputStream::Stderr, OutputStream::Stdout]);
}

#[tokio::test]
async fn javascript_output_arrives_while_the_run_goes_on_in_order() {
    let recorder = Recorder::new();
    let sandbox = sandbox_seeing(javascript(), &recorder, limits());
    let code = "console.log('first');\n\
                console.error('oops');\n\
                const live = await tools.seen({text: 'first\\n'});\n\
                console.log('second: é');\n\
                return live;";
    let outcome = run_live(&sandbox, &recorder, code).await;
    assert_eq!(value(&outcome), json!(true), "`first` reached the sink before the run ended");
    assert_eq!(outcome.stdout.text, "first\nsecond: é\n");
    assert_eq!(outcome.stderr.text, "oops\n");
    assert_sink_matches_outcome(&recorder, &outcome);
    assert_eq!(recorder.order(), [OutputStream::Stdout, OutputStream::Stderr, OutputStream::Stdout]);
}

/// The caps hold for the sink: it gets what the outcome keeps, up to the cap, and the
/// run ends `output_limit` as without a sink.
#[tokio::test]
async fn the_sink_gets_no_more_than_the_caps() {
    let capped = Limits { max_stdout_bytes: 100, max_stderr_bytes: 10, ..limits() };
    let py_stdout_flood = "import sys\nprint('e' * 5, file=sys.stderr)\nfor i in range(1000):\n    print('x' * 9)";
    let py_stderr_flood = "import sys\nprint('o' * 5)\nprint('e' * 30, file=sys.stderr)";
    let js_stdout_flood = "console.error('e'.repeat(5));\nfor (let i = 0; i < 1000; i++) console.log('x'.repeat(9));";
    let js_stderr_flood = "console.log('o'.repeat(5));\nconsole.error('e'.repeat(30));";
    // (runtime, code, the bytes of stdout and of stderr the sink gets)
    for (runtime, code, stdout_bytes, stderr_bytes) in [
        (python(), py_stdout_flood, 100, 6),
        (python(), py_stderr_flood, 6, 10),
        (javascript(), js_stdout_flood, 100, 6),
        (javascript(), js_stderr_flood, 6, 10),
    ] {
        let recorder = Recorder::new();
        let outcome = run_live(&sandbox_seeing(runtime, &recorder, capped.clone()), &recorder, code).await;
        assert_eq!(outcome.status, Status::OutputLimit, "{code}: {outcome:?}");
        assert_sink_matches_outcome(&recorder, &outcome);
        assert_eq!(recorder.stream(OutputStream::Stdout).len(), stdout_bytes, "{code}");
        assert_eq!(recorder.stream(OutputStream::Stderr).len(), stderr_bytes, "{code}");
    }
}

/// A sink that panics is not called again; the run, its outcome and the next run are
/// as without it.
#[tokio::test]
async fn a_panicking_sink_does_not_hurt_the_host() {
    let calls = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&calls);
    let sink: Arc<dyn OutputSink> = Arc::new(move |_: OutputStream, _: &[u8]| {
        *counted.lock().unwrap() += 1;
        panic!("a sink that panics (expected by this test)");
    });
    for (runtime, code) in [
        (python(), "print('a')\nprint('b')\n'done'"),
        (javascript(), "console.log('a');\nconsole.log('b');\nreturn 'done';"),
    ] {
        *calls.lock().unwrap() = 0;
        let sandbox = Sandbox::new(runtime, Tools::new());
        let outcome = sandbox.run_with(RunRequest::new(code).output_sink(Arc::clone(&sink))).await;
        assert_eq!(value(&outcome), json!("done"));
        assert_eq!(outcome.stdout.text, "a\nb\n");
        assert_eq!(*calls.lock().unwrap(), 1, "not called again after its panic");
        assert_eq!(value(&sandbox.run(code).await), json!("done"), "the next run is unaffected");
    }
}

/// A session step's output reaches the step's sink while the step runs, and each
/// step's sink gets that step's output only (both languages); a step without a sink
/// passes nothing on.
#[tokio::test]
async fn session_steps_have_live_output_of_their_own() {
    for (runtime, first, between, second) in [
        (python(), "print('one')\nx = tools.seen(text='one\\n')\nx", "print('unseen')", "print('two')\nx"),
        (
            javascript(),
            "console.log('one');\nlet x = await tools.seen({text: 'one\\n'});\nreturn x;",
            "console.log('unseen');",
            "console.log('two');\nreturn x;",
        ),
    ] {
        let recorder = Recorder::new();
        let session = sandbox_seeing(runtime, &recorder, limits())
            .session(wasmbox::SessionConfig::default())
            .await
            .expect("a session");
        let sink: Arc<dyn OutputSink> = Arc::clone(&recorder) as Arc<dyn OutputSink>;
        let outcome = session.run_with(RunRequest::new(first).output_sink(sink)).await;
        assert_eq!(value(&outcome), json!(true), "`one` reached the sink during the step");
        assert_sink_matches_outcome(&recorder, &outcome);

        assert_eq!(session.run(between).await.status, Status::Ok);
        let later = Recorder::new();
        let sink: Arc<dyn OutputSink> = Arc::clone(&later) as Arc<dyn OutputSink>;
        let outcome = session.run_with(RunRequest::new(second).output_sink(sink)).await;
        assert_eq!(value(&outcome), json!(true), "state persisted");
        assert_eq!(later.stream(OutputStream::Stdout), "two\n");
        assert_sink_matches_outcome(&later, &outcome);
        assert_eq!(recorder.stream(OutputStream::Stdout), "one\n", "the first sink got nothing after its step");
    }
}
