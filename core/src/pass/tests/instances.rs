//! Two instances, one window over every pool. Instance a manages pools x and y, b pool
//! z; pool y moves from a to b.

use super::*;

const A: &str = "kumaco/ops-a/kumaco";
const B: &str = "kumaco/ops-b/kumaco";

fn instance(manager: &str, scope: &str) -> Rules {
    Rules {
        instance: manager.into(),
        ..rules(scope)
    }
}

fn cluster(now: Timestamp) -> Cluster {
    let mut c = Cluster::new(&[
        ("x1", &[("pool", "x")]),
        ("y1", &[("pool", "y")]),
        ("y2", &[("pool", "y")]),
        ("z1", &[("pool", "z")]),
    ]);
    c.live(A, now);
    c.live(B, now);
    c
}

/// Writes per (instance, node).
type Writes = BTreeMap<(String, String), usize>;

/// Runs `passes` (instance rules) every second for `seconds`, returning the writes
/// of each instance per node and every state `watched` showed on y1.
fn run_for(
    c: &mut Cluster,
    passes: &[&Rules],
    windows: &[WindowSource],
    from: Timestamp,
    seconds: i64,
) -> (Writes, Vec<Option<(Status, String)>>) {
    let mut writes = Writes::new();
    let mut states = vec![c.condition("y1", UNDER_MAINTENANCE)];
    for s in 0..seconds {
        let now = from + SignedDuration::from_secs(s);
        // The Leases are renewed as the instances run.
        c.live(A, now);
        c.live(B, now);
        for r in passes {
            for w in c.pass(r, windows, now).writes {
                *writes.entry((r.instance.clone(), w.node)).or_default() += 1;
            }
            let state = c.condition("y1", UNDER_MAINTENANCE);
            if states.last() != Some(&state) {
                states.push(state);
            }
        }
    }
    (writes, states)
}

fn y_writes(writes: &Writes) -> Vec<usize> {
    ["y1", "y2"]
        .iter()
        .map(|n| {
            writes
                .iter()
                .filter(|((_, node), _)| node == n)
                .map(|(_, k)| k)
                .sum()
        })
        .collect()
}

#[test]
fn widening_first_hands_the_pool_over_in_two_writes_without_a_flap() {
    let t0 = ts("2026-01-01T02:05:00Z");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = cluster(t0);
    let a = instance(A, "pool in (x, y)");
    let b = instance(B, "pool=z");
    c.pass(&a, &windows, t0);
    c.pass(&b, &windows, t0);
    assert_eq!(c.owners_of("y1", UNDER_MAINTENANCE), [A]);
    let before = c.writes;

    // b widened: it agrees with what a wrote, and co-owns it.
    let b = instance(B, "pool in (y, z)");
    let t1 = t0 + SignedDuration::from_secs(60);
    c.live(A, t1);
    c.live(B, t1);
    let o = c.pass(&b, &windows, t1);
    assert_eq!(o.writes.len(), 2, "one claim per node of y: {:?}", o.writes);
    assert!(o.writes.iter().all(|w| w.claimed == [UNDER_MAINTENANCE]));
    assert_eq!(c.owners_of("y1", UNDER_MAINTENANCE), [A, B]);
    // Both see the contest while both manage y.
    let contested = |o: &Outcome| {
        o.contested
            .iter()
            .map(|c| c.node.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(contested(&c.pass(&a, &windows, t1)), ["y1", "y2"]);
    assert_eq!(contested(&c.pass(&b, &windows, t1))[0], "y1");
    assert_eq!(c.pass(&b, &windows, t1).contested[0].with, [A]);

    // a narrowed: it drops its ownership; b's value stays.
    let a = instance(A, "pool=x");
    let (writes, states) = run_for(&mut c, &[&a, &b], &windows, t1, 30);
    assert_eq!(y_writes(&writes), [1, 1], "{writes:?}");
    assert_eq!(c.writes - before, 4, "two writes per node of y in all");
    assert_eq!(c.owners_of("y1", UNDER_MAINTENANCE), [B]);
    assert_eq!(
        states,
        [Some((Status::True, reasons::MAINTENANCE_WINDOW.into()))],
        "y1 never left UnderMaintenance=True"
    );
    assert!(c.pass(&a, &windows, t1).contested.is_empty());
    assert!(c.pass(&b, &windows, t1).contested.is_empty());
    // When the window ends, y's new instance ends it.
    let end = ts("2026-01-01T03:00:00Z");
    c.pass(&a, &windows, end);
    c.pass(&b, &windows, end);
    assert_eq!(
        c.condition("y1", UNDER_MAINTENANCE).unwrap().0,
        Status::False
    );
    steady(&mut c, &a, &windows, end);
    steady(&mut c, &b, &windows, end);
}

#[test]
fn narrowing_first_hands_the_pool_over_in_two_writes() {
    let t0 = ts("2026-01-01T02:05:00Z");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = cluster(t0);
    c.pass(&instance(A, "pool in (x, y)"), &windows, t0);
    let before = c.writes;
    // a narrowed: y is no instance's for a moment, and a sets it False as its sole
    // owner; b widened: it sets it True, taking the value from a.
    let a = instance(A, "pool=x");
    let t1 = t0 + SignedDuration::from_secs(60);
    c.pass(&a, &windows, t1);
    assert_eq!(
        c.condition("y1", UNDER_MAINTENANCE),
        Some((Status::False, reasons::NODE_OUT_OF_SCOPE.into()))
    );
    let b = instance(B, "pool in (y, z)");
    let (writes, _) = run_for(&mut c, &[&b, &a], &windows, t1, 30);
    assert_eq!(
        c.writes - before - writes.get(&(B.into(), "z1".into())).unwrap(),
        4
    );
    assert_eq!(y_writes(&writes), [1, 1], "b's True only: {writes:?}");
    assert_eq!(
        c.condition("y1", UNDER_MAINTENANCE).unwrap().0,
        Status::True
    );
    assert_eq!(c.owners_of("y1", UNDER_MAINTENANCE), [B]);
    steady(&mut c, &a, &windows, t1);
    steady(&mut c, &b, &windows, t1);
}

#[test]
fn differing_opinions_are_rewritten_at_most_once_per_resync_each() {
    // Two instances over the same nodes read different windows: a's is active, b
    // has none. Each would undo the other at once; the bound leaves each one write
    // per resync interval (5 min): over 20 minutes at most 5 each per node.
    let t0 = ts("2026-01-01T02:05:00Z");
    let mut c = cluster(t0);
    let a = instance(A, "pool=y");
    let b = instance(B, "pool=y");
    let a_windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut writes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut flips = 0;
    let mut last = None;
    for s in 0..(20 * 60) {
        let now = t0 + SignedDuration::from_secs(s);
        c.live(A, now);
        c.live(B, now);
        *writes.entry(A).or_default() += c.pass(&a, &a_windows, now).writes.len();
        let o = c.pass(&b, &[], now);
        *writes.entry(B).or_default() += o.writes.len();
        if s > 0 {
            let reported: BTreeSet<String> = c
                .pass(&a, &a_windows, now)
                .contested
                .iter()
                .chain(&o.contested)
                .map(|c| c.node.clone())
                .collect();
            assert_eq!(
                reported,
                ["y1".to_string(), "y2".to_string()].into(),
                "at {s}s, each node is reported contested by the instance held back"
            );
        }
        let state = c.condition("y1", UNDER_MAINTENANCE).map(|x| x.0);
        if last.is_some() && state != last {
            flips += 1;
        }
        last = state;
    }
    // Per node: a's first write, b's, then one each per 5 minutes.
    assert!(writes[A] <= 2 * 5 && writes[B] <= 2 * 5, "{writes:?}");
    assert!(flips <= 10, "{flips} flips in 20 minutes");
    // Without the bound this would be 2 writes per node per second.
    assert!(writes[A] >= 2 && writes[B] >= 2, "{writes:?}");
}

#[test]
fn a_stale_co_owner_is_neither_deferred_to_nor_a_contest() {
    // y1 is co-owned by a deleted instance (its Lease gone) and by the field manager
    // of kumaco's earlier versions: a leaving the node sets it False.
    let t0 = ts("2026-01-01T02:05:00Z");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let deleted = "kumaco/gone/kumaco";
    for stale in [deleted, peers::LEGACY_MANAGER] {
        let mut c = cluster(t0);
        c.peers.leases.insert(
            peers::lease_of(deleted).unwrap(),
            (peers::LeaseRead::Missing, t0),
        );
        let a = instance(A, "pool in (x, y)");
        c.pass(&a, &windows, t0);
        // The stale manager applied the same value (it ran once, with a's opinion).
        let cond = c.nodes[1].conditions.clone();
        c.node("y1").apply(stale, &cond, t0);
        let mut both = vec![A.to_string(), stale.to_string()];
        both.sort();
        assert_eq!(c.owners_of("y1", UNDER_MAINTENANCE), both);
        let o = c.pass(&a, &windows, t0 + SignedDuration::from_secs(1));
        assert!(o.contested.is_empty(), "{stale}: {:?}", o.contested);
        assert!(o.leases.iter().all(|l| l.namespace != "ops-a"));
        let o = c.pass(
            &instance(A, "pool=x"),
            &windows,
            t0 + SignedDuration::from_secs(2),
        );
        assert_eq!(o.writes.len(), 2, "{stale}");
        assert_eq!(
            c.condition("y1", UNDER_MAINTENANCE),
            Some((Status::False, reasons::NODE_OUT_OF_SCOPE.into())),
            "{stale}: no True is left that no live instance wants"
        );
    }
}

#[test]
fn a_co_owner_whose_lease_was_not_read_lately_holds_the_decision() {
    let t0 = ts("2026-01-01T02:05:00Z");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = cluster(t0);
    let a = instance(A, "pool in (x, y)");
    let b = instance(B, "pool in (y, z)");
    c.pass(&a, &windows, t0);
    c.pass(&b, &windows, t0);
    let later = t0 + SignedDuration::from_secs(1);
    // Read 10 s ago: live then, but the drop is final, so it waits for a fresh copy.
    let b_lease = peers::lease_of(B).unwrap();
    c.peers.leases.get_mut(&b_lease).unwrap().1 = later - SignedDuration::from_secs(10);
    let o = c.pass(&instance(A, "pool=x"), &windows, later);
    assert!(o.writes.is_empty(), "{:?}", o.writes);
    assert!(
        o.refresh.contains(&b_lease),
        "the shell is asked to read it again"
    );
    c.peers.leases.clear();
    let o = c.pass(&instance(A, "pool=x"), &windows, later);
    assert!(o.writes.is_empty(), "never read: {:?}", o.writes);
    assert!(o.refresh.contains(&b_lease) && o.leases.contains(&b_lease));
    c.live(B, later);
    let o = c.pass(&instance(A, "pool=x"), &windows, later);
    assert!(o.writes.iter().all(|w| w.dropped == [UNDER_MAINTENANCE]));
    assert_eq!(o.writes.len(), 2);
}

#[test]
fn after_an_upgrade_from_the_old_field_manager_the_new_one_co_owns_once() {
    let t0 = ts("2026-01-01T02:05:00Z");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = cluster(t0);
    // The old version wrote as `kumaco`.
    c.pass(
        &instance(peers::LEGACY_MANAGER, "pool in (x, y)"),
        &windows,
        t0,
    );
    let a = instance(A, "pool in (x, y)");
    let o = c.pass(&a, &windows, t0);
    assert_eq!(o.writes.len(), 3, "one claim per node with a condition");
    assert!(
        o.contested.is_empty(),
        "the old manager is no live instance"
    );
    steady(&mut c, &a, &windows, t0);
    // Now the new instance can let y go: nothing True is left behind.
    c.pass(&instance(A, "pool=x"), &windows, t0);
    assert_eq!(
        c.condition("y1", UNDER_MAINTENANCE).unwrap().0,
        Status::False
    );
}

#[test]
fn a_person_who_overrides_a_condition_is_rewritten_at_most_once_per_resync() {
    let t0 = ts("2026-01-01T02:05:00Z");
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = cluster(t0);
    let a = instance(A, "");
    c.pass(&a, &windows, t0);
    // An operator's own apply, twice a minute (a script): kumaco puts it back once,
    // then once per resync interval.
    let mut writes = 0;
    for s in 1..600 {
        let now = t0 + SignedDuration::from_secs(s);
        if s % 30 == 0 {
            c.set_as("ops-script", "y1", UNDER_MAINTENANCE, false, now);
        }
        writes += c
            .pass(&a, &windows, now)
            .writes
            .iter()
            .filter(|w| w.node == "y1")
            .count();
    }
    assert!((1..=2).contains(&writes), "{writes} rewrites in 10 minutes");
}
