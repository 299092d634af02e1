//! The silences' metrics (`--alertmanager-url`): requests to Alertmanager by verb and
//! result, the silences held, the last round that fully succeeded. A fixed set of series,
//! none per node.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `verb`: list, create, extend, expire; `result`: ok or error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SilenceRequestLabels {
    pub verb: String,
    pub result: String,
}

/// `action`: create, extend, expire.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SilenceActionLabels {
    pub action: String,
}

pub struct SilenceMetrics {
    pub requests: Family<SilenceRequestLabels, Counter>,
    pub held: Gauge,
    pub capped: Gauge,
    pub last_success: Gauge<f64, AtomicU64>,
    pub dry_run: Family<SilenceActionLabels, Gauge>,
}

impl SilenceMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = SilenceMetrics {
            requests: Family::default(),
            held: Gauge::default(),
            capped: Gauge::default(),
            last_success: Gauge::default(),
            dry_run: Family::default(),
        };
        registry.register(
            "silence_requests",
            "Requests to Alertmanager for the silences (--alertmanager-url), by verb (list, create, extend, expire) and result (ok, error)",
            m.requests.clone(),
        );
        registry.register(
            "silences_held",
            "Silences this instance holds in Alertmanager for its nodes, after its last round (0 while not the leader)",
            m.held.clone(),
        );
        registry.register(
            "silence_creates_capped",
            "Silences due but not created in the last round: --silence-max-creates-per-minute reached",
            m.capped.clone(),
        );
        registry.register(
            "silence_last_success_timestamp_seconds",
            "When the leader last listed its silences and did every action due without an error (0: never)",
            m.last_success.clone(),
        );
        registry.register(
            "dry_run_silence_actions",
            "With --dry-run and --alertmanager-url: the silence actions the last round would have done (none is), by action",
            m.dry_run.clone(),
        );
        // Every series from the start, at 0: an alert on errors reads a series that
        // exists before the first one (and the dashboard test checks each is exported).
        for verb in ["list", "create", "extend", "expire"] {
            for result in ["ok", "error"] {
                let _ = m.requests.get_or_create(&SilenceRequestLabels {
                    verb: verb.into(),
                    result: result.into(),
                });
            }
        }
        m
    }

    pub fn request(&self, verb: &str, ok: bool) {
        self.requests
            .get_or_create(&SilenceRequestLabels {
                verb: verb.into(),
                result: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
    }
}
