//! The health gates' flags, validated into [`GateSettings`]. Like the policy's flags,
//! a gate flag given without `--in-progress` is refused rather than ignored: the gates
//! only ever hold a start of `MaintenanceInProgress`. The alerts gate's are in
//! [`alerts`].

pub(crate) mod alerts;

use super::{FlagError, SilenceSettings, flag_err};
use crate::cli::GateArgs;
pub use alerts::AlertGate;

/// What the health gates read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateSettings {
    /// `--pod-disruption-budgets`: a node starts only if every pod a drain would evict
    /// can be evicted now.
    pub budgets: bool,
    /// `--block-alerts`, `--block-query`: firing alerts and query results hold starts.
    pub alerts: Option<AlertGate>,
}

/// `silences`: the `--alertmanager-url` settings, which the alerts gate shares.
pub fn from_args(
    args: &GateArgs,
    in_progress: bool,
    silences: Option<&SilenceSettings>,
) -> Result<GateSettings, FlagError> {
    if !in_progress {
        if let Some(flag) = first_given(args) {
            return Err(flag_err(flag, "only has an effect with --in-progress"));
        }
        alerts::unused_alertmanager(silences)?;
        return Ok(GateSettings::default());
    }
    Ok(GateSettings {
        budgets: args.pod_disruption_budgets.unwrap_or(true),
        alerts: alerts::from_args(args, silences)?,
    })
}

/// The first gate flag given, if any.
fn first_given(args: &GateArgs) -> Option<&'static str> {
    [(
        args.pod_disruption_budgets.is_some(),
        "pod-disruption-budgets",
    )]
    .into_iter()
    .chain(alerts::given(args))
    .find_map(|(given, flag)| given.then_some(flag))
}
