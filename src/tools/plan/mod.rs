//! `kumaco plan`: which nodes are in maintenance when, over a period, from window
//! manifests and nodes (a file or the live cluster).
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

use std::path::PathBuf;

use jiff::SignedDuration;
use jiff::tz::TimeZone;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

pub use compute::{Interval, Lane, Plan, PlanError, compute};
pub use svg::svg;
pub use table::{json, table};

use super::nodes::{self, ListedNode};
use super::{Classified, ToolError, WindowRules, flag_err};
use crate::cli::{ClientArgs, PlanArgs, PlanOutput};
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
    let windows = read_windows(&args.windows, &rules)?;
    let nodes = match &args.nodes {
        Some(path) => nodes::from_file(path)?,
        None => nodes_from_cluster(&args.client, &args.node_selector).await?,
    };
    let nodes = nodes::in_scope(&nodes, &node_selector);
    let plan = compute(&windows, &nodes, from, to, lead)?;
    let zone_name = zone_display_name(&rules.default_zone);
    let text = match args.output {
        PlanOutput::Table => table(&plan, &rules.default_zone),
        PlanOutput::Json => {
            let mut s = serde_json::to_string_pretty(&json(&plan, &zone_name)).unwrap_or_default();
            s.push('\n');
            s
        }
        PlanOutput::Svg => svg(&plan, &rules.default_zone, &zone_name),
    };
    out.write_all(text.as_bytes()).map_err(ToolError::Write)
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

async fn nodes_from_cluster(
    client: &ClientArgs,
    node_selector: &str,
) -> Result<Vec<ListedNode>, ToolError> {
    let connection = crate::kubeclient::connect(client).await?;
    let list = Api::<Node>::all(connection.client)
        .list(&ListParams::default().labels(node_selector))
        .await
        .map_err(|error| {
            let hint = if crate::kubeclient::is_forbidden(&error) {
                ". kumaco plan needs `list nodes` (cluster-wide) to read the nodes from the \
                 cluster: ask your cluster admin for it, or give the nodes as a file with \
                 --nodes (`kubectl get nodes -o yaml > nodes.yaml` by someone who may)"
            } else {
                ""
            };
            ToolError::Api {
                action: "list nodes".into(),
                server: connection.server.clone(),
                error: Box::new(error),
                hint: hint.into(),
            }
        })?;
    Ok(list.items.into_iter().map(nodes::from_api).collect())
}
