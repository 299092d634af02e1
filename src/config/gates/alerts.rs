//! The alerts gate's flags: `--block-alerts` and its filters (Alertmanager, at the
//! `--alertmanager-url` of the silences), `--prometheus-url` with `--block-query`, and
//! how both are read (`--block-alerts-interval`, `--alerts-unreachable`). Regular
//! expressions and matchers are compiled here, so that one that cannot work stops kumaco
//! at its start.

use std::time::Duration;

use jiff::SignedDuration;

use super::super::{FlagError, flag_err, go_duration};
use crate::alerts::{self, NameFilter};
use crate::cli::{AlertsUnreachable, GateArgs};
use crate::config::SilenceSettings;
use crate::gates::SourcePolicy;
use crate::http_client::Endpoint;
use crate::silence::{Matcher, MatcherSet};

/// How often the sources are read unless `--block-alerts-interval` says.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(15);
/// `--block-alerts-warm-up` unless given: Prometheus sends every firing alert again after
/// its `--rules.alert.resend-delay` (a minute by default), and evaluates rules every
/// interval (another minute by default), so a restarted Alertmanager knows of every
/// firing alert by then.
const DEFAULT_WARM_UP: SignedDuration = SignedDuration::from_mins(2);
/// After this many intervals without a good reading, a source counts as unreadable.
pub const STALE_AFTER_INTERVALS: u32 = 3;
/// Longest `--block-query`, in bytes: it is sent in a URL.
const MAX_QUERY_BYTES: usize = 4096;

/// The alerts gate, when `--block-alerts` or `--block-query` is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertGate {
    /// `--block-alerts`: Alertmanager's firing alerts hold (its endpoint is the
    /// silences').
    pub alertmanager: Option<AlertFilters>,
    /// `--prometheus-url` and its `--block-query`s.
    pub prometheus: Option<Queries>,
    /// Which node an alert or series is about: the silences' matcher sets, or the
    /// default set without `--alertmanager-url`.
    pub sets: Vec<MatcherSet>,
    /// `--block-alerts-interval`.
    pub interval: Duration,
    /// `--alerts-unreachable=allow`.
    pub allow_unreachable: bool,
    /// `--block-alerts-warm-up`.
    pub warm_up: SignedDuration,
}

impl AlertGate {
    /// How the sources' failures are treated: a reading stands for
    /// [`STALE_AFTER_INTERVALS`] intervals once reads fail.
    pub fn policy(&self) -> SourcePolicy {
        SourcePolicy {
            stale_after: SignedDuration::try_from(self.interval * STALE_AFTER_INTERVALS)
                .unwrap_or(SignedDuration::MAX),
            allow_unreachable: self.allow_unreachable,
        }
    }
}

/// Which of Alertmanager's alerts may hold.
#[derive(Clone, Debug)]
pub struct AlertFilters {
    /// `--block-alerts-ignore`, `--block-alerts-only`, as given.
    pub ignore: Option<String>,
    pub only: Option<String>,
    /// The two, compiled.
    pub names: NameFilter,
    /// `--block-alerts-matcher`: sent to Alertmanager as the list's `filter`.
    pub matchers: Vec<Matcher>,
}

/// Everything the filters are follows from their texts.
impl PartialEq for AlertFilters {
    fn eq(&self, other: &Self) -> bool {
        (&self.ignore, &self.only, &self.matchers) == (&other.ignore, &other.only, &other.matchers)
    }
}

impl Eq for AlertFilters {}

/// `--prometheus-url` and what is asked of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queries {
    pub endpoint: Endpoint,
    pub queries: Vec<String>,
}

/// The gate's flags as given, for the check that gate flags come with `--in-progress`.
pub fn given(args: &GateArgs) -> [(bool, &'static str); 10] {
    [
        (args.block_alerts, "block-alerts"),
        (args.block_alerts_ignore.is_some(), "block-alerts-ignore"),
        (args.block_alerts_only.is_some(), "block-alerts-only"),
        (
            !args.block_alerts_matchers.is_empty(),
            "block-alerts-matcher",
        ),
        (args.prometheus_url.is_some(), "prometheus-url"),
        (
            args.prometheus_bearer_token_file.is_some(),
            "prometheus-bearer-token-file",
        ),
        (args.prometheus_ca_file.is_some(), "prometheus-ca-file"),
        (!args.block_queries.is_empty(), "block-query"),
        (
            args.block_alerts_interval.is_some(),
            "block-alerts-interval",
        ),
        (args.alerts_unreachable.is_some(), "alerts-unreachable"),
    ]
}

/// The gate, if its flags ask for it (`--in-progress` is checked by the caller).
/// `silences`: the `--alertmanager-url` settings, whose endpoint and matcher sets the
/// gate shares.
pub fn from_args(
    args: &GateArgs,
    silences: Option<&SilenceSettings>,
) -> Result<Option<AlertGate>, FlagError> {
    let alertmanager = alertmanager(args, silences)?;
    let prometheus = prometheus(args)?;
    if alertmanager.is_none() && prometheus.is_none() {
        let how = [
            (
                args.block_alerts_interval.is_some(),
                "block-alerts-interval",
            ),
            (args.alerts_unreachable.is_some(), "alerts-unreachable"),
        ];
        if let Some((_, flag)) = how.iter().find(|(given, _)| *given) {
            return Err(flag_err(flag, "needs --block-alerts or --block-query"));
        }
        return Ok(None);
    }
    let interval = match &args.block_alerts_interval {
        None => DEFAULT_INTERVAL,
        Some(text) => {
            let d = go_duration("block-alerts-interval", text)?;
            if d < SignedDuration::from_secs(1) || d > SignedDuration::from_mins(10) {
                return Err(flag_err(
                    "block-alerts-interval",
                    "must be between 1s and 10m",
                ));
            }
            Duration::try_from(d).unwrap_or(DEFAULT_INTERVAL)
        }
    };
    let warm_up = match &args.block_alerts_warm_up {
        None => DEFAULT_WARM_UP,
        Some(_) if alertmanager.is_none() => {
            return Err(flag_err("block-alerts-warm-up", "needs --block-alerts"));
        }
        Some(text) => {
            let d = go_duration("block-alerts-warm-up", text)?;
            if d.is_negative() || d > SignedDuration::from_mins(10) {
                return Err(flag_err(
                    "block-alerts-warm-up",
                    "must be between 0s and 10m",
                ));
            }
            d
        }
    };
    let sets = match silences {
        Some(s) => s.rules.sets.clone(),
        None => {
            crate::silence::parse_sets(true, &[]).map_err(|e| flag_err("silence-matchers", e))?
        }
    };
    Ok(Some(AlertGate {
        alertmanager,
        prometheus,
        sets,
        interval,
        allow_unreachable: args.alerts_unreachable == Some(AlertsUnreachable::Allow),
        warm_up,
    }))
}

fn alertmanager(
    args: &GateArgs,
    silences: Option<&SilenceSettings>,
) -> Result<Option<AlertFilters>, FlagError> {
    if !args.block_alerts {
        let filters = [
            (args.block_alerts_ignore.is_some(), "block-alerts-ignore"),
            (args.block_alerts_only.is_some(), "block-alerts-only"),
            (
                !args.block_alerts_matchers.is_empty(),
                "block-alerts-matcher",
            ),
        ];
        if let Some((_, flag)) = filters.iter().find(|(given, _)| *given) {
            return Err(flag_err(flag, "needs --block-alerts"));
        }
        unused_alertmanager(silences)?;
        return Ok(None);
    }
    if silences.is_none() {
        return Err(flag_err(
            "block-alerts",
            "needs --alertmanager-url (the Alertmanager whose alerts hold starts)",
        ));
    }
    let names = NameFilter::new(
        args.block_alerts_ignore.as_deref(),
        args.block_alerts_only.as_deref(),
    )
    .map_err(|e| {
        let flag = match (&args.block_alerts_ignore, &e) {
            (Some(re), alerts::FilterError::Regex(bad, _)) if re == bad => "block-alerts-ignore",
            _ => "block-alerts-only",
        };
        flag_err(flag, e)
    })?;
    let mut matchers: Vec<Matcher> = args
        .block_alerts_matchers
        .iter()
        .map(|m| alerts::parse_filter(m).map_err(|e| flag_err("block-alerts-matcher", e)))
        .collect::<Result<_, _>>()?;
    // An Alertmanager shared by clusters: only this cluster's alerts.
    matchers.extend(silences.iter().flat_map(|s| s.cluster.iter().cloned()));
    Ok(Some(AlertFilters {
        ignore: args.block_alerts_ignore.clone(),
        only: args.block_alerts_only.clone(),
        names,
        matchers,
    }))
}

/// `--silences=false` without `--block-alerts`: nothing would read the Alertmanager.
pub fn unused_alertmanager(silences: Option<&SilenceSettings>) -> Result<(), FlagError> {
    if silences.is_some_and(|s| !s.hold) {
        return Err(flag_err(
            "silences",
            "false leaves --alertmanager-url unused: add --block-alerts, or drop both",
        ));
    }
    Ok(())
}

fn prometheus(args: &GateArgs) -> Result<Option<Queries>, FlagError> {
    let Some(url) = &args.prometheus_url else {
        let needs_url = [
            (
                args.prometheus_bearer_token_file.is_some(),
                "prometheus-bearer-token-file",
            ),
            (args.prometheus_ca_file.is_some(), "prometheus-ca-file"),
            (!args.block_queries.is_empty(), "block-query"),
        ];
        if let Some((_, flag)) = needs_url.iter().find(|(given, _)| *given) {
            return Err(flag_err(flag, "needs --prometheus-url"));
        }
        return Ok(None);
    };
    if args.block_queries.is_empty() {
        return Err(flag_err(
            "prometheus-url",
            "has no effect without --block-query",
        ));
    }
    let mut queries: Vec<String> = Vec::new();
    for q in &args.block_queries {
        let q = q.trim();
        if q.is_empty() {
            return Err(flag_err(
                "block-query",
                "is empty: expected a PromQL query, e.g. 'ALERTS{alertstate=\"firing\"}'",
            ));
        }
        if q.len() > MAX_QUERY_BYTES {
            return Err(flag_err(
                "block-query",
                format!("is {} bytes long, more than {MAX_QUERY_BYTES}", q.len()),
            ));
        }
        if !queries.iter().any(|known| known == q) {
            queries.push(q.to_string());
        }
    }
    let endpoint = Endpoint {
        urls: vec![url.clone()],
        bearer_token_file: args.prometheus_bearer_token_file.clone(),
        ca_file: args.prometheus_ca_file.clone(),
        ..Endpoint::default()
    };
    crate::config::check_endpoint(&endpoint, "prometheus-url")?;
    Ok(Some(Queries { endpoint, queries }))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};
    use crate::config::Settings;

    fn settings(extra: &[&str]) -> Result<Settings, String> {
        let mut argv = vec!["kumaco", "run"];
        argv.extend_from_slice(extra);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Command::Run(args) = cli.command else {
            unreachable!("argv starts with run")
        };
        Settings::from_args(&args, None, None).map_err(|e| e.to_string())
    }

    fn gate(extra: &[&str]) -> Result<Option<AlertGate>, String> {
        let mut argv = vec!["--in-progress"];
        argv.extend_from_slice(extra);
        settings(&argv).map(|s| s.gates.alerts)
    }

    const AM: &str = "--alertmanager-url=http://am:9093";
    const PROM: &str = "--prometheus-url=http://prometheus:9090";

    #[test]
    fn off_unless_asked_and_only_with_in_progress() {
        assert_eq!(gate(&[]).unwrap(), None);
        assert_eq!(gate(&[AM]).unwrap(), None);
        let e = settings(&[AM, "--block-alerts"]).unwrap_err();
        assert_eq!(e, "--block-alerts: only has an effect with --in-progress");
        let e = settings(&[PROM, "--block-query=up == 0"]).unwrap_err();
        assert_eq!(e, "--prometheus-url: only has an effect with --in-progress");
    }

    #[test]
    fn alertmanager_alerts_with_kureds_filters_and_matchers() {
        let g = gate(&[
            AM,
            "--block-alerts",
            "--block-alerts-ignore=^(Watchdog|InfoInhibitor)$",
            r#"--block-alerts-matcher=severity=~"warning|critical""#,
            r#"--silence-matchers=instance=~"{{name}}(:[0-9]+)?""#,
        ])
        .unwrap()
        .unwrap();
        let filters = g.alertmanager.clone().unwrap();
        assert!(!filters.names.lets("Watchdog") && filters.names.lets("KubeAPIDown"));
        assert_eq!(
            filters.matchers[0].to_string(),
            r#"severity=~"warning|critical""#
        );
        assert_eq!(g.sets.len(), 2, "the silences' sets say whose an alert is");
        assert_eq!(g.interval, Duration::from_secs(15));
        assert_eq!(g.policy().stale_after, SignedDuration::from_secs(45));
        assert!(!g.allow_unreachable);
        assert!(g.prometheus.is_none());
    }

    #[test]
    fn prometheus_queries_alone_scope_by_the_default_set() {
        let g = gate(&[
            PROM,
            "--block-query=up == 0",
            "--block-query= up == 0 ",
            "--block-query=ALERTS",
            "--block-alerts-interval=30s",
            "--alerts-unreachable=allow",
        ])
        .unwrap()
        .unwrap();
        let q = g.prometheus.unwrap();
        assert_eq!(q.queries, ["up == 0", "ALERTS"]);
        assert_eq!(q.endpoint.urls, ["http://prometheus:9090"]);
        assert_eq!(g.sets[0].to_string(), r#"node="{{name}}""#);
        assert_eq!(g.interval, Duration::from_secs(30));
        assert!(g.allow_unreachable);
        assert!(g.alertmanager.is_none());
    }

    /// Each bad combination, and the error it must give.
    #[test]
    fn bad_flags_say_what_is_wrong() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--block-alerts"],
                "--block-alerts: needs --alertmanager-url (the Alertmanager whose alerts hold starts)",
            ),
            (
                &[AM, "--block-alerts-ignore=Watchdog"],
                "--block-alerts-ignore: needs --block-alerts",
            ),
            (
                &[AM, "--block-alerts", "--block-alerts-ignore=Watch(dog"],
                "--block-alerts-ignore: \"Watch(dog\" is not a regular expression: ",
            ),
            (
                &[AM, "--block-alerts", "--block-alerts-only=[z-a]"],
                "--block-alerts-only: \"[z-a]\" is not a regular expression: ",
            ),
            (
                &[
                    AM,
                    "--block-alerts",
                    "--block-alerts-matcher=severity=critical",
                ],
                "--block-alerts-matcher: \"severity=critical\": expected LABEL OP \"VALUE\"",
            ),
            (
                &[
                    AM,
                    "--block-alerts",
                    r#"--block-alerts-matcher=node="{{name}}""#,
                ],
                "--block-alerts-matcher: \"node=\\\"{{name}}\\\"\": a matcher of every alert cannot name a node",
            ),
            (
                &[
                    AM,
                    "--block-alerts",
                    r#"--silence-matchers=instance=~"{{name}}(""#,
                ],
                "--silence-matchers: \"instance=~\\\"{{name}}(\\\"\": a regular expression of the set does not compile: ",
            ),
            (
                &["--block-query=up == 0"],
                "--block-query: needs --prometheus-url",
            ),
            (
                &["--prometheus-ca-file=/ca.pem"],
                "--prometheus-ca-file: needs --prometheus-url",
            ),
            (
                &[PROM],
                "--prometheus-url: has no effect without --block-query",
            ),
            (&[PROM, "--block-query= "], "--block-query: is empty"),
            (
                &["--block-alerts-interval=10s"],
                "--block-alerts-interval: needs --block-alerts or --block-query",
            ),
            (
                &[PROM, "--block-query=x", "--block-alerts-interval=500ms"],
                "--block-alerts-interval: must be between 1s and 10m",
            ),
            (
                &[PROM, "--block-query=x", "--block-alerts-interval=soon"],
                "--block-alerts-interval: ",
            ),
            (
                &[AM, "--silences=false"],
                "--silences: false leaves --alertmanager-url unused",
            ),
        ];
        for (flags, expected) in cases {
            let e = gate(flags).map(|_| ()).unwrap_err();
            assert!(e.starts_with(expected), "{flags:?}: {e}");
        }
        let e = gate(&[PROM, "--block-query=x", "--alerts-unreachable=maybe"]).unwrap_err();
        assert!(e.contains("[possible values: block, allow]"), "{e}");
        let long = format!("--block-query={}", "x".repeat(5000));
        let e = gate(&[PROM, &long]).unwrap_err();
        assert!(e.contains("more than 4096"), "{e}");
    }

    #[test]
    fn silences_false_keeps_the_alertmanager_for_the_gate() {
        let s = settings(&["--in-progress", AM, "--silences=false", "--block-alerts"]).unwrap();
        assert!(!s.silences.unwrap().hold);
        assert!(s.gates.alerts.unwrap().alertmanager.is_some());
    }
}
