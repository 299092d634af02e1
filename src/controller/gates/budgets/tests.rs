use serde_json::json;

use super::*;

fn budget(v: serde_json::Value) -> Budget {
    serde_json::from_value::<SlimBudget>(v).unwrap().budget
}

#[test]
fn a_budget_decodes_as_the_eviction_api_reads_it() {
    let b = budget(json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": { "name": "frontend", "namespace": "shop", "generation": 4,
                      "resourceVersion": "7", "annotations": { "x": "y" } },
        "spec": {
            "minAvailable": 2,
            "selector": { "matchLabels": { "app": "web" },
                          "matchExpressions": [{ "key": "tier", "operator": "In",
                                                 "values": ["front"] }] },
            "unhealthyPodEvictionPolicy": "AlwaysAllow"
        },
        "status": { "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
                    "expectedPods": 3, "observedGeneration": 3,
                    "conditions": [{ "type": "DisruptionAllowed", "status": "True" }] }
    }));
    assert_eq!(
        (b.namespace.as_str(), b.name.as_str()),
        ("shop", "frontend")
    );
    assert_eq!(
        b.selector.unwrap().to_string(),
        "app=web,tier in (front)",
        "as LabelSelectorAsSelector makes it"
    );
    assert_eq!(b.disruptions_allowed, 1);
    assert_eq!((b.current_healthy, b.desired_healthy), (3, 2));
    assert_eq!(b.behind, Some((3, 4)), "status behind the spec");
    assert!(b.always_allow_unhealthy);
}

#[test]
fn a_nil_or_invalid_selector_selects_nothing_and_an_empty_one_everything() {
    let meta = json!({ "name": "b", "namespace": "ns", "generation": 1 });
    let status = json!({ "observedGeneration": 1 });
    let nil = budget(json!({ "metadata": meta, "spec": {}, "status": status }));
    assert_eq!(nil.selector, None);
    assert_eq!(nil.behind, None);
    let invalid = budget(json!({ "metadata": meta, "status": status, "spec": {
        "selector": { "matchExpressions": [{ "key": "app", "operator": "Equals" }] } } }));
    assert_eq!(invalid.selector, None);
    let empty = budget(json!({ "metadata": meta, "status": status, "spec": { "selector": {} } }));
    assert!(empty.selector.unwrap().is_everything());
    // A budget the disruption controller has not seen yet: no status at all.
    let new = budget(json!({ "metadata": meta, "spec": { "selector": {} } }));
    assert_eq!((new.disruptions_allowed, new.behind), (0, Some((0, 1))));
}

#[test]
fn a_listed_pod_says_what_a_drain_needs() {
    let pod = |v: serde_json::Value| serde_json::from_value::<ListedPod>(v).unwrap().pod;
    let p = pod(json!({
        "metadata": { "name": "web-1", "namespace": "shop", "labels": { "app": "web" },
                      "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet",
                                            "name": "web", "uid": "u", "controller": true }] },
        "spec": { "nodeName": "n1", "containers": [{ "name": "c", "image": "i" }] },
        "status": { "phase": "Running",
                    "conditions": [{ "type": "Ready", "status": "True" },
                                   { "type": "PodScheduled", "status": "True" }] }
    }));
    assert_eq!((p.namespace.as_str(), p.name.as_str()), ("shop", "web-1"));
    assert_eq!(p.labels["app"], "web");
    assert_eq!(p.phase, Phase::Running);
    assert!(p.ready && !p.terminating && !p.daemon_set && !p.mirror);
    assert!(p.asks_budget());
    let ds = pod(json!({
        "metadata": { "name": "agent", "namespace": "kube-system",
                      "ownerReferences": [{ "kind": "DaemonSet", "name": "a", "controller": true }] },
        "status": { "phase": "Running" }
    }));
    assert!(ds.daemon_set && !ds.ready && !ds.asks_budget());
    let mirror = pod(json!({
        "metadata": { "name": "etcd-n1", "namespace": "kube-system",
                      "annotations": { "kubernetes.io/config.mirror": "abc" } },
        "status": { "phase": "Running" }
    }));
    assert!(mirror.mirror && !mirror.asks_budget());
    let leaving = pod(json!({
        "metadata": { "name": "web-2", "namespace": "shop",
                      "deletionTimestamp": "2026-12-04T10:00:00Z" },
        "status": { "phase": "Running" }
    }));
    assert!(leaving.terminating && !leaving.asks_budget());
    let done = pod(json!({ "metadata": { "name": "job", "namespace": "ci" },
                           "status": { "phase": "Succeeded" } }));
    assert!(!done.asks_budget());
}
