//! A fleet of realistic nodes on a private API server, and kumaco as a measured child
//! process: what the scale harnesses (`kumaco-bench`, `kumaco-soak`) need beyond the
//! test helpers.
//!
//! - [`create_nodes`]: nodes of the size a cloud node has (20 labels, 5 conditions, 40
//!   images, 4 zones), created as a kubelet registers;
//! - [`put_window`]: a window ConfigMap;
//! - [`start_kumaco`]: kumaco as the harnesses run it, and [`LogScan`], the WARN/ERROR
//!   lines of its JSON log;
//! - [`node_status_requests`]: the API server's own count of `nodes/status` writes;
//! - [`slots`] and [`percentile`]: kumaco's ceiling for a fleet's size, and the
//!   harnesses' percentiles.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kumaco_core::in_progress::Ceiling;
use serde_json::{Value, json};

use crate::kumaco::{KumacoProcess, StartOptions, metric};
use crate::{ApiServer, SCOPE_LABEL, Scope};

/// The label that makes a ConfigMap a window (kumaco's default `--window-selector`).
pub const WINDOW_LABEL: &str = "kured.dev/maintenance-window";
/// Node `i` is in zone `ZONES[i % 4]`.
pub const ZONES: [&str; 4] = ["zone-a", "zone-b", "zone-c", "zone-d"];
/// Node `i` is in pool `POOLS[i % 3]`.
pub const POOLS: [&str; 3] = ["general", "memory", "gpu"];
/// Nodes are grouped by this many in label `bench.kumaco.dev/batch` (`b0`, `b1`, ...).
pub const BATCH: usize = 1000;
/// Requests in flight while creating nodes: enough to keep the API server busy on 2
/// cores, few enough not to trip its max-in-flight limits.
const SETUP_CONCURRENCY: usize = 32;

/// The name of node `i` of `scope`.
pub fn node_name(scope: &Scope, i: usize) -> String {
    scope.node_name(&format!("{i:05}"))
}

/// The labels of node `i`: 20 in all, as a cloud node carries (well-known topology and
/// instance labels plus a few of the operator's own). `batch` groups nodes by [`BATCH`];
/// `rack` (`r00`..`r49`, by `i % 50`) gives small groups for windows.
pub fn node_labels(scope: &Scope, name: &str, i: usize) -> BTreeMap<String, String> {
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
        ("bench.kumaco.dev/batch", format!("b{}", i / BATCH)),
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
pub fn node_status(i: usize) -> Value {
    let now = Timestamp::now().to_string();
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({
            "type": type_, "status": status, "reason": reason,
            "message": format!("kubelet reports {reason}"),
            "lastHeartbeatTime": now, "lastTransitionTime": now,
        })
    };
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
        "images": node_images(i, 0),
    })
}

/// The 40 images of node `i`'s status, as its kubelet reports them. `generation` 0 is
/// the list at registration; any other generation changes one image's tag (image
/// `generation % 40`), so that each generation's list differs from the one before, as
/// a node's does when it pulls one image and garbage-collects another.
pub fn node_images(i: usize, generation: u64) -> Vec<Value> {
    (0..40u64)
        .map(|k| {
            let repo = format!("registry.example.com/platform/service-{k:02}");
            let tag = if generation != 0 && generation % 40 == k {
                format!("{repo}:v1.{k}.{}-g{generation}", i % 5)
            } else {
                format!("{repo}:v1.{k}.{}", i % 5)
            };
            json!({
                "names": [
                    format!("{repo}@sha256:{:064x}", (k as u128 + 1) * 0x9e37_79b9_7f4a_7c15),
                    tag,
                ],
                "sizeBytes": 20_000_000 + k * 3_000_000,
            })
        })
        .collect()
}

pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

/// Creates nodes `0..n` of `scope` ([`node_name`], [`node_labels`], [`node_status`]),
/// `SETUP_CONCURRENCY` at a time: each a POST then a status patch (the API server
/// ignores status on create), as a kubelet registers.
pub async fn create_nodes(client: &kube::Client, scope: &Scope, n: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = node_name(scope, i);
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

/// Creates or replaces window ConfigMap `namespace/name` with `data` (server-side apply
/// as `manager`).
pub async fn put_window(
    client: &kube::Client,
    namespace: &str,
    manager: &str,
    name: &str,
    data: &[(&str, &str)],
) -> Result<()> {
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
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(cm),
        )
        .await
        .with_context(|| format!("applying window {namespace}/{name}"))?;
    Ok(())
}

/// Requests to `nodes/status` with verb `verb` that the API server has answered in its
/// current lifetime, from its `/metrics` text: `(all, failed)`, failed being any answer
/// but 200 and 201. Server-side apply (kumaco) counts as `APPLY`, any other patch (node
/// agents) as `PATCH`.
pub fn node_status_requests(apiserver_metrics: &str, verb: &str) -> Result<(u64, u64)> {
    let count = |code: Option<&str>| {
        let mut labels = vec![
            ("verb", verb),
            ("resource", "nodes"),
            ("subresource", "status"),
        ];
        labels.extend(code.map(|c| ("code", c)));
        anyhow::Ok(metric(apiserver_metrics, "apiserver_request_total", &labels)? as u64)
    };
    let all = count(None)?;
    Ok((all, all - count(Some("200"))? - count(Some("201"))?))
}

/// How the harness starts kumaco: every `kumaco run` flag beyond the connection, the
/// listeners, the scope and the window namespace.
pub struct KumacoOptions<'a> {
    /// Namespace of the window ConfigMaps.
    pub namespace: &'a str,
    /// Names the field manager.
    pub name: &'a str,
    pub extra_args: Vec<String>,
}

/// Starts `bin run` against `server`, confined to `scope`'s nodes, without leader
/// election, logging JSON at level info; returns once it listens, so that the time to
/// ready can be measured ([`KumacoProcess::ready_within`]).
pub async fn start_kumaco(
    bin: &Path,
    server: &ApiServer,
    scope: &Scope,
    options: &KumacoOptions<'_>,
) -> Result<KumacoProcess> {
    let mut args = vec![
        format!("--namespace={}", options.namespace),
        format!("--node-selector={}", scope.selector()),
        format!("--field-manager={}", options.name),
    ];
    args.extend(options.extra_args.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = StartOptions {
        // info, not debug: per-node debug lines at thousands of nodes would be what we
        // measure.
        rust_log: Some("info".into()),
        ..StartOptions::default()
    };
    KumacoProcess::spawn_on(bin, server.kubeconfig(), &args, &start).await
}

/// Counts of kumaco's WARN and ERROR log lines, with the first few of them.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LogLevels {
    pub warn: usize,
    pub error: usize,
    /// The first [`LogLevels::KEPT`] WARN or ERROR lines, as written.
    pub first: Vec<String>,
}

impl LogLevels {
    pub const KEPT: usize = 10;

    fn count(&mut self, line: &str) {
        // kumaco's JSON log (`--log-format=json`) flattens the event: `"level":"WARN"`.
        let level = if line.contains(r#""level":"WARN""#) {
            &mut self.warn
        } else if line.contains(r#""level":"ERROR""#) {
            &mut self.error
        } else {
            return;
        };
        *level += 1;
        if self.first.len() < Self::KEPT {
            self.first.push(line.to_string());
        }
    }
}

/// The WARN and ERROR lines of a log so far: each [`LogScan::advance`] reads only what
/// was appended since the last (over a long run the log grows to megabytes).
#[derive(Default)]
pub struct LogScan {
    offset: u64,
    levels: LogLevels,
}

impl LogScan {
    /// The counts, with what `path` has gained since the last call.
    pub fn levels(&mut self, path: &Path) -> Result<&LogLevels> {
        self.advance(path)?;
        Ok(&self.levels)
    }

    fn advance(&mut self, path: &Path) -> Result<()> {
        let mut file = std::fs::File::open(path)?;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut new = Vec::new();
        file.read_to_end(&mut new)?;
        // A line still being written is left for the next call.
        let Some(end) = new.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        for line in String::from_utf8_lossy(&new[..end]).lines() {
            self.levels.count(line);
        }
        self.offset += end as u64 + 1;
        Ok(())
    }
}

/// Where a harness finds the kumaco binary unless told otherwise.
pub const DEFAULT_KUMACO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/release/kumaco");

/// Fails with the command that builds it if the kumaco binary at `path` is missing.
pub fn check_kumaco_binary(path: &Path) -> Result<()> {
    if !path.exists() {
        bail!(
            "{} does not exist: run `cargo build --release --bin kumaco` first, or pass \
             --kumaco PATH",
            path.display()
        );
    }
    Ok(())
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The slots `--max-in-progress SPEC` gives `nodes` nodes (a count, or `P%`), by the
/// brain's own rule ([`Ceiling::slots`]).
pub fn slots(spec: &str, nodes: usize) -> Result<usize> {
    let ceiling = match spec.strip_suffix('%') {
        Some(p) => Ceiling::Percent(
            p.parse()
                .with_context(|| format!("{spec:?}: P% expected"))?,
        ),
        None => Ceiling::Count(
            spec.parse()
                .with_context(|| format!("{spec:?}: a count expected"))?,
        ),
    };
    Ok(ceiling.slots(nodes))
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_warn_and_error_lines_across_partial_reads() {
        let path = std::env::temp_dir().join(format!("fleet-logscan-{}", std::process::id()));
        let info = r#"{"timestamp":"t","level":"INFO","message":"condition changed"}"#;
        let warn = r#"{"timestamp":"t","level":"WARN","message":"writing failed"}"#;
        let error = r#"{"timestamp":"t","level":"ERROR","message":"watch failed"}"#;
        let mut scan = LogScan::default();
        // The second WARN line is cut in the middle: counted once it is complete.
        std::fs::write(&path, format!("{info}\n{warn}\n{}", &warn[..20])).unwrap();
        scan.advance(&path).unwrap();
        assert_eq!((scan.levels.warn, scan.levels.error), (1, 0));
        std::fs::write(&path, format!("{info}\n{warn}\n{warn}\n{error}\n")).unwrap();
        scan.advance(&path).unwrap();
        assert_eq!((scan.levels.warn, scan.levels.error), (2, 1));
        assert_eq!(scan.levels.first, [warn, warn, error]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn node_status_requests_separates_failures() {
        let text = r#"# TYPE apiserver_request_total counter
apiserver_request_total{code="200",resource="nodes",subresource="status",verb="APPLY"} 7
apiserver_request_total{code="201",resource="nodes",subresource="status",verb="APPLY"} 1
apiserver_request_total{code="500",resource="nodes",subresource="status",verb="APPLY"} 2
apiserver_request_total{code="200",resource="nodes",subresource="status",verb="PATCH"} 5
apiserver_request_total{code="200",resource="nodes",subresource="",verb="APPLY"} 9
"#;
        assert_eq!(node_status_requests(text, "APPLY").unwrap(), (10, 2));
        assert_eq!(node_status_requests(text, "PATCH").unwrap(), (5, 0));
    }

    #[test]
    fn slots_follow_the_brains_rule() {
        assert_eq!(slots("3", 1000).unwrap(), 3);
        assert_eq!(slots("10%", 1000).unwrap(), 100);
        assert_eq!(
            slots("5%", 10).unwrap(),
            1,
            "a percentage gives at least one slot"
        );
        assert!(slots("ten", 10).is_err());
        assert!(slots("x%", 10).is_err());
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.5), Some(2.0));
        assert_eq!(percentile(&v, 0.9), Some(4.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
