//! Runs a sandbox's runs in worker processes: picks a warm worker or launches one under
//! the chosen OS wrapper, drives the run, and turns what came back into an outcome the
//! parent can vouch for.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::process::{Fault, WorkerProcess};
use super::protocol::{max_reply_frame_bytes, RunRequest};
use super::serve::WorkerConfig;
use crate::broker::{BrokerCtx, ToolSummary};
use crate::engine::Engine;
use crate::error::Error;
use crate::execution::{self, Job};
use crate::isolation::{self, Isolation, WorkerLaunch};
use crate::limits::Limits;
use crate::outcome::{ErrorDetail, Outcome, Status};
use crate::runtime::GuestSource;
use crate::sandbox::{Executor, Sandbox};
use crate::termination::vouch_for;

/// What a worker process may use beyond the guest's own memory cap: its code, the
/// mapped precompiled guest, the runtime's stacks and buffers.
const WORKER_OVERHEAD_BYTES: u64 = 512 << 20;
/// What the run's files may cost a worker, per byte of the file quota: the tree itself,
/// the output files' copy in the outcome, and that outcome as a JSON frame (text escaping
/// grows up to six-fold).
const FS_BYTES_IN_WORKER: u64 = 8;
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
    ///
    /// A warm worker serves only runs with the same limits and the same tools in scope
    /// as the run that launched it (its OS limits come from that run), and is retired
    /// after a run that ended on a breach (any status but `ok`, `error` and
    /// `tool_limit`, which the parent alone latches) or after
    /// [`max_runs_per_worker`](Self::max_runs_per_worker) runs.
    pub max_idle_workers: usize,
    /// Runs one worker process serves before it is retired. Default
    /// [`DEFAULT_MAX_RUNS_PER_WORKER`]; must be at least 1.
    pub max_runs_per_worker: u32,
}

/// The default [`WorkerOptions::max_runs_per_worker`].
pub const DEFAULT_MAX_RUNS_PER_WORKER: u32 = 100;

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions { program: None, max_idle_workers: 2, max_runs_per_worker: DEFAULT_MAX_RUNS_PER_WORKER }
    }
}

/// What a warm worker was launched for: a later run may reuse it only if it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RunShape {
    limits: Limits,
    tools: Vec<ToolSummary>,
}

/// An idle worker and what it may serve.
struct IdleWorker {
    process: WorkerProcess,
    shape: RunShape,
    runs: u32,
}

/// The worker processes of one sandbox configuration.
pub(crate) struct WorkerPool {
    isolation: Isolation,
    program: PathBuf,
    guest: GuestSource,
    /// The engine settings every worker is started with: the parent's.
    config: WorkerConfig,
    max_idle: usize,
    max_runs: u32,
    idle: Mutex<Vec<IdleWorker>>,
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
        if options.max_runs_per_worker == 0 {
            let reason = "WorkerOptions::max_runs_per_worker must be at least 1".to_owned();
            return Err(Error::Isolation { isolation: name, reason });
        }
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
            config: WorkerConfig {
                cache_dir: engine.cache_dir().to_owned(),
                epoch_tick_ms: engine.epoch_tick().as_millis() as u64,
                fuel_metering: engine.meters_fuel(),
                keep_resident_bytes: engine.keep_resident_bytes(),
                max_data_bytes: None,
            },
            max_idle: options.max_idle_workers,
            max_runs: options.max_runs_per_worker,
            idle: Mutex::default(),
        };
        isolation::plan(&pool.isolation, &pool.launch(&Limits::default())).map_err(|err| err.into_error(name))?;
        Ok(pool)
    }

    fn idle(&self) -> MutexGuard<'_, Vec<IdleWorker>> {
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn launch(&self, limits: &Limits) -> WorkerLaunch {
        let memory_limit_bytes = limits
            .max_memory_bytes
            .saturating_add(WORKER_OVERHEAD_BYTES)
            .saturating_add(limits.max_fs_bytes.saturating_mul(FS_BYTES_IN_WORKER));
        // The worker caps itself at the same figure (its RLIMIT_DATA) under every wrapper.
        let config = WorkerConfig { max_data_bytes: Some(memory_limit_bytes), ..self.config.clone() };
        let mut worker_args: Vec<OsString> = vec!["worker".into()];
        worker_args.extend(config.to_args());
        WorkerLaunch {
            worker_program: self.program.clone(),
            worker_args,
            read_only_paths: vec![self.guest.path.clone(), self.config.cache_dir.clone()],
            memory_limit_bytes,
            name: format!("wasmbox-worker-{}", uuid::Uuid::new_v4()),
        }
    }

    /// A warm worker launched for runs of this shape, else a new one. Returns the runs
    /// it has served.
    async fn take_or_launch(&self, shape: &RunShape) -> Result<(WorkerProcess, u32), Fault> {
        loop {
            let found = {
                let mut idle = self.idle();
                let found = idle.iter().rposition(|worker| worker.shape == *shape);
                found.map(|at| idle.swap_remove(at))
            };
            let Some(mut worker) = found else { break };
            // A warm worker may have been killed from outside while idle.
            if worker.process.is_alive() {
                return Ok((worker.process, worker.runs));
            }
        }
        let launch = self.launch(&shape.limits);
        let plan = isolation::plan(&self.isolation, &launch).map_err(|e| Fault::Launch(e.to_string()))?;
        Ok((WorkerProcess::launch(plan, launch.memory_limit_bytes).await?, 0))
    }

    /// Keeps a worker that just served a run for the next run of the same shape, or
    /// retires it: after a breach, after its last allowed run, or when the idle set is
    /// full (the longest-idle worker goes first).
    fn give_back(&self, process: WorkerProcess, shape: RunShape, runs: u32, ended: Status) {
        let healthy = matches!(ended, Status::Ok | Status::Error | Status::ToolLimit);
        if !healthy || runs >= self.max_runs || self.max_idle == 0 {
            tokio::spawn(process.retire());
            return;
        }
        let mut idle = self.idle();
        idle.push(IdleWorker { process, shape, runs });
        if idle.len() > self.max_idle {
            let oldest = idle.remove(0);
            tokio::spawn(oldest.process.retire());
        }
    }

    /// Runs `job` in a worker. The parent's `broker` answers every tool call, so scope,
    /// budgets and the trail are the parent's, whatever the worker claims.
    pub(crate) async fn run(&self, job: Job<'_>, mut broker: BrokerCtx) -> Outcome {
        let Job { limits, code, input_json, files, cancel, live } = job;
        let request = RunRequest {
            guest: self.guest.path.clone(),
            policy: self.guest.policy,
            code: code.to_owned(),
            input_json: input_json.to_owned(),
            limits: limits.clone(),
            tools: broker.list(),
            files: files.clone(),
            live_output: live.is_some(),
        };
        let deadline = Instant::now() + execution::time_bound(limits, self.epoch_tick()) + DEADLINE_GRACE;
        let shape = RunShape { limits: limits.clone(), tools: request.tools.clone() };
        let result = match self.take_or_launch(&shape).await {
            Err(fault) => Err(fault),
            Ok((mut worker, runs)) => {
                let frame_cap = max_reply_frame_bytes(limits);
                match worker.run(request, &mut broker, frame_cap, deadline, cancel, live.as_ref()).await {
                    Ok(outcome) => {
                        self.give_back(worker, shape, runs + 1, outcome.status);
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
        Duration::from_millis(self.config.epoch_tick_ms)
    }
}

impl Sandbox {
    /// Runs each guest in a worker process under `isolation` (default workers, see
    /// [`WorkerOptions`]); [`Isolation::InProcess`] runs it in this process again.
    ///
    /// # Errors
    /// [`Error::Isolation`] when the isolation cannot be provided here (no worker
    /// binary, wrapper missing or unable to sandbox, a runtime loaded from bytes).
    /// There is no fallback to a weaker isolation.
    pub fn isolation(self, isolation: Isolation) -> Result<Self, Error> {
        self.isolation_with(isolation, WorkerOptions::default())
    }

    /// Like [`Sandbox::isolation`], with the worker binary, warm-worker count and
    /// recycling given.
    ///
    /// # Errors
    /// As [`Sandbox::isolation`].
    pub fn isolation_with(self, isolation: Isolation, options: WorkerOptions) -> Result<Self, Error> {
        let executor: Option<Arc<dyn Executor>> = match isolation {
            Isolation::InProcess => None,
            isolation => {
                let runtime = self.runtime();
                Some(Arc::new(WorkerPool::new(isolation, options, runtime.engine(), runtime.source())?))
            }
        };
        Ok(self.with_executor(executor))
    }
}

impl Executor for WorkerPool {
    fn execute<'a>(&'a self, job: Job<'a>, broker: BrokerCtx) -> BoxFuture<'a, Outcome> {
        Box::pin(self.run(job, broker))
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
        let guest = GuestSource { path: cache.path().join("guest.wasm"), policy: crate::ImportPolicy::Strict };
        let options = WorkerOptions { program: Some(std::env::current_exe().unwrap()), ..WorkerOptions::default() };
        let pool = WorkerPool::new(Isolation::Worker, options, &engine, Some(&guest)).unwrap();
        let mut args = pool.launch(&Limits::default()).worker_args.into_iter();
        assert_eq!(args.next().unwrap(), "worker");
        let config = WorkerConfig::from_args(args).unwrap();
        let expected = WorkerConfig {
            cache_dir: cache.path().to_owned(),
            epoch_tick_ms: 7,
            fuel_metering: true,
            keep_resident_bytes: 12345,
            max_data_bytes: Some(
                Limits::default().max_memory_bytes
                    + WORKER_OVERHEAD_BYTES
                    + Limits::default().max_fs_bytes * FS_BYTES_IN_WORKER,
            ),
        };
        assert_eq!(config, expected);
    }
}
