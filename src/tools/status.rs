//! `kumaco status`: the live cluster as kumaco sees it: each window ConfigMap (valid or
//! not, active now, next occurrence, nodes selected) and each in-scope node's kumaco
//! conditions, in `kubectl get` style columns.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ConfigMap, Node, NodeCondition};
use kube::api::{Api, ListParams};

use super::plan::{PlanNode, in_scope, plan_node};
use super::{ToolError, WindowRules, format_time, render_table};
use serde_json::json;

use crate::cli::{StatusArgs, StatusOutput};
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::node::SlimNode;
use crate::peers::{self, LeaseRead, Liveness, Peers};
use crate::window::{InvalidWindow, Window, WindowId};

/// How many node names a table cell lists before "(+N more)"; JSON lists them all.
pub const NAMES_IN_TABLE: usize = 3;
/// The same with `-o wide`.
pub const NAMES_IN_WIDE_TABLE: usize = 10;

/// One window ConfigMap as `kumaco status` reports it.
pub struct WindowReport {
    pub id: WindowId,
    pub window: Result<Window, InvalidWindow>,
    /// The in-scope nodes the window selects, by name (`None`: nodes not listed).
    pub selected: Option<Vec<String>>,
}

/// Where a node's next maintenance is: the window and its occurrence, active now or the
/// earliest to come (blackouts are not subtracted: a node's conditions say if one holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextMaintenance {
    pub window: WindowId,
    pub start: Timestamp,
    pub end: Timestamp,
    pub active: bool,
}

/// The windows, each with the nodes it selects, sorted by namespace/name.
pub fn window_reports(
    configmaps: &[ConfigMap],
    rules: &WindowRules,
    nodes: Option<&[PlanNode]>,
) -> Vec<WindowReport> {
    let mut out: Vec<WindowReport> = configmaps
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
            let selected = match (&window, nodes) {
                (Ok(w), Some(nodes)) => Some(
                    nodes
                        .iter()
                        .filter(|n| w.selector.matches(&n.labels))
                        .map(|n| n.name.clone())
                        .collect(),
                ),
                _ => None,
            };
            WindowReport {
                id,
                window,
                selected,
            }
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// A node's next maintenance among `windows` (the valid maintenance windows).
pub fn next_maintenance(
    windows: &[&Window],
    labels: &BTreeMap<String, String>,
    now: Timestamp,
) -> Option<NextMaintenance> {
    windows
        .iter()
        .filter(|w| !w.blackout && w.selector.matches(labels))
        .filter_map(|w| {
            if let Some(o) = w.latest_active(now) {
                return Some(NextMaintenance {
                    window: w.id.clone(),
                    start: o.start,
                    end: o.end,
                    active: true,
                });
            }
            let start = w.schedule.next_after(now)?;
            Some(NextMaintenance {
                window: w.id.clone(),
                start,
                end: start.checked_add(w.duration.to_signed()).ok()?,
                active: false,
            })
        })
        .min_by(|a, b| (!a.active, a.start, &a.window).cmp(&(!b.active, b.start, &b.window)))
}

/// The kumaco field managers owning a node's kumaco conditions (their `status`, from
/// managedFields), each with whether its instance runs (`None`: its Lease could not be
/// read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KumacoOwner {
    pub manager: String,
    pub conditions: Vec<String>,
    pub live: Option<bool>,
}

/// Each node's kumaco owners, by node name.
pub type Owners = BTreeMap<String, Vec<KumacoOwner>>;

/// A node is contested when two live kumaco instances own its conditions (a move
/// between instances half done, or two scopes that overlap).
pub fn contested(owners: &[KumacoOwner]) -> bool {
    owners.iter().filter(|o| o.live != Some(false)).count() > 1
}

/// The kumaco owners of each node, judged with `peers` (the Leases their managers name).
pub fn kumaco_owners(nodes: &[Node], peers: &Peers, now: Timestamp) -> Owners {
    nodes
        .iter()
        .map(|n| {
            let owners = slim(n)
                .status_owners
                .into_iter()
                .filter(|o| peers::is_kumaco(&o.manager))
                .map(|mut o| {
                    o.types
                        .retain(|t| peers::KUMACO_TYPES.contains(&t.as_str()));
                    o
                })
                .filter(|o| !o.types.is_empty())
                .map(|o| KumacoOwner {
                    live: match peers.liveness(&o.manager, now) {
                        Liveness::Live => Some(true),
                        Liveness::Stale => Some(false),
                        Liveness::Unknown => None,
                    },
                    manager: o.manager,
                    conditions: o.types,
                })
                .collect();
            (n.metadata.name.clone().unwrap_or_default(), owners)
        })
        .collect()
}

/// A Node as kumaco's controller decodes it (ownership from managedFields).
fn slim(node: &Node) -> SlimNode {
    serde_json::to_value(node)
        .and_then(serde_json::from_value)
        .unwrap_or_default()
}

/// The contested nodes, one row each with the kumaco instances claiming them; empty
/// when none is.
pub fn contested_table(owners: &Owners) -> Option<String> {
    let rows: Vec<Vec<String>> = owners
        .iter()
        .filter(|(_, o)| contested(o))
        .map(|(node, o)| {
            let managers: Vec<String> = o
                .iter()
                .map(|o| {
                    let state = match o.live {
                        Some(true) => "live",
                        Some(false) => "stale",
                        None => "unknown",
                    };
                    format!("{} ({state}: {})", o.manager, o.conditions.join(","))
                })
                .collect();
            vec![node.clone(), managers.join(" ")]
        })
        .collect();
    (!rows.is_empty()).then(|| render_table(&["NODE", "KUMACO-INSTANCES"], &rows))
}

/// `a,b,c (+N more)`: at most `max` names; `-` for none.
fn names_cell(names: &[String], max: usize) -> String {
    if names.is_empty() {
        return "-".into();
    }
    let mut cell = names[..names.len().min(max)].join(",");
    if names.len() > max {
        cell.push_str(&format!(" (+{} more)", names.len() - max));
    }
    cell
}

/// The windows table: one row per window ConfigMap. An invalid window shows its errors
/// in the last column. Without nodes (`with_nodes` false: they could not be listed, or
/// were not asked for) the `NODES` and `SELECTED` columns are left out. `wide` adds the schedule, duration
/// and node selector, and lists more names.
pub fn windows_table(
    reports: &[WindowReport],
    now: Timestamp,
    wide: bool,
    with_nodes: bool,
) -> String {
    let max = if wide {
        NAMES_IN_WIDE_TABLE
    } else {
        NAMES_IN_TABLE
    };
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let mut row = vec![r.id.namespace.clone(), r.id.name.clone()];
            match &r.window {
                Err(e) => {
                    row.extend(["false", "-", "-", "-", "-"].map(String::from));
                    if with_nodes {
                        row.extend(["-", "-"].map(String::from));
                    }
                    if wide {
                        row.extend(["-", "-", "-"].map(String::from));
                    }
                    row.push(e.to_string());
                }
                Ok(w) => {
                    let zone = w.schedule.time_zone();
                    let active = match w.latest_active(now) {
                        Some(o) => format!("until {}", format_time(o.end, zone)),
                        None => "no".into(),
                    };
                    let next = w.schedule.next_after(now);
                    let next_end = next.and_then(|s| s.checked_add(w.duration.to_signed()).ok());
                    let kind = if w.blackout { "blackout" } else { "window" };
                    row.extend([
                        "true".into(),
                        kind.into(),
                        active,
                        next.map_or("never".into(), |t| format_time(t, zone)),
                        next_end.map_or("-".into(), |t| format_time(t, zone)),
                    ]);
                    if with_nodes {
                        let names = r.selected.as_deref().unwrap_or_default();
                        row.push(names.len().to_string());
                        row.push(names_cell(names, max));
                    }
                    if wide {
                        row.push(w.schedule.spec().to_string());
                        row.push(w.duration.to_string());
                        row.push(selector_cell(&w.selector));
                    }
                    row.push(w.description.clone().unwrap_or_default());
                }
            }
            row
        })
        .collect();
    let mut header = vec![
        "NAMESPACE",
        "NAME",
        "VALID",
        "KIND",
        "ACTIVE",
        "NEXT-START",
        "NEXT-END",
    ];
    if with_nodes {
        header.extend(["NODES", "SELECTED"]);
    }
    if wide {
        header.extend(["SCHEDULE", "DURATION", "NODE-SELECTOR"]);
    }
    header.push("MESSAGE");
    render_table(&header, &rows)
}

/// A selector for a table cell: `<all>` for the empty one, as kubectl shows it.
fn selector_cell(s: &crate::selector::Selector) -> String {
    let text = s.to_string();
    if text.is_empty() {
        "<all>".into()
    } else {
        text
    }
}

/// The nodes table: one row per in-scope node, sorted by name, with kumaco's three
/// conditions (status, reason, age each; `-` when absent) and the node's next
/// maintenance (`wide`: and its window).
pub fn nodes_table(nodes: &[Node], windows: &[&Window], now: Timestamp, wide: bool) -> String {
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
            let next = next_maintenance(windows, labels(n), now);
            row.push(match &next {
                None => "-".into(),
                Some(m) if m.active => "now".into(),
                Some(m) => format_time(m.start, &TimeZone::UTC),
            });
            if wide {
                row.push(
                    next.as_ref()
                        .map_or("-".into(), |m| format_time(m.end, &TimeZone::UTC)),
                );
                row.push(next.map_or("-".into(), |m| m.window.to_string()));
            }
            row
        })
        .collect();
    let mut header = vec![
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
    ];
    if wide {
        header.extend(["UNTIL", "WINDOW"]);
    }
    render_table(&header, &rows)
}

fn labels(n: &Node) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    n.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// The `-o json` document: a stable schema, documented in docs/tools.md. Times are RFC
/// 3339 in UTC; `nodes` and each window's `selectedNodes` are `null` when the nodes were
/// not listed.
pub fn json_report(
    reports: &[WindowReport],
    nodes: Option<&[Node]>,
    owners: &Owners,
    windows: &[&Window],
    now: Timestamp,
) -> serde_json::Value {
    let time = |t: Timestamp| serde_json::Value::from(format_time(t, &TimeZone::UTC));
    let windows_json: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| {
            let mut v = json!({
                "namespace": r.id.namespace,
                "name": r.id.name,
                "valid": r.window.is_ok(),
            });
            match &r.window {
                Err(e) => {
                    v["errors"] = e.0.iter().map(|f| f.to_string()).collect();
                }
                Ok(w) => {
                    let next = w.schedule.next_after(now);
                    v["errors"] = json!([]);
                    v["kind"] = (if w.blackout { "blackout" } else { "window" }).into();
                    v["schedule"] = w.schedule.spec().into();
                    v["timeZone"] = w.schedule.zone_name().into();
                    v["duration"] = w.duration.to_string().into();
                    v["nodeSelector"] = w.selector.to_string().into();
                    v["description"] = w.description.clone().into();
                    v["activeUntil"] = w.latest_active(now).map(|o| time(o.end)).into();
                    v["nextStart"] = next.map(time).into();
                    v["nextEnd"] = next
                        .and_then(|s| s.checked_add(w.duration.to_signed()).ok())
                        .map(time)
                        .into();
                }
            }
            v["selectedNodes"] = r.selected.clone().into();
            v
        })
        .collect();
    let nodes_json = nodes.map(|nodes| {
        let mut nodes: Vec<&Node> = nodes.iter().collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        nodes
            .iter()
            .map(|n| {
                let conditions: Vec<serde_json::Value> = [
                    UNDER_MAINTENANCE,
                    MAINTENANCE_IN_PROGRESS,
                    MAINTENANCE_PLANNED,
                ]
                .iter()
                .filter_map(|t| condition(n, t))
                .map(|c| {
                    json!({
                        "type": c.type_,
                        "status": c.status,
                        "reason": c.reason,
                        "message": c.message,
                        "lastTransitionTime": c.last_transition_time.as_ref().map(|t| time(t.0)),
                    })
                })
                .collect();
                let next = next_maintenance(windows, labels(n), now).map(|m| {
                    json!({
                        "window": { "namespace": m.window.namespace, "name": m.window.name },
                        "start": time(m.start),
                        "end": time(m.end),
                        "active": m.active,
                    })
                });
                let owners = n
                    .metadata
                    .name
                    .as_ref()
                    .and_then(|name| owners.get(name))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                let field_managers: Vec<serde_json::Value> = owners
                    .iter()
                    .map(|o| {
                        json!({
                            "name": o.manager,
                            "conditions": o.conditions,
                            "live": o.live,
                        })
                    })
                    .collect();
                json!({
                    "name": n.metadata.name,
                    "conditions": conditions,
                    "nextMaintenance": next,
                    "kumacoFieldManagers": field_managers,
                    "contested": contested(owners),
                })
            })
            .collect::<Vec<_>>()
    });
    json!({
        "kind": "KumacoStatus",
        "version": 1,
        "time": time(now),
        "windows": windows_json,
        "nodes": nodes_json,
    })
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
    let reports = window_reports(&configmaps, &rules, plan_nodes.as_deref());
    let windows: Vec<&Window> = reports
        .iter()
        .filter_map(|r| r.window.as_ref().ok())
        .collect();
    let owners = match &nodes {
        Some(nodes) => {
            let peers = read_leases(&connection.client, nodes).await;
            kumaco_owners(nodes, &peers, now)
        }
        None => Owners::new(),
    };
    let wide = args.output == StatusOutput::Wide;
    let text = if args.output == StatusOutput::Json {
        let report = json_report(&reports, nodes.as_deref(), &owners, &windows, now);
        let mut text = serde_json::to_string_pretty(&report)
            .map_err(|e| ToolError::Write(std::io::Error::other(e)))?;
        text.push('\n');
        text
    } else {
        let mut text = format!(
            "WINDOWS (as of {})\n{}",
            format_time(now, &TimeZone::UTC),
            windows_table(&reports, now, wide, nodes.is_some()),
        );
        match (&nodes, &outcome) {
            (Some(nodes), _) => {
                text.push_str(&format!(
                    "\nNODES ({})\n{}",
                    nodes.len(),
                    nodes_table(nodes, &windows, now, wide)
                ));
                if let Some(table) = contested_table(&owners) {
                    let n = owners.values().filter(|o| contested(o)).count();
                    text.push_str(&format!(
                        "\nCONTESTED ({n}): two live kumaco instances own these nodes' \
                         conditions (docs/operations.md, \"When instances meet\")\n{table}"
                    ));
                }
            }
            (None, Outcome::NodesForbidden) => text.push_str(
                "\nNODES: not shown, nor how many nodes each window selects: this identity may \
                 not list nodes (see the message on standard error)\n",
            ),
            (None, Outcome::Complete) => {}
        }
        text
    };
    out.write_all(text.as_bytes()).map_err(ToolError::Write)?;
    Ok(outcome)
}

/// The Leases the kumaco field managers on `nodes` name, read with the user's identity;
/// one that cannot be read leaves its instance's liveness unknown.
async fn read_leases(client: &kube::Client, nodes: &[Node]) -> Peers {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: std::collections::BTreeSet<_> = nodes
        .iter()
        .flat_map(|n| slim(n).status_owners)
        .filter_map(|o| peers::lease_of(&o.manager))
        .collect();
    let mut peers = Peers::default();
    let now = Timestamp::now();
    for lease in leases {
        let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
        let read = match api.get_opt(&lease.name).await {
            Ok(Some(l)) => crate::peer_leases::lease_read(&l),
            Ok(None) => LeaseRead::Missing,
            Err(_) => continue,
        };
        peers.leases.insert(lease, (read, now));
    }
    peers
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
        let t = nodes_table(
            &[planned, node, bare],
            &[],
            ts("2026-01-01T02:05:30Z"),
            false,
        );
        let expected = [
            "NODE   UNDER-MAINTENANCE   REASON              AGE     IN-PROGRESS   REASON   AGE   PLANNED   REASON                 AGE   NEXT-MAINTENANCE",
            "n0     -                   -                   -       -             -        -     -         -                      -     -",
            "n1     True                MaintenanceWindow   5m30s   -             -        -     -         -                      -     -",
            "n2     -                   -                   -       -             -        -     True      MaintenanceScheduled   20m   -",
        ];
        assert_eq!(t.lines().collect::<Vec<_>>(), expected);
    }

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
        let nodes: Vec<PlanNode> = (0..5)
            .map(|i| PlanNode {
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
        let v = json_report(&reports, Some(&[]), &Owners::new(), &windows, now);
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
        let owners = kumaco_owners(&nodes, &peers, now);
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
            table.contains("moving")
                && table.contains("kumaco/b/b (live: kured.dev/UnderMaintenance)")
        );
        let v = json_report(&[], Some(&nodes), &owners, &[], now);
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
}
