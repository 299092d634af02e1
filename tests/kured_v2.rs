//! kumaco as the brain of kured v2, driven by kured's own parts as they behave:
//! the real kumaco binary against a real API server, with [`Kured`]'s detector (it checks
//! on a ticker, so it lags after a reboot) and reboot daemon (it acts the moment it
//! starts) on every node, each reboot a new `status.nodeInfo.bootID`.
//!
//! 4 nodes in 2 zones, ceiling 2 and 1 per zone. Done: every node rebooted exactly once,
//! all back in service (requirement False, not in progress, uncordoned, Ready) within
//! 2 minutes, at most 2 nodes disrupted at once and 1 per zone. A brain that misses the
//! reboot keeps the node in progress while the detector still reads True, and the daemon
//! reboots it again as soon as it is back: without `--complete-on-reboot` that loop is
//! what the last test shows.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use testkit::ApiServer;
use testkit::agent::{MAINTENANCE_IN_PROGRESS as MIP, REBOOT_REQUIRED};
use testkit::cluster::Cluster;
use testkit::kumaco::SHORT_LEASE;
use testkit::kured::{Kured, KuredSpec};
use testkit::nodes::condition;
use testkit::time::{poll_showing, poll_until};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
const ZONE: &str = "topology.kubernetes.io/zone";
/// What the issue allows a 4-node rollout at 1 per zone.
const ROLLOUT: Duration = Duration::from_secs(120);
/// How long a reboot keeps a node NotReady.
const REBOOT: Duration = Duration::from_secs(3);
/// Long enough for a standby to take the Lease (4 s with [`SHORT_LEASE`]) while a node is
/// down: a failover at the moment a node comes back is the one case no brain can cover,
/// as the executor acts before any kumaco could answer (docs/kured.md).
const SLOW_REBOOT: Duration = Duration::from_secs(8);
const DAEMON_DELAY: Duration = Duration::from_secs(1);

struct Fleet {
    c: Cluster,
    zone_of: BTreeMap<String, String>,
}

/// The test's 4 nodes, 2 per zone, each needing one reboot (`RebootRequired=True` since
/// an hour ago, as the detector reported before the window), and a window open now.
async fn fleet(name: &str, extra: &[&str]) -> Fleet {
    let per_zone = format!("--max-in-progress-per={ZONE}=1");
    let mut flags = vec![
        "--in-progress",
        "--require-condition=kured.dev/RebootRequired",
        "--max-in-progress=2",
        &per_zone,
    ];
    flags.extend_from_slice(extra);
    let c = Cluster::new(ApiServer::shared(), name, KUMACO)
        .await
        .with_flags(&flags);
    let mut zone_of = BTreeMap::new();
    for (i, zone) in ["a", "a", "b", "b"].into_iter().enumerate() {
        let node = c.node(&format!("{zone}{i}"), &[(ZONE, zone)]).await;
        c.needs_reboot_since(&node, Timestamp::now() - SignedDuration::from_hours(1))
            .await;
        zone_of.insert(node, zone.to_string());
    }
    c.put_active_window("w", &c.scope.selector()).await;
    Fleet { c, zone_of }
}

impl Fleet {
    fn nodes(&self) -> Vec<String> {
        self.zone_of.keys().cloned().collect()
    }

    /// kured's daemons on the fleet, the nodes booted (a boot ID each) before kumaco
    /// starts: a start records the boot ID the node shows then.
    async fn kured(&self, period: Duration, reboot: Duration, in_progress: &str) -> Kured {
        self.kured_needing(period, reboot, in_progress, |_| 1).await
    }

    /// [`Fleet::kured`] with `needs(node)` reboots to come on each node.
    async fn kured_needing(
        &self,
        period: Duration,
        reboot: Duration,
        in_progress: &str,
        needs: impl Fn(&str) -> u32,
    ) -> Kured {
        let spec = KuredSpec {
            period,
            reboot,
            daemon_delay: DAEMON_DELAY,
            in_progress: in_progress.into(),
        };
        let needs: Vec<(String, u32)> = self
            .nodes()
            .into_iter()
            .map(|n| {
                let k = needs(&n);
                (n, k)
            })
            .collect();
        Kured::start(&self.c.client, &needs, spec)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Waits until every node is back in service: its requirement False, not in
    /// progress, uncordoned, Ready.
    async fn rollout_done(&self, kured: &Kured, in_progress: &str) {
        let api: Api<Node> = Api::all(self.c.client.clone());
        poll_showing("every node rebooted and back in service", ROLLOUT, || {
            let api = api.clone();
            let nodes = self.nodes();
            async move {
                let mut not_yet = Vec::new();
                for name in &nodes {
                    let n = api.get(name).await.map_err(|e| e.to_string())?;
                    let status = |t: &str| condition(&n, t).map(|c| c.status.clone());
                    let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
                    let state = (
                        status(REBOOT_REQUIRED),
                        status(in_progress),
                        cordoned,
                        status("Ready"),
                    );
                    if state.0.as_deref() != Some("False")
                        || state.1.as_deref() == Some("True")
                        || cordoned
                        || state.3.as_deref() != Some("True")
                    {
                        not_yet.push(format!("{name}: {state:?}"));
                    }
                }
                if not_yet.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{not_yet:?}, kured: {:?}", kured.log()))
                }
            }
        })
        .await;
    }

    /// One reboot per node, and the ceilings held at every step the daemons took.
    fn assert_once_within_ceilings(&self, kured: &Kured) {
        self.assert_reboots_within_ceilings(kured, |_| 1);
    }

    /// `needed(node)` reboots per node, and the ceilings held.
    fn assert_reboots_within_ceilings(&self, kured: &Kured, needed: impl Fn(&str) -> usize) {
        let log = kured.log();
        for node in self.zone_of.keys() {
            assert_eq!(
                kured.reboots(node),
                needed(node),
                "{node} rebooted other than {} time(s): {log:?}",
                needed(node)
            );
        }
        assert!(kured.most_disrupted(|_| true) <= 2, "{log:?}");
        for zone in ["a", "b"] {
            let most = kured.most_disrupted(|n| self.zone_of[n] == zone);
            assert_eq!(most, 1, "zone {zone}: {log:?}");
        }
    }
}

/// A detector faster than the reboot (1 s against 3 s), and kumaco restarted while the
/// first nodes reboot: one reboot each.
#[tokio::test]
async fn kured_v2_parts_reboot_each_node_once_with_a_fast_detector_across_a_restart() {
    let f = fleet("kured-fast", &[]).await;
    let observer = f.c.observer().await;
    let kured = f.kured(Duration::from_secs(1), REBOOT, MIP).await;
    let mut kumaco = f.c.kumaco(&[]).await;
    observer
        .wait_until("the first starts", ROLLOUT, |o| o.starts.len() >= 2)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    kumaco.kill();
    let _kumaco = f.c.kumaco(&[]).await;
    f.rollout_done(&kured, MIP).await;
    f.assert_once_within_ceilings(&kured);
    let seen = observer.observed();
    for node in f.zone_of.keys() {
        assert_eq!(seen.start_count(node), 1, "{}", seen.timeline());
    }
}

/// A detector slower than the reboot (10 s: it reports the stale `True` for seconds after
/// each node is back), and the leader killed while nodes reboot, twice (the killed one
/// comes back as a new replica): each standby decides as the first would, one reboot
/// each.
#[tokio::test]
async fn kured_v2_parts_reboot_each_node_once_with_a_slow_detector_across_failovers() {
    let f = fleet("kured-slow", &[]).await;
    let observer = f.c.observer().await;
    let kured = f.kured(Duration::from_secs(10), SLOW_REBOOT, MIP).await;
    let mut replicas = vec![
        f.c.replica("first", &SHORT_LEASE).await,
        f.c.replica("second", &SHORT_LEASE).await,
    ];
    for (starts, newcomer) in [(2, "third"), (4, "fourth")] {
        observer
            .wait_until("nodes starting maintenance", ROLLOUT, |o| {
                o.starts.len() >= starts
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let leader = f.c.lease_holder().await;
        let i = replicas.iter().position(|r| r.pod == leader).unwrap();
        replicas.remove(i).process.kill();
        replicas.push(f.c.replica(newcomer, &SHORT_LEASE).await);
    }
    f.rollout_done(&kured, MIP).await;
    f.assert_once_within_ceilings(&kured);
    let seen = observer.observed();
    for node in f.zone_of.keys() {
        assert_eq!(seen.start_count(node), 1, "{}", seen.timeline());
        assert!(seen.ended_with(node, "NodeRebooted"), "{}", seen.timeline());
    }
}

/// The must-fail demo: with `--complete-on-reboot=false` the same parts reboot the first
/// node of a zone again as soon as its daemon is back.
#[tokio::test]
async fn without_complete_on_reboot_kured_v2_parts_reboot_a_node_again_and_again() {
    let f = fleet("kured-loop", &[]).await;
    let kured = f.kured(Duration::from_secs(10), REBOOT, MIP).await;
    let _kumaco = f.c.kumaco(&["--complete-on-reboot=false"]).await;
    poll_until("a node rebooted twice", ROLLOUT, || async {
        f.zone_of.keys().any(|n| kured.reboots(n) >= 2)
    })
    .await;
}

/// The prototype's executor reads `kured.dev/maintenance-in-progress`: with the flags
/// naming kured's conditions, the same executor works unchanged, kumaco writes no
/// condition under its default names, and `kumaco status` reads the renamed ones.
#[tokio::test]
async fn an_executor_reading_kureds_condition_names_works_unchanged() {
    const KURED_MIP: &str = "kured.dev/maintenance-in-progress";
    const KURED_UM: &str = "kured.dev/under-maintenance-window";
    let names = [
        format!("--in-progress-condition={KURED_MIP}"),
        format!("--under-maintenance-condition={KURED_UM}"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let f = fleet("kured-names", &names).await;
    let kured = f.kured(Duration::from_secs(1), REBOOT, KURED_MIP).await;
    let _kumaco = f.c.kumaco(&[]).await;
    f.rollout_done(&kured, KURED_MIP).await;
    f.assert_once_within_ceilings(&kured);
    let api: Api<Node> = Api::all(f.c.client.clone());
    for node in f.nodes() {
        let n = api.get(&node).await.unwrap();
        assert!(
            condition(&n, MIP).is_none() && condition(&n, "kured.dev/UnderMaintenance").is_none()
        );
        let um = condition(&n, KURED_UM).expect("kumaco's UnderMaintenance, renamed");
        assert_eq!(um.status, "True");
        let mip = condition(&n, KURED_MIP).unwrap();
        assert_eq!(mip.reason.as_deref(), Some("NodeRebooted"), "{mip:?}");
    }
    let selector = format!("--node-selector={}", f.c.scope.selector());
    let mut args = vec!["status", "-n", &f.c.ns, &selector, "-o", "json"];
    args.extend_from_slice(&names);
    let output = std::process::Command::new(KUMACO)
        .args(&args)
        .env("KUBECONFIG", ApiServer::shared().kubeconfig())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = json.to_string();
    assert!(
        text.contains(KURED_MIP) && text.contains("NodeRebooted"),
        "{json:#}"
    );
}

/// A node whose reporter confirms, after its first reboot, that it needs another (a second
/// update): the confirmation (a fresh heartbeat on the same `RebootRequired=True`) starts a
/// new maintenance, under the ceilings; the other nodes are rebooted once.
#[tokio::test]
async fn a_reboot_still_needed_after_the_first_is_a_new_maintenance() {
    let f = fleet("kured-twice", &[]).await;
    let twice = f.nodes()[0].clone();
    let observer = f.c.observer().await;
    let needs = |n: &str| if n == twice { 2 } else { 1 };
    let kured = f
        .kured_needing(Duration::from_secs(2), REBOOT, MIP, needs)
        .await;
    let _kumaco = f.c.kumaco(&[]).await;
    f.rollout_done(&kured, MIP).await;
    f.assert_reboots_within_ceilings(&kured, |n| needs(n) as usize);
    let seen = observer.observed();
    assert_eq!(seen.start_count(&twice), 2, "{}", seen.timeline());
}
