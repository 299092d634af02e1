//! One notice as a CloudEvents 1.0 event, JSON in structured mode: for machines, one
//! event per transition.
//!
//! The attributes: `specversion` `1.0`; `id`, the notice's stable id, so that a receiver
//! drops the duplicate a leader change can send (CloudEvents: `source` and `id` identify
//! an event); `source`, `kumaco/CLUSTER` unless the operator gives another URI-reference;
//! `type`, [`TYPE_PREFIX`] and the kind's name (`dev.kumaco.maintenance.started`,
//! `...not-back`, `...window-closed`); `subject`, the node's name or
//! `window/NAMESPACE/NAME`; `time`, when the transition happened (RFC 3339);
//! `datacontenttype` `application/json`; `data`, every field of the notice in camelCase,
//! a duration as `durationSeconds`, a number.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::request::{Endpoint, Request};
use super::url::encode;
use crate::notice::{NodeInfo, Notice, WindowInfo};

/// The media type of an event in structured mode, the request's `Content-Type`.
pub const CONTENT_TYPE: &str = "application/cloudevents+json; charset=UTF-8";
pub const SPEC_VERSION: &str = "1.0";
/// Reverse-DNS, as CloudEvents advises for `type`, followed by the kind's name.
pub const TYPE_PREFIX: &str = "dev.kumaco.maintenance.";

/// An event's `source`: a URI-reference (RFC 3986), not empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source(String);

/// A `source` that is not a URI-reference.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error(
        "{0:?} is not a URI-reference: expected a URI or a path such as kumaco/prod, with \
         any other character percent-encoded"
    )]
    Invalid(String),
}

impl Source {
    /// kumaco's: `kumaco/CLUSTER`, the cluster's name percent-encoded.
    pub fn for_cluster(cluster: &str) -> Source {
        Source(format!("kumaco/{}", encode(cluster)))
    }

    /// One the operator gives: only the characters RFC 3986 allows, and `%` only in an
    /// escape.
    pub fn parse(s: &str) -> Result<Source, SourceError> {
        let bytes = s.as_bytes();
        let mut valid = !s.is_empty();
        let mut i = 0;
        while valid && i < bytes.len() {
            let b = bytes[i];
            if b == b'%' {
                valid = bytes
                    .get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
                i += 3;
                continue;
            }
            valid = b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=".contains(&b);
            i += 1;
        }
        if valid {
            Ok(Source(s.to_string()))
        } else {
            Err(SourceError::Invalid(s.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The event, as JSON.
pub fn event(notice: &Notice, source: &Source) -> Value {
    let subject = match (&notice.node, &notice.window) {
        (Some(node), _) => node.name.clone(),
        (None, Some(w)) => format!("window/{}/{}", w.namespace, w.name),
        (None, None) => notice.cluster.clone(),
    };
    json!({
        "specversion": SPEC_VERSION,
        "id": notice.id,
        "source": source.as_str(),
        "type": format!("{TYPE_PREFIX}{}", notice.kind.name()),
        "subject": subject,
        "time": rfc3339(notice.at),
        "datacontenttype": "application/json",
        "data": data(notice),
    })
}

/// The request that posts the event to `endpoint`.
pub fn request(notice: &Notice, source: &Source, endpoint: &Endpoint) -> Request {
    Request::post(
        endpoint.clone(),
        CONTENT_TYPE,
        event(notice, source).to_string().into_bytes(),
    )
}

fn rfc3339(t: Timestamp) -> String {
    // jiff writes RFC 3339 in UTC (`2026-12-07T13:00:05Z`, a fraction only when there is
    // one).
    t.to_string()
}

/// Every field of the notice, in camelCase; absent ones as `null`.
fn data(n: &Notice) -> Value {
    let node = n
        .node
        .as_ref()
        .map(|NodeInfo { name, zone, pool }| json!({ "name": name, "zone": zone, "pool": pool }));
    let window = n.window.as_ref().map(
        |WindowInfo {
             namespace,
             name,
             description,
         }| json!({ "namespace": namespace, "name": name, "description": description }),
    );
    let left: Vec<Value> = n
        .left
        .iter()
        .map(|l| json!({ "node": l.node, "reason": l.reason, "message": l.message }))
        .collect();
    let forecast = n.forecast.as_ref().map(|f| {
        json!({
            "expectedEnd": rfc3339(f.expected_end),
            "p90End": rfc3339(f.p90_end),
            "notFitting": f.not_fitting,
        })
    });
    json!({
        "id": n.id,
        "kind": n.kind.name(),
        "cluster": n.cluster,
        "at": rfc3339(n.at),
        "node": node,
        "window": window,
        "reason": n.reason,
        "message": n.message,
        "durationSeconds": n.duration.map(|d| d.as_secs_f64()),
        "rebooted": n.rebooted,
        "selected": n.selected,
        "done": n.done,
        "left": left,
        "forecast": forecast,
    })
}

#[cfg(test)]
mod tests {
    use jiff::SignedDuration;

    use super::*;
    use crate::notice::{Forecast, Kind, Left};
    use kumaco_core::testing::ts;

    fn closed() -> Notice {
        Notice {
            id: "9f86d081884c7d65".into(),
            kind: Kind::WindowClosed,
            cluster: "prod eu".into(),
            at: ts("2026-12-08T04:10:00.25Z"),
            node: None,
            window: Some(WindowInfo {
                namespace: "kumaco".into(),
                name: "weekly".into(),
                description: None,
            }),
            reason: String::new(),
            message: String::new(),
            duration: Some(SignedDuration::from_millis(4_500)),
            rebooted: None,
            selected: Some(3),
            done: Some(2),
            left: vec![Left {
                node: "node-7".into(),
                reason: "WaitingForSlot".into(),
                message: "2 of 2 slots in use".into(),
            }],
            forecast: Some(Forecast {
                expected_end: ts("2026-12-08T03:40:00Z"),
                p90_end: ts("2026-12-08T04:05:00Z"),
                not_fitting: vec!["node-7".into()],
            }),
        }
    }

    /// CloudEvents 1.0 (spec.md, "Context Attributes"): `id`, `source`, `specversion`
    /// and `type` are required, non-empty strings; `source` a URI-reference; `time` an
    /// RFC 3339 timestamp; attribute names lower-case letters and digits only. The JSON
    /// format (formats/json-format.md): one object, `data` holding a JSON value as is when
    /// `datacontenttype` is `application/json`; the media type
    /// `application/cloudevents+json`.
    #[test]
    fn an_event_has_the_required_attributes_in_their_formats() {
        let e = event(&closed(), &Source::for_cluster("prod eu"));
        let object = e.as_object().unwrap();
        for required in ["id", "source", "specversion", "type"] {
            let value = object[required].as_str().unwrap();
            assert!(!value.is_empty(), "{required}");
        }
        for name in object.keys() {
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{name}"
            );
        }
        let time: Timestamp = object["time"].as_str().unwrap().parse().unwrap();
        assert_eq!(time, ts("2026-12-08T04:10:00.25Z"));
        assert!(Source::parse(object["source"].as_str().unwrap()).is_ok());
        assert!(CONTENT_TYPE.starts_with("application/cloudevents+json"));
    }

    #[test]
    fn an_event_carries_every_field_of_the_notice() {
        let e = event(&closed(), &Source::for_cluster("prod eu"));
        assert_eq!(
            e,
            json!({
                "specversion": "1.0",
                "id": "9f86d081884c7d65",
                "source": "kumaco/prod%20eu",
                "type": "dev.kumaco.maintenance.window-closed",
                "subject": "window/kumaco/weekly",
                "time": "2026-12-08T04:10:00.25Z",
                "datacontenttype": "application/json",
                "data": {
                    "id": "9f86d081884c7d65",
                    "kind": "window-closed",
                    "cluster": "prod eu",
                    "at": "2026-12-08T04:10:00.25Z",
                    "node": null,
                    "window": {"namespace": "kumaco", "name": "weekly", "description": null},
                    "reason": "",
                    "message": "",
                    "durationSeconds": 4.5,
                    "rebooted": null,
                    "selected": 3,
                    "done": 2,
                    "left": [{"node": "node-7", "reason": "WaitingForSlot", "message": "2 of 2 slots in use"}],
                    "forecast": {
                        "expectedEnd": "2026-12-08T03:40:00Z",
                        "p90End": "2026-12-08T04:05:00Z",
                        "notFitting": ["node-7"],
                    },
                },
            })
        );
        let started = Notice {
            kind: Kind::Started,
            node: Some(NodeInfo {
                name: "node-3".into(),
                zone: Some("zone-a".into()),
                pool: None,
            }),
            ..closed()
        };
        let e = event(
            &started,
            &Source::parse("https://kumaco.example/prod").unwrap(),
        );
        assert_eq!(e["type"], "dev.kumaco.maintenance.started");
        assert_eq!(e["subject"], "node-3");
        assert_eq!(e["source"], "https://kumaco.example/prod");
        assert_eq!(
            e["data"]["node"],
            json!({"name": "node-3", "zone": "zone-a", "pool": null})
        );
    }

    #[test]
    fn every_kind_has_its_type() {
        let types: Vec<String> = Kind::ALL
            .iter()
            .map(|&kind| {
                event(&Notice { kind, ..closed() }, &Source::for_cluster("c"))["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(
            types,
            [
                "dev.kumaco.maintenance.planned",
                "dev.kumaco.maintenance.started",
                "dev.kumaco.maintenance.completed",
                "dev.kumaco.maintenance.ended",
                "dev.kumaco.maintenance.waiting",
                "dev.kumaco.maintenance.not-back",
                "dev.kumaco.maintenance.window-opened",
                "dev.kumaco.maintenance.window-closed",
            ]
        );
    }

    #[test]
    fn the_request_is_a_structured_mode_post() {
        let endpoint = Endpoint::parse("https://events.example/in?key=SECRET").unwrap();
        let r = request(&closed(), &Source::for_cluster("prod"), &endpoint);
        assert_eq!(r.method, http::Method::POST);
        assert_eq!(
            r.header(&http::header::CONTENT_TYPE).unwrap(),
            "application/cloudevents+json; charset=UTF-8"
        );
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["source"], "kumaco/prod");
        assert!(!format!("{r:?}").contains("SECRET"));
    }

    #[test]
    fn a_source_is_a_uri_reference() {
        for good in [
            "kumaco/prod",
            "https://x.example/a?b=c#d",
            "urn:kumaco:prod",
            "a%20b",
        ] {
            assert_eq!(Source::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", "a b", "kumaco/é", "50%", "%zz", "a\"b"] {
            assert_eq!(
                Source::parse(bad),
                Err(SourceError::Invalid(bad.to_string())),
                "{bad:?}"
            );
        }
        assert_eq!(Source::for_cluster("é/1").as_str(), "kumaco/%C3%A9%2F1");
    }
}
