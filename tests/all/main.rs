//! The integration test binary: one link, modules inside (as wasmtime's `tests/all`).
//!
//! The guests must be built first (`cargo xtask guests`); tests that need one
//! fail loudly with that instruction rather than passing silently.

mod broker_boundary;
mod conformance;
mod custom_guests;
mod files;
mod guest_faults;
mod instance_pool;
mod js_batteries;
mod js_files;
mod js_guest_runs;
mod js_session_memory;
mod live_output;
mod overlapping_calls;
mod prepared_instances;
mod python_batteries;
mod python_broker;
mod python_guest;
mod python_isolation;
mod python_limits;
mod python_random;
mod python_snapshot_writes;
mod python_step_cache;
mod python_tools;
mod sessions;
mod support;
mod wit_copies;
mod wit_versions;
