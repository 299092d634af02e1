//! The reference for `UnderMaintenance`: kumaco's offline planner (`kumaco plan -o
//! json`), run on the windows as the harness last wrote them and the nodes' labels. The
//! planner is pure code shared with the controller (`decision`, `window`), but none of
//! the controller's caches, watches, timers, leader election or writes, which are what
//! the faults attack.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::fleet::WINDOW_LABEL;

/// One window ConfigMap, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    pub name: String,
    pub data: BTreeMap<String, String>,
}

/// A stretch of time in which the same nodes are under maintenance.
#[derive(Clone, Debug)]
pub struct Segment {
    pub start: Timestamp,
    pub end: Timestamp,
    pub nodes: BTreeSet<String>,
}

/// What the planner says over a period.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub segments: Vec<Segment>,
}

impl Plan {
    /// The segment holding `t`, if the plan covers it.
    pub fn at(&self, t: Timestamp) -> Option<&Segment> {
        let i = self.segments.partition_point(|s| s.end <= t);
        self.segments.get(i).filter(|s| s.start <= t)
    }
}

/// Runs `kumaco plan` for `windows` (in `namespace`) over `[from, from + length)`,
/// nodes from `nodes` (name, labels), in `dir`.
pub fn compute(
    kumaco: &Path,
    dir: &Path,
    namespace: &str,
    windows: &[WindowSpec],
    nodes: &[(String, BTreeMap<String, String>)],
    from: Timestamp,
    length: SignedDuration,
) -> Result<Plan> {
    let windows_file = write_windows(dir, namespace, windows)?;
    let nodes_file = dir.join("plan-nodes.json");
    let items: Vec<Value> = nodes
        .iter()
        .map(|(name, labels)| {
            json!({ "apiVersion": "v1", "kind": "Node",
                    "metadata": { "name": name, "labels": labels } })
        })
        .collect();
    let list = json!({ "apiVersion": "v1", "kind": "NodeList", "items": items });
    std::fs::write(&nodes_file, serde_json::to_vec(&list)?)?;
    let out = Command::new(kumaco)
        .arg("plan")
        .arg("--windows")
        .arg(&windows_file)
        .arg("--nodes")
        .arg(&nodes_file)
        .arg(format!("--from={from}"))
        .arg(format!("--for={}s", length.as_secs()))
        .arg("-o")
        .arg("json")
        .output()
        .with_context(|| format!("running {} plan", kumaco.display()))?;
    if !out.status.success() {
        bail!(
            "kumaco plan failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse(&serde_json::from_slice(&out.stdout).context("kumaco plan's JSON")?)
}

/// The windows as one multi-document manifest, as `kumaco plan --windows` reads them.
fn write_windows(dir: &Path, namespace: &str, windows: &[WindowSpec]) -> Result<PathBuf> {
    let path = dir.join("plan-windows.yaml");
    let mut text = String::new();
    for w in windows {
        let cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": w.name, "namespace": namespace,
                          "labels": { WINDOW_LABEL: "" } },
            "data": w.data,
        });
        // JSON is YAML; one document each.
        text.push_str("---\n");
        text.push_str(&serde_json::to_string(&cm)?);
        text.push('\n');
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

fn parse(v: &Value) -> Result<Plan> {
    let time = |x: &Value| -> Result<Timestamp> {
        x.as_str()
            .context("a time in kumaco plan's JSON")?
            .parse()
            .context("an RFC 3339 time in kumaco plan's JSON")
    };
    let mut segments = Vec::new();
    for i in v["intervals"].as_array().context("no intervals")? {
        segments.push(Segment {
            start: time(&i["start"])?,
            end: time(&i["end"])?,
            nodes: i["nodes"]
                .as_array()
                .context("no nodes in an interval")?
                .iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect(),
        });
    }
    Ok(Plan { segments })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_found_in_its_segment_and_edges_belong_to_the_next() {
        let t = crate::time::ts;
        let json = json!({ "intervals": [
            { "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:01:00Z", "nodes": [] },
            { "start": "2026-01-01T00:01:00Z", "end": "2026-01-01T00:02:00Z", "nodes": ["a"] },
        ]});
        let plan = parse(&json).unwrap();
        assert!(plan.at(t("2026-01-01T00:00:59Z")).unwrap().nodes.is_empty());
        assert!(
            plan.at(t("2026-01-01T00:01:00Z"))
                .unwrap()
                .nodes
                .contains("a")
        );
        assert!(plan.at(t("2026-01-01T00:02:00Z")).is_none());
    }
}
