//! The forecast's rules one by one: the ceilings, pacing, cutoffs, blackouts, held and
//! unavailable nodes, the order and the durations learned.

use super::*;

#[test]
fn the_ceiling_starts_nodes_oldest_first_and_each_waits_for_a_slot() {
    let nodes = [
        Node::needing("c", None, 10),
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
    ];
    let f = run(
        &[nightly("")],
        &policy(2),
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    let order: Vec<&str> = f.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(order, ["a", "b", "c"], "the brain's order");
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "b"), pair("02:00:00", "02:20:00"));
    // The completed nodes hold their slots while they recover (--count-unavailable).
    assert_eq!(at_median(&f, "c"), pair("02:25:00", "02:45:00"));
    let Placement::Starts {
        occurrence,
        carried,
        ..
    } = median(&f, "c")
    else {
        panic!()
    };
    assert_eq!(occurrence.window.name, "nightly");
    assert_eq!(
        (occurrence.start, occurrence.end),
        (ts("2026-01-05T02:00:00Z"), ts("2026-01-05T04:00:00Z"))
    );
    assert_eq!(*carried, 0);
    assert_eq!(f.median.completion, Some(ts("2026-01-05T02:45:00Z")));
    assert_eq!(f.median.no_start, 0);
    assert_eq!(f.median.occurrences.len(), 1);
    assert_eq!(f.median.occurrences[0].started, 3);
    assert_eq!(f.median.occurrences[0].did_not_fit, 0);
}

#[test]
fn the_90th_percentile_is_forecast_with_its_own_durations() {
    let nodes = [Node::needing("a", None, 30), Node::needing("b", None, 20)];
    let d = Durations::given(
        Quantiles {
            median: mins(20),
            p90: mins(40),
        },
        Quantiles {
            median: mins(5),
            p90: mins(10),
        },
    );
    let f = run(&[nightly("")], &policy(1), &nodes, &d, monday());
    assert_eq!(at_median(&f, "b"), pair("02:25:00", "02:45:00"));
    let p = p90(&f, "b");
    assert_eq!(
        (clock(p.start()), clock(p.end())),
        pair("02:50:00", "03:30:00")
    );
    assert_eq!(f.p90.completion, Some(ts("2026-01-05T03:30:00Z")));
}

#[test]
fn a_group_ceiling_holds_a_zone_while_other_zones_start() {
    let nodes = [
        Node::needing("a1", Some("a"), 40),
        Node::needing("a2", Some("a"), 30),
        Node::needing("b1", Some("b"), 20),
        Node::needing("x1", None, 10),
    ];
    let p = Policy {
        group_ceilings: vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Count(1),
        }],
        ..policy(5)
    };
    let f = run(
        &[nightly("")],
        &p,
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a1"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "b1"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "x1"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "a2"), pair("02:25:00", "02:45:00"));
}

#[test]
fn starts_are_paced_from_the_last_start_or_end() {
    let nodes = [
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
        Node::needing("c", None, 10),
    ];
    let p = Policy {
        start_interval: Some(mins(15)),
        ..policy(3)
    };
    let f = run(
        &[nightly("")],
        &p,
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "b"), pair("02:15:00", "02:35:00"));
    // a's end at 02:20 restarts the interval: c waits until 02:35. b ends then, and an
    // end restarts it too, also in the pass that writes it: c starts at 02:50.
    assert_eq!(at_median(&f, "c"), pair("02:50:00", "03:10:00"));
}

#[test]
fn the_start_cutoff_carries_a_node_to_the_next_occurrence() {
    let nodes = [Node::needing("a", None, 30), Node::needing("b", None, 20)];
    let p = Policy {
        start_cutoff: mins(90),
        ..policy(1)
    };
    let f = run(
        &[nightly("")],
        &p,
        &nodes,
        &durations(mins(20), mins(15)),
        monday(),
    );
    // a ends at 02:20 and is back at 02:35, less than 90 minutes before 04:00.
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "b"), pair("+1d 02:00:00", "+1d 02:20:00"));
    let Placement::Starts {
        occurrence,
        carried,
        ..
    } = median(&f, "b")
    else {
        panic!()
    };
    assert_eq!(occurrence.start, ts("2026-01-06T02:00:00Z"));
    assert_eq!(*carried, 1);
    let first = &f.median.occurrences[0];
    assert_eq!(
        (first.occurrence.start, first.started, first.did_not_fit),
        (ts("2026-01-05T02:00:00Z"), 1, 1)
    );
    let second = &f.median.occurrences[1];
    assert_eq!((second.started, second.did_not_fit), (1, 0));
}

#[test]
fn a_blackout_stops_starts_and_the_nodes_wait_for_the_next_occurrence() {
    let nodes = [Node::needing("a", None, 30), Node::needing("b", None, 20)];
    let windows = [
        nightly(""),
        // Monday 02:30-04:00 frozen.
        test_window("freeze", "2026-01-05T02:30:00Z", "90m", "", true),
    ];
    let f = run(
        &windows,
        &policy(1),
        &nodes,
        &durations(mins(20), mins(15)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "b"), pair("+1d 02:00:00", "+1d 02:20:00"));
    assert_eq!(
        median(&f, "b"),
        &Placement::Starts {
            occurrence: WindowOccurrence {
                window: nightly("").id,
                start: ts("2026-01-06T02:00:00Z"),
                end: ts("2026-01-06T04:00:00Z"),
            },
            start: ts("2026-01-06T02:00:00Z"),
            end: Some(ts("2026-01-06T02:20:00Z")),
            carried: 1,
        }
    );
}

#[test]
fn a_blackout_does_not_end_maintenance_in_progress() {
    let nodes = [Node::needing("a", None, 30)];
    let windows = [
        nightly(""),
        test_window("freeze", "2026-01-05T02:10:00Z", "1h", "", true),
    ];
    let f = run(
        &windows,
        &policy(1),
        &nodes,
        &durations(mins(30), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:30:00"));
}

#[test]
fn stop_at_window_end_ends_maintenance_with_the_window() {
    let nodes = [Node::needing("a", None, 30), Node::needing("b", None, 20)];
    let p = Policy {
        stop_at_window_end: true,
        ..policy(1)
    };
    let f = run(
        &[nightly("")],
        &p,
        &nodes,
        &durations(mins(150), mins(5)),
        monday(),
    );
    // a's work would take until 04:30: the window's end at 04:00 stops it.
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "04:00:00"));
    // a is still down until 04:35: b starts the next night.
    assert_eq!(at_median(&f, "b").0, "+1d 02:00:00");
    let f = run(
        &[nightly("")],
        &policy(1),
        &nodes,
        &durations(mins(150), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "04:30:00"));
}

#[test]
fn without_required_conditions_every_selected_node_is_forecast() {
    let mut nodes = vec![
        Node::needing("a", Some("a"), 0),
        Node::needing("b", None, 0),
    ];
    for n in &mut nodes {
        n.conditions.clear();
    }
    let p = Policy {
        required: Vec::new(),
        ..policy(1)
    };
    let f = run(
        &[nightly("zone=a")],
        &p,
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(f.nodes.len(), 1, "b is selected by no window");
    // The reboot at 02:20 ends it (its boot ID changes).
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    // Without reboot detection it lasts until the window ends.
    let p = Policy {
        complete_on_reboot: false,
        ..p
    };
    let f = run(
        &[nightly("zone=a")],
        &p,
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "04:00:00"));
}

#[test]
fn unavailable_nodes_take_slots_and_are_listed_not_forecast() {
    let mut nodes = vec![
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
        Node::needing("c", None, 10),
        // Down, needing nothing: it holds a slot all along.
        Node::needing("down", None, 0),
    ];
    nodes[1].availability.ready = Some(Status::False);
    nodes[3].conditions[0].status = Status::False;
    nodes[3].availability.unschedulable = true;
    let f = run(
        &[nightly("")],
        &policy(2),
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(
        plan(&f, "b"),
        &Plan::Held {
            reason: reasons::NODE_UNAVAILABLE.into(),
            message: "the node is NotReady".into(),
        }
    );
    assert!(f.nodes.iter().all(|n| n.name != "down"), "needs nothing");
    // b and down hold both slots: nobody starts.
    assert_eq!(
        median(&f, "a"),
        &Placement::NoStart {
            why: Some(reasons::WAITING_FOR_SLOT.into()),
            carried: 30,
        }
    );
    assert_eq!(f.median.completion, None);
    assert_eq!(f.median.no_start, 2);
    // Counted only in progress: two start at once.
    let p = Policy {
        count_unavailable: false,
        ..policy(2)
    };
    let f = run(
        &[nightly("")],
        &p,
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "c"), pair("02:00:00", "02:20:00"));
}

#[test]
fn blocked_nodes_are_listed_with_the_brains_reason() {
    let mut nodes = vec![
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
        Node::needing("c", Some("a"), 10),
        Node::needing("d", None, 5),
    ];
    nodes[0].conditions.push(condition(BLOCK, true, monday()));
    nodes[1].pods.push(BlockingPod {
        name: "db/postgres-0".into(),
        selector: 0,
    });
    let p = Policy {
        block_node_selectors: vec![selector::parse("zone=a").unwrap()],
        block_pod_selectors: vec![selector::parse("app=postgres").unwrap()],
        ..policy(1)
    };
    let f = run(
        &[nightly("")],
        &p,
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    let held = |name| match plan(&f, name) {
        Plan::Held { reason, message } => (reason.clone(), message.clone()),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        held("a"),
        (reasons::BLOCKED.into(), format!("blocked by {BLOCK}"))
    );
    assert_eq!(
        held("b").1,
        r#"blocked by pod db/postgres-0 matching --block-pod-selector "app=postgres""#
    );
    assert_eq!(held("c").1, r#"blocked by --block-node-selector "zone=a""#);
    assert_eq!(at_median(&f, "d"), pair("02:00:00", "02:20:00"));
    assert_eq!(f.median.completion, Some(ts("2026-01-05T02:20:00Z")));
}

/// The forecast of `nodes` with the gates' holds: `holds` on the nodes named, `cluster`
/// on every start; the runs played in turn.
fn gated(
    nodes: &[Node],
    holds: &[(&str, Hold)],
    cluster: &[Hold],
    durations: &Durations,
) -> Forecast {
    let windows = [nightly("")];
    let windows: Vec<&Window> = windows.iter().collect();
    let on: Vec<Vec<Hold>> = nodes
        .iter()
        .map(|n| {
            (holds.iter())
                .filter(|(name, _)| *name == n.name)
                .map(|(_, h)| h.clone())
                .collect()
        })
        .collect();
    let views: Vec<NodeView> = nodes
        .iter()
        .zip(&on)
        .map(|(n, holds)| NodeView { holds, ..n.view() })
        .collect();
    let p = policy(1);
    let horizon = SignedDuration::from_hours(24 * 30);
    let runs = Runs::new(&windows, &p, &views, cluster, durations, monday(), horizon);
    let (median, p90) = (runs.play(Quantile::Median), runs.play(Quantile::P90));
    let expected = runs
        .drawing(&median, &p90)
        .and_then(|d| d.expected((0..Drawing::RUNS).map(|r| runs.play_drawn(&d, r, d.budget()))));
    runs.combine(median, p90, expected)
}

fn held_for(f: &Forecast, name: &str) -> (String, String) {
    match plan(f, name) {
        Plan::Held { reason, message } => (reason.clone(), message.clone()),
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_node_a_gate_holds_is_held_with_the_gates_reason() {
    let nodes = vec![
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
        Node::needing("c", None, 10),
    ];
    let pdb = Hold {
        reason: reasons::POD_DISRUPTION_BUDGET,
        message: "would take db/pg below its minimum".into(),
    };
    let f = gated(
        &nodes,
        &[("a", pdb.clone())],
        &[],
        &durations(mins(20), mins(5)),
    );
    assert_eq!(
        held_for(&f, "a"),
        (reasons::POD_DISRUPTION_BUDGET.into(), pdb.message.clone())
    );
    // The others take its turn: b first, then c.
    assert_eq!(at_median(&f, "b"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "c"), pair("02:25:00", "02:45:00"));
    // Without the hold, a would go first.
    let free = gated(&nodes, &[], &[], &durations(mins(20), mins(5)));
    assert_eq!(at_median(&free, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(
        free,
        run(
            &[nightly("")],
            &policy(1),
            &nodes,
            &durations(mins(20), mins(5)),
            monday()
        )
    );
}

#[test]
fn a_hold_on_every_start_holds_every_waiting_node_and_no_node_in_progress() {
    let mut nodes = vec![
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
        Node::needing("c", None, 10),
    ];
    // In progress since 01:50: its maintenance goes on to its end.
    nodes[2].conditions.push(condition(
        MAINTENANCE_IN_PROGRESS,
        true,
        ts("2026-01-05T01:50:00Z"),
    ));
    let alert = Hold {
        reason: reasons::ALERT_FIRING,
        message: "alert NodeDown is firing".into(),
    };
    let now = monday();
    let f = gated(
        &nodes,
        &[],
        std::slice::from_ref(&alert),
        &durations(mins(20), mins(5)),
    );
    for name in ["a", "b"] {
        assert_eq!(
            held_for(&f, name),
            (reasons::ALERT_FIRING.into(), alert.message.clone()),
            "{now}"
        );
    }
    match plan(&f, "c") {
        Plan::Forecast {
            median: Placement::InProgress { since, end },
            ..
        } => {
            assert_eq!(*since, ts("2026-01-05T01:50:00Z"));
            assert_eq!(*end, Some(ts("2026-01-05T02:10:00Z")));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.median.completion, Some(ts("2026-01-05T02:10:00Z")));
}

#[test]
fn a_node_no_window_selects_within_the_horizon_has_no_start() {
    let nodes = [
        Node::needing("a", Some("a"), 30),
        Node::needing("b", Some("b"), 20),
    ];
    let windows = [
        nightly("zone=a"),
        // Once, in two months.
        test_window("later", "2026-03-01T02:00:00Z", "2h", "zone=b", false),
    ];
    let f = run(
        &windows,
        &policy(1),
        &nodes,
        &durations(mins(20), mins(5)),
        monday(),
    );
    assert_eq!(at_median(&f, "a"), pair("02:00:00", "02:20:00"));
    assert_eq!(
        median(&f, "b"),
        &Placement::NoStart {
            why: None,
            carried: 0
        }
    );
    assert_eq!(f.median.completion, None);
    assert_eq!(
        f.horizon_end,
        monday() + SignedDuration::from_hours(24 * 30)
    );
}

#[test]
fn maintenance_in_progress_and_recovering_nodes_finish_first() {
    let mut nodes = vec![
        Node::needing("a", None, 30),
        Node::needing("b", None, 20),
        Node::needing("busy", None, 40),
        Node::needing("back", None, 50),
    ];
    let now = ts("2026-01-05T02:10:00Z");
    nodes[2].conditions.push(Condition {
        message: "maintenance started (boot ID busy-boot) in window ops/nightly".into(),
        ..condition(MAINTENANCE_IN_PROGRESS, true, ts("2026-01-05T02:00:00Z"))
    });
    // Completed at 02:05, still down.
    nodes[3].conditions = vec![
        condition(REBOOT, false, ts("2026-01-05T02:05:00Z")),
        Condition {
            reason: reasons::MAINTENANCE_COMPLETED.into(),
            ..condition(MAINTENANCE_IN_PROGRESS, false, ts("2026-01-05T02:05:00Z"))
        },
    ];
    nodes[3].availability.ready = Some(Status::False);
    let f = run(
        &[nightly("")],
        &policy(2),
        &nodes,
        &durations(mins(20), mins(10)),
        now,
    );
    assert_eq!(
        median(&f, "busy"),
        &Placement::InProgress {
            since: ts("2026-01-05T02:00:00Z"),
            end: Some(ts("2026-01-05T02:20:00Z")),
        }
    );
    assert!(
        f.nodes.iter().all(|n| n.name != "back"),
        "needs nothing more"
    );
    // back recovers at 02:15: a starts; busy's slot frees at 02:30: b starts.
    assert_eq!(at_median(&f, "a"), pair("02:15:00", "02:35:00"));
    assert_eq!(at_median(&f, "b"), pair("02:30:00", "02:50:00"));
}

#[test]
fn the_forecast_is_deterministic_and_independent_of_the_nodes_order() {
    let mut nodes: Vec<Node> = (0..40)
        .map(|i| {
            Node::needing(
                &format!("n{i:02}"),
                [Some("a"), Some("b"), None][i % 3],
                (i as i64 * 7) % 11,
            )
        })
        .collect();
    let p = Policy {
        group_ceilings: vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Count(1),
        }],
        start_interval: Some(mins(3)),
        ..policy(2)
    };
    let windows = [
        nightly(""),
        test_window("a", "0 3 * * *", "1h", "zone=a", false),
    ];
    let d = durations(mins(12), mins(4));
    let f = run(&windows, &p, &nodes, &d, monday());
    assert_eq!(f, run(&windows, &p, &nodes, &d, monday()));
    nodes.reverse();
    assert_eq!(f, run(&windows, &p, &nodes, &d, monday()));
    assert!(f.median.completion.is_some());
}

#[test]
fn quantiles_are_nearest_rank_and_learned_from_the_records() {
    let mut s: Vec<SignedDuration> = (1..=10).map(secs).collect();
    assert_eq!(
        Quantiles::of(&mut s),
        Some(Quantiles {
            median: secs(5),
            p90: secs(9)
        })
    );
    assert_eq!(Quantiles::of(&mut []), None);
    assert_eq!(
        Quantiles::of(&mut [secs(7)]),
        Some(Quantiles::fixed(secs(7)))
    );
    let end = |reason: &str, message: &str| {
        vec![Condition {
            reason: reason.into(),
            message: message.into(),
            ..condition(MAINTENANCE_IN_PROGRESS, false, monday())
        }]
    };
    let nodes = [
        end(
            reasons::MAINTENANCE_COMPLETED,
            "r is no longer True; completed after 6m0s, recovered after 1m0s",
        ),
        end(
            reasons::NODE_REBOOTED,
            "the node rebooted (boot ID a -> b); completed after 4m0s; a new maintenance waits",
        ),
        end(
            reasons::MAINTENANCE_WINDOW_ENDED,
            "the maintenance window ended; stopped after 3h0m0s, recovered after 3m0s",
        ),
        end(reasons::WAITING_FOR_SLOT, "1/1 slots in use"),
        vec![condition(REBOOT, true, monday())],
    ];
    let learned = learn(nodes.iter().map(Vec::as_slice));
    assert_eq!(learned.maintenance.samples(), 2, "not the stopped one");
    assert_eq!(
        learned.maintenance.quantiles,
        Some(Quantiles {
            median: mins(4),
            p90: mins(6)
        })
    );
    assert_eq!(learned.recovery.samples(), 2);
    assert_eq!(
        learned.recovery.quantiles,
        Some(Quantiles {
            median: mins(1),
            p90: mins(3)
        })
    );
}

/// A node a drain is disrupting (`DrainInProgress=True`) that no window selects and that
/// needs nothing: the forecast counts it against the ceilings as the brain does, overall
/// and in its zone, for as long as it is seen (the drain's end is not foreseen).
#[test]
fn a_drained_node_outside_any_window_takes_a_slot_overall_and_in_its_zone() {
    let in_pool = |name: &str, zone: &str, since: i64| {
        let mut n = Node::needing(name, Some(zone), since);
        n.labels.insert("pool".into(), "web".into());
        n
    };
    let mut drained = Node::needing("drained", Some("a"), 0);
    drained.conditions[0].status = Status::False;
    drained.availability.disrupted_by = in_progress::Lifecycle::of(|t| t == "DrainInProgress");
    let windows = [nightly("pool=web")];
    let nodes = [in_pool("a1", "a", 30), in_pool("b1", "b", 20), drained];
    let d = durations(mins(20), mins(5));

    // Overall: of two slots, the drain holds one; b1 waits for a1 and its recovery.
    let f = run(&windows, &policy(2), &nodes, &d, monday());
    assert!(f.nodes.iter().all(|n| n.name != "drained"), "needs nothing");
    assert_eq!(at_median(&f, "a1"), pair("02:00:00", "02:20:00"));
    assert_eq!(at_median(&f, "b1"), pair("02:25:00", "02:45:00"));

    // Per zone: the drain holds zone a's one slot, so a1 does not start; b1 does.
    let p = Policy {
        group_ceilings: vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Count(1),
        }],
        ..policy(5)
    };
    let f = run(&windows, &p, &nodes, &d, monday());
    assert_eq!(at_median(&f, "b1"), pair("02:00:00", "02:20:00"));
    assert!(
        matches!(
            median(&f, "a1"),
            Placement::NoStart { why: Some(why), .. } if why == reasons::WAITING_FOR_SLOT
        ),
        "{:?}",
        median(&f, "a1")
    );
}
