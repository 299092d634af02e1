//! The figures of a run, printed for a person (the JSON file holds them all).

use serde_json::Value;

pub(crate) fn print_figures(f: &Value) {
    let t = &f["faults"];
    println!();
    println!("seed                         {}", f["seed"]);
    println!(
        "minutes                      {:.1}",
        f["minutes"].as_f64().unwrap_or(0.0)
    );
    println!(
        "kills (SIGKILL / SIGTERM)    {} ({} / {}), of the leader {}, mid-edge {}, mid-write {}",
        f["kills"], t["sigkill"], t["sigterm"], t["leader_kills"], t["mid_edge"], t["mid_write"]
    );
    println!(
        "API server crashes           {} ({} across an edge)",
        t["api_crashes"], t["api_crashes_across_edge"]
    );
    println!(
        "proxy faults / partitions    {} / {}",
        t["proxy_faults"], t["partitions"]
    );
    println!(
        "clock jumps / window edits   {} / {}",
        t["clock_jumps"], t["window_edits"]
    );
    println!(
        "fault minutes                {:.1}",
        t["fault_seconds"].as_f64().unwrap_or(0.0) / 60.0
    );
    println!("nodes rebooted               {}", f["reboots"]);
    println!(
        "max in progress (ceiling)    {} ({})",
        f["max_in_progress"], f["ceiling"]
    );
    let c = &f["checker"];
    println!(
        "nodes taken down: outages    {} ({} zone outages); drainer {}",
        t["outages"], t["zone_outages"], f["drainer"]
    );
    println!("seen going unavailable       {}", c["went_unavailable"]);
    println!(
        "most unavailable / disrupted {} / {} overall, {} in a zone (ceilings {} / {}); events above a ceiling {}",
        c["max_unavailable"],
        c["max_disrupted"],
        c["max_disrupted_in_group"],
        f["ceiling"],
        f["zone_ceiling"],
        c["events_above_ceiling"]
    );
    println!(
        "starts checked (in re-lists) {} ({}); at the last slot {}, with unavailable counted {}, raced {}",
        c["starts_checked"],
        c["starts_in_relists"],
        c["starts_at_last_slot"],
        c["starts_with_unavailable_counted"],
        c["starts_raced"]
    );
    println!(
        "checks: plan / writes        {} / {}",
        c["plan_checks"], c["writes_checked"]
    );
    println!("max edge delay (quiet)       {} ms", c["max_edge_delay_ms"]);
    println!("tail                         {}", f["tail"]);
    println!("violations                   {}", f["violations"]);
}
