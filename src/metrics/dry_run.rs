//! `--dry-run`: what kumaco would have written and posted.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DryRunWriteLabels {
    pub condition: String,
    pub status: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DryRunEventLabels {
    pub reason: String,
}

/// `--dry-run` (shadow mode): what kumaco would have written. Label values are bounded:
/// kumaco's three condition types, three statuses, its few reasons.
#[derive(Default)]
pub struct DryRun {
    pub writes: Family<DryRunWriteLabels, Counter>,
    pub events: Family<DryRunEventLabels, Counter>,
}

impl DryRun {
    /// A condition a write would have set (one per condition that changes).
    pub fn write(&self, condition: &str, status: &str, reason: &str) {
        self.writes
            .get_or_create(&DryRunWriteLabels {
                condition: condition.into(),
                status: status.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// An event that would have been posted.
    pub fn event(&self, reason: &str) {
        self.events
            .get_or_create(&DryRunEventLabels {
                reason: reason.into(),
            })
            .inc();
    }
}
