//! Prerequisites first (hack/check-prereqs.sh): a machine that lacks a program a make
//! target needs is told so in seconds, before anything is built, in one message naming
//! the program and the command that installs it.
//!
//! Each test runs the check with a PATH of its own: a directory of stand-ins for the
//! programs the machine is meant to have (they print a version and record that they ran),
//! and links to make and the few programs it needs (bash, sed, head). Files the check
//! looks for (libfaketime, the CNI plugins, libc.a) are the machine's: a test asserts
//! only about the programs it left out or put in.

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use testkit::files::repo;

/// Programs whose stand-ins print what the check reads.
const STUBS: &[(&str, &str)] = &[
    ("cargo", "echo 'cargo 1.95.0'"),
    ("rustc", "echo 'rustc 1.95.0 (0000000 2026-01-01)'"),
    ("go", "echo 'go1.26.0'"),
    ("cc", ""),
    ("readelf", ""),
    ("strip", ""),
    ("podman", ""),
    ("runc", ""),
    ("iptables", ""),
    ("ip", ""),
    ("script", ""),
];

/// A directory to put on PATH with stand-ins for `STUBS` except `without`, and links to
/// the real bash, env, sed, head and make. A stand-in that runs touches `ran-<name>` in `dir`.
fn path_dir(dir: &Path, without: &[&str]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in STUBS.iter().filter(|(n, _)| !without.contains(n)) {
        let file = bin.join(name);
        let ran = dir.join(format!("ran-{name}"));
        std::fs::write(
            &file,
            format!(
                "#!/bin/bash\ncase \"$*\" in\n  *version*|env*) {body} ;;\n  *) touch '{}' ;;\nesac\n",
                ran.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for real in ["bash", "env", "sed", "head", "make"] {
        let found = ["/bin", "/usr/bin"]
            .iter()
            .map(|d| Path::new(d).join(real))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{real} not found in /bin or /usr/bin"));
        symlink(found, bin.join(real)).unwrap();
    }
    bin
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kumaco-prereqs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(program: &str, args: &[&str], path: &Path, dir: &Path) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new(program)
        .args(args)
        .current_dir(repo())
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    (out, started.elapsed())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn make_test_without_podman_stops_at_once_naming_podman_and_its_install() {
    let dir = scratch("make-test");
    // No apt-get on this PATH: the message, whoever runs it.
    let path = path_dir(&dir, &["podman"]);
    let (out, took) = run(make(), &["test"], &path, &dir);
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "make test succeeded without podman: {err}"
    );
    assert!(
        took < Duration::from_secs(10),
        "make test took {took:?} to fail"
    );
    assert!(
        err.contains("  - podman:") && err.contains("apt-get install podman"),
        "the message does not name podman and its install command:\n{err}"
    );
    // One message: every missing piece in one list, under one heading.
    assert_eq!(err.matches("Missing prerequisites").count(), 1, "{err}");
    // Present programs are not named; nothing was built or run.
    for present in ["cargo", "go (Go", "runc:", "readelf"] {
        assert!(
            !err.contains(&format!("  - {present}")),
            "{present} named:\n{err}"
        );
    }
    assert!(!dir.join("ran-cargo").exists(), "cargo ran: {err}");
    assert!(!dir.join("ran-go").exists(), "go ran: {err}");
    assert!(!dir.join("target").exists(), "something was built: {err}");
    assert!(!err.contains("Caused by"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in `apt-get` in `bin`: it records each call's arguments in `dir/apt-get.log`
/// and, asked to install, puts a stand-in for each package that is a program in `bin`.
fn stub_apt_get(bin: &Path, dir: &Path) {
    let script = r#"#!/bin/bash
echo "$*" >> 'LOG'
if [ "$1" = install ]; then
  for p in "${@:2}"; do
    case "$p" in
      -*) ;;
      *) printf '#!/bin/bash\n' > 'BIN'/"$p" && /bin/chmod +x 'BIN'/"$p" ;;
    esac
  done
fi
"#
    .replace("LOG", &dir.join("apt-get.log").display().to_string())
    .replace("BIN", &bin.display().to_string());
    let file = bin.join("apt-get");
    std::fs::write(&file, script).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn make() -> &'static str {
    ["/usr/bin/make", "/bin/make"]
        .into_iter()
        .find(|m| Path::new(m).exists())
        .expect("make")
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// The README's `make test` on a fresh Debian machine, as root (CI, a container): what is
/// missing and apt installs, make installs, says so, and goes on. `make -n`: the recipes
/// are printed, not run, so that what "goes on" means is visible and nothing is built.
#[test]
fn make_test_as_root_with_apt_installs_what_it_lacks_says_so_and_goes_on() {
    if !running_as_root() {
        eprintln!("skipped: make installs packages only as root, and this test is not root");
        return;
    }
    let dir = scratch("install");
    let path = path_dir(&dir, &["podman"]);
    stub_apt_get(&path, &dir);
    let (out, _) = run(make(), &["-n", "test"], &path, &dir);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("Installing the Debian packages test needs: apt-get install podman"),
        "make did not say what it installs:\n{err}"
    );
    let apt = std::fs::read_to_string(dir.join("apt-get.log")).unwrap();
    assert_eq!(apt, "update -qq\ninstall -y -qq podman\n");
    assert!(!err.contains("Missing prerequisites"), "{err}");
    // It went on to the recipes: the image, then the tests.
    let recipes = String::from_utf8_lossy(&out.stdout);
    for step in [
        "hack/build-static.sh",
        "run-tests --workspace --all-targets",
    ] {
        assert!(recipes.contains(step), "{step} not reached:\n{recipes}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Not root: the same machine gets the message and its apt line, and apt-get is not run.
#[test]
fn make_test_not_as_root_names_the_packages_and_runs_no_apt_get() {
    if !running_as_root() {
        eprintln!("skipped: this test drops to user nobody with setpriv, which needs root");
        return;
    }
    let dir = scratch("no-root");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = path_dir(&dir, &["podman"]);
    stub_apt_get(&path, &dir);
    let nobody = [
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        make(),
        "test",
    ];
    let (out, took) = run("/usr/bin/setpriv", &nobody, &path, &dir);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(took < Duration::from_secs(10), "took {took:?} to fail");
    assert!(
        err.contains("  - podman:") && err.contains("apt-get install podman"),
        "{err}"
    );
    assert!(err.contains("when run as root"), "{err}");
    assert!(!dir.join("apt-get.log").exists(), "apt-get ran: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_building_make_target_is_checked_and_demo_needs_only_rust_go_and_make() {
    let dir = scratch("targets");
    // Nothing at all on PATH but bash and friends.
    let path = path_dir(&dir, &STUBS.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    let script = repo().join("hack/check-prereqs.sh");
    let bash = path.join("bash");
    let check = |target: &str| {
        let (out, _) = run(
            bash.to_str().unwrap(),
            &[script.to_str().unwrap(), target],
            &path,
            &dir,
        );
        (out.status.success(), stderr(&out))
    };
    let (ok, demo) = check("demo");
    assert!(!ok, "{demo}");
    for needed in [
        "  - cargo",
        "  - go (Go >= 1.26)",
        "https://rustup.rs",
        "https://go.dev/dl",
    ] {
        assert!(demo.contains(needed), "demo: {needed} not named:\n{demo}");
    }
    for not_needed in ["podman", "runc", "root", "faketime", "iptables"] {
        assert!(
            !demo.contains(not_needed),
            "demo needs no {not_needed}:\n{demo}"
        );
    }
    // What docs/development.md says `make test` needs beyond Rust, Go and make, each with its
    // install command (the files are the machine's, so only the programs are certain).
    let (ok, test) = check("test");
    assert!(!ok, "{test}");
    for (what, install) in [
        ("podman", "apt-get install podman"),
        ("runc", "apt-get install runc"),
        ("readelf", "apt-get install binutils"),
        ("iptables", "apt-get install iptables"),
        ("ip (iproute2)", "apt-get install iproute2"),
        ("script (bsdutils)", "apt-get install bsdutils"),
        ("cc", "apt-get install gcc"),
    ] {
        assert!(
            test.contains(&format!("  - {what}")) && test.contains(install),
            "test: {what} / {install} not named:\n{test}"
        );
    }
    // `make dist` builds the other architecture and runs it under emulation.
    let (ok, dist) = check("dist");
    assert!(!ok, "{dist}");
    for install in [
        "apt-get install gcc-aarch64-linux-gnu",
        "apt-get install qemu-user-static",
    ] {
        assert!(
            dist.contains(install) || !cfg!(target_arch = "x86_64"),
            "dist: {install} not named:\n{dist}"
        );
    }
    let development = testkit::files::read_repo("docs/development.md");
    for package in [
        "podman",
        "runc",
        "binutils",
        "faketime",
        "iptables",
        "iproute2",
        "containernetworking-plugins",
        "libc6-dev",
        "bsdutils",
        "ca-certificates",
        "root",
    ] {
        assert!(
            development.contains(&format!("`{package}`")),
            "docs/development.md does not say `make test` needs `{package}`"
        );
    }

    // The Makefile checks every target that builds something, before its recipe.
    let makefile = testkit::files::read_repo("Makefile");
    let checked = makefile
        .lines()
        .find(|l| l.starts_with("CHECKED_GOALS :="))
        .expect("Makefile: CHECKED_GOALS");
    for target in [
        "demo",
        "demo-node",
        "test",
        "lint",
        "bench",
        "smoke",
        "chaos",
        "diff-long",
        "testenv",
        "image",
        "dist",
    ] {
        assert!(
            checked.split([' ', ',', '(']).any(|w| w == target),
            "Makefile: {target} is not checked: {checked}"
        );
        let (_, msg) = check(target);
        assert!(!msg.contains("unknown target"), "{target}: {msg}");
    }
    assert!(
        testkit::files::read_repo(".ci/run").contains("hack/check-prereqs.sh --install ci"),
        ".ci/run does not check its prerequisites"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
