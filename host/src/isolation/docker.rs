//! `docker` isolation: the worker in a throwaway container, talking over the container's
//! stdio (`docker run -i`), so no socket is ever mounted — which is also what makes it
//! work unchanged with Docker Desktop. The container gets no network, a read-only root,
//! no capabilities, no privilege escalation, a pids, memory and CPU cap, the caller's
//! uid:gid, and only the worker binary and the launch's read-only paths, mounted
//! read-only at their own paths. No `-e`: the container sees only the image's defaults.
//!
//! The image is never pulled (`--pull never`), and the container runs the image *ID*
//! the probe resolved, not its name: every worker of a process runs the same image even
//! if its tag is moved meanwhile, and a name that is not in the engine makes docker
//! isolation unavailable up front rather than failing at launch.
//!
//! Killing the `docker run` client does not stop the container, so the plan carries a
//! `docker rm -f <name>` kill plan.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use std::sync::Mutex;

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

/// How to get the default image into an engine, for the reason a missing image gives.
const BUILD_IMAGE_HINT: &str = "build the default image (the worker binary's own loader and libraries, nothing else) \
     from a wasmbox checkout with `cargo xtask docker-image`, or load an image of your own with `docker load` or \
     `docker import` and name it in DockerOptions::image (`--docker-image`); docs/isolation.md, \"The worker image\", \
     has the recipe";

/// Finds the docker CLI, checks that its engine answers (`docker version --format
/// '{{.Server.Version}}'`) and that `options.image` is in it, and answers the CLI and
/// the image's ID. Without a running engine or without the image this fails with the
/// reason, and for a missing image with how to build or load it.
pub(crate) fn docker_available(options: &DockerOptions) -> Result<(PathBuf, String), IsolationError> {
    let docker = PROBE.get_or_probe(|| {
        let docker = find_program(DOCKER_CANDIDATES).ok_or_else(|| {
            unavailable(format!("the docker CLI is not installed (looked for {})", DOCKER_CANDIDATES.join(", ")))
        })?;
        let version = probe(&docker, &["version", "--format", "{{.Server.Version}}"], &client_env())
            .map_err(|reason| unavailable(format!("the docker engine does not answer: {reason}")))?;
        if version.is_empty() {
            return Err(unavailable("the docker engine reported no server version".into()));
        }
        Ok(docker)
    })?;
    let image = image_id(&docker, &options.image)?;
    Ok((docker, image))
}

/// The ID (`sha256:<64 hex>`) of `image` in the engine, looked up once per name and
/// process: later launches run the same image whatever happens to the name.
fn image_id(docker: &Path, image: &str) -> Result<String, IsolationError> {
    static RESOLVED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    check_image(image)?;
    let resolved = || RESOLVED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, id)) = resolved().iter().find(|(name, _)| name == image) {
        return Ok(id.clone());
    }
    let id = probe(docker, &["image", "inspect", "--format", "{{.Id}}", image], &client_env()).map_err(|reason| {
        unavailable(format!(
            "the image `{image}` is not in the docker engine, and wasmbox never pulls one: {BUILD_IMAGE_HINT} \
             (docker said: {reason})"
        ))
    })?;
    if !is_image_id(&id) {
        return Err(unavailable(format!("the docker engine gave `{id}` as the ID of `{image}`")));
    }
    let mut resolved = resolved();
    if !resolved.iter().any(|(name, _)| name == image) {
        resolved.push((image.to_owned(), id.clone()));
    }
    Ok(id)
}

/// `sha256:` and 64 lowercase hex digits: what `docker image inspect` gives as `.Id`.
fn is_image_id(id: &str) -> bool {
    id.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// An image reference that cannot turn into an option or split into two arguments.
fn check_image(image: &str) -> Result<(), IsolationError> {
    if image.is_empty() || image.starts_with('-') || image.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err(invalid(format!("`{image}` is not a docker image name")));
    }
    Ok(())
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
    let (docker, image) = docker_available(options)?;
    let args = args(options, &image, launch, user())?;
    let kill = vec![OsString::from("rm"), OsString::from("-f"), OsString::from(&launch.name)];
    Ok(LaunchPlan { program: docker.clone(), args, env: client_env(), kill_plan: Some((docker, kill)) })
}

/// The `docker run` argv (after the program) for `launch` in `image` (an ID, or any
/// reference docker resolves locally), run as `user` (`uid:gid`).
fn args(
    options: &DockerOptions,
    image: &str,
    launch: &WorkerLaunch,
    user: Option<String>,
) -> Result<Vec<OsString>, IsolationError> {
    check_name(&launch.name)?;
    check_image(image)?;
    let worker = options.linux_worker_program.as_ref().unwrap_or(&launch.worker_program);
    let memory = launch.memory_limit_bytes.to_string();
    let cpus = cpus(options.milli_cpus)?;
    let mut args: Vec<OsString> = [
        "run",
        "--rm",
        "-i",
        // An image that is not in the engine is an error, never a download.
        "--pull",
        "never",
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
        "--cpus",
        &cpus,
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
    let targets = std::iter::once(&launch.worker_program).chain(&launch.read_only_paths);
    for dir in dirs_before_parent_components(targets) {
        let mut spec = dir.into_os_string();
        spec.push(":ro,noexec,nosuid,nodev,size=4k");
        args.extend([OsString::from("--tmpfs"), spec]);
    }
    args.push(OsString::from(image));
    args.push(launch.worker_program.clone().into());
    args.extend(launch.worker_args.iter().cloned());
    Ok(args)
}

/// `--cpus` for [`DockerOptions::milli_cpus`]: `1`, `0.5`, `2.25`.
fn cpus(milli_cpus: u32) -> Result<String, IsolationError> {
    if milli_cpus == 0 {
        return Err(invalid("DockerOptions::milli_cpus is 0: a container needs some CPU time".into()));
    }
    let (whole, fraction) = (milli_cpus / 1000, milli_cpus % 1000);
    if fraction == 0 {
        return Ok(whole.to_string());
    }
    let fraction = format!("{fraction:03}");
    Ok(format!("{whole}.{}", fraction.trim_end_matches('0')))
}

/// The directories a path names just before a `..` (`/a/b` in `/a/b/../c`), written
/// without `..`. Docker mounts at the cleaned path (`/a/c`) and creates only its
/// parents, but the worker opens the path as given, and the kernel resolves `b/..` only
/// if `/a/b` exists: each such directory gets an empty read-only tmpfs. (bwrap creates
/// every directory a destination names, so it needs nothing of the kind.)
fn dirs_before_parent_components<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> Vec<PathBuf> {
    use std::path::Component;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for path in paths {
        let mut lexical = PathBuf::new();
        for component in path.components() {
            match component {
                Component::ParentDir => {
                    if !dirs.contains(&lexical) && lexical.parent().is_some() {
                        dirs.push(lexical.clone());
                    }
                    lexical.pop();
                }
                Component::CurDir => {}
                other => lexical.push(other),
            }
        }
    }
    dirs
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

    const ID: &str = "sha256:e1d0370783d467ca19f6fd4307d81f7302469ed29bf328b36279c8a3936754a9";

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
        let args = args(&DockerOptions::default(), ID, &launch(), Some("1000:1000".into())).unwrap();
        let expected = [
            "run",
            "--rm",
            "-i",
            "--pull",
            "never",
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
            "--cpus",
            "1",
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
            ID,
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
            milli_cpus: 2_500,
            linux_worker_program: Some(PathBuf::from("/Users/me/wasmbox-linux")),
        };
        let args = args(&options, "registry.example/worker@sha256:0123", &launch(), None).unwrap();
        let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(text.windows(2).any(|w| w == ["-v", "/Users/me/wasmbox-linux:/opt/wasmbox/wasmbox:ro"]), "{text:?}");
        assert!(text.windows(2).any(|w| w == ["--pids-limit", "64"]));
        assert!(text.windows(2).any(|w| w == ["--cpus", "2.5"]));
        assert!(!text.contains(&"--user".to_string()));
        assert!(text.contains(&"registry.example/worker@sha256:0123".to_string()));
    }

    /// A guest path may go through a folder and back (`--guest host/../target/x.wasm`);
    /// inside the container `host` must exist for the worker to get there.
    #[test]
    fn paths_through_a_parent_component_get_the_directory_they_pass() {
        let mut through = launch();
        through.read_only_paths = vec![
            PathBuf::from("/work/host/../target/guests/python.wasm"),
            PathBuf::from("/work/host/../target/guests/js.wasm"),
            PathBuf::from("/srv/a/b/../../c/./d.wasm"),
        ];
        let argv = args(&DockerOptions::default(), ID, &through, None).unwrap();
        let text: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        let tmpfs: Vec<&[String]> = text.windows(2).filter(|w| w[0] == "--tmpfs").collect();
        let expected = [
            "/tmp:rw,noexec,nosuid,nodev,size=16m",
            "/work/host:ro,noexec,nosuid,nodev,size=4k",
            "/srv/a/b:ro,noexec,nosuid,nodev,size=4k",
            "/srv/a:ro,noexec,nosuid,nodev,size=4k",
        ];
        assert_eq!(tmpfs.iter().map(|w| w[1].as_str()).collect::<Vec<_>>(), expected, "{text:?}");
        // Without `..` nothing is added.
        let plain = args(&DockerOptions::default(), ID, &launch(), None).unwrap();
        assert_eq!(plain.iter().filter(|a| *a == "--tmpfs").count(), 1);
    }

    #[test]
    fn cpus_are_written_as_docker_reads_them() {
        assert_eq!(cpus(1_000).unwrap(), "1");
        assert_eq!(cpus(500).unwrap(), "0.5");
        assert_eq!(cpus(2_250).unwrap(), "2.25");
        assert_eq!(cpus(1).unwrap(), "0.001");
        assert_eq!(cpus(u32::MAX).unwrap(), "4294967.295");
        assert!(cpus(0).is_err());
    }

    #[test]
    fn unsafe_names_images_and_paths_are_refused() {
        let mut bad = launch();
        bad.name = "--privileged".into();
        assert!(args(&DockerOptions::default(), ID, &bad, None).is_err());
        bad.name = String::new();
        assert!(args(&DockerOptions::default(), ID, &bad, None).is_err());
        for image in ["--privileged", "", "debian bookworm", "debian\nx"] {
            assert!(args(&DockerOptions::default(), image, &launch(), None).is_err(), "{image:?}");
            assert!(check_image(image).is_err(), "{image:?}");
        }
        let mut colon = launch();
        colon.read_only_paths.push(PathBuf::from("/srv/a:/etc:rw"));
        let error = args(&DockerOptions::default(), ID, &colon, None).unwrap_err();
        assert!(error.to_string().contains("without `:`"), "{error}");
    }

    #[test]
    fn only_full_image_ids_pass_as_resolved() {
        assert!(is_image_id(ID));
        assert!(!is_image_id(&ID[..ID.len() - 1]));
        assert!(!is_image_id(&ID.to_uppercase()));
        assert!(!is_image_id("wasmbox-worker:latest"));
        assert!(!is_image_id(""));
    }

    #[test]
    fn client_env_passes_only_what_the_docker_cli_needs() {
        let env = client_env();
        assert!(env.iter().all(|(name, _)| CLIENT_ENV.contains(&name.to_str().unwrap())));
    }

    /// An image the engine does not have makes docker unavailable, with how to build
    /// or load one — not a launch that ends `internal`. Without an engine the probe
    /// fails earlier, closed as well. (The containers themselves run in
    /// cli/tests/isolation.rs.)
    #[test]
    fn a_missing_image_or_engine_is_unavailable() {
        let options = DockerOptions { image: "wasmbox-test-no-such-image:0".into(), ..DockerOptions::default() };
        let error = docker_available(&options).unwrap_err();
        let IsolationError::Unavailable { isolation: "docker", reason } = error else { panic!("{error}") };
        if reason.contains("wasmbox-test-no-such-image:0") {
            assert!(reason.contains("cargo xtask docker-image"), "{reason}");
            assert!(reason.contains("never pulls"), "{reason}");
        } else {
            assert!(std::env::var_os("WASMBOX_REQUIRE_DOCKER").is_none(), "docker is required here: {reason}");
            eprintln!("SKIPPED the missing-image probe: no docker engine here: {reason}");
        }
    }
}
