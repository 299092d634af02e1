use super::*;
use crate::testing::ts;
use proptest::prelude::*;

fn id() -> WindowId {
    WindowId {
        namespace: "ops".into(),
        name: "w".into(),
    }
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn window(start: &str, duration: &str) -> Window {
    Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, start),
            (KEY_DURATION, duration),
            (KEY_NODE_SELECTOR, ""),
        ]),
        &TimeZone::UTC,
    )
    .unwrap()
}

#[test]
fn valid_window_loads_with_every_field() {
    let w = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "CRON_TZ=Europe/Berlin 0 2 * * sat"),
            (KEY_DURATION, "3h"),
            (KEY_NODE_SELECTOR, "zone in (a,b)"),
            (KEY_DESCRIPTION, "weekly reboots"),
            (KEY_BLACKOUT, "false"),
        ]),
        &TimeZone::UTC,
    )
    .unwrap();
    assert_eq!(w.duration.to_string(), "3h0m0s");
    assert_eq!(w.schedule.zone_name(), "Europe/Berlin");
    assert_eq!(w.description.as_deref(), Some("weekly reboots"));
    assert!(!w.blackout);
    assert!(w.unknown_keys.is_empty());
}

#[test]
fn every_error_is_reported_with_its_key() {
    let err = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "0 0 2 * * 6"),
            (KEY_DURATION, "1d"),
            (KEY_BLACKOUT, "yes"),
        ]),
        &TimeZone::UTC,
    )
    .unwrap_err();
    let keys: Vec<_> = err.0.iter().map(|e| e.key).collect();
    assert_eq!(
        keys,
        [
            KEY_NODE_SELECTOR,
            KEY_START_TIME,
            KEY_DURATION,
            KEY_BLACKOUT
        ]
    );
    let text = err.to_string();
    assert!(
        text.contains(
            "startTime: expected 5 fields (minute hour day-of-month month day-of-week), found 6 in \"0 0 2 * * 6\""
        ),
        "{text}"
    );
    assert!(text.contains("nodeSelector: missing; expected"), "{text}");
    assert!(
        text.contains("blackout: \"yes\" is not a boolean"),
        "{text}"
    );
}

#[test]
fn duration_must_be_positive() {
    for d in ["0s", "-5m", "0"] {
        let err = Window::from_data(
            id(),
            &data(&[
                (KEY_START_TIME, "@daily"),
                (KEY_DURATION, d),
                (KEY_NODE_SELECTOR, ""),
            ]),
            &TimeZone::UTC,
        )
        .unwrap_err();
        assert_eq!(err.0.len(), 1);
        assert_eq!(err.0[0].key, KEY_DURATION);
        assert!(err.0[0].message.contains("not positive"), "{err}");
    }
}

#[test]
fn bad_selector_names_the_key() {
    let err = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "@daily"),
            (KEY_DURATION, "1h"),
            (KEY_NODE_SELECTOR, "zone in (a"),
        ]),
        &TimeZone::UTC,
    )
    .unwrap_err();
    assert_eq!(err.0[0].key, KEY_NODE_SELECTOR);
}

#[test]
fn unknown_keys_are_warnings_not_errors() {
    let w = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "@daily"),
            (KEY_DURATION, "1h"),
            (KEY_NODE_SELECTOR, ""),
            ("nodeselector", "x=y"),
        ]),
        &TimeZone::UTC,
    )
    .unwrap();
    assert_eq!(w.unknown_keys, ["nodeselector"]);
    let lint = w.lint(ts("2026-01-01T00:00:00Z"));
    assert!(lint[0].contains("unknown key \"nodeselector\""), "{lint:?}");
}

#[test]
fn blackout_accepts_go_booleans() {
    for (v, want) in [
        ("true", true),
        ("True", true),
        ("1", true),
        ("false", false),
    ] {
        let w = Window::from_data(
            id(),
            &data(&[
                (KEY_START_TIME, "@daily"),
                (KEY_DURATION, "1h"),
                (KEY_NODE_SELECTOR, ""),
                (KEY_BLACKOUT, v),
            ]),
            &TimeZone::UTC,
        )
        .unwrap();
        assert_eq!(w.blackout, want, "{v}");
    }
}

#[test]
fn active_is_start_inclusive_end_exclusive() {
    let w = window("0 2 * * *", "1h");
    assert!(!w.is_active(ts("2026-01-01T01:59:59.999Z")));
    assert!(w.is_active(ts("2026-01-01T02:00:00Z")));
    assert!(w.is_active(ts("2026-01-01T02:59:59.999Z")));
    assert!(!w.is_active(ts("2026-01-01T03:00:00Z")));
    assert_eq!(
        w.latest_active(ts("2026-01-01T02:30:00Z")),
        Some(Occurrence {
            start: ts("2026-01-01T02:00:00Z"),
            end: ts("2026-01-01T03:00:00Z")
        })
    );
}

#[test]
fn overlapping_occurrences_extend_the_window() {
    // Every hour for 90 minutes: at 10:45 the 10:00 and 09:00 occurrences... only 10:00
    // and (09:00 ended at 10:30); at 10:15 both 09:00 and 10:00 are active.
    let w = window("0 * * * *", "90m");
    let at = ts("2026-01-01T10:15:00Z");
    assert_eq!(
        w.earliest_active(at).unwrap().start,
        ts("2026-01-01T09:00:00Z")
    );
    assert_eq!(w.latest_active(at).unwrap().end, ts("2026-01-01T11:30:00Z"));
    // The next edge is the 09:00 occurrence's end, then the 11:00 start.
    assert_eq!(w.next_edge_after(at), Some(ts("2026-01-01T10:30:00Z")));
    assert_eq!(
        w.next_edge_after(ts("2026-01-01T10:30:00Z")),
        Some(ts("2026-01-01T11:00:00Z"))
    );
}

#[test]
fn edges_of_a_daily_window() {
    let w = window("0 2 * * *", "1h");
    assert_eq!(
        w.next_edge_after(ts("2026-01-01T00:00:00Z")),
        Some(ts("2026-01-01T02:00:00Z"))
    );
    assert_eq!(
        w.next_edge_after(ts("2026-01-01T02:00:00Z")),
        Some(ts("2026-01-01T03:00:00Z"))
    );
    assert_eq!(
        w.next_edge_after(ts("2026-01-01T03:00:00Z")),
        Some(ts("2026-01-02T02:00:00Z"))
    );
}

#[test]
fn one_shot_window() {
    let w = window("2026-12-05T02:00:00+01:00", "2h");
    assert!(w.is_active(ts("2026-12-05T01:00:00Z")));
    assert!(!w.is_active(ts("2026-12-05T03:00:00Z")));
    assert_eq!(
        w.next_edge_after(ts("2026-12-05T01:30:00Z")),
        Some(ts("2026-12-05T03:00:00Z"))
    );
    assert_eq!(w.next_edge_after(ts("2026-12-05T03:00:00Z")), None);
    assert!(w.lint(ts("2026-12-04T00:00:00Z")).is_empty());
    let lint = w.lint(ts("2026-12-06T00:00:00Z"));
    assert!(lint[0].contains("is over"), "{lint:?}");
}

#[test]
fn every_is_anchored_at_the_epoch() {
    let w = window("@every 10m", "1m");
    assert!(w.is_active(ts("2026-01-01T00:10:30Z")));
    assert!(!w.is_active(ts("2026-01-01T00:11:00Z")));
    assert_eq!(
        w.next_edge_after(ts("2026-01-01T00:11:00Z")),
        Some(ts("2026-01-01T00:20:00Z"))
    );
}

#[test]
fn lint_never_fires_and_dst() {
    let never = window("0 0 30 2 *", "1h");
    let lint = never.lint(ts("2026-01-01T00:00:00Z"));
    assert!(lint.iter().any(|l| l.contains("never fires")), "{lint:?}");

    let dst = window("CRON_TZ=America/New_York 30 2 * * *", "1h");
    let lint = dst.lint(ts("2026-01-01T00:00:00Z"));
    assert!(
        lint.iter()
            .any(|l| l.contains("2026-03-08") && l.contains("does not happen")),
        "{lint:?}"
    );
    let dst = window("CRON_TZ=America/New_York 30 1 * * *", "1h");
    let lint = dst.lint(ts("2026-01-01T00:00:00Z"));
    assert!(
        lint.iter()
            .any(|l| l.contains("2026-11-01") && l.contains("happens twice")),
        "{lint:?}"
    );
}

/// Every occurrence start in `[from, until]`, by walking the schedule.
fn starts(w: &Window, from: Timestamp, until: Timestamp) -> Vec<Timestamp> {
    let mut out = Vec::new();
    let mut t = from.checked_sub(SignedDuration::from_nanos(1)).unwrap();
    while let Some(s) = w.schedule.next_after(t) {
        if s > until {
            break;
        }
        out.push(s);
        t = s;
    }
    out
}

proptest! {
    /// The fast answers agree with walking every occurrence.
    #[test]
    fn active_and_edges_agree_with_brute_force(
        spec in prop::sample::select(vec![
            "*/7 * * * *", "0 * * * *", "30 1 * * *", "@every 5m", "@every 97s",
            "CRON_TZ=America/New_York 30 1 * * *", "CRON_TZ=Europe/Berlin 0 2 * 3,10 0",
            "2026-03-08T06:30:00Z",
        ]),
        dur in prop::sample::select(vec!["1s", "90s", "7m", "1h", "150m", "25h"]),
        offset_s in 0i64..(400 * 86400),
        nanos in 0i64..1_000_000_000,
    ) {
        let w = window(spec, dur);
        let t = ts("2025-12-01T00:00:00Z")
            .checked_add(SignedDuration::new(offset_s, nanos as i32)).unwrap();
        let d = w.duration.to_signed();
        let all = starts(&w, t.checked_sub(d).unwrap(), t.checked_add(SignedDuration::from_hours(48)).unwrap());
        let active: Vec<_> = all.iter().filter(|s| **s <= t && t < s.checked_add(d).unwrap()).collect();
        prop_assert_eq!(w.is_active(t), !active.is_empty());
        prop_assert_eq!(
            w.latest_active(t).map(|o| o.start),
            active.last().map(|s| **s)
        );
        let brute_edge = all.iter()
            .flat_map(|s| [*s, s.checked_add(d).unwrap()])
            .filter(|e| *e > t)
            .min();
        let edge = w.next_edge_after(t);
        if let Some(b) = brute_edge {
            prop_assert_eq!(edge, Some(b));
        }
    }
}

#[test]
fn a_lone_occurrence_is_its_own_span() {
    let w = window("0 2 * * *", "1h");
    let t = ts("2026-01-01T02:30:00Z");
    let span = w.span_at(t, ts("2026-01-01T00:00:00Z")).unwrap();
    assert_eq!(span.start, Some(ts("2026-01-01T02:00:00Z")));
    assert_eq!(span.end, Some(ts("2026-01-01T03:00:00Z")));
    assert_eq!(w.span_at(ts("2026-01-01T03:00:00Z"), t), None);
}

#[test]
fn overlapping_occurrences_merge_and_the_end_does_not_move() {
    // Every 10 minutes for 25 minutes, 02:00-02:59 only: one span 02:00-03:15.
    let w = window("*/10 2 * * *", "25m");
    let horizon = ts("2026-01-01T00:00:00Z");
    let ends: Vec<_> = ["02:05", "02:31", "02:59", "03:10"]
        .iter()
        .map(|hm| {
            let span = w
                .span_at(ts(&format!("2026-01-01T{hm}:00Z")), horizon)
                .unwrap();
            assert_eq!(span.start, Some(ts("2026-01-01T02:00:00Z")), "{hm}");
            span.end
        })
        .collect();
    assert!(ends.iter().all(|e| *e == Some(ts("2026-01-01T03:15:00Z"))));
    assert_eq!(
        w.last_end(ts("2026-01-01T03:20:00Z"), horizon),
        Some(ts("2026-01-01T03:15:00Z"))
    );
    assert_eq!(w.last_end(ts("2026-01-01T03:10:00Z"), horizon), None);
}

#[test]
fn endless_chains_have_no_end_in_sight_and_no_known_start() {
    let w = window("@every 1s", "1h");
    let t = ts("2026-01-01T02:30:00Z");
    let a = w.span_at(t, ts("2026-01-01T02:00:00Z")).unwrap();
    let b = w
        .span_at(ts("2026-01-01T02:30:07Z"), ts("2026-01-01T02:00:07Z"))
        .unwrap();
    assert_eq!(
        a,
        Span {
            start: None,
            end: None
        }
    );
    assert_eq!(a, b);
    assert_eq!(w.last_end(t, ts("2026-01-01T02:00:00Z")), None);
    // Back to back: a minute every minute.
    let w = window("* * * * *", "1m");
    assert_eq!(w.span_at(t, ts("2026-01-01T00:00:00Z")).unwrap().end, None);
}

#[test]
fn the_latest_span_end_within_the_horizon() {
    let w = window("*/5 * * * *", "1m");
    let t = ts("2026-01-01T02:02:30Z");
    assert_eq!(
        w.last_end(t, ts("2026-01-01T01:30:00Z")),
        Some(ts("2026-01-01T02:01:00Z"))
    );
    assert_eq!(w.last_end(t, ts("2026-01-01T02:01:01Z")), None);
    assert_eq!(w.next_span_start(t), Some(ts("2026-01-01T02:05:00Z")));
    assert_eq!(w.next_span_start(ts("2026-01-01T02:00:30Z")), None);
}

proptest! {
    /// Wherever a span is asked about from inside it, it is the same span: what
    /// messages and event keys are made of does not move while the window stays active.
    #[test]
    fn a_span_is_the_same_from_any_instant_inside_it(
        minute in 0u32..60, step in 1u32..30, dur_min in 1i64..90, offset in 0i64..7200,
    ) {
        let w = window(&format!("{minute}/{step} 3 * * *"), &format!("{dur_min}m"));
        let base = ts("2026-01-01T03:00:00Z");
        let horizon = ts("2026-01-01T00:00:00Z");
        let t = base + SignedDuration::from_secs(offset);
        if let Some(span) = w.span_at(t, horizon) {
            let (start, end) = (span.start.unwrap(), span.end.unwrap());
            prop_assert!(start <= t && t < end);
            for probe in [start, end - SignedDuration::from_secs(1)] {
                prop_assert_eq!(w.span_at(probe, horizon), Some(span));
            }
            prop_assert!(!w.is_active(end));
            prop_assert_eq!(w.last_end(end, horizon), Some(end));
        }
    }
}

#[test]
fn oversized_values_are_refused_naming_the_limit_and_descriptions_are_cut() {
    let big = "x".repeat(MAX_VALUE_BYTES + 1);
    let err = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, &big),
            (KEY_DURATION, "1h"),
            (KEY_NODE_SELECTOR, &big),
        ]),
        &TimeZone::UTC,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("startTime: longer than 4096 bytes"), "{err}");
    assert!(
        err.contains("nodeSelector: longer than 4096 bytes"),
        "{err}"
    );
    assert!(!err.contains("missing"), "{err}");

    let selector: Vec<String> = (0..=MAX_SELECTOR_REQUIREMENTS)
        .map(|i| format!("k{i}"))
        .collect();
    let err = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "@daily"),
            (KEY_DURATION, "1h"),
            (KEY_NODE_SELECTOR, &selector.join(",")),
        ]),
        &TimeZone::UTC,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(err, "nodeSelector: 65 requirements; at most 64 are allowed");

    let w = Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "@daily"),
            (KEY_DURATION, "1h"),
            (KEY_NODE_SELECTOR, ""),
            (KEY_DESCRIPTION, &"é".repeat(300_000)),
        ]),
        &TimeZone::UTC,
    )
    .unwrap();
    assert!(w.description.as_ref().unwrap().len() <= MAX_VALUE_BYTES);
    let lint = w.lint(ts("2026-01-01T00:00:00Z"));
    assert_eq!(
        lint[0],
        "description: longer than 200 bytes; node conditions show only its first 200 bytes"
    );
}

/// Samoa skipped 2011-12-30, but a yearly run on the 30th fires again in 2012: the lint
/// must not say "never fires" (it did, after a search of a second, when robfig's endless
/// loop on that day ran into kumaco's move bound), and names the skipped run.
#[test]
fn lint_on_a_skipped_day_is_true() {
    let w = window("CRON_TZ=Pacific/Apia 0 0 30 12 *", "1h");
    let lint = w.lint(ts("2011-12-28T00:00:00Z"));
    assert_eq!(
        lint,
        [
            "startTime: the 00:00:00 run on 2011-12-30 does not happen (the clock skips it): \
          Pacific/Apia changes its offset from -10 to +14"
        ],
    );
}

/// robfig raises `@every` below a second to a second and drops fractions of a second;
/// kumaco keeps that (a spec must mean the same in Go tools) but says so.
#[test]
fn lint_every_adjusted_by_robfig() {
    let now = ts("2026-01-01T00:00:00Z");
    for (spec, says) in [
        (
            "@every 0s",
            "runs every 1s: an interval below 1s is raised to 1s",
        ),
        (
            "@every 1ns",
            "runs every 1s: an interval below 1s is raised to 1s",
        ),
        (
            "@every 999ms",
            "runs every 1s: an interval below 1s is raised to 1s",
        ),
        (
            "@every -5m",
            "runs every 1s: an interval below 1s is raised to 1s",
        ),
        (
            "@every 1.5s",
            "runs every 1s: intervals are rounded down to whole seconds",
        ),
        (
            "@every 90m0.2s",
            "runs every 1h30m0s: intervals are rounded down",
        ),
    ] {
        let lint = window(spec, "1m").lint(now);
        assert_eq!(lint.len(), 1, "{spec}: {lint:?}");
        assert!(
            lint[0].starts_with(&format!("startTime: {spec:?} {says}")),
            "{spec}: {lint:?}"
        );
    }
    for spec in ["@every 1s", "@every 90m", "@every 1h0.000s"] {
        assert_eq!(window(spec, "1m").lint(now), Vec::<String>::new(), "{spec}");
    }
}

#[test]
fn lint_durations_longer_than_a_year() {
    let now = ts("2026-01-01T00:00:00Z");
    assert!(window("@daily", "8784h").lint(now).is_empty());
    for duration in ["8784h0.000000001s", "1000000h", "2562047h"] {
        let lint = window("@daily", duration).lint(now);
        assert_eq!(lint.len(), 1, "{duration}: {lint:?}");
        assert!(
            lint[0].starts_with("duration: ")
                && lint[0].contains("is longer than a year (8784h0m0s)"),
            "{lint:?}"
        );
    }
}

fn selector_window(selector: &str) -> Result<Window, InvalidWindow> {
    Window::from_data(
        id(),
        &data(&[
            (KEY_START_TIME, "@daily"),
            (KEY_DURATION, "1h"),
            (KEY_NODE_SELECTOR, selector),
        ]),
        &TimeZone::UTC,
    )
}

#[test]
fn node_selector_in_object_form_loads_as_its_go_string() {
    let yaml = "matchLabels:\n  topology.kubernetes.io/zone: zone-a\nmatchExpressions:\n\
                - {key: node-role, operator: NotIn, values: [control-plane]}\n";
    let w = selector_window(yaml).unwrap();
    assert_eq!(
        w.selector.to_string(),
        "node-role notin (control-plane),topology.kubernetes.io/zone=zone-a"
    );
    let json = selector_window(r#" {"matchLabels":{"zone":"a"}}"#).unwrap();
    assert_eq!(json.selector, selector::parse("zone=a").unwrap());
    // An empty object selects every node, as the empty string does.
    assert!(selector_window("{}").unwrap().selector.is_everything());
}

#[test]
fn node_selector_object_errors_name_the_key_and_the_field() {
    let err = selector_window("matchLabel:\n  zone: a\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "nodeSelector: object form: not a LabelSelector: unknown field `matchLabel`"
        ),
        "{err}"
    );
    let err =
        selector_window(r#"{"matchExpressions":[{"key":"a","operator":"in","values":["x"]}]}"#)
            .unwrap_err()
            .to_string();
    assert!(
        err.contains(
            r#"matchExpressions[0].operator: "in" is not a valid label selector operator"#
        ),
        "{err}"
    );
}

#[test]
fn node_selector_objects_have_the_same_bounds() {
    let labels: Vec<String> = (0..=MAX_SELECTOR_REQUIREMENTS)
        .map(|i| format!("k{i}: v"))
        .collect();
    let err = selector_window(&format!("matchLabels: {{{}}}", labels.join(", ")))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "nodeSelector: 65 requirements; at most 64 are allowed");
    let big = format!(
        "{{\"matchLabels\":{{\"a\":\"{}\"}}}}",
        "v".repeat(MAX_VALUE_BYTES)
    );
    let err = selector_window(&big).unwrap_err().to_string();
    assert!(
        err.contains("nodeSelector: longer than 4096 bytes"),
        "{err}"
    );
}

/// Every occurrence overlapping the period, one that began before it included.
#[test]
fn occurrences_between_overlap_the_period() {
    let w = test_window("w", "0 2 * * *", "3h", "", false);
    let t = |s: &str| s.parse::<Timestamp>().unwrap();
    let starts: Vec<String> = w
        .occurrences_between(t("2026-01-01T04:00:00Z"), t("2026-01-03T02:00:00Z"))
        .map(|o| format!("{} {}", o.start, o.end))
        .collect();
    assert_eq!(
        starts,
        [
            "2026-01-01T02:00:00Z 2026-01-01T05:00:00Z",
            "2026-01-02T02:00:00Z 2026-01-02T05:00:00Z",
        ]
    );
}
