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
//!
//! The parts: `run` (the cluster, the windows, the helpers and kumaco for the run),
//! `sampling` (a sample every period, and the probes behind it) and `summary` (the
//! figures over the samples, and the checks that fail the run).

mod run;
mod sampling;
mod summary;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::run::run;
use crate::summary::print_summary;
use anyhow::{Result, bail};
use serde_json::json;
use testkit::fleet;
use testkit::reporter::ReporterSpec;

pub(crate) const NAMESPACE: &str = "soak";
/// kumaco's field manager and log directory, and the windows' field manager.
pub(crate) const NAME: &str = "kumaco-soak";
pub(crate) const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";
/// Each node needs a reboot about every 10 minutes, marked in small batches every 5 s.
pub(crate) const REPORTER_SPEC: ReporterSpec = ReporterSpec {
    reboot_every: Duration::from_secs(600),
    mark_every: Duration::from_secs(5),
    cooldown: Duration::from_secs(60),
};
/// A drain and reboot, as the stand-in agent takes it.
pub(crate) const REBOOT_PAUSE: (Duration, Duration) =
    (Duration::from_secs(5), Duration::from_secs(20));
/// The first minute holds the startup (every open window written at once) and the
/// reboot backlog filling up; figures "in steady state" start after it.
pub(crate) const STEADY_AFTER: Duration = Duration::from_secs(60);
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A long run of kumaco with windows every minute and a reboot agent (see the module
/// docs).
#[derive(clap::Parser)]
pub(crate) struct Args {
    /// Nodes in the cluster (at least 50: the rack window needs a rack).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..))]
    pub(crate) nodes: u64,
    /// Length of the run.
    #[arg(long, default_value_t = 30.0)]
    pub(crate) minutes: f64,
    /// kumaco's --max-in-progress.
    #[arg(long, default_value = "5%")]
    pub(crate) max_in_progress: String,
    /// Seconds between samples.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) sample_secs: u64,
    /// The kumaco binary.
    #[arg(long, default_value = fleet::DEFAULT_KUMACO)]
    pub(crate) kumaco: PathBuf,
    /// Where the samples and the summary go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-soak.json"))]
    pub(crate) json: PathBuf,
    /// Foreign changes per second to the nodes throughout the run, a stand-in kubelet
    /// and another client together (0: none).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) churn_rate: f64,
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
