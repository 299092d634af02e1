use serde_json::json;

use super::versions::READY;
use super::*;
use crate::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED};

/// A node version: `zone`, `MaintenanceInProgress` (None: absent), Ready status,
/// cordoned, `RebootRequired`, `UnderMaintenance=True`.
struct V<'a> {
    name: &'a str,
    rv: u64,
    zone: &'a str,
    mip: Option<&'a str>,
    ready: &'a str,
    cordoned: bool,
    rr: bool,
    um: bool,
}

impl V<'_> {
    fn node(&self) -> Node {
        let cond = |t: &str, s: &str| {
            json!({ "type": t, "status": s, "reason": "R", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z" })
        };
        let mut conditions = vec![
            cond(READY, self.ready),
            cond(REBOOT_REQUIRED, if self.rr { "True" } else { "False" }),
        ];
        if self.um {
            conditions.push(cond(UNDER_MAINTENANCE, "True"));
        }
        if let Some(m) = self.mip {
            conditions.push(cond(MAINTENANCE_IN_PROGRESS, m));
        }
        serde_json::from_value(json!({
            "metadata": { "name": self.name, "resourceVersion": self.rv.to_string(),
                          "labels": { "zone": self.zone } },
            "spec": { "unschedulable": self.cordoned },
            "status": { "conditions": conditions },
        }))
        .unwrap()
    }
}

impl<'a> V<'a> {
    fn mip(self, status: &'a str) -> Self {
        V {
            mip: Some(status),
            ..self
        }
    }

    fn ready(self, status: &'a str) -> Self {
        V {
            ready: status,
            ..self
        }
    }

    fn cordoned(self) -> Self {
        V {
            cordoned: true,
            ..self
        }
    }

    fn no_reboot_required(self) -> Self {
        V { rr: false, ..self }
    }
}

/// Node `name` at revision `rv` in `zone`: needing a reboot, under maintenance, waiting
/// (`MaintenanceInProgress=False`), Ready and schedulable.
fn v<'a>(name: &'a str, rv: u64, zone: &'a str) -> V<'a> {
    V {
        name,
        rv,
        zone,
        mip: Some("False"),
        ready: "True",
        cordoned: false,
        rr: true,
        um: true,
    }
}

fn ctx(ceiling: usize, group: usize) -> Ctx {
    Ctx {
        cfg: CheckerConfig {
            ceiling,
            group_ceiling: Some(("zone".into(), group)),
            edge_bound: Duration::from_secs(1),
            slack: Duration::from_secs(1),
            settle: Duration::from_secs(1),
            lease_namespace: "ns".into(),
            lease_name: "lease".into(),
            lease_duration: Duration::from_secs(8),
            budget_nodes: Default::default(),
        },
        state: Arc::new(Mutex::new(State::default())),
        violation: Arc::new(watch::channel(false).0),
    }
}

fn list(ctx: &Ctx, nodes: &[V]) {
    ctx.node_event(Ok(watcher::Event::Init));
    for n in nodes {
        ctx.node_event(Ok(watcher::Event::InitApply(n.node())));
    }
    ctx.node_event(Ok(watcher::Event::InitDone));
}

fn apply(ctx: &Ctx, n: V) {
    ctx.node_event(Ok(watcher::Event::Apply(n.node())));
}

fn violations(ctx: &Ctx) -> Vec<String> {
    ctx.state.lock().unwrap().violations.clone()
}

fn counts(ctx: &Ctx) -> Counts {
    ctx.state.lock().unwrap().counts.clone()
}

/// a in progress, b and x waiting, y elsewhere; all at revision 1-4.
fn cluster(ctx: &Ctx) {
    list(
        ctx,
        &[
            v("a", 1, "z1").mip("True"),
            v("b", 2, "z1"),
            v("x", 3, "z1"),
            v("y", 4, "z2"),
        ],
    );
}

#[test]
fn a_start_while_a_node_kumaco_saw_down_fills_the_ceiling_is_a_violation() {
    let ctx = ctx(2, 5);
    cluster(&ctx);
    apply(&ctx, v("b", 10, "z1").ready("False"));
    apply(&ctx, v("y", 12, "z2").ready("True").cordoned());
    // Somebody else changes x after b and y went down (cordoned and back): kumaco's
    // cache had them when it derived the start.
    apply(&ctx, v("x", 13, "z1").cordoned());
    apply(&ctx, v("x", 14, "z1"));
    apply(&ctx, v("x", 15, "z1").mip("True"));
    let found = violations(&ctx);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("3 nodes were disrupted overall (ceiling 2)"),
        "{found:?}"
    );
    assert_eq!(counts(&ctx).starts_checked, 1);
    assert_eq!(counts(&ctx).starts_with_unavailable_counted, 1);
}

#[test]
fn a_node_down_after_the_version_kumaco_decided_on_is_no_violation() {
    let ctx = ctx(2, 5);
    cluster(&ctx);
    // x's last foreign version, then b goes down, then kumaco's start of x.
    apply(&ctx, v("x", 10, "z1").cordoned());
    apply(&ctx, v("x", 11, "z1"));
    apply(&ctx, v("b", 12, "z1").ready("Unknown"));
    apply(&ctx, v("x", 13, "z1").mip("True"));
    assert_eq!(violations(&ctx), Vec::<String>::new());
    let c = counts(&ctx);
    assert_eq!((c.starts_checked, c.starts_raced), (1, 1));
    assert_eq!(c.went_unavailable.get("Ready Unknown"), Some(&1));
    assert_eq!(c.max_disrupted, 3);
}

#[test]
fn kumacos_own_writes_do_not_advance_what_it_must_have_seen() {
    let ctx = ctx(2, 5);
    cluster(&ctx);
    apply(&ctx, v("x", 10, "z1").no_reboot_required());
    apply(&ctx, v("x", 11, "z1"));
    apply(&ctx, v("b", 12, "z1").ready("False"));
    // kumaco writes x twice (its reason, then the start): derived, maybe, from a
    // cache still at revision 11.
    apply(&ctx, v("x", 13, "z1").mip("Unknown"));
    apply(&ctx, v("x", 14, "z1").mip("True"));
    assert_eq!(violations(&ctx), Vec::<String>::new());
    assert_eq!(counts(&ctx).starts_raced, 1);
}

#[test]
fn a_full_zone_is_a_ceiling_of_its_own() {
    let ctx = ctx(8, 1);
    cluster(&ctx);
    // y, in another zone, in progress: no matter for x's zone.
    apply(&ctx, v("y", 10, "z2").mip("True"));
    apply(&ctx, v("x", 11, "z1").mip("True"));
    let found = violations(&ctx);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("disrupted in group zone=z1 (ceiling 1)")
            && found[0].contains("a in progress"),
        "{found:?}"
    );
}

/// A second reboot for one requirement, as the checker sees it: a node in progress ends
/// (a reboot) while its requirement is still True from the same episode, and starts
/// again.
#[test]
fn a_second_start_for_one_requirement_is_a_violation() {
    let ctx = ctx(8, 8);
    cluster(&ctx);
    let second = "a second maintenance started";
    apply(&ctx, v("x", 10, "z1"));
    apply(&ctx, v("x", 11, "z1").mip("True"));
    assert!(!violations(&ctx).iter().any(|f| f.contains(second)));
    apply(&ctx, v("x", 12, "z1"));
    apply(&ctx, v("x", 13, "z1").mip("True"));
    let found = violations(&ctx);
    assert!(found.iter().any(|f| f.contains(second)), "{found:?}");
}

#[test]
fn a_start_on_an_unavailable_node_is_a_violation() {
    let ctx = ctx(8, 8);
    cluster(&ctx);
    apply(&ctx, v("x", 10, "z1").cordoned());
    apply(&ctx, v("x", 11, "z1").cordoned().mip("True"));
    let found = violations(&ctx);
    assert!(
        found
            .iter()
            .any(|f| f.contains("which is unavailable (cordoned)")),
        "{found:?}"
    );
}

#[test]
fn after_a_relist_a_node_down_counts_from_its_listed_version() {
    let ctx = ctx(2, 5);
    cluster(&ctx);
    apply(&ctx, v("b", 10, "z1").ready("False"));
    // A gap: the list shows b still down (it may have come back and gone down again
    // at 20), x changed by somebody at 15, or by kumaco: unknown.
    list(
        &ctx,
        &[
            v("a", 1, "z1").mip("True"),
            v("b", 20, "z1").ready("False"),
            v("x", 15, "z1"),
            v("y", 4, "z2"),
        ],
    );
    apply(&ctx, v("x", 21, "z1").mip("True"));
    // x's foreign revision is still 3 (from the first list): b's 20 is after it.
    assert_eq!(violations(&ctx), Vec::<String>::new());
    assert_eq!(counts(&ctx).starts_raced, 1);
}

#[test]
fn a_refused_eviction_in_the_drain_of_a_started_node_is_a_violation_naming_the_budget() {
    let ctx = ctx(2, 5);
    cluster(&ctx);
    assert!(violations(&ctx).is_empty());
    let refused = crate::workloads::Refused {
        pod: "chaos-apps/spread-0-1".into(),
        code: 429,
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
        budgets: vec!["chaos-apps/spread-0 (disruptionsAllowed 0, ...)".into()],
    };
    ctx.eviction_refused("a", &refused);
    let found = violations(&ctx);
    assert_eq!(found.len(), 1, "{found:?}");
    for part in [
        "drain a PodDisruptionBudget refuses",
        "node a (MaintenanceInProgress=True since",
        "pod chaos-apps/spread-0-1",
        "429",
        "budgets: chaos-apps/spread-0",
    ] {
        assert!(found[0].contains(part), "{part:?} not in {found:?}");
    }
    assert_eq!(counts(&ctx).evictions_refused, 1);
}

#[test]
fn a_node_under_a_budget_may_wait_while_a_slot_is_free() {
    // Only a in progress, ceilings 2 and 5: b, x and y wait with a slot free, for a
    // minute of quiet time.
    let waited = |budget_nodes: &[&str]| {
        let mut c = ctx(2, 5);
        c.cfg.budget_nodes = budget_nodes.iter().map(|n| n.to_string()).collect();
        let now = Timestamp::now();
        c.state.lock().unwrap().plan = Plan {
            segments: vec![super::super::plan::Segment {
                start: now - SignedDuration::from_hours(1),
                end: now + SignedDuration::from_hours(1),
                nodes: ["a", "b", "x", "y"].iter().map(|n| n.to_string()).collect(),
            }],
        };
        list(
            &c,
            &[
                v("a", 1, "z1").mip("True"),
                v("b", 2, "z1"),
                v("x", 3, "z2"),
                v("y", 4, "z2"),
            ],
        );
        c.state.lock().unwrap().last_relist = Some(now - SignedDuration::from_hours(1));
        c.tick();
        for since in c.state.lock().unwrap().starved.values_mut() {
            *since -= SignedDuration::from_secs(60);
        }
        c.tick();
        violations(&c)
    };
    let found = waited(&[]);
    assert!(
        found.iter().any(|v| v.contains("waits for maintenance")),
        "{found:?}"
    );
    let found = waited(&["b", "x", "y"]);
    assert!(found.is_empty(), "{found:?}");
}
