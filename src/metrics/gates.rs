//! The health gates' metrics: whether each gate holds every start, how reading its
//! source goes, and the PodDisruptionBudget gate's lists. A fixed set of series, none per
//! node (the nodes each gate holds are counted by reason in `kumaco_nodes_by_condition`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The gates, as the `gate` label names them.
pub const GATES: [&str; 4] = [
    "pod-disruption-budgets",
    "alerts",
    "queries",
    "object-checks",
];

/// `gate`: one of [`GATES`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateLabels {
    pub gate: String,
}

/// `gate`: one of [`GATES`]; `result`: ok or error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateReadLabels {
    pub gate: String,
    pub result: String,
}

pub struct GateMetrics {
    /// 1 while the gate holds every start (an alert naming no node, a check that does not
    /// hold, a source that cannot be read), else 0.
    pub holding: Family<GateLabels, Gauge>,
    /// Reads of each gate's source: the pod lists of the PodDisruptionBudget gate, the
    /// alert and query reads, the object checks' evaluations.
    pub reads: Family<GateReadLabels, Counter>,
    /// PodDisruptionBudgets in the gate's cache.
    pub budgets: Gauge,
}

impl GateMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = GateMetrics {
            holding: Family::default(),
            reads: Family::default(),
            budgets: Gauge::default(),
        };
        registry.register(
            "gate_holding",
            "1 while the health gate holds every new start (an alert naming no node, an object check that does not hold, a source that cannot be read), by gate",
            m.holding.clone(),
        );
        registry.register(
            "gate_reads",
            "Reads of each health gate's source (pod lists for the PodDisruptionBudget gate, alert and query reads, object check evaluations), by gate and result (ok, error)",
            m.reads.clone(),
        );
        registry.register(
            "gate_pod_disruption_budgets",
            "PodDisruptionBudgets the PodDisruptionBudget gate knows (0 with the gate off)",
            m.budgets.clone(),
        );
        // Every series from the start, at 0: an alert on errors reads a series that
        // exists before the first one.
        for gate in GATES {
            let _ = m.holding.get_or_create(&GateLabels { gate: gate.into() });
            for result in ["ok", "error"] {
                let _ = m.reads.get_or_create(&GateReadLabels {
                    gate: gate.into(),
                    result: result.into(),
                });
            }
        }
        m
    }

    /// Counts one read of `gate`'s source.
    pub fn read(&self, gate: &str, ok: bool) {
        self.reads
            .get_or_create(&GateReadLabels {
                gate: gate.into(),
                result: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
    }

    /// Whether `gate` holds every start now.
    pub fn holding(&self, gate: &str, holding: bool) {
        self.holding
            .get_or_create(&GateLabels { gate: gate.into() })
            .set(i64::from(holding));
    }
}
