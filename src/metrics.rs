//! Prometheus metrics and the HTTP endpoints `/metrics`, `/healthz`, `/readyz`.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::pass::{Counts, WindowSummary};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ValidityLabels {
    pub valid: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    pub condition: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RelevanceLabels {
    pub relevant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub verb: String,
    pub result: String,
}

/// A window ConfigMap. Not `namespace`/`name`: Prometheus' Kubernetes discovery and the
/// Prometheus Operator put the scraped pod's `namespace` on every series, which would
/// rename ours to `exported_namespace`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WindowLabels {
    pub window_namespace: String,
    pub window: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    pub condition: String,
    pub status: String,
    pub reason: String,
}

/// The per-window and per-condition series exported by the last pass, to remove those
/// the next pass no longer reports (a deleted window).
#[derive(Default)]
struct Exported {
    windows: HashSet<WindowLabels>,
    next_starts: HashSet<WindowLabels>,
    conditions: HashSet<ConditionLabels>,
}

/// The gauges filled from each pass's per-window summaries and condition counts.
/// Cardinality: 4 series per window ConfigMap, and at most one per (condition, status,
/// reason) of kumaco's own (reasons it does not write are counted as `Other`).
pub struct PassMetrics {
    pub window_valid: Family<WindowLabels, Gauge>,
    pub window_active: Family<WindowLabels, Gauge>,
    pub window_selected_nodes: Family<WindowLabels, Gauge>,
    pub window_next_start: Family<WindowLabels, Gauge>,
    pub nodes_by_condition: Family<ConditionLabels, Gauge>,
    pub in_progress_slots: Gauge,
    pub oldest_in_progress: Gauge,
    pub oldest_waiting: Gauge,
    exported: Mutex<Exported>,
}

impl PassMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = PassMetrics {
            window_valid: Family::default(),
            window_active: Family::default(),
            window_selected_nodes: Family::default(),
            window_next_start: Family::default(),
            nodes_by_condition: Family::default(),
            in_progress_slots: Gauge::default(),
            oldest_in_progress: Gauge::default(),
            oldest_waiting: Gauge::default(),
            exported: Mutex::default(),
        };
        registry.register(
            "window_valid",
            "1 if the window ConfigMap is a valid window, 0 if kumaco ignores it as invalid",
            m.window_valid.clone(),
        );
        registry.register(
            "window_active",
            "1 while an occurrence of the window is active",
            m.window_active.clone(),
        );
        registry.register(
            "window_selected_nodes",
            "In-scope nodes the window selects while it is active (0 while inactive)",
            m.window_selected_nodes.clone(),
        );
        registry.register(
            "window_next_start_timestamp_seconds",
            "Unix time of the window's next start (absent for a window that never starts again)",
            m.window_next_start.clone(),
        );
        registry.register(
            "nodes_by_condition",
            "Nodes by the status and reason of each condition kumaco owns, once its writes land",
            m.nodes_by_condition.clone(),
        );
        registry.register(
            "in_progress_slots",
            "MaintenanceInProgress slots (--max-in-progress for the nodes in scope; 0 without --in-progress)",
            m.in_progress_slots.clone(),
        );
        registry.register(
            "oldest_in_progress_timestamp_seconds",
            "Unix time the longest-running maintenance started (MaintenanceInProgress=True since); 0 when none runs",
            m.oldest_in_progress.clone(),
        );
        registry.register(
            "oldest_waiting_timestamp_seconds",
            "Unix time the longest-waiting node began waiting for a MaintenanceInProgress slot; 0 when none waits",
            m.oldest_waiting.clone(),
        );
        m
    }

    /// Copies a pass's summaries into the gauges, removing the series of windows and
    /// condition states it no longer reports.
    pub fn set(&self, counts: &Counts, windows: &[WindowSummary]) {
        let mut exported = self.exported.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = HashSet::new();
        let mut next_starts = HashSet::new();
        for w in windows {
            let labels = WindowLabels {
                window_namespace: w.id.namespace.clone(),
                window: w.id.name.clone(),
            };
            self.window_valid.get_or_create(&labels).set(w.valid.into());
            self.window_active
                .get_or_create(&labels)
                .set(w.active.into());
            self.window_selected_nodes
                .get_or_create(&labels)
                .set(w.selected as i64);
            if let Some(t) = w.next_start {
                self.window_next_start
                    .get_or_create(&labels)
                    .set(t.as_second());
                next_starts.insert(labels.clone());
            }
            seen.insert(labels);
        }
        for gone in exported.windows.difference(&seen) {
            self.window_valid.remove(gone);
            self.window_active.remove(gone);
            self.window_selected_nodes.remove(gone);
        }
        for gone in exported.next_starts.difference(&next_starts) {
            self.window_next_start.remove(gone);
        }
        exported.windows = seen;
        exported.next_starts = next_starts;

        let mut seen = HashSet::new();
        for (state, n) in &counts.conditions {
            let labels = ConditionLabels {
                condition: state.type_.into(),
                status: state.status.as_str().into(),
                reason: state.reason.into(),
            };
            self.nodes_by_condition
                .get_or_create(&labels)
                .set(*n as i64);
            seen.insert(labels);
        }
        for gone in exported.conditions.difference(&seen) {
            self.nodes_by_condition.remove(gone);
        }
        exported.conditions = seen;

        self.in_progress_slots.set(counts.slots.unwrap_or(0) as i64);
        self.oldest_in_progress
            .set(counts.oldest_in_progress.map_or(0, |t| t.as_second()));
        self.oldest_waiting
            .set(counts.oldest_waiting.map_or(0, |t| t.as_second()));
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DryRunWriteLabels {
    pub condition: String,
    pub status: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DryRunEventLabels {
    pub reason: String,
}

/// `--dry-run` (shadow mode): what kumaco would have written. Label values are bounded:
/// kumaco's three condition types, three statuses, its few reasons.
#[derive(Default)]
pub struct DryRun {
    pub writes: Family<DryRunWriteLabels, Counter>,
    pub events: Family<DryRunEventLabels, Counter>,
}

impl DryRun {
    /// A condition a write would have set (one per condition that changes).
    pub fn write(&self, condition: &str, status: &str, reason: &str) {
        self.writes
            .get_or_create(&DryRunWriteLabels {
                condition: condition.into(),
                status: status.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// An event that would have been posted.
    pub fn event(&self, reason: &str) {
        self.events
            .get_or_create(&DryRunEventLabels {
                reason: reason.into(),
            })
            .inc();
    }
}

/// Every metric kumaco exports (names get the `kumaco_` prefix).
/// How a write ended, for `kumaco_api_writes_total{result}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteResult {
    Ok,
    /// 409: the object changed since the write was derived; derived again and retried.
    /// Not an error: under churn it is expected now and then.
    Conflict,
    Error,
}

pub struct Metrics {
    registry: Registry,
    pub windows: Family<ValidityLabels, Gauge>,
    pub active_windows: Gauge,
    pub nodes_in_scope: Gauge,
    pub nodes_under_maintenance: Gauge,
    pub nodes_in_progress: Gauge,
    pub nodes_planned: Gauge,
    pub leader: Gauge,
    pub transitions: Family<TransitionLabels, Counter>,
    pub api_writes: Family<WriteLabels, Counter>,
    pub node_events: Family<RelevanceLabels, Counter>,
    pub reconcile_duration: Histogram,
    pub config_hash: Gauge<i64, AtomicI64>,
    pub dry_run: DryRun,
    /// Per-window and per-condition gauges (docs/operations.md, Monitoring).
    pub pass: PassMetrics,
    pub api_write_duration: Histogram,
    pub clock_steps: Counter,
    pub nodes_contested: Gauge,
    pub writes_deferred: Gauge,
    ready: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kumaco");
        let windows = Family::<ValidityLabels, Gauge>::default();
        registry.register(
            "windows",
            "Window ConfigMaps seen, by validity",
            windows.clone(),
        );
        let active_windows = Gauge::default();
        registry.register(
            "active_windows",
            "Valid windows with an active occurrence",
            active_windows.clone(),
        );
        let nodes_in_scope = Gauge::default();
        registry.register(
            "nodes_in_scope",
            "Nodes matching --node-selector",
            nodes_in_scope.clone(),
        );
        let nodes_under_maintenance = Gauge::default();
        registry.register(
            "nodes_under_maintenance",
            "In-scope nodes kumaco wants UnderMaintenance=True",
            nodes_under_maintenance.clone(),
        );
        let nodes_in_progress = Gauge::default();
        registry.register(
            "nodes_in_progress",
            "In-scope nodes kumaco wants MaintenanceInProgress=True (with --in-progress)",
            nodes_in_progress.clone(),
        );
        let nodes_planned = Gauge::default();
        registry.register(
            "nodes_planned",
            "In-scope nodes kumaco wants MaintenancePlanned=True (with --planned-lead-time)",
            nodes_planned.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this instance holds the leader Lease (always 1 with --leader-elect=false; 0 with --dry-run)",
            leader.clone(),
        );
        let transitions = Family::<TransitionLabels, Counter>::default();
        registry.register(
            "transitions",
            "Condition status changes written, by condition type and new status",
            transitions.clone(),
        );
        let api_writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "api_writes",
            "Write requests to the API server, by verb and result (ok or error)",
            api_writes.clone(),
        );
        let node_events = Family::<RelevanceLabels, Counter>::default();
        registry.register(
            "node_events",
            "Node watch events, by whether they changed anything a pass reads (only those wake a pass)",
            node_events.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        registry.register(
            "reconcile_duration_seconds",
            "Time to compute and write one reconcile",
            reconcile_duration.clone(),
        );
        let config_hash = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "config_hash",
            "Hash of all window ConfigMaps' data (changes when any window changes)",
            config_hash.clone(),
        );
        let pass = PassMetrics::register(&mut registry);
        let api_write_duration = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        registry.register(
            "api_write_duration_seconds",
            "Time of each node status write, answered or not (a timeout counts its full wait)",
            api_write_duration.clone(),
        );
        let dry_run = DryRun::default();
        registry.register(
            "dry_run_writes",
            "With --dry-run: conditions kumaco would have written (nothing is), by condition type, status and reason",
            dry_run.writes.clone(),
        );
        registry.register(
            "dry_run_events",
            "With --dry-run: events kumaco would have posted (nothing is), by reason",
            dry_run.events.clone(),
        );
        let clock_steps = Counter::default();
        registry.register(
            "clock_steps",
            "Steps of the wall clock noticed (each runs a pass at once)",
            clock_steps.clone(),
        );
        let nodes_contested = Gauge::default();
        registry.register(
            "nodes_contested",
            "In-scope nodes whose kumaco conditions a live kumaco instance also owns (two instances claim them)",
            nodes_contested.clone(),
        );
        let writes_deferred = Gauge::default();
        registry.register(
            "writes_deferred",
            "Node writes held back now by the contest bound (at most one rewrite of another instance's change per --resync-interval)",
            writes_deferred.clone(),
        );
        Metrics {
            registry,
            dry_run,
            nodes_contested,
            writes_deferred,
            windows,
            active_windows,
            nodes_in_scope,
            nodes_under_maintenance,
            nodes_in_progress,
            nodes_planned,
            leader,
            transitions,
            api_writes,
            node_events,
            reconcile_duration,
            config_hash,
            pass,
            api_write_duration,
            clock_steps,
            ready: AtomicBool::new(false),
        }
    }

    pub fn write(&self, verb: &str, result: WriteResult) {
        let result = match result {
            WriteResult::Ok => "ok",
            WriteResult::Conflict => "conflict",
            WriteResult::Error => "error",
        };
        self.api_writes
            .get_or_create(&WriteLabels {
                verb: verb.into(),
                result: result.into(),
            })
            .inc();
    }

    pub fn node_event(&self, relevant: bool) {
        self.node_events
            .get_or_create(&RelevanceLabels {
                relevant: relevant.to_string(),
            })
            .inc();
    }

    pub fn transition(&self, condition: &str, status: &str) {
        self.transitions
            .get_or_create(&TransitionLabels {
                condition: condition.into(),
                status: status.into(),
            })
            .inc();
    }

    pub fn set_windows(&self, valid: usize, invalid: usize) {
        for (label, n) in [("true", valid), ("false", invalid)] {
            self.windows
                .get_or_create(&ValidityLabels {
                    valid: label.into(),
                })
                .set(n as i64);
        }
    }

    /// Ready once the initial lists are in and the first reconcile ran.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Binds both addresses (they may be the same) and serves until the process ends.
/// Binding happens before this returns, so a port in use fails start-up loudly. Returns
/// the addresses bound, which differ from those asked for when those had port 0.
pub async fn serve(
    metrics: Arc<Metrics>,
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
) -> std::io::Result<(SocketAddr, SocketAddr)> {
    let health = {
        let ready = metrics.clone();
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move || {
                    let ready = ready.clone();
                    async move {
                        if ready.is_ready() {
                            (StatusCode::OK, "ok")
                        } else {
                            (
                                StatusCode::SERVICE_UNAVAILABLE,
                                "initial lists not complete",
                            )
                        }
                    }
                }),
            )
    };
    let metrics_router = Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.encode(),
                )
            }
        }),
    );
    if metrics_addr == health_addr {
        let listener = TcpListener::bind(metrics_addr).await?;
        let bound = listener.local_addr()?;
        tokio::spawn(async move { axum::serve(listener, metrics_router.merge(health)).await });
        Ok((bound, bound))
    } else {
        let ml = TcpListener::bind(metrics_addr).await?;
        let hl = TcpListener::bind(health_addr).await?;
        let bound = (ml.local_addr()?, hl.local_addr()?);
        tokio::spawn(async move { axum::serve(ml, metrics_router).await });
        tokio::spawn(async move { axum::serve(hl, health).await });
        Ok(bound)
    }
}
