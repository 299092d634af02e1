//! Differential test: a window's `nodeSelector` in object form (`selector::object`)
//! against apimachinery's `metav1.LabelSelectorAsSelector`, its `String()` and `Matches`,
//! run by the oracle in `testenv/oracle`.
//!
//! Objects come from a proptest strategy (valid and invalid keys, values and operators;
//! fields absent, `null` or empty; keys shared by `matchLabels` and `matchExpressions`;
//! sometimes many requirements on few keys, or long value lists), plus hand-written
//! corners. Go gets each object as JSON; kumaco gets it as the text a ConfigMap would hold,
//! JSON or YAML in several layouts, sometimes after what YAML allows before a document (a
//! comment, `---`, a byte-order mark), through the same path a window's `nodeSelector`
//! takes (`selector::parse_string_or_object`). Go also reads that text as Kubernetes reads
//! YAML into its types (`sigs.k8s.io/yaml`, lenient). kumaco must agree with both on
//! accept/reject, on `String()`, on every `Matches`, and, where Go's error is the
//! unknown-operator one (the error text kumaco promises), on its text. Kumaco's decoding
//! of the text must also give back the object generated.
//!
//! Hand-written texts (`yaml_as_operators_write_it_reads_as_kubernetes_reads_it`) show
//! the rest against the lenient reader: YAML as people write it means the same to both,
//! and where kumaco is stricter on purpose (docs/configuration.md lists each place) Go
//! accepts, kumaco refuses and its error says what to write.
//!
//! Go iterates `matchLabels` in random order, so with more than 12 requirements of which
//! some share a key, Go's own `String()` varies from run to run: there the requirements
//! are compared as a multiset.
//!
//! `KUMACO_DIFF_CASES` sets the number of objects (default 100,000); `KUMACO_DIFF_SEED`
//! replays a run.

use std::collections::BTreeMap;
use std::time::Instant;

use kumaco::selector::object::{self, Expression, LabelSelectorObject};
use kumaco::selector::{self, NodeSelectorError, Selector};
use proptest::prelude::*;
use serde_json::{Value, json};
use testkit::diff::draw;
use testkit::oracle::{Answer, Oracle, Request};

const DEFAULT_CASES: usize = 100_000;
const BATCH: usize = 2_000;
const LABEL_SETS: usize = 4;

type Labels = BTreeMap<String, String>;

/// A field as written: absent, `null`, or a value.
#[derive(Clone, Debug)]
enum Field<T> {
    Absent,
    Null,
    Set(T),
}

impl<T: Default + Clone> Field<T> {
    fn value(&self) -> T {
        match self {
            Field::Set(v) => v.clone(),
            _ => T::default(),
        }
    }
}

#[derive(Clone, Debug)]
struct Expr {
    key: Field<String>,
    operator: Field<String>,
    values: Field<Vec<String>>,
}

#[derive(Clone, Debug)]
struct Obj {
    match_labels: Field<Vec<(String, String)>>,
    match_expressions: Field<Vec<Expr>>,
}

/// How kumaco is shown the object.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Json,
    JsonPretty,
    YamlBlock,
    YamlFlow,
}

/// What YAML allows before the object, as people write it.
#[derive(Clone, Copy, Debug)]
enum Prelude {
    None,
    Comment,
    DocumentStart,
    ByteOrderMark,
    All,
}

impl Prelude {
    const EVERY: [Prelude; 5] = [
        Prelude::None,
        Prelude::Comment,
        Prelude::DocumentStart,
        Prelude::ByteOrderMark,
        Prelude::All,
    ];

    fn text(self) -> &'static str {
        match self {
            Prelude::None => "",
            Prelude::Comment => "# the nodes of zone a\n",
            Prelude::DocumentStart => "---\n",
            Prelude::ByteOrderMark => "\u{feff}",
            Prelude::All => "\u{feff}# zone a\n\n---  # reboots\n",
        }
    }
}

struct Case {
    obj: Obj,
    layout: Layout,
    prelude: Prelude,
    labels: Vec<Labels>,
}

#[test]
fn label_selectors_agree_with_go() {
    let run = testkit::diff::DiffRun::from_env("diff_label_selector", DEFAULT_CASES);
    let started = Instant::now();
    let mut runner = run.runner();
    let strategy = (
        object_strategy(),
        layout(),
        prelude(),
        prop::collection::vec(label_set(), LABEL_SETS),
    );
    let mut oracle = Oracle::start().expect("starting the Go oracle");
    let mut mismatches = Vec::new();
    let mut stats = Stats::default();

    // The hand-written corners first, in every layout, after every prelude.
    let layouts = [
        Layout::Json,
        Layout::JsonPretty,
        Layout::YamlBlock,
        Layout::YamlFlow,
    ];
    let fixed: Vec<Case> = hard_cases()
        .into_iter()
        .flat_map(|obj| {
            layouts.into_iter().flat_map(move |layout| {
                let obj = obj.clone();
                Prelude::EVERY.map(move |prelude| Case {
                    obj: obj.clone(),
                    layout,
                    prelude,
                    labels: fixed_label_sets(),
                })
            })
        })
        .collect();
    compare(&mut oracle, &fixed, &mut stats, &mut mismatches);

    let mut drawn = 0;
    while drawn < run.cases {
        let cases: Vec<Case> = draw(&mut runner, &strategy, BATCH.min(run.cases - drawn))
            .into_iter()
            .map(|(obj, layout, prelude, labels)| Case {
                obj,
                layout,
                prelude,
                labels,
            })
            .collect();
        drawn += cases.len();
        compare(&mut oracle, &cases, &mut stats, &mut mismatches);
    }

    eprintln!(
        "diff_label_selector: compared {} objects ({} hand-written; {} accepted, {} rejected, \
         {} with Go's operator error text compared; {} matches and {} non-matches; {} \
         compared as multisets; {} JSON texts with characters YAML refuses) with Go, as JSON \
         and as Kubernetes reads the text, in {:.1?}, {} mismatches",
        stats.compared,
        fixed.len(),
        stats.accepted,
        stats.compared - stats.accepted,
        stats.operator_errors,
        stats.matched,
        stats.unmatched,
        stats.multisets,
        stats.unprintable,
        started.elapsed(),
        mismatches.len()
    );
    assert!(stats.accepted > stats.compared / 5, "too few valid objects");
    assert!(
        stats.compared - stats.accepted > stats.compared / 5,
        "too few invalid objects"
    );
    run.assert_agree("label selectors", stats.compared, &mismatches);
}

/// How kumaco reads a hand-written text, against Kubernetes' lenient reading of it.
enum Expect {
    /// Both accept it and select the same nodes.
    Same,
    /// Go accepts it; kumaco refuses on purpose, with an error holding this.
    Stricter(&'static str),
    /// Go refuses it (YAML 1.1 only); kumaco reads it, meaning the same as without it.
    Directive,
}

const NULL: &str = "nil LabelSelector, which selects no node; kumaco refuses a window for no \
                    node. Write {} or \"\" to select every node in scope";
const QUOTE: &str = "quote label keys and values like these";

#[test]
fn yaml_as_operators_write_it_reads_as_kubernetes_reads_it() {
    use Expect::{Directive, Same, Stricter};
    let cases: &[(&str, Expect)] = &[
        // What YAML allows before the object.
        ("# the zone-a nodes\nmatchLabels:\n  zone: a\n", Same),
        ("---\nmatchLabels:\n  zone: a\n", Same),
        ("--- # zone a\nmatchLabels: {zone: a}", Same),
        ("--- {matchLabels: {zone: a}}", Same),
        ("\u{feff}matchLabels: {zone: a}", Same),
        ("\u{feff}{\"matchLabels\": {\"zone\": \"a\"}}", Same),
        (
            "\u{feff}# c\n---\n# d\n\nmatchLabels:\n  zone: a  # trailing\n",
            Same,
        ),
        (
            "# c\n{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"a\", \"b\"]}]}",
            Same,
        ),
        (
            "---\nmatchExpressions:\n# the control plane stays\n- key: node-role\n  operator: DoesNotExist\n",
            Same,
        ),
        ("%YAML 1.1\n---\nmatchLabels: {zone: a}", Same),
        ("%YAML 1.2\n---\nmatchLabels: {zone: a}", Directive),
        // Quoted or tagged, a number is a string to both.
        ("matchLabels: {zone: \"1\"}", Same),
        ("matchLabels: {zone: !!str 1}", Same),
        ("matchLabels: null\nmatchExpressions: []", Same),
        ("{}", Same),
        // Go's nil selector: nothing selected.
        ("null", Stricter(NULL)),
        ("~", Stricter(NULL)),
        ("Null", Stricter(NULL)),
        ("NULL\n", Stricter(NULL)),
        ("# no nodes yet", Stricter(NULL)),
        ("---", Stricter(NULL)),
        ("--- # c\n", Stricter(NULL)),
        ("\u{feff}", Stricter(NULL)),
        // Go ignores an unknown field (here: every node) and matches field names in any
        // case.
        (
            "matchLabel: {zone: a}",
            Stricter("unknown field `matchLabel`, expected one of matchLabels, matchExpressions"),
        ),
        (
            "matchlabels: {zone: a}",
            Stricter("field names are case-sensitive"),
        ),
        (
            "matchExpressions: [{key: zone, Operator: In, values: [a]}]",
            Stricter("field names are case-sensitive"),
        ),
        // Go keeps the last of repeated keys.
        (
            "matchLabels: {zone: a, zone: b}",
            Stricter("write each key once"),
        ),
        // Go turns unquoted YAML 1.1 numbers, booleans and nulls into other text.
        ("matchLabels: {zone: yes}", Stricter(QUOTE)),
        ("matchLabels: {zone: 007}", Stricter(QUOTE)),
        ("matchLabels: {zone: 1.0}", Stricter(QUOTE)),
        ("matchLabels: {1: a}", Stricter(QUOTE)),
        (
            "matchExpressions: [{key: zone, operator: In, values: [on, 0x1F]}]",
            Stricter(QUOTE),
        ),
        (
            "matchLabels: {zone: }",
            Stricter("write \"\" for an empty label value"),
        ),
        (
            "matchLabels: {zone: ~}",
            Stricter("write \"\" for an empty label value"),
        ),
        // Go expands anchors, aliases and merge keys and reads the first document only.
        (
            "matchLabels: &z {zone: a}",
            Stricter("an anchor (&) or alias (*) is not read"),
        ),
        (
            "matchLabels:\n  <<: {zone: a}",
            Stricter("a merge key (<<) is not read"),
        ),
        (
            "matchLabels: {zone: a}\n---\nmatchLabels: {zone: b}",
            Stricter("a second YAML document"),
        ),
        (
            "---\n---\nmatchLabels: {zone: a}",
            Stricter("a second YAML document"),
        ),
    ];
    let labels = [
        ("zone", "a"),
        ("zone", "b"),
        ("zone", "1"),
        ("zone", "true"),
        ("zone", "7"),
        ("zone", ""),
        ("node-role", "x"),
    ]
    .map(|(k, v)| Labels::from([(k.to_owned(), v.to_owned())]))
    .into_iter()
    .chain([Labels::new()])
    .collect::<Vec<_>>();
    let mut oracle = Oracle::start().expect("starting the Go oracle");
    let requests: Vec<Request> = cases
        .iter()
        .map(|(text, _)| Request::LabelSelectorYaml {
            input: text.to_string(),
            labels: labels.clone(),
        })
        .collect();
    let answers = oracle.ask(&requests).expect("asking the Go oracle");
    let mut mismatches = Vec::new();
    for ((text, expect), go) in cases.iter().zip(&answers) {
        let ours = selector::parse_string_or_object(text);
        let why = match (expect, &ours) {
            (Same, Ok(selector)) => {
                let matches: Vec<bool> = labels.iter().map(|l| selector.matches(l)).collect();
                (!go.ok
                    || go.nothing
                    || go.string.as_deref() != Some(&selector.to_string())
                    || go.matches.as_ref() != Some(&matches))
                .then(|| format!("not the same selector: ours {selector} {matches:?}"))
            }
            (Stricter(says), Err(e)) => {
                let e = e.to_string();
                if !go.ok {
                    Some("Go refuses it too: not a place where kumaco is stricter".into())
                } else if *says == NULL && !go.nothing {
                    Some("Go's reading is not the nil selector".into())
                } else {
                    (!e.contains(says)).then(|| format!("our error lacks {says:?}: {e}"))
                }
            }
            (Directive, Ok(selector)) => (go.ok
                || Some(selector.to_string()) != ours_without_directive(text))
            .then(|| format!("Go reads it, or ours differs without the directive: {selector}")),
            (_, ours) => Some(format!("ours: {ours:?}")),
        };
        if let Some(why) = why {
            mismatches.push(format!("{text:?}: {why}\n    go: {go:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} texts:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches.join("\n")
    );
}

/// The text after its `%YAML` directive line, as kumaco reads it.
fn ours_without_directive(text: &str) -> Option<String> {
    let (_, rest) = text.split_once('\n')?;
    selector::parse_string_or_object(rest)
        .ok()
        .map(|s| s.to_string())
}

#[derive(Default)]
struct Stats {
    compared: usize,
    accepted: usize,
    operator_errors: usize,
    matched: usize,
    unmatched: usize,
    multisets: usize,
    unprintable: usize,
}

fn compare(oracle: &mut Oracle, cases: &[Case], stats: &mut Stats, mismatches: &mut Vec<String>) {
    let texts: Vec<String> = cases
        .iter()
        .map(|c| format!("{}{}", c.prelude.text(), render(&c.obj, c.layout)))
        .collect();
    // Per case: Go's reading of the object as JSON, then Kubernetes' reading of the text.
    let requests: Vec<Request> = cases
        .iter()
        .zip(&texts)
        .flat_map(|(c, text)| {
            [
                Request::LabelSelector {
                    object: to_json(&c.obj),
                    labels: c.labels.clone(),
                },
                Request::LabelSelectorYaml {
                    input: text.clone(),
                    labels: c.labels.clone(),
                },
            ]
        })
        .collect();
    let answers = oracle.ask(&requests).expect("asking the Go oracle");
    for ((case, text), go) in cases.iter().zip(texts).zip(answers.chunks(2)) {
        let [go, kubernetes] = go else {
            unreachable!("two answers per case")
        };
        stats.compared += 1;
        let ours = selector::parse_string_or_object(&text);
        if let Ok(s) = &ours {
            stats.accepted += 1;
            for set in &case.labels {
                if s.matches(set) {
                    stats.matched += 1;
                } else {
                    stats.unmatched += 1;
                }
            }
        }
        let why = if !object::is_object_form(&text) {
            Some("the text is not recognised as the object form".to_owned())
        } else {
            match object::decode(&text) {
                Ok(decoded) if decoded == expected(&case.obj) => {
                    disagreement(go, &ours, case, stats).or_else(|| {
                        disagreement(kubernetes, &ours, case, &mut Stats::default())
                            .map(|why| format!("against Kubernetes' reading of the text: {why}"))
                    })
                }
                Ok(decoded) => Some(format!("decoded as {decoded:?}")),
                // YAML refuses some characters JSON allows raw (DEL, C1 controls); no
                // label key, value or operator may hold them, so Go rejects those too.
                Err(_) if !go.ok && !yaml_printable(&text) => {
                    stats.unprintable += 1;
                    None
                }
                Err(e) => Some(format!("the text does not decode: {e}")),
            }
        };
        if let Some(why) = why {
            mismatches.push(format!(
                "object {} as {:?} after {:?} with labels {:?}: {why}\n    text: {text:?}\n    \
                 go:   {go:?}\n    kubernetes: {kubernetes:?}\n    rust: {ours:?}",
                to_json(&case.obj),
                case.layout,
                case.prelude,
                case.labels
            ));
        }
    }
}

fn disagreement(
    go: &Answer,
    ours: &Result<Selector, NodeSelectorError>,
    case: &Case,
    stats: &mut Stats,
) -> Option<String> {
    match (go.ok, ours) {
        (true, Ok(selector)) => {
            let parts: Vec<String> = selector
                .requirements()
                .iter()
                .map(ToString::to_string)
                .collect();
            let keys: Vec<&str> = selector.requirements().iter().map(|r| r.key()).collect();
            let mut distinct = keys.clone();
            distinct.sort_unstable();
            distinct.dedup();
            if keys.len() <= 12 || distinct.len() == keys.len() {
                if go.string.as_deref() != Some(selector.to_string().as_str()) {
                    return Some(format!(
                        "different String(): ours is {:?}",
                        selector.to_string()
                    ));
                }
            } else {
                stats.multisets += 1;
                let mut theirs = go.parts.clone().unwrap_or_default();
                let mut ours = parts.clone();
                theirs.sort();
                ours.sort();
                if theirs != ours {
                    return Some(format!("different requirements: ours are {parts:?}"));
                }
            }
            let ours: Vec<bool> = case
                .labels
                .iter()
                .map(|set| selector.matches(set))
                .collect();
            let go_matches = go.matches.clone().unwrap_or_default();
            (go_matches != ours).then(|| format!("different Matches: ours are {ours:?}"))
        }
        (false, Err(e)) => {
            let go_error = go.error.as_deref().unwrap_or_default();
            if go_error.starts_with("bad request") {
                return Some(format!("the oracle refused the request: {go_error}"));
            }
            if go_error.ends_with("is not a valid label selector operator") {
                stats.operator_errors += 1;
                if !e.to_string().contains(go_error) {
                    return Some(format!("our error does not contain Go's {go_error:?}"));
                }
            }
            None
        }
        (true, Err(e)) => Some(format!("Go accepts, we reject: {e}")),
        (false, Ok(_)) => Some("Go rejects, we accept".into()),
    }
}

// ---------------------------------------------------------------------------------------
// The object as Go gets it, as kumaco should decode it, and as kumaco gets it

fn to_json(obj: &Obj) -> Value {
    fn field<T>(
        out: &mut serde_json::Map<String, Value>,
        name: &str,
        f: &Field<T>,
        v: impl Fn(&T) -> Value,
    ) {
        match f {
            Field::Absent => {}
            Field::Null => {
                out.insert(name.into(), Value::Null);
            }
            Field::Set(x) => {
                out.insert(name.into(), v(x));
            }
        }
    }
    let mut out = serde_json::Map::new();
    field(&mut out, "matchLabels", &obj.match_labels, |labels| {
        Value::Object(
            labels
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        )
    });
    field(
        &mut out,
        "matchExpressions",
        &obj.match_expressions,
        |exprs| {
            Value::Array(
                exprs
                    .iter()
                    .map(|e| {
                        let mut m = serde_json::Map::new();
                        field(&mut m, "key", &e.key, |k| json!(k));
                        field(&mut m, "operator", &e.operator, |o| json!(o));
                        field(&mut m, "values", &e.values, |v| json!(v));
                        Value::Object(m)
                    })
                    .collect(),
            )
        },
    );
    Value::Object(out)
}

fn expected(obj: &Obj) -> LabelSelectorObject {
    LabelSelectorObject {
        match_labels: obj.match_labels.value().into_iter().collect(),
        match_expressions: obj
            .match_expressions
            .value()
            .iter()
            .map(|e| Expression {
                key: e.key.value(),
                operator: e.operator.value(),
                values: e.values.value(),
            })
            .collect(),
    }
}

/// Whether YAML allows every character of `text` (its `c-printable`).
fn yaml_printable(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}')
            || ('\u{a0}'..='\u{d7ff}').contains(&c)
            || ('\u{e000}'..='\u{fffd}').contains(&c)
            || c >= '\u{10000}'
    })
}

/// A string as YAML: plain where that is unambiguous, else double-quoted (YAML's
/// double-quoted escapes include JSON's).
fn yaml_string(s: &str) -> String {
    let plain = s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'/'))
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "nan" | "inf"
        );
    if plain {
        return s.to_owned();
    }
    // Double-quoted, with what YAML does not allow raw escaped.
    serde_json::to_string(s)
        .unwrap()
        .chars()
        .map(|c| {
            if yaml_printable(&c.to_string()) {
                c.to_string()
            } else {
                format!("\\u{:04x}", c as u32)
            }
        })
        .collect()
}

fn yaml_field<T>(f: &Field<T>, set: impl Fn(&T) -> String) -> Option<String> {
    match f {
        Field::Absent => None,
        Field::Null => Some("null".to_owned()),
        Field::Set(x) => Some(set(x)),
    }
}

fn flow_list(values: &[String]) -> String {
    format!(
        "[{}]",
        values
            .iter()
            .map(|v| yaml_string(v))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn flow_map(labels: &[(String, String)]) -> String {
    format!(
        "{{{}}}",
        labels
            .iter()
            .map(|(k, v)| format!("{}: {}", yaml_string(k), yaml_string(v)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn flow_expr(e: &Expr) -> String {
    let fields: Vec<String> = [
        yaml_field(&e.key, |k| yaml_string(k)).map(|v| format!("key: {v}")),
        yaml_field(&e.operator, |o| yaml_string(o)).map(|v| format!("operator: {v}")),
        yaml_field(&e.values, |v| flow_list(v)).map(|v| format!("values: {v}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    format!("{{{}}}", fields.join(", "))
}

fn render(obj: &Obj, layout: Layout) -> String {
    let json = to_json(obj);
    let empty = json.as_object().is_some_and(serde_json::Map::is_empty);
    match layout {
        Layout::Json => json.to_string(),
        Layout::JsonPretty => serde_json::to_string_pretty(&json).unwrap(),
        _ if empty => "{}".into(),
        Layout::YamlFlow => {
            let fields: Vec<String> = [
                yaml_field(&obj.match_labels, |l| flow_map(l)).map(|v| format!("matchLabels: {v}")),
                yaml_field(&obj.match_expressions, |es| {
                    format!(
                        "[{}]",
                        es.iter().map(flow_expr).collect::<Vec<_>>().join(", ")
                    )
                })
                .map(|v| format!("matchExpressions: {v}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            format!("{{{}}}", fields.join(", "))
        }
        Layout::YamlBlock => {
            let mut out = String::new();
            match &obj.match_labels {
                Field::Absent => {}
                Field::Null => out.push_str("matchLabels: ~\n"),
                Field::Set(labels) if labels.is_empty() => out.push_str("matchLabels: {}\n"),
                Field::Set(labels) => {
                    out.push_str("matchLabels:\n");
                    for (k, v) in labels {
                        out.push_str(&format!("  {}: {}\n", yaml_string(k), yaml_string(v)));
                    }
                }
            }
            match &obj.match_expressions {
                Field::Absent => {}
                Field::Null => out.push_str("matchExpressions:\n"),
                Field::Set(es) if es.is_empty() => out.push_str("matchExpressions: []\n"),
                Field::Set(es) => {
                    out.push_str("matchExpressions:\n");
                    for (i, e) in es.iter().enumerate() {
                        // Alternately a block mapping with block values and a flow one.
                        if i % 2 == 1 {
                            out.push_str(&format!("- {}\n", flow_expr(e)));
                            continue;
                        }
                        let mut lines = Vec::new();
                        if let Some(k) = yaml_field(&e.key, |k| yaml_string(k)) {
                            lines.push(format!("key: {k}"));
                        }
                        if let Some(o) = yaml_field(&e.operator, |o| yaml_string(o)) {
                            lines.push(format!("operator: {o}"));
                        }
                        match &e.values {
                            Field::Absent => {}
                            Field::Null => lines.push("values: null".into()),
                            Field::Set(v) if v.is_empty() => lines.push("values: []".into()),
                            Field::Set(v) => {
                                lines.push("values:".into());
                                for value in v {
                                    lines.push(format!("- {}", yaml_string(value)));
                                }
                            }
                        }
                        if lines.is_empty() {
                            out.push_str("- {}\n");
                            continue;
                        }
                        for (j, line) in lines.iter().enumerate() {
                            let lead = if j == 0 { "- " } else { "  " };
                            out.push_str(&format!("{lead}{line}\n"));
                        }
                    }
                }
            }
            out
        }
    }
}

// ---------------------------------------------------------------------------------------
// Generators

/// Keys and values shared by the objects and the label sets, so matches are decided both
/// ways.
const KEYS: &[&str] = &["a", "b", "c", "kured.dev/x", "in", "notin", "x.y_z", "A-1"];
const VALUES: &[&str] = &["", "a", "b", "1", "10", "007", "in", "x-y", "A.b_c"];
const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        3 => "[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,8}[a-zA-Z0-9])?",
        1 => "[a-z0-9]([-a-z0-9.]{0,10}[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,4}[a-zA-Z0-9])?",
        1 => "[-a-zA-Z0-9_./$é :{}\"#]{0,8}",
        1 => prop::sample::select(vec![62usize, 63, 64]).prop_map(|n| "k".repeat(n)),
        1 => (prop::sample::select(vec![252usize, 253, 254]), prop::sample::select(vec![63usize, 64]))
            .prop_map(|(p, n)| format!("{}.io/{}", "p".repeat(p - 3), "n".repeat(n))),
        1 => prop::sample::select(vec![
            "", "a..b", "-a", "a-", "_a", "a_", ".a", "A.com/b", "a.-b/c", "a/b/c", "/a", "a/",
            "a b", "é", "a\tb", "yes", "null", "3",
        ]).prop_map(str::to_owned),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
        3 => "[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,8}[a-zA-Z0-9])?",
        1 => "[-a-zA-Z0-9_.$é/ :\"\\\\]{1,6}",
        1 => prop::sample::select(vec![62usize, 63, 64]).prop_map(|n| "v".repeat(n)),
        1 => prop::sample::select(vec!["-1", " a", "a ", "true", "~", "\n", "a,b", "(a)"])
            .prop_map(str::to_owned),
    ]
}

fn operator() -> impl Strategy<Value = Field<String>> {
    prop_oneof![
        24 => prop::sample::select(OPERATORS.to_vec()).prop_map(|o| Field::Set(o.to_owned())),
        3 => prop::sample::select(vec![
            "in", "notin", "exists", "doesnotexist", "IN", "NOTIN", "Gt", "Lt", "=", "!=",
            "", " In", "In ", "In\n", "é", "\u{a0}In", "\u{200b}", "\u{1}", "\"In\"", "\\",
            "Exists\t", "\u{7f}", "\u{e000}", "\u{10ffff}",
        ]).prop_map(|o| Field::Set(o.to_owned())),
        1 => prop_oneof![Just(Field::Absent), Just(Field::Null)],
    ]
}

fn field<T: std::fmt::Debug + Clone>(
    set: impl Strategy<Value = T>,
) -> impl Strategy<Value = Field<T>> {
    prop_oneof![
        12 => set.prop_map(Field::Set),
        1 => Just(Field::Absent),
        1 => Just(Field::Null),
    ]
}

fn values() -> impl Strategy<Value = Field<Vec<String>>> {
    prop_oneof![
        10 => field(prop::collection::vec(value(), 0..4)),
        1 => (1usize..300).prop_map(|n| Field::Set((0..n).map(|i| format!("v{i}")).collect())),
    ]
}

fn expression() -> impl Strategy<Value = Expr> {
    (prop_oneof![12 => key().prop_map(Field::Set), 1 => Just(Field::Absent), 1 => Just(Field::Null)], operator(), values())
        .prop_map(|(key, operator, values)| Expr {
            key,
            operator,
            values,
        })
}

/// Expressions shaped to be valid more often: `Exists`/`DoesNotExist` without values.
fn fitting_expression() -> impl Strategy<Value = Expr> {
    (expression(), prop::bool::weighted(0.8)).prop_map(|(mut e, fit)| {
        if let (true, Field::Set(op)) = (fit, &e.operator) {
            match op.as_str() {
                "Exists" | "DoesNotExist" => e.values = Field::Absent,
                "In" | "NotIn" if e.values.value().is_empty() => {
                    e.values = Field::Set(vec!["a".into()])
                }
                _ => {}
            }
        }
        e
    })
}

fn match_labels() -> impl Strategy<Value = Field<Vec<(String, String)>>> {
    field(prop::collection::btree_map(key(), value(), 0..5).prop_map(|m| m.into_iter().collect()))
}

fn object_strategy() -> impl Strategy<Value = Obj> {
    let few = (
        match_labels(),
        field(prop::collection::vec(fitting_expression(), 0..5)),
    )
        .prop_map(|(match_labels, match_expressions)| Obj {
            match_labels,
            match_expressions,
        });
    // Many requirements on few keys: Go's unstable sort shows in String().
    let many_keys = prop::sample::select(vec!["a", "b", "c"]);
    let many = (
        prop::collection::btree_map(
            many_keys.clone(),
            prop::sample::select(vec!["x", "y"]),
            0..3,
        ),
        prop::collection::vec(
            (
                many_keys,
                prop::sample::select(OPERATORS.to_vec()),
                prop::collection::vec(prop::sample::select(vec!["x", "y", "1"]), 1..3),
            ),
            10..30,
        ),
    )
        .prop_map(|(labels, exprs)| Obj {
            match_labels: Field::Set(
                labels
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            ),
            match_expressions: Field::Set(
                exprs
                    .into_iter()
                    .map(|(k, op, vs)| Expr {
                        key: Field::Set(k.to_owned()),
                        operator: Field::Set(op.to_owned()),
                        values: if op.starts_with("In") || op.starts_with("NotIn") {
                            Field::Set(vs.into_iter().map(str::to_owned).collect())
                        } else {
                            Field::Absent
                        },
                    })
                    .collect(),
            ),
        });
    prop_oneof![12 => few, 1 => many]
}

fn layout() -> impl Strategy<Value = Layout> {
    prop::sample::select(vec![
        Layout::Json,
        Layout::JsonPretty,
        Layout::YamlBlock,
        Layout::YamlFlow,
    ])
}

fn prelude() -> impl Strategy<Value = Prelude> {
    prop_oneof![
        4 => Just(Prelude::None),
        1 => prop::sample::select(Prelude::EVERY.to_vec()),
    ]
}

fn label_set() -> impl Strategy<Value = Labels> {
    prop_oneof![
        1 => Just(Labels::new()),
        6 => prop::collection::btree_map(
            prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
            prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
            0..6,
        ),
    ]
}

fn fixed_label_sets() -> Vec<Labels> {
    let set = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    vec![
        Labels::new(),
        set(&[("a", "x"), ("b", "y")]),
        set(&[("a", ""), ("kured.dev/x", "1")]),
        set(&[("a", "y"), ("b", "x"), ("c", "1")]),
    ]
}

// ---------------------------------------------------------------------------------------
// Hand-written corners

fn s(x: &str) -> Field<String> {
    Field::Set(x.to_owned())
}

fn expr(key: &str, op: &str, values: Field<Vec<&str>>) -> Expr {
    Expr {
        key: s(key),
        operator: s(op),
        values: match values {
            Field::Absent => Field::Absent,
            Field::Null => Field::Null,
            Field::Set(v) => Field::Set(v.into_iter().map(str::to_owned).collect()),
        },
    }
}

fn obj(labels: Field<Vec<(&str, &str)>>, exprs: Field<Vec<Expr>>) -> Obj {
    Obj {
        match_labels: match labels {
            Field::Absent => Field::Absent,
            Field::Null => Field::Null,
            Field::Set(v) => Field::Set(
                v.into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
            ),
        },
        match_expressions: exprs,
    }
}

fn hard_cases() -> Vec<Obj> {
    use Field::{Absent, Null, Set};
    let long = |n: usize| "v".repeat(n);
    let (v63, v64) = (long(63), long(64));
    let prefix253 = format!("{}/a", "p".repeat(253));
    let prefix254 = format!("{}/a", "p".repeat(254));
    let huge: Vec<String> = (0..400).map(|i| format!("v{i}")).collect();
    let mut cases = vec![
        // Empty and nil-ish.
        obj(Absent, Absent),
        obj(Set(vec![]), Absent),
        obj(Absent, Set(vec![])),
        obj(Null, Null),
        obj(Set(vec![]), Set(vec![])),
        // Values: nil, empty, one, duplicates.
        obj(Absent, Set(vec![expr("a", "In", Null)])),
        obj(Absent, Set(vec![expr("a", "In", Set(vec![]))])),
        obj(Absent, Set(vec![expr("a", "In", Absent)])),
        obj(Absent, Set(vec![expr("a", "NotIn", Set(vec![]))])),
        obj(Absent, Set(vec![expr("a", "In", Set(vec![""]))])),
        obj(Absent, Set(vec![expr("a", "In", Set(vec!["x", "x", "b"]))])),
        obj(Absent, Set(vec![expr("a", "NotIn", Set(vec!["y", "x"]))])),
        obj(Absent, Set(vec![expr("a", "Exists", Null)])),
        obj(Absent, Set(vec![expr("a", "Exists", Set(vec![]))])),
        obj(Absent, Set(vec![expr("a", "Exists", Set(vec!["x"]))])),
        obj(Absent, Set(vec![expr("a", "DoesNotExist", Set(vec![""]))])),
        // Operators.
        obj(Absent, Set(vec![expr("a", "in", Set(vec!["x"]))])),
        obj(Absent, Set(vec![expr("a", "Gt", Set(vec!["1"]))])),
        obj(Absent, Set(vec![expr("a", "", Absent)])),
        obj(Absent, Set(vec![expr("a b", "in", Set(vec!["x"]))])),
        obj(
            Absent,
            Set(vec![
                expr("a", "In", Set(vec!["x y"])),
                expr("b", "in", Absent),
            ]),
        ),
        obj(Set(vec![("a b", "x")]), Set(vec![expr("b", "in", Absent)])),
        // The same key in both, and twice in the expressions.
        obj(
            Set(vec![("a", "x")]),
            Set(vec![
                expr("a", "Exists", Absent),
                expr("a", "NotIn", Set(vec!["y"])),
                expr("a", "In", Set(vec!["x"])),
            ]),
        ),
        // Keys and values.
        obj(Set(vec![("", "x")]), Absent),
        obj(Set(vec![("a", "")]), Absent),
        obj(Set(vec![("A.b/c", "x")]), Absent),
        obj(Set(vec![("a/b/c", "x")]), Absent),
        obj(Set(vec![("/a", "x")]), Absent),
        obj(Set(vec![("a/", "x")]), Absent),
        obj(Set(vec![("a", "-x")]), Absent),
        obj(Set(vec![("é", "x")]), Absent),
        obj(Set(vec![("a", "é")]), Absent),
    ];
    for key in [&prefix253, &prefix254, &"k".repeat(63), &"k".repeat(64)] {
        cases.push(obj(Set(vec![(key.as_str(), "x")]), Absent));
    }
    for value in [&v63, &v64] {
        cases.push(obj(Set(vec![("a", value.as_str())]), Absent));
        cases.push(obj(
            Absent,
            Set(vec![expr("a", "In", Set(vec!["x", value]))]),
        ));
    }
    cases.push(obj(
        Absent,
        Set(vec![expr(
            "a",
            "In",
            Set(huge.iter().map(String::as_str).collect()),
        )]),
    ));
    // 13+ requirements on distinct keys (sorted), and on few keys (Go's unstable sort).
    cases.push(obj(
        Set((0..8)
            .map(|i| (["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"][i], "x"))
            .collect()),
        Set((0..8)
            .map(|i| expr(&format!("e{}", 7 - i), "Exists", Absent))
            .collect()),
    ));
    cases.push(obj(
        Set(vec![("a", "x"), ("b", "y")]),
        Set((0..14)
            .map(|i| expr(["a", "b"][i % 2], "In", Set(vec!["x"])))
            .collect()),
    ));
    cases
}
