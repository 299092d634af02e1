//! `kumaco status` rendered: the windows and nodes tables, the contested nodes, the
//! notification sinks, and the `-o json` document.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use serde_json::json;

use super::report::{Disruption, Owners, WindowReport, availability, contested, next_maintenance};
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::node::Names;
use crate::notify::record::{Record, record_lease};
use crate::peers::LeaseRef;
use crate::tools::{format_time, render_table};
use crate::window::Window;

/// How many node names a table cell lists before "(+N more)"; JSON lists them all.
pub const NAMES_IN_TABLE: usize = 3;
/// The same with `-o wide`.
pub const NAMES_IN_WIDE_TABLE: usize = 10;

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

/// The notification sinks of each instance (by its Lease), one row each, as the record
/// says: waiting, sent, dropped, refused, the last delivery, since when attempts fail, the
/// last error; `None` when no instance has a sink.
pub fn notifications_table(records: &[(LeaseRef, Record)]) -> Option<String> {
    let time = |t: Option<Timestamp>, none: &str| {
        t.map_or(none.to_string(), |t| format_time(t, &TimeZone::UTC))
    };
    let rows: Vec<Vec<String>> = records
        .iter()
        .flat_map(|(instance, record)| {
            record.sinks.iter().map(move |(name, s)| {
                vec![
                    instance.to_string(),
                    name.clone(),
                    s.queued.to_string(),
                    s.sent.to_string(),
                    s.dropped.to_string(),
                    s.refused.to_string(),
                    time(s.last_sent, "never"),
                    time(s.failing_since, "-"),
                    s.last_error.clone().unwrap_or_else(|| "-".into()),
                ]
            })
        })
        .collect();
    (!rows.is_empty()).then(|| {
        render_table(
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
            &rows,
        )
    })
}

/// The notification sinks in `-o json`: per instance, its Lease, its record's Lease and
/// each sink's state.
pub fn notifications_json(records: &[(LeaseRef, Record)]) -> serde_json::Value {
    let time = |t: Option<Timestamp>| t.map(|t| format_time(t, &TimeZone::UTC));
    records
        .iter()
        .map(|(instance, record)| {
            let sinks: Vec<serde_json::Value> = record
                .sinks
                .iter()
                .map(|(name, s)| {
                    json!({
                        "name": name,
                        "queued": s.queued,
                        "sent": s.sent,
                        "dropped": s.dropped,
                        "refused": s.refused,
                        "lastSent": time(s.last_sent),
                        "failingSince": time(s.failing_since),
                        "lastError": s.last_error,
                    })
                })
                .collect();
            json!({
                "lease": instance.to_string(),
                "record": record_lease(instance).to_string(),
                "sinks": sinks,
            })
        })
        .collect()
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
/// `expected`: with `--forecast`, each forecast node's expected start or end (a last
/// column, `EXPECTED`).
pub fn nodes_table(
    nodes: &[Node],
    windows: &[&Window],
    now: Timestamp,
    wide: bool,
    expected: Option<&BTreeMap<String, String>>,
    names: &Names,
) -> String {
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
                row.extend(condition_cells(condition(n, names.to_wire(type_)), now));
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
            row.push(match availability(n).unavailable() {
                None => "yes".into(),
                Some(why) => why.to_string(),
            });
            if wide {
                // Why a node does not start (or why it did): kumaco's own message,
                // bounded where it is written.
                row.push(
                    condition(n, names.to_wire(MAINTENANCE_IN_PROGRESS))
                        .and_then(|c| c.message.clone())
                        .filter(|m| !m.is_empty())
                        .unwrap_or_else(|| "-".into()),
                );
            }
            if let Some(expected) = expected {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                row.push(expected.get(name).cloned().unwrap_or_else(|| "-".into()));
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
    // New columns go last: the earlier ones keep their positions for scripts.
    header.push("AVAILABLE");
    if wide {
        header.push("IN-PROGRESS-MESSAGE");
    }
    if expected.is_some() {
        header.push("EXPECTED");
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
    names: &Names,
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
                .filter_map(|t| condition(n, names.to_wire(t)))
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
                    "available": availability(n).unavailable().map_or("yes".to_string(), |u| u.to_string()),
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

/// What takes `MaintenanceInProgress` slots: overall, then per group of each `--group-by`
/// key.
pub fn disruption_table(
    all: &Disruption,
    groups: &[(String, Option<String>, Disruption)],
) -> String {
    let row = |group: String, d: &Disruption| {
        let mut unavailable = d.usage.unavailable.to_string();
        if d.usage.unavailable > 0 {
            unavailable.push_str(&format!(" ({})", d.usage.unavailable_listed()));
        }
        vec![
            group,
            d.nodes.to_string(),
            d.usage.in_progress.to_string(),
            d.usage.disrupted().to_string(),
            unavailable,
        ]
    };
    let mut rows = vec![row("all".into(), all)];
    for (key, value, d) in groups {
        let group = match value {
            Some(v) => format!("{key}={v}"),
            None => format!("no {key}"),
        };
        rows.push(row(group, d));
    }
    render_table(
        &["GROUP", "NODES", "IN-PROGRESS", "DISRUPTED", "UNAVAILABLE"],
        &rows,
    )
}
