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
//! A guest may also have calls in flight together ([`BrokerCtx::start_call`], then
//! [`BrokerCtx::await_any`]; WIT 0.1.2): the same checks admit each call when it starts,
//! its tool runs as a task of its own, and its answer is checked and recorded when it
//! ends. At most `max_concurrent_tool_calls` run at once across the run tree; a started
//! call past that waits for one of its own run's calls to end. The trail stays in start
//! order, and dropping the run's broker drops the tools still running.
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

use std::collections::{HashMap, VecDeque};
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
/// run is dropped mid-call). Owned, so a started call's future can hold it.
struct InFlight(Arc<RunTree>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.calls_in_flight.fetch_sub(1, Ordering::AcqRel);
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
    /// Calls numbered so far (refused ones included): the last call id given.
    attempts: u32,
    cumulative_result_bytes: u64,
    trail: Vec<ToolCallRecord>,
    breach: Option<ErrorDetail>,
    /// The calls started by [`BrokerCtx::start_call`]; made at the first one, so a run
    /// that only calls one at a time carries none of it.
    overlap: Option<Box<Overlap>>,
}

/// What a call's record needs, from its number to its end.
struct Ticket {
    call_id: u32,
    started: Instant,
    args_bytes: u64,
    payloads: Payloads,
}

/// How a tool's handler ended, before the broker checks its result.
enum ToolEnd {
    Answered(Value),
    Failed(ToolFailure),
    Panicked,
    TimedOut(Duration),
}

/// A call started by [`BrokerCtx::start_call`] and not yet returned by
/// [`BrokerCtx::await_any`].
struct Started {
    name: String,
    tool: Arc<Tool>,
    ticket: Ticket,
}

/// The overlapping calls of a run.
#[derive(Default)]
struct Overlap {
    /// Each started tool runs as a task of its own, so it goes on while the guest
    /// computes; dropping the set (with the run) aborts them, dropping their futures.
    running: tokio::task::JoinSet<(u32, ToolEnd, Instant)>,
    /// The call each task serves, for a task that ends without its answer.
    tasks: HashMap<tokio::task::Id, u32>,
    /// Calls let through while every in-flight slot was taken and this run had calls
    /// running, in start order, each with its arguments: they start as slots free.
    waiting: VecDeque<(u32, Value)>,
    /// Started and waiting calls, by id.
    open: HashMap<u32, Started>,
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
            attempts: 0,
            cumulative_result_bytes: 0,
            trail: Vec::new(),
            breach: None,
            overlap: None,
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
        let mut ticket = self.number(name, args_json)?;
        let result = match self.admit(name, args_json, &mut ticket.payloads) {
            Ok((tool, args)) => match self.take_slot(name).and_then(|slot| self.spend(name).map(|()| slot)) {
                Ok(slot) => {
                    let end = self.launch(&tool, args, ticket.call_id, slot).await;
                    self.checked_result(name, &tool, end, &mut ticket.payloads)
                }
                Err(refused) => Err(refused),
            },
            Err(refused) => Err(refused),
        };
        self.record(name, ticket, result.as_deref(), Instant::now());
        result
    }

    /// Checks a call as [`BrokerCtx::call`] does and starts it without waiting for it:
    /// the tool runs as a task of its own until [`BrokerCtx::await_any`] returns its
    /// answer. A refusal is recorded and returned here, as from `call`.
    ///
    /// When every in-flight slot of the run tree is taken and this run has calls of its
    /// own running, the call waits for one of them to end instead of being refused
    /// (its place in the call ceiling is kept meanwhile); with none of its own running,
    /// nothing this run does would free a slot, and the call is refused as `call`
    /// refuses it.
    ///
    /// # Errors
    /// As [`BrokerCtx::call`], for every refusal made before the tool runs.
    pub fn start_call(&mut self, name: &str, args_json: &str) -> Result<u32, CallError> {
        let mut ticket = self.number(name, args_json)?;
        let call_id = ticket.call_id;
        let admitted = self.admit(name, args_json, &mut ticket.payloads);
        let refused = match admitted {
            Err(refused) => refused,
            Ok((tool, args)) => {
                let overlap = self.overlap_mut();
                let own_running = !overlap.running.is_empty();
                // Calls that wait start in order: a later one does not pass them.
                let queue_first = own_running && !overlap.waiting.is_empty();
                let slot = match if queue_first { None } else { self.free_slot() } {
                    Some(slot) => Ok(Some(slot)),
                    None if own_running => Ok(None),
                    None => self.take_slot(name).map(Some),
                };
                match slot {
                    Ok(Some(slot)) => match self.spend(name) {
                        Ok(()) => {
                            self.spawn(&tool, args, call_id, slot);
                            self.open(name, tool, ticket);
                            return Ok(call_id);
                        }
                        Err(refused) => refused,
                    },
                    Ok(None) => {
                        // Keeps its place under the call ceiling while it waits.
                        self.calls_made += 1;
                        self.overlap_mut().waiting.push_back((call_id, args));
                        self.open(name, tool, ticket);
                        return Ok(call_id);
                    }
                    Err(refused) => refused,
                }
            }
        };
        self.record(name, ticket, Err(&refused), Instant::now());
        Err(refused)
    }

    /// Waits until a started call has ended or `timeout` passed (`None`: no timeout of
    /// its own; the run's deadline drops the run), then returns every started call that
    /// has ended and was not returned before, with the answer `call` would have given,
    /// oldest first. Empty when no started call is pending.
    pub async fn await_any(&mut self, timeout: Option<Duration>) -> Vec<(u32, Result<String, CallError>)> {
        let Some(overlap) = self.overlap.as_mut() else { return Vec::new() };
        let mut ended = Vec::new();
        if !overlap.running.is_empty() {
            let next = overlap.running.join_next_with_id();
            let joined = match timeout {
                Some(timeout) => tokio::time::timeout(timeout, next).await.ok().flatten(),
                None => next.await,
            };
            if let Some(joined) = joined {
                ended.push(joined);
            }
        }
        let overlap = self.overlap_mut();
        while let Some(joined) = overlap.running.try_join_next_with_id() {
            ended.push(joined);
        }
        let mut finished = Vec::with_capacity(ended.len());
        for joined in ended {
            let (call_id, end, at) = match joined {
                Ok((task, (call_id, end, at))) => {
                    self.overlap_mut().tasks.remove(&task);
                    (call_id, end, at)
                }
                // Only an abort or a panic outside the handler's own catch ends a task so.
                Err(err) => match self.overlap_mut().tasks.remove(&err.id()) {
                    Some(call_id) => (call_id, ToolEnd::Panicked, Instant::now()),
                    None => continue,
                },
            };
            finished.push(self.finish(call_id, Ok(end), at));
        }
        self.start_waiting(&mut finished);
        finished.sort_unstable_by_key(|(call_id, _)| *call_id);
        finished
    }

    /// Starts waiting calls into free slots, in order; refuses the rest, as `call`
    /// would, when this run has no call running that would free one.
    fn start_waiting(&mut self, finished: &mut Vec<(u32, Result<String, CallError>)>) {
        loop {
            let Some(overlap) = self.overlap.as_mut() else { return };
            if overlap.waiting.is_empty() {
                return;
            }
            let own_running = !overlap.running.is_empty();
            let slot = self.free_slot();
            if slot.is_none() && own_running {
                return;
            }
            let overlap = self.overlap_mut();
            let Some((call_id, args)) = overlap.waiting.pop_front() else { return };
            let Some((name, tool)) = overlap.open.get(&call_id).map(|s| (s.name.clone(), Arc::clone(&s.tool))) else {
                continue;
            };
            // The place it kept under the call ceiling is spent now, or given back.
            self.calls_made -= 1;
            let slot = match slot {
                Some(slot) => Ok(slot),
                None => self.take_slot(&name),
            };
            match slot.and_then(|slot| self.spend(&name).map(|()| slot)) {
                Ok(slot) => self.spawn(&tool, args, call_id, slot),
                Err(refused) => finished.push(self.finish(call_id, Err(refused), Instant::now())),
            }
        }
    }

    fn overlap_mut(&mut self) -> &mut Overlap {
        self.overlap.get_or_insert_with(Box::default)
    }

    fn open(&mut self, name: &str, tool: Arc<Tool>, ticket: Ticket) {
        let call_id = ticket.call_id;
        self.overlap_mut().open.insert(call_id, Started { name: name.to_owned(), tool, ticket });
    }

    fn spawn(&mut self, tool: &Tool, args: Value, call_id: u32, slot: InFlight) {
        let call = self.launch(tool, args, call_id, slot);
        let overlap = self.overlap_mut();
        let task = overlap.running.spawn(async move { (call_id, call.await, Instant::now()) });
        overlap.tasks.insert(task.id(), call_id);
    }

    /// Records the end of started call `call_id`: the tool's end, or a refusal before it
    /// ran, checked as `call` checks it.
    fn finish(
        &mut self,
        call_id: u32,
        end: Result<ToolEnd, CallError>,
        at: Instant,
    ) -> (u32, Result<String, CallError>) {
        let Some(Started { name, tool, mut ticket }) = self.overlap_mut().open.remove(&call_id) else {
            return (call_id, Err(CallError::Failed("the call ended twice".into())));
        };
        let result = match end {
            Ok(end) => self.checked_result(&name, &tool, end, &mut ticket.payloads),
            Err(refused) => Err(refused),
        };
        self.record(&name, ticket, result.as_deref(), at);
        (call_id, result)
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

    /// Numbers a call and audits its start, or refuses it unrecorded past the attempt bound.
    fn number(&mut self, name: &str, args_json: &str) -> Result<Ticket, CallError> {
        let attempt_cap = u64::from(self.limits.max_tool_calls) * 2 + REFUSED_ATTEMPT_SLACK;
        if u64::from(self.attempts) >= attempt_cap {
            let message =
                format!("tool `{}`: the run attempted more than {attempt_cap} tool calls", bounded_name(name));
            self.latch("max_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        self.attempts += 1;
        let call_id = self.attempts;
        self.observers.sink.record(&AuditEvent::ToolCallStarted {
            run_id: self.run.run_id.clone(),
            call_id,
            ancestry: self.run.ancestry.clone(),
            tool: bounded_name(name).into_owned(),
            args_bytes: args_json.len() as u64,
        });
        Ok(Ticket {
            call_id,
            started: Instant::now(),
            args_bytes: args_json.len() as u64,
            payloads: Payloads::default(),
        })
    }

    /// Records a call's end, audits it and puts it in the trail at its place in start order.
    fn record(&mut self, name: &str, ticket: Ticket, result: Result<&str, &CallError>, ended: Instant) {
        let shown = bounded_name(name);
        let (status, result_bytes, message) = match result {
            Ok(text) => (CallStatus::Ok, text.len() as u64, None),
            Err(err) => (err.status(), 0, Some(self.recorded_message(err, &shown, ticket.payloads.tool_wrote_message))),
        };
        let record = ToolCallRecord {
            run_id: self.run.run_id.clone(),
            call_id: ticket.call_id,
            ancestry: self.run.ancestry.clone(),
            tool: shown.into_owned(),
            status,
            duration_ms: ended.saturating_duration_since(ticket.started).as_secs_f64() * 1000.0,
            args_bytes: ticket.args_bytes,
            result_bytes,
            message,
            args: ticket.payloads.args,
            result: ticket.payloads.result,
        };
        let label = if self.tools.get(name).is_some() { name } else { UNKNOWN_TOOL_LABEL };
        self.observers.metrics.tool_call_finished(label, status);
        // The record goes into the event and comes back out for the trail: no clone of
        // it (and of its payloads, when they are recorded) per call.
        let event = AuditEvent::ToolCallFinished(record);
        self.observers.sink.record(&event);
        if let AuditEvent::ToolCallFinished(record) = event {
            // Calls that overlap end in any order; the trail keeps the order they started in.
            let at = self.trail.partition_point(|earlier| earlier.call_id < record.call_id);
            self.trail.insert(at, record);
        }
    }

    /// The checks before a call reaches its tool, up to the call ceiling: the tool and
    /// the parsed arguments.
    fn admit(&mut self, name: &str, args_json: &str, payloads: &mut Payloads) -> Result<(Arc<Tool>, Value), CallError> {
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
        Ok((tool, args))
    }

    /// An in-flight slot of the run tree, or the refusal (latched) when all are taken.
    fn take_slot(&mut self, name: &str) -> Result<InFlight, CallError> {
        match self.free_slot() {
            Some(slot) => Ok(slot),
            None => {
                let message = format!(
                    "tool `{name}`: {} tool calls are already in flight in this run and its parents",
                    self.limits.max_concurrent_tool_calls
                );
                self.latch("max_concurrent_tool_calls", &message);
                Err(CallError::BudgetExhausted(message))
            }
        }
    }

    /// An in-flight slot of the run tree, if one is free.
    fn free_slot(&self) -> Option<InFlight> {
        let tree = Arc::clone(&self.tree);
        let in_flight = tree.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        // Taken first and given back by the drop when over: the bound holds under races.
        let slot = InFlight(tree);
        (in_flight < self.limits.max_concurrent_tool_calls).then_some(slot)
    }

    /// Spends one call of the run tree's budget and of the run's ceiling.
    fn spend(&mut self, name: &str) -> Result<(), CallError> {
        let budget = self.tree.max_tool_calls;
        if !increment_below(&self.tree.tool_calls, budget) {
            let message =
                format!("tool `{name}`: this run and the runs nested with it have made their {budget} tool calls");
            self.latch("max_tree_tool_calls", &message);
            return Err(CallError::BudgetExhausted(message));
        }
        self.calls_made += 1;
        Ok(())
    }

    /// The tool's call under its deadline, a panic contained, holding `slot` until it
    /// ends: owns all it needs, so a started call can run as a task of its own.
    ///
    /// `call` polls it inline, not spawned: a spawned task lands on another worker
    /// thread, and the two cross-thread wake-ups would cost many times the rest of the
    /// call (docs/performance.md). A handler that *blocks* its thread (instead of
    /// awaiting) still holds up its own run; it is the embedder's to make async.
    fn launch(
        &self,
        tool: &Tool,
        args: Value,
        call_id: u32,
        slot: InFlight,
    ) -> impl std::future::Future<Output = ToolEnd> + Send + 'static {
        let ctx = CallContext {
            run: Arc::clone(&self.run),
            call_id,
            scope: Arc::clone(&self.scope),
            tools: Arc::clone(&self.tools),
            tree: Arc::clone(&self.tree),
        };
        let timeout = tool.timeout().unwrap_or(Duration::from_millis(self.limits.tool_timeout_ms));
        let call = AssertUnwindSafe(tool.invoke(args, ctx)).catch_unwind();
        async move {
            let _slot = slot;
            match tokio::time::timeout(timeout, call).await {
                Ok(Ok(Ok(value))) => ToolEnd::Answered(value),
                Ok(Ok(Err(failure))) => ToolEnd::Failed(failure),
                Ok(Err(_panic)) => ToolEnd::Panicked,
                Err(_elapsed) => ToolEnd::TimedOut(timeout),
            }
        }
    }

    /// The guest's answer from the tool's end: failures named, the result projected,
    /// then held to the result caps.
    fn checked_result(
        &mut self,
        name: &str,
        tool: &Tool,
        end: ToolEnd,
        payloads: &mut Payloads,
    ) -> Result<String, CallError> {
        let value = match end {
            ToolEnd::Answered(value) => value,
            ToolEnd::Failed(failure) => {
                payloads.tool_wrote_message = true;
                return Err(CallError::Failed(format!("tool `{name}`: {failure}")));
            }
            ToolEnd::Panicked => {
                tracing::error!(tool = name, "tool handler panicked");
                return Err(CallError::Failed(format!("tool `{name}` failed unexpectedly")));
            }
            ToolEnd::TimedOut(timeout) => {
                let message = format!("tool `{name}` did not answer within {} ms", timeout.as_millis());
                self.latch("tool_timeout_ms", &message);
                return Err(CallError::Timeout(message));
            }
        };
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
}

#[cfg(test)]
mod tests;
