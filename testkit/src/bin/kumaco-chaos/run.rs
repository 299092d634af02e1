//! The run: the cluster, the replicas, the checker and the helpers set up, the fault
//! phase of episodes and quiet gaps, the quiet tail, and the figures gathered; and the
//! driver's means of acting on the replicas and the windows.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use testkit::agent::{REBOOT_REQUIRED, RebootAgent};
use testkit::chaos::Rng;
use testkit::chaos::checker::{Checker, CheckerConfig};
use testkit::chaos::clock::FakeClock;
use testkit::chaos::lifecycle::{Drainer, Evicting};
use testkit::chaos::plan::WindowSpec;
use testkit::chaos::workload::{Layout, Workload};
use testkit::faultproxy::{FaultProxy, kubeconfig_via, upstream_of};
use testkit::fleet::{create_namespace, create_nodes, node_labels, node_name};
use testkit::reporter::RebootSource;
use testkit::{ApiServer, Scope};

use crate::replicas::{Replica, Signal};
use crate::windows::{compute_plan, edit, initial_windows, put};
use crate::{
    Args, BUDGET_REPORTER_SPEC, DRAIN, EDGE_BOUND, GRACE, LEASE, LEASE_ARGS, LEASE_DURATION,
    MANAGER, NAMESPACE, Outcome, REBOOT_PAUSE, REPORTER_SPEC, ZONE_KEY,
};

#[derive(Default, serde::Serialize)]
pub(crate) struct Tally {
    pub(crate) episodes: u64,
    pub(crate) sigkill: u64,
    pub(crate) sigterm: u64,
    pub(crate) leader_kills: u64,
    pub(crate) mid_edge: u64,
    pub(crate) mid_write: u64,
    pub(crate) api_crashes: u64,
    pub(crate) api_crashes_across_edge: u64,
    pub(crate) proxy_faults: BTreeMap<String, u64>,
    pub(crate) partitions: u64,
    pub(crate) clock_jumps: u64,
    pub(crate) window_edits: u64,
    pub(crate) restart_failures: u64,
    pub(crate) fault_seconds: f64,
    /// Nodes the harness took down (outages), by how; zone outages among the episodes.
    pub(crate) outages: BTreeMap<String, u64>,
    pub(crate) zone_outages: u64,
}

pub(crate) struct Driver<'a> {
    pub(crate) args: &'a Args,
    pub(crate) rng: Rng,
    pub(crate) server: ApiServer,
    pub(crate) client: kube::Client,
    pub(crate) replicas: Vec<Replica>,
    pub(crate) kumaco_args: Vec<String>,
    pub(crate) checker: Checker,
    pub(crate) windows: Vec<WindowSpec>,
    pub(crate) initial: Vec<WindowSpec>,
    pub(crate) nodes: Vec<(String, BTreeMap<String, String>)>,
    pub(crate) dir: PathBuf,
    pub(crate) tally: Tally,
    pub(crate) started: Instant,
    /// The outages running in the background.
    pub(crate) outages: Vec<tokio::task::JoinHandle<()>>,
    /// `--budgets`: the pods, budgets and controller-manager.
    pub(crate) workload: Option<Workload>,
}

pub(crate) async fn run(args: &Args, seed: u64) -> Result<Outcome> {
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
    let names: Vec<String> = nodes.iter().map(|(name, _)| name.clone()).collect();
    let layout = Layout::new(n);
    let workload = if args.budgets {
        let w = Workload::start(&server, &client, &layout, &names).await?;
        println!(
            "kumaco-chaos: --budgets: {} StatefulSets and {} pinned pods under budgets, on {} nodes",
            layout.sets.len(),
            layout.daemon_pods.len() + layout.finished_pods.len(),
            layout.budgeted().len() + layout.daemon_pods.len() + layout.finished_pods.len()
        );
        Some(w)
    } else {
        None
    };
    let budget_nodes: std::collections::BTreeSet<String> = if args.budgets {
        layout
            .budgeted()
            .iter()
            .map(|&i| names[i].clone())
            .collect()
    } else {
        Default::default()
    };
    // The nodes under budgets need reboots more often than the others (their own
    // reporter): with their few pods, that is what puts their budgets to the test.
    let (budgeted, unbudgeted): (Vec<String>, Vec<String>) = names
        .iter()
        .cloned()
        .partition(|n| budget_nodes.contains(n));
    let cfg = CheckerConfig {
        ceiling: args.ceiling,
        group_ceiling: Some((ZONE_KEY.into(), args.zone_ceiling as usize)),
        edge_bound: EDGE_BOUND,
        slack: Duration::from_millis(args.slack_ms),
        settle: Duration::from_secs(args.settle),
        lease_namespace: NAMESPACE.into(),
        lease_name: LEASE.into(),
        lease_duration: LEASE_DURATION,
        budget_nodes,
    };
    let selector = scope.selector();
    let checker = Checker::start(&client, &selector, cfg, plan).await?;
    let startup = checker.fault_started("startup");
    let agent = Arc::new(RebootAgent::start(&client, &selector, REBOOT_PAUSE).await?);
    let evicting = match args.budgets {
        true => Some(Evicting {
            client: server.client_without_retries().await?,
            agent: agent.clone(),
            on_refused: checker.on_refused(),
        }),
        false => None,
    };
    let drainer = Drainer::start(&client, &selector, DRAIN, evicting).await?;
    let mut reporter =
        RebootSource::start(client.clone(), unbudgeted, agent.clone(), REPORTER_SPEC);
    let mut budget_reporter = args.budgets.then(|| {
        RebootSource::start(
            client.clone(),
            budgeted,
            agent.clone(),
            BUDGET_REPORTER_SPEC,
        )
    });

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
    .chain(args.kumaco_arg.iter().cloned())
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
        workload,
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
    let mut relaxed_at = None;
    while driver.started.elapsed() < fault_phase {
        // The frozen budget allows one from the middle of the fault phase: its nodes
        // waited, now they complete.
        if relaxed_at.is_none()
            && driver.started.elapsed() >= fault_phase / 2
            && let Some(w) = &driver.workload
        {
            w.relax().await?;
            relaxed_at = Some(driver.started.elapsed().as_secs_f64() / 60.0);
            driver.say("the frozen budget now allows one disruption");
        }
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
    if let Some(r) = &mut budget_reporter {
        r.stop(&agent).await;
    }
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
        "reboots_marked": reporter_state.marks
            + budget_reporter.as_ref().map_or(0, |r| r.state().marks),
        "drainer": drainer.counts(),
        "budgets": driver.workload.as_ref().map(|w| json!({
            "kumaco_args": args.kumaco_arg,
            "controller_manager_restarts": w.kcm_restarts,
            "frozen_relaxed_at_minute": relaxed_at,
            "evictions_refused": counts.evictions_refused,
        })),
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
    drop(budget_reporter);
    drop(agent);
    drop(drainer);
    drop(driver);
    Ok(Outcome { figures, violation })
}

impl Drop for Driver<'_> {
    /// The replicas and their proxies go before the API server: it would wait for their
    /// connections to drain (up to a minute) before it stops.
    fn drop(&mut self) {
        // The controller-manager and the stand-in go first too.
        self.workload = None;
        for outage in self.outages.drain(..) {
            outage.abort();
        }
        for replica in &mut self.replicas {
            if let Some(mut process) = replica.process.take() {
                process.kill();
            }
        }
        self.replicas.clear();
    }
}

/// `mm:ss` of a duration.
fn clock(d: Duration) -> String {
    let secs = d.as_secs();
    format!("{:02}:{:02}", secs / 60, secs % 60)
}

impl Driver<'_> {
    pub(crate) fn say(&self, what: &str) {
        println!("[{}] {what}", clock(self.started.elapsed()));
    }

    pub(crate) async fn start_replica(&mut self, i: usize) -> Result<()> {
        let (kumaco, args) = (&self.args.kumaco, &self.kumaco_args);
        self.replicas[i].start(kumaco, &self.server, args).await
    }

    /// Starts the controller-manager again if it stopped (`--budgets`).
    pub(crate) fn restart_controller_manager(&mut self) {
        if let Some(w) = &mut self.workload {
            match w.ensure_running(&self.server) {
                Ok(true) => self.say("the controller-manager had stopped: started again"),
                Ok(false) => {}
                Err(e) => self.say(&format!(
                    "the controller-manager did not start again: {e:#}"
                )),
            }
        }
    }

    /// Starts a killed replica again; a failure (the API server still down, a slow
    /// machine) is counted and retried at the next episode.
    pub(crate) async fn restart_down(&mut self) {
        for i in 0..self.replicas.len() {
            if self.replicas[i].process.is_none()
                && let Err(e) = self.start_replica(i).await
            {
                self.tally.restart_failures += 1;
                self.say(&format!("replica {i} did not start again: {e:#}"));
            }
        }
    }

    pub(crate) fn leader(&self) -> Option<usize> {
        let holder = self.checker.holder()?;
        self.replicas
            .iter()
            .position(|r| r.identity == holder && r.process.is_some())
    }

    pub(crate) async fn wait_for_leader(&self, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(i) = self.leader() {
                return Ok(i);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("no replica took the Lease within {timeout:?}")
    }

    pub(crate) async fn kill(&mut self, i: usize, signal: Signal) -> Result<()> {
        let identity = self.replicas[i].identity.clone();
        let Some(mut process) = self.replicas[i].process.take() else {
            return Ok(());
        };
        match signal {
            Signal::Kill => {
                process.kill();
                self.tally.sigkill += 1;
            }
            Signal::Term => {
                if let Err(e) = process.terminate(GRACE).await {
                    self.say(&format!("{identity} ignored SIGTERM: {e:#}"));
                    process.kill();
                }
                self.tally.sigterm += 1;
            }
        }
        self.checker.replica_killed(&identity);
        Ok(())
    }

    /// Waits until just after the next window edge (the plan's).
    pub(crate) async fn until_edge(&self, after: Duration) {
        if let Some(edge) = self.checker.next_edge() {
            let wait = edge.duration_since(Timestamp::now());
            let wait = Duration::try_from(wait).unwrap_or_default() + after;
            tokio::time::sleep(wait).await;
        }
    }

    pub(crate) async fn edit_windows(&mut self) -> Result<String> {
        let (i, what) = edit(&mut self.rng, &mut self.windows, &self.initial);
        put(&self.client, &self.windows[i]).await?;
        let plan = compute_plan(self.args, &self.dir, &self.windows, &self.nodes)?;
        self.checker.set_plan(plan);
        self.tally.window_edits += 1;
        Ok(what)
    }

    /// The quiet gap after an episode, in which the checker compares with the plan.
    pub(crate) async fn quiet_gap(&mut self) {
        let gap = Duration::from_secs(self.args.settle)
            + self
                .rng
                .duration(Duration::from_secs(5), Duration::from_secs(15));
        tokio::time::sleep(gap).await;
    }
}
