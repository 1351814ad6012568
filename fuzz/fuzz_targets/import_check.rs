//! The import check a component goes through before it is linked.
//!
//! Input: one selector byte (policy, mode), then either an import name or component
//! bytes. Three modes:
//! - the name check alone, on any string: what the strict policy allows the lenient one
//!   allows, and nothing outside `wasi:` and `wasmbox:sandbox/tools` is allowed;
//! - the name inside a real component (an empty instance import, and the runner export
//!   the check asks for), through wasmtime's validation and the whole check: wherever
//!   wasmtime accepts the name, the component passes exactly when the name check does;
//! - the bytes as a component (binary or WAT text), through the whole check: no panic,
//!   and only the errors a bad component should give.

#![no_main]

use std::fmt::Write;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use wasmbox::fuzzing::{check_component, check_import_name};
use wasmbox::{Engine, EngineConfig, Error, ImportPolicy};

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        // check_component never touches the cache; the engine still wants a directory.
        let dir = std::env::temp_dir().join(format!("wasmbox-fuzz-cache-{}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.recursive(true).create(&dir).expect("a cache directory");
        Engine::new(EngineConfig { cache_dir: dir, pooling: false, ..EngineConfig::default() }).expect("an engine")
    })
}

/// `name` as a WAT string literal.
fn wat_string(name: &str) -> String {
    let mut out = String::from("\"");
    for c in name.chars() {
        match c {
            ' '..='~' if c != '"' && c != '\\' => out.push(c),
            _ => write!(out, "\\u{{{:x}}}", u32::from(c)).expect("writing to a String"),
        }
    }
    out.push('"');
    out
}

/// A component importing `name` (an empty instance) and exporting a served runner.
fn component_importing(name: &str) -> String {
    format!(
        "(component (import {} (instance)) (instance $runner) (export \"wasmbox:sandbox/runner@0.1.0\" (instance $runner)))",
        wat_string(name)
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let policy = if selector & 1 == 0 { ImportPolicy::Strict } else { ImportPolicy::AllowInertWasi };
    match (selector >> 1) % 3 {
        0 => {
            let name = String::from_utf8_lossy(rest);
            let strict = check_import_name(&name, ImportPolicy::Strict);
            let lenient = check_import_name(&name, ImportPolicy::AllowInertWasi);
            assert!(strict.is_err() || lenient.is_ok(), "{name:?}: allowed under Strict, refused under AllowInertWasi");
            if lenient.is_ok() {
                assert!(name.starts_with("wasi:") || name.starts_with("wasmbox:sandbox/tools@"), "{name:?} is allowed");
            }
        }
        1 => {
            let name = String::from_utf8_lossy(rest);
            let by_name = check_import_name(&name, policy);
            match check_component(engine(), component_importing(&name).as_bytes(), policy) {
                Ok(()) => {
                    assert!(by_name.is_ok(), "a component importing {name:?} passed; the name check says {by_name:?}")
                }
                Err(Error::UnsupportedImport { import, .. }) => {
                    assert_eq!(import, name, "the check named another import");
                    assert!(by_name.is_err(), "a component importing {name:?} was refused; the name check allows it");
                }
                // wasmtime refused the name itself.
                Err(Error::InvalidComponent(_)) => {}
                Err(other) => panic!("{name:?}: {other:?}"),
            }
        }
        _ => match check_component(engine(), rest, policy) {
            Ok(()) | Err(Error::InvalidComponent(_) | Error::UnsupportedImport { .. }) => {}
            Err(other) => panic!("component bytes gave {other:?}"),
        },
    }
});
