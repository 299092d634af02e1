//! A maintenance window: a validated window ConfigMap, and the questions the controller
//! asks it (which occurrences are active now, when the next edge is).
//!
//! An occurrence starting at `s` is active on `[s, s + duration)`. Occurrences may
//! overlap (a duration longer than the period); a window is active while any of its
//! occurrences is.

use std::collections::BTreeMap;
use std::fmt;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};

use crate::duration::{self, GoDuration};
use crate::limits::{MAX_DESCRIPTION_BYTES, MAX_SELECTOR_REQUIREMENTS, MAX_VALUE_BYTES};
use crate::schedule::{self, DstAnomalyKind, Schedule, ScheduleKind};
use crate::selector::{self, Selector};

/// The ConfigMap data keys kumaco reads.
pub const KEY_START_TIME: &str = "startTime";
pub const KEY_DURATION: &str = "duration";
pub const KEY_NODE_SELECTOR: &str = "nodeSelector";
pub const KEY_DESCRIPTION: &str = "description";
pub const KEY_BLACKOUT: &str = "blackout";
pub const KNOWN_KEYS: [&str; 5] = [
    KEY_START_TIME,
    KEY_DURATION,
    KEY_NODE_SELECTOR,
    KEY_DESCRIPTION,
    KEY_BLACKOUT,
];

/// `namespace/name` of the window's ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WindowId {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for WindowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A valid window.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub id: WindowId,
    pub schedule: Schedule,
    pub duration: GoDuration,
    pub selector: Selector,
    pub description: Option<String>,
    /// The description's length as declared (it is kept cut to [`MAX_VALUE_BYTES`]).
    pub description_bytes: usize,
    pub blackout: bool,
    /// Data keys kumaco does not know (likely typos); reported, not fatal.
    pub unknown_keys: Vec<String>,
}

/// One problem with one data key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct FieldError {
    pub key: &'static str,
    pub message: String,
}

/// Every problem found in a window ConfigMap's data (never just the first).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidWindow(pub Vec<FieldError>);

/// The longest `duration` the lint accepts without a warning: a leap year, so that "a
/// year" written as `8784h` passes. Longer is most likely a slip of the keyboard
/// (`1000000h`); the window still loads.
pub const LINT_MAX_DURATION: GoDuration = GoDuration::from_nanos(366 * 24 * 3600 * 1_000_000_000);

/// How many occurrences a span is followed each way before kumaco stops looking: bounds
/// the work of chained schedules (`* * * * *` lasting a minute is one span for ever).
pub const SPAN_STEPS: usize = 64;

/// A run of overlapping or back-to-back occurrences; `None` where it reaches beyond what
/// kumaco looks at (see [`Window::span_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
}

/// An occurrence, `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Occurrence {
    pub start: Timestamp,
    pub end: Timestamp,
}

impl Window {
    /// Validates a ConfigMap's data. Schedules without a `CRON_TZ=`/`TZ=` prefix run in
    /// `default_zone` (`--default-timezone`).
    pub fn from_data(
        id: WindowId,
        data: &BTreeMap<String, String>,
        default_zone: &TimeZone,
    ) -> Result<Window, InvalidWindow> {
        let mut errors = Vec::new();
        for key in [
            KEY_START_TIME,
            KEY_DURATION,
            KEY_NODE_SELECTOR,
            KEY_BLACKOUT,
        ] {
            if data.get(key).is_some_and(|v| v.len() > MAX_VALUE_BYTES) {
                errors.push(FieldError {
                    key,
                    message: format!(
                        "longer than {MAX_VALUE_BYTES} bytes; a window's values are limited to {MAX_VALUE_BYTES} bytes each"
                    ),
                });
            }
        }
        let oversized = |key: &str| data.get(key).is_some_and(|v| v.len() > MAX_VALUE_BYTES);
        let mut required = |key: &'static str, expected: &str| match data.get(key) {
            Some(_) if oversized(key) => None,
            Some(v) => Some(v.as_str()),
            None => {
                errors.push(FieldError {
                    key,
                    message: format!("missing; expected {expected}"),
                });
                None
            }
        };
        let start = required(
            KEY_START_TIME,
            "a cron schedule such as \"0 2 * * 6\" or an RFC 3339 timestamp",
        );
        let dur = required(KEY_DURATION, "a Go duration such as \"90m\" or \"1h30m\"");
        let sel = required(
            KEY_NODE_SELECTOR,
            "a label selector such as \"zone=a\" (\"\" selects every node), or a \
             LabelSelector object such as {\"matchLabels\": {\"zone\": \"a\"}}",
        );

        let schedule = start.and_then(|s| {
            schedule::parse(s, default_zone)
                .map_err(|e| errors.push(field(KEY_START_TIME, e)))
                .ok()
        });
        let duration = dur.and_then(|d| match duration::parse(d) {
            Ok(d) if d.as_nanos() > 0 => Some(d),
            Ok(d) => {
                errors.push(FieldError {
                    key: KEY_DURATION,
                    message: format!(
                        "{d} is not positive; expected a duration above 0, such as \"90m\""
                    ),
                });
                None
            }
            Err(e) => {
                errors.push(field(KEY_DURATION, e));
                None
            }
        });
        let selector = sel.and_then(|s| match selector::parse_string_or_object(s) {
            Ok(sel) if sel.requirements().len() > MAX_SELECTOR_REQUIREMENTS => {
                errors.push(FieldError {
                    key: KEY_NODE_SELECTOR,
                    message: format!(
                        "{} requirements; at most {MAX_SELECTOR_REQUIREMENTS} are allowed",
                        sel.requirements().len()
                    ),
                });
                None
            }
            Ok(sel) => Some(sel),
            Err(e) => {
                errors.push(field(KEY_NODE_SELECTOR, e));
                None
            }
        });
        let blackout = match data
            .get(KEY_BLACKOUT)
            .filter(|_| !oversized(KEY_BLACKOUT))
            .map(|s| parse_bool(s))
        {
            None => Some(false),
            Some(Some(b)) => Some(b),
            Some(None) => {
                errors.push(FieldError {
                    key: KEY_BLACKOUT,
                    message: format!(
                        "{:?} is not a boolean; expected \"true\" or \"false\"",
                        data[KEY_BLACKOUT]
                    ),
                });
                None
            }
        };
        match (schedule, duration, selector, blackout) {
            (Some(schedule), Some(duration), Some(selector), Some(blackout))
                if errors.is_empty() =>
            {
                Ok(Window {
                    id,
                    schedule,
                    duration,
                    selector,
                    // Kept at most MAX_VALUE_BYTES (a lint says so); messages show less.
                    description: data
                        .get(KEY_DESCRIPTION)
                        .map(|d| crate::conditions::bounded(d.clone(), MAX_VALUE_BYTES)),
                    description_bytes: data.get(KEY_DESCRIPTION).map_or(0, String::len),
                    blackout,
                    unknown_keys: data
                        .keys()
                        .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
                        .cloned()
                        .collect(),
                })
            }
            _ => Err(InvalidWindow(errors)),
        }
    }

    fn length(&self) -> SignedDuration {
        self.duration.to_signed()
    }

    /// The first start strictly after `t`.
    fn next_start(&self, t: Timestamp) -> Option<Timestamp> {
        self.schedule.next_after(t)
    }

    /// The earliest occurrence still active at `t` (start in `(t - duration, t]`), if any.
    fn earliest_active(&self, t: Timestamp) -> Option<Occurrence> {
        let floor = t.checked_sub(self.length()).ok()?;
        let start = self.next_start(floor)?;
        (start <= t).then(|| self.occurrence(start))
    }

    fn occurrence(&self, start: Timestamp) -> Occurrence {
        let end = start.checked_add(self.length()).unwrap_or(Timestamp::MAX);
        Occurrence { start, end }
    }

    /// The occurrences overlapping `[from, to)`, by start: those starting in
    /// `(from - duration, to)`. Unbounded for a frequent schedule: callers take what they
    /// can show.
    pub fn occurrences_between(
        &self,
        from: Timestamp,
        to: Timestamp,
    ) -> impl Iterator<Item = Occurrence> + '_ {
        let cursor = from.checked_sub(self.length()).unwrap_or(Timestamp::MIN);
        std::iter::successors(self.schedule.next_after(cursor), |s| {
            self.schedule.next_after(*s)
        })
        .take_while(move |s| *s < to)
        .map(|s| self.occurrence(s))
    }

    /// Whether an occurrence is active at `t`.
    pub fn is_active(&self, t: Timestamp) -> bool {
        self.earliest_active(t).is_some()
    }

    /// The latest-starting occurrence active at `t`: its end is when the window, as
    /// known at `t`, closes (a later occurrence starting before then extends it).
    pub fn latest_active(&self, t: Timestamp) -> Option<Occurrence> {
        let first = self.earliest_active(t)?;
        let last_start = match self.schedule.kind() {
            ScheduleKind::Once(_) => first.start,
            ScheduleKind::Every(_) | ScheduleKind::Cron => {
                self.last_start_at_or_before(first.start, t)
            }
        };
        Some(self.occurrence(last_start))
    }

    /// The last start in `[lo, t]`, given that `lo` is a start. Schedules only answer
    /// "next after": a few forward steps cover the usual case (the duration is shorter
    /// than the period, so `lo` is the answer after one call); long overlaps fall back
    /// to bisecting on whole seconds (starts are whole seconds), about log2(duration in
    /// seconds) calls instead of one per occurrence.
    fn last_start_at_or_before(&self, lo: Timestamp, t: Timestamp) -> Timestamp {
        let mut best = lo;
        for _ in 0..4 {
            match self.next_start(best) {
                Some(s) if s <= t => best = s,
                _ => return best,
            }
        }
        // Invariant: the answer lies in [lo_s, hi_s] and `best` is a start <= t.
        let (mut lo_s, mut hi_s) = (best.as_second(), t.as_second());
        while lo_s < hi_s {
            let mid = lo_s + (hi_s - lo_s) / 2;
            let probe = Timestamp::from_second(mid)
                .ok()
                .and_then(|m| self.next_start(m));
            match probe {
                Some(s) if s <= t => {
                    best = best.max(s);
                    lo_s = s.as_second();
                }
                _ => hi_s = mid,
            }
        }
        best
    }

    /// The next instant strictly after `t` at which this window opens or an occurrence
    /// ends: when the controller must look again.
    pub fn next_edge_after(&self, t: Timestamp) -> Option<Timestamp> {
        let next_start = self.next_start(t);
        let next_end = t
            .checked_sub(self.length())
            .ok()
            .and_then(|floor| self.next_start(floor))
            .map(|s| self.occurrence(s).end)
            .filter(|end| *end > t);
        match (next_start, next_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The span active at `t`: the run of overlapping or back-to-back occurrences during
    /// which the window is active without a break. Messages and events name a span, not
    /// an occurrence, so that `@every 1s` with a duration of an hour is one long
    /// maintenance and not a new one every second.
    ///
    /// Spans are followed at most [`SPAN_STEPS`] occurrences each way: `start` is `None`
    /// when the span began before `not_before` or further back than that, and `end` is
    /// `None` when it reaches further ahead ("no end in sight").
    pub fn span_at(&self, t: Timestamp, not_before: Timestamp) -> Option<Span> {
        let mut start = Some(self.earliest_active(t)?.start);
        for step in 0..=SPAN_STEPS {
            let Some(s) = start else { break };
            if s < not_before || step == SPAN_STEPS {
                start = None;
                break;
            }
            // Active an instant before `s`: an earlier occurrence overlaps or touches it.
            match s
                .checked_sub(SignedDuration::from_nanos(1))
                .ok()
                .and_then(|before| self.earliest_active(before))
            {
                Some(o) => start = Some(o.start),
                None => break,
            }
        }
        let mut end = self.latest_active(t)?.end;
        for _ in 0..SPAN_STEPS {
            // An occurrence active at `end` (starting at or before it) extends the span.
            match self.latest_active(end) {
                Some(o) if o.end > end => end = o.end,
                _ => {
                    return Some(Span {
                        start,
                        end: Some(end),
                    });
                }
            }
        }
        Some(Span { start, end: None })
    }

    /// The end of the latest span that ended in `[not_before, t]`, if one did.
    pub fn last_end(&self, t: Timestamp, not_before: Timestamp) -> Option<Timestamp> {
        // The latest occurrence over by `t` starts at or before `t - duration`.
        let latest = t.checked_sub(self.length()).ok()?;
        let floor = not_before.checked_sub(self.length()).ok()?;
        let first = self.next_start(floor.checked_sub(SignedDuration::from_nanos(1)).ok()?)?;
        if first > latest {
            return None;
        }
        let end = self
            .occurrence(self.last_start_at_or_before(first, latest))
            .end;
        // Still active at its end: another occurrence carries the span on (past `t`,
        // since this was the latest one over by then).
        (end >= not_before && !self.is_active(end)).then_some(end)
    }

    /// The next start strictly after `t`, if the window is not active at `t` (when it
    /// is, its next start continues the active span rather than beginning one).
    pub fn next_span_start(&self, t: Timestamp) -> Option<Timestamp> {
        if self.is_active(t) {
            return None;
        }
        self.next_start(t)
    }

    /// Warnings for the `WindowLoaded` event: the window loads, but probably not as its
    /// author meant.
    pub fn lint(&self, now: Timestamp) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.description_bytes > MAX_DESCRIPTION_BYTES {
            warnings.push(format!(
                "{KEY_DESCRIPTION}: longer than {max} bytes; node conditions show only its first {max} bytes",
                max = MAX_DESCRIPTION_BYTES
            ));
        }
        for key in &self.unknown_keys {
            warnings.push(format!(
                "unknown key {key:?} is ignored; known keys: {}",
                KNOWN_KEYS.join(", ")
            ));
        }
        match self.schedule.kind() {
            ScheduleKind::Once(at) => {
                if self.occurrence(at).end <= now {
                    warnings.push(format!(
                        "{KEY_START_TIME}: the one-shot window at {at} is over; this ConfigMap can be deleted"
                    ));
                }
            }
            ScheduleKind::Cron => {
                if self.next_start(now).is_none() {
                    warnings.push(format!(
                        "{KEY_START_TIME}: {:?} never fires (no matching date within 5 years)",
                        self.schedule.spec()
                    ));
                }
                let year_later = now.checked_add(8766.hours()).unwrap_or(Timestamp::MAX);
                for a in self.schedule.dst_anomalies(now, year_later) {
                    let what = match a.kind {
                        DstAnomalyKind::Skipped => "does not happen (the clock skips it)",
                        DstAnomalyKind::Repeated => "happens twice (the clock repeats it)",
                    };
                    let zone = self.schedule.zone_name();
                    // DST moves clocks by two hours at most; more is a zone changing its
                    // offset for good (Samoa crossing the date line skipped a whole day).
                    let change = a.offset_after.seconds() - a.offset_before.seconds();
                    let why = if change.abs() <= 2 * 3600 {
                        format!("daylight saving time changes in {zone}")
                    } else {
                        format!(
                            "{zone} changes its offset from {} to {}",
                            a.offset_before, a.offset_after
                        )
                    };
                    warnings.push(format!(
                        "{KEY_START_TIME}: the {} run on {} {what}: {why}",
                        a.wall.time(),
                        a.wall.date(),
                    ));
                }
            }
            ScheduleKind::Every(delay) => {
                if let Some(written) = self.schedule.every_as_written() {
                    let runs =
                        GoDuration::from_nanos(i64::try_from(delay.as_nanos()).unwrap_or(i64::MAX));
                    let spec = self.schedule.spec();
                    // Accepted for compatibility (a spec must mean the same in Go
                    // tools), but rarely what the author meant.
                    if written.as_nanos() < 1_000_000_000 {
                        warnings.push(format!(
                            "{KEY_START_TIME}: {spec:?} runs every {runs}: an interval below \
                             1s is raised to 1s (robfig/cron does the same)"
                        ));
                    } else if written != runs {
                        warnings.push(format!(
                            "{KEY_START_TIME}: {spec:?} runs every {runs}: intervals are \
                             rounded down to whole seconds (robfig/cron does the same)"
                        ));
                    }
                }
            }
        }
        if self.duration > LINT_MAX_DURATION {
            warnings.push(format!(
                "{KEY_DURATION}: {} is longer than a year ({LINT_MAX_DURATION}); a window \
                 open that long is most likely a typo (it loads as written)",
                self.duration
            ));
        }
        warnings
    }
}

fn field(key: &'static str, e: impl fmt::Display) -> FieldError {
    FieldError {
        key,
        message: e.to_string(),
    }
}

/// Go's `strconv.ParseBool`, which is what a Go-minded author expects a flag-like
/// string to accept.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

/// A valid window for unit tests (this crate's, and the shell's with the feature
/// `testing`): namespace `ops`, zone UTC.
#[cfg(any(test, feature = "testing"))]
pub fn test_window(
    name: &str,
    start: &str,
    duration: &str,
    selector: &str,
    blackout: bool,
) -> Window {
    let mut data: BTreeMap<String, String> = [
        ("startTime", start),
        ("duration", duration),
        ("nodeSelector", selector),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if blackout {
        data.insert("blackout".into(), "true".into());
    }
    let id = WindowId {
        namespace: "ops".into(),
        name: name.into(),
    };
    Window::from_data(id, &data, &TimeZone::UTC).unwrap()
}
