//! The object form of a window's `nodeSelector`: a Kubernetes `metav1.LabelSelector`
//! (`matchLabels`, `matchExpressions`) written as YAML or JSON, converted to a
//! [`Selector`] exactly as apimachinery's `metav1.LabelSelectorAsSelector`
//! (`k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`) converts it:
//!
//! - an object with neither `matchLabels` nor `matchExpressions` entries (`{}`,
//!   `{"matchLabels":{}}`) is Go's `labels.Everything()`: it selects every node, like the
//!   empty string form. Go's nil selector (YAML's `null`, `~`, a document of comments),
//!   which selects nothing, is refused ([`ObjectError::Null`]).
//! - each `matchLabels` entry is a `key=value` requirement, each expression one
//!   requirement with the operator `In`, `NotIn`, `Exists` or `DoesNotExist` (exactly
//!   so spelled; anything else is Go's `"%q is not a valid label selector operator"`);
//! - keys and values are validated as `labels.NewRequirement` validates them (the same
//!   rules as the string form's); `In`/`NotIn` need at least one value,
//!   `Exists`/`DoesNotExist` take none;
//! - the requirements are sorted by key with Go's `sort.Sort`; values are kept as written
//!   (duplicates too: Go does not remove them) and `String()` prints them sorted.
//!
//! Go iterates `matchLabels` (a map) in random order; kumaco takes it in key order. The
//! two agree on everything but the order of requirements sharing a key in a selector of
//! more than 12 requirements, where Go's own `String()` differs from run to run.
//!
//! Decoding the text is kumaco's own. It reads YAML as operators write it (a byte-order
//! mark, comments, directives and `---` before the object), and is stricter than
//! Kubernetes' lenient reader (`sigs.k8s.io/yaml` into `encoding/json`) where that reader
//! would select other nodes than the text seems to say: field names are case-sensitive,
//! an unknown field (`matchLabel`, which Go ignores) or a repeated key (Go keeps the last)
//! is an error naming it, YAML scalars that are not strings (`3`, `yes`, `007`, which Go
//! turns into `3`, `true`, `7`) must be quoted, a `null` label value is an error (Go reads
//! it as ""), and anchors, aliases, merge keys and a second document are refused; each
//! error says what to write instead. A `null` field is an empty one, as in Go. The YAML
//! parser runs under a budget (depth, nodes, no anchors or aliases, one document), on a
//! value already bounded by a window's [`MAX_VALUE_BYTES`].
//!
//! The decoding is here, in the pure core, rather than injected by the shell, because it
//! is part of reading a window like parsing its cron spec: `Window::from_data` keeps its
//! signature and every caller (the controller, `announce`, the tools) gets the same
//! answer. serde-saphyr parses a string in memory and does no I/O (docs/design.md, "Why
//! the core decodes YAML"; `tests/architecture.rs` checks the core's tree).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

use crate::limits::MAX_VALUE_BYTES;

use super::validation::{VALUE_RULE, is_label_value, label_key_problem};
use super::{Operator, Requirement, Selector, go_sort};

/// A `metav1.LabelSelector` as decoded from a window's `nodeSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelSelectorObject {
    /// `matchLabels`: `null` or absent is empty.
    #[serde(rename = "matchLabels", default, deserialize_with = "null_is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// `matchExpressions`: `null` or absent is empty.
    #[serde(
        rename = "matchExpressions",
        default,
        deserialize_with = "null_is_empty"
    )]
    pub match_expressions: Vec<Expression>,
}

/// One `metav1.LabelSelectorRequirement`. A missing or `null` `key` or `operator` is the
/// empty string, as in Go (and then an error); missing or `null` `values` are none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expression {
    #[serde(default, deserialize_with = "null_is_empty")]
    pub key: String,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub operator: String,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub values: Vec<String>,
}

fn null_is_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The operators a `LabelSelector` expression may use, as Go spells them.
pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

/// Whether a `nodeSelector` value is in object form rather than a string selector: after
/// leading whitespace (` `, tab, CR, LF) it opens with what YAML allows before a
/// document's content (a byte-order mark, a `#` comment, a `%` directive, the document
/// start `---`), or it starts with `{` (JSON, or a YAML flow mapping), or its first line
/// starts with a YAML mapping key, a word (`[A-Za-z][A-Za-z0-9_-]*`) followed by optional
/// blanks and `:` (`matchLabels:`, `matchExpressions:`, or a typo of them, reported as an
/// unknown field), or it is YAML's null (`null`, `Null`, `NULL`, `~`), refused by
/// [`parse`].
///
/// No valid string selector opens like this but `null`, `Null` and `NULL` (the label
/// of that name exists), which are taken on purpose: in YAML they are Kubernetes' nil
/// selector. A BOM, `#`, `%`, `-`, `{` and `~` cannot start a valid label key, and `:`
/// is never part of one, so a key followed by blanks and a word starting with `:` lacks
/// an operator. (`tests/diff_selector.rs` checks against Go that every other generated
/// string this rule calls an object is rejected by `labels.Parse`.)
pub fn is_object_form(text: &str) -> bool {
    let (t, prelude) = skip_prelude(text);
    if prelude || t.starts_with('{') || is_yaml_null(t) {
        return true;
    }
    let bytes = t.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let word = bytes
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
        .count();
    t[word..].trim_start_matches([' ', '\t']).starts_with(':')
}

/// Whether the text, blanks aside, is one of YAML's spellings of null, which Kubernetes
/// reads as the nil `LabelSelector` (selecting no node).
pub fn is_yaml_null(text: &str) -> bool {
    matches!(
        text.trim_matches([' ', '\t', '\r', '\n']),
        "null" | "Null" | "NULL" | "~"
    )
}

/// The text after leading whitespace and what YAML allows before a document's content
/// (byte-order marks, comment lines, directives, `---` markers), and whether any of the
/// latter was there.
fn skip_prelude(text: &str) -> (&str, bool) {
    let mut t = text;
    let mut prelude = false;
    loop {
        t = t.trim_start_matches([' ', '\t', '\r', '\n']);
        if let Some(rest) = t.strip_prefix('\u{feff}') {
            t = rest;
        } else if t.starts_with(['#', '%']) {
            t = t.find('\n').map_or("", |i| &t[i + 1..]);
        } else if let Some(rest) = t
            .strip_prefix("---")
            .filter(|r| r.is_empty() || r.starts_with([' ', '\t', '\r', '\n']))
        {
            t = rest;
        } else {
            return (t, prelude);
        }
        prelude = true;
    }
}

/// Why a `nodeSelector` in object form is not a valid selector.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// The text is not a `LabelSelector` object (YAML/JSON syntax, an unknown field, a
    /// wrong type, the parser's budget).
    #[error(
        "not a LabelSelector: {0}; expected YAML or JSON with matchLabels (a map of label \
         keys to values) and/or matchExpressions (a list of {{key, operator, values}})"
    )]
    Decode(String),
    /// The object decodes but `LabelSelectorAsSelector` rejects it: every problem found,
    /// in Go's order (`matchLabels` by key, then the expressions).
    #[error("{}", problems(.0))]
    Invalid(Vec<String>),
    /// YAML's null (also `~`, or a document with nothing but comments): Kubernetes' nil
    /// `LabelSelector`, which selects no node. A window for no node is a mistake (an empty
    /// template value, a nil pointer marshalled), so it is refused rather than matched.
    #[error(
        "null (as ~, or nothing but comments and ---) is Kubernetes' nil LabelSelector, \
         which selects no node; kumaco refuses a window for no node. Write {{}} or \"\" to \
         select every node in scope, or matchLabels/matchExpressions for some (for a label \
         named null: {{matchExpressions: [{{key: \"null\", operator: Exists}}]}})"
    )]
    Null,
}

/// How many problems an [`ObjectError::Invalid`] message shows.
const SHOWN_PROBLEMS: usize = 5;

fn problems(all: &[String]) -> String {
    let mut out = all
        .iter()
        .take(SHOWN_PROBLEMS)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if all.len() > SHOWN_PROBLEMS {
        out.push_str(&format!("; and {} more", all.len() - SHOWN_PROBLEMS));
    }
    out
}

/// Decodes a `nodeSelector` value in object form (see [`is_object_form`]) and converts
/// it as `LabelSelectorAsSelector` does.
pub fn parse(text: &str) -> Result<Selector, ObjectError> {
    to_selector(&decode(text)?)
}

/// The largest structural depth of a `LabelSelector`: the object, `matchExpressions`,
/// an expression, its `values`.
const MAX_DEPTH: usize = 4;
/// Most YAML nodes (mappings, sequences, scalars) in one value; a 4 KiB value holds
/// fewer.
const MAX_NODES: usize = 4096;

/// The YAML parser's options: strict (duplicate keys, merge keys, unknown tags and
/// unquoted non-strings are errors) and budgeted (depth, nodes, one document, no anchors
/// or aliases, so no alias bomb).
fn options() -> serde_saphyr::Options {
    let budget = serde_saphyr::budget! {
        max_depth: MAX_DEPTH,
        flow_nesting_limit: MAX_DEPTH,
        max_nodes: MAX_NODES,
        max_events: 4 * MAX_NODES,
        max_documents: 1,
        max_aliases: 0,
        max_anchors: 0,
        max_merge_keys: 0,
        max_total_scalar_bytes: MAX_VALUE_BYTES,
    };
    serde_saphyr::options! {
        budget: budget,
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::Error,
        merge_keys: serde_saphyr::options::MergeKeyPolicy::Error,
        no_schema: true,
        reject_unsupported_tags: true,
        with_snippet: false,
    }
}

/// Decodes YAML or JSON text into a [`LabelSelectorObject`]; null is [`ObjectError::Null`].
pub fn decode(text: &str) -> Result<LabelSelectorObject, ObjectError> {
    use serde_saphyr::MessageFormatter;
    let decoded =
        serde_saphyr::from_str_with_options::<Option<LabelSelectorObject>>(text, options());
    decoded
        .map_err(|e| {
            let e = e.without_snippet();
            let at = match e.location() {
                Some(l) if l.line() > 0 => format!(" (line {}, column {})", l.line(), l.column()),
                _ => String::new(),
            };
            let (message, hint) = explain(e);
            let message = message.unwrap_or_else(|| {
                serde_saphyr::UserMessageFormatter
                    .format_message(e)
                    .replace('\n', " ")
            });
            ObjectError::Decode(format!("{message}{at}{}", hint.unwrap_or_default()))
        })?
        .ok_or(ObjectError::Null)
}

/// For the YAML that Kubernetes' lenient reader (`sigs.k8s.io/yaml`) takes and kumaco
/// refuses on purpose: a message replacing the parser's, if it is obscure, and how to
/// write it instead.
fn explain(e: &serde_saphyr::Error) -> (Option<String>, Option<&'static str>) {
    use serde_saphyr::Error;
    use serde_saphyr::budget::BudgetBreach;
    match e {
        // Go would read `yes` as "true", `007` as "7" and `1.0` as "1".
        Error::QuotingRequired { .. } => (
            None,
            Some(
                ": YAML reads unquoted numbers, booleans (true, yes, y, on) and null (~) as \
                 other types, which Kubernetes would turn into other text; quote label keys and \
                 values like these, e.g. zone: \"1\"",
            ),
        ),
        // Go would read it as "".
        Error::NullIntoString { .. } => (
            None,
            Some(": write \"\" for an empty label value, or quote \"null\" or \"~\" for the word"),
        ),
        // Go would keep the last one.
        Error::DuplicateMappingKey { .. } => (
            None,
            Some(
                ": write each key once (Kubernetes would keep only the last); for several \
                 values of one label use matchExpressions with operator In",
            ),
        ),
        // Go would ignore it (a misspelt field would select more nodes).
        Error::SerdeUnknownField {
            field, expected, ..
        } => (
            None,
            match expected.iter().find(|x| x.eq_ignore_ascii_case(field)) {
                Some(_) => Some("; field names are case-sensitive"),
                None => None,
            },
        ),
        Error::MergeKeyNotAllowed { .. } => (
            Some("a merge key (<<) is not read".into()),
            Some(": write the entries out"),
        ),
        Error::UnknownAnchor { .. } => (
            Some("an alias (*) is not read".into()),
            Some(": write the values out"),
        ),
        Error::Budget { breach, .. } => match breach {
            BudgetBreach::Anchors { .. } | BudgetBreach::Aliases { .. } => (
                Some("an anchor (&) or alias (*) is not read".into()),
                Some(": write the values out"),
            ),
            // Go would read the first document only.
            BudgetBreach::Documents { .. } => (
                Some("a second YAML document".into()),
                Some(": write one (remove the --- between them)"),
            ),
            _ => (None, None),
        },
        Error::MultipleDocuments { .. } => (
            Some("a second YAML document".into()),
            Some(": write one (remove the --- between them)"),
        ),
        _ => (None, None),
    }
}

/// Go's `LabelSelectorAsSelector` for a non-nil selector.
pub fn to_selector(object: &LabelSelectorObject) -> Result<Selector, ObjectError> {
    let mut requirements = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in &object.match_labels {
        let at = format!("matchLabels[{key:?}]");
        let before = problems.len();
        check_key(&at, key, &mut problems);
        check_value(&at, key, value, &mut problems);
        if problems.len() == before {
            requirements.push(Requirement {
                key: key.clone(),
                operator: Operator::Equals,
                values: vec![value.clone()],
            });
        }
    }
    for (i, expression) in object.match_expressions.iter().enumerate() {
        let at = format!("matchExpressions[{i}]");
        let before = problems.len();
        let Expression {
            key,
            operator,
            values,
        } = expression;
        let operator = match operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                // Go's text first, then what would be right.
                let hint = match OPERATORS.iter().find(|o| o.eq_ignore_ascii_case(other)) {
                    Some(right) => format!(" (operators are case-sensitive: write {right})"),
                    None if other.is_empty() => " (the operator is missing)".into(),
                    None => String::new(),
                };
                problems.push(format!(
                    "{at}.operator: {} is not a valid label selector operator; \
                     expected one of {}{hint}",
                    go_quote(other),
                    OPERATORS.join(", ")
                ));
                continue;
            }
        };
        check_key(&format!("{at}.key"), key, &mut problems);
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => problems.push(format!(
                "{at}.values: the operator {} needs at least one value",
                expression.operator
            )),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                problems.push(format!(
                    "{at}.values: the operator {} takes no values, found {}",
                    expression.operator,
                    values.len()
                ));
            }
            _ => {}
        }
        for (j, value) in values.iter().enumerate() {
            check_value(&format!("{at}.values[{j}]"), key, value, &mut problems);
        }
        if problems.len() == before {
            let mut values = values.clone();
            // Go keeps the values as written and sorts a copy in `String()`; matching
            // does not depend on their order, so they are kept sorted here.
            values.sort();
            requirements.push(Requirement {
                key: key.clone(),
                operator,
                values,
            });
        }
    }
    if !problems.is_empty() {
        return Err(ObjectError::Invalid(problems));
    }
    go_sort::sort(&mut requirements, |a, b| a.key < b.key);
    Ok(Selector { requirements })
}

/// Go's `strconv.Quote` (`%q`), so that the unknown-operator message is Go's text. Exact
/// for every character but unassigned code points (Go's tables call them unprintable and
/// escape them; Rust has no such table, and they are printed as they are).
fn go_quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint` for what is not ASCII: letters, marks, numbers, punctuation
/// and symbols, not spaces (but U+0020), controls, format characters or private use.
fn go_is_print(c: char) -> bool {
    let u = c as u32;
    if u <= 0xff {
        return (0x20..=0x7e).contains(&u) || ((0xa1..=0xff).contains(&u) && u != 0xad);
    }
    let format = matches!(
        u,
        0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x890..=0x891
            | 0x8e2
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0x110bd
            | 0x110cd
            | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3
            | 0x1d173..=0x1d17a
            | 0xe0001
            | 0xe0020..=0xe007f
    );
    let private = matches!(u, 0xe000..=0xf8ff | 0xf0000..=0xffffd | 0x100000..=0x10fffd);
    let nonchar = (u & 0xfffe) == 0xfffe || (0xfdd0..=0xfdef).contains(&u);
    !(c.is_whitespace() || c.is_control() || format || private || nonchar)
}

fn check_key(at: &str, key: &str, problems: &mut Vec<String>) {
    if let Some(reason) = label_key_problem(key) {
        problems.push(format!("{at}: invalid label key {key:?}: {reason}"));
    }
}

fn check_value(at: &str, key: &str, value: &str, problems: &mut Vec<String>) {
    if !is_label_value(value) {
        let length = if value.len() > 63 {
            format!(" (this one has {})", value.len())
        } else {
            String::new()
        };
        problems.push(format!(
            "{at}: invalid value {value:?} for label key {key:?}: {VALUE_RULE}{length}"
        ));
    }
}

#[cfg(test)]
mod tests;
