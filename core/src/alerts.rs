//! The alerts gate: which firing alerts (Alertmanager, `--block-alerts`) and which series
//! of a query (Prometheus, `--block-query`) hold new starts, and whose.
//!
//! - **Which hold.** Every series a query returns. Every firing alert, except those whose
//!   name the filters leave out (`--block-alerts-ignore`, `--block-alerts-only`: kured's
//!   filters, matching anywhere in the name as Go's `regexp.MatchString` does) and those
//!   a person silenced. A silence of this instance's own (one it holds for a node in
//!   maintenance) does not count: it mutes the pages of a node being rebooted, and must
//!   not hide that the node has not settled since.
//! - **Whose start.** An alert or series whose labels match a node's matcher set (the
//!   silences' templates, `node="{{name}}"` unless left out and each `--silence-matchers`,
//!   rendered for the node; any one of its sets) holds that node's start only. One that
//!   matches no node in scope holds every start. Matching is Alertmanager's: a missing
//!   label is the empty value, and `=~` and `!~` match the whole value.
//! - **Unreadable.** A source that cannot be read holds as every gate's does
//!   ([`crate::gates::unavailable`]): `GateUnavailable` once its last good reading is
//!   stale, unless it is an outage and the deployer chose to go on without the gate
//!   (`--alerts-unreachable=allow`).
//!
//! Messages are bounded: a few names, then how many more.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use regex::Regex;

use crate::gates::{Gate, Hold, Verdict};
use crate::reasons;
use crate::selector::Labels;
use crate::silence::matchers::one_line;
use crate::silence::{Matcher, MatcherError, MatcherSet, parse_plain_matcher};

#[cfg(test)]
mod tests;

/// Most alert names a message lists before `and N more`.
const NAMES_IN_MESSAGE: usize = 3;
/// Longest query a message quotes, in bytes.
const MAX_QUERY_BYTES: usize = 120;
/// Longest series a message shows, in bytes.
const MAX_SERIES_BYTES: usize = 240;

/// A flag of the gate that kumaco cannot use.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("{0:?} is not a regular expression: {1}")]
    Regex(String, String),
    #[error(
        "{0:?}: expected LABEL OP \"VALUE\" with OP one of = != =~ !~, e.g. severity=\"critical\""
    )]
    MatcherSyntax(String),
    #[error("{0}")]
    Matcher(MatcherError),
}

impl From<MatcherError> for FilterError {
    fn from(e: MatcherError) -> Self {
        match e {
            MatcherError::Syntax(s) => FilterError::MatcherSyntax(s),
            e => FilterError::Matcher(e),
        }
    }
}

/// kured's filters on the alert's name: `--block-alerts-ignore` (those do not hold) and
/// `--block-alerts-only` (only those hold). Each matches anywhere in the name, as kured's
/// `--alert-filter-regexp` does; `^...$` matches the whole name.
#[derive(Clone, Debug, Default)]
pub struct NameFilter {
    ignore: Option<Regex>,
    only: Option<Regex>,
}

impl NameFilter {
    pub fn new(ignore: Option<&str>, only: Option<&str>) -> Result<NameFilter, FilterError> {
        let compile =
            |re: &str| Regex::new(re).map_err(|e| FilterError::Regex(re.to_string(), one_line(&e)));
        Ok(NameFilter {
            ignore: ignore.map(compile).transpose()?,
            only: only.map(compile).transpose()?,
        })
    }

    /// Whether an alert of this name may hold.
    pub fn lets(&self, alertname: &str) -> bool {
        self.only.as_ref().is_none_or(|r| r.is_match(alertname))
            && !self.ignore.as_ref().is_some_and(|r| r.is_match(alertname))
    }
}

/// A `--block-alerts-matcher`: Alertmanager's matcher syntax, naming no node, its regular
/// expression (if any) one Alertmanager can compile.
pub fn parse_filter(spec: &str) -> Result<Matcher, FilterError> {
    let m = parse_plain_matcher(spec)?;
    LabelMatcher::new(&m)?;
    Ok(m)
}

/// A matcher ready to test labels, as Alertmanager tests them.
#[derive(Clone, Debug)]
pub struct LabelMatcher {
    name: String,
    value: Value,
    is_equal: bool,
}

#[derive(Clone, Debug)]
enum Value {
    Exact(String),
    /// Anchored at both ends, `.` matching a newline: Alertmanager's `^(?s:RE)$`.
    Regex(Regex),
}

impl LabelMatcher {
    pub fn new(m: &Matcher) -> Result<LabelMatcher, FilterError> {
        let value = if m.is_regex {
            let anchored = format!("^(?s:{})$", m.value);
            Value::Regex(
                Regex::new(&anchored)
                    .map_err(|e| FilterError::Regex(m.value.clone(), one_line(&e)))?,
            )
        } else {
            Value::Exact(m.value.clone())
        };
        Ok(LabelMatcher {
            name: m.name.clone(),
            value,
            is_equal: m.is_equal,
        })
    }

    /// A missing label is the empty value.
    pub fn matches(&self, labels: &dyn Labels) -> bool {
        let v = labels.label(&self.name).unwrap_or("");
        let hit = match &self.value {
            Value::Exact(x) => x == v,
            Value::Regex(r) => r.is_match(v),
        };
        hit == self.is_equal
    }
}

/// The nodes in scope and the matcher sets: which node an alert or a series is about.
///
/// A set is rendered and compiled for a node only when the alert could match it: a
/// set whose matchers need the node's name in a label's value (`node="{{name}}"`, and
/// `instance=~"{{name}}(:[0-9]+)?"`, where the name is a literal every match contains)
/// is tried only on the nodes whose name that value contains. So an alert costs a
/// substring search per node, not a regular expression compiled per node. A set with no
/// such matcher is tried on every node.
#[derive(Debug)]
pub struct Scope<'a> {
    sets: Vec<(&'a MatcherSet, Option<&'a str>)>,
    nodes: Vec<(&'a str, &'a dyn Labels)>,
}

impl<'a> Scope<'a> {
    /// A set that does not render for a node (a label it names is missing there) is not
    /// that node's.
    pub fn new(
        sets: &'a [MatcherSet],
        nodes: impl IntoIterator<Item = (&'a str, &'a dyn Labels)>,
    ) -> Scope<'a> {
        Scope {
            sets: sets.iter().map(|set| (set, set.name_label())).collect(),
            nodes: nodes.into_iter().collect(),
        }
    }

    /// The nodes whose sets (any one of them, every matcher of it) match `labels`.
    pub fn nodes_of(&self, labels: &dyn Labels) -> Vec<&'a str> {
        self.nodes
            .iter()
            .filter(|(name, node_labels)| {
                self.sets.iter().any(|(set, key)| {
                    let may = key
                        .as_ref()
                        .is_none_or(|k| labels.label(k).unwrap_or("").contains(name));
                    may && set
                        .render(name, *node_labels)
                        .is_some_and(|ms| ms.iter().all(|m| matches(m, labels)))
                })
            })
            .map(|(name, _)| *name)
            .collect()
    }
}

/// Whether the labels match one matcher; a regular expression that does not compile
/// (refused when the set is parsed: [`MatcherSet::parse`]) matches nothing.
fn matches(m: &Matcher, labels: &dyn Labels) -> bool {
    LabelMatcher::new(m).is_ok_and(|c| c.matches(labels))
}

/// Who made a silence that mutes an alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SilencedBy {
    /// This instance (`createdBy` is its field manager): one of its maintenance silences.
    Us,
    /// Anyone else: a person, or another instance.
    Other,
    /// Not in the list of silences read (made or gone since): no excuse.
    Unknown,
}

/// An alert or a series that holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Firing {
    /// The alert's name (`alertname`), or the query that returned the series.
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Silenced, but only by this instance's own silences.
    pub silenced_by_us: bool,
}

/// The alert, if it holds: its name passes `filter`, and no silence someone else made
/// mutes it (`silenced_by`: who made each silence Alertmanager lists as muting it).
pub fn firing_alert(
    filter: &NameFilter,
    labels: BTreeMap<String, String>,
    silenced_by: &[SilencedBy],
) -> Option<Firing> {
    let name = labels.get("alertname").cloned().unwrap_or_default();
    if !filter.lets(&name) || silenced_by.contains(&SilencedBy::Other) {
        return None;
    }
    Some(Firing {
        name,
        labels,
        silenced_by_us: !silenced_by.is_empty() && silenced_by.iter().all(|s| *s == SilencedBy::Us),
    })
}

/// The holds of `firing`: on the nodes each is about, or on every start when it is about
/// no node in scope.
pub fn holding(gate: Gate, firing: &[Firing], scope: &Scope) -> Verdict {
    let mut everyone: Vec<&Firing> = Vec::new();
    let mut by_node: BTreeMap<&str, Vec<&Firing>> = BTreeMap::new();
    for f in firing {
        let mut about_a_node = false;
        for node in scope.nodes_of(&f.labels) {
            about_a_node = true;
            by_node.entry(node).or_default().push(f);
        }
        if !about_a_node {
            everyone.push(f);
        }
    }
    let hold = |message: String| Hold {
        reason: reasons::ALERT_FIRING,
        message,
    };
    Verdict {
        cluster: (!everyone.is_empty()).then(|| hold(describe(gate, &everyone, false))),
        nodes: by_node
            .into_iter()
            .map(|(node, f)| (node.to_string(), hold(describe(gate, &f, true))))
            .collect(),
    }
}

/// What holds, in a sentence: `alert KubeAPIDown is firing, naming no node in scope`;
/// `alerts A, B, C and 2 more are firing for this node`; `--block-query 'up == 0'
/// returns 2 series naming no node in scope, e.g. up{job="x"}`.
fn describe(gate: Gate, firing: &[&Firing], for_node: bool) -> String {
    let mut names: Vec<&str> = firing.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let whose = if for_node {
        "for this node"
    } else {
        "naming no node in scope"
    };
    let mut s = match gate {
        Gate::Alerts => {
            let shown = names[..names.len().min(NAMES_IN_MESSAGE)].join(", ");
            match names.len() {
                1 => format!("alert {shown} is firing {whose}"),
                n if n <= NAMES_IN_MESSAGE => format!("alerts {shown} are firing {whose}"),
                n => format!(
                    "alerts {shown} and {} more are firing {whose}",
                    n - NAMES_IN_MESSAGE
                ),
            }
        }
        _ => {
            let query = names[0];
            let mut series: Vec<&Firing> =
                firing.iter().copied().filter(|f| f.name == query).collect();
            series.sort_by(|a, b| a.labels.cmp(&b.labels));
            let first = series_text(&series[0].labels);
            let mut s = match series.len() {
                1 => format!(
                    "--block-query {} returns a series {whose}: {first}",
                    quoted(query)
                ),
                n => format!(
                    "--block-query {} returns {n} series {whose}, e.g. {first}",
                    quoted(query)
                ),
            };
            match names.len() {
                1 => {}
                2 => s.push_str(", and one more query"),
                n => {
                    let _ = write!(s, ", and {} more queries", n - 1);
                }
            }
            s
        }
    };
    if firing.iter().all(|f| f.silenced_by_us) {
        s.push_str(" (silenced only by kumaco's own maintenance silence)");
    }
    s
}

/// A query in single quotes, cut to [`MAX_QUERY_BYTES`].
fn quoted(query: &str) -> String {
    format!(
        "'{}'",
        crate::conditions::bounded(query.to_string(), MAX_QUERY_BYTES)
    )
}

/// A series as Prometheus prints it, `up{instance="a:9100",job="node"}`, cut to
/// [`MAX_SERIES_BYTES`].
fn series_text(labels: &BTreeMap<String, String>) -> String {
    let mut s = labels.get("__name__").cloned().unwrap_or_default();
    let pairs: Vec<String> = labels
        .iter()
        .filter(|(k, _)| *k != "__name__")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    let _ = write!(s, "{{{}}}", pairs.join(","));
    crate::conditions::bounded(s, MAX_SERIES_BYTES)
}
