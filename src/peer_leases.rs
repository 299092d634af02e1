//! Reading the Leases of the other kumaco instances the nodes show (`peers`): whether an
//! instance whose field manager owns conditions here is running.
//!
//! The pass names the Leases it needs (`Outcome::leases`) and those it needs a fresh
//! copy of now (`Outcome::refresh`: giving a node up waits for one). A background task
//! reads each wanted Lease at once when it is first wanted or asked for again, and every
//! [`REFRESH`] otherwise; it wakes the loop when what it read changed or a fresh copy
//! was asked for. A pass judges the copies against the clock itself, so a Lease that
//! stops being renewed turns stale at a computed instant, not at the next read. Only
//! `get` on each Lease is used.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::Notify;
use tracing::{info, warn};

use crate::peers::{LeaseRead, LeaseRef, Peers};

/// How often a wanted Lease is read again; [`crate::peers::LIVENESS_GRACE`] covers it.
pub const REFRESH: Duration = Duration::from_secs(10);
/// Each read gets this long.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Least time between two rounds of reads, whatever asks for them.
const MIN_ROUND: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    wanted: BTreeSet<LeaseRef>,
    /// Asked to be read again at once.
    refresh: BTreeSet<LeaseRef>,
    read: BTreeMap<LeaseRef, (LeaseRead, Timestamp)>,
}

/// The copies of the wanted Leases, kept fresh by a background task.
#[derive(Clone)]
pub struct PeerLeases {
    state: Arc<Mutex<State>>,
    /// Wakes the reader for a Lease to read now.
    read_now: Arc<Notify>,
}

impl PeerLeases {
    /// Starts the reader; it wakes `wake` (the controller loop) when a read changes.
    pub fn start(client: Client, wake: Arc<Notify>) -> Self {
        let leases = PeerLeases {
            state: Arc::default(),
            read_now: Arc::default(),
        };
        tokio::spawn(leases.clone().read_loop(client, wake));
        leases
    }

    /// The Leases the last pass needed, and those it needs read again now; those never
    /// read are read at once too.
    pub fn want(&self, wanted: &BTreeSet<LeaseRef>, refresh: &BTreeSet<LeaseRef>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let unread = wanted.iter().any(|l| !state.read.contains_key(l));
        let asked = refresh.iter().any(|l| !state.refresh.contains(l));
        state.read.retain(|l, _| wanted.contains(l));
        state.wanted.clone_from(wanted);
        state.refresh.extend(refresh.iter().cloned());
        drop(state);
        if unread || asked {
            self.read_now.notify_one();
        }
    }

    /// What the pass judges liveness from.
    pub fn snapshot(&self) -> Peers {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Peers {
            leases: state.read.clone(),
        }
    }

    async fn read_loop(self, client: Client, wake: Arc<Notify>) {
        loop {
            let (wanted, asked) = {
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let asked = !std::mem::take(&mut state.refresh).is_empty();
                (state.wanted.iter().cloned().collect::<Vec<_>>(), asked)
            };
            let mut changed = asked;
            for lease in wanted {
                let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
                let read = match tokio::time::timeout(READ_TIMEOUT, api.get_opt(&lease.name)).await
                {
                    Ok(Ok(Some(l))) => lease_read(&l),
                    Ok(Ok(None)) => LeaseRead::Missing,
                    Ok(Err(kube::Error::Api(e))) if e.code == 403 => LeaseRead::Forbidden,
                    Ok(Err(e)) => {
                        warn!(lease = %lease, error = %e,
                              "reading another kumaco instance's Lease failed; keeping the last copy");
                        continue;
                    }
                    Err(_) => {
                        warn!(lease = %lease,
                              "reading another kumaco instance's Lease timed out; keeping the last copy");
                        continue;
                    }
                };
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if !state.wanted.contains(&lease) {
                    continue;
                }
                let before = state
                    .read
                    .insert(lease.clone(), (read.clone(), Timestamp::now()))
                    .map(|(r, _)| r);
                // A renewal changes no verdict (the pass computes when the copy goes
                // stale, and reads the newest copy): no pass for it.
                if before.as_ref().map(verdict) == Some(verdict(&read)) {
                    continue;
                }
                changed = true;
                if read == LeaseRead::Forbidden {
                    warn!(lease = %lease,
                          "may not read another kumaco instance's Lease (403): it is taken for \
                           live, so its conditions are never overruled (grant `get` on leases, \
                           docs/install.md)");
                } else if before.is_none() {
                    info!(lease = %lease, state = ?read, "read another kumaco instance's Lease");
                }
            }
            if changed {
                wake.notify_one();
            }
            tokio::time::sleep(MIN_ROUND).await;
            tokio::select! {
                _ = tokio::time::sleep(REFRESH - MIN_ROUND) => {}
                _ = self.read_now.notified() => {}
            }
        }
    }
}

/// What of a read can change a verdict without the clock: whether the Lease exists, may
/// be read and has a holder.
fn verdict(read: &LeaseRead) -> (u8, bool) {
    match read {
        LeaseRead::Missing => (0, false),
        LeaseRead::Forbidden => (1, false),
        LeaseRead::Found { held, .. } => (2, *held),
    }
}

/// A Lease as `peers` judges it: whether it has a holder, its last renewal (or, never
/// renewed, acquisition) and its duration.
pub fn lease_read(lease: &Lease) -> LeaseRead {
    let spec = lease.spec.as_ref();
    let renewed = spec
        .and_then(|s| s.renew_time.as_ref().or(s.acquire_time.as_ref()))
        .map(|t| t.0);
    let duration = spec
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(0)
        .max(0);
    LeaseRead::Found {
        held: spec
            .and_then(|s| s.holder_identity.as_deref())
            .is_some_and(|h| !h.is_empty()),
        renewed,
        duration: SignedDuration::from_secs(duration.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_read_as_its_holder_last_renewal_and_duration() {
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "a", "namespace": "ops" },
            "spec": { "holderIdentity": "pod", "leaseDurationSeconds": 15,
                      "acquireTime": "2026-01-01T00:00:00.000000Z",
                      "renewTime": "2026-01-01T00:00:10.000000Z" }
        }))
        .unwrap();
        assert_eq!(
            lease_read(&lease),
            LeaseRead::Found {
                held: true,
                renewed: Some("2026-01-01T00:00:10Z".parse().unwrap()),
                duration: SignedDuration::from_secs(15)
            }
        );
        let empty: Lease =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": "a" } })).unwrap();
        assert_eq!(
            lease_read(&empty),
            LeaseRead::Found {
                held: false,
                renewed: None,
                duration: SignedDuration::ZERO
            }
        );
    }
}
