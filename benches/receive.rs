//! What receiving a foreign node change costs, kumaco against a plain client: the watch
//! event's line (as kube's watcher decodes it, `WatchEvent<K>` from the text) of a
//! churned node (benches/data/churned-node.json: 21 labels, 6 conditions, 40 images,
//! managedFields of 4 managers; a kubelet heartbeat with one new image, a new annotation
//! and label) decoded
//!
//! - by kumaco into [`SlimNode`], renamed, trimmed and compared with the node's previous
//!   version ([`SlimNode::differs_for_pass`]): everything kumaco's own code does for an
//!   event that wakes no pass;
//! - by a plain client into a whole `k8s_openapi` `Node`.

use std::collections::HashSet;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Node;
use kube::core::WatchEvent;
use kumaco::node::{Names, SlimNode};

const MANAGER: &str = "kumaco/kube-system/kumaco";
const NODE: &str = include_str!("data/churned-node.json");

/// The node's previous version: the heartbeat, the image, the annotation and the label
/// one change earlier.
fn previous(node: &str) -> String {
    node.replace("4713", "4712")
        .replace("2026-12-05T03:10:42Z", "2026-12-05T03:10:32Z")
}

fn line(node: &str) -> String {
    format!(r#"{{"type":"MODIFIED","object":{}}}"#, node.trim_end())
}

/// kumaco's work for one event: decode, rename, trim; whether a pass must follow.
fn receive(line: &str, names: &Names, read: &[String], before: &SlimNode) -> bool {
    let WatchEvent::Modified(mut node) =
        serde_json::from_str::<WatchEvent<SlimNode>>(line).expect("the bench's node decodes")
    else {
        unreachable!("a MODIFIED event")
    };
    node.rename(names);
    node.keep_only(MANAGER, read);
    before.differs_for_pass(&node, &HashSet::new())
}

fn bench(c: &mut Criterion) {
    let read = vec!["kured.dev/RebootRequired".to_string()];
    let names = Names::default();
    let after = line(NODE);
    let mut before: SlimNode = serde_json::from_str(&previous(NODE)).unwrap();
    before.rename(&names);
    before.keep_only(MANAGER, &read);
    assert!(!receive(&after, &names, &read, &before), "a foreign change");
    eprintln!("one watch event: {} bytes", after.len());

    let mut g = c.benchmark_group("receive");
    g.sample_size(50).measurement_time(Duration::from_secs(5));
    g.bench_function(
        "kumaco: a foreign change's event to its relevance check",
        |b| b.iter(|| receive(black_box(&after), &names, &read, &before)),
    );
    g.bench_function("kumaco: decode the event into SlimNode", |b| {
        b.iter(|| serde_json::from_str::<WatchEvent<SlimNode>>(black_box(&after)).unwrap())
    });
    g.bench_function(
        "plain client: decode the event into k8s-openapi's Node",
        |b| b.iter(|| serde_json::from_str::<WatchEvent<Node>>(black_box(&after)).unwrap()),
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
