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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, error, info, warn};

use crate::announce::{Deleted, WindowSource};
use crate::clock::ClockSteps;
use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};
use crate::config::Settings;
use crate::configmap;
use crate::decision::HORIZON;
use crate::events::Poster;
use crate::fingerprint::Fnv;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::node::{SlimNode, condition_json};
use crate::pass::{self, NodeView, Pending, Rules, Write};
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
/// Server-side limit of each watch request, after which kube's watcher resumes from the
/// last resourceVersion (no re-list). kube also gives up on a watch silent for this plus
/// 5 s: the only way out of a connection the network silently swallowed (HTTP/1.1 has no
/// pings), so it bounds how long kumaco can be blind after such a loss, as client-go's
/// HTTP/2 health checks bound it at 30 + 15 s. kube's default, 290 s, left kumaco
/// blind to window and node changes for almost five minutes (tests/faultproxy.rs).
/// A start-up's streaming list must fit in it: 3 s at 10,000 nodes.
const WATCH_TIMEOUT_SECS: u32 = 40;
/// Writes in flight at once.
const WRITE_CONCURRENCY: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("serving metrics/health: {0}")]
    Http(#[from] std::io::Error),
    #[error("watch stream ended unexpectedly")]
    WatchEnded,
}

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
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    leadership: Leadership,
) -> Result<Exit, ControllerError> {
    let wake = Arc::new(Notify::new());

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
    // Streaming lists (WatchList) send the initial state as watch events, one object at a
    // time, instead of pages of Nodes: a lower memory peak at start-up.
    let node_stream = watcher(
        Api::<SlimNode>::all(client.clone()),
        watcher::Config::default()
            .streaming_lists()
            .timeout(WATCH_TIMEOUT_SECS),
    )
    .default_backoff()
    .modify(move |node| node.keep_only(&manager, &read));
    let label_keys: LabelKeys = Arc::default();
    tokio::spawn(drive_nodes(
        node_stream,
        node_writer,
        settings.node_selector.clone(),
        label_keys.clone(),
        wake.clone(),
        metrics.clone(),
    ));

    let tombstones: Tombstones = Arc::default();
    let mut window_stores = Vec::new();
    for ns in &settings.namespaces {
        let (store, writer) = reflector::store::<ConfigMap>();
        let cfg = watcher::Config::default()
            .labels(&settings.window_selector)
            .timeout(WATCH_TIMEOUT_SECS);
        let stream = watcher(Api::<ConfigMap>::namespaced(client.clone(), ns), cfg)
            .default_backoff()
            .modify(configmap::trim)
            .reflect(writer);
        let deleted = tombstones.clone();
        tokio::spawn(drive(
            stream,
            wake.clone(),
            "configmaps",
            move |cm: &ConfigMap| {
                deleted
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((cm.clone(), Timestamp::now()));
            },
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
    };
    let events = Poster::new(client.clone(), metrics.clone());
    let mut shell = Shell {
        nodes_api: Api::all(client),
        leadership,
        settings,
        rules,
        metrics,
        nodes,
        label_keys,
        window_stores,
        tombstones,
        sources: BTreeMap::new(),
        deleted: Vec::new(),
        config_hash: None,
        pending: HashMap::new(),
        refused: HashMap::new(),
        events,
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

/// Drives the node watch: applies each event to the cache, and wakes the loop only when
/// the node changed in something a pass reads (see [`SlimNode::differs_for_pass`]), so
/// that the cost of a foreign change is a comparison, not a pass over every node. A
/// relist (after a watch gap) wakes it once, when the new list is complete. A node outside
/// the scope that carries nothing of this instance is irrelevant whatever changes on it
/// (another instance's writes, for one).
async fn drive_nodes<S>(
    stream: S,
    mut cache: reflector::store::Writer<SlimNode>,
    scope: Selector,
    label_keys: LabelKeys,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
) where
    S: futures::Stream<Item = Result<watcher::Event<SlimNode>, watcher::Error>> + Send,
{
    let reader = cache.as_reader();
    let mut stream = std::pin::pin!(stream);
    loop {
        match stream.try_next().await {
            Ok(Some(event)) => {
                let relevant = match &event {
                    watcher::Event::Apply(node) => {
                        let keys = label_keys.read().unwrap_or_else(|e| e.into_inner());
                        let old = reader.get(&reflector::ObjectRef::from_obj(node));
                        let ours =
                            |n: &SlimNode| !n.status_owners.is_empty() || scope.matches(n.labels());
                        match old {
                            None => ours(node),
                            Some(old) if !ours(&old) && !ours(node) => false,
                            Some(old) => old.differs_for_pass(node, &keys),
                        }
                    }
                    watcher::Event::Delete(_) | watcher::Event::InitDone => true,
                    watcher::Event::Init | watcher::Event::InitApply(_) => false,
                };
                cache.apply_watcher_event(&event);
                metrics.node_event(relevant);
                if relevant {
                    wake.notify_one();
                }
            }
            Ok(None) => {
                error!(what = "nodes", "watch stream ended");
                return;
            }
            Err(e) => warn!(what = "nodes", error = %e, "watch error; retrying with backoff"),
        }
    }
}

/// Drives a watch stream; its output is a wake-up per event, and `on_delete` for each
/// object the watch says was deleted. Errors are logged and retried by the stream's
/// backoff.
async fn drive<S, K>(stream: S, wake: Arc<Notify>, what: &'static str, on_delete: impl Fn(&K))
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut stream = std::pin::pin!(stream.into_stream());
    loop {
        match stream.try_next().await {
            Ok(Some(event)) => {
                if let watcher::Event::Delete(obj) = &event {
                    on_delete(obj);
                }
                wake.notify_one();
            }
            Ok(None) => {
                error!(what, "watch stream ended");
                return;
            }
            Err(e) => warn!(what, error = %e, "watch error; retrying with backoff"),
        }
    }
}

enum Step {
    Next(Option<Timestamp>),
    ConfigChangedExit,
}

struct Shell {
    nodes_api: Api<SlimNode>,
    leadership: Leadership,
    settings: Settings,
    rules: Rules,
    metrics: Arc<Metrics>,
    nodes: Store<SlimNode>,
    label_keys: LabelKeys,
    window_stores: Vec<Store<ConfigMap>>,
    tombstones: Tombstones,
    /// Window ConfigMaps as last parsed, by id (re-parsed when their data changes).
    sources: BTreeMap<WindowId, WindowSource>,
    deleted: Vec<Deleted>,
    config_hash: Option<u64>,
    pending: HashMap<String, Pending>,
    /// Writes the API server refused with an answer that will not change (400, 413,
    /// 422), by node: the same write is not sent again; a different one is.
    refused: HashMap<String, u64>,
    events: Poster,
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
        let views = cached.iter().map(|n| NodeView {
            name: n.metadata.name.as_deref().unwrap_or_default(),
            labels: n.metadata.labels.as_ref().unwrap_or(empty_labels()),
            resource_version: n.resource_version(),
            conditions: &n.conditions,
            owned: n.owned_by(&self.settings.field_manager),
        });
        let sources: Vec<&WindowSource> = self.sources.values().collect();
        let outcome = pass::run(
            &self.rules,
            &sources,
            &self.deleted,
            views,
            &self.pending,
            now,
        );
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

        if self.leadership.is_leader() {
            self.apply(outcome.writes, now).await;
            self.events.post(&outcome.events, &self.sources, now).await;
        }
        let retry = [self.retry_at, self.events.retry_at()]
            .into_iter()
            .flatten()
            .min();
        Step::Next(outcome.next_edge.into_iter().chain(retry).min())
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

    async fn apply(&mut self, mut writes: Vec<Write>, now: Timestamp) {
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
                async move {
                    // Leadership can lapse while earlier writes of this pass are in
                    // flight; no write may start after it has.
                    if !leadership.is_leader() {
                        return (w, Err(WriteError::Retry("not the leader any more".into())));
                    }
                    let conditions: Vec<_> = w.conditions.iter().map(condition_json).collect();
                    let body = json!({
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": { "name": w.node },
                        "status": { "conditions": conditions },
                    });
                    let params = PatchParams::apply(&manager).force();
                    let res = tokio::time::timeout(
                        WRITE_TIMEOUT,
                        api.patch_status(&w.node, &params, &Patch::Apply(body)),
                    )
                    .await;
                    let res = match res {
                        Ok(Ok(node)) => Ok(node.resource_version()),
                        Ok(Err(kube::Error::Api(e))) if matches!(e.code, 400 | 413 | 422) => {
                            Err(WriteError::Refused(format!("{} ({})", e.message, e.code)))
                        }
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
                    self.metrics.write("patch", true);
                    for (ty, status) in &w.transitions {
                        info!(node = %w.node, condition = %ty, status = status.as_str(), "condition changed");
                        self.metrics.transition(ty, status.as_str());
                    }
                    self.pending.insert(
                        w.node,
                        Pending {
                            conditions: w.conditions,
                            resource_version: written_version,
                            written_at: now,
                        },
                    );
                }
                Err(WriteError::Retry(e)) => {
                    failed += 1;
                    self.metrics.write("patch", false);
                    warn!(node = %w.node, error = %e, "writing node conditions failed; will retry");
                }
                Err(WriteError::Refused(e)) => {
                    self.metrics.write("patch", false);
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
    /// Timeouts, 409, 429, 5xx, 401/403 (permissions can be fixed): retried with backoff.
    Retry(String),
    /// 400, 413, 422: the same write would get the same answer.
    Refused(String),
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

fn empty_labels() -> &'static BTreeMap<String, String> {
    static EMPTY: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(BTreeMap::new)
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
