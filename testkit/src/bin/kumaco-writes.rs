//! `kumaco-writes`: what a node condition write costs the API server, by write method.
//! Not a test: it runs only when asked.
//!
//! ```sh
//! cargo run --release -p testkit --bin kumaco-writes -- --nodes 5000
//! #   --transitions K     nodes flipped per burst (default 1000)
//! #   --concurrency LIST  requests in flight (default 8,32,64)
//! #   --rounds R          bursts per method and concurrency (default 3)
//! #   --json FILE         results (default target/kumaco-writes.json)
//! ```
//!
//! On a fresh private API server with N nodes of realistic size (those of
//! `kumaco-bench`), bursts of K writes each turn one condition of K nodes to the other
//! status (every write is a transition), with three methods kumaco could use:
//!
//! - `apply`: server-side apply of the one condition (what kumaco does);
//! - `strategic`: a strategic-merge patch of `status.conditions` (merge key `type`);
//! - `json`: a JSON patch replacing the condition at its index, guarded by a `test` of
//!   `metadata.resourceVersion` (without the guard, an index is not safe: the list may
//!   have changed since it was read).
//!
//! Per burst: wall time, each write's latency (p50, p99), and the API server's CPU
//! seconds (from /proc: API server and etcd are one process). Methods take turns within
//! each round so that a change in the machine's load hits them alike. After each burst the
//! harness checks what kumaco relies on: the other conditions untouched, the condition's
//! `lastTransitionTime` as written, and the writer's ownership of the condition visible in
//! `managedFields` (the scope rule reads it).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use testkit::fleet::{self, load_average};
use testkit::process::cpu_seconds;
use testkit::{ApiServer, Scope};

const PROBE: &str = "bench.kumaco.dev/Probe";
const MANAGER: &str = "kumaco-writes";
/// The conditions each bench node's kubelet stand-in reports.
const KUBELET_CONDITIONS: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Method {
    Apply,
    Strategic,
    Json,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Apply => "apply",
            Method::Strategic => "strategic",
            Method::Json => "json",
        }
    }
}

#[derive(clap::Parser)]
struct Args {
    /// Cluster size.
    #[arg(long, default_value_t = 5000)]
    nodes: usize,
    /// Nodes flipped per burst.
    #[arg(long, default_value_t = 1000)]
    transitions: usize,
    /// Requests in flight.
    #[arg(long, value_delimiter = ',', default_value = "8,32,64")]
    concurrency: Vec<usize>,
    /// Bursts per method and concurrency.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Methods to compare.
    #[arg(long, value_delimiter = ',', default_value = "apply,strategic,json")]
    methods: Vec<Method>,
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-writes.json"))]
    json: PathBuf,
}

/// One node as the writer last left it: enough for the next write of any method.
#[derive(Clone)]
struct Target {
    name: String,
    resource_version: String,
    /// The probe condition's index in `status.conditions`, once it exists.
    index: Option<usize>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Args = clap::Parser::parse();
    if args.transitions > args.nodes {
        bail!("--transitions must not exceed --nodes");
    }
    let load_start = load_average();
    println!(
        "== {} nodes, {} transitions per burst (load average {load_start})",
        args.nodes, args.transitions
    );
    let server = ApiServer::start_fresh()?;
    let pid = server.pid().context("the API server is not running")?;
    let client = server.client().await?;
    let scope = Scope::new("writes");
    let setup = Instant::now();
    fleet::create_nodes(&client, &scope, args.nodes).await?;
    println!(
        "   setup: {} nodes in {:.1}s",
        args.nodes,
        setup.elapsed().as_secs_f64()
    );

    let api: Api<Node> = Api::all(client.clone());
    let mut targets = first_targets(&api, &scope, args.transitions).await?;
    // Every method writes the same condition with the same manager: the first burst
    // creates it, so it is a warm-up and not measured.
    burst(&api, Method::Apply, &mut targets, 32, "True").await?;

    let mut results = Vec::new();
    let mut status = "True";
    for round in 0..args.rounds {
        for &concurrency in &args.concurrency {
            // Rotate the order so no method always goes first after a pause.
            let mut methods = args.methods.clone();
            let turn = round % methods.len().max(1);
            methods.rotate_left(turn);
            for method in methods {
                status = if status == "True" { "False" } else { "True" };
                let cpu_before = cpu_seconds(pid)?;
                let started = Instant::now();
                let mut latencies = burst(&api, method, &mut targets, concurrency, status).await?;
                let wall = started.elapsed().as_secs_f64();
                let cpu = cpu_seconds(pid)? - cpu_before;
                check(&api, &targets, method, status).await?;
                latencies.sort_by(f64::total_cmp);
                let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
                let r = json!({
                    "method": method.name(), "concurrency": concurrency, "round": round,
                    "writes": latencies.len(), "wall_s": wall,
                    "writes_per_s": latencies.len() as f64 / wall,
                    "latency_p50_ms": p(0.5) * 1e3, "latency_p99_ms": p(0.99) * 1e3,
                    "apiserver_cpu_s": cpu,
                    "apiserver_cpu_ms_per_write": cpu / latencies.len() as f64 * 1e3,
                });
                println!(
                    "   {:<9} x{concurrency:<3} round {round}: {:.2}s, {:.0} writes/s, p99 {:.0} ms, API server {:.2} CPU-ms/write",
                    method.name(),
                    wall,
                    num(&r["writes_per_s"]),
                    num(&r["latency_p99_ms"]),
                    num(&r["apiserver_cpu_ms_per_write"]),
                );
                results.push(r);
            }
        }
    }
    let load_end = load_average();
    print_summary(&results, &args);
    let out = json!({
        "nodes": args.nodes, "transitions": args.transitions,
        "load_average_start": load_start, "load_average_end": load_end,
        "bursts": results,
    });
    std::fs::write(&args.json, serde_json::to_string_pretty(&out)?)
        .with_context(|| format!("writing {}", args.json.display()))?;
    println!(
        "(load average {load_end} at the end; results in {})",
        args.json.display()
    );
    Ok(())
}

async fn first_targets(api: &Api<Node>, scope: &Scope, n: usize) -> Result<Vec<Target>> {
    let list = api
        .list(&ListParams::default().labels(&scope.selector()))
        .await?;
    let mut targets: Vec<Target> = list
        .items
        .into_iter()
        .map(|node| Target {
            name: node.metadata.name.unwrap_or_default(),
            resource_version: node.metadata.resource_version.unwrap_or_default(),
            index: None,
        })
        .collect();
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    targets.truncate(n);
    Ok(targets)
}

/// Writes `status` to every target's probe condition, `concurrency` in flight; each
/// write's latency in seconds.
async fn burst(
    api: &Api<Node>,
    method: Method,
    targets: &mut [Target],
    concurrency: usize,
    status: &str,
) -> Result<Vec<f64>> {
    let now = Timestamp::now().to_string();
    let done: Vec<(usize, f64, Node)> = futures::stream::iter(targets.iter().enumerate())
        .map(|(i, target)| {
            let now = now.clone();
            async move {
                let started = Instant::now();
                let node = write(api, method, target, status, &now)
                    .await
                    .with_context(|| format!("{} to {}", method.name(), target.name))?;
                anyhow::Ok((i, started.elapsed().as_secs_f64(), node))
            }
        })
        .buffer_unordered(concurrency)
        .try_collect()
        .await?;
    let mut latencies = Vec::with_capacity(done.len());
    for (i, latency, node) in done {
        let target = &mut targets[i];
        target.resource_version = node.metadata.resource_version.unwrap_or_default();
        target.index = node
            .status
            .and_then(|s| s.conditions)
            .and_then(|cs| cs.iter().position(|c| c.type_ == PROBE));
        latencies.push(latency);
    }
    Ok(latencies)
}

async fn write(
    api: &Api<Node>,
    method: Method,
    target: &Target,
    status: &str,
    now: &str,
) -> Result<Node> {
    let condition = json!({
        "type": PROBE, "status": status, "reason": "Probe",
        "message": "kumaco-writes", "lastTransitionTime": now,
    });
    let params = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    let node = match method {
        Method::Apply => {
            let body = json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": { "name": target.name },
                "status": { "conditions": [condition] },
            });
            api.patch_status(
                &target.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(body),
            )
            .await?
        }
        Method::Strategic => {
            let body = json!({ "status": { "conditions": [condition] } });
            api.patch_status(&target.name, &params, &Patch::Strategic(body))
                .await?
        }
        Method::Json => {
            let index = target
                .index
                .context("the probe condition does not exist yet")?;
            let patch: json_patch::Patch = serde_json::from_value(json!([
                { "op": "test", "path": "/metadata/resourceVersion", "value": target.resource_version },
                { "op": "replace", "path": format!("/status/conditions/{index}"), "value": condition },
            ]))?;
            api.patch_status(&target.name, &params, &Patch::<()>::Json(patch))
                .await?
        }
    };
    Ok(node)
}

/// What kumaco relies on, checked on a sample of the burst's nodes: the kubelet's
/// conditions untouched, the probe condition as written (`lastTransitionTime` included),
/// and the writer's ownership of it visible in managedFields.
async fn check(api: &Api<Node>, targets: &[Target], method: Method, status: &str) -> Result<()> {
    let key = format!("k:{{\"type\":\"{PROBE}\"}}");
    for target in targets.iter().step_by((targets.len() / 20).max(1)) {
        let node = api.get(&target.name).await?;
        let conditions = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let probe = conditions.iter().find(|c| c.type_ == PROBE);
        let others = conditions.iter().filter(|c| c.type_ != PROBE).count();
        if others != KUBELET_CONDITIONS
            || probe.is_none_or(|c| c.status != status || c.last_transition_time.is_none())
        {
            bail!(
                "{}: node {} after the burst: {} other conditions (expected \
                 {KUBELET_CONDITIONS}), probe {:?}",
                method.name(),
                target.name,
                others,
                probe
            );
        }
        let owned = node
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter(|m| m.manager.as_deref() == Some(MANAGER))
            .filter(|m| m.subresource.as_deref() == Some("status"))
            .any(|m| {
                m.fields_v1.as_ref().is_some_and(|f| {
                    f.0.pointer("/f:status/f:conditions")
                        .and_then(Value::as_object)
                        .is_some_and(|c| c.contains_key(&key))
                })
            });
        if !owned {
            bail!(
                "{}: node {}: {MANAGER} does not own {PROBE} in managedFields",
                method.name(),
                target.name
            );
        }
    }
    Ok(())
}

fn print_summary(results: &[Value], args: &Args) {
    println!(
        "\n| method | in flight | writes/s | p99 latency | API server CPU per write |\n|---|---|---|---|---|"
    );
    for &concurrency in &args.concurrency {
        for method in &args.methods {
            let runs: Vec<&Value> = results
                .iter()
                .filter(|r| r["method"] == method.name() && r["concurrency"] == concurrency)
                .collect();
            let spread = |field: &str, scale: f64, unit: &str| {
                let mut v: Vec<f64> = runs.iter().map(|r| num(&r[field]) * scale).collect();
                v.sort_by(f64::total_cmp);
                match (v.first(), v.get(v.len() / 2), v.last()) {
                    (Some(lo), Some(mid), Some(hi)) => {
                        format!("{lo:.0}-{hi:.0}{unit} ({mid:.0})")
                    }
                    _ => "-".into(),
                }
            };
            println!(
                "| {} | {concurrency} | {} | {} | {} |",
                method.name(),
                spread("writes_per_s", 1.0, ""),
                spread("latency_p99_ms", 1.0, " ms"),
                spread("apiserver_cpu_ms_per_write", 1000.0, " µs"),
            );
        }
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}
