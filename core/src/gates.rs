//! Health gates: what the cluster shows beyond a node that keeps it from starting now,
//! and the pause a person can put on every start.
//!
//! A gate only ever holds back a new start; it never ends a maintenance in progress
//! (finish what was started: a reboot often raises the very alerts a gate reads). Each
//! gate's verdict is a function of what kumaco reads (the budgets and the node's pods,
//! alerts, objects) and the clock, and shows on the node as a reason of its own with a
//! message naming the cause:
//!
//! - **the pause** (`kumaco pause`): no start while it is on (`Paused`);
//! - **object checks**: a CEL expression over a Kubernetes object that must hold before
//!   any start (`HealthCheckFailed`);
//! - **alerts and queries**: a firing alert or a non-empty query result holds every
//!   start, or, when it names a node, that node's (`AlertFiring`);
//! - **PodDisruptionBudgets** ([`crate::budgets`]): a node starts only if every pod a
//!   drain would evict can be evicted now (`PodDisruptionBudget`).
//!
//! **One failure policy** for every gate ([`unavailable`]): what a gate reads may be
//! missing or wrong at any time (a CustomResourceDefinition deleted, a right revoked,
//! Alertmanager down, a query Prometheus rejects). A source that cannot be read holds
//! every start with `GateUnavailable`, its message naming the source and the answer,
//! once its last good reading is older than the gate's staleness bound (at once if it
//! was never read). Only an outage ([`Failure::Unreachable`]) may be let through, and
//! only where the deployer chose so (`--alerts-unreachable=allow`): an answer that says
//! kumaco is misconfigured (401, 403, 404, TLS, an answer that does not decode) is never
//! taken for an outage. Nothing a source does ends a maintenance or stops kumaco.
//!
//! **Order on the node.** A node shows the first hold that applies, in [`Gate`] order:
//! the pause first (before any other reason a waiting node gives), then the blocking
//! pods' source, the object checks, the alerts, the queries and the budgets; within a
//! gate, its sources in the order of their flags. A gate whose source cannot be read
//! shows its `GateUnavailable` in its own place.
//!
//! The shell reads the sources and hands the pass their verdicts as [`Holds`]. The
//! budgets are decided in the pass, because their headroom is shared between the nodes
//! a pass starts.

use std::collections::{BTreeMap, HashMap};

use jiff::{SignedDuration, Timestamp};

use crate::budgets::Budgets;
use crate::reasons;

/// The gates, in the order their holds show on a waiting node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gate {
    /// A person's `kumaco pause`: shown before any other reason a waiting node gives.
    Pause,
    /// `--block-pod-selector`'s pods: a rule of the node's, but read like a gate's
    /// source, and held by the same policy when they cannot be read.
    BlockingPods,
    /// `--block-unless`.
    ObjectChecks,
    /// `--block-alerts`: Alertmanager's firing alerts.
    Alerts,
    /// `--block-query`: Prometheus queries.
    Queries,
    /// `--pod-disruption-budgets`.
    PodDisruptionBudgets,
}

impl Gate {
    pub const ALL: [Gate; 6] = [
        Gate::Pause,
        Gate::BlockingPods,
        Gate::ObjectChecks,
        Gate::Alerts,
        Gate::Queries,
        Gate::PodDisruptionBudgets,
    ];

    /// The gate as the metrics' `gate` label names it.
    pub fn name(self) -> &'static str {
        match self {
            Gate::Pause => "pause",
            Gate::BlockingPods => "blocking-pods",
            Gate::ObjectChecks => "object-checks",
            Gate::Alerts => "alerts",
            Gate::Queries => "queries",
            Gate::PodDisruptionBudgets => "pod-disruption-budgets",
        }
    }
}

/// A gate's verdict against a start: the reason and message the node shows while it
/// waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// One of [`crate::reasons`]' gate reasons.
    pub reason: &'static str,
    pub message: String,
}

/// One source's verdict, from its last good reading: a hold on every start, and holds
/// on some nodes' starts, by node name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub cluster: Option<Hold>,
    pub nodes: BTreeMap<String, Hold>,
}

/// Why a read of a source failed, as the failure policy and the metrics tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Failure {
    /// No answer: a connection refused or lost, a timeout, a 5xx. An outage, which
    /// `--alerts-unreachable=allow` lets the alerts gate go through.
    Unreachable,
    /// 401 or 403: a right or a credential is missing.
    Forbidden,
    /// 404: what is read does not exist (a CustomResourceDefinition not installed, a
    /// URL's path wrong).
    NotFound,
    /// Any other answer kumaco cannot use: another 4xx, a TLS failure, an answer that
    /// does not decode, a query Prometheus rejects, a secret file that cannot be read, a
    /// kind served in another scope than the check names.
    Invalid,
}

impl Failure {
    pub const ALL: [Failure; 4] = [
        Failure::Unreachable,
        Failure::Forbidden,
        Failure::NotFound,
        Failure::Invalid,
    ];

    /// As the metrics' `cause` and `result` labels name it.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Unreachable => "unreachable",
            Failure::Forbidden => "forbidden",
            Failure::NotFound => "not-found",
            Failure::Invalid => "invalid",
        }
    }

    /// The failure of an HTTP answer's status (200 is no failure; the caller does not
    /// ask).
    pub fn of_status(status: u16) -> Failure {
        match status {
            401 | 403 => Failure::Forbidden,
            404 => Failure::NotFound,
            429 | 500.. => Failure::Unreachable,
            _ => Failure::Invalid,
        }
    }
}

/// A failed read: why, and a sentence naming what was asked and what was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceError {
    pub failure: Failure,
    pub message: String,
}

/// How the reads of one source stand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// When the source was last read without an error.
    pub last_good: Option<Timestamp>,
    /// While it fails: the latest error, and when the failing began.
    pub failing: Option<Failing>,
}

/// A source failing since `since`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    pub error: SourceError,
    pub since: Timestamp,
}

impl Health {
    /// A good read at `now`.
    pub fn ok(&mut self, now: Timestamp) {
        self.last_good = Some(now);
        self.failing = None;
    }

    /// A failed read at `now`.
    pub fn failed(&mut self, error: SourceError, now: Timestamp) {
        let since = self.failing.as_ref().map_or(now, |f| f.since);
        self.failing = Some(Failing { error, since });
    }
}

/// How a gate treats its source's failures: the deployer's choices and the source's
/// nature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePolicy {
    /// How long the last good reading stands once the source fails.
    pub stale_after: SignedDuration,
    /// Whether an outage ([`Failure::Unreachable`]) lets starts through
    /// (`--alerts-unreachable=allow`).
    pub allow_unreachable: bool,
}

/// The hold on every start because `what` (a phrase: `the PodDisruptionBudgets`)
/// cannot be read, if the failure policy calls for one at `now`: a source never read
/// holds at once; a failing one once it has failed for `stale_after`; an outage not at
/// all where the deployer allows it.
pub fn unavailable(
    what: &str,
    health: &Health,
    policy: &SourcePolicy,
    now: Timestamp,
) -> Option<Hold> {
    let failing = health.failing.as_ref();
    let stands = match (failing, health.last_good) {
        (None, Some(_)) => true,
        (Some(f), Some(_)) => now.duration_since(f.since) < policy.stale_after,
        (_, None) => false,
    };
    if stands {
        return None;
    }
    let message = match failing {
        Some(f) if f.error.failure == Failure::Unreachable && policy.allow_unreachable => {
            return None;
        }
        Some(f) => format!(
            "{what} cannot be read ({}), so no maintenance starts: {}",
            f.error.failure.name(),
            f.error.message
        ),
        None => format!("{what} cannot be read yet, so no maintenance starts"),
    };
    Some(Hold {
        reason: reasons::GATE_UNAVAILABLE,
        message: crate::conditions::bounded(message, MAX_UNAVAILABLE_BYTES),
    })
}

/// When [`unavailable`]'s answer changes next by the clock alone: the failing source's
/// reading goes stale.
pub fn next_change(health: &Health, policy: &SourcePolicy, now: Timestamp) -> Option<Timestamp> {
    let f = health.failing.as_ref()?;
    health.last_good?;
    f.since
        .checked_add(policy.stale_after)
        .ok()
        .filter(|t| *t > now)
}

/// The longest `GateUnavailable` message, in bytes: the answers quoted in it come from
/// outside.
const MAX_UNAVAILABLE_BYTES: usize = 512;

/// Every gate's holds as one pass reads them, each list in [`Gate`] order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// The pause (`Paused`), or its source that cannot be read.
    pub pause: Option<Hold>,
    /// Holds on every start.
    pub cluster: Vec<Hold>,
    /// Holds on one node's start, by node name.
    pub nodes: HashMap<String, Vec<Hold>>,
}

impl Holds {
    /// Adds `gate`'s verdict after those of the gates before it.
    pub fn add(&mut self, gate: Gate, verdict: Verdict) {
        if let Some(hold) = verdict.cluster {
            match gate {
                Gate::Pause => {
                    self.pause.get_or_insert(hold);
                }
                _ => self.cluster.push(hold),
            }
        }
        for (node, hold) in verdict.nodes {
            self.nodes.entry(node).or_default().push(hold);
        }
    }

    /// The gates as a pass reads them, with the budgets.
    pub fn gates<'a>(&'a self, budgets: Option<&'a Budgets>) -> Gates<'a> {
        Gates {
            pause: self.pause.as_ref(),
            cluster: &self.cluster,
            budgets,
        }
    }
}

/// The gates' verdicts a pass reads, beyond each node's own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gates<'a> {
    /// The pause: no start, every waiting node saying so, before any other reason.
    pub pause: Option<&'a Hold>,
    /// Verdicts holding every start: an alert naming no node, an object check that does
    /// not hold, a source that cannot be read. The first one is shown.
    pub cluster: &'a [Hold],
    /// The PodDisruptionBudgets, when that gate is on (`--pod-disruption-budgets`).
    pub budgets: Option<&'a Budgets>,
}

impl Gates<'_> {
    /// No gate: every start is up to the node and the slots.
    pub const NONE: Gates<'static> = Gates {
        pause: None,
        cluster: &[],
        budgets: None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ts;

    fn error(failure: Failure) -> SourceError {
        SourceError {
            failure,
            message: "http://am:9093/api/v2/alerts: HTTP 404: not found".into(),
        }
    }

    const POLLED: SourcePolicy = SourcePolicy {
        stale_after: SignedDuration::from_secs(30),
        allow_unreachable: false,
    };

    #[test]
    fn a_source_never_read_holds_at_once() {
        let h = Health::default();
        let hold = unavailable(
            "the alerts of Alertmanager",
            &h,
            &POLLED,
            ts("2026-01-01T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(hold.reason, reasons::GATE_UNAVAILABLE);
        assert_eq!(
            hold.message,
            "the alerts of Alertmanager cannot be read yet, so no maintenance starts"
        );
        let mut failed = Health::default();
        failed.failed(error(Failure::NotFound), ts("2026-01-01T00:00:00Z"));
        let hold = unavailable(
            "the alerts of Alertmanager",
            &failed,
            &POLLED,
            ts("2026-01-01T00:00:00Z"),
        )
        .unwrap();
        assert_eq!(
            hold.message,
            "the alerts of Alertmanager cannot be read (not-found), so no maintenance starts: \
             http://am:9093/api/v2/alerts: HTTP 404: not found"
        );
    }

    #[test]
    fn a_failing_source_holds_once_its_reading_is_stale() {
        let mut h = Health::default();
        h.ok(ts("2026-01-01T00:00:00Z"));
        h.failed(error(Failure::Forbidden), ts("2026-01-01T00:00:10Z"));
        h.failed(error(Failure::Forbidden), ts("2026-01-01T00:00:20Z"));
        assert_eq!(
            unavailable("x", &h, &POLLED, ts("2026-01-01T00:00:39Z")),
            None
        );
        assert_eq!(
            next_change(&h, &POLLED, ts("2026-01-01T00:00:39Z")),
            Some(ts("2026-01-01T00:00:40Z")),
            "stale 30 s after the failing began, not after the latest error"
        );
        assert!(unavailable("x", &h, &POLLED, ts("2026-01-01T00:00:40Z")).is_some());
        h.ok(ts("2026-01-01T00:00:50Z"));
        assert_eq!(
            unavailable("x", &h, &POLLED, ts("2026-01-01T00:00:50Z")),
            None
        );
        assert_eq!(next_change(&h, &POLLED, ts("2026-01-01T00:00:50Z")), None);
    }

    #[test]
    fn only_an_outage_is_let_through_and_only_when_allowed() {
        let allow = SourcePolicy {
            allow_unreachable: true,
            ..POLLED
        };
        for failure in Failure::ALL {
            let mut h = Health::default();
            h.failed(error(failure), ts("2026-01-01T00:00:00Z"));
            let now = ts("2026-01-01T00:10:00Z");
            assert!(unavailable("x", &h, &POLLED, now).is_some(), "{failure:?}");
            assert_eq!(
                unavailable("x", &h, &allow, now).is_none(),
                failure == Failure::Unreachable,
                "{failure:?}: a misconfiguration is not an outage"
            );
        }
    }

    #[test]
    fn statuses_map_to_failures() {
        assert_eq!(Failure::of_status(401), Failure::Forbidden);
        assert_eq!(Failure::of_status(403), Failure::Forbidden);
        assert_eq!(Failure::of_status(404), Failure::NotFound);
        assert_eq!(Failure::of_status(400), Failure::Invalid);
        assert_eq!(Failure::of_status(422), Failure::Invalid);
        assert_eq!(Failure::of_status(429), Failure::Unreachable);
        assert_eq!(Failure::of_status(503), Failure::Unreachable);
    }

    #[test]
    fn holds_keep_the_gates_order_and_the_pause_apart() {
        let hold = |m: &str| Hold {
            reason: reasons::ALERT_FIRING,
            message: m.into(),
        };
        let mut holds = Holds::default();
        holds.add(
            Gate::Pause,
            Verdict {
                cluster: Some(Hold {
                    reason: reasons::PAUSED,
                    message: "p".into(),
                }),
                nodes: BTreeMap::new(),
            },
        );
        holds.add(
            Gate::ObjectChecks,
            Verdict {
                cluster: Some(hold("c")),
                nodes: BTreeMap::new(),
            },
        );
        holds.add(
            Gate::Alerts,
            Verdict {
                cluster: Some(hold("a")),
                nodes: BTreeMap::from([("n".to_string(), hold("an"))]),
            },
        );
        assert_eq!(holds.pause.as_ref().unwrap().message, "p");
        assert_eq!(holds.cluster, [hold("c"), hold("a")]);
        assert_eq!(holds.nodes["n"], [hold("an")]);
        let mut sorted = Gate::ALL;
        sorted.sort();
        assert_eq!(sorted, Gate::ALL, "ALL lists the gates in their order");
    }
}
