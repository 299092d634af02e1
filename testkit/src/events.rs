//! The `events.k8s.io/v1` Events kumaco posts on window ConfigMaps, read as a maintenance
//! manager reads them (`kubectl get events --field-selector involvedObject.name=NAME`).
//!
//! Events are counted as objects, not by their names, `series` or `deprecatedCount`:
//! kumaco posts each thing it reports once, as one object.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};

/// The events in namespace `ns` about the ConfigMap `name`, oldest first (by
/// `eventTime`, then creation).
pub async fn events_about(client: &kube::Client, ns: &str, name: &str) -> Result<Vec<Event>> {
    events_about_kind(client, ns, "ConfigMap", name).await
}

/// The events in namespace `ns` about the object of `kind` named `name` (a Node's are in
/// `default`), oldest first.
pub async fn events_about_kind(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    name: &str,
) -> Result<Vec<Event>> {
    let list = Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing events in namespace {ns}"))?;
    let mut events: Vec<Event> = list
        .items
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .collect();
    events.sort_by_key(|e| {
        (
            e.event_time.as_ref().map(|t| t.0),
            e.metadata.creation_timestamp.as_ref().map(|t| t.0),
        )
    });
    Ok(events)
}

/// The events of `events` with reason `reason`.
pub fn with_reason<'a>(events: &'a [Event], reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// How many of `events` have reason `reason` (objects, not their count fields).
pub fn count(events: &[Event], reason: &str) -> usize {
    with_reason(events, reason).len()
}

/// Polls (events are few; there is no need for a watch) until at least `at_least` events
/// with `reason` are about ConfigMap `name` in `ns` and `check` holds for one of them, or
/// fails after `timeout` listing what there is. Returns every event about `name` then.
pub async fn wait_for(
    client: &kube::Client,
    ns: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
    check: impl Fn(&Event) -> bool,
) -> Result<Vec<Event>> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let events = events_about(client, ns, name).await?;
        if with_reason(&events, reason).into_iter().any(&check) {
            return Ok(events);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "no matching {reason} event about ConfigMap {ns}/{name} within {timeout:?}; its \
                 events:\n{}",
                summary(&events)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One line per event (time, type, reason, reporting instance, note), for failure
/// messages.
pub fn summary(events: &[Event]) -> String {
    if events.is_empty() {
        return "  (none)".into();
    }
    events
        .iter()
        .map(|e| {
            format!(
                "  {} {} {} by {}: {}",
                e.event_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_else(|| "(no eventTime)".into()),
                e.type_.as_deref().unwrap_or_default(),
                e.reason.as_deref().unwrap_or_default(),
                e.reporting_instance.as_deref().unwrap_or("?"),
                e.note.as_deref().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
