//! `kumaco status` against a real API server: the windows (valid and invalid, with the
//! error) and the in-scope nodes with kumaco's conditions; each instance's notification
//! sinks, as their records say; and what a maintenance manager who may read windows but
//! not nodes sees.

use std::path::Path;
use std::process::{Command, Output};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use kumaco::conditions::{MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use kumaco::notify::record::{Record, SinkRecord, record_lease};
use kumaco::peers::LeaseRef;
use testkit::ApiServer;
use testkit::cluster::TestCluster;
use testkit::manifests::{ApplyOptions, apply};
use testkit::nodes::{create_node, set_condition, set_spec};

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

    let selector = scope.selector();
    let output = status(
        server.kubeconfig(),
        &["--namespace", &ns, "--node-selector", &selector],
    );
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
    // A node's row (its name is also in the row of the window selecting it).
    let node_row = |name: &str| -> &str {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row of {name} in:\n{stdout}"))
    };

    assert!(
        !stdout.contains("NOTIFICATIONS"),
        "no instance has a sink here:\n{stdout}"
    );

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
            "AGE",
            "NEXT-MAINTENANCE",
            "AVAILABLE"
        ],
        "{stdout}"
    );
    // The window's row names the node it selects.
    assert_eq!(cells[9], a1, "{stdout}");
    let a1_cells: Vec<&str> = node_row(&a1).split_whitespace().collect();
    assert_eq!(a1_cells[1..3], ["True", "TestAgent"], "{stdout}");
    // In patch-night now; available (no kubelet reports Ready here).
    assert_eq!(a1_cells[7..], ["-", "-", "-", "now", "yes"], "{stdout}");
    let b1_cells: Vec<&str> = node_row(&b1).split_whitespace().collect();
    assert_eq!(b1_cells[1..7], ["-", "-", "-", "-", "-", "-"], "{stdout}");
    assert_eq!(b1_cells[7..9], ["True", "TestAgent"], "{stdout}");
    assert!(b1_cells[9].ends_with('s'), "an age: {stdout}");
    assert_eq!(b1_cells[10], "-", "no window selects b1: {stdout}");
    assert_eq!(b1_cells[11], "yes", "{stdout}");
    assert!(
        stdout.contains("NODES (2)"),
        "only the scope's nodes: {stdout}"
    );
}

/// `-o json` (every name, a stable schema), `-o wide`, and the same binary installed as a
/// kubectl plugin (`kubectl-kumaco`, as kubectl runs `kubectl kumaco status ...`).
#[tokio::test]
async fn status_json_wide_and_as_a_kubectl_plugin() {
    let server = ApiServer::shared();
    let TestCluster { client, scope, ns } = TestCluster::new(server, "status-json").await;
    let start = Timestamp::from_second(Timestamp::now().as_second() - 60).unwrap();
    create_window(
        &client,
        &ns,
        "now",
        // The object form (a LabelSelector in JSON) is shown as its string form.
        json!({
            "startTime": start.to_string(),
            "duration": "1h",
            "nodeSelector": r#"{"matchLabels": {"zone": "a"}}"#,
        }),
    )
    .await;
    // Weekly, a day and a half from now: never active while the test runs, whatever the day.
    let weekly = weekly_schedule_not_active_now();
    create_window(
        &client,
        &ns,
        "weekly",
        json!({ "startTime": weekly, "duration": "3h", "nodeSelector": "" }),
    )
    .await;
    let mut names = Vec::new();
    for (short, zone) in [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("a4", "a"),
        ("b1", "b"),
    ] {
        let node = create_node(&client, &scope, short, &[("zone", zone)], &[])
            .await
            .unwrap();
        names.push(node.metadata.name.unwrap());
    }
    // a4 is cordoned: it counts as disrupted, as --max-in-progress counts it.
    set_spec(&client, &names[3], json!({ "unschedulable": true }))
        .await
        .unwrap();
    let selector = scope.selector();
    let args = ["--namespace", &ns, "--node-selector", &selector];

    let output = status(server.kubeconfig(), &[&args[..], &["-o", "json"]].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("$ kumaco status ... -o json\n{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["kind"], "KumacoStatus");
    assert_eq!(report["version"], 1);
    let windows = report["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 2, "{stdout}");
    assert_eq!(windows[0]["name"], "now");
    assert_eq!(windows[0]["nodeSelector"], "zone=a");
    assert_eq!(windows[0]["selectedNodes"], json!(names[..4]));
    assert_eq!(
        windows[0]["activeUntil"],
        (start + SignedDuration::from_hours(1)).to_string()
    );
    assert_eq!(windows[1]["selectedNodes"], json!(names));
    assert_eq!(windows[1]["schedule"], weekly.as_str());
    assert_eq!(windows[1]["duration"], "3h0m0s");
    let nodes = report["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    assert_eq!(nodes[0]["name"], names[0].as_str());
    assert_eq!(nodes[0]["nextMaintenance"]["window"]["name"], "now");
    assert_eq!(nodes[0]["nextMaintenance"]["active"], true);
    assert_eq!(nodes[4]["nextMaintenance"]["window"]["name"], "weekly");
    assert_eq!(nodes[4]["nextMaintenance"]["active"], false);
    assert_eq!(nodes[0]["available"], "yes");
    assert_eq!(nodes[3]["available"], "cordoned");
    assert_eq!(report["notifications"], json!([]), "{stdout}");

    // The table cuts the names; wide shows more columns and more names.
    let output = status(
        server.kubeconfig(),
        &[&args[..], &["--group-by", "zone"]].concat(),
    );
    let table = String::from_utf8_lossy(&output.stdout);
    println!("$ kumaco status ... --group-by zone\n{table}");
    let disrupted: Vec<Vec<&str>> = table
        .lines()
        .skip_while(|l| !l.starts_with("GROUP "))
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let cordoned = format!("({}", names[3]);
    let expected: [&[&str]; 3] = [
        &["all", "5", "0", "1", "1", &cordoned, "cordoned)"],
        &["zone=a", "4", "0", "1", "1", &cordoned, "cordoned)"],
        &["zone=b", "1", "0", "0", "0"],
    ];
    assert_eq!(disrupted[1..], expected, "{table}");
    let row = table.lines().find(|l| l.contains(" weekly ")).unwrap();
    assert!(
        row.contains(&format!(
            "5       {},{},{} (+2 more)",
            names[0], names[1], names[2]
        )),
        "{table}"
    );
    let output = status(server.kubeconfig(), &[&args[..], &["-o", "wide"]].concat());
    let wide = String::from_utf8_lossy(&output.stdout);
    println!("$ kumaco status ... -o wide\n{wide}");
    let header: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        header[7..],
        [
            "NODES",
            "SELECTED",
            "SCHEDULE",
            "DURATION",
            "NODE-SELECTOR",
            "MESSAGE"
        ],
        "{wide}"
    );
    assert!(wide.contains(&names.join(",")), "{wide}");
    let now_row = wide.lines().find(|l| l.contains(" now ")).unwrap();
    assert!(now_row.split_whitespace().any(|w| w == "zone=a"), "{wide}");
    let nodes_header = wide.lines().find(|l| l.starts_with("NODE ")).unwrap();
    assert!(
        nodes_header
            .split_whitespace()
            .collect::<Vec<_>>()
            .ends_with(&[
                "NEXT-MAINTENANCE",
                "UNTIL",
                "WINDOW",
                "AVAILABLE",
                "IN-PROGRESS-MESSAGE"
            ]),
        "{wide}"
    );

    // As a kubectl plugin: the binary under the name kubectl looks for.
    let dir = std::env::temp_dir().join(format!("kumaco-plugin-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = dir.join("kubectl-kumaco");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kumaco"), &plugin).unwrap();
    let output = Command::new(&plugin)
        .args([
            "status",
            "-n",
            &ns,
            "--node-selector",
            &selector,
            "-o",
            "json",
        ])
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", "/nonexistent")
        .output()
        .expect("running kubectl-kumaco");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut through_plugin: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let mut direct = report.clone();
    through_plugin["time"] = json!(null);
    direct["time"] = json!(null);
    assert_eq!(
        through_plugin["windows"][1]["selectedNodes"],
        direct["windows"][1]["selectedNodes"]
    );
    assert_eq!(through_plugin["nodes"], direct["nodes"]);

    // Through a real kubectl (the API server's version), which finds the plugin on PATH.
    let kubectl = testkit::gobuild::kubectl().expect("kubectl: run `make testenv`");
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new(&kubectl)
        .args(["kumaco", "status", "-n", &ns, "--node-selector", &selector])
        .args(["-o", "json"])
        .env("PATH", &path)
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", "/nonexistent")
        .output()
        .expect("running kubectl kumaco status");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "kubectl kumaco status: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let through_kubectl: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(through_kubectl["nodes"], direct["nodes"]);
    let output = Command::new(&kubectl)
        .args(["plugin", "list"])
        .env("PATH", &path)
        .output()
        .expect("running kubectl plugin list");
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(listed.contains("kubectl-kumaco"), "{listed}");

    let output = Command::new(&plugin)
        .args(["status", "--help"])
        .output()
        .expect("running kubectl-kumaco --help");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("Usage: kubectl kumaco status"), "{help}");
    let output = Command::new(&plugin)
        .args(["status", "--bogus"])
        .output()
        .expect("running kubectl-kumaco");
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("Usage: kubectl kumaco status"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before the first rollout under kumaco no node records how long a maintenance takes.
/// `status --forecast` then still shows the windows and the nodes, and says in the
/// forecast's place that none can be made and which flag gives the duration (where
/// `plan --forecast`, which shows nothing else, stops); given the durations, it forecasts.
#[tokio::test]
async fn status_forecast_without_durations_shows_the_report_and_names_the_flag() {
    let server = ApiServer::shared();
    let TestCluster { client, scope, ns } = TestCluster::new(server, "status-forecast").await;
    let start = Timestamp::from_second(Timestamp::now().as_second() - 60).unwrap();
    create_window(
        &client,
        &ns,
        "now",
        json!({ "startTime": start.to_string(), "duration": "1h", "nodeSelector": "zone=a" }),
    )
    .await;
    let node = create_node(
        &client,
        &scope,
        "a1",
        &[("zone", "a")],
        &[("kured.dev/RebootRequired", "True")],
    )
    .await
    .unwrap()
    .metadata
    .name
    .unwrap();
    let selector = scope.selector();
    let args = [
        "--namespace",
        &ns,
        "--node-selector",
        &selector,
        "--forecast",
        "--require-condition=kured.dev/RebootRequired",
    ];
    let node_row = |stdout: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no row of {node} in:\n{stdout}"))
            .to_string()
    };

    let output = status(server.kubeconfig(), &args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    println!("$ kumaco status ... --forecast\n{stdout}");
    assert!(stdout.contains(" now "), "the window: {stdout}");
    assert!(stdout.contains("NODES (1)\n"), "{stdout}");
    node_row(&stdout);
    assert!(
        !stdout.contains("EXPECTED"),
        "no forecast, no column: {stdout}"
    );
    let said = stdout
        .lines()
        .find(|l| l.starts_with("FORECAST: cannot be made: "))
        .unwrap_or_else(|| panic!("no FORECAST line in:\n{stdout}"));
    assert!(
        said.contains("--maintenance-duration: the nodes in scope record no completed maintenance")
            && said.contains("e.g. --maintenance-duration=15m"),
        "{said}"
    );

    let output = status(server.kubeconfig(), &[&args[..], &["-o", "json"]].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["nodes"].as_array().map(Vec::len),
        Some(1),
        "{stdout}"
    );
    let error = report["forecast"]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("--maintenance-duration: "), "{stdout}");

    // One duration given: the other is named.
    let output = status(
        server.kubeconfig(),
        &[&args[..], &["--maintenance-duration=20m"]].concat(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("FORECAST: cannot be made: --recovery-duration: "),
        "{stdout}"
    );

    // Both given: the forecast.
    let output = status(
        server.kubeconfig(),
        &[
            &args[..],
            &["--maintenance-duration=20m", "--recovery-duration=3m"],
        ]
        .concat(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(!stdout.contains("cannot be made"), "{stdout}");
    assert!(
        stdout.contains("durations: maintenance 20m0s (median), 20m0s (90th percentile), given"),
        "{stdout}"
    );
    assert!(node_row(&stdout).contains(" starts "), "{stdout}");
}

/// Each instance's notification sinks, as the leader writes its record (the Lease
/// `<lease>-notified`, by server-side apply as the instance's field manager): the
/// instances found by the field managers on the nodes, and by their records' label in the
/// `--namespace`s; text and JSON.
#[tokio::test]
async fn status_shows_each_instances_notification_sinks_from_its_record() {
    let server = ApiServer::shared();
    let TestCluster { client, scope, ns } = TestCluster::new(server, "status-notify").await;
    // The namespace of an instance that status is not asked about: found by its field
    // manager on a node.
    let elsewhere = TestCluster::new(server, "status-notify-ops").await.ns;
    let node = create_node(&client, &scope, "a1", &[], &[]).await.unwrap();
    let node = node.metadata.name.unwrap();
    let by_nodes = LeaseRef {
        namespace: elsewhere.clone(),
        name: "kumaco".into(),
    };
    let manager = format!("kumaco/{elsewhere}/kumaco");
    set_condition(&client, &node, UNDER_MAINTENANCE, "True", &manager)
        .await
        .unwrap();
    let by_label = LeaseRef {
        namespace: ns.clone(),
        name: "pool-b".into(),
    };

    let at = |s: &str| -> Timestamp { s.parse().unwrap() };
    let mut nodes_record = Record::default();
    nodes_record.sinks.insert(
        "notify-url".into(),
        SinkRecord {
            frontier: Some(at("2026-12-07T11:58:00Z")),
            done: "a,b".into(),
            queued: 2,
            sent: 12,
            refused: 1,
            last_sent: Some(at("2026-12-07T11:50:00Z")),
            last_error: Some("https://hooks.slack.com/…: 404 no_service".into()),
            ..SinkRecord::default()
        },
    );
    nodes_record.sinks.insert(
        "events".into(),
        SinkRecord {
            frontier: Some(at("2026-12-07T11:58:00Z")),
            sent: 40,
            dropped: 3,
            last_sent: Some(at("2026-12-07T11:39:00Z")),
            failing_since: Some(at("2026-12-07T11:40:00Z")),
            last_error: Some("https://events.example.com/…: no answer within 10s".into()),
            ..SinkRecord::default()
        },
    );
    nodes_record
        .write(&client, &record_lease(&by_nodes), &manager)
        .await
        .unwrap();
    let mut label_record = Record::default();
    label_record.sinks.insert(
        "alertmanager".into(),
        // New: nothing sent yet.
        SinkRecord {
            frontier: Some(at("2026-12-07T11:58:00Z")),
            ..SinkRecord::default()
        },
    );
    label_record
        .write(
            &client,
            &record_lease(&by_label),
            &format!("kumaco/{ns}/pool-b"),
        )
        .await
        .unwrap();
    // A record without a sink (the forecasts told only) says nothing of sinks.
    Record::default()
        .write(
            &client,
            &record_lease(&LeaseRef {
                namespace: ns.clone(),
                name: "pool-c".into(),
            }),
            &format!("kumaco/{ns}/pool-c"),
        )
        .await
        .unwrap();

    let selector = scope.selector();
    let args = ["--namespace", &ns, "--node-selector", &selector];
    let output = status(server.kubeconfig(), &args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    println!("$ kumaco status ...\n{stdout}");
    let section: Vec<Vec<&str>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("NOTIFICATIONS: "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let (elsewhere_lease, ns_lease) = (by_nodes.to_string(), by_label.to_string());
    // By instance (namespace, then name: `status-notify-<n>` before `status-notify-ops-<n>`),
    // then by sink.
    let expected: [&[&str]; 4] = [
        &[
            "INSTANCE",
            "SINK",
            "QUEUED",
            "SENT",
            "DROPPED",
            "REFUSED",
            "LAST-SENT",
            "FAILING-SINCE",
            "LAST-ERROR",
        ],
        &[
            &ns_lease,
            "alertmanager",
            "0",
            "0",
            "0",
            "0",
            "never",
            "-",
            "-",
        ],
        &[
            &elsewhere_lease,
            "events",
            "0",
            "40",
            "3",
            "0",
            "2026-12-07T11:39:00Z",
            "2026-12-07T11:40:00Z",
            "https://events.example.com/…:",
            "no",
            "answer",
            "within",
            "10s",
        ],
        &[
            &elsewhere_lease,
            "notify-url",
            "2",
            "12",
            "0",
            "1",
            "2026-12-07T11:50:00Z",
            "-",
            "https://hooks.slack.com/…:",
            "404",
            "no_service",
        ],
    ];
    assert_eq!(section, expected, "{stdout}");

    let output = status(server.kubeconfig(), &[&args[..], &["-o", "json"]].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["notifications"],
        json!([
            {
                "lease": ns_lease,
                "record": format!("{ns}/pool-b-notified"),
                "sinks": [{
                    "name": "alertmanager", "queued": 0, "sent": 0, "dropped": 0,
                    "refused": 0, "lastSent": null,
                    "failingSince": null, "lastError": null,
                }],
            },
            {
                "lease": elsewhere_lease,
                "record": format!("{elsewhere}/kumaco-notified"),
                "sinks": [
                    {
                        "name": "events", "queued": 0, "sent": 40, "dropped": 3,
                        "refused": 0, "lastSent": "2026-12-07T11:39:00Z",
                        "failingSince": "2026-12-07T11:40:00Z",
                        "lastError": "https://events.example.com/…: no answer within 10s",
                    },
                    {
                        "name": "notify-url", "queued": 2, "sent": 12, "dropped": 0,
                        "refused": 1, "lastSent": "2026-12-07T11:50:00Z",
                        "failingSince": null,
                        "lastError": "https://hooks.slack.com/…: 404 no_service",
                    },
                ],
            },
        ]),
        "{stdout}"
    );
}

/// `kumaco status --kubeconfig FILE ARGS...`, with nothing of the developer's environment
/// (KUBECONFIG, ~/.kube/config) in the way.
fn status(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kumaco"))
        .arg("status")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .expect("running kumaco status")
}

/// What docs/install.md gives a maintenance manager: the window ConfigMaps of one
/// namespace (read here; they also write them), and nothing on nodes.
async fn grant_window_reader(client: &kube::Client, ns: &str, user: &str) {
    let objects = [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": { "name": "window-reader", "namespace": ns },
            "rules": [{
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "list", "watch"],
            }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": "window-reader", "namespace": ns },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "window-reader",
            },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
        }),
    ];
    let options = ApplyOptions {
        field_manager: "kumaco-tests",
        dry_run: false,
        default_namespace: None,
    };
    for obj in objects {
        apply(client, &serde_json::from_value(obj).unwrap(), &options)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
}

#[tokio::test]
async fn status_without_node_rights_shows_the_windows_and_says_what_is_missing() {
    let server = ApiServer::shared();
    let TestCluster { client, ns, .. } = TestCluster::new(server, "status-rbac").await;
    let user = format!("maintainer-{ns}");
    grant_window_reader(&client, &ns, &user).await;
    let kubeconfig = server
        .kubeconfig_for(&user, &["maintainers"])
        .expect("a kubeconfig for the maintenance manager");
    create_window(
        &client,
        &ns,
        "patch-night",
        json!({ "startTime": "0 2 * * 6", "duration": "3h", "nodeSelector": "zone=a",
                "description": "kernel updates" }),
    )
    .await;

    let output = status(&kubeconfig, &["--namespace", &ns]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown with --nocapture: the real output, for docs/tools.md.
    println!(
        "$ kumaco status --namespace {ns}\n{stdout}{stderr}[exit {:?}]",
        output.status.code()
    );
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    // The windows, without the NODES column, and a note where the nodes would be.
    let header: Vec<&str> = stdout.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "NAME",
            "VALID",
            "KIND",
            "ACTIVE",
            "NEXT-START",
            "NEXT-END",
            "MESSAGE"
        ],
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.contains(" patch-night "))
        .unwrap_or_else(|| panic!("no window row in:\n{stdout}"));
    assert!(row.ends_with("   kernel updates"), "{stdout}");
    assert!(
        stdout.contains("\nNODES: not shown, nor how many nodes each window selects: this identity may not list nodes"),
        "{stdout}"
    );
    // One sentence on stderr: who was refused what, by which server, and what to do.
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let expected = format!(
        "kumaco status: cannot list nodes at {}: nodes is forbidden: User \"{user}\" cannot \
         list resource \"nodes\" in API group \"\" at the cluster scope (HTTP 403 Forbidden). \
         kumaco status needs `list nodes` (cluster-wide) to show the nodes each window selects \
         and their conditions: ask your cluster admin for it, or pass --no-nodes to show the \
         windows only\n",
        server.url()
    );
    assert_eq!(stderr, expected);

    // --no-nodes: the same windows, no warning, exit 0.
    let output = status(&kubeconfig, &["--namespace", &ns, "--no-nodes"]);
    let quiet = String::from_utf8_lossy(&output.stdout);
    println!("$ kumaco status --namespace {ns} --no-nodes\n{quiet}");
    assert_eq!(output.status.code(), Some(0), "{quiet}");
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(quiet.contains(row), "{quiet}");
    assert!(!quiet.contains("NODES"), "{quiet}");

    // plan, reading the nodes from the cluster, cannot do without them: exit 1, and the
    // way round (a nodes file).
    let windows = std::env::temp_dir().join(format!("kumaco-status-rbac-{ns}.yaml"));
    std::fs::write(
        &windows,
        "kind: ConfigMap\nmetadata: {name: w, labels: {kured.dev/maintenance-window: \"\"}}\n\
         data: {startTime: \"@daily\", duration: \"1h\", nodeSelector: \"\"}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kumaco"))
        .args(["plan", "--windows"])
        .arg(&windows)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .expect("running kumaco plan");
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("$ kumaco plan --windows ...\n{stderr}");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "kumaco plan: cannot list nodes at {}: nodes is forbidden: User \"{user}\" cannot \
             list resource \"nodes\" in API group \"\" at the cluster scope (HTTP 403 \
             Forbidden). kumaco plan needs `list nodes` (cluster-wide) to read the nodes from \
             the cluster: ask your cluster admin for it, or give the nodes as a file with \
             --nodes (`kubectl get nodes -o yaml > nodes.yaml` by someone who may)\n",
            server.url()
        )
    );

    // A namespace whose windows they may not read: nothing to show, exit 1, and why.
    let output = status(&kubeconfig, &["--namespace", &ns, "--namespace", "default"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("$ kumaco status --namespace {ns} --namespace default\n{stderr}");
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty());
    assert_eq!(
        stderr,
        format!(
            "kumaco status: cannot list ConfigMaps in namespace default at {}: configmaps is \
             forbidden: User \"{user}\" cannot list resource \"configmaps\" in API group \"\" \
             in the namespace \"default\" (HTTP 403 Forbidden). kumaco status needs `list \
             configmaps` in every --namespace it is given: ask that namespace's admin for it, or \
             leave the namespace out\n",
            server.url()
        )
    );
}

/// A weekly cron schedule (UTC) that starts 36 hours from now, so a 3-hour window on it is
/// inactive now.
fn weekly_schedule_not_active_now() -> String {
    let at = (Timestamp::now() + SignedDuration::from_hours(36)).to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "0 {} * * {}",
        at.hour(),
        at.weekday().to_sunday_zero_offset()
    )
}
