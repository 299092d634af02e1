//! `kumaco run` flags, validated into the settings the controller uses.
//!
//! Go-syntax flags (selectors, durations, zones) go through kumaco's own Go-compatible
//! parsers, so a flag is accepted exactly when the same text would be in a window.

use std::time::Duration;

use jiff::tz::TimeZone;

use crate::cli::RunArgs;
use crate::duration;
use crate::schedule;
use crate::selector::{self, Selector};

/// A flag whose value kumaco cannot use.
#[derive(Debug, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct FlagError {
    pub flag: &'static str,
    pub message: String,
}

fn flag_err(flag: &'static str, message: impl ToString) -> FlagError {
    FlagError {
        flag,
        message: message.to_string(),
    }
}

/// Validated settings of one kumaco instance.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespaces: Vec<String>,
    /// Sent to the API server as the ConfigMap watch's label selector.
    pub window_selector: String,
    pub node_selector: Selector,
    pub default_zone: TimeZone,
    pub field_manager: String,
    pub exit_on_config_change: bool,
    pub resync_interval: Duration,
}

impl Settings {
    /// `pod_namespace` is `POD_NAMESPACE` (the namespace kumaco runs in), if set.
    pub fn from_args(args: &RunArgs, pod_namespace: Option<String>) -> Result<Settings, FlagError> {
        selector::parse(&args.window_selector).map_err(|e| flag_err("window-selector", e))?;
        let node_selector =
            selector::parse(&args.node_selector).map_err(|e| flag_err("node-selector", e))?;
        let default_zone = schedule::load_zone(&args.default_timezone)
            .map_err(|e| flag_err("default-timezone", e))?;
        let resync = duration::parse(&args.resync_interval)
            .map_err(|e| flag_err("resync-interval", e))?
            .as_nanos();
        if resync < 1_000_000_000 {
            return Err(flag_err("resync-interval", "must be at least 1s"));
        }
        if args.field_manager.is_empty() || args.field_manager.len() > 128 {
            return Err(flag_err("field-manager", "must be 1 to 128 characters"));
        }
        // The MaintenanceInProgress decision is not built yet: refuse its flags rather
        // than silently run without the safety they ask for.
        for (set, flag) in [
            (args.in_progress, "in-progress"),
            (!args.require_conditions.is_empty(), "require-condition"),
            (!args.block_conditions.is_empty(), "block-condition"),
            (args.stop_at_window_end, "stop-at-window-end"),
            (args.planned_lead_time.is_some(), "planned-lead-time"),
        ] {
            if set {
                return Err(flag_err(
                    flag,
                    "MaintenanceInProgress/MaintenancePlanned are not implemented in this version",
                ));
            }
        }
        parse_max_in_progress(&args.max_in_progress)?;
        duration::parse(&args.start_cutoff).map_err(|e| flag_err("start-cutoff", e))?;

        let namespaces = if args.namespaces.is_empty() {
            vec![pod_namespace.unwrap_or_else(|| "default".into())]
        } else {
            let mut ns = args.namespaces.clone();
            ns.sort();
            ns.dedup();
            ns
        };
        Ok(Settings {
            namespaces,
            window_selector: args.window_selector.clone(),
            node_selector,
            default_zone,
            field_manager: args.field_manager.clone(),
            exit_on_config_change: args.exit_on_config_change,
            resync_interval: Duration::from_nanos(resync as u64),
        })
    }
}

/// The concurrency ceiling: a count, or a percentage of the nodes in scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ceiling {
    Count(u32),
    Percent(u32),
}

pub fn parse_max_in_progress(s: &str) -> Result<Ceiling, FlagError> {
    let bad = || {
        flag_err(
            "max-in-progress",
            format!(
                "{s:?} is not a ceiling; expected a whole number of nodes (\"2\") or a percentage of the nodes in scope (\"10%\")"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn settings(extra: &[&str]) -> Result<Settings, FlagError> {
        let mut argv = vec!["kumaco", "run"];
        argv.extend_from_slice(extra);
        let Command::Run(args) = Cli::try_parse_from(argv).unwrap().command;
        Settings::from_args(&args, Some("kumaco".into()))
    }

    #[test]
    fn defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.namespaces, ["kumaco"]);
        assert!(s.node_selector.is_everything());
        assert_eq!(s.resync_interval, Duration::from_secs(300));
    }

    #[test]
    fn bad_flags_name_the_flag() {
        for (args, flag) in [
            (&["--node-selector=a in (b"][..], "--node-selector"),
            (
                &["--default-timezone=Europe/Berln"][..],
                "--default-timezone",
            ),
            (&["--resync-interval=5"][..], "--resync-interval"),
            (&["--max-in-progress=0"][..], "--max-in-progress"),
            (&["--max-in-progress=150%"][..], "--max-in-progress"),
            (&["--in-progress"][..], "--in-progress"),
        ] {
            let err = settings(args).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn ceilings() {
        assert_eq!(parse_max_in_progress("3").unwrap(), Ceiling::Count(3));
        assert_eq!(parse_max_in_progress("10%").unwrap(), Ceiling::Percent(10));
        assert!(parse_max_in_progress("-1").is_err());
        assert!(parse_max_in_progress("x%").is_err());
    }
}
