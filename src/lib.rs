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
//! - [`window`]: a validated window ConfigMap; active occurrences and next edges.
//! - [`conditions`]: the node conditions kumaco owns and how their timestamps are kept.
//!
//! Shell:
//! - [`cli`]: the command line.

pub mod cli;
pub mod conditions;
pub mod duration;
pub mod schedule;
pub mod selector;
pub mod window;
