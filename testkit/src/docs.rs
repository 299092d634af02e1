//! The shell blocks the docs promise work (`<!-- tested: NAME -->` before a ```sh block in
//! README.md, docs/install.md or docs/uninstall.md), as the deploy tests run them verbatim.

use std::collections::BTreeMap;

use crate::files::repo;

/// The documents with marked blocks (tests/docs.rs checks that no other has one).
pub const DOCS: [&str; 3] = ["README.md", "docs/install.md", "docs/uninstall.md"];
/// What marks a block: `<!-- tested: NAME (where) -->`.
pub const MARKER: &str = "<!-- tested: ";

/// Every marked block of the docs, by name, its lines unindented (a block in a list item
/// is indented).
pub fn marked_blocks() -> BTreeMap<String, String> {
    let mut blocks = BTreeMap::new();
    for doc in DOCS {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let Some(rest) = line.trim().strip_prefix(MARKER) else {
                continue;
            };
            let name = rest
                .split_whitespace()
                .next()
                .unwrap_or_else(|| panic!("{doc}: a marker without a name: {line}"));
            let fence = lines.next().unwrap_or_default();
            assert_eq!(
                fence.trim(),
                "```sh",
                "{doc}: {name}: the marker must precede a ```sh block"
            );
            let indent = fence.len() - fence.trim_start().len();
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim() != "```")
                .map(|l| l.get(indent..).unwrap_or(""))
                .collect();
            let old = blocks.insert(name.to_string(), body.join("\n"));
            assert!(old.is_none(), "{doc}: two blocks named {name}");
        }
    }
    blocks
}

/// The block marked `name`.
pub fn block(name: &str) -> String {
    marked_blocks()
        .remove(name)
        .unwrap_or_else(|| panic!("no block marked `{MARKER}{name} -->` in {DOCS:?}"))
}

/// The commands of a block as the shell reads them (continued lines joined), without
/// those marked `# (needs ...)`, except those whose need is one of `have` (a real node
/// has `a kubelet`).
pub fn runnable(script: &str, have: &[&str]) -> String {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        current.push_str(line);
        current.push('\n');
        if !line.ends_with('\\') {
            let needs = current.contains("# (needs ")
                && !have
                    .iter()
                    .any(|h| current.contains(&format!("# (needs {h})")));
            if !needs {
                commands.push(std::mem::take(&mut current));
            }
            current.clear();
        }
    }
    commands.concat()
}
