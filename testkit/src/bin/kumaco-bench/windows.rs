//! The cluster's contents: the 200 background windows.

use crate::{CONCURRENCY, MANAGER, NAMESPACE, WINDOWS};
use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use testkit::fleet::{self, POOLS, ZONES};

/// 200 windows of mixed kinds: daily, weekday, weekly and monthly crons in four zones,
/// past and future one-shots, a few blackouts, and three windows active from the start
/// (on small groups outside the edge batch). No edge of any of them falls in the run:
/// cron starts are 6-17 h ahead of now's time of day in their zone and last at most 2 h.
pub(crate) async fn create_windows(client: &kube::Client) -> Result<()> {
    // Zones without DST, so that a fixed offset gives their local time.
    const TZS: [(&str, i64); 4] = [
        ("", 0),
        ("CRON_TZ=Asia/Tokyo ", 9 * 60),
        ("CRON_TZ=Asia/Kolkata ", 5 * 60 + 30),
        ("TZ=America/Sao_Paulo ", -3 * 60),
    ];
    const DURATIONS: [&str; 4] = ["30m", "1h", "90m", "2h"];
    let now = Timestamp::now();
    let utc_minute = now.as_second().rem_euclid(86_400) / 60;
    let selector = |k: usize| match k % 5 {
        0 => format!("topology.kubernetes.io/zone={}", ZONES[k % 4]),
        1 => format!(
            "bench.kumaco.dev/rack in (r{:02}, r{:02})",
            k % 50,
            (k + 25) % 50
        ),
        2 => format!(
            "node.kubernetes.io/pool={},bench.kumaco.dev/team!=team-3",
            POOLS[k % 3]
        ),
        3 => format!("bench.kumaco.dev/reboot-group=g{}", k % 10),
        _ => format!(
            "bench.kumaco.dev/cost-center=cc-{},kubernetes.io/os=linux",
            k % 13
        ),
    };
    let mut windows: Vec<(String, Vec<(&str, String)>)> = Vec::new();
    for k in 0..WINDOWS {
        let name = format!("w-{k:03}");
        let data = match k {
            // Active now and for a week: kumaco writes these once, at startup.
            0..3 => vec![
                (
                    "startTime",
                    (now - SignedDuration::from_hours(1)).to_string(),
                ),
                ("duration", "168h".into()),
                (
                    "nodeSelector",
                    format!(
                        "bench.kumaco.dev/rack=r{:02},bench.kumaco.dev/batch!=b0",
                        7 + k
                    ),
                ),
            ],
            // Blackouts over a future freeze.
            3..6 => vec![
                (
                    "startTime",
                    (now + SignedDuration::from_hours(24 * (k as i64 + 3))).to_string(),
                ),
                ("duration", "72h".into()),
                ("nodeSelector", selector(k)),
                ("blackout", "true".into()),
            ],
            // One-shots: half long past, half days ahead.
            _ if k % 10 == 9 => {
                let days = (k as i64 % 30 + 2) * if k % 20 == 9 { -1 } else { 1 };
                vec![
                    (
                        "startTime",
                        (now + SignedDuration::from_hours(24 * days)).to_string(),
                    ),
                    ("duration", "4h".into()),
                    ("nodeSelector", selector(k)),
                ]
            }
            _ => {
                let (prefix, offset) = TZS[k % TZS.len()];
                let local =
                    (utc_minute + offset + 360 + (k as i64 % 12) * 60 + (k as i64 * 7) % 60)
                        .rem_euclid(1440);
                let (h, m) = (local / 60, local % 60);
                let days = match k % 4 {
                    0 => "* * *".to_string(),
                    1 => "* * 1-5".to_string(),
                    2 => format!("* * {}", k % 7),
                    _ => format!("{} * *", k % 28 + 1),
                };
                vec![
                    ("startTime", format!("{prefix}{m} {h} {days}")),
                    ("duration", DURATIONS[k % DURATIONS.len()].into()),
                    ("nodeSelector", selector(k)),
                ]
            }
        };
        windows.push((name, data));
    }
    let client = client.clone();
    futures::stream::iter(windows)
        .map(|(name, data)| {
            let client = client.clone();
            async move {
                let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
                fleet::put_window(&client, NAMESPACE, MANAGER, &name, &data).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}
