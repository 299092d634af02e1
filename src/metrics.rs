//! Prometheus metrics and the HTTP endpoints `/metrics`, `/healthz`, `/readyz`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

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

/// Every metric kumaco exports (names get the `kumaco_` prefix).
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
    pub clock_steps: Counter,
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
            "1 while this instance holds the leader Lease (always 1 with --leader-elect=false)",
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
        let clock_steps = Counter::default();
        registry.register(
            "clock_steps",
            "Steps of the wall clock noticed (each runs a pass at once)",
            clock_steps.clone(),
        );
        Metrics {
            registry,
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
            clock_steps,
            ready: AtomicBool::new(false),
        }
    }

    pub fn write(&self, verb: &str, ok: bool) {
        self.api_writes
            .get_or_create(&WriteLabels {
                verb: verb.into(),
                result: if ok { "ok" } else { "error" }.into(),
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
