//! The five cron fields, read as robfig/cron v3 `Parser.Parse`, `getField` and
//! `getRange` read them. Each field becomes a bit set (bit n = value n may match), and
//! bit 63 records whether the field was written as a star, which decides how day-of-month
//! and day-of-week combine.

use std::fmt;

use super::ScheduleError;

/// Set when the field was `*` or `?` without a step above 1 (robfig's `starBit`).
pub(super) const STAR: u64 = 1 << 63;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

const FIELDS: [Field; 5] = [
    Field::Minute,
    Field::Hour,
    Field::DayOfMonth,
    Field::Month,
    Field::DayOfWeek,
];

const MONTHS: [(&str, u64); 12] = [
    ("jan", 1),
    ("feb", 2),
    ("mar", 3),
    ("apr", 4),
    ("may", 5),
    ("jun", 6),
    ("jul", 7),
    ("aug", 8),
    ("sep", 9),
    ("oct", 10),
    ("nov", 11),
    ("dec", 12),
];

const WEEKDAYS: [(&str, u64); 7] = [
    ("sun", 0),
    ("mon", 1),
    ("tue", 2),
    ("wed", 3),
    ("thu", 4),
    ("fri", 5),
    ("sat", 6),
];

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        }
    }

    fn min(self) -> u64 {
        match self {
            Field::DayOfMonth | Field::Month => 1,
            _ => 0,
        }
    }

    fn max(self) -> u64 {
        match self {
            Field::Minute => 59,
            Field::Hour => 23,
            Field::DayOfMonth => 31,
            Field::Month => 12,
            Field::DayOfWeek => 6,
        }
    }

    fn names(self) -> &'static [(&'static str, u64)] {
        match self {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &WEEKDAYS,
            _ => &[],
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Field::Minute => "0-59",
            Field::Hour => "0-23",
            Field::DayOfMonth => "1-31",
            Field::Month => "1-12 or jan-dec",
            Field::DayOfWeek => "0-6 or sun-sat",
        }
    }

    /// Said after a bound, where people most often go wrong.
    fn hint(self) -> &'static str {
        match self {
            Field::DayOfWeek => " (0 or sun is Sunday)",
            _ => "",
        }
    }

    /// Every value of the field (robfig's `all`, without the star).
    fn all(self) -> u64 {
        bits(self.min(), self.max(), 1)
    }
}

/// A cron spec as bit sets. Seconds are always 0 in the standard five-field syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CronFields {
    pub minute: u64,
    pub hour: u64,
    pub dom: u64,
    pub month: u64,
    pub dow: u64,
}

impl CronFields {
    /// Parses the five fields of `text` (the spec after any zone prefix); `spec` is the
    /// whole spec, for messages.
    pub fn parse(text: &str, spec: &str) -> Result<CronFields, ScheduleError> {
        // Go's strings.Fields splits on Unicode White_Space, as split_whitespace does.
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != FIELDS.len() {
            return Err(ScheduleError::FieldCount {
                found: fields.len(),
                spec: spec.to_string(),
            });
        }
        let mut values = [0u64; 5];
        for ((value, field), text) in values.iter_mut().zip(FIELDS).zip(&fields) {
            *value = parse_field(text, field).map_err(|problem| ScheduleError::Field {
                field: field.name(),
                problem,
                spec: spec.to_string(),
            })?;
        }
        let [minute, hour, dom, month, dow] = values;
        Ok(CronFields {
            minute,
            hour,
            dom,
            month,
            dow,
        })
    }

    /// robfig's fixed descriptors; exact and case-sensitive.
    pub fn descriptor(text: &str) -> Option<CronFields> {
        let any = |f: Field| f.all() | STAR;
        let (dom, month, dow, hour) = match text {
            "@yearly" | "@annually" => (1 << 1, 1 << 1, any(Field::DayOfWeek), 1),
            "@monthly" => (1 << 1, any(Field::Month), any(Field::DayOfWeek), 1),
            "@weekly" => (any(Field::DayOfMonth), any(Field::Month), 1, 1),
            "@daily" | "@midnight" => (
                any(Field::DayOfMonth),
                any(Field::Month),
                any(Field::DayOfWeek),
                1,
            ),
            "@hourly" => (
                any(Field::DayOfMonth),
                any(Field::Month),
                any(Field::DayOfWeek),
                any(Field::Hour),
            ),
            _ => return None,
        };
        Some(CronFields {
            minute: 1,
            hour,
            dom,
            month,
            dow,
        })
    }

    /// True when some field matches nothing, so `Next` can only give up. robfig finds
    /// that out by searching five years; the answer is the same.
    pub fn never(&self) -> bool {
        let dom = self.dom & Field::DayOfMonth.all();
        let dow = self.dow & Field::DayOfWeek.all();
        let days = if self.star_day() {
            dom != 0 && dow != 0
        } else {
            dom != 0 || dow != 0
        };
        self.minute & Field::Minute.all() == 0
            || self.hour & Field::Hour.all() == 0
            || self.month & Field::Month.all() == 0
            || !days
    }

    /// robfig's rule: a star in either day field means both must match.
    fn star_day(&self) -> bool {
        (self.dom | self.dow) & STAR != 0
    }

    /// robfig's `dayMatches`. `weekday` counts from Sunday = 0.
    pub fn day_matches(&self, day: i64, weekday: i64) -> bool {
        let dom = has(self.dom, day);
        let dow = has(self.dow, weekday);
        if self.star_day() {
            dom && dow
        } else {
            dom || dow
        }
    }

    pub fn has_month(&self, month: i64) -> bool {
        has(self.month, month)
    }

    pub fn has_hour(&self, hour: i64) -> bool {
        has(self.hour, hour)
    }

    pub fn has_minute(&self, minute: i64) -> bool {
        has(self.minute, minute)
    }
}

/// Whether `value` is in the set; values outside 0..63 are in no set.
fn has(set: u64, value: i64) -> bool {
    (0..63).contains(&value) && set & (1 << value) != 0
}

/// robfig's `getField`: a comma list whose empty items are dropped.
fn parse_field(text: &str, field: Field) -> Result<u64, String> {
    let mut set = 0;
    for item in text.split(',').filter(|i| !i.is_empty()) {
        set |= parse_item(item, field)?;
    }
    Ok(set)
}

/// robfig's `getRange`: `*`, `?`, `a`, `a-b`, each optionally `/step`. The order of the
/// checks is robfig's, so the first problem reported is the one Go reports.
fn parse_item(item: &str, field: Field) -> Result<u64, String> {
    let range_and_step: Vec<&str> = item.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;

    let (start, mut end, mut star);
    if low_and_high[0] == "*" || low_and_high[0] == "?" {
        // robfig never looks at what follows a star's hyphen: `*-5` is `*`.
        (start, end, star) = (field.min(), field.max(), true);
    } else {
        start = number_or_name(low_and_high[0], field)?;
        end = match low_and_high.len() {
            1 => start,
            2 => number_or_name(low_and_high[1], field)?,
            _ => {
                return Err(format!(
                    "{item:?} has too many hyphens; expected a value, a range a-b, \
                     or either followed by /step"
                ));
            }
        };
        star = false;
    }

    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = step(range_and_step[1], item)?;
            // `a/n` means a through the field's maximum.
            if single {
                end = field.max();
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => {
            return Err(format!(
                "{item:?} has too many slashes; expected at most one /step"
            ));
        }
    };

    let hint = field.hint();
    let context = if low_and_high.len() == 1 && range_and_step.len() == 1 {
        String::new()
    } else {
        format!(" (in {item:?})")
    };
    if start < field.min() {
        return Err(format!(
            "{start} is below the minimum {}{hint}{context}",
            field.min()
        ));
    }
    if end > field.max() {
        return Err(format!(
            "{end} is above the maximum {}{hint}{context}",
            field.max()
        ));
    }
    if start > end {
        return Err(format!(
            "the range {item:?} runs backwards: it starts at {start}, after its end {end}"
        ));
    }
    if step == 0 {
        return Err(format!(
            "the step in {item:?} is 0; expected a positive number"
        ));
    }
    Ok(bits(start, end, step) | if star { STAR } else { 0 })
}

/// robfig's `parseIntOrName`: a name (any case, whole token) or a number.
fn number_or_name(text: &str, field: Field) -> Result<u64, String> {
    if let Some(lower) = go_to_lower_ascii(text)
        && let Some(&(_, value)) = field.names().iter().find(|(name, _)| *name == lower)
    {
        return Ok(value);
    }
    match go_atoi(text) {
        Ok(n) => u64::try_from(n).map_err(|_| format!("{text:?} is negative")),
        Err(AtoiError::Range) => Err(format!(
            "{text:?} is far too large; expected {}",
            field.expected()
        )),
        Err(AtoiError::Syntax) if unsupported_special(text) => Err(format!(
            "{text:?}: L, W and # are not supported (robfig/cron v3 syntax); expected {}",
            field.expected()
        )),
        Err(AtoiError::Syntax) if text.is_empty() => {
            Err(format!("a value is missing; expected {}", field.expected()))
        }
        Err(AtoiError::Syntax) => Err(format!(
            "{text:?} is not a number or a name; expected {}",
            field.expected()
        )),
    }
}

/// robfig's `mustParseInt` for a step: Go `Atoi`, and not negative (`+3` and `03` pass).
fn step(text: &str, item: &str) -> Result<u64, String> {
    match go_atoi(text) {
        Ok(n) => u64::try_from(n)
            .map_err(|_| format!("the step in {item:?} is negative; expected a positive number")),
        Err(AtoiError::Range) => Err(format!("the step in {item:?} is far too large")),
        Err(AtoiError::Syntax) => Err(format!(
            "the step in {item:?} is not a number; expected a positive number"
        )),
    }
}

/// Quartz-style specials people copy from other cron dialects.
fn unsupported_special(text: &str) -> bool {
    let digits_then = |suffix: &str| {
        text.strip_suffix(suffix)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit()))
    };
    text.contains('#') || digits_then("L") || digits_then("W") || text == "LW"
}

enum AtoiError {
    Syntax,
    Range,
}

/// Go's `strconv.Atoi` on 64-bit: an optional sign, then one or more ASCII digits
/// (leading zeros allowed, no underscores), within i64.
fn go_atoi(text: &str) -> Result<i64, AtoiError> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        rest => (false, rest),
    };
    if digits.is_empty() {
        return Err(AtoiError::Syntax);
    }
    // Accumulate the magnitude in u64 so that -2^63 fits.
    let mut magnitude: u64 = 0;
    let mut overflow = false;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(AtoiError::Syntax);
        }
        match magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(b - b'0')))
        {
            Some(m) => magnitude = m,
            // Go still reports a syntax error for a later non-digit, so keep scanning.
            None => overflow = true,
        }
    }
    if overflow {
        return Err(AtoiError::Range);
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude).ok_or(AtoiError::Range)
    } else {
        i64::try_from(magnitude).map_err(|_| AtoiError::Range)
    }
}

/// Go's `strings.ToLower`, but only when the result is ASCII (names are ASCII, so nothing
/// else can match). Besides A-Z, exactly two characters lower-case to ASCII in Go's
/// simple case mapping: U+0130 (İ) to `i` and U+212A (Kelvin sign) to `k`; so Go reads
/// `FRİ` as Friday, and so do we.
fn go_to_lower_ascii(text: &str) -> Option<String> {
    text.chars()
        .map(|c| match c {
            '\u{130}' => Some('i'),
            '\u{212A}' => Some('k'),
            c if c.is_ascii() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// robfig's `getBits`: start..=end every `step`. `end` is at most 59 here.
fn bits(start: u64, end: u64, step: u64) -> u64 {
    let mut set = 0;
    let mut value = start;
    while value <= end && value < 63 {
        set |= 1 << value;
        match value.checked_add(step) {
            Some(next) => value = next,
            None => break,
        }
    }
    set
}

/// A normalised description, e.g. `minute 0, hour 2, day-of-week sat`.
impl fmt::Display for CronFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.never() {
            return f.write_str("matches no time");
        }
        let mut parts = Vec::new();
        for (field, set) in [
            (Field::Minute, self.minute),
            (Field::Hour, self.hour),
            (Field::DayOfMonth, self.dom),
            (Field::Month, self.month),
            (Field::DayOfWeek, self.dow),
        ] {
            if set & field.all() != field.all() {
                parts.push(format!("{} {}", field.name(), list(field, set)));
            }
        }
        let days_restricted = self.dom & Field::DayOfMonth.all() != Field::DayOfMonth.all()
            && self.dow & Field::DayOfWeek.all() != Field::DayOfWeek.all();
        if parts.is_empty() {
            return f.write_str("every minute");
        }
        f.write_str(&parts.join(", "))?;
        if days_restricted && !self.star_day() {
            f.write_str(" (either day field may match)")?;
        }
        Ok(())
    }
}

/// `1-5,10,20` with names for months and weekdays.
fn list(field: Field, set: u64) -> String {
    let label = |v: u64| {
        field
            .names()
            .iter()
            .find(|(_, n)| *n == v)
            .map_or_else(|| v.to_string(), |(name, _)| name.to_string())
    };
    let mut out = Vec::new();
    let mut v = field.min();
    while v <= field.max() {
        if set & (1 << v) == 0 {
            v += 1;
            continue;
        }
        let start = v;
        while v < field.max() && set & (1 << (v + 1)) != 0 {
            v += 1;
        }
        out.push(if v > start + 1 {
            format!("{}-{}", label(start), label(v))
        } else if v == start + 1 {
            format!("{},{}", label(start), label(v))
        } else {
            label(start)
        });
        v += 1;
    }
    out.join(",")
}
