//! `make demo`: a local, real Kubernetes API server with sample nodes, to see kumaco work
//! without a cluster.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use testkit::nodes::create_node;
use testkit::{ApiServer, Scope};

#[tokio::main]
async fn main() -> Result<()> {
    eprintln!("Starting a local kube-apiserver + etcd (the first run builds it from Go sources)...");
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let scope = Scope::new("demo");
    let zones = ["zone-a", "zone-b"];
    for i in 0..10 {
        let zone = zones[i % zones.len()];
        let reboot = if i % 3 == 0 { "True" } else { "False" };
        create_node(
            &client,
            &scope,
            &format!("node-{i:02}"),
            &[("topology.kubernetes.io/zone", zone)],
            &[("kured.dev/RebootRequired", reboot)],
        )
        .await?;
    }
    let api: Api<Node> = Api::all(client);
    let nodes = api.list(&ListParams::default().labels(&scope.selector())).await?;
    println!("API server {} (kubeconfig {})", server.url(), server.kubeconfig().display());
    println!("{:<28} {:<8} {:<18}", "NODE", "ZONE", "RebootRequired");
    for n in nodes {
        let zone = n.metadata.labels.as_ref().and_then(|l| l.get("topology.kubernetes.io/zone").cloned());
        let reboot = testkit::nodes::condition(&n, "kured.dev/RebootRequired").map(|c| c.status.clone());
        println!(
            "{:<28} {:<8} {:<18}",
            n.metadata.name.unwrap_or_default(),
            zone.unwrap_or_default(),
            reboot.unwrap_or_default()
        );
    }
    // Give a person a moment to try `kubectl --kubeconfig ... get nodes` before cleanup.
    if let Ok(secs) = std::env::var("KUMACO_DEMO_HOLD").map(|s| s.parse::<u64>().unwrap_or(0)) {
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    Ok(())
}
