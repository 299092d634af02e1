//! Leadership: only the leader writes. Checked from the Lease's history and the etcd
//! revisions that order Lease and Node versions in one sequence (the resourceVersions
//! of one etcd): a holder is replaced only after a whole lease duration without renewal
//! or after a release, and every write of kumaco's lands in the term of a holder that is
//! alive — not while the Lease is released, and not after its holder was killed. The
//! replicas share one field manager (kumaco's default), so managedFields cannot tell
//! which replica wrote; two live replicas writing in one term would show as the other
//! violations (the ceiling, flaps, writes above transitions).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher;

use super::{Ctx, State, revision, signed};

#[derive(Clone, Debug)]
pub(super) struct LeaseVersion {
    pub(super) revision: u64,
    pub(super) holder: Option<String>,
    /// When the checker's watch delivered it. For a version from a (re-)list, that is not
    /// when it was written: the renew may be older by the watch's whole gap.
    pub(super) observed: Timestamp,
    pub(super) listed: bool,
}

/// A node version kumaco wrote, waiting for the Lease watch to pass its revision.
#[derive(Clone, Debug)]
pub(super) struct Write {
    pub(super) revision: u64,
    pub(super) node: String,
    pub(super) observed: Timestamp,
}

impl Ctx {
    pub(super) fn lease_event(&self, event: Result<watcher::Event<Lease>, watcher::Error>) {
        let now = Timestamp::now();
        let mut s = self.state.lock().unwrap();
        let listed = matches!(event, Ok(watcher::Event::InitApply(_)));
        let lease = match event {
            Ok(watcher::Event::Init) => {
                s.lease_listing = true;
                return;
            }
            Ok(watcher::Event::InitDone) => {
                s.lease_listing = false;
                return;
            }
            Ok(watcher::Event::InitApply(l)) => {
                if !s.lease.is_empty() {
                    s.counts.lease_relists += 1;
                }
                // Versions between the last one seen and this one are unknown.
                s.lease_gap_until = revision(&l.metadata);
                l
            }
            Ok(watcher::Event::Apply(l)) => l,
            Ok(watcher::Event::Delete(_)) | Err(_) => return,
        };
        let version = LeaseVersion {
            revision: revision(&lease.metadata),
            holder: lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty()),
            observed: now,
            listed,
        };
        if let Some(last) = s.lease.last().cloned()
            && last.holder != version.holder
        {
            s.counts.lease_changes += 1;
            // The old holder's last renew as the watch delivered it. A version from a
            // (re-)list was written before the list, maybe long before: the last renew
            // seen live is then the latest the term can be known to have lasted (a
            // re-list 36 ms before a takeover once looked like a breach, seed 57771848).
            let last_seen_live = s
                .lease
                .iter()
                .rev()
                .take_while(|v| v.holder == last.holder)
                .find(|v| !v.listed)
                .map(|v| v.observed);
            if let (Some(old), Some(new), Some(renewed)) =
                (&last.holder, &version.holder, last_seen_live)
                && version.revision > s.lease_gap_until
            {
                let waited = now.duration_since(renewed);
                let needed = signed(self.cfg.lease_duration.saturating_sub(self.cfg.slack));
                if waited < needed {
                    self.violate(
                        &mut s,
                        format!(
                            "Lease taken over by {new} {waited:?} after {old}'s last renew (lease duration {:?}): two holders in one term",
                            self.cfg.lease_duration
                        ),
                    );
                }
            }
        }
        s.lease.push(version);
    }

    /// Every write of kumaco's lands in the term of a live holder (see the module docs).
    pub(super) fn check_writes(&self, s: &mut State, now: Timestamp) {
        let lease_revision = s.lease.last().map_or(0, |l| l.revision);
        let wait = signed(self.cfg.slack + Duration::from_secs(1));
        while let Some(w) = s.pending.front().cloned() {
            // The Lease watch has passed the write's revision, or it has had time to.
            if w.revision > lease_revision && now.duration_since(w.observed) < wait {
                break;
            }
            s.pending.pop_front();
            if w.revision <= s.lease_gap_until {
                continue;
            }
            let i = s.lease.partition_point(|l| l.revision < w.revision);
            let Some(term) = i.checked_sub(1).map(|i| s.lease[i].clone()) else {
                continue;
            };
            s.counts.writes_checked += 1;
            let what = format!("node {} (resourceVersion {})", w.node, w.revision);
            match &term.holder {
                None => self.violate(
                    s,
                    format!(
                        "kumaco wrote {what} while the Lease was released (revision {}): no replica led",
                        term.revision
                    ),
                ),
                Some(holder) => {
                    if let Some(died) = s.dead.get(holder).copied()
                        && w.observed.duration_since(died) > signed(self.cfg.slack)
                    {
                        self.violate(
                            s,
                            format!(
                                "kumaco wrote {what} in the term of {holder}, killed at {died}: a replica wrote without holding the Lease"
                            ),
                        );
                    }
                }
            }
        }
    }
}
