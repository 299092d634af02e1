//! Tools for people, the subcommands beside `kumaco run`:
//!
//! - [`validate`]: window manifests checked offline, for GitOps CI;
//! - [`plan`]: who is in maintenance when, from manifests or the cluster (table, JSON,
//!   SVG), and [`forecast`]: the rollout as `plan --forecast` and `status --forecast`
//!   show it;
//! - [`status`]: the windows and the nodes' conditions, from the cluster;
//! - [`pause`]: the emergency stop, `kumaco pause` and `kumaco resume`;
//! - [`uninstall`]: every condition an instance owns taken off the nodes;
//! - [`nodes`]: the nodes the tools read, and their slim form.
//!
//! Each tool has a pure part (what to report, from manifests or API objects and a time)
//! and a thin I/O part (reading files, listing from the API server, printing). The pure
//! parts are what the unit tests exercise; the I/O parts are tested by running the binary.

pub mod forecast;
pub mod nodes;
pub mod pause;
pub mod plan;
pub mod status;
mod svg;
pub mod uninstall;
pub mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::Value;

use crate::duration;
use crate::schedule;
use crate::selector::{self, Selector};
use crate::window::{InvalidWindow, Window, WindowId};

/// Why a tool could not do its job (as opposed to finding problems in its input, which
/// it reports and reflects in its exit status). Each message is one line that says what
/// was being done, with the file (and line) or the API server concerned; causes are in
/// the message, not chained, so that printing it once says everything.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("--{flag}: {message}")]
    Flag { flag: &'static str, message: String },
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("{at}: not YAML: {message}")]
    Yaml { at: String, message: String },
    #[error("{path}: {message}")]
    Manifest { path: String, message: String },
    #[error("{0}")]
    Client(#[from] crate::kubeclient::ClientError),
    /// An API call failed. `hint` says what to do, for refusals the user can act on.
    #[error("cannot {action} at {server}: {}{hint}", crate::kubeclient::describe(.error))]
    Api {
        action: String,
        server: String,
        // Boxed: kube's error is large, and every tool function returns this type.
        error: Box<kube::Error>,
        hint: String,
    },
    #[error("cannot write the output: {0}")]
    Write(std::io::Error),
    #[error("{0}")]
    Plan(#[from] plan::PlanError),
    #[error("{0}")]
    Uninstall(#[from] uninstall::UninstallError),
}

impl ToolError {
    /// The process exit status: 2 for usage and unreadable input (as clap does for
    /// usage), `kumaco uninstall`'s own for its refusals, 1 for the rest.
    pub fn exit_code(&self) -> u8 {
        match self {
            ToolError::Flag { .. } | ToolError::Read { .. } | ToolError::Yaml { .. } => 2,
            ToolError::Uninstall(e) => e.exit_code(),
            _ => 1,
        }
    }
}

pub(crate) fn flag_err(flag: &'static str, message: impl ToString) -> ToolError {
    ToolError::Flag {
        flag,
        message: message.to_string(),
    }
}

/// One Kubernetes object from a manifest file, with the file it came from.
#[derive(Clone, Debug)]
pub struct Document {
    /// The file name as given on the command line (`-` is shown as `<stdin>`).
    pub source: String,
    pub object: Value,
}

impl Document {
    pub fn kind(&self) -> &str {
        self.object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// `namespace/name` for messages; a manifest without a namespace is shown (and
    /// treated) as `default`, where `kubectl apply` would put it.
    pub fn object_ref(&self) -> String {
        let meta = self.object.get("metadata");
        let get = |k: &str| meta.and_then(|m| m.get(k)).and_then(Value::as_str);
        format!(
            "{}/{}",
            get("namespace").unwrap_or("default"),
            get("name").unwrap_or("<unnamed>")
        )
    }
}

/// Reads a file (`-`: standard input) as multi-document YAML (JSON is YAML), flattening
/// `kind: List`-style documents (`List`, `ConfigMapList`, `NodeList`) into their items.
pub fn read_documents(path: &Path) -> Result<Vec<Document>, ToolError> {
    let shown = display_path(path);
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|error| ToolError::Read {
        path: shown.clone(),
        error,
    })?;
    parse_documents(&shown, &text)
}

fn display_path(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

/// The pure part of [`read_documents`].
pub fn parse_documents(source: &str, text: &str) -> Result<Vec<Document>, ToolError> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| {
        let (at, message) = crate::yaml::error_at(source, &e);
        ToolError::Yaml { at, message }
    })?;
    let mut out = Vec::new();
    for doc in docs {
        flatten(source, doc, &mut out)?;
    }
    Ok(out)
}

fn flatten(source: &str, doc: Value, out: &mut Vec<Document>) -> Result<(), ToolError> {
    match doc {
        // Empty documents (a leading or trailing `---`) are not objects.
        Value::Null => Ok(()),
        Value::Object(ref map) => {
            let is_list = map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List"));
            if is_list {
                let Some(Value::Array(items)) = map.get("items") else {
                    return Err(ToolError::Manifest {
                        path: source.into(),
                        message: "a List without an `items` array".into(),
                    });
                };
                for item in items.clone() {
                    flatten(source, item, out)?;
                }
            } else {
                out.push(Document {
                    source: source.into(),
                    object: doc,
                });
            }
            Ok(())
        }
        other => Err(ToolError::Manifest {
            path: source.into(),
            message: format!("expected a Kubernetes object (a mapping), found {other}"),
        }),
    }
}

/// What a document is to kumaco.
#[derive(Debug)]
pub enum Classified {
    /// A window ConfigMap, validated.
    Window(Box<Result<Window, InvalidWindow>>),
    /// A ConfigMap with the window label whose shape is wrong (e.g. a data value that
    /// is not a string): invalid, for a reason outside the window's keys.
    Malformed(String),
    /// Not a window; the note says why.
    Skipped(String),
}

/// Settings shared by the tools that read window manifests.
pub struct WindowRules {
    pub selector: Selector,
    pub default_zone: TimeZone,
}

/// The `--node-selector` flag of `plan` and `status`.
pub(crate) fn node_selector(flag: &str) -> Result<Selector, ToolError> {
    selector::parse(flag).map_err(|e| flag_err("node-selector", e))
}

impl WindowRules {
    pub fn new(window_selector: &str, default_timezone: &str) -> Result<Self, ToolError> {
        Ok(WindowRules {
            selector: selector::parse(window_selector)
                .map_err(|e| flag_err("window-selector", e))?,
            default_zone: schedule::load_zone(default_timezone)
                .map_err(|e| flag_err("default-timezone", e))?,
        })
    }

    /// From the `--window-selector` and `--default-timezone` flags all tools share.
    pub fn from_args(args: &crate::cli::WindowArgs) -> Result<Self, ToolError> {
        Self::new(&args.window_selector, &args.default_timezone)
    }

    /// Whether `doc` is a window ConfigMap, and if so whether it is valid.
    pub fn classify(&self, doc: &Document) -> Classified {
        if doc.kind() != "ConfigMap" {
            let kind = if doc.kind().is_empty() {
                "an object without kind"
            } else {
                doc.kind()
            };
            return Classified::Skipped(format!("{kind} is not a ConfigMap"));
        }
        let labels: BTreeMap<String, String> = doc
            .object
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        if !self.selector.matches(&labels) {
            return Classified::Skipped("ConfigMap does not match the window selector".into());
        }
        match serde_json::from_value::<ConfigMap>(doc.object.clone()) {
            Ok(cm) => Classified::Window(Box::new(self.window(&cm))),
            Err(e) => Classified::Malformed(format!("not a valid ConfigMap: {e}")),
        }
    }

    /// Validates a ConfigMap known to be a window (from a file or the API server).
    pub fn window(&self, cm: &ConfigMap) -> Result<Window, InvalidWindow> {
        let id = WindowId {
            namespace: cm
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: cm.metadata.name.clone().unwrap_or_default(),
        };
        Window::from_data(id, &cm.data.clone().unwrap_or_default(), &self.default_zone)
    }
}

/// An API error as the tools report it: what failed, where, and for a refusal what the
/// user can do (`hint`, which starts with ". ").
pub(crate) fn api_error(
    connection: &crate::kubeclient::Connection,
    action: String,
    error: kube::Error,
    hint: &str,
) -> ToolError {
    ToolError::Api {
        action,
        server: connection.server.clone(),
        hint: if crate::kubeclient::is_forbidden(&error) {
            hint.to_string()
        } else {
            String::new()
        },
        error: Box::new(error),
    }
}

/// The window ConfigMaps (by `--window-selector`) in each of `namespaces`, for `tool`'s
/// messages.
pub(crate) async fn list_window_configmaps(
    connection: &crate::kubeclient::Connection,
    namespaces: &[String],
    window_selector: &str,
    tool: &str,
) -> Result<Vec<ConfigMap>, ToolError> {
    use kube::api::{Api, ListParams};
    let mut configmaps = Vec::new();
    for ns in namespaces {
        let list = Api::<ConfigMap>::namespaced(connection.client.clone(), ns)
            .list(&ListParams::default().labels(window_selector))
            .await
            .map_err(|e| {
                api_error(
                    connection,
                    format!("list ConfigMaps in namespace {ns}"),
                    e,
                    &format!(
                        ". kumaco {tool} needs `list configmaps` in every --namespace it is \
                         given: ask that namespace's admin for it, or leave the namespace out"
                    ),
                )
            })?;
        configmaps.extend(list.items);
    }
    Ok(configmaps)
}

/// Parses a time flag: an RFC 3339 timestamp, or the current time when absent.
pub fn parse_time(flag: &'static str, value: Option<&str>) -> Result<Timestamp, ToolError> {
    match value {
        None => Ok(Timestamp::now()),
        Some(v) => v.parse().map_err(|e| {
            flag_err(
                flag,
                format!("{v:?} is not an RFC 3339 timestamp such as 2026-01-05T00:00:00Z: {e}"),
            )
        }),
    }
}

/// Parses a period: a Go duration, optionally preceded by whole days (`7d`, `1d12h`).
/// Days are accepted here, unlike in window durations, because a plan is naturally
/// asked for in days; a day is `24h`, whatever the zone.
pub fn parse_period(flag: &'static str, value: &str) -> Result<SignedDuration, ToolError> {
    let (days, rest) = match value.split_once('d') {
        Some((d, rest)) if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) => {
            let days: i64 = d
                .parse()
                .map_err(|_| flag_err(flag, format!("{d:?}: too many days")))?;
            (days, rest)
        }
        _ => (0, value),
    };
    let rest = if rest.is_empty() {
        SignedDuration::ZERO
    } else {
        duration::parse(rest)
            .map_err(|e| flag_err(flag, format!("{e} (days may come first: 7d, 1d12h)")))?
            .to_signed()
    };
    let total = SignedDuration::from_hours(days.min(100_000) * 24)
        .checked_add(rest)
        .ok_or_else(|| flag_err(flag, "too long"))?;
    if total <= SignedDuration::ZERO {
        return Err(flag_err(
            flag,
            format!("{value:?} is not positive; expected e.g. 7d or 36h"),
        ));
    }
    Ok(total)
}

/// A time for tables: RFC 3339 in `zone`, to the second (`2026-01-05T02:00:00+01:00`,
/// `Z` for UTC).
pub fn format_time(t: Timestamp, zone: &TimeZone) -> String {
    let zoned = t.to_zoned(zone.clone());
    if zoned.offset().seconds() == 0 {
        t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// Left-aligned columns separated by three spaces, as `kubectl get` prints them.
pub fn render_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_flattened_and_empty_documents_skipped() {
        let text = "---\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: a}\n---\n---\nkind: Node\nmetadata: {name: n}\n";
        let docs = parse_documents("f.yaml", text).unwrap();
        let kinds: Vec<&str> = docs.iter().map(Document::kind).collect();
        assert_eq!(kinds, ["ConfigMap", "Node"]);
        assert_eq!(docs[0].object_ref(), "default/a");
    }

    #[test]
    fn not_yaml_is_an_error_at_a_line_and_column() {
        let err = parse_documents("f.yaml", "a: b\nc: [1,\n").unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        let text = err.to_string();
        assert!(text.starts_with("f.yaml:2:4: not YAML: "), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }

    #[test]
    fn periods_take_days() {
        let h = |n| SignedDuration::from_hours(n);
        assert_eq!(parse_period("for", "7d").unwrap(), h(168));
        assert_eq!(parse_period("for", "1d12h").unwrap(), h(36));
        assert_eq!(
            parse_period("for", "90m").unwrap(),
            SignedDuration::from_mins(90)
        );
        assert!(parse_period("for", "0s").is_err());
        assert!(parse_period("for", "d").is_err());
        assert!(parse_period("for", "1w").is_err());
    }

    #[test]
    fn table_columns_align() {
        let t = render_table(&["A", "BB"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A     BB\nxyz   1\n");
    }
}
