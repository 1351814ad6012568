//! How a run ended and what the outcome says about it: the one owner of status
//! precedence and of every cap an outcome obeys.
//!
//! An in-process run ends as a [`Termination`], classified by type (never by comparing
//! message strings), and [`Termination::into_outcome`] combines it with the breaches
//! the host latched. A worker's run comes back as an [`Outcome`] the worker built the
//! same way, and [`vouch_for`] takes it on the parent's terms. Both end in [`settle`]:
//! the tool breach the parent's broker latched, the output, value and error-text caps,
//! and "a value only with `ok` (or `tool_limit`), an error with every other status".

use wasmtime::{PoolConcurrencyLimitError, Trap};

use crate::broker::{self, JsonError};
use crate::limits::Limits;
use crate::outcome::{CapturedOutput, ErrorDetail, Outcome, Stats, Status};
use crate::output_capture::OutputLimitExceeded;
use crate::vfs::{is_output_name, OutputFile};

/// What stopped the guest, before latched breaches are considered.
#[derive(Debug)]
pub(crate) enum Termination {
    /// The runner returned JSON text.
    Returned(String),
    /// The runner returned a typed guest error.
    GuestError(ErrorDetail),
    /// The guest called WASI `exit` (Python's `os._exit`) with this code.
    Exit(i32),
    /// The wall-clock deadline passed.
    Timeout,
    /// The caller cancelled.
    Cancelled,
    /// Fuel ran out.
    FuelExhausted,
    /// An output capture trapped the guest.
    OutputLimit,
    /// The engine's instance pool was full when the run tried to instantiate.
    PoolExhausted(String),
    /// Any other trap: the guest misbehaved (e.g. `unreachable`, stack overflow).
    Trapped(String),
    /// The guest broke the component contract while its run was executing: it handed
    /// the host a string out of bounds or not UTF-8, or more data in one call than the
    /// Store's hostcall budget allows, or a handle it does not own.
    BrokeContract(String),
    /// A failure that is not the guest's doing.
    Internal(String),
}

/// When the error arose: setting the instance up is the host's business, but once the
/// guest's `run` executes, every error comes from what the guest did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Instantiation.
    Instantiate,
    /// The call of the guest's `run` export, lifting its result included.
    Run,
}

/// Classifies an error returned by instantiation or the guest call.
pub(crate) fn classify_trap(err: &wasmtime::Error, cancelled: bool, phase: Phase) -> Termination {
    if let Some(exit) = err.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return Termination::Exit(exit.0);
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) if cancelled => Termination::Cancelled,
        Some(Trap::Interrupt) => Termination::Timeout,
        Some(Trap::OutOfFuel) => Termination::FuelExhausted,
        Some(trap) => Termination::Trapped(trap.to_string()),
        None if err.downcast_ref::<OutputLimitExceeded>().is_some() => Termination::OutputLimit,
        // Capacity, not the guest's fault: the run is turned away like one that finds
        // the admission queue full, and may be retried.
        None => match err.downcast_ref::<PoolConcurrencyLimitError>() {
            Some(full) => Termination::PoolExhausted(full.to_string()),
            // The root cause alone: the layers above it are wasm backtraces.
            None if phase == Phase::Run => Termination::BrokeContract(err.root_cause().to_string()),
            None => Termination::Internal(format!("{err:#}")),
        },
    }
}

/// What the host latched during a run, whatever the guest did afterwards.
#[derive(Debug, Default)]
pub(crate) struct Latched {
    /// The guest tried to grow its memory past the cap.
    pub(crate) memory: bool,
    /// The guest wrote past an output cap.
    pub(crate) output: bool,
    /// The first tool budget the run went over.
    pub(crate) tool: Option<ErrorDetail>,
}

impl Termination {
    /// Combines the termination with the breaches latched during the run. Hard stops
    /// (deadline, fuel, cancel) win because they ended the run; then memory and output,
    /// whatever the guest did after hitting them; then (in [`settle`]) tool budgets; then
    /// the guest's own result.
    pub(crate) fn into_outcome(self, limits: &Limits, latched: Latched) -> Outcome {
        let mut value = None;
        let (status, error) = match self {
            Termination::Timeout => (Status::Timeout, Some(timeout_detail(limits))),
            Termination::Cancelled => (Status::Cancelled, Some(ErrorDetail::new("cancelled", "the run was cancelled"))),
            Termination::FuelExhausted => (
                Status::FuelExhausted,
                Some(ErrorDetail::new(
                    "fuel",
                    format!("the run used its fuel budget of {}", limits.fuel.unwrap_or_default()),
                )),
            ),
            _ if latched.memory => (Status::MemoryExhausted, Some(memory_detail(limits))),
            Termination::OutputLimit => (Status::OutputLimit, Some(output_detail(limits))),
            _ if latched.output => (Status::OutputLimit, Some(output_detail(limits))),
            Termination::Returned(json) => match parse_result(&json, limits) {
                Ok(parsed) => {
                    value = Some(parsed);
                    (Status::Ok, None)
                }
                Err((status, detail)) => (status, Some(detail)),
            },
            Termination::GuestError(detail) => (Status::Error, Some(detail)),
            Termination::Exit(code) => (
                Status::Error,
                Some(ErrorDetail::new("exit", format!("the guest exited (WASI exit) with code {code}"))),
            ),
            Termination::Trapped(trap) => {
                (Status::Error, Some(ErrorDetail::new("Trap", format!("the guest trapped: {trap}"))))
            }
            Termination::BrokeContract(reason) => (
                Status::Error,
                Some(ErrorDetail::new("ContractError", format!("the guest broke the component contract: {reason}"))),
            ),
            Termination::Internal(message) => (Status::Internal, Some(ErrorDetail::new("internal", message))),
            Termination::PoolExhausted(reason) => (
                Status::Rejected,
                Some(ErrorDetail::new(
                    "instance_pool",
                    format!("no free guest instance in the engine's pool: {reason}"),
                )),
            ),
        };
        settle(Outcome { status, value, error, ..ok(None) }, limits, latched.tool)
    }
}

/// Takes a worker's outcome on the parent's terms: the parent's latched tool breach
/// applies, and nothing in it may exceed what the run's limits allow an in-process run.
pub(crate) fn vouch_for(reported: Outcome, limits: &Limits, tool_breach: Option<ErrorDetail>) -> Outcome {
    settle(reported, limits, tool_breach)
}

/// The last word on every outcome, in-process or from a worker.
///
/// A tool breach turns `ok` and `error` into `tool_limit` (keeping an `ok` run's value:
/// the guest finished, but over a budget); the statuses that ended the run for a harder
/// reason keep theirs. Then every cap: stdout and stderr, the value (strict JSON within
/// `max_result_bytes` and `max_json_depth`), the error text. A value survives only `ok`
/// and `tool_limit`; every status but `ok` has an error.
pub(crate) fn settle(mut outcome: Outcome, limits: &Limits, tool_breach: Option<ErrorDetail>) -> Outcome {
    cap_output(&mut outcome.stdout, limits.max_stdout_bytes);
    cap_output(&mut outcome.stderr, limits.max_stderr_bytes);
    cap_files(&mut outcome.files, limits);
    if let Some(value) = &outcome.value {
        if let Err(err) =
            broker::serialize_capped(value, limits.max_result_bytes, limits.max_json_depth, "the run's value")
        {
            let (status, kind) = match err {
                JsonError::TooLarge { .. } => (Status::OutputLimit, "max_result_bytes"),
                _ => (Status::Error, "ContractError"),
            };
            outcome.status = status;
            outcome.value = None;
            outcome.error = Some(ErrorDetail::new(kind, err.to_string()));
        }
    }
    if let Some(breach) = tool_breach {
        if matches!(outcome.status, Status::Ok | Status::Error) {
            outcome.status = Status::ToolLimit;
            outcome.error = Some(breach);
        }
    }
    if !matches!(outcome.status, Status::Ok | Status::ToolLimit) {
        outcome.value = None;
    }
    outcome.error = match (outcome.status, outcome.error.take()) {
        (Status::Ok, _) => None,
        (_, Some(error)) => Some(error.capped()),
        (status, None) => Some(ErrorDetail::new(status.as_str(), format!("the run ended `{status}`"))),
    };
    outcome
}

/// Output files within the run's file quota and cap and named as the in-memory tree
/// names them, as an in-process run's always are (a worker's list is not taken on
/// trust): a file the tree could not have named is dropped, then the first that would
/// go past the quota or the cap, and all after it.
fn cap_files(files: &mut Vec<OutputFile>, limits: &Limits) {
    files.retain(|file| is_output_name(&file.name));
    let mut bytes = 0u64;
    let fits = files.iter().position(|file| {
        bytes = bytes.saturating_add(file.bytes.len() as u64);
        bytes > limits.max_fs_bytes
    });
    let keep = fits.unwrap_or(files.len()).min(usize::try_from(limits.max_fs_files).unwrap_or(usize::MAX));
    files.truncate(keep);
}

fn cap_output(output: &mut CapturedOutput, cap: u64) {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    if output.text.len() > cap {
        let mut end = cap;
        while !output.text.is_char_boundary(end) {
            end -= 1;
        }
        output.text.truncate(end);
        output.truncated = true;
    }
}

fn ok(value: Option<serde_json::Value>) -> Outcome {
    Outcome {
        run_id: String::new(),
        status: Status::Ok,
        value,
        error: None,
        stdout: CapturedOutput::default(),
        stderr: CapturedOutput::default(),
        tool_calls: Vec::new(),
        files: Vec::new(),
        stats: Stats::default(),
    }
}

/// The guest's final value obeys the same strict-JSON caps as everything else.
fn parse_result(json: &str, limits: &Limits) -> Result<serde_json::Value, (Status, ErrorDetail)> {
    broker::parse_capped(json, limits.max_result_bytes, limits.max_json_depth, "the run's value").map_err(|err| {
        match err {
            JsonError::TooLarge { .. } => (Status::OutputLimit, ErrorDetail::new("max_result_bytes", err.to_string())),
            _ => (Status::Error, ErrorDetail::new("ContractError", err.to_string())),
        }
    })
}

fn timeout_detail(limits: &Limits) -> ErrorDetail {
    ErrorDetail::new("timeout", format!("the run exceeded its deadline of {} ms", limits.timeout_ms))
}

fn memory_detail(limits: &Limits) -> ErrorDetail {
    ErrorDetail::new("memory", format!("the guest tried to grow its memory past {} bytes", limits.max_memory_bytes))
}

fn output_detail(limits: &Limits) -> ErrorDetail {
    ErrorDetail::new(
        "output",
        format!(
            "the guest wrote more than its output caps ({} bytes stdout, {} bytes stderr)",
            limits.max_stdout_bytes, limits.max_stderr_bytes
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{MAX_ERROR_KIND_BYTES, MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_TRACEBACK_BYTES};
    use serde_json::json;

    fn outcome(t: Termination, memory: bool, output: bool, tool: Option<ErrorDetail>) -> Outcome {
        t.into_outcome(&Limits::default(), Latched { memory, output, tool })
    }

    #[test]
    fn traps_are_classified_by_type() {
        let run = Phase::Run;
        let interrupt = wasmtime::Error::new(Trap::Interrupt);
        assert!(matches!(classify_trap(&interrupt, false, run), Termination::Timeout));
        assert!(matches!(classify_trap(&interrupt, true, run), Termination::Cancelled));
        let fuel = wasmtime::Error::new(Trap::OutOfFuel);
        assert!(matches!(classify_trap(&fuel, false, run), Termination::FuelExhausted));
        let other = wasmtime::Error::new(Trap::UnreachableCodeReached);
        assert!(matches!(classify_trap(&other, false, run), Termination::Trapped(_)));
        let exit = wasmtime::Error::new(wasmtime_wasi::I32Exit(3)).context("wasm backtrace: ...");
        assert!(matches!(classify_trap(&exit, false, run), Termination::Exit(3)));
        // A message that merely *says* timeout is not a timeout, nor is one that says exit.
        let liar = wasmtime::format_err!("timeout");
        assert!(matches!(classify_trap(&liar, false, Phase::Instantiate), Termination::Internal(_)));
        assert!(matches!(classify_trap(&liar, false, run), Termination::BrokeContract(_)));
    }

    #[test]
    fn a_latched_memory_breach_beats_a_caught_memory_error() {
        let o = outcome(Termination::Returned("1".into()), true, false, None);
        assert_eq!(o.status, Status::MemoryExhausted);
        let o = outcome(Termination::Timeout, true, false, None);
        assert_eq!(o.status, Status::Timeout, "the hard stop wins");
    }

    #[test]
    fn a_tool_breach_keeps_the_value_but_reports_the_budget() {
        let breach = ErrorDetail::new("max_tool_calls", "ceiling");
        let o = outcome(Termination::Returned("[1]".into()), false, false, Some(breach));
        assert_eq!((o.status, o.value), (Status::ToolLimit, Some(json!([1]))));
        assert_eq!(o.error.unwrap().kind, "max_tool_calls");
    }

    #[test]
    fn an_exit_is_the_guests_error_without_a_host_backtrace() {
        let o = outcome(Termination::Exit(0), false, false, None);
        assert_eq!(o.status, Status::Error);
        let error = o.error.unwrap();
        assert_eq!((error.kind.as_str(), error.message.as_str()), ("exit", "the guest exited (WASI exit) with code 0"));
    }

    #[test]
    fn guest_error_text_is_capped_in_process_and_from_a_worker() {
        let huge = || ErrorDetail {
            kind: "E".repeat(1 << 20),
            message: "m".repeat(10 << 20),
            traceback: "t".repeat(10 << 20),
        };
        let small = |e: &ErrorDetail| {
            e.kind.len() <= MAX_ERROR_KIND_BYTES
                && e.message.len() <= MAX_ERROR_MESSAGE_BYTES
                && e.traceback.len() <= MAX_ERROR_TRACEBACK_BYTES
        };
        let o = outcome(Termination::GuestError(huge()), false, false, None);
        assert_eq!(o.status, Status::Error);
        assert!(small(o.error.as_ref().unwrap()));
        let reported = Outcome { error: Some(huge()), ..Outcome::early(Status::Error, ErrorDetail::new("", "")) };
        let o = vouch_for(reported, &Limits::default(), None);
        assert_eq!(o.status, Status::Error);
        assert!(small(o.error.as_ref().unwrap()));
    }

    /// A worker's output files are not taken on trust: past the quota or the file cap, or
    /// named what the in-memory tree cannot name (`..`, an absolute path, NUL), they are
    /// dropped, so an embedder can rely on `OutputFile::name` being a relative path.
    #[test]
    fn a_workers_output_files_are_held_to_the_quota_and_the_tree_s_names() {
        let file = |name: &str, len: usize| {
            serde_json::from_value::<OutputFile>(json!({"name": name, "text": "x".repeat(len)})).unwrap()
        };
        let limits = Limits { max_fs_bytes: 100, max_fs_files: 3, ..Limits::default() };
        let lying = |files| Outcome { files, ..ok(None) };
        let names = |o: Outcome| o.files.into_iter().map(|f| f.name).collect::<Vec<_>>();
        let over = lying(vec![file("a", 60), file("b", 40), file("c", 1)]);
        assert_eq!(names(vouch_for(over, &limits, None)), ["a", "b"], "60 + 40 fits, one more byte does not");
        let many = lying(vec![file("a", 1), file("b", 1), file("c", 1), file("d", 1)]);
        assert_eq!(names(vouch_for(many, &limits, None)), ["a", "b", "c"]);
        let bad = ["../x", "/etc/x", "a/../b", "", "a//b", "a\0b", ".", "ok/./x"];
        let named = lying(bad.iter().map(|n| file(n, 1)).chain([file("fine/x", 1)]).collect());
        assert_eq!(names(vouch_for(named, &Limits::default(), None)), ["fine/x"]);
    }

    #[test]
    fn the_final_value_is_strict_and_capped() {
        let o = outcome(Termination::Returned(r#"{"a": NaN}"#.into()), false, false, None);
        assert_eq!((o.status, o.error.unwrap().kind.as_str()), (Status::Error, "ContractError"));
        let big = format!("\"{}\"", "x".repeat(2 << 20));
        let o = outcome(Termination::Returned(big), false, false, None);
        assert_eq!(o.status, Status::OutputLimit);
        let o = outcome(Termination::Returned("{\"a\": [1, 2.5, null]}".into()), false, false, None);
        assert_eq!((o.status, o.value), (Status::Ok, Some(json!({"a": [1, 2.5, null]}))));
    }
}
