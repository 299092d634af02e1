//! The pure decision: from windows, a node and the time, the conditions kumaco wants on
//! that node. No I/O: the pass feeds it cached state and the shell writes what it returns.

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};

use crate::conditions::{Condition, Desired, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::limits::MAX_DESCRIPTION_BYTES;
use crate::reasons;
use crate::selector::{Labels, Selector};
use crate::window::{Span, Window, WindowId};

/// How far back kumaco looks for the start of an active span (and for span ends) when
/// deciding which window events are due; see `announce`. Also bounds the work of
/// following chained occurrences backwards.
pub const HORIZON: SignedDuration = SignedDuration::from_mins(30);

/// The windows active at one instant (and, with a lead time, the ones about to start),
/// computed once per pass and asked per node.
pub struct ActiveWindows<'a> {
    pub now: Timestamp,
    active: Vec<(&'a Window, Span)>,
    /// Indexes into `active`, grouped by identical selector: windows often share a
    /// selector (a zone, a pool), and each distinct one is matched once per node.
    by_selector: Vec<Vec<usize>>,
    /// Maintenance windows (not blackouts) whose next span starts within the lead time,
    /// with that start and the blackouts that will be active then.
    upcoming: Vec<(&'a Window, Timestamp, Vec<&'a Window>)>,
}

impl<'a> ActiveWindows<'a> {
    pub fn at(windows: impl IntoIterator<Item = &'a Window>, now: Timestamp) -> Self {
        Self::with_lead(windows, now, None)
    }

    /// Also finds the windows starting within `lead` (`--planned-lead-time`).
    pub fn with_lead(
        windows: impl IntoIterator<Item = &'a Window>,
        now: Timestamp,
        lead: Option<SignedDuration>,
    ) -> Self {
        let all: Vec<&Window> = windows.into_iter().collect();
        let look_back = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
        let active: Vec<(&Window, Span)> = all
            .iter()
            .filter_map(|w| w.span_at(now, look_back).map(|s| (*w, s)))
            .collect();
        let mut windows = Self::from_spans(now, active);
        let mut upcoming = Vec::new();
        if let Some(lead) = lead {
            let horizon = now.checked_add(lead).unwrap_or(Timestamp::MAX);
            for w in all.iter().filter(|w| !w.blackout) {
                if let Some(start) = w.next_span_start(now).filter(|s| *s <= horizon) {
                    let blackouts = all
                        .iter()
                        .filter(|b| b.blackout && b.is_active(start))
                        .copied()
                        .collect();
                    upcoming.push((*w, start, blackouts));
                }
            }
        }
        windows.upcoming = upcoming;
        windows
    }

    /// The windows active at `now`, given with their spans there (see
    /// [`Window::span_at`]): for a caller that follows many instants and recomputes a
    /// window's span only at its own edges, between which it does not change.
    pub fn from_spans(now: Timestamp, active: Vec<(&'a Window, Span)>) -> Self {
        let mut groups: HashMap<&Selector, usize> = HashMap::new();
        let mut by_selector: Vec<Vec<usize>> = Vec::new();
        for (i, (w, _)) in active.iter().enumerate() {
            let g = *groups.entry(&w.selector).or_insert_with(|| {
                by_selector.push(Vec::new());
                by_selector.len() - 1
            });
            by_selector[g].push(i);
        }
        ActiveWindows {
            now,
            active,
            by_selector,
            upcoming: Vec::new(),
        }
    }

    /// The active windows and their current span.
    pub fn iter(&self) -> impl Iterator<Item = &(&'a Window, Span)> {
        self.active.iter()
    }

    /// What the active windows say about a node with these labels.
    pub fn verdict<L: Labels + ?Sized>(&self, labels: &L) -> Verdict<'a> {
        self.verdict_where(|w| w.selector.matches(labels))
    }

    /// The same for a node that `selects` says a window's selector selects (asked once
    /// per distinct selector): for a caller that matched the selectors already.
    pub fn verdict_where(&self, mut selects: impl FnMut(&'a Window) -> bool) -> Verdict<'a> {
        let mut windows = Vec::new();
        let mut blackouts = Vec::new();
        let mut until = Some(self.now);
        for group in &self.by_selector {
            if !selects(self.active[group[0]].0) {
                continue;
            }
            for &i in group {
                let (w, span) = self.active[i];
                if w.blackout {
                    blackouts.push(&w.id);
                } else {
                    windows.push(w);
                    until = until.zip(span.end).map(|(a, b)| a.max(b));
                }
            }
        }
        windows.sort_by(|a, b| a.id.cmp(&b.id));
        blackouts.sort();
        Verdict {
            until: if windows.is_empty() { None } else { until },
            windows,
            blackouts,
        }
    }

    /// The earliest maintenance window about to start on a node with these labels that
    /// no blackout will cover at its start: (window, start).
    pub fn next_planned<L: Labels + ?Sized>(&self, labels: &L) -> Option<(&'a Window, Timestamp)> {
        self.upcoming
            .iter()
            .filter(|(w, _, blackouts)| {
                w.selector.matches(labels) && !blackouts.iter().any(|b| b.selector.matches(labels))
            })
            .map(|(w, start, _)| (*w, *start))
            .min_by(|a, b| (a.1, &a.0.id).cmp(&(b.1, &b.0.id)))
    }
}

/// What the active windows say about one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict<'a> {
    /// Active maintenance windows (not blackouts) selecting the node, sorted by id.
    pub windows: Vec<&'a Window>,
    /// When the last of their spans ends; `None` without windows, or when a span has no
    /// end in sight.
    pub until: Option<Timestamp>,
    /// Active blackouts selecting the node, sorted.
    pub blackouts: Vec<&'a WindowId>,
}

impl Verdict<'_> {
    /// UnderMaintenance: a window selects the node and no blackout does.
    pub fn is_maintenance(&self) -> bool {
        !self.windows.is_empty() && self.blackouts.is_empty()
    }

    /// A maintenance window is active on the node, whether a blackout suspends it or not
    /// (maintenance in progress continues through a blackout).
    pub fn window_active(&self) -> bool {
        !self.windows.is_empty()
    }

    /// `window ns/a` or `windows ns/a, ns/b`.
    pub fn window_names(&self) -> String {
        names(self.windows.iter().map(|w| w.id.to_string()).collect())
    }

    pub fn blackout_names(&self) -> String {
        self.blackouts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A verdict as the in-progress decision reads it (`in_progress::NodeState`'s window
/// fields), its names owned: the pass builds one per node, the forecast keeps one per
/// node between the window edges that change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InWindow {
    windows: String,
    until: Option<Timestamp>,
    maintenance: bool,
    window_active: bool,
    blackouts: Option<String>,
}

impl InWindow {
    pub fn of(verdict: &Verdict) -> InWindow {
        InWindow {
            windows: verdict.window_names(),
            until: verdict.until,
            maintenance: verdict.is_maintenance(),
            window_active: verdict.window_active(),
            blackouts: (!verdict.blackouts.is_empty()).then(|| verdict.blackout_names()),
        }
    }

    /// While UnderMaintenance: the windows' names and when their span ends.
    pub fn window(&self) -> Option<(&str, Option<Timestamp>)> {
        self.maintenance
            .then_some((self.windows.as_str(), self.until))
    }

    /// A maintenance window is active, even if a blackout suspends it.
    pub fn window_active(&self) -> bool {
        self.window_active
    }

    /// The blackouts suspending maintenance, if any.
    pub fn blackout(&self) -> Option<&str> {
        self.blackouts.as_deref()
    }
}

/// The first window an `UnderMaintenance=True` message names (`namespace/name`): the
/// message is [`under_maintenance`]'s, whose ids hold neither space nor comma.
pub fn first_window_named(message: &str) -> Option<&str> {
    let rest = message
        .strip_prefix("in maintenance windows ")
        .or_else(|| message.strip_prefix("in maintenance window "))?;
    let id = &rest[..rest.find([' ', ',']).unwrap_or(rest.len())];
    id.contains('/').then_some(id)
}

fn names(ids: Vec<String>) -> String {
    let noun = if ids.len() == 1 { "window" } else { "windows" };
    format!("{noun} {}", ids.join(", "))
}

/// The `UnderMaintenance` condition to hold on a node, given the verdict and what the
/// node shows now; `None` means the node should not carry the condition (kumaco never
/// adds a False condition to a node without one).
///
/// The message names the windows and the end of their span: stable while the node stays
/// in maintenance, however often overlapping occurrences start. Once False, the
/// condition is left as it is: a blackout ending or another False reason is not a change
/// worth a write.
pub fn under_maintenance(verdict: &Verdict, existing: Option<&Condition>) -> Option<Desired> {
    let existing_true = existing.is_some_and(Condition::is_true);
    let desired =
        |status, reason, message| Desired::new(UNDER_MAINTENANCE, status, reason, message);
    if verdict.is_maintenance() {
        let named: Vec<String> = verdict
            .windows
            .iter()
            .map(|w| match &w.description {
                Some(d) if !d.is_empty() => format!(
                    "{} ({})",
                    w.id,
                    crate::conditions::bounded(d.clone(), MAX_DESCRIPTION_BYTES)
                ),
                _ => w.id.to_string(),
            })
            .collect();
        let until = match verdict.until {
            Some(t) => format!(" until {}", t.strftime("%Y-%m-%dT%H:%M:%SZ")),
            None => String::new(),
        };
        return Some(desired(
            true,
            reasons::MAINTENANCE_WINDOW,
            format!("in maintenance {}{until}", names(named)),
        ));
    }
    if !existing_true {
        return existing.map(Desired::keep);
    }
    Some(if verdict.blackouts.is_empty() {
        desired(
            false,
            reasons::NO_ACTIVE_MAINTENANCE_WINDOW,
            "no active maintenance window selects this node".into(),
        )
    } else {
        desired(
            false,
            reasons::MAINTENANCE_BLACKOUT,
            format!(
                "maintenance suspended by blackout {}",
                verdict.blackout_names()
            ),
        )
    })
}

/// Where a node's maintenance stands, for `MaintenancePlanned`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Will be disrupted once it may start (UnderMaintenance without `--in-progress`
    /// counts as started; with it: waiting for a slot or a blocker).
    Waiting,
    /// Maintenance has begun.
    Started,
    /// Not going to start in the current window (requirement not met, completed, cutoff)
    /// or no window is active.
    Idle,
}

/// `MaintenancePlanned` (`--planned-lead-time`): True from `start - lead` until the
/// node's maintenance begins, never after its window ends, never on a node a blackout
/// covers at the start. `next` is [`ActiveWindows::next_planned`] for the node.
pub fn planned(
    next: Option<(&Window, Timestamp)>,
    verdict: &Verdict,
    progress: Progress,
    existing: Option<&Condition>,
) -> Option<Desired> {
    let desired =
        |status, reason, message| Desired::new(MAINTENANCE_PLANNED, status, reason, message);
    match (progress, next) {
        (Progress::Waiting, _) if verdict.window_active() => {
            return Some(desired(
                true,
                reasons::MAINTENANCE_SCHEDULED,
                format!(
                    "in maintenance {}; waiting to start",
                    verdict.window_names()
                ),
            ));
        }
        (Progress::Idle | Progress::Waiting, Some((w, start))) => {
            return Some(desired(
                true,
                reasons::MAINTENANCE_SCHEDULED,
                format!(
                    "maintenance window {} starts at {}",
                    w.id,
                    start.strftime("%Y-%m-%dT%H:%M:%SZ")
                ),
            ));
        }
        _ => {}
    }
    match existing {
        Some(c) if c.is_true() => Some(if progress == Progress::Started {
            desired(
                false,
                reasons::MAINTENANCE_STARTED,
                "maintenance has begun".into(),
            )
        } else {
            desired(
                false,
                reasons::NO_MAINTENANCE_PLANNED,
                "no maintenance is planned for this node".into(),
            )
        }),
        other => other.map(Desired::keep),
    }
}

/// Conditions this instance owns but should not decide on a node (the node left the
/// scope, or the flag deciding the type was removed): each True one goes False with
/// `reason`; the rest stay as they are (they must be in the apply, or server-side apply
/// deletes them).
pub fn relinquish(owned: &[&Condition], reason: &str, message: &str) -> Vec<Desired> {
    owned
        .iter()
        .map(|c| {
            if c.is_true() {
                Desired::new(&c.type_, false, reason, message.into())
            } else {
                Desired::keep(c)
            }
        })
        .collect()
}

/// The next instant after `now` at which any window opens or an occurrence ends, or (with
/// a lead time) a window comes within the lead time of its start.
pub fn next_edge<'a>(
    windows: impl IntoIterator<Item = &'a Window>,
    now: Timestamp,
    lead: Option<SignedDuration>,
) -> Option<Timestamp> {
    windows
        .into_iter()
        .flat_map(|w| {
            let planned = lead.and_then(|lead| {
                let ahead = now.checked_add(lead).ok()?;
                let start = w.schedule.next_after(ahead)?;
                start.checked_sub(lead).ok()
            });
            [w.next_edge_after(now), planned.filter(|_| !w.blackout)]
        })
        .flatten()
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::Status;
    use crate::testing::ts;
    use crate::window::test_window as window;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn cond(type_: &str, status: Status, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: "m".into(),
            last_transition_time: Some(ts("2026-01-01T00:00:00Z")),
            last_heartbeat_time: None,
        }
    }

    fn um(status: Status, reason: &str) -> Condition {
        cond(UNDER_MAINTENANCE, status, reason)
    }

    #[test]
    fn selected_node_in_active_window_is_under_maintenance() {
        let ws = [window("a", "0 2 * * *", "1h", "zone=a", false)];
        let active = ActiveWindows::at(&ws, ts("2026-01-01T02:30:00Z"));
        let v = active.verdict(&labels(&[("zone", "a")]));
        let d = under_maintenance(&v, None).unwrap();
        assert!(d.status);
        assert_eq!(d.reason, reasons::MAINTENANCE_WINDOW);
        assert_eq!(
            d.message,
            "in maintenance window ops/a until 2026-01-01T03:00:00Z"
        );
        let idle = active.verdict(&labels(&[("zone", "b")]));
        assert!(!idle.is_maintenance() && !idle.window_active());
    }

    #[test]
    fn idle_node_without_condition_gets_none_and_true_goes_false() {
        let ws: [Window; 0] = [];
        let v = ActiveWindows::at(&ws, ts("2026-01-01T00:00:00Z")).verdict(&labels(&[]));
        assert_eq!(under_maintenance(&v, None), None);
        let d =
            under_maintenance(&v, Some(&um(Status::True, reasons::MAINTENANCE_WINDOW))).unwrap();
        assert!(!d.status);
        assert_eq!(d.reason, reasons::NO_ACTIVE_MAINTENANCE_WINDOW);
        // Already False: kept as it is, whatever its reason.
        let d =
            under_maintenance(&v, Some(&um(Status::False, reasons::MAINTENANCE_BLACKOUT))).unwrap();
        assert_eq!(d.reason, reasons::MAINTENANCE_BLACKOUT);
    }

    #[test]
    fn overlapping_windows_are_named_and_end_at_the_latest() {
        let ws = [
            window("b", "0 2 * * *", "2h", "", false),
            window("a", "30 2 * * *", "1h", "", false),
        ];
        let active = ActiveWindows::at(&ws, ts("2026-01-01T02:45:00Z"));
        let d = under_maintenance(&active.verdict(&labels(&[])), None).unwrap();
        assert_eq!(
            d.message,
            "in maintenance windows ops/a, ops/b until 2026-01-01T04:00:00Z"
        );
    }

    #[test]
    fn self_overlapping_occurrences_keep_one_message() {
        let ws = [window("often", "@every 1s", "1h", "", false)];
        let messages: Vec<String> = (0..5)
            .map(|i| {
                let now = ts("2026-01-01T02:00:00Z") + SignedDuration::from_secs(i);
                let v = ActiveWindows::at(&ws, now).verdict(&labels(&[]));
                under_maintenance(&v, None).unwrap().message
            })
            .collect();
        assert!(
            messages
                .iter()
                .all(|m| m == "in maintenance window ops/often")
        );
    }

    #[test]
    fn descriptions_in_messages_are_bounded() {
        let mut w = window("a", "0 2 * * *", "1h", "", false);
        w.description = Some("x".repeat(500_000));
        let ws = [w];
        let v = ActiveWindows::at(&ws, ts("2026-01-01T02:30:00Z")).verdict(&labels(&[]));
        let d = under_maintenance(&v, None).unwrap();
        assert!(
            d.message.len() < MAX_DESCRIPTION_BYTES + 100,
            "{}",
            d.message.len()
        );
        assert!(d.message.contains('…'));
    }

    #[test]
    fn blackout_wins_over_windows_but_the_window_stays_visible() {
        let ws = [
            window("w", "0 2 * * *", "2h", "", false),
            window("freeze", "0 0 * * *", "24h", "zone=a", true),
        ];
        let active = ActiveWindows::at(&ws, ts("2026-01-01T02:30:00Z"));
        let v = active.verdict(&labels(&[("zone", "a")]));
        assert!(!v.is_maintenance());
        assert!(
            v.window_active(),
            "in-progress maintenance continues through it"
        );
        let d =
            under_maintenance(&v, Some(&um(Status::True, reasons::MAINTENANCE_WINDOW))).unwrap();
        assert_eq!(
            (d.status, d.reason.as_str()),
            (false, reasons::MAINTENANCE_BLACKOUT)
        );
        assert!(d.message.contains("ops/freeze"));
        assert_eq!(under_maintenance(&v, None), None);
        // Other nodes are unaffected.
        assert!(active.verdict(&labels(&[("zone", "b")])).is_maintenance());
    }

    #[test]
    fn relinquish_turns_only_true_to_false() {
        let a = um(Status::True, reasons::MAINTENANCE_WINDOW);
        let b = cond(
            "MaintenanceInProgress",
            Status::False,
            reasons::NO_ACTIVE_MAINTENANCE_WINDOW,
        );
        let got = relinquish(&[&a, &b], reasons::NODE_OUT_OF_SCOPE, "left");
        assert_eq!(
            (got[0].status, got[0].reason.as_str()),
            (false, reasons::NODE_OUT_OF_SCOPE)
        );
        assert_eq!(
            (got[1].status, got[1].reason.as_str()),
            (false, reasons::NO_ACTIVE_MAINTENANCE_WINDOW)
        );
    }

    #[test]
    fn next_edge_is_the_earliest_of_all_windows() {
        let ws = [
            window("a", "0 2 * * *", "1h", "", false),
            window("b", "0 1 * * *", "90m", "", false),
        ];
        assert_eq!(
            next_edge(&ws, ts("2026-01-01T00:00:00Z"), None),
            Some(ts("2026-01-01T01:00:00Z"))
        );
        assert_eq!(
            next_edge(&ws, ts("2026-01-01T02:00:00Z"), None),
            Some(ts("2026-01-01T02:30:00Z"))
        );
        // A lead time adds the instant a start comes within it.
        assert_eq!(
            next_edge(
                &ws,
                ts("2026-01-01T00:00:00Z"),
                Some(SignedDuration::from_mins(90))
            ),
            Some(ts("2026-01-01T00:30:00Z"))
        );
    }

    #[test]
    fn planned_from_the_lead_time_until_maintenance_begins() {
        let ws = [
            window("w", "0 2 * * *", "1h", "", false),
            window("freeze", "0 2 * * *", "10m", "zone=frozen", true),
        ];
        let lead = Some(SignedDuration::from_mins(30));
        let plan = |now: &str, zone: &str, progress, existing: Option<&Condition>| {
            let active = ActiveWindows::with_lead(&ws, ts(now), lead);
            let l = labels(&[("zone", zone)]);
            planned(
                active.next_planned(&l),
                &active.verdict(&l),
                progress,
                existing,
            )
            .map(|d| (d.status, d.reason, d.message))
        };
        // Before the lead time: nothing, and nothing False is added.
        assert_eq!(
            plan("2026-01-01T01:00:00Z", "a", Progress::Idle, None),
            None
        );
        let (status, reason, message) =
            plan("2026-01-01T01:45:00Z", "a", Progress::Idle, None).unwrap();
        assert!(status);
        assert_eq!(reason, reasons::MAINTENANCE_SCHEDULED);
        assert_eq!(
            message,
            "maintenance window ops/w starts at 2026-01-01T02:00:00Z"
        );
        // A blackout covering the node at the start: not planned.
        assert_eq!(
            plan("2026-01-01T01:45:00Z", "frozen", Progress::Idle, None),
            None
        );
        // In the window, waiting for a slot: still planned; started: over.
        let t = um(Status::True, reasons::MAINTENANCE_SCHEDULED);
        let t = Condition {
            type_: MAINTENANCE_PLANNED.into(),
            ..t
        };
        assert!(
            plan("2026-01-01T02:10:00Z", "a", Progress::Waiting, Some(&t))
                .unwrap()
                .0
        );
        let (status, reason, _) =
            plan("2026-01-01T02:10:00Z", "a", Progress::Started, Some(&t)).unwrap();
        assert_eq!(
            (status, reason.as_str()),
            (false, reasons::MAINTENANCE_STARTED)
        );
        // Never after the window ends.
        let (status, reason, _) =
            plan("2026-01-01T03:00:00Z", "a", Progress::Waiting, Some(&t)).unwrap();
        assert_eq!(
            (status, reason.as_str()),
            (false, reasons::NO_MAINTENANCE_PLANNED)
        );
    }
}
