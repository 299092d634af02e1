//! Object checks (`--block-unless`) against the real API server: a CustomResourceDefinition
//! made here, its objects patched the way an operator updates their status, and the real
//! kumaco binary with `--in-progress`.
//!
//! - while the expression is false no node starts (`HealthCheckFailed`, the check named);
//!   once it holds the next start happens; a node in progress is never ended by it;
//! - every object a selector matches must hold, and one on which the expression cannot
//!   be evaluated (a field absent) holds every start with the CEL error, in the nodes'
//!   message and in the log;
//! - kumaco refuses to start on an expression that does not compile (what it can tell
//!   alone); a kind the API server does not serve, a namespaced kind named without its
//!   namespace and a missing right to read the objects hold every start instead, each
//!   node naming the check and the cause (`GateUnavailable`).
//!
//! Waits watch or poll with deadlines; the sleeps are the scenario (the observation
//! period of a "nothing starts" check).

use std::ops::Deref;
use std::process::Command;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use testkit::ApiServer;
use testkit::agent::{MAINTENANCE_IN_PROGRESS as MIP, REBOOT_REQUIRED};
use testkit::kumaco::{LISTEN_ANYWHERE, metric};
use testkit::nodes::{condition, wait_for_condition, wait_for_status};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
/// How soon kumaco must react to an object or node change (a watch event, an evaluation,
/// a pass), on a loaded 2-core machine.
const PROMPT: Duration = Duration::from_secs(5);
const GROUP: &str = "checks.kumaco.test";
const KIND: &str = "StorageCluster";
const HEALTHY: &str = r#"object.status.health == "HEALTH_OK""#;

/// The storage cluster is unhealthy when kumaco starts: no node starts. Healthy, two
/// start (the ceiling); unhealthy again, both go on while the third waits for a slot.
/// One completes: the free slot is held by the check, not taken; healthy, the third
/// starts.
#[tokio::test]
async fn no_start_while_the_check_fails_and_the_next_start_once_it_holds() {
    let c = Cluster::new("checks").await;
    c.storage("ceph", &[], json!({ "health": "HEALTH_WARN" }))
        .await;
    let nodes = c.nodes(&["a", "b", "c"]).await;
    c.put_active_window("w", &c.scope.selector()).await;
    let check = format!("{GROUP}/v1 {KIND} {}/ceph: {HEALTHY}", c.ns);
    let kumaco = c
        .kumaco(&["--max-in-progress=2", "--block-unless", &check])
        .await;

    let failed = format!("{KIND} {}/ceph: {HEALTHY} is false", c.ns);
    for node in &nodes {
        let held = c.wait_mip(node, "False", Some("HealthCheckFailed")).await;
        assert_eq!(held.message.as_deref(), Some(failed.as_str()));
    }
    c.stays_waiting(&nodes, Duration::from_secs(3)).await;
    let metrics = kumaco.metrics_text().await.unwrap();
    let gate = [("gate", "object-checks")];
    assert_eq!(metric(&metrics, "kumaco_gate_holding", &gate).unwrap(), 1.0);
    let ok_reads = [("gate", "object-checks"), ("result", "ok")];
    assert!(metric(&metrics, "kumaco_gate_reads_total", &ok_reads).unwrap() >= 1.0);

    c.health("ceph", "HEALTH_OK").await;
    c.wait_mip(&nodes[0], "True", None).await;
    c.wait_mip(&nodes[1], "True", None).await;
    c.wait_mip(&nodes[2], "False", Some("WaitingForSlot")).await;
    let metrics = kumaco.metrics_text().await.unwrap();
    assert_eq!(metric(&metrics, "kumaco_gate_holding", &gate).unwrap(), 0.0);

    // A failing check holds starts, never a maintenance in progress.
    c.health("ceph", "HEALTH_ERR").await;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        for node in &nodes[..2] {
            assert_eq!(c.mip(node).await.status, "True", "{node} was ended");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The first completes: its slot is free, and the check holds the third.
    c.set(&nodes[0], REBOOT_REQUIRED, "False").await;
    c.wait_mip(&nodes[0], "False", Some("MaintenanceCompleted"))
        .await;
    let held = c
        .wait_mip(&nodes[2], "False", Some("HealthCheckFailed"))
        .await;
    assert_eq!(held.message.as_deref(), Some(failed.as_str()));
    c.stays_waiting(&nodes[2..], Duration::from_secs(2)).await;
    c.health("ceph", "HEALTH_OK").await;
    c.wait_mip(&nodes[2], "True", None).await;
}

/// A selector's objects: one healthy, one whose status has no `health` yet. The
/// expression cannot be evaluated on the second: every start holds, the message and the
/// log carry the CEL error. A third object matching and unhealthy holds (false, named),
/// after the second is mended; once the third is healthy too, the node starts.
#[tokio::test]
async fn every_object_a_selector_matches_must_hold_and_an_evaluation_error_holds() {
    let c = Cluster::new("check-selector").await;
    let labels = [("app", "storage")];
    c.storage("one", &labels, json!({ "health": "HEALTH_OK" }))
        .await;
    c.storage("two", &labels, json!({})).await;
    c.storage("other", &[], json!({})).await;
    let nodes = c.nodes(&["a"]).await;
    c.put_active_window("w", &c.scope.selector()).await;
    let check = format!("{GROUP}/v1 {KIND} {} -l app=storage: {HEALTHY}", c.ns);
    let kumaco = c.kumaco(&["--block-unless", &check]).await;

    let held = c
        .wait_mip(&nodes[0], "False", Some("HealthCheckFailed"))
        .await;
    assert_eq!(
        held.message.as_deref(),
        Some(
            format!(
                "{KIND} {}/two (1 of 2 matching -l app=storage fail): {HEALTHY} failed: No such key: health",
                c.ns
            )
            .as_str()
        )
    );
    let log = std::fs::read_to_string(kumaco.log_path()).unwrap();
    assert!(
        log.lines().any(|l| l.contains("could not be evaluated")
            && l.contains("No such key: health")
            && l.contains(&format!("{}/two", c.ns))),
        "no log line with the CEL error:\n{log}"
    );
    let metrics = kumaco.metrics_text().await.unwrap();
    let errors = [("gate", "object-checks"), ("result", "invalid")];
    assert!(metric(&metrics, "kumaco_gate_reads_total", &errors).unwrap() >= 1.0);

    // A third object, unhealthy, before the second is mended: no moment without a
    // failing object. The node keeps the message of the reason it first showed; the log
    // says what fails now.
    c.storage("three", &labels, json!({ "health": "HEALTH_WARN" }))
        .await;
    c.health("two", "HEALTH_OK").await;
    let now_failing = format!(
        "{KIND} {}/three (1 of 3 matching -l app=storage fail): {HEALTHY} is false",
        c.ns
    );
    testkit::time::poll_until("the log to name the third object", PROMPT, || {
        let log = std::fs::read_to_string(kumaco.log_path()).unwrap();
        let found = log.lines().any(|l| {
            l.contains("an object check fails") && l.contains(&now_failing.replace('"', "\\\""))
        });
        async move { found }
    })
    .await;
    c.stays_waiting(&nodes, Duration::from_secs(2)).await;
    c.health("three", "HEALTH_OK").await;
    c.wait_mip(&nodes[0], "True", None).await;
}

/// Several checks: each is evaluated, and every one must hold. The nodes name the first
/// failing check in flag order; once every one holds, the node starts.
#[tokio::test]
async fn every_check_is_evaluated_and_the_first_failing_shows() {
    let c = Cluster::new("checks-several").await;
    c.storage("one", &[], json!({ "health": "HEALTH_OK" }))
        .await;
    c.storage("two", &[], json!({ "health": "HEALTH_WARN" }))
        .await;
    let nodes = c.nodes(&["a"]).await;
    c.put_active_window("w", &c.scope.selector()).await;
    let first = format!("{GROUP}/v1 {KIND} {}/one: {HEALTHY}", c.ns);
    let second = format!("{GROUP}/v1 {KIND} {}/two: {HEALTHY}", c.ns);
    let _kumaco = c
        .kumaco(&["--block-unless", &first, "--block-unless", &second])
        .await;
    let says = |name: &str| format!("{KIND} {}/{name}: {HEALTHY} is false", c.ns);
    // Only the second fails: it shows.
    let held = c
        .wait_mip(&nodes[0], "False", Some("HealthCheckFailed"))
        .await;
    assert_eq!(held.message.as_deref(), Some(says("two").as_str()));
    // Both fail: the first, in flag order.
    c.health("one", "HEALTH_ERR").await;
    wait_message(&c, &nodes[0], &says("one")).await;
    // The first holds again: the second shows again.
    c.health("one", "HEALTH_OK").await;
    wait_message(&c, &nodes[0], &says("two")).await;
    c.stays_waiting(&nodes, Duration::from_secs(2)).await;
    c.health("two", "HEALTH_OK").await;
    c.wait_mip(&nodes[0], "True", None).await;
}

/// Waits until the node's `MaintenanceInProgress` message is `expected`.
async fn wait_message(c: &Cluster, node: &str, expected: &str) {
    wait_for_condition(&c.client, node, MIP, PROMPT, |cond| {
        cond.is_some_and(|cond| cond.message.as_deref() == Some(expected))
    })
    .await
    .unwrap_or_else(|e| panic!("{node}: {expected:?}: {e:#}"));
}

/// Refused at start-up, before anything is written: an expression that does not compile
/// (a usage error, with the CEL parser's message), which kumaco can tell alone. What the
/// cluster decides does not stop kumaco: a kind the API server does not serve, a
/// namespaced kind named without its namespace, an identity that may not list the
/// objects: each holds every start, the node naming the check and the cause.
#[tokio::test]
async fn a_check_kumaco_cannot_make_refuses_only_what_it_can_tell_alone() {
    let c = Cluster::new("check-refused").await;
    let ns = c.ns.clone();
    let broken = format!("{GROUP}/v1 {KIND} {ns}/ceph: object.status.(");
    let (code, stderr) = c.run_to_exit(&["--block-unless", &broken], None).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--block-unless: '{broken}': the expression does not compile: ERROR: <input>:1:15: Syntax error")),
        "{stderr}"
    );

    let nodes = c.nodes(&["a"]).await;
    c.put_active_window("w", &c.scope.selector()).await;
    let cases = [
        (
            format!("{GROUP}/v1 NoSuchKind {ns}/x: {HEALTHY}"),
            format!(
                "the objects of --block-unless 'NoSuchKind {ns}/x' cannot be read (not-found), \
                 so no maintenance starts: the API server serves no kind NoSuchKind in \
                 {GROUP}/v1 (is its CustomResourceDefinition installed?)"
            ),
        ),
        (
            format!("{GROUP}/v1 {KIND} ceph: {HEALTHY}"),
            format!(
                "the objects of --block-unless '{KIND} ceph' cannot be read (invalid), so no \
                 maintenance starts: {KIND} is namespaced: name its namespace (NAMESPACE/NAME)"
            ),
        ),
    ];
    for (spec, expected) in cases {
        let mut k = c.kumaco(&["--block-unless", &spec]).await;
        let held = c
            .wait_mip(&nodes[0], "False", Some("GateUnavailable"))
            .await;
        assert_eq!(held.message.as_deref(), Some(expected.as_str()), "{spec}");
        c.stays_waiting(&nodes, Duration::from_secs(2)).await;
        k.terminate(Duration::from_secs(10)).await.unwrap();
    }

    // An identity that may read nodes, windows and Leases, not the checked objects.
    let user = format!("no-rights-{}", c.scope.value());
    let kubeconfig = ApiServer::shared().kubeconfig_for(&user, &[]).unwrap();
    grant_base(&c.client, &user).await;
    let spec = format!("{GROUP}/v1 {KIND} {ns}/ceph: {HEALTHY}");
    let _k = c
        .kumaco_as(
            &kubeconfig,
            &["--block-unless", &spec, "--pod-disruption-budgets=false"],
        )
        .await;
    let held = c
        .wait_mip(&nodes[0], "False", Some("GateUnavailable"))
        .await;
    let message = held.message.unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "the objects of --block-unless '{KIND} {ns}/ceph' cannot be read (forbidden), so \
             no maintenance starts: object checks: list: "
        )) && message.contains("kumaco needs `get list watch` on them"),
        "{message}"
    );
}

/// Grants `user` what kumaco needs besides the object checks: nodes and their status,
/// window ConfigMaps and events, Leases.
async fn grant_base(client: &kube::Client, user: &str) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = format!("{user}-base");
    let role: ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": name },
        "rules": [
            { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"] },
            { "apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"] },
            { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] },
            { "apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"] },
            { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"] },
        ],
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .patch(&name, &apply(), &Patch::Apply(&role))
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .patch(&name, &apply(), &Patch::Apply(&binding))
        .await
        .unwrap();
}

/// The chart's `inProgress.objectChecks`, rendered by the real `helm template`: its
/// `--block-unless` flag and the Role it grants (only `get list watch` on the checked
/// resource, in its namespace) are enough for kumaco, running as the chart's
/// ServiceAccount with the chart's rights only, to hold a start and then let it go.
#[tokio::test]
async fn the_charts_object_checks_pass_the_flag_and_grant_what_it_reads() {
    let c = Cluster::new("check-chart").await;
    c.storage("ceph", &[], json!({ "health": "HEALTH_WARN" }))
        .await;
    let release = format!("kumaco-{}", c.scope.value());
    let objects = render_chart(
        &release,
        &c.ns,
        json!({
            "watchNamespaces": [c.ns],
            "inProgress": { "enabled": true, "objectChecks": [{
                "apiVersion": format!("{GROUP}/v1"), "kind": KIND, "resource": "storageclusters",
                "namespace": c.ns, "name": "ceph", "expression": HEALTHY,
            }] },
        }),
    );
    let role = objects
        .iter()
        .find(|o| o.metadata.name.as_deref() == Some(&format!("{release}-object-check-0")))
        .expect("the object check's Role");
    assert_eq!(
        (
            role.types.as_ref().unwrap().kind.as_str(),
            role.metadata.namespace.as_deref()
        ),
        ("Role", Some(c.ns.as_str()))
    );
    assert_eq!(
        role.data["rules"],
        json!([{ "apiGroups": [GROUP], "resources": ["storageclusters"], "verbs": ["get", "list", "watch"] }])
    );
    let flag = deployment_args(&objects)
        .into_iter()
        .find(|a| a.starts_with("--block-unless="))
        .expect("--block-unless in the Deployment's args");
    assert_eq!(
        flag,
        format!("--block-unless={GROUP}/v1 {KIND} {}/ceph: {HEALTHY}", c.ns)
    );

    // The chart's identity and rights, and nothing more.
    let options = testkit::manifests::ApplyOptions {
        field_manager: "kumaco-object-checks-test",
        dry_run: false,
        default_namespace: Some(&c.ns),
    };
    let rbac = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    for object in &objects {
        if rbac.contains(&object.types.as_ref().unwrap().kind.as_str()) {
            testkit::manifests::apply(&c.client, object, &options)
                .await
                .unwrap_or_else(|e| panic!("{e:#}"));
        }
    }
    let kubeconfig =
        testkit::hooks::service_account_kubeconfig(ApiServer::shared(), &c.ns, &release).unwrap();
    let as_kumaco = testkit::apiserver::client_from_kubeconfig(&kubeconfig)
        .await
        .unwrap();
    let storage = Api::<DynamicObject>::namespaced_with(as_kumaco, &c.ns, &storage_resource());
    testkit::time::poll_until("the chart's Role to be enforced", PROMPT, || {
        let storage = storage.clone();
        async move { storage.list(&Default::default()).await.is_ok() }
    })
    .await;

    let nodes = c.nodes(&["a"]).await;
    c.put_active_window("w", &c.scope.selector()).await;
    // As the chart's Deployment runs it: in the release's namespace, with its Lease's name
    // (the pause switch's Lease is named after it).
    let lease = deployment_args(&objects)
        .into_iter()
        .find(|a| a.starts_with("--lease-name="))
        .expect("--lease-name in the Deployment's args");
    let options = testkit::kumaco::StartOptions {
        kubeconfig: Some(kubeconfig.clone()),
        env: vec![("POD_NAMESPACE".into(), c.ns.clone())],
        ..Default::default()
    };
    let _kumaco = c.kumaco_with(&[&flag, &lease], &options).await;
    c.wait_mip(&nodes[0], "False", Some("HealthCheckFailed"))
        .await;
    c.health("ceph", "HEALTH_OK").await;
    c.wait_mip(&nodes[0], "True", None).await;
}

// ---------------------------------------------------------------------------------------
// Helpers

/// testkit's cluster with `--in-progress`, the reboot requirement, the test's
/// StorageClusters and what the tests do to nodes.
struct Cluster {
    base: testkit::cluster::Cluster,
    storage: Api<DynamicObject>,
}

impl Deref for Cluster {
    type Target = testkit::cluster::Cluster;
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Cluster {
    async fn new(name: &str) -> Self {
        let base = testkit::cluster::Cluster::new(ApiServer::shared(), name, KUMACO)
            .await
            .with_flags(&[
                "--in-progress",
                "--require-condition=kured.dev/RebootRequired",
            ]);
        let resource = storage_crd(&base.client).await;
        let storage = Api::namespaced_with(base.client.clone(), &base.ns, &resource);
        Cluster { base, storage }
    }

    /// Nodes `short` in the test's scope, each needing a reboot, in this order.
    async fn nodes(&self, short: &[&str]) -> Vec<String> {
        let first = Timestamp::now() - SignedDuration::from_hours(1);
        let mut nodes = Vec::new();
        for (i, s) in short.iter().enumerate() {
            let node = self.node(s, &[]).await;
            let since = first + SignedDuration::from_secs(i as i64);
            self.needs_reboot_since(&node, since).await;
            nodes.push(node);
        }
        nodes
    }

    /// Creates StorageCluster `name` with `labels` and `status`.
    async fn storage(&self, name: &str, labels: &[(&str, &str)], status: serde_json::Value) {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let object = json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": KIND,
            "metadata": { "name": name, "labels": labels },
            "spec": { "replicas": 3 },
            "status": status,
        });
        self.storage
            .patch(name, &apply(), &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("creating {KIND} {name}: {e}"));
    }

    /// Sets StorageCluster `name`'s `status.health`, as its operator would.
    async fn health(&self, name: &str, health: &str) {
        self.storage
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "health": health } })),
            )
            .await
            .unwrap_or_else(|e| panic!("setting {KIND} {name} {health}: {e}"));
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
        wait_for_status(&self.client, node, MIP, status, reason, PROMPT)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Checks for `period` that none of `nodes` starts.
    async fn stays_waiting(&self, nodes: &[String], period: Duration) {
        let end = Instant::now() + period;
        while Instant::now() < end {
            for node in nodes {
                let c = self.mip(node).await;
                assert_ne!(c.status, "True", "{node} started: {c:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs kumaco with the test's flags and `extra` (as `kubeconfig`'s identity, or the
    /// admin) until it exits, within 30 s; its exit code and stderr.
    async fn run_to_exit(
        &self,
        extra: &[&str],
        kubeconfig: Option<&std::path::Path>,
    ) -> (Option<i32>, String) {
        let server = ApiServer::shared();
        let mut command = Command::new(KUMACO);
        command
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig.unwrap_or(server.kubeconfig()))
            .arg("--leader-elect=false")
            .args(LISTEN_ANYWHERE)
            .args(self.scope_args())
            .args([
                "--in-progress",
                "--require-condition=kured.dev/RebootRequired",
            ])
            .args(extra);
        let out = testkit::process::output("kumaco", command, Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("kumaco {extra:?}: {e:#}"));
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn apply() -> PatchParams {
    PatchParams::apply("kumaco-object-checks-test").force()
}

/// The StorageCluster kind (namespaced, any spec and status), applied once per API
/// server and served.
async fn storage_crd(client: &kube::Client) -> ApiResource {
    let name = format!("storageclusters.{GROUP}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": name },
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": { "kind": KIND, "plural": "storageclusters", "singular": "storagecluster" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                        "status": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                    },
                } },
            }],
        },
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(&name, &apply(), &Patch::Apply(&crd))
        .await
        .unwrap_or_else(|e| panic!("applying the CustomResourceDefinition: {e}"));
    let gvk = GroupVersionKind::gvk(GROUP, "v1", KIND);
    testkit::time::poll_for(
        "the StorageCluster kind to be served",
        Duration::from_secs(30),
        || async {
            let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await.ok()?;
            // Served for discovery is not yet for every request: list once.
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            api.list(&Default::default()).await.ok()?;
            Some(resource)
        },
    )
    .await
}

/// `helm template RELEASE` of the chart in `namespace` with `values`, as objects.
fn render_chart(release: &str, namespace: &str, values: serde_json::Value) -> Vec<DynamicObject> {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let file = std::env::temp_dir().join(format!("{release}-values.json"));
    std::fs::write(&file, values.to_string()).unwrap();
    let chart = testkit::files::repo().join("charts/kumaco");
    let out = Command::new(helm)
        .args(["template", release])
        .arg(chart)
        .args([
            "--namespace",
            namespace,
            "--kube-version",
            "1.37.2",
            "--values",
        ])
        .arg(&file)
        .output()
        .expect("running helm template");
    assert!(
        out.status.success(),
        "helm template failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).unwrap();
    testkit::manifests::parse(&yaml).unwrap_or_else(|e| panic!("{e:#}\n{yaml}"))
}

/// The container args of the rendered Deployment.
fn deployment_args(objects: &[DynamicObject]) -> Vec<String> {
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .expect("a Deployment");
    let args = deployment.data["spec"]["template"]["spec"]["containers"][0]["args"].as_array();
    args.expect("container args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

fn storage_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", KIND), "storageclusters")
}
