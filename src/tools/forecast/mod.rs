//! The forecast as kumaco's tools show it (`kumaco plan --forecast`, `kumaco status`):
//! [`crate::forecasting`]'s over the nodes as the controller reads them, with the
//! durations the nodes record or the flags give. [`table`],
//! [`json`] and [`svg`] render it; the callers read the inputs.
//!
//! Nothing is kept between runs: the windows, the nodes (their conditions, readiness,
//! cordon, boot ID, labels) and the recorded durations are what the cluster shows, so
//! two runs at one instant over one cluster forecast the same.

mod render;
mod svg;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use jiff::{SignedDuration, Timestamp};

pub use render::{json, summary, table};
pub use svg::svg;

use kube::api::{Api, ListParams};

use super::{ToolError, flag_err};
use crate::cli::{ConditionNameArgs, ForecastArgs};
use crate::controller::pods::SlimPod;
use crate::forecast::Learned;
use crate::forecasting;
use crate::in_progress::{BlockingPod, Policy};
use crate::node::SlimNode;
use crate::node::names::Names;
use crate::selector::Selector;
use crate::window::Window;

pub use crate::forecasting::{Beside, Estimate, Forecasted, Source, compute, learn};

/// The durations: a flag's where given (one value for the median and the 90th
/// percentile), else what the nodes record ([`forecasting::estimate`]); an error naming
/// the flag when neither says.
pub fn estimate(
    learned: &Learned,
    maintenance: Option<SignedDuration>,
    recovery: Option<SignedDuration>,
) -> Result<Estimate, ToolError> {
    forecasting::estimate(learned, maintenance, recovery).map_err(|e| flag_err(e.flag, e.message))
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
        let beside = Beside {
            pods: Some(pods),
            ..Beside::default()
        };
        Ok(compute(
            windows,
            &self.policy,
            nodes,
            beside,
            estimate,
            now,
            horizon,
        ))
    }
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
