//! The forecast as kumaco's tools show it (`kumaco plan --forecast`, `kumaco status`):
//! the core's [`forecast`](crate::forecast::forecast) over the nodes as the controller
//! reads them, with the durations the nodes record or the flags give. [`table`],
//! [`json`] and [`svg`] render it; the callers read the inputs.
//!
//! Nothing is kept between runs: the windows, the nodes (their conditions, readiness,
//! cordon, boot ID, labels) and the recorded durations are what the cluster shows, so
//! two runs at one instant over one cluster forecast the same.

mod render;
mod svg;
#[cfg(test)]
mod tests;

use std::borrow::Borrow;
use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};

pub use render::{json, summary, table};
pub use svg::svg;

use kube::api::{Api, ListParams};

use super::{ToolError, flag_err};
use crate::cli::{ConditionNameArgs, ForecastArgs};
use crate::controller::pods::SlimPod;
use crate::forecast::{self, Durations, Forecast, Learned, Quantiles};
use crate::in_progress::{BlockingPod, Policy};
use crate::node::SlimNode;
use crate::node::names::Names;
use crate::selector::Selector;
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

/// The durations: a flag's where given (one value for the median and the 90th
/// percentile), else what the nodes record; an error naming the flag when neither says.
pub fn estimate(
    learned: &Learned,
    maintenance: Option<SignedDuration>,
    recovery: Option<SignedDuration>,
) -> Result<Estimate, ToolError> {
    let pick = |given: Option<SignedDuration>,
                sampled: &forecast::Sampled,
                flag: &'static str,
                what: &str,
                example: &str|
     -> Result<(Quantiles, Vec<SignedDuration>, Source), ToolError> {
        match (given, sampled.quantiles) {
            (Some(d), _) => Ok((Quantiles::fixed(d), Vec::new(), Source::Given)),
            (None, Some(q)) => Ok((
                q,
                sampled.recorded.clone(),
                Source::Learned {
                    samples: sampled.samples(),
                },
            )),
            (None, None) => Err(flag_err(
                flag,
                format!(
                    "the nodes in scope record no {what} yet ({example} on \
                     MaintenanceInProgress=False, which kumaco writes when a maintenance \
                     ends); give how long one takes here, e.g. --{flag}=15m"
                ),
            )),
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

/// What `--forecast` plays forward: the brain's policy (the flags `kumaco run
/// --in-progress` takes) and the durations given by flag.
pub struct Settings {
    pub policy: Policy,
    pub maintenance: Option<SignedDuration>,
    pub recovery: Option<SignedDuration>,
    /// The names the nodes carry kumaco's conditions under.
    pub names: Names,
}

impl Settings {
    /// The settings with `--forecast`; `None` without it, where a forecast flag is refused
    /// rather than ignored, with the condition names the nodes are read with.
    pub fn from_args(
        args: &ForecastArgs,
        names: &ConditionNameArgs,
    ) -> Result<Option<Settings>, ToolError> {
        if !args.forecast {
            let given = crate::config::policy::first_given(&args.policy)
                .or(args.policy.in_progress.then_some("in-progress"))
                .or(args
                    .maintenance_duration
                    .is_some()
                    .then_some("maintenance-duration"))
                .or(args
                    .recovery_duration
                    .is_some()
                    .then_some("recovery-duration"));
            return match given {
                Some(flag) => Err(flag_err(flag, "only has an effect with --forecast")),
                None => Ok(None),
            };
        }
        let policy = crate::config::policy::for_forecast(&args.policy)
            .map_err(|e| flag_err(e.flag, e.message))?;
        let reads: Vec<String> = policy
            .required
            .iter()
            .chain(&policy.blocking)
            .cloned()
            .collect();
        let names = Names::new(
            &names.under_maintenance_condition,
            &names.in_progress_condition,
            &reads,
        )
        .map_err(|e| flag_err(e.flag(), e))?;
        let duration = |flag: &'static str, v: &Option<String>| {
            v.as_deref()
                .map(|s| {
                    let d = crate::duration::parse(s)
                        .map_err(|e| flag_err(flag, e))?
                        .to_signed();
                    if d.is_negative() {
                        return Err(flag_err(
                            flag,
                            format!("{s:?} is negative; expected e.g. 15m"),
                        ));
                    }
                    Ok(d)
                })
                .transpose()
        };
        Ok(Some(Settings {
            policy,
            maintenance: duration("maintenance-duration", &args.maintenance_duration)?,
            recovery: duration("recovery-duration", &args.recovery_duration)?,
            names,
        }))
    }

    /// The forecast of `nodes` (in scope) from `now` over `horizon`, with the durations
    /// the flags give or the nodes record.
    pub fn forecast(
        &self,
        windows: &[Window],
        nodes: &[SlimNode],
        pods: &HashMap<String, Vec<BlockingPod>>,
        now: Timestamp,
        horizon: SignedDuration,
    ) -> Result<Forecasted, ToolError> {
        let estimate = estimate(&learn(nodes), self.maintenance, self.recovery)?;
        Ok(compute(
            windows,
            &self.policy,
            nodes,
            pods,
            estimate,
            now,
            horizon,
        ))
    }
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

/// The forecast of `nodes` (in scope already, as the controller decodes them) from
/// `now` over `horizon`, with the pods keeping each from starting
/// (`--block-pod-selector`).
pub fn compute(
    windows: &[Window],
    policy: &Policy,
    nodes: &[impl Borrow<SlimNode>],
    pods: &HashMap<String, Vec<BlockingPod>>,
    estimate: Estimate,
    now: Timestamp,
    horizon: SignedDuration,
) -> Forecasted {
    let views: Vec<_> = nodes
        .iter()
        .map(|n| {
            let n = n.borrow();
            let name = n.metadata.name.as_deref().unwrap_or_default();
            let pods = pods.get(name).map_or(&[][..], Vec::as_slice);
            // The forecast reads no ownership: any field manager will do.
            crate::controller::view(n, "", pods)
        })
        .collect();
    let mut sorted: Vec<&Window> = windows.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let forecast = forecast::forecast(&sorted, policy, &views, &estimate.durations, now, horizon);
    Forecasted {
        forecast,
        estimate,
        from: now,
        horizon,
        nodes_in_scope: nodes.len(),
        windows: sorted.into_iter().cloned().collect(),
    }
}

/// What the nodes record of the durations.
pub fn learn(nodes: &[impl Borrow<SlimNode>]) -> Learned {
    forecast::learn(nodes.iter().map(|n| n.borrow().conditions.as_slice()))
}

/// The pods keeping each node from starting, listed as the controller watches them (the
/// selector and "scheduled, not finished" both server-side).
pub async fn blocking_pods(
    connection: &crate::kubeclient::Connection,
    selectors: &[Selector],
    tool: &str,
) -> Result<HashMap<String, Vec<BlockingPod>>, ToolError> {
    let mut listed = Vec::new();
    for (i, selector) in selectors.iter().enumerate() {
        let params = ListParams::default()
            .labels(&selector.to_string())
            .fields(crate::controller::pods::FIELD_SELECTOR);
        let pods = Api::<SlimPod>::all(connection.client.clone())
            .list(&params)
            .await
            .map_err(|e| {
                super::api_error(
                    connection,
                    format!("list pods matching {selector}"),
                    e,
                    &format!(
                        ". kumaco {tool} --forecast with --block-pod-selector needs `list \
                         pods` cluster-wide, as kumaco run does"
                    ),
                )
            })?;
        listed.extend(pods.items.into_iter().map(|p| (i, p)));
    }
    Ok(crate::controller::pods::group(
        listed.iter().map(|(i, p)| (*i, p)),
    ))
}
