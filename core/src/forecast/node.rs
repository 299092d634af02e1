//! What one run keeps of each simulated node: its conditions and availability as the
//! simulation writes them, what window edges read and change of it, and what the brain
//! last answered for it.

use jiff::Timestamp;

use crate::conditions::Condition;
use crate::decision::InWindow;
use crate::in_progress::Availability;
use crate::window::Occurrence;

/// What happens to a node in the simulation, apart from the brain's decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Happens {
    /// The maintenance's work is done: requirements clear, a reboot, NotReady.
    Done,
    /// Ready and uncordoned again.
    Back,
}

/// A simulated node.
#[derive(Clone, Debug, Default)]
pub(super) struct SimNode {
    pub(super) conditions: Vec<Condition>,
    pub(super) availability: Availability,
    pub(super) boot_id: Option<String>,
    pub(super) reboots: u32,
    /// Its verdict, as of a version.
    pub(super) seen: Option<Seen>,
    /// What the brain read of its windows when it last decided it alone, if it did.
    pub(super) alone_on: Option<AloneKey>,
    /// Its maintenance's work or its recovery is still to happen.
    pub(super) working: bool,
    pub(super) recovering: bool,
    /// The first maintenance forecast: when and in which (window, occurrence) it starts.
    pub(super) start: Option<FirstStart>,
    pub(super) end: Option<Timestamp>,
    pub(super) in_progress_at_now: Option<Timestamp>,
    pub(super) why: Option<String>,
}

/// What a window edge reads and changes of a simulated node, kept apart from the rest
/// (an edge touches every node its window selects, and most of them for nothing else).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Standing {
    /// Still needs maintenance (its requirements hold).
    pub(super) needs: bool,
    /// In [`Run::busy`], [`Run::recent`].
    pub(super) busy: bool,
    /// Busy, but left out of the decisions until something it shows changes
    /// ([`Run::settle`](super::simulation::Run)).
    pub(super) settled: bool,
    pub(super) recent: bool,
    /// Active maintenance windows and blackouts selecting it.
    pub(super) windows_on: u16,
    pub(super) blackouts_on: u16,
    /// Counts the changes of the windows selecting it.
    pub(super) version: u32,
    /// The version at which the brain last decided it without making it a candidate: its
    /// answer holds until a window changes (its inputs are otherwise fixed, and time only
    /// brings the start cutoff closer).
    pub(super) alone: Option<u32>,
    /// `UnderMaintenance` as the last pass wrote it, (True, since); written into its
    /// conditions when it is decided. `None` while it has none.
    pub(super) um: Option<UnderMaintenanceWritten>,
}

impl Standing {
    /// Nothing it shows can change a decision any more, its own or another's.
    pub(super) fn gone(&self) -> bool {
        !self.needs && !self.busy && !self.recent
    }

    /// Its standing lets it wait for a start: it needs maintenance, is neither busy nor
    /// pacing, and a maintenance window and no blackout selects it.
    pub(super) fn queued(&self) -> bool {
        self.needs && !self.busy && !self.recent && self.windows_on > 0 && self.blackouts_on == 0
    }
}

/// What the brain's answer for a node that is no candidate reads of its windows: whether
/// it is under maintenance and until when, whether a window is active, which blackouts.
/// Not the windows' names: only a start's message reads them. While this and everything
/// else the node shows stay the same, so does the answer (time only brings the start
/// cutoff closer), though windows open and close around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct AloneKey {
    pub(super) until: Option<Option<Timestamp>>,
    pub(super) window_active: bool,
    pub(super) blackout: Option<String>,
}

impl AloneKey {
    pub(super) fn of(w: &InWindow) -> AloneKey {
        AloneKey {
            until: w.window().map(|(_, until)| until),
            window_active: w.window_active(),
            blackout: w.blackout().map(str::to_string),
        }
    }
}

/// The verdict of the windows on a node, as of a version of the windows selecting it.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    /// [`Standing::version`] when it was read.
    pub(super) version: u32,
    pub(super) in_window: InWindow,
    /// The first of the maintenance windows it names (by name), if any.
    pub(super) first_window: Option<usize>,
}

/// When a node's first maintenance forecast starts, and in which occurrence.
#[derive(Clone, Copy, Debug)]
pub(super) struct FirstStart {
    pub(super) at: Timestamp,
    /// The window (its place in the fleet's) and its occurrence active at the start.
    pub(super) occurrence: Option<(usize, Occurrence)>,
}

/// `UnderMaintenance` as the last pass wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct UnderMaintenanceWritten {
    pub(super) on: bool,
    pub(super) since: Option<Timestamp>,
}

/// Something that happens to a node at an instant, apart from the brain's decisions;
/// ordered by time first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Event {
    pub(super) at: Timestamp,
    pub(super) what: Happens,
    pub(super) node: usize,
}
