use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;

use super::UninstallError;
use super::instance::{live_holder, shadow_report, target};
use super::removals::{kumaco_managers_seen, removals, removals_table};
use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS as IN_PROGRESS, Status};
use crate::node::SlimNode;
use crate::node::names::Names;
use crate::peers::{LeaseRef, Owner};

fn node(name: &str, conditions: &[(&str, Status)], owners: &[(&str, &[&str])]) -> SlimNode {
    let mut n = SlimNode::default();
    n.metadata.name = Some(name.into());
    n.conditions = conditions
        .iter()
        .map(|(ty, status)| Condition {
            type_: ty.to_string(),
            status: *status,
            reason: String::new(),
            message: String::new(),
            last_transition_time: None,
            last_heartbeat_time: None,
        })
        .collect();
    n.status_owners = owners
        .iter()
        .map(|(manager, types)| Owner {
            manager: manager.to_string(),
            types: types.iter().map(|t| t.to_string()).collect(),
            time: None,
        })
        .collect();
    n
}

const ME: &str = "kumaco/kumaco/kumaco";

#[test]
fn removes_what_the_manager_alone_owns_and_names_the_rest() {
    let nodes = [
        node(
            "a",
            &[
                ("kured.dev/UnderMaintenance", Status::True),
                (IN_PROGRESS, Status::True),
            ],
            // Sorted, as managedFields are read.
            &[(ME, &[IN_PROGRESS, "kured.dev/UnderMaintenance"])],
        ),
        node("b", &[("Ready", Status::True)], &[("kubelet", &["Ready"])]),
        node(
            "c",
            &[("kured.dev/UnderMaintenance", Status::False)],
            &[
                (ME, &["kured.dev/UnderMaintenance"]),
                ("kumaco/kumaco/other", &["kured.dev/UnderMaintenance"]),
            ],
        ),
    ];
    let plan = removals(&nodes, ME, &Names::default());
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert_eq!(plan[0].node, "a");
    assert_eq!(plan[0].removed.len(), 2);
    assert!(plan[0].in_progress);
    assert_eq!(plan[1].node, "c");
    assert!(plan[1].removed.is_empty());
    assert_eq!(plan[1].kept, ["kured.dev/UnderMaintenance"]);
    let table = removals_table(&plan);
    assert!(
        table.contains("a     MaintenanceInProgress=True"),
        "{table}"
    );
    assert!(
        table.contains("(kept, owned by another manager too"),
        "{table}"
    );
}

#[test]
fn another_managers_conditions_are_never_listed() {
    let nodes = [node(
        "a",
        &[(IN_PROGRESS, Status::True)],
        &[("kumaco/kumaco/other", &[IN_PROGRESS])],
    )];
    assert!(removals(&nodes, ME, &Names::default()).is_empty());
}

fn lease_ref(namespace: &str, name: &str) -> LeaseRef {
    LeaseRef {
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[test]
fn the_namespace_is_given_or_named_by_the_field_manager_never_assumed() {
    let own = target(Some("ops"), None, None).unwrap();
    assert_eq!(own.lease, lease_ref("ops", "kumaco"));
    assert_eq!(own.manager, "kumaco/ops/kumaco");
    assert_eq!(own.writer, None);

    let named = target(None, None, Some("kumaco/ops/pool-a")).unwrap();
    assert_eq!(named.lease, lease_ref("ops", "pool-a"));
    assert_eq!(named.writer, None);

    let err = target(None, Some("pool-a"), None).unwrap_err().to_string();
    assert!(err.starts_with("--lease-namespace: needed"), "{err}");
    assert!(err.contains("No namespace is assumed"), "{err}");
    // A manager that names no Lease says nothing of the namespace either.
    assert!(target(None, None, Some("kumaco")).is_err());
}

#[test]
fn a_field_manager_naming_another_lease_has_that_instance_as_its_writer() {
    // A shadow release given the live release's field manager.
    let shadow = target(
        Some("kumaco"),
        Some("kumaco-shadow"),
        Some("kumaco/kumaco/kumaco"),
    )
    .unwrap();
    assert_eq!(shadow.lease, lease_ref("kumaco", "kumaco-shadow"));
    assert_eq!(shadow.writer, Some(lease_ref("kumaco", "kumaco")));
    let report = shadow_report(&shadow);
    assert!(
        report.contains("the instance of Lease kumaco/kumaco-shadow is a shadow"),
        "{report}"
    );
    assert!(
        report.contains("written by the instance of Lease kumaco/kumaco"),
        "{report}"
    );
    // A custom manager names no Lease: only the instance's own can be checked.
    let pinned = target(Some("kumaco"), None, Some("kumaco")).unwrap();
    assert_eq!(pinned.writer, None);
}

fn lease(holder: Option<&str>, renewed: &str, seconds: i32) -> Lease {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "kumaco", "namespace": "kumaco" },
        "spec": { "holderIdentity": holder, "leaseDurationSeconds": seconds,
                  "renewTime": renewed },
    }))
    .unwrap()
}

#[test]
fn a_lease_is_live_while_held_and_renewed_within_its_duration_and_grace() {
    let now: Timestamp = "2026-12-01T00:01:00Z".parse().unwrap();
    let renewed = "2026-12-01T00:00:50.000000Z";
    assert_eq!(
        live_holder(&lease(Some("pod-a"), renewed, 15), now),
        Some("pod-a".into())
    );
    // Released on shutdown: no holder.
    assert_eq!(live_holder(&lease(None, renewed, 15), now), None);
    assert_eq!(live_holder(&lease(Some(""), renewed, 15), now), None);
    // Renewed 10 s ago with a 15 s duration: live until 15 s of grace have passed too.
    let later = |s: i64| now + jiff::SignedDuration::from_secs(s);
    assert!(live_holder(&lease(Some("pod-a"), renewed, 15), later(19)).is_some());
    assert_eq!(
        live_holder(&lease(Some("pod-a"), renewed, 15), later(20)),
        None
    );
}

#[test]
fn nothing_found_names_what_was_looked_for_and_what_the_nodes_carry() {
    let nodes = [
        node("a", &[(IN_PROGRESS, Status::True)], &[(ME, &[IN_PROGRESS])]),
        node("b", &[("Ready", Status::True)], &[("kubelet", &["Ready"])]),
    ];
    let error = UninstallError::NothingFound {
        lease: "kumaco-typo/kumaco".into(),
        manager: "kumaco/kumaco-typo/kumaco".into(),
        nodes: nodes.len(),
        seen: kumaco_managers_seen(&nodes),
    };
    assert_eq!(error.exit_code(), 3);
    let text = error.to_string();
    for part in [
        "no Lease kumaco-typo/kumaco",
        "none of the 2 node(s) carries a condition of field manager \"kumaco/kumaco-typo/kumaco\"",
        "The kumaco field managers on the nodes are \"kumaco/kumaco/kumaco\".",
        "--ignore-not-found",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    assert_eq!(
        kumaco_managers_seen(&nodes[1..]),
        "No node carries a condition of any kumaco field manager."
    );
    let refused = UninstallError::AnotherWriterRuns {
        manager: ME.into(),
        writer: "kumaco/kumaco".into(),
        holder: "kumaco-7d9f-x1".into(),
        lease: "kumaco/kumaco-shadow".into(),
    };
    assert_eq!(refused.exit_code(), 1);
    assert!(
        refused
            .to_string()
            .contains("Lease kumaco/kumaco, which is held by \"kumaco-7d9f-x1\""),
        "{refused}"
    );
}
