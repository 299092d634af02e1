//! The health gates' sources: what the controller reads beyond the nodes to tell whether
//! a node may start now (the verdicts themselves are the core's: [`crate::gates`],
//! [`crate::budgets`]).
//!
//! - [`budgets`]: the PodDisruptionBudgets (watched) and the pods of the nodes about to
//!   start or in progress (listed when a pass asks for them);
//! - [`alerts`]: Alertmanager's firing alerts and Prometheus queries, each read by a task
//!   of its own; [`checks`]: the object checks (`--block-unless`);
//! - gates read by tasks of their own (alerts, object checks) publish their latest
//!   verdict in [`Verdicts`], and wake a pass when it changes. A pass reads the verdicts
//!   as they are then: nothing is remembered beyond the latest reading of each source.

pub mod alerts;
pub mod budgets;
pub mod checks;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crate::gates::Hold;

/// One gate's latest verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Holds on every start.
    pub cluster: Vec<Hold>,
    /// Holds on some nodes' starts, by node name.
    pub nodes: BTreeMap<String, Vec<Hold>>,
}

/// The latest verdicts of the gates read by tasks of their own, by gate, shared between
/// those tasks and the loop.
#[derive(Clone, Default)]
pub struct Verdicts(Arc<Mutex<BTreeMap<&'static str, Verdict>>>);

/// Every gate's verdicts as one pass reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// On every start, in gate order.
    pub cluster: Vec<Hold>,
    /// On one node's start, by node name, in gate order.
    pub nodes: HashMap<String, Vec<Hold>>,
}

impl Verdicts {
    /// Records `gate`'s latest verdict; whether it differs from the one before (then the
    /// caller wakes a pass).
    pub fn set(&self, gate: &'static str, verdict: Verdict) -> bool {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let changed = all.get(gate) != Some(&verdict);
        all.insert(gate, verdict);
        changed
    }

    /// The holds of every gate, now.
    pub fn holds(&self) -> Holds {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut holds = Holds::default();
        for verdict in all.values() {
            holds.cluster.extend(verdict.cluster.iter().cloned());
            for (node, h) in &verdict.nodes {
                holds
                    .nodes
                    .entry(node.clone())
                    .or_default()
                    .extend(h.iter().cloned());
            }
        }
        holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reasons;

    fn hold(message: &str) -> Hold {
        Hold {
            reason: reasons::ALERT_FIRING,
            message: message.into(),
        }
    }

    #[test]
    fn the_latest_verdict_of_each_gate_and_whether_it_changed() {
        let v = Verdicts::default();
        let firing = Verdict {
            cluster: vec![hold("a")],
            nodes: BTreeMap::from([("n1".to_string(), vec![hold("b")])]),
        };
        assert!(v.set("alerts", firing.clone()));
        assert!(!v.set("alerts", firing), "the same verdict again");
        assert!(v.set(
            "checks",
            Verdict {
                cluster: vec![hold("c")],
                nodes: BTreeMap::new(),
            }
        ));
        let holds = v.holds();
        assert_eq!(holds.cluster, [hold("a"), hold("c")]);
        assert_eq!(holds.nodes["n1"], [hold("b")]);
        assert!(v.set("alerts", Verdict::default()));
        assert_eq!(v.holds().cluster, [hold("c")]);
        assert!(v.holds().nodes.is_empty());
    }
}
