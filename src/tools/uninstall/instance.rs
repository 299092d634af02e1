//! Which instance is uninstalled, and whether it runs: the target named by the flags,
//! the holder of a Lease that counts as running, the refusal while the instance writing
//! as the field manager runs, and stopping this one (`--stop-deployment`, then waiting
//! for its Lease to be released or to expire).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{UninstallError, api_error};
use crate::cli::UninstallArgs;
use crate::peers::{self, LeaseRef, Peers};
use crate::tools::ToolError;

/// Which instance is uninstalled, and whose conditions go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The instance's own Lease (its Deployment is in the same namespace).
    pub lease: LeaseRef,
    /// The field manager whose conditions are removed.
    pub manager: String,
    /// The Lease the field manager names, when it is not `lease`: the instance writing
    /// as the manager, which must not be running for the removal.
    pub writer: Option<LeaseRef>,
}

/// The target of `--lease-namespace`, `--lease-name` and `--field-manager`: a namespace
/// not given is the field manager's, and never another.
pub fn target(
    lease_namespace: Option<&str>,
    lease_name: Option<&str>,
    field_manager: Option<&str>,
) -> Result<Target, ToolError> {
    let named = field_manager.and_then(peers::lease_of);
    let namespace = lease_namespace
        .map(str::to_string)
        .or_else(|| named.as_ref().map(|l| l.namespace.clone()))
        .ok_or_else(|| {
            crate::tools::flag_err(
                "lease-namespace",
                "needed: the namespace of the instance's Lease and Deployment (for a Helm \
                 release, its namespace), unless --field-manager has the form \
                 kumaco/<namespace>/<lease name>. No namespace is assumed; `kubectl get \
                 leases -A` lists the Leases",
            )
        })?;
    let name = lease_name
        .map(str::to_string)
        .or_else(|| named.map(|l| l.name))
        .unwrap_or_else(|| "kumaco".into());
    let manager = field_manager
        .map(str::to_string)
        .unwrap_or_else(|| crate::config::default_field_manager(&namespace, &name));
    let lease = LeaseRef { namespace, name };
    let writer = peers::lease_of(&manager).filter(|w| *w != lease);
    Ok(Target {
        lease,
        manager,
        writer,
    })
}

/// The holder of `lease` if it counts as running at `now`: held, and renewed within its
/// duration plus the grace kumaco gives every instance (`peers`).
pub fn live_holder(lease: &Lease, now: Timestamp) -> Option<String> {
    let key = LeaseRef {
        namespace: String::new(),
        name: String::new(),
    };
    let mut peers = Peers::default();
    peers
        .leases
        .insert(key.clone(), (crate::peer_leases::lease_read(lease), now));
    let live = peers.stale_at(&key).is_some_and(|t| now < t);
    live.then(|| {
        lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default()
    })
}

/// What `--shadow` says: the instance wrote nothing, so nothing is done.
pub fn shadow_report(target: &Target) -> String {
    let writer = match &target.writer {
        Some(w) => format!("the instance of Lease {w}"),
        None => "another instance".into(),
    };
    format!(
        "the instance of Lease {} is a shadow (--dry-run): it writes no condition and holds \
         no Lease, so nothing is removed, stopped or deleted. Conditions of field manager \
         {:?} on the nodes were written by {writer}, or by this one before it ran as a \
         shadow (then run kumaco uninstall without --shadow).\n",
        target.lease, target.manager
    )
}

/// How often the Lease is read while waiting for the instance to stop.
const POLL: Duration = Duration::from_secs(1);

pub(super) async fn read_lease(
    client: &kube::Client,
    at: &LeaseRef,
) -> Result<Option<Lease>, kube::Error> {
    Api::<Lease>::namespaced(client.clone(), &at.namespace)
        .get_opt(&at.name)
        .await
}

/// The holder of the writer's Lease if that instance runs (no writer: `None`).
pub(super) async fn writer_holder(
    client: &kube::Client,
    server: &str,
    target: &Target,
) -> Result<Option<String>, ToolError> {
    let Some(writer) = &target.writer else {
        return Ok(None);
    };
    let lease = read_lease(client, writer)
        .await
        .map_err(|e| api_error(server, format!("get Lease {writer}"), e))?;
    Ok(lease.and_then(|l| live_holder(&l, Timestamp::now())))
}

/// Refuses while the instance writing as the manager, another than this one, runs.
pub(super) async fn refuse_if_writer_runs(
    client: &kube::Client,
    server: &str,
    target: &Target,
) -> Result<(), ToolError> {
    match (&target.writer, writer_holder(client, server, target).await?) {
        (Some(writer), Some(holder)) => Err(UninstallError::AnotherWriterRuns {
            manager: target.manager.clone(),
            writer: writer.to_string(),
            holder,
            lease: target.lease.to_string(),
        }
        .into()),
        _ => Ok(()),
    }
}

/// Stops the instance (`--yes`): scales `--stop-deployment` to 0, then waits up to `wait`
/// for its Lease to be released or to expire, as a running instance would write its
/// conditions back. Returns whether the Lease exists.
pub async fn stop(
    client: &kube::Client,
    server: &str,
    lease: &LeaseRef,
    args: &UninstallArgs,
    wait: Duration,
    write: &mut impl FnMut(&str) -> Result<(), ToolError>,
) -> Result<bool, ToolError> {
    let namespace = &lease.namespace;
    let mut stopped = String::new();
    if let Some(deployment) = &args.stop_deployment {
        let scaled = Api::<Deployment>::namespaced(client.clone(), namespace)
            .patch_scale(
                deployment,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
            )
            .await;
        match scaled {
            Ok(_) => {
                stopped = format!(" (deployment {namespace}/{deployment} is at 0 replicas now)");
                write(&format!(
                    "scaled deployment {namespace}/{deployment} to 0 replicas\n"
                ))?;
            }
            Err(kube::Error::Api(e)) if e.code == 404 && args.ignore_not_found => write(&format!(
                "no deployment {namespace}/{deployment}: nothing to scale\n"
            ))?,
            Err(e) => {
                return Err(api_error(
                    server,
                    format!("scale deployment {namespace}/{deployment} to 0"),
                    e,
                ));
            }
        }
    }
    let deadline = tokio::time::Instant::now() + wait;
    // Until the instance stops: a running one would write its conditions back.
    loop {
        let current = read_lease(client, lease)
            .await
            .map_err(|e| api_error(server, format!("get Lease {lease}"), e))?;
        let found = current.is_some();
        let Some(holder) = current.and_then(|l| live_holder(&l, Timestamp::now())) else {
            return Ok(found);
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(UninstallError::StillRunning {
                lease: lease.to_string(),
                holder,
                waited: args.wait.clone(),
                stopped,
            }
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
}
