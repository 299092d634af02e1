//! What a node shows of its availability (Ready, cordoned, KEP-5683's lifecycle
//! conditions), and why it is unavailable: an unavailable node takes a slot and does not
//! start.

use crate::conditions::Status;

/// What a node shows of its availability: its `Ready` condition's status (`None`: it has
/// none, as a node without a kubelet), `spec.unschedulable`, and whether a node lifecycle
/// condition of KEP-5683 says something else is disrupting it now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Availability {
    pub ready: Option<Status>,
    pub unschedulable: bool,
    /// `GracefulNodeShutdownInProgress=True` or `DrainInProgress=True`, the former first.
    pub disrupted_by: Option<Lifecycle>,
}

/// A node lifecycle condition (KEP-5683) that shows a node being disrupted by someone
/// other than kumaco: a kubelet shutting it down, a drain (`kubectl drain
/// --report-node-conditions`). Such a node is unavailable: it takes a slot and does not
/// start. `Drained` is not one of them: a leftover `Drained=True` on a Ready, uncordoned
/// node says nothing about now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    ShuttingDown,
    Draining,
}

impl Lifecycle {
    /// `GracefulNodeShutdownInProgress`: the kubelet is shutting the node down.
    pub const SHUTTING_DOWN: &'static str = "GracefulNodeShutdownInProgress";
    /// `DrainInProgress`: a drain is evicting the node's pods.
    pub const DRAINING: &'static str = "DrainInProgress";

    /// The condition types read, the stronger news first.
    pub const TYPES: [&'static str; 2] = [Self::SHUTTING_DOWN, Self::DRAINING];

    /// The first of [`Self::TYPES`] that `is_true` says is True.
    pub fn of(is_true: impl Fn(&str) -> bool) -> Option<Lifecycle> {
        if is_true(Self::SHUTTING_DOWN) {
            Some(Lifecycle::ShuttingDown)
        } else if is_true(Self::DRAINING) {
            Some(Lifecycle::Draining)
        } else {
            None
        }
    }
}

/// Why a node is unavailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    NotReady,
    /// `Ready` is `Unknown` (the node controller's answer to a silent kubelet).
    Unknown,
    /// A KEP-5683 lifecycle condition says it is being disrupted.
    Disrupted(Lifecycle),
    Cordoned,
}

impl Availability {
    /// `None` when the node is available: Ready True (or no Ready condition), no
    /// lifecycle condition disrupting it, and not cordoned. NotReady and Unknown come
    /// first, then a shutdown or a drain, then cordoned (a down node is the stronger news,
    /// and a drain usually cordons).
    pub fn unavailable(&self) -> Option<Unavailable> {
        match self.ready {
            Some(Status::False) => Some(Unavailable::NotReady),
            Some(Status::Unknown) => Some(Unavailable::Unknown),
            _ if self.disrupted_by.is_some() => self.disrupted_by.map(Unavailable::Disrupted),
            _ if self.unschedulable => Some(Unavailable::Cordoned),
            _ => None,
        }
    }
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unavailable::NotReady => "NotReady",
            Unavailable::Unknown => "Ready Unknown",
            Unavailable::Disrupted(Lifecycle::ShuttingDown) => {
                "shutting down (GracefulNodeShutdownInProgress)"
            }
            Unavailable::Disrupted(Lifecycle::Draining) => "draining (DrainInProgress)",
            Unavailable::Cordoned => "cordoned",
        })
    }
}
