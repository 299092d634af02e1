//! The module graph drawn from the code's own imports: an arrow from a module to every
//! module it names, in a `use` item or in a path (`crate::`, `super::`, `self::`, a
//! child module, a name a `use` brought in). Test code (`tests` modules, `#[cfg(test)]`
//! items) draws no arrows: it may reach anywhere.
//!
//! Module names are as the shell's code spells them (`controller::watch`); the core
//! crate's modules are `core::...` (`core::selector::object`), which the shell reaches
//! through the re-exports of its `lib.rs` (`crate::pass` is `core::pass`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use super::tokens::{Tok, tokens};

/// One module's file, under the name the graph gives it.
pub struct Source {
    pub module: String,
    pub file: PathBuf,
    pub text: String,
}

/// Where an arrow was drawn: the first place the importing module names the other.
#[derive(Clone, Debug)]
pub struct Site {
    pub file: PathBuf,
    pub line: usize,
}

#[derive(Default)]
pub struct Graph {
    /// (from, to) -> where.
    pub edges: BTreeMap<(String, String), Site>,
}

/// The modules of a crate whose root is `src/lib.rs`, named with `prefix` (`""` or
/// `"core::"`): every `mod` declared in a file, in the file Rust reads it from, `tests`
/// modules left out.
pub fn sources(src: &Path, prefix: &str) -> Vec<Source> {
    fn walk(dir: &Path, file: &Path, module: &str, out: &mut Vec<Source>) {
        let text = std::fs::read_to_string(file).unwrap();
        let toks = tokens(&text);
        for w in toks.windows(3) {
            let [(Tok::Ident(kw), _), (Tok::Ident(name), _), (Tok::Semi, _)] = w else {
                continue;
            };
            if kw != "mod" || name == "tests" {
                continue;
            }
            let path = join(module, name);
            // `name/mod.rs`, or `name.rs` with its submodules in `name/`.
            let sub_dir = dir.join(name);
            for file in [sub_dir.join("mod.rs"), dir.join(format!("{name}.rs"))] {
                if file.exists() {
                    walk(&sub_dir, &file, &path, out);
                    break;
                }
            }
        }
        out.push(Source {
            module: module.to_string(),
            file: file.to_path_buf(),
            text,
        });
    }
    let mut out = Vec::new();
    walk(
        src,
        &src.join("lib.rs"),
        prefix.trim_end_matches("::"),
        &mut out,
    );
    out
}

fn join(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}::{child}")
    }
}

fn parent(module: &str) -> String {
    module.rsplit_once("::").map_or("", |(p, _)| p).to_string()
}

fn is_root(module: &str) -> bool {
    module.is_empty() || module == "core"
}

/// The root module of the crate `module` is in: `core` or the shell's `""`.
fn crate_root(module: &str) -> &'static str {
    if module == "core" || module.starts_with("core::") {
        "core"
    } else {
        ""
    }
}

/// A `use` item's paths, each with the name it brings into scope (`as`, or its last
/// segment; a glob brings none).
fn use_paths(
    t: &[(Tok, usize)],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix.to_vec();
    while let Some((tok, _)) = t.get(*i) {
        match tok {
            Tok::Ident(s) => {
                path.push(s.clone());
                *i += 1;
            }
            Tok::Open('{') => {
                *i += 1;
                while !matches!(t.get(*i), None | Some((Tok::Close('}'), _))) {
                    use_paths(t, i, &path, out);
                    if matches!(t.get(*i), Some((Tok::Comma, _))) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Tok::Star => {
                *i += 1;
                out.push((path, None));
                return;
            }
            _ => break,
        }
        if matches!(t.get(*i), Some((Tok::PathSep, _))) {
            *i += 1;
            continue;
        }
        break;
    }
    // `a::b::{self}` names `a::b`.
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    let mut name = path.last().cloned();
    if t.get(*i).is_some_and(|(tok, _)| tok.is_ident("as")) {
        name = match t.get(*i + 1) {
            Some((Tok::Ident(alias), _)) => Some(alias.clone()),
            _ => None,
        };
        *i += 2;
    }
    out.push((path, name));
}

/// Resolves and records the arrows of every module's source.
pub struct Builder {
    /// Every module, `core::...` for the core's.
    modules: BTreeSet<String>,
    /// Names the shell's root re-exports from the core (`pass` -> `core::pass`).
    reexports: BTreeMap<String, String>,
    pub graph: Graph,
}

impl Builder {
    pub fn new(sources: &[Source]) -> Builder {
        let modules = sources.iter().map(|s| s.module.clone()).collect();
        let mut b = Builder {
            modules,
            reexports: BTreeMap::new(),
            graph: Graph::default(),
        };
        if let Some(root) = sources.iter().find(|s| s.module.is_empty()) {
            let t = tokens(&root.text);
            let mut i = 0;
            while i < t.len() {
                if t[i].0.is_ident("use") {
                    i += 1;
                    let mut paths = Vec::new();
                    use_paths(&t, &mut i, &[], &mut paths);
                    for (path, name) in paths {
                        if path.first().is_some_and(|s| s == "kumaco_core")
                            && let (Some(name), Some((to, true))) =
                                (name, b.resolve("core", &path[1..]))
                        {
                            b.reexports.insert(name, to);
                        }
                    }
                }
                i += 1;
            }
        }
        for s in sources {
            b.add(s);
        }
        b
    }

    /// The deepest module `path` names, walked from `base`, and whether every segment
    /// of `path` is a module (so a `use` of it brings a module into scope).
    fn resolve(&self, base: &str, path: &[String]) -> Option<(String, bool)> {
        let mut at = base.to_string();
        let mut walked = 0;
        for seg in path {
            let next = join(&at, seg);
            if self.modules.contains(&next) {
                at = next;
            } else if at.is_empty() && self.reexports.contains_key(seg) {
                at = self.reexports[seg].clone();
            } else {
                break;
            }
            walked += 1;
        }
        (!is_root(&at)).then_some((at, walked == path.len()))
    }

    /// The module a path written in `module` names, if it names one (and whether the
    /// whole path is that module).
    fn target(
        &self,
        module: &str,
        path: &[String],
        aliases: &BTreeMap<String, String>,
    ) -> Option<(String, bool)> {
        let first = path.first()?;
        let (base, rest) = match first.as_str() {
            "crate" => (crate_root(module).to_string(), &path[1..]),
            "kumaco_core" => ("core".to_string(), &path[1..]),
            "self" => (module.to_string(), &path[1..]),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                let mut base = module.to_string();
                for _ in 0..supers {
                    base = parent(&base);
                }
                (base, &path[supers..])
            }
            name if self.modules.contains(&join(module, name)) => (module.to_string(), path),
            name if aliases.contains_key(name) => (aliases[name].clone(), &path[1..]),
            _ => return None,
        };
        self.resolve(&base, rest)
    }

    fn arrow(&mut self, from: &str, to: Option<(String, bool)>, file: &Path, line: usize) {
        let Some((to, _)) = to else { return };
        if to == from || is_root(from) {
            return;
        }
        self.graph
            .edges
            .entry((from.to_string(), to))
            .or_insert_with(|| Site {
                file: file.to_path_buf(),
                line,
            });
    }

    /// Walks one module's tokens: `use` items and paths draw arrows; `#[cfg(test)]`
    /// items are skipped; inline modules (`mod linux { .. }`) are modules of their own.
    fn add(&mut self, source: &Source) {
        let t = tokens(&source.text);
        let mut aliases = BTreeMap::new();
        // The inline modules open at this point, with the depth their `{` opened.
        let mut scopes: Vec<(String, usize)> = vec![(source.module.clone(), 0)];
        let mut depth = 0;
        let mut i = 0;
        while i < t.len() {
            let module = scopes.last().unwrap().0.clone();
            match &t[i].0 {
                Tok::Hash if is_cfg_test(&t[i..]) => {
                    i = skip_item(&t, i);
                    continue;
                }
                Tok::Ident(kw) if kw == "mod" => {
                    if let (Some((Tok::Ident(name), _)), Some((Tok::Open('{'), _))) =
                        (t.get(i + 1), t.get(i + 2))
                    {
                        depth += 1;
                        scopes.push((join(&module, name), depth));
                        i += 3;
                        continue;
                    }
                }
                Tok::Ident(kw) if kw == "use" => {
                    let line = t[i].1;
                    i += 1;
                    let mut paths = Vec::new();
                    use_paths(&t, &mut i, &[], &mut paths);
                    for (path, name) in paths {
                        let to = self.target(&module, &path, &aliases);
                        if let (Some(name), Some((to, true))) = (name, &to) {
                            aliases.insert(name, to.clone());
                        }
                        self.arrow(&module, to, &source.file, line);
                    }
                    continue;
                }
                Tok::Ident(_)
                    if !matches!(i.checked_sub(1).map(|p| &t[p].0), Some(Tok::PathSep)) =>
                {
                    let line = t[i].1;
                    let mut path = Vec::new();
                    let mut j = i;
                    while let Some((Tok::Ident(s), _)) = t.get(j) {
                        path.push(s.clone());
                        if !matches!(t.get(j + 1), Some((Tok::PathSep, _))) {
                            break;
                        }
                        j += 2;
                    }
                    if path.len() > 1 {
                        let to = self.target(&module, &path, &aliases);
                        self.arrow(&module, to, &source.file, line);
                    }
                    i = j + 1;
                    continue;
                }
                Tok::Open('{') => depth += 1,
                Tok::Close('}') => {
                    if scopes.last().unwrap().1 == depth {
                        scopes.pop();
                    }
                    depth -= 1;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// The lines of `text`'s test code: each `#[cfg(test)]` item, from its attribute to the
/// end of its body (comments inside it are test code too).
pub fn test_lines(text: &str) -> Vec<std::ops::RangeInclusive<usize>> {
    let t = tokens(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if t[i].0 == Tok::Hash && is_cfg_test(&t[i..]) {
            let end = skip_item(&t, i);
            out.push(t[i].1..=t[end - 1].1);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// `#[cfg(test)]` at the start of `t`.
fn is_cfg_test(t: &[(Tok, usize)]) -> bool {
    let want = [
        Tok::Hash,
        Tok::Open('['),
        Tok::Ident("cfg".into()),
        Tok::Open('('),
        Tok::Ident("test".into()),
        Tok::Close(')'),
        Tok::Close(']'),
    ];
    t.len() >= want.len() && t.iter().zip(&want).all(|((a, _), b)| a == b)
}

/// The index just past the item an attribute at `i` belongs to: past its `;`, or past
/// the `}` that closes its body.
fn skip_item(t: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < t.len() {
        match t[i].0 {
            Tok::Open(_) => depth += 1,
            Tok::Close(ch) => {
                depth = depth.saturating_sub(1);
                if depth == 0 && ch == '}' {
                    return i + 1;
                }
            }
            Tok::Semi if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// The room a module belongs to: its top-level module (`controller`, `tools`), or for
/// the core's, its top-level core module (`core::selector`).
pub fn room(module: &str) -> String {
    let mut parts = module.split("::");
    let first = parts.next().unwrap_or_default();
    match (first, parts.next()) {
        ("core", Some(second)) => format!("core::{second}"),
        _ => first.to_string(),
    }
}

impl Graph {
    fn next(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (from, to) in self.edges.keys() {
            next.entry(from).or_default().push(to);
            next.entry(to).or_default();
        }
        next
    }

    /// The strongly connected components with more than one module (Tarjan's).
    pub fn circles(&self) -> Vec<BTreeSet<String>> {
        struct State<'a> {
            next: BTreeMap<&'a str, Vec<&'a str>>,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on_stack: BTreeSet<&'a str>,
            out: Vec<BTreeSet<String>>,
        }
        fn visit<'a>(s: &mut State<'a>, v: &'a str) {
            let n = s.index.len();
            s.index.insert(v, n);
            s.low.insert(v, n);
            s.stack.push(v);
            s.on_stack.insert(v);
            for w in s.next[v].clone() {
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let low = s.low[v].min(s.low[w]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w) {
                    let low = s.low[v].min(s.index[w]);
                    s.low.insert(v, low);
                }
            }
            if s.low[v] == s.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = s.stack.pop() {
                    s.on_stack.remove(w);
                    component.insert(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    s.out.push(component);
                }
            }
        }
        let mut s = State {
            next: self.next(),
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            out: Vec::new(),
        };
        let all: Vec<&str> = s.next.keys().copied().collect();
        for v in all {
            if !s.index.contains_key(v) {
                visit(&mut s, v);
            }
        }
        s.out
    }

    /// The shortest path of arrows from `from` to a module `goal` accepts, through
    /// modules `within` accepts.
    pub fn path(
        &self,
        from: &str,
        goal: impl Fn(&str) -> bool,
        within: impl Fn(&str) -> bool,
    ) -> Option<Vec<String>> {
        let next = self.next();
        let mut came: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        while let Some(v) = queue.pop_front() {
            for &w in next.get(v).into_iter().flatten() {
                if came.contains_key(w) || !within(w) {
                    continue;
                }
                came.insert(w, v);
                if goal(w) {
                    let mut path = vec![w.to_string()];
                    let mut at = w;
                    while at != from || path.len() == 1 {
                        at = came[at];
                        path.push(at.to_string());
                        if at == from {
                            break;
                        }
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(w);
            }
        }
        None
    }

    /// `a -> b (file:line) -> c (file:line)`: a path with where each arrow is drawn.
    pub fn show(&self, path: &[String], repo: &Path) -> String {
        let mut out = path[0].clone();
        for pair in path.windows(2) {
            let site = &self.edges[&(pair[0].clone(), pair[1].clone())];
            let file = site.file.strip_prefix(repo).unwrap_or(&site.file);
            out += &format!(" -> {} ({}:{})", pair[1], file.display(), site.line);
        }
        out
    }
}
