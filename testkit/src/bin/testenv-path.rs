//! Builds (once per machine) the Go test programs and helm, and prints where they are
//! cached.

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
    let started = std::time::Instant::now();
    let helm = testkit::gobuild::helm()?;
    println!(
        "Helm: {} ({:.1}s)",
        helm.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
