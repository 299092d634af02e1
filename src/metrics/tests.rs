use std::collections::BTreeMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::conditions::{Status, UNDER_MAINTENANCE};
use crate::pass::{ConditionState, Counts, WindowSummary};
use crate::window::WindowId;

fn window(name: &str) -> WindowSummary {
    WindowSummary {
        id: WindowId {
            namespace: "ops".into(),
            name: name.into(),
        },
        valid: true,
        blackout: false,
        active: true,
        selected: 3,
        next_start: Some("2026-01-02T02:00:00Z".parse().unwrap()),
    }
}

/// The families with no labels; a labelled family shows once it has a series (below).
#[test]
fn every_family_is_exported_with_its_help() {
    let text = Metrics::new().encode();
    for family in [
        "kumaco_leader",
        "kumaco_nodes_in_scope",
        "kumaco_nodes_contested",
        "kumaco_writes_deferred",
        "kumaco_clock_steps",
        "kumaco_reconcile_duration_seconds",
        "kumaco_in_progress_slots",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} missing:\n{text}"
        );
    }
}

#[test]
fn a_deleted_window_and_a_gone_condition_state_lose_their_series() {
    let m = Metrics::new();
    let mut counts = Counts::default();
    let state = ConditionState {
        type_: UNDER_MAINTENANCE,
        status: Status::True,
        reason: "MaintenanceWindow",
    };
    counts.conditions = BTreeMap::from([(state, 2)]);
    m.pass.set(&counts, &[window("a"), window("b")]);
    let text = m.encode();
    assert!(text.contains(r#"kumaco_window_selected_nodes{window_namespace="ops",window="b"} 3"#));
    assert!(text.contains(r#"reason="MaintenanceWindow"} 2"#), "{text}");
    m.pass.set(&Counts::default(), &[window("a")]);
    let text = m.encode();
    assert!(!text.contains(r#"window="b""#), "b's series stay:\n{text}");
    assert!(text.contains(r#"window="a""#));
    assert!(!text.contains(r#"reason="MaintenanceWindow""#), "{text}");
}

#[test]
fn writes_and_dry_run_counters_are_labelled_by_what_they_count() {
    let m = Metrics::new();
    m.write("patch", WriteResult::Conflict);
    m.write("event", WriteResult::Ok);
    m.dry_run
        .write(UNDER_MAINTENANCE, "True", "MaintenanceWindow");
    let text = m.encode();
    assert!(text.contains(r#"kumaco_api_writes_total{verb="patch",result="conflict"} 1"#));
    assert!(text.contains(r#"kumaco_api_writes_total{verb="event",result="ok"} 1"#));
    assert!(text.contains("kumaco_dry_run_writes_total{"), "{text}");
}

/// One plain HTTP/1.1 GET; the status code and the body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: kumaco\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let code = answer[9..12].parse().unwrap();
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (code, body)
}

#[tokio::test]
async fn the_endpoints_answer_health_readiness_and_metrics() {
    let m = std::sync::Arc::new(Metrics::new());
    let any = "127.0.0.1:0".parse().unwrap();
    let (metrics_addr, health_addr) = serve(m.clone(), any, any).await.unwrap();
    assert_eq!(metrics_addr, health_addr, "one listener for both");
    assert_eq!(get(health_addr, "/healthz").await.0, 200);
    assert_eq!(
        get(health_addr, "/readyz").await.0,
        503,
        "before the first pass"
    );
    m.set_ready();
    assert_eq!(get(health_addr, "/readyz").await.0, 200);
    let (code, body) = get(metrics_addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(body.contains("kumaco_leader"), "{body}");
}
