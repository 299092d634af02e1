//! `kumaco validate FILE...`: window ConfigMap manifests checked offline, for GitOps CI
//! (there is no CRD to validate windows at admission).
//!
//! Exit status: 0 every window is valid, 1 some window is invalid, 2 a file could not be
//! read or is not YAML (the other files are still checked).

use std::io::Write;

use jiff::Timestamp;

use super::{Classified, Document, ToolError, WindowRules};
use crate::cli::ValidateArgs;
use crate::selector;

/// What validation found in a set of documents.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Errors, warnings and the valid windows, one line each, in input order
    /// (`file: namespace/name: key: message`).
    pub lines: Vec<String>,
    /// Documents that are not windows, and why (for stderr: they are not findings).
    pub notes: Vec<String>,
    pub valid: usize,
    pub invalid: usize,
}

impl Report {
    /// The summary line printed last.
    pub fn summary(&self) -> String {
        let n = self.valid + self.invalid;
        let noun = if n == 1 { "window" } else { "windows" };
        format!("{n} {noun}: {} valid, {} invalid", self.valid, self.invalid)
    }
}

/// Validates every window ConfigMap among `docs`; lint warnings are as of `now`.
pub fn check(docs: &[Document], rules: &WindowRules, now: Timestamp) -> Report {
    let mut report = Report::default();
    for doc in docs {
        let at = format!("{}: {}", doc.source, doc.object_ref());
        match rules.classify(doc) {
            Classified::Skipped(why) => report.notes.push(format!("{at}: skipped: {why}")),
            Classified::Malformed(why) => {
                report.invalid += 1;
                report.lines.push(format!("{at}: {why}"));
            }
            Classified::Window(window) => match *window {
                Err(invalid) => {
                    report.invalid += 1;
                    for e in &invalid.0 {
                        report.lines.push(format!("{at}: {e}"));
                    }
                }
                Ok(window) => {
                    report.valid += 1;
                    let warnings = window.lint(now);
                    // A selector in object form is shown as kumaco reads it, in the
                    // string form (Go's `String()`).
                    let object_form = doc
                        .object
                        .pointer("/data/nodeSelector")
                        .and_then(|v| v.as_str())
                        .is_some_and(selector::object::is_object_form)
                        .then(|| {
                            format!(
                                "nodeSelector in object form, as a string: {:?}",
                                window.selector.to_string()
                            )
                        });
                    match (&object_form, warnings.is_empty()) {
                        (None, true) => report.lines.push(format!("{at}: ok")),
                        (Some(form), true) => report.lines.push(format!("{at}: ok ({form})")),
                        (_, false) => {}
                    }
                    for w in &warnings {
                        report.lines.push(format!("{at}: warning: {w}"));
                    }
                    if let (Some(form), false) = (&object_form, warnings.is_empty()) {
                        report.lines.push(format!("{at}: note: {form}"));
                    }
                }
            },
        }
    }
    report
}

/// Runs `kumaco validate`; returns the exit status.
pub fn run(args: &ValidateArgs, out: &mut impl Write, err: &mut impl Write) -> u8 {
    match run_inner(args, out, err) {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "kumaco validate: {e}");
            e.exit_code()
        }
    }
}

fn run_inner(
    args: &ValidateArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<u8, ToolError> {
    let rules = WindowRules::from_args(&args.window_args)?;
    let now = super::parse_time("now", args.now.as_deref())?;
    let mut docs = Vec::new();
    let mut unreadable = false;
    // A broken file does not hide the findings in the others.
    for path in &args.files {
        match super::read_documents(path) {
            Ok(d) => docs.extend(d),
            Err(e) => {
                unreadable = true;
                let _ = writeln!(err, "{e}");
            }
        }
    }
    let report = check(&docs, &rules, now);
    for note in &report.notes {
        let _ = writeln!(err, "{note}");
    }
    let io = ToolError::Write;
    for line in &report.lines {
        writeln!(out, "{line}").map_err(io)?;
    }
    writeln!(out, "{}", report.summary()).map_err(io)?;
    Ok(if unreadable {
        2
    } else if report.invalid > 0 {
        1
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::parse_documents;

    const DOCS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: good
  namespace: ops
  labels: {kured.dev/maintenance-window: ""}
data: {startTime: "0 2 * * 6", duration: "3h", nodeSelector: "zone=a"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: bad
  namespace: ops
  labels: {kured.dev/maintenance-window: ""}
data: {startTime: "0 0 2 * * 6", duration: "1d", nodeSelector: "zone in (a"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other}
data: {x: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: typo
  namespace: ops
  labels: {kured.dev/maintenance-window: ""}
data: {startTime: "@daily", duration: "1h", nodeSelector: "", nodeselector: "x"}
---
kind: ConfigMap
metadata:
  name: numbers
  labels: {kured.dev/maintenance-window: ""}
data: {startTime: "@daily", duration: 5, nodeSelector: ""}
"#;

    fn report() -> Report {
        let docs = parse_documents("w.yaml", DOCS).unwrap();
        let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
        check(&docs, &rules, "2026-01-01T00:00:00Z".parse().unwrap())
    }

    #[test]
    fn every_error_of_every_window_is_collected() {
        let r = report();
        assert_eq!((r.valid, r.invalid), (2, 2), "{r:#?}");
        let bad: Vec<&String> = r
            .lines
            .iter()
            .filter(|l| l.starts_with("w.yaml: ops/bad: "))
            .collect();
        assert_eq!(bad.len(), 3, "{bad:#?}");
        assert!(bad[0].contains("startTime: expected 5 fields"), "{bad:?}");
        assert!(bad[1].contains("duration: "), "{bad:?}");
        assert!(bad[2].contains("nodeSelector: "), "{bad:?}");
    }

    #[test]
    fn valid_windows_say_ok_or_warn() {
        let r = report();
        assert!(r.lines.contains(&"w.yaml: ops/good: ok".to_string()));
        assert!(
            r.lines
                .iter()
                .any(|l| l.starts_with("w.yaml: ops/typo: warning: unknown key \"nodeselector\"")),
            "{:#?}",
            r.lines
        );
    }

    /// A selector in object form is accepted and shown as kumaco reads it; a typo in it
    /// is an error naming the field.
    #[test]
    fn object_form_selectors_are_reported_as_read() {
        let docs = parse_documents(
            "w.yaml",
            r#"
kind: ConfigMap
metadata: {name: obj, namespace: ops, labels: {kured.dev/maintenance-window: ""}}
data:
  startTime: "@daily"
  duration: "1h"
  nodeSelector: |
    matchLabels:
      topology.kubernetes.io/zone: zone-a
    matchExpressions:
    - {key: node-role, operator: NotIn, values: [control-plane]}
---
kind: ConfigMap
metadata: {name: warned, namespace: ops, labels: {kured.dev/maintenance-window: ""}}
data: {startTime: "@every 0s", duration: "1h", nodeSelector: "{}"}
---
kind: ConfigMap
metadata: {name: typo, namespace: ops, labels: {kured.dev/maintenance-window: ""}}
data: {startTime: "@daily", duration: "1h", nodeSelector: '{"matchLabel": {"zone": "a"}}'}
"#,
        )
        .unwrap();
        let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
        let r = check(&docs, &rules, "2026-01-01T00:00:00Z".parse().unwrap());
        assert_eq!((r.valid, r.invalid), (2, 1), "{r:#?}");
        assert_eq!(
            r.lines[0],
            "w.yaml: ops/obj: ok (nodeSelector in object form, as a string: \
             \"node-role notin (control-plane),topology.kubernetes.io/zone=zone-a\")"
        );
        assert!(
            r.lines[1].starts_with("w.yaml: ops/warned: warning: "),
            "{r:#?}"
        );
        assert_eq!(
            r.lines[2],
            "w.yaml: ops/warned: note: nodeSelector in object form, as a string: \"\""
        );
        assert!(
            r.lines[3].starts_with(
                "w.yaml: ops/typo: nodeSelector: object form: not a LabelSelector: unknown \
                 field `matchLabel`, expected one of matchLabels, matchExpressions"
            ),
            "{r:#?}"
        );
    }

    /// What robfig silently adjusts, and durations that are surely typos, load with a
    /// warning (exit status 0).
    #[test]
    fn adjusted_intervals_and_absurd_durations_warn() {
        let docs = parse_documents(
            "w.yaml",
            r#"
kind: ConfigMap
metadata: {name: tick, namespace: ops, labels: {kured.dev/maintenance-window: ""}}
data: {startTime: "@every 0s", duration: "1000000h", nodeSelector: ""}
"#,
        )
        .unwrap();
        let rules = WindowRules::new("kured.dev/maintenance-window", "UTC").unwrap();
        let r = check(&docs, &rules, "2026-01-01T00:00:00Z".parse().unwrap());
        assert_eq!((r.valid, r.invalid), (1, 0));
        assert_eq!(
            r.lines,
            [
                "w.yaml: ops/tick: warning: startTime: \"@every 0s\" runs every 1s: an interval \
                 below 1s is raised to 1s (robfig/cron does the same)",
                "w.yaml: ops/tick: warning: duration: 1000000h0m0s is longer than a year \
                 (8784h0m0s); a window open that long is most likely a typo (it loads as written)",
            ]
        );
    }

    #[test]
    fn non_string_data_is_invalid_and_others_are_notes() {
        let r = report();
        assert!(
            r.lines
                .iter()
                .any(|l| l.starts_with("w.yaml: default/numbers: not a valid ConfigMap")),
            "{:#?}",
            r.lines
        );
        assert_eq!(
            r.notes,
            ["w.yaml: default/other: skipped: ConfigMap does not match the window selector"]
        );
        assert_eq!(r.summary(), "4 windows: 2 valid, 2 invalid");
    }
}
