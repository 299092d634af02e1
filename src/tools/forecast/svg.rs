//! The forecast as a timeline picture (SVG): a lane per window with its occurrences, then
//! a bar per node (its maintenance at the median durations, and how much longer at the
//! 90th percentile), or, for many nodes, a bar per occurrence (from its first start to
//! its last end, with how many nodes start in it and how many do not fit).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::Forecasted;
use crate::forecast::{Placement, Plan, WindowOccurrence};
use crate::tools::format_time;
use crate::tools::svg::{LABEL_WIDTH, RIGHT_MARGIN, SVG_WIDTH, axis, esc};

const TOP: f64 = 80.0;
const ROW: f64 = 18.0;
const AXIS_HEIGHT: f64 = 40.0;
/// More nodes than this are drawn as one bar per occurrence.
pub const MAX_NODE_BARS: usize = 60;
/// Most occurrences of one window drawn.
const MAX_OCCURRENCES_DRAWN: usize = 500;
const WINDOW_COLOUR: &str = "#3b7dd8";
const BLACKOUT_COLOUR: &str = "#c9302c";
const MEDIAN_COLOUR: &str = "#2e8b57";
const P90_COLOUR: &str = "#a8d5ba";
const HELD_COLOUR: &str = "#888";

/// The period drawn: from the forecast's start to the last end it knows (nodes that do
/// not start within the horizon are named, not drawn), or the horizon's end when none
/// is known, with a little room on the right.
fn span(f: &Forecasted) -> (Timestamp, Timestamp) {
    let last = f
        .forecast
        .nodes
        .iter()
        .flat_map(|n| match &n.plan {
            Plan::Forecast { median, p90 } => [median.end(), p90.end()],
            Plan::Held { .. } => [None, None],
        })
        .flatten()
        .max();
    let to = last.unwrap_or(f.forecast.horizon_end).max(f.from);
    let room = SignedDuration::from_secs((to.as_second() - f.from.as_second()).max(1200) / 20);
    (f.from, to.checked_add(room).unwrap_or(to))
}

pub fn svg(f: &Forecasted, zone: &TimeZone, zone_name: &str) -> String {
    let (from, to) = span(f);
    let plot = SVG_WIDTH - LABEL_WIDTH - RIGHT_MARGIN;
    let secs = (to.as_second() - from.as_second()).max(1) as f64;
    let x = |t: Timestamp| {
        let t = t.clamp(from, to);
        LABEL_WIDTH + plot * (t.as_second() - from.as_second()) as f64 / secs
    };
    let per_node = f.forecast.nodes.len() <= MAX_NODE_BARS;
    let rows = if per_node {
        f.forecast.nodes.len()
    } else {
        occurrence_bars(f).len()
    };
    let lanes_bottom = TOP + ROW * f.windows.len() as f64;
    let bars_top = lanes_bottom + 24.0;
    let axis_y = bars_top + ROW * rows as f64 + 6.0;
    let height = axis_y + AXIS_HEIGHT;
    let mut s = String::new();
    let completion = |r: &crate::forecast::Rollout| {
        r.completion
            .map_or("not within the horizon".to_string(), |t| {
                format_time(t, zone)
            })
    };
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{height}" viewBox="0 0 {SVG_WIDTH} {height}" font-family="sans-serif" font-size="12">
<rect x="0" y="0" width="{SVG_WIDTH}" height="{height}" fill="white"/>
<text x="10" y="24" font-size="16" font-weight="bold">kumaco forecast from {}: {} node(s) need maintenance</text>
<text x="10" y="44" fill="#555">done by {} at the median durations ({} maintenance, {} recovery), {} at the 90th percentile; times in {}</text>
<text x="10" y="64" fill="#555">dark: start to end at the median; light: later at the 90th percentile{}</text>"##,
        esc(&format_time(f.from, zone)),
        f.forecast.nodes.len(),
        esc(&completion(&f.forecast.median)),
        super::render::go(f.estimate.durations.maintenance.median),
        super::render::go(f.estimate.durations.recovery.median),
        esc(&completion(&f.forecast.p90)),
        esc(zone_name),
        f.forecast.expected.map_or(String::new(), |e| format!(
            "; the rollout expected done by {} ({} with drawn durations)",
            esc(&e
                .completion
                .map_or("not within the horizon".to_string(), |t| format_time(
                    t, zone
                ))),
            super::render::plural(e.runs, "run", "runs"),
        )),
    );
    for (i, w) in f.windows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let colour = if w.blackout {
            BLACKOUT_COLOUR
        } else {
            WINDOW_COLOUR
        };
        let _ = writeln!(
            s,
            r#"<text x="10" y="{}">{}{}</text>"#,
            y + 13.0,
            esc(&w.id.to_string()),
            if w.blackout { " (blackout)" } else { "" },
        );
        for o in w.occurrences_between(from, to).take(MAX_OCCURRENCES_DRAWN) {
            let (x0, x1) = (x(o.start), x(o.end));
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{colour}" fill-opacity="0.35"><title>{}: {} to {}</title></rect>"#,
                y + 3.0,
                (x1 - x0).max(1.0),
                ROW - 6.0,
                esc(&w.id.to_string()),
                esc(&format_time(o.start, zone)),
                esc(&format_time(o.end, zone)),
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="10" y="{}" font-weight="bold">{}</text>"#,
        bars_top - 8.0,
        if per_node {
            "nodes, in the brain's order"
        } else {
            "occurrences: nodes starting in each"
        },
    );
    if per_node {
        node_bars(&mut s, f, bars_top, &x, zone);
    } else {
        for (i, bar) in occurrence_bars(f).iter().enumerate() {
            let y = bars_top + ROW * i as f64;
            let (x0, x1) = (x(bar.first_start), x(bar.last_end));
            let _ = writeln!(
                s,
                r##"<text x="10" y="{}">{} {}</text>
<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{MEDIAN_COLOUR}"><title>{} node(s) start from {} to {}; {} do not fit</title></rect>
<text x="{:.1}" y="{}" fill="#333">{} node(s){}</text>"##,
                y + 13.0,
                esc(&bar.occurrence.window.to_string()),
                esc(&format_time(bar.occurrence.start, zone)),
                y + 3.0,
                (x1 - x0).max(1.0),
                ROW - 6.0,
                bar.started,
                esc(&format_time(bar.first_start, zone)),
                esc(&format_time(bar.last_end, zone)),
                bar.did_not_fit,
                (x1 + 4.0).min(SVG_WIDTH - RIGHT_MARGIN - 120.0),
                y + 13.0,
                bar.started,
                if bar.did_not_fit > 0 {
                    format!(", {} do not fit", bar.did_not_fit)
                } else {
                    String::new()
                },
            );
        }
    }
    axis(&mut s, from, to, TOP, axis_y, &x, zone, zone_name);
    s.push_str("</svg>\n");
    s
}

fn node_bars(
    s: &mut String,
    f: &Forecasted,
    top: f64,
    x: &impl Fn(Timestamp) -> f64,
    zone: &TimeZone,
) {
    for (i, n) in f.forecast.nodes.iter().enumerate() {
        let y = top + ROW * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="10" y="{}">{}</text>"#,
            y + 13.0,
            esc(&n.name)
        );
        match &n.plan {
            Plan::Held { reason, message } => {
                let _ = writeln!(
                    s,
                    r#"<text x="{LABEL_WIDTH}" y="{}" fill="{HELD_COLOUR}">held, {}<title>{}</title></text>"#,
                    y + 13.0,
                    esc(reason),
                    esc(message),
                );
            }
            Plan::Forecast { median, p90 } => match (median.start(), median.end()) {
                (Some(start), end) => {
                    let end_m = end.unwrap_or(f.forecast.horizon_end);
                    if let Some(end_p) = p90.end().filter(|e| *e > end_m) {
                        let (x0, x1) = (x(end_m), x(end_p));
                        let _ = writeln!(
                            s,
                            r#"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{P90_COLOUR}"><title>{}: ends by {} at the 90th percentile</title></rect>"#,
                            y + 3.0,
                            (x1 - x0).max(1.0),
                            ROW - 6.0,
                            esc(&n.name),
                            esc(&format_time(end_p, zone)),
                        );
                    }
                    let (x0, x1) = (x(start), x(end_m));
                    let what = match median {
                        Placement::InProgress { .. } => "in progress".to_string(),
                        Placement::Starts { occurrence, .. } => occurrence_label(occurrence, zone),
                        Placement::NoStart { .. } => String::new(),
                    };
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{MEDIAN_COLOUR}"><title>{}: {} to {} ({})</title></rect>"#,
                        y + 3.0,
                        (x1 - x0).max(1.0),
                        ROW - 6.0,
                        esc(&n.name),
                        esc(&format_time(start, zone)),
                        esc(&end.map_or("after the horizon".into(), |e| format_time(e, zone))),
                        esc(&what),
                    );
                }
                (None, _) => {
                    let why = match median {
                        Placement::NoStart { why: Some(w), .. } => w.clone(),
                        _ => "no occurrence within the horizon".into(),
                    };
                    let _ = writeln!(
                        s,
                        r#"<text x="{LABEL_WIDTH}" y="{}" fill="{HELD_COLOUR}">does not start within the horizon<title>{}</title></text>"#,
                        y + 13.0,
                        esc(&why),
                    );
                }
            },
        }
    }
}

fn occurrence_label(o: &WindowOccurrence, zone: &TimeZone) -> String {
    format!("in {} from {}", o.window, format_time(o.start, zone))
}

/// An occurrence's bar: the median rollout's nodes starting in it.
struct OccurrenceBar<'a> {
    occurrence: &'a WindowOccurrence,
    first_start: Timestamp,
    last_end: Timestamp,
    started: usize,
    did_not_fit: usize,
}

fn occurrence_bars(f: &Forecasted) -> Vec<OccurrenceBar<'_>> {
    let mut by: BTreeMap<(Timestamp, &WindowOccurrence), OccurrenceBar<'_>> = BTreeMap::new();
    for n in &f.forecast.nodes {
        let Plan::Forecast {
            median:
                Placement::Starts {
                    occurrence,
                    start,
                    end,
                    ..
                },
            ..
        } = &n.plan
        else {
            continue;
        };
        let end = end.unwrap_or(f.forecast.horizon_end);
        let bar = by
            .entry((occurrence.start, occurrence))
            .or_insert(OccurrenceBar {
                occurrence,
                first_start: *start,
                last_end: end,
                started: 0,
                did_not_fit: 0,
            });
        bar.first_start = bar.first_start.min(*start);
        bar.last_end = bar.last_end.max(end);
        bar.started += 1;
    }
    for load in &f.forecast.median.occurrences {
        if let Some(bar) = by.get_mut(&(load.occurrence.start, &load.occurrence)) {
            bar.did_not_fit = load.did_not_fit;
        }
    }
    by.into_values().collect()
}
