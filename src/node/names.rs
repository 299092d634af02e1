//! The names kumaco's conditions carry on the nodes (`--under-maintenance-condition`,
//! `--in-progress-condition`), for executors that read other names: kured's v2
//! prototype reads `kured.dev/under-maintenance-window` and
//! `kured.dev/maintenance-in-progress`.
//!
//! Renamed at the edge, both ways: whoever reads nodes renames what was decoded
//! (`SlimNode::rename`, with [`Names::from_wire`]) so that the core gets a configured name
//! as kumaco's own, and the writer puts the configured name back ([`Names::to_wire`]). The core, its decisions, events' names, ownership and contest detection
//! and the metrics' labels all speak of `kured.dev/UnderMaintenance` and
//! `MaintenanceInProgress`, whatever the flags. A condition that carries kumaco's default
//! name on a node where it is renamed is someone else's, and is not read.
//!
//! Configuration, not process state: the controller takes its [`Names`] from its
//! settings, each tool from its flags, and every reader and writer of conditions is given
//! them by its caller, so two sets of names can live in one process (the tools' tests run
//! in-process, side by side).

use crate::conditions::{MAINTENANCE_IN_PROGRESS, MAINTENANCE_PLANNED, UNDER_MAINTENANCE};

/// The names of one configuration: `(kumaco's name, the name on the nodes)` of each
/// renamed condition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    renamed: Vec<(&'static str, String)>,
}

/// Why a name given to `--under-maintenance-condition` or `--in-progress-condition` is
/// refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NameError {
    #[error("{name:?} is not a valid condition type: {problem}")]
    Invalid {
        flag: &'static str,
        name: String,
        problem: String,
    },
    #[error(
        "{0:?} is also --under-maintenance-condition; each of kumaco's conditions needs a type of its own"
    )]
    Same(String),
    #[error("{name:?} is {why}; choose another name")]
    Taken {
        flag: &'static str,
        name: String,
        why: &'static str,
    },
}

impl NameError {
    /// The flag whose value is refused.
    pub fn flag(&self) -> &'static str {
        match self {
            NameError::Invalid { flag, .. } | NameError::Taken { flag, .. } => flag,
            NameError::Same(_) => "in-progress-condition",
        }
    }
}

impl Names {
    /// Validates the flags' values. `reads` are the condition types the deployer named
    /// elsewhere (`--require-condition`, `--block-condition`): kumaco reads those, so it
    /// must not write one.
    pub fn new(
        under_maintenance: &str,
        in_progress: &str,
        reads: &[String],
    ) -> Result<Names, NameError> {
        for (flag, name) in [
            ("under-maintenance-condition", under_maintenance),
            ("in-progress-condition", in_progress),
        ] {
            if let Some(problem) = crate::selector::qualified_name_problem(name) {
                return Err(NameError::Invalid {
                    flag,
                    name: name.into(),
                    problem,
                });
            }
            let taken = if name == MAINTENANCE_PLANNED {
                Some("kumaco's MaintenancePlanned condition")
            } else if reads.iter().any(|r| r == name) {
                Some("a --require-condition or --block-condition, which kumaco reads")
            } else {
                None
            };
            if let Some(why) = taken {
                return Err(NameError::Taken {
                    flag,
                    name: name.into(),
                    why,
                });
            }
        }
        if under_maintenance == in_progress {
            return Err(NameError::Same(in_progress.into()));
        }
        let renamed = [
            (UNDER_MAINTENANCE, under_maintenance),
            (MAINTENANCE_IN_PROGRESS, in_progress),
        ]
        .into_iter()
        .filter(|(ours, wire)| ours != wire)
        .map(|(ours, wire)| (ours, wire.to_string()))
        .collect();
        Ok(Names { renamed })
    }

    /// Whether every condition carries kumaco's default name: nothing to rename.
    pub fn renames_nothing(&self) -> bool {
        self.renamed.is_empty()
    }

    /// The name on the nodes of kumaco's condition `type_`.
    pub fn to_wire<'a>(&'a self, type_: &'a str) -> &'a str {
        self.renamed
            .iter()
            .find(|(ours, _)| *ours == type_)
            .map_or(type_, |(_, wire)| wire.as_str())
    }

    /// kumaco's name for a condition type found on a node; `None` for a condition that
    /// carries the default name of one kumaco writes under another name.
    pub fn from_wire(&self, type_: String) -> Option<String> {
        if self.renamed.is_empty() {
            return Some(type_);
        }
        if let Some((ours, _)) = self.renamed.iter().find(|(_, wire)| *wire == type_) {
            return Some(ours.to_string());
        }
        if self.renamed.iter().any(|(ours, _)| *ours == type_) {
            return None;
        }
        Some(type_)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KURED_MIP: &str = "kured.dev/maintenance-in-progress";
    const KURED_UM: &str = "kured.dev/under-maintenance-window";

    #[test]
    fn defaults_rename_nothing() {
        let n = Names::new(UNDER_MAINTENANCE, MAINTENANCE_IN_PROGRESS, &[]).unwrap();
        assert_eq!(n, Names::default());
        assert_eq!(n.to_wire(MAINTENANCE_IN_PROGRESS), MAINTENANCE_IN_PROGRESS);
        assert_eq!(n.from_wire(KURED_MIP.into()), Some(KURED_MIP.into()));
    }

    #[test]
    fn kureds_names_both_ways_and_the_default_names_are_someone_elses() {
        let n = Names::new(KURED_UM, KURED_MIP, &[]).unwrap();
        assert_eq!(n.to_wire(MAINTENANCE_IN_PROGRESS), KURED_MIP);
        assert_eq!(n.to_wire(UNDER_MAINTENANCE), KURED_UM);
        assert_eq!(n.to_wire(MAINTENANCE_PLANNED), MAINTENANCE_PLANNED);
        assert_eq!(
            n.from_wire(KURED_MIP.into()),
            Some(MAINTENANCE_IN_PROGRESS.into())
        );
        assert_eq!(n.from_wire(KURED_UM.into()), Some(UNDER_MAINTENANCE.into()));
        assert_eq!(n.from_wire(MAINTENANCE_IN_PROGRESS.into()), None);
        assert_eq!(n.from_wire(UNDER_MAINTENANCE.into()), None);
        assert_eq!(n.from_wire("Ready".into()), Some("Ready".into()));
    }

    #[test]
    fn swapped_names_map_each_to_the_other() {
        let n = Names::new(MAINTENANCE_IN_PROGRESS, UNDER_MAINTENANCE, &[]).unwrap();
        assert_eq!(
            n.from_wire(UNDER_MAINTENANCE.into()),
            Some(MAINTENANCE_IN_PROGRESS.into())
        );
        assert_eq!(
            n.from_wire(MAINTENANCE_IN_PROGRESS.into()),
            Some(UNDER_MAINTENANCE.into())
        );
    }

    #[test]
    fn refused_names_say_why() {
        let reboot = vec!["kured.dev/RebootRequired".to_string()];
        let cases = [
            (KURED_UM, "has space", "not a valid condition type"),
            (KURED_UM, "", "not a valid condition type"),
            (KURED_MIP, KURED_MIP, "also --under-maintenance-condition"),
            (KURED_UM, MAINTENANCE_PLANNED, "MaintenancePlanned"),
            (KURED_UM, "kured.dev/RebootRequired", "--require-condition"),
        ];
        for (um, mip, expected) in cases {
            let e = Names::new(um, mip, &reboot).unwrap_err().to_string();
            assert!(e.contains(expected), "{um} {mip}: {e}");
        }
    }
}
