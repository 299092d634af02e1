//! `kumaco-chaos`: three kumaco replicas with leader election under a seeded schedule of
//! faults, watched by an independent checker. Not a test: `make chaos` runs
//! the long version, `make smoke` a short one.
//!
//! ```sh
//! cargo build --release --bin kumaco -p kumaco      # the binary under test
//! cargo run --release -p testkit --bin kumaco-chaos -- --minutes 60
//! #   --seed S          the fault schedule's seed (default: random, printed first)
//! #   --minutes M       length of the fault phase (default 60)
//! #   --nodes N         nodes (default 300)
//! #   --replicas R      kumaco replicas (default 3)
//! #   --ceiling C       kumaco's --max-in-progress (default 8)
//! #   --zone-ceiling Z  kumaco's --max-in-progress-per topology.kubernetes.io/zone (default 3)
//! #   --budgets         pods and PodDisruptionBudgets, drains through the eviction API
//! #   --kumaco-arg ARG  one more argument for every kumaco replica (repeatable)
//! #   --kumaco PATH     kumaco binary (default target/release/kumaco)
//! #   --json FILE       figures (default target/kumaco-chaos.json)
//! ```
//!
//! The cluster: a private real API server + etcd, N nodes in 4 zones; windows opening
//! and closing every minute (one per zone for 3 minutes of every 4, 30 s of every minute
//! on a rack, and a 20 s blackout every 5 minutes); kumaco as kured's brain
//! (`--in-progress --require-condition kured.dev/RebootRequired`, a ceiling overall and
//! one per zone, unavailable nodes counted against both), each replica reaching the API
//! server through its own fault proxy ([`testkit::faultproxy`]), replica 0 with a wall
//! clock it alone sees ([`testkit::chaos::clock`]); the stand-in reporter marks each
//! node for a reboot about every 10 minutes, the stand-in agent reboots the nodes kumaco
//! lets in, and the drainer ([`testkit::chaos::lifecycle::Drainer`]) cordons them, makes
//! them NotReady during the reboot and Ready and uncordoned after it, so that a node
//! that completed holds its slot while it recovers.
//!
//! The schedule: episodes drawn from the seed, each a fault followed by a quiet gap of
//! the checker's settling time plus 5-15 s, in which the checker compares the nodes with
//! `kumaco plan`. Episodes: SIGKILL of the leader just after a window edge or just after
//! one of its writes, SIGKILL or SIGTERM of a random replica, the leader and then its
//! successor, the API server and etcd SIGKILLed and restarted on the same data (also
//! across an edge), proxy faults (latency, stalls, resets mid-response, blackholes) on
//! the leader or another replica, the leader partitioned from the API server, and
//! replica 0's wall clock stepped forward or back (made leader first, most times). With
//! every episode, whatever its kind, 1-3 nodes go down (NotReady, Ready Unknown or
//! cordoned) for 5-90 s, or 4-6 nodes of one zone at once, more than its ceiling
//! ([`testkit::chaos::lifecycle::Outage`]).
//! Killed replicas come back as new pods (a new identity, as a Deployment's). Windows
//! are edited (duration, schedule, selector) during many episodes. The workload's own
//! randomness (which node needs a reboot when) is not from the seed: a replay gets the
//! same faults in the same order at the same moments relative to the windows.
//!
//! After the fault phase: a quiet tail in which the API server's count of kumaco's
//! applies must equal the node versions in which kumaco's conditions changed. The count
//! is read at moments when nothing moves, so the tail starts no new reboot: the reporter
//! stops and the agent holds every node (those in progress stay so, the drainer's nodes
//! stay down); only window edges, and kumaco's writes for them, go on.
//!
//! With `--budgets`, the real kube-controller-manager (disruption and StatefulSet
//! controllers) runs on the same API server, started again if an API server crash stops
//! it; StatefulSets, DaemonSet and finished pods live on a fraction of the nodes under
//! PodDisruptionBudgets ([`testkit::chaos::workload`]), one of which allows nothing for
//! the first half of the fault phase; a reporter of their own marks those nodes for a
//! reboot again a minute after each (the others: about every 10 minutes); the drainer
//! drains as kured does, through the eviction API, and the checker holds kumaco to one
//! more promise: no eviction of the drain of a node it started is refused.
//!
//! On the first violation it prints it, the seed and the command that replays the run,
//! and exits 1.
//!
//! In parts: [`run`] (the set-up, the phases, the figures gathered), [`episodes`] (one
//! fault episode), [`replicas`], [`windows`] (and `kumaco plan`'s reference), [`tail`]
//! (the write count), [`figures`] (printed).

mod episodes;
mod figures;
mod replicas;
mod run;
mod tail;
mod windows;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::jiff::SignedDuration;
use serde_json::Value;
use testkit::chaos::lifecycle::DrainSpec;
use testkit::fleet;
use testkit::reporter::ReporterSpec;

use figures::print_figures;
use run::run;

const NAMESPACE: &str = "chaos";
/// The field manager of kumaco (all replicas, as one Deployment's) and of the windows.
const MANAGER: &str = "kumaco-chaos";
const LEASE: &str = "kumaco-chaos";
/// Shorter than kumaco's defaults (15 s, 10 s, 2 s), so that a run holds more
/// failovers; the same ratios.
const LEASE_DURATION: Duration = Duration::from_secs(8);
const LEASE_ARGS: [&str; 3] = [
    "--lease-duration=8s",
    "--lease-renew-deadline=5s",
    "--lease-retry-period=1s",
];
const REPORTER_SPEC: ReporterSpec = ReporterSpec {
    reboot_every: Duration::from_secs(600),
    mark_every: Duration::from_secs(5),
    cooldown: Duration::from_secs(60),
};
/// `--budgets`: the nodes under budgets need a reboot again as soon as the cooldown
/// after their last one allows (the rate alone would mark each every 30 s), so that
/// nodes sharing a budget wait in their windows together most of the time.
const BUDGET_REPORTER_SPEC: ReporterSpec = ReporterSpec {
    reboot_every: Duration::from_secs(30),
    mark_every: Duration::from_secs(5),
    cooldown: Duration::from_secs(60),
};
const REBOOT_PAUSE: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(20));
/// kured around the reboot: cordon at once, NotReady after the drain, Ready 0.5-2 s after
/// the agent reports the reboot done, uncordoned 2-8 s later.
const DRAIN: DrainSpec = DrainSpec {
    to_cordon: (Duration::from_millis(0), Duration::from_millis(500)),
    drain: (Duration::from_secs(1), Duration::from_secs(3)),
    to_ready: (Duration::from_millis(500), Duration::from_secs(2)),
    to_uncordon: (Duration::from_secs(2), Duration::from_secs(8)),
    unknown_share: 0.25,
};
/// The label of the per-group ceiling: the fleet's zones ([`ZONES`]).
const ZONE_KEY: &str = "topology.kubernetes.io/zone";
/// How often an episode's outage takes down several nodes of one zone at once.
const ZONE_OUTAGE_CHANCE: f64 = 0.15;
/// kumaco's bound on a window edge: the condition changes within a second of it.
const EDGE_BOUND: Duration = Duration::from_secs(1);
/// How far the plan reaches; recomputed at every window edit.
const PLAN_SPAN: SignedDuration = SignedDuration::from_hours(3);
/// A SIGTERMed replica's grace period, as a pod's.
const GRACE: Duration = Duration::from_secs(30);

/// kumaco under randomized faults, with an independent checker (see the module docs).
#[derive(clap::Parser)]
struct Args {
    /// Seed of the fault schedule (default: random).
    #[arg(long)]
    seed: Option<u64>,
    /// Length of the fault phase, in minutes.
    #[arg(long, default_value_t = 60.0)]
    minutes: f64,
    /// Nodes (at least 50: the rack window needs a rack).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(50..))]
    nodes: u64,
    /// kumaco replicas.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(2..10))]
    replicas: u64,
    /// kumaco's --max-in-progress.
    #[arg(long, default_value_t = 8)]
    ceiling: usize,
    /// kumaco's --max-in-progress-per topology.kubernetes.io/zone (nodes are in 4 zones).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    zone_ceiling: u64,
    /// How long kumaco may take to recover after a fault ends before the checker compares
    /// the nodes with the plan again, in seconds.
    #[arg(long, default_value_t = 20)]
    settle: u64,
    /// The checker's allowance for its own watch delay, in milliseconds, on top of the
    /// 1 s within which kumaco must act on a window edge or an edit.
    #[arg(long, default_value_t = 2000)]
    slack_ms: u64,
    /// Length of the quiet tail after the faults, in seconds.
    #[arg(long, default_value_t = 120)]
    tail: u64,
    /// Episodes in this order, over and over (default: drawn from the seed with weights).
    /// A short run that must cover every kind of fault lists them.
    #[arg(long, value_enum, value_delimiter = ',')]
    kinds: Vec<Kind>,
    /// Runs kumaco with this --max-in-progress instead of --ceiling, which the checker
    /// still holds it to: a run that must fail, to see the checker catch a breach.
    #[arg(long)]
    kumaco_max_in_progress: Option<String>,
    /// Runs kumaco with this per-zone ceiling instead of --zone-ceiling, which the
    /// checker still holds it to (a run that must fail).
    #[arg(long)]
    kumaco_zone_ceiling: Option<String>,
    /// Runs kumaco with --count-unavailable=false while the checker counts unavailable
    /// nodes (a run that must fail).
    #[arg(long)]
    kumaco_ignores_unavailable: bool,
    /// Pods and PodDisruptionBudgets on the nodes, drains through the eviction API, and
    /// the promise that no drain of a node kumaco started is refused (module docs).
    #[arg(long)]
    budgets: bool,
    /// One more argument for every kumaco replica, after the harness's (e.g.
    /// `--kumaco-arg=--pod-disruption-budgets=false`, a `--budgets` run that must fail).
    #[arg(long, allow_hyphen_values = true)]
    kumaco_arg: Vec<String>,
    /// The kumaco binary.
    #[arg(long, default_value = fleet::DEFAULT_KUMACO)]
    kumaco: PathBuf,
    /// Where the figures go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-chaos.json"))]
    json: PathBuf,
}

/// The kinds of episode (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    LeaderMidEdge,
    LeaderMidWrite,
    Replica,
    DoubleKill,
    ApiCrash,
    Proxy,
    Partition,
    ClockJump,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::LeaderMidEdge,
        Kind::LeaderMidWrite,
        Kind::Replica,
        Kind::DoubleKill,
        Kind::ApiCrash,
        Kind::Proxy,
        Kind::Partition,
        Kind::ClockJump,
    ];
    /// How often each is drawn (with an extra SIGKILL in half the episodes: about 1.2
    /// kills per episode, so that an hour of about 95 episodes holds over 100).
    const WEIGHTS: [u32; 8] = [4, 3, 3, 2, 2, 3, 2, 2];
    /// Every this many episodes is an API server crash whatever the draw: over 10 in an
    /// hour, not just on average.
    const CRASH_EVERY: u64 = 7;
}

impl Args {
    /// The command that replays this run.
    fn replay(&self, seed: u64) -> String {
        let kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|k| {
                clap::ValueEnum::to_possible_value(k)
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_default()
            })
            .collect();
        let kinds = if kinds.is_empty() {
            String::new()
        } else {
            format!(" --kinds {}", kinds.join(","))
        };
        let mut kinds = match &self.kumaco_max_in_progress {
            Some(c) => format!("{kinds} --kumaco-max-in-progress {c}"),
            None => kinds,
        };
        if let Some(c) = &self.kumaco_zone_ceiling {
            kinds.push_str(&format!(" --kumaco-zone-ceiling {c}"));
        }
        if self.kumaco_ignores_unavailable {
            kinds.push_str(" --kumaco-ignores-unavailable");
        }
        if self.budgets {
            kinds.push_str(" --budgets");
        }
        for arg in &self.kumaco_arg {
            kinds.push_str(&format!(" --kumaco-arg={arg}"));
        }
        format!(
            "cargo run --release -p testkit --bin kumaco-chaos -- --seed {seed} --minutes {} \
             --nodes {} --replicas {} --ceiling {} --zone-ceiling {} --settle {} --slack-ms {} \
             --tail {}{kinds} --kumaco {}",
            self.minutes,
            self.nodes,
            self.replicas,
            self.ceiling,
            self.zone_ceiling,
            self.settle,
            self.slack_ms,
            self.tail,
            self.kumaco.display()
        )
    }
}

#[tokio::main]
async fn main() -> Result<ExitCode> {
    let args = <Args as clap::Parser>::parse();
    let seed = args.seed.unwrap_or_else(|| {
        use std::hash::{BuildHasher, RandomState};
        RandomState::new().hash_one(Instant::now()) % 1_000_000_000
    });
    // First, so that a run that dies in any way can be replayed.
    println!("kumaco-chaos: seed {seed}");
    fleet::check_kumaco_binary(&args.kumaco)?;
    if !args.minutes.is_finite() || args.minutes <= 0.0 {
        bail!("--minutes: a positive number");
    }
    let outcome = run(&args, seed).await?;
    if let Some(dir) = args.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.json, serde_json::to_string_pretty(&outcome.figures)?)?;
    print_figures(&outcome.figures);
    println!("figures written to {}", args.json.display());
    match outcome.violation {
        None => Ok(ExitCode::SUCCESS),
        Some(v) => {
            eprintln!("kumaco-chaos: VIOLATION: {v}");
            eprintln!(
                "kumaco-chaos: seed {seed}; replay with:\n  {}",
                args.replay(seed)
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

struct Outcome {
    figures: Value,
    violation: Option<String>,
}
