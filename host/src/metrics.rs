//! Counters of runs by status and tool calls by tool and status, per engine.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::outcome::{CallStatus, Status};

/// The label used for tool names that are not registered: guests choose the names they
/// call, and must not be able to grow the metrics without bound.
pub const UNKNOWN_TOOL_LABEL: &str = "<unknown>";

#[derive(Default)]
pub(crate) struct Metrics {
    runs: Mutex<BTreeMap<&'static str, u64>>,
    tool_calls: Mutex<BTreeMap<(String, &'static str), u64>>,
    running: AtomicI64,
    queued: AtomicI64,
    instances_prepared: AtomicU64,
    instances_inline: AtomicU64,
}

impl Metrics {
    pub(crate) fn run_finished(&self, status: Status) {
        *lock(&self.runs).entry(status.as_str()).or_default() += 1;
    }

    /// `tool` must be a registered name or [`UNKNOWN_TOOL_LABEL`].
    pub(crate) fn tool_call_finished(&self, tool: &str, status: CallStatus) {
        *lock(&self.tool_calls).entry((tool.to_owned(), status.as_str())).or_default() += 1;
    }

    /// A run or session got its fresh instance: prepared ahead, or (false) instantiated
    /// on its own path.
    pub(crate) fn fresh_instance(&self, prepared: bool) {
        let counter = if prepared { &self.instances_prepared } else { &self.instances_inline };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn running(&self) -> &AtomicI64 {
        &self.running
    }

    pub(crate) fn queued(&self) -> &AtomicI64 {
        &self.queued
    }

    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            runs_by_status: lock(&self.runs).iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            tool_calls: lock(&self.tool_calls)
                .iter()
                .map(|((tool, status), count)| ToolCallCount {
                    tool: tool.clone(),
                    status: (*status).to_owned(),
                    count: *count,
                })
                .collect(),
            runs_running: self.running.load(Ordering::Relaxed).max(0) as u64,
            runs_queued: self.queued.load(Ordering::Relaxed).max(0) as u64,
            pool_resident_bytes: 0,
            instances_prepared: self.instances_prepared.load(Ordering::Relaxed),
            instances_inline: self.instances_inline.load(Ordering::Relaxed),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters stay meaningful after a panic elsewhere; keep counting.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Calls of one tool that ended with one status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolCallCount {
    /// The tool (or [`UNKNOWN_TOOL_LABEL`]).
    pub tool: String,
    /// The call status word.
    pub status: String,
    /// How many.
    pub count: u64,
}

/// A point-in-time copy of an engine's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MetricsSnapshot {
    /// Finished runs by status word (admission rejections included).
    pub runs_by_status: BTreeMap<String, u64>,
    /// Tool calls by tool and status.
    pub tool_calls: Vec<ToolCallCount>,
    /// Runs executing now.
    pub runs_running: u64,
    /// Runs waiting for admission now.
    pub runs_queued: u64,
    /// Bytes of linear memory and tables that idle instance-pool slots keep resident,
    /// so the next run in a slot skips the page faults (0 without the pool, or where
    /// the kernel lacks the PAGEMAP_SCAN ioctl).
    pub pool_resident_bytes: u64,
    /// Runs and sessions (in this process) that found a fresh instance prepared ahead
    /// ([`EngineConfig::prepared_instances`](crate::EngineConfig::prepared_instances)).
    pub instances_prepared: u64,
    /// Runs and sessions (in this process) that instantiated theirs on their own path:
    /// none was prepared, none fitted their limits, or preparing is off. Many of these
    /// against `instances_prepared` mean bursts larger than the prepared set.
    pub instances_inline: u64,
}

impl MetricsSnapshot {
    /// Finished runs with `status`.
    pub fn runs(&self, status: Status) -> u64 {
        self.runs_by_status.get(status.as_str()).copied().unwrap_or(0)
    }

    /// Calls of `tool` that ended with `status`.
    pub fn tool_calls(&self, tool: &str, status: CallStatus) -> u64 {
        self.tool_calls.iter().find(|c| c.tool == tool && c.status == status.as_str()).map_or(0, |c| c.count)
    }

    /// The counters in the Prometheus text exposition format.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP wasmbox_runs_total Finished runs by status.\n# TYPE wasmbox_runs_total counter\n");
        for (status, count) in &self.runs_by_status {
            let _ = writeln!(out, "wasmbox_runs_total{{status=\"{status}\"}} {count}");
        }
        out.push_str(
            "# HELP wasmbox_tool_calls_total Tool calls by tool and status.\n# TYPE wasmbox_tool_calls_total counter\n",
        );
        for c in &self.tool_calls {
            let _ = writeln!(
                out,
                "wasmbox_tool_calls_total{{tool=\"{}\",status=\"{}\"}} {}",
                escape(&c.tool),
                c.status,
                c.count
            );
        }
        out.push_str("# HELP wasmbox_runs_running Runs executing now.\n# TYPE wasmbox_runs_running gauge\n");
        let _ = writeln!(out, "wasmbox_runs_running {}", self.runs_running);
        out.push_str("# HELP wasmbox_runs_queued Runs waiting for admission.\n# TYPE wasmbox_runs_queued gauge\n");
        let _ = writeln!(out, "wasmbox_runs_queued {}", self.runs_queued);
        out.push_str(
            "# HELP wasmbox_pool_resident_bytes Memory idle pool slots keep resident.\n\
             # TYPE wasmbox_pool_resident_bytes gauge\n",
        );
        let _ = writeln!(out, "wasmbox_pool_resident_bytes {}", self.pool_resident_bytes);
        out.push_str(
            "# HELP wasmbox_instances_total Fresh instances of runs and sessions, by where they came from.\n\
             # TYPE wasmbox_instances_total counter\n",
        );
        let _ = writeln!(out, "wasmbox_instances_total{{source=\"prepared\"}} {}", self.instances_prepared);
        let _ = writeln!(out, "wasmbox_instances_total{{source=\"inline\"}} {}", self.instances_inline);
        out
    }
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_exposes_in_prometheus_format() {
        let metrics = Metrics::default();
        metrics.run_finished(Status::Ok);
        metrics.run_finished(Status::Ok);
        metrics.run_finished(Status::Timeout);
        metrics.tool_call_finished("add", CallStatus::Ok);
        metrics.tool_call_finished(UNKNOWN_TOOL_LABEL, CallStatus::Denied);
        metrics.fresh_instance(true);
        metrics.fresh_instance(false);
        metrics.fresh_instance(false);
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.runs(Status::Ok), 2);
        assert_eq!(snapshot.tool_calls("add", CallStatus::Ok), 1);
        let text = snapshot.to_prometheus();
        assert!(text.contains("wasmbox_runs_total{status=\"ok\"} 2\n"), "{text}");
        assert!(text.contains("wasmbox_runs_total{status=\"timeout\"} 1\n"), "{text}");
        assert!(text.contains("wasmbox_tool_calls_total{tool=\"<unknown>\",status=\"denied\"} 1\n"), "{text}");
        assert!(text.contains("wasmbox_pool_resident_bytes 0\n"), "{text}");
        assert_eq!((snapshot.instances_prepared, snapshot.instances_inline), (1, 2));
        assert!(text.contains("wasmbox_instances_total{source=\"prepared\"} 1\n"), "{text}");
        assert!(text.contains("wasmbox_instances_total{source=\"inline\"} 2\n"), "{text}");
    }
}
