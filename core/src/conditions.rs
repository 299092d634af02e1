//! The node conditions kumaco reads and owns, in kumaco's own small type, and the rule
//! for writing them.
//!
//! kumaco writes with server-side apply on `nodes/status`. `status.conditions` is a map
//! list keyed by `type`, so a field manager owns exactly the condition entries it applied
//! and every apply must carry all of them: an entry left out is deleted. The API server
//! does not compute `lastTransitionTime`; the writer must carry the old one forward when
//! the status is unchanged, or every apply would look like a transition.
//!
//! The core knows conditions only as [`Condition`]; the shell converts from and to the
//! API's JSON at its edge (`node` decodes, `controller` encodes).

use jiff::Timestamp;

/// True while the node is selected by an active maintenance window.
pub const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
/// KEP-5683 (alpha in Kubernetes 1.37): the node may be disrupted now.
pub const MAINTENANCE_IN_PROGRESS: &str = "MaintenanceInProgress";
/// KEP-5683 (alpha in Kubernetes 1.37): maintenance will start soon.
pub const MAINTENANCE_PLANNED: &str = "MaintenancePlanned";

/// Longest condition message kumaco writes, in bytes. A window's description is copied
/// into messages; without a bound, one ConfigMap could grow every node it selects (and
/// kumaco's cache of them) by up to a megabyte.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// A condition's status. Anything other than `True` or `False` (`Unknown`, or text that
/// is not a status at all) counts as neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn from_api(s: &str) -> Status {
        match s {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

impl From<bool> for Status {
    fn from(b: bool) -> Status {
        if b { Status::True } else { Status::False }
    }
}

/// A node condition as kumaco reads and writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    pub type_: String,
    pub status: Status,
    pub reason: String,
    pub message: String,
    pub last_transition_time: Option<Timestamp>,
    /// When its writer last confirmed it (a reporter refreshes it while the status holds).
    /// Read only to tell a requirement confirmed after a reboot from a stale one
    /// (`in_progress`); kumaco never writes it, so its own conditions have none.
    pub last_heartbeat_time: Option<Timestamp>,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == Status::True
    }

    /// Whether its writer set or confirmed it after `t`: its `lastTransitionTime` or
    /// `lastHeartbeatTime` is later.
    pub fn confirmed_after(&self, t: Timestamp) -> bool {
        self.last_transition_time.max(self.last_heartbeat_time) > Some(t)
    }
}

/// Whether two versions of a node's conditions differ in more than their heartbeats.
pub fn differ_beyond_heartbeats(a: &[Condition], b: &[Condition]) -> bool {
    a.len() != b.len()
        || a.iter().zip(b).any(|(x, y)| {
            (
                &x.type_,
                x.status,
                &x.reason,
                &x.message,
                x.last_transition_time,
            ) != (
                &y.type_,
                y.status,
                &y.reason,
                &y.message,
                y.last_transition_time,
            )
        })
}

/// The condition of `type_` in `conditions`, if the node has one.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the node carries `type_` with status True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(Condition::is_true)
}

/// The condition kumaco wants on a node, before timestamps are decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl Desired {
    /// A condition kumaco decides, its message bounded to [`MAX_MESSAGE_BYTES`].
    pub fn new(type_: &str, status: bool, reason: &str, message: String) -> Desired {
        Desired {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: bounded(message, MAX_MESSAGE_BYTES),
        }
    }

    /// The desired form of a condition that should stay exactly as it is.
    pub fn keep(c: &Condition) -> Desired {
        Desired {
            type_: c.type_.clone(),
            status: c.is_true(),
            reason: c.reason.clone(),
            message: c.message.clone(),
        }
    }
}

/// Builds the condition to apply: `lastTransitionTime` is kept from `existing` when the
/// status does not change, else set to `now` (truncated to seconds, the API's precision,
/// so that the value read back compares equal).
pub fn to_apply(desired: &Desired, existing: Option<&Condition>, now: Timestamp) -> Condition {
    let status = Status::from(desired.status);
    let last_transition_time = match existing {
        Some(c) if c.status == status && c.last_transition_time.is_some() => c.last_transition_time,
        _ => Some(Timestamp::from_second(now.as_second()).unwrap_or(now)),
    };
    Condition {
        type_: desired.type_.clone(),
        status,
        reason: desired.reason.clone(),
        message: desired.message.clone(),
        last_transition_time,
        last_heartbeat_time: None,
    }
}

/// Whether applying `desired` would change what the node already shows (so an apply is
/// needed at all).
pub fn differs(desired: &Desired, existing: Option<&Condition>) -> bool {
    match existing {
        None => true,
        Some(c) => {
            c.status != Status::from(desired.status)
                || c.reason != desired.reason
                || c.message != desired.message
                || c.last_transition_time.is_none()
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary, the cut marked with `…`.
pub fn bounded(mut s: String, max: usize) -> String {
    const MARK: &str = "…";
    if s.len() <= max {
        return s;
    }
    let mut cut = max.saturating_sub(MARK.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str(MARK);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ts;

    fn desired(status: bool, message: &str) -> Desired {
        Desired::new(
            UNDER_MAINTENANCE,
            status,
            "MaintenanceWindow",
            message.into(),
        )
    }

    #[test]
    fn new_condition_transitions_now_truncated_to_seconds() {
        let c = to_apply(&desired(true, "m"), None, ts("2026-01-01T00:00:00.9Z"));
        assert_eq!(c.last_transition_time, Some(ts("2026-01-01T00:00:00Z")));
        assert_eq!(c.status, Status::True);
    }

    #[test]
    fn unchanged_status_keeps_transition_time() {
        let old = to_apply(&desired(true, "a"), None, ts("2026-01-01T00:00:00Z"));
        let c = to_apply(&desired(true, "b"), Some(&old), ts("2026-01-02T00:00:00Z"));
        assert_eq!(c.last_transition_time, old.last_transition_time);
        assert_eq!(c.message, "b");
    }

    #[test]
    fn changed_status_moves_transition_time() {
        let old = to_apply(&desired(true, "a"), None, ts("2026-01-01T00:00:00Z"));
        let c = to_apply(&desired(false, "a"), Some(&old), ts("2026-01-02T00:00:00Z"));
        assert_eq!(c.last_transition_time, Some(ts("2026-01-02T00:00:00Z")));
    }

    #[test]
    fn differs_only_on_visible_change() {
        let old = to_apply(&desired(true, "a"), None, ts("2026-01-01T00:00:00Z"));
        assert!(!differs(&desired(true, "a"), Some(&old)));
        assert!(differs(&desired(true, "b"), Some(&old)));
        assert!(differs(&desired(false, "a"), Some(&old)));
        assert!(differs(&desired(true, "a"), None));
    }

    #[test]
    fn messages_are_bounded_and_the_cut_is_marked() {
        let d = desired(true, &"é".repeat(2000));
        assert!(d.message.len() <= MAX_MESSAGE_BYTES);
        assert!(d.message.ends_with('…'));
        assert_eq!(bounded("short".into(), 10), "short");
    }
}
