//! How fast kumaco parses a typical window selector and matches it against a node.
//! Every window is matched against every node in scope on each recompute, so matching is
//! the hot path; parsing happens once per ConfigMap change.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use kumaco::selector;

const TYPICAL: &str = "node-role.kubernetes.io/worker,topology.kubernetes.io/zone in \
                       (eu-west-1a,eu-west-1b),!kured.dev/exclude";

/// A realistic node: 20 labels, most of them the well-known ones.
fn node_labels() -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = [
        ("beta.kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/instance-type", "m5.xlarge"),
        ("beta.kubernetes.io/os", "linux"),
        ("failure-domain.beta.kubernetes.io/region", "eu-west-1"),
        ("failure-domain.beta.kubernetes.io/zone", "eu-west-1b"),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/hostname", "ip-10-0-12-34"),
        ("kubernetes.io/os", "linux"),
        ("node-role.kubernetes.io/worker", ""),
        ("node.kubernetes.io/instance-type", "m5.xlarge"),
        ("topology.kubernetes.io/region", "eu-west-1"),
        ("topology.kubernetes.io/zone", "eu-west-1b"),
        ("topology.ebs.csi.aws.com/zone", "eu-west-1b"),
        ("eks.amazonaws.com/nodegroup", "workers-b"),
        ("eks.amazonaws.com/capacityType", "ON_DEMAND"),
        ("team", "platform"),
        ("env", "production"),
        ("pool", "general"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    labels.insert("kured.dev/maintenance-group".into(), "b".into());
    labels.insert("example.com/rack".into(), "r12".into());
    assert_eq!(labels.len(), 20);
    labels
}

fn bench(c: &mut Criterion) {
    c.bench_function("selector/parse typical", |b| {
        b.iter(|| selector::parse(black_box(TYPICAL)))
    });

    let parsed = selector::parse(TYPICAL).expect("the benchmark selector parses");
    assert_eq!(parsed.requirements().len(), 3);
    let node = node_labels();
    assert!(parsed.matches(&node));
    c.bench_function("selector/match 3 requirements against 20 labels", |b| {
        b.iter(|| black_box(&parsed).matches(black_box(&node)))
    });
}

criterion_group! {
    name = benches;
    // Short runs: these are regression checks, not publication numbers.
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = bench
}
criterion_main!(benches);
