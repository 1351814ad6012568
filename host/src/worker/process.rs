//! The parent's side of one worker process: launching it (under its OS wrapper), the
//! handshake, driving one run over its pipes, and killing it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::protocol::{read_frame, write_frame, FrameError, FromWorker, RunRequest, ToWorker, PROTOCOL_VERSION};
use crate::broker::BrokerCtx;
use crate::cancel::CancelToken;
use crate::isolation::{self, LaunchPlan, ProcessGuard};
use crate::live_output::{LiveOutput, OutputStream};
use crate::outcome::Outcome;

/// How long a worker may take to start and answer `hello` (a container may need a while).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a cancelled worker gets to report its run `cancelled` before it is killed.
const CANCEL_GRACE: Duration = Duration::from_millis(500);
/// How long a retired worker gets to exit after `shutdown` before it is killed.
const RETIRE_GRACE: Duration = Duration::from_secs(2);
/// How much of a worker's stderr is kept to explain a crash.
const STDERR_TAIL_BYTES: usize = 4 << 10;
/// The cap on frames before a run sets its own (`hello` is tiny).
const HANDSHAKE_FRAME_BYTES: u32 = 4 << 10;

/// Why a run in a worker did not produce an outcome.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The worker could not be started.
    Launch(String),
    /// The worker died, broke the protocol, or sent garbage.
    Crashed(String),
    /// The worker did not answer before the run's deadline.
    Timeout,
    /// The caller cancelled, and the worker did not stop within the grace period.
    Cancelled,
}

/// One running worker process.
pub(crate) struct WorkerProcess {
    child: Child,
    stdin: ChildStdin,
    frames: WorkerFrames,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    /// Kills what killing the process does not (a container).
    kill_command: Option<Command>,
    // Dropped with the process: on Windows it closes the Job Object, killing the tree.
    _guard: ProcessGuard,
}

impl WorkerProcess {
    /// Starts the worker `plan` describes and completes the handshake.
    pub(crate) async fn launch(plan: LaunchPlan, memory_limit_bytes: u64) -> Result<Self, Fault> {
        let mut command = plan.command();
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child =
            command.spawn().map_err(|e| Fault::Launch(format!("could not start {}: {e}", plan.program.display())))?;
        let guard = isolation::contain(&child, memory_limit_bytes)
            .map_err(|e| Fault::Launch(format!("could not contain the worker process: {e}")))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Fault::Launch("the worker's pipes were not created".into()));
        };
        let stderr_tail = Arc::default();
        tokio::spawn(keep_tail(stderr, Arc::clone(&stderr_tail)));
        let mut worker = WorkerProcess {
            child,
            stdin,
            frames: WorkerFrames::spawn(stdout),
            stderr_tail,
            kill_command: plan.kill_command(),
            _guard: guard,
        };
        match tokio::time::timeout(STARTUP_TIMEOUT, worker.handshake()).await {
            Ok(Ok(())) => Ok(worker),
            Ok(Err(fault)) => Err(worker.fail(fault).await),
            Err(_) => {
                let fault = Fault::Launch(format!("the worker did not start within {} s", STARTUP_TIMEOUT.as_secs()));
                Err(worker.fail(fault).await)
            }
        }
    }

    async fn handshake(&mut self) -> Result<(), Fault> {
        self.frames.expect(HANDSHAKE_FRAME_BYTES);
        write_frame(&mut self.stdin, &ToWorker::Hello { version: PROTOCOL_VERSION })
            .await
            .map_err(|e| Fault::Launch(format!("sending hello: {e}")))?;
        match self.frames.received.recv().await {
            Some(Ok(FromWorker::Hello { version, .. })) if version == PROTOCOL_VERSION => Ok(()),
            Some(Ok(FromWorker::Hello { version, .. })) => Err(Fault::Launch(format!(
                "the worker speaks protocol version {version}, this parent {PROTOCOL_VERSION}"
            ))),
            Some(Ok(FromWorker::Fatal { message })) => Err(Fault::Launch(format!("the worker refused: {message}"))),
            Some(Ok(other)) => Err(Fault::Launch(format!("expected hello from the worker, got {}", kind(&other)))),
            Some(Err(err)) => Err(Fault::Launch(format!("the worker's hello: {err}"))),
            None => Err(Fault::Launch("the worker exited during start-up".into())),
        }
    }

    /// True while the process is running (an idle worker may have been killed).
    pub(crate) fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Runs `request`, answering its tool calls with `broker` and passing its output
    /// chunks to `live`, until the worker reports an outcome, `deadline` passes, or
    /// `cancel` fires and the grace period ends.
    pub(crate) async fn run(
        &mut self,
        request: RunRequest,
        broker: &mut BrokerCtx,
        frame_cap: u32,
        deadline: Instant,
        cancel: &CancelToken,
        live: Option<&LiveOutput>,
    ) -> Result<Outcome, Fault> {
        self.frames.expect(frame_cap);
        drive(&mut self.frames.received, &mut self.stdin, request, broker, deadline, cancel, live).await
    }

    /// Ends a worker that is done serving: asks it to shut down, and kills it (and its
    /// container) if it has not exited shortly after.
    pub(crate) async fn retire(mut self) {
        let asked = write_frame(&mut self.stdin, &ToWorker::Shutdown).await.is_ok();
        if asked && matches!(tokio::time::timeout(RETIRE_GRACE, self.child.wait()).await, Ok(Ok(_))) {
            return;
        }
        self.fail(Fault::Cancelled).await;
    }

    /// Kills the worker (and, under docker, its container) and turns `fault` into the
    /// message the outcome carries, with what the worker last wrote to stderr.
    pub(crate) async fn fail(mut self, fault: Fault) -> Fault {
        if let Err(err) = isolation::kill_tree(&mut self.child) {
            tracing::warn!(error = %err, "could not kill a worker's process tree");
        }
        if let Some(mut cleanup) = self.kill_command.take() {
            let cleanup = cleanup.kill_on_drop(true).output();
            let _ = tokio::time::timeout(Duration::from_secs(10), cleanup).await;
        }
        let exit = match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
            Ok(Ok(status)) => format!(" ({status})"),
            _ => String::new(),
        };
        let tail = {
            let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
            String::from_utf8_lossy(&tail).trim().to_owned()
        };
        let explain = |message: String| {
            if tail.is_empty() {
                format!("{message}{exit}")
            } else {
                format!("{message}{exit}; worker stderr: {tail}")
            }
        };
        match fault {
            Fault::Launch(message) => Fault::Launch(explain(message)),
            Fault::Crashed(message) => Fault::Crashed(explain(message)),
            other => other,
        }
    }
}

/// The run's frame exchange, separate from the process so tests can drive it over
/// in-memory pipes with a fake worker. `live` gets the `output` frames' chunks, held to
/// the run's caps by `live` itself (the worker is not trusted to keep them).
pub(crate) async fn drive<W: AsyncWrite + Unpin>(
    frames: &mut mpsc::Receiver<Result<FromWorker, FrameError>>,
    writer: &mut W,
    request: RunRequest,
    broker: &mut BrokerCtx,
    mut deadline: Instant,
    cancel: &CancelToken,
    live: Option<&LiveOutput>,
) -> Result<Outcome, Fault> {
    let asked_for_output = request.live_output;
    let live = if asked_for_output { live } else { None };
    send_before(writer, ToWorker::Run(request), deadline).await?;
    let mut cancelling = false;
    loop {
        let frame = tokio::select! {
            () = cancel.cancelled(), if !cancelling => {
                cancelling = true;
                deadline = deadline.min(Instant::now() + CANCEL_GRACE);
                send_before(writer, ToWorker::Cancel, deadline).await.map_err(|_| Fault::Cancelled)?;
                continue;
            }
            () = tokio::time::sleep_until(deadline) => {
                return Err(if cancelling { Fault::Cancelled } else { Fault::Timeout });
            }
            frame = frames.recv() => frame,
        };
        match frame {
            // The parent's broker decides, exactly as for an in-process guest.
            Some(Ok(FromWorker::ToolCall { call_id, name, args_json })) => {
                let result = answer(broker.call(&name, &args_json), frames, deadline, cancel, live).await?;
                send_before(writer, ToWorker::ToolResult { call_id, result }, deadline).await?;
            }
            Some(Ok(FromWorker::StartCall { request, name, args_json })) => {
                let result = broker.start_call(&name, &args_json);
                send_before(writer, ToWorker::CallStarted { request, result }, deadline).await?;
            }
            Some(Ok(FromWorker::AwaitAny { request, timeout_ms })) => {
                let timeout = timeout_ms.map(|ms| Duration::from_millis(ms.into()));
                let finished = answer(broker.await_any(timeout), frames, deadline, cancel, live).await?;
                send_before(writer, ToWorker::CallsEnded { request, finished }, deadline).await?;
            }
            Some(Ok(FromWorker::Output { stream, base64 })) => pass_on(live, stream, &base64)?,
            Some(Ok(FromWorker::Outcome { outcome })) => return Ok(*outcome),
            Some(Ok(FromWorker::Fatal { message })) => {
                return Err(Fault::Crashed(format!("the worker gave up: {message}")))
            }
            Some(Ok(FromWorker::Hello { .. })) => return Err(Fault::Crashed("the worker sent a second hello".into())),
            Some(Err(err)) => return Err(Fault::Crashed(format!("bad frame from the worker: {err}"))),
            None => return Err(Fault::Crashed("the worker exited mid-run".into())),
        }
    }
}

/// Awaits the broker's answer to a worker's request, until `deadline` or `cancel`.
async fn answer<T>(
    call: impl std::future::Future<Output = T>,
    frames: &mut mpsc::Receiver<Result<FromWorker, FrameError>>,
    deadline: Instant,
    cancel: &CancelToken,
    live: Option<&LiveOutput>,
) -> Result<T, Fault> {
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => return Ok(result),
            () = tokio::time::sleep_until(deadline) => return Err(Fault::Timeout),
            () = cancel.cancelled() => return Err(Fault::Cancelled),
            // The worker waits for the answer; anything it sends meanwhile, even the end
            // of its output, means it is gone or misbehaving, but for output it wrote
            // before the request, still on its way.
            frame = frames.recv() => match frame {
                Some(Ok(FromWorker::Output { stream, base64 })) => pass_on(live, stream, &base64)?,
                None => return Err(Fault::Crashed("the worker exited during a tool call".to_owned())),
                Some(Err(err)) => return Err(Fault::Crashed(format!("bad frame from the worker: {err}"))),
                Some(Ok(frame)) => {
                    let message = format!("the worker sent `{}` during a tool call", kind(&frame));
                    return Err(Fault::Crashed(message));
                }
            },
        }
    }
}

/// Passes one `output` frame's chunk on to `live`, which holds it to the run's caps. A
/// worker that sends output unasked, or bytes that are not base64, is misbehaving.
fn pass_on(live: Option<&LiveOutput>, stream: OutputStream, base64: &str) -> Result<(), Fault> {
    use base64::Engine as _;
    let Some(live) = live else {
        return Err(Fault::Crashed("the worker sent `output` for a run that did not ask for it".into()));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .map_err(|err| Fault::Crashed(format!("the worker sent an `output` frame that is not base64: {err}")))?;
    live.send(stream, &bytes);
    Ok(())
}

/// Sends one frame; a worker that stops reading must not hang the parent past `deadline`.
async fn send_before<W: AsyncWrite + Unpin>(writer: &mut W, message: ToWorker, deadline: Instant) -> Result<(), Fault> {
    match tokio::time::timeout_at(deadline, write_frame(writer, &message)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(Fault::Crashed(format!("writing to the worker: {err}"))),
        Err(_) => Err(Fault::Timeout),
    }
}

fn kind(message: &FromWorker) -> &'static str {
    match message {
        FromWorker::Hello { .. } => "hello",
        FromWorker::ToolCall { .. } => "tool_call",
        FromWorker::StartCall { .. } => "start_call",
        FromWorker::AwaitAny { .. } => "await_any",
        FromWorker::Output { .. } => "output",
        FromWorker::Outcome { .. } => "outcome",
        FromWorker::Fatal { .. } => "fatal",
    }
}

/// The worker's frames, read by a task of their own so that waiting for one can be
/// cancelled without losing a half-read frame.
///
/// The reader reads nothing until told the cap of the exchange it is reading for (the
/// handshake, then each run), and stops again after that exchange's last frame. So the
/// first frame of a run is held to that run's cap, never to the previous run's or the
/// handshake's: a cap taken while the reader was already waiting would be one frame late.
pub(crate) struct WorkerFrames {
    caps: mpsc::UnboundedSender<u32>,
    /// What the reader read, in order; a bad frame or the end of the stream ends it.
    pub(crate) received: mpsc::Receiver<Result<FromWorker, FrameError>>,
}

impl WorkerFrames {
    /// Starts the reader on `reader`; it waits for [`Self::expect`].
    pub(crate) fn spawn<R: AsyncRead + Unpin + Send + 'static>(reader: R) -> Self {
        let (caps, caps_rx) = mpsc::unbounded_channel();
        let (frames_tx, received) = mpsc::channel(4);
        tokio::spawn(read_frames(reader, frames_tx, caps_rx));
        WorkerFrames { caps, received }
    }

    /// Lets the reader read the next exchange (up to its `outcome`, `hello` or `fatal`),
    /// each frame at most `cap` bytes. Call it before sending the request.
    pub(crate) fn expect(&self, cap: u32) {
        // The reader only stops when the stream ended, which `received` reports.
        let _ = self.caps.send(cap);
    }
}

async fn read_frames<R: AsyncRead + Unpin>(
    mut reader: R,
    frames: mpsc::Sender<Result<FromWorker, FrameError>>,
    mut caps: mpsc::UnboundedReceiver<u32>,
) {
    while let Some(cap) = caps.recv().await {
        loop {
            match read_frame::<_, FromWorker>(&mut reader, cap).await {
                Ok(Some(frame)) => {
                    let last = !matches!(
                        frame,
                        FromWorker::ToolCall { .. }
                            | FromWorker::StartCall { .. }
                            | FromWorker::AwaitAny { .. }
                            | FromWorker::Output { .. }
                    );
                    if frames.send(Ok(frame)).await.is_err() {
                        return;
                    }
                    if last {
                        break;
                    }
                }
                Ok(None) => return,
                Err(err) => {
                    let _ = frames.send(Err(err)).await;
                    return;
                }
            }
        }
    }
}

/// Keeps the last few KiB of the worker's stderr, to explain a crash.
async fn keep_tail<R: AsyncRead + Unpin>(mut stderr: R, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 1024];
    while let Ok(n @ 1..) = stderr.read(&mut buf).await {
        let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
        tail.extend_from_slice(&buf[..n]);
        let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
        tail.drain(..excess);
    }
}
