//! The alerts gate with the real kumaco binary against the real API server, a real
//! Alertmanager (alerts posted through its API v2) and a real Prometheus (scraping an
//! endpoint the test serves and changes):
//!
//! - a firing alert naming no node holds every start, and the nodes say which alert; one
//!   naming a node holds that node only while another starts; a restarted kumaco holds as
//!   the one before it did, writing nothing; a maintenance in progress goes on;
//! - an alert a person silenced lets the start happen; one muted only by kumaco's own
//!   maintenance silence (the tail after a node's maintenance) still holds that node;
//! - Alertmanager killed: every start held (`Blocked`, naming its URL), the gate's
//!   metrics say so; with `--alerts-unreachable=allow` maintenance goes on;
//! - a `--block-query` with series holds (every start, or the node a series names), an
//!   empty one lets starts happen; a query Prometheus refuses stops kumaco at its start;
//! - the queries docs/kured.md gives for kured v1's alert flags return, on a real
//!   Prometheus, the alerts kured v1 blocks on.
//!
//! Each test has its own namespace, nodes, Alertmanager or Prometheus. Waits poll with
//! deadlines; the sleeps are the scenario (the observation period of a "nothing starts"
//! check).

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::api::Api;
use serde_json::json;

use testkit::ApiServer;
use testkit::alertmanager::Alertmanager;
use testkit::cluster::Cluster;
use testkit::faultproxy::{Fault, FaultProxy};
use testkit::history::History;
use testkit::kumaco::{KumacoProcess, metric};
use testkit::nodes::{condition, wait_for_condition, wait_for_status};
use testkit::prometheus::{Prometheus, Target};
use testkit::time::poll_showing;

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
const REBOOT: &str = "kured.dev/RebootRequired";
const MIP: &str = "MaintenanceInProgress";
/// How soon kumaco must react: a read (every second here) and a pass, on a loaded
/// 2-core machine.
const PROMPT: Duration = Duration::from_secs(15);
/// How long a "nothing starts" check watches.
const STAYS: Duration = Duration::from_secs(4);

fn base_flags() -> Vec<String> {
    vec![
        "--in-progress".into(),
        format!("--require-condition={REBOOT}"),
        "--max-in-progress=2".into(),
        "--block-alerts-interval=1s".into(),
    ]
}

fn alertmanager_flags(am: &Alertmanager) -> Vec<String> {
    alertmanager_flags_to(&am.url())
}

/// The flags of the gate with the Alertmanager at `url`.
fn alertmanager_flags_to(url: &str) -> Vec<String> {
    let mut flags = base_flags();
    flags.extend([
        format!("--alertmanager-url={url}"),
        "--block-alerts".into(),
        "--silence-lease=20s".into(),
        // Each test's Alertmanager has just started, and is the one source of alerts.
        "--block-alerts-warm-up=0s".into(),
    ]);
    flags
}

async fn kumaco(c: &Cluster, flags: &[String]) -> KumacoProcess {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    c.kumaco(&flags).await
}

/// The node needs a reboot since `ago` (the order among nodes).
async fn needs_reboot(c: &Cluster, node: &str, ago: i64) {
    c.needs_reboot_since(node, Timestamp::now() - SignedDuration::from_secs(ago))
        .await;
}

/// The node's `MaintenanceInProgress` now (the default when it has none).
async fn mip(c: &Cluster, node: &str) -> NodeCondition {
    let node = Api::<Node>::all(c.client.clone())
        .get(node)
        .await
        .unwrap_or_else(|e| panic!("reading node {node}: {e}"));
    condition(&node, MIP).cloned().unwrap_or_default()
}

/// Waits until the node's `MaintenanceInProgress` is `status` (with `reason`, if given).
async fn wait_mip(c: &Cluster, node: &str, status: &str, reason: Option<&str>) -> NodeCondition {
    wait_mip_within(c, node, status, reason, PROMPT).await
}

/// Waits until the node waits with `AlertFiring` and this message.
async fn wait_message(c: &Cluster, node: &str, expected: &str) {
    wait_for_condition(&c.client, node, MIP, PROMPT, |cond| {
        cond.is_some_and(|cond| {
            cond.reason.as_deref() == Some("AlertFiring")
                && cond.message.as_deref() == Some(expected)
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{node}: AlertFiring {expected:?}: {e:#}"));
}

/// Checks for [`STAYS`] that `node` does not start.
async fn stays_waiting(c: &Cluster, node: &str) {
    let end = std::time::Instant::now() + STAYS;
    while std::time::Instant::now() < end {
        let cond = mip(c, node).await;
        assert_ne!(cond.status, "True", "{node} started: {cond:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls /metrics until `name{labels}` is `value`.
async fn wait_metric(k: &KumacoProcess, name: &str, labels: &[(&str, &str)], value: f64) {
    wait_metric_where(k, name, labels, &format!("== {value}"), |v| v == value).await
}

/// Polls /metrics until `name{labels}` is at least `value`.
async fn wait_metric_at_least(k: &KumacoProcess, name: &str, labels: &[(&str, &str)], value: f64) {
    wait_metric_where(k, name, labels, &format!(">= {value}"), |v| v >= value).await
}

/// Polls /metrics until `name{labels}` is there and `ok`.
async fn wait_metric_where(
    k: &KumacoProcess,
    name: &str,
    labels: &[(&str, &str)],
    what: &str,
    ok: impl Fn(f64) -> bool,
) {
    poll_showing(&format!("{name}{labels:?} {what}"), PROMPT, || async {
        let text = k.metrics_text().await.map_err(|e| e.to_string())?;
        let value = metric(&text, name, labels).map_err(|e| format!("{e:#}\n{text}"))?;
        if ok(value) {
            Ok(())
        } else {
            Err(format!("{text}\nlog:\n{}", k.log_tail(20)))
        }
    })
    .await
}

fn message(c: &NodeCondition) -> &str {
    c.message.as_deref().unwrap_or_default()
}

#[tokio::test]
async fn an_alert_naming_no_node_holds_every_start_and_one_naming_a_node_holds_that_node() {
    let am = Alertmanager::start().await.expect("alertmanager");
    // kumaco reads Alertmanager through a proxy that can make it slow.
    let upstream = am.url().trim_start_matches("http://").parse().unwrap();
    let proxy = FaultProxy::start(upstream).unwrap();
    let c = Cluster::new(ApiServer::shared(), "alert-gate", KUMACO).await;
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    c.put_active_window("now", "").await;
    let flags = alertmanager_flags_to(&format!("http://{}", proxy.addr()));
    let mut k = kumaco(&c, &flags).await;

    // Read, then the next pass: no start.
    let api_down = [("alertname", "KubeAPIDown"), ("severity", "critical")];
    am.post_alert(&api_down).await.unwrap();
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "alerts")], 1.0).await;
    needs_reboot(&c, &a, 60).await;
    needs_reboot(&c, &b, 30).await;
    for node in [&a, &b] {
        let held = wait_mip(&c, node, "False", Some("AlertFiring")).await;
        assert_eq!(
            message(&held),
            "alert KubeAPIDown is firing naming no node in scope"
        );
    }
    stays_waiting(&c, &a).await;

    // A restarted kumaco holds from its first pass, as the one before did: no write,
    // though its first read of Alertmanager takes longer than its lists.
    let before = mip(&c, &a).await;
    k.terminate(Duration::from_secs(10)).await.unwrap();
    proxy.set(Fault::Latency(Duration::from_millis(1500)));
    let k = kumaco(&c, &flags).await;
    stays_waiting(&c, &a).await;
    assert_eq!(
        mip(&c, &a).await,
        before,
        "the restart rewrote the condition"
    );
    proxy.set(Fault::None);

    // One alert names b: a starts, b waits for it.
    let b_down = [("alertname", "KubeNodeNotReady"), ("node", b.as_str())];
    am.post_alert(&b_down).await.unwrap();
    am.resolve_alert(&api_down).await.unwrap();
    wait_mip(&c, &a, "True", None).await;
    // The node's message follows the alert that holds it now.
    wait_message(&c, &b, "alert KubeNodeNotReady is firing for this node").await;
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "alerts")], 0.0).await;
    stays_waiting(&c, &b).await;

    // An alert on every start does not end a maintenance in progress.
    am.post_alert(&api_down).await.unwrap();
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "alerts")], 1.0).await;
    let running = mip(&c, &a).await;
    assert_eq!(running.status, "True");
    tokio::time::sleep(STAYS).await;
    assert_eq!(
        mip(&c, &a).await,
        running,
        "the gate touched a maintenance in progress"
    );

    // b's own alert gone, the other still there: b waits for the one on every start.
    am.resolve_alert(&b_down).await.unwrap();
    am.resolve_alert(&api_down).await.unwrap();
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "alerts")], 0.0).await;
    wait_mip(&c, &b, "True", None).await;
    let text = k.metrics_text().await.unwrap();
    assert!(
        metric(
            &text,
            "kumaco_gate_reads_total",
            &[("gate", "alerts"), ("result", "ok")]
        )
        .unwrap()
            >= 2.0,
        "{text}"
    );
}

#[tokio::test]
async fn a_persons_silence_lets_the_start_happen_and_kumacos_own_does_not() {
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-silences", KUMACO).await;
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let mut flags = alertmanager_flags(&am);
    flags.push("--silence-tail=10m".into());
    let k = kumaco(&c, &flags).await;
    let by = format!("kumaco-{}", c.scope.value());

    // A maintenance: kumaco silences the node; its alert fires meanwhile.
    needs_reboot(&c, &a, 60).await;
    wait_mip(&c, &a, "True", None).await;
    let not_ready = [("alertname", "KubeNodeNotReady"), ("node", a.as_str())];
    am.post_alert(&not_ready).await.unwrap();
    poll_showing("the alert silenced by kumaco", PROMPT, || async {
        let alerts = am.alerts().await.map_err(|e| e.to_string())?;
        let silences = am.live_silences(&by).await.map_err(|e| e.to_string())?;
        let alert = alerts.iter().find(|x| x["labels"]["node"] == a.as_str());
        let ids = alert.and_then(|x| x["status"]["silencedBy"].as_array());
        match (ids, &silences[..]) {
            (Some(ids), [s]) if ids.contains(&s["id"]) => Ok(()),
            _ => Err(format!("{alerts:#?}\n{silences:#?}")),
        }
    })
    .await;

    // Read by kumaco since (two reads: one may have begun before the silence).
    let reads = &[("gate", "alerts"), ("result", "ok")];
    let seen = metric(
        &k.metrics_text().await.unwrap(),
        "kumaco_gate_reads_total",
        reads,
    )
    .unwrap();
    wait_metric_at_least(&k, "kumaco_gate_reads_total", reads, seen + 2.0).await;

    // It ends, and the node needs maintenance again while the tail's silence still
    // mutes the alert: muted only by kumaco's own silence, it holds the node.
    c.set(&a, REBOOT, "False").await;
    wait_mip(&c, &a, "False", Some("MaintenanceCompleted")).await;
    c.set(&a, REBOOT, "True").await;
    wait_message(
        &c,
        &a,
        "alert KubeNodeNotReady is firing for this node (silenced only by kumaco's own \
         maintenance silence)",
    )
    .await;
    // (Waiting to start, the node keeps no tail: kumaco expires its silence, and the
    // alert, no longer silenced at all, holds it as before.)
    stays_waiting(&c, &a).await;

    // A person silences it: the start happens.
    let now = Timestamp::now();
    am.post_silence(&json!({
        "matchers": [
            {"name": "alertname", "value": "KubeNodeNotReady", "isRegex": false, "isEqual": true},
            {"name": "node", "value": a, "isRegex": false, "isEqual": true}
        ],
        "startsAt": now.to_string(),
        "endsAt": (now + SignedDuration::from_hours(1)).to_string(),
        "createdBy": "alice", "comment": "known, being fixed"
    }))
    .await
    .unwrap();
    wait_mip(&c, &a, "True", None).await;
}

#[tokio::test]
async fn alertmanager_down_holds_every_start_and_allow_goes_on_without_it() {
    let mut am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-down", KUMACO).await;
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let flags = alertmanager_flags(&am);
    let mut k = kumaco(&c, &flags).await;
    wait_metric_at_least(
        &k,
        "kumaco_gate_reads_total",
        &[("gate", "alerts"), ("result", "ok")],
        1.0,
    )
    .await;

    am.kill();
    // Three intervals without a good reading.
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "alerts")], 1.0).await;
    let text = k.metrics_text().await.unwrap();
    assert!(
        metric(
            &text,
            "kumaco_gate_reads_total",
            &[("gate", "alerts"), ("result", "unreachable")]
        )
        .unwrap()
            >= 3.0,
        "{text}"
    );
    needs_reboot(&c, &a, 60).await;
    let blocked = wait_mip(&c, &a, "False", Some("GateUnavailable")).await;
    let m = message(&blocked);
    assert!(
        m.starts_with(
            "the alerts of Alertmanager cannot be read (unreachable), so no maintenance \
             starts: "
        ) && m.contains(&am.url()),
        "{m}"
    );
    stays_waiting(&c, &a).await;
    let unavailable = [("gate", "alerts"), ("cause", "unreachable")];
    wait_metric(&k, "kumaco_gate_unavailable", &unavailable, 1.0).await;

    // Allowed to go on without the gate: it starts, Alertmanager still down (and never
    // read by this process).
    k.terminate(Duration::from_secs(10)).await.unwrap();
    let mut allow = flags.clone();
    allow.push("--alerts-unreachable=allow".into());
    let k = kumaco(&c, &allow).await;
    wait_mip(&c, &a, "True", None).await;
    let text = k.metrics_text().await.unwrap();
    assert_eq!(
        metric(&text, "kumaco_gate_holding", &[("gate", "alerts")]).unwrap(),
        0.0,
        "{text}"
    );
}

/// `gate_blocked` as the target serves it: `1` for every start, `1` with a node label
/// for that node, `0` for none.
fn gate_metric(node: Option<&str>, value: u8) -> String {
    let labels = node
        .map(|n| format!("{{node=\"{n}\"}}"))
        .unwrap_or_default();
    format!("# TYPE gate_blocked gauge\ngate_blocked{labels} {value}\n")
}

#[tokio::test]
async fn a_query_with_series_holds_and_an_empty_one_lets_starts_happen() {
    let target = Target::start(&gate_metric(None, 1)).await.unwrap();
    let prometheus = Prometheus::start(&[&target]).await.expect("prometheus");
    let query = "gate_blocked == 1";
    poll_showing(
        "Prometheus scraped the target",
        Duration::from_secs(60),
        || async {
            match prometheus.query(query).await {
                Ok(series) if series.len() == 1 => Ok(()),
                other => Err(format!("{other:?}\n{}", prometheus.log_tail())),
            }
        },
    )
    .await;
    let c = Cluster::new(ApiServer::shared(), "query-gate", KUMACO).await;
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    c.put_active_window("now", "").await;
    let mut flags = base_flags();
    flags.extend([
        format!("--prometheus-url={}", prometheus.url()),
        format!("--block-query={query}"),
    ]);
    let k = kumaco(&c, &flags).await;
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "queries")], 1.0).await;
    needs_reboot(&c, &a, 60).await;
    needs_reboot(&c, &b, 30).await;
    let held = wait_mip(&c, &a, "False", Some("AlertFiring")).await;
    let m = message(&held);
    assert!(
        m.starts_with(
            "--block-query 'gate_blocked == 1' returns a series naming no node in scope: gate_blocked{"
        ) && m.contains("job=\"gate\""),
        "{m}"
    );
    stays_waiting(&c, &b).await;

    // The series names b: a starts.
    target.set(&gate_metric(Some(&b), 1));
    wait_mip(&c, &a, "True", None).await;
    wait_metric(&k, "kumaco_gate_holding", &[("gate", "queries")], 0.0).await;
    stays_waiting(&c, &b).await;

    // Empty: b starts too.
    target.set(&gate_metric(Some(&b), 0));
    wait_mip(&c, &b, "True", None).await;
}

/// A query that cannot work (Prometheus refuses it; its result is not an instant
/// vector) does not stop kumaco: it runs, and no node starts while the query stands,
/// the node naming the query and Prometheus' answer.
#[tokio::test]
async fn a_query_prometheus_refuses_holds_every_start_naming_it() {
    let target = Target::start(&gate_metric(None, 0)).await.unwrap();
    let prometheus = Prometheus::start(&[&target]).await.expect("prometheus");
    for (i, (query, says)) in [
        ("gate_blocked ===", "Prometheus refuses it: "),
        (
            "scalar(gate_blocked)",
            "its result is a scalar, not an instant vector",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let c = Cluster::new(ApiServer::shared(), &format!("query-refused-{i}"), KUMACO).await;
        let a = c.node("a", &[]).await;
        c.put_active_window("now", "").await;
        let mut flags = base_flags();
        flags.extend([
            format!("--prometheus-url={}", prometheus.url()),
            format!("--block-query={query}"),
        ]);
        let mut k = kumaco(&c, &flags).await;
        needs_reboot(&c, &a, 60).await;
        let held = wait_mip(&c, &a, "False", Some("GateUnavailable")).await;
        let m = message(&held);
        assert!(
            m.contains("(invalid), so no maintenance starts: ")
                && m.contains(&format!("--block-query '{query}': {says}")),
            "{query}: {m}"
        );
        stays_waiting(&c, &a).await;
        k.terminate(Duration::from_secs(10)).await.unwrap();
        // Even allowed to go on through an outage: this is no outage.
        flags.push("--alerts-unreachable=allow".into());
        let _k = kumaco(&c, &flags).await;
        stays_waiting(&c, &a).await;
        assert_eq!(mip(&c, &a).await.reason.as_deref(), Some("GateUnavailable"));
    }
}

/// docs/kured.md's table of kured v1's alert flags and their `--block-query`: each query,
/// with R a filter, returns on a real Prometheus the alerts kured v1's rules block on
/// (pending and firing `ALERTS`, its filter matched anywhere in the name), as kumaco's
/// Prometheus client reads them.
#[tokio::test]
async fn the_kured_v1_queries_of_docs_kured_md_return_what_kured_blocks_on() {
    const R: &str = "Watchdog|InfoInhibitor";
    // (alert, firing): pending ones wait out their `for`.
    let alerts = [
        ("Watchdog", true),
        ("MyWatchdogAlert", true),
        ("InfoInhibitor", true),
        ("KubeAPIDown", true),
        ("SlowBurn", false),
    ];
    let rules: String = alerts
        .iter()
        .map(|(name, firing)| {
            let hold = if *firing { "" } else { "\n        for: 1h" };
            format!("      - alert: {name}\n        expr: vector(1){hold}\n")
        })
        .collect();
    let rules = format!("groups:\n  - name: kured\n    interval: 1s\n    rules:\n{rules}");
    let target = Target::start(&gate_metric(None, 0)).await.unwrap();
    let prometheus = Prometheus::start_with_rules(&[&target], Some(&rules))
        .await
        .expect("prometheus");
    poll_showing("the alerts evaluated", Duration::from_secs(60), || async {
        match prometheus.query("ALERTS").await {
            Ok(series) if series.len() == alerts.len() => Ok(()),
            other => Err(format!("{other:?}\n{}", prometheus.log_tail())),
        }
    })
    .await;
    let client = kumaco::prometheus::Prometheus::new(kumaco::http_client::Endpoint {
        urls: vec![prometheus.url()],
        ..Default::default()
    })
    .unwrap();

    let docs = testkit::files::read_repo("docs/kured.md");
    let section = &docs[docs.find("### Alerts").expect("the alerts section")..];
    let rows: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with("| kured v1 | `--block-query` |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(rows.len(), 4, "{rows:?}");
    for row in rows {
        let cells: Vec<&str> = row.split(" | ").collect();
        let flags = cells[0];
        let query = cells[1]
            .split('`')
            .find(|s| s.starts_with('\''))
            .expect("a quoted query")
            .trim_matches('\'')
            .replace("(R)", &format!("({R})"));
        // kured v1's rules: its filter anywhere in the name, inverted by match-only;
        // pending alerts too unless firing-only.
        let filtered = flags.contains("--alert-filter-regexp");
        let names = if flags.contains("--alert-filter-match-only") {
            kumaco::alerts::NameFilter::new(None, Some(R))
        } else {
            kumaco::alerts::NameFilter::new(filtered.then_some(R), None)
        }
        .unwrap();
        let firing_only = flags.contains("--alert-firing-only");
        let mut kured: Vec<&str> = alerts
            .iter()
            .filter(|(name, firing)| names.lets(name) && (*firing || !firing_only))
            .map(|(name, _)| *name)
            .collect();
        kured.sort_unstable();
        let series = client
            .query(&query)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"));
        let mut got: Vec<&str> = series.iter().map(|l| l["alertname"].as_str()).collect();
        got.sort_unstable();
        assert_eq!(got, kured, "{flags}: {query}");
    }
}

/// An HA pair of Alertmanagers, each told of a critical alert (as Prometheus sends every
/// alert to each peer). The first restarts and knows of nothing: the alert, still
/// firing on the second, keeps holding every start. Read alone, a peer that just
/// started is no reading (`--block-alerts-warm-up`): with the second down, the gate
/// holds as for an outage rather than let the start go through.
#[tokio::test]
async fn an_ha_pair_holds_on_what_fires_on_either_and_a_restarted_peer_opens_nothing() {
    let mut first = Alertmanager::start().await.expect("alertmanager");
    let mut second = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-ha", KUMACO).await;
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let critical = [("alertname", "KubeAPIDown"), ("severity", "critical")];
    first.post_alert(&critical).await.unwrap();
    second.post_alert(&critical).await.unwrap();
    let mut flags = base_flags();
    flags.extend([
        format!("--alertmanager-url={}", first.url()),
        format!("--alertmanager-url={}", second.url()),
        "--block-alerts".into(),
        "--silence-lease=20s".into(),
        "--block-alerts-warm-up=20s".into(),
    ]);
    let k = kumaco(&c, &flags).await;
    needs_reboot(&c, &a, 60).await;
    // Both just started: no reading until one of them is old enough.
    wait_mip(&c, &a, "False", Some("GateUnavailable")).await;
    let held = wait_mip_within(
        &c,
        &a,
        "False",
        Some("AlertFiring"),
        Duration::from_secs(40),
    )
    .await;
    assert_eq!(
        message(&held),
        "alert KubeAPIDown is firing naming no node in scope"
    );

    first.restart().await.unwrap();
    // The restarted peer answers and lists nothing; its read counts, the alert holds.
    wait_metric_at_least(
        &k,
        "kumaco_gate_reads_total",
        &[("gate", "alerts"), ("result", "ok")],
        3.0,
    )
    .await;
    let reads = |text: &str| {
        metric(
            text,
            "kumaco_gate_reads_total",
            &[("gate", "alerts"), ("result", "ok")],
        )
        .unwrap()
    };
    let now = reads(&k.metrics_text().await.unwrap());
    wait_metric_at_least(
        &k,
        "kumaco_gate_reads_total",
        &[("gate", "alerts"), ("result", "ok")],
        now + 2.0,
    )
    .await;
    stays_waiting(&c, &a).await;
    assert_eq!(mip(&c, &a).await.reason.as_deref(), Some("AlertFiring"));

    // The old peer gone, the restarted one alone: within three intervals the gate holds
    // for the lack of a reading, never letting the start through.
    second.kill();
    let held = wait_mip(&c, &a, "False", Some("GateUnavailable")).await;
    assert!(
        message(&held).contains(
            "every Alertmanager that answers started less than --block-alerts-warm-up ago"
        ),
        "{}",
        message(&held)
    );
    stays_waiting(&c, &a).await;
    // Warmed up with nothing firing (the alert was never sent to it again): it starts.
    wait_mip_within(&c, &a, "True", None, Duration::from_secs(40)).await;
}

/// One Alertmanager, two clusters. The other cluster's alerts (another `cluster` label)
/// name a node of the same name and no node here: with `--cluster-label`, they hold
/// nothing and the node's silence matches this cluster's alerts only; this cluster's
/// alert about the node holds that node.
#[tokio::test]
async fn a_shared_alertmanager_holds_and_silences_this_clusters_alerts_only() {
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-shared", KUMACO).await;
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    c.put_active_window("now", "").await;
    // The other cluster: an outage naming no node, and a node named as ours.
    am.post_alert(&[("alertname", "KubeAPIDown"), ("cluster", "other")])
        .await
        .unwrap();
    am.post_alert(&[
        ("alertname", "KubeNodeNotReady"),
        ("node", a.as_str()),
        ("cluster", "other"),
    ])
    .await
    .unwrap();
    // This cluster: b's node alert.
    am.post_alert(&[
        ("alertname", "KubeNodeNotReady"),
        ("node", b.as_str()),
        ("cluster", "ours"),
    ])
    .await
    .unwrap();
    let mut flags = alertmanager_flags(&am);
    flags.push("--cluster-label=cluster=ours".to_string());
    let _k = kumaco(&c, &flags).await;
    needs_reboot(&c, &a, 60).await;
    needs_reboot(&c, &b, 30).await;
    // Nothing of the other cluster's holds: a starts; this cluster's alert holds b.
    wait_mip(&c, &a, "True", None).await;
    wait_message(&c, &b, "alert KubeNodeNotReady is firing for this node").await;
    stays_waiting(&c, &b).await;
    // a's silence names this cluster: it mutes none of the other cluster's alerts.
    let created_by = format!("kumaco-{}", c.scope.value());
    let silences = poll_showing("a's silence", PROMPT, || async {
        let live = am
            .live_silences(&created_by)
            .await
            .map_err(|e| e.to_string())?;
        if live.is_empty() {
            Err("none yet".to_string())
        } else {
            Ok(live)
        }
    })
    .await;
    let matchers: Vec<String> = silences[0]["matchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}={}",
                m["name"].as_str().unwrap(),
                m["value"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        matchers,
        ["cluster=ours".to_string(), format!("node={a}")],
        "{silences:?}"
    );
    let alerts = am.alerts().await.unwrap();
    let other_a = alerts
        .iter()
        .find(|x| x["labels"]["cluster"] == "other" && x["labels"]["node"] == a.as_str())
        .expect("the other cluster's alert");
    assert_eq!(
        other_a["status"]["silencedBy"],
        serde_json::json!([]),
        "the other cluster's node was silenced: {other_a}"
    );
}

/// `--alerts-unreachable=allow` goes on through an outage, not through a
/// misconfiguration: every answer 404 (a wrong path prefix) holds every start.
#[tokio::test]
async fn a_wrong_path_holds_even_when_outages_are_allowed() {
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-404", KUMACO).await;
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let mut flags = alertmanager_flags_to(&format!("{}/wrong-prefix", am.url()));
    flags.push("--alerts-unreachable=allow".into());
    let k = kumaco(&c, &flags).await;
    needs_reboot(&c, &a, 60).await;
    let held = wait_mip(&c, &a, "False", Some("GateUnavailable")).await;
    assert!(
        message(&held).starts_with("the alerts of Alertmanager cannot be read (not-found)")
            && message(&held).contains("/wrong-prefix/api/v2/alerts: HTTP 404"),
        "{}",
        message(&held)
    );
    // Every path answers 404, the list and the status alike: the message names the same
    // one at each read, so the node is not rewritten read after read.
    let history = History::start(&c.client, &a, MIP).await;
    stays_waiting(&c, &a).await;
    assert_eq!(
        history.changes(),
        0,
        "{a} rewritten: {:?}",
        history.states()
    );
    wait_metric(
        &k,
        "kumaco_gate_unavailable",
        &[("gate", "alerts"), ("cause", "not-found")],
        1.0,
    )
    .await;
}

/// Waits as [`wait_mip`], for `within`.
async fn wait_mip_within(
    c: &Cluster,
    node: &str,
    status: &str,
    reason: Option<&str>,
    within: Duration,
) -> NodeCondition {
    wait_for_status(&c.client, node, MIP, status, reason, within)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// `--block-alerts-matcher` reaches Alertmanager as the list's filter: an alert that
/// does not match it holds nothing, one that does holds.
#[tokio::test]
async fn only_alerts_matching_the_filter_hold() {
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-filter", KUMACO).await;
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    c.put_active_window("now", "").await;
    am.post_alert(&[("alertname", "DiskFilling"), ("severity", "warning")])
        .await
        .unwrap();
    am.post_alert(&[
        ("alertname", "KubeNodeNotReady"),
        ("severity", "critical"),
        ("node", b.as_str()),
    ])
    .await
    .unwrap();
    let mut flags = alertmanager_flags(&am);
    flags.push("--block-alerts-matcher=severity=\"critical\"".into());
    let _k = kumaco(&c, &flags).await;
    needs_reboot(&c, &a, 60).await;
    needs_reboot(&c, &b, 30).await;
    // The warning naming no node would hold every start; filtered out, it holds none.
    wait_mip(&c, &a, "True", None).await;
    wait_message(&c, &b, "alert KubeNodeNotReady is firing for this node").await;
    stays_waiting(&c, &b).await;
}

/// An alert an inhibition rule mutes holds nothing: Alertmanager's configuration says
/// it matters less while the inhibiting alert fires (and that one is left out here by
/// name, as kube-prometheus' `InfoInhibitor` is).
#[tokio::test]
async fn an_inhibited_alert_does_not_hold() {
    let am = Alertmanager::start_with_inhibit_rules(
        "  - source_matchers: [alertname=\"InfoInhibitor\"]\n    target_matchers: [severity=\"info\"]\n",
    )
    .await
    .expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "alert-gate-inhibited", KUMACO).await;
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    am.post_alert(&[("alertname", "InfoInhibitor"), ("severity", "none")])
        .await
        .unwrap();
    am.post_alert(&[("alertname", "CPUThrottlingHigh"), ("severity", "info")])
        .await
        .unwrap();
    poll_showing("the info alert inhibited", PROMPT, || async {
        let alerts = am.alerts().await.map_err(|e| e.to_string())?;
        let inhibited = alerts.iter().any(|x| {
            x["labels"]["alertname"] == "CPUThrottlingHigh"
                && x["status"]["inhibitedBy"]
                    .as_array()
                    .is_some_and(|by| !by.is_empty())
        });
        if inhibited {
            Ok(())
        } else {
            Err(format!("{alerts:#?}"))
        }
    })
    .await;
    let mut flags = alertmanager_flags(&am);
    flags.push("--block-alerts-ignore=^InfoInhibitor$".into());
    let _k = kumaco(&c, &flags).await;
    needs_reboot(&c, &a, 60).await;
    wait_mip(&c, &a, "True", None).await;
}
