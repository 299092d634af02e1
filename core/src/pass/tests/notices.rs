//! The notices of a rollout, as `transitions` derives them from what the passes leave on
//! the nodes: each transition once, under one id, whenever it is looked at.

use std::collections::BTreeMap;

use super::*;
use crate::conditions::is_true;
use crate::notice::{Kind, Notice};
use crate::transitions::{self, Inputs, NodeState, Told};

fn notice_rules(rules: &Rules) -> transitions::Rules {
    transitions::Rules {
        cluster: "prod".into(),
        instance: rules.instance.clone(),
        in_progress: rules.in_progress.is_some(),
        required: vec![REBOOT.into()],
        waiting_after: Some(SignedDuration::from_mins(10)),
        not_back_after: Some(SignedDuration::from_mins(5)),
        planned_lead_time: rules.planned_lead_time,
        zone_label: "zone".into(),
        pool_labels: Vec::new(),
    }
}

/// Between two passes: not a whole number of seconds, so that starts and ends fall
/// within their second as they do in a cluster, and the durations recorded are not
/// whole seconds either.
const STEP: SignedDuration = SignedDuration::from_millis(20_337);

/// What a notifier started at `now` would find, over the cluster as it is.
fn due(
    c: &Cluster,
    rules: &transitions::Rules,
    windows: &[WindowSource],
    events: &[Announcement],
    now: Timestamp,
) -> transitions::Due {
    let owners: Vec<Vec<Owner>> = c.nodes.iter().map(Node::owner_views).collect();
    let nodes: Vec<NodeState> = c
        .nodes
        .iter()
        .zip(&owners)
        .map(|(n, owners)| NodeState {
            name: &n.name,
            uid: &n.name,
            labels: &n.labels,
            conditions: &n.conditions,
            owned: owners
                .iter()
                .find(|o| o.manager == rules.instance)
                .map(|o| o.types.as_slice())
                .unwrap_or_default(),
            availability: n.availability,
        })
        .collect();
    let sources: Vec<&WindowSource> = windows.iter().collect();
    transitions::due(
        rules,
        &Inputs {
            nodes: &nodes,
            windows: &sources,
            announcements: events,
            forecast: None,
            told: &Told::new(),
            now,
        },
    )
}

/// Seven nodes need a reboot, two at a time, in a window of 30 minutes from 02:00; the
/// agent reboots each 4 minutes after its start; `g` is NotReady throughout (it holds a
/// slot). Passes
/// every [`STEP`] from 01:40 to 02:50; after each, the notices due are collected by id.
#[test]
fn a_rollout_tells_each_transition_once_under_one_id() {
    let windows = [source("w", "0 2 * * *", "30m", "", false)];
    let names = ["a", "b", "c", "d", "e", "f", "g"];
    let labelled: Vec<(&str, &[(&str, &str)])> =
        names.iter().map(|n| (*n, &[("zone", "z1")][..])).collect();
    let mut c = Cluster::new(&labelled);
    for n in names {
        c.set(n, REBOOT, true, ts("2026-01-01T00:00:00Z"));
    }
    c.node("g").availability.ready = Some(Status::False);
    let rules = Rules {
        in_progress: in_progress(2, &[REBOOT]),
        planned_lead_time: Some(SignedDuration::from_mins(15)),
        ..rules("")
    };
    let told = notice_rules(&rules);
    let mut seen: BTreeMap<String, Notice> = BTreeMap::new();
    let mut started_at: BTreeMap<String, Timestamp> = BTreeMap::new();
    let mut last_events = Vec::new();
    let mut now = ts("2026-01-01T01:40:00Z");
    while now <= ts("2026-01-01T02:50:00Z") {
        // The agent: a node in progress for 4 minutes has rebooted.
        for n in names {
            let in_progress = c.condition(n, MAINTENANCE_IN_PROGRESS)
                == Some((Status::True, reasons::MAINTENANCE_WINDOW.into()));
            if in_progress {
                let since = *started_at.entry(n.to_string()).or_insert(now);
                if now.duration_since(since) >= SignedDuration::from_mins(4)
                    && is_true(&c.node(n).conditions, REBOOT)
                {
                    c.set(n, REBOOT, false, now);
                }
            }
        }
        let outcome = c.pass(&rules, &windows, now);
        c.pass(&rules, &windows, now);
        last_events = outcome.events.clone();
        for n in due(&c, &told, &windows, &outcome.events, now).notices {
            match seen.get(&n.id) {
                // The same transition looked at again: the same notice.
                Some(before) => assert_eq!(
                    (before.kind, before.at, &before.node),
                    (n.kind, n.at, &n.node),
                    "one id, two transitions"
                ),
                None => {
                    seen.insert(n.id.clone(), n);
                }
            }
        }
        now += STEP;
    }
    let of = |kind: Kind| -> Vec<&Notice> { seen.values().filter(|n| n.kind == kind).collect() };
    let nodes_of = |kind: Kind| -> Vec<String> {
        let mut v: Vec<String> = of(kind)
            .iter()
            .map(|n| n.node.as_ref().unwrap().name.clone())
            .collect();
        v.sort();
        v
    };
    assert_eq!(of(Kind::Planned).len(), 1, "{:?}", of(Kind::Planned));
    assert_eq!(of(Kind::Planned)[0].at, ts("2026-01-01T01:45:00Z"));
    assert_eq!(of(Kind::WindowOpened).len(), 1);
    assert_eq!(of(Kind::WindowOpened)[0].selected, Some(7));
    // One at a time beside g fits six in 30 minutes; g never becomes available.
    assert_eq!(nodes_of(Kind::Started), ["a", "b", "c", "d", "e", "f"]);
    assert_eq!(nodes_of(Kind::Completed), ["a", "b", "c", "d", "e", "f"]);
    for n in of(Kind::Completed) {
        assert_eq!(n.rebooted, Some(false), "the agent cleared its condition");
        assert!(
            n.duration
                .is_some_and(|d| d >= SignedDuration::from_mins(4))
        );
        assert_eq!(n.node.as_ref().unwrap().zone.as_deref(), Some("z1"));
    }
    // Those still waiting 10 minutes into the window are told so once, with why: g is
    // NotReady, and holds one of the two slots, so d, e and f wait for the other.
    let waiting = of(Kind::Waiting);
    assert_eq!(nodes_of(Kind::Waiting), ["d", "e", "f", "g"], "{waiting:?}");
    // The window reached them at the first pass in it, a second's part of a step after
    // 02:00 (lastTransitionTime is whole seconds).
    let reached = ts("2026-01-01T02:00:20Z");
    for n in &waiting {
        assert_eq!(n.at, reached + SignedDuration::from_mins(10));
        let expected = match n.node.as_ref().unwrap().name.as_str() {
            "g" => reasons::NODE_UNAVAILABLE,
            _ => reasons::WAITING_FOR_SLOT,
        };
        assert_eq!(n.reason, expected);
    }
    let closed = of(Kind::WindowClosed);
    assert_eq!(closed.len(), 1);
    let closed = closed[0];
    assert_eq!(closed.at, ts("2026-01-01T02:30:00Z"));
    assert_eq!((closed.selected, closed.done), (Some(7), Some(6)));
    assert_eq!(closed.left.len(), 1);
    assert_eq!(
        (closed.left[0].node.as_str(), closed.left[0].reason.as_str()),
        ("g", reasons::NODE_UNAVAILABLE)
    );
    assert!(of(Kind::Ended).is_empty() && of(Kind::NotBack).is_empty());

    // A kumaco started now finds every transition of the last half hour under the ids
    // the one that ran throughout found, and no other.
    let fresh = due(&c, &told, &windows, &last_events, now).notices;
    let since = now - transitions::HORIZON;
    let expected: Vec<&String> = seen
        .iter()
        .filter(|(_, n)| n.at >= since)
        .map(|(id, _)| id)
        .collect();
    let mut found: Vec<&String> = fresh.iter().map(|n| &n.id).collect();
    found.sort();
    assert!(!found.is_empty());
    for id in &found {
        assert!(
            seen.contains_key(*id),
            "a new id for an old transition: {id}"
        );
    }
    // The window's events are the pass's, which announces the closing only; the nodes'
    // transitions are all there.
    let node_ids: Vec<&String> = expected
        .into_iter()
        .filter(|id| seen[*id].node.is_some())
        .collect();
    for id in node_ids {
        assert!(found.contains(&id), "{:?} lost", seen[id]);
    }
}

/// A completed node that does not come back is told once its absence reaches the
/// threshold; one that comes back in time is not.
#[test]
fn a_node_not_back_after_its_maintenance_is_told_once() {
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[]), ("b", &[])]);
    c.set("a", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    c.set("b", REBOOT, true, ts("2026-01-01T00:00:00Z"));
    let rules = Rules {
        in_progress: in_progress(2, &[REBOOT]),
        ..rules("")
    };
    let told = notice_rules(&rules);
    let t0 = ts("2026-01-01T02:00:00Z");
    c.pass(&rules, &windows, t0);
    // Both reboot and clear the condition; only b is Ready again.
    let t1 = t0 + SignedDuration::from_mins(3);
    for n in ["a", "b"] {
        c.set(n, REBOOT, false, t1);
    }
    c.node("a").availability.ready = Some(Status::False);
    c.pass(&rules, &windows, t1);
    c.pass(&rules, &windows, t1);
    let before = due(&c, &told, &windows, &[], t1 + SignedDuration::from_mins(4));
    assert!(before.notices.iter().all(|n| n.kind != Kind::NotBack));
    assert_eq!(before.next, Some(t1 + SignedDuration::from_mins(5)));
    let after = due(&c, &told, &windows, &[], t1 + SignedDuration::from_mins(6));
    let not_back: Vec<&Notice> = after
        .notices
        .iter()
        .filter(|n| n.kind == Kind::NotBack)
        .collect();
    assert_eq!(not_back.len(), 1);
    assert_eq!(not_back[0].node.as_ref().unwrap().name, "a");
    assert_eq!(not_back[0].at, t1 + SignedDuration::from_mins(5));
}

/// Without `--in-progress`, a node's maintenance is its window's: started and ended.
#[test]
fn without_the_brain_the_windows_edges_are_the_transitions() {
    let windows = [source("w", "0 2 * * *", "1h", "", false)];
    let mut c = Cluster::new(&[("a", &[])]);
    let rules = rules("");
    let told = notice_rules(&rules);
    let start = ts("2026-01-01T02:00:00Z");
    c.pass(&rules, &windows, start);
    let end = start + SignedDuration::from_hours(1);
    let o = c.pass(&rules, &windows, end);
    let kinds: Vec<(Kind, Timestamp)> = due(&c, &told, &windows, &o.events, end)
        .notices
        .iter()
        .map(|n| (n.kind, n.at))
        .collect();
    // The node's start is an hour old by its end: past the horizon, not told again.
    assert_eq!(kinds, [(Kind::Ended, end), (Kind::WindowClosed, end)]);
}
