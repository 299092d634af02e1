//! The matchers of the silences: Alertmanager's matcher (`name="value"`, `=~`, `!=`,
//! `!~`), the templates of `--silence-matchers` (`{{name}}`, `{{label:KEY}}`) and the sets
//! of one silence each, rendered for a node.

use std::fmt;

use crate::selector::Labels;

/// One matcher of a silence, as Alertmanager's API v2 has it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Matcher {
    pub name: String,
    pub value: String,
    pub is_regex: bool,
    pub is_equal: bool,
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match (self.is_equal, self.is_regex) {
            (true, false) => "=",
            (false, false) => "!=",
            (true, true) => "=~",
            (false, true) => "!~",
        };
        write!(f, "{}{op}{:?}", self.name, self.value)
    }
}

/// A matcher or a set of matchers (`--silence-matchers`, `--silence-matcher`) that does
/// not parse or could not silence one node's alerts only.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    #[error(
        "{0:?}: expected LABEL OP \"VALUE\" with OP one of = != =~ !~, e.g. instance=~\"{{{{name}}}}(:[0-9]+)?\""
    )]
    Syntax(String),
    #[error("{0:?}: {1:?} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")]
    LabelName(String, String),
    #[error(
        "{0:?}: unknown placeholder {{{{{1}}}}}; use {{{{name}}}} or {{{{label:KEY}}}} (a node label)"
    )]
    Placeholder(String, String),
    #[error(
        "{0:?}: no matchers; expected one or more LABEL OP \"VALUE\" separated by commas, e.g. node=\"{{{{name}}}}\",severity!=\"info\""
    )]
    EmptySet(String),
    #[error(
        "{0:?}: no matcher names the node ({{{{name}}}}): each node's silence must match its own alerts only"
    )]
    NoName(String),
    #[error(
        "{0:?}: no matcher is = or =~ with a value that is never empty: Alertmanager refuses silences that match every alert"
    )]
    MatchesEverything(String),
    #[error("{0:?}: the label {1:?} is matched twice in one silence")]
    Twice(String, String),
    #[error("{0:?}: a matcher of every alert cannot name a node ({{{{name}}}}, {{{{label:KEY}}}})")]
    NamesANode(String),
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Text(String),
    Name,
    Label(String),
}

/// A matcher whose value names the node (`{{name}}`) or its labels (`{{label:KEY}}`).
/// In a regular expression (`=~`, `!~`) the node's values are escaped: a node named
/// `a.b` matches `a.b`, not `axb`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MatcherTemplate {
    name: String,
    parts: Vec<Part>,
    is_regex: bool,
    is_equal: bool,
}

/// The matchers of one silence per node: an alert is silenced when it matches all of
/// them. Each set is a silence of its own, so that alerts naming the node in different
/// labels (`node` for kube-state-metrics', `instance` for node-exporter's) are each
/// silenced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatcherSet {
    /// As written (for messages).
    text: String,
    /// Sorted: sets that differ only in order are one.
    matchers: Vec<MatcherTemplate>,
}

/// The set held unless left out on purpose: the label kube-state-metrics' node alerts
/// (`KubeNodeNotReady`) and most others carry.
pub const DEFAULT_SET: &str = "node=\"{{name}}\"";

/// The sets of one silence each: [`DEFAULT_SET`] first when `default`, then `specs`
/// (each one set, see [`MatcherSet::parse`]); a set given twice is held once. Empty when
/// neither: the caller decides whether that is an error.
pub fn parse_sets(default: bool, specs: &[String]) -> Result<Vec<MatcherSet>, MatcherError> {
    let default = default.then(|| DEFAULT_SET.to_string());
    let mut out: Vec<MatcherSet> = Vec::new();
    for spec in default.iter().chain(specs) {
        let set = MatcherSet::parse(spec)?;
        if !out.iter().any(|o| o.matchers == set.matchers) {
            out.push(set);
        }
    }
    Ok(out)
}

impl MatcherSet {
    /// One set: matchers separated by commas (outside the quoted values), optionally in
    /// braces as Alertmanager writes them: `node="{{name}}",severity!="info"` or
    /// `{instance=~"{{name}}(:[0-9]+)?"}`.
    pub fn parse(spec: &str) -> Result<MatcherSet, MatcherError> {
        let trimmed = spec.trim();
        let inner = trimmed
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(trimmed);
        if inner.trim().is_empty() {
            return Err(MatcherError::EmptySet(spec.to_string()));
        }
        let matchers = split_outside_quotes(inner)
            .into_iter()
            .map(parse_matcher)
            .collect::<Result<Vec<_>, _>>()?;
        MatcherSet::check(spec, matchers)
    }

    /// The older `--silence-matcher` flags: one matcher each, all of them one set.
    pub fn from_matchers(specs: &[String]) -> Result<MatcherSet, MatcherError> {
        let matchers = specs
            .iter()
            .map(|s| parse_matcher(s))
            .collect::<Result<Vec<_>, _>>()?;
        MatcherSet::check(&specs.join(","), matchers)
    }

    fn check(text: &str, mut matchers: Vec<MatcherTemplate>) -> Result<MatcherSet, MatcherError> {
        let text = text.to_string();
        matchers.sort();
        if let Some(w) = matchers.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(MatcherError::Twice(text, w[0].name.clone()));
        }
        if !matchers.iter().any(|m| m.parts.contains(&Part::Name)) {
            return Err(MatcherError::NoName(text));
        }
        // What Alertmanager checks: a silence needs one matcher that does not match "". A
        // node's name is never empty; a label's value may be.
        let positive = matchers.iter().any(|m| {
            m.is_equal
                && !m.is_regex
                && m.parts.iter().any(|p| match p {
                    Part::Text(t) => !t.is_empty(),
                    Part::Name => true,
                    Part::Label(_) => false,
                })
        }) || matchers
            .iter()
            .any(|m| m.is_equal && m.is_regex && m.parts.contains(&Part::Name));
        if !positive {
            return Err(MatcherError::MatchesEverything(text));
        }
        Ok(MatcherSet { text, matchers })
    }

    /// The silence's matchers for one node, sorted; `None` if a label a matcher names is
    /// missing on the node.
    pub fn render(&self, node: &str, labels: &dyn Labels) -> Option<Vec<Matcher>> {
        let mut out: Vec<Matcher> = self
            .matchers
            .iter()
            .map(|m| m.render(node, labels))
            .collect::<Option<_>>()?;
        out.sort();
        Some(out)
    }
}

impl fmt::Display for MatcherSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Splits at the commas that are not inside a double-quoted value (where `\"` and `\\`
/// are escapes).
fn split_outside_quotes(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quoted, mut escaped, mut from) = (false, false, 0);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

/// One matcher that names no node (`severity="critical"`), in the sets' syntax: a
/// filter of every alert.
pub fn parse_plain_matcher(spec: &str) -> Result<Matcher, MatcherError> {
    let template = parse_matcher(spec)?;
    let mut value = String::new();
    for part in &template.parts {
        match part {
            Part::Text(t) => value.push_str(t),
            Part::Name | Part::Label(_) => return Err(MatcherError::NamesANode(spec.into())),
        }
    }
    Ok(Matcher {
        name: template.name,
        value,
        is_regex: template.is_regex,
        is_equal: template.is_equal,
    })
}

/// One `LABEL OP "VALUE"`.
fn parse_matcher(spec: &str) -> Result<MatcherTemplate, MatcherError> {
    let syntax = || MatcherError::Syntax(spec.to_string());
    let s = spec.trim();
    let op_at = s.find(['=', '!']).ok_or_else(syntax)?;
    let name = s[..op_at].trim();
    let rest = &s[op_at..];
    let (is_equal, is_regex, rest) = if let Some(r) = rest.strip_prefix("=~") {
        (true, true, r)
    } else if let Some(r) = rest.strip_prefix("!~") {
        (false, true, r)
    } else if let Some(r) = rest.strip_prefix("!=") {
        (false, false, r)
    } else if let Some(r) = rest.strip_prefix('=') {
        (true, false, r)
    } else {
        return Err(syntax());
    };
    let valid_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        return Err(MatcherError::LabelName(spec.to_string(), name.to_string()));
    }
    let quoted = rest.trim();
    let inner = quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .filter(|_| quoted.len() >= 2)
        .ok_or_else(syntax)?;
    let mut value = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some(c @ ('"' | '\\')) => value.push(c),
                _ => return Err(syntax()),
            },
            '"' => return Err(syntax()),
            c => value.push(c),
        }
    }
    let mut parts = Vec::new();
    let mut text = value.as_str();
    while let Some(open) = text.find("{{") {
        let close = text[open..].find("}}").ok_or_else(syntax)? + open;
        if open > 0 {
            parts.push(Part::Text(text[..open].to_string()));
        }
        let inside = text[open + 2..close].trim();
        parts.push(if inside == "name" {
            Part::Name
        } else if let Some(key) = inside.strip_prefix("label:").filter(|k| !k.is_empty()) {
            Part::Label(key.to_string())
        } else {
            return Err(MatcherError::Placeholder(
                spec.to_string(),
                inside.to_string(),
            ));
        });
        text = &text[close + 2..];
    }
    if !text.is_empty() {
        parts.push(Part::Text(text.to_string()));
    }
    Ok(MatcherTemplate {
        name: name.to_string(),
        parts,
        is_regex,
        is_equal,
    })
}

impl MatcherTemplate {
    /// The matcher for one node; `None` if a label it names is missing on the node (a
    /// matcher on an empty value would silence every alert without that label).
    pub fn render(&self, node: &str, labels: &dyn Labels) -> Option<Matcher> {
        let mut value = String::new();
        for part in &self.parts {
            let v = match part {
                Part::Text(t) => {
                    value.push_str(t);
                    continue;
                }
                Part::Name => node,
                Part::Label(key) => labels.label(key)?,
            };
            if self.is_regex {
                value.push_str(&regex_escape(v));
            } else {
                value.push_str(v);
            }
        }
        Some(Matcher {
            name: self.name.clone(),
            value,
            is_regex: self.is_regex,
            is_equal: self.is_equal,
        })
    }
}

/// Escapes RE2's metacharacters (Go's `regexp.QuoteMeta`).
pub(super) fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
