//! `make demo`: kumaco at work on a local, real Kubernetes API server, in about a minute.
//!
//! Starts kube-apiserver + etcd on loopback, creates 10 nodes in two zones and a few
//! window ConfigMaps that open within seconds, runs the kumaco binary against them (with
//! the kured setup: `--in-progress --require-condition kured.dev/RebootRequired
//! --max-in-progress 2 --max-in-progress-per topology.kubernetes.io/zone=1`), plays a
//! kured v2's node daemons as they behave (`testkit::kured`: a reporter that checks every
//! 5 s, so it still says `RebootRequired=True` for seconds after a reboot, and a reboot
//! daemon that acts the moment it starts: cordons, reboots, NotReady for 3 s, back with a
//! new boot ID, uncordons once `MaintenanceInProgress` is False), and prints every
//! condition change and event as it happens: one node per zone at a time, each rebooted
//! once (a new boot ID ends its maintenance, `NodeRebooted`), and a node that completed
//! holding its zone's slot until it is Ready and uncordoned. Everything is removed at the
//! end.
//!
//! `--real-node` (`make demo-node`): the same on a real cluster (controller-manager,
//! scheduler and a kubelet on containerd, `testkit::realcluster`), with kumaco installed
//! by its Helm chart from `make image`'s image, as two Pods on the real node, which is
//! one of the managed nodes.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use testkit::nodes::create_node;
use testkit::process::Owned;
use testkit::realcluster::{NODE_NAME, RealCluster};
use testkit::{ApiServer, Scope};

const NS: &str = "maintenance";
const REBOOT_REQUIRED: &str = "kured.dev/RebootRequired";
const IN_PROGRESS: &str = "MaintenanceInProgress";
const SHOW_FOR: Duration = Duration::from_secs(50);
/// One disrupted node per zone at a time.
const ZONE_CEILING: &str = "topology.kubernetes.io/zone=1";

#[tokio::main]
async fn main() -> Result<()> {
    let kumaco_bin = std::env::var("KUMACO_BIN").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/kumaco").to_string()
    });
    let real_node = std::env::args().skip(1).any(|a| a == "--real-node");
    let (cluster, own_server) = if real_node {
        println!(
            "Starting a real cluster: kube-apiserver + etcd, kube-controller-manager, \
             kube-scheduler and a kubelet on containerd (the first run builds them from Go \
             sources)..."
        );
        (Some(RealCluster::start().await?), None)
    } else {
        println!(
            "Starting a local kube-apiserver + etcd (the first run builds them from Go sources)..."
        );
        (None, Some(ApiServer::start_fresh()?))
    };
    let server = match (&cluster, &own_server) {
        (Some(cluster), _) => cluster.server(),
        (_, Some(server)) => server,
        _ => unreachable!(),
    };
    let client = server.client().await?;
    println!(
        "API server: {}  kubeconfig: {}",
        server.url(),
        server.kubeconfig().display()
    );

    let scope = Scope::new("demo");
    for i in 0..10 {
        let zone = if i < 5 { "zone-a" } else { "zone-b" };
        create_node(
            &client,
            &scope,
            &format!("node-{i:02}"),
            &[("topology.kubernetes.io/zone", zone)],
            // Half the nodes need a reboot, as kured's reboot-required reporter says.
            &[(REBOOT_REQUIRED, if i % 2 == 0 { "True" } else { "False" })],
        )
        .await?;
    }
    // kured's daemons on each node; its kubelet boots it: Ready, a boot ID.
    let needs: Vec<(String, u32)> = (0..10)
        .map(|i| {
            (
                scope.node_name(&format!("node-{i:02}")),
                u32::from(i % 2 == 0),
            )
        })
        .collect();
    let kured = testkit::kured::Kured::start(
        &client,
        &needs,
        testkit::kured::KuredSpec {
            period: Duration::from_secs(5),
            reboot: Duration::from_secs(3),
            daemon_delay: Duration::from_secs(1),
            in_progress: IN_PROGRESS.into(),
        },
    )
    .await?;
    println!(
        "Created 10 nodes: node-00..04 in zone-a, node-05..09 in zone-b, all Ready; the even \
         ones have {REBOOT_REQUIRED}=True."
    );

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    if let Some(cluster) = &cluster {
        install_on_the_real_node(cluster, &client, &scope).await?;
    }
    let now = Timestamp::now();
    let at = |secs: i64| {
        Timestamp::from_second(now.as_second() + secs)
            .unwrap()
            .to_string()
    };
    let windows = [
        (
            "zone-a-patching",
            at(5),
            "25s",
            "topology.kubernetes.io/zone=zone-a",
            None,
            "zone A patch night",
        ),
        (
            "every-20s",
            "@every 20s".to_string(),
            "8s",
            "topology.kubernetes.io/zone=zone-b",
            None,
            "a short window every 20 s",
        ),
        (
            "freeze-node-02",
            at(12),
            "10s",
            &*format!("kubernetes.io/hostname in ({})", scope.node_name("node-02")),
            Some("true"),
            "a blackout: node-02 is frozen",
        ),
        (
            "typo",
            "0 0 2 * * 6".to_string(),
            "1d",
            "zone=",
            None,
            "an invalid window",
        ),
    ];
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    println!("\nWindows (ConfigMaps in namespace {NS:?}, label kured.dev/maintenance-window):");
    for (name, start, duration, selector, blackout, description) in &windows {
        let mut data = BTreeMap::from([
            ("startTime".to_string(), start.clone()),
            ("duration".to_string(), duration.to_string()),
            ("nodeSelector".to_string(), selector.to_string()),
            ("description".to_string(), description.to_string()),
        ]);
        if let Some(b) = blackout {
            data.insert("blackout".into(), b.to_string());
        }
        println!(
            "  {name:<16} startTime={start:<22} duration={duration:<4} nodeSelector={selector:?}"
        );
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "kured.dev/maintenance-window": "" } },
            "data": data,
        }))?;
        match cms.create(&PostParams::default(), &cm).await {
            // On the real node the chart's admission policy is installed: it turns the
            // invalid window away at the door instead of kumaco reporting WindowInvalid.
            Err(kube::Error::Api(status)) if status.code == 422 => {
                let why = status.message.split("denied request: ").nth(1);
                println!(
                    "  {:<16} rejected by the admission policy: {}",
                    "",
                    why.unwrap_or(&status.message)
                );
            }
            result => {
                result?;
            }
        }
    }
    // Nodes need the hostname label for the blackout's selector, as kubelets set it.
    for i in 0..10 {
        let name = scope.node_name(&format!("node-{i:02}"));
        testkit::nodes::set_labels(&client, &name, &[("kubernetes.io/hostname", Some(&name))])
            .await?;
    }

    let mut kumaco = if real_node {
        None
    } else {
        Some(start_process(&kumaco_bin, server, &scope)?)
    };
    let log_path = std::env::temp_dir().join("kumaco-demo.log");

    let prefix = format!("{}-", scope.value());
    // The most nodes seen MaintenanceInProgress=True at once, by this independent watch.
    let most_in_progress = std::sync::atomic::AtomicUsize::new(0);
    let show = async {
        let nodes = watcher(
            Api::<Node>::all(client.clone()),
            watcher::Config::default().labels(&scope.selector()),
        )
        .applied_objects()
        .boxed();
        let events = watcher(
            Api::<Event>::namespaced(client.clone(), NS),
            watcher::Config::default(),
        )
        .applied_objects()
        .boxed();
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        let mut rebooting: std::collections::BTreeSet<String> = Default::default();
        let mut in_progress: std::collections::BTreeSet<String> = Default::default();
        let mut merged =
            futures::stream::select(nodes.map(Either::Node), events.map(Either::Event));
        while let Some(item) = merged.next().await {
            let clock = Timestamp::now().strftime("%H:%M:%S");
            match item {
                Either::Node(Ok(node)) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    if testkit::nodes::condition(&node, IN_PROGRESS)
                        .is_some_and(|c| c.status == "True")
                    {
                        in_progress.insert(name.clone());
                    } else {
                        in_progress.remove(&name);
                    }
                    most_in_progress
                        .fetch_max(in_progress.len(), std::sync::atomic::Ordering::Relaxed);
                    let cordoned = node
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false);
                    let key = format!("{name}/cordoned");
                    let line = cordoned.to_string();
                    if seen.get(&key).is_some_and(|old| *old != line) {
                        println!(
                            "{clock}  {:<8} {}",
                            name.trim_start_matches(&prefix),
                            if cordoned { "cordoned" } else { "uncordoned" }
                        );
                    }
                    seen.insert(key, line);
                    let boot = node
                        .status
                        .as_ref()
                        .and_then(|s| s.node_info.as_ref())
                        .map(|i| i.boot_id.clone())
                        .unwrap_or_default();
                    let key = format!("{name}/boot");
                    if seen.get(&key).is_some_and(|old| *old != boot) {
                        println!(
                            "{clock}  {:<8} rebooted: boot ID {boot}",
                            name.trim_start_matches(&prefix)
                        );
                    }
                    seen.insert(key, boot);
                    for (ty, short) in [
                        ("kured.dev/UnderMaintenance", "UnderMaintenance"),
                        (IN_PROGRESS, IN_PROGRESS),
                        (REBOOT_REQUIRED, "RebootRequired"),
                        ("Ready", "Ready"),
                    ] {
                        let Some(c) = testkit::nodes::condition(&node, ty) else {
                            continue;
                        };
                        // The stand-in kubelet's Ready says nothing more than its status.
                        let (reason, message) = if ty == "Ready" {
                            (String::new(), String::new())
                        } else {
                            (
                                c.reason.clone().unwrap_or_default(),
                                c.message.clone().unwrap_or_default(),
                            )
                        };
                        let key = format!("{name}/{ty}");
                        let line = format!("{} {reason}", c.status);
                        if seen.get(&key) != Some(&line) {
                            println!(
                                "{clock}  {:<8} {:<27} {:<26} {}",
                                name.trim_start_matches(&prefix),
                                format!("{short}={}", c.status),
                                reason,
                                message
                            );
                            seen.insert(key, line);
                        }
                        // The real node of `--real-node` cannot be rebooted here: a stand-in
                        // plays its reboot.
                        if ty == IN_PROGRESS
                            && c.status == "True"
                            && name == NODE_NAME
                            && rebooting.insert(name.clone())
                        {
                            tokio::spawn(reboot(client.clone(), name.clone()));
                        }
                    }
                }
                Either::Event(Ok(ev)) => println!(
                    "{clock}  event {:<8} {:<14} on {}: {}",
                    ev.type_.unwrap_or_default(),
                    ev.reason.unwrap_or_default(),
                    ev.regarding.and_then(|r| r.name).unwrap_or_default(),
                    ev.note.unwrap_or_default()
                ),
                _ => {}
            }
        }
    };
    let _ = tokio::time::timeout(SHOW_FOR, show).await;

    if let Some(kumaco) = kumaco.as_mut() {
        kumaco.kill();
    }
    if let Some(cluster) = &cluster {
        // The Pods' logs, before the cluster and its files go.
        let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS)
            .list(&ListParams::default())
            .await?;
        let mut logs = String::new();
        for pod in &pods.items {
            let name = pod.metadata.name.clone().unwrap_or_default();
            logs.push_str(&cluster.pod_log(NS, &name));
        }
        std::fs::write(&log_path, logs)?;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&scope.selector()))
        .await?;
    let completed = list
        .iter()
        .filter(|n| {
            testkit::nodes::condition(n, IN_PROGRESS).is_some_and(|c| {
                kumaco_core::reasons::completes_maintenance(c.reason.as_deref().unwrap_or(""))
            })
        })
        .count();
    let reboots: Vec<usize> = needs.iter().map(|(n, _)| kured.reboots(n)).collect();
    println!(
        "\nAfter {}s: {completed} of {} nodes completed their maintenance, {} reboots in all \
         (at most {} of one node: each needed one); at most {} were in progress at once \
         (ceiling 2, 1 per zone). kumaco's log: {}",
        SHOW_FOR.as_secs(),
        list.items.len(),
        reboots.iter().sum::<usize>(),
        reboots.iter().max().copied().unwrap_or(0),
        most_in_progress.load(std::sync::atomic::Ordering::Relaxed),
        log_path.display()
    );
    drop(kured);
    if real_node {
        println!(
            "Stopping the cluster (the kubelet, its Pods, containerd, the control plane) and removing its data."
        );
    } else {
        println!("Stopping the API server and removing its data.");
    }
    Ok(())
}

/// kumaco as a process on this machine (the quick mode).
fn start_process(kumaco_bin: &str, server: &ApiServer, scope: &Scope) -> Result<Owned> {
    println!(
        "\nStarting kumaco: {kumaco_bin} run --namespace {NS} --node-selector {} \
         --in-progress --require-condition {REBOOT_REQUIRED} --max-in-progress 2 \
         --max-in-progress-per {ZONE_CEILING}\n\
         (leader election on a Lease in {NS:?}; on each node kured v2's reboot daemon \
         cordons it as soon as it shows {IN_PROGRESS}=True and reboots it: NotReady for \
         3 s, back with a new boot ID; its reporter checks every 5 s, so it says \
         {REBOOT_REQUIRED}=True for a while after the reboot)\n",
        scope.selector()
    );
    let log = std::env::temp_dir().join("kumaco-demo.log");
    let _ = std::fs::remove_file(&log);
    let mut command = std::process::Command::new(kumaco_bin);
    command
        .args([
            "run",
            "--namespace",
            NS,
            "--node-selector",
            &scope.selector(),
            "--in-progress",
            "--require-condition",
            REBOOT_REQUIRED,
            "--max-in-progress",
            "2",
            "--max-in-progress-per",
            ZONE_CEILING,
        ])
        .env("POD_NAMESPACE", NS)
        .env("POD_NAME", "kumaco-demo")
        .args([
            "--metrics-address",
            "127.0.0.1:0",
            "--health-address",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .stdin(Stdio::null());
    Owned::spawn("kumaco", command, Some(&log))
        .with_context(|| format!("run `cargo build` first? ({kumaco_bin})"))
}

/// The real-node mode: the real node joins the demo's nodes (zone-a, needing a reboot),
/// `make image`'s image is loaded on it, and the chart installs kumaco in [`NS`] with the
/// quick mode's flags; returns once its Pods are Ready.
async fn install_on_the_real_node(
    cluster: &RealCluster,
    client: &kube::Client,
    scope: &Scope,
) -> Result<()> {
    testkit::nodes::set_labels(
        client,
        NODE_NAME,
        &[
            (testkit::SCOPE_LABEL, Some(scope.value())),
            ("topology.kubernetes.io/zone", Some("zone-a")),
        ],
    )
    .await?;
    testkit::nodes::set_condition(
        client,
        NODE_NAME,
        REBOOT_REQUIRED,
        "True",
        "reboot-reporter",
    )
    .await?;
    println!("The real node {NODE_NAME} joins zone-a, with {REBOOT_REQUIRED}=True.");
    let image = concat!("docker.io/library/kumaco:", env!("CARGO_PKG_VERSION"));
    cluster
        .load_image(image, &[])
        .with_context(|| format!("loading {image} on the node (run `make image` first)"))?;
    let helm = testkit::gobuild::helm()?;
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/kumaco");
    let args = [
        "install".to_string(),
        "kumaco".into(),
        chart.into(),
        "--namespace".into(),
        NS.into(),
        "--set".into(),
        format!("nodeScope={}", scope.selector()),
        "--set".into(),
        "inProgress.enabled=true".into(),
        "--set".into(),
        format!("inProgress.requireConditions={{{REBOOT_REQUIRED}}}"),
        "--set".into(),
        "inProgress.maxInProgress=2".into(),
        "--set".into(),
        format!("inProgress.maxInProgressPer={{{ZONE_CEILING}}}"),
        "--wait".into(),
        "--timeout=3m".into(),
    ];
    println!(
        "\nInstalling kumaco with its chart: helm {}\n(two Pods on {NODE_NAME}, leader \
         election on a Lease in {NS:?}; a reboot agent clears {REBOOT_REQUIRED} 3 s after a \
         node gets {IN_PROGRESS}=True)",
        args.join(" ")
    );
    let out = std::process::Command::new(&helm)
        .args(&args)
        .env("KUBECONFIG", cluster.server().kubeconfig())
        .output()
        .context("running helm")?;
    anyhow::ensure!(
        out.status.success(),
        "helm install failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await?;
    for pod in &pods.items {
        println!(
            "  Pod {} on {}: {}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("?"),
            pod.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("?")
        );
    }
    println!();
    Ok(())
}

/// What kured does to a node kumaco lets into maintenance: cordon, reboot (NotReady; its
/// reporter clears the reboot after 3 s), Ready again 2 s later, uncordon 1 s after that.
/// A node that completed holds its zone's slot until it is uncordoned.
async fn reboot(client: kube::Client, name: String) {
    let set = |ty: &'static str, status: &'static str, manager: &'static str| {
        testkit::nodes::set_condition(&client, &name, ty, status, manager)
    };
    let cordon =
        |on: bool| testkit::nodes::set_spec(&client, &name, json!({ "unschedulable": on }));
    let _ = cordon(true).await;
    let _ = set("Ready", "False", "kubelet").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = set(REBOOT_REQUIRED, "False", "reboot-agent").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = set("Ready", "True", "kubelet").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let _ = cordon(false).await;
}

enum Either<A, B> {
    Node(A),
    Event(B),
}
