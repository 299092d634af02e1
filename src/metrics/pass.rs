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
    groups: HashSet<GroupLabels>,
}

/// A group of `--max-in-progress-per`: the label key and its value (`""` for the nodes
/// without the label).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub key: String,
    pub group: String,
}

/// Most groups exported per label key: a label with a value per node (a hostname) must
/// not make a series per node. The rest are counted in `kumaco_groups_not_exported`.
pub const MAX_GROUPS_PER_KEY: usize = 32;

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
    pub nodes_unavailable: Gauge,
    pub nodes_disrupted: Gauge,
    pub oldest_unrecovered: Gauge,
    pub group_slots: Family<GroupLabels, Gauge>,
    pub group_disrupted: Family<GroupLabels, Gauge>,
    pub groups_not_exported: Gauge,
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
            nodes_unavailable: Gauge::default(),
            nodes_disrupted: Gauge::default(),
            oldest_unrecovered: Gauge::default(),
            group_slots: Family::default(),
            group_disrupted: Family::default(),
            groups_not_exported: Gauge::default(),
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
        registry.register(
            "nodes_unavailable",
            "In-scope nodes unavailable: Ready False or Unknown, or cordoned",
            m.nodes_unavailable.clone(),
        );
        registry.register(
            "nodes_disrupted",
            "In-scope nodes taking MaintenanceInProgress slots: in progress, or unavailable with --count-unavailable (0 without --in-progress)",
            m.nodes_disrupted.clone(),
        );
        registry.register(
            "oldest_unrecovered_timestamp_seconds",
            "Unix time the maintenance of the longest-unrecovered node ended (NodeRebooted or MaintenanceCompleted, still unavailable); 0 when none",
            m.oldest_unrecovered.clone(),
        );
        registry.register(
            "group_slots",
            "MaintenanceInProgress slots per group of --max-in-progress-per (key, value; at most 32 groups per key)",
            m.group_slots.clone(),
        );
        registry.register(
            "group_disrupted",
            "Nodes taking slots per group of --max-in-progress-per (at most 32 groups per key)",
            m.group_disrupted.clone(),
        );
        registry.register(
            "groups_not_exported",
            "Groups of --max-in-progress-per beyond the 32 per key exported",
            m.groups_not_exported.clone(),
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
        self.nodes_unavailable.set(counts.unavailable as i64);
        self.nodes_disrupted
            .set(counts.usage.as_ref().map_or(0, |u| u.disrupted()) as i64);
        self.oldest_unrecovered
            .set(counts.oldest_unrecovered.map_or(0, |t| t.as_second()));
        let mut seen = HashSet::new();
        let mut per_key: std::collections::HashMap<&str, usize> = Default::default();
        let mut not_exported = 0;
        for (group, usage) in &counts.groups {
            let n = per_key.entry(group.key.as_str()).or_default();
            *n += 1;
            if *n > MAX_GROUPS_PER_KEY {
                not_exported += 1;
                continue;
            }
            let labels = GroupLabels {
                key: group.key.clone(),
                group: group.value.clone().unwrap_or_default(),
            };
            self.group_slots
                .get_or_create(&labels)
                .set(usage.slots as i64);
            self.group_disrupted
                .get_or_create(&labels)
                .set(usage.disrupted() as i64);
            seen.insert(labels);
        }
        for gone in exported.groups.difference(&seen) {
            self.group_slots.remove(gone);
            self.group_disrupted.remove(gone);
        }
        exported.groups = seen;
        self.groups_not_exported.set(not_exported);
        self.oldest_in_progress
            .set(counts.oldest_in_progress.map_or(0, |t| t.as_second()));
        self.oldest_waiting
            .set(counts.oldest_waiting.map_or(0, |t| t.as_second()));
    }
}
