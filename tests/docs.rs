//! What the docs list, held to the code and the files it describes.
//! Each check derives both sides, so that a new alert, value, reason or flag fails here
//! until the docs name it, and a removed one until they stop naming it:
//!
//! - docs/monitoring.md's alert table and docs/development.md's promtool output against
//!   charts/kumaco/files/prometheus-rules.yaml and tests/alerts/;
//! - charts/kumaco/README.md's value tables against every leaf key of values.yaml;
//! - docs/configuration.md's reason table against `kumaco_core::reasons::ALL`, and every
//!   count of a thing the code defines written in prose ("20 reasons", "kumaco's three
//!   conditions") against the code;
//! - docs/configuration.md's flags against `kumaco run --help`, both ways;
//! - one memory-sizing figure (the node count beyond which to raise the limit) in every
//!   place that gives one;
//! - docs/versioning.md's tested Kubernetes version against testenv/go.mod, and its
//!   oldest expected one against the chart's kubeVersion;
//! - `kubectl get events` in the docs filtered by `involvedObject`, as core/v1 events are;
//! - docs/kured.md's kured v1 table against kured v1's flags and environment variables
//!   (tests/fixtures/kured-v1-flags.txt);
//! - the README's part for operators: its length, and its `helm install` against the
//!   tested one; the blocks marked as tested only in the documents testkit runs them from;
//! - the number of test binaries, stated once, against the workspace's targets;
//! - docs/configuration.md's environment variables against those the code reads, both ways;
//! - docs/versioning.md's interface against the subcommands and the flags the chart's
//!   uninstall hook passes;
//! - the worked examples of docs/maintenance-in-progress.md against the reason their flags
//!   end a maintenance with; the log commands against reading one pod of several;
//! - every repository path a document names, and every file it links, exists;
//! - docs/sizing.md's headline figures against the sections of docs/benchmarks.md they
//!   link to, and every link to a heading of the docs against the headings;
//! - every page of docs/ the code and the manifests name exists; the operator pages stay
//!   within a budget of words.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;
use testkit::files::{read_repo, repo};

const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read_repo(path)).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

/// The rows of the first markdown table after the line `heading` in `text`, as cells
/// (the header and the separator line left out).
fn table_after(text: &str, heading: &str) -> Vec<Vec<String>> {
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in the document"));
    text[start..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(cells)
        .collect()
}

fn cells(line: &str) -> Vec<String> {
    // `\|` inside a cell is a literal bar.
    let line = line.replace("\\|", "\u{0}");
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().replace('\u{0}', "|"))
        .collect()
}

/// The code spans (`x`) of a cell.
fn spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

// --- alerts -----------------------------------------------------------------------

#[test]
fn the_alert_table_and_promtool_output_list_every_alert_of_the_rules_file() {
    let rules = yaml("charts/kumaco/files/prometheus-rules.yaml");
    let alerts: Vec<&Value> = rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .filter(|r| r["alert"].is_string())
        .collect();
    let ops = read_repo("docs/monitoring.md");
    let rows = table_after(&ops, "| alert | fires when | for | severity |");
    let documented: Vec<String> = rows
        .iter()
        .map(|r| {
            let name = r[0].trim_start_matches('[');
            name[..name.find(']').expect("[Name](#anchor)")].to_string()
        })
        .collect();
    let defined: Vec<String> = alerts
        .iter()
        .map(|a| a["alert"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        documented, defined,
        "docs/monitoring.md's alert table must list the rules file's alerts, in its order"
    );
    for (row, alert) in rows.iter().zip(&alerts) {
        let name = alert["alert"].as_str().unwrap();
        let anchor = format!("(#{})", name.to_lowercase());
        assert!(row[0].contains(&anchor), "{name}: link {anchor}: {row:?}");
        assert!(
            ops.contains(&format!("#### {name}\n")),
            "{name}: no runbook heading"
        );
        let for_ = alert["for"].as_str().unwrap_or("—");
        assert_eq!(row[2], for_, "{name}: `for`");
        assert_eq!(
            row[3],
            alert["labels"]["severity"].as_str().unwrap(),
            "{name}: severity"
        );
    }

    // The sample output of promtool: every rule counted, every unit test file run.
    let development = read_repo("docs/development.md");
    assert!(
        development.contains(&format!("  SUCCESS: {} rules found", alerts.len())),
        "docs/development.md: `promtool check rules` should say SUCCESS: {} rules found",
        alerts.len()
    );
    let mut files: Vec<String> = std::fs::read_dir(repo().join("tests/alerts"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".yaml"))
        .collect();
    files.sort();
    let shown: Vec<&str> = development
        .lines()
        .filter_map(|l| l.strip_prefix("Processing test file: tests/alerts/"))
        .collect();
    assert_eq!(
        shown, files,
        "docs/development.md: `promtool test rules` output should show every tests/alerts file"
    );
}

// --- the chart's values -------------------------------------------------------------

/// Every value path a table row of the chart README names: its first cell's code spans,
/// where `.x` continues the previous full path's parent (`inProgress.enabled`, `.maxInProgress`).
fn readme_value_paths() -> BTreeSet<String> {
    let readme = read_repo("charts/kumaco/README.md");
    let mut paths = BTreeSet::new();
    for line in readme.lines().filter(|l| l.starts_with('|')) {
        let first = &cells(line)[0];
        let mut parent = String::new();
        for span in spans(first) {
            let path = if let Some(rest) = span.strip_prefix('.') {
                format!("{parent}{rest}")
            } else {
                span.to_string()
            };
            if !path.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
                continue;
            }
            parent = match path.rfind('.') {
                Some(i) => path[..=i].to_string(),
                None => String::new(),
            };
            paths.insert(path);
        }
    }
    paths
}

#[test]
fn the_chart_readme_lists_every_value_of_values_yaml() {
    let values = yaml("charts/kumaco/values.yaml");
    let named = readme_value_paths();
    // A value is documented when the README names it, or names every value under it.
    fn missing(value: &Value, path: &str, named: &BTreeSet<String>, out: &mut Vec<String>) {
        if named.contains(path) {
            return;
        }
        match value.as_object() {
            Some(map) if !map.is_empty() => {
                for (key, child) in map {
                    let child_path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    missing(child, &child_path, named, out);
                }
            }
            _ => out.push(path.to_string()),
        }
    }
    let mut out = Vec::new();
    missing(&values, "", &named, &mut out);
    assert!(
        out.is_empty(),
        "charts/kumaco/README.md's value tables do not name these values of values.yaml: {out:?}"
    );
    // And every path it names is a value.
    let unknown: Vec<&String> = named
        .iter()
        .filter(|p| {
            p.split('.')
                .try_fold(&values, |v, key| v.get(key))
                .is_none()
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "charts/kumaco/README.md names values that values.yaml does not have: {unknown:?}"
    );
}

// --- reasons ------------------------------------------------------------------------

#[test]
fn the_reason_table_matches_the_code() {
    let all: BTreeSet<&str> = kumaco_core::reasons::ALL.into_iter().collect();
    let config = read_repo("docs/configuration.md");
    let rows = table_after(&config, "### Reasons");
    let documented: BTreeSet<&str> = rows.iter().map(|r| r[0].trim_matches('`')).collect();
    assert_eq!(
        documented, all,
        "docs/configuration.md's reason table must list kumaco_core::reasons::ALL"
    );
    assert_eq!(rows.len(), all.len(), "a reason listed twice");
}

/// A count in prose: a number in digits or in words.
fn number(word: &str) -> Option<usize> {
    const WORDS: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    let word = word.trim_start_matches('~');
    word.parse()
        .ok()
        .or_else(|| WORDS.iter().position(|w| w.eq_ignore_ascii_case(word)))
}

#[test]
fn every_count_in_prose_is_the_codes() {
    // What the code counts, and how the docs phrase a count of it: the number sits between
    // the prefix (which may be empty) and the suffix. "N in all" counts the reasons when
    // a reason is named just before it.
    let reasons = kumaco_core::reasons::ALL.len();
    let types = kumaco_core::peers::KUMACO_TYPES.len();
    let phrases: [(&str, &str, usize, &str); 6] = [
        ("", " reasons", reasons, "kumaco_core::reasons::ALL"),
        ("", " in all", reasons, "kumaco_core::reasons::ALL"),
        (
            "kumaco's ",
            " conditions",
            types,
            "kumaco_core::peers::KUMACO_TYPES",
        ),
        (
            "kumaco's ",
            " types",
            types,
            "kumaco_core::peers::KUMACO_TYPES",
        ),
        ("kumaco's ", ")", types, "kumaco_core::peers::KUMACO_TYPES"),
        (
            "condition type (",
            ")",
            types,
            "kumaco_core::peers::KUMACO_TYPES",
        ),
    ];
    let mut found = Vec::new();
    let mut wrong = Vec::new();
    for path in markdown_docs() {
        let doc = path.strip_prefix(repo()).unwrap().display().to_string();
        let text = prose(&std::fs::read_to_string(&path).unwrap()).join(" ");
        for (prefix, suffix, want, source) in phrases {
            for (i, _) in text.match_indices(suffix) {
                let before = &text[..i];
                let word = before.rsplit([' ', '(', '\n']).next().unwrap_or("");
                let Some(n) = number(word) else { continue };
                if !before[..before.len() - word.len()].ends_with(prefix) {
                    continue;
                }
                let near = before.char_indices().rev().nth(80).map_or(0, |(i, _)| i);
                if suffix == " in all" && !before[near..].contains("reason") {
                    continue;
                }
                found.push((doc.clone(), format!("{prefix}{word}{suffix}")));
                if n != want {
                    wrong.push(format!(
                        "{doc}: \"{prefix}{word}{suffix}\": {source} has {want}"
                    ));
                }
            }
        }
    }
    assert!(
        found.iter().any(|(_, f)| f.ends_with(" reasons")),
        "no reason count found in the docs: {found:?}"
    );
    assert!(
        wrong.is_empty(),
        "counts in prose that the code contradicts: {wrong:#?}"
    );
}

// --- flags --------------------------------------------------------------------------

fn help(args: &[&str]) -> String {
    let out = Command::new(KUMACO)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running kumaco {args:?}: {e}"));
    assert!(out.status.success(), "kumaco {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The long flags of a clap help text: the `--name` words starting its option lines.
fn help_flags(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .filter_map(|line| {
            line.split([' ', ',', '=', '<', '['])
                .find(|w| w.starts_with("--"))
        })
        .map(str::to_string)
        .collect()
}

/// The `--flag` words of a text.
fn mentioned_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices("--") {
        let before_ok = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'-');
        let rest = &text[i + 2..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let name = name.trim_end_matches('-');
        if before_ok && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// Flags of other programs that docs/configuration.md mentions, and whose.
const OTHER_PROGRAMS_FLAGS: &[(&str, &str)] = &[
    ("--event-ttl", "kube-apiserver"),
    ("--field-selector", "kubectl"),
    ("--nocapture", "cargo test"),
];

#[test]
fn every_flag_in_configuration_md_is_kumacos_and_every_run_flag_is_documented() {
    let run = help_flags(&help(&["run", "--help"]));
    assert!(
        run.len() > 20 && run.contains("--node-selector"),
        "unexpected help: {run:?}"
    );
    // The other subcommands' flags (and `kumaco --version`), for the mentions that are
    // theirs.
    let mut any_kumaco = help_flags(&help(&["--help"]));
    for sub in ["validate", "plan", "status", "uninstall"] {
        any_kumaco.extend(help_flags(&help(&[sub, "--help"])));
    }
    any_kumaco.extend(run.iter().cloned());

    let config = read_repo("docs/configuration.md");
    let unknown: Vec<String> = mentioned_flags(&config)
        .into_iter()
        .filter(|f| !any_kumaco.contains(f))
        .filter(|f| !OTHER_PROGRAMS_FLAGS.iter().any(|(o, _)| o == f))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/configuration.md mentions flags no kumaco command has: {unknown:?} (a \
         renamed or removed flag? another program's: add it to OTHER_PROGRAMS_FLAGS)"
    );

    // The flags table: one row per `kumaco run` flag, and only those.
    let rows = table_after(&config, "## Flags of `kumaco run`");
    let table: BTreeSet<String> = rows
        .iter()
        .filter_map(|r| spans(&r[0]).first().map(|s| s.to_string()))
        .filter_map(|s| s.split([' ', '=']).next().map(str::to_string))
        .collect();
    let run_documented: BTreeSet<String> = run
        .iter()
        .filter(|f| !matches!(f.as_str(), "--help" | "--version"))
        .cloned()
        .collect();
    let undocumented: Vec<&String> = run_documented.difference(&table).collect();
    assert!(
        undocumented.is_empty(),
        "`kumaco run` flags without a row in docs/configuration.md's flags table: {undocumented:?}"
    );
    let not_run: Vec<&String> = table.difference(&run_documented).collect();
    assert!(
        not_run.is_empty(),
        "docs/configuration.md's flags table has rows for flags `kumaco run --help` lacks: {not_run:?}"
    );
}

// --- sizing -------------------------------------------------------------------------

#[test]
fn one_memory_sizing_figure_everywhere() {
    // "beyond ~N nodes" / "up to ~N nodes": where the default limit stops sufficing.
    let mut figures = Vec::new();
    for file in [
        "deploy/base/deployment.yaml",
        "charts/kumaco/values.yaml",
        "docs/sizing.md",
        "charts/kumaco/README.md",
        "README.md",
    ] {
        let text = read_repo(file).replace("\n", " ").replace('#', " ");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for marker in ["beyond ~", "up to ~"] {
            for (i, _) in text.match_indices(marker) {
                let rest = &text[i + marker.len()..];
                let number: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == ',')
                    .collect();
                if rest[number.len()..].starts_with(" nodes") {
                    figures.push((file, number));
                }
            }
        }
    }
    let distinct: BTreeSet<&str> = figures.iter().map(|(_, n)| n.as_str()).collect();
    assert!(
        figures.len() >= 3 && distinct.len() == 1,
        "memory sizing figures disagree (or are missing): {figures:?}"
    );
}

// --- compatibility ------------------------------------------------------------------

#[test]
fn the_compatibility_statement_names_the_tested_and_the_oldest_kubernetes() {
    // Tested: the version of k8s.io/kubernetes the test API server is built from.
    let go_mod = read_repo("testenv/go.mod");
    let tested = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v"))
        .expect("testenv/go.mod requires k8s.io/kubernetes")
        .trim();
    let versioning = read_repo("docs/versioning.md");
    assert!(
        versioning.contains(&format!("**Tested: Kubernetes {tested}.**")),
        "docs/versioning.md must say the tests run Kubernetes {tested} (testenv/go.mod)"
    );
    // Expected to work: the chart's kubeVersion floor.
    let chart = read_repo("charts/kumaco/Chart.yaml");
    let floor = chart
        .lines()
        .find_map(|l| l.strip_prefix("kubeVersion: \">="))
        .and_then(|v| v.split(".0-0").next())
        .expect("Chart.yaml: kubeVersion: \">=X.Y.0-0\"");
    assert!(
        versioning.contains(&format!(
            "**Expected to work: Kubernetes {floor} and later**"
        )),
        "docs/versioning.md must name the chart's kubeVersion floor, {floor}"
    );
    for doc in ["README.md", "docs/install.md"] {
        let text = read_repo(doc);
        assert!(
            !text.contains("any Kubernetes"),
            "{doc}: say what is tested and expected (docs/versioning.md), not \"any Kubernetes\""
        );
    }
}

/// The documents people read: docs/*.md, the README, and the chart's and the examples'
/// READMEs.
fn markdown_docs() -> Vec<std::path::PathBuf> {
    let mut docs: Vec<std::path::PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.extend(
        ["README.md", "charts/kumaco/README.md", "examples/README.md"].map(|d| repo().join(d)),
    );
    docs
}

// --- events -------------------------------------------------------------------------

#[test]
fn kubectl_get_events_is_filtered_by_involved_object() {
    // kumaco posts events.k8s.io/v1 events (`regarding`); `kubectl get events` reads them
    // as core/v1 events, whose field selectors name `involvedObject`.
    let docs = markdown_docs();
    let mut wrong = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        for line in text.lines() {
            if line.contains("get events") && line.contains("regarding.") {
                wrong.push(format!("{}: {line}", doc.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "`kubectl get events` filters core/v1 events: use involvedObject.name, not regarding.name: {wrong:#?}"
    );
}

// --- coming from kured v1 -----------------------------------------------------------

#[test]
fn every_kured_v1_flag_and_variable_has_its_row_in_kured_md() {
    let fixture = read_repo("tests/fixtures/kured-v1-flags.txt");
    let kured_v1: BTreeSet<&str> = fixture
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        kured_v1.contains("--concurrency") && kured_v1.contains("KURED_NODE_ID"),
        "tests/fixtures/kured-v1-flags.txt: {kured_v1:?}"
    );
    let kured = read_repo("docs/kured.md");
    let rows = table_after(&kured, "| kured v1 flag | its environment variable |");
    // The first two cells name kured's flags and variables; `--x` alone, so that a
    // kumaco flag written there by mistake is caught as a name kured does not have.
    let mapped: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| spans(&r[0]).into_iter().chain(spans(&r[1])))
        .collect();
    let missing: Vec<&&str> = kured_v1.difference(&mapped).collect();
    assert!(
        missing.is_empty(),
        "docs/kured.md's kured v1 table has no row for {missing:?} \
         (tests/fixtures/kured-v1-flags.txt)"
    );
    let unknown: Vec<&&str> = mapped.difference(&kured_v1).collect();
    assert!(
        unknown.is_empty(),
        "docs/kured.md's kured v1 table names {unknown:?} in its kured columns, which \
         kured v1 does not have (tests/fixtures/kured-v1-flags.txt)"
    );
    // Every row says where it goes.
    let empty: Vec<&Vec<String>> = rows.iter().filter(|r| r[2].is_empty()).collect();
    assert!(empty.is_empty(), "rows without a mapping: {empty:?}");
}

// --- the README, for operators --------------------------------------------------------

/// Where the README's part for contributors begins: everything above it is what an
/// operator reads first.
const README_CONTRIBUTORS: &str = "\n## Developing kumaco\n";
/// About five minutes of reading.
const README_OPERATOR_WORDS: usize = 700;

#[test]
fn the_readme_reads_in_five_minutes_before_the_part_for_contributors() {
    let readme = read_repo("README.md");
    let end = readme.find(README_CONTRIBUTORS).unwrap_or_else(|| {
        panic!("README.md: no {README_CONTRIBUTORS:?} heading, where the contributors' part begins")
    });
    let words = readme[..end].split_whitespace().count();
    assert!(
        words <= README_OPERATOR_WORDS,
        "README.md has {words} words before {README_CONTRIBUTORS:?}, more than \
         {README_OPERATOR_WORDS}: move details into docs/ and link them"
    );
    // What an operator looks for first is there, in that part.
    for needed in [
        "kured.dev/maintenance-window",
        "<!-- tested: readme-install",
        "helm install",
        "cargo install --locked --path .",
        "make demo",
        "make test",
        "docs/install.md#try-it-on-a-laptop",
        "docs/shadow-trial.md",
        "docs/uninstall.md",
        "conditions outlive it",
    ] {
        assert!(
            readme[..end].contains(needed),
            "README.md's operator part lacks {needed:?}"
        );
    }
}

#[test]
fn the_readmes_helm_install_is_the_tested_one() {
    // The README shows docs/install.md's `helm install`, which tests/deploy_commands.rs
    // runs; the two must not drift apart.
    let readme = read_repo("README.md");
    let start = readme
        .find("```sh\nhelm install ")
        .expect("README.md: a ```sh block starting with `helm install`")
        + "```sh\n".len();
    let len = readme[start..].find("\n```").expect("the block's end");
    assert_eq!(
        &readme[start..start + len],
        testkit::docs::block("helm-install"),
        "README.md's helm install differs from docs/install.md's tested `helm-install` block"
    );
}

#[test]
fn blocks_marked_as_tested_are_only_where_the_tests_read_them() {
    // testkit::docs reads its DOCS only: a marked block anywhere else would never run.
    let mut stray = Vec::new();
    for path in markdown_docs() {
        let doc = path.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let marks = text
            .lines()
            .any(|l| l.trim_start().starts_with(testkit::docs::MARKER));
        if !testkit::docs::DOCS.contains(&doc.as_str()) && marks {
            stray.push(doc);
        }
    }
    assert!(
        stray.is_empty(),
        "{stray:?} mark blocks as tested, but testkit::docs::DOCS ({:?}) does not list \
         them: add the document there",
        testkit::docs::DOCS
    );
}

// --- counts in prose ------------------------------------------------------------------

/// The test binaries `make test` runs: what `cargo test --workspace --all-targets`
/// builds, one per library, binary, integration test and bench target of the workspace.
fn test_binaries() -> usize {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .flat_map(|p| p["targets"].as_array().expect("targets"))
        .filter(|t| {
            t["kind"].as_array().expect("kind").iter().any(|k| {
                matches!(
                    k.as_str(),
                    Some("lib" | "rlib" | "proc-macro" | "bin" | "test" | "bench")
                )
            })
        })
        .count()
}

#[test]
fn the_number_of_test_binaries_is_stated_once_and_right() {
    // "N binaries", "N test binaries": every such count in the docs.
    let mut counts = Vec::new();
    for path in markdown_docs() {
        let doc = path.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap().replace('\n', " ");
        for (i, _) in text.match_indices(" binaries") {
            let before = text[..i].trim_end_matches(" test");
            let number = before.rsplit([' ', '(']).next().unwrap_or("");
            if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()) {
                counts.push((doc.clone(), number.to_string()));
            }
        }
    }
    let stated = "then runs its ";
    let development = read_repo("docs/development.md").replace('\n', " ");
    let at = development
        .find(stated)
        .unwrap_or_else(|| panic!("docs/development.md: no {stated:?} N test binaries"));
    let number: String = development[at + stated.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert_eq!(
        counts,
        [("docs/development.md".to_string(), number.clone())],
        "the number of test binaries is stated once, in docs/development.md's \"Running \
         tests\"; elsewhere, link there"
    );
    let built = test_binaries();
    assert_eq!(
        number,
        built.to_string(),
        "docs/development.md says `make test` runs {number} test binaries; the workspace \
         has {built} (cargo metadata: lib, bin, test and bench targets)"
    );
}

// --- docs/sizing.md's headline figures -----------------------------------------------

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_` kept, spaces
/// as `-`, the rest dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The section of `text` under the heading whose anchor is `anchor`, up to the next
/// heading of its level or above; `None` if no heading has that anchor.
fn section<'a>(text: &'a str, anchor: &str) -> Option<Vec<&'a str>> {
    let lines = prose(text);
    let level = |l: &str| l.chars().take_while(|c| *c == '#').count();
    let start = lines
        .iter()
        .position(|l| level(l) > 0 && slug(l.trim_start_matches('#')) == anchor)?;
    let depth = level(lines[start]);
    let end = lines[start + 1..]
        .iter()
        .position(|l| (1..=depth).contains(&level(l)))
        .map_or(lines.len(), |i| start + 1 + i);
    Some(lines[start..end].to_vec())
}

#[test]
fn the_sizing_pages_figures_repeat_the_benchmarks_sections() {
    let sizing = read_repo("docs/sizing.md");
    let text = read_repo("docs/benchmarks.md");
    let rows = table_after(&sizing, "| what | measured | where |");
    assert!(
        rows.len() >= 10,
        "docs/sizing.md's headline figures: {rows:?}"
    );
    for row in &rows {
        let link = &row[2];
        let anchor = link
            .split("(benchmarks.md#")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .unwrap_or_else(|| {
                panic!("headline row without a link to its section of benchmarks.md: {row:?}")
            });
        let body = section(&text, anchor)
            .unwrap_or_else(|| {
                panic!("headline row {row:?}: no heading #{anchor} in benchmarks.md")
            })
            .join("\n");
        // Every number the row states, in the section it links to.
        for number in row[0]
            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
            .chain(row[1].split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',')))
            .map(|n| n.trim_matches(['.', ',']))
            .filter(|n| n.chars().any(|c| c.is_ascii_digit()))
        {
            assert!(
                body.contains(number),
                "docs/sizing.md says {number} ({row:?}), docs/benchmarks.md's section \
                 #{anchor} does not: update the figure with the section"
            );
        }
    }
}

// --- links ----------------------------------------------------------------------------

#[test]
fn every_link_to_a_heading_of_the_docs_finds_it() {
    let docs = markdown_docs();
    // The anchors of a document: its headings' (a repeated heading gets `-1`, `-2`, ...)
    // and the explicit `<a id="...">`s.
    let anchors = |path: &std::path::Path| -> BTreeSet<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
        let mut out = BTreeSet::new();
        for line in prose(&text) {
            if line.starts_with('#') {
                let base = slug(line.trim_start_matches('#'));
                let n = seen.entry(base.clone()).or_default();
                out.insert(if *n == 0 { base } else { format!("{base}-{n}") });
                *n += 1;
            }
        }
        for (i, _) in text.match_indices("<a id=\"") {
            let rest = &text[i + 7..];
            out.insert(rest[..rest.find('"').unwrap_or(0)].to_string());
        }
        out
    };
    let mut broken = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        for line in prose(&text) {
            for (i, _) in line.match_indices("](") {
                let rest = &line[i + 2..];
                let Some(target) = rest.split(')').next() else {
                    continue;
                };
                let Some((file, fragment)) = target.split_once('#') else {
                    continue;
                };
                if file.contains("://") || !(file.is_empty() || file.ends_with(".md")) {
                    continue;
                }
                let path = if file.is_empty() {
                    doc.clone()
                } else {
                    doc.parent().unwrap().join(file)
                };
                if !path.exists() || !anchors(&path).contains(fragment) {
                    broken.push(format!("{}: {target}", doc.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to headings that do not exist: {broken:#?}"
    );
}

// --- environment variables ------------------------------------------------------------

/// The Rust files of a directory, recursively, but the tests' (`tests.rs`, `tests/`).
fn rust_sources(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if name != "tests" {
                rust_sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// What kumaco reads of its environment without naming it in its own code: the log
/// filter (`tracing_subscriber::EnvFilter::try_from_default_env`) and the in-cluster
/// configuration's port (kube's `Config::incluster`, beside the host kumaco checks).
const READ_BY_LIBRARIES: [&str; 2] = ["RUST_LOG", "KUBERNETES_SERVICE_PORT"];

#[test]
fn every_environment_variable_kumaco_reads_is_documented_once() {
    let mut files = Vec::new();
    rust_sources(&repo().join("src"), &mut files);
    rust_sources(&repo().join("core/src"), &mut files);
    let mut read: BTreeSet<String> = READ_BY_LIBRARIES.iter().map(|v| v.to_string()).collect();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for call in ["env::var(\"", "env::var_os(\"", "nonempty(\"", "env = \""] {
            for (i, _) in text.match_indices(call) {
                let rest = &text[i + call.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if rest[name.len()..].starts_with('"') && !name.is_empty() {
                    read.insert(name);
                }
            }
        }
    }
    assert!(
        read.contains("POD_NAME") && read.contains("TZDIR") && read.contains("NO_COLOR"),
        "the scan found {read:?}"
    );
    let config = read_repo("docs/configuration.md");
    let rows = table_after(&config, "## Environment variables");
    let documented: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| {
            spans(&r[0])
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        documented, read,
        "docs/configuration.md's environment variables must be those kumaco reads (src/, \
         core/src, and READ_BY_LIBRARIES)"
    );
    // One home: the other pages link it rather than list the variables again.
    for doc in ["docs/kured.md", "docs/versioning.md"] {
        assert!(
            read_repo(doc).contains("configuration.md#environment-variables"),
            "{doc}: link configuration.md#environment-variables for the variables kumaco reads"
        );
    }
}

// --- the interface -------------------------------------------------------------------

#[test]
fn the_interface_names_every_subcommand_and_what_the_uninstall_hook_passes() {
    let versioning = read_repo("docs/versioning.md").replace('\n', " ");
    let start = versioning
        .find("- the flags of ")
        .expect("docs/versioning.md: the interface's flags bullet");
    let bullet =
        &versioning[start..start + versioning[start..].find("- the condition types").unwrap()];
    // The subcommands `kumaco --help` lists.
    let top = help(&["--help"]);
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(
        commands.len() >= 5 && commands.contains(&"uninstall"),
        "{top}"
    );
    for command in &commands {
        assert!(
            bullet.contains(&format!("`{command}`"))
                || bullet.contains(&format!("`kumaco {command}`")),
            "docs/versioning.md's interface does not name `kumaco {command}`: {bullet}"
        );
    }
    // What the chart's uninstall hook relies on: the flags it passes, and exit 3.
    let hook = read_repo("charts/kumaco/templates/uninstall-hook.yaml");
    let passed: BTreeSet<&str> = hook
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- --"))
        .map(|l| l.split(['=', ' ']).next().unwrap())
        .collect();
    assert!(passed.len() >= 8, "{passed:?}");
    for flag in &passed {
        assert!(
            bullet.contains(&format!("`--{flag}`")),
            "docs/versioning.md's interface does not name --{flag}, which the chart's \
             uninstall hook passes to `kumaco uninstall`"
        );
    }
    assert!(
        bullet.contains("exit statuses") && bullet.contains("3"),
        "docs/versioning.md: the hook relies on `kumaco uninstall`'s exit statuses (3)"
    );
}

// --- worked examples ------------------------------------------------------------------

#[test]
fn worked_examples_end_maintenance_with_the_reason_their_flags_give() {
    // With --complete-on-reboot (the default) kured's reboots end a maintenance with
    // NodeRebooted; MaintenanceCompleted only where the example turns it off.
    let text = read_repo("docs/maintenance-in-progress.md");
    let start = text.find("## Worked examples").expect("## Worked examples");
    let end = start
        + 3
        + text[start + 3..]
            .find("\n## ")
            .unwrap_or(text.len() - start - 3);
    let examples: Vec<&str> = text[start..end].split("\n### ").skip(1).collect();
    assert!(examples.len() >= 2, "worked examples: {}", examples.len());
    for example in examples {
        let title = example.lines().next().unwrap_or_default();
        // Its command: the first block of the example.
        let command = example
            .split("```sh\n")
            .nth(1)
            .and_then(|b| b.split("```").next())
            .unwrap_or_else(|| panic!("\"{title}\": no ```sh block with its command"));
        let reboots = !command.contains("--complete-on-reboot=false");
        let rows: Vec<&str> = example
            .lines()
            .filter(|l| l.starts_with('|') && l.contains("MaintenanceCompleted"))
            .collect();
        assert!(
            !reboots || rows.is_empty(),
            "docs/maintenance-in-progress.md, \"{title}\": with --complete-on-reboot (the \
             default) a reboot ends maintenance with NodeRebooted, not MaintenanceCompleted: \
             {rows:#?}"
        );
    }
}

// --- logs -----------------------------------------------------------------------------

#[test]
fn log_commands_read_every_replica_or_the_leader() {
    // `kubectl logs deploy/NAME` reads one pod of the Deployment, maybe the standby,
    // which writes nothing: a check of what kumaco did must read the leader or all.
    let mut texts: Vec<(String, String)> = markdown_docs()
        .into_iter()
        .map(|p| {
            let doc = p.strip_prefix(repo()).unwrap().display().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            // The commands: fenced code only.
            let mut fenced = false;
            let code: Vec<&str> = text
                .lines()
                .filter(|l| {
                    if l.trim_start().starts_with("```") {
                        fenced = !fenced;
                        return false;
                    }
                    fenced
                })
                .collect();
            (doc, code.join("\n"))
        })
        .collect();
    texts.push((
        "charts/kumaco/templates/NOTES.txt".into(),
        read_repo("charts/kumaco/templates/NOTES.txt"),
    ));
    let wrong: Vec<String> = texts
        .iter()
        .flat_map(|(doc, text)| {
            text.lines()
                .filter(|l| l.contains("logs deploy/") || l.contains("logs deployment/"))
                .map(move |l| format!("{doc}: {l}"))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "read every replica (`logs -l app.kubernetes.io/name=kumaco --prefix --tail=-1`) or \
         the leader (the Lease's holderIdentity), not one pod of the Deployment: {wrong:#?}"
    );
}

// --- paths ----------------------------------------------------------------------------

#[test]
fn every_path_a_document_names_exists() {
    // Code spans that name a file or directory of the repository, and relative links to
    // files other than documents (whose anchors the link test checks).
    const ROOTS: [&str; 13] = [
        "core/",
        "src/",
        "tests/",
        "testkit/",
        "testenv/",
        "deploy/",
        "charts/",
        "hack/",
        "benches/",
        "fuzz/",
        "examples/",
        "docs/",
        ".ci/",
    ];
    // Paths the docs have the reader create.
    const CREATED: [&str; 1] = ["deploy/overlays/prod"];
    let mut missing = Vec::new();
    for path in markdown_docs() {
        let doc = path.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = prose(&text);
        for span in lines.iter().flat_map(|l| l.split('`').skip(1).step_by(2)) {
            if !ROOTS.iter().any(|r| span.starts_with(r))
                || span.contains(|c: char| c.is_whitespace() || "*<>{}$".contains(c))
            {
                continue;
            }
            let named = span.split(['#', ':']).next().unwrap().trim_end_matches('/');
            if !CREATED.contains(&named) && !repo().join(named).exists() {
                missing.push(format!("{doc}: `{span}`"));
            }
        }
        for line in &lines {
            for (i, _) in line.match_indices("](") {
                let target = line[i + 2..].split(')').next().unwrap_or("");
                let file = target.split('#').next().unwrap();
                if file.is_empty() || file.contains("://") || file.ends_with(".md") {
                    continue;
                }
                if !path.parent().unwrap().join(file).exists() {
                    missing.push(format!("{doc}: ({target})"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "paths that do not exist: {missing:#?}");
}

/// Every page of docs/ the code, the chart and the manifests point people to exists: an
/// error message or a comment naming a page that moved sends a reader nowhere.
#[test]
fn every_page_the_code_and_the_manifests_name_exists() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| {
                ["rs", "yaml", "yml", "tpl", "txt", "json"].contains(&e.to_str().unwrap_or(""))
            }) {
                out.push(path);
            }
        }
    }
    let mut all = Vec::new();
    for dir in [
        "src",
        "core/src",
        "charts",
        "deploy",
        "testkit/src",
        "examples",
    ] {
        files(&repo().join(dir), &mut all);
    }
    let mut missing = BTreeSet::new();
    for path in all {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (at, _) in text.match_indices("docs/") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/-_.".contains(*c))
                .collect();
            let Some(page) = name
                .strip_suffix('.')
                .or(Some(&name))
                .filter(|n| n.ends_with(".md"))
            else {
                continue;
            };
            if !repo().join(page).exists() {
                let shown = path.strip_prefix(repo()).unwrap().display().to_string();
                missing.insert(format!("{shown}: {page}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "pages named that do not exist: {missing:#?}"
    );
}

/// The pages an operator reads, each for one job, stay readable in a sitting: together
/// within a budget of words, about half of what they had grown to before each topic got
/// one home. A new topic finds room by saying each thing once.
#[test]
fn the_operator_pages_stay_within_their_budget() {
    const OPERATOR_PAGES: [&str; 19] = [
        "README.md",
        "docs/install.md",
        "docs/monitoring.md",
        "docs/silences.md",
        "docs/health-gates.md",
        "docs/troubleshooting.md",
        "docs/instances.md",
        "docs/uninstall.md",
        "docs/shadow-trial.md",
        "docs/sizing.md",
        "docs/pause.md",
        "docs/notifications.md",
        "docs/maintenance-in-progress.md",
        "docs/kured.md",
        "docs/tools.md",
        "docs/forecast.md",
        "docs/configuration.md",
        "docs/versioning.md",
        "charts/kumaco/README.md",
    ];
    /// Words (as `wc -w` counts them) of all the pages above.
    const BUDGET: usize = 24_000;
    let counts: Vec<(&str, usize)> = OPERATOR_PAGES
        .iter()
        .map(|p| (*p, read_repo(p).split_whitespace().count()))
        .collect();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    assert!(
        total <= BUDGET,
        "the operator pages hold {total} words, the budget {BUDGET}: say each thing once, \
         link to its home; by page: {counts:?}"
    );
}
