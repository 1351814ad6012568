//! The seam the fuzz targets in `fuzz/` need: crate-private checks of the boundary,
//! exposed exactly as the broker and the guest loader call them.
//!
//! Not part of wasmbox's API. It exists only with the `fuzzing` cargo feature (and in
//! this crate's own tests, which keep it compiling), and is hidden from the docs. The
//! worker frame decoder ([`crate::worker::protocol`]) and the broker's call path
//! ([`crate::BrokerCtx::call`]) are public already and need nothing here.
//!
//! See docs/fuzzing.md for the targets and how to run them.

use serde_json::Value;
use wasmtime::component::Component;

use crate::{Engine, Error, ImportPolicy, JsonError};

/// The broker's strict parse of JSON text from a guest (a tool's arguments, a run's
/// input): the size cap before parsing, the depth cap before recursion, then a strict
/// parse. The same function the broker calls, with the name it reports as `arguments`.
///
/// # Errors
/// Why the text was refused.
pub fn parse_capped(text: &str, max_bytes: u64, max_depth: u32) -> Result<Value, JsonError> {
    crate::broker::parse_capped(text, max_bytes, max_depth, "arguments")
}

/// The broker's capped serialisation of a value for a guest (a tool's result): the
/// depth cap, then the size cap on the text.
///
/// # Errors
/// Why the value was refused.
pub fn serialize_capped(value: &Value, max_bytes: u64, max_depth: u32) -> Result<String, JsonError> {
    crate::broker::serialize_capped(value, max_bytes, max_depth, "result")
}

/// The import check of one interface name, as a component's import list gives it
/// (`namespace:package/interface@version`): `Ok` when `policy` lets a guest import it,
/// else the reason, completing "imports `…`, which …".
///
/// # Errors
/// The reason the import is refused.
pub fn check_import_name(import: &str, policy: ImportPolicy) -> Result<(), String> {
    crate::import_check::check_import(import, policy)
}

/// What [`Runtime::from_bytes_with`](crate::Runtime::from_bytes_with) does with
/// component bytes before it links them, without the precompile cache: refuse a
/// precompiled artifact, validate and compile the bytes (binary, or WAT text), then
/// run the import check.
///
/// # Errors
/// [`Error::InvalidComponent`] for bytes that are not a component wasmtime accepts or
/// that do not export the world's runner; [`Error::UnsupportedImport`] for an import
/// a guest is not given.
pub fn check_component(engine: &Engine, bytes: &[u8], policy: ImportPolicy) -> Result<(), Error> {
    if wasmtime::Engine::detect_precompiled(bytes).is_some() {
        return Err(Error::InvalidComponent("expected a component, got a precompiled artifact".into()));
    }
    let component =
        Component::new(engine.wasmtime(), bytes).map_err(|err| Error::InvalidComponent(format!("{err:#}")))?;
    crate::import_check::check(engine.wasmtime(), &component, "fuzz", policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seam_calls_the_checks_it_names() {
        assert!(parse_capped(r#"{"a": [1, 2]}"#, 64, 2).is_ok());
        assert!(matches!(parse_capped(r#"{"a": [1, 2]}"#, 64, 1), Err(JsonError::TooDeep { .. })));
        assert!(matches!(parse_capped(r#"{"a": 1}"#, 3, 8), Err(JsonError::TooLarge { .. })));
        assert_eq!(serialize_capped(&serde_json::json!({"a": 1}), 64, 1).as_deref(), Ok(r#"{"a":1}"#));
        assert!(check_import_name("wasi:cli/stdout@0.2.0", ImportPolicy::Strict).is_ok());
        assert!(check_import_name("wasi:sockets/tcp@0.2.0", ImportPolicy::Strict).is_err());
        assert!(check_import_name("wasi:sockets/tcp@0.2.0", ImportPolicy::AllowInertWasi).is_ok());
    }

    #[test]
    fn components_go_through_validation_and_the_import_check() {
        let cache = tempfile::tempdir().unwrap();
        let config = crate::EngineConfig { cache_dir: cache.path().to_owned(), pooling: false, ..Default::default() };
        let engine = Engine::new(config).unwrap();
        let check = |bytes: &[u8]| check_component(&engine, bytes, ImportPolicy::Strict);
        assert!(matches!(check(b"\0asm not a component"), Err(Error::InvalidComponent(_))));
        let sockets = br#"(component (import "wasi:sockets/tcp@0.2.0" (instance)))"#;
        assert!(matches!(check(sockets), Err(Error::UnsupportedImport { .. })), "{:?}", check(sockets));
        // Allowed imports, but no runner export.
        let no_runner = br#"(component (import "wasi:cli/stdout@0.2.0" (instance)))"#;
        assert!(matches!(check(no_runner), Err(Error::InvalidComponent(_))), "{:?}", check(no_runner));
        // The shape fuzz/'s import_check target wraps each name in: it must pass whole
        // for an allowed name, or that target's comparison would never see a pass.
        let with_runner = br#"(component (import "wasi:cli/stdout@0.2.0" (instance)) (instance $runner)
            (export "wasmbox:sandbox/runner@0.1.0" (instance $runner)))"#;
        assert!(check(with_runner).is_ok(), "{:?}", check(with_runner));
        assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0, "the seam wrote to the cache");
    }
}
