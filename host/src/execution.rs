//! Executes one run in this process: a fresh instance from the runtime's `InstancePre`
//! (prepared ahead of the run when one is ready, see `prepared.rs`), the run's limits,
//! the call, and the classification of how it ended. The in-process sandbox and the
//! worker process both run guests through here.

use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Store, UpdateDeadline};

use crate::bindings::exports::wasmbox::sandbox::runner::{GuestException, RunError};
use crate::bindings::CodeRunner;
use crate::broker::link::GuestBroker;
use crate::cancel::CancelToken;
use crate::limits::Limits;
use crate::live_output::{LiveOutput, OutputStream};
use crate::outcome::{CapturedOutput, ErrorDetail, Outcome, Stats, Status, ToolCallRecord};
use crate::output_capture::OutputCapture;
use crate::prepared::NoBroker;
use crate::run_state::{MemoryGuard, RunState};
use crate::runtime::Runtime;
use crate::termination::{classify_trap, Latched, Phase, Termination};
use crate::vfs::{InputFiles, Vfs};
use crate::wasi;

/// One run as the places that execute runs take it (this process, a worker pool, the
/// worker's serving loop): what to run, under which limits, with which files, and where
/// its cancellation and live output come from. The broker travels beside it, because
/// each of those places answers tool calls its own way.
pub(crate) struct Job<'a> {
    /// The run's limits.
    pub(crate) limits: &'a Limits,
    /// The guest code.
    pub(crate) code: &'a str,
    /// The run's input, as JSON text.
    pub(crate) input_json: &'a str,
    /// The files under `/input`.
    pub(crate) files: &'a InputFiles,
    /// Stops the run with status `cancelled`.
    pub(crate) cancel: &'a CancelToken,
    /// Where output goes as it is written, when someone listens.
    pub(crate) live: Option<LiveOutput>,
}

/// Runs `job` on a fresh instance of `runtime`, its tool calls answered by `broker`:
/// one prepared ahead when the runtime has one that fits (`prepared.rs`), else one
/// instantiated here. Every ending is an [`Outcome`] (run id and wall time left for the
/// caller).
pub(crate) async fn execute(runtime: &Runtime, job: Job<'_>, broker: GuestBroker) -> Outcome {
    let Job { limits, code, input_json, files, cancel, live } = job;
    let engine = runtime.engine();
    let stdout = OutputCapture::new(OutputStream::Stdout, limits.max_stdout_bytes as usize);
    let stderr = OutputCapture::new(OutputStream::Stderr, limits.max_stderr_bytes as usize);
    stdout.set_live(live.clone());
    stderr.set_live(live);
    let state = run_state(limits, files, broker, cancel.clone(), &stdout, &stderr);
    let (mut store, prepared, fuel) = match fresh_store(runtime, state, limits) {
        Ok(fresh) => fresh,
        Err(message) => return internal(message),
    };

    let hard_timeout = time_bound(limits, engine.epoch_tick());
    // Zero for a prepared instance: it was instantiated before the run.
    let mut instantiate_time = Duration::ZERO;
    let call = async {
        let runner = match prepared {
            Some(runner) => runner,
            None => {
                let instantiate_started = Instant::now();
                let instantiated = runtime.pre().instantiate_async(&mut store).await;
                instantiate_time = instantiate_started.elapsed();
                instantiated.map_err(|err| (Phase::Instantiate, err))?
            }
        };
        runner.wasmbox_sandbox_runner().call_run(&mut store, code, input_json).await.map_err(|err| (Phase::Run, err))
    };
    let result = within(hard_timeout, cancel, call).await;

    // The call future is gone; the Store is only read from here on, then retired.
    let fuel_used = store.get_fuel().map_or(0, |left| fuel.saturating_sub(left));
    let state = store.data_mut();
    let termination = termination(result, state.cancel.is_cancelled());
    let output = (stdout.snapshot(), stderr.snapshot());
    let report = std::mem::replace(&mut state.broker, NoBroker::guest_broker()).into_report();
    let mut outcome = outcome_of(termination, limits, &state.memory, output, report);
    outcome.files = std::mem::replace(&mut state.vfs, Vfs::new(0, 0, InputFiles::new())).into_outputs();
    outcome.stats = Stats {
        wall_time_us: 0,
        instantiate_time_us: instantiate_time.as_micros() as u64,
        fuel_used,
        peak_memory_bytes: state.memory.peak_bytes() as u64,
    };
    retire(runtime, store);
    outcome
}

/// A Store holding `state` for one run of `runtime` (or every step of a session), and
/// its instance when one prepared ahead fits `limits` (`prepared.rs`); with `None` the
/// caller instantiates `runtime.pre()` in the Store. The third value is the Store's fuel
/// budget, as [`refuel`] gives it; the error, why wasmtime refused that budget.
pub(crate) fn fresh_store(
    runtime: &Runtime,
    state: RunState,
    limits: &Limits,
) -> Result<(Store<RunState>, Option<CodeRunner>, u64), String> {
    let engine = runtime.engine();
    let taken = engine.preparer().take(runtime.prepared(), limits);
    engine.metrics_handle().fresh_instance(taken.is_some());
    if let Some(taken) = taken {
        let (store, runner, fuel) = taken.start(state, limits);
        return Ok((store, Some(runner), fuel));
    }
    let mut store = store_with(engine.wasmtime(), state);
    let fuel = refuel(&mut store, runtime, limits)?;
    Ok((store, None, fuel))
}

/// Frees a finished run's (or session's) Store: dropping it resets its pool slot, on
/// the engine's background thread when that has room, so after the caller's answer is on
/// its way.
pub(crate) fn retire(runtime: &Runtime, store: Store<RunState>) {
    runtime.engine().preparer().retire(store);
}

/// The state of one run (or every step of a session): deny-all WASI writing to `stdout`
/// and `stderr`, the in-memory filesystem with `files`, `broker`, the memory guard, and
/// the deadline (`limits.timeout_ms` from now) and `cancel` that the Store's epoch check
/// reads.
pub(crate) fn run_state(
    limits: &Limits,
    files: &InputFiles,
    broker: GuestBroker,
    cancel: CancelToken,
    stdout: &OutputCapture,
    stderr: &OutputCapture,
) -> RunState {
    RunState {
        wasi: wasi::deny_all_ctx(stdout.clone(), stderr.clone()),
        table: ResourceTable::new(),
        vfs: Vfs::new(limits.max_fs_bytes, limits.max_fs_files, files.clone()),
        broker,
        memory: MemoryGuard::new(limits.max_memory_bytes),
        deadline: Instant::now() + Duration::from_millis(limits.timeout_ms),
        cancel,
    }
}

/// A Store on `engine` holding `state`, its memory guard as the limiter and its deadline
/// and cancel token checked at every epoch tick.
pub(crate) fn store_with(engine: &wasmtime::Engine, state: RunState) -> Store<RunState> {
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.memory);
    // Compute is interrupted by epochs: at every tick past the deadline check, stop
    // if the deadline passed or the run was cancelled, else give the tokio worker
    // back (guest code never yields on its own) and check again next tick.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        let state = ctx.data();
        if state.cancel.is_cancelled() || Instant::now() >= state.deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store
}

/// Gives the Store the fuel budget of `limits` (on a metering engine) and returns it, or
/// why wasmtime refused.
pub(crate) fn refuel(store: &mut Store<RunState>, runtime: &Runtime, limits: &Limits) -> Result<u64, String> {
    // Without a budget a metering engine still needs fuel to run on.
    let fuel = limits.fuel.unwrap_or(u64::MAX);
    if runtime.engine().meters_fuel() {
        store.set_fuel(fuel).map_err(|err| format!("setting fuel: {err}"))?;
    }
    Ok(fuel)
}

/// Awaits `call` until `hard_timeout` passes or `cancel` is cancelled. A guest computing
/// is stopped by the epoch callback; one waiting on a tool or a sleep is stopped here,
/// by dropping the call.
pub(crate) async fn within<T>(
    hard_timeout: Duration,
    cancel: &CancelToken,
    call: impl std::future::Future<Output = T>,
) -> Result<T, Termination> {
    tokio::select! {
        result = tokio::time::timeout(hard_timeout, call) => result.map_err(|_| Termination::Timeout),
        () = cancel.cancelled() => Err(Termination::Cancelled),
    }
}

/// What the guest's call returned, or how it was stopped, classified by type.
pub(crate) type CallResult = Result<Result<Result<String, RunError>, (Phase, wasmtime::Error)>, Termination>;

/// How the call ended: `cancelled` tells an interrupt by cancellation from a timeout.
pub(crate) fn termination(result: CallResult, cancelled: bool) -> Termination {
    match result {
        Err(stopped) => stopped,
        Ok(Err((phase, err))) => classify_trap(&err, cancelled, phase),
        Ok(Ok(Ok(json))) => Termination::Returned(json),
        Ok(Ok(Err(run_error))) => Termination::GuestError(guest_error(run_error)),
    }
}

/// The outcome of `termination` with the breaches latched in `memory`, the captured
/// `output` (stdout, stderr; a truncated one was an overflow) and the broker's `report`.
/// Files and stats are the caller's.
pub(crate) fn outcome_of(
    termination: Termination,
    limits: &Limits,
    memory: &MemoryGuard,
    (stdout, stderr): (CapturedOutput, CapturedOutput),
    (tool_calls, breach): (Vec<ToolCallRecord>, Option<ErrorDetail>),
) -> Outcome {
    let latched = Latched { memory: memory.exceeded(), output: stdout.truncated || stderr.truncated, tool: breach };
    let mut outcome = termination.into_outcome(limits, latched);
    outcome.stdout = stdout;
    outcome.stderr = stderr;
    outcome.tool_calls = tool_calls;
    outcome
}

/// How long a run may take in all, by the host's own timer. Epochs do not fire while the
/// guest waits in an async host call (a tool, a sleep), so a host timer bounds the whole
/// run too, a little after the epoch deadline so that compute-bound guests are stopped
/// by the epoch (which reports how far they got). The one place this arithmetic lives:
/// a worker's parent waits this long plus a grace for the frame round trip.
pub(crate) fn time_bound(limits: &Limits, epoch_tick: Duration) -> Duration {
    Duration::from_millis(limits.timeout_ms).saturating_add(epoch_tick.saturating_mul(2))
}

pub(crate) fn internal(message: String) -> Outcome {
    Outcome::early(Status::Internal, ErrorDetail::new("internal", message))
}

fn guest_error(error: RunError) -> ErrorDetail {
    let from = |e: GuestException| ErrorDetail { kind: e.kind, message: e.message, traceback: e.traceback };
    match error {
        RunError::Syntax(e) | RunError::Exception(e) => from(e),
        RunError::Contract(message) => ErrorDetail::new("ContractError", message),
    }
}
