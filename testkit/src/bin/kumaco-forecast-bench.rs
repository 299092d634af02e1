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
//! some nodes do not fit, against the last real end) and the target it is held to (within 10% of the rollout or one median
//! duration, whichever is larger); and whether the nodes the forecast says fit in the
//! window started in it and those it says do not fit did not. Nothing is tuned to the
//! outcome: the figures are what the run gives.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use testkit::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED};
use testkit::fleet::{
    self, Kumaco, KumacoOptions, ZONES, create_namespace, create_nodes, load_average, node_name,
    put_window,
};
use testkit::kured::{Draws, Happened, Kured, KuredSpec, Spread};
use testkit::nodes::condition;
use testkit::{ApiServer, Scope};
use tokio::task::JoinHandle;

const NAMESPACE: &str = "forecast-bench";
/// kumaco's field manager and log directory, and the windows' field manager.
const NAME: &str = "kumaco-forecast-bench";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The forecast is taken this long before the window opens: the cluster is then as it
/// is at the opening, and no pass of kumaco's races the listing.
const FORECAST_AHEAD: Duration = Duration::from_secs(3);

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum SpreadKind {
    Lognormal,
    Uniform,
}

/// How well the forecast predicts a real rollout (see the module docs).
#[derive(clap::Parser)]
struct Args {
    /// Nodes in the cluster, in 4 zones.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(4..))]
    nodes: u64,
    /// Seed of the draws (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Median downtime of a reboot (Go duration).
    #[arg(long, default_value = "12s")]
    reboot: String,
    /// Spread of the downtime: log-normal sigma, or uniform's ± fraction.
    #[arg(long, default_value_t = 0.35)]
    reboot_sigma: f64,
    /// Median delay from a node's new boot ID to its daemons running (then uncordoned).
    #[arg(long, default_value = "3s")]
    recovery: String,
    #[arg(long, default_value_t = 0.3)]
    recovery_sigma: f64,
    #[arg(long, value_enum, default_value_t = SpreadKind::Lognormal)]
    spread: SpreadKind,
    /// kumaco's --max-in-progress.
    #[arg(long, default_value = "10")]
    max_in_progress: String,
    /// kumaco's --max-in-progress-per=topology.kubernetes.io/zone=Z.
    #[arg(long, default_value = "3")]
    zone_max: String,
    /// kumaco's --start-interval (Go duration), or `off`.
    #[arg(long, default_value = "1s")]
    start_interval: String,
    /// The measured rollouts' windows (Go durations), one rollout each, in order.
    #[arg(long, default_value = "10m,2m")]
    window: String,
    /// Seconds from creating a measured window to its start.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(5..))]
    lead: u64,
    /// The detectors' period (kured's --period).
    #[arg(long, default_value = "5s")]
    period: String,
    /// The kumaco binary.
    #[arg(long, default_value = fleet::DEFAULT_KUMACO)]
    kumaco: PathBuf,
    /// Where the results go.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/kumaco-forecast-bench.json"))]
    json: PathBuf,
}

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

/// A Go duration (`12s`, `1m30s`, `500ms`, `2.5s`).
fn parse_duration(s: &str) -> Result<Duration> {
    let mut total = 0.0f64;
    let mut rest = s.trim();
    if rest.is_empty() {
        bail!("empty duration");
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .with_context(|| format!("{s:?}: a number without a unit"))?;
        let value: f64 = rest[..digits]
            .parse()
            .with_context(|| format!("{s:?}: not a duration"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            u => bail!("{s:?}: unknown unit {u:?}"),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_secs_f64(total))
}

fn spread(kind: SpreadKind, median: Duration, sigma: f64) -> Spread {
    match kind {
        SpreadKind::Lognormal => Spread::LogNormal { median, sigma },
        SpreadKind::Uniform => Spread::Uniform {
            low: median.mul_f64((1.0 - sigma).max(0.0)),
            high: median.mul_f64(1.0 + sigma),
        },
    }
}

/// kumaco's rule for `--max-in-progress`: a count, or a percentage of the nodes.
fn ceiling(spec: &str, nodes: usize) -> Result<usize> {
    match spec.strip_suffix('%') {
        Some(p) => Ok((nodes * p.parse::<usize>().context("P%")? / 100).max(1)),
        None => spec.parse().context("a count or P%"),
    }
}

// ---------------------------------------------------------------------------------------
// The watch

/// A node as the recorder last saw it.
#[derive(Clone, Debug, Default)]
struct NodeNow {
    /// `MaintenanceInProgress`: status, reason, message.
    mip: Option<(String, String, String)>,
    cordoned: bool,
    reboot_required: Option<String>,
    boot: Option<String>,
}

#[derive(Clone, Debug)]
enum What {
    /// `MaintenanceInProgress` turned True; the boot ID then.
    Started { boot: Option<String> },
    /// It turned False from True.
    Ended { reason: String, message: String },
    /// Uncordoned (after having been cordoned).
    Uncordoned,
}

#[derive(Clone, Debug)]
struct Seen {
    at: Timestamp,
    node: String,
    what: What,
}

#[derive(Default)]
struct Recorded {
    now: BTreeMap<String, NodeNow>,
    events: Vec<Seen>,
    relists: usize,
}

/// Watches the scope's nodes; every transition with the time it was received.
struct Recorder {
    state: Arc<Mutex<Recorded>>,
    task: JoinHandle<()>,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Recorder {
    async fn start(client: &kube::Client, selector: &str, n: usize) -> Result<Recorder> {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().labels(selector);
        let state = Arc::new(Mutex::new(Recorded::default()));
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                let mut events = watcher(api, config).default_backoff().boxed();
                let mut listed = false;
                while let Some(event) = events.next().await {
                    let at = Timestamp::now();
                    let node = match event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => n,
                        Ok(watcher::Event::InitDone) => {
                            if listed {
                                state.lock().unwrap().relists += 1;
                            }
                            listed = true;
                            continue;
                        }
                        _ => continue,
                    };
                    let name = node.metadata.name.clone().unwrap_or_default();
                    let now = NodeNow {
                        mip: condition(&node, MAINTENANCE_IN_PROGRESS).map(|c| {
                            (
                                c.status.clone(),
                                c.reason.clone().unwrap_or_default(),
                                c.message.clone().unwrap_or_default(),
                            )
                        }),
                        cordoned: node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true),
                        reboot_required: condition(&node, REBOOT_REQUIRED)
                            .map(|c| c.status.clone()),
                        boot: node
                            .status
                            .as_ref()
                            .and_then(|s| s.node_info.as_ref())
                            .map(|i| i.boot_id.clone()),
                    };
                    // No await while the lock is held.
                    let mut state = state.lock().unwrap();
                    let before = state.now.get(&name).cloned().unwrap_or_default();
                    let status = |n: &NodeNow| n.mip.as_ref().map(|m| m.0 == "True");
                    let mut seen = |what| {
                        state.events.push(Seen {
                            at,
                            node: name.clone(),
                            what,
                        })
                    };
                    match (status(&before), status(&now)) {
                        (Some(true), Some(true)) => {}
                        (_, Some(true)) => seen(What::Started {
                            boot: now.boot.clone(),
                        }),
                        (Some(true), _) => {
                            let (_, reason, message) = now.mip.clone().unwrap_or_default();
                            seen(What::Ended { reason, message })
                        }
                        _ => {}
                    }
                    if before.cordoned && !now.cordoned {
                        seen(What::Uncordoned);
                    }
                    state.now.insert(name, now);
                }
            }
        });
        let recorder = Recorder { state, task };
        let started = Instant::now();
        while recorder.state.lock().unwrap().now.len() < n {
            if started.elapsed() > Duration::from_secs(60) {
                bail!("the recorder's watch did not list the {n} nodes in time");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(recorder)
    }

    fn with<T>(&self, f: impl FnOnce(&Recorded) -> T) -> T {
        f(&self.state.lock().unwrap())
    }

    /// Polls `check` every 500 ms until it is true, at most `timeout`; `what` names it.
    async fn wait(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Recorded) -> Result<(), String>,
    ) -> Result<f64> {
        let started = Instant::now();
        loop {
            let outcome = self.with(&check);
            match outcome {
                Ok(()) => return Ok(started.elapsed().as_secs_f64()),
                Err(e) if started.elapsed() > timeout => {
                    bail!("{what}: not within {timeout:?}: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}

/// A node's maintenance in a rollout, as the recorder saw it.
#[derive(Clone, Debug, Default)]
struct Real {
    start: Option<Timestamp>,
    boot: Option<String>,
    end: Option<Timestamp>,
    end_reason: String,
    end_message: String,
    back: Option<Timestamp>,
}

/// Each node's first maintenance that started at or after `from`.
fn reals(r: &Recorded, from: Timestamp) -> BTreeMap<String, Real> {
    let mut out: BTreeMap<String, Real> =
        r.now.keys().map(|n| (n.clone(), Real::default())).collect();
    for e in r.events.iter().filter(|e| e.at >= from) {
        let Some(real) = out.get_mut(&e.node) else {
            continue;
        };
        match &e.what {
            What::Started { boot } if real.start.is_none() => {
                real.start = Some(e.at);
                real.boot = boot.clone();
            }
            What::Ended { reason, message } if real.start.is_some() && real.end.is_none() => {
                real.end = Some(e.at);
                real.end_reason = reason.clone();
                real.end_message = message.clone();
            }
            What::Uncordoned if real.end.is_some() && real.back.is_none() => {
                real.back = Some(e.at);
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The run

struct Setup<'a> {
    args: &'a Args,
    client: kube::Client,
    server: &'a ApiServer,
    scope: Scope,
    names: Vec<String>,
    kured: Kured,
    recorder: Recorder,
    draws: Draws,
    policy: Vec<String>,
    ceiling: usize,
    /// A generous bound for one rollout.
    rollout_timeout: Duration,
}

async fn run(args: &Args) -> Result<Value> {
    let n = args.nodes as usize;
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64 % 1_000_000_000)
            .unwrap_or(1)
    });
    let reboot = parse_duration(&args.reboot).context("--reboot")?;
    let recovery = parse_duration(&args.recovery).context("--recovery")?;
    let period = parse_duration(&args.period).context("--period")?;
    let windows: Vec<String> = args
        .window
        .split(',')
        .map(|w| w.trim().to_string())
        .collect();
    for w in &windows {
        parse_duration(w).context("--window")?;
    }
    let draws = Draws {
        seed,
        reboot: spread(args.spread, reboot, args.reboot_sigma),
        daemon_delay: spread(args.spread, recovery, args.recovery_sigma),
    };
    let ceiling = ceiling(&args.max_in_progress, n)?;
    let mut policy = vec![
        "--in-progress".to_string(),
        format!("--require-condition={REBOOT_REQUIRED}"),
        format!("--max-in-progress={}", args.max_in_progress),
        format!("--max-in-progress-per={ZONE_LABEL}={}", args.zone_max),
    ];
    if args.start_interval != "off" {
        policy.push(format!("--start-interval={}", args.start_interval));
    }
    let load_start = load_average();
    println!(
        "kumaco-forecast-bench: {n} nodes, seed {seed}, reboot {:?} median (sigma {}), daemons' \
         restart {:?} median (sigma {}), {:?}; kumaco {}; windows {}; load average {load_start}",
        reboot,
        args.reboot_sigma,
        recovery,
        args.recovery_sigma,
        args.spread,
        policy.join(" "),
        windows.join(", "),
    );
    let server = ApiServer::start_fresh()?;
    let client = server.client().await?;
    let scope = Scope::new("fcast");
    let t0 = Instant::now();
    create_namespace(&client, NAMESPACE).await?;
    create_nodes(&client, &scope, n).await?;
    let names: Vec<String> = (0..n).map(|i| node_name(&scope, i)).collect();
    let needs: Vec<(String, u32)> = names.iter().map(|n| (n.clone(), 1)).collect();
    let spec = KuredSpec {
        period,
        reboot,
        daemon_delay: recovery,
        in_progress: MAINTENANCE_IN_PROGRESS.into(),
    };
    let kured = Kured::start_drawn(&client, &needs, spec, draws).await?;
    let recorder = Recorder::start(&client, &scope.selector(), n).await?;
    println!(
        "setup: {n} nodes with kured's daemons in {:.1}s",
        t0.elapsed().as_secs_f64()
    );
    let mut kumaco = Kumaco::spawn(
        &args.kumaco,
        &server,
        &scope,
        &KumacoOptions {
            namespace: NAMESPACE,
            name: NAME,
            extra_args: policy.clone(),
        },
    )
    .await?;
    kumaco.wait_ready(READY_TIMEOUT).await?;
    println!("kumaco ready; log {}", kumaco.log_path().display());

    // Each slot turns over in about a p90 reboot plus a p90 recovery and latencies;
    // three times that, plus the longest window, is generous.
    let p90 = |s: &Spread| match *s {
        Spread::Fixed(d) => d,
        Spread::LogNormal { median, sigma } => median.mul_f64((1.2816 * sigma).exp()),
        Spread::Uniform { high, .. } => high,
    };
    let turn = p90(&draws.reboot) + p90(&draws.daemon_delay) + Duration::from_secs(3);
    let longest = windows
        .iter()
        .filter_map(|w| parse_duration(w).ok())
        .max()
        .unwrap_or_default();
    let rollout_timeout = turn.mul_f64(3.0 * (n as f64 / ceiling as f64).ceil() + 3.0)
        + longest
        + Duration::from_secs(120);
    let setup = Setup {
        args,
        client: client.clone(),
        server: &server,
        scope,
        names,
        kured,
        recorder,
        draws,
        policy,
        ceiling,
        rollout_timeout,
    };

    let warm = warm_up(&setup).await?;
    let mut rollouts = Vec::new();
    for (k, w) in windows.iter().enumerate() {
        let last = k + 1 == windows.len();
        let r = measure(&setup, k, w, last).await?;
        print_rollout(&r);
        rollouts.push(r);
        if kumaco.exited().is_some() {
            bail!("kumaco died; log {}", kumaco.log_path().display());
        }
    }
    let logs = kumaco.log_levels()?.clone();
    let relists = setup.recorder.with(|r| r.relists);
    Ok(json!({
        "nodes": n,
        "seed": seed,
        "reboot": { "median_s": reboot.as_secs_f64(), "sigma": args.reboot_sigma },
        "recovery": { "median_s": recovery.as_secs_f64(), "sigma": args.recovery_sigma },
        "spread": format!("{:?}", args.spread).to_lowercase(),
        "detector_period_s": period.as_secs_f64(),
        "kumaco_flags": setup.policy,
        "kumaco": args.kumaco,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "warm_up": warm,
        "rollouts": rollouts,
        "kumaco_log": { "path": kumaco.log_path(), "warn": logs.warn, "error": logs.error, "first": logs.first },
        "recorder_relists": relists,
    }))
}

/// The warm-up: every node rebooted once in a long window, then the window deleted and
/// the detectors' `RebootRequired=False` seen on every node.
async fn warm_up(s: &Setup<'_>) -> Result<Value> {
    let start = whole_second_in(3);
    put_window(
        &s.client,
        NAMESPACE,
        NAME,
        "warm-up",
        &[
            ("startTime", &start.to_string()),
            ("duration", "3h"),
            ("nodeSelector", &s.scope.selector()),
        ],
    )
    .await?;
    println!("warm-up: window warm-up opens at {start}");
    let secs = s
        .recorder
        .wait(
            "every node rebooted once and recovered",
            s.rollout_timeout,
            |r| {
                let not_yet = r
                    .now
                    .values()
                    .filter(|n| !recovered_and_recorded(n))
                    .count();
                (not_yet == 0)
                    .then_some(())
                    .ok_or(format!("{not_yet} not yet"))
            },
        )
        .await?;
    println!("warm-up: done {secs:.0}s after the window was created");
    delete_window(&s.client, "warm-up").await?;
    wait_requirement(s, "False", &s.names).await?;
    Ok(json!({ "window_start": start.to_string(), "seconds": secs }))
}

/// In service after a maintenance whose duration and recovery kumaco recorded.
fn recovered_and_recorded(n: &NodeNow) -> bool {
    !n.cordoned
        && n.mip
            .as_ref()
            .is_some_and(|(s, _, m)| s == "False" && m.contains("recovered after"))
}

async fn delete_window(client: &kube::Client, name: &str) -> Result<()> {
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting window {name}"))?;
    Ok(())
}

/// Waits until `nodes` show `RebootRequired=status`.
async fn wait_requirement(s: &Setup<'_>, status: &str, nodes: &[String]) -> Result<()> {
    let period = parse_duration(&s.args.period)?;
    let secs = s
        .recorder
        .wait(
            &format!("{REBOOT_REQUIRED}={status} on every node"),
            period * 4 + Duration::from_secs(120),
            |r| {
                let not_yet = nodes
                    .iter()
                    .filter(|n| {
                        r.now.get(*n).and_then(|n| n.reboot_required.as_deref()) != Some(status)
                    })
                    .count();
                (not_yet == 0)
                    .then_some(())
                    .ok_or(format!("{not_yet} not yet"))
            },
        )
        .await?;
    println!("  {REBOOT_REQUIRED}={status} on every node after {secs:.1}s");
    Ok(())
}

/// The next whole second at least `secs` seconds from now.
fn whole_second_in(secs: i64) -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second() + secs + 1).expect("a valid time")
}

fn secs(d: SignedDuration) -> f64 {
    d.as_secs_f64()
}

/// One measured rollout: every node needing a reboot again, a one-shot window of length
/// `window`, the forecast taken before it opens, the real rollout to its end.
async fn measure(s: &Setup<'_>, k: usize, window: &str, last: bool) -> Result<Value> {
    let name = format!("rollout-{k}");
    println!("rollout {k}: window {window}");
    // A node that did not fit in an earlier rollout still needs its reboot.
    for (node, needs) in s.kured.needs() {
        if needs == 0 {
            s.kured.need(&node, 1);
        }
    }
    wait_requirement(s, "True", &s.names).await?;
    let start = whole_second_in(s.args.lead as i64);
    let length = SignedDuration::try_from(parse_duration(window)?)?;
    let end = start + length;
    put_window(
        &s.client,
        NAMESPACE,
        NAME,
        &name,
        &[
            ("startTime", &start.to_string()),
            ("duration", window),
            ("nodeSelector", &s.scope.selector()),
        ],
    )
    .await?;
    let reboots_before = reboots(&s.kured);

    // The forecast, FORECAST_AHEAD before the opening.
    let take_at = start - SignedDuration::try_from(FORECAST_AHEAD)?;
    let wait = take_at.duration_since(Timestamp::now());
    if wait.is_positive() {
        tokio::time::sleep(wait.unsigned_abs()).await;
    }
    let taken = Timestamp::now();
    let (forecast, plan_seconds) = forecast(s).await?;
    println!("  forecast taken at {taken} in {plan_seconds:.2}s; window {start} to {end}");
    if Timestamp::now() >= start {
        println!("  WARNING: the forecast took until after the window's start");
    }

    // The real rollout, to its end: every node that started back in service with its
    // records, and every node started or the window over.
    let from = start - SignedDuration::from_secs(1);
    let secs_taken = s
        .recorder
        .wait("the rollout's end", s.rollout_timeout, |r| {
            let reals = reals(r, from);
            let started = reals.values().filter(|x| x.start.is_some()).count();
            let open = reals
                .iter()
                .filter(|(n, x)| {
                    x.start.is_some()
                        && (x.back.is_none() || !r.now.get(*n).is_some_and(recovered_and_recorded))
                })
                .count();
            let over = Timestamp::now() >= end + SignedDuration::from_secs(2);
            if open == 0 && (started == reals.len() || over) {
                Ok(())
            } else {
                Err(format!("{started} started, {open} not back in service"))
            }
        })
        .await?;
    println!("  rollout over {secs_taken:.0}s after the forecast");
    let recorded = s.recorder.with(|r| (reals(r, from), r.events.clone()));
    delete_window(&s.client, &name).await?;
    let rebooted: Vec<String> = recorded
        .0
        .iter()
        .filter(|(_, x)| x.start.is_some())
        .map(|(n, _)| n.clone())
        .collect();
    if !last {
        wait_requirement(s, "False", &rebooted).await?;
    }
    let mut reboots = reboots(&s.kured);
    for (node, before) in reboots_before {
        *reboots.entry(node).or_default() -= before;
    }
    Ok(analyse(
        s,
        &Measured {
            name: name.clone(),
            window: window.to_string(),
            start,
            end,
            taken,
            plan_seconds,
            forecast,
            reals: recorded.0,
            events: recorded.1,
            reboots,
        },
    ))
}

/// How many times each node rebooted so far (from one copy of the daemons' log).
fn reboots(kured: &Kured) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, node, what) in kured.log() {
        if what == Happened::Rebooted {
            *out.entry(node).or_default() += 1;
        }
    }
    out
}

/// `kumaco plan --forecast -o json` against the live cluster with the run's policy flags;
/// its JSON and how long it took.
async fn forecast(s: &Setup<'_>) -> Result<(Value, f64)> {
    let started = Instant::now();
    let out = tokio::process::Command::new(&s.args.kumaco)
        .arg("plan")
        .arg("--forecast")
        .args(["-o", "json", "--for", "1h"])
        .arg(format!("--namespace={NAMESPACE}"))
        .arg("--kubeconfig")
        .arg(s.server.kubeconfig())
        .arg(format!("--node-selector={}", s.scope.selector()))
        .args(&s.policy)
        .output()
        .await
        .context("running kumaco plan --forecast")?;
    let took = started.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "kumaco plan --forecast failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v: Value = serde_json::from_slice(&out.stdout).context("kumaco plan's JSON")?;
    Ok((v, took))
}

struct Measured {
    /// The window ConfigMap's name, and its duration.
    name: String,
    window: String,
    start: Timestamp,
    end: Timestamp,
    taken: Timestamp,
    plan_seconds: f64,
    forecast: Value,
    reals: BTreeMap<String, Real>,
    events: Vec<Seen>,
    reboots: BTreeMap<String, usize>,
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn stats(values: &[f64]) -> Value {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    json!({
        "n": v.len(),
        "median": percentile(&v, 0.5),
        "p90": percentile(&v, 0.9),
        "mean": mean,
        "min": v.first(),
        "max": v.last(),
    })
}

fn time(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

fn go_secs(v: &Value) -> Option<f64> {
    parse_duration(v.as_str()?).ok().map(|d| d.as_secs_f64())
}

/// A node's forecast placement, (start, end), when it starts in window `name`.
fn placed(p: &Value, name: &str) -> Option<(Timestamp, Option<Timestamp>)> {
    let window = p["occurrence"]["window"].as_str()?;
    let ours = window == name || window.ends_with(&format!("/{name}"));
    if p["state"] != "Starts" || !ours {
        return None;
    }
    Some((time(&p["start"])?, time(&p["end"])))
}

fn analyse(s: &Setup<'_>, m: &Measured) -> Value {
    let window_name = &m.name;
    let f = &m.forecast;
    let fnodes: BTreeMap<String, &Value> = f["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["name"].as_str()?.to_string(), n)))
        .collect();
    let learned_m = go_secs(&f["durations"]["maintenance"]["median"]).unwrap_or(f64::NAN);
    let mut rows = Vec::new();
    let (mut end_err, mut start_err, mut dur_err, mut abs_end) = (vec![], vec![], vec![], vec![]);
    let (mut real_dur, mut real_rec, mut overhead, mut rec_overhead) =
        (vec![], vec![], vec![], vec![]);
    let mut within_p90 = 0usize;
    // Fit: (forecast fits, really started in the window).
    let mut fit = BTreeMap::<(bool, bool), Vec<String>>::new();
    let mut fit90 = BTreeMap::<(bool, bool), usize>::new();
    let mut last_real: Option<Timestamp> = None;
    let mut last_fc: Option<Timestamp> = None;
    for (i, node) in s.names.iter().enumerate() {
        let real = m.reals.get(node).cloned().unwrap_or_default();
        let fc = fnodes.get(node);
        let med = fc.and_then(|v| placed(&v["median"], window_name));
        let p90 = fc.and_then(|v| placed(&v["p90"], window_name));
        let started_in = real.start.is_some_and(|t| t < m.end);
        fit.entry((med.is_some(), started_in))
            .or_default()
            .push(node.clone());
        *fit90.entry((p90.is_some(), started_in)).or_default() += 1;
        if let Some(e) = real.end {
            last_real = Some(last_real.map_or(e, |l: Timestamp| l.max(e)));
        }
        if let Some((_, Some(e))) = med {
            last_fc = Some(last_fc.map_or(e, |l: Timestamp| l.max(e)));
        }
        let boot_k = real
            .boot
            .as_deref()
            .and_then(|b| b.rsplit_once("-boot-"))
            .and_then(|(_, k)| k.parse::<u32>().ok());
        let drawn_reboot = boot_k.map(|k| s.draws.reboot(node, k).as_secs_f64());
        let drawn_delay = boot_k.map(|k| s.draws.daemon_delay(node, k + 1).as_secs_f64());
        let dur = real
            .start
            .zip(real.end)
            .map(|(a, b)| secs(b.duration_since(a)));
        let rec = real
            .end
            .zip(real.back)
            .map(|(a, b)| secs(b.duration_since(a)));
        real_dur.extend(dur);
        real_rec.extend(rec);
        if let (Some(d), Some(r)) = (dur, drawn_reboot) {
            overhead.push(d - r);
        }
        if let (Some(d), Some(r)) = (rec, drawn_delay) {
            rec_overhead.push(d - r);
        }
        let mut row = json!({
            "node": node,
            "zone": ZONES[i % ZONES.len()],
            "forecast_start": med.map(|p| p.0.to_string()),
            "forecast_end": med.and_then(|p| p.1).map(|t| t.to_string()),
            "forecast_end_p90": p90.and_then(|p| p.1).map(|t| t.to_string()),
            "real_start": real.start.map(|t| t.to_string()),
            "real_end": real.end.map(|t| t.to_string()),
            "real_back_in_service": real.back.map(|t| t.to_string()),
            "end_reason": real.end_reason,
            "end_message": real.end_message,
            "drawn_reboot_s": drawn_reboot,
            "drawn_daemon_delay_s": drawn_delay,
            "reboots": m.reboots.get(node),
        });
        if let (Some((fs, Some(fe))), Some(rs), Some(re)) = (med, real.start, real.end) {
            let e = secs(re.duration_since(fe));
            let es = secs(rs.duration_since(fs));
            end_err.push(e);
            abs_end.push(e.abs());
            start_err.push(es);
            dur_err.push(e - es);
            row["end_error_s"] = json!(e);
            row["start_error_s"] = json!(es);
            if p90
                .and_then(|p| p.1)
                .is_some_and(|p| re <= p + SignedDuration::from_secs(1))
            {
                within_p90 += 1;
            }
        }
        rows.push(row);
    }
    let length = last_real.map_or(f64::NAN, |l| secs(l.duration_since(m.start)));
    let frac = |v: Option<f64>| v.map(|x| x / length);
    let mut abs_sorted = abs_end.clone();
    abs_sorted.sort_by(f64::total_cmp);
    let completion = time(&f["rollout"]["median"]["completion"]);
    let completion90 = time(&f["rollout"]["p90"]["completion"]);
    let expected = time(&f["rollout"]["expected"]["completion"]);
    // The expected completion; without it (durations that do not vary), the median
    // run's; with nodes that do not fit, the median run's last end.
    let fc_last = expected.or(completion).or(last_fc);
    let comp_err = fc_last
        .zip(last_real)
        .map(|(fc, r)| secs(r.duration_since(fc)));
    let median_err = completion
        .or(last_fc)
        .zip(last_real)
        .map(|(fc, r)| secs(r.duration_since(fc)));
    let bound = (0.1 * length).max(learned_m);
    let count = |a: bool, b: bool| fit.get(&(a, b)).map_or(0, Vec::len);
    let disagree: Vec<&String> = fit
        .iter()
        .filter(|((a, b), _)| a != b)
        .flat_map(|(_, v)| v)
        .collect();
    let most = most_in_progress(&m.events, m.start - SignedDuration::from_secs(1));
    let extra_reboots: Vec<(&String, &usize)> = m.reboots.iter().filter(|(_, r)| **r > 1).collect();
    json!({
        "window": m.window,
        "window_start": m.start.to_string(),
        "window_end": m.end.to_string(),
        "forecast_taken_at": m.taken.to_string(),
        "plan_seconds": m.plan_seconds,
        "learned": f["durations"],
        "real": {
            "started": m.reals.values().filter(|x| x.start.is_some()).count(),
            "started_in_window": m.reals.values().filter(|x| x.start.is_some_and(|t| t < m.end)).count(),
            "last_end": last_real.map(|t| t.to_string()),
            "length_s": length,
            "maintenance_s": stats(&real_dur),
            "recovery_s": stats(&real_rec),
            "maintenance_minus_drawn_reboot_s": stats(&overhead),
            "recovery_minus_drawn_daemon_delay_s": stats(&rec_overhead),
            "most_in_progress": most,
            "ceiling": s.ceiling,
            "nodes_rebooted_more_than_once": extra_reboots.len(),
        },
        "forecast": {
            "starts_in_window_median": count(true, true) + count(true, false),
            "does_not_fit_median": count(false, true) + count(false, false),
            "rollout_median": f["rollout"]["median"],
            "rollout_p90": f["rollout"]["p90"],
            "last_end_median": last_fc.map(|t| t.to_string()),
        },
        "node_end_error": {
            "n": end_err.len(),
            "abs_median_s": percentile(&abs_sorted, 0.5),
            "abs_p90_s": percentile(&abs_sorted, 0.9),
            "abs_median_fraction": frac(percentile(&abs_sorted, 0.5)),
            "abs_p90_fraction": frac(percentile(&abs_sorted, 0.9)),
            "signed_s": stats(&end_err),
            "start_error_s": stats(&start_err),
            "duration_error_s": stats(&dur_err),
            "real_end_by_p90_forecast_end": within_p90,
        },
        "completion": {
            "forecast": fc_last.map(|t| t.to_string()),
            "forecast_is": (if expected.is_some() { "rollout.expected.completion" } else if completion.is_some() { "rollout.median.completion" } else { "last forecast end (some nodes do not fit)" }),
            "expected_runs": f["rollout"]["expected"]["runs"],
            "expected_p90": f["rollout"]["expected"]["p90"],
            "median_run": completion.or(last_fc).map(|t| t.to_string()),
            "median_run_error_s": median_err,
            "median_run_error_fraction": frac(median_err),
            "forecast_p90": completion90.map(|t| t.to_string()),
            "real": last_real.map(|t| t.to_string()),
            "error_s": comp_err,
            "error_fraction": frac(comp_err),
            "target_s": bound,
            "within_target": comp_err.map(|e| e.abs() <= bound),
            "real_by_p90_completion": completion90.zip(last_real).map(|(p, r)| r <= p + SignedDuration::from_secs(1)),
        },
        "fit": {
            "fits_and_started": count(true, true),
            "fits_but_did_not_start": count(true, false),
            "does_not_fit_but_started": count(false, true),
            "does_not_fit_and_did_not_start": count(false, false),
            "all_agree": disagree.is_empty(),
            "disagreeing": disagree,
            "p90": {
                "fits_and_started": fit90.get(&(true, true)),
                "fits_but_did_not_start": fit90.get(&(true, false)),
                "does_not_fit_but_started": fit90.get(&(false, true)),
                "does_not_fit_and_did_not_start": fit90.get(&(false, false)),
            },
        },
        "nodes": rows,
    })
}

/// The most nodes `MaintenanceInProgress=True` at once, from `from`.
fn most_in_progress(events: &[Seen], from: Timestamp) -> usize {
    let mut now = std::collections::BTreeSet::new();
    let mut most = 0;
    for e in events.iter().filter(|e| e.at >= from) {
        match e.what {
            What::Started { .. } => {
                now.insert(e.node.as_str());
            }
            What::Ended { .. } => {
                now.remove(e.node.as_str());
            }
            What::Uncordoned => {}
        }
        most = most.max(now.len());
    }
    most
}

fn print_rollout(r: &Value) {
    let num = |v: &Value, d: usize| match v.as_f64() {
        Some(x) => format!("{x:.d$}"),
        None => "-".into(),
    };
    let pct = |v: &Value| match v.as_f64() {
        Some(x) => format!("{:.1}%", 100.0 * x),
        None => "-".into(),
    };
    let (real, e, c, fit, l) = (
        &r["real"],
        &r["node_end_error"],
        &r["completion"],
        &r["fit"],
        &r["learned"],
    );
    println!(
        "  window {} from {} to {}",
        r["window"], r["window_start"], r["window_end"]
    );
    println!(
        "  learned: maintenance {} / {} (median / p90, {} samples), recovery {} / {}",
        l["maintenance"]["median"],
        l["maintenance"]["p90"],
        l["maintenance"]["samples"],
        l["recovery"]["median"],
        l["recovery"]["p90"]
    );
    println!(
        "  real: {} started ({} in the window), maintenance {} / {} s, recovery {} / {} s (median / p90); \
         rollout {} s; most in progress {} (ceiling {}); nodes rebooted twice {}",
        real["started"],
        real["started_in_window"],
        num(&real["maintenance_s"]["median"], 1),
        num(&real["maintenance_s"]["p90"], 1),
        num(&real["recovery_s"]["median"], 1),
        num(&real["recovery_s"]["p90"], 1),
        num(&real["length_s"], 0),
        real["most_in_progress"],
        real["ceiling"],
        real["nodes_rebooted_more_than_once"],
    );
    println!(
        "  per-node end error (real - forecast, {} nodes): |error| median {} s ({}), p90 {} s ({}); \
         signed mean {} s; start error mean {} s, duration error mean {} s; real end by the p90 end: {}",
        e["n"],
        num(&e["abs_median_s"], 1),
        pct(&e["abs_median_fraction"]),
        num(&e["abs_p90_s"], 1),
        pct(&e["abs_p90_fraction"]),
        num(&e["signed_s"]["mean"], 1),
        num(&e["start_error_s"]["mean"], 1),
        num(&e["duration_error_s"]["mean"], 1),
        e["real_end_by_p90_forecast_end"],
    );
    println!(
        "  completion ({}): forecast {} real {}: error {} s ({}), target ±{} s: {}; real by the p90 completion {}: {}",
        c["forecast_is"].as_str().unwrap_or_default(),
        c["forecast"],
        c["real"],
        num(&c["error_s"], 1),
        pct(&c["error_fraction"]),
        num(&c["target_s"], 1),
        match c["within_target"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "-",
        },
        c["forecast_p90"],
        c["real_by_p90_completion"],
    );
    println!(
        "  completion of the median run {}: error {} s ({}); expected over {} drawn runs, p90 {}",
        c["median_run"],
        num(&c["median_run_error_s"], 1),
        pct(&c["median_run_error_fraction"]),
        c["expected_runs"],
        c["expected_p90"],
    );
    println!(
        "  fit (median forecast / real): fits and started {}, fits but did not start {}, \
         does not fit but started {}, does not fit and did not start {}{}",
        fit["fits_and_started"],
        fit["fits_but_did_not_start"],
        fit["does_not_fit_but_started"],
        fit["does_not_fit_and_did_not_start"],
        if fit["all_agree"] == true {
            ": all agree"
        } else {
            ""
        },
    );
}
