//! The forecast's rules one by one, then the proof that it is the brain's: a property test
//! holds it, node by node, to a simulation of the same model that runs the real pass
//! ([`pass::run`]) every ten seconds.

use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::announce::WindowSource;
use crate::conditions::Status;
use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, UNDER_MAINTENANCE, find, is_true};
use crate::gates::{Gates, Hold};
use crate::in_progress::{self, Availability};
use crate::in_progress::{BlockingPod, Ceiling, GroupCeiling};
use crate::pass::{self, Rules};
use crate::peers::Peers;
use crate::reasons;
use crate::selector;
use crate::testing::ts;
use crate::window::test_window;
use proptest::prelude::*;

const REBOOT: &str = "kured.dev/RebootRequired";
const BLOCK: &str = "kured.dev/RebootBlocked";
const ZONE: &str = "zone";

fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

/// Monday 2026-01-05, 00:00 UTC.
fn monday() -> Timestamp {
    ts("2026-01-05T00:00:00Z")
}

fn condition(type_: &str, status: bool, since: Timestamp) -> Condition {
    Condition {
        type_: type_.into(),
        status: Status::from(status),
        reason: "Reported".into(),
        message: String::new(),
        last_transition_time: Some(since),
        last_heartbeat_time: None,
    }
}

/// A node of the tests, owning what a [`NodeView`] borrows.
#[derive(Clone, Debug)]
struct Node {
    name: String,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    availability: Availability,
    pods: Vec<BlockingPod>,
    boot_id: Option<String>,
    /// The condition types kumaco wrote on it (the oracle's managedFields).
    owned: Vec<String>,
}

impl Node {
    /// A node needing a reboot since `since` minutes before Monday.
    fn needing(name: &str, zone: Option<&str>, since: i64) -> Node {
        Node {
            name: name.into(),
            labels: zone
                .map(|z| (ZONE.to_string(), z.to_string()))
                .into_iter()
                .collect(),
            conditions: vec![condition(REBOOT, true, monday() - mins(since))],
            availability: Availability::default(),
            pods: Vec::new(),
            boot_id: Some(format!("{name}-boot")),
            owned: Vec::new(),
        }
    }

    fn view(&self) -> NodeView<'_> {
        NodeView {
            name: &self.name,
            uid: &self.name,
            labels: &self.labels,
            resource_version: None,
            conditions: &self.conditions,
            owned: &self.owned,
            owned_since: None,
            owners: &[],
            availability: self.availability,
            pods: &self.pods,
            boot_id: self.boot_id.as_deref(),
            holds: &[],
            drain: None,
        }
    }
}

fn policy(ceiling: u32) -> Policy {
    Policy {
        required: vec![REBOOT.into()],
        blocking: vec![BLOCK.into()],
        ..Policy::with_ceiling(Ceiling::Count(ceiling))
    }
}

fn durations(maintenance: SignedDuration, recovery: SignedDuration) -> Durations {
    Durations::given(Quantiles::fixed(maintenance), Quantiles::fixed(recovery))
}

fn run(
    windows: &[Window],
    policy: &Policy,
    nodes: &[Node],
    durations: &Durations,
    now: Timestamp,
) -> Forecast {
    let windows: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    forecast(
        &windows,
        policy,
        &views,
        durations,
        now,
        SignedDuration::from_hours(24 * 30),
    )
}

fn plan<'f>(f: &'f Forecast, name: &str) -> &'f Plan {
    &f.nodes.iter().find(|n| n.name == name).expect(name).plan
}

fn median<'f>(f: &'f Forecast, name: &str) -> &'f Placement {
    match plan(f, name) {
        Plan::Forecast { median, .. } => median,
        held => panic!("{name} is not forecast: {held:?}"),
    }
}

fn p90<'f>(f: &'f Forecast, name: &str) -> &'f Placement {
    match plan(f, name) {
        Plan::Forecast { p90, .. } => p90,
        held => panic!("{name} is not forecast: {held:?}"),
    }
}

/// (start, end) of a node's maintenance at the median, as `HH:MM:SS` on Monday (or
/// `+Nd HH:MM:SS` later).
fn at_median(f: &Forecast, name: &str) -> (String, String) {
    let p = median(f, name);
    (clock(p.start()), clock(p.end()))
}

fn clock(t: Option<Timestamp>) -> String {
    let Some(t) = t else {
        return "-".into();
    };
    let since = t.duration_since(monday()).as_secs();
    let (days, rest) = (since.div_euclid(86400), since.rem_euclid(86400));
    let hms = format!("{:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    if days == 0 {
        hms
    } else {
        format!("+{days}d {hms}")
    }
}

fn pair(start: &str, end: &str) -> (String, String) {
    (start.into(), end.into())
}

/// The nightly window of most tests: 02:00 for 2 hours.
fn nightly(selector: &str) -> Window {
    test_window("nightly", "0 2 * * *", "2h", selector, false)
}

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

// ---------------------------------------------------------------------------------------
// The oracle: the same model of a maintenance, the real pass every `STEP` and whenever
// the world or the clock changes its answer.

const STEP: SignedDuration = SignedDuration::from_secs(10);

/// Each node's first start and first end (a node in progress at `now`: since when),
/// running [`pass::run`] every [`STEP`] from `now` until `until`, and also the moment a
/// maintenance or a recovery ends or the pass's answer changes by the clock (the
/// controller's watch and requeue), each instant's passes repeated until they write
/// nothing (the controller's passes after its own writes). Each node's maintenance and
/// recovery last what `lengths` gives it.
fn stepped(
    windows: &[Window],
    policy: &Policy,
    nodes: &[Node],
    lengths: &Lengths,
    now: Timestamp,
    until: Timestamp,
) -> BTreeMap<String, (Option<Timestamp>, Option<Timestamp>)> {
    use super::drawn::Kind;
    let maintenance = |n: &Node, elapsed| lengths.of(&n.name, Kind::Maintenance, elapsed);
    let recovery = |n: &Node, elapsed| lengths.of(&n.name, Kind::Recovery, elapsed);
    // Written through the API: whole seconds.
    let whole = |t: Timestamp| Timestamp::from_second(t.as_second()).unwrap();
    let sources: Vec<WindowSource> = windows
        .iter()
        .map(|w| WindowSource {
            id: w.id.clone(),
            uid: w.id.name.clone(),
            data_hash: 0,
            created: None,
            window: Ok(w.clone()),
        })
        .collect();
    let sources: Vec<&WindowSource> = sources.iter().collect();
    let rules = Rules {
        node_selector: selector::parse("").unwrap(),
        instance: "kumaco/ops/kumaco".into(),
        in_progress: Some(policy.clone()),
        planned_lead_time: None,
        resync: mins(5),
    };
    let mut nodes = nodes.to_vec();
    let mut seen: BTreeMap<String, (Option<Timestamp>, Option<Timestamp>)> = BTreeMap::new();
    // (when, node, done): the work done (true) or the node back (false).
    let mut world: Vec<(Timestamp, usize, bool)> = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let Some(c) = find(&n.conditions, MAINTENANCE_IN_PROGRESS) else {
            continue;
        };
        let since = c.last_transition_time.unwrap();
        let elapsed = now.duration_since(since).max(SignedDuration::ZERO);
        if c.is_true() {
            seen.insert(n.name.clone(), (Some(since), None));
            world.push(((since + maintenance(n, elapsed)).max(now), i, true));
        } else if n.availability.unavailable().is_some() && in_progress::start_or_end(c).is_some() {
            world.push(((since + recovery(n, elapsed)).max(now), i, false));
        }
    }
    let pending = HashMap::new();
    let mut t = now;
    let mut next_step = now;
    let mut reboots = 0;
    while t < until {
        while let Some(k) = world.iter().position(|(when, ..)| *when <= t) {
            let (_, i, done) = world.remove(k);
            let n = &mut nodes[i];
            if done {
                for type_ in &policy.required {
                    n.conditions.retain(|c| &c.type_ != type_);
                    n.conditions.push(condition(type_, false, whole(t)));
                }
                if n.boot_id.is_some() {
                    reboots += 1;
                    n.boot_id = Some(format!("rebooted-{reboots}"));
                }
                n.availability = Availability {
                    ready: Some(Status::False),
                    unschedulable: true,
                    disrupted_by: None,
                };
                let back = recovery(n, SignedDuration::ZERO);
                world.push((t + back, i, false));
            } else {
                n.availability = Availability::default();
            }
        }
        let mut next_edge = None;
        for _ in 0..10 {
            let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
            let outcome = pass::run(
                &rules,
                &sources,
                &[],
                views,
                &pending,
                &Peers::default(),
                &Gates::NONE,
                t,
            );
            next_edge = outcome.next_edge;
            if outcome.writes.is_empty() {
                break;
            }
            for write in outcome.writes {
                let i = nodes.iter().position(|n| n.name == write.node).unwrap();
                let n = &mut nodes[i];
                let was = is_true(&n.conditions, MAINTENANCE_IN_PROGRESS);
                for c in &write.conditions {
                    n.conditions.retain(|x| x.type_ != c.type_);
                    n.conditions.push(c.clone());
                }
                n.owned = write.conditions.iter().map(|c| c.type_.clone()).collect();
                let is = is_true(&n.conditions, MAINTENANCE_IN_PROGRESS);
                let entry = seen.entry(n.name.clone()).or_default();
                if is && !was {
                    entry.0.get_or_insert(t);
                    // One piece of work per node at a time.
                    if !world.iter().any(|&(_, j, done)| j == i && done) {
                        let work = maintenance(n, SignedDuration::ZERO);
                        world.push((t + work, i, true));
                    }
                } else if was && !is && entry.0.is_some() {
                    entry.1.get_or_insert(t);
                }
            }
        }
        if next_step <= t {
            next_step += STEP;
        }
        t = world
            .iter()
            .map(|&(when, ..)| when)
            .chain(next_edge)
            .filter(|&when| when > t)
            .fold(next_step, Timestamp::min);
    }
    seen
}

/// A small random fleet, rules and windows whose every instant falls on the oracle's
/// step: (windows, policy, nodes, maintenance and recovery at the median and the 90th
/// percentile, now).
type Case = (
    Vec<Window>,
    Policy,
    Vec<Node>,
    [(SignedDuration, SignedDuration); 2],
    Timestamp,
);

fn case() -> impl Strategy<Value = Case> {
    let node = (
        prop::option::of(prop::sample::select(vec!["a", "b"])),
        0u8..14,
        0i64..360,
        any::<bool>(),
    );
    // Chained windows (each occurrence overlapping the next) make every pass follow 64
    // occurrences, slow in a debug build: a test of their own below.
    let window = (
        prop::sample::select(vec![
            ("*/10 * * * *", "3m"),
            ("*/15 * * * *", "7m"),
            ("5,35 * * * *", "12m"),
            ("*/20 * * * *", "4m30s"),
            ("0 * * * *", "25m"),
        ]),
        prop::sample::select(vec!["", "zone=a", "zone=b", "zone"]),
        0u8..6,
    );
    let rules = (
        (0u8..5, 1u32..4, 0u8..4, any::<bool>()),
        (0i64..4, 0i64..3, any::<bool>(), any::<bool>()),
    );
    let durations = (1i64..60, 0i64..30, 0i64..20, 0i64..10);
    (
        prop::collection::vec(node, 1..8),
        prop::collection::vec(window, 1..4),
        rules,
        durations,
        0i64..120,
    )
        .prop_map(|(nodes, windows, rules, durations, offset)| {
            let now = monday() + STEP * offset as i32;
            let ((required, ceiling, per_zone, count_unavailable), rest) = rules;
            let (interval, cutoff, stop_at_window_end, complete_on_reboot) = rest;
            let policy = Policy {
                required: if required == 0 {
                    Vec::new()
                } else {
                    vec![REBOOT.into()]
                },
                blocking: vec![BLOCK.into()],
                ceiling: if ceiling == 3 {
                    Ceiling::Percent(50)
                } else {
                    Ceiling::Count(ceiling)
                },
                group_ceilings: (per_zone > 0)
                    .then(|| GroupCeiling {
                        key: ZONE.into(),
                        ceiling: match per_zone {
                            3 => Ceiling::Percent(50),
                            n => Ceiling::Count(u32::from(n)),
                        },
                    })
                    .into_iter()
                    .collect(),
                count_unavailable,
                start_interval: (interval > 0).then(|| secs(interval * 70)),
                start_cutoff: mins(cutoff * 2),
                stop_at_window_end,
                complete_on_reboot,
                ..Policy::with_ceiling(Ceiling::Count(1))
            };
            let windows: Vec<Window> = windows
                .iter()
                .enumerate()
                .map(|(i, ((start, duration), selector, kind))| {
                    test_window(
                        &format!("w{i}"),
                        start,
                        duration,
                        selector,
                        i > 0 && *kind == 0,
                    )
                })
                .collect();
            let nodes: Vec<Node> = nodes
                .iter()
                .enumerate()
                .map(|(i, &(zone, kind, since, boot))| {
                    let mut n = Node::needing(&format!("node-{i}"), zone, since);
                    n.conditions[0].last_transition_time = Some(now - STEP * since as i32);
                    if !boot {
                        n.boot_id = None;
                    }
                    match kind {
                        // Needs nothing.
                        0 => n.conditions[0].status = Status::False,
                        // Blocked.
                        1 => n.conditions.push(condition(BLOCK, true, now)),
                        // Down for another reason.
                        2 => n.availability.ready = Some(Status::False),
                        // In progress since `since` steps.
                        3 | 4 => n.conditions.push(Condition {
                            message: format!(
                                "maintenance started (boot ID node-{i}-boot) in window ops/w0"
                            ),
                            ..condition(
                                MAINTENANCE_IN_PROGRESS,
                                true,
                                now - STEP * (since / 3) as i32,
                            )
                        }),
                        // Completed, still down.
                        5 => {
                            n.conditions[0].status = Status::False;
                            n.conditions.push(Condition {
                                reason: reasons::MAINTENANCE_COMPLETED.into(),
                                ..condition(
                                    MAINTENANCE_IN_PROGRESS,
                                    false,
                                    now - STEP * (since / 3) as i32,
                                )
                            });
                            n.availability.ready = Some(Status::False);
                        }
                        // Rebooted, its requirement not confirmed since (or, without
                        // required conditions, in the window it rebooted in).
                        6 => n.conditions.push(Condition {
                            reason: reasons::NODE_REBOOTED.into(),
                            message: "the node rebooted (boot ID a -> b); completed after 1m0s"
                                .into(),
                            ..condition(
                                MAINTENANCE_IN_PROGRESS,
                                false,
                                now - STEP * (since / 7) as i32,
                            )
                        }),
                        // Stopped by its window's end, still needing maintenance.
                        7 => n.conditions.push(Condition {
                            reason: reasons::MAINTENANCE_WINDOW_ENDED.into(),
                            message: "the maintenance window ended; stopped after 1m0s".into(),
                            ..condition(
                                MAINTENANCE_IN_PROGRESS,
                                false,
                                now - STEP * (since / 7) as i32,
                            )
                        }),
                        _ => {}
                    }
                    n
                })
                .collect();
            let (d, extra_d, r, extra_r) = durations;
            let median = (STEP * (6 * d) as i32, STEP * (6 * r) as i32);
            let p90 = (
                median.0 + STEP * (6 * extra_d) as i32,
                median.1 + STEP * (6 * extra_r) as i32,
            );
            (windows, policy, nodes, [median, p90], now)
        })
}

/// `PROPTEST_CASES` if set (a longer search: `PROPTEST_CASES=5000 cargo test --release`),
/// else `default`: the oracle runs the whole pass every ten seconds, slow in a debug build.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    /// The forecast is the brain's: each node's start and end, at either duration, are
    /// those of the real pass run every ten seconds over the same model of a maintenance.
    #[test]
    fn the_forecast_is_what_the_pass_does_step_by_step(case in case()) {
        let (windows, policy, nodes, durations, now) = case;
        same_as_the_pass(&windows, &policy, &nodes, durations, now, SignedDuration::from_hours(2))?;
    }

    /// The same over durations learned from records (the controller's and `kumaco
    /// plan`'s path): each node's maintenance and recovery spread over the record's
    /// second, so ends fall between the pass's steps and the pass runs when they happen.
    #[test]
    fn the_forecast_over_learned_durations_is_what_the_pass_does(case in case()) {
        let (windows, policy, nodes, [median, p90], now) = case;
        let records = |m: SignedDuration, p: SignedDuration| {
            let mut r = vec![m, m, m, m, p];
            (Quantiles::of(&mut r).expect("records"), r)
        };
        let (maintenance, rm) = records(median.0, p90.0);
        let (recovery, rr) = records(median.1, p90.1);
        let d = Durations {
            maintenance,
            recovery,
            recorded: Recorded { maintenance: rm, recovery: rr },
        };
        same_as_the_pass_over(&windows, &policy, &nodes, &d, now, SignedDuration::from_hours(2))?;
    }
}

#[test]
fn a_chained_window_is_forecast_as_the_pass_runs_it() {
    // Every occurrence overlaps the next: one span, no end in sight, so no start cutoff.
    let windows = [
        test_window("chained", "*/10 * * * *", "12m", "", false),
        test_window("freeze", "2026-01-05T00:20:00Z", "10m", "zone=a", true),
    ];
    let mut nodes: Vec<Node> = (0..5)
        .map(|i| Node::needing(&format!("n{i}"), [Some("a"), None][i % 2], 10 - i as i64))
        .collect();
    nodes[3].availability.unschedulable = true;
    let policy = Policy {
        start_cutoff: mins(5),
        start_interval: Some(secs(90)),
        ..policy(2)
    };
    let durations = [(mins(4), secs(50)), (mins(7), mins(2))];
    same_as_the_pass(
        &windows,
        &policy,
        &nodes,
        durations,
        monday(),
        SignedDuration::from_hours(1),
    )
    .unwrap();
}

// Cases where an earlier, simpler simulation parted from the pass, found by the property
// test above (shrunk, kept as they were found), and one made to the same end.

#[test]
fn a_node_whose_work_goes_on_after_its_window_stopped_it_is_worked_on_once() {
    // At the 90th percentile, stopped at now by its window's end, node-0 starts again at
    // 00:20 and 00:30 while its 21 minutes of work go on: the work is done once, at 00:31,
    // and node-0 is back at 00:51, when node-1 starts.
    let now = ts("2026-01-05T00:19:30Z");
    let windows = [test_window("w0", "*/10 * * * *", "3m", "zone=b", false)];
    let policy = Policy {
        stop_at_window_end: true,
        complete_on_reboot: false,
        ..policy(1)
    };
    let mut n0 = Node::needing("node-0", Some("b"), 0);
    n0.conditions[0].last_transition_time = Some(ts("2026-01-04T23:51:00Z"));
    n0.conditions.push(Condition {
        message: "maintenance started (boot ID node-0-boot) in window ops/w0".into(),
        ..condition(MAINTENANCE_IN_PROGRESS, true, ts("2026-01-05T00:10:00Z"))
    });
    let mut n1 = Node::needing("node-1", Some("b"), 0);
    n1.conditions[0].last_transition_time = Some(now);
    let nodes = [n0, n1];
    let durations = [(mins(3), mins(13)), (mins(21), mins(20))];
    same_as_the_pass(
        &windows,
        &policy,
        &nodes,
        durations,
        now,
        SignedDuration::from_hours(2),
    )
    .unwrap();
    let refs: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    let f = forecast(
        &refs,
        &policy,
        &views,
        &durations_of(durations),
        now,
        SignedDuration::from_hours(2),
    );
    let p = p90(&f, "node-1");
    assert_eq!(
        (clock(p.start()), clock(p.end())),
        pair("00:51:00", "00:53:00")
    );
}

#[test]
fn a_window_end_then_a_cleared_requirement_paces_as_the_pass_does() {
    // node-0's window ends its maintenance at 00:07:50; its reporter clears the requirement
    // at 00:08:50. When the window opens at 00:10, the pass replaces that end with
    // RequirementNotMet, and the next pass no longer counts the interval from it: node-1
    // starts at 00:10, not at 00:10:10.
    let now = ts("2026-01-05T00:07:50Z");
    let windows = [test_window("w0", "*/10 * * * *", "3m", "", false)];
    let policy = Policy {
        stop_at_window_end: true,
        count_unavailable: false,
        start_interval: Some(secs(140)),
        complete_on_reboot: false,
        ..policy(1)
    };
    let mut n0 = Node::needing("node-0", None, 0);
    n0.boot_id = None;
    n0.conditions[0].last_transition_time = Some(now);
    n0.conditions.push(Condition {
        message: "maintenance started (boot ID node-0-boot) in window ops/w0".into(),
        ..condition(MAINTENANCE_IN_PROGRESS, true, now)
    });
    let mut n1 = Node::needing("node-1", None, 0);
    n1.boot_id = None;
    n1.conditions[0].last_transition_time = Some(now - secs(10));
    let nodes = [n0, n1];
    let durations = [(mins(1), secs(0)), (mins(1), secs(0))];
    same_as_the_pass(
        &windows,
        &policy,
        &nodes,
        durations,
        now,
        SignedDuration::from_hours(2),
    )
    .unwrap();
    let refs: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    let f = forecast(
        &refs,
        &policy,
        &views,
        &durations_of(durations),
        now,
        SignedDuration::from_hours(2),
    );
    assert_eq!(
        median(&f, "node-1").start(),
        Some(ts("2026-01-05T00:10:00Z"))
    );
}

#[test]
fn a_node_rebooted_in_an_earlier_window_is_decided_again_when_its_window_reopens() {
    // Without required conditions node-0, rebooted as the 01:35 window closed, may start
    // again once UnderMaintenance turned True after that, at 02:05: the pass that writes it
    // waits node-0 (NodeRebooted), the next one makes it a candidate again.
    let now = ts("2026-01-05T00:06:50Z");
    let windows = [test_window("w0", "5,35 * * * *", "12m", "", false)];
    let policy = Policy {
        required: Vec::new(),
        group_ceilings: vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Count(2),
        }],
        count_unavailable: false,
        start_interval: Some(secs(140)),
        ..policy(2)
    };
    let idle = |name: &str| {
        let mut n = Node::needing(name, None, 0);
        n.conditions = Vec::new();
        n.boot_id = None;
        n
    };
    let mut n0 = Node::needing("node-0", None, 0);
    n0.conditions = vec![Condition {
        message: "maintenance started (boot ID node-0-boot) in window ops/w0".into(),
        ..condition(MAINTENANCE_IN_PROGRESS, true, ts("2026-01-05T00:02:40Z"))
    }];
    let mut n2 = idle("node-2");
    n2.conditions.push(Condition {
        reason: reasons::MAINTENANCE_COMPLETED.into(),
        ..condition(MAINTENANCE_IN_PROGRESS, false, now)
    });
    n2.availability.ready = Some(Status::False);
    let nodes = [n0, idle("node-1"), n2, idle("node-3")];
    let durations = [(mins(25), secs(0)), (mins(42), secs(0))];
    same_as_the_pass(
        &windows,
        &policy,
        &nodes,
        durations,
        now,
        SignedDuration::from_hours(3),
    )
    .unwrap();
}

#[test]
fn a_window_opening_is_read_by_the_pass_after_the_one_that_writes_it() {
    // a rebooted as its window closed (00:05, the same second UnderMaintenance went
    // False): at 00:10 the first pass reads UnderMaintenance as written then, not
    // confirmed, and starts b; only the next pass reads it True and makes a a candidate.
    let now = ts("2026-01-05T00:06:00Z");
    let windows = [test_window("w0", "*/10 * * * *", "5m", "", false)];
    let policy = Policy {
        required: Vec::new(),
        ..policy(1)
    };
    let closed = ts("2026-01-05T00:05:00Z");
    let mut a = Node::needing("a", None, 0);
    a.boot_id = None;
    a.conditions = vec![
        Condition {
            reason: reasons::NODE_REBOOTED.into(),
            message: "the node rebooted (boot ID x -> y); completed after 2m0s".into(),
            ..condition(MAINTENANCE_IN_PROGRESS, false, closed)
        },
        Condition {
            reason: reasons::NO_ACTIVE_MAINTENANCE_WINDOW.into(),
            ..condition(UNDER_MAINTENANCE, false, closed)
        },
    ];
    let mut b = Node::needing("b", None, 0);
    b.conditions.clear();
    b.boot_id = None;
    let nodes = [a, b];
    let durations = [(mins(2), secs(0)), (mins(2), secs(0))];
    same_as_the_pass(
        &windows,
        &policy,
        &nodes,
        durations,
        now,
        SignedDuration::from_hours(1),
    )
    .unwrap();
    let refs: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    let f = forecast(
        &refs,
        &policy,
        &views,
        &durations_of(durations),
        now,
        SignedDuration::from_hours(1),
    );
    assert_eq!(at_median(&f, "b"), pair("00:10:00", "00:15:00"));
    assert_eq!(at_median(&f, "a"), pair("00:20:00", "00:25:00"));
}

fn durations_of([median, p90]: [(SignedDuration, SignedDuration); 2]) -> Durations {
    Durations::given(
        Quantiles {
            median: median.0,
            p90: p90.0,
        },
        Quantiles {
            median: median.1,
            p90: p90.1,
        },
    )
}

/// Checks the forecast against [`stepped`], node by node, at both durations given.
fn same_as_the_pass(
    windows: &[Window],
    policy: &Policy,
    nodes: &[Node],
    durations: [(SignedDuration, SignedDuration); 2],
    now: Timestamp,
    horizon: SignedDuration,
) -> Result<(), TestCaseError> {
    let d = durations_of(durations);
    same_as_the_pass_over(windows, policy, nodes, &d, now, horizon)
}

/// [`same_as_the_pass`] over durations given or learned: learned ones (with records)
/// spread over their second by node, as the controller and `kumaco plan` forecast.
fn same_as_the_pass_over(
    windows: &[Window],
    policy: &Policy,
    nodes: &[Node],
    d: &Durations,
    now: Timestamp,
    horizon: SignedDuration,
) -> Result<(), TestCaseError> {
    let refs: Vec<&Window> = windows.iter().collect();
    let views: Vec<NodeView> = nodes.iter().map(Node::view).collect();
    let f = forecast(&refs, policy, &views, d, now, horizon);
    prop_assert_eq!(f.horizon_end, now + horizon);
    let pool = |q: SignedDuration, recorded: &[SignedDuration]| {
        Pool::fixed(q.max(SignedDuration::ZERO), !recorded.is_empty())
    };
    let (m, r) = (&d.maintenance, &d.recovery);
    let (rm, rr) = (&d.recorded.maintenance, &d.recorded.recovery);
    for (lengths, run) in [
        (
            Lengths::fixed(pool(m.median, rm), pool(r.median, rr)),
            "median",
        ),
        (Lengths::fixed(pool(m.p90, rm), pool(r.p90, rr)), "p90"),
    ] {
        let steps = stepped(windows, policy, nodes, &lengths, now, f.horizon_end);
        for n in nodes {
            let (start, end) = steps.get(&n.name).copied().unwrap_or_default();
            match f.nodes.iter().find(|f| f.name == n.name).map(|f| &f.plan) {
                Some(Plan::Forecast { median, p90 }) => {
                    let p = if run == "median" { median } else { p90 };
                    prop_assert_eq!(
                        (p.start(), p.end()),
                        (start, end),
                        "{} at the {}: {:?}",
                        n.name,
                        run,
                        p
                    );
                }
                Some(Plan::Held { reason, .. }) => {
                    prop_assert_eq!(start, None, "{} held ({}) but started", n.name, reason);
                }
                None => prop_assert_eq!(start, None, "{} not shown but started", n.name),
            }
        }
    }
    Ok(())
}

/// Durations learned from these records (minutes), as [`learn`] gives them.
fn learned_from(maintenance: &[i64], recovery: &[i64]) -> Durations {
    let sampled = |m: &[i64]| {
        let mut recorded: Vec<SignedDuration> = m.iter().map(|&m| mins(m)).collect();
        let quantiles = Quantiles::of(&mut recorded).expect("records");
        (quantiles, recorded)
    };
    let (m, maintenance) = sampled(maintenance);
    let (r, recovery) = sampled(recovery);
    Durations {
        maintenance: m,
        recovery: r,
        recorded: Recorded {
            maintenance,
            recovery,
        },
    }
}

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
