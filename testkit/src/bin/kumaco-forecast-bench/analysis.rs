//! A measured rollout against its forecast: the errors per node and on the completion, and
//! which nodes fit.

use std::collections::BTreeMap;

use crate::args::parse_duration;
use crate::recorder::{Real, Seen, What};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use testkit::fleet::{ZONES, percentile};
use testkit::kured::Draws;

pub(crate) struct Measured {
    /// The window ConfigMap's name, and its duration.
    pub(crate) name: String,
    pub(crate) window: String,
    pub(crate) start: Timestamp,
    pub(crate) end: Timestamp,
    pub(crate) taken: Timestamp,
    pub(crate) plan_seconds: f64,
    pub(crate) forecast: Value,
    pub(crate) reals: BTreeMap<String, Real>,
    pub(crate) events: Vec<Seen>,
    pub(crate) reboots: BTreeMap<String, usize>,
}

pub(crate) fn stats(values: &[f64]) -> Value {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    json!({
        "n": v.len(),
        "median": percentile(&v, 0.5),
        "p90": percentile(&v, 0.9),
        "mean": mean,
        "min": v.first(),
        "max": v.last(),
    })
}

pub(crate) fn time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

pub(crate) fn go_secs(v: &Value) -> Option<f64> {
    parse_duration(v.as_str()?).ok().map(|d| d.as_secs_f64())
}

/// A node's forecast placement, (start, end), when it starts in window `name`.
pub(crate) fn placed(p: &Value, name: &str) -> Option<(Timestamp, Option<Timestamp>)> {
    let window = p["occurrence"]["window"].as_str()?;
    let ours = window == name || window.ends_with(&format!("/{name}"));
    if p["state"] != "Starts" || !ours {
        return None;
    }
    Some((time(&p["start"])?, time(&p["end"])))
}

/// `m` against its forecast, for the fleet of `names` whose reboots `draws` drew, under
/// the ceiling `ceiling`.
pub(crate) fn analyse(m: &Measured, names: &[String], draws: &Draws, ceiling: usize) -> Value {
    let window_name = &m.name;
    let f = &m.forecast;
    let fnodes: BTreeMap<String, &Value> = f["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["name"].as_str()?.to_string(), n)))
        .collect();
    let learned_m = go_secs(&f["durations"]["maintenance"]["median"]).unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    let (mut end_err, mut start_err, mut dur_err, mut abs_end) = (vec![], vec![], vec![], vec![]);
    let (mut real_dur, mut real_rec, mut overhead, mut rec_overhead) =
        (vec![], vec![], vec![], vec![]);
    let mut within_p90 = 0usize;
    // Fit: (forecast fits, really started in the window).
    let mut fit = BTreeMap::<(bool, bool), Vec<String>>::new();
    let mut fit90 = BTreeMap::<(bool, bool), usize>::new();
    let mut last_real: Option<Timestamp> = None;
    let mut last_fc: Option<Timestamp> = None;
    for (i, node) in names.iter().enumerate() {
        let real = m.reals.get(node).cloned().unwrap_or_default();
        let fc = fnodes.get(node);
        let med = fc.and_then(|v| placed(&v["median"], window_name));
        let p90 = fc.and_then(|v| placed(&v["p90"], window_name));
        let started_in = real.start.is_some_and(|t| t < m.end);
        fit.entry((med.is_some(), started_in))
            .or_default()
            .push(node.clone());
        *fit90.entry((p90.is_some(), started_in)).or_default() += 1;
        if let Some(e) = real.end {
            last_real = Some(last_real.map_or(e, |l: Timestamp| l.max(e)));
        }
        if let Some((_, Some(e))) = med {
            last_fc = Some(last_fc.map_or(e, |l: Timestamp| l.max(e)));
        }
        let boot_k = real
            .boot
            .as_deref()
            .and_then(|b| b.rsplit_once("-boot-"))
            .and_then(|(_, k)| k.parse::<u32>().ok());
        let drawn_reboot = boot_k.map(|k| draws.reboot(node, k).as_secs_f64());
        let drawn_delay = boot_k.map(|k| draws.daemon_delay(node, k + 1).as_secs_f64());
        let dur = real
            .start
            .zip(real.end)
            .map(|(a, b)| b.duration_since(a).as_secs_f64());
        let rec = real
            .end
            .zip(real.back)
            .map(|(a, b)| b.duration_since(a).as_secs_f64());
        real_dur.extend(dur);
        real_rec.extend(rec);
        if let (Some(d), Some(r)) = (dur, drawn_reboot) {
            overhead.push(d - r);
        }
        if let (Some(d), Some(r)) = (rec, drawn_delay) {
            rec_overhead.push(d - r);
        }
        let mut row = json!({
            "node": node,
            "zone": ZONES[i % ZONES.len()],
            "forecast_start": med.map(|p| p.0.to_string()),
            "forecast_end": med.and_then(|p| p.1).map(|t| t.to_string()),
            "forecast_end_p90": p90.and_then(|p| p.1).map(|t| t.to_string()),
            "real_start": real.start.map(|t| t.to_string()),
            "real_end": real.end.map(|t| t.to_string()),
            "real_back_in_service": real.back.map(|t| t.to_string()),
            "end_reason": real.end_reason,
            "end_message": real.end_message,
            "drawn_reboot_s": drawn_reboot,
            "drawn_daemon_delay_s": drawn_delay,
            "reboots": m.reboots.get(node),
        });
        if let (Some((fs, Some(fe))), Some(rs), Some(re)) = (med, real.start, real.end) {
            let e = re.duration_since(fe).as_secs_f64();
            let es = rs.duration_since(fs).as_secs_f64();
            end_err.push(e);
            abs_end.push(e.abs());
            start_err.push(es);
            dur_err.push(e - es);
            row["end_error_s"] = json!(e);
            row["start_error_s"] = json!(es);
            if p90
                .and_then(|p| p.1)
                .is_some_and(|p| re <= p + SignedDuration::from_secs(1))
            {
                within_p90 += 1;
            }
        }
        rows.push(row);
    }
    let length = last_real.map_or(f64::NAN, |l| l.duration_since(m.start).as_secs_f64());
    let frac = |v: Option<f64>| v.map(|x| x / length);
    let mut abs_sorted = abs_end.clone();
    abs_sorted.sort_by(f64::total_cmp);
    let completion = time(&f["rollout"]["median"]["completion"]);
    let completion90 = time(&f["rollout"]["p90"]["completion"]);
    let expected = time(&f["rollout"]["expected"]["completion"]);
    // The expected completion; without it (durations that do not vary), the median
    // run's; with nodes that do not fit, the median run's last end.
    let fc_last = expected.or(completion).or(last_fc);
    let comp_err = fc_last
        .zip(last_real)
        .map(|(fc, r)| r.duration_since(fc).as_secs_f64());
    let median_err = completion
        .or(last_fc)
        .zip(last_real)
        .map(|(fc, r)| r.duration_since(fc).as_secs_f64());
    let bound = (0.1 * length).max(learned_m);
    let count = |a: bool, b: bool| fit.get(&(a, b)).map_or(0, Vec::len);
    let disagree: Vec<&String> = fit
        .iter()
        .filter(|((a, b), _)| a != b)
        .flat_map(|(_, v)| v)
        .collect();
    let most = most_in_progress(&m.events, m.start - SignedDuration::from_secs(1));
    let extra_reboots: Vec<(&String, &usize)> = m.reboots.iter().filter(|(_, r)| **r > 1).collect();
    json!({
        "window": m.window,
        "window_start": m.start.to_string(),
        "window_end": m.end.to_string(),
        "forecast_taken_at": m.taken.to_string(),
        "plan_seconds": m.plan_seconds,
        "learned": f["durations"],
        "real": {
            "started": m.reals.values().filter(|x| x.start.is_some()).count(),
            "started_in_window": m.reals.values().filter(|x| x.start.is_some_and(|t| t < m.end)).count(),
            "last_end": last_real.map(|t| t.to_string()),
            "length_s": length,
            "maintenance_s": stats(&real_dur),
            "recovery_s": stats(&real_rec),
            "maintenance_minus_drawn_reboot_s": stats(&overhead),
            "recovery_minus_drawn_daemon_delay_s": stats(&rec_overhead),
            "most_in_progress": most,
            "ceiling": ceiling,
            "nodes_rebooted_more_than_once": extra_reboots.len(),
        },
        "forecast": {
            "starts_in_window_median": count(true, true) + count(true, false),
            "does_not_fit_median": count(false, true) + count(false, false),
            "rollout_median": f["rollout"]["median"],
            "rollout_p90": f["rollout"]["p90"],
            "last_end_median": last_fc.map(|t| t.to_string()),
        },
        "node_end_error": {
            "n": end_err.len(),
            "abs_median_s": percentile(&abs_sorted, 0.5),
            "abs_p90_s": percentile(&abs_sorted, 0.9),
            "abs_median_fraction": frac(percentile(&abs_sorted, 0.5)),
            "abs_p90_fraction": frac(percentile(&abs_sorted, 0.9)),
            "signed_s": stats(&end_err),
            "start_error_s": stats(&start_err),
            "duration_error_s": stats(&dur_err),
            "real_end_by_p90_forecast_end": within_p90,
        },
        "completion": {
            "forecast": fc_last.map(|t| t.to_string()),
            "forecast_is": (if expected.is_some() { "rollout.expected.completion" } else if completion.is_some() { "rollout.median.completion" } else { "last forecast end (some nodes do not fit)" }),
            "expected_runs": f["rollout"]["expected"]["runs"],
            "expected_p90": f["rollout"]["expected"]["p90"],
            "median_run": completion.or(last_fc).map(|t| t.to_string()),
            "median_run_error_s": median_err,
            "median_run_error_fraction": frac(median_err),
            "forecast_p90": completion90.map(|t| t.to_string()),
            "real": last_real.map(|t| t.to_string()),
            "error_s": comp_err,
            "error_fraction": frac(comp_err),
            "target_s": bound,
            "within_target": comp_err.map(|e| e.abs() <= bound),
            "real_by_p90_completion": completion90.zip(last_real).map(|(p, r)| r <= p + SignedDuration::from_secs(1)),
        },
        "fit": {
            "fits_and_started": count(true, true),
            "fits_but_did_not_start": count(true, false),
            "does_not_fit_but_started": count(false, true),
            "does_not_fit_and_did_not_start": count(false, false),
            "all_agree": disagree.is_empty(),
            "disagreeing": disagree,
            "p90": {
                "fits_and_started": fit90.get(&(true, true)),
                "fits_but_did_not_start": fit90.get(&(true, false)),
                "does_not_fit_but_started": fit90.get(&(false, true)),
                "does_not_fit_and_did_not_start": fit90.get(&(false, false)),
            },
        },
        "nodes": rows,
    })
}

/// The most nodes `MaintenanceInProgress=True` at once, from `from`.
pub(crate) fn most_in_progress(events: &[Seen], from: Timestamp) -> usize {
    let mut now = std::collections::BTreeSet::new();
    let mut most = 0;
    for e in events.iter().filter(|e| e.at >= from) {
        match e.what {
            What::Started { .. } => {
                now.insert(e.node.as_str());
            }
            What::Ended { .. } => {
                now.remove(e.node.as_str());
            }
            What::Uncordoned => {}
        }
        most = most.max(now.len());
    }
    most
}
