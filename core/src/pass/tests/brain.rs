//! The brain sees the whole node: availability, labels, pods, groups, pacing.

use super::*;
use crate::in_progress::GroupCeiling;
use crate::selector;

const ZONE: &str = "topology.kubernetes.io/zone";

fn brain(max: u32, tweak: impl FnOnce(&mut Policy)) -> Rules {
    let mut policy = in_progress(max, &[REBOOT]).unwrap();
    tweak(&mut policy);
    Rules {
        in_progress: Some(policy),
        ..rules("")
    }
}

fn mip(c: &Cluster, node: &str) -> (Status, String) {
    c.condition(node, MAINTENANCE_IN_PROGRESS).unwrap()
}

fn message(c: &Cluster, node: &str) -> String {
    let n = c.nodes.iter().find(|n| n.name == node).unwrap();
    find(&n.conditions, MAINTENANCE_IN_PROGRESS)
        .unwrap()
        .message
        .clone()
}

fn needing_reboot(names: &[(&str, &[(&str, &str)])]) -> Cluster {
    let mut c = Cluster::new(names);
    for (i, (n, _)) in names.iter().enumerate() {
        c.set(
            n,
            REBOOT,
            true,
            ts("2026-01-01T00:00:00Z") + SignedDuration::from_secs(i as i64),
        );
    }
    c
}

fn started(c: &Cluster) -> Vec<String> {
    c.nodes
        .iter()
        .filter(|n| is_true(&n.conditions, MAINTENANCE_IN_PROGRESS))
        .map(|n| n.name.clone())
        .collect()
}

use crate::conditions::is_true;

const T: &str = "2026-01-01T02:05:00Z";

fn window() -> [WindowSource; 1] {
    [source("w", "0 2 * * *", "3h", "", false)]
}

#[test]
fn unavailable_nodes_take_slots_and_do_not_start() {
    let windows = window();
    let mut c = needing_reboot(&[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[])]);
    c.node("b").availability.ready = Some(Status::False);
    c.node("d").availability.unschedulable = true;
    let r = brain(3, |_| {});
    let o = c.pass(&r, &windows, ts(T));
    // b and d hold two of the three slots: one start, the oldest available (a).
    assert_eq!(started(&c), ["a"]);
    assert_eq!(mip(&c, "b").1, reasons::NODE_UNAVAILABLE);
    assert_eq!(message(&c, "b"), "the node is NotReady");
    assert_eq!(message(&c, "d"), "the node is cordoned");
    assert_eq!(mip(&c, "c").1, reasons::WAITING_FOR_SLOT);
    assert_eq!(
        message(&c, "c"),
        "3/3 slots in use: 1 in progress, 2 unavailable (b NotReady, d cordoned)"
    );
    let usage = o.counts.usage.unwrap();
    assert_eq!(
        (usage.in_progress, usage.unavailable, usage.slots),
        (1, 2, 3)
    );
    assert_eq!(o.counts.unavailable, 2);
    steady(&mut c, &r, &windows, ts(T));

    // --count-unavailable=false: the plain count; unavailable nodes still do not start.
    let mut c = needing_reboot(&[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[])]);
    c.node("b").availability.ready = Some(Status::Unknown);
    let r = brain(2, |p| p.count_unavailable = false);
    c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["a", "c"]);
    assert_eq!(message(&c, "b"), "the node is Ready Unknown");
    steady(&mut c, &r, &windows, ts(T));
}

#[test]
fn a_completed_node_holds_its_slot_until_it_is_ready_and_uncordoned() {
    let windows = window();
    let mut c = needing_reboot(&[("a", &[]), ("b", &[])]);
    let r = brain(1, |_| {});
    c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["a"]);
    // kured drains (cordons) a, reboots it (NotReady), its reboot is no longer needed.
    let t1 = ts(T) + SignedDuration::from_mins(5);
    c.node("a").availability = Availability {
        ready: Some(Status::False),
        unschedulable: true,
        disrupted_by: None,
    };
    c.set("a", REBOOT, false, t1);
    c.pass(&r, &windows, t1);
    c.pass(&r, &windows, t1);
    assert_eq!(
        mip(&c, "a").1,
        reasons::MAINTENANCE_COMPLETED,
        "kept while it recovers"
    );
    assert_eq!(
        started(&c),
        Vec::<String>::new(),
        "b waits: a still holds the slot"
    );
    // b's reason has not changed since it started waiting: its message stays as
    // written then; the count says what holds the slot now.
    assert_eq!(mip(&c, "b").1, reasons::WAITING_FOR_SLOT);
    let o = c.pass(&r, &windows, t1);
    let usage = o.counts.usage.unwrap();
    assert_eq!((usage.in_progress, usage.unavailable), (0, 1));
    assert_eq!(o.counts.oldest_unrecovered, Some(t1));
    // Back up but still cordoned: still holds it. A fresh kumaco decides the same.
    c.node("a").availability.ready = Some(Status::True);
    let mut fresh = c.clone();
    c.pass(&r, &windows, t1);
    fresh.pass(&r, &windows, t1);
    assert_eq!(started(&c), started(&fresh));
    assert!(started(&c).is_empty());
    steady(&mut c, &r, &windows, t1);
    // Uncordoned: the slot is free, b starts.
    c.node("a").availability.unschedulable = false;
    c.pass(&r, &windows, t1);
    assert_eq!(started(&c), ["b"]);
    assert_eq!(mip(&c, "a").1, reasons::MAINTENANCE_COMPLETED);
    steady(&mut c, &r, &windows, t1);
}

#[test]
fn blocking_labels_and_pods_keep_a_node_from_starting_and_never_end_one() {
    let windows = window();
    let mut c = needing_reboot(&[
        ("a", &[("kured.dev/leave-alone", "")]),
        ("b", &[]),
        ("c", &[]),
    ]);
    c.node("b").pods = vec![
        BlockingPod {
            name: "db/postgres-0".into(),
            selector: 0,
        },
        BlockingPod {
            name: "db/postgres-1".into(),
            selector: 0,
        },
    ];
    let r = brain(3, |p| {
        p.block_node_selectors = vec![selector::parse("kured.dev/leave-alone").unwrap()];
        p.block_pod_selectors = vec![selector::parse("app=postgres").unwrap()];
    });
    c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["c"]);
    assert_eq!(mip(&c, "a").1, reasons::BLOCKED);
    assert_eq!(
        message(&c, "a"),
        r#"blocked by --block-node-selector "kured.dev/leave-alone""#
    );
    assert_eq!(
        message(&c, "b"),
        r#"blocked by pod db/postgres-0 (and 1 more) matching --block-pod-selector "app=postgres""#
    );
    steady(&mut c, &r, &windows, ts(T));
    // A blocking pod scheduled on c after it started ends nothing.
    c.node("c").pods = vec![BlockingPod {
        name: "db/postgres-2".into(),
        selector: 0,
    }];
    c.node("c")
        .labels
        .insert("kured.dev/leave-alone".into(), String::new());
    steady(&mut c, &r, &windows, ts(T));
    assert_eq!(mip(&c, "c").0, Status::True);
    // The pods gone: b starts.
    c.node("b").pods.clear();
    c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["b", "c"]);
}

#[test]
fn each_zone_has_its_own_ceiling_and_nodes_without_the_label_form_a_group() {
    let windows = window();
    let mut c = needing_reboot(&[
        ("a1", &[(ZONE, "a")]),
        ("a2", &[(ZONE, "a")]),
        ("b1", &[(ZONE, "b")]),
        ("b2", &[(ZONE, "b")]),
        ("x1", &[]),
        ("x2", &[]),
    ]);
    let r = brain(10, |p| {
        p.group_ceilings = vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Percent(50),
        }];
    });
    let o = c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["a1", "b1", "x1"]);
    assert_eq!(mip(&c, "a2").1, reasons::WAITING_FOR_SLOT);
    assert_eq!(
        message(&c, "a2"),
        "topology.kubernetes.io/zone=a: 1/1 slots in use"
    );
    assert_eq!(
        message(&c, "x2"),
        "no topology.kubernetes.io/zone: 1/1 slots in use"
    );
    assert_eq!(o.counts.groups.len(), 3);
    steady(&mut c, &r, &windows, ts(T));
    // A node down in zone b takes b's slot once b1 completes: b2 waits for it.
    let t1 = ts(T) + SignedDuration::from_mins(5);
    c.node("b2").availability.ready = Some(Status::False);
    c.set("b1", REBOOT, false, t1);
    c.pass(&r, &windows, t1);
    c.pass(&r, &windows, t1);
    assert_eq!(started(&c), ["a1", "x1"]);
    assert_eq!(mip(&c, "b2").1, reasons::NODE_UNAVAILABLE);
    steady(&mut c, &r, &windows, t1);
    // The overall ceiling still applies on top of the groups.
    let mut c = needing_reboot(&[("a1", &[(ZONE, "a")]), ("b1", &[(ZONE, "b")])]);
    let r = brain(1, |p| {
        p.group_ceilings = vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Count(1),
        }];
    });
    c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["a1"]);
    assert_eq!(message(&c, "b1"), "1/1 slots in use");
}

#[test]
fn starts_are_paced_from_the_last_start_or_end_across_restarts() {
    let windows = window();
    let mut c = needing_reboot(&[("a", &[]), ("b", &[]), ("c", &[])]);
    let r = brain(3, |p| {
        p.start_interval = Some(SignedDuration::from_mins(10))
    });
    let t0 = ts(T);
    let o = c.pass(&r, &windows, t0);
    // One start per pass: the interval begins with it.
    assert_eq!(started(&c), ["a"]);
    assert_eq!(mip(&c, "b").1, reasons::START_INTERVAL);
    assert!(
        message(&c, "b").starts_with("next start possible at 2026-01-01T02:15:00Z"),
        "{}",
        message(&c, "b")
    );
    assert_eq!(o.next_edge, Some(t0 + SignedDuration::from_mins(10)));
    // A kumaco started 5 minutes later reads the start from a's condition.
    let mut restarted = c.clone();
    let o = restarted.pass(&r, &windows, t0 + SignedDuration::from_mins(5));
    assert!(o.writes.is_empty(), "{:?}", o.writes);
    assert_eq!(o.next_edge, Some(t0 + SignedDuration::from_mins(10)));
    // At 02:15, b starts; c's turn is 10 minutes later.
    let t1 = t0 + SignedDuration::from_mins(10);
    c.pass(&r, &windows, t1);
    assert_eq!(started(&c), ["a", "b"]);
    steady(&mut c, &r, &windows, t1);
    // An end restarts the interval too (the rebooted node's workloads settle).
    let t2 = t1 + SignedDuration::from_mins(15);
    c.set("a", REBOOT, false, t2 - SignedDuration::from_mins(6));
    c.pass(&r, &windows, t2 - SignedDuration::from_mins(6));
    c.pass(&r, &windows, t2);
    assert_eq!(started(&c), ["b"], "c waits 10 minutes after a's end");
    c.pass(&r, &windows, t2 + SignedDuration::from_mins(4));
    assert_eq!(started(&c), ["b", "c"]);
}

#[test]
fn a_full_slot_is_said_before_pacing_and_the_node_before_both() {
    let windows = window();
    let mut c = needing_reboot(&[("a", &[]), ("b", &[]), ("c", &[])]);
    let r = brain(1, |p| {
        p.start_interval = Some(SignedDuration::from_mins(10))
    });
    c.pass(&r, &windows, ts(T));
    c.node("c").availability.ready = Some(Status::False);
    c.pass(&r, &windows, ts(T));
    assert_eq!(mip(&c, "b").1, reasons::WAITING_FOR_SLOT);
    assert_eq!(mip(&c, "c").1, reasons::NODE_UNAVAILABLE);
}

#[test]
fn nothing_but_a_requirement_or_the_window_ends_maintenance_in_progress() {
    let windows = window();
    let mut c = needing_reboot(&[("a", &[(ZONE, "a")]), ("b", &[(ZONE, "a")])]);
    let r = brain(1, |p| {
        p.group_ceilings = vec![GroupCeiling {
            key: ZONE.into(),
            ceiling: Ceiling::Count(1),
        }];
        p.block_node_selectors = vec![selector::parse("frozen").unwrap()];
        p.start_interval = Some(SignedDuration::from_hours(1));
    });
    c.pass(&r, &windows, ts(T));
    assert_eq!(started(&c), ["a"]);
    // Every rule against a at once: NotReady, cordoned, labelled, a blocking pod, its
    // group and the ceiling over-full (b down too), inside the interval.
    c.node("a").availability = Availability {
        ready: Some(Status::Unknown),
        unschedulable: true,
        disrupted_by: None,
    };
    c.node("a").labels.insert("frozen".into(), String::new());
    c.node("a").pods = vec![BlockingPod {
        name: "x/y".into(),
        selector: 0,
    }];
    c.node("b").availability.ready = Some(Status::False);
    let o = c.pass(&r, &windows, ts(T) + SignedDuration::from_mins(1));
    assert!(o.writes.iter().all(|w| w.node != "a"), "{:?}", o.writes);
    assert_eq!(started(&c), ["a"]);
}
