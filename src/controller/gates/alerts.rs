//! The alerts gate's sources (`--block-alerts`, `--block-query`): one task per source
//! beside the passes, reading it every `--block-alerts-interval` and recording what holds
//! in its [`Source`]; each pass finds whose starts the alerts hold against the nodes in
//! scope then ([`crate::alerts`]). No pass ever waits for a read, and no pass makes a
//! request.
//!
//! Every replica reads, the leader, a standby and a shadow (`--dry-run`) alike: each
//! decides from what it reads, and a standby that takes over holds from its first pass
//! as the leader did.
//!
//! **An HA pair of Alertmanagers** (`--alertmanager-url` repeated) is read whole: every
//! peer each interval, and what fires on any holds. A peer that started within
//! `--block-alerts-warm-up` lists only the alerts Prometheus sent it since, so its
//! answer counts only beside a peer up longer; alone it is no reading (the gate's
//! staleness bound then applies as to an outage). A peer that answers an error, or what
//! does not decode, is left out and counted; only when no peer answers is the read a
//! failure, an outage only if no peer said kumaco is misconfigured.

use std::collections::{BTreeMap, HashMap};

use futures::future::join_all;
use jiff::{SignedDuration, Timestamp};
use tracing::{info, warn};

use super::super::sources::{Hints, Reading, Source, Sources};
use crate::alertmanager::{Alertmanager, AlertmanagerError};
use crate::alerts::{self, Firing, SilencedBy};
use crate::config::gates::AlertGate;
use crate::config::gates::alerts::AlertFilters;
use crate::gates::{Failure, Gate, SourceError};
use crate::prometheus::Prometheus;

/// Why the gate could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("--block-alerts needs --alertmanager-url")]
    NoAlertmanager,
    #[error(transparent)]
    Client(#[from] crate::http_client::HttpError),
}

/// Starts a task per source the settings name, each recording its reads in a source of
/// its own. `alertmanager`: the client of `--alertmanager-url`; `created_by`: this
/// instance's silences' `createdBy`.
pub fn spawn(
    settings: &AlertGate,
    alertmanager: Option<&Alertmanager>,
    created_by: &str,
    sources: &Sources,
) -> Result<(), StartError> {
    let mut readers = Vec::new();
    if let Some(filters) = &settings.alertmanager {
        let client = alertmanager.cloned().ok_or(StartError::NoAlertmanager)?;
        let source = sources.add(
            Gate::Alerts,
            "the alerts of Alertmanager",
            Hints::default(),
            settings.policy(),
        );
        readers.push((
            Reader::Alertmanager {
                client,
                filters: filters.clone(),
                created_by: created_by.to_string(),
                warm_up: settings.warm_up,
            },
            source,
        ));
    }
    if let Some(q) = &settings.prometheus {
        let client = Prometheus::new(q.endpoint.clone())?;
        let source = sources.add(
            Gate::Queries,
            format!("the queries of {}", client.url()),
            Hints::default(),
            settings.policy(),
        );
        readers.push((
            Reader::Prometheus {
                client,
                queries: q.queries.clone(),
            },
            source,
        ));
    }
    for (reader, source) in readers {
        tokio::spawn(run(reader, source, settings.interval));
    }
    Ok(())
}

/// What one task reads.
enum Reader {
    Alertmanager {
        client: Alertmanager,
        filters: AlertFilters,
        created_by: String,
        warm_up: SignedDuration,
    },
    Prometheus {
        client: Prometheus,
        queries: Vec<String>,
    },
}

/// Reads every interval, recording each outcome; logs once when reads start or stop
/// failing, and when the alerts that hold change.
async fn run(reader: Reader, source: Source, interval: std::time::Duration) {
    let gate = reader.gate();
    let mut failing = false;
    let mut names: Vec<String> = Vec::new();
    loop {
        let started = tokio::time::Instant::now();
        let now = Timestamp::now();
        match reader.read(&source).await {
            Ok(firing) => {
                if failing {
                    info!(gate = gate.name(), "the gate's source answers again");
                }
                failing = false;
                let mut now_names: Vec<String> = firing.iter().map(|f| f.name.clone()).collect();
                now_names.sort();
                now_names.dedup();
                if now_names != names {
                    info!(gate = gate.name(), holding = now_names.len(), first = ?now_names.iter().take(3).collect::<Vec<_>>(),
                          "the alerts or series that hold starts changed");
                    names = now_names;
                }
                source.read(Reading::Firing(firing), now);
            }
            Err(error) => {
                if !failing {
                    warn!(gate = gate.name(), cause = error.failure.name(), error = %error.message,
                          "the gate's source cannot be read; retrying every interval");
                }
                failing = true;
                source.failed(error, now);
            }
        }
        tokio::time::sleep_until(started + interval).await;
    }
}

impl Reader {
    fn gate(&self) -> Gate {
        match self {
            Reader::Alertmanager { .. } => Gate::Alerts,
            Reader::Prometheus { .. } => Gate::Queries,
        }
    }

    /// The alerts or series that hold now.
    async fn read(&self, source: &Source) -> Result<Vec<Firing>, SourceError> {
        match self {
            Reader::Alertmanager {
                client,
                filters,
                created_by,
                warm_up,
            } => {
                let peers = (0..client.peers()).map(|p| read_peer(client, p, filters, created_by));
                let answers = join_all(peers).await;
                union(client.urls(), answers, *warm_up, source, Timestamp::now())
            }
            Reader::Prometheus { client, queries } => {
                // Side by side: a read takes one timeout, however many queries.
                let answers = join_all(queries.iter().map(|q| client.query(q))).await;
                let mut firing = Vec::new();
                for (query, answer) in queries.iter().zip(answers) {
                    let series = answer.map_err(|e| SourceError {
                        failure: e.failure(),
                        message: e.to_string(),
                    })?;
                    firing.extend(series.into_iter().map(|labels| Firing {
                        name: query.clone(),
                        labels,
                        silenced_by_us: false,
                    }));
                }
                Ok(firing)
            }
        }
    }
}

/// One peer's answer: the alerts that hold by its list, and when it started.
struct PeerAnswer {
    firing: Vec<Firing>,
    started: Timestamp,
}

/// Reads one peer: its alerts, when it started, and, if some alert is silenced, its
/// silences (to tell whose they are).
async fn read_peer(
    client: &Alertmanager,
    peer: usize,
    filters: &AlertFilters,
    created_by: &str,
) -> Result<PeerAnswer, AlertmanagerError> {
    // Both answers awaited, the list's error first: with `try_join!` the error that came
    // first named the URL, which then changed from read to read (a 404 on every path
    // named the alerts or the status by chance), and with it the waiting nodes' message,
    // rewritten at each change.
    let (listed, started) = futures::join!(
        client.alerts_from(peer, &filters.matchers),
        client.started_at(peer)
    );
    let (listed, started) = (listed?, started?);
    let silenced = listed.iter().any(|a| {
        !a.silenced_by.is_empty()
            && filters
                .names
                .lets(a.labels.get("alertname").map_or("", String::as_str))
    });
    let creators: HashMap<String, String> = if silenced {
        let silences = client.silences_from(peer).await?;
        silences.into_iter().map(|s| (s.id, s.created_by)).collect()
    } else {
        HashMap::new()
    };
    let who = |id: &String| match creators.get(id) {
        Some(by) if by == created_by => SilencedBy::Us,
        Some(_) => SilencedBy::Other,
        None => SilencedBy::Unknown,
    };
    let firing = listed
        .into_iter()
        .filter_map(|a| {
            let by: Vec<SilencedBy> = a.silenced_by.iter().map(who).collect();
            alerts::firing_alert(&filters.names, a.labels, &by)
        })
        .collect();
    Ok(PeerAnswer { firing, started })
}

/// What fires on any peer that answered, if one of them has been up for the warm-up;
/// else why there is no reading. Peers that failed are counted as failed reads.
fn union(
    urls: &[String],
    answers: Vec<Result<PeerAnswer, AlertmanagerError>>,
    warm_up: SignedDuration,
    source: &Source,
    now: Timestamp,
) -> Result<Vec<Firing>, SourceError> {
    let mut firing: BTreeMap<BTreeMap<String, String>, Firing> = BTreeMap::new();
    let mut errors: Vec<AlertmanagerError> = Vec::new();
    let mut warm = false;
    let mut youngest: Option<(&str, Timestamp)> = None;
    for (url, answer) in urls.iter().zip(answers) {
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                source.count(Err(e.failure()));
                errors.push(e);
                continue;
            }
        };
        if now.duration_since(answer.started) >= warm_up {
            warm = true;
        } else if youngest.is_none_or(|(_, t)| answer.started > t) {
            youngest = Some((url, answer.started));
        }
        for f in answer.firing {
            match firing.get_mut(&f.labels) {
                // Silenced only by kumaco's own silences on every peer that lists it.
                Some(known) => known.silenced_by_us &= f.silenced_by_us,
                None => {
                    firing.insert(f.labels.clone(), f);
                }
            }
        }
    }
    if warm {
        return Ok(firing.into_values().collect());
    }
    if let Some((url, started)) = youngest {
        return Err(SourceError {
            failure: Failure::Unreachable,
            message: format!(
                "every Alertmanager that answers started less than --block-alerts-warm-up \
                 ago ({url} at {}), and lists only the alerts sent to it since",
                started.strftime("%Y-%m-%dT%H:%M:%SZ")
            ),
        });
    }
    // No peer answered: a misconfiguration any peer shows is not an outage.
    let worst = errors
        .iter()
        .find(|e| e.failure() != Failure::Unreachable)
        .or(errors.first());
    Err(match worst {
        Some(e) => SourceError {
            failure: e.failure(),
            message: e.to_string(),
        },
        None => SourceError {
            failure: Failure::Invalid,
            message: "no --alertmanager-url given".into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::SourcePolicy;
    use crate::http_client::HttpError;
    use crate::metrics::Metrics;
    use kumaco_core::testing::ts;
    use std::sync::Arc;

    fn source() -> Source {
        let sources = Sources::new(Arc::default(), Arc::new(Metrics::new()));
        sources.add(
            Gate::Alerts,
            "the alerts",
            Hints::default(),
            SourcePolicy {
                stale_after: SignedDuration::from_secs(45),
                allow_unreachable: true,
            },
        )
    }

    fn alert(name: &str, silenced_by_us: bool) -> Firing {
        Firing {
            name: name.into(),
            labels: BTreeMap::from([("alertname".to_string(), name.to_string())]),
            silenced_by_us,
        }
    }

    fn peer(firing: Vec<Firing>, started: &str) -> Result<PeerAnswer, AlertmanagerError> {
        Ok(PeerAnswer {
            firing,
            started: ts(started),
        })
    }

    fn status(code: u16) -> Result<PeerAnswer, AlertmanagerError> {
        Err(HttpError::Status {
            url: "http://am-1:9093/api/v2/alerts".into(),
            status: code,
            body: "nope".into(),
        })
    }

    const URLS: [&str; 2] = ["http://am-0:9093", "http://am-1:9093"];
    const NOW: &str = "2026-01-01T01:00:00Z";

    fn read(
        answers: Vec<Result<PeerAnswer, AlertmanagerError>>,
    ) -> Result<Vec<String>, SourceError> {
        let urls: Vec<String> = URLS.map(String::from).to_vec();
        union(
            &urls,
            answers,
            SignedDuration::from_mins(2),
            &source(),
            ts(NOW),
        )
        .map(|f| f.into_iter().map(|f| f.name).collect())
    }

    #[test]
    fn what_fires_on_any_peer_holds() {
        let both = read(vec![
            peer(vec![alert("A", false)], "2026-01-01T00:00:00Z"),
            peer(
                vec![alert("A", false), alert("B", false)],
                "2026-01-01T00:00:00Z",
            ),
        ]);
        assert_eq!(both.unwrap(), ["A", "B"]);
        // A peer restarted a moment ago lists nothing yet: the other's alerts still hold.
        let restarted = read(vec![
            peer(Vec::new(), "2026-01-01T00:59:50Z"),
            peer(vec![alert("A", false)], "2026-01-01T00:00:00Z"),
        ]);
        assert_eq!(restarted.unwrap(), ["A"]);
        // A peer that answers an error is left out.
        assert_eq!(
            read(vec![
                status(500),
                peer(vec![alert("A", false)], "2026-01-01T00:00:00Z")
            ])
            .unwrap(),
            ["A"]
        );
    }

    #[test]
    fn a_restarted_peer_alone_is_no_reading() {
        let e = read(vec![status(503), peer(Vec::new(), "2026-01-01T00:59:50Z")]).unwrap_err();
        assert_eq!(e.failure, Failure::Unreachable);
        assert!(
            e.message.starts_with(
                "every Alertmanager that answers started less than --block-alerts-warm-up ago \
                 (http://am-1:9093 at 2026-01-01T00:59:50Z)"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn no_answer_is_an_outage_only_if_no_peer_says_kumaco_is_misconfigured() {
        let down = || {
            Err(HttpError::Request {
                url: "http://am-0:9093/api/v2/alerts".into(),
                message: "connection refused".into(),
                tls: false,
            })
        };
        assert_eq!(
            read(vec![down(), down()]).unwrap_err().failure,
            Failure::Unreachable
        );
        let e = read(vec![down(), status(404)]).unwrap_err();
        assert_eq!(e.failure, Failure::NotFound);
        assert_eq!(e.message, "http://am-1:9093/api/v2/alerts: HTTP 404: nope");
    }

    #[test]
    fn silenced_only_by_kumaco_only_where_every_peer_says_so() {
        let f = read(vec![
            peer(vec![alert("A", true)], "2026-01-01T00:00:00Z"),
            peer(vec![alert("A", false)], "2026-01-01T00:00:00Z"),
        ]);
        assert_eq!(f.unwrap(), ["A"]);
        let urls: Vec<String> = URLS.map(String::from).to_vec();
        let firing = union(
            &urls,
            vec![
                peer(vec![alert("A", true)], "2026-01-01T00:00:00Z"),
                peer(vec![alert("A", false)], "2026-01-01T00:00:00Z"),
            ],
            SignedDuration::from_mins(2),
            &source(),
            ts(NOW),
        )
        .unwrap();
        assert!(!firing[0].silenced_by_us);
    }
}
