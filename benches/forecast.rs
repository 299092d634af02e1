//! What a forecast costs (`kumaco_core::forecast`): 500, 1,000 and 5,000 nodes
//! against 200 windows, 30 days ahead, every node needing a reboot, at the median and
//! the 90th percentile durations, and the expected completion over durations drawn from
//! 500 records (two simulations per forecast, and 15 more where the rollout completes);
//! at 5,000 nodes also as the controller plays them, side by side on two threads.
//!
//! The nodes carry the scale harness's labels (`testkit::fleet`: 20 labels, four zones,
//! fifty racks); the windows are `benches/pass.rs`'s (30 minutes each: weekly, daily,
//! one-shots, weekdays in Berlin, by rack, zone or pool). Three rule sets:
//!
//! - kured's defaults, one node at a time, none down: the rollout does not fit in 30
//!   days, so the simulation runs to the horizon through every window edge;
//! - every rule of the brain: a ceiling of 5%, three per zone, a blocking label, blocking
//!   pods on every 25th node, 5 minutes between starts, a 10-minute start cutoff, and
//!   every 250th node down (all in two zones, whose slots they fill);
//! - 10% and 25 per zone: many starts at once, the rollout within reach.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use kumaco::forecasting;
use kumaco_core::conditions::{Condition, Status};
use kumaco_core::forecast::{self, Durations, Plan, Quantiles, Recorded, Runs};
use kumaco_core::in_progress::{Availability, BlockingPod, Ceiling, GroupCeiling, Policy};
use kumaco_core::pass::NodeView;
use kumaco_core::selector;
use kumaco_core::window::{Window, WindowId};
use testkit::Scope;
use testkit::fleet::node_labels;

const REBOOT_REQUIRED: &str = "kured.dev/RebootRequired";

/// `benches/pass.rs`'s 200 windows.
fn windows() -> Vec<Window> {
    (0..200)
        .map(|i| {
            let start = match i % 4 {
                0 => format!("{} 3 * * {}", i % 60, i % 7),
                1 => format!("{} 4 * * *", i % 60),
                2 => format!("2026-03-{:02}T{:02}:00:00Z", 1 + i % 28, i % 24),
                _ => format!("CRON_TZ=Europe/Berlin 0 {} * * 1-5", i % 24),
            };
            let selector = match i % 3 {
                0 => format!("bench.kumaco.dev/rack=r{:02}", i % 50),
                1 => format!(
                    "topology.kubernetes.io/zone=zone-{}",
                    ["a", "b", "c", "d"][i % 4]
                ),
                _ => format!(
                    "bench.kumaco.dev/pool in (general,memory),bench.kumaco.dev/rack=r{:02}",
                    i % 50
                ),
            };
            let data: BTreeMap<String, String> = [
                ("startTime", start),
                ("duration", "30m".to_string()),
                ("nodeSelector", selector),
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

/// A node as the forecast reads it, owning what a `NodeView` borrows.
struct Node {
    name: String,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    availability: Availability,
    pods: Vec<BlockingPod>,
    boot_id: String,
}

/// `n` nodes, each needing a reboot since a different minute of the last week. Their
/// names are the same in every process (a drawn duration is hashed from the name), so
/// two builds' forecasts can be compared.
fn nodes(n: usize, now: Timestamp) -> Vec<Node> {
    let scope = Scope::new("bench");
    (0..n)
        .map(|i| {
            let name = format!("bench-{i:05}");
            let since = now - SignedDuration::from_mins((i * 7919 % 10080) as i64);
            Node {
                labels: node_labels(&scope, &name, i),
                conditions: vec![Condition {
                    type_: REBOOT_REQUIRED.into(),
                    status: Status::True,
                    reason: "RebootRequired".into(),
                    message: String::new(),
                    last_transition_time: Some(since),
                    last_heartbeat_time: Some(now),
                }],
                availability: Availability {
                    ready: Some(if i % 250 == 0 {
                        Status::False
                    } else {
                        Status::True
                    }),
                    unschedulable: false,
                    disrupted_by: None,
                },
                pods: if i % 25 == 0 {
                    vec![BlockingPod {
                        name: format!("db/postgres-{i}"),
                        selector: 0,
                    }]
                } else {
                    Vec::new()
                },
                boot_id: format!("{:032x}", i * 7919),
                name,
            }
        })
        .collect()
}

/// The nodes as the forecast reads them. With every rule only: the pods (the shell watches
/// them only with `--block-pod-selector`) and the nodes down.
fn views<'a>(nodes: &'a [Node], policy: &Policy) -> Vec<NodeView<'a>> {
    let every_rule = !policy.block_pod_selectors.is_empty();
    nodes
        .iter()
        .map(|n| NodeView {
            name: &n.name,
            uid: &n.name,
            labels: &n.labels,
            resource_version: None,
            conditions: &n.conditions,
            owned: &[],
            owned_since: None,
            owners: &[],
            availability: if every_rule {
                n.availability
            } else {
                Availability::default()
            },
            pods: if every_rule { &n.pods } else { &[] },
            boot_id: Some(&n.boot_id),
            holds: &[],
            drain: None,
        })
        .collect()
}

/// 500 recorded durations (sorted), from half the median to three times it, whose median
/// and 90th percentile are `median` and `p90` seconds: skewed to the right, as reboots are.
fn recorded(median: i64, p90: i64) -> Vec<SignedDuration> {
    let at = |k: i64, from: (i64, i64), to: (i64, i64)| {
        from.1 + (to.1 - from.1) * (k - from.0) / (to.0 - from.0)
    };
    (1..=500)
        .map(|k| {
            let s = match k {
                ..=250 => at(k, (1, median / 2), (250, median)),
                251..=450 => at(k, (250, median), (450, p90)),
                _ => at(k, (450, p90), (500, 3 * median)),
            };
            SignedDuration::from_secs(s)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let now: Timestamp = "2026-03-02T00:00:00Z".parse().unwrap();
    let horizon = SignedDuration::from_hours(24 * 30);
    let windows = windows();
    let windows: Vec<&Window> = windows.iter().collect();
    let (maintenance, recovery) = (recorded(360, 660), recorded(70, 180));
    let durations = Durations {
        maintenance: Quantiles::of(&mut maintenance.clone()).unwrap(),
        recovery: Quantiles::of(&mut recovery.clone()).unwrap(),
        recorded: Recorded {
            maintenance,
            recovery,
        },
    };
    let defaults = Policy {
        required: vec![REBOOT_REQUIRED.into()],
        ..Policy::with_ceiling(Ceiling::Count(1))
    };
    let every_rule = Policy {
        ceiling: Ceiling::Percent(5),
        block_node_selectors: vec![selector::parse("bench.kumaco.dev/rack=r13").unwrap()],
        block_pod_selectors: vec![selector::parse("app=postgres").unwrap()],
        group_ceilings: vec![GroupCeiling {
            key: "topology.kubernetes.io/zone".into(),
            ceiling: Ceiling::Count(3),
        }],
        start_interval: Some(SignedDuration::from_mins(5)),
        start_cutoff: SignedDuration::from_mins(10),
        ..defaults.clone()
    };
    let wide = Policy {
        ceiling: Ceiling::Percent(10),
        group_ceilings: vec![GroupCeiling {
            key: "topology.kubernetes.io/zone".into(),
            ceiling: Ceiling::Count(25),
        }],
        ..defaults.clone()
    };
    let mut g = c.benchmark_group("forecast");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let mut summary: HashMap<String, String> = HashMap::new();
    for (rules, policy) in [
        ("kured's defaults", &defaults),
        ("every rule", &every_rule),
        ("10%, 25 per zone", &wide),
    ] {
        for n in [500, 1000, 5000] {
            let fleet = nodes(n, now);
            let views = views(&fleet, policy);
            let f = forecast::forecast(&windows, policy, &views, &durations, now, horizon);
            let held = f
                .nodes
                .iter()
                .filter(|n| matches!(n.plan, Plan::Held { .. }))
                .count();
            summary.insert(
                format!("{rules}, {n} nodes"),
                format!(
                    "{} nodes forecast, {held} held, {} without a start at the median; completion {:?} (median), {:?} (p90), expected {:?}; {} occurrences used",
                    f.nodes.len() - held,
                    f.median.no_start,
                    f.median.completion,
                    f.p90.completion,
                    f.expected,
                    f.median.occurrences.len(),
                ),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("{rules}, 200 windows, 30 days"), n),
                &views,
                |b, views| {
                    b.iter(|| {
                        forecast::forecast(
                            &windows,
                            policy,
                            black_box(views),
                            &durations,
                            now,
                            horizon,
                        )
                    })
                },
            );
            // The controller's way: the same runs, side by side on two threads.
            if n == 5000 {
                let runs = Runs::new(&windows, policy, &views, &[], &durations, now, horizon);
                assert_eq!(forecasting::play(&runs, 2), f);
                g.bench_function(
                    BenchmarkId::new(format!("{rules}, 200 windows, 30 days, 2 threads"), n),
                    |b| b.iter(|| forecasting::play(black_box(&runs), 2)),
                );
            }
        }
    }
    g.finish();
    let mut lines: Vec<_> = summary.into_iter().collect();
    lines.sort();
    for (what, outcome) in lines {
        eprintln!("{what}: {outcome}");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
