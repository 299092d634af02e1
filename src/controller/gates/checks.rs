//! The object checks (`--block-unless`): Kubernetes objects watched, each checked
//! against a CEL expression; while one does not hold, no node starts
//! (`HealthCheckFailed`), and a maintenance in progress goes on.
//!
//! Each check's objects are found by discovery (the kind in its API version, and whether
//! it is namespaced), listed and watched (by name, or by label selector), and kept
//! without their `managedFields`. An object is evaluated when it changes (and after each
//! list), never per pass: its outcome is kept beside it until the watch replaces it. The
//! verdict, recorded in the check's [`Source`], is a function of the watched objects
//! alone, so a restarted kumaco holds exactly when one that never stopped would.
//!
//! What the cluster may change under a check (its CustomResourceDefinition deleted or
//! not installed yet, a right revoked, the kind's scope) holds every start with
//! `GateUnavailable` naming the check and the answer, and is retried: it never stops
//! kumaco.
//!
//! What fails a check, and what the nodes then show: the expression is false; it cannot
//! be evaluated (a field absent, a wrong type: the CEL error, also logged); its result is
//! not a bool; the named object does not exist. Every object a selector matches must
//! hold; none matching holds.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::TypeMeta;
use kube::discovery::{self, Scope};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::super::Connect;
use super::super::sources::{Hints, Reading, Source, Sources};
use super::super::watch::{LIST_PAGE, ListState, WATCHED, Watch, drive};
use super::super::writer::Backoff;
use crate::conditions::bounded;
use crate::config::gates::{OBJECT_VARIABLE, ObjectCheck, Target};
use crate::gates::{Failure, Gate, Hold, SourceError, Verdict};
use crate::metrics::Metrics;
use crate::reasons;

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
                    metrics.gates.read(
                        Gate::ObjectChecks,
                        error.map_or(Ok(()), |_| Err(Failure::Invalid)),
                    );
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

/// Why a check's objects cannot be found, as the node and the deployer should read it.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(
        "the API server serves no kind {kind} in {api_version} (is its \
         CustomResourceDefinition installed?)"
    )]
    NotServed { kind: String, api_version: String },
    #[error("discovering kind {kind} in {api_version}: {error}")]
    Discovery {
        kind: String,
        api_version: String,
        error: String,
        failure: Failure,
    },
    #[error("{kind} is namespaced: name its namespace ({example})")]
    NeedsNamespace { kind: String, example: &'static str },
    #[error("{kind} is cluster-scoped: name no namespace")]
    ClusterScoped { kind: String },
}

impl CheckError {
    fn failure(&self) -> Failure {
        match self {
            CheckError::NotServed { .. } => Failure::NotFound,
            CheckError::Discovery { failure, .. } => *failure,
            CheckError::NeedsNamespace { .. } | CheckError::ClusterScoped { .. } => {
                Failure::Invalid
            }
        }
    }
}

/// How long to wait before discovering a check's kind again, after `failures` failures
/// in a row: doubling from [`FIRST_DISCOVERY_RETRY`] to [`MAX_DISCOVERY_RETRY`].
fn discovery_retry(failures: u32) -> std::time::Duration {
    let doublings = failures.saturating_sub(1).min(5);
    (FIRST_DISCOVERY_RETRY * (1 << doublings)).min(MAX_DISCOVERY_RETRY)
}

/// The first wait before a kind not served is looked for again.
const FIRST_DISCOVERY_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// The longest wait between two discoveries of a kind not served: a
/// CustomResourceDefinition installed later is found within it.
const MAX_DISCOVERY_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts one task per check, each a source of its own: it finds the check's kind by
/// discovery (again and again while the API server does not serve it: a
/// CustomResourceDefinition installed later is found), watches the objects and
/// evaluates them when they change. What cannot be found or read holds every start
/// (`GateUnavailable`, naming the check and the answer); nothing here stops kumaco.
/// Returns each check's list and source, for the fence.
pub fn spawn(
    client: &Client,
    connect: &Connect,
    checks: &[ObjectCheck],
    watch_timeout_secs: u32,
    sources: &Sources,
    metrics: &Arc<Metrics>,
) -> Vec<(ListState, Source)> {
    checks
        .iter()
        .map(|check| {
            let source = sources.add(
                Gate::ObjectChecks,
                format!("the objects of --block-unless '{}'", check.objects()),
                Hints {
                    forbidden: Some(
                        "kumaco needs `get list watch` on them (the chart grants it with \
                         inProgress.objectChecks; kustomize: a rule of your own, \
                         docs/health-gates.md)"
                            .into(),
                    ),
                    not_found: None,
                },
                WATCHED,
            );
            let lists = ListState::default();
            tokio::spawn(run(
                client.clone(),
                connect.clone(),
                check.clone(),
                watch_timeout_secs,
                lists.clone(),
                source.clone(),
                metrics.clone(),
            ));
            (lists, source)
        })
        .collect()
}

/// One check: its kind found, its objects watched and evaluated at every change.
async fn run(
    client: Client,
    connect: Connect,
    check: ObjectCheck,
    watch_timeout_secs: u32,
    lists: ListState,
    source: Source,
    metrics: Arc<Metrics>,
) {
    let mut failures = 0;
    let resource = loop {
        match resource(&client, &check).await {
            Ok(resource) => break resource,
            Err(e) => {
                if failures == 0 {
                    warn!(check = %check.spec, error = %e,
                          "an object check's kind cannot be found: no node starts until it is; trying again");
                }
                lists.set_failing(true);
                source.failed(
                    SourceError {
                        failure: e.failure(),
                        message: e.to_string(),
                    },
                    Timestamp::now(),
                );
                failures += 1;
                tokio::time::sleep(discovery_retry(failures)).await;
            }
        }
    };
    if failures > 0 {
        info!(check = %check.spec, "the object check's kind is served now");
    }
    let changed = Arc::new(Notify::new());
    let config = watch_config(&check, watch_timeout_secs);
    let store = spawn_watch(
        &client, &connect, &check, resource, config, &changed, lists, &source,
    );
    let mut watched = Watched {
        check,
        store,
        evaluated: Vec::new(),
        published: None,
    };
    if watched.store.wait_until_ready().await.is_err() {
        return;
    }
    let env = Arc::new(cel::Env::stdlib());
    loop {
        let notified = changed.notified();
        let hold = watched.refresh(&env, &metrics);
        source.read(
            Reading::Verdict(Verdict {
                cluster: hold,
                nodes: BTreeMap::new(),
            }),
            Timestamp::now(),
        );
        notified.await;
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
        .map_err(|error| match &error {
            // A group the API server does not serve, or a kind its group lacks.
            kube::Error::Discovery(_) => CheckError::NotServed {
                kind: check.kind.clone(),
                api_version: check.api_version.clone(),
            },
            e if crate::kubeclient::failure(e) == Failure::NotFound => CheckError::NotServed {
                kind: check.kind.clone(),
                api_version: check.api_version.clone(),
            },
            e => CheckError::Discovery {
                kind: check.kind.clone(),
                api_version: check.api_version.clone(),
                error: crate::kubeclient::describe(e),
                failure: crate::kubeclient::failure(e),
            },
        })?;
    match (capabilities.scope, &check.namespace) {
        (Scope::Namespaced, None) => Err(CheckError::NeedsNamespace {
            kind: check.kind.clone(),
            example: match check.target {
                Target::Name(_) => "NAMESPACE/NAME",
                Target::Selector(_) => "NAMESPACE -l SELECTOR",
            },
        }),
        (Scope::Cluster, Some(_)) => Err(CheckError::ClusterScoped {
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

/// Starts the watch of one check's objects, waking `changed` at every change.
#[allow(clippy::too_many_arguments)]
fn spawn_watch(
    client: &Client,
    connect: &Connect,
    check: &ObjectCheck,
    resource: ApiResource,
    config: watcher::Config,
    changed: &Arc<Notify>,
    lists: ListState,
    source: &Source,
) -> Store<DynamicObject> {
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
    let watch = Watch {
        what: "object checks",
        lists,
        connect: connect.clone(),
        wake: changed.clone(),
        metrics: None,
        source: Some(source.clone()),
    };
    // Every change of an object is one the expression may read.
    let relevant = |_: &watcher::Event<DynamicObject>, _: &Store<DynamicObject>| true;
    tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
    store
}

#[cfg(test)]
mod tests;
