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
//! left, and deletes the instance's Lease, its pause and its notifications' record.
//!
//! A field manager can be shared: a shadow (`--dry-run`) given the live instance's
//! reasons on the live one's ownership. So the instance that writes as a manager is the
//! one whose Lease the manager names, whichever instance is being uninstalled: while
//! that Lease is held, nothing is removed; and a shadow (`--shadow`) removes nothing at
//! all, having written nothing. Nothing is guessed either: the instance's namespace is
//! given, or named by its field manager; and finding neither its Lease nor a condition
//! of its manager is an error of its own (most often a mistyped name) unless
//! `--ignore-not-found` says that nothing to remove is expected.

//!
//! Its parts: [`instance`], which instance is uninstalled and whether it (or the one
//! writing as its field manager) runs, and stopping it; [`maintenance`], the nodes in
//! maintenance waited for first, new starts paused meanwhile; [`removals`], what the
//! manager's conditions are on the nodes, and their removal. This module runs the
//! command.

pub mod instance;
pub mod maintenance;
pub mod removals;
#[cfg(test)]
mod tests;

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};

use super::ToolError;
use crate::cli::UninstallArgs;
use crate::conditions::MAINTENANCE_IN_PROGRESS as IN_PROGRESS;
use crate::kubeclient::Connection;
use crate::node::names::Names;
use instance::{
    Target, live_holder, read_lease, refuse_if_writer_runs, shadow_report, target, writer_holder,
};
use removals::{kumaco_managers_seen, list_nodes, removals, removals_table};

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
    /// Nodes still in maintenance once `--wait-for-maintenance` passed.
    #[error(
        "{count} node(s) still in maintenance after waiting {waited}: {nodes}. Nothing was \
         removed, and new starts stay paused (Lease {pause}), so that no other maintenance \
         begins. Run again once they end (`kumaco status` shows them) or with a longer \
         --wait-for-maintenance; --force removes their conditions mid-drain; `kumaco \
         resume` ends the pause if you keep the instance"
    )]
    StillInMaintenance {
        count: usize,
        nodes: String,
        waited: String,
        pause: String,
    },
    /// Nodes in maintenance, and the instance that would end it does not run.
    #[error(
        "{count} node(s) in maintenance ({nodes}), and the instance of Lease {lease} does \
         not run, so nothing ends their maintenance. Nothing was removed. Start it again \
         (scale its Deployment up) and run again, which waits for them (stop it with \
         --stop-deployment, not before), or pass --force to remove their conditions \
         mid-drain"
    )]
    NotRunning {
        count: usize,
        nodes: String,
        lease: String,
    },
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

/// An API error, with the rights the command needs when it was refused.
fn api_error(server: &str, action: String, error: kube::Error) -> ToolError {
    ToolError::Api {
        action,
        server: server.to_string(),
        hint: if crate::kubeclient::is_forbidden(&error) {
            ". kumaco uninstall needs `list` on nodes, `patch` on nodes/status, `get` and \
             `delete` on the instance's Lease, `delete` on its notifications' record (the \
             Lease <lease name>-notified), `get` on the Lease its field manager names \
             (and `patch` on deployments/scale with --stop-deployment): \
             docs/uninstall.md"
                .into()
        } else {
            String::new()
        },
        error: Box::new(error),
    }
}

/// What one run of the command works with.
struct Run<'a> {
    args: &'a UninstallArgs,
    names: Names,
    target: Target,
    /// `--wait`: for the instance to stop.
    wait: Duration,
    /// `--wait-for-maintenance`.
    wait_for_maintenance: Duration,
}

/// Runs `kumaco uninstall`; the report on `out`. Returns the exit status.
pub async fn run(args: &UninstallArgs, out: &mut impl std::io::Write) -> Result<u8, ToolError> {
    let names = Names::new(
        &args.condition_names.under_maintenance_condition,
        &args.condition_names.in_progress_condition,
        &[],
    )
    .map_err(|e| super::flag_err(e.flag(), e))?;
    let run = Run {
        args,
        names,
        target: target(
            args.lease_namespace.as_deref(),
            args.lease_name.as_deref(),
            args.field_manager.as_deref(),
        )?,
        wait: go_duration("wait", &args.wait)?,
        wait_for_maintenance: go_duration("wait-for-maintenance", &args.wait_for_maintenance)?,
    };
    let mut write = |text: &str| out.write_all(text.as_bytes()).map_err(ToolError::Write);
    if args.shadow {
        write(&shadow_report(&run.target))?;
        return Ok(0);
    }
    let connection = crate::kubeclient::connect(&args.client).await?;
    if args.yes {
        run.remove(&connection, &mut write).await
    } else {
        run.preview(&connection, &mut write).await
    }
}

/// A Go duration flag as a wait.
fn go_duration(flag: &'static str, text: &str) -> Result<Duration, ToolError> {
    let nanos = crate::duration::parse(text)
        .map_err(|e| super::flag_err(flag, e))?
        .as_nanos();
    Ok(Duration::from_nanos(
        u64::try_from(nanos.max(0)).unwrap_or(u64::MAX),
    ))
}

impl Run<'_> {
    /// Without `--yes`: what would be removed, and what stands in the way.
    async fn preview(
        &self,
        connection: &Connection,
        write: &mut impl FnMut(&str) -> Result<(), ToolError>,
    ) -> Result<u8, ToolError> {
        let (client, server) = (&connection.client, connection.server.as_str());
        let Target { lease, manager, .. } = &self.target;
        let nodes = list_nodes(client, server, &self.names).await?;
        let plan = removals(&nodes, manager, &self.names);
        // The Lease is only read for what is said: one this identity may not read counts
        // as found, and its holder goes unsaid.
        let read = read_lease(client, lease).await;
        let lease_found = !matches!(read, Ok(None));
        if let Some(code) = self.nothing_found(&plan, lease_found, &nodes, write)? {
            return Ok(code);
        }
        self.report(&plan, write)?;
        let in_maintenance = in_maintenance(&plan);
        if !in_maintenance.is_empty() {
            write(&format!(
                "{} node(s) in maintenance ({}): --yes pauses new starts and waits up to {} \
                 (--wait-for-maintenance) for them to end before it stops the instance; \
                 --force removes their conditions mid-drain\n",
                in_maintenance.len(),
                in_maintenance.join(", "),
                fmt_wait(self.wait_for_maintenance)
            ))?;
        }
        if let Some(holder) = read
            .ok()
            .flatten()
            .and_then(|l| live_holder(&l, Timestamp::now()))
        {
            write(&format!(
                "the instance still runs (Lease {lease} held by {holder}): stop it before \
                 removing its conditions, or pass --stop-deployment\n"
            ))?;
        }
        if let (Some(writer), Ok(Some(holder))) = (
            &self.target.writer,
            writer_holder(client, server, &self.target).await,
        ) {
            write(&format!(
                "field manager {manager:?} writes for the instance of Lease {writer}, held by \
                 {holder}: that instance runs, and --yes refuses to remove its conditions\n"
            ))?;
        }
        write(
            "dry run: nothing changed. Stop the instance, then run again with --yes to \
             remove them (and its Lease).\n",
        )?;
        Ok(0)
    }

    /// With `--yes`: the nodes in maintenance left to end, the instance stopped, its
    /// conditions removed, its Leases deleted.
    async fn remove(
        &self,
        connection: &Connection,
        write: &mut impl FnMut(&str) -> Result<(), ToolError>,
    ) -> Result<u8, ToolError> {
        let (client, server) = (&connection.client, connection.server.as_str());
        let Target { lease, manager, .. } = &self.target;
        // Before anything changes: stopping this instance would not stop that one.
        refuse_if_writer_runs(client, server, &self.target).await?;
        // This command stops the instance: the maintenance in progress ends first, while
        // it still runs. (Without --stop-deployment someone else stops it, and a running
        // instance is refused below.)
        if self.args.stop_deployment.is_some() {
            maintenance::wait(
                connection,
                &self.target,
                &self.names,
                self.wait_for_maintenance,
                self.args.force,
                write,
            )
            .await?;
        }
        let lease_found =
            instance::stop(client, server, lease, self.args, self.wait, write).await?;
        let nodes = list_nodes(client, server, &self.names).await?;
        let plan = removals(&nodes, manager, &self.names);
        if let Some(code) = self.nothing_found(&plan, lease_found, &nodes, write)? {
            return Ok(code);
        }
        let in_maintenance = in_maintenance(&plan);
        if !in_maintenance.is_empty() && !self.args.force {
            // Stopped with nodes mid-maintenance: nothing ends it any more, and removing
            // it now would leave an executor taking it for ended mid-drain.
            return Err(UninstallError::NotRunning {
                count: in_maintenance.len(),
                nodes: in_maintenance.join(", "),
                lease: lease.to_string(),
            }
            .into());
        }
        self.report(&plan, write)?;
        // Again just before the removal: that instance may have started meanwhile.
        refuse_if_writer_runs(client, server, &self.target).await?;
        removals::remove(client, server, manager, &self.names, &plan).await?;
        match Api::<Lease>::namespaced(client.clone(), &lease.namespace)
            .delete(&lease.name, &DeleteParams::default())
            .await
        {
            Ok(_) => write(&format!("deleted Lease {lease}\n"))?,
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(api_error(server, format!("delete Lease {lease}"), e)),
        }
        // The instance is gone, and with it the reason for its pause.
        if crate::tools::pause::unset(connection, lease).await? {
            write("deleted its pause Lease\n")?;
        }
        // And what its sinks were told: no leader reads it any more.
        let record = crate::notify::record::record_lease(lease);
        match Api::<Lease>::namespaced(client.clone(), &record.namespace)
            .delete(&record.name, &DeleteParams::default())
            .await
        {
            Ok(_) => write(&format!(
                "deleted its notifications' record, Lease {record}\n"
            ))?,
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(api_error(server, format!("delete Lease {record}"), e)),
        }
        let count: usize = plan.iter().map(|r| r.removed.len()).sum();
        write(&format!(
            "removed {count} condition(s) from {} node(s)\n",
            plan.len()
        ))?;
        Ok(0)
    }

    /// Neither a Lease nor a condition of the manager: exit 3, or 0 with
    /// `--ignore-not-found` (`Some`); `None` when there is something to remove.
    fn nothing_found(
        &self,
        plan: &[removals::Removal],
        lease_found: bool,
        nodes: &[crate::node::SlimNode],
        write: &mut impl FnMut(&str) -> Result<(), ToolError>,
    ) -> Result<Option<u8>, ToolError> {
        if !plan.is_empty() || lease_found {
            return Ok(None);
        }
        let Target { lease, manager, .. } = &self.target;
        if self.args.ignore_not_found {
            write(&format!(
                "found nothing to remove: no Lease {lease}, and none of the {} node(s) \
                 carries a condition of field manager {manager:?} (--ignore-not-found: done)\n",
                nodes.len()
            ))?;
            return Ok(Some(0));
        }
        Err(UninstallError::NothingFound {
            lease: lease.to_string(),
            manager: manager.clone(),
            nodes: nodes.len(),
            seen: kumaco_managers_seen(nodes),
        }
        .into())
    }

    /// What is removed, node by node, and a warning for each node in maintenance.
    fn report(
        &self,
        plan: &[removals::Removal],
        write: &mut impl FnMut(&str) -> Result<(), ToolError>,
    ) -> Result<(), ToolError> {
        let manager = &self.target.manager;
        if plan.is_empty() {
            return write(&format!(
                "no node carries a condition owned by field manager {manager:?}\n"
            ));
        }
        let count: usize = plan.iter().map(|r| r.removed.len()).sum();
        write(&format!(
            "field manager {manager:?} owns {count} condition(s) on {} node(s):\n{}",
            plan.len(),
            removals_table(plan)
        ))?;
        for r in plan.iter().filter(|r| r.in_progress) {
            write(&format!(
                "warning: {} is in maintenance ({}=True): without it, an executor takes the \
                 maintenance for ended and may uncordon the node\n",
                r.node,
                self.names.to_wire(IN_PROGRESS)
            ))?;
        }
        Ok(())
    }
}

/// The nodes of `plan` in maintenance now.
fn in_maintenance(plan: &[removals::Removal]) -> Vec<&str> {
    plan.iter()
        .filter(|r| r.in_progress)
        .map(|r| r.node.as_str())
        .collect()
}

/// A wait as a Go duration: `1m30s`.
fn fmt_wait(d: Duration) -> String {
    let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    crate::duration::GoDuration::from_nanos(nanos).to_string()
}
