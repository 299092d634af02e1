//! One message (a title and a text) as the request each service's incoming webhook
//! documents, within the size that service takes.
//!
//! Every message is a header line and a body. The header is the message's title; when
//! the URL gave a fixed `title` (shoutrrr's header shown above every message), that is
//! the header and the message's title opens the body, so nothing is lost. A body too long
//! for the service is cut on a character boundary and marked `…`; a limit the service
//! counts in characters is counted in `char`s, one in bytes in bytes.

#[cfg(test)]
mod tests;

use http::header::{CONTENT_TYPE, HeaderValue};
use serde_json::{Map, Value, json};

use super::request::{Endpoint, Request};
use super::url::{
    DiscordOptions, GenericBody, GenericOptions, Icon, MattermostOptions, SlackOptions, Target,
    TeamsOptions,
};
use crate::conditions::bounded;
use crate::notice::Notice;

/// Slack's advice for a message's `text`: at most this many characters (it cuts longer
/// ones itself, much later).
pub const SLACK_MAX_CHARS: usize = 4_000;
/// A Teams message, the whole request body, is refused above about 28 KB.
pub const TEAMS_MAX_BODY_BYTES: usize = 28_000;
/// A Google Chat message's largest size.
pub const GOOGLE_CHAT_MAX_BYTES: usize = 32_000;
/// The longest post a Mattermost server stores.
pub const MATTERMOST_MAX_CHARS: usize = 16_383;
/// A Discord message's `content`.
pub const DISCORD_MAX_CHARS: usize = 2_000;
/// A Discord webhook's name, which `username` overrides.
pub const DISCORD_MAX_USERNAME_CHARS: usize = 80;
/// A generic webhook documents no limit: kumaco's own, far above any message it words.
pub const GENERIC_MAX_BYTES: usize = 64 * 1024;
/// The longest header: one line.
pub const MAX_HEADER_BYTES: usize = 512;
/// The Adaptive Card version of Teams' messages: every Teams client renders it.
pub const ADAPTIVE_CARD_VERSION: &str = "1.4";

/// What a message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub title: String,
    pub text: String,
}

impl Message {
    /// A notice in kumaco's default words.
    pub fn of(notice: &Notice) -> Message {
        Message {
            title: notice.title(),
            text: notice.text(),
        }
    }
}

/// The request that posts `message` to `target`.
pub fn request(target: &Target, message: &Message) -> Request {
    match target {
        Target::Slack { endpoint, options } => json_post(endpoint, slack(options, message)),
        Target::Teams { endpoint, options } => json_post(endpoint, teams(options, message)),
        Target::GoogleChat { endpoint } => Request::post(
            endpoint.clone(),
            "application/json; charset=UTF-8",
            google_chat(message).to_string().into_bytes(),
        ),
        Target::Mattermost { endpoint, options } => {
            json_post(endpoint, mattermost(options, message))
        }
        Target::Discord { endpoint, options } => json_post(endpoint, discord(options, message)),
        Target::Generic { endpoint, options } => generic(endpoint, options, message),
    }
}

fn json_post(endpoint: &Endpoint, body: Value) -> Request {
    Request::post(
        endpoint.clone(),
        "application/json",
        body.to_string().into_bytes(),
    )
}

/// The header and the body: the URL's fixed title over the message, or the message's
/// title over its text.
fn parts(fixed_title: Option<&String>, message: &Message) -> (String, String) {
    let (header, body) = match fixed_title {
        Some(fixed) => (fixed.clone(), lines(&[&message.title, &message.text])),
        None => (message.title.clone(), message.text.clone()),
    };
    (bounded(header, MAX_HEADER_BYTES), body)
}

/// The non-empty ones of `parts`, one per line.
fn lines(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// `s` cut to at most `max` characters, the cut marked `…`.
fn cut_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `header` in bold and `body` below it, within `max` characters in all: the body is cut
/// first, then the header. `bold` writes the header in the service's markup.
fn headed(header: &str, body: &str, max: usize, bold: impl Fn(&str) -> String) -> String {
    let top = bold(header);
    let top_chars = top.chars().count();
    if body.is_empty() {
        return cut_chars(&top, max);
    }
    if top_chars + 1 >= max {
        return cut_chars(&top, max);
    }
    format!("{top}\n{}", cut_chars(body, max - top_chars - 1))
}

/// Slack's markup needs `&`, `<` and `>` escaped, and an escape must not be cut: `s`
/// escaped within `max` characters.
fn slack_escaped(s: &str, max: usize) -> String {
    let escape = |c: char| match c {
        '&' => "&amp;".to_string(),
        '<' => "&lt;".to_string(),
        '>' => "&gt;".to_string(),
        c => c.to_string(),
    };
    let whole: String = s.chars().map(escape).collect();
    if whole.chars().count() <= max {
        return whole;
    }
    let mut out = String::new();
    let mut count = 0;
    for piece in s.chars().map(escape) {
        let n = piece.chars().count();
        if count + n > max.saturating_sub(1) {
            break;
        }
        out.push_str(&piece);
        count += n;
    }
    out.push('…');
    out
}

fn icon(out: &mut Map<String, Value>, icon: &Option<Icon>) {
    match icon {
        Some(Icon::Emoji(e)) => {
            out.insert("icon_emoji".into(), e.clone().into());
        }
        Some(Icon::Url(u)) => {
            out.insert("icon_url".into(), u.clone().into());
        }
        None => {}
    }
}

fn optional(out: &mut Map<String, Value>, key: &str, value: &Option<String>) {
    if let Some(v) = value {
        out.insert(key.into(), v.clone().into());
    }
}

/// Slack: `text` in its markup (`*bold*`); with a colour, the body in an attachment whose
/// border has it.
fn slack(options: &SlackOptions, message: &Message) -> Value {
    let (header, body) = parts(options.title.as_ref(), message);
    let header = slack_escaped(&header, MAX_HEADER_BYTES);
    let mut out = Map::new();
    match &options.color {
        Some(color) => {
            out.insert("text".into(), format!("*{header}*").into());
            out.insert(
                "attachments".into(),
                json!([{
                    "color": color,
                    "fallback": header,
                    "text": slack_escaped(&body, SLACK_MAX_CHARS),
                }]),
            );
        }
        None => {
            let room = SLACK_MAX_CHARS - header.chars().count() - 3;
            let text = if body.is_empty() {
                format!("*{header}*")
            } else {
                format!("*{header}*\n{}", slack_escaped(&body, room))
            };
            out.insert("text".into(), text.into());
        }
    }
    optional(&mut out, "username", &options.username);
    icon(&mut out, &options.icon);
    optional(&mut out, "channel", &options.channel);
    optional(&mut out, "thread_ts", &options.thread_ts);
    Value::Object(out)
}

/// Teams (a workflow posting the card): an Adaptive Card in the message envelope the
/// workflow's "Post card" step reads (`attachments[0].content`); the header in bold, each
/// line of the body a `TextBlock`.
fn teams(options: &TeamsOptions, message: &Message) -> Value {
    let (header, mut body) = parts(options.title.as_ref(), message);
    // The card without a body: what the body's blocks may add to is the rest.
    let bare = teams_card(options, &header, "").to_string().len();
    loop {
        let card = teams_card(options, &header, &body);
        let size = card.to_string().len();
        if size <= TEAMS_MAX_BODY_BYTES || body.is_empty() {
            return card;
        }
        // JSON escapes and a block per line make the body weigh more than its bytes:
        // keep the share of it that fits at its present weight, and weigh again.
        let room = TEAMS_MAX_BODY_BYTES.saturating_sub(bare);
        let keep = body.len() * room / (size - bare);
        let keep = keep.min(body.len() - 1);
        body = if keep == 0 {
            String::new()
        } else {
            bounded(body, keep)
        };
    }
}

fn teams_card(options: &TeamsOptions, header: &str, body: &str) -> Value {
    let mut top = json!({
        "type": "TextBlock",
        "text": header,
        "weight": "Bolder",
        "size": "Medium",
        "wrap": true,
    });
    if let (Some(color), Some(top)) = (options.color, top.as_object_mut()) {
        top.insert("color".into(), color.into());
    }
    let mut blocks = vec![top];
    blocks.extend(
        body.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| json!({"type": "TextBlock", "text": l, "wrap": true})),
    );
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": ADAPTIVE_CARD_VERSION,
                "msteams": {"width": "Full"},
                "body": blocks,
            },
        }],
    })
}

/// Google Chat: `text` in its markup (`*bold*`).
fn google_chat(message: &Message) -> Value {
    let text = lines(&[&format!("*{}*", message.title), &message.text]);
    json!({ "text": bounded(text, GOOGLE_CHAT_MAX_BYTES) })
}

/// Mattermost: `text` in Markdown, and the overrides the URL named.
fn mattermost(options: &MattermostOptions, message: &Message) -> Value {
    let (header, body) = parts(options.title.as_ref(), message);
    let mut out = Map::new();
    out.insert(
        "text".into(),
        headed(&header, &body, MATTERMOST_MAX_CHARS, |h| format!("**{h}**")).into(),
    );
    optional(&mut out, "username", &options.username);
    optional(&mut out, "channel", &options.channel);
    icon(&mut out, &options.icon);
    Value::Object(out)
}

/// Discord: `content` in Markdown. No mention in a message pings anyone: the text comes
/// from the cluster, not from a person choosing whom to wake.
fn discord(options: &DiscordOptions, message: &Message) -> Value {
    let (header, body) = parts(options.title.as_ref(), message);
    let mut out = Map::new();
    out.insert(
        "content".into(),
        headed(&header, &body, DISCORD_MAX_CHARS, |h| format!("**{h}**")).into(),
    );
    if let Some(name) = &options.username {
        out.insert(
            "username".into(),
            cut_chars(name, DISCORD_MAX_USERNAME_CHARS).into(),
        );
    }
    optional(&mut out, "avatar_url", &options.avatar_url);
    out.insert("allowed_mentions".into(), json!({ "parse": [] }));
    Value::Object(out)
}

/// A generic webhook: the text, or with `template=json` one object holding the header
/// and the body under their keys and the URL's `$` fields (which, as in shoutrrr, win
/// over the two).
fn generic(endpoint: &Endpoint, options: &GenericOptions, message: &Message) -> Request {
    let (header, body) = parts(options.title.as_ref(), message);
    let (content_type, bytes) = match &options.body {
        GenericBody::Text => (
            HeaderValue::from_static("text/plain; charset=utf-8"),
            bounded(lines(&[&header, &body]), GENERIC_MAX_BYTES).into_bytes(),
        ),
        GenericBody::Json {
            title_key,
            message_key,
            extra,
        } => {
            let mut out = Map::new();
            out.insert(title_key.clone(), header.into());
            out.insert(message_key.clone(), bounded(body, GENERIC_MAX_BYTES).into());
            for (k, v) in extra {
                out.insert(k.clone(), v.clone().into());
            }
            (
                HeaderValue::from_static("application/json"),
                Value::Object(out).to_string().into_bytes(),
            )
        }
    };
    let content_type = options.content_type.clone().unwrap_or(content_type);
    let mut headers = vec![(CONTENT_TYPE, content_type)];
    headers.extend(options.headers.iter().cloned());
    Request {
        method: options.method.clone(),
        endpoint: endpoint.clone(),
        headers,
        body: bytes,
    }
}
