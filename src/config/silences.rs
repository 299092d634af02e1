//! The silence flags (`--alertmanager-url`, `--silence-*`), validated into the client's
//! endpoint and the core's rules.

use std::time::Duration;

use jiff::SignedDuration;

use super::{FlagError, flag_err, go_duration};
use crate::alertmanager::Endpoint;
use crate::cli::SilenceArgs;
use crate::silence::{self, Rules};

/// With `--alertmanager-url`.
#[derive(Clone, Debug)]
pub struct SilenceSettings {
    pub endpoint: Endpoint,
    /// `in_progress` and `created_by` are the instance's.
    pub rules: Rules,
    /// Time between two rounds without a wake-up: a quarter of the lease, at most 30 s,
    /// so a silence is renewed well before it ends.
    pub interval: Duration,
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
            ("silence-matcher", !args.silence_matchers.is_empty()),
            (
                "silence-max-creates-per-minute",
                args.silence_max_creates_per_minute.is_some(),
            ),
        ];
        if let Some((flag, _)) = set.iter().find(|(_, on)| *on) {
            return Err(flag_err(flag, "needs --alertmanager-url"));
        }
        return Ok(None);
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
    let matchers = silence::parse_matchers(&args.silence_matchers)
        .map_err(|e| flag_err("silence-matcher", e))?;
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
    let quarter = Duration::try_from(lease / 4).unwrap_or(Duration::MAX);
    Ok(Some(SilenceSettings {
        endpoint,
        rules: Rules {
            created_by: created_by.to_string(),
            matchers,
            lease,
            tail,
            while_recovering: args.silence_while_recovering,
            in_progress,
            max_creates_per_minute,
        },
        interval: quarter.min(Duration::from_secs(30)),
    }))
}
