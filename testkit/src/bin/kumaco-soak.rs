//! `kumaco-soak`: kumaco for half an hour under a steady churn of windows and reboots,
//! against a private, real kube-apiserver + etcd on loopback. Not a
//! test and not in CI: it runs only when asked.
//!
//! ```sh
//! cargo build --release --bin kumaco        # the binary under test
//! cargo run --release -p testkit --bin kumaco-soak
//! #   --nodes N              nodes (default 1000)
//! #   --minutes M            length of the run from kumaco's readiness (default 30)
//! #   --max-in-progress C    kumaco's ceiling, N or P% (default 5%)
//! #   --sample-secs S        sampling period (default 10)
//! #   --kumaco PATH          kumaco binary (default target/release/kumaco)
//! #   --json FILE            samples and summary (default target/kumaco-soak.json)
//! #   --churn-rate R         foreign changes per second throughout (default 0: none)
//! ```
//!
//! The cluster: N nodes of realistic size (20 labels, 5 conditions, 40 images, 4 zones);
//! one window per zone, `K-59/4 * * * *` for 3 minutes (zone K is in maintenance 3
//! minutes of every 4, so every minute one zone's window opens and another's closes),
//! and a 30-second window every minute on one rack (N/50 nodes). kumaco runs as kured's
//! brain: `--in-progress --require-condition kured.dev/RebootRequired`. A stand-in for
//! kured's reboot-required reporter marks random nodes `RebootRequired=True` (each node
//! about every 10 minutes), and a stand-in reboot agent "reboots" each node kumaco puts
//! in progress (5-20 s, then `RebootRequired=False`).
//!
//! Every sample prints one line: kumaco's RSS (now and peak) and CPU seconds, its
//! `nodes/status` applies as the API server counts them, its transitions and write
//! errors, how many nodes it holds under maintenance and in progress, the most in
//! progress at once as an independent watch saw it, reboots done and nodes waiting for
//! one, and the WARN/ERROR lines of its log. The summary: writes in all and per minute
//! against transitions, RSS at the start of the steady state (after the first minute),
//! peak, end and its slope over the second half (a leak shows as a steady climb), CPU,
//! errors, reboots and how long nodes waited for them, and the ceiling check.
//!
//! Writes and transitions are not equal with `--in-progress`: one apply may carry two
//! transitions (`UnderMaintenance=True` with the first `MaintenanceInProgress`), or none
//! (a why-not reason changing, e.g. to `WaitingForSlot`). What must be equal is the API
//! server's count of kumaco's applies and kumaco's own count of its writes; excess
//! writes would show as a steady-state write rate above what the windows and reboots
//! explain (per minute: a zone's nodes on, another's off, and a start and an end per
//! reboot).
//!
//! With `--churn-rate R`, a stand-in kubelet and another client change the nodes R
//! times a second in all for the whole run ([`testkit::churn`]: heartbeats and image
//! lists, an annotation and a label no selector reads); the summary counts the changes
//! the API server accepted. The kubelet's changes are `nodes/status` patches, counted
//! with the helpers' patches; kumaco's applies must stay what the windows and reboots
//! explain.
//!
//! Exits non-zero if more nodes were in progress at once than the ceiling, or if kumaco
//! died. Ctrl-C ends the run early with the summary of the samples taken so far (the
//! terminal's SIGINT also stops kumaco and the API server, so no sample follows it).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::{Value, json};
use testkit::agent::{MAINTENANCE_IN_PROGRESS, Observer, REBOOT_REQUIRED, RebootAgent};
use testkit::churn::{Churn, ChurnCounts, ChurnSpec};
use testkit::fleet::{
    self, Kumaco, KumacoOptions, LogLevels, ZONES, create_namespace, create_nodes, load_average,
    node_name, node_status_requests, put_window,
};
use testkit::kumaco::{apiserver_metrics, metric_sum};
use testkit::reporter::{RebootSource, ReporterSpec, SourceState};
use testkit::{ApiServer, Scope};

const NAMESPACE: &str = "soak";
/// kumaco's field manager and log directory, and the windows' field manager.
const NAME: &str = "kumaco-soak";
const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
/// Each node needs a reboot about every 10 minutes, marked in small batches every 5 s.
const REPORTER_SPEC: ReporterSpec = ReporterSpec {
    reboot_every: Duration::from_secs(600),
    mark_every: Duration::from_secs(5),
    cooldown: Duration::from_secs(60),
};
/// A drain and reboot, as the stand-in agent takes it.
const REBOOT_PAUSE: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(20));
/// The first minute holds the startup (every open window written at once) and the
/// reboot backlog filling up; figures "in steady state" start after it.
const STEADY_AFTER: Duration = Duration::from_secs(60);
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A long run of kumaco with windows every minute and a reboot agent (see the module
/// docs).
#[derive(clap::Parser)]
struct Args {
    /// Nodes in the cluster (at least 50: the rack window needs a rack).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..))]
    nodes: u64,
    /// Length of the run.
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// kumaco's --max-in-progress.
    #[arg(long, default_value = "5%")]
    max_in_progress: String,
    /// Seconds between samples.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    sample_secs: u64,
    /// The kumaco binary.
    #[arg(long, default_value = fleet::DEFAULT_KUMACO)]
    kumaco: PathBuf,
    /// Where the samples and the summary go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-soak.json"))]
    json: PathBuf,
    /// Foreign changes per second to the nodes throughout the run, a stand-in kubelet
    /// and another client together (0: none).
    #[arg(long, default_value_t = 0.0)]
    churn_rate: f64,
}

#[tokio::main]
async fn main() -> Result<ExitCode> {
    let args = <Args as clap::Parser>::parse();
    fleet::check_kumaco_binary(&args.kumaco)?;
    if !args.minutes.is_finite() || args.minutes <= 0.0 {
        bail!("--minutes: a positive number");
    }
    if !args.churn_rate.is_finite() || args.churn_rate < 0.0 {
        bail!("--churn-rate: a number of changes per second, 0 for none");
    }
    let outcome = run(&args).await?;
    print_summary(&outcome.summary);
    if let Some(dir) = args.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let out = json!({ "samples": outcome.samples, "summary": outcome.summary });
    std::fs::write(&args.json, serde_json::to_string_pretty(&out)?)?;
    println!("samples and summary written to {}", args.json.display());
    if outcome.failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for failure in &outcome.failures {
        eprintln!("kumaco-soak: FAILED: {failure}");
    }
    Ok(ExitCode::FAILURE)
}

struct Outcome {
    samples: Vec<Sample>,
    summary: Value,
    failures: Vec<String>,
}

/// The whole run; kumaco, the helpers and the API server stop when it returns.
async fn run(args: &Args) -> Result<Outcome> {
    let n = args.nodes as usize;
    let ceiling = fleet::slots(&args.max_in_progress, n)?;
    let load_start = load_average();
    println!(
        "kumaco-soak: {n} nodes, {} min, ceiling {} ({ceiling} nodes), load average {load_start}",
        args.minutes, args.max_in_progress
    );
    // start_fresh blocks for a few seconds; nothing else runs on this runtime yet.
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let scope = Scope::new("soak");
    let setup = Instant::now();
    create_namespace(&client, NAMESPACE).await?;
    create_nodes(&client, &scope, n).await?;
    create_windows(&client).await?;
    println!(
        "setup: {n} nodes and {} windows in {:.1}s",
        ZONES.len() + 1,
        setup.elapsed().as_secs_f64()
    );

    let selector = scope.selector();
    let observer = Observer::start(&client, &selector).await?;
    let agent = Arc::new(RebootAgent::start(&client, &selector, REBOOT_PAUSE).await?);
    // Taken before the spawn: kumaco writes as soon as its lists are in. The PATCHes so
    // far are the nodes' creation.
    let baseline = apiserver_metrics(&client).await?;
    let baseline = Baseline {
        applies: node_status_requests(&baseline, "APPLY").0,
        patches: node_status_requests(&baseline, "PATCH").0,
    };
    let mut kumaco = Kumaco::spawn(
        &args.kumaco,
        &server,
        &scope,
        &KumacoOptions {
            namespace: NAMESPACE,
            name: NAME,
            extra_args: vec![
                "--in-progress".into(),
                format!("--require-condition={REBOOT_REQUIRED}"),
                format!("--max-in-progress={}", args.max_in_progress),
            ],
        },
    )
    .await?;
    let ready_secs = kumaco.wait_ready(READY_TIMEOUT).await?;
    println!(
        "kumaco ready in {ready_secs:.2}s; log {}",
        kumaco.log_path().display()
    );
    let names: Vec<String> = (0..n).map(|i| node_name(&scope, i)).collect();
    let length = Duration::from_secs_f64(args.minutes * 60.0);
    let churn = if args.churn_rate > 0.0 {
        // Clients of their own, as other processes would have.
        let (kubelet, labeler) = (server.client().await?, server.client().await?);
        let spec = ChurnSpec {
            rate: args.churn_rate,
            duration: length,
        };
        Some(Churn::start(kubelet, labeler, names.clone(), spec))
    } else {
        None
    };
    let mut source = RebootSource::start(client.clone(), names, agent.clone(), REPORTER_SPEC);

    let probe = Probe {
        client: &client,
        observer: &observer,
        agent: &agent,
        source: &source,
        baseline,
        started: Instant::now(),
    };
    let period = Duration::from_secs(args.sample_secs);
    let sampled = sample_until(&probe, &mut kumaco, period, length).await;
    // No mark may land after the figures are taken.
    source.stop(&agent).await;
    // The churn's counts so far (it ends by itself about now; dropping it stops it).
    let churn = churn.map(|churn| churn.progress());

    let observed = observer.observed();
    let source_state = source.state();
    let mut failures = Vec::new();
    if observed.max_in_progress > ceiling {
        failures.push(format!(
            "{} nodes were MaintenanceInProgress=True at once, above the ceiling of {ceiling}",
            observed.max_in_progress
        ));
    }
    if let Some(status) = &sampled.died {
        failures.push(format!(
            "kumaco died ({status}); log {}",
            kumaco.log_path().display()
        ));
    }
    if sampled.samples.is_empty() {
        bail!("no sample was taken");
    }
    let summary = summarize(&SummaryInput {
        args,
        ceiling,
        sampled: &sampled,
        // After Ctrl-C kumaco logs the API server's going away: not part of the run.
        logs: if sampled.interrupted {
            sampled.logs.clone()
        } else {
            kumaco.log_levels().cloned().unwrap_or(sampled.logs.clone())
        },
        log_path: kumaco.log_path(),
        observed_max: observed.max_in_progress,
        observer_relists: observed.relists,
        source: &source_state,
        churn: churn.as_ref(),
        ready_secs,
        load_start,
    });
    drop(source_state);
    Ok(Outcome {
        samples: sampled.samples,
        summary,
        failures,
    })
}

/// One window per zone, zone K opening at minutes ≡ K (mod 4) for 3 minutes: 3 zones are
/// in maintenance at any time, and at every minute one window opens as another closes.
/// On top, a 30-second window every minute on one rack, which spans the zones.
async fn create_windows(client: &kube::Client) -> Result<()> {
    for (k, zone) in ZONES.iter().enumerate() {
        put_window(
            client,
            NAMESPACE,
            NAME,
            &format!("soak-{zone}"),
            &[
                ("startTime", &format!("{k}-59/4 * * * *")),
                ("duration", "3m"),
                (
                    "nodeSelector",
                    &format!("topology.kubernetes.io/zone={zone}"),
                ),
                ("description", &format!("{zone} rolling reboots")),
            ],
        )
        .await?;
    }
    put_window(
        client,
        NAMESPACE,
        NAME,
        "soak-rack-r07",
        &[
            ("startTime", "* * * * *"),
            ("duration", "30s"),
            ("nodeSelector", "bench.kumaco.dev/rack=r07"),
            ("description", "rack r07, half of every minute"),
        ],
    )
    .await
}

// ---------------------------------------------------------------------------------------
// Sampling

/// The API server's counts before kumaco started.
struct Baseline {
    applies: u64,
    patches: u64,
}

/// Everything a sample reads.
struct Probe<'a> {
    client: &'a kube::Client,
    observer: &'a Observer,
    agent: &'a RebootAgent,
    source: &'a RebootSource,
    baseline: Baseline,
    started: Instant,
}

#[derive(Clone, Debug, Serialize)]
struct Sample {
    /// Seconds since kumaco was ready.
    t: f64,
    at: String,
    rss_mib: f64,
    /// Peak RSS so far (VmHWM).
    hwm_mib: f64,
    cpu_seconds: f64,
    /// Server-side applies to `nodes/status` (only kumaco applies) as the API server
    /// counts them, retries included, and how many of them it failed.
    applies: u64,
    applies_failed: u64,
    /// Other patches to `nodes/status`: the stand-in reporter's and agent's.
    helper_patches: u64,
    /// kumaco's own count of its condition writes (`kumaco_api_writes_total{verb="patch"}`).
    kumaco_writes: u64,
    /// `kumaco_api_writes_total{result="error"}`, condition writes and events.
    write_errors: u64,
    /// `kumaco_transitions_total`: condition status changes written.
    transitions: u64,
    /// kumaco's gauges.
    under_maintenance: u64,
    in_progress: u64,
    /// What an independent watch saw: nodes in progress now, and the most at once so far.
    observed_in_progress: usize,
    observed_max_in_progress: usize,
    reboots: usize,
    /// Nodes marked RebootRequired=True and not rebooted yet.
    waiting: usize,
    warn_lines: usize,
    error_lines: usize,
    load1: f64,
}

impl Sample {
    const HEADER: &str = "  time  RSS MiB  peak MiB  CPU s  applies  transitions  write err  \
                          under  in prog  max seen  reboots  waiting  warn/error  load";

    fn line(&self) -> String {
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
    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// A sample, and the kumaco metrics text and log levels it was taken from.
    async fn sample(&self, kumaco: &mut Kumaco) -> Result<(Sample, String, LogLevels)> {
        let t = self.elapsed();
        let mib = |kib: u64| kib as f64 / 1024.0;
        let rss_mib = mib(kumaco.status_kib("VmRSS")?);
        let hwm_mib = mib(kumaco.status_kib("VmHWM")?);
        let cpu_seconds = kumaco.cpu_seconds()?;
        let logs = kumaco.log_levels()?.clone();
        let metrics = kumaco.metrics().await?;
        let server = apiserver_metrics(self.client).await?;
        let (applies, applies_failed) = node_status_requests(&server, "APPLY");
        let observed = self.observer.observed();
        let ours = |name: &str, labels: &[(&str, &str)]| metric_sum(&metrics, name, labels) as u64;
        let sample = Sample {
            t,
            at: Timestamp::now().to_string(),
            rss_mib,
            hwm_mib,
            cpu_seconds,
            applies: applies - self.baseline.applies,
            applies_failed,
            helper_patches: node_status_requests(&server, "PATCH").0 - self.baseline.patches,
            kumaco_writes: ours("kumaco_api_writes_total", &[("verb", "patch")]),
            write_errors: ours("kumaco_api_writes_total", &[("result", "error")]),
            transitions: ours("kumaco_transitions_total", &[]),
            under_maintenance: ours("kumaco_nodes_under_maintenance", &[]),
            in_progress: ours("kumaco_nodes_in_progress", &[]),
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
struct Sampled {
    samples: Vec<Sample>,
    /// kumaco's metrics text and log levels at the last sample.
    kumaco_metrics: String,
    logs: LogLevels,
    /// Samples that could not be taken (a source did not answer).
    failures: usize,
    interrupted: bool,
    /// How kumaco ended, if it died.
    died: Option<String>,
}

/// Samples every `period` until `length` has passed (the last sample at the end exactly),
/// Ctrl-C, or kumaco's death.
async fn sample_until(
    probe: &Probe<'_>,
    kumaco: &mut Kumaco,
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
            sampled = probe.sample(kumaco) => match sampled {
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
fn clock(secs: f64) -> String {
    let secs = secs.round() as u64;
    format!("{:02}:{:02}", secs / 60, secs % 60)
}

// ---------------------------------------------------------------------------------------
// The summary

struct SummaryInput<'a> {
    args: &'a Args,
    ceiling: usize,
    sampled: &'a Sampled,
    logs: LogLevels,
    log_path: &'a std::path::Path,
    observed_max: usize,
    observer_relists: usize,
    source: &'a SourceState,
    churn: Option<&'a ChurnCounts>,
    ready_secs: f64,
    load_start: String,
}

fn summarize(input: &SummaryInput) -> Value {
    let samples = &input.sampled.samples;
    let last = samples.last().expect("at least one sample");
    let minutes = last.t / 60.0;
    // The steady state: from the first sample after the first minute to the last.
    let steady = samples
        .iter()
        .find(|s| s.t >= STEADY_AFTER.as_secs_f64())
        .filter(|s| last.t > s.t);
    let per_minute =
        |f: fn(&Sample) -> f64| steady.map(|s| (f(last) - f(s)) / ((last.t - s.t) / 60.0));
    let transitions_of = |condition: &str, status: &str| {
        metric_sum(
            &input.sampled.kumaco_metrics,
            "kumaco_transitions_total",
            &[("condition", condition), ("status", status)],
        ) as u64
    };
    let mut waits = input.source.waits.clone();
    waits.sort_by(f64::total_cmp);
    json!({
        "nodes": input.args.nodes,
        "max_in_progress": input.args.max_in_progress,
        "kumaco": input.args.kumaco,
        "minutes_planned": input.args.minutes,
        "minutes_run": minutes,
        "interrupted": input.sampled.interrupted,
        "sample_secs": input.args.sample_secs,
        "samples": samples.len(),
        "sample_failures": input.sampled.failures,
        "load_average_start": input.load_start,
        "load_average_end": load_average(),
        "ready_seconds": input.ready_secs,
        "writes": {
            "applies": last.applies,
            "applies_failed": last.applies_failed,
            "kumaco_writes": last.kumaco_writes,
            "transitions": last.transitions,
            "transitions_by": {
                "UnderMaintenance=True": transitions_of(UNDER_MAINTENANCE, "True"),
                "UnderMaintenance=False": transitions_of(UNDER_MAINTENANCE, "False"),
                "MaintenanceInProgress=True": transitions_of(MAINTENANCE_IN_PROGRESS, "True"),
                "MaintenanceInProgress=False": transitions_of(MAINTENANCE_IN_PROGRESS, "False"),
            },
            "applies_per_minute": last.applies as f64 / minutes,
            "applies_per_minute_steady": per_minute(|s| s.applies as f64),
            "transitions_per_minute_steady": per_minute(|s| s.transitions as f64),
            "helper_patches": last.helper_patches,
        },
        "memory_mib": {
            "rss_steady_start": steady.map(|s| s.rss_mib),
            "rss_end": last.rss_mib,
            "peak": last.hwm_mib,
            "rss_slope_second_half_per_hour": rss_slope(samples),
        },
        "cpu_seconds": {
            "total": last.cpu_seconds,
            "per_minute": last.cpu_seconds / minutes,
            "per_minute_steady": per_minute(|s| s.cpu_seconds),
        },
        "errors": {
            "kumaco_write_errors": last.write_errors,
            "log_warn": input.logs.warn,
            "log_error": input.logs.error,
            "log_first": input.logs.first,
            "reporter_errors": input.source.errors,
            "observer_relists": input.observer_relists,
        },
        // As of the end, not the last sample: marks done since it are waiting.
        "reboots": {
            "marked": input.source.marks,
            "done": input.source.reboots_seen,
            "waiting_at_end": input.source.waiting.len(),
            "wait_seconds": {
                "p50": fleet::percentile(&waits, 0.50),
                "p99": fleet::percentile(&waits, 0.99),
                "max": waits.last(),
            },
        },
        "in_progress": {
            "ceiling": input.ceiling,
            "max_observed": input.observed_max,
            "within_ceiling": input.observed_max <= input.ceiling,
        },
        "churn": input.churn.map(|c| json!({
            "rate_per_second": input.args.churn_rate,
            "changes": c,
        })),
        "kumaco_alive": input.sampled.died.is_none(),
        "kumaco_log": input.log_path,
    })
}

/// The least-squares slope of RSS over the second half of the run, in MiB per hour: the
/// first half holds the startup and the reboot backlog filling up; a leak climbs on.
fn rss_slope(samples: &[Sample]) -> Option<f64> {
    let half = samples.last()?.t / 2.0;
    let points: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.t >= half)
        .map(|s| (s.t / 3600.0, s.rss_mib))
        .collect();
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    Some(sxy / sxx)
}

fn print_summary(s: &Value) {
    // Figures the run was too short for are null: shown as "-".
    let num = |v: &Value, decimals: usize| match v.as_f64() {
        Some(x) => format!("{x:.decimals$}"),
        None => "-".into(),
    };
    let row = |name: &str, value: String, expected: &str| {
        println!("{name:<40} {value:>32}  {expected}");
    };
    let (w, m, c, e, r) = (
        &s["writes"],
        &s["memory_mib"],
        &s["cpu_seconds"],
        &s["errors"],
        &s["reboots"],
    );
    let (by, waits, p) = (&w["transitions_by"], &r["wait_seconds"], &s["in_progress"]);
    println!();
    row("summary", String::new(), "expected");
    let interrupted = if s["interrupted"] == true {
        ", interrupted"
    } else {
        ""
    };
    let run = format!(
        "{} of {} min",
        num(&s["minutes_run"], 1),
        s["minutes_planned"]
    );
    row(
        "run",
        format!("{run}, {} samples{interrupted}", s["samples"]),
        "",
    );
    row("nodes", s["nodes"].to_string(), "");
    let load = |k: &str| s[k].as_str().unwrap_or("?").to_string();
    let loads = format!(
        "{} / {}",
        load("load_average_start"),
        load("load_average_end")
    );
    row("load average start / end", loads, "");
    let applies = format!("{} ({} failed)", w["applies"], w["applies_failed"]);
    row(
        "nodes/status applies (API server)",
        applies,
        "= kumaco's writes",
    );
    row(
        "kumaco's condition writes",
        w["kumaco_writes"].to_string(),
        "",
    );
    row("transitions", w["transitions"].to_string(), "");
    let pair = |a: &str, b: &str| format!("{} / {}", by[a], by[b]);
    let um = pair("UnderMaintenance=True", "UnderMaintenance=False");
    row("  UnderMaintenance True / False", um, "");
    let mip = pair("MaintenanceInProgress=True", "MaintenanceInProgress=False");
    row("  MaintenanceInProgress True / False", mip, "");
    let per_minute = format!(
        "{} / {}",
        num(&w["applies_per_minute"], 0),
        num(&w["applies_per_minute_steady"], 0)
    );
    row("applies per minute (all / steady)", per_minute, "");
    let transitions = num(&w["transitions_per_minute_steady"], 0);
    row("transitions per minute (steady)", transitions, "");
    let rss = format!(
        "{} / {} / {} MiB",
        num(&m["rss_steady_start"], 1),
        num(&m["rss_end"], 1),
        num(&m["peak"], 1)
    );
    row("RSS steady start / end / peak", rss, "");
    let slope = format!("{} MiB/h", num(&m["rss_slope_second_half_per_hour"], 1));
    row("RSS slope over the second half", slope, "≈ 0");
    let cpu = format!(
        "{} s / {} s",
        num(&c["total"], 1),
        num(&c["per_minute_steady"], 2)
    );
    row("CPU total / per minute (steady)", cpu, "");
    row(
        "kumaco write errors",
        e["kumaco_write_errors"].to_string(),
        "0",
    );
    let logs = format!("{} / {}", e["log_warn"], e["log_error"]);
    row("kumaco log WARN / ERROR", logs, "0 / 0");
    let harness = format!(
        "{} / {} / {}",
        e["reporter_errors"], e["observer_relists"], s["sample_failures"]
    );
    row(
        "reporter errors / re-lists / bad samples",
        harness,
        "0 / 0 / 0",
    );
    let reboots = format!("{} / {} / {}", r["marked"], r["done"], r["waiting_at_end"]);
    row("reboots marked / done / waiting", reboots, "");
    let wait = format!(
        "{} / {} / {} s",
        num(&waits["p50"], 0),
        num(&waits["p99"], 0),
        num(&waits["max"], 0)
    );
    row("wait for a reboot p50 / p99 / max", wait, "");
    let most = format!("{} (ceiling {})", p["max_observed"], p["ceiling"]);
    row("most in progress at once (watch)", most, "≤ ceiling");
    if let Some(churn) = s["churn"].as_object() {
        let c = &churn["changes"];
        let changes = format!(
            "{} / {} ({} failed)",
            c["accepted"], c["planned"], c["failed"]
        );
        row(
            &format!(
                "churn {}/s: changes accepted / planned",
                churn["rate_per_second"]
            ),
            changes,
            "all",
        );
    }
    row(
        "kumaco alive at the last sample",
        s["kumaco_alive"].to_string(),
        "true",
    );
    for line in e["log_first"].as_array().into_iter().flatten() {
        println!("  log: {}", line.as_str().unwrap_or_default());
    }
}
