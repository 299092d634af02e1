//! The words of a message as operators write them: kured v1's message templates as they
//! are, and richer templates over every field of a notice.
//!
//! kured v1's `--message-template-drain` (`Draining node %s`), `-reboot` (`Rebooting node
//! %s`) and `-uncordon` (`Node %s rebooted & uncordoned successfully!`) are Go format
//! strings filled with the node's name. kumaco reads them as Go would for what they are
//! used for: `%s` (and `%v`, the same for a string) is the node's name, `%%` a percent
//! sign. Anything else Go would print as an error inside the message (`%!d(string=...)`,
//! `%!s(MISSING)` for a second `%s`): kumaco refuses it when the flag is read, naming the
//! flag and the position, so a message never carries Go's error text. A template without
//! `%s` is taken as it is (Go would append `%!(EXTRA string=NODE)`).
//!
//! Which transition each fills: drain, posted by kured v1 as it starts draining, is
//! [`Kind::Started`]; uncordon, posted when the node is back, is [`Kind::Completed`].
//! Reboot is accepted and fills none: kured v1 posts it between the drain and the reboot,
//! a moment kumaco does not see (kured v2 reboots on kumaco's signal), and the drain's
//! message already says the maintenance started, so a second message for it would only
//! repeat it.
//!
//! Richer templates are MiniJinja (Jinja2's syntax) over every field of a notice (see
//! [`Template`]). A template that does not parse is refused when the flag is read, naming
//! the flag, the line and the column. One that fails while rendering (a field misspelled,
//! a filter on a missing value) never costs the message: the default words are sent, and
//! the error returned for the logs. Rendering is bounded: [`MAX_RENDERED_BYTES`] of output
//! (cut, marked `…`) and [`FUEL`] instructions.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io;

use minijinja::{Environment, UndefinedBehavior, Value};

use crate::conditions::bounded;
use crate::notice::{Kind, Notice, duration};

/// kured v1's defaults, the same words.
pub const KURED_DRAIN: &str = "Draining node %s";
pub const KURED_REBOOT: &str = "Rebooting node %s";
pub const KURED_UNCORDON: &str = "Node %s rebooted & uncordoned successfully!";

/// The longest message a template renders: far above a notice's own words, far below
/// the smallest limit a service would cut it to with a mark in the middle.
pub const MAX_RENDERED_BYTES: usize = 4096;
/// The most instructions one rendering runs: a template looping over a notice's lists
/// needs a few thousand; a runaway loop stops here.
pub const FUEL: u64 = 100_000;

/// A template that cannot be used, or a rendering that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "{flag}: {verb:?} at character {position}: kured v1's templates take %s (the node's \
         name) and %% (a percent sign) only"
    )]
    Verb {
        flag: &'static str,
        verb: String,
        position: usize,
    },
    #[error(
        "{flag}: a second %s at character {position}: kured v1 fills only the first (Go \
         prints %!s(MISSING) for the others)"
    )]
    SecondNode { flag: &'static str, position: usize },
    #[error("{flag}: line {line}, column {column}: {message}")]
    Syntax {
        flag: &'static str,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{flag}: rendering failed: {message}")]
    Render { flag: &'static str, message: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(String),
    Node,
}

/// One of kured v1's templates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KuredTemplate {
    pieces: Vec<Piece>,
}

impl KuredTemplate {
    /// `flag` names the flag in errors (`--message-template-drain`); a position counts
    /// characters from 1.
    pub fn parse(flag: &'static str, template: &str) -> Result<KuredTemplate, TemplateError> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut node_at = None;
        let mut chars = template.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '%' {
                text.push(c);
                continue;
            }
            let position = i + 1;
            match chars.next() {
                Some((_, '%')) => text.push('%'),
                Some((_, 's' | 'v')) => {
                    if node_at.is_some() {
                        return Err(TemplateError::SecondNode { flag, position });
                    }
                    node_at = Some(position);
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                    pieces.push(Piece::Node);
                }
                other => {
                    let verb = match other {
                        Some((_, c)) => format!("%{c}"),
                        None => "%".to_string(),
                    };
                    return Err(TemplateError::Verb {
                        flag,
                        verb,
                        position,
                    });
                }
            }
        }
        pieces.push(Piece::Text(text));
        pieces.retain(|p| *p != Piece::Text(String::new()));
        Ok(KuredTemplate { pieces })
    }

    /// The message for `node`, at most [`MAX_RENDERED_BYTES`].
    pub fn render(&self, node: &str) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Node => out.push_str(node),
            }
        }
        bounded(out, MAX_RENDERED_BYTES)
    }
}

/// kured v1's three templates, as its flags give them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KuredTemplates {
    pub drain: KuredTemplate,
    pub reboot: KuredTemplate,
    pub uncordon: KuredTemplate,
}

impl KuredTemplates {
    pub fn parse(drain: &str, reboot: &str, uncordon: &str) -> Result<Self, TemplateError> {
        Ok(KuredTemplates {
            drain: KuredTemplate::parse("--message-template-drain", drain)?,
            reboot: KuredTemplate::parse("--message-template-reboot", reboot)?,
            uncordon: KuredTemplate::parse("--message-template-uncordon", uncordon)?,
        })
    }

    /// kured v1's defaults.
    pub fn defaults() -> Self {
        Self::parse(KURED_DRAIN, KURED_REBOOT, KURED_UNCORDON)
            .expect("kured v1's default templates parse")
    }

    /// The template kured v1 posted at the moment of `kind`, if any (see the module's
    /// documentation).
    pub fn for_kind(&self, kind: Kind) -> Option<&KuredTemplate> {
        match kind {
            Kind::Started => Some(&self.drain),
            Kind::Completed => Some(&self.uncordon),
            _ => None,
        }
    }

    /// The message for a node's notice of a kind a template fills.
    pub fn render(&self, notice: &Notice) -> Option<String> {
        let node = notice.node.as_ref()?;
        Some(self.for_kind(notice.kind)?.render(&node.name))
    }
}

/// A MiniJinja template over a notice. Its variables:
///
/// - `id`, `kind` (the stable name, `not-back`), `kind_label` (`not back`), `cluster`,
///   `at` (RFC 3339), `reason`, `message`;
/// - `node`: `name`, `zone`, `pool`, or none; `window`: `namespace`, `name`,
///   `description`, or none;
/// - `duration` (`4m12s`) and `duration_seconds` (a number), or none; `rebooted`,
///   `selected`, `done`, or none;
/// - `left`: a list of `node`, `reason`, `message`; `forecast`: `expected_end`,
///   `p90_end` (RFC 3339) and `not_fitting` (a list of names), or none;
/// - `title` and `text`: kumaco's default words, to wrap or to fall back on.
///
/// A variable that does not exist is an error (the default words are sent), not an
/// empty string: a misspelled field shows. Booleans print as Jinja prints them (`True`).
/// No output is escaped: each payload escapes what its service needs.
#[derive(Debug)]
pub struct Template {
    flag: &'static str,
    env: Environment<'static>,
}

/// The name the one template has in its environment.
const NAME: &str = "message";

/// A rendering: the text to send, and the error when it is the default words instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub error: Option<TemplateError>,
}

impl Template {
    /// `flag` names the flag in errors.
    pub fn parse(flag: &'static str, source: &str) -> Result<Template, TemplateError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_fuel(Some(FUEL));
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| syntax(flag, source, &e))?;
        Ok(Template { flag, env })
    }

    /// The template filled with `notice`, at most [`MAX_RENDERED_BYTES`] (cut, marked
    /// `…`).
    pub fn render(&self, notice: &Notice) -> Result<String, TemplateError> {
        let failed = |e: minijinja::Error| TemplateError::Render {
            flag: self.flag,
            message: describe(&e),
        };
        let template = self.env.get_template(NAME).map_err(failed)?;
        let mut out = Capped::default();
        match template.render_captured_to(context(notice), &mut out) {
            Ok(_) => {}
            // Output past the bound stops the rendering: what came before it is the text.
            Err(_) if out.full => {}
            Err(e) => return Err(failed(e)),
        }
        let text = String::from_utf8_lossy(&out.bytes).into_owned();
        Ok(bounded(text, MAX_RENDERED_BYTES))
    }

    /// The template filled with `notice`, or `default` if that fails: a message is never
    /// lost to its template.
    pub fn render_or(&self, notice: &Notice, default: &str) -> Rendered {
        match self.render(notice) {
            Ok(text) => Rendered { text, error: None },
            Err(e) => Rendered {
                text: default.to_string(),
                error: Some(e),
            },
        }
    }
}

/// Output that takes one byte more than [`MAX_RENDERED_BYTES`] (so that the cut is
/// marked), then refuses.
#[derive(Default)]
struct Capped {
    bytes: Vec<u8>,
    full: bool,
}

impl io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = (MAX_RENDERED_BYTES + 1).saturating_sub(self.bytes.len());
        if buf.len() > room {
            self.bytes.extend_from_slice(&buf[..room]);
            self.full = true;
            return Err(io::Error::other("the rendered message is too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn syntax(flag: &'static str, source: &str, e: &minijinja::Error) -> TemplateError {
    let line = e.line().unwrap_or(1);
    let column = e
        .range()
        .and_then(|r| {
            let start = r.start.min(source.len());
            let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
            source.get(line_start..start).map(|s| s.chars().count() + 1)
        })
        .unwrap_or(1);
    TemplateError::Syntax {
        flag,
        line,
        column,
        message: describe(e),
    }
}

/// What went wrong, without the template's name (there is one).
fn describe(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(detail) => format!("{}: {detail}", e.kind()),
        None => e.kind().to_string(),
    }
}

/// The notice's fields as the template's variables.
fn context(n: &Notice) -> Value {
    let map = |pairs: Vec<(&'static str, Value)>| Value::from(BTreeMap::from_iter(pairs));
    let node = n.node.as_ref().map(|node| {
        map(vec![
            ("name", Value::from(node.name.as_str())),
            ("zone", Value::from(node.zone.clone())),
            ("pool", Value::from(node.pool.clone())),
        ])
    });
    let window = n.window.as_ref().map(|w| {
        map(vec![
            ("namespace", Value::from(w.namespace.as_str())),
            ("name", Value::from(w.name.as_str())),
            ("description", Value::from(w.description.clone())),
        ])
    });
    let left: Vec<Value> = n
        .left
        .iter()
        .map(|l| {
            map(vec![
                ("node", Value::from(l.node.as_str())),
                ("reason", Value::from(l.reason.as_str())),
                ("message", Value::from(l.message.as_str())),
            ])
        })
        .collect();
    let forecast = n.forecast.as_ref().map(|f| {
        map(vec![
            ("expected_end", Value::from(f.expected_end.to_string())),
            ("p90_end", Value::from(f.p90_end.to_string())),
            (
                "not_fitting",
                Value::from_iter(f.not_fitting.iter().map(String::as_str)),
            ),
        ])
    });
    map(vec![
        ("id", Value::from(n.id.as_str())),
        ("kind", Value::from(n.kind.name())),
        ("kind_label", Value::from(n.kind.label())),
        ("cluster", Value::from(n.cluster.as_str())),
        ("at", Value::from(n.at.to_string())),
        ("node", Value::from(node)),
        ("window", Value::from(window)),
        ("reason", Value::from(n.reason.as_str())),
        ("message", Value::from(n.message.as_str())),
        ("duration", Value::from(n.duration.map(duration))),
        (
            "duration_seconds",
            Value::from(n.duration.map(|d| d.as_secs_f64())),
        ),
        ("rebooted", Value::from(n.rebooted)),
        ("selected", Value::from(n.selected)),
        ("done", Value::from(n.done)),
        ("left", Value::from(left)),
        ("forecast", Value::from(forecast)),
        ("title", Value::from(n.title())),
        ("text", Value::from(n.text())),
    ])
}
