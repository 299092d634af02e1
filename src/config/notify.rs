//! The notification flags (`--notify-url`, `--message-template-*`, `--notify-config`,
//! `--cluster-name`, `--notify-*-after`), validated into the sinks and the core's rules.
//! Every URL is read and parsed here, at start-up: a sink that cannot be used stops
//! kumaco with the flag or the file and field that is wrong (exit 2), never with the URL.

use std::sync::Arc;

use jiff::SignedDuration;

use super::{FlagError, flag_err, go_duration};
use crate::cli::NotifyArgs;
use crate::notice::Kind;
use crate::notify::sink::{self, MAX_SINKS, Sink};
use crate::notify::template::KuredTemplate;
use crate::transitions::Rules;

/// The node labels a message names a node's pool by: the first the node has.
pub const POOL_LABELS: [&str; 4] = [
    "node.kubernetes.io/pool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
];
/// The node label a message names a node's zone by.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// What the notifier is given.
#[derive(Clone, Debug, Default)]
pub struct NotifySettings {
    pub sinks: Vec<Arc<Sink>>,
    /// The instance's own parts (`instance`, `in_progress`, `required`,
    /// `planned_lead_time`) are set by [`super::Settings`].
    pub rules: Rules,
}

pub fn from_args(args: &NotifyArgs) -> Result<NotifySettings, FlagError> {
    let mut sinks = Vec::new();
    let mut urls = args.notify_urls.clone();
    if let Some(file) = &args.notify_url_file {
        let url = std::fs::read_to_string(file)
            .map_err(|e| flag_err("notify-url-file", format!("{}: {e}", file.display())))?;
        urls.push(url.trim().to_string());
    }
    // kured v1's words only where a template is given: kumaco's say more.
    let mut templates = Vec::new();
    let given = [
        (
            "message-template-drain",
            "--message-template-drain",
            &args.message_template_drain,
            Some(Kind::Started),
        ),
        (
            "message-template-reboot",
            "--message-template-reboot",
            &args.message_template_reboot,
            None,
        ),
        (
            "message-template-uncordon",
            "--message-template-uncordon",
            &args.message_template_uncordon,
            Some(Kind::Completed),
        ),
    ];
    for (flag, dashed, text, kind) in given {
        let Some(text) = text else { continue };
        let parsed = KuredTemplate::parse(dashed, text).map_err(|e| flag_err(flag, e))?;
        if let Some(kind) = kind {
            templates.push((kind, parsed));
        }
    }
    let kinds = if args.notify_transitions == "all" {
        Kind::ALL.to_vec()
    } else {
        Kind::parse_set(&args.notify_transitions).map_err(|e| flag_err("notify-transitions", e))?
    };
    for (i, url) in urls.iter().enumerate() {
        let name = if i == 0 {
            "notify-url".to_string()
        } else {
            format!("notify-url-{}", i + 1)
        };
        let sink = sink::from_kured_flags(name, url, templates.clone(), kinds.clone())
            .map_err(|e| flag_err("notify-url", e))?;
        sinks.push(sink);
    }
    if urls.is_empty() {
        let set = [
            (
                "message-template-drain",
                args.message_template_drain.is_some(),
            ),
            (
                "message-template-reboot",
                args.message_template_reboot.is_some(),
            ),
            (
                "message-template-uncordon",
                args.message_template_uncordon.is_some(),
            ),
            ("notify-transitions", args.notify_transitions != "all"),
        ];
        if let Some((flag, _)) = set.iter().find(|(_, on)| *on) {
            return Err(flag_err(flag, "needs --notify-url or --notify-url-file"));
        }
    }
    if let Some(path) = &args.notify_config {
        let file = sink::read_config(path).map_err(|e| flag_err("notify-config", e))?;
        for (i, config) in file.sinks.iter().enumerate() {
            let sink = sink::from_config(config, i, &args.cluster_name)
                .map_err(|e| flag_err("notify-config", format!("{}: {e}", path.display())))?;
            sinks.push(sink);
        }
    }
    let mut names: Vec<&str> = sinks.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(flag_err(
            "notify-config",
            format!("two sinks named {:?}: each needs a name of its own", w[0]),
        ));
    }
    if sinks.len() > MAX_SINKS {
        return Err(flag_err(
            "notify-config",
            format!("{} sinks: at most {MAX_SINKS}", sinks.len()),
        ));
    }
    let cluster = args.cluster_name.trim();
    if cluster.is_empty() || cluster.len() > 128 {
        return Err(flag_err("cluster-name", "must be 1 to 128 characters"));
    }
    let optional = |flag: &'static str, s: &str| -> Result<Option<SignedDuration>, FlagError> {
        let d = go_duration(flag, s)?;
        if d.is_negative() {
            return Err(flag_err(flag, "must be 0 (never) or above"));
        }
        Ok(d.is_positive().then_some(d))
    };
    Ok(NotifySettings {
        sinks: sinks.into_iter().map(Arc::new).collect(),
        rules: Rules {
            cluster: cluster.to_string(),
            waiting_after: optional("notify-waiting-after", &args.notify_waiting_after)?,
            not_back_after: optional("notify-not-back-after", &args.notify_not_back_after)?,
            zone_label: ZONE_LABEL.to_string(),
            pool_labels: POOL_LABELS.iter().map(|l| l.to_string()).collect(),
            ..Rules::default()
        },
    })
}
