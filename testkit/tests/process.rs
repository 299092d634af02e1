//! testkit::process: a program a test starts stops when its owner is dropped, outlives
//! the thread that started it, and stops when the test process dies without dropping it;
//! `make test`'s leftover check names what a test binary left running.
//!
//! The last two need a test process that dies, or that reaps orphans: this binary runs
//! itself again (`--exact` one of the `#[ignore]`d helpers, with [`ROLE`] set) for them.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::process::{Owned, become_subreaper, kill_leftovers};

/// Set for a helper run of this binary: what it is to do.
const ROLE: &str = "TESTKIT_PROCESS_TEST_ROLE";
/// What a helper prints before a pid it reports.
const PID: &str = "reported pid ";

/// A program that runs until killed.
fn sleeper() -> Command {
    let mut command = Command::new("sleep");
    command.arg("1000").stdin(Stdio::null());
    command
}

/// Whether `pid` is a live process (not gone, and not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = &stat[stat.rfind(')')? + 1..];
            Some(after.split_whitespace().next()? != "Z")
        })
        .unwrap_or(false)
}

/// Waits up to `within` for `pid` to be gone; whether it went.
fn gone_within(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Starts helper `test` of this binary with `ROLE=role` (owned: a failing test kills
/// it); the pids on its stdout's `reported pid N` lines, once it says `done`.
fn helper(test: &str, role: &str) -> (Owned, Vec<u32>) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            test,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut helper = Owned::spawn(test, command, None).unwrap();
    let mut lines = BufReader::new(helper.take_stdout().unwrap()).lines();
    let mut pids = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line == "done" {
            break;
        }
        // The harness's "test NAME ... " may come first on the line.
        if let Some((_, pid)) = line.split_once(PID) {
            pids.push(pid.parse().unwrap());
        }
    }
    // The rest (the harness's summary) is read, not refused: a closed pipe fails it.
    std::thread::spawn(move || lines.for_each(drop));
    (helper, pids)
}

/// An owned bash that starts `sleep` in the background, then runs `then`: it, and the
/// sleep's pid.
fn bash_with_a_child(then: &str) -> (Owned, u32) {
    let mut command = Command::new("bash");
    command
        .args(["-c", &format!("sleep 1000 & echo $!; {then}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let mut owned = Owned::spawn("bash", command, None).unwrap();
    let mut line = String::new();
    BufReader::new(owned.take_stdout().unwrap())
        .read_line(&mut line)
        .unwrap();
    (owned, line.trim().parse().unwrap())
}

#[test]
fn a_program_and_what_it_started_stop_when_the_owner_is_dropped() {
    let (owned, grandchild) = bash_with_a_child("wait");
    let bash = owned.id();
    assert!(alive(bash) && alive(grandchild));
    drop(owned);
    assert!(!alive(bash), "bash outlived its owner");
    assert!(
        gone_within(grandchild, Duration::from_secs(5)),
        "what bash started outlived its owner"
    );
}

#[test]
fn what_a_program_started_stops_when_it_ends_by_itself() {
    let (mut owned, grandchild) = bash_with_a_child("exit 0");
    let status = owned.exit_within_blocking(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(gone_within(grandchild, Duration::from_secs(5)));
}

#[test]
fn a_program_outlives_the_thread_that_started_it() {
    // As `ApiServer::shared()` is started by whichever test comes first, and serves the
    // tests after it.
    let owned = std::thread::spawn(|| Owned::spawn("sleep", sleeper(), None).unwrap())
        .join()
        .unwrap();
    let pid = owned.id();
    // Long enough for a signal sent as the thread ended to have been delivered.
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        assert!(
            alive(pid),
            "the program died with the thread that started it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(owned);
    assert!(!alive(pid));
}

#[test]
fn a_program_stops_when_the_test_process_is_killed() {
    let (mut helper, pids) = helper("helper_starts_programs_and_waits", "die");
    let [shared, plain] = pids[..] else {
        panic!("the helper reported {pids:?}");
    };
    assert!(alive(shared) && alive(plain));
    // SIGKILL: no destructor runs, nothing of the test process gets a say.
    helper.kill();
    for (what, pid) in [("a static's", shared), ("a test's", plain)] {
        assert!(
            gone_within(pid, Duration::from_secs(5)),
            "{what} program (pid {pid}) outlived the killed test process"
        );
    }
}

/// With `ROLE=die`: starts a program into a static (never dropped, as a shared API
/// server) and one it holds, prints their pids and waits to be killed.
#[test]
#[ignore = "a helper of a_program_stops_when_the_test_process_is_killed"]
fn helper_starts_programs_and_waits() {
    if std::env::var(ROLE).as_deref() != Ok("die") {
        return;
    }
    static SHARED: std::sync::OnceLock<Owned> = std::sync::OnceLock::new();
    let shared = std::thread::spawn(|| {
        SHARED
            .get_or_init(|| Owned::spawn("sleep", sleeper(), None).unwrap())
            .id()
    })
    .join()
    .unwrap();
    let plain = Owned::spawn("sleep", sleeper(), None).unwrap();
    println!("{PID}{shared}\n{PID}{}\ndone", plain.id());
    std::thread::sleep(Duration::from_secs(600));
}

#[test]
fn the_leftover_check_names_an_orphan_and_kills_it() {
    let (mut helper, pids) = helper("helper_leaves_an_orphan_and_checks", "orphan");
    let status = helper.exit_within_blocking(Duration::from_secs(60));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let [orphan, named] = pids[..] else {
        panic!("the helper reported {pids:?}");
    };
    assert_eq!(named, orphan, "the check named another process");
    assert!(!alive(orphan), "the check left the orphan running");
}

/// With `ROLE=orphan`: as `make test`'s runner, a subreaper; a child that leaves an
/// orphan behind, not through testkit; the check, which must name it. Prints the orphan's
/// pid, then the pid of each process the check named.
#[test]
#[ignore = "a helper of the_leftover_check_names_an_orphan_and_kills_it"]
fn helper_leaves_an_orphan_and_checks() {
    if std::env::var(ROLE).as_deref() != Ok("orphan") {
        return;
    }
    become_subreaper().unwrap();
    assert_eq!(kill_leftovers(Duration::ZERO), vec![], "a clean start");
    let out = Command::new("bash")
        .args(["-c", "sleep 1000 >/dev/null 2>&1 & echo $!"])
        .output()
        .unwrap();
    let orphan = String::from_utf8(out.stdout).unwrap();
    println!("{PID}{}", orphan.trim());
    for leftover in kill_leftovers(Duration::from_millis(200)) {
        eprintln!("left: {leftover}");
        assert!(leftover.command.starts_with("sleep 1000"), "{leftover}");
        println!("{PID}{}", leftover.pid);
    }
    println!("done");
}
