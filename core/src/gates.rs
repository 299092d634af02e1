//! Health gates: what the cluster shows beyond a node that keeps it from starting now.
//!
//! A gate only ever holds back a new start; it never ends a maintenance in progress
//! (finish what was started: a reboot often raises the very alerts a gate reads). Each
//! gate's verdict is a function of what kumaco reads (the budgets and the node's pods,
//! alerts, objects) and the clock, and shows on the node as a reason of its own with a
//! message naming the cause:
//!
//! - **PodDisruptionBudgets** ([`crate::budgets`]): a node starts only if every pod a
//!   drain would evict can be evicted now (`PodDisruptionBudget`);
//! - **alerts and queries**: a firing alert or a non-empty query result holds every
//!   start, or, when it names a node, that node's (`AlertFiring`); alerts that cannot be
//!   read hold every start (`Blocked`) unless the deployer chose otherwise;
//! - **object checks**: a CEL expression over a Kubernetes object that must hold before
//!   any start (`HealthCheckFailed`).
//!
//! The shell reads the sources and hands the pass their verdicts as [`Hold`]s: on every
//! start ([`Gates::cluster`]) or on one node's (`NodeView::holds`). The budgets are
//! decided here, in the pass, because their headroom is shared between the nodes a pass
//! starts.

use crate::budgets::Budgets;

/// A gate's verdict against a start: the reason and message the node shows while it
/// waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// One of [`crate::reasons`]' gate reasons.
    pub reason: &'static str,
    pub message: String,
}

/// The gates' verdicts a pass reads, beyond each node's own.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gates<'a> {
    /// Verdicts holding every start: an alert naming no node, an object check that does
    /// not hold, a source that cannot be read. The first one is shown.
    pub cluster: &'a [Hold],
    /// The PodDisruptionBudgets, when that gate is on (`--pod-disruption-budgets`).
    pub budgets: Option<&'a Budgets>,
}

impl Gates<'_> {
    /// No gate: every start is up to the node and the slots.
    pub const NONE: Gates<'static> = Gates {
        cluster: &[],
        budgets: None,
    };
}
