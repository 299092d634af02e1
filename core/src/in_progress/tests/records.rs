//! An end records how long the maintenance lasted and, once, how long the node took to
//! be available again: read back by the forecast, written from what the node
//! shows, at most once.

use super::{NO_LABELS, cond};
use crate::conditions::{
    Condition, Desired, MAINTENANCE_IN_PROGRESS, MAX_MESSAGE_BYTES, Status, to_apply,
};
use crate::in_progress::*;
use crate::reasons;
use jiff::{SignedDuration, Timestamp};

const REBOOT: &str = "kured.dev/RebootRequired";

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn policy() -> Policy {
    Policy {
        required: vec![REBOOT.into()],
        ..Policy::with_ceiling(Ceiling::Count(5))
    }
}

const DOWN: Availability = Availability {
    ready: Some(Status::False),
    unschedulable: true,
    disrupted_by: None,
};

fn node<'a>(conditions: &'a [Condition], availability: Availability) -> NodeState<'a> {
    NodeState {
        name: "n",
        window: Some(("window ops/w", None)),
        window_active: true,
        blackout: None,
        conditions,
        labels: &*NO_LABELS,
        availability,
        pods: &[],
        boot_id: Some("b"),
        holds: &[],
        drain: None,
    }
}

fn one(p: &Policy, conditions: &[Condition], availability: Availability, now: i64) -> Desired {
    decide(p, &[node(conditions, availability)], &Gates::NONE, at(now)).conditions[0]
        .clone()
        .expect("in a window")
}

fn running(since: i64) -> Condition {
    Condition {
        message: "maintenance started (boot ID a) in window ops/w".into(),
        ..cond(MAINTENANCE_IN_PROGRESS, true, since)
    }
}

#[test]
fn each_end_records_how_long_the_maintenance_lasted() {
    // A required condition cleared, 6m12s after the start (now's fraction dropped, as
    // the end's lastTransitionTime drops it).
    let done = [cond(REBOOT, false, 400), running(100)];
    let now = at(472) + SignedDuration::from_millis(900);
    let d = decide(&policy(), &[node(&done, DOWN)], &Gates::NONE, now).conditions[0]
        .clone()
        .unwrap();
    assert_eq!(d.reason, reasons::MAINTENANCE_COMPLETED);
    assert_eq!(
        d.message,
        "kured.dev/RebootRequired is no longer True; completed after 6m12s"
    );
    assert_eq!(
        recorded_duration(&d.message),
        Some(SignedDuration::from_secs(372))
    );
    assert_eq!(recorded_recovery(&d.message), None, "still down");
    // A reboot.
    let rebooted = [cond(REBOOT, true, 50), running(100)];
    let d = one(&policy(), &rebooted, DOWN, 160);
    assert_eq!(d.reason, reasons::NODE_REBOOTED);
    assert_eq!(
        recorded_duration(&d.message),
        Some(SignedDuration::from_secs(60))
    );
    assert!(d.message.starts_with(
        "the node rebooted (boot ID a -> b); completed after 1m0s; a new maintenance"
    ));
    // The window's end: stopped, not completed.
    let p = Policy {
        stop_at_window_end: true,
        ..policy()
    };
    let mut ended = node(&rebooted, DOWN);
    ended.window = None;
    ended.window_active = false;
    ended.boot_id = Some("a");
    let d = decide(&p, &[ended], &Gates::NONE, at(3700)).conditions[0]
        .clone()
        .unwrap();
    assert_eq!(d.reason, reasons::MAINTENANCE_WINDOW_ENDED);
    assert_eq!(
        d.message,
        "the maintenance window ended; stopped after 1h0m0s"
    );
    assert_eq!(
        recorded_duration(&d.message),
        Some(SignedDuration::from_hours(1))
    );
}

#[test]
fn a_node_available_at_its_end_recovered_at_once() {
    let done = [cond(REBOOT, false, 400), running(100)];
    let d = one(&policy(), &done, Availability::default(), 472);
    assert_eq!(
        d.message,
        "kured.dev/RebootRequired is no longer True; completed after 6m12s, recovered after 0s"
    );
    assert_eq!(recorded_recovery(&d.message), Some(SignedDuration::ZERO));
}

#[test]
fn the_recovery_is_written_once_when_the_node_is_available_again() {
    let p = policy();
    let mut mip = Some(running(100));
    let required = cond(REBOOT, false, 400);
    let mut writes = 0;
    // Down from the end at 472 until 535, cordoned until 555, then checked for an hour.
    for t in 472..4000 {
        let availability = match t {
            ..535 => DOWN,
            535..555 => Availability {
                ready: Some(Status::True),
                unschedulable: true,
                disrupted_by: None,
            },
            _ => Availability::default(),
        };
        let conds: Vec<Condition> = [required.clone()].into_iter().chain(mip.clone()).collect();
        let d = one(&p, &conds, availability, t);
        if crate::conditions::differs(&d, mip.as_ref()) {
            writes += 1;
        }
        mip = Some(to_apply(&d, mip.as_ref(), at(t)));
    }
    let mip = mip.unwrap();
    assert_eq!(writes, 2, "the end, then the recovery");
    assert_eq!(
        mip.message,
        "kured.dev/RebootRequired is no longer True; completed after 6m12s, recovered after 1m23s"
    );
    assert_eq!(mip.last_transition_time, Some(at(472)), "no transition");
    assert_eq!(
        recorded_recovery(&mip.message),
        Some(SignedDuration::from_secs(83))
    );
    // Outside a window, and for a reboot whose requirement is not confirmed yet, the same.
    let rebooted = Condition {
        reason: reasons::NODE_REBOOTED.into(),
        message: "the node rebooted (boot ID a -> b); completed after 1m0s; a new maintenance \
                  waits for kured.dev/RebootRequired to be confirmed after the reboot"
            .into(),
        ..cond(MAINTENANCE_IN_PROGRESS, false, 160)
    };
    let stale = cond(REBOOT, true, 50);
    let conds = [stale, rebooted.clone()];
    let d = one(&p, &conds, Availability::default(), 220);
    assert_eq!(
        d.message,
        "the node rebooted (boot ID a -> b); completed after 1m0s, recovered after 1m0s; a new \
         maintenance waits for kured.dev/RebootRequired to be confirmed after the reboot"
    );
    let mut outside = node(&conds, Availability::default());
    outside.window = None;
    outside.window_active = false;
    let d = decide(&p, &[outside], &Gates::NONE, at(220)).conditions[0]
        .clone()
        .unwrap();
    assert_eq!(
        recorded_recovery(&d.message),
        Some(SignedDuration::from_mins(1))
    );
}

#[test]
fn an_end_without_a_recorded_duration_gets_no_recovery() {
    // Written before kumaco recorded durations: now minus the end would be its age.
    let old = Condition {
        reason: reasons::MAINTENANCE_COMPLETED.into(),
        message: "kured.dev/RebootRequired is no longer True".into(),
        ..cond(MAINTENANCE_IN_PROGRESS, false, 10)
    };
    let conds = [cond(REBOOT, false, 10), old.clone()];
    assert_eq!(
        one(&policy(), &conds, Availability::default(), 900_000),
        Desired::keep(&old)
    );
}

#[test]
fn the_records_stay_within_the_message_bound_and_survive_its_cut() {
    // Many long required conditions: the NodeRebooted message is cut, its records are not.
    let required: Vec<String> = (0..20)
        .map(|i| format!("example.com/{}-{i}", "x".repeat(60)))
        .collect();
    let p = Policy {
        required: required.clone(),
        ..policy()
    };
    let mut conds: Vec<Condition> = required.iter().map(|t| cond(t, true, 10)).collect();
    conds.push(running(100));
    let d = one(&p, &conds, DOWN, 200);
    assert_eq!(d.reason, reasons::NODE_REBOOTED);
    assert!(d.message.len() <= MAX_MESSAGE_BYTES && d.message.ends_with('…'));
    let ended = to_apply(&d, conds.last(), at(200));
    conds.pop();
    conds.push(ended);
    let d = one(&p, &conds, Availability::default(), 230);
    assert!(d.message.len() <= MAX_MESSAGE_BYTES);
    assert_eq!(
        recorded_duration(&d.message),
        Some(SignedDuration::from_secs(100))
    );
    assert_eq!(
        recorded_recovery(&d.message),
        Some(SignedDuration::from_secs(30))
    );
}

#[test]
fn the_parsers_read_only_their_records() {
    for (message, duration, recovery) in [
        (
            "a is no longer True; completed after 6m12s",
            Some(372),
            None,
        ),
        (
            "a is no longer True; completed after 1h2m3.5s, recovered after 0s",
            Some(3723),
            Some(0),
        ),
        (
            "the maintenance window ended; stopped after 3h0m0s",
            Some(10800),
            None,
        ),
        // "after" elsewhere, a record that is no duration, a negative one.
        ("waits for a to be confirmed after the reboot", None, None),
        ("completed after soon", None, None),
        ("completed after -5s", None, None),
        ("completed after", None, None),
        ("", None, None),
    ] {
        assert_eq!(
            recorded_duration(message).map(|d| d.as_secs()),
            duration,
            "{message}"
        );
        assert_eq!(
            recorded_recovery(message).map(|d| d.as_secs()),
            recovery,
            "{message}"
        );
    }
}
