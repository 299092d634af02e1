//! kumaco: the Kubernetes Maintenance Controller, the I/O shell around the pure core.
//!
//! The core is the crate `kumaco-core` (`core/`): the Go-compatible parsers, windows,
//! the decisions and the pass, with no I/O at all. This crate watches, writes, serves and
//! talks to people; it re-exports the core's modules under the paths its code, its tests
//! and its benches use (`kumaco::pass`, `kumaco::window`, ...).
//!
//! The controller (`kumaco run`):
//! - [`cli`]: the command line; [`config`]: its flags validated into settings;
//!   [`kubeclient`]: how every subcommand finds the API server; [`yaml`]: YAML errors
//!   with their position.
//! - [`controller`]: the loop around the pass: its watches, window cache, fence, one
//!   writer, events, shadow mode and reports.
//! - [`node`]: the part of a Node kumaco reads, decoded without the rest, its labels
//!   shared through [`intern`]; [`configmap`]: a window ConfigMap trimmed to what kumaco
//!   reads.
//! - [`leader`]: leader election on a Lease (only the leader writes); [`peer_leases`]:
//!   reading the Leases of the other instances the nodes show; [`pause`]: the pause
//!   switch (`kumaco pause`), a Lease of its own.
//! - [`clock`]: noticing steps of the wall clock at once; [`tzdata`]: which time zone
//!   database zones are read from (`--tzdata`).
//! - [`metrics`]: Prometheus metrics and the health endpoints; [`telemetry`]: logs.
//!
//! - [`notify`]: the messages of maintenance transitions as they go on the wire: kured
//!   v1's `--notify-url` and message templates, each chat service's payload, CloudEvents.
//!
//! - [`alertmanager`]: Alertmanager's API v2, for the silences kumaco holds
//!   (`--alertmanager-url`; the task is `controller::silences`) and the alerts gate
//!   (`--block-alerts`); [`prometheus`]: Prometheus' queries for the same gate
//!   (`--block-query`); [`http_client`]: the HTTP client both use.
//!
//! For people: [`tools`]: `kumaco validate`, `plan` and `status`.
//!
//! Below both the controller and the tools: [`forecasting`], the forecast as the shell
//! makes it (its inputs read from the cluster, its durations, its runs on the cores).

pub mod alertmanager;
pub mod cli;
pub mod clock;
pub mod config;
pub mod configmap;
pub mod controller;
pub mod forecasting;
pub mod http_client;
pub mod intern;
pub mod kubeclient;
pub mod leader;
pub mod metrics;
pub mod node;
pub mod notify;
pub mod pause;
pub mod peer_leases;
pub mod prometheus;
pub mod telemetry;
pub mod tools;
pub mod tzdata;
pub mod yaml;

// The core's modules, under the paths the shell, the tests and the benches use.
pub use kumaco_core::{
    alerts, announce, budgets, conditions, decision, duration, fingerprint, forecast, gates,
    in_progress, limits, node_events, notice, pass, peers, reasons, schedule, selector, silence,
    transitions, window,
};
