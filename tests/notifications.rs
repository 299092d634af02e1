//! The notifications end to end: the real kumaco binary against a real API server,
//! posting to [`Receiver`]s that record what they get (and answer as told), with the
//! reboot agent of tests/in_progress.rs rebooting every node kumaco lets into
//! maintenance.
//!
//! - Once, across failovers: a rollout of 20 nodes through two SIGKILLs of the leader
//!   and one SIGTERM handover; every transition arrives, duplicates only after a kill
//!   and under the original id, none after the handover.
//! - Nothing old: a kumaco started an hour later (its clock stepped with libfaketime)
//!   sends nothing of what happened an hour before, and tells what happens now.
//! - Never in the way: sinks that hang, answer 500 or refuse connections leave the
//!   rollout's timing as it is without them.
//! - Through a real Alertmanager to its webhook receiver; a chat digest on a generic
//!   webhook.
//!
//! Figures are printed for collection (`cargo test --test notifications -- --nocapture
//! 2>&1 | grep NOTIFY_`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use testkit::ApiServer;
use testkit::alertmanager::Alertmanager;
use testkit::chaos::clock::FakeClock;
use testkit::cluster::Cluster;
use testkit::kumaco::{Replica, SHORT_LEASE, SHORT_LEASE_DURATION, StartOptions, metric};
use testkit::receiver::{Answer, Received, Receiver};
use testkit::time::{edge_in, until, whole_second};

/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

const REQUIRE_REBOOT: &str = "--require-condition=kured.dev/RebootRequired";
/// How long a reboot takes in these tests (the agent's random pause).
const REBOOT: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(3));
/// How soon kumaco reacts to a node change (a watch event, then a pass), as
/// tests/in_progress.rs holds it to.
const PROMPT: Duration = Duration::from_secs(2);
/// Waits with no documented deadline.
const SOON: Duration = Duration::from_secs(20);
/// How long after a leader's SIGKILL its successor may send again what the killed one
/// sent but had not recorded: the Lease running out, the new leader's lists, its first
/// round. A duplicate later than this is not "around the kill".
const AROUND_A_KILL: Duration = Duration::from_secs(20);

const TYPE_PREFIX: &str = "dev.kumaco.maintenance.";

/// One test's slice of the shared cluster, every kumaco with `--in-progress`.
async fn cluster(name: &str) -> Cluster {
    Cluster::new(ApiServer::shared(), name, KUMACO)
        .await
        .with_flags(&["--in-progress", REQUIRE_REBOOT])
}

/// A `--notify-config` file in the server's directory, holding `yaml`.
fn notify_config(c: &Cluster, yaml: &str) -> PathBuf {
    let path = ApiServer::shared()
        .dir()
        .join(format!("notify-{}.yaml", c.scope.value()));
    std::fs::write(&path, yaml).unwrap();
    path
}

/// A CloudEvents sink posting to `receiver`'s `/events`, at most `per_minute`.
fn events_sink(receiver: &Receiver, per_minute: u32) -> String {
    format!(
        "  - name: events\n    type: cloudevents\n    url: {}/events\n    maxPerMinute: {per_minute}\n",
        receiver.url()
    )
}

/// The events received, in order: (when, id, type without its prefix, subject, time).
fn events(received: &[Received]) -> Vec<(Timestamp, String, String, String, String)> {
    received
        .iter()
        .filter(|r| r.path == "/events")
        .map(|r| {
            assert_eq!(
                r.content_type,
                "application/cloudevents+json; charset=UTF-8"
            );
            let e = r.json();
            (
                r.at,
                e["id"].as_str().unwrap().to_string(),
                e["type"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(TYPE_PREFIX)
                    .unwrap()
                    .to_string(),
                e["subject"].as_str().unwrap().to_string(),
                e["time"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// How many distinct nodes have a notice of `kind` among `received`.
fn nodes_told(received: &[Received], kind: &str) -> usize {
    events(received)
        .into_iter()
        .filter(|e| e.2 == kind)
        .map(|e| e.3)
        .collect::<BTreeSet<_>>()
        .len()
}

/// The replica that leads, once exactly one of `replicas` says so.
async fn leader(replicas: &[Replica]) -> usize {
    testkit::time::poll_showing("one leader", SOON + SHORT_LEASE_DURATION, || async {
        let mut leading = Vec::new();
        for (i, r) in replicas.iter().enumerate() {
            if r.leader_gauge().await == Some(1.0) {
                leading.push(i);
            }
        }
        match leading.as_slice() {
            [one] => Ok(*one),
            more => Err(format!("leaders: {more:?}")),
        }
    })
    .await
}

#[tokio::test]
async fn a_rollout_through_two_kills_and_a_handover_tells_each_transition_once_but_around_the_kills()
 {
    let c = cluster("notify-ha").await;
    let receiver = Receiver::start(Answer::Status(202)).await.unwrap();
    let config = notify_config(&c, &format!("sinks:\n{}", events_sink(&receiver, 6000)));
    let config_flag = format!("--notify-config={}", config.display());
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let mut nodes = Vec::new();
    for i in 0..20 {
        let node = c.node(&format!("n{i:02}"), &[]).await;
        c.needs_reboot_since(&node, base + SignedDuration::from_mins(i))
            .await;
        nodes.push(node);
    }
    let _agent = c.agent(REBOOT).await;
    let mut flags: Vec<&str> = SHORT_LEASE.to_vec();
    flags.extend([
        "--max-in-progress=2",
        "--cluster-name=ha-test",
        &config_flag,
    ]);
    let mut replicas = vec![
        c.replica("replica-a", &flags).await,
        c.replica("replica-b", &flags).await,
    ];
    leader(&replicas).await;
    let start = edge_in(3);
    let window = SignedDuration::from_secs(70);
    c.put_one_shot("w", start, "70s", &c.scope.selector()).await;

    // The scenario: a SIGKILL of the leader after 5 completions and after 10, a new
    // replica to replace each; after 15 (once the second successor has told something
    // new: its resends come first), a SIGTERM, as a rolling update stops a pod.
    let mut kills: Vec<Instant> = Vec::new();
    let mut kill_times: Vec<Timestamp> = Vec::new();
    for (after, pod) in [(5, "replica-c"), (10, "replica-d")] {
        receiver
            .wait_for(&format!("{after} completions"), SOON * 3, |r| {
                nodes_told(r, "completed") >= after
            })
            .await
            .unwrap();
        let i = leader(&replicas).await;
        replicas[i].kill();
        kills.push(Instant::now());
        kill_times.push(Timestamp::now());
        replicas.remove(i);
        replicas.push(c.replica(pod, &flags).await);
    }
    let before_new = receiver.received().len();
    receiver
        .wait_for(
            "15 completions, one told by the new leader",
            SOON * 3,
            |r| {
                let known: BTreeSet<String> =
                    events(&r[..before_new]).into_iter().map(|e| e.1).collect();
                nodes_told(r, "completed") >= 15
                    && events(&r[before_new..])
                        .iter()
                        .any(|e| !known.contains(&e.1) && e.0 > kill_times[1])
            },
        )
        .await
        .unwrap();
    let i = leader(&replicas).await;
    let handover = Timestamp::now();
    let status = replicas[i].terminate().await;
    assert!(status.success(), "{} exited with {status}", replicas[i].pod);
    replicas.remove(i);

    let end = start + window;
    let received = receiver
        .wait_for("the window's closing", until(end) + SOON, |r| {
            events(r).iter().any(|e| e.2 == "window-closed")
        })
        .await
        .unwrap();
    let seen = events(&received);

    // Every transition, at least once.
    assert_eq!(nodes_told(&received, "started"), 20);
    assert_eq!(nodes_told(&received, "completed"), 20);
    let opened: Vec<_> = seen.iter().filter(|e| e.2 == "window-opened").collect();
    assert!(!opened.is_empty());
    let closed: Vec<&Received> = received
        .iter()
        .filter(|r| {
            r.path == "/events" && r.json()["type"] == "dev.kumaco.maintenance.window-closed"
        })
        .collect();
    let data = &closed[0].json()["data"];
    assert_eq!(
        (data["selected"].as_u64(), data["done"].as_u64()),
        (Some(20), Some(20)),
        "{data}"
    );

    // One id per transition, whoever told it.
    let mut ids: BTreeMap<(String, String, String), BTreeSet<String>> = BTreeMap::new();
    for (_, id, kind, subject, time) in &seen {
        ids.entry((kind.clone(), subject.clone(), time.clone()))
            .or_default()
            .insert(id.clone());
    }
    for (transition, set) in &ids {
        assert_eq!(
            set.len(),
            1,
            "{transition:?} told under several ids: {set:?}"
        );
    }
    // Duplicates only within AROUND_A_KILL after a kill, none after the handover.
    let mut first: BTreeMap<&str, Timestamp> = BTreeMap::new();
    let mut duplicates = 0;
    for (at, id, kind, subject, _) in &seen {
        let Some(before) = first.get(id.as_str()) else {
            first.insert(id, *at);
            continue;
        };
        duplicates += 1;
        let around = kill_times.iter().any(|k| {
            *at >= *k && at.duration_since(*k) <= SignedDuration::try_from(AROUND_A_KILL).unwrap()
        });
        assert!(
            around,
            "{kind} {subject} ({id}) told at {before} and again at {at}: not after a kill \
             ({kill_times:?})"
        );
        assert!(
            *before >= handover || *at < handover,
            "{kind} {subject} ({id}) told before the handover ({handover}) and again after it"
        );
    }
    eprintln!(
        "NOTIFY_HA events={} transitions={} duplicates={duplicates} kills={} handover={handover}",
        seen.len(),
        ids.len(),
        kills.len()
    );
}

#[tokio::test]
async fn a_kumaco_started_an_hour_later_sends_nothing_old_and_tells_what_happens_now() {
    let c = cluster("notify-later").await;
    let receiver = Receiver::start(Answer::Status(200)).await.unwrap();
    let config = notify_config(&c, &format!("sinks:\n{}", events_sink(&receiver, 6000)));
    let config_flag = format!("--notify-config={}", config.display());
    let flags = ["--max-in-progress=2", config_flag.as_str()];
    let mut old = Vec::new();
    for i in 0..3 {
        old.push(c.node(&format!("old{i}"), &[("batch", "old")]).await);
    }
    for node in &old {
        c.needs_reboot_since(
            node,
            whole_second(Timestamp::now() - SignedDuration::from_hours(2)),
        )
        .await;
    }
    let _agent = c.agent(REBOOT).await;
    let start = edge_in(3);
    c.put_one_shot(
        "early",
        start,
        "20s",
        &format!("{},batch=old", c.scope.selector()),
    )
    .await;
    let mut first = c.replica("replica-a", &flags).await;
    receiver
        .wait_for("the first window's closing", until(start) + SOON * 2, |r| {
            events(r).iter().any(|e| e.2 == "window-closed")
        })
        .await
        .unwrap();
    assert!(first.terminate().await.success());
    let told_before = receiver.received().len();

    // An hour later for the new kumaco: its wall clock one hour ahead.
    let mut clock = FakeClock::new(ApiServer::shared().dir()).unwrap();
    clock.set_offset(3600).unwrap();
    let new = c.node("new", &[("batch", "new")]).await;
    c.needs_reboot_since(&new, whole_second(Timestamp::now()))
        .await;
    // In its time, a window opening 5 s after it starts.
    let later = edge_in(3600 + 5);
    c.put_one_shot(
        "later",
        later,
        "30s",
        &format!("{},batch=new", c.scope.selector()),
    )
    .await;
    let options = StartOptions {
        env: clock.env(),
        leader: Some(c.pod("replica-b")),
        healthy_is_enough: true,
        ..StartOptions::default()
    };
    let mut args: Vec<String> = c.scope_args();
    args.extend(["--in-progress", REQUIRE_REBOOT, "--lease-name=kumaco-test"].map(String::from));
    args.extend(flags.map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let second = c.start_kumaco(&args, &options).await;
    let received = receiver
        .wait_for("the new node's completion", SOON * 2, |r| {
            events(&r[told_before..])
                .iter()
                .any(|e| e.2 == "completed" && e.3 == new)
        })
        .await
        .unwrap();
    let after: Vec<_> = events(&received[told_before..]);
    for (_, id, kind, subject, time) in &after {
        assert!(
            subject == &new || subject.ends_with("/later"),
            "a kumaco an hour later told {kind} {subject} of {time} ({id}): an old transition; \
             log {}",
            second.log_path().display()
        );
    }
    eprintln!("NOTIFY_LATER before={told_before} after={}", after.len());
}

/// The rollout's starts, as the observer saw them: (node, when).
async fn rollout_timing(
    name: &str,
    sinks: Option<&[&Receiver]>,
    refused: u16,
) -> Vec<(String, Timestamp)> {
    let c = cluster(name).await;
    let mut flags: Vec<String> = vec!["--max-in-progress=1".into()];
    if let Some(receivers) = sinks {
        let mut yaml = String::from("sinks:\n");
        for (i, r) in receivers.iter().enumerate() {
            yaml.push_str(&format!(
                "  - name: webhook-{i}\n    type: cloudevents\n    url: {}/events\n",
                r.url()
            ));
            yaml.push_str(&format!(
                "  - name: chat-{i}\n    url: generic://127.0.0.1:{}/chat?template=json&disabletls=yes\n    digestInterval: 5s\n",
                r.port()
            ));
        }
        yaml.push_str(&format!(
            "  - name: refused\n    type: cloudevents\n    url: http://127.0.0.1:{refused}/events\n"
        ));
        let config = notify_config(&c, &yaml);
        flags.push(format!("--notify-config={}", config.display()));
    }
    let mut nodes = Vec::new();
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    for i in 0..6 {
        let node = c.node(&format!("n{i}"), &[]).await;
        c.needs_reboot_since(&node, base + SignedDuration::from_mins(i))
            .await;
        nodes.push(node);
    }
    let observer = c.observer().await;
    let _agent = c
        .agent((Duration::from_millis(1000), Duration::from_millis(1000)))
        .await;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let kumaco = c.kumaco(&flags).await;
    let start = edge_in(2);
    c.put_one_shot("w", start, "5m", &c.scope.selector()).await;
    observer
        .wait_until("every node completed", until(start) + SOON * 2, |o| {
            nodes
                .iter()
                .all(|n| o.ended_with(n, "MaintenanceCompleted"))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let seen = observer.observed();
    if sinks.is_some() {
        let metrics = kumaco.metrics_text().await.unwrap();
        assert!(
            metric(&metrics, "kumaco_notification_failures_total", &[]).unwrap() > 0.0,
            "the failing sinks were tried: {metrics}"
        );
    }
    seen.starts
        .iter()
        .map(|(at, node)| (node.clone(), *at))
        .collect()
}

#[tokio::test]
async fn sinks_that_hang_fail_or_refuse_leave_the_rollout_as_it_is_without_them() {
    let hanging = Receiver::start(Answer::Hang).await.unwrap();
    let failing = Receiver::start(Answer::Status(500)).await.unwrap();
    // A port nothing listens on: each attempt is refused.
    let refused = testkit::http::free_port().unwrap();
    let bad = [&hanging, &failing];
    let (without, with) = tokio::join!(
        rollout_timing("notify-none", None, refused),
        rollout_timing("notify-bad", Some(&bad), refused),
    );
    assert!(!hanging.received().is_empty() && !failing.received().is_empty());
    let gaps = |starts: &[(String, Timestamp)]| -> Vec<i64> {
        starts
            .windows(2)
            .map(|w| w[1].1.duration_since(w[0].1).as_millis() as i64)
            .collect()
    };
    let (a, b) = (gaps(&without), gaps(&with));
    eprintln!("NOTIFY_TIMING gaps_ms_without={a:?} gaps_ms_with={b:?}");
    assert_eq!(without.len(), 6);
    assert_eq!(with.len(), 6);
    // The same rollout: one node at a time, each start a reboot (1 s) and a pass after
    // the last end. Sinks that never answer must not add their timeouts to it.
    for gap in b {
        assert!(
            gap < 1000 + PROMPT.as_millis() as i64,
            "a start came {gap} ms after the previous one with failing sinks: \
             without them {a:?}"
        );
    }
}

#[tokio::test]
async fn an_alertmanager_sink_reaches_alertmanagers_webhook_receiver() {
    let webhook = Receiver::start(Answer::Status(200)).await.unwrap();
    let am = Alertmanager::start_with_config(&format!(
        "route:\n  receiver: hook\n  group_by: ['...']\n  group_wait: 0s\n  group_interval: 1s\n\
         receivers:\n  - name: hook\n    webhook_configs:\n      - url: {}/am\n        send_resolved: false\n",
        webhook.url()
    ))
    .await
    .unwrap();
    let c = cluster("notify-am").await;
    let chat = Receiver::start(Answer::Status(200)).await.unwrap();
    let config = notify_config(
        &c,
        &format!(
            "sinks:\n  - name: am\n    type: alertmanager\n    url: {}\n    transitions: [completed]\n\
             \x20 - name: chat\n    url: generic://127.0.0.1:{}/chat?template=json&disabletls=yes\n    digestInterval: 5s\n",
            am.url(),
            chat.port()
        ),
    );
    let node = c.node("n", &[("topology.kubernetes.io/zone", "z1")]).await;
    c.needs_reboot_since(
        &node,
        whole_second(Timestamp::now() - SignedDuration::from_hours(1)),
    )
    .await;
    let _agent = c.agent(REBOOT).await;
    let flag = format!("--notify-config={}", config.display());
    let _kumaco = c
        .kumaco(&[&flag, "--lease-name=notify-am", "--cluster-name=am-test"])
        .await;
    let start = edge_in(2);
    c.put_one_shot("w", start, "5m", &c.scope.selector()).await;
    let got = webhook
        .wait_for("Alertmanager's webhook", until(start) + SOON * 2, |r| {
            r.iter().any(|x| x.path == "/am")
        })
        .await
        .unwrap();
    let posted = got.iter().find(|x| x.path == "/am").unwrap().json();
    let alert: &Value = &posted["alerts"][0];
    assert_eq!(alert["labels"]["alertname"], "KumacoMaintenanceTransition");
    assert_eq!(alert["labels"]["kind"], "completed");
    assert_eq!(alert["labels"]["node"], node.as_str());
    assert_eq!(alert["labels"]["cluster"], "am-test");
    assert!(
        alert["annotations"]["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{node} (z1): maintenance completed after")),
        "{posted}"
    );
    // The chat: its generic JSON, a message per interval with the window's and the
    // node's transitions.
    let chats = chat
        .wait_for("the chat's messages", SOON, |r| {
            r.iter().any(|x| x.body.contains("completed"))
        })
        .await
        .unwrap();
    for message in &chats {
        let body = message.json();
        assert!(
            body["title"].is_string() && body["message"].is_string(),
            "{body}"
        );
    }
}

/// The record lives as long as a sink needs it: written with the first, deleted by the
/// first leader without any; a record another instance wrote is not this one's to delete.
#[tokio::test]
async fn the_record_goes_with_the_last_sink_and_only_its_own() {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, PostParams};
    let c = cluster("notify-record").await;
    let receiver = Receiver::start(Answer::Status(200)).await.unwrap();
    let config = notify_config(&c, &format!("sinks:\n{}", events_sink(&receiver, 6000)));
    let config_flag = format!("--notify-config={}", config.display());
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), &c.ns);
    let mut with = c.replica("replica-a", &[&config_flag]).await;
    let record = testkit::time::poll_for("the record", SOON, || async {
        leases.get_opt("kumaco-test-notified").await.ok().flatten()
    })
    .await;
    let annotations = record.metadata.annotations.unwrap_or_default();
    assert!(
        annotations.contains_key("notify.kumaco.dev/events"),
        "{annotations:?}"
    );
    assert!(with.terminate().await.success());
    let mut without = c.replica("replica-b", &[]).await;
    testkit::time::poll_until("the record deleted", SOON, || async {
        leases
            .get_opt("kumaco-test-notified")
            .await
            .ok()
            .flatten()
            .is_none()
    })
    .await;
    assert!(without.log_has("notifications: no sink, the record deleted"));
    assert!(without.terminate().await.success());
    // A record under that name that another writer made is left alone.
    let foreign = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("kumaco-test-notified".into()),
            ..Default::default()
        },
        spec: None,
    };
    leases
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    let third = c.replica("replica-c", &[]).await;
    testkit::time::poll_until("the third replica's look at the record", SOON, || async {
        third.log_has("notifications: no sink, no record of ours")
    })
    .await;
    assert!(
        leases
            .get_opt("kumaco-test-notified")
            .await
            .unwrap()
            .is_some()
    );
}
