//! Silences in a real Alertmanager for the nodes kumaco lets into maintenance (issue
//! 29), with kumaco on the real API server: created when a node starts, extended as a
//! lease, expired after the tail; adopted by a restarted process and by a new leader
//! (no duplicate, no gap); an Alertmanager that is down changes nothing about the
//! maintenance, counts as failures, and gets the silences back when it returns.

use std::time::Duration;

use serde_json::{Value, json};

use testkit::ApiServer;
use testkit::alertmanager::Alertmanager;
use testkit::cluster::Cluster;
use testkit::kumaco::{KumacoProcess, metric_sum};
use testkit::nodes::{condition, wait_for_condition};
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
    let found = wait_for_condition(&c.client, node, IN_PROGRESS, WAIT, |cond| {
        cond.is_some_and(|cond| cond.status == status)
    })
    .await
    .unwrap_or_else(|e| panic!("{node}: {IN_PROGRESS}={status}: {e:#}"));
    condition(&found, IN_PROGRESS).unwrap().clone()
}

/// Polls /metrics until `metric{labels}` reaches `at_least`.
async fn wait_metric(k: &KumacoProcess, metric: &str, labels: &[(&str, &str)], at_least: f64) {
    poll_showing(
        &format!("{metric}{labels:?} >= {at_least}"),
        WAIT,
        || async {
            let text = k.metrics_text().await.map_err(|e| e.to_string())?;
            if metric_sum(&text, metric, labels) >= at_least {
                Ok(())
            } else {
                Err(format!("{text}\nlog:\n{}", k.log_tail(20)))
            }
        },
    )
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
        metric_sum(
            &restarted.metrics_text().await.unwrap(),
            "kumaco_silence_requests_total",
            &[("verb", "create")]
        ),
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
        metric_sum(
            &standby.process.metrics_text().await.unwrap(),
            "kumaco_silence_requests_total",
            &[]
        ),
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

    am.kill().await.unwrap();
    c.set(&a, REBOOT, "True").await;
    wait_in_progress(&c, &a, "True").await;
    wait_metric(
        &kumaco,
        "kumaco_silence_requests_total",
        &[("result", "error")],
        1.0,
    )
    .await;

    am.restart().await.unwrap();
    one_silence(&am, &by, &a).await;
    wait_metric(&kumaco, "kumaco_silences_held", &[], 1.0).await;
    assert!(
        metric_sum(
            &kumaco.metrics_text().await.unwrap(),
            "kumaco_silence_last_success_timestamp_seconds",
            &[]
        ) > 0.0
    );
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
