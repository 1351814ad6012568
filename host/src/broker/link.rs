//! Connects a [`BrokerCtx`] to the generated `tools` import, following wasmtime-wasi's
//! four names per capability: the per-store state ([`BrokerCtx`]), a view trait that
//! projects it out of the store's data ([`BrokerView`]), the borrowed view the host
//! functions are implemented on ([`BrokerCtxView`]), and a zero-sized [`Broker`] marker.

use wasmtime::component::{HasData, Linker};

use super::{BrokerCtx, CallError};
use crate::bindings::wasmbox::sandbox::tools;

/// Projects the broker state out of a Store's data.
pub(crate) trait BrokerView: Send {
    fn broker(&mut self) -> BrokerCtxView<'_>;
}

/// A borrowed broker state, on which the `tools` host functions are implemented.
pub(crate) struct BrokerCtxView<'a> {
    pub(crate) ctx: &'a mut BrokerCtx,
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
}
