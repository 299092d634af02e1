//! The pods mode: what watching pods costs (the module docs of `main`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::measure::{kumaco_writes, kumaco_writes_in, settle};
use crate::report::num;
use crate::windows::create_windows;
use crate::{
    Args, CHURN_DRAIN, CONCURRENCY, MANAGER, NAMESPACE, RACKS, READY_TIMEOUT, UNDER_MAINTENANCE,
    WINDOWS,
};
use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::{Value, json};
use testkit::agent::REBOOT_REQUIRED;
use testkit::churn::pods::{self as podchurn, PodFleet};
use testkit::churn::{ChurnSpec, Paced, PacedCounts};
use testkit::fleet::{self, BATCH, KumacoOptions, load_average};
use testkit::kumaco::KumacoProcess;
use testkit::kumaco::{apiserver_metrics, metric};
use testkit::nodes::{condition, set_condition};
use testkit::{ApiServer, Scope};

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
fn pod_watch_events_in(apiserver_metrics: &str) -> Result<f64> {
    // Labelled by kind in older API servers, by resource in newer ones.
    let by = |label| metric(apiserver_metrics, "apiserver_watch_events_total", &[label]);
    Ok(by(("kind", "Pod"))?.max(by(("resource", "pods"))?))
}

async fn pod_snapshot(kumaco: &KumacoProcess, client: &kube::Client) -> Result<PodSnapshot> {
    let at = Instant::now();
    let cpu = kumaco.cpu_seconds()?;
    // Before the scrape below, which kumaco receives too.
    let received = socket_bytes_received(kumaco.pid())?;
    let ours = kumaco.metrics_text().await?;
    let server = apiserver_metrics(client).await?;
    let reconcile = |suffix: &str| {
        metric(
            &ours,
            &format!("kumaco_reconcile_duration_seconds_{suffix}"),
            &[],
        )
    };
    let node_events =
        |relevant: &str| metric(&ours, "kumaco_node_events_total", &[("relevant", relevant)]);
    Ok(PodSnapshot {
        at,
        cpu,
        passes: reconcile("count")?,
        pass_seconds: reconcile("sum")?,
        relevant_node_events: node_events("true")?,
        other_node_events: node_events("false")?,
        pod_watch_events: pod_watch_events_in(&server)?,
        received,
        writes: kumaco_writes_in(&server)?,
    })
}

/// Indices of the nodes that may wait to start in the waiting phase: under maintenance
/// (the always-active windows select racks r07-r09 outside batch b0) and available,
/// neither down nor blocked by label nor flipped by the availability phase.
pub(crate) fn waiting_candidates(n: usize) -> impl Iterator<Item = usize> {
    (0..n).filter(|i| {
        (7..=9).contains(&(i % RACKS))
            && i / BATCH != 0
            && ![0, 37].contains(&(i % 100))
            && i % 250 != 0
    })
}

/// The first `count` of [`waiting_candidates`], checked against what kumaco wrote.
pub(crate) async fn waiting_nodes(
    api: &Api<Node>,
    names: &[String],
    count: usize,
) -> Result<Vec<String>> {
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
    kumaco: &KumacoProcess,
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
    let counts = Paced::start(spec, podchurn::IN_FLIGHT, move |k| {
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
    changes: Option<&PacedCounts>,
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
pub(crate) async fn run_pods(args: &Args, n: usize, run: u64) -> Result<Value> {
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
    let mut kumaco = fleet::start_kumaco(&args.kumaco, &server, &scope, &options).await?;
    let ready_secs = kumaco
        .ready_within("/readyz", READY_TIMEOUT)
        .await?
        .as_secs_f64();
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
        let counts = Paced::start(spec(rate), podchurn::IN_FLIGHT, change)
            .finish()
            .await;
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
    let budgets_seen = metric(
        &kumaco.metrics_text().await?,
        "kumaco_gate_pod_disruption_budgets",
        &[],
    )?;
    let log = kumaco.log_path().to_path_buf();
    kumaco.kill();
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

pub(crate) fn print_pods_table(r: &Value) {
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
