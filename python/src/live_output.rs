//! `on_output`: a Python callable that gets a run's stdout and stderr as the guest
//! writes them, `on_output(stream, text)` with `stream` `"stdout"` or `"stderr"`.
//!
//! wasmbox calls the sink from a thread of its own; this one takes the GIL there to call
//! the callable (a sync `run` has released it meanwhile). Each stream is decoded across
//! chunks, so `text` never ends inside a character. An exception the callable raises is
//! reported as unraisable (`sys.unraisablehook`) and the run goes on.

use std::sync::Mutex;

use pyo3::prelude::*;
use wasmbox::live_output::TextChunks;
use wasmbox::{OutputSink, OutputStream};

use crate::exit_guard;

/// Calls a Python callable with each chunk of text.
pub(crate) struct PyOutputSink {
    callback: Py<PyAny>,
    /// stdout's and stderr's unfinished characters.
    text: Mutex<[TextChunks; 2]>,
}

impl PyOutputSink {
    pub(crate) fn new(callback: Py<PyAny>) -> Self {
        PyOutputSink { callback, text: Mutex::new([TextChunks::default(), TextChunks::default()]) }
    }

    fn decoded(&self, stream: OutputStream, bytes: &[u8], at_end: bool) -> String {
        let mut text = self.text.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let decoder = &mut text[usize::from(stream == OutputStream::Stderr)];
        let mut decoded = decoder.push(bytes);
        if at_end {
            decoded.push_str(&decoder.finish());
        }
        decoded
    }

    fn call(&self, stream: OutputStream, text: String) {
        if text.is_empty() {
            return;
        }
        exit_guard::attach(|py| {
            if let Err(err) = self.callback.call1(py, (stream.name(), text)) {
                err.write_unraisable(py, Some(self.callback.bind(py)));
            }
        });
    }

    /// Passes on an unfinished character left at the end of either stream (replaced);
    /// call it once the run is over.
    pub(crate) fn finish(&self) {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let rest = self.decoded(stream, &[], true);
            self.call(stream, rest);
        }
    }
}

impl OutputSink for PyOutputSink {
    fn write(&self, stream: OutputStream, bytes: &[u8]) {
        let text = self.decoded(stream, bytes, false);
        self.call(stream, text);
    }
}
