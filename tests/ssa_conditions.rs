//! Pins the write mechanism kumaco uses for node conditions, on a real API server:
//! server-side apply on `nodes/status`, one field manager per writer, each owning only
//! the condition entries it applies.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use kumaco::conditions::{self, Condition, Desired, UNDER_MAINTENANCE};
use kumaco::node::{Names, condition_from_json, condition_json};
use testkit::nodes::{condition, create_node, set_condition};
use testkit::time::ts;
use testkit::{ApiServer, Scope};

const REBOOT_REQUIRED: &str = "kured.dev/RebootRequired";

/// Applies exactly `conds` as field manager `manager` (force: kumaco owns its types).
async fn apply(api: &Api<Node>, node: &str, manager: &str, conds: &[Condition]) -> Node {
    let conds: Vec<_> = conds
        .iter()
        .map(|c| condition_json(c, &Names::default()))
        .collect();
    let body = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": node },
        "status": { "conditions": conds },
    });
    api.patch_status(
        node,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(body),
    )
    .await
    .unwrap_or_else(|e| panic!("apply as {manager} on {node}: {e}"))
}

/// The condition types listed under `f:status.f:conditions` of `manager`'s managed
/// fields for the status subresource.
fn owned_condition_types(node: &Node, manager: &str) -> Vec<String> {
    let mut types = Vec::new();
    for entry in node.metadata.managed_fields.iter().flatten() {
        if entry.manager.as_deref() != Some(manager)
            || entry.subresource.as_deref() != Some("status")
        {
            continue;
        }
        let Some(fields) = &entry.fields_v1 else {
            continue;
        };
        let Some(conds) = fields
            .0
            .pointer("/f:status/f:conditions")
            .and_then(|v| v.as_object())
        else {
            continue;
        };
        for key in conds.keys() {
            // Keys look like k:{"type":"kured.dev/UnderMaintenance"}.
            if let Some(k) = key.strip_prefix("k:")
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(k)
                && let Some(t) = v["type"].as_str()
            {
                types.push(t.to_string());
            }
        }
    }
    types.sort();
    types
}

fn desired(status: bool, message: &str) -> Desired {
    let reason = if status {
        "MaintenanceWindow"
    } else {
        "NoActiveMaintenanceWindow"
    };
    Desired::new(UNDER_MAINTENANCE, status, reason, message.into())
}

/// The API's condition as kumaco's cache reads it.
fn read(c: &NodeCondition) -> Condition {
    condition_from_json(serde_json::to_value(c).unwrap(), &Names::default())
        .unwrap()
        .expect("one of kumaco's names")
}

#[tokio::test]
async fn server_side_apply_owns_only_kumacos_conditions() {
    let server = ApiServer::shared();
    let client = server.client().await.unwrap();
    let scope = Scope::new("ssa");
    let node = create_node(&client, &scope, "n1", &[], &[]).await.unwrap();
    let name = node.metadata.name.clone().unwrap();
    let api: Api<Node> = Api::all(client.clone());

    // kumaco applies its condition.
    let t1 = ts("2026-03-01T10:00:00Z");
    let ours = conditions::to_apply(&desired(true, "window a"), None, t1);
    apply(&api, &name, "kumaco", std::slice::from_ref(&ours)).await;

    // Another agent applies a different condition type under its own manager.
    set_condition(&client, &name, REBOOT_REQUIRED, "True", "reboot-reporter")
        .await
        .unwrap();

    let node = api.get_status(&name).await.unwrap();
    assert_eq!(
        condition(&node, UNDER_MAINTENANCE).map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        condition(&node, REBOOT_REQUIRED).map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(owned_condition_types(&node, "kumaco"), [UNDER_MAINTENANCE]);
    assert_eq!(
        owned_condition_types(&node, "reboot-reporter"),
        [REBOOT_REQUIRED]
    );

    // Same status, new message: lastTransitionTime is kept.
    let existing = condition(&node, UNDER_MAINTENANCE).map(read);
    let t2 = ts("2026-03-01T11:00:00Z");
    let same = conditions::to_apply(&desired(true, "window a and b"), existing.as_ref(), t2);
    let node = apply(&api, &name, "kumaco", &[same]).await;
    let c = condition(&node, UNDER_MAINTENANCE).unwrap();
    assert_eq!(c.message.as_deref(), Some("window a and b"));
    assert_eq!(c.last_transition_time.as_ref().map(|t| t.0), Some(t1));
    assert_eq!(c.last_heartbeat_time, None);

    // Status change: lastTransitionTime moves.
    let t3 = ts("2026-03-01T12:00:00Z");
    let changed = conditions::to_apply(&desired(false, "ended"), Some(&read(c)), t3);
    let node = apply(&api, &name, "kumaco", &[changed]).await;
    let c = condition(&node, UNDER_MAINTENANCE).unwrap();
    assert_eq!(c.status, "False");
    assert_eq!(c.last_transition_time.as_ref().map(|t| t.0), Some(t3));
    // The other agent's condition is untouched by kumaco's applies.
    assert_eq!(
        condition(&node, REBOOT_REQUIRED).map(|c| c.status.as_str()),
        Some("True")
    );

    // Applying without our condition removes ours and leaves theirs.
    let node = apply(&api, &name, "kumaco", &[]).await;
    assert!(
        condition(&node, UNDER_MAINTENANCE).is_none(),
        "{:?}",
        node.status
    );
    assert_eq!(
        condition(&node, REBOOT_REQUIRED).map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        owned_condition_types(&node, "reboot-reporter"),
        [REBOOT_REQUIRED]
    );
}

#[tokio::test]
async fn harness_waits_for_a_condition_by_watching() {
    let server = ApiServer::shared();
    let client = server.client().await.unwrap();
    let scope = Scope::new("wait");
    let node = create_node(
        &client,
        &scope,
        "n1",
        &[("zone", "a")],
        &[(REBOOT_REQUIRED, "False")],
    )
    .await
    .unwrap();
    let name = node.metadata.name.clone().unwrap();
    assert_eq!(node.metadata.labels.as_ref().unwrap()["zone"], "a");

    let waiter = {
        let client = client.clone();
        let name = name.clone();
        tokio::spawn(async move {
            testkit::nodes::wait_for_condition(
                &client,
                &name,
                REBOOT_REQUIRED,
                Duration::from_secs(20),
                |c| testkit::nodes::has_status(c, Some("True")),
            )
            .await
        })
    };
    set_condition(&client, &name, REBOOT_REQUIRED, "True", "reboot-reporter")
        .await
        .unwrap();
    waiter.await.unwrap().unwrap();

    // And a deadline that passes is an error naming what was awaited.
    let err = testkit::nodes::wait_for_condition(
        &client,
        &name,
        "never/Set",
        Duration::from_millis(300),
        |c| c.is_some(),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("never/Set"), "{err}");
}

/// A `resourceVersion` in the applied object is a precondition: an apply derived from a
/// version the node has moved past is refused with 409, whoever moved it. kumaco's
/// writes carry the version they were derived from, so one that reaches the API server
/// late (held by the network past its timeout, after another leader wrote the node)
/// cannot undo the newer state.
#[tokio::test]
async fn an_apply_with_an_old_resource_version_is_refused() {
    let server = ApiServer::shared();
    let client = server.client().await.unwrap();
    let scope = Scope::new("ssa-precondition");
    let created = create_node(&client, &scope, "a", &[], &[]).await.unwrap();
    let node = created.metadata.name.clone().unwrap();
    let api: Api<Node> = Api::all(client.clone());
    let um = |status| Condition {
        type_: UNDER_MAINTENANCE.into(),
        status,
        reason: "MaintenanceWindow".into(),
        message: "test".into(),
        last_transition_time: Some(Timestamp::now()),
        last_heartbeat_time: None,
    };
    let version_of = |n: &Node| n.metadata.resource_version.clone().unwrap();
    let before = version_of(&api.get(&node).await.unwrap());
    // Someone else changes the node (a kubelet's report).
    set_condition(&client, &node, REBOOT_REQUIRED, "True", "kubelet")
        .await
        .unwrap();
    let apply_at = |version: String, status| {
        let body = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": node, "resourceVersion": version },
            "status": { "conditions": [condition_json(&um(status), &Names::default())] },
        });
        let api = api.clone();
        let node = node.clone();
        async move {
            api.patch_status(
                &node,
                &PatchParams::apply("kumaco-test").force(),
                &Patch::Apply(body),
            )
            .await
        }
    };
    match apply_at(before, conditions::Status::True).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409, "{e:?}"),
        other => panic!("an apply at an old resourceVersion was not refused: {other:?}"),
    }
    let now = version_of(&api.get(&node).await.unwrap());
    let written = apply_at(now, conditions::Status::True)
        .await
        .expect("an apply at the current resourceVersion");
    assert!(condition(&written, UNDER_MAINTENANCE).is_some());
}
