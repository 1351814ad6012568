//! Per-run resource limits: plain serde data with units in the field names.
//!
//! Every field has a finite default (a documented `DEFAULT_…` constant) and
//! [`Limits::validate`] rejects nonsense instead of silently clamping it.
//!
//! ```
//! use wasmbox::Limits;
//! let limits = Limits { timeout_ms: 2_000, max_tool_calls: 20, ..Limits::default() };
//! limits.validate().unwrap();
//! ```

use serde::{Deserialize, Serialize};

/// Default wall-clock deadline of a run, tool waits included.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
/// Default cap on the guest's linear memories and tables, in bytes.
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 256 << 20;
/// Default cap on captured stdout.
pub const DEFAULT_MAX_STDOUT_BYTES: u64 = 1 << 20;
/// Default cap on captured stderr.
pub const DEFAULT_MAX_STDERR_BYTES: u64 = 1 << 20;
/// Default cap on the submitted source code.
pub const DEFAULT_MAX_CODE_BYTES: u64 = 1 << 20;
/// Default cap on the run's final JSON value (and its input), in bytes.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 1 << 20;
/// Default ceiling on tool calls per run.
pub const DEFAULT_MAX_TOOL_CALLS: u32 = 100;
/// Default cap on one tool call's argument JSON, checked before parsing.
pub const DEFAULT_MAX_TOOL_ARGS_BYTES: u64 = 256 << 10;
/// Default cap on one tool result's JSON, in bytes.
pub const DEFAULT_MAX_TOOL_RESULT_BYTES: u64 = 1 << 20;
/// Default cap on the sum of all tool results of one run, in bytes.
pub const DEFAULT_MAX_CUMULATIVE_RESULT_BYTES: u64 = 8 << 20;
/// Default nesting cap for every JSON value crossing the boundary.
pub const DEFAULT_MAX_JSON_DEPTH: u32 = 64;
/// Default per-call deadline of a tool.
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 5_000;

/// Default quota on the bytes of file data a run writes to its in-memory filesystem.
pub const DEFAULT_MAX_FS_BYTES: u64 = 64 << 20;
/// Default cap on the files and directories a run creates in its in-memory filesystem.
pub const DEFAULT_MAX_FS_FILES: u64 = 4_096;

/// Default bound on tool calls in flight at once across a run and its nested runs.
pub const DEFAULT_MAX_CONCURRENT_TOOL_CALLS: u32 = 4;
/// Default bound on nested runs (a tool starting a run, whose tool starts a run, …).
pub const DEFAULT_MAX_NESTING_DEPTH: u32 = 2;

/// The smallest memory cap that makes sense: the CPython guest needs ~16 MiB to start.
const MIN_MEMORY_BYTES: u64 = 1 << 20;
/// Beyond this a 32-bit wasm memory cannot grow anyway.
const MAX_MEMORY_BYTES: u64 = 4 << 30;
/// The largest file quota: the files travel back in one outcome (and one worker frame).
const MAX_FS_BYTES: u64 = 1 << 30;

/// serde_json refuses to parse deeper than 128 levels anyway.
const MAX_JSON_DEPTH: u32 = 128;

/// Limits that apply to one run. Construct with `Limits::default()` and struct update
/// syntax, or deserialize from JSON/TOML (unknown fields are rejected).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock deadline of the whole run, including time spent waiting on tools.
    pub timeout_ms: u64,
    /// A deterministic compute budget in fuel (roughly wasm instructions): an
    /// interpreter spends thousands of fuel per iteration of a trivial `for` loop
    /// (docs/performance.md has a figure for CPython). Needs an engine
    /// built with [`EngineConfig::fuel_metering`](crate::EngineConfig::fuel_metering);
    /// a run asking for fuel on another engine is `invalid_request`. Default `None`: the
    /// deadline alone bounds compute.
    pub fuel: Option<u64>,
    /// Cap on guest memory (linear memories and tables together).
    pub max_memory_bytes: u64,
    /// Cap on captured stdout; a guest writing past it is stopped with `output_limit`.
    pub max_stdout_bytes: u64,
    /// Cap on captured stderr; a guest writing past it is stopped with `output_limit`.
    pub max_stderr_bytes: u64,
    /// Cap on the source code of a run.
    pub max_code_bytes: u64,
    /// Cap on the run's JSON input and its final JSON value.
    pub max_result_bytes: u64,
    /// Ceiling on tool calls in one run; the next call is refused.
    pub max_tool_calls: u32,
    /// Ceiling on tool calls across a top-level run and every run nested in it, so that
    /// a tool starting nested runs cannot multiply `max_tool_calls`; the next call in
    /// any run of the tree is refused (error kind `max_tree_tool_calls`). It is read
    /// from the top-level run's limits: a nested sandbox's own value does not widen
    /// its tree (its `max_tool_calls` still bounds each of its runs). Default `None`:
    /// the top-level run's `max_tool_calls`, shared by the whole tree. Must be at least
    /// `max_tool_calls`.
    pub max_tree_tool_calls: Option<u32>,
    /// Cap on one call's argument JSON, checked before it is parsed.
    pub max_tool_args_bytes: u64,
    /// Cap on one tool result's JSON.
    pub max_tool_result_bytes: u64,
    /// Cap on all tool results of a run together; must be ≥ `max_tool_result_bytes`.
    pub max_cumulative_result_bytes: u64,
    /// Nesting cap on every JSON value crossing the boundary.
    pub max_json_depth: u32,
    /// Deadline of one tool call (tools may override it with a shorter or longer one).
    pub tool_timeout_ms: u64,
    /// Tool calls in flight at once across a run and the runs nested in it (a tool that
    /// starts a nested run stays in flight while the nested run calls tools).
    pub max_concurrent_tool_calls: u32,
    /// How deep runs may nest; 0 forbids nested runs.
    pub max_nesting_depth: u32,
    /// Quota on the file data a run writes under `/output` and `/tmp` (input files do not
    /// count): a write past it fails in the guest with ENOSPC (`OSError: [Errno 28] No
    /// space left on device`). The bytes live in host memory, outside
    /// `max_memory_bytes`. At most 1 GiB; 0 makes both directories read-only in effect.
    pub max_fs_bytes: u64,
    /// Cap on the files and directories a run creates; the next one fails with ENOSPC.
    pub max_fs_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_ms: DEFAULT_TIMEOUT_MS,
            fuel: None,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
            max_stdout_bytes: DEFAULT_MAX_STDOUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_code_bytes: DEFAULT_MAX_CODE_BYTES,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            max_tree_tool_calls: None,
            max_tool_args_bytes: DEFAULT_MAX_TOOL_ARGS_BYTES,
            max_tool_result_bytes: DEFAULT_MAX_TOOL_RESULT_BYTES,
            max_cumulative_result_bytes: DEFAULT_MAX_CUMULATIVE_RESULT_BYTES,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            max_concurrent_tool_calls: DEFAULT_MAX_CONCURRENT_TOOL_CALLS,
            max_nesting_depth: DEFAULT_MAX_NESTING_DEPTH,
            max_fs_bytes: DEFAULT_MAX_FS_BYTES,
            max_fs_files: DEFAULT_MAX_FS_FILES,
        }
    }
}

/// A [`Limits`] value that makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid limit `{field}`: {reason}")]
pub struct LimitsError {
    /// The offending field.
    pub field: &'static str,
    /// Why it was rejected.
    pub reason: String,
}

impl Limits {
    /// The call budget of a run tree whose top-level run has these limits:
    /// `max_tree_tool_calls`, else `max_tool_calls`.
    pub fn tree_tool_calls(&self) -> u32 {
        self.max_tree_tool_calls.unwrap_or(self.max_tool_calls)
    }

    /// Checks that every limit is usable.
    ///
    /// # Errors
    /// A [`LimitsError`] naming the first field that is zero where zero makes no sense,
    /// out of range, or inconsistent with another field.
    pub fn validate(&self) -> Result<(), LimitsError> {
        let nonzero: [(&'static str, u64); 13] = [
            ("timeout_ms", self.timeout_ms),
            ("fuel", self.fuel.unwrap_or(1)),
            ("max_tree_tool_calls", self.max_tree_tool_calls.map_or(1, u64::from)),
            ("max_stdout_bytes", self.max_stdout_bytes),
            ("max_stderr_bytes", self.max_stderr_bytes),
            ("max_code_bytes", self.max_code_bytes),
            ("max_result_bytes", self.max_result_bytes),
            ("max_tool_args_bytes", self.max_tool_args_bytes),
            ("max_tool_result_bytes", self.max_tool_result_bytes),
            ("max_cumulative_result_bytes", self.max_cumulative_result_bytes),
            ("max_json_depth", u64::from(self.max_json_depth)),
            ("tool_timeout_ms", self.tool_timeout_ms),
            ("max_concurrent_tool_calls", u64::from(self.max_concurrent_tool_calls)),
        ];
        if let Some((field, _)) = nonzero.iter().find(|(_, v)| *v == 0) {
            return Err(LimitsError { field, reason: "must be greater than zero".into() });
        }
        if !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&self.max_memory_bytes) {
            return Err(LimitsError {
                field: "max_memory_bytes",
                reason: format!("must be between {MIN_MEMORY_BYTES} and {MAX_MEMORY_BYTES}"),
            });
        }
        if self.max_fs_bytes > MAX_FS_BYTES {
            return Err(LimitsError { field: "max_fs_bytes", reason: format!("must be at most {MAX_FS_BYTES}") });
        }
        if self.max_json_depth > MAX_JSON_DEPTH {
            return Err(LimitsError { field: "max_json_depth", reason: format!("must be at most {MAX_JSON_DEPTH}") });
        }
        if self.max_tree_tool_calls.is_some_and(|tree| tree < self.max_tool_calls) {
            return Err(LimitsError { field: "max_tree_tool_calls", reason: "must be at least max_tool_calls".into() });
        }
        if self.max_cumulative_result_bytes < self.max_tool_result_bytes {
            return Err(LimitsError {
                field: "max_cumulative_result_bytes",
                reason: "must be at least max_tool_result_bytes".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Limits::default().validate().unwrap();
    }

    #[test]
    fn zero_timeout_is_rejected() {
        let err = Limits { timeout_ms: 0, ..Limits::default() }.validate().unwrap_err();
        assert_eq!(err.field, "timeout_ms");
    }

    #[test]
    fn cumulative_below_single_result_is_rejected() {
        let limits = Limits { max_tool_result_bytes: 10, max_cumulative_result_bytes: 9, ..Limits::default() };
        assert_eq!(limits.validate().unwrap_err().field, "max_cumulative_result_bytes");
    }

    #[test]
    fn the_tree_call_budget_defaults_to_the_run_ceiling_and_cannot_undercut_it() {
        let limits = Limits { max_tool_calls: 7, ..Limits::default() };
        assert_eq!(limits.tree_tool_calls(), 7);
        let wider = Limits { max_tree_tool_calls: Some(50), ..limits.clone() };
        assert_eq!(wider.tree_tool_calls(), 50);
        wider.validate().unwrap();
        let below = Limits { max_tree_tool_calls: Some(6), ..limits.clone() };
        assert_eq!(below.validate().unwrap_err().field, "max_tree_tool_calls");
        let zero = Limits { max_tree_tool_calls: Some(0), ..limits };
        assert_eq!(zero.validate().unwrap_err().field, "max_tree_tool_calls");
        let parsed: Limits = serde_json::from_str(r#"{"max_tree_tool_calls": 300}"#).unwrap();
        assert_eq!(parsed.max_tree_tool_calls, Some(300));
    }

    #[test]
    fn the_file_quota_is_bounded_and_may_be_zero() {
        let zero = Limits { max_fs_bytes: 0, max_fs_files: 0, ..Limits::default() };
        zero.validate().unwrap();
        let huge = Limits { max_fs_bytes: (1 << 30) + 1, ..Limits::default() };
        assert_eq!(huge.validate().unwrap_err().field, "max_fs_bytes");
    }

    #[test]
    fn memory_out_of_range_is_rejected() {
        let tiny = Limits { max_memory_bytes: 1024, ..Limits::default() };
        assert_eq!(tiny.validate().unwrap_err().field, "max_memory_bytes");
        let huge = Limits { max_memory_bytes: 8 << 30, ..Limits::default() };
        assert_eq!(huge.validate().unwrap_err().field, "max_memory_bytes");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = serde_json::from_str::<Limits>(r#"{"timeout_msec": 5}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let ok: Limits = serde_json::from_str(r#"{"timeout_ms": 5}"#).unwrap();
        assert_eq!(ok.timeout_ms, 5);
        assert_eq!(ok.fuel, None);
        let fuel: Limits = serde_json::from_str(r#"{"fuel": 1000}"#).unwrap();
        assert_eq!(fuel.fuel, Some(1000));
        let zero = Limits { fuel: Some(0), ..Limits::default() };
        assert_eq!(zero.validate().unwrap_err().field, "fuel");
    }
}
