//! The alerts gate's sources (`--block-alerts`, `--block-query`): one task per source
//! beside the passes, reading it every `--block-alerts-interval`, asking
//! [`crate::alerts`] which starts the reading holds, and publishing that in
//! [`Verdicts`]; a pass is woken only when the verdict changes. No pass ever waits for a
//! read, and no pass makes a request.
//!
//! Every replica reads, the leader, a standby and a shadow (`--dry-run`) alike: each
//! decides from what it reads, and a standby that takes over holds from its first pass
//! as the leader did. That is one request per interval per replica (two with silenced
//! alerts: the silences are listed to tell whose they are).
//!
//! What the task keeps between reads is the last good reading (only the alerts or series
//! that hold, and when it was read) and the latest error: the verdict is a function of
//! them, the nodes in scope now and the clock. Until its first read is done and the nodes
//! are listed, the controller runs no pass, so no start happens on a verdict not read
//! yet; a read takes at most [`crate::http_client::TIMEOUT`] per URL, and runs while
//! the controller lists.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::join_all;
use jiff::Timestamp;
use kube::runtime::reflector::Store;
use tokio::sync::{Notify, oneshot};
use tracing::{info, warn};

use super::{Verdict, Verdicts};
use crate::alertmanager::Alertmanager;
use crate::alerts::{self, Firing, Gate, Holding, Reads, Scope, SilencedBy, Unreachable};
use crate::config::gates::AlertGate;
use crate::config::gates::alerts::AlertFilters;
use crate::metrics::Metrics;
use crate::node::SlimNode;
use crate::prometheus::{Prometheus, QueryError};
use crate::selector::{Labels, Selector};

/// The gates' names in metrics.
pub const ALERTS: &str = "alerts";
pub const QUERIES: &str = "queries";

/// Why the gate could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Client(String),
    /// A query Prometheus answered cannot work whatever the data (it does not parse, or
    /// its result is not an instant vector).
    #[error("{0}")]
    Query(String),
    #[error("a gate's task ended before its first read")]
    Ended,
}

/// The controller's side of the gate's tasks: their first reads.
pub struct AlertGates {
    /// Tells each task the nodes are listed, so that its first verdict says whose
    /// starts its alerts hold. (Not `Store::wait_until_ready` in the task: kube's
    /// readiness wakes one waiter only, and the controller waits on it too.)
    listed: Vec<oneshot::Sender<()>>,
    first: Vec<oneshot::Receiver<Result<(), String>>>,
}

impl AlertGates {
    /// Starts a task per source the settings name. `alertmanager`: the client of
    /// `--alertmanager-url`; `created_by`: this instance's silences' `createdBy`.
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        settings: &AlertGate,
        alertmanager: Option<&Alertmanager>,
        created_by: &str,
        nodes: Store<SlimNode>,
        scope: Selector,
        verdicts: Verdicts,
        wake: Arc<Notify>,
        metrics: Arc<Metrics>,
    ) -> Result<AlertGates, StartError> {
        let mut sources = Vec::new();
        if let Some(filters) = &settings.alertmanager {
            let client = alertmanager.cloned().ok_or_else(|| {
                StartError::Client("--block-alerts needs --alertmanager-url".into())
            })?;
            sources.push(Source::Alertmanager {
                client,
                filters: filters.clone(),
                created_by: created_by.to_string(),
            });
        }
        if let Some(q) = &settings.prometheus {
            let client = Prometheus::new(q.endpoint.clone())
                .map_err(|e| StartError::Client(e.to_string()))?;
            sources.push(Source::Prometheus {
                client,
                queries: q.queries.clone(),
            });
        }
        let (mut listed, mut first) = (Vec::new(), Vec::new());
        for source in sources {
            let (tx, rx) = oneshot::channel();
            let (listed_tx, listed_rx) = oneshot::channel();
            let task = Task {
                source,
                settings: settings.clone(),
                nodes: nodes.clone(),
                scope: scope.clone(),
                verdicts: verdicts.clone(),
                wake: wake.clone(),
                metrics: metrics.clone(),
                last_good: None,
                error: None,
                failing: false,
                last: None,
            };
            tokio::spawn(task.run(listed_rx, tx));
            listed.push(listed_tx);
            first.push(rx);
        }
        Ok(AlertGates { listed, first })
    }

    /// Once the nodes are listed: waits for every source's first read and its first
    /// verdict, published. A query that cannot work is an error: kumaco stops at its
    /// start.
    pub async fn first_reads(&mut self) -> Result<(), StartError> {
        for tx in self.listed.drain(..) {
            // A task that ended already has its answer waiting below.
            let _ = tx.send(());
        }
        for rx in self.first.drain(..) {
            rx.await
                .map_err(|_| StartError::Ended)?
                .map_err(StartError::Query)?;
        }
        Ok(())
    }
}

/// What one task reads.
enum Source {
    Alertmanager {
        client: Alertmanager,
        filters: AlertFilters,
        created_by: String,
    },
    Prometheus {
        client: Prometheus,
        queries: Vec<String>,
    },
}

/// Why a read failed.
#[derive(Clone, Debug)]
enum ReadError {
    /// The source did not answer, or could not now.
    Unreachable(String),
    /// Prometheus answered that a query cannot be evaluated now (HTTP 422).
    Failed(String),
    /// A query cannot work whatever the data (HTTP 400, or not an instant vector).
    Invalid(String),
}

impl ReadError {
    fn message(&self) -> &str {
        match self {
            ReadError::Unreachable(m) | ReadError::Failed(m) | ReadError::Invalid(m) => m,
        }
    }
}

impl Source {
    fn gate(&self) -> (&'static str, Gate) {
        match self {
            Source::Alertmanager { .. } => (ALERTS, Gate::Alerts),
            Source::Prometheus { .. } => (QUERIES, Gate::Queries),
        }
    }

    /// What cannot be read, in a sentence: `the alerts of Alertmanager`.
    fn what(&self) -> String {
        match self {
            Source::Alertmanager { .. } => "the alerts of Alertmanager".into(),
            Source::Prometheus { client, .. } => format!("the queries of {}", client.url()),
        }
    }

    /// The alerts or series that hold now.
    async fn read(&self) -> Result<Vec<Firing>, ReadError> {
        match self {
            Source::Alertmanager {
                client,
                filters,
                created_by,
            } => {
                let unreachable = |e: crate::alertmanager::AlertmanagerError| {
                    ReadError::Unreachable(e.to_string())
                };
                let listed = client
                    .alerts(&filters.matchers)
                    .await
                    .map_err(unreachable)?;
                // Whose silences mute them: listed only when some alert is silenced.
                let silenced = listed.iter().any(|a| {
                    !a.silenced_by.is_empty()
                        && filters
                            .names
                            .lets(a.labels.get("alertname").map_or("", String::as_str))
                });
                let creators: HashMap<String, String> = if silenced {
                    let silences = client.silences().await.map_err(unreachable)?;
                    silences.into_iter().map(|s| (s.id, s.created_by)).collect()
                } else {
                    HashMap::new()
                };
                let who = |id: &String| match creators.get(id) {
                    Some(by) if by == created_by => SilencedBy::Us,
                    Some(_) => SilencedBy::Other,
                    None => SilencedBy::Unknown,
                };
                Ok(listed
                    .into_iter()
                    .filter_map(|a| {
                        let by: Vec<SilencedBy> = a.silenced_by.iter().map(who).collect();
                        alerts::firing_alert(&filters.names, a.labels, &by)
                    })
                    .collect())
            }
            Source::Prometheus { client, queries } => {
                // Side by side: a read takes one timeout, however many queries.
                let answers = join_all(queries.iter().map(|q| client.query(q))).await;
                let mut firing = Vec::new();
                for (query, answer) in queries.iter().zip(answers) {
                    let series = answer.map_err(|e| match e {
                        QueryError::Unreachable(e) => ReadError::Unreachable(e.to_string()),
                        e @ QueryError::Failed { .. } => ReadError::Failed(e.to_string()),
                        e @ QueryError::Invalid { .. } => ReadError::Invalid(e.to_string()),
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

struct Task {
    source: Source,
    settings: AlertGate,
    nodes: Store<SlimNode>,
    scope: Selector,
    verdicts: Verdicts,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
    /// When the source was last read without an error, and what held then.
    last_good: Option<(Timestamp, Vec<Firing>)>,
    /// The latest read's error.
    error: Option<ReadError>,
    /// Whether the latest reads failed (logged once per outage).
    failing: bool,
    /// The verdict as last published, for the log.
    last: Option<Holding>,
}

impl Task {
    /// `listed`: the nodes are listed; `first`: the first read's outcome.
    async fn run(
        mut self,
        listed: oneshot::Receiver<()>,
        first: oneshot::Sender<Result<(), String>>,
    ) {
        let mut first = Some((listed, first));
        loop {
            let started = tokio::time::Instant::now();
            self.read().await;
            if let Some((listed, tx)) = first.take() {
                if let Some(ReadError::Invalid(e)) = &self.error {
                    let _ = tx.send(Err(e.clone()));
                    return;
                }
                // Which node an alert is about needs the nodes.
                if listed.await.is_err() {
                    return;
                }
                self.publish();
                let _ = tx.send(Ok(()));
            } else {
                self.publish();
            }
            tokio::time::sleep_until(started + self.settings.interval).await;
        }
    }

    async fn read(&mut self) {
        let (gate, _) = self.source.gate();
        let result = self.source.read().await;
        self.metrics.gates.read(gate, result.is_ok());
        match result {
            Ok(firing) => {
                if self.failing {
                    info!(gate, "the gate's source answers again");
                }
                self.failing = false;
                self.error = None;
                self.last_good = Some((Timestamp::now(), firing));
            }
            Err(e) => {
                if !self.failing {
                    warn!(
                        gate,
                        error = e.message(),
                        "the gate's source cannot be read; retrying every interval"
                    );
                }
                self.failing = true;
                self.error = Some(e);
            }
        }
    }

    /// Decides from the last reading, the nodes and the clock, and publishes the verdict.
    fn publish(&mut self) {
        let (gate, kind) = self.source.gate();
        let firing = self
            .last_good
            .as_ref()
            .map_or(&[][..], |(_, f)| f.as_slice());
        let holding = if firing.is_empty() {
            Holding::default()
        } else {
            let cached = self.nodes.state();
            let in_scope = cached
                .iter()
                .filter(|n| self.scope.matches(&n.labels))
                .map(|n| {
                    let name = n.metadata.name.as_deref().unwrap_or_default();
                    (name, &n.labels as &dyn Labels)
                });
            alerts::holding(kind, firing, &Scope::new(&self.settings.sets, in_scope))
        };
        // A query that cannot be evaluated is not an outage to go on through.
        let unreachable = match self.error {
            Some(ReadError::Failed(_) | ReadError::Invalid(_)) => Unreachable::Block,
            _ => self.settings.unreachable,
        };
        let reads = Reads {
            last_good: self.last_good.as_ref().map(|(at, _)| *at),
            error: self.error.as_ref().map(ReadError::message),
        };
        let holding = alerts::current(
            reads,
            holding,
            &self.source.what(),
            unreachable,
            self.settings.stale_after(),
            Timestamp::now(),
        );
        self.metrics.gates.holding(gate, holding.cluster.is_some());
        if self.last.as_ref() != Some(&holding) {
            log_change(gate, self.last.as_ref(), &holding);
        }
        let verdict = Verdict {
            cluster: holding.cluster.iter().cloned().collect(),
            nodes: holding
                .nodes
                .iter()
                .map(|(node, hold)| (node.clone(), vec![hold.clone()]))
                .collect(),
        };
        self.last = Some(holding);
        if self.verdicts.set(gate, verdict) {
            self.wake.notify_one();
        }
    }
}

/// One line when what the gate holds changes: every start, or how many nodes.
fn log_change(gate: &str, before: Option<&Holding>, now: &Holding) {
    let cluster_before = before.and_then(|h| h.cluster.as_ref());
    match (&now.cluster, cluster_before) {
        (Some(hold), b) if b != Some(hold) => {
            info!(gate, reason = hold.reason, message = %hold.message, "holding every start")
        }
        (None, Some(_)) => info!(gate, "no longer holding every start"),
        _ => {}
    }
    let nodes_before = before.map_or(0, |h| h.nodes.len());
    if now.nodes.len() != nodes_before {
        let first: Vec<&String> = now.nodes.keys().take(3).collect();
        info!(
            gate,
            nodes = now.nodes.len(),
            ?first,
            "holding the start of nodes its alerts name"
        );
    }
}
