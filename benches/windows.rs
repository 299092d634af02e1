//! The controller's whole decision at one instant: 1,000 windows against 5,000 nodes'
//! label sets (which windows are active, then each node's verdict). kumaco runs this on
//! every wake-up, so it bounds how quickly an edge can land at scale.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use kumaco::decision::ActiveWindows;
use kumaco::window::{Window, WindowId};

const ZONES: [&str; 4] = ["zone-a", "zone-b", "zone-c", "zone-d"];

/// 1,000 windows of mixed kinds: weekly/daily cron in several zones, @every, one-shots,
/// some blackouts; selectors of the shapes operators write.
fn windows() -> Vec<Window> {
    (0..1000)
        .map(|i| {
            let start = match i % 5 {
                0 => format!("CRON_TZ=Europe/Berlin {} 2 * * {}", i % 60, i % 7),
                1 => format!("{} {} * * *", i % 60, i % 24),
                2 => format!("@every {}m", 5 + i % 55),
                3 => format!("2026-03-{:02}T{:02}:00:00Z", 1 + i % 28, i % 24),
                _ => format!("CRON_TZ=America/New_York 0 {} * * 1-5", i % 24),
            };
            let selector = match i % 4 {
                0 => format!("topology.kubernetes.io/zone={}", ZONES[i % 4]),
                1 => format!(
                    "pool in (pool-{}, pool-{}),!kured.dev/exclude",
                    i % 10,
                    (i + 1) % 10
                ),
                2 => format!("rack=r{}", i % 50),
                _ => "node-role.kubernetes.io/worker".to_string(),
            };
            let data: BTreeMap<String, String> = [
                ("startTime", start),
                ("duration", format!("{}m", 30 + i % 180)),
                ("nodeSelector", selector),
                ("blackout", (i % 50 == 0).to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let id = WindowId {
                namespace: "ops".into(),
                name: format!("w{i}"),
            };
            Window::from_data(id, &data, &TimeZone::UTC).expect("benchmark windows are valid")
        })
        .collect()
}

/// 5,000 nodes with 20 labels each, spread over zones, pools and racks.
fn nodes() -> Vec<BTreeMap<String, String>> {
    (0..5000)
        .map(|i| {
            let mut l = BTreeMap::new();
            l.insert("topology.kubernetes.io/zone".into(), ZONES[i % 4].into());
            l.insert("pool".into(), format!("pool-{}", i % 10));
            l.insert("rack".into(), format!("r{}", i % 50));
            l.insert("node-role.kubernetes.io/worker".into(), String::new());
            l.insert("kubernetes.io/hostname".into(), format!("node-{i}"));
            for j in 0..15 {
                l.insert(
                    format!("example.com/label-{j}"),
                    format!("value-{}", (i + j) % 7),
                );
            }
            l
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let windows = windows();
    let nodes = nodes();
    let now: Timestamp = "2026-03-07T02:30:00Z".parse().unwrap();
    let active = ActiveWindows::at(&windows, now);
    eprintln!(
        "{} of {} windows active at {now}",
        active.iter().count(),
        windows.len()
    );

    let mut g = c.benchmark_group("decision");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.bench_function("active windows (1000) at one instant", |b| {
        b.iter(|| {
            ActiveWindows::at(black_box(&windows), black_box(now))
                .iter()
                .count()
        })
    });
    g.bench_function("1000 windows x 5000 nodes at one instant", |b| {
        b.iter(|| {
            let active = ActiveWindows::at(black_box(&windows), black_box(now));
            nodes
                .iter()
                .filter(|labels| active.verdict(*labels).is_maintenance())
                .count()
        })
    });
    g.bench_function("next edge over 1000 windows", |b| {
        b.iter(|| kumaco::decision::next_edge(black_box(&windows), black_box(now), None))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
