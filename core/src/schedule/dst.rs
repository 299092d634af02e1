//! Lint: the runs a clock change skips or repeats.
//!
//! A maintenance manager who writes `30 2 * * *` in Europe/Berlin rarely means "except on
//! the last Sunday of March". We look at each clock change of the zone in the range, take
//! the wall-clock interval it skips (spring forward) or repeats (fall back), and list the
//! spec's wall times inside it. robfig's `Next` does skip the former and run the latter
//! twice (see `next.rs`); the unit tests check the two agree on known transitions.

use std::fmt;

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone};

use super::cron::CronFields;
use super::next::Civil;

/// One run that does not happen, or happens twice, because of a clock change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DstAnomaly {
    pub kind: DstAnomalyKind,
    /// The wall-clock time the spec asks for, in the schedule's zone.
    pub wall: DateTime,
    /// When the clock change happens.
    pub transition: Timestamp,
    pub offset_before: Offset,
    pub offset_after: Offset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DstAnomalyKind {
    /// The wall time does not exist that day (spring forward): no run.
    Skipped,
    /// The wall time happens twice (fall back): two runs.
    Repeated,
}

impl fmt::Display for DstAnomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let time = format!("{:02}:{:02}", self.wall.hour(), self.wall.minute());
        let date = self.wall.date();
        match self.kind {
            DstAnomalyKind::Skipped => {
                write!(f, "the {time} run on {date} does not happen (DST gap)")
            }
            DstAnomalyKind::Repeated => {
                write!(f, "the {time} run on {date} runs twice (DST overlap)")
            }
        }
    }
}

/// Clock changes longer than this are not DST (Samoa skipped a whole day in 2011); we
/// still report them, but only this much of their wall times.
const MAX_SPAN_SECONDS: i64 = 2 * 86_400;

pub(super) fn anomalies(
    fields: &CronFields,
    zone: &TimeZone,
    from: Timestamp,
    until: Timestamp,
) -> Vec<DstAnomaly> {
    let mut out = Vec::new();
    if fields.never() || until <= from {
        return out;
    }
    // `following` is strictly after its argument; step back so a change at `from` counts.
    let start = from
        .checked_sub(jiff::SignedDuration::from_nanos(1))
        .unwrap_or(from);
    for transition in zone.following(start) {
        let at = transition.timestamp();
        if at >= until {
            break;
        }
        let Ok(just_before) = at.checked_sub(jiff::SignedDuration::from_secs(1)) else {
            continue;
        };
        let before = zone.to_offset(just_before);
        let after = transition.offset();
        let (kind, low, high) = match before.seconds().cmp(&after.seconds()) {
            std::cmp::Ordering::Less => (DstAnomalyKind::Skipped, before, after),
            std::cmp::Ordering::Greater => (DstAnomalyKind::Repeated, after, before),
            // Only the abbreviation or the DST flag changed.
            std::cmp::Ordering::Equal => continue,
        };
        // The affected wall clock, as local seconds: [at + low, at + high).
        let at_second = at.as_second();
        let first = at_second + i64::from(low.seconds());
        let span = i64::from(high.seconds() - low.seconds()).min(MAX_SPAN_SECONDS);
        // Cron runs on whole minutes.
        let mut local = first + (60 - first.rem_euclid(60)) % 60;
        while local < first + span {
            let c = Civil::from_local(local);
            if fields.has_month(c.month)
                && fields.day_matches(c.day, c.weekday)
                && fields.has_hour(c.hour)
                && fields.has_minute(c.minute)
                && let Some(wall) = civil_to_datetime(&c)
            {
                out.push(DstAnomaly {
                    kind,
                    wall,
                    transition: at,
                    offset_before: before,
                    offset_after: after,
                });
            }
            local += 60;
        }
    }
    out
}

fn civil_to_datetime(c: &Civil) -> Option<DateTime> {
    DateTime::new(
        i16::try_from(c.year).ok()?,
        i8::try_from(c.month).ok()?,
        i8::try_from(c.day).ok()?,
        i8::try_from(c.hour).ok()?,
        i8::try_from(c.minute).ok()?,
        0,
        0,
    )
    .ok()
}
