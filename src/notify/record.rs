//! What a sink has been told, kept in the cluster so that whichever replica leads next
//! (or this one after a restart) sends what is missing and nothing else: a Lease beside
//! the instance's own, `<lease name>-notified`, one annotation per sink and one for the
//! forecasts told at windows' openings.
//!
//! A sink's annotation holds its frontier and the ids done since: every notice of an
//! instant before the frontier was delivered (or given up on: dropped, refused), and so
//! were the ones listed. The frontier is the oldest notice still queued, else
//! [`LAG`] before the record was written: a transition the cluster shows late (a watch
//! that lagged) is still told, once. Beside it, the sink's state for `kumaco status`.
//!
//! Written by server-side apply, by the instance's field manager: an annotation of a
//! sink no longer configured goes with the next write. A record is written at most every
//! [`RECORD_INTERVAL`], and at shutdown: a leader killed between a send and its record
//! leaves the next one to send that notice again, under the same id.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde::{Deserialize, Serialize};

use crate::notice::Forecast;
use crate::peers::LeaseRef;
use crate::transitions::Told;

/// The prefix of the record's annotations: `notify.kumaco.dev/<sink>`.
pub const ANNOTATION_PREFIX: &str = "notify.kumaco.dev/";
/// The annotation holding the forecasts told at openings.
pub const TOLD_ANNOTATION: &str = "notify.kumaco.dev/told-forecasts";
/// The label of every record, as a selector: `kumaco status` finds them by it.
pub const LABEL: &str = "app.kubernetes.io/component=kumaco-notified";
/// How late a transition may show and still be told after a change of leader.
pub const LAG: SignedDuration = SignedDuration::from_mins(2);
/// Least time between two writes of the record.
pub const RECORD_INTERVAL: Duration = Duration::from_secs(2);
/// Most ids one sink's annotation lists: past it the frontier moves up to the oldest
/// kept. With [`crate::notify::sink::MAX_SINKS`] sinks, the record stays far below the
/// API server's bound on annotations.
pub const MAX_DONE: usize = 1500;
/// Most forecasts kept, newest openings first.
pub const MAX_TOLD: usize = 64;
/// Longest error kept for `kumaco status`, in bytes.
const MAX_ERROR_BYTES: usize = 300;

/// The record of an instance whose own Lease is `lease`.
pub fn record_lease(lease: &LeaseRef) -> LeaseRef {
    LeaseRef {
        namespace: lease.namespace.clone(),
        name: format!("{}-notified", lease.name),
    }
}

/// The instance whose record `lease` is: its own Lease, the record's name without its
/// suffix.
pub fn instance_of(lease: &Lease) -> Option<LeaseRef> {
    let name = lease.metadata.name.as_deref()?.strip_suffix("-notified")?;
    Some(LeaseRef {
        namespace: lease.metadata.namespace.clone()?,
        name: name.to_string(),
    })
}

/// One sink's annotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SinkRecord {
    /// Everything before it is done.
    pub frontier: Option<Timestamp>,
    /// The ids done at or after the frontier, comma-separated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub done: String,
    /// Notices waiting when it was written.
    #[serde(default)]
    pub queued: usize,
    /// Notices sent, dropped (queue full) and refused, by every leader.
    #[serde(default)]
    pub sent: u64,
    #[serde(default)]
    pub dropped: u64,
    #[serde(default)]
    pub refused: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sent: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Failing since then, without a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<Timestamp>,
}

impl SinkRecord {
    /// Whether notice `id` of instant `at` is done.
    pub fn is_done(&self, at: Timestamp, id: &str) -> bool {
        self.frontier.is_some_and(|f| at < f) || self.done.split(',').any(|d| d == id)
    }

    /// The record of a sink whose notices `done` (instant, id) are done and whose oldest
    /// queued one is of `oldest_queued`, at `now`.
    pub fn frontier_at(
        done: &[(Timestamp, String)],
        oldest_queued: Option<Timestamp>,
        now: Timestamp,
    ) -> (Timestamp, String) {
        let mut frontier = now.checked_sub(LAG).unwrap_or(now);
        if let Some(q) = oldest_queued {
            frontier = frontier.min(q);
        }
        let mut kept: Vec<&(Timestamp, String)> =
            done.iter().filter(|(at, _)| *at >= frontier).collect();
        kept.sort();
        if kept.len() > MAX_DONE {
            let cut = kept.len() - MAX_DONE;
            frontier = kept[cut].0;
            kept.drain(..cut);
            kept.retain(|(at, _)| *at >= frontier);
        }
        let ids: Vec<&str> = kept.iter().map(|(_, id)| id.as_str()).collect();
        (frontier, ids.join(","))
    }

    pub fn set_error(&mut self, error: Option<String>) {
        self.last_error = error.map(|e| crate::conditions::bounded(e, MAX_ERROR_BYTES));
    }
}

/// A forecast told at an opening.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToldForecast {
    window: String,
    start: Timestamp,
    expected_end: Timestamp,
    p90_end: Timestamp,
    #[serde(default)]
    not_fitting: Vec<String>,
}

/// The whole record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub sinks: BTreeMap<String, SinkRecord>,
    pub told: Told,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("reading the notifications' record, Lease {lease}: {source}")]
    Read {
        lease: LeaseRef,
        #[source]
        source: kube::Error,
    },
    #[error("writing the notifications' record, Lease {lease}: {source}")]
    Write {
        lease: LeaseRef,
        #[source]
        source: kube::Error,
    },
}

impl Record {
    /// The record a Lease holds; an annotation that does not decode is as if absent.
    pub fn of(lease: &Lease) -> Record {
        let mut record = Record::default();
        let Some(annotations) = &lease.metadata.annotations else {
            return record;
        };
        for (key, value) in annotations {
            if key == TOLD_ANNOTATION {
                let told: Vec<ToldForecast> = serde_json::from_str(value).unwrap_or_default();
                for t in told {
                    record.told.insert(
                        (t.window, t.start),
                        Forecast {
                            expected_end: t.expected_end,
                            p90_end: t.p90_end,
                            not_fitting: t.not_fitting,
                        },
                    );
                }
            } else if let Some(sink) = key.strip_prefix(ANNOTATION_PREFIX)
                && let Ok(r) = serde_json::from_str::<SinkRecord>(value)
            {
                record.sinks.insert(sink.to_string(), r);
            }
        }
        record
    }

    /// The annotations that hold it.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut out: BTreeMap<String, String> = self
            .sinks
            .iter()
            .map(|(name, r)| {
                (
                    format!("{ANNOTATION_PREFIX}{name}"),
                    serde_json::to_string(r).unwrap_or_default(),
                )
            })
            .collect();
        if !self.told.is_empty() {
            let mut told: Vec<ToldForecast> = self
                .told
                .iter()
                .map(|((window, start), f)| ToldForecast {
                    window: window.clone(),
                    start: *start,
                    expected_end: f.expected_end,
                    p90_end: f.p90_end,
                    not_fitting: f
                        .not_fitting
                        .iter()
                        .take(crate::notice::MAX_NAMES)
                        .cloned()
                        .collect(),
                })
                .collect();
            told.sort_by_key(|t| std::cmp::Reverse(t.start));
            told.truncate(MAX_TOLD);
            out.insert(
                TOLD_ANNOTATION.to_string(),
                serde_json::to_string(&told).unwrap_or_default(),
            );
        }
        out
    }

    /// The record as the cluster has it; none if there is none.
    pub async fn read(client: &Client, lease: &LeaseRef) -> Result<Record, RecordError> {
        let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
        match api.get_opt(&lease.name).await {
            Ok(found) => Ok(found.as_ref().map(Record::of).unwrap_or_default()),
            Err(source) => Err(RecordError::Read {
                lease: lease.clone(),
                source,
            }),
        }
    }

    /// Writes it whole, by server-side apply: what `manager` wrote before and is not in
    /// it any more goes.
    pub async fn write(
        &self,
        client: &Client,
        lease: &LeaseRef,
        manager: &str,
    ) -> Result<(), RecordError> {
        let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
        let (key, value) = LABEL.split_once('=').unwrap_or((LABEL, ""));
        let body = Lease {
            metadata: ObjectMeta {
                name: Some(lease.name.clone()),
                namespace: Some(lease.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (key.to_string(), value.to_string()),
                    ("app.kubernetes.io/managed-by".into(), "kumaco".into()),
                ])),
                annotations: Some(self.annotations()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        let mut typed = serde_json::to_value(&body).unwrap_or_default();
        typed["apiVersion"] = "coordination.k8s.io/v1".into();
        typed["kind"] = "Lease".into();
        api.patch(
            &lease.name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(typed),
        )
        .await
        .map(|_| ())
        .map_err(|source| RecordError::Write {
            lease: lease.clone(),
            source,
        })
    }

    /// Deletes the record if `manager` wrote it (an instance with no sink keeps none);
    /// none is fine. A record another instance wrote (one whose Lease has the same name:
    /// a misconfiguration) is left alone.
    pub async fn delete_own(
        client: &Client,
        lease: &LeaseRef,
        manager: &str,
    ) -> Result<bool, RecordError> {
        let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
        let read = |source| RecordError::Read {
            lease: lease.clone(),
            source,
        };
        let Some(found) = api.get_opt(&lease.name).await.map_err(read)? else {
            return Ok(false);
        };
        let ours = found
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|f| f.manager.as_deref() == Some(manager));
        if !ours {
            return Ok(false);
        }
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: found.metadata.uid.clone(),
                resource_version: found.metadata.resource_version.clone(),
            }),
            ..DeleteParams::default()
        };
        match api.delete(&lease.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
            Err(source) => Err(RecordError::Write {
                lease: lease.clone(),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kumaco_core::testing::ts;

    #[test]
    fn the_frontier_is_the_oldest_queued_or_the_lag_before_now() {
        let now = ts("2026-12-07T12:00:00Z");
        let done = vec![
            (ts("2026-12-07T11:00:00Z"), "old".to_string()),
            (ts("2026-12-07T11:59:00Z"), "b".to_string()),
            (ts("2026-12-07T11:58:30Z"), "a".to_string()),
        ];
        let (f, ids) = SinkRecord::frontier_at(&done, None, now);
        assert_eq!(f, now - LAG);
        assert_eq!(ids, "a,b");
        let (f, ids) = SinkRecord::frontier_at(&done, Some(ts("2026-12-07T10:00:00Z")), now);
        assert_eq!(f, ts("2026-12-07T10:00:00Z"));
        assert_eq!(ids, "old,a,b");
        let r = SinkRecord {
            frontier: Some(f),
            done: ids,
            ..SinkRecord::default()
        };
        assert!(r.is_done(ts("2026-12-07T09:00:00Z"), "x"));
        assert!(r.is_done(ts("2026-12-07T11:59:00Z"), "b"));
        assert!(!r.is_done(ts("2026-12-07T11:59:00Z"), "c"));
    }

    #[test]
    fn too_many_ids_move_the_frontier_up_to_the_oldest_kept() {
        let now = ts("2026-12-07T12:00:00Z");
        let done: Vec<(Timestamp, String)> = (0..MAX_DONE as i64 + 10)
            .map(|i| (now - SignedDuration::from_millis(i), format!("{i:04}")))
            .collect();
        let (f, ids) = SinkRecord::frontier_at(&done, None, now);
        assert_eq!(ids.split(',').count(), MAX_DONE);
        assert_eq!(f, now - SignedDuration::from_millis(MAX_DONE as i64 - 1));
    }

    #[test]
    fn a_record_names_its_instance() {
        let instance = LeaseRef {
            namespace: "kumaco".into(),
            name: "pool-a".into(),
        };
        let record = record_lease(&instance);
        assert_eq!(record.name, "pool-a-notified");
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(record.name.clone()),
                namespace: Some(record.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert_eq!(instance_of(&lease), Some(instance));
        let pause = Lease {
            metadata: ObjectMeta {
                name: Some("pool-a-pause".into()),
                ..lease.metadata.clone()
            },
            spec: None,
        };
        assert_eq!(instance_of(&pause), None);
    }

    #[test]
    fn a_record_reads_back_what_it_wrote_and_ignores_what_does_not_decode() {
        let mut record = Record::default();
        record.sinks.insert(
            "slack".into(),
            SinkRecord {
                frontier: Some(ts("2026-12-07T11:58:00Z")),
                done: "a,b".into(),
                queued: 2,
                sent: 10,
                last_error: Some("https://hooks.slack.com/…: 500".into()),
                ..SinkRecord::default()
            },
        );
        record.told.insert(
            ("uid-w".into(), ts("2026-12-07T02:00:00Z")),
            Forecast {
                expected_end: ts("2026-12-07T02:40:00Z"),
                p90_end: ts("2026-12-07T02:50:00Z"),
                not_fitting: vec!["n7".into()],
            },
        );
        let mut annotations = record.annotations();
        annotations.insert(format!("{ANNOTATION_PREFIX}broken"), "{".into());
        annotations.insert("other.example/x".into(), "y".into());
        let lease = Lease {
            metadata: ObjectMeta {
                annotations: Some(annotations),
                ..ObjectMeta::default()
            },
            spec: None,
        };
        assert_eq!(Record::of(&lease), record);
    }
}
