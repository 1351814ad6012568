//! Capped in-memory capture of a guest's stdout or stderr.
//!
//! Writing past the cap keeps the bytes up to the cap, marks the capture truncated,
//! latches the breach and traps the guest, so a print flood ends the run with
//! `output_limit` promptly and the same way in every guest language (CPython would
//! otherwise raise a catchable `BrokenPipeError` while SpiderMonkey drops output
//! silently). What is kept is also passed on, as it is written, to the run's live
//! output when it has one ([`crate::live_output`]): the same bytes, never more.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi_io::poll::Pollable;
use wasmtime_wasi_io::streams::{OutputStream, StreamError};

use crate::live_output::{LiveOutput, OutputStream as Stream};
use crate::outcome::CapturedOutput;

/// How much a guest may write in one `write` call; the WASI default permit size.
const WRITE_PERMIT_BYTES: usize = 64 << 10;

/// The marker error a capture traps the guest with; classified as `output_limit`.
#[derive(Debug, thiserror::Error)]
#[error("{stream} exceeded its cap of {cap} bytes")]
pub(crate) struct OutputLimitExceeded {
    stream: &'static str,
    cap: usize,
}

#[derive(Default)]
struct Buffer {
    bytes: Vec<u8>,
    truncated: bool,
    /// Where what is kept also goes as it is written; held with the bytes so that the
    /// two never disagree on what was kept, or in which order.
    live: Option<LiveOutput>,
}

/// A cloneable handle to one captured stream; all clones share the buffer.
#[derive(Clone)]
pub(crate) struct OutputCapture {
    stream: Stream,
    cap: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl OutputCapture {
    pub(crate) fn new(stream: Stream, cap: usize) -> Self {
        OutputCapture { stream, cap, buffer: Arc::default() }
    }

    /// Passes what is kept from now on to `live` as well (or to nothing with `None`).
    pub(crate) fn set_live(&self, live: Option<LiveOutput>) {
        self.lock().live = live;
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        // A poisoned lock only means a panic elsewhere mid-append; the bytes are still
        // a valid prefix, so keep using them rather than propagating the panic.
        self.buffer.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Appends `bytes`, keeping at most `cap` in total. Returns false on overflow.
    fn append(&self, bytes: &[u8]) -> bool {
        let mut buffer = self.lock();
        let room = self.cap.saturating_sub(buffer.bytes.len());
        let fits = bytes.len() <= room;
        let kept = if fits { bytes } else { &bytes[..room] };
        buffer.bytes.extend_from_slice(kept);
        if !fits {
            buffer.truncated = true;
        }
        if let (Some(live), false) = (&buffer.live, kept.is_empty()) {
            live.send(self.stream, kept);
        }
        fits
    }

    fn overflow_error(&self) -> OutputLimitExceeded {
        OutputLimitExceeded { stream: self.stream.name(), cap: self.cap }
    }

    /// True once the guest has written past the cap.
    #[cfg(test)]
    pub(crate) fn overflowed(&self) -> bool {
        self.lock().truncated
    }

    /// The captured text so far (invalid UTF-8 replaced).
    pub(crate) fn snapshot(&self) -> CapturedOutput {
        let buffer = self.lock();
        CapturedOutput { text: String::from_utf8_lossy(&buffer.bytes).into_owned(), truncated: buffer.truncated }
    }

    /// The captured text so far, leaving the capture empty with its whole cap again: a
    /// session's next step captures afresh through the same stream.
    pub(crate) fn take(&self) -> CapturedOutput {
        let mut buffer = self.lock();
        let bytes = std::mem::take(&mut buffer.bytes);
        let truncated = std::mem::replace(&mut buffer.truncated, false);
        CapturedOutput { text: String::from_utf8_lossy(&bytes).into_owned(), truncated }
    }
}

impl IsTerminal for OutputCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for OutputCapture {
    // Memory is always ready; there is nothing to wait for.
    async fn ready(&mut self) {}
}

impl OutputStream for OutputCapture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        if self.append(&bytes) {
            Ok(())
        } else {
            Err(StreamError::Trap(wasmtime::Error::new(self.overflow_error())))
        }
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Never report 0: a guest told "not ready" would wait forever. Overflow is
        // detected (and trapped) on the write itself.
        Ok(WRITE_PERMIT_BYTES)
    }
}

impl AsyncWrite for OutputCapture {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.append(buf) {
            Poll::Ready(Ok(buf.len()))
        } else {
            Poll::Ready(Err(io::Error::other(self.overflow_error())))
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_prefix_up_to_the_cap_and_latches_overflow() {
        let mut capture = OutputCapture::new(Stream::Stdout, 5);
        assert!(capture.write(Bytes::from_static(b"abc")).is_ok());
        assert!(!capture.overflowed());
        let err = capture.write(Bytes::from_static(b"defg")).unwrap_err();
        assert!(matches!(err, StreamError::Trap(_)));
        assert!(capture.overflowed());
        let out = capture.snapshot();
        assert_eq!(out.text, "abcde");
        assert!(out.truncated);
    }

    /// Live output gets exactly what the capture keeps: up to the cap, in order.
    #[test]
    fn live_output_gets_what_is_kept_and_nothing_past_the_cap() {
        // The channel's own caps are wider, so only the capture's cap can hold here.
        let (live, mut rx) = LiveOutput::channel(&crate::limits::Limits::default());
        let mut capture = OutputCapture::new(Stream::Stderr, 6);
        assert!(capture.write(Bytes::from_static(b"abc")).is_ok());
        capture.set_live(Some(live));
        assert!(capture.write(Bytes::from_static(b"de")).is_ok());
        assert!(capture.write(Bytes::from_static(b"fgh")).is_err());
        assert!(capture.write(Bytes::from_static(b"ij")).is_err());
        let mut got = Vec::new();
        while let Ok(crate::live_output::Message::Chunk(stream, bytes)) = rx.try_recv() {
            assert_eq!(stream, Stream::Stderr);
            got.extend(bytes);
        }
        assert_eq!(got, b"def", "set_live takes effect from then on, and the cap holds");
        assert_eq!(capture.snapshot().text, "abcdef");
    }

    #[test]
    fn take_empties_the_capture_and_restores_its_cap() {
        let mut capture = OutputCapture::new(Stream::Stdout, 3);
        assert!(capture.write(Bytes::from_static(b"abcd")).is_err());
        let first = capture.take();
        assert_eq!((first.text.as_str(), first.truncated), ("abc", true));
        assert!(!capture.overflowed());
        assert!(capture.write(Bytes::from_static(b"xyz")).is_ok(), "the whole cap again");
        assert_eq!(capture.take().text, "xyz");
        assert_eq!(capture.snapshot().text, "");
    }

    #[test]
    fn never_reports_zero_permit() {
        let mut capture = OutputCapture::new(Stream::Stdout, 0);
        assert!(capture.check_write().unwrap() > 0);
    }
}
