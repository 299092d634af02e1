//! The recipes in `examples/`: every YAML file there is valid for
//! `kumaco validate`, without a lint warning, starts with a comment that explains it,
//! and is listed in examples/README.md, which the README links; the `helm` commands their
//! comments give render, with a real helm, the node scope they write (a `--set` value with
//! a comma would be split); and the kured v1 equivalents are open, minute by minute over
//! two weeks (one with a change of clocks), exactly when kured's own time window (ported
//! below) would be.

use std::path::PathBuf;
use std::process::Command;

use testkit::files::{read_repo, repo};

/// Lint warnings are computed for the year after this instant: it precedes the dates
/// the examples name (the emergency one-shot is on 2026-12-15).
const NOW: &str = "--now=2026-12-01T00:00:00Z";

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples"))
        .expect("examples/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "examples: {files:?}");
    files
}

fn relative(path: &std::path::Path) -> String {
    path.strip_prefix(repo())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn every_example_is_valid_without_warnings() {
    for file in examples() {
        let name = relative(&file);
        let out = Command::new(env!("CARGO_BIN_EXE_kumaco"))
            .args(["validate", NOW, &name])
            .current_dir(repo())
            .env_remove("KUMACO_TZDATA")
            .env_remove("TZDIR")
            .output()
            .expect("running kumaco validate");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "kumaco validate {name}:\n{stdout}{stderr}"
        );
        let lines: Vec<&str> = stdout.lines().collect();
        let (summary, windows) = lines.split_last().expect("a summary line");
        assert!(!windows.is_empty(), "{name}: no window in it:\n{stdout}");
        for line in windows {
            assert!(
                line.starts_with(&format!("{name}: ")) && line.ends_with(": ok"),
                "{name}: not ok without warnings: {line}\n{stdout}"
            );
        }
        let n = windows.len();
        assert_eq!(
            *summary,
            format!(
                "{n} window{}: {n} valid, 0 invalid",
                if n == 1 { "" } else { "s" }
            ),
            "{name}"
        );
    }
}

#[test]
fn every_example_explains_itself_and_is_listed() {
    let index = read_repo("examples/README.md");
    for file in examples() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let comment = text.lines().take_while(|l| l.starts_with('#')).count();
        assert!(
            comment >= 3,
            "examples/{name}: start with a comment of a few lines saying what it is for"
        );
        assert!(
            index.contains(&format!("]({name})")),
            "examples/README.md does not list {name}"
        );
    }
    assert!(
        read_repo("README.md").contains("(examples/README.md)"),
        "README.md does not link examples/README.md"
    );
}

/// The `helm install` and `helm upgrade` commands of a file's comments (`#   helm ...`,
/// continued lines joined), as the shell splits them into words.
fn helm_commands(text: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in text.lines().filter_map(|l| l.strip_prefix('#')) {
        let line = line.trim();
        if current.is_empty() && !line.starts_with("helm ") {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(rest) => {
                current.push_str(rest);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                commands.push(shell_words(&std::mem::take(&mut current)));
            }
        }
    }
    commands
}

/// Words as a POSIX shell splits them: single quotes literal, a backslash outside them
/// escapes the next character.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    w.push(q);
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

#[test]
fn the_helm_commands_of_the_examples_render_the_node_scope_they_write() {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let mut rendered = 0;
    for file in examples() {
        let name = relative(&file);
        for words in helm_commands(&std::fs::read_to_string(&file).unwrap()) {
            assert!(
                matches!(
                    words.get(1).map(String::as_str),
                    Some("install" | "upgrade")
                ),
                "{name}: {words:?}"
            );
            // helm template with the command's values, as install or upgrade would apply
            // them to a fresh release.
            let mut cmd = Command::new(&helm);
            cmd.args(["template", &words[2]])
                .arg(repo().join("charts/kumaco"))
                .args(["--kube-version", "1.37.2"]);
            let mut scope = None;
            let mut args = words[4..].iter();
            while let Some(flag) = args.next() {
                if !matches!(flag.as_str(), "--set" | "--set-string") {
                    continue;
                }
                let value = args.next().expect("a value after --set");
                if let Some(selector) = value.strip_prefix("nodeScope=") {
                    // Helm's own escape: `\,` is a comma in the value.
                    scope = Some(selector.replace("\\,", ","));
                }
                cmd.args([flag, value]);
            }
            let out = cmd.output().expect("running helm template");
            assert!(
                out.status.success(),
                "{name}: {words:?}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let objects = testkit::manifests::parse(&String::from_utf8_lossy(&out.stdout))
                .unwrap_or_else(|e| panic!("{name}: helm's output: {e:#}"));
            let deployment = objects
                .iter()
                .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
                .expect("a Deployment");
            let args: Vec<&str> =
                deployment.data["spec"]["template"]["spec"]["containers"][0]["args"]
                    .as_array()
                    .expect("args")
                    .iter()
                    .filter_map(|a| a.as_str())
                    .collect();
            if let Some(scope) = scope {
                let flag = format!("--node-selector={scope}");
                assert!(
                    args.contains(&flag.as_str()),
                    "{name}: {words:?} should pass {flag}, the chart got {args:?} (a value with \
                     a comma needs --set-string and `\\,`, or a values file)"
                );
            }
            rendered += 1;
        }
    }
    assert!(
        rendered >= 2,
        "no helm command found in the examples' comments"
    );
}

/// kured v1's `Contains` (pkg/timewindow, kured 1.x), ported: the reboot days are
/// checked against the current local day; an end before the start wraps past midnight
/// (to the day before or after); the end is inclusive to its last nanosecond.
struct KuredWindow {
    days: &'static [Weekday],
    start: (i8, i8, i8),
    end: (i8, i8, i8),
    zone: &'static str,
}

impl KuredWindow {
    fn contains(&self, t: Timestamp) -> bool {
        let tz = TimeZone::get(self.zone).unwrap();
        let local = t.to_zoned(tz.clone());
        if !self.days.contains(&local.weekday()) {
            return false;
        }
        let at = |(h, m, s): (i8, i8, i8), ns: i32| {
            local
                .date()
                .at(h, m, s, ns)
                .to_zoned(tz.clone())
                .unwrap()
                .timestamp()
        };
        let (mut start, mut end) = (at(self.start, 0), at(self.end, 999_999_999));
        let day = SignedDuration::from_hours(24);
        if self.start > self.end {
            if t < end {
                start = start.checked_sub(day).unwrap();
            } else {
                end = end.checked_add(day).unwrap();
            }
        }
        start <= t && t <= end
    }
}

use jiff::civil::Weekday::{self, Friday, Monday, Saturday, Sunday, Thursday, Tuesday, Wednesday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

#[test]
fn the_kured_equivalents_are_open_exactly_when_kured_v1_would_be() {
    const EVERY_DAY: &[Weekday] = &[
        Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday,
    ];
    // (kured's flags, the example's windows that stand for them)
    let cases: [(KuredWindow, &[&str]); 3] = [
        (
            // kured's defaults
            KuredWindow {
                days: EVERY_DAY,
                start: (0, 0, 0),
                end: (23, 59, 59),
                zone: "UTC",
            },
            &["kured-defaults"],
        ),
        (
            // --reboot-days=sat,sun --start-time=3am --end-time=7am --time-zone=Europe/Berlin
            KuredWindow {
                days: &[Saturday, Sunday],
                start: (3, 0, 0),
                end: (7, 0, 0),
                zone: "Europe/Berlin",
            },
            &["kured-weekend-mornings"],
        ),
        (
            // --reboot-days=mon,tue,wed,thu,fri --start-time=22:00 --end-time=05:00 ...
            KuredWindow {
                days: &[Monday, Tuesday, Wednesday, Thursday, Friday],
                start: (22, 0, 0),
                end: (5, 0, 0),
                zone: "Europe/Berlin",
            },
            &["kured-weeknights-evening", "kured-weeknights-morning"],
        ),
    ];
    let nodes =
        std::env::temp_dir().join(format!("kumaco-examples-nodes-{}.yaml", std::process::id()));
    std::fs::write(
        &nodes,
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n",
    )
    .unwrap();
    // A December week, and the week of the spring change of clocks in Berlin.
    for from in ["2026-12-04T00:00:00Z", "2027-03-25T00:00:00Z"] {
        let out = Command::new(env!("CARGO_BIN_EXE_kumaco"))
            .args([
                "plan",
                "--windows",
                "examples/kured-v1-equivalents.yaml",
                "--nodes",
            ])
            .arg(&nodes)
            .args(["--from", from, "--for", "9d", "-o", "json"])
            .current_dir(repo())
            .env_remove("KUBECONFIG")
            .env_remove("KUMACO_TZDATA")
            .output()
            .expect("running kumaco plan");
        assert!(out.status.success(), "kumaco plan: {out:?}");
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let intervals: Vec<(Timestamp, Timestamp, Vec<String>)> = plan["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["start"].as_str().unwrap().parse().unwrap(),
                    i["end"].as_str().unwrap().parse().unwrap(),
                    i["windows"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|w| w.as_str().unwrap().to_string())
                        .collect(),
                )
            })
            .collect();
        let first: Timestamp = from.parse().unwrap();
        // Every minute, 30 s past it: kured's inclusive last second is never sampled.
        for minute in 0..9 * 24 * 60 {
            let t = first
                .checked_add(SignedDuration::from_secs(minute * 60 + 30))
                .unwrap();
            let (_, _, open) = intervals
                .iter()
                .find(|(s, e, _)| *s <= t && t < *e)
                .unwrap_or_else(|| panic!("no interval of the plan holds {t}"));
            for (kured, names) in &cases {
                let kumaco = names.iter().any(|n| open.contains(&format!("kumaco/{n}")));
                assert_eq!(
                    kumaco,
                    kured.contains(t),
                    "at {t} ({}), the windows {names:?} are {} but kured's would be {}",
                    t.to_zoned(TimeZone::get(kured.zone).unwrap()),
                    if kumaco { "open" } else { "closed" },
                    if kured.contains(t) { "open" } else { "closed" },
                );
            }
        }
    }
    let _ = std::fs::remove_file(&nodes);
}
