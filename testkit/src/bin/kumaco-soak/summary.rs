//! The summary over the samples (writes, memory and its slope, CPU, reboots and waits),
//! the checks that fail the run, and its table.

use crate::sampling::{Sample, Sampled};
use crate::{Args, STEADY_AFTER, UNDER_MAINTENANCE};
use serde_json::{Value, json};
use testkit::agent::MAINTENANCE_IN_PROGRESS;
use testkit::churn::PacedCounts;
use testkit::fleet::{self, LogLevels, load_average};
use testkit::kumaco::metric;
use testkit::reporter::SourceState;

pub(crate) struct SummaryInput<'a> {
    pub(crate) args: &'a Args,
    pub(crate) ceiling: usize,
    pub(crate) sampled: &'a Sampled,
    pub(crate) logs: LogLevels,
    pub(crate) log_path: &'a std::path::Path,
    pub(crate) observed_max: usize,
    pub(crate) observer_relists: usize,
    pub(crate) source: &'a SourceState,
    pub(crate) churn: Option<&'a PacedCounts>,
    pub(crate) ready_secs: f64,
    pub(crate) load_start: String,
}

pub(crate) fn summarize(input: &SummaryInput) -> Value {
    let samples = &input.sampled.samples;
    let last = samples.last().expect("at least one sample");
    let minutes = last.t / 60.0;
    // The steady state: from the first sample after the first minute to the last.
    let steady = samples
        .iter()
        .find(|s| s.t >= STEADY_AFTER.as_secs_f64())
        .filter(|s| last.t > s.t);
    let per_minute =
        |f: fn(&Sample) -> f64| steady.map(|s| (f(last) - f(s)) / ((last.t - s.t) / 60.0));
    // null in the summary if kumaco's last metrics did not say.
    let transitions_of = |condition: &str, status: &str| {
        metric(
            &input.sampled.kumaco_metrics,
            "kumaco_transitions_total",
            &[("condition", condition), ("status", status)],
        )
        .ok()
        .map(|n| n as u64)
    };
    let mut waits = input.source.waits.clone();
    waits.sort_by(f64::total_cmp);
    json!({
        "nodes": input.args.nodes,
        "max_in_progress": input.args.max_in_progress,
        "kumaco": input.args.kumaco,
        "minutes_planned": input.args.minutes,
        "minutes_run": minutes,
        "interrupted": input.sampled.interrupted,
        "sample_secs": input.args.sample_secs,
        "samples": samples.len(),
        "sample_failures": input.sampled.failures,
        "load_average_start": input.load_start,
        "load_average_end": load_average(),
        "ready_seconds": input.ready_secs,
        "writes": {
            "applies": last.applies,
            "applies_failed": last.applies_failed,
            "kumaco_writes": last.kumaco_writes,
            "transitions": last.transitions,
            "transitions_by": {
                "UnderMaintenance=True": transitions_of(UNDER_MAINTENANCE, "True"),
                "UnderMaintenance=False": transitions_of(UNDER_MAINTENANCE, "False"),
                "MaintenanceInProgress=True": transitions_of(MAINTENANCE_IN_PROGRESS, "True"),
                "MaintenanceInProgress=False": transitions_of(MAINTENANCE_IN_PROGRESS, "False"),
            },
            "applies_per_minute": last.applies as f64 / minutes,
            "applies_per_minute_steady": per_minute(|s| s.applies as f64),
            "transitions_per_minute_steady": per_minute(|s| s.transitions as f64),
            "helper_patches": last.helper_patches,
        },
        "memory_mib": {
            "rss_steady_start": steady.map(|s| s.rss_mib),
            "rss_end": last.rss_mib,
            "peak": last.hwm_mib,
            "rss_slope_second_half_per_hour": rss_slope(samples),
        },
        "cpu_seconds": {
            "total": last.cpu_seconds,
            "per_minute": last.cpu_seconds / minutes,
            "per_minute_steady": per_minute(|s| s.cpu_seconds),
        },
        "errors": {
            "kumaco_write_errors": last.write_errors,
            "log_warn": input.logs.warn,
            "log_error": input.logs.error,
            "log_first": input.logs.first,
            "reporter_errors": input.source.errors,
            "observer_relists": input.observer_relists,
        },
        // As of the end, not the last sample: marks done since it are waiting.
        "reboots": {
            "marked": input.source.marks,
            "done": input.source.reboots_seen,
            "waiting_at_end": input.source.waiting.len(),
            "wait_seconds": {
                "p50": fleet::percentile(&waits, 0.50),
                "p99": fleet::percentile(&waits, 0.99),
                "max": waits.last(),
            },
        },
        "in_progress": {
            "ceiling": input.ceiling,
            "max_observed": input.observed_max,
            "within_ceiling": input.observed_max <= input.ceiling,
        },
        "churn": input.churn.map(|c| json!({
            "rate_per_second": input.args.churn_rate,
            "changes": c,
        })),
        "kumaco_alive": input.sampled.died.is_none(),
        "kumaco_log": input.log_path,
    })
}

/// The least-squares slope of RSS over the second half of the run, in MiB per hour: the
/// first half holds the startup and the reboot backlog filling up; a leak climbs on.
pub(crate) fn rss_slope(samples: &[Sample]) -> Option<f64> {
    let half = samples.last()?.t / 2.0;
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t >= half)
        .map(|s| (s.t / 3600.0, s.rss_mib))
        .collect();
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    Some(sxy / sxx)
}

pub(crate) fn print_summary(s: &Value) {
    // Figures the run was too short for are null: shown as "-".
    let num = |v: &Value, decimals: usize| match v.as_f64() {
        Some(x) => format!("{x:.decimals$}"),
        None => "-".into(),
    };
    let row = |name: &str, value: String, expected: &str| {
        println!("{name:<40} {value:>32}  {expected}");
    };
    let (w, m, c, e, r) = (
        &s["writes"],
        &s["memory_mib"],
        &s["cpu_seconds"],
        &s["errors"],
        &s["reboots"],
    );
    let (by, waits, p) = (&w["transitions_by"], &r["wait_seconds"], &s["in_progress"]);
    println!();
    row("summary", String::new(), "expected");
    let interrupted = if s["interrupted"] == true {
        ", interrupted"
    } else {
        ""
    };
    let run = format!(
        "{} of {} min",
        num(&s["minutes_run"], 1),
        s["minutes_planned"]
    );
    row(
        "run",
        format!("{run}, {} samples{interrupted}", s["samples"]),
        "",
    );
    row("nodes", s["nodes"].to_string(), "");
    let load = |k: &str| s[k].as_str().unwrap_or("?").to_string();
    let loads = format!(
        "{} / {}",
        load("load_average_start"),
        load("load_average_end")
    );
    row("load average start / end", loads, "");
    let applies = format!("{} ({} failed)", w["applies"], w["applies_failed"]);
    row(
        "nodes/status applies (API server)",
        applies,
        "= kumaco's writes",
    );
    row(
        "kumaco's condition writes",
        w["kumaco_writes"].to_string(),
        "",
    );
    row("transitions", w["transitions"].to_string(), "");
    let pair = |a: &str, b: &str| format!("{} / {}", by[a], by[b]);
    let um = pair("UnderMaintenance=True", "UnderMaintenance=False");
    row("  UnderMaintenance True / False", um, "");
    let mip = pair("MaintenanceInProgress=True", "MaintenanceInProgress=False");
    row("  MaintenanceInProgress True / False", mip, "");
    let per_minute = format!(
        "{} / {}",
        num(&w["applies_per_minute"], 0),
        num(&w["applies_per_minute_steady"], 0)
    );
    row("applies per minute (all / steady)", per_minute, "");
    let transitions = num(&w["transitions_per_minute_steady"], 0);
    row("transitions per minute (steady)", transitions, "");
    let rss = format!(
        "{} / {} / {} MiB",
        num(&m["rss_steady_start"], 1),
        num(&m["rss_end"], 1),
        num(&m["peak"], 1)
    );
    row("RSS steady start / end / peak", rss, "");
    let slope = format!("{} MiB/h", num(&m["rss_slope_second_half_per_hour"], 1));
    row("RSS slope over the second half", slope, "≈ 0");
    let cpu = format!(
        "{} s / {} s",
        num(&c["total"], 1),
        num(&c["per_minute_steady"], 2)
    );
    row("CPU total / per minute (steady)", cpu, "");
    row(
        "kumaco write errors",
        e["kumaco_write_errors"].to_string(),
        "0",
    );
    let logs = format!("{} / {}", e["log_warn"], e["log_error"]);
    row("kumaco log WARN / ERROR", logs, "0 / 0");
    let harness = format!(
        "{} / {} / {}",
        e["reporter_errors"], e["observer_relists"], s["sample_failures"]
    );
    row(
        "reporter errors / re-lists / bad samples",
        harness,
        "0 / 0 / 0",
    );
    let reboots = format!("{} / {} / {}", r["marked"], r["done"], r["waiting_at_end"]);
    row("reboots marked / done / waiting", reboots, "");
    let wait = format!(
        "{} / {} / {} s",
        num(&waits["p50"], 0),
        num(&waits["p99"], 0),
        num(&waits["max"], 0)
    );
    row("wait for a reboot p50 / p99 / max", wait, "");
    let most = format!("{} (ceiling {})", p["max_observed"], p["ceiling"]);
    row("most in progress at once (watch)", most, "≤ ceiling");
    if let Some(churn) = s["churn"].as_object() {
        let c = &churn["changes"];
        let changes = format!(
            "{} / {} ({} failed)",
            c["accepted"], c["planned"], c["failed"]
        );
        row(
            &format!(
                "churn {}/s: changes accepted / planned",
                churn["rate_per_second"]
            ),
            changes,
            "all",
        );
    }
    row(
        "kumaco alive at the last sample",
        s["kumaco_alive"].to_string(),
        "true",
    );
    for line in e["log_first"].as_array().into_iter().flatten() {
        println!("  log: {}", line.as_str().unwrap_or_default());
    }
}
