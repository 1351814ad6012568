//! One run's request: the code and, optionally, its input, files, cancel token and live
//! output, for [`Sandbox::run_with`](crate::Sandbox::run_with).

use std::sync::Arc;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::live_output::OutputSink;
use crate::vfs::InputFiles;

/// What to run, with what. [`RunRequest::new`] takes the code; the rest defaults to a
/// `null` input, no input files, a token nobody cancels and no live output.
///
/// ```no_run
/// # async fn demo(sandbox: wasmbox::Sandbox) {
/// use std::sync::Arc;
/// use wasmbox::{CancelToken, OutputStream, RunRequest};
///
/// let cancel = CancelToken::new();
/// let request = RunRequest::new("for i in range(3): print(i)")
///     .input(serde_json::json!({"n": 3}))
///     .cancel(cancel.clone())
///     .output_sink(Arc::new(|stream: OutputStream, bytes: &[u8]| {
///         print!("{stream}: {}", String::from_utf8_lossy(bytes));
///     }));
/// let outcome = sandbox.run_with(request).await;
/// # }
/// ```
#[derive(Clone)]
pub struct RunRequest {
    pub(crate) code: String,
    pub(crate) input: Value,
    pub(crate) files: InputFiles,
    pub(crate) cancel: CancelToken,
    pub(crate) output_sink: Option<Arc<dyn OutputSink>>,
}

impl RunRequest {
    /// A request to run `code` with a `null` input, no files, no cancellation and no
    /// live output.
    pub fn new(code: impl Into<String>) -> Self {
        RunRequest {
            code: code.into(),
            input: Value::Null,
            files: InputFiles::new(),
            cancel: CancelToken::new(),
            output_sink: None,
        }
    }

    /// The value the code sees as `INPUT`.
    pub fn input(mut self, input: Value) -> Self {
        self.input = input;
        self
    }

    /// The files the code reads under `/input`.
    pub fn files(mut self, files: InputFiles) -> Self {
        self.files = files;
        self
    }

    /// Cancelling `cancel` stops the run with status `cancelled`.
    pub fn cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Sends the guest's stdout and stderr to `sink` as they are written (see
    /// [`OutputSink`]); the outcome still holds all of it.
    pub fn output_sink(mut self, sink: Arc<dyn OutputSink>) -> Self {
        self.output_sink = Some(sink);
        self
    }
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("code_bytes", &self.code.len())
            .field("files", &self.files.len())
            .field("output_sink", &self.output_sink.is_some())
            .finish_non_exhaustive()
    }
}
