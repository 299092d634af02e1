//! The history of one node condition, recorded by a watch of its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::api::Api;
use kube::runtime::watcher;

use crate::nodes::condition;

/// How long [`History::start`] waits for the initial list.
const LIST_TIMEOUT: Duration = Duration::from_secs(15);

/// Every distinct state of one condition type on one node, in order, from the moment
/// [`History::start`] returns (its first entry is the state then; `None` = absent), and
/// how many times the node changed since (any write that changed anything of it).
pub struct History {
    states: Arc<Mutex<Vec<Option<NodeCondition>>>>,
    changes: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl History {
    /// Starts watching `node` and returns once its current state is recorded.
    pub async fn start(client: &kube::Client, node: &str, type_: &str) -> History {
        let api: Api<Node> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={node}"));
        let states = Arc::new(Mutex::new(Vec::new()));
        let changes = Arc::new(AtomicUsize::new(0));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let states = states.clone();
            let changes = changes.clone();
            let type_ = type_.to_string();
            async move {
                let mut listed_tx = Some(listed_tx);
                let mut last_version = None;
                let mut events = watcher(api, config).boxed();
                while let Some(event) = events.next().await {
                    match event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            let version = n.metadata.resource_version.clone();
                            if listed_tx.is_none() && version != last_version {
                                changes.fetch_add(1, Ordering::SeqCst);
                            }
                            last_version = version;
                            let cond = condition(&n, &type_).cloned();
                            let mut states = states.lock().unwrap_or_else(|e| e.into_inner());
                            if states.last() != Some(&cond) {
                                states.push(cond);
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        // The watcher retries on its own; a gap is re-listed.
                        _ => {}
                    }
                }
            }
        });
        tokio::time::timeout(LIST_TIMEOUT, listed)
            .await
            .unwrap_or_else(|_| panic!("listing node {node} for its history timed out"))
            .expect("history watch ended before listing");
        History {
            states,
            changes,
            task,
        }
    }

    /// One history per node.
    pub async fn start_all(client: &kube::Client, nodes: &[String], type_: &str) -> Vec<History> {
        let mut all = Vec::new();
        for node in nodes {
            all.push(History::start(client, node, type_).await);
        }
        all
    }

    /// Ends the watch and waits until it is gone.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }

    /// How many times the node changed since [`History::start`] (each write that changed
    /// anything of it is one new version: without a kubelet, the writers of the test).
    /// A re-list after a watch error counts nothing it did not see change.
    pub fn changes(&self) -> usize {
        self.changes.load(Ordering::SeqCst)
    }

    pub fn states(&self) -> Vec<Option<NodeCondition>> {
        self.states
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// [`History::statuses`] once the last one is `last`, waiting up to `timeout` for
    /// this watch to deliver it: a test that saw a change through another watch or a GET
    /// must not assume this one has it too. After the timeout, whatever it holds.
    pub async fn statuses_ending_with(
        &self,
        last: Option<&str>,
        timeout: Duration,
    ) -> Vec<Option<String>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let statuses = self.statuses();
            let done = statuses.last().is_some_and(|s| s.as_deref() == last);
            if done || tokio::time::Instant::now() >= deadline {
                return statuses;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The statuses, consecutive repeats merged (message changes are not transitions).
    pub fn statuses(&self) -> Vec<Option<String>> {
        let mut statuses: Vec<Option<String>> = Vec::new();
        for state in self.states() {
            let status = state.map(|c| c.status);
            if statuses.last() != Some(&status) {
                statuses.push(status);
            }
        }
        statuses
    }
}

impl Drop for History {
    fn drop(&mut self) {
        self.task.abort();
    }
}
