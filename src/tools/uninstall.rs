//! `kumaco uninstall`: takes every node condition one kumaco instance owns off the nodes,
//! so that removing kumaco leaves nothing behind. A `MaintenanceInProgress=True` left on
//! a node would keep it in an executor's hands for good.
//!
//! What an instance owns is what its server-side apply field manager owns in the nodes'
//! status (`managedFields`), so the removal is an apply by that manager of a status with
//! no conditions: the API server drops exactly the conditions no other manager also owns
//! (a person's, another instance's stay). Without `--yes` it only shows what it would
//! remove. With `--yes` it first makes sure the instance has stopped (its Lease released
//! or expired; `--stop-deployment` scales the Deployment to 0 first): a running instance
//! would write its conditions back at once. Then it removes them, checks that none is
//! left, and deletes the instance's Lease.

use std::fmt::Write as _;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::ToolError;
use crate::cli::UninstallArgs;
use crate::conditions::{MAINTENANCE_IN_PROGRESS as IN_PROGRESS, Status};
use crate::node::SlimNode;
use crate::node::names::Names;
use crate::peers::{LeaseRef, Peers};

/// What removing one manager's conditions takes off one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    pub node: String,
    /// The conditions that go, with their status (as named on the node).
    pub removed: Vec<(String, Status)>,
    /// The conditions the manager owns with another manager: they stay, owned by the
    /// other alone.
    pub kept: Vec<String>,
    /// The node is in maintenance now: once the condition is gone, an executor takes
    /// its maintenance for ended.
    pub in_progress: bool,
}

/// What removing `manager`'s conditions would take off each of `nodes` (the nodes where
/// it owns nothing are left out), in the nodes' order.
pub fn removals(nodes: &[SlimNode], manager: &str) -> Vec<Removal> {
    let names = crate::node::names::get();
    nodes
        .iter()
        .filter_map(|node| {
            let owned = node.owned_by(manager);
            if owned.is_empty() {
                return None;
            }
            let shared = |ty: &str| node.others(manager).any(|o| o.owns(ty));
            let mut removal = Removal {
                node: node.metadata.name.clone().unwrap_or_default(),
                removed: Vec::new(),
                kept: Vec::new(),
                in_progress: false,
            };
            for ty in owned {
                let wire = names.to_wire(ty).to_string();
                if shared(ty) {
                    removal.kept.push(wire);
                    continue;
                }
                let status = node
                    .conditions
                    .iter()
                    .find(|c| &c.type_ == ty)
                    .map_or(Status::Unknown, |c| c.status);
                removal.in_progress |= ty == IN_PROGRESS && status == Status::True;
                removal.removed.push((wire, status));
            }
            Some(removal)
        })
        .collect()
}

/// The table of `removals`, one node a line.
pub fn removals_table(removals: &[Removal]) -> String {
    let width = removals
        .iter()
        .map(|r| r.node.len())
        .max()
        .unwrap_or(0)
        .max("NODE".len());
    let mut text = format!("{:width$}  REMOVE\n", "NODE");
    for r in removals {
        let mut cell: Vec<String> = r
            .removed
            .iter()
            .map(|(ty, status)| format!("{ty}={}", status.as_str()))
            .collect();
        if !r.kept.is_empty() {
            cell.push(format!(
                "(kept, owned by another manager too: {})",
                r.kept.join(", ")
            ));
        }
        let _ = writeln!(text, "{:width$}  {}", r.node, cell.join(" "));
    }
    text
}

/// How often the Lease is read while waiting for the instance to stop.
const POLL: Duration = Duration::from_secs(1);

/// Runs `kumaco uninstall`; the report on `out`. Returns the exit status.
pub async fn run(args: &UninstallArgs, out: &mut impl std::io::Write) -> Result<u8, ToolError> {
    let names = Names::new(
        &args.condition_names.under_maintenance_condition,
        &args.condition_names.in_progress_condition,
        &[],
    )
    .map_err(|e| super::flag_err(e.flag(), e))?;
    let _ = crate::node::names::install(names);
    let wait = crate::duration::parse(&args.wait)
        .map_err(|e| super::flag_err("wait", e))?
        .as_nanos();
    let wait = Duration::from_nanos(u64::try_from(wait.max(0)).unwrap_or(u64::MAX));
    let namespace = args
        .lease_namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "default".into());
    let lease = LeaseRef {
        namespace: namespace.clone(),
        name: args.lease_name.clone(),
    };
    let manager = args
        .field_manager
        .clone()
        .unwrap_or_else(|| crate::config::default_field_manager(&namespace, &args.lease_name));
    let connection = crate::kubeclient::connect(&args.client).await?;
    let api_error = |action: String, error: kube::Error| ToolError::Api {
        action,
        server: connection.server.clone(),
        hint: if crate::kubeclient::is_forbidden(&error) {
            ". kumaco uninstall needs `list` on nodes, `patch` on nodes/status, `get` and \
             `delete` on the instance's Lease (and `patch` on deployments/scale with \
             --stop-deployment): docs/operations.md, \"Uninstall\""
                .into()
        } else {
            String::new()
        },
        error: Box::new(error),
    };
    let write = |out: &mut dyn std::io::Write, text: &str| {
        out.write_all(text.as_bytes()).map_err(ToolError::Write)
    };
    let leases: Api<Lease> = Api::namespaced(connection.client.clone(), &namespace);

    if args.yes {
        if let Some(deployment) = &args.stop_deployment {
            Api::<Deployment>::namespaced(connection.client.clone(), &namespace)
                .patch_scale(
                    deployment,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
                )
                .await
                .map_err(|e| {
                    api_error(format!("scale deployment {namespace}/{deployment} to 0"), e)
                })?;
            write(
                out,
                &format!("scaled deployment {namespace}/{deployment} to 0 replicas\n"),
            )?;
        }
        let deadline = tokio::time::Instant::now() + wait;
        // Until the instance stops: a running one would write its conditions back.
        while live_holder(&leases, &lease)
            .await
            .map_err(|e| api_error(format!("get Lease {lease}"), e))?
            .is_some()
        {
            if tokio::time::Instant::now() >= deadline {
                return Err(ToolError::StillRunning {
                    lease: lease.to_string(),
                    waited: args.wait.clone(),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    let list = |client: kube::Client| async move {
        Api::<Node>::all(client)
            .list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .map(super::status::slim_node)
                    .collect::<Vec<_>>()
            })
    };
    let nodes = list(connection.client.clone())
        .await
        .map_err(|e| api_error("list nodes".into(), e))?;
    let plan = removals(&nodes, &manager);
    let count: usize = plan.iter().map(|r| r.removed.len()).sum();
    if plan.is_empty() {
        write(
            out,
            &format!("no node carries a condition owned by field manager {manager:?}\n"),
        )?;
    } else {
        write(
            out,
            &format!(
                "field manager {manager:?} owns {count} condition(s) on {} node(s):\n{}",
                plan.len(),
                removals_table(&plan)
            ),
        )?;
        for r in plan.iter().filter(|r| r.in_progress) {
            write(
                out,
                &format!(
                    "warning: {} is in maintenance ({}=True): without it, an executor takes \
                     the maintenance for ended and may uncordon the node\n",
                    r.node,
                    crate::node::names::get().to_wire(IN_PROGRESS)
                ),
            )?;
        }
    }
    if !args.yes {
        // Said, not enforced: a dry run changes nothing either way. A Lease this identity
        // may not read is left unsaid.
        if let Ok(Some(holder)) = live_holder(&leases, &lease).await {
            write(
                out,
                &format!(
                    "the instance still runs (Lease {lease} held by {holder}): stop it \
                     before removing its conditions, or pass --stop-deployment\n"
                ),
            )?;
        }
        write(
            out,
            "dry run: nothing changed. Stop the instance, then run again with --yes to \
             remove them (and its Lease).\n",
        )?;
        return Ok(0);
    }

    // An apply that names no condition: the manager keeps nothing, and the API server
    // removes what it alone owned.
    let api = Api::<Node>::all(connection.client.clone());
    let params = PatchParams::apply(&manager);
    for r in &plan {
        let body = json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": r.node } });
        match api
            .patch_status(&r.node, &params, &Patch::Apply(body))
            .await
        {
            Ok(_) => {}
            // Deleted since the list: nothing left to remove there.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                return Err(api_error(
                    format!("remove the conditions of node {}", r.node),
                    e,
                ));
            }
        }
    }
    let left = removals(
        &list(connection.client.clone())
            .await
            .map_err(|e| api_error("list nodes".into(), e))?,
        &manager,
    );
    if let Some(r) = left.iter().find(|r| !r.removed.is_empty()) {
        return Err(ToolError::ConditionsCameBack {
            manager,
            node: r.node.clone(),
        });
    }
    match leases.delete(&lease.name, &DeleteParams::default()).await {
        Ok(_) => write(out, &format!("deleted Lease {lease}\n"))?,
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(api_error(format!("delete Lease {lease}"), e)),
    }
    write(
        out,
        &format!("removed {count} condition(s) from {} node(s)\n", plan.len()),
    )?;
    Ok(0)
}

/// The holder of `lease` if it counts as running now: held, and renewed within its
/// duration plus the grace kumaco gives every instance (`peers`).
async fn live_holder(api: &Api<Lease>, lease: &LeaseRef) -> Result<Option<String>, kube::Error> {
    let Some(l) = api.get_opt(&lease.name).await? else {
        return Ok(None);
    };
    let now = Timestamp::now();
    let mut peers = Peers::default();
    peers
        .leases
        .insert(lease.clone(), (crate::peer_leases::lease_read(&l), now));
    let live = peers.stale_at(lease).is_some_and(|t| now < t);
    Ok(live.then(|| l.spec.and_then(|s| s.holder_identity).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::Condition;
    use crate::peers::Owner;

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
        let plan = removals(&nodes, ME);
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
        assert!(removals(&nodes, ME).is_empty());
    }
}
