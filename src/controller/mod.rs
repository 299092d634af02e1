//! The controller: the I/O around [`crate::pass`]. It watches window ConfigMaps and
//! Nodes, calls the pass on what the watches show and the clock, applies the node writes
//! it returns, creates the events it says should exist, and records its own writes until
//! the cache shows them.
//!
//! One loop, no per-object workers: every wake-up (a watch event, the timer at the next
//! window edge, a leadership change, the periodic resync) runs one pass. Nothing decided
//! here depends on what this process saw before; what it keeps between passes is a cache
//! of the cluster and retry timers. Its parts:
//!
//! - [`watch`]: the watches and their caches, lists, resumes and relevance;
//! - [`windows`]: the window cache (parsed windows, the configuration hash, deletions);
//! - [`pods`]: the pods that keep a node from starting (`--block-pod-selector`);
//! - [`fence`]: a new leader writes only from lists asked for in its term;
//! - [`writer`]: the one writer (node applies; the classification and backoff every
//!   write shares), and [`events`]: creating the events due, by name;
//! - [`shadow`]: `--dry-run`, the pass executed by logging;
//! - [`report`]: the pass's counts and contests, as metrics and log lines;
//! - [`silences`]: with `--alertmanager-url`, the silences held for the nodes in
//!   maintenance, by a task beside the passes that no pass waits for;
//! - [`gates`]: the health gates' sources (PodDisruptionBudgets, alerts and queries,
//!   object checks);
//! - [`forecast`]: the forecast behind the `kumaco_forecast_*` gauges, on a blocking
//!   thread beside the passes.

pub mod events;
pub mod fence;
pub mod forecast;
pub mod gates;
pub mod pods;
pub mod report;
pub mod shadow;
pub mod silences;
pub mod watch;
pub mod windows;
pub mod writer;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::Client;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::budgets;
use crate::clock::ClockSteps;
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::config::Settings;
use crate::gates::{Gates, Hold};
use crate::in_progress::BlockingPod;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::node::{SlimNode, view};
use crate::node_events;
use crate::pass::{self, NodeView, Rules};
use crate::peer_leases::PeerLeases;
use events::Poster;
use fence::{Fence, Gate};
use gates::Verdicts;
use gates::alerts::AlertGates;
use gates::budgets::BudgetGate;
use gates::checks::ObjectChecks;
use shadow::Shadow;
use watch::{LabelKeys, Tombstones};
use windows::WindowCache;
use writer::NodeWriter;

/// Most node writes one pass sends (four rounds of the writer's concurrency, well under
/// a second here), ends of maintenance first ([`pass::first_writes`]): a window edge over
/// thousands of nodes is written by several passes, and an end that comes due meanwhile
/// (a node back from its reboot) waits at most for one such round of writes.
const MAX_WRITES_PER_PASS: usize = 128;

/// Most rounds of pod lists one pass waits for (the PodDisruptionBudget gate): each
/// round lists the nodes the pass asked for; a node held by its budget frees its slot
/// for the next one, which the next round lists. A pass that still asks after them
/// writes what it decided (none of the nodes it asked about starts) and runs again at
/// once.
const MAX_POD_LIST_ROUNDS: usize = 4;

/// How long after a failed pod list the pass that needs it runs again.
const POD_LIST_RETRY: jiff::SignedDuration = jiff::SignedDuration::from_secs(5);

/// Longest sleep between passes: a safety net (steps of the wall clock are noticed at
/// once by [`ClockSteps`]).
const MAX_SLEEP: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{0}")]
    Client(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("serving metrics/health: {0}")]
    Http(#[from] std::io::Error),
    #[error("watch stream ended unexpectedly")]
    WatchEnded,
}

/// Makes a client on connections of its own. The controller starts with one, and a new
/// leader whose caches predate its term lists again on a new one: connections the
/// network swallowed, which kept those caches behind, must not hold up the lists meant
/// to catch up, as does a watch whose list got no answer (`watch::LIST_STALL`).
pub type Connect = Arc<dyn Fn() -> Result<Client, crate::kubeclient::ClientError> + Send + Sync>;

/// Why `run` returned without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM or SIGINT.
    Signal,
    /// The window configuration changed and `--exit-on-config-change` is set.
    ConfigChanged,
}

/// Runs the controller until a signal (or a config change, if so configured).
pub async fn run(
    connect: Connect,
    settings: Settings,
    metrics: Arc<Metrics>,
    leadership: Leadership,
) -> Result<Exit, ControllerError> {
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
               docs/operations.md, \"When instances meet\"");
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
    let mut shell = Shell {
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

    let (mut clock, no_timerfd) = ClockSteps::new();
    if let Some(e) = no_timerfd {
        warn!(error = %e, "no timerfd on the realtime clock: steps of the wall clock are \
                           noticed within a second, by sampling");
    }
    let mut shutdown = std::pin::pin!(shutdown_signal());
    let mut first = true;
    loop {
        let started = Instant::now();
        let next_edge = match shell.reconcile().await {
            Step::ConfigChangedExit => return Ok(Exit::ConfigChanged),
            Step::Next(t) => t,
        };
        shell
            .metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64());
        if first {
            shell.metrics.set_ready();
            info!("ready");
            first = false;
        }
        let mut sleep = shell.settings.resync_interval.min(MAX_SLEEP);
        if let Some(t) = next_edge {
            sleep = sleep.min(until(t));
        }
        debug!(?sleep, ?next_edge, "sleeping");
        tokio::select! {
            _ = wake.notified() => {
                // Watch events come in bursts (kumaco's own writes echo back); one pass
                // for the burst is enough.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ = tokio::time::sleep(sleep) => {}
            _ = shell.leadership.changed() => {}
            step = clock.stepped() => {
                // Every edge moved relative to the monotonic timer the sleep runs on.
                info!(step_seconds = step.as_secs_f64(),
                      "the wall clock was stepped: re-deriving the conditions now");
                shell.metrics.clock_steps.inc();
            }
            _ = &mut shutdown => {
                info!("signal received, stopping");
                return Ok(Exit::Signal);
            }
        }
    }
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

enum Step {
    Next(Option<Timestamp>),
    ConfigChangedExit,
}

struct Shell {
    connect: Connect,
    leadership: Leadership,
    settings: Settings,
    rules: Rules,
    metrics: Arc<Metrics>,
    nodes: Store<SlimNode>,
    windows: WindowCache,
    /// One store per `--block-pod-selector`.
    pods: Vec<Store<pods::SlimPod>>,
    fence: Fence,
    writer: NodeWriter,
    events: Poster,
    /// `Some` with `--node-events`.
    node_events: Option<Poster>,
    peers: PeerLeases,
    shadow: Shadow,
    contests: report::Contests,
    forecaster: forecast::Forecaster,
    /// `Some` with `--alertmanager-url` (and `--silences`, the default).
    silencer: Option<silences::Silencer>,
    /// `Some` with `--pod-disruption-budgets`.
    budgets: Option<BudgetGate>,
    /// The verdicts of the gates read by tasks of their own.
    verdicts: Verdicts,
}

impl Shell {
    /// One pass: from the caches and the clock to the writes and events, executed if
    /// this replica may write. Returns when to wake up next by the clock.
    async fn reconcile(&mut self) -> Step {
        let now = Timestamp::now();
        if self.windows.load(&self.metrics, now) && self.settings.exit_on_config_change {
            return Step::ConfigChangedExit;
        }
        let cached = self.nodes.state();
        let manager = self.settings.field_manager.clone();
        let pods = pods::by_node(&self.pods);
        // Whether this replica may write now (a dry run decides as if it did): only
        // then are pods listed for the PodDisruptionBudget gate.
        let term = if self.settings.dry_run {
            None
        } else {
            self.writing_term()
        };
        let decides = self.settings.dry_run || term.is_some();
        let holds = self.verdicts.holds();
        let Passed {
            outcome,
            drains,
            list_failed,
        } = self
            .pass_with_gates(&cached, &manager, &pods, &holds, decides, now)
            .await;
        let beside = Beside {
            blocking: &pods,
            holds: &holds.nodes,
            drains: &drains,
        };
        self.peers.want(&outcome.leases, &outcome.refresh);
        let existing: HashSet<&str> = cached
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.writer.forget(&outcome.settled, &existing);
        report::counts(&self.metrics, &outcome);
        self.forecaster.maybe_start(
            self.rules.in_progress.as_ref(),
            &self.rules.node_selector,
            &cached,
            &pods,
            &holds,
            &self.windows,
            &self.metrics,
            now,
        );
        self.contests.log(
            &outcome.contested,
            &outcome.deferred,
            self.settings.resync_interval,
        );

        let mut could_write = false;
        let mut left_for_next_pass = false;
        if self.settings.dry_run {
            self.shadow.would_write(
                outcome.writes,
                views(&cached, &manager, &beside),
                &mut self.writer.pending,
                &self.metrics,
                now,
            );
            // After the would-be writes: no watch echo will wake another pass to see them.
            let node_events = if self.node_events.is_some() {
                node_events::due_now(
                    views(&cached, &manager, &beside),
                    Some(&self.writer.pending),
                    &outcome.contested,
                    &manager,
                    now,
                )
            } else {
                Vec::new()
            };
            self.shadow
                .would_post(&outcome.events, &node_events, &self.metrics);
        } else if let Some(term) = term {
            // Before this pass's writes: the task runs beside them.
            could_write = true;
            if let Some(silencer) = &self.silencer {
                silencer.after_pass(true);
            }
            // From the cluster as the cache shows it: this pass's writes get their events
            // in the pass their watch echo wakes.
            let node_events = self.node_events.is_some().then(|| {
                let views = views(&cached, &manager, &beside);
                node_events::due_now(views, None, &outcome.contested, &manager, now)
            });
            let (writes, more) = pass::first_writes(outcome.writes, MAX_WRITES_PER_PASS);
            left_for_next_pass = more;
            self.writer.apply(writes, &self.leadership, term, now).await;
            self.events
                .post(&outcome.events, &self.windows.sources, now)
                .await;
            if let (Some(poster), Some(due)) = (&mut self.node_events, &node_events) {
                poster.post_node_events(due, now).await;
            }
        }
        // A standby or a leader whose caches predate its term: no silence is changed
        // from them.
        if let Some(silencer) = &self.silencer
            && !could_write
        {
            silencer.after_pass(false);
        }
        let node_retry = self.node_events.as_ref().and_then(Poster::retry_at);
        let retry = [self.writer.retry.at(), self.events.retry_at(), node_retry]
            .into_iter()
            .flatten()
            .min();
        // Writes left for the next pass, or nodes whose pods it did not list yet: it runs
        // at once; after a failed list, a moment later.
        let unlisted = decides
            && self.budgets.is_some()
            && outcome.needs_pods.iter().any(|n| !drains.contains_key(n));
        let again = if unlisted && list_failed {
            Timestamp::now().checked_add(POD_LIST_RETRY).ok()
        } else {
            (left_for_next_pass || unlisted).then(Timestamp::now)
        };
        Step::Next(
            outcome
                .next_edge
                .into_iter()
                .chain(retry)
                .chain(again)
                .min(),
        )
    }

    /// The pass, with what the PodDisruptionBudget gate asks for: the pass asks for the
    /// pods of the nodes about to start and of those in progress; they are listed (by a
    /// replica that decides: `decides`), and the pass runs again with them, before
    /// anything is written. Then the budgets the nodes starting rely on are read again,
    /// fresh, and if one changed, the pass runs once more with them. A node whose pods
    /// are unknown does not start.
    async fn pass_with_gates(
        &mut self,
        cached: &[Arc<SlimNode>],
        manager: &str,
        pods: &HashMap<String, Vec<BlockingPod>>,
        holds: &gates::Holds,
        decides: bool,
        now: Timestamp,
    ) -> Passed {
        let sources: Vec<_> = self.windows.sources.values().collect();
        let peers = self.peers.snapshot();
        let mut budgets = self.budgets.as_mut().map(BudgetGate::budgets);
        let mut drains: HashMap<String, Vec<budgets::Pod>> = HashMap::new();
        let mut rounds = 0;
        let mut list_failed = false;
        let mut confirmed = false;
        loop {
            let gates = Gates {
                cluster: &holds.cluster,
                budgets: budgets.as_deref(),
            };
            let beside = Beside {
                blocking: pods,
                holds: &holds.nodes,
                drains: &drains,
            };
            let outcome = pass::run(
                &self.rules,
                &sources,
                &self.windows.deleted,
                views(cached, manager, &beside),
                &self.writer.pending,
                &peers,
                &gates,
                now,
            );
            let Some(gate) = self.budgets.as_ref().filter(|_| decides) else {
                return Passed::of(outcome, drains, list_failed);
            };
            let missing: Vec<String> = outcome
                .needs_pods
                .iter()
                .filter(|n| !drains.contains_key(*n))
                .cloned()
                .collect();
            if !missing.is_empty() && rounds < MAX_POD_LIST_ROUNDS {
                rounds += 1;
                let listed = gate.list_pods(&missing).await;
                list_failed = listed.len() < missing.len();
                if !listed.is_empty() {
                    drains.extend(listed);
                    continue;
                }
            }
            if !confirmed && let Some(current) = &budgets {
                confirmed = true;
                let starting: Vec<&[budgets::Pod]> = outcome
                    .writes
                    .iter()
                    .filter(|w| w.starts_maintenance())
                    .filter_map(|w| drains.get(&w.node).map(Vec::as_slice))
                    .collect();
                if let Some(fresh) = gate.confirm(current, &starting).await {
                    budgets = Some(Arc::new(fresh));
                    continue;
                }
            }
            return Passed::of(outcome, drains, list_failed);
        }
    }

    /// The current term if this replica may write ([`fence`]); a new client made for the
    /// lists that catch up is the writers' from now on.
    fn writing_term(&mut self) -> Option<Instant> {
        match self.fence.check(&self.leadership, &self.connect) {
            Gate::Open(term) => Some(term),
            Gate::Closed => None,
            Gate::Relisting(client) => {
                self.writer.use_client(client.clone());
                self.events.use_client(client.clone());
                if let Some(b) = &mut self.budgets {
                    b.use_client(client.clone());
                }
                if let Some(poster) = &mut self.node_events {
                    poster.use_client(client);
                }
                None
            }
        }
    }
}

/// A pass's outcome, with the pods it listed for the PodDisruptionBudget gate, and
/// whether a list failed.
struct Passed {
    outcome: pass::Outcome,
    drains: HashMap<String, Vec<budgets::Pod>>,
    list_failed: bool,
}

impl Passed {
    fn of(
        outcome: pass::Outcome,
        drains: HashMap<String, Vec<budgets::Pod>>,
        list_failed: bool,
    ) -> Passed {
        Passed {
            outcome,
            drains,
            list_failed,
        }
    }
}

/// What a pass reads beside the nodes, by node name: the pods keeping each from starting
/// (`--block-pod-selector`), the gates' holds on it, and its pods as listed for the
/// PodDisruptionBudget gate.
struct Beside<'a> {
    blocking: &'a HashMap<String, Vec<BlockingPod>>,
    holds: &'a HashMap<String, Vec<Hold>>,
    drains: &'a HashMap<String, Vec<budgets::Pod>>,
}

/// The cached nodes as the pass reads them, with what it reads beside each.
fn views<'a>(
    cached: &'a [Arc<SlimNode>],
    manager: &'a str,
    beside: &'a Beside<'a>,
) -> impl Iterator<Item = NodeView<'a>> {
    cached.iter().map(move |n| {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        let pods = beside.blocking.get(name).map_or(&[][..], Vec::as_slice);
        NodeView {
            holds: beside.holds.get(name).map_or(&[][..], Vec::as_slice),
            drain: beside.drains.get(name).map(Vec::as_slice),
            ..view(n, manager, pods)
        }
    })
}

fn until(t: Timestamp) -> Duration {
    let d = t.duration_since(Timestamp::now());
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}
