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
//!   algorithm ([`go_sort`]);
//! - `!=` and `notin` match nodes without the label; `>` and `<` never match a label whose
//!   value is not a base-10 int64.
//!
//! Only the error messages differ: ours say where, what was found and what was expected.
//! The lexer and parser are in [`parser`], the rules for keys and values in
//! [`validation`].
//!
//! A window's `nodeSelector` may also be a `metav1.LabelSelector` object in YAML or JSON
//! ([`object`]); [`parse_string_or_object`] tells the two forms apart.

use std::collections::BTreeMap;
use std::fmt;

mod go_sort;
pub mod object;
mod parser;
#[cfg(test)]
mod tests;
mod validation;

pub use validation::qualified_name_problem;

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

/// Parses `input` exactly as Go's `labels.Parse` does. The empty (or all-whitespace)
/// string is [`Selector::everything`].
pub fn parse(input: &str) -> Result<Selector, SelectorError> {
    let mut requirements = parser::requirements(input)?;
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
