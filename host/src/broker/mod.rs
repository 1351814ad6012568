//! The broker: the one mediator of every tool call a guest makes.
//!
//! Per run, a [`BrokerCtx`] holds the run's [`Scope`], its [`Limits`] and its spent
//! budgets. Every call goes through, in order: name length cap (before the name is
//! copied) → name and scope check → argument size cap (before parsing) → strict parse
//! with a depth cap → object check → JSON Schema check → call ceiling → concurrency
//! bound → the run tree's call budget → the tool itself under a deadline (panics
//! contained) → result projection → result size cap → cumulative result cap → audit.
//! Projection runs *before* the result caps, because the caps bound what reaches the
//! guest and a projection exists precisely to trim large payloads down to that.
//!
//! Denials come back to the guest as [`CallError`] values — catchable, never traps —
//! and budget breaches are latched, so the run's outcome reports them even when the
//! guest swallows the error. Nothing here touches wasmtime; [`link`] adapts it to the
//! generated bindings.
//!
//! What is recorded (the trail, audit events, logs) holds no argument or result value
//! unless payload recording is on: the broker's own messages name paths, rules and
//! sizes, never values; a tool's failure message — its author's words, which may quote
//! arguments — is recorded only with payload recording, and then redacted. A
//! guest-chosen tool name is recorded whole only up to [`MAX_TOOL_NAME_BYTES`].

mod json_guard;
pub(crate) mod link;
mod projection;
mod schema;
mod scope;
mod tool;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;

pub use json_guard::JsonError;
pub(crate) use json_guard::{parse_capped, serialize_capped, type_name};
pub use projection::Projection;
pub(crate) use scope::Reach;
pub use scope::{Inherit, Scope};
pub(crate) use tool::bounded_name;
pub use tool::{CallContext, Tool, ToolFailure, ToolRegistrationError, Tools, MAX_TOOL_NAME_BYTES};

use crate::audit::{AuditConfig, AuditEvent, AuditSink, CallRef, Redactor, TracingSink};
use crate::limits::Limits;
use crate::metrics::{Metrics, UNKNOWN_TOOL_LABEL};
use crate::outcome::{CallStatus, ErrorDetail, ToolCallRecord};

/// Refused attempts a run may make beyond twice its call ceiling before the broker stops
/// recording them: refused calls do not spend `max_tool_calls`, but each one is a
/// record, so a guest probing in a loop must not grow the trail without bound.
const REFUSED_ATTEMPT_SLACK: u64 = 100;

/// Why a tool call returned no result; mirrors the WIT `call-error` variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
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

/// Who a run is: its id, the chain of calls that started it, and its nesting depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunIdentity {
    /// A unique id (a UUID).
    pub run_id: String,
    /// Parent runs and calls, outermost first; empty for a top-level run.
    pub ancestry: Vec<CallRef>,
    /// 0 for a top-level run.
    pub depth: u32,
}

impl RunIdentity {
    /// A fresh top-level identity.
    pub fn top_level() -> Self {
        RunIdentity { run_id: uuid::Uuid::new_v4().to_string(), ancestry: Vec::new(), depth: 0 }
    }

    /// A fresh identity for a run started by call `ctx`.
    pub(crate) fn nested_in(ctx: &CallContext) -> Self {
        let mut ancestry = ctx.run.ancestry.clone();
        ancestry.push(CallRef { run_id: ctx.run.run_id.clone(), call_id: ctx.call_id });
        RunIdentity { run_id: uuid::Uuid::new_v4().to_string(), ancestry, depth: ctx.run.depth + 1 }
    }
}

/// State shared by a run and every run nested in it.
#[derive(Debug)]
pub(crate) struct RunTree {
    calls_in_flight: AtomicU32,
    /// Calls of every run of the tree that reached their tool.
    tool_calls: AtomicU32,
    /// The tree's call budget, fixed by its top-level run's limits.
    max_tool_calls: u32,
    /// Nested runs of the tree in flight, each holding a guest instance.
    nested_runs: AtomicU32,
}

impl RunTree {
    /// The tree of a top-level run with `limits`.
    pub(crate) fn new(limits: &Limits) -> Self {
        RunTree {
            calls_in_flight: AtomicU32::new(0),
            tool_calls: AtomicU32::new(0),
            max_tool_calls: limits.tree_tool_calls(),
            nested_runs: AtomicU32::new(0),
        }
    }

    /// Counts one more nested run in flight, if fewer than `share` are; the count
    /// drops when the returned guard does.
    ///
    /// # Errors
    /// The tree already has `share` nested runs in flight: kind `instance_pool`, as a
    /// full pool would be (the share is the tree's part of the engine's pool).
    pub(crate) fn enter_nested(self: &Arc<Self>, share: u32) -> Result<NestedRun, ErrorDetail> {
        if !increment_below(&self.nested_runs, share) {
            let message = format!(
                "this run tree already has {share} nested runs in flight, its share of the engine's instance pool"
            );
            return Err(ErrorDetail::new("instance_pool", message));
        }
        Ok(NestedRun(Arc::clone(self)))
    }
}

impl Default for RunTree {
    fn default() -> Self {
        RunTree::new(&Limits::default())
    }
}

/// Adds one to `counter` if it is below `bound`, atomically; false when it is not.
fn increment_below(counter: &AtomicU32, bound: u32) -> bool {
    let mut current = counter.load(Ordering::Acquire);
    while current < bound {
        match counter.compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return true,
            Err(now) => current = now,
        }
    }
    false
}

/// A nested run in flight, counted against its tree's share of the instance pool.
#[derive(Debug)]
pub(crate) struct NestedRun(Arc<RunTree>);

impl Drop for NestedRun {
    fn drop(&mut self) {
        self.0.nested_runs.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Releases an in-flight slot when the call ends, however it ends (including when the
/// run is dropped mid-call).
struct InFlight<'a>(&'a AtomicU32);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where a broker reports: audit sink, redaction policy, engine metrics.
#[derive(Clone)]
pub(crate) struct Observers {
    pub(crate) sink: Arc<dyn AuditSink>,
    pub(crate) redactor: Arc<Redactor>,
    pub(crate) record_payloads: bool,
    pub(crate) metrics: Arc<Metrics>,
}

impl Observers {
    pub(crate) fn new(sink: Arc<dyn AuditSink>, config: &AuditConfig, metrics: Arc<Metrics>) -> Self {
        Observers {
            sink,
            redactor: Arc::new(Redactor::new(&config.redact_keys, config.max_string_bytes)),
            record_payloads: config.record_payloads,
            metrics,
        }
    }
}

impl Default for Observers {
    fn default() -> Self {
        Observers::new(Arc::new(TracingSink), &AuditConfig::default(), Arc::default())
    }
}

/// What a guest may see of one tool: what `list_tools()` shows it, and what a worker's
/// parent sends the worker for the run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSummary {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its argument JSON Schema, as JSON text.
    pub args_schema: String,
}

/// Per-run broker state: scope, limits, spent budgets, the trail, the first breach.
pub struct BrokerCtx {
    tools: Arc<Tools>,
    // Behind `Arc`s because every call's `CallContext` holds them too: a clone of a
    // scope of names is a set of strings, per call.
    scope: Arc<Scope>,
    limits: Limits,
    run: Arc<RunIdentity>,
    tree: Arc<RunTree>,
    observers: Observers,
    calls_made: u32,
    cumulative_result_bytes: u64,
    trail: Vec<ToolCallRecord>,
    breach: Option<ErrorDetail>,
}

/// Payloads kept for the record when recording is on.
#[derive(Default)]
struct Payloads {
    args: Option<Value>,
    result: Option<Value>,
    /// The call's error message carries the tool's own words (which may quote its
    /// arguments), not only the broker's.
    tool_wrote_message: bool,
}

impl BrokerCtx {
    /// State for one top-level run that may call the tools of `tools` that `scope`
    /// allows, auditing to `tracing` without payloads.
    pub fn new(tools: Arc<Tools>, scope: Scope, limits: Limits) -> Self {
        let tree = Arc::new(RunTree::new(&limits));
        Self::for_run(tools, scope, limits, RunIdentity::top_level(), tree, Observers::default())
    }

    pub(crate) fn for_run(
        tools: Arc<Tools>,
        scope: Scope,
        limits: Limits,
        run: RunIdentity,
        tree: Arc<RunTree>,
        observers: Observers,
    ) -> Self {
        BrokerCtx {
            tools,
            scope: Arc::new(scope),
            limits,
            run: Arc::new(run),
            tree,
            observers,
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

    /// Mediates one call; records and audits it whatever happens — up to a bound on
    /// attempts (twice `max_tool_calls` plus 100, refused ones included), past which
    /// every call is refused unrecorded and the run ends `tool_limit`.
    ///
    /// A `name` longer than [`MAX_TOOL_NAME_BYTES`] is denied before any of it is
    /// copied, and recorded as its first bytes and its length.
    pub async fn call(&mut self, name: &str, args_json: &str) -> Result<String, CallError> {
        let shown = bounded_name(name);
        let attempt_cap = u64::from(self.limits.max_tool_calls) * 2 + REFUSED_ATTEMPT_SLACK;
        if self.trail.len() as u64 >= attempt_cap {
            let message = format!("tool `{shown}`: the run attempted more than {attempt_cap} tool calls");
            self.latch("max_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        let started = Instant::now();
        let call_id = self.trail.len() as u32 + 1;
        self.observers.sink.record(&AuditEvent::ToolCallStarted {
            run_id: self.run.run_id.clone(),
            call_id,
            ancestry: self.run.ancestry.clone(),
            tool: shown.clone().into_owned(),
            args_bytes: args_json.len() as u64,
        });
        let mut payloads = Payloads::default();
        let result = self.checked_call(name, args_json, call_id, &mut payloads).await;
        let (status, result_bytes, message) = match &result {
            Ok(text) => (CallStatus::Ok, text.len() as u64, None),
            Err(err) => (err.status(), 0, Some(self.recorded_message(err, &shown, payloads.tool_wrote_message))),
        };
        let record = ToolCallRecord {
            run_id: self.run.run_id.clone(),
            call_id,
            ancestry: self.run.ancestry.clone(),
            tool: shown.into_owned(),
            status,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
            args_bytes: args_json.len() as u64,
            result_bytes,
            message,
            args: payloads.args,
            result: payloads.result,
        };
        let label = if self.tools.get(name).is_some() { name } else { UNKNOWN_TOOL_LABEL };
        self.observers.metrics.tool_call_finished(label, status);
        // The record goes into the event and comes back out for the trail: no clone of
        // it (and of its payloads, when they are recorded) per call.
        let event = AuditEvent::ToolCallFinished(record);
        self.observers.sink.record(&event);
        if let AuditEvent::ToolCallFinished(record) = event {
            self.trail.push(record);
        }
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
        self.breach.get_or_insert_with(|| ErrorDetail::new(limit, message));
    }

    /// The message the record keeps of `err`. The broker's own messages name no
    /// argument or result value and are kept as they are; a tool's own words are kept
    /// only with payload recording, and then redacted and cut.
    fn recorded_message(&self, err: &CallError, shown: &str, tool_wrote_message: bool) -> String {
        if !tool_wrote_message {
            err.message().to_owned()
        } else if self.observers.record_payloads {
            self.observers.redactor.redact_message(err.message())
        } else {
            format!(
                "tool `{shown}` failed (its message of {} bytes is recorded only with payload recording)",
                err.message().len()
            )
        }
    }

    async fn checked_call(
        &mut self,
        name: &str,
        args_json: &str,
        call_id: u32,
        payloads: &mut Payloads,
    ) -> Result<String, CallError> {
        if name.len() > MAX_TOOL_NAME_BYTES {
            let message = format!(
                "tool `{}` is not available in this run: no tool name is longer than {MAX_TOOL_NAME_BYTES} bytes",
                bounded_name(name)
            );
            return Err(CallError::Denied(message));
        }
        let tool = match self.tools.get(name) {
            Some(tool) if self.scope.allows(name) => Arc::clone(tool),
            // Unknown and out-of-scope read the same, so a guest cannot probe the registry.
            _ => return Err(CallError::Denied(format!("tool `{name}` is not available in this run"))),
        };
        let args = self.parse_args(name, args_json)?;
        if self.observers.record_payloads {
            payloads.args = Some(self.observers.redactor.redact(&args));
        }
        if let Some(schema) = tool.schema() {
            schema.check(&args).map_err(|problems| CallError::InvalidArgs(format!("tool `{name}`: {problems}")))?;
        }

        if self.calls_made >= self.limits.max_tool_calls {
            let message =
                format!("tool `{name}`: the run's ceiling of {} tool calls is reached", self.limits.max_tool_calls);
            self.latch("max_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        let tree = Arc::clone(&self.tree);
        let in_flight = tree.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        let _slot = InFlight(&tree.calls_in_flight);
        if in_flight >= self.limits.max_concurrent_tool_calls {
            let message = format!(
                "tool `{name}`: {} tool calls are already in flight in this run and its parents",
                self.limits.max_concurrent_tool_calls
            );
            self.latch("max_concurrent_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        let budget = tree.max_tool_calls;
        if !increment_below(&tree.tool_calls, budget) {
            let message =
                format!("tool `{name}`: this run and the runs nested with it have made their {budget} tool calls");
            self.latch("max_tree_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        self.calls_made += 1;

        let ctx = CallContext {
            run: Arc::clone(&self.run),
            call_id,
            scope: Arc::clone(&self.scope),
            tools: Arc::clone(&self.tools),
            tree: Arc::clone(&self.tree),
        };
        let timeout = tool.timeout().unwrap_or(Duration::from_millis(self.limits.tool_timeout_ms));
        let value = self.invoke(&tool, args, ctx, timeout, payloads).await?;
        let value = match tool.projection() {
            Some(projection) => projection.apply(&value).unwrap_or(Value::Null),
            None => value,
        };

        let text = serialize_capped(&value, self.limits.max_tool_result_bytes, self.limits.max_json_depth, "result")
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
        if self.observers.record_payloads {
            payloads.result = Some(self.observers.redactor.redact(&value));
        }
        Ok(text)
    }

    fn parse_args(&mut self, name: &str, args_json: &str) -> Result<Value, CallError> {
        let parsed = parse_capped(args_json, self.limits.max_tool_args_bytes, self.limits.max_json_depth, "arguments");
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
            let err = JsonError::NotAnObject { what: "arguments", got: type_name(&args) };
            return Err(CallError::InvalidArgs(format!("tool `{name}`: {err}")));
        }
        Ok(args)
    }

    /// Runs the handler under its deadline, containing a panic.
    ///
    /// The handler is polled inline, not spawned: a spawned task lands on another
    /// worker thread, and the two cross-thread wake-ups would cost many times the rest
    /// of the call (docs/performance.md). A handler that *blocks* its thread (instead of
    /// awaiting) still holds up its own run; it is the embedder's to make async.
    async fn invoke(
        &mut self,
        tool: &Tool,
        args: Value,
        ctx: CallContext,
        timeout: Duration,
        payloads: &mut Payloads,
    ) -> Result<Value, CallError> {
        let name = tool.name();
        let call = AssertUnwindSafe(tool.invoke(args, ctx)).catch_unwind();
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(failure))) => {
                payloads.tool_wrote_message = true;
                Err(CallError::Failed(format!("tool `{name}`: {failure}")))
            }
            Ok(Err(_panic)) => {
                tracing::error!(tool = name, "tool handler panicked");
                Err(CallError::Failed(format!("tool `{name}` failed unexpectedly")))
            }
            Err(_elapsed) => {
                let message = format!("tool `{name}` did not answer within {} ms", timeout.as_millis());
                self.latch("tool_timeout_ms", &message);
                Err(CallError::Timeout(message))
            }
        }
    }
}

#[cfg(test)]
mod tests;
