//! A sink: where an instance's notices go, which of them, and how they are paced. Made
//! from kured v1's flags (`--notify-url`, `--message-template-*`) or from the sinks of
//! `--notify-config`, and turning a batch of queued notices into the requests that carry
//! them: one chat message for the whole batch (a digest when it holds several), one
//! CloudEvent per notice, or one post of alerts to Alertmanager.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::SignedDuration;
use serde::Deserialize;
use serde_json::{Value, json};

use super::cloudevents::{self, Source};
use super::payload::{self, Message};
use super::request::{Endpoint, Request};
use super::template::{KuredTemplate, Template};
use super::url::Target;
use crate::notice::{self, Kind, Notice};

/// Most sinks one instance has: each keeps a record on the instance's
/// `<lease>-notified` Lease, whose annotations the API server bounds.
pub const MAX_SINKS: usize = 6;
/// Longest sink name: it is a key of the record's annotations.
pub const MAX_NAME_BYTES: usize = 40;
/// A chat sink's default time between two messages: what it holds meanwhile goes out as
/// one digest.
pub const DEFAULT_DIGEST_INTERVAL: Duration = Duration::from_secs(30);
/// The bounds of `digestInterval`.
pub const DIGEST_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_secs(5), Duration::from_secs(3600));
/// A webhook's or Alertmanager's default most requests per minute.
pub const DEFAULT_MAX_PER_MINUTE: u32 = 600;
/// The bounds of `maxPerMinute`.
pub const MAX_PER_MINUTE_RANGE: (u32, u32) = (1, 6000);
/// Most alerts in one post to Alertmanager.
pub const MAX_ALERTS_PER_POST: usize = 64;
/// How long an alert a notice becomes stays firing in Alertmanager: long enough to be
/// routed and grouped, short enough that none lingers after the transition.
pub const ALERT_LIFETIME: SignedDuration = SignedDuration::from_mins(5);
/// The alert name of every notice sent to Alertmanager.
pub const ALERT_NAME: &str = "KumacoMaintenanceTransition";

/// One sink.
#[derive(Debug)]
pub struct Sink {
    /// A DNS label, unique: names the sink in metrics, logs, `kumaco status` and the
    /// record.
    pub name: String,
    /// The transitions it is told of.
    pub kinds: Vec<Kind>,
    pub format: Format,
    /// Least time between two requests.
    pub every: Duration,
}

/// What a sink's requests carry.
#[derive(Debug)]
// A handful, made once at start-up: boxing the large variant would save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Format {
    /// A chat: one message per batch, a digest when the batch holds several notices.
    Chat {
        target: Target,
        /// kured v1's words, for the transitions its templates were given for (the
        /// `--notify-url` sink).
        kured: Vec<(Kind, KuredTemplate)>,
        /// The operator's words for a single notice.
        template: Option<Template>,
    },
    /// CloudEvents 1.0 in structured mode, one event per request.
    CloudEvents { endpoint: Endpoint, source: Source },
    /// Alertmanager's API v2: a post of alerts to `<url>/api/v2/alerts`.
    Alertmanager { endpoint: Endpoint },
}

impl Format {
    /// What kind of sink, for logs and `kumaco status`.
    pub fn kind(&self) -> &'static str {
        match self {
            Format::Chat { target, .. } => target.service().name(),
            Format::CloudEvents { .. } => "cloudevents",
            Format::Alertmanager { .. } => "alertmanager",
        }
    }

    /// Where it posts, without secrets.
    pub fn shown(&self) -> String {
        match self {
            Format::Chat { target, .. } => target.endpoint().redacted(),
            Format::CloudEvents { endpoint, .. } | Format::Alertmanager { endpoint } => {
                endpoint.redacted()
            }
        }
    }
}

/// A request and the notices it carries, by their position in the batch.
#[derive(Debug)]
pub struct Post {
    pub request: Request,
    pub notices: usize,
    /// A template that failed: the default words went instead.
    pub template_error: Option<String>,
}

impl Sink {
    /// Whether it is told of `kind`.
    pub fn wants(&self, kind: Kind) -> bool {
        self.kinds.contains(&kind)
    }

    /// How many queued notices one request takes: a chat's digest takes them all.
    pub fn batch(&self) -> usize {
        match &self.format {
            Format::Chat { .. } => usize::MAX,
            Format::CloudEvents { .. } => 1,
            Format::Alertmanager { .. } => MAX_ALERTS_PER_POST,
        }
    }

    /// The one request that carries `batch` (not empty, at most [`Sink::batch`]).
    pub fn post(&self, batch: &[Notice]) -> Post {
        match &self.format {
            Format::Chat {
                target,
                kured,
                template,
            } => {
                let (message, template_error) =
                    chat_message(batch, kured.as_ref(), template.as_ref());
                Post {
                    request: payload::request(target, &message),
                    notices: batch.len(),
                    template_error,
                }
            }
            Format::CloudEvents { endpoint, source } => Post {
                request: cloudevents::request(&batch[0], source, endpoint),
                notices: 1,
                template_error: None,
            },
            Format::Alertmanager { endpoint } => Post {
                request: alerts_request(endpoint, batch),
                notices: batch.len(),
                template_error: None,
            },
        }
    }
}

/// One chat message: a single notice in the operator's words (kured v1's for the
/// transitions they name, a template's) or kumaco's; several as one digest.
fn chat_message(
    batch: &[Notice],
    kured: &[(Kind, KuredTemplate)],
    template: Option<&Template>,
) -> (Message, Option<String>) {
    let [one] = batch else {
        let (title, text) = notice::digest(batch);
        return (Message { title, text }, None);
    };
    let words = kured
        .iter()
        .find(|(kind, _)| *kind == one.kind)
        .zip(one.node.as_ref())
        .map(|((_, t), node)| t.render(&node.name));
    if let Some(words) = words {
        return (
            Message {
                title: words,
                text: String::new(),
            },
            None,
        );
    }
    let default = Message::of(one);
    match template {
        Some(t) => {
            let rendered = t.render_or(one, &default.title);
            let text = if rendered.error.is_some() {
                default.text
            } else {
                String::new()
            };
            (
                Message {
                    title: rendered.text,
                    text,
                },
                rendered.error.map(|e| e.to_string()),
            )
        }
        None => (default, None),
    }
}

/// Alertmanager's `POST /api/v2/alerts`: one alert per notice, named [`ALERT_NAME`],
/// labelled by what routes it (the kind, the cluster, the node, the window, the notice's
/// id so that no two merge), resolving [`ALERT_LIFETIME`] after the transition.
fn alerts_request(endpoint: &Endpoint, batch: &[Notice]) -> Request {
    let alerts: Vec<Value> = batch
        .iter()
        .map(|n| {
            let mut labels = json!({
                "alertname": ALERT_NAME,
                "kind": n.kind.name(),
                "cluster": n.cluster,
                "notice": n.id,
                "severity": "info",
            });
            if let Some(node) = &n.node {
                labels["node"] = json!(node.name);
            }
            if let Some(w) = &n.window {
                labels["window"] = json!(format!("{}/{}", w.namespace, w.name));
            }
            let ends = n.at.checked_add(ALERT_LIFETIME).unwrap_or(n.at);
            json!({
                "labels": labels,
                "annotations": { "summary": n.title(), "description": n.text() },
                "startsAt": n.at.to_string(),
                "endsAt": ends.to_string(),
            })
        })
        .collect();
    let base = endpoint.uri().to_string();
    let url = format!("{}/api/v2/alerts", base.trim_end_matches('/'));
    let endpoint = Endpoint::parse(&url).unwrap_or_else(|_| endpoint.clone());
    Request::post(
        endpoint,
        "application/json",
        Value::Array(alerts).to_string().into_bytes(),
    )
}

/// Why a sink's configuration is refused: the sink (by name or position), the field and
/// what is expected. Never a URL's value.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{at}: {message}")]
    Yaml { at: String, message: String },
    #[error("sink {sink}: {field}: {message}")]
    Field {
        sink: String,
        field: &'static str,
        message: String,
    },
    #[error("{count} sinks: at most {MAX_SINKS}")]
    TooMany { count: usize },
}

/// `--notify-config`: the file's shape.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    #[serde(default)]
    pub sinks: Vec<SinkConfig>,
}

/// One sink as the file gives it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SinkConfig {
    pub name: Option<String>,
    /// `chat` (the default: a `--notify-url` URL), `cloudevents` or `alertmanager`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub url: Option<String>,
    /// A file holding the URL (a mounted Secret's key): read at start-up.
    pub url_file: Option<PathBuf>,
    /// The transitions' names, as a list or one comma-separated string; default all.
    pub transitions: Option<Transitions>,
    /// Chat: a MiniJinja template for a single notice.
    pub template: Option<String>,
    /// Chat: time between two messages (Go duration).
    pub digest_interval: Option<String>,
    /// CloudEvents, Alertmanager: most requests per minute.
    pub max_per_minute: Option<u32>,
    /// CloudEvents: the events' `source` (default `kumaco/<cluster>`).
    pub source: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Transitions {
    List(Vec<String>),
    Text(String),
}

/// Reads `--notify-config`.
pub fn read_config(path: &Path) -> Result<ConfigFile, SinkError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SinkError::File {
        file: file.clone(),
        message: e.to_string(),
    })?;
    serde_saphyr::from_str(&text).map_err(|e| {
        let (at, message) = crate::yaml::error_at(&file, &e);
        SinkError::Yaml { at, message }
    })
}

/// The URL of a sink, from the file if given (trimmed: a Secret's value often ends in a
/// newline).
fn url_of(sink: &str, url: Option<&str>, file: Option<&Path>) -> Result<String, SinkError> {
    let field = |field, message: String| SinkError::Field {
        sink: sink.to_string(),
        field,
        message,
    };
    match (url, file) {
        (Some(_), Some(_)) => Err(field("url", "give url or urlFile, not both".into())),
        (Some(u), None) => Ok(u.trim().to_string()),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map(|s| s.trim().to_string())
            .map_err(|e| field("urlFile", format!("{}: {e}", f.display()))),
        (None, None) => Err(field("url", "missing: give url or urlFile".into())),
    }
}

/// Builds the sink `config` describes; `position` names it in errors when it has no
/// name yet; `cluster` is the events' default source.
pub fn from_config(config: &SinkConfig, position: usize, cluster: &str) -> Result<Sink, SinkError> {
    let shown = config
        .name
        .clone()
        .unwrap_or_else(|| format!("#{}", position + 1));
    let field = |field, message: String| SinkError::Field {
        sink: shown.clone(),
        field,
        message,
    };
    let name = config
        .name
        .clone()
        .ok_or_else(|| field("name", "missing".into()))?;
    check_name(&name).map_err(|m| field("name", m))?;
    let url = url_of(&shown, config.url.as_deref(), config.url_file.as_deref())?;
    let kinds = match &config.transitions {
        None => Kind::ALL.to_vec(),
        Some(Transitions::Text(t)) => {
            Kind::parse_set(t).map_err(|e| field("transitions", e.to_string()))?
        }
        Some(Transitions::List(l)) => {
            Kind::parse_set(&l.join(",")).map_err(|e| field("transitions", e.to_string()))?
        }
    };
    let type_ = config.type_.as_deref().unwrap_or("chat");
    let webhook_only = |f: &'static str, set: bool| {
        if set {
            Err(field(f, format!("not read by a {type_} sink")))
        } else {
            Ok(())
        }
    };
    let (format, every) = match type_ {
        "chat" => {
            webhook_only("maxPerMinute", config.max_per_minute.is_some())?;
            webhook_only("source", config.source.is_some())?;
            let target = Target::parse(&url).map_err(|e| field("url", e.to_string()))?;
            let template = config
                .template
                .as_deref()
                .map(|t| Template::parse("template", t))
                .transpose()
                .map_err(|e| field("template", e.to_string()))?;
            let every = match &config.digest_interval {
                None => DEFAULT_DIGEST_INTERVAL,
                Some(d) => {
                    let d = crate::duration::parse(d)
                        .ok()
                        .and_then(|d| Duration::try_from(d.to_signed()).ok())
                        .ok_or_else(|| {
                            field("digestInterval", format!("{d:?} is not a Go duration"))
                        })?;
                    let (min, max) = DIGEST_INTERVAL_RANGE;
                    if d < min || d > max {
                        return Err(field(
                            "digestInterval",
                            format!("must be within {min:?} and {max:?}"),
                        ));
                    }
                    d
                }
            };
            (
                Format::Chat {
                    target,
                    kured: Vec::new(),
                    template,
                },
                every,
            )
        }
        "cloudevents" | "alertmanager" => {
            webhook_only("template", config.template.is_some())?;
            webhook_only("digestInterval", config.digest_interval.is_some())?;
            let endpoint = Endpoint::parse(&url).map_err(|e| field("url", e.to_string()))?;
            let per_minute = config.max_per_minute.unwrap_or(DEFAULT_MAX_PER_MINUTE);
            let (min, max) = MAX_PER_MINUTE_RANGE;
            if !(min..=max).contains(&per_minute) {
                return Err(field(
                    "maxPerMinute",
                    format!("must be within {min} and {max}"),
                ));
            }
            let every = Duration::from_secs(60) / per_minute;
            let format = if type_ == "cloudevents" {
                let source = match &config.source {
                    Some(s) => Source::parse(s).map_err(|e| field("source", e.to_string()))?,
                    None => Source::for_cluster(cluster),
                };
                Format::CloudEvents { endpoint, source }
            } else {
                webhook_only("source", config.source.is_some())?;
                Format::Alertmanager { endpoint }
            };
            (format, every)
        }
        other => {
            return Err(field(
                "type",
                format!("{other:?}: expected chat, cloudevents or alertmanager"),
            ));
        }
    };
    Ok(Sink {
        name,
        kinds,
        format,
        every,
    })
}

/// kured v1's sink: `url` (`--notify-url` or the file), the templates given (by the
/// transition each fills), the transitions of `--notify-transitions`.
pub fn from_kured_flags(
    name: String,
    url: &str,
    templates: Vec<(Kind, KuredTemplate)>,
    kinds: Vec<Kind>,
) -> Result<Sink, SinkError> {
    let target = Target::parse(url).map_err(|e| SinkError::Field {
        sink: name.clone(),
        field: "--notify-url",
        message: e.to_string(),
    })?;
    Ok(Sink {
        name,
        kinds,
        format: Format::Chat {
            target,
            kured: templates,
            template: None,
        },
        every: DEFAULT_DIGEST_INTERVAL,
    })
}

/// A DNS label of at most [`MAX_NAME_BYTES`].
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?}: expected lower-case letters, digits and inner dashes, at most {MAX_NAME_BYTES} bytes"
        ))
    }
}

#[cfg(test)]
mod tests;
