//! Builds (once per machine) the Go test programs, helm, kubectl, promtool, prometheus,
//! alertmanager and amtool,
//! and the real node's kubelet, controller-manager, scheduler, containerd and pause image,
//! and prints where they are cached. `testenv-path helm` builds helm only and prints its
//! path alone.

fn main() {
    // One line naming what failed and why (e.g. podman missing for the pause image), not
    // anyhow's "Caused by:" list and a backtrace.
    if let Err(e) = run() {
        eprintln!("testenv-path: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    use testkit::gobuild::{Program, binary};
    // `testenv-path helm`: only helm's path (`make dist` packages the chart with it).
    if std::env::args().nth(1).as_deref() == Some("helm") {
        println!("{}", testkit::gobuild::helm()?.display());
        return Ok(());
    }
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
        ("Kubectl", testkit::gobuild::kubectl),
        ("Promtool", testkit::gobuild::promtool),
        ("Prometheus", testkit::gobuild::prometheus),
        ("Alertmanager", testkit::gobuild::alertmanager),
        ("Amtool", testkit::gobuild::amtool),
    ] {
        let started = std::time::Instant::now();
        let path = build()?;
        println!(
            "{name}: {} ({:.1}s)",
            path.display(),
            started.elapsed().as_secs_f64()
        );
    }
    // The real node (testkit::realcluster, tests/real_node.rs).
    let started = std::time::Instant::now();
    let node = testkit::nodebins::kube_node()?;
    println!(
        "KubeNode: {} ({:.1}s)",
        node.kubelet.parent().unwrap_or(&node.kubelet).display(),
        started.elapsed().as_secs_f64()
    );
    let started = std::time::Instant::now();
    let containerd = testkit::nodebins::containerd()?;
    println!(
        "Containerd: {} ({:.1}s)",
        containerd.dir().display(),
        started.elapsed().as_secs_f64()
    );
    let started = std::time::Instant::now();
    let pause = testkit::nodebins::pause_image()?;
    println!(
        "PauseImage: {} ({:.1}s)",
        pause.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
