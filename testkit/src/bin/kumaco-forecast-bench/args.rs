//! The bench's flags, and the durations, spreads and ceilings they give.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use testkit::fleet;
use testkit::kured::Spread;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum SpreadKind {
    Lognormal,
    Uniform,
}

/// How well the forecast predicts a real rollout (see the module docs).
#[derive(clap::Parser)]
pub(crate) struct Args {
    /// Nodes in the cluster, in 4 zones.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(4..))]
    pub(crate) nodes: u64,
    /// Seed of the draws (default: from the clock; printed).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Median downtime of a reboot (Go duration).
    #[arg(long, default_value = "12s")]
    pub(crate) reboot: String,
    /// Spread of the downtime: log-normal sigma, or uniform's ± fraction.
    #[arg(long, default_value_t = 0.35)]
    pub(crate) reboot_sigma: f64,
    /// Median delay from a node's new boot ID to its daemons running (then uncordoned).
    #[arg(long, default_value = "3s")]
    pub(crate) recovery: String,
    #[arg(long, default_value_t = 0.3)]
    pub(crate) recovery_sigma: f64,
    #[arg(long, value_enum, default_value_t = SpreadKind::Lognormal)]
    pub(crate) spread: SpreadKind,
    /// kumaco's --max-in-progress.
    #[arg(long, default_value = "10")]
    pub(crate) max_in_progress: String,
    /// kumaco's --max-in-progress-per=topology.kubernetes.io/zone=Z.
    #[arg(long, default_value = "3")]
    pub(crate) zone_max: String,
    /// kumaco's --start-interval (Go duration), or `off`.
    #[arg(long, default_value = "1s")]
    pub(crate) start_interval: String,
    /// The measured rollouts' windows (Go durations), one rollout each, in order.
    #[arg(long, default_value = "10m,2m")]
    pub(crate) window: String,
    /// Seconds from creating a measured window to its start.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(5..))]
    pub(crate) lead: u64,
    /// The detectors' period (kured's --period).
    #[arg(long, default_value = "5s")]
    pub(crate) period: String,
    /// The kumaco binary.
    #[arg(long, default_value = fleet::DEFAULT_KUMACO)]
    pub(crate) kumaco: PathBuf,
    /// Where the results go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-forecast-bench.json"))]
    pub(crate) json: PathBuf,
}

/// A Go duration (`12s`, `1m30s`, `500ms`, `2.5s`), read as kumaco reads one.
pub(crate) fn parse_duration(s: &str) -> Result<Duration> {
    let d = kumaco_core::duration::parse(s).with_context(|| format!("{s:?}: a Go duration"))?;
    Duration::try_from(d.to_signed()).with_context(|| format!("{s:?}: negative"))
}

pub(crate) fn spread(kind: SpreadKind, median: Duration, sigma: f64) -> Spread {
    match kind {
        SpreadKind::Lognormal => Spread::LogNormal { median, sigma },
        SpreadKind::Uniform => Spread::Uniform {
            low: median.mul_f64((1.0 - sigma).max(0.0)),
            high: median.mul_f64(1.0 + sigma),
        },
    }
}
