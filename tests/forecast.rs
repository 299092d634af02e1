//! The forecast on the real API server: kumaco records how long a maintenance
//! took and how long its node took to come back, observes both in its histograms,
//! forecasts from them what `kumaco plan --forecast` forecasts against the same cluster,
//! and a restarted kumaco exports the same forecast (nothing is kept in memory only).

use std::process::Command;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use testkit::ApiServer;
use testkit::cluster::Cluster;
use testkit::kumaco::{KumacoProcess, metric};
use testkit::nodes::{condition, wait_for_condition};
use testkit::time::poll_showing;

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
const REBOOT: &str = "kured.dev/RebootRequired";
const IN_PROGRESS: &str = "MaintenanceInProgress";
const POLICY: [&str; 3] = [
    "--in-progress",
    "--require-condition=kured.dev/RebootRequired",
    "--max-in-progress=1",
];

/// Waits for the node's `MaintenanceInProgress` to satisfy `done`; its message then.
async fn wait_in_progress(
    c: &Cluster,
    node: &str,
    what: &str,
    done: impl Fn(&str, &str) -> bool,
) -> String {
    let found = wait_for_condition(
        &c.client,
        node,
        IN_PROGRESS,
        Duration::from_secs(30),
        |cond| cond.is_some_and(|cond| done(&cond.status, cond.message.as_deref().unwrap_or(""))),
    )
    .await
    .unwrap_or_else(|e| panic!("{node}: {what}: {e:#}"));
    condition(&found, IN_PROGRESS)
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// Polls /metrics until a forecast made after `runs_before` forecasts is exported.
async fn next_forecast(kumaco: &KumacoProcess, runs_before: f64) -> String {
    poll_showing("a new forecast", Duration::from_secs(40), || async {
        let text = kumaco.metrics_text().await.expect("GET /metrics");
        if metric(&text, "kumaco_forecast_runs_total", &[]).unwrap() > runs_before {
            Ok(text)
        } else {
            Err(format!("/metrics:\n{text}\nlog:\n{}", kumaco.log_tail(20)))
        }
    })
    .await
}

/// `kumaco TOOL --forecast` against the test's cluster with the test's policy; its
/// standard output.
fn forecast_tool(c: &Cluster, server: &ApiServer, tool: &[&str]) -> String {
    let mut args: Vec<String> = tool.iter().map(|s| s.to_string()).collect();
    args.extend(["--forecast", "--kubeconfig"].map(String::from));
    args.push(server.kubeconfig().display().to_string());
    args.push(format!("--namespace={}", c.ns));
    args.push(format!("--node-selector={}", c.scope.selector()));
    args.extend(POLICY[1..].iter().map(|s| s.to_string()));
    let out = Command::new(KUMACO).args(&args).output().expect("kumaco");
    assert!(
        out.status.success(),
        "kumaco {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn kumaco_records_durations_and_forecasts_as_plan_does_across_a_restart() {
    let server = ApiServer::shared();
    let c = Cluster::new(server, "forecast", KUMACO).await;
    let a = c.node("a", &[("pool", "a")]).await;
    let a2 = c.node("a2", &[("pool", "a")]).await;
    let b1 = c.node("b1", &[("pool", "b")]).await;
    let b2 = c.node("b2", &[("pool", "b")]).await;
    for node in [&a, &a2, &b1, &b2] {
        c.set(node, REBOOT, "True").await;
    }
    c.put_active_window("now", "pool=a").await;
    // Pool b's window opens in an hour: nothing changes for it during the test, so every
    // forecast taken during it must give the same times.
    let later = Timestamp::from_second(Timestamp::now().as_second() / 60 * 60 + 3600).unwrap();
    c.put_one_shot("later", later, "30m", "pool=b").await;

    let mut args = POLICY.to_vec();
    args.push("--forecast-interval=10s");
    let mut kumaco = c.kumaco(&args).await;

    // Before any record: no forecast, and the gauges say why.
    let text = next_forecast(&kumaco, 0.0).await;
    assert_eq!(
        metric(
            &text,
            "kumaco_forecast_duration_samples",
            &[("kind", "maintenance")]
        )
        .unwrap(),
        0.0
    );
    assert_eq!(
        metric(&text, "kumaco_forecast_nodes_remaining", &[]).unwrap(),
        0.0
    );

    // a's maintenance: started, then its reporter clears the requirement.
    wait_in_progress(&c, &a, "started", |s, _| s == "True").await;
    // A maintenance longer than the forecast's error (below): a forecast starting b1 and b2
    // together, as if without --max-in-progress, ends a whole maintenance early and fails.
    tokio::time::sleep(Duration::from_secs(5)).await;
    c.set(&a, REBOOT, "False").await;
    let message = wait_in_progress(&c, &a, "completed and recovered", |s, m| {
        s == "False" && m.contains("completed after") && m.contains("recovered after")
    })
    .await;
    let took = kumaco::in_progress::recorded_duration(&message).expect("a recorded duration");
    assert!(took >= SignedDuration::from_secs(5), "{message}");
    // To the millisecond, from the start the True message recorded and the end carries on.
    assert!(
        kumaco::in_progress::recorded_start(&message).is_some(),
        "{message}"
    );
    // Never unavailable: back the moment it ended.
    assert!(message.contains("recovered after 0s"), "{message}");
    // a2's, longer: two records that differ, which the expected completion draws from.
    wait_in_progress(&c, &a2, "started", |s, _| s == "True").await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    c.set(&a2, REBOOT, "False").await;
    let message = wait_in_progress(&c, &a2, "completed", |s, m| {
        s == "False" && m.contains("recovered after")
    })
    .await;
    let took2 = kumaco::in_progress::recorded_duration(&message).expect("a recorded duration");
    assert!(took2 > took, "{message}");

    // Recorded once each, observed once each, and learned by a later forecast: the one
    // running now may have taken its nodes from a pass that had not yet seen a2's record
    // (a forecast starts in a pass, from the pass's view, and is exported later), and
    // forecasts start only in passes (one at least every 30 s when nothing changes). The
    // samples gauge is set last, so the gauges read with it are that forecast's.
    let text = poll_showing(
        "a forecast that learned both records",
        Duration::from_secs(80),
        || async {
            let text = kumaco.metrics_text().await.expect("GET /metrics");
            let learned = metric(
                &text,
                "kumaco_forecast_duration_samples",
                &[("kind", "maintenance")],
            )
            .map_err(|e| format!("{e:#}"))?;
            if learned == 2.0 {
                Ok(text)
            } else {
                Err(format!(
                    "{learned} samples learned; log:\n{}",
                    kumaco.log_tail(20)
                ))
            }
        },
    )
    .await;
    assert_eq!(
        metric(&text, "kumaco_maintenance_duration_seconds_count", &[]).unwrap(),
        2.0
    );
    assert_eq!(
        metric(&text, "kumaco_recovery_duration_seconds_count", &[]).unwrap(),
        2.0
    );
    assert_eq!(
        metric(
            &text,
            "kumaco_forecast_assumed_duration_seconds",
            &[("kind", "maintenance"), ("quantile", "0.5")]
        )
        .unwrap(),
        took.as_secs_f64()
    );
    assert_eq!(
        metric(&text, "kumaco_forecast_nodes_remaining", &[]).unwrap(),
        2.0
    );
    // b1 then b2, one at a time, each as long as a's took (the lower of two records is
    // their median) and back at once.
    let completion = metric(
        &text,
        "kumaco_forecast_completion_timestamp_seconds",
        &[("durations", "median")],
    )
    .unwrap();
    let expected = later.as_second() as f64 + 2.0 * took.as_secs_f64();
    // Whole seconds in the gauge: less than one off, the records (to the millisecond)
    // taken as they are. A forecast without the ceiling (b1 and b2 at once) ends after
    // one maintenance: `took` off, at least five seconds.
    assert!(
        (completion - expected).abs() < 1.0,
        "{completion} != {expected}"
    );
    // Expected: b1 and b2 each draw a's or a2's duration, over 15 runs.
    let drawn = metric(
        &text,
        "kumaco_forecast_completion_timestamp_seconds",
        &[("durations", "expected")],
    )
    .unwrap();
    let longest = later.as_second() as f64 + 2.0 * took2.as_secs_f64();
    assert!(
        drawn >= completion - 1.0 && drawn <= longest + 1.0,
        "{drawn} not in [{completion}, {longest}]"
    );

    // The tool, reading the same cluster, forecasts the same.
    let plan: Value =
        serde_json::from_str(&forecast_tool(&c, server, &["plan", "-o", "json"])).unwrap();
    let plan_completion: Timestamp = plan["rollout"]["median"]["completion"]
        .as_str()
        .expect("a completion")
        .parse()
        .unwrap();
    assert_eq!(plan_completion.as_second() as f64, completion, "{plan}");
    let plan_expected: Timestamp = plan["rollout"]["expected"]["completion"]
        .as_str()
        .expect("an expected completion")
        .parse()
        .unwrap();
    assert_eq!(plan_expected.as_second() as f64, drawn, "{plan}");
    assert_eq!(plan["rollout"]["expected"]["runs"], 15, "{plan}");
    assert_eq!(plan["nodes"].as_array().unwrap().len(), 2, "{plan}");
    assert_eq!(plan["durations"]["maintenance"]["samples"], 2);

    // kumaco status: each node's expected start, and the rollout's end.
    let status = forecast_tool(&c, server, &["status"]);
    let at = |t: f64| {
        kumaco::tools::format_time(
            Timestamp::from_second(t as i64).unwrap(),
            &jiff::tz::TimeZone::UTC,
        )
    };
    let b1_row = status
        .lines()
        .find(|l| l.starts_with(&b1))
        .expect("b1's row");
    assert!(
        b1_row.ends_with(&format!("starts {}", at(later.as_second() as f64))),
        "{status}"
    );
    assert!(
        status.contains(&format!(
            "rollout at the median durations: done by {}",
            at(completion)
        )),
        "{status}"
    );
    assert!(
        status.contains(&format!("rollout expected: done by {}", at(drawn))),
        "{status}"
    );

    // A new process knows only what the cluster shows: the same forecast.
    kumaco.terminate(Duration::from_secs(10)).await.unwrap();
    let restarted = c.kumaco(&args).await;
    let text = next_forecast(&restarted, 0.0).await;
    assert_eq!(
        metric(
            &text,
            "kumaco_forecast_completion_timestamp_seconds",
            &[("durations", "median")]
        )
        .unwrap(),
        completion
    );
    assert_eq!(
        metric(
            &text,
            "kumaco_forecast_completion_timestamp_seconds",
            &[("durations", "expected")]
        )
        .unwrap(),
        drawn,
        "the same draws"
    );
    assert_eq!(
        metric(&text, "kumaco_forecast_nodes_remaining", &[]).unwrap(),
        2.0
    );
    // The histograms count what this process wrote: nothing yet.
    assert_eq!(
        metric(&text, "kumaco_maintenance_duration_seconds_count", &[]).unwrap(),
        0.0
    );
}
