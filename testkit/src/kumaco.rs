//! The real `kumaco run` as a child process, and reading Prometheus text metrics (kumaco's
//! and the API server's) for assertions.
//!
//! Integration tests pass the binary as `env!("CARGO_BIN_EXE_kumaco")`: cargo only tells
//! integration tests of the kumaco package where it is, not this crate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::jiff::Timestamp;

use crate::ApiServer;
use crate::http;
use crate::process::{Owned, scratch_path};

/// How long kumaco may take to list nodes and windows and report ready. Startup is well
/// under a second on an idle machine; the margin is for a loaded 2-core CI runner.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `kumaco run`. Dropping it SIGKILLs it; if the test is failing at that point,
/// its log path and tail are printed so the failure can be understood.
pub struct KumacoProcess {
    process: Owned,
    spawned: Instant,
    log: PathBuf,
    metrics_address: SocketAddr,
    health_address: SocketAddr,
}

/// How a test wants kumaco started, beyond its own flags.
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// Kubeconfig other than the server's admin one (a restricted identity).
    pub kubeconfig: Option<PathBuf>,
    /// `Some(pod)`: leader election on, with `POD_NAME=pod` and `POD_NAMESPACE` from
    /// `pod_namespace`; `None`: `--leader-elect=false`.
    pub leader: Option<Pod>,
    /// Return once `/healthz` answers instead of `/readyz`: a follower of a leader
    /// election is alive but never ready.
    pub healthy_is_enough: bool,
    /// More environment (a fake clock's `LD_PRELOAD`, for one).
    pub env: Vec<(String, String)>,
    /// `RUST_LOG` other than `info,kumaco=debug` (a long run at hundreds of nodes).
    pub rust_log: Option<String>,
}

/// Who a leader-electing kumaco is (the Deployment sets these from the downward API).
#[derive(Clone, Debug)]
pub struct Pod {
    pub name: String,
    pub namespace: String,
}

impl KumacoProcess {
    /// Starts `bin run` against `server` with the flags every test needs (admin
    /// kubeconfig, no leader election, free loopback ports for metrics and health, JSON
    /// logs) followed by `args` (at least `--namespace` and `--node-selector`), and waits
    /// until `/readyz` answers 200.
    ///
    /// Fails loudly, with the log tail, if kumaco exits or is not ready in time.
    pub async fn start(bin: impl AsRef<Path>, server: &ApiServer, args: &[&str]) -> Result<Self> {
        Self::start_with(bin, server, args, &StartOptions::default()).await
    }

    /// [`KumacoProcess::start`] with another identity, leader election or readiness.
    pub async fn start_with(
        bin: impl AsRef<Path>,
        server: &ApiServer,
        args: &[&str],
        options: &StartOptions,
    ) -> Result<Self> {
        Self::start_on(bin, server.kubeconfig(), args, options).await
    }

    /// [`KumacoProcess::start_with`] on the API server of admin kubeconfig `kubeconfig`
    /// (`options.kubeconfig`, if any, still goes first): for a harness that holds no
    /// reference to the server, which a test may restart meanwhile.
    pub async fn start_on(
        bin: impl AsRef<Path>,
        kubeconfig: &Path,
        args: &[&str],
        options: &StartOptions,
    ) -> Result<Self> {
        let mut kumaco = Self::spawn_on(bin, kubeconfig, args, options).await?;
        let path = if options.healthy_is_enough {
            "/healthz"
        } else {
            "/readyz"
        };
        kumaco.ready_within(path, READY_TIMEOUT).await?;
        Ok(kumaco)
    }

    /// [`KumacoProcess::start_on`] up to kumaco's listening, not yet ready: for a harness
    /// that measures the time to ready ([`KumacoProcess::ready_within`]).
    pub async fn spawn_on(
        bin: impl AsRef<Path>,
        kubeconfig: &Path,
        args: &[&str],
        options: &StartOptions,
    ) -> Result<Self> {
        let bin = bin.as_ref();
        let log = scratch_path("kumaco", ".log")?;
        let mut command = Command::new(bin);
        command
            .arg("run")
            .arg("--kubeconfig")
            .arg(options.kubeconfig.as_deref().unwrap_or(kubeconfig))
            .arg(format!("--leader-elect={}", options.leader.is_some()))
            .args(LISTEN_ANYWHERE)
            .arg("--log-format=json")
            .args(args)
            .env(
                "RUST_LOG",
                options.rust_log.as_deref().unwrap_or("info,kumaco=debug"),
            )
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        if let Some(pod) = &options.leader {
            command
                .env("POD_NAME", &pod.name)
                .env("POD_NAMESPACE", &pod.namespace);
        }
        let spawned = Instant::now();
        let mut process = Owned::spawn("kumaco", command, Some(&log))?;
        // Dropping `process` on an error kills it.
        let (metrics_address, health_address) = bound_addresses(&mut process).await?;
        Ok(KumacoProcess {
            process,
            spawned,
            log,
            metrics_address,
            health_address,
        })
    }

    /// Polls `path` on the health address every 10 ms until it answers 200, for at most
    /// `timeout` from the start: the time from the start to that answer.
    pub async fn ready_within(&mut self, path: &str, timeout: Duration) -> Result<Duration> {
        let mut last = String::from("no answer yet");
        while self.spawned.elapsed() < timeout {
            if let Some(status) = self.process.exited() {
                bail!(
                    "kumaco exited with {status} before {path} answered; log {}:\n{}",
                    self.log.display(),
                    self.log_tail(40)
                );
            }
            match http::get(self.health_address, path).await {
                Ok((200, _)) => return Ok(self.spawned.elapsed()),
                Ok((code, body)) => last = format!("HTTP {code}: {}", body.trim()),
                Err(e) => last = format!("{e:#}"),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!(
            "kumaco's {path} did not answer 200 within {timeout:?} (last: {last}); log \
             {}:\n{}",
            self.log.display(),
            self.log_tail(40)
        )
    }

    /// The file holding kumaco's stdout and stderr (kept after the test).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of kumaco's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// Where `/metrics` is served.
    pub fn metrics_address(&self) -> SocketAddr {
        self.metrics_address
    }

    /// Where `/healthz` and `/readyz` are served.
    pub fn health_address(&self) -> SocketAddr {
        self.health_address
    }

    /// The Prometheus text of kumaco's `/metrics`.
    pub async fn metrics_text(&self) -> Result<String> {
        match http::get(self.metrics_address, "/metrics").await? {
            (200, body) => Ok(body),
            (code, body) => bail!("kumaco /metrics answered HTTP {code}: {body}"),
        }
    }

    /// How kumaco ended, once it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.process.exited()
    }

    /// Waits for kumaco to exit by itself, for at most `timeout`; `None` if it is still
    /// running then.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.process.exit_within(timeout).await
    }

    /// A `kB` field of the process's /proc/<pid>/status, such as `VmHWM` (peak resident
    /// set size).
    pub fn status_kib(&self, field: &str) -> Result<u64> {
        self.process.status_kib(field)
    }

    /// utime + stime so far, in seconds.
    pub fn cpu_seconds(&self) -> Result<f64> {
        self.process.cpu_seconds()
    }

    /// kumaco's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// SIGTERM, as the kubelet stops a pod, then waits up to `grace` for the exit (as the
    /// pod's grace period would). Returns the exit status, or fails if kumaco is still
    /// running then (it is then SIGKILLed by the drop).
    pub async fn terminate(&mut self, grace: Duration) -> Result<ExitStatus> {
        self.process.signal(rustix::process::Signal::TERM)?;
        match self.wait_exit(grace).await {
            Some(status) => Ok(status),
            None => bail!(
                "kumaco did not exit within {grace:?} of SIGTERM; log {}:\n{}",
                self.log.display(),
                self.log_tail(30)
            ),
        }
    }

    /// SIGKILL, as in a crash or an OOM kill: no chance to clean up.
    pub fn kill(&mut self) {
        self.process.kill();
    }
}

impl Drop for KumacoProcess {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "kumaco log {} ends with:\n{}",
                self.log.display(),
                self.log_tail(30)
            );
        }
    }
}

/// Leader-election timings short enough for a failover to fit in a test (kumaco's
/// defaults are 15 s, 10 s and 2 s): [`SHORT_LEASE_DURATION`],
/// [`SHORT_LEASE_RETRY_PERIOD`] and a 3 s renew deadline.
pub const SHORT_LEASE: [&str; 3] = [
    "--lease-duration=4s",
    "--lease-renew-deadline=3s",
    "--lease-retry-period=500ms",
];
/// The lease duration of [`SHORT_LEASE`]: how long a follower waits out a dead leader.
pub const SHORT_LEASE_DURATION: Duration = Duration::from_secs(4);
/// The retry period of [`SHORT_LEASE`]: how often a follower tries for the Lease.
pub const SHORT_LEASE_RETRY_PERIOD: Duration = Duration::from_millis(500);

/// A `kumaco run` with leader election on, as one pod of a Deployment (`POD_NAME` =
/// `pod`). Dropping it SIGKILLs it.
pub struct Replica {
    pub pod: String,
    pub process: KumacoProcess,
}

/// What a replica's JSON log says about leadership and writes, in log order.
#[derive(Debug, Default)]
pub struct LogSummary {
    pub became_leader: Vec<Timestamp>,
    pub released: Vec<Timestamp>,
    pub lost_leadership: Vec<Timestamp>,
    /// Each `"condition changed"` (one per condition written).
    pub writes: Vec<Timestamp>,
}

impl Replica {
    /// `kumaco_leader` now; None if there is no such gauge or no answer.
    pub async fn leader_gauge(&self) -> Option<f64> {
        let text = self.process.metrics_text().await.ok()?;
        metric(&text, "kumaco_leader", &[]).ok()
    }

    /// SIGTERM, as in a rolling update (a leader releases the Lease), with 10 s to exit.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        self.process
            .terminate(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("{}: {e:#}", self.pod))
    }

    /// SIGKILL: no chance to release the Lease.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Whether a line of the replica's log has this message.
    pub fn log_has(&self, message: &str) -> bool {
        let text = std::fs::read_to_string(self.process.log_path()).unwrap();
        text.lines().any(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .is_ok_and(|entry| entry["message"].as_str() == Some(message))
        })
    }

    /// Leadership and writes, from the replica's log.
    pub fn log_summary(&self) -> LogSummary {
        let text = std::fs::read_to_string(self.process.log_path()).unwrap();
        let mut summary = LogSummary::default();
        // Lines that are not JSON (a panic message) carry no timestamp: skipped.
        for line in text.lines() {
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let at = entry["timestamp"].as_str().and_then(|t| t.parse().ok());
            let (Some(at), Some(message)) = (at, entry["message"].as_str()) else {
                continue;
            };
            match message {
                "became leader" => summary.became_leader.push(at),
                "lost leadership" => summary.lost_leadership.push(at),
                "released the lease" => summary.released.push(at),
                "condition changed" => summary.writes.push(at),
                _ => {}
            }
        }
        summary
    }
}

/// Waits until exactly one of `a` and `b` reports `kumaco_leader 1` and the other 0, for
/// at most `timeout`; returns whether it is `a`. Both at 1 fails at once.
pub async fn one_leader(a: &Replica, b: &Replica, timeout: Duration) -> bool {
    let what = format!("a single leader of {} and {}", a.pod, b.pod);
    crate::time::poll_showing(&what, timeout, || async {
        match (a.leader_gauge().await, b.leader_gauge().await) {
            (Some(1.0), Some(0.0)) => Ok(true),
            (Some(0.0), Some(1.0)) => Ok(false),
            (Some(1.0), Some(1.0)) => panic!("both replicas report kumaco_leader 1"),
            gauges => Err(format!(
                "kumaco_leader {gauges:?} (None: no such gauge); logs {} and {}",
                a.process.log_path().display(),
                b.process.log_path().display()
            )),
        }
    })
    .await
}

/// The loopback listen flags for a harness-started kumaco: port 0 for both, so kumaco
/// picks free ports itself (no port probed here and released can be taken in between);
/// [`bound_addresses`] then reads which it got.
pub const LISTEN_ANYWHERE: [&str; 2] = [
    "--metrics-address=127.0.0.1:0",
    "--health-address=127.0.0.1:0",
];

/// The metrics and health addresses a kumaco started with [`LISTEN_ANYWHERE`] and
/// `--log-format=json` bound, from the `kumaco starting` line of its log. Polls the log
/// until that line appears, kumaco exits, or [`READY_TIMEOUT`] passes.
pub async fn bound_addresses(kumaco: &mut Owned) -> Result<(SocketAddr, SocketAddr)> {
    let log = kumaco
        .log()
        .context("kumaco was started without a log")?
        .to_path_buf();
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for line in text.lines() {
            let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if entry["message"] != "kumaco starting" {
                continue;
            }
            let address = |field: &str| -> Result<SocketAddr> {
                entry[field]
                    .as_str()
                    .and_then(|a| a.parse().ok())
                    .with_context(|| format!("no {field} address in kumaco's log line {line}"))
            };
            return Ok((address("metrics")?, address("health")?));
        }
        if let Some(status) = kumaco.exited() {
            bail!(
                "kumaco exited with {status} before it listened; log {}:\n{text}",
                log.display()
            );
        }
        if started.elapsed() > READY_TIMEOUT {
            bail!(
                "kumaco did not log its listen addresses within {READY_TIMEOUT:?}; log {}",
                log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The API server's own `/metrics` (Prometheus text), read with an admin client.
pub async fn apiserver_metrics(client: &kube::Client) -> Result<String> {
    // kube_core's request builder makes the `http::Request` for GET `/metrics` (an empty
    // url path plus the "name" `metrics`), so this crate needs no `http` dependency.
    let request = kube::core::Request::new("")
        .get("metrics", &Default::default())
        .context("building GET /metrics")?;
    client
        .request_text(request)
        .await
        .context("GET /metrics from the API server")
}

/// The value of metric `name` in Prometheus text: the sum of its samples whose labels
/// include every `(key, value)` of `labels` (other labels are ignored).
///
/// Absent is not zero. With no such sample this is an error naming the series, except for
/// a counter, histogram or summary the text declares (`# TYPE`): those start at zero, and
/// a label set nothing has counted yet has no series, so 0 is what they say. A gauge
/// without the series, or a name the text does not know, is an error. (kumaco's exporter
/// declares a labelled counter only once it has counted: to check that it counted
/// nothing, see [`series`].)
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
    if let Some(value) = series(text, name, labels) {
        return Ok(value);
    }
    let series = if labels.is_empty() {
        name.to_string()
    } else {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        format!("{name}{{{}}}", labels.join(","))
    };
    match declared_type(text, name) {
        Some("counter" | "histogram" | "summary") => Ok(0.0),
        Some(kind) => bail!("no series {series} in the metrics (a {kind}: absent, not 0)"),
        None if samples(text).any(|s| s.name == name) => {
            bail!("no series {series} in the metrics (only other labels of {name})")
        }
        None => bail!("no metric {name} in the metrics"),
    }
}

/// The sum of the samples of `name` whose labels include every `(key, value)` of
/// `labels`; `None` when there is no such sample. kumaco's exporter (prometheus-client)
/// shows a labelled counter only once it has counted, so a check that kumaco counted
/// nothing expects `None`, and should read the same name where it did count (a
/// misspelled name has no series either).
pub fn series(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut matching = samples(text)
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(v)))
        .map(|s| s.value)
        .peekable();
    matching.peek().is_some().then(|| matching.sum())
}

/// The type a `# TYPE` line declares for the family that sample name `name` belongs to:
/// `name` itself, a counter `x` whose samples are `x_total` (OpenMetrics), or a
/// histogram's or summary's `x_count`, `x_sum` and `x_bucket`.
fn declared_type<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.split_once(' '))
        .find_map(|(family, kind)| {
            let kind = kind.trim();
            let part = |suffix: &str| name.strip_suffix(suffix) == Some(family);
            let ours = family == name
                || (kind == "counter" && part("_total"))
                || (matches!(kind, "histogram" | "summary")
                    && ["_count", "_sum", "_bucket"].into_iter().any(part));
            ours.then_some(kind)
        })
}

/// Whether `text` declares or carries samples of metric family `family` (for a histogram
/// or summary, its `_bucket`, `_sum` and `_count` series count too).
pub fn has_metric_family(text: &str, family: &str) -> bool {
    // OpenMetrics-style exporters declare a counter `x` and name its samples `x_total`.
    let declared_as = [Some(family), family.strip_suffix("_total")];
    let declared = text.lines().any(|line| {
        let declared = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_whitespace().next());
        declared.is_some() && declared_as.contains(&declared)
    });
    declared
        || samples(text).any(|s| {
            s.name == family
                || ["_bucket", "_sum", "_count", "_total"]
                    .iter()
                    .any(|suffix| s.name.strip_suffix(suffix) == Some(family))
        })
}

/// One sample line of Prometheus text format.
#[derive(Debug)]
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: f64,
}

impl Sample<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The sample lines of a Prometheus text exposition (comments and malformed lines are
/// skipped; a test asserting on a missing sample fails on its own).
fn samples(text: &str) -> impl Iterator<Item = Sample<'_>> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(parse_sample)
}

fn parse_sample(line: &str) -> Option<Sample<'_>> {
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let close = line.rfind('}')?;
            let labels = parse_labels(&line[open + 1..close])?;
            (&line[..open], labels, &line[close + 1..])
        }
        None => {
            let (name, rest) = line.split_once(' ')?;
            (name, Vec::new(), rest)
        }
    };
    // An optional timestamp may follow the value.
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some(Sample {
        name: name.trim(),
        labels,
        value,
    })
}

/// `a="x",b="y\"z"` → pairs, with the text format's escapes (`\\`, `\"`, `\n`) undone.
fn parse_labels(inner: &str) -> Option<Vec<(&str, String)>> {
    let mut labels = Vec::new();
    let mut rest = inner.trim_start_matches([',', ' ']);
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key.trim(), value));
        rest = after[end + 1..].trim_start_matches([',', ' ']);
    }
    Some(labels)
}

/// Writes to nodes counted by the API server in its current lifetime (its counters start
/// at zero on every restart). kumaco's server-side applies count as verb `APPLY`, not
/// `PATCH`; other write verbs are included so that no write slips through.
pub async fn node_writes(client: &kube::Client) -> f64 {
    let text = apiserver_metrics(client)
        .await
        .expect("reading the API server's metrics");
    ["APPLY", "PATCH", "PUT", "POST", "DELETE"]
        .iter()
        .map(|verb| {
            metric(
                &text,
                "apiserver_request_total",
                &[("resource", "nodes"), ("verb", verb)],
            )
            .unwrap_or_else(|e| panic!("{e:#}"))
        })
        .sum()
}

/// [`node_writes`] once it has stopped moving for a second: a write's counter is bumped
/// as the request completes, a little after a watch may have shown its effect.
pub async fn settled_node_writes(client: &kube::Client) -> f64 {
    let mut last = node_writes(client).await;
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let now = node_writes(client).await;
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("writes to nodes did not settle: kumaco keeps writing ({last} so far)");
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",resource="nodes",subresource="status",verb="APPLY"} 3
apiserver_request_total{code="409",component="apiserver",resource="nodes",subresource="status",verb="APPLY"} 1
apiserver_request_total{code="201",component="apiserver",resource="nodes",subresource="",verb="POST"} 2
weird_label{a="x\"y,z}"} 7 1700000000000
# TYPE kumaco_reconcile_duration_seconds histogram
kumaco_reconcile_duration_seconds_bucket{le="0.1"} 4
kumaco_reconcile_duration_seconds_count 4
kumaco_windows 2
# TYPE kumaco_gate_holding gauge
kumaco_gate_holding{gate="alerts"} 0
# TYPE kumaco_api_writes counter
"#;

    #[test]
    fn sums_matching_samples_only() {
        let value = |name, labels| metric(TEXT, name, labels).unwrap();
        let apply = [("resource", "nodes"), ("verb", "APPLY")];
        assert_eq!(value("apiserver_request_total", &apply), 4.0);
        let status = [("resource", "nodes"), ("subresource", "status")];
        assert_eq!(value("apiserver_request_total", &status), 4.0);
        assert_eq!(value("apiserver_request_total", &[]), 6.0);
        assert_eq!(value("weird_label", &[("a", "x\"y,z}")]), 7.0);
        assert_eq!(value("kumaco_windows", &[]), 2.0);
        assert_eq!(value("kumaco_gate_holding", &[("gate", "alerts")]), 0.0);
    }

    #[test]
    fn absent_is_zero_only_for_a_declared_counter_histogram_or_summary() {
        let value = |name, labels| metric(TEXT, name, labels);
        // Nothing counted yet for these labels: the counter says 0.
        let delete = [("resource", "nodes"), ("verb", "DELETE")];
        assert_eq!(value("apiserver_request_total", &delete).unwrap(), 0.0);
        let slow = [("le", "10")];
        assert_eq!(
            value("kumaco_reconcile_duration_seconds_bucket", &slow).unwrap(),
            0.0
        );
        // OpenMetrics names a counter `x` and its samples `x_total`.
        assert_eq!(value("kumaco_api_writes_total", &[]).unwrap(), 0.0);
        // A gauge without the series, a name nothing declares: errors naming them.
        let absent = value("kumaco_gate_holding", &[("gate", "budgets")]).unwrap_err();
        assert!(
            format!("{absent}").contains(r#"kumaco_gate_holding{gate="budgets"}"#),
            "{absent}"
        );
        let other = value("kumaco_windows", &[("validity", "invalid")]).unwrap_err();
        assert!(format!("{other}").contains("only other labels"), "{other}");
        let unknown = value("kumaco_nodes_in_scope", &[]).unwrap_err();
        assert!(format!("{unknown}").contains("no metric kumaco_nodes_in_scope"));
    }

    #[test]
    fn the_short_lease_flags_say_what_its_constants_say() {
        let duration = format!("--lease-duration={}s", SHORT_LEASE_DURATION.as_secs());
        let retry = format!(
            "--lease-retry-period={}ms",
            SHORT_LEASE_RETRY_PERIOD.as_millis()
        );
        assert_eq!([SHORT_LEASE[0], SHORT_LEASE[2]], [duration, retry]);
    }

    #[test]
    fn finds_families() {
        assert!(has_metric_family(TEXT, "kumaco_reconcile_duration_seconds"));
        assert!(has_metric_family(TEXT, "kumaco_windows"));
        assert!(has_metric_family(TEXT, "apiserver_request_total"));
        assert!(!has_metric_family(TEXT, "kumaco_transitions_total"));
        let declared_only = "# TYPE kumaco_api_writes counter\n";
        assert!(has_metric_family(declared_only, "kumaco_api_writes_total"));
    }
}
