//! kured v1's `--notify-url`: shoutrrr's service URLs, parsed into the endpoint kumaco
//! posts to and the options that change a message, so that a kured v1 flag carries over
//! unchanged.
//!
//! Each form is the one shoutrrr documents (nicholas-fedor/shoutrrr, the fork kured moved
//! to, and containrrr/shoutrrr v0.8 before it); where the two differ both are read:
//!
//! | URL | posts to |
//! |---|---|
//! | `slack://hook:A-B-C@webhook`, `slack://[BOTNAME@]A/B/C` | `https://hooks.slack.com/services/A/B/C` |
//! | `teams://?host=WORKFLOW-URL` (percent-encoded), `teams+WORKFLOW-URL` | the Teams workflow's URL |
//! | `googlechat://chat.googleapis.com/v1/spaces/S/messages?key=K&token=T` | the same with `https` |
//! | `mattermost://[USER@]HOST[:PORT][/PATH/hooks]/TOKEN[/CHANNEL]` | `https://HOST[:PORT][/PATH]/hooks/TOKEN` |
//! | `discord://TOKEN@WEBHOOK-ID` | `https://discord.com/api/webhooks/WEBHOOK-ID/TOKEN?wait=true` |
//! | `generic://HOST[:PORT]/PATH`, `generic+https://HOST[:PORT]/PATH` | `https://HOST[:PORT]/PATH` |
//!
//! kumaco's own additions, each marked where it is read: `teams+https://` takes a
//! workflow's URL as Microsoft gives it (shoutrrr took a connector's URL there); a
//! Mattermost under a sub-path names it before `/hooks/`; Discord is asked to `wait`, so a
//! message Discord does not keep is an error the delivery sees.
//!
//! A query parameter kumaco cannot honour is refused, naming it, never ignored: a flag
//! that parses promises the message it describes. What kumaco refuses that shoutrrr takes:
//! Slack's bot tokens (Web API, not a webhook), Office 365 connector URLs (retired by
//! Microsoft), Discord's colours and raw JSON (kumaco posts plain content), shoutrrr's
//! named generic templates (registered in Go code).
//!
//! The URL holds the service's secret (the token, or the whole URL): no error names any
//! part of it but the service and the parameters' names, and the [`Target`]'s `Debug`
//! shows only the endpoint's host.

#[cfg(test)]
mod tests;

use std::fmt;

use http::Method;
use http::header::{HeaderName, HeaderValue};

use super::request::Endpoint;

/// The services `--notify-url` reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Service {
    Slack,
    Teams,
    GoogleChat,
    Mattermost,
    Discord,
    Generic,
}

impl Service {
    /// The URL scheme, which is also the name used in metrics and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Service::Slack => "slack",
            Service::Teams => "teams",
            Service::GoogleChat => "googlechat",
            Service::Mattermost => "mattermost",
            Service::Discord => "discord",
            Service::Generic => "generic",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a message goes and how it is shaped: the service, its endpoint, its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Slack {
        endpoint: Endpoint,
        options: SlackOptions,
    },
    Teams {
        endpoint: Endpoint,
        options: TeamsOptions,
    },
    GoogleChat {
        endpoint: Endpoint,
    },
    Mattermost {
        endpoint: Endpoint,
        options: MattermostOptions,
    },
    Discord {
        endpoint: Endpoint,
        options: DiscordOptions,
    },
    Generic {
        endpoint: Endpoint,
        options: GenericOptions,
    },
}

/// An avatar as Slack and Mattermost take it: an emoji's name, or an image's URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Icon {
    Emoji(String),
    Url(String),
}

impl Icon {
    /// As shoutrrr reads `icon=`: a URL when it starts with `http://` or `https://`.
    fn parse(value: String) -> Icon {
        let lower = value.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            Icon::Url(value)
        } else {
            Icon::Emoji(value)
        }
    }
}

/// Slack's options. `title`, here and in the other services, is a fixed header shown
/// above every message, as shoutrrr shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlackOptions {
    pub username: Option<String>,
    pub icon: Option<Icon>,
    /// The message's left border (`good`, `warning`, `danger` or `#RRGGBB`).
    pub color: Option<String>,
    pub title: Option<String>,
    /// Another channel than the webhook's (legacy webhooks honour it).
    pub channel: Option<String>,
    /// The thread to reply in.
    pub thread_ts: Option<String>,
}

/// A Teams workflow's options (shoutrrr's `teams://?host=` form only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TeamsOptions {
    pub title: Option<String>,
    /// The header's colour, an Adaptive Card `TextBlock` colour (`attention`, `good`, ...).
    pub color: Option<&'static str>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MattermostOptions {
    pub username: Option<String>,
    pub channel: Option<String>,
    pub icon: Option<Icon>,
    pub title: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscordOptions {
    pub username: Option<String>,
    pub avatar_url: Option<String>,
    pub title: Option<String>,
}

/// A generic webhook's options: shoutrrr's `template`, `method`, `contenttype`, `title`,
/// `titlekey`, `messagekey`, `@Header` and `$field` parameters, and the URL's user and
/// password as basic auth (Go's HTTP client sends them so).
#[derive(Clone, PartialEq, Eq)]
pub struct GenericOptions {
    pub method: Method,
    pub body: GenericBody,
    /// `contenttype`: the `Content-Type` sent instead of the body's own.
    pub content_type: Option<HeaderValue>,
    pub title: Option<String>,
    /// Sensitive: they often carry a token.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// What a generic webhook's body is.
#[derive(Clone, PartialEq, Eq)]
pub enum GenericBody {
    /// The title and the text as plain text (no `template`).
    Text,
    /// `template=json`: one JSON object.
    Json {
        title_key: String,
        message_key: String,
        /// The `$key=value` fields, added to the object.
        extra: Vec<(String, String)>,
    },
}

impl fmt::Debug for GenericOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("GenericOptions")
            .field("method", &self.method)
            .field("body", &self.body)
            .field("content_type", &self.content_type)
            .field("title", &self.title)
            .field("headers", &names)
            .finish()
    }
}

impl fmt::Debug for GenericBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenericBody::Text => f.write_str("Text"),
            GenericBody::Json {
                title_key,
                message_key,
                extra,
            } => {
                // The fields' values may be keys of the receiver: only their names.
                let names: Vec<&str> = extra.iter().map(|(k, _)| k.as_str()).collect();
                f.debug_struct("Json")
                    .field("title_key", title_key)
                    .field("message_key", message_key)
                    .field("extra", &names)
                    .finish()
            }
        }
    }
}

const SERVICES: &str = "slack, teams, googlechat, mattermost, discord, generic";
const SLACK_FORM: &str = "slack://hook:TOKEN-A-TOKEN-B-TOKEN-C@webhook, or the older \
    slack://TOKEN-A/TOKEN-B/TOKEN-C, from the webhook URL \
    https://hooks.slack.com/services/TOKEN-A/TOKEN-B/TOKEN-C";
const TEAMS_FORM: &str = "teams://?host=WORKFLOW-URL (percent-encoded) or teams+WORKFLOW-URL, \
    WORKFLOW-URL being the URL of a Teams workflow triggered by \
    \"When a Teams webhook request is received\"";
const GOOGLECHAT_FORM: &str = "googlechat://chat.googleapis.com/v1/spaces/SPACE/messages\
    ?key=KEY&token=TOKEN, the webhook URL with https replaced by googlechat";
const MATTERMOST_FORM: &str = "mattermost://[USER@]HOST[:PORT][/PATH/hooks]/TOKEN[/CHANNEL]";
const DISCORD_FORM: &str = "discord://TOKEN@WEBHOOK-ID, from the webhook URL \
    https://discord.com/api/webhooks/WEBHOOK-ID/TOKEN";
const GENERIC_FORM: &str = "generic://HOST[:PORT]/PATH[?template=json] or \
    generic+https://HOST[:PORT]/PATH";

/// Why a `--notify-url` is refused. Names the service and the parameters, never a value:
/// any of them may be the secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("not a service URL: expected SERVICE://..., SERVICE one of {SERVICES}")]
    NoScheme,
    #[error("{scheme:?} is not a service kumaco posts to: expected one of {SERVICES}")]
    UnknownService { scheme: String },
    #[error("{service}: {problem}: expected {expected}")]
    Malformed {
        service: Service,
        problem: &'static str,
        expected: &'static str,
    },
    #[error("{service}: unknown parameter {key:?}: accepted are {accepted}")]
    UnknownParameter {
        service: Service,
        key: String,
        accepted: &'static str,
    },
    #[error("{service}: parameter {key:?}: {problem}")]
    Parameter {
        service: Service,
        key: String,
        problem: &'static str,
    },
    #[error(
        "slack: the URL holds a bot token (xoxb, xoxp), which posts through Slack's Web API; \
         kumaco posts to incoming webhooks only: add an incoming webhook to the channel and \
         use {SLACK_FORM}"
    )]
    SlackApiToken,
    #[error(
        "teams: an Office 365 connector URL; Microsoft retired the connectors and their URLs \
         no longer post: create a workflow and use {TEAMS_FORM}"
    )]
    TeamsConnector,
}

impl Target {
    /// A `--notify-url`.
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let raw = Raw::split(url)?;
        match (raw.scheme.as_str(), raw.plus_url.is_some()) {
            ("slack", false) => slack(raw),
            ("teams", _) => teams(raw),
            ("googlechat" | "hangouts", false) => googlechat(raw),
            ("mattermost", false) => mattermost(raw),
            ("discord", false) => discord(raw),
            ("generic", _) => generic(raw),
            _ => Err(UrlError::UnknownService {
                scheme: raw.full_scheme,
            }),
        }
    }

    pub fn service(&self) -> Service {
        match self {
            Target::Slack { .. } => Service::Slack,
            Target::Teams { .. } => Service::Teams,
            Target::GoogleChat { .. } => Service::GoogleChat,
            Target::Mattermost { .. } => Service::Mattermost,
            Target::Discord { .. } => Service::Discord,
            Target::Generic { .. } => Service::Generic,
        }
    }

    pub fn endpoint(&self) -> &Endpoint {
        match self {
            Target::Slack { endpoint, .. }
            | Target::Teams { endpoint, .. }
            | Target::GoogleChat { endpoint }
            | Target::Mattermost { endpoint, .. }
            | Target::Discord { endpoint, .. }
            | Target::Generic { endpoint, .. } => endpoint,
        }
    }
}

/// A service URL split as Go's `net/url` splits it: the user information runs to the
/// authority's last `@`; the fragment is dropped. Percent-escapes are decoded where each
/// part is read.
struct Raw<'a> {
    /// Lowercase, before any `+`.
    scheme: String,
    /// As written, for messages.
    full_scheme: String,
    /// After `+`, the target's own URL: `https://...` in `generic+https://...`.
    plus_url: Option<&'a str>,
    userinfo: Option<&'a str>,
    /// The authority after the user information: `HOST[:PORT]`.
    host: &'a str,
    /// From the first `/` after the authority, undecoded; empty when none.
    path: &'a str,
    query: Option<&'a str>,
}

impl<'a> Raw<'a> {
    fn split(url: &'a str) -> Result<Raw<'a>, UrlError> {
        let (scheme, rest) = url.split_once("://").ok_or(UrlError::NoScheme)?;
        let valid = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid {
            return Err(UrlError::NoScheme);
        }
        let lower = scheme.to_ascii_lowercase();
        let base = lower.split('+').next().unwrap_or_default().to_string();
        let plus_url = scheme.find('+').map(|i| &url[i + 1..]);
        let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let (userinfo, host) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        Ok(Raw {
            scheme: base,
            full_scheme: scheme.to_string(),
            plus_url,
            userinfo,
            host,
            path,
            query,
        })
    }

    /// The scheme after `+`, lowercase: `https` in `generic+https://`.
    fn plus_scheme(&self) -> Option<String> {
        let url = self.plus_url?;
        Some(url.split_once("://")?.0.to_ascii_lowercase())
    }

    /// The user information decoded: the user, and the password if any.
    fn user_password(&self, service: Service) -> Result<(String, Option<String>), UrlError> {
        let Some(info) = self.userinfo else {
            return Ok((String::new(), None));
        };
        let bad = || {
            malformed(
                service,
                "the user information has an invalid percent-escape",
            )
        };
        match info.split_once(':') {
            Some((user, password)) => Ok((
                decode(user, false).ok_or_else(bad)?,
                Some(decode(password, false).ok_or_else(bad)?),
            )),
            None => Ok((decode(info, false).ok_or_else(bad)?, None)),
        }
    }

    /// The path's segments decoded, without empty ones at either end.
    fn segments(&self, service: Service) -> Result<Vec<String>, UrlError> {
        self.path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                decode(s, false)
                    .ok_or_else(|| malformed(service, "the path has an invalid percent-escape"))
            })
            .collect()
    }

    fn params(&self, service: Service, accepted: &'static str) -> Result<Params, UrlError> {
        let mut pairs = Vec::new();
        for pair in self.query.unwrap_or_default().split('&') {
            if pair.is_empty() {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(k, true)
                .ok_or_else(|| malformed(service, "the query has an invalid percent-escape"))?;
            let value = decode(v, true).ok_or_else(|| UrlError::Parameter {
                service,
                key: key.clone(),
                problem: "invalid percent-escape in its value",
            })?;
            pairs.push((key, value));
        }
        Ok(Params {
            service,
            accepted,
            pairs,
        })
    }
}

/// The query's parameters, taken one by one as a service reads them; any left over is
/// refused. Names match without regard to case, as shoutrrr matches them; the first of
/// repeated values counts, as in Go.
struct Params {
    service: Service,
    accepted: &'static str,
    pairs: Vec<(String, String)>,
}

impl Params {
    /// The first value of any of `names` (lowercase), all of them taken. An empty value
    /// counts as none.
    fn take(&mut self, names: &[&str]) -> Option<String> {
        let mut found = None;
        self.pairs.retain(|(k, v)| {
            let ours = names.iter().any(|n| k.eq_ignore_ascii_case(n));
            if ours && found.is_none() {
                found = Some(v.clone());
            }
            !ours
        });
        found.filter(|v| !v.is_empty())
    }

    /// A yes/no parameter as shoutrrr reads one (`yes`, `true`, `1`, `y` and their
    /// opposites).
    fn take_bool(&mut self, name: &str) -> Result<bool, UrlError> {
        match self
            .take(&[name])
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("no" | "false" | "0" | "n") => Ok(false),
            Some("yes" | "true" | "1" | "y") => Ok(true),
            Some(_) => Err(UrlError::Parameter {
                service: self.service,
                key: name.to_string(),
                problem: "expected yes or no",
            }),
        }
    }

    /// Refuses any parameter left.
    fn finish(self) -> Result<(), UrlError> {
        match self.pairs.into_iter().next() {
            None => Ok(()),
            Some((key, _)) => Err(UrlError::UnknownParameter {
                service: self.service,
                key,
                accepted: self.accepted,
            }),
        }
    }
}

fn expected(service: Service) -> &'static str {
    match service {
        Service::Slack => SLACK_FORM,
        Service::Teams => TEAMS_FORM,
        Service::GoogleChat => GOOGLECHAT_FORM,
        Service::Mattermost => MATTERMOST_FORM,
        Service::Discord => DISCORD_FORM,
        Service::Generic => GENERIC_FORM,
    }
}

fn malformed(service: Service, problem: &'static str) -> UrlError {
    UrlError::Malformed {
        service,
        problem,
        expected: expected(service),
    }
}

fn endpoint(service: Service, url: &str) -> Result<Endpoint, UrlError> {
    Endpoint::parse(url).map_err(|_| malformed(service, "the host or path is not valid in a URL"))
}

/// Slack: the webhook's three tokens, from the user information
/// (`hook:A-B-C@CHANNEL`) or, in the older form, from the host and path (`A/B/C`).
fn slack(raw: Raw<'_>) -> Result<Target, UrlError> {
    let service = Service::Slack;
    let (user, password) = raw.user_password(service)?;
    let host = decode(raw.host, false).ok_or(malformed(service, "invalid percent-escape"))?;
    let (token, channel, username) = if raw.path.len() > 1 {
        // The older form: the user information, if any, was the bot's name.
        let path = decode(raw.path, false).ok_or(malformed(service, "invalid percent-escape"))?;
        let token = format!("{host}{path}");
        (token, None, Some(user).filter(|u| !u.is_empty()))
    } else {
        let token = match password {
            Some(p) => format!("{user}:{p}"),
            None => user,
        };
        let channel = Some(host).filter(|h| !h.is_empty() && h != "webhook");
        (token, channel, None)
    };
    let [a, b, c] = slack_token(&token)?;
    let accepted = "botname (or username), icon (or icon_emoji, icon_url), color, title, thread_ts";
    let mut params = raw.params(service, accepted)?;
    let options = SlackOptions {
        username: params.take(&["botname", "username"]).or(username),
        icon: params
            .take(&["icon", "icon_emoji", "icon_url"])
            .map(Icon::parse),
        color: params.take(&["color"]),
        title: params.take(&["title"]),
        channel,
        thread_ts: params.take(&["thread_ts"]),
    };
    params.finish()?;
    Ok(Target::Slack {
        endpoint: endpoint(
            service,
            &format!("https://hooks.slack.com/services/{a}/{b}/{c}"),
        )?,
        options,
    })
}

/// A Slack token as shoutrrr reads one: an optional type (`hook`, or `xox?` for the Web
/// API's) and `:` or `-`, then three parts (upper-case letters and digits, at least 9;
/// the same, at least 9; letters and digits, at least 24) separated by the same `-`, `/`
/// or `,`.
fn slack_token(token: &str) -> Result<[String; 3], UrlError> {
    let bad = || malformed(Service::Slack, "no webhook token");
    let rest = if token.len() > 4 && token.is_char_boundary(4) {
        let (kind, rest) = token.split_at(4);
        let typed = rest.starts_with([':', '-']);
        if typed && kind.starts_with("xox") {
            return Err(UrlError::SlackApiToken);
        }
        if typed && kind == "hook" {
            &rest[1..]
        } else {
            token.strip_prefix(':').unwrap_or(token)
        }
    } else {
        token.strip_prefix(':').unwrap_or(token)
    };
    let sep = rest
        .chars()
        .find(|c| matches!(c, '-' | '/' | ','))
        .ok_or_else(bad)?;
    let parts: Vec<&str> = rest.split(sep).collect();
    let upper = |s: &str, min: usize| {
        s.len() >= min
            && s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    match parts.as_slice() {
        [a, b, c]
            if upper(a, 9)
                && upper(b, 9)
                && c.len() >= 24
                && c.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            Ok([a.to_string(), b.to_string(), c.to_string()])
        }
        _ => Err(bad()),
    }
}

/// Teams: a Power Automate workflow's URL, percent-encoded in `host=` (shoutrrr's form),
/// or as Microsoft gives it after `teams+` (kumaco's).
fn teams(raw: Raw<'_>) -> Result<Target, UrlError> {
    let service = Service::Teams;
    if let Some(url) = raw.plus_url {
        if raw.plus_scheme().as_deref() != Some("https") {
            return Err(malformed(service, "a workflow's URL is https"));
        }
        return teams_workflow(endpoint(service, url)?, TeamsOptions::default());
    }
    if raw.userinfo.is_some() || !raw.host.is_empty() || !raw.path.is_empty() {
        // containrrr/shoutrrr's form: the connector's group, tenant and IDs.
        return Err(UrlError::TeamsConnector);
    }
    let accepted = "host, title, color";
    let mut params = raw.params(service, accepted)?;
    let host = params
        .take(&["host"])
        .ok_or(malformed(service, "no host= parameter"))?;
    let title = params.take(&["title"]);
    let color = match params.take(&["color"]) {
        None => None,
        Some(c) => Some(teams_color(&c).ok_or(UrlError::Parameter {
            service,
            key: "color".into(),
            problem: "expected one of accent, good, warning, attention, dark, light, default, \
                      red, green, blue, yellow, orange",
        })?),
    };
    if let Some((key, _)) = params
        .pairs
        .iter()
        .find(|(k, _)| ["api-version", "sp", "sv", "sig"].contains(&k.as_str()))
    {
        return Err(UrlError::Parameter {
            service,
            key: key.clone(),
            problem: "belongs to the workflow's URL: percent-encode the whole URL in host= \
                      (or write teams+WORKFLOW-URL)",
        });
    }
    params.finish()?;
    teams_workflow(endpoint(service, &host)?, TeamsOptions { title, color })
}

fn teams_workflow(endpoint: Endpoint, options: TeamsOptions) -> Result<Target, UrlError> {
    let host = endpoint
        .uri()
        .host()
        .unwrap_or_default()
        .to_ascii_lowercase();
    if host.ends_with("webhook.office.com") || host.ends_with("outlook.office.com") {
        return Err(UrlError::TeamsConnector);
    }
    if endpoint.uri().scheme_str() != Some("https") {
        return Err(malformed(Service::Teams, "a workflow's URL is https"));
    }
    Ok(Target::Teams { endpoint, options })
}

/// shoutrrr's colour names for the Teams header, as Adaptive Card colours.
fn teams_color(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "red" | "attention" | "danger" => "attention",
        "orange" | "yellow" | "warning" | "warn" => "warning",
        "green" | "good" | "success" => "good",
        "blue" | "accent" => "accent",
        "dark" => "dark",
        "light" => "light",
        "default" => "default",
        _ => return None,
    })
}

/// Google Chat: the webhook's URL with `https` replaced, its `key` and `token` required.
fn googlechat(raw: Raw<'_>) -> Result<Target, UrlError> {
    let service = Service::GoogleChat;
    if raw.userinfo.is_some() || raw.host.is_empty() || raw.path.is_empty() {
        return Err(malformed(service, "no space's path"));
    }
    let accepted = "key, token, threadKey, messageReplyOption";
    let mut params = raw.params(service, accepted)?;
    let key = params.take(&["key"]).ok_or(UrlError::Parameter {
        service,
        key: "key".into(),
        problem: "missing or empty: the webhook URL has it",
    })?;
    let token = params.take(&["token"]).ok_or(UrlError::Parameter {
        service,
        key: "token".into(),
        problem: "missing or empty: the webhook URL has it",
    })?;
    // Google's own parameters for replying in a thread; shoutrrr drops them.
    let mut query = vec![("key", key), ("token", token)];
    if let Some(t) = params.take(&["threadkey"]) {
        query.push(("threadKey", t));
    }
    if let Some(o) = params.take(&["messagereplyoption"]) {
        query.push(("messageReplyOption", o));
    }
    params.finish()?;
    let url = format!("https://{}{}?{}", raw.host, raw.path, encode_query(&query));
    Ok(Target::GoogleChat {
        endpoint: endpoint(service, &url)?,
    })
}

/// Mattermost: the token, and the channel after it; a sub-path before `/hooks/`.
fn mattermost(raw: Raw<'_>) -> Result<Target, UrlError> {
    let service = Service::Mattermost;
    let (user, _) = raw.user_password(service)?;
    let segments = raw.segments(service)?;
    // shoutrrr's `TOKEN[/CHANNEL]`; kumaco's `[PATH/]hooks/TOKEN[/CHANNEL]`, for a server
    // under a sub-path or a webhook's path copied whole, told apart by the literal
    // `hooks` before one or two segments (a token is never that word).
    let hooks = segments
        .iter()
        .rposition(|s| s == "hooks")
        .filter(|i| (1..=2).contains(&(segments.len() - i - 1)));
    let (prefix, rest) = match hooks {
        Some(i) => (&segments[..i], &segments[i + 1..]),
        None if segments.len() <= 2 => (&segments[..0], &segments[..]),
        None => {
            return Err(malformed(
                service,
                "more path than TOKEN/CHANNEL (a server under a sub-path is written PATH/hooks/TOKEN)",
            ));
        }
    };
    let Some(token) = rest.first() else {
        return Err(malformed(service, "no webhook token"));
    };
    let accepted = "icon (or icon_emoji, icon_url), title, disabletls";
    let mut params = raw.params(service, accepted)?;
    let icon = params
        .take(&["icon", "icon_emoji", "icon_url"])
        .map(Icon::parse);
    let title = params.take(&["title"]);
    let scheme = if params.take_bool("disabletls")? {
        "http"
    } else {
        "https"
    };
    params.finish()?;
    let mut path = String::new();
    for s in prefix {
        path.push('/');
        path.push_str(&encode(s));
    }
    let url = format!("{scheme}://{}{path}/hooks/{}", raw.host, encode(token));
    Ok(Target::Mattermost {
        endpoint: endpoint(service, &url)?,
        options: MattermostOptions {
            username: Some(user).filter(|u| !u.is_empty()),
            channel: rest.get(1).cloned(),
            icon,
            title,
        },
    })
}

/// Discord: the token as the user, the webhook's ID as the host.
fn discord(raw: Raw<'_>) -> Result<Target, UrlError> {
    let service = Service::Discord;
    let (token, _) = raw.user_password(service)?;
    if token.is_empty() {
        return Err(malformed(service, "no token"));
    }
    if raw.host.is_empty() {
        return Err(malformed(service, "no webhook ID"));
    }
    let url_safe = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if !url_safe(&token) || !url_safe(raw.host) {
        return Err(malformed(
            service,
            "the token or the webhook ID has characters no Discord webhook has",
        ));
    }
    match raw.path {
        "" | "/" => {}
        "/raw" => {
            return Err(malformed(
                service,
                "/raw posts the message as Discord's JSON, and kumaco's messages are text",
            ));
        }
        _ => return Err(malformed(service, "a path after the webhook ID")),
    }
    let accepted = "username, avatar (or avatarurl), title, thread_id";
    let mut params = raw.params(service, accepted)?;
    let username = params.take(&["username"]);
    let avatar_url = params.take(&["avatar", "avatarurl"]);
    let title = params.take(&["title"]);
    let thread = params.take(&["thread_id"]).map(|t| t.trim().to_string());
    for key in [
        "color",
        "colorerror",
        "colorwarn",
        "colorinfo",
        "colordebug",
        "splitlines",
        "json",
    ] {
        if params.take(&[key]).is_some() {
            return Err(UrlError::Parameter {
                service,
                key: key.into(),
                problem: "kumaco posts plain content, without embeds: remove it",
            });
        }
    }
    params.finish()?;
    let mut query = vec![("wait", "true".to_string())];
    if let Some(t) = thread {
        query.push(("thread_id", t));
    }
    let url = format!(
        "https://discord.com/api/webhooks/{}/{token}?{}",
        raw.host,
        encode_query(&query)
    );
    Ok(Target::Discord {
        endpoint: endpoint(service, &url)?,
        options: DiscordOptions {
            username,
            avatar_url,
            title,
        },
    })
}

/// A generic webhook: shoutrrr's parameters are taken, the rest go to the target's query.
fn generic(raw: Raw<'_>) -> Result<Target, UrlError> {
    let service = Service::Generic;
    let scheme = match raw.plus_scheme().as_deref() {
        None | Some("https") => "https",
        Some("http") => "http",
        Some(_) => return Err(malformed(service, "generic+ takes http or https")),
    };
    if raw.host.is_empty() {
        return Err(malformed(service, "no host"));
    }
    let (user, password) = raw.user_password(service)?;
    let accepted = "template, method, contenttype, title, titlekey, messagekey, disabletls, \
                    @HEADER, $FIELD, and any other, which the target's URL gets (_NAME for a \
                    name of these)";
    let mut params = raw.params(service, accepted)?;
    let template = params.take(&["template"]);
    let method = params.take(&["method"]);
    let content_type = params.take(&["contenttype"]);
    let title = params.take(&["title"]);
    let title_key = params.take(&["titlekey"]);
    let message_key = params.take(&["messagekey"]);
    let disable_tls = params.take_bool("disabletls")?;
    let parameter = |key: &str, problem| UrlError::Parameter {
        service,
        key: key.to_string(),
        problem,
    };

    let mut headers = Vec::new();
    if !user.is_empty() || password.is_some() {
        let basic = base64_basic(&user, password.as_deref().unwrap_or_default());
        let mut value = HeaderValue::from_str(&basic)
            .map_err(|_| malformed(service, "the user information cannot be a header"))?;
        value.set_sensitive(true);
        headers.push((http::header::AUTHORIZATION, value));
    }
    let mut extra = Vec::new();
    let mut forwarded = Vec::new();
    for (key, value) in std::mem::take(&mut params.pairs) {
        if let Some(name) = key.strip_prefix('@').filter(|n| !n.is_empty()) {
            let name = HeaderName::from_bytes(header_name(name).as_bytes())
                .map_err(|_| parameter(&key, "not an HTTP header name"))?;
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| parameter(&key, "its value cannot be an HTTP header's"))?;
            value.set_sensitive(true);
            headers.push((name, value));
        } else if let Some(field) = key.strip_prefix('$').filter(|n| !n.is_empty()) {
            extra.push((field.to_string(), value));
        } else {
            // `_template` reaches the target as `template`.
            let name = match key.strip_prefix('_') {
                Some(n) if RESERVED.iter().any(|r| n.eq_ignore_ascii_case(r)) => n.to_string(),
                _ => key,
            };
            forwarded.push((name, value));
        }
    }
    params.finish()?;

    let body = match template.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None => {
            for (key, set) in [
                ("titlekey", title_key.is_some()),
                ("messagekey", message_key.is_some()),
                ("$FIELD", !extra.is_empty()),
            ] {
                if set {
                    return Err(parameter(
                        key,
                        "applies with template=json only; without it the body is plain text",
                    ));
                }
            }
            GenericBody::Text
        }
        Some("json") => GenericBody::Json {
            title_key: title_key.unwrap_or_else(|| "title".into()),
            message_key: message_key.unwrap_or_else(|| "message".into()),
            extra,
        },
        Some(_) => {
            return Err(parameter(
                "template",
                "kumaco knows template=json only (shoutrrr's other templates are \
                 registered in Go code)",
            ));
        }
    };
    let content_type = content_type
        .map(|c| HeaderValue::from_str(&c))
        .transpose()
        .map_err(|_| parameter("contenttype", "not a header value"))?;
    let method = match method.map(|m| m.to_ascii_uppercase()).as_deref() {
        None | Some("POST") => Method::POST,
        Some("PUT") => Method::PUT,
        Some("PATCH") => Method::PATCH,
        Some(_) => {
            return Err(parameter(
                "method",
                "expected POST, PUT or PATCH: a message is a body",
            ));
        }
    };
    let scheme = if disable_tls { "http" } else { scheme };
    let mut url = format!("{scheme}://{}{}", raw.host, raw.path);
    if !forwarded.is_empty() {
        url.push('?');
        url.push_str(&encode_query(&forwarded));
    }
    Ok(Target::Generic {
        endpoint: endpoint(service, &url)?,
        options: GenericOptions {
            method,
            body,
            content_type,
            title,
            headers,
        },
    })
}

/// The generic webhook's own parameters, which `_NAME` forwards to the target.
const RESERVED: &[&str] = &[
    "template",
    "method",
    "contenttype",
    "title",
    "titlekey",
    "messagekey",
    "disabletls",
];

/// `@acceptLanguage` names `Accept-Language`, as shoutrrr reads it: a dash before each
/// capital that does not follow one.
fn header_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous = None;
    for c in name.chars() {
        if c.is_ascii_uppercase() && previous.is_some_and(|p| p != '-') {
            out.push('-');
        }
        out.push(c);
        previous = Some(c);
    }
    out
}

/// `Basic BASE64(user:password)`.
fn base64_basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}").as_bytes());
    format!("Basic {encoded}")
}

/// A percent-escaped string decoded (`+` as a space in a query); `None` when an escape is
/// invalid or the bytes are not UTF-8.
fn decode(s: &str, plus_as_space: bool) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_as_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A string percent-escaped for a URL's path segment or query: all but the unreserved
/// characters.
pub(super) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn encode_query<K: AsRef<str>>(pairs: &[(K, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k.as_ref()), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}
