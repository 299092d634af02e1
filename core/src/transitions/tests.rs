use std::collections::BTreeMap;

use super::*;
use crate::forecast::{NodeForecast, Rollout, WindowOccurrence};
use crate::in_progress::{HAD_WAITED, STOPPED_AFTER};
use crate::testing::ts;
use crate::window::test_window;

const REBOOT: &str = "kured.dev/RebootRequired";
const OWNED: [&str; 2] = [UNDER_MAINTENANCE, MAINTENANCE_IN_PROGRESS];

fn rules() -> Rules {
    Rules {
        cluster: "prod".into(),
        instance: "kumaco/ops/kumaco".into(),
        in_progress: true,
        required: vec![REBOOT.into()],
        waiting_after: Some(SignedDuration::from_mins(30)),
        not_back_after: Some(SignedDuration::from_mins(10)),
        planned_lead_time: Some(SignedDuration::from_hours(1)),
        zone_label: "topology.kubernetes.io/zone".into(),
        pool_labels: Vec::new(),
    }
}

fn cond(type_: &str, status: bool, reason: &str, message: &str, at: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: Status::from(status),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Some(ts(at)),
        last_heartbeat_time: None,
    }
}

fn source(name: &str, start: &str, duration: &str) -> WindowSource {
    let w = test_window(name, start, duration, "", false);
    WindowSource {
        id: w.id.clone(),
        uid: format!("uid-{name}"),
        data_hash: 1,
        created: None,
        window: Ok(w),
    }
}

struct Node {
    name: &'static str,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    owned: Vec<String>,
    availability: Availability,
}

fn node(name: &'static str, conditions: Vec<Condition>) -> Node {
    Node {
        name,
        labels: BTreeMap::new(),
        conditions,
        owned: OWNED.iter().map(|t| t.to_string()).collect(),
        availability: Availability::default(),
    }
}

fn due_at(nodes: &[Node], windows: &[WindowSource], now: &str) -> Due {
    due_with(nodes, windows, &[], None, now)
}

fn due_with(
    nodes: &[Node],
    windows: &[WindowSource],
    announcements: &[Announcement],
    forecast: Option<&forecast::Forecast>,
    now: &str,
) -> Due {
    let states: Vec<NodeState> = nodes
        .iter()
        .map(|n| NodeState {
            name: n.name,
            uid: n.name,
            labels: &n.labels,
            conditions: &n.conditions,
            owned: &n.owned,
            availability: n.availability,
        })
        .collect();
    let sources: Vec<&WindowSource> = windows.iter().collect();
    due(
        &rules(),
        &Inputs {
            nodes: &states,
            windows: &sources,
            announcements,
            forecast,
            told: &Told::new(),
            now: ts(now),
        },
    )
}

fn kinds(d: &Due) -> Vec<(Kind, String)> {
    d.notices
        .iter()
        .map(|n| (n.kind, n.at.to_string()))
        .collect()
}

#[test]
fn a_start_seen_only_through_its_end_keeps_its_id() {
    let start = node(
        "a",
        vec![cond(
            MAINTENANCE_IN_PROGRESS,
            true,
            reasons::MAINTENANCE_WINDOW,
            "maintenance started in window ops/w",
            "2026-01-01T02:00:07Z",
        )],
    );
    let end = node(
        "a",
        vec![cond(
            MAINTENANCE_IN_PROGRESS,
            false,
            reasons::MAINTENANCE_WINDOW_ENDED,
            &format!("the maintenance window ended; {STOPPED_AFTER} 4m12s"),
            "2026-01-01T02:04:19Z",
        )],
    );
    let seen = due_at(&[start], &[], "2026-01-01T02:01:00Z");
    let later = due_at(&[end], &[], "2026-01-01T02:05:00Z");
    assert_eq!(
        kinds(&later),
        [
            (Kind::Started, "2026-01-01T02:00:07Z".into()),
            (Kind::Ended, "2026-01-01T02:04:19Z".into())
        ]
    );
    assert_eq!(seen.notices[0].id, later.notices[0].id);
    assert_eq!(
        later.notices[1].duration,
        Some(SignedDuration::from_secs(252))
    );
    // Past the horizon, neither is told.
    assert!(
        due_at(
            &[node("a", later_conditions())],
            &[],
            "2026-01-01T03:00:00Z"
        )
        .notices
        .is_empty()
    );
}

fn later_conditions() -> Vec<Condition> {
    vec![cond(
        MAINTENANCE_IN_PROGRESS,
        false,
        reasons::MAINTENANCE_COMPLETED,
        "kured.dev/RebootRequired is no longer True; completed after 4m12s",
        "2026-01-01T02:04:19Z",
    )]
}

#[test]
fn only_the_conditions_this_instance_owns_are_told() {
    let mut other = node("a", later_conditions());
    other.owned.clear();
    assert!(
        due_at(&[other], &[], "2026-01-01T02:05:00Z")
            .notices
            .is_empty()
    );
    let ours = node("a", later_conditions());
    assert_eq!(
        due_at(&[ours], &[], "2026-01-01T02:05:00Z").notices.len(),
        2
    );
}

#[test]
fn a_wait_is_told_once_per_episode_whatever_it_waits_for() {
    let waiting = |reason: &str, due_since: &str| {
        node(
            "a",
            vec![
                cond(REBOOT, true, "Agent", "", due_since),
                cond(
                    UNDER_MAINTENANCE,
                    true,
                    reasons::MAINTENANCE_WINDOW,
                    "in maintenance window ops/w",
                    "2026-01-01T02:00:00Z",
                ),
                cond(
                    MAINTENANCE_IN_PROGRESS,
                    false,
                    reasons::WAITING_FOR_SLOT,
                    "x",
                    "2026-01-01T02:00:00Z",
                ),
            ]
            .into_iter()
            .map(|mut c| {
                if c.type_ == MAINTENANCE_IN_PROGRESS {
                    c.reason = reason.into();
                }
                c
            })
            .collect(),
        )
    };
    let early = due_at(
        &[waiting(reasons::WAITING_FOR_SLOT, "2026-01-01T01:00:00Z")],
        &[],
        "2026-01-01T02:29:00Z",
    );
    assert!(early.notices.is_empty());
    assert_eq!(early.next, Some(ts("2026-01-01T02:30:00Z")));
    let slot = due_at(
        &[waiting(reasons::WAITING_FOR_SLOT, "2026-01-01T01:00:00Z")],
        &[],
        "2026-01-01T02:31:00Z",
    );
    let alert = due_at(
        &[waiting(reasons::ALERT_FIRING, "2026-01-01T01:00:00Z")],
        &[],
        "2026-01-01T02:40:00Z",
    );
    assert_eq!(slot.notices.len(), 1);
    assert_eq!(slot.notices[0].window.as_ref().unwrap().name, "w");
    assert_eq!(
        slot.notices[0].id, alert.notices[0].id,
        "one episode, one notice"
    );
    assert_eq!(alert.notices[0].reason, reasons::ALERT_FIRING);
    // The requirement turned True again later: another episode.
    let again = due_at(
        &[waiting(reasons::ALERT_FIRING, "2026-01-01T02:20:00Z")],
        &[],
        "2026-01-01T02:55:00Z",
    );
    assert_eq!(again.notices.len(), 1);
    assert_ne!(again.notices[0].id, slot.notices[0].id);
}

#[test]
fn a_window_is_announced_ahead_with_its_forecast_and_closes_with_what_it_left() {
    let windows = [source("w", "0 2 * * *", "1h")];
    let occurrence = WindowOccurrence {
        window: windows[0].id.clone(),
        start: ts("2026-01-01T02:00:00Z"),
        end: ts("2026-01-01T03:00:00Z"),
    };
    let starts = |end: &str| Placement::Starts {
        occurrence: occurrence.clone(),
        start: ts("2026-01-01T02:00:00Z"),
        end: Some(ts(end)),
        carried: 0,
    };
    let played = forecast::Forecast {
        nodes: vec![
            NodeForecast {
                name: "a".into(),
                plan: Plan::Forecast {
                    median: starts("2026-01-01T02:20:00Z"),
                    p90: starts("2026-01-01T02:40:00Z"),
                },
            },
            NodeForecast {
                name: "b".into(),
                plan: Plan::Forecast {
                    median: Placement::NoStart {
                        why: None,
                        carried: 1,
                    },
                    p90: Placement::NoStart {
                        why: None,
                        carried: 1,
                    },
                },
            },
        ],
        median: Rollout::default(),
        p90: Rollout::default(),
        expected: None,
        horizon_end: ts("2026-01-08T00:00:00Z"),
    };
    let nodes = [node("a", vec![]), node("b", vec![])];
    let planned = due_with(&nodes, &windows, &[], Some(&played), "2026-01-01T01:30:00Z");
    assert_eq!(
        kinds(&planned),
        [(Kind::Planned, "2026-01-01T01:00:00Z".into())]
    );
    let n = &planned.notices[0];
    assert_eq!(n.selected, Some(2));
    let f = n.forecast.as_ref().unwrap();
    assert_eq!(
        (f.expected_end, f.p90_end, f.not_fitting.as_slice()),
        (
            ts("2026-01-01T02:20:00Z"),
            ts("2026-01-01T02:40:00Z"),
            &["b".to_string()][..]
        )
    );
    // Not yet within the lead time: when it will be.
    let ahead = due_with(&nodes, &windows, &[], None, "2026-01-01T00:30:00Z");
    assert!(ahead.notices.is_empty());
    assert_eq!(ahead.next, Some(ts("2026-01-01T01:00:00Z")));

    // Closed: a completed, b left with what it waited for.
    let waited = format!(
        "no active maintenance window selects this node; {HAD_WAITED} {}: 1/1 slots in use",
        reasons::WAITING_FOR_SLOT
    );
    let nodes = [
        node(
            "a",
            vec![
                cond(REBOOT, false, "Agent", "", "2026-01-01T02:10:00Z"),
                cond(
                    MAINTENANCE_IN_PROGRESS,
                    false,
                    reasons::NODE_REBOOTED,
                    "the node rebooted; completed after 10m0s",
                    "2026-01-01T02:10:00Z",
                ),
            ],
        ),
        node(
            "b",
            vec![
                cond(REBOOT, true, "Agent", "", "2026-01-01T01:00:00Z"),
                cond(
                    MAINTENANCE_IN_PROGRESS,
                    false,
                    reasons::NO_ACTIVE_MAINTENANCE_WINDOW,
                    &waited,
                    "2026-01-01T03:00:00Z",
                ),
            ],
        ),
    ];
    let ended = Announcement {
        name: "e".into(),
        window: windows[0].id.clone(),
        uid: windows[0].uid.clone(),
        blackout: false,
        what: What::Ended {
            at: ts("2026-01-01T03:00:00Z"),
        },
    };
    let closed = due_with(&nodes, &windows, &[ended], None, "2026-01-01T03:00:10Z");
    let closed: Vec<&Notice> = closed
        .notices
        .iter()
        .filter(|n| n.kind == Kind::WindowClosed)
        .collect();
    assert_eq!(closed.len(), 1);
    assert_eq!((closed[0].selected, closed[0].done), (Some(2), Some(1)));
    assert_eq!(
        closed[0].left,
        [Left {
            node: "b".into(),
            reason: reasons::WAITING_FOR_SLOT.into(),
            message: "1/1 slots in use".into()
        }]
    );
}

#[test]
fn a_start_recorded_to_the_millisecond_keeps_its_instant_and_id_through_its_end() {
    let start = node(
        "a",
        vec![cond(
            MAINTENANCE_IN_PROGRESS,
            true,
            reasons::MAINTENANCE_WINDOW,
            "maintenance started at 2026-01-01T02:00:07.912Z in window ops/w",
            "2026-01-01T02:00:07Z",
        )],
    );
    // 4.5 s later: the end's second less the duration would be 02:00:06.
    let end = node(
        "a",
        vec![cond(
            MAINTENANCE_IN_PROGRESS,
            false,
            reasons::MAINTENANCE_COMPLETED,
            "kured.dev/RebootRequired is no longer True; started at 2026-01-01T02:00:07.912Z, \
             completed after 4.5s",
            "2026-01-01T02:00:12Z",
        )],
    );
    let seen = due_at(&[start], &[], "2026-01-01T02:00:10Z");
    let later = due_at(&[end], &[], "2026-01-01T02:01:00Z");
    assert_eq!(seen.notices[0].at, ts("2026-01-01T02:00:07.912Z"));
    let started: Vec<&Notice> = later
        .notices
        .iter()
        .filter(|n| n.kind == Kind::Started)
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(
        (started[0].at, &started[0].id),
        (seen.notices[0].at, &seen.notices[0].id)
    );
    let completed = later
        .notices
        .iter()
        .find(|n| n.kind == Kind::Completed)
        .unwrap();
    assert_eq!(completed.duration, Some(SignedDuration::from_millis(4500)));
}
