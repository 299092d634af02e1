//! A rollout's figures printed as a table.

use serde_json::Value;

pub(crate) fn print_rollout(r: &Value) {
    let num = |v: &Value, d: usize| match v.as_f64() {
        Some(x) => format!("{x:.d$}"),
        None => "-".into(),
    };
    let pct = |v: &Value| match v.as_f64() {
        Some(x) => format!("{:.1}%", 100.0 * x),
        None => "-".into(),
    };
    let (real, e, c, fit, l) = (
        &r["real"],
        &r["node_end_error"],
        &r["completion"],
        &r["fit"],
        &r["learned"],
    );
    println!(
        "  window {} from {} to {}",
        r["window"], r["window_start"], r["window_end"]
    );
    println!(
        "  learned: maintenance {} / {} (median / p90, {} samples), recovery {} / {}",
        l["maintenance"]["median"],
        l["maintenance"]["p90"],
        l["maintenance"]["samples"],
        l["recovery"]["median"],
        l["recovery"]["p90"]
    );
    println!(
        "  real: {} started ({} in the window), maintenance {} / {} s, recovery {} / {} s (median / p90); \
         rollout {} s; most in progress {} (ceiling {}); nodes rebooted twice {}",
        real["started"],
        real["started_in_window"],
        num(&real["maintenance_s"]["median"], 1),
        num(&real["maintenance_s"]["p90"], 1),
        num(&real["recovery_s"]["median"], 1),
        num(&real["recovery_s"]["p90"], 1),
        num(&real["length_s"], 0),
        real["most_in_progress"],
        real["ceiling"],
        real["nodes_rebooted_more_than_once"],
    );
    println!(
        "  per-node end error (real - forecast, {} nodes): |error| median {} s ({}), p90 {} s ({}); \
         signed mean {} s; start error mean {} s, duration error mean {} s; real end by the p90 end: {}",
        e["n"],
        num(&e["abs_median_s"], 1),
        pct(&e["abs_median_fraction"]),
        num(&e["abs_p90_s"], 1),
        pct(&e["abs_p90_fraction"]),
        num(&e["signed_s"]["mean"], 1),
        num(&e["start_error_s"]["mean"], 1),
        num(&e["duration_error_s"]["mean"], 1),
        e["real_end_by_p90_forecast_end"],
    );
    println!(
        "  completion ({}): forecast {} real {}: error {} s ({}), target ±{} s: {}; real by the p90 completion {}: {}",
        c["forecast_is"].as_str().unwrap_or_default(),
        c["forecast"],
        c["real"],
        num(&c["error_s"], 1),
        pct(&c["error_fraction"]),
        num(&c["target_s"], 1),
        match c["within_target"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "-",
        },
        c["forecast_p90"],
        c["real_by_p90_completion"],
    );
    println!(
        "  completion of the median run {}: error {} s ({}); expected over {} drawn runs, p90 {}",
        c["median_run"],
        num(&c["median_run_error_s"], 1),
        pct(&c["median_run_error_fraction"]),
        c["expected_runs"],
        c["expected_p90"],
    );
    println!(
        "  fit (median forecast / real): fits and started {}, fits but did not start {}, \
         does not fit but started {}, does not fit and did not start {}{}",
        fit["fits_and_started"],
        fit["fits_but_did_not_start"],
        fit["does_not_fit_but_started"],
        fit["does_not_fit_and_did_not_start"],
        if fit["all_agree"] == true {
            ": all agree"
        } else {
            ""
        },
    );
}
