//! A stand-in for kured's reboot-required reporter, for the long-running harnesses
//! (kumaco-soak, kumaco-chaos): it marks random nodes `RebootRequired=True` at a steady
//! rate and follows the [`RebootAgent`]'s reboots, to know which nodes wait and for how
//! long they waited.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use crate::agent::{REBOOT_REQUIRED, RebootAgent};
use crate::nodes::set_condition;

/// Field manager of the reporter's writes.
pub const REPORTER: &str = "reboot-required-reporter";
/// Marks written at once.
const MARK_CONCURRENCY: usize = 8;

/// How often nodes need a reboot.
#[derive(Clone, Copy, Debug)]
pub struct ReporterSpec {
    /// Each node needs a reboot about this often.
    pub reboot_every: Duration,
    /// The reporter's period: small batches, as updates land on nodes at random moments.
    pub mark_every: Duration,
    /// A node is not marked again for this long after its reboot. The agent tells one
    /// maintenance from the next by `lastTransitionTime`, which has whole seconds:
    /// re-marked within the second of its end, a node's next maintenance would look
    /// already handled and keep a slot forever. (A real node also needs a while before
    /// its next update.)
    pub cooldown: Duration,
}

/// Stands in for kured's reboot-required reporter: every `mark_every` it sets
/// `RebootRequired=True` on a random batch of nodes that need no reboot yet, so many
/// that each node needs one about every
/// `reboot_every`. It also follows the agent's
/// reboots, to know which nodes wait and for how long they waited.
pub struct RebootSource {
    state: Arc<Mutex<SourceState>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
pub struct SourceState {
    /// Nodes marked and not rebooted yet, with the time of the mark.
    pub waiting: HashMap<String, Timestamp>,
    /// When each node's last reboot was reported done.
    pub rebooted: HashMap<String, Timestamp>,
    /// How many of the agent's reboots are accounted for.
    pub reboots_seen: usize,
    pub marks: usize,
    /// Seconds from a mark to its reboot done, per reboot.
    pub waits: Vec<f64>,
    pub errors: usize,
}

impl RebootSource {
    /// Starts marking `names` (the agent's nodes).
    pub fn start(
        client: kube::Client,
        names: Vec<String>,
        agent: Arc<RebootAgent>,
        spec: ReporterSpec,
    ) -> Self {
        let state = Arc::new(Mutex::new(SourceState::default()));
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                let mut ticker = tokio::time::interval(spec.mark_every);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let per_tick = names.len() as f64 * spec.mark_every.as_secs_f64()
                    / spec.reboot_every.as_secs_f64();
                // The fraction of a node owed by earlier ticks, so that the rate holds
                // when it is below one node per tick.
                let mut owed = 0.0;
                loop {
                    ticker.tick().await;
                    owed += per_tick;
                    let batch = owed.floor() as usize;
                    owed -= batch as f64;
                    let batch =
                        state
                            .lock()
                            .unwrap()
                            .pick(&names, &agent.rebooted(), batch, spec.cooldown);
                    let failed: Vec<String> = futures::stream::iter(batch)
                        .map(|name| {
                            let client = client.clone();
                            async move {
                                let res = set_condition(
                                    &client,
                                    &name,
                                    REBOOT_REQUIRED,
                                    "True",
                                    REPORTER,
                                )
                                .await;
                                (name, res)
                            }
                        })
                        .buffer_unordered(MARK_CONCURRENCY)
                        .filter_map(|(name, res)| async move { res.err().map(|_| name) })
                        .collect()
                        .await;
                    let mut state = state.lock().unwrap();
                    for name in failed {
                        state.errors += 1;
                        state.marks -= 1;
                        state.waiting.remove(&name);
                    }
                }
            }
        });
        RebootSource { state, task }
    }

    /// What the reporter has done so far.
    pub fn state(&self) -> MutexGuard<'_, SourceState> {
        self.state.lock().unwrap()
    }

    /// Stops marking and accounts for the reboots done so far; the state stays readable.
    pub async fn stop(&mut self, agent: &RebootAgent) {
        self.task.abort();
        let _ = (&mut self.task).await;
        self.state.lock().unwrap().sync(&agent.rebooted());
    }

    /// Nodes marked and not rebooted yet.
    pub fn waiting(&self) -> usize {
        self.state.lock().unwrap().waiting.len()
    }
}

impl Drop for RebootSource {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SourceState {
    /// Takes the agent's reboots not seen yet into account.
    fn sync(&mut self, rebooted: &[(Timestamp, String)]) {
        for (at, node) in &rebooted[self.reboots_seen.min(rebooted.len())..] {
            if let Some(marked) = self.waiting.remove(node) {
                self.waits.push(at.duration_since(marked).as_secs_f64());
            }
            self.rebooted.insert(node.clone(), *at);
        }
        self.reboots_seen = rebooted.len();
    }

    /// After [`SourceState::sync`], picks up to `count` random nodes to mark among those
    /// neither waiting nor just rebooted, and records them as waiting.
    fn pick(
        &mut self,
        names: &[String],
        rebooted: &[(Timestamp, String)],
        count: usize,
        cooldown: Duration,
    ) -> Vec<String> {
        self.sync(rebooted);
        let now = Timestamp::now();
        let mut eligible: Vec<&String> = names
            .iter()
            .filter(|name| {
                !self.waiting.contains_key(*name)
                    && self.rebooted.get(*name).is_none_or(|at| {
                        now.duration_since(*at).as_secs_f64() >= cooldown.as_secs_f64()
                    })
            })
            .collect();
        let mut batch = Vec::new();
        while batch.len() < count && !eligible.is_empty() {
            let name = eligible.swap_remove(random_below(eligible.len())).clone();
            self.waiting.insert(name.clone(), now);
            batch.push(name);
        }
        self.marks += batch.len();
        batch
    }
}

/// A random index below `n` (> 0). Randomness from std's hasher keys, as
/// `testkit::agent::random_duration` (the harness has no `rand`).
fn random_below(n: usize) -> usize {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let bits = RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed));
    (bits % n as u64) as usize
}
