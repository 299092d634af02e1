//! One integration test's slice of an API server: a namespace for its windows, a
//! [`Scope`] for its nodes, and what every controller test does with them. Tests wrap it
//! in a `Cluster` of their own (dereferencing to it) for what only they need, such as
//! starting kumaco (only integration tests of the kumaco package know where its binary
//! is).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, NodeCondition};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::nodes::{condition, create_node, has_status, wait_for_condition};
use crate::time::whole_second;
use crate::{ApiServer, Scope};

/// kumaco's condition, the one most tests watch.
pub const UNDER_MAINTENANCE: &str = "kured.dev/UnderMaintenance";

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
}
