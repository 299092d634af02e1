use jiff::SignedDuration;
use kumaco_core::testing::ts;
use serde_json::json;

use super::*;
use crate::forecast::{Learned, Placement, Plan, Quantiles, Sampled};
use crate::in_progress::{Ceiling, Policy};
use crate::node::SlimNode;
use crate::window::test_window as window;

fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

/// A Ready node in `zone`; `needs` sets kured.dev/RebootRequired=True, `blocked` a
/// blocking condition.
fn node(name: &str, zone: &str, needs: bool, blocked: bool) -> SlimNode {
    let mut conditions = vec![json!({
        "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    })];
    if needs {
        conditions.push(json!({
            "type": "kured.dev/RebootRequired", "status": "True", "reason": "Reboot",
            "message": "", "lastTransitionTime": "2026-01-02T00:00:00Z",
            "lastHeartbeatTime": "2026-01-03T00:00:00Z",
        }));
    }
    if blocked {
        conditions.push(json!({
            "type": "example.com/Busy", "status": "True", "reason": "Backup",
            "message": "nightly backup", "lastTransitionTime": "2026-01-02T00:00:00Z",
        }));
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"zone": zone}},
        "status": {"conditions": conditions, "nodeInfo": {"bootID": format!("boot-{name}")}},
    }))
    .unwrap()
}

fn policy() -> Policy {
    let mut p = Policy::with_ceiling(Ceiling::Count(1));
    p.required = vec!["kured.dev/RebootRequired".into()];
    p.blocking = vec!["example.com/Busy".into()];
    p.start_cutoff = mins(60);
    p
}

fn given(maintenance: i64, recovery: i64) -> Estimate {
    estimate(
        &Learned::default(),
        Some(mins(maintenance)),
        Some(mins(recovery)),
    )
    .unwrap()
}

#[test]
fn a_flag_wins_over_the_records_and_none_is_an_error_naming_the_flag() {
    let learned = Learned {
        maintenance: Sampled {
            quantiles: Some(Quantiles {
                median: mins(6),
                p90: mins(9),
            }),
            recorded: (1..=12).map(mins).collect(),
        },
        recovery: Sampled::default(),
    };
    let e = estimate(&learned, None, Some(mins(2))).unwrap();
    assert_eq!(e.maintenance, Source::Learned { samples: 12 });
    assert_eq!(e.durations.maintenance.p90, mins(9));
    assert_eq!(e.recovery, Source::Given);
    assert_eq!(e.durations.recovery, Quantiles::fixed(mins(2)));
    // The records go along for the expected completion to draw from; a flag has none.
    assert_eq!(e.durations.recorded.maintenance.len(), 12);
    assert!(e.durations.recorded.recovery.is_empty());
    let e = estimate(&learned, Some(mins(30)), Some(mins(2))).unwrap();
    assert_eq!(e.durations.maintenance, Quantiles::fixed(mins(30)));

    let err = estimate(&learned, None, None).unwrap_err().to_string();
    assert!(err.starts_with("--recovery-duration: "), "{err}");
    assert!(err.contains("--recovery-duration=15m"), "{err}");
    let err = estimate(&Learned::default(), None, None)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("--maintenance-duration: "), "{err}");
}

/// Saturday 22:00 for four hours, one node at a time, none started in the last hour, an
/// hour each and ten minutes to come back (a node back up frees its slot: unavailable
/// nodes count by default): three nodes fit (22:00, 23:10, 00:20), the fourth (01:30)
/// would start too late and is carried to the next Saturday; the
/// blocked node is held, the node that needs nothing is not shown.
fn weekly() -> Forecasted {
    let windows = [window("weekly", "0 22 * * 6", "4h", "", false)];
    let nodes = [
        node("a", "z1", true, false),
        node("b", "z1", true, false),
        node("c", "z2", true, false),
        node("d", "z2", true, false),
        node("busy", "z1", true, true),
        node("fine", "z1", false, false),
    ];
    compute(
        &windows,
        &policy(),
        &nodes,
        Beside::default(),
        given(60, 10),
        ts("2026-01-03T12:00:00Z"),
        SignedDuration::from_hours(24 * 14),
    )
}

#[test]
fn the_forecast_of_a_weekly_window_one_node_at_a_time() {
    let f = weekly();
    let starts: Vec<(&str, Option<String>)> = f
        .forecast
        .nodes
        .iter()
        .map(|n| {
            let start = match &n.plan {
                Plan::Forecast { median, .. } => median.start().map(|t| t.to_string()),
                Plan::Held { reason, .. } => Some(format!("held {reason}")),
            };
            (n.name.as_str(), start)
        })
        .collect();
    assert_eq!(
        starts,
        [
            ("a", Some("2026-01-03T22:00:00Z".into())),
            ("b", Some("2026-01-03T23:10:00Z".into())),
            ("busy", Some("held Blocked".into())),
            ("c", Some("2026-01-04T00:20:00Z".into())),
            ("d", Some("2026-01-10T22:00:00Z".into())),
        ]
    );
    let d = f.forecast.nodes.iter().find(|n| n.name == "d").unwrap();
    let Plan::Forecast {
        median: Placement::Starts { carried, .. },
        ..
    } = &d.plan
    else {
        panic!("d starts: {d:?}")
    };
    assert_eq!(*carried, 1, "the first Saturday had no room for d");
    assert_eq!(
        f.forecast.median.completion,
        Some(ts("2026-01-10T23:00:00Z"))
    );
    assert_eq!(f.forecast.median.occurrences[0].started, 3);
    assert_eq!(f.forecast.median.occurrences[0].did_not_fit, 1);
}

#[test]
fn the_table_names_each_node_its_occurrence_and_the_rollout() {
    let text = table(&weekly(), &jiff::tz::TimeZone::UTC);
    for expected in [
        "FORECAST from 2026-01-03T12:00:00Z to 2026-01-17T12:00:00Z: 5 of 6 nodes in scope need maintenance or have it now (1 held: blocked or unavailable, not forecast)",
        "durations: maintenance 1h0m0s (median), 1h0m0s (90th percentile), given; recovery 10m0s, 10m0s, given",
        "rollout at the median durations: done by 2026-01-10T23:00:00Z; 1 node does not fit in ops/weekly 2026-01-03T22:00:00Z",
        "carried over 1 occurrence where it did not fit",
        "held, Blocked: ",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    let row = text.lines().find(|l| l.starts_with("b ")).unwrap();
    assert!(
        row.contains(
            "ops/weekly 2026-01-03T22:00:00Z   2026-01-03T23:10:00Z   2026-01-04T00:10:00Z"
        ),
        "{row}"
    );
}

#[test]
fn the_json_has_every_node_and_both_rollouts() {
    let v = json(&weekly());
    assert_eq!(v["nodes"].as_array().unwrap().len(), 5);
    assert_eq!(v["nodes"][0]["median"]["state"], "Starts");
    assert_eq!(v["nodes"][0]["median"]["start"], "2026-01-03T22:00:00Z");
    assert_eq!(
        v["nodes"][0]["median"]["occurrence"]["window"],
        "ops/weekly"
    );
    assert_eq!(v["nodes"][2]["held"]["reason"], "Blocked");
    assert_eq!(v["durations"]["maintenance"]["median"], "1h0m0s");
    assert_eq!(v["durations"]["maintenance"]["source"], "given");
    assert_eq!(v["rollout"]["median"]["completion"], "2026-01-10T23:00:00Z");
    assert_eq!(v["rollout"]["median"]["occurrences"][0]["didNotFit"], 1);
}

#[test]
fn the_picture_has_a_bar_per_node_or_per_occurrence() {
    let f = weekly();
    let s = svg(&f, &jiff::tz::TimeZone::UTC, "UTC");
    assert!(s.starts_with("<?xml") && s.ends_with("</svg>\n"));
    for name in ["a", "b", "c", "d", "busy"] {
        assert!(s.contains(&format!(">{name}</text>")), "{name} missing");
    }
    assert!(s.contains("held, Blocked"));
    // Many nodes: one bar per occurrence instead.
    let windows = [window("weekly", "0 22 * * 6", "4h", "", false)];
    let nodes: Vec<SlimNode> = (0..svg::MAX_NODE_BARS + 1)
        .map(|i| node(&format!("n{i:03}"), "z1", true, false))
        .collect();
    let f = compute(
        &windows,
        &policy(),
        &nodes,
        Beside::default(),
        given(10, 0),
        ts("2026-01-03T12:00:00Z"),
        SignedDuration::from_hours(24 * 7),
    );
    let s = svg(&f, &jiff::tz::TimeZone::UTC, "UTC");
    assert!(!s.contains(">n000</text>"), "no bar per node");
    assert!(s.contains("19 node(s), 42 do not fit"), "{s}");
}
