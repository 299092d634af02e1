//! Instants for tests that wait for window edges (kumaco times edges to the second), and
//! the poll with a deadline for what no watch reports.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How late a window edge may land: 1 s (docs/design.md, Timing); 2 s for a loaded 2-core CI
/// machine.
pub const EDGE_BOUND: Duration = Duration::from_secs(2);

/// Checks that a change due at an edge came `latency` after it: not before it (100 ms of
/// slack for timer rounding; a real early change is about a second early) and less than
/// `bound` after. `change` names it in the failure ("n1 became True at the start edge at
/// ...").
pub fn assert_edge_latency(latency: SignedDuration, bound: Duration, change: &str) {
    let ms = latency.as_millis();
    assert!(ms >= -100, "{change}: {}ms before it", -ms);
    assert!(
        latency < SignedDuration::try_from(bound).expect("a bound of seconds"),
        "{change}: {ms}ms after it (bound {bound:?})"
    );
}

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

/// `t` as a timestamp (RFC 3339, `2026-01-05T00:00:00Z`); panics on anything else.
pub fn ts(t: &str) -> Timestamp {
    t.parse()
        .unwrap_or_else(|e| panic!("{t:?} is not a timestamp: {e}"))
}

/// Sleeps until `t` (not at all if it is past).
pub async fn sleep_until(t: Timestamp) {
    tokio::time::sleep(until(t)).await;
}

/// How often [`poll_for`] and its kin look again.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// Polls `check` every 100 ms until it returns `Some`; that value. Panics after
/// `timeout`, naming `what`. For the states no watch reports (an authorizer's view, a
/// process's metrics or log, a list of events).
pub async fn poll_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll(what, timeout, || {
        let probe = check();
        async move { probe.await.ok_or(None) }
    })
    .await
}

/// [`poll_for`] whose `check` says, when it does not hold, what it saw instead
/// (`Err(seen)`): the timeout's panic shows the last of it.
pub async fn poll_showing<T, E, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    poll(what, timeout, || {
        let probe = check();
        async move { probe.await.map_err(|seen| Some(seen.to_string())) }
    })
    .await
}

/// Polls `check` every 100 ms until it holds; panics after `timeout`, naming `what`.
pub async fn poll_until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    poll_for(what, timeout, || {
        let probe = check();
        async move { probe.await.then_some(()) }
    })
    .await
}

/// The one poll with a deadline under [`poll_for`], [`poll_showing`] and [`poll_until`].
async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Option<String>>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let seen = match check().await {
            Ok(found) => return found,
            Err(seen) => seen,
        };
        if std::time::Instant::now() >= deadline {
            match seen {
                Some(seen) => panic!("timed out after {timeout:?} waiting for {what}; {seen}"),
                None => panic!("timed out after {timeout:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn poll_for_returns_the_first_value_found() {
        let mut tries = 0;
        let found = poll_for("the third try", Duration::from_secs(5), || {
            tries += 1;
            let now = tries;
            async move { (now == 3).then_some(now * 10) }
        })
        .await;
        assert_eq!(found, 30);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out after 200ms waiting for nothing; last seen: 7")]
    async fn poll_showing_names_what_it_saw_last() {
        poll_showing("nothing", Duration::from_millis(200), || async {
            Err::<(), _>("last seen: 7")
        })
        .await;
    }

    #[test]
    #[should_panic(expected = "\"soon\" is not a timestamp")]
    fn ts_refuses_what_is_no_timestamp() {
        ts("soon");
    }
}
