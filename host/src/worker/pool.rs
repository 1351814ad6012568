//! Runs a sandbox's runs in worker processes: picks a warm worker or launches one under
//! the chosen OS wrapper, drives the run, and turns what came back into an outcome the
//! parent can vouch for.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::process::{Fault, WorkerProcess};
use super::protocol::{max_reply_frame_bytes, RunRequest, ToolListing};
use crate::broker::{self, BrokerCtx, JsonError};
use crate::cancel::CancelToken;
use crate::engine::Engine;
use crate::error::Error;
use crate::import_check::ImportPolicy;
use crate::isolation::{self, Isolation, WorkerLaunch};
use crate::limits::Limits;
use crate::outcome::{CapturedOutput, ErrorDetail, Outcome, Status};

/// What a worker process may use beyond the guest's own memory cap: its code, the
/// mapped precompiled guest, the runtime's stacks and buffers.
const WORKER_OVERHEAD_BYTES: u64 = 512 << 20;
/// How long past the run's deadline the parent waits for the worker's own timeout
/// report before killing it: process scheduling, the frame round trip.
const DEADLINE_GRACE: Duration = Duration::from_secs(1);
/// The environment variable naming the worker binary.
pub const WORKER_PROGRAM_ENV: &str = "WASMBOX_WORKER";

/// How runs reach worker processes (see [`Isolation`]).
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The binary that serves `worker` runs: the `wasmbox` CLI, or any program that
    /// calls [`serve`](crate::worker::serve) for a `worker` argument. `None`:
    /// `$WASMBOX_WORKER`, else a `wasmbox` executable beside the current one.
    pub program: Option<PathBuf>,
    /// Workers kept running between runs, each serving one run at a time. 0 starts a
    /// fresh process for every run (slower, nothing survives a run). Default 2.
    pub max_idle_workers: usize,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions { program: None, max_idle_workers: 2 }
    }
}

/// The guest file and import policy a worker loads; runtimes built from bytes have none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GuestSource {
    pub(crate) path: PathBuf,
    pub(crate) policy: ImportPolicy,
}

/// The worker processes of one sandbox configuration.
pub(crate) struct WorkerPool {
    isolation: Isolation,
    program: PathBuf,
    guest: GuestSource,
    cache_dir: PathBuf,
    epoch_tick_ms: u64,
    fuel_metering: bool,
    keep_resident_bytes: usize,
    max_idle: usize,
    idle: Mutex<Vec<WorkerProcess>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("isolation", &self.isolation)
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl WorkerPool {
    /// Checks everything a launch needs now, so that an unavailable wrapper fails when
    /// the sandbox is configured rather than at its first run — and never falls back.
    pub(crate) fn new(
        isolation: Isolation,
        options: WorkerOptions,
        engine: &Engine,
        guest: Option<&GuestSource>,
    ) -> Result<Self, Error> {
        let name = isolation.name();
        let guest = guest.cloned().ok_or_else(|| Error::Isolation {
            isolation: name,
            reason: "the runtime was loaded from bytes; a worker loads its guest from a file, so use \
                     Runtime::from_file, python or javascript"
                .into(),
        })?;
        let program = match options.program {
            Some(program) => program,
            None => default_program().map_err(|reason| Error::Isolation { isolation: name, reason })?,
        };
        if !program.is_absolute() || !program.is_file() {
            let reason = format!("the worker program {} is not an absolute path to a file", program.display());
            return Err(Error::Isolation { isolation: name, reason });
        }
        let pool = WorkerPool {
            isolation,
            program,
            guest,
            cache_dir: engine.cache_dir().to_owned(),
            epoch_tick_ms: engine.epoch_tick().as_millis() as u64,
            fuel_metering: engine.meters_fuel(),
            keep_resident_bytes: engine.keep_resident_bytes(),
            max_idle: options.max_idle_workers,
            idle: Mutex::default(),
        };
        isolation::plan(&pool.isolation, &pool.launch(&Limits::default())).map_err(|err| err.into_error(name))?;
        Ok(pool)
    }

    fn idle(&self) -> MutexGuard<'_, Vec<WorkerProcess>> {
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn launch(&self, limits: &Limits) -> WorkerLaunch {
        let mut worker_args: Vec<OsString> = vec!["worker".into(), "--cache-dir".into()];
        worker_args.push(self.cache_dir.clone().into_os_string());
        worker_args.push("--epoch-tick-ms".into());
        worker_args.push(self.epoch_tick_ms.to_string().into());
        if self.fuel_metering {
            worker_args.push("--fuel-metering".into());
        }
        worker_args.push("--keep-resident-bytes".into());
        worker_args.push(self.keep_resident_bytes.to_string().into());
        WorkerLaunch {
            worker_program: self.program.clone(),
            worker_args,
            read_only_paths: vec![self.guest.path.clone(), self.cache_dir.clone()],
            memory_limit_bytes: limits.max_memory_bytes.saturating_add(WORKER_OVERHEAD_BYTES),
            name: format!("wasmbox-worker-{}", uuid::Uuid::new_v4()),
        }
    }

    async fn take_or_launch(&self, limits: &Limits) -> Result<WorkerProcess, Fault> {
        loop {
            let Some(mut worker) = self.idle().pop() else { break };
            // A warm worker may have been killed from outside while idle.
            if worker.is_alive() {
                return Ok(worker);
            }
        }
        let launch = self.launch(limits);
        let plan = isolation::plan(&self.isolation, &launch).map_err(|e| Fault::Launch(e.to_string()))?;
        WorkerProcess::launch(plan, launch.memory_limit_bytes).await
    }

    fn give_back(&self, worker: WorkerProcess) {
        let mut idle = self.idle();
        if idle.len() < self.max_idle {
            idle.push(worker);
        }
    }

    /// Runs in a worker. The parent's `broker` answers every tool call, so scope,
    /// budgets and the trail are the parent's, whatever the worker claims.
    pub(crate) async fn run(
        &self,
        limits: &Limits,
        code: &str,
        input_json: &str,
        mut broker: BrokerCtx,
        cancel: &CancelToken,
    ) -> Outcome {
        let request = RunRequest {
            guest: self.guest.path.clone(),
            policy: self.guest.policy,
            code: code.to_owned(),
            input_json: input_json.to_owned(),
            limits: limits.clone(),
            tools: broker
                .list()
                .into_iter()
                .map(|t| ToolListing { name: t.name, description: t.description, args_schema: t.args_schema })
                .collect(),
        };
        let deadline =
            Instant::now() + Duration::from_millis(limits.timeout_ms) + 2 * self.epoch_tick() + DEADLINE_GRACE;
        let result = match self.take_or_launch(limits).await {
            Err(fault) => Err(fault),
            Ok(mut worker) => {
                match worker.run(request, &mut broker, max_reply_frame_bytes(limits), deadline, cancel).await {
                    Ok(outcome) => {
                        self.give_back(worker);
                        Ok(outcome)
                    }
                    Err(fault) => Err(worker.fail(fault).await),
                }
            }
        };
        let (trail, breach) = broker.into_report();
        let mut outcome = match result {
            Ok(reported) => vouch_for(reported, limits, breach),
            Err(fault) => fault_outcome(fault, limits),
        };
        outcome.tool_calls = trail;
        outcome
    }

    fn epoch_tick(&self) -> Duration {
        Duration::from_millis(self.epoch_tick_ms)
    }
}

/// `$WASMBOX_WORKER`, else `wasmbox` beside the current executable (or the current
/// executable itself when it is `wasmbox`).
fn default_program() -> Result<PathBuf, String> {
    if let Some(program) = std::env::var_os(WORKER_PROGRAM_ENV) {
        return Ok(PathBuf::from(program));
    }
    let current = std::env::current_exe().map_err(|e| format!("cannot locate the current executable: {e}"))?;
    let file_name = format!("wasmbox{}", std::env::consts::EXE_SUFFIX);
    if current.file_name().is_some_and(|name| name == file_name.as_str()) {
        return Ok(current);
    }
    let beside = current.parent().map(|dir| dir.join(&file_name));
    match beside {
        Some(path) if path.is_file() => Ok(path),
        _ => Err(format!(
            "no worker program: set {WORKER_PROGRAM_ENV} or WorkerOptions::program to the wasmbox binary \
             (none found beside {})",
            current.display()
        )),
    }
}

/// Takes a worker's outcome on the parent's terms: the parent's latched tool breach
/// applies, and nothing in it may exceed what the run's limits allow an in-process run.
pub(crate) fn vouch_for(mut outcome: Outcome, limits: &Limits, breach: Option<ErrorDetail>) -> Outcome {
    cap_output(&mut outcome.stdout, limits.max_stdout_bytes);
    cap_output(&mut outcome.stderr, limits.max_stderr_bytes);
    if let Some(value) = &outcome.value {
        if let Err(err) =
            broker::serialize_capped(value, limits.max_result_bytes, limits.max_json_depth, "the run's value")
        {
            let status = if matches!(err, JsonError::TooLarge { .. }) { Status::OutputLimit } else { Status::Error };
            outcome.status = status;
            outcome.value = None;
            outcome.error = Some(ErrorDetail::new("max_result_bytes", err.to_string()));
        }
    }
    if outcome.status != Status::Ok {
        outcome.value = outcome.value.filter(|_| outcome.status == Status::ToolLimit);
    }
    if let Some(breach) = breach {
        // The same precedence as in-process: hard stops and resource statuses win.
        if matches!(outcome.status, Status::Ok | Status::Error) {
            outcome.status = Status::ToolLimit;
            outcome.error = Some(breach);
        }
    }
    if outcome.status == Status::Ok {
        outcome.error = None;
    } else if outcome.error.is_none() {
        outcome.error = Some(ErrorDetail::new("worker", format!("the worker reported `{}`", outcome.status)));
    }
    outcome
}

fn cap_output(output: &mut CapturedOutput, cap: u64) {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    if output.text.len() > cap {
        let mut end = cap;
        while !output.text.is_char_boundary(end) {
            end -= 1;
        }
        output.text.truncate(end);
        output.truncated = true;
    }
}

fn fault_outcome(fault: Fault, limits: &Limits) -> Outcome {
    let (status, error) = match fault {
        Fault::Launch(message) => (Status::Internal, ErrorDetail::new("worker_launch", message)),
        Fault::Crashed(message) => (Status::Crashed, ErrorDetail::new("worker_crashed", message)),
        Fault::Timeout => (
            Status::Timeout,
            ErrorDetail::new(
                "timeout",
                format!("the worker did not finish the run within its deadline of {} ms", limits.timeout_ms),
            ),
        ),
        Fault::Cancelled => (Status::Cancelled, ErrorDetail::new("cancelled", "the run was cancelled")),
    };
    Outcome::early(status, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;

    /// A worker's engine must match the parent's: same cache and epoch, same fuel
    /// setting (or it would not find the precompiled guests), same memory trade-off.
    #[test]
    fn workers_are_launched_with_the_parents_engine_settings() {
        let cache = tempfile::tempdir().unwrap();
        let config = EngineConfig {
            cache_dir: cache.path().to_owned(),
            epoch_tick_ms: 7,
            fuel_metering: true,
            keep_resident_bytes: 12345,
            ..EngineConfig::default()
        };
        let engine = Engine::new(config).unwrap();
        let guest = GuestSource { path: cache.path().join("guest.wasm"), policy: ImportPolicy::Strict };
        let options = WorkerOptions { program: Some(std::env::current_exe().unwrap()), ..WorkerOptions::default() };
        let pool = WorkerPool::new(Isolation::Worker, options, &engine, Some(&guest)).unwrap();
        let args: Vec<String> =
            pool.launch(&Limits::default()).worker_args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let expected = [
            "worker",
            "--cache-dir",
            &cache.path().to_string_lossy(),
            "--epoch-tick-ms",
            "7",
            "--fuel-metering",
            "--keep-resident-bytes",
            "12345",
        ];
        assert_eq!(args, expected);
    }
}
