use jiff::SignedDuration;
use proptest::prelude::*;

use super::*;
use crate::testing::ts;

fn node(name: &str, zone: Option<&str>, pool: Option<&str>) -> NodeInfo {
    NodeInfo {
        name: name.into(),
        zone: zone.map(Into::into),
        pool: pool.map(Into::into),
    }
}

fn weekly(description: Option<&str>) -> WindowInfo {
    WindowInfo {
        namespace: "kumaco".into(),
        name: "weekly".into(),
        description: description.map(Into::into),
    }
}

/// A notice of `kind` about node-3 in zone-a, at 13:00:05 on 7 December 2026.
fn notice(kind: Kind) -> Notice {
    Notice {
        node: Some(node("node-3", Some("zone-a"), None)),
        window: Some(weekly(None)),
        ..Notice::new(
            "0a1b2c".into(),
            kind,
            "prod-eu".into(),
            ts("2026-12-07T13:00:05Z"),
        )
    }
}

fn window_notice(kind: Kind) -> Notice {
    Notice {
        node: None,
        window: Some(weekly(Some("Tuesday nights"))),
        ..notice(kind)
    }
}

fn forecast(not_fitting: &[&str]) -> Forecast {
    Forecast {
        expected_end: ts("2026-12-08T03:40:10Z"),
        p90_end: ts("2026-12-08T04:04:40Z"),
        not_fitting: not_fitting.iter().map(|s| s.to_string()).collect(),
    }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn kind_names_are_stable_and_parse_back() {
    let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        all,
        [
            "planned",
            "started",
            "completed",
            "ended",
            "waiting",
            "not-back",
            "window-opened",
            "window-closed"
        ]
    );
    for kind in Kind::ALL {
        assert_eq!(kind.name().parse::<Kind>(), Ok(kind));
        assert_eq!(kind.to_string(), kind.name());
        // `ALL` is in declaration order: `parse_set` indexes by discriminant.
        assert_eq!(Kind::ALL[kind as usize], kind);
    }
    assert_eq!(Kind::NotBack.label(), "not back");
    assert_eq!(Kind::WindowClosed.label(), "window closed");
    assert_eq!(Kind::Started.label(), "started");
    assert!(Kind::WindowOpened.is_window() && !Kind::Waiting.is_window());
}

#[test]
fn a_set_of_kinds_parses_in_order_once_each() {
    assert_eq!(
        Kind::parse_set("completed, started,completed"),
        Ok(vec![Kind::Started, Kind::Completed])
    );
    assert_eq!(Kind::parse_set("all"), Ok(Kind::ALL.to_vec()));
    assert_eq!(Kind::parse_set("waiting,all"), Ok(Kind::ALL.to_vec()));
    assert_eq!(Kind::parse_set("  "), Err(KindError::Empty));
    assert_eq!(
        Kind::parse_set("started,,ended"),
        Err(KindError::Unknown(String::new()))
    );
    let err = Kind::parse_set("started,Drain").unwrap_err();
    assert_eq!(
        err.to_string(),
        "\"Drain\" is not a transition: expected one of planned, started, completed, ended, \
         waiting, not-back, window-opened, window-closed, or all"
    );
    assert_eq!(
        KindError::Empty.to_string(),
        "no transition given: expected a comma-separated list of planned, started, completed, \
         ended, waiting, not-back, window-opened, window-closed, or all"
    );
}

#[test]
fn a_completed_maintenance_says_how_long_and_whether_it_rebooted() {
    let n = Notice {
        duration: Some(SignedDuration::from_secs(252)),
        rebooted: Some(true),
        reason: "NodeRebooted".into(),
        message: "the node rebooted (boot ID a1 -> b2)".into(),
        ..notice(Kind::Completed)
    };
    assert_eq!(
        n.title(),
        "node-3 (zone-a): maintenance completed after 4m12s, rebooted"
    );
    assert_eq!(
        n.text(),
        "window kumaco/weekly\n\
         NodeRebooted: the node rebooted (boot ID a1 -> b2)\n\
         cluster prod-eu, 2026-12-07 13:00:05 UTC"
    );
    let not = Notice {
        rebooted: Some(false),
        duration: Some(SignedDuration::from_millis(4_450)),
        node: Some(node("node-3", Some("zone-a"), Some("gpu"))),
        ..n.clone()
    };
    assert_eq!(
        not.title(),
        "node-3 (zone-a, gpu): maintenance completed after 4.5s, not rebooted"
    );
    let bare = Notice {
        rebooted: None,
        duration: None,
        node: Some(node("node-3", None, None)),
        ..n
    };
    assert_eq!(bare.title(), "node-3: maintenance completed");
}

#[test]
fn each_node_kind_has_its_title() {
    let with = |kind, secs: Option<i64>| Notice {
        duration: secs.map(SignedDuration::from_secs),
        node: Some(node("node-3", None, Some("blue"))),
        ..notice(kind)
    };
    let titles: Vec<String> = [
        with(Kind::Planned, None),
        with(Kind::Started, None),
        with(Kind::Ended, Some(3_725)),
        with(Kind::Ended, None),
        with(Kind::Waiting, Some(1_500)),
        with(Kind::Waiting, None),
        with(Kind::NotBack, Some(600)),
        with(Kind::NotBack, None),
    ]
    .iter()
    .map(Notice::title)
    .collect();
    assert_eq!(
        titles,
        [
            "node-3 (blue): maintenance planned",
            "node-3 (blue): maintenance started",
            "node-3 (blue): maintenance ended unfinished after 1h2m5s",
            "node-3 (blue): maintenance ended unfinished",
            "node-3 (blue): waiting to start for 25m0s",
            "node-3 (blue): waiting to start",
            "node-3 (blue): not Ready 10m0s after its maintenance",
            "node-3 (blue): not Ready after its maintenance",
        ]
    );
}

#[test]
fn a_waiting_node_says_what_it_waits_for() {
    let n = Notice {
        duration: Some(SignedDuration::from_secs(1_500)),
        reason: "WaitingForSlot".into(),
        message: "2 of 2 slots in use (node-1, node-2)".into(),
        window: Some(weekly(Some("Tuesday nights"))),
        ..notice(Kind::Waiting)
    };
    assert_eq!(
        n.text(),
        "window kumaco/weekly: Tuesday nights\n\
         WaitingForSlot: 2 of 2 slots in use (node-1, node-2)\n\
         cluster prod-eu, 2026-12-07 13:00:05 UTC"
    );
}

#[test]
fn a_planned_node_carries_the_forecast_and_whether_it_fits() {
    let n = Notice {
        reason: "MaintenanceWindow".into(),
        forecast: Some(forecast(&["node-9", "node-3"])),
        ..notice(Kind::Planned)
    };
    assert_eq!(
        n.text(),
        "expected done 2026-12-08 03:40 (p90 2026-12-08 04:05) UTC; 2 will not fit: node-9, node-3\n\
         node-3 is not expected to fit\n\
         window kumaco/weekly\n\
         MaintenanceWindow\n\
         cluster prod-eu, 2026-12-07 13:00:05 UTC"
    );
}

#[test]
fn an_opening_window_counts_its_nodes_and_names_those_that_will_not_fit() {
    let n = Notice {
        at: ts("2026-12-08T01:00:00Z"),
        selected: Some(120),
        forecast: Some(forecast(&["a", "b", "c"])),
        ..window_notice(Kind::WindowOpened)
    };
    assert_eq!(n.title(), "window kumaco/weekly opened: 120 nodes");
    assert_eq!(
        n.text(),
        "expected done 03:40 (p90 04:05) UTC; 3 will not fit: a, b, c\n\
         Tuesday nights\n\
         cluster prod-eu, 2026-12-08 01:00:00 UTC"
    );
    let one = Notice {
        selected: Some(1),
        forecast: None,
        window: Some(weekly(None)),
        ..n
    };
    assert_eq!(one.title(), "window kumaco/weekly opened: 1 node");
    assert_eq!(one.text(), "cluster prod-eu, 2026-12-08 01:00:00 UTC");
}

#[test]
fn a_short_rollout_is_forecast_to_the_second() {
    let n = Notice {
        at: ts("2026-12-08T01:00:00Z"),
        selected: Some(9),
        forecast: Some(Forecast {
            expected_end: ts("2026-12-08T01:00:26.4Z"),
            p90_end: ts("2026-12-08T01:00:31Z"),
            not_fitting: Vec::new(),
        }),
        ..window_notice(Kind::WindowOpened)
    };
    assert!(
        n.text()
            .starts_with("expected done 01:00:26 (p90 01:00:31) UTC\n"),
        "{}",
        n.text()
    );
}

#[test]
fn a_closing_window_compares_the_forecast_with_what_happened() {
    let left: Vec<Left> = (1..=7)
        .map(|i| Left {
            node: format!("node-{i}"),
            reason: "WaitingForSlot".into(),
            message: if i == 1 {
                String::new()
            } else {
                "2 of 2 slots in use".into()
            },
        })
        .collect();
    let n = Notice {
        at: ts("2026-12-08T04:10:00Z"),
        selected: Some(120),
        done: Some(113),
        left,
        forecast: Some(forecast(&["a", "b", "c"])),
        ..window_notice(Kind::WindowClosed)
    };
    assert_eq!(
        n.title(),
        "window kumaco/weekly closed: 113 of 120 nodes done, 7 left"
    );
    assert_eq!(
        n.text(),
        "forecast at the opening: done 03:40:10 (p90 04:04:40) UTC, 3 not fitting; closed 04:10:00 UTC with 7 left\n\
         left waiting:\n\
         - node-1: WaitingForSlot\n\
         - node-2: WaitingForSlot: 2 of 2 slots in use\n\
         - node-3: WaitingForSlot: 2 of 2 slots in use\n\
         - node-4: WaitingForSlot: 2 of 2 slots in use\n\
         - node-5: WaitingForSlot: 2 of 2 slots in use\n\
         - and 2 more\n\
         Tuesday nights\n\
         cluster prod-eu, 2026-12-08 04:10:00 UTC"
    );
    let all_done = Notice {
        done: Some(120),
        left: Vec::new(),
        ..n.clone()
    };
    assert_eq!(
        all_done.title(),
        "window kumaco/weekly closed: 120 of 120 nodes done"
    );
    assert!(
        all_done.text().starts_with(
            "forecast at the opening: done 03:40:10 (p90 04:04:40) UTC, 3 not fitting; \
             closed 04:10:00 UTC with none left\n"
        ),
        "{}",
        all_done.text()
    );
    let counts_unknown = Notice {
        done: None,
        selected: None,
        ..n
    };
    assert_eq!(
        counts_unknown.title(),
        "window kumaco/weekly closed: 7 left"
    );
}

#[test]
fn lists_show_the_first_names_then_how_many_more() {
    let all = names("n", 8);
    assert_eq!(
        list(all.iter().map(String::as_str), all.len()),
        "n1, n2, n3, n4, n5 and 3 more"
    );
    assert_eq!(list(all.iter().take(2).map(String::as_str), 2), "n1, n2");
    assert_eq!(
        list(all.iter().take(MAX_NAMES).map(String::as_str), MAX_NAMES),
        "n1, n2, n3, n4, n5"
    );
}

#[test]
fn durations_are_rounded_for_a_reader() {
    let cases = [
        (SignedDuration::from_millis(4_449), "4.4s"),
        (SignedDuration::from_millis(4_450), "4.5s"),
        (SignedDuration::from_millis(340), "300ms"),
        (SignedDuration::from_millis(59_960), "1m0s"),
        (SignedDuration::from_millis(252_499), "4m12s"),
        (SignedDuration::from_millis(252_500), "4m13s"),
        (SignedDuration::from_secs(-90), "-1m30s"),
        (SignedDuration::ZERO, "0s"),
        (SignedDuration::MAX, "2562047h47m16s"),
        (SignedDuration::MIN, "-2562047h47m16s"),
    ];
    for (d, want) in cases {
        assert_eq!(duration(d), want, "{d:?}");
    }
}

#[test]
fn times_show_seconds_near_and_the_date_when_another_day() {
    let at = ts("2026-12-07T23:50:00Z");
    assert_eq!(clock(at, ts("2026-12-07T23:50:26.9Z")), "23:50:26");
    assert_eq!(clock(at, ts("2026-12-08T00:10:00Z")), "2026-12-08 00:10:00");
    assert_eq!(clock(at, ts("2026-12-08T03:40:29Z")), "2026-12-08 03:40");
    assert_eq!(clock(at, ts("2026-12-08T03:40:30Z")), "2026-12-08 03:41");
    assert_eq!(clock(at, ts("2026-12-07T21:59:31Z")), "22:00");
}

#[test]
fn a_digest_counts_by_kind_and_names_the_first_of_each() {
    let mut notices = Vec::new();
    for (i, name) in names("node-", 7).into_iter().enumerate() {
        notices.push(Notice {
            node: Some(node(&name, None, None)),
            at: ts("2026-12-07T13:00:05Z") + SignedDuration::from_secs(i as i64 * 30),
            ..notice(Kind::Started)
        });
    }
    notices.push(Notice {
        node: Some(node("node-1", None, None)),
        at: ts("2026-12-07T13:04:59Z"),
        ..notice(Kind::Completed)
    });
    notices.push(window_notice(Kind::WindowOpened));
    // Given out of order: the digest orders by kind, names in the order given.
    notices.rotate_left(8);
    let (title, text) = digest(&notices);
    assert_eq!(
        title,
        "9 maintenance transitions: 7 started, 1 completed, 1 window opened"
    );
    assert_eq!(
        text,
        "started (7): node-1, node-2, node-3, node-4, node-5 and 2 more\n\
         completed (1): node-1\n\
         window opened (1): kumaco/weekly\n\
         cluster prod-eu, 2026-12-07 13:00:05 to 13:04:59 UTC"
    );
    let (title, text) = digest(&notices[..1]);
    assert_eq!(title, "1 maintenance transition: 1 window opened");
    assert_eq!(
        text,
        "window opened (1): kumaco/weekly\ncluster prod-eu, 2026-12-07 13:00:05 UTC"
    );
    assert_eq!(
        digest(&[]),
        ("no maintenance transitions".to_string(), String::new())
    );
}

#[test]
fn long_inputs_are_cut_to_the_bounds_on_a_character_boundary() {
    let long = "é".repeat(3_000);
    let n = Notice {
        node: Some(node(&long, Some(&long), None)),
        message: long.clone(),
        ..notice(Kind::Completed)
    };
    let title = n.title();
    assert_eq!(title.len(), MAX_TITLE_BYTES - 1, "{title}");
    assert!(title.ends_with("é…"));
    let text = n.text();
    assert!(text.len() <= MAX_TEXT_BYTES && text.len() > MAX_TEXT_BYTES - 4);
    assert!(text.ends_with('…'));
    let (title, text) = digest(&[n]);
    assert!(title.len() <= MAX_TITLE_BYTES);
    assert!(text.len() <= MAX_TEXT_BYTES);
    // A list's line is cut to its own bound.
    assert!(text.lines().next().unwrap().len() <= MAX_LINE_BYTES);
}

fn any_notice() -> impl Strategy<Value = Notice> {
    let text = "\\PC{0,300}";
    (
        prop::sample::select(Kind::ALL.to_vec()),
        (text, text, prop::option::of(text), prop::option::of(text)),
        (text, text),
        prop::option::of(any::<i64>()),
        (
            prop::option::of(any::<bool>()),
            prop::option::of(any::<usize>()),
            prop::option::of(any::<usize>()),
        ),
        prop::collection::vec((text, text, text), 0..12),
        prop::option::of((
            -10_000_000_000i64..10_000_000_000,
            prop::collection::vec(text, 0..12),
        )),
        -10_000_000_000i64..10_000_000_000,
        any::<bool>(),
    )
        .prop_map(
            |(
                kind,
                (cluster, name, zone, description),
                (reason, message),
                nanos,
                (rebooted, selected, done),
                left,
                forecast,
                at,
                has_node,
            )| {
                let at = Timestamp::from_second(at).unwrap_or(Timestamp::UNIX_EPOCH);
                Notice {
                    id: "1".into(),
                    kind,
                    cluster,
                    at,
                    node: has_node.then(|| NodeInfo {
                        name: name.clone(),
                        zone: zone.clone(),
                        pool: zone,
                    }),
                    window: Some(WindowInfo {
                        namespace: name.clone(),
                        name,
                        description,
                    }),
                    reason,
                    message,
                    duration: nanos.map(SignedDuration::from_nanos),
                    rebooted,
                    selected,
                    done,
                    left: left
                        .into_iter()
                        .map(|(node, reason, message)| Left {
                            node,
                            reason,
                            message,
                        })
                        .collect(),
                    forecast: forecast.map(|(secs, not_fitting)| Forecast {
                        expected_end: Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH),
                        p90_end: Timestamp::MAX,
                        not_fitting,
                    }),
                }
            },
        )
}

proptest! {
    #[test]
    fn any_notice_is_worded_within_the_bounds(notices in prop::collection::vec(any_notice(), 0..6)) {
        for n in &notices {
            prop_assert!(n.title().len() <= MAX_TITLE_BYTES);
            prop_assert!(n.text().len() <= MAX_TEXT_BYTES);
        }
        let (title, text) = digest(&notices);
        prop_assert!(title.len() <= MAX_TITLE_BYTES);
        prop_assert!(text.len() <= MAX_TEXT_BYTES);
    }

    #[test]
    fn any_spec_parses_or_is_refused(spec in "[a-z, -]{0,40}") {
        match Kind::parse_set(&spec) {
            Ok(kinds) => {
                prop_assert!(!kinds.is_empty());
                prop_assert!(kinds.windows(2).all(|w| w[0] < w[1]));
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }
}
