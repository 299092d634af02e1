//! Which window events should exist now: `WindowLoaded`, `WindowInvalid`,
//! `WindowStarted`, `WindowEnded` (docs/design.md, Events), derived from the windows and the clock
//! only, never from what this process remembers having posted.
//!
//! Every event has a name fixed by what it reports: the window's uid, the reason, the
//! data version or span it is about, and the instance (its field manager). Whichever
//! replica leads, after any restart or failover, creates the events that are due; the
//! API server answers AlreadyExists for those already posted. So each is posted once per
//! instance, and a new leader posts exactly what is missing.
//!
//! What is due, at `now`:
//! - `WindowLoaded` / `WindowInvalid`: for each window ConfigMap's current data.
//! - `WindowStarted`: for the span active now, if it started at most [`HORIZON`] ago.
//! - `WindowEnded`: for the latest span that ended at most [`HORIZON`] ago, and for a
//!   window deleted at most [`HORIZON`] ago while it was active.
//!
//! A window announces only what happened while it existed: no `WindowEnded` for a span
//! that ended before the ConfigMap's `creationTimestamp` (a window created just after an
//! occurrence of its schedule would otherwise report the end of something it never saw).
//!
//! The horizon keeps event names meaningful: the API server deletes events after its
//! `--event-ttl` (1 h by default), after which a name could be created again.

use jiff::Timestamp;

use crate::decision::HORIZON;
use crate::fingerprint::Fnv;
use crate::window::{InvalidWindow, Span, Window, WindowId};

/// Longest event note, in bytes: events.k8s.io/v1 refuses notes over 1 kB.
pub const MAX_NOTE_BYTES: usize = 1024;

/// A window ConfigMap as the pass sees it.
#[derive(Clone, Debug)]
pub struct WindowSource {
    pub id: WindowId,
    pub uid: String,
    /// [`crate::fingerprint::window_data`] of its data.
    pub data_hash: u64,
    /// The ConfigMap's `creationTimestamp` (whole seconds).
    pub created: Option<Timestamp>,
    pub window: Result<Window, InvalidWindow>,
}

/// A window ConfigMap the watch saw deleted, kept for [`HORIZON`].
#[derive(Clone, Debug)]
pub struct Deleted {
    pub id: WindowId,
    pub uid: String,
    pub at: Timestamp,
    /// Whether one of its (non-blackout or blackout) spans was active when it went.
    pub was_active: bool,
    pub blackout: bool,
}

impl Deleted {
    /// A window ConfigMap deleted at `at`, from its last data (`zone`: the default time
    /// zone): whether it was active then, and a blackout.
    pub fn of(
        id: WindowId,
        uid: String,
        data: &std::collections::BTreeMap<String, String>,
        at: Timestamp,
        zone: &jiff::tz::TimeZone,
    ) -> Deleted {
        let window = Window::from_data(id.clone(), data, zone).ok();
        Deleted {
            id,
            uid,
            at,
            was_active: window.as_ref().is_some_and(|w| w.is_active(at)),
            blackout: window.as_ref().is_some_and(|w| w.blackout),
        }
    }
}

/// Forgets the deleted windows whose `WindowEnded` is no longer due (deleted more than
/// [`HORIZON`] before `now`).
pub fn forget_old(deleted: &mut Vec<Deleted>, now: Timestamp) {
    let horizon = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
    deleted.retain(|d| d.at >= horizon);
}

/// Normal or Warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Normal,
    Warning,
}

/// What an event reports.
#[derive(Clone, Debug, PartialEq)]
pub enum What {
    Loaded,
    Invalid(String),
    Started { span: Span, selected: usize },
    Ended { at: Timestamp },
    Deleted { at: Timestamp },
}

/// An event that should exist.
#[derive(Clone, Debug, PartialEq)]
pub struct Announcement {
    /// The event's name: the same for the same report in every replica and restart.
    pub name: String,
    /// The window ConfigMap it is about (namespace, name) and its uid.
    pub window: WindowId,
    pub uid: String,
    pub blackout: bool,
    pub what: What,
}

impl Announcement {
    pub fn reason(&self) -> &'static str {
        match self.what {
            What::Loaded => "WindowLoaded",
            What::Invalid(_) => "WindowInvalid",
            What::Started { .. } => "WindowStarted",
            What::Ended { .. } | What::Deleted { .. } => "WindowEnded",
        }
    }

    pub fn action(&self) -> &'static str {
        match self.what {
            What::Loaded => "Load",
            What::Invalid(_) => "Validate",
            What::Started { .. } => "Start",
            What::Ended { .. } | What::Deleted { .. } => "End",
        }
    }

    pub fn severity(&self) -> Severity {
        match self.what {
            What::Invalid(_) => Severity::Warning,
            _ => Severity::Normal,
        }
    }

    /// The note, for people. `window` is the valid window (for `WindowLoaded`, whose
    /// note names its next start and lint warnings); computed only for events about to
    /// be posted, since lint looks a year ahead.
    pub fn note(&self, window: Option<&Window>, now: Timestamp) -> String {
        let kind = if self.blackout {
            "blackout"
        } else {
            "maintenance window"
        };
        let note = match &self.what {
            What::Loaded => match window {
                Some(w) => loaded_note(w, now),
                None => format!("{kind} loaded"),
            },
            What::Invalid(e) => format!("window ignored: {e}"),
            What::Started { span, selected } => {
                let start = span.start.map(fmt).unwrap_or_default();
                let end = match span.end {
                    Some(e) => format!("ends {}", fmt(e)),
                    None => "no end in sight (occurrences overlap or follow each other)".into(),
                };
                format!("{kind} started at {start}, selects {selected} node(s) in scope, {end}")
            }
            What::Ended { at } => format!("{kind} ended at {}", fmt(*at)),
            What::Deleted { at } => format!(
                "{kind} ConfigMap deleted at {} while active: its maintenance ended then",
                fmt(*at)
            ),
        };
        crate::conditions::bounded(note, MAX_NOTE_BYTES)
    }
}

fn fmt(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn loaded_note(w: &Window, now: Timestamp) -> String {
    let kind = if w.blackout { "blackout" } else { "window" };
    let next = match w.schedule.next_after(now) {
        Some(t) => format!("next start {}", t.to_zoned(w.schedule.time_zone().clone())),
        None => "no future start".into(),
    };
    let mut note = format!(
        "{kind} loaded: schedule {:?} in {}, duration {}, nodeSelector {:?}; {next}",
        w.schedule.spec(),
        w.schedule.zone_name(),
        w.duration,
        w.selector.to_string(),
    );
    for warning in w.lint(now) {
        note.push_str("; warning: ");
        note.push_str(&warning);
    }
    note
}

/// The events due at `now` for `windows` (with the number of in-scope nodes each
/// selects, from the pass) and recently `deleted` windows, for instance `instance`.
pub fn due(
    windows: &[(&WindowSource, Option<(Span, usize)>)],
    deleted: &[Deleted],
    instance: &str,
    now: Timestamp,
) -> Vec<Announcement> {
    let look_back = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
    let mut out = Vec::new();
    for (source, active) in windows {
        let make = |what: What, stamp: &str| Announcement {
            name: event_name(source, instance, &what, stamp),
            window: source.id.clone(),
            uid: source.uid.clone(),
            blackout: source.window.as_ref().is_ok_and(|w| w.blackout),
            what,
        };
        let data = format!("{:016x}", source.data_hash);
        let w = match &source.window {
            Ok(w) => w,
            Err(e) => {
                out.push(make(What::Invalid(e.to_string()), &data));
                continue;
            }
        };
        out.push(make(What::Loaded, &data));
        if let Some((span, selected)) = active
            && let Some(start) = span.start.filter(|s| *s >= look_back)
        {
            let what = What::Started {
                span: *span,
                selected: *selected,
            };
            out.push(make(what, &start.as_second().to_string()));
        }
        // Ended at or before the second it was created: before it existed.
        if let Some(end) = w
            .last_end(now, look_back)
            .filter(|end| source.created.is_none_or(|c| *end > c))
        {
            out.push(make(What::Ended { at: end }, &end.as_second().to_string()));
        }
    }
    for d in deleted {
        if !d.was_active || d.at < look_back {
            continue;
        }
        let what = What::Deleted { at: d.at };
        let mut h = Fnv::default();
        for part in [instance, &d.uid, "WindowEnded", "deleted"] {
            h.write_str(part);
        }
        out.push(Announcement {
            name: name_for(&d.id.name, h.finish()),
            window: d.id.clone(),
            uid: d.uid.clone(),
            blackout: d.blackout,
            what,
        });
    }
    out
}

fn event_name(source: &WindowSource, instance: &str, what: &What, stamp: &str) -> String {
    let reason = match what {
        What::Loaded => "WindowLoaded",
        What::Invalid(_) => "WindowInvalid",
        What::Started { .. } => "WindowStarted",
        What::Ended { .. } | What::Deleted { .. } => "WindowEnded",
    };
    let mut h = Fnv::default();
    for part in [instance, &source.uid, reason, stamp] {
        h.write_str(part);
    }
    name_for(&source.id.name, h.finish())
}

/// `<configmap>.<hash>`.
fn name_for(configmap: &str, hash: u64) -> String {
    crate::fingerprint::object_name(configmap, hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ts;
    use crate::window::test_window as window;
    use jiff::SignedDuration;

    fn source(w: Window) -> WindowSource {
        WindowSource {
            id: w.id.clone(),
            uid: format!("uid-{}", w.id.name),
            data_hash: 7,
            created: None,
            window: Ok(w),
        }
    }

    fn due_at(s: &WindowSource, now: Timestamp) -> Vec<Announcement> {
        let look_back = now - HORIZON;
        let active = s
            .window
            .as_ref()
            .ok()
            .and_then(|w| w.span_at(now, look_back))
            .map(|span| (span, 3));
        due(&[(s, active)], &[], "kumaco/ops/kumaco", now)
    }

    fn reasons(a: &[Announcement]) -> Vec<&str> {
        a.iter().map(Announcement::reason).collect()
    }

    #[test]
    fn a_span_is_announced_once_whenever_asked() {
        let s = source(window("w", "0 2 * * *", "1h", "", false));
        let early = due_at(&s, ts("2026-01-01T02:00:01Z"));
        let later = due_at(&s, ts("2026-01-01T02:20:00Z"));
        assert_eq!(reasons(&early), ["WindowLoaded", "WindowStarted"]);
        // The same names: a restarted or newly elected kumaco gets AlreadyExists.
        let names = |a: &[Announcement]| a.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&early), names(&later));
        assert!(early[1].name.starts_with("w."));
        // Past the horizon, a start is no longer announced.
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T02:40:00Z"))),
            ["WindowLoaded"]
        );
        // The end, for the horizon after it.
        let ended = due_at(&s, ts("2026-01-01T03:00:00Z"));
        assert_eq!(reasons(&ended), ["WindowLoaded", "WindowEnded"]);
        assert_eq!(
            ended[1].note(None, ts("2026-01-01T03:00:00Z")),
            "maintenance window ended at 2026-01-01T03:00:00Z"
        );
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T03:31:00Z"))),
            ["WindowLoaded"]
        );
    }

    #[test]
    fn endless_overlap_announces_nothing_per_occurrence() {
        let s = source(window("often", "@every 1s", "1h", "", false));
        let mut names = std::collections::BTreeSet::new();
        for i in 0..30 {
            let now = ts("2026-01-01T02:00:00Z") + SignedDuration::from_secs(i);
            for a in due_at(&s, now) {
                names.insert((a.reason(), a.name));
            }
        }
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn names_differ_per_instance_data_and_uid() {
        let s = source(window("w", "0 2 * * *", "1h", "", false));
        let now = ts("2026-01-01T02:00:01Z");
        let a = due(&[(&s, None)], &[], "one", now);
        let b = due(&[(&s, None)], &[], "two", now);
        assert_ne!(a[0].name, b[0].name);
        let mut edited = s.clone();
        edited.data_hash = 8;
        assert_ne!(a[0].name, due(&[(&edited, None)], &[], "one", now)[0].name);
        let mut recreated = s.clone();
        recreated.uid = "other".into();
        assert_ne!(
            a[0].name,
            due(&[(&recreated, None)], &[], "one", now)[0].name
        );
    }

    #[test]
    fn a_window_deleted_while_active_ends_within_the_horizon() {
        let id = WindowId {
            namespace: "ops".into(),
            name: "gone".into(),
        };
        let d = Deleted {
            id,
            uid: "u".into(),
            at: ts("2026-01-01T02:10:00Z"),
            was_active: true,
            blackout: false,
        };
        let got = due(
            &[],
            std::slice::from_ref(&d),
            "i",
            ts("2026-01-01T02:10:01Z"),
        );
        assert_eq!(reasons(&got), ["WindowEnded"]);
        assert!(got[0].note(None, d.at).contains("deleted"));
        assert!(
            due(
                &[],
                std::slice::from_ref(&d),
                "i",
                ts("2026-01-01T03:00:00Z")
            )
            .is_empty()
        );
        let idle = Deleted {
            was_active: false,
            ..d
        };
        assert!(due(&[], &[idle], "i", ts("2026-01-01T02:10:01Z")).is_empty());
    }

    #[test]
    fn names_are_valid_object_names() {
        let long = "a-".repeat(200);
        let n = name_for(&long, 1);
        assert!(n.len() <= 253);
        assert!(!n.contains("-."));
        assert_eq!(name_for("w", 0xab), "w.00000000000000ab");
    }

    #[test]
    fn invalid_windows_get_their_errors() {
        let mut s = source(window("w", "0 2 * * *", "1h", "", false));
        s.window = Err(InvalidWindow(vec![crate::window::FieldError {
            key: "duration",
            message: "bad".into(),
        }]));
        let got = due(&[(&s, None)], &[], "i", ts("2026-01-01T02:00:00Z"));
        assert_eq!(reasons(&got), ["WindowInvalid"]);
        assert_eq!(got[0].severity(), Severity::Warning);
        assert_eq!(
            got[0].note(None, ts("2026-01-01T02:00:00Z")),
            "window ignored: duration: bad"
        );
    }

    #[test]
    fn a_window_announces_only_what_happened_while_it_existed() {
        // `@every 20s` lasting 5s: an occurrence ran 00:00:00-00:00:05; the ConfigMap is
        // created at 00:00:07, 2 s after that occurrence ended.
        let mut s = source(window("late", "@every 20s", "5s", "", false));
        s.created = Some(ts("2026-01-01T00:00:07Z"));
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T00:00:07Z"))),
            ["WindowLoaded"]
        );
        // The next occurrence, which it saw, is announced from start to end.
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T00:00:21Z"))),
            ["WindowLoaded", "WindowStarted"]
        );
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T00:00:26Z"))),
            ["WindowLoaded", "WindowEnded"]
        );
        // A span already active when the window was created did happen while it existed.
        s.created = Some(ts("2026-01-01T00:00:22Z"));
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T00:00:22Z"))),
            ["WindowLoaded", "WindowStarted"]
        );
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T00:00:26Z"))),
            ["WindowLoaded", "WindowEnded"]
        );
        // Created the very second a span ended: that end is not its.
        s.created = Some(ts("2026-01-01T00:00:25Z"));
        assert_eq!(
            reasons(&due_at(&s, ts("2026-01-01T00:00:26Z"))),
            ["WindowLoaded"]
        );
    }

    #[test]
    fn a_deleted_window_is_read_from_its_last_data_and_kept_for_the_horizon() {
        let id = WindowId {
            namespace: "ops".into(),
            name: "gone".into(),
        };
        let data: std::collections::BTreeMap<String, String> = [
            ("startTime", "0 2 * * *"),
            ("duration", "1h"),
            ("nodeSelector", ""),
            ("blackout", "true"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let utc = jiff::tz::TimeZone::UTC;
        let during = Deleted::of(
            id.clone(),
            "u".into(),
            &data,
            ts("2026-01-01T02:10:00Z"),
            &utc,
        );
        assert!(during.was_active && during.blackout);
        let after = Deleted::of(
            id.clone(),
            "u".into(),
            &data,
            ts("2026-01-01T03:10:00Z"),
            &utc,
        );
        assert!(!after.was_active);
        let broken = Deleted::of(
            id,
            "u".into(),
            &Default::default(),
            ts("2026-01-01T02:10:00Z"),
            &utc,
        );
        assert!(!broken.was_active && !broken.blackout);
        let mut kept = vec![during, after];
        forget_old(&mut kept, ts("2026-01-01T03:30:00Z"));
        assert_eq!(kept.len(), 1, "the first is more than 30 minutes old");
    }
}
