//! kumaco derives what it writes from what the API shows now, not from what one process
//! happened to see happen: the real binary against a real API server, on the cases where
//! memory of the past is not enough (docs/design.md, Level-triggered).
//!
//! - a node that left the scope while kumaco was down is cleaned at the restart
//!   (ownership is read from the node, not remembered);
//! - a blackout does not end a maintenance in progress ("maintenance already in
//!   progress finishes");
//! - events are posted once per thing they report, by whoever leads when it happens:
//!   at start-up before the lease is won, after a failover, for a deleted active window,
//!   and not again after a restart;
//! - overlapping occurrences (`@every 1s` lasting an hour) are a steady state: no writes,
//!   no event per occurrence.
//!
//! Each test has its own namespace and node scope (and, for the write count, its own API
//! server). Waits watch or poll with deadlines; the sleeps are the scenario (the
//! observation period of a "nothing more happens" check).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::watcher;

use testkit::agent::MAINTENANCE_IN_PROGRESS as MIP;
use testkit::cluster::{
    Cluster, REASON_BLACKOUT, REASON_NO_WINDOW, REASON_OUT_OF_SCOPE, REASON_WINDOW, REPLICA_LEASE,
    UNDER_MAINTENANCE,
};
use testkit::events;
use testkit::history::History;
use testkit::kumaco::{SHORT_LEASE, SHORT_LEASE_DURATION, node_writes, one_leader};
use testkit::nodes::{condition, has_status, set_labels, wait_for_condition};
use testkit::time::{EDGE_BOUND, edge_in, poll_until, until, whole_second};
use testkit::{ApiServer, SCOPE_LABEL};

/// How soon a reaction to an API change must be visible.
const PROMPT: Duration = Duration::from_secs(2);
/// Waits with no documented deadline (the first pass after start-up, an
/// event being posted).
const SOON: Duration = Duration::from_secs(10);

const LOADED: &str = "WindowLoaded";
const INVALID: &str = "WindowInvalid";
const STARTED: &str = "WindowStarted";
const ENDED: &str = "WindowEnded";

/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

// ---------------------------------------------------------------------------------------
// Scope

/// Three nodes in maintenance (`UnderMaintenance` and `MaintenanceInProgress` True);
/// kumaco is killed; one node is relabelled out of `--node-selector` while it is down.
/// The restarted kumaco never saw the node leave, but the node still carries this
/// instance's True conditions (its managedFields say so): they become False
/// (`NodeOutOfScope`). The two nodes still in scope keep theirs untouched.
#[tokio::test]
async fn scope_left_while_down_is_cleaned_at_restart() {
    let c = Cluster::new(ApiServer::shared(), "left-while-down", KUMACO).await;
    let mut nodes = Vec::new();
    for short in ["n1", "n2", "n3"] {
        nodes.push(c.node(short, &[]).await);
    }
    let began = whole_second(Timestamp::now() - SignedDuration::from_secs(60));
    c.put_one_shot("w", began, "10m", &c.scope.selector()).await;
    let args = ["--in-progress", "--max-in-progress=3"];
    let mut kumaco = c.kumaco(&args).await;
    let mut before = BTreeMap::new();
    for node in &nodes {
        let um = c.wait_status(node, Some("True"), SOON).await;
        let mip = wait_mip(&c, node, Some("True"), SOON).await;
        before.insert(node.clone(), (um, mip));
    }

    kumaco.kill();
    let (staying, leaving) = (&nodes[..2], &nodes[2]);
    // Another scope's label value: the node now belongs to nobody this test started.
    set_labels(&c.client, leaving, &[(SCOPE_LABEL, Some("elsewhere"))])
        .await
        .unwrap();
    let mut staying_histories = Vec::new();
    for node in staying {
        staying_histories.push((
            History::start(&c.client, node, UNDER_MAINTENANCE).await,
            History::start(&c.client, node, MIP).await,
        ));
    }

    let restarted = Instant::now();
    let _kumaco = c.kumaco(&args).await;
    let mut node = None;
    for type_ in [MIP, UNDER_MAINTENANCE] {
        let timeout = SOON.saturating_sub(restarted.elapsed());
        let found = wait_for_condition(&c.client, leaving, type_, timeout, |cond| {
            has_status(cond, Some("False"))
        })
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{leaving} left the scope ({}) while kumaco was down; within {SOON:?} of the \
                 restart its {type_} from this instance should be False \
                 ({REASON_OUT_OF_SCOPE}): {e:#}",
                c.scope.selector()
            )
        });
        node = Some(found);
    }
    let node = node.unwrap();
    for type_ in [UNDER_MAINTENANCE, MIP] {
        let cond = condition(&node, type_).cloned().unwrap_or_default();
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_deref()),
            ("False", Some(REASON_OUT_OF_SCOPE)),
            "{leaving}: {type_}: {cond:?}"
        );
    }

    // The nodes still in scope: True all along, no transition.
    for (node, (um_history, mip_history)) in staying.iter().zip(&staying_histories) {
        let (um_before, mip_before) = &before[node];
        let now = Api::<Node>::all(c.client.clone()).get(node).await.unwrap();
        for (type_, was) in [(UNDER_MAINTENANCE, um_before), (MIP, mip_before)] {
            let cond = condition(&now, type_).cloned().unwrap_or_default();
            assert_eq!(
                (cond.status.as_str(), &cond.last_transition_time),
                ("True", &was.last_transition_time),
                "{node} stayed in scope: its {type_} should be untouched: before {was:?}, now \
                 {cond:?}"
            );
        }
        assert_eq!(um_history.statuses(), [Some("True".to_string())], "{node}");
        assert_eq!(mip_history.statuses(), [Some("True".to_string())], "{node}");
    }
}

// ---------------------------------------------------------------------------------------
// Blackouts and MaintenanceInProgress

/// Ceiling 1, no required condition, nodes n1 and n2 in a 40 s window; a blackout on n1
/// alone from 6 s to 14 s into it. n1 (first by name) starts at the window start; the
/// blackout takes its `UnderMaintenance` away but its maintenance in progress finishes:
/// `MaintenanceInProgress` stays True through the blackout (one start in all), so the
/// slot stays taken and n2 never starts.
#[tokio::test]
async fn blackout_does_not_end_maintenance_in_progress() {
    let c = Cluster::new(ApiServer::shared(), "blackout-in-progress", KUMACO).await;
    let n1 = c.node("n1", &[("freeze", "yes")]).await;
    let n2 = c.node("n2", &[]).await;
    assert!(n1 < n2, "the order by name the test relies on");
    let observer = c.observer().await;
    let um1 = History::start(&c.client, &n1, UNDER_MAINTENANCE).await;
    let _kumaco = c.kumaco(&["--in-progress", "--max-in-progress=1"]).await;

    let start = edge_in(4);
    let freeze_start = start + SignedDuration::from_secs(6);
    let freeze_end = freeze_start + SignedDuration::from_secs(8);
    c.put_one_shot("w", start, "40s", &c.scope.selector()).await;
    c.put_window(
        "freeze",
        &[
            ("startTime", &freeze_start.to_string()),
            ("duration", "8s"),
            ("nodeSelector", "freeze=yes"),
            ("blackout", "true"),
        ],
    )
    .await;

    observer
        .wait_until(
            "n1 in progress at the window start",
            until(start) + EDGE_BOUND,
            |o| o.in_progress.contains(&n1),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let held = c
        .wait_status(&n1, Some("False"), until(freeze_start) + EDGE_BOUND)
        .await;
    assert_eq!(held.reason.as_deref(), Some(REASON_BLACKOUT), "{held:?}");
    let back = c
        .wait_status(&n1, Some("True"), until(freeze_end) + EDGE_BOUND)
        .await;
    assert_eq!(back.reason.as_deref(), Some(REASON_WINDOW), "{back:?}");
    // A few seconds of the window after the blackout: the scenario's last stretch.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let seen = observer.observed();
    let timeline = seen.timeline();
    let n1_history = seen.history(&n1);
    let first_true = n1_history
        .iter()
        .position(|c| status_of(c.as_ref()) == Some("True"));
    let left = first_true.and_then(|i| {
        n1_history[i..]
            .iter()
            .find(|c| status_of(c.as_ref()) != Some("True"))
    });
    assert!(
        first_true.is_some() && left.is_none(),
        "{n1} was in progress when the blackout started at {freeze_start}: its {MIP} must stay \
         True through the blackout (maintenance in progress finishes), but it became {:?}:\n\
         {timeline}",
        left.cloned().flatten()
    );
    assert_eq!(
        seen.start_count(&n1),
        1,
        "{n1}: one maintenance for the whole window:\n{timeline}"
    );
    assert_eq!(
        seen.start_count(&n2),
        0,
        "ceiling 1 and {n1} in progress throughout: {n2} must never start:\n{timeline}"
    );
    assert!(seen.max_in_progress <= 1, "ceiling 1:\n{timeline}");
    assert_eq!(
        um1.statuses(),
        [
            None,
            Some("True".to_string()),
            Some("False".to_string()),
            Some("True".to_string())
        ],
        "{n1}'s {UNDER_MAINTENANCE}: window, blackout, window: {:#?}",
        um1.states()
    );
}

// ---------------------------------------------------------------------------------------
// Events

/// (a) Start-up: two windows exist before kumaco starts, and the Lease is still held by
/// a replica that just died, so kumaco loads them as a follower and wins the Lease a lease
/// duration later. The windows must still be reported, once: `WindowLoaded` for the valid
/// one, `WindowInvalid` for the invalid one.
#[tokio::test]
async fn events_are_posted_by_whoever_leads_at_start_up() {
    let c = Cluster::new(ApiServer::shared(), "events-start-up", KUMACO).await;
    two_windows(&c).await;
    held_lease(&c, "replica-that-died").await;
    let _a = c.replica("replica-a", &SHORT_LEASE).await;

    let startup = Duration::from_secs(20);
    let loaded = c.wait_event("valid", LOADED, startup, |_| true).await;
    assert_eq!(
        events::with_reason(&loaded, LOADED)[0].type_.as_deref(),
        Some("Normal"),
        "{}",
        events::summary(&loaded)
    );
    let invalid = c.wait_event("invalid", INVALID, startup, |_| true).await;
    assert_eq!(
        events::with_reason(&invalid, INVALID)[0].type_.as_deref(),
        Some("Warning"),
        "{}",
        events::summary(&invalid)
    );
    // Once: a leader that posted per pass, or per leadership change, would repeat them.
    expect_counts_for(
        &c,
        Duration::from_secs(2),
        &[("valid", LOADED, 1), ("invalid", INVALID, 1)],
    )
    .await;
}

/// (b) Failover: two replicas; the leader is killed and, before the follower has taken
/// over, the valid window is broken (`duration: 1d`). The new leader reports it
/// (`WindowInvalid` naming `duration`) and repeats nothing the old leader posted.
#[tokio::test]
async fn events_are_posted_by_whoever_leads_after_a_failover() {
    let c = Cluster::new(ApiServer::shared(), "events-failover", KUMACO).await;
    let later = two_windows(&c).await;
    let a = c.replica("replica-a", &SHORT_LEASE).await;
    let b = c.replica("replica-b", &SHORT_LEASE).await;
    let (mut leader, follower) = match one_leader(&a, &b, SOON + SHORT_LEASE_DURATION).await {
        true => (a, b),
        false => (b, a),
    };

    // The first leader has posted its start-up events (so that "nothing twice" means
    // something below): a WindowLoaded is due only for a window's current data, so one
    // killed before posting would leave none for the old version.
    for (name, reason) in [("valid", LOADED), ("invalid", INVALID)] {
        events::wait_for(&c.client, &c.ns, name, reason, SOON, |_| true)
            .await
            .unwrap_or_else(|e| panic!("{} did not post its start-up events: {e:#}", leader.pod));
    }
    leader.process.kill();
    let killed = Instant::now();
    c.put_window(
        "valid",
        &[
            ("startTime", &later.to_string()),
            ("duration", "1d"),
            ("nodeSelector", &c.scope.selector()),
        ],
    )
    .await;
    assert_ne!(
        follower.leader_gauge().await,
        Some(1.0),
        "{} took over within {:?} of the leader's death, before the edit the test meant to \
         make while it followed",
        follower.pod,
        killed.elapsed()
    );
    // The takeover (its own bound in tests/in_progress.rs; here only a precondition).
    let bound = SHORT_LEASE_DURATION + SOON;
    poll_until(
        &format!(
            "{} to take over within {bound:?} of the leader's death",
            follower.pod
        ),
        bound.saturating_sub(killed.elapsed()),
        || async { follower.leader_gauge().await == Some(1.0) },
    )
    .await;
    let took_over = killed.elapsed();
    let timeout = (SHORT_LEASE_DURATION + SOON).saturating_sub(took_over);
    let found = events::wait_for(&c.client, &c.ns, "valid", INVALID, timeout, |e| {
        e.note.as_deref().is_some_and(|n| n.contains("duration"))
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{} took over {took_over:?} after the leader's death and should report the edit \
             it saw while following: {e:#}",
            follower.pod
        )
    });
    let posted = events::with_reason(&found, INVALID);
    assert_eq!(
        posted[0].reporting_instance.as_deref(),
        Some(follower.pod.as_str()),
        "the new leader reports the edit: {}",
        events::summary(&found)
    );
    // The new leader posts what is missing, and nothing twice.
    expect_counts_for(
        &c,
        Duration::from_secs(2),
        &[
            ("valid", LOADED, 1),
            ("valid", INVALID, 1),
            ("invalid", INVALID, 1),
        ],
    )
    .await;
}

/// (c) A window active now is deleted: it ends now (`UnderMaintenance` False) and its
/// occurrence, which was announced (`WindowStarted`), gets its `WindowEnded`, regarding
/// the deleted ConfigMap.
#[tokio::test]
async fn deleting_an_active_window_posts_window_ended() {
    let c = Cluster::new(ApiServer::shared(), "events-deleted", KUMACO).await;
    let a = c.node("a", &[]).await;
    let _kumaco = c.kumaco(&[]).await;
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    c.wait_status(&a, Some("True"), until(start) + EDGE_BOUND)
        .await;
    c.wait_event("w", STARTED, SOON, |_| true).await;

    c.delete_window("w").await;
    let cond = c.wait_status(&a, Some("False"), PROMPT).await;
    assert_eq!(cond.reason.as_deref(), Some(REASON_NO_WINDOW), "{cond:?}");
    c.wait_event("w", ENDED, SOON, |_| true).await;
    expect_counts_for(
        &c,
        Duration::from_secs(1),
        &[("w", LOADED, 1), ("w", STARTED, 1), ("w", ENDED, 1)],
    )
    .await;
}

/// (d) kumaco is restarted (killed, started again with the same flags) while an
/// occurrence it announced is active. Nothing changed: no event is posted again, neither
/// `WindowLoaded` for the unchanged windows nor `WindowStarted` for the occurrence.
///
/// A single instance without leader election: the restarted process leads from its first
/// pass, so a repeat cannot hide behind a lost one (a restarted replica that loads the
/// windows before it wins the Lease is case (a)).
#[tokio::test]
async fn restarting_kumaco_repeats_no_event() {
    let c = Cluster::new(ApiServer::shared(), "events-restart", KUMACO).await;
    let a = c.node("a", &[]).await;
    let later = whole_second(Timestamp::now() + SignedDuration::from_hours(1));
    c.put_one_shot("later", later, "30m", &c.scope.selector())
        .await;
    let mut kumaco = c.kumaco(&[]).await;
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    c.wait_status(&a, Some("True"), until(start) + EDGE_BOUND)
        .await;
    c.wait_event("w", STARTED, SOON, |_| true).await;
    c.wait_event("w", LOADED, SOON, |_| true).await;
    c.wait_event("later", LOADED, SOON, |_| true).await;

    kumaco.kill();
    let _kumaco = c.kumaco(&[]).await;
    // A node added now shows that the new process has reconciled.
    let b = c.node("b", &[]).await;
    c.wait_status(&b, Some("True"), SOON).await;
    // And a few seconds for anything it would post (events are posted asynchronously).
    expect_counts_for(
        &c,
        Duration::from_secs(3),
        &[("w", LOADED, 1), ("w", STARTED, 1), ("later", LOADED, 1)],
    )
    .await;
    assert_eq!(
        events::count(&c.events("w").await, ENDED),
        0,
        "{}",
        events::summary(&c.events("w").await)
    );
}

// ---------------------------------------------------------------------------------------
// Steady state

/// `@every 1s` lasting an hour: a new occurrence starts every second, and 3,600 overlap.
/// Once the 20 selected nodes are under maintenance nothing changes for them: kumaco
/// writes nothing for 15 s (counted by the API server, on a server of this test's own),
/// and announces the window at most once.
#[tokio::test]
async fn overlapping_occurrences_write_nothing_in_steady_state() {
    // A private API server: its request counters must see no other test's writes.
    let server = tokio::task::spawn_blocking(ApiServer::start_fresh)
        .await
        .unwrap()
        .expect("a private API server");
    let c = Cluster::new(&server, "overlap-steady", KUMACO).await;
    let mut nodes = Vec::new();
    for i in 0..20 {
        nodes.push(c.node(&format!("n{i:02}"), &[]).await);
    }
    c.put_window(
        "w",
        &[
            ("startTime", "@every 1s"),
            ("duration", "1h"),
            ("nodeSelector", &c.scope.selector()),
        ],
    )
    .await;
    let kumaco = c.kumaco(&[]).await;
    for node in &nodes {
        c.wait_status(node, Some("True"), SOON).await;
    }

    let changes = NodeChanges::start(&c.client, &c.scope.selector()).await;
    let before = settling_node_writes(&c.client, Duration::from_secs(3)).await;
    changes.reset();
    let measured = Instant::now();
    // The observation period: the scenario, not synchronisation.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let writes = node_writes(&c.client).await - before;
    let period = measured.elapsed();
    let seen = changes.counts();

    // Both checks, so that a failure shows everything that is wrong.
    let mut wrong = Vec::new();
    if writes != 0.0 {
        wrong.push(format!(
            "{writes} writes to nodes in {period:?} of steady state (apiserver_request_total); \
             a watch saw {} node changes ({} to {} per node); {} {UNDER_MAINTENANCE} now: {:?}",
            seen.values().sum::<usize>(),
            seen.values().min().copied().unwrap_or(0),
            seen.values().max().copied().unwrap_or(0),
            nodes[0],
            changes.last_message(&nodes[0]),
        ));
    }
    let w_events = c.events("w").await;
    let started = events::count(&w_events, STARTED);
    if started > 1 {
        let first: Vec<Event> = events::with_reason(&w_events, STARTED)
            .into_iter()
            .take(4)
            .cloned()
            .collect();
        wrong.push(format!(
            "{started} {STARTED} events for one window whose occurrences overlap (at most 1); \
             the first ones:\n{}",
            events::summary(&first)
        ));
    }
    assert!(
        wrong.is_empty(),
        "{}\nkumaco log {}",
        wrong.join("\n"),
        kumaco.log_path().display()
    );
}

// ---------------------------------------------------------------------------------------
// Helpers

/// Window `valid`, a one-shot an hour from now (loaded, not active), and window `invalid`
/// (`duration: 1d`). Returns `valid`'s start.
async fn two_windows(c: &Cluster) -> Timestamp {
    let selector = c.scope.selector();
    let later = whole_second(Timestamp::now() + SignedDuration::from_hours(1));
    c.put_one_shot("valid", later, "30m", &selector).await;
    c.put_window(
        "invalid",
        &[
            ("startTime", "@daily"),
            ("duration", "1d"),
            ("nodeSelector", &selector),
        ],
    )
    .await;
    later
}

/// The replicas' Lease as a replica `holder` leaves it when it dies right after a renew:
/// held, renewed now. A new candidate must wait a lease duration before taking over.
async fn held_lease(c: &Cluster, holder: &str) {
    let now = MicroTime(Timestamp::now());
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(REPLICA_LEASE.into()),
            namespace: Some(c.ns.clone()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(SHORT_LEASE_DURATION.as_secs() as i32),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    };
    Api::<Lease>::namespaced(c.client.clone(), &c.ns)
        .create(&PostParams::default(), &lease)
        .await
        .unwrap_or_else(|e| panic!("creating the Lease: {e}"));
}

/// Waits until the node's `MaintenanceInProgress` status is `status`; the condition.
async fn wait_mip(
    c: &Cluster,
    node: &str,
    status: Option<&str>,
    timeout: Duration,
) -> NodeCondition {
    let found = wait_for_condition(&c.client, node, MIP, timeout, |cond| {
        has_status(cond, status)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    condition(&found, MIP).cloned().unwrap_or_default()
}

/// Checks for `period` (polling) that each `(window, reason, n)` has exactly `n` events,
/// failing at the first excess and, at the end, on any shortfall.
async fn expect_counts_for(c: &Cluster, period: Duration, expected: &[(&str, &str, usize)]) {
    let end = Instant::now() + period;
    loop {
        let last = Instant::now() >= end;
        for (name, reason, n) in expected {
            let all = c.events(name).await;
            let got = events::count(&all, reason);
            if got > *n || (last && got != *n) {
                panic!(
                    "{got} {reason} events about {name}, expected {n} (once per thing \
                     reported); its events:\n{}",
                    events::summary(&all)
                );
            }
        }
        if last {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// [`node_writes`] once it has not moved for a second, or after `at_most` whatever it
/// is then (a kumaco that never stops writing is what the caller measures next).
async fn settling_node_writes(client: &kube::Client, at_most: Duration) -> f64 {
    let end = Instant::now() + at_most;
    let mut last = node_writes(client).await;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = node_writes(client).await;
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// Counts the changes (new resourceVersions) of a scope's nodes seen by a watch of its
/// own, from the moment [`NodeChanges::start`] returns: context for a write count.
struct NodeChanges {
    counts: Arc<Mutex<BTreeMap<String, usize>>>,
    messages: Arc<Mutex<BTreeMap<String, Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl NodeChanges {
    async fn start(client: &kube::Client, selector: &str) -> NodeChanges {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().labels(selector);
        let counts = Arc::new(Mutex::new(BTreeMap::new()));
        let messages = Arc::new(Mutex::new(BTreeMap::new()));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let (counts, messages) = (counts.clone(), messages.clone());
            async move {
                let mut listed_tx = Some(listed_tx);
                let mut versions: BTreeMap<String, Option<String>> = BTreeMap::new();
                let mut events = watcher(api, config).boxed();
                while let Some(event) = events.next().await {
                    match event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            let name = n.metadata.name.clone().unwrap_or_default();
                            let version = n.metadata.resource_version.clone();
                            let message =
                                condition(&n, UNDER_MAINTENANCE).and_then(|c| c.message.clone());
                            messages.lock().unwrap().insert(name.clone(), message);
                            let old = versions.insert(name.clone(), version.clone());
                            if listed_tx.is_none() && old.is_some_and(|old| old != version) {
                                *counts.lock().unwrap().entry(name).or_insert(0) += 1;
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                }
            }
        });
        tokio::time::timeout(SOON, listed)
            .await
            .expect("listing the nodes for the change count timed out")
            .expect("the change count's watch ended before listing");
        NodeChanges {
            counts,
            messages,
            task,
        }
    }

    /// Forgets the changes counted so far.
    fn reset(&self) {
        self.counts.lock().unwrap().clear();
    }

    fn counts(&self) -> BTreeMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }

    fn last_message(&self, node: &str) -> Option<String> {
        self.messages.lock().unwrap().get(node).cloned().flatten()
    }
}

impl Drop for NodeChanges {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn status_of(c: Option<&NodeCondition>) -> Option<&str> {
    c.map(|c| c.status.as_str())
}
