//! The forecast as the shell makes it, below both the controller (its `kumaco_forecast_*`
//! gauges) and the tools (`kumaco plan --forecast`, `kumaco status`): the durations it
//! assumes ([`estimate`], from what the nodes record or the flags give), the nodes as
//! the controller decodes them made the core's input ([`compute`]), and the core's runs
//! ([`Runs`]) played on up to the available cores ([`play`]).
//!
//! Nothing is kept between forecasts: the windows, the nodes and the recorded durations
//! are what the cluster shows, so two forecasts at one instant over one cluster are the
//! same, whatever the number of cores they ran on.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::num::NonZero;
use std::sync::{Mutex, PoisonError};

use jiff::{SignedDuration, Timestamp};

use crate::forecast::{
    self, Drawing, Durations, Forecast, Learned, Played, Quantile, Quantiles, Runs,
};
use crate::gates::Hold;
use crate::in_progress::{BlockingPod, Policy};
use crate::node::SlimNode;
use crate::pass::NodeView;
use crate::window::Window;

/// Where a duration the forecast assumes comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The nodes' records: this many (one per node, its last maintenance).
    Learned { samples: usize },
    /// A flag (`--maintenance-duration`, `--recovery-duration`).
    Given,
}

/// The durations a forecast assumes, and where each comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    pub durations: Durations,
    pub maintenance: Source,
    pub recovery: Source,
}

/// Neither a flag nor the nodes' records say how long a maintenance or a recovery takes.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct EstimateError {
    /// The flag that would say it (`maintenance-duration`, `recovery-duration`).
    pub flag: &'static str,
    pub message: String,
}

/// The durations: a flag's where given (one value for the median and the 90th
/// percentile), else what the nodes record; an error naming the flag when neither says.
pub fn estimate(
    learned: &Learned,
    maintenance: Option<SignedDuration>,
    recovery: Option<SignedDuration>,
) -> Result<Estimate, EstimateError> {
    let pick = |given: Option<SignedDuration>,
                sampled: &forecast::Sampled,
                flag: &'static str,
                what: &str,
                example: &str|
     -> Result<(Quantiles, Vec<SignedDuration>, Source), EstimateError> {
        match (given, sampled.quantiles) {
            (Some(d), _) => Ok((Quantiles::fixed(d), Vec::new(), Source::Given)),
            (None, Some(q)) => Ok((
                q,
                sampled.recorded.clone(),
                Source::Learned {
                    samples: sampled.samples(),
                },
            )),
            (None, None) => Err(EstimateError {
                flag,
                message: format!(
                    "the nodes in scope record no {what} yet ({example} on \
                     MaintenanceInProgress=False, which kumaco writes when a maintenance \
                     ends); give how long one takes here, e.g. --{flag}=15m"
                ),
            }),
        }
    };
    let (m, m_recorded, maintenance_source) = pick(
        maintenance,
        &learned.maintenance,
        "maintenance-duration",
        "completed maintenance",
        "\"completed after 6m12s\"",
    )?;
    let (r, r_recorded, recovery_source) = pick(
        recovery,
        &learned.recovery,
        "recovery-duration",
        "recovery",
        "\"recovered after 1m3s\"",
    )?;
    Ok(Estimate {
        durations: Durations {
            maintenance: m,
            recovery: r,
            recorded: forecast::Recorded {
                maintenance: m_recorded,
                recovery: r_recorded,
            },
        },
        maintenance: maintenance_source,
        recovery: recovery_source,
    })
}

/// What the nodes record of the durations.
pub fn learn(nodes: &[impl Borrow<SlimNode>]) -> Learned {
    forecast::learn(nodes.iter().map(|n| n.borrow().conditions.as_slice()))
}

/// A forecast with what it was made from, as the renderings show it.
#[derive(Clone, Debug)]
pub struct Forecasted {
    pub forecast: Forecast,
    pub estimate: Estimate,
    pub from: Timestamp,
    pub horizon: SignedDuration,
    /// The nodes in scope (those forecast are the ones needing maintenance).
    pub nodes_in_scope: usize,
    /// The windows, for the picture's lanes.
    pub windows: Vec<Window>,
}

/// What a forecast reads beside the nodes: the pods keeping each from starting
/// (`--block-pod-selector`) and the health gates' holds, by node name.
#[derive(Clone, Copy, Debug, Default)]
pub struct Beside<'a> {
    pub pods: Option<&'a HashMap<String, Vec<BlockingPod>>>,
    /// On one node's start, by node name.
    pub holds: Option<&'a HashMap<String, Vec<Hold>>>,
    /// On every start.
    pub cluster: &'a [Hold],
}

/// The forecast of `nodes` (in scope already, as the controller decodes them) from
/// `now` over `horizon`, with what it reads `beside` them, its runs played on up to the
/// available cores.
pub fn compute(
    windows: &[Window],
    policy: &Policy,
    nodes: &[impl Borrow<SlimNode>],
    beside: Beside,
    estimate: Estimate,
    now: Timestamp,
    horizon: SignedDuration,
) -> Forecasted {
    let views: Vec<_> = nodes
        .iter()
        .map(|n| {
            let n = n.borrow();
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let pods = beside.pods.and_then(|p| p.get(name));
            let holds = beside.holds.and_then(|h| h.get(name));
            let (pods, holds) = (
                pods.map_or(&[][..], Vec::as_slice),
                holds.map_or(&[][..], Vec::as_slice),
            );
            // The forecast reads no ownership: any field manager will do.
            NodeView {
                holds,
                ..crate::node::view(n, "", pods)
            }
        })
        .collect();
    let mut sorted: Vec<&Window> = windows.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let runs = Runs::new(
        &sorted,
        policy,
        &views,
        beside.cluster,
        &estimate.durations,
        now,
        horizon,
    );
    let forecast = play(&runs, cores());
    Forecasted {
        forecast,
        estimate,
        from: now,
        horizon,
        nodes_in_scope: nodes.len(),
        windows: sorted.into_iter().cloned().collect(),
    }
}

/// The cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, NonZero::get)
}

/// Plays `runs` on up to `threads` threads: the runs at the median and the 90th
/// percentile side by side, then the drawn runs, each thread taking the next one. The
/// answer is the core's [`forecast::forecast`], whatever `threads` is: a drawn run counts
/// by its number, and one is begun only while the runs before it leave room for it.
pub fn play(runs: &Runs, threads: usize) -> Forecast {
    let threads = threads.max(1);
    let (median, p90) = if threads == 1 {
        (runs.play(Quantile::Median), runs.play(Quantile::P90))
    } else {
        std::thread::scope(|s| {
            let p90 = s.spawn(|| runs.play(Quantile::P90));
            let median = runs.play(Quantile::Median);
            (median, joined(p90))
        })
    };
    let expected = runs
        .drawing(&median, &p90)
        .and_then(|drawing| drawn(runs, &drawing, threads));
    runs.combine(median, p90, expected)
}

/// The drawn runs taken in order by `threads` threads.
fn drawn(runs: &Runs, drawing: &Drawing, threads: usize) -> Option<forecast::Expected> {
    struct Shared {
        next: usize,
        /// What the runs finished so far decided: all of them come before the next.
        spent: u64,
        plays: Vec<Option<Played>>,
    }
    let shared = Mutex::new(Shared {
        next: 0,
        spent: 0,
        plays: (0..Drawing::RUNS).map(|_| None).collect(),
    });
    let lock = || shared.lock().unwrap_or_else(PoisonError::into_inner);
    let work = || {
        loop {
            let (run, budget) = {
                let mut s = lock();
                // The runs before the next decided at least `spent`: with less left than
                // the median run decided, it would not count.
                let left = drawing.budget().saturating_sub(s.spent);
                if s.next == Drawing::RUNS || left < drawing.typical() {
                    return;
                }
                s.next += 1;
                (s.next - 1, left)
            };
            let played = runs.play_drawn(drawing, run, budget);
            let mut s = lock();
            s.spent += played.as_ref().map_or(budget, Played::work);
            s.plays[run] = played;
        }
    };
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|s| {
            let helpers: Vec<_> = (1..threads.min(Drawing::RUNS))
                .map(|_| s.spawn(work))
                .collect();
            work();
            for h in helpers {
                joined(h);
            }
        });
    }
    let plays = std::mem::take(&mut lock().plays);
    drawing.expected(plays)
}

/// A thread's answer; its panic goes on in the caller.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

#[cfg(test)]
mod tests;
