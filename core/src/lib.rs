//! kumaco's decision core: from what the cluster shows and the clock to what kumaco
//! should write and post. Pure: no kube, k8s-openapi, tokio, HTTP or files; the `kumaco`
//! crate (the shell) watches, writes and serves around it. Everything here is tested
//! with plain `#[test]`s and property tests.
//!
//! The Go-compatible parsers, exact to the Go code they imitate (differential tests in
//! `tests/diff_*.rs` run the Go originals as oracles):
//! - [`duration`]: Go `time.ParseDuration` and `Duration.String()`.
//! - [`selector`]: Kubernetes label selectors as `k8s.io/apimachinery/pkg/labels` parses
//!   and matches them, and `LabelSelector` objects (a window's `nodeSelector` in YAML or
//!   JSON) as `metav1.LabelSelectorAsSelector` converts them.
//! - [`schedule`]: cron schedules as robfig/cron v3 `ParseStandard` and `Next` compute
//!   them, plus kumaco's extensions (one-shots, epoch-anchored `@every`, DST anomalies).
//!
//! Windows and decisions:
//! - [`window`]: a validated window ConfigMap; active occurrences, spans, next edges, lint;
//!   [`limits`]: how much of a window ConfigMap kumaco reads.
//! - [`conditions`]: kumaco's condition type and the `lastTransitionTime` rule;
//!   [`reasons`]: every reason kumaco writes, defined once.
//! - [`decision`]: a node's verdict from the windows; `UnderMaintenance`,
//!   `MaintenancePlanned`, giving conditions up.
//! - [`in_progress`]: which nodes may be disrupted now (`MaintenanceInProgress`).
//! - [`gates`]: the health gates' verdicts that hold a start (alerts, object checks);
//!   [`budgets`]: PodDisruptionBudgets as a drain meets them, with shared headroom;
//!   [`alerts`]: which firing alerts and query series hold, and whose starts.
//! - [`peers`]: other kumaco instances on the same nodes: live or stale, claims, the
//!   contest bound.
//! - [`announce`]: which window events should exist, under names fixed by what they
//!   report; [`node_events`]: the same for events on the Nodes; [`fingerprint`]: the
//!   stable hashes behind those names.
//! - [`pass`]: the whole pass, from windows, nodes, pending writes, peers and the clock
//!   to the node writes and events due.
//! - [`forecast`]: when each node needing maintenance will start and end, the brain's
//!   own decisions played forward; the durations it assumes, learned from the nodes.
//! - [`silence`]: which Alertmanager silences this instance should hold for the nodes in
//!   maintenance, and the actions (create, extend, expire) on the ones listed.
//! - [`notice`]: one maintenance transition as people are told of it, worded for a chat
//!   (a title, a few lines, a digest of many), every text bounded; [`transitions`]: which
//!   of them the cluster shows now, under ids fixed by what they report.
//!
//! For tests only (the `testing` feature): [`testing`], helpers the core's and the
//! shell's tests share.

#![forbid(unsafe_code)]

pub mod alerts;
pub mod announce;
pub mod budgets;
pub mod conditions;
pub mod decision;
pub mod duration;
pub mod fingerprint;
pub mod forecast;
pub mod gates;
pub mod in_progress;
pub mod limits;
pub mod node_events;
pub mod notice;
pub mod pass;
pub mod peers;
pub mod reasons;
pub mod schedule;
pub mod selector;
pub mod silence;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod transitions;
pub mod window;
