use proptest::prelude::*;

use super::*;

/// Slack's three webhook tokens, of the lengths shoutrrr requires.
const A: &str = "T00000000";
const B: &str = "B00000000";
const C: &str = "XXXXXXXXXXXXXXXXXXXXXXXX";

fn parse(url: &str) -> Target {
    Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn err(url: &str) -> UrlError {
    match Target::parse(url) {
        Ok(t) => panic!("{url} parsed: {t:?}"),
        Err(e) => e,
    }
}

fn uri(t: &Target) -> String {
    t.endpoint().uri().to_string()
}

#[test]
fn slack_webhook_forms_post_to_the_same_hook() {
    let hook = format!("https://hooks.slack.com/services/{A}/{B}/{C}");
    for url in [
        // shoutrrr's form since the bot tokens came, and its older one.
        format!("slack://hook:{A}-{B}-{C}@webhook"),
        format!("slack://{A}/{B}/{C}"),
        // The token without its type, and separated by commas.
        format!("slack://{A}-{B}-{C}@webhook"),
        format!("slack://hook:{A},{B},{C}@webhook"),
        // `hook:` with the older slashes, as a kured v1 flag may hold it.
        format!("slack://hook:{A}/{B}/{C}"),
        format!("SLACK://hook:{A}-{B}-{C}@webhook/"),
    ] {
        let t = parse(&url);
        assert_eq!(uri(&t), hook, "{url}");
        assert_eq!(
            t,
            Target::Slack {
                endpoint: Endpoint::parse(&hook).unwrap(),
                options: SlackOptions::default()
            },
            "{url}"
        );
    }
}

#[test]
fn slack_options_are_read_as_shoutrrr_documents_them() {
    let t = parse(&format!(
        "slack://hook:{A}-{B}-{C}@C0CH4NN3L?color=good&title=Great+News&icon=man-scientist\
         &botname=Shoutrrrbot&thread_ts=1700000000.0001"
    ));
    let Target::Slack { options, .. } = t else {
        panic!()
    };
    assert_eq!(
        options,
        SlackOptions {
            username: Some("Shoutrrrbot".into()),
            icon: Some(Icon::Emoji("man-scientist".into())),
            color: Some("good".into()),
            title: Some("Great News".into()),
            channel: Some("C0CH4NN3L".into()),
            thread_ts: Some("1700000000.0001".into()),
        }
    );
    // The older form's user was the bot's name; an icon URL is a URL.
    let t = parse(&format!(
        "slack://kured@{A}/{B}/{C}?icon_url=https%3A%2F%2Fexample.com%2Fk.png"
    ));
    let Target::Slack { options, .. } = t else {
        panic!()
    };
    assert_eq!(options.username.as_deref(), Some("kured"));
    assert_eq!(
        options.icon,
        Some(Icon::Url("https://example.com/k.png".into()))
    );
}

#[test]
fn slack_refuses_bot_tokens_and_malformed_ones() {
    // shoutrrr's own example of a bot token.
    assert_eq!(
        err("slack://xoxb:123456789012-1234567890123-4mt0t4l1YL3g1T5L4cK70k3N@C001CH4NN3L"),
        UrlError::SlackApiToken
    );
    assert_eq!(
        err("slack://xoxp-1-2-3@C001").to_string(),
        "slack: the URL holds a bot token (xoxb, xoxp), which posts through Slack's Web API; \
         kumaco posts to incoming webhooks only: add an incoming webhook to the channel and use \
         slack://hook:TOKEN-A-TOKEN-B-TOKEN-C@webhook, or the older slack://TOKEN-A/TOKEN-B/TOKEN-C, \
         from the webhook URL https://hooks.slack.com/services/TOKEN-A/TOKEN-B/TOKEN-C"
    );
    for bad in [
        format!("slack://hook:{A}-{B}@webhook"),
        format!("slack://hook:{A}-{B}/{C}@webhook"),
        format!("slack://hook:t00000000-{B}-{C}@webhook"),
        format!("slack://hook:{A}-{B}-{}@webhook", &C[1..]),
        "slack://webhook".to_string(),
        "slack://".to_string(),
    ] {
        assert!(
            matches!(
                err(&bad),
                UrlError::Malformed {
                    service: Service::Slack,
                    problem: "no webhook token",
                    ..
                }
            ),
            "{bad}"
        );
    }
    assert_eq!(
        err(&format!("slack://hook:{A}-{B}-{C}@webhook?colour=red")).to_string(),
        "slack: unknown parameter \"colour\": accepted are botname (or username), icon (or \
         icon_emoji, icon_url), color, title, thread_ts"
    );
}

const WORKFLOW: &str = "https://prod-00.westus.logic.azure.com:443/workflows/abc123/triggers/\
    manual/paths/invoke?api-version=2016-06-00&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=XXXXXXXX";

#[test]
fn teams_takes_a_workflow_url_encoded_in_host_or_after_teams_plus() {
    // shoutrrr's documented example.
    let t = parse(
        "teams://?host=https%3A%2F%2Fprod-00.westus.logic.azure.com%3A443%2Fworkflows%2Fabc123\
         %2Ftriggers%2Fmanual%2Fpaths%2Finvoke%3Fapi-version%3D2016-06-00%26sp%3D%252Ftriggers\
         %252Fmanual%252Frun%26sv%3D1.0%26sig%3DXXXXXXXX&title=Alert&color=red",
    );
    assert_eq!(
        t,
        Target::Teams {
            endpoint: Endpoint::parse(WORKFLOW).unwrap(),
            options: TeamsOptions {
                title: Some("Alert".into()),
                color: Some("attention"),
            }
        }
    );
    assert_eq!(uri(&t), WORKFLOW);
    let t = parse(&format!("teams+{WORKFLOW}"));
    assert_eq!(
        t,
        Target::Teams {
            endpoint: Endpoint::parse(WORKFLOW).unwrap(),
            options: TeamsOptions::default()
        }
    );
    let platform = "https://default0a1b.2c.environment.api.powerplatform.com:443/powerautomate/\
                    automations/direct/workflows/0a1b/triggers/manual/paths/invoke?api-version=1";
    assert_eq!(uri(&parse(&format!("teams+{platform}"))), platform);
}

#[test]
fn teams_refuses_retired_connectors_and_a_workflow_url_not_encoded() {
    for connector in [
        "teams://group@tenant/altId/groupOwner?host=organization.webhook.office.com",
        "teams+https://xyz.webhook.office.com/webhookb2/a@b/IncomingWebhook/c/d",
        "teams+https://outlook.office.com/webhook/a@b/IncomingWebhook/c/d",
        "teams://?host=https%3A%2F%2Fxyz.webhook.office.com%2Fwebhookb2%2Fa",
    ] {
        assert_eq!(err(connector), UrlError::TeamsConnector, "{connector}");
    }
    let unencoded = format!("teams://?host={WORKFLOW}");
    assert_eq!(
        err(&unencoded).to_string(),
        "teams: parameter \"sp\": belongs to the workflow's URL: percent-encode the whole URL in \
         host= (or write teams+WORKFLOW-URL)"
    );
    assert_eq!(
        err("teams://?title=x").to_string(),
        "teams: no host= parameter: expected teams://?host=WORKFLOW-URL (percent-encoded) or \
         teams+WORKFLOW-URL, WORKFLOW-URL being the URL of a Teams workflow triggered by \
         \"When a Teams webhook request is received\""
    );
    assert!(matches!(
        err("teams://?host=https%3A%2F%2Fa.logic.azure.com%2Fworkflows%2Fx&color=pink"),
        UrlError::Parameter { key, .. } if key == "color"
    ));
    assert!(matches!(
        err("teams+http://a.logic.azure.com/workflows/x"),
        UrlError::Malformed { .. }
    ));
}

#[test]
fn google_chat_is_the_webhook_url_with_https() {
    let webhook = "https://chat.googleapis.com/v1/spaces/FOO/messages?key=bar&token=baz";
    for url in [
        "googlechat://chat.googleapis.com/v1/spaces/FOO/messages?key=bar&token=baz",
        "hangouts://chat.googleapis.com/v1/spaces/FOO/messages?token=baz&key=bar",
    ] {
        assert_eq!(
            parse(url),
            Target::GoogleChat {
                endpoint: Endpoint::parse(webhook).unwrap()
            }
        );
    }
    assert_eq!(
        uri(&parse(
            "googlechat://chat.googleapis.com/v1/spaces/FOO/messages?key=b%2Fr&token=baz\
             &threadKey=maintenance&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
        )),
        "https://chat.googleapis.com/v1/spaces/FOO/messages?key=b%2Fr&token=baz\
         &threadKey=maintenance&messageReplyOption=REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
    );
    assert_eq!(
        err("googlechat://chat.googleapis.com/v1/spaces/FOO/messages?key=bar").to_string(),
        "googlechat: parameter \"token\": missing or empty: the webhook URL has it"
    );
    assert!(matches!(
        err("googlechat://chat.googleapis.com?key=a&token=b"),
        UrlError::Malformed { .. }
    ));
}

#[test]
fn mattermost_posts_to_the_hook_with_the_overrides() {
    let token = "bywsw8zt5jgpte3nm65qjiru6h";
    let t = parse(&format!("mattermost://your-domain.com/{token}"));
    assert_eq!(
        t,
        Target::Mattermost {
            endpoint: Endpoint::parse(&format!("https://your-domain.com/hooks/{token}")).unwrap(),
            options: MattermostOptions::default(),
        }
    );
    let t = parse(&format!(
        "mattermost://shoutrrrUser@your-domain.com:8065/{token}/shoutrrrChannel?icon=rocket\
         &title=kumaco"
    ));
    assert_eq!(
        t,
        Target::Mattermost {
            endpoint: Endpoint::parse(&format!("https://your-domain.com:8065/hooks/{token}"))
                .unwrap(),
            options: MattermostOptions {
                username: Some("shoutrrrUser".into()),
                channel: Some("shoutrrrChannel".into()),
                icon: Some(Icon::Emoji("rocket".into())),
                title: Some("kumaco".into()),
            },
        }
    );
    let cases = [
        (
            format!("mattermost://h.example/{token}?disabletls=yes"),
            format!("http://h.example/hooks/{token}"),
        ),
        (
            format!("mattermost://h.example/chat/hooks/{token}/ops"),
            format!("https://h.example/chat/hooks/{token}"),
        ),
        (
            format!("mattermost://h.example/hooks/{token}"),
            format!("https://h.example/hooks/{token}"),
        ),
        (
            format!("mattermost://h.example/{token}/hooks"),
            format!("https://h.example/hooks/{token}"),
        ),
    ];
    for (url, want) in cases {
        assert_eq!(uri(&parse(&url)), want, "{url}");
    }
    let Target::Mattermost { options, .. } =
        parse(&format!("mattermost://h.example/chat/hooks/{token}/ops"))
    else {
        panic!()
    };
    assert_eq!(options.channel.as_deref(), Some("ops"));
    assert!(matches!(
        err(&format!("mattermost://h.example/a/b/{token}")),
        UrlError::Malformed { .. }
    ));
    assert!(matches!(
        err("mattermost://h.example"),
        UrlError::Malformed { .. }
    ));
    assert!(matches!(
        err(&format!("mattermost://h.example/{token}?disabletls=maybe")),
        UrlError::Parameter { key, .. } if key == "disabletls"
    ));
}

#[test]
fn discord_posts_to_the_webhook_and_waits_for_it() {
    let token = "W3dE2OZz4C13_4z_uHfDOoC7BqTW288s-z1ykqI0iJnY_HjRqMGO8Sc7YDqvf_KVKjhJ";
    let t = parse(&format!("discord://{token}@693853386302554172"));
    assert_eq!(
        t,
        Target::Discord {
            endpoint: Endpoint::parse(&format!(
                "https://discord.com/api/webhooks/693853386302554172/{token}?wait=true"
            ))
            .unwrap(),
            options: DiscordOptions::default(),
        }
    );
    let t = parse(&format!(
        "discord://{token}@693853386302554172?thread_id=123456789&username=MyBot\
         &avatar=https://example.com/avatar.png&title=kumaco"
    ));
    assert_eq!(
        t,
        Target::Discord {
            endpoint: Endpoint::parse(&format!(
                "https://discord.com/api/webhooks/693853386302554172/{token}?wait=true\
                 &thread_id=123456789"
            ))
            .unwrap(),
            options: DiscordOptions {
                username: Some("MyBot".into()),
                avatar_url: Some("https://example.com/avatar.png".into()),
                title: Some("kumaco".into()),
            },
        }
    );
    assert_eq!(
        err(&format!(
            "discord://{token}@693853386302554172?color=0xff0000"
        ))
        .to_string(),
        "discord: parameter \"color\": kumaco posts plain content, without embeds: remove it"
    );
    assert!(matches!(
        err(&format!("discord://{token}@693853386302554172/raw")),
        UrlError::Malformed { .. }
    ));
    assert!(matches!(
        err("discord://693853386302554172"),
        UrlError::Malformed { .. }
    ));
    assert!(matches!(
        err(&format!("discord://{token}@6938/..%2F")),
        UrlError::Malformed { .. }
    ));
}

#[test]
fn generic_webhooks_read_shoutrrr_parameters_and_forward_the_rest() {
    let t = parse(
        "generic://api.example.com/webhook?template=json&titlekey=alert_title\
         &messagekey=alert_message&$source=kumaco&@acceptLanguage=tlh-Piqd\
         &@Authorization=Bearer%20token123&foo=bar&_template=x&method=put",
    );
    let Target::Generic { endpoint, options } = &t else {
        panic!()
    };
    assert_eq!(
        endpoint.uri().to_string(),
        "https://api.example.com/webhook?foo=bar&template=x"
    );
    assert_eq!(options.method, Method::PUT);
    assert_eq!(options.title, None);
    assert_eq!(options.content_type, None);
    assert_eq!(
        options.body,
        GenericBody::Json {
            title_key: "alert_title".into(),
            message_key: "alert_message".into(),
            extra: vec![("source".into(), "kumaco".into())],
        }
    );
    let headers: Vec<(&str, &[u8], bool)> = options
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes(), v.is_sensitive()))
        .collect();
    assert_eq!(
        headers,
        [
            ("accept-language", &b"tlh-Piqd"[..], true),
            ("authorization", &b"Bearer token123"[..], true),
        ]
    );

    let t = parse("generic+https://example.com/api/v1/postStuff?contenttype=text/plain");
    let Target::Generic { endpoint, options } = &t else {
        panic!()
    };
    assert_eq!(
        endpoint.uri().to_string(),
        "https://example.com/api/v1/postStuff"
    );
    assert_eq!(options.body, GenericBody::Text);
    assert_eq!(options.content_type.as_ref().unwrap(), "text/plain");

    let cases = [
        (
            "generic://h.example:8080/x?disabletls=yes",
            "http://h.example:8080/x",
        ),
        ("generic+http://h.example/x", "http://h.example/x"),
        ("generic://h.example", "https://h.example/"),
    ];
    for (url, want) in cases {
        assert_eq!(uri(&parse(url)), want, "{url}");
    }
    let Target::Generic { options, .. } = parse("generic://user:p%40ss@h.example/x") else {
        panic!()
    };
    assert_eq!(
        options.headers[0],
        (
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Basic dXNlcjpwQHNz")
        )
    );
    assert!(options.headers[0].1.is_sensitive());
}

#[test]
fn generic_refuses_what_it_cannot_honour() {
    let refused = [
        (
            "generic://h.example/x?template=telegram",
            "generic: parameter \"template\": kumaco knows template=json only (shoutrrr's other \
             templates are registered in Go code)",
        ),
        (
            "generic://h.example/x?method=GET",
            "generic: parameter \"method\": expected POST, PUT or PATCH: a message is a body",
        ),
        (
            "generic://h.example/x?$source=kumaco",
            "generic: parameter \"$FIELD\": applies with template=json only; without it the body \
             is plain text",
        ),
        (
            "generic://h.example/x?@bad%20name=1",
            "generic: parameter \"@bad name\": not an HTTP header name",
        ),
        (
            "generic+ftp://h.example/x",
            "generic: generic+ takes http or https: expected generic://HOST[:PORT]/PATH\
             [?template=json] or generic+https://HOST[:PORT]/PATH",
        ),
    ];
    for (url, want) in refused {
        assert_eq!(err(url).to_string(), want, "{url}");
    }
}

#[test]
fn unknown_services_and_non_urls_are_refused() {
    assert_eq!(
        err("pushover://shoutrrr:token@userkey").to_string(),
        "\"pushover\" is not a service kumaco posts to: expected one of slack, teams, \
         googlechat, mattermost, discord, generic"
    );
    assert_eq!(
        err("https://hooks.slack.com/services/A/B/C"),
        UrlError::UnknownService {
            scheme: "https".into()
        }
    );
    assert_eq!(
        err("slack+https://x.example/y"),
        UrlError::UnknownService {
            scheme: "slack+https".into()
        }
    );
    for bad in ["", "hooks.slack.com", "://x", "1slack://x", "sl ack://x"] {
        assert_eq!(err(bad), UrlError::NoScheme, "{bad:?}");
    }
}

/// Every form, with `SECRET` where its secret goes.
const WITH_SECRET: &[&str] = &[
    "slack://hook:T00000000-B00000000-SECRET@webhook",
    "slack://T00000000/B00000000/SECRET",
    "slack://xoxb:SECRET@C0123",
    "teams://?host=https%3A%2F%2Fa.logic.azure.com%2Fworkflows%2FSECRET%3Fsig%3DSECRET",
    "teams+https://a.logic.azure.com/workflows/SECRET?sig=SECRET",
    "teams+https://a.webhook.office.com/webhookb2/SECRET",
    "googlechat://chat.googleapis.com/v1/spaces/S/messages?key=SECRET&token=SECRET",
    "googlechat://chat.googleapis.com/v1/spaces/S/messages?key=SECRET",
    "mattermost://h.example/SECRET/ops",
    "mattermost://h.example/a/b/SECRET",
    "discord://SECRET@693853386302554172",
    "discord://SECRET@693853386302554172?json=yes",
    "generic://h.example/x/SECRET?template=json&$key=SECRET&@Authorization=SECRET&t=SECRET",
    "generic://user:SECRET@h.example/x",
    "generic://h.example/x/SECRET?method=GET&t=SECRET",
];

proptest! {
    /// Whatever the secret (any token of the characters a token has), neither a target's
    /// `Debug` nor an error shows it.
    #[test]
    fn no_secret_is_ever_shown(secret in "[A-Za-z0-9]{24,40}") {
        for form in WITH_SECRET {
            let url = form.replace("SECRET", &secret);
            let shown = match Target::parse(&url) {
                Ok(t) => format!("{t:?}"),
                Err(e) => format!("{e} {e:?}"),
            };
            prop_assert!(!shown.contains(&secret), "{url}: {shown}");
        }
    }

    #[test]
    fn any_text_parses_or_is_refused_without_panicking(url in "\\PC{0,80}") {
        let _ = Target::parse(&url);
    }

    #[test]
    fn any_service_url_parses_or_is_refused_without_panicking(
        scheme in prop::sample::select(vec![
            "slack", "teams", "teams+https", "googlechat", "mattermost", "discord", "generic",
            "generic+http",
        ]),
        rest in "[a-zA-Z0-9:@/?&=%+$_.é~-]{0,80}",
    ) {
        if let Ok(t) = Target::parse(&format!("{scheme}://{rest}")) {
            prop_assert!(matches!(t.endpoint().uri().scheme_str(), Some("http" | "https")));
        }
    }
}

#[test]
fn the_percent_escapes_decode_as_go_decodes_them() {
    assert_eq!(decode("a%2Fb+c", true).as_deref(), Some("a/b c"));
    assert_eq!(decode("a+c", false).as_deref(), Some("a+c"));
    assert_eq!(decode("%C3%A9", false).as_deref(), Some("é"));
    assert_eq!(decode("%", false), None);
    assert_eq!(decode("%zz", false), None);
    assert_eq!(decode("%FF", false), None);
    assert_eq!(decode("%é", false), None);
    assert_eq!(encode("a b/é~"), "a%20b%2F%C3%A9~");
    assert_eq!(header_name("acceptLanguage"), "accept-Language");
    assert_eq!(header_name("X-Custom"), "X-Custom");
}

#[test]
fn a_target_shows_its_host_and_options_only() {
    let t = parse(
        "generic://u:SECRET@h.example/SECRET?template=json&$apikey=SECRET&@X-Token=SECRET&q=SECRET",
    );
    assert_eq!(
        format!("{t:?}"),
        "Generic { endpoint: Endpoint(https://h.example/…), options: GenericOptions { method: \
         POST, body: Json { title_key: \"title\", message_key: \"message\", extra: [\"apikey\"] }, \
         content_type: None, title: None, headers: [\"authorization\", \"x-token\"] } }"
    );
    let t = parse("discord://SECRET@693853386302554172?username=kumaco");
    assert_eq!(
        format!("{t:?}"),
        "Discord { endpoint: Endpoint(https://discord.com/…), options: DiscordOptions { \
         username: Some(\"kumaco\"), avatar_url: None, title: None } }"
    );
}
