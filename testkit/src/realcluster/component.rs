//! One program of the cluster, run under a wrapper whose stdin is its lifeline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};

use anyhow::Result;

use super::STOP_TIMEOUT;
use crate::process::Owned;

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
    process: Owned,
    lifeline: Option<ChildStdin>,
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
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(WRAPPER)
            .arg(name)
            .arg(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped());
        let mut process = Owned::spawn(name, command, Some(&log))?;
        let lifeline = process.take_stdin();
        Ok(Component {
            name,
            process,
            lifeline,
            log,
        })
    }

    /// `Some(status)` once the program has exited.
    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.exited()
    }

    /// Closes the lifeline and waits; kills the process group if it outstays
    /// [`STOP_TIMEOUT`].
    pub(super) fn stop(&mut self) {
        self.lifeline = None;
        self.process.exit_within_blocking(STOP_TIMEOUT);
        self.process.kill();
    }
}
