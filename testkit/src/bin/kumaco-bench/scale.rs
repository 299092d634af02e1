//! The scale run: nodes and windows on a fresh API server, kumaco started, the edge
//! window's latency and writes, the idle period, the API server's own ceiling.

use std::time::{Duration, Instant};

use crate::churn_phase::{ChurnPhase, plain_client_burst, plain_client_burst_under_churn};
use crate::measure::{EdgeSpec, EdgeWatch, kumaco_writes, latency_summary, settle, sleep_until};
use crate::windows::create_windows;
use crate::{
    Args, EDGE_AHEAD_SECS, MANAGER, NAMESPACE, RACKS, READY_TIMEOUT, TRANSITION_TIMEOUT, WINDOWS,
};
use anyhow::Result;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use testkit::fleet::{self, BATCH, KumacoOptions, load_average};
use testkit::receiver::{Answer, Receiver};
use testkit::{ApiServer, Scope};

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
pub(crate) async fn run_one(args: &Args, n: usize, run: u64) -> Result<Value> {
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
    // (h): the sinks, before kumaco starts.
    let receiver = if args.notify {
        Some(Receiver::start(Answer::Status(200)).await?)
    } else {
        None
    };
    let mut extra_args = Vec::new();
    if let Some(r) = &receiver {
        let config = server.dir().join("notify.yaml");
        std::fs::write(
            &config,
            format!(
                "sinks:\n  - name: webhook\n    type: cloudevents\n    url: {}/events\n    maxPerMinute: 6000\n\
                 \x20 - name: chat\n    url: generic://127.0.0.1:{}/chat?template=json&disabletls=yes\n",
                r.url(),
                r.port()
            ),
        )?;
        extra_args.push(format!("--notify-config={}", config.display()));
    }
    let options = KumacoOptions {
        namespace: NAMESPACE,
        name: MANAGER,
        extra_args,
    };
    let mut kumaco = fleet::start_kumaco(&args.kumaco, &server, &scope, &options).await?;
    let ready_secs = kumaco
        .ready_within("/readyz", READY_TIMEOUT)
        .await?
        .as_secs_f64();
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
    let notified = receiver.as_ref().map(|r| {
        let got = r.received();
        let events = got.iter().filter(|x| x.path == "/events").count();
        let chats = got.iter().filter(|x| x.path.starts_with("/chat")).count();
        let last = got.last().map(|x| x.at.duration_since(edge).as_secs_f64());
        println!("   notifications: {events} events, {chats} chat messages, the last {last:?} s after the edge");
        json!({ "events": events, "chat_messages": chats, "last_after_edge_seconds": last })
    });

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
    kumaco.kill();

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
        "notifications": notified,
        "kumaco_log": log,
    }))
}
