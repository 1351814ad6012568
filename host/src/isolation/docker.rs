//! `docker` isolation: the worker in a throwaway container, talking over the container's
//! stdio (`docker run -i`), so no socket is ever mounted — which is also what makes it
//! work unchanged with Docker Desktop. The container gets no network, a read-only root,
//! no capabilities, no privilege escalation, a pids and memory cap, the caller's
//! uid:gid, and only the worker binary and the launch's read-only paths, mounted
//! read-only at their own paths. No `-e`: the container sees only the image's defaults.
//!
//! Killing the `docker run` client does not stop the container, so the plan carries a
//! `docker rm -f <name>` kill plan.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{find_program, probe, DockerOptions, IsolationError, LaunchPlan, ProbeCache, WorkerLaunch};

const NAME: &str = "docker";

/// Where the docker CLI is installed: distribution packages, Docker Desktop on macOS
/// (Intel and Apple silicon Homebrew) and on Windows.
const DOCKER_CANDIDATES: &[&str] = if cfg!(windows) {
    &[r"C:\Program Files\Docker\Docker\resources\bin\docker.exe"]
} else if cfg!(target_os = "macos") {
    &["/usr/local/bin/docker", "/opt/homebrew/bin/docker", "/Applications/Docker.app/Contents/Resources/bin/docker"]
} else {
    &["/usr/bin/docker", "/usr/local/bin/docker"]
};

/// What the docker *CLI* (never the container) needs from the parent's environment to
/// find its engine and contexts (`~/.docker`). Anything else, secrets included, stays.
const CLIENT_ENV: [&str; 7] = [
    "HOME",
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "XDG_RUNTIME_DIR",
];

static PROBE: ProbeCache = ProbeCache::new();

/// Finds the docker CLI and checks that its engine answers (`docker version --format
/// '{{.Server.Version}}'`); without a running engine this fails with docker's reason.
pub(crate) fn docker_available() -> Result<PathBuf, IsolationError> {
    PROBE.get_or_probe(|| {
        let docker = find_program(DOCKER_CANDIDATES).ok_or_else(|| {
            unavailable(format!("the docker CLI is not installed (looked for {})", DOCKER_CANDIDATES.join(", ")))
        })?;
        let version = probe(&docker, &["version", "--format", "{{.Server.Version}}"], &client_env())
            .map_err(|reason| unavailable(format!("the docker engine does not answer: {reason}")))?;
        if version.is_empty() {
            return Err(unavailable("the docker engine reported no server version".into()));
        }
        Ok(docker)
    })
}

pub(super) fn plan(options: &DockerOptions, launch: &WorkerLaunch) -> Result<LaunchPlan, IsolationError> {
    if cfg!(windows) {
        // The worker's arguments and mounts name host paths, which a Linux container
        // cannot see at the same path on Windows.
        return Err(unavailable(
            "docker isolation mounts host paths at the same path in a Linux container, which Windows paths cannot be; \
             use `worker` isolation (a Job Object) or run wasmbox inside WSL"
                .into(),
        ));
    }
    if cfg!(not(target_os = "linux")) && options.linux_worker_program.is_none() {
        return Err(unavailable(
            "this host's wasmbox binary cannot run in a Linux container: set DockerOptions::linux_worker_program \
             to a Linux build of wasmbox"
                .into(),
        ));
    }
    let docker = docker_available()?;
    let args = args(options, launch, user())?;
    let kill = vec![OsString::from("rm"), OsString::from("-f"), OsString::from(&launch.name)];
    Ok(LaunchPlan { program: docker.clone(), args, env: client_env(), kill_plan: Some((docker, kill)) })
}

/// The `docker run` argv (after the program) for `launch`, run as `user` (`uid:gid`).
fn args(options: &DockerOptions, launch: &WorkerLaunch, user: Option<String>) -> Result<Vec<OsString>, IsolationError> {
    check_name(&launch.name)?;
    if options.image.is_empty() || options.image.starts_with('-') || options.image.contains(char::is_whitespace) {
        return Err(invalid(format!("`{}` is not a docker image name", options.image)));
    }
    let worker = options.linux_worker_program.as_ref().unwrap_or(&launch.worker_program);
    let memory = launch.memory_limit_bytes.to_string();
    let mut args: Vec<OsString> = [
        "run",
        "--rm",
        "-i",
        "--name",
        &launch.name,
        "--network",
        "none",
        "--read-only",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--pids-limit",
        &options.pids_limit.to_string(),
        "--memory",
        &memory,
        // Equal to --memory: no swap on top of the cap.
        "--memory-swap",
        &memory,
        "--tmpfs",
        "/tmp:rw,noexec,nosuid,nodev,size=16m",
    ]
    .map(OsString::from)
    .into();
    if let Some(user) = user {
        args.extend([OsString::from("--user"), user.into()]);
    }
    args.extend(volume(worker, &launch.worker_program)?);
    for path in &launch.read_only_paths {
        args.extend(volume(path, path)?);
    }
    args.push(OsString::from(&options.image));
    args.push(launch.worker_program.clone().into());
    args.extend(launch.worker_args.iter().cloned());
    Ok(args)
}

/// `-v source:target:ro`. `-v` splits on `:`, so a path holding one cannot be expressed
/// (and `--mount` splits on `,` instead): such paths are refused, not mangled.
fn volume(source: &Path, target: &Path) -> Result<[OsString; 2], IsolationError> {
    for path in [source, target] {
        if !path.is_absolute() || path.as_os_str().to_string_lossy().contains(':') {
            return Err(invalid(format!(
                "cannot mount {}: docker volumes need absolute paths without `:`",
                path.display()
            )));
        }
    }
    let mut spec = OsString::from(source);
    spec.push(":");
    spec.push(target);
    spec.push(":ro");
    Ok([OsString::from("-v"), spec])
}

/// Docker's container-name rule, `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, checked here so a bad
/// name cannot turn into an option.
fn check_name(name: &str) -> Result<(), IsolationError> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid {
        Ok(())
    } else {
        Err(invalid(format!("`{name}` is not a valid container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)")))
    }
}

/// The caller's `uid:gid`, so the container can read what the caller can and nothing
/// runs as the image's root.
fn user() -> Option<String> {
    #[cfg(unix)]
    {
        Some(format!("{}:{}", rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw()))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

fn client_env() -> Vec<(OsString, OsString)> {
    CLIENT_ENV.iter().filter_map(|name| std::env::var_os(name).map(|value| (OsString::from(name), value))).collect()
}

fn unavailable(reason: String) -> IsolationError {
    IsolationError::Unavailable { isolation: NAME, reason }
}

fn invalid(reason: String) -> IsolationError {
    IsolationError::InvalidLaunch { isolation: NAME, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> WorkerLaunch {
        WorkerLaunch {
            worker_program: PathBuf::from("/opt/wasmbox/wasmbox"),
            worker_args: vec!["worker".into(), "--cache-dir".into(), "/var/cache/wasmbox".into()],
            read_only_paths: vec![PathBuf::from("/var/cache/wasmbox"), PathBuf::from("/srv/guests/app (v2).wasm")],
            memory_limit_bytes: 512 * 1024 * 1024,
            name: "wasmbox-worker-7f3a".into(),
        }
    }

    #[test]
    fn argv_is_exactly_the_locked_down_run() {
        let args = args(&DockerOptions::default(), &launch(), Some("1000:1000".into())).unwrap();
        let expected = [
            "run",
            "--rm",
            "-i",
            "--name",
            "wasmbox-worker-7f3a",
            "--network",
            "none",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--pids-limit",
            "256",
            "--memory",
            "536870912",
            "--memory-swap",
            "536870912",
            "--tmpfs",
            "/tmp:rw,noexec,nosuid,nodev,size=16m",
            "--user",
            "1000:1000",
            "-v",
            "/opt/wasmbox/wasmbox:/opt/wasmbox/wasmbox:ro",
            "-v",
            "/var/cache/wasmbox:/var/cache/wasmbox:ro",
            "-v",
            "/srv/guests/app (v2).wasm:/srv/guests/app (v2).wasm:ro",
            "debian:bookworm-slim",
            "/opt/wasmbox/wasmbox",
            "worker",
            "--cache-dir",
            "/var/cache/wasmbox",
        ];
        assert_eq!(args, expected.map(OsString::from));
        assert!(!args.iter().any(|a| a.to_string_lossy().contains("docker.sock")));
        assert!(!args.iter().any(|a| a == "-e" || a == "--env" || a == "--privileged"));
    }

    #[test]
    fn a_linux_worker_build_is_mounted_where_the_worker_is_expected() {
        let options = DockerOptions {
            image: "debian:trixie-slim".into(),
            pids_limit: 64,
            linux_worker_program: Some(PathBuf::from("/Users/me/wasmbox-linux")),
        };
        let args = args(&options, &launch(), None).unwrap();
        let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(text.windows(2).any(|w| w == ["-v", "/Users/me/wasmbox-linux:/opt/wasmbox/wasmbox:ro"]), "{text:?}");
        assert!(text.windows(2).any(|w| w == ["--pids-limit", "64"]));
        assert!(!text.contains(&"--user".to_string()));
        assert!(text.contains(&"debian:trixie-slim".to_string()));
    }

    #[test]
    fn unsafe_names_images_and_paths_are_refused() {
        let mut bad = launch();
        bad.name = "--privileged".into();
        assert!(args(&DockerOptions::default(), &bad, None).is_err());
        bad.name = String::new();
        assert!(args(&DockerOptions::default(), &bad, None).is_err());
        let image = DockerOptions { image: "--privileged".into(), ..DockerOptions::default() };
        assert!(args(&image, &launch(), None).is_err());
        let mut colon = launch();
        colon.read_only_paths.push(PathBuf::from("/srv/a:/etc:rw"));
        let error = args(&DockerOptions::default(), &colon, None).unwrap_err();
        assert!(error.to_string().contains("without `:`"), "{error}");
    }

    #[test]
    fn client_env_passes_only_what_the_docker_cli_needs() {
        let env = client_env();
        assert!(env.iter().all(|(name, _)| CLIENT_ENV.contains(&name.to_str().unwrap())));
    }

    /// Fails closed with docker's own reason when the CLI or its engine is missing; runs
    /// the real container only with `WASMBOX_TEST_DOCKER=1` on a machine with an engine.
    #[test]
    fn an_unavailable_engine_fails_closed_and_a_real_one_runs_confined() {
        let isolation = super::super::Isolation::Docker(DockerOptions::default());
        let shell = WorkerLaunch {
            worker_program: PathBuf::from("/bin/sh"),
            worker_args: vec!["-c".into(), "env; cat /proc/net/dev | tail -n +3 | cut -d: -f1; echo done".into()],
            read_only_paths: Vec::new(),
            memory_limit_bytes: 64 << 20,
            name: format!("wasmbox-test-{}", std::process::id()),
        };
        match super::super::plan(&isolation, &shell) {
            Err(IsolationError::Unavailable { isolation: "docker", reason }) => {
                eprintln!("SKIPPED the real docker run: {reason}");
                assert!(std::env::var_os("WASMBOX_TEST_DOCKER").is_none(), "WASMBOX_TEST_DOCKER is set but {reason}");
            }
            Err(other) => panic!("{other}"),
            Ok(plan) if std::env::var_os("WASMBOX_TEST_DOCKER").is_some() => {
                let output = std::process::Command::new(&plan.program)
                    .args(&plan.args)
                    .env_clear()
                    .envs(plan.env.iter().map(|(k, v)| (k, v)))
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&output.stdout);
                assert!(output.status.success(), "{output:?}");
                assert!(stdout.lines().all(|l| !l.trim().starts_with("eth")), "network visible: {stdout}");
                assert!(stdout.trim_end().ends_with("done"), "{stdout}");
            }
            Ok(_) => eprintln!("SKIPPED the real docker run: set WASMBOX_TEST_DOCKER=1 to run it"),
        }
    }
}
