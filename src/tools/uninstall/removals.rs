//! What one field manager's conditions are on the nodes, and their removal: an apply
//! by that manager naming no condition, then a check that none came back.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{UninstallError, api_error};
use crate::conditions::{MAINTENANCE_IN_PROGRESS as IN_PROGRESS, Status};
use crate::node::SlimNode;
use crate::node::names::Names;
use crate::peers;
use crate::tools::ToolError;

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

pub(super) async fn list_nodes(
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
        .map(|n| crate::tools::nodes::slim(n, names))
        .collect())
}

/// Removes the conditions `plan` lists: an apply by `manager` that names no condition,
/// so that the API server drops what the manager alone owned; then checks that none is
/// back (something else writing as the manager).
pub async fn remove(
    client: &kube::Client,
    server: &str,
    manager: &str,
    names: &Names,
    plan: &[Removal],
) -> Result<(), ToolError> {
    // An apply that names no condition: the manager keeps nothing, and the API server
    // removes what it alone owned.
    let api = Api::<Node>::all(client.clone());
    let params = PatchParams::apply(manager);
    for r in plan {
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
    let left = removals(&list_nodes(client, server, names).await?, manager, names);
    if let Some(r) = left.iter().find(|r| !r.removed.is_empty()) {
        return Err(UninstallError::ConditionsCameBack {
            manager: manager.to_string(),
            node: r.node.clone(),
        }
        .into());
    }
    Ok(())
}
