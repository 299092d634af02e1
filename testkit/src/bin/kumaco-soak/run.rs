//! The run: the cluster, its windows, the stand-in reporter and reboot agent, and kumaco
//! sampled until the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sampling::{Baseline, Probe, Sample, sample_until};
use crate::summary::{SummaryInput, summarize};
use crate::{Args, NAME, NAMESPACE, READY_TIMEOUT, REBOOT_PAUSE, REPORTER_SPEC};
use anyhow::{Result, bail};
use serde_json::Value;
use testkit::agent::{Observer, REBOOT_REQUIRED, RebootAgent};
use testkit::churn::{self, ChurnSpec};
use testkit::fleet::{
    self, KumacoOptions, LogScan, ZONES, create_namespace, create_nodes, load_average, node_name,
    node_status_requests, put_window,
};
use testkit::kumaco::apiserver_metrics;
use testkit::reporter::RebootSource;
use testkit::{ApiServer, Scope};

pub(crate) struct Outcome {
    pub(crate) samples: Vec<Sample>,
    pub(crate) summary: Value,
    pub(crate) failures: Vec<String>,
}

/// The whole run; kumaco, the helpers and the API server stop when it returns.
pub(crate) async fn run(args: &Args) -> Result<Outcome> {
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
        applies: node_status_requests(&baseline, "APPLY")?.0,
        patches: node_status_requests(&baseline, "PATCH")?.0,
    };
    let mut kumaco = fleet::start_kumaco(
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
    let ready_secs = kumaco
        .ready_within("/readyz", READY_TIMEOUT)
        .await?
        .as_secs_f64();
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
        Some(churn::start(kubelet, labeler, names.clone(), spec))
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
    let mut log_scan = LogScan::default();
    let sampled = sample_until(&probe, &mut kumaco, &mut log_scan, period, length).await;
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
            log_scan
                .levels(kumaco.log_path())
                .cloned()
                .unwrap_or(sampled.logs.clone())
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
pub(crate) async fn create_windows(client: &kube::Client) -> Result<()> {
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
