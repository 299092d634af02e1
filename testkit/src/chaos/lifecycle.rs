//! Nodes going down and coming back, for `kumaco-chaos`: what kumaco's
//! `--count-unavailable` reads (the `Ready` condition, `spec.unschedulable`), changed
//! as a cluster changes it, none of it kumaco's doing.
//!
//! - [`Outage`]: one node made NotReady (`Ready=False`), Ready Unknown (as the node
//!   controller marks a silent kubelet) or cordoned (`spec.unschedulable=true`) for a
//!   while, then brought back: the harness's seeded faults ([`Outage::draw`]).
//! - [`Drainer`]: the rest of kured around a reboot, beside the stand-in agent
//!   ([`crate::agent::RebootAgent`], which only reports the reboot done): when kumaco
//!   lets a node in (`MaintenanceInProgress=True` with `RebootRequired=True`) it cordons
//!   it (the drain), makes it NotReady (the reboot; Ready Unknown a quarter of the
//!   time), and once the agent has set `RebootRequired=False` makes it Ready and, after
//!   a while, uncordons it. kumaco ends the maintenance when `RebootRequired` goes False,
//!   so a node that completed holds its slot while it recovers: the realistic case.
//!   With [`Evicting`] (kumaco-chaos `--budgets`) the drain is kured's: after the cordon
//!   every pod of the node that a drain does not leave is evicted through the eviction
//!   API ([`crate::workloads::evict_all`]), refused evictions retried every
//!   [`DRAIN_RETRY`] until they go, with no timeout, and the agent's reboot waits for the
//!   drain; each refusal is reported.
//!
//! No kubelet runs: the test API server has no node controller either, so a status
//! written here stays until written again.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::Rng;
use crate::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED, RebootAgent, random_duration};
use crate::nodes::{condition, watch_nodes};
use crate::workloads::{Refused, evict_all};

/// The field manager of the harness's outages.
pub const OUTAGE_MANAGER: &str = "chaos-node-lifecycle";
/// The field manager of the drainer's writes (kured's).
pub const DRAINER_MANAGER: &str = "kured";

/// How long a write here keeps trying: the API server may be down for seconds
/// (kumaco-chaos crashes it), and a node left down would hold a slot for the rest of
/// the run.
const RETRY_FOR: Duration = Duration::from_secs(120);
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// How a node is unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Down {
    /// `Ready=False`.
    NotReady,
    /// `Ready=Unknown`.
    Unknown,
    /// `spec.unschedulable=true`.
    Cordoned,
}

impl Down {
    const ALL: [Down; 3] = [Down::NotReady, Down::Unknown, Down::Cordoned];
    const WEIGHTS: [u32; 3] = [5, 2, 3];

    pub fn name(self) -> &'static str {
        match self {
            Down::NotReady => "NotReady",
            Down::Unknown => "Ready Unknown",
            Down::Cordoned => "cordoned",
        }
    }
}

/// Sets the `Ready` condition of `node` to `status` as a kubelet (or the node
/// controller, for `Unknown`) reports it: a strategic merge patch of the status keyed by
/// type, `lastTransitionTime` now. Retried for [`RETRY_FOR`].
pub async fn set_ready(
    client: &kube::Client,
    node: &str,
    status: &str,
    manager: &str,
) -> Result<()> {
    let now = Time(Timestamp::now());
    let reason = match status {
        "True" => "KubeletReady",
        "False" => "KubeletNotReady",
        _ => "NodeStatusUnknown",
    };
    let patch = json!({ "status": { "conditions": [{
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": format!("set by kumaco-chaos ({manager})"),
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }]}});
    let params = PatchParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    };
    let api: Api<Node> = Api::all(client.clone());
    retry(|| {
        let (api, params, patch) = (&api, &params, Patch::Strategic(patch.clone()));
        async move { api.patch_status(node, params, &patch).await.map(drop) }
    })
    .await
    .with_context(|| format!("setting Ready={status} on node {node}"))
}

/// Cordons (`true`) or uncordons `node`, as `kubectl cordon` does (a merge patch of
/// `spec.unschedulable`). Retried for [`RETRY_FOR`].
pub async fn set_cordoned(
    client: &kube::Client,
    node: &str,
    cordoned: bool,
    manager: &str,
) -> Result<()> {
    let value = if cordoned { json!(true) } else { json!(null) };
    let patch = json!({ "spec": { "unschedulable": value } });
    let params = PatchParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    };
    let api: Api<Node> = Api::all(client.clone());
    retry(|| {
        let (api, params, patch) = (&api, &params, Patch::Merge(patch.clone()));
        async move { api.patch(node, params, &patch).await.map(drop) }
    })
    .await
    .with_context(|| format!("setting spec.unschedulable={cordoned} on node {node}"))
}

async fn retry<T, F>(mut request: impl FnMut() -> F) -> Result<T>
where
    F: Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), request()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) if tokio::time::Instant::now() >= deadline => return Err(e.into()),
            Err(_) if tokio::time::Instant::now() >= deadline => {
                anyhow::bail!("no answer within 10 s, for {RETRY_FOR:?}")
            }
            _ => tokio::time::sleep(RETRY_EVERY).await,
        }
    }
}

/// Makes `node` unavailable in the way `down` says.
pub async fn go_down(client: &kube::Client, node: &str, down: Down, manager: &str) -> Result<()> {
    match down {
        Down::NotReady => set_ready(client, node, "False", manager).await,
        Down::Unknown => set_ready(client, node, "Unknown", manager).await,
        Down::Cordoned => set_cordoned(client, node, true, manager).await,
    }
}

/// Brings `node` back from `down`.
pub async fn come_back(client: &kube::Client, node: &str, down: Down, manager: &str) -> Result<()> {
    match down {
        Down::NotReady | Down::Unknown => set_ready(client, node, "True", manager).await,
        Down::Cordoned => set_cordoned(client, node, false, manager).await,
    }
}

// ---------------------------------------------------------------------------------------
// The harness's outages

/// One node down for a while: a fault of the seeded schedule.
#[derive(Clone, Debug, Serialize)]
pub struct Outage {
    /// Index of the node in the fleet.
    pub node: usize,
    pub down: Down,
    pub length: Duration,
}

impl Outage {
    /// The outages of one episode, drawn from `rng` (nothing else): 1-3 nodes anywhere,
    /// or with probability `zone_chance` 4-6 nodes of one of `zones` zones at once (node
    /// `i` is in zone `i % zones`: more than a zone's ceiling go down together). Each is
    /// NotReady, Ready Unknown or cordoned (weights 5:2:3) for 5-90 s.
    pub fn draw(rng: &mut Rng, nodes: usize, zones: usize, zone_chance: f64) -> Vec<Outage> {
        let zone_outage = rng.chance(zone_chance);
        let count = if zone_outage {
            4 + rng.below(3)
        } else {
            1 + rng.below(3)
        };
        let zone = rng.below(zones);
        let mut picked = BTreeSet::new();
        let mut outages = Vec::new();
        for _ in 0..count {
            let node = if zone_outage {
                zone + zones * rng.below(nodes.div_ceil(zones))
            } else {
                rng.below(nodes)
            };
            let down = Down::ALL[rng.weighted(&Down::WEIGHTS)];
            let length = rng.duration(Duration::from_secs(5), Duration::from_secs(90));
            if node < nodes && picked.insert(node) {
                outages.push(Outage { node, down, length });
            }
        }
        outages
    }

    /// Runs the outage on `name` in the background: down now, back after its length.
    /// Errors are printed (a node that does not come back holds a slot: the run's
    /// figures show it).
    pub fn spawn(&self, client: kube::Client, name: String) -> JoinHandle<()> {
        let (down, length) = (self.down, self.length);
        tokio::spawn(async move {
            if let Err(e) = go_down(&client, &name, down, OUTAGE_MANAGER).await {
                eprintln!("outage: {e:#}");
                return;
            }
            tokio::time::sleep(length).await;
            if let Err(e) = come_back(&client, &name, down, OUTAGE_MANAGER).await {
                eprintln!("outage: {e:#}");
            }
        })
    }
}

// ---------------------------------------------------------------------------------------
// The drainer

/// The drainer's pauses (random within each range: the workload, not the seed).
#[derive(Clone, Copy, Debug)]
pub struct DrainSpec {
    /// From the start of maintenance to the cordon.
    pub to_cordon: (Duration, Duration),
    /// From the cordon to NotReady (the drain).
    pub drain: (Duration, Duration),
    /// From `RebootRequired=False` to Ready (the node back).
    pub to_ready: (Duration, Duration),
    /// From Ready to the uncordon (kured's checks before it lets the node go).
    pub to_uncordon: (Duration, Duration),
    /// How often NotReady is Ready Unknown instead.
    pub unknown_share: f64,
}

/// How often a drain asks again for the evictions a budget refused (kured's drain with
/// no timeout).
pub const DRAIN_RETRY: Duration = Duration::from_secs(1);

/// Where a refused eviction is reported: the node drained and the refusal.
pub type OnRefused = Arc<dyn Fn(&str, &Refused) + Send + Sync>;

/// The drain through the eviction API (module docs).
#[derive(Clone)]
pub struct Evicting {
    /// The evictions' client, without kube's retries of 429
    /// ([`crate::ApiServer::client_without_retries`]).
    pub client: kube::Client,
    /// Holds each node's reboot until its drain is done.
    pub agent: Arc<RebootAgent>,
    pub on_refused: OnRefused,
}

/// What the drainer did, for the figures.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DrainCounts {
    pub drained: u64,
    /// Drains through the eviction API done, evictions refused, and drain rounds that
    /// failed (the API server down: retried).
    pub evicting_drains_done: u64,
    pub evictions_refused: u64,
    pub eviction_round_errors: u64,
    pub not_ready: u64,
    pub unknown: u64,
    pub uncordoned: u64,
    pub errors: u64,
}

/// kured's drain, reboot and uncordon around each maintenance (module docs). Dropping it
/// stops it, sequences in flight included.
pub struct Drainer {
    shared: Arc<DrainShared>,
    task: JoinHandle<()>,
}

struct DrainShared {
    client: kube::Client,
    spec: DrainSpec,
    evicting: Option<Evicting>,
    /// Whether each node is `RebootRequired=True`, as last seen.
    reboot_required: Mutex<HashMap<String, bool>>,
    changed: Notify,
    /// (node, lastTransitionTime of MaintenanceInProgress=True): periods handled.
    handled: Mutex<BTreeSet<(String, String)>>,
    in_flight: Mutex<Vec<JoinHandle<()>>>,
    counts: Mutex<DrainCounts>,
    unknown_draws: AtomicU64,
}

impl Drainer {
    /// Starts on the nodes matching `selector`; returns once its watch has listed them.
    /// With `evicting`, drains through the eviction API (module docs).
    pub async fn start(
        client: &kube::Client,
        selector: &str,
        spec: DrainSpec,
        evicting: Option<Evicting>,
    ) -> Result<Drainer> {
        let shared = Arc::new(DrainShared {
            client: client.clone(),
            spec,
            evicting,
            reboot_required: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            handled: Mutex::new(BTreeSet::new()),
            in_flight: Mutex::new(Vec::new()),
            counts: Mutex::new(DrainCounts::default()),
            unknown_draws: AtomicU64::new(0),
        });
        let task = watch_nodes(client, selector, Duration::from_secs(30), "the drainer", {
            let shared = shared.clone();
            move |n| shared.consider(n)
        })
        .await?;
        Ok(Drainer { shared, task })
    }

    pub fn counts(&self) -> DrainCounts {
        self.shared.counts.lock().unwrap().clone()
    }
}

impl Drop for Drainer {
    fn drop(&mut self) {
        self.task.abort();
        for handle in self.shared.in_flight.lock().unwrap().drain(..) {
            handle.abort();
        }
    }
}

impl DrainShared {
    fn consider(self: &Arc<Self>, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let rr = condition(node, REBOOT_REQUIRED).is_some_and(|c| c.status == "True");
        self.reboot_required
            .lock()
            .unwrap()
            .insert(name.clone(), rr);
        self.changed.notify_waiters();
        let Some(mip) = condition(node, MAINTENANCE_IN_PROGRESS) else {
            return;
        };
        if mip.status != "True" || !rr {
            return;
        }
        let period = format!("{:?}", mip.last_transition_time);
        if !self.handled.lock().unwrap().insert((name.clone(), period)) {
            return;
        }
        if let Some(e) = &self.evicting {
            // Before the agent's pause can end: its reboot waits for the drain.
            e.agent.hold(&name);
        }
        let shared = self.clone();
        let handle = tokio::spawn(async move {
            if let Err(e) = shared.reboot(&name).await {
                shared.counts.lock().unwrap().errors += 1;
                eprintln!("drainer: {e:#}");
            }
        });
        let mut in_flight = self.in_flight.lock().unwrap();
        in_flight.retain(|h| !h.is_finished());
        in_flight.push(handle);
    }

    async fn reboot(&self, node: &str) -> Result<()> {
        let spec = self.spec;
        let pause = |range: (Duration, Duration)| random_duration(range.0, range.1);
        tokio::time::sleep(pause(spec.to_cordon)).await;
        set_cordoned(&self.client, node, true, DRAINER_MANAGER).await?;
        self.counts.lock().unwrap().drained += 1;
        if let Some(evicting) = &self.evicting {
            self.drain(node, evicting).await;
            evicting.agent.release(node);
        }
        tokio::time::sleep(pause(spec.drain)).await;
        let draw = self.unknown_draws.fetch_add(1, Ordering::Relaxed);
        // Every so many reboots the node controller gets to say Unknown first.
        let unknown = spec.unknown_share > 0.0
            && (draw as f64 * spec.unknown_share).floor()
                != ((draw + 1) as f64 * spec.unknown_share).floor();
        let status = if unknown { "Unknown" } else { "False" };
        set_ready(&self.client, node, status, DRAINER_MANAGER).await?;
        {
            let mut counts = self.counts.lock().unwrap();
            if unknown {
                counts.unknown += 1;
            } else {
                counts.not_ready += 1;
            }
        }
        // The reboot: until the agent reports it done (bounded: the agent gives up
        // after a minute of errors).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        loop {
            let notified = self.changed.notified();
            let rr = self
                .reboot_required
                .lock()
                .unwrap()
                .get(node)
                .copied()
                .unwrap_or(false);
            if !rr || tokio::time::Instant::now() >= deadline {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
        tokio::time::sleep(pause(spec.to_ready)).await;
        set_ready(&self.client, node, "True", DRAINER_MANAGER).await?;
        tokio::time::sleep(pause(spec.to_uncordon)).await;
        set_cordoned(&self.client, node, false, DRAINER_MANAGER).await?;
        self.counts.lock().unwrap().uncordoned += 1;
        Ok(())
    }
}

impl DrainShared {
    /// kured's drain: eviction rounds until none is refused, for as long as it takes
    /// (the API server may be down: a failed round is retried too).
    async fn drain(&self, node: &str, evicting: &Evicting) {
        loop {
            match evict_all(&evicting.client, node).await {
                Ok(refused) if refused.is_empty() => break,
                Ok(refused) => {
                    self.counts.lock().unwrap().evictions_refused += refused.len() as u64;
                    for r in &refused {
                        (evicting.on_refused)(node, r);
                    }
                }
                Err(_) => self.counts.lock().unwrap().eviction_round_errors += 1,
            }
            // The drain's retry: the scenario, not synchronisation.
            tokio::time::sleep(DRAIN_RETRY).await;
        }
        self.counts.lock().unwrap().evicting_drains_done += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outages_replay_from_the_seed_and_stay_in_range() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| Outage::draw(&mut rng, 300, 4, 0.15))
                .collect::<Vec<_>>()
        };
        let (a, b) = (draw(7), draw(7));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        let all: Vec<&Outage> = a.iter().flatten().collect();
        assert!(all.iter().all(|o| o.node < 300));
        assert!(
            all.iter()
                .all(|o| (5.0..90.0).contains(&o.length.as_secs_f64()))
        );
        for kind in Down::ALL {
            assert!(all.iter().any(|o| o.down == kind), "{kind:?} never drawn");
        }
        // Zone outages: more than 3 nodes of one zone at once.
        assert!(a.iter().any(|episode| episode.len() > 3
            && episode.iter().all(|o| o.node % 4 == episode[0].node % 4)));
    }
}
