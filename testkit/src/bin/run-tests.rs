//! `make test`'s runner: builds the test binaries as `cargo test` would, then runs them
//! several at a time instead of one after another.
//!
//!   run-tests [--jobs N] [CARGO TEST ARGS...]     e.g. run-tests --workspace --all-targets
//!
//! Most of kumaco's test binaries spend their time waiting on a real API server and on
//! kumaco's timers, not on the CPU, so running `--jobs` (default 3, or
//! `KUMACO_TEST_JOBS`) of them at once cuts `make test` to about a third. The longest run
//! first, by the times of the previous run (kept in `<target dir>/test-times.tsv`; in a
//! clean build directory, those of `testkit/test-times.tsv`). Each
//! binary runs as cargo runs it (from its package's directory, with `CARGO`,
//! `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set, no arguments); its whole output is
//! printed when it ends, so outputs never interleave. All run, even after a failure; the
//! exit status is 1 if any failed, and a table of the times ends the output.
//!
//! Then the leftover check: every process a test started must have stopped with its
//! test binary (testkit::process). The runner reaps its descendants' orphans (a child
//! subreaper), so whatever is still running below it once the last binary has ended was
//! left by a test: each is named, killed, and the run fails.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use testkit::process::{STARTED_BY, become_subreaper, kill_leftovers};

/// How long the processes a finished test binary started get to exit before they count
/// as left behind: the kernel kills them as the binary dies, but their exit takes a moment.
const LEFTOVER_GRACE: Duration = Duration::from_secs(10);

/// One test binary `cargo test --no-run` built.
#[derive(Clone, Debug)]
struct TestBinary {
    /// `package/kind/name`, e.g. `kumaco/test/controller`.
    name: String,
    package: String,
    executable: PathBuf,
    manifest_dir: PathBuf,
}

fn main() {
    match run() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("run-tests: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run() -> Result<bool> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut jobs: usize = std::env::var("KUMACO_TEST_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(3);
    if let Some(i) = args.iter().position(|a| a == "--jobs") {
        jobs = args
            .get(i + 1)
            .and_then(|j| j.parse().ok())
            .context("--jobs needs a number")?;
        args.drain(i..=i + 1);
    }
    let jobs = jobs.max(1);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let (target_dir, packages) = metadata(&cargo)?;
    let binaries = build(&cargo, &args, &packages)?;
    let times_file = target_dir.join("test-times.tsv");
    let mut previous = read_times(&times_file);
    if previous.is_empty() {
        // A clean build directory: the times kept in the repository.
        previous = read_times(&Path::new(env!("CARGO_MANIFEST_DIR")).join("test-times.tsv"));
    }

    // Longest first (unknown ones first of all: a new test may be long), so that the last
    // to start are short and the lanes end together.
    let mut queue = binaries;
    queue.sort_by(|a, b| {
        let t = |x: &TestBinary| previous.get(&x.name).copied().unwrap_or(f64::MAX);
        t(b).total_cmp(&t(a)).then_with(|| a.name.cmp(&b.name))
    });
    become_subreaper()?;
    eprintln!("run-tests: {} test binaries, {jobs} at a time", queue.len());
    let started = Instant::now();
    let queue = Arc::new(Mutex::new(queue.into_iter()));
    let results: Arc<Mutex<Vec<(String, Duration, bool)>>> = Arc::default();
    let out = Arc::new(Mutex::new(()));
    let workers: Vec<_> = (0..jobs)
        .map(|_| {
            let (queue, results, out, cargo) =
                (queue.clone(), results.clone(), out.clone(), cargo.clone());
            std::thread::spawn(move || {
                loop {
                    let next = queue.lock().unwrap().next();
                    let Some(binary) = next else { break };
                    let began = Instant::now();
                    let (ok, output) = run_one(&binary, &cargo);
                    let took = began.elapsed();
                    let _guard = out.lock().unwrap();
                    let mut stdout = std::io::stdout().lock();
                    let _ = writeln!(
                        stdout,
                        "==> {} ({:.1} s): {}\n{}",
                        binary.name,
                        took.as_secs_f64(),
                        if ok { "ok" } else { "FAILED" },
                        output
                    );
                    let _ = stdout.flush();
                    results.lock().unwrap().push((binary.name, took, ok));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a runner thread panicked");
    }
    let mut results = std::mem::take(&mut *results.lock().unwrap());
    results.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut table = String::new();
    for (name, took, ok) in &results {
        table.push_str(&format!(
            "{:>7.1} s  {}{}\n",
            took.as_secs_f64(),
            name,
            if *ok { "" } else { "  FAILED" }
        ));
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| !r.2)
        .map(|r| r.0.as_str())
        .collect();
    println!(
        "run-tests: {} binaries in {:.1} s ({jobs} at a time), longest first:\n{table}",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    write_times(&times_file, &results);
    let left = kill_leftovers(LEFTOVER_GRACE);
    if left.is_empty() {
        println!("run-tests: no process left running");
    } else {
        println!(
            "run-tests: FAILED: {} process(es) left running by the tests (killed now):",
            left.len()
        );
        for leftover in &left {
            println!("  {leftover}");
        }
    }
    if failed.is_empty() && left.is_empty() {
        println!("run-tests: all passed");
        Ok(true)
    } else {
        if !failed.is_empty() {
            println!("run-tests: FAILED: {}", failed.join(", "));
        }
        Ok(false)
    }
}

/// `cargo test ARGS --no-run`: the test binaries it built, from its JSON messages (its
/// diagnostics and progress still go to stderr as usual).
fn build(
    cargo: &str,
    args: &[String],
    packages: &BTreeMap<PathBuf, String>,
) -> Result<Vec<TestBinary>> {
    let mut child = Command::new(cargo)
        .arg("test")
        .args(args)
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {cargo} test --no-run"))?;
    let mut binaries = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let Some(executable) = msg["executable"].as_str() else {
            continue;
        };
        let manifest = PathBuf::from(msg["manifest_path"].as_str().unwrap_or_default());
        let package = packages.get(&manifest).cloned().unwrap_or_default();
        let kind = msg["target"]["kind"][0].as_str().unwrap_or("test");
        let target = msg["target"]["name"].as_str().unwrap_or_default();
        binaries.push(TestBinary {
            name: format!("{package}/{kind}/{target}"),
            package,
            executable: executable.into(),
            manifest_dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
        });
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo test --no-run failed ({status}): see its errors above");
    }
    Ok(binaries)
}

/// Runs one test binary as cargo would; whether it passed, and everything it printed.
/// Its output goes to a file, not a pipe: a process it leaves behind holding a pipe would
/// keep the runner waiting for the pipe to close.
fn run_one(binary: &TestBinary, cargo: &str) -> (bool, String) {
    let run = || -> Result<(bool, String)> {
        let log = std::env::temp_dir().join(format!(
            "run-tests-{}-{}.log",
            std::process::id(),
            binary.name.replace('/', "-")
        ));
        let out = std::fs::File::create(&log)?;
        let status = Command::new(&binary.executable)
            .current_dir(&binary.manifest_dir)
            .env("CARGO", cargo)
            .env("CARGO_MANIFEST_DIR", &binary.manifest_dir)
            .env("CARGO_PKG_NAME", &binary.package)
            .env(STARTED_BY, &binary.name)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()?;
        let text = String::from_utf8_lossy(&std::fs::read(&log)?).into_owned();
        let _ = std::fs::remove_file(&log);
        Ok((status.success(), text))
    };
    run().unwrap_or_else(|e| {
        let what = format!("cannot run {}: {e:#}", binary.executable.display());
        (false, what)
    })
}

/// The target directory, and the workspace's package names by manifest path.
fn metadata(cargo: &str) -> Result<(PathBuf, BTreeMap<PathBuf, String>)> {
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version=1"])
        .output()
        .context("running cargo metadata")?;
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")?;
    let packages = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                PathBuf::from(p["manifest_path"].as_str()?),
                p["name"].as_str()?.to_string(),
            ))
        })
        .collect();
    let dir = PathBuf::from(meta["target_directory"].as_str().unwrap_or("target"));
    Ok((dir, packages))
}

fn read_times(path: &Path) -> BTreeMap<String, f64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (secs, name) = l.split_once('\t')?;
            Some((name.to_string(), secs.parse().ok()?))
        })
        .collect()
}

fn write_times(path: &Path, results: &[(String, Duration, bool)]) {
    let text: String = results
        .iter()
        .map(|(name, took, _)| format!("{:.1}\t{name}\n", took.as_secs_f64()))
        .collect();
    let _ = std::fs::write(path, text);
}
