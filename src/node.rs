//! A Node as kumaco reads it: name, labels, resourceVersion, conditions, and which
//! condition types each field manager owns on the status, and when it last changed it.
//!
//! Decoded straight from the API server's JSON, skipping everything else. A real Node is
//! mostly images, addresses, capacity and managedFields (tens of KiB once decoded); kumaco
//! reads none of it, and decoding it only to drop it again cost both the memory peak (a
//! heap fragmented by thousands of short-lived strings) and the CPU of every watch event
//! and every write's answer. Used as the object type of the node watch, cache and writes.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, LazyLock};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::conditions::{Condition, Status};
use crate::intern::Pool;
use crate::peers::{KUMACO_TYPES, Owner};
use crate::selector::Labels;

/// The part of a Node kumaco reads. `metadata` carries only name, uid and
/// resourceVersion; the labels are kept apart, in shared form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlimNode {
    pub metadata: ObjectMeta,
    pub labels: NodeLabels,
    pub conditions: Vec<Condition>,
    /// Who owns which conditions' `status`, from the managedFields of the status
    /// subresource, sorted by manager.
    pub status_owners: Vec<Owner>,
}

impl SlimNode {
    /// The condition types `field_manager` owns on this node's status (sorted).
    pub fn owned_by(&self, field_manager: &str) -> &[String] {
        self.owner(field_manager)
            .map(|o| o.types.as_slice())
            .unwrap_or_default()
    }

    /// `field_manager`'s entry, if it owns anything of the status.
    pub fn owner(&self, field_manager: &str) -> Option<&Owner> {
        self.status_owners
            .iter()
            .find(|o| o.manager == field_manager)
    }

    /// Forgets what the controller never asks about: the ownership of other field
    /// managers except of kumaco's condition types (another instance's, a person's), and
    /// every condition neither in `read` nor owned by `field_manager` (a kubelet's five
    /// conditions, for one, are a third of a cached node).
    pub fn keep_only(&mut self, field_manager: &str, read: &[String]) {
        for o in &mut self.status_owners {
            if o.manager != field_manager {
                o.types.retain(|t| KUMACO_TYPES.contains(&t.as_str()));
            }
        }
        // This manager's entry stays even when another took all its values: its time is
        // this instance's last change, which bounds a contest (`peers`).
        self.status_owners
            .retain(|o| o.manager == field_manager || !o.types.is_empty());
        let owned = self.owned_by(field_manager).to_vec();
        self.conditions
            .retain(|c| read.contains(&c.type_) || owned.contains(&c.type_));
    }

    /// The other field managers owning kumaco's conditions here (after [`Self::keep_only`]).
    pub fn others(&self, field_manager: &str) -> impl Iterator<Item = &Owner> {
        self.status_owners
            .iter()
            .filter(move |o| o.manager != field_manager)
    }

    /// Whether `self` and `other` (two versions of a node, trimmed by [`Self::keep_only`])
    /// differ in anything a pass reads: the kept conditions (`lastHeartbeatTime` is not
    /// read), the ownership of kumaco's conditions, or a label under one of `label_keys`, the
    /// keys the selectors name. Most node updates in a cluster (kubelet heartbeats, image
    /// lists, annotations, labels no selector names) differ in none of these: they cost
    /// this comparison and no pass.
    pub fn differs_for_pass(&self, other: &SlimNode, label_keys: &HashSet<String>) -> bool {
        self.conditions != other.conditions
            || self.status_owners != other.status_owners
            || label_keys
                .iter()
                .any(|k| self.labels.label(k) != other.labels.label(k))
    }

    pub fn resource_version(&self) -> Option<u64> {
        self.metadata.resource_version.as_deref()?.parse().ok()
    }
}

/// Every distinct label key and value the node cache holds, once.
static LABEL_STRINGS: LazyLock<Pool> = LazyLock::new(Pool::new);

/// A node's labels, sorted by key, each key and value shared with every other node that
/// has it. Twenty labels cost 640 bytes of handles plus the node's few unique values
/// (its hostname), where a map of owned strings cost about 3 KiB.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NodeLabels(Box<[(Arc<str>, Arc<str>)]>);

impl NodeLabels {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Labels for NodeLabels {
    fn label(&self, key: &str) -> Option<&str> {
        let i = self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.0[i].1)
    }
}

impl fmt::Debug for NodeLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<'a> FromIterator<(&'a str, &'a str)> for NodeLabels {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a str)>>(pairs: I) -> Self {
        let mut labels: Vec<(Arc<str>, Arc<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (LABEL_STRINGS.intern(k), LABEL_STRINGS.intern(v)))
            .collect();
        // A JSON object with a repeated key keeps the last value, as Go's decoder does.
        labels.reverse();
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        labels.dedup_by(|later, first| later.0 == first.0);
        NodeLabels(labels.into_boxed_slice())
    }
}

/// Decodes `metadata.labels` straight into shared strings, borrowing from the input where
/// it can: no owned copy of a label is made only to be dropped again.
impl<'de> Deserialize<'de> for NodeLabels {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = NodeLabels;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of label keys to values")
            }
            fn visit_unit<E>(self) -> Result<NodeLabels, E> {
                Ok(NodeLabels::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeLabels, A::Error> {
                let mut pairs: Vec<(Text<'de>, Text<'de>)> = Vec::new();
                while let Some(pair) = map.next_entry()? {
                    pairs.push(pair);
                }
                Ok(pairs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect())
            }
        }
        deserializer.deserialize_map(LabelsVisitor)
    }
}

/// A string from the input: borrowed when the input has it unescaped, else owned.
enum Text<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Text<'_> {
    fn as_str(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Owned(s) => s,
        }
    }
}

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text::Borrowed(s))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text::Owned(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text::Owned(s))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

impl kube::Resource for SlimNode {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Node".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "nodes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

// The wire shape, field by field; serde skips unknown fields (`IgnoredAny` style) without
// allocating for them.

#[derive(Deserialize)]
struct Wire {
    metadata: WireMeta,
    #[serde(default)]
    status: Option<WireStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    name: Option<String>,
    /// Names the node's events (`node_events`): a node re-created under the same name is
    /// another node.
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    labels: Option<NodeLabels>,
    resource_version: Option<String>,
    #[serde(default)]
    managed_fields: Option<Vec<WireManagedFields>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireManagedFields {
    manager: Option<String>,
    subresource: Option<String>,
    /// When the manager last changed a field it owns here.
    #[serde(default)]
    time: Option<String>,
    fields_v1: Option<WireFields>,
}

#[derive(Deserialize)]
struct WireFields {
    #[serde(rename = "f:status")]
    status: Option<WireStatusFields>,
}

#[derive(Deserialize)]
struct WireStatusFields {
    /// Keys like `k:{"type":"Ready"}`, each with the subfields owned.
    #[serde(rename = "f:conditions")]
    conditions: Option<BTreeMap<String, WireConditionFields>>,
}

/// A manager owns a condition when it owns its `status`: the value. Owning only the
/// entry (`.`, `f:type`) is what is left to a manager whose value another one overwrote
/// with `force`; it decides nothing, and an apply that leaves the entry out gives it up
/// without removing the entry.
#[derive(Deserialize)]
struct WireConditionFields {
    #[serde(rename = "f:status")]
    status: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct WireStatus {
    #[serde(default)]
    conditions: Option<Vec<WireCondition>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    last_transition_time: Option<String>,
}

impl From<WireCondition> for Condition {
    fn from(w: WireCondition) -> Condition {
        Condition {
            type_: w.type_,
            status: Status::from_api(&w.status),
            reason: w.reason.unwrap_or_default(),
            message: w.message.unwrap_or_default(),
            // An unreadable time counts as absent: kumaco then writes a fresh one.
            last_transition_time: w
                .last_transition_time
                .and_then(|t| t.parse::<Timestamp>().ok()),
        }
    }
}

/// A condition from the API's JSON form, as the node cache decodes it.
pub fn condition_from_json(v: serde_json::Value) -> Result<Condition, serde_json::Error> {
    serde_json::from_value::<WireCondition>(v).map(Condition::from)
}

/// The API's JSON form of a condition kumaco applies (`lastHeartbeatTime` is never
/// written: kumaco writes nothing in steady state).
pub fn condition_json(c: &Condition) -> serde_json::Value {
    let mut v = serde_json::json!({
        "type": c.type_,
        "status": c.status.as_str(),
        "reason": c.reason,
        "message": c.message,
    });
    if let Some(t) = c.last_transition_time {
        v["lastTransitionTime"] = t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into();
    }
    v
}

impl<'de> Deserialize<'de> for SlimNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = Wire::deserialize(deserializer)?;
        let mut owners: BTreeMap<String, Owner> = BTreeMap::new();
        for entry in wire.metadata.managed_fields.into_iter().flatten() {
            let (Some(manager), Some("status")) = (entry.manager, entry.subresource.as_deref())
            else {
                continue;
            };
            let keys = entry
                .fields_v1
                .and_then(|f| f.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default();
            let time = entry.time.and_then(|t| t.parse::<Timestamp>().ok());
            let owner = owners.entry(manager.clone()).or_insert_with(|| Owner {
                manager,
                types: Vec::new(),
                time: None,
            });
            owner.time = owner.time.max(time);
            owner.types.extend(
                keys.into_iter()
                    .filter(|(_, fields)| fields.status.is_some())
                    .filter_map(|(k, _)| condition_type_of_key(&k)),
            );
            owner.types.sort();
            owner.types.dedup();
        }
        Ok(SlimNode {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                uid: wire.metadata.uid,
                resource_version: wire.metadata.resource_version,
                ..ObjectMeta::default()
            },
            labels: wire.metadata.labels.unwrap_or_default(),
            conditions: wire
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .map(Condition::from)
                .collect(),
            status_owners: owners.into_values().collect(),
        })
    }
}

/// `k:{"type":"Ready"}` → `Ready`: the key server-side apply gives a list item merged
/// by its `type`.
fn condition_type_of_key(key: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Key {
        #[serde(rename = "type")]
        type_: String,
    }
    let json = key.strip_prefix("k:")?;
    serde_json::from_str::<Key>(json).ok().map(|k| k.type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn a_bare_node_decodes() {
        let node: SlimNode =
            serde_json::from_value(json!({ "metadata": { "name": "n" } })).unwrap();
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
        };
        let wire: WireCondition = serde_json::from_value(condition_json(&c)).unwrap();
        assert_eq!(Condition::from(wire), c);
        let api: k8s_openapi::api::core::v1::NodeCondition =
            serde_json::from_value(condition_json(&c)).unwrap();
        assert_eq!(api.status, "False");
    }
}
