use super::*;
use serde_json::json;
use std::sync::Arc;

fn full_node() -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n",
            "resourceVersion": "42",
            "uid": "u",
            "labels": { "zone": "a" },
            "annotations": { "big": "x" },
            "managedFields": [
                { "manager": "kumaco", "operation": "Apply", "subresource": "status",
                  "fieldsType": "FieldsV1", "time": "2026-01-01T00:00:07Z",
                  "fieldsV1": { "f:status": { "f:conditions": {
                      "k:{\"type\":\"kured.dev/UnderMaintenance\"}": { ".": {}, "f:status": {} },
                      "k:{\"type\":\"MaintenanceInProgress\"}": { ".": {}, "f:status": {} },
                      "k:{\"type\":\"MaintenancePlanned\"}": { ".": {}, "f:type": {} } } } } },
                { "manager": "agent", "operation": "Apply", "subresource": "status",
                  "fieldsType": "FieldsV1",
                  "fieldsV1": { "f:status": { "f:conditions": {
                      "k:{\"type\":\"kured.dev/RebootRequired\"}": { ".": {}, "f:status": {} } } } } },
                { "manager": "kumaco/other/x", "operation": "Apply", "subresource": "status",
                  "fieldsType": "FieldsV1", "time": "2026-01-01T00:00:09Z",
                  "fieldsV1": { "f:status": { "f:conditions": {
                      "k:{\"type\":\"kured.dev/UnderMaintenance\"}": { ".": {}, "f:status": {} } } } } },
                { "manager": "kumaco", "operation": "Update",
                  "fieldsType": "FieldsV1",
                  "fieldsV1": { "f:metadata": { "f:labels": {} } } }
            ]
        },
        "spec": { "podCIDR": "10.0.0.0/24", "taints": [{ "key": "k", "effect": "NoSchedule" }] },
        "status": {
            "conditions": [
                { "type": "Ready", "status": "True", "reason": "KubeletReady",
                  "lastTransitionTime": "2026-01-01T00:00:00Z" }
            ],
            "images": [{ "names": ["a", "b"], "sizeBytes": 1 }],
            "nodeInfo": { "kubeletVersion": "v1.37.2" }
        }
    })
}

#[test]
fn keeps_what_kumaco_reads_and_nothing_else() {
    let node: SlimNode = serde_json::from_value(full_node()).unwrap();
    assert_eq!(node.metadata.name.as_deref(), Some("n"));
    assert_eq!(node.resource_version(), Some(42));
    assert_eq!(node.labels.label("zone"), Some("a"));
    assert_eq!(node.labels.len(), 1);
    assert_eq!(node.metadata.uid.as_deref(), Some("u"));
    assert!(node.metadata.annotations.is_none());
    assert_eq!(node.conditions.len(), 1);
    assert_eq!(node.conditions[0].type_, "Ready");
    // Owning a condition is owning its status: MaintenancePlanned's entry alone is
    // what a manager keeps after another overwrote its value.
    assert_eq!(
        node.owned_by("kumaco"),
        ["MaintenanceInProgress", "kured.dev/UnderMaintenance"]
    );
    assert_eq!(
        node.owner("kumaco").unwrap().time,
        Some("2026-01-01T00:00:07Z".parse().unwrap())
    );
    assert_eq!(node.owned_by("agent"), ["kured.dev/RebootRequired"]);
    assert!(node.owned_by("nobody").is_empty());
}

#[test]
fn keep_only_drops_other_managers_and_unread_conditions() {
    let mut node: SlimNode = serde_json::from_value(full_node()).unwrap();
    for type_ in ["kured.dev/UnderMaintenance", "kured.dev/RebootRequired"] {
        node.conditions.push(Condition {
            type_: type_.into(),
            status: Status::True,
            reason: String::new(),
            message: String::new(),
            last_transition_time: None,
            last_heartbeat_time: None,
        });
    }
    node.keep_only("kumaco", &["kured.dev/RebootRequired".to_string()]);
    // The agent owns none of kumaco's conditions; another kumaco instance does.
    assert!(node.owned_by("agent").is_empty());
    let others: Vec<&str> = node.others("kumaco").map(|o| o.manager.as_str()).collect();
    assert_eq!(others, ["kumaco/other/x"]);
    assert_eq!(node.status_owners.len(), 2);
    let types: Vec<&str> = node.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        ["kured.dev/UnderMaintenance", "kured.dev/RebootRequired"]
    );
}

#[test]
fn only_changes_a_pass_reads_count() {
    let keys: HashSet<String> = ["zone".to_string()].into();
    let mut base: SlimNode = serde_json::from_value(full_node()).unwrap();
    base.keep_only("kumaco", &[]);
    let changed = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = full_node();
        edit(&mut v);
        let mut node: SlimNode = serde_json::from_value(v).unwrap();
        node.keep_only("kumaco", &[]);
        base.differs_for_pass(&node, &keys)
    };
    // A kubelet heartbeat, new images, an annotation, a label no selector names.
    assert!(!changed(&|v| {
        v["metadata"]["resourceVersion"] = "43".into();
        v["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:01:00Z".into();
        v["status"]["images"][0]["names"][0] = "c".into();
        v["metadata"]["annotations"]["big"] = "y".into();
        v["metadata"]["labels"]["other"] = "x".into();
    }));
    // A label a selector names, a condition kumaco owns, its ownership.
    assert!(changed(&|v| v["metadata"]["labels"]["zone"] = "b".into()));
    assert!(changed(&|v| {
        v["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({ "type": "kured.dev/UnderMaintenance", "status": "True" }))
    }));
    assert!(changed(
        &|v| v["metadata"]["managedFields"][0]["manager"] = "someone".into()
    ));
    // Availability: what it is and why, not how it reads.
    fn ready(v: &mut serde_json::Value) -> &mut serde_json::Value {
        v["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|c| c["type"] == "Ready")
            .unwrap()
    }
    assert!(changed(&|v| ready(v)["status"] = "False".into()));
    assert!(changed(&|v| ready(v)["status"] = "Unknown".into()));
    assert!(changed(&|v| v["spec"]["unschedulable"] = true.into()));
    assert!(!changed(
        &|v| ready(v)["reason"] = "KubeletReadyAgain".into()
    ));
    // KEP-5683's lifecycle conditions: a drain or a shutdown in progress makes the node
    // unavailable; a leftover `Drained=True` does not.
    let with = |type_: &'static str, status: &'static str| {
        move |v: &mut serde_json::Value| {
            v["status"]["conditions"]
                .as_array_mut()
                .unwrap()
                .push(json!({ "type": type_, "status": status }))
        }
    };
    assert!(changed(&with("DrainInProgress", "True")));
    assert!(changed(&with("GracefulNodeShutdownInProgress", "True")));
    assert!(!changed(&with("DrainInProgress", "False")));
    assert!(!changed(&with("Drained", "True")));
    let mut no_ready = full_node();
    no_ready["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .retain(|c| c["type"] != "Ready");
    let mut first_report: SlimNode = serde_json::from_value(no_ready).unwrap();
    first_report.keep_only("kumaco", &[]);
    assert!(
        !first_report.differs_for_pass(&base, &keys),
        "a node without Ready is available, as one Ready=True is"
    );
}

#[test]
fn labels_are_shared_between_nodes_and_decoded_from_text_as_written() {
    // From text (as the watch decodes), with an escaped value and a repeated key.
    let text =
        r#"{"metadata":{"name":"a","labels":{"zone":"eu\u002d1","os":"linux","zone":"eu-2"}}}"#;
    let a: SlimNode = serde_json::from_str(text).unwrap();
    assert_eq!(a.labels.label("zone"), Some("eu-2"));
    assert_eq!(a.labels.label("os"), Some("linux"));
    assert_eq!(a.labels.label("arch"), None);
    let b: SlimNode =
        serde_json::from_str(r#"{"metadata":{"name":"b","labels":{"os":"linux"}}}"#).unwrap();
    let value = |n: &SlimNode| n.labels.0[0].1.clone();
    assert!(Arc::ptr_eq(&value(&a), &value(&b)));
    let none: SlimNode =
        serde_json::from_str(r#"{"metadata":{"name":"c","labels":null}}"#).unwrap();
    assert!(none.labels.is_empty());
}

#[test]
fn a_drain_or_a_shutdown_in_progress_makes_the_node_unavailable() {
    let decode = |conditions: serde_json::Value| -> Option<crate::in_progress::Unavailable> {
        let mut v = full_node();
        v["status"]["conditions"] = conditions;
        let node: SlimNode = serde_json::from_value(v).unwrap();
        node.availability.unavailable()
    };
    use crate::in_progress::{Lifecycle, Unavailable};
    let ready = || json!({ "type": "Ready", "status": "True" });
    let drain = || json!({ "type": "DrainInProgress", "status": "True" });
    let shutdown = json!({ "type": "GracefulNodeShutdownInProgress", "status": "True" });
    let drained = json!({ "type": "Drained", "status": "True" });
    assert_eq!(decode(json!([ready(), drained])), None);
    assert_eq!(
        decode(json!([ready(), drain()])),
        Some(Unavailable::Disrupted(Lifecycle::Draining))
    );
    assert_eq!(
        decode(json!([ready(), drain(), shutdown])),
        Some(Unavailable::Disrupted(Lifecycle::ShuttingDown))
    );
    assert_eq!(
        decode(json!([{ "type": "Ready", "status": "False" }, drain()])),
        Some(Unavailable::NotReady),
        "a down node is the stronger news"
    );
}

#[test]
fn a_bare_node_decodes() {
    let node: SlimNode = serde_json::from_value(json!({ "metadata": { "name": "n" } })).unwrap();
    assert!(node.conditions.is_empty() && node.status_owners.is_empty());
    assert_eq!(node.resource_version(), None);
}

#[test]
fn agrees_with_the_full_node_on_conditions_and_labels() {
    let full: k8s_openapi::api::core::v1::Node = serde_json::from_value(full_node()).unwrap();
    let slim: SlimNode = serde_json::from_value(full_node()).unwrap();
    let full_conditions = full.status.unwrap().conditions.unwrap();
    assert_eq!(slim.conditions.len(), full_conditions.len());
    for (s, f) in slim.conditions.iter().zip(&full_conditions) {
        assert_eq!(s.type_, f.type_);
        assert_eq!(s.status.as_str(), f.status);
        assert_eq!(Some(&s.reason), f.reason.as_ref());
        assert_eq!(
            s.last_transition_time,
            f.last_transition_time.as_ref().map(|t| t.0)
        );
    }
    let full_labels = full.metadata.labels.unwrap();
    assert!(
        slim.labels
            .iter()
            .eq(full_labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    );
}

#[test]
fn conditions_round_trip_through_the_api_form() {
    let c = Condition {
        type_: "kured.dev/UnderMaintenance".into(),
        status: Status::False,
        reason: "R".into(),
        message: "m".into(),
        last_transition_time: Some("2026-01-01T00:00:00Z".parse().unwrap()),
        last_heartbeat_time: None,
    };
    let json = condition_json(&c, &Names::default());
    let wire = WireCondition::deserialize(&json).unwrap();
    assert_eq!(Condition::from(wire), c);
    let api: k8s_openapi::api::core::v1::NodeCondition =
        serde_json::from_value(condition_json(&c, &Names::default())).unwrap();
    assert_eq!(api.status, "False");
}

#[test]
fn reads_the_boot_id_and_the_heartbeats() {
    let mut v = full_node();
    v["status"]["nodeInfo"]["bootID"] = json!("b-1");
    v["status"]["conditions"][0]["lastHeartbeatTime"] = json!("2026-01-01T00:00:05Z");
    let node: SlimNode = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(node.boot_id.as_deref(), Some("b-1"));
    assert_eq!(
        node.conditions[0].last_heartbeat_time,
        Some("2026-01-01T00:00:05Z".parse().unwrap())
    );
    v["status"]["nodeInfo"]["bootID"] = json!("");
    let node: SlimNode = serde_json::from_value(v).unwrap();
    assert_eq!(node.boot_id, None, "an empty boot ID is none");
}

/// A reporter's heartbeat costs no pass, except on a node whose maintenance a reboot
/// ended: there a confirmed requirement may start the next one. A new boot ID always
/// counts.
#[test]
fn heartbeats_matter_only_after_a_reboot_and_boot_ids_always() {
    let keys = HashSet::new();
    let reboot = |heartbeat: &str, mip_reason: &str| SlimNode {
        conditions: vec![
            Condition {
                type_: "kured.dev/RebootRequired".into(),
                status: Status::True,
                reason: "R".into(),
                message: String::new(),
                last_transition_time: Some("2026-01-01T00:00:00Z".parse().unwrap()),
                last_heartbeat_time: Some(heartbeat.parse().unwrap()),
            },
            Condition {
                type_: "MaintenanceInProgress".into(),
                status: Status::False,
                reason: mip_reason.into(),
                message: String::new(),
                last_transition_time: Some("2026-01-01T00:00:30Z".parse().unwrap()),
                last_heartbeat_time: None,
            },
        ],
        ..SlimNode::default()
    };
    // The maintenance ended at 00:00:30.
    let (t0, t1, t2) = (
        "2026-01-01T00:00:10Z",
        "2026-01-01T00:01:00Z",
        "2026-01-01T00:02:00Z",
    );
    assert!(!reboot(t1, "WaitingForSlot").differs_for_pass(&reboot(t2, "WaitingForSlot"), &keys));
    assert!(
        reboot(t0, "NodeRebooted").differs_for_pass(&reboot(t1, "NodeRebooted"), &keys),
        "the first report after the end confirms the requirement"
    );
    assert!(
        !reboot(t1, "NodeRebooted").differs_for_pass(&reboot(t2, "NodeRebooted"), &keys),
        "later reports confirm nothing new"
    );
    let mut other_boot = reboot(t1, "WaitingForSlot");
    other_boot.boot_id = Some("b-2".into());
    assert!(reboot(t1, "WaitingForSlot").differs_for_pass(&other_boot, &keys));
}

#[test]
fn two_sets_of_names_in_one_process_read_one_node_each_their_way() {
    const KURED_MIP: &str = "kured.dev/maintenance-in-progress";
    const KURED_UM: &str = "kured.dev/under-maintenance-window";
    let mip = crate::conditions::MAINTENANCE_IN_PROGRESS;
    let text = json!({
        "metadata": { "name": "n", "managedFields": [
            { "manager": "kumaco", "subresource": "status", "fieldsV1": { "f:status": {
                "f:conditions": {
                    format!("k:{{\"type\":\"{KURED_MIP}\"}}"): { "f:status": {} },
                    format!("k:{{\"type\":\"{mip}\"}}"): { "f:status": {} } } } } }
        ] },
        "status": { "conditions": [
            { "type": KURED_MIP, "status": "True" },
            { "type": mip, "status": "False" },
            { "type": "Ready", "status": "True" }
        ] }
    })
    .to_string();
    let kured = Names::new(KURED_UM, KURED_MIP, &[]).unwrap();
    let defaults = Names::default();
    let read = |names: &Names| {
        let mut node: SlimNode = serde_json::from_str(&text).unwrap();
        node.rename(names);
        node
    };
    let (as_kured, as_default) = (read(&kured), read(&defaults));
    let types = |n: &SlimNode| -> Vec<(String, Status)> {
        n.conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status))
            .collect()
    };
    // Under kured's names the node is in progress, and the default-named condition is
    // someone else's; under the defaults it is not, and kured's is a foreign condition.
    assert_eq!(
        types(&as_kured),
        [
            (mip.to_string(), Status::True),
            ("Ready".into(), Status::True)
        ]
    );
    assert_eq!(as_kured.owned_by("kumaco"), [mip.to_string()]);
    assert_eq!(
        types(&as_default),
        [
            (KURED_MIP.to_string(), Status::True),
            (mip.to_string(), Status::False),
            ("Ready".into(), Status::True)
        ]
    );
    assert_eq!(
        as_default.owned_by("kumaco"),
        [mip.to_string(), KURED_MIP.to_string()]
    );
    // And back on the wire each under its own.
    let c = &as_kured.conditions[0];
    assert_eq!(condition_json(c, &kured)["type"], KURED_MIP);
    assert_eq!(condition_json(c, &defaults)["type"], mip);
}

mod lean_decode {
    //! The lean decoder against the API's own types: a node decoded from the watch's text
    //! is what a plain client's whole `Node` says of it, field by field, on generated
    //! nodes with fields kumaco does not read, escapes and odd managedFields keys.

    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use proptest::prelude::*;
    use serde_json::{Map, Value};
    use std::collections::BTreeMap;

    /// What kumaco reads of a whole `Node`, written out from the API's types.
    fn from_full(node: &Node) -> SlimNode {
        let m = &node.metadata;
        let mut owners: BTreeMap<String, Owner> = BTreeMap::new();
        for e in m.managed_fields.iter().flatten() {
            let (Some(manager), Some("status")) = (&e.manager, e.subresource.as_deref()) else {
                continue;
            };
            let o = owners.entry(manager.clone()).or_insert_with(|| Owner {
                manager: manager.clone(),
                types: Vec::new(),
                time: None,
            });
            o.time = o.time.max(e.time.as_ref().map(|t| t.0));
            let keys = e
                .fields_v1
                .as_ref()
                .and_then(|f| f.0.get("f:status")?.get("f:conditions")?.as_object());
            for (k, v) in keys.into_iter().flatten() {
                if v.get("f:status").is_none() {
                    continue;
                }
                let key = k
                    .strip_prefix("k:")
                    .and_then(|j| serde_json::from_str::<Value>(j).ok());
                if let Some(t) = key.as_ref().and_then(|j| j.get("type")?.as_str()) {
                    o.types.push(t.to_string());
                }
            }
            o.types.sort();
            o.types.dedup();
        }
        let status = node.status.as_ref();
        let conditions: Vec<Condition> = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| Condition {
                type_: c.type_.clone(),
                status: Status::from_api(&c.status),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                last_transition_time: c.last_transition_time.as_ref().map(|t| t.0),
                last_heartbeat_time: c.last_heartbeat_time.as_ref().map(|t| t.0),
            })
            .collect();
        let true_ = |t: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == t && c.status == Status::True)
        };
        SlimNode {
            metadata: ObjectMeta {
                name: m.name.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                ..ObjectMeta::default()
            },
            labels: m
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            availability: Availability {
                ready: conditions
                    .iter()
                    .find(|c| c.type_ == READY)
                    .map(|c| c.status),
                unschedulable: node
                    .spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false),
                disrupted_by: Lifecycle::of(true_),
            },
            conditions,
            status_owners: owners.into_values().collect(),
            boot_id: status
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.boot_id.clone())
                .filter(|id| !id.is_empty()),
        }
    }

    /// Text with what makes a decoder work: escapes, a quote, non-ASCII.
    fn text() -> impl Strategy<Value = String> {
        prop::string::string_regex("[a-zA-Z0-9./\"\\\\é -]{0,12}").unwrap()
    }

    fn time() -> impl Strategy<Value = Option<String>> {
        prop::option::of(
            (0u32..3, 0u32..60).prop_map(|(d, s)| format!("2026-01-0{}T00:00:{s:02}Z", d + 1)),
        )
    }

    fn type_() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("Ready".to_string()),
            Just("kured.dev/RebootRequired".to_string()),
            Just("MaintenanceInProgress".to_string()),
            Just("kured.dev/UnderMaintenance".to_string()),
            Just("MemoryPressure".to_string()),
            Just("GracefulShutdownInProgress".to_string()),
            text(),
        ]
    }

    /// A managedFields key: the API server's form, and others a decoder must not misread.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => type_().prop_map(|t| format!("k:{}", serde_json::json!({ "type": t }))),
            1 => type_().prop_map(|t| format!(r#"k:{{"type": {}, "x": 1}}"#, Value::from(t))),
            1 => text().prop_map(|t| format!("f:{t}")),
            1 => text().prop_map(|t| format!(r#"k:{{"type":"{t}"}}"#)),
        ]
    }

    fn unknown() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            text().prop_map(Value::from),
            prop::collection::vec(text(), 0..3)
                .prop_map(|v| serde_json::json!({ "names": v, "n": 1.5 })),
        ]
    }

    fn managed_fields() -> impl Strategy<Value = Value> {
        let manager = prop_oneof![
            Just("kubelet".to_string()),
            Just("kumaco/kube-system/kumaco".to_string()),
            Just("agent".to_string()),
            text()
        ];
        let subresource = prop::option::of(prop_oneof![Just("status"), Just("scale")]);
        let conditions = prop::collection::btree_map(key(), any::<bool>(), 0..4);
        (
            prop::option::of(manager),
            subresource,
            time(),
            conditions,
            unknown(),
        )
            .prop_map(|(manager, subresource, time, conditions, extra)| {
                let conditions: Map<String, Value> = conditions
                    .into_iter()
                    .map(|(k, owns)| {
                        let v = if owns {
                            serde_json::json!({ ".": {}, "f:status": {}, "f:reason": {} })
                        } else {
                            serde_json::json!({ ".": {}, "f:type": {} })
                        };
                        (k, v)
                    })
                    .collect();
                let mut e = serde_json::json!({
                    "operation": "Apply", "fieldsType": "FieldsV1", "extra": extra,
                    "fieldsV1": { "f:metadata": { "f:labels": {} },
                                  "f:status": { "f:conditions": conditions, "f:images": {} } },
                });
                for (k, v) in [
                    ("manager", manager),
                    ("subresource", subresource.map(String::from)),
                    ("time", time),
                ] {
                    if let Some(v) = v {
                        e[k] = v.into();
                    }
                }
                e
            })
    }

    fn condition() -> impl Strategy<Value = Value> {
        let status = prop_oneof![Just("True"), Just("False"), Just("Unknown"), Just("")];
        (
            type_(),
            status,
            prop::option::of(text()),
            prop::option::of(text()),
            time(),
            time(),
            unknown(),
        )
            .prop_map(|(t, s, reason, message, ltt, lht, extra)| {
                let mut c = serde_json::json!({ "type": t, "status": s, "extra": extra });
                for (k, v) in [
                    ("reason", reason),
                    ("message", message),
                    ("lastTransitionTime", ltt),
                    ("lastHeartbeatTime", lht),
                ] {
                    if let Some(v) = v {
                        c[k] = v.into();
                    }
                }
                c
            })
    }

    prop_compose! {
        fn node()(
            name in prop::option::of(text()),
            uid in prop::option::of(text()),
            rv in prop::option::of(0u64..1_000_000),
            labels in prop::collection::btree_map(text(), text(), 0..5),
            annotations in prop::collection::btree_map(text(), text(), 0..3),
            managed in prop::collection::vec(managed_fields(), 0..5),
            unschedulable in prop::option::of(any::<bool>()),
            conditions in prop::collection::vec(condition(), 0..6),
            boot_id in prop::option::of(prop_oneof![Just(String::new()), text()]),
            images in prop::collection::vec((prop::collection::vec(text(), 0..3), unknown()), 0..4),
        ) -> Value {
            let mut metadata = serde_json::json!({
                "labels": labels, "annotations": annotations, "managedFields": managed,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            });
            if let Some(n) = name { metadata["name"] = n.into(); }
            if let Some(u) = uid { metadata["uid"] = u.into(); }
            if let Some(rv) = rv { metadata["resourceVersion"] = rv.to_string().into(); }
            let mut spec = serde_json::json!({ "podCIDR": "10.0.0.0/24" });
            if let Some(u) = unschedulable { spec["unschedulable"] = u.into(); }
            let images: Vec<Value> = images
                .into_iter()
                .map(|(names, extra)| serde_json::json!({ "names": names, "sizeBytes": 1, "extra": extra }))
                .collect();
            let mut status = serde_json::json!({ "conditions": conditions, "images": images });
            if let Some(b) = boot_id {
                status["nodeInfo"] = serde_json::json!({ "bootID": b, "kubeletVersion": "v1.37.2" });
            }
            serde_json::json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": metadata, "spec": spec, "status": status,
            })
        }
    }

    proptest! {
        #[test]
        fn decodes_what_the_whole_node_says(node in node()) {
            let text = serde_json::to_string(&node).unwrap();
            let lean: SlimNode = serde_json::from_str(&text).unwrap();
            let full: Node = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&lean, &from_full(&full));
            // The tools' way (through a JSON value, where nothing borrows) agrees.
            prop_assert_eq!(&lean, &crate::tools::nodes::slim(&full, &Names::default()));
        }
    }
}
