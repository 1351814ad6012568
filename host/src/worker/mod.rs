//! Worker processes: the second wall around a guest.
//!
//! With an [`Isolation`](crate::Isolation) other than `InProcess`, a sandbox runs its
//! guests in a child process (`wasmbox worker`), optionally under an OS sandbox, and
//! talks to it over the child's stdin and stdout ([`protocol`]). The broker stays in the
//! parent — the trusted side — and answers every tool call the worker forwards after the
//! same checks as for an in-process guest. A worker that dies, hangs or sends garbage
//! ends its run `crashed` or `timeout`; the parent carries on.

mod pool;
mod process;
pub mod protocol;
mod serve;

pub use crate::isolation::harden_worker_process as harden_process;
pub use pool::{WorkerOptions, DEFAULT_MAX_RUNS_PER_WORKER, WORKER_PROGRAM_ENV};
pub use serve::{serve, WorkerConfig, WorkerError};

#[cfg(test)]
mod tests;
