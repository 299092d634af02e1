//! A wall clock shifted for one process only, with libfaketime (Debian package
//! `faketime`), moved at run time: the process reads its offset from a file
//! (`FAKETIME_TIMESTAMP_FILE`) again at most a second after it changes
//! (`FAKETIME_CACHE_DURATION=1`). The monotonic clock is left alone
//! (`FAKETIME_DONT_FAKE_MONOTONIC=1`): kumaco's timers and its lease timings run on it,
//! as they would through an NTP step; only the wall clock jumps.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where Debian's `faketime` package puts the library: its multiarch directory
/// (`x86_64-linux-gnu`, `aarch64-linux-gnu`).
#[cfg(target_arch = "x86_64")]
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
#[cfg(target_arch = "aarch64")]
pub const LIBFAKETIME: &str = "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1";

/// The offset file of one process's fake clock.
pub struct FakeClock {
    file: PathBuf,
    offset_secs: i64,
}

impl FakeClock {
    /// A clock at offset 0, its file in `dir`. Fails with the install command if
    /// libfaketime is missing.
    pub fn new(dir: &Path) -> Result<FakeClock> {
        if !Path::new(LIBFAKETIME).exists() {
            bail!("{LIBFAKETIME} is missing: install it with `apt-get install -y faketime`");
        }
        let clock = FakeClock {
            file: dir.join("faketime-offset"),
            offset_secs: 0,
        };
        clock.write()?;
        Ok(clock)
    }

    /// The environment that makes a process use this clock.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("LD_PRELOAD", LIBFAKETIME.to_string()),
            (
                "FAKETIME_TIMESTAMP_FILE",
                self.file.to_string_lossy().into_owned(),
            ),
            ("FAKETIME_CACHE_DURATION", "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Steps the process's wall clock to `secs` from the real time.
    pub fn set_offset(&mut self, secs: i64) -> Result<()> {
        self.offset_secs = secs;
        self.write()
    }

    pub fn offset_secs(&self) -> i64 {
        self.offset_secs
    }

    fn write(&self) -> Result<()> {
        // libfaketime's relative format: a signed number of seconds.
        let spec = format!("{:+}\n", self.offset_secs);
        // Written whole and renamed: a reader never sees half a line.
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, spec).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.file)
            .with_context(|| format!("renaming to {}", self.file.display()))
    }
}
