//! The case that showed what whole-second records cost: a rollout of a few nodes whose
//! maintenances last a few seconds each, learned from the records the real pass writes,
//! then forecast. A warm-up rollout through [`stepped_over`] (the real pass
//! at every instant something changes) over nodes whose maintenance and recovery last
//! their own true durations, each a fraction of a second off a whole one, leaves the
//! records its ends write; a second rollout is forecast from what they teach, then played
//! through the same pass, and the forecast's completion is held to the one played. The
//! pass runs at the very instant a node changes: kumaco's reaction is left out, as the
//! forecast leaves it out, so what differs is what the records taught.

use super::against_the_pass::stepped_over;
use super::*;

/// How many nodes the rollout has: as many as in the rollout that showed it.
const NODES: usize = 9;

/// The true durations of node `i`: a maintenance near four and a half seconds, and a
/// recovery near one and a quarter, each a few tens of milliseconds apart from the next
/// node's, so that no two ends coincide.
fn truth(i: usize) -> (SignedDuration, SignedDuration) {
    let i = i as i64;
    (
        SignedDuration::from_millis(4_380 + 30 * i),
        SignedDuration::from_millis(1_210 + 20 * i),
    )
}

/// The forecast's completions (expected, at the median durations) and the rollout's as
/// the pass played it, each from the window's opening, for the fleet under
/// `policy`; and what the forecast learned (median maintenance, median recovery).
struct Measured {
    expected: SignedDuration,
    median: SignedDuration,
    real: SignedDuration,
    learned: (SignedDuration, SignedDuration),
}

fn measure(policy: &Policy) -> Measured {
    let warm_up = test_window("warm-up", "2026-01-05T01:00:00Z", "10m", "", false);
    let measured = test_window("measured", "2026-01-05T02:00:00Z", "10m", "", false);
    let opens = ts("2026-01-05T02:00:00Z");
    let mut nodes: Vec<Node> = (0..NODES)
        .map(|i| Node::needing(&format!("node-{i}"), None, 60 - i as i64))
        .collect();
    let index = |n: &Node| nodes_index(&n.name);
    let maintenance = |n: &Node, elapsed: SignedDuration| truth(index(n)).0.max(elapsed);
    let recovery = |n: &Node, elapsed: SignedDuration| truth(index(n)).1.max(elapsed);
    // The warm-up: every node once, each end recording its durations.
    let windows = [warm_up, measured.clone()];
    let done = stepped_over(
        &windows,
        policy,
        &mut nodes,
        &maintenance,
        &recovery,
        ts("2026-01-05T00:59:00Z"),
        ts("2026-01-05T01:30:00Z"),
    );
    assert_eq!(done.len(), NODES, "{done:?}");
    // Every node needs a reboot again, reported at 01:40.
    for n in &mut nodes {
        let r = n.conditions.iter_mut().find(|c| c.type_ == REBOOT).unwrap();
        (r.status, r.last_transition_time) = (Status::True, Some(ts("2026-01-05T01:40:00Z")));
    }
    // The forecast, three seconds before the window opens, as kumaco-forecast-bench takes it.
    let now = opens - secs(3);
    let learned = learn(nodes.iter().map(|n| n.conditions.as_slice()));
    let sampled = |s: &Sampled| (s.quantiles.expect("records"), s.recorded.clone());
    let (m, rm) = sampled(&learned.maintenance);
    let (r, rr) = sampled(&learned.recovery);
    let durations = Durations {
        maintenance: m,
        recovery: r,
        recorded: Recorded {
            maintenance: rm,
            recovery: rr,
        },
    };
    // What the records say is what the nodes took, to the millisecond.
    let truths: (Vec<_>, Vec<_>) = (0..NODES).map(truth).unzip();
    assert_eq!(
        (
            &durations.recorded.maintenance,
            &durations.recorded.recovery
        ),
        (&truths.0, &truths.1)
    );
    let f = run(&windows[1..], policy, &nodes, &durations, now);
    // The rollout, played.
    let played = stepped_over(
        &windows[1..],
        policy,
        &mut nodes,
        &maintenance,
        &recovery,
        now,
        ts("2026-01-05T02:30:00Z"),
    );
    let real = played
        .values()
        .map(|(_, end)| end.expect("every node ends"))
        .max()
        .unwrap();
    let from_opening = |t: Option<Timestamp>| t.expect("completes").duration_since(opens);
    Measured {
        // None when every record is the same: every drawn run would be the median's.
        expected: from_opening(f.expected.map_or(f.median.completion, |e| e.completion)),
        median: from_opening(f.median.completion),
        real: real.duration_since(opens),
        learned: (m.median, r.median),
    }
}

fn nodes_index(name: &str) -> usize {
    name.strip_prefix("node-").unwrap().parse().unwrap()
}

fn report(what: &str, m: &Measured) {
    println!(
        "{what}: learned {:?} / {:?}; real {:.3} s, expected {:.3} s ({:+.3} s), median {:.3} s ({:+.3} s)",
        m.learned.0,
        m.learned.1,
        m.real.as_secs_f64(),
        m.expected.as_secs_f64(),
        (m.real - m.expected).as_secs_f64(),
        m.median.as_secs_f64(),
        (m.real - m.median).as_secs_f64(),
    );
}

/// How far the forecast's completions may lie from the rollout's: a fraction of the
/// spread of the nodes' true durations, which the drawn runs sample from the records.
/// Records to the whole second taught whole-second durations, and the forecast fell
/// short of the played rollout by more than this on every policy below
/// (docs/forecast.md, "Accuracy and cost").
const WITHIN: SignedDuration = SignedDuration::from_millis(250);

#[test]
fn a_rollout_of_short_maintenances_is_forecast_from_what_its_records_say() {
    for (what, policy) in [
        ("one at a time", policy(1)),
        ("two at a time", policy(2)),
        (
            "three at a time, a second between starts",
            Policy {
                start_interval: Some(secs(1)),
                ..policy(3)
            },
        ),
    ] {
        let m = measure(&policy);
        report(what, &m);
        assert!(
            (m.real - m.expected).abs() <= WITHIN && (m.real - m.median).abs() <= WITHIN,
            "{what}: real {:?}, expected {:?}, at the median {:?}",
            m.real,
            m.expected,
            m.median
        );
    }
}
