//! The notifications' metrics: notices by sink, transition and how they ended, failed
//! attempts, what waits, the last success. A series per sink and transition; none per
//! node.

use std::sync::atomic::AtomicU64;

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::notice::Kind;

/// `result`: sent, refused (a 4xx other than 408 and 429: dropped), dropped (the queue
/// was full).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotificationLabels {
    pub sink: String,
    pub kind: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SinkLabels {
    pub sink: String,
}

pub struct NotifyMetrics {
    pub notifications: Family<NotificationLabels, Counter>,
    pub failures: Family<SinkLabels, Counter>,
    pub queued: Family<SinkLabels, Gauge>,
    pub last_success: Family<SinkLabels, Gauge<f64, AtomicU64>>,
}

impl NotifyMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = NotifyMetrics {
            notifications: Family::default(),
            failures: Family::default(),
            queued: Family::default(),
            last_success: Family::default(),
        };
        registry.register(
            "notifications",
            "Notices of maintenance transitions by sink, kind and result (sent; refused: the sink answered 4xx, dropped; dropped: the queue was full)",
            m.notifications.clone(),
        );
        registry.register(
            "notification_failures",
            "Attempts to send to a sink that failed and are tried again (no answer, 5xx, 408, 429)",
            m.failures.clone(),
        );
        registry.register(
            "notifications_queued",
            "Notices waiting for a sink on the leader",
            m.queued.clone(),
        );
        registry.register(
            "notification_last_success_timestamp_seconds",
            "When the leader last sent to a sink (0: not in this process)",
            m.last_success.clone(),
        );
        m
    }

    /// Every series of `sink` from the start, at 0: an alert on failures reads a series
    /// that exists before the first one.
    pub fn register_sink(&self, sink: &str) {
        let labels = SinkLabels { sink: sink.into() };
        let _ = self.failures.get_or_create(&labels);
        let _ = self.queued.get_or_create(&labels);
        let _ = self.last_success.get_or_create(&labels);
        for kind in Kind::ALL {
            for result in ["sent", "refused", "dropped"] {
                let _ = self.notifications.get_or_create(&NotificationLabels {
                    sink: sink.into(),
                    kind: kind.name().into(),
                    result: result.into(),
                });
            }
        }
    }

    pub fn count(&self, sink: &str, kind: &str, result: &str) {
        self.notifications
            .get_or_create(&NotificationLabels {
                sink: sink.into(),
                kind: kind.into(),
                result: result.into(),
            })
            .inc();
    }

    pub fn failure(&self, sink: &str) {
        self.failures
            .get_or_create(&SinkLabels { sink: sink.into() })
            .inc();
    }

    pub fn queued(&self, sink: &str, n: usize) {
        self.queued
            .get_or_create(&SinkLabels { sink: sink.into() })
            .set(n as i64);
    }

    pub fn sent_at(&self, sink: &str, at: Timestamp) {
        self.last_success
            .get_or_create(&SinkLabels { sink: sink.into() })
            .set(at.as_millisecond() as f64 / 1000.0);
    }
}
