//! The run: the cluster, kured's daemons and kumaco set up, the warm-up rollout, then each
//! measured rollout with the forecast taken before its window opens.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::analysis::{Measured, analyse};
use crate::args::{Args, parse_duration, spread};
use crate::recorder::{NodeNow, Recorder, reals};
use crate::report::print_rollout;
use crate::{FORECAST_AHEAD, NAME, NAMESPACE, READY_TIMEOUT, ZONE_LABEL};
use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use testkit::agent::{MAINTENANCE_IN_PROGRESS, REBOOT_REQUIRED};
use testkit::fleet::{
    self, KumacoOptions, LogScan, create_namespace, create_nodes, load_average, node_name,
    put_window,
};
use testkit::kured::{Draws, Happened, Kured, KuredSpec, Spread};
use testkit::{ApiServer, Scope};

pub(crate) struct Setup<'a> {
    pub(crate) args: &'a Args,
    pub(crate) client: kube::Client,
    pub(crate) server: &'a ApiServer,
    pub(crate) scope: Scope,
    pub(crate) names: Vec<String>,
    pub(crate) kured: Kured,
    pub(crate) recorder: Recorder,
    pub(crate) draws: Draws,
    pub(crate) policy: Vec<String>,
    pub(crate) ceiling: usize,
    /// A generous bound for one rollout.
    pub(crate) rollout_timeout: Duration,
}

pub(crate) async fn run(args: &Args) -> Result<Value> {
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
    let ceiling = fleet::slots(&args.max_in_progress, n)?;
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
    let mut kumaco = fleet::start_kumaco(
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
    kumaco.ready_within("/readyz", READY_TIMEOUT).await?;
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
    let logs = LogScan::default().levels(kumaco.log_path())?.clone();
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
pub(crate) async fn warm_up(s: &Setup<'_>) -> Result<Value> {
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
pub(crate) fn recovered_and_recorded(n: &NodeNow) -> bool {
    !n.cordoned
        && n.mip
            .as_ref()
            .is_some_and(|(s, _, m)| s == "False" && m.contains("recovered after"))
}

pub(crate) async fn delete_window(client: &kube::Client, name: &str) -> Result<()> {
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting window {name}"))?;
    Ok(())
}

/// Waits until `nodes` show `RebootRequired=status`.
pub(crate) async fn wait_requirement(s: &Setup<'_>, status: &str, nodes: &[String]) -> Result<()> {
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
pub(crate) fn whole_second_in(secs: i64) -> Timestamp {
    Timestamp::from_second(Timestamp::now().as_second() + secs + 1).expect("a valid time")
}

/// One measured rollout: every node needing a reboot again, a one-shot window of length
/// `window`, the forecast taken before it opens, the real rollout to its end.
pub(crate) async fn measure(s: &Setup<'_>, k: usize, window: &str, last: bool) -> Result<Value> {
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
        &s.names,
        &s.draws,
        s.ceiling,
    ))
}

/// How many times each node rebooted so far (from one copy of the daemons' log).
pub(crate) fn reboots(kured: &Kured) -> BTreeMap<String, usize> {
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
pub(crate) async fn forecast(s: &Setup<'_>) -> Result<(Value, f64)> {
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
