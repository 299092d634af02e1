//! Builds (once per machine) the Go test programs, helm, kustomize, kubectl and promtool, and
//! prints where they are cached.

fn main() -> anyhow::Result<()> {
    use testkit::gobuild::{Program, binary};
    for program in [Program::Oracle, Program::ApiServer] {
        let started = std::time::Instant::now();
        let path = binary(program)?;
        println!(
            "{program:?}: {} ({:.1}s)",
            path.display(),
            started.elapsed().as_secs_f64()
        );
    }
    for (name, build) in [
        (
            "Helm",
            testkit::gobuild::helm as fn() -> anyhow::Result<std::path::PathBuf>,
        ),
        ("Kustomize", testkit::gobuild::kustomize),
        ("Kubectl", testkit::gobuild::kubectl),
        ("Promtool", testkit::gobuild::promtool),
    ] {
        let started = std::time::Instant::now();
        let path = build()?;
        println!(
            "{name}: {} ({:.1}s)",
            path.display(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
