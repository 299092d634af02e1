//! The per-window and per-condition metrics on a live kumaco against the real API server,
//! and the names the Grafana dashboard (`charts/kumaco/files/dashboard.json`) and the
//! alert rules (`charts/kumaco/files/prometheus-rules.yaml`) query: every one must be a
//! series kumaco really exports, or a panel stays empty and an alert never fires.

use std::collections::BTreeSet;
use std::time::Duration;

use testkit::ApiServer;
use testkit::cluster::Cluster;
use testkit::files::read_repo;
use testkit::kumaco::{KumacoProcess, metric};
use testkit::receiver::{Answer, Receiver};
use testkit::time::poll_showing;

const REBOOT: &str = "kured.dev/RebootRequired";
/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

/// Sample names in a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// The `kumaco_*` metric names a PromQL expression reads (outside string literals).
fn metric_names(expr: &str) -> Vec<String> {
    let code: String = expr.split('"').step_by(2).collect::<Vec<_>>().join("\"\"");
    let mut names = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("kumaco_") {
        let starts_word = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
        let name: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        rest = &rest[i + name.len()..];
        if starts_word {
            names.push(name);
        }
    }
    names
}

/// Every PromQL expression of the dashboard (panel targets and template variables).
fn dashboard_exprs() -> Vec<String> {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read_repo("charts/kumaco/files/dashboard.json"))
            .expect("dashboard JSON");
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        for t in targets {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
    {
        if let Some(q) = var["definition"].as_str() {
            exprs.push(q.to_string());
        }
    }
    exprs
}

fn rule_exprs() -> Vec<String> {
    let rules: serde_json::Value =
        serde_saphyr::from_str(&read_repo("charts/kumaco/files/prometheus-rules.yaml")).unwrap();
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .map(|r| r["expr"].as_str().unwrap().to_string())
        .collect()
}

/// Polls kumaco's /metrics until `done` holds for it, or fails with the last text.
async fn metrics_until(kumaco: &KumacoProcess, what: &str, done: impl Fn(&str) -> bool) -> String {
    poll_showing(what, Duration::from_secs(30), || async {
        let text = kumaco.metrics_text().await.expect("GET /metrics");
        if done(&text) {
            Ok(text)
        } else {
            Err(format!("/metrics:\n{text}\nlog:\n{}", kumaco.log_tail(30)))
        }
    })
    .await
}

#[tokio::test]
async fn the_dashboard_and_the_alerts_query_metrics_kumaco_exports() {
    let server = ApiServer::shared();
    let c = Cluster::new(server, "dashboard", KUMACO).await;
    let a = c.node("a", &[("pool", "a")]).await;
    let b = c.node("b", &[("pool", "a")]).await;
    for node in [&a, &b] {
        c.set(node, REBOOT, "True").await;
    }
    c.put_active_window("open", "pool=a").await;
    c.put_active_window("empty", "pool=none").await;
    // Every key present and well shaped (so an admission policy on this server lets it
    // in), but the selector does not parse: kumaco refuses it.
    c.put_window(
        "broken",
        &[
            ("startTime", "0 2 * * *"),
            ("duration", "1h"),
            ("nodeSelector", "pool in (a"),
        ],
    )
    .await;

    // Starts about 30 minutes from now, every hour: inactive throughout the test.
    let minute = (k8s_openapi::jiff::Timestamp::now().as_second() / 60 + 30) % 60;
    c.put_window(
        "hourly",
        &[
            ("startTime", &format!("{minute} * * * *")),
            ("duration", "1m"),
            ("nodeSelector", "pool=a"),
        ],
    )
    .await;

    // A notification sink: a sink's series exist from its start, and only with one.
    let receiver = Receiver::start(Answer::Status(202)).await.unwrap();
    let sinks = server.dir().join("dashboard-sinks.yaml");
    std::fs::write(
        &sinks,
        format!(
            "sinks:\n  - name: events\n    type: cloudevents\n    url: {}/events\n",
            receiver.url()
        ),
    )
    .unwrap();
    let kumaco = c
        .kumaco(&[
            "--in-progress",
            "--require-condition=kured.dev/RebootRequired",
            "--max-in-progress=1",
            // A group per pool: the per-group series the dashboard reads exist.
            "--max-in-progress-per=pool=1",
            &format!("--notify-config={}", sinks.display()),
        ])
        .await;

    let window = |name: &'static str| [("window_namespace", c.ns.as_str()), ("window", name)];
    let waiting = [
        ("condition", "MaintenanceInProgress"),
        ("status", "False"),
        ("reason", "WaitingForSlot"),
    ];
    // One node starts, the other waits for the slot.
    let text = metrics_until(&kumaco, "one node in progress, one waiting", |t| {
        metric(t, "kumaco_nodes_in_progress", &[]).ok() == Some(1.0)
            && metric(t, "kumaco_nodes_by_condition", &waiting).ok() == Some(1.0)
    })
    .await;
    let now = k8s_openapi::jiff::Timestamp::now().as_second() as f64;
    let value = |name: &str, labels: &[(&str, &str)]| metric(&text, name, labels).unwrap();
    assert_eq!(
        value("kumaco_window_active", &window("open")),
        1.0,
        "{text}"
    );
    assert_eq!(value("kumaco_window_selected_nodes", &window("open")), 2.0);
    assert_eq!(value("kumaco_window_valid", &window("open")), 1.0);
    assert_eq!(value("kumaco_window_active", &window("empty")), 1.0);
    assert_eq!(value("kumaco_window_selected_nodes", &window("empty")), 0.0);
    assert_eq!(value("kumaco_window_valid", &window("broken")), 0.0);
    assert_eq!(value("kumaco_window_active", &window("broken")), 0.0);
    assert_eq!(value("kumaco_window_active", &window("hourly")), 0.0);
    assert_eq!(
        value("kumaco_window_selected_nodes", &window("hourly")),
        0.0,
        "selected nodes are counted while a window is active"
    );
    let next = value(
        "kumaco_window_next_start_timestamp_seconds",
        &window("hourly"),
    );
    assert!(
        now + 20.0 * 60.0 < next && next <= now + 31.0 * 60.0 && next % 60.0 == 0.0,
        "hourly's next start {next}, now {now}"
    );
    let next_start_series = |name: &str| {
        format!(
            "kumaco_window_next_start_timestamp_seconds{{window_namespace=\"{}\",window=\"{name}\"}}",
            c.ns
        )
    };
    assert!(text.contains(&next_start_series("hourly")), "{text}");
    for name in ["open", "empty", "broken"] {
        assert!(
            !text.contains(&next_start_series(name)),
            "one-shot windows that started never start again, and a broken one never does:\n{text}"
        );
    }
    assert_eq!(value("kumaco_in_progress_slots", &[]), 1.0);
    for gauge in [
        "kumaco_oldest_in_progress_timestamp_seconds",
        "kumaco_oldest_waiting_timestamp_seconds",
    ] {
        let t = value(gauge, &[]);
        assert!(now - 120.0 < t && t <= now, "{gauge} = {t}, now {now}");
    }
    assert_eq!(
        value(
            "kumaco_nodes_by_condition",
            &[
                ("condition", "kured.dev/UnderMaintenance"),
                ("status", "True"),
                ("reason", "MaintenanceWindow"),
            ],
        ),
        2.0
    );

    // What the dashboard and the alerts read.
    let names = exported(&text);
    let mut queried: BTreeSet<String> = BTreeSet::new();
    for expr in dashboard_exprs().iter().chain(&rule_exprs()) {
        queried.extend(metric_names(expr));
    }
    assert!(queried.len() > 15, "{queried:?}");
    let missing: Vec<&String> = queried.iter().filter(|n| !names.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "queried by the dashboard or the alerts, not exported by kumaco: {missing:?}\n\
         exported: {names:?}"
    );

    // A deleted window's series go with it.
    c.delete_window("empty").await;
    let text = metrics_until(&kumaco, "the deleted window's series removed", |t| {
        !t.contains("window=\"empty\"")
    })
    .await;
    assert!(text.contains("window=\"open\""), "{text}");
}

#[test]
fn metric_names_are_read_from_promql() {
    assert_eq!(
        metric_names(
            "histogram_quantile(0.9, sum by (le) (rate(kumaco_a_bucket{x=\"kumaco_no\"}[5m]))) \
             / kumaco_b and not_kumaco_c"
        ),
        ["kumaco_a_bucket", "kumaco_b"]
    );
}
