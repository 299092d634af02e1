//! The forecast as a table, a summary and JSON.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{Forecasted, Source};
use crate::duration::GoDuration;
use crate::forecast::{Expected, OccurrenceLoad, Placement, Plan, Rollout, WindowOccurrence};
use crate::tools::{format_time, render_table};

/// A duration as Go prints it (`6m12s`).
pub(super) fn go(d: SignedDuration) -> String {
    GoDuration::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).to_string()
}

fn utc(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn occurrence(o: &WindowOccurrence, zone: &TimeZone) -> String {
    format!("{} {}", o.window, format_time(o.start, zone))
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn source(s: Source, one: &str, many: &str) -> String {
    match s {
        Source::Learned { samples } => format!(
            "learned from {} on the nodes in scope",
            plural(samples, one, many)
        ),
        Source::Given => "given".into(),
    }
}

/// The lines above the tables: the period, the durations and where they come from, and
/// the rollout's completion at both durations.
pub fn summary(f: &Forecasted, zone: &TimeZone) -> String {
    let d = &f.estimate.durations;
    let forecast_nodes = f
        .forecast
        .nodes
        .iter()
        .filter(|n| matches!(n.plan, Plan::Forecast { .. }))
        .count();
    let held = f.forecast.nodes.len() - forecast_nodes;
    let mut s = format!(
        "FORECAST from {} to {}: {} of {} in scope need maintenance or have it now{}\n",
        format_time(f.from, zone),
        format_time(f.forecast.horizon_end, zone),
        f.forecast.nodes.len(),
        plural(f.nodes_in_scope, "node", "nodes"),
        if held > 0 {
            format!(" ({held} held: blocked or unavailable, not forecast)")
        } else {
            String::new()
        },
    );
    s.push_str(&format!(
        "durations: maintenance {} (median), {} (90th percentile), {}; recovery {}, {}, {}\n",
        go(d.maintenance.median),
        go(d.maintenance.p90),
        source(
            f.estimate.maintenance,
            "completed maintenance",
            "completed maintenances"
        ),
        go(d.recovery.median),
        go(d.recovery.p90),
        source(f.estimate.recovery, "recovery", "recoveries"),
    ));
    if let Some(e) = &f.forecast.expected {
        s.push_str(&format!("rollout expected: {}\n", expected(e, zone)));
    }
    for (label, rollout) in [
        ("at the median durations", &f.forecast.median),
        ("at the 90th percentile", &f.forecast.p90),
    ] {
        s.push_str(&format!("rollout {label}: {}\n", completion(rollout, zone)));
    }
    s
}

fn expected(e: &Expected, zone: &TimeZone) -> String {
    let t = |t: Option<Timestamp>| time_or(t, "after the horizon", zone);
    format!(
        "done by {}, by {} at the 90th percentile ({}, each duration drawn from those recorded)",
        t(e.completion),
        t(e.p90),
        plural(e.runs, "run", "runs"),
    )
}

fn completion(r: &Rollout, zone: &TimeZone) -> String {
    let unfit: usize = r.occurrences.first().map_or(0, |o| o.did_not_fit);
    let mut s = match (r.completion, r.no_start) {
        (Some(t), _) => format!("done by {}", format_time(t, zone)),
        (None, 0) => "not done within the horizon (a maintenance ends after it)".into(),
        (None, n) => format!(
            "not done within the horizon: {} start within it",
            plural(n, "node does not", "nodes do not")
        ),
    };
    if let Some(first) = r.occurrences.first().filter(|_| unfit > 0) {
        s.push_str(&format!(
            "; {} not fit in {}",
            plural(unfit, "node does", "nodes do"),
            occurrence(&first.occurrence, zone)
        ));
    }
    s
}

/// The note on a node's row: why it does not start, what carried it, where the 90th
/// percentile differs.
fn note(median: &Placement, p90: &Placement, horizon_end: Timestamp, zone: &TimeZone) -> String {
    let mut notes = Vec::new();
    match median {
        Placement::InProgress { .. } => notes.push("in progress".to_string()),
        Placement::Starts { carried, .. } if *carried > 0 => notes.push(format!(
            "carried over {} where it did not fit",
            plural(*carried, "occurrence", "occurrences")
        )),
        Placement::NoStart { why: Some(why), .. } => notes.push(format!(
            "does not start by {}: {why}",
            format_time(horizon_end, zone)
        )),
        Placement::NoStart { why: None, .. } => {
            notes.push("no window occurrence selects it within the horizon".into())
        }
        Placement::Starts { .. } => {}
    }
    match (median, p90) {
        (Placement::Starts { occurrence: a, .. }, Placement::Starts { occurrence: b, .. })
            if a != b =>
        {
            notes.push(format!(
                "at the 90th percentile it starts in {}",
                occurrence(b, zone)
            ))
        }
        (Placement::Starts { .. }, Placement::NoStart { .. }) => {
            notes.push("at the 90th percentile it does not start within the horizon".into())
        }
        _ => {}
    }
    notes.join("; ")
}

fn time_or(t: Option<Timestamp>, none: &str, zone: &TimeZone) -> String {
    t.map_or_else(|| none.to_string(), |t| format_time(t, zone))
}

/// One row per node in the brain's order, then one per occurrence where a node starts
/// or does not fit.
pub fn table(f: &Forecasted, zone: &TimeZone) -> String {
    let horizon_end = f.forecast.horizon_end;
    let rows: Vec<Vec<String>> = f
        .forecast
        .nodes
        .iter()
        .map(|n| match &n.plan {
            Plan::Held { reason, message } => vec![
                n.name.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                format!("held, {reason}: {message}"),
            ],
            Plan::Forecast { median, p90 } => {
                let occ = match median {
                    Placement::Starts { occurrence: o, .. } => occurrence(o, zone),
                    _ => "-".into(),
                };
                let beyond = if median.start().is_some() {
                    "after the horizon"
                } else {
                    "-"
                };
                let p90_beyond = if p90.start().is_some() {
                    "after the horizon"
                } else {
                    "-"
                };
                vec![
                    n.name.clone(),
                    occ,
                    time_or(median.start(), "-", zone),
                    time_or(median.end(), beyond, zone),
                    time_or(p90.end(), p90_beyond, zone),
                    note(median, p90, horizon_end, zone),
                ]
            }
        })
        .collect();
    let mut s = summary(f, zone);
    s.push('\n');
    s.push_str(&render_table(
        &["NODE", "OCCURRENCE", "START", "END", "END (P90)", "NOTE"],
        &rows,
    ));
    let occurrences = merged_occurrences(&f.forecast.median, &f.forecast.p90);
    if !occurrences.is_empty() {
        let rows: Vec<Vec<String>> = occurrences
            .iter()
            .map(|(o, (m, p))| {
                vec![
                    o.window.to_string(),
                    format_time(o.start, zone),
                    format_time(o.end, zone),
                    m.map_or(0, |l| l.started).to_string(),
                    m.map_or(0, |l| l.did_not_fit).to_string(),
                    p.map_or(0, |l| l.started).to_string(),
                    p.map_or(0, |l| l.did_not_fit).to_string(),
                ]
            })
            .collect();
        s.push_str(
            "\nOCCURRENCES (nodes starting in each, and those it selected that did not fit)\n",
        );
        s.push_str(&render_table(
            &[
                "WINDOW",
                "START",
                "END",
                "STARTS",
                "DO NOT FIT",
                "STARTS (P90)",
                "DO NOT FIT (P90)",
            ],
            &rows,
        ));
    }
    s
}

/// An occurrence's load at the median and at the 90th percentile durations.
type BothLoads<'a> = (Option<&'a OccurrenceLoad>, Option<&'a OccurrenceLoad>);

/// The occurrences of both rollouts by start, each with its load at the median and at
/// the 90th percentile.
fn merged_occurrences<'a>(
    median: &'a Rollout,
    p90: &'a Rollout,
) -> Vec<(&'a WindowOccurrence, BothLoads<'a>)> {
    let mut by: BTreeMap<(Timestamp, &'a WindowOccurrence), BothLoads<'a>> = BTreeMap::new();
    for l in &median.occurrences {
        by.entry((l.occurrence.start, &l.occurrence)).or_default().0 = Some(l);
    }
    for l in &p90.occurrences {
        by.entry((l.occurrence.start, &l.occurrence)).or_default().1 = Some(l);
    }
    by.into_iter().map(|((_, o), loads)| (o, loads)).collect()
}

fn placement_json(p: &Placement) -> Value {
    let t = |t: Option<Timestamp>| t.map(utc);
    match p {
        Placement::InProgress { since, end } => json!({
            "state": "InProgress",
            "start": utc(*since),
            "end": t(*end),
        }),
        Placement::Starts {
            occurrence,
            start,
            end,
            carried,
        } => json!({
            "state": "Starts",
            "occurrence": occurrence_json(occurrence),
            "start": utc(*start),
            "end": t(*end),
            "carried": carried,
        }),
        Placement::NoStart { why, carried } => json!({
            "state": "NoStart",
            "why": why,
            "carried": carried,
        }),
    }
}

fn occurrence_json(o: &WindowOccurrence) -> Value {
    json!({
        "window": o.window.to_string(),
        "start": utc(o.start),
        "end": utc(o.end),
    })
}

fn rollout_json(r: &Rollout) -> Value {
    json!({
        "completion": r.completion.map(utc),
        "noStart": r.no_start,
        "occurrences": r.occurrences.iter().map(|l| json!({
            "window": l.occurrence.window.to_string(),
            "start": utc(l.occurrence.start),
            "end": utc(l.occurrence.end),
            "started": l.started,
            "didNotFit": l.did_not_fit,
        })).collect::<Vec<_>>(),
    })
}

fn duration_json(q: &crate::forecast::Quantiles, s: Source) -> Value {
    let (source, samples) = match s {
        Source::Learned { samples } => ("learned", Some(samples)),
        Source::Given => ("given", None),
    };
    json!({
        "median": go(q.median),
        "p90": go(q.p90),
        "source": source,
        "samples": samples,
    })
}

/// A stable machine-readable form: times in UTC RFC 3339, durations as Go prints them,
/// nodes in the brain's order.
pub fn json(f: &Forecasted) -> Value {
    let d = &f.estimate.durations;
    json!({
        "from": utc(f.from),
        "horizonEnd": utc(f.forecast.horizon_end),
        "nodesInScope": f.nodes_in_scope,
        "durations": {
            "maintenance": duration_json(&d.maintenance, f.estimate.maintenance),
            "recovery": duration_json(&d.recovery, f.estimate.recovery),
        },
        "nodes": f.forecast.nodes.iter().map(|n| match &n.plan {
            Plan::Held { reason, message } => json!({
                "name": n.name,
                "held": {"reason": reason, "message": message},
            }),
            Plan::Forecast { median, p90 } => json!({
                "name": n.name,
                "median": placement_json(median),
                "p90": placement_json(p90),
            }),
        }).collect::<Vec<_>>(),
        "rollout": {
            "median": rollout_json(&f.forecast.median),
            "p90": rollout_json(&f.forecast.p90),
            "expected": f.forecast.expected.map(|e| json!({
                "runs": e.runs,
                "completion": e.completion.map(utc),
                "p90": e.p90.map(utc),
            })),
        },
    })
}
