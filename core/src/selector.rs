//! Kubernetes label selectors, exactly as `k8s.io/apimachinery/pkg/labels.Parse` parses,
//! matches and prints them.
//!
//! A window's `nodeSelector` is the same string a user tests with `kubectl get nodes -l`,
//! so kumaco must select exactly the nodes kubectl lists, and reject exactly what kubectl
//! rejects. This module follows Go's lexer and parser closely, including its corners:
//!
//! - whitespace is only ` `, `\t`, `\r`, `\n`; symbols are lexed longest first (`!=`,
//!   `==`), so `>=` is `>` followed by `=` (an error);
//! - `in` and `notin` are keywords only where an operator is expected: `notin=in` is the
//!   key `notin` equal to `in`;
//! - a missing value after `=`, `==`, `!=` is the empty string (`x=,y` is valid), and
//!   `x in ()` means `x in ("")`;
//! - a NUL byte ends Go's lexer: at the start of a token it ends the selector (the rest
//!   is ignored), right after an identifier or symbol it is swallowed like a separator;
//! - requirements are sorted by key with Go's `sort.Sort`, which is not stable, so the
//!   order of requirements sharing a key (and hence `String()`) needs Go's exact sorting
//!   algorithm (see [`go_sort`]);
//! - `!=` and `notin` match nodes without the label; `>` and `<` never match a label whose
//!   value is not a base-10 int64.
//!
//! Only the error messages differ: ours say where, what was found and what was expected.
//!
//! A window's `nodeSelector` may also be a `metav1.LabelSelector` object in YAML or JSON
//! ([`object`]); [`parse_string_or_object`] tells the two forms apart.

use std::collections::BTreeMap;
use std::fmt;

pub mod object;

/// A node's labels as a selector reads them: at most one value per key (Go's
/// `labels.Labels`). A trait so that the controller can keep its cache's labels in a
/// compact, shared form while the tools and tests use a plain map. `Sync`: the forecast
/// reads them from two threads.
pub trait Labels: fmt::Debug + Sync {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// How a requirement relates its key to its values (Go's `selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value` (same meaning as `=`, kept apart because Go prints it back as `==`)
    DoubleEquals,
    /// `key!=value`: also true when the label is absent.
    NotEquals,
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`: also true when the label is absent.
    NotIn,
    /// `key`: the label is present, with any value.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>N`: the label's value is an integer greater than N.
    GreaterThan,
    /// `key<N`: the label's value is an integer less than N.
    LessThan,
}

impl Operator {
    /// The operator as Go's `selection.Operator` spells it (`gt`, `notin`, `exists`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One condition of a selector: a key, an operator, and values (sorted and without
/// duplicates, as Go keeps them; empty for `exists` and `!`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Go's `Requirement.Matches`.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let label = labels.label(&self.key);
        let listed = |v: &str| self.values.iter().any(|w| w == v);
        match self.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In => label.is_some_and(listed),
            Operator::NotEquals | Operator::NotIn => !label.is_some_and(listed),
            Operator::Exists => label.is_some(),
            Operator::DoesNotExist => label.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [bound]) = (label.and_then(go_parse_int), &self.values[..])
                else {
                    return false;
                };
                match go_parse_int(bound) {
                    Some(bound) if self.operator == Operator::GreaterThan => actual > bound,
                    Some(bound) => actual < bound,
                    None => false,
                }
            }
        }
    }
}

/// Go's `strconv.ParseInt(s, 10, 64)`: one optional sign, then ASCII digits, in range.
/// Rust's `i64::from_str` accepts exactly the same strings.
fn go_parse_int(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// Go's `Requirement.String()`: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a`, `!a`, `a>3`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let values = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::Equals => write!(f, "{key}={values}"),
            Operator::DoubleEquals => write!(f, "{key}=={values}"),
            Operator::NotEquals => write!(f, "{key}!={values}"),
            Operator::GreaterThan => write!(f, "{key}>{values}"),
            Operator::LessThan => write!(f, "{key}<{values}"),
            Operator::In => write!(f, "{key} in ({values})"),
            Operator::NotIn => write!(f, "{key} notin ({values})"),
        }
    }
}

/// A parsed label selector: the AND of its requirements, in Go's order (by key).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The empty selector, which matches every label set.
    pub fn everything() -> Self {
        Selector::default()
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// True when every requirement matches (Go's `Selector.Matches`).
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

/// Go's `Selector.String()`: the requirements joined by `,`, with no spaces except
/// around `in` and `notin`. The empty selector prints as the empty string.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Selector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

/// Why a string is not a label selector. Positions count characters from 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The grammar does not allow what was found here.
    #[error("expected {expected} at position {position} in {input:?}, found {found}{hint}")]
    Unexpected {
        input: String,
        position: usize,
        /// What was there, described for a person (`"("`, `the end of the selector`).
        found: String,
        expected: String,
        /// Empty, or a sentence (starting with `: `) about the likely mistake.
        hint: String,
    },

    #[error("invalid label key {key:?} in {input:?}: {reason}")]
    InvalidKey {
        input: String,
        key: String,
        reason: String,
    },

    #[error("invalid value {value:?} for label key {key:?} in {input:?}: {reason}")]
    InvalidValue {
        input: String,
        key: String,
        value: String,
        reason: String,
    },

    #[error(
        "\"{operator}\" needs a whole number, found {value:?} after label key {key:?} in \
         {input:?}: expected digits like 3 (not negative, at most 9223372036854775807)"
    )]
    NotANumber {
        input: String,
        key: String,
        /// `>` or `<`.
        operator: char,
        value: String,
    },
}

const VALUE_RULE: &str = "a label value must be 63 characters or less, and consist of \
     alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric";

/// Parses `input` exactly as Go's `labels.Parse` does. The empty (or all-whitespace)
/// string is [`Selector::everything`].
pub fn parse(input: &str) -> Result<Selector, SelectorError> {
    let mut parser = Parser {
        input,
        tokens: lex(input),
        next: 0,
    };
    let mut requirements = parser.selector()?;
    go_sort::sort(&mut requirements, |a, b| a.key < b.key);
    Ok(Selector { requirements })
}

/// Why a window's `nodeSelector` is not a selector, in whichever form it was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeSelectorError {
    #[error(transparent)]
    String(#[from] SelectorError),
    #[error("object form: {0}")]
    Object(#[from] object::ObjectError),
}

/// A window's `nodeSelector`: the object form ([`object::parse`]) when
/// [`object::is_object_form`] says the text is one, else the string form ([`parse`]).
pub fn parse_string_or_object(text: &str) -> Result<Selector, NodeSelectorError> {
    if object::is_object_form(text) {
        Ok(object::parse(text)?)
    } else {
        Ok(parse(text)?)
    }
}

// ---------------------------------------------------------------------------------------
// Lexer

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    End,
    Identifier,
    In,
    NotIn,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    OpenParen,
    CloseParen,
    Comma,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
    /// Byte offset in the input.
    offset: usize,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits `input` into tokens the way Go's `Lexer` does; the last token is always `End`.
///
/// Go's lexer reads bytes through a function that returns 0 both at the end of the string
/// and for a NUL byte, which is where the NUL rules in the module docs come from.
fn lex(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let text = |from: usize, to: usize| input.get(from..to).unwrap_or_default();
    let mut tokens = Vec::new();
    let mut pos = 0;
    loop {
        while bytes.get(pos).is_some_and(|&b| is_whitespace(b)) {
            pos += 1;
        }
        let start = pos;
        let Some(&first) = bytes.get(pos).filter(|&&b| b != 0) else {
            tokens.push(Token {
                kind: Kind::End,
                text: "",
                offset: start,
            });
            return tokens;
        };
        let kind;
        if is_symbol(first) {
            let second = bytes.get(pos + 1).copied();
            (kind, pos) = match (first, second) {
                (b'!', Some(b'=')) => (Kind::NotEquals, pos + 2),
                (b'=', Some(b'=')) => (Kind::DoubleEquals, pos + 2),
                (b'!', _) => (Kind::Not, pos + 1),
                (b'=', _) => (Kind::Equals, pos + 1),
                (b'(', _) => (Kind::OpenParen, pos + 1),
                (b')', _) => (Kind::CloseParen, pos + 1),
                (b',', _) => (Kind::Comma, pos + 1),
                (b'>', _) => (Kind::GreaterThan, pos + 1),
                _ => (Kind::LessThan, pos + 1),
            };
        } else {
            while bytes
                .get(pos)
                .is_some_and(|&b| b != 0 && !is_symbol(b) && !is_whitespace(b))
            {
                pos += 1;
            }
            kind = match text(start, pos) {
                "in" => Kind::In,
                "notin" => Kind::NotIn,
                _ => Kind::Identifier,
            };
        }
        tokens.push(Token {
            kind,
            text: text(start, pos),
            offset: start,
        });
        // Go's scanners stop on the NUL they read and do not put it back.
        if bytes.get(pos) == Some(&0) {
            pos += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Parser

/// Where `in`/`notin` are keywords (`Operator`) and where they are plain words (`Value`),
/// as Go's `ParserContext`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Operator,
    Value,
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token<'a>>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self, context: Context) -> Token<'a> {
        // The grammar never reads past `End`; staying on it keeps this total anyway.
        let mut token = self.tokens[self.next.min(self.tokens.len() - 1)];
        if context == Context::Value && matches!(token.kind, Kind::In | Kind::NotIn) {
            token.kind = Kind::Identifier;
        }
        token
    }

    fn take(&mut self, context: Context) -> Token<'a> {
        let token = self.peek(context);
        self.next += 1;
        token
    }

    /// `requirement ("," requirement)*`, or nothing at all.
    fn selector(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        let first = self.peek(Context::Value);
        match first.kind {
            Kind::End => return Ok(requirements),
            Kind::Identifier | Kind::Not => {}
            _ => return Err(self.unexpected(first, "a label key or !key", "")),
        }
        loop {
            let requirement = self.requirement()?;
            let bare_not = requirement.operator == Operator::DoesNotExist;
            requirements.push(requirement);
            let after = self.take(Context::Value);
            match after.kind {
                Kind::End => return Ok(requirements),
                Kind::Comma => {
                    let next = self.peek(Context::Value);
                    if !matches!(next.kind, Kind::Identifier | Kind::Not) {
                        let hint = match next.kind {
                            Kind::Comma => ": two commas in a row leave an empty requirement",
                            Kind::End => ": a trailing comma leaves an empty requirement",
                            _ => "",
                        };
                        return Err(self.unexpected(next, "a label key or !key after \",\"", hint));
                    }
                }
                _ => {
                    let hint = if bare_not && is_operator(after.kind) {
                        ": !key takes no operator or value"
                    } else if after.kind == Kind::Identifier {
                        ": requirements are separated by \",\", not spaces"
                    } else {
                        ""
                    };
                    return Err(self.unexpected(after, "\",\" or the end of the selector", hint));
                }
            }
        }
    }

    /// `[!]key [operator values]`
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut token = self.take(Context::Value);
        let negated = token.kind == Kind::Not;
        if negated {
            token = self.take(Context::Value);
        }
        if token.kind != Kind::Identifier {
            let expected = if negated {
                "a label key after \"!\""
            } else {
                "a label key"
            };
            return Err(self.unexpected(token, expected, ""));
        }
        let key = token.text;
        self.check_key(key)?;

        // Go decides `!key` before looking further: `!a=b` is `!a` followed by a stray
        // `=`, an error at the next step.
        let ends = matches!(self.peek(Context::Value).kind, Kind::End | Kind::Comma);
        if negated || ends {
            let operator = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Ok(self.requirement_of(key, operator, Vec::new()));
        }

        let op_token = self.take(Context::Operator);
        let operator = match op_token.kind {
            Kind::In => Operator::In,
            Kind::NotIn => Operator::NotIn,
            Kind::Equals => Operator::Equals,
            Kind::DoubleEquals => Operator::DoubleEquals,
            Kind::NotEquals => Operator::NotEquals,
            Kind::GreaterThan => Operator::GreaterThan,
            Kind::LessThan => Operator::LessThan,
            _ => {
                let expected = format!(
                    "an operator (=, ==, !=, in, notin, >, <), \",\" or the end after {key:?}"
                );
                let hint = if op_token.kind == Kind::Not {
                    ": write !key for \"absent\", or key!=value"
                } else {
                    ""
                };
                return Err(self.unexpected(op_token, &expected, hint));
            }
        };
        let mut values = match operator {
            Operator::In | Operator::NotIn => self.value_list(op_token.text)?,
            _ => vec![self.single_value(op_token)?],
        };
        values.sort();
        values.dedup();

        for value in &values {
            if matches!(operator, Operator::GreaterThan | Operator::LessThan)
                && (go_parse_int(value).is_none() || !is_label_value(value))
            {
                return Err(SelectorError::NotANumber {
                    input: self.input.to_owned(),
                    key: key.to_owned(),
                    operator: if operator == Operator::GreaterThan {
                        '>'
                    } else {
                        '<'
                    },
                    value: value.clone(),
                });
            }
            if !is_label_value(value) {
                let reason = if value.len() > 63 {
                    format!("{VALUE_RULE} (this one has {})", value.len())
                } else {
                    VALUE_RULE.to_owned()
                };
                return Err(SelectorError::InvalidValue {
                    input: self.input.to_owned(),
                    key: key.to_owned(),
                    value: value.clone(),
                    reason,
                });
            }
        }
        Ok(self.requirement_of(key, operator, values))
    }

    fn requirement_of(&self, key: &str, operator: Operator, values: Vec<String>) -> Requirement {
        Requirement {
            key: key.to_owned(),
            operator,
            values,
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; none at all means the empty string.
    fn single_value(&mut self, operator: Token<'a>) -> Result<String, SelectorError> {
        let next = self.peek(Context::Value);
        if matches!(next.kind, Kind::End | Kind::Comma) {
            return Ok(String::new());
        }
        let token = self.take(Context::Value);
        if token.kind == Kind::Identifier {
            return Ok(token.text.to_owned());
        }
        let expected = format!("a value after {:?}", operator.text);
        let hint = match (operator.kind, token.kind) {
            (Kind::GreaterThan | Kind::LessThan, Kind::Equals | Kind::DoubleEquals) => {
                ": there is no >= or <= operator; use > or < with an adjusted number"
            }
            (_, Kind::OpenParen) => ": parentheses go with in and notin, like key in (a,b)",
            _ => "",
        };
        Err(self.unexpected(token, &expected, hint))
    }

    /// `"(" values ")"` after `in`/`notin`. Empty items are the empty string: `()`, `(,)`,
    /// `(a,)` and `(a,,b)` all contain "".
    fn value_list(&mut self, operator: &str) -> Result<Vec<String>, SelectorError> {
        let open = self.take(Context::Value);
        if open.kind != Kind::OpenParen {
            let expected = format!("\"(\" after {operator:?}");
            return Err(self.unexpected(open, &expected, ": write key in (a,b)"));
        }
        let first = self.peek(Context::Value);
        match first.kind {
            Kind::CloseParen => {
                self.take(Context::Value);
                return Ok(vec![String::new()]);
            }
            Kind::Identifier | Kind::Comma => {}
            _ => return Err(self.unexpected(first, "a value, \",\" or \")\" after \"(\"", "")),
        }
        // Go's parseIdentifiersList, step by step: the places where it adds "" are
        // exactly the empty items.
        let mut values = Vec::new();
        loop {
            let token = self.take(Context::Value);
            match token.kind {
                Kind::Identifier => {
                    values.push(token.text.to_owned());
                    let next = self.peek(Context::Value);
                    match next.kind {
                        Kind::Comma => {}
                        Kind::CloseParen => break,
                        _ => {
                            let hint = if next.kind == Kind::Identifier {
                                ": values are separated by \",\", not spaces"
                            } else {
                                ""
                            };
                            return Err(self.unexpected(next, "\",\" or \")\"", hint));
                        }
                    }
                }
                Kind::Comma => {
                    if values.is_empty() {
                        values.push(String::new());
                    }
                    match self.peek(Context::Value).kind {
                        Kind::CloseParen => {
                            values.push(String::new());
                            break;
                        }
                        Kind::Comma => values.push(String::new()),
                        _ => {}
                    }
                }
                _ => {
                    return Err(self.unexpected(token, "a value, \",\" or \")\"", ""));
                }
            }
        }
        let close = self.take(Context::Value);
        if close.kind != Kind::CloseParen {
            return Err(self.unexpected(close, "\")\"", ""));
        }
        Ok(values)
    }

    fn unexpected(&self, token: Token<'_>, expected: &str, hint: &str) -> SelectorError {
        let found = match token.kind {
            Kind::End if token.offset < self.input.len() => {
                "a NUL character, which ends a selector".to_owned()
            }
            Kind::End => "the end of the selector".to_owned(),
            _ => format!("{:?}", token.text),
        };
        SelectorError::Unexpected {
            input: self.input.to_owned(),
            position: char_position(self.input, token.offset),
            found,
            expected: expected.to_owned(),
            hint: hint.to_owned(),
        }
    }

    fn check_key(&self, key: &str) -> Result<(), SelectorError> {
        match label_key_problem(key) {
            None => Ok(()),
            Some(reason) => Err(SelectorError::InvalidKey {
                input: self.input.to_owned(),
                key: key.to_owned(),
                reason,
            }),
        }
    }
}

fn is_operator(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Equals
            | Kind::DoubleEquals
            | Kind::NotEquals
            | Kind::GreaterThan
            | Kind::LessThan
            | Kind::In
            | Kind::NotIn
            | Kind::OpenParen
    )
}

fn char_position(input: &str, byte_offset: usize) -> usize {
    input
        .get(..byte_offset)
        .map_or(byte_offset, |head| head.chars().count())
}

// ---------------------------------------------------------------------------------------
// Validation (k8s.io/apimachinery/pkg/api/validate/content: IsLabelKey, IsLabelValue)

/// What is wrong with a qualified name (a label key, a condition type kumaco writes), or
/// `None` when it is valid.
pub fn qualified_name_problem(name: &str) -> Option<String> {
    label_key_problem(name)
}

/// What is wrong with a label key, or `None` when it is valid. A key is an optional
/// DNS-subdomain prefix and `/`, then a name of 1 to 63 characters.
fn label_key_problem(key: &str) -> Option<String> {
    let mut parts = key.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            return Some(
                "a label key has at most one '/', between an optional DNS subdomain \
                 prefix and the name, like example.com/name"
                    .into(),
            );
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some(
                "the prefix before '/' is empty: expected a DNS subdomain like example.com".into(),
            );
        }
        if prefix.len() > 253 {
            return Some(format!(
                "the prefix before '/' must be 253 characters or less (this one has {})",
                prefix.len()
            ));
        }
        if !is_dns_subdomain(prefix) {
            return Some(
                "the prefix before '/' must be a lowercase DNS subdomain: lowercase \
                 alphanumerics, '-' and '.', starting and ending with an alphanumeric, like \
                 example.com"
                    .into(),
            );
        }
    }
    let rule = "a label name must be 1 to 63 characters, and consist of alphanumerics, '-', \
                '_' or '.', starting and ending with an alphanumeric";
    if name.is_empty() {
        return Some(format!("the name is empty: {rule}"));
    }
    if name.len() > 63 {
        return Some(format!("{rule} (this one has {})", name.len()));
    }
    if !is_label_name(name) {
        return Some(rule.into());
    }
    None
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Empty, or a label name, and at most 63 characters.
fn is_label_value(s: &str) -> bool {
    s.len() <= 63 && (s.is_empty() || is_label_name(s))
}

/// RFC 1123 subdomain, lowercase: labels of `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by
/// dots (the 253 limit is checked by the caller).
fn is_dns_subdomain(s: &str) -> bool {
    s.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                let end_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
                end_ok(first) && end_ok(last) && b.iter().all(|c| end_ok(c) || *c == b'-')
            }
            _ => false,
        }
    })
}

// ---------------------------------------------------------------------------------------

/// Go's `sort.Sort` (pattern-defeating quicksort), ported so that requirements with equal
/// keys end up in the same order as in Go: `sort.Sort` is not stable once there are more
/// than 12 elements, and that order shows in `String()`. Matching does not depend on it.
/// A line-by-line port of `sort/zsortinterface.go`; `less(i, j)` is `data.Less(i, j)`.
mod go_sort {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Hint {
        Unknown,
        Increasing,
        Decreasing,
    }

    pub fn sort<T>(data: &mut [T], less: impl Fn(&T, &T) -> bool) {
        let n = data.len();
        if n <= 1 {
            return;
        }
        let limit = bit_len(n);
        let mut s = Sorter { data, less };
        s.pdqsort(0, n, limit);
    }

    /// Go's `bits.Len`: the number of bits needed to represent `n`.
    fn bit_len(n: usize) -> usize {
        (usize::BITS - n.leading_zeros()) as usize
    }

    struct Sorter<'a, T, F> {
        data: &'a mut [T],
        less: F,
    }

    impl<T, F: Fn(&T, &T) -> bool> Sorter<'_, T, F> {
        fn less(&self, i: usize, j: usize) -> bool {
            (self.less)(&self.data[i], &self.data[j])
        }

        fn swap(&mut self, i: usize, j: usize) {
            self.data.swap(i, j);
        }

        fn insertion_sort(&mut self, a: usize, b: usize) {
            for i in a + 1..b {
                let mut j = i;
                while j > a && self.less(j, j - 1) {
                    self.swap(j, j - 1);
                    j -= 1;
                }
            }
        }

        fn sift_down(&mut self, lo: usize, hi: usize, first: usize) {
            let mut root = lo;
            loop {
                let mut child = 2 * root + 1;
                if child >= hi {
                    return;
                }
                if child + 1 < hi && self.less(first + child, first + child + 1) {
                    child += 1;
                }
                if !self.less(first + root, first + child) {
                    return;
                }
                self.swap(first + root, first + child);
                root = child;
            }
        }

        fn heap_sort(&mut self, a: usize, b: usize) {
            let first = a;
            let hi = b - a;
            for i in (0..=(hi - 1) / 2).rev() {
                self.sift_down(i, hi, first);
            }
            for i in (0..hi).rev() {
                self.swap(first, first + i);
                self.sift_down(0, i, first);
            }
        }

        fn pdqsort(&mut self, mut a: usize, mut b: usize, mut limit: usize) {
            const MAX_INSERTION: usize = 12;
            let mut was_balanced = true;
            let mut was_partitioned = true;
            loop {
                let length = b - a;
                if length <= MAX_INSERTION {
                    self.insertion_sort(a, b);
                    return;
                }
                if limit == 0 {
                    self.heap_sort(a, b);
                    return;
                }
                if !was_balanced {
                    self.break_patterns(a, b);
                    limit -= 1;
                }
                let (mut pivot, mut hint) = self.choose_pivot(a, b);
                if hint == Hint::Decreasing {
                    self.reverse_range(a, b);
                    pivot = (b - 1) - (pivot - a);
                    hint = Hint::Increasing;
                }
                if was_balanced
                    && was_partitioned
                    && hint == Hint::Increasing
                    && self.partial_insertion_sort(a, b)
                {
                    return;
                }
                if a > 0 && !self.less(a - 1, pivot) {
                    a = self.partition_equal(a, b, pivot);
                    continue;
                }
                let (mid, already_partitioned) = self.partition(a, b, pivot);
                was_partitioned = already_partitioned;
                let (left, right) = (mid - a, b - mid);
                let balance_threshold = length / 8;
                if left < right {
                    was_balanced = left >= balance_threshold;
                    self.pdqsort(a, mid, limit);
                    a = mid + 1;
                } else {
                    was_balanced = right >= balance_threshold;
                    self.pdqsort(mid + 1, b, limit);
                    b = mid;
                }
            }
        }

        fn partition(&mut self, a: usize, b: usize, pivot: usize) -> (usize, bool) {
            self.swap(a, pivot);
            let (mut i, mut j) = (a + 1, b - 1);
            while i <= j && self.less(i, a) {
                i += 1;
            }
            while i <= j && !self.less(j, a) {
                j -= 1;
            }
            if i > j {
                self.swap(j, a);
                return (j, true);
            }
            self.swap(i, j);
            i += 1;
            j -= 1;
            loop {
                while i <= j && self.less(i, a) {
                    i += 1;
                }
                while i <= j && !self.less(j, a) {
                    j -= 1;
                }
                if i > j {
                    break;
                }
                self.swap(i, j);
                i += 1;
                j -= 1;
            }
            self.swap(j, a);
            (j, false)
        }

        fn partition_equal(&mut self, a: usize, b: usize, pivot: usize) -> usize {
            self.swap(a, pivot);
            let (mut i, mut j) = (a + 1, b - 1);
            loop {
                while i <= j && !self.less(a, i) {
                    i += 1;
                }
                while i <= j && self.less(a, j) {
                    j -= 1;
                }
                if i > j {
                    return i;
                }
                self.swap(i, j);
                i += 1;
                j -= 1;
            }
        }

        fn partial_insertion_sort(&mut self, a: usize, b: usize) -> bool {
            const MAX_STEPS: usize = 5;
            const SHORTEST_SHIFTING: usize = 50;
            let mut i = a + 1;
            for _ in 0..MAX_STEPS {
                while i < b && !self.less(i, i - 1) {
                    i += 1;
                }
                if i == b {
                    return true;
                }
                if b - a < SHORTEST_SHIFTING {
                    return false;
                }
                self.swap(i, i - 1);
                if i - a >= 2 {
                    // Go's bound is `j >= 1`, not `j > a`; kept as is.
                    let mut j = i - 1;
                    while j >= 1 {
                        if !self.less(j, j - 1) {
                            break;
                        }
                        self.swap(j, j - 1);
                        j -= 1;
                    }
                }
                if b - i >= 2 {
                    let mut j = i + 1;
                    while j < b {
                        if !self.less(j, j - 1) {
                            break;
                        }
                        self.swap(j, j - 1);
                        j += 1;
                    }
                }
            }
            false
        }

        fn break_patterns(&mut self, a: usize, b: usize) {
            let length = b - a;
            if length >= 8 {
                let mut random = length as u64;
                let modulus = 1usize << bit_len(length);
                let middle = a + (length / 4) * 2;
                for idx in middle - 1..=middle + 1 {
                    random ^= random << 13;
                    random ^= random >> 7;
                    random ^= random << 17;
                    let mut other = (random as usize) & (modulus - 1);
                    if other >= length {
                        other -= length;
                    }
                    self.swap(idx, a + other);
                }
            }
        }

        fn choose_pivot(&mut self, a: usize, b: usize) -> (usize, Hint) {
            const SHORTEST_NINTHER: usize = 50;
            const MAX_SWAPS: usize = 4 * 3;
            let l = b - a;
            let mut swaps = 0;
            let mut i = a + l / 4;
            let mut j = a + l / 4 * 2;
            let mut k = a + l / 4 * 3;
            if l >= 8 {
                if l >= SHORTEST_NINTHER {
                    i = self.median(i - 1, i, i + 1, &mut swaps);
                    j = self.median(j - 1, j, j + 1, &mut swaps);
                    k = self.median(k - 1, k, k + 1, &mut swaps);
                }
                j = self.median(i, j, k, &mut swaps);
            }
            match swaps {
                0 => (j, Hint::Increasing),
                MAX_SWAPS => (j, Hint::Decreasing),
                _ => (j, Hint::Unknown),
            }
        }

        fn order2(&self, a: usize, b: usize, swaps: &mut usize) -> (usize, usize) {
            if self.less(b, a) {
                *swaps += 1;
                (b, a)
            } else {
                (a, b)
            }
        }

        fn median(&self, a: usize, b: usize, c: usize, swaps: &mut usize) -> usize {
            let (a, b) = self.order2(a, b, swaps);
            let (b, _) = self.order2(b, c, swaps);
            let (_, b) = self.order2(a, b, swaps);
            b
        }

        fn reverse_range(&mut self, a: usize, b: usize) {
            let (mut i, mut j) = (a, b - 1);
            while i < j {
                self.swap(i, j);
                i += 1;
                j -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Go's TestSelectorParse: valid strings print back without their spaces.
    #[test]
    fn parses_and_prints_like_go() {
        for input in [
            "x=a,y=b,z=c",
            "",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
        ] {
            let selector = parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(selector.to_string(), input.replace(' ', ""), "{input:?}");
        }
    }

    /// Outputs confirmed with the Go oracle.
    #[test]
    fn canonical_strings() {
        for (input, printed) in [
            ("x=a,a=x", "a=x,x=a"),
            ("a = ,b", "a=,b"),
            ("a==b", "a==b"),
            ("x>007", "x>007"),
            ("a=b,a=c,b in (z,,y)", "a=b,a=c,b in (,y,z)"),
            ("in in (in)", "in in (in)"),
            ("notin=in", "notin=in"),
            ("!a,!a", "!a,!a"),
            ("x in ()", "x in ()"),
            ("x notin (b, a, b)", "x notin (a,b)"),
            ("x in (,)", "x in ()"),
            ("\tx\r\n=\ny ", "x=y"),
            ("kured.dev/x in (a)", "kured.dev/x in (a)"),
            ("a \0,,,", "a"),
            ("a=b\0,c", "a=b,c"),
        ] {
            let selector = parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(selector.to_string(), printed, "{input:?}");
        }
        // Go's sort.Sort is unstable past 12 elements (its output, from the oracle).
        let input: Vec<String> = (0..14)
            .map(|i| format!("{}={i}", ["a", "b"][i % 2]))
            .collect();
        assert_eq!(
            parse(&input.join(",")).map(|s| s.to_string()),
            Ok("a=8,a=12,a=2,a=0,a=4,a=10,a=6,b=3,b=7,b=9,b=5,b=11,b=1,b=13".to_owned())
        );
    }

    #[test]
    fn rejects_what_go_rejects() {
        for input in [
            "x=a||y=b",
            "x==a==b",
            "!x=a",
            "x<a",
            "x,,y",
            ",x,y",
            "x,",
            "a in (xyz),",
            "a in (xyz abc)",
            "x nott in (y)",
            "a notin(",
            "(",
            ")",
            ">",
            "a!==b",
            "a/b/c",
            "A.b/c",
            "/a",
            "a/",
            "a= b c",
            "x>=1",
            "x>-1",
            "x>+1",
            "x>",
            "x>99999999999999999999",
            "a=b\u{1}",
            "!",
            "a in",
            "a in (",
            "a in (b",
            "a in b",
            "a=(",
            "é=a",
            &"k".repeat(64),
            &format!("a={}", "v".repeat(64)),
            &format!("{}/a", "p".repeat(254)),
            "a, \0b",
        ] {
            assert!(parse(input).is_err(), "{input:?} should be rejected");
        }
        for input in [
            &"k".repeat(63),
            &format!("a={}", "v".repeat(63)),
            &format!("{}/a", "p".repeat(253)),
            "x>9223372036854775807",
            "a/b.c",
            "a.b-c/D_e.F",
            "a,\0b",
            "\0",
        ] {
            assert!(parse(input).is_ok(), "{input:?} should be accepted");
        }
    }

    /// The matching vectors of go-semantics.md §C, plus the absent-label rules.
    #[test]
    fn matches_like_go() {
        let yes: &[(&str, &[(&str, &str)])] = &[
            ("", &[("x", "y")]),
            ("x=y", &[("x", "y")]),
            ("x==y", &[("x", "y")]),
            ("x!=y,z!=w", &[("x", "z"), ("z", "a")]),
            ("x!=y", &[]),
            ("x notin (a)", &[]),
            ("x", &[("x", "z")]),
            ("x", &[("x", "")]),
            ("!x", &[("y", "z")]),
            ("x>1", &[("x", "2")]),
            ("x<1", &[("x", "-5")]),
            ("x>1", &[("x", "+2")]),
            ("x in (a,b)", &[("x", "b")]),
            ("x in ()", &[("x", "")]),
        ];
        let no: &[(&str, &[(&str, &str)])] = &[
            ("x=z", &[]),
            ("x in (a)", &[]),
            ("x notin (\"\"), !y", &[("y", "")]),
            ("x notin (),!y", &[("y", "")]),
            ("z>1", &[("z", "v2")]),
            ("z>1", &[]),
            ("z<1", &[("z", " 0")]),
            ("x!=y", &[("x", "y")]),
            ("!x", &[("x", "")]),
        ];
        for &(input, set) in yes {
            if let Ok(selector) = parse(input) {
                assert!(
                    selector.matches(&labels(set)),
                    "{input:?} should match {set:?}"
                );
            } else {
                panic!("{input:?} should parse");
            }
        }
        for &(input, set) in no {
            // `x notin ("")` does not parse (quotes are not label characters): skip it.
            if let Ok(selector) = parse(input) {
                assert!(
                    !selector.matches(&labels(set)),
                    "{input:?} should not match {set:?}"
                );
            }
        }
    }

    #[test]
    fn everything() {
        assert!(Selector::everything().is_everything());
        assert_eq!(parse(" \t\n"), Ok(Selector::everything()));
        assert!(Selector::everything().matches(&BTreeMap::new()));
        assert!(!parse("a").is_ok_and(|s| s.is_everything()));
    }

    #[test]
    fn requirements_are_listed() {
        let Ok(selector) = parse("b in (y,x),!a") else {
            panic!("should parse");
        };
        let listed: Vec<_> = selector
            .requirements()
            .iter()
            .map(|r| (r.key(), r.operator().as_str(), r.values().to_vec()))
            .collect();
        assert_eq!(
            listed,
            [
                ("a", "!", vec![]),
                ("b", "in", vec!["x".to_owned(), "y".to_owned()])
            ]
        );
    }

    #[test]
    fn errors_say_where_what_and_what_is_expected() {
        let message = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(
            message("a = (b"),
            "expected a value after \"=\" at position 4 in \"a = (b\", found \"(\": \
             parentheses go with in and notin, like key in (a,b)"
        );
        assert_eq!(
            message("a,,b"),
            "expected a label key or !key after \",\" at position 2 in \"a,,b\", found \",\": \
             two commas in a row leave an empty requirement"
        );
        assert!(message("a,").contains("found the end of the selector: a trailing comma"));
        assert!(message("x>=1").contains("there is no >= or <= operator"));
        assert!(message("!a=b").contains("!key takes no operator or value"));
        assert!(message("a=b c").contains("separated by \",\", not spaces"));
        assert_eq!(
            message("a=b$"),
            format!("invalid value \"b$\" for label key \"a\" in \"a=b$\": {VALUE_RULE}")
        );
        assert_eq!(
            message("x>-1"),
            "\">\" needs a whole number, found \"-1\" after label key \"x\" in \"x>-1\": \
             expected digits like 3 (not negative, at most 9223372036854775807)"
        );
        assert!(message("A.b/c").contains("lowercase DNS subdomain"));
        assert!(message(&"k".repeat(64)).contains("this one has 64"));
        assert!(message("é = x,(").contains("invalid label key \"é\""));
        assert!(message("a in (b c)").contains("at position 8"));
    }

    #[test]
    fn go_sort_sorts() {
        let mut v: Vec<u32> = (0..500).map(|i| (i * 7919) % 503).collect();
        go_sort::sort(&mut v, |a, b| a < b);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let mut v: Vec<u32> = (0..300).rev().collect();
        go_sort::sort(&mut v, |a, b| a < b);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }

    fn selector_like() -> impl Strategy<Value = String> {
        let key =
            prop::sample::select(vec!["a", "b", "in", "notin", "kured.dev/x", "A-1", "x.y_z"]);
        let value = prop::sample::select(vec!["", "a", "1", "007", "in", "b-c", "-1", "x y"]);
        let op = prop::sample::select(vec![
            "=", "==", "!=", " in ", " notin ", ">", "<", "", "!", " ",
        ]);
        let requirement =
            (key, op, prop::collection::vec(value, 0..3)).prop_map(|(k, op, vs)| match op.trim() {
                "in" | "notin" => format!("{k}{op}({})", vs.join(",")),
                "!" => format!("!{k}"),
                _ => format!("{k}{op}{}", vs.first().copied().unwrap_or_default()),
            });
        prop::collection::vec(requirement, 0..16).prop_map(|rs| rs.join(","))
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_selector_like_text(s in "[a-z!=<>(),/ \t\0.-]{0,40}") {
            let _ = parse(&s);
        }

        #[test]
        fn display_reparses_to_an_equal_selector(s in selector_like()) {
            if let Ok(selector) = parse(&s) {
                prop_assert_eq!(parse(&selector.to_string()), Ok(selector));
            }
        }

        #[test]
        fn go_sort_orders_like_a_sort(mut v in prop::collection::vec(0u8..20, 0..200)) {
            go_sort::sort(&mut v, |a, b| a < b);
            prop_assert!(v.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
