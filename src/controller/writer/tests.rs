//! What an answer means, the backoff and the retry; and the shape of the node applies on
//! the wire, against a stand-in service that records each request (the behaviour against
//! a real API server is in tests/).

use super::*;
use kube::core::Status;

fn api(code: u16, reason: &str) -> Result<Result<(), kube::Error>, tokio::time::error::Elapsed> {
    Ok(Err(kube::Error::Api(
        Status::failure(&format!("answer {code}"), reason)
            .with_code(code)
            .boxed(),
    )))
}

#[tokio::test]
async fn each_answer_means_one_thing() {
    assert_eq!(answer(Ok(Ok(7))), Answer::Done(7));
    assert_eq!(answer(api(409, "AlreadyExists")), Answer::AlreadyExists);
    assert_eq!(answer(api(409, "Conflict")), Answer::Conflict);
    for (code, reason) in [
        (400, "BadRequest"),
        (413, "RequestEntityTooLarge"),
        (422, "Invalid"),
    ] {
        assert_eq!(
            answer(api(code, reason)),
            Answer::Refused(format!("answer {code} ({code})")),
            "{code}"
        );
    }
    for (code, reason) in [
        (401, "Unauthorized"),
        (403, "Forbidden"),
        (404, "NotFound"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
    ] {
        assert!(
            matches!(answer(api(code, reason)), Answer::Retry(_)),
            "{code}"
        );
    }
    let timed_out = tokio::time::timeout(
        Duration::from_millis(1),
        std::future::pending::<Result<(), kube::Error>>(),
    )
    .await;
    assert_eq!(
        answer(timed_out),
        Answer::Retry(format!("no answer within {TIMEOUT:?}"))
    );
    let no_connection: Result<Result<(), kube::Error>, _> =
        Ok(Err(kube::Error::LinesCodecMaxLineLengthExceeded));
    assert!(matches!(answer(no_connection), Answer::Retry(_)));
}

#[test]
fn the_backoff_doubles_to_its_cap_and_resets() {
    use kube::runtime::utils::Backoff as _;
    let mut b = Backoff::default();
    let ms: Vec<u128> = b.by_ref().take(6).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [500, 1000, 2000, 4000, 4000, 4000]);
    b.reset();
    assert_eq!(b.next(), Some(Duration::from_millis(500)));
    assert_eq!(Backoff::delay(u32::MAX), MAX_RETRY_DELAY);
}

#[test]
fn a_retry_follows_the_backoff_and_success_clears_it() {
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut r = Retry::default();
    assert!(r.due(now));
    r.record(true, now);
    assert_eq!(r.at(), Some(now + jiff::SignedDuration::from_millis(500)));
    assert!(!r.due(now));
    for _ in 0..6 {
        r.record(true, now);
    }
    assert_eq!(r.at(), Some(now + jiff::SignedDuration::from_secs(4)));
    r.record(false, now);
    assert_eq!(r, Retry::default());
}

// ---------------------------------------------------------------------------------------
// The applies on the wire

/// One request as the stand-in received it.
#[derive(Debug)]
struct Seen {
    method: http::Method,
    path: String,
    query: Vec<(String, String)>,
    content_type: String,
    body: serde_json::Value,
}

/// A client whose requests go to a stand-in that records them and answers each with
/// `status` and `body`.
fn recording_client(
    status: u16,
    body: serde_json::Value,
) -> (Client, Arc<std::sync::Mutex<Vec<Seen>>>) {
    use http_body_util::BodyExt;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let record = record.clone();
        let body = body.clone();
        async move {
            let (parts, request_body) = req.into_parts();
            let bytes = request_body.collect().await?.to_bytes();
            record.lock().unwrap().push(Seen {
                method: parts.method,
                path: parts.uri.path().to_string(),
                query: url_pairs(parts.uri.query().unwrap_or("")),
                content_type: parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string(),
                body: serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
            });
            let answer = http::Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    body.to_string(),
                )))
                .expect("a response");
            Ok::<_, kube::Error>(answer)
        }
    });
    (Client::new(service, "default"), seen)
}

/// `a=1&b=x%2Fy` as pairs, decoded.
fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.replace("%2F", "/"))
        })
        .collect()
}

fn node_answer(name: &str, version: u64) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "resourceVersion": version.to_string() },
    })
}

fn write(node: &str, based_on: Option<u64>, message: &str) -> Write {
    Write {
        node: node.into(),
        based_on,
        conditions: vec![crate::conditions::Condition {
            type_: crate::conditions::UNDER_MAINTENANCE.into(),
            status: crate::conditions::Status::True,
            reason: "MaintenanceWindow".into(),
            message: message.into(),
            last_transition_time: Some("2026-01-01T02:00:00Z".parse().unwrap()),
            last_heartbeat_time: None,
        }],
        transitions: vec![(
            crate::conditions::UNDER_MAINTENANCE.into(),
            crate::conditions::Status::True,
        )],
        dropped: vec![],
        claimed: vec![],
        recorded: Default::default(),
    }
}

fn writer(client: Client, names: Names) -> NodeWriter {
    NodeWriter::new(
        client,
        "kumaco/maintenance/kumaco".into(),
        names,
        Arc::new(Metrics::new()),
    )
}

const NOW: &str = "2026-01-01T02:00:01Z";

#[tokio::test]
async fn a_write_is_one_forced_apply_of_its_conditions_on_the_status_with_its_precondition() {
    let (client, seen) = recording_client(200, node_answer("n1", 43));
    let names = Names::new("example.com/Maintenance", "example.com/Rebooting", &[]).unwrap();
    let mut w = writer(client, names);
    let leadership = Leadership::always();
    let term = leadership.term().unwrap();
    let now: Timestamp = NOW.parse().unwrap();
    w.apply(
        vec![write("n1", Some(42), "in window w")],
        &leadership,
        term,
        now,
    )
    .await;

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let r = &seen[0];
    assert_eq!(r.method, http::Method::PATCH);
    assert_eq!(r.path, "/api/v1/nodes/n1/status");
    assert_eq!(r.content_type, "application/apply-patch+yaml");
    assert!(
        r.query
            .contains(&("fieldManager".into(), "kumaco/maintenance/kumaco".into())),
        "{:?}",
        r.query
    );
    assert!(
        r.query.contains(&("force".into(), "true".into())),
        "{:?}",
        r.query
    );
    // Only kumaco's conditions, under the names on the wire, and the version the write
    // was derived from as its precondition: nothing else of the node is claimed.
    assert_eq!(
        r.body,
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": "n1", "resourceVersion": "42" },
            "status": { "conditions": [{
                "type": "example.com/Maintenance",
                "status": "True",
                "reason": "MaintenanceWindow",
                "message": "in window w",
                "lastTransitionTime": "2026-01-01T02:00:00Z",
            }]},
        })
    );
    let pending = &w.pending["n1"];
    assert_eq!(pending.resource_version, Some(43));
    assert_eq!(pending.written_at, now);
    assert_eq!(w.retry.at(), None);
}

#[tokio::test]
async fn a_write_without_a_known_version_carries_no_precondition() {
    let (client, seen) = recording_client(200, node_answer("n1", 7));
    let mut w = writer(client, Names::default());
    let leadership = Leadership::always();
    let term = leadership.term().unwrap();
    w.apply(
        vec![write("n1", None, "m")],
        &leadership,
        term,
        NOW.parse().unwrap(),
    )
    .await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].body["metadata"], json!({ "name": "n1" }));
    assert_eq!(
        seen[0].body["status"]["conditions"][0]["type"],
        crate::conditions::UNDER_MAINTENANCE
    );
}

#[tokio::test]
async fn no_write_is_sent_for_a_term_that_is_over() {
    let (client, seen) = recording_client(200, node_answer("n1", 43));
    let mut w = writer(client, Names::default());
    let leadership = Leadership::always();
    // A term other than the current one: the writes were derived while leading before.
    let earlier = leadership.term().unwrap() - Duration::from_secs(1);
    let now: Timestamp = NOW.parse().unwrap();
    w.apply(vec![write("n1", Some(42), "m")], &leadership, earlier, now)
        .await;
    assert!(seen.lock().unwrap().is_empty());
    assert!(w.pending.is_empty());
    assert!(
        w.retry.at().is_some(),
        "retried once a pass derives them again"
    );
}

#[tokio::test]
async fn a_refused_write_is_not_sent_again_until_it_changes() {
    let refusal = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "message": "condition message too long", "reason": "Invalid", "code": 422,
    });
    let (client, seen) = recording_client(422, refusal);
    let mut w = writer(client, Names::default());
    let leadership = Leadership::always();
    let term = leadership.term().unwrap();
    let now: Timestamp = NOW.parse().unwrap();
    for _ in 0..3 {
        w.apply(vec![write("n1", Some(42), "m")], &leadership, term, now)
            .await;
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "the same refused write is sent once"
    );
    assert_eq!(
        w.retry.at(),
        None,
        "a refusal is not retried by the backoff"
    );
    w.apply(
        vec![write("n1", Some(42), "another message")],
        &leadership,
        term,
        now,
    )
    .await;
    assert_eq!(seen.lock().unwrap().len(), 2, "a different write is sent");
}
