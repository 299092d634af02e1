//! The object checks (`--block-unless`): Kubernetes objects watched, each checked
//! against a CEL expression; while one does not hold, no node starts
//! (`HealthCheckFailed`), and a maintenance in progress goes on.
//!
//! Each check's objects are found by discovery (the kind in its API version, and whether
//! it is namespaced), listed and watched (by name, or by label selector), and kept
//! without their `managedFields`. An object is evaluated when it changes (and after each
//! list), never per pass: its outcome is kept beside it until the watch replaces it. The
//! verdict, published in [`Verdicts`] under [`GATE`], is a function of the watched
//! objects alone, so a restarted kumaco holds exactly when one that never stopped would.
//!
//! What fails a check, and what the nodes then show: the expression is false; it cannot
//! be evaluated (a field absent, a wrong type: the CEL error, also logged); its result is
//! not a bool; the named object does not exist. Every object a selector matches must
//! hold; none matching holds.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchParams};
use kube::core::TypeMeta;
use kube::discovery::{self, Scope};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, oneshot};
use tracing::{info, warn};

use super::super::Connect;
use super::super::watch::{LIST_PAGE, ListState, Watch, drive};
use super::super::writer::Backoff;
use super::{Verdict, Verdicts};
use crate::conditions::bounded;
use crate::config::gates::{OBJECT_VARIABLE, ObjectCheck, Target};
use crate::gates::Hold;
use crate::metrics::Metrics;
use crate::reasons;

/// The gate's name in metrics and [`Verdicts`].
pub const GATE: &str = "object-checks";

/// Most bytes of an expression quoted in a node's message: the error after it must fit
/// in the message's bound.
const QUOTED_EXPRESSION_BYTES: usize = 256;
/// Most bytes of an evaluation error in a node's message (CEL quotes whole values in
/// some errors); the log line has it whole.
const QUOTED_ERROR_BYTES: usize = 512;

/// What one object's evaluation gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Holds,
    False,
    /// The expression could not be evaluated, or gave something other than a bool.
    Error(String),
}

/// Evaluates `program` with `object` as [`OBJECT_VARIABLE`].
pub fn evaluate(
    env: &Arc<cel::Env>,
    program: &cel::Program,
    object: &serde_json::Value,
) -> Outcome {
    let mut context = cel::Context::with_env(env.clone());
    context.add_variable_from_value(OBJECT_VARIABLE, to_cel(object));
    // A panic in the interpreter must not end the task: the verdict would stay as it was.
    match std::panic::catch_unwind(AssertUnwindSafe(|| program.execute(&context))) {
        Ok(Ok(cel::Value::Bool(true))) => Outcome::Holds,
        Ok(Ok(cel::Value::Bool(false))) => Outcome::False,
        Ok(Ok(other)) => Outcome::Error(format!("the result is a {}, not a bool", other.type_of())),
        Ok(Err(e)) => Outcome::Error(e.to_string()),
        Err(_) => Outcome::Error("the CEL interpreter panicked on this object".into()),
    }
}

/// A JSON value as CEL reads it, integers as `int` as Kubernetes' CEL has them: a serde
/// conversion makes non-negative ones `uint`, and `uint - int` is an error.
fn to_cel(value: &serde_json::Value) -> cel::Value {
    use serde_json::Value as J;
    match value {
        J::Null => cel::Value::Null,
        J::Bool(b) => cel::Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => cel::Value::String(Arc::new(s.clone())),
        J::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        J::Object(fields) => fields
            .iter()
            .map(|(k, v)| (k.clone(), to_cel(v)))
            .collect::<HashMap<String, cel::Value>>()
            .into(),
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
fn object_ref(object: &DynamicObject) -> String {
    let name = object.metadata.name.as_deref().unwrap_or_default();
    match object.metadata.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// The check's hold, if it fails, from its objects' outcomes (in the order messages
/// name them).
pub fn hold(check: &ObjectCheck, outcomes: &[(String, &Outcome)]) -> Option<Hold> {
    let expression = bounded(check.expression.clone(), QUOTED_EXPRESSION_BYTES);
    let message = match (&check.target, outcomes) {
        (Target::Name(_), []) => format!("{}: not found", check.objects()),
        (Target::Name(_), [(_, outcome)]) => {
            format!("{}: {expression} {}", check.objects(), detail(outcome)?)
        }
        _ => {
            let failing: Vec<&(String, &Outcome)> = outcomes
                .iter()
                .filter(|(_, o)| **o != Outcome::Holds)
                .collect();
            let (object, outcome) = failing.first()?;
            let of = match &check.target {
                Target::Selector(s) => format!("matching -l {s}"),
                Target::Name(_) => "of that name".into(),
            };
            format!(
                "{} {object} ({} of {} {of} fail): {expression} {}",
                check.kind,
                failing.len(),
                outcomes.len(),
                detail(outcome)?
            )
        }
    };
    Some(Hold {
        reason: reasons::HEALTH_CHECK_FAILED,
        message,
    })
}

/// What a failing outcome says after the expression; `None` for one that holds.
fn detail(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Holds => None,
        Outcome::False => Some("is false".into()),
        Outcome::Error(e) => Some(format!(
            "failed: {}",
            bounded(e.clone(), QUOTED_ERROR_BYTES)
        )),
    }
}

/// One check, its objects as the watch keeps them, and their outcomes.
struct Watched {
    check: ObjectCheck,
    store: Store<DynamicObject>,
    /// The objects last evaluated (by `namespace/name`, in that order) and what they
    /// gave. The store replaces an object it updates, so an object found here (the same
    /// allocation, kept alive by this list) has not changed since.
    evaluated: Vec<(String, Arc<DynamicObject>, Outcome)>,
    /// The hold last published, to log changes only.
    published: Option<Hold>,
}

impl Watched {
    /// Evaluates the objects that changed; the check's hold now.
    fn refresh(&mut self, env: &Arc<cel::Env>, metrics: &Metrics) -> Option<Hold> {
        let mut objects: Vec<(String, Arc<DynamicObject>)> = self
            .store
            .state()
            .into_iter()
            .map(|o| (object_ref(&o), o))
            .collect();
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        let before: HashMap<&str, (&Arc<DynamicObject>, &Outcome)> = self
            .evaluated
            .iter()
            .map(|(at, o, outcome)| (at.as_str(), (o, outcome)))
            .collect();
        let mut evaluated = Vec::with_capacity(objects.len());
        for (at, object) in objects {
            let last = before.get(at.as_str());
            let outcome = match last {
                Some((o, outcome)) if Arc::ptr_eq(o, &object) => (*outcome).clone(),
                _ => {
                    let outcome = match serde_json::to_value(&*object) {
                        Ok(json) => evaluate(env, &self.check.program, &json),
                        Err(e) => Outcome::Error(format!("the object is not JSON: {e}")),
                    };
                    let error = match &outcome {
                        Outcome::Error(e) => Some(e),
                        _ => None,
                    };
                    metrics.gates.read(GATE, error.is_none());
                    // Once per object and error: an object's status may change every
                    // few seconds.
                    if let Some(error) = error
                        && last.is_none_or(|(_, o)| *o != &outcome)
                    {
                        warn!(check = %self.check.spec, object = %at, %error,
                              "an object check could not be evaluated: no node starts while it fails");
                    }
                    outcome
                }
            };
            evaluated.push((at, object, outcome));
        }
        self.evaluated = evaluated;
        let outcomes: Vec<(String, &Outcome)> = self
            .evaluated
            .iter()
            .map(|(at, _, outcome)| (at.clone(), outcome))
            .collect();
        let hold = hold(&self.check, &outcomes);
        if hold != self.published {
            match &hold {
                Some(h) => warn!(check = %self.check.spec, message = %h.message,
                                 "an object check fails: no node starts"),
                None => info!(check = %self.check.spec, "the object check holds"),
            }
            self.published = hold.clone();
        }
        hold
    }
}

/// Why the checks cannot start, as the deployer should read it.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(
        "--block-unless '{spec}': the API server serves no kind {kind} in {api_version} (is \
         its CustomResourceDefinition installed?): {error}"
    )]
    Discovery {
        spec: String,
        kind: String,
        api_version: String,
        error: kube::Error,
    },
    #[error("--block-unless '{spec}': {kind} is namespaced: name its namespace ({example})")]
    NeedsNamespace {
        spec: String,
        kind: String,
        example: &'static str,
    },
    #[error("--block-unless '{spec}': {kind} is cluster-scoped: name no namespace")]
    ClusterScoped { spec: String, kind: String },
    #[error(
        "--block-unless '{spec}' cannot {verb} {resource}{place}: {error}. kumaco needs `get \
         list watch` on {resource}{place} (the chart grants it with inProgress.objectChecks; \
         kustomize: a rule of your own, docs/health-gates.md)"
    )]
    Access {
        spec: String,
        verb: &'static str,
        resource: String,
        place: String,
        error: kube::Error,
    },
}

/// The checks' watches, as the controller waits for them.
pub struct ObjectChecks {
    /// One per check, for the fence: a new leader writes only from lists asked for in
    /// its term.
    pub lists: Vec<ListState>,
    first: Option<oneshot::Receiver<()>>,
}

impl ObjectChecks {
    /// Finds each check's kind, asks once for what it reads (so that a missing right or
    /// a kind the API server does not serve stops kumaco at start-up, naming it), and
    /// starts the watches and the task that evaluates them. No checks: nothing.
    pub async fn start(
        client: &Client,
        connect: &Connect,
        checks: &[ObjectCheck],
        watch_timeout_secs: u32,
        wake: Arc<Notify>,
        verdicts: Verdicts,
        metrics: Arc<Metrics>,
    ) -> Result<ObjectChecks, CheckError> {
        if checks.is_empty() {
            return Ok(ObjectChecks {
                lists: Vec::new(),
                first: None,
            });
        }
        let changed = Arc::new(Notify::new());
        let mut watched = Vec::new();
        let mut lists = Vec::new();
        for check in checks {
            let resource = resource(client, check).await?;
            let config = watch_config(check, watch_timeout_secs);
            check_access(client, check, &resource, &config).await?;
            let (store, list) = spawn_watch(client, connect, check, resource, config, &changed);
            lists.push(list);
            watched.push(Watched {
                check: check.clone(),
                store,
                evaluated: Vec::new(),
                published: None,
            });
        }
        let (first, first_rx) = oneshot::channel();
        tokio::spawn(evaluate_on_change(
            watched, changed, verdicts, wake, metrics, first,
        ));
        Ok(ObjectChecks {
            lists,
            first: Some(first_rx),
        })
    }

    /// Waits until every check's objects are listed and evaluated, and the verdict is
    /// published: no start before it is known. `Err` if a watch ended.
    pub async fn first_verdict(&mut self) -> Result<(), oneshot::error::RecvError> {
        match self.first.take() {
            Some(first) => first.await,
            None => Ok(()),
        }
    }
}

/// The check's kind as the API server serves it, in the scope the check names.
async fn resource(client: &Client, check: &ObjectCheck) -> Result<ApiResource, CheckError> {
    let (group, version) = check
        .api_version
        .split_once('/')
        .unwrap_or(("", &check.api_version));
    let gvk = GroupVersionKind::gvk(group, version, &check.kind);
    let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|error| CheckError::Discovery {
            spec: check.spec.clone(),
            kind: check.kind.clone(),
            api_version: check.api_version.clone(),
            error,
        })?;
    match (capabilities.scope, &check.namespace) {
        (Scope::Namespaced, None) => Err(CheckError::NeedsNamespace {
            spec: check.spec.clone(),
            kind: check.kind.clone(),
            example: match check.target {
                Target::Name(_) => "NAMESPACE/NAME",
                Target::Selector(_) => "NAMESPACE -l SELECTOR",
            },
        }),
        (Scope::Cluster, Some(_)) => Err(CheckError::ClusterScoped {
            spec: check.spec.clone(),
            kind: check.kind.clone(),
        }),
        _ => Ok(resource),
    }
}

fn api(client: Client, check: &ObjectCheck, resource: &ApiResource) -> Api<DynamicObject> {
    match &check.namespace {
        Some(ns) => Api::namespaced_with(client, ns, resource),
        None => Api::all_with(client, resource),
    }
}

/// The watch of the check's objects: by name (a field selector) or label selector.
fn watch_config(check: &ObjectCheck, watch_timeout_secs: u32) -> watcher::Config {
    let config = watcher::Config::default()
        .page_size(LIST_PAGE)
        .timeout(watch_timeout_secs);
    match &check.target {
        Target::Name(name) => config.fields(&format!("metadata.name={name}")),
        Target::Selector(selector) => config.labels(&selector.to_string()),
    }
}

/// Lists and watches once as the watch will: a refusal stops kumaco, naming the right.
/// Other errors pass: the watch retries them.
async fn check_access(
    client: &Client,
    check: &ObjectCheck,
    resource: &ApiResource,
    config: &watcher::Config,
) -> Result<(), CheckError> {
    let forbidden =
        |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 401 || s.code == 403);
    let refused = |verb: &'static str, error: kube::Error| CheckError::Access {
        spec: check.spec.clone(),
        verb,
        resource: match resource.group.as_str() {
            "" => resource.plural.clone(),
            group => format!("{}.{group}", resource.plural),
        },
        place: check
            .namespace
            .as_ref()
            .map_or_else(String::new, |ns| format!(" in namespace {ns}")),
        error,
    };
    let api = api(client.clone(), check, resource);
    let mut list = ListParams::default().limit(1);
    let mut watch = WatchParams::default().timeout(1);
    if let Some(fields) = &config.field_selector {
        list = list.fields(fields);
        watch = watch.fields(fields);
    }
    if let Some(labels) = &config.label_selector {
        list = list.labels(labels);
        watch = watch.labels(labels);
    }
    let version = match api.list(&list).await {
        Err(error) if forbidden(&error) => return Err(refused("list", error)),
        Err(_) => return Ok(()),
        Ok(listed) => listed.metadata.resource_version.unwrap_or_default(),
    };
    // The answer's headers carry a refusal; the events themselves are not read.
    match api.watch(&watch, &version).await {
        Err(error) if forbidden(&error) => Err(refused("watch", error)),
        _ => Ok(()),
    }
}

/// Starts the watch of one check's objects, waking `changed` at every change.
fn spawn_watch(
    client: &Client,
    connect: &Connect,
    check: &ObjectCheck,
    resource: ApiResource,
    config: watcher::Config,
    changed: &Arc<Notify>,
) -> (Store<DynamicObject>, ListState) {
    let cache = reflector::store::Writer::new(resource.clone());
    let store = cache.as_reader();
    let check = check.clone();
    let types = TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    };
    let stream = move |client: Client| {
        let types = types.clone();
        watcher(api(client, &check, &resource), config.clone())
            .backoff(Backoff::default())
            .modify(move |object| {
                object.metadata.managed_fields = None;
                // Lists leave them out of their items; an expression may read them.
                object.types = Some(types.clone());
            })
    };
    let lists = ListState::default();
    let watch = Watch {
        what: "object checks",
        lists: lists.clone(),
        connect: connect.clone(),
        wake: changed.clone(),
        metrics: None,
    };
    // Every change of an object is one the expression may read.
    let relevant = |_: &watcher::Event<DynamicObject>, _: &Store<DynamicObject>| true;
    tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
    (store, lists)
}

/// The task: once every check's objects are listed, and again after each change,
/// evaluates what changed and publishes the verdict, waking a pass when it changed.
async fn evaluate_on_change(
    mut watched: Vec<Watched>,
    changed: Arc<Notify>,
    verdicts: Verdicts,
    wake: Arc<Notify>,
    metrics: Arc<Metrics>,
    first: oneshot::Sender<()>,
) {
    for w in &watched {
        if w.store.wait_until_ready().await.is_err() {
            return;
        }
    }
    let env = Arc::new(cel::Env::stdlib());
    let mut first = Some(first);
    loop {
        let cluster: Vec<Hold> = watched
            .iter_mut()
            .filter_map(|w| w.refresh(&env, &metrics))
            .collect();
        metrics.gates.holding(GATE, !cluster.is_empty());
        let verdict = Verdict {
            cluster,
            nodes: BTreeMap::new(),
        };
        if verdicts.set(GATE, verdict) {
            wake.notify_one();
        }
        if let Some(first) = first.take() {
            let _ = first.send(());
        }
        changed.notified().await;
    }
}

#[cfg(test)]
mod tests;
