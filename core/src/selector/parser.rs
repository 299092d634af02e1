//! The string form's lexer and parser, following Go's `labels.Parse` token by token
//! (its corners are listed in [`super`]).

use super::validation::{VALUE_RULE, is_label_value, label_key_problem};
use super::{Operator, Requirement, SelectorError, go_parse_int};

/// The requirements of `input` in the order written (the caller sorts them as Go does).
pub(super) fn requirements(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    Parser {
        input,
        tokens: lex(input),
        next: 0,
    }
    .selector()
}

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
