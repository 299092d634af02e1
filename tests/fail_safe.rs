//! Fail safe, and loudly, against the real API server, with kured v2's daemons as they
//! behave (the executor reboots a node the moment it is in progress, and again while it
//! stays so):
//!
//! - what the cluster changes under kumaco never stops it: restarted, mid-maintenance,
//!   into a cluster where an object check's kind is not served, or as an identity whose
//!   RBAC predates the PodDisruptionBudget gate, kumaco runs; the rebooted node's
//!   maintenance ends within seconds (one reboot), nothing starts, the waiting node says
//!   why (`GateUnavailable`, naming the cause and what to do), the metric counts it, and
//!   kumaco recovers by itself once the cluster is mended;
//! - the pause (`kumaco pause`): no start, every waiting node saying who paused and why,
//!   what is in progress finishes, across a leader change; `kumaco resume` lets the next
//!   start happen.
//!
//! Waits poll with deadlines; the sleeps are the scenario (the observation period of a
//! "nothing starts" check).

use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use testkit::ApiServer;
use testkit::agent::MAINTENANCE_IN_PROGRESS as MIP;
use testkit::cluster::{Cluster, REPLICA_LEASE};
use testkit::kumaco::{KumacoProcess, SHORT_LEASE, metric, one_leader};
use testkit::kured::{Kured, KuredSpec};
use testkit::nodes::{condition, wait_for_status};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
/// How long a stand-in reboot keeps a node down: long enough to restart kumaco while the
/// node is in maintenance.
const REBOOT: Duration = Duration::from_secs(6);
/// A maintenance's whole course here: drain, reboot, back in service.
const MAINTENANCE: Duration = Duration::from_secs(60);
/// How long a "nothing starts" check watches.
const STAYS: Duration = Duration::from_secs(3);

fn kured_spec() -> KuredSpec {
    KuredSpec {
        period: Duration::from_secs(1),
        reboot: REBOOT,
        daemon_delay: Duration::from_millis(500),
        in_progress: MIP.into(),
    }
}

/// Nodes `a` and `b` (in this order) needing a reboot since an hour ago, a window open
/// over them, one slot; kured's daemons on both.
async fn fleet(name: &str, flags: &[&str], nodes: &[&str]) -> (Cluster, Vec<String>, Kured) {
    let mut all = vec![
        "--in-progress",
        "--require-condition=kured.dev/RebootRequired",
        "--max-in-progress=1",
    ];
    all.extend_from_slice(flags);
    let c = Cluster::new(ApiServer::shared(), name, KUMACO)
        .await
        .with_flags(&all);
    let first = Timestamp::now() - SignedDuration::from_hours(1);
    let mut names = Vec::new();
    for (i, short) in nodes.iter().enumerate() {
        let node = c.node(short, &[]).await;
        c.needs_reboot_since(&node, first + SignedDuration::from_secs(i as i64))
            .await;
        names.push(node);
    }
    c.put_active_window("w", &c.scope.selector()).await;
    let needs: Vec<(String, u32)> = names.iter().map(|n| (n.clone(), 1)).collect();
    let kured = Kured::start(&c.client, &needs, kured_spec())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    (c, names, kured)
}

async fn mip(c: &Cluster, node: &str) -> NodeCondition {
    let n = Api::<Node>::all(c.client.clone()).get(node).await.unwrap();
    condition(&n, MIP).cloned().unwrap_or_default()
}

/// Waits until `MaintenanceInProgress` on `node` has `status` (and `reason`).
async fn wait_mip(
    c: &Cluster,
    node: &str,
    status: &str,
    reason: Option<&str>,
    within: Duration,
) -> NodeCondition {
    wait_for_status(&c.client, node, MIP, status, reason, within)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Checks for [`STAYS`] that `node` does not start.
async fn stays_waiting(c: &Cluster, node: &str) {
    let end = Instant::now() + STAYS;
    while Instant::now() < end {
        let m = mip(c, node).await;
        assert_ne!(m.status, "True", "{node} started: {m:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `metric` with `labels` reads `value` on `kumaco`.
async fn wait_metric(k: &KumacoProcess, name: &str, labels: &[(&str, &str)], value: f64) {
    testkit::time::poll_showing(
        &format!("{name}{labels:?} = {value}"),
        Duration::from_secs(15),
        || async {
            let text = k.metrics_text().await.map_err(|e| e.to_string())?;
            let got = metric(&text, name, labels).map_err(|e| e.to_string())?;
            if got == value {
                Ok(())
            } else {
                Err(format!("{got}"))
            }
        },
    )
    .await;
}

/// kumaco started a's maintenance and stopped (killed: the brain gone mid-maintenance).
async fn killed_mid_maintenance(c: &Cluster, a: &str, flags: &[&str]) {
    let mut first = c.kumaco(flags).await;
    wait_mip(c, a, "True", None, MAINTENANCE).await;
    first.kill();
}

/// The maintenance of `a`, started by a kumaco that stopped, ends once kured rebooted it,
/// under the kumaco that runs now: one reboot.
async fn ends_once(c: &Cluster, kured: &Kured, a: &str) {
    let ended = wait_mip(c, a, "False", Some("NodeRebooted"), MAINTENANCE).await;
    assert!(
        ended
            .message
            .as_deref()
            .unwrap_or("")
            .contains("the node rebooted"),
        "{ended:?}"
    );
    assert_eq!(kured.reboots(a), 1, "{:?}", kured.log());
}

/// An object check names a kind no CustomResourceDefinition serves. kumaco, restarted
/// with it while a node is in maintenance, runs: the node's maintenance ends when it
/// reboots, the next node does not start and says why, and once the kind is installed
/// and its object holds, that node starts.
#[tokio::test]
async fn a_check_on_a_kind_not_served_holds_starts_while_maintenance_ends() {
    let (c, nodes, kured) =
        fleet("crd-gone", &["--pod-disruption-budgets=false"], &["a", "b"]).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    killed_mid_maintenance(&c, a, &[]).await;

    let group = format!("{}.absent.kumaco.test", c.scope.value());
    let check = format!("{group}/v1 Thing {}/x: object.status.ok == true", c.ns);
    let kumaco = c.kumaco(&["--block-unless", &check]).await;
    ends_once(&c, &kured, a).await;
    let held = wait_mip(&c, b, "False", Some("GateUnavailable"), MAINTENANCE).await;
    let message = held.message.unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "the objects of --block-unless 'Thing {}/x' cannot be read (not-found), so no \
             maintenance starts: the API server serves no kind Thing in {group}/v1",
            c.ns
        )),
        "{message}"
    );
    stays_waiting(&c, b).await;
    let cause = [("gate", "object-checks"), ("cause", "not-found")];
    wait_metric(&kumaco, "kumaco_gate_unavailable", &cause, 1.0).await;

    // Installed, with an object that holds: found again within the discovery's retry.
    let things = install_kind(&c.client, &group).await;
    let object = json!({
        "apiVersion": format!("{group}/v1"), "kind": "Thing",
        "metadata": { "name": "x" }, "status": { "ok": true },
    });
    Api::<DynamicObject>::namespaced_with(c.client.clone(), &c.ns, &things)
        .patch(
            "x",
            &PatchParams::apply("fail-safe-test"),
            &Patch::Apply(&object),
        )
        .await
        .unwrap();
    wait_mip(&c, b, "True", None, MAINTENANCE).await;
    wait_metric(&kumaco, "kumaco_gate_unavailable", &cause, 0.0).await;
}

/// An identity with what kumaco needed before the PodDisruptionBudget gate (nodes,
/// windows, events, Leases), not what the gate reads (an upgrade with hand-written
/// RBAC). kumaco, restarted as it while a node is in maintenance, runs: the node's
/// maintenance ends, the next node does not start and names the rights; granted them,
/// kumaco lets it start without a restart.
#[tokio::test]
async fn without_the_rights_of_the_budget_gate_maintenance_ends_and_starts_wait() {
    let (c, nodes, kured) = fleet("rbac-old", &[], &["a", "b"]).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    killed_mid_maintenance(&c, a, &[]).await;

    let user = format!("kumaco-old-rbac-{}", c.scope.value());
    grant(&c.client, &user, "base", base_rules()).await;
    let kubeconfig = ApiServer::shared().kubeconfig_for(&user, &[]).unwrap();
    let kumaco = c.kumaco_as(&kubeconfig, &[]).await;
    ends_once(&c, &kured, a).await;
    let held = wait_mip(&c, b, "False", Some("GateUnavailable"), MAINTENANCE).await;
    let message = held.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "the PodDisruptionBudgets cannot be read (forbidden), so no maintenance starts: \
             poddisruptionbudgets: list: "
        ) && message.contains("components/disruption-budgets"),
        "{message}"
    );
    stays_waiting(&c, b).await;
    let cause = [("gate", "pod-disruption-budgets"), ("cause", "forbidden")];
    wait_metric(&kumaco, "kumaco_gate_unavailable", &cause, 1.0).await;

    grant(
        &c.client,
        &user,
        "budgets",
        json!([
            { "apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["list", "watch"] },
            { "apiGroups": [""], "resources": ["pods"], "verbs": ["list"] },
        ]),
    )
    .await;
    wait_mip(&c, b, "True", None, MAINTENANCE).await;
    wait_metric(&kumaco, "kumaco_gate_unavailable", &cause, 0.0).await;
}

/// Paused while a node is in maintenance: it finishes (one reboot), and every other
/// node says who paused and why instead of starting, under the leader and, after it is
/// killed, under the next one, which rewrites nothing. Resumed, the next node starts.
#[tokio::test]
async fn a_pause_holds_every_start_across_a_leader_change_until_resumed() {
    let (c, nodes, kured) = fleet("pause", &SHORT_LEASE, &["a", "b", "c"]).await;
    let (a, b, third) = (&nodes[0], &nodes[1], &nodes[2]);
    let one = c.replica("kumaco-a", &[]).await;
    let two = c.replica("kumaco-b", &[]).await;
    assert!(one_leader(&one, &two, Duration::from_secs(10)).await);
    wait_mip(&c, a, "True", None, MAINTENANCE).await;

    let said = tool(
        &c,
        &[
            "pause",
            "--lease-namespace",
            &c.ns,
            "--lease-name",
            REPLICA_LEASE,
            "--reason",
            "incident 4711: storage degraded",
            "--by",
            "alice",
        ],
    );
    assert!(said.contains("paused the instance of Lease"), "{said}");
    ends_once(&c, &kured, a).await;
    let expected = format!(
        "new starts paused by alice at {{at}}: incident 4711: storage degraded (Lease \
         {REPLICA_LEASE}-pause; `kumaco resume` ends the pause)"
    );
    let mut versions = Vec::new();
    for node in [b, third] {
        let held = wait_mip(&c, node, "False", Some("Paused"), MAINTENANCE).await;
        let message = held.message.unwrap_or_default();
        let (head, tail) = expected.split_once("{at}").unwrap();
        assert!(
            message.starts_with(head) && message.ends_with(tail),
            "{message}"
        );
        versions.push(kumacos_last_write(&c, node).await);
    }
    let status = tool(&c, &["status", "--namespace", &c.ns]);
    assert!(
        status.contains(&format!(
            "PAUSED: the instance of Lease {}/{REPLICA_LEASE}",
            c.ns
        )),
        "{status}"
    );

    // The leader killed: the next one holds the same, writing nothing to the nodes.
    let (mut leader, standby) = if one.leader_gauge().await == Some(1.0) {
        (one, two)
    } else {
        (two, one)
    };
    leader.kill();
    testkit::time::poll_until("the standby to lead", Duration::from_secs(15), || async {
        standby.leader_gauge().await == Some(1.0)
    })
    .await;
    wait_metric(&standby.process, "kumaco_paused", &[], 1.0).await;
    stays_waiting(&c, b).await;
    for (node, before) in [b, third].into_iter().zip(versions) {
        assert_eq!(
            kumacos_last_write(&c, node).await,
            before,
            "{node} rewritten by the new leader"
        );
    }

    let said = tool(
        &c,
        &[
            "resume",
            "--lease-namespace",
            &c.ns,
            "--lease-name",
            REPLICA_LEASE,
        ],
    );
    assert!(said.contains("resumed"), "{said}");
    wait_mip(&c, b, "True", None, MAINTENANCE).await;
    wait_metric(&standby.process, "kumaco_paused", &[], 0.0).await;
    let again = tool(
        &c,
        &[
            "resume",
            "--lease-namespace",
            &c.ns,
            "--lease-name",
            REPLICA_LEASE,
        ],
    );
    assert!(again.contains("was not paused"), "{again}");
}

/// Runs a kumaco tool against the test's API server as the admin; its standard output.
fn tool(c: &Cluster, args: &[&str]) -> String {
    let out = std::process::Command::new(KUMACO)
        .args(args)
        .arg("--kubeconfig")
        .arg(ApiServer::shared().kubeconfig())
        .output()
        .expect("running kumaco");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kumaco {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = c;
    stdout
}

/// The conditions kumaco keeps on `node`, and when its field manager last changed them
/// (the detector's heartbeats change the node's resourceVersion meanwhile).
async fn kumacos_last_write(c: &Cluster, node: &str) -> (Option<NodeCondition>, String) {
    let n = Api::<Node>::all(c.client.clone()).get(node).await.unwrap();
    let manager = format!("kumaco-{}", c.scope.value());
    let time = n
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.manager.as_deref() == Some(manager.as_str()))
        .filter_map(|m| m.time.as_ref().map(|t| t.0.to_string()))
        .max()
        .unwrap_or_default();
    (condition(&n, MIP).cloned(), time)
}

/// What kumaco needed before the PodDisruptionBudget gate: nodes and their status,
/// window ConfigMaps and events, Leases (its own, its pause's, its peers').
fn base_rules() -> serde_json::Value {
    json!([
        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"] },
        { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"] },
        { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"] },
    ])
}

/// Grants `user` `rules`, cluster-wide (a ClusterRole and its binding named after both).
async fn grant(client: &kube::Client, user: &str, name: &str, rules: serde_json::Value) {
    let name = format!("{user}-{name}");
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": name }, "rules": rules,
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .unwrap();
    let apply = PatchParams::apply("fail-safe-test").force();
    Api::<ClusterRole>::all(client.clone())
        .patch(&name, &apply, &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(&name, &apply, &Patch::Apply(&binding))
        .await
        .unwrap();
}

/// Installs kind `Thing` in `group` (namespaced, any status) and waits until it is
/// served.
async fn install_kind(client: &kube::Client, group: &str) -> ApiResource {
    let name = format!("things.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": name },
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": { "kind": "Thing", "plural": "things", "singular": "thing" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "status": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    },
                } },
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            &name,
            &PatchParams::apply("fail-safe-test"),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk(group, "v1", "Thing");
    testkit::time::poll_for("the kind to be served", Duration::from_secs(30), || async {
        let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.ok()?;
        let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
        api.list(&Default::default()).await.ok()?;
        Some(resource)
    })
    .await
}
