//! `kumaco plan`: which nodes are in maintenance when, over a period, from window
//! manifests and nodes (files or the live cluster); with `--forecast`, when each node
//! needing maintenance will start and end under the brain's policy ([`super::forecast`]).
//!
//! The period is cut at every window edge (`decision::next_edge`: a start, an end and,
//! with `--planned-lead-time`, the instant a start comes within the lead time); in each
//! interval the set of active windows, and so every node's verdict, is constant.
//! [`compute`] is pure; [`table`], [`json`] and [`svg`] render its result; this module
//! reads the inputs and writes the output.

mod compute;
mod svg;
mod table;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;

use jiff::SignedDuration;
use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams};

pub use compute::{Interval, Lane, Plan, PlanError, compute};
pub use svg::svg;
pub use table::{json, table};

use super::forecast;
use super::nodes::{self, ListedNode};
use super::{Classified, ToolError, WindowRules, flag_err};
use crate::cli::{PlanArgs, PlanOutput};
use crate::node::SlimNode;
use crate::window::Window;

/// Runs `kumaco plan`, writing the chosen output.
pub async fn run(args: &PlanArgs, out: &mut impl std::io::Write) -> Result<(), ToolError> {
    let rules = WindowRules::from_args(&args.window_args)?;
    let node_selector = super::node_selector(&args.node_selector)?;
    let from = super::parse_time("from", args.from.as_deref())?;
    let length = super::parse_period("for", &args.for_)?;
    let to = from
        .checked_add(length)
        .map_err(|_| flag_err("for", "the period ends too far in the future"))?;
    let lead = args
        .planned_lead_time
        .as_deref()
        .map(parse_lead)
        .transpose()?;
    let forecast = forecast::Settings::from_args(&args.forecast, &args.condition_names)?;
    if forecast.is_some() && args.planned_lead_time.is_some() {
        return Err(flag_err(
            "planned-lead-time",
            "has no effect with --forecast (which shows starts and ends, not MaintenancePlanned)",
        ));
    }
    if forecast
        .as_ref()
        .is_some_and(|f| !f.policy.block_pod_selectors.is_empty())
        && args.nodes.is_some()
    {
        return Err(flag_err(
            "block-pod-selector",
            "needs the pods on each node, which only the cluster shows: leave --nodes out \
             to read the nodes and their pods from the cluster",
        ));
    }
    // Only what a file does not give is read from the cluster (--nodes and --namespace
    // exclude each other).
    let connection = match &args.nodes {
        Some(_) => None,
        None => Some(crate::kubeclient::connect(&args.client).await?),
    };
    let windows = match &connection {
        Some(c) if !args.namespaces.is_empty() => {
            let configmaps = super::list_window_configmaps(
                c,
                &args.namespaces,
                &args.window_args.window_selector,
                "plan",
            )
            .await?;
            windows_from_configmaps(&configmaps, &rules)?
        }
        _ => read_windows(&args.windows, &rules)?,
    };
    let mut nodes: Vec<Node> = match (&args.nodes, &connection) {
        (Some(path), _) => nodes::read_file(path)?,
        (None, Some(c)) => nodes_from_cluster(c, &args.node_selector).await?,
        (None, None) => unreachable!("connected when no nodes file is given"),
    };
    // kumaco's own matching is the reference; a server-side filter only trims.
    nodes.retain(|n| {
        node_selector.matches(n.metadata.labels.as_ref().unwrap_or(&Default::default()))
    });
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let zone_name = zone_display_name(&rules.default_zone);
    let text = match forecast {
        Some(settings) => {
            let pods = match &connection {
                Some(c) if args.nodes.is_none() => {
                    forecast::blocking_pods(c, &settings.policy.block_pod_selectors, "plan").await?
                }
                _ => HashMap::new(),
            };
            let slim: Vec<SlimNode> = nodes
                .iter()
                .map(|n| crate::tools::nodes::slim(n, &settings.names))
                .collect();
            let f = settings.forecast(&windows, &slim, &pods, from, length)?;
            match args.output {
                PlanOutput::Table => forecast::table(&f, &rules.default_zone),
                PlanOutput::Json => pretty(&forecast::json(&f)),
                PlanOutput::Svg => forecast::svg(&f, &rules.default_zone, &zone_name),
            }
        }
        None => {
            let listed: Vec<ListedNode> = nodes.into_iter().map(nodes::from_api).collect();
            let plan = compute(&windows, &listed, from, to, lead)?;
            match args.output {
                PlanOutput::Table => table(&plan, &rules.default_zone),
                PlanOutput::Json => pretty(&json(&plan, &zone_name)),
                PlanOutput::Svg => svg(&plan, &rules.default_zone, &zone_name),
            }
        }
    };
    out.write_all(text.as_bytes()).map_err(ToolError::Write)
}

fn pretty(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// `--planned-lead-time`: a Go duration above 0, as `kumaco run` takes it.
fn parse_lead(value: &str) -> Result<SignedDuration, ToolError> {
    let lead = crate::duration::parse(value)
        .map_err(|e| flag_err("planned-lead-time", e))?
        .to_signed();
    if !lead.is_positive() {
        return Err(flag_err(
            "planned-lead-time",
            format!("{value:?} is not above 0; expected a Go duration such as 1h or 90m"),
        ));
    }
    Ok(lead)
}

fn zone_display_name(zone: &TimeZone) -> String {
    zone.iana_name().unwrap_or("UTC").to_string()
}

/// The valid windows in the files; an invalid one is an error (a plan that silently
/// left out a window would be wrong), other objects are ignored.
fn read_windows(paths: &[PathBuf], rules: &WindowRules) -> Result<Vec<Window>, ToolError> {
    let mut windows = Vec::new();
    for path in paths {
        for doc in super::read_documents(path)? {
            match rules.classify(&doc) {
                Classified::Window(w) if w.is_ok() => windows.extend(*w),
                Classified::Window(_) | Classified::Malformed(_) => {
                    return Err(PlanError::InvalidWindow(format!(
                        "{}: {}",
                        doc.source,
                        doc.object_ref()
                    ))
                    .into());
                }
                Classified::Skipped(_) => {}
            }
        }
    }
    Ok(windows)
}

/// The valid windows among ConfigMaps read from the cluster; an invalid one is an
/// error, as in a file.
fn windows_from_configmaps(
    configmaps: &[ConfigMap],
    rules: &WindowRules,
) -> Result<Vec<Window>, ToolError> {
    configmaps
        .iter()
        .map(|cm| {
            rules.window(cm).map_err(|_| {
                PlanError::InvalidWindow(format!(
                    "{}/{}",
                    cm.metadata.namespace.as_deref().unwrap_or("default"),
                    cm.metadata.name.as_deref().unwrap_or_default()
                ))
                .into()
            })
        })
        .collect()
}

async fn nodes_from_cluster(
    connection: &crate::kubeclient::Connection,
    node_selector: &str,
) -> Result<Vec<Node>, ToolError> {
    let list = Api::<Node>::all(connection.client.clone())
        .list(&ListParams::default().labels(node_selector))
        .await
        .map_err(|error| {
            super::api_error(
                connection,
                "list nodes".into(),
                error,
                ". kumaco plan needs `list nodes` (cluster-wide) to read the nodes from the \
                 cluster: ask your cluster admin for it, or give the nodes as a file with \
                 --nodes (`kubectl get nodes -o yaml > nodes.yaml` by someone who may)",
            )
        })?;
    Ok(list.items)
}
