//! Live output: a run's stdout and stderr handed to the caller while the guest writes
//! them, not only in the [`Outcome`](crate::Outcome) at the end.
//!
//! A caller passes an [`OutputSink`] with a [`RunRequest`](crate::RunRequest); the sink
//! receives the bytes the outcome's `stdout`/`stderr` keep, in the order the guest wrote
//! them, in chunks of any size:
//!
//! ```no_run
//! # async fn demo(sandbox: wasmbox::Sandbox) {
//! use std::sync::Arc;
//! use wasmbox::{OutputStream, RunRequest};
//!
//! let sink = Arc::new(|stream: OutputStream, bytes: &[u8]| {
//!     eprint!("[{stream}] {}", String::from_utf8_lossy(bytes));
//! });
//! let outcome = sandbox.run_with(RunRequest::new("print('hello')").output_sink(sink)).await;
//! assert_eq!(outcome.stdout.text, "hello\n");
//! # }
//! ```
//!
//! # Security
//! The output caps hold for the sink as for the outcome: the sink never receives more than
//! [`Limits::max_stdout_bytes`] of stdout or [`Limits::max_stderr_bytes`] of stderr, and
//! after a worker process (which is not trusted) the parent counts again. The guest
//! never waits for the sink: chunks are queued and handed over on a thread of their own,
//! and the queue cannot grow past the caps. A sink that panics is not called again; one
//! that blocks delays the outcome at most until the run's deadline plus
//! [`DRAIN_GRACE`], after which the chunks it has not taken are dropped (the outcome
//! still holds them).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::limits::Limits;

/// How long a run's outcome waits, past the run's own deadline, for the sink to take the
/// last chunks.
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Which of the guest's streams a chunk of output comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputStream {
    /// The guest's standard output (`print` in Python, `console.log` in JavaScript).
    Stdout,
    /// The guest's standard error.
    Stderr,
}

impl OutputStream {
    /// `"stdout"` or `"stderr"`.
    pub fn name(self) -> &'static str {
        match self {
            OutputStream::Stdout => "stdout",
            OutputStream::Stderr => "stderr",
        }
    }

    fn index(self) -> usize {
        match self {
            OutputStream::Stdout => 0,
            OutputStream::Stderr => 1,
        }
    }
}

impl std::fmt::Display for OutputStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Receives a run's output while the guest writes it (see the [module docs](self)).
///
/// Called from a thread of wasmbox's, one chunk at a time, never concurrently for one
/// run. A chunk may end inside a UTF-8 character; the concatenation of a stream's chunks
/// is exactly the bytes the outcome keeps for it. Any `Fn(OutputStream, &[u8])` closure
/// that is `Send + Sync` is a sink.
pub trait OutputSink: Send + Sync {
    /// Takes the next chunk of `stream`.
    fn write(&self, stream: OutputStream, bytes: &[u8]);
}

impl<F: Fn(OutputStream, &[u8]) + Send + Sync> OutputSink for F {
    fn write(&self, stream: OutputStream, bytes: &[u8]) {
        self(stream, bytes)
    }
}

/// What travels from the capture to whoever delivers the chunks.
pub(crate) enum Message {
    Chunk(OutputStream, Vec<u8>),
    /// The run is over; nothing more will be delivered.
    End,
}

/// The sending side: passes each stream on up to its cap. Cloneable; all clones share
/// the count, so the cap spans them.
#[derive(Clone)]
pub(crate) struct LiveOutput {
    tx: mpsc::UnboundedSender<Message>,
    /// Bytes each stream may still pass on.
    room: Arc<Mutex<[u64; 2]>>,
}

impl LiveOutput {
    /// A channel that passes on at most the caps of `limits`. The queue is unbounded in
    /// messages but not in bytes: it never holds more than the two caps.
    pub(crate) fn channel(limits: &Limits) -> (Self, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let room = Arc::new(Mutex::new([limits.max_stdout_bytes, limits.max_stderr_bytes]));
        (LiveOutput { tx, room }, rx)
    }

    /// Passes on `bytes`, or the part of them within what is left of the stream's cap.
    pub(crate) fn send(&self, stream: OutputStream, bytes: &[u8]) {
        let mut room = self.room.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let left = &mut room[stream.index()];
        let take = usize::try_from(*left).unwrap_or(usize::MAX).min(bytes.len());
        if take == 0 {
            return;
        }
        *left -= take as u64;
        // Sent under the lock so that chunks keep the order in which they were counted;
        // the receiver may be gone (a delivery that gave up), which drops the chunk.
        let _ = self.tx.send(Message::Chunk(stream, bytes[..take].to_vec()));
    }

    /// Tells the receiver that the run is over.
    pub(crate) fn end(&self) {
        let _ = self.tx.send(Message::End);
    }
}

/// Hands a run's chunks to a caller's [`OutputSink`] on a thread of its own, so that the
/// guest (and the async runtime) never waits for the sink.
pub(crate) struct Delivery {
    live: LiveOutput,
    done: Option<oneshot::Receiver<()>>,
}

impl Delivery {
    /// Starts delivering to `sink` what the returned [`LiveOutput`] is sent, within the
    /// caps of `limits`.
    pub(crate) fn start(sink: Arc<dyn OutputSink>, limits: &Limits) -> Self {
        let (live, rx) = LiveOutput::channel(limits);
        let (done_tx, done_rx) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("wasmbox-output".into())
            .spawn(move || {
                deliver(sink.as_ref(), rx);
                let _ = done_tx.send(());
            })
            .map_err(
                |err| tracing::warn!(error = %err, "could not start the live output thread; the sink gets nothing"),
            );
        Delivery { live, done: spawned.ok().map(|_| done_rx) }
    }

    /// Where the run sends its output.
    pub(crate) fn live(&self) -> &LiveOutput {
        &self.live
    }

    /// Ends the delivery and waits until the sink has taken every chunk, or until
    /// `deadline` plus [`DRAIN_GRACE`] (or [`DRAIN_GRACE`] from now, if later).
    pub(crate) async fn finish(self, deadline: Instant) {
        self.live.end();
        let Some(done) = self.done else { return };
        let until = deadline.max(Instant::now()) + DRAIN_GRACE;
        if tokio::time::timeout_at(until.into(), done).await.is_err() {
            tracing::warn!("the output sink did not take the run's last output in time; the outcome still holds it");
        }
    }
}

/// The most bytes the delivery joins into one call of the sink.
const MAX_JOINED_BYTES: usize = 64 << 10;

/// The delivery thread's loop: every chunk to `sink` until the run ends. Chunks of one
/// stream that queued up while the sink was busy are joined into one call, so a guest
/// writing a byte at a time does not cost a call per byte. A sink that panics is not
/// called again, but the chunks are still read so that the run ends at once.
fn deliver(sink: &dyn OutputSink, mut rx: mpsc::UnboundedReceiver<Message>) {
    let mut broken = false;
    let mut next = rx.blocking_recv();
    while let Some(Message::Chunk(stream, mut bytes)) = next {
        next = None;
        while bytes.len() < MAX_JOINED_BYTES {
            match rx.try_recv() {
                Ok(Message::Chunk(same, more)) if same == stream => bytes.extend_from_slice(&more),
                Ok(other) => {
                    next = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        if !broken && catch_unwind(AssertUnwindSafe(|| sink.write(stream, &bytes))).is_err() {
            tracing::warn!("the output sink panicked; it gets no more of this run's output");
            broken = true;
        }
        if next.is_none() {
            next = rx.blocking_recv();
        }
    }
}

/// Turns one stream's chunks into text without splitting a character: what
/// [`TextChunks::push`] returns, followed by [`TextChunks::finish`], is the stream's
/// bytes read as UTF-8 with invalid sequences replaced, exactly as the outcome's text.
/// For sinks that show or forward text.
///
/// ```
/// let mut text = wasmbox::live_output::TextChunks::default();
/// assert_eq!(text.push(b"caf\xc3"), "caf");
/// assert_eq!(text.push(b"\xa9!"), "\u{e9}!");
/// assert_eq!(text.finish(), "");
/// ```
#[derive(Debug, Default)]
pub struct TextChunks {
    /// The start of a character whose other bytes have not come yet.
    pending: Vec<u8>,
}

impl TextChunks {
    /// The text `bytes` complete; an unfinished character at their end waits for the
    /// next chunk.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::new();
        let mut rest = &self.pending[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(err) => {
                    let (valid, after) = rest.split_at(err.valid_up_to());
                    // Checked by from_utf8 just now.
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match err.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        text
    }

    /// The text of an unfinished character left at the end of the stream (replaced).
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.pending);
        String::from_utf8_lossy(&rest).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(stdout: u64, stderr: u64) -> Limits {
        Limits { max_stdout_bytes: stdout, max_stderr_bytes: stderr, ..Limits::default() }
    }

    fn received(rx: &mut mpsc::UnboundedReceiver<Message>) -> Vec<(OutputStream, Vec<u8>)> {
        let mut got = Vec::new();
        while let Ok(message) = rx.try_recv() {
            if let Message::Chunk(stream, bytes) = message {
                got.push((stream, bytes));
            }
        }
        got
    }

    #[test]
    fn each_stream_is_passed_on_up_to_its_own_cap() {
        let (live, mut rx) = LiveOutput::channel(&limits(5, 3));
        live.send(OutputStream::Stdout, b"abc");
        live.send(OutputStream::Stderr, b"xy");
        live.clone().send(OutputStream::Stdout, b"defg");
        live.send(OutputStream::Stderr, b"zzz");
        live.send(OutputStream::Stdout, b"h");
        let got = received(&mut rx);
        let expected: Vec<(OutputStream, Vec<u8>)> = vec![
            (OutputStream::Stdout, b"abc".to_vec()),
            (OutputStream::Stderr, b"xy".to_vec()),
            (OutputStream::Stdout, b"de".to_vec()),
            (OutputStream::Stderr, b"z".to_vec()),
        ];
        assert_eq!(got, expected);
    }

    proptest::proptest! {
        #[test]
        fn text_chunks_read_like_the_whole(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), cuts in proptest::collection::vec(0usize..64, 0..6)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut decoder = TextChunks::default();
            let mut text = String::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                text.push_str(&decoder.push(&bytes[from..cut]));
                from = cut;
            }
            text.push_str(&decoder.finish());
            proptest::prop_assert_eq!(text, String::from_utf8_lossy(&bytes));
        }
    }

    #[tokio::test]
    async fn chunks_reach_the_sink_in_order_joined_by_stream() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&got);
        let sink =
            Arc::new(move |stream: OutputStream, bytes: &[u8]| seen.lock().unwrap().push((stream, bytes.to_vec())));
        let delivery = Delivery::start(sink, &limits(100, 100));
        for part in [&b"a"[..], b"b", b"c"] {
            delivery.live().send(OutputStream::Stdout, part);
        }
        delivery.live().send(OutputStream::Stderr, b"!");
        delivery.live().send(OutputStream::Stdout, b"d");
        delivery.finish(Instant::now()).await;
        let got = got.lock().unwrap();
        let mut per_stream = [Vec::new(), Vec::new()];
        let mut order = Vec::new();
        for (stream, bytes) in got.iter() {
            per_stream[stream.index()].extend_from_slice(bytes);
            if order.last() != Some(stream) {
                order.push(*stream);
            }
        }
        assert_eq!(per_stream, [b"abcd".to_vec(), b"!".to_vec()]);
        assert_eq!(order, [OutputStream::Stdout, OutputStream::Stderr, OutputStream::Stdout]);
    }

    #[tokio::test]
    async fn a_panicking_sink_is_not_called_again_and_the_delivery_still_ends() {
        let calls = Arc::new(Mutex::new(0));
        let counted = Arc::clone(&calls);
        let sink = Arc::new(move |_: OutputStream, _: &[u8]| {
            *counted.lock().unwrap() += 1;
            panic!("a sink that panics");
        });
        let delivery = Delivery::start(sink, &limits(100, 100));
        delivery.live().send(OutputStream::Stdout, b"one");
        delivery.live().send(OutputStream::Stdout, b"two");
        // Far in the past: the wait is DRAIN_GRACE at most, and the thread ends at once.
        delivery.finish(Instant::now()).await;
        assert_eq!(*calls.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn a_blocked_sink_delays_the_end_only_until_the_grace_is_over() {
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let sink = Arc::new(move |_: OutputStream, _: &[u8]| {
            // Blocks until the test is over.
            let _ = release_rx.lock().unwrap().recv();
        });
        let delivery = Delivery::start(sink, &limits(100, 100));
        delivery.live().send(OutputStream::Stdout, b"stuck");
        delivery.finish(Instant::now()).await;
        drop(release_tx);
    }
}
