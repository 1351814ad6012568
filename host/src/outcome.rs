//! The structured result of a run: how it ended, its value, its output, its tool calls
//! and what it cost.

use serde::{Deserialize, Serialize};

use crate::audit::CallRef;
use crate::vfs::OutputFile;

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

/// The most bytes of an [`ErrorDetail::kind`] an outcome carries.
pub const MAX_ERROR_KIND_BYTES: usize = 256;
/// The most bytes of an [`ErrorDetail::message`] an outcome carries (its start is kept).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 8 << 10;
/// The most bytes of an [`ErrorDetail::traceback`] an outcome carries (its end is kept:
/// the innermost frames and the exception line).
pub const MAX_ERROR_TRACEBACK_BYTES: usize = 32 << 10;

/// What went wrong, for every status but `ok`.
///
/// Each field is capped ([`MAX_ERROR_KIND_BYTES`], [`MAX_ERROR_MESSAGE_BYTES`],
/// [`MAX_ERROR_TRACEBACK_BYTES`]): guest code chooses this text, and a 100 MB exception
/// message must not become a 100 MB outcome. A cut field says so in place, with
/// `[… N bytes cut]`, and the whole marker fits within the cap.
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

    /// This detail with every field within its cap.
    pub(crate) fn capped(mut self) -> Self {
        keep_start(&mut self.kind, MAX_ERROR_KIND_BYTES);
        keep_start(&mut self.message, MAX_ERROR_MESSAGE_BYTES);
        keep_end(&mut self.traceback, MAX_ERROR_TRACEBACK_BYTES);
        self
    }
}

/// The marker for `cut` bytes left out.
fn cut_marker(cut: usize) -> String {
    format!("[… {cut} bytes cut]")
}

/// Cuts `text` to at most `cap` bytes, keeping its start and ending with the marker.
fn keep_start(text: &mut String, cap: usize) {
    if text.len() <= cap {
        return;
    }
    // The marker's length depends on the count it shows; size it for the largest count.
    let room = cap.saturating_sub(cut_marker(text.len()).len() + 1);
    let end = floor_char_boundary(text, room);
    let marker = cut_marker(text.len() - end);
    text.truncate(end);
    text.push(' ');
    text.push_str(&marker);
}

/// Cuts `text` to at most `cap` bytes, keeping its end and starting with the marker.
fn keep_end(text: &mut String, cap: usize) {
    if text.len() <= cap {
        return;
    }
    let room = cap.saturating_sub(cut_marker(text.len()).len() + 1);
    let mut start = text.len() - room.min(text.len());
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let kept = format!("{}\n{}", cut_marker(start), &text[start..]);
    *text = kept;
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
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
    /// Time the run spent instantiating the guest: 0 when it took an instance prepared
    /// ahead of it ([`EngineConfig::prepared_instances`](crate::EngineConfig::prepared_instances)).
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
    /// The files the guest left under `/output`, in name order, whatever the status
    /// (empty for a run stopped before it started).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<OutputFile>,
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
            files: Vec::new(),
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
    fn error_text_is_capped_with_a_marker_inside_the_cap() {
        let huge = ErrorDetail {
            kind: "K".repeat(10_000),
            message: "é".repeat(5_000_000),
            traceback: format!("{}\nValueError: the end", "frame\n".repeat(1_000_000)),
        }
        .capped();
        assert!(huge.kind.len() <= MAX_ERROR_KIND_BYTES && huge.kind.ends_with("bytes cut]"), "{}", huge.kind);
        assert!(huge.message.len() <= MAX_ERROR_MESSAGE_BYTES, "{}", huge.message.len());
        assert!(huge.message.starts_with("éé") && huge.message.ends_with("bytes cut]"));
        assert!(huge.traceback.len() <= MAX_ERROR_TRACEBACK_BYTES, "{}", huge.traceback.len());
        assert!(huge.traceback.starts_with("[… ") && huge.traceback.ends_with("ValueError: the end"));
        // The marker counts what was cut: kept + cut is the original length.
        let cut: usize = huge.kind.rsplit("[… ").next().unwrap().split(' ').next().unwrap().parse().unwrap();
        assert_eq!(huge.kind.find(" [… ").unwrap() + cut, 10_000);

        let small = ErrorDetail { kind: "ValueError".into(), message: "bad".into(), traceback: "tb".into() };
        assert_eq!(small.clone().capped(), small, "text within the caps is untouched");
    }

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
