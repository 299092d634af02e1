//! `kumaco status` against a real API server: the windows (valid and invalid, with the
//! error) and the in-scope nodes with kumaco's conditions.

use std::process::Command;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use kumaco::conditions::{MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use testkit::ApiServer;
use testkit::cluster::TestCluster;
use testkit::nodes::{create_node, set_condition};

async fn create_window(client: &kube::Client, ns: &str, name: &str, data: serde_json::Value) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": { "kured.dev/maintenance-window": "" },
        },
        "data": data,
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("creating window {name}: {e}"));
}

#[tokio::test]
async fn status_lists_valid_and_invalid_windows_and_the_nodes_in_scope() {
    let server = ApiServer::shared();
    let TestCluster { client, scope, ns } = TestCluster::new(server, "status").await;

    // Active for the whole test: a one-shot window that started a minute ago.
    let start = Timestamp::from_second(Timestamp::now().as_second() - 60).unwrap();
    create_window(
        &client,
        &ns,
        "patch-night",
        json!({
            "startTime": start.to_string(),
            "duration": "1h",
            "nodeSelector": "zone=a",
            "description": "kernel updates",
        }),
    )
    .await;
    create_window(
        &client,
        &ns,
        "broken",
        json!({ "startTime": "0 0 2 * * 6", "duration": "1d", "nodeSelector": "" }),
    )
    .await;
    let a1 = create_node(&client, &scope, "a1", &[("zone", "a")], &[])
        .await
        .unwrap();
    let b1 = create_node(&client, &scope, "b1", &[("zone", "b")], &[])
        .await
        .unwrap();
    let a1 = a1.metadata.name.unwrap();
    let b1 = b1.metadata.name.unwrap();
    // As kumaco run would have set it (status is a report of the cluster, not a decision).
    set_condition(&client, &a1, UNDER_MAINTENANCE, "True", "test-agent")
        .await
        .unwrap();
    // As kumaco run --planned-lead-time would set it on a node a window will select soon.
    set_condition(&client, &b1, MAINTENANCE_PLANNED, "True", "test-agent")
        .await
        .unwrap();

    let kubeconfig = server.kubeconfig().display().to_string();
    let selector = scope.selector();
    let output = Command::new(env!("CARGO_BIN_EXE_kumaco"))
        .args([
            "status",
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            &ns,
            "--node-selector",
            &selector,
        ])
        .output()
        .expect("running kumaco status");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Shown with --nocapture: the real output, for docs/tools.md.
    println!("{stdout}");
    let line = |needle: &str| -> &str {
        stdout
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{stdout}"))
    };

    let valid = line(" patch-night ");
    let cells: Vec<&str> = valid.split_whitespace().collect();
    assert_eq!(
        &cells[..4],
        [ns.as_str(), "patch-night", "true", "window"],
        "{stdout}"
    );
    let end = start + SignedDuration::from_hours(1);
    assert_eq!(cells[4..6], ["until", &end.to_string()], "{stdout}");
    // One-shot: no next start; it selects a1 only.
    assert_eq!(cells[6..9], ["never", "-", "1"], "{stdout}");
    assert!(valid.ends_with("kernel updates"), "{stdout}");

    let broken = line(" broken ");
    assert!(broken.contains(" false "), "{stdout}");
    assert!(broken.contains("startTime: expected 5 fields"), "{stdout}");
    assert!(broken.contains("duration: unknown unit \"d\""), "{stdout}");

    let header: Vec<&str> = line("UNDER-MAINTENANCE").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NODE",
            "UNDER-MAINTENANCE",
            "REASON",
            "AGE",
            "IN-PROGRESS",
            "REASON",
            "AGE",
            "PLANNED",
            "REASON",
            "AGE"
        ],
        "{stdout}"
    );
    let a1_cells: Vec<&str> = line(&a1).split_whitespace().collect();
    assert_eq!(a1_cells[1..3], ["True", "TestAgent"], "{stdout}");
    assert_eq!(a1_cells[7..], ["-", "-", "-"], "{stdout}");
    let b1_cells: Vec<&str> = line(&b1).split_whitespace().collect();
    assert_eq!(b1_cells[1..7], ["-", "-", "-", "-", "-", "-"], "{stdout}");
    assert_eq!(b1_cells[7..9], ["True", "TestAgent"], "{stdout}");
    assert!(b1_cells[9].ends_with('s'), "an age: {stdout}");
    assert!(
        stdout.contains("NODES (2)"),
        "only the scope's nodes: {stdout}"
    );
}
