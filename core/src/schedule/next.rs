//! robfig/cron v3 `SpecSchedule.Next`, step by step, on a small model of Go's `time`.
//!
//! robfig walks the calendar field by field and lets Go's `time.Date` normalise whatever
//! it produces: an hour that a spring-forward skips resolves to a later wall time, and a
//! wall time that a fall-back repeats resolves to one of its two instants. That is where
//! its DST behaviour (gap times skipped, fall-back times run twice, a midnight that does
//! not exist skipping the day) comes from, so rather than a "nicer" search this module
//! repeats the same moves, with the same normalisation, to land on the same instants.
//!
//! Times are whole Unix seconds: `Next` drops the nanoseconds in its first step, and
//! every later step keeps them at zero.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::cron::CronFields;

/// A bound on the moves of one `Next` call, so that no input can make it spin, and no
/// call (a lint, a pass) can take more than a millisecond or so. A search walks at most
/// the days of six calendar years one by one (robfig checks its five-year limit only
/// when a month or year wraps), about 2,200 moves, plus a few dozen for months and a
/// day's hours and minutes; the hardest specs the tests try need under 800 (the field
/// loops that could need more are answered by [`CronFields::never`]). Reaching the bound
/// answers "never"; with the stall on a skipped day handled below, no input is known to.
pub(super) const MAX_MOVES: u32 = 10_000;

const DAY: i64 = 86_400;

/// A wall clock reading, as Go's `Time.Date`, `Time.Clock` and `Time.Weekday` give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Civil {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    /// Sunday = 0.
    pub weekday: i64,
}

impl Civil {
    /// Reads local seconds (Unix seconds plus the zone offset) as a calendar date.
    pub fn from_local(local: i64) -> Civil {
        let days = local.div_euclid(DAY);
        let secs = local.rem_euclid(DAY);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            weekday: (days + 4).rem_euclid(7), // 1970-01-01 was a Thursday
        }
    }
}

/// Go `time.Time` values in one `Location`.
struct Clock<'z> {
    zone: &'z TimeZone,
}

impl Clock<'_> {
    /// The zone's UTC offset at a Unix second; `None` outside jiff's range (years
    /// -9999..=9999), which we treat as "never".
    fn offset(&self, unix: i64) -> Option<i64> {
        let at = Timestamp::from_second(unix).ok()?;
        Some(i64::from(self.zone.to_offset(at).seconds()))
    }

    fn civil(&self, unix: i64) -> Option<Civil> {
        Some(Civil::from_local(unix.checked_add(self.offset(unix)?)?))
    }

    /// Go's `time.Date(year, month, day, hour, min, sec, 0, loc)`: out-of-range fields
    /// carry into the next larger one, then the wall time is placed in the zone by
    /// guessing the offset at the wall time read as UTC and correcting once. For a wall
    /// time in a gap or a fold that yields `L - off(L - off(L))`, and that choice is what
    /// robfig's DST behaviour is made of.
    fn date(&self, year: i64, month: i64, day: i64, hour: i64, min: i64, sec: i64) -> Option<i64> {
        let year = year.checked_add((month - 1).div_euclid(12))?;
        let month = (month - 1).rem_euclid(12) + 1;
        let min = min.checked_add(sec.div_euclid(60))?;
        let sec = sec.rem_euclid(60);
        let hour = hour.checked_add(min.div_euclid(60))?;
        let min = min.rem_euclid(60);
        let day = day.checked_add(hour.div_euclid(24))?;
        let hour = hour.rem_euclid(24);
        let days = days_from_civil(year, month)?.checked_add(day - 1)?;
        let wall = days
            .checked_mul(DAY)?
            .checked_add(hour * 3600 + min * 60 + sec)?;
        let guess = self.offset(wall)?;
        if guess == 0 {
            return Some(wall);
        }
        wall.checked_sub(self.offset(wall.checked_sub(guess)?)?)
    }

    /// Go's `Time.AddDate(0, months, days)`: the same wall clock, moved on the calendar.
    fn add_date(&self, t: i64, months: i64, days: i64) -> Option<i64> {
        let c = self.civil(t)?;
        self.date(
            c.year,
            c.month.checked_add(months)?,
            c.day.checked_add(days)?,
            c.hour,
            c.minute,
            c.second,
        )
    }
}

/// robfig's `SpecSchedule.Next(t)` for a spec evaluated in `zone`.
pub(super) fn next(fields: &CronFields, zone: &TimeZone, after: Timestamp) -> Option<Timestamp> {
    next_counted(fields, zone, after, &mut 0)
}

/// [`next`], counting its moves in `moves` (the tests check the bound has room).
pub(super) fn next_counted(
    fields: &CronFields,
    zone: &TimeZone,
    after: Timestamp,
    moves: &mut u32,
) -> Option<Timestamp> {
    if fields.never() {
        return None;
    }
    let clock = Clock { zone };
    let mut step = || {
        *moves += 1;
        (*moves <= MAX_MOVES).then_some(())
    };

    // "Start at the earliest possible time (the upcoming second)."
    let mut t = after
        .as_nanosecond()
        .div_euclid(1_000_000_000)
        .checked_add(1)
        .and_then(|s| i64::try_from(s).ok())?;
    let year_limit = clock.civil(t)?.year + 5;
    // Whether a field has moved: the first move resets the smaller fields, later ones
    // keep the reset.
    let mut added = false;

    'wrap: loop {
        if clock.civil(t)?.year > year_limit {
            return None;
        }

        loop {
            let c = clock.civil(t)?;
            if fields.has_month(c.month) {
                break;
            }
            step()?;
            if !added {
                added = true;
                t = clock.date(c.year, c.month, 1, 0, 0, 0)?;
            }
            t = clock.add_date(t, 1, 0)?;
            if clock.civil(t)?.month == 1 {
                continue 'wrap;
            }
        }

        loop {
            let c = clock.civil(t)?;
            if fields.day_matches(c.day, c.weekday) {
                break;
            }
            step()?;
            if !added {
                added = true;
                t = clock.date(c.year, c.month, c.day, 0, 0, 0)?;
            }
            let day_before = t;
            let mut days = 1;
            loop {
                t = clock.add_date(day_before, 0, days)?;
                // robfig's fix for zones whose midnight a DST change moves (Sao Paulo):
                // pull the day's start back to the nearest midnight.
                let hour = clock.civil(t)?.hour;
                if hour != 0 {
                    let shift = if hour > 12 { 24 - hour } else { -hour };
                    t = t.checked_add(shift * 3600)?;
                }
                if t != day_before {
                    break;
                }
                // A whole day the zone skips (Samoa on 2011-12-30): Go's `time.Date`
                // places its midnight back on the day before, so robfig's step lands
                // exactly where it started, its state repeats, and its Next never
                // returns (the oracle spins for ever). Only there, with no answer of
                // robfig's to agree with, step over the missing day: the result is what
                // a calendar gives, and what robfig gives when asked from after the gap.
                step()?;
                days += 1;
            }
            if clock.civil(t)?.day == 1 {
                continue 'wrap;
            }
        }

        loop {
            let c = clock.civil(t)?;
            if fields.has_hour(c.hour) {
                break;
            }
            step()?;
            if !added {
                added = true;
                t = clock.date(c.year, c.month, c.day, c.hour, 0, 0)?;
            }
            // Elapsed time, not the calendar: a skipped hour is jumped, a repeated one
            // visited twice. If a midnight is skipped, this walks into the next day without
            // re-checking it, as robfig does.
            t = t.checked_add(3600)?;
            if clock.civil(t)?.hour == 0 {
                continue 'wrap;
            }
        }

        loop {
            let c = clock.civil(t)?;
            if fields.has_minute(c.minute) {
                break;
            }
            step()?;
            if !added {
                added = true;
                // Go's Truncate works on absolute time, not the wall clock; Unix time and
                // Go's zero time are both whole minutes, so this is the same.
                t -= t.rem_euclid(60);
            }
            t = t.checked_add(60)?;
            if clock.civil(t)?.minute == 0 {
                continue 'wrap;
            }
        }

        // Seconds are always 0 in five-field specs, but a zone whose offset is not whole
        // minutes (local mean time before ~1900) still needs this loop.
        loop {
            let c = clock.civil(t)?;
            if c.second == 0 {
                break;
            }
            step()?;
            added = true;
            t = t.checked_add(1)?;
            if clock.civil(t)?.second == 0 {
                continue 'wrap;
            }
        }

        return Timestamp::from_second(t).ok();
    }
}

/// Days from 1970-01-01 to the first of `month` in `year` (proleptic Gregorian, as Go).
fn days_from_civil(year: i64, month: i64) -> Option<i64> {
    // Howard Hinnant's algorithm, with years starting in March so leap days come last.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era.checked_mul(146_097)?
        .checked_add(day_of_era)?
        .checked_sub(719_468)
}

/// The inverse: (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
