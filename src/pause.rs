//! The pause switch: a person's "start nothing now" (`kumaco pause`, taken back with
//! `kumaco resume`), read by the controller from a well-known object rather than a flag,
//! so that it needs no change of kumaco's Deployment and every replica, a restarted one
//! and a new leader alike, reads the same.
//!
//! The object is a Lease named after the instance's own (`<lease name>-pause`, in its
//! namespace): a Lease because kumaco may already read Leases there, and because a Role
//! that lets people create one lets them create no window ConfigMap. Who paused is its
//! `spec.holderIdentity`, when its `spec.acquireTime`, and why the
//! [`REASON_ANNOTATION`]. This module names the object and says what it means, for the
//! controller (`controller::gates::pause`) and the tools (`kumaco pause`, `status`).

use k8s_openapi::api::coordination::v1::Lease;

use crate::gates::Hold;
use crate::peers::LeaseRef;
use crate::reasons;

/// The annotation holding why the pause was made.
pub const REASON_ANNOTATION: &str = "kumaco.dev/pause-reason";

/// The label every pause Lease carries, as a selector: `kumaco status` finds them by it.
pub const LABEL: &str = "app.kubernetes.io/component=kumaco-pause";

/// Most bytes of the reason quoted on the nodes.
const MAX_REASON_BYTES: usize = 256;

/// The pause Lease of the instance whose own Lease is `lease`.
pub fn pause_lease(lease: &LeaseRef) -> LeaseRef {
    LeaseRef {
        namespace: lease.namespace.clone(),
        name: format!("{}-pause", lease.name),
    }
}

/// The instance whose pause `lease` is: its own Lease, the pause's name without its
/// suffix.
pub fn instance_of(lease: &Lease) -> Option<LeaseRef> {
    let name = lease.metadata.name.as_deref()?.strip_suffix("-pause")?;
    Some(LeaseRef {
        namespace: lease.metadata.namespace.clone()?,
        name: name.to_string(),
    })
}

/// What a pause Lease says, as the nodes show it: `paused by alice at
/// 2026-12-07T10:00:00Z: incident 4711`.
pub fn hold(lease: &Lease) -> Hold {
    let spec = lease.spec.as_ref();
    let by = spec
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or("someone");
    let at = spec
        .and_then(|s| s.acquire_time.as_ref())
        .map(|t| format!(" at {}", t.0.strftime("%Y-%m-%dT%H:%M:%SZ")))
        .unwrap_or_default();
    let why = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REASON_ANNOTATION))
        .map(|r| crate::conditions::bounded(r.trim().to_string(), MAX_REASON_BYTES))
        .filter(|r| !r.is_empty())
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let name = lease.metadata.name.as_deref().unwrap_or_default();
    Hold {
        reason: reasons::PAUSED,
        message: format!(
            "new starts paused by {by}{at}{why} (Lease {name}; `kumaco resume` ends the pause)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use std::collections::BTreeMap;

    #[test]
    fn the_nodes_say_who_paused_when_and_why() {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some("kumaco-pause".into()),
                annotations: Some(BTreeMap::from([(
                    REASON_ANNOTATION.to_string(),
                    " incident 4711: storage degraded \n".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("alice@example.com".into()),
                acquire_time: Some(MicroTime(kumaco_core::testing::ts(
                    "2026-12-07T10:00:00.5Z",
                ))),
                ..LeaseSpec::default()
            }),
        };
        let h = hold(&lease);
        assert_eq!(h.reason, reasons::PAUSED);
        assert_eq!(
            h.message,
            "new starts paused by alice@example.com at 2026-12-07T10:00:00Z: incident 4711: \
             storage degraded (Lease kumaco-pause; `kumaco resume` ends the pause)"
        );
        let bare = Lease {
            metadata: ObjectMeta {
                name: Some("kumaco-pause".into()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert_eq!(
            hold(&bare).message,
            "new starts paused by someone (Lease kumaco-pause; `kumaco resume` ends the pause)"
        );
        assert_eq!(
            pause_lease(&LeaseRef {
                namespace: "kumaco".into(),
                name: "kumaco".into()
            })
            .name,
            "kumaco-pause"
        );
    }
}
