//! `kumaco-bench`: kumaco at scale against a private, real kube-apiserver + etcd on loopback,
//! for the figures of docs/benchmarks.md. Not a test: it runs only when asked.
//!
//! ```sh
//! cargo build --release --bin kumaco        # the binary under test
//! cargo run --release -p testkit --bin kumaco-bench -- --nodes 1000,5000
//! #   --edge-nodes K  nodes the edge window selects (default 1000; a multiple of 20)
//! #   --repeat R      runs per N, each on a fresh API server (default 1)
//! #   --kumaco PATH   kumaco binary (default target/release/kumaco)
//! #   --idle SECS     length of the idle period (default 120)
//! #   --json FILE     results (default target/kumaco-bench.json)
//! #   --churn-rate R  foreign changes per second in a churn phase (default 0: none)
//! #   --churn-seconds S  length of the churn phase (default 60)
//! #   --notify        notifications on: a webhook and a chat sink, counted (below)
//! #   --pods P        the pods mode instead (below): P pods, of which
//! #     --matching-pods M (default 200) match kumaco's --block-pod-selector
//! #     --other-pod-rate R (100) --matching-pod-rate R (10) --heartbeat-rate R (100)
//! #     --availability-rate R (5) --phase-seconds S (60) --waiting-nodes W (20)
//! ```
//!
//! For each N, on a fresh API server (so its request counters and the cluster size belong
//! to this N alone):
//!
//! 1. N nodes of realistic size (20 labels, 5 conditions, 40 images, 4 zones) and 200
//!    windows of mixed schedules, almost all inactive for the whole run;
//! 2. kumaco started: (a) time from spawn to `/readyz` 200;
//! 3. a one-shot window selecting K nodes (all of batch `b0` if fewer) opening on a whole
//!    second ~10 s ahead; an independent watch records when each node shows `True`: (b)
//!    p50, p99, max of seen − edge; (c) kumaco's node writes (server-side applies to
//!    nodes, which only kumaco sends) counted by the API server itself during the
//!    transition, against the number of transitions;
//! 4. (d) the same count over an idle period with no edge, and kumaco's CPU in it;
//! 5. (e) kumaco's peak RSS (VmHWM) and CPU seconds (utime + stime);
//! 6. (g) with `--churn-rate R`, the churn phase: the edge window goes (its nodes turn
//!    False again), then for `--churn-seconds S` a stand-in kubelet and another client
//!    change the nodes R times a second in all ([`testkit::churn`]: heartbeats and image
//!    lists in `nodes/status`, an annotation and a label no selector reads), and halfway
//!    through the same window opens again on the same K nodes. Measured: the changes the
//!    API server accepted; kumaco's CPU from the churn's start to 1 s before the edge
//!    (churn only) and per 1,000 changes, and over the whole phase; its passes; its node
//!    writes (0 before the edge, as many as transitions at it); the edge latency with
//!    the churn in the background; RSS after it. The floor over the same windows: a
//!    plain client, a process of its own watching every node into whole `Node`s and
//!    doing nothing else ([`testkit::churn::plain`]): its CPU per 1,000 changes and
//!    kumaco's over it;
//! 7. (h) with `--notify`, kumaco tells a CloudEvents webhook and a chat (a generic
//!    webhook) of every transition, both served by a receiver in this process: the
//!    events and the chat messages it got by the end of the idle period, beside the
//!    figures above (CPU, RSS) of a run without;
//! 8. (f) the API server's own ceiling, kumaco stopped: a plain client applies one
//!    condition to the same K nodes, as many in flight as kumaco (32). Edge latency can
//!    be no better than this; the ratio says how much of it is kumaco's. With a churn
//!    phase, again with the same churn in the background: the ceiling for the edge
//!    under churn.
//!
//! Targets at 5,000 nodes: ready < 5 s, edge p99 < 1 s, RSS < 64 MiB, writes = transitions
//! at the edge, 0 when idle. The machine's load average is recorded at start and end,
//! because the figures mean little without it.
//!
//! The pods mode (`--pods P`: kumaco's cost stays proportional to change, not to
//! pods): N nodes, the 200 windows, every 100th node NotReady and every 250th cordoned,
//! and P pods bound to the nodes ([`testkit::churn::pods`]), M of them matching; kumaco
//! with every rule of the brain (`--in-progress --require-condition kured.dev/RebootRequired
//! --max-in-progress 10 --max-in-progress-per topology.kubernetes.io/zone=2
//! --block-node-selector bench.kumaco.dev/rack=r13 --block-pod-selector
//! bench.kumaco.dev/app=stateful-db --start-interval 15m`). Then phases of S seconds
//! each, one kind of change per phase, kumaco's CPU (/proc), passes
//! (`kumaco_reconcile_duration_seconds`), node events by relevance, and the pod watch
//! events the API server sent (`apiserver_watch_events_total` for pods: kumaco holds
//! the only pod watch) measured over each: no change (the baseline); changes to pods
//! that do not match (labels, annotations, status); status updates of matching pods;
//! matching pods deleted and created again among their status updates (a pass due
//! each); kubelet heartbeats (`lastHeartbeatTime` of Ready only); Ready and
//! `spec.unschedulable` flipping (a pass due each); last, with `--waiting-nodes W`
//! (default 20), W nodes under maintenance made to wait to start (`RebootRequired=True`,
//! a blocking pod each) whose blocking pods are deleted and created again in turn (a
//! pass and a write due each: the node's reason moves between `Blocked` and
//! `WaitingForSlot`). CPU per change is given as measured and net of the baseline's CPU
//! over the same time. With `--budgets B`, B PodDisruptionBudgets over the pods
//! (`churn::pods::create_budgets`), which kumaco's budget gate watches: its memory with
//! them, and the count it saw.
//!
//! The parts: `scale` (a run at one size: the edge, the idle period, the ceiling),
//! `churn_phase` (foreign changes and the plain client's floor), `pods` (the pods mode),
//! `windows` (the background windows), `measure` (writes counted by the API server, the
//! edge watch) and `report` (the tables).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::json;
use testkit::churn::ChurnSpec;
use testkit::churn::plain;
use testkit::fleet::{self, BATCH};

mod churn_phase;
mod measure;
mod pods;
mod report;
mod scale;
mod windows;

use crate::pods::{print_pods_table, run_pods, waiting_candidates};
use crate::report::{print_spread, print_table};
use crate::scale::run_one;

const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
const NAMESPACE: &str = "bench";
/// kumaco's field manager, and the harness's for its windows.
const MANAGER: &str = "kumaco-bench";
/// Requests in flight while creating windows, and in the plain client's burst: what
/// kumaco uses for its writes.
const CONCURRENCY: usize = 32;
/// The background windows (the edge window comes on top).
const WINDOWS: usize = 200;
/// Racks (label `bench.kumaco.dev/rack`, node `i` in rack `i % 50`): a smaller edge
/// selects whole racks of batch `b0`, 20 nodes each.
const RACKS: usize = 50;
/// The edge is this far ahead of the moment the edge window is created: time for kumaco
/// to load it and for the measurement baseline to be read.
const EDGE_AHEAD_SECS: i64 = 10;
/// Bounds on every wait, so that a broken kumaco ends the run instead of hanging it.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const TRANSITION_TIMEOUT: Duration = Duration::from_secs(60);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Writes are "settled" when the API server's counter has not moved for this long.
const QUIET: Duration = Duration::from_secs(3);
/// The churn phase's edge window is put at least this far ahead of its edge (and before
/// the churn starts, so kumaco has it when the churn begins).
const CHURN_EDGE_LEAD: Duration = Duration::from_secs(3);
/// After the churn's last change, kumaco's CPU is read this much later: the passes the
/// last changes woke are part of the churn's cost.
const CHURN_DRAIN: Duration = Duration::from_secs(1);

/// kumaco at scale against a private, real kube-apiserver + etcd (see the module docs).
#[derive(clap::Parser)]
struct Args {
    /// Cluster sizes, one measurement (or --repeat) each.
    #[arg(long, value_delimiter = ',', default_value = "1000",
          value_parser = clap::value_parser!(u64).range(1..))]
    nodes: Vec<u64>,
    /// Nodes the edge window selects: whole racks of batch b0, 20 nodes each.
    #[arg(long, default_value_t = BATCH as u64,
          value_parser = clap::value_parser!(u64).range(20..=BATCH as u64))]
    edge_nodes: u64,
    /// Runs per size, each on a fresh API server.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    repeat: u64,
    /// The kumaco binary.
    #[arg(long, default_value = fleet::DEFAULT_KUMACO)]
    kumaco: PathBuf,
    /// Seconds of the idle period.
    #[arg(long, default_value_t = 120)]
    idle: u64,
    /// Where the results go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-bench.json"))]
    json: PathBuf,
    /// Foreign changes per second in the churn phase, a stand-in kubelet and another
    /// client together (0: no churn phase).
    #[arg(long, default_value_t = 0.0)]
    churn_rate: f64,
    /// Seconds of the churn phase; the edge under churn is halfway through.
    #[arg(long, default_value_t = 60.0)]
    churn_seconds: f64,
    /// The pods mode (see the module docs): this many pods, instead of the edge, idle
    /// and churn measurements.
    #[arg(long, default_value_t = 0)]
    pods: usize,
    /// Pods that match kumaco's --block-pod-selector, on distinct nodes.
    #[arg(long, default_value_t = 200)]
    matching_pods: usize,
    /// Changes per second to the pods that do not match.
    #[arg(long, default_value_t = 100.0)]
    other_pod_rate: f64,
    /// Changes per second to the matching pods.
    #[arg(long, default_value_t = 10.0)]
    matching_pod_rate: f64,
    /// Kubelet heartbeats per second (0: no such phase).
    #[arg(long, default_value_t = 100.0)]
    heartbeat_rate: f64,
    /// Ready or spec.unschedulable changes per second (0: no such phase).
    #[arg(long, default_value_t = 5.0)]
    availability_rate: f64,
    /// PodDisruptionBudgets over the pods in the pods mode (kumaco's budget gate is on
    /// by default and watches them all).
    #[arg(long, default_value_t = 0)]
    budgets: usize,
    /// Runs as the churn phase's plain client on the API server of this kubeconfig
    /// ([`testkit::churn::plain`]), until killed; nothing else.
    #[arg(long, hide = true)]
    plain_watch: Option<PathBuf>,
    /// Notifications on: a CloudEvents webhook (at most 6,000 a minute) and a chat (a
    /// generic webhook, digests at the default interval) posting to a receiver in this
    /// process, which counts what it gets.
    #[arg(long)]
    notify: bool,
    /// Seconds of each phase of the pods mode.
    #[arg(long, default_value_t = 60.0)]
    phase_seconds: f64,
    /// Nodes made to wait to start for the last phase of the pods mode, each with a
    /// blocking pod that comes and goes (0: no such phase).
    #[arg(long, default_value_t = 20)]
    waiting_nodes: usize,
}

impl Args {
    fn churn(&self) -> Option<ChurnSpec> {
        (self.churn_rate > 0.0).then(|| ChurnSpec {
            rate: self.churn_rate,
            duration: Duration::from_secs_f64(self.churn_seconds),
        })
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = <Args as clap::Parser>::parse();
    if let Some(kubeconfig) = &args.plain_watch {
        return plain::watch(kubeconfig).await;
    }
    fleet::check_kumaco_binary(&args.kumaco)?;
    if !(args.edge_nodes as usize).is_multiple_of(BATCH / RACKS) {
        bail!(
            "--edge-nodes: a multiple of {} (whole racks)",
            BATCH / RACKS
        );
    }
    if !args.churn_rate.is_finite() || args.churn_rate < 0.0 {
        bail!("--churn-rate: a number of changes per second, 0 for no churn phase");
    }
    if !args.churn_seconds.is_finite() || !(2.0..=3600.0).contains(&args.churn_seconds) {
        bail!("--churn-seconds: 2 to 3600");
    }
    if args.churn().is_some_and(|spec| spec.planned() < 2) {
        bail!("--churn-rate × --churn-seconds: at least 2 changes");
    }
    if args.pods > 0 {
        if !args.phase_seconds.is_finite() || !(2.0..=3600.0).contains(&args.phase_seconds) {
            bail!("--phase-seconds: 2 to 3600");
        }
        for rate in [args.other_pod_rate, args.matching_pod_rate] {
            if !rate.is_finite() || rate <= 0.0 {
                bail!("--other-pod-rate, --matching-pod-rate: positive");
            }
        }
        if let Some(n) = args
            .nodes
            .iter()
            .find(|n| waiting_candidates(**n as usize).count() < args.waiting_nodes)
        {
            bail!(
                "--waiting-nodes {}: {n} nodes have {} nodes under maintenance to wait; \
                 use more --nodes (5000 have 240) or --waiting-nodes 0",
                args.waiting_nodes,
                waiting_candidates(*n as usize).count()
            );
        }
        for rate in [args.heartbeat_rate, args.availability_rate] {
            if !rate.is_finite() || rate < 0.0 {
                bail!("--heartbeat-rate, --availability-rate: 0 or more");
            }
        }
    }
    let mut results = Vec::new();
    for &n in &args.nodes {
        for run in 1..=args.repeat {
            let result = if args.pods > 0 {
                let result = run_pods(&args, n as usize, run).await?;
                print_pods_table(&result);
                result
            } else {
                let result = run_one(&args, n as usize, run).await?;
                print_table(&result);
                result
            };
            results.push(result);
            // Written after each run, so a later, failing run keeps the earlier figures.
            if let Some(dir) = args.json.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&args.json, serde_json::to_string_pretty(&json!(results))?)?;
        }
    }
    if args.repeat > 1 && args.pods == 0 {
        print_spread(&results);
    }
    println!("results written to {}", args.json.display());
    Ok(())
}
