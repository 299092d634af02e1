//! `make demo`: kumaco at work on a local, real Kubernetes API server, in about a minute.
//!
//! Starts kube-apiserver + etcd on loopback, creates 10 nodes in two zones and a few
//! window ConfigMaps that open within seconds, runs the kumaco binary against them, and
//! prints every condition change and event as it happens. Everything is removed at the end.

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
use testkit::{ApiServer, Scope};

const NS: &str = "maintenance";
const SHOW_FOR: Duration = Duration::from_secs(50);

#[tokio::main]
async fn main() -> Result<()> {
    let kumaco_bin = std::env::var("KUMACO_BIN").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/kumaco").to_string()
    });
    println!(
        "Starting a local kube-apiserver + etcd (the first run builds them from Go sources)..."
    );
    let server = ApiServer::start_fresh()?;
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
            &[],
        )
        .await?;
    }
    println!("Created 10 nodes: node-00..04 in zone-a, node-05..09 in zone-b.");

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
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
        cms.create(&PostParams::default(), &cm).await?;
    }
    // Nodes need the hostname label for the blackout's selector, as kubelets set it.
    for i in 0..10 {
        let name = scope.node_name(&format!("node-{i:02}"));
        testkit::nodes::set_labels(&client, &name, &[("kubernetes.io/hostname", Some(&name))])
            .await?;
    }

    println!(
        "\nStarting kumaco: {kumaco_bin} run --namespace {NS} --node-selector {}\n",
        scope.selector()
    );
    let log_path = std::env::temp_dir().join("kumaco-demo.log");
    let log = std::fs::File::create(&log_path)?;
    let mut kumaco = tokio::process::Command::new(&kumaco_bin)
        .args([
            "run",
            "--namespace",
            NS,
            "--node-selector",
            &scope.selector(),
            "--leader-elect=false",
        ])
        .args([
            "--metrics-address",
            "127.0.0.1:0",
            "--health-address",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {kumaco_bin} (run `cargo build` first)"))?;

    let prefix = format!("{}-", scope.value());
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
        let mut merged =
            futures::stream::select(nodes.map(Either::Node), events.map(Either::Event));
        while let Some(item) = merged.next().await {
            let clock = Timestamp::now().strftime("%H:%M:%S");
            match item {
                Either::Node(Ok(node)) => {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    if let Some(c) = testkit::nodes::condition(&node, "kured.dev/UnderMaintenance")
                    {
                        let line = format!("{} {}", c.status, c.reason.clone().unwrap_or_default());
                        if seen.get(&name) != Some(&line) {
                            println!(
                                "{clock}  {:<8} UnderMaintenance={:<5} {:<26} {}",
                                name.trim_start_matches(&prefix),
                                c.status,
                                c.reason.clone().unwrap_or_default(),
                                c.message.clone().unwrap_or_default()
                            );
                            seen.insert(name, line);
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

    let _ = kumaco.kill().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&scope.selector()))
        .await?;
    let under = list
        .iter()
        .filter(|n| testkit::nodes::condition(n, "kured.dev/UnderMaintenance").is_some())
        .count();
    println!(
        "\nAfter {}s: {under} of {} nodes carry kured.dev/UnderMaintenance. kumaco's log was {}.",
        SHOW_FOR.as_secs(),
        list.items.len(),
        log_path.display()
    );
    println!("Stopping the API server and removing its data.");
    Ok(())
}

enum Either<A, B> {
    Node(A),
    Event(B),
}
