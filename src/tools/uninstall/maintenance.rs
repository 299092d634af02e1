//! The nodes in maintenance when an instance is uninstalled: their maintenance is left to
//! end before the instance stops, since an executor takes a maintenance whose condition
//! is gone for ended, mid-drain. New starts are paused meanwhile (the instance's pause
//! Lease, [`crate::pause`]), so that the wait ends; the instance, still running, ends
//! each maintenance as it completes. Bounded by `--wait-for-maintenance`: past it
//! nothing is removed and the nodes are named. `--force` does not wait.

use std::time::{Duration, Instant};

use jiff::Timestamp;

use super::instance::Target;
use super::removals::{list_nodes, removals};
use super::{UninstallError, fmt_wait, in_maintenance};
use crate::kubeclient::Connection;
use crate::node::names::Names;
use crate::pause::pause_lease;
use crate::tools::ToolError;

/// How often the nodes are listed while waiting.
const POLL: Duration = Duration::from_secs(2);

/// Who the pause names.
const BY: &str = "kumaco uninstall";

/// Waits, new starts paused, until none of the nodes whose conditions the target's
/// field manager owns is in maintenance, for at most `wait`; says what it waits for as
/// it changes. Nothing when none is, or with `force` (then only a warning).
pub async fn wait(
    connection: &Connection,
    target: &Target,
    names: &Names,
    wait: Duration,
    force: bool,
    write: &mut impl FnMut(&str) -> Result<(), ToolError>,
) -> Result<(), ToolError> {
    let (client, server) = (&connection.client, connection.server.as_str());
    let in_progress = |nodes: &[crate::node::SlimNode]| -> Vec<String> {
        in_maintenance(&removals(nodes, &target.manager, names))
            .into_iter()
            .map(str::to_string)
            .collect()
    };
    let mut waiting = in_progress(&list_nodes(client, server, names).await?);
    if waiting.is_empty() {
        return Ok(());
    }
    if force {
        return write(&format!(
            "--force: not waiting for {} node(s) in maintenance ({}): their conditions go \
             mid-drain\n",
            waiting.len(),
            waiting.join(", ")
        ));
    }
    // Only the running instance ends a maintenance: without it the wait would be in vain.
    let running = super::instance::read_lease(client, &target.lease)
        .await
        .ok()
        .flatten()
        .and_then(|l| super::instance::live_holder(&l, Timestamp::now()));
    if running.is_none() {
        return Err(UninstallError::NotRunning {
            count: waiting.len(),
            nodes: waiting.join(", "),
            lease: target.lease.to_string(),
        }
        .into());
    }
    crate::tools::pause::set(
        connection,
        &target.lease,
        BY,
        "uninstalling this instance: no maintenance starts while those in progress end",
        Timestamp::now(),
    )
    .await?;
    let pause = pause_lease(&target.lease);
    write(&format!(
        "paused new starts (Lease {pause}); waiting up to {} for {} node(s) in maintenance to \
         end: {}\n",
        fmt_wait(wait),
        waiting.len(),
        waiting.join(", ")
    ))?;
    let deadline = Instant::now() + wait;
    loop {
        let now = in_progress(&list_nodes(client, server, names).await?);
        if now.is_empty() {
            return write("every maintenance in progress ended\n");
        }
        if now != waiting {
            let left = deadline.saturating_duration_since(Instant::now());
            write(&format!(
                "still in maintenance: {} ({} left)\n",
                now.join(", "),
                fmt_wait(Duration::from_secs(left.as_secs()))
            ))?;
            waiting = now;
        }
        if Instant::now() >= deadline {
            return Err(UninstallError::StillInMaintenance {
                count: waiting.len(),
                nodes: waiting.join(", "),
                waited: fmt_wait(wait),
                pause: pause.to_string(),
            }
            .into());
        }
        tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}
