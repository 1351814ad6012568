//! Write wasmbox guests in Rust.
//!
//! A wasmbox guest is a WebAssembly component that targets the `code-runner` world of
//! the `wasmbox:sandbox` WIT package: it exports one function, `run(code, input)`, and
//! reaches the outside world only by calling the host's tools. This crate holds the
//! bindings of that world (generated from the repository's `wit/` by `wit-bindgen`,
//! so a guest needs no WIT files of its own) and a thin typed layer over them:
//!
//! - [`export_runner!`] exports a plain Rust function as the guest's runner;
//! - [`tools::call`] calls a tool with any `Serialize` arguments and decodes the result
//!   into any `DeserializeOwned` type; [`tools::list`] says which tools this run may call;
//! - [`RunError`] and [`CallError`] are the world's error types, with constructors, and
//!   `?` turns a refused tool call into an exception of the run.
//!
//! The crate version carries the WIT version it was generated from in its build
//! metadata (`0.1.0+wit-0.1.0`); [`WIT_VERSION`] says the same at run time.
//!
//! # Example
//!
//! A guest whose code is the name of a tool, called with the run's input as its
//! arguments (the `batch` guest in `guests/rust/` is a fuller version of this):
//!
//! ```no_run
//! use serde_json::{json, Value};
//! use wasmbox_guest::{tools, RunError};
//!
//! fn run(code: &str, input: Value) -> Result<Value, RunError> {
//!     let name = code.trim();
//!     if !tools::list().iter().any(|tool| tool.name == name) {
//!         return Err(RunError::exception("NameError", format!("no tool `{name}` in scope")));
//!     }
//!     // A refused or failed call becomes an exception of the run (kind `ToolDenied`, …).
//!     let result: Value = tools::call(name, &input)?;
//!     Ok(json!({ "tool": name, "result": result }))
//! }
//!
//! wasmbox_guest::export_runner!(run);
//! ```
//!
//! Build it as a `cdylib` for `wasm32-wasip2`; the file rustc writes is already a
//! component (`docs/guests.md` has the whole recipe):
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! wasmbox-guest = { path = "…/guest-sdk" }
//! serde_json = "1"
//! ```
//!
//! ```sh
//! cargo build --release --target wasm32-wasip2
//! wasmbox run --guest target/wasm32-wasip2/release/my_guest.wasm code.txt
//! ```
//!
//! # What a guest gets
//! Stdout and stderr are captured into the run's outcome; clocks and random numbers
//! work; there is no filesystem, network, environment or argument list. The host
//! refuses, before instantiating it, a component that imports more than that (for
//! example `std::fs` pulls in `wasi:filesystem`). A panic traps the instance: the run
//! ends with status `error`, kind `Trap`, and the panic message in its stderr — return
//! a [`RunError`] instead for errors the caller should see.
//!
//! The SDK's functions call into the host, so they work only inside a guest; on any
//! other target the crate compiles (for `cargo check` and docs) but calling them panics.

#![deny(missing_docs)]

// The generated bindings name their runtime by an absolute path, which must also resolve
// inside this crate.
extern crate self as wasmbox_guest;

use serde_json::Value;

/// The version of the `wasmbox:sandbox` WIT package these bindings were generated from.
pub const WIT_VERSION: &str = "0.1.0";

/// The raw bindings of the `code-runner` world, as `wit-bindgen` generates them. Prefer
/// the typed layer ([`tools`], [`export_runner!`]); these are here for what it lacks.
#[allow(missing_docs, unsafe_code, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "code-runner",
        path: "../wit",
        // The export macro is used from guest crates through `export_runner!`.
        pub_export_macro: true,
        export_macro_name: "__export_code_runner",
        default_bindings_module: "wasmbox_guest::bindings",
        runtime_path: "wasmbox_guest::__private::wit_bindgen::rt",
    });
}

pub use bindings::exports::wasmbox::sandbox::runner::{GuestException, RunError};
pub use bindings::wasmbox::sandbox::tools::{CallError, ToolInfo};

/// Calling the host's tools.
pub mod tools {
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    use crate::bindings::wasmbox::sandbox::tools as raw;
    pub use crate::{CallError, ToolInfo};

    /// Calls tool `name` with `args` (serialized to a JSON object) and decodes its
    /// result into `R` (use [`serde_json::Value`] to take it as it comes).
    ///
    /// # Errors
    /// The host's refusal or the tool's failure, as it comes ([`CallError::Denied`],
    /// [`CallError::BudgetExhausted`], …). Arguments that do not serialize are
    /// [`CallError::InvalidArgs`] without a call; a result that does not decode into
    /// `R` is [`CallError::Failed`] — the call did happen and counts against budgets.
    pub fn call<A: Serialize + ?Sized, R: DeserializeOwned>(name: &str, args: &A) -> Result<R, CallError> {
        let args = serde_json::to_string(args)
            .map_err(|e| CallError::InvalidArgs(format!("the arguments of `{name}` are not JSON: {e}")))?;
        let result = raw::call(name, &args)?;
        serde_json::from_str(&result)
            .map_err(|e| CallError::Failed(format!("the result of `{name}` does not have the expected shape: {e}")))
    }

    /// The tools this run may call, sorted by name.
    pub fn list() -> Vec<ToolInfo> {
        raw::list_tools()
    }
}

impl CallError {
    /// The exception kind the built-in guests raise for this error (`ToolDenied`,
    /// `ToolBudgetExhausted`, `ToolInvalidArgs`, `ToolFailed`, `ToolTimeout`), so
    /// outcomes read the same whatever the guest's language.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Denied(_) => "ToolDenied",
            CallError::BudgetExhausted(_) => "ToolBudgetExhausted",
            CallError::InvalidArgs(_) => "ToolInvalidArgs",
            CallError::Failed(_) => "ToolFailed",
            CallError::Timeout(_) => "ToolTimeout",
        }
    }

    /// The host's message.
    pub fn message(&self) -> &str {
        match self {
            CallError::Denied(m)
            | CallError::BudgetExhausted(m)
            | CallError::InvalidArgs(m)
            | CallError::Failed(m)
            | CallError::Timeout(m) => m,
        }
    }
}

impl RunError {
    /// The code did not parse: kind `SyntaxError`.
    pub fn syntax(message: impl Into<String>) -> Self {
        RunError::Syntax(GuestException {
            kind: "SyntaxError".into(),
            message: message.into(),
            traceback: String::new(),
        })
    }

    /// The code failed with an exception of `kind` (`TypeError`, `NameError`, …).
    pub fn exception(kind: impl Into<String>, message: impl Into<String>) -> Self {
        RunError::Exception(GuestException { kind: kind.into(), message: message.into(), traceback: String::new() })
    }

    /// The code broke the guest contract (for example, it produced no valid value).
    pub fn contract(message: impl Into<String>) -> Self {
        RunError::Contract(message.into())
    }

    /// Attaches a traceback (where in the code it happened) to a syntax error or an
    /// exception; a contract error has none and is returned unchanged.
    pub fn with_traceback(mut self, traceback: impl Into<String>) -> Self {
        if let RunError::Syntax(e) | RunError::Exception(e) = &mut self {
            e.traceback = traceback.into();
        }
        self
    }
}

/// A refused or failed tool call that the code does not handle ends the run as an
/// exception of the matching kind (see [`CallError::kind`]).
impl From<CallError> for RunError {
    fn from(err: CallError) -> Self {
        RunError::exception(err.kind(), err.message())
    }
}

/// Exports `$run` — any `fn(&str, serde_json::Value) -> Result<serde_json::Value,
/// RunError>` — as the guest's runner. Use it once, at the top level of the crate.
///
/// The host's input is decoded before `$run` is called and the value encoded after;
/// both are JSON, so a guest never handles JSON text itself.
///
/// ```no_run
/// fn run(code: &str, _input: serde_json::Value) -> Result<serde_json::Value, wasmbox_guest::RunError> {
///     Ok(code.len().into())
/// }
/// wasmbox_guest::export_runner!(run);
/// ```
#[macro_export]
macro_rules! export_runner {
    ($run:path) => {
        const _: () = {
            struct WasmboxRunner;

            impl $crate::bindings::exports::wasmbox::sandbox::runner::Guest for WasmboxRunner {
                fn run(code: String, input_json: String) -> Result<String, $crate::RunError> {
                    $crate::__private::run(&code, &input_json, $run)
                }
            }

    $crate::bindings::__export_code_runner!(WasmboxRunner with_types_in $crate::bindings);
        };
    };
}

/// Used by the macros; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;

    use super::{RunError, Value};

    /// The runner glue: JSON in, the guest's function, JSON out.
    pub fn run(
        code: &str,
        input_json: &str,
        run: impl FnOnce(&str, Value) -> Result<Value, RunError>,
    ) -> Result<String, RunError> {
        let input = serde_json::from_str(input_json)
            .map_err(|e| RunError::contract(format!("the host sent an input that is not JSON: {e}")))?;
        // A `Value` always serializes (its maps have string keys, its numbers are finite).
        run(code, input).map(|value| value.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_errors_map_to_the_built_in_guests_exception_kinds() {
        let err: RunError = CallError::BudgetExhausted("max_tool_calls".into()).into();
        let RunError::Exception(e) = err else { panic!("{err:?}") };
        assert_eq!((e.kind.as_str(), e.message.as_str()), ("ToolBudgetExhausted", "max_tool_calls"));
    }

    #[test]
    fn the_glue_decodes_input_and_encodes_the_value() {
        let out = __private::run("x", r#"{"n": 2}"#, |code, input| Ok(serde_json::json!([code, input["n"]])));
        assert_eq!(out.unwrap(), r#"["x",2]"#);
        let bad = __private::run("x", "{", |_, _| Ok(Value::Null));
        assert!(matches!(bad, Err(RunError::Contract(_))));
        let traced = RunError::syntax("bad").with_traceback("line 1");
        assert!(matches!(traced, RunError::Syntax(e) if e.traceback == "line 1"));
    }
}
