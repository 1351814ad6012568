//! Sessions: one guest instance kept alive across steps, so that the globals, imports,
//! functions and classes a step defines are there in the next (Python and JavaScript
//! alike). [`Sandbox::session`](crate::Sandbox::session) opens one; every
//! [`Session::run`] is a step with its own deadline, fuel, tool budgets, output caps and
//! [`Outcome`], while the memory limit, the in-memory files and the admission slot span
//! the session. A step that raises leaves the session usable; a step that breaches a
//! limit (deadline, fuel, memory, output), is cancelled or traps ends it, because the
//! instance is then stopped mid-call or over its cap, and every later step is `rejected`
//! with error kind `session_ended`, saying why ([`Session::end`] has it typed). An idle
//! timeout and a maximum lifetime ([`SessionConfig`]) end it too; [`Session::reset`]
//! starts it again on a fresh instance. The only door into the core is `execution.rs`:
//! a session builds its Store, arms each step and classifies its ending with the same
//! functions as a run.
//!
//! ```no_run
//! # async fn demo(sandbox: wasmbox::Sandbox) -> Result<(), wasmbox::SessionError> {
//! use wasmbox::SessionConfig;
//! let session = sandbox.session(SessionConfig::default()).await?;
//! session.run("import math\nsquares = [n * n for n in range(5)]").await;
//! let outcome = session.run("math.fsum(squares)").await;
//! assert_eq!(outcome.value, Some(serde_json::json!(30.0)));
//! # Ok(()) }
//! ```
//!
//! # Security
//! A session holds one admission slot and one pool instance from [`Sandbox::session`]
//! until it ends or is dropped, so sessions count against
//! [`EngineConfig::max_concurrent_runs`](crate::EngineConfig::max_concurrent_runs) like
//! runs. The guest learns nothing from the host about being in a session: the host calls
//! the same `run` export again on the same instance, which a run never does, and opens
//! every session with one empty call so that every step is such a repeated call
//! (SECURITY.md, "Sessions"). Sessions run in this process only: a sandbox with worker
//! isolation cannot open one.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmtime::Store;

use crate::admission::Admitted;
use crate::audit::AuditEvent;
use crate::bindings::CodeRunner;
use crate::broker::link::GuestBroker;
use crate::broker::{BrokerCtx, Observers, RunIdentity, RunTree, Scope, Tools};
use crate::cancel::CancelToken;
use crate::execution::{self, time_bound};
use crate::limits::Limits;
use crate::live_output::{Delivery, OutputSink, OutputStream};
use crate::outcome::{ErrorDetail, Outcome, Stats, Status};
use crate::output_capture::OutputCapture;
use crate::run_request::RunRequest;
use crate::run_state::RunState;
use crate::runtime::Runtime;
use crate::sandbox::{self, Sandbox};
use crate::termination::{Phase, Termination};
use crate::vfs::InputFiles;

/// Default [`SessionConfig::idle_timeout_ms`]: five minutes.
pub const DEFAULT_SESSION_IDLE_TIMEOUT_MS: u64 = 5 * 60 * 1000;
/// Default [`SessionConfig::max_lifetime_ms`]: one hour.
pub const DEFAULT_SESSION_MAX_LIFETIME_MS: u64 = 60 * 60 * 1000;

/// How long a session may live and idle. Separate from [`Limits`], which bound one run
/// (or one step) and travel with it to workers, the CLI and the MCP server: these two
/// bound how long a session holds its instance and admission slot, which no single run
/// has. Unknown fields are rejected, as in [`Limits`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// A session with no step for this long ends (its instance and slot are freed then,
    /// not at the next step). Default: [`DEFAULT_SESSION_IDLE_TIMEOUT_MS`].
    pub idle_timeout_ms: u64,
    /// A session ends this long after it was opened, whatever it is doing: a step still
    /// running then is stopped as by its deadline. [`Session::reset`] does not restart
    /// this clock. Default: [`DEFAULT_SESSION_MAX_LIFETIME_MS`].
    pub max_lifetime_ms: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            idle_timeout_ms: DEFAULT_SESSION_IDLE_TIMEOUT_MS,
            max_lifetime_ms: DEFAULT_SESSION_MAX_LIFETIME_MS,
        }
    }
}

impl SessionConfig {
    /// Checks that both durations are usable.
    ///
    /// # Errors
    /// A message naming a field that is zero.
    pub fn validate(&self) -> Result<(), String> {
        match (self.idle_timeout_ms, self.max_lifetime_ms) {
            (0, _) => Err("invalid session setting `idle_timeout_ms`: must be greater than zero".into()),
            (_, 0) => Err("invalid session setting `max_lifetime_ms`: must be greater than zero".into()),
            _ => Ok(()),
        }
    }
}

/// Why a session could not be opened or reset: the status and error detail a run would
/// have ended with (`invalid_request` for bad limits or settings and for a sandbox with
/// worker isolation, `rejected` when admission control or the instance pool turned it
/// away, or the status of the guest's failed start).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the session could not start ({status}): {}", detail.message)]
#[non_exhaustive]
pub struct SessionError {
    /// The status a run would have had.
    pub status: Status,
    /// What went wrong.
    pub detail: ErrorDetail,
}

impl SessionError {
    fn new(status: Status, kind: &str, message: impl Into<String>) -> Self {
        SessionError { status, detail: ErrorDetail::new(kind, message) }
    }
}

/// Why a session ended. Every step after the end is `rejected` with error kind
/// `session_ended` and this reason in its message; [`Session::reset`] starts anew.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionEnd {
    /// Step `step` (1-based, counted since the session opened or was last reset) ended
    /// with `status` (a breached limit, a cancellation or a trap), which leaves the
    /// instance stopped mid-call or over its cap; `kind` is its error kind.
    Step {
        /// The step that ended the session.
        step: u64,
        /// Its status.
        status: Status,
        /// Its error kind.
        kind: String,
    },
    /// A step's future was dropped while the guest ran, leaving it mid-call.
    Abandoned {
        /// The step that was dropped.
        step: u64,
    },
    /// No step came for [`SessionConfig::idle_timeout_ms`].
    IdleTimeout {
        /// The idle timeout.
        idle_timeout_ms: u64,
    },
    /// [`SessionConfig::max_lifetime_ms`] passed since the session opened.
    Lifetime {
        /// The lifetime.
        max_lifetime_ms: u64,
    },
    /// [`Session::reset`] could not start a new instance (`status` as in [`SessionError`]).
    ResetFailed {
        /// Why, as a status.
        status: Status,
    },
}

impl std::fmt::Display for SessionEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionEnd::Step { step, status, kind } => write!(f, "step {step} ended `{status}` ({kind})"),
            SessionEnd::Abandoned { step } => write!(f, "step {step} was abandoned while the guest ran"),
            SessionEnd::IdleTimeout { idle_timeout_ms } => write!(f, "it was idle for {idle_timeout_ms} ms"),
            SessionEnd::Lifetime { max_lifetime_ms } => write!(f, "it reached its lifetime of {max_lifetime_ms} ms"),
            SessionEnd::ResetFailed { status } => write!(f, "reset could not start a new instance (`{status}`)"),
        }
    }
}

/// A guest instance kept alive across steps; see the [module docs](self). Cheap to share
/// behind an `Arc` (steps run one at a time, in the order they take the session's lock);
/// dropping it frees the instance and its admission slot. Needs a Tokio runtime, as runs
/// do: an idle or expired session is ended by a timer task.
pub struct Session {
    shared: Arc<Shared>,
}

struct Shared {
    sandbox: Sandbox,
    config: SessionConfig,
    files: InputFiles,
    idle: IdleBroker,
    opened: Instant,
    state: tokio::sync::Mutex<State>,
}

struct State {
    live: Option<Live>,
    end: Option<SessionEnd>,
    /// Steps since the session opened or was last reset.
    steps: u64,
    last_active: Instant,
    /// Set while a step's call runs: still set at the next step means that step's future
    /// was dropped with the guest mid-call.
    in_step: bool,
}

/// The instance and what it holds.
struct Live {
    store: SessionStore,
    runner: CodeRunner,
    stdout: OutputCapture,
    stderr: OutputCapture,
    _slot: Admitted,
}

/// A session's Store, freed when the session ends as a run's is: its pool slot is reset
/// on the engine's background thread when that has room (`execution::retire`), not on
/// the caller's.
struct SessionStore {
    store: Option<Store<RunState>>,
    runtime: Runtime,
}

impl std::ops::Deref for SessionStore {
    type Target = Store<RunState>;
    fn deref(&self) -> &Store<RunState> {
        self.store.as_ref().expect("a session's Store is taken only when it is dropped")
    }
}

impl std::ops::DerefMut for SessionStore {
    fn deref_mut(&mut self) -> &mut Store<RunState> {
        self.store.as_mut().expect("a session's Store is taken only when it is dropped")
    }
}

impl Drop for SessionStore {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            execution::retire(&self.runtime, store);
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("sandbox", &self.shared.sandbox)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens a session of `sandbox` (see [`Sandbox::session`](crate::Sandbox::session)).
    pub(crate) async fn open(sandbox: Sandbox, config: SessionConfig) -> Result<Session, SessionError> {
        Self::open_with_files(sandbox, config, InputFiles::new()).await
    }

    /// Like [`Sandbox::session`](crate::Sandbox::session), with `files` readable under
    /// the guest's `/input` in every step. Files a step writes under `/output` and `/tmp`
    /// stay for the next steps (within [`Limits::max_fs_bytes`] for the session), and
    /// every step's outcome lists all of `/output`.
    ///
    /// # Errors
    /// As [`Sandbox::session`](crate::Sandbox::session).
    pub async fn open_with_files(
        sandbox: Sandbox,
        config: SessionConfig,
        files: InputFiles,
    ) -> Result<Session, SessionError> {
        config.validate().map_err(|message| SessionError::new(Status::InvalidRequest, "invalid_session", message))?;
        let idle = IdleBroker::new(&sandbox);
        let live = start(&sandbox, &files, &idle).await?;
        let now = Instant::now();
        let state = State { live: Some(live), end: None, steps: 0, last_active: now, in_step: false };
        let state = tokio::sync::Mutex::new(state);
        let shared = Arc::new(Shared { sandbox, config, files, idle, opened: now, state });
        spawn_reaper(Arc::downgrade(&shared));
        Ok(Session { shared })
    }

    /// Runs `code` as the next step, with a `null` input.
    pub async fn run(&self, code: &str) -> Outcome {
        self.run_cancellable(code, &Value::Null, &CancelToken::new()).await
    }

    /// Runs `code` as the next step with `input` visible to it (`INPUT`; each step sees
    /// its own).
    pub async fn run_with_input(&self, code: &str, input: &Value) -> Outcome {
        self.run_cancellable(code, input, &CancelToken::new()).await
    }

    /// Runs `code` as the next step, stopped with status `cancelled` when `cancel` is
    /// cancelled (which ends the session). Never panics and never returns an error: every
    /// ending is an [`Outcome`], with a run id of its own. Dropping the future while the
    /// guest runs ends the session ([`SessionEnd::Abandoned`]).
    pub async fn run_cancellable(&self, code: &str, input: &Value, cancel: &CancelToken) -> Outcome {
        self.run_step(code, input, cancel, None).await
    }

    /// Runs `request` as the next step: its code, input and cancel token, and its
    /// [`OutputSink`](crate::OutputSink), if any, receiving the step's stdout and stderr
    /// as the guest writes them (within the step's caps, as for
    /// [`Sandbox::run_with`](crate::Sandbox::run_with)). A session's input files are
    /// given when it opens ([`Session::open_with_files`]): a request with files of its
    /// own is `invalid_request`.
    pub async fn run_with(&self, request: RunRequest) -> Outcome {
        let RunRequest { code, input, files, cancel, output_sink } = request;
        if !files.is_empty() {
            let detail = ErrorDetail::new(
                "invalid_request",
                "a session's input files are given when it opens (Session::open_with_files), not per step",
            );
            return Outcome::early(Status::InvalidRequest, detail);
        }
        self.run_step(&code, &input, &cancel, output_sink).await
    }

    async fn run_step(
        &self,
        code: &str,
        input: &Value,
        cancel: &CancelToken,
        output_sink: Option<Arc<dyn OutputSink>>,
    ) -> Outcome {
        let started = Instant::now();
        let shared = &*self.shared;
        let observers = shared.sandbox.observers();
        let identity = RunIdentity::top_level();
        observers.sink.record(&AuditEvent::RunStarted {
            run_id: identity.run_id.clone(),
            ancestry: Vec::new(),
            runtime: shared.sandbox.runtime().name().to_owned(),
            code_bytes: code.len() as u64,
        });
        let mut outcome = {
            let mut state = shared.state.lock().await;
            shared.expire(&mut state, Instant::now());
            match (&state.end, shared.sandbox.prepare(code, input)) {
                (Some(end), _) => ended(end),
                (None, Err(error)) => Outcome::early(Status::InvalidRequest, error),
                (None, Ok(input_json)) => {
                    shared.step(&mut state, code, &input_json, identity.clone(), cancel, output_sink).await
                }
            }
        };
        sandbox::finished(observers, identity, started, &mut outcome);
        outcome
    }

    /// Starts the session again on a fresh instance: nothing of the earlier steps stays
    /// (files included), and the step count starts again. Works on an ended session too,
    /// unless its lifetime has passed. The old instance and slot are freed first.
    ///
    /// # Errors
    /// As [`Sandbox::session`](crate::Sandbox::session); the session is then ended
    /// ([`SessionEnd::ResetFailed`]), or `rejected` with kind `session_ended` when its
    /// lifetime has passed.
    pub async fn reset(&self) -> Result<(), SessionError> {
        let shared = &*self.shared;
        let mut state = shared.state.lock().await;
        state.live = None;
        state.in_step = false;
        state.steps = 0;
        shared.expire(&mut state, Instant::now());
        if let Some(end @ SessionEnd::Lifetime { .. }) = &state.end {
            return Err(SessionError::new(Status::Rejected, "session_ended", format!("the session ended: {end}")));
        }
        match start(&shared.sandbox, &shared.files, &shared.idle).await {
            Ok(live) => {
                state.live = Some(live);
                state.end = None;
                state.last_active = Instant::now();
                Ok(())
            }
            Err(error) => {
                state.end = Some(SessionEnd::ResetFailed { status: error.status });
                Err(error)
            }
        }
    }

    /// Why the session ended, or `None` while it is usable. Waits for a step in progress.
    pub async fn end(&self) -> Option<SessionEnd> {
        let mut state = self.shared.state.lock().await;
        self.shared.expire(&mut state, Instant::now());
        state.end.clone()
    }
}

impl Shared {
    fn lifetime_end(&self) -> Instant {
        self.opened + Duration::from_millis(self.config.max_lifetime_ms)
    }

    /// Ends the session if its lifetime or idle timeout has passed (or a step was
    /// abandoned mid-call), freeing the instance.
    fn expire(&self, state: &mut State, now: Instant) {
        if state.end.is_some() {
            state.live = None;
            return;
        }
        let end = if state.in_step {
            Some(SessionEnd::Abandoned { step: state.steps })
        } else if now >= self.lifetime_end() {
            Some(SessionEnd::Lifetime { max_lifetime_ms: self.config.max_lifetime_ms })
        } else if now >= state.last_active + Duration::from_millis(self.config.idle_timeout_ms) {
            Some(SessionEnd::IdleTimeout { idle_timeout_ms: self.config.idle_timeout_ms })
        } else {
            None
        };
        if end.is_some() {
            state.end = end;
            state.live = None;
        }
    }

    /// One step on the live instance.
    async fn step(
        &self,
        state: &mut State,
        code: &str,
        input_json: &str,
        identity: RunIdentity,
        cancel: &CancelToken,
        output_sink: Option<Arc<dyn OutputSink>>,
    ) -> Outcome {
        let sandbox = &self.sandbox;
        let Some(live) = state.live.as_mut() else {
            return execution::internal("the session has no instance and no end".into());
        };
        state.steps += 1;
        let step = state.steps;
        // The step's deadline, cut short by the session's lifetime.
        let now = Instant::now();
        let mut limits = sandbox.current_limits().clone();
        let remaining_ms =
            u64::try_from(self.lifetime_end().saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX);
        let cut_by_lifetime = remaining_ms < limits.timeout_ms;
        limits.timeout_ms = limits.timeout_ms.min(remaining_ms.max(1));

        let data = live.store.data_mut();
        data.broker = GuestBroker::Local(sandbox.top_level_broker(identity));
        data.deadline = now + Duration::from_millis(limits.timeout_ms);
        data.cancel = cancel.clone();
        let fuel = match execution::refuel(&mut live.store, sandbox.runtime(), &limits) {
            Ok(fuel) => fuel,
            Err(message) => return execution::internal(message),
        };
        live.store.set_epoch_deadline(1);
        let delivery = output_sink.map(|sink| Delivery::start(sink, &limits));
        live.stdout.set_live(delivery.as_ref().map(|delivery| delivery.live().clone()));
        live.stderr.set_live(delivery.as_ref().map(|delivery| delivery.live().clone()));

        state.in_step = true;
        let hard_timeout = time_bound(&limits, sandbox.runtime().engine().epoch_tick());
        let (store, runner) = (&mut *live.store, &live.runner);
        let call = async {
            runner
                .wasmbox_sandbox_runner()
                .call_run(&mut *store, code, input_json)
                .await
                .map_err(|err| (Phase::Run, err))
        };
        let result = execution::within(hard_timeout, cancel, call).await;
        state.in_step = false;
        live.stdout.set_live(None);
        live.stderr.set_live(None);

        let fuel_used = live.store.get_fuel().map_or(0, |left| fuel.saturating_sub(left));
        let termination = execution::termination(result, cancel.is_cancelled());
        // Only a step the guest answered, raising or not, leaves the instance usable.
        let answered = matches!(termination, Termination::Returned(_) | Termination::GuestError(_));
        let data = live.store.data_mut();
        let report = std::mem::replace(&mut data.broker, self.idle.broker()).into_report();
        let output = (live.stdout.take(), live.stderr.take());
        let mut outcome = execution::outcome_of(termination, &limits, &data.memory, output, report);
        outcome.files = data.vfs.outputs();
        outcome.stats = Stats {
            wall_time_us: 0,
            instantiate_time_us: 0,
            fuel_used,
            peak_memory_bytes: data.memory.peak_bytes() as u64,
        };
        state.last_active = Instant::now();
        if !(answered && matches!(outcome.status, Status::Ok | Status::Error | Status::ToolLimit)) {
            let end = if cut_by_lifetime && outcome.status == Status::Timeout {
                SessionEnd::Lifetime { max_lifetime_ms: self.config.max_lifetime_ms }
            } else {
                let kind = outcome.error.as_ref().map(|e| e.kind.clone()).unwrap_or_default();
                SessionEnd::Step { step, status: outcome.status, kind }
            };
            state.end = Some(end);
            state.live = None;
        }
        if let Some(delivery) = delivery {
            delivery.finish(now + Duration::from_millis(limits.timeout_ms)).await;
        }
        outcome
    }
}

/// The outcome of a step on an ended session.
fn ended(end: &SessionEnd) -> Outcome {
    let message = format!("the session ended: {end}; reset() starts it again on a fresh instance");
    Outcome::early(Status::Rejected, ErrorDetail::new("session_ended", message))
}

/// The broker a session's Store holds between steps, when no guest code runs: no tools
/// and no scope. Its parts are made once per session and shared by every step's idle
/// broker (`BrokerCtx::new` would make a redaction policy and a run id each time); the
/// observers are the sandbox's, though with no guest code running it never reports.
struct IdleBroker {
    tools: Arc<Tools>,
    identity: RunIdentity,
    limits: Limits,
    observers: Observers,
}

impl IdleBroker {
    fn new(sandbox: &Sandbox) -> Self {
        IdleBroker {
            tools: Arc::new(Tools::new()),
            identity: RunIdentity::top_level(),
            limits: Limits::default(),
            observers: sandbox.observers().clone(),
        }
    }

    fn broker(&self) -> GuestBroker {
        GuestBroker::Local(BrokerCtx::for_run(
            Arc::clone(&self.tools),
            Scope::None,
            self.limits.clone(),
            self.identity.clone(),
            Arc::new(RunTree::new(&self.limits)),
            self.observers.clone(),
        ))
    }
}

/// Admits, instantiates and opens a session's instance: the guest's `run` export is
/// called once with empty code, so that every step is a repeated call (module docs).
async fn start(sandbox: &Sandbox, files: &InputFiles, idle: &IdleBroker) -> Result<Live, SessionError> {
    sandbox.prepare("", &Value::Null).map_err(|detail| SessionError { status: Status::InvalidRequest, detail })?;
    if !sandbox.runs_in_process() {
        let message = "sessions run in this process: a sandbox with worker isolation cannot open one";
        return Err(SessionError::new(Status::InvalidRequest, "isolation", message));
    }
    let runtime = sandbox.runtime();
    let engine = runtime.engine();
    let slot = engine
        .admission()
        .admit(engine.metrics_handle())
        .await
        .map_err(|refusal| SessionError::new(Status::Rejected, "admission", refusal.to_string()))?;
    let limits = sandbox.current_limits();
    let stdout = OutputCapture::new(OutputStream::Stdout, limits.max_stdout_bytes as usize);
    let stderr = OutputCapture::new(OutputStream::Stderr, limits.max_stderr_bytes as usize);
    let cancel = CancelToken::new();
    let state = execution::run_state(limits, files, idle.broker(), cancel.clone(), &stdout, &stderr);
    let failed = |outcome: Outcome| {
        let detail = outcome.error.unwrap_or_else(|| ErrorDetail::new("internal", "the guest did not start"));
        SessionError { status: outcome.status, detail }
    };
    // An instance prepared ahead serves the session as it would a run (one session,
    // never another): its opening call is then all that is left.
    let (store, prepared, _fuel) = execution::fresh_store(runtime, state, limits)
        .map_err(|message| SessionError::new(Status::Internal, "internal", message))?;
    let mut store = SessionStore { store: Some(store), runtime: runtime.clone() };
    let mut runner = None;
    let opening = async {
        let instance = match prepared {
            Some(instance) => instance,
            None => runtime.pre().instantiate_async(&mut *store).await.map_err(|err| (Phase::Instantiate, err))?,
        };
        let answer =
            instance.wasmbox_sandbox_runner().call_run(&mut *store, "", "null").await.map_err(|err| (Phase::Run, err));
        runner = Some(instance);
        answer
    };
    let result = execution::within(time_bound(limits, engine.epoch_tick()), &cancel, opening).await;
    let termination = execution::termination(result, false);
    let output = (stdout.take(), stderr.take());
    let outcome = execution::outcome_of(termination, limits, &store.data().memory, output, (Vec::new(), None));
    match runner {
        Some(runner) if outcome.is_ok() => Ok(Live { store, runner, stdout, stderr, _slot: slot }),
        _ if outcome.is_ok() => Err(SessionError::new(Status::Internal, "internal", "the guest did not start")),
        _ => Err(failed(outcome)),
    }
}

/// Ends the session behind `shared` when it idles past its timeout or reaches its
/// lifetime, freeing its instance and slot then rather than at the next step. Holds the
/// session only weakly: dropping the [`Session`] drops everything, and the task ends.
fn spawn_reaper(shared: Weak<Shared>) {
    // Outside a Tokio runtime (where no step could run either) the next step or
    // `end()` still finds the session expired.
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        loop {
            let Some(session) = shared.upgrade() else { return };
            let now = Instant::now();
            let lifetime_end = session.lifetime_end();
            let idle = Duration::from_millis(session.config.idle_timeout_ms);
            let wake = match session.state.try_lock() {
                Ok(mut state) => {
                    session.expire(&mut state, now);
                    if now >= lifetime_end {
                        return;
                    }
                    match state.live {
                        Some(_) => (state.last_active + idle).min(lifetime_end),
                        None => lifetime_end,
                    }
                }
                // A step is running: it is not idle, and its deadline is within the lifetime.
                Err(_) => (now + idle).min(lifetime_end),
            };
            drop(session);
            tokio::time::sleep_until(wake.into()).await;
        }
    });
}
