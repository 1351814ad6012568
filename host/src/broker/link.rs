//! Connects the broker to the generated `tools` import, following wasmtime-wasi's
//! four names per capability: the per-store state ([`GuestBroker`]), a view trait that
//! projects it out of the store's data ([`BrokerView`]), the borrowed view the host
//! functions are implemented on ([`BrokerCtxView`]), and a zero-sized [`Broker`] marker.
//!
//! A guest's calls are answered by the broker in this process, or by one elsewhere
//! through [`RemoteBroker`] — the seam a worker process implements to forward them to
//! its parent. The core names no such client.

use std::time::Duration;

use futures::future::BoxFuture;
use wasmtime::component::{HasData, Linker};

use super::{BrokerCtx, CallError, ToolSummary};
use crate::bindings::wasmbox::sandbox::tools;
use crate::outcome::{ErrorDetail, ToolCallRecord};

/// A broker outside this process that answers a guest's tool calls: it decides and
/// keeps the trail; this side only forwards.
pub(crate) trait RemoteBroker: Send {
    /// What the run may call, as the remote broker said.
    fn list(&self) -> Vec<ToolSummary>;
    /// Forwards one call; the remote broker's answer is the guest's.
    fn call<'a>(&'a mut self, name: &'a str, args_json: &'a str) -> BoxFuture<'a, Result<String, CallError>>;
    /// Forwards a call to start; the remote broker's answer is the guest's, as from
    /// [`BrokerCtx::start_call`].
    fn start_call<'a>(&'a mut self, name: &'a str, args_json: &'a str) -> BoxFuture<'a, Result<u32, CallError>>;
    /// The started calls that ended, as the remote broker's [`BrokerCtx::await_any`] says.
    fn await_any(&mut self, timeout: Option<Duration>) -> BoxFuture<'_, Vec<(u32, Result<String, CallError>)>>;
}

/// Who answers a guest's tool calls.
// One per run, moved once into the Store: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum GuestBroker {
    /// The broker itself, in this process.
    Local(BrokerCtx),
    /// A broker elsewhere (a worker's parent), which checks every call.
    Remote(Box<dyn RemoteBroker>),
}

impl GuestBroker {
    fn list(&self) -> Vec<ToolSummary> {
        match self {
            GuestBroker::Local(ctx) => ctx.list(),
            GuestBroker::Remote(remote) => remote.list(),
        }
    }

    async fn call(&mut self, name: &str, args_json: &str) -> Result<String, CallError> {
        match self {
            GuestBroker::Local(ctx) => ctx.call(name, args_json).await,
            GuestBroker::Remote(remote) => remote.call(name, args_json).await,
        }
    }

    async fn start_call(&mut self, name: &str, args_json: &str) -> Result<u32, CallError> {
        match self {
            GuestBroker::Local(ctx) => ctx.start_call(name, args_json),
            GuestBroker::Remote(remote) => remote.start_call(name, args_json).await,
        }
    }

    async fn await_any(&mut self, timeout: Option<Duration>) -> Vec<(u32, Result<String, CallError>)> {
        match self {
            GuestBroker::Local(ctx) => ctx.await_any(timeout).await,
            GuestBroker::Remote(remote) => remote.await_any(timeout).await,
        }
    }

    /// The trail and the latched breach; a remote broker keeps both itself.
    pub(crate) fn into_report(self) -> (Vec<ToolCallRecord>, Option<ErrorDetail>) {
        match self {
            GuestBroker::Local(ctx) => ctx.into_report(),
            GuestBroker::Remote(_) => (Vec::new(), None),
        }
    }
}

/// Projects the broker state out of a Store's data.
pub(crate) trait BrokerView: Send {
    fn broker(&mut self) -> BrokerCtxView<'_>;
}

/// A borrowed broker state, on which the `tools` host functions are implemented.
pub(crate) struct BrokerCtxView<'a> {
    pub(crate) ctx: &'a mut GuestBroker,
}

/// Marker tying the `tools` import to [`BrokerCtxView`].
pub(crate) struct Broker;

impl HasData for Broker {
    type Data<'a> = BrokerCtxView<'a>;
}

/// Adds the `tools` import to `linker`.
pub(crate) fn add_to_linker<T: BrokerView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    tools::add_to_linker::<T, Broker>(linker, T::broker)
}

impl From<CallError> for tools::CallError {
    fn from(err: CallError) -> Self {
        match err {
            CallError::Denied(m) => tools::CallError::Denied(m),
            CallError::BudgetExhausted(m) => tools::CallError::BudgetExhausted(m),
            CallError::InvalidArgs(m) => tools::CallError::InvalidArgs(m),
            CallError::Failed(m) => tools::CallError::Failed(m),
            CallError::Timeout(m) => tools::CallError::Timeout(m),
        }
    }
}

impl tools::Host for BrokerCtxView<'_> {
    async fn list_tools(&mut self) -> Vec<tools::ToolInfo> {
        self.ctx
            .list()
            .into_iter()
            .map(|t| tools::ToolInfo { name: t.name, description: t.description, args_schema: t.args_schema })
            .collect()
    }

    async fn call(&mut self, name: String, args_json: String) -> Result<String, tools::CallError> {
        self.ctx.call(&name, &args_json).await.map_err(Into::into)
    }

    async fn start_call(&mut self, name: String, args_json: String) -> Result<tools::CallId, tools::CallError> {
        self.ctx.start_call(&name, &args_json).await.map_err(Into::into)
    }

    async fn await_any(&mut self, timeout_ms: Option<u32>) -> Vec<tools::Finished> {
        let timeout = timeout_ms.map(|ms| Duration::from_millis(ms.into()));
        let finished = self.ctx.await_any(timeout).await;
        finished.into_iter().map(|(id, result)| tools::Finished { id, answer: result.map_err(Into::into) }).collect()
    }
}
