//! The repository's files, for the tests that read or copy what it ships (manifests, the
//! chart, the docs, the dashboards and alerts).

use std::path::Path;

/// The repository's root (this crate's parent directory).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit is a directory of the repository")
}

/// The text of `path`; panics naming the file if it cannot be read.
pub fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The text of `relative` under the repository's root.
pub fn read_repo(relative: impl AsRef<Path>) -> String {
    read(repo().join(relative))
}

/// `cp -r from to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
