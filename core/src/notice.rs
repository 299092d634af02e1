//! One maintenance transition as people are told of it (a [`Notice`]), and its words for
//! a chat: a title line, a few lines below it, and a [`digest`] grouping many.
//!
//! The shell derives the notices from the cluster and delivers them; this module only
//! words them, the same way for every sink. Every text is bounded, whatever the cluster
//! holds: a list names its first [`MAX_NAMES`] entries then "and N more", one line of a
//! list is at most [`MAX_LINE_BYTES`], a title [`MAX_TITLE_BYTES`] and a text
//! [`MAX_TEXT_BYTES`], each cut on a character boundary and marked `…`. Times are in UTC,
//! the one zone every reader of a shared channel can convert from.

#[cfg(test)]
mod tests;

use std::fmt::{self, Write as _};
use std::str::FromStr;

use jiff::{SignedDuration, Timestamp};

use crate::conditions::bounded;
use crate::duration::GoDuration;

/// The names a list shows before "and N more": enough to recognise a rollout's first
/// nodes, few enough that a 1,000-node edge reads as one line.
pub const MAX_NAMES: usize = 5;
/// The longest line of a list (a node left waiting and why; a window's description).
pub const MAX_LINE_BYTES: usize = 240;
/// The longest title: one line, with room for a node's name at the API's longest.
pub const MAX_TITLE_BYTES: usize = 256;
/// The longest text below a title. A title, a newline and a text fit together in the
/// smallest message any chat sink takes (Discord's), so a notice is never cut by a sink.
pub const MAX_TEXT_BYTES: usize = 1536;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The heads-up before a maintenance (`MaintenancePlanned`).
    Planned,
    /// The node may be disrupted now (`MaintenanceInProgress` became true).
    Started,
    /// The maintenance is over: the node rebooted, or its requirement went away.
    Completed,
    /// The maintenance was cut short: its window ended, or a blackout began.
    Ended,
    /// The node has waited to start longer than a threshold (once per episode).
    Waiting,
    /// A completed node is still not Ready after a threshold.
    NotBack,
    /// A window's occurrence began.
    WindowOpened,
    /// A window's occurrence ended.
    WindowClosed,
}

impl Kind {
    /// Every kind, in the order a digest lists them.
    pub const ALL: [Kind; 8] = [
        Kind::Planned,
        Kind::Started,
        Kind::Completed,
        Kind::Ended,
        Kind::Waiting,
        Kind::NotBack,
        Kind::WindowOpened,
        Kind::WindowClosed,
    ];

    /// The stable name: metrics labels, CloudEvents `type` suffixes, flags. Never changes
    /// once released.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Planned => "planned",
            Kind::Started => "started",
            Kind::Completed => "completed",
            Kind::Ended => "ended",
            Kind::Waiting => "waiting",
            Kind::NotBack => "not-back",
            Kind::WindowOpened => "window-opened",
            Kind::WindowClosed => "window-closed",
        }
    }

    /// The words a person reads in a digest.
    pub const fn label(self) -> &'static str {
        match self {
            Kind::NotBack => "not back",
            Kind::WindowOpened => "window opened",
            Kind::WindowClosed => "window closed",
            other => other.name(),
        }
    }

    /// Whether the notice is about a window rather than a node.
    pub const fn is_window(self) -> bool {
        matches!(self, Kind::WindowOpened | Kind::WindowClosed)
    }

    /// A set of kinds as a flag gives it: names separated by commas (spaces around them
    /// ignored), or `all`. Each kind once, in [`Kind::ALL`]'s order.
    pub fn parse_set(spec: &str) -> Result<Vec<Kind>, KindError> {
        if spec.trim().is_empty() {
            return Err(KindError::Empty);
        }
        let mut wanted = [false; Kind::ALL.len()];
        for item in spec.split(',').map(str::trim) {
            if item == "all" {
                wanted = [true; Kind::ALL.len()];
                continue;
            }
            let kind: Kind = item.parse()?;
            wanted[kind as usize] = true;
        }
        Ok(Kind::ALL
            .into_iter()
            .filter(|k| wanted[*k as usize])
            .collect())
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = KindError;

    /// A kind by its [`Kind::name`], exactly.
    fn from_str(s: &str) -> Result<Kind, KindError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| KindError::Unknown(s.to_string()))
    }
}

/// The names of every kind, for messages: `planned, started, ...`.
fn kind_names() -> String {
    Kind::ALL.map(Kind::name).join(", ")
}

/// A kind name, or a set of them, that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    #[error("{0:?} is not a transition: expected one of {names}, or all", names = kind_names())]
    Unknown(String),
    #[error(
        "no transition given: expected a comma-separated list of {names}, or all",
        names = kind_names()
    )]
    Empty,
}

/// The node a notice is about, with the labels people place it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    pub zone: Option<String>,
    pub pool: Option<String>,
}

/// The window a notice is about, or the one a node's maintenance belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowInfo {
    pub namespace: String,
    pub name: String,
    pub description: Option<String>,
}

/// What the forecast said of a window's rollout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forecast {
    /// When the rollout is expected to end (the median run).
    pub expected_end: Timestamp,
    /// When it ends at the 90th percentile.
    pub p90_end: Timestamp,
    /// The nodes not expected to fit in the window, by name.
    pub not_fitting: Vec<String>,
}

/// A node a closing window left waiting, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Left {
    pub node: String,
    pub reason: String,
    pub message: String,
}

/// One transition, with everything a message about it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// Stable, given by the caller (hex); also the CloudEvents `id`.
    pub id: String,
    pub kind: Kind,
    /// The cluster's name, as configured.
    pub cluster: String,
    /// When the transition happened: the condition's `lastTransitionTime`, or the edge.
    pub at: Timestamp,
    /// `None` for window notices.
    pub node: Option<NodeInfo>,
    pub window: Option<WindowInfo>,
    /// The condition's reason (`NodeRebooted`, `WaitingForSlot`).
    pub reason: String,
    /// The condition's message, bounded by the caller.
    pub message: String,
    /// How long: the maintenance (completed, ended), the wait (waiting), since the end
    /// (not back).
    pub duration: Option<SignedDuration>,
    /// Completed: whether the node rebooted.
    pub rebooted: Option<bool>,
    /// Window opened or closed: the nodes the window selects.
    pub selected: Option<usize>,
    /// Window closed: the nodes whose maintenance completed in it.
    pub done: Option<usize>,
    /// Window closed: the nodes left waiting, and why.
    pub left: Vec<Left>,
    /// Planned, window opened: the forecast; window closed: the forecast made at the
    /// opening, to compare with what happened.
    pub forecast: Option<Forecast>,
}

impl Notice {
    /// A notice of `kind` at `at` that says nothing more yet: no node, no window, no
    /// reason; the caller fills in what its kind carries.
    pub fn new(id: String, kind: Kind, cluster: String, at: Timestamp) -> Notice {
        Notice {
            id,
            kind,
            cluster,
            at,
            node: None,
            window: None,
            reason: String::new(),
            message: String::new(),
            duration: None,
            rebooted: None,
            selected: None,
            done: None,
            left: Vec::new(),
            forecast: None,
        }
    }

    /// What the notice is about, as a digest names it: the node's name, or the window's
    /// `namespace/name`; the cluster's name when neither is given.
    pub fn subject_name(&self) -> String {
        match (&self.node, &self.window) {
            (Some(node), _) => node.name.clone(),
            (None, Some(w)) => format!("{}/{}", w.namespace, w.name),
            (None, None) => self.cluster.clone(),
        }
    }

    /// What the notice is about, as a title names it: `node-3 (zone-a, pool-1)`,
    /// `window kumaco/weekly`.
    fn subject(&self) -> String {
        match (&self.node, &self.window) {
            (Some(node), _) => {
                let place: Vec<&str> = [&node.zone, &node.pool]
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect();
                if place.is_empty() {
                    node.name.clone()
                } else {
                    format!("{} ({})", node.name, place.join(", "))
                }
            }
            (None, Some(w)) => format!("window {}/{}", w.namespace, w.name),
            (None, None) => format!("cluster {}", self.cluster),
        }
    }

    /// One short line: `node-3 (zone-a): maintenance completed after 4m12s, rebooted`.
    /// At most [`MAX_TITLE_BYTES`].
    pub fn title(&self) -> String {
        let subject = self.subject();
        let after = |d: Option<SignedDuration>| {
            d.map(|d| format!(" after {}", duration(d)))
                .unwrap_or_default()
        };
        let title = match self.kind {
            Kind::Planned => format!("{subject}: maintenance planned"),
            Kind::Started => format!("{subject}: maintenance started"),
            Kind::Completed => {
                let rebooted = match self.rebooted {
                    Some(true) => ", rebooted",
                    Some(false) => ", not rebooted",
                    None => "",
                };
                format!(
                    "{subject}: maintenance completed{}{rebooted}",
                    after(self.duration)
                )
            }
            Kind::Ended => format!(
                "{subject}: maintenance ended unfinished{}",
                after(self.duration)
            ),
            Kind::Waiting => match self.duration {
                Some(d) => format!("{subject}: waiting to start for {}", duration(d)),
                None => format!("{subject}: waiting to start"),
            },
            Kind::NotBack => match self.duration {
                Some(d) => format!("{subject}: not Ready {} after its maintenance", duration(d)),
                None => format!("{subject}: not Ready after its maintenance"),
            },
            Kind::WindowOpened => match self.selected {
                Some(n) => format!("{subject} opened: {}", nodes(n)),
                None => format!("{subject} opened"),
            },
            Kind::WindowClosed => {
                let mut t = format!("{subject} closed");
                match (self.done, self.selected) {
                    (Some(done), Some(selected)) => {
                        let _ = write!(t, ": {done} of {} done", nodes(selected));
                    }
                    (Some(done), None) => {
                        let _ = write!(t, ": {} done", nodes(done));
                    }
                    (None, _) => {}
                }
                if !self.left.is_empty() {
                    let sep = if self.done.is_some() { ", " } else { ": " };
                    let _ = write!(t, "{sep}{} left", self.left.len());
                }
                t
            }
        };
        bounded(title, MAX_TITLE_BYTES)
    }

    /// A few lines below the title: what the kind adds (the forecast, the nodes left),
    /// the window, the condition's reason and message, the cluster and the time. At most
    /// [`MAX_TEXT_BYTES`].
    pub fn text(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        match self.kind {
            Kind::Planned | Kind::WindowOpened => {
                if let Some(f) = &self.forecast {
                    lines.push(forecast_line(f, self.at));
                    if let Some(node) = &self.node
                        && f.not_fitting.contains(&node.name)
                    {
                        lines.push(format!("{} is not expected to fit", node.name));
                    }
                }
            }
            Kind::WindowClosed => {
                if let Some(f) = &self.forecast {
                    lines.push(comparison_line(f, self.at, self.left.len()));
                }
                if !self.left.is_empty() {
                    lines.push("left waiting:".to_string());
                    for l in self.left.iter().take(MAX_NAMES) {
                        let why = joined(&l.reason, &l.message);
                        lines.push(bounded(format!("- {}: {why}", l.node), MAX_LINE_BYTES));
                    }
                    if self.left.len() > MAX_NAMES {
                        lines.push(format!("- and {} more", self.left.len() - MAX_NAMES));
                    }
                }
            }
            _ => {}
        }
        if let Some(w) = &self.window {
            let line = match (&w.description, self.kind.is_window()) {
                (Some(d), true) => d.clone(),
                (Some(d), false) => format!("window {}/{}: {d}", w.namespace, w.name),
                (None, true) => String::new(),
                (None, false) => format!("window {}/{}", w.namespace, w.name),
            };
            if !line.is_empty() {
                lines.push(bounded(line, MAX_LINE_BYTES));
            }
        }
        let why = joined(&self.reason, &self.message);
        if !why.is_empty() {
            lines.push(why);
        }
        lines.push(format!("cluster {}, {}", self.cluster, full_time(self.at)));
        bounded(lines.join("\n"), MAX_TEXT_BYTES)
    }
}

/// One chat message for many notices of an interval: the counts by kind in the title;
/// below it, a line per kind with its first [`MAX_NAMES`] names, and the interval. Bounded
/// as a single notice's title and text are.
pub fn digest(notices: &[Notice]) -> (String, String) {
    let Some(first) = notices.first() else {
        return ("no maintenance transitions".to_string(), String::new());
    };
    let mut counts = Vec::new();
    let mut lines = Vec::new();
    for kind in Kind::ALL {
        let names: Vec<String> = notices
            .iter()
            .filter(|n| n.kind == kind)
            .map(Notice::subject_name)
            .collect();
        if names.is_empty() {
            continue;
        }
        counts.push(format!("{} {}", names.len(), kind.label()));
        lines.push(bounded(
            format!(
                "{} ({}): {}",
                kind.label(),
                names.len(),
                list(names.iter().map(String::as_str), names.len())
            ),
            MAX_LINE_BYTES,
        ));
    }
    let n = notices.len();
    let title = format!(
        "{n} maintenance transition{}: {}",
        if n == 1 { "" } else { "s" },
        counts.join(", ")
    );
    let from = notices.iter().map(|n| n.at).min().unwrap_or(first.at);
    let to = notices.iter().map(|n| n.at).max().unwrap_or(first.at);
    let interval = if from == to {
        full_time(from)
    } else {
        format!("{} to {} UTC", full_clock(from), clock(from, to))
    };
    lines.push(format!("cluster {}, {interval}", first.cluster));
    (
        bounded(title, MAX_TITLE_BYTES),
        bounded(lines.join("\n"), MAX_TEXT_BYTES),
    )
}

/// `a, b, c, d, e and 3 more`: the first [`MAX_NAMES`] of `total` names.
fn list<'a>(names: impl Iterator<Item = &'a str>, total: usize) -> String {
    let shown: Vec<&str> = names.take(MAX_NAMES).collect();
    let mut s = shown.join(", ");
    if total > shown.len() {
        let _ = write!(s, " and {} more", total - shown.len());
    }
    s
}

/// `1 node`, `120 nodes`.
fn nodes(n: usize) -> String {
    format!("{n} node{}", if n == 1 { "" } else { "s" })
}

/// `Reason: message`, or whichever of the two is not empty.
fn joined(reason: &str, message: &str) -> String {
    match (reason.is_empty(), message.is_empty()) {
        (false, false) => format!("{reason}: {message}"),
        (false, true) => reason.to_string(),
        (true, false) => message.to_string(),
        (true, true) => String::new(),
    }
}

/// `expected done 03:40 (p90 04:05) UTC; 3 will not fit: a, b, c`.
fn forecast_line(f: &Forecast, at: Timestamp) -> String {
    let mut s = format!(
        "expected done {} (p90 {}) UTC",
        clock(at, f.expected_end),
        clock(at, f.p90_end)
    );
    if !f.not_fitting.is_empty() {
        let _ = write!(
            s,
            "; {} will not fit: {}",
            f.not_fitting.len(),
            list(
                f.not_fitting.iter().map(String::as_str),
                f.not_fitting.len()
            )
        );
    }
    s
}

/// The forecast made at the opening beside what happened at the close (`at`):
/// `forecast at the opening: done 03:40 (p90 04:05) UTC, 3 not fitting; closed 04:10 UTC
/// with 2 left`.
fn comparison_line(f: &Forecast, at: Timestamp, left: usize) -> String {
    let mut s = format!(
        "forecast at the opening: done {} (p90 {}) UTC",
        clock(at, f.expected_end),
        clock(at, f.p90_end)
    );
    if !f.not_fitting.is_empty() {
        let _ = write!(s, ", {} not fitting", f.not_fitting.len());
    }
    let _ = write!(s, "; closed {} UTC", clock(at, at));
    match left {
        0 => s.push_str(" with none left"),
        n => {
            let _ = write!(s, " with {n} left");
        }
    }
    s
}

/// Close to the reference instant (within [`SECONDS_WITHIN`]), `HH:MM:SS`: short
/// maintenances are seconds apart. Farther, `HH:MM` to the nearest minute. Prefixed by
/// the date when it is not the reference's (UTC) date.
fn clock(reference: Timestamp, t: Timestamp) -> String {
    let near = t.duration_since(reference).abs() < SECONDS_WITHIN;
    let shown = if near {
        t
    } else {
        // Rounded to the nearest minute: shifted by half of one, then cut to the minute.
        t.checked_add(SignedDuration::from_secs(30)).unwrap_or(t)
    };
    let civil = shown.to_zoned(jiff::tz::TimeZone::UTC).datetime();
    let same_day = civil.date() == reference.to_zoned(jiff::tz::TimeZone::UTC).date();
    let time = if near {
        civil.strftime("%H:%M:%S").to_string()
    } else {
        civil.strftime("%H:%M").to_string()
    };
    if same_day {
        time
    } else {
        format!("{} {time}", civil.date())
    }
}

/// The distance from the reference within which [`clock`] shows seconds.
const SECONDS_WITHIN: SignedDuration = SignedDuration::from_hours(1);

/// `2026-12-07 13:00:05`.
fn full_clock(t: Timestamp) -> String {
    t.to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// `2026-12-07 13:00:05 UTC`.
fn full_time(t: Timestamp) -> String {
    format!("{} UTC", full_clock(t))
}

/// A duration as Go prints it, rounded for a reader: to the second from a minute on
/// (`4m12s`), to the tenth below (`4.5s`; Go writes a tenth alone in milliseconds).
pub fn duration(d: SignedDuration) -> String {
    let nanos = d.as_nanos();
    let unit: i128 = if nanos.abs() >= 60_000_000_000 {
        1_000_000_000
    } else {
        100_000_000
    };
    let (min, max) = (i128::from(i64::MIN), i128::from(i64::MAX));
    let nanos = nanos.clamp(min, max);
    // Half away from zero; towards zero where that would leave Go's range.
    let mut rounded = (nanos + nanos.signum() * unit / 2) / unit * unit;
    if rounded > max {
        rounded -= unit;
    } else if rounded < min {
        rounded += unit;
    }
    GoDuration::from_nanos(i64::try_from(rounded).unwrap_or_default()).to_string()
}
