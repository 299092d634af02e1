//! The notifications (`--notify-url`, `--notify-config`): a task beside the passes that
//! finds the transitions the cluster shows ([`crate::transitions`]) and queues each for
//! the sinks that want it, once, and a sender per sink that empties its queue at the
//! sink's pace, retrying with backoff. Nothing here delays a pass: a pass only hands over
//! what it read of the windows and wakes the task.
//!
//! Only the leader sends, and only after a pass that could write (its caches are from
//! its own term: `fence`). What each sink was told is recorded on the Lease
//! `<lease name>-notified` ([`record`]): a new leader, or this one after a restart, reads
//! it at the start of its term and sends what is missing. A leader killed between a send
//! and its record leaves the next one to send that notice again, under the same id; a
//! graceful handover ([`Notifier::stop`]) writes the record before the Lease is
//! released. A shadow (`--dry-run`) logs each notice once, sends nothing and records
//! nothing.

mod queue;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::Client;
use kube::runtime::reflector::Store;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::writer::Doubling;
use crate::announce::{Announcement, WindowSource};
use crate::config::NotifySettings;
use crate::fingerprint::Fnv;
use crate::forecast::Forecast;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::node::SlimNode;
use crate::notice::Notice;
use crate::notify::deliver::{Attempt, Sender};
use crate::notify::record::{self, RECORD_INTERVAL, Record};
use crate::notify::sink::Sink;
use crate::peers::LeaseRef;
use crate::selector::Selector;
use crate::transitions::{self, Inputs, NodeState};
use queue::{Ended, Queue};

/// Least time between two rounds, however often passes wake the task.
const MIN_GAP: Duration = Duration::from_secs(1);
/// The longest a round waits without a wake-up: the record is kept current, and a
/// clock that jumped is noticed.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// A sink that fails waits longer each time, up to a cap.
const BACKOFF: Doubling = Doubling::new(Duration::from_secs(1), Duration::from_secs(300));
/// How long a graceful stop waits for requests under way.
const STOP_WAIT: Duration = crate::notify::deliver::TIMEOUT;

/// The latest forecast, shared by the forecaster.
pub type ForecastSlot = Arc<Mutex<Option<Arc<Forecast>>>>;

/// What a pass hands over: the windows it read and the events it says should exist.
#[derive(Clone, Debug, Default)]
struct View {
    windows: Vec<WindowSource>,
    announcements: Vec<Announcement>,
    /// A hash of each window's uid and data: a pass that changed none hands nothing over.
    key: u64,
}

struct Shared {
    /// A pass ran: the notices may have changed.
    wake: Notify,
    /// A sender finished a request: the record may be due.
    sent: Notify,
    may_write: AtomicBool,
    stopping: AtomicBool,
    view: Mutex<View>,
    /// One per sink, in the order of the settings.
    queues: Vec<Mutex<Queue>>,
    /// Wakes the senders.
    queued: Vec<Notify>,
}

/// The passes' side of the task.
pub struct Notifier {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
    senders: Vec<JoinHandle<()>>,
}

/// What the task needs of the controller.
pub struct Context {
    pub settings: NotifySettings,
    pub client: Client,
    pub nodes: Store<SlimNode>,
    pub scope: Selector,
    pub manager: String,
    pub lease: LeaseRef,
    pub leadership: Leadership,
    pub dry_run: bool,
    pub forecast: ForecastSlot,
    pub metrics: Arc<Metrics>,
}

impl Notifier {
    /// Starts the task and a sender per sink.
    pub fn spawn(cx: Context) -> Result<Notifier, crate::http_client::HttpError> {
        let n = cx.settings.sinks.len();
        let now = Timestamp::now();
        let shared = Arc::new(Shared {
            wake: Notify::new(),
            sent: Notify::new(),
            may_write: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            view: Mutex::new(View::default()),
            queues: (0..n).map(|_| Mutex::new(Queue::new(None, now))).collect(),
            queued: (0..n).map(|_| Notify::new()).collect(),
        });
        let sender = Sender::new()?;
        let sinks: Vec<Arc<Sink>> = cx.settings.sinks.clone();
        for sink in &sinks {
            info!(sink = %sink.name, kind = sink.format.kind(), to = %sink.format.shown(),
                  transitions = ?sink.kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
                  "notifications");
            cx.metrics.notify.register_sink(&sink.name);
        }
        let senders = sinks
            .iter()
            .enumerate()
            .map(|(i, sink)| {
                tokio::spawn(send_loop(
                    i,
                    sink.clone(),
                    sender.clone(),
                    shared.clone(),
                    cx.leadership.clone(),
                    cx.dry_run,
                    cx.metrics.clone(),
                ))
            })
            .collect();
        let task = Task {
            cx,
            sinks,
            shared: shared.clone(),
            term: None,
            written: None,
            told: transitions::Told::new(),
        };
        let task = tokio::spawn(task.run());
        Ok(Notifier {
            shared,
            task,
            senders,
        })
    }

    /// After each pass: whether it could write, the windows it read and the events it
    /// says should exist.
    pub fn after_pass(
        &self,
        may_write: bool,
        windows: &std::collections::BTreeMap<crate::window::WindowId, WindowSource>,
        announcements: &[Announcement],
    ) {
        self.shared.may_write.store(may_write, Ordering::Relaxed);
        // Without a sink nothing reads the view; with one, a pass that changed no window
        // and no event copies nothing.
        if !self.shared.queues.is_empty() {
            let mut key = Fnv::default();
            for w in windows.values() {
                key.write_str(&w.uid);
                key.write_u64(w.data_hash);
            }
            let key = key.finish();
            let mut view = self.shared.view.lock().unwrap_or_else(|e| e.into_inner());
            if view.key != key || view.announcements != announcements {
                *view = View {
                    windows: windows.values().cloned().collect(),
                    announcements: announcements.to_vec(),
                    key,
                };
            }
        }
        self.shared.wake.notify_one();
    }

    /// A graceful stop: no request starts any more, those under way get [`STOP_WAIT`],
    /// and the record is written once more, before the Lease is released.
    pub async fn stop(self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        for q in &self.shared.queued {
            q.notify_one();
        }
        let senders = futures::future::join_all(self.senders);
        let _ = tokio::time::timeout(STOP_WAIT, senders).await;
        self.shared.wake.notify_one();
        let _ = tokio::time::timeout(STOP_WAIT, self.task).await;
    }
}

struct Task {
    cx: Context,
    sinks: Vec<Arc<Sink>>,
    shared: Arc<Shared>,
    /// When this replica's current term began, once its record was read.
    term: Option<Instant>,
    /// When the record was last written.
    written: Option<Instant>,
    /// The forecasts told at openings (the record's, and this term's).
    told: transitions::Told,
}

impl Task {
    async fn run(mut self) {
        let mut next: Option<Timestamp> = None;
        loop {
            let wait = next
                .map(|t| Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or_default())
                .unwrap_or(MAX_WAIT)
                .min(MAX_WAIT);
            let woken = tokio::select! {
                _ = self.shared.wake.notified() => true,
                _ = self.shared.sent.notified() => false,
                _ = tokio::time::sleep(wait) => false,
            };
            if self.shared.stopping.load(Ordering::Relaxed) {
                if self.term.is_some() {
                    self.write_record(true).await;
                }
                return;
            }
            // Nothing the notices derive from changed (no pass, no instant they wait
            // for): only the record may be due.
            let unchanged = !woken && next.is_none_or(|t| t > Timestamp::now());
            if unchanged && self.term.is_some() {
                let write_at = self.write_record(false).await;
                next = [next, write_at].into_iter().flatten().min();
                continue;
            }
            next = self.round().await;
            tokio::time::sleep(MIN_GAP).await;
        }
    }

    /// One round: when the next one is due by the clock.
    async fn round(&mut self) -> Option<Timestamp> {
        let dry_run = self.cx.dry_run;
        let acting =
            self.shared.may_write.load(Ordering::Relaxed) && self.cx.leadership.term().is_some();
        if !dry_run && !acting {
            self.end_term();
            return None;
        }
        let now = Timestamp::now();
        if !dry_run && self.term != self.cx.leadership.term() && !self.start_term(now).await {
            return Some(now);
        }
        if self.sinks.is_empty() {
            return None;
        }
        let due = self.due(now);
        for notice in &due.notices {
            self.offer(notice);
        }
        for q in &self.shared.queues {
            q.lock().unwrap_or_else(|e| e.into_inner()).forget_old(now);
        }
        if dry_run {
            return due.next;
        }
        let write_at = self.write_record(false).await;
        [due.next, write_at].into_iter().flatten().min()
    }

    /// The start of a term: the record read, each sink's queue started from it. A
    /// record that cannot be read is tried again at the next round.
    async fn start_term(&mut self, now: Timestamp) -> bool {
        let lease = record::record_lease(&self.cx.lease);
        if self.sinks.is_empty() {
            // Nothing to tell: no record outlives the sinks it was for.
            match Record::delete_own(&self.cx.client, &lease, &self.cx.manager).await {
                Ok(true) => info!(lease = %lease, "notifications: no sink, the record deleted"),
                Ok(false) => debug!(lease = %lease, "notifications: no sink, no record of ours"),
                Err(e) => debug!(error = %e, "deleting the notifications' record"),
            }
            self.term = self.cx.leadership.term();
            return true;
        }
        let record = match Record::read(&self.cx.client, &lease).await {
            Ok(r) => r,
            Err(e) => {
                // Nothing is sent without the record: a failure of every sink, which the
                // alert on the sinks sees.
                warn!(error = %e, "notifications wait for their record");
                for sink in &self.sinks {
                    self.cx.metrics.notify.failure(&sink.name);
                }
                return false;
            }
        };
        for (i, sink) in self.sinks.iter().enumerate() {
            let mut q = self.shared.queues[i]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            *q = Queue::new(record.sinks.get(&sink.name).cloned(), now);
        }
        self.told = record.told;
        self.term = self.cx.leadership.term();
        self.written = None;
        info!(
            sinks = self.sinks.len(),
            "notifications: leading, record read"
        );
        true
    }

    /// The end of a term (or none begun): nothing is sent, nothing kept.
    fn end_term(&mut self) {
        if self.term.take().is_none() {
            return;
        }
        let now = Timestamp::now();
        for q in &self.shared.queues {
            *q.lock().unwrap_or_else(|e| e.into_inner()) = Queue::new(None, now);
        }
        for sink in &self.sinks {
            self.cx.metrics.notify.queued(&sink.name, 0);
        }
        info!("notifications: not leading, none sent");
    }

    fn due(&self, now: Timestamp) -> transitions::Due {
        let view = self
            .shared
            .view
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let cached = self.cx.nodes.state();
        let manager = &self.cx.manager;
        let nodes: Vec<NodeState> = cached
            .iter()
            .filter(|n| self.cx.scope.matches(&n.labels))
            .map(|n| NodeState {
                name: n.metadata.name.as_deref().unwrap_or_default(),
                uid: n.metadata.uid.as_deref().unwrap_or_default(),
                labels: &n.labels,
                conditions: &n.conditions,
                owned: n.owned_by(manager),
                availability: n.availability,
            })
            .collect();
        let windows: Vec<&WindowSource> = view.windows.iter().collect();
        let forecast = self
            .cx
            .forecast
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        transitions::due(
            &self.cx.settings.rules,
            &Inputs {
                nodes: &nodes,
                windows: &windows,
                announcements: &view.announcements,
                forecast: forecast.as_deref(),
                told: &self.told,
                now,
            },
        )
    }

    /// Queues `notice` for every sink that wants it and has not had it.
    fn offer(&mut self, notice: &Notice) {
        if notice.kind == crate::notice::Kind::WindowOpened
            && let (Some(f), Some(w)) = (&notice.forecast, &notice.window)
        {
            let uid = self
                .shared
                .view
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .windows
                .iter()
                .find(|s| s.id.namespace == w.namespace && s.id.name == w.name)
                .map(|s| s.uid.clone());
            if let Some(uid) = uid {
                self.told.insert((uid, notice.at), f.clone());
            }
        }
        for (i, sink) in self.sinks.iter().enumerate() {
            if !sink.wants(notice.kind) {
                continue;
            }
            let mut q = self.shared.queues[i]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let (queued, dropped) = q.offer(notice);
            if !queued {
                continue;
            }
            if self.cx.dry_run {
                info!(sink = %sink.name, kind = notice.kind.name(), id = %notice.id,
                      title = %notice.title(), "would notify");
                q.ended(std::slice::from_ref(&notice.id), Ended::Sent, notice.at);
                continue;
            }
            let m = &self.cx.metrics.notify;
            if let Some(d) = dropped {
                m.count(&sink.name, d.kind.name(), "dropped");
                warn!(sink = %sink.name, dropped = %d.id, "notifications: queue full, the oldest dropped");
            }
            m.queued(&sink.name, q.waiting());
            self.shared.queued[i].notify_one();
        }
    }

    /// Writes the record if something changed and [`RECORD_INTERVAL`] has passed (or
    /// `now` is set: a stop). Returns when to try again if it waits.
    async fn write_record(&mut self, now: bool) -> Option<Timestamp> {
        if self.sinks.is_empty() {
            return None;
        }
        let dirty = self
            .shared
            .queues
            .iter()
            .any(|q| q.lock().unwrap_or_else(|e| e.into_inner()).dirty);
        if !dirty && self.written.is_some() {
            return None;
        }
        if !now
            && let Some(at) = self.written
            && at.elapsed() < RECORD_INTERVAL
        {
            let left = RECORD_INTERVAL - at.elapsed();
            return Timestamp::now().checked_add(left).ok();
        }
        let stamp = Timestamp::now();
        let mut record = Record {
            told: self.told.clone(),
            ..Record::default()
        };
        for (i, sink) in self.sinks.iter().enumerate() {
            let mut q = self.shared.queues[i]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            record.sinks.insert(sink.name.clone(), q.record(stamp));
            q.dirty = false;
        }
        let lease = record::record_lease(&self.cx.lease);
        match record
            .write(&self.cx.client, &lease, &self.cx.manager)
            .await
        {
            Ok(()) => {
                self.written = Some(Instant::now());
                None
            }
            Err(e) => {
                warn!(error = %e, "notifications: the record was not written; tried again");
                for sink in &self.sinks {
                    self.cx.metrics.notify.failure(&sink.name);
                }
                for q in &self.shared.queues {
                    q.lock().unwrap_or_else(|e| e.into_inner()).dirty = true;
                }
                Timestamp::now().checked_add(RECORD_INTERVAL).ok()
            }
        }
    }
}

/// One sink's sender: the oldest waiting, one request at a time, no sooner than the
/// sink's pace allows, while this replica leads.
async fn send_loop(
    i: usize,
    sink: Arc<Sink>,
    sender: Sender,
    shared: Arc<Shared>,
    leadership: Leadership,
    dry_run: bool,
    metrics: Arc<Metrics>,
) {
    if dry_run {
        return;
    }
    let m = &metrics.notify;
    let mut failures: u32 = 0;
    loop {
        if shared.stopping.load(Ordering::Relaxed) {
            return;
        }
        let batch = shared.queues[i]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .batch(sink.batch());
        if batch.is_empty() || !leadership.is_leader() {
            tokio::select! {
                _ = shared.queued[i].notified() => {}
                _ = tokio::time::sleep(MAX_WAIT) => {}
            }
            continue;
        }
        let post = sink.post(&batch);
        let ids: Vec<String> = batch
            .iter()
            .take(post.notices)
            .map(|n| n.id.clone())
            .collect();
        if let Some(e) = &post.template_error {
            warn!(sink = %sink.name, error = %e, "notifications: the template failed; kumaco's words were sent");
        }
        let attempt = sender.send(post.request).await;
        let now = Timestamp::now();
        let wait = {
            let mut q = shared.queues[i].lock().unwrap_or_else(|e| e.into_inner());
            match &attempt {
                Attempt::Sent => {
                    failures = 0;
                    q.ended(&ids, Ended::Sent, now);
                    for n in batch.iter().take(post.notices) {
                        m.count(&sink.name, n.kind.name(), "sent");
                    }
                    m.sent_at(&sink.name, now);
                    sink.every
                }
                Attempt::Refused(e) => {
                    failures = 0;
                    warn!(sink = %sink.name, error = %e, notices = ids.len(),
                          "notifications refused; dropped (another try would be refused too)");
                    q.refused(e.clone());
                    q.ended(&ids, Ended::Refused, now);
                    for n in batch.iter().take(post.notices) {
                        m.count(&sink.name, n.kind.name(), "refused");
                    }
                    sink.every
                }
                Attempt::Failed(e) => {
                    failures += 1;
                    m.failure(&sink.name);
                    q.failed(e.clone(), now);
                    let delay = BACKOFF.delay(failures).max(sink.every);
                    warn!(sink = %sink.name, error = %e, retry_in = ?delay,
                          "notifications: sending failed");
                    delay
                }
            }
        };
        m.queued(
            &sink.name,
            shared.queues[i]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .waiting(),
        );
        shared.sent.notify_one();
        // Paced, and stopped at once when the replica stops.
        let stop = async {
            while !shared.stopping.load(Ordering::Relaxed) {
                shared.queued[i].notified().await;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop => return,
        }
    }
}
