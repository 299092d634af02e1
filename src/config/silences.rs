//! The silence flags (`--alertmanager-url`, `--silence-*`, `--silences`), validated into
//! the client's endpoint and the core's rules.

use std::time::Duration;

use jiff::SignedDuration;

use super::{FlagError, flag_err, go_duration};
use crate::alertmanager::Endpoint;
use crate::cli::SilenceArgs;
use crate::silence::{self, Matcher, MatcherSet, Rules};

/// The longest time between two rounds of the silences without a wake-up.
const MAX_ROUND_INTERVAL: Duration = Duration::from_secs(30);

/// With `--alertmanager-url`.
#[derive(Clone, Debug)]
pub struct SilenceSettings {
    pub endpoint: Endpoint,
    /// `--silences`: hold them. Without, Alertmanager is there for `--block-alerts`, and
    /// the rules' matcher sets only say which node an alert is about.
    pub hold: bool,
    /// `in_progress` and `created_by` are the instance's.
    pub rules: Rules,
    /// Time between two rounds without a wake-up: a quarter of the lease, at most
    /// [`MAX_ROUND_INTERVAL`], so a silence is renewed well before it ends.
    pub interval: Duration,
    /// `--cluster-label`: this cluster's label, in every silence (the rules' sets hold
    /// it already) and in the alerts gate's filter.
    pub cluster: Vec<Matcher>,
}

pub fn from_args(
    args: &SilenceArgs,
    created_by: &str,
    in_progress: bool,
) -> Result<Option<SilenceSettings>, FlagError> {
    if args.alertmanager_urls.is_empty() {
        let set = [
            (
                "alertmanager-bearer-token-file",
                args.alertmanager_bearer_token_file.is_some(),
            ),
            (
                "alertmanager-basic-auth-file",
                args.alertmanager_basic_auth_file.is_some(),
            ),
            ("alertmanager-ca-file", args.alertmanager_ca_file.is_some()),
            (
                "alertmanager-cert-file",
                args.alertmanager_cert_file.is_some(),
            ),
            ("silence-lease", args.silence_lease.is_some()),
            ("silence-tail", args.silence_tail.is_some()),
            ("silence-while-recovering", args.silence_while_recovering),
            ("silence-max-recovery", args.silence_max_recovery.is_some()),
            ("cluster-label", !args.cluster_labels.is_empty()),
            ("silence-matchers", !args.silence_matcher_sets.is_empty()),
            (
                "silence-default-matchers",
                args.silence_default_matchers.is_some(),
            ),
            ("silence-matcher", !args.silence_matchers.is_empty()),
            (
                "silence-max-creates-per-minute",
                args.silence_max_creates_per_minute.is_some(),
            ),
            ("silences", args.silences.is_some()),
        ];
        if let Some((flag, _)) = set.iter().find(|(_, on)| *on) {
            return Err(flag_err(flag, "needs --alertmanager-url"));
        }
        return Ok(None);
    }
    let hold = args.silences.unwrap_or(true);
    if !hold {
        // What only holding silences reads is refused rather than ignored.
        let unused = [
            ("silence-lease", args.silence_lease.is_some()),
            ("silence-tail", args.silence_tail.is_some()),
            ("silence-while-recovering", args.silence_while_recovering),
            ("silence-max-recovery", args.silence_max_recovery.is_some()),
            (
                "silence-max-creates-per-minute",
                args.silence_max_creates_per_minute.is_some(),
            ),
        ];
        if let Some((flag, _)) = unused.iter().find(|(_, on)| *on) {
            return Err(flag_err(flag, "has no effect with --silences=false"));
        }
    }
    let lease = go_duration(
        "silence-lease",
        args.silence_lease.as_deref().unwrap_or("30m"),
    )?;
    if lease < SignedDuration::from_secs(20) {
        return Err(flag_err("silence-lease", "must be at least 20s"));
    }
    let tail = go_duration("silence-tail", args.silence_tail.as_deref().unwrap_or("5m"))?;
    if tail.is_negative() {
        return Err(flag_err("silence-tail", "must not be negative"));
    }
    let while_recovering = match (args.silence_while_recovering, &args.silence_max_recovery) {
        (false, _) => None,
        (true, text) => {
            let d = go_duration("silence-max-recovery", text.as_deref().unwrap_or("30m"))?;
            if d <= SignedDuration::ZERO {
                return Err(flag_err("silence-max-recovery", "must be more than 0s"));
            }
            Some(d)
        }
    };
    let cluster = args
        .cluster_labels
        .iter()
        .map(|l| cluster_label(l))
        .collect::<Result<Vec<_>, _>>()?;
    let sets = matcher_sets(args)?
        .into_iter()
        .map(|set| set.with(&cluster))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| flag_err("cluster-label", e))?;
    let max_creates_per_minute = args.silence_max_creates_per_minute.unwrap_or(60);
    if max_creates_per_minute == 0 {
        return Err(flag_err(
            "silence-max-creates-per-minute",
            "must be at least 1",
        ));
    }
    let endpoint = Endpoint {
        urls: args.alertmanager_urls.clone(),
        bearer_token_file: args.alertmanager_bearer_token_file.clone(),
        basic_auth_file: args.alertmanager_basic_auth_file.clone(),
        ca_file: args.alertmanager_ca_file.clone(),
        cert_file: args.alertmanager_cert_file.clone(),
        key_file: args.alertmanager_key_file.clone(),
    };
    super::check_endpoint(&endpoint, "alertmanager-url")?;
    let quarter = Duration::try_from(lease / 4).unwrap_or(Duration::MAX);
    Ok(Some(SilenceSettings {
        endpoint,
        hold,
        rules: Rules {
            created_by: created_by.to_string(),
            sets,
            lease,
            tail,
            while_recovering,
            in_progress,
            max_creates_per_minute,
        },
        interval: quarter.min(MAX_ROUND_INTERVAL),
        cluster,
    }))
}

/// One `--cluster-label KEY=VALUE`, as the matcher `KEY="VALUE"`.
fn cluster_label(spec: &str) -> Result<Matcher, FlagError> {
    let bad = |why: &str| {
        flag_err(
            "cluster-label",
            format!("{spec:?}: {why}; expected KEY=VALUE, e.g. cluster=prod-eu-1"),
        )
    };
    let (key, value) = spec.split_once('=').ok_or_else(|| bad("no ="))?;
    if value.is_empty() {
        return Err(bad("the value is empty"));
    }
    let quoted = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    silence::parse_plain_matcher(&format!("{key}=\"{quoted}\""))
        .map_err(|_| bad("the key is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"))
}

/// The sets of one silence each: the default unless left out, one per
/// `--silence-matchers`; or, in the older form, all `--silence-matcher`s as one set
/// instead of the default (clap refuses the two forms together).
fn matcher_sets(args: &SilenceArgs) -> Result<Vec<MatcherSet>, FlagError> {
    if !args.silence_matchers.is_empty() {
        let set = MatcherSet::from_matchers(&args.silence_matchers)
            .map_err(|e| flag_err("silence-matcher", e))?;
        return Ok(vec![set]);
    }
    let default = args.silence_default_matchers.unwrap_or(true);
    let sets = silence::parse_sets(default, &args.silence_matcher_sets)
        .map_err(|e| flag_err("silence-matchers", e))?;
    if sets.is_empty() {
        return Err(flag_err(
            "silence-default-matchers",
            "false leaves no silence to hold: give at least one --silence-matchers SET",
        ));
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn sets(extra: &[&str]) -> Result<Vec<String>, String> {
        let mut argv = vec!["kumaco", "run", "--alertmanager-url=http://am:9093"];
        argv.extend_from_slice(extra);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Command::Run(args) = cli.command else {
            unreachable!("argv starts with run")
        };
        let settings = from_args(&args.silences, "kumaco/kumaco/kumaco", true)
            .map_err(|e| e.to_string())?
            .expect("with --alertmanager-url");
        Ok(settings
            .rules
            .sets
            .iter()
            .map(ToString::to_string)
            .collect())
    }

    const NODE_EXPORTER: &str = r#"--silence-matchers=instance=~"{{name}}(:[0-9]+)?""#;

    #[test]
    fn the_default_set_is_kept_unless_left_out_on_purpose() {
        assert_eq!(sets(&[]).unwrap(), [r#"node="{{name}}""#]);
        assert_eq!(
            sets(&[
                NODE_EXPORTER,
                r#"--silence-matchers={job="x",node="{{name}}"}"#
            ])
            .unwrap(),
            [
                r#"node="{{name}}""#,
                r#"instance=~"{{name}}(:[0-9]+)?""#,
                r#"{job="x",node="{{name}}"}"#
            ]
        );
        assert_eq!(
            sets(&[NODE_EXPORTER, "--silence-default-matchers=false"]).unwrap(),
            [r#"instance=~"{{name}}(:[0-9]+)?""#]
        );
        let none = sets(&["--silence-default-matchers=false"]).unwrap_err();
        assert!(
            none.starts_with("--silence-default-matchers: false leaves no silence"),
            "{none}"
        );
        let bad = sets(&[r#"--silence-matchers=job="x""#]).unwrap_err();
        assert!(
            bad.starts_with(r#"--silence-matchers: "job=\"x\"": no matcher names the node"#),
            "{bad}"
        );
    }

    #[test]
    fn silences_false_keeps_alertmanager_and_the_sets_and_refuses_what_only_holding_reads() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["kumaco", "run"];
            argv.extend_from_slice(extra);
            let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
            let Command::Run(args) = cli.command else {
                unreachable!("argv starts with run")
            };
            from_args(&args.silences, "kumaco/kumaco/kumaco", true).map_err(|e| e.to_string())
        };
        let am = "--alertmanager-url=http://am:9093";
        let on = parse(&[am]).unwrap().unwrap();
        assert!(on.hold);
        let off = parse(&[am, "--silences=false", NODE_EXPORTER])
            .unwrap()
            .unwrap();
        assert!(!off.hold);
        assert_eq!(off.endpoint.urls, ["http://am:9093"]);
        assert_eq!(off.rules.sets.len(), 2);
        let e = parse(&[am, "--silences=false", "--silence-lease=1h"]).unwrap_err();
        assert_eq!(e, "--silence-lease: has no effect with --silences=false");
        let e = parse(&["--silences=false"]).unwrap_err();
        assert_eq!(e, "--silences: needs --alertmanager-url");
    }

    #[test]
    fn the_older_flag_is_one_set_instead_of_the_default_and_not_mixed_with_the_new() {
        assert_eq!(
            sets(&[
                r#"--silence-matcher=instance=~"{{name}}(:[0-9]+)?""#,
                r#"--silence-matcher=severity!="info""#
            ])
            .unwrap(),
            [r#"instance=~"{{name}}(:[0-9]+)?",severity!="info""#]
        );
        for new in [NODE_EXPORTER, "--silence-default-matchers=true"] {
            let e = sets(&[r#"--silence-matcher=node="{{name}}""#, new]).unwrap_err();
            assert!(e.contains("cannot be used with"), "{e}");
        }
    }
}
