//! Where a run's guest executes, and how a worker process is wrapped in an OS sandbox
//! (DESIGN §7). The wasm boundary is the primary wall; these wrappers are a second one
//! for operators who want it.
//!
//! This module only *plans* launches: [`plan`] turns an [`Isolation`] and a
//! [`WorkerLaunch`] into a [`LaunchPlan`] (absolute program, argv, the complete
//! environment, and how to kill it). Spawning and talking to the worker is `worker/`'s
//! job. Every wrapper executable is called by absolute path, never looked up in `PATH`,
//! and a wrapper that is not available fails closed with [`IsolationError::Unavailable`]:
//! there is no silent fallback to a weaker isolation.

mod bubblewrap;
mod docker;
mod hardening;
#[cfg(windows)]
mod job_object;
mod process_tree;
mod seatbelt;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub use hardening::{harden_worker_process, WORKER_EXTRA_TASKS, WORKER_MAX_OPEN_FILES};
pub(crate) use process_tree::{contain, contain_tree, kill_tree, ProcessGuard};
use {bubblewrap::bwrap_available, docker::docker_available, seatbelt::seatbelt_available};

/// Where a run's guest executes. `InProcess` is the default.
///
/// Every variant but `InProcess` runs the guest in a `wasmbox worker` child process;
/// the broker (scope and budget checks of every tool call) always stays in the parent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// In the caller's process (`inproc`).
    #[default]
    InProcess,
    /// A plain child process (`worker`) with a cleared environment; on Unix it hardens
    /// itself with rlimits, on Windows it runs in a Job Object with a memory cap.
    Worker,
    /// The worker under bubblewrap (`bwrap`, Linux): new user, pid, ipc, net, uts and
    /// cgroup namespaces and a read-only view of only what the worker needs.
    Bubblewrap,
    /// The worker in a throwaway Docker container (`docker`) with no network, a
    /// read-only root and no capabilities.
    Docker(DockerOptions),
    /// The worker under macOS `sandbox-exec` (`seatbelt`) with a deny-default profile.
    Seatbelt,
}

/// Every spelling [`Isolation::from_str`] accepts, in [`Isolation::name`] order.
pub const ISOLATION_NAMES: [&str; 5] = ["inproc", "worker", "bwrap", "docker", "seatbelt"];

impl Isolation {
    /// Checks that this isolation can be provided on this host — the wrapper is
    /// installed and can actually sandbox (bwrap creates its namespaces, docker reaches
    /// an engine that has the image) — and says why not. `inproc` and `worker` are always available.
    ///
    /// # Errors
    /// [`Error::Isolation`](crate::Error::Isolation) with the reason.
    pub fn check_available(&self) -> Result<(), crate::Error> {
        let probed = match self {
            Isolation::InProcess | Isolation::Worker => return Ok(()),
            Isolation::Bubblewrap => bwrap_available().map(drop),
            Isolation::Docker(options) => docker_available(options).map(drop),
            Isolation::Seatbelt => seatbelt_available().map(drop),
        };
        probed.map_err(|err| err.into_error(self.name()))
    }

    /// The name `--isolation` takes: `inproc`, `worker`, `bwrap`, `docker` or `seatbelt`.
    pub fn name(&self) -> &'static str {
        match self {
            Isolation::InProcess => "inproc",
            Isolation::Worker => "worker",
            Isolation::Bubblewrap => "bwrap",
            Isolation::Docker(_) => "docker",
            Isolation::Seatbelt => "seatbelt",
        }
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An `--isolation` value that is none of [`ISOLATION_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown isolation `{0}`: choose one of inproc, worker, bwrap, docker, seatbelt")]
pub struct UnknownIsolation(pub String);

impl FromStr for Isolation {
    type Err = UnknownIsolation;

    /// Parses a [`name`](Isolation::name); `docker` gets [`DockerOptions::default`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "inproc" => Ok(Isolation::InProcess),
            "worker" => Ok(Isolation::Worker),
            "bwrap" => Ok(Isolation::Bubblewrap),
            "docker" => Ok(Isolation::Docker(DockerOptions::default())),
            "seatbelt" => Ok(Isolation::Seatbelt),
            other => Err(UnknownIsolation(other.to_owned())),
        }
    }
}

/// How [`Isolation::Docker`] runs the worker container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerOptions {
    /// The image the worker runs in, which must already be in the engine: it is never
    /// pulled. It only has to provide the dynamic loader and C library the worker binary
    /// links against: the binary itself is bind-mounted read-only. The default,
    /// [`DEFAULT_DOCKER_IMAGE`], is the image `cargo xtask docker-image` builds from the
    /// worker binary's own loader and libraries (docs/isolation.md, "The worker image").
    ///
    /// A name is resolved to its image ID when the sandbox is configured, and every
    /// container runs that ID, so moving the tag later changes nothing in this process.
    /// To pin one image across restarts, give its ID (`sha256:…`, from `docker image
    /// inspect --format '{{.Id}}'`) or a digest reference (`repo@sha256:…`) here.
    pub image: String,
    /// `--pids-limit`: processes *and threads* in the container. The worker's runtime
    /// threads and wasmtime's compile threads count, so keep headroom over the core count.
    pub pids_limit: u32,
    /// `--cpus`, in thousandths of a CPU: 1000 lets the container use one core's worth
    /// of time, spread over any cores. A worker runs one guest at a time, on one thread;
    /// more only speeds up its start. Must not be 0. Default: [`DEFAULT_DOCKER_MILLI_CPUS`].
    pub milli_cpus: u32,
    /// The Linux build of the worker to mount instead of `WorkerLaunch::worker_program`.
    /// Required on macOS, whose own binary cannot run in a Linux container; `None`
    /// elsewhere mounts the calling binary.
    pub linux_worker_program: Option<PathBuf>,
}

/// The default [`DockerOptions::image`]: what `cargo xtask docker-image` builds and
/// loads — from scratch, holding only the worker binary's ELF interpreter, shared
/// libraries and `/etc/ld.so.cache`, copied from the host that built the binary, so its
/// C library always matches the binary's.
pub const DEFAULT_DOCKER_IMAGE: &str = "wasmbox-worker";
/// The default [`DockerOptions::pids_limit`].
pub const DEFAULT_DOCKER_PIDS_LIMIT: u32 = 256;
/// The default [`DockerOptions::milli_cpus`]: one CPU.
pub const DEFAULT_DOCKER_MILLI_CPUS: u32 = 1_000;

impl Default for DockerOptions {
    fn default() -> Self {
        DockerOptions {
            image: DEFAULT_DOCKER_IMAGE.to_owned(),
            pids_limit: DEFAULT_DOCKER_PIDS_LIMIT,
            milli_cpus: DEFAULT_DOCKER_MILLI_CPUS,
            linux_worker_program: None,
        }
    }
}

/// What a worker launch needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WorkerLaunch {
    /// Absolute path of the binary that serves `worker` (e.g. the wasmbox CLI).
    pub worker_program: PathBuf,
    /// Its arguments, e.g. `["worker", "--cache-dir", "/x"]`.
    pub worker_args: Vec<OsString>,
    /// Guest component files and the cache directory: made visible read-only at the same
    /// path inside the wrapper (and nothing else is, beyond what the binary needs to start).
    pub read_only_paths: Vec<PathBuf>,
    /// The cap for the whole worker process (Job Object on Windows, `docker --memory`).
    pub memory_limit_bytes: u64,
    /// Unique per launch: the container name, so a timed-out one can be removed by name.
    pub name: String,
}

/// A fully resolved command: absolute program, args, and the only environment it gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchPlan {
    /// Absolute path of what to execute (the worker, or the wrapper around it).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// The complete environment: spawn with `env_clear()` and then exactly these.
    pub env: Vec<(OsString, OsString)>,
    /// A command that kills what killing `program` does not (a container outlives its
    /// `docker run` client). Run it with the same `env`, after [`kill_tree`].
    pub kill_plan: Option<(PathBuf, Vec<OsString>)>,
}

impl LaunchPlan {
    /// The command to spawn: program, args, cleared environment plus [`env`](Self::env),
    /// and on Unix its own process group so [`kill_tree`] reaches every process in it.
    /// Stdio is left to the caller. Stderr must be a pipe or null, not a regular file:
    /// the worker sets `RLIMIT_FSIZE` to 0 (see [`harden_worker_process`]).
    pub(crate) fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.program);
        command.args(&self.args).env_clear().envs(self.env.iter().map(|(k, v)| (k, v))).kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        command
    }

    /// The [`kill_plan`](Self::kill_plan) as a command, with the same environment.
    pub(crate) fn kill_command(&self) -> Option<tokio::process::Command> {
        let (program, args) = self.kill_plan.as_ref()?;
        let mut command = tokio::process::Command::new(program);
        command.args(args).env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
        Some(command)
    }
}

/// Why a worker launch cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum IsolationError {
    /// The wrapper is missing or cannot work on this host; nothing weaker is substituted.
    #[error("isolation `{isolation}` is not available on this host: {reason}")]
    Unavailable {
        /// [`Isolation::name`] of what was asked for.
        isolation: &'static str,
        /// What is missing, and what to do about it.
        reason: String,
    },
    /// In-process runs launch nothing; asking for a plan is a caller bug.
    #[error("isolation `inproc` runs in the calling process: there is no worker to launch")]
    InProcess,
    /// The launch itself cannot be expressed safely for this wrapper.
    #[error("cannot launch a worker with isolation `{isolation}`: {reason}")]
    InvalidLaunch {
        /// [`Isolation::name`] of what was asked for.
        isolation: &'static str,
        /// Which input is wrong.
        reason: String,
    },
}

impl IsolationError {
    /// The public error for a sandbox configured with `isolation`: the reason alone,
    /// since [`crate::Error::Isolation`] names the isolation itself.
    pub(crate) fn into_error(self, isolation: &'static str) -> crate::Error {
        let reason = match self {
            IsolationError::Unavailable { reason, .. } | IsolationError::InvalidLaunch { reason, .. } => reason,
            other => other.to_string(),
        };
        crate::Error::Isolation { isolation, reason }
    }
}

/// Plans one worker launch under `isolation`. Cheap checks (the wrapper binary exists,
/// the platform fits, paths are absolute) run every time; the probes that spawn a process
/// (can bwrap create namespaces, does the docker engine answer) run once per process
/// and are cached only when they succeed, so a fixed host is noticed.
pub(crate) fn plan(isolation: &Isolation, launch: &WorkerLaunch) -> Result<LaunchPlan, IsolationError> {
    let name = isolation.name();
    if matches!(isolation, Isolation::InProcess) {
        return Err(IsolationError::InProcess);
    }
    check_absolute(name, "worker program", &launch.worker_program)?;
    for path in &launch.read_only_paths {
        check_absolute(name, "read-only path", path)?;
    }
    match isolation {
        Isolation::InProcess => Err(IsolationError::InProcess),
        Isolation::Worker => Ok(LaunchPlan {
            program: launch.worker_program.clone(),
            args: launch.worker_args.clone(),
            env: plain_worker_env(),
            kill_plan: None,
        }),
        Isolation::Bubblewrap => bubblewrap::plan(launch),
        Isolation::Docker(options) => docker::plan(options, launch),
        Isolation::Seatbelt => seatbelt::plan(launch),
    }
}

/// The plain worker's environment. On Unix nothing. On Windows only `SystemRoot`:
/// process start-up and parts of the OS (side-by-side assemblies, Winsock, some crypto
/// providers) look it up, it is no secret, and every other variable stays behind.
fn plain_worker_env() -> Vec<(OsString, OsString)> {
    if cfg!(windows) {
        let root = std::env::var_os("SystemRoot").unwrap_or_else(|| OsString::from(r"C:\Windows"));
        vec![(OsString::from("SystemRoot"), root)]
    } else {
        Vec::new()
    }
}

fn check_absolute(isolation: &'static str, what: &str, path: &Path) -> Result<(), IsolationError> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(IsolationError::InvalidLaunch {
            isolation,
            reason: format!("the {what} {} is not absolute", path.display()),
        })
    }
}

/// The first of `candidates` that is an existing file. Wrappers are only ever run from
/// these fixed locations: a `PATH` lookup would let whoever controls `PATH` pick the
/// program that is supposed to confine the guest.
fn find_program(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|path| path.is_file())
}

/// Runs a probe command with a cleared environment (plus `env`) and a short deadline;
/// `Err` carries what went wrong, with the program's stderr.
fn probe(program: &Path, args: &[&str], env: &[(OsString, OsString)]) -> Result<String, String> {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", program.display()))?;
    // A hung engine must not hang the caller: poll with a deadline, then kill.
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < PROBE_TIMEOUT => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} did not answer within {PROBE_TIMEOUT:?}", program.display()));
            }
            Err(e) => return Err(format!("could not wait for {}: {e}", program.display())),
        }
    }
    let output = child.wait_with_output().map_err(|e| format!("could not read {}: {e}", program.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        Err(format!(
            "`{} {}` failed ({}){}{}",
            program.display(),
            args.join(" "),
            output.status,
            if stderr.is_empty() { "" } else { ": " },
            stderr
        ))
    }
}

/// Caches a successful probe for the life of the process; failures are not cached, so
/// each launch re-probes and reports the current reason.
struct ProbeCache(std::sync::OnceLock<PathBuf>);

impl ProbeCache {
    const fn new() -> Self {
        ProbeCache(std::sync::OnceLock::new())
    }

    fn get_or_probe(&self, probe: impl FnOnce() -> Result<PathBuf, IsolationError>) -> Result<PathBuf, IsolationError> {
        if let Some(path) = self.0.get() {
            return Ok(path.clone());
        }
        let path = probe()?;
        Ok(self.0.get_or_init(|| path).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_str() {
        for name in ISOLATION_NAMES {
            let isolation: Isolation = name.parse().unwrap();
            assert_eq!(isolation.name(), name);
            assert_eq!(isolation.to_string(), name);
        }
        assert_eq!("docker".parse::<Isolation>().unwrap(), Isolation::Docker(DockerOptions::default()));
        assert_eq!(Isolation::default(), Isolation::InProcess);
    }

    #[test]
    fn unknown_names_list_the_choices() {
        let error = "Docker".parse::<Isolation>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown isolation `Docker`: choose one of inproc, worker, bwrap, docker, seatbelt"
        );
        assert!("".parse::<Isolation>().is_err());
    }

    #[test]
    fn docker_defaults_are_documented_values() {
        let options = DockerOptions::default();
        assert_eq!(options.image, "wasmbox-worker");
        assert_eq!(options.pids_limit, 256);
        assert_eq!(options.milli_cpus, 1_000);
        assert_eq!(options.linux_worker_program, None);
    }

    fn launch() -> WorkerLaunch {
        WorkerLaunch {
            worker_program: PathBuf::from("/opt/wasmbox/bin/wasmbox"),
            worker_args: vec!["worker".into(), "--cache-dir".into(), "/var/cache/wasmbox".into()],
            read_only_paths: vec![PathBuf::from("/var/cache/wasmbox")],
            memory_limit_bytes: 512 << 20,
            name: "wasmbox-worker-1".into(),
        }
    }

    #[test]
    fn in_process_has_nothing_to_launch() {
        assert_eq!(plan(&Isolation::InProcess, &launch()), Err(IsolationError::InProcess));
    }

    #[test]
    fn plain_worker_runs_the_program_with_an_empty_environment() {
        let plan = plan(&Isolation::Worker, &launch()).unwrap();
        assert_eq!(plan.program, PathBuf::from("/opt/wasmbox/bin/wasmbox"));
        assert_eq!(plan.args, launch().worker_args);
        assert_eq!(plan.kill_plan, None);
        if cfg!(unix) {
            assert!(plan.env.is_empty());
        }
    }

    #[test]
    fn relative_paths_are_refused() {
        let mut relative = launch();
        relative.worker_program = PathBuf::from("wasmbox");
        let error = plan(&Isolation::Worker, &relative).unwrap_err();
        assert!(matches!(error, IsolationError::InvalidLaunch { isolation: "worker", .. }), "{error}");
        let mut relative = launch();
        relative.read_only_paths.push(PathBuf::from("cache"));
        assert!(plan(&Isolation::Worker, &relative).is_err());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_planned_command_gets_only_the_planned_environment() {
        // The test process has PATH, HOME, ...; the child must see none of them.
        assert!(std::env::var_os("PATH").is_some());
        let plan = LaunchPlan {
            program: PathBuf::from("/usr/bin/env"),
            args: Vec::new(),
            env: plain_worker_env(),
            kill_plan: None,
        };
        let output = plan.command().output().await.unwrap();
        assert!(output.status.success());
        assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    }
}
