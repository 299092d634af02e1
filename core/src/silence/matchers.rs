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
        "{0:?}: no matcher names the node: each node's silence must match its own alerts \
         only, so one matcher must be = or =~ with {{{{name}}}} (or a node label, \
         {{{{label:KEY}}}}) in what every match contains, e.g. node=\"{{{{name}}}}\" or \
         instance=~\"{{{{name}}}}(:[0-9]+)?\""
    )]
    NoName(String),
    #[error(
        "{0:?}: {1} names the node in a negative matcher, which matches every other \
         node's alerts: a silence must name what it mutes; write {2} instead"
    )]
    NegatedNode(String, String, String),
    #[error("{0:?}: a regular expression of the set does not compile: {1}")]
    Regex(String, String),
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

    /// The set with `fixed` matchers added, which name no node (`--cluster-label`): every
    /// silence of the set carries them, and so must every alert it is about.
    pub fn with(&self, fixed: &[Matcher]) -> Result<MatcherSet, MatcherError> {
        if fixed.is_empty() {
            return Ok(self.clone());
        }
        let mut matchers = self.matchers.clone();
        let mut text = self.text.clone();
        for m in fixed {
            matchers.push(MatcherTemplate {
                name: m.name.clone(),
                parts: vec![Part::Text(m.value.clone())],
                is_regex: m.is_regex,
                is_equal: m.is_equal,
            });
            text.push(',');
            text.push_str(&m.to_string());
        }
        MatcherSet::check(&text, matchers)
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
        // As Alertmanager compiles them, a node's values standing in (they are escaped,
        // so the template's own text decides).
        for m in matchers.iter().filter(|m| m.is_regex) {
            let value = m.examined("x");
            if let Err(e) = regex::Regex::new(&format!("^(?s:{value})$")) {
                return Err(MatcherError::Regex(text, one_line(&e)));
            }
        }
        // A negative matcher on the node mutes every other node's alerts.
        if let Some(m) = matchers.iter().find(|m| !m.is_equal && m.names_node()) {
            let instead = MatcherTemplate {
                is_equal: true,
                ..m.clone()
            };
            return Err(MatcherError::NegatedNode(
                text,
                m.to_string(),
                instead.to_string(),
            ));
        }
        // A node's name is never empty, and a matcher naming a node label renders only
        // where the node has it: a set with such a matcher never matches every alert,
        // which Alertmanager also asks of a silence.
        if !matchers.iter().any(|m| m.needs(Naming::NameOrLabel)) {
            return Err(MatcherError::NoName(text));
        }
        Ok(MatcherSet { text, matchers })
    }

    /// The label of a matcher every alert the set matches carries the node's name in
    /// (`node` of `node="{{name}}"`, `instance` of `instance=~"{{name}}(:[0-9]+)?"`), if
    /// the set has one: the alerts gate looks for a node's alerts only where that label
    /// holds its name.
    pub fn name_label(&self) -> Option<&str> {
        self.matchers
            .iter()
            .find(|m| m.needs(Naming::Name))
            .map(|m| m.name.as_str())
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

/// What a matcher must need in every value it matches to name the node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// The node's name.
    Name,
    /// The node's name or one of its labels.
    NameOrLabel,
}

/// Stands for the node's name (or a label of it) when a matcher is examined: no node
/// name or label value holds it.
const MARK: &str = "\u{E000}kumaco-node\u{E001}";

impl MatcherTemplate {
    /// Whether the matcher's value names the node (`{{name}}`) or one of its labels.
    fn names_node(&self) -> bool {
        self.parts.iter().any(|p| !matches!(p, Part::Text(_)))
    }

    /// Whether every value the matcher matches, rendered for a node, holds the node's
    /// name (or a label of it, by `naming`): an `=` whose value names it, or an `=~` whose
    /// expression needs it as a literal (not under an alternation, an optional part or a
    /// case-insensitive flag).
    fn needs(&self, naming: Naming) -> bool {
        let counts = |p: &Part| match p {
            Part::Name => true,
            Part::Label(_) => naming == Naming::NameOrLabel,
            Part::Text(_) => false,
        };
        if !self.is_equal {
            return false;
        }
        if !self.is_regex {
            return self.parts.iter().any(counts);
        }
        let value = self.examined_with(|p| if counts(p) { MARK } else { "x" });
        value.contains(MARK)
            && regex_syntax::parse(&format!("(?s:{value})"))
                .is_ok_and(|hir| requires(&hir, MARK.as_bytes()))
    }

    /// The value with `stand_in` for the node's name and labels.
    fn examined(&self, stand_in: &str) -> String {
        self.examined_with(|_| stand_in)
    }

    fn examined_with<'a>(&'a self, stand_in: impl Fn(&Part) -> &'a str) -> String {
        let mut value = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => value.push_str(t),
                p => value.push_str(stand_in(p)),
            }
        }
        value
    }

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

/// The regex crate's errors span lines (a caret under the pattern); a flag's error is one.
pub(crate) fn one_line(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().rev().find(|l| !l.trim().is_empty());
    last.unwrap_or(&text)
        .trim()
        .trim_start_matches("error: ")
        .to_string()
}

/// Whether every match of `hir` contains `literal`.
fn requires(hir: &regex_syntax::hir::Hir, literal: &[u8]) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Literal(l) => l.0.windows(literal.len()).any(|w| w == literal),
        HirKind::Concat(items) => items.iter().any(|h| requires(h, literal)),
        HirKind::Capture(c) => requires(&c.sub, literal),
        HirKind::Repetition(r) => r.min >= 1 && requires(&r.sub, literal),
        _ => false,
    }
}

/// The template as the flags write it: `instance=~"{{name}}(:[0-9]+)?"`.
impl fmt::Display for MatcherTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match (self.is_equal, self.is_regex) {
            (true, false) => "=",
            (false, false) => "!=",
            (true, true) => "=~",
            (false, true) => "!~",
        };
        let mut value = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => value.push_str(t),
                Part::Name => value.push_str("{{name}}"),
                Part::Label(k) => {
                    value.push_str("{{label:");
                    value.push_str(k);
                    value.push_str("}}");
                }
            }
        }
        write!(f, "{}{op}{:?}", self.name, value)
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
