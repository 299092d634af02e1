use super::table::{ids, truncated_names};
use super::*;
use crate::tools::nodes::ListedNode;
use crate::window::test_window as window;
use kumaco_core::testing::ts;

fn node(name: &str, zone: &str) -> ListedNode {
    ListedNode {
        name: name.into(),
        labels: [("zone".to_string(), zone.to_string())].into(),
    }
}

/// (start, end, windows, blackouts, nodes) per interval, as strings.
fn rows(plan: &Plan) -> Vec<(String, String, String, String, String)> {
    plan.intervals
        .iter()
        .map(|i| {
            (
                i.start.to_string(),
                i.end.to_string(),
                ids(&i.windows),
                ids(&i.blackouts),
                i.nodes.join(","),
            )
        })
        .collect()
}

fn row(s: &str, e: &str, w: &str, b: &str, n: &str) -> (String, String, String, String, String) {
    (s.into(), e.into(), w.into(), b.into(), n.into())
}

#[test]
fn overlapping_windows_and_a_blackout() {
    let windows = [
        window("a", "0 2 * * *", "2h", "zone=a", false),
        window("all", "0 3 * * *", "2h", "", false),
        // Friday 2026-01-02 is frozen for zone a.
        window("freeze", "2026-01-02T00:00:00Z", "24h", "zone=a", true),
    ];
    let nodes = [node("a1", "a"), node("b1", "b")];
    let plan = compute(
        &windows,
        &nodes,
        ts("2026-01-01T00:00:00Z"),
        ts("2026-01-02T06:00:00Z"),
        None,
    )
    .unwrap();
    assert_eq!(
        rows(&plan),
        [
            row("2026-01-01T00:00:00Z", "2026-01-01T02:00:00Z", "-", "-", ""),
            row(
                "2026-01-01T02:00:00Z",
                "2026-01-01T03:00:00Z",
                "ops/a",
                "-",
                "a1"
            ),
            row(
                "2026-01-01T03:00:00Z",
                "2026-01-01T04:00:00Z",
                "ops/a,ops/all",
                "-",
                "a1,b1"
            ),
            row(
                "2026-01-01T04:00:00Z",
                "2026-01-01T05:00:00Z",
                "ops/all",
                "-",
                "a1,b1"
            ),
            row("2026-01-01T05:00:00Z", "2026-01-02T00:00:00Z", "-", "-", ""),
            row(
                "2026-01-02T00:00:00Z",
                "2026-01-02T02:00:00Z",
                "-",
                "ops/freeze",
                ""
            ),
            // "a" is active but selects only a1, which the blackout holds back.
            row(
                "2026-01-02T02:00:00Z",
                "2026-01-02T03:00:00Z",
                "ops/a",
                "ops/freeze",
                ""
            ),
            row(
                "2026-01-02T03:00:00Z",
                "2026-01-02T04:00:00Z",
                "ops/a,ops/all",
                "ops/freeze",
                "b1"
            ),
            row(
                "2026-01-02T04:00:00Z",
                "2026-01-02T05:00:00Z",
                "ops/all",
                "ops/freeze",
                "b1"
            ),
            row(
                "2026-01-02T05:00:00Z",
                "2026-01-02T06:00:00Z",
                "-",
                "ops/freeze",
                ""
            ),
        ]
    );
    // Zone a is blacked out the whole second day, including during "a" (02:00-04:00).
    assert!(plan.intervals[5..].iter().all(|i| i.blacked_out == ["a1"]));
    assert_eq!(plan.lanes[0].occurrences.len(), 2);
    assert_eq!(plan.lanes[2].nodes, ["a1"]);
}

#[test]
fn self_overlapping_occurrences_make_one_interval() {
    // Every hour for 90 minutes: always active once started.
    let windows = [window("w", "0 * * * *", "90m", "", false)];
    let plan = compute(
        &windows,
        &[node("n", "a")],
        ts("2026-01-01T00:00:00Z"),
        ts("2026-01-01T05:00:00Z"),
        None,
    )
    .unwrap();
    assert_eq!(
        rows(&plan),
        [row(
            "2026-01-01T00:00:00Z",
            "2026-01-01T05:00:00Z",
            "ops/w",
            "-",
            "n"
        )]
    );
    // The occurrence that started at 23:00 the day before overlaps the period.
    assert_eq!(
        plan.lanes[0].occurrences[0].start,
        ts("2025-12-31T23:00:00Z")
    );
    assert_eq!(plan.lanes[0].occurrences.len(), 6);
}

#[test]
fn a_period_inside_an_occurrence_starts_active_and_ends_at_to() {
    let windows = [window("w", "0 0 * * *", "24h", "zone=a", false)];
    let plan = compute(
        &windows,
        &[node("a1", "a")],
        ts("2026-01-01T12:00:00Z"),
        ts("2026-01-01T13:00:00Z"),
        None,
    )
    .unwrap();
    assert_eq!(
        rows(&plan),
        [row(
            "2026-01-01T12:00:00Z",
            "2026-01-01T13:00:00Z",
            "ops/w",
            "-",
            "a1"
        )]
    );
}

fn planned_rows(plan: &Plan) -> Vec<(String, String, String, String)> {
    plan.intervals
        .iter()
        .map(|i| {
            (
                i.start.to_string(),
                i.end.to_string(),
                i.nodes.join(","),
                i.planned.join(","),
            )
        })
        .collect()
}

fn prow(s: &str, e: &str, n: &str, p: &str) -> (String, String, String, String) {
    (s.into(), e.into(), n.into(), p.into())
}

#[test]
fn planned_from_the_lead_time_until_the_start_and_never_under_a_blackout() {
    let windows = [
        window("a", "0 2 * * *", "2h", "zone=a", false),
        // Covers zone b at 02:00 on the 1st (the start), not at 02:00 on the 2nd.
        window("freeze", "2026-01-01T01:00:00Z", "2h", "zone=b", true),
        window("all", "0 2 * * *", "1h", "", false),
    ];
    let nodes = [node("a1", "a"), node("b1", "b")];
    let lead = Some(SignedDuration::from_mins(90));
    let plan = compute(
        &windows,
        &nodes,
        ts("2026-01-01T00:00:00Z"),
        ts("2026-01-02T03:00:00Z"),
        lead,
    )
    .unwrap();
    assert_eq!(
        planned_rows(&plan),
        [
            prow("2026-01-01T00:00:00Z", "2026-01-01T00:30:00Z", "", ""),
            // The lead-time edge: 02:00 - 90m. b1 is not planned: the freeze covers
            // it at the start (though not yet now).
            prow("2026-01-01T00:30:00Z", "2026-01-01T01:00:00Z", "", "a1"),
            prow("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "", "a1"),
            // Nothing after the start: a1 is in maintenance, b1 held back.
            prow("2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z", "a1", ""),
            prow("2026-01-01T03:00:00Z", "2026-01-01T04:00:00Z", "a1", ""),
            prow("2026-01-01T04:00:00Z", "2026-01-02T00:30:00Z", "", ""),
            prow("2026-01-02T00:30:00Z", "2026-01-02T02:00:00Z", "", "a1,b1"),
            prow("2026-01-02T02:00:00Z", "2026-01-02T03:00:00Z", "a1,b1", ""),
        ]
    );
    // From 01:00 the freeze is active: b1 is blacked out (and still not planned).
    assert_eq!(plan.intervals[2].blacked_out, ["b1"]);
    // Without a lead time nothing is planned and the lead-time edges do not split.
    let plain = compute(
        &windows,
        &nodes,
        ts("2026-01-01T00:00:00Z"),
        ts("2026-01-02T03:00:00Z"),
        None,
    )
    .unwrap();
    assert!(plain.intervals.iter().all(|i| i.planned.is_empty()));
    assert!(
        plain
            .intervals
            .iter()
            .all(|i| i.start.strftime("%M").to_string() == "00")
    );
}

#[test]
fn planned_is_shown_in_every_output() {
    let windows = [window("a", "0 2 * * *", "1h", "zone=a", false)];
    let plan_with = |lead| {
        compute(
            &windows,
            &[node("a1", "a")],
            ts("2026-01-01T00:00:00Z"),
            ts("2026-01-01T03:00:00Z"),
            lead,
        )
        .unwrap()
    };
    let plan = plan_with(Some(SignedDuration::from_hours(1)));
    let t = table(&plan, &TimeZone::UTC);
    assert!(t.lines().next().unwrap().ends_with("   PLANNED"), "{t}");
    assert!(
        t.lines()
            .nth(2)
            .unwrap()
            .starts_with("2026-01-01T01:00:00Z   2026-01-01T02:00:00Z")
            && t.lines().nth(2).unwrap().ends_with("   a1"),
        "{t}"
    );
    let j = json(&plan, "UTC");
    assert_eq!(j["plannedLeadTime"], "1h0m0s");
    assert_eq!(j["intervals"][1]["planned"], serde_json::json!(["a1"]));
    assert_eq!(j["intervals"][2]["planned"], serde_json::json!([]));
    let picture = svg(&plan, &TimeZone::UTC, "UTC");
    assert!(picture.contains(r#"fill="url(#planned)"><title>2026-01-01T01:00:00Z to 2026-01-01T02:00:00Z: 1 node(s) planned: a1</title>"#), "{picture}");
    // Without a lead time, none of it.
    let plan = plan_with(None);
    assert!(!table(&plan, &TimeZone::UTC).contains("PLANNED"));
    assert!(json(&plan, "UTC").get("plannedLeadTime").is_none());
    assert!(json(&plan, "UTC")["intervals"][0].get("planned").is_none());
    assert!(!svg(&plan, &TimeZone::UTC, "UTC").contains("planned"));
}

#[test]
fn the_lead_time_must_be_a_positive_go_duration() {
    assert_eq!(parse_lead("90m").unwrap(), SignedDuration::from_mins(90));
    for bad in ["0s", "-1h", "1d", ""] {
        let err = parse_lead(bad).unwrap_err();
        assert!(
            err.to_string().starts_with("--planned-lead-time: "),
            "{err}"
        );
        assert_eq!(err.exit_code(), 2);
    }
}

#[test]
fn very_frequent_schedules_are_refused() {
    let windows = [window("w", "@every 1s", "500ms", "", false)];
    let err = compute(
        &windows,
        &[],
        ts("2026-01-01T00:00:00Z"),
        ts("2026-01-02T00:00:00Z"),
        None,
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::TooManyEdges { .. }), "{err}");
}

#[test]
fn names_are_truncated() {
    let names: Vec<String> = (1..=5).map(|i| format!("n{i}")).collect();
    assert_eq!(truncated_names(&names), "n1,n2,n3 +2 more");
    assert_eq!(truncated_names(&[]), "-");
}
