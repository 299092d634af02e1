//! A small client of Alertmanager's API v2 over an HA set of Alertmanagers
//! (`--alertmanager-url`, repeatable; [`crate::http_client`]: each request to the first that
//! answers, token, basic auth, CA and client certificate from files): the silences (list,
//! create or extend, expire) and the alerts the alerts gate reads.

use std::collections::BTreeMap;

use http::Method;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use crate::http_client::Endpoint;
use crate::http_client::{self, Client, HttpError, json, nothing};
use crate::silence::{Action, Matcher, Silence, State};

/// What went wrong talking to Alertmanager.
pub type AlertmanagerError = HttpError;

/// The client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Alertmanager {
    client: Client,
}

/// An alert as `GET /api/v2/alerts` lists it, with what the alerts gate reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedAlert {
    pub labels: BTreeMap<String, String>,
    /// The ids of the silences muting it now.
    pub silenced_by: Vec<String>,
}

impl Alertmanager {
    /// Checks the URLs now ([`Endpoint::check`]); the files are read when used.
    pub fn new(endpoint: Endpoint) -> Result<Self, AlertmanagerError> {
        Ok(Alertmanager {
            client: Client::new(endpoint, "alertmanager")?,
        })
    }

    /// The URLs, as given.
    pub fn urls(&self) -> &[String] {
        self.client.urls()
    }

    /// How many Alertmanagers (peers of an HA set) there are.
    pub fn peers(&self) -> usize {
        self.client.peers()
    }

    /// Every silence (Alertmanager's `filter` matches the silences' matchers, not their
    /// `createdBy`, so the list is filtered by the caller), from the first peer that
    /// answers.
    pub async fn silences(&self) -> Result<Vec<Silence>, AlertmanagerError> {
        let (_, wire) = self
            .client
            .send(
                Method::GET,
                "/api/v2/silences",
                None,
                json::<Vec<WireSilence>>,
            )
            .await?;
        Ok(readable(wire))
    }

    /// Every silence, as peer `peer` lists it.
    pub async fn silences_from(&self, peer: usize) -> Result<Vec<Silence>, AlertmanagerError> {
        let (_, wire) = self
            .client
            .send_to(
                peer,
                Method::GET,
                "/api/v2/silences",
                None,
                json::<Vec<WireSilence>>,
            )
            .await?;
        Ok(readable(wire))
    }

    /// The alerts firing now that no inhibition mutes, silenced or not, each matching
    /// every matcher of `filter` (Alertmanager filters them), as peer `peer` lists them.
    pub async fn alerts_from(
        &self,
        peer: usize,
        filter: &[Matcher],
    ) -> Result<Vec<ListedAlert>, AlertmanagerError> {
        let mut path =
            "/api/v2/alerts?active=true&silenced=true&inhibited=false&unprocessed=true".to_string();
        for m in filter {
            path.push_str("&filter=");
            path.push_str(&http_client::query_value(&m.to_string()));
        }
        let (_, wire) = self
            .client
            .send_to(peer, Method::GET, &path, None, json::<Vec<WireAlert>>)
            .await?;
        Ok(wire
            .into_iter()
            .map(|a| ListedAlert {
                labels: a.labels,
                silenced_by: a.status.silenced_by,
            })
            .collect())
    }

    /// When peer `peer` started (`GET /api/v2/status`, `uptime`): a peer that started a
    /// moment ago lists only the alerts sent to it since.
    pub async fn started_at(&self, peer: usize) -> Result<Timestamp, AlertmanagerError> {
        #[derive(Deserialize)]
        struct Status {
            uptime: Timestamp,
        }
        let (_, status) = self
            .client
            .send_to(peer, Method::GET, "/api/v2/status", None, json::<Status>)
            .await?;
        Ok(status.uptime)
    }

    /// Does one action; `created_by` for creations and extensions. Returns the id of
    /// the silence created or extended (Alertmanager may replace one it cannot extend
    /// in place).
    pub async fn act(
        &self,
        action: &Action,
        created_by: &str,
        now: Timestamp,
    ) -> Result<Option<String>, AlertmanagerError> {
        let post = |id: Option<&str>, matchers: &[Matcher], starts: Timestamp, ends, comment| {
            serde_json::to_vec(&PostSilence {
                id,
                matchers: matchers.iter().map(WireMatcher::from).collect(),
                starts_at: starts,
                ends_at: ends,
                created_by,
                comment,
            })
            .expect("a silence serialises")
        };
        let body = match action {
            Action::Create {
                matchers,
                ends_at,
                comment,
                ..
            } => post(None, matchers, now, *ends_at, comment),
            Action::Extend {
                id,
                matchers,
                starts_at,
                ends_at,
                comment,
                ..
            } => post(Some(id), matchers, *starts_at, *ends_at, comment),
            Action::Expire { id, .. } => {
                let path = format!("/api/v2/silence/{}", path_segment(id));
                return match self.client.send(Method::DELETE, &path, None, nothing).await {
                    Ok(_) => Ok(None),
                    // Gone already (expired and then garbage-collected): what was wanted.
                    Err(HttpError::Status { status: 404, .. }) => Ok(None),
                    Err(e) => Err(e),
                };
            }
        };
        let (_, posted) = self
            .client
            .send(Method::POST, "/api/v2/silences", Some(body), json::<Posted>)
            .await?;
        Ok(Some(posted.silence_id))
    }
}

#[derive(Deserialize)]
struct Posted {
    #[serde(rename = "silenceID")]
    silence_id: String,
}

/// A silence id is a UUID; anything else is percent-encoded rather than trusted into a
/// path.
fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMatcher {
    name: String,
    value: String,
    is_regex: bool,
    #[serde(default = "yes")]
    is_equal: bool,
}

fn yes() -> bool {
    true
}

impl From<&Matcher> for WireMatcher {
    fn from(m: &Matcher) -> Self {
        WireMatcher {
            name: m.name.clone(),
            value: m.value.clone(),
            is_regex: m.is_regex,
            is_equal: m.is_equal,
        }
    }
}

#[derive(Deserialize)]
struct WireStatus {
    state: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireSilence {
    id: String,
    status: WireStatus,
    matchers: Vec<WireMatcher>,
    starts_at: Timestamp,
    ends_at: Timestamp,
    #[serde(default)]
    created_by: String,
}

impl WireSilence {
    fn into_silence(self) -> Option<Silence> {
        let state = match self.status.state.as_str() {
            "active" => State::Active,
            "pending" => State::Pending,
            "expired" => State::Expired,
            _ => return None,
        };
        Some(Silence {
            id: self.id,
            matchers: self
                .matchers
                .into_iter()
                .map(|m| Matcher {
                    name: m.name,
                    value: m.value,
                    is_regex: m.is_regex,
                    is_equal: m.is_equal,
                })
                .collect(),
            created_by: self.created_by,
            starts_at: self.starts_at,
            ends_at: self.ends_at,
            state,
        })
    }
}

#[derive(Deserialize)]
struct WireAlert {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    status: WireAlertStatus,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAlertStatus {
    #[serde(default)]
    silenced_by: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PostSilence<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    matchers: Vec<WireMatcher>,
    starts_at: Timestamp,
    ends_at: Timestamp,
    created_by: &'a str,
    comment: &'a str,
}

/// The silences of a list, those in a state kumaco knows (active, pending, expired).
fn readable(wire: Vec<WireSilence>) -> Vec<Silence> {
    wire.into_iter()
        .filter_map(WireSilence::into_silence)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silences_decode_as_alertmanager_lists_them() {
        let json = r#"[{"id":"3b1d","status":{"state":"active"},"updatedAt":"2026-01-01T00:00:00.000Z",
            "comment":"c","createdBy":"kumaco/a/b","startsAt":"2026-01-01T00:00:00.000Z",
            "endsAt":"2026-01-01T00:30:00.000Z",
            "matchers":[{"name":"node","value":"n1","isRegex":false,"isEqual":true}]}]"#;
        let wire: Vec<WireSilence> = serde_json::from_str(json).unwrap();
        let s = wire.into_iter().next().unwrap().into_silence().unwrap();
        assert_eq!(s.state, State::Active);
        assert_eq!(s.created_by, "kumaco/a/b");
        assert_eq!(s.matchers[0].to_string(), r#"node="n1""#);
        assert_eq!(path_segment("3b1d-x/.."), "3b1d-x%2F%2E%2E");
    }

    #[test]
    fn alerts_decode_as_alertmanager_lists_them_and_filters_are_escaped() {
        let json = r#"[{"annotations":{},"endsAt":"2026-01-01T00:05:00.000Z","fingerprint":"f",
            "receivers":[{"name":"blackhole"}],"startsAt":"2026-01-01T00:00:00.000Z",
            "status":{"inhibitedBy":[],"silencedBy":["3b1d"],"state":"suppressed"},
            "updatedAt":"2026-01-01T00:00:00.000Z","labels":{"alertname":"NodeDown","node":"n1"}}]"#;
        let wire: Vec<WireAlert> = serde_json::from_str(json).unwrap();
        assert_eq!(wire[0].labels["node"], "n1");
        assert_eq!(wire[0].status.silenced_by, ["3b1d"]);
        let m = crate::silence::parse_plain_matcher(r#"severity=~"warning|critical""#).unwrap();
        assert_eq!(
            http_client::query_value(&m.to_string()),
            "severity%3D~%22warning%7Ccritical%22"
        );
    }
}
