//! The controller: the I/O around [`crate::pass`]. It watches window ConfigMaps and
//! Nodes, calls the pass on what the watches show and the clock, applies the node writes
//! it returns, creates the events it says should exist, and records its own writes until
//! the cache shows them.
//!
//! One loop, no per-object workers: every wake-up (a watch event, the timer at the next
//! window edge, a leadership change, the periodic resync) runs one pass. Nothing decided
//! here depends on what this process saw before; what it keeps between passes is a cache
//! of the cluster and retry timers. Its parts:
//!
//! - `run`: the loop, one pass per wake-up, and `start`: the watches and the gates'
//!   tasks spawned, their first lists awaited, the shell the passes run in assembled;
//! - `reconcile`: one pass executed (its writes, events and silences) and when to run
//!   again, and `gated_pass`: the pass with the gates' holds and the pods the
//!   PodDisruptionBudget gate lists for it;
//! - [`watch`]: the watches and their caches, lists, resumes and relevance;
//! - [`windows`]: the window cache (parsed windows, the configuration hash, deletions);
//! - [`pods`]: the pods that keep a node from starting (`--block-pod-selector`);
//! - [`fence`]: a new leader writes only from lists asked for in its term;
//! - [`writer`]: the one writer (node applies; the classification and backoff every
//!   write shares), and [`events`]: creating the events due, by name;
//! - [`shadow`]: `--dry-run`, the pass executed by logging;
//! - [`report`]: the pass's counts and contests, as metrics and log lines;
//! - [`silences`]: with `--alertmanager-url`, the silences held for the nodes in
//!   maintenance, by a task beside the passes that no pass waits for;
//! - [`gates`]: the health gates' sources (the pause, PodDisruptionBudgets, alerts and
//!   queries, object checks), and [`sources`]: every source's latest outcome, and the
//!   holds a pass reads from them by the one failure policy;
//! - [`forecast`]: the forecast behind the `kumaco_forecast_*` gauges, on a blocking
//!   thread beside the passes;
//! - [`notifier`]: the notifications of maintenance transitions, by a task beside the
//!   passes and a sender per sink that no pass waits for.

pub mod events;
pub mod fence;
pub mod forecast;
mod gated_pass;
pub mod gates;
pub mod notifier;
pub mod pods;
mod reconcile;
pub mod report;
mod run;
pub mod shadow;
pub mod silences;
pub mod sources;
mod start;
pub mod watch;
pub mod windows;
pub mod writer;

use std::sync::Arc;

use kube::Client;

pub use run::{Shutdown, run};

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error(transparent)]
    Client(#[from] crate::kubeclient::ClientError),
    #[error(transparent)]
    Alertmanager(#[from] crate::http_client::HttpError),
    #[error(transparent)]
    Gates(#[from] gates::alerts::StartError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("serving metrics/health: {0}")]
    Http(#[from] std::io::Error),
    #[error("notifications: {0}")]
    Notify(#[source] crate::http_client::HttpError),
    #[error("watch stream ended unexpectedly")]
    WatchEnded,
}

/// Makes a client on connections of its own. The controller starts with one, and a new
/// leader whose caches predate its term lists again on a new one: connections the
/// network swallowed, which kept those caches behind, must not hold up the lists meant
/// to catch up, as does a watch whose list got no answer (`watch::LIST_STALL`).
pub type Connect = Arc<dyn Fn() -> Result<Client, crate::kubeclient::ClientError> + Send + Sync>;

/// Why `run` returned without an error.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM or SIGINT.
    Signal,
    /// The window configuration changed and `--exit-on-config-change` is set.
    ConfigChanged,
}
