//! Uninstalling leaves nothing behind: `helm uninstall` of the chart, with a node in
//! maintenance, on the real API server. The chart's pre-delete hook (`kumaco uninstall
//! --yes`) stops the instance and removes every condition its field manager owns; the
//! windows and their namespace stay.
//!
//! No kubelet or controller-manager runs here, so the test plays their parts for the two
//! Pods involved, as real processes under the identities the chart gives them: kumaco
//! runs with the Deployment's own arguments as its ServiceAccount (and gets SIGTERM, as
//! a kubelet sends it, once the Deployment is scaled to 0); the hook Job's container runs
//! with the Job's own arguments as the Job's ServiceAccount (so the chart's RBAC for it
//! is what is tested), and its Job is then marked complete, as the job controller would.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use serde_json::json;
use testkit::ApiServer;
use testkit::Scope;
use testkit::kumaco::{KumacoProcess, Pod, StartOptions};
use testkit::nodes::{create_node, has_status, managers, set_condition, wait_for_condition};
use testkit::time::{poll_until, whole_second};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
const NS: &str = "kumaco";
const WINDOWS_NS: &str = "maintenance";
const IN_PROGRESS: &str = "MaintenanceInProgress";
const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
const REBOOT_REQUIRED: &str = "kured.dev/RebootRequired";
const MANAGER: &str = "kumaco/kumaco/kumaco";
const WAIT: Duration = Duration::from_secs(60);

fn helm(server: &ApiServer, args: &[&str]) -> Command {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let mut cmd = Command::new(helm);
    let home = server.dir().join("helm-home");
    cmd.args(args)
        .current_dir(testkit::files::repo())
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"));
    cmd
}

fn container_args(spec: &serde_json::Value) -> Vec<String> {
    serde_json::from_value(spec["containers"][0]["args"].clone()).expect("container args")
}

#[tokio::test]
async fn helm_uninstall_removes_every_condition_and_keeps_the_windows() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    let scope = Scope::new("uninstall");
    let mut nodes = Vec::new();
    for short in ["a", "b", "c"] {
        let node = create_node(&client, &scope, short, &[], &[]).await.unwrap();
        nodes.push(node.metadata.name.unwrap());
    }
    set_condition(&client, &nodes[0], REBOOT_REQUIRED, "True", "reporter")
        .await
        .unwrap();

    let install = helm(
        &server,
        &[
            "install",
            "kumaco",
            "charts/kumaco",
            "--namespace",
            NS,
            "--create-namespace",
            "--set",
            &format!("watchNamespaces={{{WINDOWS_NS}}}"),
            "--set",
            "createNamespaces=true",
            "--set",
            &format!("nodeScope={}", scope.selector()),
            "--set",
            "inProgress.enabled=true",
            "--set",
            &format!("inProgress.requireConditions={{{REBOOT_REQUIRED}}}"),
        ],
    )
    .output()
    .unwrap();
    assert!(
        install.status.success(),
        "helm install: {}",
        String::from_utf8_lossy(&install.stderr)
    );

    let start = whole_second(Timestamp::now() - SignedDuration::from_secs(60)).to_string();
    let window: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "weekly",
            "namespace": WINDOWS_NS,
            "labels": { "kured.dev/maintenance-window": "true" },
        },
        "data": { "startTime": start, "duration": "1h", "nodeSelector": "" },
    }))
    .unwrap();
    let windows: Api<ConfigMap> = Api::namespaced(client.clone(), WINDOWS_NS);
    windows
        .create(&PostParams::default(), &window)
        .await
        .unwrap();

    // The Deployment's Pod: its arguments, but the addresses the test picks and JSON
    // logs; POD_NAMESPACE and POD_NAME as the downward API sets them.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let deployment = deployments.get("kumaco").await.unwrap();
    let pod_spec = serde_json::to_value(deployment.spec.template.spec.unwrap()).unwrap();
    let args: Vec<String> = container_args(&pod_spec)
        .into_iter()
        .skip(1) // `run`
        .filter(|a| {
            ![
                "--leader-elect=",
                "--metrics-address=",
                "--health-address=",
                "--log-format=",
            ]
            .iter()
            .any(|p| a.starts_with(p))
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut kumaco = KumacoProcess::start_with(
        KUMACO,
        &server,
        &args,
        &StartOptions {
            kubeconfig: Some(
                testkit::hooks::service_account_kubeconfig(&server, NS, "kumaco").unwrap(),
            ),
            leader: Some(Pod {
                name: "kumaco-7d9f-x1".into(),
                namespace: NS.into(),
            }),
            healthy_is_enough: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    wait_for_condition(&client, &nodes[0], IN_PROGRESS, WAIT, |c| {
        has_status(c, Some("True"))
    })
    .await
    .unwrap();
    for node in &nodes {
        wait_for_condition(&client, node, UNDER_MAINTENANCE, WAIT, |c| {
            has_status(c, Some("True"))
        })
        .await
        .unwrap();
    }

    // What `kumaco uninstall` shows without --yes, as its user runs it: nothing changes.
    let dry = Command::new(KUMACO)
        .args(["uninstall", "--kubeconfig"])
        .arg(server.kubeconfig())
        .args(["--lease-namespace", NS])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(
        shown.contains(&format!(
            "field manager \"{MANAGER}\" owns 6 condition(s) on 3 node(s)"
        )),
        "{shown}"
    );
    assert!(shown.contains("MaintenanceInProgress=True"), "{shown}");
    assert!(
        shown.contains(&format!("warning: {} is in maintenance", nodes[0])),
        "{shown}"
    );
    assert!(shown.contains("dry run: nothing changed"), "{shown}");
    assert!(
        shown.contains("the instance still runs (Lease kumaco/kumaco held by kumaco-7d9f-x1)"),
        "{shown}"
    );

    let uninstall = helm(
        &server,
        &["uninstall", "kumaco", "--namespace", NS, "--timeout", "3m"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();

    // The hook's Pod, once helm has created its Job; meanwhile the kubelet's part: once
    // the Deployment is scaled to 0, its Pod gets SIGTERM.
    let stop_pod = async {
        poll_until("the Deployment scaled to 0", WAIT, || async {
            let d = deployments.get("kumaco").await.unwrap();
            d.spec.replicas == Some(0)
        })
        .await;
        kumaco.terminate(Duration::from_secs(10)).await.unwrap()
    };
    let (hook, stopped) = tokio::join!(
        testkit::hooks::run_job(&server, Path::new(KUMACO), NS, "kumaco-uninstall", WAIT),
        stop_pod
    );
    assert!(stopped.success(), "kumaco exited {stopped}");
    let hook = hook.unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(hook.pod_spec["serviceAccountName"], "kumaco-uninstall");
    assert_eq!(hook.pod_spec["nodeSelector"]["kubernetes.io/os"], "linux");
    let said = format!("{}{}", hook.stdout, hook.stderr);
    assert!(hook.status.success(), "the hook failed: {said}");
    for line in [
        "scaled deployment kumaco/kumaco to 0",
        "removed 6 condition(s) from 3 node(s)",
        "deleted Lease kumaco/kumaco",
    ] {
        assert!(said.contains(line), "{line:?} missing: {said}");
    }
    let helm_done = tokio::task::spawn_blocking(move || uninstall.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        helm_done.status.success(),
        "helm uninstall: {}{}",
        String::from_utf8_lossy(&helm_done.stdout),
        String::from_utf8_lossy(&helm_done.stderr)
    );

    // Nothing of kumaco's on any node: no condition, no field manager.
    let api: Api<Node> = Api::all(client.clone());
    for name in &nodes {
        let node = api.get(name).await.unwrap();
        let types: Vec<String> = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| cs.iter().map(|c| c.type_.clone()).collect())
            .unwrap_or_default();
        for kumaco_type in [UNDER_MAINTENANCE, IN_PROGRESS, "MaintenancePlanned"] {
            assert!(
                !types.iter().any(|t| t == kumaco_type),
                "{name} still has {kumaco_type}: {types:?}"
            );
        }
        assert!(
            name != &nodes[0] || types.iter().any(|t| t == REBOOT_REQUIRED),
            "{name}: the reporter's condition went too"
        );
        assert!(
            !managers(&node).contains(&MANAGER),
            "{name}: {:?}",
            managers(&node)
        );
    }
    // The windows and their namespace stay; kumaco's objects are gone.
    assert!(
        windows.get_opt("weekly").await.unwrap().is_some(),
        "the window was deleted"
    );
    let namespace = Api::<Namespace>::all(client.clone())
        .get(WINDOWS_NS)
        .await
        .unwrap();
    assert!(
        namespace.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted namespace {WINDOWS_NS}, and the windows in it with it"
    );
    assert!(
        deployments
            .get_opt("kumaco")
            .await
            .unwrap()
            .is_none_or(|d| d.metadata.deletion_timestamp.is_some()),
        "the Deployment is left"
    );
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    assert!(
        jobs.get_opt("kumaco-uninstall").await.unwrap().is_none(),
        "the hook's Job was kept"
    );
}

/// `kumaco uninstall --yes` refuses while the instance runs, and says how to stop it.
#[tokio::test]
async fn uninstall_waits_for_a_running_instance_and_then_refuses() {
    let server = ApiServer::shared();
    let client = server.client().await.unwrap();
    let cluster = testkit::cluster::TestCluster::new(server, "uninstall-live").await;
    let node = cluster.node("a", &[]).await;
    cluster.put_active_window("w", "").await;
    let lease_name = format!("lease-{}", cluster.scope.value());
    let mut args = cluster.scope_args();
    args.retain(|a| !a.starts_with("--field-manager"));
    args.push(format!("--lease-name={lease_name}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut kumaco = KumacoProcess::start_with(
        KUMACO,
        server,
        &args,
        &StartOptions {
            leader: Some(Pod {
                name: "live".into(),
                namespace: cluster.ns.clone(),
            }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    cluster.wait_status(&node, Some("True"), WAIT).await;

    let run = |kubeconfig: &Path| {
        Command::new(KUMACO)
            .args(["uninstall", "--yes", "--wait", "2s", "--kubeconfig"])
            .arg(kubeconfig)
            .args([
                "--lease-namespace",
                &cluster.ns,
                "--lease-name",
                &lease_name,
            ])
            .output()
            .unwrap()
    };
    let refused = run(server.kubeconfig());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the instance still runs"), "{stderr}");
    assert!(stderr.contains("--stop-deployment"), "{stderr}");
    let still = Api::<Node>::all(client.clone()).get(&node).await.unwrap();
    assert!(
        testkit::nodes::condition(&still, UNDER_MAINTENANCE).is_some(),
        "a refused uninstall removed a condition"
    );

    // Stopped (SIGTERM releases the Lease): the conditions go.
    kumaco.terminate(Duration::from_secs(10)).await.unwrap();
    let done = run(server.kubeconfig());
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        stdout.contains("removed 1 condition(s) from 1 node(s)"),
        "{stdout}"
    );
    let gone = Api::<Node>::all(client.clone()).get(&node).await.unwrap();
    assert!(testkit::nodes::condition(&gone, UNDER_MAINTENANCE).is_none());
}
