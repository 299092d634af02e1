//! The pure core knows nothing of HTTP, tokio, kube or k8s-openapi (docs/design.md): the
//! whole pass is a plain function, testable without a runtime or an API server. A `use`
//! of one of them in a core module fails here, naming the file.

const CORE: &[(&str, &str)] = &[
    ("src/pass.rs", include_str!("../src/pass.rs")),
    ("src/announce.rs", include_str!("../src/announce.rs")),
    ("src/node_events.rs", include_str!("../src/node_events.rs")),
    ("src/decision.rs", include_str!("../src/decision.rs")),
    ("src/in_progress.rs", include_str!("../src/in_progress.rs")),
    ("src/conditions.rs", include_str!("../src/conditions.rs")),
    ("src/window.rs", include_str!("../src/window.rs")),
    ("src/fingerprint.rs", include_str!("../src/fingerprint.rs")),
    ("src/schedule.rs", include_str!("../src/schedule.rs")),
    ("src/duration.rs", include_str!("../src/duration.rs")),
    ("src/selector.rs", include_str!("../src/selector.rs")),
];

const SHELL_CRATES: &[&str] = &["kube", "k8s_openapi", "tokio", "axum", "futures"];

#[test]
fn the_core_imports_no_io_crate() {
    let mut found = Vec::new();
    for (path, source) in CORE {
        for (n, line) in source.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for krate in SHELL_CRATES {
                if code.contains(&format!("{krate}::")) {
                    found.push(format!("{path}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "I/O crates in the core:\n{}",
        found.join("\n")
    );
}
