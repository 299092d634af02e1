//! Starting the controller: the watches and the gates' tasks spawned, their first lists
//! and reads awaited (no pass decides from a cache or a verdict not read yet), and the
//! [`Shell`] the passes run in assembled.

use std::sync::Arc;

use tokio::sync::Notify;
use tracing::{info, warn};

use super::events::Poster;
use super::fence::Fence;
use super::gates::alerts::AlertGates;
use super::gates::budgets::BudgetGate;
use super::gates::checks::ObjectChecks;
use super::gates::{self, Verdicts};
use super::reconcile::Shell;
use super::shadow::Shadow;
use super::watch::{self, LabelKeys, Tombstones};
use super::windows::WindowCache;
use super::writer::NodeWriter;
use super::{Connect, ControllerError, forecast, pods, report, silences};
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::config::Settings;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::pass::Rules;
use crate::peer_leases::PeerLeases;

/// Spawns the watches and the gates' tasks, waits for their first lists and reads, and
/// returns the shell with the notification every one of them wakes a pass by.
pub(super) async fn start(
    connect: Connect,
    settings: Settings,
    metrics: Arc<Metrics>,
    leadership: Leadership,
) -> Result<(Shell, Arc<Notify>), ControllerError> {
    let client = connect().map_err(|e| ControllerError::Client(e.to_string()))?;
    let alertmanager = match &settings.silences {
        Some(s) => Some(
            crate::alertmanager::Alertmanager::new(s.endpoint.clone())
                .map_err(|e| ControllerError::Client(e.to_string()))?,
        ),
        None => None,
    };
    let wake = Arc::new(Notify::new());
    // Lists start after the campaign's first round: a replica leading from its start
    // writes from its first lists instead of listing twice (`fence`).
    leadership.first_round().await;

    let label_keys = LabelKeys::default();
    let (nodes, node_lists) = watch::spawn_nodes(
        &client,
        &connect,
        &settings,
        condition_types_read(&settings),
        label_keys.clone(),
        wake.clone(),
        metrics.clone(),
    );
    let policy = settings.in_progress.as_ref();
    let pod_watches = pods::spawn(
        &client,
        &connect,
        policy.map_or(&[][..], |p| &p.block_pod_selectors),
        settings.watch_timeout_secs,
        wake.clone(),
        (!settings.dry_run).then(|| pods::Waiting {
            nodes: nodes.clone(),
            required: policy.map_or_else(Vec::new, |p| p.required.clone()),
        }),
    );
    if settings.gates.budgets {
        BudgetGate::check_access(&client)
            .await
            .map_err(|e| ControllerError::Client(e.to_string()))?;
    }
    // The gates read by tasks of their own publish their verdicts here and wake a pass.
    let verdicts = Verdicts::default();
    let mut alert_gates = match &settings.gates.alerts {
        Some(gate) => Some(
            AlertGates::spawn(
                gate,
                alertmanager.as_ref(),
                &settings.field_manager,
                nodes.clone(),
                settings.node_selector.clone(),
                verdicts.clone(),
                wake.clone(),
                metrics.clone(),
            )
            .map_err(|e| ControllerError::Client(e.to_string()))?,
        ),
        None => None,
    };
    let mut object_checks = ObjectChecks::start(
        &client,
        &connect,
        &settings.gates.checks,
        settings.watch_timeout_secs,
        wake.clone(),
        verdicts.clone(),
        metrics.clone(),
    )
    .await
    .map_err(|e| ControllerError::Client(e.to_string()))?;
    let budget_gate = settings.gates.budgets.then(|| {
        BudgetGate::spawn(
            &client,
            &connect,
            settings.watch_timeout_secs,
            wake.clone(),
            (!settings.dry_run).then(|| gates::budgets::Waiting {
                nodes: nodes.clone(),
                required: policy.map_or_else(Vec::new, |p| p.required.clone()),
            }),
            metrics.clone(),
        )
    });
    let tombstones = Tombstones::default();
    let (window_stores, window_lists): (Vec<_>, Vec<_>) =
        watch::spawn_windows(&client, &connect, &settings, &tombstones, wake.clone())
            .into_iter()
            .unzip();
    info!(namespaces = ?settings.namespaces, node_selector = %settings.node_selector,
          field_manager = %settings.field_manager,
          "waiting for the initial lists of nodes and window ConfigMaps");
    let windows = WindowCache::new(
        window_stores,
        tombstones,
        label_keys,
        policy_label_keys(&settings),
        settings.node_selector.clone(),
        settings.default_zone.clone(),
    );
    let (pods, pod_lists): (Vec<_>, Vec<_>) = pod_watches.into_iter().unzip();
    if nodes.wait_until_ready().await.is_err() || !windows.ready().await {
        return Err(ControllerError::WatchEnded);
    }
    for p in &pods {
        p.wait_until_ready()
            .await
            .map_err(|_| ControllerError::WatchEnded)?;
    }
    // No start before every budget is known: an empty cache would let any node go.
    let (budgets, budget_lists) = budget_gate.unzip();
    if let Some(b) = &budgets {
        b.wait_until_ready()
            .await
            .map_err(|_| ControllerError::WatchEnded)?;
    }
    // No pass before the alerts and queries are read once: a start must not go ahead
    // of a verdict not read yet.
    if let Some(gates) = &mut alert_gates {
        gates
            .first_reads()
            .await
            .map_err(|e| ControllerError::Client(e.to_string()))?;
    }
    object_checks
        .first_verdict()
        .await
        .map_err(|_| ControllerError::WatchEnded)?;

    if let Some(why) = settings.invisible_to_peers {
        warn!(field_manager = %settings.field_manager, why,
              "other kumaco instances sharing nodes with this one cannot tell that it runs: they \
               take its conditions for stale (never defer to them, report no contest with it); \
               docs/instances.md, \"Live or stale\"");
    }
    if settings.dry_run {
        info!(
            "dry run (shadow mode): decisions are logged and exported as kumaco_dry_run_*; nothing is written"
        );
    }
    let mut lists = vec![node_lists];
    lists.extend(window_lists);
    lists.extend(pod_lists);
    lists.extend(budget_lists);
    lists.extend(object_checks.lists);
    // Started after the initial lists: its first round sees every node.
    let holding = settings.silences.clone().filter(|s| s.hold);
    let silencer = holding.zip(alertmanager).map(|(s, am)| {
        silences::Silencer::spawn(
            s,
            am,
            nodes.clone(),
            settings.node_selector.clone(),
            leadership.clone(),
            settings.dry_run,
            metrics.clone(),
        )
    });
    let shell = Shell {
        silencer,
        rules: rules(&settings),
        writer: NodeWriter::new(
            client.clone(),
            settings.field_manager.clone(),
            settings.condition_names.clone(),
            metrics.clone(),
        ),
        events: Poster::new(
            client.clone(),
            settings.condition_names.clone(),
            metrics.clone(),
        ),
        node_events: settings.node_events.then(|| {
            Poster::new(
                client.clone(),
                settings.condition_names.clone(),
                metrics.clone(),
            )
        }),
        peers: PeerLeases::start(client, wake.clone()),
        fence: Fence::new(lists),
        shadow: Shadow::default(),
        contests: report::Contests::default(),
        forecaster: forecast::Forecaster::new(settings.forecast_interval),
        connect,
        leadership,
        settings,
        metrics,
        nodes,
        windows,
        pods,
        budgets,
        verdicts,
    };
    Ok((shell, wake))
}

/// The condition types any decision reads; the node cache keeps no others.
fn condition_types_read(settings: &Settings) -> Vec<String> {
    let mut read: Vec<String> = [
        UNDER_MAINTENANCE,
        MAINTENANCE_IN_PROGRESS,
        MAINTENANCE_PLANNED,
    ]
    .map(String::from)
    .to_vec();
    if let Some(policy) = &settings.in_progress {
        read.extend(policy.required.iter().chain(&policy.blocking).cloned());
    }
    read
}

/// The label keys the policy reads on nodes (`--block-node-selector`,
/// `--max-in-progress-per`): a change under one of them wakes a pass.
fn policy_label_keys(settings: &Settings) -> Vec<String> {
    let Some(policy) = &settings.in_progress else {
        return Vec::new();
    };
    let selectors = policy.block_node_selectors.iter();
    selectors
        .flat_map(|s| s.requirements().iter().map(|r| r.key().to_string()))
        .chain(policy.group_ceilings.iter().map(|g| g.key.clone()))
        .collect()
}

/// The pass's rules, from the settings.
fn rules(settings: &Settings) -> Rules {
    Rules {
        node_selector: settings.node_selector.clone(),
        instance: settings.field_manager.clone(),
        in_progress: settings.in_progress.clone(),
        planned_lead_time: settings.planned_lead_time,
        resync: jiff::SignedDuration::try_from(settings.resync_interval)
            .unwrap_or(jiff::SignedDuration::MAX),
    }
}
