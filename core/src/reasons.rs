//! Every reason kumaco writes on its conditions, defined once. The names are the reasons
//! themselves: a condition's reason is API surface (kured, alerts and dashboards read it).
//!
//! [`ALL`] lists them; the pass's table tests check that every reason a simulated pass
//! writes is in it, and the metrics count any other reason as `Other`. What a reason of
//! `MaintenanceInProgress=False` means (it ends a maintenance, it says why a node has not
//! started, ...) is decided here too, once, by the functions below: every module that
//! reads a reason asks them.

/// `UnderMaintenance=True` (a window is active) and `MaintenanceInProgress=True` (the
/// maintenance started in a window).
pub const MAINTENANCE_WINDOW: &str = "MaintenanceWindow";
/// `UnderMaintenance=False` after a window; `MaintenanceInProgress=False` outside any.
pub const NO_ACTIVE_MAINTENANCE_WINDOW: &str = "NoActiveMaintenanceWindow";
/// A blackout suspends maintenance (`UnderMaintenance`) or new starts
/// (`MaintenanceInProgress`).
pub const MAINTENANCE_BLACKOUT: &str = "MaintenanceBlackout";
/// Given up on a node that left this instance's `--node-selector`.
pub const NODE_OUT_OF_SCOPE: &str = "NodeOutOfScope";
/// Given up on a type this instance no longer decides (its flag was removed).
pub const CONDITION_NOT_MANAGED: &str = "ConditionNotManaged";

/// `MaintenancePlanned=True`.
pub const MAINTENANCE_SCHEDULED: &str = "MaintenanceScheduled";
/// `MaintenancePlanned=False`: the planned maintenance began.
pub const MAINTENANCE_STARTED: &str = "MaintenanceStarted";
/// `MaintenancePlanned=False`: nothing is planned any more.
pub const NO_MAINTENANCE_PLANNED: &str = "NoMaintenancePlanned";

/// `MaintenanceInProgress=False`: a required condition stopped being True.
pub const MAINTENANCE_COMPLETED: &str = "MaintenanceCompleted";
/// `MaintenanceInProgress=False`: the window ended (no required condition, or
/// `--stop-at-window-end`).
pub const MAINTENANCE_WINDOW_ENDED: &str = "MaintenanceWindowEnded";
/// `MaintenanceInProgress=False`: the node rebooted (its boot ID changed) while in
/// progress; the reboot was the maintenance.
pub const NODE_REBOOTED: &str = "NodeRebooted";
/// Why not started: every slot is taken.
pub const WAITING_FOR_SLOT: &str = "WaitingForSlot";
/// Why not started: a blocking condition is True.
pub const BLOCKED: &str = "Blocked";
/// Why not started: a required condition is not True.
pub const REQUIREMENT_NOT_MET: &str = "RequirementNotMet";
/// Why not started: too little of the window is left.
pub const START_CUTOFF: &str = "StartCutoff";
/// Why not started: the node is NotReady, its Ready is Unknown, or it is cordoned.
pub const NODE_UNAVAILABLE: &str = "NodeUnavailable";
/// Why not started: `--start-interval` has not passed since the last start or end.
pub const START_INTERVAL: &str = "StartInterval";
/// Why not started: a PodDisruptionBudget would refuse the drain's eviction of one of
/// the node's pods.
pub const POD_DISRUPTION_BUDGET: &str = "PodDisruptionBudget";
/// Why not started: an alert fires (or a query returns series) that holds starts.
pub const ALERT_FIRING: &str = "AlertFiring";
/// Why not started: an object check's expression does not hold, or cannot be evaluated.
pub const HEALTH_CHECK_FAILED: &str = "HealthCheckFailed";
/// Why not started: what a health gate reads cannot be read (a CustomResourceDefinition
/// gone, a right missing, Alertmanager or Prometheus down or refusing): no start until
/// it can.
pub const GATE_UNAVAILABLE: &str = "GateUnavailable";
/// Why not started: a person paused new starts (`kumaco pause`).
pub const PAUSED: &str = "Paused";

/// Every reason kumaco writes.
pub const ALL: [&str; 22] = [
    MAINTENANCE_WINDOW,
    NO_ACTIVE_MAINTENANCE_WINDOW,
    MAINTENANCE_BLACKOUT,
    NODE_OUT_OF_SCOPE,
    CONDITION_NOT_MANAGED,
    MAINTENANCE_SCHEDULED,
    MAINTENANCE_STARTED,
    NO_MAINTENANCE_PLANNED,
    MAINTENANCE_COMPLETED,
    MAINTENANCE_WINDOW_ENDED,
    NODE_REBOOTED,
    WAITING_FOR_SLOT,
    BLOCKED,
    REQUIREMENT_NOT_MET,
    START_CUTOFF,
    NODE_UNAVAILABLE,
    START_INTERVAL,
    POD_DISRUPTION_BUDGET,
    ALERT_FIRING,
    HEALTH_CHECK_FAILED,
    GATE_UNAVAILABLE,
    PAUSED,
];

/// `MaintenanceInProgress=False` reasons that end a maintenance: the node was in
/// progress, and is not any more.
const ENDS: [&str; 3] = [
    MAINTENANCE_COMPLETED,
    MAINTENANCE_WINDOW_ENDED,
    NODE_REBOOTED,
];

/// `MaintenanceInProgress=False` reasons saying why a node in a window has not started.
const WHY_NOT: [&str; 11] = [
    WAITING_FOR_SLOT,
    BLOCKED,
    REQUIREMENT_NOT_MET,
    START_CUTOFF,
    NODE_UNAVAILABLE,
    START_INTERVAL,
    POD_DISRUPTION_BUDGET,
    ALERT_FIRING,
    HEALTH_CHECK_FAILED,
    GATE_UNAVAILABLE,
    PAUSED,
];

/// The health gates' reasons (`crate::gates`), the pause's among them: they hold a start,
/// never a maintenance in progress, and their messages say what to act on.
const GATES: [&str; 5] = [
    POD_DISRUPTION_BUDGET,
    ALERT_FIRING,
    HEALTH_CHECK_FAILED,
    GATE_UNAVAILABLE,
    PAUSED,
];

/// Whether `reason` ends a maintenance (`MaintenanceCompleted`, `MaintenanceWindowEnded`,
/// `NodeRebooted`): what `--start-interval` counts from, a silence's tail follows, the
/// metrics count as an end.
pub fn ends_maintenance(reason: &str) -> bool {
    ENDS.contains(&reason)
}

/// Whether `reason` ends a maintenance that did its work (`MaintenanceCompleted`,
/// `NodeRebooted`), not one its window stopped: its duration is a maintenance's length,
/// and the node needs no other while its requirement stays cleared.
pub fn completes_maintenance(reason: &str) -> bool {
    reason == MAINTENANCE_COMPLETED || reason == NODE_REBOOTED
}

/// Whether `reason` says why a node in a window has not started (a "why not"): it is
/// rewritten only when the reason changes, and becomes `NoActiveMaintenanceWindow` when
/// the window goes.
pub fn is_why_not(reason: &str) -> bool {
    WHY_NOT.contains(&reason)
}

/// Whether a node that shows `reason` waits to start in the window it is in (for a slot,
/// the interval, a blocker, a gate, its own availability), as opposed to one that needs
/// no maintenance (`RequirementNotMet`) or will not start in this window
/// (`StartCutoff`): its planned maintenance has not begun yet.
pub fn is_waiting(reason: &str) -> bool {
    is_why_not(reason) && reason != REQUIREMENT_NOT_MET && reason != START_CUTOFF
}

/// Whether a node that shows `reason` would start but for the pace: every slot is taken
/// (`WaitingForSlot`) or `--start-interval` has not passed (`StartInterval`). Nothing of
/// the node itself holds it.
pub fn waits_for_pace(reason: &str) -> bool {
    reason == WAITING_FOR_SLOT || reason == START_INTERVAL
}

/// Whether `reason` is a health gate's (`PodDisruptionBudget`, `AlertFiring`,
/// `HealthCheckFailed`, `GateUnavailable`) or the pause's (`Paused`).
pub fn is_gate(reason: &str) -> bool {
    GATES.contains(&reason)
}

/// Whether kumaco writes `reason`.
pub fn is_kumacos(reason: &str) -> bool {
    ALL.contains(&reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_in_a_rule_is_one_kumaco_writes() {
        for r in ENDS.iter().chain(&WHY_NOT).chain(&GATES) {
            assert!(is_kumacos(r), "{r}");
        }
        for r in GATES {
            assert!(is_why_not(r) && is_waiting(r), "{r} holds a start only");
        }
        for r in ENDS {
            assert!(!is_why_not(r), "{r}");
        }
    }

    #[test]
    fn each_reason_once_and_in_upper_camel_case() {
        let mut all = ALL.to_vec();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), ALL.len(), "a reason listed twice");
        for r in ALL {
            assert!(
                r.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && r.chars().all(|c| c.is_ascii_alphanumeric()),
                "{r}: the API wants CamelCase reasons"
            );
        }
    }
}
