//! Shadow mode (`kumaco run --dry-run`) and events on the Nodes (`--node-events`), the
//! real kumaco binary against a real API server.
//!
//! - A shadow writes nothing (every node's resourceVersion and managedFields unchanged, no
//!   event, no Lease) and decides what a live run on the same state then writes: the same
//!   nodes, conditions, statuses and reasons, and the same node events. Its ceiling counts
//!   the nodes it would have started, and it logs each would-be change once.
//! - A live run with `--node-events` tells each node's story in events that `kubectl
//!   describe node` finds (core/v1, `involvedObject` field selectors), once per
//!   transition; a restarted kumaco posts none of them again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node};
use kube::api::{Api, ListParams};

use kumaco::conditions::UNDER_MAINTENANCE;
use testkit::ApiServer;
use testkit::agent::{MAINTENANCE_IN_PROGRESS as MIP, REBOOT_REQUIRED};
use testkit::cluster::Cluster;
use testkit::kumaco::{KumacoProcess, StartOptions, metric, series};
use testkit::nodes::condition;
use testkit::time::{poll_for, poll_showing, whole_second};

/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

const REBOOT_BLOCKED: &str = "kured.dev/RebootBlocked";
/// The first pass after start-up, a watch echo and the next pass, on a loaded machine.
const SOON: Duration = Duration::from_secs(15);
/// kumaco's count of its writes, by verb (`patch`, `event`) and result: a labelled
/// counter, shown only once it has counted (testkit::kumaco::series).
const API_WRITES: &str = "kumaco_api_writes_total";

/// (node, condition type) → (status, reason).
type Decisions = BTreeMap<(String, String), (String, String)>;

#[tokio::test]
async fn a_dry_run_writes_nothing_and_decides_as_the_live_run_then_does() {
    let c = cluster("shadow").await;
    // Ages scrambled with respect to names: the ceiling of 1 goes to the oldest
    // requirement (n2), whatever the order of names or creation.
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let mut nodes = Vec::new();
    for (short, age_mins) in [("n0", 20), ("n1", 10), ("n2", 0), ("n3", 5)] {
        let node = c.node(short, &[]).await;
        c.needs_reboot_since(&node, base + SignedDuration::from_mins(age_mins))
            .await;
        nodes.push(node);
    }
    // Blocked; and one that needs nothing (yet).
    c.set(&nodes[3], REBOOT_BLOCKED, "True").await;
    nodes.push(c.node("n4", &[]).await);
    c.put_active_window("w", &c.scope.selector()).await;
    let before = snapshot(&c, &nodes).await;

    // Leader election asked for, as the chart's default: a shadow takes no Lease anyway.
    let options = StartOptions {
        leader: Some(c.pod("shadow-0")),
        ..StartOptions::default()
    };
    let shadow = c.kumaco_with(&["--dry-run"], &options).await;
    let all_decided = |d: &Decisions| {
        nodes.iter().all(|n| {
            d.contains_key(&(n.clone(), UNDER_MAINTENANCE.into()))
                && d.contains_key(&(n.clone(), MIP.into()))
        })
    };
    let decided = wait_log(&shadow, "a would-be decision for every node", |lines| {
        let d = decisions(lines);
        all_decided(&d).then_some(d)
    })
    .await;
    assert_eq!(
        decided[&(nodes[2].clone(), MIP.into())],
        ("True".into(), "MaintenanceWindow".into()),
        "the oldest requirement starts"
    );
    assert_eq!(
        decided[&(nodes[3].clone(), MIP.into())],
        ("False".into(), "Blocked".into())
    );

    // n4 now needs a reboot too: the shadow's own view has the slot taken (by the write it
    // would have made), so n4 waits; and n2's start is not logged again.
    c.set(&nodes[4], REBOOT_REQUIRED, "True").await;
    let before = snapshot_again(&c, before, &nodes[4]).await;
    let shadow_decisions = wait_log(&shadow, "n4's would-be WaitingForSlot", |lines| {
        let d = decisions(lines);
        (d.get(&(nodes[4].clone(), MIP.into())) == Some(&("False".into(), "WaitingForSlot".into())))
            .then_some(d)
    })
    .await;
    let shadow_lines = log_lines(&shadow);
    let would: Vec<_> = shadow_lines
        .iter()
        .filter(|l| l["message"] == "dry run: would set condition")
        .collect();
    assert!(
        would
            .iter()
            .all(|l| l["spans"][0]["name"] == "pass" && l["spans"][0]["pass"].is_u64()),
        "a would-be write without its pass: {would:#?}"
    );
    let starts = would_set(&shadow_lines)
        .filter(|(node, ty, status, _)| node == &nodes[2] && ty == MIP && status == "True")
        .count();
    assert_eq!(
        starts,
        1,
        "a would-be write is logged once:\n{}",
        shadow.log_tail(40)
    );
    let shadow_events = wait_log(&shadow, "the would-be node events", |lines| {
        let e = would_post(lines);
        e.contains(&(nodes[4].clone(), "WaitingForSlot".into()))
            .then_some(e)
    })
    .await;

    // Nothing written: not a node, not an event, not a Lease.
    let metrics = shadow.metrics_text().await.unwrap();
    assert_eq!(
        snapshot(&c, &nodes).await,
        before,
        "a node changed under the shadow"
    );
    let events = Api::<CoreEvent>::all(c.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let ours: Vec<_> = events
        .items
        .iter()
        .filter(|e| {
            e.metadata.namespace.as_deref() == Some(&c.ns)
                || nodes.contains(e.involved_object.name.as_ref().unwrap_or(&String::new()))
        })
        .collect();
    assert!(ours.is_empty(), "the shadow posted events: {ours:#?}");
    let leases = Api::<Lease>::namespaced(c.client.clone(), &c.ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(leases.items.is_empty(), "the shadow took a Lease");
    assert_eq!(metric(&metrics, "kumaco_leader", &[]).unwrap(), 0.0);
    // Nothing counted: no series at all (the live run below counts under this name).
    assert_eq!(
        series(&metrics, API_WRITES, &[]),
        None,
        "the shadow counted writes"
    );
    assert_eq!(
        metric(
            &metrics,
            "kumaco_dry_run_writes_total",
            &[("condition", MIP), ("status", "True")]
        )
        .unwrap(),
        1.0
    );
    assert_eq!(
        metric(
            &metrics,
            "kumaco_dry_run_writes_total",
            &[("condition", UNDER_MAINTENANCE), ("status", "True")]
        )
        .unwrap(),
        5.0
    );
    drop(shadow);

    // The live run on the same state writes what the shadow decided, and posts the node
    // events it would have posted.
    let live = c.kumaco(&[]).await;
    let live_decisions = poll_for("the live run's conditions on every node", SOON, || async {
        let d = conditions(&c, &nodes).await;
        all_decided(&d).then_some(d)
    })
    .await;
    assert_eq!(
        live_decisions, shadow_decisions,
        "live (left) and shadow (right) differ"
    );
    let live_events = poll_for("the live run's node events", SOON, || async {
        let mut all = BTreeSet::new();
        for node in &nodes {
            for e in node_events(&c.client, node).await {
                all.insert((node.clone(), e.reason.unwrap_or_default()));
            }
        }
        (all.len() >= shadow_events.len()).then_some(all)
    })
    .await;
    assert_eq!(
        live_events, shadow_events,
        "live (left) and shadow (right) events"
    );
    // A pass's lines carry its number, and a write's its node: the spans (`spans` in
    // JSON, outermost first).
    let changed = wait_log(&live, "the live run's condition changes", |lines| {
        let changed: Vec<_> = lines
            .iter()
            .filter(|l| l["message"] == "condition changed")
            .cloned()
            .collect();
        (!changed.is_empty()).then_some(changed)
    })
    .await;
    for line in changed {
        let spans = &line["spans"];
        assert_eq!(spans[0]["name"], "pass", "{line}");
        assert!(spans[0]["pass"].as_u64().is_some_and(|n| n >= 1), "{line}");
        assert_eq!(spans[1]["name"], "write", "{line}");
        assert_eq!(spans[1]["node"], line["node"], "{line}");
    }
    let counted = series(&live.metrics_text().await.unwrap(), API_WRITES, &[]);
    assert!(
        counted > Some(0.0),
        "the live run counted {counted:?} writes"
    );
    drop(live);
}

#[tokio::test]
async fn node_events_tell_the_story_once_even_across_a_restart() {
    let c = cluster("node-events").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let old = c.node("old", &[]).await;
    let new = c.node("new", &[]).await;
    c.needs_reboot_since(&old, base).await;
    c.needs_reboot_since(&new, base + SignedDuration::from_mins(5))
        .await;
    c.put_active_window("w", &c.scope.selector()).await;
    let mut kumaco = c.kumaco(&[]).await;

    let story = |node: &str, reasons: &[&str]| {
        let want: Vec<(String, String)> = reasons
            .iter()
            .map(|r| (node.to_string(), r.to_string()))
            .collect();
        let client = c.client.clone();
        let node = node.to_string();
        async move {
            poll_for(&format!("events {want:?}"), SOON, || async {
                let got = node_events(&client, &node).await;
                let have: Vec<(String, String)> = got
                    .iter()
                    .map(|e| (node.clone(), e.reason.clone().unwrap_or_default()))
                    .collect();
                want.iter().all(|w| have.contains(w)).then_some(got)
            })
            .await
        }
    };
    let events = story(&old, &["MaintenanceWindowStarted", "MaintenanceStarted"]).await;
    let started = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("MaintenanceStarted"))
        .unwrap();
    assert_eq!(started.type_.as_deref(), Some("Normal"));
    assert_eq!(started.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(started.reporting_component.as_deref(), Some("kumaco"));
    let note = started.message.as_deref().unwrap_or_default();
    let started_at = note
        .strip_prefix("MaintenanceInProgress=True (MaintenanceWindow): maintenance started at ")
        .and_then(|rest| rest.split_once(' '))
        .map(|(at, _)| at.parse::<Timestamp>());
    assert!(matches!(started_at, Some(Ok(_))), "{note}");
    story(&new, &["MaintenanceWindowStarted", "WaitingForSlot"]).await;

    // The reboot is done: old completes, new starts.
    c.set(&old, REBOOT_REQUIRED, "False").await;
    story(&old, &["MaintenanceCompleted"]).await;
    story(&new, &["MaintenanceStarted"]).await;

    // What an operator reads: `kubectl describe node` (a real kubectl, the API server's
    // version) lists the story under Events.
    let kubectl = testkit::gobuild::kubectl().expect("kubectl: run `make testenv`");
    let described = std::process::Command::new(&kubectl)
        .args(["describe", "node", &old])
        .env("KUBECONFIG", testkit::ApiServer::shared().kubeconfig())
        .env("HOME", "/nonexistent")
        .output()
        .expect("running kubectl describe node");
    let text = String::from_utf8_lossy(&described.stdout);
    let events = text.split("\nEvents:").nth(1).unwrap_or_default();
    for reason in [
        "MaintenanceWindowStarted",
        "MaintenanceStarted",
        "MaintenanceCompleted",
    ] {
        assert!(
            events.contains(reason),
            "kubectl describe node {old} does not show {reason}:\n{text}\n{}",
            String::from_utf8_lossy(&described.stderr)
        );
    }

    // A new process (a restart, a new leader) posts none of them again.
    let posted = series(
        &kumaco.metrics_text().await.unwrap(),
        API_WRITES,
        &[("verb", "event")],
    );
    assert!(
        posted > Some(0.0),
        "the first kumaco counted {posted:?} events"
    );
    kumaco.kill();
    let restarted = c.kumaco(&[]).await;
    // Its first pass (before ready) tried what it found due. The observation period of
    // a "nothing happens" check: any later pass would post within it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let metrics = restarted.metrics_text().await.unwrap();
    assert_eq!(
        series(&metrics, API_WRITES, &[("verb", "event")]),
        None,
        "the restarted kumaco posted events:\n{}",
        restarted.log_tail(30)
    );
    for (node, reasons) in [
        (
            &old,
            &[
                "MaintenanceCompleted",
                "MaintenanceStarted",
                "MaintenanceWindowStarted",
            ][..],
        ),
        (
            &new,
            &[
                "MaintenanceStarted",
                "MaintenanceWindowStarted",
                "WaitingForSlot",
            ],
        ),
    ] {
        let mut got: Vec<String> = node_events(&c.client, node)
            .await
            .into_iter()
            .map(|e| e.reason.unwrap_or_default())
            .collect();
        got.sort();
        assert_eq!(got, reasons, "{node}: each event once");
    }
    // Shown with --nocapture: the real events, for docs/configuration.md.
    for node in [&old, &new] {
        let mut events = node_events(&c.client, node).await;
        events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        for e in events {
            println!(
                "{}  {:<24}  {}",
                node,
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------

/// A test's slice of the shared cluster; every kumaco of the test runs with
/// `--in-progress`, ceiling 1 and node events.
async fn cluster(name: &str) -> Cluster {
    Cluster::new(ApiServer::shared(), name, KUMACO)
        .await
        .with_flags(&[
            "--in-progress",
            "--require-condition=kured.dev/RebootRequired",
            "--block-condition=kured.dev/RebootBlocked",
            "--max-in-progress=1",
            "--node-events",
        ])
}

/// Each node's resourceVersion and managedFields (managers and their operations).
async fn snapshot(c: &Cluster, nodes: &[String]) -> BTreeMap<String, (String, String)> {
    let api: Api<Node> = Api::all(c.client.clone());
    let mut out = BTreeMap::new();
    for n in nodes {
        let node = api.get(n).await.unwrap();
        let managers = serde_json::to_string(&node.metadata.managed_fields).unwrap();
        out.insert(
            n.clone(),
            (node.metadata.resource_version.unwrap_or_default(), managers),
        );
    }
    out
}

/// `before` with `node` as it is now (the test changed it).
async fn snapshot_again(
    c: &Cluster,
    mut before: BTreeMap<String, (String, String)>,
    node: &str,
) -> BTreeMap<String, (String, String)> {
    before.extend(snapshot(c, &[node.to_string()]).await);
    before
}

/// kumaco's two conditions on `nodes`, as the cluster shows them.
async fn conditions(c: &Cluster, nodes: &[String]) -> Decisions {
    let api: Api<Node> = Api::all(c.client.clone());
    let mut out = Decisions::new();
    for n in nodes {
        let node = api.get(n).await.unwrap();
        for ty in [UNDER_MAINTENANCE, MIP] {
            if let Some(c) = condition(&node, ty) {
                out.insert(
                    (n.clone(), ty.to_string()),
                    (c.status.clone(), c.reason.clone().unwrap_or_default()),
                );
            }
        }
    }
    out
}

/// The events `kubectl describe node` shows for `node` (those about its uid; kubectl also
/// asks for events whose uid is the node's name, which kubelets post and kumaco does not).
async fn node_events(client: &kube::Client, node: &str) -> Vec<CoreEvent> {
    let uid = Api::<Node>::all(client.clone())
        .get(node)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let fields = format!(
        "involvedObject.name={node},involvedObject.namespace=,involvedObject.kind=Node,involvedObject.uid={uid}"
    );
    Api::<CoreEvent>::all(client.clone())
        .list(&ListParams::default().fields(&fields))
        .await
        .unwrap()
        .items
}

fn log_lines(kumaco: &KumacoProcess) -> Vec<serde_json::Value> {
    std::fs::read_to_string(kumaco.log_path())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// (node, condition, status, reason) of each "would set condition" log line, in order.
fn would_set(
    lines: &[serde_json::Value],
) -> impl Iterator<Item = (String, String, String, String)> {
    lines
        .iter()
        .filter(|l| l["message"] == "dry run: would set condition")
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or_default().to_string();
            (s("node"), s("condition"), s("status"), s("reason"))
        })
}

/// The last would-be state of each (node, condition) the shadow logged.
fn decisions(lines: &[serde_json::Value]) -> Decisions {
    would_set(lines)
        .map(|(node, ty, status, reason)| ((node, ty), (status, reason)))
        .collect()
}

/// (node, reason) of the node events the shadow would have posted.
fn would_post(lines: &[serde_json::Value]) -> BTreeSet<(String, String)> {
    lines
        .iter()
        .filter(|l| l["message"] == "dry run: would post event" && l["node"].is_string())
        .map(|l| {
            (
                l["node"].as_str().unwrap().to_string(),
                l["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Waits until `check` finds what it looks for in kumaco's log; that.
async fn wait_log<T>(
    kumaco: &KumacoProcess,
    what: &str,
    check: impl Fn(&[serde_json::Value]) -> Option<T>,
) -> T {
    poll_showing(&format!("{what} in kumaco's log"), SOON, || async {
        check(&log_lines(kumaco)).ok_or_else(|| kumaco.log_tail(40))
    })
    .await
}
