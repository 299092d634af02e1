//! Test harness for kumaco (dev-only).
//!
//! - [`ApiServer`]: a real kube-apiserver + etcd on loopback (built from `testenv/`).
//! - [`Scope`]: keeps a test's nodes apart from other tests' on a shared API server.
//! - [`nodes`]: create Nodes with labels and conditions (no kubelet), and wait for
//!   conditions with a deadline.
//! - [`oracle`]: the real Go code kumaco's parsers must agree with.
//! - [`fleet`]: realistic nodes in bulk and kumaco as a measured process, for the scale
//!   harnesses.
//! - [`faultproxy`]: a TCP proxy between kumaco and the API server that injects network
//!   faults (latency, stalls, resets, blackholes, partitions) at run time.
//! - [`events`]: the events.k8s.io/v1 Events about a window ConfigMap, by reason.
//! - [`churn`]: foreign changes to nodes at a set rate (a stand-in kubelet and another
//!   controller), for the scale harnesses.
//! - [`chaos`]: kumaco-chaos's seeded fault schedule, fake clock, planner reference and
//!   independent checker.
//! - [`cluster`]: one integration test's namespace and node scope, with window and node
//!   helpers, and the kumaco processes (single or leader-electing replicas) it runs.
//! - [`files`]: the repository's files (read, copied) for the tests of what it ships.
//! - [`reporter`]: a stand-in reboot-required reporter at a steady rate, for the
//!   long-running harnesses.
//! - [`manifests`]: YAML manifests read and applied as `kubectl apply --server-side`
//!   does, for the deploy tests.
//! - [`realcluster`]: the test API server with a controller-manager, a scheduler and one
//!   real node (kubelet, containerd, runc), for Pods run as written; [`nodebins`] builds
//!   its programs.
//! - [`alertmanager`]: a real Alertmanager on loopback, killed and restarted at will,
//!   its silences and alerts read through its API; [`prometheus`]: a real Prometheus
//!   scraping a `/metrics` endpoint the test serves and changes; [`served`]: what both
//!   are (a program on a loopback port kept across restarts); [`http`]: the requests
//!   they, and kumaco's endpoints, are read with; [`receiver`]: an HTTP
//!   receiver that records what kumaco's notifications post and answers as a test says.
//! - [`process`]: the one owner of every program a test starts: stopped when dropped,
//!   and when the test process dies.
//! - [`workloads`]: the real controller-manager computing PodDisruptionBudgets and
//!   recreating StatefulSet pods, and a stand-in scheduler and kubelet for pods.

pub mod agent;
pub mod alertmanager;
pub mod apiserver;
pub mod chaos;
pub mod churn;
pub mod cluster;
pub mod diff;
pub mod docs;
pub mod events;
pub mod faultproxy;
pub mod files;
pub mod fleet;
pub mod gobuild;
pub mod history;
pub mod hooks;
pub mod http;
pub mod kumaco;
pub mod kured;
pub mod manifests;
pub mod nodebins;
pub mod nodes;
pub mod oracle;
pub mod process;
pub mod prometheus;
pub mod realcluster;
pub mod receiver;
pub mod reporter;
pub mod served;
pub mod time;
pub mod workloads;

pub use apiserver::{ApiServer, client_from_kubeconfig};

use std::sync::atomic::{AtomicU32, Ordering};

/// The label key every test node carries, with a value unique to its test.
pub const SCOPE_LABEL: &str = "test.kumaco.dev/scope";

/// A test's own slice of a shared cluster: a unique label value that all its nodes carry,
/// and a matching selector to confine watchers and kumaco (`--node-selector`) to them.
#[derive(Clone, Debug)]
pub struct Scope {
    value: String,
}

impl Scope {
    /// `name` is a short test name; a process- and call-unique suffix is added.
    pub fn new(name: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let mut value = format!("{name}-{}-{n}", std::process::id());
        value.truncate(63);
        Scope { value }
    }

    /// The label value.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// `test.kumaco.dev/scope=<value>`.
    pub fn selector(&self) -> String {
        format!("{SCOPE_LABEL}={}", self.value)
    }

    /// A node name inside this scope (node names are cluster-wide).
    pub fn node_name(&self, short: &str) -> String {
        format!("{}-{short}", self.value)
    }
}
