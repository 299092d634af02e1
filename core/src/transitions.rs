//! Which maintenance transitions the cluster shows now, as the [`Notice`]s people are
//! told of: derived from the nodes' conditions, the windows' announcements, the forecast
//! and the clock alone, never from what a process saw before. So a restarted or newly
//! elected kumaco finds the same notices, under the same ids, as one that never stopped;
//! which of them a sink has had is the shell's record.
//!
//! - **A node** (with `--in-progress`): `MaintenanceInProgress` turned True (started),
//!   turned False by a completion (completed: how long, rebooted or not) or by its
//!   window's end (ended); a node waiting to start for longer than `waiting_after`
//!   (waiting, once per episode: an episode begins when the node last became due for
//!   maintenance); a completed node not available `not_back_after` after its end (not
//!   back). Without `--in-progress`, `kured.dev/UnderMaintenance` turning True (started)
//!   and False (ended). A maintenance whose end shows but whose start no longer does
//!   (kumaco was down meanwhile) gets its start from the end's recorded duration, under
//!   the id its start had.
//! - **A window** (not a blackout): the heads-up before it opens (planned, with
//!   `--planned-lead-time`, carrying the forecast), its opening (how many nodes it
//!   selects) and its closing (how many completed in it, which nodes it left waiting and
//!   why), as the window's events announce them.
//!
//! Only transitions of the last [`HORIZON`] are told: a kumaco started an hour after a
//! transition sends nothing of it. Each notice's id hashes the instance, the kind, what
//! it is about (the node's or the window's uid) and the instant the transition shows.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};

use crate::announce::{Announcement, What, WindowSource};
use crate::conditions::{Condition, MAINTENANCE_IN_PROGRESS, Status, UNDER_MAINTENANCE, find};
use crate::fingerprint::Fnv;
use crate::forecast::{self, Placement, Plan};
use crate::in_progress::{
    Availability, recorded_duration, recorded_recovery, recorded_start, waited,
};
use crate::notice::{Forecast, Kind, Left, NodeInfo, Notice, WindowInfo};
use crate::reasons;
use crate::selector::Labels;
use crate::window::Window;

/// How far back a transition is still told: as far as a window's events look back, below
/// the API server's event TTL. A kumaco down longer than this tells nothing of what
/// happened meanwhile.
pub const HORIZON: SignedDuration = crate::decision::HORIZON;

/// The forecasts told at windows' openings, by the window's uid and the occurrence's
/// start: what a closing compares with. The shell keeps them with its record of what it
/// sent.
pub type Told = BTreeMap<(String, Timestamp), Forecast>;

/// Longest message of a condition a notice quotes, in bytes.
const MAX_MESSAGE_BYTES: usize = 512;

/// What decides the notices: the instance's settings.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// The cluster's name, as messages give it.
    pub cluster: String,
    /// This instance (its field manager): ids of two instances never meet.
    pub instance: String,
    /// `--in-progress`: node transitions are `MaintenanceInProgress`'s, else
    /// `UnderMaintenance`'s.
    pub in_progress: bool,
    /// `--require-condition`: when a node became due for maintenance.
    pub required: Vec<String>,
    /// Tell a node waiting to start this long (`--notify-waiting-after`).
    pub waiting_after: Option<SignedDuration>,
    /// Tell a completed node not available this long after its end
    /// (`--notify-not-back-after`).
    pub not_back_after: Option<SignedDuration>,
    /// `--planned-lead-time`: the heads-up before a window opens.
    pub planned_lead_time: Option<SignedDuration>,
    /// The node label that names a node's zone for people.
    pub zone_label: String,
    /// The node labels that name its pool: the first it has.
    pub pool_labels: Vec<String>,
}

/// A node in this instance's scope, as the cache shows it.
#[derive(Clone, Copy)]
pub struct NodeState<'a> {
    pub name: &'a str,
    /// A node re-created under the same name is another node, with other ids.
    pub uid: &'a str,
    pub labels: &'a dyn Labels,
    pub conditions: &'a [Condition],
    /// The condition types this instance owns on it (managedFields): only its own
    /// transitions are told.
    pub owned: &'a [String],
    pub availability: Availability,
}

/// What [`due`] reads.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub nodes: &'a [NodeState<'a>],
    /// Every window ConfigMap watched: descriptions, selectors, the heads-up.
    pub windows: &'a [&'a WindowSource],
    /// The window events the pass says should exist: openings and closings.
    pub announcements: &'a [Announcement],
    /// The latest forecast of the rollout, if one was made.
    pub forecast: Option<&'a forecast::Forecast>,
    pub told: &'a Told,
    pub now: Timestamp,
}

/// What [`due`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// Every notice of the last [`HORIZON`], oldest first (by `at`, then id).
    pub notices: Vec<Notice>,
    /// When a notice becomes due by the clock alone (a wait or an absence reaching its
    /// threshold, a window's heads-up).
    pub next: Option<Timestamp>,
}

/// The notices the cluster shows at `now`: those of the nodes in scope and of the
/// windows, within [`HORIZON`].
pub fn due(rules: &Rules, inputs: &Inputs) -> Due {
    let now = inputs.now;
    let since = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
    let mut next: Option<Timestamp> = None;
    let mut later = |t: Timestamp| {
        if t > now {
            next = Some(next.map_or(t, |n| n.min(t)));
        }
    };
    let mut notices: Vec<Notice> = Vec::new();
    for node in inputs.nodes.iter().filter(|n| !n.uid.is_empty()) {
        let found = if rules.in_progress {
            in_progress(rules, inputs, node, &mut later)
        } else {
            under_maintenance(rules, inputs, node)
        };
        notices.extend(found);
    }
    for source in inputs.windows {
        notices.extend(planned(rules, inputs, source, &mut later));
    }
    for a in inputs.announcements.iter().filter(|a| !a.blackout) {
        notices.extend(window_notice(rules, inputs, a));
    }
    notices.retain(|n| n.at >= since && n.at <= now);
    notices.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
    notices.dedup_by(|a, b| a.id == b.id);
    Due { notices, next }
}

/// A notice's id: the instance, the kind, what it is about and when, hashed.
fn id(rules: &Rules, kind: Kind, about: &str, at: Timestamp) -> String {
    let mut h = Fnv::default();
    h.write_str(&rules.instance);
    h.write_str(kind.name());
    h.write_str(about);
    h.write_u64(at.as_second() as u64);
    format!("{:016x}", h.finish())
}

/// A notice about `node` of `kind` at `at`, from condition `c`.
fn node_notice(
    rules: &Rules,
    inputs: &Inputs,
    node: &NodeState,
    kind: Kind,
    at: Timestamp,
    c: &Condition,
) -> Notice {
    Notice {
        node: Some(NodeInfo {
            name: node.name.to_string(),
            zone: label(node.labels, &rules.zone_label),
            pool: rules
                .pool_labels
                .iter()
                .find_map(|key| label(node.labels, key)),
        }),
        window: node_window(inputs, node.conditions),
        reason: c.reason.clone(),
        message: crate::conditions::bounded(c.message.clone(), MAX_MESSAGE_BYTES),
        ..Notice::new(
            id(rules, kind, node.uid, at),
            kind,
            rules.cluster.clone(),
            at,
        )
    }
}

fn label(labels: &dyn Labels, key: &str) -> Option<String> {
    (!key.is_empty())
        .then(|| labels.label(key))
        .flatten()
        .map(str::to_string)
}

/// The first window the node's `UnderMaintenance` names, if it is in one.
fn node_window(inputs: &Inputs, conditions: &[Condition]) -> Option<WindowInfo> {
    let um = find(conditions, UNDER_MAINTENANCE).filter(|c| c.is_true())?;
    let first = crate::decision::first_window_named(&um.message)?;
    if let Some(source) = inputs.windows.iter().find(|w| w.id.to_string() == first) {
        return Some(window_info(source));
    }
    let (namespace, name) = first.split_once('/')?;
    Some(WindowInfo {
        namespace: namespace.to_string(),
        name: name.to_string(),
        description: None,
    })
}

/// A node's transitions with `--in-progress`.
fn in_progress(
    rules: &Rules,
    inputs: &Inputs,
    node: &NodeState,
    later: &mut impl FnMut(Timestamp),
) -> Vec<Notice> {
    let Some(c) = owned(node, MAINTENANCE_IN_PROGRESS) else {
        return Vec::new();
    };
    let Some(at) = c.last_transition_time else {
        return Vec::new();
    };
    let notice = |kind, at| node_notice(rules, inputs, node, kind, at, c);
    let mut out = Vec::new();
    if c.is_true() {
        // The instant the start recorded, to the millisecond; its id is of its second,
        // which is the condition's `lastTransitionTime`.
        out.push(notice(
            Kind::Started,
            recorded_start(&c.message).unwrap_or(at),
        ));
        return out;
    }
    if reasons::ends_maintenance(&c.reason) {
        let duration = recorded_duration(&c.message);
        let kind = if reasons::completes_maintenance(&c.reason) {
            Kind::Completed
        } else {
            Kind::Ended
        };
        let mut end = notice(kind, at);
        end.duration = duration;
        if kind == Kind::Completed {
            end.rebooted = Some(c.reason == reasons::NODE_REBOOTED);
        }
        out.push(end);
        // Its start, under the id its True condition gave it: told even by a kumaco
        // that never saw the node in progress (it was down meanwhile).
        let start = recorded_start(&c.message).or_else(|| duration.and_then(|d| started(at, d)));
        if let Some(start) = start {
            let mut began = notice(Kind::Started, start);
            began.reason = reasons::MAINTENANCE_WINDOW.into();
            began.message = String::new();
            out.push(began);
        }
        let not_back = kind == Kind::Completed
            && node.availability.unavailable().is_some()
            && recorded_recovery(&c.message).is_none();
        if let (true, Some(after)) = (not_back, rules.not_back_after)
            && let Ok(due) = at.checked_add(after)
        {
            if due <= inputs.now {
                let mut n = notice(Kind::NotBack, due);
                n.duration = Some(after);
                out.push(n);
            } else {
                later(due);
            }
        }
        return out;
    }
    if reasons::is_waiting(&c.reason)
        && let Some(after) = rules.waiting_after
        && let Some(since) = waiting_since(rules, node.conditions)
        && let Ok(due) = since.checked_add(after)
    {
        if due <= inputs.now {
            let mut n = notice(Kind::Waiting, due);
            n.duration = Some(after);
            // One per episode: the episode's start names it, whatever the node waits for
            // meanwhile.
            n.id = id(rules, Kind::Waiting, node.uid, since);
            out.push(n);
        } else {
            later(due);
        }
    }
    out
}

/// The condition of type `type_` on `node`, if this instance owns it.
fn owned<'a>(node: &NodeState<'a>, type_: &str) -> Option<&'a Condition> {
    find(node.conditions, type_).filter(|_| node.owned.iter().any(|t| t == type_))
}

/// When a maintenance whose end records no start instant (written by an earlier
/// kumaco) started: its end's `lastTransitionTime` less the duration, both whole
/// seconds as its True condition's `lastTransitionTime` was.
fn started(end: Timestamp, lasted: SignedDuration) -> Option<Timestamp> {
    let start = end.checked_sub(lasted).ok()?;
    Timestamp::from_second(start.as_second()).ok()
}

/// When a waiting node became due for maintenance: the latest of its window's start on
/// it and its required conditions turning True.
fn waiting_since(rules: &Rules, conditions: &[Condition]) -> Option<Timestamp> {
    let since = |t: &str| find(conditions, t)?.last_transition_time;
    since(UNDER_MAINTENANCE)
        .into_iter()
        .chain(rules.required.iter().filter_map(|t| since(t)))
        .max()
}

/// A node's transitions without `--in-progress`: its window's maintenance itself.
fn under_maintenance(rules: &Rules, inputs: &Inputs, node: &NodeState) -> Vec<Notice> {
    let Some(c) = owned(node, UNDER_MAINTENANCE) else {
        return Vec::new();
    };
    let Some(at) = c.last_transition_time else {
        return Vec::new();
    };
    let kind = match (c.status, c.reason.as_str()) {
        (Status::True, _) => Kind::Started,
        (Status::False, reasons::NO_ACTIVE_MAINTENANCE_WINDOW | reasons::MAINTENANCE_BLACKOUT) => {
            Kind::Ended
        }
        _ => return Vec::new(),
    };
    vec![node_notice(rules, inputs, node, kind, at, c)]
}

/// The heads-up before a window opens, while its next start is within the lead time.
fn planned(
    rules: &Rules,
    inputs: &Inputs,
    source: &WindowSource,
    later: &mut impl FnMut(Timestamp),
) -> Option<Notice> {
    let lead = rules.planned_lead_time?;
    let window = source.window.as_ref().ok().filter(|w| !w.blackout)?;
    let start = window.schedule.next_after(inputs.now)?;
    let at = start.checked_sub(lead).ok()?;
    if at > inputs.now {
        later(at);
        return None;
    }
    let mut n = window_notice_at(rules, source, Kind::Planned, at);
    n.reason = reasons::MAINTENANCE_SCHEDULED.into();
    n.message = format!(
        "maintenance window {} starts at {}",
        source.id,
        start.strftime("%Y-%m-%dT%H:%M:%SZ")
    );
    n.selected = Some(selected(inputs, window).count());
    n.forecast = inputs
        .forecast
        .and_then(|f| of_occurrence(f, inputs, window, start));
    Some(n)
}

fn window_info(source: &WindowSource) -> WindowInfo {
    WindowInfo {
        namespace: source.id.namespace.clone(),
        name: source.id.name.clone(),
        description: source
            .window
            .as_ref()
            .ok()
            .and_then(|w| w.description.clone()),
    }
}

/// A notice about `source` of `kind` at `at`, with nothing of a node.
fn window_notice_at(rules: &Rules, source: &WindowSource, kind: Kind, at: Timestamp) -> Notice {
    Notice {
        window: Some(window_info(source)),
        ..Notice::new(
            id(rules, kind, &source.uid, at),
            kind,
            rules.cluster.clone(),
            at,
        )
    }
}

/// The nodes in scope `window` selects.
fn selected<'a>(
    inputs: &'a Inputs,
    window: &'a Window,
) -> impl Iterator<Item = &'a NodeState<'a>> + 'a {
    inputs
        .nodes
        .iter()
        .filter(move |n| window.selector.matches(n.labels))
}

/// A window's opening or closing, from the event that announces it. A window deleted
/// while open closes too, with what its last version selected.
fn window_notice(rules: &Rules, inputs: &Inputs, a: &Announcement) -> Option<Notice> {
    let (kind, at) = match &a.what {
        What::Started { span, .. } => (Kind::WindowOpened, span.start?),
        What::Ended { at } | What::Deleted { at } => (Kind::WindowClosed, *at),
        _ => return None,
    };
    let source = inputs.windows.iter().find(|w| w.uid == a.uid).copied();
    let mut n = match source {
        Some(source) => window_notice_at(rules, source, kind, at),
        None => {
            let gone = WindowSource {
                id: a.window.clone(),
                uid: a.uid.clone(),
                data_hash: 0,
                created: None,
                window: Err(crate::window::InvalidWindow(Vec::new())),
            };
            window_notice_at(rules, &gone, kind, at)
        }
    };
    let window = source.and_then(|s| s.window.as_ref().ok());
    match (&a.what, window) {
        (What::Started { selected, .. }, w) => {
            n.selected = Some(*selected);
            n.forecast = w
                .zip(inputs.forecast)
                .and_then(|(w, f)| of_occurrence(f, inputs, w, at));
        }
        (_, Some(w)) => {
            // What the occurrence that ended at `at` did: the nodes it selects now, those
            // whose maintenance completed within it, those it left still due.
            let began = at
                .checked_sub(w.duration.to_signed())
                .unwrap_or(Timestamp::MIN);
            let nodes: Vec<&NodeState> = selected(inputs, w).collect();
            n.selected = Some(nodes.len());
            if rules.in_progress {
                let (done, left) = outcome(rules, &nodes, began, at);
                n.done = Some(done);
                n.left = left;
            }
            n.forecast = inputs.told.get(&(a.uid.clone(), began)).cloned();
        }
        (_, None) => {}
    }
    Some(n)
}

/// Of `selected`, how many completed a maintenance within `[began, ended]`, and the ones
/// still due for one, with why they did not start.
fn outcome(
    rules: &Rules,
    selected: &[&NodeState],
    began: Timestamp,
    ended: Timestamp,
) -> (usize, Vec<Left>) {
    let mut done = 0;
    let mut left = Vec::new();
    for node in selected {
        let c = owned(node, MAINTENANCE_IN_PROGRESS);
        let completed_within = c.is_some_and(|c| {
            reasons::completes_maintenance(&c.reason)
                && c.last_transition_time
                    .is_some_and(|t| t >= began && t <= ended)
        });
        if completed_within {
            done += 1;
            continue;
        }
        let due = rules
            .required
            .iter()
            .all(|t| crate::conditions::is_true(node.conditions, t));
        let Some(c) = c.filter(|c| due && !c.is_true()) else {
            continue;
        };
        // The answer outside the window records what the node waited for; one still in
        // another window says it itself.
        let (reason, message) = match waited(c) {
            Some(w) => w,
            None if reasons::is_waiting(&c.reason) => (c.reason.as_str(), c.message.as_str()),
            None => continue,
        };
        left.push(Left {
            node: node.name.to_string(),
            reason: reason.to_string(),
            message: crate::conditions::bounded(message.to_string(), MAX_MESSAGE_BYTES),
        });
    }
    left.sort_by(|a, b| a.node.cmp(&b.node));
    (done, left)
}

/// What the forecast says of the occurrence of `window` starting at `start`: when the
/// maintenances it starts end (at the median durations and at the 90th percentile), and
/// which of the nodes it selects that need maintenance it does not start. `None` when it
/// starts none.
fn of_occurrence(
    played: &forecast::Forecast,
    inputs: &Inputs,
    window: &Window,
    start: Timestamp,
) -> Option<Forecast> {
    let in_it = |p: &Placement| {
        matches!(p, Placement::Starts { occurrence, .. }
            if occurrence.window == window.id && occurrence.start == start)
    };
    let selects: BTreeMap<&str, ()> = selected(inputs, window).map(|n| (n.name, ())).collect();
    let (mut expected, mut p90) = (None::<Timestamp>, None::<Timestamp>);
    let mut not_fitting = Vec::new();
    for node in &played.nodes {
        let Plan::Forecast { median, p90: high } = &node.plan else {
            continue;
        };
        if in_it(median) {
            expected = expected.max(median.end());
            p90 = p90.max(high.end().or(median.end()));
        } else if selects.contains_key(node.name.as_str())
            && !matches!(median, Placement::InProgress { .. })
        {
            not_fitting.push(node.name.clone());
        }
    }
    let expected_end = expected?;
    Some(Forecast {
        expected_end,
        p90_end: p90.unwrap_or(expected_end).max(expected_end),
        not_fitting,
    })
}

#[cfg(test)]
mod tests;
