//! The independent checker of `kumaco-chaos`: its own watches on the scope's nodes and
//! on kumaco's Lease, sharing nothing with kumaco (no metrics, no logs), and kumaco's
//! promises checked against what they show. Each part checks one set of promises:
//!
//! - [`versions`], at every node version, whatever the faults: at most the ceiling of
//!   nodes `MaintenanceInProgress=True`; a start only on a node `UnderMaintenance=True`,
//!   `RebootRequired=True` and available in the version it was derived from; a
//!   `lastTransitionTime` that changes only with the status; no `UnderMaintenance=False`
//!   added to a node without the condition;
//! - [`ceiling`], at every start: the disrupted nodes kumaco must have seen (in progress
//!   or unavailable, each once) were below the ceiling overall and in the node's zone,
//!   and the node had not started already for the same `RebootRequired` episode (a
//!   second reboot for one requirement);
//! - [`quiet`], in quiet time: the nodes `UnderMaintenance=True` are those `kumaco plan`
//!   says, no node waits while a slot is free, none stays in progress once its
//!   requirement cleared;
//! - [`leadership`]: a Lease holder is replaced only after its term, and every write of
//!   kumaco's lands in the term of a live holder;
//! - [`budgets`] (`--budgets`): no eviction of the drain of a node kumaco started is
//!   refused ([`Checker::on_refused`] is where the drainer reports them).
//!
//! Writes: [`Checker::counts`] gives the node versions in which kumaco's conditions
//! changed; the harness compares them with the API server's count of applies over a
//! quiet tail (every apply must change something).

mod budgets;
mod ceiling;
mod leadership;
mod quiet;
#[cfg(test)]
mod tests;
mod versions;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::Api;
use kube::runtime::watcher;
use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::lifecycle::OnRefused;
use super::plan::Plan;
use leadership::{LeaseVersion, Write};
use versions::NodeState;

pub const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
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
    /// kumaco's bound on a window edge: the condition changes within it (1 second).
    pub edge_bound: Duration,
    /// The checker's own allowance: its watch's delay and a loaded machine.
    pub slack: Duration,
    /// How long kumaco may take to recover after a fault ends (a new leader, re-lists).
    pub settle: Duration,
    pub lease_namespace: String,
    pub lease_name: String,
    pub lease_duration: Duration,
    /// Nodes whose pods are under budgets that may refuse for a while (`--budgets`):
    /// kumaco may hold them while slots are free, so they are not checked for waiting.
    pub budget_nodes: BTreeSet<String>,
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
    /// Evictions refused in the drains of nodes kumaco started (each a violation).
    pub evictions_refused: u64,
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
    ctx: Ctx,
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
            ctx,
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

    /// Where the drainer reports the evictions refused in a drain of a node kumaco
    /// started ([`budgets`]).
    pub fn on_refused(&self) -> OnRefused {
        let ctx = self.ctx.clone();
        std::sync::Arc::new(move |node, refused| ctx.eviction_refused(node, refused))
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
}
