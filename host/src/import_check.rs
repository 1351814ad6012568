//! The import check: before a component is linked, every import it declares is held
//! against what a wasmbox guest is given, and anything more is refused by name.
//!
//! wasmtime's linker would accept a component that imports `wasi:filesystem/preopens`
//! or `wasi:sockets/tcp`, because `wasmtime-wasi` links them — and the guest would then
//! find every call failing at run time (the WASI context grants no preopened directory
//! and no network). A component that imports them *expects* a capability it will not
//! get; refusing it at load time, naming the import, is the clearer answer. The same
//! goes for interfaces the host does not provide at all (`wasi:http`, another
//! package), and for a `wasmbox:sandbox` version outside the ones this host serves.
//!
//! What a guest is given, by interface:
//! - `wasmbox:sandbox/tools` and (since 0.1.1) `wasmbox:sandbox/files`, the run's
//!   in-memory files, at a version compatible with one the host serves
//!   ([`SERVED_SANDBOX_VERSIONS`]; for a 0.x version the minor number is the major);
//! - WASI 0.2 `cli` (captured stdout/stderr, closed stdin, empty environment and
//!   arguments, exit), `clocks`, `io` and `random`: language runtimes need them and
//!   they grant nothing beyond the wall clock and random numbers.
//!
//! Opt-in: WASI 0.2 `filesystem` is the run's private in-memory tree (`vfs/`: `/input`,
//! `/output`, `/tmp`, never a host directory) and `sockets` is linked but every call
//! fails. Language runtimes import both through their libc whether or not a script uses
//! them (CPython both, StarlingMonkey the filesystem), so [`ImportPolicy::AllowInertWasi`]
//! accepts them (the built-in guests load with it); the default, [`ImportPolicy::Strict`],
//! refuses them — a Rust guest imports them only if it uses `std::fs` or `std::net`.
//!
//! The check looks at names only; wasmtime's linker then checks the types (a function
//! the host lacks, a changed signature) when the component is linked.

use wasmtime::component::Component;

use crate::error::Error;

/// The versions of the `wasmbox:sandbox` package this host serves. After a breaking
/// change the old version stays here for one release, next to the new one (see
/// docs/guests.md, "Versioning").
pub const SERVED_SANDBOX_VERSIONS: &[&str] = &["0.1.2"];

/// Which imports a guest component may declare beyond what every guest is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ImportPolicy {
    /// The default for components you load: `wasmbox:sandbox/tools` and `files` and WASI
    /// `cli`, `clocks`, `io` and `random`, nothing else. A component that imports the WASI
    /// filesystem or sockets is refused.
    #[default]
    Strict,
    /// Also accepts the WASI `filesystem` interfaces (the run's in-memory files, no host
    /// directory) and `sockets` (linked but inert: no network): for language runtimes
    /// whose libc imports them regardless, like the built-in Python and JavaScript guests.
    AllowInertWasi,
}

/// WASI 0.2 interfaces that work for a guest, by package.
const GIVEN_WASI: &[(&str, &[&str])] = &[
    (
        "cli",
        &[
            "environment",
            "exit",
            "stdin",
            "stdout",
            "stderr",
            "terminal-input",
            "terminal-output",
            "terminal-stdin",
            "terminal-stdout",
            "terminal-stderr",
        ],
    ),
    ("clocks", &["monotonic-clock", "wall-clock"]),
    ("io", &["error", "poll", "streams"]),
    ("random", &["random", "insecure", "insecure-seed"]),
];

/// WASI 0.2 interfaces that are linked but where every call fails, and why.
const INERT_WASI: &[(&str, &[&str], &str)] = &[
    ("filesystem", &["types", "preopens"], "guests get no filesystem (no preopened directories)"),
    (
        "sockets",
        &["network", "instance-network", "tcp", "tcp-create-socket", "udp", "udp-create-socket", "ip-name-lookup"],
        "guests get no network",
    ),
];

/// Refuses `component` if it imports anything `policy` does not allow, or does not
/// export a runner of a served `wasmbox:sandbox` version.
pub(crate) fn check(
    engine: &wasmtime::Engine,
    component: &Component,
    guest: &str,
    policy: ImportPolicy,
) -> Result<(), Error> {
    let ty = component.component_type();
    for (import, _) in ty.imports(engine) {
        check_import(import, policy).map_err(|reason| Error::UnsupportedImport {
            guest: guest.into(),
            import: import.into(),
            reason,
        })?;
    }
    let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
    check_runner_export(&exports).map_err(|reason| Error::InvalidComponent(format!("guest component {guest} {reason}")))
}

/// Why `import` is refused under `policy`, completing "imports `…`, which …".
pub(crate) fn check_import(import: &str, policy: ImportPolicy) -> Result<(), String> {
    let Some(name) = InterfaceName::parse(import) else {
        return Err(not_provided());
    };
    match (name.namespace, name.package) {
        ("wasmbox", "sandbox") => {
            if name.interface != "tools" && name.interface != "files" {
                return Err(not_provided());
            }
            check_sandbox_version(name.version)
        }
        ("wasi", package) => {
            let given = GIVEN_WASI.iter().any(|(p, names)| *p == package && names.contains(&name.interface));
            let inert = INERT_WASI.iter().find(|(p, names, _)| *p == package && names.contains(&name.interface));
            if !given && inert.is_none() {
                return Err(not_provided());
            }
            if !name.version.is_some_and(|v| v.track() == Version::WASI_0_2.track() && v.pre.is_empty()) {
                return Err("is not at WASI 0.2, the version this host provides (wasi:…@0.2.x)".into());
            }
            match inert {
                Some((_, _, why)) if policy == ImportPolicy::Strict => Err(format!(
                    "would not work: {why}. Remove what uses it from the guest (in Rust, \
                     std::fs or std::net), or load it with ImportPolicy::AllowInertWasi (CLI: \
                     --allow-inert-wasi) if only its language runtime links it"
                )),
                _ => Ok(()),
            }
        }
        _ => Err(not_provided()),
    }
}

fn not_provided() -> String {
    "this host does not provide (guests get wasmbox:sandbox/tools and files and WASI 0.2 cli, clocks, io and random)"
        .into()
}

/// The component must export `wasmbox:sandbox/runner` at a served version.
fn check_runner_export(exports: &[&str]) -> Result<(), String> {
    let runners: Vec<(&str, InterfaceName)> = exports
        .iter()
        .filter_map(|export| Some((*export, InterfaceName::parse(export)?)))
        .filter(|(_, n)| (n.namespace, n.package, n.interface) == ("wasmbox", "sandbox", "runner"))
        .collect();
    match runners.as_slice() {
        [] => Err("exports no `wasmbox:sandbox/runner` interface: it must target the code-runner world of wit/".into()),
        [(export, name), ..] => {
            check_sandbox_version(name.version).map_err(|why| format!("exports `{export}`, which {why}"))
        }
    }
}

fn check_sandbox_version(version: Option<Version>) -> Result<(), String> {
    let served = SERVED_SANDBOX_VERSIONS.iter().filter_map(|v| Version::parse(v));
    if version.is_some_and(|v| served.clone().any(|s| s.track() == v.track() && v.pre.is_empty())) {
        return Ok(());
    }
    let served: Vec<String> = served.map(|v| format!("{}.x", v.track_name())).collect();
    Err(format!(
        "targets a wasmbox:sandbox version this host does not serve (it serves {}): rebuild the guest \
         against this host's wit/, or run it on a host release that serves its version",
        served.join(", ")
    ))
}

/// `namespace:package/interface@version`, the form of an interface import or export.
#[derive(Debug, PartialEq)]
struct InterfaceName<'a> {
    namespace: &'a str,
    package: &'a str,
    interface: &'a str,
    version: Option<Version<'a>>,
}

impl<'a> InterfaceName<'a> {
    fn parse(name: &'a str) -> Option<Self> {
        let (path, version) = match name.split_once('@') {
            Some((path, version)) => (path, Some(Version::parse(version)?)),
            None => (name, None),
        };
        let (namespace, rest) = path.split_once(':')?;
        let (package, interface) = rest.split_once('/')?;
        Some(InterfaceName { namespace, package, interface, version })
    }
}

/// A semantic version; `pre` is the pre-release suffix (build metadata is ignored).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Version<'a> {
    major: u64,
    minor: u64,
    patch: u64,
    pre: &'a str,
}

impl<'a> Version<'a> {
    const WASI_0_2: Version<'static> = Version { major: 0, minor: 2, patch: 0, pre: "" };

    fn parse(text: &'a str) -> Option<Self> {
        let text = text.split_once('+').map_or(text, |(version, _build)| version);
        let (core, pre) = text.split_once('-').unwrap_or((text, ""));
        let mut parts = core.split('.').map(|n| n.parse::<u64>().ok());
        let version = Version { major: parts.next()??, minor: parts.next()??, patch: parts.next()??, pre };
        parts.next().is_none().then_some(version)
    }

    /// Versions with the same track are compatible (semver, as wasmtime's linker and
    /// Cargo read it): the major number, or the minor one while the major is 0.
    fn track(self) -> (u64, u64, Option<u64>) {
        match (self.major, self.minor) {
            (0, 0) => (0, 0, Some(self.patch)),
            (0, minor) => (0, minor, None),
            (major, _) => (major, 0, None),
        }
    }

    fn track_name(self) -> String {
        match self.track() {
            (major, 0, None) if major > 0 => format!("{major}"),
            (major, minor, _) => format!("{major}.{minor}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(import: &str, policy: ImportPolicy) -> bool {
        check_import(import, policy).is_ok()
    }

    #[test]
    fn the_world_and_the_working_wasi_interfaces_are_allowed() {
        for import in [
            "wasmbox:sandbox/tools@0.1.0",
            "wasmbox:sandbox/tools@0.1.7",
            "wasmbox:sandbox/files@0.1.1",
            "wasi:cli/stdout@0.2.0",
            "wasi:io/streams@0.2.6",
            "wasi:clocks/wall-clock@0.2.12",
            "wasi:random/random@0.2.3",
        ] {
            assert!(allowed(import, ImportPolicy::Strict), "{import}");
        }
    }

    #[test]
    fn inert_wasi_is_refused_unless_the_policy_allows_it() {
        for import in ["wasi:filesystem/preopens@0.2.0", "wasi:filesystem/types@0.2.6", "wasi:sockets/tcp@0.2.0"] {
            let why = check_import(import, ImportPolicy::Strict).unwrap_err();
            assert!(why.contains("AllowInertWasi"), "{why}");
            assert!(allowed(import, ImportPolicy::AllowInertWasi), "{import}");
        }
    }

    #[test]
    fn foreign_interfaces_and_versions_are_refused_under_any_policy() {
        for import in [
            "wasi:http/outgoing-handler@0.2.0",
            "wasi:io/streams@0.3.0",
            "wasi:io/streams@0.2.0-rc-2023-11-10",
            "wasi:io/streams",
            "wasmbox:sandbox/tools@0.2.0",
            "wasmbox:sandbox/tools@1.0.0",
            "wasmbox:sandbox/tools",
            "wasmbox:sandbox/runner@0.1.0",
            "acme:secrets/vault@1.0.0",
            "get-secret",
        ] {
            assert!(!allowed(import, ImportPolicy::AllowInertWasi), "{import}");
        }
        let why = check_import("wasmbox:sandbox/tools@0.2.0", ImportPolicy::Strict).unwrap_err();
        assert!(why.contains("serves 0.1.x"), "{why}");
    }

    #[test]
    fn the_runner_export_must_be_there_at_a_served_version() {
        assert!(check_runner_export(&["wasmbox:sandbox/runner@0.1.0"]).is_ok());
        assert!(check_runner_export(&["run"]).unwrap_err().contains("code-runner"));
        assert!(check_runner_export(&["wasmbox:sandbox/runner@1.0.0"]).unwrap_err().contains("does not serve"));
    }

    #[test]
    fn versions_parse_and_group_into_semver_tracks() {
        let v = |s| Version::parse(s).unwrap();
        assert_eq!(v("0.2.6").track(), v("0.2.0").track());
        assert_ne!(v("0.2.0").track(), v("0.1.0").track());
        assert_eq!(v("1.4.0").track(), v("1.0.0").track());
        assert_ne!(v("0.0.1").track(), v("0.0.2").track());
        assert_eq!(v("0.2.0-rc-1").pre, "rc-1");
        assert_eq!(v("1.0.0+build.5"), v("1.0.0"));
        assert!(Version::parse("1.0").is_none() && Version::parse("1.0.0.0").is_none());
    }

    #[test]
    fn the_served_version_is_the_one_in_wit() {
        let wit = include_str!("../wit/sandbox.wit");
        let current = SERVED_SANDBOX_VERSIONS.last().expect("a served version");
        assert!(wit.contains(&format!("package wasmbox:sandbox@{current};")), "update SERVED_SANDBOX_VERSIONS");
    }
}
