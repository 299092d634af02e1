//! Starting the controller: the watches and the gates' tasks spawned, their first lists
//! and reads awaited (no pass decides from a cache or a verdict not read yet), and the
//! [`Shell`] the passes run in assembled.

use std::sync::Arc;

use kube::Client;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;
use tracing::{info, warn};

use super::events::Poster;
use super::fence::Fence;
use super::gates::budgets::BudgetGate;
use super::gates::{alerts, checks, pause};
use super::reconcile::Shell;
use super::shadow::Shadow;
use super::sources::{Source, Sources};
use super::watch::{self, LabelKeys, ListState, Tombstones, Waiting};
use super::windows::WindowCache;
use super::writer::NodeWriter;
use super::{Connect, ControllerError, forecast, notifier, pods, report, silences};
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::config::Settings;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::node::SlimNode;
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
    let client = connect()?;
    let alertmanager = match &settings.silences {
        Some(s) => Some(crate::alertmanager::Alertmanager::new(s.endpoint.clone())?),
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
    // Whatever the gates read: each source has its task, and its outcomes decide.
    let sources = Sources::new(wake.clone(), metrics.clone());
    let gate_lists = spawn_sources(
        &client,
        &connect,
        &settings,
        alertmanager.as_ref(),
        &nodes,
        &sources,
        &wake,
        &metrics,
    )?;
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
    if nodes.wait_until_ready().await.is_err() || !windows.ready().await {
        return Err(ControllerError::WatchEnded);
    }
    // No pass before every gate's source has answered once, read or failed: a start must
    // not go ahead of a verdict not known yet, and a source that cannot be read holds
    // every start from the first pass.
    sources.first_outcomes().await;

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
    let mut lists: Vec<(ListState, Option<Source>)> = vec![(node_lists, None)];
    lists.extend(window_lists.into_iter().map(|l| (l, None)));
    lists.extend(gate_lists.lists.into_iter().map(|(l, s)| (l, Some(s))));
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
    let forecast_slot = notifier::ForecastSlot::default();
    // Without a sink, it is there to delete a record no sink needs any more.
    let notifier = if settings.dry_run && settings.notify.sinks.is_empty() {
        None
    } else {
        Some(
            notifier::Notifier::spawn(notifier::Context {
                settings: settings.notify.clone(),
                // Connections of its own, as the Lease's: its few requests leave no idle
                // connection in the watches' pool for a swallowing network to kill.
                client: connect()?,
                nodes: nodes.clone(),
                scope: settings.node_selector.clone(),
                manager: settings.field_manager.clone(),
                lease: settings.lease.clone(),
                leadership: leadership.clone(),
                dry_run: settings.dry_run,
                forecast: forecast_slot.clone(),
                metrics: metrics.clone(),
            })
            .map_err(ControllerError::Notify)?,
        )
    };
    let shell = Shell {
        silencer,
        notifier,
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
        forecaster: forecast::Forecaster::new(settings.forecast_interval, forecast_slot),
        connect,
        leadership,
        settings,
        metrics,
        nodes,
        windows,
        pods: gate_lists.pods,
        budgets: gate_lists.budgets,
        sources,
    };
    Ok((shell, wake))
}

/// What the gates' sources leave the shell: the stores a pass reads, and the lists the
/// fence waits for.
struct GateSources {
    pods: Vec<Store<pods::SlimPod>>,
    budgets: Option<BudgetGate>,
    lists: Vec<(ListState, Source)>,
}

/// Spawns the task of every source the settings name (the pause, the blocking pods, the
/// object checks, the alerts and queries, the PodDisruptionBudgets), each recording its
/// outcomes in `sources`.
#[allow(clippy::too_many_arguments)]
fn spawn_sources(
    client: &Client,
    connect: &Connect,
    settings: &Settings,
    alertmanager: Option<&crate::alertmanager::Alertmanager>,
    nodes: &Store<SlimNode>,
    sources: &Sources,
    wake: &Arc<Notify>,
    metrics: &Arc<Metrics>,
) -> Result<GateSources, alerts::StartError> {
    let mut out = GateSources {
        pods: Vec::new(),
        budgets: None,
        lists: Vec::new(),
    };
    let Some(policy) = settings.in_progress.as_ref() else {
        return Ok(out);
    };
    // Only nodes waiting to start can a pod or a budget change a decision on; a dry run's
    // would-be writes never show on the nodes, so it counts every change.
    let waiting = (!settings.dry_run).then(|| Waiting {
        nodes: nodes.clone(),
        required: policy.required.clone(),
    });
    out.lists.push(pause::spawn(
        client,
        connect,
        &settings.lease,
        settings.watch_timeout_secs,
        sources,
    ));
    for (store, list, source) in pods::spawn(
        client,
        connect,
        &policy.block_pod_selectors,
        settings.watch_timeout_secs,
        wake.clone(),
        waiting.clone(),
        sources,
    ) {
        out.pods.push(store);
        out.lists.push((list, source));
    }
    out.lists.extend(checks::spawn(
        client,
        connect,
        &settings.gates.checks,
        settings.watch_timeout_secs,
        sources,
        metrics,
    ));
    if let Some(gate) = &settings.gates.alerts {
        alerts::spawn(gate, alertmanager, &settings.field_manager, sources)?;
    }
    if settings.gates.budgets {
        let (gate, list) = BudgetGate::spawn(
            client,
            connect,
            settings.watch_timeout_secs,
            wake.clone(),
            waiting,
            sources,
            metrics.clone(),
        );
        out.lists.push((list, gate.source().clone()));
        out.budgets = Some(gate);
    }
    Ok(out)
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
