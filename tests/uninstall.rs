//! Uninstalling leaves nothing behind, and harms nothing alive: `helm uninstall` of the
//! chart, with a node in maintenance and a notification sink, on the real API server. The
//! chart's pre-delete hook (`kumaco uninstall --yes`) stops the instance, removes every
//! condition its field manager owns and deletes its Leases (its own, its pause, its
//! notifications' record); the windows and their namespace stay. A shadow release sharing a live
//! instance's field manager is uninstalled beside it without one write to a node;
//! `kumaco uninstall` refuses while the instance writing as its field manager runs, and
//! finding nothing (a mistyped namespace) is not reported as success.
//!
//! No kubelet or controller-manager runs here, so the test plays their parts for the
//! Pods involved, as real processes under the identities the chart gives them: kumaco
//! runs with the Deployment's own arguments as its ServiceAccount, its Secret volumes'
//! keys written where the arguments point (and gets SIGTERM, as a kubelet sends it, once
//! the Deployment is scaled to 0); the hook Job's container runs
//! with the Job's own arguments as the Job's ServiceAccount (so the chart's RBAC for it
//! is what is tested), and its Job is then marked complete, as the job controller would.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use kumaco::notify::record::Record;
use serde_json::json;
use testkit::ApiServer;
use testkit::Scope;
use testkit::kumaco::{KumacoProcess, Pod, StartOptions};
use testkit::nodes::{create_node, has_status, managers, set_condition, wait_for_condition};
use testkit::receiver::{Answer, Receiver};
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

/// `helm install RELEASE charts/kumaco --namespace kumaco` with `--set` values.
fn helm_install(server: &ApiServer, release: &str, sets: &[String]) {
    let mut args = vec![
        "install".to_string(),
        release.into(),
        "charts/kumaco".into(),
        "--namespace".into(),
        NS.into(),
        "--create-namespace".into(),
    ];
    for set in sets {
        args.extend(["--set".to_string(), set.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let install = helm(server, &args).output().unwrap();
    assert!(
        install.status.success(),
        "helm install {release}: {}",
        String::from_utf8_lossy(&install.stderr)
    );
}

/// The Pod of the release's Deployment, as a kubelet would run it: its arguments (but
/// the addresses the test picks and JSON logs), its ServiceAccount, its Secret volumes,
/// and POD_NAMESPACE and POD_NAME as the downward API sets them.
async fn run_deployment(server: &ApiServer, release: &str, pod: &str) -> KumacoProcess {
    let client = server.client().await.unwrap();
    let deployment = Api::<Deployment>::namespaced(client.clone(), NS)
        .get(release)
        .await
        .unwrap();
    let pod_spec = serde_json::to_value(deployment.spec.template.spec.unwrap()).unwrap();
    let mounts = mount_secrets(&client, server, pod, &pod_spec).await;
    let args: Vec<String> = container_args(&pod_spec)
        .into_iter()
        .map(|a| {
            mounts.iter().fold(a, |a, (path, dir)| {
                a.replace(path.as_str(), &dir.display().to_string())
            })
        })
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
    KumacoProcess::start_with(
        KUMACO,
        server,
        &args,
        &StartOptions {
            kubeconfig: Some(
                testkit::hooks::service_account_kubeconfig(server, NS, release).unwrap(),
            ),
            leader: Some(Pod {
                name: pod.into(),
                namespace: NS.into(),
            }),
            healthy_is_enough: true,
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

/// The Secret volumes of `pod_spec`'s container as the kubelet mounts them, each key a
/// file, in directories of the test's own: (mount path, directory) each.
async fn mount_secrets(
    client: &kube::Client,
    server: &ApiServer,
    pod: &str,
    pod_spec: &serde_json::Value,
) -> Vec<(String, std::path::PathBuf)> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let volumes = pod_spec["volumes"].as_array().cloned().unwrap_or_default();
    let mut mounts = Vec::new();
    for mount in pod_spec["containers"][0]["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = mount["name"].as_str().unwrap();
        let volume = volumes.iter().find(|v| v["name"] == name).unwrap();
        let names: Vec<String> = if let Some(secret) = volume["secret"]["secretName"].as_str() {
            vec![secret.to_string()]
        } else if let Some(sources) = volume["projected"]["sources"].as_array() {
            sources
                .iter()
                .map(|s| s["secret"]["name"].as_str().expect("a Secret").to_string())
                .collect()
        } else {
            panic!("volume {volume}: only Secrets are mounted here")
        };
        let dir = server.dir().join(format!("{pod}-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        for secret in names {
            let data = secrets.get(&secret).await.unwrap().data.unwrap_or_default();
            for (key, value) in data {
                std::fs::write(dir.join(key), value.0).unwrap();
            }
        }
        mounts.push((mount["mountPath"].as_str().unwrap().to_string(), dir));
    }
    mounts
}

/// `helm uninstall RELEASE`, with its hook Job run as the chart renders it: what the
/// hook did, and helm's outcome.
async fn helm_uninstall(
    server: &ApiServer,
    release: &str,
) -> (testkit::hooks::HookRun, std::process::Output) {
    let helm_uninstall = helm(
        server,
        &["uninstall", release, "--namespace", NS, "--timeout", "3m"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let job = format!("{release}-uninstall");
    let hook = testkit::hooks::run_job(server, Path::new(KUMACO), NS, &job, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let done = tokio::task::spawn_blocking(move || helm_uninstall.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    (hook, done)
}

/// Nodes a, b and c of `scope`, the first `reboots` of them with `RebootRequired=True`.
async fn nodes_needing_reboot(client: &kube::Client, scope: &Scope, reboots: usize) -> Vec<String> {
    let mut nodes = Vec::new();
    for short in ["a", "b", "c"] {
        let node = create_node(client, scope, short, &[], &[]).await.unwrap();
        nodes.push(node.metadata.name.unwrap());
    }
    for node in &nodes[..reboots] {
        set_condition(client, node, REBOOT_REQUIRED, "True", "reporter")
            .await
            .unwrap();
    }
    nodes
}

/// `kumaco uninstall ARGS` against `server` as its admin.
fn uninstall(server: &ApiServer, args: &[&str]) -> std::process::Output {
    Command::new(KUMACO)
        .args(["uninstall", "--kubeconfig"])
        .arg(server.kubeconfig())
        .args(args)
        .output()
        .unwrap()
}

/// A window active for the next hour in `WINDOWS_NS`, on every node.
async fn put_window(client: &kube::Client) -> Api<ConfigMap> {
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
    windows
}

#[tokio::test]
async fn helm_uninstall_removes_every_condition_and_keeps_the_windows() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    let scope = Scope::new("uninstall");
    let nodes = nodes_needing_reboot(&client, &scope, 2).await;
    let chat = Receiver::start(Answer::Status(200)).await.unwrap();

    helm_install(
        &server,
        "kumaco",
        &[
            format!("watchNamespaces={{{WINDOWS_NS}}}"),
            "createNamespaces=true".into(),
            format!("nodeScope={}", scope.selector()),
            "inProgress.enabled=true".into(),
            format!("inProgress.requireConditions={{{REBOOT_REQUIRED}}}"),
            format!(
                "notifications.url=generic://127.0.0.1:{}/chat?template=json&disabletls=yes",
                chat.port()
            ),
        ],
    );
    let windows = put_window(&client).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut kumaco = run_deployment(&server, "kumaco", "kumaco-7d9f-x1").await;
    wait_for_condition(&client, &nodes[0], IN_PROGRESS, WAIT, |c| {
        has_status(c, Some("True"))
    })
    .await
    .unwrap();
    // The leader's record of what its sink was told, written with the chart's rights.
    poll_until("the notifications' record", WAIT, || async {
        leases
            .get_opt("kumaco-notified")
            .await
            .ok()
            .flatten()
            .is_some_and(|l| Record::of(&l).sinks.contains_key("notify-url"))
    })
    .await;
    for node in &nodes {
        wait_for_condition(&client, node, UNDER_MAINTENANCE, WAIT, |c| {
            has_status(c, Some("True"))
        })
        .await
        .unwrap();
    }

    // What `kumaco uninstall` shows without --yes, as its user runs it: nothing changes.
    let dry = uninstall(&server, &["--lease-namespace", NS]);
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

    // A mistyped namespace finds nothing, and says so: not a success.
    let typo = uninstall(&server, &["--lease-namespace", "kumaco-typo"]);
    let said = String::from_utf8_lossy(&typo.stderr);
    eprintln!("$ kumaco uninstall --lease-namespace kumaco-typo\n{said}");
    assert_eq!(typo.status.code(), Some(3), "{said}");
    assert!(typo.stdout.is_empty(), "{typo:?}");
    for part in [
        "found nothing to remove: no Lease kumaco-typo/kumaco",
        "none of the 3 node(s) carries a condition of field manager \"kumaco/kumaco-typo/kumaco\"",
        &format!("The kumaco field managers on the nodes are \"{MANAGER}\"."),
        "--ignore-not-found",
    ] {
        assert!(said.contains(part), "{part:?} missing: {said}");
    }

    let helm_uninstall = helm(
        &server,
        &["uninstall", "kumaco", "--namespace", NS, "--timeout", "3m"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();

    // The hook's Pod, once helm has created its Job. Meanwhile: a is in maintenance, so
    // the hook pauses new starts and waits; b, waiting for a slot, shows the pause and
    // never starts; a's maintenance completes (its reporter clears the requirement) and
    // kumaco, still running, ends it. Then the kubelet's part: once the Deployment is
    // scaled to 0, its Pod gets SIGTERM.
    let stop_pod = async {
        let paused = wait_for_condition(&client, &nodes[1], IN_PROGRESS, WAIT, |c| {
            c.is_some_and(|c| c.reason.as_deref() == Some("Paused"))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        let message = testkit::nodes::condition(&paused, IN_PROGRESS)
            .and_then(|c| c.message.clone())
            .unwrap_or_default();
        assert!(
            message.starts_with("new starts paused by kumaco uninstall at "),
            "{message}"
        );
        assert_eq!(
            deployments.get("kumaco").await.unwrap().spec.replicas,
            Some(2),
            "kumaco stopped before the maintenance in progress ended"
        );
        set_condition(&client, &nodes[0], REBOOT_REQUIRED, "False", "reporter")
            .await
            .unwrap();
        poll_until("the Deployment scaled to 0", WAIT, || async {
            let d = deployments.get("kumaco").await.unwrap();
            d.spec.replicas == Some(0)
        })
        .await;
        let b = Api::<Node>::all(client.clone())
            .get(&nodes[1])
            .await
            .unwrap();
        assert_eq!(
            testkit::nodes::condition(&b, IN_PROGRESS).map(|c| c.status.as_str()),
            Some("False"),
            "b started during the uninstall"
        );
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
        &format!(
            "paused new starts (Lease kumaco/kumaco-pause); waiting up to 1m30s for 1 \
             node(s) in maintenance to end: {}",
            nodes[0]
        ),
        "every maintenance in progress ended",
        "scaled deployment kumaco/kumaco to 0",
        "removed 6 condition(s) from 3 node(s)",
        "deleted Lease kumaco/kumaco",
        "deleted its pause Lease",
        "deleted its notifications' record, Lease kumaco/kumaco-notified",
    ] {
        assert!(said.contains(line), "{line:?} missing: {said}");
    }
    for lease in ["kumaco", "kumaco-pause", "kumaco-notified"] {
        assert!(
            leases.get_opt(lease).await.unwrap().is_none(),
            "Lease {lease} is left"
        );
    }
    let helm_done = tokio::task::spawn_blocking(move || helm_uninstall.wait_with_output())
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
    assert!(
        stderr.contains(&format!(
            "the instance still runs: its Lease {}/{lease_name} is held by \"live\"",
            cluster.ns
        )),
        "{stderr}"
    );
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

/// The resourceVersion of every node: equal before and after, nothing wrote to a node.
async fn versions(client: &kube::Client) -> Vec<(String, String)> {
    Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| {
            (
                n.metadata.name.unwrap_or_default(),
                n.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

/// A shadow release given the live release's field manager, as docs/shadow-trial.md's
/// "Shadow mode" suggests, is uninstalled beside the live instance while two nodes are
/// in maintenance: its hook, run with the exact arguments of the rendered chart, writes
/// nothing and says why; the same command without `--shadow` (by hand, or a release that
/// pins the live field manager without being a shadow) refuses before it scales
/// anything; and the live instance's own uninstall refuses while it runs, naming the
/// Lease's holder.
#[tokio::test]
async fn a_shadow_uninstalled_beside_a_live_instance_touches_nothing() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    let scope = Scope::new("uninstall-shadow");
    let nodes = nodes_needing_reboot(&client, &scope, 2).await;
    let policy = [
        format!("watchNamespaces={{{WINDOWS_NS}}}"),
        format!("nodeScope={}", scope.selector()),
        "inProgress.enabled=true".into(),
        format!("inProgress.requireConditions={{{REBOOT_REQUIRED}}}"),
        "inProgress.maxInProgress=2".into(),
    ];
    let mut live_values = policy.to_vec();
    live_values.push("createNamespaces=true".into());
    helm_install(&server, "kumaco", &live_values);
    put_window(&client).await;
    let live_pod = "kumaco-7d9f-x1";
    let _live = run_deployment(&server, "kumaco", live_pod).await;
    for node in &nodes {
        wait_for_condition(&client, node, IN_PROGRESS, WAIT, |c| {
            has_status(c, Some(if node == &nodes[2] { "False" } else { "True" }))
        })
        .await
        .unwrap();
        wait_for_condition(&client, node, UNDER_MAINTENANCE, WAIT, |c| {
            has_status(c, Some("True"))
        })
        .await
        .unwrap();
    }

    let mut shadow_values = policy.to_vec();
    shadow_values.extend([
        "dryRun=true".to_string(),
        "replicaCount=1".into(),
        format!("fieldManager={MANAGER}"),
        "admissionPolicy.enabled=false".into(),
    ]);
    helm_install(&server, "kumaco-shadow", &shadow_values);
    let before = versions(&client).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let replicas = |name: &'static str| {
        let deployments = deployments.clone();
        async move { deployments.get(name).await.unwrap().spec.replicas }
    };
    let holder_said = format!("Lease kumaco/kumaco, which is held by \"{live_pod}\"");

    // The shadow's preview says that --yes would refuse.
    let shadow_flags = [
        "--lease-namespace",
        NS,
        "--lease-name",
        "kumaco-shadow",
        "--field-manager",
        MANAGER,
    ];
    let preview = uninstall(&server, &shadow_flags);
    let shown = String::from_utf8_lossy(&preview.stdout);
    assert!(preview.status.success(), "{preview:?}");
    assert!(
        shown.contains(&format!(
            "writes for the instance of Lease kumaco/kumaco, held by {live_pod}: that \
             instance runs, and --yes refuses"
        )),
        "{shown}"
    );
    // Without --shadow (by hand, or an older chart's hook): refused before any change.
    let mut by_hand = shadow_flags.to_vec();
    by_hand.extend(["--yes", "--stop-deployment", "kumaco-shadow"]);
    let refused = uninstall(&server, &by_hand);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains(&holder_said), "{said}");
    assert!(said.contains("Nothing was changed"), "{said}");
    assert_eq!(
        replicas("kumaco-shadow").await,
        Some(1),
        "the shadow was scaled"
    );

    // `helm uninstall` of the shadow: its hook, as the chart renders it.
    let (hook, helm_done) = helm_uninstall(&server, "kumaco-shadow").await;
    let said = format!("{}{}", hook.stdout, hook.stderr);
    assert!(hook.status.success(), "the shadow's hook failed: {said}");
    let args = container_args(&hook.pod_spec);
    assert!(args.iter().any(|a| a == "--shadow"), "{args:?}");
    assert!(
        said.contains(
            "the instance of Lease kumaco/kumaco-shadow is a shadow (--dry-run): it writes no \
             condition and holds no Lease, so nothing is removed, stopped or deleted"
        ),
        "{said}"
    );
    assert!(
        helm_done.status.success(),
        "helm uninstall kumaco-shadow: {}{}",
        String::from_utf8_lossy(&helm_done.stdout),
        String::from_utf8_lossy(&helm_done.stderr)
    );

    // A release that is no shadow but pins the live field manager: its hook, with the
    // chart's rights for it (`get` on the Lease the manager names), refuses before it
    // scales anything, so `helm uninstall` fails; `--no-hooks` then removes the release
    // and leaves the conditions, as the docs say.
    let mut pinned_values = policy.to_vec();
    pinned_values.extend([
        "replicaCount=1".to_string(),
        format!("fieldManager={MANAGER}"),
        "admissionPolicy.enabled=false".into(),
    ]);
    helm_install(&server, "kumaco-pinned", &pinned_values);
    let (hook, helm_done) = helm_uninstall(&server, "kumaco-pinned").await;
    assert_eq!(hook.status.code(), Some(1), "{hook:?}");
    assert!(hook.stderr.contains(&holder_said), "{}", hook.stderr);
    assert!(!helm_done.status.success(), "{helm_done:?}");
    assert_eq!(
        replicas("kumaco-pinned").await,
        Some(1),
        "the refusing hook scaled its Deployment"
    );
    let no_hooks = helm(
        &server,
        &[
            "uninstall",
            "kumaco-pinned",
            "--namespace",
            NS,
            "--no-hooks",
        ],
    )
    .output()
    .unwrap();
    assert!(no_hooks.status.success(), "{no_hooks:?}");

    // The live instance's own uninstall, while it runs: refused, naming the holder.
    let own = uninstall(&server, &["--lease-namespace", NS, "--yes", "--wait", "2s"]);
    let said = String::from_utf8_lossy(&own.stderr);
    assert_eq!(own.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "its Lease kumaco/kumaco is held by \"{live_pod}\""
        )),
        "{said}"
    );

    // Not one write to any node: the live instance's conditions are as it wrote them.
    assert_eq!(versions(&client).await, before, "a node was written to");
    for node in &nodes[..2] {
        let n = Api::<Node>::all(client.clone()).get(node).await.unwrap();
        let c = testkit::nodes::condition(&n, IN_PROGRESS).expect("MaintenanceInProgress");
        assert_eq!(c.status, "True", "{node}: {c:?}");
        assert!(
            managers(&n).contains(&MANAGER),
            "{node}: {:?}",
            managers(&n)
        );
    }
    assert_eq!(
        replicas("kumaco").await,
        Some(2),
        "the live release was scaled"
    );
}

/// The instance's namespace is never guessed, and `--ignore-not-found` (the hook's) turns
/// "found nothing" into success, also when the Deployment to stop does not exist.
#[tokio::test]
async fn no_namespace_is_guessed_and_nothing_found_is_not_success() {
    let server = ApiServer::shared();
    let missing = uninstall(server, &["--yes"]);
    let said = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{said}");
    assert!(said.contains("--lease-namespace: needed"), "{said}");

    let ns = format!("never-ran-{}", std::process::id());
    let as_the_hook = [
        "--lease-namespace",
        &ns,
        "--yes",
        "--stop-deployment",
        "kumaco",
        "--ignore-not-found",
    ];
    let nothing = uninstall(server, &as_the_hook[..5]);
    let said = String::from_utf8_lossy(&nothing.stderr);
    // The Deployment is not there: an error without --ignore-not-found.
    assert_eq!(nothing.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("cannot scale deployment {ns}/kumaco")),
        "{said}"
    );

    let nothing = uninstall(server, &["--lease-namespace", &ns, "--yes"]);
    let said = String::from_utf8_lossy(&nothing.stderr);
    assert_eq!(nothing.status.code(), Some(3), "{said}");
    assert!(
        said.contains(&format!("no Lease {ns}/kumaco, and none of the")),
        "{said}"
    );

    let hooked = uninstall(server, &as_the_hook);
    let out = String::from_utf8_lossy(&hooked.stdout);
    assert!(hooked.status.success(), "{hooked:?}");
    assert!(
        out.contains(&format!("no deployment {ns}/kumaco: nothing to scale")),
        "{out}"
    );
    assert!(out.contains("found nothing to remove"), "{out}");
    assert!(out.contains("(--ignore-not-found: done)"), "{out}");
}
