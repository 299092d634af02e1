use super::validation::VALUE_RULE;
use super::*;
use proptest::prelude::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Go's TestSelectorParse: valid strings print back without their spaces.
#[test]
fn parses_and_prints_like_go() {
    for input in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
    ] {
        let selector = parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.to_string(), input.replace(' ', ""), "{input:?}");
    }
}

/// Outputs confirmed with the Go oracle.
#[test]
fn canonical_strings() {
    for (input, printed) in [
        ("x=a,a=x", "a=x,x=a"),
        ("a = ,b", "a=,b"),
        ("a==b", "a==b"),
        ("x>007", "x>007"),
        ("a=b,a=c,b in (z,,y)", "a=b,a=c,b in (,y,z)"),
        ("in in (in)", "in in (in)"),
        ("notin=in", "notin=in"),
        ("!a,!a", "!a,!a"),
        ("x in ()", "x in ()"),
        ("x notin (b, a, b)", "x notin (a,b)"),
        ("x in (,)", "x in ()"),
        ("\tx\r\n=\ny ", "x=y"),
        ("kured.dev/x in (a)", "kured.dev/x in (a)"),
        ("a \0,,,", "a"),
        ("a=b\0,c", "a=b,c"),
    ] {
        let selector = parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.to_string(), printed, "{input:?}");
    }
    // Go's sort.Sort is unstable past 12 elements (its output, from the oracle).
    let input: Vec<String> = (0..14)
        .map(|i| format!("{}={i}", ["a", "b"][i % 2]))
        .collect();
    assert_eq!(
        parse(&input.join(",")).map(|s| s.to_string()),
        Ok("a=8,a=12,a=2,a=0,a=4,a=10,a=6,b=3,b=7,b=9,b=5,b=11,b=1,b=13".to_owned())
    );
}

#[test]
fn rejects_what_go_rejects() {
    for input in [
        "x=a||y=b",
        "x==a==b",
        "!x=a",
        "x<a",
        "x,,y",
        ",x,y",
        "x,",
        "a in (xyz),",
        "a in (xyz abc)",
        "x nott in (y)",
        "a notin(",
        "(",
        ")",
        ">",
        "a!==b",
        "a/b/c",
        "A.b/c",
        "/a",
        "a/",
        "a= b c",
        "x>=1",
        "x>-1",
        "x>+1",
        "x>",
        "x>99999999999999999999",
        "a=b\u{1}",
        "!",
        "a in",
        "a in (",
        "a in (b",
        "a in b",
        "a=(",
        "é=a",
        &"k".repeat(64),
        &format!("a={}", "v".repeat(64)),
        &format!("{}/a", "p".repeat(254)),
        "a, \0b",
    ] {
        assert!(parse(input).is_err(), "{input:?} should be rejected");
    }
    for input in [
        &"k".repeat(63),
        &format!("a={}", "v".repeat(63)),
        &format!("{}/a", "p".repeat(253)),
        "x>9223372036854775807",
        "a/b.c",
        "a.b-c/D_e.F",
        "a,\0b",
        "\0",
    ] {
        assert!(parse(input).is_ok(), "{input:?} should be accepted");
    }
}

/// The matching vectors, confirmed with apimachinery as the oracle, plus the absent-label rules.
#[test]
fn matches_like_go() {
    let yes: &[(&str, &[(&str, &str)])] = &[
        ("", &[("x", "y")]),
        ("x=y", &[("x", "y")]),
        ("x==y", &[("x", "y")]),
        ("x!=y,z!=w", &[("x", "z"), ("z", "a")]),
        ("x!=y", &[]),
        ("x notin (a)", &[]),
        ("x", &[("x", "z")]),
        ("x", &[("x", "")]),
        ("!x", &[("y", "z")]),
        ("x>1", &[("x", "2")]),
        ("x<1", &[("x", "-5")]),
        ("x>1", &[("x", "+2")]),
        ("x in (a,b)", &[("x", "b")]),
        ("x in ()", &[("x", "")]),
    ];
    let no: &[(&str, &[(&str, &str)])] = &[
        ("x=z", &[]),
        ("x in (a)", &[]),
        ("x notin (\"\"), !y", &[("y", "")]),
        ("x notin (),!y", &[("y", "")]),
        ("z>1", &[("z", "v2")]),
        ("z>1", &[]),
        ("z<1", &[("z", " 0")]),
        ("x!=y", &[("x", "y")]),
        ("!x", &[("x", "")]),
    ];
    for &(input, set) in yes {
        if let Ok(selector) = parse(input) {
            assert!(
                selector.matches(&labels(set)),
                "{input:?} should match {set:?}"
            );
        } else {
            panic!("{input:?} should parse");
        }
    }
    for &(input, set) in no {
        // `x notin ("")` does not parse (quotes are not label characters): skip it.
        if let Ok(selector) = parse(input) {
            assert!(
                !selector.matches(&labels(set)),
                "{input:?} should not match {set:?}"
            );
        }
    }
}

#[test]
fn everything() {
    assert!(Selector::everything().is_everything());
    assert_eq!(parse(" \t\n"), Ok(Selector::everything()));
    assert!(Selector::everything().matches(&BTreeMap::new()));
    assert!(!parse("a").is_ok_and(|s| s.is_everything()));
}

#[test]
fn requirements_are_listed() {
    let Ok(selector) = parse("b in (y,x),!a") else {
        panic!("should parse");
    };
    let listed: Vec<_> = selector
        .requirements()
        .iter()
        .map(|r| (r.key(), r.operator().as_str(), r.values().to_vec()))
        .collect();
    assert_eq!(
        listed,
        [
            ("a", "!", vec![]),
            ("b", "in", vec!["x".to_owned(), "y".to_owned()])
        ]
    );
}

#[test]
fn errors_say_where_what_and_what_is_expected() {
    let message = |s: &str| parse(s).unwrap_err().to_string();
    assert_eq!(
        message("a = (b"),
        "expected a value after \"=\" at position 4 in \"a = (b\", found \"(\": \
         parentheses go with in and notin, like key in (a,b)"
    );
    assert_eq!(
        message("a,,b"),
        "expected a label key or !key after \",\" at position 2 in \"a,,b\", found \",\": \
         two commas in a row leave an empty requirement"
    );
    assert!(message("a,").contains("found the end of the selector: a trailing comma"));
    assert!(message("x>=1").contains("there is no >= or <= operator"));
    assert!(message("!a=b").contains("!key takes no operator or value"));
    assert!(message("a=b c").contains("separated by \",\", not spaces"));
    assert_eq!(
        message("a=b$"),
        format!("invalid value \"b$\" for label key \"a\" in \"a=b$\": {VALUE_RULE}")
    );
    assert_eq!(
        message("x>-1"),
        "\">\" needs a whole number, found \"-1\" after label key \"x\" in \"x>-1\": \
         expected digits like 3 (not negative, at most 9223372036854775807)"
    );
    assert!(message("A.b/c").contains("lowercase DNS subdomain"));
    assert!(message(&"k".repeat(64)).contains("this one has 64"));
    assert!(message("é = x,(").contains("invalid label key \"é\""));
    assert!(message("a in (b c)").contains("at position 8"));
}

fn selector_like() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec!["a", "b", "in", "notin", "kured.dev/x", "A-1", "x.y_z"]);
    let value = prop::sample::select(vec!["", "a", "1", "007", "in", "b-c", "-1", "x y"]);
    let op = prop::sample::select(vec![
        "=", "==", "!=", " in ", " notin ", ">", "<", "", "!", " ",
    ]);
    let requirement =
        (key, op, prop::collection::vec(value, 0..3)).prop_map(|(k, op, vs)| match op.trim() {
            "in" | "notin" => format!("{k}{op}({})", vs.join(",")),
            "!" => format!("!{k}"),
            _ => format!("{k}{op}{}", vs.first().copied().unwrap_or_default()),
        });
    prop::collection::vec(requirement, 0..16).prop_map(|rs| rs.join(","))
}

proptest! {
    #[test]
    fn never_panics(s in "\\PC*") {
        let _ = parse(&s);
    }

    #[test]
    fn never_panics_on_selector_like_text(s in "[a-z!=<>(),/ \t\0.-]{0,40}") {
        let _ = parse(&s);
    }

    #[test]
    fn display_reparses_to_an_equal_selector(s in selector_like()) {
        if let Ok(selector) = parse(&s) {
            prop_assert_eq!(parse(&selector.to_string()), Ok(selector));
        }
    }
}
