//! The PodDisruptionBudget gate against the pipeline as it behaves: the real kumaco, the
//! real API server's eviction API, the real controller-manager computing every budget's
//! status (and recreating StatefulSet pods), kured v2's daemons draining as kubectl's
//! drain helper does (evictions retried while a budget refuses), and a stand-in scheduler
//! and kubelet for the pods (`testkit::workloads`).
//!
//! Without the gate, a node whose pod's budget allows no eviction starts, its drain is
//! refused for ever and it holds its slot, cordoned: every other node of its zone waits
//! behind it. With the gate it never starts while the others complete, and nothing any
//! drain asks for is refused.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use testkit::ApiServer;
use testkit::agent::{MAINTENANCE_IN_PROGRESS as MIP, REBOOT_REQUIRED};
use testkit::cluster::Cluster;
use testkit::kured::{Kured, KuredSpec};
use testkit::nodes::condition;
use testkit::time::poll_showing;
use testkit::workloads::{ControllerManager, PodRunner, set_phase};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
const ZONE: &str = "topology.kubernetes.io/zone";
/// A rollout's bound: 2 minutes, plus the disruption controller's `DeletionTimeout` (2
/// minutes). The stand-in drain evicts with no grace period and the StatefulSet
/// controller recreates the pod under its own name at once; when the disruption
/// controller did not see the old pod go, it counts the new one as disrupted until that
/// timeout, and the budget allows nothing meanwhile (docs/maintenance-in-progress.md,
/// "A pod recreated under its own name may wait two minutes"). Seen in CI: the second
/// node started 2 minutes to the second after the first one's eviction.
const ROLLOUT: Duration = Duration::from_secs(120 + 120);
/// How long the disruption controller may take to compute a new budget's status.
const BUDGET_STATUS: Duration = Duration::from_secs(60);

fn kured_spec() -> KuredSpec {
    KuredSpec {
        period: Duration::from_secs(1),
        reboot: Duration::from_secs(2),
        daemon_delay: Duration::from_millis(500),
        in_progress: MIP.into(),
    }
}

/// A test's nodes, each needing one reboot since an hour ago, and a window open now over
/// all of them.
async fn fleet(name: &str, nodes: &[(&str, &str)], flags: &[&str]) -> (Cluster, Vec<String>) {
    let c = Cluster::new(ApiServer::shared(), name, KUMACO)
        .await
        .with_flags(flags);
    let mut names = Vec::new();
    for (short, zone) in nodes {
        let node = c.node(short, &[(ZONE, zone)]).await;
        c.needs_reboot_since(&node, Timestamp::now() - SignedDuration::from_hours(1))
            .await;
        names.push(node);
    }
    c.put_active_window("w", &c.scope.selector()).await;
    (c, names)
}

/// A budget in the test's namespace: `minAvailable` over the pods labelled `app`.
async fn budget(c: &Cluster, name: &str, app: &str, min_available: i32) {
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": c.ns },
        "spec": { "minAvailable": min_available,
                  "selector": { "matchLabels": { "app": app } } },
    }))
    .unwrap();
    Api::<PodDisruptionBudget>::namespaced(c.client.clone(), &c.ns)
        .create(&PostParams::default(), &pdb)
        .await
        .unwrap_or_else(|e| panic!("creating budget {name}: {e}"));
}

/// Waits until the disruption controller says `allowed` for the budget, for its spec as
/// it is now.
async fn budget_allows(c: &Cluster, name: &str, allowed: i32) {
    let api = Api::<PodDisruptionBudget>::namespaced(c.client.clone(), &c.ns);
    poll_showing(
        &format!("budget {name} to allow {allowed}"),
        BUDGET_STATUS,
        || {
            let api = api.clone();
            async move {
                let b = api.get(name).await.map_err(|e| e.to_string())?;
                let status = b.status.clone().unwrap_or_default();
                let current = status.observed_generation >= b.metadata.generation;
                if current && status.disruptions_allowed.unwrap_or_default() == allowed {
                    Ok(())
                } else {
                    Err(format!(
                        "{:?}; controller-manager log:\n{}",
                        b.status,
                        ControllerManager::shared().log_tail(10)
                    ))
                }
            }
        },
    )
    .await;
}

/// A pod on `node`, running and Ready as its kubelet would report.
async fn running_pod(
    c: &Cluster,
    name: &str,
    node: &str,
    labels: serde_json::Value,
    owner: Option<&str>,
) {
    let mut meta = json!({ "name": name, "namespace": c.ns, "labels": labels });
    if let Some(kind) = owner {
        meta["ownerReferences"] = json!([{ "apiVersion": "apps/v1", "kind": kind,
            "name": "owner", "uid": "00000000-0000-0000-0000-000000000001",
            "controller": true }]);
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": meta,
        "spec": { "nodeName": node,
                  "containers": [{ "name": "c", "image": "registry.invalid/app" }] },
    }))
    .unwrap();
    let pods = Api::<Pod>::namespaced(c.client.clone(), &c.ns);
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {name}: {e}"));
    set_phase(&pods, name, "Running", true)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// The node's `MaintenanceInProgress` as `(status, reason, message)`.
async fn progress(c: &Cluster, node: &str) -> Option<(String, String, String)> {
    let n = Api::<Node>::all(c.client.clone()).get(node).await.unwrap();
    condition(&n, MIP).map(|c| {
        (
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    })
}

/// Waits until each of `nodes` rebooted and is back in service.
async fn back_in_service(c: &Cluster, kured: &Kured, nodes: &[String]) {
    let api: Api<Node> = Api::all(c.client.clone());
    poll_showing("the nodes rebooted and back in service", ROLLOUT, || {
        let api = api.clone();
        async move {
            let mut not_yet = Vec::new();
            for name in nodes {
                let n = api.get(name).await.map_err(|e| e.to_string())?;
                let status = |t: &str| condition(&n, t).map(|c| c.status.clone());
                let cordoned = n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
                if status(REBOOT_REQUIRED).as_deref() != Some("False")
                    || status(MIP).as_deref() == Some("True")
                    || cordoned
                    || kured.reboots(name) == 0
                {
                    let mip = condition(&n, MIP).map(|c| (c.reason.clone(), c.message.clone()));
                    not_yet.push(format!("{name} ({mip:?})"));
                }
            }
            if not_yet.is_empty() {
                return Ok(());
            }
            let budgets = Api::<PodDisruptionBudget>::namespaced(c.client.clone(), &c.ns)
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let budgets: Vec<String> = budgets
                .items
                .iter()
                .map(|b| format!("{:?} {:?}", b.metadata.name, b.status))
                .collect();
            let pods = Api::<Pod>::namespaced(c.client.clone(), &c.ns)
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let pods: Vec<String> = pods
                .items
                .iter()
                .map(|p| {
                    format!(
                        "{:?} on {:?} {:?} {:?}",
                        p.metadata.name,
                        p.spec.as_ref().and_then(|s| s.node_name.clone()),
                        p.status.as_ref().and_then(|s| s.phase.clone()),
                        p.status.as_ref().and_then(|s| s.conditions.clone()),
                    )
                })
                .collect();
            Err(format!(
                "{not_yet:?}; budgets {budgets:?}; pods {pods:?}; kured: {:?}",
                kured.log()
            ))
        }
    })
    .await;
}

/// 4 nodes in 2 zones, 2 at once and 1 per zone. a0 runs a pod whose budget allows no
/// eviction: it never starts while the other three complete (its zone's slot goes to
/// a1), and once the budget allows one it starts and completes too. b2 runs a DaemonSet's
/// pod and b3 a finished pod under a budget that allows nothing: neither blocks. No
/// eviction any drain asks for is refused.
#[tokio::test]
async fn a_node_whose_budget_allows_no_eviction_waits_while_the_others_complete() {
    let _kcm = ControllerManager::shared();
    let (c, nodes) = fleet(
        "budget-zero",
        &[("a0", "a"), ("a1", "a"), ("b2", "b"), ("b3", "b")],
        &[
            "--in-progress",
            "--require-condition=kured.dev/RebootRequired",
            "--max-in-progress=2",
            &format!("--max-in-progress-per={ZONE}=1"),
        ],
    )
    .await;
    let (a0, a1, b2, b3) = (&nodes[0], &nodes[1], &nodes[2], &nodes[3]);
    running_pod(&c, "solo", a0, json!({ "app": "solo" }), None).await;
    budget(&c, "solo", "solo", 1).await;
    running_pod(
        &c,
        "agent",
        b2,
        json!({ "app": "frozen" }),
        Some("DaemonSet"),
    )
    .await;
    running_pod(&c, "job", b3, json!({ "app": "frozen" }), None).await;
    let pods = Api::<Pod>::namespaced(c.client.clone(), &c.ns);
    set_phase(&pods, "job", "Succeeded", false).await.unwrap();
    budget(&c, "frozen", "frozen", 5).await;
    budget_allows(&c, "solo", 0).await;
    budget_allows(&c, "frozen", 0).await;

    let observer = c.observer().await;
    let needs: Vec<(String, u32)> = nodes.iter().map(|n| (n.clone(), 1)).collect();
    let evictions = ApiServer::shared().client_without_retries().await.unwrap();
    let kured = Kured::start_evicting(&c.client, &evictions, &needs, kured_spec())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let _kumaco = c.kumaco(&[]).await;

    back_in_service(&c, &kured, &[a1.clone(), b2.clone(), b3.clone()]).await;
    let held = progress(&c, a0).await;
    let solo = format!(
        "PodDisruptionBudget {ns}/solo allows 0 disruptions (pod {ns}/solo)",
        ns = c.ns
    );
    assert_eq!(
        held,
        Some(("False".into(), "PodDisruptionBudget".into(), solo)),
        "{}",
        observer.observed().timeline()
    );
    assert_eq!(kured.reboots(a0), 0);
    assert!(
        kured.refused_evictions().is_empty(),
        "a drain was refused: {:?}",
        kured.refused_evictions()
    );

    // The budget allows one: a0 starts, and its drain goes through.
    Api::<PodDisruptionBudget>::namespaced(c.client.clone(), &c.ns)
        .patch(
            "solo",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "minAvailable": 0 } })),
        )
        .await
        .unwrap();
    budget_allows(&c, "solo", 1).await;
    back_in_service(&c, &kured, &nodes).await;
    for node in &nodes {
        assert_eq!(kured.reboots(node), 1, "{node}: {:?}", kured.log());
    }
    assert!(
        kured.refused_evictions().is_empty(),
        "a drain was refused: {:?}",
        kured.refused_evictions()
    );
    let seen = observer.observed();
    assert!(seen.max_in_progress <= 2, "{}", seen.timeline());
}

/// Two nodes whose pods (a StatefulSet's, each on its node's local volume) share a budget
/// that allows one, ceiling 2: never both in progress; the second starts once the first
/// is back and its pod is healthy again; both done in turn, no eviction refused.
#[tokio::test]
async fn two_nodes_sharing_a_budget_that_allows_one_go_in_turn() {
    let _kcm = ControllerManager::shared();
    let (c, nodes) = fleet(
        "budget-shared",
        &[("x0", "x"), ("x1", "x")],
        &[
            "--in-progress",
            "--require-condition=kured.dev/RebootRequired",
            "--max-in-progress=2",
        ],
    )
    .await;
    // web-0 lives on x0, web-1 on x1.
    let homes: BTreeMap<String, String> = [("web-0", &nodes[0]), ("web-1", &nodes[1])]
        .into_iter()
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect();
    // The nodes booted (Ready) first: the stand-in binds pods only to Ready nodes.
    let needs: Vec<(String, u32)> = nodes.iter().map(|n| (n.clone(), 1)).collect();
    let evictions = ApiServer::shared().client_without_retries().await.unwrap();
    let kured = Kured::start_evicting(&c.client, &evictions, &needs, kured_spec())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let _runner = PodRunner::start(&c.client, &c.ns, move |pod| homes.get(pod).cloned());
    let set = json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": { "name": "web", "namespace": c.ns },
        "spec": {
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "serviceName": "web",
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "c", "image": "registry.invalid/web" }] },
            },
        },
    });
    let sets: Api<kube::api::DynamicObject> = Api::namespaced_with(
        c.client.clone(),
        &c.ns,
        &kube::api::ApiResource::erase::<k8s_openapi::api::apps::v1::StatefulSet>(&()),
    );
    sets.create(
        &PostParams::default(),
        &serde_json::from_value(set).unwrap(),
    )
    .await
    .unwrap();
    budget(&c, "web", "web", 1).await;
    budget_allows(&c, "web", 1).await;

    let observer = c.observer().await;
    let _kumaco = c.kumaco(&[]).await;
    back_in_service(&c, &kured, &nodes).await;
    let seen = observer.observed();
    assert_eq!(
        seen.max_in_progress,
        1,
        "both nodes in progress at once: {}",
        seen.timeline()
    );
    for node in &nodes {
        assert_eq!(kured.reboots(node), 1, "{node}: {:?}", kured.log());
        assert_eq!(seen.start_count(node), 1, "{}", seen.timeline());
    }
    assert!(
        kured.refused_evictions().is_empty(),
        "a drain was refused: {:?}",
        kured.refused_evictions()
    );
    // The one that waited said why.
    let waited = seen.changes.iter().any(|ch| {
        ch.condition
            .as_ref()
            .is_some_and(|c| c.reason.as_deref() == Some("PodDisruptionBudget"))
    });
    assert!(waited, "{}", seen.timeline());
}

/// Without the rights the gate needs, kumaco stops at start-up and names them, instead of
/// waiting unready for a list it may not make.
#[tokio::test]
async fn without_the_rights_of_the_gate_kumaco_stops_and_says_which() {
    let server = ApiServer::shared();
    let c = Cluster::new(server, "budget-rights", KUMACO).await;
    let user = format!("kumaco-nobudgets-{}", c.scope.value());
    let kubeconfig = server.kubeconfig_for(&user, &[]).unwrap();
    let mut kumaco = std::process::Command::new(KUMACO);
    kumaco
        .args(["run", "--leader-elect=false", "--in-progress"])
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={}", c.ns))
        .args([
            "--metrics-address=127.0.0.1:0",
            "--health-address=127.0.0.1:0",
        ]);
    let out = testkit::process::output("kumaco", kumaco, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--pod-disruption-budgets")
            && stderr.contains("poddisruptionbudgets")
            && stderr.contains("components/disruption-budgets"),
        "{stderr}"
    );
}

/// The kustomize component grants exactly what the gate reads: `list watch` on
/// poddisruptionbudgets and `list` on pods, nothing else about pods.
#[tokio::test]
async fn the_disruption_budgets_component_grants_what_the_gate_reads_and_no_more() {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let admin = ApiServer::shared().client().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let options = testkit::manifests::ApplyOptions {
        field_manager: "kumaco-budgets-test",
        dry_run: false,
        default_namespace: None,
    };
    for file in [
        "base/namespace.yaml",
        "base/serviceaccount.yaml",
        "components/disruption-budgets/rbac.yaml",
    ] {
        for obj in testkit::manifests::read(&dir.join(file)).unwrap() {
            testkit::manifests::apply(&admin, &obj, &options)
                .await
                .unwrap_or_else(|e| panic!("{file}: {e:#}"));
        }
    }
    let may = |verb: &'static str, resource: &'static str, group: &'static str| {
        let admin = admin.clone();
        async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some("system:serviceaccount:kumaco:kumaco".into()),
                    groups: Some(vec!["system:serviceaccounts".into()]),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(group.into()),
                        resource: Some(resource.into()),
                        verb: Some(verb.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<SubjectAccessReview>::all(admin)
                .create(&PostParams::default(), &review)
                .await
                .expect("a SubjectAccessReview")
                .status
                .is_some_and(|s| s.allowed)
        }
    };
    testkit::time::poll_until("the component's rights", Duration::from_secs(30), || {
        may("watch", "poddisruptionbudgets", "policy")
    })
    .await;
    assert!(may("list", "poddisruptionbudgets", "policy").await);
    assert!(may("list", "pods", "").await);
    for (verb, resource, group) in [
        ("watch", "pods", ""),
        ("get", "pods", ""),
        ("create", "pods/eviction", ""),
        ("update", "poddisruptionbudgets", "policy"),
    ] {
        assert!(
            !may(verb, resource, group).await,
            "{verb} {resource} granted"
        );
    }
}
