use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::selector;

fn budget(ns: &str, name: &str, selector: &str, allowed: i32) -> Budget {
    Budget {
        namespace: ns.into(),
        name: name.into(),
        selector: Some(selector::parse(selector).unwrap()),
        disruptions_allowed: allowed,
        behind: None,
        current_healthy: 3,
        desired_healthy: 2,
        always_allow_unhealthy: false,
    }
}

fn pod(ns: &str, name: &str, app: &str) -> Pod {
    Pod {
        namespace: ns.into(),
        name: name.into(),
        labels: BTreeMap::from([("app".to_string(), app.to_string())]),
        phase: Phase::Running,
        terminating: false,
        ready: true,
        daemon_set: false,
        mirror: false,
    }
}

fn check(budgets: &Budgets, pods: &[Pod]) -> Result<(), String> {
    Headroom::default()
        .check(budgets, pods)
        .map_err(|r| r.to_string())
}

#[test]
fn a_pod_whose_budget_allows_no_disruption_refuses_the_drain() {
    let budgets = Budgets::new([budget("shop", "frontend", "app=web", 0)]);
    assert_eq!(
        check(&budgets, &[pod("shop", "frontend-7d9f", "web")]),
        Err(
            "PodDisruptionBudget shop/frontend allows 0 disruptions (pod shop/frontend-7d9f)"
                .into()
        )
    );
    // A negative count (the disruption controller's "more unavailable than allowed") is 0.
    let budgets = Budgets::new([budget("shop", "frontend", "app=web", -2)]);
    assert!(check(&budgets, &[pod("shop", "frontend-7d9f", "web")]).is_err());
    // Pods no budget selects, or a budget of another namespace: free to go.
    assert_eq!(check(&budgets, &[pod("shop", "db-0", "db")]), Ok(()));
    assert_eq!(check(&budgets, &[pod("other", "web-1", "web")]), Ok(()));
}

#[test]
fn pods_a_drain_leaves_or_the_eviction_api_lets_go_need_no_budget() {
    let budgets = Budgets::new([budget("shop", "all", "", 0)]);
    type Edit = fn(&mut Pod);
    let variants: [(&str, Edit); 6] = [
        ("daemon set", |p| p.daemon_set = true),
        ("mirror", |p| p.mirror = true),
        ("succeeded", |p| p.phase = Phase::Succeeded),
        ("failed", |p| p.phase = Phase::Failed),
        ("pending", |p| p.phase = Phase::Pending),
        ("terminating", |p| p.terminating = true),
    ];
    for (what, edit) in variants {
        let mut p = pod("shop", "x", "web");
        edit(&mut p);
        assert_eq!(check(&budgets, &[p]), Ok(()), "{what}");
    }
    // `Unknown` (a node that stopped reporting): the eviction API asks the budget.
    let mut unknown = pod("shop", "x", "web");
    unknown.phase = Phase::parse(Some("Unknown"));
    assert!(check(&budgets, &[unknown]).is_err());
}

#[test]
fn a_nil_selector_selects_no_pod_and_an_empty_one_every_pod_of_its_namespace() {
    let mut nil = budget("shop", "nil", "", 0);
    nil.selector = None;
    assert_eq!(
        check(&Budgets::new([nil]), &[pod("shop", "x", "web")]),
        Ok(())
    );
    let empty = budget("shop", "empty", "", 0);
    assert!(check(&Budgets::new([empty]), &[pod("shop", "x", "web")]).is_err());
}

#[test]
fn the_eviction_api_refuses_a_pod_under_two_budgets_and_a_budget_behind_its_spec() {
    let budgets = Budgets::new([
        budget("shop", "b", "app=web", 5),
        budget("shop", "a", "app", 5),
    ]);
    assert_eq!(
        check(&budgets, &[pod("shop", "web-1", "web")]),
        Err(
            "pod shop/web-1 is selected by 2 PodDisruptionBudgets (shop/a, shop/b), which the \
             eviction API refuses"
                .into()
        )
    );
    let mut behind = budget("shop", "a", "app=web", 5);
    behind.behind = Some((3, 4));
    assert_eq!(
        check(&Budgets::new([behind]), &[pod("shop", "web-1", "web")]),
        Err(
            "PodDisruptionBudget shop/a has a status older than its spec (observedGeneration 3 \
             < generation 4) (pod shop/web-1)"
                .into()
        )
    );
}

#[test]
fn an_unhealthy_pod_goes_as_its_budget_says() {
    let unready = || {
        let mut p = pod("shop", "web-1", "web");
        p.ready = false;
        p
    };
    // The application is healthy enough: the unready pod goes, using nothing.
    let healthy = budget("shop", "a", "app=web", 0);
    assert_eq!(check(&Budgets::new([healthy]), &[unready()]), Ok(()));
    // Not healthy enough, and no disruption allowed.
    let mut sick = budget("shop", "a", "app=web", 0);
    sick.current_healthy = 1;
    assert_eq!(
        check(&Budgets::new([sick.clone()]), &[unready()]),
        Err(
            "PodDisruptionBudget shop/a needs 2 healthy pods and has 1 (pod shop/web-1 is not \
             Ready)"
                .into()
        )
    );
    // `unhealthyPodEvictionPolicy: AlwaysAllow`.
    sick.always_allow_unhealthy = true;
    assert_eq!(check(&Budgets::new([sick]), &[unready()]), Ok(()));
}

#[test]
fn headroom_is_shared_between_the_nodes_started_and_those_in_progress() {
    let budgets = Budgets::new([budget("shop", "frontend", "app=web", 1)]);
    let a = [pod("shop", "web-a", "web")];
    let b = [pod("shop", "web-b", "web")];
    let mut h = Headroom::default();
    assert_eq!(h.check(&budgets, &a), Ok(()));
    h.take(&budgets, "node-a", &a, true);
    assert_eq!(
        h.check(&budgets, &b).map_err(|r| r.to_string()),
        Err(
            "PodDisruptionBudget shop/frontend allows 1 disruptions, used by node node-a (pod \
             shop/web-b)"
                .into()
        )
    );
    // A node in progress uses it until its pods are gone, terminating ones included
    // (the disruption controller may not have counted them yet).
    let mut leaving = pod("shop", "web-a", "web");
    leaving.terminating = true;
    let mut h = Headroom::default();
    h.take(&budgets, "node-a", std::slice::from_ref(&leaving), false);
    assert!(h.check(&budgets, &b).is_err());
    // Gone: free again.
    let mut h = Headroom::default();
    h.take(&budgets, "node-a", &[], false);
    assert_eq!(h.check(&budgets, &b), Ok(()));
}

#[test]
fn a_node_with_several_pods_under_one_budget_needs_one_disruption() {
    let budgets = Budgets::new([budget("shop", "frontend", "app=web", 1)]);
    let pods = [pod("shop", "web-1", "web"), pod("shop", "web-2", "web")];
    let mut h = Headroom::default();
    assert_eq!(h.check(&budgets, &pods), Ok(()));
    h.take(&budgets, "n", &pods, true);
    assert!(h.check(&budgets, &[pod("shop", "web-3", "web")]).is_err());
}

#[test]
fn the_first_refusal_in_name_order_and_how_many_more() {
    let budgets = Budgets::new([budget("shop", "zero", "app=web", 0)]);
    let pods = [
        pod("shop", "web-2", "web"),
        pod("shop", "web-1", "web"),
        pod("shop", "web-3", "web"),
    ];
    assert_eq!(
        check(&budgets, &pods),
        Err(
            "PodDisruptionBudget shop/zero allows 0 disruptions (pod shop/web-1) (and 2 more pods)"
                .into()
        )
    );
}

#[test]
fn the_budgets_a_drain_asks_and_fresh_ones_in_their_place() {
    let budgets = Budgets::new([
        budget("shop", "web", "app=web", 0),
        budget("shop", "db", "app=db", 0),
        budget("other", "web", "app=web", 0),
    ]);
    let mut leaves = pod("shop", "agent", "db");
    leaves.daemon_set = true;
    let pods = [
        pod("shop", "web-1", "web"),
        pod("shop", "web-2", "web"),
        leaves,
    ];
    let asked: Vec<(&str, &str)> = budgets
        .asked_by(&pods)
        .iter()
        .map(|b| (b.namespace.as_str(), b.name.as_str()))
        .collect();
    assert_eq!(
        asked,
        [("shop", "web")],
        "each once, none for a pod the drain leaves"
    );
    let fresh = budgets.with_fresh(
        vec![budget("shop", "web", "app=web", 1)],
        &[("shop".into(), "db".into())],
    );
    assert_eq!(fresh.len(), 2);
    assert_eq!(fresh.get("shop", "web").unwrap().disruptions_allowed, 1);
    assert!(fresh.get("shop", "db").is_none());
    assert_eq!(check(&fresh, &pods[..1]), Ok(()));
}

/// A node's pods: (app index, ready, daemon set).
type NodePods = Vec<(usize, bool, bool)>;

fn fleet() -> impl Strategy<Value = (Vec<i32>, Vec<NodePods>)> {
    (
        prop::collection::vec(-1i32..3, 1..4),
        prop::collection::vec(
            prop::collection::vec((0usize..4, any::<bool>(), any::<bool>()), 0..4),
            1..6,
        ),
    )
}

proptest! {
    /// However nodes' pods share budgets, the nodes a decision lets start one after
    /// another never evict more healthy pods of a budget than it allows, counting each
    /// node as needing one: every start finds its budgets with room left by the ones
    /// before.
    #[test]
    fn starts_never_overdraw_a_budget((allowed, nodes) in fleet()) {
        let budgets = Budgets::new(allowed.iter().enumerate().map(|(i, &n)| {
            budget("ns", &format!("b{i}"), &format!("app=a{i}"), n)
        }));
        let pods: Vec<Vec<Pod>> = nodes
            .iter()
            .enumerate()
            .map(|(n, list)| {
                list.iter()
                    .enumerate()
                    .map(|(k, &(app, ready, daemon))| {
                        let mut p = pod("ns", &format!("n{n}-p{k}"), &format!("a{app}"));
                        p.ready = ready;
                        p.daemon_set = daemon;
                        p
                    })
                    .collect()
            })
            .collect();
        let mut h = Headroom::default();
        let mut used: BTreeMap<usize, i32> = BTreeMap::new();
        for (n, list) in pods.iter().enumerate() {
            // What the node's drain would need of each budget: its healthy pods, which a
            // drain evicts, under a budget that exists.
            let mut needs: BTreeMap<usize, i32> = BTreeMap::new();
            // (The budgets' applications are healthy enough: an unready pod goes without
            // using one.)
            for &(app, ready, daemon) in &nodes[n] {
                if !daemon && app < allowed.len() && ready {
                    *needs.entry(app).or_default() += 1;
                }
            }
            let fits = needs
                .keys()
                .all(|b| allowed[*b].max(0) - used.get(b).copied().unwrap_or(0) > 0);
            match h.check(&budgets, list) {
                Ok(()) => {
                    prop_assert!(fits, "node {n} started past a budget: {needs:?} used {used:?}");
                    h.take(&budgets, &format!("n{n}"), list, true);
                    for (b, k) in needs {
                        *used.entry(b).or_default() += k;
                    }
                }
                Err(_) => prop_assert!(
                    !fits,
                    "node {n} held though every budget had room: {needs:?} used {used:?}"
                ),
            }
        }
    }
}
