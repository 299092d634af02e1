//! The forecast's gauges (`kumaco_forecast_*`, set by the controller's
//! [`crate::controller::forecast`] at most once per `--forecast-interval`) and the
//! histograms of the durations kumaco records when a maintenance ends and when its node is
//! back.
//! Cardinality: a fixed set of series, none per node or window.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::forecast::{Forecast, Plan};
use crate::forecasting::{Estimate, Source};

/// `durations="median"` or `"p90"`: which durations a forecast series assumes;
/// `"expected"` (the completion only): drawn from the recorded ones, the median over
/// the runs (`forecast::Expected`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DurationsLabels {
    pub durations: String,
}

/// `kind="maintenance"` or `"recovery"`, `quantile="0.5"` or `"0.9"`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LearnedLabels {
    pub kind: String,
    pub quantile: String,
}

/// `kind="maintenance"` or `"recovery"`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

fn expected() -> DurationsLabels {
    DurationsLabels {
        durations: "expected".into(),
    }
}

pub struct ForecastMetrics {
    pub maintenance_duration: Histogram,
    pub recovery_duration: Histogram,
    pub remaining: Gauge,
    pub held: Gauge,
    pub not_fitting: Family<DurationsLabels, Gauge>,
    pub without_start: Family<DurationsLabels, Gauge>,
    pub completion: Family<DurationsLabels, Gauge>,
    pub learned: Family<LearnedLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub samples: Family<KindLabels, Gauge>,
    pub runs: Counter,
    pub run_seconds: Histogram,
}

impl ForecastMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = ForecastMetrics {
            // Doubling from a short drain to a long bare-metal reboot.
            maintenance_duration: Histogram::new(exponential_buckets(30.0, 2.0, 11)),
            // Doubling from a node back at once to one back after an hour or so.
            recovery_duration: Histogram::new(exponential_buckets(5.0, 2.0, 11)),
            remaining: Gauge::default(),
            held: Gauge::default(),
            not_fitting: Family::default(),
            without_start: Family::default(),
            completion: Family::default(),
            learned: Family::default(),
            samples: Family::default(),
            runs: Counter::default(),
            run_seconds: Histogram::new(exponential_buckets(0.001, 4.0, 9)),
        };
        registry.register(
            "maintenance_duration_seconds",
            "How long completed maintenances were in progress, as kumaco records them when they end (\"completed after\")",
            m.maintenance_duration.clone(),
        );
        registry.register(
            "recovery_duration_seconds",
            "How long nodes took to be Ready and uncordoned again after their maintenance ended (\"recovered after\")",
            m.recovery_duration.clone(),
        );
        registry.register(
            "forecast_nodes_remaining",
            "In-scope nodes needing maintenance or in it now, forecast (blocked and unavailable ones not counted)",
            m.remaining.clone(),
        );
        registry.register(
            "forecast_nodes_held",
            "In-scope nodes needing maintenance that the brain keeps from starting whatever the time (Blocked, NodeUnavailable)",
            m.held.clone(),
        );
        registry.register(
            "forecast_nodes_not_fitting",
            "Nodes the current or next window occurrence selects that will not have started by its end",
            m.not_fitting.clone(),
        );
        registry.register(
            "forecast_nodes_without_start",
            "Nodes forecast that do not start within the forecast's horizon (7 days)",
            m.without_start.clone(),
        );
        registry.register(
            "forecast_completion_timestamp_seconds",
            "When the last forecast maintenance ends (Unix time); durations=\"expected\": the median over runs with each duration drawn from those recorded; 0 when one does not end within the horizon or none remains (or, for expected, no recorded duration varies)",
            m.completion.clone(),
        );
        registry.register(
            "forecast_assumed_duration_seconds",
            "The durations the forecast assumes, learned from the nodes' records",
            m.learned.clone(),
        );
        registry.register(
            "forecast_duration_samples",
            "How many records (one per node, its last maintenance) the assumed durations come from",
            m.samples.clone(),
        );
        registry.register("forecast_runs", "Forecasts computed", m.runs.clone());
        registry.register(
            "forecast_run_seconds",
            "CPU time of one forecast",
            m.run_seconds.clone(),
        );
        m
    }

    /// No forecast: the nodes record no durations yet. The counts and durations are 0,
    /// the samples say why.
    pub fn unavailable(&self) {
        self.remaining.set(0);
        self.held.set(0);
        for label in ["median", "p90"] {
            let l = DurationsLabels {
                durations: label.into(),
            };
            self.not_fitting.get_or_create(&l).set(0);
            self.without_start.get_or_create(&l).set(0);
            self.completion.get_or_create(&l).set(0);
        }
        self.completion.get_or_create(&expected()).set(0);
        for kind in ["maintenance", "recovery"] {
            self.samples
                .get_or_create(&KindLabels { kind: kind.into() })
                .set(0);
            for quantile in ["0.5", "0.9"] {
                self.learned
                    .get_or_create(&LearnedLabels {
                        kind: kind.into(),
                        quantile: quantile.into(),
                    })
                    .set(0.0);
            }
        }
    }

    /// Sets the gauges from a forecast made with `estimate`.
    pub fn set(&self, f: &Forecast, estimate: &Estimate) {
        let held = f
            .nodes
            .iter()
            .filter(|n| matches!(n.plan, Plan::Held { .. }))
            .count();
        self.remaining.set((f.nodes.len() - held) as i64);
        self.held.set(held as i64);
        for (label, rollout) in [("median", &f.median), ("p90", &f.p90)] {
            let l = DurationsLabels {
                durations: label.into(),
            };
            let first = rollout.occurrences.first();
            self.not_fitting
                .get_or_create(&l)
                .set(first.map_or(0, |o| o.did_not_fit) as i64);
            self.without_start
                .get_or_create(&l)
                .set(rollout.no_start as i64);
            self.completion
                .get_or_create(&l)
                .set(rollout.completion.map_or(0, |t| t.as_second()));
        }
        self.completion.get_or_create(&expected()).set(
            f.expected
                .and_then(|e| e.completion)
                .map_or(0, |t| t.as_second()),
        );
        let d = &estimate.durations;
        for (kind, q) in [("maintenance", &d.maintenance), ("recovery", &d.recovery)] {
            for (quantile, v) in [("0.5", q.median), ("0.9", q.p90)] {
                self.learned
                    .get_or_create(&LearnedLabels {
                        kind: kind.into(),
                        quantile: quantile.into(),
                    })
                    .set(v.as_secs_f64());
            }
        }
        for (kind, source) in [
            ("maintenance", estimate.maintenance),
            ("recovery", estimate.recovery),
        ] {
            let n = match source {
                Source::Learned { samples } => samples,
                Source::Given => 0,
            };
            self.samples
                .get_or_create(&KindLabels { kind: kind.into() })
                .set(n as i64);
        }
    }
}
