//! What a node change costs kumaco, split as the controller splits it:
//!
//! - every node event: decoding the watched Node into [`SlimNode`] and the relevance
//!   check ([`SlimNode::differs_for_pass`]); a foreign change (a kubelet heartbeat, new
//!   images, an annotation) stops there;
//! - a relevant change: one whole pass ([`pass::run`]) over every node, as the controller
//!   runs it on a window change, an edge or a resync;
//! - the same pass with every health gate on, at its worst: every node under maintenance
//!   needs a reboot, slots are free, and each candidate's drain meets a budget that allows
//!   nothing, so the pass checks every candidate's pods against the budgets.
//!
//! The nodes are the scale harness's (`testkit::fleet`: 20 labels, 5 kubelet conditions,
//! 40 images, managedFields of three managers), 5,000 of them, against 200 windows.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use kumaco::announce::WindowSource;
use kumaco::budgets::{self, Budget, Budgets, Phase};
use kumaco::conditions::{Condition, Status};
use kumaco::gates::{Gates, Hold};
use kumaco::in_progress::{BlockingPod, Ceiling, GroupCeiling, Policy};
use kumaco::node::SlimNode;
use kumaco::pass::{self, NodeView, Rules};
use kumaco::peers::Peers;
use kumaco::reasons;
use kumaco::selector;
use kumaco::window::{Window, WindowId};
use serde_json::{Value, json};
use testkit::Scope;
use testkit::fleet::{node_images, node_labels, node_name, node_status};

const NODES: usize = 5000;
const MANAGER: &str = "kumaco/kube-system/kumaco";
const REBOOT_REQUIRED: &str = "kured.dev/RebootRequired";

/// Node `i` as the watch delivers it, its kubelet's images at `generation`.
fn node_json(scope: &Scope, i: usize, generation: u64) -> Value {
    let name = node_name(scope, i);
    let mut status = node_status(i);
    status["images"] = node_images(i, generation).into();
    let owns = |manager: &str, subresource: Option<&str>, fields: Value| {
        json!({ "manager": manager, "operation": "Update", "subresource": subresource,
                "fieldsType": "FieldsV1", "fieldsV1": fields })
    };
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("{i:032x}"), "resourceVersion": format!("{}", 1000 + generation),
            "labels": node_labels(scope, &name, i),
            "annotations": { "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
            "managedFields": [
                owns("kubelet", None, json!({ "f:metadata": { "f:labels": {} } })),
                owns("kubelet", Some("status"), json!({ "f:status": { "f:conditions": {
                    "k:{\"type\":\"Ready\"}": { ".": {}, "f:status": {} },
                    "k:{\"type\":\"MemoryPressure\"}": { ".": {}, "f:status": {} } }, "f:images": {} } })),
                owns(MANAGER, Some("status"), json!({ "f:status": { "f:conditions": {
                    "k:{\"type\":\"kured.dev/UnderMaintenance\"}": { ".": {}, "f:status": {} } } } })),
            ],
        },
        "spec": { "providerID": format!("aws:///bench/{name}") },
        "status": status,
    })
}

/// 200 windows like kumaco-bench's: a few active at the benchmark's instant, most not.
fn windows() -> Vec<WindowSource> {
    (0..200)
        .map(|i| {
            let start = match i % 4 {
                0 => format!("{} 3 * * {}", i % 60, i % 7),
                1 => format!("{} 4 * * *", i % 60),
                2 => format!("2026-03-{:02}T{:02}:00:00Z", 1 + i % 28, i % 24),
                _ => format!("CRON_TZ=Europe/Berlin 0 {} * * 1-5", i % 24),
            };
            let selector = match i % 3 {
                0 => format!("bench.kumaco.dev/rack=r{:02}", i % 50),
                1 => format!(
                    "topology.kubernetes.io/zone=zone-{}",
                    ["a", "b", "c", "d"][i % 4]
                ),
                _ => format!(
                    "bench.kumaco.dev/pool in (general,memory),bench.kumaco.dev/rack=r{:02}",
                    i % 50
                ),
            };
            let data: BTreeMap<String, String> = [
                ("startTime", start),
                ("duration", "30m".to_string()),
                ("nodeSelector", selector),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let id = WindowId {
                namespace: "ops".into(),
                name: format!("w{i}"),
            };
            WindowSource {
                window: Ok(Window::from_data(id.clone(), &data, &TimeZone::UTC)
                    .expect("benchmark windows are valid")),
                id,
                uid: format!("uid-{i}"),
                data_hash: i as u64,
                created: None,
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let scope = Scope::new("bench");
    let keys: HashSet<String> = [
        "bench.kumaco.dev/rack",
        "bench.kumaco.dev/pool",
        "topology.kubernetes.io/zone",
    ]
    .map(String::from)
    .into();

    let mut g = c.benchmark_group("node event");
    g.sample_size(50).measurement_time(Duration::from_secs(5));
    let before_text = serde_json::to_vec(&node_json(&scope, 7, 0)).unwrap();
    let after_text = serde_json::to_vec(&node_json(&scope, 7, 1)).unwrap();
    eprintln!("one node as the watch sends it: {} bytes", after_text.len());
    let mut before: SlimNode = serde_json::from_slice(&before_text).unwrap();
    before.keep_only(MANAGER, &[REBOOT_REQUIRED.to_string()]);
    g.bench_function("decode a node into SlimNode", |b| {
        b.iter(|| serde_json::from_slice::<SlimNode>(black_box(&after_text)).unwrap())
    });
    g.bench_function("decode + relevance check of a foreign change", |b| {
        b.iter(|| {
            let mut after: SlimNode = serde_json::from_slice(black_box(&after_text)).unwrap();
            after.keep_only(MANAGER, &[REBOOT_REQUIRED.to_string()]);
            assert!(!before.differs_for_pass(&after, &keys));
        })
    });
    g.finish();

    let nodes: Vec<SlimNode> = (0..NODES)
        .map(|i| {
            let mut n: SlimNode = serde_json::from_value(node_json(&scope, i, 0)).unwrap();
            n.keep_only(MANAGER, &[REBOOT_REQUIRED.to_string()]);
            n
        })
        .collect();
    let sources = windows();
    let windows: Vec<&WindowSource> = sources.iter().collect();
    let now: Timestamp = "2026-03-03T03:10:00Z".parse().unwrap();
    let plain = Policy {
        required: vec![REBOOT_REQUIRED.into()],
        ..Policy::with_ceiling(Ceiling::Count(2))
    };
    // Every rule of the brain at once: a blocking label, blocking pods, a ceiling per
    // zone, pacing, and nodes down (every 100th NotReady, every 250th cordoned) counted
    // against the ceilings.
    let every_rule = Policy {
        block_node_selectors: vec![selector::parse("bench.kumaco.dev/rack=r13").unwrap()],
        block_pod_selectors: vec![selector::parse("app=postgres").unwrap()],
        group_ceilings: vec![GroupCeiling {
            key: "topology.kubernetes.io/zone".into(),
            ceiling: Ceiling::Count(1),
        }],
        start_interval: Some(jiff::SignedDuration::from_mins(15)),
        ..plain.clone()
    };
    let mut down = nodes.clone();
    for (i, n) in down.iter_mut().enumerate() {
        if i % 100 == 0 {
            n.availability.ready = Some(kumaco::conditions::Status::False);
        }
        if i % 250 == 0 {
            n.availability.unschedulable = true;
        }
    }
    // 200 blocking pods, on every 25th node.
    let pods: HashMap<String, Vec<BlockingPod>> = (0..NODES)
        .step_by(NODES / 200)
        .map(|i| {
            let name = node_name(&scope, i);
            (
                name,
                vec![BlockingPod {
                    name: format!("db/postgres-{i}"),
                    selector: 0,
                }],
            )
        })
        .collect();
    let gated = Gated::new(&nodes);
    let mut g = c.benchmark_group("pass");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    for (name, policy, nodes, pods, gates_on) in [
        (
            "one pass, 200 windows x 5000 nodes, --in-progress",
            plain.clone(),
            nodes,
            HashMap::new(),
            false,
        ),
        (
            "one pass, 200 windows x 5000 nodes, every rule of the brain",
            every_rule,
            down,
            pods,
            false,
        ),
        (
            "one pass, 200 windows x 5000 nodes, every node needing a reboot, gates off",
            plain.clone(),
            gated.nodes.clone(),
            HashMap::new(),
            false,
        ),
        (
            "one pass, 200 windows x 5000 nodes, every node needing a reboot, every gate on",
            plain,
            gated.nodes.clone(),
            HashMap::new(),
            true,
        ),
    ] {
        let rules = Rules {
            node_selector: scope.selector().parse().unwrap(),
            instance: MANAGER.into(),
            in_progress: Some(policy),
            planned_lead_time: None,
            resync: jiff::SignedDuration::from_mins(5),
        };
        let no_gates = Beside::default();
        let beside = Beside {
            pods,
            ..if gates_on { gated.beside() } else { no_gates }
        };
        let gates = if gates_on { gated.gates() } else { Gates::NONE };
        let nodes = at_fixpoint(&rules, &windows, nodes, &beside, &gates, now);
        let pending = HashMap::new();
        g.bench_function(name, |b| {
            b.iter(|| {
                pass::run(
                    &rules,
                    &windows,
                    &[],
                    views(&nodes, &beside),
                    &pending,
                    &Peers::default(),
                    &gates,
                    black_box(now),
                )
            })
        });
    }
    g.finish();
}

/// What the pass reads beside the nodes: blocking pods, the gates' holds on single
/// nodes, and the pods a drain of each node would meet.
#[derive(Default)]
struct Beside {
    pods: HashMap<String, Vec<BlockingPod>>,
    holds: HashMap<String, Vec<Hold>>,
    drains: HashMap<String, Vec<budgets::Pod>>,
}

/// Every gate on at 5,000 nodes: 2,000 budgets (10 in each of 200 namespaces), none
/// allowing a disruption; 10 pods on every node, each selected by one budget; an alert
/// naming every 100th node; and every node needing a reboot.
struct Gated {
    nodes: Vec<SlimNode>,
    budgets: Budgets,
}

const NAMESPACES: usize = 200;
const BUDGETS_PER_NAMESPACE: usize = 10;
const PODS_PER_NODE: usize = 10;

impl Gated {
    fn new(nodes: &[SlimNode]) -> Gated {
        let since: Timestamp = "2026-03-02T00:00:00Z".parse().unwrap();
        let nodes = nodes
            .iter()
            .cloned()
            .map(|mut n| {
                n.conditions.push(Condition {
                    type_: REBOOT_REQUIRED.into(),
                    status: Status::True,
                    reason: "RebootRequired".into(),
                    message: String::new(),
                    last_transition_time: Some(since),
                    last_heartbeat_time: None,
                });
                n
            })
            .collect();
        let budgets = Budgets::new((0..NAMESPACES).flat_map(|ns| {
            (0..BUDGETS_PER_NAMESPACE).map(move |k| Budget {
                namespace: format!("team-{ns}"),
                name: format!("app-{k}"),
                selector: Some(selector::parse(&format!("app=app-{k}")).unwrap()),
                disruptions_allowed: 0,
                behind: None,
                current_healthy: 3,
                desired_healthy: 3,
                always_allow_unhealthy: false,
            })
        }));
        Gated { nodes, budgets }
    }

    fn beside(&self) -> Beside {
        let mut beside = Beside::default();
        for (i, n) in self.nodes.iter().enumerate() {
            let name = n.metadata.name.clone().unwrap_or_default();
            let pods = (0..PODS_PER_NODE)
                .map(|j| {
                    let k = i * PODS_PER_NODE + j;
                    budgets::Pod {
                        namespace: format!("team-{}", k % NAMESPACES),
                        name: format!("pod-{k}"),
                        labels: [(
                            "app".to_string(),
                            format!("app-{}", k / NAMESPACES % BUDGETS_PER_NAMESPACE),
                        )]
                        .into(),
                        phase: Phase::Running,
                        terminating: false,
                        ready: true,
                        daemon_set: false,
                        mirror: false,
                    }
                })
                .collect();
            if i % 100 == 0 {
                beside.holds.insert(
                    name.clone(),
                    vec![Hold {
                        reason: reasons::ALERT_FIRING,
                        message: format!("alert NodeFilesystemAlmostFull is firing on {name}"),
                    }],
                );
            }
            beside.drains.insert(name, pods);
        }
        beside
    }

    fn gates(&self) -> Gates<'_> {
        Gates {
            budgets: Some(&self.budgets),
            ..Gates::NONE
        }
    }
}

/// The nodes as the pass reads them.
fn views<'a>(nodes: &'a [SlimNode], beside: &'a Beside) -> impl Iterator<Item = NodeView<'a>> {
    nodes.iter().map(|n| {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        NodeView {
            name,
            uid: n.metadata.uid.as_deref().unwrap_or_default(),
            labels: &n.labels,
            resource_version: n.resource_version(),
            conditions: &n.conditions,
            owned: n.owned_by(MANAGER),
            owned_since: None,
            owners: &n.status_owners,
            availability: n.availability,
            pods: beside.pods.get(name).map_or(&[][..], Vec::as_slice),
            boot_id: n.boot_id.as_deref(),
            holds: beside.holds.get(name).map_or(&[][..], Vec::as_slice),
            drain: beside.drains.get(name).map(Vec::as_slice),
        }
    })
}

/// The steady state: what kumaco wrote is on the nodes, so the measured pass decides
/// every node and writes nothing, as one woken by a relevant change does.
fn at_fixpoint(
    rules: &Rules,
    windows: &[&WindowSource],
    mut nodes: Vec<SlimNode>,
    beside: &Beside,
    gates: &Gates,
    now: Timestamp,
) -> Vec<SlimNode> {
    let pending = HashMap::new();
    for _ in 0..3 {
        let writes = pass::run(
            rules,
            windows,
            &[],
            views(&nodes, beside),
            &pending,
            &Peers::default(),
            gates,
            now,
        )
        .writes;
        for write in writes {
            let node = nodes
                .iter_mut()
                .find(|n| n.metadata.name.as_deref() == Some(&write.node))
                .unwrap();
            for c in write.conditions {
                node.conditions.retain(|old| old.type_ != c.type_);
                node.status_owners[0].types.push(c.type_.clone());
                node.conditions.push(c);
            }
            node.status_owners[0].types.sort();
            node.status_owners[0].types.dedup();
        }
    }
    let outcome = pass::run(
        rules,
        windows,
        &[],
        views(&nodes, beside),
        &pending,
        &Peers::default(),
        gates,
        now,
    );
    eprintln!(
        "a pass at {now}: {} windows active, {} of {} nodes under maintenance, {} unavailable, {} writes left",
        outcome.counts.active_windows,
        outcome.counts.under_maintenance,
        outcome.counts.in_scope,
        outcome.counts.unavailable,
        outcome.writes.len()
    );
    assert!(
        outcome.writes.is_empty(),
        "the measured pass is not at the fixpoint"
    );
    nodes
}

criterion_group!(benches, bench);
criterion_main!(benches);
