//! Static checks of the Helm chart that need no `helm` binary (rendering it needs Helm,
//! which this repository does not build; the kustomize base is what the API server tests
//! apply, see charts/kumaco/README.md):
//!
//! - the chart ships the same admission policy as the kustomize base;
//! - every flag of `kumaco run` has a value in values.yaml (its comment names the flag),
//!   so a new flag cannot be forgotten in the chart.

use std::path::Path;
use std::process::Command;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[test]
fn chart_admission_policy_is_the_base_one() {
    assert!(
        read("charts/kumaco/files/admission-policy.yaml")
            == read("deploy/base/admission-policy.yaml"),
        "charts/kumaco/files/admission-policy.yaml must be a copy of \
         deploy/base/admission-policy.yaml (cp deploy/base/admission-policy.yaml \
         charts/kumaco/files/)"
    );
}

#[test]
fn every_run_flag_has_a_chart_value() {
    let help = Command::new(env!("CARGO_BIN_EXE_kumaco"))
        .args(["run", "--help"])
        .output()
        .expect("running kumaco run --help");
    assert!(help.status.success(), "{help:?}");
    let help = String::from_utf8_lossy(&help.stdout);
    let values = read("charts/kumaco/values.yaml");
    // Flags are the `--name` words that start an option line of clap's help.
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|line| {
            line.trim_start()
                .split([' ', ',', '=', '<'])
                .find(|word| word.starts_with("--"))
        })
        .filter(|flag| *flag != "--help")
        .collect();
    assert!(
        flags.len() > 20 && flags.contains(&"--node-selector"),
        "unexpected help: {help}"
    );
    let missing: Vec<&&str> = flags
        .iter()
        .filter(|flag| !values.contains(**flag))
        .collect();
    assert!(
        missing.is_empty(),
        "charts/kumaco/values.yaml has no value for {missing:?} (name the flag in the \
         value's comment and pass it in templates/deployment.yaml)"
    );
}
