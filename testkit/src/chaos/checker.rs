//! The independent checker of `kumaco-chaos`: its own watches on the scope's nodes and
//! on kumaco's Lease, sharing nothing with kumaco (no metrics, no logs), and the
//! contract's promises checked against what they show.
//!
//! At every node event, whatever the faults:
//! - the count of nodes with `MaintenanceInProgress=True` is at most the ceiling (§5);
//! - a maintenance starts only on a node that is `UnderMaintenance=True` and
//!   `RebootRequired=True` in the same version (§5 Start);
//! - `lastTransitionTime` changes only with the status, and `UnderMaintenance=False` is
//!   never added to a node without the condition (§4).
//!
//! In quiet time — no fault active, and `settle` passed since the last one ended — and
//! once `edge_bound + slack` has passed since the last window edge or edit (the
//! contract's 1 s, plus the checker's own watch delay on a loaded machine):
//! - the nodes `UnderMaintenance=True` are exactly those `kumaco plan` puts in
//!   maintenance at that instant, and no `UnderMaintenance` changes (an edge landed
//!   late, or a flap);
//! - no node waits for maintenance (in a window, `RebootRequired=True`, not in progress)
//!   while a slot is free, and none stays in progress once `RebootRequired` is False,
//!   for longer than `edge_bound + slack`.
//!
//! Leadership (§7: only the leader writes), from the Lease's history and the etcd
//! revisions that order Lease and Node versions in one sequence (the resourceVersions
//! of one etcd): a holder is replaced only after a whole lease duration without renewal
//! or after a release, and every write of kumaco's lands in the term of a holder that is
//! alive — not while the Lease is released, and not after its holder was killed. The
//! replicas share one field manager (kumaco's default), so managedFields cannot tell
//! which replica wrote; two live replicas writing in one term would show as the other
//! violations (the ceiling, flaps, writes above transitions).
//!
//! Writes: [`Checker::counts`] gives the node versions in which kumaco's conditions
//! changed; the harness compares them with the API server's count of applies over a
//! quiet tail (every apply must change something).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use kube::runtime::watcher;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::plan::Plan;
use crate::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED};
use crate::nodes::condition;

pub const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";

/// How often the time-based checks run between events.
const TICK: Duration = Duration::from_millis(250);

/// The checker's parameters.
#[derive(Clone, Debug)]
pub struct CheckerConfig {
    pub ceiling: usize,
    /// The contract's bound on an edge (§4: within 1 second).
    pub edge_bound: Duration,
    /// The checker's own allowance: its watch's delay and a loaded machine.
    pub slack: Duration,
    /// How long kumaco may take to recover after a fault ends (a new leader, re-lists).
    pub settle: Duration,
    pub lease_namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
}

/// A condition as compared between versions.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Cond {
    status: String,
    reason: String,
    message: String,
    transition: Option<Timestamp>,
}

impl Cond {
    fn of(c: Option<&NodeCondition>) -> Option<Cond> {
        c.map(|c| Cond {
            status: c.status.clone(),
            reason: c.reason.clone().unwrap_or_default(),
            message: c.message.clone().unwrap_or_default(),
            transition: c.last_transition_time.as_ref().map(|t| t.0),
        })
    }

    fn is_true(c: &Option<Cond>) -> bool {
        c.as_ref().is_some_and(|c| c.status == "True")
    }
}

#[derive(Clone, Debug)]
struct NodeState {
    um: Option<Cond>,
    mip: Option<Cond>,
    rr: bool,
}

impl NodeState {
    fn of(node: &Node) -> NodeState {
        NodeState {
            um: Cond::of(condition(node, UNDER_MAINTENANCE)),
            mip: Cond::of(condition(node, MAINTENANCE_IN_PROGRESS)),
            rr: condition(node, REBOOT_REQUIRED).is_some_and(|c| c.status == "True"),
        }
    }
}

#[derive(Clone, Debug)]
struct LeaseVersion {
    revision: u64,
    holder: Option<String>,
    /// When the checker's watch delivered it. For a version from a (re-)list, that is not
    /// when it was written: the renew may be older by the watch's whole gap.
    observed: Timestamp,
    listed: bool,
}

/// A node version kumaco wrote, waiting for the Lease watch to pass its revision.
#[derive(Clone, Debug)]
struct Write {
    revision: u64,
    node: String,
    observed: Timestamp,
}

/// What the checker counted, for the summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counts {
    /// Node events seen (not counting re-lists).
    pub node_events: u64,
    /// Node versions in which kumaco's conditions changed.
    pub kumaco_changes: u64,
    pub transitions_true: u64,
    pub max_in_progress: usize,
    pub in_progress: usize,
    /// Instants at which the nodes were compared with the plan, and found equal.
    pub plan_checks: u64,
    /// Writes checked against the Lease's history.
    pub writes_checked: u64,
    pub lease_changes: u64,
    pub node_relists: u64,
    pub lease_relists: u64,
    /// Largest delay from a window edge (or edit) to an `UnderMaintenance` change the
    /// watch saw, in quiet time, in milliseconds.
    pub max_edge_delay_ms: Option<i64>,
    /// Maintenances started (MaintenanceInProgress → True).
    pub starts: u64,
}

#[derive(Default)]
struct State {
    nodes: HashMap<String, NodeState>,
    /// Nodes being listed by a re-list (swapped in when it is done).
    listing: Option<HashMap<String, NodeState>>,
    last_relist: Option<Timestamp>,
    plan: Plan,
    plan_from: Option<Timestamp>,
    faults: BTreeMap<u64, String>,
    next_fault: u64,
    last_fault_end: Option<Timestamp>,
    /// Identities killed, with when.
    dead: HashMap<String, Timestamp>,
    lease: Vec<LeaseVersion>,
    lease_listing: bool,
    /// Revision below which the Lease history has a gap (a re-list).
    lease_gap_until: u64,
    pending: VecDeque<Write>,
    last_kumaco_change: Option<Timestamp>,
    last_node_change: Option<Timestamp>,
    starved_since: Option<Timestamp>,
    overdue_since: Option<Timestamp>,
    counts: Counts,
    violations: Vec<String>,
}

/// The checker, running. Dropping it stops its watches.
pub struct Checker {
    cfg: CheckerConfig,
    state: Arc<Mutex<State>>,
    violation: watch::Receiver<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// A fault in progress; [`Checker::fault_ended`] ends it.
#[derive(Debug)]
pub struct FaultId(u64);

impl Checker {
    /// Starts the watches on the nodes matching `selector` and on the Lease, and the
    /// time-based checks. `plan` covers the run from now (see [`Checker::set_plan`]).
    pub async fn start(
        client: &kube::Client,
        selector: &str,
        cfg: CheckerConfig,
        plan: Plan,
    ) -> anyhow::Result<Checker> {
        let state = Arc::new(Mutex::new(State {
            plan,
            plan_from: Some(Timestamp::now()),
            ..State::default()
        }));
        let (violation_tx, violation) = watch::channel(false);
        let violation_tx = Arc::new(violation_tx);
        let ctx = Ctx {
            cfg: cfg.clone(),
            state: state.clone(),
            violation: violation_tx,
        };
        let nodes: Api<Node> = Api::all(client.clone());
        let leases: Api<Lease> = Api::namespaced(client.clone(), &cfg.lease_namespace);
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let node_task = tokio::spawn({
            let ctx = ctx.clone();
            let config = watcher::Config::default().labels(selector);
            async move {
                let mut listed_tx = Some(listed_tx);
                relisting(nodes, config, |event| {
                    let done = ctx.node_event(event);
                    if done && let Some(tx) = listed_tx.take() {
                        let _ = tx.send(());
                    }
                })
                .await
            }
        });
        let lease_task = tokio::spawn({
            let ctx = ctx.clone();
            let config =
                watcher::Config::default().fields(&format!("metadata.name={}", cfg.lease_name));
            async move { relisting(leases, config, |event| ctx.lease_event(event)).await }
        });
        let tick_task = tokio::spawn({
            let ctx = ctx.clone();
            async move {
                let mut ticker = tokio::time::interval(TICK);
                loop {
                    ticker.tick().await;
                    ctx.tick();
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(60), listed)
            .await
            .map_err(|_| anyhow::anyhow!("the checker's watch did not list the nodes in time"))??;
        Ok(Checker {
            cfg,
            state,
            violation,
            tasks: vec![node_task, lease_task, tick_task],
        })
    }

    /// A fault begins: the time-based checks pause until `settle` after it ends.
    pub fn fault_started(&self, what: &str) -> FaultId {
        let mut s = self.state.lock().unwrap();
        let id = s.next_fault;
        s.next_fault += 1;
        s.faults.insert(id, what.to_string());
        FaultId(id)
    }

    pub fn fault_ended(&self, id: FaultId) {
        let mut s = self.state.lock().unwrap();
        s.faults.remove(&id.0);
        s.last_fault_end = Some(Timestamp::now());
    }

    /// A replica was killed: nothing may be written in its term from now on.
    pub fn replica_killed(&self, identity: &str) {
        self.state
            .lock()
            .unwrap()
            .dead
            .insert(identity.to_string(), Timestamp::now());
    }

    /// The windows changed now (an edit); `plan` covers the time from now.
    pub fn set_plan(&self, plan: Plan) {
        let mut s = self.state.lock().unwrap();
        s.plan = plan;
        s.plan_from = Some(Timestamp::now());
    }

    /// The first violation, if any.
    pub fn violation(&self) -> Option<String> {
        self.state.lock().unwrap().violations.first().cloned()
    }

    /// Resolves when the first violation is found; independent of the checker's
    /// borrow, to race with what the harness does meanwhile.
    pub fn violated(&self) -> impl Future<Output = ()> + use<> {
        let mut rx = self.violation.clone();
        async move {
            let _ = rx.wait_for(|v| *v).await;
        }
    }

    pub fn counts(&self) -> Counts {
        self.state.lock().unwrap().counts.clone()
    }

    /// True when nothing is moving: no fault, no node change for `still`, kumaco's last
    /// change longer ago than that, and no window edge within `still` either side. The
    /// API server's count of applies then equals what the watch has seen.
    pub fn quiescent(&self, still: Duration) -> bool {
        let s = self.state.lock().unwrap();
        let now = Timestamp::now();
        let still = SignedDuration::try_from(still).unwrap_or(SignedDuration::MAX);
        let long_ago = |t: Option<Timestamp>| t.is_none_or(|t| now.duration_since(t) >= still);
        let edge_near = s.plan.at(now).is_none_or(|seg| {
            now.duration_since(seg.start) < still || seg.end.duration_since(now) < still
        });
        s.faults.is_empty()
            && s.listing.is_none()
            && long_ago(s.last_node_change)
            && long_ago(s.last_kumaco_change)
            && !edge_near
    }

    /// The next window edge after now, as the plan says.
    pub fn next_edge(&self) -> Option<Timestamp> {
        let s = self.state.lock().unwrap();
        s.plan.at(Timestamp::now()).map(|seg| seg.end)
    }

    /// The current Lease holder, as last seen.
    pub fn holder(&self) -> Option<String> {
        let s = self.state.lock().unwrap();
        s.lease.last().and_then(|l| l.holder.clone())
    }

    /// Resolves at the next node version kumaco writes (for a kill "mid-write").
    pub async fn next_write(&self, timeout: Duration) -> bool {
        let before = self.counts().kumaco_changes;
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.counts().kumaco_changes > before {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    pub fn config(&self) -> &CheckerConfig {
        &self.cfg
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[derive(Clone)]
struct Ctx {
    cfg: CheckerConfig,
    state: Arc<Mutex<State>>,
    violation: Arc<watch::Sender<bool>>,
}

/// Watches with `config`, and after every error lists again (every [`RELIST_RETRY`] until
/// the API server answers): the checker's view after an error is a fresh list, never
/// a watch resumed after an unknown gap, and the time-based checks wait for that list
/// (the error puts the node view in "listing"). kube's default backoff, up to 30 s
/// between tries, once made a restarted API server look like kumaco missing an edge.
async fn relisting<K>(
    api: Api<K>,
    config: watcher::Config,
    mut on_event: impl FnMut(Result<watcher::Event<K>, watcher::Error>),
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    loop {
        let mut events = watcher(api.clone(), config.clone()).boxed();
        while let Some(event) = events.next().await {
            let failed = event.is_err();
            on_event(event);
            if failed {
                break;
            }
        }
        tokio::time::sleep(RELIST_RETRY).await;
    }
}

/// How often the checker's watches try again after an error.
const RELIST_RETRY: Duration = Duration::from_millis(500);

fn revision(meta: &kube::api::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

fn signed(d: Duration) -> SignedDuration {
    SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX)
}

impl Ctx {
    fn violate(&self, s: &mut State, what: String) {
        if s.violations.is_empty() {
            let _ = self.violation.send(true);
        }
        s.violations.push(format!("{}: {what}", Timestamp::now()));
    }

    /// Whether the time-based checks apply at `now`.
    fn quiet(&self, s: &State, now: Timestamp) -> bool {
        let settled = s
            .last_fault_end
            .is_none_or(|end| now.duration_since(end) >= signed(self.cfg.settle));
        let relisted = s
            .last_relist
            .is_none_or(|t| now.duration_since(t) >= signed(self.cfg.slack));
        s.faults.is_empty() && settled && relisted && s.listing.is_none()
    }

    /// The instant the last edge (or edit) took effect, if the plan covers `now`.
    fn last_edge(&self, s: &State, now: Timestamp) -> Option<Timestamp> {
        let seg = s.plan.at(now)?;
        Some(match s.plan_from {
            Some(from) if from > seg.start => from,
            _ => seg.start,
        })
    }

    fn past_edge_bound(&self, s: &State, now: Timestamp) -> bool {
        let allowed = signed(self.cfg.edge_bound + self.cfg.slack);
        self.last_edge(s, now)
            .is_some_and(|edge| now.duration_since(edge) >= allowed)
    }

    /// Returns true when a (re-)list has finished.
    fn node_event(&self, event: Result<watcher::Event<Node>, watcher::Error>) -> bool {
        let now = Timestamp::now();
        let mut s = self.state.lock().unwrap();
        match event {
            Ok(watcher::Event::Init) => {
                s.listing = Some(HashMap::new());
                false
            }
            Ok(watcher::Event::InitApply(n)) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                s.listing
                    .get_or_insert_with(HashMap::new)
                    .insert(name, NodeState::of(&n));
                false
            }
            Ok(watcher::Event::InitDone) => {
                let first = s.last_relist.is_none() && s.counts.node_events == 0;
                s.nodes = s.listing.take().unwrap_or_default();
                s.last_relist = Some(now);
                if !first {
                    s.counts.node_relists += 1;
                }
                self.count_in_progress(&mut s, "a re-list");
                true
            }
            Ok(watcher::Event::Apply(n)) => {
                self.node_changed(&mut s, &n, now);
                false
            }
            Ok(watcher::Event::Delete(_)) => false,
            Err(_) => {
                // Not quiet until the list that follows is complete.
                s.listing = Some(HashMap::new());
                false
            }
        }
    }

    fn count_in_progress(&self, s: &mut State, at: &str) {
        let count = s.nodes.values().filter(|n| Cond::is_true(&n.mip)).count();
        s.counts.in_progress = count;
        s.counts.max_in_progress = s.counts.max_in_progress.max(count);
        if count > self.cfg.ceiling {
            let ceiling = self.cfg.ceiling;
            self.violate(
                s,
                format!("{count} nodes MaintenanceInProgress=True at {at}, above the ceiling of {ceiling}"),
            );
        }
    }

    fn node_changed(&self, s: &mut State, node: &Node, now: Timestamp) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let new = NodeState::of(node);
        s.counts.node_events += 1;
        s.last_node_change = Some(now);
        let Some(old) = s.nodes.insert(name.clone(), new.clone()) else {
            return;
        };
        let at = format!("node {name} (resourceVersion {})", revision(&node.metadata));
        let kumaco_changed = old.um != new.um || old.mip != new.mip;
        if !kumaco_changed {
            return;
        }
        s.counts.kumaco_changes += 1;
        s.last_kumaco_change = Some(now);
        s.pending.push_back(Write {
            revision: revision(&node.metadata),
            node: name.clone(),
            observed: now,
        });
        for (type_, before, after) in [
            (UNDER_MAINTENANCE, &old.um, &new.um),
            (MAINTENANCE_IN_PROGRESS, &old.mip, &new.mip),
        ] {
            if let (Some(b), Some(a)) = (before, after)
                && b.status == a.status
                && b.transition != a.transition
            {
                self.violate(
                    s,
                    format!(
                        "{type_} lastTransitionTime changed from {:?} to {:?} without a status change on {at}",
                        b.transition, a.transition
                    ),
                );
            }
        }
        if old.um.is_none() && new.um.as_ref().is_some_and(|c| c.status == "False") {
            self.violate(
                s,
                format!("UnderMaintenance=False added on {at}, which had no such condition"),
            );
        }
        let started = !Cond::is_true(&old.mip) && Cond::is_true(&new.mip);
        if started {
            s.counts.starts += 1;
            if !Cond::is_true(&new.um) || !new.rr {
                self.violate(
                    s,
                    format!(
                        "maintenance started on {at} with UnderMaintenance={:?} and RebootRequired={}",
                        new.um.as_ref().map(|c| &c.status),
                        new.rr
                    ),
                );
            }
        }
        if started || (Cond::is_true(&old.mip) && !Cond::is_true(&new.mip)) {
            self.count_in_progress(s, &at);
        }
        if old.um.as_ref().map(|c| &c.status) != new.um.as_ref().map(|c| &c.status) {
            s.counts.transitions_true += u64::from(Cond::is_true(&new.um));
            if self.quiet(s, now) {
                if self.past_edge_bound(s, now) {
                    let edge = self.last_edge(s, now);
                    self.violate(
                        s,
                        format!(
                            "UnderMaintenance became {:?} on {at} with no window edge in the last {:?} (last edge {edge:?}): late or spurious",
                            new.um.as_ref().map(|c| &c.status),
                            self.cfg.edge_bound + self.cfg.slack
                        ),
                    );
                } else if let Some(edge) = self.last_edge(s, now) {
                    let delay = now.duration_since(edge).as_millis() as i64;
                    let max = s.counts.max_edge_delay_ms.get_or_insert(delay);
                    *max = (*max).max(delay);
                }
            }
        }
    }

    fn lease_event(&self, event: Result<watcher::Event<Lease>, watcher::Error>) {
        let now = Timestamp::now();
        let mut s = self.state.lock().unwrap();
        let listed = matches!(event, Ok(watcher::Event::InitApply(_)));
        let lease = match event {
            Ok(watcher::Event::Init) => {
                s.lease_listing = true;
                return;
            }
            Ok(watcher::Event::InitDone) => {
                s.lease_listing = false;
                return;
            }
            Ok(watcher::Event::InitApply(l)) => {
                if !s.lease.is_empty() {
                    s.counts.lease_relists += 1;
                }
                // Versions between the last one seen and this one are unknown.
                s.lease_gap_until = revision(&l.metadata);
                l
            }
            Ok(watcher::Event::Apply(l)) => l,
            Ok(watcher::Event::Delete(_)) | Err(_) => return,
        };
        let version = LeaseVersion {
            revision: revision(&lease.metadata),
            holder: lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            observed: now,
            listed,
        };
        if let Some(last) = s.lease.last().cloned()
            && last.holder != version.holder
        {
            s.counts.lease_changes += 1;
            // The old holder's last renew as the watch delivered it. A version from a
            // (re-)list was written before the list, maybe long before: the last renew
            // seen live is then the latest the term can be known to have lasted (a
            // re-list 36 ms before a takeover once looked like a breach, seed 57771848).
            let last_seen_live = s
                .lease
                .iter()
                .rev()
                .take_while(|v| v.holder == last.holder)
                .find(|v| !v.listed)
                .map(|v| v.observed);
            if let (Some(old), Some(new), Some(renewed)) =
                (&last.holder, &version.holder, last_seen_live)
                && version.revision > s.lease_gap_until
            {
                let waited = now.duration_since(renewed);
                let needed = signed(self.cfg.lease_duration.saturating_sub(self.cfg.slack));
                if waited < needed {
                    self.violate(
                        &mut s,
                        format!(
                            "Lease taken over by {new} {waited:?} after {old}'s last renew (lease duration {:?}): two holders in one term",
                            self.cfg.lease_duration
                        ),
                    );
                }
            }
        }
        s.lease.push(version);
    }

    fn tick(&self) {
        let now = Timestamp::now();
        let mut s = self.state.lock().unwrap();
        self.check_writes(&mut s, now);
        if !self.quiet(&s, now) || !self.past_edge_bound(&s, now) {
            s.starved_since = None;
            s.overdue_since = None;
            return;
        }
        let Some(seg) = s.plan.at(now) else {
            return;
        };
        let expected = &seg.nodes;
        let mut missing = Vec::new();
        let mut extra = Vec::new();
        for (name, n) in &s.nodes {
            match (expected.contains(name), Cond::is_true(&n.um)) {
                (true, false) => missing.push(name.clone()),
                (false, true) => extra.push(name.clone()),
                _ => {}
            }
        }
        if !missing.is_empty() || !extra.is_empty() {
            missing.sort();
            extra.sort();
            let (start, end) = (seg.start, seg.end);
            self.violate(
                &mut s,
                format!(
                    "the nodes differ from kumaco plan for [{start}, {end}): {} should be UnderMaintenance=True and are not (first: {:?}), {} are and should not be (first: {:?})",
                    missing.len(),
                    missing.first(),
                    extra.len(),
                    extra.first()
                ),
            );
            return;
        }
        s.counts.plan_checks += 1;
        let in_progress = s.nodes.values().filter(|n| Cond::is_true(&n.mip)).count();
        let waiting = s
            .nodes
            .iter()
            .find(|(_, n)| Cond::is_true(&n.um) && n.rr && !Cond::is_true(&n.mip))
            .map(|(name, _)| name.clone());
        let overdue = s
            .nodes
            .iter()
            .find(|(_, n)| Cond::is_true(&n.mip) && !n.rr)
            .map(|(name, _)| name.clone());
        let allowed = signed(self.cfg.edge_bound + self.cfg.slack);
        match waiting.filter(|_| in_progress < self.cfg.ceiling) {
            Some(node) => {
                let since = *s.starved_since.get_or_insert(now);
                if now.duration_since(since) >= allowed {
                    self.violate(
                        &mut s,
                        format!(
                            "node {node} waits for maintenance in its window with RebootRequired=True while {in_progress} of {} slots are in use, since {since}",
                            self.cfg.ceiling
                        ),
                    );
                }
            }
            None => s.starved_since = None,
        }
        match overdue {
            Some(node) => {
                let since = *s.overdue_since.get_or_insert(now);
                if now.duration_since(since) >= allowed {
                    self.violate(
                        &mut s,
                        format!(
                            "node {node} is still MaintenanceInProgress=True with RebootRequired no longer True, since {since}"
                        ),
                    );
                }
            }
            None => s.overdue_since = None,
        }
    }

    /// Every write of kumaco's lands in the term of a live holder (see the module docs).
    fn check_writes(&self, s: &mut State, now: Timestamp) {
        let lease_revision = s.lease.last().map_or(0, |l| l.revision);
        let wait = signed(self.cfg.slack + Duration::from_secs(1));
        while let Some(w) = s.pending.front().cloned() {
            // The Lease watch has passed the write's revision, or it has had time to.
            if w.revision > lease_revision && now.duration_since(w.observed) < wait {
                break;
            }
            s.pending.pop_front();
            if w.revision <= s.lease_gap_until {
                continue;
            }
            let i = s.lease.partition_point(|l| l.revision < w.revision);
            let Some(term) = i.checked_sub(1).map(|i| s.lease[i].clone()) else {
                continue;
            };
            s.counts.writes_checked += 1;
            let what = format!("node {} (resourceVersion {})", w.node, w.revision);
            match &term.holder {
                None => self.violate(
                    s,
                    format!(
                        "kumaco wrote {what} while the Lease was released (revision {}): no replica led",
                        term.revision
                    ),
                ),
                Some(holder) => {
                    if let Some(died) = s.dead.get(holder).copied()
                        && w.observed.duration_since(died) > signed(self.cfg.slack)
                    {
                        self.violate(
                            s,
                            format!(
                                "kumaco wrote {what} in the term of {holder}, killed at {died}: a replica wrote without holding the Lease"
                            ),
                        );
                    }
                }
            }
        }
    }
}
