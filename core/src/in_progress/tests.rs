mod availability;
mod gates;
mod reboot;
mod records;

use super::*;
use crate::conditions::Status;
use crate::testing::ts;
use proptest::prelude::*;

const REBOOT: &str = "kured.dev/RebootRequired";
const BLOCK: &str = "kured.dev/RebootBlocked";

fn cond(type_: &str, status: bool, since: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: Status::from(status),
        reason: "R".into(),
        message: "m".into(),
        last_transition_time: Some(Timestamp::from_second(since).unwrap()),
        last_heartbeat_time: None,
    }
}

fn policy(n: u32) -> Policy {
    Policy {
        required: vec![REBOOT.into()],
        blocking: vec![BLOCK.into()],
        ..Policy::with_ceiling(Ceiling::Count(n))
    }
}

/// No labels: the nodes of these tests are told apart by their conditions.
static NO_LABELS: std::sync::LazyLock<std::collections::BTreeMap<String, String>> =
    std::sync::LazyLock::new(Default::default);

fn now() -> Timestamp {
    ts("2026-01-01T03:00:00Z")
}

fn window() -> Option<(&'static str, Option<Timestamp>)> {
    Some(("window ops/w", Some(ts("2026-01-01T05:00:00Z"))))
}

fn node<'a>(name: &'a str, conds: &'a [Condition], in_window: bool) -> NodeState<'a> {
    NodeState {
        name,
        window: if in_window { window() } else { None },
        window_active: in_window,
        blackout: None,
        conditions: conds,
        labels: &*NO_LABELS,
        availability: Availability::default(),
        pods: &[],
        boot_id: None,
        holds: &[],
        drain: None,
    }
}

fn status(d: &Option<Desired>) -> Option<(bool, &str)> {
    d.as_ref().map(|d| (d.status, d.reason.as_str()))
}

#[test]
fn oldest_requirement_first_then_by_name_up_to_the_ceiling() {
    let a = [cond(REBOOT, true, 300)];
    let b = [cond(REBOOT, true, 100)];
    let c = [cond(REBOOT, true, 100)];
    let d = [cond(REBOOT, true, 200)];
    let nodes = [
        node("a", &a, true),
        node("c", &c, true),
        node("b", &b, true),
        node("d", &d, true),
    ];
    let out = decide_conditions(&policy(2), &nodes, now());
    // b and c are oldest (tie broken by name), then d, then a.
    assert_eq!(status(&out[2]), Some((true, reasons::MAINTENANCE_WINDOW))); // b
    assert_eq!(status(&out[1]), Some((true, reasons::MAINTENANCE_WINDOW))); // c
    assert_eq!(status(&out[3]), Some((false, reasons::WAITING_FOR_SLOT))); // d
    assert_eq!(status(&out[0]), Some((false, reasons::WAITING_FOR_SLOT))); // a
    assert_eq!(out[0].as_ref().unwrap().message, "2/2 slots in use");
    assert!(out[1].as_ref().unwrap().message.contains("window ops/w"));
    assert!(out[1].as_ref().unwrap().message.contains(REBOOT));
}

#[test]
fn a_node_draining_or_shutting_down_takes_a_slot_and_does_not_start() {
    let r = [cond(REBOOT, true, 100)];
    let mut draining = node("a", &r, true);
    draining.availability.disrupted_by = Some(Lifecycle::Draining);
    let mut down = node("b", &r, true);
    down.availability.disrupted_by = Some(Lifecycle::ShuttingDown);
    let ready = node("c", &r, true);
    let d = decide(&policy(2), &[draining, down, ready], &Gates::NONE, now());
    let out = &d.conditions;
    assert_eq!(status(&out[0]), Some((false, reasons::NODE_UNAVAILABLE)));
    assert_eq!(
        out[0].as_ref().unwrap().message,
        "the node is draining (DrainInProgress)"
    );
    assert_eq!(
        out[1].as_ref().unwrap().message,
        "the node is shutting down (GracefulNodeShutdownInProgress)"
    );
    assert_eq!(status(&out[2]), Some((false, reasons::WAITING_FOR_SLOT)));
    assert_eq!(d.overall.unavailable, 2);
}

#[test]
fn why_not_reasons() {
    let missing: [Condition; 0] = [];
    let blocked = [cond(REBOOT, true, 1), cond(BLOCK, true, 1)];
    let nodes = [node("m", &missing, true), node("b", &blocked, true)];
    let out = decide_conditions(&policy(5), &nodes, now());
    assert_eq!(status(&out[0]), Some((false, reasons::REQUIREMENT_NOT_MET)));
    assert!(out[0].as_ref().unwrap().message.contains(REBOOT));
    assert_eq!(status(&out[1]), Some((false, reasons::BLOCKED)));
    assert!(out[1].as_ref().unwrap().message.contains(BLOCK));
}

#[test]
fn completed_stays_completed_while_the_requirement_is_gone() {
    let mut done = cond(MAINTENANCE_IN_PROGRESS, false, 5);
    done.reason = reasons::MAINTENANCE_COMPLETED.into();
    let conds = [cond(REBOOT, false, 5), done];
    let out = decide_conditions(&policy(1), &[node("n", &conds, true)], now());
    assert_eq!(
        status(&out[0]),
        Some((false, reasons::MAINTENANCE_COMPLETED))
    );
    // Needing a reboot again in the window makes it a candidate again.
    let conds = [cond(REBOOT, true, 6), conds[1].clone()];
    let out = decide_conditions(&policy(1), &[node("n", &conds, true)], now());
    assert_eq!(status(&out[0]), Some((true, reasons::MAINTENANCE_WINDOW)));
}

/// `--start-interval` counts from an end as from a start, also in the pass that writes
/// the end: with a free slot, no other node starts in it (the end's
/// `lastTransitionTime` will be now, though the node still shows its start's).
#[test]
fn no_start_in_the_pass_that_ends_a_maintenance_with_an_interval() {
    let hour_ago = now().as_second() - 3600;
    let mut running = cond(MAINTENANCE_IN_PROGRESS, true, hour_ago);
    running.reason = reasons::MAINTENANCE_WINDOW.into();
    // a's requirement cleared: its maintenance ends now. b waits, and a slot is free.
    let a = [cond(REBOOT, false, now().as_second() - 10), running];
    let b = [cond(REBOOT, true, hour_ago)];
    let p = Policy {
        start_interval: Some(SignedDuration::from_mins(10)),
        ..policy(2)
    };
    let out = decide(
        &p,
        &[node("a", &a, true), node("b", &b, true)],
        &Gates::NONE,
        now(),
    );
    assert_eq!(
        status(&out.conditions[0]),
        Some((false, reasons::MAINTENANCE_COMPLETED))
    );
    assert_eq!(
        status(&out.conditions[1]),
        Some((false, reasons::START_INTERVAL))
    );
    assert_eq!(out.next_start, Some(ts("2026-01-01T03:10:00Z")));
    // Without the interval, b starts in the same pass.
    let out = decide(
        &policy(2),
        &[node("a", &a, true), node("b", &b, true)],
        &Gates::NONE,
        now(),
    );
    assert_eq!(
        status(&out.conditions[1]),
        Some((true, reasons::MAINTENANCE_WINDOW))
    );
}

#[test]
fn start_cutoff() {
    let ok = [cond(REBOOT, true, 1)];
    let mut p = policy(5);
    p.start_cutoff = SignedDuration::from_hours(3);
    let out = decide_conditions(&p, &[node("n", &ok, true)], now());
    assert_eq!(status(&out[0]), Some((false, reasons::START_CUTOFF)));
    assert!(out[0].as_ref().unwrap().message.contains("3h0m0s"));
    p.start_cutoff = SignedDuration::from_hours(2);
    let out = decide_conditions(&p, &[node("n", &ok, true)], now());
    assert_eq!(status(&out[0]), Some((true, reasons::MAINTENANCE_WINDOW)));
}

#[test]
fn nodes_outside_windows_never_get_the_condition() {
    let ok = [cond(REBOOT, true, 1)];
    let out = decide_conditions(&policy(5), &[node("n", &ok, false)], now());
    assert_eq!(out[0], None);
}

#[test]
fn in_progress_continues_past_window_end_and_blockers_until_requirement_clears() {
    let running = [
        cond(REBOOT, true, 1),
        cond(BLOCK, true, 2),
        cond(MAINTENANCE_IN_PROGRESS, true, 1),
    ];
    let out = decide_conditions(&policy(1), &[node("n", &running, false)], now());
    assert_eq!(status(&out[0]), Some((true, "R")));
    let done = [
        cond(REBOOT, false, 3),
        cond(MAINTENANCE_IN_PROGRESS, true, 1),
    ];
    let out = decide_conditions(&policy(1), &[node("n", &done, true)], now());
    assert_eq!(
        status(&out[0]),
        Some((false, reasons::MAINTENANCE_COMPLETED))
    );
}

#[test]
fn stop_at_window_end_and_no_requirements_end_with_the_window() {
    let running = [
        cond(REBOOT, true, 1),
        cond(MAINTENANCE_IN_PROGRESS, true, 1),
    ];
    let mut p = policy(1);
    p.stop_at_window_end = true;
    let out = decide_conditions(&p, &[node("n", &running, false)], now());
    assert_eq!(
        status(&out[0]),
        Some((false, reasons::MAINTENANCE_WINDOW_ENDED))
    );
    let mut p = policy(1);
    p.required.clear();
    let out = decide_conditions(&p, &[node("n", &running, false)], now());
    assert_eq!(
        status(&out[0]),
        Some((false, reasons::MAINTENANCE_WINDOW_ENDED))
    );
}

#[test]
fn why_not_becomes_no_window_and_is_not_rewritten_for_a_new_message() {
    let mut waiting = cond(MAINTENANCE_IN_PROGRESS, false, 1);
    waiting.reason = reasons::WAITING_FOR_SLOT.into();
    waiting.message = "1/1 slots in use".into();
    let conds = [cond(REBOOT, true, 1), waiting.clone()];
    let out = decide_conditions(&policy(1), &[node("n", &conds, false)], now());
    assert_eq!(
        status(&out[0]),
        Some((false, reasons::NO_ACTIVE_MAINTENANCE_WINDOW))
    );
    // It records what the node had waited for, which the window's closing notice reads.
    let closed = out[0].as_ref().unwrap();
    assert_eq!(
        closed.message,
        "no active maintenance window selects this node; it had waited: WaitingForSlot: 1/1 slots in use"
    );
    let written = crate::conditions::to_apply(closed, None, now());
    assert_eq!(
        waited(&written),
        Some((reasons::WAITING_FOR_SLOT, "1/1 slots in use"))
    );
    // Kept from then on: no rewrite at the next passes.
    let after = [cond(REBOOT, true, 1), written.clone()];
    let out = decide_conditions(&policy(1), &[node("n", &after, false)], now());
    assert_eq!(out[0].as_ref().unwrap().message, written.message);
    // In the window, still waiting (another node holds the slot): kept verbatim.
    let other = [
        cond(MAINTENANCE_IN_PROGRESS, true, 1),
        cond(REBOOT, true, 1),
    ];
    let out = decide_conditions(
        &policy(1),
        &[node("n", &conds, true), node("o", &other, true)],
        now(),
    );
    assert_eq!(out[0].as_ref().unwrap().message, "1/1 slots in use");
}

/// A node a blackout covers while its window is active.
fn blacked_out<'a>(name: &'a str, conds: &'a [Condition]) -> NodeState<'a> {
    NodeState {
        name,
        window: None,
        window_active: true,
        blackout: Some("ops/freeze"),
        conditions: conds,
        labels: &*NO_LABELS,
        availability: Availability::default(),
        pods: &[],
        boot_id: None,
        holds: &[],
        drain: None,
    }
}

#[test]
fn a_blackout_stops_new_starts_but_not_maintenance_in_progress() {
    let running = [
        cond(REBOOT, true, 1),
        cond(MAINTENANCE_IN_PROGRESS, true, 1),
    ];
    let mut waiting = cond(MAINTENANCE_IN_PROGRESS, false, 1);
    waiting.reason = reasons::WAITING_FOR_SLOT.into();
    let ready = [cond(REBOOT, true, 1), waiting];
    for required in [true, false] {
        let mut p = policy(2);
        if !required {
            p.required.clear();
        }
        let out = decide_conditions(
            &p,
            &[blacked_out("a", &running), blacked_out("b", &ready)],
            now(),
        );
        assert_eq!(status(&out[0]), Some((true, "R")), "required: {required}");
        assert_eq!(
            status(&out[1]),
            Some((false, reasons::MAINTENANCE_BLACKOUT)),
            "required: {required}"
        );
        assert!(out[1].as_ref().unwrap().message.contains("ops/freeze"));
        // The window ends under the blackout: maintenance without requirements ends too.
        let mut ended = blacked_out("a", &running);
        ended.window_active = false;
        let out = decide_conditions(&p, &[ended], now());
        let expected = if required {
            (true, "R")
        } else {
            (false, reasons::MAINTENANCE_WINDOW_ENDED)
        };
        assert_eq!(status(&out[0]), Some(expected));
    }
}

#[test]
fn lowered_ceiling_adds_nobody_and_preempts_nobody() {
    let running = [
        cond(REBOOT, true, 1),
        cond(MAINTENANCE_IN_PROGRESS, true, 1),
    ];
    let waiting = [cond(REBOOT, true, 1)];
    let nodes = [
        node("a", &running, true),
        node("b", &running, true),
        node("c", &waiting, true),
    ];
    let out = decide_conditions(&policy(1), &nodes, now());
    assert_eq!(status(&out[0]), Some((true, "R")));
    assert_eq!(status(&out[1]), Some((true, "R")));
    assert_eq!(status(&out[2]), Some((false, reasons::WAITING_FOR_SLOT)));
    assert_eq!(out[2].as_ref().unwrap().message, "2/1 slots in use");
}

#[test]
fn percentages_round_down_but_give_at_least_one_slot() {
    let mut p = policy(1);
    p.ceiling = Ceiling::Percent(10);
    assert_eq!(p.slots(20), 2);
    assert_eq!(p.slots(19), 1);
    assert_eq!(p.slots(5), 1);
    assert_eq!(p.slots(0), 1);
}

/// A node in the simulation: what the world says, and what kumaco wrote.
#[derive(Clone, Debug)]
struct Sim {
    reboot: bool,
    blocked: bool,
    in_window: bool,
    since: i64,
    mip: Option<Condition>,
}

impl Sim {
    fn conditions(&self) -> Vec<Condition> {
        let mut c = vec![
            cond(REBOOT, self.reboot, self.since),
            cond(BLOCK, self.blocked, 0),
        ];
        c.extend(self.mip.clone());
        c
    }
}

#[derive(Clone, Debug)]
enum Step {
    Reboot(usize, bool),
    Block(usize, bool),
    Window(bool),
    Decide,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..12, any::<bool>()).prop_map(|(i, b)| Step::Reboot(i, b)),
        (0usize..12, any::<bool>()).prop_map(|(i, b)| Step::Block(i, b)),
        any::<bool>().prop_map(Step::Window),
        Just(Step::Decide),
        Just(Step::Decide),
    ]
}

proptest! {
    /// For any sequence of node-state changes, kumaco's grants never exceed the ceiling,
    /// the decision is deterministic, and a blocker never revokes a running maintenance.
    #[test]
    fn ceiling_holds_and_blockers_never_revoke(
        n in 1usize..12,
        ceiling in 1u32..4,
        steps in prop::collection::vec(step(), 1..80),
    ) {
        let p = policy(ceiling);
        let mut sims: Vec<Sim> = (0..n)
            .map(|i| Sim { reboot: true, blocked: false, in_window: true, since: (i as i64 * 7) % 5, mip: None })
            .collect();
        let names: Vec<String> = (0..n).map(|i| format!("node-{i:02}")).collect();
        for s in steps {
            match s {
                Step::Reboot(i, b) => if let Some(x) = sims.get_mut(i % n) { x.reboot = b; x.since += 1 },
                Step::Block(i, b) => if let Some(x) = sims.get_mut(i % n) { x.blocked = b },
                Step::Window(b) => sims.iter_mut().for_each(|x| x.in_window = b),
                Step::Decide => {
                    let conds: Vec<Vec<Condition>> = sims.iter().map(Sim::conditions).collect();
                    let states: Vec<NodeState> = sims
                        .iter()
                        .zip(&conds)
                        .zip(&names)
                        .map(|((s, c), name)| NodeState {
                            name,
                            window: if s.in_window { window() } else { None },
                            window_active: s.in_window,
                            blackout: None,
                            conditions: c,
                            labels: &*NO_LABELS,
                            availability: Availability::default(),
                            pods: &[],
                            boot_id: None,
                            holds: &[],
                            drain: None,
                        })
                        .collect();
                    let before = sims.iter().filter(|s| s.mip.as_ref().is_some_and(|c| c.is_true())).count();
                    let out = decide_conditions(&p, &states, now());
                    prop_assert_eq!(&out, &decide_conditions(&p, &states, now()));
                    let mut granted = 0;
                    for (sim, d) in sims.iter_mut().zip(&out) {
                        let was_true = sim.mip.as_ref().is_some_and(|c| c.is_true());
                        if was_true && sim.reboot {
                            // Running with its requirement still True: never revoked,
                            // whatever the blockers (the window stays open here or
                            // --stop-at-window-end is off).
                            prop_assert!(d.as_ref().is_some_and(|d| d.status));
                        }
                        if !was_true && d.as_ref().is_some_and(|d| d.status) {
                            granted += 1;
                            prop_assert!(!sim.blocked && sim.reboot && sim.in_window);
                        }
                        sim.mip = d.as_ref().map(|d| crate::conditions::to_apply(d, sim.mip.as_ref(), now()));
                    }
                    let after = sims.iter().filter(|s| s.mip.as_ref().is_some_and(|c| c.is_true())).count();
                    if granted > 0 {
                        // Grants only into free slots, counted before this pass's ends.
                        prop_assert!(before + granted <= ceiling as usize);
                    }
                    prop_assert!(after <= (ceiling as usize).max(before));
                }
            }
        }
    }
}

/// The conditions [`decide`] returns.
fn decide_conditions(policy: &Policy, nodes: &[NodeState], now: Timestamp) -> Vec<Option<Desired>> {
    decide(policy, nodes, &Gates::NONE, now).conditions
}

/// A node of the disruption simulation: its zone, its availability, what kumaco wrote.
#[derive(Clone, Debug)]
struct Down {
    zone: Option<&'static str>,
    availability: Availability,
    reboot: bool,
    since: i64,
    mip: Option<Condition>,
}

#[derive(Clone, Debug)]
enum Event {
    /// The node goes down or comes back (NotReady, Unknown, cordoned, Ready).
    Availability(usize, u8),
    Reboot(usize, bool),
    Decide,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0usize..10, 0u8..4).prop_map(|(i, a)| Event::Availability(i, a)),
        (0usize..10, any::<bool>()).prop_map(|(i, b)| Event::Reboot(i, b)),
        Just(Event::Decide),
        Just(Event::Decide),
    ]
}

proptest! {
    /// Nodes go down on their own and may exceed the ceiling; kumaco never adds to it:
    /// it never starts a node while the disrupted nodes (in progress or unavailable) fill
    /// the ceiling, overall or in the node's zone, and never starts more than fit.
    #[test]
    fn kumaco_never_adds_to_a_full_ceiling_overall_or_per_zone(
        zones in prop::collection::vec(prop::option::of(prop::sample::select(vec!["a", "b", "c"])), 1..10),
        ceiling in 1u32..4,
        per_zone in 1u32..3,
        events in prop::collection::vec(event(), 1..80),
    ) {
        let p = Policy {
            group_ceilings: vec![GroupCeiling { key: "zone".into(), ceiling: Ceiling::Count(per_zone) }],
            ..policy(ceiling)
        };
        let n = zones.len();
        let mut sims: Vec<Down> = zones
            .iter()
            .enumerate()
            .map(|(i, z)| Down { zone: *z, availability: Availability::default(), reboot: true, since: i as i64, mip: None })
            .collect();
        let names: Vec<String> = (0..n).map(|i| format!("node-{i:02}")).collect();
        let labels: Vec<std::collections::BTreeMap<String, String>> = zones
            .iter()
            .map(|z| z.iter().map(|z| ("zone".to_string(), z.to_string())).collect())
            .collect();
        for e in events {
            match e {
                Event::Availability(i, a) => {
                    sims[i % n].availability = match a {
                        0 => Availability { ready: Some(Status::False), unschedulable: false, disrupted_by: None },
                        1 => Availability { ready: Some(Status::Unknown), unschedulable: false, disrupted_by: None },
                        2 => Availability { ready: Some(Status::True), unschedulable: true, disrupted_by: None },
                        _ => Availability::default(),
                    }
                }
                Event::Reboot(i, b) => { sims[i % n].reboot = b; sims[i % n].since += 1 }
                Event::Decide => {
                    let conds: Vec<Vec<Condition>> = sims
                        .iter()
                        .map(|s| {
                            let mut c = vec![cond(REBOOT, s.reboot, s.since)];
                            c.extend(s.mip.clone());
                            c
                        })
                        .collect();
                    let states: Vec<NodeState> = sims
                        .iter()
                        .zip(&conds)
                        .zip(&names)
                        .zip(&labels)
                        .map(|(((s, c), name), l)| NodeState {
                            name,
                            window: window(),
                            window_active: true,
                            blackout: None,
                            conditions: c,
                            labels: l,
                            availability: s.availability,
                            pods: &[],
                            boot_id: None,
                            holds: &[],
                            drain: None,
                        })
                        .collect();
                    let disrupted = |zone: Option<Option<&str>>| {
                        sims.iter()
                            .filter(|s| zone.is_none_or(|z| s.zone == z))
                            .filter(|s| {
                                s.mip.as_ref().is_some_and(|c| c.is_true())
                                    || s.availability.unavailable().is_some()
                            })
                            .count()
                    };
                    let out = decide(&p, &states, &Gates::NONE, now()).conditions;
                    let starts: Vec<usize> = (0..n)
                        .filter(|&i| {
                            !sims[i].mip.as_ref().is_some_and(|c| c.is_true())
                                && out[i].as_ref().is_some_and(|d| d.status)
                        })
                        .collect();
                    let before = disrupted(None);
                    prop_assert!(
                        starts.is_empty() || before + starts.len() <= ceiling as usize,
                        "{} disrupted, {} started, ceiling {ceiling}", before, starts.len()
                    );
                    for z in [Some("a"), Some("b"), Some("c"), None] {
                        let here = starts.iter().filter(|&&i| sims[i].zone == z).count();
                        let before = disrupted(Some(z));
                        prop_assert!(
                            here == 0 || before + here <= per_zone as usize,
                            "zone {z:?}: {before} disrupted, {here} started, ceiling {per_zone}"
                        );
                    }
                    for &i in &starts {
                        prop_assert!(sims[i].availability.unavailable().is_none(), "an unavailable node started");
                    }
                    for (s, d) in sims.iter_mut().zip(out) {
                        if let Some(d) = d {
                            s.mip = Some(crate::conditions::to_apply(&d, s.mip.as_ref(), now()));
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn only_a_node_under_maintenance_not_in_progress_and_meeting_its_requirements_waits_to_start() {
    use crate::conditions::UNDER_MAINTENANCE;
    let um = |on| cond(UNDER_MAINTENANCE, on, 0);
    let mip = |on| cond(MAINTENANCE_IN_PROGRESS, on, 0);
    let reboot = |on| cond(REBOOT, on, 0);
    let required = [REBOOT.to_string()];
    assert!(waits_to_start(&[um(true)], &[]));
    assert!(waits_to_start(&[um(true), mip(false)], &[]));
    assert!(waits_to_start(
        &[um(true), mip(false), reboot(true)],
        &required
    ));
    assert!(!waits_to_start(
        &[um(true), mip(false), reboot(false)],
        &required
    ));
    assert!(!waits_to_start(&[um(true), mip(false)], &required));
    assert!(!waits_to_start(
        &[um(true), mip(true), reboot(true)],
        &required
    ));
    assert!(!waits_to_start(&[um(false), mip(false)], &[]));
    assert!(!waits_to_start(&[reboot(true)], &required));
    assert!(!waits_to_start(&[], &[]));
}

proptest! {
    /// The shell wakes no pass for a blocking pod coming or going on a node that does not
    /// wait to start: on such a node, whether it has a blocking pod changes no decision,
    /// its own or another's (a pass in which the cache agrees with the windows).
    #[test]
    fn a_blocking_pod_changes_decisions_only_on_a_node_waiting_to_start(
        nodes in prop::collection::vec(
            (any::<bool>(), prop::option::of(any::<bool>()), any::<bool>(), 0u8..4, any::<bool>(),
             prop::option::of(prop::sample::select(vec!["a", "b"]))),
            1..8,
        ),
        ceiling in 1u32..4,
        flip in 0usize..8,
    ) {
        use crate::conditions::UNDER_MAINTENANCE;
        let p = Policy {
            group_ceilings: vec![GroupCeiling { key: "zone".into(), ceiling: Ceiling::Count(1) }],
            ..policy(ceiling)
        };
        let pod = [BlockingPod { name: "db/postgres-0".into(), selector: 0 }];
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("node-{i}")).collect();
        let conds: Vec<Vec<Condition>> = nodes
            .iter()
            .map(|&(um, mip, reboot, _, _, _)| {
                let mut c = vec![cond(UNDER_MAINTENANCE, um, 0), cond(REBOOT, reboot, 0)];
                c.extend(mip.map(|on| cond(MAINTENANCE_IN_PROGRESS, on, 0)));
                c
            })
            .collect();
        let labels: Vec<std::collections::BTreeMap<String, String>> = nodes
            .iter()
            .map(|n| n.5.iter().map(|z| ("zone".to_string(), z.to_string())).collect())
            .collect();
        let flip = flip % nodes.len();
        prop_assume!(!waits_to_start(&conds[flip], &p.required));
        let states = |flipped: bool| -> Vec<NodeState> {
            nodes
                .iter()
                .enumerate()
                .map(|(i, &(um, _, _, availability, blocked, _))| NodeState {
                    name: &names[i],
                    window: if um { window() } else { None },
                    window_active: um,
                    blackout: None,
                    conditions: &conds[i],
                    labels: &labels[i],
                    availability: match availability {
                        0 => Availability { ready: Some(Status::False), unschedulable: false, disrupted_by: None },
                        1 => Availability { ready: Some(Status::True), unschedulable: true, disrupted_by: None },
                        _ => Availability::default(),
                    },
                    pods: if blocked != (flipped && i == flip) { &pod } else { &[] },
                    boot_id: None,
                    holds: &[],
                    drain: None,
                })
                .collect()
        };
        prop_assert_eq!(
            decide(&p, &states(false), &Gates::NONE, now()).conditions,
            decide(&p, &states(true), &Gates::NONE, now()).conditions
        );
    }
}

proptest! {
    /// Deciding over some of the nodes, the others left out of a [`Scope`] of them all,
    /// gives each node decided what [`decide`] over all of them gives it, whenever the
    /// nodes left out are not candidates and pace nothing (they use slots, and nothing
    /// else of them matters).
    #[test]
    fn deciding_among_some_nodes_decides_as_over_all_of_them(
        nodes in prop::collection::vec(
            (prop::option::of(prop::sample::select(vec!["a", "b"])), 0u8..4, any::<bool>(),
             0u8..4, 0i64..40, any::<bool>()),
            1..10,
        ),
        ceiling in 1u32..4,
        per_zone in prop::option::of(1u32..3),
        interval in prop::option::of(1i64..30),
        count_unavailable in any::<bool>(),
    ) {
        let p = Policy {
            group_ceilings: per_zone
                .map(|n| GroupCeiling { key: "zone".into(), ceiling: Ceiling::Percent(50 * n) })
                .into_iter()
                .collect(),
            start_interval: interval.map(SignedDuration::from_mins),
            count_unavailable,
            ..policy(ceiling)
        };
        let labels: Vec<std::collections::BTreeMap<String, String>> = nodes
            .iter()
            .map(|n| n.0.iter().map(|z| ("zone".to_string(), z.to_string())).collect())
            .collect();
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("node-{i}")).collect();
        let t0 = now().as_second() - 3600;
        let conds: Vec<Vec<Condition>> = nodes
            .iter()
            .map(|&(_, _, reboot, mip, since, _)| {
                let mut c = vec![cond(REBOOT, reboot, t0 + since)];
                let mut m = cond(MAINTENANCE_IN_PROGRESS, mip == 1, t0 + since * 60);
                m.reason = match mip {
                    2 => reasons::MAINTENANCE_COMPLETED,
                    _ => reasons::WAITING_FOR_SLOT,
                }
                .into();
                c.extend((mip > 0).then_some(m));
                c
            })
            .collect();
        let states: Vec<NodeState> = nodes
            .iter()
            .enumerate()
            .map(|(i, &(_, availability, _, _, _, in_window))| NodeState {
                name: &names[i],
                window: if in_window { window() } else { None },
                window_active: in_window,
                blackout: None,
                conditions: &conds[i],
                labels: &labels[i],
                availability: match availability {
                    0 => Availability { ready: Some(Status::False), unschedulable: false, disrupted_by: None },
                    1 => Availability { ready: Some(Status::True), unschedulable: true, disrupted_by: None },
                    _ => Availability::default(),
                },
                pods: &[],
                boot_id: None,
                holds: &[],
                drain: None,
            })
            .collect();
        let all = decide(&p, &states, &Gates::NONE, now());
        let candidate = |d: &Option<Desired>, c: &[Condition]| {
            d.as_ref().is_some_and(|d| {
                (d.status && !is_true(c, MAINTENANCE_IN_PROGRESS))
                    || d.reason == reasons::WAITING_FOR_SLOT
                    || d.reason == reasons::START_INTERVAL
            })
        };
        let mut scope = Scope::of(&p, &states);
        let mut kept = Vec::new();
        for (i, state) in states.iter().enumerate() {
            // Every other node that is no candidate and paces nothing is left out: one
            // whose last start or end is within the interval, or whose maintenance ends
            // in this pass, paces.
            let ends_now = is_true(&conds[i], MAINTENANCE_IN_PROGRESS)
                && all.conditions[i].as_ref().is_some_and(|d| !d.status);
            let paces = p.start_interval.is_some_and(|d| {
                ends_now
                    || find(&conds[i], MAINTENANCE_IN_PROGRESS)
                        .and_then(start_or_end)
                        .is_some_and(|t| t + d > now())
            });
            if i % 2 == 1 && !candidate(&all.conditions[i], &conds[i]) && !paces {
                scope.leave_out(&p, state);
            } else {
                kept.push(i);
            }
        }
        let some: Vec<NodeState> = kept.iter().map(|&i| states[i]).collect();
        let among = decide_among(&p, &some, &scope, &Gates::NONE, now());
        // Which unavailable nodes a full slot's message names depends on the order they
        // are counted in, the ones left out first; what it says of them does not.
        let unnamed = |d: &Option<Desired>| {
            d.clone().map(|mut d| {
                if let Some(cut) = d.message.find(" unavailable (") {
                    d.message.truncate(cut);
                }
                d
            })
        };
        for (j, &i) in kept.iter().enumerate() {
            prop_assert_eq!(unnamed(&among.conditions[j]), unnamed(&all.conditions[i]), "{}", names[i]);
        }
        prop_assert_eq!(among.overall.disrupted(), all.overall.disrupted());
        prop_assert_eq!(among.next_start, all.next_start);
        prop_assert_eq!(among.unavailable, all.unavailable);
        let usage = |d: &Decisions| d.groups.iter().map(|(g, u)| (g.clone(), u.slots, u.disrupted())).collect::<Vec<_>>();
        prop_assert_eq!(usage(&among), usage(&all));
    }
}
