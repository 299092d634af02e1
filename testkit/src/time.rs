//! Instants for tests that wait for window edges (kumaco times edges to the second).

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// An instant `secs` ahead on a whole second: `edge_in(4)` is 3 to 4 seconds ahead, time
/// to create windows and start watches before it.
pub fn edge_in(secs: i64) -> Timestamp {
    whole_second(Timestamp::now() + SignedDuration::from_secs(secs))
}

/// `t` truncated to its second.
pub fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).expect("a second of a valid timestamp is valid")
}

/// Time from now until `t` (zero if past).
pub fn until(t: Timestamp) -> Duration {
    Duration::try_from(t.duration_since(Timestamp::now())).unwrap_or_default()
}

/// Polls `check` every 100 ms until it holds; panics after `timeout`, naming `what`.
/// For the states no watch reports (an authorizer's view, a process's metrics).
pub async fn poll_until<F, Fut>(what: &str, timeout: Duration, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
