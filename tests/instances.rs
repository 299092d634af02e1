//! Several kumaco instances over shared nodes: a node passing from one
//! instance to another, instances of differing opinion, a shadow canary, stale field
//! managers. The real binary, leader election on and default field managers
//! (`kumaco/<namespace>/<lease>`), against a real API server.
//!
//! Every test counts the writes to the nodes that change hands (each write that changes
//! a node is a new version; nothing else writes these nodes) and records every state of
//! `UnderMaintenance` on them. Before instances yielded to each other (docs/design.md,
//! Several instances), the move below made 1,679 writes to 2 nodes in 20 s, the condition
//! flapping all along.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use k8s_openapi::api::core::v1::Node;
use testkit::ApiServer;
use testkit::cluster::{
    Cluster, REASON_OUT_OF_SCOPE, REASON_WINDOW, TestCluster, UNDER_MAINTENANCE,
};
use testkit::events;
use testkit::history::History;
use testkit::kumaco::{KumacoProcess, SHORT_LEASE, StartOptions, metric};
use testkit::time::poll_until;

/// How soon a reaction to an API change must be visible (a loaded 2-core machine).
const PROMPT: Duration = Duration::from_secs(10);

/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

// ---------------------------------------------------------------------------------------
// Moving a pool between instances (docs/instances.md, "Moving nodes between instances")

/// Instance a manages pools x and y, b pool z, one window over every pool. Pool y moves
/// to b the recommended way: b widened first, then a narrowed. While both manage y, b
/// co-owns what a wrote (a write per node, no change); a, narrowed, drops its ownership
/// (a write per node) instead of setting False under b. y never leaves
/// `UnderMaintenance=True`; the contest while both manage y is reported.
#[tokio::test]
async fn moving_a_pool_by_widening_first_writes_twice_per_node_and_never_flaps() {
    let c = Cluster::new(ApiServer::shared(), "move-widen", KUMACO).await;
    let pools = pools(&c).await;
    c.put_active_window("all", &c.scope.selector()).await;
    let a = instance(&c, "a", "pool in (x, y)", &[]).await;
    let mut b = instance(&c, "b", "pool=z", &[]).await;
    for node in pools.all() {
        c.wait_status(node, Some("True"), PROMPT).await;
    }
    let y = History::start_all(&c.client, &pools.y, UNDER_MAINTENANCE).await;

    b.restart(&c, "pool in (y, z)").await;
    for node in &pools.y {
        wait_owners(&c, node, &["a", "b"]).await;
    }
    // Both report the two nodes of y while both manage them.
    for instance in [&a, &b] {
        instance.wait_contested(2).await;
    }
    let mut a = a;
    a.restart(&c, "pool=x").await;
    for node in &pools.y {
        wait_owners(&c, node, &["b"]).await;
    }
    b.wait_contested(0).await;
    a.wait_contested(0).await;
    settle(&y).await;
    report("widen-first", &pools.y, &y);
    for (node, h) in pools.y.iter().zip(&y) {
        assert_eq!(
            h.statuses(),
            [Some("True".to_string())],
            "{node} left UnderMaintenance=True"
        );
        assert!(
            h.changes() <= 2,
            "{node}: {} writes (a claim and a drop expected)",
            h.changes()
        );
    }
    // The logs say who claimed the nodes, once per contest.
    let log = std::fs::read_to_string(b.process.log_path()).unwrap();
    assert!(
        log.contains("node contested") && log.contains(&manager(&c, "a")),
        "b's log"
    );
}

/// The other order: a narrowed first, then b widened. Between the two, y is no
/// instance's: a, its sole owner, sets `UnderMaintenance` False (`NodeOutOfScope`), and b
/// sets it True once widened, taking the value over. Two writes per node, one False in
/// between, nothing after.
#[tokio::test]
async fn moving_a_pool_by_narrowing_first_writes_twice_per_node() {
    let c = Cluster::new(ApiServer::shared(), "move-narrow", KUMACO).await;
    let pools = pools(&c).await;
    c.put_active_window("all", &c.scope.selector()).await;
    let mut a = instance(&c, "a", "pool in (x, y)", &[]).await;
    let mut b = instance(&c, "b", "pool=z", &[]).await;
    for node in pools.all() {
        c.wait_status(node, Some("True"), PROMPT).await;
    }
    let y = History::start_all(&c.client, &pools.y, UNDER_MAINTENANCE).await;

    a.restart(&c, "pool=x").await;
    for node in &pools.y {
        let cond = c.wait_status(node, Some("False"), PROMPT).await;
        assert_eq!(cond.reason.as_deref(), Some(REASON_OUT_OF_SCOPE));
    }
    b.restart(&c, "pool in (y, z)").await;
    for node in &pools.y {
        c.wait_status(node, Some("True"), PROMPT).await;
        wait_owners(&c, node, &["b"]).await;
    }
    settle(&y).await;
    report("narrow-first", &pools.y, &y);
    for (node, h) in pools.y.iter().zip(&y) {
        assert_eq!(
            h.statuses(),
            ["True", "False", "True"].map(|s| Some(s.to_string())),
            "{node}"
        );
        assert_eq!(h.changes(), 2, "{node}: a's False, b's True");
    }
    for instance in [&a, &b] {
        instance.wait_contested(0).await;
    }
}

// ---------------------------------------------------------------------------------------
// Instances that disagree

/// Two instances over the same nodes read windows in different namespaces: a's window is
/// active, b has none. Each would set what the other undid at once, forever (3,272 writes
/// to 2 nodes in 40 s before instances yielded). With `--resync-interval=5s` each rewrites what
/// the other changed at most once per 5 s: over 20 s at most 2 + 2 × 4 writes per node.
/// The contest is reported: the metric, a log line, and (with `--node-events`) a Warning
/// event on the node.
#[tokio::test]
async fn instances_of_differing_opinion_rewrite_at_most_once_per_resync() {
    let c = Cluster::new(ApiServer::shared(), "disagree", KUMACO).await;
    let pools = pools(&c).await;
    let other_ns = namespace(&c, "disagree-b").await;
    c.put_active_window("all", &c.scope.selector()).await;
    let flags = ["--resync-interval=5s", "--node-events"];
    let a = instance(&c, "a", "pool=y", &flags).await;
    for node in &pools.y {
        c.wait_status(node, Some("True"), PROMPT).await;
    }
    let y = History::start_all(&c.client, &pools.y, UNDER_MAINTENANCE).await;
    let mut b_flags = flags.map(String::from).to_vec();
    b_flags.push(format!("--namespace={other_ns}"));
    let b_flags: Vec<&str> = b_flags.iter().map(String::as_str).collect();
    let b = instance(&c, "b", "pool=y", &b_flags).await;
    let started = std::time::Instant::now();
    let mut seen_contested = 0.0_f64;
    while started.elapsed() < Duration::from_secs(20) {
        seen_contested = seen_contested.max(a.contested().await + b.contested().await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    report(
        "differing opinions, 20 s, --resync-interval=5s",
        &pools.y,
        &y,
    );
    for (node, h) in pools.y.iter().zip(&y) {
        let writes = h.changes();
        assert!(
            (2..=10).contains(&writes),
            "{node}: {writes} writes in 20 s (a write war makes thousands; the bound, at most 10)"
        );
    }
    assert!(
        seen_contested >= 2.0,
        "kumaco_nodes_contested never showed both nodes"
    );
    let logs = [&a, &b].map(|i| std::fs::read_to_string(i.process.log_path()).unwrap());
    assert!(
        logs.iter().any(|l| l.contains("node contested")),
        "no log line reports the contest"
    );
    let node_events = events::events_about_kind(&c.client, "default", "Node", &pools.y[0])
        .await
        .unwrap();
    let warnings = events::with_reason(&node_events, "NodeContested");
    assert!(
        warnings
            .iter()
            .all(|e| e.type_.as_deref() == Some("Warning")),
        "{}",
        events::summary(&node_events)
    );
    assert!(!warnings.is_empty(), "{}", events::summary(&node_events));
}

/// A `--dry-run` canary of another version over the same nodes, reading other windows:
/// it would change them, and writes nothing (it owns nothing, holds no Lease).
#[tokio::test]
async fn a_dry_run_canary_over_the_same_nodes_writes_nothing() {
    let c = Cluster::new(ApiServer::shared(), "canary", KUMACO).await;
    let pools = pools(&c).await;
    let empty_ns = namespace(&c, "canary-empty").await;
    c.put_active_window("all", &c.scope.selector()).await;
    let _a = instance(&c, "a", "pool in (x, y)", &[]).await;
    for node in pools.all().take(3) {
        c.wait_status(node, Some("True"), PROMPT).await;
    }
    let y = History::start_all(&c.client, &pools.y, UNDER_MAINTENANCE).await;
    let own = [
        format!("--namespace={empty_ns}"),
        format!("--node-selector={},pool in (x, y)", c.scope.selector()),
        "--dry-run".into(),
    ];
    let args: Vec<&str> = own.iter().map(String::as_str).collect();
    let canary = c.start_kumaco(&args, &StartOptions::default()).await;
    poll_until("the canary to log what it would write", PROMPT, || async {
        let log = std::fs::read_to_string(canary.log_path()).unwrap_or_default();
        log.contains("dry run: would set condition")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (node, h) in pools.y.iter().zip(&y) {
        assert_eq!(h.changes(), 0, "{node} was written");
    }
}

// ---------------------------------------------------------------------------------------
// Stale field managers

/// After an upgrade from a version whose field manager was `kumaco`, the nodes carry
/// conditions owned by a manager no instance uses. The new instance co-owns them (one
/// write per node), is not contested by the old name, and when a node leaves its scope,
/// sets it False: nothing True is left that no live instance wants.
#[tokio::test]
async fn after_an_upgrade_from_the_old_field_manager_nothing_true_is_left_behind() {
    let c = Cluster::new(ApiServer::shared(), "legacy", KUMACO).await;
    let pools = pools(&c).await;
    c.put_active_window("all", &c.scope.selector()).await;
    // What the old version left: UnderMaintenance=True, owned by `kumaco`.
    for node in &pools.y {
        apply_as(&c, "kumaco", node, "True", REASON_WINDOW).await;
    }
    let y = History::start_all(&c.client, &pools.y, UNDER_MAINTENANCE).await;
    let mut a = instance(&c, "a", "pool in (x, y)", &[]).await;
    for node in &pools.y {
        wait_owners(&c, node, &["kumaco", "a"]).await;
    }
    a.wait_contested(0).await;
    a.restart(&c, "pool=x").await;
    for node in &pools.y {
        let cond = c.wait_status(node, Some("False"), PROMPT).await;
        assert_eq!(cond.reason.as_deref(), Some(REASON_OUT_OF_SCOPE));
    }
    settle(&y).await;
    for (node, h) in pools.y.iter().zip(&y) {
        // The claim (an unchanged value: the old manager's message differs, so a writes
        // its own), then the False.
        assert!(h.changes() <= 2, "{node}: {} writes", h.changes());
    }
}

/// Instances a and b both manage y; b is deleted (its Lease released as it stops). a,
/// narrowed afterwards, does not defer to the stopped instance: y goes False instead of
/// keeping b's True for ever.
#[tokio::test]
async fn a_deleted_instance_is_not_deferred_to() {
    let c = Cluster::new(ApiServer::shared(), "deleted", KUMACO).await;
    let pools = pools(&c).await;
    c.put_active_window("all", &c.scope.selector()).await;
    let mut a = instance(&c, "a", "pool in (x, y)", &[]).await;
    let b = instance(&c, "b", "pool in (y, z)", &[]).await;
    for node in &pools.y {
        wait_owners(&c, node, &["a", "b"]).await;
    }
    b.stop().await;
    a.restart(&c, "pool=x").await;
    for node in &pools.y {
        let cond = c.wait_status(node, Some("False"), PROMPT).await;
        assert_eq!(cond.reason.as_deref(), Some(REASON_OUT_OF_SCOPE));
    }
    a.wait_contested(0).await;
}

// ---------------------------------------------------------------------------------------
// Helpers

/// The test's nodes by pool.
struct Pools {
    x: Vec<String>,
    y: Vec<String>,
    z: Vec<String>,
}

impl Pools {
    fn all(&self) -> impl Iterator<Item = &String> {
        self.x.iter().chain(&self.y).chain(&self.z)
    }
}

/// One kumaco instance: its own Lease (`--lease-name`) and so its own default field
/// manager, confined to the test's nodes plus its pools.
struct Instance {
    lease: String,
    flags: Vec<String>,
    process: KumacoProcess,
}

/// x1, y1, y2, z1.
async fn pools(c: &Cluster) -> Pools {
    Pools {
        x: vec![c.node("x1", &[("pool", "x")]).await],
        y: vec![
            c.node("y1", &[("pool", "y")]).await,
            c.node("y2", &[("pool", "y")]).await,
        ],
        z: vec![c.node("z1", &[("pool", "z")]).await],
    }
}

/// Another namespace for windows, named after this test's.
async fn namespace(c: &Cluster, suffix: &str) -> String {
    let other = TestCluster::with_client(c.client.clone(), suffix).await;
    other.ns
}

/// The default field manager of the instance with Lease `lease`.
fn manager(c: &Cluster, lease: &str) -> String {
    format!("kumaco/{}/{lease}", c.ns)
}

/// Starts instance `lease` over this test's nodes in `pools` (a selector), with
/// `extra` flags; it reads the windows of this test's namespace unless they name
/// another (`--namespace`). Its Lease is in this test's namespace.
async fn instance(c: &Cluster, lease: &str, pools: &str, extra: &[&str]) -> Instance {
    let mut flags: Vec<String> = vec![format!("--lease-name={lease}")];
    // Short lease timings, so that a restarted instance leads again at once.
    flags.extend(SHORT_LEASE.iter().map(|s| s.to_string()));
    flags.extend(extra.iter().map(|s| s.to_string()));
    let process = start_instance(c, lease, pools, &flags).await;
    Instance {
        lease: lease.into(),
        flags,
        process,
    }
}

/// Instance `lease`'s process: `flags` over this test's nodes in `pools`.
async fn start_instance(c: &Cluster, lease: &str, pools: &str, flags: &[String]) -> KumacoProcess {
    let mut args = vec![format!("--node-selector={},{pools}", c.scope.selector())];
    if !flags.iter().any(|f| f.starts_with("--namespace=")) {
        args.push(format!("--namespace={}", c.ns));
    }
    args.extend(flags.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let options = StartOptions {
        leader: Some(c.pod(&format!("{lease}-0"))),
        ..StartOptions::default()
    };
    c.start_kumaco(&args, &options).await
}

/// Waits until exactly the instances `owners` (Lease names, or `kumaco`) own the
/// value of `UnderMaintenance` on `node` (managedFields: its `f:status`).
async fn wait_owners(c: &Cluster, node: &str, owners: &[&str]) {
    let mut want: Vec<String> = owners
        .iter()
        .map(|o| {
            if *o == "kumaco" {
                o.to_string()
            } else {
                manager(c, o)
            }
        })
        .collect();
    want.sort();
    let api: Api<Node> = Api::all(c.client.clone());
    let what = format!("{node}'s UnderMaintenance owned by {want:?}");
    poll_until(&what, PROMPT, || async {
        let n = api.get(node).await.unwrap();
        status_owners(&n) == want
    })
    .await;
}

/// `UnderMaintenance=status` on `node`, written by field manager `manager` with server-
/// side apply (as an earlier kumaco version did).
async fn apply_as(c: &Cluster, manager: &str, node: &str, status: &str, reason: &str) {
    let body = json!({
        "apiVersion": "v1", "kind": "Node", "metadata": { "name": node },
        "status": { "conditions": [{
            "type": UNDER_MAINTENANCE, "status": status, "reason": reason,
            "message": "written by an earlier kumaco",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]},
    });
    Api::<Node>::all(c.client.clone())
        .patch_status(
            node,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(body),
        )
        .await
        .unwrap_or_else(|e| panic!("applying as {manager}: {e}"));
}

/// Waits until no node of `histories` changed for 3 s (at most 30 s).
async fn settle(histories: &[History]) {
    let total = || histories.iter().map(History::changes).sum::<usize>();
    let mut last = total();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let now = total();
        if now == last {
            return;
        }
        last = now;
    }
    panic!("the nodes kept changing: {last} writes and counting");
}

impl Instance {
    /// An upgrade that changes the instance's scope: SIGTERM (the Lease is released),
    /// then the same instance with `--node-selector` for `pools`.
    async fn restart(&mut self, c: &Cluster, pools: &str) {
        self.process
            .terminate(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("stopping {}: {e:#}", self.lease));
        self.process = start_instance(c, &self.lease, pools, &self.flags).await;
    }

    /// Deleting the instance: SIGTERM, its Lease released.
    async fn stop(mut self) {
        self.process
            .terminate(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("stopping {}: {e:#}", self.lease));
    }

    /// `kumaco_nodes_contested` now.
    async fn contested(&self) -> f64 {
        let text = self.process.metrics_text().await.expect("GET /metrics");
        metric(&text, "kumaco_nodes_contested", &[]).unwrap()
    }

    async fn wait_contested(&self, n: usize) {
        let what = format!("instance {} to report {n} contested node(s)", self.lease);
        poll_until(&what, PROMPT, || async {
            self.contested().await == n as f64
        })
        .await;
    }
}

/// Prints the writes per node, for collection (`cargo test --test instances --
/// --nocapture 2>&1 | grep WRITES_PER_NODE`).
fn report(case: &str, nodes: &[String], histories: &[History]) {
    let counts: Vec<String> = nodes
        .iter()
        .zip(histories)
        .map(|(n, h)| format!("{n}={} ({} states)", h.changes(), h.statuses().len()))
        .collect();
    eprintln!("WRITES_PER_NODE {case}: {}", counts.join(", "));
}

/// The field managers owning `UnderMaintenance`'s value on `node`, sorted.
fn status_owners(node: &Node) -> Vec<String> {
    let key = format!("k:{{\"type\":\"{UNDER_MAINTENANCE}\"}}");
    let mut owners: Vec<String> = node
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() == Some("status"))
        .filter(|m| {
            m.fields_v1.as_ref().is_some_and(|f| {
                let key = key.replace('~', "~0").replace('/', "~1");
                f.0.pointer(&format!("/f:status/f:conditions/{key}/f:status"))
                    .is_some()
            })
        })
        .filter_map(|m| m.manager.clone())
        .collect();
    owners.sort();
    owners.dedup();
    owners
}
