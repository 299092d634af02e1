//! One pass executed: from the caches and the clock through [`crate::pass`] (with the
//! gates' inputs, [`super::gated_pass`]) to the node writes, the events and the silences,
//! by a replica that may write (a dry run logs them instead); and when to run again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;
use kube::runtime::reflector::Store;

use super::events::Poster;
use super::fence::{Access, Fence};
use super::gated_pass::{Beside, Inputs, Passed, pass_with_gates, views};
use super::gates::budgets::BudgetGate;
use super::shadow::Shadow;
use super::sources::{NodesInScope, Sources};
use super::windows::WindowCache;
use super::writer::NodeWriter;
use super::{Connect, forecast, notifier, pods, report, silences};
use crate::config::Settings;
use crate::leader::Leadership;
use crate::metrics::Metrics;
use crate::node::SlimNode;
use crate::node_events;
use crate::pass::{self, Rules};
use crate::peer_leases::PeerLeases;

/// Most node writes one pass sends (a few rounds of the writer's concurrency, well under
/// a second here), ends of maintenance first ([`pass::first_writes`]): a window edge over
/// thousands of nodes is written by several passes, and an end that comes due meanwhile
/// (a node back from its reboot) waits at most for one such round of writes.
const MAX_WRITES_PER_PASS: usize = 128;

/// How long after a failed pod list the pass that needs it runs again.
const POD_LIST_RETRY: jiff::SignedDuration = jiff::SignedDuration::from_secs(5);

/// What a pass says of the loop: when to run again by the clock, or to exit.
pub(super) enum Step {
    Next(Option<Timestamp>),
    ConfigChangedExit,
}

/// What the loop keeps between passes: the caches of the cluster, the writers (their
/// pending writes and backoff), the gates' sources. A pass decides from what these show
/// now, never from what an earlier pass saw.
pub(super) struct Shell {
    pub(super) connect: Connect,
    pub(super) leadership: Leadership,
    pub(super) settings: Settings,
    pub(super) rules: Rules,
    pub(super) metrics: Arc<Metrics>,
    pub(super) nodes: Store<SlimNode>,
    pub(super) windows: WindowCache,
    /// One store per `--block-pod-selector`.
    pub(super) pods: Vec<Store<pods::SlimPod>>,
    pub(super) fence: Fence,
    pub(super) writer: NodeWriter,
    pub(super) events: Poster,
    /// `Some` with `--node-events`.
    pub(super) node_events: Option<Poster>,
    pub(super) peers: PeerLeases,
    pub(super) shadow: Shadow,
    pub(super) contests: report::Contests,
    pub(super) forecaster: forecast::Forecaster,
    /// `Some` with `--alertmanager-url` (and `--silences`, the default).
    pub(super) silencer: Option<silences::Silencer>,
    /// The notifications (none in a dry run without sinks).
    pub(super) notifier: Option<notifier::Notifier>,
    /// `Some` with `--pod-disruption-budgets`.
    pub(super) budgets: Option<BudgetGate>,
    /// The latest outcome of every gate's source.
    pub(super) sources: Sources,
}

impl Shell {
    /// One pass: from the caches and the clock to the writes and events, executed if
    /// this replica may write. Returns when to wake up next by the clock.
    pub(super) async fn reconcile(&mut self) -> Step {
        let now = Timestamp::now();
        if self.windows.load(&self.metrics, now) && self.settings.exit_on_config_change {
            return Step::ConfigChangedExit;
        }
        let cached = self.nodes.state();
        let manager = self.settings.field_manager.clone();
        let pods = pods::by_node(&self.pods);
        // Whether this replica may write now (a dry run decides as if it did): only
        // then are pods listed for the PodDisruptionBudget gate.
        let term = if self.settings.dry_run {
            None
        } else {
            self.writing_term()
        };
        let decides = self.settings.dry_run || term.is_some();
        let sets = self
            .settings
            .gates
            .alerts
            .as_ref()
            .map_or(&[][..], |a| a.sets.as_slice());
        let (holds, gates_change) = self.sources.holds(
            &NodesInScope {
                nodes: &cached,
                scope: &self.settings.node_selector,
                sets,
            },
            now,
        );
        let peers = self.peers.snapshot();
        let inputs = Inputs {
            rules: &self.rules,
            windows: &self.windows,
            pending: &self.writer.pending,
            peers: &peers,
            cached: &cached,
            manager: &manager,
            blocking: &pods,
            holds: &holds,
            now,
        };
        let Passed {
            outcome,
            drains,
            holds,
            list_failed,
        } = pass_with_gates(&inputs, self.budgets.as_mut(), decides).await;
        let beside = Beside {
            blocking: &pods,
            holds: &holds.nodes,
            drains: &drains,
        };
        self.peers.want(&outcome.leases, &outcome.refresh);
        let existing: HashSet<&str> = cached
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.writer.forget(&outcome.settled, &existing);
        report::counts(&self.metrics, &outcome);
        self.forecaster.maybe_start(
            self.rules.in_progress.as_ref(),
            &self.rules.node_selector,
            &cached,
            &pods,
            &holds,
            &self.windows,
            &self.metrics,
            now,
        );
        self.contests.log(
            &outcome.contested,
            &outcome.deferred,
            self.settings.resync_interval,
        );

        let mut could_write = false;
        let mut left_for_next_pass = false;
        if self.settings.dry_run {
            self.shadow.would_write(
                outcome.writes,
                views(&cached, &manager, &beside),
                &mut self.writer.pending,
                &self.metrics,
                now,
            );
            // After the would-be writes: no watch echo will wake another pass to see them.
            let node_events = if self.node_events.is_some() {
                node_events::due_now(
                    views(&cached, &manager, &beside),
                    Some(&self.writer.pending),
                    &outcome.contested,
                    &manager,
                    now,
                )
            } else {
                Vec::new()
            };
            self.shadow
                .would_post(&outcome.events, &node_events, &self.metrics);
        } else if let Some(term) = term {
            // Before this pass's writes: the task runs beside them.
            could_write = true;
            if let Some(silencer) = &self.silencer {
                silencer.after_pass(true);
            }
            // From the cluster as the cache shows it: this pass's writes get their events
            // in the pass their watch echo wakes.
            let node_events = self.node_events.is_some().then(|| {
                let views = views(&cached, &manager, &beside);
                node_events::due_now(views, None, &outcome.contested, &manager, now)
            });
            let (writes, more) = pass::first_writes(outcome.writes, MAX_WRITES_PER_PASS);
            left_for_next_pass = more;
            self.writer.apply(writes, &self.leadership, term, now).await;
            self.events
                .post(&outcome.events, &self.windows.sources, now)
                .await;
            if let (Some(poster), Some(due)) = (&mut self.node_events, &node_events) {
                poster.post_node_events(due, now).await;
            }
        }
        if let Some(n) = &self.notifier {
            n.after_pass(could_write, &self.windows.sources, &outcome.events);
        }
        // A standby or a leader whose caches predate its term: no silence is changed
        // from them.
        if let Some(silencer) = &self.silencer
            && !could_write
        {
            silencer.after_pass(false);
        }
        let node_retry = self.node_events.as_ref().and_then(Poster::retry_at);
        let retry = [self.writer.retry.at(), self.events.retry_at(), node_retry]
            .into_iter()
            .flatten()
            .min();
        // Writes left for the next pass, or nodes whose pods it did not list yet: it runs
        // at once; after a failed list, a moment later.
        let unlisted = decides
            && self.budgets.is_some()
            && outcome.needs_pods.iter().any(|n| !drains.contains_key(n));
        let again = if unlisted && list_failed {
            Timestamp::now().checked_add(POD_LIST_RETRY).ok()
        } else {
            (left_for_next_pass || unlisted).then(Timestamp::now)
        };
        Step::Next(
            outcome
                .next_edge
                .into_iter()
                .chain(retry)
                .chain(again)
                .chain(gates_change)
                .min(),
        )
    }

    /// Stops what runs beside the passes and must finish before the Lease is released:
    /// the notifications write their record.
    pub(super) async fn stop(&mut self) {
        if let Some(n) = self.notifier.take() {
            n.stop().await;
        }
    }

    /// The current term if this replica may write ([`fence`]); a new client made for the
    /// lists that catch up is the writers' from now on.
    fn writing_term(&mut self) -> Option<Instant> {
        match self.fence.check(&self.leadership, &self.connect) {
            Access::Open(term) => Some(term),
            Access::Closed => None,
            Access::Relisting(client) => {
                self.writer.use_client(client.clone());
                self.events.use_client(client.clone());
                if let Some(b) = &mut self.budgets {
                    b.use_client(client.clone());
                }
                if let Some(poster) = &mut self.node_events {
                    poster.use_client(client);
                }
                None
            }
        }
    }
}
