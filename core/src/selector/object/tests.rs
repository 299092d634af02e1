use super::*;
use proptest::prelude::*;

fn sel(text: &str) -> Result<String, String> {
    parse(text)
        .map(|s| s.to_string())
        .map_err(|e| e.to_string())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_forms_are_told_apart() {
    for object in [
        "{}",
        " \n\t{\"matchLabels\":{}}",
        "matchLabels:\n  a: b",
        "matchExpressions: []",
        "matchLabel : x",
        "\r\nmatchLabels:",
        // What YAML allows before a document's content.
        "# zone a\nmatchLabels: {zone: a}",
        "---\nmatchLabels: {zone: a}",
        "--- {matchLabels: {zone: a}}",
        "\u{feff}matchLabels: {zone: a}",
        "\u{feff}{\"matchLabels\": {}}",
        "%YAML 1.2\n---\n{}",
        " \n# only a comment",
        "---",
        // YAML's null, to be refused rather than read as a label named null.
        "null",
        " Null\n",
        "NULL",
        "~",
    ] {
        assert!(is_object_form(object), "{object:?}");
    }
    for string in [
        "",
        "a=b",
        "!a",
        "a in (b)",
        "\0{}",
        "a \0:",
        "1a: b",
        "-a: b",
        "\"matchLabels\": {}",
        "matchLabels",
        "a=b\nmatchLabels:",
        "null=a",
        "nullable",
        "---a",
        "a=b # c",
    ] {
        assert!(!is_object_form(string), "{string:?}");
    }
    // Whatever the rule calls an object is no valid string selector.
    for object in [
        "{}",
        "{a}",
        "a:b",
        "a :b",
        "in: x",
        "zone : a",
        "x-1:",
        "# c\na=b",
        "--- a=b",
        "\u{feff}a=b",
        "%a",
        "~",
    ] {
        assert!(is_object_form(object), "{object:?}");
        assert!(super::super::parse(object).is_err(), "{object:?}");
    }
}

/// Kubernetes' YAML reader (`sigs.k8s.io/yaml`) reads these as the plain object;
/// `tests/diff_label_selector.rs` runs them through it.
#[test]
fn yaml_as_operators_write_it() {
    for text in [
        "# the zone-a nodes\nmatchLabels:\n  zone: a\n",
        "---\nmatchLabels:\n  zone: a\n",
        "--- # zone a\nmatchLabels: {zone: a}",
        "\u{feff}matchLabels: {zone: a}",
        "\u{feff}# c\n---\n# d\n\nmatchLabels:\n  zone: a  # trailing\n",
        "%YAML 1.2\n---\n{\"matchLabels\": {\"zone\": \"a\"}}",
    ] {
        assert_eq!(
            super::super::parse_string_or_object(text).map(|s| s.to_string()),
            Ok("zone=a".to_owned()),
            "{text:?}"
        );
    }
}

#[test]
fn null_is_refused_saying_what_to_write() {
    for text in [
        "null",
        "~",
        " NULL\n",
        "Null",
        "# nothing yet",
        "---",
        "--- # c\n",
        "\u{feff}",
    ] {
        let err = super::super::parse_string_or_object(text)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("nil LabelSelector, which selects no node")
                && err.contains("Write {} or \"\" to select every node"),
            "{text:?}: {err}"
        );
    }
    // The empty string stays the string form's "every node".
    assert!(
        super::super::parse_string_or_object(" ")
            .unwrap()
            .is_everything()
    );
}

/// Outputs confirmed with the Go oracle (`metav1.LabelSelectorAsSelector`, `String()`).
#[test]
fn converts_like_go() {
    for (text, printed) in [
        ("{}", ""),
        ("matchLabels: {}", ""),
        ("matchExpressions: []", ""),
        ("matchLabels: ~\nmatchExpressions: null", ""),
        ("{\"matchLabels\":{\"zone\":\"a\"}}", "zone=a"),
        (
            "matchLabels:\n  topology.kubernetes.io/zone: zone-a\nmatchExpressions:\n\
             - {key: node-role, operator: NotIn, values: [control-plane]}\n",
            "node-role notin (control-plane),topology.kubernetes.io/zone=zone-a",
        ),
        // Values are printed sorted, duplicates kept.
        (
            "matchExpressions: [{key: a, operator: In, values: [x, x, b]}]",
            "a in (b,x,x)",
        ),
        ("matchExpressions: [{key: a, operator: Exists}]", "a"),
        (
            "matchExpressions: [{key: a, operator: DoesNotExist, values: []}]",
            "!a",
        ),
        (
            "matchExpressions: [{key: a, operator: In, values: ['']}]",
            "a in ()",
        ),
        ("matchLabels: {a: ''}", "a="),
        // The same key in matchLabels and matchExpressions: both kept, labels first.
        (
            "matchLabels: {b: x, a: w}\nmatchExpressions:\n- {key: a, operator: Exists}\n\
             - {key: a, operator: NotIn, values: [z]}",
            "a=w,a,a notin (z),b=x",
        ),
    ] {
        assert_eq!(sel(text), Ok(printed.to_owned()), "{text:?}");
    }
}

#[test]
fn matches_like_the_string_form() {
    let object = parse(
        "matchLabels: {zone: a}\nmatchExpressions:\n- {key: role, operator: NotIn, values: [cp]}",
    )
    .unwrap();
    let string = super::super::parse("zone=a,role notin (cp)").unwrap();
    for set in [
        labels(&[("zone", "a")]),
        labels(&[("zone", "a"), ("role", "cp")]),
        labels(&[("zone", "a"), ("role", "worker")]),
        labels(&[("zone", "b")]),
        labels(&[]),
    ] {
        assert_eq!(object.matches(&set), string.matches(&set), "{set:?}");
    }
}

#[test]
fn rejects_what_go_rejects_and_says_why() {
    for (text, says) in [
        (
            "matchExpressions: [{key: a, operator: in, values: [x]}]",
            "matchExpressions[0].operator: \"in\" is not a valid label selector operator; \
             expected one of In, NotIn, Exists, DoesNotExist (operators are case-sensitive: \
             write In)",
        ),
        (
            "matchExpressions: [{key: a, operator: Gt, values: ['1']}]",
            "\"Gt\" is not a valid label selector operator",
        ),
        (
            "matchExpressions: [{key: a}]",
            "\"\" is not a valid label selector operator; expected one of In, NotIn, \
             Exists, DoesNotExist (the operator is missing)",
        ),
        (
            "matchExpressions: [{key: a, operator: In}]",
            "matchExpressions[0].values: the operator In needs at least one value",
        ),
        (
            "matchExpressions: [{key: a, operator: NotIn, values: []}]",
            "the operator NotIn needs at least one value",
        ),
        (
            "matchExpressions: [{key: a, operator: Exists, values: [x]}]",
            "matchExpressions[0].values: the operator Exists takes no values, found 1",
        ),
        (
            "matchExpressions: [{operator: Exists}]",
            "matchExpressions[0].key: invalid label key \"\": the name is empty",
        ),
        (
            "matchLabels: {\"a b\": x}",
            "matchLabels[\"a b\"]: invalid label key \"a b\"",
        ),
        (
            "matchLabels: {a: x y}",
            "matchLabels[\"a\"]: invalid value \"x y\" for label key \"a\"",
        ),
        (
            "matchExpressions: [{key: a, operator: In, values: [ok, 'b$']}]",
            "matchExpressions[0].values[1]: invalid value \"b$\"",
        ),
        // Where Kubernetes' lenient reader takes what kumaco refuses: each error says
        // what to write instead.
        (
            "matchLabel: {a: b}",
            "unknown field `matchLabel`, expected one of matchLabels, matchExpressions",
        ),
        (
            "MatchLabels: {a: b}",
            "unknown field `MatchLabels`, expected one of matchLabels, matchExpressions \
             (line 1, column 1); field names are case-sensitive",
        ),
        (
            "matchExpressions: [{key: a, operator: Exists, value: [x]}]",
            "unknown field `value`, expected one of key, operator, values",
        ),
        (
            "matchLabels: {a: b, a: c}",
            "duplicate mapping key `a` is not allowed here (line 1, column 21): write each \
             key once",
        ),
        (
            "matchLabels: {a: 3}",
            "quote label keys and values like these, e.g. zone: \"1\"",
        ),
        ("matchLabels: {a: yes}", "value requires quoting"),
        ("matchLabels: {1: a}", "value requires quoting"),
        (
            "matchLabels: {a: }",
            "null is not allowed here (line 1, column 16): write \"\" for an empty label value",
        ),
        (
            "matchLabels: &x {a: b}",
            "an anchor (&) or alias (*) is not read (line 1, column 17): write the values out",
        ),
        (
            "matchLabels:\n  <<: {a: b}",
            "a merge key (<<) is not read (line 2, column 3): write the entries out",
        ),
        (
            "matchLabels: {a: b}\n---\nmatchLabels: {a: c}",
            "a second YAML document (line 2, column 1): write one",
        ),
        ("matchLabels: [a]", "not a LabelSelector"),
        ("{", "unclosed bracket"),
        (
            "matchExpressions: [{key: a, operator: In, values: [[x]]}]",
            "too large or too complex",
        ),
    ] {
        let err = sel(text).unwrap_err();
        assert!(err.contains(says), "{text:?}: {err}");
    }
    // Label keys: prefix and name lengths, as the string form.
    let ok = |key: &str| sel(&format!("matchLabels: {{\"{key}\": v}}")).is_ok();
    assert!(ok(&"k".repeat(63)));
    assert!(!ok(&"k".repeat(64)));
    assert!(ok(&format!("{}/a", "p".repeat(253))));
    assert!(!ok(&format!("{}/a", "p".repeat(254))));
    assert!(!ok("a/b/c"));
    assert!(!ok("A.b/c"));
    assert!(!ok(""));
    let value_ok = |value: &str| sel(&format!("matchLabels: {{a: \"{value}\"}}")).is_ok();
    assert!(value_ok(&"v".repeat(63)));
    assert!(!value_ok(&"v".repeat(64)));
}

#[test]
fn every_problem_is_listed_a_few_at_a_time() {
    let text = "matchExpressions:\n".to_owned()
        + &(0..7)
            .map(|i| format!("- {{key: k{i}, operator: in, values: [x]}}\n"))
            .collect::<String>();
    let err = sel(&text).unwrap_err();
    assert!(err.contains("matchExpressions[4].operator"), "{err}");
    assert!(!err.contains("matchExpressions[5].operator"), "{err}");
    assert!(err.ends_with("; and 2 more"), "{err}");
}

proptest! {
    #[test]
    fn never_panics(s in "\\PC{0,200}") {
        let _ = parse(&s);
    }

    #[test]
    fn never_panics_on_object_like_text(s in "[{}\\[\\]:, \n\"'a-zA-Z0-9&*!#~-]{0,80}") {
        let _ = parse(&s);
    }

    /// matchLabels of valid labels select exactly what `k=v,...` selects, and print
    /// like it.
    #[test]
    fn match_labels_are_equality_requirements(
        pairs in prop::collection::btree_map("[a-z]([a-z0-9.-]{0,6}[a-z0-9])?", "[a-z0-9]{0,5}", 0..8),
    ) {
        let json = format!(
            "{{\"matchLabels\":{{{}}}}}",
            pairs.iter().map(|(k, v)| format!("\"{k}\":\"{v}\"")).collect::<Vec<_>>().join(",")
        );
        let string = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse(&json), Ok(super::super::parse(&string).unwrap()));
    }

    /// Valid expressions without repeated values select what their `String()` selects in
    /// the string form, and print the same.
    #[test]
    fn expressions_mean_what_their_string_says(
        exprs in prop::collection::vec(
            (
                prop::sample::select(vec!["a", "b", "kured.dev/x", "in"]),
                prop::sample::select(OPERATORS.to_vec()),
                prop::collection::btree_set("[a-c0-9]{0,2}", 1..4),
            ),
            0..16,
        ),
        sets in prop::collection::vec(
            prop::collection::btree_map(
                prop::sample::select(vec!["a", "b", "kured.dev/x", "in"]).prop_map(str::to_owned),
                "[a-c0-9]{0,2}",
                0..4,
            ),
            4,
        ),
    ) {
        let text = exprs
            .iter()
            .map(|(k, op, vs)| {
                let values = match *op {
                    "In" | "NotIn" => format!(
                        ", values: [{}]",
                        vs.iter().map(|v| format!("'{v}'")).collect::<Vec<_>>().join(", ")
                    ),
                    _ => String::new(),
                };
                format!("- {{key: {k}, operator: {op}{values}}}\n")
            })
            .collect::<String>();
        let object = parse(&format!("matchExpressions:\n{text}"));
        prop_assert!(object.is_ok(), "{:?}", object);
        let object = object.unwrap();
        let string = super::super::parse(&object.to_string()).unwrap();
        prop_assert_eq!(string.to_string(), object.to_string());
        for set in &sets {
            prop_assert_eq!(object.matches(set), string.matches(set), "{:?}", set);
        }
    }
}
