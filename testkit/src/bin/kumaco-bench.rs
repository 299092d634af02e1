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
//! 7. (f) the API server's own ceiling, kumaco stopped: a plain client applies one
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

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use testkit::agent::REBOOT_REQUIRED;
use testkit::churn::plain::{self, PlainWatch};
use testkit::churn::pods::{self as podchurn, Paced, PodFleet};
use testkit::churn::{self, Churn, ChurnSpec};
use testkit::fleet::{self, BATCH, Kumaco, KumacoOptions, POOLS, ZONES, load_average};
use testkit::kumaco::{apiserver_metrics, metric_sum};
use testkit::nodes::{condition, set_condition};
use testkit::{ApiServer, Scope};

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

/// The edge window's selector and the number of nodes it selects among `0..n`: all of
/// batch `b0`, or its first racks.
fn edge_selector(n: usize, edge_nodes: usize) -> (String, usize) {
    let in_b0 = n.min(BATCH);
    if edge_nodes >= BATCH {
        return ("bench.kumaco.dev/batch=b0".into(), in_b0);
    }
    let racks = edge_nodes / (BATCH / RACKS);
    let list: Vec<String> = (0..racks).map(|r| format!("r{r:02}")).collect();
    let count = (0..in_b0).filter(|i| i % RACKS < racks).count();
    (
        format!(
            "bench.kumaco.dev/batch=b0,bench.kumaco.dev/rack in ({})",
            list.join(", ")
        ),
        count,
    )
}

/// One full measurement at `n` nodes, on its own API server.
async fn run_one(args: &Args, n: usize, run: u64) -> Result<Value> {
    let load_start = load_average();
    println!(
        "== {n} nodes, run {run}/{} (load average {load_start})",
        args.repeat
    );
    // start_fresh blocks for a few seconds; nothing else runs on this runtime yet.
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let scope = Scope::new("bench");

    let setup = Instant::now();
    fleet::create_namespace(&client, NAMESPACE).await?;
    fleet::create_nodes(&client, &scope, n).await?;
    let nodes_secs = setup.elapsed().as_secs_f64();
    create_windows(&client).await?;
    println!("   setup: {n} nodes in {nodes_secs:.1}s, {WINDOWS} windows");

    // Counted from before the spawn: kumaco may write as soon as its lists are in.
    let writes_at_spawn = kumaco_writes(&client).await?;
    let options = KumacoOptions {
        namespace: NAMESPACE,
        name: MANAGER,
        extra_args: vec![],
    };
    let mut kumaco = Kumaco::spawn(&args.kumaco, &server, &scope, &options).await?;
    let ready_secs = kumaco.wait_ready(READY_TIMEOUT).await?;
    let cpu_at_ready = kumaco.cpu_seconds()?;
    println!("   ready in {ready_secs:.2}s");
    // The few windows active from the start make kumaco write once at startup; the edge
    // measurement starts after those writes are done.
    settle(&client).await?;
    let startup_writes = kumaco_writes(&client).await? - writes_at_spawn;

    // (b), (c): the edge.
    let watch = EdgeWatch::start(&client, &scope).await?;
    let (edge_selector, edge_count) = edge_selector(n, args.edge_nodes as usize);
    let edge = Timestamp::from_second(Timestamp::now().as_second() + EDGE_AHEAD_SECS)?;
    fleet::put_window(
        &client,
        NAMESPACE,
        MANAGER,
        "bench-edge",
        &[
            ("startTime", &edge.to_string()),
            ("duration", "1h"),
            ("nodeSelector", &edge_selector),
            ("description", "kumaco-bench edge"),
        ],
    )
    .await?;
    sleep_until(edge - SignedDuration::from_secs(2)).await;
    let writes_before = kumaco_writes(&client).await?;
    let seen = watch.wait_for(edge_count, TRANSITION_TIMEOUT).await;
    // Late or duplicate writes would come after the last transition: let them land.
    settle(&client).await?;
    let edge_writes = kumaco_writes(&client).await? - writes_before;
    let transitions = watch.transitions();
    let edge_nodes: Vec<String> = watch.nodes();
    let latencies = latency_summary(&seen, edge);
    println!(
        "   edge: {}/{edge_count} nodes True, {edge_writes} writes",
        seen.len()
    );

    // (d): idle. No window has an edge during this period.
    println!("   idle for {}s...", args.idle);
    let idle_before = kumaco_writes(&client).await?;
    let idle_cpu_before = kumaco.cpu_seconds()?;
    tokio::time::sleep(Duration::from_secs(args.idle)).await;
    let idle_writes = kumaco_writes(&client).await? - idle_before;
    let idle_cpu = kumaco.cpu_seconds()? - idle_cpu_before;

    // (e): resources, before any churn.
    let rss = kumaco.status_kib("VmHWM")? * 1024;
    // The current size too: a peak far above it points at a startup transient.
    let rss_now = kumaco.status_kib("VmRSS")? * 1024;
    let cpu = kumaco.cpu_seconds()?;
    drop(watch);

    // (g): the churn phase, on the same nodes and the same edge selector.
    let churn = match args.churn() {
        Some(spec) => {
            let edge = EdgeSpec {
                selector: &edge_selector,
                count: edge_count,
                true_now: transitions,
            };
            let phase = ChurnPhase {
                server: &server,
                client: &client,
                scope: &scope,
                kumaco: &kumaco,
            };
            phase.run(n, spec, &edge).await?
        }
        None => Value::Null,
    };
    let log = kumaco.log_path().to_path_buf();
    kumaco.stop();

    // (f): the same nodes, the same number of writes, without kumaco.
    let ceiling_secs = plain_client_burst(&client, &edge_nodes).await?;
    println!(
        "   plain client: {} applies in {ceiling_secs:.2}s",
        edge_nodes.len()
    );
    // ... and with the churn in the background: the ceiling for the edge under churn.
    let ceiling_churn_secs = match args.churn() {
        Some(spec) => {
            let names: Vec<String> = (0..n).map(|i| fleet::node_name(&scope, i)).collect();
            let secs =
                plain_client_burst_under_churn(&server, &client, names, spec, &edge_nodes).await?;
            println!("   plain client under churn: {secs:.2}s");
            Some(secs)
        }
        None => None,
    };
    drop(server);
    let load_end = load_average();

    Ok(json!({
        "nodes": n,
        "run": run,
        "windows": WINDOWS + 1,
        "load_average_start": load_start,
        "load_average_end": load_end,
        "setup_nodes_seconds": nodes_secs,
        "ready_seconds": ready_secs,
        "cpu_seconds_at_ready": cpu_at_ready,
        "startup_status_writes": startup_writes,
        "edge_nodes_expected": edge_count,
        "edge_nodes_seen": seen.len(),
        "edge_transitions": transitions,
        "edge_status_writes": edge_writes,
        "edge_latency_ms": latencies,
        "plain_client_burst_ms": ceiling_secs * 1000.0,
        "plain_client_burst_under_churn_ms": ceiling_churn_secs.map(|s| s * 1000.0),
        "idle_seconds": args.idle,
        "idle_status_writes": idle_writes,
        "idle_cpu_seconds": idle_cpu,
        "peak_rss_mib": rss as f64 / (1024.0 * 1024.0),
        "rss_at_end_mib": rss_now as f64 / (1024.0 * 1024.0),
        "cpu_seconds": cpu,
        "churn": churn,
        "kumaco_log": log,
    }))
}

/// p50, p99, max and min of the times `seen` after `edge`, in milliseconds.
fn latency_summary(seen: &[Timestamp], edge: Timestamp) -> Value {
    let mut ms: Vec<f64> = seen
        .iter()
        .map(|t| t.duration_since(edge).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    json!({
        "p50": percentile(&ms, 0.50),
        "p99": percentile(&ms, 0.99),
        "max": ms.last().copied(),
        "min": ms.first().copied(),
    })
}

/// The edge window's selector, the number of nodes it selects, and how many of them the
/// first edge turned True.
struct EdgeSpec<'a> {
    selector: &'a str,
    count: usize,
    true_now: usize,
}

/// What the churn phase works with.
struct ChurnPhase<'a> {
    server: &'a ApiServer,
    client: &'a kube::Client,
    scope: &'a Scope,
    kumaco: &'a Kumaco,
}

/// kumaco's and the API server's counters at one moment of the churn phase.
struct Snapshot {
    at: Instant,
    cpu: f64,
    /// The plain client's CPU, read with kumaco's.
    plain_cpu: f64,
    /// kumaco's node writes, as the API server counts them.
    writes: u64,
    /// Merge and strategic merge patches to nodes the API server accepted: the churn's.
    foreign: u64,
    /// kumaco's passes (`kumaco_reconcile_duration_seconds`): how many, how long in all.
    passes: f64,
    pass_seconds: f64,
}

impl ChurnPhase<'_> {
    async fn snapshot(&self, plain: &PlainWatch) -> Result<Snapshot> {
        let at = Instant::now();
        let cpu = self.kumaco.cpu_seconds()?;
        let plain_cpu = plain.cpu_seconds()?;
        let server = apiserver_metrics(self.client).await?;
        let ours = self.kumaco.metrics().await?;
        let reconcile = |suffix: &str| {
            metric_sum(
                &ours,
                &format!("kumaco_reconcile_duration_seconds_{suffix}"),
                &[],
            )
        };
        Ok(Snapshot {
            at,
            cpu,
            plain_cpu,
            writes: kumaco_writes_in(&server),
            foreign: metric_sum(
                &server,
                "apiserver_request_total",
                &[("verb", "PATCH"), ("resource", "nodes"), ("code", "200")],
            ) as u64,
            passes: reconcile("count"),
            pass_seconds: reconcile("sum"),
        })
    }

    /// The edge nodes back to False, then `spec`'s churn with the same edge halfway
    /// through it (see the module docs, (g)).
    async fn run(&self, n: usize, spec: ChurnSpec, edge_spec: &EdgeSpec<'_>) -> Result<Value> {
        let client = self.client;
        println!(
            "   churn: {} changes/s for {}s, the edge halfway...",
            spec.rate,
            spec.duration.as_secs_f64()
        );
        // The first edge window goes: kumaco turns its nodes False.
        let before = kumaco_writes(client).await?;
        Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
            .delete("bench-edge", &DeleteParams::default())
            .await
            .context("deleting the edge window")?;
        wait_for_writes(client, before + edge_spec.true_now as u64).await?;
        settle(client).await?;

        let watch = EdgeWatch::start(client, self.scope).await?;
        let names: Vec<String> = (0..n).map(|i| fleet::node_name(self.scope, i)).collect();
        // Clients of their own, as other processes would have.
        let (kubelet, labeler) = (self.server.client().await?, self.server.client().await?);
        let half = spec.duration / 2;
        let earliest = Timestamp::now()
            + SignedDuration::try_from(CHURN_EDGE_LEAD.max(half + Duration::from_secs(1)))?;
        let edge = Timestamp::from_second(earliest.as_second() + 1)?;
        let churn_start = edge - SignedDuration::try_from(half)?;
        fleet::put_window(
            client,
            NAMESPACE,
            MANAGER,
            "bench-edge-churn",
            &[
                ("startTime", &edge.to_string()),
                ("duration", "1h"),
                ("nodeSelector", edge_spec.selector),
                ("description", "kumaco-bench edge under churn"),
            ],
        )
        .await?;

        // The floor, measured over the same window (its first list done before).
        let plain = PlainWatch::start(
            &std::env::current_exe().context("kumaco-bench's own path")?,
            self.server.kubeconfig(),
        )?;
        sleep_until(churn_start).await;
        let start = self.snapshot(&plain).await?;
        let churn = Churn::start(kubelet, labeler, names, spec);
        sleep_until(edge - SignedDuration::from_secs(1)).await;
        let before_edge = self.snapshot(&plain).await?;
        let before_edge_changes = churn.progress();
        let seen = watch.wait_for(edge_spec.count, TRANSITION_TIMEOUT).await;
        let transitions = watch.transitions();
        drop(watch);
        let changes = churn.finish().await;
        tokio::time::sleep(CHURN_DRAIN).await;
        let end = self.snapshot(&plain).await?;
        let plain_rss = plain.status_kib("VmHWM")? * 1024;
        drop(plain);
        let rss = self.kumaco.status_kib("VmHWM")? * 1024;
        let rss_now = self.kumaco.status_kib("VmRSS")? * 1024;
        // kumaco's late writes, if any, are counted too.
        settle(client).await?;
        let writes = kumaco_writes(client).await? - start.writes;
        println!(
            "   churn: {}/{} changes accepted ({} failed) in {:.1}s; edge {}/{} nodes True; \
             {writes} kumaco writes",
            changes.accepted,
            changes.planned,
            changes.failed,
            changes.seconds,
            seen.len(),
            edge_spec.count,
        );
        let segment = |from: &Snapshot, to: &Snapshot, accepted: u64| {
            let cpu = to.cpu - from.cpu;
            let plain_cpu = to.plain_cpu - from.plain_cpu;
            let passes = to.passes - from.passes;
            json!({
                "seconds": to.at.duration_since(from.at).as_secs_f64(),
                "changes_accepted": accepted,
                "cpu_seconds": cpu,
                "cpu_seconds_per_1000_changes": per_1000(cpu, accepted),
                "kumaco_passes": passes,
                // Wall-clock time of a pass, waits for a CPU included.
                "pass_mean_ms": (passes > 0.0)
                    .then(|| (to.pass_seconds - from.pass_seconds) / passes * 1000.0),
                // Several changes landing during one pass wake one more pass, not one
                // each: what a change costs depends on how many share a pass.
                "changes_per_pass": (passes > 0.0).then(|| accepted as f64 / passes),
                "cpu_ms_per_pass": (passes > 0.0).then(|| cpu / passes * 1000.0),
                "kumaco_writes": to.writes - from.writes,
                // A plain watch of whole Nodes over the same window: the floor.
                "plain_watch_cpu_seconds": plain_cpu,
                "plain_watch_cpu_seconds_per_1000_changes": per_1000(plain_cpu, accepted),
                "kumaco_over_plain_watch": (plain_cpu > 0.0).then(|| cpu / plain_cpu),
            })
        };
        Ok(json!({
            "rate_per_second": spec.rate,
            "seconds": spec.duration.as_secs_f64(),
            "in_flight_max": churn::IN_FLIGHT,
            "changes": changes,
            "apiserver_changes_accepted": end.foreign - start.foreign,
            "achieved_rate_per_second": changes.accepted as f64 / changes.seconds,
            // Churn only: from its start to 1 s before the edge.
            "before_edge": segment(&start, &before_edge, before_edge_changes.accepted),
            // All of it: the edge's writes, and the passes of the last changes.
            "whole": segment(&start, &end, changes.accepted),
            "kumaco_writes": writes,
            "kumaco_writes_beyond_edge": writes.saturating_sub(transitions as u64),
            "edge_nodes_expected": edge_spec.count,
            "edge_nodes_seen": seen.len(),
            "edge_transitions": transitions,
            "edge_latency_ms": latency_summary(&seen, edge),
            "peak_rss_mib": rss as f64 / (1024.0 * 1024.0),
            "rss_at_end_mib": rss_now as f64 / (1024.0 * 1024.0),
            "plain_watch_peak_rss_mib": plain_rss as f64 / (1024.0 * 1024.0),
        }))
    }
}

/// Seconds per 1,000 changes; none without changes.
fn per_1000(seconds: f64, changes: u64) -> Option<f64> {
    (changes > 0).then(|| seconds / changes as f64 * 1000.0)
}

/// Seconds for a plain client to server-side apply one condition to each of `nodes`,
/// [`CONCURRENCY`] in flight: the API server's throughput for exactly kumaco's edge work.
async fn plain_client_burst(client: &kube::Client, nodes: &[String]) -> Result<f64> {
    let api: Api<Node> = Api::all(client.clone());
    let started = Instant::now();
    futures::stream::iter(nodes)
        .map(|name| {
            let api = api.clone();
            async move {
                let body = json!({
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": { "name": name },
                    "status": { "conditions": [{
                        "type": "bench.kumaco.dev/Probe", "status": "True",
                        "reason": "Probe", "message": "kumaco-bench's plain client",
                        "lastTransitionTime": Timestamp::now().to_string(),
                    }]},
                });
                api.patch_status(
                    name,
                    &PatchParams::apply("kumaco-bench-probe").force(),
                    &Patch::Apply(body),
                )
                .await
                .with_context(|| format!("plain client: applying to {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed().as_secs_f64())
}

/// [`plain_client_burst`] while `spec`'s churn (kumaco stopped) changes the nodes: it
/// starts [`CHURN_DRAIN`] before the burst and stops when the burst is done.
async fn plain_client_burst_under_churn(
    server: &ApiServer,
    client: &kube::Client,
    names: Vec<String>,
    spec: ChurnSpec,
    nodes: &[String],
) -> Result<f64> {
    let (kubelet, labeler) = (server.client().await?, server.client().await?);
    // Long enough for any burst; dropped when the burst is done.
    let spec = ChurnSpec {
        duration: Duration::from_secs(120),
        ..spec
    };
    let churn = Churn::start(kubelet, labeler, names, spec);
    tokio::time::sleep(CHURN_DRAIN).await;
    let secs = plain_client_burst(client, nodes).await?;
    let progress = churn.progress();
    if progress.accepted == 0 {
        bail!(
            "the churn around the plain client's burst made no change: {:?}",
            progress.first_error
        );
    }
    Ok(secs)
}

/// Min, median and max of each figure over the runs of each N.
fn print_spread(results: &[Value]) {
    // (name, JSON pointer into a run's result, unit)
    let figures = [
        ("(a) start → /readyz", "/ready_seconds", "s"),
        ("(b) edge latency first node", "/edge_latency_ms/min", "ms"),
        ("(b) edge latency p50", "/edge_latency_ms/p50", "ms"),
        ("(b) edge latency p99", "/edge_latency_ms/p99", "ms"),
        ("(f) plain client burst", "/plain_client_burst_ms", "ms"),
        ("(e) peak RSS", "/peak_rss_mib", "MiB"),
        ("(e) CPU", "/cpu_seconds", "s"),
        ("(g) changes accepted", "/churn/changes/accepted", ""),
        (
            "(g) CPU per 1000 changes",
            "/churn/before_edge/cpu_seconds_per_1000_changes",
            "s",
        ),
        (
            "(g) plain watch CPU per 1000",
            "/churn/before_edge/plain_watch_cpu_seconds_per_1000_changes",
            "s",
        ),
        (
            "(g) kumaco / plain watch CPU",
            "/churn/before_edge/kumaco_over_plain_watch",
            "",
        ),
        (
            "(g) mean pass under churn",
            "/churn/before_edge/pass_mean_ms",
            "ms",
        ),
        (
            "(g) CPU per pass",
            "/churn/before_edge/cpu_ms_per_pass",
            "ms",
        ),
        (
            "(g) changes per pass",
            "/churn/before_edge/changes_per_pass",
            "",
        ),
        (
            "(g) edge p50 under churn",
            "/churn/edge_latency_ms/p50",
            "ms",
        ),
        (
            "(g) edge p99 under churn",
            "/churn/edge_latency_ms/p99",
            "ms",
        ),
        (
            "(f) plain client under churn",
            "/plain_client_burst_under_churn_ms",
            "ms",
        ),
    ];
    let mut sizes: Vec<u64> = results.iter().filter_map(|r| r["nodes"].as_u64()).collect();
    sizes.dedup();
    for n in sizes {
        let runs: Vec<&Value> = results.iter().filter(|r| r["nodes"] == n).collect();
        println!(
            "== spread over {} runs at {n} nodes: min / median / max",
            runs.len()
        );
        for (name, pointer, unit) in figures {
            let mut v: Vec<f64> = runs
                .iter()
                .map(|r| r.pointer(pointer).map_or(f64::NAN, num))
                .collect();
            if v.iter().all(|x| x.is_nan()) {
                continue; // a phase these runs did not have
            }
            v.sort_by(f64::total_cmp);
            let median = percentile(&v, 0.5).unwrap_or(f64::NAN);
            println!(
                "{name:<34} {:>9.2} / {median:>9.2} / {:>9.2} {unit}",
                v[0],
                v[v.len() - 1]
            );
        }
    }
}

fn print_table(r: &Value) {
    let f = |key: &str| r[key].clone();
    let lat = &r["edge_latency_ms"];
    let rows: Vec<(String, String, &str)> = vec![
        ("nodes".into(), f("nodes").to_string(), ""),
        ("run".into(), f("run").to_string(), ""),
        ("windows".into(), f("windows").to_string(), ""),
        (
            "load average start / end".into(),
            format!(
                "{} / {}",
                f("load_average_start").as_str().unwrap_or("?"),
                f("load_average_end").as_str().unwrap_or("?")
            ),
            "",
        ),
        (
            "setup (nodes created)".into(),
            format!("{:.1} s", num(&f("setup_nodes_seconds"))),
            "",
        ),
        (
            "(a) start → /readyz".into(),
            format!("{:.2} s", num(&f("ready_seconds"))),
            "< 5 s",
        ),
        (
            "    CPU until ready".into(),
            format!("{:.2} s", num(&f("cpu_seconds_at_ready"))),
            "",
        ),
        (
            "    startup writes".into(),
            f("startup_status_writes").to_string(),
            "",
        ),
        (
            "(b) edge nodes seen True".into(),
            format!("{} / {}", f("edge_nodes_seen"), f("edge_nodes_expected")),
            "all",
        ),
        (
            "    edge latency min (first node)".into(),
            format!("{:.0} ms", num(&lat["min"])),
            "",
        ),
        (
            "    edge latency p50".into(),
            format!("{:.0} ms", num(&lat["p50"])),
            "",
        ),
        (
            "    edge latency p99".into(),
            format!("{:.0} ms", num(&lat["p99"])),
            "< 1000 ms",
        ),
        (
            "    edge latency max".into(),
            format!("{:.0} ms", num(&lat["max"])),
            "",
        ),
        (
            "(c) status writes / transitions".into(),
            format!("{} / {}", f("edge_status_writes"), f("edge_transitions")),
            "equal",
        ),
        (
            "(f) plain client, same applies".into(),
            format!("{:.0} ms", num(&f("plain_client_burst_ms"))),
            "",
        ),
        (
            "    the same under churn".into(),
            match f("plain_client_burst_under_churn_ms").as_f64() {
                Some(ms) => format!("{ms:.0} ms"),
                None => "-".into(),
            },
            "",
        ),
        (
            format!("(d) writes in {} s idle", f("idle_seconds")),
            f("idle_status_writes").to_string(),
            "0",
        ),
        (
            "    kumaco CPU while idle".into(),
            format!("{:.2} s", num(&f("idle_cpu_seconds"))),
            "",
        ),
        (
            "(e) peak RSS (VmHWM)".into(),
            format!("{:.1} MiB", num(&f("peak_rss_mib"))),
            "< 64 MiB",
        ),
        (
            "    RSS at end (VmRSS)".into(),
            format!("{:.1} MiB", num(&f("rss_at_end_mib"))),
            "",
        ),
        (
            "    CPU (utime+stime), so far".into(),
            format!("{:.2} s", num(&f("cpu_seconds"))),
            "",
        ),
    ];
    let mut rows = rows;
    rows.extend(churn_rows(r));
    println!("{:<34} {:>22}  target", "measure", "value");
    for (name, value, target) in rows {
        println!("{name:<34} {value:>22}  {target}");
    }
}

/// The churn phase's rows of the table, if the run had one.
fn churn_rows(r: &Value) -> Vec<(String, String, &'static str)> {
    let c = &r["churn"];
    if !c.is_object() {
        return vec![];
    }
    let (changes, before, whole, lat) = (
        &c["changes"],
        &c["before_edge"],
        &c["whole"],
        &c["edge_latency_ms"],
    );
    vec![
        (
            format!(
                "(g) churn {}/s for {} s",
                c["rate_per_second"], c["seconds"]
            ),
            String::new(),
            "",
        ),
        (
            "    changes accepted / planned".into(),
            format!(
                "{} / {} ({} failed)",
                changes["accepted"], changes["planned"], changes["failed"]
            ),
            "all",
        ),
        (
            "    as the API server counts them".into(),
            c["apiserver_changes_accepted"].to_string(),
            "",
        ),
        (
            "    achieved rate, max lag".into(),
            format!(
                "{:.1}/s, {} ms",
                num(&c["achieved_rate_per_second"]),
                changes["max_lag_ms"]
            ),
            "",
        ),
        (
            "    churn only: changes, seconds".into(),
            format!(
                "{} in {:.1} s",
                before["changes_accepted"],
                num(&before["seconds"])
            ),
            "",
        ),
        (
            "    churn only: kumaco CPU".into(),
            format!("{:.2} s", num(&before["cpu_seconds"])),
            "",
        ),
        (
            "    CPU per 1,000 changes".into(),
            format!("{:.3} s", num(&before["cpu_seconds_per_1000_changes"])),
            "",
        ),
        (
            "    plain watch: CPU per 1,000 changes".into(),
            format!(
                "{:.3} s",
                num(&before["plain_watch_cpu_seconds_per_1000_changes"])
            ),
            "",
        ),
        (
            "    kumaco / plain watch".into(),
            format!("{:.2}", num(&before["kumaco_over_plain_watch"])),
            "",
        ),
        (
            "    churn only: passes, mean".into(),
            format!(
                "{} / {:.1} ms",
                before["kumaco_passes"],
                num(&before["pass_mean_ms"])
            ),
            "",
        ),
        (
            "    changes per pass, CPU per pass".into(),
            format!(
                "{:.2} / {:.1} ms",
                num(&before["changes_per_pass"]),
                num(&before["cpu_ms_per_pass"])
            ),
            "",
        ),
        (
            "    churn only: kumaco writes".into(),
            before["kumaco_writes"].to_string(),
            "0",
        ),
        (
            "    whole phase: CPU, per 1,000".into(),
            format!(
                "{:.2} s, {:.3} s",
                num(&whole["cpu_seconds"]),
                num(&whole["cpu_seconds_per_1000_changes"])
            ),
            "",
        ),
        (
            "    edge nodes seen True".into(),
            format!("{} / {}", c["edge_nodes_seen"], c["edge_nodes_expected"]),
            "all",
        ),
        (
            "    edge latency min / p50".into(),
            format!("{:.0} / {:.0} ms", num(&lat["min"]), num(&lat["p50"])),
            "",
        ),
        (
            "    edge latency p99 / max".into(),
            format!("{:.0} / {:.0} ms", num(&lat["p99"]), num(&lat["max"])),
            "",
        ),
        (
            "    kumaco writes / transitions".into(),
            format!("{} / {}", c["kumaco_writes"], c["edge_transitions"]),
            "equal",
        ),
        (
            "    peak RSS after the churn".into(),
            format!("{:.1} MiB", num(&c["peak_rss_mib"])),
            "",
        ),
    ]
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

// ---------------------------------------------------------------------------------------
// Cluster contents

/// 200 windows of mixed kinds: daily, weekday, weekly and monthly crons in four zones,
/// past and future one-shots, a few blackouts, and three windows active from the start
/// (on small groups outside the edge batch). No edge of any of them falls in the run:
/// cron starts are 6-17 h ahead of now's time of day in their zone and last at most 2 h.
async fn create_windows(client: &kube::Client) -> Result<()> {
    // Zones without DST, so that a fixed offset gives their local time.
    const TZS: [(&str, i64); 4] = [
        ("", 0),
        ("CRON_TZ=Asia/Tokyo ", 9 * 60),
        ("CRON_TZ=Asia/Kolkata ", 5 * 60 + 30),
        ("TZ=America/Sao_Paulo ", -3 * 60),
    ];
    const DURATIONS: [&str; 4] = ["30m", "1h", "90m", "2h"];
    let now = Timestamp::now();
    let utc_minute = now.as_second().rem_euclid(86_400) / 60;
    let selector = |k: usize| match k % 5 {
        0 => format!("topology.kubernetes.io/zone={}", ZONES[k % 4]),
        1 => format!(
            "bench.kumaco.dev/rack in (r{:02}, r{:02})",
            k % 50,
            (k + 25) % 50
        ),
        2 => format!(
            "node.kubernetes.io/pool={},bench.kumaco.dev/team!=team-3",
            POOLS[k % 3]
        ),
        3 => format!("bench.kumaco.dev/reboot-group=g{}", k % 10),
        _ => format!(
            "bench.kumaco.dev/cost-center=cc-{},kubernetes.io/os=linux",
            k % 13
        ),
    };
    let mut windows: Vec<(String, Vec<(&str, String)>)> = Vec::new();
    for k in 0..WINDOWS {
        let name = format!("w-{k:03}");
        let data = match k {
            // Active now and for a week: kumaco writes these once, at startup.
            0..3 => vec![
                (
                    "startTime",
                    (now - SignedDuration::from_hours(1)).to_string(),
                ),
                ("duration", "168h".into()),
                (
                    "nodeSelector",
                    format!(
                        "bench.kumaco.dev/rack=r{:02},bench.kumaco.dev/batch!=b0",
                        7 + k
                    ),
                ),
            ],
            // Blackouts over a future freeze.
            3..6 => vec![
                (
                    "startTime",
                    (now + SignedDuration::from_hours(24 * (k as i64 + 3))).to_string(),
                ),
                ("duration", "72h".into()),
                ("nodeSelector", selector(k)),
                ("blackout", "true".into()),
            ],
            // One-shots: half long past, half days ahead.
            _ if k % 10 == 9 => {
                let days = (k as i64 % 30 + 2) * if k % 20 == 9 { -1 } else { 1 };
                vec![
                    (
                        "startTime",
                        (now + SignedDuration::from_hours(24 * days)).to_string(),
                    ),
                    ("duration", "4h".into()),
                    ("nodeSelector", selector(k)),
                ]
            }
            _ => {
                let (prefix, offset) = TZS[k % TZS.len()];
                let local =
                    (utc_minute + offset + 360 + (k as i64 % 12) * 60 + (k as i64 * 7) % 60)
                        .rem_euclid(1440);
                let (h, m) = (local / 60, local % 60);
                let days = match k % 4 {
                    0 => "* * *".to_string(),
                    1 => "* * 1-5".to_string(),
                    2 => format!("* * {}", k % 7),
                    _ => format!("{} * *", k % 28 + 1),
                };
                vec![
                    ("startTime", format!("{prefix}{m} {h} {days}")),
                    ("duration", DURATIONS[k % DURATIONS.len()].into()),
                    ("nodeSelector", selector(k)),
                ]
            }
        };
        windows.push((name, data));
    }
    let client = client.clone();
    futures::stream::iter(windows)
        .map(|(name, data)| {
            let client = client.clone();
            async move {
                let data: Vec<(&str, &str)> = data.iter().map(|(k, v)| (*k, v.as_str())).collect();
                fleet::put_window(&client, NAMESPACE, MANAGER, &name, &data).await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

// ---------------------------------------------------------------------------------------
// Measuring

/// kumaco's node writes as the API server counts them: server-side applies to nodes
/// (`nodes/status` and any other), which only kumaco sends once setup is done (nodes are
/// created with a POST and a merge patch; the churn's changes are patches too).
async fn kumaco_writes(client: &kube::Client) -> Result<u64> {
    Ok(kumaco_writes_in(&apiserver_metrics(client).await?))
}

fn kumaco_writes_in(apiserver_metrics: &str) -> u64 {
    metric_sum(
        apiserver_metrics,
        "apiserver_request_total",
        &[("verb", "APPLY"), ("resource", "nodes")],
    ) as u64
}

/// Waits until kumaco's node writes reach `target` (bounded by `TRANSITION_TIMEOUT`).
async fn wait_for_writes(client: &kube::Client, target: u64) -> Result<()> {
    let started = Instant::now();
    while kumaco_writes(client).await? < target {
        if started.elapsed() > TRANSITION_TIMEOUT {
            bail!("kumaco's node writes did not reach {target} in {TRANSITION_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Waits until the status write counter stops moving for `QUIET` (bounded by
/// `SETTLE_TIMEOUT`).
async fn settle(client: &kube::Client) -> Result<()> {
    let started = Instant::now();
    let mut last = kumaco_writes(client).await?;
    let mut since = Instant::now();
    while started.elapsed() < SETTLE_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = kumaco_writes(client).await?;
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= QUIET {
            break;
        }
    }
    Ok(())
}

async fn sleep_until(t: Timestamp) {
    let wait = t.duration_since(Timestamp::now());
    if wait.is_positive() {
        tokio::time::sleep(wait.unsigned_abs()).await;
    }
}

/// An independent watch on the bench nodes: when each one was first seen with
/// `UnderMaintenance=True` after the watch started (nodes already True are left out).
struct EdgeWatch {
    seen: Arc<Mutex<HashMap<String, Timestamp>>>,
    task: tokio::task::JoinHandle<()>,
}

impl EdgeWatch {
    /// Starts the watch and returns once its initial list is complete.
    async fn start(client: &kube::Client, scope: &Scope) -> Result<Self> {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().labels(&scope.selector());
        let seen: Arc<Mutex<HashMap<String, Timestamp>>> = Arc::default();
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut synced_tx = Some(synced_tx);
                // Nodes True before the watch started are not transitions of this edge.
                let mut was_true = HashSet::new();
                let mut stream = watcher(api, config).boxed();
                while let Some(event) = stream.next().await {
                    // Stamp before anything else: the time of receipt is the measurement.
                    let at = Timestamp::now();
                    let Ok(event) = event else { continue };
                    let true_now = |n: &Node| {
                        condition(n, UNDER_MAINTENANCE).is_some_and(|c| c.status == "True")
                    };
                    match event {
                        // (Not True in the initial list: the arm below, which skips it.)
                        watcher::Event::InitApply(n) if synced_tx.is_some() && true_now(&n) => {
                            was_true.insert(n.metadata.name.clone().unwrap_or_default());
                        }
                        watcher::Event::InitDone => {
                            if let Some(tx) = synced_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        watcher::Event::Apply(n) | watcher::Event::InitApply(n) => {
                            let name = n.metadata.name.clone().unwrap_or_default();
                            if true_now(&n) && !was_true.contains(&name) {
                                seen.lock().unwrap().entry(name).or_insert(at);
                            }
                        }
                        _ => {}
                    }
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(60), synced_rx)
            .await
            .context("the edge watch did not complete its initial list in 60 s")?
            .context("the edge watch ended")?;
        Ok(EdgeWatch { seen, task })
    }

    /// Waits until `count` nodes have turned True (or `timeout`); their times.
    async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Timestamp> {
        let started = Instant::now();
        while self.transitions() < count && started.elapsed() < timeout {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.seen.lock().unwrap().values().copied().collect()
    }

    fn transitions(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The nodes seen turning True.
    fn nodes(&self) -> Vec<String> {
        self.seen.lock().unwrap().keys().cloned().collect()
    }
}

impl Drop for EdgeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------
// The pods mode: what watching pods costs

/// Namespace of the pods.
const POD_NAMESPACE: &str = "bench-pods";
/// kumaco's flags in the pods mode: every rule of the brain (module docs).
fn brain_args() -> Vec<String> {
    vec![
        "--in-progress".into(),
        "--require-condition=kured.dev/RebootRequired".into(),
        "--max-in-progress=10".into(),
        "--max-in-progress-per=topology.kubernetes.io/zone=2".into(),
        "--block-node-selector=bench.kumaco.dev/rack=r13".into(),
        format!("--block-pod-selector={}", podchurn::blocking_selector()),
        "--start-interval=15m".into(),
    ]
}

/// kumaco's and the API server's counters at one moment of the pods mode.
#[derive(Clone)]
struct PodSnapshot {
    at: Instant,
    cpu: f64,
    passes: f64,
    pass_seconds: f64,
    relevant_node_events: f64,
    other_node_events: f64,
    /// Pod watch events the API server sent (kumaco's pod watch is the only one).
    pod_watch_events: f64,
    /// Bytes received on each of kumaco's TCP sockets (its connections to the API
    /// server: the watches' streams), by local and peer address.
    received: HashMap<String, u64>,
    writes: u64,
}

/// Bytes received so far on each established TCP socket of process `pid` (`ss -ti`'s
/// `bytes_received`), by `local peer` address.
fn socket_bytes_received(pid: u32) -> Result<HashMap<String, u64>> {
    let out = std::process::Command::new("ss")
        .args(["-tinpH", "state", "established"])
        .output()
        .context("running ss (iproute2)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    // One socket per record: a line, then its indented details.
    let mut records: Vec<String> = Vec::new();
    for line in text.lines() {
        match records.last_mut() {
            Some(r) if line.starts_with(char::is_whitespace) => r.push_str(line),
            _ => records.push(line.to_string()),
        }
    }
    let owner = format!("pid={pid},");
    Ok(records
        .iter()
        .filter(|r| r.contains(&owner))
        .filter_map(|r| {
            let fields: Vec<&str> = r.split_whitespace().collect();
            // State is filtered out: Recv-Q Send-Q Local Peer ...
            let socket = format!("{} {}", fields.get(2)?, fields.get(3)?);
            let bytes = fields
                .iter()
                .find_map(|f| f.strip_prefix("bytes_received:"))?
                .parse()
                .ok()?;
            Some((socket, bytes))
        })
        .collect())
}

/// The pod watch events the API server has sent, to every watch.
fn pod_watch_events_in(apiserver_metrics: &str) -> f64 {
    // Labelled by kind in older API servers, by resource in newer ones.
    let by = |label| metric_sum(apiserver_metrics, "apiserver_watch_events_total", &[label]);
    by(("kind", "Pod")).max(by(("resource", "pods")))
}

async fn pod_snapshot(kumaco: &Kumaco, client: &kube::Client) -> Result<PodSnapshot> {
    let at = Instant::now();
    let cpu = kumaco.cpu_seconds()?;
    // Before the scrape below, which kumaco receives too.
    let received = socket_bytes_received(kumaco.pid()?)?;
    let ours = kumaco.metrics().await?;
    let server = apiserver_metrics(client).await?;
    let reconcile = |suffix: &str| {
        metric_sum(
            &ours,
            &format!("kumaco_reconcile_duration_seconds_{suffix}"),
            &[],
        )
    };
    let node_events =
        |relevant: &str| metric_sum(&ours, "kumaco_node_events_total", &[("relevant", relevant)]);
    Ok(PodSnapshot {
        at,
        cpu,
        passes: reconcile("count"),
        pass_seconds: reconcile("sum"),
        relevant_node_events: node_events("true"),
        other_node_events: node_events("false"),
        pod_watch_events: pod_watch_events_in(&server),
        received,
        writes: kumaco_writes_in(&server),
    })
}

/// Indices of the nodes that may wait to start in the waiting phase: under maintenance
/// (the always-active windows select racks r07-r09 outside batch b0) and available,
/// neither down nor blocked by label nor flipped by the availability phase.
fn waiting_candidates(n: usize) -> impl Iterator<Item = usize> {
    (0..n).filter(|i| {
        (7..=9).contains(&(i % RACKS))
            && i / BATCH != 0
            && ![0, 37].contains(&(i % 100))
            && i % 250 != 0
    })
}

/// The first `count` of [`waiting_candidates`], checked against what kumaco wrote.
async fn waiting_nodes(api: &Api<Node>, names: &[String], count: usize) -> Result<Vec<String>> {
    let picked: Vec<String> = waiting_candidates(names.len())
        .take(count)
        .map(|i| names[i].clone())
        .collect();
    for name in &picked {
        let node = api.get(name).await?;
        if condition(&node, UNDER_MAINTENANCE).is_none_or(|c| c.status != "True") {
            bail!("node {name} was picked to wait to start but is not {UNDER_MAINTENANCE}=True");
        }
    }
    Ok(picked)
}

/// The last phase of the pods mode: the `waiting` nodes wait to start (`RebootRequired`
/// True, held back by a blocking pod each; the down nodes fill every slot, so none
/// starts), and their blocking pods are deleted and created again at the matching rate.
/// Each such change decides what the node's `MaintenanceInProgress` says (`Blocked`, or
/// `WaitingForSlot` while its pod is gone): a pass and a write each.
async fn waiting_phase(
    kumaco: &Kumaco,
    client: &kube::Client,
    waiting: &[String],
    spec: ChurnSpec,
    baseline_rate: f64,
) -> Result<Value> {
    const WAITING_NAMESPACE: &str = "bench-pods-waiting";
    println!(
        "   blocking pods on {} nodes waiting to start: {}/s deleted or created for {:.0}s...",
        waiting.len(),
        spec.rate,
        spec.duration.as_secs_f64()
    );
    fleet::create_namespace(client, WAITING_NAMESPACE).await?;
    let fleet = Arc::new(PodFleet {
        namespace: WAITING_NAMESPACE.into(),
        nodes: waiting.to_vec(),
        total: waiting.len(),
        matching: waiting.len(),
    });
    podchurn::create_pods(client, &fleet).await?;
    for name in waiting {
        set_condition(client, name, REBOOT_REQUIRED, "True", "churn-kured").await?;
    }
    settle(client).await?;
    let api: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(client.clone(), WAITING_NAMESPACE);
    let pods = Arc::new(fleet.matching_pods());
    let before = pod_snapshot(kumaco, client).await?;
    let counts = Paced::start(spec, move |k| {
        podchurn::matching_change(&api, &fleet, &pods, Some(2), k)
    })
    .finish()
    .await;
    tokio::time::sleep(CHURN_DRAIN).await;
    let after = pod_snapshot(kumaco, client).await?;
    if counts.failed > 0 {
        println!(
            "   waiting nodes: {} changes failed, first: {:?}",
            counts.failed, counts.first_error
        );
    }
    Ok(pod_phase(
        "blocking pods, waiting nodes",
        "blocking pods on nodes waiting to start, deleted and created again in turn",
        (&before, &after),
        Some(&counts),
        Some(baseline_rate),
    ))
}

/// One phase's figures, between two snapshots.
fn pod_phase(
    name: &str,
    what: &str,
    (from, to): (&PodSnapshot, &PodSnapshot),
    changes: Option<&podchurn::PacedCounts>,
    baseline_cpu_per_second: Option<f64>,
) -> Value {
    let seconds = to.at.duration_since(from.at).as_secs_f64();
    let cpu = to.cpu - from.cpu;
    let passes = to.passes - from.passes;
    let accepted = changes.map_or(0, |c| c.accepted);
    let net = baseline_cpu_per_second.map(|b| cpu - b * seconds);
    let per_change_ms = |cpu: f64| (accepted > 0).then(|| cpu / accepted as f64 * 1000.0);
    json!({
        "phase": name,
        "what": what,
        "seconds": seconds,
        "changes": changes,
        "changes_accepted": accepted,
        "cpu_seconds": cpu,
        "cpu_seconds_net_of_baseline": net,
        "cpu_ms_per_change": per_change_ms(cpu),
        "cpu_ms_per_change_net": net.and_then(per_change_ms),
        "kumaco_passes": passes,
        "pass_mean_ms": (passes > 0.0)
            .then(|| (to.pass_seconds - from.pass_seconds) / passes * 1000.0),
        "node_events_relevant": to.relevant_node_events - from.relevant_node_events,
        "node_events_ignored": to.other_node_events - from.other_node_events,
        // To every pod watch: kumaco's, and one the API server keeps for itself.
        "pod_watch_events_sent": to.pod_watch_events - from.pod_watch_events,
        // On the sockets open at the end (a socket closed meanwhile is not counted; the
        // watches keep theirs).
        "kumaco_bytes_received": to
            .received
            .iter()
            .map(|(socket, bytes)| bytes.saturating_sub(from.received.get(socket).copied().unwrap_or(0)))
            .sum::<u64>(),
        "kumaco_writes": to.writes - from.writes,
    })
}

/// The pods mode at `n` nodes (module docs).
async fn run_pods(args: &Args, n: usize, run: u64) -> Result<Value> {
    let load_start = load_average();
    println!(
        "== pods mode: {n} nodes, {} pods ({} matching), run {run}/{} (load average {load_start})",
        args.pods, args.matching_pods, args.repeat
    );
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let scope = Scope::new("bench");

    let setup = Instant::now();
    fleet::create_namespace(&client, NAMESPACE).await?;
    fleet::create_namespace(&client, POD_NAMESPACE).await?;
    fleet::create_nodes(&client, &scope, n).await?;
    let nodes_secs = setup.elapsed().as_secs_f64();
    create_windows(&client).await?;
    let names: Vec<String> = (0..n).map(|i| fleet::node_name(&scope, i)).collect();
    // Nodes down, as in the pass benchmark: every 100th NotReady, every 250th cordoned
    // (NotReady if both).
    let downs: Vec<(usize, bool)> = (0..n)
        .filter_map(|i| {
            (i % 100 == 0)
                .then_some((i, false))
                .or((i % 250 == 0).then_some((i, true)))
        })
        .collect();
    futures::stream::iter(downs.clone())
        .map(|(i, cordon)| {
            let (client, name) = (client.clone(), names[i].clone());
            async move {
                let api: Api<Node> = Api::all(client);
                // Changes 0 and 2 of the availability churn: NotReady, cordoned.
                let k = if cordon { 2 } else { 0 };
                podchurn::availability_change(&api, &Arc::new(vec![name]), k)
                    .await
                    .map_err(anyhow::Error::msg)?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await?;
    let pod_fleet = Arc::new(PodFleet {
        namespace: POD_NAMESPACE.into(),
        nodes: names.clone(),
        total: args.pods,
        matching: args.matching_pods,
    });
    println!(
        "   setup: {n} nodes in {nodes_secs:.1}s, {WINDOWS} windows, {} nodes down; creating {} pods...",
        downs.len(),
        args.pods
    );
    let pods_secs = podchurn::create_pods(&client, &pod_fleet).await?;
    println!(
        "   {} pods created and Running in {pods_secs:.1}s ({:.0} pods/s, 2 requests each, {} in flight)",
        args.pods,
        args.pods as f64 / pods_secs,
        podchurn::IN_FLIGHT
    );

    let budgets_secs = if args.budgets > 0 {
        let secs = podchurn::create_budgets(&client, &pod_fleet, args.budgets).await?;
        println!(
            "   {} PodDisruptionBudgets created in {secs:.1}s",
            args.budgets
        );
        Some(secs)
    } else {
        None
    };

    let pod_api: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(server.client().await?, POD_NAMESPACE);
    let others = Arc::new(pod_fleet.other_pods());
    let writes_at_spawn = kumaco_writes(&client).await?;
    let options = KumacoOptions {
        namespace: NAMESPACE,
        name: MANAGER,
        extra_args: brain_args(),
    };
    let mut kumaco = Kumaco::spawn(&args.kumaco, &server, &scope, &options).await?;
    let ready_secs = kumaco.wait_ready(READY_TIMEOUT).await?;
    println!("   kumaco ready in {ready_secs:.2}s");
    settle(&client).await?;
    let startup_writes = kumaco_writes(&client).await? - writes_at_spawn;
    let rss_ready = kumaco.status_kib("VmHWM")? * 1024;

    let phase_length = Duration::from_secs_f64(args.phase_seconds);
    let spec = |rate: f64| ChurnSpec {
        rate,
        duration: phase_length,
    };
    let node_api: Api<Node> = Api::all(server.client().await?);
    let matching = Arc::new(pod_fleet.matching_pods());
    let all_nodes = Arc::new(names.clone());
    // Nodes neither down nor blocked for the availability churn: i % 100 == 37.
    let flipping = Arc::new(
        (0..n)
            .filter(|i| i % 100 == 37)
            .map(|i| names[i].clone())
            .collect::<Vec<_>>(),
    );

    // The baseline: nothing changes.
    println!("   baseline: {}s without changes...", args.phase_seconds);
    let before = pod_snapshot(&kumaco, &client).await?;
    tokio::time::sleep(phase_length + CHURN_DRAIN).await;
    let after = pod_snapshot(&kumaco, &client).await?;
    let baseline = pod_phase("baseline", "no change", (&before, &after), None, None);
    let baseline_rate = num(&baseline["cpu_seconds"]) / num(&baseline["seconds"]);
    let mut phases = vec![baseline];

    type Change = Box<
        dyn Fn(u64) -> futures::future::BoxFuture<'static, Result<&'static str, String>>
            + Send
            + Sync,
    >;
    let mut plan: Vec<(&str, &str, f64, Change)> = vec![
        (
            "other pods",
            "pods not matching: a label, an annotation, a status update, in turn",
            args.other_pod_rate,
            Box::new({
                let (api, fleet, others) = (pod_api.clone(), pod_fleet.clone(), others.clone());
                move |k| podchurn::non_matching_change(&api, &fleet, &others, k)
            }),
        ),
        (
            "matching pods: status",
            "matching pods: status updates only",
            args.matching_pod_rate,
            Box::new({
                let (api, fleet, matching) = (pod_api.clone(), pod_fleet.clone(), matching.clone());
                move |k| podchurn::matching_change(&api, &fleet, &matching, None, k)
            }),
        ),
        (
            "matching pods: with deletes",
            "matching pods: of every 10 visits of a pod, one deletes it and the next creates it again; status updates otherwise",
            args.matching_pod_rate,
            Box::new({
                let (api, fleet, matching) = (pod_api.clone(), pod_fleet.clone(), matching.clone());
                move |k| podchurn::matching_change(&api, &fleet, &matching, Some(10), k)
            }),
        ),
    ];
    if args.heartbeat_rate > 0.0 {
        plan.push((
            "node heartbeats",
            "kubelet heartbeats: lastHeartbeatTime of Ready only",
            args.heartbeat_rate,
            Box::new({
                let (api, nodes) = (node_api.clone(), all_nodes.clone());
                move |k| podchurn::heartbeat(&api, &nodes, k)
            }),
        ));
    }
    if args.availability_rate > 0.0 {
        plan.push((
            "node availability",
            "Ready False/True and cordon/uncordon, in turn, on nodes otherwise available",
            args.availability_rate,
            Box::new({
                let (api, nodes) = (node_api.clone(), flipping.clone());
                move |k| podchurn::availability_change(&api, &nodes, k)
            }),
        ));
    }
    for (name, what, rate, change) in plan {
        println!("   {name}: {rate}/s for {}s...", args.phase_seconds);
        let before = pod_snapshot(&kumaco, &client).await?;
        let counts = Paced::start(spec(rate), change).finish().await;
        tokio::time::sleep(CHURN_DRAIN).await;
        let after = pod_snapshot(&kumaco, &client).await?;
        if counts.failed > 0 {
            println!(
                "   {name}: {} changes failed, first: {:?}",
                counts.failed, counts.first_error
            );
        }
        phases.push(pod_phase(
            name,
            what,
            (&before, &after),
            Some(&counts),
            Some(baseline_rate),
        ));
    }
    if args.waiting_nodes > 0 {
        let waiting = waiting_nodes(&node_api, &names, args.waiting_nodes).await?;
        phases.push(
            waiting_phase(
                &kumaco,
                &client,
                &waiting,
                spec(args.matching_pod_rate),
                baseline_rate,
            )
            .await?,
        );
    }
    let rss = kumaco.status_kib("VmHWM")? * 1024;
    let budgets_seen = metric_sum(
        &kumaco.metrics().await?,
        "kumaco_gate_pod_disruption_budgets",
        &[],
    );
    let log = kumaco.log_path().to_path_buf();
    kumaco.stop();
    drop(server);
    Ok(json!({
        "mode": "pods",
        "nodes": n,
        "run": run,
        "pods": args.pods,
        "matching_pods": args.matching_pods,
        "budgets": args.budgets,
        "budgets_seen_by_kumaco": budgets_seen,
        "setup_budgets_seconds": budgets_secs,
        "kumaco_args": brain_args(),
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "setup_nodes_seconds": nodes_secs,
        "setup_pods_seconds": pods_secs,
        "nodes_down": downs.len(),
        "ready_seconds": ready_secs,
        "startup_status_writes": startup_writes,
        "peak_rss_mib_at_ready": rss_ready as f64 / (1024.0 * 1024.0),
        "peak_rss_mib": rss as f64 / (1024.0 * 1024.0),
        "phases": phases,
        "kumaco_log": log,
    }))
}

fn print_pods_table(r: &Value) {
    println!(
        "{} nodes, {} pods ({} matching), {} PodDisruptionBudgets (kumaco saw {}); load \
         average {} → {}; pods created in {:.1} s; ready in {:.2} s; peak RSS {:.1} MiB",
        r["nodes"],
        r["pods"],
        r["matching_pods"],
        r["budgets"],
        r["budgets_seen_by_kumaco"],
        r["load_average_start"].as_str().unwrap_or("?"),
        r["load_average_end"].as_str().unwrap_or("?"),
        num(&r["setup_pods_seconds"]),
        num(&r["ready_seconds"]),
        num(&r["peak_rss_mib"]),
    );
    println!(
        "{:<28} {:>8} {:>9} {:>9} {:>10} {:>8} {:>8} {:>9} {:>9} {:>7}",
        "phase",
        "changes",
        "CPU s",
        "net s",
        "ms/change",
        "net ms",
        "passes",
        "pass ms",
        "KiB recv",
        "writes"
    );
    for p in r["phases"].as_array().into_iter().flatten() {
        let opt = |v: &Value, digits: usize| match v.as_f64() {
            Some(x) => format!("{x:.digits$}"),
            None => "-".into(),
        };
        println!(
            "{:<28} {:>8} {:>9} {:>9} {:>10} {:>8} {:>8} {:>9} {:>9} {:>7}",
            p["phase"].as_str().unwrap_or("?"),
            p["changes_accepted"].to_string(),
            opt(&p["cpu_seconds"], 3),
            opt(&p["cpu_seconds_net_of_baseline"], 3),
            opt(&p["cpu_ms_per_change"], 3),
            opt(&p["cpu_ms_per_change_net"], 3),
            opt(&p["kumaco_passes"], 0),
            opt(&p["pass_mean_ms"], 2),
            opt(&(num(&p["kumaco_bytes_received"]) / 1024.0).into(), 1),
            p["kumaco_writes"].to_string(),
        );
    }
}
