//! Sending a [`Request`]: one attempt, bounded in time, and what its answer means for the
//! notices it carries: sent, worth another try (the service is down, slow, or asks to
//! slow down), or refused for good (the request itself is wrong: another try would be
//! refused again).

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full, Limited};

use super::request::Request;
use crate::http_client::{self, Https};

/// Each attempt gets this long, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer read: an error's first words, for the logs.
const MAX_ANSWER: usize = 4096;

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempt {
    Sent,
    /// No answer, a 5xx, 408 or 429: tried again later.
    Failed(String),
    /// Any other answer outside 2xx: dropped, and counted.
    Refused(String),
}

/// Sends requests on connections of its own (the system's roots).
#[derive(Clone)]
pub struct Sender {
    https: Https,
}

impl Sender {
    pub fn new() -> Result<Sender, http_client::HttpError> {
        let https = http_client::connections(&http_client::Endpoint::default(), "notify")?;
        Ok(Sender { https })
    }

    /// One attempt. Errors name the endpoint without its secrets.
    pub async fn send(&self, request: Request) -> Attempt {
        let shown = request.endpoint.redacted();
        let http = request.into_http().map(|b| Full::new(Bytes::from(b)));
        let exchange = async {
            let response = self
                .https
                .request(http)
                .await
                .map_err(|e| http_client::error_chain(&e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Ok::<_, String>((status, body))
        };
        match tokio::time::timeout(TIMEOUT, exchange).await {
            Err(_) => Attempt::Failed(format!("{shown}: no answer within {TIMEOUT:?}")),
            Ok(Err(e)) => Attempt::Failed(format!("{shown}: {e}")),
            Ok(Ok((status, body))) => judge(&shown, status, &body),
        }
    }
}

/// What an answer means.
fn judge(shown: &str, status: StatusCode, body: &[u8]) -> Attempt {
    if status.is_success() {
        return Attempt::Sent;
    }
    let words = String::from_utf8_lossy(&body[..body.len().min(200)])
        .trim()
        .replace('\n', " ");
    let said = format!("{shown}: {} {words}", status.as_u16());
    let again = status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT;
    if again {
        Attempt::Failed(said)
    } else {
        Attempt::Refused(said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_busy_or_broken_service_is_tried_again() {
        let judged = |code: u16| judge("https://x/…", StatusCode::from_u16(code).unwrap(), b"");
        for ok in [200, 202, 204] {
            assert_eq!(judged(ok), Attempt::Sent);
        }
        for again in [500, 502, 503, 408, 429] {
            assert!(matches!(judged(again), Attempt::Failed(_)), "{again}");
        }
        for refused in [400, 401, 403, 404, 410, 413] {
            assert!(matches!(judged(refused), Attempt::Refused(_)), "{refused}");
        }
        assert_eq!(
            judge(
                "https://hooks.slack.com/…",
                StatusCode::NOT_FOUND,
                b"no_service\n"
            ),
            Attempt::Refused("https://hooks.slack.com/…: 404 no_service".into())
        );
    }
}
