//! A node a drain is disrupting (KEP-5683's `DrainInProgress=True`) outside any window:
//! kumaco did not start it, yet it is down for its workloads, so it takes a slot of
//! every ceiling it counts against, overall and in its group.

use std::collections::BTreeMap;

use super::*;

/// A node that no window selects and that needs nothing, showing `DrainInProgress=True`
/// (read by its wire name, as the shell hands the node's conditions over).
fn drained_outside_any_window<'a>(
    name: &'a str,
    labels: &'a BTreeMap<String, String>,
) -> NodeState<'a> {
    NodeState {
        labels,
        availability: Availability {
            ready: Some(Status::True),
            unschedulable: false,
            disrupted_by: Lifecycle::of(|t| t == "DrainInProgress"),
        },
        ..node(name, &[], false)
    }
}

fn zone(z: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("zone".to_string(), z.to_string())])
}

#[test]
fn a_drained_node_outside_any_window_takes_a_slot_of_the_ceiling() {
    let r = [cond(REBOOT, true, 100)];
    let nodes = [
        drained_outside_any_window("drained", &NO_LABELS),
        node("a", &r, true),
    ];
    let d = decide(&policy(1), &nodes, &Gates::NONE, now());
    assert_eq!(
        status(&d.conditions[1]),
        Some((false, reasons::WAITING_FOR_SLOT))
    );
    assert_eq!(
        d.conditions[1].as_ref().unwrap().message,
        "1/1 slots in use: 0 in progress, 1 unavailable (drained draining (DrainInProgress))"
    );
    assert_eq!((d.overall.unavailable, d.unavailable), (1, 1));

    // A second slot is free for it.
    let d = decide(&policy(2), &nodes, &Gates::NONE, now());
    assert_eq!(
        status(&d.conditions[1]),
        Some((true, reasons::MAINTENANCE_WINDOW))
    );

    // Counted only in progress (`--count-unavailable=false`), the drain takes none.
    let p = Policy {
        count_unavailable: false,
        ..policy(1)
    };
    let d = decide(&p, &nodes, &Gates::NONE, now());
    assert_eq!(
        status(&d.conditions[1]),
        Some((true, reasons::MAINTENANCE_WINDOW))
    );
}

#[test]
fn a_drained_node_outside_any_window_takes_its_zones_slot_only() {
    let r = [cond(REBOOT, true, 100)];
    let (a, b) = (zone("a"), zone("b"));
    let nodes = [
        drained_outside_any_window("drained", &a),
        NodeState {
            labels: &a,
            ..node("a1", &r, true)
        },
        NodeState {
            labels: &b,
            ..node("b1", &r, true)
        },
    ];
    let p = Policy {
        group_ceilings: vec![GroupCeiling {
            key: "zone".into(),
            ceiling: Ceiling::Count(1),
        }],
        ..policy(5)
    };
    let d = decide(&p, &nodes, &Gates::NONE, now());
    assert_eq!(
        status(&d.conditions[1]),
        Some((false, reasons::WAITING_FOR_SLOT))
    );
    assert!(
        (d.conditions[1].as_ref().unwrap().message).contains("zone=a"),
        "{:?}",
        d.conditions[1]
    );
    assert_eq!(
        status(&d.conditions[2]),
        Some((true, reasons::MAINTENANCE_WINDOW))
    );
    let zone_a = Group {
        key: "zone".into(),
        value: Some("a".into()),
    };
    assert_eq!(d.groups[&zone_a].unavailable, 1);
    assert_eq!(d.overall.unavailable, 1);
}
