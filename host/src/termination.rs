//! How a run ended, classified by type (never by comparing message strings), and the
//! precedence that turns it plus the latched breaches into one [`Outcome`] status.

use wasmtime::{PoolConcurrencyLimitError, Trap};

use crate::broker;
use crate::limits::Limits;
use crate::outcome::{CapturedOutput, ErrorDetail, Outcome, Stats, Status};
use crate::output_capture::OutputLimitExceeded;

/// What stopped the guest, before latched breaches are considered.
#[derive(Debug)]
pub(crate) enum Termination {
    /// The runner returned JSON text.
    Returned(String),
    /// The runner returned a typed guest error.
    GuestError(ErrorDetail),
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
    /// A failure that is not the guest's doing.
    Internal(String),
}

/// Classifies an error returned by instantiation or the guest call.
pub(crate) fn classify_trap(err: &wasmtime::Error, cancelled: bool) -> Termination {
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
            None => Termination::Internal(format!("{err:#}")),
        },
    }
}

impl Termination {
    /// Combines the termination with the breaches latched during the run. Hard stops
    /// (deadline, fuel, cancel) win because they ended the run; then memory, output
    /// and tool budgets, whatever the guest did after hitting them; then the guest's
    /// own result.
    pub(crate) fn into_outcome(
        self,
        limits: &Limits,
        memory_exceeded: bool,
        output_exceeded: bool,
        tool_breach: Option<ErrorDetail>,
    ) -> Outcome {
        let mut value = None;
        let (status, error) = match self {
            Termination::Timeout => (Status::Timeout, timeout_detail(limits)),
            Termination::Cancelled => (Status::Cancelled, ErrorDetail::new("cancelled", "the run was cancelled")),
            Termination::FuelExhausted => (
                Status::FuelExhausted,
                ErrorDetail::new(
                    "fuel",
                    format!("the run used its fuel budget of {}", limits.fuel.unwrap_or_default()),
                ),
            ),
            _ if memory_exceeded => (Status::MemoryExhausted, memory_detail(limits)),
            Termination::OutputLimit => (Status::OutputLimit, output_detail(limits)),
            _ if output_exceeded => (Status::OutputLimit, output_detail(limits)),
            Termination::Returned(json) => match parse_result(&json, limits) {
                Ok(parsed) => {
                    value = Some(parsed);
                    match tool_breach {
                        Some(breach) => (Status::ToolLimit, breach),
                        None => return ok(value),
                    }
                }
                Err((status, detail)) => (status, detail),
            },
            _ if tool_breach.is_some() => (Status::ToolLimit, tool_breach.unwrap_or_else(|| unreachable!())),
            Termination::GuestError(detail) => (Status::Error, detail),
            Termination::Trapped(trap) => {
                (Status::Error, ErrorDetail::new("Trap", format!("the guest trapped: {trap}")))
            }
            Termination::Internal(message) => (Status::Internal, ErrorDetail::new("internal", message)),
            Termination::PoolExhausted(reason) => (
                Status::Rejected,
                ErrorDetail::new("instance_pool", format!("no free guest instance in the engine's pool: {reason}")),
            ),
        };
        Outcome { status, value, error: Some(error), ..ok(None) }
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
        stats: Stats::default(),
    }
}

/// The guest's final value obeys the same strict-JSON caps as everything else.
fn parse_result(json: &str, limits: &Limits) -> Result<serde_json::Value, (Status, ErrorDetail)> {
    broker::parse_capped(json, limits.max_result_bytes, limits.max_json_depth, "the run's value").map_err(|err| {
        match err {
            broker::JsonError::TooLarge { .. } => {
                (Status::OutputLimit, ErrorDetail::new("max_result_bytes", err.to_string()))
            }
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
    use serde_json::json;

    fn outcome(t: Termination, memory: bool, output: bool, breach: Option<ErrorDetail>) -> Outcome {
        t.into_outcome(&Limits::default(), memory, output, breach)
    }

    #[test]
    fn traps_are_classified_by_type() {
        let interrupt = wasmtime::Error::new(Trap::Interrupt);
        assert!(matches!(classify_trap(&interrupt, false), Termination::Timeout));
        assert!(matches!(classify_trap(&interrupt, true), Termination::Cancelled));
        let fuel = wasmtime::Error::new(Trap::OutOfFuel);
        assert!(matches!(classify_trap(&fuel, false), Termination::FuelExhausted));
        let other = wasmtime::Error::new(Trap::UnreachableCodeReached);
        assert!(matches!(classify_trap(&other, false), Termination::Trapped(_)));
        // A message that merely *says* timeout is not a timeout.
        let liar = wasmtime::format_err!("timeout");
        assert!(matches!(classify_trap(&liar, false), Termination::Internal(_)));
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
