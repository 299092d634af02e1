//! The churn phase: foreign changes to the nodes at a set rate, kumaco's CPU and
//! passes over them, and the plain client's as the floor.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::measure::{
    EdgeSpec, EdgeWatch, kumaco_writes, kumaco_writes_in, latency_summary, settle, sleep_until,
    wait_for_writes,
};
use crate::{CHURN_DRAIN, CHURN_EDGE_LEAD, CONCURRENCY, MANAGER, NAMESPACE, TRANSITION_TIMEOUT};
use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use testkit::churn::plain::PlainWatch;
use testkit::churn::{self, ChurnSpec};
use testkit::fleet;
use testkit::kumaco::KumacoProcess;
use testkit::kumaco::{apiserver_metrics, metric};
use testkit::{ApiServer, Scope};

/// What the churn phase works with.
pub(crate) struct ChurnPhase<'a> {
    pub(crate) server: &'a ApiServer,
    pub(crate) client: &'a kube::Client,
    pub(crate) scope: &'a Scope,
    pub(crate) kumaco: &'a KumacoProcess,
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
        let ours = self.kumaco.metrics_text().await?;
        let reconcile = |suffix: &str| {
            metric(
                &ours,
                &format!("kumaco_reconcile_duration_seconds_{suffix}"),
                &[],
            )
        };
        Ok(Snapshot {
            at,
            cpu,
            plain_cpu,
            writes: kumaco_writes_in(&server)?,
            foreign: metric(
                &server,
                "apiserver_request_total",
                &[("verb", "PATCH"), ("resource", "nodes"), ("code", "200")],
            )? as u64,
            passes: reconcile("count")?,
            pass_seconds: reconcile("sum")?,
        })
    }

    /// The edge nodes back to False, then `spec`'s churn with the same edge halfway
    /// through it (see the module docs, (g)).
    pub(crate) async fn run(
        &self,
        n: usize,
        spec: ChurnSpec,
        edge_spec: &EdgeSpec<'_>,
    ) -> Result<Value> {
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

        // The floor, measured over the same window (its first list done before). The
        // child is this very program through /proc/self/exe, not its path: a cargo build
        // beside the bench (CI runs `make smoke` beside `make test`) may replace the file
        // under it, and the old path then names nothing ("(deleted)").
        let plain = PlainWatch::start(Path::new("/proc/self/exe"), self.server.kubeconfig())?;
        sleep_until(churn_start).await;
        let start = self.snapshot(&plain).await?;
        let churn = churn::start(kubelet, labeler, names, spec);
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
pub(crate) async fn plain_client_burst(client: &kube::Client, nodes: &[String]) -> Result<f64> {
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
pub(crate) async fn plain_client_burst_under_churn(
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
    let churn = churn::start(kubelet, labeler, names, spec);
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
