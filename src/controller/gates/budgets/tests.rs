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

// ---------------------------------------------------------------------------------------
// The budgets read again before a start, against a stand-in API answering the GET

/// A gate whose client goes to a stand-in answering every request with `status` and
/// `body`; the requests' paths, as seen.
fn gate_answering(
    status: u16,
    body: serde_json::Value,
) -> (BudgetGate, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let record = record.clone();
        let body = body.clone();
        async move {
            record.lock().unwrap().push(req.uri().path().to_string());
            let answer = http::Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    body.to_string(),
                )))
                .expect("a response");
            Ok::<_, kube::Error>(answer)
        }
    });
    let metrics = Arc::new(Metrics::new());
    let sources = super::super::super::sources::Sources::new(Arc::default(), metrics.clone());
    let source = sources.add(
        Gate::PodDisruptionBudgets,
        "the PodDisruptionBudgets",
        Hints::default(),
        WATCHED,
    );
    let gate = BudgetGate {
        store: reflector::store::<SlimBudget>().0,
        built: None,
        client: Client::new(service, "default"),
        source,
        metrics,
    };
    (gate, seen)
}

fn web_pod() -> Pod {
    Pod {
        namespace: "shop".into(),
        name: "web-0".into(),
        labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
        phase: Phase::Running,
        terminating: false,
        ready: true,
        daemon_set: false,
        mirror: false,
    }
}

fn frontend(allowed: i32) -> serde_json::Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": { "name": "frontend", "namespace": "shop", "generation": 1,
                      "resourceVersion": "9" },
        "spec": { "selector": { "matchLabels": { "app": "web" } } },
        "status": { "disruptionsAllowed": allowed, "currentHealthy": 3, "desiredHealthy": 2,
                    "observedGeneration": 1 },
    })
}

/// The watch's copy says one disruption is allowed; the API server says none now (an
/// eviction on a node in progress took it a moment ago). The start reads it again: the
/// fresh copy replaces the stale one, and the decision then holds the node.
#[tokio::test]
async fn a_start_reads_its_budgets_again_and_a_stale_copy_is_replaced() {
    let stale = Budgets::new([budget(frontend(1))]);
    let (gate, seen) = gate_answering(200, frontend(0));
    let pods = [web_pod()];
    let found = gate.confirm(&stale, &[&pods]).await;
    assert_eq!(
        *seen.lock().unwrap(),
        ["/apis/policy/v1/namespaces/shop/poddisruptionbudgets/frontend"]
    );
    let fresh = found.fresh.expect("the fresh copy");
    assert_eq!(
        fresh.get("shop", "frontend").unwrap().disruptions_allowed,
        0
    );
    assert!(found.unread.is_empty());
    // The same answer as the cache: nothing to replace.
    let (gate, _) = gate_answering(200, frontend(1));
    assert!(gate.confirm(&stale, &[&pods]).await.fresh.is_none());
}

/// A budget that cannot be read again holds the nodes whose drain asks it, naming why:
/// its cached copy does not decide.
#[tokio::test]
async fn a_budget_that_cannot_be_read_again_holds_the_start() {
    let stale = Budgets::new([budget(frontend(1))]);
    let refusal = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 403,
        "reason": "Forbidden",
        "message": "poddisruptionbudgets.policy \"frontend\" is forbidden: User \"kumaco\" cannot get resource",
    });
    let (gate, _) = gate_answering(403, refusal);
    let pods = [web_pod()];
    let found = gate.confirm(&stale, &[&pods]).await;
    assert!(found.fresh.is_none());
    let [((ns, name), error)] = &found.unread[..] else {
        panic!("{:?}", found.unread);
    };
    assert_eq!((ns.as_str(), name.as_str()), ("shop", "frontend"));
    assert_eq!(error.failure, Failure::Forbidden);
    let hold = unreadable(error, None);
    assert_eq!(hold.reason, reasons::GATE_UNAVAILABLE);
    assert!(
        hold.message.starts_with(
            "the PodDisruptionBudget gate cannot read what a drain of this node meets \
             (forbidden), so no maintenance starts: reading PodDisruptionBudget \
             shop/frontend again before the start: "
        ) && hold
            .message
            .contains("kumaco needs `list watch` on poddisruptionbudgets"),
        "{}",
        hold.message
    );
}
