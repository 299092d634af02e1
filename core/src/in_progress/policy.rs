//! The deployer's rules for the in-progress decision: the ceilings (overall and per
//! label value) and the flags that require, block and pace starts.

use jiff::SignedDuration;

use crate::selector::Selector;

/// The concurrency ceiling: a count, or a percentage of the nodes it applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ceiling {
    Count(u32),
    Percent(u32),
}

impl Ceiling {
    /// The number of slots for `nodes` nodes: a percentage rounds down, but is at least
    /// 1 so that a small pool (or group) still makes progress.
    pub fn slots(self, nodes: usize) -> usize {
        match self {
            Ceiling::Count(n) => n as usize,
            Ceiling::Percent(p) => (nodes * p as usize / 100).max(1),
        }
    }
}

impl std::fmt::Display for Ceiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ceiling::Count(n) => write!(f, "{n}"),
            Ceiling::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// A ceiling per value of a node label (`--max-in-progress-per KEY=N|P%`): nodes
/// without the label form one group of their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCeiling {
    pub key: String,
    pub ceiling: Ceiling,
}

/// The deployer's rules (`--require-condition`, `--block-condition`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub required: Vec<String>,
    pub blocking: Vec<String>,
    pub ceiling: Ceiling,
    pub stop_at_window_end: bool,
    pub start_cutoff: SignedDuration,
    /// `--count-unavailable`: unavailable nodes take slots.
    pub count_unavailable: bool,
    /// `--block-node-selector`: a node matching one does not start.
    pub block_node_selectors: Vec<Selector>,
    /// `--block-pod-selector`: a node running a pod matching one does not start (the
    /// shell finds the pods; these name them in messages).
    pub block_pod_selectors: Vec<Selector>,
    /// `--max-in-progress-per`.
    pub group_ceilings: Vec<GroupCeiling>,
    /// `--start-interval`: the least time between a start or an end and the next start.
    pub start_interval: Option<SignedDuration>,
    /// `--complete-on-reboot`: a node in progress whose boot ID changed has completed.
    pub complete_on_reboot: bool,
}

impl Policy {
    /// The policy of `--in-progress` with a ceiling and nothing else: required and
    /// blocking conditions none, unavailable nodes counted, no group, no pacing.
    pub fn with_ceiling(ceiling: Ceiling) -> Self {
        Policy {
            required: Vec::new(),
            blocking: Vec::new(),
            ceiling,
            stop_at_window_end: false,
            start_cutoff: SignedDuration::ZERO,
            count_unavailable: true,
            block_node_selectors: Vec::new(),
            block_pod_selectors: Vec::new(),
            group_ceilings: Vec::new(),
            start_interval: None,
            complete_on_reboot: true,
        }
    }

    /// The number of slots for `in_scope` nodes (`--max-in-progress`).
    pub fn slots(&self, in_scope: usize) -> usize {
        self.ceiling.slots(in_scope)
    }
}
