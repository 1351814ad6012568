//! The broker: the one mediator of every tool call a guest makes.
//!
//! Per run, a [`BrokerCtx`] holds the run's [`Scope`], its [`Limits`] and its spent
//! budgets. Every call goes through, in order: name and scope check → argument size cap
//! (before parsing) → strict parse with a depth cap → object check → call ceiling →
//! the tool itself under a deadline (panics contained) → result size cap → cumulative
//! result cap → the tool-call trail. Denials come back to the guest as
//! [`CallError`] values — catchable, never traps — and budget breaches are latched, so
//! the run's outcome reports them even when the guest swallows the error.
//!
//! Nothing here touches wasmtime; [`link`] adapts it to the generated bindings.

mod json_guard;
pub(crate) mod link;
mod scope;
mod tool;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

pub use json_guard::JsonError;
pub(crate) use json_guard::{parse_capped, serialize_capped, type_name};
pub use scope::Scope;
pub use tool::{Tool, ToolFailure, ToolRegistrationError, Tools};

use crate::limits::Limits;
use crate::outcome::{CallStatus, ErrorDetail, ToolCallRecord};

/// Why a tool call returned no result; mirrors the WIT `call-error` variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// Unknown tool, or not in this run's scope.
    #[error("denied: {0}")]
    Denied(String),
    /// A per-run budget is spent.
    #[error("budget exhausted: {0}")]
    BudgetExhausted(String),
    /// The arguments failed validation.
    #[error("invalid arguments: {0}")]
    InvalidArgs(String),
    /// The tool failed or returned an unusable result.
    #[error("failed: {0}")]
    Failed(String),
    /// The tool did not answer in time.
    #[error("timeout: {0}")]
    Timeout(String),
}

impl CallError {
    /// The trail status for this error.
    pub fn status(&self) -> CallStatus {
        match self {
            CallError::Denied(_) => CallStatus::Denied,
            CallError::BudgetExhausted(_) => CallStatus::BudgetExhausted,
            CallError::InvalidArgs(_) => CallStatus::InvalidArgs,
            CallError::Failed(_) => CallStatus::Failed,
            CallError::Timeout(_) => CallStatus::Timeout,
        }
    }

    /// The guest-facing message.
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

/// What a guest may see of one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolSummary {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) args_schema: String,
}

/// Per-run broker state: scope, limits, spent budgets, the trail, the first breach.
pub struct BrokerCtx {
    tools: Arc<Tools>,
    scope: Scope,
    limits: Limits,
    calls_made: u32,
    cumulative_result_bytes: u64,
    trail: Vec<ToolCallRecord>,
    breach: Option<ErrorDetail>,
}

impl BrokerCtx {
    /// State for one run that may call the tools of `tools` that `scope` allows.
    pub fn new(tools: Arc<Tools>, scope: Scope, limits: Limits) -> Self {
        BrokerCtx {
            tools,
            scope,
            limits,
            calls_made: 0,
            cumulative_result_bytes: 0,
            trail: Vec::new(),
            breach: None,
        }
    }

    /// The tools in scope, sorted by name.
    pub(crate) fn list(&self) -> Vec<ToolSummary> {
        self.tools
            .iter()
            .filter(|tool| self.scope.allows(tool.name()))
            .map(|tool| ToolSummary {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                args_schema: tool.args_schema().to_string(),
            })
            .collect()
    }

    /// Mediates one call; records it in the trail whatever happens.
    pub async fn call(&mut self, name: &str, args_json: &str) -> Result<String, CallError> {
        let started = Instant::now();
        let result = self.checked_call(name, args_json).await;
        let (status, result_bytes, message) = match &result {
            Ok(text) => (CallStatus::Ok, text.len() as u64, None),
            Err(err) => (err.status(), 0, Some(err.message().to_owned())),
        };
        self.trail.push(ToolCallRecord {
            call_id: self.trail.len() as u32 + 1,
            tool: name.to_owned(),
            status,
            duration_us: started.elapsed().as_micros() as u64,
            args_bytes: args_json.len() as u64,
            result_bytes,
            message,
        });
        result
    }

    /// The calls made so far, in order.
    pub fn trail(&self) -> &[ToolCallRecord] {
        &self.trail
    }

    /// The first budget this run went over, if any (latched).
    pub fn breach(&self) -> Option<&ErrorDetail> {
        self.breach.as_ref()
    }

    /// Consumes the state into the trail and the latched breach.
    pub(crate) fn into_report(self) -> (Vec<ToolCallRecord>, Option<ErrorDetail>) {
        (self.trail, self.breach)
    }

    fn latch(&mut self, limit: &'static str, message: &str) {
        self.breach
            .get_or_insert_with(|| ErrorDetail::new(limit, message));
    }

    async fn checked_call(&mut self, name: &str, args_json: &str) -> Result<String, CallError> {
        let tool = match self.tools.get(name) {
            Some(tool) if self.scope.allows(name) => Arc::clone(tool),
            // Unknown and out-of-scope read the same, so a guest cannot probe the registry.
            _ => {
                return Err(CallError::Denied(format!(
                    "tool `{name}` is not available in this run"
                )))
            }
        };
        let args = self.parse_args(name, args_json)?;

        if self.calls_made >= self.limits.max_tool_calls {
            let message = format!(
                "tool `{name}`: the run's ceiling of {} tool calls is reached",
                self.limits.max_tool_calls
            );
            self.latch("max_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        self.calls_made += 1;

        let timeout = tool
            .timeout()
            .unwrap_or(Duration::from_millis(self.limits.tool_timeout_ms));
        let value = self.invoke(&tool, args, timeout).await?;

        let text = json_guard::serialize_capped(
            &value,
            self.limits.max_tool_result_bytes,
            self.limits.max_json_depth,
            "result",
        )
        .map_err(|err| {
            let limit = match err {
                JsonError::TooDeep { .. } => "max_json_depth",
                _ => "max_tool_result_bytes",
            };
            let message = format!("tool `{name}`: {err}");
            self.latch(limit, &message);
            CallError::Failed(message)
        })?;

        let cumulative = self.cumulative_result_bytes + text.len() as u64;
        if cumulative > self.limits.max_cumulative_result_bytes {
            let message = format!(
                "tool `{name}`: tool results of this run would total {cumulative} bytes, over the cap of {} bytes",
                self.limits.max_cumulative_result_bytes
            );
            self.latch("max_cumulative_result_bytes", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        self.cumulative_result_bytes = cumulative;
        Ok(text)
    }

    fn parse_args(&mut self, name: &str, args_json: &str) -> Result<Value, CallError> {
        let parsed = parse_capped(
            args_json,
            self.limits.max_tool_args_bytes,
            self.limits.max_json_depth,
            "arguments",
        );
        let args = parsed.map_err(|err| {
            let message = format!("tool `{name}`: {err}");
            match err {
                JsonError::TooLarge { .. } => self.latch("max_tool_args_bytes", &message),
                JsonError::TooDeep { .. } => self.latch("max_json_depth", &message),
                _ => {}
            }
            CallError::InvalidArgs(message)
        })?;
        if !args.is_object() {
            let err = JsonError::NotAnObject {
                what: "arguments",
                got: type_name(&args),
            };
            return Err(CallError::InvalidArgs(format!("tool `{name}`: {err}")));
        }
        Ok(args)
    }

    /// Runs the handler on its own task, so a panic or a hang is contained.
    async fn invoke(
        &mut self,
        tool: &Tool,
        args: Value,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let name = tool.name();
        let mut task = tokio::spawn(tool.invoke(args));
        match tokio::time::timeout(timeout, &mut task).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(failure))) => Err(CallError::Failed(format!("tool `{name}`: {failure}"))),
            Ok(Err(join_error)) => {
                tracing::error!(tool = name, error = %join_error, "tool handler panicked");
                Err(CallError::Failed(format!(
                    "tool `{name}` failed unexpectedly"
                )))
            }
            Err(_elapsed) => {
                task.abort();
                let message = format!(
                    "tool `{name}` did not answer within {} ms",
                    timeout.as_millis()
                );
                self.latch("tool_timeout_ms", &message);
                Err(CallError::Timeout(message))
            }
        }
    }
}

#[cfg(test)]
mod tests;
