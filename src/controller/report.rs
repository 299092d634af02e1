//! What a pass tells the people who run kumaco: its counts as metrics, and the contests
//! with other instances as log lines (each once while it lasts) and gauges.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::pass::{Contest, Deferred, Outcome};

/// Exports the pass's counts and per-window summaries.
pub fn counts(metrics: &Metrics, outcome: &Outcome) {
    let c = &outcome.counts;
    metrics.nodes_in_scope.set(c.in_scope as i64);
    metrics
        .nodes_under_maintenance
        .set(c.under_maintenance as i64);
    metrics.nodes_in_progress.set(c.in_progress as i64);
    metrics.nodes_planned.set(c.planned as i64);
    metrics.active_windows.set(c.active_windows as i64);
    metrics.pass.set(&outcome.counts, &outcome.windows);
    metrics.nodes_contested.set(outcome.contested.len() as i64);
    metrics.writes_deferred.set(outcome.deferred.len() as i64);
}

/// The contests and held-back writes already logged: a log's memory, not a decision's.
#[derive(Default)]
pub struct Contests {
    /// (node, other field manager) → when last seen contested.
    seen: HashMap<(String, String), Instant>,
    deferred: HashSet<(String, Timestamp)>,
}

impl Contests {
    /// Logs each contest and each write the contest bound holds back, once while it lasts.
    /// In a contest of differing opinions the report moves between the two instances with
    /// each rewrite (the one held back reports): a contest is logged as over only once it
    /// has not been seen for `quiet` (the resync interval).
    pub fn log(&mut self, contested: &[Contest], deferred: &[Deferred], quiet: Duration) {
        let now = Instant::now();
        for c in contested {
            for other in &c.with {
                let seen = self.seen.insert((c.node.clone(), other.clone()), now);
                if seen.is_none() {
                    warn!(node = %c.node, other_field_manager = %other,
                          "node contested: another live kumaco instance also manages its \
                           conditions; each rewrites what the other changed at most once per \
                           --resync-interval");
                }
            }
        }
        self.seen.retain(|(node, other), seen| {
            let over = now.duration_since(*seen) > quiet;
            if over {
                info!(node = %node, other_field_manager = %other, "node no longer contested");
            }
            !over
        });
        let held: HashSet<(String, Timestamp)> =
            deferred.iter().map(|d| (d.node.clone(), d.until)).collect();
        for d in deferred {
            if !self.deferred.contains(&(d.node.clone(), d.until)) {
                info!(node = %d.node, changed_by = ?d.by, until = %d.until,
                      "not rewriting what another instance changed since this one's last \
                       write until a resync interval after it");
            }
        }
        self.deferred = held;
    }
}
