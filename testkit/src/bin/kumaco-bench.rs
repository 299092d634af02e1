//! `kumaco-bench`: kumaco at scale against a private, real kube-apiserver + etcd on loopback
//! (issue 7, item 1). Not a test: it runs only when asked.
//!
//! ```sh
//! cargo build --release --bin kumaco        # the binary under test
//! cargo run --release -p testkit --bin kumaco-bench -- --nodes 1000,5000
//! #   --kumaco PATH   kumaco binary (default target/release/kumaco)
//! #   --idle SECS     length of the idle period (default 120)
//! #   --json FILE     results (default target/kumaco-bench.json)
//! ```
//!
//! For each N, on a fresh API server (so its request counters and the cluster size belong
//! to this N alone):
//!
//! 1. N nodes of realistic size (20 labels, 5 conditions, 40 images, 4 zones) and 200
//!    windows of mixed schedules, almost all inactive for the whole run;
//! 2. kumaco started: (a) time from spawn to `/readyz` 200;
//! 3. a one-shot window selecting 1,000 nodes (all if fewer) opening on a whole second
//!    ~10 s ahead; an independent watch records when each node shows `True`: (b) p50,
//!    p99, max of seen − edge; (c) `nodes/status` writes (APPLY or PATCH) counted by the
//!    API server itself during the transition, against the number of transitions;
//! 4. (d) the same count over an idle period with no edge;
//! 5. (e) kumaco's peak RSS (VmHWM) and CPU seconds (utime + stime).
//!
//! Targets at 5,000 nodes: ready < 5 s, edge p99 < 1 s, RSS < 64 MiB, writes = transitions
//! at the edge, 0 when idle. The machine's load average is recorded at start and end,
//! because the figures mean little without it.

use std::collections::{BTreeMap, HashMap};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use testkit::kumaco::{apiserver_metrics, http_get, metric_sum};
use testkit::nodes::condition;
use testkit::{ApiServer, SCOPE_LABEL, Scope};

const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
const WINDOW_LABEL: &str = "kured.dev/maintenance-window";
const NAMESPACE: &str = "bench";
/// Requests in flight while creating nodes: enough to keep the API server busy on 2
/// cores, few enough not to trip its max-in-flight limits.
const SETUP_CONCURRENCY: usize = 32;
/// The background windows (the edge window comes on top).
const WINDOWS: usize = 200;
/// How many nodes the edge window selects (all if the cluster is smaller).
const EDGE_NODES: usize = 1000;
/// The edge is this far ahead of the moment the edge window is created: time for kumaco
/// to load it and for the measurement baseline to be read.
const EDGE_AHEAD_SECS: i64 = 10;
/// Bounds on every wait, so that a broken kumaco ends the run instead of hanging it.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const TRANSITION_TIMEOUT: Duration = Duration::from_secs(60);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Writes are "settled" when the API server's counter has not moved for this long.
const QUIET: Duration = Duration::from_secs(3);

struct Args {
    nodes: Vec<usize>,
    kumaco: PathBuf,
    idle: Duration,
    json: PathBuf,
}

fn parse_args() -> Result<Args> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut args = Args {
        nodes: vec![1000],
        kumaco: root.join("target/release/kumaco"),
        idle: Duration::from_secs(120),
        json: root.join("target/kumaco-bench.json"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        // Both `--flag value` and `--flag=value`.
        let (flag, value) = match flag.split_once('=') {
            Some((f, v)) => (f.to_string(), v.to_string()),
            None if flag == "--help" || flag == "-h" => {
                println!(
                    "usage: kumaco-bench [--nodes 1000,5000] [--kumaco PATH] [--idle SECS] \
                     [--json FILE]"
                );
                std::process::exit(0);
            }
            None => {
                let v = it.next().with_context(|| format!("{flag} needs a value"))?;
                (flag, v)
            }
        };
        match flag.as_str() {
            "--nodes" => {
                args.nodes = value
                    .split(',')
                    .map(|n| {
                        n.trim()
                            .parse::<usize>()
                            .context("--nodes: a list of counts")
                    })
                    .collect::<Result<_>>()?;
                if args.nodes.contains(&0) {
                    bail!("--nodes: counts must be positive");
                }
            }
            "--kumaco" => args.kumaco = PathBuf::from(value),
            "--idle" => args.idle = Duration::from_secs(value.parse().context("--idle SECS")?),
            "--json" => args.json = PathBuf::from(value),
            other => bail!("unknown flag {other} (see --help)"),
        }
    }
    if !args.kumaco.exists() {
        bail!(
            "{} does not exist: run `cargo build --release --bin kumaco` first, or pass \
             --kumaco PATH",
            args.kumaco.display()
        );
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let mut results = Vec::new();
    for &n in &args.nodes {
        let result = run_one(&args, n).await?;
        print_table(&result);
        results.push(result);
        // Written after each N, so a later, failing N keeps the earlier figures.
        if let Some(dir) = args.json.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&args.json, serde_json::to_string_pretty(&json!(results))?)?;
    }
    println!("results written to {}", args.json.display());
    Ok(())
}

/// One full measurement at `n` nodes, on its own API server.
async fn run_one(args: &Args, n: usize) -> Result<Value> {
    let load_start = load_average();
    println!("== {n} nodes (load average {load_start})");
    // start_fresh blocks for a few seconds; nothing else runs on this runtime yet.
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let scope = Scope::new("bench");

    let setup = Instant::now();
    create_namespace(&client).await?;
    create_nodes(&client, &scope, n).await?;
    let nodes_secs = setup.elapsed().as_secs_f64();
    create_windows(&client).await?;
    println!("   setup: {n} nodes in {nodes_secs:.1}s, {WINDOWS} windows");

    // Counted from before the spawn: kumaco may write as soon as its lists are in.
    let writes_at_spawn = status_writes(&client).await?;
    let mut kumaco = Kumaco::spawn(&args.kumaco, &server, &scope)?;
    let ready_secs = kumaco.wait_ready().await?;
    let cpu_at_ready = kumaco.cpu_seconds()?;
    println!("   ready in {ready_secs:.2}s");
    // The few windows active from the start make kumaco write once at startup; the edge
    // measurement starts after those writes are done.
    settle(&client).await?;
    let startup_writes = status_writes(&client).await? - writes_at_spawn;

    // (b), (c): the edge.
    let watch = EdgeWatch::start(&client, &scope).await?;
    let edge_count = n.min(EDGE_NODES);
    let edge = Timestamp::from_second(Timestamp::now().as_second() + EDGE_AHEAD_SECS)?;
    put_window(
        &client,
        "bench-edge",
        &[
            ("startTime", &edge.to_string()),
            ("duration", "1h"),
            ("nodeSelector", "bench.kumaco.dev/batch=b0"),
            ("description", "kumaco-bench edge"),
        ],
    )
    .await?;
    sleep_until(edge - SignedDuration::from_secs(2)).await;
    let writes_before = status_writes(&client).await?;
    let seen = watch.wait_for(edge_count, TRANSITION_TIMEOUT).await;
    // Late or duplicate writes would come after the last transition: let them land.
    settle(&client).await?;
    let edge_writes = status_writes(&client).await? - writes_before;
    let transitions = watch.transitions();
    let mut latencies_ms: Vec<f64> = seen
        .iter()
        .map(|t| t.duration_since(edge).as_secs_f64() * 1000.0)
        .collect();
    latencies_ms.sort_by(f64::total_cmp);
    println!(
        "   edge: {}/{edge_count} nodes True, {edge_writes} writes",
        seen.len()
    );

    // (d): idle. No window has an edge during this period.
    println!("   idle for {}s...", args.idle.as_secs());
    let idle_before = status_writes(&client).await?;
    tokio::time::sleep(args.idle).await;
    let idle_writes = status_writes(&client).await? - idle_before;

    // (e): resources at the end.
    let rss = kumaco.status_kib("VmHWM")? * 1024;
    // The current size too: a peak far above it points at a startup transient.
    let rss_now = kumaco.status_kib("VmRSS")? * 1024;
    let cpu = kumaco.cpu_seconds()?;
    let log = kumaco.log.clone();
    kumaco.stop();
    drop(watch);
    drop(server);
    let load_end = load_average();

    Ok(json!({
        "nodes": n,
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
        "edge_latency_ms": {
            "p50": percentile(&latencies_ms, 0.50),
            "p99": percentile(&latencies_ms, 0.99),
            "max": latencies_ms.last().copied(),
            "min": latencies_ms.first().copied(),
        },
        "idle_seconds": args.idle.as_secs(),
        "idle_status_writes": idle_writes,
        "peak_rss_mib": rss as f64 / (1024.0 * 1024.0),
        "rss_at_end_mib": rss_now as f64 / (1024.0 * 1024.0),
        "cpu_seconds": cpu,
        "kumaco_log": log,
    }))
}

fn print_table(r: &Value) {
    let f = |key: &str| r[key].clone();
    let lat = &r["edge_latency_ms"];
    let rows: Vec<(String, String, &str)> = vec![
        ("nodes".into(), f("nodes").to_string(), ""),
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
            format!("(d) writes in {} s idle", f("idle_seconds")),
            f("idle_status_writes").to_string(),
            "0",
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
            "    CPU (utime+stime)".into(),
            format!("{:.2} s", num(&f("cpu_seconds"))),
            "",
        ),
    ];
    println!("{:<34} {:>22}  target", "measure", "value");
    for (name, value, target) in rows {
        println!("{name:<34} {value:>22}  {target}");
    }
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

const ZONES: [&str; 4] = ["zone-a", "zone-b", "zone-c", "zone-d"];
const POOLS: [&str; 3] = ["general", "memory", "gpu"];

/// The labels of node `i`: 20 in all, as a cloud node carries (well-known topology and
/// instance labels plus a few of the operator's own). `batch` groups nodes by 1,000 (the
/// edge window selects `b0`); `rack` gives small groups for the background windows.
fn node_labels(scope: &Scope, name: &str, i: usize) -> BTreeMap<String, String> {
    let zone = ZONES[i % ZONES.len()];
    let pool = POOLS[i % POOLS.len()];
    let pairs = [
        (SCOPE_LABEL, scope.value().to_string()),
        ("kubernetes.io/hostname", name.to_string()),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", "amd64".into()),
        ("beta.kubernetes.io/os", "linux".into()),
        ("beta.kubernetes.io/arch", "amd64".into()),
        ("topology.kubernetes.io/zone", zone.into()),
        ("topology.kubernetes.io/region", "bench-region-1".into()),
        ("failure-domain.beta.kubernetes.io/zone", zone.into()),
        ("node.kubernetes.io/instance-type", "m6i.2xlarge".into()),
        ("node-role.kubernetes.io/worker", String::new()),
        ("node.kubernetes.io/pool", pool.into()),
        ("bench.kumaco.dev/batch", format!("b{}", i / EDGE_NODES)),
        ("bench.kumaco.dev/rack", format!("r{:02}", i % 50)),
        ("bench.kumaco.dev/team", format!("team-{}", i % 7)),
        ("bench.kumaco.dev/env", "production".into()),
        ("bench.kumaco.dev/kernel", "6.8.0-45".into()),
        ("bench.kumaco.dev/os-image", "ubuntu-24.04".into()),
        ("bench.kumaco.dev/reboot-group", format!("g{}", i % 10)),
        ("bench.kumaco.dev/cost-center", format!("cc-{}", i % 13)),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// What a kubelet reports: the 5 standard conditions, 40 images (the bulk of a real
/// node's size), addresses, capacity and node info.
fn node_status(i: usize) -> Value {
    let now = Timestamp::now().to_string();
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({
            "type": type_, "status": status, "reason": reason,
            "message": format!("kubelet reports {reason}"),
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
    let images: Vec<Value> = (0..40)
        .map(|k| {
            let repo = format!("registry.example.com/platform/service-{k:02}");
            json!({
                "names": [
                    format!("{repo}@sha256:{:064x}", (k as u128 + 1) * 0x9e37_79b9_7f4a_7c15),
                    format!("{repo}:v1.{k}.{}", i % 5),
                ],
                "sizeBytes": 20_000_000 + k * 3_000_000,
            })
        })
        .collect();
    json!({
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            condition("NetworkUnavailable", "False", "RouteCreated"),
            condition("Ready", "True", "KubeletReady"),
        ],
        "addresses": [
            { "type": "InternalIP", "address": format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256) },
            { "type": "Hostname", "address": format!("ip-10-{i}") },
        ],
        "capacity": { "cpu": "8", "memory": "32613388Ki", "pods": "110", "ephemeral-storage": "101430960Ki" },
        "allocatable": { "cpu": "7910m", "memory": "31595532Ki", "pods": "110", "ephemeral-storage": "93478772Ki" },
        "nodeInfo": {
            "machineID": format!("{i:032x}"), "systemUUID": format!("ec2{i:029x}"),
            "bootID": format!("{:032x}", i * 7919), "kernelVersion": "6.8.0-45-generic",
            "osImage": "Ubuntu 24.04.1 LTS", "containerRuntimeVersion": "containerd://1.7.22",
            "kubeletVersion": "v1.37.0", "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": images,
    })
}

async fn create_namespace(client: &kube::Client) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .context("creating the windows' namespace")?;
    Ok(())
}

/// Creates the nodes, `SETUP_CONCURRENCY` at a time: each a POST then a status patch
/// (the API server ignores status on create), as a kubelet registers.
async fn create_nodes(client: &kube::Client, scope: &Scope, n: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = scope.node_name(&format!("{i:05}"));
                let node: Node = serde_json::from_value(json!({
                    "metadata": { "name": name, "labels": node_labels(scope, &name, i) },
                    "spec": { "providerID": format!("aws:///bench/{name}") },
                }))?;
                api.create(&PostParams::default(), &node)
                    .await
                    .with_context(|| format!("creating node {name}"))?;
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": node_status(i) })),
                )
                .await
                .with_context(|| format!("setting the status of node {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await
}

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
                put_window(&client, &name, &data).await
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Creates or replaces window ConfigMap `name` (server-side apply).
async fn put_window(client: &kube::Client, name: &str, data: &[(&str, &str)]) -> Result<()> {
    let data: serde_json::Map<_, _> = data
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "labels": { WINDOW_LABEL: "" } },
        "data": data,
    });
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .patch(
            name,
            &PatchParams::apply("kumaco-bench").force(),
            &Patch::Apply(cm),
        )
        .await
        .with_context(|| format!("applying window {name}"))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Measuring

/// Writes to `nodes/status` as the API server counts them (server-side apply is APPLY,
/// any other patch PATCH), all clients together: only kumaco writes once setup is done.
async fn status_writes(client: &kube::Client) -> Result<u64> {
    let text = apiserver_metrics(client).await?;
    Ok(["APPLY", "PATCH"]
        .iter()
        .map(|verb| {
            metric_sum(
                &text,
                "apiserver_request_total",
                &[
                    ("verb", verb),
                    ("resource", "nodes"),
                    ("subresource", "status"),
                ],
            ) as u64
        })
        .sum())
}

/// Waits until the status write counter stops moving for `QUIET` (bounded by
/// `SETTLE_TIMEOUT`).
async fn settle(client: &kube::Client) -> Result<()> {
    let started = Instant::now();
    let mut last = status_writes(client).await?;
    let mut since = Instant::now();
    while started.elapsed() < SETTLE_TIMEOUT {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = status_writes(client).await?;
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
                let mut was_true = std::collections::HashSet::new();
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
}

impl Drop for EdgeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `kumaco run` as a child process whose pid we keep, for /proc.
struct Kumaco {
    child: Option<Child>,
    spawned: Instant,
    health: SocketAddr,
    log: PathBuf,
}

impl Kumaco {
    fn spawn(bin: &std::path::Path, server: &ApiServer, scope: &Scope) -> Result<Self> {
        // Two listeners held together so the ports differ (kumaco binds them right away).
        let (m, h) = (
            TcpListener::bind("127.0.0.1:0")?,
            TcpListener::bind("127.0.0.1:0")?,
        );
        let (metrics, health) = (m.local_addr()?, h.local_addr()?);
        drop((m, h));
        let dir = std::env::temp_dir().join("kumaco-bench");
        std::fs::create_dir_all(&dir)?;
        let log = dir.join(format!(
            "kumaco-{}-{}.log",
            std::process::id(),
            scope.value()
        ));
        let out = std::fs::File::create(&log)?;
        let spawned = Instant::now();
        let child = Command::new(bin)
            .arg("run")
            .arg("--kubeconfig")
            .arg(server.kubeconfig())
            .arg("--leader-elect=false")
            .arg(format!("--metrics-address={metrics}"))
            .arg(format!("--health-address={health}"))
            .arg(format!("--namespace={NAMESPACE}"))
            .arg(format!("--node-selector={}", scope.selector()))
            .arg("--field-manager=kumaco-bench")
            .arg("--log-format=json")
            // info, not debug: per-node debug lines at 5,000 nodes would be what we measure.
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Kumaco {
            child: Some(child),
            spawned,
            health,
            log,
        })
    }

    /// Polls `/readyz` every 10 ms; seconds from spawn to the first 200.
    async fn wait_ready(&mut self) -> Result<f64> {
        while self.spawned.elapsed() < READY_TIMEOUT {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!("kumaco exited with {status}; log {}", self.log.display());
            }
            if let Ok((200, _)) = http_get(self.health, "/readyz").await {
                return Ok(self.spawned.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!(
            "kumaco not ready in {READY_TIMEOUT:?}; log {}",
            self.log.display()
        )
    }

    fn pid(&self) -> Result<u32> {
        Ok(self.child.as_ref().context("kumaco is not running")?.id())
    }

    /// A `kB` field of /proc/<pid>/status: `VmHWM` (peak resident set), `VmRSS` (now).
    fn status_kib(&self, field: &str) -> Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .with_context(|| format!("no {field} in /proc/<pid>/status"))
    }

    /// utime + stime, in seconds.
    fn cpu_seconds(&self) -> Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()?))?;
        // The command name (field 2) may hold spaces; fields after its ')' are plain.
        // utime and stime are fields 14 and 15, i.e. 12th and 13th after the ')'.
        let rest = &stat[stat.rfind(')').context("malformed /proc/<pid>/stat")? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
        Ok(ticks / clock_ticks())
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Kumaco {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `sysconf(_SC_CLK_TCK)` without a libc dependency: ask getconf, else Linux's usual 100.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
