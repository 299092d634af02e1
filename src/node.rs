//! A Node as kumaco reads it: name, labels, resourceVersion, conditions, and which
//! condition types each field manager owns on the status, and when it last changed it.
//!
//! Decoded straight from the API server's JSON, skipping everything else. A real Node is
//! mostly images, addresses, capacity and managedFields (tens of KiB once decoded); kumaco
//! reads none of it, and decoding it only to drop it again cost both the memory peak (a
//! heap fragmented by thousands of short-lived strings) and the CPU of every watch event
//! and every write's answer. Used as the object type of the node watch, cache and writes.
//! Decoded with the condition types as on the wire; whoever reads nodes renames them
//! with the [`names`] it was configured with ([`SlimNode::rename`]:
//! `--in-progress-condition`, `--under-maintenance-condition`), so the core knows only
//! kumaco's own names.

mod labels;
pub mod names;

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

pub use labels::NodeLabels;
pub use names::Names;

use crate::conditions::{Condition, Status};
use crate::in_progress::{Availability, BlockingPod, Lifecycle};
use crate::pass::NodeView;

/// The kubelet's condition: whether the node is ready for pods.
pub const READY: &str = "Ready";
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
    /// Its `Ready` status and `spec.unschedulable`, kept apart from the conditions so
    /// that the Ready condition itself (a kubelet rewrites its message and heartbeat) need
    /// not be cached.
    pub availability: Availability,
    /// `status.nodeInfo.bootID`, which the kubelet sets anew at each boot: how kumaco
    /// tells that a node in maintenance rebooted (`None`: empty or absent).
    pub boot_id: Option<String>,
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

    /// Puts kumaco's own names on the conditions and the owned types decoded under the
    /// names on the nodes (`names`), and drops those carrying kumaco's default name of
    /// a condition it writes under another (someone else's). The availability reads no
    /// renamed condition and stays as decoded.
    pub fn rename(&mut self, names: &Names) {
        if names.renames_nothing() {
            return;
        }
        let conditions = std::mem::take(&mut self.conditions);
        self.conditions = conditions
            .into_iter()
            .filter_map(|mut c| {
                c.type_ = names.from_wire(c.type_)?;
                Some(c)
            })
            .collect();
        for o in &mut self.status_owners {
            let types = std::mem::take(&mut o.types);
            o.types = types
                .into_iter()
                .filter_map(|t| names.from_wire(t))
                .collect();
            o.types.sort();
            o.types.dedup();
        }
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
    /// differ in anything a pass reads: the kept conditions (their `lastHeartbeatTime`
    /// only where it confirms a condition after the reboot that ended the node's
    /// maintenance: there a confirmed requirement may start the next one), the boot ID,
    /// the ownership of kumaco's conditions, whether and why the node is unavailable
    /// (not the raw `Ready`: a first kubelet report of `Ready=True` on a node that had none
    /// leaves it available), or a label under one of `label_keys`, the keys the selectors
    /// name. Most node updates in a cluster (kubelet heartbeats, image lists, annotations,
    /// labels no selector names) differ in none of these: they cost this comparison and no
    /// pass.
    pub fn differs_for_pass(&self, other: &SlimNode, label_keys: &HashSet<String>) -> bool {
        // A heartbeat counts only where it confirms a requirement after the reboot that
        // ended a maintenance: once per condition and reboot, not once per report.
        let conditions_differ =
            crate::conditions::differ_beyond_heartbeats(&self.conditions, &other.conditions)
                || rebooted_at(self).is_some_and(|end| {
                    let confirmed = |n: &SlimNode| -> Vec<bool> {
                        n.conditions
                            .iter()
                            .map(|c| c.confirmed_after(end))
                            .collect()
                    };
                    confirmed(self) != confirmed(other)
                });
        conditions_differ
            || self.boot_id != other.boot_id
            || self.status_owners != other.status_owners
            || self.availability.unavailable() != other.availability.unavailable()
            || label_keys
                .iter()
                .any(|k| self.labels.label(k) != other.labels.label(k))
    }

    pub fn resource_version(&self) -> Option<u64> {
        self.metadata.resource_version.as_deref()?.parse().ok()
    }
}

/// When a reboot ended the node's maintenance (`NodeRebooted`'s `lastTransitionTime`).
fn rebooted_at(n: &SlimNode) -> Option<Timestamp> {
    n.conditions
        .iter()
        .find(|c| c.reason == crate::reasons::NODE_REBOOTED)
        .and_then(|c| c.last_transition_time)
}

/// Every distinct label key and value the node cache holds, once.
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
struct Wire<'a> {
    #[serde(borrow)]
    metadata: WireMeta<'a>,
    #[serde(default)]
    spec: Option<WireSpec>,
    #[serde(default, borrow)]
    status: Option<WireStatus<'a>>,
}

#[derive(Deserialize)]
struct WireSpec {
    #[serde(default)]
    unschedulable: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMeta<'a> {
    name: Option<String>,
    /// Names the node's events (`node_events`): a node re-created under the same name is
    /// another node.
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    labels: Option<NodeLabels>,
    resource_version: Option<String>,
    #[serde(default, borrow)]
    managed_fields: Option<Vec<WireManagedFields<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireManagedFields<'a> {
    #[serde(borrow)]
    manager: Option<Cow<'a, str>>,
    #[serde(borrow)]
    subresource: Option<Cow<'a, str>>,
    /// When the manager last changed a field it owns here.
    #[serde(default, borrow)]
    time: Option<Cow<'a, str>>,
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
    conditions: Option<OwnedTypes>,
}

/// The condition types whose `status` a manager owns, read from the keys of its
/// `f:conditions` as they stream by: a key is looked at in place and only the type of an
/// owned value is kept, where a map would own a copy of every key.
#[derive(Default)]
struct OwnedTypes(Vec<String>);

impl<'de> Deserialize<'de> for OwnedTypes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TypesVisitor;
        impl<'de> Visitor<'de> for TypesVisitor {
            type Value = OwnedTypes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of managed condition keys")
            }
            fn visit_unit<E>(self) -> Result<OwnedTypes, E> {
                Ok(OwnedTypes::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OwnedTypes, A::Error> {
                let mut types = Vec::new();
                while let Some(type_) = map.next_key_seed(TypeOfKey)? {
                    let fields: WireConditionFields = map.next_value()?;
                    if let (Some(t), Some(_)) = (type_, fields.status) {
                        types.push(t);
                    }
                }
                Ok(OwnedTypes(types))
            }
        }
        deserializer.deserialize_map(TypesVisitor)
    }
}

/// Reads the condition type out of a key of `f:conditions` without owning the key.
struct TypeOfKey;

impl<'de> DeserializeSeed<'de> for TypeOfKey {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for TypeOfKey {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a managed field's key")
    }
    fn visit_str<E>(self, key: &str) -> Result<Option<String>, E> {
        Ok(condition_type_of_key(key))
    }
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
struct WireStatus<'a> {
    #[serde(default, borrow)]
    conditions: Option<Vec<WireCondition<'a>>>,
    #[serde(default, rename = "nodeInfo")]
    node_info: Option<WireNodeInfo>,
}

#[derive(Deserialize)]
struct WireNodeInfo {
    #[serde(default, rename = "bootID")]
    boot_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCondition<'a> {
    /// Absent, an empty type (which kumaco reads under no name), as the API's own types
    /// decode it: one malformed condition does not make the whole node unreadable.
    #[serde(default, rename = "type")]
    type_: String,
    /// The status and the times are read in place: only their values are kept. Absent,
    /// `Unknown`.
    #[serde(default, borrow)]
    status: Cow<'a, str>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default, borrow)]
    last_transition_time: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    last_heartbeat_time: Option<Cow<'a, str>>,
}

impl From<WireCondition<'_>> for Condition {
    fn from(w: WireCondition<'_>) -> Condition {
        Condition {
            type_: w.type_,
            status: Status::from_api(&w.status),
            reason: w.reason.unwrap_or_default(),
            message: w.message.unwrap_or_default(),
            // An unreadable time counts as absent: kumaco then writes a fresh one.
            last_transition_time: w
                .last_transition_time
                .and_then(|t| t.parse::<Timestamp>().ok()),
            last_heartbeat_time: w
                .last_heartbeat_time
                .and_then(|t| t.parse::<Timestamp>().ok()),
        }
    }
}

/// A condition from the API's JSON form, as the node cache decodes and renames it
/// (`None`: it carries a name kumaco does not read under `names`).
pub fn condition_from_json(
    v: serde_json::Value,
    names: &Names,
) -> Result<Option<Condition>, serde_json::Error> {
    let mut c = Condition::from(WireCondition::deserialize(&v)?);
    Ok(names
        .from_wire(std::mem::take(&mut c.type_))
        .map(|type_| Condition { type_, ..c }))
}

/// The API's JSON form of a condition kumaco applies, under the name on the nodes
/// (`lastHeartbeatTime` is never written: kumaco writes nothing in steady state).
pub fn condition_json(c: &Condition, names: &Names) -> serde_json::Value {
    let mut v = serde_json::json!({
        "type": names.to_wire(&c.type_),
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
        // A handful of managers: a list searched by name beats a map keyed by a copy of it.
        let mut owners: Vec<Owner> = Vec::new();
        for entry in wire.metadata.managed_fields.into_iter().flatten() {
            let (Some(manager), Some("status")) = (entry.manager, entry.subresource.as_deref())
            else {
                continue;
            };
            let types = entry
                .fields_v1
                .and_then(|f| f.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default();
            let time = entry.time.and_then(|t| t.parse::<Timestamp>().ok());
            let i = match owners.iter().position(|o| o.manager == manager) {
                Some(i) => i,
                None => {
                    owners.push(Owner {
                        manager: manager.into_owned(),
                        types: Vec::new(),
                        time: None,
                    });
                    owners.len() - 1
                }
            };
            let owner = &mut owners[i];
            owner.time = owner.time.max(time);
            owner.types.extend(types.0);
            owner.types.sort();
            owner.types.dedup();
        }
        owners.sort_by(|a, b| a.manager.cmp(&b.manager));
        let (conditions, node_info) = wire
            .status
            .map(|s| (s.conditions, s.node_info))
            .unwrap_or_default();
        let conditions: Vec<Condition> = conditions
            .unwrap_or_default()
            .into_iter()
            .map(Condition::from)
            .collect();
        let availability = Availability {
            ready: conditions
                .iter()
                .find(|c| c.type_ == READY)
                .map(|c| c.status),
            unschedulable: wire.spec.and_then(|s| s.unschedulable).unwrap_or(false),
            disrupted_by: Lifecycle::of(|t| {
                conditions
                    .iter()
                    .any(|c| c.type_ == t && c.status == crate::conditions::Status::True)
            }),
        };
        Ok(SlimNode {
            metadata: ObjectMeta {
                name: wire.metadata.name,
                uid: wire.metadata.uid,
                resource_version: wire.metadata.resource_version,
                ..ObjectMeta::default()
            },
            labels: wire.metadata.labels.unwrap_or_default(),
            conditions,
            status_owners: owners,
            availability,
            boot_id: node_info
                .and_then(|i| i.boot_id)
                .filter(|id| !id.is_empty()),
        })
    }
}

/// `k:{"type":"Ready"}` → `Ready`: the key server-side apply gives a list item merged
/// by its `type`.
fn condition_type_of_key(key: &str) -> Option<String> {
    // The form the API server writes, read without a parser; anything else (an escape,
    // spaces, more fields) goes through serde_json.
    if let Some(t) = key
        .strip_prefix(r#"k:{"type":""#)
        .and_then(|rest| rest.strip_suffix(r#""}"#))
        .filter(|t| !t.contains(['"', '\\']))
    {
        return Some(t.to_string());
    }
    #[derive(Deserialize)]
    struct Key {
        #[serde(rename = "type")]
        type_: String,
    }
    let json = key.strip_prefix("k:")?;
    Some(serde_json::from_str::<Key>(json).ok()?.type_)
}

/// A cached node as the pass reads it.
pub fn view<'a>(n: &'a SlimNode, manager: &str, pods: &'a [BlockingPod]) -> NodeView<'a> {
    NodeView {
        name: n.metadata.name.as_deref().unwrap_or_default(),
        uid: n.metadata.uid.as_deref().unwrap_or_default(),
        labels: &n.labels,
        resource_version: n.resource_version(),
        conditions: &n.conditions,
        owned: n.owned_by(manager),
        owned_since: n.owner(manager).and_then(|o| o.time),
        owners: &n.status_owners,
        availability: n.availability,
        pods,
        boot_id: n.boot_id.as_deref(),
        holds: &[],
        drain: None,
    }
}

#[cfg(test)]
mod tests;
