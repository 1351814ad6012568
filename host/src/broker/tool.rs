//! Tools: named async host functions a guest may call, and the registry that holds them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use super::projection::Projection;
use super::schema::ArgsSchema;
use super::scope::{Reach, Scope};
use super::RunTree;
use crate::audit::{floor_char_boundary, CallRef};
use crate::broker::RunIdentity;

/// The longest tool name [`Tools::register`] accepts, in bytes. Names become Python and
/// JS identifiers, so this is also the longest name a guest can meaningfully call: the
/// broker refuses a longer one before it copies any of it, and records at most this
/// many bytes of it.
pub const MAX_TOOL_NAME_BYTES: usize = 64;

/// `name` as it may be recorded, quoted in a message or logged: whole up to
/// [`MAX_TOOL_NAME_BYTES`], else that many bytes of it and its length
/// (`AAAA…[8388608 bytes]`). A guest chooses the names it calls.
pub(crate) fn bounded_name(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_TOOL_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    let end = floor_char_boundary(name, MAX_TOOL_NAME_BYTES);
    Cow::Owned(format!("{}…[{} bytes]", &name[..end], name.len()))
}

/// A tool's failure, as the guest will see it. Keep the message free of secrets: it
/// is handed to untrusted code verbatim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolFailure(pub String);

impl ToolFailure {
    /// A failure with a guest-safe message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolFailure(message.into())
    }
}

type Handler = dyn Fn(Value, CallContext) -> BoxFuture<'static, Result<Value, ToolFailure>> + Send + Sync;

/// What a tool handler knows about the call it serves: enough to audit it and to start
/// a nested run with [`Sandbox::run_nested`](crate::Sandbox::run_nested), whose scope is
/// then bounded by this run's.
#[derive(Clone, Debug)]
pub struct CallContext {
    // Shared with the run's broker: a context is made for every call.
    pub(crate) run: Arc<RunIdentity>,
    pub(crate) call_id: u32,
    pub(crate) scope: Arc<Scope>,
    /// The calling run's registry: with `scope`, what the run can actually call, which
    /// bounds what a nested run may be given.
    pub(crate) tools: Arc<Tools>,
    pub(crate) tree: Arc<RunTree>,
}

impl CallContext {
    /// The calling run's id.
    pub fn run_id(&self) -> &str {
        &self.run.run_id
    }

    /// This call's sequence number in its run.
    pub fn call_id(&self) -> u32 {
        self.call_id
    }

    /// The calling run's ancestry, outermost first.
    pub fn ancestry(&self) -> &[CallRef] {
        &self.run.ancestry
    }

    /// How deeply the calling run is nested (0 at top level).
    pub fn depth(&self) -> u32 {
        self.run.depth
    }

    /// The calling run's scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The tools the calling run can actually call.
    pub(crate) fn reach(&self) -> Reach<'_> {
        Reach::new(&self.tools, &self.scope)
    }
}

/// One tool: a name, a description and an argument schema for the model, and an async
/// handler taking the validated argument object.
///
/// ```
/// use serde_json::json;
/// use wasmbox::Tool;
/// let add = Tool::new("add", "Adds a and b", json!({"type": "object"}), |args| async move {
///     Ok(json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)))
/// });
/// assert_eq!(add.name(), "add");
/// ```
#[derive(Clone)]
pub struct Tool {
    name: String,
    description: String,
    args_schema: Value,
    compiled_schema: Option<Arc<ArgsSchema>>,
    projection: Option<Projection>,
    timeout: Option<Duration>,
    handler: Arc<Handler>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Tool {
    /// Creates a tool. The handler gets the argument object after it passed the checks
    /// (JSON Schema included) and returns a JSON result or a [`ToolFailure`]. The name
    /// and schema are checked by [`Tools::register`].
    pub fn new<F, Fut>(name: impl Into<String>, description: impl Into<String>, args_schema: Value, handler: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolFailure>> + Send + 'static,
    {
        Self::with_context(name, description, args_schema, move |args, _ctx| handler(args))
    }

    /// Like [`Tool::new`], for handlers that need the [`CallContext`] — for example a
    /// "sub-agent" tool that starts a nested run.
    pub fn with_context<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        args_schema: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolFailure>> + Send + 'static,
    {
        Tool {
            name: name.into(),
            description: description.into(),
            args_schema,
            compiled_schema: None,
            projection: None,
            timeout: None,
            handler: Arc::new(move |args, ctx| Box::pin(handler(args, ctx))),
        }
    }

    /// Keeps only these parts of every result (JSON pointers, `*` for any element) before
    /// it reaches the guest. See [`Projection`].
    ///
    /// # Errors
    /// A pointer that does not start with `/`.
    pub fn with_projection<I, S>(mut self, pointers: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.projection = Some(Projection::new(pointers)?);
        Ok(self)
    }

    /// Overrides the run's `tool_timeout_ms` for this tool.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The name guests call it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description shown to guests.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The JSON Schema of its argument object.
    pub fn args_schema(&self) -> &Value {
        &self.args_schema
    }

    /// Its own deadline, if it overrides the run's.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub(crate) fn schema(&self) -> Option<&ArgsSchema> {
        self.compiled_schema.as_deref()
    }

    pub(crate) fn projection(&self) -> Option<&Projection> {
        self.projection.as_ref()
    }

    pub(crate) fn invoke(&self, args: Value, ctx: CallContext) -> BoxFuture<'static, Result<Value, ToolFailure>> {
        (self.handler)(args, ctx)
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolRegistrationError {
    /// The name is not `[a-z_][a-z0-9_]*` of at most [`MAX_TOOL_NAME_BYTES`] bytes.
    #[error(
        "tool name `{0}` must match [a-z_][a-z0-9_]* and be at most {max} bytes (it becomes a Python and JS identifier)",
        max = MAX_TOOL_NAME_BYTES
    )]
    InvalidName(String),
    /// A tool of that name is already registered.
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    /// The argument schema is not a JSON object, or not a valid JSON Schema.
    #[error("the argument schema of tool `{0}` is invalid: {1}")]
    InvalidSchema(String, String),
}

/// The registry of every tool an engine embedder offers; each run picks a subset.
#[derive(Clone, Debug, Default)]
pub struct Tools {
    by_name: BTreeMap<String, Arc<Tool>>,
}

impl Tools {
    /// An empty registry.
    pub fn new() -> Self {
        Tools::default()
    }

    /// Adds `tool`.
    ///
    /// # Errors
    /// Refuses an invalid or duplicate name, or a schema that is not an object.
    pub fn register(&mut self, mut tool: Tool) -> Result<&mut Self, ToolRegistrationError> {
        if !is_valid_name(&tool.name) {
            return Err(ToolRegistrationError::InvalidName(tool.name));
        }
        if !tool.args_schema.is_object() {
            return Err(ToolRegistrationError::InvalidSchema(tool.name, "it must be a JSON object".into()));
        }
        // Compiled once here, not per call.
        match ArgsSchema::compile(&tool.args_schema) {
            Ok(schema) => tool.compiled_schema = Some(Arc::new(schema)),
            Err(reason) => return Err(ToolRegistrationError::InvalidSchema(tool.name, reason)),
        }
        if self.by_name.contains_key(&tool.name) {
            return Err(ToolRegistrationError::Duplicate(tool.name));
        }
        self.by_name.insert(tool.name.clone(), Arc::new(tool));
        Ok(self)
    }

    /// The tool called `name`, if registered.
    pub fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.by_name.get(name)
    }

    /// Every registered tool, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Tool>> {
        self.by_name.values()
    }

    /// The number of registered tools.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && name.len() <= MAX_TOOL_NAME_BYTES
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> Tool {
        Tool::new(name, "d", json!({"type": "object"}), |_| async { Ok(Value::Null) })
    }

    #[test]
    fn names_must_be_identifiers() {
        let mut tools = Tools::new();
        for bad in ["", "Add", "1add", "a-b", "a b", "ä", &"x".repeat(MAX_TOOL_NAME_BYTES + 1)] {
            assert!(matches!(tools.register(tool(bad)), Err(ToolRegistrationError::InvalidName(_))), "{bad}");
        }
        tools.register(tool("_private_2")).unwrap();
        tools.register(tool(&"x".repeat(MAX_TOOL_NAME_BYTES))).unwrap();
        assert_eq!(tools.len(), 2);
    }

    #[test]
    fn a_bounded_name_keeps_a_prefix_on_a_char_boundary_and_the_length() {
        assert_eq!(bounded_name("add"), "add");
        let legal = "x".repeat(MAX_TOOL_NAME_BYTES);
        assert_eq!(bounded_name(&legal), legal.as_str());
        let long = "é".repeat(MAX_TOOL_NAME_BYTES);
        let shown = bounded_name(&long);
        assert_eq!(shown, format!("{}…[128 bytes]", "é".repeat(MAX_TOOL_NAME_BYTES / 2)));
    }

    #[test]
    fn duplicates_and_non_object_schemas_are_refused() {
        let mut tools = Tools::new();
        tools.register(tool("add")).unwrap();
        assert!(matches!(tools.register(tool("add")), Err(ToolRegistrationError::Duplicate(_))));
        let bad = Tool::new("x", "d", json!("string"), |_| async { Ok(Value::Null) });
        assert!(matches!(tools.register(bad), Err(ToolRegistrationError::InvalidSchema(..))));
        let bad = Tool::new("y", "d", json!({"type": 12}), |_| async { Ok(Value::Null) });
        assert!(matches!(tools.register(bad), Err(ToolRegistrationError::InvalidSchema(..))));
    }
}
