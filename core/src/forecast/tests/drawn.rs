//! The expected completion: durations drawn from the records, and the runs' budget.

use super::*;

/// Ten nodes needing a reboot, oldest first by name, and a window from 02:00 for 20 hours.
fn ten_nodes_all_day() -> (Vec<Node>, [Window; 1]) {
    let nodes = (0..10)
        .map(|i| Node::needing(&format!("n{i}"), None, 10 - i))
        .collect();
    (nodes, [test_window("day", "0 2 * * *", "20h", "", false)])
}

#[test]
fn the_expected_completion_draws_each_duration_from_the_records() {
    // One slot, ten nodes; maintenances recorded at 10 minutes three times in five, at 30
    // the other two. At the median every one takes 10 (done at 03:40), at the 90th
    // percentile 30 (07:00). A slot's ten draws sum to 180 on average. Each duration is
    // spread over its record's second, so the ends are within 10 s (ten durations) of
    // whole minutes.
    let (nodes, day) = ten_nodes_all_day();
    let d = learned_from(&[10, 10, 10, 30, 30], &[0]);
    let f = run(&day, &policy(1), &nodes, &d, monday());
    let near = |t: Timestamp, to: &str| t.duration_since(ts(to)).abs() < secs(10);
    assert!(
        near(f.median.completion.unwrap(), "2026-01-05T03:40:00Z"),
        "{f:?}"
    );
    assert!(
        near(f.p90.completion.unwrap(), "2026-01-05T07:00:00Z"),
        "{f:?}"
    );
    let e = f.expected.expect("records that vary");
    assert_eq!(e.runs, EXPECTED_RUNS);
    let (c, p) = (e.completion.unwrap(), e.p90.unwrap());
    assert!(
        c > f.median.completion.unwrap() && c < f.p90.completion.unwrap(),
        "{c}"
    );
    assert!(p >= c && p <= f.p90.completion.unwrap(), "{p}");
    // Each run's completion is ten draws of 10 or 30 after 02:00.
    for t in [c, p] {
        let s = t.duration_since(ts("2026-01-05T02:00:00Z")).as_secs();
        let m = (s + 30) / 60;
        assert!((100..=300).contains(&m) && (m - 100) % 20 == 0, "{t}");
        assert!((s - m * 60).abs() < 10, "{t}");
    }

    // The same nodes listed in another order draw the same: a draw hangs on a name.
    let mut reversed = nodes.clone();
    reversed.reverse();
    assert_eq!(run(&day, &policy(1), &reversed, &d, monday()), f);

    // Durations given, or records that are all equal: nothing to draw.
    let given = durations(mins(10), SignedDuration::ZERO);
    assert_eq!(
        run(&day, &policy(1), &nodes, &given, monday()).expected,
        None
    );
    let same = learned_from(&[10, 10], &[0, 0]);
    assert_eq!(
        run(&day, &policy(1), &nodes, &same, monday()).expected,
        None
    );
}

#[test]
fn a_node_in_progress_draws_only_durations_longer_than_its_work_so_far() {
    // In progress for 25 minutes: of 10, 20, 30 and 40, only 30 and 40 remain, so every
    // run ends it at 02:05 or 02:15 (it started at 01:35), never now; within a second,
    // the spread of a record.
    let mut a = Node::needing("a", None, 60);
    a.conditions.push(condition(
        MAINTENANCE_IN_PROGRESS,
        true,
        ts("2026-01-05T01:35:00Z"),
    ));
    let now = ts("2026-01-05T02:00:00Z");
    let d = learned_from(&[10, 20, 30, 40], &[0]);
    let f = run(&[nightly("")], &policy(1), &[a], &d, now);
    let e = f.expected.expect("records that vary");
    for t in [e.completion.unwrap(), e.p90.unwrap()] {
        assert!(
            ["2026-01-05T02:05:00Z", "2026-01-05T02:15:00Z"]
                .iter()
                .any(|to| t.duration_since(ts(to)).abs() < secs(1)),
            "{t}"
        );
    }
}

#[test]
fn the_drawn_runs_stop_at_their_budget_of_decisions() {
    let (nodes, windows) = ten_nodes_all_day();
    let windows: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    let policy = policy(1);
    let fleet = Fleet::new(&windows, &policy, &views, monday(), mins(24 * 60));
    let d = learned_from(&[10, 10, 10, 30, 30], &[0]);
    let one = Run::new(
        &fleet,
        Lengths::fixed(Pool::Given(mins(10)), Pool::Given(SignedDuration::ZERO)),
    )
    .play()
    .work;
    let all = expected(&fleet, &d, u64::MAX, one).unwrap();
    assert_eq!(all.runs, EXPECTED_RUNS);
    // Room for about two and a half runs: two are played, the third given up.
    let some = expected(&fleet, &d, one * 5 / 2, one).unwrap();
    assert!((1..=3).contains(&some.runs), "{some:?}");
    assert_eq!(expected(&fleet, &d, 0, one), None);
    // Less left than a run takes: none is begun.
    assert_eq!(expected(&fleet, &d, one - 1, one), None);
}
