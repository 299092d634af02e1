//! The quiet tail after the faults: the API server's count of kumaco's applies against
//! the node versions in which kumaco's conditions changed, read at moments when nothing
//! moves.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};
use testkit::fleet::node_status_requests;
use testkit::kumaco::apiserver_metrics;

use crate::run::Driver;

impl Driver<'_> {
    /// The quiet tail: the API server's applies against the node versions kumaco changed.
    pub(crate) async fn tail(&mut self) -> Result<(Value, Option<String>)> {
        self.say("faults over: quiet tail");
        tokio::time::sleep(Duration::from_secs(self.args.settle)).await;
        let start = self.quiescent_point().await?;
        tokio::time::sleep(Duration::from_secs(self.args.tail)).await;
        let end = self.quiescent_point().await?;
        let (Some((a0, c0)), Some((a1, c1))) = (start, end) else {
            self.say("no quiet moment found for the write count: not checked");
            return Ok((json!({ "checked": false }), None));
        };
        let (applies, changes) = (a1 - a0, c1 - c0);
        self.say(&format!(
            "tail: {applies} applies, {changes} node versions changed by kumaco"
        ));
        let violation = (applies != changes).then(|| {
            format!(
                "writes differ from transitions in the quiet tail: {applies} applies of \
                 nodes/status, {changes} node versions in which kumaco's conditions changed"
            )
        });
        let figures = json!({ "checked": true, "applies": applies, "changes": changes });
        Ok((figures, violation))
    }

    /// Waits (up to two minutes: the last episode's outages last up to 90 s) for a moment
    /// when nothing moves, and reads the API server's count of successful applies and the
    /// checker's count of changes then.
    pub(crate) async fn quiescent_point(&self) -> Result<Option<(u64, u64)>> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if self.checker.quiescent(Duration::from_secs(2)) {
                let metrics = apiserver_metrics(&self.client).await?;
                let (all, failed) = node_status_requests(&metrics, "APPLY")?;
                let changes = self.checker.counts().kumaco_changes;
                // Still nothing moved while the metrics were read.
                if self.checker.quiescent(Duration::from_secs(2)) {
                    return Ok(Some((all - failed, changes)));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(None)
    }
}
