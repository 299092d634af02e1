//! The run's windows: the ones at the start (zones opening and closing every minute, a
//! rack, a blackout), the edits an episode makes, and `kumaco plan`'s answer for them,
//! the checker's reference.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use testkit::chaos::Rng;
use testkit::chaos::plan::{self, Plan, WindowSpec};
use testkit::fleet::{ZONES, put_window};

use crate::{Args, MANAGER, NAMESPACE, PLAN_SPAN};

/// The windows at the start: every minute one zone's window opens as another's closes,
/// the rack window opens and closes, and every 5 minutes a blackout covers part of two
/// zones for 20 s.
pub(crate) fn initial_windows() -> Vec<WindowSpec> {
    let spec = |name: &str, pairs: &[(&str, &str)]| WindowSpec {
        name: name.to_string(),
        data: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let mut windows: Vec<WindowSpec> = ZONES
        .iter()
        .enumerate()
        .map(|(k, zone)| {
            spec(
                &format!("chaos-{zone}"),
                &[
                    ("startTime", &format!("{k}-59/4 * * * *")),
                    ("duration", "3m"),
                    (
                        "nodeSelector",
                        &format!("topology.kubernetes.io/zone={zone}"),
                    ),
                ],
            )
        })
        .collect();
    windows.push(spec(
        "chaos-rack",
        &[
            ("startTime", "* * * * *"),
            ("duration", "30s"),
            ("nodeSelector", "bench.kumaco.dev/rack=r07"),
        ],
    ));
    windows.push(spec(
        "chaos-freeze",
        &[
            ("startTime", "2-59/5 * * * *"),
            ("duration", "20s"),
            ("blackout", "true"),
            (
                "nodeSelector",
                "topology.kubernetes.io/zone in (zone-b,zone-c),bench.kumaco.dev/team=team-3",
            ),
        ],
    ));
    windows
}

/// A window edit: one key of one window toggled between its first value and another.
pub(crate) fn edit(
    rng: &mut Rng,
    windows: &mut [WindowSpec],
    initial: &[WindowSpec],
) -> (usize, String) {
    let i = rng.below(windows.len());
    let (name, base) = (windows[i].name.clone(), &initial[i].data);
    let key = ["duration", "startTime", "nodeSelector"][rng.below(3)];
    let other = match key {
        "duration" => ["2m30s", "45s", "90s"][rng.below(3)].to_string(),
        "startTime" => ["*/2 * * * *", "* * * * *", "1-59/3 * * * *"][rng.below(3)].to_string(),
        _ => format!("{},bench.kumaco.dev/pool!=gpu", base["nodeSelector"]),
    };
    let value = if windows[i].data[key] == base[key] {
        other
    } else {
        base[key].clone()
    };
    windows[i].data.insert(key.to_string(), value.clone());
    (i, format!("{name} {key}={value}"))
}

/// Creates or updates window `w` in the run's namespace.
pub(crate) async fn put(client: &kube::Client, w: &WindowSpec) -> Result<()> {
    let data: Vec<(&str, &str)> = w
        .data
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    put_window(client, NAMESPACE, MANAGER, &w.name, &data).await
}

/// `kumaco plan` for `windows` over `nodes`, from a minute ago for the plan's span.
pub(crate) fn compute_plan(
    args: &Args,
    dir: &Path,
    windows: &[WindowSpec],
    nodes: &[(String, BTreeMap<String, String>)],
) -> Result<Plan> {
    // From a minute back: the plan must cover "now" whatever the planner's rounding.
    let from = Timestamp::now() - SignedDuration::from_secs(60);
    plan::compute(
        &args.kumaco,
        dir,
        NAMESPACE,
        windows,
        nodes,
        from,
        PLAN_SPAN,
    )
}
