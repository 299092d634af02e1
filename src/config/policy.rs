//! `--in-progress` and the flags of its policy, validated into [`Policy`].

use crate::cli::PolicyArgs;
use crate::in_progress::{Ceiling, GroupCeiling, Policy};
use crate::selector::{self, Selector};

use super::{FlagError, flag_err, go_duration};

/// The policy of `--in-progress`, or `None` without it. A flag of the policy given
/// without `--in-progress` is refused rather than ignored: a deployer who sets a ceiling
/// and forgets `--in-progress` should learn it at start-up, not from a reboot storm.
pub fn from_args(args: &PolicyArgs) -> Result<Option<Policy>, FlagError> {
    if !args.in_progress {
        if let Some(flag) = first_given(args) {
            return Err(flag_err(flag, "only has an effect with --in-progress"));
        }
        return Ok(None);
    }
    build(args).map(Some)
}

/// The policy `kumaco plan --forecast` plays forward: as `kumaco run --in-progress` with
/// the same flags would decide, whether `--in-progress` is given or not.
pub fn for_forecast(args: &PolicyArgs) -> Result<Policy, FlagError> {
    build(args)
}

/// The first policy flag given, if any (none has an effect without `--in-progress`).
pub fn first_given(args: &PolicyArgs) -> Option<&'static str> {
    [
        (!args.require_conditions.is_empty(), "require-condition"),
        (!args.block_conditions.is_empty(), "block-condition"),
        (args.stop_at_window_end, "stop-at-window-end"),
        (args.max_in_progress.is_some(), "max-in-progress"),
        (args.start_cutoff.is_some(), "start-cutoff"),
        (args.count_unavailable.is_some(), "count-unavailable"),
        (args.complete_on_reboot.is_some(), "complete-on-reboot"),
        (!args.block_node_selectors.is_empty(), "block-node-selector"),
        (!args.block_pod_selectors.is_empty(), "block-pod-selector"),
        (!args.max_in_progress_per.is_empty(), "max-in-progress-per"),
        (args.start_interval.is_some(), "start-interval"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))
}

fn build(args: &PolicyArgs) -> Result<Policy, FlagError> {
    let ceiling = parse_max_in_progress(args.max_in_progress.as_deref().unwrap_or("1"))?;
    let start_cutoff = go_duration("start-cutoff", args.start_cutoff.as_deref().unwrap_or("0s"))?;
    if start_cutoff.is_negative() {
        return Err(flag_err("start-cutoff", "must not be negative"));
    }
    let start_interval = match &args.start_interval {
        None => None,
        Some(s) => {
            let d = go_duration("start-interval", s)?;
            if !d.is_positive() {
                return Err(flag_err("start-interval", "must be above 0, e.g. 15m"));
            }
            Some(d)
        }
    };
    let mut group_ceilings: Vec<GroupCeiling> = Vec::new();
    for g in &args.max_in_progress_per {
        let g = parse_group_ceiling(g)?;
        if group_ceilings.iter().any(|o| o.key == g.key) {
            return Err(flag_err(
                "max-in-progress-per",
                format!("{:?} is given twice; one ceiling per label key", g.key),
            ));
        }
        group_ceilings.push(g);
    }
    Ok(Policy {
        required: args.require_conditions.clone(),
        blocking: args.block_conditions.clone(),
        ceiling,
        stop_at_window_end: args.stop_at_window_end,
        start_cutoff,
        count_unavailable: args.count_unavailable.unwrap_or(true),
        block_node_selectors: selectors("block-node-selector", &args.block_node_selectors)?,
        block_pod_selectors: selectors("block-pod-selector", &args.block_pod_selectors)?,
        group_ceilings,
        start_interval,
        complete_on_reboot: args.complete_on_reboot.unwrap_or(true),
    })
}

/// Label selectors, each as a window's `nodeSelector` takes it; the empty one would
/// select everything, which is never meant here.
fn selectors(flag: &'static str, given: &[String]) -> Result<Vec<Selector>, FlagError> {
    given
        .iter()
        .map(|s| {
            if s.trim().is_empty() {
                return Err(flag_err(
                    flag,
                    "an empty selector selects everything; expected one such as app=postgres",
                ));
            }
            selector::parse(s).map_err(|e| flag_err(flag, e))
        })
        .collect()
}

/// `--max-in-progress`: `N` nodes or `P%` of them.
pub fn parse_max_in_progress(s: &str) -> Result<Ceiling, FlagError> {
    parse_ceiling("max-in-progress", s, "of the nodes in scope")
}

fn parse_ceiling(flag: &'static str, s: &str, of: &str) -> Result<Ceiling, FlagError> {
    let bad = || {
        flag_err(
            flag,
            format!(
                "{s:?} is not a ceiling; expected a whole number of nodes (\"2\") or a percentage {of} (\"10%\")"
            ),
        )
    };
    match s.strip_suffix('%') {
        Some(p) => match p.parse::<u32>() {
            Ok(p) if (1..=100).contains(&p) => Ok(Ceiling::Percent(p)),
            _ => Err(bad()),
        },
        None => match s.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(Ceiling::Count(n)),
            _ => Err(bad()),
        },
    }
}

/// `--max-in-progress-per KEY=N|P%`: the key a valid label key (as a selector takes
/// it), the ceiling as `--max-in-progress` takes it, of each group.
pub fn parse_group_ceiling(s: &str) -> Result<GroupCeiling, FlagError> {
    const FLAG: &str = "max-in-progress-per";
    let Some((key, ceiling)) = s.rsplit_once('=') else {
        return Err(flag_err(
            FLAG,
            format!(
                "{s:?} has no \"=\"; expected a node label key and a ceiling, e.g. topology.kubernetes.io/zone=1"
            ),
        ));
    };
    let valid = selector::parse(key)
        .ok()
        .is_some_and(|sel| sel.requirements().len() == 1 && sel.requirements()[0].key() == key);
    if !valid {
        return Err(flag_err(
            FLAG,
            format!("{key:?} is not a label key; expected one such as topology.kubernetes.io/zone"),
        ));
    }
    Ok(GroupCeiling {
        key: key.to_string(),
        ceiling: parse_ceiling(FLAG, ceiling, "of each group")?,
    })
}
