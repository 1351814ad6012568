//! The worker's side: serve runs over a pair of pipes (the `wasmbox worker` command
//! serves them on its stdin and stdout).
//!
//! The worker holds no tools and makes no decisions about them: every tool call is
//! forwarded to the parent, whose broker checks it against the run's scope and budgets
//! and answers. A compromised worker can therefore ask for anything and get only what
//! the parent would have given the guest anyway.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use super::protocol::{
    read_frame, write_frame, FrameError, FromWorker, RunRequest, ToWorker, MAX_OUTPUT_CHUNK_BYTES,
    MAX_REQUEST_FRAME_BYTES, PROTOCOL_VERSION,
};
use crate::broker::link::{GuestBroker, RemoteBroker};
use crate::broker::{CallError, ToolSummary};
use crate::cancel::CancelToken;
use crate::engine::{Engine, EngineConfig};
use crate::error::Error;
use crate::execution::{self, Job};
use crate::import_check::ImportPolicy;
use crate::live_output::{LiveOutput, Message};
use crate::outcome::{ErrorDetail, Outcome, Status};
use crate::runtime::Runtime;

/// How a worker sets up its engine. The parent passes these on the worker's command
/// line ([`WorkerConfig::to_args`], read back by [`WorkerConfig::from_args`]) so that
/// the worker's engine finds the parent's precompiled guests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The parent's precompile cache; the worker only reads it.
    pub cache_dir: PathBuf,
    /// The parent's epoch period.
    pub epoch_tick_ms: u64,
    /// Whether the parent's engine meters fuel (it changes the compiled code, so the
    /// worker must match to find the parent's precompiled guests).
    pub fuel_metering: bool,
    /// The parent's [`EngineConfig::keep_resident_bytes`], so an operator's memory
    /// trade-off holds in workers too.
    pub keep_resident_bytes: usize,
    /// The `RLIMIT_DATA` the worker process gives itself before serving
    /// ([`harden_worker_process`](crate::harden_worker_process)): the launching run's
    /// memory cap plus the worker's overhead. `None` keeps the inherited limit.
    pub max_data_bytes: Option<u64>,
}

impl WorkerConfig {
    /// The worker's arguments after `worker`: what [`WorkerConfig::from_args`] reads.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--cache-dir".into(), self.cache_dir.clone().into_os_string()];
        args.extend(["--epoch-tick-ms".into(), self.epoch_tick_ms.to_string().into()]);
        if self.fuel_metering {
            args.push("--fuel-metering".into());
        }
        args.extend(["--keep-resident-bytes".into(), self.keep_resident_bytes.to_string().into()]);
        if let Some(bytes) = self.max_data_bytes {
            args.extend(["--max-data-bytes".into(), bytes.to_string().into()]);
        }
        args
    }

    /// Reads the arguments [`WorkerConfig::to_args`] wrote. Every option is required
    /// but `--fuel-metering` (a flag) and `--max-data-bytes`: a worker must not guess
    /// the parent's engine.
    ///
    /// # Errors
    /// [`WorkerError::Protocol`] naming an unknown, repeated, missing or unparsable option.
    pub fn from_args(args: impl IntoIterator<Item = OsString>) -> Result<Self, WorkerError> {
        let bad = |message: String| WorkerError::Protocol(format!("worker arguments: {message}"));
        let (mut cache_dir, mut epoch_tick_ms, mut keep_resident_bytes, mut fuel_metering) = (None, None, None, false);
        let mut max_data_bytes = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let name = arg.to_str().ok_or_else(|| bad(format!("{arg:?} is not an option")))?.to_owned();
            if name == "--fuel-metering" {
                fuel_metering = true;
                continue;
            }
            let value = args.next().ok_or_else(|| bad(format!("{name} needs a value")))?;
            let number = |value: &OsString| {
                value.to_str().and_then(|v| v.parse::<u64>().ok()).ok_or_else(|| bad(format!("{name} takes a number")))
            };
            let slot_was_empty = match name.as_str() {
                "--cache-dir" => cache_dir.replace(PathBuf::from(value)).is_none(),
                "--epoch-tick-ms" => epoch_tick_ms.replace(number(&value)?).is_none(),
                "--keep-resident-bytes" => keep_resident_bytes.replace(number(&value)?).is_none(),
                "--max-data-bytes" => max_data_bytes.replace(number(&value)?).is_none(),
                _ => return Err(bad(format!("unknown option {name}"))),
            };
            if !slot_was_empty {
                return Err(bad(format!("{name} is given twice")));
            }
        }
        let missing = |name: &str| bad(format!("{name} is missing"));
        Ok(WorkerConfig {
            cache_dir: cache_dir.ok_or_else(|| missing("--cache-dir"))?,
            epoch_tick_ms: epoch_tick_ms.ok_or_else(|| missing("--epoch-tick-ms"))?,
            fuel_metering,
            keep_resident_bytes: usize::try_from(keep_resident_bytes.ok_or_else(|| missing("--keep-resident-bytes"))?)
                .map_err(|_| bad("--keep-resident-bytes is too large".into()))?,
            max_data_bytes,
        })
    }
}

/// Why a worker stopped serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// A frame could not be read or written.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The parent broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The engine could not be built.
    #[error(transparent)]
    Setup(#[from] Error),
}

/// The sending half, shared by the run loop and the runs' tool calls.
type FrameWriter<W> = Arc<tokio::sync::Mutex<W>>;

/// The parent's answer to one request of the guest's.
enum Reply {
    /// To a `tool_call`.
    Call(Result<String, CallError>),
    /// To a `start_call`.
    Started(Result<u32, CallError>),
    /// To an `await_any`.
    Ended(Vec<(u32, Result<String, CallError>)>),
}

/// State the frame reader shares with the run loop.
#[derive(Default)]
struct Session {
    /// Requests waiting for the parent's answer, by request number.
    pending: Mutex<HashMap<u32, oneshot::Sender<Reply>>>,
    /// Cancels the run in progress.
    cancel: Mutex<CancelToken>,
}

impl Session {
    fn pending(&self) -> MutexGuard<'_, HashMap<u32, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hands the parent's `reply` to the request waiting for it.
    fn answer(&self, request: u32, reply: Reply) -> Result<(), WorkerError> {
        match self.pending().remove(&request) {
            // The request may have been dropped by a timeout meanwhile.
            Some(waiting) => {
                let _ = waiting.send(reply);
                Ok(())
            }
            None => Err(WorkerError::Protocol(format!("a result for unknown tool call {request}"))),
        }
    }

    fn current_cancel(&self) -> MutexGuard<'_, CancelToken> {
        self.cancel.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Serves runs from `input` to `output` until the parent says `shutdown` or closes the
/// pipe. Returns an error when the parent breaks the protocol.
///
/// # Errors
/// [`WorkerError`] for an unusable frame, a version mismatch or an engine that cannot
/// be built; the parent sees the worker exit and reports the run `crashed`.
pub async fn serve<R, W>(config: WorkerConfig, mut input: R, output: W) -> Result<(), WorkerError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer: FrameWriter<W> = Arc::new(tokio::sync::Mutex::new(output));
    handshake(&mut input, &writer).await?;
    let engine = Engine::new(EngineConfig {
        cache_dir: config.cache_dir,
        epoch_tick_ms: config.epoch_tick_ms,
        fuel_metering: config.fuel_metering,
        keep_resident_bytes: config.keep_resident_bytes,
        // One run at a time per worker.
        max_concurrent_runs: 1,
        ..EngineConfig::default()
    })?;

    let session = Arc::new(Session::default());
    let (runs_tx, mut runs_rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_requests(input, runs_tx, Arc::clone(&session)));
    let mut runtimes = HashMap::new();
    while let Some(request) = runs_rx.recv().await {
        let cancel = CancelToken::new();
        *session.current_cancel() = cancel.clone();
        let outcome = run_one(&engine, &mut runtimes, request, &session, &writer, cancel).await;
        send(&writer, &FromWorker::Outcome { outcome: Box::new(outcome) }).await?;
    }
    reader.await.map_err(|e| WorkerError::Protocol(format!("frame reader failed: {e}")))?
}

async fn handshake<R, W>(input: &mut R, writer: &FrameWriter<W>) -> Result<(), WorkerError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let problem = match read_frame::<_, ToWorker>(input, MAX_REQUEST_FRAME_BYTES).await? {
        Some(ToWorker::Hello { version }) if version == PROTOCOL_VERSION => {
            return send(writer, &FromWorker::Hello { version: PROTOCOL_VERSION, pid: std::process::id() }).await;
        }
        Some(ToWorker::Hello { version }) => {
            format!("the parent speaks protocol version {version}, this worker {PROTOCOL_VERSION}")
        }
        Some(_) => "the first frame must be `hello`".to_owned(),
        None => return Err(WorkerError::Protocol("the parent closed the pipe before `hello`".into())),
    };
    // Best effort: the parent may already be gone.
    let _ = send(writer, &FromWorker::Fatal { message: problem.clone() }).await;
    Err(WorkerError::Protocol(problem))
}

/// Reads the parent's frames: runs go to the run loop, tool results to the waiting call,
/// `cancel` to the run in progress. Ends on `shutdown`, end of input, or a bad frame.
async fn read_requests<R: AsyncRead + Unpin>(
    mut input: R,
    runs: mpsc::UnboundedSender<RunRequest>,
    session: Arc<Session>,
) -> Result<(), WorkerError> {
    let result = loop {
        match read_frame::<_, ToWorker>(&mut input, MAX_REQUEST_FRAME_BYTES).await {
            Ok(Some(ToWorker::Run(request))) => {
                if runs.send(request).is_err() {
                    break Ok(());
                }
            }
            Ok(Some(ToWorker::ToolResult { call_id, result })) => {
                if let Err(err) = session.answer(call_id, Reply::Call(result)) {
                    break Err(err);
                }
            }
            Ok(Some(ToWorker::CallStarted { request, result })) => {
                if let Err(err) = session.answer(request, Reply::Started(result)) {
                    break Err(err);
                }
            }
            Ok(Some(ToWorker::CallsEnded { request, finished })) => {
                if let Err(err) = session.answer(request, Reply::Ended(finished)) {
                    break Err(err);
                }
            }
            Ok(Some(ToWorker::Cancel)) => session.current_cancel().cancel(),
            Ok(Some(ToWorker::Hello { .. })) => break Err(WorkerError::Protocol("a second `hello`".into())),
            Ok(Some(ToWorker::Shutdown) | None) => break Ok(()),
            Err(err) => break Err(err.into()),
        }
    };
    // Whatever ended the session also ends the run in progress.
    session.current_cancel().cancel();
    result
}

async fn run_one<W>(
    engine: &Engine,
    runtimes: &mut HashMap<(PathBuf, ImportPolicy), Runtime>,
    request: RunRequest,
    session: &Arc<Session>,
    writer: &FrameWriter<W>,
    cancel: CancelToken,
) -> Outcome
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let key = (request.guest.clone(), request.policy);
    let runtime = match runtimes.get(&key) {
        Some(runtime) => runtime.clone(),
        // The worker only reads the cache: the parent compiled the guest before asking,
        // and a worker that found it missing must not write there.
        None if !engine.is_precompiled_file(&request.guest) => {
            let message = format!(
                "{} is not precompiled in {} (the parent precompiles guests; the worker never writes the cache)",
                request.guest.display(),
                engine.cache_dir().display()
            );
            return Outcome::early(Status::Internal, ErrorDetail::new("worker_guest", message));
        }
        None => match Runtime::from_file_with(engine, &request.guest, request.policy) {
            Ok(runtime) => runtimes.entry(key).or_insert(runtime).clone(),
            Err(err) => return Outcome::early(Status::Internal, ErrorDetail::new("worker_guest", err.to_string())),
        },
    };
    let parent = ParentBroker::new(request.tools, Arc::clone(session), Box::new(ForwardTo(Arc::clone(writer))));
    let forwarding = request.live_output.then(|| {
        let (live, chunks) = LiveOutput::channel(&request.limits);
        (live, tokio::spawn(forward_output(chunks, Arc::clone(writer))))
    });
    let job = Job {
        limits: &request.limits,
        code: &request.code,
        input_json: &request.input_json,
        files: &request.files,
        cancel: &cancel,
        live: forwarding.as_ref().map(|(live, _)| live.clone()),
    };
    let outcome = execution::execute(&runtime, job, GuestBroker::Remote(Box::new(parent))).await;
    // Every chunk goes out before the outcome, which ends the run for the parent.
    if let Some((live, forwarder)) = forwarding {
        live.end();
        let _ = forwarder.await;
    }
    outcome
}

/// Sends the run's output chunks to the parent as `output` frames, in order, until the
/// run ends (or the pipe fails: the outcome then cannot be sent either).
async fn forward_output<W: AsyncWrite + Unpin>(mut chunks: mpsc::UnboundedReceiver<Message>, writer: FrameWriter<W>) {
    use base64::Engine as _;
    while let Some(Message::Chunk(stream, bytes)) = chunks.recv().await {
        for piece in bytes.chunks(MAX_OUTPUT_CHUNK_BYTES) {
            let base64 = base64::engine::general_purpose::STANDARD.encode(piece);
            if send(&writer, &FromWorker::Output { stream, base64 }).await.is_err() {
                return;
            }
        }
    }
}

async fn send<W: AsyncWrite + Unpin>(writer: &FrameWriter<W>, message: &FromWorker) -> Result<(), WorkerError> {
    Ok(write_frame(&mut *writer.lock().await, message).await?)
}

/// Sends a tool call to the parent; boxed so the Store's data needs no writer type.
trait Forward: Send + Sync {
    fn send<'a>(&'a self, message: FromWorker) -> BoxFuture<'a, Result<(), WorkerError>>;
}

struct ForwardTo<W>(FrameWriter<W>);

impl<W: AsyncWrite + Unpin + Send + 'static> Forward for ForwardTo<W> {
    fn send<'a>(&'a self, message: FromWorker) -> BoxFuture<'a, Result<(), WorkerError>> {
        Box::pin(async move { send(&self.0, &message).await })
    }
}

/// The broker as a worker's guest reaches it: the parent, over the pipe.
struct ParentBroker {
    tools: Vec<ToolSummary>,
    session: Arc<Session>,
    forward: Box<dyn Forward>,
    calls: u32,
}

impl ParentBroker {
    fn new(tools: Vec<ToolSummary>, session: Arc<Session>, forward: Box<dyn Forward>) -> Self {
        ParentBroker { tools, session, forward, calls: 0 }
    }

    /// Sends the parent request `frame` (given its number) and waits for its answer.
    async fn ask(&mut self, frame: impl FnOnce(u32) -> FromWorker) -> Result<Reply, &'static str> {
        self.calls += 1;
        let request = self.calls;
        let (answer_tx, answer_rx) = oneshot::channel();
        self.session.pending().insert(request, answer_tx);
        if self.forward.send(frame(request)).await.is_err() {
            self.session.pending().remove(&request);
            return Err("the parent process is gone");
        }
        answer_rx.await.map_err(|_| "the parent process did not answer")
    }

    /// [`ask`](Self::ask) on behalf of tool `name`, the reply taken apart by `answer`:
    /// no reply, or one of another kind, is that tool's failure.
    async fn ask_for_tool<T>(
        &mut self,
        name: &str,
        frame: impl FnOnce(u32) -> FromWorker,
        answer: impl FnOnce(Reply) -> Option<Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let failed = |why: &str| CallError::Failed(format!("tool `{name}`: {why}"));
        match self.ask(frame).await {
            Ok(reply) => answer(reply).unwrap_or_else(|| Err(failed("the parent answered another request"))),
            Err(why) => Err(failed(why)),
        }
    }
}

impl RemoteBroker for ParentBroker {
    fn list(&self) -> Vec<ToolSummary> {
        self.tools.clone()
    }

    fn call<'a>(&'a mut self, name: &'a str, args_json: &'a str) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            let ask =
                |call_id| FromWorker::ToolCall { call_id, name: name.to_owned(), args_json: args_json.to_owned() };
            let answer = |reply| match reply {
                Reply::Call(result) => Some(result),
                _ => None,
            };
            self.ask_for_tool(name, ask, answer).await
        })
    }

    fn start_call<'a>(&'a mut self, name: &'a str, args_json: &'a str) -> BoxFuture<'a, Result<u32, CallError>> {
        Box::pin(async move {
            let ask =
                |request| FromWorker::StartCall { request, name: name.to_owned(), args_json: args_json.to_owned() };
            let answer = |reply| match reply {
                Reply::Started(result) => Some(result),
                _ => None,
            };
            self.ask_for_tool(name, ask, answer).await
        })
    }

    fn await_any(&mut self, timeout: Option<Duration>) -> BoxFuture<'_, Vec<(u32, Result<String, CallError>)>> {
        let timeout_ms = timeout.map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX));
        Box::pin(async move {
            match self.ask(|request| FromWorker::AwaitAny { request, timeout_ms }).await {
                Ok(Reply::Ended(finished)) => finished,
                // The guest's started calls then never end; the run's deadline ends it.
                _ => Vec::new(),
            }
        })
    }
}
