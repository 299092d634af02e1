//! What Cargo cannot check about the layout (docs/design.md):
//!
//! - the core crate (`core/`, kumaco-core) stays pure: Cargo keeps the core from
//!   importing the shell, but not from gaining an I/O dependency; its whole dependency
//!   tree is checked here;
//! - docs/design.md's module map names every module of the core and the shell, and both
//!   crates' `lib.rs` maps name theirs;
//! - no document links to a file outside the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates that do I/O or speak HTTP/Kubernetes: none may be in the core's tree.
const SHELL_CRATES: &[&str] = &[
    "kube",
    "kube-client",
    "kube-runtime",
    "k8s-openapi",
    "tokio",
    "hyper",
    "axum",
    "futures",
    "tracing",
    "serde_json",
    "prometheus-client",
    "rustls",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_core_depends_on_no_io_crate() {
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
            "none",
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
    let crates: BTreeSet<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        crates.contains("kumaco-core") && crates.contains("jiff"),
        "{tree}"
    );
    let found: Vec<&&str> = SHELL_CRATES
        .iter()
        .filter(|c| crates.contains(**c))
        .collect();
    assert!(
        found.is_empty(),
        "I/O crates in the core's dependency tree: {found:?}\n{tree}"
    );
}

/// The modules of a crate: every `pub mod` / `mod` declared in `lib.rs` and in the
/// `mod.rs` files below it, as paths (`controller::watch`).
fn modules(src: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, file: &Path, prefix: &str, out: &mut BTreeSet<String>) {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            let line = line.trim();
            let Some(name) = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))
                .and_then(|r| r.strip_suffix(';'))
            else {
                continue;
            };
            if name == "tests" {
                continue;
            }
            let path = format!("{prefix}{name}");
            out.insert(path.clone());
            // `name/mod.rs`, or `name.rs` with its submodules in `name/`.
            let sub_dir = dir.join(name);
            for file in [sub_dir.join("mod.rs"), dir.join(format!("{name}.rs"))] {
                if file.exists() {
                    walk(&sub_dir, &file, &format!("{path}::"), out);
                    break;
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(src, &src.join("lib.rs"), "", &mut out);
    out
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
