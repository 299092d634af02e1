//! The controller loop: watch window ConfigMaps and Nodes, ask the decision core what
//! each node should show, and write only the differences.
//!
//! One loop, no per-object workers: every wake-up (a watch event, the timer at the next
//! window edge, the periodic resync) re-derives the whole answer from the cached state
//! and the clock. That makes restarts, missed events and clock jumps harmless: the next
//! pass computes the same answer from scratch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, NodeCondition, ObjectReference};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, error, info, warn};

use crate::conditions::{self, Desired, MAINTENANCE_IN_PROGRESS, UNDER_MAINTENANCE};
use crate::config::Settings;
use crate::decision::{self, ActiveWindows, Verdict};
use crate::in_progress::{self, NodeState};
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::node::SlimNode;
use crate::window::{InvalidWindow, Window, WindowId};

/// Every API write gets this long before it counts as failed and is retried.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long kumaco trusts its own write over a cache that has not shown it yet, when the
/// API's resourceVersions are not numbers (they always are with etcd).
const PENDING_TTL: Duration = Duration::from_secs(10);
/// Longest wait before retrying failed writes: bounds how late a missed edge lands after
/// the API server comes back (a retry pass against a down server costs one request).
const MAX_RETRY_DELAY: Duration = Duration::from_secs(4);
/// Longest sleep between passes: bounds how late a wall-clock jump is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(30);
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
    let mut read: Vec<String> = vec![UNDER_MAINTENANCE.into(), MAINTENANCE_IN_PROGRESS.into()];
    if let Some(policy) = &settings.in_progress {
        read.extend(policy.required.iter().chain(&policy.blocking).cloned());
    }
    // Streaming lists (WatchList) send the initial state as watch events, one object at a
    // time, instead of pages of Nodes: a lower memory peak at start-up.
    let node_stream = watcher(
        Api::<SlimNode>::all(client.clone()),
        watcher::Config::default().streaming_lists(),
    )
    .default_backoff()
    .modify(move |node| node.keep_only(&manager, &read))
    .reflect(node_writer);
    tokio::spawn(drive(node_stream, wake.clone(), "nodes"));

    let mut window_stores = Vec::new();
    for ns in &settings.namespaces {
        let (store, writer) = reflector::store::<ConfigMap>();
        let cfg = watcher::Config::default().labels(&settings.window_selector);
        let stream = watcher(Api::<ConfigMap>::namespaced(client.clone(), ns), cfg)
            .default_backoff()
            .reflect(writer);
        tokio::spawn(drive(stream, wake.clone(), "configmaps"));
        window_stores.push(store);
    }

    info!(namespaces = ?settings.namespaces, node_selector = %settings.node_selector,
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

    let reporter = Reporter {
        controller: "kumaco".into(),
        instance: std::env::var("POD_NAME").ok().or_else(hostname),
    };
    let mut reconciler = Reconciler {
        api: Api::all(client.clone()),
        client,
        reporter,
        leadership,
        settings,
        metrics,
        nodes,
        window_stores,
        parsed: BTreeMap::new(),
        config_hash: None,
        announced: HashMap::new(),
        pending: HashMap::new(),
        was_in_scope: HashSet::new(),
        left_scope: HashSet::new(),
        started_at: Timestamp::now(),
        retry_at: None,
        failures: 0,
    };

    let mut shutdown = std::pin::pin!(shutdown_signal());
    let mut first = true;
    loop {
        let started = Instant::now();
        let next_edge = match reconciler.reconcile().await {
            Pass::ConfigChangedExit => return Ok(Exit::ConfigChanged),
            Pass::Next(t) => t,
        };
        reconciler
            .metrics
            .reconcile_duration
            .observe(started.elapsed().as_secs_f64());
        if first {
            reconciler.metrics.set_ready();
            info!("ready");
            first = false;
        }
        let mut sleep = reconciler.settings.resync_interval.min(MAX_SLEEP);
        for t in [next_edge, reconciler.retry_at].into_iter().flatten() {
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
            _ = reconciler.leadership.changed() => {}
            _ = &mut shutdown => {
                info!("signal received, stopping");
                return Ok(Exit::Signal);
            }
        }
    }
}

/// Drives a watch stream; its only output is a wake-up per event. Errors are logged and
/// retried by the stream's backoff.
async fn drive<S, K>(stream: S, wake: Arc<Notify>, what: &'static str)
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut stream = std::pin::pin!(stream.into_stream());
    loop {
        match stream.try_next().await {
            Ok(Some(_)) => wake.notify_one(),
            Ok(None) => {
                error!(what, "watch stream ended");
                return;
            }
            Err(e) => warn!(what, error = %e, "watch error; retrying with backoff"),
        }
    }
}

enum Pass {
    Next(Option<Timestamp>),
    ConfigChangedExit,
}

/// A window ConfigMap as last parsed.
struct Parsed {
    data_hash: u64,
    window: Result<Window, InvalidWindow>,
    object: ObjectReference,
}

/// What kumaco applied to a node and the watch has not shown yet.
struct Pending {
    conditions: Vec<NodeCondition>,
    /// The node's resourceVersion after our write.
    resource_version: Option<u64>,
    at: Instant,
}

struct Reconciler {
    api: Api<SlimNode>,
    client: Client,
    reporter: Reporter,
    leadership: Leadership,
    settings: Settings,
    metrics: Arc<Metrics>,
    nodes: Store<SlimNode>,
    window_stores: Vec<Store<ConfigMap>>,
    parsed: BTreeMap<WindowId, Parsed>,
    config_hash: Option<u64>,
    /// The occurrence start last announced (WindowStarted) per window.
    announced: HashMap<WindowId, Timestamp>,
    pending: HashMap<String, Pending>,
    /// Nodes in scope at the previous pass, and nodes seen leaving the scope whose True
    /// conditions are not False yet.
    was_in_scope: HashSet<String>,
    left_scope: HashSet<String>,
    started_at: Timestamp,
    retry_at: Option<Timestamp>,
    failures: u32,
}

/// One node's state and the conditions kumaco wants on it.
struct Plan {
    name: String,
    current: Vec<NodeCondition>,
    desired: Vec<Desired>,
    /// `Some` for an in-scope node, holding its maintenance window (description, end) if
    /// it is UnderMaintenance; `None` for a node that left the scope.
    in_scope: Option<Option<(String, Timestamp)>>,
}

/// One node's planned write.
struct Write {
    node: String,
    conditions: Vec<NodeCondition>,
    transitions: Vec<(String, String)>,
}

impl Reconciler {
    async fn reconcile(&mut self) -> Pass {
        if self.load_windows() && self.settings.exit_on_config_change {
            return Pass::ConfigChangedExit;
        }
        let now = Timestamp::now();
        let windows: Vec<&Window> = self
            .parsed
            .values()
            .filter_map(|p| p.window.as_ref().ok())
            .collect();
        let active = ActiveWindows::at(windows.iter().copied(), now);
        let next_edge = decision::next_edge(windows.iter().copied(), now);

        let mut plans: Vec<Plan> = Vec::new();
        let mut in_scope = 0i64;
        let mut under = 0i64;
        let mut selected: HashMap<&WindowId, usize> = HashMap::new();
        let nodes = self.nodes.state();
        let names: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        self.pending.retain(|name, _| names.contains(name));
        self.left_scope.retain(|name| names.contains(name));
        let mut now_in_scope = HashSet::new();
        for node in nodes {
            let name = node.name_any();
            let labels = node.labels();
            let current = current_conditions(&mut self.pending, &name, &node);
            let owned = node.owned_by(&self.settings.field_manager);
            if self.settings.node_selector.matches(labels) {
                in_scope += 1;
                self.left_scope.remove(&name);
                now_in_scope.insert(name.clone());
                for (w, _) in active.iter() {
                    if w.selector.matches(labels) {
                        *selected.entry(&w.id).or_default() += 1;
                    }
                }
                let verdict = active.verdict(labels);
                let window = match &verdict {
                    Verdict::Maintenance { windows, until } => {
                        under += 1;
                        let ids: Vec<String> = windows.iter().map(|w| w.id.to_string()).collect();
                        let noun = if ids.len() == 1 { "window" } else { "windows" };
                        Some((format!("{noun} {}", ids.join(", ")), *until))
                    }
                    _ => None,
                };
                let existing = find(&current, UNDER_MAINTENANCE);
                let desired = decision::under_maintenance(&verdict, existing)
                    .into_iter()
                    .collect();
                plans.push(Plan {
                    name,
                    current,
                    desired,
                    in_scope: Some(window),
                });
            } else if self.was_in_scope.contains(&name) || self.left_scope.contains(&name) {
                // Only a node this process saw leave its scope: another instance may
                // share the field manager and own this node's conditions now.
                self.left_scope.insert(name.clone());
                let ours: Vec<NodeCondition> = current
                    .iter()
                    .filter(|c| owned.contains(&c.type_))
                    .cloned()
                    .collect();
                if ours.iter().all(|c| c.status != "True") {
                    self.left_scope.remove(&name);
                }
                let desired = decision::out_of_scope(&ours);
                plans.push(Plan {
                    name,
                    current,
                    desired,
                    in_scope: None,
                });
            }
        }
        if let Some(policy) = &self.settings.in_progress {
            let scoped: Vec<usize> = (0..plans.len())
                .filter(|&i| plans[i].in_scope.is_some())
                .collect();
            let states: Vec<NodeState> = scoped
                .iter()
                .map(|&i| NodeState {
                    name: &plans[i].name,
                    window: plans[i].in_scope.clone().flatten(),
                    conditions: &plans[i].current,
                })
                .collect();
            let decided = in_progress::decide(policy, &states, now);
            let in_progress_now = decided
                .iter()
                .filter(|d| d.as_ref().is_some_and(|d| d.status))
                .count();
            self.metrics.nodes_in_progress.set(in_progress_now as i64);
            for (i, d) in scoped.into_iter().zip(decided) {
                plans[i].desired.extend(d);
            }
        }
        let writes: Vec<Write> = plans
            .iter()
            .filter_map(|p| plan_write(&p.name, &p.desired, &p.current, now))
            .collect();
        self.was_in_scope = now_in_scope;
        self.metrics.nodes_in_scope.set(in_scope);
        self.metrics.nodes_under_maintenance.set(under);
        self.metrics
            .active_windows
            .set(active.iter().count() as i64);

        let announcements = window_announcements(
            &mut self.announced,
            &self.parsed,
            self.started_at,
            &active,
            &selected,
        );
        drop(active);
        for (object, event) in announcements {
            self.publish(object, event);
        }

        self.apply(writes, now).await;
        Pass::Next(next_edge)
    }

    /// Re-reads window ConfigMaps from the cache; parses new or changed ones and posts
    /// WindowLoaded / WindowInvalid for them. Returns whether the configuration hash
    /// changed (not counting the first load).
    fn load_windows(&mut self) -> bool {
        let mut seen = BTreeMap::new();
        for store in &self.window_stores {
            for cm in store.state() {
                let id = WindowId {
                    namespace: cm.namespace().unwrap_or_default(),
                    name: cm.name_any(),
                };
                let data = cm.data.clone().unwrap_or_default();
                seen.insert(id, (data, cm.object_ref(&())));
            }
        }
        self.parsed.retain(|id, _| {
            let keep = seen.contains_key(id);
            if !keep {
                info!(window = %id, "window ConfigMap removed: its window ends now");
            }
            keep
        });
        let mut config = Fnv::new();
        let (mut valid, mut invalid) = (0, 0);
        for (id, (data, object)) in seen {
            let data_hash = hash_data(&id, &data);
            config.write_u64(data_hash);
            let fresh = self
                .parsed
                .get(&id)
                .is_none_or(|p| p.data_hash != data_hash);
            if fresh {
                let window = Window::from_data(id.clone(), &data, &self.settings.default_zone);
                let event = match &window {
                    Ok(w) => {
                        let next = w.schedule.next_after(Timestamp::now());
                        let lint = w.lint(Timestamp::now());
                        info!(window = %id, schedule = %w.schedule.spec(), zone = %w.schedule.zone_name(),
                              next_start = ?next, warnings = ?lint, "window loaded");
                        loaded_event(w, next, &lint)
                    }
                    Err(e) => {
                        warn!(window = %id, error = %e, "window ignored: invalid");
                        Event {
                            type_: EventType::Warning,
                            reason: "WindowInvalid".into(),
                            note: Some(truncate(format!("window ignored: {e}"))),
                            action: "Validate".into(),
                            secondary: None,
                        }
                    }
                };
                self.publish(object.clone(), event);
                self.parsed.insert(
                    id.clone(),
                    Parsed {
                        data_hash,
                        window,
                        object,
                    },
                );
            }
            match self.parsed.get(&id).map(|p| p.window.is_ok()) {
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
        self.config_hash = Some(hash);
        changed
    }
}

/// WindowStarted for occurrences not announced yet, WindowEnded for announced ones that
/// are over. An occurrence already running when kumaco started was announced by the
/// previous run (or nobody was there to see it start): not announced again.
fn window_announcements(
    announced: &mut HashMap<WindowId, Timestamp>,
    parsed: &BTreeMap<WindowId, Parsed>,
    started_at: Timestamp,
    active: &ActiveWindows,
    selected: &HashMap<&WindowId, usize>,
) -> Vec<(ObjectReference, Event)> {
    let mut out = Vec::new();
    let mut still_active = HashMap::new();
    for (w, occ) in active.iter() {
        still_active.insert(w.id.clone(), occ.start);
        if announced.get(&w.id) == Some(&occ.start) {
            continue;
        }
        announced.insert(w.id.clone(), occ.start);
        if occ.start < started_at {
            continue;
        }
        let n = selected.get(&w.id).copied().unwrap_or(0);
        let what = if w.blackout {
            "blackout"
        } else {
            "maintenance window"
        };
        info!(window = %w.id, nodes = n, until = %occ.end, "{what} started");
        if let Some(p) = parsed.get(&w.id) {
            out.push((
                p.object.clone(),
                Event {
                    type_: EventType::Normal,
                    reason: "WindowStarted".into(),
                    note: Some(format!(
                        "{what} started at {}, selects {n} node(s) in scope, ends {}",
                        occ.start, occ.end
                    )),
                    action: "Start".into(),
                    secondary: None,
                },
            ));
        }
    }
    let ended: Vec<WindowId> = announced
        .keys()
        .filter(|id| !still_active.contains_key(*id))
        .cloned()
        .collect();
    for id in ended {
        announced.remove(&id);
        info!(window = %id, "window ended");
        if let Some(p) = parsed.get(&id) {
            out.push((
                p.object.clone(),
                Event {
                    type_: EventType::Normal,
                    reason: "WindowEnded".into(),
                    note: Some("maintenance window ended".into()),
                    action: "End".into(),
                    secondary: None,
                },
            ));
        }
    }
    out
}

/// The conditions of `node` as kumaco should reason about them: the cache, unless a
/// write of ours is newer than what the cache shows yet.
fn current_conditions(
    pending: &mut HashMap<String, Pending>,
    name: &str,
    node: &SlimNode,
) -> Vec<NodeCondition> {
    let cached = node.conditions.clone();
    let Some(p) = pending.get(name) else {
        return cached;
    };
    // resourceVersions are etcd revisions; the API calls them opaque, but kube-apiserver's
    // own watch cache orders them the same way. A cache at or past our write has seen it,
    // and anything it shows since (another writer undoing ours) is the truth to act on.
    let caught_up = match (p.resource_version, node.resource_version()) {
        (Some(ours), Some(cached)) => cached >= ours,
        _ => false,
    };
    let confirmed = p.conditions.iter().all(|w| {
        find(&cached, &w.type_)
            .is_some_and(|c| c.status == w.status && c.reason == w.reason && c.message == w.message)
    });
    // Without a comparable resourceVersion, trust our write for a while only. With one,
    // never expire: a cache stuck behind our write (a broken watch) must not make a
    // MaintenanceInProgress slot look free; the watch's relist catches up.
    let expired = p.resource_version.is_none() && p.at.elapsed() > PENDING_TTL;
    if caught_up || confirmed || expired {
        pending.remove(name);
        return cached;
    }
    let mut merged = cached;
    for w in &p.conditions {
        merged.retain(|c| c.type_ != w.type_);
        merged.push(w.clone());
    }
    merged
}

impl Reconciler {
    async fn apply(&mut self, writes: Vec<Write>, now: Timestamp) {
        if writes.is_empty() || !self.leadership.is_leader() {
            return;
        }
        let manager = self.settings.field_manager.clone();
        let api = self.api.clone();
        // Only each answer's resourceVersion is kept: the results wait for the whole
        // burst, and even slim Nodes add up over a thousand writes.
        let results: Vec<(Write, Result<Option<u64>, String>)> = futures::stream::iter(writes)
            .map(|w| {
                let api = api.clone();
                let manager = manager.clone();
                let leadership = self.leadership.clone();
                async move {
                    // Leadership can lapse while earlier writes of this pass are in
                    // flight; no write may start after it has.
                    if !leadership.is_leader() {
                        return (w, Err("not the leader any more".to_string()));
                    }
                    let body = json!({
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": { "name": w.node },
                        "status": { "conditions": w.conditions },
                    });
                    let params = PatchParams::apply(&manager).force();
                    let res = tokio::time::timeout(
                        WRITE_TIMEOUT,
                        api.patch_status(&w.node, &params, &Patch::Apply(body)),
                    )
                    .await;
                    let res = match res {
                        Ok(Ok(node)) => Ok(node.resource_version()),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err(format!("no answer within {WRITE_TIMEOUT:?}")),
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
                    self.metrics.write("patch", true);
                    for (ty, status) in &w.transitions {
                        info!(node = %w.node, condition = %ty, status = %status, "condition changed");
                        self.metrics.transition(ty, status);
                    }
                    self.pending.insert(
                        w.node,
                        Pending {
                            conditions: w.conditions,
                            resource_version: written_version,
                            at: Instant::now(),
                        },
                    );
                }
                Err(e) => {
                    failed += 1;
                    self.metrics.write("patch", false);
                    warn!(node = %w.node, error = %e, "writing node conditions failed; will retry");
                }
            }
        }
        if failed > 0 {
            // Exponential backoff for the retry pass: 0.5 s doubling to 4 s.
            self.failures = (self.failures + 1).min(7);
            let delay = Duration::from_millis(500 << (self.failures - 1)).min(MAX_RETRY_DELAY);
            self.retry_at = now.checked_add(delay).ok();
        } else {
            self.failures = 0;
            self.retry_at = None;
        }
    }

    /// Posts an event without blocking the loop; events are for people, best effort.
    ///
    /// A fresh recorder per event: kube's recorder folds events with the same reason into
    /// one series and keeps the first note, but each occurrence of a window deserves its
    /// own event with its own times (kumaco already posts each thing only once).
    fn publish(&self, object: ObjectReference, event: Event) {
        if !self.leadership.is_leader() {
            return;
        }
        let recorder = Recorder::new(self.client.clone(), self.reporter.clone());
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            let res = tokio::time::timeout(WRITE_TIMEOUT, recorder.publish(&event, &object)).await;
            let ok = matches!(res, Ok(Ok(())));
            metrics.write("event", ok);
            if !ok {
                warn!(reason = %event.reason, object = ?object.name, "posting event failed");
            }
        });
    }
}

/// The write a node needs, if what it shows differs from what kumaco wants.
fn plan_write(
    node: &str,
    desired: &[Desired],
    current: &[NodeCondition],
    now: Timestamp,
) -> Option<Write> {
    if !desired
        .iter()
        .any(|d| conditions::differs(d, find(current, &d.type_)))
    {
        return None;
    }
    let mut transitions = Vec::new();
    let conditions = desired
        .iter()
        .map(|d| {
            let existing = find(current, &d.type_);
            let c = conditions::to_apply(d, existing, now);
            if existing.map(|e| e.status.as_str()) != Some(c.status.as_str()) {
                transitions.push((c.type_.clone(), c.status.clone()));
            }
            c
        })
        .collect();
    Some(Write {
        node: node.to_string(),
        conditions,
        transitions,
    })
}

fn find<'a>(conds: &'a [NodeCondition], type_: &str) -> Option<&'a NodeCondition> {
    conds.iter().find(|c| c.type_ == type_)
}

fn loaded_event(w: &Window, next: Option<Timestamp>, lint: &[String]) -> Event {
    let kind = if w.blackout { "blackout" } else { "window" };
    let next = match next {
        Some(t) => format!("next start {}", t.to_zoned(w.schedule.time_zone().clone())),
        None => "no future start".into(),
    };
    let mut note = format!(
        "{kind} loaded: schedule {:?} in {}, duration {}, nodeSelector {:?}; {next}",
        w.schedule.spec(),
        w.schedule.zone_name(),
        w.duration,
        w.selector.to_string(),
    );
    for warning in lint {
        note.push_str("; warning: ");
        note.push_str(warning);
    }
    Event {
        type_: EventType::Normal,
        reason: "WindowLoaded".into(),
        note: Some(truncate(note)),
        action: "Load".into(),
        secondary: None,
    }
}

/// events.k8s.io/v1 notes are limited to 1 kB.
fn truncate(mut s: String) -> String {
    if s.len() > 1024 {
        let mut cut = 1021;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn until(t: Timestamp) -> Duration {
    let d = t.duration_since(Timestamp::now());
    Duration::try_from(d).unwrap_or(Duration::ZERO)
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
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

/// FNV-1a: a stable hash (same value in every process and version) for the config hash.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

fn hash_data(id: &WindowId, data: &BTreeMap<String, String>) -> u64 {
    let mut h = Fnv::new();
    for part in [&id.namespace, &id.name] {
        h.write(part.as_bytes());
        h.write(&[0]);
    }
    for (k, v) in data {
        h.write(k.as_bytes());
        h.write(&[0]);
        h.write(v.as_bytes());
        h.write(&[0]);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_write_when_nothing_differs() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let d = Desired {
            type_: UNDER_MAINTENANCE.into(),
            status: true,
            reason: "MaintenanceWindow".into(),
            message: "m".into(),
        };
        let current = vec![conditions::to_apply(&d, None, now)];
        assert!(plan_write("n", std::slice::from_ref(&d), &current, now).is_none());
        let w = plan_write("n", &[d], &[], now).unwrap();
        assert_eq!(
            w.transitions,
            [(UNDER_MAINTENANCE.to_string(), "True".to_string())]
        );
    }

    #[test]
    fn config_hash_is_stable_and_sensitive() {
        let id = WindowId {
            namespace: "a".into(),
            name: "b".into(),
        };
        let mut data = BTreeMap::new();
        data.insert("duration".to_string(), "1h".to_string());
        let h1 = hash_data(&id, &data);
        assert_eq!(h1, hash_data(&id, &data));
        data.insert("duration".to_string(), "2h".to_string());
        assert_ne!(h1, hash_data(&id, &data));
    }
}
