//! Other kumaco instances on the same nodes: which field managers are kumaco's, which of
//! them belong to an instance that is running, and the rules that keep two instances
//! from undoing each other (docs/design.md, Several instances).
//!
//! Everything here is read from the cluster: who owns a condition (the node's
//! `managedFields`: the manager that owns a condition's `status`), when each manager last
//! changed the node's status (the `time` of its `managedFields` entry), and whether the
//! Lease an instance's field manager names is held. Nothing is remembered.
//!
//! - **Recognising kumaco.** A field manager is kumaco's when it is `kumaco` (the default
//!   of versions before 0.1, which no running instance uses any more) or starts with
//!   `kumaco/`. The default `kumaco/<namespace>/<lease name>` names the instance's Lease,
//!   which tells whether it runs; any other form cannot be checked and counts as stale.
//! - **Live or stale.** An instance is live while the Lease its manager names has a
//!   holder and was renewed less than its duration plus [`LIVENESS_GRACE`] ago. A deleted
//!   instance (its Lease released or gone), a renamed one and the old default are stale:
//!   their conditions are neither deferred to nor reported as a contest.
//! - **Giving a node up.** Out of its scope, an instance gives up each condition it owns:
//!   where a live kumaco instance owns it too, by dropping its own ownership (the other's
//!   value stays); otherwise by setting it False (`NodeOutOfScope`), as a sole owner.
//!   Either is final, so it is decided only on a copy of the co-owners' Leases read less
//!   than [`FRESH`] ago (the pass asks for one and waits).
//! - **Claiming.** In scope, an instance that agrees with what the node shows but does not
//!   own a condition another kumaco manager owns applies it unchanged, becoming a
//!   co-owner: when the other instance later lets the node go, it sees a live co-owner
//!   and drops its ownership instead of setting the condition False under this one.
//! - **The bound.** A write that changes a condition another manager owns, and that
//!   manager changed the node's status since this instance's last change, is made at
//!   most once per resync interval ([`rewrite_allowed_at`]). Two instances of differing
//!   opinion then write each at most once per resync, never in a loop.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};

/// The condition types kumaco writes: the only ones whose other owners matter here.
pub const KUMACO_TYPES: [&str; 3] = [
    UNDER_MAINTENANCE,
    MAINTENANCE_IN_PROGRESS,
    MAINTENANCE_PLANNED,
];

/// The field manager of kumaco versions before per-instance managers.
pub const LEGACY_MANAGER: &str = "kumaco";
const MANAGER_PREFIX: &str = "kumaco/";

/// How long past its own duration a held Lease still counts: covers the age of the copy
/// kumaco reads (re-read every `peer_leases::REFRESH`, in the shell) and differences
/// between the machines' clocks.
pub const LIVENESS_GRACE: SignedDuration = SignedDuration::from_secs(15);

/// The age of the copy of a co-owner's Lease below which giving a node up may rely on it.
pub const FRESH: SignedDuration = SignedDuration::from_secs(5);

/// What one field manager owns of a node's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub manager: String,
    /// The condition types whose `status` it owns, sorted.
    pub types: Vec<String>,
    /// When it last changed the node's status (its `managedFields` entry's `time`).
    pub time: Option<Timestamp>,
}

impl Owner {
    pub fn owns(&self, type_: &str) -> bool {
        self.types.iter().any(|t| t == type_)
    }
}

/// Whether `manager` is a kumaco instance's field manager.
pub fn is_kumaco(manager: &str) -> bool {
    manager == LEGACY_MANAGER || manager.starts_with(MANAGER_PREFIX)
}

/// A Lease, by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The Lease a kumaco field manager of the default form `kumaco/<namespace>/<lease>`
/// names; `None` for any other form.
pub fn lease_of(manager: &str) -> Option<LeaseRef> {
    let rest = manager.strip_prefix(MANAGER_PREFIX)?;
    let (namespace, name) = rest.split_once('/')?;
    let label = |s: &str, max: usize, dots: bool| {
        !s.is_empty()
            && s.len() <= max
            && s.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || (dots && b == b'.')
            })
            && !s.starts_with(['-', '.'])
            && !s.ends_with(['-', '.'])
    };
    (label(namespace, 63, false) && label(name, 253, true)).then(|| LeaseRef {
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// A Lease as last read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseRead {
    /// The Lease does not exist.
    Missing,
    /// kumaco may not read it (403): the instance is taken for live, so that an instance
    /// kumaco cannot see is never overruled.
    Forbidden,
    /// Whether it has a holder (a released Lease has none), its last renewal (or
    /// acquisition) and its duration.
    Found {
        held: bool,
        renewed: Option<Timestamp>,
        duration: SignedDuration,
    },
}

/// Whether a kumaco instance runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Live,
    Stale,
    /// Its Lease has not been read yet: decisions that depend on it wait.
    Unknown,
}

/// The Leases of the kumaco instances seen on the nodes, as last read, and when.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peers {
    pub leases: BTreeMap<LeaseRef, (LeaseRead, Timestamp)>,
}

impl Peers {
    /// Whether the kumaco instance of `manager` runs at `now`.
    pub fn liveness(&self, manager: &str, now: Timestamp) -> Liveness {
        let Some(lease) = lease_of(manager) else {
            return Liveness::Stale;
        };
        match self.leases.get(&lease).map(|(read, _)| read) {
            None => Liveness::Unknown,
            Some(LeaseRead::Missing) => Liveness::Stale,
            Some(LeaseRead::Forbidden) => Liveness::Live,
            Some(LeaseRead::Found { .. }) => match self.stale_at(&lease) {
                Some(t) if now < t => Liveness::Live,
                _ => Liveness::Stale,
            },
        }
    }

    /// Whether the copy of `manager`'s Lease was read less than [`FRESH`] ago (a manager
    /// that names no Lease needs none).
    pub fn fresh(&self, manager: &str, now: Timestamp) -> bool {
        let Some(lease) = lease_of(manager) else {
            return true;
        };
        self.leases
            .get(&lease)
            .is_some_and(|(_, at)| now.duration_since(*at) < FRESH)
    }

    /// When a Lease read as held stops counting as held, unless renewed meanwhile.
    pub fn stale_at(&self, lease: &LeaseRef) -> Option<Timestamp> {
        match &self.leases.get(lease)?.0 {
            LeaseRead::Found {
                held: true,
                renewed: Some(renewed),
                duration,
            } => renewed
                .checked_add(*duration)
                .and_then(|t| t.checked_add(LIVENESS_GRACE))
                .ok(),
            _ => None,
        }
    }

    /// The next instant after `now` at which a Lease read as held stops counting.
    pub fn next_change(&self, now: Timestamp) -> Option<Timestamp> {
        self.leases
            .keys()
            .filter_map(|l| self.stale_at(l))
            .filter(|t| *t > now)
            .min()
    }
}

/// The bound on rewriting what another manager wrote: `None` if this instance may write
/// now, else the instant it may. `ours` is when this instance last changed the node's
/// status; `others` the managers owning a condition the write changes.
///
/// A contest exists when another owner changed the node at or after this instance's
/// last change (times are whole seconds: a tie counts as a contest). This instance then
/// writes once its own last change is a resync interval old: each side writes at most
/// once per interval, whatever the two want.
pub fn rewrite_allowed_at<'a>(
    ours: Option<Timestamp>,
    others: impl IntoIterator<Item = &'a Owner>,
    resync: SignedDuration,
    now: Timestamp,
) -> Option<Timestamp> {
    let ours = ours?;
    let contested = others
        .into_iter()
        .any(|o| o.time.is_some_and(|t| t >= ours));
    let allowed = ours.checked_add(resync).unwrap_or(Timestamp::MAX);
    (contested && now < allowed).then_some(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ts;

    #[test]
    fn kumaco_managers_and_their_leases() {
        assert!(is_kumaco("kumaco"));
        assert!(is_kumaco("kumaco/ops/kumaco"));
        assert!(!is_kumaco("kumaco-zone-a"));
        assert!(!is_kumaco("kubelet"));
        assert_eq!(
            lease_of("kumaco/ops/pool-a"),
            Some(LeaseRef {
                namespace: "ops".into(),
                name: "pool-a".into()
            })
        );
        for other in [
            "kumaco",
            "kumaco/ops",
            "kumaco//x",
            "kumaco/ops/a/b",
            "kumaco/Ops/x",
            "kumaco/ops/-x",
            "kubelet/ops/x",
        ] {
            assert_eq!(lease_of(other), None, "{other}");
        }
        assert!(lease_of("kumaco/ops/a.b-c").is_some());
    }

    #[test]
    fn an_instance_lives_while_its_lease_is_renewed() {
        let lease = lease_of("kumaco/ops/a").unwrap();
        let mut peers = Peers::default();
        let now = ts("2026-01-01T00:01:00Z");
        assert_eq!(peers.liveness("kumaco/ops/a", now), Liveness::Unknown);
        let found = |held| LeaseRead::Found {
            held,
            renewed: Some(ts("2026-01-01T00:00:50Z")),
            duration: SignedDuration::from_secs(15),
        };
        peers.leases.insert(lease.clone(), (found(true), now));
        assert_eq!(peers.liveness("kumaco/ops/a", now), Liveness::Live);
        assert!(peers.fresh("kumaco/ops/a", now));
        assert!(!peers.fresh("kumaco/ops/a", ts("2026-01-01T00:01:05Z")));
        // Not renewed for its duration plus the grace: stale, and the pass knows when.
        assert_eq!(peers.next_change(now), Some(ts("2026-01-01T00:01:20Z")));
        assert_eq!(
            peers.liveness("kumaco/ops/a", ts("2026-01-01T00:01:20Z")),
            Liveness::Stale
        );
        // Released: its instance stopped, whatever the times say.
        peers.leases.insert(lease.clone(), (found(false), now));
        assert_eq!(peers.liveness("kumaco/ops/a", now), Liveness::Stale);
        peers
            .leases
            .insert(lease.clone(), (LeaseRead::Missing, now));
        assert_eq!(peers.liveness("kumaco/ops/a", now), Liveness::Stale);
        peers.leases.insert(lease, (LeaseRead::Forbidden, now));
        assert_eq!(peers.liveness("kumaco/ops/a", now), Liveness::Live);
        // The old default and other forms name no Lease: never live.
        assert_eq!(peers.liveness("kumaco", now), Liveness::Stale);
        assert_eq!(peers.liveness("kumaco/custom", now), Liveness::Stale);
    }

    #[test]
    fn a_contested_rewrite_waits_for_a_resync_since_our_last_change() {
        let resync = SignedDuration::from_mins(5);
        let other = |t: &str| Owner {
            manager: "kumaco/ops/b".into(),
            types: vec![UNDER_MAINTENANCE.into()],
            time: Some(ts(t)),
        };
        let ours = Some(ts("2026-01-01T00:00:00Z"));
        let now = ts("2026-01-01T00:01:00Z");
        // The other changed it after us: not before 00:05.
        assert_eq!(
            rewrite_allowed_at(ours, [&other("2026-01-01T00:00:30Z")], resync, now),
            Some(ts("2026-01-01T00:05:00Z"))
        );
        // A tie is a contest too; at 00:05 the write is allowed.
        assert!(rewrite_allowed_at(ours, [&other("2026-01-01T00:00:00Z")], resync, now).is_some());
        assert_eq!(
            rewrite_allowed_at(
                ours,
                [&other("2026-01-01T00:00:30Z")],
                resync,
                ts("2026-01-01T00:05:00Z")
            ),
            None
        );
        // The other's change is older than ours, or we never wrote: no bound.
        assert_eq!(
            rewrite_allowed_at(ours, [&other("2025-12-31T23:00:00Z")], resync, now),
            None
        );
        assert_eq!(
            rewrite_allowed_at(None, [&other("2026-01-01T00:00:30Z")], resync, now),
            None
        );
    }
}
