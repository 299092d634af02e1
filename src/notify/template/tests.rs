use jiff::SignedDuration;

use super::*;
use crate::notice::{Forecast, Left, NodeInfo, WindowInfo};
use kumaco_core::testing::ts;

fn completed() -> Notice {
    Notice {
        id: "0a1b".into(),
        kind: Kind::Completed,
        cluster: "prod-eu".into(),
        at: ts("2026-12-07T13:00:05Z"),
        node: Some(NodeInfo {
            name: "node-3".into(),
            zone: Some("zone-a".into()),
            pool: None,
        }),
        window: Some(WindowInfo {
            namespace: "kumaco".into(),
            name: "weekly".into(),
            description: Some("Tuesday nights".into()),
        }),
        reason: "NodeRebooted".into(),
        message: "rebooted".into(),
        duration: Some(SignedDuration::from_secs(252)),
        rebooted: Some(true),
        selected: None,
        done: None,
        left: Vec::new(),
        forecast: None,
    }
}

#[test]
fn kured_v1_defaults_read_as_kured_v1_prints_them() {
    let t = KuredTemplates::defaults();
    let started = Notice {
        kind: Kind::Started,
        ..completed()
    };
    assert_eq!(t.render(&started).as_deref(), Some("Draining node node-3"));
    assert_eq!(
        t.render(&completed()).as_deref(),
        Some("Node node-3 rebooted & uncordoned successfully!")
    );
    assert_eq!(t.reboot.render("node-3"), "Rebooting node node-3");
    // Reboot fills no transition; nor do the others, nor a notice without a node.
    for kind in Kind::ALL {
        let fills = t.for_kind(kind).is_some();
        assert_eq!(
            fills,
            matches!(kind, Kind::Started | Kind::Completed),
            "{kind}"
        );
    }
    let no_node = Notice {
        node: None,
        ..completed()
    };
    assert_eq!(t.render(&no_node), None);
}

#[test]
fn kured_templates_take_s_v_and_percent_signs() {
    let flag = "--message-template-drain";
    let render = |s: &str| KuredTemplate::parse(flag, s).map(|t| t.render("n1"));
    assert_eq!(render("%s: 100%% drained"), Ok("n1: 100% drained".into()));
    assert_eq!(render("[%v]"), Ok("[n1]".into()));
    assert_eq!(render("no node named"), Ok("no node named".into()));
    assert_eq!(render("é %s é"), Ok("é n1 é".into()));
    assert_eq!(render(""), Ok(String::new()));
}

#[test]
fn other_go_verbs_are_refused_naming_the_flag_and_the_position() {
    let flag = "--message-template-uncordon";
    let err = |s: &str| KuredTemplate::parse(flag, s).unwrap_err();
    assert_eq!(
        err("é node %d back"),
        TemplateError::Verb {
            flag,
            verb: "%d".into(),
            position: 8
        }
    );
    assert_eq!(
        err("100%").to_string(),
        "--message-template-uncordon: \"%\" at character 4: kured v1's templates take %s (the \
         node's name) and %% (a percent sign) only"
    );
    assert_eq!(
        err("%-10s").to_string(),
        "--message-template-uncordon: \"%-\" at character 1: kured v1's templates take %s (the \
         node's name) and %% (a percent sign) only"
    );
    assert_eq!(
        err("%s and %s").to_string(),
        "--message-template-uncordon: a second %s at character 8: kured v1 fills only the \
         first (Go prints %!s(MISSING) for the others)"
    );
}

#[test]
fn a_kured_template_is_bounded() {
    let t = KuredTemplate::parse("--message-template-drain", "%s").unwrap();
    let out = t.render(&"x".repeat(MAX_RENDERED_BYTES * 2));
    assert_eq!(out.len(), MAX_RENDERED_BYTES);
    assert!(out.ends_with('…'));
}

#[test]
fn a_template_sees_every_field() {
    let t = Template::parse(
        "--notify-template",
        "{{ cluster }}/{{ node.name }} ({{ node.zone }}, {{ node.pool or 'no pool' }}): \
         {{ kind }} [{{ kind_label }}] after {{ duration }} ({{ duration_seconds }}s), \
         rebooted={{ rebooted }}; {{ window.namespace }}/{{ window.name }}: \
         {{ window.description }}; {{ reason }}: {{ message }}; at {{ at }}; id {{ id }}",
    )
    .unwrap();
    assert_eq!(
        t.render(&completed()).unwrap(),
        "prod-eu/node-3 (zone-a, no pool): completed [completed] after 4m12s (252.0s), \
         rebooted=True; kumaco/weekly: Tuesday nights; NodeRebooted: rebooted; at \
         2026-12-07T13:00:05Z; id 0a1b"
    );
    let closed = Notice {
        kind: Kind::WindowClosed,
        node: None,
        selected: Some(3),
        done: Some(1),
        left: vec![
            Left {
                node: "n7".into(),
                reason: "WaitingForSlot".into(),
                message: "full".into(),
            },
            Left {
                node: "n8".into(),
                reason: "WaitingForBudget".into(),
                message: String::new(),
            },
        ],
        forecast: Some(Forecast {
            expected_end: ts("2026-12-08T03:40:00Z"),
            p90_end: ts("2026-12-08T04:05:00Z"),
            not_fitting: vec!["n8".into()],
        }),
        ..completed()
    };
    let t = Template::parse(
        "--notify-template",
        "{{ done }}/{{ selected }}; {% for l in left %}{{ l.node }}={{ l.reason }} {% endfor %}\
         ; {{ forecast.expected_end }} {{ forecast.p90_end }} {{ forecast.not_fitting | join(',') }}\
         ; node={{ node is none }}",
    )
    .unwrap();
    assert_eq!(
        t.render(&closed).unwrap(),
        "1/3; n7=WaitingForSlot n8=WaitingForBudget ; 2026-12-08T03:40:00Z \
         2026-12-08T04:05:00Z n8; node=True"
    );
}

#[test]
fn a_template_can_wrap_the_default_words() {
    let t = Template::parse("--notify-template", "[{{ cluster }}] {{ title }}").unwrap();
    assert_eq!(
        t.render(&completed()).unwrap(),
        "[prod-eu] node-3 (zone-a): maintenance completed after 4m12s, rebooted"
    );
}

#[test]
fn a_template_that_does_not_parse_is_refused_with_its_position() {
    let err =
        Template::parse("--notify-template", "node {{ node.name }}\nand {% if %}x").unwrap_err();
    let TemplateError::Syntax {
        flag, line, column, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    // The column of the token that is wrong: the `%}` where a condition should be.
    assert_eq!((*flag, *line, *column), ("--notify-template", 2, 11));
    assert!(
        err.to_string()
            .starts_with("--notify-template: line 2, column 11: syntax error"),
        "{err}"
    );
}

#[test]
fn a_failing_rendering_falls_back_to_the_default_words() {
    let t = Template::parse("--notify-template", "{{ nodes.name }}").unwrap();
    let r = t.render_or(&completed(), "the default");
    assert_eq!(r.text, "the default");
    let Some(TemplateError::Render { flag, message }) = &r.error else {
        panic!("{r:?}");
    };
    assert_eq!(*flag, "--notify-template");
    assert!(message.starts_with("undefined value"), "{message}");
    // A window's notice has no node: a template naming it falls back too.
    let t = Template::parse("--notify-template", "{{ node.name }}").unwrap();
    let window = Notice {
        node: None,
        ..completed()
    };
    assert_eq!(t.render_or(&window, "default").text, "default");
    assert_eq!(
        t.render_or(&completed(), "default"),
        Rendered {
            text: "node-3".into(),
            error: None
        }
    );
}

#[test]
fn a_rendering_is_bounded_in_size_and_in_work() {
    let t = Template::parse(
        "--notify-template",
        "{% for i in range(100000) %}{{ message }} {% endfor %}",
    )
    .unwrap();
    let out = t.render(&completed()).unwrap();
    assert_eq!(out.len(), MAX_RENDERED_BYTES);
    assert!(out.starts_with("rebooted rebooted ") && out.ends_with('…'));
    let t = Template::parse(
        "--notify-template",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    )
    .unwrap();
    let err = t.render(&completed()).unwrap_err();
    assert!(
        matches!(&err, TemplateError::Render { message, .. } if message.contains("fuel")),
        "{err:?}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(128))]

    /// Any kured template parses or is refused, and fills any node within the bound.
    #[test]
    fn any_kured_template_parses_or_is_refused(
        template in "[%sv dé%-]{0,30}",
        node in "\\PC{0,300}",
    ) {
        if let Ok(t) = KuredTemplate::parse("--message-template-drain", &template) {
            proptest::prop_assert!(t.render(&node).len() <= MAX_RENDERED_BYTES);
        }
    }

    /// Any text as a template parses or is refused with a position, and renders or
    /// falls back, never panicking.
    #[test]
    fn any_template_parses_or_is_refused(source in "[{}%# a-z.|()'0-9~*-]{0,60}") {
        match Template::parse("--notify-template", &source) {
            Ok(t) => {
                let r = t.render_or(&completed(), "default");
                proptest::prop_assert!(r.text.len() <= MAX_RENDERED_BYTES);
            }
            Err(TemplateError::Syntax { line, column, .. }) => {
                proptest::prop_assert!(line >= 1 && column >= 1);
            }
            Err(e) => proptest::prop_assert!(false, "{e:?}"),
        }
    }
}
