//! The plan as a table and as JSON.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde_json::{Value, json};

use super::Plan;
use crate::duration::GoDuration;
use crate::tools::{format_time, render_table};
use crate::window::WindowId;

/// Node names shown per table row before `+N more`.
const NAMES_SHOWN: usize = 3;

pub(super) fn ids(ids: &[WindowId]) -> String {
    if ids.is_empty() {
        "-".into()
    } else {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

pub(super) fn truncated_names(names: &[String]) -> String {
    if names.is_empty() {
        return "-".into();
    }
    let mut shown = names
        .iter()
        .take(NAMES_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(",");
    if names.len() > NAMES_SHOWN {
        let _ = write!(shown, " +{} more", names.len() - NAMES_SHOWN);
    }
    shown
}

/// One row per interval; times in `zone`. With a lead time, a last column names the
/// planned nodes.
pub fn table(plan: &Plan, zone: &TimeZone) -> String {
    let rows: Vec<Vec<String>> = plan
        .intervals
        .iter()
        .map(|i| {
            let mut row = vec![
                format_time(i.start, zone),
                format_time(i.end, zone),
                ids(&i.windows),
                ids(&i.blackouts),
                i.nodes.len().to_string(),
                truncated_names(&i.nodes),
            ];
            if plan.lead.is_some() {
                row.push(truncated_names(&i.planned));
            }
            row
        })
        .collect();
    let mut header = vec!["START", "END", "WINDOWS", "BLACKOUTS", "NODES", "NAMES"];
    if plan.lead.is_some() {
        header.push("PLANNED");
    }
    render_table(&header, &rows)
}

fn utc(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A stable machine-readable form: times in UTC RFC 3339, lists sorted. With a lead
/// time, also `plannedLeadTime` and a `planned` array per interval.
pub fn json(plan: &Plan, zone_name: &str) -> Value {
    let id_list = |v: &[WindowId]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
    let mut out = json!({
        "from": utc(plan.from),
        "to": utc(plan.to),
        "timeZone": zone_name,
        "nodes": plan.nodes,
        "windows": plan.lanes.iter().map(|l| json!({
            "id": l.window.id.to_string(),
            "namespace": l.window.id.namespace,
            "name": l.window.id.name,
            "blackout": l.window.blackout,
            "description": l.window.description,
            "startTime": l.window.schedule.spec(),
            "timeZone": l.window.schedule.zone_name(),
            "duration": l.window.duration.to_string(),
            "nodeSelector": l.window.selector.to_string(),
            "nodes": l.nodes,
            "occurrences": l.occurrences.iter()
                .map(|o| json!({"start": utc(o.start), "end": utc(o.end)}))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "intervals": plan.intervals.iter().map(|i| json!({
            "start": utc(i.start),
            "end": utc(i.end),
            "windows": id_list(&i.windows),
            "blackouts": id_list(&i.blackouts),
            "nodes": i.nodes,
            "blackedOutNodes": i.blacked_out,
        })).collect::<Vec<_>>(),
    });
    if let Some(lead) = plan.lead {
        out["plannedLeadTime"] = json!(
            GoDuration::from_nanos(i64::try_from(lead.as_nanos()).unwrap_or(i64::MAX)).to_string()
        );
        let intervals = out["intervals"].as_array_mut().into_iter().flatten();
        for (v, i) in intervals.zip(&plan.intervals) {
            v["planned"] = json!(i.planned);
        }
    }
    out
}
