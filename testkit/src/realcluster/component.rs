//! One program of the cluster, run under a wrapper whose stdin is its lifeline.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::STOP_TIMEOUT;

/// Runs `"$@"` with its stdin as a lifeline: EOF (the test process closed it, or died)
/// sends the program SIGTERM, then SIGKILL after 15 s. Exits with the program's status,
/// so the harness sees a component that died by itself.
pub(super) const WRAPPER: &str = r#"
exec 3<&0 </dev/null
"$@" 3<&- &
pid=$!
( cat <&3 >/dev/null; kill -TERM "$pid" 2>/dev/null; sleep 15; kill -KILL "$pid" 2>/dev/null ) &
watcher=$!
exec 3<&-
wait "$pid"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// One program of the cluster, under [`WRAPPER`].
pub(super) struct Component {
    pub(super) name: &'static str,
    pub(super) child: Child,
    pub(super) lifeline: Option<ChildStdin>,
    pub(super) log: PathBuf,
}

impl Component {
    pub(super) fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        log: PathBuf,
        env: &[(&str, OsString)],
    ) -> Result<Component> {
        use std::os::unix::process::CommandExt;
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(WRAPPER)
            .arg(name)
            .arg(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(out.try_clone()?)
            .stderr(out)
            // Its own process group: a Ctrl-C meant for the test reaches the components
            // through the lifeline, in order, not all at once.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name} ({})", program.display()))?;
        let lifeline = child.stdin.take();
        Ok(Component {
            name,
            child,
            lifeline,
            log,
        })
    }

    /// `Some(status)` once the program has exited.
    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Closes the lifeline and waits; kills the process group if it outstays
    /// [`STOP_TIMEOUT`].
    pub(super) fn stop(&mut self) {
        self.lifeline = None;
        let deadline = Instant::now() + STOP_TIMEOUT;
        while self.exited().is_none() {
            if Instant::now() > deadline {
                let group = format!("-{}", self.child.id());
                let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
