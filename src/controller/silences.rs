//! The silences in Alertmanager (`--alertmanager-url`): a task beside the passes, woken
//! by each pass and every [`SilenceSettings::interval`], that lists the silences, asks
//! [`silence::plan`] what to do and does it. Only the leader acts, and only after a pass
//! that could write (its caches are from its own term: `fence`); a shadow
//! (`--dry-run`) logs and exports what it would do.
//!
//! Nothing here gates a maintenance: no pass waits for Alertmanager, and an Alertmanager
//! that is down, slow or refusing only delays the silences (the failures are counted,
//! rounds back off). What is kept between rounds is a backoff and, in a shadow, what was
//! last logged: a restarted or newly elected replica starts from the list.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use super::writer::Doubling;
use crate::alertmanager::Alertmanager;
use crate::config::SilenceSettings;
use crate::leader::Leadership;
use crate::metrics::{Metrics, SilenceActionLabels};
use crate::node::SlimNode;
use crate::selector::Selector;
use crate::silence::{self, Action, NodeState};

/// Least time between two rounds, however often passes wake the task (a burst of node
/// events is one round).
const MIN_GAP: Duration = Duration::from_secs(1);
/// Rounds that failed in a row wait longer each time, up to a cap: a down Alertmanager
/// costs a list per cap.
const BACKOFF: Doubling = Doubling::new(Duration::from_secs(1), Duration::from_secs(30));

/// The passes' side of the task: a wake-up and whether the last pass could write.
pub struct Silencer {
    wake: Arc<Notify>,
    may_write: Arc<AtomicBool>,
}

impl Silencer {
    /// Starts the task.
    pub fn spawn(
        settings: SilenceSettings,
        client: Alertmanager,
        nodes: Store<SlimNode>,
        scope: Selector,
        leadership: Leadership,
        dry_run: bool,
        metrics: Arc<Metrics>,
    ) -> Silencer {
        let wake = Arc::new(Notify::new());
        let may_write = Arc::new(AtomicBool::new(false));
        let task = Task {
            settings,
            client,
            nodes,
            scope,
            leadership,
            dry_run,
            metrics,
            may_write: may_write.clone(),
            failures: 0,
            logged: BTreeSet::new(),
        };
        tokio::spawn(task.run(wake.clone()));
        Silencer { wake, may_write }
    }

    /// After each pass: whether it could write (leader, caches of its term).
    pub fn after_pass(&self, may_write: bool) {
        self.may_write.store(may_write, Ordering::Relaxed);
        self.wake.notify_one();
    }
}

struct Task {
    settings: SilenceSettings,
    client: Alertmanager,
    nodes: Store<SlimNode>,
    scope: Selector,
    leadership: Leadership,
    dry_run: bool,
    metrics: Arc<Metrics>,
    may_write: Arc<AtomicBool>,
    failures: u32,
    /// A shadow's actions as last logged: each is logged once while it stays due.
    logged: BTreeSet<String>,
}

impl Task {
    async fn run(mut self, wake: Arc<Notify>) {
        loop {
            let wait = if self.failures == 0 {
                self.settings.interval
            } else {
                BACKOFF.delay(self.failures)
            };
            // While backing off, wake-ups do not shorten the wait.
            if self.failures == 0 {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            } else {
                tokio::time::sleep(wait).await;
            }
            self.round().await;
            tokio::time::sleep(MIN_GAP).await;
        }
    }

    async fn round(&mut self) {
        let acting =
            !self.dry_run && self.may_write.load(Ordering::Relaxed) && self.leadership.is_leader();
        if !self.dry_run && !acting {
            // A standby holds nothing: the leader's gauge is the one that counts.
            self.metrics.silences.held.set(0);
            self.failures = 0;
            return;
        }
        let metrics = self.metrics.clone();
        let m = &metrics.silences;
        let listed = match self.client.silences().await {
            Ok(listed) => {
                m.request("list", true);
                listed
            }
            Err(e) => {
                m.request("list", false);
                self.failed(&e.to_string(), "listing the silences");
                return;
            }
        };
        let now = Timestamp::now();
        let cached = self.nodes.state();
        let nodes = cached
            .iter()
            .filter(|n| self.scope.matches(&n.labels))
            .map(|n| NodeState {
                name: n.metadata.name.as_deref().unwrap_or_default(),
                labels: &n.labels,
                conditions: &n.conditions,
                availability: n.availability,
            });
        let plan = silence::plan(&self.settings.rules, nodes, &listed, now);
        m.capped.set(plan.capped as i64);
        if !plan.unrenderable.is_empty() {
            let missing: Vec<String> = plan
                .unrenderable
                .iter()
                .map(|(node, set)| format!("{node}: {set}"))
                .collect();
            debug!(
                ?missing,
                "nodes in maintenance get no silence of a matcher set: a node label it names is missing"
            );
        }
        if self.dry_run {
            self.would(&plan.actions);
            m.held.set(plan.held as i64);
            return;
        }
        let created_by = &self.settings.rules.created_by;
        let mut failed = None;
        let mut held = plan.held as i64;
        for action in &plan.actions {
            // Leadership can end while a round runs: the next leader lists again.
            if !self.leadership.is_leader() {
                return;
            }
            match self.client.act(action, created_by, Timestamp::now()).await {
                Ok(id) => {
                    m.request(action.verb(), true);
                    log_action(action, id.as_deref());
                }
                Err(e) => {
                    m.request(action.verb(), false);
                    if matches!(action, Action::Create { .. }) {
                        held -= 1;
                    }
                    failed = Some(e.to_string());
                }
            }
        }
        m.held.set(held);
        match failed {
            Some(e) => self.failed(&e, "changing a silence"),
            None => {
                if self.failures > 0 {
                    info!("Alertmanager answers again: silences held");
                }
                self.failures = 0;
                m.last_success.set(now.as_millisecond() as f64 / 1000.0);
            }
        }
    }

    fn failed(&mut self, error: &str, doing: &str) {
        self.failures = self.failures.saturating_add(1);
        let retry = BACKOFF.delay(self.failures);
        // Once per outage at warn, then quietly: the metric and alert carry the rest.
        if self.failures == 1 {
            warn!(
                error,
                ?retry,
                "Alertmanager: {doing} failed; maintenance goes on, retrying"
            );
        } else {
            debug!(
                error,
                ?retry,
                failures = self.failures,
                "Alertmanager: {doing} failed"
            );
        }
    }

    fn would(&mut self, actions: &[Action]) {
        let mut now = BTreeSet::new();
        let mut counts = [0i64; 3];
        for a in actions {
            let line = describe(a);
            if !self.logged.contains(&line) {
                info!(action = a.verb(), "dry run: would {line}");
            }
            now.insert(line);
            counts[match a {
                Action::Create { .. } => 0,
                Action::Extend { .. } => 1,
                Action::Expire { .. } => 2,
            }] += 1;
        }
        self.logged = now;
        for (action, n) in ["create", "extend", "expire"].iter().zip(counts) {
            self.metrics
                .silences
                .dry_run
                .get_or_create(&SilenceActionLabels {
                    action: action.to_string(),
                })
                .set(n);
        }
    }
}

/// What an action does, without its end (which moves every round in a shadow).
fn describe(a: &Action) -> String {
    let matchers = |ms: &[silence::Matcher]| {
        ms.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    match a {
        Action::Create {
            node, matchers: m, ..
        } => {
            format!("create a silence for node {node} ({})", matchers(m))
        }
        Action::Extend { id, node, .. } => format!("extend silence {id} of node {node}"),
        Action::Expire { id, node } => match node {
            Some(node) => format!("expire silence {id} of node {node}"),
            None => format!("expire silence {id} (no node held has its matchers)"),
        },
    }
}

fn log_action(a: &Action, id: Option<&str>) {
    match a {
        Action::Create { node, ends_at, .. } => {
            info!(node, id, %ends_at, "silence created")
        }
        Action::Extend { node, ends_at, .. } => {
            debug!(node, id, %ends_at, "silence extended")
        }
        Action::Expire { id, node } => info!(node, id, "silence expired"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_back_off_to_half_a_minute() {
        let delays: Vec<u64> = (1..8).map(|n| BACKOFF.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
    }
}
