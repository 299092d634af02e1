//! Each payload against the format its service documents. Per service, the fields the
//! documentation requires and the limits it states, with the document's name:
//!
//! - Slack, "Sending messages using incoming webhooks" (api.slack.com/messaging/webhooks):
//!   a JSON `POST` with `text` (required unless `blocks` or `attachments`), optional
//!   `username`, `icon_emoji`, `icon_url`, `channel`, `thread_ts`; `attachments[].color`
//!   and `.text`. "chat.postMessage": keep `text` within 4,000 characters (longer is cut
//!   at 40,000). "Formatting text for app surfaces": escape `&`, `<`, `>`.
//! - Microsoft Teams, a Power Automate workflow "When a Teams webhook request is received"
//!   then "Post card in a chat or channel" (Microsoft Learn, "Create incoming webhooks
//!   with Workflows for Microsoft Teams"): `{"type": "message", "attachments":
//!   [{"contentType": "application/vnd.microsoft.card.adaptive", "content": CARD}]}`; the
//!   card (adaptivecards.io schema): `type` `AdaptiveCard`, `version`, `body` of elements,
//!   a `TextBlock` requiring `text`. Teams clients render schema 1.5 and below. The Teams
//!   connector's "Known issues and limitations": a message is limited to about 28 KB.
//! - Google Chat, "Send messages to Google Chat with incoming webhooks": a JSON `POST`
//!   with `text`, `Content-Type: application/json; charset=UTF-8`; "Send a message using
//!   the Google Chat API": a message is at most 32,000 bytes.
//! - Mattermost, "Incoming webhooks" (developers.mattermost.com): a JSON `POST` with `text`
//!   (required unless `attachments`), optional `channel`, `username`, `icon_url`,
//!   `icon_emoji`; the server stores posts of up to 16,383 characters (its
//!   `PostMessageMaxRunesV2`; longer webhook texts are split into several posts).
//! - Discord, "Execute Webhook" (discord.com/developers/docs/resources/webhook): a JSON
//!   `POST`; one of `content`, `embeds`, `components`, `files`, `poll` required; `content`
//!   up to 2,000 characters; `username`, `avatar_url`, `allowed_mentions`; query `wait`,
//!   `thread_id`. "Webhook Object": a webhook's name is 1 to 80 characters.
//! - Generic (shoutrrr's "Generic" service documentation): without a template the body is
//!   the message as plain text; `template=json` one object, `title` and `message` (or the
//!   `titlekey`, `messagekey` names) and the `$` fields.

use serde_json::{Value, json};

use super::*;
use crate::notify::url::Target;

fn parse(url: &str) -> Target {
    Target::parse(url).unwrap()
}

fn message() -> Message {
    Message {
        title: "node-3 (zone-a): maintenance completed after 4m12s, rebooted".into(),
        text: "window kumaco/weekly\nNodeRebooted: boot ID a -> b\ncluster prod-eu".into(),
    }
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

fn content_type(r: &Request) -> &str {
    r.header(&CONTENT_TYPE).unwrap().to_str().unwrap()
}

const SLACK: &str = "slack://hook:T00000000-B00000000-XXXXXXXXXXXXXXXXXXXXXXXX@webhook";

#[test]
fn slack_gets_text_in_its_markup_with_the_three_characters_escaped() {
    let r = request(&parse(SLACK), &message());
    assert_eq!(r.method, http::Method::POST);
    assert_eq!(content_type(&r), "application/json");
    assert_eq!(
        r.endpoint.uri().to_string(),
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    );
    assert_eq!(
        body(&r),
        json!({
            "text": "*node-3 (zone-a): maintenance completed after 4m12s, rebooted*\n\
                     window kumaco/weekly\nNodeRebooted: boot ID a -&gt; b\ncluster prod-eu"
        })
    );
    let with = parse(&format!(
        "{SLACK}?color=good&title=Maintenance&botname=kumaco&icon=wrench&thread_ts=17.1"
    ));
    assert_eq!(
        body(&request(&with, &message())),
        json!({
            "text": "*Maintenance*",
            "attachments": [{
                "color": "good",
                "fallback": "Maintenance",
                "text": "node-3 (zone-a): maintenance completed after 4m12s, rebooted\n\
                         window kumaco/weekly\nNodeRebooted: boot ID a -&gt; b\ncluster prod-eu",
            }],
            "username": "kumaco",
            "icon_emoji": "wrench",
            "thread_ts": "17.1",
        })
    );
}

#[test]
fn slack_text_stays_within_its_advice_and_no_escape_is_cut() {
    let long = Message {
        title: "t".into(),
        text: "<".repeat(SLACK_MAX_CHARS),
    };
    let text = body(&request(&parse(SLACK), &long))["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.chars().count() <= SLACK_MAX_CHARS, "{}", text.len());
    assert!(text.ends_with("&lt;…"), "{}", &text[text.len() - 12..]);
    assert_eq!(slack_escaped("a<b&c", 6), "a&lt;…");
    assert_eq!(slack_escaped("a<b&c", 100), "a&lt;b&amp;c");
}

const WORKFLOW: &str = "teams+https://prod-00.westus.logic.azure.com:443/workflows/abc/triggers/\
                        manual/paths/invoke?api-version=2016-06-00&sig=X";

#[test]
fn teams_gets_an_adaptive_card_in_the_message_envelope() {
    let r = request(&parse(WORKFLOW), &message());
    assert_eq!(content_type(&r), "application/json");
    let b = body(&r);
    assert_eq!(
        b,
        json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": null,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.4",
                    "msteams": {"width": "Full"},
                    "body": [
                        {"type": "TextBlock", "text": "node-3 (zone-a): maintenance completed after 4m12s, rebooted",
                         "weight": "Bolder", "size": "Medium", "wrap": true},
                        {"type": "TextBlock", "text": "window kumaco/weekly", "wrap": true},
                        {"type": "TextBlock", "text": "NodeRebooted: boot ID a -> b", "wrap": true},
                        {"type": "TextBlock", "text": "cluster prod-eu", "wrap": true},
                    ],
                },
            }],
        })
    );
    // What the documentation requires, checked one by one.
    let card = &b["attachments"][0]["content"];
    assert_eq!(card["type"], "AdaptiveCard");
    let version: f64 = card["version"].as_str().unwrap().parse().unwrap();
    assert!(version <= 1.5);
    for element in card["body"].as_array().unwrap() {
        assert_eq!(element["type"], "TextBlock");
        assert!(element["text"].is_string());
    }
    let titled = parse(
        "teams://?host=https%3A%2F%2Fa.logic.azure.com%2Fworkflows%2Fx&title=Maintenance\
         &color=warning",
    );
    let b = body(&request(&titled, &message()));
    let blocks = &b["attachments"][0]["content"]["body"];
    assert_eq!(
        blocks[0],
        json!({"type": "TextBlock", "text": "Maintenance", "weight": "Bolder", "size": "Medium",
               "wrap": true, "color": "warning"})
    );
    assert_eq!(
        blocks[1]["text"],
        "node-3 (zone-a): maintenance completed after 4m12s, rebooted"
    );
}

#[test]
fn teams_stays_within_its_size_whatever_the_escapes() {
    for filler in ["x", "\"", "\u{1}", "é\n"] {
        let long = Message {
            title: "t".into(),
            text: filler.repeat(TEAMS_MAX_BODY_BYTES),
        };
        let r = request(&parse(WORKFLOW), &long);
        assert!(
            r.body.len() <= TEAMS_MAX_BODY_BYTES,
            "{filler:?}: {}",
            r.body.len()
        );
        assert!(
            r.body.len() > TEAMS_MAX_BODY_BYTES / 2,
            "{filler:?}: {}",
            r.body.len()
        );
    }
}

#[test]
fn google_chat_gets_text_within_its_bytes() {
    let target = parse("googlechat://chat.googleapis.com/v1/spaces/S/messages?key=k&token=t");
    let r = request(&target, &message());
    assert_eq!(content_type(&r), "application/json; charset=UTF-8");
    assert_eq!(
        body(&r),
        json!({"text": "*node-3 (zone-a): maintenance completed after 4m12s, rebooted*\n\
                        window kumaco/weekly\nNodeRebooted: boot ID a -> b\ncluster prod-eu"})
    );
    let long = Message {
        title: "t".into(),
        text: "é".repeat(GOOGLE_CHAT_MAX_BYTES),
    };
    let text = body(&request(&target, &long))["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.len() <= GOOGLE_CHAT_MAX_BYTES && text.len() > GOOGLE_CHAT_MAX_BYTES - 4);
}

#[test]
fn mattermost_gets_text_and_its_overrides() {
    let target = parse(
        "mattermost://kumaco@chat.example/bywsw8zt5jgpte3nm65qjiru6h/ops?icon=https://x.example/k.png",
    );
    let r = request(&target, &message());
    assert_eq!(content_type(&r), "application/json");
    assert_eq!(
        body(&r),
        json!({
            "text": "**node-3 (zone-a): maintenance completed after 4m12s, rebooted**\n\
                     window kumaco/weekly\nNodeRebooted: boot ID a -> b\ncluster prod-eu",
            "username": "kumaco",
            "channel": "ops",
            "icon_url": "https://x.example/k.png",
        })
    );
    let long = Message {
        title: "t".into(),
        text: "é".repeat(MATTERMOST_MAX_CHARS * 2),
    };
    let text = body(&request(&target, &long))["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(text.chars().count(), MATTERMOST_MAX_CHARS);
    assert!(text.starts_with("**t**\né") && text.ends_with("é…"));
}

#[test]
fn discord_gets_content_within_its_characters_and_pings_no_one() {
    let target = parse(
        "discord://W3dE2OZz4C13_4z_uHfDOoC7BqTW288s@693853386302554172?username=kumaco\
         &avatar=https://x.example/k.png",
    );
    let r = request(&target, &message());
    assert_eq!(content_type(&r), "application/json");
    assert_eq!(
        body(&r),
        json!({
            "content": "**node-3 (zone-a): maintenance completed after 4m12s, rebooted**\n\
                        window kumaco/weekly\nNodeRebooted: boot ID a -> b\ncluster prod-eu",
            "username": "kumaco",
            "avatar_url": "https://x.example/k.png",
            "allowed_mentions": {"parse": []},
        })
    );
    let long = Message {
        title: "@everyone".into(),
        text: "é".repeat(DISCORD_MAX_CHARS),
    };
    let b = body(&request(&target, &long));
    let content = b["content"].as_str().unwrap();
    assert_eq!(content.chars().count(), DISCORD_MAX_CHARS);
    assert!(content.ends_with("é…"));
    let long_name = parse(&format!(
        "discord://T@1?username={}",
        "n".repeat(DISCORD_MAX_USERNAME_CHARS + 5)
    ));
    let b = body(&request(&long_name, &message()));
    assert_eq!(
        b["username"].as_str().unwrap().chars().count(),
        DISCORD_MAX_USERNAME_CHARS
    );
}

#[test]
fn generic_gets_text_or_shoutrrr_json() {
    let r = request(&parse("generic+https://h.example/in"), &message());
    assert_eq!(content_type(&r), "text/plain; charset=utf-8");
    assert_eq!(
        String::from_utf8(r.body).unwrap(),
        "node-3 (zone-a): maintenance completed after 4m12s, rebooted\nwindow kumaco/weekly\n\
         NodeRebooted: boot ID a -> b\ncluster prod-eu"
    );
    let target = parse(
        "generic://h.example/in?template=json&messagekey=body&$source=kumaco&$title=fixed\
         &@X-Token=s3cr3t&method=PATCH&contenttype=application/vnd.x%2Bjson",
    );
    let r = request(&target, &message());
    assert_eq!(r.method, http::Method::PATCH);
    assert_eq!(content_type(&r), "application/vnd.x+json");
    assert_eq!(r.headers[1].0, "x-token");
    assert!(r.headers[1].1.is_sensitive());
    assert_eq!(
        body(&r),
        json!({
            "title": "fixed",
            "body": "window kumaco/weekly\nNodeRebooted: boot ID a -> b\ncluster prod-eu",
            "source": "kumaco",
        })
    );
    let r = request(&parse("generic://h.example/in?template=json"), &message());
    assert_eq!(content_type(&r), "application/json");
    assert_eq!(
        body(&r),
        json!({
            "title": "node-3 (zone-a): maintenance completed after 4m12s, rebooted",
            "message": "window kumaco/weekly\nNodeRebooted: boot ID a -> b\ncluster prod-eu",
        })
    );
}

#[test]
fn an_empty_text_leaves_no_blank_line() {
    let bare = Message {
        title: "window kumaco/weekly opened".into(),
        text: String::new(),
    };
    assert_eq!(
        body(&request(&parse(SLACK), &bare))["text"],
        "*window kumaco/weekly opened*"
    );
    assert_eq!(
        body(&request(&parse("discord://T@1"), &bare))["content"],
        "**window kumaco/weekly opened**"
    );
    let b = body(&request(&parse(WORKFLOW), &bare));
    assert_eq!(
        b["attachments"][0]["content"]["body"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_notice_is_a_message_in_its_default_words() {
    use crate::notice::{Kind, Notice};
    let at = kumaco_core::testing::ts("2026-12-07T13:00:05Z");
    let notice = Notice::new("1".into(), Kind::Started, "c".into(), at);
    assert_eq!(
        Message::of(&notice),
        Message {
            title: notice.title(),
            text: notice.text()
        }
    );
}

/// A long text cheaply: a piece repeated.
fn long_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    ("\\PC{0,40}", 0..1_500usize).prop_map(|(piece, n)| piece.repeat(n))
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(64))]

    /// Whatever the message, every body stays within its service's limits and parses.
    #[test]
    fn any_message_fits_every_service(title in long_text(), text in long_text()) {
        let m = Message { title, text };
        let chars = |v: &Value| v.as_str().unwrap().chars().count();

        let slack = body(&request(&parse(SLACK), &m));
        proptest::prop_assert!(chars(&slack["text"]) <= SLACK_MAX_CHARS);
        let slack = body(&request(&parse(&format!("{SLACK}?color=good")), &m));
        proptest::prop_assert!(chars(&slack["attachments"][0]["text"]) <= SLACK_MAX_CHARS);

        let teams = request(&parse(WORKFLOW), &m);
        proptest::prop_assert!(teams.body.len() <= TEAMS_MAX_BODY_BYTES);
        body(&teams);

        let chat = body(&request(
            &parse("googlechat://chat.googleapis.com/v1/spaces/S/messages?key=k&token=t"),
            &m,
        ));
        proptest::prop_assert!(chat["text"].as_str().unwrap().len() <= GOOGLE_CHAT_MAX_BYTES);

        let mm = body(&request(&parse("mattermost://h.example/token"), &m));
        proptest::prop_assert!(chars(&mm["text"]) <= MATTERMOST_MAX_CHARS);

        let discord = body(&request(&parse("discord://T@1"), &m));
        proptest::prop_assert!(chars(&discord["content"]) <= DISCORD_MAX_CHARS);

        let generic = request(&parse("generic://h.example/in"), &m);
        proptest::prop_assert!(generic.body.len() <= GENERIC_MAX_BYTES);
        let json = body(&request(&parse("generic://h.example/in?template=json"), &m));
        proptest::prop_assert!(json["title"].as_str().unwrap().len() <= MAX_HEADER_BYTES);
        proptest::prop_assert!(json["message"].as_str().unwrap().len() <= GENERIC_MAX_BYTES);
    }
}
