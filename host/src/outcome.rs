//! The structured result of a run: how it ended, its value, its output, its tool calls
//! and what it cost.

use serde::{Deserialize, Serialize};

use crate::audit::CallRef;

/// How a run ended. Exactly one status per run; limit statuses are *latched* on the host,
/// so a guest that catches its own `MemoryError` still ends `memory_exhausted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// The code finished and produced a JSON value.
    Ok,
    /// The code raised (or failed to parse, or broke the output contract).
    Error,
    /// The wall-clock deadline passed (compute or tool waits).
    Timeout,
    /// The fuel budget ran out.
    FuelExhausted,
    /// The guest tried to grow its memory past `max_memory_bytes`.
    MemoryExhausted,
    /// stdout, stderr or the final value went past its cap.
    OutputLimit,
    /// A tool budget of the run was exceeded (calls, bytes).
    ToolLimit,
    /// The request itself was unusable (bad limits, oversized code or input).
    InvalidRequest,
    /// Admission control turned the run away.
    Rejected,
    /// The caller cancelled the run.
    Cancelled,
    /// The worker process running the guest died.
    Crashed,
    /// A host-side failure that is not the guest's doing.
    Internal,
}

impl Status {
    /// The status as the snake_case word used in JSON and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Timeout => "timeout",
            Status::FuelExhausted => "fuel_exhausted",
            Status::MemoryExhausted => "memory_exhausted",
            Status::OutputLimit => "output_limit",
            Status::ToolLimit => "tool_limit",
            Status::InvalidRequest => "invalid_request",
            Status::Rejected => "rejected",
            Status::Cancelled => "cancelled",
            Status::Crashed => "crashed",
            Status::Internal => "internal",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong, for every status but `ok`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// For guest errors the exception type (`ZeroDivisionError`, `SyntaxError`,
    /// `ContractError`); otherwise the status word, or the budget that ran out.
    pub kind: String,
    /// A human- and model-readable explanation.
    pub message: String,
    /// The guest's traceback, when there is one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub traceback: String,
}

impl ErrorDetail {
    pub(crate) fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        ErrorDetail { kind: kind.into(), message: message.into(), traceback: String::new() }
    }
}

/// Captured text of one output stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedOutput {
    /// What the guest wrote, up to the cap (invalid UTF-8 replaced).
    pub text: String,
    /// True when the guest wrote more than the cap and the rest was dropped.
    pub truncated: bool,
}

/// How one tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallStatus {
    /// The tool answered and the result passed every check.
    Ok,
    /// Unknown tool or not in this run's scope.
    Denied,
    /// A per-run budget was spent.
    BudgetExhausted,
    /// The arguments failed validation.
    InvalidArgs,
    /// The tool failed, panicked or returned an unusable result.
    Failed,
    /// The tool did not answer within its deadline.
    Timeout,
}

impl CallStatus {
    /// The status as the snake_case word used in JSON and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Ok => "ok",
            CallStatus::Denied => "denied",
            CallStatus::BudgetExhausted => "budget_exhausted",
            CallStatus::InvalidArgs => "invalid_args",
            CallStatus::Failed => "failed",
            CallStatus::Timeout => "timeout",
        }
    }
}

/// One entry of a run's tool-call trail; also the `tool_call_finished` audit event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The calling run.
    pub run_id: String,
    /// 1-based sequence number of the call within its run.
    pub call_id: u32,
    /// Parent runs and calls of the calling run, outermost first (empty at top level).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestry: Vec<CallRef>,
    /// The tool name the guest asked for (possibly unknown).
    pub tool: String,
    /// How the call ended.
    pub status: CallStatus,
    /// Host time spent on the call, validation included.
    pub duration_ms: f64,
    /// Size of the argument JSON as the guest sent it.
    pub args_bytes: u64,
    /// Size of the result JSON handed back (0 unless `ok`).
    pub result_bytes: u64,
    /// Why the call did not succeed (the same text the guest saw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The redacted arguments, when payload recording is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// The redacted result (after projection), when payload recording is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
}

/// What a run cost.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Wall time of the whole run, from request to outcome.
    pub wall_time_us: u64,
    /// Time spent creating the Store and instantiating the guest.
    pub instantiate_time_us: u64,
    /// Fuel consumed by the guest; 0 unless the engine meters fuel.
    pub fuel_used: u64,
    /// The largest total size of the guest's linear memories seen during the run.
    pub peak_memory_bytes: u64,
}

/// The result of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// This run's id (also in its audit events).
    pub run_id: String,
    /// How the run ended.
    pub status: Status,
    /// The run's JSON value (`output(...)`, the final expression, or `null`); `ok` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// What went wrong, for every status but `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// Captured standard output.
    pub stdout: CapturedOutput,
    /// Captured standard error.
    pub stderr: CapturedOutput,
    /// Every tool call the guest attempted, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Costs of the run.
    pub stats: Stats,
}

impl Outcome {
    /// An outcome that ended before the guest ran (invalid request, rejection, …).
    pub(crate) fn early(status: Status, error: ErrorDetail) -> Self {
        Outcome {
            run_id: String::new(),
            status,
            value: None,
            error: Some(error),
            stdout: CapturedOutput::default(),
            stderr: CapturedOutput::default(),
            tool_calls: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// True when the run ended `ok`.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_serialize_as_their_words() {
        for status in [Status::Ok, Status::FuelExhausted, Status::ToolLimit, Status::Internal] {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        let call = serde_json::to_string(&CallStatus::BudgetExhausted).unwrap();
        assert_eq!(call, format!("\"{}\"", CallStatus::BudgetExhausted.as_str()));
    }
}
