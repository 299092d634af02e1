//! Every health gate's source, in one shape: a task of its own reads it (a watch, or a
//! poll every interval) and records each outcome in its [`Source`]: what it read
//! ([`Reading`]), or why it failed ([`crate::gates::SourceError`]). A pass asks
//! [`Sources::holds`] for every gate's holds now, from those outcomes, the nodes and the
//! clock, by the one failure policy ([`crate::gates::unavailable`]): a source that
//! cannot be read holds every start once its reading is stale, names itself and the
//! answer on the node, and is counted in the metrics; nothing a source does stops kumaco
//! or ends a maintenance. Nothing is remembered beyond each source's latest reading and
//! its health. The sources themselves are in [`super::gates`] and [`super::pods`].

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use tokio::sync::Notify;

use crate::alerts::{Firing, Scope};
use crate::gates::{self, Gate, Health, Holds, SourceError, SourcePolicy, Verdict};
use crate::metrics::Metrics;
use crate::metrics::NOT_READ;
use crate::node::SlimNode;
use crate::selector::{Labels, Selector};
use crate::silence::MatcherSet;

/// What a source read last, in the form a pass turns into holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The holds themselves.
    Verdict(Verdict),
    /// Alerts or series that hold, whose nodes are found at each pass against the nodes
    /// in scope then: a node that joined since the read is not taken for none.
    Firing(Vec<Firing>),
}

impl Default for Reading {
    fn default() -> Self {
        Reading::Verdict(Verdict::default())
    }
}

/// One source's latest outcome.
struct Entry {
    gate: Gate,
    /// A phrase naming it in messages: `the PodDisruptionBudgets`.
    what: String,
    /// Appended to an error's message for a refusal (the right it needs) or a kind not
    /// served (what to install).
    hints: Hints,
    policy: SourcePolicy,
    health: Health,
    reading: Reading,
    /// Whether it has been read, or failed to be, since kumaco started: no pass runs
    /// before every source has an outcome.
    answered: bool,
}

/// What an error's message adds, by the failure.
#[derive(Clone, Debug, Default)]
pub struct Hints {
    /// For 401 and 403: the right kumaco needs, and where the chart or kustomize grants
    /// it.
    pub forbidden: Option<String>,
    /// For 404: what must be installed or corrected.
    pub not_found: Option<String>,
}

/// Every source's latest outcome, shared between the tasks that read them and the
/// passes. Cheap to clone.
#[derive(Clone)]
pub struct Sources {
    entries: Arc<Mutex<Vec<Entry>>>,
    /// Notified whenever a source has its first outcome.
    answered: Arc<Notify>,
    /// Wakes a pass when what a pass reads changed.
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
}

/// The handle a source's task records its outcomes with. Cheap to clone.
#[derive(Clone)]
pub struct Source {
    sources: Sources,
    index: usize,
    gate: Gate,
}

/// What [`Sources::holds`] needs to find whose start an alert holds.
pub struct NodesInScope<'a> {
    pub nodes: &'a [Arc<SlimNode>],
    pub scope: &'a Selector,
    /// The matcher sets that say which node an alert is about (the silences').
    pub sets: &'a [MatcherSet],
}

impl Sources {
    pub fn new(wake: Arc<Notify>, metrics: Arc<Metrics>) -> Sources {
        Sources {
            entries: Arc::default(),
            answered: Arc::new(Notify::new()),
            wake,
            metrics,
        }
    }

    /// Registers a source of `gate`; its task records what it reads through the handle.
    pub fn add(
        &self,
        gate: Gate,
        what: impl Into<String>,
        hints: Hints,
        policy: SourcePolicy,
    ) -> Source {
        let mut entries = self.lock();
        entries.push(Entry {
            gate,
            what: what.into(),
            hints,
            policy,
            health: Health::default(),
            reading: Reading::default(),
            answered: false,
        });
        Source {
            sources: self.clone(),
            index: entries.len() - 1,
            gate,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until every source has been read, or failed to be, once: no pass decides on
    /// a verdict not known yet. Each source's first outcome comes within its own
    /// timeouts, so this does not wait for ever on a source that cannot be read.
    pub async fn first_outcomes(&self) {
        loop {
            let notified = self.answered.notified();
            if self.lock().iter().all(|e| e.answered) {
                return;
            }
            notified.await;
        }
    }

    /// Every gate's holds at `now`, in gate order, and when they change next by the
    /// clock alone (a failing source's reading goes stale). Sets the gates' metrics.
    pub fn holds(&self, nodes: &NodesInScope<'_>, now: Timestamp) -> (Holds, Option<Timestamp>) {
        let entries = self.lock();
        let mut order: Vec<&Entry> = entries.iter().collect();
        order.sort_by_key(|e| e.gate);
        let firing = order
            .iter()
            .any(|e| matches!(&e.reading, Reading::Firing(f) if !f.is_empty()));
        // The nodes in scope, as the alerts are matched against them: built only when
        // some alert fires.
        let in_scope: Vec<(&str, &dyn Labels)> = if firing {
            nodes
                .nodes
                .iter()
                .filter(|n| nodes.scope.matches(&n.labels))
                .map(|n| {
                    let name = n.metadata.name.as_deref().unwrap_or_default();
                    (name, &n.labels as &dyn Labels)
                })
                .collect()
        } else {
            Vec::new()
        };
        let scope = Scope::new(nodes.sets, in_scope);
        let mut holds = Holds::default();
        let mut next: Option<Timestamp> = None;
        let mut by_gate: Vec<(Gate, bool, Option<&str>)> =
            Gate::ALL.iter().map(|&g| (g, false, None)).collect();
        for entry in order {
            if let Some(t) = gates::next_change(&entry.health, &entry.policy, now) {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
            let verdict = match gates::unavailable(&entry.what, &entry.health, &entry.policy, now) {
                Some(hold) => {
                    let cause = entry
                        .health
                        .failing
                        .as_ref()
                        .map_or(NOT_READ, |f| f.error.failure.name());
                    let slot = &mut by_gate[entry.gate as usize];
                    slot.2 = slot.2.or(Some(cause));
                    Verdict {
                        cluster: Some(hold),
                        nodes: Default::default(),
                    }
                }
                None => match &entry.reading {
                    Reading::Verdict(v) => v.clone(),
                    Reading::Firing(f) => crate::alerts::holding(entry.gate, f, &scope),
                },
            };
            by_gate[entry.gate as usize].1 |= verdict.cluster.is_some();
            holds.add(entry.gate, verdict);
        }
        for (gate, holding, cause) in by_gate {
            self.metrics.gates.holding(gate, holding, cause);
        }
        self.metrics.gates.paused.set(i64::from(
            holds
                .pause
                .as_ref()
                .is_some_and(|h| h.reason == crate::reasons::PAUSED),
        ));
        (holds, next)
    }
}

impl Source {
    fn update(&self, change: impl FnOnce(&mut Entry) -> bool) {
        let (changed, first) = {
            let mut entries = self.sources.lock();
            let entry = &mut entries[self.index];
            let first = !entry.answered;
            entry.answered = true;
            (change(entry) || first, first)
        };
        if first {
            self.sources.answered.notify_waiters();
        }
        if changed {
            self.sources.wake.notify_one();
        }
    }

    /// A good read of what the source holds now.
    pub fn read(&self, reading: Reading, now: Timestamp) {
        self.sources.metrics.gates.read(self.gate, Ok(()));
        self.update(|e| {
            let changed = e.reading != reading || e.health.failing.is_some();
            e.reading = reading;
            e.health.ok(now);
            changed
        });
    }

    /// A watched source's list completed: its cache is whole again.
    pub fn listed(&self, now: Timestamp) {
        self.sources.metrics.gates.read(self.gate, Ok(()));
        self.update(|e| {
            let changed = e.health.failing.is_some();
            e.health.ok(now);
            changed
        });
    }

    /// A watched source delivered an event: it answers again, if it had failed.
    pub fn alive(&self, now: Timestamp) {
        let failing = self.sources.lock()[self.index].health.failing.is_some();
        if failing {
            self.listed(now);
        }
    }

    /// A read failed; `error`'s message gets the hint for its failure.
    pub fn failed(&self, mut error: SourceError, now: Timestamp) {
        self.sources
            .metrics
            .gates
            .read(self.gate, Err(error.failure));
        self.update(|e| {
            let hint = match error.failure {
                gates::Failure::Forbidden => e.hints.forbidden.as_deref(),
                gates::Failure::NotFound => e.hints.not_found.as_deref(),
                _ => None,
            };
            if let Some(hint) = hint {
                error.message = format!("{}; {hint}", error.message);
            }
            let changed = e.health.failing.is_none();
            e.health.failed(error, now);
            changed
        });
    }

    /// Counts a read that changes no reading: one peer of several, a node's pods listed
    /// for a pass, a budget read again.
    pub fn count(&self, result: Result<(), gates::Failure>) {
        self.sources.metrics.gates.read(self.gate, result);
    }

    /// The source's cache predates this replica's term and cannot be listed again now:
    /// it counts as never read, so no start of this term relies on it
    /// ([`super::fence`]).
    pub fn unread(&self) {
        self.update(|e| {
            let changed = e.health.last_good.is_some();
            e.health.last_good = None;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::Failure;
    use crate::reasons;
    use kumaco_core::testing::ts;

    fn sources() -> (Sources, Arc<Notify>) {
        let wake = Arc::new(Notify::new());
        (Sources::new(wake.clone(), Arc::new(Metrics::new())), wake)
    }

    const POLICY: SourcePolicy = SourcePolicy {
        stale_after: jiff::SignedDuration::from_secs(30),
        allow_unreachable: false,
    };

    fn no_nodes() -> NodesInScope<'static> {
        static SCOPE: std::sync::LazyLock<Selector> =
            std::sync::LazyLock::new(Selector::everything);
        NodesInScope {
            nodes: &[],
            scope: &SCOPE,
            sets: &[],
        }
    }

    fn hold(reason: &'static str, message: &str) -> Verdict {
        Verdict {
            cluster: Some(crate::gates::Hold {
                reason,
                message: message.into(),
            }),
            nodes: Default::default(),
        }
    }

    #[tokio::test]
    async fn every_source_answers_once_before_a_pass_and_holds_in_gate_order() {
        let (sources, _) = sources();
        let budgets = sources.add(
            Gate::PodDisruptionBudgets,
            "the PodDisruptionBudgets",
            Hints {
                forbidden: Some("kumaco needs list watch on poddisruptionbudgets".into()),
                not_found: None,
            },
            POLICY,
        );
        let checks = sources.add(
            Gate::ObjectChecks,
            "CephCluster x",
            Hints::default(),
            POLICY,
        );
        let pause = sources.add(Gate::Pause, "the pause switch", Hints::default(), POLICY);
        let now = ts("2026-01-01T00:00:00Z");
        budgets.failed(
            SourceError {
                failure: Failure::Forbidden,
                message: "poddisruptionbudgets is forbidden (HTTP 403 Forbidden)".into(),
            },
            now,
        );
        checks.read(
            Reading::Verdict(hold(reasons::HEALTH_CHECK_FAILED, "x is false")),
            now,
        );
        let waiting = tokio::spawn({
            let sources = sources.clone();
            async move { sources.first_outcomes().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the pause has not answered yet");
        pause.read(Reading::Verdict(hold(reasons::PAUSED, "paused")), now);
        waiting.await.unwrap();
        let (holds, next) = sources.holds(&no_nodes(), now);
        assert_eq!(holds.pause.unwrap().reason, reasons::PAUSED);
        let cluster: Vec<(&str, &str)> = holds
            .cluster
            .iter()
            .map(|h| (h.reason, h.message.as_str()))
            .collect();
        assert_eq!(
            cluster,
            [
                (reasons::HEALTH_CHECK_FAILED, "x is false"),
                (
                    reasons::GATE_UNAVAILABLE,
                    "the PodDisruptionBudgets cannot be read (forbidden), so no maintenance \
                     starts: poddisruptionbudgets is forbidden (HTTP 403 Forbidden); kumaco \
                     needs list watch on poddisruptionbudgets"
                )
            ]
        );
        assert_eq!(next, None, "never read: it holds until it answers");
    }

    #[tokio::test]
    async fn a_change_wakes_a_pass_and_a_repeat_does_not() {
        let (sources, wake) = sources();
        let s = sources.add(Gate::Alerts, "the alerts", Hints::default(), POLICY);
        let now = ts("2026-01-01T00:00:00Z");
        s.read(Reading::Firing(Vec::new()), now);
        let woken = wake.notified();
        tokio::pin!(woken);
        assert!(
            futures::poll!(woken.as_mut()).is_ready(),
            "the first outcome"
        );
        s.read(Reading::Firing(Vec::new()), now);
        let again = wake.notified();
        tokio::pin!(again);
        assert!(
            futures::poll!(again.as_mut()).is_pending(),
            "nothing changed"
        );
        let error = SourceError {
            failure: Failure::Unreachable,
            message: "down".into(),
        };
        s.failed(error.clone(), now);
        assert!(
            futures::poll!(again.as_mut()).is_ready(),
            "it began to fail"
        );
        s.failed(error, now);
        let third = wake.notified();
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending(), "still failing");
        // The reading stands until it is stale: the pass is told when.
        let (holds, next) = sources.holds(&no_nodes(), now);
        assert!(holds.cluster.is_empty());
        assert_eq!(next, Some(ts("2026-01-01T00:00:30Z")));
    }
}
