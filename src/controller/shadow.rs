//! Shadow mode (`--dry-run`): the pass runs as in a live instance and nothing is
//! executed. Each would-be change is logged and counted once, and recorded as pending
//! (with a resourceVersion no cache reaches), so that the next passes reason on the
//! state the write would have made: the ceiling counts the nodes it would have started.
//! That record is the one thing a shadow remembers rather than reads; a restarted shadow
//! starts again from the cluster.

use std::collections::{HashMap, HashSet};

use jiff::Timestamp;
use tracing::info;

use crate::announce::Announcement;
use crate::metrics::Metrics;
use crate::node_events::NodeEvent;
use crate::pass::{NodeView, Pending, Write, overlay};

/// The events a shadow logged as "would post" and that are still due (each is logged
/// once while it is due).
#[derive(Default)]
pub struct Shadow {
    logged: HashSet<String>,
}

impl Shadow {
    /// Logs and counts each condition `writes` would change, and records them in
    /// `pending` as a live instance records its writes.
    pub fn would_write<'a>(
        &self,
        writes: Vec<Write>,
        nodes: impl IntoIterator<Item = NodeView<'a>>,
        pending: &mut HashMap<String, Pending>,
        metrics: &Metrics,
        now: Timestamp,
    ) {
        let nodes: HashMap<&str, NodeView> = nodes.into_iter().map(|n| (n.name, n)).collect();
        for w in writes {
            let current = nodes
                .get(w.node.as_str())
                .map(|n| overlay(pending.get(&w.node), n, now).0)
                .unwrap_or_default();
            for c in w.changes(&current) {
                info!(node = %w.node, condition = %c.type_, status = c.status.as_str(),
                      reason = %c.reason, detail = %c.message, "dry run: would set condition");
                metrics
                    .dry_run
                    .write(&c.type_, c.status.as_str(), &c.reason);
            }
            for ty in &w.dropped {
                info!(node = %w.node, condition = %ty,
                      "dry run: would give up this instance's ownership of the condition");
            }
            pending.insert(
                w.node,
                Pending {
                    conditions: w.conditions,
                    // Never written, so no cache ever catches up with it by version: it
                    // is settled only when the node shows the same conditions (another
                    // instance wrote them), or replaced by the next would-be write.
                    resource_version: Some(u64::MAX),
                    written_at: now,
                    dropped: w.dropped,
                },
            );
        }
    }

    /// Logs and counts each event that would be posted, once while it is due.
    pub fn would_post(
        &mut self,
        window_events: &[Announcement],
        node_events: &[NodeEvent],
        metrics: &Metrics,
    ) {
        let due: HashSet<&str> = window_events
            .iter()
            .map(|a| a.name.as_str())
            .chain(node_events.iter().map(|e| e.name.as_str()))
            .collect();
        self.logged.retain(|name| due.contains(name.as_str()));
        for a in window_events {
            if self.logged.insert(a.name.clone()) {
                info!(window = %a.window, reason = a.reason(), event = %a.name,
                      "dry run: would post event");
                metrics.dry_run.event(a.reason());
            }
        }
        for e in node_events {
            if self.logged.insert(e.name.clone()) {
                info!(node = %e.node, reason = e.reason, note = %e.note, event = %e.name,
                      "dry run: would post event");
                metrics.dry_run.event(e.reason);
            }
        }
    }
}
