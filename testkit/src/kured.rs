//! kured v2's node daemons as they behave, not as a brain would wish (timings, drains and
//! failures as kured's code has them, so that kumaco is tested against the real thing): the
//! reboot-required detector and the reboot daemon of kured's public v2 prototype, one
//! pair per node, against a real API server.
//!
//! - The **detector** checks its node's sentinel on a ticker, the first check one period
//!   after it starts, and writes `kured.dev/RebootRequired` when the status changes or
//!   its heartbeat is a period old. After a reboot it reports the old value until that
//!   first check: it lags.
//! - The **executor** acts the moment it starts (the initial list) and on every change of
//!   its node's in-progress condition: when True it cordons the node (remembering that it
//!   did), drains it as kubectl's drain helper does (every pod but DaemonSet and mirror
//!   pods evicted through the eviction API; an eviction a PodDisruptionBudget refuses is
//!   retried every [`DRAIN_RETRY`], for ever, as kured's default `--drain-timeout` of 0
//!   does) and reboots; when False it uncordons a node it cordoned.
//! - A **reboot** stops both daemons, clears the sentinel (the update is installed), takes
//!   the node NotReady for a while, brings it back Ready with a new
//!   `status.nodeInfo.bootID`, as a kubelet does, and starts the daemons again a moment
//!   later (their pods start after the kubelet).
//!
//! A brain that keeps the node in progress because the requirement still reads True gets
//! it rebooted again at once: the loop [`Kured::reboots`] counts.
//!
//! [`Kured::start_drawn`] draws each reboot's downtime and each restart of the daemons
//! per node and per reboot from a seeded distribution ([`Draws`]) instead of the spec's
//! fixed ones: a fleet whose maintenances take as long as real ones do, differently on
//! every node, the same again for the same seed (`kumaco-forecast-bench`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::agent::REBOOT_REQUIRED;
use crate::nodes::condition;
pub use crate::workloads::drain_leaves;
use crate::workloads::evict_all;

/// The field manager of the detector's writes.
pub const DETECTOR: &str = "kured-reboot-required-detector";
/// The field manager of the reboot daemon's writes.
pub const EXECUTOR: &str = "kured-reboot-daemon";
/// The field manager of the stand-in kubelet's writes (Ready, bootID).
pub const KUBELET: &str = "kubelet";
/// Marks a node the executor cordoned (kured keeps the earlier `unschedulable` so that it
/// never uncordons a node someone else cordoned).
const CORDONED_BY_EXECUTOR: &str = "kumaco.test/cordoned-by-reboot-daemon";

/// How the daemons behave.
#[derive(Clone, Debug)]
pub struct KuredSpec {
    /// The detector's period (kured's `--period`).
    pub period: Duration,
    /// How long a reboot keeps the node NotReady.
    pub reboot: Duration,
    /// From the node's Ready to its daemons running.
    pub daemon_delay: Duration,
    /// The condition the executor reads: `MaintenanceInProgress`, or the prototype's
    /// `kured.dev/maintenance-in-progress`.
    pub in_progress: String,
}

/// What happened, for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Happened {
    /// The executor cordoned the node (it is disrupted from here).
    Cordoned,
    Rebooted,
    /// The executor uncordoned it (it is back in service).
    Uncordoned,
    /// The API server refused an eviction of the drain (a PodDisruptionBudget: 429, or a
    /// pod under two budgets: 500); the drain retries it.
    EvictionRefused {
        pod: String,
    },
}

/// How long the drain waits before asking again for an eviction a budget refused
/// (kubectl's drain helper waits 5 s).
pub const DRAIN_RETRY: Duration = Duration::from_millis(500);

struct Shared {
    client: kube::Client,
    /// The drain's client ([`Kured::start_evicting`]).
    evictions: kube::Client,
    spec: KuredSpec,
    /// Per-node durations instead of the spec's `reboot` and `daemon_delay`.
    draws: Option<Draws>,
    /// Reboots each node still needs: its sentinel is set while above 0.
    needs: Mutex<BTreeMap<String, u32>>,
    boots: Mutex<BTreeMap<String, u32>>,
    log: Mutex<Vec<(Timestamp, String, Happened)>>,
}

/// kured's daemons on a set of nodes. Dropping it stops them.
pub struct Kured {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Kured {
    /// Boots each node (Ready, a boot ID) with the reboots it needs (the detector reported
    /// them before: `RebootRequired=True` now when above 0), and starts its daemons.
    pub async fn start(
        client: &kube::Client,
        nodes: &[(String, u32)],
        spec: KuredSpec,
    ) -> Result<Kured> {
        Self::start_with(client, client, nodes, spec, None).await
    }

    /// [`Kured::start`], the drain's evictions through `evictions`, a client without
    /// kube's retries of 429 ([`crate::ApiServer::client_without_retries`]): with the
    /// default client, an eviction a PodDisruptionBudget refuses is retried inside the
    /// client for minutes before the drain sees the refusal.
    pub async fn start_evicting(
        client: &kube::Client,
        evictions: &kube::Client,
        nodes: &[(String, u32)],
        spec: KuredSpec,
    ) -> Result<Kured> {
        Self::start_with(client, evictions, nodes, spec, None).await
    }

    /// [`Kured::start`], each reboot's downtime and each restart of the daemons after it
    /// drawn from `draws` (the spec's `reboot` and `daemon_delay` are not used).
    pub async fn start_drawn(
        client: &kube::Client,
        nodes: &[(String, u32)],
        spec: KuredSpec,
        draws: Draws,
    ) -> Result<Kured> {
        Self::start_with(client, client, nodes, spec, Some(draws)).await
    }

    async fn start_with(
        client: &kube::Client,
        evictions: &kube::Client,
        nodes: &[(String, u32)],
        spec: KuredSpec,
        draws: Option<Draws>,
    ) -> Result<Kured> {
        let shared = Arc::new(Shared {
            client: client.clone(),
            evictions: evictions.clone(),
            spec,
            draws,
            needs: Mutex::new(nodes.iter().cloned().collect()),
            boots: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
        });
        for (node, needs) in nodes {
            shared.boot(node).await?;
            shared.report(node, *needs > 0).await?;
        }
        let tasks = nodes
            .iter()
            .map(|(n, _)| tokio::spawn(life(shared.clone(), n.clone())))
            .collect();
        Ok(Kured { shared, tasks })
    }

    /// How many times `node` rebooted.
    pub fn reboots(&self, node: &str) -> usize {
        self.log()
            .iter()
            .filter(|(_, n, h)| n == node && *h == Happened::Rebooted)
            .count()
    }

    /// Everything the daemons did, in order.
    pub fn log(&self) -> Vec<(Timestamp, String, Happened)> {
        self.shared.log.lock().unwrap().clone()
    }

    /// The most nodes disrupted at once (cordoned by the executor until it uncordoned
    /// them), counting only nodes for which `group` is true.
    pub fn most_disrupted(&self, group: impl Fn(&str) -> bool) -> usize {
        let mut now = 0usize;
        let mut most = 0;
        for (_, node, h) in self.log() {
            if !group(&node) {
                continue;
            }
            match h {
                Happened::Cordoned => now += 1,
                Happened::Uncordoned => now = now.saturating_sub(1),
                Happened::Rebooted | Happened::EvictionRefused { .. } => {}
            }
            most = most.max(now);
        }
        most
    }

    /// The evictions the API server refused, by node, in order: `(node, pod)`.
    pub fn refused_evictions(&self) -> Vec<(String, String)> {
        self.log()
            .into_iter()
            .filter_map(|(_, node, h)| match h {
                Happened::EvictionRefused { pod } => Some((node, pod)),
                _ => None,
            })
            .collect()
    }

    /// The nodes' reboots still to come.
    pub fn needs(&self) -> BTreeMap<String, u32> {
        self.shared.needs.lock().unwrap().clone()
    }

    /// `reboots` more reboots needed on `node` (a new update installed): its sentinel is
    /// set, and its detector reports `RebootRequired=True` at its next check.
    pub fn need(&self, node: &str, reboots: u32) {
        *self
            .shared
            .needs
            .lock()
            .unwrap()
            .entry(node.to_string())
            .or_insert(0) += reboots;
    }
}

impl Drop for Kured {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A node's life: its daemons run until the executor reboots it, then it reboots.
async fn life(shared: Arc<Shared>, node: String) {
    /// Stops the detector when the node reboots, and when the life is aborted.
    struct Running(JoinHandle<()>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    loop {
        let detector = Running(tokio::spawn(detect(shared.clone(), node.clone())));
        let executed = execute(&shared, &node).await;
        drop(detector);
        if let Err(e) = executed {
            eprintln!("kured stand-in on {node}: {e:#}");
            return;
        }
        if let Err(e) = shared.reboot(&node).await {
            eprintln!("kured stand-in on {node}: rebooting: {e:#}");
            return;
        }
        let delay = match &shared.draws {
            Some(d) => d.daemon_delay(&node, shared.boot_of(&node)),
            None => shared.spec.daemon_delay,
        };
        tokio::time::sleep(delay).await;
    }
}

/// The detector: every period, the first one period after it starts.
async fn detect(shared: Arc<Shared>, node: String) {
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + shared.spec.period,
        shared.spec.period,
    );
    loop {
        ticker.tick().await;
        let needed = shared
            .needs
            .lock()
            .unwrap()
            .get(&node)
            .copied()
            .unwrap_or(0)
            > 0;
        if let Err(e) = shared.report(&node, needed).await {
            eprintln!("kured detector on {node}: {e:#}");
        }
    }
}

/// The executor, until it reboots the node (Ok) or fails.
async fn execute(shared: &Shared, node: &str) -> Result<()> {
    let api: Api<Node> = Api::all(shared.client.clone());
    let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut seen: Option<Option<String>> = None;
    while let Some(event) = events.next().await {
        let n = match event {
            Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => n,
            _ => continue,
        };
        let status = condition(&n, &shared.spec.in_progress).map(|c| c.status.clone());
        if seen.as_ref() == Some(&status) {
            continue;
        }
        seen = Some(status.clone());
        if status.as_deref() == Some("True") {
            let unschedulable = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
            if !unschedulable {
                shared.cordon(node, true).await?;
                shared.happened(node, Happened::Cordoned);
            }
            shared.evict(node).await?;
            return Ok(());
        }
        let ours = n
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CORDONED_BY_EXECUTOR));
        if status.is_some() && ours {
            shared.cordon(node, false).await?;
            shared.happened(node, Happened::Uncordoned);
        }
    }
    anyhow::bail!("the executor's watch of {node} ended")
}

impl Shared {
    /// Cordons the node and notes that the executor did, or uncordons it and drops the
    /// note.
    async fn cordon(&self, node: &str, on: bool) -> Result<()> {
        let (note, unschedulable) = if on {
            (json!("true"), json!(true))
        } else {
            (json!(null), json!(null))
        };
        Api::<Node>::all(self.client.clone())
            .patch(
                node,
                &PatchParams {
                    field_manager: Some(EXECUTOR.into()),
                    ..Default::default()
                },
                &Patch::Merge(json!({
                    "metadata": { "annotations": { CORDONED_BY_EXECUTOR: note } },
                    "spec": { "unschedulable": unschedulable },
                })),
            )
            .await
            .with_context(|| format!("{} {node}", if on { "cordoning" } else { "uncordoning" }))?;
        Ok(())
    }

    fn happened(&self, node: &str, what: Happened) {
        self.log
            .lock()
            .unwrap()
            .push((Timestamp::now(), node.to_string(), what));
    }

    /// Drains the node: evicts each of its pods but those a drain leaves (DaemonSet and
    /// mirror pods), retrying the evictions the API server refuses until none is left.
    async fn evict(&self, node: &str) -> Result<()> {
        loop {
            let refused = evict_all(&self.evictions, node).await?;
            if refused.is_empty() {
                return Ok(());
            }
            for r in refused {
                self.happened(node, Happened::EvictionRefused { pod: r.pod });
            }
            // The drain's retry: the scenario, not synchronisation.
            tokio::time::sleep(DRAIN_RETRY).await;
        }
    }

    /// The reboot: NotReady, the update installed (the sentinel cleared), back Ready with
    /// a new boot ID.
    async fn reboot(&self, node: &str) -> Result<()> {
        self.happened(node, Happened::Rebooted);
        if let Some(n) = self.needs.lock().unwrap().get_mut(node) {
            *n = n.saturating_sub(1);
        }
        let downtime = match &self.draws {
            Some(d) => d.reboot(node, self.boot_of(node)),
            None => self.spec.reboot,
        };
        self.kubelet(node, "False", None).await?;
        tokio::time::sleep(downtime).await;
        self.boot(node).await
    }

    /// The node's current boot: 1 after [`Kured::start`], one more after each reboot.
    fn boot_of(&self, node: &str) -> u32 {
        self.boots.lock().unwrap().get(node).copied().unwrap_or(0)
    }

    /// The kubelet starts: a new boot ID, Ready.
    async fn boot(&self, node: &str) -> Result<()> {
        let boot = {
            let mut boots = self.boots.lock().unwrap();
            let b = boots.entry(node.to_string()).or_insert(0);
            *b += 1;
            *b
        };
        self.kubelet(node, "True", Some(format!("{node}-boot-{boot}")))
            .await
    }

    async fn kubelet(&self, node: &str, ready: &str, boot_id: Option<String>) -> Result<()> {
        let now = Time(Timestamp::now());
        let mut status = json!({ "conditions": [{
            "type": "Ready",
            "status": ready,
            "reason": if ready == "True" { "KubeletReady" } else { "KubeletNotReady" },
            "message": "set by the kured stand-in's kubelet",
            "lastTransitionTime": now,
            "lastHeartbeatTime": now,
        }]});
        if let Some(id) = boot_id {
            status["nodeInfo"] = json!({ "bootID": id });
        }
        Api::<Node>::all(self.client.clone())
            .patch_status(
                node,
                &PatchParams {
                    field_manager: Some(KUBELET.into()),
                    ..Default::default()
                },
                &Patch::Strategic(json!({ "status": status })),
            )
            .await
            .with_context(|| format!("the kubelet of {node} setting Ready={ready}"))?;
        Ok(())
    }

    /// The detector's write: when the status changes, or the heartbeat is a period old.
    async fn report(&self, node: &str, needed: bool) -> Result<()> {
        let api: Api<Node> = Api::all(self.client.clone());
        let current = api.get_status(node).await?;
        let status = if needed { "True" } else { "False" };
        let existing = condition(&current, REBOOT_REQUIRED);
        let now = Timestamp::now();
        let fresh = existing
            .and_then(|c| c.last_heartbeat_time.as_ref())
            .is_some_and(|t| {
                now.duration_since(t.0).as_secs_f64() < self.spec.period.as_secs_f64()
            });
        let unchanged = existing.is_some_and(|c| c.status == status);
        if unchanged && fresh {
            return Ok(());
        }
        let transition = match existing {
            Some(c) if unchanged => c.last_transition_time.clone().unwrap_or(Time(now)),
            _ => Time(now),
        };
        api.patch_status(
            node,
            &PatchParams {
                field_manager: Some(DETECTOR.into()),
                ..Default::default()
            },
            &Patch::Strategic(json!({ "status": { "conditions": [{
                "type": REBOOT_REQUIRED,
                "status": status,
                "reason": "KuredSentinelDetected",
                "message": if needed { "the reboot sentinel exists" } else { "no reboot sentinel" },
                "lastTransitionTime": transition,
                "lastHeartbeatTime": Time(now),
            }]}})),
        )
        .await
        .with_context(|| format!("the detector of {node} writing {REBOOT_REQUIRED}={status}"))?;
        Ok(())
    }
}

/// A duration drawn from a distribution, the same for the same seed, node, boot and
/// stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Spread {
    /// Always this long.
    Fixed(Duration),
    /// `median * exp(sigma * Z)`, Z standard normal: skewed to the right as reboot times
    /// are (a few slow ones), its mean `exp(sigma^2 / 2)` times the median.
    LogNormal { median: Duration, sigma: f64 },
    /// Uniform between `low` and `high`.
    Uniform { low: Duration, high: Duration },
}

impl Spread {
    /// The draw for `key` (a seed, a node, a boot, a stream): deterministic.
    pub fn draw(&self, seed: u64, node: &str, boot: u32, stream: u64) -> Duration {
        let mut h = splitmix(seed ^ splitmix(stream));
        for b in node.bytes() {
            h = splitmix(h ^ u64::from(b));
        }
        h = splitmix(h ^ u64::from(boot));
        // Two uniforms in (0, 1), from the top 53 bits of two more steps.
        let (a, b) = (splitmix(h), splitmix(h ^ 0x5851_f42d_4c95_7f2d));
        let unit = |x: u64| ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        match *self {
            Spread::Fixed(d) => d,
            Spread::Uniform { low, high } => {
                low + (high.saturating_sub(low)).mul_f64(unit(a).min(1.0 - f64::EPSILON))
            }
            Spread::LogNormal { median, sigma } => {
                // Box-Muller.
                let z = (-2.0 * unit(a).ln()).sqrt() * (2.0 * std::f64::consts::PI * unit(b)).cos();
                median.mul_f64((sigma * z).exp())
            }
        }
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Per-node durations for [`Kured::start_drawn`], each drawn per node and per reboot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draws {
    pub seed: u64,
    /// How long a reboot keeps its node NotReady, until its new boot ID (the spec's
    /// `reboot`).
    pub reboot: Spread,
    /// From the node's Ready with its new boot ID to its daemons running, the executor
    /// then uncordoning it (the spec's `daemon_delay`).
    pub daemon_delay: Spread,
}

impl Draws {
    /// The downtime of the reboot that ends boot `boot` of `node` (boot 1 is the one
    /// [`Kured::start`] boots).
    pub fn reboot(&self, node: &str, boot: u32) -> Duration {
        self.reboot.draw(self.seed, node, boot, 1)
    }

    /// How long after boot `boot` of `node` (2 after its first reboot) its daemons start.
    pub fn daemon_delay(&self, node: &str, boot: u32) -> Duration {
        self.daemon_delay.draw(self.seed, node, boot, 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_deterministic_and_differ_by_node_boot_and_stream() {
        let s = Spread::LogNormal {
            median: Duration::from_secs(12),
            sigma: 0.35,
        };
        assert_eq!(s.draw(7, "n1", 1, 1), s.draw(7, "n1", 1, 1));
        assert_ne!(s.draw(7, "n1", 1, 1), s.draw(7, "n2", 1, 1));
        assert_ne!(s.draw(7, "n1", 1, 1), s.draw(7, "n1", 2, 1));
        assert_ne!(s.draw(7, "n1", 1, 1), s.draw(7, "n1", 1, 2));
        assert_ne!(s.draw(7, "n1", 1, 1), s.draw(8, "n1", 1, 1));
        let f = Spread::Fixed(Duration::from_secs(3));
        assert_eq!(f.draw(1, "n", 1, 1), Duration::from_secs(3));
    }

    #[test]
    fn a_log_normal_spread_has_its_median_and_a_uniform_one_its_bounds() {
        let s = Spread::LogNormal {
            median: Duration::from_secs(12),
            sigma: 0.35,
        };
        let mut d: Vec<f64> = (0..4000)
            .map(|i| s.draw(42, &format!("node-{i}"), 1, 1).as_secs_f64())
            .collect();
        d.sort_by(f64::total_cmp);
        let (median, p90) = (d[1999], d[3599]);
        assert!((11.5..12.5).contains(&median), "median {median}");
        // 12 * exp(1.2816 * 0.35) = 18.8
        assert!((18.0..19.6).contains(&p90), "p90 {p90}");
        let u = Spread::Uniform {
            low: Duration::from_secs(2),
            high: Duration::from_secs(4),
        };
        let draws: Vec<Duration> = (0..1000).map(|i| u.draw(3, "n", i, 2)).collect();
        assert!(draws.iter().all(|d| (2.0..4.0).contains(&d.as_secs_f64())));
        let mean = draws.iter().map(Duration::as_secs_f64).sum::<f64>() / 1000.0;
        assert!((2.9..3.1).contains(&mean), "mean {mean}");
    }
}
