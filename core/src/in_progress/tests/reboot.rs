//! A reboot ends maintenance, and a stale requirement does not start another:
//! the rules one by one, then kured v2's parts simulated as they behave (a reporter that
//! checks on a ticker, an executor that acts the moment it starts) against [`decide`].

use super::{NO_LABELS, cond};
use crate::conditions::{
    Condition, Desired, MAINTENANCE_IN_PROGRESS, Status, UNDER_MAINTENANCE, to_apply,
};
use crate::in_progress::*;
use crate::reasons;
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

const REBOOT: &str = "kured.dev/RebootRequired";

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn mip(status: bool, reason: &str, message: &str, since: i64) -> Condition {
    Condition {
        reason: reason.into(),
        message: message.into(),
        ..cond(MAINTENANCE_IN_PROGRESS, status, since)
    }
}

fn policy() -> Policy {
    Policy {
        required: vec![REBOOT.into()],
        ..Policy::with_ceiling(Ceiling::Count(5))
    }
}

fn node<'a>(conditions: &'a [Condition], boot_id: Option<&'a str>) -> NodeState<'a> {
    NodeState {
        name: "n",
        window: Some(("window ops/w", None)),
        window_active: true,
        blackout: None,
        conditions,
        labels: &*NO_LABELS,
        availability: Availability::default(),
        pods: &[],
        boot_id,
        holds: &[],
        drain: None,
    }
}

fn one(policy: &Policy, conditions: &[Condition], boot_id: Option<&str>) -> Desired {
    decide(policy, &[node(conditions, boot_id)], &Gates::NONE, at(1000)).conditions[0]
        .clone()
        .expect("in a window")
}

/// The start on boot `aaaa-1` at 20 s, as [`decide`] writes it.
const STARTED_ON_A: &str = "maintenance started at 1970-01-01T00:00:20.000Z (boot ID aaaa-1) \
                            in window ops/w; kured.dev/RebootRequired True";

/// The same, as a kumaco before the start's instant was recorded wrote it.
const STARTED_ON_A_UNTIMED: &str =
    "maintenance started (boot ID aaaa-1) in window ops/w; kured.dev/RebootRequired True";

#[test]
fn a_start_records_the_boot_id_first_and_it_reads_back() {
    let d = one(&policy(), &[cond(REBOOT, true, 10)], Some("aaaa-1"));
    assert!(d.status);
    assert_eq!(d.message, STARTED_ON_A.replace("00:00:20", "00:16:40"));
    assert_eq!(recorded_boot_id(&d.message), Some("aaaa-1"));
    assert_eq!(recorded_boot_id(STARTED_ON_A_UNTIMED), Some("aaaa-1"));
    // Without a boot ID, or with one that would not read back, nothing is recorded.
    for id in [None, Some("x) y"), Some("")] {
        let d = one(&policy(), &[cond(REBOOT, true, 10)], id);
        assert_eq!(
            d.message,
            "maintenance started at 1970-01-01T00:16:40.000Z in window ops/w; \
             kured.dev/RebootRequired True"
        );
        assert_eq!(recorded_boot_id(&d.message), None);
    }
    let long = "b".repeat(65);
    assert_eq!(
        recorded_boot_id(&format!("maintenance started ({BOOT_ID} {long})")),
        None
    );
}

#[test]
fn a_new_boot_id_ends_maintenance_though_the_requirement_still_reads_true() {
    let running = [
        cond(REBOOT, true, 10),
        mip(true, reasons::MAINTENANCE_WINDOW, STARTED_ON_A, 20),
    ];
    let d = one(&policy(), &running, Some("bbbb-2"));
    assert_eq!(
        (d.status, d.reason.as_str()),
        (false, reasons::NODE_REBOOTED)
    );
    assert_eq!(
        d.message,
        "the node rebooted (boot ID aaaa-1 -> bbbb-2); started at 1970-01-01T00:00:20.000Z, \
         completed after 16m20s, recovered after 0s; a new maintenance waits for \
         kured.dev/RebootRequired to be confirmed after the reboot"
    );
    // A start that recorded no instant: measured between whole seconds, no start recorded.
    let untimed = [
        cond(REBOOT, true, 10),
        mip(true, reasons::MAINTENANCE_WINDOW, STARTED_ON_A_UNTIMED, 20),
    ];
    let d = one(&policy(), &untimed, Some("bbbb-2"));
    assert_eq!(
        d.message,
        "the node rebooted (boot ID aaaa-1 -> bbbb-2); completed after 16m20s, recovered \
         after 0s; a new maintenance waits for kured.dev/RebootRequired to be confirmed after \
         the reboot"
    );
    // The same boot, a node that shows none, a start that recorded none, or the rule
    // off: still in progress.
    for (conds, id, on) in [
        (&running[..], Some("aaaa-1"), true),
        (&running[..], None, true),
        (&running[..], Some("bbbb-2"), false),
    ] {
        let p = Policy {
            complete_on_reboot: on,
            ..policy()
        };
        assert!(one(&p, conds, id).status);
    }
    let unrecorded = [
        cond(REBOOT, true, 10),
        mip(true, reasons::MAINTENANCE_WINDOW, "maintenance started", 20),
    ];
    assert!(one(&policy(), &unrecorded, Some("bbbb-2")).status);
    // A requirement that cleared is the better answer: the maintenance completed.
    let cleared = [
        cond(REBOOT, false, 30),
        mip(true, reasons::MAINTENANCE_WINDOW, STARTED_ON_A, 20),
    ];
    assert_eq!(
        one(&policy(), &cleared, Some("bbbb-2")).reason,
        reasons::MAINTENANCE_COMPLETED
    );
}

#[test]
fn after_a_reboot_a_stale_requirement_waits_and_a_confirmed_one_starts() {
    let ended = mip(false, reasons::NODE_REBOOTED, "the node rebooted", 50);
    let stale = Condition {
        last_heartbeat_time: Some(at(40)),
        ..cond(REBOOT, true, 10)
    };
    let d = one(&policy(), &[stale.clone(), ended.clone()], Some("b"));
    assert_eq!(d, Desired::keep(&ended), "waits, the condition unchanged");
    // Confirmed in the same second as the end is not after it.
    let same_second = Condition {
        last_heartbeat_time: Some(at(50)),
        ..stale.clone()
    };
    assert!(!one(&policy(), &[same_second, ended.clone()], Some("b")).status);
    // A heartbeat after the end, or a new transition, confirms it: a new maintenance.
    for confirmed in [
        Condition {
            last_heartbeat_time: Some(at(51)),
            ..stale.clone()
        },
        cond(REBOOT, true, 60),
    ] {
        let d = one(&policy(), &[confirmed, ended.clone()], Some("b"));
        assert_eq!(
            (d.status, d.reason.as_str()),
            (true, reasons::MAINTENANCE_WINDOW)
        );
    }
    // The reporter clears it: the reboot stays the answer, also while the node recovers.
    let cleared = [cond(REBOOT, false, 70), ended.clone()];
    assert_eq!(one(&policy(), &cleared, Some("b")), Desired::keep(&ended));
}

#[test]
fn without_required_conditions_a_rebooted_node_starts_again_only_in_a_later_window() {
    let p = Policy {
        required: Vec::new(),
        ..policy()
    };
    let running = [
        cond(UNDER_MAINTENANCE, true, 10),
        mip(
            true,
            reasons::MAINTENANCE_WINDOW,
            "maintenance started (boot ID a) in w",
            20,
        ),
    ];
    let d = one(&p, &running, Some("b"));
    assert_eq!(d.reason, reasons::NODE_REBOOTED);
    assert!(d.message.ends_with("it starts again in a later window"));
    let ended = mip(false, reasons::NODE_REBOOTED, &d.message, 30);
    let same_window = [cond(UNDER_MAINTENANCE, true, 10), ended.clone()];
    assert_eq!(one(&p, &same_window, Some("b")), Desired::keep(&ended));
    let later_window = [cond(UNDER_MAINTENANCE, true, 40), ended];
    assert!(one(&p, &later_window, Some("b")).status);
}

#[test]
fn a_reboot_paces_like_any_end() {
    let p = Policy {
        start_interval: Some(SignedDuration::from_secs(100)),
        ..policy()
    };
    let rebooted = [
        cond(REBOOT, false, 10),
        mip(false, reasons::NODE_REBOOTED, "the node rebooted", 950),
    ];
    let waiting = [cond(REBOOT, true, 10)];
    let nodes = [node(&rebooted, None), node(&waiting, None)];
    let out = decide(&p, &nodes, &Gates::NONE, at(1000));
    assert_eq!(
        out.conditions[1].as_ref().map(|d| d.reason.as_str()),
        Some(reasons::START_INTERVAL)
    );
    assert_eq!(out.next_start, Some(at(1050)));
}

// ---------------------------------------------------------------------------------------
// kured v2's parts, simulated second by second

/// One node and the two daemons on it, as kured v2's prototype behaves.
#[derive(Clone, Debug)]
struct Machine {
    /// Reboots it still needs: the detector's sentinel is set while this is above 0.
    needs: u8,
    rebooted: u32,
    boot: u32,
    ready: bool,
    cordoned: bool,
    /// Down until then (the reboot), then Ready with a new boot ID.
    down_until: Option<i64>,
    /// When the daemons (detector, executor) start after the node is back.
    daemons_at: Option<i64>,
    /// The detector's next check: one period after it starts, then every period.
    next_check: i64,
    required: Condition,
    mip: Option<Condition>,
}

#[derive(Clone, Copy, Debug)]
struct Pipeline {
    nodes: usize,
    ceiling: u32,
    period: i64,
    reboot: i64,
    daemon_delay: i64,
    complete_on_reboot: bool,
}

struct Run {
    reboots: Vec<u32>,
    needed: Vec<u32>,
    most_disrupted: usize,
    done: bool,
}

fn simulate(p: Pipeline, needs: &[u8]) -> Run {
    let policy = Policy {
        required: vec![REBOOT.into()],
        complete_on_reboot: p.complete_on_reboot,
        ..Policy::with_ceiling(Ceiling::Count(p.ceiling))
    };
    let mut machines: Vec<Machine> = (0..p.nodes)
        .map(|i| Machine {
            needs: needs[i % needs.len()],
            rebooted: 0,
            boot: 1,
            ready: true,
            cordoned: false,
            down_until: None,
            daemons_at: None,
            next_check: p.period,
            required: Condition {
                last_heartbeat_time: Some(at(0)),
                ..cond(REBOOT, needs[i % needs.len()] > 0, 0)
            },
            mip: None,
        })
        .collect();
    let names: Vec<String> = (0..p.nodes).map(|i| format!("node-{i}")).collect();
    let mut most_disrupted = 0;
    let mut done = false;
    for t in 1..=3600 {
        // The kubelet: a node whose reboot is over comes back with a new boot ID.
        for m in &mut machines {
            if m.down_until == Some(t) {
                m.down_until = None;
                m.boot += 1;
                m.ready = true;
                m.daemons_at = Some(t + p.daemon_delay);
            }
        }
        // kumaco's pass.
        let boots: Vec<String> = machines
            .iter()
            .map(|m| format!("boot-{}", m.boot))
            .collect();
        let conds: Vec<Vec<Condition>> = machines
            .iter()
            .map(|m| m.mip.iter().cloned().chain([m.required.clone()]).collect())
            .collect();
        let states: Vec<NodeState> = (0..p.nodes)
            .map(|i| NodeState {
                name: &names[i],
                availability: Availability {
                    ready: Some(Status::from(machines[i].ready)),
                    unschedulable: machines[i].cordoned,
                    disrupted_by: None,
                },
                ..node(&conds[i], Some(&boots[i]))
            })
            .collect();
        let decided = decide(&policy, &states, &Gates::NONE, at(t));
        for (m, d) in machines.iter_mut().zip(decided.conditions) {
            if let Some(d) = d {
                m.mip = Some(to_apply(&d, m.mip.as_ref(), at(t)));
            }
        }
        most_disrupted = most_disrupted.max(
            machines
                .iter()
                .filter(|m| m.mip.as_ref().is_some_and(|c| c.is_true()) || !m.ready || m.cordoned)
                .count(),
        );
        // The executor acts at once: when it starts, and on every change it sees (here:
        // every second it runs); the detector checks on its ticker.
        for m in &mut machines {
            if m.daemons_at.is_some_and(|d| d > t) || m.down_until.is_some() {
                continue;
            }
            if m.daemons_at == Some(t) {
                m.daemons_at = None;
                m.next_check = t + p.period;
            }
            let in_progress = m.mip.as_ref().is_some_and(|c| c.is_true());
            if in_progress {
                m.cordoned = true;
                m.ready = false;
                m.rebooted += 1;
                m.needs = m.needs.saturating_sub(1);
                m.down_until = Some(t + p.reboot);
                continue;
            }
            if m.mip.is_some() {
                m.cordoned = false;
            }
            if t >= m.next_check {
                m.next_check = t + p.period;
                let needed = m.needs > 0;
                if m.required.is_true() != needed {
                    m.required = Condition {
                        last_heartbeat_time: Some(at(t)),
                        ..cond(REBOOT, needed, t)
                    };
                } else {
                    m.required.last_heartbeat_time = Some(at(t));
                }
            }
        }
        let settled = machines.iter().all(|m| {
            m.needs == 0
                && !m.required.is_true()
                && m.ready
                && !m.cordoned
                && m.down_until.is_none()
                && !m.mip.as_ref().is_some_and(|c| c.is_true())
        });
        if settled {
            done = true;
            break;
        }
    }
    Run {
        reboots: machines.iter().map(|m| m.rebooted).collect(),
        needed: (0..p.nodes)
            .map(|i| u32::from(needs[i % needs.len()]))
            .collect(),
        most_disrupted,
        done,
    }
}

#[test]
fn without_the_rule_kureds_parts_reboot_the_same_node_again_and_again() {
    // The must-fail demo: without the rule, kured's parts reboot one node again and again,
    // seen by the same simulation.
    let run = simulate(
        Pipeline {
            nodes: 4,
            ceiling: 2,
            period: 30,
            reboot: 5,
            daemon_delay: 2,
            complete_on_reboot: false,
        },
        &[1],
    );
    assert!(
        run.reboots.iter().any(|&r| r > 1),
        "expected repeated reboots without the rule: {:?}",
        run.reboots
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn one_reboot_per_requirement_under_the_ceiling(
        nodes in 1usize..8,
        ceiling in 1u32..4,
        period in 1i64..60,
        reboot in 1i64..20,
        daemon_delay in 0i64..5,
        needs in proptest::collection::vec(0u8..3, 1..4),
    ) {
        let run = simulate(
            Pipeline { nodes, ceiling, period, reboot, daemon_delay, complete_on_reboot: true },
            &needs,
        );
        prop_assert!(run.done, "not settled within an hour: {:?}", run.reboots);
        prop_assert_eq!(&run.reboots, &run.needed);
        prop_assert!(run.most_disrupted <= ceiling as usize);
    }
}
