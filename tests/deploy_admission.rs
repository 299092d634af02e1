//! The ValidatingAdmissionPolicy shipped in `deploy/base/admission-policy.yaml`, on a real
//! API server: malformed window ConfigMaps are rejected at admission with one message that
//! names every failing key and the expected format; valid windows and ConfigMaps that are
//! not windows go through.
//!
//! Every case is also given to kumaco's own parser (`Window::from_data`, what the
//! controller and `kumaco validate` run): what the policy admits here kumaco accepts, what
//! it rejects kumaco rejects too, for at least the keys the policy names, and where both
//! check the same thing (missing keys, `blackout`) the policy's message is kumaco's.
//!
//! The policy only checks shapes (see the comment at the top of the manifest); what it
//! cannot check is kumaco's job and is tested elsewhere.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use kumaco::window::{InvalidWindow, Window, WindowId};

use testkit::ApiServer;
use testkit::manifests::{self, ApplyOptions};

const WINDOW_LABEL: &str = "kured.dev/maintenance-window";
/// The data keys kumaco checks, in the order it reports them.
const KEYS: [&str; 4] = ["startTime", "duration", "nodeSelector", "blackout"];
/// What the API server puts before the policy's own message.
const DENIED: &str = "ValidatingAdmissionPolicy 'kumaco-maintenance-window' with binding \
                      'kumaco-maintenance-window' denied request: ";
const APPLY: ApplyOptions = ApplyOptions {
    field_manager: "kumaco-deploy-test",
    dry_run: false,
    default_namespace: None,
};
/// Policies are compiled and picked up by the API server's admission plugin a moment after
/// they are stored; a loaded machine can take some seconds.
const POLICY_ACTIVE_DEADLINE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn admission_policy_rejects_malformed_windows_and_admits_the_rest() {
    let server = ApiServer::shared();
    let client = server.client().await.expect("admin client");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/base/admission-policy.yaml");
    for obj in manifests::read(&path).unwrap_or_else(|e| panic!("{e:#}")) {
        manifests::apply(&client, &obj, &APPLY)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let ns = "admission-test";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap(),
        )
        .await
        .expect("creating the test namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);

    // Until the policy is in force, bad windows are admitted: retry the first one (and
    // delete what got through) until it is rejected.
    let deadline = Instant::now() + POLICY_ACTIVE_DEADLINE;
    let first_bad = window("probe", &[("duration", "1h"), ("nodeSelector", "")]);
    loop {
        match cms.create(&PostParams::default(), &first_bad).await {
            Err(kube::Error::Api(status)) => {
                assert!(
                    status.message.contains("startTime: missing; expected"),
                    "unexpected rejection: {status:?}"
                );
                break;
            }
            Err(e) => panic!("creating the probe window: {e}"),
            Ok(_) => {
                cms.delete("probe", &DeleteParams::default())
                    .await
                    .expect("deleting the admitted probe");
                assert!(
                    Instant::now() < deadline,
                    "the admission policy was not in force within {POLICY_ACTIVE_DEADLINE:?}; \
                     API server log:\n{}",
                    server.log_tail(30)
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    let ok = [
        ("startTime", "0 2 * * sat"),
        ("duration", "3h"),
        ("nodeSelector", "zone=a"),
    ];
    // (data, a piece of the expected message). Each message must name the key and say
    // what is expected.
    let bad: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![],
            "denied request: startTime: missing; expected a cron schedule such as \"0 2 * * 6\" \
             or an RFC 3339 timestamp; duration: missing; expected a Go duration such as \
             \"90m\" or \"1h30m\"; nodeSelector: missing; expected a label selector such as \
             \"zone=a\" (\"\" selects every node)",
        ),
        (
            vec![("startTime", "@daily"), ("duration", "1h")],
            "denied request: nodeSelector: missing; expected a label selector",
        ),
        (
            with(&ok, "startTime", "0 2 * *"),
            r#"startTime: "0 2 * *" is not a schedule; expected 5 fields"#,
        ),
        (
            with(&ok, "startTime", "0 0 2 * * 6"),
            "startTime: \"0 0 2 * * 6\" is not a schedule",
        ),
        (with(&ok, "startTime", "@fortnightly"), "is not a schedule"),
        (with(&ok, "startTime", "@every 1d"), "is not a schedule"),
        (
            with(&ok, "startTime", ""),
            "startTime: \"\" is not a schedule",
        ),
        // A zone prefix makes the rest a cron spec: a timestamp cannot follow it.
        (
            with(
                &ok,
                "startTime",
                "CRON_TZ=Europe/Berlin 2026-12-05T02:00:00Z",
            ),
            "is not a schedule",
        ),
        (
            with(&ok, "startTime", "2026-12-05 02:00:00Z"),
            "or an RFC 3339 timestamp",
        ),
        // A line break in a value is escaped: the API server would drop a message with a
        // line break for the policy's static one.
        (
            with(&ok, "startTime", "every\nday \"soon\""),
            r#"startTime: "every\nday \"soon\"" is not a schedule"#,
        ),
        (
            with(&ok, "duration", "1d"),
            r#"duration: "1d" is not a Go duration; expected numbers with units"#,
        ),
        (
            with(&ok, "duration", "90"),
            "duration: \"90\" is not a Go duration",
        ),
        (with(&ok, "duration", "1h 30m"), "is not a Go duration"),
        (
            with(&ok, "duration", ""),
            "duration: \"\" is not a Go duration",
        ),
        // A long value is cut (the API server drops messages above 5 KiB).
        (with(&ok, "duration", LONG.as_str()), LONG_QUOTED.as_str()),
        (
            with(&ok, "duration", "0s"),
            "duration: \"0s\" is not positive; expected a duration above 0, such as \"90m\"",
        ),
        (
            with(&ok, "duration", "-5m"),
            "duration: \"-5m\" is not positive",
        ),
        (with(&ok, "duration", "0"), "is not positive"),
        // The object form: CEL cannot parse it, but a first field that is neither
        // matchLabels nor matchExpressions is a typo kumaco rejects too.
        (
            with(&ok, "nodeSelector", "matchLabel:\n  zone: a\n"),
            r#"nodeSelector: "matchLabel:\n  zone: a\n" is not a LabelSelector object: its first field is neither matchLabels nor matchExpressions"#,
        ),
        (
            with(&ok, "nodeSelector", r#" {"matchlabels": {"zone": "a"}}"#),
            "is not a LabelSelector object",
        ),
        (
            with(&ok, "nodeSelector", "{'selector': {}}"),
            "is not a LabelSelector object",
        ),
        (
            with(&ok, "blackout", "yes"),
            r#"denied request: blackout: "yes" is not a boolean; expected "true" or "false""#,
        ),
        // Several bad keys: every one in one rejection, in kumaco's order (missing keys
        // first), joined with "; " as kumaco joins them.
        (
            vec![
                ("startTime", "0 2 * *"),
                ("duration", "1d"),
                ("blackout", "yes"),
            ],
            "denied request: nodeSelector: missing; expected a label selector such as \
             \"zone=a\" (\"\" selects every node), or a LabelSelector object such as \
             {\"matchLabels\": {\"zone\": \"a\"}}; startTime: \"0 2 * *\" is not a schedule; \
             expected 5 fields",
        ),
        (
            vec![("duration", "0s"), ("nodeSelector", ""), ("blackout", "no")],
            "denied request: startTime: missing; expected a cron schedule such as \"0 2 * * 6\" \
             or an RFC 3339 timestamp; duration: \"0s\" is not positive; expected a duration \
             above 0, such as \"90m\"; blackout: \"no\" is not a boolean",
        ),
    ];
    for (i, (data, expected)) in bad.iter().enumerate() {
        let name = format!("bad-{i}");
        let message = match cms
            .create(&PostParams::default(), &window(&name, data))
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{data:?}: {status:?}");
                assert!(
                    status.message.contains(expected),
                    "{data:?}: the message should contain {expected:?}: {:?}",
                    status.message
                );
                status.message
            }
            other => panic!("{data:?} should be rejected, got {other:?}"),
        };
        let Some((_, policy)) = message.split_once(DENIED) else {
            panic!("{data:?}: not the policy's rejection: {message}");
        };
        let kumaco = kumaco_parse(data).expect_err("kumaco should reject what the policy rejects");
        let kumaco_keys: BTreeSet<&str> = kumaco.0.iter().map(|e| e.key).collect();
        assert!(
            named_keys(policy).is_subset(&kumaco_keys),
            "{data:?}: the policy rejects keys kumaco accepts: {policy:?}, kumaco: {kumaco}"
        );
        // Where kumaco's errors are all ones the policy checks the same way, the message
        // is kumaco's, word for word.
        if kumaco
            .0
            .iter()
            .all(|e| e.message.starts_with("missing;") || e.key == "blackout")
        {
            assert_eq!(policy, kumaco.to_string(), "{data:?}");
        }
    }

    // Four bad keys, all named in the one rejection.
    let four = [
        ("startTime", "0 2 * *"),
        ("duration", "1d"),
        ("blackout", "yes"),
    ];
    let err = cms
        .create(&PostParams::default(), &window("four-bad-keys", &four))
        .await
        .expect_err("a window with four bad keys is rejected");
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    let policy = status
        .message
        .split_once(DENIED)
        .map(|(_, m)| m)
        .unwrap_or("");
    assert_eq!(
        named_keys(policy),
        BTreeSet::from(KEYS),
        "every bad key is named: {}",
        status.message
    );
    eprintln!("the rejection of {four:?}:\n{}", status.message);

    // Everything kumaco accepts must go through: the policy is never stricter than kumaco.
    let good: Vec<Vec<(&str, &str)>> = vec![
        ok.to_vec(),
        with(&ok, "nodeSelector", ""),
        // The object form, YAML and JSON, and what the policy's patterns leave to kumaco.
        with(
            &ok,
            "nodeSelector",
            "matchLabels:\n  topology.kubernetes.io/zone: zone-a\nmatchExpressions:\n\
             - {key: node-role, operator: NotIn, values: [control-plane]}\n",
        ),
        with(
            &ok,
            "nodeSelector",
            "\nmatchExpressions :\n- {key: a, operator: Exists}",
        ),
        with(&ok, "nodeSelector", r#"{"matchLabels":{"zone":"a"}}"#),
        with(&ok, "nodeSelector", "{ 'matchExpressions': [] }"),
        with(&ok, "nodeSelector", "{}"),
        with(&ok, "nodeSelector", "{ } # every node"),
        with(
            &ok,
            "nodeSelector",
            "{ # every node in zone a\n matchLabels: {zone: a}}",
        ),
        with(
            &ok,
            "nodeSelector",
            r#"{"match\u004cabels": {"zone": "a"}}"#,
        ),
        with(&ok, "startTime", "CRON_TZ=Europe/Berlin 0 2 * * sat"),
        with(
            &ok,
            "startTime",
            "TZ=America/New_York */15 1-5 1,15 jan-mar ?",
        ),
        with(&ok, "startTime", "  0 2 * * 6  "),
        with(&ok, "startTime", "0\t2 * *\n6"),
        with(&ok, "startTime", "@weekly"),
        with(&ok, "startTime", "CRON_TZ=UTC @midnight"),
        with(&ok, "startTime", "@every 6h"),
        with(&ok, "startTime", "@every 1h30m"),
        // robfig accepts these (an interval below 1 s becomes 1 s), so kumaco does too.
        with(&ok, "startTime", "@every 0"),
        with(&ok, "startTime", "@every -5m"),
        with(&ok, "startTime", "2026-12-05T02:00:00+01:00"),
        with(&ok, "startTime", "2026-12-05t02:00:00.5z"),
        with(&ok, "duration", "1.5h"),
        with(&ok, "duration", "+45m"),
        with(&ok, "duration", "1h30m10.5s"),
        with(&ok, "duration", "500ms"),
        with(&ok, "duration", "2µs"),
        with(&ok, "duration", ".5h"),
        with(&ok, "duration", "0.5s"),
        with(&ok, "blackout", "true"),
        with(&ok, "blackout", "False"),
        with(&ok, "blackout", "1"),
        with(&ok, "blackout", "f"),
        with(&ok, "description", "kernel updates"),
        // Unknown keys are kumaco warnings, not errors.
        with(&ok, "nodeselector", "zone=b"),
    ];
    for (i, data) in good.iter().enumerate() {
        if let Err(e) = kumaco_parse(data) {
            panic!("{data:?} is not a case for this list: kumaco rejects it: {e}");
        }
        let name = format!("good-{i}");
        cms.create(&PostParams::default(), &window(&name, data))
            .await
            .unwrap_or_else(|e| panic!("{data:?} should be admitted: {e}"));
    }

    // An update is checked too.
    let broken = with(&ok, "duration", "forever");
    let err = cms
        .replace("good-0", &PostParams::default(), &{
            let mut cm = cms.get("good-0").await.unwrap();
            cm.data = Some(to_map(&broken));
            cm
        })
        .await
        .expect_err("breaking a window by an update should be rejected");
    assert!(err.to_string().contains("duration: \"forever\""), "{err}");

    // Not windows: no label, so the same bad data goes through.
    let plain: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "not-a-window" },
        "data": { "startTime": "whenever", "duration": "1d" },
    }))
    .unwrap();
    cms.create(&PostParams::default(), &plain)
        .await
        .expect("a ConfigMap without the window label is not the policy's business");
    let no_data: ConfigMap =
        serde_json::from_value(json!({ "metadata": { "name": "empty" } })).unwrap();
    cms.create(&PostParams::default(), &no_data)
        .await
        .expect("a ConfigMap without data and label is admitted");

    // Taking the label off a broken window (to disable it) is allowed: the policy looks
    // at the new object only.
    cms.create(&PostParams::default(), &window("disable-me", &ok))
        .await
        .expect("a valid window");
    cms.patch(
        "disable-me",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": { "labels": { WINDOW_LABEL: null } },
            "data": { "duration": "forever" },
        })),
    )
    .await
    .expect("removing the label together with breaking the data is not a window any more");
}

/// A value too long to quote whole (200 characters), and how the policy quotes it: its
/// first 64 characters, then "...".
static LONG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| "1d".repeat(100));
static LONG_QUOTED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("duration: \"{}...\" is not a Go duration", "1d".repeat(32))
});

/// What kumaco's own parser says of `data` (default time zone UTC).
fn kumaco_parse(data: &[(&str, &str)]) -> Result<Window, InvalidWindow> {
    let id = WindowId {
        namespace: "admission-test".into(),
        name: "case".into(),
    };
    Window::from_data(id, &to_map(data), &TimeZone::UTC)
}

/// The data keys a policy message names: each of its errors starts with `key: `, and
/// they are joined with "; ".
fn named_keys(message: &str) -> BTreeSet<&'static str> {
    KEYS.into_iter()
        .filter(|key| {
            message.starts_with(&format!("{key}: ")) || message.contains(&format!("; {key}: "))
        })
        .collect()
}

/// `data` with `key` set to `value` (added or replaced).
fn with<'a>(data: &[(&'a str, &'a str)], key: &'a str, value: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut out: Vec<(&str, &str)> = data.iter().copied().filter(|(k, _)| *k != key).collect();
    out.push((key, value));
    out
}

fn to_map(data: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    data.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A ConfigMap with the window label.
fn window(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { WINDOW_LABEL: "" } },
        "data": to_map(data),
    }))
    .unwrap()
}
