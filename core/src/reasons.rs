//! Every reason kumaco writes on its conditions, defined once. The names are the reasons
//! themselves: a condition's reason is API surface (kured, alerts and dashboards read it).
//!
//! [`ALL`] lists them; the pass's table tests check that every reason a simulated pass
//! writes is in it, and the metrics count any other reason as `Other`.

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

/// Every reason kumaco writes.
pub const ALL: [&str; 17] = [
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
];

/// Whether kumaco writes `reason`.
pub fn is_kumacos(reason: &str) -> bool {
    ALL.contains(&reason)
}

#[cfg(test)]
mod tests {
    use super::*;

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
