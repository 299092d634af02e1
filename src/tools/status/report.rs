//! What `kumaco status` reports, computed from the API's objects and the time: each
//! window with the nodes it selects, each node's next maintenance, and who owns each
//! node's kumaco conditions.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Node};

use crate::in_progress::{Availability, Usage};
use crate::node::Names;
use crate::peers::{self, Liveness, Peers};
use crate::tools::WindowRules;
use crate::tools::nodes::{ListedNode, slim};
use crate::window::{InvalidWindow, Window, WindowId};

/// One window ConfigMap as `kumaco status` reports it.
pub struct WindowReport {
    pub id: WindowId,
    pub window: Result<Window, InvalidWindow>,
    /// The in-scope nodes the window selects, by name (`None`: nodes not listed).
    pub selected: Option<Vec<String>>,
}

/// Where a node's next maintenance is: the window and its occurrence, active now or the
/// earliest to come (blackouts are not subtracted: a node's conditions say if one holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextMaintenance {
    pub window: WindowId,
    pub start: Timestamp,
    pub end: Timestamp,
    pub active: bool,
}

/// The windows, each with the nodes it selects, sorted by namespace/name.
pub fn window_reports(
    configmaps: &[ConfigMap],
    rules: &WindowRules,
    nodes: Option<&[ListedNode]>,
) -> Vec<WindowReport> {
    let mut out: Vec<WindowReport> = configmaps
        .iter()
        .map(|cm| {
            let window = rules.window(cm);
            let id = match &window {
                Ok(w) => w.id.clone(),
                Err(_) => WindowId {
                    namespace: cm.metadata.namespace.clone().unwrap_or_default(),
                    name: cm.metadata.name.clone().unwrap_or_default(),
                },
            };
            let selected = match (&window, nodes) {
                (Ok(w), Some(nodes)) => Some(
                    nodes
                        .iter()
                        .filter(|n| w.selector.matches(&n.labels))
                        .map(|n| n.name.clone())
                        .collect(),
                ),
                _ => None,
            };
            WindowReport {
                id,
                window,
                selected,
            }
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// A node's next maintenance among `windows` (the valid maintenance windows).
pub fn next_maintenance(
    windows: &[&Window],
    labels: &BTreeMap<String, String>,
    now: Timestamp,
) -> Option<NextMaintenance> {
    windows
        .iter()
        .filter(|w| !w.blackout && w.selector.matches(labels))
        .filter_map(|w| {
            if let Some(o) = w.latest_active(now) {
                return Some(NextMaintenance {
                    window: w.id.clone(),
                    start: o.start,
                    end: o.end,
                    active: true,
                });
            }
            let start = w.schedule.next_after(now)?;
            Some(NextMaintenance {
                window: w.id.clone(),
                start,
                end: start.checked_add(w.duration.to_signed()).ok()?,
                active: false,
            })
        })
        .min_by(|a, b| (!a.active, a.start, &a.window).cmp(&(!b.active, b.start, &b.window)))
}

/// The kumaco field managers owning a node's kumaco conditions (their `status`, from
/// managedFields), each with whether its instance runs (`None`: its Lease could not be
/// read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KumacoOwner {
    pub manager: String,
    pub conditions: Vec<String>,
    pub live: Option<bool>,
}

/// Each node's kumaco owners, by node name.
pub type Owners = BTreeMap<String, Vec<KumacoOwner>>;

/// A node is contested when two live kumaco instances own its conditions (a move
/// between instances half done, or two scopes that overlap).
pub fn contested(owners: &[KumacoOwner]) -> bool {
    owners.iter().filter(|o| o.live != Some(false)).count() > 1
}

/// The kumaco owners of each node, judged with `peers` (the Leases their managers name).
pub fn kumaco_owners(nodes: &[Node], peers: &Peers, now: Timestamp, names: &Names) -> Owners {
    nodes
        .iter()
        .map(|n| {
            let owners = slim(n, names)
                .status_owners
                .into_iter()
                .filter(|o| peers::is_kumaco(&o.manager))
                .map(|mut o| {
                    o.types
                        .retain(|t| peers::KUMACO_TYPES.contains(&t.as_str()));
                    o
                })
                .filter(|o| !o.types.is_empty())
                .map(|o| KumacoOwner {
                    live: match peers.liveness(&o.manager, now) {
                        Liveness::Live => Some(true),
                        Liveness::Stale => Some(false),
                        Liveness::Unknown => None,
                    },
                    manager: o.manager,
                    conditions: o.types,
                })
                .collect();
            (n.metadata.name.clone().unwrap_or_default(), owners)
        })
        .collect()
}

/// What a node shows of its availability, as kumaco reads it.
pub fn availability(node: &Node) -> Availability {
    // The availability reads no condition kumaco writes: no names needed.
    slim(node, &Names::default()).availability
}

/// The nodes taking `MaintenanceInProgress` slots, counted by the decision's own rule
/// ([`Usage::count_node`], unavailable nodes counted as `--count-unavailable` does by
/// default): in progress, or else unavailable (NotReady, Ready Unknown, cordoned), each
/// node once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disruption {
    pub nodes: usize,
    pub usage: Usage,
}

impl Disruption {
    fn count(&mut self, node: &Node, names: &Names) {
        self.nodes += 1;
        let slim = slim(node, names);
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.usage
            .count_node(name, &slim.conditions, slim.availability, true);
    }
}

/// The disruption overall, and per value of each label key in `group_by` (`None`: the
/// nodes without the label), sorted; kumaco's conditions read under `names`.
pub fn disruption(
    nodes: &[Node],
    group_by: &[String],
    names: &Names,
) -> (Disruption, Vec<(String, Option<String>, Disruption)>) {
    let mut all = Disruption::default();
    let mut groups: BTreeMap<(String, Option<String>), Disruption> = BTreeMap::new();
    let mut sorted: Vec<&Node> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for node in sorted {
        all.count(node, names);
        for key in group_by {
            let value = node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(key))
                .cloned();
            groups
                .entry((key.clone(), value))
                .or_default()
                .count(node, names);
        }
    }
    let groups = groups.into_iter().map(|((k, v), d)| (k, v, d)).collect();
    (all, groups)
}
