//! The health gates' metrics: whether each gate holds every start, whether it holds
//! because its source cannot be read and why, how reading its sources goes, the
//! PodDisruptionBudget gate's cache, and the pause. A fixed set of series, none per node
//! (the nodes each gate holds are counted by reason in `kumaco_nodes_by_condition`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::gates::{Failure, Gate};

/// `gate`: a [`Gate`]'s name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateLabels {
    pub gate: String,
}

/// `gate`; `result`: `ok`, or a [`Failure`]'s name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateReadLabels {
    pub gate: String,
    pub result: String,
}

/// `gate`; `cause`: a [`Failure`]'s name, or `not-read` (never read yet).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateCauseLabels {
    pub gate: String,
    pub cause: String,
}

/// The `cause` of a source never read yet.
pub const NOT_READ: &str = "not-read";

pub struct GateMetrics {
    /// 1 while the gate holds every start (an alert naming no node, a check that does not
    /// hold, a source that cannot be read, the pause), else 0.
    pub holding: Family<GateLabels, Gauge>,
    /// 1 while the gate holds every start because a source of it cannot be read, by why.
    pub unavailable: Family<GateCauseLabels, Gauge>,
    /// Reads of each gate's source: the alert and query reads, the lists of the watched
    /// sources and their errors, the pod lists and budget re-reads of the
    /// PodDisruptionBudget gate, the object checks' evaluations.
    pub reads: Family<GateReadLabels, Counter>,
    /// PodDisruptionBudgets in the gate's cache.
    pub budgets: Gauge,
    /// 1 while a person's pause holds every start.
    pub paused: Gauge,
}

impl GateMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = GateMetrics {
            holding: Family::default(),
            unavailable: Family::default(),
            reads: Family::default(),
            budgets: Gauge::default(),
            paused: Gauge::default(),
        };
        registry.register(
            "gate_holding",
            "1 while the health gate holds every new start (an alert naming no node, an object check that does not hold, a source that cannot be read, the pause), by gate",
            m.holding.clone(),
        );
        registry.register(
            "gate_unavailable",
            "1 while the health gate holds every new start because a source of it cannot be read, by gate and cause (unreachable, forbidden, not-found, invalid, not-read)",
            m.unavailable.clone(),
        );
        registry.register(
            "gate_reads",
            "Reads of each health gate's source (alert and query reads, lists and errors of the watched sources, pod lists, object check evaluations), by gate and result (ok, unreachable, forbidden, not-found, invalid)",
            m.reads.clone(),
        );
        registry.register(
            "gate_pod_disruption_budgets",
            "PodDisruptionBudgets the PodDisruptionBudget gate knows (0 with the gate off)",
            m.budgets.clone(),
        );
        registry.register(
            "paused",
            "1 while a person's pause (kumaco pause) holds every new start",
            m.paused.clone(),
        );
        // Every series from the start, at 0: an alert on errors reads a series that
        // exists before the first one.
        for gate in Gate::ALL {
            let name = gate.name().to_string();
            let _ = m.holding.get_or_create(&GateLabels { gate: name.clone() });
            for cause in Failure::ALL
                .map(Failure::name)
                .into_iter()
                .chain([NOT_READ])
            {
                let _ = m.unavailable.get_or_create(&GateCauseLabels {
                    gate: name.clone(),
                    cause: cause.into(),
                });
            }
            for result in ["ok"].into_iter().chain(Failure::ALL.map(Failure::name)) {
                let _ = m.reads.get_or_create(&GateReadLabels {
                    gate: name.clone(),
                    result: result.into(),
                });
            }
        }
        m
    }

    /// Counts one read of `gate`'s source: `Ok`, or why it failed.
    pub fn read(&self, gate: Gate, result: Result<(), Failure>) {
        self.reads
            .get_or_create(&GateReadLabels {
                gate: gate.name().into(),
                result: result.map_or_else(|f| f.name(), |()| "ok").into(),
            })
            .inc();
    }

    /// Whether `gate` holds every start now, and whether because a source of it cannot
    /// be read (`cause`).
    pub fn holding(&self, gate: Gate, holding: bool, cause: Option<&str>) {
        self.holding
            .get_or_create(&GateLabels {
                gate: gate.name().into(),
            })
            .set(i64::from(holding));
        for c in Failure::ALL
            .map(Failure::name)
            .into_iter()
            .chain([NOT_READ])
        {
            self.unavailable
                .get_or_create(&GateCauseLabels {
                    gate: gate.name().into(),
                    cause: c.into(),
                })
                .set(i64::from(cause == Some(c)));
        }
    }
}
