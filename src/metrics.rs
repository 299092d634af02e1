//! Prometheus metrics (every one named in docs/configuration.md, "Metrics") and the HTTP
//! endpoints that serve them with the health checks ([`serve`]).

mod dry_run;
mod forecast;
mod gates;
mod notify;
mod pass;
mod serve;
mod silences;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use dry_run::{DryRun, DryRunEventLabels, DryRunWriteLabels};
pub use forecast::ForecastMetrics;
pub use gates::{GateCauseLabels, GateLabels, GateMetrics, GateReadLabels, NOT_READ};
pub use notify::{NotificationLabels, NotifyMetrics, SinkLabels};
pub use pass::{ConditionLabels, PassMetrics, WindowLabels};
pub use serve::serve;
pub use silences::{SilenceActionLabels, SilenceMetrics};

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
pub struct ReasonLabels {
    pub reason: String,
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
    pub maintenances_ended: Family<ReasonLabels, Counter>,
    pub api_writes: Family<WriteLabels, Counter>,
    pub node_events: Family<RelevanceLabels, Counter>,
    pub reconcile_duration: Histogram,
    pub config_hash: Gauge<i64, AtomicI64>,
    pub dry_run: DryRun,
    /// Per-window and per-condition gauges (docs/monitoring.md, "Series and useful queries").
    pub pass: PassMetrics,
    /// The forecast's gauges and the recorded durations' histograms.
    pub forecast: ForecastMetrics,
    /// The silences in Alertmanager (`--alertmanager-url`).
    pub silences: SilenceMetrics,
    /// The health gates.
    pub gates: GateMetrics,
    /// The notifications (`--notify-url`, `--notify-config`).
    pub notify: NotifyMetrics,
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
        let maintenances_ended = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "maintenances_ended",
            "Maintenances this instance ended (MaintenanceInProgress True to False), by reason: MaintenanceCompleted, MaintenanceWindowEnded or NodeRebooted",
            maintenances_ended.clone(),
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
        let forecast = ForecastMetrics::register(&mut registry);
        let silences = SilenceMetrics::register(&mut registry);
        let gates = GateMetrics::register(&mut registry);
        let notify = NotifyMetrics::register(&mut registry);
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
            maintenances_ended,
            api_writes,
            node_events,
            reconcile_duration,
            config_hash,
            pass,
            forecast,
            silences,
            gates,
            notify,
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

    /// A maintenance ended with `reason` (one of kumaco's end reasons: a bounded set).
    pub fn maintenance_ended(&self, reason: &str) {
        self.maintenances_ended
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
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
