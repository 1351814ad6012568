//! Driving a future to its end on the caller's thread, as sync `run` and session steps
//! do: the GIL is released while it runs, and every [`SIGNAL_POLL`] the thread takes the
//! GIL back for a moment so Python can handle signals. Ctrl-C cancels the run (or step)
//! through its token and raises `KeyboardInterrupt` once it stopped.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use pyo3::prelude::*;
use wasmbox::CancelToken;

use crate::tokio_runtime;

/// How often a sync run lets Python look at pending signals (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Drives `future` on this thread with the GIL released, looking at pending signals
/// every [`SIGNAL_POLL`]. On Ctrl-C, `cancel` (when given) is cancelled and the future
/// driven to its end (a step ends within an epoch tick); without one the future is
/// dropped. Either way the `KeyboardInterrupt` is raised.
pub(crate) fn drive<T: Send>(
    py: Python<'_>,
    future: impl Future<Output = T> + Send,
    cancel: Option<&CancelToken>,
) -> PyResult<T> {
    let runtime = tokio_runtime();
    let mut future = pin!(future);
    loop {
        let finished = py.detach(|| {
            runtime.block_on(async {
                tokio::select! {
                    value = &mut future => Some(value),
                    () = tokio::time::sleep(SIGNAL_POLL) => None,
                }
            })
        });
        if let Some(value) = finished {
            return Ok(value);
        }
        if let Err(interrupt) = py.check_signals() {
            if let Some(token) = cancel {
                token.cancel();
                py.detach(|| runtime.block_on(&mut future));
            }
            return Err(interrupt);
        }
    }
}
