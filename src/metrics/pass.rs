//! The gauges filled from each pass: per window, per condition state, the slots and the
//! oldest maintenance and wait. A window's series are removed when it is deleted.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::pass::{Counts, WindowSummary};

/// A window ConfigMap. Not `namespace`/`name`: Prometheus' Kubernetes discovery and the
/// Prometheus Operator put the scraped pod's `namespace` on every series, which would
/// rename ours to `exported_namespace`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WindowLabels {
    pub window_namespace: String,
    pub window: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    pub condition: String,
    pub status: String,
    pub reason: String,
}

/// The per-window and per-condition series exported by the last pass, to remove those
/// the next pass no longer reports (a deleted window).
#[derive(Default)]
struct Exported {
    windows: HashSet<WindowLabels>,
    next_starts: HashSet<WindowLabels>,
    conditions: HashSet<ConditionLabels>,
}

/// The gauges filled from each pass's per-window summaries and condition counts.
/// Cardinality: 4 series per window ConfigMap, and at most one per (condition, status,
/// reason) of kumaco's own (reasons it does not write are counted as `Other`).
pub struct PassMetrics {
    pub window_valid: Family<WindowLabels, Gauge>,
    pub window_active: Family<WindowLabels, Gauge>,
    pub window_selected_nodes: Family<WindowLabels, Gauge>,
    pub window_next_start: Family<WindowLabels, Gauge>,
    pub nodes_by_condition: Family<ConditionLabels, Gauge>,
    pub in_progress_slots: Gauge,
    pub oldest_in_progress: Gauge,
    pub oldest_waiting: Gauge,
    exported: Mutex<Exported>,
}

impl PassMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = PassMetrics {
            window_valid: Family::default(),
            window_active: Family::default(),
            window_selected_nodes: Family::default(),
            window_next_start: Family::default(),
            nodes_by_condition: Family::default(),
            in_progress_slots: Gauge::default(),
            oldest_in_progress: Gauge::default(),
            oldest_waiting: Gauge::default(),
            exported: Mutex::default(),
        };
        registry.register(
            "window_valid",
            "1 if the window ConfigMap is a valid window, 0 if kumaco ignores it as invalid",
            m.window_valid.clone(),
        );
        registry.register(
            "window_active",
            "1 while an occurrence of the window is active",
            m.window_active.clone(),
        );
        registry.register(
            "window_selected_nodes",
            "In-scope nodes the window selects while it is active (0 while inactive)",
            m.window_selected_nodes.clone(),
        );
        registry.register(
            "window_next_start_timestamp_seconds",
            "Unix time of the window's next start (absent for a window that never starts again)",
            m.window_next_start.clone(),
        );
        registry.register(
            "nodes_by_condition",
            "Nodes by the status and reason of each condition kumaco owns, once its writes land",
            m.nodes_by_condition.clone(),
        );
        registry.register(
            "in_progress_slots",
            "MaintenanceInProgress slots (--max-in-progress for the nodes in scope; 0 without --in-progress)",
            m.in_progress_slots.clone(),
        );
        registry.register(
            "oldest_in_progress_timestamp_seconds",
            "Unix time the longest-running maintenance started (MaintenanceInProgress=True since); 0 when none runs",
            m.oldest_in_progress.clone(),
        );
        registry.register(
            "oldest_waiting_timestamp_seconds",
            "Unix time the longest-waiting node began waiting for a MaintenanceInProgress slot; 0 when none waits",
            m.oldest_waiting.clone(),
        );
        m
    }

    /// Copies a pass's summaries into the gauges, removing the series of windows and
    /// condition states it no longer reports.
    pub fn set(&self, counts: &Counts, windows: &[WindowSummary]) {
        let mut exported = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = HashSet::new();
        let mut next_starts = HashSet::new();
        for w in windows {
            let labels = WindowLabels {
                window_namespace: w.id.namespace.clone(),
                window: w.id.name.clone(),
            };
            self.window_valid.get_or_create(&labels).set(w.valid.into());
            self.window_active
                .get_or_create(&labels)
                .set(w.active.into());
            self.window_selected_nodes
                .get_or_create(&labels)
                .set(w.selected as i64);
            if let Some(t) = w.next_start {
                self.window_next_start
                    .get_or_create(&labels)
                    .set(t.as_second());
                next_starts.insert(labels.clone());
            }
            seen.insert(labels);
        }
        for gone in exported.windows.difference(&seen) {
            self.window_valid.remove(gone);
            self.window_active.remove(gone);
            self.window_selected_nodes.remove(gone);
        }
        for gone in exported.next_starts.difference(&next_starts) {
            self.window_next_start.remove(gone);
        }
        exported.windows = seen;
        exported.next_starts = next_starts;

        let mut seen = HashSet::new();
        for (state, n) in &counts.conditions {
            let labels = ConditionLabels {
                condition: state.type_.into(),
                status: state.status.as_str().into(),
                reason: state.reason.into(),
            };
            self.nodes_by_condition
                .get_or_create(&labels)
                .set(*n as i64);
            seen.insert(labels);
        }
        for gone in exported.conditions.difference(&seen) {
            self.nodes_by_condition.remove(gone);
        }
        exported.conditions = seen;

        self.in_progress_slots.set(counts.slots.unwrap_or(0) as i64);
        self.oldest_in_progress
            .set(counts.oldest_in_progress.map_or(0, |t| t.as_second()));
        self.oldest_waiting
            .set(counts.oldest_waiting.map_or(0, |t| t.as_second()));
    }
}
