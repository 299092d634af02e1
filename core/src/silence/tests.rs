use std::collections::BTreeMap;

use proptest::prelude::*;

use super::matchers::regex_escape;
use super::*;

const ME: &str = "kumaco/kumaco/kumaco";

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).unwrap()
}

fn rules() -> Rules {
    Rules {
        created_by: ME.into(),
        sets: parse_sets(true, &[]).unwrap(),
        lease: SignedDuration::from_mins(30),
        tail: SignedDuration::from_mins(5),
        while_recovering: None,
        in_progress: true,
        max_creates_per_minute: 60,
    }
}

fn cond(type_: &str, status: Status, reason: &str, at: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message: String::new(),
        last_transition_time: Some(t(at)),
        last_heartbeat_time: None,
    }
}

#[derive(Clone)]
struct Node {
    name: String,
    labels: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    availability: Availability,
}

fn node(name: &str, conditions: Vec<Condition>) -> Node {
    Node {
        name: name.into(),
        labels: BTreeMap::new(),
        conditions,
        availability: Availability::default(),
    }
}

fn in_progress(name: &str) -> Node {
    node(
        name,
        vec![cond(
            MAINTENANCE_IN_PROGRESS,
            Status::True,
            "MaintenanceStarted",
            -60,
        )],
    )
}

fn ended(name: &str, reason: &str, at: i64) -> Node {
    node(
        name,
        vec![cond(MAINTENANCE_IN_PROGRESS, Status::False, reason, at)],
    )
}

fn states(nodes: &[Node]) -> impl Iterator<Item = NodeState<'_>> {
    nodes.iter().map(|n| NodeState {
        name: &n.name,
        labels: &n.labels,
        conditions: &n.conditions,
        availability: n.availability,
    })
}

fn node_matcher(name: &str) -> Vec<Matcher> {
    vec![Matcher {
        name: "node".into(),
        value: name.into(),
        is_regex: false,
        is_equal: true,
    }]
}

fn silence(id: &str, node: &str, by: &str, starts: i64, ends: i64) -> Silence {
    Silence {
        id: id.into(),
        matchers: node_matcher(node),
        created_by: by.into(),
        starts_at: t(starts),
        ends_at: t(ends),
        state: State::Active,
    }
}

/// Alertmanager as far as the plan is concerned: creations, in-place extensions,
/// expiries (an expired silence stays listed).
fn apply(silences: &mut Vec<Silence>, actions: &[Action], now: Timestamp, next_id: &mut u32) {
    for a in actions {
        match a {
            Action::Create {
                matchers, ends_at, ..
            } => {
                *next_id += 1;
                silences.push(Silence {
                    id: format!("new-{next_id}"),
                    matchers: matchers.clone(),
                    created_by: ME.into(),
                    starts_at: now,
                    ends_at: *ends_at,
                    state: State::Active,
                });
            }
            Action::Extend { id, ends_at, .. } => {
                let s = silences.iter_mut().find(|s| &s.id == id).unwrap();
                assert_ne!(s.state, State::Expired, "extending an expired silence");
                s.ends_at = *ends_at;
            }
            Action::Expire { id, .. } => {
                let s = silences.iter_mut().find(|s| &s.id == id).unwrap();
                s.state = State::Expired;
                s.ends_at = now;
            }
        }
    }
}

#[test]
fn a_node_in_maintenance_gets_one_silence_for_a_lease() {
    let p = plan(
        &rules(),
        states(&[in_progress("a"), node("b", vec![])]),
        &[],
        t(0),
    );
    assert_eq!(p.held, 1);
    let [
        Action::Create {
            node,
            matchers,
            ends_at,
            comment,
        },
    ] = &p.actions[..]
    else {
        panic!("{p:?}")
    };
    assert_eq!((node.as_str(), *ends_at), ("a", t(1800)));
    assert_eq!(matchers, &node_matcher("a"));
    assert!(
        comment.contains(ME) && comment.contains("node a"),
        "{comment}"
    );
}

#[test]
fn renewed_only_when_less_than_half_the_lease_remains() {
    let r = rules();
    let held = [silence("1", "a", ME, -100, 901)];
    assert!(
        plan(&r, states(&[in_progress("a")]), &held, t(0))
            .actions
            .is_empty()
    );
    let held = [silence("1", "a", ME, -100, 899)];
    let p = plan(&r, states(&[in_progress("a")]), &held, t(0));
    assert!(
        matches!(&p.actions[..], [Action::Extend { id, ends_at, starts_at, .. }]
            if id == "1" && *ends_at == t(1800) && *starts_at == t(-100)),
        "{p:?}"
    );
}

#[test]
fn after_the_end_kept_for_the_tail_then_expired() {
    let r = rules();
    for reason in [
        "MaintenanceCompleted",
        "NodeRebooted",
        "MaintenanceWindowEnded",
    ] {
        let nodes = [ended("a", reason, -60)];
        let held = [silence("1", "a", ME, -600, 1000)];
        assert!(plan(&r, states(&nodes), &held, t(0)).actions.is_empty());
        // A silence shorter than the tail is pushed to its end.
        let short = [silence("1", "a", ME, -600, 100)];
        let p = plan(&r, states(&nodes), &short, t(0));
        assert!(
            matches!(&p.actions[..], [Action::Extend { ends_at, .. }] if *ends_at == t(240)),
            "{p:?}"
        );
        // None created for the tail.
        assert!(plan(&r, states(&nodes), &[], t(0)).actions.is_empty());
        let p = plan(&r, states(&nodes), &held, t(240));
        // Not held any more: its node is no longer among those with a silence.
        assert_eq!(
            p.actions,
            [Action::Expire {
                id: "1".into(),
                node: None
            }]
        );
        assert_eq!(p.held, 0);
    }
    // Any other False is no end: a node waiting was never in maintenance.
    let waiting = [ended("a", "WaitingForSlot", -60)];
    let held = [silence("1", "a", ME, -600, 1000)];
    let p = plan(&r, states(&waiting), &held, t(0));
    assert!(matches!(&p.actions[..], [Action::Expire { .. }]), "{p:?}");
}

#[test]
fn while_recovering_held_until_ready_and_uncordoned() {
    let mut r = rules();
    r.while_recovering = Some(SignedDuration::from_hours(2));
    let mut down = ended("a", "NodeRebooted", -3600);
    down.availability.ready = Some(Status::False);
    let p = plan(&r, states(&[down]), &[], t(0));
    assert!(matches!(&p.actions[..], [Action::Create { .. }]), "{p:?}");
    let mut cordoned = ended("a", "NodeRebooted", -3600);
    cordoned.availability.unschedulable = true;
    assert_eq!(plan(&r, states(&[cordoned]), &[], t(0)).actions.len(), 1);
    // Back: the tail is long over.
    let held = [silence("1", "a", ME, -600, 1000)];
    let back = ended("a", "NodeRebooted", -3600);
    let p = plan(&r, states(&[back]), &held, t(0));
    assert!(matches!(&p.actions[..], [Action::Expire { .. }]), "{p:?}");
}

/// A recovery silence covers the recovery from this maintenance, not a later outage: a
/// node seen back once (the end's message records it) gets no silence when it fails
/// again, and one that never came back gets none past `--silence-max-recovery`.
#[test]
fn a_recovery_silence_ends_with_the_recovery_or_its_bound() {
    let mut r = rules();
    r.while_recovering = Some(SignedDuration::from_mins(30));
    let down = |message: &str, ended_at: i64| {
        let mut n = ended("a", "NodeRebooted", ended_at);
        n.conditions[0].message = message.into();
        n.availability.ready = Some(Status::False);
        n
    };
    let recovering = down("the node rebooted; completed after 5m", -600);
    let p = plan(&r, states(&[recovering]), &[], t(0));
    assert!(matches!(&p.actions[..], [Action::Create { .. }]), "{p:?}");
    // Back after its maintenance (recorded), then NotReady again weeks later.
    let later = down(
        "the node rebooted; completed after 5m; recovered after 1m3s",
        -600,
    );
    assert_eq!(
        plan(&r, states(std::slice::from_ref(&later)), &[], t(0)).actions,
        []
    );
    let held = [silence("1", "a", ME, -600, 1000)];
    let p = plan(&r, states(&[later]), &held, t(0));
    assert!(
        matches!(&p.actions[..], [Action::Expire { .. }]),
        "the tail is over: the silence goes, {p:?}"
    );
    // Never back, past the bound: its own alerts page.
    let broken = down("the node rebooted; completed after 5m", -1800);
    assert_eq!(plan(&r, states(&[broken]), &[], t(0)).actions, []);
}

#[test]
fn without_in_progress_held_while_under_maintenance() {
    let mut r = rules();
    r.in_progress = false;
    let um = node(
        "a",
        vec![cond(
            UNDER_MAINTENANCE,
            Status::True,
            "MaintenanceWindow",
            -10,
        )],
    );
    assert_eq!(plan(&r, states(&[um]), &[], t(0)).held, 1);
    // An in-progress condition alone holds nothing then.
    assert_eq!(plan(&r, states(&[in_progress("a")]), &[], t(0)).held, 0);
    // After the window: kept for the tail; recovering keeps but never creates (a False
    // does not say a maintenance happened).
    r.while_recovering = Some(SignedDuration::from_hours(2));
    let mut after = node(
        "a",
        vec![cond(
            UNDER_MAINTENANCE,
            Status::False,
            "NoActiveMaintenanceWindow",
            -3600,
        )],
    );
    after.availability.ready = Some(Status::False);
    assert!(plan(&r, states(&[after]), &[], t(0)).actions.is_empty());
}

#[test]
fn others_silences_are_never_touched() {
    let theirs = [
        silence("x", "a", "kumaco/other/kumaco", -10, 5),
        silence("y", "zzz", "alice", -10, 5),
    ];
    let p = plan(&rules(), states(&[in_progress("a")]), &theirs, t(0));
    assert!(matches!(&p.actions[..], [Action::Create { .. }]), "{p:?}");
    assert!(
        plan(&rules(), states(&[]), &theirs, t(0))
            .actions
            .is_empty()
    );
}

#[test]
fn duplicates_expired_keeping_the_longest() {
    let held = [
        silence("1", "a", ME, -100, 1000),
        silence("2", "a", ME, -100, 1700),
        silence("3", "a", ME, -100, 1700),
    ];
    let p = plan(&rules(), states(&[in_progress("a")]), &held, t(0));
    let mut expired: Vec<&str> = p
        .actions
        .iter()
        .map(|a| match a {
            Action::Expire { id, .. } => id.as_str(),
            a => panic!("{a:?}"),
        })
        .collect();
    expired.sort();
    assert_eq!(expired, ["1", "3"]);
    assert_eq!(p.held, 1);
}

#[test]
fn silences_of_no_node_held_are_expired_and_expired_ones_ignored() {
    let mut old = silence("1", "gone", ME, -100, 1000);
    let p = plan(&rules(), states(&[]), std::slice::from_ref(&old), t(0));
    assert_eq!(
        p.actions,
        [Action::Expire {
            id: "1".into(),
            node: None
        }]
    );
    old.state = State::Expired;
    assert!(plan(&rules(), states(&[]), &[old], t(0)).actions.is_empty());
}

#[test]
fn creations_capped_per_minute_from_what_is_listed() {
    let mut r = rules();
    r.max_creates_per_minute = 2;
    let nodes: Vec<Node> = ["a", "b", "c", "d"].map(in_progress).into();
    // One created 30 s ago (since expired): one more now.
    let mut recent = silence("1", "x", ME, -30, -20);
    recent.state = State::Expired;
    let p = plan(&r, states(&nodes), &[recent], t(0));
    assert_eq!((p.actions.len(), p.capped, p.held), (1, 3, 1));
    assert!(matches!(&p.actions[0], Action::Create { node, .. } if node == "a"));
    // A minute later, two more.
    let mut older = silence("1", "x", ME, -61, -20);
    older.state = State::Expired;
    let p = plan(&r, states(&nodes), &[older], t(0));
    assert_eq!((p.actions.len(), p.capped), (2, 2));
}

#[test]
fn matcher_templates() {
    let set = MatcherSet::parse(
        r#"instance=~"{{name}}(:[0-9]+)?", zone="{{label:topology.kubernetes.io/zone}}",severity!="info""#,
    )
    .unwrap();
    let mut labels = BTreeMap::new();
    labels.insert(
        "topology.kubernetes.io/zone".to_string(),
        "eu-1".to_string(),
    );
    let rendered: Vec<String> = set
        .render("a.b", &labels)
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    // Sorted by label name; the node's name escaped in the regular expression.
    assert_eq!(
        rendered,
        [
            r#"instance=~"a\\.b(:[0-9]+)?""#,
            r#"severity!="info""#,
            r#"zone="eu-1""#,
        ]
    );
    // A missing label: no silence of that set for that node; the other sets still hold.
    let n = node("n", vec![]);
    assert!(set.render(&n.name, &n.labels).is_none());
    let mut r = rules();
    r.sets = parse_sets(true, &[set.to_string()]).unwrap();
    let p = plan(&r, states(&[in_progress("n")]), &[], t(0));
    assert!(
        matches!(&p.actions[..], [Action::Create { matchers, .. }] if *matchers == node_matcher("n")),
        "{p:?}"
    );
    assert_eq!(p.unrenderable, [("n".to_string(), set)]);
}

#[test]
fn sets_are_written_as_alertmanager_writes_them() {
    let one = |s: &str| MatcherSet::parse(s).unwrap().render("n", &BTreeMap::new());
    // Braces or none, blanks around commas, a comma inside a quoted value.
    assert_eq!(
        one(r#"{node="{{name}}", job=~"a{1,3}|b,c"}"#),
        one(r#"job=~"a{1,3}|b,c",node="{{name}}""#)
    );
    assert_eq!(
        one(r#"{node="{{name}}", job=~"a{1,3}|b,c"}"#)
            .unwrap()
            .len(),
        2
    );
    // An escaped quote does not end the value.
    assert_eq!(
        one(r#"node="{{name}}",x="a\",b""#).unwrap()[1].value,
        "a\",b"
    );
    // The default first, a set given twice held once, the default left out on purpose.
    let sets = parse_sets(
        true,
        &[
            r#"instance=~"{{name}}(:[0-9]+)?""#.into(),
            r#"{ instance=~"{{name}}(:[0-9]+)?" }"#.into(),
            DEFAULT_SET.into(),
        ],
    )
    .unwrap();
    let shown: Vec<String> = sets.iter().map(ToString::to_string).collect();
    assert_eq!(shown, [DEFAULT_SET, r#"instance=~"{{name}}(:[0-9]+)?""#]);
    assert!(parse_sets(false, &[]).unwrap().is_empty());
    // The older flag: its matchers are one set.
    let legacy = MatcherSet::from_matchers(&[
        r#"instance=~"{{name}}(:[0-9]+)?""#.into(),
        r#"severity!="info""#.into(),
    ])
    .unwrap();
    assert_eq!(legacy.render("n", &BTreeMap::new()).unwrap().len(), 2);
}

#[test]
fn bad_matchers_are_refused_with_reasons() {
    let err = |s: &str| MatcherSet::parse(s).unwrap_err().to_string();
    assert!(err("node").contains("expected LABEL OP"));
    assert!(err(r#"node="{{name}}"#).contains("expected LABEL OP"));
    assert!(err(r#"node="{{name}}","#).contains("expected LABEL OP"));
    assert!(err(r#"no-de="{{name}}""#).contains("not a Prometheus label name"));
    assert!(err(r#"node="{{host}}""#).contains("unknown placeholder {{host}}"));
    assert!(err(r#"job="node""#).contains("names the node"));
    assert_eq!(
        err(r#"node!="{{name}}",severity="warning""#),
        r#""node!=\"{{name}}\",severity=\"warning\"": node!="{{name}}" names the node in a negative matcher, which matches every other node's alerts: a silence must name what it mutes; write node="{{name}}" instead"#
    );
    assert!(err(r#"node="x",instance!~"{{name}}.*""#).contains("write instance=~"));
    assert!(err(r#"node="{{name}}",zone!="{{label:zone}}""#).contains("negative matcher"));
    // Positive, but not narrowing to the node: an alternation, an optional part, a
    // case-insensitive name.
    for wide in [
        r#"instance=~"{{name}}|any""#,
        r#"instance=~"({{name}})?x""#,
        r#"instance=~"(?i){{name}}""#,
        r#"node="""#,
    ] {
        assert!(err(wide).contains("no matcher names the node"), "{wide}");
    }
    // Narrowing: the name, or a node label, in what every match contains.
    for narrow in [
        r#"node="{{name}}""#,
        r#"instance=~"{{name}}(:[0-9]+)?""#,
        r#"host="{{label:kubernetes.io/hostname}}""#,
        r#"instance=~".*{{label:ip}}:9100""#,
    ] {
        assert!(MatcherSet::parse(narrow).is_ok(), "{narrow}");
    }
    assert_eq!(
        err(r#"instance=~"{{name}}(:[0-9]+""#),
        r#""instance=~\"{{name}}(:[0-9]+\"": a regular expression of the set does not compile: unclosed group"#
    );
    assert!(err(r#"node="{{name}}",node="x""#).contains("twice"));
    for empty in ["", " ", "{}", "{ }"] {
        assert!(err(empty).contains("no matchers"), "{empty:?}");
    }
    // Each set is checked alone: a set that does not name the node is refused even
    // beside one that does.
    let e = parse_sets(true, &[r#"job="node-exporter""#.into()]).unwrap_err();
    assert_eq!(e, MatcherError::NoName(r#"job="node-exporter""#.into()));
    let e = MatcherSet::from_matchers(&[r#"node="{{name}}""#.into(), r#"node="x""#.into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("twice"), "{e}");
    assert_eq!(
        MatcherSet::parse(r#" node = "a\"b{{name}}" "#)
            .unwrap()
            .render("x", &BTreeMap::new()),
        Some(vec![Matcher {
            name: "node".into(),
            value: "a\"bx".into(),
            is_regex: false,
            is_equal: true
        }])
    );
}

/// The default set and node-exporter's `instance`.
fn two_sets() -> Rules {
    let mut r = rules();
    r.sets = parse_sets(true, &[r#"instance=~"{{name}}(:[0-9]+)?""#.into()]).unwrap();
    r
}

fn instance_matcher(name: &str) -> Vec<Matcher> {
    vec![Matcher {
        name: "instance".into(),
        value: format!("{}(:[0-9]+)?", regex_escape(name)),
        is_regex: true,
        is_equal: true,
    }]
}

#[test]
fn one_silence_per_set_created_in_the_nodes_order_and_adopted() {
    let r = two_sets();
    let nodes = [in_progress("b"), in_progress("a")];
    let p = plan(&r, states(&nodes), &[], t(0));
    let created: Vec<(&str, &Vec<Matcher>)> = p
        .actions
        .iter()
        .map(|a| match a {
            Action::Create { node, matchers, .. } => (node.as_str(), matchers),
            a => panic!("{a:?}"),
        })
        .collect();
    assert_eq!(
        created,
        [
            ("a", &node_matcher("a")),
            ("a", &instance_matcher("a")),
            ("b", &node_matcher("b")),
            ("b", &instance_matcher("b")),
        ]
    );
    assert_eq!(p.held, 4);
    // The cap takes whole nodes first: a's two, then one of b's.
    let mut capped = two_sets();
    capped.max_creates_per_minute = 3;
    let p = plan(&capped, states(&nodes), &[], t(0));
    assert_eq!((p.actions.len(), p.capped), (3, 1));
    // A restarted kumaco finds them (in any order of matchers) and creates nothing.
    let mut listed = vec![
        silence("1", "a", ME, -100, 1000),
        silence("2", "b", ME, -100, 1000),
    ];
    for (id, n) in [("3", "a"), ("4", "b")] {
        let mut s = silence(id, n, ME, -100, 1000);
        s.matchers = instance_matcher(n);
        listed.push(s);
    }
    let p = plan(&r, states(&nodes), &listed, t(0));
    assert_eq!((p.actions.len(), p.held), (0, 4), "{p:?}");
    // A set removed from the flags: its silences expire, the others stay.
    let p = plan(&rules(), states(&nodes), &listed, t(0));
    let mut expired: Vec<&str> = p
        .actions
        .iter()
        .map(|a| match a {
            Action::Expire { id, node: None } => id.as_str(),
            a => panic!("{a:?}"),
        })
        .collect();
    expired.sort();
    assert_eq!((expired, p.held), (vec!["3", "4"], 2));
}

#[test]
fn sets_that_render_alike_share_one_silence() {
    // Two sets of one node alike (an empty label value): one silence.
    let mut r = rules();
    r.sets = parse_sets(true, &[r#"node="{{name}}{{label:suffix}}""#.into()]).unwrap();
    let mut a = in_progress("a");
    a.labels.insert("suffix".into(), String::new());
    let p = plan(&r, states(&[a]), &[], t(0));
    assert_eq!((p.actions.len(), p.held), (1, 1), "{p:?}");
    // Two nodes' sets alike (a's second set is na's first): one silence, held for the
    // node in maintenance, then for the longest tail, then expired.
    r.sets = parse_sets(true, &[r#"node="n{{name}}""#.into()]).unwrap();
    let a = ended("a", "MaintenanceCompleted", -60);
    let p = plan(&r, states(&[a.clone(), in_progress("na")]), &[], t(0));
    let created: Vec<(&str, &str)> = p
        .actions
        .iter()
        .map(|x| match x {
            Action::Create { node, matchers, .. } => (node.as_str(), matchers[0].value.as_str()),
            x => panic!("{x:?}"),
        })
        .collect();
    assert_eq!(created, [("na", "na"), ("na", "nna")]);
    let held = [silence("1", "na", ME, -600, 100)];
    let na_ended = ended("na", "MaintenanceCompleted", -200);
    let p = plan(&r, states(&[a.clone(), na_ended.clone()]), &held, t(0));
    assert!(
        matches!(&p.actions[..], [Action::Extend { node, ends_at, .. }]
            if node == "a" && *ends_at == t(240)),
        "{p:?}"
    );
    let p = plan(&r, states(&[a, na_ended]), &held, t(240));
    assert!(
        matches!(&p.actions[..], [Action::Expire { node: None, .. }]),
        "{p:?}"
    );
}

#[derive(Clone, Debug)]
enum NodeCase {
    Idle,
    InProgress,
    Ended { reason: usize, ago: i64, down: bool },
}

fn node_case() -> impl Strategy<Value = NodeCase> {
    prop_oneof![
        Just(NodeCase::Idle),
        Just(NodeCase::InProgress),
        (0usize..4, 0i64..900, any::<bool>()).prop_map(|(reason, ago, down)| NodeCase::Ended {
            reason,
            ago,
            down
        }),
    ]
}

fn silence_case() -> impl Strategy<Value = (usize, usize, bool, i64, i64, u8)> {
    // (node index, set index, ours, starts ago, ends in, state)
    (
        0usize..8,
        0usize..2,
        any::<bool>(),
        0i64..4000,
        -100i64..2000,
        0u8..3,
    )
}

/// Node names such that a node's `node="n{{name}}"` set is another node's default.
const NAMES: [&str; 8] = ["a", "na", "b", "nb", "nnb", "c", "nc", "d"];

/// `count` sets: the default, node-exporter's `instance`, one that may render another
/// node's default (`node="n{{name}}"`), and one that renders the node's own default when
/// its `suffix` label is empty.
fn sets(count: usize) -> Vec<MatcherSet> {
    let extra = [
        r#"instance=~"{{name}}(:[0-9]+)?""#.to_string(),
        r#"node="n{{name}}""#.to_string(),
        r#"node="{{name}}{{label:suffix}}""#.to_string(),
    ];
    parse_sets(true, &extra[..count - 1]).unwrap()
}

fn build(cases: &[(NodeCase, Option<bool>)]) -> Vec<Node> {
    let reasons = [
        "MaintenanceCompleted",
        "NodeRebooted",
        "MaintenanceWindowEnded",
        "WaitingForSlot",
    ];
    cases
        .iter()
        .zip(NAMES)
        .map(|((c, suffix), name)| {
            let mut n = match c {
                NodeCase::Idle => node(name, vec![]),
                NodeCase::InProgress => in_progress(name),
                NodeCase::Ended { reason, ago, .. } => ended(name, reasons[*reason], -ago),
            };
            if let NodeCase::Ended { down: true, .. } = c {
                n.availability.ready = Some(Status::False);
            }
            if let Some(empty) = suffix {
                let value = if *empty { "" } else { "x" };
                n.labels.insert("suffix".into(), value.into());
            }
            n
        })
        .collect()
}

/// Why the nodes hold one rendered silence, computed apart from `plan`.
#[derive(Default)]
struct Held {
    renewed: bool,
    create: bool,
    /// The latest end of a tail.
    until: Option<Timestamp>,
}

/// Each rendered silence the nodes call for, with every node's reason.
fn holds(r: &Rules, nodes: &[Node], now: Timestamp) -> BTreeMap<Vec<Matcher>, Held> {
    let mut out: BTreeMap<Vec<Matcher>, Held> = BTreeMap::new();
    for n in states(nodes) {
        let Some(h) = hold(r, &n, now) else { continue };
        for set in &r.sets {
            if let Some(key) = set.render(n.name, n.labels) {
                let held = out.entry(key).or_default();
                match h {
                    Hold::Renewed { create } => {
                        held.renewed = true;
                        held.create |= create;
                    }
                    Hold::Until(t) => held.until = held.until.max(Some(t)),
                }
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn a_plan_over_its_own_result_is_empty_and_holds_one_per_set_and_node(
        cases in proptest::collection::vec(
            (node_case(), proptest::option::of(any::<bool>())),
            0..8,
        ),
        listed in proptest::collection::vec(silence_case(), 0..12),
        recovering in any::<bool>(),
        cap in 1u32..5,
        set_count in 1usize..=4,
    ) {
        let mut r = rules();
        r.while_recovering = recovering.then_some(SignedDuration::from_hours(2));
        r.max_creates_per_minute = cap;
        r.sets = sets(set_count);
        let nodes = build(&cases);
        let now = t(0);
        let mut silences: Vec<Silence> = listed
            .iter()
            .enumerate()
            .map(|(i, &(n, set, ours, ago, ends, state))| {
                let name = NAMES[n];
                let mut s = silence(
                    &format!("s{i}"),
                    name,
                    if ours { ME } else { "someone" },
                    -ago,
                    ends,
                );
                if set == 1 {
                    s.matchers = instance_matcher(name);
                }
                s.state = match state {
                    0 => State::Active,
                    1 => State::Expired,
                    _ => State::Pending,
                };
                s
            })
            .collect();
        let before = silences.clone();
        let p = plan(&r, states(&nodes), &silences, now);
        let creates = p.actions.iter().filter(|a| matches!(a, Action::Create { .. })).count();
        let recent = before
            .iter()
            .filter(|s| s.created_by == ME && s.starts_at > now - SignedDuration::from_mins(1))
            .count() as u32;
        prop_assert!(creates as u32 <= cap.saturating_sub(recent));
        let mut id = 0;
        apply(&mut silences, &p.actions, now, &mut id);
        // Others' silences unchanged.
        for (a, b) in before.iter().zip(&silences) {
            if a.created_by != ME {
                prop_assert_eq!(a, b);
            }
        }
        // At most one live silence of ours per rendered set, and the count reported.
        let live: Vec<&Silence> = silences
            .iter()
            .filter(|s| s.created_by == ME && s.state != State::Expired)
            .collect();
        let mut keys: Vec<Vec<Matcher>> = live
            .iter()
            .map(|s| {
                let mut k = s.matchers.clone();
                k.sort();
                k
            })
            .collect();
        keys.sort();
        let len = keys.len();
        keys.dedup();
        prop_assert_eq!(len, keys.len(), "a duplicate: {:?}", live);
        prop_assert_eq!(p.held, live.len());
        // Every live one is held, for at least half a lease when renewed.
        let wanted = holds(&r, &nodes, now);
        for s in &live {
            let mut key = s.matchers.clone();
            key.sort();
            let Some(held) = wanted.get(&key) else {
                prop_assert!(false, "{s:?} live for no node held");
                continue;
            };
            if held.renewed {
                prop_assert!(s.ends_at.duration_since(now) >= r.lease / 2, "{s:?}");
            } else if let Some(t) = held.until {
                prop_assert!(s.ends_at >= t, "{s:?} ends before {t}");
            }
        }
        // Every silence a node in maintenance calls for exists, but for the capped.
        let missing = wanted
            .iter()
            .filter(|(k, h)| h.create && !keys.contains(k))
            .count();
        prop_assert_eq!(missing, p.capped);
        // Level-triggered: the next plan over the result changes nothing, bar the
        // creations the cap held back.
        let again = plan(&r, states(&nodes), &silences, now);
        prop_assert!(
            again.actions.iter().all(|a| matches!(a, Action::Create { .. })),
            "{:?}", again
        );
        prop_assert!(again.actions.is_empty() || p.capped > 0);
    }
}

#[test]
fn a_cluster_label_goes_into_every_silence_of_a_set() {
    let cluster = parse_plain_matcher(r#"cluster="prod-eu""#).unwrap();
    let set = MatcherSet::parse(r#"node="{{name}}""#)
        .unwrap()
        .with(std::slice::from_ref(&cluster))
        .unwrap();
    assert_eq!(set.to_string(), r#"node="{{name}}",cluster="prod-eu""#);
    let rendered = set.render("n1", &BTreeMap::new()).unwrap();
    assert_eq!(
        rendered.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [r#"cluster="prod-eu""#, r#"node="n1""#]
    );
    assert_eq!(set.name_label(), Some("node"));
    // A set that names the label already would match it twice.
    let twice = MatcherSet::parse(r#"node="{{name}}",cluster="x""#)
        .unwrap()
        .with(&[cluster])
        .unwrap_err();
    assert!(twice.to_string().contains("twice"), "{twice}");
}
