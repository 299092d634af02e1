//! Differential test: `kumaco::selector` against apimachinery's `labels.Parse`,
//! `Selector.String()` and `Selector.Matches`, run by the oracle in `testenv/oracle`.
//!
//! Selectors come from proptest strategies (grammar-shaped with wrong parts mixed in,
//! token soup, and junk), generated in bulk from one seed and sent to one oracle process
//! in batches, each with several label sets drawn from the same small alphabet of keys
//! and values as the selectors, so that matches come out both true and false. Both sides
//! must agree on accept/reject, on `String()` and on every `Matches`. Every input that
//! `selector::object::is_object_form` would read as a window's `nodeSelector` in object
//! form must be one Go rejects: the object form takes nothing from the string form but
//! YAML's null (`null`, `Null`, `NULL`: the label of that name exists), taken on purpose.
//!
//! `KUMACO_DIFF_CASES` sets the number of selectors (default 100,000); `KUMACO_DIFF_SEED`
//! replays a run (the seed is printed at the start of every run).

use std::collections::BTreeMap;
use std::time::Instant;

use kumaco::selector::{self, Selector, SelectorError, object};
use proptest::prelude::*;
use testkit::diff::draw;
use testkit::oracle::{Answer, Oracle, Request};

const DEFAULT_CASES: usize = 100_000;
const BATCH: usize = 4_000;
const LABEL_SETS: usize = 4;

type Labels = BTreeMap<String, String>;

#[test]
fn selectors_agree_with_go() {
    let run = testkit::diff::DiffRun::from_env("diff_selector", DEFAULT_CASES);
    let cases = run.cases;

    let started = Instant::now();
    let mut runner = run.runner();
    let strategy = (
        selector_input(),
        prop::collection::vec(label_set(), LABEL_SETS),
    );
    let mut oracle = Oracle::start().expect("starting the Go oracle");
    let mut mismatches = Vec::new();
    let (mut compared, mut accepted, mut matched, mut unmatched, mut objects) = (0, 0, 0, 0, 0);
    while compared < cases {
        let inputs: Vec<(String, Vec<Labels>)> =
            draw(&mut runner, &strategy, BATCH.min(cases - compared));
        let requests: Vec<Request> = inputs
            .iter()
            .map(|(input, labels)| Request::Selector {
                input: input.clone(),
                labels: labels.clone(),
            })
            .collect();
        let answers = oracle.ask(&requests).expect("asking the Go oracle");
        for ((input, labels), go) in inputs.iter().zip(&answers) {
            if object::is_object_form(input) && !object::is_yaml_null(input) {
                objects += 1;
                if go.ok {
                    mismatches.push(format!(
                        "input {input:?} reads as the object form, but Go accepts it as a \
                         string selector: {go:?}"
                    ));
                }
            }
            let ours = selector::parse(input);
            if let Ok(selector) = &ours {
                accepted += 1;
                for set in labels {
                    if selector.matches(set) {
                        matched += 1;
                    } else {
                        unmatched += 1;
                    }
                }
            }
            if let Some(why) = disagreement(go, &ours, labels) {
                mismatches.push(format!(
                    "input {input:?} with labels {labels:?}: {why}\n    go:   {go:?}\n    rust: {ours:?}"
                ));
            }
        }
        compared += inputs.len();
    }

    eprintln!(
        "diff_selector: compared {compared} selectors ({accepted} accepted, {} rejected; \
         {matched} matches and {unmatched} non-matches; {objects} in object form, all \
         rejected by Go) with Go in {:.1?}, {} mismatches",
        compared - accepted,
        started.elapsed(),
        mismatches.len()
    );
    run.assert_agree("selectors", compared, &mismatches);
}

fn disagreement(
    go: &Answer,
    ours: &Result<Selector, SelectorError>,
    labels: &[Labels],
) -> Option<String> {
    match (go.ok, ours) {
        (true, Ok(selector)) => {
            if go.string.as_deref() != Some(selector.to_string().as_str()) {
                return Some(format!(
                    "different String(): ours is {:?}",
                    selector.to_string()
                ));
            }
            let ours: Vec<bool> = labels.iter().map(|set| selector.matches(set)).collect();
            let go_matches = go.matches.clone().unwrap_or_default();
            (go_matches != ours).then(|| format!("different Matches: ours are {ours:?}"))
        }
        (false, Err(_)) => None,
        (true, Err(e)) => Some(format!("Go accepts, we reject: {e}")),
        (false, Ok(_)) => Some("Go rejects, we accept".into()),
    }
}

// ---------------------------------------------------------------------------------------
// Generators

/// Keys and values shared by selectors and label sets, so matches are often decided by
/// the values (true and false), not merely by absent keys.
const KEYS: &[&str] = &["a", "b", "c", "kured.dev/x", "in", "notin", "x.y_z", "A-1"];
const VALUES: &[&str] = &[
    "",
    "a",
    "b",
    "1",
    "2",
    "10",
    "007",
    "in",
    "notin",
    "-1",
    "+1",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
];

fn selector_input() -> impl Strategy<Value = String> {
    prop_oneof![
        10 => grammar(),
        3 => token_soup(),
        2 => "[abc!=<>(),/ \t\n\r0-9.\0-]{0,30}",
        1 => "\\PC{0,20}",
        1 => prop::sample::select(FIXED.to_vec()).prop_map(str::to_owned),
        1 => object_like(),
    ]
}

/// Text near the rule that tells the object form of a window's `nodeSelector` apart: a
/// word and a colon, or a brace, after some whitespace, followed by selector-like text.
fn object_like() -> impl Strategy<Value = String> {
    (
        ws(),
        prop_oneof![
            "[a-zA-Z][a-zA-Z0-9_-]{0,6}[ \t]{0,2}:",
            "\\{",
            "[a-z!]{1,3}[ \t\0]{0,2}[:{]",
        ],
        "[a-z=!,() :{}\0\n]{0,12}",
    )
        .prop_map(|(w, head, tail)| format!("{w}{head}{tail}"))
}

/// Hand-picked corners, so every run covers them whatever the seed.
const FIXED: &[&str] = &[
    "",
    " ",
    "\t\r\n",
    ",",
    "x,,y",
    ",x",
    "x,",
    "!",
    "!x",
    "!x=a",
    "!x,!x",
    "x=a||y=b",
    "x==a==b",
    "x<a",
    "x>=1",
    "x>-1",
    "x>+1",
    "x>007",
    "x>",
    "x>9223372036854775807",
    "x>9223372036854775808",
    "notin=in",
    "in in (in)",
    "in notin (notin)",
    "x in ()",
    "x in (,)",
    "x in (a,,b)",
    "x in (a b)",
    "x notin(",
    "x in (a",
    "(",
    ")",
    "a = ,b",
    "a\0b",
    "a \0,,,",
    "a,\0b",
    "a, \0b",
    "a!==b",
    "a===b",
    "kured.dev/x",
    "a/b/c",
    "/a",
    "a/",
    "A.b/c",
    // What the object form takes (selector::object::is_object_form).
    "{",
    "{}",
    "{a}",
    " \n{\"matchLabels\":{}}",
    "a:b",
    "a :b",
    "a\t:",
    "in: x",
    "notin :",
    "matchLabels:",
    "matchLabels: {a: b}",
    "matchExpressions:\n- {key: a, operator: Exists}",
    "a=b\0:",
    "a \0:",
    "# c\na=b",
    "---",
    "--- a=b",
    "\u{feff}a=b",
    "%a",
    "~",
    // YAML's null, read as the object form on purpose (and refused there).
    "null",
    " Null\n",
];

fn ws() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "", "", "", " ", " ", "\t", "\n", "\r", "  "])
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        3 => "[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,8}[a-zA-Z0-9])?",
        1 => "[a-z0-9]([-a-z0-9.]{0,10}[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,4}[a-zA-Z0-9])?",
        1 => "[-a-zA-Z0-9_./$é]{1,8}",
        1 => prop::sample::select(vec![62usize, 63, 64]).prop_map(|n| "k".repeat(n)),
        1 => (prop::sample::select(vec![252usize, 253, 254]), prop::sample::select(vec![63usize, 64]))
            .prop_map(|(p, n)| format!("{}.io/{}", "p".repeat(p - 3), "n".repeat(n))),
        1 => prop::sample::select(vec![
            "a..b", "-a", "a-", "_a", "a_", ".a", "A.com/b", "a.-b/c", "a/b/c", "/a", "a/",
        ]).prop_map(str::to_owned),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        // Mostly values a selector accepts (not signed numbers).
        12 => prop::sample::select(
            VALUES
                .iter()
                .copied()
                .filter(|v| !v.starts_with(['-', '+']))
                .collect::<Vec<_>>(),
        )
        .prop_map(str::to_owned),
        3 => "[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,8}[a-zA-Z0-9])?",
        1 => prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
        1 => "[0-9]{1,21}",
        1 => "[-a-zA-Z0-9_.$é/]{1,6}",
        1 => prop::sample::select(vec![62usize, 63, 64]).prop_map(|n| "v".repeat(n)),
    ]
}

fn requirement() -> impl Strategy<Value = String> {
    let op = prop_oneof![
        6 => prop::sample::select(vec!["=", "==", "!=", "in", "notin", "exists", "!", ">", "<"]),
        1 => prop::sample::select(vec!["!==", ">=", "=<", "===", "nott", "!!", "(", "in("]),
    ];
    let number = prop_oneof![
        4 => prop::sample::select(vec!["0", "1", "2", "10", "007", "9223372036854775807"])
            .prop_map(str::to_owned),
        1 => value(),
    ];
    (
        op,
        key(),
        prop::collection::vec(value(), 0..4),
        number,
        ws(),
        ws(),
        ws(),
        prop::sample::select(vec![" ", " ", " ", " ", " ", " ", "\t", "\n", "\r", ""]),
        prop::sample::select(vec![
            ("(", ")"),
            ("(", ")"),
            ("(", ")"),
            ("(", ")"),
            ("(", ")"),
            ("(", ")"),
            ("(", ")"),
            ("(", ")"),
            ("(", ""),
            ("", ")"),
            ("", ""),
            ("((", ")"),
        ]),
    )
        .prop_map(
            |(op, key, values, number, w1, w2, w3, gap, (open, close))| {
                let first = match op {
                    ">" | "<" => number,
                    _ => values.first().cloned().unwrap_or_default(),
                };
                match op {
                    "exists" => format!("{w1}{key}{w2}"),
                    "!" => format!("{w1}!{w2}{key}{w3}"),
                    "in" | "notin" => format!(
                        "{w1}{key}{gap}{op}{w2}{open}{}{close}{w3}",
                        values.join(&format!("{w3},"))
                    ),
                    _ => format!("{w1}{key}{w2}{op}{w3}{first}"),
                }
            },
        )
}

/// Requirements joined by commas, sometimes with stray commas; sometimes many requirements
/// on few keys, so Go's unstable sort shows in `String()`.
fn grammar() -> impl Strategy<Value = String> {
    let separator = prop_oneof![
        12 => prop::sample::select(vec![",", ", ", " ,", "\t,\n"]),
        1 => prop::sample::select(vec![",,", " ", ""]),
    ];
    let few = prop::collection::vec((requirement(), separator.clone()), 0..6);
    let many = prop::collection::vec(
        (
            prop::sample::select(vec!["a", "b", "c"]),
            prop::sample::select(vec![
                "K=1",
                "K=x",
                "K!=2",
                "K==3",
                "K in (x,1)",
                "K",
                "K>1",
                "K<3",
                "!K",
            ]),
        )
            .prop_map(|(k, template)| (template.replace('K', k), ",")),
        10..40,
    );
    (
        prop_oneof![6 => few, 1 => many],
        prop::sample::select(vec!["", "", "", "", "", "", ",", " "]),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(parts, lead, trailing_comma)| {
            let mut out = lead.to_owned();
            let last = parts.len().saturating_sub(1);
            for (i, (requirement, separator)) in parts.into_iter().enumerate() {
                out.push_str(&requirement);
                if i < last {
                    out.push_str(separator);
                }
            }
            if trailing_comma {
                out.push(',');
            }
            out
        })
}

/// Random sequences of the lexer's tokens and words: reaches parser states the grammar
/// above does not.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        4 => prop::sample::select(vec![
            "=", "==", "!=", "!", "(", ")", ",", ">", "<", "in", "notin", " ", "\t", "\0",
        ]).prop_map(str::to_owned),
        3 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
        2 => prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
    ];
    (prop::collection::vec((token, ws()), 1..10))
        .prop_map(|parts| parts.into_iter().map(|(t, w)| format!("{t}{w}")).collect())
}

fn label_set() -> impl Strategy<Value = Labels> {
    let value = prop_oneof![
        6 => prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
        1 => prop::sample::select(vec![" 1", "1 ", "0x10", "1_000", "+0", "-0", "99999999999999999999", "x"])
            .prop_map(str::to_owned),
    ];
    prop_oneof![
        1 => Just(Labels::new()),
        6 => prop::collection::btree_map(
            prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
            value,
            0..6,
        ),
    ]
}

// ---------------------------------------------------------------------------------------
