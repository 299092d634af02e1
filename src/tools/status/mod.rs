//! `kumaco status`: the live cluster as kumaco sees it: each window ConfigMap (valid or
//! not, active now, next occurrence, nodes selected), each in-scope node's kumaco
//! conditions, in `kubectl get` style columns, and the instances' pauses and notification
//! sinks. [`report`] computes, [`render`] prints, this module lists from the API server.

pub mod render;
pub mod report;
#[cfg(test)]
mod tests;

use crate::node::names::Names;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

pub use render::{
    NAMES_IN_TABLE, NAMES_IN_WIDE_TABLE, age, contested_table, json_report, nodes_table,
    notifications_json, notifications_table, windows_table,
};
pub use report::{
    KumacoOwner, NextMaintenance, Owners, WindowReport, contested, kumaco_owners, next_maintenance,
    window_reports,
};

use super::nodes::{from_api, in_scope, slim};
use super::{ToolError, WindowRules, format_time};
use crate::cli::{StatusArgs, StatusOutput};
use crate::notify::record::{self, Record};
use crate::peers::{self, LeaseRead, Peers};
use crate::window::Window;

/// How a `kumaco status` that printed its report went.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Everything asked for is shown.
    Complete,
    /// The windows are shown, the nodes not: listing them was forbidden.
    NodesForbidden,
}

impl Outcome {
    /// 0, or 3 when the nodes could not be shown: distinct from 1 (nothing shown) so that
    /// a script can tell a partial report from a failure; `--no-nodes` makes it 0.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Complete => 0,
            Outcome::NodesForbidden => 3,
        }
    }
}

/// Runs `kumaco status` against the API server: the report on `out`, a warning on `err`
/// when it is partial.
pub async fn run(
    args: &StatusArgs,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> Result<Outcome, ToolError> {
    let rules = WindowRules::from_args(&args.window_args)?;
    let node_selector = super::node_selector(&args.node_selector)?;
    let forecast_settings =
        super::forecast::Settings::from_args(&args.forecast, &args.condition_names)?;
    let names = Names::new(
        &args.condition_names.under_maintenance_condition,
        &args.condition_names.in_progress_condition,
        &[],
    )
    .map_err(|e| ToolError::Flag {
        flag: e.flag(),
        message: e.to_string(),
    })?;
    let connection = crate::kubeclient::connect(&args.client).await?;
    let api_error = |action: String, error: kube::Error, hint: &str| {
        super::api_error(&connection, action, error, hint)
    };
    let configmaps = super::list_window_configmaps(
        &connection,
        &args.namespaces,
        &args.window_args.window_selector,
        "status",
    )
    .await?;
    let mut outcome = Outcome::Complete;
    let nodes: Option<Vec<Node>> = if args.no_nodes {
        None
    } else {
        let listed = Api::<Node>::all(connection.client.clone())
            .list(&ListParams::default().labels(&args.node_selector))
            .await;
        match listed {
            Ok(list) => Some(
                list.items
                    .into_iter()
                    // kumaco's own matching is the reference; the server-side filter only
                    // trims.
                    .filter(|n| {
                        node_selector
                            .matches(n.metadata.labels.as_ref().unwrap_or(&Default::default()))
                    })
                    .collect(),
            ),
            // A maintenance manager often may read windows but not nodes: the windows are
            // still worth showing, with what is missing and why said plainly.
            Err(e) if crate::kubeclient::is_forbidden(&e) => {
                let warning = api_error(
                    "list nodes".into(),
                    e,
                    ". kumaco status needs `list nodes` (cluster-wide) to show the nodes \
                     each window selects and their conditions: ask your cluster admin for \
                     it, or pass --no-nodes to show the windows only",
                );
                let _ = writeln!(err, "kumaco status: {warning}");
                outcome = Outcome::NodesForbidden;
                None
            }
            Err(e) => return Err(api_error("list nodes".into(), e, "")),
        }
    };
    let listed = nodes.as_ref().map(|nodes| {
        in_scope(
            &nodes.iter().cloned().map(from_api).collect::<Vec<_>>(),
            &node_selector,
        )
    });
    let now = Timestamp::now();
    let reports = window_reports(&configmaps, &rules, listed.as_deref());
    let windows: Vec<&Window> = reports
        .iter()
        .filter_map(|r| r.window.as_ref().ok())
        .collect();
    let (owners, paused, notified) = match &nodes {
        Some(nodes) => {
            let peers = read_leases(&connection.client, nodes).await;
            let paused =
                read_pauses(&connection.client, peers.leases.keys(), &args.namespaces).await;
            let notified =
                read_notifications(&connection.client, peers.leases.keys(), &args.namespaces).await;
            (kumaco_owners(nodes, &peers, now, &names), paused, notified)
        }
        None => (Owners::new(), Vec::new(), Vec::new()),
    };
    // With --forecast: each forecast node's expected start or end, and the rollout's;
    // a forecast that cannot be made (no durations recorded yet) is said, not fatal.
    let forecast = match (&forecast_settings, &nodes) {
        (Some(settings), Some(nodes)) => {
            let pods = if settings.policy.block_pod_selectors.is_empty() {
                Default::default()
            } else {
                super::forecast::blocking_pods(
                    &connection,
                    &settings.policy.block_pod_selectors,
                    "status",
                )
                .await?
            };
            let slim: Vec<_> = nodes.iter().map(|n| slim(n, &names)).collect();
            let owned: Vec<Window> = windows.iter().map(|w| (*w).clone()).collect();
            Some(settings.forecast(&owned, &slim, &pods, now, FORECAST_HORIZON))
        }
        _ => None,
    };
    let expected = match &forecast {
        Some(Ok(f)) => Some(expected_by_node(f)),
        _ => None,
    };
    let wide = args.output == StatusOutput::Wide;
    let text = if args.output == StatusOutput::Json {
        let mut report = json_report(&reports, nodes.as_deref(), &owners, &windows, now, &names);
        match &forecast {
            Some(Ok(f)) => report["forecast"] = super::forecast::json(f),
            Some(Err(e)) => report["forecast"] = serde_json::json!({ "error": e.to_string() }),
            None => {}
        }
        report["paused"] = paused
            .iter()
            .map(|(lease, message)| {
                serde_json::json!({ "lease": lease.to_string(), "message": message })
            })
            .collect();
        report["notifications"] = notifications_json(&notified);
        let mut text = serde_json::to_string_pretty(&report)
            .map_err(|e| ToolError::Write(std::io::Error::other(e)))?;
        text.push('\n');
        text
    } else {
        let mut text = String::new();
        for (lease, message) in &paused {
            text.push_str(&format!(
                "PAUSED: the instance of Lease {lease}: {message}\n\n"
            ));
        }
        text.push_str(&format!(
            "WINDOWS (as of {})\n{}",
            format_time(now, &TimeZone::UTC),
            windows_table(&reports, now, wide, nodes.is_some()),
        ));
        match (&nodes, &outcome) {
            (Some(nodes), _) => {
                text.push_str(&format!(
                    "\nNODES ({})\n{}",
                    nodes.len(),
                    nodes_table(nodes, &windows, now, wide, expected.as_ref(), &names)
                ));
                let (all, groups) = report::disruption(nodes, &args.group_by, &names);
                text.push_str(&format!(
                    "\nDISRUPTED: in progress or unavailable (NotReady, Ready Unknown, cordoned), as \
                     --max-in-progress counts them\n{}",
                    render::disruption_table(&all, &groups)
                ));
                match &forecast {
                    Some(Ok(f)) => text.push_str(&format!(
                        "\n{}",
                        super::forecast::summary(f, &TimeZone::UTC)
                    )),
                    Some(Err(e)) => text.push_str(&format!("\nFORECAST: cannot be made: {e}\n")),
                    None => {}
                }
                if let Some(table) = contested_table(&owners) {
                    let n = owners.values().filter(|o| contested(o)).count();
                    text.push_str(&format!(
                        "\nCONTESTED ({n}): two live kumaco instances own these nodes' \
                         conditions (docs/instances.md, \"When instances meet\")\n{table}"
                    ));
                }
                if let Some(table) = notifications_table(&notified) {
                    text.push_str(&format!(
                        "\nNOTIFICATIONS: each instance's sinks, as its leader last recorded \
                         them (the Lease <lease name>-notified; docs/notifications.md)\n{table}"
                    ));
                }
            }
            (None, Outcome::NodesForbidden) => text.push_str(
                "\nNODES: not shown, nor how many nodes each window selects: this identity may \
                 not list nodes (see the message on standard error)\n",
            ),
            (None, Outcome::Complete) => {}
        }
        text
    };
    out.write_all(text.as_bytes()).map_err(ToolError::Write)?;
    Ok(outcome)
}

/// The Leases the kumaco field managers on `nodes` name, read with the user's identity;
/// one that cannot be read leaves its instance's liveness unknown.
async fn read_leases(client: &kube::Client, nodes: &[Node]) -> Peers {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: std::collections::BTreeSet<_> = nodes
        .iter()
        // Only the managers are read: no condition's name matters.
        .flat_map(|n| slim(n, &Names::default()).status_owners)
        .filter_map(|o| peers::lease_of(&o.manager))
        .collect();
    let mut peers = Peers::default();
    let now = Timestamp::now();
    for lease in leases {
        let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
        let read = match api.get_opt(&lease.name).await {
            Ok(Some(l)) => crate::peer_leases::lease_read(&l),
            Ok(None) => LeaseRead::Missing,
            Err(_) => continue,
        };
        peers.leases.insert(lease, (read, now));
    }
    peers
}

/// The instances (by their Leases) that are paused, with what their waiting nodes show:
/// those whose field managers the nodes show, and those whose pause Lease is in one of
/// `namespaces` (where an instance often runs beside its windows). A pause Lease this
/// identity may not read goes unsaid.
async fn read_pauses<'a>(
    client: &kube::Client,
    instances: impl Iterator<Item = &'a peers::LeaseRef>,
    namespaces: &[String],
) -> Vec<(peers::LeaseRef, String)> {
    use k8s_openapi::api::coordination::v1::Lease;
    let mut found: std::collections::BTreeMap<peers::LeaseRef, String> = Default::default();
    for instance in instances {
        let pause = crate::pause::pause_lease(instance);
        let api: Api<Lease> = Api::namespaced(client.clone(), &pause.namespace);
        if let Ok(Some(lease)) = api.get_opt(&pause.name).await {
            found.insert(instance.clone(), crate::pause::hold(&lease).message);
        }
    }
    for ns in namespaces {
        let api: Api<Lease> = Api::namespaced(client.clone(), ns);
        let Ok(list) = api
            .list(&ListParams::default().labels(crate::pause::LABEL))
            .await
        else {
            continue;
        };
        for lease in list.items {
            if let Some(instance) = crate::pause::instance_of(&lease) {
                let message = crate::pause::hold(&lease).message;
                found.entry(instance).or_insert(message);
            }
        }
    }
    found.into_iter().collect()
}

/// The notifications' records of the instances, found as their pauses are (by the field
/// managers on the nodes, and by their label in `namespaces`), each with its sinks. A
/// record this identity may not read, or one without a sink, goes unsaid.
async fn read_notifications<'a>(
    client: &kube::Client,
    instances: impl Iterator<Item = &'a peers::LeaseRef>,
    namespaces: &[String],
) -> Vec<(peers::LeaseRef, Record)> {
    use k8s_openapi::api::coordination::v1::Lease;
    let mut found: std::collections::BTreeMap<peers::LeaseRef, Record> = Default::default();
    for instance in instances {
        let lease = record::record_lease(instance);
        let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
        if let Ok(Some(lease)) = api.get_opt(&lease.name).await {
            found.insert(instance.clone(), Record::of(&lease));
        }
    }
    for ns in namespaces {
        let api: Api<Lease> = Api::namespaced(client.clone(), ns);
        let Ok(list) = api.list(&ListParams::default().labels(record::LABEL)).await else {
            continue;
        };
        for lease in list.items {
            if let Some(instance) = record::instance_of(&lease) {
                found.entry(instance).or_insert_with(|| Record::of(&lease));
            }
        }
    }
    found
        .into_iter()
        .filter(|(_, r)| !r.sinks.is_empty())
        .collect()
}

/// How far ahead `kumaco status --forecast` looks, as the controller's gauges do.
const FORECAST_HORIZON: jiff::SignedDuration = jiff::SignedDuration::from_hours(7 * 24);

/// Each forecast node's `EXPECTED` cell: when it starts, or ends if it is in progress,
/// at the median durations; why not, for the rest.
fn expected_by_node(f: &super::forecast::Forecasted) -> std::collections::BTreeMap<String, String> {
    use crate::forecast::{Placement, Plan};
    let utc = |t: Timestamp| format_time(t, &TimeZone::UTC);
    f.forecast
        .nodes
        .iter()
        .map(|n| {
            let cell = match &n.plan {
                Plan::Held { reason, .. } => format!("held: {reason}"),
                Plan::Forecast { median, .. } => match median {
                    Placement::InProgress { end: Some(t), .. } => format!("ends {}", utc(*t)),
                    Placement::InProgress { end: None, .. } => "ends after 7d".into(),
                    Placement::Starts { start, .. } => format!("starts {}", utc(*start)),
                    Placement::NoStart { .. } => "no start within 7d".into(),
                },
            };
            (n.name.clone(), cell)
        })
        .collect()
}
