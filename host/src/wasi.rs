//! The one place that builds a guest's WASI context.
//!
//! Everything is denied: no preopened host directories (the guest's files are the
//! in-memory tree of `vfs/`, which replaces this context's filesystem), no environment
//! variables, no arguments, closed stdin, no TCP/UDP and no name lookup, and stdout /
//! stderr go to capped in-memory captures. The `inherit_*` builder methods and
//! `cap_std::ambient_authority` are banned everywhere else by clippy's
//! `disallowed-methods` (see clippy.toml), so this file is the only ambient-authority door.

use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use crate::output_capture::OutputCapture;

/// Builds a deny-all WASI context whose only outputs are the two captures.
pub(crate) fn deny_all_ctx(stdout: OutputCapture, stderr: OutputCapture) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stdout(stdout)
        .stderr(stderr)
        // Sockets are already address-checked to "deny everything"; switching the
        // protocols off too means a future default change cannot open them.
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}
