//! `kumaco status`: the live cluster as kumaco sees it: each window ConfigMap (valid or
//! not, active now, next occurrence, nodes selected) and each in-scope node's kumaco
//! conditions, in `kubectl get` style columns.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition};
use kube::api::{Api, ListParams};

use super::plan::{PlanNode, in_scope, plan_node};
use super::{ToolError, WindowRules, format_time, render_table};
use crate::cli::StatusArgs;
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::window::WindowId;

/// The windows table: one row per window ConfigMap, sorted by namespace/name. An
/// invalid window shows its errors in the last column. Without `nodes` (they could not
/// be listed, or were not asked for) the `NODES` column is left out.
pub fn windows_table(
    configmaps: &[ConfigMap],
    rules: &WindowRules,
    nodes: Option<&[PlanNode]>,
    now: Timestamp,
) -> String {
    let mut rows: Vec<(WindowId, Vec<String>)> = configmaps
        .iter()
        .map(|cm| {
            let window = rules.window(cm);
            let id = match &window {
                Ok(w) => w.id.clone(),
                Err(_) => WindowId {
                    namespace: cm.metadata.namespace.clone().unwrap_or_default(),
                    name: cm.metadata.name.clone().unwrap_or_default(),
                },
            };
            let row = match window {
                Err(e) => vec![
                    id.namespace.clone(),
                    id.name.clone(),
                    "false".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    e.to_string(),
                ],
                Ok(w) => {
                    let zone = w.schedule.time_zone();
                    let active = match w.latest_active(now) {
                        Some(o) => format!("until {}", format_time(o.end, zone)),
                        None => "no".into(),
                    };
                    let next = w.schedule.next_after(now);
                    let next_end = next.and_then(|s| s.checked_add(w.duration.to_signed()).ok());
                    let selected = nodes.map(|nodes| {
                        nodes
                            .iter()
                            .filter(|n| w.selector.matches(&n.labels))
                            .count()
                    });
                    let kind = if w.blackout { "blackout" } else { "window" };
                    vec![
                        id.namespace.clone(),
                        id.name.clone(),
                        "true".into(),
                        kind.into(),
                        active,
                        next.map_or("never".into(), |t| format_time(t, zone)),
                        next_end.map_or("-".into(), |t| format_time(t, zone)),
                        selected.map_or(String::new(), |n| n.to_string()),
                        w.description.clone().unwrap_or_default(),
                    ]
                }
            };
            (id, row)
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut header = vec![
        "NAMESPACE",
        "NAME",
        "VALID",
        "KIND",
        "ACTIVE",
        "NEXT-START",
        "NEXT-END",
        "NODES",
        "MESSAGE",
    ];
    let mut rows: Vec<Vec<String>> = rows.into_iter().map(|(_, r)| r).collect();
    if nodes.is_none() {
        const NODES_COLUMN: usize = 7;
        header.remove(NODES_COLUMN);
        for row in &mut rows {
            row.remove(NODES_COLUMN);
        }
    }
    render_table(&header, &rows)
}

/// The nodes table: one row per in-scope node, sorted by name, with kumaco's three
/// conditions (status, reason, age each; `-` when absent).
pub fn nodes_table(nodes: &[Node], now: Timestamp) -> String {
    let mut nodes: Vec<&Node> = nodes.iter().collect();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|n| {
            let mut row = vec![n.metadata.name.clone().unwrap_or_default()];
            for type_ in [
                UNDER_MAINTENANCE,
                MAINTENANCE_IN_PROGRESS,
                MAINTENANCE_PLANNED,
            ] {
                row.extend(condition_cells(condition(n, type_), now));
            }
            row
        })
        .collect();
    render_table(
        &[
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
        ],
        &rows,
    )
}

fn condition<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn condition_cells(c: Option<&NodeCondition>, now: Timestamp) -> [String; 3] {
    match c {
        None => ["-".into(), "-".into(), "-".into()],
        Some(c) => [
            c.status.clone(),
            c.reason.clone().unwrap_or_else(|| "-".into()),
            c.last_transition_time
                .as_ref()
                .map_or("-".into(), |t| age(now.duration_since(t.0))),
        ],
    }
}

/// An age as `kubectl get` shows it: the two most significant units while short, one
/// when long (`45s`, `3m20s`, `2h5m`, `3d4h`, `30d`).
pub fn age(d: SignedDuration) -> String {
    let s = d.as_secs().max(0);
    let (m, h, days) = (s / 60, s / 3600, s / 86400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if days < 8 => format!("{days}d{}h", h % 24),
        _ => format!("{days}d"),
    }
}

/// How a `kumaco status` that printed its report went.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything asked for is shown.
    Complete,
    /// The windows are shown, the nodes not: listing them was forbidden.
    NodesForbidden,
}

impl Outcome {
    /// 0, or 3 when the nodes could not be shown: distinct from 1 (nothing shown) so that
    /// a script can tell a partial report from a failure; `--no-nodes` makes it 0.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Complete => 0,
            Outcome::NodesForbidden => 3,
        }
    }
}

/// Runs `kumaco status` against the API server: the report on `out`, a warning on `err`
/// when it is partial.
pub async fn run(
    args: &StatusArgs,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> Result<Outcome, ToolError> {
    let rules = WindowRules::from_args(&args.window_args)?;
    let node_selector = super::node_selector(&args.node_selector)?;
    let connection = crate::kubeclient::connect(&args.client).await?;
    let api_error = |action: String, error: kube::Error, hint: &str| ToolError::Api {
        action,
        server: connection.server.clone(),
        hint: if crate::kubeclient::is_forbidden(&error) {
            hint.to_string()
        } else {
            String::new()
        },
        error: Box::new(error),
    };
    let mut configmaps = Vec::new();
    for ns in &args.namespaces {
        let list = Api::<ConfigMap>::namespaced(connection.client.clone(), ns)
            .list(&ListParams::default().labels(&args.window_args.window_selector))
            .await
            .map_err(|e| {
                api_error(
                    format!("list ConfigMaps in namespace {ns}"),
                    e,
                    ". kumaco status needs `list configmaps` in every --namespace it is \
                     given: ask that namespace's admin for it, or leave the namespace out",
                )
            })?;
        configmaps.extend(list.items);
    }
    let mut outcome = Outcome::Complete;
    let nodes: Option<Vec<Node>> = if args.no_nodes {
        None
    } else {
        let listed = Api::<Node>::all(connection.client.clone())
            .list(&ListParams::default().labels(&args.node_selector))
            .await;
        match listed {
            Ok(list) => Some(
                list.items
                    .into_iter()
                    // kumaco's own matching is the reference; the server-side filter only
                    // trims.
                    .filter(|n| {
                        node_selector
                            .matches(n.metadata.labels.as_ref().unwrap_or(&Default::default()))
                    })
                    .collect(),
            ),
            // A maintenance manager often may read windows but not nodes: the windows are
            // still worth showing, with what is missing and why said plainly.
            Err(e) if crate::kubeclient::is_forbidden(&e) => {
                let warning = api_error(
                    "list nodes".into(),
                    e,
                    ". kumaco status needs `list nodes` (cluster-wide) to show the nodes \
                     each window selects and their conditions: ask your cluster admin for \
                     it, or pass --no-nodes to show the windows only",
                );
                let _ = writeln!(err, "kumaco status: {warning}");
                outcome = Outcome::NodesForbidden;
                None
            }
            Err(e) => return Err(api_error("list nodes".into(), e, "")),
        }
    };
    let plan_nodes = nodes.as_ref().map(|nodes| {
        in_scope(
            &nodes.iter().cloned().map(plan_node).collect::<Vec<_>>(),
            &node_selector,
        )
    });
    let now = Timestamp::now();
    let mut text = format!(
        "WINDOWS (as of {})\n{}",
        format_time(now, &TimeZone::UTC),
        windows_table(&configmaps, &rules, plan_nodes.as_deref(), now),
    );
    match (&nodes, &outcome) {
        (Some(nodes), _) => {
            text.push_str(&format!(
                "\nNODES ({})\n{}",
                nodes.len(),
                nodes_table(nodes, now)
            ));
        }
        (None, Outcome::NodesForbidden) => text.push_str(
            "\nNODES: not shown, nor how many nodes each window selects: this identity may \
             not list nodes (see the message on standard error)\n",
        ),
        (None, Outcome::Complete) => {}
    }
    out.write_all(text.as_bytes()).map_err(ToolError::Write)?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

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
        let nodes = [PlanNode {
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
        let t = windows_table(&cms, &rules, Some(&nodes), ts("2026-01-01T03:00:00Z"));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE   NAME"), "{t}");
        assert!(lines[1].starts_with("ops         broken   false"), "{t}");
        assert!(lines[1].contains("startTime: expected 5 fields"), "{t}");
        assert!(lines[1].contains("nodeSelector: missing"), "{t}");
        assert!(
            lines[2].contains(
                "until 2026-01-01T05:00:00Z   2026-01-02T02:00:00Z   2026-01-02T05:00:00Z   1"
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
        let t = windows_table(&cms, &rules, None, ts("2026-01-01T03:00:00Z"));
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
        let mut planned: Node =
            serde_json::from_value(json!({"metadata": {"name": "n2"}})).unwrap();
        planned.status = Some(Default::default());
        planned.status.as_mut().unwrap().conditions = Some(vec![NodeCondition {
            type_: MAINTENANCE_PLANNED.into(),
            status: "True".into(),
            reason: Some("MaintenanceScheduled".into()),
            last_transition_time: Some(Time(ts("2026-01-01T01:45:00Z"))),
            ..Default::default()
        }]);
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "n0"}})).unwrap();
        let t = nodes_table(&[planned, node, bare], ts("2026-01-01T02:05:30Z"));
        let expected = [
            "NODE   UNDER-MAINTENANCE   REASON              AGE     IN-PROGRESS   REASON   AGE   PLANNED   REASON                 AGE",
            "n0     -                   -                   -       -             -        -     -         -                      -",
            "n1     True                MaintenanceWindow   5m30s   -             -        -     -         -                      -",
            "n2     -                   -                   -       -             -        -     True      MaintenanceScheduled   20m",
        ];
        assert_eq!(t.lines().collect::<Vec<_>>(), expected);
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
}
