use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::silence::parse_sets;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn alert(name: &str, pairs: &[(&str, &str)]) -> Firing {
    let mut l = labels(pairs);
    l.insert("alertname".into(), name.into());
    Firing {
        name: name.into(),
        labels: l,
        silenced_by_us: false,
    }
}

fn series(query: &str, pairs: &[(&str, &str)]) -> Firing {
    Firing {
        name: query.into(),
        labels: labels(pairs),
        silenced_by_us: false,
    }
}

/// Nodes `a` (zone z1), `b` and `x.y`, with their labels.
struct Nodes {
    sets: Vec<MatcherSet>,
    nodes: Vec<(String, BTreeMap<String, String>)>,
}

/// The test's nodes, with the default set and `extra` sets.
fn nodes(extra: &[&str]) -> Nodes {
    nodes_with(true, extra)
}

fn nodes_with(default: bool, extra: &[&str]) -> Nodes {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    Nodes {
        sets: parse_sets(default, &extra).unwrap(),
        nodes: vec![
            ("a".into(), labels(&[("zone", "z1")])),
            ("b".into(), labels(&[("host", "host-b")])),
            ("x.y".into(), BTreeMap::new()),
        ],
    }
}

impl Nodes {
    fn scope(&self) -> Scope<'_> {
        Scope::new(
            &self.sets,
            self.nodes
                .iter()
                .map(|(n, l)| (n.as_str(), l as &dyn Labels)),
        )
    }
}

fn nodes_of(n: &Nodes, pairs: &[(&str, &str)]) -> Vec<String> {
    let l = labels(pairs);
    n.scope()
        .nodes_of(&l)
        .into_iter()
        .map(str::to_string)
        .collect()
}

#[test]
fn name_filters_match_anywhere_in_the_name_as_kureds_do() {
    let none = NameFilter::new(None, None).unwrap();
    assert!(none.lets("Watchdog") && none.lets(""));
    let ignore = NameFilter::new(Some("Watchdog|InfoInhibitor"), None).unwrap();
    assert!(!ignore.lets("Watchdog"));
    assert!(
        !ignore.lets("MyWatchdogAlert"),
        "kured's filter is unanchored"
    );
    assert!(ignore.lets("KubeAPIDown"));
    let whole = NameFilter::new(Some("^Watchdog$"), None).unwrap();
    assert!(whole.lets("MyWatchdogAlert") && !whole.lets("Watchdog"));
    let only = NameFilter::new(None, Some("^Kube")).unwrap();
    assert!(only.lets("KubeNodeNotReady") && !only.lets("NodeDown"));
    let both = NameFilter::new(Some("Test"), Some("^Kube")).unwrap();
    assert!(both.lets("KubeNodeNotReady") && !both.lets("KubeTest") && !both.lets("NodeDown"));
}

#[test]
fn bad_filters_say_what_is_wrong() {
    let e = NameFilter::new(Some("Watch(dog"), None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("\"Watch(dog\" is not a regular expression: "),
        "{e}"
    );
    assert!(!e.to_string().contains('\n'), "one line: {e}");
    assert_eq!(
        parse_filter(r#"severity="critical""#).unwrap().to_string(),
        r#"severity="critical""#
    );
    assert_eq!(
        parse_filter(r#"severity=~"warning|critical""#)
            .unwrap()
            .to_string(),
        r#"severity=~"warning|critical""#
    );
    let cases = [
        ("severity=critical", "expected LABEL OP \"VALUE\""),
        ("severity", "expected LABEL OP \"VALUE\""),
        (r#"1x="a""#, "is not a Prometheus label name"),
        (r#"node="{{name}}""#, "cannot name a node"),
        (r#"job=~"(a""#, "is not a regular expression"),
    ];
    for (spec, expected) in cases {
        let e = parse_filter(spec).unwrap_err().to_string();
        assert!(e.contains(expected), "{spec}: {e}");
    }
}

#[test]
fn matchers_match_as_alertmanagers_do() {
    let m = |spec: &str| LabelMatcher::new(&parse_filter(spec).unwrap()).unwrap();
    let l = labels(&[("severity", "critical"), ("msg", "a\nb")]);
    assert!(m(r#"severity="critical""#).matches(&l));
    assert!(!m(r#"severity!="critical""#).matches(&l));
    // Anchored: the whole value.
    assert!(!m(r#"severity=~"crit""#).matches(&l));
    assert!(m(r#"severity=~"crit.*""#).matches(&l));
    assert!(m(r#"severity!~"warn.*""#).matches(&l));
    // `.` matches a newline, as in `^(?s:RE)$`.
    assert!(m(r#"msg=~"a.b""#).matches(&l));
    // A missing label is the empty value.
    assert!(m(r#"node="""#).matches(&l));
    assert!(m(r#"node!="a""#).matches(&l));
    assert!(m(r#"node=~".*""#).matches(&l));
    assert!(!m(r#"node=~".+""#).matches(&l));
}

#[test]
fn an_alert_is_about_the_nodes_whose_sets_it_matches() {
    let s = nodes(&[r#"instance=~"{{name}}(:[0-9]+)?""#]);
    assert_eq!(nodes_of(&s, &[("node", "a")]), ["a"]);
    assert_eq!(nodes_of(&s, &[("instance", "b:9100")]), ["b"]);
    // The node's name is escaped in a regular expression: `x.y` is not `xzy`.
    assert_eq!(nodes_of(&s, &[("instance", "x.y")]), ["x.y"]);
    assert!(nodes_of(&s, &[("instance", "xzy:9100")]).is_empty());
    assert!(nodes_of(&s, &[("instance", "b:9100x")]).is_empty());
    // Naming a node outside the scope, or none.
    assert!(nodes_of(&s, &[("node", "c")]).is_empty());
    assert!(nodes_of(&s, &[("job", "apiserver")]).is_empty());
    // Two nodes at once.
    assert_eq!(
        nodes_of(&s, &[("node", "a"), ("instance", "b")]),
        ["a", "b"]
    );

    // A set of two matchers needs both; a set naming a node label applies only to nodes
    // that have it.
    let s = nodes_with(false, &[r#"host="{{name}}",zone="{{label:zone}}""#]);
    assert_eq!(nodes_of(&s, &[("host", "a"), ("zone", "z1")]), ["a"]);
    assert!(nodes_of(&s, &[("host", "a"), ("zone", "z2")]).is_empty());
    assert!(nodes_of(&s, &[("host", "b"), ("zone", "")]).is_empty());
}

/// The sets whose matchers need the name are tried only where a label holds it; the
/// others (naming the node by a label of its own) on every node, with the same answers.
#[test]
fn only_a_set_that_needs_the_name_is_tried_on_the_nodes_a_label_names() {
    let key = |spec: &str| {
        MatcherSet::parse(spec)
            .unwrap()
            .name_label()
            .map(str::to_string)
    };
    assert_eq!(key(r#"node="{{name}}""#).as_deref(), Some("node"));
    assert_eq!(
        key(r#"instance=~"{{name}}(:[0-9]+)?""#).as_deref(),
        Some("instance")
    );
    assert_eq!(
        key(r#"job="x",instance=~"https?://{{name}}\\.example(:[0-9]+)?/.*""#).as_deref(),
        Some("instance")
    );
    assert_eq!(
        key(r#"zone="{{label:zone}}",node=~"(prefix-)+{{name}}""#).as_deref(),
        Some("node")
    );
    // Named by a label of the node only: no label holds its name.
    assert_eq!(key(r#"host="{{label:host}}""#), None);
    // Tried on every node, such a set still matches by rendering.
    let s = nodes_with(false, &[r#"host=~"{{label:host}}(:[0-9]+)?""#]);
    assert_eq!(nodes_of(&s, &[("host", "host-b:9100")]), ["b"]);
    assert!(nodes_of(&s, &[("host", "any")]).is_empty());
}

#[test]
fn a_person_s_silence_excuses_an_alert_and_kumacos_own_does_not() {
    let f = NameFilter::new(Some("^Watchdog$"), None).unwrap();
    let l = |name: &str| labels(&[("alertname", name), ("node", "a")]);
    assert!(firing_alert(&f, l("Watchdog"), &[]).is_none());
    let plain = firing_alert(&f, l("NodeDown"), &[]).unwrap();
    assert!(!plain.silenced_by_us);
    assert_eq!(plain.name, "NodeDown");
    assert!(firing_alert(&f, l("NodeDown"), &[SilencedBy::Other]).is_none());
    assert!(firing_alert(&f, l("NodeDown"), &[SilencedBy::Us, SilencedBy::Other]).is_none());
    let ours = firing_alert(&f, l("NodeDown"), &[SilencedBy::Us]).unwrap();
    assert!(ours.silenced_by_us);
    // A silence the list does not show (made or gone between the two reads) excuses
    // nothing, and is not called kumaco's.
    let unknown = firing_alert(&f, l("NodeDown"), &[SilencedBy::Us, SilencedBy::Unknown]);
    assert!(!unknown.unwrap().silenced_by_us);
    // No alertname: the empty name, filtered as such.
    let only = NameFilter::new(None, Some("^Kube")).unwrap();
    assert!(firing_alert(&only, labels(&[("node", "a")]), &[]).is_none());
}

#[test]
fn an_alert_holds_the_nodes_it_names_or_every_start() {
    let n = nodes(&[]);
    let s = n.scope();
    let h = holding(
        Gate::Alerts,
        &[
            alert("KubeNodeNotReady", &[("node", "a")]),
            alert("KubeAPIDown", &[]),
            alert("NodeDiskFull", &[("node", "elsewhere")]),
        ],
        &s,
    );
    let cluster = h.cluster.unwrap();
    assert_eq!(cluster.reason, reasons::ALERT_FIRING);
    assert_eq!(
        cluster.message,
        "alerts KubeAPIDown, NodeDiskFull are firing naming no node in scope"
    );
    assert_eq!(h.nodes.len(), 1);
    assert_eq!(
        h.nodes["a"].message,
        "alert KubeNodeNotReady is firing for this node"
    );

    let mut silenced = alert("KubeNodeNotReady", &[("node", "b")]);
    silenced.silenced_by_us = true;
    let h = holding(Gate::Alerts, &[silenced], &s);
    assert!(h.cluster.is_none());
    assert_eq!(
        h.nodes["b"].message,
        "alert KubeNodeNotReady is firing for this node (silenced only by kumaco's own \
         maintenance silence)"
    );
    assert_eq!(holding(Gate::Alerts, &[], &s), Verdict::default());
}

#[test]
fn messages_name_a_few_alerts_and_count_the_rest() {
    let many: Vec<Firing> = (0..50)
        .flat_map(|i| [alert(&format!("Alert{i:02}"), &[]), alert("Alert00", &[])])
        .collect();
    let h = holding(Gate::Alerts, &many, &nodes(&[]).scope());
    assert_eq!(
        h.cluster.unwrap().message,
        "alerts Alert00, Alert01, Alert02 and 47 more are firing naming no node in scope"
    );
}

#[test]
fn a_query_names_itself_and_a_series() {
    let n = nodes(&[]);
    let s = n.scope();
    let q = r#"up{job="node"} == 0"#;
    let h = holding(
        Gate::Queries,
        &[
            series(
                q,
                &[("__name__", "up"), ("job", "node"), ("instance", "z:9100")],
            ),
            series(
                q,
                &[("__name__", "up"), ("job", "node"), ("instance", "y:9100")],
            ),
            series(q, &[("job", "node"), ("node", "a")]),
            series("ALERTS", &[("alertname", "X")]),
        ],
        &s,
    );
    assert_eq!(
        h.cluster.unwrap().message,
        "--block-query 'ALERTS' returns a series naming no node in scope: {alertname=\"X\"}, \
         and one more query"
    );
    assert_eq!(
        h.nodes["a"].message,
        r#"--block-query 'up{job="node"} == 0' returns a series for this node: {job="node",node="a"}"#
    );
    let h = holding(
        Gate::Queries,
        &[
            series(
                q,
                &[("__name__", "up"), ("job", "node"), ("instance", "z:9100")],
            ),
            series(
                q,
                &[("__name__", "up"), ("job", "node"), ("instance", "y:9100")],
            ),
        ],
        &s,
    );
    assert_eq!(
        h.cluster.unwrap().message,
        r#"--block-query 'up{job="node"} == 0' returns 2 series naming no node in scope, e.g. up{instance="y:9100",job="node"}"#
    );
    let long = "x".repeat(1000);
    let h = holding(Gate::Queries, &[series(&long, &[("v", &long)])], &s);
    let message = h.cluster.unwrap().message;
    assert!(message.len() < 450, "{}", message.len());
}

proptest! {
    /// The verdict is a function of what fires, not of the order Alertmanager lists it
    /// in; every alert holds somewhere, and a node is held only by an alert about it.
    #[test]
    fn the_verdict_does_not_depend_on_the_order_and_accounts_for_every_alert(
        picks in prop::collection::vec((0usize..6, 0usize..5), 0..20),
        seed in any::<u64>(),
    ) {
        let names = ["A", "B", "C", "D", "E", "F"];
        let named = ["a", "b", "x.y", "elsewhere", ""];
        let firing: Vec<Firing> = picks
            .iter()
            .map(|&(n, node)| alert(names[n], &[("node", named[node])]))
            .collect();
        let mut shuffled = firing.clone();
        let len = shuffled.len();
        for i in (1..len).rev() {
            let j = (seed.wrapping_mul(i as u64 + 7) % (i as u64 + 1)) as usize;
            shuffled.swap(i, j);
        }
        let n = nodes(&[]);
        let s = n.scope();
        let h = holding(Gate::Alerts, &firing, &s);
        prop_assert_eq!(&h, &holding(Gate::Alerts, &shuffled, &s));
        let about_none = firing.iter().any(|f| !["a", "b", "x.y"].contains(&f.labels["node"].as_str()));
        prop_assert_eq!(h.cluster.is_some(), about_none);
        for (node, hold) in &h.nodes {
            prop_assert!(firing.iter().any(|f| &f.labels["node"] == node));
            prop_assert!(hold.message.len() < 200);
        }
    }
}
