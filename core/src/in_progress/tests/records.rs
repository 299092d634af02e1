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

/// A maintenance in progress since `since`, started by a kumaco before the start's
/// instant was recorded: its end is measured between whole seconds, as it was then.
fn running(since: i64) -> Condition {
    Condition {
        message: "maintenance started (boot ID a) in window ops/w".into(),
        ..cond(MAINTENANCE_IN_PROGRESS, true, since)
    }
}

/// The True condition a start at `now` leaves on the node, as the API gives it back.
fn started_at(p: &Policy, requirement: &Condition, now: Timestamp) -> Condition {
    let conds = [requirement.clone()];
    let d = decide(p, &[node(&conds, DOWN_NOT)], &Gates::NONE, now).conditions[0]
        .clone()
        .unwrap();
    assert!(d.status, "{d:?}");
    to_apply(&d, None, now)
}

/// Available: a node about to start.
const DOWN_NOT: Availability = Availability {
    ready: Some(Status::True),
    unschedulable: false,
    disrupted_by: None,
};

fn ms(s: &str) -> Timestamp {
    s.parse().unwrap()
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
    // The same from a start that records its instant, in windows whose list is cut: the
    // start's records come before the cut, and so do the end's.
    let windows = format!(
        "windows {}",
        (0..40)
            .map(|i| format!("ops/{}-{i}", "w".repeat(40)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut conds: Vec<Condition> = required.iter().map(|t| cond(t, true, 10)).collect();
    let mut starting = node(&conds, Availability::default());
    starting.window = Some((&windows, None));
    let at_start = ms("2026-12-07T14:25:03.512Z");
    let d = decide(&p, &[starting], &Gates::NONE, at_start).conditions[0]
        .clone()
        .unwrap();
    assert!(d.status && d.message.len() <= MAX_MESSAGE_BYTES && d.message.ends_with('…'));
    assert_eq!(recorded_start(&d.message), Some(at_start));
    assert_eq!(recorded_boot_id(&d.message), Some("b"));
    conds.push(to_apply(&d, None, at_start));
    let at_end = ms("2026-12-07T14:31:15.004Z");
    let mut rebooted = node(&conds, DOWN);
    rebooted.boot_id = Some("c");
    let d = decide(&p, &[rebooted], &Gates::NONE, at_end).conditions[0]
        .clone()
        .unwrap();
    assert_eq!(d.reason, reasons::NODE_REBOOTED);
    assert!(d.message.len() <= MAX_MESSAGE_BYTES && d.message.ends_with('…'));
    let ended = to_apply(&d, conds.last(), at_end);
    conds.pop();
    conds.push(ended);
    let mut back = node(&conds, Availability::default());
    back.boot_id = Some("c");
    let back_at = ms("2026-12-07T14:32:00.100Z");
    let d = decide(&p, &[back], &Gates::NONE, back_at).conditions[0]
        .clone()
        .unwrap();
    assert!(d.message.len() <= MAX_MESSAGE_BYTES, "{}", d.message);
    assert_eq!(recorded_start(&d.message), Some(at_start));
    assert_eq!(
        recorded_duration(&d.message),
        Some(SignedDuration::from_millis(371_492))
    );
    assert_eq!(
        recorded_recovery(&d.message),
        Some(SignedDuration::from_millis(45_096))
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

#[test]
fn a_start_records_its_instant_to_the_millisecond_and_its_end_carries_it_on() {
    let p = policy();
    let required = cond(REBOOT, true, 10);
    let start = started_at(&p, &required, ms("2026-12-07T14:25:03.512987Z"));
    assert_eq!(
        start.message,
        "maintenance started at 2026-12-07T14:25:03.512Z (boot ID b) in window ops/w; \
         kured.dev/RebootRequired True"
    );
    assert_eq!(
        recorded_start(&start.message),
        Some(ms("2026-12-07T14:25:03.512Z"))
    );
    assert_eq!(
        start.last_transition_time,
        Some(ms("2026-12-07T14:25:03Z")),
        "the API's second, as before"
    );
    assert_eq!(recorded_boot_id(&start.message), Some("b"));
    // Each end: measured from the recorded start to now, both to the millisecond, and the
    // start carried on, so that the end alone says both.
    let cleared = [cond(REBOOT, false, 20), start.clone()];
    let now = ms("2026-12-07T14:25:08.024999Z");
    let d = decide(&p, &[node(&cleared, DOWN)], &Gates::NONE, now).conditions[0]
        .clone()
        .unwrap();
    assert_eq!(d.reason, reasons::MAINTENANCE_COMPLETED);
    assert_eq!(
        d.message,
        "kured.dev/RebootRequired is no longer True; started at 2026-12-07T14:25:03.512Z, \
         completed after 4.512s"
    );
    assert_eq!(recorded_start(&d.message), recorded_start(&start.message));
    assert_eq!(
        recorded_duration(&d.message),
        Some(SignedDuration::from_millis(4_512))
    );
    assert_eq!(
        recorded_end(&d.message),
        Some(ms("2026-12-07T14:25:08.024Z"))
    );
    assert_eq!(recorded_end(&start.message), None, "not ended");
    // A reboot, and a window's end.
    let rebooted = [cond(REBOOT, true, 10), start.clone()];
    let mut on_a_new_boot = node(&rebooted, DOWN);
    on_a_new_boot.boot_id = Some("c");
    let d = decide(&p, &[on_a_new_boot], &Gates::NONE, now).conditions[0]
        .clone()
        .unwrap();
    assert!(
        d.message.starts_with(
            "the node rebooted (boot ID b -> c); started at 2026-12-07T14:25:03.512Z, \
             completed after 4.512s; a new maintenance waits"
        ),
        "{}",
        d.message
    );
    let stop = Policy {
        stop_at_window_end: true,
        ..policy()
    };
    let mut ended = node(&rebooted, DOWN);
    (ended.window, ended.window_active) = (None, false);
    let d = decide(
        &stop,
        &[ended],
        &Gates::NONE,
        now + SignedDuration::from_hours(3),
    )
    .conditions[0]
        .clone()
        .unwrap();
    assert_eq!(
        d.message,
        "the maintenance window ended; started at 2026-12-07T14:25:03.512Z, stopped after \
         3h0m4.512s"
    );
    assert_eq!(recorded_start(&d.message), recorded_start(&start.message));
}

#[test]
fn the_recovery_is_measured_from_the_recorded_end_to_the_millisecond() {
    let p = policy();
    let start = started_at(&p, &cond(REBOOT, true, 10), ms("2026-12-07T14:25:03.512Z"));
    let cleared = [cond(REBOOT, false, 20), start.clone()];
    let at_end = ms("2026-12-07T14:25:08.024Z");
    let d = decide(&p, &[node(&cleared, DOWN)], &Gates::NONE, at_end).conditions[0]
        .clone()
        .unwrap();
    let end = to_apply(&d, Some(&start), at_end);
    // Back 1.276 s after the end: the whole seconds would say 1 s (09 - 08).
    let conds = [cond(REBOOT, false, 20), end.clone()];
    let back = ms("2026-12-07T14:25:09.300654Z");
    let d = decide(&p, &[node(&conds, DOWN_NOT)], &Gates::NONE, back).conditions[0]
        .clone()
        .unwrap();
    assert_eq!(
        d.message,
        "kured.dev/RebootRequired is no longer True; started at 2026-12-07T14:25:03.512Z, \
         completed after 4.512s, recovered after 1.276s"
    );
    assert_eq!(
        recorded_recovery(&d.message),
        Some(SignedDuration::from_millis(1_276))
    );
    assert_eq!(recorded_start(&d.message), recorded_start(&start.message));
    assert_eq!(recorded_end(&d.message), Some(at_end));
    // Available at its end: recovered at once.
    let d = decide(&p, &[node(&cleared, DOWN_NOT)], &Gates::NONE, at_end).conditions[0]
        .clone()
        .unwrap();
    assert!(
        d.message
            .ends_with("completed after 4.512s, recovered after 0s")
    );
}

#[test]
fn a_node_that_keeps_its_state_keeps_its_message_through_passes_at_any_instant() {
    // Passes at an odd step for two minutes: the start, the end, the recovery, and
    // nothing else is ever written, though every pass measures at another millisecond.
    const STEP_MS: i64 = 137;
    let p = policy();
    let from = ms("2026-12-07T14:25:00.250Z");
    let mut mip: Option<Condition> = None;
    let mut writes = Vec::new();
    for k in 0..120_000 / STEP_MS {
        let now = from + SignedDuration::from_millis(STEP_MS * k);
        let since = now.duration_since(from).as_secs_f64();
        // Needs a reboot until 40 s; the node goes down at 30 s and is back at 50 s.
        let required = if since < 40.0 {
            cond(REBOOT, true, 10)
        } else {
            cond(REBOOT, false, from.as_second() + 40)
        };
        let availability = if (30.0..50.0).contains(&since) {
            DOWN
        } else {
            DOWN_NOT
        };
        let conds: Vec<Condition> = [required].into_iter().chain(mip.clone()).collect();
        let d = decide(&p, &[node(&conds, availability)], &Gates::NONE, now).conditions[0]
            .clone()
            .unwrap();
        if crate::conditions::differs(&d, mip.as_ref()) {
            writes.push((since, d.status, d.message.clone()));
        }
        mip = Some(to_apply(&d, mip.as_ref(), now));
    }
    assert_eq!(writes.len(), 3, "{writes:#?}");
    let [(_, true, start), (_, false, end), (_, false, recovered)] = &writes[..] else {
        panic!("{writes:#?}")
    };
    assert_eq!(recorded_start(start), Some(from));
    assert_eq!(recorded_start(end), Some(from));
    assert_eq!(recorded_start(recovered), Some(from));
    // The first pass at or after 40 s ends it; the first at or after 50 s sees it back.
    let first_after = |s: i64| (s * 1000 + STEP_MS - 1) / STEP_MS * STEP_MS;
    let lasted = SignedDuration::from_millis(first_after(40));
    assert_eq!(recorded_duration(end), Some(lasted));
    assert_eq!(
        recorded_recovery(recovered),
        Some(SignedDuration::from_millis(first_after(50)) - lasted)
    );
}

#[test]
fn messages_of_earlier_versions_read_as_they_did_and_record_no_start() {
    for message in [
        "maintenance started (boot ID a) in window ops/w; kured.dev/RebootRequired True",
        "maintenance started in window ops/w",
        "kured.dev/RebootRequired is no longer True; completed after 6m12s",
        "the node rebooted (boot ID a -> b); completed after 1m0s, recovered after 3s; a new \
         maintenance waits for kured.dev/RebootRequired to be confirmed after the reboot",
        "the maintenance window ended; stopped after 3h0m0s",
        // Reasons to wait, one with an instant of its own.
        "next start possible at 2026-12-05T01:30:00Z (--start-interval 30m0s after the last \
         start or end)",
        "waiting for kured.dev/RebootRequired to be True",
    ] {
        assert_eq!(recorded_start(message), None, "{message}");
        assert_eq!(recorded_end(message), None, "{message}");
    }
    assert_eq!(
        recorded_duration("kured.dev/RebootRequired is no longer True; completed after 6m12s"),
        Some(SignedDuration::from_secs(372))
    );
    // Not an instant: nothing.
    for message in [
        "started at soon, completed after 4s",
        "started at , completed after 4s",
        "started at",
    ] {
        assert_eq!(recorded_start(message), None, "{message}");
    }
}

#[test]
fn what_a_pass_measures_is_all_that_differs_between_two_derivations() {
    let pieces = |m: &str| {
        let mut out = Vec::new();
        unmeasured(m, |p| out.push(p.to_string()));
        out.concat()
    };
    let start = |at: &str, w: &str| {
        format!(
            "maintenance started at {at} (boot ID b) in window {w}; kured.dev/RebootRequired True"
        )
    };
    assert_eq!(
        pieces(&start("2026-12-07T14:25:03.512Z", "ops/w")),
        pieces(&start("2026-12-07T14:25:04.077Z", "ops/w"))
    );
    assert_ne!(
        pieces(&start("2026-12-07T14:25:03.512Z", "ops/w")),
        pieces(&start("2026-12-07T14:25:03.512Z", "ops/v"))
    );
    assert_eq!(
        pieces(
            "r is no longer True; started at 2026-12-07T14:25:03.512Z, completed after 4.5s, \
             recovered after 1s"
        ),
        "r is no longer True; started at, completed after, recovered after"
    );
    assert_ne!(
        pieces("r is no longer True; completed after 4.5s"),
        pieces("r is no longer True; stopped after 4.5s")
    );
}

proptest::proptest! {
    /// Whatever the instants, a start's message and its end's read back the same start to
    /// the millisecond, the duration between the two instants to the millisecond, and the
    /// end as the start plus the duration.
    #[test]
    fn the_start_and_the_duration_read_back_to_the_millisecond(
        start_ns in 1_600_000_000_000_000_000i64..2_500_000_000_000_000_000,
        lasted_ns in 0i64..30 * 86_400 * 1_000_000_000,
        back_ns in 0i64..86_400 * 1_000_000_000,
    ) {
        let p = policy();
        let at = Timestamp::from_nanosecond(i128::from(start_ns)).unwrap();
        let to_ms = |t: Timestamp| Timestamp::from_millisecond(t.as_millisecond()).unwrap();
        let start = started_at(&p, &cond(REBOOT, true, 10), at);
        proptest::prop_assert_eq!(recorded_start(&start.message), Some(to_ms(at)));
        let now = at + SignedDuration::from_nanos(lasted_ns);
        let cleared = [cond(REBOOT, false, 20), start.clone()];
        let d = decide(&p, &[node(&cleared, DOWN)], &Gates::NONE, now).conditions[0]
            .clone()
            .unwrap();
        proptest::prop_assert_eq!(recorded_start(&d.message), recorded_start(&start.message));
        proptest::prop_assert_eq!(
            recorded_duration(&d.message),
            Some(to_ms(now).duration_since(to_ms(at)))
        );
        proptest::prop_assert_eq!(recorded_end(&d.message), Some(to_ms(now)));
        let end = to_apply(&d, Some(&start), now);
        let back = now + SignedDuration::from_nanos(back_ns);
        let conds = [cond(REBOOT, false, 20), end];
        let d = decide(&p, &[node(&conds, DOWN_NOT)], &Gates::NONE, back).conditions[0]
            .clone()
            .unwrap();
        proptest::prop_assert_eq!(
            recorded_recovery(&d.message),
            Some(to_ms(back).duration_since(to_ms(now)))
        );
        proptest::prop_assert_eq!(recorded_start(&d.message), Some(to_ms(at)));
    }
}
