use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use super::*;
use crate::conditions::{Condition, Status};
use crate::forecast::Recorded;
use crate::in_progress::{Availability, Ceiling, GroupCeiling};
use crate::window::test_window;

const REBOOT: &str = "kured.dev/RebootRequired";

fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

/// Durations recorded from `from` to `from + spread` minutes, every minute.
fn recorded(from: i64, spread: i64) -> (Quantiles, Vec<SignedDuration>) {
    let mut r: Vec<SignedDuration> = (from..=from + spread).map(mins).collect();
    (Quantiles::of(&mut r).unwrap(), r)
}

/// Whatever the threads, the forecast is the core's, played in turn: the runs at the
/// median and the 90th percentile side by side, the drawn runs taken by each thread in
/// turn, with a budget that lets every drawn run count and with one that stops them
/// part of the way.
#[test]
fn the_forecast_is_the_same_on_any_number_of_threads() {
    let now: Timestamp = "2026-01-05T00:00:00Z".parse().unwrap();
    let labels: Vec<BTreeMap<String, String>> = (0..40)
        .map(|i| BTreeMap::from([("zone".to_string(), format!("z{}", i % 3))]))
        .collect();
    let names: Vec<String> = (0..40).map(|i| format!("node-{i:02}")).collect();
    let conditions: Vec<Vec<Condition>> = (0..40)
        .map(|i| {
            vec![Condition {
                type_: REBOOT.into(),
                status: Status::True,
                reason: "Reboot".into(),
                message: String::new(),
                last_transition_time: Some(now - mins(i * 7 % 50)),
                last_heartbeat_time: None,
            }]
        })
        .collect();
    let views: Vec<NodeView> = (0..40)
        .map(|i| NodeView {
            name: &names[i],
            uid: &names[i],
            labels: &labels[i],
            resource_version: None,
            conditions: &conditions[i],
            owned: &[],
            owned_since: None,
            owners: &[],
            availability: Availability::default(),
            pods: &[],
            boot_id: Some(&names[i]),
            holds: &[],
            drain: None,
        })
        .collect();
    let windows = [test_window("night", "0 2 * * *", "4h", "", false)];
    let windows: Vec<&Window> = windows.iter().collect();
    let policy = Policy {
        required: vec![REBOOT.into()],
        group_ceilings: vec![GroupCeiling {
            key: "zone".into(),
            ceiling: Ceiling::Count(2),
        }],
        ..Policy::with_ceiling(Ceiling::Count(4))
    };
    let (m, maintenance) = recorded(10, 20);
    let (r, recovery) = recorded(1, 4);
    let durations = Durations {
        maintenance: m,
        recovery: r,
        recorded: Recorded {
            maintenance,
            recovery,
        },
    };
    let horizon = SignedDuration::from_hours(24 * 7);
    let alone = forecast::forecast(&windows, &policy, &views, &durations, now, horizon);
    let e = alone.expected.expect("durations that vary");
    assert_eq!(e.runs, forecast::EXPECTED_RUNS, "{e:?}");
    let runs = Runs::new(&windows, &policy, &views, &[], &durations, now, horizon);
    for threads in 1..=4 {
        assert_eq!(play(&runs, threads), alone, "{threads} threads");
    }

    // A budget that stops the drawn runs part of the way: each played alone, then on
    // threads, counts the same runs.
    let (median, p90) = (runs.play(Quantile::Median), runs.play(Quantile::P90));
    let drawing = runs.drawing(&median, &p90).expect("durations that vary");
    let one = runs
        .play_drawn(&drawing, 0, u64::MAX)
        .expect("no budget")
        .work();
    let tight = drawing.with_budget(one * 5 / 2);
    let in_turn = tight.expected((0..Drawing::RUNS).map(|r| runs.play_drawn(&tight, r, u64::MAX)));
    let counted = in_turn.expect("two runs fit").runs;
    assert!((1..=3).contains(&counted), "{counted}");
    for threads in 1..=4 {
        assert_eq!(drawn(&runs, &tight, threads), in_turn, "{threads} threads");
    }
}
