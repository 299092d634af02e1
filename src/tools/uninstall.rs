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
//!
//! A field manager can be shared: a shadow (`--dry-run`) given the live instance's
//! reasons on the live one's ownership. So the instance that writes as a manager is the
//! one whose Lease the manager names, whichever instance is being uninstalled: while
//! that Lease is held, nothing is removed; and a shadow (`--shadow`) removes nothing at
//! all, having written nothing. Nothing is guessed either: the instance's namespace is
//! given, or named by its field manager; and finding neither its Lease nor a condition
//! of its manager is an error of its own (most often a mistyped name) unless
//! `--ignore-not-found` says that nothing to remove is expected.

use std::collections::BTreeSet;
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
use crate::peers::{self, LeaseRef, Peers};

/// Why `kumaco uninstall` removed nothing, or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum UninstallError {
    /// `--yes` while the instance still runs: it would write its conditions back.
    #[error(
        "the instance still runs: its Lease {lease} is held by {holder:?} and renewed after \
         waiting {waited}{stopped}. Nothing was removed. Stop it first (scale its Deployment \
         to 0, or pass --stop-deployment NAME), or wait longer (--wait)"
    )]
    StillRunning {
        lease: String,
        holder: String,
        waited: String,
        /// What --stop-deployment did, so that nobody wonders why the Deployment is at 0.
        stopped: String,
    },
    /// The field manager names another instance's Lease, and that instance runs: its
    /// conditions are not this one's to remove (a shadow given a live instance's field
    /// manager).
    #[error(
        "field manager {manager:?} writes for the instance of Lease {writer}, which is held \
         by {holder:?}: that instance runs, and the instance of Lease {lease} must not remove \
         its conditions. Nothing was changed. A shadow (--dry-run) sharing its field manager \
         wrote nothing: run this with --shadow (the chart does for dryRun=true), or \
         uninstall its Helm release with --no-hooks"
    )]
    AnotherWriterRuns {
        manager: String,
        writer: String,
        holder: String,
        lease: String,
    },
    /// Conditions of the manager were back after their removal: something writes as it.
    #[error(
        "node {node} carries conditions of field manager {manager:?} again after their \
         removal: an instance with that field manager still runs (a copy outside its \
         Deployment, or another Lease name); stop it and run again"
    )]
    ConditionsCameBack { manager: String, node: String },
    /// Neither the instance's Lease nor a condition of its manager: most often a mistyped
    /// namespace, Lease name or field manager.
    #[error(
        "found nothing to remove: no Lease {lease}, and none of the {nodes} node(s) carries a \
         condition of field manager {manager:?}. {seen} Check the instance's namespace and \
         Lease name (--lease-namespace, --lease-name; `kubectl get leases -A` lists the \
         Leases) or its field manager (--field-manager). Pass --ignore-not-found where \
         nothing to remove is expected (an instance that never ran, or one already removed)"
    )]
    NothingFound {
        lease: String,
        manager: String,
        nodes: usize,
        /// The kumaco field managers the nodes do show, as a sentence.
        seen: String,
    },
}

impl UninstallError {
    /// 3 when nothing was found, told apart from a failure for scripts; 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            UninstallError::NothingFound { .. } => 3,
            _ => 1,
        }
    }
}

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
            super::flag_err(
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

/// The kumaco field managers owning a condition on `nodes`, as a sentence for
/// [`UninstallError::NothingFound`].
pub fn kumaco_managers_seen(nodes: &[SlimNode]) -> String {
    let seen: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| &n.status_owners)
        .filter(|o| !o.types.is_empty() && peers::is_kumaco(&o.manager))
        .map(|o| o.manager.as_str())
        .collect();
    if seen.is_empty() {
        return "No node carries a condition of any kumaco field manager.".into();
    }
    let listed: Vec<String> = seen.iter().map(|m| format!("{m:?}")).collect();
    format!(
        "The kumaco field managers on the nodes are {}.",
        listed.join(", ")
    )
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
pub fn removals(nodes: &[SlimNode], manager: &str, names: &Names) -> Vec<Removal> {
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

/// An API error, with the rights the command needs when it was refused.
fn api_error(server: &str, action: String, error: kube::Error) -> ToolError {
    ToolError::Api {
        action,
        server: server.to_string(),
        hint: if crate::kubeclient::is_forbidden(&error) {
            ". kumaco uninstall needs `list` on nodes, `patch` on nodes/status, `get` and \
             `delete` on the instance's Lease, `get` on the Lease its field manager names \
             (and `patch` on deployments/scale with --stop-deployment): \
             docs/operations.md, \"Uninstall\""
                .into()
        } else {
            String::new()
        },
        error: Box::new(error),
    }
}

async fn read_lease(client: &kube::Client, at: &LeaseRef) -> Result<Option<Lease>, kube::Error> {
    Api::<Lease>::namespaced(client.clone(), &at.namespace)
        .get_opt(&at.name)
        .await
}

/// The holder of the writer's Lease if that instance runs (no writer: `None`).
async fn writer_holder(
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
async fn refuse_if_writer_runs(
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

async fn list_nodes(
    client: &kube::Client,
    server: &str,
    names: &Names,
) -> Result<Vec<SlimNode>, ToolError> {
    let list = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| api_error(server, "list nodes".into(), e))?;
    Ok(list
        .items
        .iter()
        .map(|n| super::nodes::slim(n, names))
        .collect())
}

/// Runs `kumaco uninstall`; the report on `out`. Returns the exit status.
pub async fn run(args: &UninstallArgs, out: &mut impl std::io::Write) -> Result<u8, ToolError> {
    let names = Names::new(
        &args.condition_names.under_maintenance_condition,
        &args.condition_names.in_progress_condition,
        &[],
    )
    .map_err(|e| super::flag_err(e.flag(), e))?;
    let wait = crate::duration::parse(&args.wait)
        .map_err(|e| super::flag_err("wait", e))?
        .as_nanos();
    let wait = Duration::from_nanos(u64::try_from(wait.max(0)).unwrap_or(u64::MAX));
    let target = target(
        args.lease_namespace.as_deref(),
        args.lease_name.as_deref(),
        args.field_manager.as_deref(),
    )?;
    let mut write = |text: &str| out.write_all(text.as_bytes()).map_err(ToolError::Write);
    if args.shadow {
        write(&shadow_report(&target))?;
        return Ok(0);
    }
    let Target { lease, manager, .. } = &target;
    let namespace = &lease.namespace;
    let connection = crate::kubeclient::connect(&args.client).await?;
    let (client, server) = (&connection.client, connection.server.as_str());

    let mut lease_found = false;
    if args.yes {
        // Before anything changes: stopping this instance would not stop that one.
        refuse_if_writer_runs(client, server, &target).await?;
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
                    stopped =
                        format!(" (deployment {namespace}/{deployment} is at 0 replicas now)");
                    write(&format!(
                        "scaled deployment {namespace}/{deployment} to 0 replicas\n"
                    ))?;
                }
                Err(kube::Error::Api(e)) if e.code == 404 && args.ignore_not_found => write(
                    &format!("no deployment {namespace}/{deployment}: nothing to scale\n"),
                )?,
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
            lease_found = current.is_some();
            let Some(holder) = current.and_then(|l| live_holder(&l, Timestamp::now())) else {
                break;
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

    let nodes = list_nodes(client, server, &names).await?;
    let plan = removals(&nodes, manager, &names);
    // Without --yes the Lease is only read for what is said: one this identity may not
    // read counts as found, and its holder goes unsaid.
    let own = if args.yes {
        None
    } else {
        let read = read_lease(client, lease).await;
        lease_found = !matches!(read, Ok(None));
        read.ok().flatten()
    };
    if plan.is_empty() && !lease_found {
        if args.ignore_not_found {
            write(&format!(
                "found nothing to remove: no Lease {lease}, and none of the {} node(s) \
                 carries a condition of field manager {manager:?} (--ignore-not-found: done)\n",
                nodes.len()
            ))?;
            return Ok(0);
        }
        return Err(UninstallError::NothingFound {
            lease: lease.to_string(),
            manager: manager.clone(),
            nodes: nodes.len(),
            seen: kumaco_managers_seen(&nodes),
        }
        .into());
    }
    let count: usize = plan.iter().map(|r| r.removed.len()).sum();
    if plan.is_empty() {
        write(&format!(
            "no node carries a condition owned by field manager {manager:?}\n"
        ))?;
    } else {
        write(&format!(
            "field manager {manager:?} owns {count} condition(s) on {} node(s):\n{}",
            plan.len(),
            removals_table(&plan)
        ))?;
        for r in plan.iter().filter(|r| r.in_progress) {
            write(&format!(
                "warning: {} is in maintenance ({}=True): without it, an executor takes the \
                 maintenance for ended and may uncordon the node\n",
                r.node,
                names.to_wire(IN_PROGRESS)
            ))?;
        }
    }
    if !args.yes {
        if let Some(holder) = own.and_then(|l| live_holder(&l, Timestamp::now())) {
            write(&format!(
                "the instance still runs (Lease {lease} held by {holder}): stop it before \
                 removing its conditions, or pass --stop-deployment\n"
            ))?;
        }
        if let (Some(writer), Ok(Some(holder))) =
            (&target.writer, writer_holder(client, server, &target).await)
        {
            write(&format!(
                "field manager {manager:?} writes for the instance of Lease {writer}, held by \
                 {holder}: that instance runs, and --yes refuses to remove its conditions\n"
            ))?;
        }
        write(
            "dry run: nothing changed. Stop the instance, then run again with --yes to \
             remove them (and its Lease).\n",
        )?;
        return Ok(0);
    }

    // Again just before the removal: that instance may have started meanwhile.
    refuse_if_writer_runs(client, server, &target).await?;
    // An apply that names no condition: the manager keeps nothing, and the API server
    // removes what it alone owned.
    let api = Api::<Node>::all(client.clone());
    let params = PatchParams::apply(manager);
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
                    server,
                    format!("remove the conditions of node {}", r.node),
                    e,
                ));
            }
        }
    }
    let left = removals(&list_nodes(client, server, &names).await?, manager, &names);
    if let Some(r) = left.iter().find(|r| !r.removed.is_empty()) {
        return Err(UninstallError::ConditionsCameBack {
            manager: manager.clone(),
            node: r.node.clone(),
        }
        .into());
    }
    match Api::<Lease>::namespaced(client.clone(), namespace)
        .delete(&lease.name, &DeleteParams::default())
        .await
    {
        Ok(_) => write(&format!("deleted Lease {lease}\n"))?,
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(api_error(server, format!("delete Lease {lease}"), e)),
    }
    write(&format!(
        "removed {count} condition(s) from {} node(s)\n",
        plan.len()
    ))?;
    Ok(0)
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
}
