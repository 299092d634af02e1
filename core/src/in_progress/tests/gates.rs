//! The health gates in the decision: they hold starts only, in their place among the
//! reasons, and the PodDisruptionBudgets' headroom is shared.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::budgets::{Budget, Budgets, Phase, Pod};
use crate::selector;

fn web(name: &str) -> Pod {
    Pod {
        namespace: "shop".into(),
        name: name.into(),
        labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
        phase: Phase::Running,
        terminating: false,
        ready: true,
        daemon_set: false,
        mirror: false,
    }
}

fn allowing(n: i32) -> Budgets {
    Budgets::new([Budget {
        namespace: "shop".into(),
        name: "frontend".into(),
        selector: Some(selector::parse("app=web").unwrap()),
        disruptions_allowed: n,
        behind: None,
        current_healthy: 3,
        desired_healthy: 2,
        always_allow_unhealthy: false,
    }])
}

fn alert() -> Hold {
    Hold {
        reason: reasons::ALERT_FIRING,
        message: "alert KubeAPIDown firing".into(),
    }
}

fn why(d: &Option<Desired>) -> Option<(bool, &str, &str)> {
    d.as_ref()
        .map(|d| (d.status, d.reason.as_str(), d.message.as_str()))
}

#[test]
fn a_hold_on_every_start_holds_the_nodes_that_would_start_and_no_other() {
    let wait = [cond(REBOOT, true, 100)];
    let running = [
        cond(REBOOT, true, 50),
        cond(MAINTENANCE_IN_PROGRESS, true, 60),
    ];
    let holds = [alert()];
    let gates = Gates {
        pause: None,
        cluster: &holds,
        budgets: None,
    };
    // One slot free (of 2): both waiting nodes are asked, neither starts; the node in
    // progress goes on.
    let d = decide(
        &policy(2),
        &[
            node("a", &wait, true),
            node("b", &wait, true),
            node("r", &running, true),
        ],
        &gates,
        now(),
    );
    assert_eq!(
        why(&d.conditions[0]),
        Some((false, reasons::ALERT_FIRING, "alert KubeAPIDown firing"))
    );
    assert_eq!(why(&d.conditions[1]).unwrap().1, reasons::ALERT_FIRING);
    assert!(why(&d.conditions[2]).unwrap().0);
    // Every slot taken: the waiting node keeps waiting for a slot, and the alert coming
    // and going rewrites nothing.
    let d = decide(
        &policy(1),
        &[node("a", &wait, true), node("r", &running, true)],
        &gates,
        now(),
    );
    assert_eq!(why(&d.conditions[0]).unwrap().1, reasons::WAITING_FOR_SLOT);
}

#[test]
fn a_hold_on_one_node_is_about_the_node_itself_and_never_ends_its_maintenance() {
    let wait = [cond(REBOOT, true, 100)];
    let running = [
        cond(REBOOT, true, 50),
        cond(MAINTENANCE_IN_PROGRESS, true, 60),
    ];
    let holds = [alert()];
    let mut a = node("a", &wait, true);
    a.holds = &holds;
    let mut r = node("r", &running, true);
    r.holds = &holds;
    let b = node("b", &wait, true);
    let d = decide(&policy(2), &[a, r, b], &Gates::NONE, now());
    assert_eq!(why(&d.conditions[0]).unwrap().1, reasons::ALERT_FIRING);
    assert!(why(&d.conditions[1]).unwrap().0, "in progress goes on");
    assert!(why(&d.conditions[2]).unwrap().0, "b takes the free slot");
    // With every slot taken it still says why it would not start anyway.
    let d = decide(&policy(1), &[a, r], &Gates::NONE, now());
    assert_eq!(why(&d.conditions[0]).unwrap().1, reasons::ALERT_FIRING);
}

#[test]
fn two_nodes_sharing_a_budget_that_allows_one_start_one_at_a_time() {
    let older = [cond(REBOOT, true, 100)];
    let newer = [cond(REBOOT, true, 200)];
    let budgets = allowing(1);
    let gates = Gates {
        pause: None,
        cluster: &[],
        budgets: Some(&budgets),
    };
    let pa = [web("web-a")];
    let pb = [web("web-b")];
    let mut a = node("a", &older, true);
    a.drain = Some(&pa);
    let mut b = node("b", &newer, true);
    b.drain = Some(&pb);
    let d = decide(&policy(2), &[b, a], &gates, now());
    assert!(d.needs_pods.is_empty());
    assert!(why(&d.conditions[1]).unwrap().0, "the older starts");
    assert_eq!(
        why(&d.conditions[0]),
        Some((
            false,
            reasons::POD_DISRUPTION_BUDGET,
            "PodDisruptionBudget shop/frontend allows 1 disruptions, used by node a (pod \
             shop/web-b)"
        ))
    );
    // Next pass: a in progress, its pod not yet evicted: b still waits; the budget's
    // status says 1 until the eviction.
    let a_running = [
        cond(REBOOT, true, 100),
        cond(MAINTENANCE_IN_PROGRESS, true, 300),
    ];
    let mut a = node("a", &a_running, true);
    a.drain = Some(&pa);
    let d = decide(&policy(2), &[b, a], &gates, now());
    assert_eq!(
        why(&d.conditions[0]).unwrap().1,
        reasons::POD_DISRUPTION_BUDGET
    );
    // a's pod gone, its replacement healthy elsewhere (the budget allows 1 again): b
    // starts while a is still in progress.
    a.drain = Some(&[]);
    let d = decide(&policy(2), &[b, a], &gates, now());
    assert!(why(&d.conditions[0]).unwrap().0);
}

#[test]
fn a_node_whose_budget_allows_nothing_waits_and_the_next_one_takes_the_slot() {
    let older = [cond(REBOOT, true, 100)];
    let newer = [cond(REBOOT, true, 200)];
    let budgets = allowing(0);
    let gates = Gates {
        pause: None,
        cluster: &[],
        budgets: Some(&budgets),
    };
    let pa = [web("web-a")];
    let mut a = node("a", &older, true);
    a.drain = Some(&pa);
    let mut b = node("b", &newer, true);
    b.drain = Some(&[]);
    let d = decide(&policy(1), &[a, b], &gates, now());
    assert_eq!(
        why(&d.conditions[0]),
        Some((
            false,
            reasons::POD_DISRUPTION_BUDGET,
            "PodDisruptionBudget shop/frontend allows 0 disruptions (pod shop/web-a)"
        ))
    );
    assert!(why(&d.conditions[1]).unwrap().0);
}

#[test]
fn pods_not_listed_are_asked_for_and_nothing_starts_on_a_guess() {
    let wait = [cond(REBOOT, true, 100)];
    let running = [
        cond(REBOOT, true, 50),
        cond(MAINTENANCE_IN_PROGRESS, true, 60),
    ];
    let budgets = allowing(1);
    let gates = Gates {
        pause: None,
        cluster: &[],
        budgets: Some(&budgets),
    };
    let slot_message = [Condition {
        reason: reasons::WAITING_FOR_SLOT.into(),
        ..cond(MAINTENANCE_IN_PROGRESS, false, 70)
    }];
    let waiting = [wait[0].clone(), slot_message[0].clone()];
    // 3 slots, 1 in progress: both waiting nodes would start; nobody's pods are known.
    let nodes = [
        node("a", &wait, true),
        node("b", &waiting, true),
        node("r", &running, true),
    ];
    let d = decide(&policy(3), &nodes, &gates, now());
    assert_eq!(d.needs_pods, vec![0, 1, 2]);
    assert_eq!(
        d.conditions[0], None,
        "a is left as it is: no condition yet"
    );
    assert_eq!(
        why(&d.conditions[1]).unwrap().1,
        reasons::WAITING_FOR_SLOT,
        "b keeps what it shows"
    );
    assert!(why(&d.conditions[2]).unwrap().0);
    // A node waiting for a slot is not listed: only the one that would start.
    let d = decide(&policy(2), &nodes, &gates, now());
    assert_eq!(d.needs_pods, vec![0, 2]);
    assert_eq!(why(&d.conditions[1]).unwrap().1, reasons::WAITING_FOR_SLOT);
    // Without the gate nothing is asked.
    let d = decide(&policy(3), &nodes, &Gates::NONE, now());
    assert!(d.needs_pods.is_empty());
}

/// A node of the generated fleets: (in progress, its pods as (budget index, ready)).
type Generated = (bool, Vec<(usize, bool)>);

proptest! {
    /// Whatever the nodes' pods, budgets and maintenances in progress: a node in progress
    /// stays in progress, the ceiling holds, and the nodes started never need more of a
    /// budget than it has left after the nodes in progress (each start needs one).
    #[test]
    fn no_start_whose_drain_a_budget_would_refuse(
        allowed in prop::collection::vec(-1i32..3, 1..4),
        fleet in prop::collection::vec(
            (any::<bool>(), prop::collection::vec((0usize..4, any::<bool>()), 0..3)),
            1..8,
        ),
        ceiling in 1u32..6,
    ) {
        let budgets = Budgets::new(allowed.iter().enumerate().map(|(i, &n)| Budget {
            namespace: "ns".into(),
            name: format!("b{i}"),
            selector: Some(selector::parse(&format!("app=a{i}")).unwrap()),
            disruptions_allowed: n,
            behind: None,
            current_healthy: 3,
            desired_healthy: 2,
            always_allow_unhealthy: false,
        }));
        let gates = Gates { budgets: Some(&budgets), ..Gates::NONE };
        let fleet: Vec<Generated> = fleet;
        let names: Vec<String> = (0..fleet.len()).map(|i| format!("n{i}")).collect();
        let conds: Vec<Vec<Condition>> = fleet
            .iter()
            .enumerate()
            .map(|(i, (running, _))| {
                let mut c = vec![cond(REBOOT, true, 100 + i as i64)];
                if *running {
                    c.push(cond(MAINTENANCE_IN_PROGRESS, true, 50));
                }
                c
            })
            .collect();
        let pods: Vec<Vec<Pod>> = fleet
            .iter()
            .enumerate()
            .map(|(i, (_, list))| {
                list.iter()
                    .enumerate()
                    .map(|(k, &(b, ready))| Pod {
                        namespace: "ns".into(),
                        name: format!("n{i}-{k}"),
                        labels: BTreeMap::from([("app".to_string(), format!("a{b}"))]),
                        phase: Phase::Running,
                        terminating: false,
                        ready,
                        daemon_set: false,
                        mirror: false,
                    })
                    .collect()
            })
            .collect();
        let states: Vec<NodeState> = (0..fleet.len())
            .map(|i| NodeState {
                drain: Some(&pods[i]),
                ..node(&names[i], &conds[i], true)
            })
            .collect();
        let d = decide(&policy(ceiling), &states, &gates, now());
        prop_assert!(d.needs_pods.is_empty());
        let started: Vec<usize> = (0..fleet.len())
            .filter(|&i| !fleet[i].0 && d.conditions[i].as_ref().is_some_and(|d| d.status))
            .collect();
        for (i, (running, _)) in fleet.iter().enumerate() {
            if *running {
                prop_assert!(d.conditions[i].as_ref().is_some_and(|d| d.status));
            }
        }
        let running = fleet.iter().filter(|n| n.0).count();
        prop_assert!(started.is_empty() || running + started.len() <= ceiling as usize);
        for (b, &allowed) in allowed.iter().enumerate() {
            let uses = |i: usize| fleet[i].1.iter().filter(|&&(pb, ready)| pb == b && ready).count();
            let held = (0..fleet.len()).filter(|&i| fleet[i].0).map(uses).sum::<usize>() as i32;
            let starting = started.iter().filter(|&&i| uses(i) > 0).count() as i32;
            prop_assert!(
                starting <= (allowed.max(0) - held).max(0),
                "budget {b} allows {allowed}, {held} held by nodes in progress, {starting} nodes started"
            );
        }
    }
}

#[test]
fn a_gate_rewrites_its_message_when_the_cause_changes_and_only_then() {
    let holds = [alert()];
    let gates = Gates {
        pause: None,
        cluster: &holds,
        budgets: None,
    };
    let shown = [
        cond(REBOOT, true, 100),
        Condition {
            reason: reasons::ALERT_FIRING.into(),
            message: "alert KubeAPIDown firing".into(),
            ..cond(MAINTENANCE_IN_PROGRESS, false, 70)
        },
    ];
    let d = decide(&policy(1), &[node("a", &shown, true)], &gates, now());
    assert_eq!(
        d.conditions[0],
        Some(Desired::keep(&shown[1])),
        "the same cause: nothing to write"
    );
    let other = [Hold {
        reason: reasons::ALERT_FIRING,
        message: "alert NodeDown firing".into(),
    }];
    let gates = Gates {
        pause: None,
        cluster: &other,
        budgets: None,
    };
    let d = decide(&policy(1), &[node("a", &shown, true)], &gates, now());
    assert_eq!(
        why(&d.conditions[0]),
        Some((false, reasons::ALERT_FIRING, "alert NodeDown firing"))
    );
}

fn paused() -> Hold {
    Hold {
        reason: reasons::PAUSED,
        message: "paused by alice at 2026-01-01T02:55:00Z: incident 42".into(),
    }
}

#[test]
fn the_pause_holds_every_waiting_node_and_lets_maintenance_in_progress_finish() {
    let wait = [cond(REBOOT, true, 100)];
    let running = [
        cond(REBOOT, true, 50),
        cond(MAINTENANCE_IN_PROGRESS, true, 60),
    ];
    let done = [cond(REBOOT, false, 100)];
    let pause = paused();
    let gates = Gates {
        pause: Some(&pause),
        ..Gates::NONE
    };
    let mut down = node("down", &wait, true);
    down.availability.ready = Some(Status::False);
    let nodes = [
        node("a", &wait, true),
        node("b", &wait, true),
        node("r", &running, true),
        node("idle", &done, true),
        down,
    ];
    // One slot free (the node in progress and the one down take two of three): without
    // the pause "b" would wait for a slot; with it, every node that would wait or start
    // says why, in the person's words.
    let d = decide(&policy(3), &nodes, &gates, now());
    for i in [0, 1, 4] {
        assert_eq!(
            why(&d.conditions[i]),
            Some((
                false,
                reasons::PAUSED,
                "paused by alice at 2026-01-01T02:55:00Z: incident 42"
            )),
            "{}",
            nodes[i].name
        );
    }
    assert!(why(&d.conditions[2]).unwrap().0, "in progress goes on");
    assert_eq!(
        why(&d.conditions[3]).unwrap().1,
        reasons::REQUIREMENT_NOT_MET,
        "a node that needs no maintenance is not waiting for the pause"
    );
    // Resumed: the reasons come back.
    let d = decide(&policy(3), &nodes, &Gates::NONE, now());
    assert!(why(&d.conditions[0]).unwrap().0);
    assert_eq!(why(&d.conditions[1]).unwrap().1, reasons::WAITING_FOR_SLOT);
    assert_eq!(why(&d.conditions[4]).unwrap().1, reasons::NODE_UNAVAILABLE);
}

/// The reasons a waiting node shows when several apply, in the order
/// docs/maintenance-in-progress.md gives: the pause; what the node itself shows
/// (unavailable, blocked, an alert naming it); the window's cutoff; the slots; the
/// pacing; the holds on every start, in gate order; its PodDisruptionBudgets. Each is
/// taken away in turn and the next one shows.
#[test]
fn the_reasons_a_waiting_node_shows_come_in_their_documented_order() {
    let wait = [cond(REBOOT, true, 100), cond(BLOCK, true, 100)];
    let unblocked = [cond(REBOOT, true, 100)];
    let running = [
        cond(REBOOT, true, 50),
        cond(MAINTENANCE_IN_PROGRESS, true, 60),
    ];
    let recent = [
        cond(REBOOT, false, 100),
        Condition {
            reason: reasons::MAINTENANCE_COMPLETED.into(),
            ..cond(MAINTENANCE_IN_PROGRESS, false, now().as_second() - 10)
        },
    ];
    let pause = paused();
    let node_hold = [alert()];
    let cluster = [
        Hold {
            reason: reasons::GATE_UNAVAILABLE,
            message: "the PodDisruptionBudgets cannot be read".into(),
        },
        alert(),
    ];
    let budgets = allowing(0);
    let pods = [web("web-a")];
    let mut p = policy(1);
    p.start_interval = Some(SignedDuration::from_mins(5));
    p.start_cutoff = SignedDuration::from_hours(3);
    // Everything holds: the node, its window's end near, a slot taken, a start or end
    // within the interval, the gates.
    let mut step = 0;
    let mut expect = |reason: &str,
                      conds: &[Condition],
                      unavailable: bool,
                      hold: &[Hold],
                      cutoff: bool,
                      others: &[NodeState],
                      gates: &Gates| {
        let mut n = node("n", conds, true);
        if unavailable {
            n.availability.unschedulable = true;
        }
        n.holds = hold;
        if !cutoff {
            n.window = Some(("window ops/w", None));
        }
        n.drain = Some(&pods);
        let mut all = vec![n];
        all.extend_from_slice(others);
        let d = decide(&p, &all, gates, now());
        assert_eq!(why(&d.conditions[0]).unwrap().1, reason, "step {step}");
        step += 1;
    };
    let full = [node("r", &running, true)];
    let pacing = [node("p", &recent, true)];
    let all_gates = Gates {
        pause: Some(&pause),
        cluster: &cluster,
        budgets: Some(&budgets),
    };
    let no_pause = Gates {
        pause: None,
        ..all_gates
    };
    let budgets_only = Gates {
        budgets: Some(&budgets),
        ..Gates::NONE
    };
    expect(
        reasons::PAUSED,
        &wait,
        true,
        &node_hold,
        true,
        &full,
        &all_gates,
    );
    expect(
        reasons::NODE_UNAVAILABLE,
        &wait,
        true,
        &node_hold,
        true,
        &full,
        &no_pause,
    );
    expect(
        reasons::BLOCKED,
        &wait,
        false,
        &node_hold,
        true,
        &full,
        &no_pause,
    );
    expect(
        reasons::ALERT_FIRING,
        &unblocked,
        false,
        &node_hold,
        true,
        &full,
        &no_pause,
    );
    expect(
        reasons::START_CUTOFF,
        &unblocked,
        false,
        &[],
        true,
        &full,
        &no_pause,
    );
    expect(
        reasons::WAITING_FOR_SLOT,
        &unblocked,
        false,
        &[],
        false,
        &full,
        &no_pause,
    );
    expect(
        reasons::START_INTERVAL,
        &unblocked,
        false,
        &[],
        false,
        &pacing,
        &no_pause,
    );
    expect(
        reasons::GATE_UNAVAILABLE,
        &unblocked,
        false,
        &[],
        false,
        &[],
        &no_pause,
    );
    expect(
        reasons::POD_DISRUPTION_BUDGET,
        &unblocked,
        false,
        &[],
        false,
        &[],
        &budgets_only,
    );
    expect(
        reasons::MAINTENANCE_WINDOW,
        &unblocked,
        false,
        &[],
        false,
        &[],
        &Gates::NONE,
    );
}
