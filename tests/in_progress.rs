//! `MaintenanceInProgress` and leader election end to end: the real
//! kumaco binary against a real API server, with
//!
//! - a test reboot agent ([`RebootAgent`]) that "reboots" every node kumaco lets into
//!   maintenance: after 0.5 to 3 s it sets `kured.dev/RebootRequired=False`, which ends
//!   the maintenance (`MaintenanceCompleted`) and frees the slot;
//! - an independent observer ([`Observer`]) with its own watch on the test's nodes, which
//!   records every change of `MaintenanceInProgress`, the most nodes True at once (the
//!   ceiling is checked there, not in kumaco's metrics or logs) and the start order.
//!
//! Each test has its own namespace (windows, Lease), nodes ([`Scope`]) and kumaco. Windows
//! are one-shot; most start a few seconds after kumaco, so every decision is observed from
//! the first. Waits watch with deadlines; the sleeps are the scenario (a reboot's length,
//! the moment of a kill) or the observation period of a "nothing happens" check.
//!
//! Figures are printed for collection (`cargo test --test in_progress -- --nocapture 2>&1
//! | grep -E 'MAX_IN_PROGRESS|CHAOS|FAILOVER_MS|EDGE_LATENCY_MS'`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use kumaco::conditions::{MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use testkit::ApiServer;
use testkit::agent::{MAINTENANCE_IN_PROGRESS as MIP, Observed, REBOOT_REQUIRED, random_duration};
use testkit::cluster::{Cluster, REASON_NO_WINDOW, REPLICA_LEASE};
use testkit::faultproxy::{Fault, proxied};
use testkit::history::History;
use testkit::kumaco::{SHORT_LEASE, SHORT_LEASE_DURATION, SHORT_LEASE_RETRY_PERIOD, one_leader};
use testkit::nodes::{condition, has_status, wait_for_condition};
use testkit::time::{EDGE_BOUND, assert_edge_latency, edge_in, poll_until, until, whole_second};

/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

const REBOOT_BLOCKED: &str = "kured.dev/RebootBlocked";
const REQUIRE_REBOOT: &str = "--require-condition=kured.dev/RebootRequired";
const BLOCK_ON_BLOCKED: &str = "--block-condition=kured.dev/RebootBlocked";

const REASON_STARTED: &str = "MaintenanceWindow";
const REASON_COMPLETED: &str = "MaintenanceCompleted";
const REASON_WINDOW_ENDED: &str = "MaintenanceWindowEnded";
const REASON_WAITING: &str = "WaitingForSlot";
const REASON_BLOCKED: &str = "Blocked";
const REASON_REQUIREMENT: &str = "RequirementNotMet";
const REASON_CUTOFF: &str = "StartCutoff";

/// How soon kumaco must react to a node change (a watch event, then a pass).
const PROMPT: Duration = Duration::from_secs(2);
/// Waits with no documented deadline (the first pass after startup).
const SOON: Duration = Duration::from_secs(10);
/// A whole 20-node rollout at ceiling 2 takes about 20 s (10 reboots of 1.75 s on average
/// per slot, plus a pass to reuse each slot); the margin is for a loaded machine.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(50);
/// How long a reboot takes in these tests (the agent's random pause).
const REBOOT: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(3));
/// Starts written in one pass reach the API server in whatever order kumaco sends them;
/// two starts closer than this may be seen in either order. A wrong pick is seen later:
/// the skipped node waits for the next free slot, at least one reboot (0.5 s) away in
/// most cases.
const SAME_PASS: Duration = Duration::from_millis(500);

// ---------------------------------------------------------------------------------------
// Rollouts: ceiling and order

/// 20 nodes need a reboot, ceiling 2: never more than 2 at once, every node rebooted once,
/// in the brain's order (oldest requirement first, ties by name).
#[tokio::test]
async fn rollout_with_a_count_ceiling_keeps_the_ceiling_and_the_order() {
    rollout("count", "2", 2).await;
}

/// The same with a percentage: 33% of 20 nodes is 6.6, rounded down to 6 (rounding up or
/// to nearest would give 7).
#[tokio::test]
async fn rollout_with_a_percent_ceiling_rounds_down() {
    rollout("percent", "33%", 6).await;
}

async fn rollout(name: &str, max_in_progress: &str, ceiling: usize) {
    let c = cluster(name).await;
    // Ages scrambled with respect to names, each age shared by two nodes, so that the
    // order "oldest RebootRequired first, ties by name" differs from name order and from
    // creation order, and ties occur.
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(2));
    let mut aged = Vec::new();
    for i in 0..20i64 {
        let node = c.node(&format!("n{i:02}"), &[]).await;
        let since = base + SignedDuration::from_mins((i * 7) % 10);
        c.needs_reboot_since(&node, since).await;
        aged.push((since, node));
    }
    aged.sort();
    let expected: Vec<String> = aged.into_iter().map(|(_, node)| node).collect();

    let observer = c.observer().await;
    let agent = c.agent(REBOOT).await;
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    let ceiling_flag = format!("--max-in-progress={max_in_progress}");
    let _kumaco = c.kumaco(&[REQUIRE_REBOOT, &ceiling_flag]).await;

    let seen = observer
        .wait_until(
            "every node's maintenance to complete",
            until(start) + ROLLOUT_TIMEOUT,
            |o| all_completed(o, &expected),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "MAX_IN_PROGRESS {} ceiling={ceiling} flag={max_in_progress} nodes=20 scope={}",
        seen.max_in_progress,
        c.scope.value()
    );
    assert!(
        seen.max_in_progress <= ceiling,
        "{} nodes were in progress at once, ceiling {ceiling} (--max-in-progress={max_in_progress}):\n{}",
        seen.max_in_progress,
        seen.timeline()
    );
    assert_eq!(
        seen.max_in_progress,
        ceiling,
        "20 nodes were waiting: every slot should have been used:\n{}",
        seen.timeline()
    );
    for node in &expected {
        assert_eq!(seen.start_count(node), 1, "{node}:\n{}", seen.timeline());
    }
    assert_eq!(agent.reboots(), 20, "reboots: {:?}", agent.rebooted());
    check_nothing_before(&seen, start);
    check_start_order(&seen, &expected);
    check_true_conditions(&seen, &c.window_ref("w"));
    check_why_not_written_once_per_reason(&seen);
    check_waiting_messages(&seen, ceiling);
    assert!(
        seen.changes.iter().any(|ch| reason_is(ch, REASON_WAITING)),
        "20 nodes for {ceiling} slots: some should have shown {REASON_WAITING}:\n{}",
        seen.timeline()
    );
}

// ---------------------------------------------------------------------------------------
// Blocking and required conditions

/// Blocked nodes wait (reason `Blocked`) while younger nodes go ahead, and start once the
/// blocker is cleared; a blocker that appears on a node already in progress does not end
/// its maintenance. Also: a node without the required condition shows
/// `RequirementNotMet`, and a node no window selects never gets the condition.
#[tokio::test]
async fn blocked_nodes_wait_and_a_late_blocker_revokes_nothing() {
    let c = cluster("blocked").await;
    let rollout = [("rollout", "yes")];
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let at = |mins| base + SignedDuration::from_mins(mins);
    // Oldest first: `first` (which the agent keeps in maintenance for a while), then the
    // blocked nodes, then the free ones: without their blockers, the blocked nodes would
    // go next.
    let first = c.node("first", &rollout).await;
    c.needs_reboot_since(&first, at(0)).await;
    let mut blocked = Vec::new();
    for i in 1..=3 {
        let node = c.node(&format!("blocked{i}"), &rollout).await;
        c.needs_reboot_since(&node, at(i)).await;
        c.set(&node, REBOOT_BLOCKED, "True").await;
        blocked.push(node);
    }
    let mut free = Vec::new();
    for i in 1..=5 {
        let node = c.node(&format!("free{i}"), &rollout).await;
        c.needs_reboot_since(&node, at(10 + i)).await;
        free.push(node);
    }
    let idle = c.node("idle", &rollout).await;
    c.set(&idle, REBOOT_REQUIRED, "False").await;
    // The oldest of all, but no window selects it.
    let outside = c.node("outside", &[]).await;
    c.needs_reboot_since(&outside, base - SignedDuration::from_hours(1))
        .await;

    let observer = c.observer().await;
    let agent = c.agent(REBOOT).await;
    agent.hold(&first);
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", "rollout=yes").await;
    let _kumaco = c
        .kumaco(&[REQUIRE_REBOOT, BLOCK_ON_BLOCKED, "--max-in-progress=2"])
        .await;

    observer
        .wait_until(
            "the oldest node in progress, the blocked ones Blocked",
            until(start) + SOON,
            |o| {
                o.in_progress.contains(&first)
                    && blocked
                        .iter()
                        .all(|n| o.status_reason(n) == Some(false_because(REASON_BLOCKED)))
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    // A blocker appears on the node in progress: its maintenance goes on (a reboot often
    // raises alerts). Observed for a while: kumaco reacts to the node change in one pass.
    c.set(&first, REBOOT_BLOCKED, "True").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = observer.observed();
    assert_eq!(
        seen.status_reason(&first),
        Some(("True".into(), REASON_STARTED.into())),
        "a blocker on a node in progress must not end its maintenance: {:#?}",
        seen.history(&first)
    );
    assert_eq!(seen.start_count(&first), 1, "{:#?}", seen.history(&first));
    agent.release(&first);

    let mut done = free.clone();
    done.push(first.clone());
    let seen = observer
        .wait_until("the unblocked nodes to complete", ROLLOUT_TIMEOUT, |o| {
            all_completed(o, &done)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    for node in &blocked {
        let history = seen.history(node);
        assert_eq!(seen.start_count(node), 0, "{node} is blocked: {history:#?}");
        assert_eq!(
            history.len(),
            1,
            "{node}: one {REASON_BLOCKED} write, whatever happens elsewhere: {history:#?}"
        );
        let message = message_of(seen.condition(node));
        assert!(
            message.contains(REBOOT_BLOCKED),
            "{node}: the message should name the blocking condition: {message:?}"
        );
    }

    // Cleared: the blocked nodes go.
    for node in &blocked {
        c.set(node, REBOOT_BLOCKED, "False").await;
    }
    let seen = observer
        .wait_until(
            "the formerly blocked nodes to complete",
            ROLLOUT_TIMEOUT,
            |o| all_completed(o, &blocked),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    assert!(
        seen.max_in_progress <= 2,
        "ceiling 2 exceeded:\n{}",
        seen.timeline()
    );
    assert_eq!(agent.reboots(), 9, "reboots: {:?}", agent.rebooted());
    assert_eq!(
        seen.status_reason(&idle),
        Some(false_because(REASON_REQUIREMENT)),
        "{:#?}",
        seen.history(&idle)
    );
    let message = message_of(seen.condition(&idle));
    assert!(
        message.contains(REBOOT_REQUIRED),
        "{idle}: the message should name the missing required condition: {message:?}"
    );
    assert_eq!(seen.start_count(&idle), 0);
    assert!(
        seen.history(&outside).is_empty() && seen.condition(&outside).is_none(),
        "{outside} was never under maintenance and must never get {MIP}: {:#?}",
        seen.history(&outside)
    );
    check_nothing_before(&seen, start);
    check_true_conditions(&seen, &c.window_ref("w"));
    check_why_not_written_once_per_reason(&seen);
}

// ---------------------------------------------------------------------------------------
// Window end and start cutoff

/// Without `--stop-at-window-end`, a started maintenance goes on past the window end
/// until its required condition goes; a node still waiting for a slot gets
/// `NoActiveMaintenanceWindow`. Also the default ceiling (1).
#[tokio::test]
async fn started_maintenance_outlives_its_window() {
    let c = cluster("outlives").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let a = c.node("a", &[]).await;
    c.needs_reboot_since(&a, base).await;
    let b = c.node("b", &[]).await;
    c.needs_reboot_since(&b, base + SignedDuration::from_mins(1))
        .await;
    let observer = c.observer().await;
    let start = edge_in(3);
    let end = start + SignedDuration::from_secs(6);
    c.put_one_shot("w", start, "6s", &c.scope.selector()).await;
    // No --max-in-progress: the default is 1.
    let _kumaco = c.kumaco(&[REQUIRE_REBOOT]).await;

    observer
        .wait_until("a in progress, b waiting", until(start) + EDGE_BOUND, |o| {
            o.in_progress.contains(&a) && o.status_reason(&b) == Some(false_because(REASON_WAITING))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    // The window ends: `a` leaves UnderMaintenance, and the same apply keeps its
    // maintenance in progress.
    let node_a = wait_for_condition(
        &c.client,
        &a,
        UNDER_MAINTENANCE,
        until(end) + EDGE_BOUND,
        |cond| has_status(cond, Some("False")),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        condition(&node_a, MIP).map(|c| c.status.as_str()),
        Some("True"),
        "a started maintenance goes on past the window end: {:?}",
        node_a.status
    );
    observer
        .wait_until(
            "b's why-not to become NoActiveMaintenanceWindow",
            until(end) + EDGE_BOUND,
            |o| o.status_reason(&b) == Some(false_because(REASON_NO_WINDOW)),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    // And it stays so: past the end nothing should happen to it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = observer.observed();
    assert_eq!(
        seen.status_reason(&a),
        Some(("True".into(), REASON_STARTED.into())),
        "{:#?}",
        seen.history(&a)
    );

    // The reboot is done: the maintenance completes, window or not.
    c.set(&a, REBOOT_REQUIRED, "False").await;
    let seen = observer
        .wait_until("a's maintenance to complete", PROMPT, |o| {
            o.ended_with(&a, REASON_COMPLETED)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(seen.start_count(&a), 1, "{:#?}", seen.history(&a));
    assert_eq!(seen.start_count(&b), 0, "{:#?}", seen.history(&b));
    assert_eq!(seen.max_in_progress, 1, "{}", seen.timeline());
    check_waiting_messages(&seen, 1);
    check_why_not_written_once_per_reason(&seen);
}

/// `--planned-lead-time`: `MaintenancePlanned=True` from `start - lead` on
/// the nodes a window will select, until each node's maintenance begins: at once for the
/// node that gets the slot, when the slot frees for the one that waits; never on a node
/// that needs no reboot.
#[tokio::test]
async fn planned_runs_from_the_lead_time_until_each_maintenance_begins() {
    let c = cluster("planned").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let a = c.node("a", &[]).await;
    c.needs_reboot_since(&a, base).await;
    let b = c.node("b", &[]).await;
    c.needs_reboot_since(&b, base + SignedDuration::from_mins(1))
        .await;
    let idle = c.node("idle", &[]).await;
    let histories = History::start_all(
        &c.client,
        &[a.clone(), b.clone(), idle.clone()],
        MAINTENANCE_PLANNED,
    )
    .await;
    // kumaco first: on a loaded machine its start-up must not overlap the lead edge.
    let _kumaco = c.kumaco(&[REQUIRE_REBOOT, "--planned-lead-time=3s"]).await;
    let start = edge_in(6);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;

    // From the lead time: both nodes that need a reboot, naming the window and start.
    let lead_edge = start - SignedDuration::from_secs(3);
    for node in [&a, &b] {
        let found = wait_for_condition(
            &c.client,
            node,
            MAINTENANCE_PLANNED,
            until(lead_edge) + EDGE_BOUND,
            |cond| has_status(cond, Some("True")),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        let cond = condition(&found, MAINTENANCE_PLANNED).unwrap();
        let at = cond.last_transition_time.as_ref().unwrap().0;
        assert!(at >= lead_edge, "planned at {at}, before {lead_edge}");
        assert_eq!(
            cond.message.as_deref(),
            Some(
                format!(
                    "maintenance window {} starts at {}",
                    c.window_ref("w"),
                    start.strftime("%Y-%m-%dT%H:%M:%SZ")
                )
                .as_str()
            )
        );
    }
    // At the start: `a` gets the slot and its plan is over; `b` waits, still planned.
    let found = wait_for_condition(
        &c.client,
        &a,
        MAINTENANCE_PLANNED,
        until(start) + EDGE_BOUND,
        |cond| has_status(cond, Some("False")),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        condition(&found, MIP).map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        condition(&found, MAINTENANCE_PLANNED).and_then(|c| c.reason.as_deref()),
        Some("MaintenanceStarted")
    );
    // `a` rebooted: the slot goes to `b`, whose plan ends then.
    c.set(&a, REBOOT_REQUIRED, "False").await;
    wait_for_condition(&c.client, &b, MAINTENANCE_PLANNED, PROMPT, |cond| {
        has_status(cond, Some("False"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    // The independent watch has seen each node's whole story, and nothing more.
    let expected = [None, Some("True".to_string()), Some("False".to_string())];
    for (node, history) in [&a, &b].iter().zip(&histories) {
        let seen = history.statuses_ending_with(Some("False"), SOON).await;
        assert_eq!(seen, expected, "{node}");
    }
    assert_eq!(
        histories[2].statuses(),
        [None],
        "{idle} needs no reboot: nothing planned"
    );
}

/// `--stop-at-window-end` ends the maintenance at the window end, required condition or
/// not, within the edge bound.
#[tokio::test]
async fn stop_at_window_end_ends_maintenance_at_the_edge() {
    let c = cluster("stop-at-end").await;
    let a = c.node("a", &[]).await;
    c.needs_reboot_since(&a, whole_second(Timestamp::now()))
        .await;
    let observer = c.observer().await;
    let start = edge_in(3);
    let end = start + SignedDuration::from_secs(5);
    c.put_one_shot("w", start, "5s", &c.scope.selector()).await;
    let _kumaco = c.kumaco(&[REQUIRE_REBOOT, "--stop-at-window-end"]).await;

    observer
        .wait_until("a in progress", until(start) + EDGE_BOUND, |o| {
            o.in_progress.contains(&a)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let seen = observer
        .wait_until(
            "a's maintenance to end with the window",
            until(end) + EDGE_BOUND + Duration::from_secs(3),
            |o| o.ended_with(&a, REASON_WINDOW_ENDED),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    check_edge_latency(&seen, &a, end, "stop-at-window-end");
}

/// With no required condition configured, a maintenance ends with its window.
#[tokio::test]
async fn without_required_conditions_maintenance_ends_with_the_window() {
    let c = cluster("no-required").await;
    let a = c.node("a", &[]).await;
    let observer = c.observer().await;
    let start = edge_in(3);
    let end = start + SignedDuration::from_secs(5);
    c.put_one_shot("w", start, "5s", &c.scope.selector()).await;
    let _kumaco = c.kumaco(&[]).await;

    let seen = observer
        .wait_until("a in progress", until(start) + EDGE_BOUND, |o| {
            o.in_progress.contains(&a)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    check_edge_latency(&seen, &a, start, "start, no required condition");
    let message = message_of(seen.condition(&a));
    assert!(
        message.contains(&c.window_ref("w")),
        "the True message should name the window: {message:?}"
    );
    let seen = observer
        .wait_until(
            "a's maintenance to end with the window",
            until(end) + EDGE_BOUND + Duration::from_secs(3),
            |o| o.ended_with(&a, REASON_WINDOW_ENDED),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    check_edge_latency(&seen, &a, end, "end, no required condition");
}

/// `--start-cutoff=1m`: a node whose window has 20 s left does not start (`StartCutoff`),
/// up to the window end, while a node in a long window does.
#[tokio::test]
async fn start_cutoff_prevents_a_late_start() {
    let c = cluster("cutoff").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let late = c.node("late", &[("window", "late")]).await;
    c.needs_reboot_since(&late, base).await;
    let early = c.node("early", &[("window", "long")]).await;
    c.needs_reboot_since(&early, base + SignedDuration::from_mins(1))
        .await;
    let observer = c.observer().await;
    // Both windows began 40 s ago: `late` has 20 s left, `long` almost 10 minutes.
    let began = whole_second(Timestamp::now() - SignedDuration::from_secs(40));
    let late_end = began + SignedDuration::from_secs(60);
    c.put_one_shot("late", began, "60s", "window=late").await;
    c.put_one_shot("long", began, "10m", "window=long").await;
    let _kumaco = c
        .kumaco(&[REQUIRE_REBOOT, "--max-in-progress=2", "--start-cutoff=1m"])
        .await;

    let seen = observer
        .wait_until("early in progress, late held by the cutoff", SOON, |o| {
            o.in_progress.contains(&early)
                && o.status_reason(&late) == Some(false_because(REASON_CUTOFF))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        Timestamp::now() < late_end,
        "the test was too slow to see the cutoff before the window end"
    );
    // Up to the window end it does not start; then its why-not becomes "no window".
    let seen_end = observer
        .wait_until(
            "late's why-not to become NoActiveMaintenanceWindow",
            until(late_end) + EDGE_BOUND,
            |o| o.status_reason(&late) == Some(false_because(REASON_NO_WINDOW)),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        seen_end.start_count(&late),
        0,
        "less than the cutoff was left: no start: {:#?}",
        seen_end.history(&late)
    );
    assert_eq!(
        seen.history(&late).len(),
        1,
        "{REASON_CUTOFF} is written once: {:#?}",
        seen.history(&late)
    );
    check_why_not_written_once_per_reason(&seen_end);
}

// ---------------------------------------------------------------------------------------
// Crashes

/// A 20-node rollout at ceiling 2 while kumaco is SIGKILLed at random moments and
/// restarted at once (same flags and field manager), at least 10 times: never more than
/// 2 in progress, every node rebooted once.
#[tokio::test]
async fn sigkill_at_random_moments_never_exceeds_the_ceiling() {
    const MIN_KILLS: usize = 10;
    let c = cluster("chaos").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let mut nodes = Vec::new();
    for i in 0..20 {
        let node = c.node(&format!("n{i:02}"), &[]).await;
        c.needs_reboot_since(&node, base + SignedDuration::from_mins(i))
            .await;
        nodes.push(node);
    }
    let observer = c.observer().await;
    let agent = c.agent(REBOOT).await;
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    let args = [REQUIRE_REBOOT, "--max-in-progress=2"];
    let mut kumaco = c.kumaco(&args).await;
    observer
        .wait_until("the first start", until(start) + SOON, |o| {
            !o.starts.is_empty()
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut kills, mut kills_mid_rollout) = (0, 0);
    loop {
        let rolled_out = all_completed(&observer.observed(), &nodes);
        if rolled_out && kills >= MIN_KILLS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after {kills} kills the rollout is not done:\n{}",
            observer.observed().summary()
        );
        // A random moment: the scenario, not synchronisation.
        tokio::time::sleep(random_duration(
            Duration::from_millis(200),
            Duration::from_secs(2),
        ))
        .await;
        kumaco.kill();
        kills += 1;
        if !rolled_out {
            kills_mid_rollout += 1;
        }
        kumaco = c.kumaco(&args).await;
    }

    let seen = observer.observed();
    eprintln!(
        "CHAOS kills={kills} kills_mid_rollout={kills_mid_rollout} max_in_progress={} \
         ceiling=2 relists={} scope={}",
        seen.max_in_progress,
        seen.relists,
        c.scope.value()
    );
    assert!(
        seen.max_in_progress <= 2,
        "{} in progress at once, ceiling 2, with {kills} kills:\n{}",
        seen.max_in_progress,
        seen.timeline()
    );
    for node in &nodes {
        assert_eq!(seen.start_count(node), 1, "{node}:\n{}", seen.timeline());
    }
    assert_eq!(agent.reboots(), 20, "reboots: {:?}", agent.rebooted());
    check_start_order(&seen, &nodes);
    check_why_not_written_once_per_reason(&seen);
}

/// The ceiling lowered (kumaco restarted with a smaller `--max-in-progress`) while more
/// nodes are in progress than it allows: none is preempted, and none is added until the
/// count drops below the new ceiling.
#[tokio::test]
async fn lowering_the_ceiling_preempts_nothing_and_waits_for_the_count_to_drop() {
    let c = cluster("lowered").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let mut nodes = Vec::new();
    for i in 0..4 {
        let node = c.node(&format!("n{i}"), &[]).await;
        c.needs_reboot_since(&node, base + SignedDuration::from_mins(i))
            .await;
        nodes.push(node);
    }
    let (running, last) = (&nodes[..3], &nodes[3]);
    let observer = c.observer().await;
    let agent = c.agent(REBOOT).await;
    for node in &nodes {
        agent.hold(node);
    }
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    let mut kumaco = c.kumaco(&[REQUIRE_REBOOT, "--max-in-progress=3"]).await;
    observer
        .wait_until("the 3 oldest in progress", until(start) + SOON, |o| {
            running.iter().all(|n| o.in_progress.contains(n))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    kumaco.kill();
    let _kumaco = c.kumaco(&[REQUIRE_REBOOT, "--max-in-progress=1"]).await;
    // One by one, the running maintenances complete; the waiting node may start only
    // when none is left (1 slot). Each step is observed for a while: nothing may start.
    for (i, node) in running.iter().enumerate() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let seen = observer.observed();
        assert_eq!(
            seen.in_progress.len(),
            3 - i,
            "ceiling lowered to 1: nothing preempted, nothing added:\n{}",
            seen.timeline()
        );
        assert_eq!(seen.start_count(last), 0, "{}", seen.timeline());
        agent.release(node);
        observer
            .wait_until("the released node to complete", SOON, |o| {
                o.ended_with(node, REASON_COMPLETED)
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let seen = observer
        .wait_until("the last node to start in the freed slot", SOON, |o| {
            o.in_progress.contains(last)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(seen.max_in_progress, 3, "{}", seen.timeline());
    for node in &nodes {
        assert_eq!(seen.start_count(node), 1, "{node}:\n{}", seen.timeline());
    }
    check_why_not_written_once_per_reason(&seen);
}

// ---------------------------------------------------------------------------------------
// Leader election

/// Two replicas: exactly one leads and writes. SIGKILL the leader: the other takes over
/// within the lease duration plus a retry period, the writes of the two never interleave,
/// the ceiling holds through the failover, and the restarted replica follows.
/// A rolling update SIGTERMs the leader: it releases the Lease on the way out, the
/// standby (watching the Lease) takes over at once, and a window edge one second later
/// lands within the documented bound (docs/design.md, Timing), with the default 15 s
/// lease duration that a SIGKILL would have to wait out.
#[tokio::test]
async fn sigterm_hands_the_lease_over_and_an_edge_in_the_gap_lands_on_time() {
    let c = cluster("handover").await;
    let node = c.node("n", &[]).await;
    let a = c.replica("replica-a", &[]).await;
    let b = c.replica("replica-b", &[]).await;
    let a_leads = one_leader(&a, &b, SOON + SHORT_LEASE_DURATION).await;
    let (mut leader, follower) = if a_leads { (a, b) } else { (b, a) };
    let edge = edge_in(4);
    c.put_one_shot("w", edge, "10m", &c.scope.selector()).await;
    let history = History::start(&c.client, &node, UNDER_MAINTENANCE).await;

    // The scenario: the rolling update stops the leader a second before the edge.
    tokio::time::sleep(until(edge - SignedDuration::from_secs(1))).await;
    let terminated = Instant::now();
    let status = leader.terminate().await;
    assert!(status.success(), "{} exited with {status}", leader.pod);
    let exited_ms = terminated.elapsed().as_millis();
    let summary = leader.log_summary();

    let changed = c.wait_status(&node, Some("True"), EDGE_BOUND + SOON).await;
    let statuses = history.statuses_ending_with(Some("True"), SOON).await;
    assert_eq!(
        statuses,
        [None, Some("True".to_string())],
        "one transition, no flapping"
    );
    let at = changed
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
        .expect("a transition time");
    let released = summary
        .released
        .last()
        .copied()
        .expect("a release in the log");
    let took_over = *follower
        .log_summary()
        .became_leader
        .last()
        .expect("the follower became leader");
    println!(
        "HANDOVER exit_ms={exited_ms} takeover_ms={} edge={edge} written={at}",
        took_over.duration_since(released).as_millis()
    );
    // lastTransitionTime is whole seconds: the edge's own second means on time.
    assert!(
        at.duration_since(edge) <= SignedDuration::try_from(EDGE_BOUND).unwrap(),
        "the edge at {edge} landed at {at}, across the handover; {} log:\n{}",
        follower.pod,
        follower.process.log_tail(30)
    );
    assert_eq!(follower.leader_gauge().await, Some(1.0));
}

/// A SIGTERM while kumaco starts (the Lease taken, a gate's first read still pending)
/// ends it as a later one does: exit 0, the Lease released for a standby at once. Before
/// the signals were listened for from the process's start, such a SIGTERM met the
/// default action: killed, the Lease held until it expired.
#[tokio::test]
async fn a_sigterm_while_starting_releases_the_lease() {
    let c = cluster("young").await;
    let _node = c.node("n", &[]).await;
    // Takes connections (the kernel's backlog does) and never answers: the alert gate's
    // first read waits out its timeout, and the start waits for that read.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("--alertmanager-url=http://{}", silent.local_addr().unwrap());
    let flags = [url.as_str(), "--block-alerts", "--block-alerts-warm-up=0s"];
    let mut replica = c.replica("young-0", &flags).await;
    poll_until("the replica to hold the Lease", SOON, || async {
        lease_holder(&c).await.as_deref() == Some("young-0")
    })
    .await;
    let status = replica.terminate().await;
    let log = replica.process.log_tail(30);
    assert!(status.success(), "exited with {status}; log:\n{log}");
    assert!(
        replica.log_has("signal received while starting, stopping"),
        "the signal did not come while starting; log:\n{log}"
    );
    assert_eq!(lease_holder(&c).await, None, "the Lease was not released");
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_fail_over_without_overlap() {
    let c = cluster("leader").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let mut nodes = Vec::new();
    for i in 0..12 {
        let node = c.node(&format!("n{i:02}"), &[]).await;
        c.needs_reboot_since(&node, base + SignedDuration::from_mins(i))
            .await;
        nodes.push(node);
    }
    let observer = c.observer().await;
    let _agent = c.agent(REBOOT).await;
    let start = edge_in(3);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    let args = [&[REQUIRE_REBOOT, "--max-in-progress=2"][..], &SHORT_LEASE].concat();
    let a = c.replica("replica-a", &args).await;
    let b = c.replica("replica-b", &args).await;

    let a_leads = one_leader(&a, &b, SOON + SHORT_LEASE_DURATION).await;
    let (mut leader, follower) = if a_leads { (a, b) } else { (b, a) };
    assert_eq!(lease_holder(&c).await.as_deref(), Some(leader.pod.as_str()));

    // Let the first leader get the rollout going, then kill it at a random moment.
    observer
        .wait_until("4 nodes rebooted", until(start) + ROLLOUT_TIMEOUT, |o| {
            nodes
                .iter()
                .filter(|n| o.ended_with(n, REASON_COMPLETED))
                .count()
                >= 4
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    tokio::time::sleep(random_duration(Duration::ZERO, Duration::from_secs(1))).await;
    leader.kill();
    let killed_at = Timestamp::now();
    let killed = Instant::now();

    let bound = SHORT_LEASE_DURATION + SHORT_LEASE_RETRY_PERIOD;
    // The bound, plus time for a loaded machine and for this poll.
    let give_up = bound + Duration::from_secs(5);
    loop {
        if follower.leader_gauge().await == Some(1.0) {
            break;
        }
        assert!(
            killed.elapsed() < give_up,
            "{} did not take over within {give_up:?} of the leader's death; its log {}:\n{}",
            follower.pod,
            follower.process.log_path().display(),
            follower.process.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failover = killed.elapsed();
    eprintln!(
        "FAILOVER_MS {} lease_duration=4s retry_period=500ms scope={}",
        failover.as_millis(),
        c.scope.value()
    );
    // A little slack over the bound for scheduling on a loaded 2-core machine.
    assert!(
        failover <= bound + Duration::from_secs(1),
        "{} took over {failover:?} after the leader's death (bound {bound:?} + 1 s)",
        follower.pod
    );
    assert_eq!(
        lease_holder(&c).await.as_deref(),
        Some(follower.pod.as_str())
    );

    let seen = observer
        .wait_until(
            "the rollout to complete under the new leader",
            ROLLOUT_TIMEOUT,
            |o| all_completed(o, &nodes),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        seen.max_in_progress <= 2,
        "ceiling 2 exceeded across the failover:\n{}",
        seen.timeline()
    );
    for node in &nodes {
        assert_eq!(seen.start_count(node), 1, "{node}:\n{}", seen.timeline());
    }

    // The logs: the old leader wrote, then the new one, never both.
    let old = leader.log_summary();
    let new = follower.log_summary();
    assert!(
        !old.became_leader.is_empty() && !old.writes.is_empty(),
        "{} led and wrote: its log should say so: {old:#?}",
        leader.pod
    );
    assert!(
        new.lost_leadership.is_empty(),
        "{} never lost the lead: {new:#?}",
        follower.pod
    );
    let took_over = *new
        .became_leader
        .first()
        .unwrap_or_else(|| panic!("{} never logged \"became leader\": {new:#?}", follower.pod));
    assert!(
        took_over > killed_at,
        "{} became leader at {took_over}, before the leader was killed at {killed_at}",
        follower.pod
    );
    let first_new = *new
        .writes
        .first()
        .unwrap_or_else(|| panic!("{} wrote nothing after taking over", follower.pod));
    assert!(
        first_new >= took_over,
        "{} wrote at {first_new} before it became leader at {took_over}",
        follower.pod
    );
    let last_old = *old.writes.last().unwrap();
    assert!(
        last_old < first_new,
        "writes interleave: {} wrote at {last_old}, after {}'s first write at {first_new}",
        leader.pod,
        follower.pod
    );
    eprintln!(
        "FAILOVER_WRITE_GAP_MS {} (old leader's last write to new leader's first)",
        first_new.duration_since(last_old).as_millis()
    );

    // The killed replica comes back (same identity) and follows.
    let rejoined = c.replica(&leader.pod, &args).await;
    let watch_until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < watch_until {
        assert_eq!(
            (rejoined.leader_gauge().await, follower.leader_gauge().await),
            (Some(0.0), Some(1.0)),
            "after the restart of {}: exactly one leader, the one that took over",
            rejoined.pod
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        lease_holder(&c).await.as_deref(),
        Some(follower.pod.as_str())
    );
    let rejoined_log = rejoined.log_summary();
    assert!(
        rejoined_log.writes.is_empty() && rejoined_log.became_leader.is_empty(),
        "{} follows and must not write: {rejoined_log:#?}",
        rejoined.pod
    );
}

/// The chaos run's first violation, replayed (seed 413845030): a replica whose watches
/// the network swallowed wins the Lease and must not write from the cache they left
/// behind. Ceiling 1; `n1` needs a reboot for longer than `n0`, so it comes first.
///
/// Replica B's connections are blackholed (its proxy drops them silently) just before the
/// window opens: its watches then show nothing new for the rest of the test
/// (`--watch-timeout=1h`). Meanwhile `n1`'s reboot requirement goes away, the window
/// opens, and A starts `n0`, the only node eligible. A is killed and B takes over. From
/// its cache B would see no node started and both eligible: it would start `n1`, revoke
/// `n0`'s maintenance to stay under the ceiling, and move `UnderMaintenance`'s
/// `lastTransitionTime` on both. It must instead list again, on new connections, and
/// then write nothing, since the cluster is as it should be. Then B decides from what
/// the cluster shows: `n0` completes, and `n1` starts when it needs a reboot again.
#[tokio::test]
async fn a_new_leader_whose_watches_went_blind_writes_only_from_fresh_lists() {
    let c = cluster("blind-leader").await;
    let base = whole_second(Timestamp::now() - SignedDuration::from_hours(1));
    let n0 = c.node("n0", &[]).await;
    let n1 = c.node("n1", &[]).await;
    c.needs_reboot_since(&n1, base).await;
    c.needs_reboot_since(&n0, base + SignedDuration::from_mins(10))
        .await;
    let observer = c.observer().await;
    let start = edge_in(10);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    let args = [
        &[REQUIRE_REBOOT, "--max-in-progress=1", "--watch-timeout=1h"][..],
        &SHORT_LEASE,
    ]
    .concat();
    let mut a = c.replica("replica-a", &args).await;
    poll_until(
        &format!("{} to lead", a.pod),
        SOON + SHORT_LEASE_DURATION,
        || async { a.leader_gauge().await == Some(1.0) },
    )
    .await;
    let (proxy, via) = proxied(ApiServer::shared(), c.scope.value()).expect("a fault proxy");
    let b = c.replica_via("replica-b", &args, via).await;
    poll_until(&format!("{} to be ready", b.pod), SOON, || async {
        testkit::http::get(b.process.health_address(), "/readyz")
            .await
            .is_ok_and(|(code, _)| code == 200)
    })
    .await;
    assert_eq!(b.leader_gauge().await, Some(0.0), "{} follows", b.pod);

    // B goes blind: every connection it has is dropped silently; new ones work.
    tokio::time::sleep(until(start - SignedDuration::from_secs(4))).await;
    proxy.set(Fault::Blackhole);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set(Fault::None);
    c.set(&n1, REBOOT_REQUIRED, "False").await;
    let before = observer
        .wait_until("A to start n0 and not n1", until(start) + SOON, |o| {
            o.status_reason(&n0) == Some(("True".into(), REASON_STARTED.into()))
                && o.status_reason(&n1) == Some(false_because(REASON_REQUIREMENT))
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let um_before = under_maintenance_since(&c, &[&n0, &n1]).await;

    a.kill();
    let killed = Instant::now();
    poll_until(
        &format!("{} to take over", b.pod),
        SHORT_LEASE_DURATION + SOON,
        || async { b.leader_gauge().await == Some(1.0) },
    )
    .await;
    eprintln!(
        "BLIND_TAKEOVER_MS {} (SIGKILL of the leader to the blind standby leading)",
        killed.elapsed().as_millis()
    );
    poll_until(
        &format!("{} to list again and write", b.pod),
        SOON,
        || async { b.log_has("lists complete: writing") },
    )
    .await;
    // What B would write from its old cache, it writes within a pass of leading.
    tokio::time::sleep(PROMPT).await;
    let seen = observer.observed();
    assert_eq!(
        seen.history(&n0).len(),
        before.history(&n0).len(),
        "n0's maintenance was touched by the new leader:\n{}",
        seen.timeline()
    );
    assert_eq!(
        seen.start_count(&n1),
        0,
        "n1 was started without a reboot requirement:\n{}",
        seen.timeline()
    );
    assert!(seen.max_in_progress <= 1, "ceiling 1:\n{}", seen.timeline());
    assert_eq!(
        under_maintenance_since(&c, &[&n0, &n1]).await,
        um_before,
        "UnderMaintenance's lastTransitionTime moved without a transition"
    );

    // B now follows the cluster: n0 rebooted, then n1 needs a reboot again.
    c.set(&n0, REBOOT_REQUIRED, "False").await;
    observer
        .wait_until("B to end n0's maintenance", PROMPT + SOON, |o| {
            o.ended_with(&n0, REASON_COMPLETED)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    c.set(&n1, REBOOT_REQUIRED, "True").await;
    let seen = observer
        .wait_until("B to start n1", PROMPT + SOON, |o| o.start_count(&n1) == 1)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(seen.max_in_progress <= 1, "ceiling 1:\n{}", seen.timeline());
    let blackholed = proxy.stats().blackholed;
    assert!(blackholed > 0, "the blackhole touched no connection of B");
}

/// The long chaos run's violation at seed 414341070, replayed: a leader's write held by
/// the network past the failover lands after the new leader wrote the node, and must
/// not undo it. Replica A's proxy stalls (holds every byte, then delivers them) a second
/// before a window opens: A's edge write is held, its renewals too, and B takes over and
/// writes the edge itself. When the stall is lifted, A's write reaches the API server
/// with the `lastTransitionTime` of the edge; applied, it would move B's back without a
/// transition. It carries the resourceVersion it was derived from, so it is refused.
#[tokio::test]
async fn a_write_the_network_held_past_a_failover_cannot_undo_the_new_leader() {
    let c = cluster("late-write").await;
    let node = c.node("n", &[]).await;
    let args = SHORT_LEASE;
    let (proxy, via) = proxied(ApiServer::shared(), c.scope.value()).expect("a fault proxy");
    let a = c.replica_via("replica-a", &args, via).await;
    poll_until(
        &format!("{} to lead", a.pod),
        SOON + SHORT_LEASE_DURATION,
        || async { a.leader_gauge().await == Some(1.0) },
    )
    .await;
    let b = c.replica("replica-b", &args).await;
    let start = edge_in(6);
    c.put_one_shot("w", start, "10m", &c.scope.selector()).await;
    let history = History::start(&c.client, &node, UNDER_MAINTENANCE).await;

    tokio::time::sleep(until(start - SignedDuration::from_secs(1))).await;
    proxy.set(Fault::Stall);
    poll_until(
        &format!("{} to take over and write the edge", b.pod),
        SHORT_LEASE_DURATION + SOON,
        || async { b.log_summary().writes.iter().any(|&t| t >= start) },
    )
    .await;
    let written = c.wait_status(&node, Some("True"), SOON).await;
    proxy.set(Fault::None);
    // A's held bytes are delivered at once; its write is answered within a round trip.
    poll_until("A's held write to be answered", SOON, || async {
        a.log_has("the node changed since this write was derived; will retry")
            || a.log_has("writing node conditions failed; will retry")
            || a.log_summary().writes.iter().any(|&t| t >= start)
    })
    .await;
    tokio::time::sleep(PROMPT).await;
    let states = history.states();
    assert_eq!(
        history.statuses(),
        [None, Some("True".to_string())],
        "one transition: {states:#?}"
    );
    assert_eq!(
        states
            .last()
            .cloned()
            .flatten()
            .and_then(|c| c.last_transition_time),
        written.last_transition_time,
        "UnderMaintenance's lastTransitionTime moved without a transition: {states:#?}"
    );
    assert!(
        a.log_summary().writes.iter().all(|&t| t < start),
        "{}'s late write landed",
        a.pod
    );
}

/// Each node's `UnderMaintenance` as `(status, lastTransitionTime)`.
async fn under_maintenance_since(c: &Cluster, nodes: &[&str]) -> Vec<(String, String)> {
    let api: Api<Node> = Api::all(c.client.clone());
    let mut out = Vec::new();
    for name in nodes {
        let node = api.get(name).await.unwrap();
        let um = condition(&node, UNDER_MAINTENANCE).expect("UnderMaintenance");
        let at = um.last_transition_time.as_ref().map(|t| t.0.to_string());
        out.push((um.status.clone(), at.unwrap_or_default()));
    }
    out
}

// ---------------------------------------------------------------------------------------
// Checks on what the observer saw

fn all_completed(o: &Observed, nodes: &[String]) -> bool {
    nodes.iter().all(|n| o.ended_with(n, REASON_COMPLETED))
}

fn false_because(reason: &str) -> (String, String) {
    ("False".into(), reason.into())
}

fn reason_is(change: &testkit::agent::Change, reason: &str) -> bool {
    change
        .condition
        .as_ref()
        .is_some_and(|c| c.reason.as_deref() == Some(reason))
}

fn message_of(c: Option<&k8s_openapi::api::core::v1::NodeCondition>) -> String {
    c.and_then(|c| c.message.clone()).unwrap_or_default()
}

/// Before the window starts no node is under maintenance, so none may carry the
/// condition (kumaco never adds it to a node that was never under maintenance).
fn check_nothing_before(seen: &Observed, start: Timestamp) {
    // Clock slack: the observer stamps changes as it receives them.
    let early = start - SignedDuration::from_millis(100);
    let before: Vec<_> = seen
        .changes
        .iter()
        .filter(|ch| ch.at < early && ch.condition.is_some())
        .collect();
    assert!(
        before.is_empty(),
        "{MIP} written before the window started at {start}: {before:#?}"
    );
}

/// Free slots go oldest `RebootRequired` first, ties by name. `expected` is that order.
/// Starts closer than [`SAME_PASS`] may be seen in either order (one pass, concurrent
/// writes); any other inversion is a wrong pick.
fn check_start_order(seen: &Observed, expected: &[String]) {
    let first_start: BTreeMap<&str, Timestamp> = seen
        .starts
        .iter()
        .rev()
        .map(|(at, node)| (node.as_str(), *at))
        .collect();
    let observed: Vec<&str> = seen.starts.iter().map(|(_, n)| n.as_str()).collect();
    let same_pass = SignedDuration::try_from(SAME_PASS).unwrap();
    let mut wrong = Vec::new();
    for (i, earlier) in expected.iter().enumerate() {
        for later in &expected[i + 1..] {
            let (Some(&te), Some(&tl)) = (
                first_start.get(earlier.as_str()),
                first_start.get(later.as_str()),
            ) else {
                continue;
            };
            if tl < te && te.duration_since(tl) > same_pass {
                wrong.push(format!(
                    "{later} started {} ms before {earlier}, which is older",
                    te.duration_since(tl).as_millis()
                ));
            }
        }
    }
    if observed != expected {
        eprintln!(
            "start order differs within single passes (allowed):\n  expected {expected:?}\n  \
             observed {observed:?}"
        );
    }
    assert!(
        wrong.is_empty(),
        "start order is not oldest RebootRequired first, ties by name:\n  expected {expected:?}\n  \
         observed {observed:?}\n{}\n{}",
        wrong.join("\n"),
        seen.timeline()
    );
}

/// Each start: reason `MaintenanceWindow`, a message naming the window and, with
/// required conditions, them.
fn check_true_conditions(seen: &Observed, window: &str) {
    for ch in &seen.changes {
        let Some(c) = ch.condition.as_ref().filter(|c| c.status == "True") else {
            continue;
        };
        let message = c.message.as_deref().unwrap_or_default();
        assert!(
            c.reason.as_deref() == Some(REASON_STARTED)
                && message.contains(window)
                && message.contains(REBOOT_REQUIRED),
            "{}: a start should say {REASON_STARTED} and name the window {window} and \
             {REBOOT_REQUIRED}: {c:?}",
            ch.node
        );
    }
}

/// A why-not (False) condition is rewritten only when its reason changes: no two
/// successive False states of a node with the same reason.
fn check_why_not_written_once_per_reason(seen: &Observed) {
    for node in seen.current.keys() {
        let history = seen.history(node);
        for pair in history.windows(2) {
            if let [Some(x), Some(y)] = pair
                && x.status == "False"
                && y.status == "False"
            {
                assert_ne!(
                    x.reason, y.reason,
                    "{node}: a False condition rewritten without a reason change: {x:?} → \
                     {y:?}"
                );
            }
        }
    }
}

/// A node waits for a slot only when every slot is taken: its message (`k/n slots in
/// use`) says so.
fn check_waiting_messages(seen: &Observed, ceiling: usize) {
    for ch in seen
        .changes
        .iter()
        .filter(|ch| reason_is(ch, REASON_WAITING))
    {
        let message = message_of(ch.condition.as_ref());
        let in_use = message
            .split_once('/')
            .and_then(|(used, _)| used.rsplit(' ').next()?.parse::<usize>().ok());
        assert!(
            message.contains(&format!("/{ceiling} slots in use"))
                && in_use.is_some_and(|n| n >= ceiling),
            "{}: {REASON_WAITING} should say all {ceiling} slots are in use (\"{ceiling}/{ceiling} \
             slots in use\"): {message:?}",
            ch.node
        );
    }
}

/// The node's last change happened within [`EDGE_BOUND`] of `edge`, not before it.
fn check_edge_latency(seen: &Observed, node: &str, edge: Timestamp, what: &str) {
    let change = seen
        .changes
        .iter()
        .rev()
        .find(|ch| ch.node == node)
        .unwrap();
    let latency = change.at.duration_since(edge);
    let ms = latency.as_millis();
    eprintln!("EDGE_LATENCY_MS {ms} node={node} edge={what}");
    assert_edge_latency(
        latency,
        EDGE_BOUND,
        &format!("{node} changed at the {what} edge"),
    );
}

// ---------------------------------------------------------------------------------------
// The test's slice of the cluster

/// One test's slice of the shared cluster; every kumaco of the test runs with
/// `--in-progress`.
async fn cluster(name: &str) -> Cluster {
    Cluster::new(ApiServer::shared(), name, KUMACO)
        .await
        .with_flags(&["--in-progress"])
}

/// The holder of this test's Lease, if any.
async fn lease_holder(c: &Cluster) -> Option<String> {
    Api::<Lease>::namespaced(c.client.clone(), &c.ns)
        .get_opt(REPLICA_LEASE)
        .await
        .unwrap()?
        .spec?
        .holder_identity
}
