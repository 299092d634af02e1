//! `kumaco run` flags, validated into the settings the controller uses.
//!
//! Go-syntax flags (selectors, durations, zones) go through kumaco's own Go-compatible
//! parsers, so a flag is accepted exactly when the same text would be in a window.

pub(crate) mod gates;
pub(crate) mod notify;
pub(crate) mod policy;
pub(crate) mod silences;

use std::time::Duration;

use jiff::tz::TimeZone;

use crate::cli::RunArgs;
use crate::duration;
use crate::in_progress::Policy;
use crate::node::names::Names;
use crate::schedule;
use crate::selector::{self, Selector};
pub use gates::GateSettings;
pub use notify::NotifySettings;
pub use silences::SilenceSettings;

/// A flag whose value kumaco cannot use.
#[derive(Debug, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct FlagError {
    pub flag: &'static str,
    pub message: String,
}

pub(crate) fn flag_err(flag: &'static str, message: impl ToString) -> FlagError {
    FlagError {
        flag,
        message: message.to_string(),
    }
}

/// Checks an endpoint's URLs (`url_flag` names them); its files are read when used.
pub(crate) fn check_endpoint(
    endpoint: &crate::http_client::Endpoint,
    url_flag: &'static str,
) -> Result<(), FlagError> {
    let prefix = url_flag.trim_end_matches("-url");
    endpoint.check(prefix).map(drop).map_err(|e| match e {
        crate::http_client::HttpError::Url { url, message, .. } => {
            flag_err(url_flag, format!("{url:?}: {message}"))
        }
        e => flag_err(url_flag, e),
    })
}

/// Timings and identity of one candidate.
#[derive(Clone, Debug)]
pub struct Election {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
    /// `--watch-timeout`, for the watch on the Lease: a swallowed one is replaced after
    /// this and kube's grace on top.
    pub watch_timeout_secs: u32,
}

/// Validated settings of one kumaco instance.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The instance's own Lease (`--lease-name` in its namespace), which names it: the
    /// pause Lease is named after it, with or without leader election.
    pub lease: crate::peers::LeaseRef,
    pub namespaces: Vec<String>,
    /// Sent to the API server as the ConfigMap watch's label selector.
    pub window_selector: String,
    pub node_selector: Selector,
    pub default_zone: TimeZone,
    pub field_manager: String,
    /// `Some` with `--planned-lead-time`.
    pub planned_lead_time: Option<jiff::SignedDuration>,
    pub exit_on_config_change: bool,
    pub resync_interval: Duration,
    /// `--forecast-interval`: least time between two forecasts (`None`: no forecast).
    pub forecast_interval: Option<Duration>,
    /// `--watch-timeout`, in whole seconds (the API's unit), rounded up.
    pub watch_timeout_secs: u32,
    /// `Some` with `--in-progress`.
    pub in_progress: Option<Policy>,
    /// `Some` with `--leader-elect=true`, never with `--dry-run`.
    pub election: Option<Election>,
    /// `--dry-run`: decide, log and export; write nothing.
    pub dry_run: bool,
    /// `--node-events`.
    pub node_events: bool,
    /// `Some` with `--alertmanager-url`.
    pub silences: Option<SilenceSettings>,
    /// The health gates (with `--in-progress`).
    pub gates: GateSettings,
    /// The notifications: the sinks (none without `--notify-url` or `--notify-config`)
    /// and what tells a transition.
    pub notify: NotifySettings,
    /// `--under-maintenance-condition`, `--in-progress-condition`.
    pub condition_names: Names,
    /// Why other instances cannot tell that this one runs, if they cannot: its field
    /// manager does not name a Lease it holds (`peers`).
    pub invisible_to_peers: Option<&'static str>,
}

impl Settings {
    /// `pod_namespace` and `pod_name` are `POD_NAMESPACE` and `POD_NAME` (where kumaco
    /// runs, and who it is in leader election), if set.
    pub fn from_args(
        args: &RunArgs,
        pod_namespace: Option<String>,
        pod_name: Option<String>,
    ) -> Result<Settings, FlagError> {
        selector::parse(&args.window_args.window_selector)
            .map_err(|e| flag_err("window-selector", e))?;
        let node_selector =
            selector::parse(&args.node_selector).map_err(|e| flag_err("node-selector", e))?;
        let default_zone = schedule::load_zone(&args.window_args.default_timezone)
            .map_err(|e| flag_err("default-timezone", e))?;
        let resync = duration::parse(&args.resync_interval)
            .map_err(|e| flag_err("resync-interval", e))?
            .as_nanos();
        if resync < 1_000_000_000 {
            return Err(flag_err("resync-interval", "must be at least 1s"));
        }
        let watch_timeout = duration::parse(&args.watch_timeout)
            .map_err(|e| flag_err("watch-timeout", e))?
            .as_nanos();
        if !(10_000_000_000..=3_600_000_000_000).contains(&watch_timeout) {
            return Err(flag_err("watch-timeout", "must be between 10s and 1h"));
        }
        let watch_timeout_secs = ((watch_timeout + 999_999_999) / 1_000_000_000) as u32;
        let home = pod_namespace.clone().unwrap_or_else(|| "default".into());
        let field_manager = match &args.field_manager {
            Some(m) => m.clone(),
            None => default_field_manager(&home, &args.lease_name),
        };
        if field_manager.is_empty() || field_manager.len() > 128 {
            return Err(flag_err(
                "field-manager",
                format!(
                    "{field_manager:?} must be 1 to 128 characters (the default is derived from the namespace and --lease-name)"
                ),
            ));
        }
        let forecast_interval = go_duration("forecast-interval", &args.forecast_interval)?;
        if forecast_interval.is_negative()
            || (forecast_interval.is_positive() && forecast_interval.as_secs() < 10)
        {
            return Err(flag_err(
                "forecast-interval",
                "must be 0 (no forecast) or at least 10s",
            ));
        }
        let forecast_interval = (forecast_interval.is_positive())
            .then(|| Duration::try_from(forecast_interval).unwrap_or(Duration::MAX));
        let planned_lead_time = match &args.planned_lead_time {
            None => None,
            Some(s) => {
                let d = go_duration("planned-lead-time", s)?;
                if !d.is_positive() {
                    return Err(flag_err("planned-lead-time", "must be above 0, e.g. 1h"));
                }
                Some(d)
            }
        };
        let in_progress = policy::from_args(&args.policy)?;
        let silences = silences::from_args(&args.silences, &field_manager, in_progress.is_some())?;
        let gates = gates::from_args(&args.gates, in_progress.is_some(), silences.as_ref())?;
        let mut notify = notify::from_args(&args.notify)?;
        notify.rules.instance = field_manager.clone();
        notify.rules.in_progress = in_progress.is_some();
        notify.rules.required = in_progress
            .as_ref()
            .map(|p| p.required.clone())
            .unwrap_or_default();
        notify.rules.planned_lead_time = planned_lead_time;
        let reads: Vec<String> = args
            .policy
            .require_conditions
            .iter()
            .chain(&args.policy.block_conditions)
            .cloned()
            .collect();
        let condition_names = Names::new(
            &args.condition_names.under_maintenance_condition,
            &args.condition_names.in_progress_condition,
            &reads,
        )
        .map_err(|e| flag_err(e.flag(), e))?;
        // A shadow must not take the Lease of the live instance it shadows (that would
        // stop the live one writing), nor need a Lease of its own: it writes nothing.
        let election = if args.leader_elect && !args.dry_run {
            let lease_duration = positive("lease-duration", &args.lease_duration)?;
            let renew_deadline = positive("lease-renew-deadline", &args.lease_renew_deadline)?;
            let retry_period = positive("lease-retry-period", &args.lease_retry_period)?;
            if renew_deadline >= lease_duration {
                return Err(flag_err(
                    "lease-renew-deadline",
                    "must be less than --lease-duration (the leader must stop before others may start)",
                ));
            }
            if retry_period >= renew_deadline {
                return Err(flag_err(
                    "lease-retry-period",
                    "must be less than --lease-renew-deadline",
                ));
            }
            Some(Election {
                namespace: home.clone(),
                name: args.lease_name.clone(),
                identity: pod_name.unwrap_or_else(default_identity),
                lease_duration,
                renew_deadline,
                retry_period,
                watch_timeout_secs,
            })
        } else {
            None
        };

        let namespaces = if args.namespaces.is_empty() {
            vec![pod_namespace.unwrap_or_else(|| "default".into())]
        } else {
            let mut ns = args.namespaces.clone();
            ns.sort();
            ns.dedup();
            ns
        };
        let invisible_to_peers = if args.dry_run {
            None
        } else if field_manager != default_field_manager(&home, &args.lease_name) {
            Some(
                "--field-manager is not kumaco/<namespace>/<lease name> of this instance's own \
                 Lease",
            )
        } else if election.is_none() {
            Some("--leader-elect=false: this instance holds no Lease")
        } else {
            None
        };
        Ok(Settings {
            lease: crate::peers::LeaseRef {
                namespace: home.clone(),
                name: args.lease_name.clone(),
            },
            invisible_to_peers,
            namespaces,
            window_selector: args.window_args.window_selector.clone(),
            node_selector,
            default_zone,
            field_manager,
            planned_lead_time,
            exit_on_config_change: args.exit_on_config_change,
            resync_interval: Duration::from_nanos(resync as u64),
            forecast_interval,
            watch_timeout_secs,
            in_progress,
            election,
            dry_run: args.dry_run,
            node_events: args.node_events,
            condition_names,
            silences,
            gates,
            notify,
        })
    }
}

pub(crate) fn go_duration(flag: &'static str, s: &str) -> Result<jiff::SignedDuration, FlagError> {
    Ok(duration::parse(s)
        .map_err(|e| flag_err(flag, e))?
        .to_signed())
}

fn positive(flag: &'static str, s: &str) -> Result<Duration, FlagError> {
    let d = go_duration(flag, s)?;
    Duration::try_from(d)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| flag_err(flag, "must be above 0"))
}

/// The host name, else a random-enough name: identities must differ between replicas.
fn default_identity() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("kumaco-{}", std::process::id()))
}

/// `kumaco/<namespace>/<lease name>`: the replicas of one instance share their Lease and
/// so their field manager; two instances differ in one or the other.
pub fn default_field_manager(namespace: &str, lease_name: &str) -> String {
    format!("kumaco/{namespace}/{lease_name}")
}

pub use policy::{parse_group_ceiling, parse_max_in_progress};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::in_progress::Ceiling;
    use crate::notice::Kind;
    use clap::Parser;

    fn settings(extra: &[&str]) -> Result<Settings, FlagError> {
        let mut argv = vec!["kumaco", "run"];
        argv.extend_from_slice(extra);
        let Command::Run(args) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!("argv starts with run")
        };
        Settings::from_args(&args, Some("kumaco".into()), Some("pod-a".into()))
    }

    #[test]
    fn defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.namespaces, ["kumaco"]);
        assert!(s.node_selector.is_everything());
        assert_eq!(s.resync_interval, Duration::from_secs(300));
        assert_eq!(s.watch_timeout_secs, 40);
        assert!(s.in_progress.is_none());
        let e = s.election.unwrap();
        assert_eq!(
            (e.namespace.as_str(), e.identity.as_str()),
            ("kumaco", "pod-a")
        );
        assert_eq!(e.lease_duration, Duration::from_secs(15));
        assert_eq!(s.field_manager, "kumaco/kumaco/kumaco");
        assert_eq!(s.planned_lead_time, None);
    }

    #[test]
    fn the_default_field_manager_differs_per_instance() {
        let other = settings(&["--lease-name=pool-b"]).unwrap();
        assert_eq!(other.field_manager, "kumaco/kumaco/pool-b");
        let set = settings(&["--field-manager=mine", "--planned-lead-time=1h"]).unwrap();
        assert_eq!(set.field_manager, "mine");
        assert_eq!(
            set.planned_lead_time,
            Some(jiff::SignedDuration::from_hours(1))
        );
    }

    #[test]
    fn reboots_complete_by_default_and_the_flag_needs_in_progress() {
        let on = settings(&["--in-progress"]).unwrap().in_progress.unwrap();
        assert!(on.complete_on_reboot);
        let off = settings(&["--in-progress", "--complete-on-reboot=false"]).unwrap();
        assert!(!off.in_progress.unwrap().complete_on_reboot);
        let e = settings(&["--complete-on-reboot=false"]).unwrap_err();
        assert_eq!(e.flag, "complete-on-reboot");
    }

    #[test]
    fn condition_names_are_checked_and_name_their_flag() {
        let kured = settings(&["--in-progress-condition=kured.dev/maintenance-in-progress"]);
        assert!(kured.is_ok());
        let e = settings(&[
            "--in-progress",
            "--require-condition=kured.dev/reboot-required",
            "--in-progress-condition=kured.dev/reboot-required",
        ])
        .unwrap_err();
        assert_eq!(e.flag, "in-progress-condition");
        assert!(e.message.contains("--require-condition"), "{e}");
        let e = settings(&["--under-maintenance-condition=not a type"]).unwrap_err();
        assert_eq!(e.flag, "under-maintenance-condition");
        assert!(e.message.contains("not a valid condition type"), "{e}");
    }

    #[test]
    fn in_progress_policy() {
        let s = settings(&[
            "--in-progress",
            "--require-condition=kured.dev/RebootRequired",
            "--max-in-progress=10%",
            "--start-cutoff=30m",
            "--leader-elect=false",
        ])
        .unwrap();
        let p = s.in_progress.unwrap();
        assert_eq!(p.required, ["kured.dev/RebootRequired"]);
        assert_eq!(p.ceiling, Ceiling::Percent(10));
        assert_eq!(p.start_cutoff, jiff::SignedDuration::from_mins(30));
        assert!(s.election.is_none());
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
            (&["--watch-timeout=1s"][..], "--watch-timeout"),
            (&["--watch-timeout=2h"][..], "--watch-timeout"),
            (
                &["--in-progress", "--max-in-progress=0"][..],
                "--max-in-progress",
            ),
            (
                &["--in-progress", "--max-in-progress=150%"][..],
                "--max-in-progress",
            ),
            (&["--require-condition=x"][..], "--require-condition"),
            (&["--max-in-progress=2"][..], "--max-in-progress"),
            (&["--start-cutoff=5m"][..], "--start-cutoff"),
            (&["--stop-at-window-end"][..], "--stop-at-window-end"),
            (&["--block-condition=x"][..], "--block-condition"),
            (&["--planned-lead-time=0s"][..], "--planned-lead-time"),
            (&["--field-manager="][..], "--field-manager"),
            (
                &["--lease-renew-deadline=20s"][..],
                "--lease-renew-deadline",
            ),
            (
                &["--in-progress", "--start-cutoff=-1m"][..],
                "--start-cutoff",
            ),
        ] {
            let err = settings(args).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn a_dry_run_takes_no_part_in_leader_election() {
        let s = settings(&["--dry-run"]).unwrap();
        assert!(s.dry_run);
        assert!(
            s.election.is_none(),
            "a shadow must not take the live Lease"
        );
        assert_eq!(
            s.field_manager, "kumaco/kumaco/kumaco",
            "a shadow reads the ownership of the instance it would become"
        );
        assert!(!s.node_events);
        assert!(settings(&["--node-events"]).unwrap().node_events);
    }

    #[test]
    fn the_budgets_gate_is_on_with_in_progress_and_refused_without() {
        assert!(!settings(&[]).unwrap().gates.budgets);
        assert!(settings(&["--in-progress"]).unwrap().gates.budgets);
        let off = settings(&["--in-progress", "--pod-disruption-budgets=false"]);
        assert!(!off.unwrap().gates.budgets);
        let e = settings(&["--pod-disruption-budgets=true"]).unwrap_err();
        assert!(
            e.to_string().contains("--pod-disruption-budgets")
                && e.to_string().contains("--in-progress"),
            "{e}"
        );
    }

    #[test]
    fn silences_need_an_alertmanager_and_valid_matchers() {
        assert!(settings(&[]).unwrap().silences.is_none());
        let s = settings(&["--alertmanager-url=http://am:9093", "--in-progress"])
            .unwrap()
            .silences
            .unwrap();
        assert_eq!(s.rules.created_by, "kumaco/kumaco/kumaco");
        assert!(s.rules.in_progress);
        assert_eq!(s.rules.lease, jiff::SignedDuration::from_mins(30));
        assert_eq!(s.interval, Duration::from_secs(30));
        let short = settings(&["--alertmanager-url=http://am", "--silence-lease=20s"]);
        assert_eq!(
            short.unwrap().silences.unwrap().interval,
            Duration::from_secs(5)
        );
        for (args, flag) in [
            (
                &["--silence-tail=1m"][..],
                "--silence-tail: needs --alertmanager-url",
            ),
            (
                &["--alertmanager-url=http://am", "--silence-lease=5s"][..],
                "--silence-lease",
            ),
            (
                &[
                    "--alertmanager-url=http://am",
                    "--silence-matcher=job=\"x\"",
                ][..],
                "--silence-matcher: \"job=\\\"x\\\"\": no matcher names the node",
            ),
        ] {
            let err = settings(args).unwrap_err().to_string();
            assert!(err.starts_with(flag), "{args:?}: {err}");
        }
    }

    #[test]
    fn notifications_from_kured_flags_and_their_rules_from_the_instance() {
        let s = settings(&[
            "--in-progress",
            "--require-condition=kured.dev/RebootRequired",
            "--planned-lead-time=1h",
            "--notify-url=slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
            "--message-template-drain=Draining %s",
            "--notify-transitions=started,completed",
            "--cluster-name=prod",
            "--notify-not-back-after=0",
        ])
        .unwrap();
        let n = &s.notify;
        assert_eq!(n.sinks.len(), 1);
        assert_eq!(n.sinks[0].name, "notify-url");
        assert_eq!(n.sinks[0].kinds, [Kind::Started, Kind::Completed]);
        assert_eq!(n.rules.cluster, "prod");
        assert_eq!(n.rules.instance, s.field_manager);
        assert!(n.rules.in_progress);
        assert_eq!(n.rules.required, ["kured.dev/RebootRequired"]);
        assert_eq!(
            n.rules.planned_lead_time,
            Some(jiff::SignedDuration::from_hours(1))
        );
        assert_eq!(
            n.rules.waiting_after,
            Some(jiff::SignedDuration::from_hours(1))
        );
        assert_eq!(n.rules.not_back_after, None);
        assert!(settings(&[]).unwrap().notify.sinks.is_empty());
        for (args, expected) in [
            (
                &["--message-template-drain=x %s"][..],
                "--message-template-drain: needs --notify-url",
            ),
            (
                &[
                    "--notify-url=slack://T0/B0/secret-token",
                    "--message-template-uncordon=%d",
                ][..],
                "--message-template-uncordon",
            ),
            (&["--notify-url=ftp://secret-token"][..], "--notify-url"),
            (
                &["--notify-waiting-after=-1m"][..],
                "--notify-waiting-after",
            ),
            (&["--cluster-name= "][..], "--cluster-name"),
            (
                &["--notify-config=/nonexistent/sinks.yaml"][..],
                "--notify-config: /nonexistent",
            ),
        ] {
            let err = settings(args).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{args:?}: {err}");
            assert!(!err.contains("secret-token"), "{err}");
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
