//! Audit events: what crossed the boundary, who asked, and how it ended.
//!
//! Every run emits `run_started` and `run_finished`; every tool call emits
//! `tool_call_started` and `tool_call_finished`. Each event carries the run id, the call
//! id and the ancestry (the chain of parent run and call ids of nested runs), so a
//! nested run's calls can be linked to the call that started it. Payloads (arguments,
//! results) are recorded only when [`AuditConfig::record_payloads`] is set, and then
//! redacted. The [`Outcome`](crate::Outcome)'s tool-call trail holds the same records.

mod redact;

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

pub(crate) use redact::{floor_char_boundary, Redactor};
pub use redact::{DEFAULT_MAX_RECORDED_STRING_BYTES, DEFAULT_REDACT_KEYS, REDACTED};

use crate::outcome::{Status, ToolCallRecord};

/// One link of a nested run's ancestry: the run and the call that started the next run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallRef {
    /// The parent run.
    pub run_id: String,
    /// The parent's call (a tool that started a nested run).
    pub call_id: u32,
}

/// An audit event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditEvent {
    /// A run was admitted and is starting.
    RunStarted {
        /// This run.
        run_id: String,
        /// Parent runs and calls, outermost first; empty for a top-level run.
        ancestry: Vec<CallRef>,
        /// The guest runtime's name.
        runtime: String,
        /// Size of the submitted code.
        code_bytes: u64,
    },
    /// A run ended.
    RunFinished {
        /// This run.
        run_id: String,
        /// Parent runs and calls, outermost first.
        ancestry: Vec<CallRef>,
        /// How it ended.
        status: Status,
        /// Wall time of the run.
        duration_ms: f64,
        /// How many tool calls it attempted.
        tool_calls: u32,
    },
    /// A tool call is about to be checked and run.
    ToolCallStarted {
        /// The calling run.
        run_id: String,
        /// The call's sequence number within the run.
        call_id: u32,
        /// Parent runs and calls of the calling run.
        ancestry: Vec<CallRef>,
        /// The tool name as the guest sent it, or for a name longer than any tool's
        /// ([`MAX_TOOL_NAME_BYTES`](crate::MAX_TOOL_NAME_BYTES)) its first bytes and its
        /// length.
        tool: String,
        /// Size of the argument JSON (payloads, when recorded, are in the finished record).
        args_bytes: u64,
    },
    /// A tool call ended; the same record is kept in the outcome's trail.
    ToolCallFinished(ToolCallRecord),
}

/// Where audit events go. Implementations must not block: they are called on the run's
/// path.
pub trait AuditSink: Send + Sync + 'static {
    /// Records one event.
    fn record(&self, event: &AuditEvent);
}

/// The default sink: each event as one `tracing` event at INFO, target `wasmbox::audit`.
#[derive(Debug, Default, Clone, Copy)]
pub struct TracingSink;

impl AuditSink for TracingSink {
    fn record(&self, event: &AuditEvent) {
        // Serializing costs more than the rest of a tool call; skip it when nobody listens.
        if !tracing::enabled!(target: "wasmbox::audit", tracing::Level::INFO) {
            return;
        }
        match serde_json::to_string(event) {
            Ok(json) => tracing::info!(target: "wasmbox::audit", "{json}"),
            Err(err) => tracing::warn!(target: "wasmbox::audit", "unserializable audit event: {err}"),
        }
    }
}

/// A sink that hands events to an embedder over a bounded channel. When the receiver
/// falls behind, events are dropped (and counted) rather than slowing runs down.
#[derive(Debug)]
pub struct ChannelSink {
    sender: mpsc::Sender<AuditEvent>,
    dropped: AtomicU64,
}

impl ChannelSink {
    /// A sink and the receiver to read its events from, buffering up to `capacity`.
    pub fn new(capacity: usize) -> (Self, mpsc::Receiver<AuditEvent>) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        (ChannelSink { sender, dropped: AtomicU64::new(0) }, receiver)
    }

    /// How many events were dropped because the channel was full or closed.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl AuditSink for ChannelSink {
    fn record(&self, event: &AuditEvent) {
        if self.sender.try_send(event.clone()).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// What the audit trail records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Record (redacted) arguments, results and the failure messages tools write.
    /// Default: off — then no argument or result value reaches an audit event, a log
    /// line or a recorded message: a tool's failure is recorded as such, without its
    /// words, and the broker's own messages (schema errors included) name no values.
    pub record_payloads: bool,
    /// Keys whose values are redacted at any depth, matched by words: an entry of five
    /// bytes or more anywhere in the key, a shorter one only as a whole word (so `auth`
    /// catches `X-Auth-Token` but not `author`). Also redacted: the value of a
    /// `{"name": <sensitive>, "value": …}` pair and strings carrying a bearer token, a
    /// JWT or `<sensitive>=…`. Default: [`DEFAULT_REDACT_KEYS`].
    pub redact_keys: Vec<String>,
    /// Longer strings are recorded as their byte count, and a tool's failure message
    /// is cut to this length. Default: [`DEFAULT_MAX_RECORDED_STRING_BYTES`].
    pub max_string_bytes: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            record_payloads: false,
            redact_keys: DEFAULT_REDACT_KEYS.iter().map(|k| (*k).to_owned()).collect(),
            max_string_bytes: DEFAULT_MAX_RECORDED_STRING_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_channel_drops_and_counts_instead_of_blocking() {
        let (sink, mut receiver) = ChannelSink::new(1);
        let event =
            AuditEvent::RunStarted { run_id: "r".into(), ancestry: vec![], runtime: "python".into(), code_bytes: 1 };
        sink.record(&event);
        sink.record(&event);
        assert_eq!(sink.dropped(), 1);
        assert_eq!(receiver.try_recv().unwrap(), event);
    }

    #[test]
    fn events_serialize_with_their_name() {
        let event =
            AuditEvent::RunStarted { run_id: "r".into(), ancestry: vec![], runtime: "python".into(), code_bytes: 1 };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["event"], "run_started");
    }
}
