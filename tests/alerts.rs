//! kumaco's alerts, `charts/kumaco/files/prometheus-rules.yaml`:
//!
//! - a real promtool (built once per machine from the Go module proxy, see
//!   `testkit::gobuild::promtool`) checks the rules and runs their unit tests,
//!   `tests/alerts/*.yaml`, in which every alert both fires and stays silent;
//! - every alert has its runbook in docs/monitoring.md, linked by a `runbook_url`
//!   annotation holding a URL (the chart's `prometheusRule.runbookBaseUrl` moves them);
//! - the chart's PrometheusRule and the kustomize component carry exactly these rules
//!   (the chart with its two thresholds replaced when they are set).
//!
//! That the metrics the rules read are ones kumaco exports is checked on a live kumaco by
//! tests/dashboard.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use testkit::files::{read_repo, repo};

const RULES: &str = "charts/kumaco/files/prometheus-rules.yaml";
const COMPONENT: &str = "deploy/components/prometheusrule/prometheusrule.yaml";

fn yaml(text: &str, what: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("parsing {what}: {e}"))
}

/// The alert rules of the rules file: (name, rule).
fn alerts() -> Vec<(String, Value)> {
    let rules = yaml(&read_repo(RULES), RULES);
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .filter_map(|r| Some((r["alert"].as_str()?.to_string(), r.clone())))
        .collect()
}

fn unit_test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/alerts"))
        .expect("tests/alerts/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

fn promtool(args: &[&Path]) -> (bool, String) {
    let promtool = testkit::gobuild::promtool().unwrap_or_else(|e| panic!("{e:#}"));
    let out = Command::new(&promtool)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", promtool.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let (ok, out) = promtool(&[Path::new("check"), Path::new("rules"), Path::new(RULES)]);
    assert!(ok, "promtool check rules {RULES}:\n{out}");
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", alerts().len())),
        "{out}"
    );

    let files = unit_test_files();
    let mut args = vec![Path::new("test"), Path::new("rules")];
    args.extend(files.iter().map(PathBuf::as_path));
    let (ok, out) = promtool(&args);
    assert!(ok, "promtool test rules tests/alerts/*.yaml:\n{out}");
    assert_eq!(
        out.matches("  SUCCESS").count(),
        files.len(),
        "one SUCCESS per file:\n{out}"
    );
}

/// promtool passes a test that never evaluates an alert; so each alert must be expected
/// to fire somewhere, and expected not to somewhere else.
#[test]
fn every_alert_is_tested_firing_and_silent() {
    let mut fires = Vec::new();
    let mut silent = Vec::new();
    for file in unit_test_files() {
        let tests = yaml(
            &std::fs::read_to_string(&file).unwrap(),
            &file.display().to_string(),
        );
        for test in tests["tests"].as_array().expect("tests") {
            for case in test["alert_rule_test"].as_array().into_iter().flatten() {
                let name = case["alertname"].as_str().expect("alertname").to_string();
                if case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()) {
                    fires.push(name);
                } else {
                    silent.push(name);
                }
            }
        }
    }
    for (name, _) in alerts() {
        assert!(fires.contains(&name), "no unit test expects {name} to fire");
        assert!(
            silent.contains(&name),
            "no unit test expects {name} to stay silent"
        );
    }
}

#[test]
fn every_alert_has_a_runbook() {
    // The convention is a `runbook_url` annotation holding a URL: the runbook on the
    // repository's home, whose base is chosen once (the chart's default, which the rules
    // file is written with).
    let base = runbook_base_url();
    assert!(
        base.starts_with("https://") && base.ends_with("/docs/monitoring.md"),
        "prometheusRule.runbookBaseUrl: {base:?}"
    );
    let monitoring = read_repo("docs/monitoring.md");
    for (name, rule) in alerts() {
        assert!(
            monitoring.contains(&format!("\n#### {name}\n")),
            "docs/monitoring.md has no runbook heading `#### {name}`"
        );
        let annotations = rule["annotations"].as_object().expect("annotations");
        assert!(
            !annotations.contains_key("runbook"),
            "{name}: the annotation is `runbook_url`, with a URL"
        );
        let url = annotations
            .get("runbook_url")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert_eq!(
            url,
            format!("{base}#{}", name.to_lowercase()),
            "{name}'s runbook_url"
        );
    }
}

#[test]
fn the_kustomize_component_carries_the_rules_file() {
    let component = yaml(&read_repo(COMPONENT), COMPONENT);
    assert_eq!(component["kind"], "PrometheusRule");
    assert!(
        component["spec"] == yaml(&read_repo(RULES), RULES),
        "{COMPONENT} differs from {RULES}: run `make prometheusrule`"
    );
}

/// The chart's `prometheusRule.runbookBaseUrl`: where the runbooks are, for every
/// alert's `runbook_url`.
fn runbook_base_url() -> String {
    let values = yaml(&read_repo("charts/kumaco/values.yaml"), "values.yaml");
    values["prometheusRule"]["runbookBaseUrl"]
        .as_str()
        .expect("prometheusRule.runbookBaseUrl")
        .to_string()
}

/// `helm template` of the PrometheusRule alone, with `--set` values.
fn render_rule(sets: &[&str]) -> Value {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let mut cmd = Command::new(&helm);
    cmd.args(["template", "kumaco"])
        .arg(repo().join("charts/kumaco"))
        .args(["--namespace", "kumaco", "--kube-version", "1.37.2"])
        .args(["--show-only", "templates/prometheusrule.yaml"])
        .args(["--set", "prometheusRule.enabled=true"]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().expect("running helm template");
    assert!(
        out.status.success(),
        "helm template {sets:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml(
        &String::from_utf8_lossy(&out.stdout),
        "helm's PrometheusRule",
    )
}

#[test]
fn the_chart_renders_the_rules_file_with_its_thresholds() {
    let rules = yaml(&read_repo(RULES), RULES);
    let rendered = render_rule(&["prometheusRule.labels.release=prometheus"]);
    assert_eq!(rendered["kind"], "PrometheusRule");
    assert_eq!(rendered["metadata"]["labels"]["release"], "prometheus");
    assert!(
        rendered["spec"] == rules,
        "the chart's default rules differ from {RULES}:\n{}",
        rendered["spec"]
    );

    let custom = render_rule(&[
        "prometheusRule.waitingForSlotSeconds=3600",
        "prometheusRule.inProgressSeconds=1800",
        "prometheusRule.notRecoveredSeconds=900",
    ]);
    let exprs = |v: &Value| -> Vec<(String, String)> {
        v["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["alert"].as_str().unwrap().to_string(),
                    r["expr"].as_str().unwrap().trim_end().to_string(),
                )
            })
            .collect()
    };
    let defaults = exprs(&rendered);
    for ((name, default), (_, set)) in defaults.iter().zip(exprs(&custom)) {
        let expected = match name.as_str() {
            "KumacoNodesWaitingForSlot" => default.replace(") > 14400", ") > 3600"),
            "KumacoMaintenanceStuck" => default.replace(") > 7200", ") > 1800"),
            "KumacoNodeNotRecovered" => default.replace(") > 2700", ") > 900"),
            _ => default.clone(),
        };
        assert_eq!(set, expected, "{name}");
        if matches!(
            name.as_str(),
            "KumacoNodesWaitingForSlot" | "KumacoMaintenanceStuck" | "KumacoNodeNotRecovered"
        ) {
            assert_ne!(&set, default, "{name}'s threshold was not replaced");
        }
    }

    // The default runbooks' home is the rules file's; another moves every runbook_url.
    let urls = |v: &Value| -> Vec<String> {
        v["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["annotations"]["runbook_url"].as_str().map(String::from))
            .collect()
    };
    assert_eq!(
        urls(&rendered).len(),
        alerts().len(),
        "{}",
        rendered["spec"]
    );
    assert_eq!(urls(&custom), urls(&rendered), "the default runbookBaseUrl");
    let moved = render_rule(&["prometheusRule.runbookBaseUrl=https://docs.example.com/kumaco"]);
    for rule in moved["spec"]["groups"][0]["rules"].as_array().unwrap() {
        let name = rule["alert"].as_str().unwrap();
        assert_eq!(
            rule["annotations"]["runbook_url"],
            format!("https://docs.example.com/kumaco#{}", name.to_lowercase()),
            "{name}"
        );
    }
}

/// The dashboard's queries parse as PromQL: promtool checks them as the expressions of
/// recording rules (Grafana's `$job` sits inside a label matcher's string, so the query
/// is PromQL as written).
#[test]
fn the_dashboard_queries_are_promql() {
    let dashboard: Value =
        serde_json::from_str(&read_repo("charts/kumaco/files/dashboard.json")).expect("JSON");
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().expect("targets").iter())
        .map(|t| t["expr"].as_str().expect("expr").to_string())
        .collect();
    assert!(exprs.len() > 10, "{exprs:?}");
    let rules = serde_json::json!({
        "groups": [{
            "name": "dashboard",
            "rules": exprs
                .iter()
                .enumerate()
                .map(|(i, e)| serde_json::json!({ "record": format!("dashboard:query_{i}"), "expr": e }))
                .collect::<Vec<_>>(),
        }]
    });
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "kumaco-dashboard-rules-{}.json",
        std::process::id()
    ));
    // JSON is YAML: promtool reads it as a rules file.
    std::fs::write(&file, rules.to_string()).unwrap();
    let (ok, out) = promtool(&[Path::new("check"), Path::new("rules"), &file]);
    let _ = std::fs::remove_file(&file);
    assert!(ok, "the dashboard's queries, as rules:\n{out}");
}

/// The inhibition recipe (docs/silences.md, "Without API access: inhibition"): its rule
/// passes promtool (its unit test is tests/alerts/inhibition-recipe.yaml), and its
/// Alertmanager configuration passes amtool of the Alertmanager the silence tests run.
#[test]
fn the_inhibition_recipe_is_valid() {
    let rules = Path::new("deploy/recipes/inhibition/prometheus-rules.yaml");
    let (ok, out) = promtool(&[Path::new("check"), Path::new("rules"), rules]);
    assert!(ok && out.contains("SUCCESS: 1 rules found"), "{out}");
    let amtool = testkit::gobuild::amtool().expect("amtool");
    let config = "deploy/recipes/inhibition/alertmanager.yaml";
    let out = std::process::Command::new(amtool)
        .args(["check-config", config])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("amtool");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "amtool check-config {config}:\n{text}"
    );
    assert!(text.contains("1 inhibit rules"), "{text}");
}
