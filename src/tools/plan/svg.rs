//! The plan as a timeline picture (SVG): a lane per window, a strip of the nodes in
//! maintenance, an axis in the chosen zone.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::{Interval, Lane, Plan};
use crate::tools::format_time;
use crate::tools::svg::{LABEL_WIDTH, RIGHT_MARGIN, SVG_WIDTH, axis, esc};

// SVG geometry, in pixels (the frame's in `tools::svg`).
const TOP: f64 = 60.0;
const LANE_HEIGHT: f64 = 26.0;
const STRIP_HEIGHT: f64 = 60.0;
const AXIS_HEIGHT: f64 = 50.0;
const WINDOW_COLOUR: &str = "#3b7dd8";
const BLACKOUT_COLOUR: &str = "#c9302c";
const NODES_COLOUR: &str = "#5cb85c";
/// Planned nodes: the maintenance green, lighter and hatched.
const PLANNED_PATTERN: &str = r##"<defs><pattern id="planned" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#d4edd4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#5cb85c" stroke-width="2"/></pattern></defs>"##;

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
    axis(&mut s, plan.from, plan.to, TOP, axis_y, &x, zone, zone_name);
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
