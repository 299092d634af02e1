//! `kumaco plan`: which nodes are in maintenance when, over a period, from window
//! manifests and nodes (a file or the live cluster).
//!
//! The period is cut at every window edge (`decision::next_edge`: a start, an end and,
//! with `--planned-lead-time`, the instant a start comes within the lead time); in each
//! interval the set of active windows, and so every node's verdict, is constant.
//! [`compute`] is pure; [`table`], [`json`] and [`svg`] render its result.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use super::{Classified, ToolError, WindowRules, flag_err, format_time, render_table};
use crate::cli::{ClientArgs, PlanArgs, PlanOutput};
use crate::decision::{self, ActiveWindows, Progress};
use crate::duration::GoDuration;
use crate::selector::Selector;
use crate::window::{Occurrence, Window, WindowId};

/// More intervals than anyone reads: a guard against `@every 1s` over a month.
const MAX_EDGES: usize = 20_000;
/// Node names shown per table row before `+N more`.
const NAMES_SHOWN: usize = 3;

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(
        "more than {MAX_EDGES} window edges between {from} and {to}; shorten --for or check for a very frequent schedule"
    )]
    TooManyEdges { from: Timestamp, to: Timestamp },
    #[error("invalid window {0} (run kumaco validate for details)")]
    InvalidWindow(String),
}

/// A node as the plan sees it: only its name and labels matter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

/// A stretch of time during which nothing changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub start: Timestamp,
    pub end: Timestamp,
    /// Active maintenance windows (not blackouts), sorted.
    pub windows: Vec<WindowId>,
    /// Active blackouts, sorted.
    pub blackouts: Vec<WindowId>,
    /// Nodes under maintenance (verdict Maintenance), sorted.
    pub nodes: Vec<String>,
    /// Nodes an active blackout selects, sorted.
    pub blacked_out: Vec<String>,
    /// With a lead time: nodes `MaintenancePlanned` holds (a window starts on them within
    /// the lead time, no blackout covers them at that start, and they are not in
    /// maintenance now), sorted. Always empty without a lead time.
    pub planned: Vec<String>,
}

impl Interval {
    fn same_state(&self, other: &Interval) -> bool {
        (
            &self.windows,
            &self.blackouts,
            &self.nodes,
            &self.blacked_out,
            &self.planned,
        ) == (
            &other.windows,
            &other.blackouts,
            &other.nodes,
            &other.blacked_out,
            &other.planned,
        )
    }
}

/// One window's lane: its occurrences overlapping the period, and the nodes it selects.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub window: Window,
    pub occurrences: Vec<Occurrence>,
    pub nodes: Vec<String>,
}

/// The answer over `[from, to)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub from: Timestamp,
    pub to: Timestamp,
    /// `--planned-lead-time`, when given.
    pub lead: Option<SignedDuration>,
    pub lanes: Vec<Lane>,
    pub nodes: Vec<String>,
    pub intervals: Vec<Interval>,
}

/// The nodes `node_selector` selects, sorted by name.
pub fn in_scope(nodes: &[PlanNode], node_selector: &Selector) -> Vec<PlanNode> {
    let mut out: Vec<PlanNode> = nodes
        .iter()
        .filter(|n| node_selector.matches(&n.labels))
        .cloned()
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Computes the plan over `[from, to)` for `nodes` (already in scope), with the planned
/// nodes when `lead` is given. Adjacent intervals in the same state are merged (an edge
/// that changes nothing, such as an occurrence starting inside an overlapping one, does
/// not split a row).
pub fn compute(
    windows: &[Window],
    nodes: &[PlanNode],
    from: Timestamp,
    to: Timestamp,
    lead: Option<SignedDuration>,
) -> Result<Plan, PlanError> {
    let mut windows: Vec<Window> = windows.to_vec();
    windows.sort_by(|a, b| a.id.cmp(&b.id));
    let mut intervals: Vec<Interval> = Vec::new();
    let mut t = from;
    let mut edges = 0;
    while t < to {
        edges += 1;
        if edges > MAX_EDGES {
            return Err(PlanError::TooManyEdges { from, to });
        }
        let next = decision::next_edge(&windows, t, lead).map_or(to, |e| e.min(to));
        let interval = state_at(&windows, nodes, t, next, lead);
        match intervals.last_mut() {
            Some(last) if last.same_state(&interval) => last.end = next,
            _ => intervals.push(interval),
        }
        t = next;
    }
    let lanes = windows
        .iter()
        .map(|w| lane(w, nodes, from, to))
        .collect::<Result<_, _>>()?;
    Ok(Plan {
        from,
        to,
        lead,
        lanes,
        nodes: nodes.iter().map(|n| n.name.clone()).collect(),
        intervals,
    })
}

fn state_at(
    windows: &[Window],
    nodes: &[PlanNode],
    start: Timestamp,
    end: Timestamp,
    lead: Option<SignedDuration>,
) -> Interval {
    let active = ActiveWindows::with_lead(windows, start, lead);
    let (mut ws, mut bs): (Vec<WindowId>, Vec<WindowId>) = (Vec::new(), Vec::new());
    for (w, _) in active.iter() {
        if w.blackout {
            bs.push(w.id.clone());
        } else {
            ws.push(w.id.clone());
        }
    }
    let mut interval = Interval {
        start,
        end,
        windows: ws,
        blackouts: bs,
        nodes: Vec::new(),
        blacked_out: Vec::new(),
        planned: Vec::new(),
    };
    for node in nodes {
        let verdict = active.verdict(&node.labels);
        if !verdict.blackouts.is_empty() {
            interval.blacked_out.push(node.name.clone());
        } else if verdict.is_maintenance() {
            interval.nodes.push(node.name.clone());
        }
        // The controller's rule without `--in-progress` (a plan knows no slots): a node
        // in maintenance has started, so Planned runs from `start - lead` to the start.
        let progress = if verdict.is_maintenance() {
            Progress::Started
        } else {
            Progress::Idle
        };
        let next = active.next_planned(&node.labels);
        if lead.is_some()
            && decision::planned(next, &verdict, progress, None).is_some_and(|d| d.status)
        {
            interval.planned.push(node.name.clone());
        }
    }
    interval
}

/// The occurrences of `w` overlapping `[from, to)`: starts in `(from - duration, to)`.
fn lane(w: &Window, nodes: &[PlanNode], from: Timestamp, to: Timestamp) -> Result<Lane, PlanError> {
    let length = w.duration.to_signed();
    let mut occurrences = Vec::new();
    let mut cursor = from.checked_sub(length).unwrap_or(Timestamp::MIN);
    while let Some(start) = w.schedule.next_after(cursor).filter(|s| *s < to) {
        if occurrences.len() >= MAX_EDGES {
            return Err(PlanError::TooManyEdges { from, to });
        }
        let end = start.checked_add(length).unwrap_or(Timestamp::MAX);
        occurrences.push(Occurrence { start, end });
        cursor = start;
    }
    Ok(Lane {
        window: w.clone(),
        occurrences,
        nodes: nodes
            .iter()
            .filter(|n| w.selector.matches(&n.labels))
            .map(|n| n.name.clone())
            .collect(),
    })
}

// ---------------------------------------------------------------------------------------
// Rendering

fn ids(ids: &[WindowId]) -> String {
    if ids.is_empty() {
        "-".into()
    } else {
        ids.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn truncated_names(names: &[String]) -> String {
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

// SVG geometry, in pixels.
const SVG_WIDTH: f64 = 1200.0;
const LABEL_WIDTH: f64 = 280.0;
const RIGHT_MARGIN: f64 = 30.0;
const TOP: f64 = 60.0;
const LANE_HEIGHT: f64 = 26.0;
const STRIP_HEIGHT: f64 = 60.0;
const AXIS_HEIGHT: f64 = 50.0;
const WINDOW_COLOUR: &str = "#3b7dd8";
const BLACKOUT_COLOUR: &str = "#c9302c";
const NODES_COLOUR: &str = "#5cb85c";
/// Planned nodes: the maintenance green, lighter and hatched.
const PLANNED_PATTERN: &str = r##"<defs><pattern id="planned" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#d4edd4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#5cb85c" stroke-width="2"/></pattern></defs>"##;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A timeline: one lane per window (blackouts in red), a bar per occurrence, a strip
/// with the number of nodes under maintenance (with a lead time, the planned nodes
/// stacked on top, lighter and hatched), and a time axis labelled in `zone`.
pub fn svg(plan: &Plan, zone: &TimeZone, zone_name: &str) -> String {
    let plot = SVG_WIDTH - LABEL_WIDTH - RIGHT_MARGIN;
    let span = (plan.to.as_second() - plan.from.as_second()).max(1) as f64;
    let x = |t: Timestamp| {
        let t = t.clamp(plan.from, plan.to);
        LABEL_WIDTH + plot * (t.as_second() - plan.from.as_second()) as f64 / span
    };
    let lanes_bottom = TOP + LANE_HEIGHT * plan.lanes.len() as f64;
    let strip_top = lanes_bottom + 10.0;
    let axis_y = strip_top + STRIP_HEIGHT;
    let height = axis_y + AXIS_HEIGHT;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{height}" viewBox="0 0 {SVG_WIDTH} {height}" font-family="sans-serif" font-size="12">
<rect x="0" y="0" width="{SVG_WIDTH}" height="{height}" fill="white"/>
<text x="10" y="24" font-size="16" font-weight="bold">kumaco plan: {} to {} ({})</text>
<text x="10" y="44" fill="#555">{} window(s), {} node(s) in scope; times in {}</text>"##,
        esc(&format_time(plan.from, zone)),
        esc(&format_time(plan.to, zone)),
        esc(zone_name),
        plan.lanes.len(),
        plan.nodes.len(),
        esc(zone_name),
    );
    for (i, lane) in plan.lanes.iter().enumerate() {
        let y = TOP + LANE_HEIGHT * i as f64;
        svg_lane(&mut s, lane, y, i % 2 == 0, &x, zone);
    }
    svg_node_strip(&mut s, plan, strip_top, &x, zone);
    svg_axis(&mut s, plan, axis_y, &x, zone, zone_name);
    s.push_str("</svg>\n");
    s
}

fn svg_lane(
    s: &mut String,
    lane: &Lane,
    y: f64,
    shaded: bool,
    x: &impl Fn(Timestamp) -> f64,
    zone: &TimeZone,
) {
    let w = &lane.window;
    let (colour, tag) = if w.blackout {
        (BLACKOUT_COLOUR, " (blackout)")
    } else {
        (WINDOW_COLOUR, "")
    };
    let _ = writeln!(
        s,
        r##"<rect x="{LABEL_WIDTH}" y="{y}" width="{}" height="{LANE_HEIGHT}" fill="{}"/>
<text x="10" y="{}">{}{tag}</text>"##,
        SVG_WIDTH - LABEL_WIDTH - RIGHT_MARGIN,
        if shaded { "#f4f6f8" } else { "#ffffff" },
        y + 17.0,
        esc(&w.id.to_string()),
    );
    for o in &lane.occurrences {
        let (x0, x1) = (x(o.start), x(o.end));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{colour}" fill-opacity="0.8"><title>{}: {} to {}, {} node(s)</title></rect>"#,
            y + 5.0,
            (x1 - x0).max(1.0),
            LANE_HEIGHT - 10.0,
            esc(&w.id.to_string()),
            esc(&format_time(o.start, zone)),
            esc(&format_time(o.end, zone)),
            lane.nodes.len(),
        );
    }
}

fn svg_node_strip(
    s: &mut String,
    plan: &Plan,
    top: f64,
    x: &impl Fn(Timestamp) -> f64,
    zone: &TimeZone,
) {
    let max = plan
        .intervals
        .iter()
        .map(|i| i.nodes.len() + i.planned.len())
        .max()
        .unwrap_or(0);
    let label_y = top + STRIP_HEIGHT / 2.0 + 4.0;
    if plan.lead.is_some() {
        s.push_str(PLANNED_PATTERN);
        s.push('\n');
        let _ = writeln!(
            s,
            r##"<text x="10" y="{}">nodes in maintenance (max {max})</text>
<text x="10" y="{}" fill="#555">hatched: planned</text>"##,
            label_y - 7.0,
            label_y + 9.0,
        );
    } else {
        let _ = writeln!(
            s,
            r#"<text x="10" y="{label_y}">nodes in maintenance (max {max})</text>"#
        );
    }
    let bar = |s: &mut String, i: &Interval, below: usize, names: &[String], fill: &str, what| {
        let h = (STRIP_HEIGHT - 8.0) * names.len() as f64 / max as f64;
        let base = (STRIP_HEIGHT - 8.0) * below as f64 / max as f64;
        let (x0, x1) = (x(i.start), x(i.end));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{fill}"><title>{} to {}: {} node(s){what}: {}</title></rect>"#,
            top + STRIP_HEIGHT - base - h,
            (x1 - x0).max(1.0),
            esc(&format_time(i.start, zone)),
            esc(&format_time(i.end, zone)),
            names.len(),
            esc(&names.join(", ")),
        );
    };
    for i in &plan.intervals {
        if !i.nodes.is_empty() {
            bar(s, i, 0, &i.nodes, NODES_COLOUR, "");
        }
        if !i.planned.is_empty() {
            bar(s, i, i.nodes.len(), &i.planned, "url(#planned)", " planned");
        }
    }
}

/// Tick spacing: the smallest of these giving at most about 10 ticks over the period.
const TICK_HOURS: [i64; 9] = [1, 2, 3, 6, 12, 24, 48, 168, 720];

fn svg_axis(
    s: &mut String,
    plan: &Plan,
    y: f64,
    x: &impl Fn(Timestamp) -> f64,
    zone: &TimeZone,
    zone_name: &str,
) {
    let _ = writeln!(
        s,
        r##"<line x1="{LABEL_WIDTH}" y1="{y}" x2="{}" y2="{y}" stroke="#333"/>
<text x="10" y="{}">time ({})</text>"##,
        SVG_WIDTH - RIGHT_MARGIN,
        y + 16.0,
        esc(zone_name)
    );
    let hours = (plan.to.as_second() - plan.from.as_second()) / 3600;
    let step = TICK_HOURS
        .iter()
        .copied()
        .find(|h| hours / h <= 10)
        .unwrap_or(8760);
    for t in ticks(plan.from, plan.to, step, zone) {
        let label = if step >= 24 {
            t.to_zoned(zone.clone()).strftime("%a %m-%d").to_string()
        } else {
            t.to_zoned(zone.clone()).strftime("%m-%d %H:%M").to_string()
        };
        let xt = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xt:.1}" y1="{}" x2="{xt:.1}" y2="{}" stroke="#bbb" stroke-dasharray="2,3"/>
<text x="{xt:.1}" y="{}" text-anchor="middle">{}</text>"##,
            TOP,
            y + 4.0,
            y + 18.0,
            esc(&label)
        );
    }
}

/// Tick instants in `[from, to]`, on local boundaries of `zone`: midnights for day
/// steps, whole hours divisible by the step otherwise (so ticks read 00:00, 06:00, ...).
fn ticks(from: Timestamp, to: Timestamp, step_hours: i64, zone: &TimeZone) -> Vec<Timestamp> {
    let Ok(mut day) = from.to_zoned(zone.clone()).start_of_day() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while day.timestamp() <= to && out.len() < 200 {
        if step_hours >= 24 {
            if day.timestamp() >= from {
                out.push(day.timestamp());
            }
            let Ok(next) = day.checked_add((step_hours / 24).days()) else {
                break;
            };
            day = next;
        } else {
            for h in (0..24).step_by(step_hours as usize) {
                let t = day.with().hour(h as i8).build().map(|z| z.timestamp()).ok();
                if let Some(t) = t.filter(|t| *t >= from && *t <= to) {
                    out.push(t);
                }
            }
            let Ok(next) = day.tomorrow() else { break };
            day = next;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// I/O

/// Runs `kumaco plan`, writing the chosen output.
pub async fn run(args: &PlanArgs, out: &mut impl std::io::Write) -> Result<(), ToolError> {
    let rules = WindowRules::from_args(&args.window_args)?;
    let node_selector = super::node_selector(&args.node_selector)?;
    let from = super::parse_time("from", args.from.as_deref())?;
    let length = super::parse_period("for", &args.for_)?;
    let to = from
        .checked_add(length)
        .map_err(|_| flag_err("for", "the period ends too far in the future"))?;
    let lead = args
        .planned_lead_time
        .as_deref()
        .map(parse_lead)
        .transpose()?;
    let windows = read_windows(&args.windows, &rules)?;
    let nodes = match &args.nodes {
        Some(path) => nodes_from_file(path)?,
        None => nodes_from_cluster(&args.client, &args.node_selector).await?,
    };
    let nodes = in_scope(&nodes, &node_selector);
    let plan = compute(&windows, &nodes, from, to, lead)?;
    let zone_name = zone_display_name(&rules.default_zone);
    let text = match args.output {
        PlanOutput::Table => table(&plan, &rules.default_zone),
        PlanOutput::Json => {
            let mut s = serde_json::to_string_pretty(&json(&plan, &zone_name)).unwrap_or_default();
            s.push('\n');
            s
        }
        PlanOutput::Svg => svg(&plan, &rules.default_zone, &zone_name),
    };
    out.write_all(text.as_bytes()).map_err(ToolError::Write)
}

/// `--planned-lead-time`: a Go duration above 0, as `kumaco run` takes it.
fn parse_lead(value: &str) -> Result<SignedDuration, ToolError> {
    let lead = crate::duration::parse(value)
        .map_err(|e| flag_err("planned-lead-time", e))?
        .to_signed();
    if !lead.is_positive() {
        return Err(flag_err(
            "planned-lead-time",
            format!("{value:?} is not above 0; expected a Go duration such as 1h or 90m"),
        ));
    }
    Ok(lead)
}

fn zone_display_name(zone: &TimeZone) -> String {
    zone.iana_name().unwrap_or("UTC").to_string()
}

/// The valid windows in the files; an invalid one is an error (a plan that silently
/// left out a window would be wrong), other objects are ignored.
fn read_windows(paths: &[PathBuf], rules: &WindowRules) -> Result<Vec<Window>, ToolError> {
    let mut windows = Vec::new();
    for path in paths {
        for doc in super::read_documents(path)? {
            match rules.classify(&doc) {
                Classified::Window(w) if w.is_ok() => windows.extend(*w),
                Classified::Window(_) | Classified::Malformed(_) => {
                    return Err(PlanError::InvalidWindow(format!(
                        "{}: {}",
                        doc.source,
                        doc.object_ref()
                    ))
                    .into());
                }
                Classified::Skipped(_) => {}
            }
        }
    }
    Ok(windows)
}

/// Nodes from a NodeList or multi-document Nodes, YAML or JSON.
fn nodes_from_file(path: &Path) -> Result<Vec<PlanNode>, ToolError> {
    let mut nodes = Vec::new();
    for doc in super::read_documents(path)? {
        if doc.kind() != "Node" {
            continue;
        }
        let node: Node =
            serde_json::from_value(doc.object.clone()).map_err(|e| ToolError::Manifest {
                path: doc.source.clone(),
                message: format!("{}: not a valid Node: {e}", doc.object_ref()),
            })?;
        nodes.push(plan_node(node));
    }
    Ok(nodes)
}

async fn nodes_from_cluster(
    client: &ClientArgs,
    node_selector: &str,
) -> Result<Vec<PlanNode>, ToolError> {
    let connection = crate::kubeclient::connect(client).await?;
    let list = Api::<Node>::all(connection.client)
        .list(&ListParams::default().labels(node_selector))
        .await
        .map_err(|error| {
            let hint = if crate::kubeclient::is_forbidden(&error) {
                ". kumaco plan needs `list nodes` (cluster-wide) to read the nodes from the \
                 cluster: ask your cluster admin for it, or give the nodes as a file with \
                 --nodes (`kubectl get nodes -o yaml > nodes.yaml` by someone who may)"
            } else {
                ""
            };
            ToolError::Api {
                action: "list nodes".into(),
                server: connection.server.clone(),
                error: Box::new(error),
                hint: hint.into(),
            }
        })?;
    Ok(list.items.into_iter().map(plan_node).collect())
}

pub(crate) fn plan_node(node: Node) -> PlanNode {
    PlanNode {
        name: node.metadata.name.unwrap_or_default(),
        labels: node.metadata.labels.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::test_window as window;

    fn node(name: &str, zone: &str) -> PlanNode {
        PlanNode {
            name: name.into(),
            labels: [("zone".to_string(), zone.to_string())].into(),
        }
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// (start, end, windows, blackouts, nodes) per interval, as strings.
    fn rows(plan: &Plan) -> Vec<(String, String, String, String, String)> {
        plan.intervals
            .iter()
            .map(|i| {
                (
                    i.start.to_string(),
                    i.end.to_string(),
                    ids(&i.windows),
                    ids(&i.blackouts),
                    i.nodes.join(","),
                )
            })
            .collect()
    }

    fn row(
        s: &str,
        e: &str,
        w: &str,
        b: &str,
        n: &str,
    ) -> (String, String, String, String, String) {
        (s.into(), e.into(), w.into(), b.into(), n.into())
    }

    #[test]
    fn overlapping_windows_and_a_blackout() {
        let windows = [
            window("a", "0 2 * * *", "2h", "zone=a", false),
            window("all", "0 3 * * *", "2h", "", false),
            // Friday 2026-01-02 is frozen for zone a.
            window("freeze", "2026-01-02T00:00:00Z", "24h", "zone=a", true),
        ];
        let nodes = [node("a1", "a"), node("b1", "b")];
        let plan = compute(
            &windows,
            &nodes,
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-02T06:00:00Z"),
            None,
        )
        .unwrap();
        assert_eq!(
            rows(&plan),
            [
                row("2026-01-01T00:00:00Z", "2026-01-01T02:00:00Z", "-", "-", ""),
                row(
                    "2026-01-01T02:00:00Z",
                    "2026-01-01T03:00:00Z",
                    "ops/a",
                    "-",
                    "a1"
                ),
                row(
                    "2026-01-01T03:00:00Z",
                    "2026-01-01T04:00:00Z",
                    "ops/a,ops/all",
                    "-",
                    "a1,b1"
                ),
                row(
                    "2026-01-01T04:00:00Z",
                    "2026-01-01T05:00:00Z",
                    "ops/all",
                    "-",
                    "a1,b1"
                ),
                row("2026-01-01T05:00:00Z", "2026-01-02T00:00:00Z", "-", "-", ""),
                row(
                    "2026-01-02T00:00:00Z",
                    "2026-01-02T02:00:00Z",
                    "-",
                    "ops/freeze",
                    ""
                ),
                // "a" is active but selects only a1, which the blackout holds back.
                row(
                    "2026-01-02T02:00:00Z",
                    "2026-01-02T03:00:00Z",
                    "ops/a",
                    "ops/freeze",
                    ""
                ),
                row(
                    "2026-01-02T03:00:00Z",
                    "2026-01-02T04:00:00Z",
                    "ops/a,ops/all",
                    "ops/freeze",
                    "b1"
                ),
                row(
                    "2026-01-02T04:00:00Z",
                    "2026-01-02T05:00:00Z",
                    "ops/all",
                    "ops/freeze",
                    "b1"
                ),
                row(
                    "2026-01-02T05:00:00Z",
                    "2026-01-02T06:00:00Z",
                    "-",
                    "ops/freeze",
                    ""
                ),
            ]
        );
        // Zone a is blacked out the whole second day, including during "a" (02:00-04:00).
        assert!(plan.intervals[5..].iter().all(|i| i.blacked_out == ["a1"]));
        assert_eq!(plan.lanes[0].occurrences.len(), 2);
        assert_eq!(plan.lanes[2].nodes, ["a1"]);
    }

    #[test]
    fn self_overlapping_occurrences_make_one_interval() {
        // Every hour for 90 minutes: always active once started.
        let windows = [window("w", "0 * * * *", "90m", "", false)];
        let plan = compute(
            &windows,
            &[node("n", "a")],
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T05:00:00Z"),
            None,
        )
        .unwrap();
        assert_eq!(
            rows(&plan),
            [row(
                "2026-01-01T00:00:00Z",
                "2026-01-01T05:00:00Z",
                "ops/w",
                "-",
                "n"
            )]
        );
        // The occurrence that started at 23:00 the day before overlaps the period.
        assert_eq!(
            plan.lanes[0].occurrences[0].start,
            ts("2025-12-31T23:00:00Z")
        );
        assert_eq!(plan.lanes[0].occurrences.len(), 6);
    }

    #[test]
    fn a_period_inside_an_occurrence_starts_active_and_ends_at_to() {
        let windows = [window("w", "0 0 * * *", "24h", "zone=a", false)];
        let plan = compute(
            &windows,
            &[node("a1", "a")],
            ts("2026-01-01T12:00:00Z"),
            ts("2026-01-01T13:00:00Z"),
            None,
        )
        .unwrap();
        assert_eq!(
            rows(&plan),
            [row(
                "2026-01-01T12:00:00Z",
                "2026-01-01T13:00:00Z",
                "ops/w",
                "-",
                "a1"
            )]
        );
    }

    fn planned_rows(plan: &Plan) -> Vec<(String, String, String, String)> {
        plan.intervals
            .iter()
            .map(|i| {
                (
                    i.start.to_string(),
                    i.end.to_string(),
                    i.nodes.join(","),
                    i.planned.join(","),
                )
            })
            .collect()
    }

    fn prow(s: &str, e: &str, n: &str, p: &str) -> (String, String, String, String) {
        (s.into(), e.into(), n.into(), p.into())
    }

    #[test]
    fn planned_from_the_lead_time_until_the_start_and_never_under_a_blackout() {
        let windows = [
            window("a", "0 2 * * *", "2h", "zone=a", false),
            // Covers zone b at 02:00 on the 1st (the start), not at 02:00 on the 2nd.
            window("freeze", "2026-01-01T01:00:00Z", "2h", "zone=b", true),
            window("all", "0 2 * * *", "1h", "", false),
        ];
        let nodes = [node("a1", "a"), node("b1", "b")];
        let lead = Some(SignedDuration::from_mins(90));
        let plan = compute(
            &windows,
            &nodes,
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-02T03:00:00Z"),
            lead,
        )
        .unwrap();
        assert_eq!(
            planned_rows(&plan),
            [
                prow("2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z", "", ""),
                // The lead-time edge: 02:00 - 90m. b1 is not planned: the freeze covers
                // it at the start (though not yet now).
                prow("2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z", "", "a1"),
                prow("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "", "a1"),
                // Nothing after the start: a1 is in maintenance, b1 held back.
                prow("2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z", "a1", ""),
                prow("2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z", "a1", ""),
                prow("2026-01-01T04:00:00Z", "2026-01-02T00:30:00Z", "", ""),
                prow("2026-01-02T00:30:00Z", "2026-01-02T02:00:00Z", "", "a1,b1"),
                prow("2026-01-02T02:00:00Z", "2026-01-02T03:00:00Z", "a1,b1", ""),
            ]
        );
        // From 01:00 the freeze is active: b1 is blacked out (and still not planned).
        assert_eq!(plan.intervals[2].blacked_out, ["b1"]);
        // Without a lead time nothing is planned and the lead-time edges do not split.
        let plain = compute(
            &windows,
            &nodes,
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-02T03:00:00Z"),
            None,
        )
        .unwrap();
        assert!(plain.intervals.iter().all(|i| i.planned.is_empty()));
        assert!(
            plain
                .intervals
                .iter()
                .all(|i| i.start.strftime("%M").to_string() == "00")
        );
    }

    #[test]
    fn planned_is_shown_in_every_output() {
        let windows = [window("a", "0 2 * * *", "1h", "zone=a", false)];
        let plan_with = |lead| {
            compute(
                &windows,
                &[node("a1", "a")],
                ts("2026-01-01T00:00:00Z"),
                ts("2026-01-01T03:00:00Z"),
                lead,
            )
            .unwrap()
        };
        let plan = plan_with(Some(SignedDuration::from_hours(1)));
        let t = table(&plan, &TimeZone::UTC);
        assert!(t.lines().next().unwrap().ends_with("   PLANNED"), "{t}");
        assert!(
            t.lines()
                .nth(2)
                .unwrap()
                .starts_with("2026-01-01T01:00:00Z   2026-01-01T02:00:00Z")
                && t.lines().nth(2).unwrap().ends_with("   a1"),
            "{t}"
        );
        let j = json(&plan, "UTC");
        assert_eq!(j["plannedLeadTime"], "1h0m0s");
        assert_eq!(j["intervals"][1]["planned"], serde_json::json!(["a1"]));
        assert_eq!(j["intervals"][2]["planned"], serde_json::json!([]));
        let picture = svg(&plan, &TimeZone::UTC, "UTC");
        assert!(picture.contains(r#"fill="url(#planned)"><title>2026-01-01T01:00:00Z to 2026-01-01T02:00:00Z: 1 node(s) planned: a1</title>"#), "{picture}");
        // Without a lead time, none of it.
        let plan = plan_with(None);
        assert!(!table(&plan, &TimeZone::UTC).contains("PLANNED"));
        assert!(json(&plan, "UTC").get("plannedLeadTime").is_none());
        assert!(json(&plan, "UTC")["intervals"][0].get("planned").is_none());
        assert!(!svg(&plan, &TimeZone::UTC, "UTC").contains("planned"));
    }

    #[test]
    fn the_lead_time_must_be_a_positive_go_duration() {
        assert_eq!(parse_lead("90m").unwrap(), SignedDuration::from_mins(90));
        for bad in ["0s", "-1h", "1d", ""] {
            let err = parse_lead(bad).unwrap_err();
            assert!(
                err.to_string().starts_with("--planned-lead-time: "),
                "{err}"
            );
            assert_eq!(err.exit_code(), 2);
        }
    }

    #[test]
    fn very_frequent_schedules_are_refused() {
        let windows = [window("w", "@every 1s", "500ms", "", false)];
        let err = compute(
            &windows,
            &[],
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-02T00:00:00Z"),
            None,
        )
        .unwrap_err();
        assert!(matches!(err, PlanError::TooManyEdges { .. }), "{err}");
    }

    #[test]
    fn names_are_truncated() {
        let names: Vec<String> = (1..=5).map(|i| format!("n{i}")).collect();
        assert_eq!(truncated_names(&names), "n1,n2,n3 +2 more");
        assert_eq!(truncated_names(&[]), "-");
    }

    #[test]
    fn day_ticks_fall_on_local_midnight() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        let t = ticks(
            ts("2026-01-01T12:00:00Z"),
            ts("2026-01-03T12:00:00Z"),
            24,
            &zone,
        );
        assert_eq!(t, [ts("2026-01-01T23:00:00Z"), ts("2026-01-02T23:00:00Z")]);
    }
}
