//! The independent checker of `kumaco-chaos`: its own watches on the scope's nodes and
//! on kumaco's Lease, sharing nothing with kumaco (no metrics, no logs), and the
//! contract's promises checked against what they show.
//!
//! At every node event, whatever the faults:
//! - the count of nodes with `MaintenanceInProgress=True` is at most the ceiling (§5);
//! - a maintenance starts only on a node that is `UnderMaintenance=True`,
//!   `RebootRequired=True` and available (Ready neither False nor Unknown, not cordoned)
//!   in the same version (§5 Start);
//! - kumaco never starts a node while the disrupted nodes (in progress or unavailable,
//!   each once) are at the ceiling, overall and in the node's zone (issue 21): see
//!   "Starts at the ceiling" below;
//! - `lastTransitionTime` changes only with the status, and `UnderMaintenance=False` is
//!   never added to a node without the condition (§4).
//! - one maintenance per requirement: a node never starts twice while its
//!   `RebootRequired=True` is the same episode (the same `lastTransitionTime`), which
//!   with kured's executor would be a second reboot for one requirement (issue 27).
//!
//! In quiet time — no fault active, and `settle` passed since the last one ended — and
//! once `edge_bound + slack` has passed since the last window edge or edit (the
//! contract's 1 s, plus the checker's own watch delay on a loaded machine):
//! - the nodes `UnderMaintenance=True` are exactly those `kumaco plan` puts in
//!   maintenance at that instant, and no `UnderMaintenance` changes (an edge landed
//!   late, or a flap);
//! - no node waits for maintenance (in a window, `RebootRequired=True`, available, not in
//!   progress) while a slot is free overall and in its zone (disrupted nodes below both
//!   ceilings), and none stays in progress once `RebootRequired` is False, for longer
//!   than `edge_bound + slack`.
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
//!
//! Starts at the ceiling. Nodes go down on their own (NotReady, Ready Unknown, cordoned)
//! whenever they like, so the disrupted count may exceed the ceiling; what kumaco
//! promises is never to add to it: when it starts node X, fewer than the ceiling were
//! disrupted, overall and in X's group, *in the cluster as kumaco saw it*. The checker
//! cannot see kumaco's cache, and its own view is not kumaco's: a node that went down
//! while kumaco's write was on its way, or before kumaco's watch delivered it, is no
//! breach. So it counts only what kumaco must have seen, by etcd revision, not by time:
//!
//! - kumaco's apply of X carries the resourceVersion it was derived from as a
//!   precondition (`metadata.resourceVersion`, contract §7), so the version of X just
//!   before the start (in the checker's stream, which is in revision order) is the one
//!   kumaco decided on. kumaco took that version from its node cache, or from its own
//!   pending write, which it derived earlier from its cache, and so on back. Following
//!   X's versions back past kumaco's own writes to the latest one somebody else wrote
//!   (a *foreign* version: something other than kumaco's conditions and the
//!   bookkeeping changed) gives a revision R that kumaco's node cache had reached when
//!   it derived the start: its watch is one stream in revision order (a re-list is a
//!   consistent snapshot, newer), and the cache of one process only moves forward. A
//!   different process (a new leader) has no pending write of its own for X, so it took
//!   the version from its cache.
//! - so every node whose unavailability began at or before R and lasted until the
//!   start, kumaco saw unavailable; every node `MaintenanceInProgress=True` just before
//!   the start, kumaco knew (only kumaco starts maintenances, and a leader writes only
//!   from lists of its own term). Those are counted: fewer than the ceiling, overall
//!   and in X's zone, or it is a violation. A node that went down after R, or came back
//!   in between, is not counted (kumaco may not have seen it); nodes down at the start
//!   that were not counted make the start *raced*, not a breach, and are tallied.
//! - after a re-list of the checker's own watch, a node unavailable in the list counts
//!   from its listed resourceVersion (its unavailability may have begun in the gap), and
//!   X's foreign revision stays the last one seen live (any revision before kumaco's is
//!   a lower bound): both only make fewer nodes count. A start seen only in a re-list is
//!   not checked (no version before it).
//!
//! The same precondition makes "X was available" a check on X's own version: the start
//! changes only kumaco's conditions, so X's Ready and `spec.unschedulable` in it are
//! those kumaco decided on.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
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
/// The condition types kumaco writes: a node version in which nothing else changed may
/// be kumaco's own write.
const KUMACO_TYPES: [&str; 3] = [
    UNDER_MAINTENANCE,
    MAINTENANCE_IN_PROGRESS,
    "MaintenancePlanned",
];
/// The kubelet's condition; False or Unknown makes a node unavailable.
const READY: &str = "Ready";
/// Most nodes a violation message lists.
const LISTED: usize = 12;

/// How often the time-based checks run between events.
const TICK: Duration = Duration::from_millis(250);

/// The checker's parameters.
#[derive(Clone, Debug)]
pub struct CheckerConfig {
    pub ceiling: usize,
    /// The per-group ceiling kumaco runs with (`--max-in-progress-per KEY=N`): the label
    /// key and N. Nodes without the label form one group.
    pub group_ceiling: Option<(String, usize)>,
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
    /// While `RebootRequired=True`: since when (its `lastTransitionTime`), which names the
    /// requirement's episode.
    rr_since: Option<Timestamp>,
    /// The value of the group ceiling's label key (None: no such label, or no groups).
    group: Option<String>,
    /// Why the node is unavailable, as kumaco decodes it (src/node.rs); None: available.
    down: Option<&'static str>,
    /// While unavailable: a revision at or after which the unavailability began and from
    /// which it has lasted (the exact one when seen live, the listed version's after a
    /// re-list).
    down_since: Option<u64>,
    /// The revision of the latest version of the node not written by kumaco as far as
    /// the checker can tell (0: unknown), a lower bound on where kumaco's cache was when
    /// it derived its next write to the node (module docs).
    foreign: u64,
    /// A hash of the node without kumaco's conditions, managedFields and
    /// resourceVersion: it changes with every write of somebody else's.
    fingerprint: u64,
    revision: u64,
}

impl NodeState {
    fn of(node: &Node, group_key: Option<&str>) -> NodeState {
        NodeState {
            um: Cond::of(condition(node, UNDER_MAINTENANCE)),
            mip: Cond::of(condition(node, MAINTENANCE_IN_PROGRESS)),
            rr: condition(node, REBOOT_REQUIRED).is_some_and(|c| c.status == "True"),
            rr_since: condition(node, REBOOT_REQUIRED)
                .filter(|c| c.status == "True")
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            group: group_key.and_then(|k| node.metadata.labels.as_ref()?.get(k).cloned()),
            down: unavailable(node),
            down_since: None,
            foreign: 0,
            fingerprint: fingerprint(node),
            revision: revision(&node.metadata),
        }
    }

    /// In progress, or unavailable: taking a slot (kumaco's `--count-unavailable`).
    fn disrupted(&self) -> bool {
        Cond::is_true(&self.mip) || self.down.is_some()
    }
}

/// Why `node` is unavailable to kumaco, if it is: its `Ready` condition False or
/// Unknown, or `spec.unschedulable` (a node without a Ready condition is available).
fn unavailable(node: &Node) -> Option<&'static str> {
    match condition(node, READY).map(|c| c.status.as_str()) {
        Some("False") => Some("NotReady"),
        Some("Unknown") => Some("Ready Unknown"),
        _ if node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false) =>
        {
            Some("cordoned")
        }
        _ => None,
    }
}

/// What a write of somebody else's changes: the node but for kumaco's conditions,
/// managedFields and resourceVersion (a kumaco apply changes only those).
fn fingerprint(node: &Node) -> u64 {
    let mut n = node.clone();
    n.metadata.managed_fields = None;
    n.metadata.resource_version = None;
    if let Some(conditions) = n.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        conditions.retain(|c| !KUMACO_TYPES.contains(&c.type_.as_str()));
        // An apply may move the others in the list; their order means nothing.
        conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    }
    let mut hasher = std::hash::DefaultHasher::new();
    serde_json::to_vec(&n).unwrap_or_default().hash(&mut hasher);
    hasher.finish()
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
    /// Maintenances started (MaintenanceInProgress → True), seen live.
    pub starts: u64,
    /// Starts seen only in a re-list of the checker's watch: not checked.
    pub starts_in_relists: u64,
    /// Starts checked against the disrupted count (every live one).
    pub starts_checked: u64,
    /// Starts with the certainly seen disrupted count one below a ceiling (overall or
    /// the node's group): the last free slot.
    pub starts_at_last_slot: u64,
    /// Starts with at least one unavailable node among those counted.
    pub starts_with_unavailable_counted: u64,
    /// Starts at which nodes kumaco may not have seen down yet would have filled a
    /// ceiling: they went down on their own while kumaco's write was on its way.
    pub starts_raced: u64,
    /// Nodes seen going unavailable (from available), by why.
    pub went_unavailable: BTreeMap<String, u64>,
    /// The most nodes unavailable at once.
    pub max_unavailable: usize,
    /// The most nodes disrupted (in progress or unavailable) at once, overall and in one
    /// group: above the ceilings when nodes go down on their own.
    pub max_disrupted: usize,
    pub max_disrupted_in_group: usize,
    /// Node events after which the disrupted nodes exceeded a ceiling.
    pub events_above_ceiling: u64,
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
    /// Each node's `RebootRequired` episode of its last start: one maintenance, so one
    /// reboot, per requirement.
    episodes: HashMap<String, Timestamp>,
    /// Nodes waiting for maintenance while a slot is free, since when.
    starved: HashMap<String, Timestamp>,
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
                let mut new = NodeState::of(&n, self.group_key());
                // Down since at most its listed version; and a gap may hide when.
                new.down_since = new.down.map(|_| new.revision);
                let old = s.nodes.get(&name);
                new.foreign = match old {
                    // The first list comes before kumaco runs: every version is foreign.
                    None if s.last_relist.is_none() => new.revision,
                    None => 0,
                    // What changed in the gap, and when, is unknown: the last foreign
                    // revision seen live is still a lower bound.
                    Some(old) => old.foreign,
                };
                if let Some(old) = old
                    && !Cond::is_true(&old.mip)
                    && Cond::is_true(&new.mip)
                {
                    s.counts.starts_in_relists += 1;
                }
                s.listing.get_or_insert_with(HashMap::new).insert(name, new);
                false
            }
            Ok(watcher::Event::InitDone) => {
                let first = s.last_relist.is_none() && s.counts.node_events == 0;
                s.nodes = s.listing.take().unwrap_or_default();
                self.count_disrupted(&mut s);
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

    fn group_key(&self) -> Option<&str> {
        self.cfg.group_ceiling.as_ref().map(|(k, _)| k.as_str())
    }

    /// The disrupted nodes now, overall and in the fullest group, for the figures.
    fn count_disrupted(&self, s: &mut State) {
        let mut overall = 0;
        let mut unavailable = 0;
        let mut groups: HashMap<Option<&str>, usize> = HashMap::new();
        for n in s.nodes.values().filter(|n| n.disrupted()) {
            overall += 1;
            unavailable += usize::from(n.down.is_some());
            *groups.entry(n.group.as_deref()).or_default() += 1;
        }
        let in_group = groups.values().copied().max().unwrap_or(0);
        let c = &mut s.counts;
        c.max_unavailable = c.max_unavailable.max(unavailable);
        c.max_disrupted = c.max_disrupted.max(overall);
        c.max_disrupted_in_group = c.max_disrupted_in_group.max(in_group);
        let group_ceiling = self.cfg.group_ceiling.as_ref().map_or(usize::MAX, |g| g.1);
        if overall > self.cfg.ceiling || in_group > group_ceiling {
            c.events_above_ceiling += 1;
        }
    }

    /// A start of `name` seen live, at `revision`: the disrupted nodes kumaco must have
    /// seen (module docs, "Starts at the ceiling") are fewer than each ceiling. `s.nodes`
    /// holds every other node as it was just before the start.
    fn check_start(&self, s: &mut State, name: &str, old: &NodeState, new: &NodeState, at: &str) {
        s.counts.starts_checked += 1;
        if let Some(since) = new.rr_since
            && s.episodes.insert(name.to_string(), since) == Some(since)
        {
            self.violate(
                s,
                format!(
                    "a second maintenance started on {at} for one requirement \
                     (RebootRequired=True since {since}): a second reboot"
                ),
            );
        }
        if let Some(why) = new.down {
            self.violate(
                s,
                format!(
                    "maintenance started on {at}, which is unavailable ({why}) in the version the start was derived from"
                ),
            );
        }
        // kumaco's cache had reached this revision when it derived the start.
        let seen = old.foreign;
        let group_key = self.group_key();
        // (in progress, unavailable and seen, unavailable and maybe not seen), overall
        // and in the node's group; with the names, for a message.
        #[derive(Default)]
        struct Count {
            in_progress: usize,
            unavailable: usize,
            unseen: usize,
            names: Vec<String>,
        }
        let (mut overall, mut group) = (Count::default(), Count::default());
        for (other, n) in &s.nodes {
            if other == name || !n.disrupted() {
                continue;
            }
            let same_group = group_key.is_some() && n.group == new.group;
            let counts: &mut [&mut Count] = if same_group {
                &mut [&mut overall, &mut group]
            } else {
                &mut [&mut overall]
            };
            for c in counts.iter_mut() {
                if Cond::is_true(&n.mip) {
                    c.in_progress += 1;
                    c.names.push(format!("{other} in progress"));
                } else if n.down_since.is_some_and(|since| since <= seen) {
                    c.unavailable += 1;
                    c.names.push(format!(
                        "{other} {} since resourceVersion {}",
                        n.down.unwrap_or_default(),
                        n.down_since.unwrap_or_default()
                    ));
                } else {
                    c.unseen += 1;
                }
            }
        }
        let ceilings = [
            ("overall".to_string(), &overall, Some(self.cfg.ceiling)),
            (
                format!(
                    "in group {}={}",
                    group_key.unwrap_or_default(),
                    new.group.as_deref().unwrap_or("<none>")
                ),
                &group,
                self.cfg.group_ceiling.as_ref().map(|g| g.1),
            ),
        ];
        let mut last_slot = false;
        let mut raced = false;
        let mut breach = None;
        for (what, c, ceiling) in &ceilings {
            let Some(ceiling) = *ceiling else { continue };
            let counted = c.in_progress + c.unavailable;
            last_slot |= counted + 1 == ceiling;
            raced |= counted < ceiling && counted + c.unseen >= ceiling;
            if counted >= ceiling && breach.is_none() {
                let mut names = c.names.clone();
                names.sort();
                let more = names.len().saturating_sub(LISTED);
                names.truncate(LISTED);
                breach = Some(format!(
                    "maintenance started on {at} while {counted} nodes were disrupted {what} (ceiling {ceiling}): {} in progress, {} unavailable since at most resourceVersion {seen}, which kumaco's cache had reached when it derived the start: {}{}",
                    c.in_progress,
                    c.unavailable,
                    names.join(", "),
                    if more > 0 {
                        format!(", +{more} more")
                    } else {
                        String::new()
                    }
                ));
            }
        }
        s.counts.starts_at_last_slot += u64::from(last_slot);
        s.counts.starts_raced += u64::from(raced);
        s.counts.starts_with_unavailable_counted += u64::from(overall.unavailable > 0);
        if let Some(breach) = breach {
            self.violate(s, breach);
        }
    }

    fn node_changed(&self, s: &mut State, node: &Node, now: Timestamp) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let mut new = NodeState::of(node, self.group_key());
        s.counts.node_events += 1;
        s.last_node_change = Some(now);
        let Some(old) = s.nodes.get(&name).cloned() else {
            // A node created: its first version is its creator's.
            new.foreign = new.revision;
            new.down_since = new.down.map(|_| new.revision);
            s.nodes.insert(name, new);
            self.count_disrupted(s);
            return;
        };
        new.foreign = if new.fingerprint != old.fingerprint {
            new.revision
        } else {
            old.foreign
        };
        new.down_since = match (new.down, old.down_since) {
            (Some(_), Some(since)) => Some(since),
            (Some(why), None) => {
                *s.counts
                    .went_unavailable
                    .entry(why.to_string())
                    .or_default() += 1;
                Some(new.revision)
            }
            (None, _) => None,
        };
        let at = format!("node {name} (resourceVersion {})", new.revision);
        let started = !Cond::is_true(&old.mip) && Cond::is_true(&new.mip);
        if started {
            // Before the start is in the view: the others as they were just before it.
            self.check_start(s, &name, &old, &new, &at);
        }
        s.nodes.insert(name.clone(), new.clone());
        if old.disrupted() != new.disrupted() {
            self.count_disrupted(s);
        }
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
            s.starved.clear();
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
        // Disrupted nodes overall and per group, as the checker sees them now.
        let mut disrupted = 0;
        let mut in_groups: HashMap<Option<&str>, usize> = HashMap::new();
        for n in s.nodes.values().filter(|n| n.disrupted()) {
            disrupted += 1;
            *in_groups.entry(n.group.as_deref()).or_default() += 1;
        }
        let group_ceiling = self.cfg.group_ceiling.as_ref().map(|g| g.1);
        let starved: Vec<(String, usize)> = s
            .nodes
            .iter()
            .filter(|(_, n)| {
                Cond::is_true(&n.um) && n.rr && !Cond::is_true(&n.mip) && n.down.is_none()
            })
            .filter_map(|(name, n)| {
                let in_group = in_groups.get(&n.group.as_deref()).copied().unwrap_or(0);
                let free = disrupted < self.cfg.ceiling
                    && group_ceiling.is_none_or(|ceiling| in_group < ceiling);
                free.then(|| (name.clone(), in_group))
            })
            .collect();
        let overdue = s
            .nodes
            .iter()
            .find(|(_, n)| Cond::is_true(&n.mip) && !n.rr)
            .map(|(name, _)| name.clone());
        let allowed = signed(self.cfg.edge_bound + self.cfg.slack);
        s.starved
            .retain(|name, _| starved.iter().any(|(n, _)| n == name));
        let mut late = None;
        for (node, in_group) in starved {
            let since = *s.starved.entry(node.clone()).or_insert(now);
            if now.duration_since(since) >= allowed && late.is_none() {
                late = Some((node, in_group, since));
            }
        }
        if let Some((node, in_group, since)) = late {
            let group = match &self.cfg.group_ceiling {
                Some((key, ceiling)) => format!(", {in_group} of {ceiling} in its {key}"),
                None => String::new(),
            };
            self.violate(
                &mut s,
                format!(
                    "node {node} waits for maintenance in its window with RebootRequired=True, available, while {disrupted} of {} slots are in use (in progress or unavailable){group}, since {since}",
                    self.cfg.ceiling
                ),
            );
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A node version: `zone`, `MaintenanceInProgress` (None: absent), Ready status,
    /// cordoned, `RebootRequired`, `UnderMaintenance=True`.
    struct V<'a> {
        name: &'a str,
        rv: u64,
        zone: &'a str,
        mip: Option<&'a str>,
        ready: &'a str,
        cordoned: bool,
        rr: bool,
        um: bool,
    }

    impl V<'_> {
        fn node(&self) -> Node {
            let cond = |t: &str, s: &str| {
                json!({ "type": t, "status": s, "reason": "R", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z" })
            };
            let mut conditions = vec![
                cond(READY, self.ready),
                cond(REBOOT_REQUIRED, if self.rr { "True" } else { "False" }),
            ];
            if self.um {
                conditions.push(cond(UNDER_MAINTENANCE, "True"));
            }
            if let Some(m) = self.mip {
                conditions.push(cond(MAINTENANCE_IN_PROGRESS, m));
            }
            serde_json::from_value(json!({
                "metadata": { "name": self.name, "resourceVersion": self.rv.to_string(),
                              "labels": { "zone": self.zone } },
                "spec": { "unschedulable": self.cordoned },
                "status": { "conditions": conditions },
            }))
            .unwrap()
        }
    }

    fn v<'a>(name: &'a str, rv: u64, zone: &'a str) -> V<'a> {
        V {
            name,
            rv,
            zone,
            mip: Some("False"),
            ready: "True",
            cordoned: false,
            rr: true,
            um: true,
        }
    }

    fn ctx(ceiling: usize, group: usize) -> Ctx {
        Ctx {
            cfg: CheckerConfig {
                ceiling,
                group_ceiling: Some(("zone".into(), group)),
                edge_bound: Duration::from_secs(1),
                slack: Duration::from_secs(1),
                settle: Duration::from_secs(1),
                lease_namespace: "ns".into(),
                lease_name: "lease".into(),
                lease_duration: Duration::from_secs(8),
            },
            state: Arc::new(Mutex::new(State::default())),
            violation: Arc::new(watch::channel(false).0),
        }
    }

    fn list(ctx: &Ctx, nodes: &[V]) {
        ctx.node_event(Ok(watcher::Event::Init));
        for n in nodes {
            ctx.node_event(Ok(watcher::Event::InitApply(n.node())));
        }
        ctx.node_event(Ok(watcher::Event::InitDone));
    }

    fn apply(ctx: &Ctx, n: V) {
        ctx.node_event(Ok(watcher::Event::Apply(n.node())));
    }

    fn violations(ctx: &Ctx) -> Vec<String> {
        ctx.state.lock().unwrap().violations.clone()
    }

    fn counts(ctx: &Ctx) -> Counts {
        ctx.state.lock().unwrap().counts.clone()
    }

    /// a in progress, b and x waiting, y elsewhere; all at revision 1-4.
    fn cluster(ctx: &Ctx) {
        list(
            ctx,
            &[
                V {
                    mip: Some("True"),
                    ..v("a", 1, "z1")
                },
                v("b", 2, "z1"),
                v("x", 3, "z1"),
                v("y", 4, "z2"),
            ],
        );
    }

    #[test]
    fn a_start_while_a_node_kumaco_saw_down_fills_the_ceiling_is_a_violation() {
        let ctx = ctx(2, 5);
        cluster(&ctx);
        apply(
            &ctx,
            V {
                ready: "False",
                ..v("b", 10, "z1")
            },
        );
        apply(
            &ctx,
            V {
                ready: "True",
                cordoned: true,
                ..v("y", 12, "z2")
            },
        );
        // Somebody else changes x after b and y went down (cordoned and back): kumaco's
        // cache had them when it derived the start.
        apply(
            &ctx,
            V {
                cordoned: true,
                ..v("x", 13, "z1")
            },
        );
        apply(&ctx, v("x", 14, "z1"));
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 15, "z1")
            },
        );
        let found = violations(&ctx);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("3 nodes were disrupted overall (ceiling 2)"),
            "{found:?}"
        );
        assert_eq!(counts(&ctx).starts_checked, 1);
        assert_eq!(counts(&ctx).starts_with_unavailable_counted, 1);
    }

    #[test]
    fn a_node_down_after_the_version_kumaco_decided_on_is_no_violation() {
        let ctx = ctx(2, 5);
        cluster(&ctx);
        // x's last foreign version, then b goes down, then kumaco's start of x.
        apply(
            &ctx,
            V {
                cordoned: true,
                ..v("x", 10, "z1")
            },
        );
        apply(&ctx, v("x", 11, "z1"));
        apply(
            &ctx,
            V {
                ready: "Unknown",
                ..v("b", 12, "z1")
            },
        );
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 13, "z1")
            },
        );
        assert_eq!(violations(&ctx), Vec::<String>::new());
        let c = counts(&ctx);
        assert_eq!((c.starts_checked, c.starts_raced), (1, 1));
        assert_eq!(c.went_unavailable.get("Ready Unknown"), Some(&1));
        assert_eq!(c.max_disrupted, 3);
    }

    #[test]
    fn kumacos_own_writes_do_not_advance_what_it_must_have_seen() {
        let ctx = ctx(2, 5);
        cluster(&ctx);
        apply(
            &ctx,
            V {
                rr: false,
                ..v("x", 10, "z1")
            },
        );
        apply(&ctx, v("x", 11, "z1"));
        apply(
            &ctx,
            V {
                ready: "False",
                ..v("b", 12, "z1")
            },
        );
        // kumaco writes x twice (its reason, then the start): derived, maybe, from a
        // cache still at revision 11.
        apply(
            &ctx,
            V {
                mip: Some("Unknown"),
                ..v("x", 13, "z1")
            },
        );
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 14, "z1")
            },
        );
        assert_eq!(violations(&ctx), Vec::<String>::new());
        assert_eq!(counts(&ctx).starts_raced, 1);
    }

    #[test]
    fn a_full_zone_is_a_ceiling_of_its_own() {
        let ctx = ctx(8, 1);
        cluster(&ctx);
        // y, in another zone, in progress: no matter for x's zone.
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("y", 10, "z2")
            },
        );
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 11, "z1")
            },
        );
        let found = violations(&ctx);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("disrupted in group zone=z1 (ceiling 1)")
                && found[0].contains("a in progress"),
            "{found:?}"
        );
    }

    /// The loop of issue 27 as the checker sees it: a node in progress ends (a reboot)
    /// while its requirement is still True from the same episode, and starts again.
    #[test]
    fn a_second_start_for_one_requirement_is_a_violation() {
        let ctx = ctx(8, 8);
        cluster(&ctx);
        let second = "a second maintenance started";
        apply(&ctx, v("x", 10, "z1"));
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 11, "z1")
            },
        );
        assert!(!violations(&ctx).iter().any(|f| f.contains(second)));
        apply(&ctx, v("x", 12, "z1"));
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 13, "z1")
            },
        );
        let found = violations(&ctx);
        assert!(found.iter().any(|f| f.contains(second)), "{found:?}");
    }

    #[test]
    fn a_start_on_an_unavailable_node_is_a_violation() {
        let ctx = ctx(8, 8);
        cluster(&ctx);
        apply(
            &ctx,
            V {
                cordoned: true,
                ..v("x", 10, "z1")
            },
        );
        apply(
            &ctx,
            V {
                cordoned: true,
                mip: Some("True"),
                ..v("x", 11, "z1")
            },
        );
        let found = violations(&ctx);
        assert!(
            found
                .iter()
                .any(|f| f.contains("which is unavailable (cordoned)")),
            "{found:?}"
        );
    }

    #[test]
    fn after_a_relist_a_node_down_counts_from_its_listed_version() {
        let ctx = ctx(2, 5);
        cluster(&ctx);
        apply(
            &ctx,
            V {
                ready: "False",
                ..v("b", 10, "z1")
            },
        );
        // A gap: the list shows b still down (it may have come back and gone down again
        // at 20), x changed by somebody at 15, or by kumaco: unknown.
        list(
            &ctx,
            &[
                V {
                    mip: Some("True"),
                    ..v("a", 1, "z1")
                },
                V {
                    ready: "False",
                    ..v("b", 20, "z1")
                },
                v("x", 15, "z1"),
                v("y", 4, "z2"),
            ],
        );
        apply(
            &ctx,
            V {
                mip: Some("True"),
                ..v("x", 21, "z1")
            },
        );
        // x's foreign revision is still 3 (from the first list): b's 20 is after it.
        assert_eq!(violations(&ctx), Vec::<String>::new());
        assert_eq!(counts(&ctx).starts_raced, 1);
    }
}
