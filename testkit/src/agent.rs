//! The other side of `MaintenanceInProgress`: a stand-in for kured's reboot agent, and an
//! independent observer that records what the cluster shows, for the tests of the
//! slots, their order and their ends.
//!
//! - [`RebootAgent`]: reboots (pretends to) every node that kumaco lets into maintenance:
//!   after a random pause it sets `kured.dev/RebootRequired=False`, as a node agent does
//!   once the node is back.
//! - [`Observer`]: its own watch on a scope's nodes; records every `MaintenanceInProgress`
//!   change with the time it was seen, the nodes True at each revision, the most True at
//!   once and the order nodes went True. It shares nothing with kumaco, so a bug in
//!   kumaco's cache cannot hide from it.
//! - [`set_condition_at`] (from [`crate::nodes`]): a node condition with a chosen
//!   `lastTransitionTime`, to set up the "oldest first" order.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use crate::nodes::set_condition_at;
use crate::nodes::{condition, set_condition, watch_nodes};

/// Standard (KEP-5683): the node may be disrupted now. kumaco writes it.
pub const MAINTENANCE_IN_PROGRESS: &str = "MaintenanceInProgress";
/// What a node agent sets while the node waits for a reboot (kured's convention).
pub const REBOOT_REQUIRED: &str = "kured.dev/RebootRequired";
/// The field manager of the reboot agent's writes.
pub const AGENT_MANAGER: &str = "reboot-agent";

/// How long the watches of this module may take to list the nodes when they start.
const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// A uniformly random duration in `[low, high)`. Randomness from std's hasher keys (the
/// harness has no `rand`): plenty for "some moment in this range".
pub fn random_duration(low: Duration, high: Duration) -> Duration {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let bits = RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed));
    let fraction = (bits >> 11) as f64 / (1u64 << 53) as f64;
    low + high.saturating_sub(low).mul_f64(fraction)
}

fn status_of(c: Option<&NodeCondition>) -> Option<&str> {
    c.map(|c| c.status.as_str())
}

// ---------------------------------------------------------------------------------------
// The reboot agent

/// Reboots every node of a scope that gets `MaintenanceInProgress=True` while it has
/// `RebootRequired=True`: after a random pause (the drain and reboot), it sets
/// `RebootRequired=False` as field manager [`AGENT_MANAGER`]. Each maintenance period
/// (identified by the condition's `lastTransitionTime`) is rebooted once. Dropping it
/// stops it, reboots in flight included.
pub struct RebootAgent {
    shared: Arc<AgentShared>,
    task: JoinHandle<()>,
}

struct AgentShared {
    client: kube::Client,
    pause: (Duration, Duration),
    /// Nodes whose reboot must wait for [`RebootAgent::release`] (a maintenance the test
    /// wants to keep in progress for a while, a drain not done yet), with how many holds
    /// each: every hold has its release.
    held: Mutex<BTreeMap<String, usize>>,
    held_changed: watch::Sender<()>,
    /// (node, lastTransitionTime of MaintenanceInProgress=True): periods already handled.
    handled: Mutex<BTreeSet<(String, String)>>,
    rebooted: Mutex<Vec<(Timestamp, String)>>,
    in_flight: Mutex<Vec<JoinHandle<()>>>,
}

impl RebootAgent {
    /// Starts the agent on the nodes matching label selector `selector`; returns once its
    /// watch has listed them. Each reboot takes a random time in `pause`.
    pub async fn start(
        client: &kube::Client,
        selector: &str,
        pause: (Duration, Duration),
    ) -> Result<RebootAgent> {
        let shared = Arc::new(AgentShared {
            client: client.clone(),
            pause,
            held: Mutex::new(BTreeMap::new()),
            held_changed: watch::channel(()).0,
            handled: Mutex::new(BTreeSet::new()),
            rebooted: Mutex::new(Vec::new()),
            in_flight: Mutex::new(Vec::new()),
        });
        let task = watch_nodes(client, selector, LIST_TIMEOUT, "the reboot agent", {
            let shared = shared.clone();
            move |n| shared.consider(n)
        })
        .await?;
        Ok(RebootAgent { shared, task })
    }

    /// Keeps `node` in maintenance: its reboot waits until [`RebootAgent::release`] (as
    /// many releases as holds: the drainer's hold during a drain and a test's are
    /// independent).
    pub fn hold(&self, node: &str) {
        *self
            .shared
            .held
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_default() += 1;
        self.shared.held_changed.send_replace(());
    }

    /// Lets a held node's reboot finish, once each of its holds is released.
    pub fn release(&self, node: &str) {
        {
            let mut held = self.shared.held.lock().unwrap();
            if let Some(n) = held.get_mut(node) {
                *n -= 1;
                if *n == 0 {
                    held.remove(node);
                }
            }
        }
        self.shared.held_changed.send_replace(());
    }

    /// The number of reboots done.
    pub fn reboots(&self) -> usize {
        self.shared.rebooted.lock().unwrap().len()
    }

    /// Each reboot done: when `RebootRequired=False` was written, and the node.
    pub fn rebooted(&self) -> Vec<(Timestamp, String)> {
        self.shared.rebooted.lock().unwrap().clone()
    }
}

impl AgentShared {
    /// Starts a reboot if `node` is newly in maintenance and still needs one.
    fn consider(self: &Arc<Self>, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let Some(mip) = condition(node, MAINTENANCE_IN_PROGRESS) else {
            return;
        };
        if mip.status != "True" || status_of(condition(node, REBOOT_REQUIRED)) != Some("True") {
            return;
        }
        // Keyed by the period, not the node: a watch event that arrives after our own
        // write (a lagging stream, a re-list) must not cause a second reboot.
        let period = format!("{:?}", mip.last_transition_time);
        if !self.handled.lock().unwrap().insert((name.clone(), period)) {
            return;
        }
        let shared = self.clone();
        let handle = tokio::spawn(async move {
            // The drain and reboot: the scenario, not synchronisation.
            tokio::time::sleep(random_duration(shared.pause.0, shared.pause.1)).await;
            let mut held_changed = shared.held_changed.subscribe();
            while shared.held.lock().unwrap().contains_key(&name) {
                if held_changed.changed().await.is_err() {
                    return;
                }
            }
            shared.reboot_done(&name).await;
        });
        self.in_flight.lock().unwrap().push(handle);
    }

    async fn reboot_done(&self, node: &str) {
        let mut attempt = 0;
        loop {
            match set_condition(&self.client, node, REBOOT_REQUIRED, "False", AGENT_MANAGER).await {
                Ok(_) => break,
                // The API server is shared and may be slow, or down for seconds
                // (kumaco-chaos crashes it): a reboot that is never reported holds a slot
                // for ever, so keep trying for a minute, and say so once.
                Err(e) if attempt < 120 => {
                    if attempt == 0 {
                        eprintln!("reboot agent: {e:#}; retrying for up to a minute");
                    }
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => {
                    eprintln!("reboot agent: giving up on {node}: {e:#}");
                    return;
                }
            }
        }
        self.rebooted
            .lock()
            .unwrap()
            .push((Timestamp::now(), node.to_string()));
    }
}

impl Drop for RebootAgent {
    fn drop(&mut self) {
        self.task.abort();
        for handle in self.shared.in_flight.lock().unwrap().drain(..) {
            handle.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The observer

/// One change of a node's `MaintenanceInProgress` condition, as the observer saw it.
#[derive(Clone, Debug)]
pub struct Change {
    /// When the observer received it (wall clock, comparable with kumaco's log times).
    pub at: Timestamp,
    pub node: String,
    /// The condition after the change (None: absent).
    pub condition: Option<NodeCondition>,
}

/// What the [`Observer`] has seen so far.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Each node's condition as last seen (None: absent).
    pub current: BTreeMap<String, Option<NodeCondition>>,
    /// Every change (status, reason, message or timestamps), in the order seen. The first
    /// state listed for a node counts as a change only if the condition is present.
    pub changes: Vec<Change>,
    /// The nodes True now.
    pub in_progress: BTreeSet<String>,
    /// The most nodes True at once, at any revision seen.
    pub max_in_progress: usize,
    /// Each start (not True → True), in the order seen.
    pub starts: Vec<(Timestamp, String)>,
    /// Watch gaps that the watcher re-listed (0 in a healthy run).
    pub relists: usize,
}

impl Observed {
    /// Every change seen, one per line, times relative to the first (and absolute): for
    /// failure messages.
    pub fn timeline(&self) -> String {
        let Some(t0) = self.changes.first().map(|ch| ch.at) else {
            return "  no change seen".into();
        };
        let mut out = String::new();
        for ch in &self.changes {
            let state = describe(ch.condition.as_ref());
            out.push_str(&format!(
                "  +{:>6} ms {} {}: {state}\n",
                ch.at.duration_since(t0).as_millis(),
                ch.at,
                ch.node
            ));
        }
        out
    }

    /// The successive conditions of `node` (None: removed).
    pub fn history(&self, node: &str) -> Vec<Option<NodeCondition>> {
        self.changes
            .iter()
            .filter(|c| c.node == node)
            .map(|c| c.condition.clone())
            .collect()
    }

    /// How many times `node` went True.
    pub fn start_count(&self, node: &str) -> usize {
        self.starts.iter().filter(|(_, n)| n == node).count()
    }

    /// Whether `node` went True and then False with reason `reason`.
    pub fn ended_with(&self, node: &str, reason: &str) -> bool {
        let history = self.history(node);
        history.windows(2).any(|pair| {
            status_of(pair[0].as_ref()) == Some("True")
                && pair[1]
                    .as_ref()
                    .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some(reason))
        })
    }

    /// The node's condition now.
    pub fn condition(&self, node: &str) -> Option<&NodeCondition> {
        self.current.get(node)?.as_ref()
    }

    /// The node's `(status, reason)` now, for assertions and failure messages.
    pub fn status_reason(&self, node: &str) -> Option<(String, String)> {
        self.condition(node)
            .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
    }

    /// One line per node: its condition now (status, reason, message).
    pub fn summary(&self) -> String {
        let mut out = format!(
            "max in progress {}, in progress now {:?}, re-lists {}\n",
            self.max_in_progress, self.in_progress, self.relists
        );
        for (node, c) in &self.current {
            let now = describe(c.as_ref());
            out.push_str(&format!("  {node}: {now}\n"));
        }
        out
    }

    fn record(&mut self, node: String, cond: Option<NodeCondition>, at: Timestamp) {
        let before = self.current.get(&node);
        if before == Some(&cond) || (before.is_none() && cond.is_none()) {
            self.current.insert(node, cond);
            return;
        }
        let was_true = status_of(before.and_then(|c| c.as_ref())) == Some("True");
        let is_true = status_of(cond.as_ref()) == Some("True");
        if is_true && !was_true {
            self.in_progress.insert(node.clone());
            self.starts.push((at, node.clone()));
            self.max_in_progress = self.max_in_progress.max(self.in_progress.len());
        } else if was_true && !is_true {
            self.in_progress.remove(&node);
        }
        self.changes.push(Change {
            at,
            node: node.clone(),
            condition: cond.clone(),
        });
        self.current.insert(node, cond);
    }

    /// Applies a (re-)list as one step: ends first, then starts, so that a node whose end
    /// the watch missed and a node that started since are never counted together.
    fn record_list(&mut self, listed: Vec<(String, Option<NodeCondition>)>, at: Timestamp) {
        let (starts, others): (Vec<_>, Vec<_>) = listed
            .into_iter()
            .partition(|(_, c)| status_of(c.as_ref()) == Some("True"));
        for (node, cond) in others.into_iter().chain(starts) {
            self.record(node, cond, at);
        }
    }
}

/// Watches a scope's nodes and records their `MaintenanceInProgress` changes
/// ([`Observed`]). Dropping it stops the watch.
pub struct Observer {
    state: Arc<Mutex<Observed>>,
    updates: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl Observer {
    /// Starts watching the nodes matching label selector `selector`; returns once they
    /// are listed (their state then is the first entry of each history).
    pub async fn start(client: &kube::Client, selector: &str) -> Result<Observer> {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().labels(selector);
        let state = Arc::new(Mutex::new(Observed::default()));
        let (updates_tx, updates) = watch::channel(0u64);
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                let mut listed_tx = Some(listed_tx);
                let mut listing: Option<Vec<(String, Option<NodeCondition>)>> = None;
                let mut events = watcher(api, config).boxed();
                while let Some(event) = events.next().await {
                    let at = Timestamp::now();
                    // No await while the lock is held: tests read the state meanwhile.
                    {
                        let mut state = state.lock().unwrap();
                        match event {
                            Ok(watcher::Event::Init) => listing = Some(Vec::new()),
                            Ok(watcher::Event::InitApply(n)) => {
                                let entry = (
                                    n.metadata.name.clone().unwrap_or_default(),
                                    condition(&n, MAINTENANCE_IN_PROGRESS).cloned(),
                                );
                                listing.get_or_insert_with(Vec::new).push(entry);
                            }
                            Ok(watcher::Event::InitDone) => {
                                state.record_list(listing.take().unwrap_or_default(), at);
                                match listed_tx.take() {
                                    Some(tx) => {
                                        let _ = tx.send(());
                                    }
                                    None => state.relists += 1,
                                }
                            }
                            Ok(watcher::Event::Apply(n)) => {
                                let name = n.metadata.name.clone().unwrap_or_default();
                                let cond = condition(&n, MAINTENANCE_IN_PROGRESS).cloned();
                                state.record(name, cond, at);
                            }
                            // Test nodes are not deleted; watch errors are retried by the
                            // watcher and end in a re-list.
                            Ok(watcher::Event::Delete(_)) | Err(_) => {}
                        }
                    }
                    updates_tx.send_modify(|n| *n += 1);
                }
            }
        });
        tokio::time::timeout(LIST_TIMEOUT, listed)
            .await
            .context("the observer's watch did not list the nodes in time")?
            .context("the observer's watch stopped")?;
        Ok(Observer {
            state,
            updates,
            task,
        })
    }

    /// A copy of everything seen so far.
    pub fn observed(&self) -> Observed {
        self.state.lock().unwrap().clone()
    }

    /// Waits until `check` holds for what has been seen, at most `timeout`; fails with
    /// `what` and the nodes' states then.
    pub async fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Observed) -> bool,
    ) -> Result<Observed> {
        let mut updates = self.updates.clone();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            {
                let state = self.state.lock().unwrap();
                if check(&state) {
                    return Ok(state.clone());
                }
            }
            match tokio::time::timeout_at(deadline, updates.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => bail!("the observer's watch stopped while waiting for {what}"),
                Err(_) => bail!(
                    "timed out after {timeout:?} waiting for {what}; MaintenanceInProgress \
                     now:\n{}",
                    self.observed().summary()
                ),
            }
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `True Reason "message"`, or `absent`: one condition in a summary line.
fn describe(c: Option<&NodeCondition>) -> String {
    match c {
        Some(c) => format!(
            "{} {} {:?}",
            c.status,
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default()
        ),
        None => "absent".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mip(status: &str, reason: &str) -> Option<NodeCondition> {
        Some(NodeCondition {
            type_: MAINTENANCE_IN_PROGRESS.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..Default::default()
        })
    }

    #[test]
    fn counts_starts_ends_and_the_most_at_once() {
        let mut o = Observed::default();
        let t = Timestamp::UNIX_EPOCH;
        o.record_list(vec![("a".into(), None), ("b".into(), None)], t);
        assert!(
            o.changes.is_empty(),
            "absent at the first list is no change"
        );
        o.record("a".into(), mip("True", "MaintenanceWindow"), t);
        o.record("b".into(), mip("False", "WaitingForSlot"), t);
        o.record("b".into(), mip("False", "WaitingForSlot"), t);
        assert_eq!(o.history("b").len(), 1, "a repeat is no change");
        o.record("a".into(), mip("False", "MaintenanceCompleted"), t);
        o.record("b".into(), mip("True", "MaintenanceWindow"), t);
        assert_eq!(o.max_in_progress, 1);
        assert!(o.ended_with("a", "MaintenanceCompleted"));
        assert!(!o.ended_with("b", "MaintenanceCompleted"));
        assert_eq!(
            o.starts.iter().map(|s| s.1.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(o.start_count("a"), 1);
    }

    /// A re-list after a watch gap carries both a missed end and a later start: counted
    /// together they would look like two nodes in progress at once.
    #[test]
    fn a_relist_applies_ends_before_starts() {
        let mut o = Observed::default();
        let t = Timestamp::UNIX_EPOCH;
        o.record("a".into(), mip("True", "MaintenanceWindow"), t);
        o.record_list(
            vec![
                ("b".into(), mip("True", "MaintenanceWindow")),
                ("a".into(), mip("False", "MaintenanceCompleted")),
            ],
            t,
        );
        assert_eq!(o.max_in_progress, 1);
        assert_eq!(o.in_progress, BTreeSet::from(["b".to_string()]));
    }

    #[test]
    fn random_durations_stay_in_range() {
        let (low, high) = (Duration::from_millis(500), Duration::from_secs(3));
        let all: Vec<Duration> = (0..1000).map(|_| random_duration(low, high)).collect();
        assert!(all.iter().all(|d| (low..high).contains(d)));
        assert!(all.iter().any(|d| *d < Duration::from_secs(1)));
        assert!(all.iter().any(|d| *d > Duration::from_millis(2500)));
    }
}
