//! Live output over MCP: when a `tools/call` of a run tool carries a progress token, the
//! run's stdout and stderr go to the client as `notifications/progress` while the code
//! runs, each chunk's text as the notification's `message`, its stream in `_meta`
//! (`"wasmbox/stream": "stdout"` or `"stderr"`), and `progress` counting the
//! notifications (1, 2, …; there is no `total`). The result still carries the whole outcome, and every notification is sent
//! before it.
//!
//! The guest never waits for the client: wasmbox hands the chunks to [`OutputSink`] on a
//! thread of its own, this module queues them (within the run's output caps, so the
//! queue is bounded) and one task sends them in order, joining what queued up while the
//! client was slow.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{MetaObject, NotificationMetaObject, ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wasmbox::live_output::TextChunks;
use wasmbox::{OutputSink, OutputStream};

/// The `_meta` key naming a notification's stream.
pub const STREAM_META_KEY: &str = "wasmbox/stream";

/// The most bytes joined into one notification.
const MAX_MESSAGE_BYTES: usize = 64 << 10;

/// How long the result waits, after the run, for the last notifications to be sent to
/// a client that does not read them.
const SEND_GRACE: Duration = Duration::from_secs(5);

/// Queues a run's chunks for [`OutputProgress`]'s task.
struct Queue(mpsc::UnboundedSender<(OutputStream, Vec<u8>)>);

impl OutputSink for Queue {
    fn write(&self, stream: OutputStream, bytes: &[u8]) {
        // The task is gone only once the run is over.
        let _ = self.0.send((stream, bytes.to_vec()));
    }
}

/// Sends one run's output to the client as progress notifications.
pub(crate) struct OutputProgress {
    sink: Arc<dyn OutputSink>,
    task: JoinHandle<()>,
}

impl OutputProgress {
    /// Starts sending to `peer` under `token`.
    pub(crate) fn start(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(send_progress(peer, token, rx));
        OutputProgress { sink: Arc::new(Queue(tx)), task }
    }

    /// The sink for the run's [`wasmbox::RunRequest`].
    pub(crate) fn sink(&self) -> Arc<dyn OutputSink> {
        Arc::clone(&self.sink)
    }

    /// Waits until every chunk of the finished run has been sent (or, for a client that
    /// does not read, until [`SEND_GRACE`] is over).
    pub(crate) async fn finish(self) {
        // The run is over and wasmbox has dropped its clones of the sink: dropping this
        // one closes the queue, which ends the task once it has sent the rest.
        let OutputProgress { sink, mut task } = self;
        drop(sink);
        if tokio::time::timeout(SEND_GRACE, &mut task).await.is_err() {
            tracing::warn!("the client did not take the run's output notifications in time");
            task.abort();
        }
    }
}

async fn send_progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut chunks: mpsc::UnboundedReceiver<(OutputStream, Vec<u8>)>,
) {
    let mut text = [TextChunks::default(), TextChunks::default()];
    let mut sent = 0u64;
    let mut next = chunks.recv().await;
    while let Some((stream, mut bytes)) = next.take() {
        while bytes.len() < MAX_MESSAGE_BYTES {
            match chunks.try_recv() {
                Ok((same, more)) if same == stream => bytes.extend_from_slice(&more),
                Ok(other) => {
                    next = Some(other);
                    break;
                }
                Err(_) => break,
            }
        }
        let decoder = &mut text[usize::from(stream == OutputStream::Stderr)];
        let message = decoder.push(&bytes);
        if !message.is_empty() && notify(&peer, &token, stream, &mut sent, message).await.is_err() {
            return;
        }
        if next.is_none() {
            next = chunks.recv().await;
        }
    }
    // An unfinished character at the very end of a stream.
    for (stream, decoder) in [OutputStream::Stdout, OutputStream::Stderr].into_iter().zip(&mut text) {
        let rest = decoder.finish();
        if !rest.is_empty() && notify(&peer, &token, stream, &mut sent, rest).await.is_err() {
            return;
        }
    }
}

async fn notify(
    peer: &Peer<RoleServer>,
    token: &ProgressToken,
    stream: OutputStream,
    sent: &mut u64,
    message: String,
) -> Result<(), rmcp::service::ServiceError> {
    *sent += 1;
    peer.notify_progress(notification_param(token, *sent, stream, message)).await
}

fn notification_param(
    token: &ProgressToken,
    sent: u64,
    stream: OutputStream,
    message: String,
) -> ProgressNotificationParam {
    let mut meta = MetaObject::new();
    meta.0.insert(STREAM_META_KEY.into(), Value::String(stream.name().into()));
    let mut param = ProgressNotificationParam::new(token.clone(), sent as f64).with_message(message);
    param.meta = Some(NotificationMetaObject(meta));
    param
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{NumberOrString, ProgressNotification, ServerNotification};

    /// What the client reads: the chunk's text, its stream in `_meta`, the count.
    #[test]
    fn a_notification_carries_the_stream_in_its_meta() {
        let token = ProgressToken(NumberOrString::Number(7));
        let param = notification_param(&token, 3, OutputStream::Stderr, "oops\n".into());
        let wire = ServerNotification::ProgressNotification(ProgressNotification::new(param));
        let expected = serde_json::json!({"method": "notifications/progress", "params": {
            "_meta": {"wasmbox/stream": "stderr"}, "message": "oops\n", "progress": 3.0, "progressToken": 7}});
        assert_eq!(serde_json::to_value(&wire).unwrap(), expected);
    }
}
