use serde_json::json;

use kube::api::{ApiResource, GroupVersionKind};

use super::*;
use crate::conditions::MAX_MESSAGE_BYTES;
use crate::config::gates::parse_check;

fn run(expression: &str, object: serde_json::Value) -> Outcome {
    let check = parse_check(&format!("v1 ConfigMap ns/a: {expression}")).unwrap();
    evaluate(&Arc::new(cel::Env::stdlib()), &check.program, &object)
}

fn cluster() -> serde_json::Value {
    json!({
        "apiVersion": "postgresql.cnpg.io/v1",
        "kind": "Cluster",
        "metadata": { "name": "pg", "namespace": "db", "labels": { "app": "pg" } },
        "spec": { "instances": 3 },
        "status": {
            "readyInstances": 3,
            "phase": "Cluster in healthy state",
            "conditions": [{ "type": "Ready", "status": "True" }],
            "ratio": 0.5,
        },
    })
}

#[test]
fn true_false_and_the_object_as_kubernetes_cel_reads_it() {
    let c = cluster();
    for holds in [
        "object.status.readyInstances == object.spec.instances",
        "object.status.readyInstances == 3",
        "object.status.readyInstances - 1 == 2",
        "object.status.ratio < 1.0",
        "object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')",
        "object.metadata.labels.app == 'pg' && object.kind == 'Cluster'",
        "has(object.status.phase) && !has(object.status.missing)",
        "object.status.phase.matches('^Cluster in healthy')",
    ] {
        assert_eq!(run(holds, c.clone()), Outcome::Holds, "{holds}");
    }
    for false_ in [
        "object.status.readyInstances > object.spec.instances",
        "object.status.conditions.all(c, c.status == 'False')",
    ] {
        assert_eq!(run(false_, c.clone()), Outcome::False, "{false_}");
    }
}

#[test]
fn errors_and_results_that_are_not_bools_say_what_failed() {
    let c = cluster();
    let Outcome::Error(e) = run("object.status.ceph.health == 'HEALTH_OK'", c.clone()) else {
        panic!("a missing field is an error")
    };
    assert_eq!(e, "No such key: ceph");
    let Outcome::Error(e) = run("object.status.phase > 1", c.clone()) else {
        panic!("a wrong type is an error")
    };
    assert_eq!(
        e,
        "found no matching overload for '_>_' applied to '(string, int)'"
    );
    let Outcome::Error(e) = run("object.status.phase", c.clone()) else {
        panic!("a string is not a verdict")
    };
    assert_eq!(e, "the result is a string, not a bool");
    let Outcome::Error(e) = run("object.spec.instances", c) else {
        panic!("an int is not a verdict")
    };
    assert_eq!(e, "the result is a int, not a bool");
}

fn outcomes<'a>(list: &[(&str, &'a Outcome)]) -> Vec<(String, &'a Outcome)> {
    list.iter().map(|(n, o)| (n.to_string(), *o)).collect()
}

#[test]
fn a_named_object_fails_when_false_failing_or_absent() {
    let check = parse_check(
        r#"ceph.rook.io/v1 CephCluster rook-ceph/rook-ceph: object.status.ceph.health == "HEALTH_OK""#,
    )
    .unwrap();
    let at = "rook-ceph/rook-ceph";
    assert_eq!(hold(&check, &outcomes(&[(at, &Outcome::Holds)])), None);
    let h = hold(&check, &outcomes(&[(at, &Outcome::False)])).unwrap();
    assert_eq!(h.reason, reasons::HEALTH_CHECK_FAILED);
    assert_eq!(
        h.message,
        r#"CephCluster rook-ceph/rook-ceph: object.status.ceph.health == "HEALTH_OK" is false"#
    );
    let error = Outcome::Error("No such key: ceph".into());
    let h = hold(&check, &outcomes(&[(at, &error)])).unwrap();
    assert_eq!(
        h.message,
        r#"CephCluster rook-ceph/rook-ceph: object.status.ceph.health == "HEALTH_OK" failed: No such key: ceph"#
    );
    let h = hold(&check, &[]).unwrap();
    assert_eq!(h.message, "CephCluster rook-ceph/rook-ceph: not found");
}

#[test]
fn every_object_a_selector_matches_must_hold_and_none_matching_holds() {
    let check = parse_check(
        "postgresql.cnpg.io/v1 Cluster db -l app=pg: object.status.readyInstances == object.spec.instances",
    )
    .unwrap();
    assert_eq!(hold(&check, &[]), None, "none matching holds");
    let all = outcomes(&[("db/a", &Outcome::Holds), ("db/b", &Outcome::Holds)]);
    assert_eq!(hold(&check, &all), None);
    let error = Outcome::Error("No such key: readyInstances".into());
    let some = outcomes(&[
        ("db/a", &Outcome::Holds),
        ("db/b", &error),
        ("db/c", &Outcome::False),
    ]);
    assert_eq!(
        hold(&check, &some).unwrap().message,
        "Cluster db/b (2 of 3 matching -l app=pg fail): object.status.readyInstances == \
         object.spec.instances failed: No such key: readyInstances"
    );
}

#[test]
fn the_message_keeps_the_error_within_the_bound() {
    let long = format!("object.status.phase == '{}'", "x".repeat(3000));
    let check = parse_check(&format!("v1 ConfigMap ns/a: {long}")).unwrap();
    let error = Outcome::Error(format!("No such key: status {}", "y".repeat(2000)));
    let h = hold(&check, &outcomes(&[("ns/a", &error)])).unwrap();
    assert!(h.message.len() <= MAX_MESSAGE_BYTES, "{}", h.message.len());
    assert!(
        h.message.contains("failed: No such key: status"),
        "{}",
        h.message
    );
}

fn thing(name: &str, health: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": { "name": name, "namespace": "ns", "labels": { "app": "x" } },
        "status": { "health": health },
    }))
    .unwrap()
}

/// An object is evaluated when the watch brings a new version of it, not at every
/// refresh (a pass, another check's change).
#[test]
fn only_a_changed_object_is_evaluated_again() {
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Thing");
    let mut cache = reflector::store::Writer::new(ApiResource::from_gvk(&gvk));
    let mut watched = Watched {
        check: parse_check("example.com/v1 Thing ns -l app=x: object.status.health == 'OK'")
            .unwrap(),
        store: cache.as_reader(),
        evaluated: Vec::new(),
        published: None,
    };
    let env = Arc::new(cel::Env::stdlib());
    let metrics = Metrics::new();
    let reads = || {
        let labels = crate::metrics::GateReadLabels {
            gate: Gate::ObjectChecks.name().into(),
            result: "ok".into(),
        };
        metrics.gates.reads.get_or_create(&labels).get()
    };
    cache.apply_watcher_event(&watcher::Event::Apply(thing("a", "OK")));
    assert_eq!(watched.refresh(&env, &metrics), None);
    assert_eq!(watched.refresh(&env, &metrics), None);
    assert_eq!(reads(), 1, "evaluated once");

    cache.apply_watcher_event(&watcher::Event::Apply(thing("b", "WARN")));
    let held = watched.refresh(&env, &metrics).unwrap();
    assert_eq!(
        held.message,
        "Thing ns/b (1 of 2 matching -l app=x fail): object.status.health == 'OK' is false"
    );
    assert_eq!(reads(), 2, "only b evaluated");
    cache.apply_watcher_event(&watcher::Event::Apply(thing("a", "OK")));
    assert!(watched.refresh(&env, &metrics).is_some());
    assert_eq!(reads(), 3, "a's new version evaluated");

    cache.apply_watcher_event(&watcher::Event::Delete(thing("b", "WARN")));
    assert_eq!(watched.refresh(&env, &metrics), None);
    assert_eq!(reads(), 3);
}
