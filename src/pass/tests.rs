use std::collections::BTreeSet;

use std::collections::BTreeMap;

use super::*;
use crate::decision::{REASON_BLACKOUT, REASON_NOT_MANAGED, REASON_OUT_OF_SCOPE};
use crate::in_progress::Ceiling;
use crate::selector;
use crate::window::test_window;

const REBOOT: &str = "kured.dev/RebootRequired";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn secs(t: &str, s: i64) -> Timestamp {
    ts(t) + SignedDuration::from_secs(s)
}

fn rules(selector: &str) -> Rules {
    Rules {
        node_selector: selector::parse(selector).unwrap(),
        instance: "kumaco/ops/kumaco".into(),
        in_progress: None,
        planned_lead_time: None,
    }
}

fn in_progress(max: u32, required: &[&str]) -> Option<Policy> {
    Some(Policy {
        required: required.iter().map(|s| s.to_string()).collect(),
        blocking: vec![],
        ceiling: Ceiling::Count(max),
        stop_at_window_end: false,
        start_cutoff: SignedDuration::ZERO,
    })
}

fn source(name: &str, start: &str, duration: &str, selector: &str, blackout: bool) -> WindowSource {
    let w = test_window(name, start, duration, selector, blackout);
    WindowSource {
        id: w.id.clone(),
        uid: format!("uid-{name}"),
        data_hash: crate::fingerprint::window_data(
            &w.id,
            &BTreeMap::from([(
                "startTime".to_string(),
                format!("{start} {duration} {selector} {blackout}"),
            )]),
        ),
        window: Ok(w),
    }
}

/// A node in the simulated cluster: what the API server would store.
#[derive(Clone, Debug)]
struct Node {
    name: String,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    owned: Vec<String>,
    rv: u64,
}

/// A cluster of nodes, kumaco's writes applied to it as server-side apply would (the
/// applied conditions replace those of the same type; the manager owns exactly them).
#[derive(Clone, Debug)]
struct Cluster {
    nodes: Vec<Node>,
    posted: BTreeSet<String>,
    writes: usize,
}

impl Cluster {
    fn new(nodes: &[(&str, &[(&str, &str)])]) -> Self {
        Cluster {
            nodes: nodes
                .iter()
                .map(|(name, labels)| Node {
                    name: name.to_string(),
                    labels: labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    conditions: vec![],
                    owned: vec![],
                    rv: 1,
                })
                .collect(),
            posted: BTreeSet::new(),
            writes: 0,
        }
    }

    fn node(&mut self, name: &str) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.name == name).unwrap()
    }

    fn condition(&self, node: &str, type_: &str) -> Option<(Status, String)> {
        let n = self.nodes.iter().find(|n| n.name == node).unwrap();
        find(&n.conditions, type_).map(|c| (c.status, c.reason.clone()))
    }

    /// Another writer (a reboot agent) sets a condition it owns.
    fn set(&mut self, node: &str, type_: &str, status: bool, at: Timestamp) {
        let n = self.node(node);
        n.conditions.retain(|c| c.type_ != type_);
        n.conditions.push(Condition {
            type_: type_.into(),
            status: Status::from(status),
            reason: "Agent".into(),
            message: String::new(),
            last_transition_time: Some(at),
        });
        n.rv += 1;
    }

    /// One pass of a kumaco that has no pending writes (the cache shows everything: a
    /// kumaco whose watch caught up, or one that just started), its writes applied and
    /// its events posted. Returns the outcome.
    fn pass(&mut self, rules: &Rules, windows: &[WindowSource], now: Timestamp) -> Outcome {
        let pending = HashMap::new();
        let views: Vec<NodeView> = self
            .nodes
            .iter()
            .map(|n| NodeView {
                name: &n.name,
                labels: &n.labels,
                resource_version: Some(n.rv),
                conditions: &n.conditions,
                owned: &n.owned,
            })
            .collect();
        let sources: Vec<&WindowSource> = windows.iter().collect();
        let outcome = run(rules, &sources, &[], views, &pending, now);
        for w in &outcome.writes {
            let n = self.node(&w.node);
            n.conditions.retain(|c| !n.owned.contains(&c.type_));
            n.conditions
                .retain(|c| !w.conditions.iter().any(|x| x.type_ == c.type_));
            n.conditions.extend(w.conditions.iter().cloned());
            n.owned = w.conditions.iter().map(|c| c.type_.clone()).collect();
            n.owned.sort();
            n.rv += 1;
            self.writes += 1;
        }
        for e in &outcome.events {
            self.posted.insert(e.name.clone());
        }
        outcome
    }

    /// Events due now that are not posted yet.
    fn new_events(&self, outcome: &Outcome) -> Vec<String> {
        outcome
            .events
            .iter()
            .filter(|e| !self.posted.contains(&e.name))
            .map(|e| e.reason().to_string())
            .collect()
    }
}

/// Passes at the same instant reach a fixpoint: a slot freed in one pass is given in the
/// next (in_progress counts an ending maintenance until its end is written), and after
/// that a fresh pass over what the last one left writes nothing and posts nothing.
fn steady(cluster: &mut Cluster, rules: &Rules, windows: &[WindowSource], now: Timestamp) {
    cluster.pass(rules, windows, now);
    let before = cluster.clone();
    let outcome = cluster.pass(rules, windows, now);
    assert!(
        outcome.writes.is_empty(),
        "a third pass wrote: {:?}",
        outcome.writes
    );
    assert!(
        before.new_events(&outcome).is_empty(),
        "a third pass posted"
    );
}

#[test]
fn a_fresh_pass_over_what_the_last_one_left_does_nothing() {
    let r = Rules {
        in_progress: in_progress(1, &[REBOOT]),
        planned_lead_time: Some(SignedDuration::from_mins(10)),
        ..rules("pool=a")
    };
    let windows = [
        source("w", "0 2 * * *", "1h", "", false),
        source("freeze", "30 2 * * *", "10m", "name=n2", true),
    ];
    let mut c = Cluster::new(&[
        ("n1", &[("pool", "a"), ("name", "n1")]),
        ("n2", &[("pool", "a"), ("name", "n2")]),
    ]);
    c.set("n1", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    c.set("n2", REBOOT, true, ts("2026-01-01T00:00:01Z"));
    // Every few minutes across the lead time, the window, the blackout and the end.
    for minute in (0..90).step_by(3) {
        let now = secs("2026-01-01T01:45:00Z", minute * 60);
        if minute == 30 {
            c.set("n1", REBOOT, false, now);
        }
        c.pass(&r, &windows, now);
        steady(&mut c, &r, &windows, now);
    }
}

#[test]
fn a_node_that_left_the_scope_while_kumaco_was_down_loses_its_true_conditions() {
    let r = Rules {
        in_progress: in_progress(3, &[]),
        ..rules("team=a")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[
        ("n1", &[("team", "a")]),
        ("n2", &[("team", "a")]),
        ("other", &[("team", "b")]),
    ]);
    let now = ts("2026-01-01T02:05:00Z");
    c.pass(&r, &windows, now);
    assert_eq!(
        c.condition("n1", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    // Down; n1 relabelled; another instance's node carries conditions kumaco does not own.
    c.node("n1").labels.insert("team".into(), "b".into());
    c.set("other", UNDER_MAINTENANCE, true, now);
    let later = secs("2026-01-01T02:05:00Z", 60);
    let outcome = c.pass(&r, &windows, later);
    assert_eq!(outcome.writes.len(), 1, "{:?}", outcome.writes);
    for type_ in [UNDER_MAINTENANCE, MAINTENANCE_IN_PROGRESS] {
        assert_eq!(
            c.condition("n1", type_),
            Some((Status::False, REASON_OUT_OF_SCOPE.into()))
        );
    }
    assert_eq!(c.condition("other", UNDER_MAINTENANCE).unwrap().1, "Agent");
    steady(&mut c, &r, &windows, later);
}

#[test]
fn overlapping_occurrences_write_once_and_announce_once() {
    let r = rules("");
    let windows = [source("often", "@every 1s", "1h", "", false)];
    let names: Vec<(&str, &[(&str, &str)])> = vec![("a", &[]), ("b", &[]), ("c", &[])];
    let mut c = Cluster::new(&names);
    let mut events = BTreeSet::new();
    for s in 0..120 {
        let outcome = c.pass(&r, &windows, secs("2026-01-01T02:00:00Z", s));
        events.extend(outcome.events.iter().map(|e| e.name.clone()));
    }
    assert_eq!(c.writes, 3, "one write per node");
    assert_eq!(
        events.len(),
        1,
        "WindowLoaded only: the span began long before"
    );
}

#[test]
fn a_blackout_suspends_new_starts_but_not_maintenance_in_progress() {
    for required in [false, true] {
        let req: &[&str] = if required { &[REBOOT] } else { &[] };
        let r = Rules {
            in_progress: in_progress(1, req),
            ..rules("")
        };
        let windows = [
            source("w", "0 2 * * *", "1h", "", false),
            source("freeze", "10 2 * * *", "15m", "name=n1", true),
        ];
        let mut c = Cluster::new(&[("n1", &[("name", "n1")]), ("n2", &[("name", "n2")])]);
        c.set("n1", REBOOT, true, ts("2026-01-01T00:00:00Z"));
        c.set("n2", REBOOT, true, ts("2026-01-01T00:00:01Z"));
        let mut starts = 0;
        for minute in 0..70 {
            let now = secs("2026-01-01T02:00:00Z", minute * 60);
            let outcome = c.pass(&r, &windows, now);
            starts += outcome
                .writes
                .iter()
                .filter(|w| w.node == "n1")
                .flat_map(|w| &w.transitions)
                .filter(|t| **t == (MAINTENANCE_IN_PROGRESS.to_string(), Status::True))
                .count();
            let n1 = c.condition("n1", MAINTENANCE_IN_PROGRESS).unwrap();
            let n2 = c.condition("n2", MAINTENANCE_IN_PROGRESS).unwrap();
            if (10..25).contains(&minute) {
                assert_eq!(n1.0, Status::True, "minute {minute}, required {required}");
                assert_eq!(
                    c.condition("n1", UNDER_MAINTENANCE),
                    Some((Status::False, REASON_BLACKOUT.into()))
                );
            }
            if minute < 60 {
                assert_eq!(n2.0, Status::False, "minute {minute}: the slot is n1's");
            }
        }
        assert_eq!(
            starts, 1,
            "n1 started once in the occurrence (required {required})"
        );
    }
}

#[test]
fn a_new_leader_after_an_edit_writes_and_posts_what_one_that_never_stopped_would() {
    let r = rules("");
    let before = [source("w", "0 2 * * *", "1h", "", false)];
    let after = [source("w", "0 2 * * *", "20m", "", false)];
    let mut steady_kumaco = Cluster::new(&[("n", &[])]);
    steady_kumaco.pass(&r, &before, ts("2026-01-01T02:05:00Z"));
    let mut failover = steady_kumaco.clone();
    // The edit lands; one kumaco sees it at once, the other (newly elected) 14 s later.
    steady_kumaco.pass(&r, &after, ts("2026-01-01T02:25:00Z"));
    let missing_steady = steady_kumaco.posted.len();
    let outcome = failover.pass(&r, &after, ts("2026-01-01T02:25:14Z"));
    assert_eq!(outcome.writes.len(), 1);
    assert_eq!(
        failover.condition("n", UNDER_MAINTENANCE).unwrap().0,
        Status::False
    );
    assert_eq!(
        failover.posted, steady_kumaco.posted,
        "the same events, by name"
    );
    assert_eq!(missing_steady, failover.posted.len());
}

#[test]
fn owned_conditions_no_longer_decided_go_false() {
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("n", &[])]);
    let with = Rules {
        in_progress: in_progress(1, &[]),
        ..rules("")
    };
    c.pass(&with, &windows, ts("2026-01-01T02:05:00Z"));
    assert_eq!(
        c.condition("n", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    // --in-progress removed: kured must not go on seeing a True it will never see end.
    let without = rules("");
    c.pass(&without, &windows, ts("2026-01-01T02:06:00Z"));
    assert_eq!(
        c.condition("n", MAINTENANCE_IN_PROGRESS),
        Some((Status::False, REASON_NOT_MANAGED.into()))
    );
    assert_eq!(c.condition("n", UNDER_MAINTENANCE).unwrap().0, Status::True);
    steady(&mut c, &without, &windows, ts("2026-01-01T02:07:00Z"));
}

#[test]
fn planned_runs_from_the_lead_time_to_the_start_of_maintenance() {
    let r = Rules {
        planned_lead_time: Some(SignedDuration::from_mins(30)),
        in_progress: in_progress(1, &[REBOOT]),
        ..rules("")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[]), ("b", &[]), ("idle", &[])]);
    c.set("a", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    c.set("b", REBOOT, true, ts("2026-01-01T00:00:01Z"));
    let planned = |c: &Cluster, n: &str| c.condition(n, MAINTENANCE_PLANNED).map(|x| x.0);
    c.pass(&r, &windows, ts("2026-01-01T01:29:59Z"));
    assert_eq!(planned(&c, "a"), None);
    let o = c.pass(&r, &windows, ts("2026-01-01T01:30:00Z"));
    assert_eq!(o.counts.planned, 2);
    assert_eq!(planned(&c, "a"), Some(Status::True));
    assert_eq!(
        planned(&c, "idle"),
        None,
        "no reboot required: nothing to plan"
    );
    c.pass(&r, &windows, ts("2026-01-01T02:00:00Z"));
    assert_eq!(
        c.condition("a", MAINTENANCE_PLANNED),
        Some((Status::False, decision::REASON_PLANNED_STARTED.into()))
    );
    assert_eq!(planned(&c, "b"), Some(Status::True), "waiting for the slot");
    c.set("a", REBOOT, false, ts("2026-01-01T02:10:00Z"));
    c.pass(&r, &windows, ts("2026-01-01T02:10:00Z"));
    c.pass(&r, &windows, ts("2026-01-01T02:10:01Z"));
    assert_eq!(planned(&c, "b"), Some(Status::False));
    c.pass(&r, &windows, ts("2026-01-01T03:00:00Z"));
    assert_eq!(planned(&c, "idle"), None);
}

#[test]
fn pending_writes_cover_a_lagging_cache_until_it_catches_up() {
    let conditions = vec![Condition {
        type_: UNDER_MAINTENANCE.into(),
        status: Status::True,
        reason: "MaintenanceWindow".into(),
        message: "m".into(),
        last_transition_time: None,
    }];
    let labels = BTreeMap::new();
    let view = |rv| NodeView {
        name: "n",
        labels: &labels,
        resource_version: Some(rv),
        conditions: &[],
        owned: &[],
    };
    let p = Pending {
        conditions: conditions.clone(),
        resource_version: Some(10),
        written_at: ts("2026-01-01T00:00:00Z"),
    };
    let now = ts("2026-01-01T01:00:00Z");
    let (c, settled) = overlay(Some(&p), &view(9), now);
    assert_eq!((c.as_ref(), settled), (conditions.as_slice(), false));
    let (c, settled) = overlay(Some(&p), &view(10), now);
    assert!(
        c.is_empty() && settled,
        "the cache has seen it: its answer wins"
    );
    let unversioned = Pending {
        resource_version: None,
        ..p
    };
    assert!(!overlay(Some(&unversioned), &view(9), ts("2026-01-01T00:00:05Z")).1);
    assert!(overlay(Some(&unversioned), &view(9), now).1);
}

fn state(type_: &'static str, status: Status, reason: &'static str) -> ConditionState {
    ConditionState {
        type_,
        status,
        reason,
    }
}

#[test]
fn each_window_is_summarized_active_or_not_valid_or_not() {
    let r = rules("pool=a");
    let mut broken = source("broken", "0 2 * * *", "1h", "", false);
    broken.window = Err(crate::window::InvalidWindow(vec![]));
    let windows = [
        source("pool-a", "0 2 * * *", "1h", "pool=a", false),
        source("pool-b", "0 2 * * *", "1h", "pool=b", false),
        source("later", "0 4 * * *", "1h", "", false),
        source("freeze", "0 2 * * *", "1h", "", true),
        broken,
    ];
    let mut c = Cluster::new(&[
        ("a1", &[("pool", "a")]),
        ("a2", &[("pool", "a")]),
        ("b1", &[("pool", "b")]),
    ]);
    let o = c.pass(&r, &windows, ts("2026-01-01T02:30:00Z"));
    let summary = |name: &str| {
        let w = o.windows.iter().find(|w| w.id.name == name).unwrap();
        (w.valid, w.blackout, w.active, w.selected, w.next_start)
    };
    let tomorrow_2 = Some(ts("2026-01-02T02:00:00Z"));
    assert_eq!(summary("pool-a"), (true, false, true, 2, tomorrow_2));
    assert_eq!(
        summary("pool-b"),
        (true, false, true, 0, tomorrow_2),
        "b1 is out of this instance's scope: active, selecting no node"
    );
    assert_eq!(
        summary("later"),
        (true, false, false, 0, Some(ts("2026-01-01T04:00:00Z")))
    );
    assert_eq!(summary("freeze"), (true, true, true, 2, tomorrow_2));
    assert_eq!(summary("broken"), (false, false, false, 0, None));
    assert_eq!(o.windows.len(), 5);
}

#[test]
fn nodes_are_counted_by_the_conditions_they_will_show_and_the_oldest_waits_are_reported() {
    let r = Rules {
        in_progress: in_progress(1, &[REBOOT]),
        ..rules("")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[]), ("b", &[]), ("c", &[]), ("idle", &[])]);
    c.set("a", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    c.set("b", REBOOT, true, ts("2026-01-01T00:00:01Z"));
    // c needs its reboot only after the window opened: it waits from then.
    c.set("c", REBOOT, true, ts("2026-01-01T02:10:00Z"));
    let o = c.pass(&r, &windows, ts("2026-01-01T02:05:00Z"));
    assert_eq!(o.counts.slots, Some(1));
    assert_eq!(
        o.counts.oldest_in_progress,
        Some(ts("2026-01-01T02:05:00Z")),
        "counted as the write will leave it"
    );
    let o = c.pass(&r, &windows, ts("2026-01-01T02:30:00Z"));
    assert_eq!(
        o.counts.oldest_in_progress,
        Some(ts("2026-01-01T02:05:00Z"))
    );
    assert_eq!(
        o.counts.oldest_waiting,
        Some(ts("2026-01-01T02:05:00Z")),
        "b waits since the window opened (its reboot was required before)"
    );
    let expected: BTreeMap<ConditionState, usize> = [
        (
            state(UNDER_MAINTENANCE, Status::True, decision::REASON_WINDOW),
            4,
        ),
        (
            state(
                MAINTENANCE_IN_PROGRESS,
                Status::True,
                decision::REASON_WINDOW,
            ),
            1,
        ),
        (
            state(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                in_progress::REASON_WAITING,
            ),
            2,
        ),
        (
            state(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                in_progress::REASON_REQUIREMENT,
            ),
            1,
        ),
    ]
    .into();
    assert_eq!(o.counts.conditions, expected);

    // a finishes; b takes the slot; c, alone waiting, waits since its reboot was required.
    c.set("a", REBOOT, false, ts("2026-01-01T02:40:00Z"));
    c.pass(&r, &windows, ts("2026-01-01T02:40:00Z"));
    let o = c.pass(&r, &windows, ts("2026-01-01T02:40:01Z"));
    assert_eq!(
        o.counts.oldest_in_progress,
        Some(ts("2026-01-01T02:40:01Z"))
    );
    assert_eq!(o.counts.oldest_waiting, Some(ts("2026-01-01T02:10:00Z")));

    // After the window: nobody waits, nothing in progress.
    c.set("b", REBOOT, false, ts("2026-01-01T03:30:00Z"));
    let o = c.pass(&r, &windows, ts("2026-01-01T04:00:00Z"));
    assert_eq!(o.counts.oldest_in_progress, None);
    assert_eq!(o.counts.oldest_waiting, None);
}

#[test]
fn a_reason_kumaco_does_not_write_is_counted_as_other() {
    let r = rules("");
    let mut c = Cluster::new(&[("n", &[])]);
    // A condition of ours that someone else edited to a reason of their own.
    c.set("n", UNDER_MAINTENANCE, false, ts("2026-01-01T00:00:00Z"));
    c.node("n").owned = vec![UNDER_MAINTENANCE.into()];
    let o = c.pass(&r, &[], ts("2026-01-01T01:00:00Z"));
    assert!(o.writes.is_empty(), "a False condition is left as it is");
    assert_eq!(
        o.counts.conditions,
        [(state(UNDER_MAINTENANCE, Status::False, OTHER_REASON), 1)].into()
    );
    assert_eq!(o.counts.slots, None, "without --in-progress");
}
