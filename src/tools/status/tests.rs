use super::*;
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::node::Names;
use crate::peers::LeaseRead;
use crate::tools::nodes::ListedNode;
use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{ConfigMap, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kumaco_core::testing::ts;
use serde_json::json;
use std::collections::BTreeMap;

fn cm(name: &str, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ops"},
        "data": data,
    }))
    .unwrap()
}

#[test]
fn windows_table_shows_valid_and_invalid() {
    let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
    let nodes = [ListedNode {
        name: "a1".into(),
        labels: [("zone".to_string(), "a".to_string())].into(),
    }];
    let cms = [
        cm(
            "weekly",
            json!({"startTime": "0 2 * * *", "duration": "3h", "nodeSelector": "zone=a"}),
        ),
        cm("broken", json!({"startTime": "0 2 * *", "duration": "3h"})),
    ];
    let reports = window_reports(&cms, &rules, Some(&nodes));
    let t = windows_table(&reports, ts("2026-01-01T03:00:00Z"), false, true);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE   NAME"), "{t}");
    assert!(lines[1].starts_with("ops         broken   false"), "{t}");
    assert!(lines[1].contains("startTime: expected 5 fields"), "{t}");
    assert!(lines[1].contains("nodeSelector: missing"), "{t}");
    assert!(
        lines[2].contains(
            "until 2026-01-01T05:00:00Z   2026-01-02T02:00:00Z   2026-01-02T05:00:00Z   1       a1"
        ),
        "{t}"
    );
}

#[test]
fn windows_table_without_nodes_has_no_nodes_column() {
    let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
    let cms = [cm(
        "weekly",
        json!({"startTime": "0 2 * * *", "duration": "3h", "nodeSelector": "zone=a",
               "description": "nightly"}),
    )];
    let reports = window_reports(&cms, &rules, None);
    let t = windows_table(&reports, ts("2026-01-01T03:00:00Z"), false, false);
    let expected = [
        "NAMESPACE   NAME     VALID   KIND     ACTIVE                       NEXT-START             NEXT-END               MESSAGE",
        "ops         weekly   true    window   until 2026-01-01T05:00:00Z   2026-01-02T02:00:00Z   2026-01-02T05:00:00Z   nightly",
    ];
    assert_eq!(t.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn nodes_table_shows_conditions_and_ages() {
    let mut node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
    node.status = Some(Default::default());
    node.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
        type_: UNDER_MAINTENANCE.into(),
        status: "True".into(),
        reason: Some("MaintenanceWindow".into()),
        last_transition_time: Some(Time(ts("2026-01-01T02:00:00Z"))),
        ..Default::default()
    }]);
    let mut planned: Node = serde_json::from_value(json!({"metadata": {"name": "n2"}})).unwrap();
    planned.status = Some(Default::default());
    planned.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
        type_: MAINTENANCE_PLANNED.into(),
        status: "True".into(),
        reason: Some("MaintenanceScheduled".into()),
        last_transition_time: Some(Time(ts("2026-01-01T01:45:00Z"))),
        ..Default::default()
    }]);
    let bare: Node = serde_json::from_value(json!({
        "metadata": {"name": "n0"},
        "spec": {"unschedulable": true},
    }))
    .unwrap();
    let mut waiting = node.clone();
    waiting.metadata.name = Some("n3".into());
    waiting.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
        type_: MAINTENANCE_IN_PROGRESS.into(),
        status: "False".into(),
        reason: Some("WaitingForSlot".into()),
        message: Some("1/1 slots in use: 1 unavailable (n0 cordoned)".into()),
        last_transition_time: Some(Time(ts("2026-01-01T02:05:00Z"))),
        ..Default::default()
    }]);
    // -o wide: the why-not, last.
    let t = nodes_table(
        &[bare.clone(), waiting],
        &[],
        ts("2026-01-01T02:05:30Z"),
        true,
        None,
        &Names::default(),
    );
    let expected = [
        "NODE   UNDER-MAINTENANCE   REASON   AGE   IN-PROGRESS   REASON           AGE   PLANNED   REASON   AGE   NEXT-MAINTENANCE   UNTIL   WINDOW   AVAILABLE   IN-PROGRESS-MESSAGE",
        "n0     -                   -        -     -             -                -     -         -        -     -                  -       -        cordoned    -",
        "n3     -                   -        -     False         WaitingForSlot   30s   -         -        -     -                  -       -        yes         1/1 slots in use: 1 unavailable (n0 cordoned)",
    ];
    assert_eq!(t.lines().collect::<Vec<_>>(), expected);
    let t = nodes_table(
        &[planned.clone(), node.clone(), bare.clone()],
        &[],
        ts("2026-01-01T02:05:30Z"),
        false,
        None,
        &Names::default(),
    );
    let expected = [
        "NODE   UNDER-MAINTENANCE   REASON              AGE     IN-PROGRESS   REASON   AGE   PLANNED   REASON                 AGE   NEXT-MAINTENANCE   AVAILABLE",
        "n0     -                   -                   -       -             -        -     -         -                      -     -                  cordoned",
        "n1     True                MaintenanceWindow   5m30s   -             -        -     -         -                      -     -                  yes",
        "n2     -                   -                   -       -             -        -     True      MaintenanceScheduled   20m   -                  yes",
    ];
    assert_eq!(t.lines().collect::<Vec<_>>(), expected);

    // What takes slots: n0 is cordoned; per zone with --group-by.
    let zoned = |mut n: Node, zone: Option<&str>| {
        n.metadata.labels = zone.map(|z| [(ZONE.to_string(), z.to_string())].into());
        n
    };
    let nodes = [
        zoned(bare, Some("a")),
        zoned(node, Some("a")),
        zoned(planned, None),
    ];
    let (all, groups) = super::report::disruption(&nodes, &[ZONE.to_string()], &Names::default());
    let t = super::render::disruption_table(&all, &groups);
    let expected = [
        "GROUP                            NODES   IN-PROGRESS   DISRUPTED   UNAVAILABLE",
        "all                              3       0             1           1 (n0 cordoned)",
        "no topology.kubernetes.io/zone   1       0             0           0",
        "topology.kubernetes.io/zone=a    2       0             1           1 (n0 cordoned)",
    ];
    assert_eq!(t.lines().collect::<Vec<_>>(), expected);
}

/// A node in progress that is also unavailable (cordoned by its drain) takes one slot,
/// counted as in progress, as the decision counts it: not a second time as unavailable.
#[test]
fn disruption_counts_a_node_in_progress_and_unavailable_once() {
    let node = |name: &str, unschedulable: bool, conditions: serde_json::Value| -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    };
    let nodes = [
        node(
            "draining",
            true,
            json!([{"type": MAINTENANCE_IN_PROGRESS, "status": "True",
                    "reason": "MaintenanceWindow"}]),
        ),
        node("down", false, json!([{"type": "Ready", "status": "False"}])),
        node("idle", false, json!([{"type": "Ready", "status": "True"}])),
    ];
    let (all, _) = super::report::disruption(&nodes, &[], &Names::default());
    assert_eq!((all.usage.in_progress, all.usage.unavailable), (1, 1));
    let t = super::render::disruption_table(&all, &[]);
    let expected = [
        "GROUP   NODES   IN-PROGRESS   DISRUPTED   UNAVAILABLE",
        "all     3       1             2           1 (down NotReady)",
    ];
    assert_eq!(t.lines().collect::<Vec<_>>(), expected);
}

const ZONE: &str = "topology.kubernetes.io/zone";

fn window(name: &str, data: serde_json::Value) -> Window {
    let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
    rules.window(&cm(name, data)).unwrap()
}

#[test]
fn next_maintenance_is_the_active_window_else_the_earliest_start() {
    let daily = window(
        "daily",
        json!({"startTime": "0 2 * * *", "duration": "3h", "nodeSelector": "zone=a"}),
    );
    let hourly = window(
        "hourly",
        json!({"startTime": "30 * * * *", "duration": "10m", "nodeSelector": "zone=a"}),
    );
    let freeze = window(
        "freeze",
        json!({"startTime": "0 * * * *", "duration": "1m", "nodeSelector": "",
               "blackout": "true"}),
    );
    let windows = [&daily, &hourly, &freeze];
    let a: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
    // 03:00: daily is active (until 05:00) though hourly starts sooner.
    let m = next_maintenance(&windows, &a, ts("2026-01-01T03:00:00Z")).unwrap();
    assert_eq!(
        (m.window.name.as_str(), m.active, m.end),
        ("daily", true, ts("2026-01-01T05:00:00Z"))
    );
    // 06:00: the next hourly, 06:30; blackouts are not maintenance.
    let m = next_maintenance(&windows, &a, ts("2026-01-01T06:00:00Z")).unwrap();
    assert_eq!(
        (m.window.name.as_str(), m.active, m.start),
        ("hourly", false, ts("2026-01-01T06:30:00Z"))
    );
    assert_eq!(
        next_maintenance(&windows, &BTreeMap::new(), ts("2026-01-01T06:00:00Z")),
        None
    );
}

#[test]
fn names_are_cut_in_tables_and_whole_in_json() {
    let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
    let nodes: Vec<ListedNode> = (0..5)
        .map(|i| ListedNode {
            name: format!("n{i}"),
            labels: BTreeMap::new(),
        })
        .collect();
    let cms = [cm(
        "all",
        json!({"startTime": "0 2 * * *", "duration": "3h", "nodeSelector": ""}),
    )];
    let reports = window_reports(&cms, &rules, Some(&nodes));
    let now = ts("2026-01-01T00:00:00Z");
    let t = windows_table(&reports, now, false, true);
    assert!(t.contains("   5       n0,n1,n2 (+2 more)"), "{t}");
    let wide = windows_table(&reports, now, true, true);
    assert!(
        wide.contains("   n0,n1,n2,n3,n4   0 2 * * *   3h0m0s"),
        "{wide}"
    );
    assert!(wide.lines().nth(1).unwrap().ends_with("<all>"), "{wide}");
    let windows: Vec<&Window> = reports
        .iter()
        .filter_map(|r| r.window.as_ref().ok())
        .collect();
    let v = json_report(
        &reports,
        Some(&[]),
        &Owners::new(),
        &windows,
        now,
        &Names::default(),
    );
    assert_eq!(
        v["windows"][0]["selectedNodes"],
        json!(["n0", "n1", "n2", "n3", "n4"])
    );
    assert_eq!(v["windows"][0]["nextStart"], "2026-01-01T02:00:00Z");
    assert_eq!(v["windows"][0]["activeUntil"], serde_json::Value::Null);
    assert_eq!(v["kind"], "KumacoStatus");
}

#[test]
fn ages_read_like_kubectl() {
    let a = |s| age(SignedDuration::from_secs(s));
    assert_eq!(a(45), "45s");
    assert_eq!(a(200), "3m20s");
    assert_eq!(a(3600), "60m");
    assert_eq!(a(4 * 3600 + 300), "4h5m");
    assert_eq!(a(30 * 3600), "30h");
    assert_eq!(a(3 * 86400 + 4 * 3600), "3d4h");
    assert_eq!(a(30 * 86400), "30d");
}

#[test]
fn two_live_kumaco_owners_make_a_node_contested() {
    let node = |name: &str, managers: &[(&str, &str)]| -> Node {
        let fields: Vec<serde_json::Value> = managers
            .iter()
            .map(|(m, t)| {
                json!({ "manager": m, "operation": "Apply", "subresource": "status",
                        "fieldsType": "FieldsV1", "time": "2026-01-01T00:00:00Z",
                        "fieldsV1": { "f:status": { "f:conditions": {
                            format!("k:{{\"type\":\"{t}\"}}"): { ".": {}, "f:status": {} } } } } })
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": { "name": name, "managedFields": fields }
        }))
        .unwrap()
    };
    let nodes = [
        node(
            "moving",
            &[
                ("kumaco/a/a", UNDER_MAINTENANCE),
                ("kumaco/b/b", UNDER_MAINTENANCE),
            ],
        ),
        node(
            "stale-peer",
            &[
                ("kumaco/a/a", UNDER_MAINTENANCE),
                ("kumaco", UNDER_MAINTENANCE),
            ],
        ),
        node(
            "alone",
            &[
                ("kumaco/a/a", UNDER_MAINTENANCE),
                ("kured", "kured.dev/RebootRequired"),
            ],
        ),
    ];
    let now = ts("2026-01-01T00:00:10Z");
    let mut peers = Peers::default();
    for lease in ["kumaco/a/a", "kumaco/b/b"] {
        peers.leases.insert(
            peers::lease_of(lease).unwrap(),
            (
                LeaseRead::Found {
                    held: true,
                    renewed: Some(now),
                    duration: SignedDuration::from_secs(15),
                },
                now,
            ),
        );
    }
    let owners = kumaco_owners(&nodes, &peers, now, &Names::default());
    assert!(contested(&owners["moving"]));
    assert!(
        !contested(&owners["stale-peer"]),
        "{:?}",
        owners["stale-peer"]
    );
    assert_eq!(
        owners["alone"].len(),
        1,
        "kured's condition is not kumaco's"
    );
    let table = contested_table(&owners).unwrap();
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(
        table.contains("moving") && table.contains("kumaco/b/b (live: kured.dev/UnderMaintenance)")
    );
    let v = json_report(&[], Some(&nodes), &owners, &[], now, &Names::default());
    assert_eq!(v["nodes"][1]["contested"], json!(true));
    assert_eq!(
        v["nodes"][1]["kumacoFieldManagers"][1]["name"],
        json!("kumaco/b/b")
    );
    // Sorted by name: alone, moving, stale-peer; its managers: kumaco, kumaco/a/a.
    assert_eq!(
        v["nodes"][2]["kumacoFieldManagers"][0]["live"],
        json!(false)
    );
}
