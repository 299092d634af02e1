//! The pause switch's source: the pause Lease ([`crate::pause`]) watched, its verdict
//! recorded as the [`Gate::Pause`] gate's. While it exists, no maintenance starts: every
//! node that would wait or start shows `Paused`, with who paused, when and why; what is
//! in progress finishes. A pause that cannot be read holds every start, as any gate's
//! source does.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::super::Connect;
use super::super::sources::{Hints, Reading, Source, Sources};
use super::super::watch::{ListState, WATCHED, Watch, drive};
use super::super::writer::Backoff;
use crate::gates::{Gate, Hold, Verdict};
use crate::pause::{hold, pause_lease};
use crate::peers::LeaseRef;

/// Starts the watch of the pause Lease, recorded in a source of its own. Returns its
/// list and source, for the fence.
pub fn spawn(
    client: &Client,
    connect: &Connect,
    lease: &LeaseRef,
    watch_timeout_secs: u32,
    sources: &Sources,
) -> (ListState, Source) {
    let pause = pause_lease(lease);
    let source = sources.add(
        Gate::Pause,
        format!(
            "the pause switch (Lease {}/{})",
            pause.namespace, pause.name
        ),
        Hints {
            forbidden: Some(format!(
                "kumaco needs `get list watch` on the Lease {} in {} (the chart grants it; \
                 kustomize: deploy/base/rbac-leader-election.yaml)",
                pause.name, pause.namespace
            )),
            not_found: None,
        },
        WATCHED,
    );
    let (store, cache) = reflector::store::<Lease>();
    let config = watcher::Config::default()
        .timeout(watch_timeout_secs)
        .fields(&format!("metadata.name={}", pause.name));
    let namespace = pause.namespace.clone();
    let stream = move |client: Client| {
        watcher(Api::<Lease>::namespaced(client, &namespace), config.clone())
            .backoff(Backoff::default())
    };
    let changed = Arc::new(Notify::new());
    let lists = ListState::default();
    let watch = Watch {
        what: "the pause Lease",
        lists: lists.clone(),
        connect: connect.clone(),
        wake: changed.clone(),
        metrics: None,
        source: Some(source.clone()),
    };
    let relevant = |_: &watcher::Event<Lease>, _: &Store<Lease>| true;
    tokio::spawn(drive(watch, stream, client.clone(), cache, relevant));
    tokio::spawn(publish(store, changed, source.clone()));
    (lists, source)
}

/// Once the Lease is listed, and again after each change: the pause's verdict.
async fn publish(store: Store<Lease>, changed: Arc<Notify>, source: Source) {
    if store.wait_until_ready().await.is_err() {
        return;
    }
    let mut last: Option<Hold> = None;
    loop {
        let notified = changed.notified();
        let hold = store.state().first().map(|lease| hold(lease));
        if hold != last {
            match &hold {
                Some(h) => warn!(message = %h.message, "paused: no maintenance starts"),
                None if last.is_some() => info!("resumed: maintenance may start again"),
                None => {}
            }
            last = hold.clone();
        }
        source.read(
            Reading::Verdict(Verdict {
                cluster: hold,
                nodes: BTreeMap::new(),
            }),
            Timestamp::now(),
        );
        notified.await;
    }
}
