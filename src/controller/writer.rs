//! The one writer: every write kumaco makes, a node's conditions or an event, is timed
//! out, classified and retried the same way.
//!
//! - [`answer`]: what an API answer means for a write: done, already there (an event),
//!   a conflict (a node that changed since the write was derived), refused for good, or
//!   worth a retry.
//! - [`Backoff`]: [`FIRST_DELAY`] doubling to [`MAX_RETRY_DELAY`], for writes, event
//!   creations and watches alike. kube's default (client-go's, with a cap many times
//!   higher) kept a watch waiting long after an API server that had been down a few
//!   seconds was back (docs/design.md, "Timing"); the cap bounds how late a missed edge
//!   lands after the API server returns, and a retry against a down server costs one
//!   request.
//! - [`NodeWriter`]: the node applies: server-side apply on `nodes/status`, 32 in flight,
//!   each carrying the resourceVersion it was derived from, none sent after the term that
//!   derived it; the answers become pending writes, refusals and a retry time.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tracing::{debug, info, warn};

use crate::conditions::{MAINTENANCE_IN_PROGRESS, Status};
use crate::leader::Leadership;
use crate::metrics::{Metrics, WriteResult};
use crate::node::{Names, SlimNode, condition_json};
use crate::pass::{Pending, Write};
use crate::reasons;

/// Every API write gets this long before it counts as failed and is retried.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The backoff's first delay.
const FIRST_DELAY: Duration = Duration::from_millis(500);
/// The backoff's cap.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(4);
/// Node writes in flight at once.
const NODE_CONCURRENCY: usize = 32;

/// What an API answer means for a write.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer<T> {
    /// Written; the answer's value.
    Done(T),
    /// 409 AlreadyExists: an event someone (another replica, an earlier run) created.
    AlreadyExists,
    /// 409 otherwise: the object changed since the write was derived (its
    /// resourceVersion precondition failed). Derived again from the newer version.
    Conflict,
    /// An answer that will not change (400, 413, 422, ...): not retried until the write
    /// itself changes.
    Refused(String),
    /// 401/403 (RBAC can be fixed), 404, 429, 5xx, no connection, a timeout: retried
    /// with [`Backoff`].
    Retry(String),
}

/// Classifies the answer to a write sent with a [`TIMEOUT`] (`Err(_)`: it timed out).
pub fn answer<T>(result: Result<Result<T, kube::Error>, tokio::time::error::Elapsed>) -> Answer<T> {
    match result {
        Ok(Ok(value)) => Answer::Done(value),
        Ok(Err(kube::Error::Api(e))) => match e.code {
            409 if e.reason == "AlreadyExists" => Answer::AlreadyExists,
            409 => Answer::Conflict,
            // 404: the node was deleted (the next pass no longer has it), or the event's
            // namespace (its windows leave the cache with it): nothing lasting either way.
            401 | 403 | 404 | 429 => Answer::Retry(format!("{} ({})", e.message, e.code)),
            code if code >= 500 => Answer::Retry(format!("{} ({})", e.message, e.code)),
            _ => Answer::Refused(format!("{} ({})", e.message, e.code)),
        },
        Ok(Err(e)) => Answer::Retry(e.to_string()),
        Err(_) => Answer::Retry(format!("no answer within {TIMEOUT:?}")),
    }
}

/// A delay that doubles with each failure in a row, from `first` after one to `cap`:
/// every backoff of the controller's (the API's [`Backoff`], the silences' rounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Doubling {
    first: Duration,
    cap: Duration,
}

impl Doubling {
    pub const fn new(first: Duration, cap: Duration) -> Doubling {
        Doubling { first, cap }
    }

    /// The delay before the retry that follows `failures` failures in a row (at least 1).
    pub fn delay(self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        (self.first * 2u32.pow(doublings)).min(self.cap)
    }
}

/// The API's backoff: [`FIRST_DELAY`] doubling to [`MAX_RETRY_DELAY`].
const API: Doubling = Doubling::new(FIRST_DELAY, MAX_RETRY_DELAY);

/// The API's backoff ([`Doubling`]: [`FIRST_DELAY`] to [`MAX_RETRY_DELAY`]) counting failures. As
/// an iterator (and kube's `Backoff`) it drives the watches; [`Retry`] uses it for writes
/// and event creations.
#[derive(Clone, Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// The delay before the retry that follows `failures` failures in a row (at least 1).
    pub fn delay(failures: u32) -> Duration {
        API.delay(failures)
    }
}

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        Some(Self::delay(self.failures))
    }
}

impl kube::runtime::utils::Backoff for Backoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// When to retry the writes of a pass that failed: [`Backoff`] while they keep failing,
/// nothing once a pass succeeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retry {
    failures: u32,
    at: Option<Timestamp>,
}

impl Retry {
    /// Records how a round of writes went at `now`.
    pub fn record(&mut self, failed: bool, now: Timestamp) {
        if !failed {
            *self = Retry::default();
            return;
        }
        self.failures = self.failures.saturating_add(1);
        self.at = now.checked_add(Backoff::delay(self.failures)).ok();
    }

    /// When the failed writes are to be tried again, if some failed.
    pub fn at(&self) -> Option<Timestamp> {
        self.at
    }

    /// Whether a retry is due at `now` (no failure waiting: always).
    pub fn due(&self, now: Timestamp) -> bool {
        self.at.is_none_or(|t| t <= now)
    }
}

/// Applies the pass's node writes and remembers what it wrote until the cache shows it.
pub struct NodeWriter {
    api: Api<SlimNode>,
    manager: String,
    /// The names the nodes carry kumaco's conditions under.
    names: Names,
    metrics: Arc<Metrics>,
    /// Writes of this instance the node cache may not show yet, by node.
    pub pending: HashMap<String, Pending>,
    /// Writes refused with an answer that will not change, by node: the same write is
    /// not sent again; a different one is.
    refused: HashMap<String, u64>,
    pub retry: Retry,
}

impl NodeWriter {
    pub fn new(client: Client, manager: String, names: Names, metrics: Arc<Metrics>) -> Self {
        NodeWriter {
            api: Api::all(client),
            manager,
            names,
            metrics,
            pending: HashMap::new(),
            refused: HashMap::new(),
            retry: Retry::default(),
        }
    }

    /// Writes from now on with `client`.
    pub fn use_client(&mut self, client: Client) {
        self.api = Api::all(client);
    }

    /// Forgets the pending writes the cache caught up with (`settled`), and everything
    /// about nodes that no longer exist.
    pub fn forget(&mut self, settled: &[String], existing: &HashSet<&str>) {
        for name in settled {
            self.pending.remove(name);
        }
        self.pending
            .retain(|name, _| existing.contains(name.as_str()));
        self.refused
            .retain(|name, _| existing.contains(name.as_str()));
    }

    /// Applies `writes`, derived in leadership `term`: none is sent once that term is
    /// over.
    pub async fn apply(
        &mut self,
        mut writes: Vec<Write>,
        leadership: &Leadership,
        term: Instant,
        now: Timestamp,
    ) {
        writes.retain(|w| self.refused.get(&w.node) != Some(&w.fingerprint()));
        if writes.is_empty() {
            self.retry.record(false, now);
            return;
        }
        let results: Vec<(Write, Answer<Option<u64>>)> = futures::stream::iter(writes)
            .map(|w| self.apply_one(w, leadership, term))
            .buffer_unordered(NODE_CONCURRENCY)
            .collect()
            .await;
        let mut failed = false;
        for (w, answer) in results {
            failed |= !matches!(answer, Answer::Done(_) | Answer::Refused(_));
            self.record(w, answer, now);
        }
        self.retry.record(failed, now);
    }

    /// One apply; only its answer's resourceVersion is kept: the results wait for the
    /// whole burst, and even slim Nodes add up over a window edge's writes. In a span naming
    /// the node, as is its record: the API client's lines about the request carry it too.
    #[tracing::instrument(name = "write", skip_all, fields(node = %w.node))]
    async fn apply_one(
        &self,
        w: Write,
        leadership: &Leadership,
        term: Instant,
    ) -> (Write, Answer<Option<u64>>) {
        // Leadership can lapse while earlier writes of this pass are in flight; no write
        // may start after it has.
        if leadership.term() != Some(term) {
            return (w, Answer::Retry("not the leader any more".into()));
        }
        let conditions: Vec<_> = w
            .conditions
            .iter()
            .map(|c| condition_json(c, &self.names))
            .collect();
        let mut metadata = json!({ "name": w.node });
        if let Some(version) = w.based_on {
            metadata["resourceVersion"] = version.to_string().into();
        }
        let body = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": metadata,
            "status": { "conditions": conditions },
        });
        let params = PatchParams::apply(&self.manager).force();
        let started = Instant::now();
        let result = tokio::time::timeout(
            TIMEOUT,
            self.api.patch_status(&w.node, &params, &Patch::Apply(body)),
        )
        .await;
        self.metrics
            .api_write_duration
            .observe(started.elapsed().as_secs_f64());
        let answer = match answer(result) {
            Answer::Done(node) => Answer::Done(node.resource_version()),
            Answer::AlreadyExists => Answer::Conflict,
            Answer::Conflict => Answer::Conflict,
            Answer::Refused(e) => Answer::Refused(e),
            Answer::Retry(e) => Answer::Retry(e),
        };
        (w, answer)
    }

    #[tracing::instrument(name = "write", skip_all, fields(node = %w.node))]
    fn record(&mut self, w: Write, answer: Answer<Option<u64>>, now: Timestamp) {
        match answer {
            Answer::Done(written_version) => {
                self.refused.remove(&w.node);
                self.metrics.write("patch", WriteResult::Ok);
                if let Some(d) = w.recorded.maintenance {
                    let f = &self.metrics.forecast;
                    f.maintenance_duration.observe(d.as_secs_f64());
                }
                if let Some(d) = w.recorded.recovery {
                    self.metrics
                        .forecast
                        .recovery_duration
                        .observe(d.as_secs_f64());
                }
                for (ty, status) in &w.transitions {
                    info!(node = %w.node, condition = %self.names.to_wire(ty), status = status.as_str(), "condition changed");
                    self.metrics.transition(ty, status.as_str());
                    if ty == MAINTENANCE_IN_PROGRESS && *status == Status::False {
                        let reason = w.conditions.iter().find(|c| &c.type_ == ty);
                        if let Some(r) = reason.map(|c| c.reason.as_str())
                            && reasons::ends_maintenance(r)
                        {
                            self.metrics.maintenance_ended(r);
                        }
                    }
                }
                for ty in &w.dropped {
                    info!(node = %w.node, condition = %ty,
                          "gave up this instance's ownership of the condition: the node is no \
                           longer its, and another live kumaco instance owns it too");
                }
                for ty in &w.claimed {
                    info!(node = %w.node, condition = %ty,
                          "co-owning the condition another kumaco instance set as this one would");
                }
                self.pending.insert(
                    w.node,
                    Pending {
                        conditions: w.conditions,
                        resource_version: written_version,
                        written_at: now,
                        dropped: w.dropped,
                    },
                );
            }
            Answer::Retry(e) => {
                self.metrics.write("patch", WriteResult::Error);
                warn!(node = %w.node, error = %e, "writing node conditions failed; will retry");
            }
            Answer::Conflict | Answer::AlreadyExists => {
                // Someone changed the node since the cache showed it (a kubelet's status
                // report, most often): derived again from the newer version.
                self.metrics.write("patch", WriteResult::Conflict);
                debug!(node = %w.node, "the node changed since this write was derived; will retry");
            }
            Answer::Refused(e) => {
                self.metrics.write("patch", WriteResult::Error);
                warn!(node = %w.node, error = %e,
                      "the API server refused the node's conditions; not retrying this write (other nodes go on)");
                self.refused.insert(w.node.clone(), w.fingerprint());
            }
        }
    }
}

#[cfg(test)]
mod tests;
