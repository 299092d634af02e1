//! Go's `time.ParseDuration` and `Duration.String()`, exactly.
//!
//! Window durations and `@every` delays are written in Go syntax (`90m`, `1h30m`, `1.5h`)
//! because that is what kured users already write. Accepting a string Go rejects, or
//! reading a different value, would make a window that works in one tool and not in the
//! other, so this module follows Go byte for byte, including its odd corners:
//!
//! - one optional sign, then segments of `digits[.digits]unit`; a lone `0` (after the
//!   sign) is the only number allowed without a unit;
//! - units are case-sensitive: `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`;
//! - a unit is the longest run of bytes that are neither digits nor `.`, so `1h ` has the
//!   unit `"h "` and `1e3s` the unit `"e"`;
//! - fraction digits beyond what fits in 63 bits are ignored, and a fraction is scaled
//!   with a float64, as Go does;
//! - the sum wraps when two segments are each exactly 2^63 ns
//!   (`9223372036854775808ns9223372036854775808ns` is 0 in Go, so it is 0 here).
//!
//! Only the error messages differ: Go's say "invalid duration"; ours say what is wrong and
//! what is expected.

use std::fmt;
use std::str::FromStr;

/// A duration as Go's `time.Duration`: signed nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(i64);

/// 2^63: the magnitude of the most negative duration, the ceiling Go's parser checks
/// against before applying the sign.
const LIMIT: u64 = 1 << 63;

impl GoDuration {
    /// The longest duration: `2562047h47m16.854775807s`.
    pub const MAX: GoDuration = GoDuration(i64::MAX);
    /// The most negative duration: `-2562047h47m16.854775808s`.
    pub const MIN: GoDuration = GoDuration(i64::MIN);
    pub const ZERO: GoDuration = GoDuration(0);

    pub const fn from_nanos(n: i64) -> Self {
        GoDuration(n)
    }

    pub const fn as_nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds, rounded towards negative infinity (`-1ns` is -1 s).
    pub fn as_secs_floor(self) -> i64 {
        self.0.div_euclid(1_000_000_000)
    }

    pub fn to_signed(self) -> jiff::SignedDuration {
        jiff::SignedDuration::from_nanos(self.0)
    }
}

/// Why a string is not a Go duration. Every message quotes the input, says what is wrong
/// and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("{input:?} is empty: expected a Go duration like 90m or 1h30m")]
    Empty { input: String },

    #[error("{input:?} has nothing after its sign: expected a Go duration like -90m or +1h30m")]
    NothingAfterSign { input: String },

    /// A segment must start with a digit or `.`; `found` is what was there instead.
    #[error(
        "expected a number at position {position} in {input:?}, found {found:?}: \
         a Go duration is numbers with units, like 90m or 1h30m{}",
        hint_for_start(*found)
    )]
    ExpectedNumber {
        input: String,
        /// Character (not byte) offset, counted from 0.
        position: usize,
        found: char,
    },

    #[error(
        "the \".\" at position {position} in {input:?} has no digits on either side: \
         expected a number like 1.5h or .5s"
    )]
    NoDigits { input: String, position: usize },

    #[error("{}", missing_unit_message(input, number))]
    MissingUnit {
        input: String,
        /// The number that has no unit after it.
        number: String,
    },

    #[error(
        "unknown unit {unit:?} in {input:?}: expected one of ns, us, µs, ms, s, m, h{}",
        unit_hint(unit)
    )]
    UnknownUnit { input: String, unit: String },

    #[error(
        "{input:?} is out of range: a Go duration is at most 2562047h47m16.854775807s \
         (about 292 years) and at least -2562047h47m16.854775808s"
    )]
    Overflow { input: String },
}

fn missing_unit_message(input: &str, number: &str) -> String {
    let expected = "expected a number followed by a unit, like 90m or 1h30m";
    if number == input.trim_start_matches(['+', '-']) {
        format!("missing unit in {input:?}: {expected}")
    } else {
        format!("missing unit after {number:?} in {input:?}: {expected}")
    }
}

fn hint_for_start(found: char) -> &'static str {
    match found {
        c if c.is_whitespace() => " (spaces are not allowed anywhere in a Go duration)",
        '+' | '-' => " (only one sign is allowed, at the very start)",
        _ => "",
    }
}

/// A nudge for the mistakes people make when they come from other duration syntaxes.
fn unit_hint(unit: &str) -> String {
    if unit.chars().any(char::is_whitespace) {
        return " (spaces are not allowed anywhere in a Go duration)".into();
    }
    let fixed = match unit {
        "d" | "day" | "days" => return " (days are not a Go duration unit; write 24h)".into(),
        "w" | "wk" | "week" | "weeks" => {
            return " (weeks are not a Go duration unit; write 168h)".into();
        }
        "y" | "yr" | "year" | "years" => {
            return " (years are not a Go duration unit; write hours, like 8760h)".into();
        }
        "e" | "E" => return " (exponents are not allowed; write the digits out)".into(),
        "sec" | "secs" | "second" | "seconds" => "s",
        "min" | "mins" | "minute" | "minutes" => "m",
        "hr" | "hrs" | "hour" | "hours" => "h",
        "u" | "µ" | "μ" => "us",
        other => {
            let lower = other.to_ascii_lowercase();
            match lower.as_str() {
                "ns" | "us" | "ms" | "s" | "m" | "h" => {
                    return format!(" (units are lower case: write {lower:?})");
                }
                _ => return String::new(),
            }
        }
    };
    format!(" (did you mean {fixed:?}?)")
}

/// Parses `input` exactly as Go's `time.ParseDuration` does.
pub fn parse(input: &str) -> Result<GoDuration, DurationError> {
    let owned = || input.to_owned();
    let bytes = input.as_bytes();

    let (negative, mut pos) = match bytes.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let unsigned = &bytes[pos..];
    if unsigned == b"0" {
        return Ok(GoDuration::ZERO);
    }
    if unsigned.is_empty() {
        return Err(if input.is_empty() {
            DurationError::Empty { input: owned() }
        } else {
            DurationError::NothingAfterSign { input: owned() }
        });
    }

    let mut total: u64 = 0;
    while pos < bytes.len() {
        let segment_start = pos;
        if !(bytes[pos] == b'.' || bytes[pos].is_ascii_digit()) {
            return Err(DurationError::ExpectedNumber {
                input: owned(),
                position: char_position(input, pos),
                found: input
                    .get(pos..)
                    .and_then(|rest| rest.chars().next())
                    .unwrap_or('\u{FFFD}'),
            });
        }

        let (mut value, after_int) =
            leading_int(bytes, pos).ok_or_else(|| DurationError::Overflow { input: owned() })?;
        let has_int = after_int != pos;
        pos = after_int;

        let mut fraction = 0u64;
        let mut scale = 1f64;
        let mut has_fraction = false;
        if bytes.get(pos) == Some(&b'.') {
            let dot = pos;
            let (f, s, after) = leading_fraction(bytes, pos + 1);
            (fraction, scale) = (f, s);
            has_fraction = after != pos + 1;
            pos = after;
            if !has_int && !has_fraction {
                return Err(DurationError::NoDigits {
                    input: owned(),
                    position: char_position(input, dot),
                });
            }
        }
        debug_assert!(has_int || has_fraction);

        let unit_start = pos;
        while pos < bytes.len() && !(bytes[pos] == b'.' || bytes[pos].is_ascii_digit()) {
            pos += 1;
        }
        // Both ends of the unit sit next to ASCII bytes or the string's ends, so they
        // are character boundaries; `get` keeps this panic-free regardless.
        let unit = input.get(unit_start..pos).unwrap_or_default();
        if unit.is_empty() {
            return Err(DurationError::MissingUnit {
                input: owned(),
                number: input.get(segment_start..pos).unwrap_or_default().to_owned(),
            });
        }
        let Some(unit_nanos) = unit_nanos(unit) else {
            return Err(DurationError::UnknownUnit {
                input: owned(),
                unit: unit.to_owned(),
            });
        };

        if value > LIMIT / unit_nanos {
            return Err(DurationError::Overflow { input: owned() });
        }
        value *= unit_nanos;
        if fraction > 0 {
            // Go scales the fraction with float64 (exact enough for hours to the
            // nanosecond); doing the same keeps rounding identical. The product is below
            // one unit (at most 3.6e12 ns), so the conversion cannot saturate.
            value += (fraction as f64 * (unit_nanos as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(DurationError::Overflow { input: owned() });
            }
        }
        // Go adds in uint64 and only then compares with 2^63; 2^63 + 2^63 wraps to 0 and
        // slips through. Wrapping here reproduces that exactly.
        total = total.wrapping_add(value);
        if total > LIMIT {
            return Err(DurationError::Overflow { input: owned() });
        }
    }

    if negative {
        // 2^63 becomes i64::MIN, whose negation is itself: exactly Go's -Duration(d).
        Ok(GoDuration((total as i64).wrapping_neg()))
    } else if total > i64::MAX as u64 {
        Err(DurationError::Overflow { input: owned() })
    } else {
        Ok(GoDuration(total as i64))
    }
}

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Go's `leadingInt`: the digits from `start`, or `None` once the value passes 2^63.
fn leading_int(bytes: &[u8], start: usize) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    let mut pos = start;
    while let Some(&c) = bytes.get(pos).filter(|c| c.is_ascii_digit()) {
        if value > LIMIT / 10 {
            return None;
        }
        value = value * 10 + u64::from(c - b'0');
        if value > LIMIT {
            return None;
        }
        pos += 1;
    }
    Some((value, pos))
}

/// Go's `leadingFraction`: the digits from `start` as `value / scale`. Digits that no
/// longer fit are consumed but ignored, as in Go.
fn leading_fraction(bytes: &[u8], start: usize) -> (u64, f64, usize) {
    let mut value: u64 = 0;
    let mut scale = 1f64;
    let mut overflow = false;
    let mut pos = start;
    while let Some(&c) = bytes.get(pos).filter(|c| c.is_ascii_digit()) {
        pos += 1;
        if overflow {
            continue;
        }
        if value > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(c - b'0');
        if next > LIMIT {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, pos)
}

fn char_position(input: &str, byte_offset: usize) -> usize {
    input
        .get(..byte_offset)
        .map_or(byte_offset, |head| head.chars().count())
}

impl FromStr for GoDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

/// Go's `Duration.String()`: `1h30m0s`, `4m10.5s`, `500ms`, `1.5µs`, `0s`.
impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::with_capacity(24);
        if self.0 < 0 {
            out.push('-');
        }
        // unsigned_abs handles i64::MIN, whose magnitude does not fit in i64.
        let magnitude = self.0.unsigned_abs();
        if magnitude < 1_000_000_000 {
            // Under a second Go switches to the largest unit that keeps an integer part.
            let (unit_nanos, digits, unit) = match magnitude {
                0 => return f.write_str("0s"),
                1..1_000 => (1, 0, "ns"),
                1_000..1_000_000 => (1_000, 3, "µs"),
                _ => (1_000_000, 6, "ms"),
            };
            out.push_str(&(magnitude / unit_nanos).to_string());
            push_fraction(&mut out, magnitude % unit_nanos, digits);
            out.push_str(unit);
        } else {
            let secs = magnitude / 1_000_000_000;
            let (hours, minutes, seconds) = (secs / 3600, secs / 60 % 60, secs % 60);
            // Go stops at hours: days have no fixed length.
            if hours > 0 {
                out.push_str(&format!("{hours}h"));
            }
            if secs >= 60 {
                out.push_str(&format!("{minutes}m"));
            }
            out.push_str(&seconds.to_string());
            push_fraction(&mut out, magnitude % 1_000_000_000, 9);
            out.push('s');
        }
        f.write_str(&out)
    }
}

/// Appends `.` and `fraction` as `digits` decimal digits without trailing zeros, or
/// nothing when the fraction is zero (Go's `fmtFrac`).
fn push_fraction(out: &mut String, fraction: u64, digits: usize) {
    if fraction == 0 {
        return;
    }
    let padded = format!("{fraction:0digits$}");
    out.push('.');
    out.push_str(padded.trim_end_matches('0'));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// From Go's time_test.go, confirmed with the oracle.
    #[test]
    fn parses_the_documented_vectors() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12μs", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52763797000 * NS),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
            // Go's uint64 sum wraps: 2^63 + 2^63 = 0.
            ("9223372036854775808ns9223372036854775808ns", 0),
        ];
        for &(input, nanos) in cases {
            assert_eq!(parse(input), Ok(GoDuration(nanos)), "parse({input:?})");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for input in [
            "",
            "3",
            "-",
            "+",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "1h ",
            " 1h",
            "1H",
            "1e3s",
            "00",
            "0.0",
            "1.5",
            "--1s",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "2562047h47m16.854775808s",
            "3000000h",
            "-9223372036854775809ns",
            "99999999999999999999999s",
        ] {
            assert!(parse(input).is_err(), "parse({input:?}) should fail");
        }
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1100, "1.1µs"),
            (1500, "1.5µs"),
            (2200 * US, "2.2ms"),
            (500 * MS, "500ms"),
            (3300 * MS, "3.3s"),
            (4 * M + 10 * S + 500 * MS, "4m10.5s"),
            (4 * M + 5 * S + 1, "4m5.000000001s"),
            (5 * H + 6 * M + 7 * S + MS, "5h6m7.001s"),
            (H + 30 * M, "1h30m0s"),
            (H, "1h0m0s"),
            (8 * M + 1, "8m0.000000001s"),
            (-(2 * M + 3 * S + 400 * MS), "-2m3.4s"),
            (-1, "-1ns"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for &(nanos, text) in cases {
            assert_eq!(GoDuration(nanos).to_string(), text, "{nanos}ns");
        }
    }

    #[test]
    fn errors_say_what_is_wrong_and_what_is_expected() {
        let message = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(
            message("1d"),
            "unknown unit \"d\" in \"1d\": expected one of ns, us, µs, ms, s, m, h \
             (days are not a Go duration unit; write 24h)"
        );
        assert_eq!(
            message("90"),
            "missing unit in \"90\": expected a number followed by a unit, like 90m or 1h30m"
        );
        assert_eq!(
            message("1h30"),
            "missing unit after \"30\" in \"1h30\": expected a number followed by a unit, \
             like 90m or 1h30m"
        );
        assert_eq!(
            message(""),
            "\"\" is empty: expected a Go duration like 90m or 1h30m"
        );
        assert!(message("3000000h").contains("2562047h47m16.854775807s"));
        assert!(message("1H").contains("units are lower case: write \"h\""));
        assert!(message("1h ").contains("spaces are not allowed"));
        assert!(message(" 1h").starts_with("expected a number at position 0 in \" 1h\""));
        assert!(message("1h.m").contains("\".\" at position 2"));
        assert!(message("5mins").contains("did you mean \"m\"?"));
    }

    #[test]
    fn helpers() {
        assert_eq!(GoDuration(-1).as_secs_floor(), -1);
        assert_eq!(GoDuration(1_999_999_999).as_secs_floor(), 1);
        assert_eq!(
            GoDuration(90 * M).to_signed(),
            jiff::SignedDuration::from_mins(90)
        );
        assert_eq!("1h30m".parse::<GoDuration>(), Ok(GoDuration(90 * M)));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_duration_like_text(s in "[-+]?[0-9.]{0,25}(ns|us|µs|μs|ms|s|m|h|d| )?([0-9.]{0,25}(ns|us|µs|ms|s|m|h)?){0,3}") {
            let _ = parse(&s);
        }

        #[test]
        fn display_reparses_to_the_same_value(nanos in any::<i64>()) {
            let d = GoDuration(nanos);
            prop_assert_eq!(parse(&d.to_string()), Ok(d));
        }

        #[test]
        fn parsed_durations_reparse_from_their_display(s in "[-+]?([0-9]{0,12}(\\.[0-9]{0,12})?(ns|us|µs|ms|s|m|h)){1,4}") {
            if let Ok(d) = parse(&s) {
                prop_assert_eq!(parse(&d.to_string()), Ok(d));
            }
        }
    }
}
