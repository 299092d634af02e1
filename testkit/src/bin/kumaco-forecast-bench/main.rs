//! `kumaco-forecast-bench`: how well `kumaco plan --forecast` predicts a real rollout
//! (docs/benchmarks.md, "Forecast accuracy"), against a private, real kube-apiserver + etcd
//! on loopback. Not a test and not in CI: it runs only when asked.
//!
//! ```sh
//! cargo build --release --bin kumaco        # the binary under test
//! cargo run --release -p testkit --bin kumaco-forecast-bench
//! #   --nodes N               nodes, 4 zones (default 100)
//! #   --seed S                the draws of the reboots and recoveries (default: from the clock)
//! #   --reboot D --reboot-sigma S      each reboot's downtime: log-normal, median D (12s), sigma S (0.35)
//! #   --recovery D --recovery-sigma S  daemons' restart after a reboot (3s, 0.3)
//! #   --spread lognormal|uniform       uniform: median * (1 ± sigma)
//! #   --max-in-progress C  --zone-max Z  --start-interval I|off   kumaco's policy (10, 3, 1s)
//! #   --window W1,W2,...      the measured rollouts' one-shot windows, in order (default 10m,2m)
//! #   --period D              the detectors' period (default 5s)
//! #   --kumaco PATH           kumaco binary (default target/release/kumaco)
//! #   --json FILE             results (default target/kumaco-forecast-bench.json)
//! ```
//!
//! The cluster: N realistic nodes in 4 zones (`testkit::fleet`), each with kured v2's
//! daemons as they behave ([`testkit::kured`]): an executor that cordons and reboots its
//! node the moment it shows `MaintenanceInProgress=True`, a reboot whose downtime is drawn
//! per node and per reboot (`--reboot`, `--reboot-sigma`, `--seed`), after which the node
//! is Ready with a new boot ID, and its daemons restarting after a drawn delay
//! (`--recovery`), the executor then uncordoning it. So kumaco's records read: `completed
//! after D` (its start to the new boot ID it sees: the executor's reaction, the drain, the
//! downtime) and `recovered after R` (that end to the node seen Ready and uncordoned: the
//! daemons' restart and the uncordon).
//!
//! kumaco runs as kured's brain with the policy flags given. A warm-up rollout in a long
//! window reboots every node once, so that every node records a duration; its window is
//! deleted. Then, for each `--window`: every node needs a reboot again (the detectors
//! report it), a one-shot window selecting every node is created to open at a whole
//! second `--lead` seconds ahead, and 3 s before it opens `kumaco plan --forecast -o json`
//! is run against the live cluster with the same policy flags (durations learned from
//! the nodes: no `--maintenance-duration`). The rollout then runs to its end (every node
//! that started back in service, and the window over or every node started), an
//! independent watch recording each node's real start (`MaintenanceInProgress` turning
//! True), end (turning False) and return to service (uncordoned).
//!
//! The report, per rollout: the per-node error of the forecast end against the real end
//! (median and 90th percentile of its absolute value, in seconds and as a fraction of
//! the rollout's length, with its mean: a bias), split into the error of the start and
//! of the duration; the error on the rollout's completion (the forecast's expected
//! completion, `rollout.expected.completion`, over durations drawn from the records; the
//! median run's `rollout.median.completion` beside it; the median run's last end when
//! some nodes do not fit, against the last real end) and the target it is held to
//! (within 10% of the rollout or one median duration, whichever is larger); and whether
//! the nodes the forecast says fit in the window started in it and those it says do not
//! fit did not. Nothing is tuned to the outcome: the figures are what the run gives.
//!
//! The parts: `args` (the flags, and the durations and ceilings they give), `recorder`
//! (the independent watch and each node's real maintenance), `rollout` (the cluster, the
//! warm-up and each measured rollout with its forecast), `analysis` (the forecast against
//! the real rollout) and `report` (the table).

mod analysis;
mod args;
mod recorder;
mod report;
mod rollout;

use std::process::ExitCode;
use std::time::Duration;

use crate::args::Args;
use crate::rollout::run;
use anyhow::Result;
use testkit::fleet;

pub(crate) const NAMESPACE: &str = "forecast-bench";
/// kumaco's field manager and log directory, and the windows' field manager.
pub(crate) const NAME: &str = "kumaco-forecast-bench";
pub(crate) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The forecast is taken this long before the window opens: the cluster is then as it
/// is at the opening, and no pass of kumaco's races the listing.
pub(crate) const FORECAST_AHEAD: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> Result<ExitCode> {
    let args = <Args as clap::Parser>::parse();
    fleet::check_kumaco_binary(&args.kumaco)?;
    let result = run(&args).await?;
    if let Some(dir) = args.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&result)?)?;
    println!("results written to {}", args.json.display());
    Ok(ExitCode::SUCCESS)
}
