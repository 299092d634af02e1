//! One integration test's slice of an API server: a namespace for its windows, a
//! [`Scope`] for its nodes, and what every controller test does with them
//! ([`TestCluster`]); with the kumaco it runs there, single or as leader-electing
//! replicas ([`Cluster`]). Only integration tests of the kumaco package know where its
//! binary is: they pass `env!("CARGO_BIN_EXE_kumaco")` in.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, NodeCondition};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::agent::{Observer, REBOOT_REQUIRED, RebootAgent};
use crate::kumaco::{KumacoProcess, Pod, Replica, StartOptions};
use crate::nodes::{
    condition, create_node, has_status, set_condition, set_condition_at, wait_for_condition,
};
use crate::time::whole_second;
use crate::{ApiServer, Scope, events};

/// kumaco's condition, the one most tests watch.
pub const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";

/// `UnderMaintenance=True`: an active window selects the node.
pub const REASON_WINDOW: &str = "MaintenanceWindow";
/// False: no active window selects the node (also `MaintenanceInProgress`'s why-not).
pub const REASON_NO_WINDOW: &str = "NoActiveMaintenanceWindow";
/// False: an active blackout selects the node.
pub const REASON_BLACKOUT: &str = "MaintenanceBlackout";
/// False: the node left the instance's `--node-selector`.
pub const REASON_OUT_OF_SCOPE: &str = "NodeOutOfScope";

/// A test's namespace (named after its scope) and node scope, with an admin client. Holds
/// no reference to the API server, so a test can kill and restart it meanwhile.
pub struct TestCluster {
    pub client: kube::Client,
    pub scope: Scope,
    pub ns: String,
}

impl TestCluster {
    /// A new scope named after `name` and its namespace on `server`.
    pub async fn new(server: &ApiServer, name: &str) -> Self {
        let client = server.client().await.expect("admin client");
        Self::with_client(client, name).await
    }

    /// [`TestCluster::new`] on the API server of `client` (an admin's).
    pub async fn with_client(client: kube::Client, name: &str) -> Self {
        let scope = Scope::new(name);
        // Namespaces are never deleted (no controller-manager to finalize them): the
        // scope's unique value keeps reruns on the same server apart.
        let ns = scope.value().to_string();
        let namespace: Namespace =
            serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {ns}: {e}"));
        TestCluster { client, scope, ns }
    }

    /// Creates a node in this test's scope; returns its name.
    pub async fn node(&self, short: &str, labels: &[(&str, &str)]) -> String {
        let node = create_node(&self.client, &self.scope, short, labels, &[])
            .await
            .unwrap_or_else(|e| panic!("creating node {short}: {e:#}"));
        node.metadata.name.unwrap()
    }

    /// `namespace/name`, as kumaco names a window in messages.
    pub fn window_ref(&self, name: &str) -> String {
        format!("{}/{name}", self.ns)
    }

    /// Creates or replaces window ConfigMap `name` with exactly `data` (server-side apply:
    /// keys left out are removed).
    pub async fn put_window(&self, name: &str, data: &[(&str, &str)]) {
        crate::fleet::put_window(&self.client, &self.ns, "kumaco-tests", name, data)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// A one-shot window from `start`, lasting `duration`, on the nodes of `selector`.
    pub async fn put_one_shot(&self, name: &str, start: Timestamp, duration: &str, selector: &str) {
        let start = start.to_string();
        self.put_window(
            name,
            &[
                ("startTime", &start),
                ("duration", duration),
                ("nodeSelector", selector),
            ],
        )
        .await;
    }

    /// A one-shot window that started a minute ago and lasts an hour: active from the
    /// moment it loads, with no edge during a test.
    pub async fn put_active_window(&self, name: &str, selector: &str) {
        let start = whole_second(Timestamp::now() - SignedDuration::from_secs(60));
        self.put_one_shot(name, start, "1h", selector).await;
    }

    /// The flags confining kumaco to this test: its namespace, its nodes, and a field
    /// manager of its own, as the flag's help asks of instances sharing a cluster (a
    /// restarted process or another replica is the same instance: the same one).
    pub fn scope_args(&self) -> Vec<String> {
        vec![
            format!("--namespace={}", self.ns),
            format!("--node-selector={}", self.scope.selector()),
            format!("--field-manager=kumaco-{}", self.scope.value()),
        ]
    }

    /// Waits until the node's `UnderMaintenance` status is `status` (None: absent); the
    /// condition then (default if absent).
    pub async fn wait_status(
        &self,
        node: &str,
        status: Option<&str>,
        timeout: Duration,
    ) -> NodeCondition {
        let found = wait_for_condition(&self.client, node, UNDER_MAINTENANCE, timeout, |c| {
            has_status(c, status)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
        condition(&found, UNDER_MAINTENANCE)
            .cloned()
            .unwrap_or_default()
    }

    /// The node's `UnderMaintenance` condition now.
    pub async fn condition(&self, node: &str) -> Option<NodeCondition> {
        let node = Api::<Node>::all(self.client.clone())
            .get(node)
            .await
            .unwrap_or_else(|e| panic!("reading node {node}: {e}"));
        condition(&node, UNDER_MAINTENANCE).cloned()
    }

    /// `kured.dev/RebootRequired=True` since `since`, as a reboot reporter sets it (what
    /// orders the candidates).
    pub async fn needs_reboot_since(&self, node: &str, since: Timestamp) {
        set_condition_at(
            &self.client,
            node,
            REBOOT_REQUIRED,
            "True",
            "test-agent",
            since,
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Sets a condition as a node agent would (`lastTransitionTime` now on a change).
    pub async fn set(&self, node: &str, type_: &str, status: &str) {
        set_condition(&self.client, node, type_, status, "test-agent")
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    /// Deletes window ConfigMap `name`.
    pub async fn delete_window(&self, name: &str) {
        Api::<ConfigMap>::namespaced(self.client.clone(), &self.ns)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting window {name}: {e}"));
    }

    /// The events about window ConfigMap `name`, oldest first.
    pub async fn events(&self, name: &str) -> Vec<Event> {
        events::events_about(&self.client, &self.ns, name)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Waits for an event with `reason` about window `name` for which `check` holds; every
    /// event about `name` then.
    pub async fn wait_event(
        &self,
        name: &str,
        reason: &str,
        timeout: Duration,
        check: impl Fn(&Event) -> bool,
    ) -> Vec<Event> {
        events::wait_for(&self.client, &self.ns, name, reason, timeout, check)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// An [`Observer`] of this test's nodes.
    pub async fn observer(&self) -> Observer {
        Observer::start(&self.client, &self.scope.selector())
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// A [`RebootAgent`] for this test's nodes, each reboot pausing between the bounds of
    /// `pause`.
    pub async fn agent(&self, pause: (Duration, Duration)) -> RebootAgent {
        RebootAgent::start(&self.client, &self.scope.selector(), pause)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Who a leader-electing kumaco of this test is: pod `name` in its namespace.
    pub fn pod(&self, name: &str) -> Pod {
        Pod {
            name: name.into(),
            namespace: self.ns.clone(),
        }
    }
}

/// The Lease of a test's replicas ([`Cluster::replica`]), in the test's namespace.
pub const REPLICA_LEASE: &str = "kumaco-test";

/// A [`TestCluster`] and the kumaco it runs: the binary, the admin kubeconfig of the API
/// server, and the flags every kumaco of the test gets (the scope's,
/// [`TestCluster::scope_args`], then those of [`Cluster::with_flags`]).
///
/// It holds no reference to the API server, only the path of its admin kubeconfig (a
/// restart keeps it), so that a test can kill and restart its own server meanwhile.
pub struct Cluster {
    base: TestCluster,
    bin: PathBuf,
    kubeconfig: PathBuf,
    flags: Vec<String>,
}

impl Deref for Cluster {
    type Target = TestCluster;
    fn deref(&self) -> &TestCluster {
        &self.base
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut TestCluster {
        &mut self.base
    }
}

impl Cluster {
    /// A new [`TestCluster`] named after `name` on `server`, whose kumaco is `bin`
    /// (`env!("CARGO_BIN_EXE_kumaco")`).
    pub async fn new(server: &ApiServer, name: &str, bin: impl AsRef<Path>) -> Self {
        let base = TestCluster::new(server, name).await;
        let flags = base.scope_args();
        Cluster {
            base,
            bin: bin.as_ref().to_path_buf(),
            kubeconfig: server.kubeconfig().to_path_buf(),
            flags,
        }
    }

    /// Adds `flags` to those of every kumaco of this test (`--in-progress`, say).
    pub fn with_flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// A single kumaco (leader election off) with the test's flags and `extra`.
    pub async fn kumaco(&self, extra: &[&str]) -> KumacoProcess {
        self.kumaco_with(extra, &StartOptions::default()).await
    }

    /// [`Cluster::kumaco`] with the identity and the way to the API server of
    /// `kubeconfig` (a restricted user, a fault proxy).
    pub async fn kumaco_as(&self, kubeconfig: &Path, extra: &[&str]) -> KumacoProcess {
        let options = StartOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            ..StartOptions::default()
        };
        self.kumaco_with(extra, &options).await
    }

    /// A kumaco with the test's flags and `extra`, started as `options` say.
    pub async fn kumaco_with(&self, extra: &[&str], options: &StartOptions) -> KumacoProcess {
        let mut args: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        self.start_kumaco(&args, options).await
    }

    /// A kumaco with exactly `args` (none of the test's flags: for a test of other
    /// scopes or field managers), started as `options` say.
    pub async fn start_kumaco(&self, args: &[&str], options: &StartOptions) -> KumacoProcess {
        KumacoProcess::start_on(&self.bin, &self.kubeconfig, args, options)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// The holder of the replicas' Lease, once there is one (within 5 s).
    pub async fn lease_holder(&self) -> String {
        let leases = Api::<Lease>::namespaced(self.client.clone(), &self.ns);
        crate::time::poll_for("a holder of the Lease", Duration::from_secs(5), || async {
            leases
                .get_opt(REPLICA_LEASE)
                .await
                .ok()??
                .spec?
                .holder_identity
        })
        .await
    }

    /// A replica with leader election on (Lease [`REPLICA_LEASE`] in this test's
    /// namespace), pod `pod`, the test's flags and `extra`; returns once `/healthz`
    /// answers (a follower is never ready).
    pub async fn replica(&self, pod: &str, extra: &[&str]) -> Replica {
        self.start_replica(pod, extra, None).await
    }

    /// [`Cluster::replica`] with another kubeconfig (one through a fault proxy).
    pub async fn replica_via(&self, pod: &str, extra: &[&str], kubeconfig: PathBuf) -> Replica {
        self.start_replica(pod, extra, Some(kubeconfig)).await
    }

    async fn start_replica(
        &self,
        pod: &str,
        extra: &[&str],
        kubeconfig: Option<PathBuf>,
    ) -> Replica {
        let lease = format!("--lease-name={REPLICA_LEASE}");
        let mut args: Vec<&str> = vec![&lease];
        args.extend(self.flags.iter().map(String::as_str));
        args.extend_from_slice(extra);
        let options = StartOptions {
            leader: Some(self.pod(pod)),
            healthy_is_enough: true,
            kubeconfig,
            ..StartOptions::default()
        };
        let process = KumacoProcess::start_on(&self.bin, &self.kubeconfig, &args, &options)
            .await
            .unwrap_or_else(|e| panic!("replica {pod}: {e:#}"));
        Replica {
            pod: pod.into(),
            process,
        }
    }
}
