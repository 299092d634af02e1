//! `kumaco-chaos`: three kumaco replicas with leader election under a seeded schedule of
//! faults, watched by an independent checker (issue 16). Not a test: `make chaos` runs
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
//! On the first violation it prints it, the seed and the command that replays the run,
//! and exits 1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use testkit::agent::{REBOOT_REQUIRED, RebootAgent};
use testkit::chaos::Rng;
use testkit::chaos::checker::{Checker, CheckerConfig};
use testkit::chaos::clock::FakeClock;
use testkit::chaos::lifecycle::{DrainSpec, Drainer, Outage};
use testkit::chaos::plan::{self, Plan, WindowSpec};
use testkit::faultproxy::{Fault, FaultProxy, kubeconfig_via, upstream_of};
use testkit::fleet::{
    self, ZONES, create_namespace, create_nodes, node_labels, node_name, node_status_requests,
    put_window,
};
use testkit::kumaco::{KumacoProcess, Pod, StartOptions, apiserver_metrics};
use testkit::reporter::{RebootSource, ReporterSpec};
use testkit::{ApiServer, Scope};

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
/// The contract's bound on a window edge (§4).
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
    /// contract's 1 s.
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

// ---------------------------------------------------------------------------------------
// Windows

/// The windows at the start: every minute one zone's window opens as another's closes,
/// the rack window opens and closes, and every 5 minutes a blackout covers part of two
/// zones for 20 s.
fn initial_windows() -> Vec<WindowSpec> {
    let spec = |name: &str, pairs: &[(&str, &str)]| WindowSpec {
        name: name.to_string(),
        data: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let mut windows: Vec<WindowSpec> = ZONES
        .iter()
        .enumerate()
        .map(|(k, zone)| {
            spec(
                &format!("chaos-{zone}"),
                &[
                    ("startTime", &format!("{k}-59/4 * * * *")),
                    ("duration", "3m"),
                    (
                        "nodeSelector",
                        &format!("topology.kubernetes.io/zone={zone}"),
                    ),
                ],
            )
        })
        .collect();
    windows.push(spec(
        "chaos-rack",
        &[
            ("startTime", "* * * * *"),
            ("duration", "30s"),
            ("nodeSelector", "bench.kumaco.dev/rack=r07"),
        ],
    ));
    windows.push(spec(
        "chaos-freeze",
        &[
            ("startTime", "2-59/5 * * * *"),
            ("duration", "20s"),
            ("blackout", "true"),
            (
                "nodeSelector",
                "topology.kubernetes.io/zone in (zone-b,zone-c),bench.kumaco.dev/team=team-3",
            ),
        ],
    ));
    windows
}

/// A window edit: one key of one window toggled between its first value and another.
fn edit(rng: &mut Rng, windows: &mut [WindowSpec], initial: &[WindowSpec]) -> (usize, String) {
    let i = rng.below(windows.len());
    let (name, base) = (windows[i].name.clone(), &initial[i].data);
    let key = ["duration", "startTime", "nodeSelector"][rng.below(3)];
    let other = match key {
        "duration" => ["2m30s", "45s", "90s"][rng.below(3)].to_string(),
        "startTime" => ["*/2 * * * *", "* * * * *", "1-59/3 * * * *"][rng.below(3)].to_string(),
        _ => format!("{},bench.kumaco.dev/pool!=gpu", base["nodeSelector"]),
    };
    let value = if windows[i].data[key] == base[key] {
        other
    } else {
        base[key].clone()
    };
    windows[i].data.insert(key.to_string(), value.clone());
    (i, format!("{name} {key}={value}"))
}

// ---------------------------------------------------------------------------------------
// Replicas

struct Replica {
    index: usize,
    incarnation: u32,
    identity: String,
    process: Option<KumacoProcess>,
    proxy: FaultProxy,
    kubeconfig: PathBuf,
    clock: Option<FakeClock>,
    logs: Vec<PathBuf>,
}

impl Replica {
    async fn start(&mut self, kumaco: &Path, server: &ApiServer, args: &[String]) -> Result<()> {
        self.incarnation += 1;
        self.identity = format!("chaos-r{}-{}", self.index, self.incarnation);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let options = StartOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            leader: Some(Pod {
                name: self.identity.clone(),
                namespace: NAMESPACE.into(),
            }),
            healthy_is_enough: true,
            env: self.clock.as_ref().map(FakeClock::env).unwrap_or_default(),
            rust_log: Some("info".into()),
        };
        let process = KumacoProcess::start_with(kumaco, server, &args, &options).await?;
        self.logs.push(process.log_path().to_path_buf());
        self.process = Some(process);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The run

#[derive(Default, serde::Serialize)]
struct Tally {
    episodes: u64,
    sigkill: u64,
    sigterm: u64,
    leader_kills: u64,
    mid_edge: u64,
    mid_write: u64,
    api_crashes: u64,
    api_crashes_across_edge: u64,
    proxy_faults: BTreeMap<String, u64>,
    partitions: u64,
    clock_jumps: u64,
    window_edits: u64,
    restart_failures: u64,
    fault_seconds: f64,
    /// Nodes the harness took down (outages), by how; zone outages among the episodes.
    outages: BTreeMap<String, u64>,
    zone_outages: u64,
}

struct Driver<'a> {
    args: &'a Args,
    rng: Rng,
    server: ApiServer,
    client: kube::Client,
    replicas: Vec<Replica>,
    kumaco_args: Vec<String>,
    checker: Checker,
    windows: Vec<WindowSpec>,
    initial: Vec<WindowSpec>,
    nodes: Vec<(String, BTreeMap<String, String>)>,
    dir: PathBuf,
    tally: Tally,
    started: Instant,
    /// The outages running in the background.
    outages: Vec<tokio::task::JoinHandle<()>>,
}

async fn run(args: &Args, seed: u64) -> Result<Outcome> {
    let n = args.nodes as usize;
    println!(
        "kumaco-chaos: {n} nodes, {} replicas, ceiling {}, {} min of faults then a {} s tail",
        args.replicas, args.ceiling, args.minutes, args.tail
    );
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let dir = server.dir().join("chaos");
    std::fs::create_dir_all(&dir)?;
    let scope = Scope::new("chaos");
    create_namespace(&client, NAMESPACE).await?;
    create_nodes(&client, &scope, n).await?;
    let initial = initial_windows();
    for w in &initial {
        put(&client, w).await?;
    }
    let nodes: Vec<(String, BTreeMap<String, String>)> = (0..n)
        .map(|i| {
            let name = node_name(&scope, i);
            let labels = node_labels(&scope, &name, i);
            (name, labels)
        })
        .collect();
    let plan = compute_plan(args, &dir, &initial, &nodes)?;
    let cfg = CheckerConfig {
        ceiling: args.ceiling,
        group_ceiling: Some((ZONE_KEY.into(), args.zone_ceiling as usize)),
        edge_bound: EDGE_BOUND,
        slack: Duration::from_millis(args.slack_ms),
        settle: Duration::from_secs(args.settle),
        lease_namespace: NAMESPACE.into(),
        lease_name: LEASE.into(),
        lease_duration: LEASE_DURATION,
    };
    let selector = scope.selector();
    let checker = Checker::start(&client, &selector, cfg, plan).await?;
    let startup = checker.fault_started("startup");
    let agent = Arc::new(RebootAgent::start(&client, &selector, REBOOT_PAUSE).await?);
    let drainer = Drainer::start(&client, &selector, DRAIN).await?;
    let names: Vec<String> = nodes.iter().map(|(name, _)| name.clone()).collect();
    let mut reporter = RebootSource::start(client.clone(), names, agent.clone(), REPORTER_SPEC);

    let upstream = upstream_of(&server)?;
    let mut replicas = Vec::new();
    for index in 0..args.replicas as usize {
        let proxy = FaultProxy::start(upstream)?;
        let kubeconfig = dir.join(format!("replica-{index}.kubeconfig"));
        kubeconfig_via(server.kubeconfig(), proxy.addr(), &kubeconfig)?;
        let clock = if index == 0 {
            Some(FakeClock::new(&dir)?)
        } else {
            None
        };
        replicas.push(Replica {
            index,
            incarnation: 0,
            identity: String::new(),
            process: None,
            proxy,
            kubeconfig,
            clock,
            logs: Vec::new(),
        });
    }
    let kumaco_args: Vec<String> = [
        format!("--namespace={NAMESPACE}"),
        format!("--node-selector={selector}"),
        format!("--field-manager={MANAGER}"),
        format!("--lease-name={LEASE}"),
        "--in-progress".into(),
        format!("--require-condition={REBOOT_REQUIRED}"),
        format!(
            "--max-in-progress={}",
            args.kumaco_max_in_progress
                .clone()
                .unwrap_or_else(|| args.ceiling.to_string())
        ),
        format!(
            "--max-in-progress-per={ZONE_KEY}={}",
            args.kumaco_zone_ceiling
                .clone()
                .unwrap_or_else(|| args.zone_ceiling.to_string())
        ),
        format!("--count-unavailable={}", !args.kumaco_ignores_unavailable),
    ]
    .into_iter()
    .chain(LEASE_ARGS.iter().map(|s| s.to_string()))
    .collect();
    let mut driver = Driver {
        args,
        rng: Rng::new(seed),
        server,
        client,
        replicas,
        kumaco_args,
        checker,
        windows: initial.clone(),
        initial,
        nodes,
        dir,
        tally: Tally::default(),
        started: Instant::now(),
        outages: Vec::new(),
    };
    for i in 0..driver.replicas.len() {
        driver.start_replica(i).await?;
    }
    driver.wait_for_leader(Duration::from_secs(60)).await?;
    driver.checker.fault_ended(startup);
    driver.say(&format!(
        "{} replicas up, leader {}; logs {}",
        driver.replicas.len(),
        driver.checker.holder().unwrap_or_default(),
        driver.replicas[0].logs[0]
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    ));

    let fault_phase = Duration::from_secs_f64(args.minutes * 60.0);
    let mut violated = false;
    while driver.started.elapsed() < fault_phase {
        let violation = driver.checker.violated();
        tokio::select! {
            biased;
            _ = violation => { violated = true; break; }
            result = driver.episode() => result?,
        }
        let violation = driver.checker.violated();
        tokio::select! {
            biased;
            _ = violation => { violated = true; break; }
            _ = driver.quiet_gap() => {}
        }
    }
    reporter.stop(&agent).await;
    let (tail, tail_violation) = if violated {
        (json!(null), None)
    } else {
        // With reboots going on (the drainer adds four node changes to each) no moment
        // is still: the tail of the first long run with the drainer found none.
        for (name, _) in &driver.nodes {
            agent.hold(name);
        }
        let violation = driver.checker.violated();
        tokio::select! {
            biased;
            _ = violation => (json!(null), None),
            tail = driver.tail() => tail?,
        }
    };
    let violation = driver.checker.violation().or(tail_violation);
    let counts = driver.checker.counts();
    let reporter_state = reporter.state();
    let figures = json!({
        "seed": seed,
        "replay": args.replay(seed),
        "nodes": args.nodes,
        "replicas": args.replicas,
        "ceiling": args.ceiling,
        "zone_ceiling": args.zone_ceiling,
        "minutes": driver.started.elapsed().as_secs_f64() / 60.0,
        "faults": driver.tally,
        "kills": driver.tally.sigkill + driver.tally.sigterm,
        "reboots": agent.reboots(),
        "reboots_marked": reporter_state.marks,
        "drainer": drainer.counts(),
        "max_in_progress": counts.max_in_progress,
        "checker": counts,
        "tail": tail,
        "violations": usize::from(violation.is_some()),
        "first_violation": violation,
        "replica_logs": driver.replicas.iter().flat_map(|r| r.logs.clone()).collect::<Vec<_>>(),
        "proxy_stats": driver.replicas.iter().map(|r| format!("{:?}", r.proxy.stats())).collect::<Vec<_>>(),
    });
    drop(reporter_state);
    // The helpers first: they must not retry against an API server that is going away.
    drop(reporter);
    drop(agent);
    drop(drainer);
    drop(driver);
    Ok(Outcome { figures, violation })
}

impl Drop for Driver<'_> {
    /// The replicas and their proxies go before the API server: it would wait for their
    /// connections to drain (up to a minute) before it stops.
    fn drop(&mut self) {
        for outage in self.outages.drain(..) {
            outage.abort();
        }
        for replica in &mut self.replicas {
            if let Some(mut process) = replica.process.take() {
                let _ = process.kill();
            }
        }
        self.replicas.clear();
    }
}

async fn put(client: &kube::Client, w: &WindowSpec) -> Result<()> {
    let data: Vec<(&str, &str)> = w
        .data
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    put_window(client, NAMESPACE, MANAGER, &w.name, &data).await
}

fn compute_plan(
    args: &Args,
    dir: &Path,
    windows: &[WindowSpec],
    nodes: &[(String, BTreeMap<String, String>)],
) -> Result<Plan> {
    // From a minute back: the plan must cover "now" whatever the planner's rounding.
    let from = Timestamp::now() - SignedDuration::from_secs(60);
    plan::compute(
        &args.kumaco,
        dir,
        NAMESPACE,
        windows,
        nodes,
        from,
        PLAN_SPAN,
    )
}

/// `mm:ss` of a duration.
fn clock(d: Duration) -> String {
    let secs = d.as_secs();
    format!("{:02}:{:02}", secs / 60, secs % 60)
}

#[derive(Clone, Copy, Debug)]
enum Signal {
    Kill,
    Term,
}

impl<'a> Driver<'a> {
    fn say(&self, what: &str) {
        println!("[{}] {what}", clock(self.started.elapsed()));
    }

    async fn start_replica(&mut self, i: usize) -> Result<()> {
        let (kumaco, args) = (&self.args.kumaco, &self.kumaco_args);
        self.replicas[i].start(kumaco, &self.server, args).await
    }

    /// Starts a killed replica again; a failure (the API server still down, a slow
    /// machine) is counted and retried at the next episode.
    async fn restart_down(&mut self) {
        for i in 0..self.replicas.len() {
            if self.replicas[i].process.is_none()
                && let Err(e) = self.start_replica(i).await
            {
                self.tally.restart_failures += 1;
                self.say(&format!("replica {i} did not start again: {e:#}"));
            }
        }
    }

    fn leader(&self) -> Option<usize> {
        let holder = self.checker.holder()?;
        self.replicas
            .iter()
            .position(|r| r.identity == holder && r.process.is_some())
    }

    async fn wait_for_leader(&self, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(i) = self.leader() {
                return Ok(i);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("no replica took the Lease within {timeout:?}")
    }

    async fn kill(&mut self, i: usize, signal: Signal) -> Result<()> {
        let identity = self.replicas[i].identity.clone();
        let Some(mut process) = self.replicas[i].process.take() else {
            return Ok(());
        };
        match signal {
            Signal::Kill => {
                process.kill()?;
                self.tally.sigkill += 1;
            }
            Signal::Term => {
                if let Err(e) = process.terminate(GRACE).await {
                    self.say(&format!("{identity} ignored SIGTERM: {e:#}"));
                    process.kill()?;
                }
                self.tally.sigterm += 1;
            }
        }
        self.checker.replica_killed(&identity);
        Ok(())
    }

    /// Waits until just after the next window edge (the plan's).
    async fn until_edge(&self, after: Duration) {
        if let Some(edge) = self.checker.next_edge() {
            let wait = edge.duration_since(Timestamp::now());
            let wait = Duration::try_from(wait).unwrap_or_default() + after;
            tokio::time::sleep(wait).await;
        }
    }

    async fn edit_windows(&mut self) -> Result<String> {
        let (i, what) = edit(&mut self.rng, &mut self.windows, &self.initial);
        put(&self.client, &self.windows[i]).await?;
        let plan = compute_plan(self.args, &self.dir, &self.windows, &self.nodes)?;
        self.checker.set_plan(plan);
        self.tally.window_edits += 1;
        Ok(what)
    }

    /// One fault episode, drawn from the seed.
    async fn episode(&mut self) -> Result<()> {
        self.tally.episodes += 1;
        let kind = match self.args.kinds.len() {
            0 => {
                let drawn = Kind::ALL[self.rng.weighted(&Kind::WEIGHTS)];
                if self.tally.episodes.is_multiple_of(Kind::CRASH_EVERY) {
                    Kind::ApiCrash
                } else {
                    drawn
                }
            }
            n => self.args.kinds[(self.tally.episodes as usize - 1) % n],
        };
        let edit = self.rng.chance(0.4);
        // 0.5 gave 90 kills in a 60-minute run (seed 842884876), short of the 100 a long
        // run is to reach; 0.8 adds about 25.
        let extra_kill = self.rng.chance(0.8);
        let began = Instant::now();
        let mut notes = Vec::new();
        // Draws that do not depend on what the cluster does, so a replay stays in step.
        let hold = self
            .rng
            .duration(Duration::from_secs(5), Duration::from_secs(20));
        let pick = self.rng.below(self.replicas.len());
        let signal = if self.rng.chance(0.7) {
            Signal::Kill
        } else {
            Signal::Term
        };
        // Nodes going down with the fault, and coming back on their own time.
        let outages = Outage::draw(
            &mut self.rng,
            self.nodes.len(),
            ZONES.len(),
            ZONE_OUTAGE_CHANCE,
        );
        self.start_outages(&outages, &mut notes);
        let fault = match kind {
            // The leader, just after a window edge.
            Kind::LeaderMidEdge => {
                let after = self
                    .rng
                    .duration(Duration::ZERO, Duration::from_millis(800));
                self.until_edge(after).await;
                let id = self.checker.fault_started("leader killed mid-edge");
                if let Some(i) = self.leader() {
                    self.kill(i, Signal::Kill).await?;
                    self.tally.leader_kills += 1;
                    self.tally.mid_edge += 1;
                    notes.push(format!("SIGKILL leader r{i} mid-edge"));
                }
                id
            }
            // The leader, just after one of its writes.
            Kind::LeaderMidWrite => {
                let wrote = self.checker.next_write(Duration::from_secs(60)).await;
                let id = self.checker.fault_started("leader killed mid-write");
                if let Some(i) = self.leader() {
                    self.kill(i, Signal::Kill).await?;
                    self.tally.leader_kills += 1;
                    self.tally.mid_write += u64::from(wrote);
                    notes.push(format!("SIGKILL leader r{i} mid-write"));
                }
                id
            }
            // A random replica, SIGKILL or SIGTERM.
            Kind::Replica => {
                let id = self.checker.fault_started("replica killed");
                self.kill(pick, signal).await?;
                notes.push(format!("{signal:?} r{pick}"));
                id
            }
            // The leader, then its successor as soon as it leads.
            Kind::DoubleKill => {
                let id = self.checker.fault_started("two leaders killed");
                for _ in 0..2 {
                    if let Ok(i) = self.wait_for_leader(Duration::from_secs(30)).await {
                        self.kill(i, Signal::Kill).await?;
                        self.tally.leader_kills += 1;
                        notes.push(format!("SIGKILL leader r{i}"));
                    }
                }
                id
            }
            // The API server and etcd, also across an edge.
            Kind::ApiCrash => {
                let across = self.rng.chance(0.5);
                let down = self
                    .rng
                    .duration(Duration::from_secs(2), Duration::from_secs(8));
                if across {
                    // Down from just before the edge until after it.
                    if let Some(edge) = self.checker.next_edge() {
                        let wait = edge.duration_since(Timestamp::now())
                            - SignedDuration::try_from(down / 2).unwrap_or_default();
                        tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
                    }
                    self.tally.api_crashes_across_edge += 1;
                }
                let id = self.checker.fault_started("API server crash");
                tokio::task::block_in_place(|| self.server.kill())?;
                tokio::time::sleep(down).await;
                tokio::task::block_in_place(|| self.server.restart())?;
                self.tally.api_crashes += 1;
                notes.push(format!(
                    "API server SIGKILLed, down {:.1}s{}",
                    down.as_secs_f64(),
                    if across { " across an edge" } else { "" }
                ));
                id
            }
            // A proxy fault on the leader or another replica.
            Kind::Proxy => {
                let faults = [
                    Fault::Latency(
                        self.rng
                            .duration(Duration::from_millis(100), Duration::from_millis(1500)),
                    ),
                    Fault::Stall,
                    Fault::ResetMidResponse,
                    Fault::Blackhole,
                ];
                let f = self.rng.below(faults.len());
                let target = if self.rng.chance(0.6) {
                    self.leader().unwrap_or(pick)
                } else {
                    pick
                };
                let label = format!("{:?}", faults[f]);
                let name = label.split('(').next().unwrap_or_default().to_string();
                let id = self.checker.fault_started("proxy fault");
                self.replicas[target].proxy.set(faults[f].clone());
                notes.push(format!(
                    "proxy {label} on r{target} for {:.0}s",
                    hold.as_secs_f64()
                ));
                tokio::time::sleep(hold).await;
                self.replicas[target].proxy.set(Fault::None);
                *self.tally.proxy_faults.entry(name).or_default() += 1;
                id
            }
            // The leader partitioned from the API server, the others not.
            Kind::Partition => {
                let target = self.leader().unwrap_or(pick);
                let id = self.checker.fault_started("partition");
                self.replicas[target].proxy.set(Fault::Partition);
                notes.push(format!(
                    "r{target} partitioned for {:.0}s",
                    hold.as_secs_f64()
                ));
                tokio::time::sleep(hold).await;
                self.replicas[target].proxy.set(Fault::None);
                self.tally.partitions += 1;
                id
            }
            // Replica 0's wall clock steps, most times while it leads.
            Kind::ClockJump => {
                let make_leader = self.rng.chance(0.6);
                let step = [3600, -3600, 600, -600, 86_400][self.rng.below(5)];
                let id = self.checker.fault_started("clock jump");
                if make_leader {
                    for _ in 0..self.replicas.len() {
                        match self.wait_for_leader(Duration::from_secs(30)).await {
                            Ok(0) | Err(_) => break,
                            Ok(i) => {
                                self.kill(i, Signal::Term).await?;
                                self.tally.leader_kills += 1;
                                notes.push(format!("SIGTERM leader r{i}"));
                            }
                        }
                    }
                }
                let clock = self.replicas[0].clock.as_mut().expect("replica 0's clock");
                clock.set_offset(step)?;
                notes.push(format!(
                    "r0's clock {step:+}s for {:.0}s",
                    hold.as_secs_f64()
                ));
                tokio::time::sleep(hold).await;
                let clock = self.replicas[0].clock.as_mut().expect("replica 0's clock");
                clock.set_offset(0)?;
                // libfaketime reads the file again within a second.
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.tally.clock_jumps += 1;
                id
            }
        };
        if edit {
            notes.push(format!("edit {}", self.edit_windows().await?));
        }
        if extra_kill
            && let Some(i) = (0..self.replicas.len())
                .map(|k| (pick + k) % self.replicas.len())
                .find(|&i| self.replicas[i].process.is_some() && Some(i) != self.leader())
        {
            self.kill(i, Signal::Kill).await?;
            notes.push(format!("SIGKILL r{i}"));
        }
        // Killed replicas come back after a pod's restart delay.
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.restart_down().await;
        self.checker.fault_ended(fault);
        self.tally.fault_seconds += began.elapsed().as_secs_f64();
        self.say(&format!(
            "episode {}: {}",
            self.tally.episodes,
            notes.join("; ")
        ));
        Ok(())
    }

    /// Starts `outages` in the background (none is a fault for the checker: kumaco must
    /// keep every promise while nodes come and go).
    fn start_outages(&mut self, outages: &[Outage], notes: &mut Vec<String>) {
        self.outages.retain(|h| !h.is_finished());
        if outages.len() > 3 {
            self.tally.zone_outages += 1;
        }
        let mut said = Vec::new();
        for outage in outages {
            let name = self.nodes[outage.node].0.clone();
            *self
                .tally
                .outages
                .entry(outage.down.name().to_string())
                .or_default() += 1;
            said.push(format!(
                "{} {} {:.0}s",
                name.rsplit('-').next().unwrap_or_default(),
                outage.down.name(),
                outage.length.as_secs_f64()
            ));
            self.outages.push(outage.spawn(self.client.clone(), name));
        }
        notes.push(format!("down: {}", said.join(", ")));
    }

    /// The quiet gap after an episode, in which the checker compares with the plan.
    async fn quiet_gap(&mut self) {
        let gap = Duration::from_secs(self.args.settle)
            + self
                .rng
                .duration(Duration::from_secs(5), Duration::from_secs(15));
        tokio::time::sleep(gap).await;
    }

    /// The quiet tail: the API server's applies against the node versions kumaco changed.
    async fn tail(&mut self) -> Result<(Value, Option<String>)> {
        self.say("faults over: quiet tail");
        tokio::time::sleep(Duration::from_secs(self.args.settle)).await;
        let start = self.quiescent_point().await?;
        tokio::time::sleep(Duration::from_secs(self.args.tail)).await;
        let end = self.quiescent_point().await?;
        let (Some((a0, c0)), Some((a1, c1))) = (start, end) else {
            self.say("no quiet moment found for the write count: not checked");
            return Ok((json!({ "checked": false }), None));
        };
        let (applies, changes) = (a1 - a0, c1 - c0);
        self.say(&format!(
            "tail: {applies} applies, {changes} node versions changed by kumaco"
        ));
        let violation = (applies != changes).then(|| {
            format!(
                "writes differ from transitions in the quiet tail: {applies} applies of \
                 nodes/status, {changes} node versions in which kumaco's conditions changed"
            )
        });
        let figures = json!({ "checked": true, "applies": applies, "changes": changes });
        Ok((figures, violation))
    }

    /// Waits (up to two minutes: the last episode's outages last up to 90 s) for a moment
    /// when nothing moves, and reads the API server's count of successful applies and the
    /// checker's count of changes then.
    async fn quiescent_point(&self) -> Result<Option<(u64, u64)>> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if self.checker.quiescent(Duration::from_secs(2)) {
                let metrics = apiserver_metrics(&self.client).await?;
                let (all, failed) = node_status_requests(&metrics, "APPLY");
                let changes = self.checker.counts().kumaco_changes;
                // Still nothing moved while the metrics were read.
                if self.checker.quiescent(Duration::from_secs(2)) {
                    return Ok(Some((all - failed, changes)));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(None)
    }
}

fn print_figures(f: &Value) {
    let t = &f["faults"];
    println!();
    println!("seed                         {}", f["seed"]);
    println!(
        "minutes                      {:.1}",
        f["minutes"].as_f64().unwrap_or(0.0)
    );
    println!(
        "kills (SIGKILL / SIGTERM)    {} ({} / {}), of the leader {}, mid-edge {}, mid-write {}",
        f["kills"], t["sigkill"], t["sigterm"], t["leader_kills"], t["mid_edge"], t["mid_write"]
    );
    println!(
        "API server crashes           {} ({} across an edge)",
        t["api_crashes"], t["api_crashes_across_edge"]
    );
    println!(
        "proxy faults / partitions    {} / {}",
        t["proxy_faults"], t["partitions"]
    );
    println!(
        "clock jumps / window edits   {} / {}",
        t["clock_jumps"], t["window_edits"]
    );
    println!(
        "fault minutes                {:.1}",
        t["fault_seconds"].as_f64().unwrap_or(0.0) / 60.0
    );
    println!("nodes rebooted               {}", f["reboots"]);
    println!(
        "max in progress (ceiling)    {} ({})",
        f["max_in_progress"], f["ceiling"]
    );
    let c = &f["checker"];
    println!(
        "nodes taken down: outages    {} ({} zone outages); drainer {}",
        t["outages"], t["zone_outages"], f["drainer"]
    );
    println!("seen going unavailable       {}", c["went_unavailable"]);
    println!(
        "most unavailable / disrupted {} / {} overall, {} in a zone (ceilings {} / {}); events above a ceiling {}",
        c["max_unavailable"],
        c["max_disrupted"],
        c["max_disrupted_in_group"],
        f["ceiling"],
        f["zone_ceiling"],
        c["events_above_ceiling"]
    );
    println!(
        "starts checked (in re-lists) {} ({}); at the last slot {}, with unavailable counted {}, raced {}",
        c["starts_checked"],
        c["starts_in_relists"],
        c["starts_at_last_slot"],
        c["starts_with_unavailable_counted"],
        c["starts_raced"]
    );
    println!(
        "checks: plan / writes        {} / {}",
        c["plan_checks"], c["writes_checked"]
    );
    println!("max edge delay (quiet)       {} ms", c["max_edge_delay_ms"]);
    println!("tail                         {}", f["tail"]);
    println!("violations                   {}", f["violations"]);
}
