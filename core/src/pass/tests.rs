use std::collections::BTreeSet;

use std::collections::BTreeMap;

use super::*;
use crate::budgets;
use crate::conditions::Status;
use crate::in_progress::{Availability, BlockingPod, Ceiling};
use crate::peers;
use crate::reasons;
use crate::selector;
use crate::testing::ts;
use crate::window::test_window;

mod brain;
mod instances;
mod notices;

const REBOOT: &str = "kured.dev/RebootRequired";

fn secs(t: &str, s: i64) -> Timestamp {
    ts(t) + SignedDuration::from_secs(s)
}

fn rules(selector: &str) -> Rules {
    Rules {
        node_selector: selector::parse(selector).unwrap(),
        instance: "kumaco/ops/kumaco".into(),
        in_progress: None,
        planned_lead_time: None,
        resync: SignedDuration::from_mins(5),
    }
}

fn in_progress(max: u32, required: &[&str]) -> Option<Policy> {
    Some(Policy {
        required: required.iter().map(|s| s.to_string()).collect(),
        ..Policy::with_ceiling(Ceiling::Count(max))
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
        created: None,
        window: Ok(w),
    }
}

/// What one field manager owns of a simulated node's status.
#[derive(Clone, Debug, Default)]
struct Owns {
    /// Condition entries it applied (`k:{"type":...}`).
    entries: BTreeSet<String>,
    /// Condition values it owns (`f:status` and the rest): lost to a forced apply of
    /// another value, shared when two apply the same.
    values: BTreeSet<String>,
    time: Option<Timestamp>,
}

/// A node in the simulated cluster: what the API server would store.
#[derive(Clone, Debug)]
struct Node {
    name: String,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    owners: BTreeMap<String, Owns>,
    rv: u64,
    availability: Availability,
    pods: Vec<BlockingPod>,
    boot_id: Option<String>,
    /// The gates' verdicts on this node alone.
    holds: Vec<Hold>,
    /// Every pod on it, as a drain meets them (listed by the pass's harness when the
    /// PodDisruptionBudget gate asks).
    workload: Vec<budgets::Pod>,
}

impl Node {
    /// The ownership a pass reads (managedFields, decoded as `node` does).
    fn owner_views(&self) -> Vec<Owner> {
        self.owners
            .iter()
            .map(|(m, o)| Owner {
                manager: m.clone(),
                types: o.values.iter().cloned().collect(),
                time: o.time,
            })
            .collect()
    }

    /// Server-side apply with `force` of `applied` by `manager`: it owns exactly the
    /// entries it applies; an entry it leaves out is removed if no one else has it; a
    /// value it overwrites is taken from the managers that owned it.
    fn apply(&mut self, manager: &str, applied: &[Condition], now: Timestamp) {
        let mut changed = false;
        for c in applied {
            let same = find(&self.conditions, &c.type_) == Some(c);
            for (m, o) in self.owners.iter_mut() {
                if m != manager && !same {
                    o.values.remove(&c.type_);
                }
            }
            changed |= !same;
            self.conditions.retain(|x| x.type_ != c.type_);
            self.conditions.push(c.clone());
        }
        let o = self.owners.entry(manager.to_string()).or_default();
        let entries: BTreeSet<String> = applied.iter().map(|c| c.type_.clone()).collect();
        let left: Vec<String> = o.entries.difference(&entries).cloned().collect();
        changed |= o.entries != entries || o.values != entries;
        o.entries = entries.clone();
        o.values = entries;
        if changed {
            o.time = Some(Timestamp::from_second(now.as_second()).unwrap());
        }
        for t in left {
            if !self.owners.values().any(|o| o.entries.contains(&t)) {
                self.conditions.retain(|c| c.type_ != t);
            }
        }
        self.owners.retain(|_, o| !o.entries.is_empty());
        self.rv += 1;
    }
}

/// A cluster of nodes, kumaco's writes applied to it as server-side apply would, by the
/// field manager of the instance writing.
#[derive(Clone, Debug)]
struct Cluster {
    nodes: Vec<Node>,
    posted: BTreeSet<String>,
    writes: usize,
    /// The other instances' Leases, as the shell would have read them.
    peers: Peers,
    /// The gates' verdicts on every start.
    holds: Vec<Hold>,
    /// The PodDisruptionBudgets, with that gate on.
    budgets: Option<budgets::Budgets>,
    /// How many pod lists the passes asked for, in all.
    pod_lists: usize,
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
                    owners: BTreeMap::new(),
                    rv: 1,
                    availability: Availability::default(),
                    pods: Vec::new(),
                    boot_id: None,
                    holds: Vec::new(),
                    workload: Vec::new(),
                })
                .collect(),
            posted: BTreeSet::new(),
            writes: 0,
            peers: Peers::default(),
            holds: Vec::new(),
            budgets: None,
            pod_lists: 0,
        }
    }

    fn node(&mut self, name: &str) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.name == name).unwrap()
    }

    fn condition(&self, node: &str, type_: &str) -> Option<(Status, String)> {
        let n = self.nodes.iter().find(|n| n.name == node).unwrap();
        find(&n.conditions, type_).map(|c| (c.status, c.reason.clone()))
    }

    /// The field managers owning `type_`'s value on `node`.
    fn owners_of(&self, node: &str, type_: &str) -> Vec<String> {
        let n = self.nodes.iter().find(|n| n.name == node).unwrap();
        n.owners
            .iter()
            .filter(|(_, o)| o.values.contains(type_))
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// Another writer (a reboot agent) sets a condition it owns.
    fn set(&mut self, node: &str, type_: &str, status: bool, at: Timestamp) {
        self.set_as("agent", node, type_, status, at);
    }

    /// `manager` sets a condition of its own, alone in its apply.
    fn set_as(&mut self, manager: &str, node: &str, type_: &str, status: bool, at: Timestamp) {
        let n = self.node(node);
        let mut applied: Vec<Condition> = n
            .owners
            .get(manager)
            .map(|o| {
                n.conditions
                    .iter()
                    .filter(|c| o.entries.contains(&c.type_) && c.type_ != type_)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        applied.push(Condition {
            type_: type_.into(),
            status: Status::from(status),
            reason: "Agent".into(),
            message: String::new(),
            last_transition_time: Some(at),
            last_heartbeat_time: None,
        });
        n.apply(manager, &applied, at);
    }

    /// A live kumaco instance's Lease, renewed and read at `at`.
    fn live(&mut self, manager: &str, at: Timestamp) {
        self.peers.leases.insert(
            peers::lease_of(manager).unwrap(),
            (
                peers::LeaseRead::Found {
                    held: true,
                    renewed: Some(at),
                    duration: SignedDuration::from_secs(15),
                },
                at,
            ),
        );
    }

    /// One pass of a kumaco that has no pending writes (the cache shows everything: a
    /// kumaco whose watch caught up, or one that just started), its writes applied and
    /// its events posted. Returns the outcome.
    fn pass(&mut self, rules: &Rules, windows: &[WindowSource], now: Timestamp) -> Outcome {
        let pending = HashMap::new();
        let owners: Vec<Vec<Owner>> = self.nodes.iter().map(Node::owner_views).collect();
        let sources: Vec<&WindowSource> = windows.iter().collect();
        let gates = Gates {
            pause: None,
            cluster: &self.holds,
            budgets: self.budgets.as_ref(),
        };
        // As the shell does: the pods of the nodes the gate asks for are listed, and the
        // pass runs again, until it asks for no other.
        let mut listed: BTreeSet<String> = BTreeSet::new();
        let outcome = loop {
            let views: Vec<NodeView> = self
                .nodes
                .iter()
                .zip(&owners)
                .map(|(n, owners)| {
                    let ours = owners.iter().find(|o| o.manager == rules.instance);
                    NodeView {
                        name: &n.name,
                        uid: &n.name,
                        labels: &n.labels,
                        resource_version: Some(n.rv),
                        conditions: &n.conditions,
                        owned: ours.map(|o| o.types.as_slice()).unwrap_or_default(),
                        owned_since: ours.and_then(|o| o.time),
                        owners,
                        availability: n.availability,
                        pods: &n.pods,
                        boot_id: n.boot_id.as_deref(),
                        holds: &n.holds,
                        drain: listed.contains(&n.name).then_some(n.workload.as_slice()),
                    }
                })
                .collect();
            let outcome = run(
                rules,
                &sources,
                &[],
                views,
                &pending,
                &self.peers,
                &gates,
                now,
            );
            let new: Vec<String> = outcome
                .needs_pods
                .iter()
                .filter(|n| !listed.contains(*n))
                .cloned()
                .collect();
            assert!(
                new.len() == outcome.needs_pods.len(),
                "a pass asked again for pods it was given: {:?}",
                outcome.needs_pods
            );
            if new.is_empty() {
                break outcome;
            }
            self.pod_lists += new.len();
            listed.extend(new);
        };
        for c in outcome.writes.iter().flat_map(|w| &w.conditions) {
            // Whatever kumaco writes, in every table test, is a reason it lists.
            assert!(
                reasons::is_kumacos(&c.reason) || c.reason == "Agent",
                "{c:?}: a reason missing from reasons::ALL"
            );
        }
        for w in &outcome.writes {
            self.node(&w.node)
                .apply(&rules.instance, &w.conditions, now);
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
            Some((Status::False, reasons::NODE_OUT_OF_SCOPE.into()))
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
                    Some((Status::False, reasons::MAINTENANCE_BLACKOUT.into()))
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
        Some((Status::False, reasons::CONDITION_NOT_MANAGED.into()))
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
        Some((Status::False, reasons::MAINTENANCE_STARTED.into()))
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
        last_heartbeat_time: None,
    }];
    let labels = BTreeMap::new();
    let view = |rv| NodeView {
        name: "n",
        uid: "uid-n",
        labels: &labels,
        resource_version: Some(rv),
        conditions: &[],
        owned: &[],
        owned_since: None,
        owners: &[],
        availability: Availability::default(),
        pods: &[],
        boot_id: None,
        holds: &[],
        drain: None,
    };
    let p = Pending {
        conditions: conditions.clone(),
        resource_version: Some(10),
        written_at: ts("2026-01-01T00:00:00Z"),
        dropped: vec![],
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
            state(UNDER_MAINTENANCE, Status::True, reasons::MAINTENANCE_WINDOW),
            4,
        ),
        (
            state(
                MAINTENANCE_IN_PROGRESS,
                Status::True,
                reasons::MAINTENANCE_WINDOW,
            ),
            1,
        ),
        (
            state(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::WAITING_FOR_SLOT,
            ),
            2,
        ),
        (
            state(
                MAINTENANCE_IN_PROGRESS,
                Status::False,
                reasons::REQUIREMENT_NOT_MET,
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
    c.set_as(
        "kumaco/ops/kumaco",
        "n",
        UNDER_MAINTENANCE,
        false,
        ts("2026-01-01T00:00:00Z"),
    );
    let o = c.pass(&r, &[], ts("2026-01-01T01:00:00Z"));
    assert!(o.writes.is_empty(), "a False condition is left as it is");
    assert_eq!(
        o.counts.conditions,
        [(state(UNDER_MAINTENANCE, Status::False, OTHER_REASON), 1)].into()
    );
    assert_eq!(o.counts.slots, None, "without --in-progress");
}

#[test]
fn a_write_changes_what_differs_and_is_known_by_its_content() {
    let r = rules("");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("n", &[])]);
    let o = c.clone().pass(&r, &windows, ts("2026-01-01T02:05:00Z"));
    let w = &o.writes[0];
    assert_eq!(w.changes(&[]).len(), 1);
    c.pass(&r, &windows, ts("2026-01-01T02:05:00Z"));
    let now_shown = &c.nodes[0].conditions;
    assert!(w.changes(now_shown).is_empty(), "the node shows it");
    let mut other = w.clone();
    assert_eq!(other.fingerprint(), w.fingerprint());
    other.conditions[0].message.push('!');
    assert_ne!(other.fingerprint(), w.fingerprint());
    assert_eq!(other.changes(now_shown).len(), 1);
}

#[test]
fn a_start_derived_again_a_moment_later_is_the_same_write() {
    // What a write refused for good is known by: the start's instant, measured anew at
    // each pass, does not make it another write.
    let r = Rules {
        in_progress: in_progress(1, &[]),
        ..rules("")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let c = Cluster::new(&[("n", &[])]);
    let at = |ms: i64| ts("2026-01-01T02:05:00Z") + SignedDuration::from_millis(ms);
    let first = c.clone().pass(&r, &windows, at(100)).writes;
    let again = c.clone().pass(&r, &windows, at(1_900)).writes;
    assert!(first[0].starts_maintenance(), "{first:?}");
    let message = |w: &Write| {
        let c = w
            .conditions
            .iter()
            .find(|c| c.type_ == MAINTENANCE_IN_PROGRESS);
        c.unwrap().message.clone()
    };
    assert_ne!(message(&first[0]), message(&again[0]));
    assert_eq!(first[0].fingerprint(), again[0].fingerprint());
    // Another window is another start.
    let other = [source("v", "0 2 * * *", "1h", "", false)];
    let elsewhere = c.clone().pass(&r, &other, at(100)).writes;
    assert_ne!(first[0].fingerprint(), elsewhere[0].fingerprint());
}

#[test]
fn node_events_read_the_cluster_or_a_shadow_its_own_writes() {
    let r = rules("");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let now = ts("2026-01-01T02:05:00Z");
    let mut c = Cluster::new(&[("n", &[])]);
    // A shadow's would-be write, never applied: only a shadow's view shows it.
    let o = c.clone().pass(&r, &windows, now);
    let pending = HashMap::from([(
        "n".to_string(),
        Pending {
            conditions: o.writes[0].conditions.clone(),
            resource_version: Some(u64::MAX),
            written_at: now,
            dropped: vec![],
        },
    )]);
    let labels = BTreeMap::new();
    fn view<'a>(c: &'a Cluster, labels: &'a BTreeMap<String, String>) -> NodeView<'a> {
        let n = &c.nodes[0];
        NodeView {
            name: &n.name,
            uid: "uid-n",
            labels,
            resource_version: Some(n.rv),
            conditions: &n.conditions,
            owned: &[],
            owned_since: None,
            owners: &[],
            availability: Availability::default(),
            pods: &[],
            boot_id: None,
            holds: &[],
            drain: None,
        }
    }
    let contest = [Contest {
        node: "n".into(),
        with: vec!["kumaco/b/b".into()],
    }];
    let live = crate::node_events::due_now([view(&c, &labels)], None, &contest, &r.instance, now);
    let reasons: Vec<&str> = live.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        ["NodeContested"],
        "nothing written yet: only the contest"
    );
    let shadow =
        crate::node_events::due_now([view(&c, &labels)], Some(&pending), &[], &r.instance, now);
    let reasons: Vec<&str> = shadow.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        ["MaintenanceWindowStarted"],
        "what the shadow would have written"
    );
    // Once written, a live instance reads it from the cluster, under the same name.
    c.pass(&r, &windows, now);
    let owned = c.nodes[0].owner_views()[0].types.clone();
    let mut v = view(&c, &labels);
    v.owned = &owned;
    let written = crate::node_events::due_now([v], None, &[], &r.instance, now);
    assert_eq!(written[0].name, shadow[0].name);
}

/// What a write records for the first time, for the shell's histograms: the duration at
/// the end of a completed maintenance (not one its window stopped), the recovery when it
/// is added; nothing when the same records are written again.
#[test]
fn a_write_reports_the_durations_it_records_once() {
    let c = |status: Status, reason: &str, message: &str| Condition {
        type_: MAINTENANCE_IN_PROGRESS.into(),
        status,
        reason: reason.into(),
        message: message.into(),
        last_transition_time: None,
        last_heartbeat_time: None,
    };
    let running = c(Status::True, reasons::MAINTENANCE_STARTED, "in ops/w");
    let done = c(
        Status::False,
        reasons::MAINTENANCE_COMPLETED,
        "kured.dev/RebootRequired is no longer True; completed after 6m12s",
    );
    let back = c(
        Status::False,
        reasons::MAINTENANCE_COMPLETED,
        "kured.dev/RebootRequired is no longer True; completed after 6m12s, recovered after 1m3s",
    );
    let stopped = c(
        Status::False,
        reasons::MAINTENANCE_WINDOW_ENDED,
        "ops/w ended; stopped after 2h0m0s",
    );
    let d = |s: i64| Some(SignedDuration::from_secs(s));
    assert_eq!(
        Recorded::of(Some(&running), &done),
        Recorded {
            maintenance: d(372),
            recovery: None
        }
    );
    assert_eq!(
        Recorded::of(Some(&done), &back),
        Recorded {
            maintenance: None,
            recovery: d(63)
        }
    );
    assert_eq!(Recorded::of(Some(&back), &back), Recorded::default());
    assert_eq!(Recorded::of(Some(&running), &stopped), Recorded::default());
    // Ended and back in one write (the node was never unavailable).
    assert_eq!(
        Recorded::of(Some(&running), &back),
        Recorded {
            maintenance: d(372),
            recovery: d(63)
        }
    );
    assert_eq!(Recorded::of(None, &running), Recorded::default());
}

/// Ends first, the rest in the pass's order, at most `max`; whether any were left.
#[test]
fn ends_of_maintenance_are_written_first_and_a_burst_is_bounded() {
    let w = |node: &str, ends: bool| Write {
        node: node.into(),
        based_on: None,
        conditions: Vec::new(),
        transitions: if ends {
            vec![(MAINTENANCE_IN_PROGRESS.to_string(), Status::False)]
        } else {
            vec![(UNDER_MAINTENANCE.to_string(), Status::False)]
        },
        dropped: Vec::new(),
        claimed: Vec::new(),
        recorded: Recorded::default(),
    };
    let writes = vec![
        w("a", false),
        w("b", false),
        w("c", true),
        w("d", false),
        w("e", true),
    ];
    let names = |ws: &[Write]| ws.iter().map(|w| w.node.clone()).collect::<Vec<_>>();
    let (first, more) = first_writes(writes.clone(), 3);
    assert_eq!(names(&first), ["c", "e", "a"]);
    assert!(more);
    let (all, more) = first_writes(writes, 5);
    assert_eq!(names(&all), ["c", "e", "a", "b", "d"]);
    assert!(!more);
}

fn web_pod(name: &str) -> budgets::Pod {
    budgets::Pod {
        namespace: "shop".into(),
        name: name.into(),
        labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
        phase: budgets::Phase::Running,
        terminating: false,
        ready: true,
        daemon_set: false,
        mirror: false,
    }
}

fn frontend_budget(allowed: i32) -> budgets::Budgets {
    budgets::Budgets::new([budgets::Budget {
        namespace: "shop".into(),
        name: "frontend".into(),
        selector: Some(selector::parse("app=web").unwrap()),
        disruptions_allowed: allowed,
        behind: None,
        current_healthy: 2,
        desired_healthy: 1,
        always_allow_unhealthy: false,
    }])
}

#[test]
fn the_budgets_gate_starts_nodes_sharing_a_budget_one_after_the_other() {
    let r = Rules {
        in_progress: in_progress(2, &[REBOOT]),
        ..rules("")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[]), ("b", &[]), ("c", &[])]);
    for (i, n) in ["a", "b", "c"].into_iter().enumerate() {
        c.set(n, REBOOT, true, secs("2026-01-01T00:00:00Z", i as i64));
    }
    c.node("a").workload = vec![web_pod("web-a")];
    c.node("b").workload = vec![web_pod("web-b")];
    c.budgets = Some(frontend_budget(1));
    let t = |s| secs("2026-01-01T02:00:00Z", s);
    // The window opens: a starts, b waits for the budget a uses, c (no budget) takes the
    // second slot.
    c.pass(&r, &windows, t(0));
    assert_eq!(
        c.condition("a", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    assert_eq!(
        c.condition("b", MAINTENANCE_IN_PROGRESS),
        Some((Status::False, reasons::POD_DISRUPTION_BUDGET.into()))
    );
    assert_eq!(
        c.condition("c", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    assert!(c.pod_lists <= 3, "{} pod lists", c.pod_lists);
    steady(&mut c, &r, &windows, t(1));
    // a's drain evicts web-a, a completes and comes back: b starts.
    c.node("a").workload.clear();
    c.set("a", REBOOT, false, t(60));
    c.set("c", REBOOT, false, t(60));
    c.pass(&r, &windows, t(60));
    c.pass(&r, &windows, t(61));
    assert_eq!(
        c.condition("b", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    steady(&mut c, &r, &windows, t(62));
}

#[test]
fn a_pass_with_every_slot_taken_lists_no_pod() {
    let r = Rules {
        in_progress: in_progress(1, &[REBOOT]),
        ..rules("")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[]), ("b", &[])]);
    c.set("a", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    c.set("b", REBOOT, true, ts("2026-01-01T00:00:01Z"));
    c.budgets = Some(frontend_budget(5));
    let t = |s| secs("2026-01-01T02:00:00Z", s);
    c.pass(&r, &windows, t(0));
    assert_eq!(
        c.condition("a", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    let lists = c.pod_lists;
    for s in 1..20 {
        c.pass(&r, &windows, t(s));
    }
    assert_eq!(
        c.pod_lists, lists,
        "a node waiting for a slot is not listed"
    );
}

#[test]
fn an_alert_holds_new_starts_and_never_a_maintenance_in_progress() {
    let r = Rules {
        in_progress: in_progress(2, &[REBOOT]),
        ..rules("")
    };
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[]), ("b", &[])]);
    c.set("a", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    let t = |s| secs("2026-01-01T02:00:00Z", s);
    c.pass(&r, &windows, t(0));
    assert_eq!(
        c.condition("a", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    c.holds = vec![Hold {
        reason: reasons::ALERT_FIRING,
        message: "alert NodeDown firing".into(),
    }];
    c.set("b", REBOOT, true, t(10));
    c.pass(&r, &windows, t(10));
    assert_eq!(
        c.condition("a", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
    assert_eq!(
        c.condition("b", MAINTENANCE_IN_PROGRESS),
        Some((Status::False, reasons::ALERT_FIRING.into()))
    );
    steady(&mut c, &r, &windows, t(11));
    c.holds.clear();
    c.pass(&r, &windows, t(20));
    assert_eq!(
        c.condition("b", MAINTENANCE_IN_PROGRESS).unwrap().0,
        Status::True
    );
}
