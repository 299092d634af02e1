//! What the SVG pictures of `plan` and `plan --forecast` share: the frame they are drawn
//! in, escaping, and the time axis.

use std::fmt::Write as _;

use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

// The frame, in pixels: the axis is drawn in it, so every picture with an axis uses it.
pub(super) const SVG_WIDTH: f64 = 1200.0;
pub(super) const LABEL_WIDTH: f64 = 280.0;
pub(super) const RIGHT_MARGIN: f64 = 30.0;

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A period shorter than this many hours (the forecast of a short rollout) has its ticks
/// in minutes.
const MINUTE_TICKS_BELOW_HOURS: i64 = 2;
/// Tick spacing: the smallest of these giving at most about 10 ticks over the period.
const TICK_HOURS: [i64; 9] = [1, 2, 3, 6, 12, 24, 48, 168, 720];
/// The same below [`MINUTE_TICKS_BELOW_HOURS`], in minutes.
const TICK_MINUTES: [i64; 7] = [1, 2, 5, 10, 15, 30, 60];

/// The time axis at `y` under a picture whose plot starts at `top`: a line, and ticks
/// with dashed guides, labelled in `zone` (days, hours, or minutes below
/// [`MINUTE_TICKS_BELOW_HOURS`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn axis(
    s: &mut String,
    from: Timestamp,
    to: Timestamp,
    top: f64,
    y: f64,
    x: &impl Fn(Timestamp) -> f64,
    zone: &TimeZone,
    zone_name: &str,
) {
    let _ = writeln!(
        s,
        r##"<line x1="{LABEL_WIDTH}" y1="{y}" x2="{}" y2="{y}" stroke="#333"/>
<text x="10" y="{}">time ({})</text>"##,
        SVG_WIDTH - RIGHT_MARGIN,
        y + 16.0,
        esc(zone_name)
    );
    let minutes = (to.as_second() - from.as_second()) / 60;
    let hours = minutes / 60;
    let (points, format) = if hours >= MINUTE_TICKS_BELOW_HOURS {
        let step = TICK_HOURS
            .iter()
            .copied()
            .find(|h| hours / h <= 10)
            .unwrap_or(8760);
        let format = if step >= 24 {
            "%a %m-%d"
        } else {
            "%m-%d %H:%M"
        };
        (ticks(from, to, step, zone), format)
    } else {
        let step = TICK_MINUTES
            .iter()
            .copied()
            .find(|m| minutes / m <= 10)
            .unwrap_or(60)
            * 60;
        let first = (from.as_second() / step + 1) * step;
        let points = (0..)
            .map(|i| first + i * step)
            .take_while(|t| *t <= to.as_second())
            .filter_map(|t| Timestamp::from_second(t).ok())
            .collect();
        (points, "%H:%M")
    };
    for t in points {
        let label = t.to_zoned(zone.clone()).strftime(format).to_string();
        let xt = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xt:.1}" y1="{top}" x2="{xt:.1}" y2="{}" stroke="#bbb" stroke-dasharray="2,3"/>
<text x="{xt:.1}" y="{}" text-anchor="middle">{}</text>"##,
            y + 4.0,
            y + 18.0,
            esc(&label)
        );
    }
}

/// Tick instants in `[from, to]`, on local boundaries of `zone`: midnights for day
/// steps, whole hours divisible by the step otherwise (so ticks read 00:00, 06:00, ...).
pub(super) fn ticks(
    from: Timestamp,
    to: Timestamp,
    step_hours: i64,
    zone: &TimeZone,
) -> Vec<Timestamp> {
    let Ok(mut day) = from.to_zoned(zone.clone()).start_of_day() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    while day.timestamp() <= to && out.len() < 200 {
        if step_hours >= 24 {
            if day.timestamp() >= from {
                out.push(day.timestamp());
            }
            let Ok(next) = day.checked_add((step_hours / 24).days()) else {
                break;
            };
            day = next;
        } else {
            for h in (0..24).step_by(step_hours as usize) {
                let t = day.with().hour(h as i8).build().map(|z| z.timestamp()).ok();
                if let Some(t) = t.filter(|t| *t >= from && *t <= to) {
                    out.push(t);
                }
            }
            let Ok(next) = day.tomorrow() else { break };
            day = next;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use jiff::tz::TimeZone;
    use kumaco_core::testing::ts;

    use super::ticks;

    #[test]
    fn day_ticks_fall_on_local_midnight() {
        let zone = TimeZone::get("Europe/Berlin").unwrap();
        let t = ticks(
            ts("2026-01-01T12:00:00Z"),
            ts("2026-01-03T12:00:00Z"),
            24,
            &zone,
        );
        assert_eq!(t, [ts("2026-01-01T23:00:00Z"), ts("2026-01-02T23:00:00Z")]);
    }
}
