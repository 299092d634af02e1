//! The node conditions kumaco owns, and the rule for writing them.
//!
//! kumaco writes with server-side apply on `nodes/status`. `status.conditions` is a map
//! list keyed by `type`, so a field manager owns exactly the condition entries it applied
//! and every apply must carry all of them: an entry left out is deleted. The API server
//! does not compute `lastTransitionTime`; the writer must carry the old one forward when
//! the status is unchanged, or every apply would look like a transition.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// True while the node is selected by an active maintenance window.
pub const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
/// Standard (KEP-5683): the node may be disrupted now.
pub const MAINTENANCE_IN_PROGRESS: &str = "MaintenanceInProgress";
/// Standard (KEP-5683): maintenance will start soon.
pub const MAINTENANCE_PLANNED: &str = "MaintenancePlanned";

/// The condition kumaco wants on a node, before timestamps are decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl Desired {
    /// The desired form of a condition that should stay exactly as it is.
    pub fn keep(c: &NodeCondition) -> Desired {
        Desired {
            type_: c.type_.clone(),
            status: c.status == "True",
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
        }
    }
}

/// Builds the condition to apply: `lastTransitionTime` is kept from `existing` when the
/// status does not change, else set to `now` (truncated to seconds, the API's precision,
/// so that the value read back compares equal). `lastHeartbeatTime` is never written:
/// kumaco writes nothing in steady state.
pub fn to_apply(
    desired: &Desired,
    existing: Option<&NodeCondition>,
    now: Timestamp,
) -> NodeCondition {
    let status = if desired.status { "True" } else { "False" };
    let last_transition_time = match existing {
        Some(c) if c.status == status && c.last_transition_time.is_some() => {
            c.last_transition_time.clone()
        }
        _ => Some(Time(Timestamp::from_second(now.as_second()).unwrap_or(now))),
    };
    NodeCondition {
        type_: desired.type_.clone(),
        status: status.to_string(),
        reason: Some(desired.reason.clone()),
        message: Some(desired.message.clone()),
        last_transition_time,
        last_heartbeat_time: None,
    }
}

/// Whether applying `desired` would change what the node already shows (so an apply is
/// needed at all).
pub fn differs(desired: &Desired, existing: Option<&NodeCondition>) -> bool {
    let status = if desired.status { "True" } else { "False" };
    match existing {
        None => true,
        Some(c) => {
            c.status != status
                || c.reason.as_deref() != Some(desired.reason.as_str())
                || c.message.as_deref() != Some(desired.message.as_str())
                || c.last_transition_time.is_none()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired(status: bool, message: &str) -> Desired {
        Desired {
            type_: UNDER_MAINTENANCE.into(),
            status,
            reason: "MaintenanceWindow".into(),
            message: message.into(),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn new_condition_transitions_now_truncated_to_seconds() {
        let c = to_apply(&desired(true, "m"), None, ts("2026-01-01T00:00:00.9Z"));
        assert_eq!(
            c.last_transition_time,
            Some(Time(ts("2026-01-01T00:00:00Z")))
        );
        assert_eq!(c.status, "True");
        assert_eq!(c.last_heartbeat_time, None);
    }

    #[test]
    fn unchanged_status_keeps_transition_time() {
        let old = to_apply(&desired(true, "a"), None, ts("2026-01-01T00:00:00Z"));
        let c = to_apply(&desired(true, "b"), Some(&old), ts("2026-01-02T00:00:00Z"));
        assert_eq!(c.last_transition_time, old.last_transition_time);
        assert_eq!(c.message.as_deref(), Some("b"));
    }

    #[test]
    fn changed_status_moves_transition_time() {
        let old = to_apply(&desired(true, "a"), None, ts("2026-01-01T00:00:00Z"));
        let c = to_apply(&desired(false, "a"), Some(&old), ts("2026-01-02T00:00:00Z"));
        assert_eq!(
            c.last_transition_time,
            Some(Time(ts("2026-01-02T00:00:00Z")))
        );
    }

    #[test]
    fn differs_only_on_visible_change() {
        let old = to_apply(&desired(true, "a"), None, ts("2026-01-01T00:00:00Z"));
        assert!(!differs(&desired(true, "a"), Some(&old)));
        assert!(differs(&desired(true, "b"), Some(&old)));
        assert!(differs(&desired(false, "a"), Some(&old)));
        assert!(differs(&desired(true, "a"), None));
    }
}
