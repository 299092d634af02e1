//! One sink's queue in the leader's term: what it was told (so that each notice is queued
//! once), what waits, what is done (for the record), and its state. No I/O: the notifier
//! fills it, the sink's sender empties it.

use std::collections::{BTreeMap, VecDeque};

use jiff::Timestamp;

use crate::notice::Notice;
use crate::notify::record::SinkRecord;
use crate::transitions::HORIZON;

/// Most notices waiting for one sink: past it the oldest is dropped, and counted. A
/// notice in memory is a few hundred bytes to a few kilobytes (its texts are bounded),
/// so a sink that is down costs at most a few megabytes.
pub const MAX_QUEUE: usize = 5000;

/// How a batch the sender took ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Sent,
    Refused,
}

#[derive(Debug, Default)]
pub struct Queue {
    /// What the record said at the start of the term: done is done.
    loaded: SinkRecord,
    /// Every notice queued or skipped in this term, by id, with its instant.
    seen: BTreeMap<String, Timestamp>,
    pending: VecDeque<Notice>,
    /// Done in this term (sent, refused, dropped): instant and id.
    done: Vec<(Timestamp, String)>,
    /// The state `kumaco status` shows; its counters carry on from the record.
    pub state: SinkRecord,
    /// Whether something changed since the record was last written.
    pub dirty: bool,
}

impl Queue {
    /// A queue for a term that starts with `record` (none for a sink new to the record:
    /// it is told what happens from `now` on).
    pub fn new(record: Option<SinkRecord>, now: Timestamp) -> Queue {
        let loaded = record.unwrap_or(SinkRecord {
            frontier: Some(now),
            ..SinkRecord::default()
        });
        let state = SinkRecord {
            frontier: None,
            done: String::new(),
            queued: 0,
            ..loaded.clone()
        };
        Queue {
            loaded,
            state,
            dirty: true,
            ..Queue::default()
        }
    }

    /// Queues `notice` unless this term has seen it or the record says it is done.
    /// Returns whether it was queued, and a notice dropped to make room.
    pub fn offer(&mut self, notice: &Notice) -> (bool, Option<Notice>) {
        if self.seen.contains_key(&notice.id) {
            return (false, None);
        }
        self.seen.insert(notice.id.clone(), notice.at);
        if self.loaded.is_done(notice.at, &notice.id) {
            // Kept done in the records this term writes.
            self.done.push((notice.at, notice.id.clone()));
            return (false, None);
        }
        // Notices come oldest first; a late one goes to its place.
        let at = self
            .pending
            .iter()
            .rposition(|p| (p.at, &p.id) <= (notice.at, &notice.id))
            .map_or(0, |i| i + 1);
        self.pending.insert(at, notice.clone());
        self.dirty = true;
        let dropped = (self.pending.len() > MAX_QUEUE)
            .then(|| self.pending.pop_front())
            .flatten();
        if let Some(d) = &dropped {
            self.done.push((d.at, d.id.clone()));
            self.state.dropped += 1;
        }
        (true, dropped)
    }

    /// The oldest `n` waiting, for one request.
    pub fn batch(&self, n: usize) -> Vec<Notice> {
        self.pending.iter().take(n).cloned().collect()
    }

    /// How many wait.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// The batch of `ids` (the oldest waiting) ended: sent or refused for good. A batch
    /// some of which the queue dropped meanwhile ends for what is left of it.
    pub fn ended(&mut self, ids: &[String], how: Ended, now: Timestamp) {
        for id in ids {
            if let Some(i) = self.pending.iter().position(|p| &p.id == id) {
                let n = self.pending.remove(i).expect("found");
                self.done.push((n.at, n.id));
                match how {
                    Ended::Sent => self.state.sent += 1,
                    Ended::Refused => self.state.refused += 1,
                }
            }
        }
        if how == Ended::Sent {
            self.state.last_sent = Some(now);
            self.state.failing_since = None;
        }
        self.dirty = true;
    }

    /// An attempt failed (it is tried again): `error` for `kumaco status`.
    pub fn failed(&mut self, error: String, now: Timestamp) {
        self.state.set_error(Some(error));
        self.state.failing_since.get_or_insert(now);
        self.dirty = true;
    }

    /// A request was refused: `error` for `kumaco status`.
    pub fn refused(&mut self, error: String) {
        self.state.set_error(Some(error));
        self.dirty = true;
    }

    /// Forgets what is past the horizon: no transition that old is found again.
    pub fn forget_old(&mut self, now: Timestamp) {
        let since = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
        self.seen.retain(|_, at| *at >= since);
        self.done.retain(|(at, _)| *at >= since);
    }

    /// The sink's record as of `now`.
    pub fn record(&self, now: Timestamp) -> SinkRecord {
        let (frontier, ids) =
            SinkRecord::frontier_at(&self.done, self.pending.front().map(|n| n.at), now);
        // Never behind the record's: what it calls done stays done.
        let frontier = self.loaded.frontier.map_or(frontier, |f| frontier.max(f));
        SinkRecord {
            frontier: Some(frontier),
            done: ids,
            queued: self.pending.len(),
            ..self.state.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::Kind;
    use jiff::SignedDuration;
    use kumaco_core::testing::ts;

    fn notice(id: &str, at: &str) -> Notice {
        Notice::new(id.into(), Kind::Started, "c".into(), ts(at))
    }

    #[test]
    fn a_notice_is_queued_once_and_never_if_the_record_has_it() {
        let now = ts("2026-12-07T12:00:00Z");
        let record = SinkRecord {
            frontier: Some(ts("2026-12-07T11:58:00Z")),
            done: "sent-before".into(),
            ..SinkRecord::default()
        };
        let mut q = Queue::new(Some(record), now);
        assert!(!q.offer(&notice("old", "2026-12-07T11:50:00Z")).0);
        assert!(!q.offer(&notice("sent-before", "2026-12-07T11:59:00Z")).0);
        assert!(q.offer(&notice("new", "2026-12-07T11:59:00Z")).0);
        assert!(!q.offer(&notice("new", "2026-12-07T11:59:00Z")).0);
        // A late one goes before the one queued.
        assert!(q.offer(&notice("late", "2026-12-07T11:58:30Z")).0);
        let ids: Vec<String> = q.batch(10).into_iter().map(|n| n.id).collect();
        assert_eq!(ids, ["late", "new"]);
        // Later, the record's frontier stays at the oldest waiting.
        let later = ts("2026-12-07T12:10:00Z");
        let r = q.record(later);
        assert_eq!(r.frontier, Some(ts("2026-12-07T11:58:30Z")));
        assert_eq!(r.queued, 2);
        q.ended(&["late".into()], Ended::Sent, now);
        // Now the lag before now, and never behind the frontier the term started from.
        let r = q.record(now);
        assert_eq!(r.frontier, Some(ts("2026-12-07T11:58:00Z")));
        assert!(r.is_done(ts("2026-12-07T11:58:30Z"), "late"));
        assert!(r.is_done(ts("2026-12-07T11:59:00Z"), "sent-before"));
        assert!(!r.is_done(ts("2026-12-07T11:59:00Z"), "new"));
        assert_eq!((r.sent, r.queued), (1, 1));
    }

    #[test]
    fn a_new_sink_is_told_from_now_on() {
        let now = ts("2026-12-07T12:00:00Z");
        let mut q = Queue::new(None, now);
        assert!(!q.offer(&notice("a", "2026-12-07T11:59:59Z")).0);
        assert!(q.offer(&notice("b", "2026-12-07T12:00:00Z")).0);
    }

    #[test]
    fn a_full_queue_drops_its_oldest_and_counts_it_done() {
        let now = ts("2026-12-07T12:00:00Z");
        let mut q = Queue::new(Some(SinkRecord::default()), now);
        for i in 0..MAX_QUEUE + 2 {
            let n = notice(&format!("{i:05}"), "2026-12-07T12:00:00Z");
            let n = Notice {
                at: n.at + SignedDuration::from_millis(i as i64),
                ..n
            };
            let (queued, dropped) = q.offer(&n);
            assert!(queued);
            assert_eq!(dropped.is_some(), i >= MAX_QUEUE);
        }
        assert_eq!(q.waiting(), MAX_QUEUE);
        assert_eq!(q.state.dropped, 2);
        assert_eq!(q.batch(1)[0].id, "00002");
    }
}
