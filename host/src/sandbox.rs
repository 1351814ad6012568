//! A run configuration and a run's life: admission, scope, the broker, and where the
//! guest executes (in this process, or in a worker process).

use std::sync::Arc;
use std::time::Instant;

use crate::audit::{AuditConfig, AuditEvent, AuditSink, TracingSink};
use crate::broker::link::GuestBroker;
use crate::broker::{self, BrokerCtx, CallContext, Inherit, Observers, Reach, RunIdentity, RunTree, Scope, Tools};
use crate::cancel::CancelToken;
use crate::execution::{self, Job};
use crate::limits::Limits;
use crate::live_output::Delivery;
use crate::outcome::{ErrorDetail, Outcome, Status};
use crate::run_request::RunRequest;
use crate::runtime::Runtime;
use crate::session::{Session, SessionConfig, SessionError};
use crate::vfs::InputFiles;
use futures::future::BoxFuture;
use serde_json::Value;

/// A reusable run configuration: a runtime, the tools, a scope and limits. Cheap to
/// clone; every [`Sandbox::run`] gets a fresh instance, so nothing leaks between runs.
///
/// ```no_run
/// # async fn demo() -> Result<(), wasmbox::Error> {
/// use serde_json::json;
/// use wasmbox::{Engine, EngineConfig, Runtime, Sandbox, Scope, Tool, Tools};
///
/// let engine = Engine::new(EngineConfig::default())?;
/// let mut tools = Tools::new();
/// tools.register(Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
///     Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// })).expect("valid tool");
/// let sandbox = Sandbox::new(Runtime::python(&engine)?, tools).scope(Scope::All);
/// let outcome = sandbox.run("tools.add(a=1, b=2) * 10").await;
/// assert_eq!(outcome.value, Some(json!(30)));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Sandbox {
    runtime: Runtime,
    tools: Arc<Tools>,
    scope: Scope,
    limits: Limits,
    /// Audit sink, compiled redaction policy and engine metrics: built when configured,
    /// not per run.
    observers: Observers,
    /// Where runs execute when not in this process (worker processes); `None` runs
    /// them here.
    executor: Option<Arc<dyn Executor>>,
}

/// Executes runs somewhere other than this process: the seam through which worker
/// processes serve a sandbox's runs (see `worker/`). The broker stays here: the executor
/// gets the run's [`BrokerCtx`] and answers the guest's tool calls through it.
pub(crate) trait Executor: Send + Sync + std::fmt::Debug {
    /// Runs `job`; every ending is an [`Outcome`] whose trail is the broker's.
    fn execute<'a>(&'a self, job: Job<'a>, broker: BrokerCtx) -> BoxFuture<'a, Outcome>;
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("runtime", &self.runtime)
            .field("scope", &self.scope)
            .field("limits", &self.limits)
            .field("executor", &self.executor)
            .finish_non_exhaustive()
    }
}

/// Where a run starts from: the top (admission control applies) or inside a tool call.
enum Origin<'a> {
    TopLevel,
    Nested(&'a CallContext, &'a Inherit),
}

impl Sandbox {
    /// A sandbox over `runtime` that knows `tools` but may call none of them (the scope
    /// is [`Scope::None`]), has default [`Limits`], and audits to `tracing` without
    /// payloads.
    pub fn new(runtime: Runtime, tools: Tools) -> Self {
        Sandbox {
            tools: Arc::new(tools),
            scope: Scope::None,
            limits: Limits::default(),
            observers: Observers::new(
                Arc::new(TracingSink),
                &AuditConfig::default(),
                Arc::clone(runtime.engine().metrics_handle()),
            ),
            executor: None,
            runtime,
        }
    }

    /// The runtime runs use.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Runs execute through `executor`, or in this process with `None`.
    pub(crate) fn with_executor(mut self, executor: Option<Arc<dyn Executor>>) -> Self {
        self.executor = executor;
        self
    }

    /// Sets which tools runs may call.
    pub fn scope(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// Sets the limits of each run (checked when a run starts).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sends audit events to `sink` (default: [`TracingSink`]).
    pub fn audit_sink(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.observers.sink = sink;
        self
    }

    /// Sets what the audit records (payloads, redaction).
    pub fn audit_config(mut self, config: AuditConfig) -> Self {
        self.observers = Observers::new(self.observers.sink, &config, self.observers.metrics);
        self
    }

    /// The limits each run gets.
    pub fn current_limits(&self) -> &Limits {
        &self.limits
    }

    /// Opens a [`Session`]: one guest instance kept alive across steps, so that what a
    /// step defines (globals, imports, functions, classes) is there in the next. Each
    /// step has this sandbox's limits, tools and scope, with its own deadline and tool
    /// budgets; the memory limit spans the session. See [`crate::session`].
    ///
    /// # Errors
    /// A [`SessionError`] when the session cannot start: invalid limits or `config`, a
    /// sandbox that runs in worker processes, admission control or the instance pool
    /// turning it away, or a guest that fails to start.
    pub async fn session(&self, config: SessionConfig) -> Result<Session, SessionError> {
        Session::open(self.clone(), config).await
    }

    /// A broker for one top-level run (or session step) with `identity`, in a tree of
    /// its own.
    pub(crate) fn top_level_broker(&self, identity: RunIdentity) -> BrokerCtx {
        let tree = Arc::new(RunTree::new(&self.limits));
        BrokerCtx::for_run(
            Arc::clone(&self.tools),
            self.scope.clone(),
            self.limits.clone(),
            identity,
            tree,
            self.observers.clone(),
        )
    }

    /// The audit sink and metrics of this sandbox's runs.
    pub(crate) fn observers(&self) -> &Observers {
        &self.observers
    }

    /// True when runs execute in this process (no worker isolation).
    pub(crate) fn runs_in_process(&self) -> bool {
        self.executor.is_none()
    }

    /// Runs `code` with a `null` input.
    pub async fn run(&self, code: &str) -> Outcome {
        self.run_with_input(code, &Value::Null).await
    }

    /// Runs `code` with `input` visible to it (`INPUT` in Python). Never panics and
    /// never returns an error: every ending is an [`Outcome`]. Dropping the future
    /// stops the guest and drops its Store.
    pub async fn run_with_input(&self, code: &str, input: &Value) -> Outcome {
        self.run_cancellable(code, input, &CancelToken::new()).await
    }

    /// Like [`Sandbox::run_with_input`], stopped with status `cancelled` when `cancel`
    /// is cancelled.
    pub async fn run_cancellable(&self, code: &str, input: &Value, cancel: &CancelToken) -> Outcome {
        self.run_with_files(code, input, &InputFiles::new(), cancel).await
    }

    /// Like [`Sandbox::run_cancellable`], with `files` readable under the guest's
    /// `/input`. Whatever the guest leaves under `/output` comes back in
    /// [`Outcome::files`] (every run has `/output` and `/tmp`, within
    /// [`Limits::max_fs_bytes`] and [`Limits::max_fs_files`]).
    ///
    /// ```no_run
    /// # async fn demo(sandbox: wasmbox::Sandbox) {
    /// use wasmbox::{CancelToken, InputFiles};
    /// let mut files = InputFiles::new();
    /// files.insert("names.txt", b"ada\ngrace\n".to_vec()).unwrap();
    /// let code = "names = open('/input/names.txt').read().split()\n\
    ///             open('/output/count.txt', 'w').write(str(len(names)))";
    /// let outcome = sandbox.run_with_files(code, &serde_json::Value::Null, &files, &CancelToken::new()).await;
    /// assert_eq!(outcome.files[0].text(), Some("2"));
    /// # }
    /// ```
    pub async fn run_with_files(&self, code: &str, input: &Value, files: &InputFiles, cancel: &CancelToken) -> Outcome {
        self.start(Origin::TopLevel, code, input, files, cancel, None).await
    }

    /// Runs `request`: its code with its input, files and cancel token, and its
    /// [`OutputSink`](crate::OutputSink), if any, receiving stdout and stderr while the
    /// guest writes them (the caps hold for the sink too; see [`crate::live_output`]).
    /// The other `run` methods are this with fewer options.
    ///
    /// ```no_run
    /// # async fn demo(sandbox: wasmbox::Sandbox) {
    /// use std::sync::Arc;
    /// use wasmbox::{OutputStream, RunRequest};
    /// let print_live = Arc::new(|_: OutputStream, bytes: &[u8]| print!("{}", String::from_utf8_lossy(bytes)));
    /// let outcome = sandbox.run_with(RunRequest::new("print('now')").output_sink(print_live)).await;
    /// assert_eq!(outcome.stdout.text, "now\n");
    /// # }
    /// ```
    pub async fn run_with(&self, request: RunRequest) -> Outcome {
        let RunRequest { code, input, files, cancel, output_sink } = request;
        self.start(Origin::TopLevel, &code, &input, &files, &cancel, output_sink).await
    }

    /// Starts a run from inside a tool handler (a "sub-agent" tool), as a child of the
    /// call `parent`. It may call the tools of this sandbox's scope that `inherit` takes
    /// and that are the very tools the parent run can call (the same registration: a
    /// clone of the parent's [`Tools`] shares them; a tool registered again, or another
    /// tool of the same name, is not the parent's). Listing a tool the parent cannot
    /// call, or nesting deeper than `max_nesting_depth`, ends it as `invalid_request`.
    /// It shares the parent's admission slot, in-flight tool-call bound and tree-wide
    /// call budget (`max_tree_tool_calls`); a tree holds at most its share of the
    /// engine's instance pool, and a nested run past it ends `rejected` with kind
    /// `instance_pool`. Its audit events carry the parent's run and call ids.
    pub async fn run_nested(&self, parent: &CallContext, code: &str, input: &Value, inherit: &Inherit) -> Outcome {
        self.start(Origin::Nested(parent, inherit), code, input, &InputFiles::new(), &CancelToken::new(), None).await
    }

    async fn start(
        &self,
        origin: Origin<'_>,
        code: &str,
        input: &Value,
        files: &InputFiles,
        cancel: &CancelToken,
        output_sink: Option<Arc<dyn crate::live_output::OutputSink>>,
    ) -> Outcome {
        let started = Instant::now();
        let engine = self.runtime.engine();
        let observers = &self.observers;
        let (identity, tree, scope) = match &origin {
            Origin::TopLevel => {
                (RunIdentity::top_level(), Arc::new(RunTree::new(&self.limits)), Ok(self.scope.clone()))
            }
            Origin::Nested(parent, inherit) => {
                (RunIdentity::nested_in(parent), Arc::clone(&parent.tree), self.nested_scope(parent, inherit))
            }
        };
        observers.sink.record(&AuditEvent::RunStarted {
            run_id: identity.run_id.clone(),
            ancestry: identity.ancestry.clone(),
            runtime: self.runtime.name().to_owned(),
            code_bytes: code.len() as u64,
        });

        let mut outcome = match (scope, self.prepare(code, input)) {
            (Err(error), _) | (_, Err(error)) => Outcome::early(Status::InvalidRequest, error),
            (Ok(scope), Ok(input_json)) => {
                let admitted = match origin {
                    Origin::TopLevel => engine
                        .admission()
                        .admit(engine.metrics_handle())
                        .await
                        .map(|slot| (Some(slot), None))
                        .map_err(|refusal| ErrorDetail::new("admission", refusal.to_string())),
                    // A nested run lives inside its parent's slot (queueing it could
                    // deadlock), within its tree's share of the instance pool.
                    Origin::Nested(..) => {
                        tree.enter_nested(engine.nested_runs_per_tree()).map(|nested| (None, Some(nested)))
                    }
                };
                match admitted {
                    Err(refusal) => Outcome::early(Status::Rejected, refusal),
                    Ok(_held) => {
                        let broker = BrokerCtx::for_run(
                            Arc::clone(&self.tools),
                            scope,
                            self.limits.clone(),
                            identity.clone(),
                            tree,
                            observers.clone(),
                        );
                        let delivery = output_sink.map(|sink| Delivery::start(sink, &self.limits));
                        let live = delivery.as_ref().map(|delivery| delivery.live().clone());
                        let job = Job { limits: &self.limits, code, input_json: &input_json, files, cancel, live };
                        let outcome = match &self.executor {
                            None => execution::execute(&self.runtime, job, GuestBroker::Local(broker)).await,
                            Some(executor) => executor.execute(job, broker).await,
                        };
                        if let Some(delivery) = delivery {
                            let deadline = started + std::time::Duration::from_millis(self.limits.timeout_ms);
                            delivery.finish(deadline).await;
                        }
                        outcome
                    }
                }
            }
        };
        finished(observers, identity, started, &mut outcome);
        outcome
    }

    fn nested_scope(&self, parent: &CallContext, inherit: &Inherit) -> Result<Scope, ErrorDetail> {
        let depth = parent.depth() + 1;
        if depth > self.limits.max_nesting_depth {
            let message =
                format!("a run nested {depth} deep exceeds max_nesting_depth of {}", self.limits.max_nesting_depth);
            return Err(ErrorDetail::new("max_nesting_depth", message));
        }
        // By the tools themselves, not their names: this sandbox's registry may hold a
        // tool the parent's never had, or another tool of the same name.
        inherit.derive(parent.reach(), Reach::new(&self.tools, &self.scope)).map_err(|wider| {
            let wider = broker::bounded_name(&wider);
            ErrorDetail::new(
                "scope",
                format!(
                    "a nested run cannot widen its parent's scope: the parent may not call this sandbox's `{wider}`"
                ),
            )
        })
    }

    /// Checks the limits, the code and the input of a run; returns the input's JSON.
    pub(crate) fn prepare(&self, code: &str, input: &Value) -> Result<String, ErrorDetail> {
        let limits = &self.limits;
        limits.validate().map_err(|e| ErrorDetail::new("invalid_limits", e.to_string()))?;
        if limits.fuel.is_some() && !self.runtime.engine().meters_fuel() {
            let message = "a fuel budget needs an engine built with EngineConfig { fuel_metering: true, .. }";
            return Err(ErrorDetail::new("invalid_limits", message));
        }
        if code.len() as u64 > limits.max_code_bytes {
            let message = format!("code is {} bytes, over the cap of {} bytes", code.len(), limits.max_code_bytes);
            return Err(ErrorDetail::new("max_code_bytes", message));
        }
        broker::serialize_capped(input, limits.max_result_bytes, limits.max_json_depth, "input")
            .map_err(|e| ErrorDetail::new("invalid_input", e.to_string()))
    }
}

/// Stamps a run's (or a session step's) outcome with its id and wall time, and counts and
/// audits its end.
pub(crate) fn finished(observers: &Observers, identity: RunIdentity, started: Instant, outcome: &mut Outcome) {
    outcome.run_id = identity.run_id.clone();
    outcome.stats.wall_time_us = started.elapsed().as_micros() as u64;
    observers.metrics.run_finished(outcome.status);
    observers.sink.record(&AuditEvent::RunFinished {
        run_id: identity.run_id,
        ancestry: identity.ancestry,
        status: outcome.status,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        tool_calls: outcome.tool_calls.len() as u32,
    });
}
