//! How fast kumaco parses window schedules and finds their next start. `next_after` runs
//! for every window on each recompute (to arm the timer for the next edge); parsing
//! happens once per ConfigMap change, and so does the lint of the `WindowLoaded` event
//! (a `next_after`, and a year of clock changes).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use kumaco::schedule;
use kumaco::window::{Window, WindowId};

const SPECS: &[(&str, &str)] = &[
    ("weekly", "0 2 * * 6"),
    ("weekdays in Berlin", "CRON_TZ=Europe/Berlin 30 1 * * 1-5"),
    ("every 15 minutes", "*/15 * * * *"),
    // Fires once every four years: the search walks months and days to get there.
    ("leap day", "0 0 29 2 *"),
];

fn bench(c: &mut Criterion) {
    let utc = TimeZone::UTC;
    // A Wednesday afternoon in 2026, off the minute, like a real clock reading.
    let now: Timestamp = "2026-03-11T14:27:31.123456789Z"
        .parse()
        .expect("the benchmark instant parses");

    for (name, spec) in SPECS {
        c.bench_function(&format!("schedule/parse {name}"), |b| {
            b.iter(|| schedule::parse(black_box(spec), &utc))
        });
        let parsed = schedule::parse(spec, &utc).expect("the benchmark specs parse");
        assert!(parsed.next_after(now).is_some());
        c.bench_function(&format!("schedule/next_after {name}"), |b| {
            b.iter(|| black_box(&parsed).next_after(black_box(now)))
        });
    }
}

/// The lint's worst cases: a spec that never fires (robfig's longest search, five years of
/// days walked one by one) and a yearly run on a day its zone skipped (before kumaco
/// stepped over the missing day, robfig's endless loop there ran into the million-move
/// bound: about a second per lint in a debug build).
fn lint(c: &mut Criterion) {
    for (name, spec, now) in [
        (
            "never fires",
            "0 0 31 4,6,9,11 *",
            "2026-03-11T14:27:31.123456789Z",
        ),
        (
            "skipped day in Apia",
            "CRON_TZ=Pacific/Apia 0 0 30 12 *",
            "2011-12-28T00:00:00Z",
        ),
    ] {
        let data = [
            ("startTime", spec),
            ("duration", "1h"),
            ("nodeSelector", ""),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let id = WindowId {
            namespace: "ops".into(),
            name: "w".into(),
        };
        let window =
            Window::from_data(id, &data, &TimeZone::UTC).expect("the benchmark windows load");
        let now: Timestamp = now.parse().expect("the benchmark instant parses");
        c.bench_function(&format!("window/lint {name}"), |b| {
            b.iter(|| black_box(&window).lint(black_box(now)))
        });
    }
}

criterion_group! {
    name = benches;
    // Short runs: these are regression checks, not publication numbers.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = bench, lint
}
criterion_main!(benches);
