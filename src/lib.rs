//! kumaco: the Kubernetes Maintenance Controller.
//!
//! The crate is a pure decision core (what a window is, when it is active, which nodes it
//! selects) wrapped by a thin I/O shell (watching the API, writing node conditions).
//!
//! Core, no I/O:
//! - [`duration`]: Go `time.ParseDuration`, exactly.
//! - [`selector`]: Kubernetes label selectors as `k8s.io/apimachinery/pkg/labels` parses
//!   and matches them, exactly.
//! - [`schedule`]: cron schedules as robfig/cron v3 `ParseStandard` and `Next` compute
//!   them, exactly, plus kumaco's extensions.
//!
//! - [`window`]: a validated window ConfigMap; active occurrences, spans, next edges.
//! - [`decision`]: the conditions a node should carry, from windows and the time.
//! - [`in_progress`]: which nodes may be disrupted now (`MaintenanceInProgress`).
//! - [`conditions`]: kumaco's condition type and how timestamps are kept.
//! - [`announce`]: which window events should exist, under names fixed by what they
//!   report; [`fingerprint`]: the stable hashes behind those names.
//! - [`node_events`]: which events on the Nodes should exist (`--node-events`), by
//!   name, from the conditions the cluster shows.
//! - [`pass`]: the whole pass, from what the cluster shows and the clock to the writes
//!   and events due.
//!
//! Shell:
//! - [`cli`]: the command line; [`config`]: its flags validated into settings;
//!   [`kubeclient`]: how every subcommand finds the API server.
//! - [`controller`]: watches, the loop, executing the pass's node writes;
//!   [`clock`]: noticing steps of the wall clock at once;
//!   [`events`]: creating the window events it says should exist, by name.
//! - [`node`]: the part of a Node kumaco reads, decoded without the rest, its labels
//!   shared through [`intern`];
//!   [`configmap`]: a window ConfigMap trimmed to what kumaco reads.
//! - [`leader`]: leader election on a Lease; only the leader writes.
//! - [`metrics`]: Prometheus metrics and the health endpoints; [`telemetry`]: logs.
//! - [`tools`]: `kumaco validate`, `plan` and `status`, the tools for people.
//! - [`tzdata`]: which time zone database zones are read from (`--tzdata`).

pub mod cli;
pub mod clock;
pub mod config;
pub mod configmap;
pub mod controller;
pub mod events;
pub mod intern;
pub mod kubeclient;
pub mod leader;
pub mod metrics;
pub mod node;
pub mod peer_leases;
pub mod telemetry;
pub mod tools;
pub mod tzdata;
pub mod yaml;

// The core's modules, under the paths the shell, the tests and the benches use.
pub use kumaco_core::{
    announce, conditions, decision, duration, fingerprint, in_progress, node_events, pass, peers,
    schedule, selector, window,
};
