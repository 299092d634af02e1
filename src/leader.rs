//! Leader election on a `coordination.k8s.io/v1` Lease: only the leader writes.
//!
//! The algorithm is client-go's: the holder renews `renewTime` every retry period; a
//! candidate takes the Lease over when it has seen no change to it for a whole lease
//! duration, measured on its *own* clock from when it observed the last change (so the
//! clocks of different machines are never compared, only their rates are assumed equal).
//! Updates carry the resourceVersion read, so two candidates cannot both win.
//!
//! Handover: on SIGTERM the leader stops writing, then releases the Lease (an empty
//! holder, as client-go's `ReleaseOnCancel`); standbys watch the Lease and take a
//! released one over at once instead of after a whole lease duration.
//!
//! Safety: the leader counts itself leader only until `renew_deadline` after the *start*
//! of its last successful renew. Every other candidate waits at least `lease_duration`
//! after it *saw* that renew, which is later. With `renew_deadline < lease_duration`, the
//! old leader stops writing before anyone else may start, unless the clocks' rates differ
//! by more than the margin (`lease_duration - renew_deadline`) over a lease term.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::config::Election;
use crate::metrics::Metrics;

/// Whether this process may write now, and since when. Cheap to clone and to ask.
#[derive(Clone, Debug)]
pub struct Leadership {
    term: Arc<Mutex<Option<Term>>>,
    changed: Arc<Notify>,
    /// True once the campaign's first round has ended, won, lost or failed.
    first_round: Arc<tokio::sync::watch::Sender<bool>>,
}

/// One uninterrupted stretch of leading.
#[derive(Clone, Copy, Debug)]
struct Term {
    /// When the round that won the Lease returned. Every write of an earlier leader was
    /// sent before this instant: it had stopped writing before its Lease could be taken
    /// over, or released the Lease after its last write.
    began: Instant,
    /// The renew deadline: the term ends here unless a renew moves it.
    valid_until: Instant,
}

impl Leadership {
    /// Always leader (`--leader-elect=false`), from now on.
    pub fn always() -> Self {
        let now = Instant::now();
        Leadership {
            term: Arc::new(Mutex::new(Some(Term {
                began: now,
                valid_until: now + Duration::from_secs(u32::MAX as u64),
            }))),
            changed: Arc::new(Notify::new()),
            first_round: Arc::new(tokio::sync::watch::Sender::new(true)),
        }
    }

    /// A candidate that has not won yet (the campaign runs its rounds).
    fn candidate() -> Self {
        Leadership {
            term: Arc::new(Mutex::new(None)),
            changed: Arc::new(Notify::new()),
            first_round: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Resolves after leadership was gained or lost (a stored wake-up: one waiter).
    pub async fn changed(&self) {
        self.changed.notified().await
    }

    pub fn is_leader(&self) -> bool {
        self.term().is_some()
    }

    /// Resolves once the campaign's first round has ended. The controller lists after
    /// it, so that a replica leading from its first round writes from its first lists
    /// instead of listing twice.
    pub async fn first_round(&self) {
        let _ = self.first_round.subscribe().wait_for(|done| *done).await;
    }

    /// While leading, when the current term began: what a cache shows from a list asked
    /// for after it includes every write of the leaders before (the controller writes
    /// nothing before it has such lists). Two calls that return the same instant are in
    /// the same term.
    pub fn term(&self) -> Option<Instant> {
        let term = *self.term.lock().unwrap_or_else(|e| e.into_inner());
        term.filter(|t| Instant::now() < t.valid_until)
            .map(|t| t.began)
    }

    /// A round won: renews the current term, or begins one (now) if none is running.
    fn won(&self, valid_until: Instant) {
        let mut term = self.term.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let began = term
            .filter(|t| now < t.valid_until)
            .map_or(now, |t| t.began);
        *term = Some(Term { began, valid_until });
    }

    fn end(&self) {
        *self.term.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The campaign running in the background; [`Campaign::release`] ends it.
pub struct Campaign {
    task: JoinHandle<()>,
    watch: JoinHandle<()>,
    api: Api<Lease>,
    election: Election,
    leadership: Leadership,
    metrics: Arc<Metrics>,
}

/// Longest a release may take at shutdown: the pod's grace period is much longer, but a
/// down API server must not hold the exit up.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

impl Campaign {
    /// Stops campaigning and, if this process holds the Lease, releases it so that a
    /// standby takes over at once. Call only once nothing writes any more (the
    /// controller loop has returned): a standby may lead as soon as the release lands.
    pub async fn release(self) {
        self.task.abort();
        self.watch.abort();
        let held = self.leadership.is_leader();
        self.leadership.end();
        self.metrics.leader.set(0);
        if !held {
            return;
        }
        match tokio::time::timeout(RELEASE_TIMEOUT, release(&self.api, &self.election)).await {
            Ok(Ok(true)) => info!(lease = %self.election.name, "released the lease"),
            Ok(Ok(false)) => {
                info!(lease = %self.election.name, "lease held by another: nothing to release")
            }
            Ok(Err(e)) => {
                warn!(lease = %self.election.name, error = %e, "releasing the lease failed; a standby takes over when it expires")
            }
            Err(_) => {
                warn!(lease = %self.election.name, "releasing the lease timed out; a standby takes over when it expires")
            }
        }
    }
}

/// Empties the holder of the Lease if it is `e.identity`, with the resourceVersion read.
async fn release(api: &Api<Lease>, e: &Election) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(&e.name).await? else {
        return Ok(false);
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    if spec.holder_identity.as_deref() != Some(e.identity.as_str()) {
        return Ok(false);
    }
    let now = MicroTime(Timestamp::now());
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(now.clone());
    spec.acquire_time = Some(now);
    match api.replace(&e.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(err) => Err(err),
    }
}

/// Wakes the campaign when the Lease shows no holder (released): a standby then takes
/// it over at once. Renewals are not reported (the leader would wake itself for each).
/// Without the right to watch the Lease, the campaign's retry period still applies.
async fn watch_released(api: Api<Lease>, e: Election, released: Arc<Notify>) {
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={}", e.name))
        .timeout(e.watch_timeout_secs);
    let mut stream = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
    while let Some(event) = stream.next().await {
        match event {
            Ok(lease) => {
                let holder = lease.spec.and_then(|s| s.holder_identity);
                if holder.is_none_or(|h| h.is_empty()) {
                    released.notify_one();
                }
            }
            Err(e) => debug!(error = %e, "watching the lease failed; retrying"),
        }
    }
}

/// Starts campaigning in the background: the shared leadership flag, and the campaign to
/// release at shutdown.
pub fn spawn(
    client: kube::Client,
    election: Election,
    metrics: Arc<Metrics>,
) -> (Leadership, Campaign) {
    let leadership = Leadership::candidate();
    let api: Api<Lease> = Api::namespaced(client, &election.namespace);
    let released = Arc::new(Notify::new());
    let watch = tokio::spawn(watch_released(
        api.clone(),
        election.clone(),
        released.clone(),
    ));
    let flag = leadership.clone();
    let (task_api, task_election, task_metrics) = (api.clone(), election.clone(), metrics.clone());
    let task = tokio::spawn(async move {
        let (api, election, metrics) = (task_api, task_election, task_metrics);
        let mut observed: Option<(Option<String>, Option<MicroTime>, Instant)> = None;
        let mut leading = false;
        loop {
            let attempt = Instant::now();
            let won = match tokio::time::timeout(
                election.retry_period.max(Duration::from_secs(1)),
                try_acquire_or_renew(&api, &election, &mut observed),
            )
            .await
            {
                Ok(Ok(won)) => Some(won),
                Ok(Err(e)) => {
                    warn!(error = %e, lease = %election.name, "leader election: lease request failed");
                    None
                }
                Err(_) => {
                    warn!(lease = %election.name, "leader election: lease request timed out");
                    None
                }
            };
            match won {
                Some(true) => flag.won(attempt + election.renew_deadline),
                Some(false) => flag.end(),
                // Unknown: keep the deadline from the last successful renew; it runs out
                // by itself.
                None => {}
            }
            flag.first_round.send_replace(true);
            let now_leading = flag.is_leader();
            if now_leading != leading {
                if now_leading {
                    info!(identity = %election.identity, lease = %election.name, "became leader");
                } else {
                    info!(identity = %election.identity, lease = %election.name, "lost leadership");
                }
                leading = now_leading;
                metrics.leader.set(i64::from(leading));
                flag.changed.notify_one();
            }
            tokio::select! {
                _ = tokio::time::sleep(election.retry_period) => {}
                _ = released.notified(), if !leading => {}
            }
        }
    });
    let campaign = Campaign {
        task,
        watch,
        api,
        election,
        leadership: leadership.clone(),
        metrics,
    };
    (leadership, campaign)
}

/// One round: create, renew or take over the Lease. Ok(true) when we hold it now.
async fn try_acquire_or_renew(
    api: &Api<Lease>,
    e: &Election,
    observed: &mut Option<(Option<String>, Option<MicroTime>, Instant)>,
) -> Result<bool, kube::Error> {
    let now = MicroTime(Timestamp::now());
    let seconds = i32::try_from(e.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
    let Some(mut lease) = api.get_opt(&e.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(e.name.clone()),
                namespace: Some(e.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(e.identity.clone()),
                lease_duration_seconds: Some(seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false), // someone else created it
            Err(err) => Err(err),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let record = (holder.clone(), spec.renew_time.clone());
    let changed = observed
        .as_ref()
        .is_none_or(|(h, r, _)| (h, r) != (&record.0, &record.1));
    if changed {
        *observed = Some((record.0, record.1, Instant::now()));
    }
    let seen_at = observed.as_ref().map(|o| o.2).unwrap_or_else(Instant::now);
    let ours = holder.as_deref() == Some(e.identity.as_str());
    let expired = holder.is_none() || seen_at.elapsed() >= e.lease_duration;
    if !ours && !expired {
        return Ok(false);
    }
    if !ours {
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        spec.holder_identity = Some(e.identity.clone());
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(seconds);
    // replace() sends the resourceVersion we read: a concurrent winner makes this a 409.
    match api.replace(&e.name, &PostParams::default(), &lease).await {
        Ok(updated) => {
            if let Some(s) = updated.spec {
                *observed = Some((s.holder_identity, s.renew_time, Instant::now()));
            }
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_begins_when_won_lasts_while_renewed_and_ends() {
        let l = Leadership::candidate();
        assert_eq!(l.term(), None);
        let now = Instant::now();
        l.won(now + Duration::from_secs(10));
        let began = l.term().expect("leading");
        // A renewal keeps the term: writes derived in it stay valid.
        l.won(now + Duration::from_secs(20));
        assert_eq!(l.term(), Some(began));
        l.end();
        assert_eq!(l.term(), None);
        // Winning again is a new term: the fence asks for new lists.
        l.won(Instant::now() + Duration::from_secs(10));
        assert!(l.term().is_some_and(|t| t >= began));
    }

    #[test]
    fn a_term_runs_out_at_its_renew_deadline() {
        let l = Leadership::candidate();
        l.won(Instant::now() - Duration::from_millis(1));
        assert_eq!(l.term(), None, "past its deadline, even without an end");
        assert!(!l.is_leader());
        let always = Leadership::always();
        assert!(always.is_leader());
    }
}
