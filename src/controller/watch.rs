//! The watches: each keeps a cache of one kind (the nodes; the window ConfigMaps of one
//! namespace), wakes the loop when a change matters to a pass, and lists again on
//! request (a new leader's fence) or when the API server says its resume point is gone.
//!
//! Every list is a consistent read (kube's default `ListSemantic::MostRecent`, in pages of
//! [`LIST_PAGE`]), so that a list asked for after a moment shows every write made before
//! it: the fence a new leader writes behind (`fence`). Streaming lists would send less at
//! once, but kube asks for them at resourceVersion 0, which the API server answers from
//! its watch cache however far behind etcd that is.
//!
//! `--watch-timeout` is the server-side limit of each watch request, after which kube's
//! watcher resumes from the last resourceVersion (no re-list). kube also gives up on a
//! watch silent for that plus a grace of its own: the only way out of a connection the
//! network silently swallowed (HTTP/1.1 has no pings), so it bounds how long kumaco can
//! be blind after such a loss, as client-go's HTTP/2 health checks bound it. kube's
//! default left kumaco blind to window and node changes for minutes (tests/faultproxy.rs;
//! docs/design.md, "Connections the network swallows"). Errors back off as writes do
//! ([`Backoff`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tracing::{error, info, warn};

use super::Connect;
use super::sources::Source;
use super::writer::{Backoff, MAX_RETRY_DELAY};
use crate::config::Settings;
use crate::configmap;
use crate::gates::{Failure, SourceError, SourcePolicy};
use crate::in_progress::waits_to_start;
use crate::metrics::Metrics;
use crate::node::SlimNode;
use crate::selector::Selector;

/// Objects per page of a list: each page's answer is held whole while it is decoded, so
/// pages smaller than kube's and client-go's 500 lower the peak RSS at scale for a few
/// more requests (docs/benchmarks.md, "Memory per node").
pub const LIST_PAGE: u32 = 100;

/// The longest a list may go without an answer (a page, an error) before it is asked
/// for again on new connections; doubled after each such list in a row, up to
/// [`MAX_LIST_STALLS`] doublings. A list request on a connection the network swallowed
/// otherwise waits for the read timeout (`--watch-timeout` and a margin), and a leader
/// elected with its first lists lost writes nothing until then (the chaos run caught
/// one, blackholed as it started, that missed a window edge). A page of [`LIST_PAGE`]
/// nodes takes well under a second, and the API server gives up on a list well before
/// the last doubling.
pub const LIST_STALL: Duration = Duration::from_secs(15);
/// How many times [`LIST_STALL`] doubles for lists in a row that got no answer.
const MAX_LIST_STALLS: u32 = 2;
// An error is an answer: a list retried after the longest backoff is not taken for lost.
const _: () = assert!(LIST_STALL.as_secs() > MAX_RETRY_DELAY.as_secs());

/// The label keys any selector names (`--node-selector` and every valid window's): a node
/// label change under another key changes no decision.
pub type LabelKeys = Arc<std::sync::RwLock<HashSet<String>>>;

/// The window ConfigMaps the watches saw deleted: each one's last state and when.
pub type Tombstones = Arc<Mutex<Vec<(ConfigMap, Timestamp)>>>;

/// Starts the node watch: the cache of every node, trimmed to what a pass reads (`read`:
/// the condition types any decision reads), waking `wake` for the changes that matter.
pub fn spawn_nodes(
    client: &Client,
    connect: &Connect,
    settings: &Settings,
    read: Vec<String>,
    label_keys: LabelKeys,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
) -> (Store<SlimNode>, ListState) {
    let (store, cache) = reflector::store::<SlimNode>();
    let manager = settings.field_manager.clone();
    let names = settings.condition_names.clone();
    let config = watcher::Config::default()
        .page_size(LIST_PAGE)
        .timeout(settings.watch_timeout_secs);
    let stream = move |client: Client| {
        let (manager, read, names) = (manager.clone(), read.clone(), names.clone());
        watcher(Api::<SlimNode>::all(client), config.clone())
            .backoff(Backoff::default())
            .modify(move |node| {
                node.rename(&names);
                node.keep_only(&manager, &read);
            })
    };
    let relevant = node_relevance(
        settings.node_selector.clone(),
        settings.field_manager.clone(),
        label_keys,
    );
    let lists = ListState::default();
    let watch = Watch {
        what: "nodes",
        lists: lists.clone(),
        connect: connect.clone(),
        wake,
        metrics: Some(metrics),
        source: None,
    };
    tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
    (store, lists)
}

/// Starts one watch of window ConfigMaps per watched namespace; their deletions are
/// recorded in `tombstones`.
pub fn spawn_windows(
    client: &Client,
    connect: &Connect,
    settings: &Settings,
    tombstones: &Tombstones,
    wake: Arc<Notify>,
) -> Vec<(Store<ConfigMap>, ListState)> {
    let mut out = Vec::new();
    for ns in &settings.namespaces {
        let (store, cache) = reflector::store::<ConfigMap>();
        let config = watcher::Config::default()
            .page_size(LIST_PAGE)
            .timeout(settings.watch_timeout_secs)
            .labels(&settings.window_selector);
        let namespace = ns.clone();
        let stream = move |client: Client| {
            watcher(
                Api::<ConfigMap>::namespaced(client, &namespace),
                config.clone(),
            )
            .backoff(Backoff::default())
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
        let lists = ListState::default();
        let watch = Watch {
            what: "configmaps",
            lists: lists.clone(),
            connect: connect.clone(),
            wake: wake.clone(),
            metrics: None,
            source: None,
        };
        tokio::spawn(drive(watch, stream, client.clone(), cache, on_event));
        out.push((store, lists));
    }
    out
}

/// How the watched sources of the health gates (the pause, the blocking pods, the object
/// checks, the PodDisruptionBudgets) treat a failure: their cache stands for this long
/// once the watch fails, then the gate holds every start. A watch that fails lists
/// again after each backoff step, so its recovery is a list that completes.
pub const WATCHED: SourcePolicy = SourcePolicy {
    stale_after: jiff::SignedDuration::from_secs(30),
    allow_unreachable: false,
};

/// The nodes of the cache that wait to start ([`waits_to_start`] with the
/// `--require-condition` types): only there can a blocking pod or a budget change a
/// decision. `None` where it is used (a dry run, whose would-be writes never show on the
/// nodes) counts every node.
#[derive(Clone)]
pub struct Waiting {
    pub nodes: Store<SlimNode>,
    pub required: Vec<String>,
}

impl Waiting {
    /// Whether the node named waits to start.
    pub fn on(&self, node: Option<&str>) -> bool {
        node.is_some_and(|name| {
            self.nodes
                .get(&reflector::ObjectRef::new(name))
                .is_some_and(|node| waits_to_start(&node.conditions, &self.required))
        })
    }

    /// Whether any node waits to start.
    pub fn anyone(&self) -> bool {
        self.nodes
            .state()
            .iter()
            .any(|n| waits_to_start(&n.conditions, &self.required))
    }
}

/// What failed in a watch, as the health gates' failure policy reads it.
pub fn watch_error(what: &str, e: &watcher::Error) -> SourceError {
    let failure = match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => crate::kubeclient::failure(k),
        watcher::Error::WatchError(status) => Failure::of_status(status.code),
        watcher::Error::NoResourceVersion => Failure::Invalid,
    };
    let detail = match e {
        watcher::Error::InitialListFailed(k) => format!("list: {}", crate::kubeclient::describe(k)),
        watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => {
            format!("watch: {}", crate::kubeclient::describe(k))
        }
        other => other.to_string(),
    };
    SourceError {
        failure,
        message: format!("{what}: {detail}"),
    }
}

/// One watch's record of its last complete list, and the way to ask it for another.
///
/// A replica that becomes leader may hold a cache that stopped following the cluster
/// (watches on connections the network swallowed, a standby's cache behind), and an
/// apply derived from it undoes what the previous leader wrote: a `lastTransitionTime`
/// set back, a slot counted free that is taken. So a new leader writes only once each
/// of its caches comes from a list asked for after its term began (`fence`); a
/// list is a consistent read, so it shows every write the earlier leaders made.
#[derive(Clone, Default)]
pub struct ListState(Arc<Mutex<Lists>>, Arc<Notify>);

#[derive(Default)]
struct Lists {
    /// When the list the cache now shows was asked for.
    listed: Option<Instant>,
    /// Whether the watch fails now (its latest answer an error).
    failing: bool,
    /// The term for which a new list was asked (asked once per term: a list restarted at
    /// every pass might never finish).
    asked_for: Option<Instant>,
    /// The client to list and watch with from now on, until the driver takes it.
    relist_with: Option<Client>,
}

impl ListState {
    /// Whether the cache comes from a list asked for at or after `term`.
    pub fn listed_since(&self, term: Instant) -> bool {
        let lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lists.listed.is_some_and(|t| t >= term)
    }

    /// Asks for a new list, on `client`'s connections, unless one was asked for `term`.
    pub fn relist(&self, term: Instant, client: &Client) {
        let mut lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lists.asked_for.is_none_or(|t| t < term) {
            lists.asked_for = Some(term);
            lists.relist_with = Some(client.clone());
            self.1.notify_one();
        }
    }

    /// Whether the watch fails now: its latest answer was an error.
    pub fn failing(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).failing
    }

    pub(super) fn set_failing(&self, failing: bool) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).failing = failing;
    }

    fn completed(&self, asked_at: Instant) {
        let mut lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lists.listed = Some(asked_at);
        lists.failing = false;
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
pub(super) struct Watch {
    pub what: &'static str,
    pub lists: ListState,
    /// A client on new connections, for a list that got no answer.
    pub connect: Connect,
    pub wake: Arc<Notify>,
    /// Where node events are counted (`kumaco_node_events_total`).
    pub metrics: Option<Arc<Metrics>>,
    /// A health gate's source: its outcomes recorded there, and a failing watch listed
    /// again after each backoff step, so that its recovery shows as a list.
    pub source: Option<Source>,
}

/// Drives one watch: applies each event to the cache, and wakes the loop when
/// `relevant` says the event (judged against the cache before it) changes what a pass
/// reads. A list wakes it once, when complete. On request ([`ListState`]) it drops the
/// watch and lists again, with a stream `make` builds on the client given.
pub(super) async fn drive<K, S>(
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
        connect,
        wake,
        metrics,
        source,
    } = watch;
    // Errors in a row, for the backoff of a source's lists.
    let mut errors = 0u32;
    let reader = cache.as_reader();
    let mut stream = Box::pin(make(client.clone()));
    let mut client = client;
    // When the list in progress was asked for (at the latest), while one is.
    let mut listing: Option<Instant> = None;
    // Lists in a row that got no answer (see `LIST_STALL`).
    let mut stalls = 0u32;
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
            () = tokio::time::sleep(LIST_STALL * 2u32.pow(stalls.min(MAX_LIST_STALLS))), if listing.is_some() => {
                stalls += 1;
                match connect() {
                    Ok(new) => client = new,
                    Err(e) => warn!(what, error = %e, "cannot make a new client"),
                }
                warn!(what, stalls, "the list got no answer: listing again, on new connections");
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
                    stalls = 0;
                    if let Some(s) = &source {
                        s.listed(Timestamp::now());
                    }
                } else if let Some(s) = &source
                    && !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_))
                {
                    s.alive(Timestamp::now());
                }
                if !matches!(event, watcher::Event::Init | watcher::Event::InitApply(_)) {
                    errors = 0;
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
            Err(e) => {
                warn!(what, error = %e, "watch error; retrying with backoff");
                lists.set_failing(true);
                if let Some(s) = &source {
                    s.failed(watch_error(what, &e), Timestamp::now());
                    // Listed again after the backoff step: a watch resumed in silence
                    // would never show that it answers again.
                    errors = errors.saturating_add(1);
                    tokio::time::sleep(Backoff::delay(errors)).await;
                    stream = Box::pin(make(client.clone()));
                    listing = None;
                }
            }
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
