//! Silences in a real Alertmanager for the nodes kumaco lets into maintenance, with kumaco
//! on the real API server: created when a node starts, extended as a lease, expired after
//! the tail; adopted by a restarted process and by a new leader (no duplicate, no gap);
//! the chart's example (docs/silences.md) silences both kube-state-metrics' and
//! node-exporter's alerts of the node, one silence per matcher set, and the documented
//! amtool command lists them; an Alertmanager that is down changes nothing about the
//! maintenance, counts as failures, and gets the silences back when it returns.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::files::{read_repo, repo};

use testkit::ApiServer;
use testkit::alertmanager::Alertmanager;
use testkit::cluster::Cluster;
use testkit::kumaco::{KumacoProcess, metric};
use testkit::nodes::{wait_for_condition, wait_for_status};
use testkit::time::{poll_showing, ts};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");
const REBOOT: &str = "kured.dev/RebootRequired";
const IN_PROGRESS: &str = "MaintenanceInProgress";
const WAIT: Duration = Duration::from_secs(40);

fn flags(am: &Alertmanager) -> Vec<String> {
    vec![
        "--in-progress".into(),
        format!("--require-condition={REBOOT}"),
        "--max-in-progress=1".into(),
        format!("--alertmanager-url={}", am.url()),
        "--silence-lease=20s".into(),
        "--silence-tail=5s".into(),
    ]
}

fn created_by(c: &Cluster) -> String {
    format!("kumaco-{}", c.scope.value())
}

fn silences_node(s: &Value, node: &str) -> bool {
    s["matchers"] == json!([{"name": "node", "value": node, "isRegex": false, "isEqual": true}])
}

/// Waits until exactly one live silence of this instance is for `node`; that silence.
async fn one_silence(am: &Alertmanager, by: &str, node: &str) -> Value {
    poll_showing(&format!("one silence for {node}"), WAIT, || async {
        let live = am.live_silences(by).await.map_err(|e| e.to_string())?;
        match &live[..] {
            [s] if silences_node(s, node) => Ok(s.clone()),
            _ => Err(format!("{live:#?}\nalertmanager log:\n{}", am.log_tail())),
        }
    })
    .await
}

async fn wait_in_progress(
    c: &Cluster,
    node: &str,
    status: &str,
) -> k8s_openapi::api::core::v1::NodeCondition {
    wait_for_status(&c.client, node, IN_PROGRESS, status, None, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Polls /metrics until `name{labels}` is there and reaches `at_least`.
async fn wait_metric(k: &KumacoProcess, name: &str, labels: &[(&str, &str)], at_least: f64) {
    poll_showing(&format!("{name}{labels:?} >= {at_least}"), WAIT, || async {
        let text = k.metrics_text().await.map_err(|e| e.to_string())?;
        let value = metric(&text, name, labels).map_err(|e| format!("{e:#}\n{text}"))?;
        if value >= at_least {
            Ok(())
        } else {
            Err(format!("{text}\nlog:\n{}", k.log_tail(20)))
        }
    })
    .await
}

#[tokio::test]
async fn a_silence_is_held_for_the_maintenance_adopted_after_a_restart_and_expired_after_the_tail()
{
    let server = ApiServer::shared();
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(server, "silences", KUMACO).await;
    let by = created_by(&c);
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    // Someone else's silence on the same node: never touched.
    let theirs = am
        .post_silence(&json!({
            "matchers": [{"name": "node", "value": a, "isRegex": false, "isEqual": true}],
            "startsAt": jiff::Timestamp::now().to_string(),
            "endsAt": (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string(),
            "createdBy": "alice", "comment": "mine"
        }))
        .await
        .unwrap();
    let args = flags(&am);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut kumaco = c.kumaco(&args).await;

    c.set(&a, REBOOT, "True").await;
    wait_in_progress(&c, &a, "True").await;
    let first = one_silence(&am, &by, &a).await;
    let id = first["id"].as_str().unwrap().to_string();
    assert!(first["comment"].as_str().unwrap().contains(&a), "{first}");

    // Alertmanager reports an alert of the node silenced by it.
    am.post_alert(&[("alertname", "NodeDown"), ("node", &a)])
        .await
        .unwrap();
    poll_showing("the node's alert silenced", WAIT, || async {
        let alerts = am.alerts().await.map_err(|e| e.to_string())?;
        let silenced = alerts.iter().any(|x| {
            x["labels"]["node"] == a.as_str()
                && x["status"]["silencedBy"]
                    .as_array()
                    .is_some_and(|ids| ids.iter().any(|i| i == id.as_str()))
        });
        if silenced {
            Ok(())
        } else {
            Err(format!("{alerts:#?}"))
        }
    })
    .await;

    // Held as a lease: pushed back before it ends.
    let ends = ts(first["endsAt"].as_str().unwrap());
    poll_showing("the silence extended", WAIT, || async {
        let s = one_silence(&am, &by, &a).await;
        if s["id"] == id.as_str() && ts(s["endsAt"].as_str().unwrap()) > ends {
            Ok(())
        } else {
            Err(format!("{s:#}"))
        }
    })
    .await;

    // A new process adopts it: one silence, the same.
    kumaco.terminate(Duration::from_secs(10)).await.unwrap();
    let restarted = c.kumaco(&args).await;
    wait_metric(
        &restarted,
        "kumaco_silence_requests_total",
        &[("verb", "list"), ("result", "ok")],
        2.0,
    )
    .await;
    let after = one_silence(&am, &by, &a).await;
    assert_eq!(after["id"], id.as_str(), "{after:#}");
    assert_eq!(
        metric(
            &restarted.metrics_text().await.unwrap(),
            "kumaco_silence_requests_total",
            &[("verb", "create")]
        )
        .unwrap(),
        0.0
    );

    // The maintenance ends: kept for the tail, then expired.
    c.set(&a, REBOOT, "False").await;
    let end = wait_in_progress(&c, &a, "False").await;
    let end = end.last_transition_time.unwrap().0;
    poll_showing("the silence expired", WAIT, || async {
        let live = am.live_silences(&by).await.map_err(|e| e.to_string())?;
        if live.is_empty() {
            Ok(())
        } else {
            Err(format!("{live:#?}"))
        }
    })
    .await;
    let all = am.silences().await.unwrap();
    let ours: Vec<&Value> = all
        .iter()
        .filter(|s| s["createdBy"] == by.as_str())
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "one silence in all, never a duplicate: {ours:#?}"
    );
    let expired_at = ts(ours[0]["endsAt"].as_str().unwrap());
    assert!(
        expired_at >= end + jiff::SignedDuration::from_secs(5),
        "expired at {expired_at}, before the tail after {end}"
    );
    let alice = all.iter().find(|s| s["id"] == theirs.as_str()).unwrap();
    assert_eq!(alice["status"]["state"], "active", "{alice:#}");
}

#[tokio::test]
async fn a_new_leader_adopts_the_silence_no_duplicate_no_gap() {
    let server = ApiServer::shared();
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(server, "silences-ha", KUMACO).await;
    let by = created_by(&c);
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    c.set(&a, REBOOT, "True").await;
    let args = flags(&am);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut r1 = c.replica("r1", &args).await;
    let mut r2 = c.replica("r2", &args).await;
    let first_leads = testkit::kumaco::one_leader(&r1, &r2, WAIT).await;
    let first = one_silence(&am, &by, &a).await;
    let (leader, standby) = if first_leads {
        (&mut r1, &mut r2)
    } else {
        (&mut r2, &mut r1)
    };
    assert_eq!(
        metric(
            &standby.process.metrics_text().await.unwrap(),
            "kumaco_silence_requests_total",
            &[]
        )
        .unwrap(),
        0.0,
        "a standby never talks to Alertmanager"
    );
    leader.kill();
    wait_metric(&standby.process, "kumaco_leader", &[], 1.0).await;
    wait_metric(
        &standby.process,
        "kumaco_silence_requests_total",
        &[("verb", "list"), ("result", "ok")],
        1.0,
    )
    .await;
    wait_metric(&standby.process, "kumaco_silences_held", &[], 1.0).await;
    let after = one_silence(&am, &by, &a).await;
    assert_eq!(after["id"], first["id"], "{after:#}");
    let ours = am.silences().await.unwrap();
    let ours: Vec<&Value> = ours
        .iter()
        .filter(|s| s["createdBy"] == by.as_str())
        .collect();
    assert_eq!(ours.len(), 1, "never expired nor duplicated: {ours:#?}");
}

#[tokio::test]
async fn maintenance_goes_on_while_alertmanager_is_down_and_the_silence_follows_its_return() {
    let server = ApiServer::shared();
    let mut am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(server, "silences-down", KUMACO).await;
    let by = created_by(&c);
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let args = flags(&am);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kumaco = c.kumaco(&args).await;
    wait_metric(
        &kumaco,
        "kumaco_silence_requests_total",
        &[("verb", "list"), ("result", "ok")],
        1.0,
    )
    .await;

    const LAST_SUCCESS: &str = "kumaco_silence_last_success_timestamp_seconds";
    wait_metric(&kumaco, LAST_SUCCESS, &[], 1.0).await;

    am.kill();
    c.set(&a, REBOOT, "True").await;
    wait_in_progress(&c, &a, "True").await;
    wait_metric(
        &kumaco,
        "kumaco_silence_requests_total",
        &[("result", "error")],
        1.0,
    )
    .await;
    // The last success before the outage: no round succeeds while Alertmanager is down.
    let down = metric(&kumaco.metrics_text().await.unwrap(), LAST_SUCCESS, &[]).unwrap();

    am.restart().await.unwrap();
    one_silence(&am, &by, &a).await;
    wait_metric(&kumaco, "kumaco_silences_held", &[], 1.0).await;
    // Rounds are at least a second apart, so the first success after the return is
    // strictly later.
    poll_showing("a success after Alertmanager's return", WAIT, || async {
        let text = kumaco.metrics_text().await.map_err(|e| e.to_string())?;
        let now = metric(&text, LAST_SUCCESS, &[]).unwrap();
        if now > down {
            Ok(())
        } else {
            Err(format!(
                "{LAST_SUCCESS} still {now}, as while down ({down})"
            ))
        }
    })
    .await;
}

/// The values example of docs/silences.md, rendered by the chart:
/// the `--silence-*` flags it passes.
fn chart_example_silence_flags() -> Vec<String> {
    let docs = read_repo("docs/silences.md");
    let section = &docs[docs
        .find("# Silences during maintenance")
        .expect("the silences section")..];
    let open = "```yaml\n# values.yaml\n";
    let start = section.find(open).expect("the values example") + "```yaml\n".len();
    let values = &section[start..][..section[start..].find("```").unwrap()];
    let file = std::env::temp_dir().join(format!(
        "kumaco-silences-values-{}.yaml",
        std::process::id()
    ));
    std::fs::write(&file, values).unwrap();
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let out = Command::new(helm)
        .args(["template", "kumaco"])
        .arg(repo().join("charts/kumaco"))
        .args(["--kube-version", "1.37.2", "--show-only"])
        .arg("templates/deployment.yaml")
        .arg("--values")
        .arg(&file)
        .output()
        .expect("running helm template");
    std::fs::remove_file(&file).unwrap();
    assert!(
        out.status.success(),
        "helm template with {values}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deployment: Value =
        serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout)).expect("helm renders YAML");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("container args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| a.starts_with("--silence-"))
        .map(str::to_string)
        .collect()
}

/// The alert with these labels, as Alertmanager reports it now.
fn alert<'a>(alerts: &'a [Value], label: &str, value: &str) -> Option<&'a Value> {
    alerts.iter().find(|x| x["labels"][label] == value)
}

fn silenced_by(alert: Option<&Value>) -> Vec<String> {
    alert
        .and_then(|x| x["status"]["silencedBy"].as_array())
        .map(|ids| {
            ids.iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_chart_example_silences_kube_node_not_ready_and_node_exporter_and_amtool_lists_them() {
    let server = ApiServer::shared();
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(server, "silence-sets", KUMACO).await;
    let by = created_by(&c);
    let a = c.node("a", &[]).await;
    let b = c.node("b", &[]).await;
    c.put_active_window("now", "").await;
    // Someone else's silence: not listed by the amtool command.
    let theirs = am
        .post_silence(&json!({
            "matchers": [{"name": "node", "value": "elsewhere", "isRegex": false, "isEqual": true}],
            "startsAt": jiff::Timestamp::now().to_string(),
            "endsAt": (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).to_string(),
            "createdBy": "alice", "comment": "mine"
        }))
        .await
        .unwrap();
    let chart = chart_example_silence_flags();
    assert!(
        chart.iter().any(|f| f.starts_with("--silence-matchers=")),
        "the example sets no matcher set: {chart:?}"
    );
    let mut args = vec![
        "--in-progress".to_string(),
        format!("--require-condition={REBOOT}"),
        "--max-in-progress=1".into(),
        format!("--alertmanager-url={}", am.url()),
    ];
    args.extend(chart);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _kumaco = c.kumaco(&args).await;

    c.set(&a, REBOOT, "True").await;
    wait_in_progress(&c, &a, "True").await;
    let live = poll_showing("two silences for the node", WAIT, || async {
        let live = am.live_silences(&by).await.map_err(|e| e.to_string())?;
        if live.len() == 2 {
            Ok(live)
        } else {
            Err(format!("{live:#?}"))
        }
    })
    .await;
    let ids: Vec<&str> = live.iter().map(|s| s["id"].as_str().unwrap()).collect();

    // kube-state-metrics' alert names the node in `node`, node-exporter's in `instance`;
    // b is not in maintenance.
    for (name, label, value) in [
        ("KubeNodeNotReady", "node", a.clone()),
        (
            "NodeFilesystemAlmostOutOfSpace",
            "instance",
            format!("{a}:9100"),
        ),
        ("KubeNodeNotReady", "node", b.clone()),
        (
            "NodeFilesystemAlmostOutOfSpace",
            "instance",
            format!("{b}:9100"),
        ),
    ] {
        am.post_alert(&[("alertname", name), (label, &value)])
            .await
            .unwrap();
    }
    poll_showing("a's alerts silenced, one silence each", WAIT, || async {
        let alerts = am.alerts().await.map_err(|e| e.to_string())?;
        let node = silenced_by(alert(&alerts, "node", &a));
        let instance = silenced_by(alert(&alerts, "instance", &format!("{a}:9100")));
        let silenced = |by: &[String]| by.len() == 1 && ids.contains(&by[0].as_str());
        if silenced(&node) && silenced(&instance) && node != instance {
            Ok(())
        } else {
            Err(format!("{alerts:#?}"))
        }
    })
    .await;
    let alerts = am.alerts().await.unwrap();
    for (label, value) in [("node", b.clone()), ("instance", format!("{b}:9100"))] {
        let x = alert(&alerts, label, &value);
        assert!(x.is_some(), "{label}={value} not posted: {alerts:#?}");
        assert_eq!(silenced_by(x), Vec::<String>::new(), "{x:#?}");
    }

    // The documented command, run as written but for the address and the instance.
    let docs = read_repo("docs/silences.md");
    let command = docs
        .lines()
        .find_map(|l| l.strip_prefix("$ amtool silence query "))
        .expect("docs/silences.md shows an amtool silence query");
    let command = command
        .replace("http://alertmanager:9093", &am.url())
        .replace("kumaco/kumaco/kumaco", &by);
    let amtool = testkit::gobuild::amtool().unwrap_or_else(|e| panic!("{e:#}"));
    let out = Command::new(amtool)
        .args(["silence", "query"])
        .args(command.split_whitespace())
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("running amtool");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "amtool silence query {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("amtool silence query {command}:\n{listed}");
    for id in &ids {
        assert!(listed.contains(id), "{id} not listed:\n{listed}");
    }
    assert!(!listed.contains(&theirs), "alice's listed:\n{listed}");
}

/// Basic auth in front of Alertmanager (its web config), the credentials in a file as a
/// mounted Secret gives them: refused while the file holds a wrong password (counted as
/// errors, the maintenance unaffected), accepted once the Secret is rotated, without a
/// restart (the file is read again at every round).
#[tokio::test]
async fn basic_auth_from_a_file_that_is_rotated() {
    let server = ApiServer::shared();
    let am = Alertmanager::start_with_basic_auth("kumaco", "s3cr3t")
        .await
        .expect("alertmanager");
    assert_eq!(am.status_without_credentials().await.unwrap(), 401);
    let c = Cluster::new(server, "silence-auth", KUMACO).await;
    let by = created_by(&c);
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let dir = tempdir(&c);
    let secret = dir.join("basic-auth");
    std::fs::write(&secret, "kumaco:n0t-the-pa55word\n").unwrap();
    let mut args = flags(&am);
    args.push(format!(
        "--alertmanager-basic-auth-file={}",
        secret.display()
    ));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let kumaco = c.kumaco(&args).await;

    c.set(&a, REBOOT, "True").await;
    wait_in_progress(&c, &a, "True").await;
    wait_metric(
        &kumaco,
        "kumaco_silence_requests_total",
        &[("result", "error")],
        1.0,
    )
    .await;
    assert!(am.live_silences(&by).await.unwrap().is_empty());

    std::fs::write(&secret, "kumaco:s3cr3t\n").unwrap();
    let s = one_silence(&am, &by, &a).await;
    assert!(s["comment"].as_str().unwrap().contains(&a), "{s}");
    // The secret is in no log line.
    let log = std::fs::read_to_string(kumaco.log_path()).unwrap();
    assert!(
        !log.contains("s3cr3t") && !log.contains("n0t-the-pa55word"),
        "{log}"
    );
}

fn tempdir(c: &Cluster) -> std::path::PathBuf {
    let dir = std::env::temp_dir()
        .join("kumaco-tests")
        .join(format!("silence-auth-{}", c.scope.value()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `--silence-while-recovering` covers the recovery from this maintenance, not a later
/// outage: the node, NotReady when its maintenance ends, stays silenced past the tail
/// while it recovers; once seen Ready (the end's message records it) the silence goes
/// after the tail, and when the node goes NotReady again later, kumaco creates no
/// silence: its alert pages.
#[tokio::test]
async fn a_recovery_is_silenced_past_the_tail_and_a_later_outage_is_not() {
    let am = Alertmanager::start().await.expect("alertmanager");
    let c = Cluster::new(ApiServer::shared(), "silences-recovery", KUMACO).await;
    let by = created_by(&c);
    let a = c.node("a", &[]).await;
    c.put_active_window("now", "").await;
    let mut args = flags(&am);
    args.push("--silence-while-recovering".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _kumaco = c.kumaco(&args).await;

    c.set(&a, REBOOT, "True").await;
    wait_in_progress(&c, &a, "True").await;
    let held = one_silence(&am, &by, &a).await;
    // Rebooting: NotReady, and its requirement cleared.
    c.set(&a, "Ready", "False").await;
    c.set(&a, REBOOT, "False").await;
    let end = wait_in_progress(&c, &a, "False").await;
    let end = end.last_transition_time.unwrap().0;
    // Past the tail (5 s), still recovering: still silenced, the same silence.
    let past_tail = end + jiff::SignedDuration::from_secs(8);
    let wait = Duration::try_from(past_tail.duration_since(jiff::Timestamp::now()))
        .unwrap_or(Duration::ZERO);
    tokio::time::sleep(wait).await;
    let still = one_silence(&am, &by, &a).await;
    assert_eq!(still["id"], held["id"], "{still:#}");

    // Back: recorded on the node, and the silence goes (its tail long over).
    c.set(&a, "Ready", "True").await;
    wait_for_condition(&c.client, &a, IN_PROGRESS, WAIT, |cond| {
        cond.is_some_and(|cond| {
            cond.message
                .as_deref()
                .is_some_and(|m| m.contains("recovered after"))
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    poll_showing("the silence expired", WAIT, || async {
        let live = am.live_silences(&by).await.map_err(|e| e.to_string())?;
        if live.is_empty() {
            Ok(())
        } else {
            Err(format!("{live:#?}"))
        }
    })
    .await;

    // Later, an outage of its own: no silence, its alert unsilenced.
    c.set(&a, "Ready", "False").await;
    am.post_alert(&[("alertname", "KubeNodeNotReady"), ("node", &a)])
        .await
        .unwrap();
    // The observation period: several of the silencer's rounds (a pass after the node's
    // change, then every quarter of the lease).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let live = am.live_silences(&by).await.unwrap();
    assert!(live.is_empty(), "a silence for a later outage: {live:#?}");
    let alerts = am.alerts().await.unwrap();
    let alert = alerts
        .iter()
        .find(|x| x["labels"]["node"] == a.as_str())
        .expect("the node's alert");
    assert_eq!(alert["status"]["silencedBy"], json!([]), "{alert:#}");
}
