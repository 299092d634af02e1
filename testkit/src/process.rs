//! The one owner of every program a test or harness starts and leaves running (the API
//! server, the controller-manager, kumaco, Alertmanager, Prometheus, the real node's
//! programs, the oracle): [`Owned`].
//!
//! An owned program stops when its owner is dropped, whether the test passed or panicked:
//! SIGKILL to its process group (each gets a group of its own, so what it started stops
//! with it), then it is reaped; what it started is killed too when it ends by itself. It
//! also stops when the process that started it dies without dropping it (SIGKILL, an
//! abort, or a static that is never dropped at exit): the kernel sends it SIGKILL then
//! (`PR_SET_PDEATHSIG`). The kernel sends that signal when the *thread* that forked the
//! program ends, not the process, so every program is forked on one thread that lives as
//! long as the process (`on_spawner`): a program shared by a binary's tests outlives the
//! test that happened to start it.
//!
//! `make test`'s runner (`run-tests`) checks the result: whatever a test binary leaves
//! running is named there and fails the run ([`kill_leftovers`]).

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{
    Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Output, Stdio,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{OnceLock, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, waitid};

/// How often a wait for an exit looks again.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// A running program, stopped when dropped (see the module docs).
pub struct Owned {
    name: String,
    child: Child,
    exited: Option<ExitStatus>,
    log: Option<PathBuf>,
}

impl Owned {
    /// Starts `command` as `name` (for messages). With `log`, its stdout and stderr are
    /// appended to that file (created if need be), and [`Owned::log_tail`] reads it.
    pub fn spawn(name: &str, mut command: Command, log: Option<&Path>) -> Result<Owned> {
        if let Some(log) = log {
            let out = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .with_context(|| format!("opening {}", log.display()))?;
            command.stdout(out.try_clone()?).stderr(out);
        }
        let parent = std::process::id();
        command.process_group(0);
        // SAFETY: the hook runs between fork and exec, and only makes system calls
        // (prctl, getppid) that allocate nothing and take no lock.
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                // The starter may have died before the prctl: nothing would stop us then.
                if Pid::as_raw(rustix::process::getppid()) != parent as i32 {
                    return Err(rustix::io::Errno::SRCH.into());
                }
                Ok(())
            });
        }
        let program = command.get_program().to_string_lossy().into_owned();
        let child = on_spawner(move || command.spawn())
            .with_context(|| format!("starting {name} ({program})"))?;
        Ok(Owned {
            name: name.to_string(),
            child,
            exited: None,
            log: log.map(Path::to_path_buf),
        })
    }

    /// Its process id (also its process group's).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its stdin, if piped (once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its stdout, if piped (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Its stderr, if piped (once).
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// How it ended, once it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() && self.has_ended() {
            self.reap();
        }
        self.exited
    }

    /// Whether it has ended; it is left unreaped, its id (and its group's) still its own.
    fn has_ended(&self) -> bool {
        let ended = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        matches!(waitid(WaitId::Pid(self.pid()), ended), Ok(Some(_)))
    }

    /// SIGKILL to its group, then reaps it. In that order: until it is reaped no other
    /// process can take its group's id, so the signal reaches only what it started.
    fn reap(&mut self) {
        let _ = rustix::process::kill_process_group(self.pid(), Signal::KILL);
        self.exited = self.child.wait().ok();
    }

    /// Sends `signal` to the program itself (not its group), if it is still running.
    pub fn signal(&mut self, signal: Signal) -> Result<()> {
        if self.exited().is_none() {
            rustix::process::kill_process(self.pid(), signal)
                .with_context(|| format!("signalling {}", self.name))?;
        }
        Ok(())
    }

    /// Waits for it to end by itself, for at most `timeout`, without blocking the
    /// runtime; `None` if it is still running then.
    pub async fn exit_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    /// [`Owned::exit_within`], blocking this thread.
    pub fn exit_within_blocking(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while self.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(EXIT_POLL);
        }
        self.exited()
    }

    /// SIGTERM, then up to `grace` to exit (blocking this thread), then SIGKILL to its
    /// group: how it ended.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let _ = self.signal(Signal::TERM);
        self.exit_within_blocking(grace);
        self.kill()
    }

    /// SIGKILL to its process group (it and what it started), and reaps it: how it ended.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.reap();
        }
        self.exited
    }

    /// The file its output goes to, if any.
    pub fn log(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// The last `lines` lines of its log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        self.log
            .as_deref()
            .map(|l| tail(l, lines))
            .unwrap_or_default()
    }

    /// A `kB` field of its `/proc/<pid>/status`, such as `VmHWM` (peak resident set).
    pub fn status_kib(&self, field: &str) -> Result<u64> {
        status_kib(self.id(), field)
    }

    /// Its CPU so far (user + system), in seconds.
    pub fn cpu_seconds(&self) -> Result<f64> {
        cpu_seconds(self.id())
    }

    fn pid(&self) -> Pid {
        Pid::from_child(&self.child)
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `command` to its end (stdin empty), owned meanwhile: killed when `timeout` passes
/// or the caller gives up. Its output, or an error naming `name` if it did not end in time.
pub async fn output(name: &str, mut command: Command, timeout: Duration) -> Result<Output> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut owned = Owned::spawn(name, command, None)?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = read(owned.take_stdout().map(|p| Box::new(p) as _));
    let stderr = read(owned.take_stderr().map(|p| Box::new(p) as _));
    let Some(status) = owned.exit_within(timeout).await else {
        bail!("{name} did not end within {timeout:?}");
    };
    let joined = |reader: std::thread::JoinHandle<Vec<u8>>| reader.join().unwrap_or_default();
    Ok(Output {
        status,
        stdout: joined(stdout),
        stderr: joined(stderr),
    })
}

/// Runs `job` on the spawner thread, which lives as long as the process, and returns
/// what it returns.
fn on_spawner<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> T {
    type Job = Box<dyn FnOnce() + Send>;
    static SPAWNER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, next) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("testkit-spawner".into())
            .spawn(move || {
                for job in next {
                    job();
                }
            })
            .expect("starting testkit's spawner thread");
        jobs
    });
    let (answer, answered) = mpsc::sync_channel(1);
    spawner
        .send(Box::new(move || {
            let _ = answer.send(job());
        }))
        .expect("the spawner thread lives as long as the process");
    answered.recv().expect("the spawner thread answers")
}

/// A path of this process's own under `<temp dir>/kumaco-tests`, for a log or a program's
/// directory: `<stem>-<pid>-<n><extension>`, `n` counting this process's calls. Anything
/// already there was left by an earlier process with the same id (ids are reused, on a
/// machine that has run many tests soon), and is removed: a log appended to it would
/// begin with another run's lines.
pub fn scratch_path(stem: &str, extension: &str) -> Result<PathBuf> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join("kumaco-tests");
    std::fs::create_dir_all(&dir)?;
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let path = dir.join(format!("{stem}-{}-{n}{extension}", std::process::id()));
    let stale = if path.is_dir() {
        std::fs::remove_dir_all(&path)
    } else {
        std::fs::remove_file(&path)
    };
    match stale {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(path),
    }
}

/// The last `lines` lines of the file at `path` ("" if it cannot be read).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A `kB` field of `/proc/<pid>/status`: `VmHWM` (peak resident set), `VmRSS` (now).
pub fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// A process's utime + stime so far, in seconds, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after its ')' are plain.
    // utime and stime are fields 14 and 15, the 12th and 13th after the ')'.
    let rest = &stat[stat.rfind(')').context("malformed /proc/<pid>/stat")? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / rustix::param::clock_ticks_per_second() as f64)
}

/// The environment variable `run-tests` sets to the name of the test binary it runs:
/// every process the binary starts inherits it, so a leftover says whose it is.
pub const STARTED_BY: &str = "TESTKIT_STARTED_BY";

/// A process still running below another (see [`kill_leftovers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leftover {
    pub pid: u32,
    /// Where its executable lives (`/proc/<pid>/exe`).
    pub exe: String,
    /// Its command line, space-separated.
    pub command: String,
    /// Its [`STARTED_BY`], if it has one.
    pub started_by: Option<String>,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} {}: {}", self.pid, self.exe, self.command)?;
        if let Some(binary) = &self.started_by {
            write!(f, " (started under {binary})")?;
        }
        Ok(())
    }
}

/// Every live process descended from `root` (zombies, which are gone but for their exit
/// status, are not), from `/proc`.
fn descendants(root: u32) -> Vec<Leftover> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the ')' closing the command name: state, then the parent's pid.
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = after.split_whitespace();
        let (Some(state), Some(ppid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if state != "Z"
            && let Ok(ppid) = ppid.parse::<u32>()
        {
            parents.push((pid, ppid));
        }
    }
    let mut below = vec![root];
    let mut found = Vec::new();
    while let Some(parent) = below.pop() {
        for &(pid, _) in parents.iter().filter(|(_, ppid)| *ppid == parent) {
            below.push(pid);
            found.push(describe(pid));
        }
    }
    found.sort_by_key(|l| l.pid);
    found
}

fn describe(pid: u32) -> Leftover {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let exe = std::fs::read_link(proc.join("exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    let command = std::fs::read(proc.join("cmdline"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let started_by = std::fs::read(proc.join("environ"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .find_map(|v| {
            let v = String::from_utf8_lossy(v);
            Some(v.strip_prefix(STARTED_BY)?.strip_prefix('=')?.to_string())
        });
    Leftover {
        pid,
        exe,
        command,
        started_by,
    }
}

/// Makes this process the reaper of its descendants' orphans
/// (`PR_SET_CHILD_SUBREAPER`): a program whose starter died without stopping it becomes
/// this process's child instead of init's, and [`kill_leftovers`] finds it.
pub fn become_subreaper() -> Result<()> {
    let me = Pid::from_raw(std::process::id() as i32).context("this process's id")?;
    rustix::process::set_child_subreaper(Some(me)).context("PR_SET_CHILD_SUBREAPER")
}

/// Once everything this process started should have stopped: what is still running
/// below it, after up to `grace` for it to go (a program killed as its starter died takes
/// a moment to exit). Each is then killed, and every ended child reaped: call it only once
/// nothing this process started is still wanted. With [`become_subreaper`] first, so
/// that the orphans are found too.
pub fn kill_leftovers(grace: Duration) -> Vec<Leftover> {
    let deadline = Instant::now() + grace;
    let left = loop {
        // Orphans that ended meanwhile are this process's zombies now.
        while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
        let left = descendants(std::process::id());
        if left.is_empty() || Instant::now() >= deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for leftover in &left {
        if let Some(pid) = Pid::from_raw(leftover.pid as i32) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
    let reaped_by = Instant::now() + grace;
    loop {
        match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
            Ok(Some(_)) => {}
            Ok(None) if Instant::now() < reaped_by => std::thread::sleep(EXIT_POLL),
            // No child left (ECHILD), or one that outlasts a SIGKILL and the grace.
            _ => break,
        }
    }
    left
}
