//! Rust source as the tokens an import check needs: identifiers, `::` and the
//! punctuation that delimits items and use trees, each with its line. Comments, string
//! and character literals and lifetimes are dropped, so a path named in a doc comment or
//! a message is not taken for an import.

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    /// `{`, `(`, `[`
    Open(char),
    /// `}`, `)`, `]`
    Close(char),
    Semi,
    Comma,
    Star,
    Hash,
    /// Anything else (operators, numbers, a single `:`): it ends a path.
    Other,
}

impl Tok {
    pub fn is_ident(&self, name: &str) -> bool {
        matches!(self, Tok::Ident(s) if s == name)
    }
}

/// The tokens of `text`, each with its 1-based line.
pub fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch.is_whitespace() {
            i = skip_to(&c, i, i + 1, &mut line);
        } else if ch == '/' && at(i + 1) == '/' {
            let end = (i..c.len()).find(|&j| c[j] == '\n').unwrap_or(c.len());
            i = skip_to(&c, i, end, &mut line);
        } else if ch == '/' && at(i + 1) == '*' {
            let (mut j, mut depth) = (i + 2, 1);
            while j < c.len() && depth > 0 {
                if c[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if c[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            i = skip_to(&c, i, j, &mut line);
        } else if ch == '"' {
            i = skip_to(&c, i, string_end(&c, i + 1), &mut line);
        } else if ch == '\'' {
            // A character literal ('x', '\n', '{') or a lifetime ('a, 'static).
            let end = if at(i + 1) == '\\' {
                (i + 2..c.len())
                    .find(|&j| c[j] == '\'')
                    .map_or(c.len(), |j| j + 1)
            } else if at(i + 2) == '\'' {
                i + 3
            } else {
                (i + 1..c.len())
                    .find(|&j| !(c[j].is_alphanumeric() || c[j] == '_'))
                    .unwrap_or(c.len())
            };
            i = skip_to(&c, i, end, &mut line);
        } else if ch.is_alphabetic() || ch == '_' {
            let end = (i..c.len())
                .find(|&j| !(c[j].is_alphanumeric() || c[j] == '_'))
                .unwrap_or(c.len());
            let word: String = c[i..end].iter().collect();
            let prefix = matches!(word.as_str(), "r" | "b" | "br" | "c" | "cr");
            if prefix && (at(end) == '"' || (at(end) == '#' && word.contains('r'))) {
                // A raw or byte string: r"..", r#".."#, b"..", br#".."#.
                let hashes = (end..c.len()).take_while(|&j| c[j] == '#').count();
                let open = end + hashes;
                let close = if hashes == 0 && !word.contains('r') {
                    string_end(&c, open + 1)
                } else {
                    raw_string_end(&c, open + 1, hashes)
                };
                i = skip_to(&c, i, close, &mut line);
            } else if word == "r" && at(end) == '#' {
                // A raw identifier: r#type.
                let id_end = (end + 1..c.len())
                    .find(|&j| !(c[j].is_alphanumeric() || c[j] == '_'))
                    .unwrap_or(c.len());
                out.push((Tok::Ident(c[end + 1..id_end].iter().collect()), line));
                i = id_end;
            } else {
                out.push((Tok::Ident(word), line));
                i = end;
            }
        } else if ch.is_ascii_digit() {
            let end = (i..c.len())
                .find(|&j| !(c[j].is_alphanumeric() || c[j] == '_'))
                .unwrap_or(c.len());
            out.push((Tok::Other, line));
            i = end;
        } else {
            let tok = match ch {
                ':' if at(i + 1) == ':' => {
                    i += 1;
                    Tok::PathSep
                }
                '{' | '(' | '[' => Tok::Open(ch),
                '}' | ')' | ']' => Tok::Close(ch),
                ';' => Tok::Semi,
                ',' => Tok::Comma,
                '*' => Tok::Star,
                '#' => Tok::Hash,
                _ => Tok::Other,
            };
            out.push((tok, start_line));
            i += 1;
        }
    }
    out
}

/// Steps over `c[i..end]`, counting the newlines in it.
fn skip_to(c: &[char], i: usize, end: usize, line: &mut usize) -> usize {
    let end = end.min(c.len());
    *line += c[i..end].iter().filter(|&&ch| ch == '\n').count();
    end
}

/// Just past the `"` closing a string whose text starts at `i`.
fn string_end(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    c.len()
}

/// Just past the `"` and `hashes` `#`s closing a raw string whose text starts at `i`.
fn raw_string_end(c: &[char], i: usize, hashes: usize) -> usize {
    (i..c.len())
        .find(|&j| c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')))
        .map_or(c.len(), |j| j + 1 + hashes)
}

#[test]
fn comments_strings_and_lifetimes_are_not_tokens() {
    let text = "use a::b; // crate::x\n/* crate::y /* nested */ */ \"crate::z\" r#\"crate::w\"#\n\
                fn f<'a>(c: &'a str) -> char { '{' } b\"q\" crate::v";
    let idents: Vec<String> = tokens(text)
        .into_iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(
        idents,
        ["use", "a", "b", "fn", "f", "c", "str", "char", "crate", "v"]
    );
    let (_, line) = tokens(text).into_iter().last().unwrap();
    assert_eq!(line, 3);
}
