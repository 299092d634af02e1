//! A sample every period: kumaco's figures, the API server's count of its writes, the
//! nodes as an independent watch sees them.

use std::time::{Duration, Instant};

use anyhow::Result;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use testkit::agent::{Observer, RebootAgent};
use testkit::fleet::{LogLevels, LogScan, load_average, node_status_requests};
use testkit::kumaco::KumacoProcess;
use testkit::kumaco::{apiserver_metrics, metric};
use testkit::reporter::RebootSource;

/// The API server's counts before kumaco started.
pub(crate) struct Baseline {
    pub(crate) applies: u64,
    pub(crate) patches: u64,
}

/// Everything a sample reads.
pub(crate) struct Probe<'a> {
    pub(crate) client: &'a kube::Client,
    pub(crate) observer: &'a Observer,
    pub(crate) agent: &'a RebootAgent,
    pub(crate) source: &'a RebootSource,
    pub(crate) baseline: Baseline,
    pub(crate) started: Instant,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Sample {
    /// Seconds since kumaco was ready.
    pub(crate) t: f64,
    pub(crate) at: String,
    pub(crate) rss_mib: f64,
    /// Peak RSS so far (VmHWM).
    pub(crate) hwm_mib: f64,
    pub(crate) cpu_seconds: f64,
    /// Server-side applies to `nodes/status` (only kumaco applies) as the API server
    /// counts them, retries included, and how many of them it failed.
    pub(crate) applies: u64,
    pub(crate) applies_failed: u64,
    /// Other patches to `nodes/status`: the stand-in reporter's and agent's.
    pub(crate) helper_patches: u64,
    /// kumaco's own count of its condition writes (`kumaco_api_writes_total{verb="patch"}`).
    pub(crate) kumaco_writes: u64,
    /// `kumaco_api_writes_total{result="error"}`, condition writes and events.
    pub(crate) write_errors: u64,
    /// `kumaco_transitions_total`: condition status changes written.
    pub(crate) transitions: u64,
    /// kumaco's gauges.
    pub(crate) under_maintenance: u64,
    pub(crate) in_progress: u64,
    /// What an independent watch saw: nodes in progress now, and the most at once so far.
    pub(crate) observed_in_progress: usize,
    pub(crate) observed_max_in_progress: usize,
    pub(crate) reboots: usize,
    /// Nodes marked RebootRequired=True and not rebooted yet.
    pub(crate) waiting: usize,
    pub(crate) warn_lines: usize,
    pub(crate) error_lines: usize,
    pub(crate) load1: f64,
}

impl Sample {
    const HEADER: &str = "  time  RSS MiB  peak MiB  CPU s  applies  transitions  write err  \
                          under  in prog  max seen  reboots  waiting  warn/error  load";

    pub(crate) fn line(&self) -> String {
        format!(
            "{:>6}  {:>7.1}  {:>8.1}  {:>5.1}  {:>7}  {:>11}  {:>9}  {:>5}  {:>7}  {:>8}  {:>7}  \
             {:>7}  {:>10}  {:>4.2}",
            clock(self.t),
            self.rss_mib,
            self.hwm_mib,
            self.cpu_seconds,
            self.applies,
            self.transitions,
            self.write_errors,
            self.under_maintenance,
            self.in_progress,
            self.observed_max_in_progress,
            self.reboots,
            self.waiting,
            format!("{}/{}", self.warn_lines, self.error_lines),
            self.load1,
        )
    }
}

impl Probe<'_> {
    pub(crate) fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// A sample, and the kumaco metrics text and log levels it was taken from.
    pub(crate) async fn sample(
        &self,
        kumaco: &KumacoProcess,
        log_scan: &mut LogScan,
    ) -> Result<(Sample, String, LogLevels)> {
        let t = self.elapsed();
        let mib = |kib: u64| kib as f64 / 1024.0;
        let rss_mib = mib(kumaco.status_kib("VmRSS")?);
        let hwm_mib = mib(kumaco.status_kib("VmHWM")?);
        let cpu_seconds = kumaco.cpu_seconds()?;
        let logs = log_scan.levels(kumaco.log_path())?.clone();
        let metrics = kumaco.metrics_text().await?;
        let server = apiserver_metrics(self.client).await?;
        let (applies, applies_failed) = node_status_requests(&server, "APPLY")?;
        let observed = self.observer.observed();
        let ours = |name: &str, labels: &[(&str, &str)]| {
            anyhow::Ok(metric(&metrics, name, labels)? as u64)
        };
        let sample = Sample {
            t,
            at: Timestamp::now().to_string(),
            rss_mib,
            hwm_mib,
            cpu_seconds,
            applies: applies - self.baseline.applies,
            applies_failed,
            helper_patches: node_status_requests(&server, "PATCH")?.0 - self.baseline.patches,
            kumaco_writes: ours("kumaco_api_writes_total", &[("verb", "patch")])?,
            write_errors: ours("kumaco_api_writes_total", &[("result", "error")])?,
            transitions: ours("kumaco_transitions_total", &[])?,
            under_maintenance: ours("kumaco_nodes_under_maintenance", &[])?,
            in_progress: ours("kumaco_nodes_in_progress", &[])?,
            observed_in_progress: observed.in_progress.len(),
            observed_max_in_progress: observed.max_in_progress,
            reboots: self.agent.reboots(),
            waiting: self.source.waiting(),
            warn_lines: logs.warn,
            error_lines: logs.error,
            load1: load_average()
                .split_whitespace()
                .next()
                .and_then(|l| l.parse().ok())
                .unwrap_or(f64::NAN),
        };
        Ok((sample, metrics, logs))
    }
}

/// What the sampling ended with.
pub(crate) struct Sampled {
    pub(crate) samples: Vec<Sample>,
    /// kumaco's metrics text and log levels at the last sample.
    pub(crate) kumaco_metrics: String,
    pub(crate) logs: LogLevels,
    /// Samples that could not be taken (a source did not answer).
    pub(crate) failures: usize,
    pub(crate) interrupted: bool,
    /// How kumaco ended, if it died.
    pub(crate) died: Option<String>,
}

/// Samples every `period` until `length` has passed (the last sample at the end exactly),
/// Ctrl-C, or kumaco's death.
pub(crate) async fn sample_until(
    probe: &Probe<'_>,
    kumaco: &mut KumacoProcess,
    log_scan: &mut LogScan,
    period: Duration,
    length: Duration,
) -> Sampled {
    let mut out = Sampled {
        samples: Vec::new(),
        kumaco_metrics: String::new(),
        logs: LogLevels::default(),
        failures: 0,
        interrupted: false,
        died: None,
    };
    println!("{}", Sample::HEADER);
    let start = tokio::time::Instant::now();
    let deadline = start + length;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut next = start;
    loop {
        tokio::select! {
            biased;
            _ = &mut ctrl_c => { out.interrupted = true; break; }
            _ = tokio::time::sleep_until(next) => {}
        }
        if let Some(status) = kumaco.exited() {
            println!("kumaco exited with {status}");
            out.died = Some(status.to_string());
            break;
        }
        // The sample itself is cut short by Ctrl-C too: the API server stops with it.
        tokio::select! {
            biased;
            _ = &mut ctrl_c => { out.interrupted = true; break; }
            sampled = probe.sample(kumaco, log_scan) => match sampled {
                Ok((sample, metrics, logs)) => {
                    println!("{}", sample.line());
                    out.samples.push(sample);
                    out.kumaco_metrics = metrics;
                    out.logs = logs;
                }
                Err(e) => {
                    out.failures += 1;
                    println!("{:>6}  sample failed: {e:#}", clock(probe.elapsed()));
                }
            },
        }
        if next >= deadline {
            break;
        }
        next = (next + period).min(deadline);
    }
    if out.interrupted {
        println!("interrupted: summary of the samples so far");
    }
    out
}

/// `mm:ss` of a number of seconds.
pub(crate) fn clock(secs: f64) -> String {
    let secs = secs.round() as u64;
    format!("{:02}:{:02}", secs / 60, secs % 60)
}
