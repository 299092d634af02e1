//! The tables printed after each run, and the spread over repeated runs.

use serde_json::Value;
use testkit::fleet::percentile;

/// Min, median and max of each figure over the runs of each N.
pub(crate) fn print_spread(results: &[Value]) {
    // (name, JSON pointer into a run's result, unit)
    let figures = [
        ("(a) start → /readyz", "/ready_seconds", "s"),
        ("(b) edge latency first node", "/edge_latency_ms/min", "ms"),
        ("(b) edge latency p50", "/edge_latency_ms/p50", "ms"),
        ("(b) edge latency p99", "/edge_latency_ms/p99", "ms"),
        ("(f) plain client burst", "/plain_client_burst_ms", "ms"),
        ("(e) peak RSS", "/peak_rss_mib", "MiB"),
        ("(e) CPU", "/cpu_seconds", "s"),
        ("(g) changes accepted", "/churn/changes/accepted", ""),
        (
            "(g) CPU per 1000 changes",
            "/churn/before_edge/cpu_seconds_per_1000_changes",
            "s",
        ),
        (
            "(g) plain watch CPU per 1000",
            "/churn/before_edge/plain_watch_cpu_seconds_per_1000_changes",
            "s",
        ),
        (
            "(g) kumaco / plain watch CPU",
            "/churn/before_edge/kumaco_over_plain_watch",
            "",
        ),
        (
            "(g) mean pass under churn",
            "/churn/before_edge/pass_mean_ms",
            "ms",
        ),
        (
            "(g) CPU per pass",
            "/churn/before_edge/cpu_ms_per_pass",
            "ms",
        ),
        (
            "(g) changes per pass",
            "/churn/before_edge/changes_per_pass",
            "",
        ),
        (
            "(g) edge p50 under churn",
            "/churn/edge_latency_ms/p50",
            "ms",
        ),
        (
            "(g) edge p99 under churn",
            "/churn/edge_latency_ms/p99",
            "ms",
        ),
        (
            "(f) plain client under churn",
            "/plain_client_burst_under_churn_ms",
            "ms",
        ),
    ];
    let mut sizes: Vec<u64> = results.iter().filter_map(|r| r["nodes"].as_u64()).collect();
    sizes.dedup();
    for n in sizes {
        let runs: Vec<&Value> = results.iter().filter(|r| r["nodes"] == n).collect();
        println!(
            "== spread over {} runs at {n} nodes: min / median / max",
            runs.len()
        );
        for (name, pointer, unit) in figures {
            let mut v: Vec<f64> = runs
                .iter()
                .map(|r| r.pointer(pointer).map_or(f64::NAN, num))
                .collect();
            if v.iter().all(|x| x.is_nan()) {
                continue; // a phase these runs did not have
            }
            v.sort_by(f64::total_cmp);
            let median = percentile(&v, 0.5).unwrap_or(f64::NAN);
            println!(
                "{name:<34} {:>9.2} / {median:>9.2} / {:>9.2} {unit}",
                v[0],
                v[v.len() - 1]
            );
        }
    }
}

pub(crate) fn print_table(r: &Value) {
    let f = |key: &str| r[key].clone();
    let lat = &r["edge_latency_ms"];
    let rows: Vec<(String, String, &str)> = vec![
        ("nodes".into(), f("nodes").to_string(), ""),
        ("run".into(), f("run").to_string(), ""),
        ("windows".into(), f("windows").to_string(), ""),
        (
            "load average start / end".into(),
            format!(
                "{} / {}",
                f("load_average_start").as_str().unwrap_or("?"),
                f("load_average_end").as_str().unwrap_or("?")
            ),
            "",
        ),
        (
            "setup (nodes created)".into(),
            format!("{:.1} s", num(&f("setup_nodes_seconds"))),
            "",
        ),
        (
            "(a) start → /readyz".into(),
            format!("{:.2} s", num(&f("ready_seconds"))),
            "< 5 s",
        ),
        (
            "    CPU until ready".into(),
            format!("{:.2} s", num(&f("cpu_seconds_at_ready"))),
            "",
        ),
        (
            "    startup writes".into(),
            f("startup_status_writes").to_string(),
            "",
        ),
        (
            "(b) edge nodes seen True".into(),
            format!("{} / {}", f("edge_nodes_seen"), f("edge_nodes_expected")),
            "all",
        ),
        (
            "    edge latency min (first node)".into(),
            format!("{:.0} ms", num(&lat["min"])),
            "",
        ),
        (
            "    edge latency p50".into(),
            format!("{:.0} ms", num(&lat["p50"])),
            "",
        ),
        (
            "    edge latency p99".into(),
            format!("{:.0} ms", num(&lat["p99"])),
            "< 1000 ms",
        ),
        (
            "    edge latency max".into(),
            format!("{:.0} ms", num(&lat["max"])),
            "",
        ),
        (
            "(c) status writes / transitions".into(),
            format!("{} / {}", f("edge_status_writes"), f("edge_transitions")),
            "equal",
        ),
        (
            "(f) plain client, same applies".into(),
            format!("{:.0} ms", num(&f("plain_client_burst_ms"))),
            "",
        ),
        (
            "    the same under churn".into(),
            match f("plain_client_burst_under_churn_ms").as_f64() {
                Some(ms) => format!("{ms:.0} ms"),
                None => "-".into(),
            },
            "",
        ),
        (
            format!("(d) writes in {} s idle", f("idle_seconds")),
            f("idle_status_writes").to_string(),
            "0",
        ),
        (
            "    kumaco CPU while idle".into(),
            format!("{:.2} s", num(&f("idle_cpu_seconds"))),
            "",
        ),
        (
            "(e) peak RSS (VmHWM)".into(),
            format!("{:.1} MiB", num(&f("peak_rss_mib"))),
            "< 64 MiB",
        ),
        (
            "    RSS at end (VmRSS)".into(),
            format!("{:.1} MiB", num(&f("rss_at_end_mib"))),
            "",
        ),
        (
            "    CPU (utime+stime), so far".into(),
            format!("{:.2} s", num(&f("cpu_seconds"))),
            "",
        ),
    ];
    let mut rows = rows;
    rows.extend(churn_rows(r));
    println!("{:<34} {:>22}  target", "measure", "value");
    for (name, value, target) in rows {
        println!("{name:<34} {value:>22}  {target}");
    }
}

/// The churn phase's rows of the table, if the run had one.
fn churn_rows(r: &Value) -> Vec<(String, String, &'static str)> {
    let c = &r["churn"];
    if !c.is_object() {
        return vec![];
    }
    let (changes, before, whole, lat) = (
        &c["changes"],
        &c["before_edge"],
        &c["whole"],
        &c["edge_latency_ms"],
    );
    vec![
        (
            format!(
                "(g) churn {}/s for {} s",
                c["rate_per_second"], c["seconds"]
            ),
            String::new(),
            "",
        ),
        (
            "    changes accepted / planned".into(),
            format!(
                "{} / {} ({} failed)",
                changes["accepted"], changes["planned"], changes["failed"]
            ),
            "all",
        ),
        (
            "    as the API server counts them".into(),
            c["apiserver_changes_accepted"].to_string(),
            "",
        ),
        (
            "    achieved rate, max lag".into(),
            format!(
                "{:.1}/s, {} ms",
                num(&c["achieved_rate_per_second"]),
                changes["max_lag_ms"]
            ),
            "",
        ),
        (
            "    churn only: changes, seconds".into(),
            format!(
                "{} in {:.1} s",
                before["changes_accepted"],
                num(&before["seconds"])
            ),
            "",
        ),
        (
            "    churn only: kumaco CPU".into(),
            format!("{:.2} s", num(&before["cpu_seconds"])),
            "",
        ),
        (
            "    CPU per 1,000 changes".into(),
            format!("{:.3} s", num(&before["cpu_seconds_per_1000_changes"])),
            "",
        ),
        (
            "    plain watch: CPU per 1,000 changes".into(),
            format!(
                "{:.3} s",
                num(&before["plain_watch_cpu_seconds_per_1000_changes"])
            ),
            "",
        ),
        (
            "    kumaco / plain watch".into(),
            format!("{:.2}", num(&before["kumaco_over_plain_watch"])),
            "",
        ),
        (
            "    churn only: passes, mean".into(),
            format!(
                "{} / {:.1} ms",
                before["kumaco_passes"],
                num(&before["pass_mean_ms"])
            ),
            "",
        ),
        (
            "    changes per pass, CPU per pass".into(),
            format!(
                "{:.2} / {:.1} ms",
                num(&before["changes_per_pass"]),
                num(&before["cpu_ms_per_pass"])
            ),
            "",
        ),
        (
            "    churn only: kumaco writes".into(),
            before["kumaco_writes"].to_string(),
            "0",
        ),
        (
            "    whole phase: CPU, per 1,000".into(),
            format!(
                "{:.2} s, {:.3} s",
                num(&whole["cpu_seconds"]),
                num(&whole["cpu_seconds_per_1000_changes"])
            ),
            "",
        ),
        (
            "    edge nodes seen True".into(),
            format!("{} / {}", c["edge_nodes_seen"], c["edge_nodes_expected"]),
            "all",
        ),
        (
            "    edge latency min / p50".into(),
            format!("{:.0} / {:.0} ms", num(&lat["min"]), num(&lat["p50"])),
            "",
        ),
        (
            "    edge latency p99 / max".into(),
            format!("{:.0} / {:.0} ms", num(&lat["p99"]), num(&lat["max"])),
            "",
        ),
        (
            "    kumaco writes / transitions".into(),
            format!("{} / {}", c["kumaco_writes"], c["edge_transitions"]),
            "equal",
        ),
        (
            "    peak RSS after the churn".into(),
            format!("{:.1} MiB", num(&c["peak_rss_mib"])),
            "",
        ),
    ]
}

pub(crate) fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}
