//! The controller: the I/O around [`crate::pass`]. It watches window ConfigMaps and
//! Nodes, calls the pass on what the watches show and the clock, applies the node writes
//! it returns, creates the events it says should exist, and records its own writes until
//! the cache shows them.
//!
//! One loop, no per-object workers: every wake-up (a watch event, the timer at the next
//! window edge, a leadership change, the periodic resync) runs one pass. Nothing decided
//! here depends on what this process saw before; what it keeps between passes is a cache
//! of the cluster (parsed windows by data hash, events known to exist, writes not yet
//! echoed by the watch, windows the watch saw deleted) and retry timers.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, error, info, warn};

use crate::announce::{Announcement, Deleted, WindowSource};
use crate::clock::ClockSteps;
use crate::conditions::{
    Condition, MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE, find,
};
use crate::config::Settings;
use crate::configmap;
use crate::decision::HORIZON;
use crate::events::Poster;
use crate::fingerprint::Fnv;
use crate::leader::Leadership;
use crate::metrics::{Metrics, WriteResult};
use crate::node::{SlimNode, condition_json};
use crate::node_events::{self, NodeEvent, NodeRef};
use crate::pass::{self, Contest, Deferred, NodeView, Pending, Rules, Write};
use crate::peer_leases::PeerLeases;
use crate::selector::Selector;
use crate::window::{Window, WindowId};

/// Every API write gets this long before it counts as failed and is retried.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait before retrying failed writes: bounds how late a missed edge lands after
/// the API server comes back (a retry pass against a down server costs one request).
const MAX_RETRY_DELAY: Duration = Duration::from_secs(4);
/// Longest sleep between passes: a safety net (steps of the wall clock are noticed at
/// once by [`ClockSteps`]).
const MAX_SLEEP: Duration = Duration::from_secs(30);
/// Writes in flight at once.
const WRITE_CONCURRENCY: usize = 32;
/// Objects per page of a list: each page's answer is held whole while it is decoded.
/// At 5,000 nodes, pages of 500 (kube's and client-go's default) raised the peak RSS from
/// 28 to 42 MiB; pages of 100 keep it at 28 MiB for 50 requests (start-up 1.25 s).
const LIST_PAGE: u32 = 100;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{0}")]
    Client(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("serving metrics/health: {0}")]
    Http(#[from] std::io::Error),
    #[error("watch stream ended unexpectedly")]
    WatchEnded,
}

/// Makes a client on connections of its own. The controller starts with one, and a new
/// leader whose caches predate its term lists again on a new one: connections the
/// network swallowed, which kept those caches behind, must not hold up the lists meant
/// to catch up.
pub type Connect = Box<dyn Fn() -> Result<Client, crate::kubeclient::ClientError> + Send>;

/// Why `run` returned without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM or SIGINT.
    Signal,
    /// The window configuration changed and `--exit-on-config-change` is set.
    ConfigChanged,
}

/// A window ConfigMap the watch saw deleted: its last state and when.
type Tombstones = Arc<Mutex<Vec<(ConfigMap, Timestamp)>>>;

/// Runs the controller until a signal (or a config change, if so configured).
pub async fn run(
    connect: Connect,
    settings: Settings,
    metrics: Arc<Metrics>,
    leadership: Leadership,
) -> Result<Exit, ControllerError> {
    let client = connect().map_err(|e| ControllerError::Client(e.to_string()))?;
    let wake = Arc::new(Notify::new());
    leadership.first_round().await;

    let (nodes, node_writer) = reflector::store::<SlimNode>();
    let manager = settings.field_manager.clone();
    // The condition types any decision reads; the cache keeps no others.
    let mut read: Vec<String> = vec![
        UNDER_MAINTENANCE.into(),
        MAINTENANCE_IN_PROGRESS.into(),
        MAINTENANCE_PLANNED.into(),
    ];
    if let Some(policy) = &settings.in_progress {
        read.extend(policy.required.iter().chain(&policy.blocking).cloned());
    }
    // Every list is a consistent read (kube's default `ListSemantic::MostRecent`, in pages
    // of `LIST_PAGE`), so that a list asked for after a moment shows every write made before it:
    // the fence a new leader writes behind (`Shell::writing_term`). Streaming lists would send
    // less at once, but kube asks for them at resourceVersion 0, which the API server
    // answers from its watch cache however far behind etcd that is.
    //
    // `--watch-timeout` is the server-side limit of each watch request, after which kube's
    // watcher resumes from the last resourceVersion (no re-list). kube also gives up on a
    // watch silent for that plus 5 s: the only way out of a connection the network
    // silently swallowed (HTTP/1.1 has no pings), so it bounds how long kumaco can be
    // blind after such a loss, as client-go's HTTP/2 health checks bound it at 30 + 15 s.
    // kube's default, 290 s, left kumaco blind to window and node changes for almost five
    // minutes (tests/faultproxy.rs).
    let watch_config = watcher::Config::default()
        .page_size(LIST_PAGE)
        .timeout(settings.watch_timeout_secs);
    let node_config = watch_config.clone();
    let node_stream = move |client: Client| {
        let (manager, read) = (manager.clone(), read.clone());
        watcher(Api::<SlimNode>::all(client), node_config.clone())
            .backoff(WatchBackoff::default())
            .modify(move |node| node.keep_only(&manager, &read))
    };
    let label_keys: LabelKeys = Arc::default();
    let mut lists = vec![ListState::default()];
    let relevant = node_relevance(
        settings.node_selector.clone(),
        settings.field_manager.clone(),
        label_keys.clone(),
    );
    tokio::spawn(drive(
        Watch {
            what: "nodes",
            lists: lists[0].clone(),
            wake: wake.clone(),
            metrics: Some(metrics.clone()),
        },
        node_stream,
        client.clone(),
        node_writer,
        relevant,
    ));

    let tombstones: Tombstones = Arc::default();
    let mut window_stores = Vec::new();
    for ns in &settings.namespaces {
        let (store, writer) = reflector::store::<ConfigMap>();
        let config = watch_config.clone().labels(&settings.window_selector);
        let namespace = ns.clone();
        let stream = move |client: Client| {
            watcher(
                Api::<ConfigMap>::namespaced(client, &namespace),
                config.clone(),
            )
            .backoff(WatchBackoff::default())
            .modify(configmap::trim)
        };
        let deleted = tombstones.clone();
        let on_event = move |event: &watcher::Event<ConfigMap>, _: &Store<ConfigMap>| {
            if let watcher::Event::Delete(cm) = event {
                deleted
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((cm.clone(), Timestamp::now()));
            }
            true
        };
        let state = ListState::default();
        lists.push(state.clone());
        tokio::spawn(drive(
            Watch {
                what: "configmaps",
                lists: state,
                wake: wake.clone(),
                metrics: None,
            },
            stream,
            client.clone(),
            writer,
            on_event,
        ));
        window_stores.push(store);
    }

    info!(namespaces = ?settings.namespaces, node_selector = %settings.node_selector,
          field_manager = %settings.field_manager,
          "waiting for the initial lists of nodes and window ConfigMaps");
    nodes
        .wait_until_ready()
        .await
        .map_err(|_| ControllerError::WatchEnded)?;
    for s in &window_stores {
        s.wait_until_ready()
            .await
            .map_err(|_| ControllerError::WatchEnded)?;
    }

    let rules = Rules {
        node_selector: settings.node_selector.clone(),
        instance: settings.field_manager.clone(),
        in_progress: settings.in_progress.clone(),
        planned_lead_time: settings.planned_lead_time,
        resync: jiff::SignedDuration::try_from(settings.resync_interval)
            .unwrap_or(jiff::SignedDuration::MAX),
    };
    let peers = PeerLeases::start(client.clone(), wake.clone());
    if let Some(why) = settings.invisible_to_peers {
        warn!(field_manager = %settings.field_manager, why,
              "other kumaco instances sharing nodes with this one cannot tell that it runs: they \
               take its conditions for stale (never defer to them, report no contest with it); \
               docs/operations.md, \"When instances meet\"");
    }
    let events = Poster::new(client.clone(), metrics.clone());
    let node_events = settings
        .node_events
        .then(|| Poster::new(client.clone(), metrics.clone()));
    if settings.dry_run {
        info!(
            "dry run (shadow mode): decisions are logged and exported as kumaco_dry_run_*; nothing is written"
        );
    }
    let mut shell = Shell {
        nodes_api: Api::all(client),
        connect,
        leadership,
        settings,
        rules,
        metrics,
        nodes,
        label_keys,
        window_stores,
        lists,
        waiting_for_lists: None,
        tombstones,
        sources: BTreeMap::new(),
        deleted: Vec::new(),
        config_hash: None,
        pending: HashMap::new(),
        refused: HashMap::new(),
        peers,
        contests: HashMap::new(),
        deferred: HashSet::new(),
        events,
        node_events,
        shadow_logged: HashSet::new(),
        retry_at: None,
        failures: 0,
    };

    let (mut clock, no_timerfd) = ClockSteps::new();
    if let Some(e) = no_timerfd {
        warn!(error = %e, "no timerfd on the realtime clock: steps of the wall clock are \
                           noticed within a second, by sampling");
    }
    let mut shutdown = std::pin::pin!(shutdown_signal());
    let mut first = true;
    loop {
        let started = Instant::now();
        let next_edge = match shell.reconcile().await {
            Step::ConfigChangedExit => return Ok(Exit::ConfigChanged),
            Step::Next(t) => t,
        };
        shell
            .metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64());
        if first {
            shell.metrics.set_ready();
            info!("ready");
            first = false;
        }
        let mut sleep = shell.settings.resync_interval.min(MAX_SLEEP);
        for t in [next_edge, shell.retry_at].into_iter().flatten() {
            sleep = sleep.min(until(t));
        }
        debug!(?sleep, ?next_edge, "sleeping");
        tokio::select! {
            _ = wake.notified() => {
                // Watch events come in bursts (kumaco's own writes echo back); one pass
                // for the burst is enough.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ = tokio::time::sleep(sleep) => {}
            _ = shell.leadership.changed() => {}
            step = clock.stepped() => {
                // Every edge moved relative to the monotonic timer the sleep runs on.
                info!(step_seconds = step.as_secs_f64(),
                      "the wall clock was stepped: re-deriving the conditions now");
                shell.metrics.clock_steps.inc();
            }
            _ = &mut shutdown => {
                info!("signal received, stopping");
                return Ok(Exit::Signal);
            }
        }
    }
}

/// The label keys any selector names (`--node-selector` and every valid window's): a node
/// label change under another key changes no decision.
type LabelKeys = Arc<std::sync::RwLock<HashSet<String>>>;

/// The watches' backoff after an error: 0.5 s doubling to [`MAX_RETRY_DELAY`], reset by
/// the next event. kube's default (0.8 s doubling to 30 s, client-go's) kept a watch
/// waiting more than 16 s after an API server that had been down for 6.5 s was back (the
/// chaos run: a reconnection 6 s after, answered 410, and no re-list 10 s later),
/// while the leader wrote from the window cache it left behind. The cap is the node
/// writes': a watch retry against a down API server costs one request.
struct WatchBackoff(Duration);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff(Duration::from_millis(500))
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.0;
        self.0 = (delay * 2).min(MAX_RETRY_DELAY);
        Some(delay)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        *self = WatchBackoff::default();
    }
}

/// One watch's record of its last complete list, and the way to ask it for another.
///
/// A replica that becomes leader may hold a cache that stopped following the cluster
/// (watches on connections the network swallowed, a standby's cache behind), and an
/// apply derived from it undoes what the previous leader wrote: a `lastTransitionTime`
/// set back, a slot counted free that is taken. So a new leader writes only once each
/// of its caches comes from a list asked for after its term began (`Shell::writing_term`); a
/// list is a consistent read, so it shows every write the earlier leaders made.
#[derive(Clone, Default)]
struct ListState(Arc<Mutex<Lists>>, Arc<Notify>);

#[derive(Default)]
struct Lists {
    /// When the list the cache now shows was asked for.
    listed: Option<Instant>,
    /// The term for which a new list was asked (asked once per term: a list restarted at
    /// every pass might never finish).
    asked_for: Option<Instant>,
    /// The client to list and watch with from now on, until the driver takes it.
    relist_with: Option<Client>,
}

impl ListState {
    /// Whether the cache comes from a list asked for at or after `term`.
    fn listed_since(&self, term: Instant) -> bool {
        let lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lists.listed.is_some_and(|t| t >= term)
    }

    /// Asks for a new list, on `client`'s connections, unless one was asked for `term`.
    fn relist(&self, term: Instant, client: &Client) {
        let mut lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lists.asked_for.is_none_or(|t| t < term) {
            lists.asked_for = Some(term);
            lists.relist_with = Some(client.clone());
            self.1.notify_one();
        }
    }

    fn completed(&self, asked_at: Instant) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).listed = Some(asked_at);
    }

    /// Resolves with the client of the next list asked for.
    async fn relist_requested(&self) -> Client {
        loop {
            self.1.notified().await;
            let taken = self
                .0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .relist_with
                .take();
            if let Some(client) = taken {
                return client;
            }
        }
    }
}

/// What [`drive`] needs besides the stream and the cache.
struct Watch {
    what: &'static str,
    lists: ListState,
    wake: Arc<Notify>,
    /// Where node events are counted (`kumaco_node_events_total`).
    metrics: Option<Arc<Metrics>>,
}

/// Drives one watch: applies each event to the cache, and wakes the loop when
/// `relevant` says the event (judged against the cache before it) changes what a pass
/// reads. A list wakes it once, when complete. On request ([`ListState`]) it drops the
/// watch and lists again, with a stream `make` builds on the client given.
async fn drive<K, S>(
    watch: Watch,
    make: impl Fn(Client) -> S,
    client: Client,
    mut cache: reflector::store::Writer<K>,
    mut relevant: impl FnMut(&watcher::Event<K>, &Store<K>) -> bool,
) where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let Watch {
        what,
        lists,
        wake,
        metrics,
    } = watch;
    let reader = cache.as_reader();
    let mut stream = Box::pin(make(client.clone()));
    let mut client = client;
    // When the list in progress was asked for (at the latest), while one is.
    let mut listing: Option<Instant> = None;
    loop {
        // The poll that yields a list's `Init` is the one that asks for it (or a backoff
        // before): the list was asked for after this instant.
        let polled = Instant::now();
        let next = tokio::select! {
            next = stream.try_next() => next,
            new = lists.relist_requested() => {
                info!(what, "listing again: this replica leads now, and writes only from lists asked for since");
                client = new;
                stream = Box::pin(make(client.clone()));
                listing = None;
                continue;
            }
        };
        match next {
            Ok(Some(event)) => {
                match &event {
                    // A list that starts again before it finished was cut off (a
                    // connection lost mid-list, an expired continue token); if every try
                    // is, kumaco never becomes ready.
                    watcher::Event::Init if listing.is_some() => {
                        warn!(what, "the list started again before it finished")
                    }
                    _ => {}
                }
                let is_relevant = match &event {
                    watcher::Event::Init => {
                        listing = Some(polled);
                        false
                    }
                    watcher::Event::InitApply(_) => false,
                    watcher::Event::InitDone => true,
                    _ => relevant(&event, &reader),
                };
                cache.apply_watcher_event(&event);
                if let watcher::Event::InitDone = event
                    && let Some(asked_at) = listing.take()
                {
                    lists.completed(asked_at);
                }
                if let Some(m) = &metrics {
                    m.node_event(is_relevant);
                }
                if is_relevant {
                    wake.notify_one();
                }
            }
            Ok(None) => {
                error!(what, "watch stream ended");
                return;
            }
            Err(watcher::Error::WatchError(status)) if status.code == 410 => {
                // The resumed watch is too old for the API server (after its restart, or
                // a long gap): list again now, not after a backoff step, as the retry
                // that got this answer already waited one.
                warn!(what, error = %status.message, "watch expired; listing again");
                stream = Box::pin(make(client.clone()));
            }
            Err(e) => warn!(what, error = %e, "watch error; retrying with backoff"),
        }
    }
}

/// Whether a node event changes what a pass reads (see [`SlimNode::differs_for_pass`]),
/// so that the cost of a foreign change is a comparison, not a pass over every node. A
/// node outside the scope that carries nothing of this instance is irrelevant whatever
/// changes on it (another instance's writes, for one).
fn node_relevance(
    scope: Selector,
    manager: String,
    label_keys: LabelKeys,
) -> impl FnMut(&watcher::Event<SlimNode>, &Store<SlimNode>) -> bool {
    move |event, cached| match event {
        watcher::Event::Apply(node) => {
            let keys = label_keys.read().unwrap_or_else(|e| e.into_inner());
            let old = cached.get(&reflector::ObjectRef::from_obj(node));
            let ours = |n: &SlimNode| !n.owned_by(&manager).is_empty() || scope.matches(&n.labels);
            match old {
                None => ours(node),
                Some(old) if !ours(&old) && !ours(node) => false,
                Some(old) => old.differs_for_pass(node, &keys),
            }
        }
        _ => true,
    }
}

enum Step {
    Next(Option<Timestamp>),
    ConfigChangedExit,
}

struct Shell {
    nodes_api: Api<SlimNode>,
    connect: Connect,
    leadership: Leadership,
    settings: Settings,
    rules: Rules,
    metrics: Arc<Metrics>,
    nodes: Store<SlimNode>,
    label_keys: LabelKeys,
    window_stores: Vec<Store<ConfigMap>>,
    /// The lists behind the node cache and each window cache.
    lists: Vec<ListState>,
    /// The term in which a leader was last found waiting for its lists (logged once).
    waiting_for_lists: Option<Instant>,
    tombstones: Tombstones,
    /// Window ConfigMaps as last parsed, by id (re-parsed when their data changes).
    sources: BTreeMap<WindowId, WindowSource>,
    deleted: Vec<Deleted>,
    config_hash: Option<u64>,
    pending: HashMap<String, Pending>,
    /// Writes the API server refused with an answer that will not change (400, 413,
    /// 422), by node: the same write is not sent again; a different one is.
    refused: HashMap<String, u64>,
    /// The other instances' Leases (`peers`).
    peers: PeerLeases,
    /// The contests and deferred writes already logged (each is logged once while it
    /// lasts: a log's memory, not a decision's).
    contests: HashMap<(String, String), Instant>,
    deferred: HashSet<(String, Timestamp)>,
    events: Poster,
    /// `Some` with `--node-events`.
    node_events: Option<Poster>,
    /// With `--dry-run`: the names of the events already logged as "would post" and still
    /// due (each is logged once while it is due).
    shadow_logged: HashSet<String>,
    retry_at: Option<Timestamp>,
    failures: u32,
}

impl Shell {
    async fn reconcile(&mut self) -> Step {
        if self.load_windows() && self.settings.exit_on_config_change {
            return Step::ConfigChangedExit;
        }
        let now = Timestamp::now();
        self.collect_tombstones(now);
        let cached = self.nodes.state();
        let views = cached.iter().map(|n| view(n, &self.settings.field_manager));
        let sources: Vec<&WindowSource> = self.sources.values().collect();
        let peers = self.peers.snapshot();
        let outcome = pass::run(
            &self.rules,
            &sources,
            &self.deleted,
            views,
            &self.pending,
            &peers,
            now,
        );
        self.peers.want(&outcome.leases, &outcome.refresh);
        self.report_contests(&outcome.contested, &outcome.deferred);
        for name in &outcome.settled {
            self.pending.remove(name);
        }
        let names: std::collections::HashSet<&str> = cached
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.pending.retain(|name, _| names.contains(name.as_str()));
        self.refused.retain(|name, _| names.contains(name.as_str()));

        let c = &outcome.counts;
        self.metrics.nodes_in_scope.set(c.in_scope as i64);
        self.metrics
            .nodes_under_maintenance
            .set(c.under_maintenance as i64);
        self.metrics.nodes_in_progress.set(c.in_progress as i64);
        self.metrics.nodes_planned.set(c.planned as i64);
        self.metrics.active_windows.set(c.active_windows as i64);
        self.metrics.pass.set(&outcome.counts, &outcome.windows);

        let wants_node_events = self.node_events.is_some();
        if self.settings.dry_run {
            self.shadow(outcome.writes, &cached, now);
            // After the would-be writes: no watch echo will wake another pass to see them.
            let node_events = if wants_node_events {
                self.node_events_due(&cached, &outcome.contested, now)
            } else {
                Vec::new()
            };
            self.shadow_events(&outcome.events, &node_events);
        } else if let Some(term) = self.writing_term() {
            // From the cluster as the cache shows it: this pass's writes get their events
            // in the pass their watch echo wakes.
            let node_events =
                wants_node_events.then(|| self.node_events_due(&cached, &outcome.contested, now));
            self.apply(outcome.writes, term, now).await;
            self.events.post(&outcome.events, &self.sources, now).await;
            if let (Some(poster), Some(due)) = (&mut self.node_events, &node_events) {
                poster.post_node_events(due, now).await;
            }
        }
        let node_retry = self.node_events.as_ref().and_then(Poster::retry_at);
        let retry = [self.retry_at, self.events.retry_at(), node_retry]
            .into_iter()
            .flatten()
            .min();
        Step::Next(outcome.next_edge.into_iter().chain(retry).min())
    }

    /// The current term, if this replica leads and its caches come from lists asked for
    /// since the term began ([`ListState`]); otherwise it writes and posts nothing, and
    /// a new leader asks for those lists (their completion wakes the loop).
    fn writing_term(&mut self) -> Option<Instant> {
        let term = self.leadership.term()?;
        let stale = self.lists.iter().filter(|l| !l.listed_since(term)).count();
        if stale == 0 {
            if self.waiting_for_lists == Some(term) {
                info!("lists complete: writing");
                self.waiting_for_lists = None;
            }
            return Some(term);
        }
        if self.waiting_for_lists != Some(term) {
            info!(
                stale,
                "leading, but the caches predate this term: listing nodes and windows again, \
                 on new connections, before writing"
            );
            self.waiting_for_lists = Some(term);
            match (self.connect)() {
                Ok(client) => {
                    self.nodes_api = Api::all(client.clone());
                    self.events.use_client(client.clone());
                    if let Some(poster) = &mut self.node_events {
                        poster.use_client(client.clone());
                    }
                    // Every stale cache at once: the lists run side by side.
                    for l in self.lists.iter().filter(|l| !l.listed_since(term)) {
                        l.relist(term, &client);
                    }
                }
                // Only a configuration the first client was made from can fail here.
                Err(e) => warn!(error = %e, "cannot make a new client; not writing"),
            }
        }
        None
    }

    /// The node events due (`--node-events`), from the nodes as the cache shows them:
    /// the cluster's record of what this instance wrote. A shadow reads its own view
    /// instead, the cache overlaid with the writes it would have made.
    fn node_events_due(
        &self,
        cached: &[Arc<SlimNode>],
        contested: &[Contest],
        now: Timestamp,
    ) -> Vec<NodeEvent> {
        let manager = &self.settings.field_manager;
        // (node, its conditions as this instance sees them, the types it owns there)
        type Seen<'a> = (&'a SlimNode, Cow<'a, [Condition]>, Vec<String>);
        let views: Vec<Seen> = cached
            .iter()
            .map(|n| {
                let mut owned = n.owned_by(manager).to_vec();
                let conditions = if self.settings.dry_run {
                    let pending = n.metadata.name.as_deref().and_then(|m| self.pending.get(m));
                    if let Some(p) = pending {
                        owned.extend(p.conditions.iter().map(|c| c.type_.clone()));
                    }
                    pass::overlay(pending, &view(n, manager), now).0
                } else {
                    Cow::Borrowed(n.conditions.as_slice())
                };
                (n.as_ref(), conditions, owned)
            })
            .collect();
        let mut due = node_events::due(
            views.iter().map(|(n, conditions, owned)| NodeRef {
                name: n.metadata.name.as_deref().unwrap_or_default(),
                uid: n.metadata.uid.as_deref().unwrap_or_default(),
                conditions,
                owned,
            }),
            manager,
            now,
        );
        let uids: HashMap<&str, &str> = cached
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n.metadata.uid.as_deref()?)))
            .collect();
        for c in contested {
            let uid = uids.get(c.node.as_str()).copied().unwrap_or_default();
            due.extend(node_events::contested(&c.node, uid, &c.with, manager));
        }
        due
    }

    /// Logs each contest and each write the contest bound holds back, once while it
    /// lasts, and exports their numbers.
    fn report_contests(&mut self, contested: &[Contest], deferred: &[Deferred]) {
        self.metrics.nodes_contested.set(contested.len() as i64);
        self.metrics.writes_deferred.set(deferred.len() as i64);
        // In a contest of differing opinions the report moves between the two instances
        // with each rewrite (the one held back reports): a contest is logged as over
        // only once it has not been seen for a resync interval.
        let now = Instant::now();
        for c in contested {
            for other in &c.with {
                let seen = self.contests.insert((c.node.clone(), other.clone()), now);
                if seen.is_none() {
                    warn!(node = %c.node, other_field_manager = %other,
                          "node contested: another live kumaco instance also manages its \
                           conditions; each rewrites what the other changed at most once per \
                           --resync-interval");
                }
            }
        }
        let quiet = self.settings.resync_interval;
        self.contests.retain(|(node, other), seen| {
            let over = now.duration_since(*seen) > quiet;
            if over {
                info!(node = %node, other_field_manager = %other, "node no longer contested");
            }
            !over
        });
        let held: HashSet<(String, Timestamp)> =
            deferred.iter().map(|d| (d.node.clone(), d.until)).collect();
        for d in deferred {
            if !self.deferred.contains(&(d.node.clone(), d.until)) {
                info!(node = %d.node, changed_by = ?d.by, until = %d.until,
                      "not rewriting what another instance changed since this one's last \
                       write until a resync interval after it");
            }
        }
        self.deferred = held;
    }

    /// `--dry-run`: logs and counts each condition a write would change, and records the
    /// write as pending, as a live instance records its writes, so that the next passes
    /// reason on the state the write would have made: the ceiling counts the nodes it
    /// would have started, and a write is logged once, not at every pass.
    fn shadow(&mut self, writes: Vec<Write>, cached: &[Arc<SlimNode>], now: Timestamp) {
        let manager = &self.settings.field_manager;
        let by_name: HashMap<&str, &SlimNode> = cached
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, n.as_ref())))
            .collect();
        for w in writes {
            let current = by_name
                .get(w.node.as_str())
                .map(|n| pass::overlay(self.pending.get(&w.node), &view(n, manager), now).0)
                .unwrap_or_default();
            for c in &w.conditions {
                let unchanged = find(&current, &c.type_).is_some_and(|e| {
                    (e.status, &e.reason, &e.message) == (c.status, &c.reason, &c.message)
                });
                if unchanged {
                    continue;
                }
                info!(node = %w.node, condition = %c.type_, status = c.status.as_str(),
                      reason = %c.reason, detail = %c.message, "dry run: would set condition");
                self.metrics
                    .dry_run
                    .write(&c.type_, c.status.as_str(), &c.reason);
            }
            for ty in &w.dropped {
                info!(node = %w.node, condition = %ty,
                      "dry run: would give up this instance's ownership of the condition");
            }
            self.pending.insert(
                w.node,
                Pending {
                    conditions: w.conditions,
                    // Never written, so no cache ever catches up with it by version: it
                    // is settled only when the node shows the same conditions (another
                    // instance wrote them), or replaced by the next would-be write.
                    resource_version: Some(u64::MAX),
                    written_at: now,
                    dropped: w.dropped,
                },
            );
        }
    }

    /// `--dry-run`: logs and counts each event that would be posted, once while it is due.
    fn shadow_events(&mut self, window_events: &[Announcement], node_events: &[NodeEvent]) {
        let due: HashSet<&str> = window_events
            .iter()
            .map(|a| a.name.as_str())
            .chain(node_events.iter().map(|e| e.name.as_str()))
            .collect();
        self.shadow_logged
            .retain(|name| due.contains(name.as_str()));
        for a in window_events {
            if self.shadow_logged.insert(a.name.clone()) {
                info!(window = %a.window, reason = a.reason(), event = %a.name,
                      "dry run: would post event");
                self.metrics.dry_run.event(a.reason());
            }
        }
        for e in node_events {
            if self.shadow_logged.insert(e.name.clone()) {
                info!(node = %e.node, reason = e.reason, note = %e.note, event = %e.name,
                      "dry run: would post event");
                self.metrics.dry_run.event(e.reason);
            }
        }
    }

    /// Re-reads window ConfigMaps from the cache, re-parsing those whose data changed.
    /// Returns whether the configuration hash changed (not counting the first load).
    fn load_windows(&mut self) -> bool {
        // The cached objects themselves: their data is read only when its hash changed.
        let mut seen = BTreeMap::new();
        for store in &self.window_stores {
            for cm in store.state() {
                let uid = cm.metadata.uid.clone().unwrap_or_default();
                let hash = configmap::data_hash(&cm);
                seen.insert(configmap::id(&cm), (cm, uid, hash));
            }
        }
        self.sources.retain(|id, _| {
            let keep = seen.contains_key(id);
            if !keep {
                info!(window = %id, "window ConfigMap removed: its window ends now");
            }
            keep
        });
        let mut config = Fnv::default();
        let (mut valid, mut invalid) = (0, 0);
        let empty = BTreeMap::new();
        for (id, (cm, uid, data_hash)) in seen {
            config.write_u64(data_hash);
            let fresh = self
                .sources
                .get(&id)
                .is_none_or(|s| s.data_hash != data_hash || s.uid != uid);
            if fresh {
                let data = cm.data.as_ref().unwrap_or(&empty);
                let window = Window::from_data(id.clone(), data, &self.settings.default_zone);
                match &window {
                    Ok(w) => info!(window = %id, schedule = %w.schedule.spec(),
                                   zone = %w.schedule.zone_name(), "window loaded"),
                    Err(e) => warn!(window = %id, error = %e, "window ignored: invalid"),
                }
                self.sources.insert(
                    id.clone(),
                    WindowSource {
                        id: id.clone(),
                        uid,
                        data_hash,
                        created: cm.metadata.creation_timestamp.as_ref().map(|t| t.0),
                        window,
                    },
                );
            }
            match self.sources.get(&id).map(|s| s.window.is_ok()) {
                Some(true) => valid += 1,
                _ => invalid += 1,
            }
        }
        self.metrics.set_windows(valid, invalid);
        let hash = config.finish();
        self.metrics.config_hash.set(hash as i64);
        let changed = self.config_hash.is_some_and(|old| old != hash);
        if changed {
            info!(
                config_hash = format!("{hash:016x}"),
                "window configuration changed; state regenerated"
            );
        } else if self.config_hash.is_none() {
            info!(
                config_hash = format!("{hash:016x}"),
                windows = valid,
                invalid,
                "window configuration loaded"
            );
        }
        if self.config_hash != Some(hash) {
            let mut keys: HashSet<String> = self
                .settings
                .node_selector
                .requirements()
                .iter()
                .map(|r| r.key().to_string())
                .collect();
            for w in self.sources.values().filter_map(|s| s.window.as_ref().ok()) {
                keys.extend(
                    w.selector
                        .requirements()
                        .iter()
                        .map(|r| r.key().to_string()),
                );
            }
            *self.label_keys.write().unwrap_or_else(|e| e.into_inner()) = keys;
        }
        self.config_hash = Some(hash);
        changed
    }

    /// Turns the watch's deletions into [`Deleted`] windows, kept for the horizon in
    /// which their `WindowEnded` is due.
    fn collect_tombstones(&mut self, now: Timestamp) {
        let raw = std::mem::take(&mut *self.tombstones.lock().unwrap_or_else(|e| e.into_inner()));
        for (cm, at) in raw {
            let id = configmap::id(&cm);
            let data = cm.data.clone().unwrap_or_default();
            let window = Window::from_data(id.clone(), &data, &self.settings.default_zone).ok();
            self.deleted.push(Deleted {
                id,
                uid: cm.metadata.uid.clone().unwrap_or_default(),
                at,
                was_active: window.as_ref().is_some_and(|w| w.is_active(at)),
                blackout: window.as_ref().is_some_and(|w| w.blackout),
            });
        }
        let horizon = now.checked_sub(HORIZON).unwrap_or(Timestamp::MIN);
        self.deleted.retain(|d| d.at >= horizon);
    }

    /// Applies `writes`, derived in leadership `term`: none is sent once that term is
    /// over.
    async fn apply(&mut self, mut writes: Vec<Write>, term: Instant, now: Timestamp) {
        writes.retain(|w| self.refused.get(&w.node) != Some(&fingerprint(w)));
        if writes.is_empty() {
            self.failures = 0;
            self.retry_at = None;
            return;
        }
        let manager = self.settings.field_manager.clone();
        let api = self.nodes_api.clone();
        // Only each answer's resourceVersion is kept: the results wait for the whole
        // burst, and even slim Nodes add up over a thousand writes.
        let results: Vec<(Write, Result<Option<u64>, WriteError>)> = futures::stream::iter(writes)
            .map(|w| {
                let api = api.clone();
                let manager = manager.clone();
                let leadership = self.leadership.clone();
                let write_duration = self.metrics.api_write_duration.clone();
                async move {
                    // Leadership can lapse while earlier writes of this pass are in
                    // flight; no write may start after it has.
                    if leadership.term() != Some(term) {
                        return (w, Err(WriteError::Retry("not the leader any more".into())));
                    }
                    let conditions: Vec<_> = w.conditions.iter().map(condition_json).collect();
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
                    let params = PatchParams::apply(&manager).force();
                    let started = std::time::Instant::now();
                    let res = tokio::time::timeout(
                        WRITE_TIMEOUT,
                        api.patch_status(&w.node, &params, &Patch::Apply(body)),
                    )
                    .await;
                    write_duration.observe(started.elapsed().as_secs_f64());
                    let res = match res {
                        Ok(Ok(node)) => Ok(node.resource_version()),
                        Ok(Err(kube::Error::Api(e))) if matches!(e.code, 400 | 413 | 422) => {
                            Err(WriteError::Refused(format!("{} ({})", e.message, e.code)))
                        }
                        Ok(Err(kube::Error::Api(e))) if e.code == 409 => Err(WriteError::Stale),
                        Ok(Err(e)) => Err(WriteError::Retry(e.to_string())),
                        Err(_) => Err(WriteError::Retry(format!(
                            "no answer within {WRITE_TIMEOUT:?}"
                        ))),
                    };
                    (w, res)
                }
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await;
        let mut failed = 0;
        for (w, res) in results {
            match res {
                Ok(written_version) => {
                    self.refused.remove(&w.node);
                    self.metrics.write("patch", WriteResult::Ok);
                    for (ty, status) in &w.transitions {
                        info!(node = %w.node, condition = %ty, status = status.as_str(), "condition changed");
                        self.metrics.transition(ty, status.as_str());
                    }
                    for ty in &w.dropped {
                        info!(node = %w.node, condition = %ty,
                              "gave up this instance's ownership of the condition: the node is \
                               no longer its, and another live kumaco instance owns it too");
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
                Err(WriteError::Retry(e)) => {
                    failed += 1;
                    self.metrics.write("patch", WriteResult::Error);
                    warn!(node = %w.node, error = %e, "writing node conditions failed; will retry");
                }
                Err(WriteError::Stale) => {
                    // Someone changed the node since the cache showed it (a kubelet's
                    // status report, most often): derived again from the newer version.
                    failed += 1;
                    self.metrics.write("patch", WriteResult::Conflict);
                    debug!(node = %w.node, "the node changed since this write was derived; will retry");
                }
                Err(WriteError::Refused(e)) => {
                    self.metrics.write("patch", WriteResult::Error);
                    warn!(node = %w.node, error = %e,
                          "the API server refused the node's conditions; not retrying this write (other nodes go on)");
                    self.refused.insert(w.node.clone(), fingerprint(&w));
                }
            }
        }
        (self.failures, self.retry_at) = backoff(self.failures, failed > 0, now);
    }
}

/// Why a write failed.
enum WriteError {
    /// Timeouts, 429, 5xx, 401/403 (permissions can be fixed): retried with backoff.
    Retry(String),
    /// 400, 413, 422: the same write would get the same answer.
    Refused(String),
    /// 409: the node is no longer the version the write was derived from.
    Stale,
}

/// Identifies a write by its content (the conditions kumaco wants on the node).
fn fingerprint(w: &Write) -> u64 {
    let mut h = Fnv::default();
    h.write_str(&w.node);
    for c in &w.conditions {
        for part in [c.type_.as_str(), c.status.as_str(), &c.reason, &c.message] {
            h.write_str(part);
        }
    }
    h.finish()
}

/// Exponential backoff for a retry pass: 0.5 s doubling to [`MAX_RETRY_DELAY`]; reset
/// on success. Returns (failures in a row, when to retry).
fn backoff(failures: u32, failed: bool, now: Timestamp) -> (u32, Option<Timestamp>) {
    if !failed {
        return (0, None);
    }
    let failures = (failures + 1).min(7);
    let delay = Duration::from_millis(500 << (failures - 1)).min(MAX_RETRY_DELAY);
    (failures, now.checked_add(delay).ok())
}

/// A cached node as the pass reads it.
fn view<'a>(n: &'a SlimNode, manager: &str) -> NodeView<'a> {
    NodeView {
        name: n.metadata.name.as_deref().unwrap_or_default(),
        labels: &n.labels,
        resource_version: n.resource_version(),
        conditions: &n.conditions,
        owned: n.owned_by(manager),
        owned_since: n.owner(manager).and_then(|o| o.time),
        owners: &n.status_owners,
    }
}

fn until(t: Timestamp) -> Duration {
    let d = t.duration_since(Timestamp::now());
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return ctrl_c.await.unwrap_or(()),
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await.unwrap_or(());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_backoff_doubles_to_the_write_retries_cap_and_resets() {
        use kube::runtime::utils::Backoff;
        let mut b = WatchBackoff::default();
        let ms: Vec<u128> = b.by_ref().take(6).map(|d| d.as_millis()).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 4000, 4000]);
        b.reset();
        assert_eq!(b.next(), Some(Duration::from_millis(500)));
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let (f, t) = backoff(0, true, now);
        assert_eq!(
            (f, t),
            (1, Some(now + jiff::SignedDuration::from_millis(500)))
        );
        let (f, t) = backoff(6, true, now);
        assert_eq!((f, t), (7, Some(now + jiff::SignedDuration::from_secs(4))));
        assert_eq!(backoff(7, false, now), (0, None));
    }
}
