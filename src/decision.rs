//! The pure decision: from windows, a node and the time, the conditions kumaco wants on
//! that node. No I/O: the controller feeds it cached state and writes what it returns.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::NodeCondition;

use crate::conditions::{Desired, UNDER_MAINTENANCE};
use crate::selector::Selector;
use crate::window::{Occurrence, Window, WindowId};

/// Reasons kumaco writes on `kured.dev/UnderMaintenance`.
pub const REASON_WINDOW: &str = "MaintenanceWindow";
pub const REASON_NO_WINDOW: &str = "NoActiveMaintenanceWindow";
pub const REASON_BLACKOUT: &str = "MaintenanceBlackout";
pub const REASON_OUT_OF_SCOPE: &str = "NodeOutOfScope";

/// The windows active at one instant, computed once and asked per node.
pub struct ActiveWindows<'a> {
    pub now: Timestamp,
    active: Vec<(&'a Window, Occurrence)>,
    /// Indexes into `active`, grouped by identical selector: windows often share a
    /// selector (a zone, a pool), and each distinct one is matched once per node.
    by_selector: Vec<Vec<usize>>,
}

impl<'a> ActiveWindows<'a> {
    pub fn at(windows: impl IntoIterator<Item = &'a Window>, now: Timestamp) -> Self {
        let active: Vec<(&Window, Occurrence)> = windows
            .into_iter()
            .filter_map(|w| w.latest_active(now).map(|o| (w, o)))
            .collect();
        let mut groups: HashMap<&Selector, usize> = HashMap::new();
        let mut by_selector: Vec<Vec<usize>> = Vec::new();
        for (i, (w, _)) in active.iter().enumerate() {
            let g = *groups.entry(&w.selector).or_insert_with(|| {
                by_selector.push(Vec::new());
                by_selector.len() - 1
            });
            by_selector[g].push(i);
        }
        ActiveWindows {
            now,
            active,
            by_selector,
        }
    }

    /// The active windows and their current occurrence.
    pub fn iter(&self) -> impl Iterator<Item = &(&'a Window, Occurrence)> {
        self.active.iter()
    }

    /// What the active windows say about a node with these labels.
    pub fn verdict(&self, labels: &BTreeMap<String, String>) -> Verdict<'a> {
        let mut windows = Vec::new();
        let mut blackouts = Vec::new();
        for group in &self.by_selector {
            if !self.active[group[0]].0.selector.matches(labels) {
                continue;
            }
            for &i in group {
                let (w, occ) = self.active[i];
                if w.blackout {
                    blackouts.push(&w.id);
                } else {
                    windows.push((w, occ));
                }
            }
        }
        if !blackouts.is_empty() {
            return Verdict::Blackout(blackouts);
        }
        if windows.is_empty() {
            return Verdict::Idle;
        }
        windows.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        let until = windows.iter().map(|(_, o)| o.end).max().unwrap_or(self.now);
        Verdict::Maintenance {
            windows: windows.iter().map(|(w, _)| *w).collect(),
            until,
        }
    }
}

/// Whether a node is in maintenance now, and why (not).
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict<'a> {
    /// Selected by these active windows (sorted by id, with descriptions); the latest
    /// known end is `until`.
    Maintenance {
        windows: Vec<&'a Window>,
        until: Timestamp,
    },
    /// An active blackout selects the node: not under maintenance, whatever else.
    Blackout(Vec<&'a WindowId>),
    /// No active window selects the node.
    Idle,
}

impl Verdict<'_> {
    pub fn is_maintenance(&self) -> bool {
        matches!(self, Verdict::Maintenance { .. })
    }
}

/// The `UnderMaintenance` condition to hold on a node, given the verdict and what the
/// node shows now; `None` means the node should not carry the condition (kumaco never
/// adds a False condition to a node without one).
///
/// Once False, the condition is left as it is (`existing` returned): a blackout ending or
/// another False reason is not a change worth a write.
pub fn under_maintenance(verdict: &Verdict, existing: Option<&NodeCondition>) -> Option<Desired> {
    let existing_true = existing.is_some_and(|c| c.status == "True");
    let desired = |status: bool, reason: &str, message: String| Desired {
        type_: UNDER_MAINTENANCE.into(),
        status,
        reason: reason.into(),
        message,
    };
    match verdict {
        Verdict::Maintenance { windows, until } => {
            let names: Vec<String> = windows
                .iter()
                .map(|w| match &w.description {
                    Some(d) if !d.is_empty() => format!("{} ({d})", w.id),
                    _ => w.id.to_string(),
                })
                .collect();
            let noun = if names.len() == 1 {
                "window"
            } else {
                "windows"
            };
            Some(desired(
                true,
                REASON_WINDOW,
                format!(
                    "in maintenance {noun} {} until {}",
                    names.join(", "),
                    until.strftime("%Y-%m-%dT%H:%M:%SZ")
                ),
            ))
        }
        Verdict::Blackout(ids) if existing_true => Some(desired(
            false,
            REASON_BLACKOUT,
            format!(
                "maintenance suspended by blackout {}",
                ids.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        Verdict::Idle if existing_true => Some(desired(
            false,
            REASON_NO_WINDOW,
            "no active maintenance window selects this node".into(),
        )),
        _ => existing.map(Desired::keep),
    }
}

/// A node outside `--node-selector` keeps nothing True from this instance: every
/// condition type this instance owns that is True goes False; the rest stay as they are.
pub fn out_of_scope(owned: &[NodeCondition]) -> Vec<Desired> {
    owned
        .iter()
        .map(|c| {
            if c.status == "True" {
                Desired {
                    type_: c.type_.clone(),
                    status: false,
                    reason: REASON_OUT_OF_SCOPE.into(),
                    message: "the node no longer matches this kumaco instance's --node-selector"
                        .into(),
                }
            } else {
                Desired::keep(c)
            }
        })
        .collect()
}

/// The next instant after `now` at which any window opens or an occurrence ends.
pub fn next_edge<'a>(
    windows: impl IntoIterator<Item = &'a Window>,
    now: Timestamp,
) -> Option<Timestamp> {
    windows
        .into_iter()
        .filter_map(|w| w.next_edge_after(now))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::test_window as window;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cond(status: &str, reason: &str) -> NodeCondition {
        NodeCondition {
            type_: UNDER_MAINTENANCE.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some("m".into()),
            ..Default::default()
        }
    }

    #[test]
    fn selected_node_in_active_window_is_under_maintenance() {
        let ws = [window("a", "0 2 * * *", "1h", "zone=a", false)];
        let active = ActiveWindows::at(&ws, ts("2026-01-01T02:30:00Z"));
        let v = active.verdict(&labels(&[("zone", "a")]));
        let d = under_maintenance(&v, None).unwrap();
        assert!(d.status);
        assert_eq!(d.reason, REASON_WINDOW);
        assert_eq!(
            d.message,
            "in maintenance window ops/a until 2026-01-01T03:00:00Z"
        );
        assert_eq!(active.verdict(&labels(&[("zone", "b")])), Verdict::Idle);
    }

    #[test]
    fn idle_node_without_condition_gets_none_and_true_goes_false() {
        assert_eq!(under_maintenance(&Verdict::Idle, None), None);
        let d = under_maintenance(&Verdict::Idle, Some(&cond("True", REASON_WINDOW))).unwrap();
        assert!(!d.status);
        assert_eq!(d.reason, REASON_NO_WINDOW);
        // Already False: kept as it is, whatever its reason.
        let d = under_maintenance(&Verdict::Idle, Some(&cond("False", REASON_BLACKOUT))).unwrap();
        assert_eq!(d.reason, REASON_BLACKOUT);
    }

    #[test]
    fn overlapping_windows_are_named_and_end_at_the_latest() {
        let ws = [
            window("b", "0 2 * * *", "2h", "", false),
            window("a", "30 2 * * *", "1h", "", false),
        ];
        let active = ActiveWindows::at(&ws, ts("2026-01-01T02:45:00Z"));
        let d = under_maintenance(&active.verdict(&labels(&[])), None).unwrap();
        assert_eq!(
            d.message,
            "in maintenance windows ops/a, ops/b until 2026-01-01T04:00:00Z"
        );
    }

    #[test]
    fn blackout_wins_over_windows() {
        let ws = [
            window("w", "0 2 * * *", "2h", "", false),
            window("freeze", "0 0 * * *", "24h", "zone=a", true),
        ];
        let active = ActiveWindows::at(&ws, ts("2026-01-01T02:30:00Z"));
        let v = active.verdict(&labels(&[("zone", "a")]));
        assert!(matches!(v, Verdict::Blackout(_)));
        let d = under_maintenance(&v, Some(&cond("True", REASON_WINDOW))).unwrap();
        assert_eq!((d.status, d.reason.as_str()), (false, REASON_BLACKOUT));
        assert!(d.message.contains("ops/freeze"));
        assert_eq!(under_maintenance(&v, None), None);
        // Other nodes are unaffected.
        assert!(active.verdict(&labels(&[("zone", "b")])).is_maintenance());
    }

    #[test]
    fn out_of_scope_turns_only_true_to_false() {
        let mut other = cond("False", REASON_NO_WINDOW);
        other.type_ = "MaintenanceInProgress".into();
        let got = out_of_scope(&[cond("True", REASON_WINDOW), other]);
        assert_eq!(
            (got[0].status, got[0].reason.as_str()),
            (false, REASON_OUT_OF_SCOPE)
        );
        assert_eq!(
            (got[1].status, got[1].reason.as_str()),
            (false, REASON_NO_WINDOW)
        );
    }

    #[test]
    fn next_edge_is_the_earliest_of_all_windows() {
        let ws = [
            window("a", "0 2 * * *", "1h", "", false),
            window("b", "0 1 * * *", "90m", "", false),
        ];
        assert_eq!(
            next_edge(&ws, ts("2026-01-01T00:00:00Z")),
            Some(ts("2026-01-01T01:00:00Z"))
        );
        assert_eq!(
            next_edge(&ws, ts("2026-01-01T02:00:00Z")),
            Some(ts("2026-01-01T02:30:00Z"))
        );
    }
}
