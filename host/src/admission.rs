//! Admission control: a bound on concurrent runs per engine, a bounded wait queue and a
//! queue timeout. Over the bound a run is turned away with `rejected` at once instead of
//! piling up.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// Why a run was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    QueueFull { max_queued: usize },
    QueueTimeout { waited: Duration },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::QueueFull { max_queued } => {
                write!(f, "too many runs: every slot is busy and {max_queued} runs are already waiting")
            }
            Refusal::QueueTimeout { waited } => write!(f, "no run slot became free within {} ms", waited.as_millis()),
        }
    }
}

pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    max_queued: usize,
    queue_timeout: Duration,
}

/// Holds a slot; counted as running until dropped.
pub(crate) struct Admitted {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.metrics.running().fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    pub(crate) fn new(max_running: usize, max_queued: usize, queue_timeout: Duration) -> Self {
        Admission { slots: Arc::new(Semaphore::new(max_running)), max_queued, queue_timeout }
    }

    pub(crate) async fn admit(&self, metrics: &Arc<Metrics>) -> Result<Admitted, Refusal> {
        let admitted = |permit| {
            metrics.running().fetch_add(1, Ordering::Relaxed);
            Admitted { _permit: permit, metrics: Arc::clone(metrics) }
        };
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(admitted(permit));
        }
        let queued = metrics.queued();
        if queued.fetch_add(1, Ordering::AcqRel) >= self.max_queued as i64 {
            queued.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::QueueFull { max_queued: self.max_queued });
        }
        let waited = tokio::time::timeout(self.queue_timeout, Arc::clone(&self.slots).acquire_owned()).await;
        queued.fetch_sub(1, Ordering::AcqRel);
        match waited {
            Ok(Ok(permit)) => Ok(admitted(permit)),
            // The semaphore is never closed; treat it like a timeout if it ever is.
            Ok(Err(_)) | Err(_) => Err(Refusal::QueueTimeout { waited: self.queue_timeout }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_run_past_slots_and_queue_is_rejected_at_once() {
        let metrics = Arc::new(Metrics::default());
        let admission = Arc::new(Admission::new(1, 1, Duration::from_secs(60)));
        let first = admission.admit(&metrics).await.unwrap();
        let queued = tokio::spawn({
            let (admission, metrics) = (Arc::clone(&admission), Arc::clone(&metrics));
            async move { admission.admit(&metrics).await.map(|_| ()) }
        });
        while metrics.queued().load(Ordering::Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(admission.admit(&metrics).await.err(), Some(Refusal::QueueFull { max_queued: 1 }));
        drop(first);
        queued.await.unwrap().unwrap();
        assert_eq!(metrics.snapshot().runs_running, 0);
    }

    #[tokio::test]
    async fn a_queued_run_gives_up_after_the_queue_timeout() {
        let metrics = Arc::new(Metrics::default());
        let admission = Admission::new(1, 10, Duration::from_millis(20));
        let _first = admission.admit(&metrics).await.unwrap();
        assert!(matches!(admission.admit(&metrics).await, Err(Refusal::QueueTimeout { .. })));
        assert_eq!(metrics.snapshot().runs_queued, 0);
    }
}
