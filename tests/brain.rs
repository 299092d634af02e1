//! The brain sees the whole node: the real kumaco binary against a
//! real API server, nodes without kubelets whose `Ready` condition and
//! `spec.unschedulable` the tests set themselves, and Pods created bound to them
//! (`spec.nodeName`) with the phase patched, as no scheduler or kubelet runs here.
//!
//! - unavailable nodes take slots and do not start; a completed node holds its slot until
//!   it is Ready and uncordoned;
//! - `--block-node-selector` and `--block-pod-selector` keep nodes from starting;
//! - `--max-in-progress-per` bounds each zone, across a failover;
//! - `--start-interval` paces starts, across a restart.
//!
//! Each test has its own namespace and nodes. Waits watch or poll with deadlines; the
//! sleeps are the scenario (the observation period of a "nothing starts" check).

use std::ops::Deref;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use testkit::ApiServer;
use testkit::agent::{MAINTENANCE_IN_PROGRESS as MIP, Observed, REBOOT_REQUIRED};
use testkit::kumaco::SHORT_LEASE;
use testkit::nodes::{condition, set_condition, wait_for_status};

/// How soon kumaco must react to a node or pod change (a watch event, then a pass), on a
/// loaded 2-core machine.
const PROMPT: Duration = Duration::from_secs(5);
const ZONE: &str = "topology.kubernetes.io/zone";
const REQUIRE_REBOOT: &str = "--require-condition=kured.dev/RebootRequired";

// ---------------------------------------------------------------------------------------
// Availability

/// Ceiling 2, three nodes need a reboot and c is NotReady: c holds a slot, so only a
/// starts; b waits, and its message says what holds the slots. a is rebooted the way
/// kured does it (cordoned, NotReady, its reboot no longer required): it completes but
/// holds its slot while NotReady, and still while Ready but cordoned; uncordoned, b starts.
#[tokio::test]
async fn unavailable_nodes_take_slots_and_a_completed_node_holds_its_slot_until_it_is_back() {
    let c = Cluster::new("unavailable").await;
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    let n = c.node("c", &[]).await;
    for (i, node) in [&a, &b, &n].into_iter().enumerate() {
        c.needs_reboot(node, i).await;
    }
    c.ready(&n, "False").await;
    c.put_active_window("w", &c.scope.selector()).await;
    let _kumaco = c.kumaco(&["--max-in-progress=2"]).await;

    c.wait_mip(&a, "True", None).await;
    let waiting = c.wait_mip(&b, "False", Some("WaitingForSlot")).await;
    assert_eq!(
        waiting.message.as_deref(),
        Some(format!("2/2 slots in use: 1 in progress, 1 unavailable ({n} NotReady)").as_str())
    );
    let down = c.wait_mip(&n, "False", Some("NodeUnavailable")).await;
    assert_eq!(down.message.as_deref(), Some("the node is NotReady"));

    // The reboot of a, as kured does it.
    c.cordon(&a, true).await;
    c.ready(&a, "False").await;
    c.set(&a, REBOOT_REQUIRED, "False").await;
    c.wait_mip(&a, "False", Some("MaintenanceCompleted")).await;
    c.ready(&a, "True").await;
    c.stays_waiting(&b, Duration::from_secs(3)).await;
    c.cordon(&a, false).await;
    c.wait_mip(&b, "True", None).await;
    let a_now = c.mip(&a).await;
    assert_eq!(
        a_now.reason.as_deref(),
        Some("MaintenanceCompleted"),
        "a keeps its completion while and after it recovers"
    );
}

// ---------------------------------------------------------------------------------------
// Blocking labels and pods

/// `--block-node-selector` and `--block-pod-selector`: a labelled node and a node running
/// a matching pod do not start; a finished matching pod, a pod matching no selector and
/// a matching pod in another namespace's node elsewhere block nothing. Deleting the pod
/// lets its node start.
#[tokio::test]
async fn blocking_labels_and_pods_keep_nodes_from_starting() {
    let c = Cluster::new("blocking").await;
    let labelled = c
        .node("labelled", &[("kumaco.test/leave-alone", "yes")])
        .await;
    let [with_pod, finished, other_app, free] = ["with-pod", "finished", "other-app", "free"];
    let mut nodes = vec![labelled.clone()];
    for short in [with_pod, finished, other_app, free] {
        nodes.push(c.node(short, &[]).await);
    }
    for (i, node) in nodes.iter().enumerate() {
        c.needs_reboot(node, i).await;
    }
    c.pod_on("postgres-0", &nodes[1], "postgres", "Running")
        .await;
    c.pod_on("postgres-1", &nodes[1], "postgres", "Pending")
        .await;
    c.pod_on("postgres-2", &nodes[2], "postgres", "Succeeded")
        .await;
    c.pod_on("web-0", &nodes[3], "web", "Running").await;
    c.put_active_window("w", &c.scope.selector()).await;
    let _kumaco = c
        .kumaco(&[
            "--max-in-progress=10",
            "--block-node-selector=kumaco.test/leave-alone",
            "--block-pod-selector=app=postgres",
        ])
        .await;

    for node in &nodes[2..] {
        c.wait_mip(node, "True", None).await;
    }
    let blocked = c.wait_mip(&labelled, "False", Some("Blocked")).await;
    assert_eq!(
        blocked.message.as_deref(),
        Some(r#"blocked by --block-node-selector "kumaco.test/leave-alone""#)
    );
    let blocked = c.wait_mip(&nodes[1], "False", Some("Blocked")).await;
    assert_eq!(
        blocked.message.as_deref(),
        Some(
            format!(
                "blocked by pod {}/postgres-0 (and 1 more) matching --block-pod-selector \"app=postgres\"",
                c.ns
            )
            .as_str()
        )
    );
    // Both pods gone (one finishes, one is deleted): the node starts. A pod being
    // deleted still runs until its kubelet stops it and blocks meanwhile; no kubelet runs
    // here, so the deletion is immediate (grace period 0).
    c.phase("postgres-1", "Succeeded").await;
    c.stays_waiting(&nodes[1], Duration::from_secs(2)).await;
    Api::<Pod>::namespaced(c.client.clone(), &c.ns)
        .delete("postgres-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    c.wait_mip(&nodes[1], "True", None).await;
}

// ---------------------------------------------------------------------------------------
// Groups

/// Six nodes in three zones need a reboot; ceiling 10 overall, 1 per zone: one node per
/// zone at a time, also while the leader is killed and the standby takes over. The
/// observer (a watch of its own) checks the per-zone count at every change.
#[tokio::test]
async fn each_zone_has_its_own_ceiling_across_a_failover() {
    let c = Cluster::new("zones").await;
    let mut zone_of = std::collections::BTreeMap::new();
    for (i, zone) in ["a", "a", "b", "b", "c", "c"].iter().enumerate() {
        let node = c.node(&format!("{zone}{i}"), &[(ZONE, zone)]).await;
        c.needs_reboot(&node, i).await;
        zone_of.insert(node, zone.to_string());
    }
    let observer = c.observer().await;
    let agent = c.agent(REBOOT).await;
    for node in zone_of.keys() {
        agent.hold(node);
    }
    c.put_active_window("w", &c.scope.selector()).await;
    let mut flags = vec![
        "--max-in-progress=10",
        "--max-in-progress-per=topology.kubernetes.io/zone=1",
    ];
    flags.extend(SHORT_LEASE);
    let mut first = c.replica("first", &flags).await;
    let _second = c.replica("second", &flags).await;
    observer
        .wait_until("one node in progress per zone", PROMPT * 2, |o| {
            o.in_progress.len() == 3
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    // Kill the leader (whichever it is), then let the reboots go on.
    if c.lease_holder().await == "first" {
        first.process.kill();
    }
    for node in zone_of.keys() {
        agent.release(node);
    }
    observer
        .wait_until("every node rebooted", Duration::from_secs(60), |o| {
            zone_of
                .keys()
                .all(|n| o.ended_with(n, "MaintenanceCompleted"))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let seen = observer.observed();
    assert_eq!(max_per_zone(&seen, &zone_of), 1, "{}", seen.timeline());
    assert!(seen.max_in_progress <= 3, "{}", seen.timeline());
}

/// The most nodes of one zone `MaintenanceInProgress=True` at once, from the changes.
fn max_per_zone(seen: &Observed, zone_of: &std::collections::BTreeMap<String, String>) -> usize {
    let mut now: std::collections::BTreeMap<&str, bool> = Default::default();
    let mut max = 0;
    for change in &seen.changes {
        let true_now = change
            .condition
            .as_ref()
            .is_some_and(|c| c.status == "True");
        now.insert(&change.node, true_now);
        let zone = &zone_of[&change.node];
        let here = now
            .iter()
            .filter(|(n, t)| **t && zone_of[**n] == *zone)
            .count();
        max = max.max(here);
    }
    max
}

// ---------------------------------------------------------------------------------------
// Pacing

/// `--start-interval=15s`, two nodes need a reboot, slots for both. a starts; b waits
/// with `StartInterval`. kumaco is killed and started again: the new process reads a's
/// start from its condition and still starts b no earlier than 15 s after it.
#[tokio::test]
async fn starts_are_paced_across_a_restart() {
    let c = Cluster::new("pacing").await;
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    c.needs_reboot(&a, 0).await;
    c.needs_reboot(&b, 1).await;
    let agent = c.agent(REBOOT).await;
    agent.hold(&a);
    c.put_active_window("w", &c.scope.selector()).await;
    let flags = ["--max-in-progress=2", "--start-interval=15s"];
    let mut kumaco = c.kumaco(&flags).await;
    let started = c.wait_mip(&a, "True", None).await;
    let paced = c.wait_mip(&b, "False", Some("StartInterval")).await;
    let a_start = started.last_transition_time.unwrap().0;
    let next = a_start + SignedDuration::from_secs(15);
    assert!(
        paced
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with(&format!(
                "next start possible at {}",
                next.strftime("%Y-%m-%dT%H:%M:%SZ")
            ))),
        "{:?}",
        paced.message
    );
    kumaco.kill();
    let _kumaco = c.kumaco(&flags).await;
    let b_started = c
        .wait_mip_for(&b, "True", None, Duration::from_secs(30))
        .await;
    let b_start = b_started.last_transition_time.unwrap().0;
    assert!(
        b_start >= next,
        "b started at {b_start}, before {next} (a started at {a_start})"
    );
    assert!(
        b_start <= next + SignedDuration::from_secs(3),
        "b started at {b_start}, long after {next}"
    );
}

// ---------------------------------------------------------------------------------------
// Helpers: what only these tests need beside testkit's Cluster

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

/// testkit's [`TestCluster`]-based cluster with `--in-progress` and the reboot
/// requirement, and what the brain's tests do to nodes and pods.
struct Cluster(testkit::cluster::Cluster);

impl Deref for Cluster {
    type Target = testkit::cluster::Cluster;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Cluster {
    async fn new(name: &str) -> Self {
        let c = testkit::cluster::Cluster::new(ApiServer::shared(), name, KUMACO).await;
        Cluster(c.with_flags(&["--in-progress", REQUIRE_REBOOT]))
    }

    /// `RebootRequired=True`, since `order` seconds after a fixed instant (the start order).
    async fn needs_reboot(&self, node: &str, order: usize) {
        let since = Timestamp::now() - SignedDuration::from_hours(1)
            + SignedDuration::from_secs(order as i64);
        self.needs_reboot_since(node, since).await;
    }

    /// The node's `Ready` condition, as its kubelet would report it.
    async fn ready(&self, node: &str, status: &str) {
        set_condition(&self.client, node, "Ready", status, "test-kubelet")
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Cordons or uncordons the node, as `kubectl cordon` does.
    async fn cordon(&self, node: &str, on: bool) {
        Api::<Node>::all(self.client.clone())
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "unschedulable": on } })),
            )
            .await
            .unwrap_or_else(|e| panic!("cordoning {node}: {e}"));
    }

    /// A pod of `app` bound to `node` in this test's namespace, in `phase`.
    async fn pod_on(&self, name: &str, node: &str, app: &str, phase: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "app": app } },
            "spec": { "nodeName": node, "containers": [{ "name": "c", "image": "registry.invalid/c" }] },
        }))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("creating pod {name}: {e}"));
        self.phase(name, phase).await;
    }

    /// Sets a pod's phase, as its kubelet would.
    async fn phase(&self, name: &str, phase: &str) {
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "phase": phase } })),
            )
            .await
            .unwrap_or_else(|e| panic!("setting pod {name} {phase}: {e}"));
    }

    async fn mip(&self, node: &str) -> NodeCondition {
        let n = Api::<Node>::all(self.client.clone())
            .get(node)
            .await
            .unwrap();
        condition(&n, MIP).cloned().unwrap_or_default()
    }

    /// Waits until `MaintenanceInProgress` on `node` has `status` (and `reason`).
    async fn wait_mip(&self, node: &str, status: &str, reason: Option<&str>) -> NodeCondition {
        self.wait_mip_for(node, status, reason, PROMPT).await
    }

    async fn wait_mip_for(
        &self,
        node: &str,
        status: &str,
        reason: Option<&str>,
        timeout: Duration,
    ) -> NodeCondition {
        wait_for_status(&self.client, node, MIP, status, reason, timeout)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Checks for `period` that `node` does not start.
    async fn stays_waiting(&self, node: &str, period: Duration) {
        let end = std::time::Instant::now() + period;
        while std::time::Instant::now() < end {
            let c = self.mip(node).await;
            assert_ne!(c.status, "True", "{node} started: {c:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// How long a reboot takes in these tests (the agent's random pause).
const REBOOT: (Duration, Duration) = (Duration::from_millis(300), Duration::from_millis(800));

// ---------------------------------------------------------------------------------------
// The pods right

/// The base grants nothing about pods; the `blocking-pods` component grants `get list
/// watch` on pods and nothing more, as the API server's authorizer says.
#[tokio::test]
async fn the_pods_right_comes_only_with_the_blocking_pods_component() {
    let admin = ApiServer::shared().client().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let apply = |objects: Vec<kube::api::DynamicObject>| {
        let admin = admin.clone();
        async move {
            for obj in objects {
                testkit::manifests::apply(&admin, &obj, &APPLY)
                    .await
                    .unwrap_or_else(|e| panic!("{e:#}"));
            }
        }
    };
    for file in ["namespace.yaml", "serviceaccount.yaml", "rbac-nodes.yaml"] {
        apply(testkit::manifests::read(&dir.join("base").join(file)).unwrap()).await;
    }
    // The base's ClusterRole is there (its Lease reads) before asking about pods.
    testkit::time::poll_until(
        "the base's rights to be seen",
        Duration::from_secs(30),
        || may(&admin, "get", "leases", "coordination.k8s.io"),
    )
    .await;
    assert!(
        !may(&admin, "list", "pods", "").await,
        "the base may list pods"
    );
    apply(testkit::manifests::read(&dir.join("components/blocking-pods/rbac.yaml")).unwrap()).await;
    testkit::time::poll_until(
        "the component's pods right",
        Duration::from_secs(30),
        || may(&admin, "watch", "pods", ""),
    )
    .await;
    assert!(may(&admin, "list", "pods", "").await);
    for verb in ["create", "delete", "patch"] {
        assert!(!may(&admin, verb, "pods", "").await, "{verb} pods granted");
    }
    assert!(!may(&admin, "create", "pods/eviction", "").await);
}

const APPLY: testkit::manifests::ApplyOptions = testkit::manifests::ApplyOptions {
    field_manager: "kumaco-brain-test",
    dry_run: false,
    default_namespace: None,
};

/// Whether kumaco's ServiceAccount may `verb` the `resource` (of API `group`) in any
/// namespace.
async fn may(client: &kube::Client, verb: &str, resource: &str, group: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("system:serviceaccount:kumaco:kumaco".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                verb: Some(verb.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}
