//! wasmbox runs untrusted code — LLM-written Python, or any WebAssembly component that
//! targets the `wasmbox:sandbox` WIT world — inside wasmtime, with fuel, deadline and
//! memory limits and no ambient capabilities. Guest code reaches the world only through
//! [`Tool`]s, mediated by one broker that checks every call against the run's [`Scope`]
//! and [`Limits`].
//!
//! # Use
//! Build one [`Engine`] per process, one [`Runtime`] per guest language, and a
//! [`Sandbox`] per configuration (tools, scope, limits); every [`Sandbox::run`] gets a
//! fresh instance and returns an [`Outcome`]:
//!
//! ```no_run
//! # async fn demo() -> Result<(), wasmbox::Error> {
//! use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Tools};
//! let engine = Engine::new(EngineConfig::default())?;
//! let sandbox = Sandbox::new(Runtime::python(&engine)?, Tools::new());
//! let outcome = sandbox.run("import math\nmath.factorial(10)").await;
//! assert_eq!(outcome.value, Some(serde_json::json!(3628800)));
//! # Ok(()) }
//! ```
//!
//! # Security
//! The guest gets a deny-all WASI context (no host files, environment, arguments, network
//! or host stdio; see `wasi.rs`), a private in-memory filesystem (`/input`, `/output`,
//! `/tmp`; see [`InputFiles`]), a fresh Store per run, and only the tools in its scope.
//! Limits that a guest could observe and swallow (a `MemoryError`, a refused tool call)
//! are latched on the host and reported in the outcome.

#![deny(missing_docs)]

mod admission;
mod audit;
mod bindings;
mod broker;
mod builtin_guest;
mod cancel;
mod engine;
mod epoch_ticker;
mod error;
mod execution;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod import_check;
mod isolation;
mod limits;
pub mod live_output;
mod metrics;
mod outcome;
mod output_capture;
mod precompile_cache;
mod prepared;
pub mod process;
mod run_request;
mod run_state;
mod runtime;
mod sandbox;
pub mod session;
mod termination;
mod vfs;
mod wasi;
pub mod worker;

pub use audit::{
    AuditConfig, AuditEvent, AuditSink, CallRef, ChannelSink, TracingSink, DEFAULT_MAX_RECORDED_STRING_BYTES,
    DEFAULT_REDACT_KEYS, REDACTED,
};
pub use broker::{
    BrokerCtx, CallContext, CallError, Inherit, JsonError, Projection, RunIdentity, Scope, Tool, ToolFailure,
    ToolRegistrationError, ToolSummary, Tools, MAX_TOOL_NAME_BYTES,
};
pub use builtin_guest::{BuiltinGuest, GuestVersions, GUEST_DIR_ENV};
pub use cancel::CancelToken;
pub use engine::{
    Engine, EngineConfig, DEFAULT_EPOCH_TICK_MS, DEFAULT_KEEP_RESIDENT_BYTES, DEFAULT_MAX_CONCURRENT_RUNS,
    DEFAULT_MAX_QUEUED_RUNS, DEFAULT_PREPARED_INSTANCES, DEFAULT_QUEUE_TIMEOUT_MS, MAX_PREPARED_INSTANCES,
};
pub use error::Error;
pub use import_check::{ImportPolicy, SERVED_SANDBOX_VERSIONS};
pub use isolation::{
    harden_worker_process, DockerOptions, Isolation, UnknownIsolation, DEFAULT_DOCKER_IMAGE, DEFAULT_DOCKER_MILLI_CPUS,
    DEFAULT_DOCKER_PIDS_LIMIT, ISOLATION_NAMES, WORKER_EXTRA_TASKS, WORKER_MAX_OPEN_FILES,
};
pub use limits::*;
pub use live_output::{OutputSink, OutputStream};
pub use metrics::{MetricsSnapshot, ToolCallCount, UNKNOWN_TOOL_LABEL};
pub use outcome::{
    CallStatus, CapturedOutput, ErrorDetail, Outcome, Stats, Status, ToolCallRecord, MAX_ERROR_KIND_BYTES,
    MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_TRACEBACK_BYTES,
};
pub use run_request::RunRequest;
pub use runtime::Runtime;
pub use sandbox::Sandbox;
pub use session::{
    Session, SessionConfig, SessionEnd, SessionError, DEFAULT_SESSION_IDLE_TIMEOUT_MS, DEFAULT_SESSION_MAX_LIFETIME_MS,
};
pub use vfs::{InputFileError, InputFiles, OutputFile};
