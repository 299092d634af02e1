//! The forecast behind the `kumaco_forecast_*` gauges (with `--in-progress`): at most
//! once per `--forecast-interval`, on a blocking thread so that no pass waits for it (its
//! runs side by side on up to the available cores: [`forecasting::play`]), from the caches
//! as the pass reads them, the health gates' holds included. Nothing is kept but the
//! gauges, and each forecast is made from what the cluster shows then: a restarted or
//! newly elected replica exports the same.
//! Every replica computes it, leader or not, so the gauges do not move with leadership.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use tokio::task::JoinHandle;

use super::notifier::ForecastSlot;
use super::windows::WindowCache;
use crate::forecast::Forecast;
use crate::forecasting::{self, Beside};
use crate::gates::Holds;
use crate::in_progress::{BlockingPod, Policy};
use crate::metrics::Metrics;
use crate::node::SlimNode;
use crate::selector::Selector;
use crate::window::Window;

/// How far ahead the gauges look.
pub const HORIZON: SignedDuration = SignedDuration::from_hours(7 * 24);

/// `--forecast-interval` apart at least: at its default, a small share of a core even at
/// the largest scale measured (docs/benchmarks.md, Forecast).
pub struct Forecaster {
    interval: Option<Duration>,
    last: Option<Instant>,
    running: Option<JoinHandle<()>>,
    /// The latest forecast, for the notifications' heads-ups.
    latest: ForecastSlot,
}

impl Forecaster {
    pub fn new(interval: Option<Duration>, latest: ForecastSlot) -> Self {
        Forecaster {
            interval,
            last: None,
            running: None,
            latest,
        }
    }

    /// Starts a forecast when one is due and none runs.
    #[allow(clippy::too_many_arguments)]
    pub fn maybe_start(
        &mut self,
        policy: Option<&Policy>,
        selector: &Selector,
        cached: &[Arc<SlimNode>],
        pods: &HashMap<String, Vec<BlockingPod>>,
        holds: &Holds,
        windows: &WindowCache,
        metrics: &Arc<Metrics>,
        now: Timestamp,
    ) {
        let (Some(policy), Some(interval)) = (policy, self.interval) else {
            return;
        };
        if self.running.as_ref().is_some_and(|h| !h.is_finished())
            || self.last.is_some_and(|t| t.elapsed() < interval)
        {
            return;
        }
        self.last = Some(Instant::now());
        let nodes: Vec<Arc<SlimNode>> = cached
            .iter()
            .filter(|n| selector.matches(&n.labels))
            .cloned()
            .collect();
        let windows: Vec<Window> = windows
            .sources
            .values()
            .filter_map(|s| s.window.as_ref().ok().cloned())
            .collect();
        let (policy, pods, metrics) = (policy.clone(), pods.clone(), metrics.clone());
        let latest = self.latest.clone();
        // The pause holds every start as the gates on every start do, first.
        let cluster: Vec<_> = holds.pause.iter().chain(&holds.cluster).cloned().collect();
        let node_holds = holds.nodes.clone();
        self.running = Some(tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let beside = Beside {
                pods: Some(&pods),
                holds: Some(&node_holds),
                cluster: &cluster,
            };
            let made = run(&windows, &policy, &nodes, beside, &metrics, now);
            *latest.lock().unwrap_or_else(|e| e.into_inner()) = made.map(Arc::new);
            let m = &metrics.forecast;
            m.runs.inc();
            m.run_seconds.observe(started.elapsed().as_secs_f64());
        }));
    }
}

fn run(
    windows: &[Window],
    policy: &Policy,
    nodes: &[Arc<SlimNode>],
    beside: Beside,
    metrics: &Metrics,
    now: Timestamp,
) -> Option<Forecast> {
    let m = &metrics.forecast;
    match forecasting::estimate(&forecasting::learn(nodes), None, None) {
        Ok(estimate) => {
            let f = forecasting::compute(windows, policy, nodes, beside, estimate, now, HORIZON);
            m.set(&f.forecast, &f.estimate);
            Some(f.forecast)
        }
        // No durations recorded yet (a cluster's first rollout under kumaco): nothing to
        // forecast with, and no alert can rest on it.
        Err(_) => {
            m.unavailable();
            None
        }
    }
}
