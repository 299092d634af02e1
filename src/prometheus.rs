//! A small client of Prometheus' HTTP API: the instant queries of the alerts gate
//! (`--prometheus-url`, `--block-query`), over [`crate::http_client`] (a bearer token and
//! a CA from files).
//!
//! A query answers with the series it returns now. Answers about the query itself are
//! not an outage, and are told apart: one that cannot work whatever the data (it does not
//! parse: HTTP 400; its result is not an instant vector) is [`QueryError::Invalid`]; one
//! that cannot be evaluated on the data now (HTTP 422) is [`QueryError::Failed`]. Both
//! hold every start (`GateUnavailable`, naming the query and Prometheus' answer) until
//! the query works; neither is waved through by `--alerts-unreachable=allow`.

use std::collections::BTreeMap;

use http::Method;
use serde::Deserialize;

use crate::gates::Failure;
use crate::http_client::{self, Client, Endpoint, HttpError, json};

/// The client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Prometheus {
    client: Client,
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Prometheus did not answer, or answered what kumaco cannot use.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The query cannot work whatever the data: it does not parse, or its result is not
    /// an instant vector.
    #[error("--block-query '{query}': {message}")]
    Invalid { query: String, message: String },
    /// Prometheus cannot evaluate the query on the data it holds now.
    #[error("--block-query '{query}': {message}")]
    Failed { query: String, message: String },
}

impl QueryError {
    /// What the failure policy makes of it: only no answer is an outage.
    pub fn failure(&self) -> Failure {
        match self {
            QueryError::Http(e) => e.failure(),
            QueryError::Invalid { .. } | QueryError::Failed { .. } => Failure::Invalid,
        }
    }
}

impl Prometheus {
    /// Checks the URL now ([`Endpoint::check`]); the files are read when used.
    pub fn new(endpoint: Endpoint) -> Result<Self, HttpError> {
        Ok(Prometheus {
            client: Client::new(endpoint, "prometheus")?,
        })
    }

    /// The URL, as given.
    pub fn url(&self) -> &str {
        self.client.urls().first().map_or("", String::as_str)
    }

    /// The labels of each series `query` returns now (`GET /api/v1/query`).
    pub async fn query(&self, query: &str) -> Result<Vec<BTreeMap<String, String>>, QueryError> {
        let path = format!("/api/v1/query?query={}", http_client::query_value(query));
        let (url, answer) = match self
            .client
            .send(Method::GET, &path, None, json::<Answer>)
            .await
        {
            Ok(answer) => answer,
            Err(HttpError::Status { status, body, .. }) if status == 400 || status == 422 => {
                // `{"status":"error","errorType":"bad_data","error":"..."}`, perhaps cut.
                let error = serde_json::from_str::<Answer>(&body)
                    .ok()
                    .and_then(|a| a.error)
                    .unwrap_or(body);
                let query = query.to_string();
                return Err(if status == 400 {
                    QueryError::Invalid {
                        query,
                        message: format!("Prometheus refuses it: {error}"),
                    }
                } else {
                    QueryError::Failed {
                        query,
                        message: format!("Prometheus cannot evaluate it now: {error}"),
                    }
                });
            }
            Err(e) => return Err(e.into()),
        };
        let data = match (answer.status.as_str(), answer.data) {
            ("success", Some(data)) => data,
            _ => {
                return Err(HttpError::Decode {
                    url,
                    message: answer
                        .error
                        .unwrap_or_else(|| format!("status {:?} without data", answer.status)),
                }
                .into());
            }
        };
        if data.result_type != "vector" {
            return Err(QueryError::Invalid {
                query: query.to_string(),
                message: format!(
                    "its result is a {}, not an instant vector: write a query that returns \
                     series, e.g. 'x > 0' rather than 'scalar(x)' or 'x[5m]'",
                    data.result_type
                ),
            });
        }
        let series: Vec<Series> =
            serde_json::from_value(data.result).map_err(|e| HttpError::Decode {
                url,
                message: e.to_string(),
            })?;
        Ok(series.into_iter().map(|s| s.metric).collect())
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    /// Decoded once its type is known.
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct Series {
    #[serde(default)]
    metric: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decode_as_prometheus_gives_them() {
        let json = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"up","job":"node","instance":"a:9100"},"value":[1800000000.1,"0"]},
            {"metric":{},"value":[1800000000.1,"1"]}]}}"#;
        let a: Answer = serde_json::from_str(json).unwrap();
        let data = a.data.unwrap();
        assert_eq!(data.result_type, "vector");
        let series: Vec<Series> = serde_json::from_value(data.result).unwrap();
        assert_eq!(series[0].metric["instance"], "a:9100");
        assert!(series[1].metric.is_empty());
        let e: Answer = serde_json::from_str(
            r#"{"status":"error","errorType":"bad_data","error":"1:4: parse error: unexpected end of input"}"#,
        )
        .unwrap();
        assert_eq!(
            e.error.as_deref(),
            Some("1:4: parse error: unexpected end of input")
        );
    }
}
