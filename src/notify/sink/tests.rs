use std::io::Write;

use kumaco_core::testing::ts;
use serde_json::Value;

use super::*;
use crate::notice::NodeInfo;

fn notice(id: &str, kind: Kind, node: &str) -> Notice {
    Notice {
        id: id.into(),
        kind,
        cluster: "prod".into(),
        at: ts("2026-12-07T02:00:05Z"),
        node: Some(NodeInfo {
            name: node.into(),
            zone: None,
            pool: None,
        }),
        window: None,
        reason: "MaintenanceWindow".into(),
        message: String::new(),
        duration: None,
        rebooted: None,
        selected: None,
        done: None,
        left: Vec::new(),
        forecast: None,
    }
}

/// A file of its own holding `text`.
fn file(text: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("kumaco-sink-{}-{n}", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
    path
}

fn config(yaml: &str) -> Result<Vec<Sink>, SinkError> {
    let path = file(yaml);
    let parsed = read_config(&path);
    let _ = std::fs::remove_file(&path);
    let parsed = parsed?;
    parsed
        .sinks
        .iter()
        .enumerate()
        .map(|(i, c)| from_config(c, i, "prod"))
        .collect()
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

#[test]
fn a_config_file_makes_each_kind_of_sink_with_its_pace_and_transitions() {
    let sinks = config(
        r#"
sinks:
  - name: ops
    url: "slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
    transitions: [started, completed, window-closed]
    digestInterval: 1m
  - name: events
    type: cloudevents
    url: http://127.0.0.1:9/events
    maxPerMinute: 120
  - name: am
    type: alertmanager
    url: http://alertmanager:9093
    transitions: waiting,not-back
"#,
    )
    .unwrap();
    assert_eq!(sinks.len(), 3);
    assert_eq!(sinks[0].format.kind(), "slack");
    assert_eq!(
        sinks[0].kinds,
        [Kind::Started, Kind::Completed, Kind::WindowClosed]
    );
    assert_eq!(sinks[0].every, Duration::from_secs(60));
    assert_eq!(sinks[0].batch(), usize::MAX);
    assert_eq!(sinks[1].format.kind(), "cloudevents");
    assert_eq!(sinks[1].every, Duration::from_millis(500));
    assert_eq!(sinks[1].kinds, Kind::ALL);
    assert_eq!(sinks[1].batch(), 1);
    assert_eq!(sinks[2].kinds, [Kind::Waiting, Kind::NotBack]);
    assert_eq!(sinks[2].format.shown(), "http://alertmanager:9093/…");
}

#[test]
fn a_wrong_sink_is_named_with_its_field_and_never_its_url() {
    let cases = [
        (
            "sinks: [{url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'}]",
            "sink #1: name: missing",
        ),
        (
            "sinks: [{name: Bad_Name, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'}]",
            "sink Bad_Name: name: \"Bad_Name\": expected lower-case",
        ),
        ("sinks: [{name: a}]", "sink a: url: missing"),
        (
            "sinks: [{name: a, url: 'https://x/secret-token', type: webhook}]",
            "sink a: type: \"webhook\": expected chat, cloudevents or alertmanager",
        ),
        (
            "sinks: [{name: a, type: cloudevents, url: 'https://x/secret-token', template: '{{ id }}'}]",
            "sink a: template: not read by a cloudevents sink",
        ),
        (
            "sinks: [{name: a, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX', digestInterval: 1s}]",
            "sink a: digestInterval: must be within 5s and 3600s",
        ),
        (
            "sinks: [{name: a, type: cloudevents, url: 'https://x/secret-token', maxPerMinute: 0}]",
            "sink a: maxPerMinute: must be within 1 and 6000",
        ),
        (
            "sinks: [{name: a, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX', transitions: [rebooted]}]",
            "sink a: transitions:",
        ),
        (
            "sinks: [{name: a, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX', template: '{% if %}'}]",
            "sink a: template:",
        ),
        (
            "sinks: [{name: a, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX', colour: red}]",
            "unknown field",
        ),
    ];
    for (yaml, expected) in cases {
        let e = config(yaml).unwrap_err().to_string();
        assert!(e.contains(expected), "{yaml}: {e}");
        assert!(!e.contains("secret-token"), "{e}");
    }
}

#[test]
fn a_url_file_is_read_trimmed() {
    let url = file(
        "discord://W3dE2OZz4C13_4z_uHfDOoC7BqTW288s-z1ykqI0iJnY_HjRqMGO8Sc7YDqvf_KVKjhJ@693853386302554172\n",
    );
    let sinks = config(&format!("sinks: [{{name: d, urlFile: {}}}]", url.display())).unwrap();
    let _ = std::fs::remove_file(&url);
    assert_eq!(sinks[0].format.kind(), "discord");
    let gone = config("sinks: [{name: d, urlFile: /nonexistent/url}]").unwrap_err();
    assert!(
        gone.to_string()
            .starts_with("sink d: urlFile: /nonexistent/url"),
        "{gone}"
    );
}

#[test]
fn a_chat_sends_kured_words_for_one_and_a_digest_for_many() {
    let drain = KuredTemplate::parse("--message-template-drain", "Draining node %s").unwrap();
    let sink = from_kured_flags(
        "notify-url".into(),
        "slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        vec![(Kind::Started, drain)],
        Kind::ALL.to_vec(),
    )
    .unwrap();
    let one = sink.post(&[notice("1", Kind::Started, "node-1")]);
    assert_eq!(one.notices, 1);
    assert_eq!(body(&one.request)["text"], "*Draining node node-1*");
    // A kind without a template: kumaco's words.
    let waiting = sink.post(&[notice("1", Kind::Waiting, "node-1")]);
    assert!(
        body(&waiting.request)["text"]
            .as_str()
            .unwrap()
            .starts_with("*node-1: waiting to start*"),
        "{}",
        body(&waiting.request)
    );
    let many: Vec<Notice> = (0..40)
        .map(|i| notice(&i.to_string(), Kind::Started, &format!("node-{i}")))
        .collect();
    let digest = sink.post(&many);
    assert_eq!(digest.notices, 40);
    let text = body(&digest.request)["text"].as_str().unwrap().to_string();
    assert!(
        text.starts_with("*40 maintenance transitions: 40 started*"),
        "{text}"
    );
    assert!(text.contains("node-0, node-1"), "{text}");
}

#[test]
fn a_template_that_fails_sends_kumacos_words_and_says_why() {
    let sinks = config(
        "sinks: [{name: t, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX', template: '{{ node.name }} in {{ nodee }}'}]",
    )
    .unwrap();
    let post = sinks[0].post(&[notice("1", Kind::Started, "node-1")]);
    assert!(post.template_error.is_some());
    assert!(
        body(&post.request)["text"]
            .as_str()
            .unwrap()
            .starts_with("*node-1: maintenance started*")
    );
    let sinks =
        config("sinks: [{name: t, url: 'slack://T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX', template: '{{ node.name }} is {{ kind }}'}]")
            .unwrap();
    let post = sinks[0].post(&[notice("1", Kind::Started, "node-1")]);
    assert_eq!(post.template_error, None);
    assert_eq!(body(&post.request)["text"], "*node-1 is started*");
}

#[test]
fn alertmanager_gets_one_alert_per_notice_that_resolves_by_itself() {
    let sinks =
        config("sinks: [{name: am, type: alertmanager, url: 'http://am:9093/prefix/'}]").unwrap();
    let post = sinks[0].post(&[
        notice("a1", Kind::Completed, "node-1"),
        notice("a2", Kind::Started, "node-2"),
    ]);
    assert_eq!(post.notices, 2);
    assert_eq!(
        post.request.endpoint.uri().to_string(),
        "http://am:9093/prefix/api/v2/alerts"
    );
    let alerts = body(&post.request);
    assert_eq!(alerts.as_array().unwrap().len(), 2);
    let first = &alerts[0];
    assert_eq!(first["labels"]["alertname"], ALERT_NAME);
    assert_eq!(first["labels"]["kind"], "completed");
    assert_eq!(first["labels"]["node"], "node-1");
    assert_eq!(first["labels"]["notice"], "a1");
    assert_eq!(first["startsAt"], "2026-12-07T02:00:05Z");
    assert_eq!(first["endsAt"], "2026-12-07T02:05:05Z");
    assert!(
        first["annotations"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("node-1: maintenance completed")
    );
}
