//! Checks of the Helm chart:
//!
//! - the chart ships the same admission policy as the kustomize base;
//! - every flag of `kumaco run` has a value in values.yaml (its comment names the flag)
//!   that the Deployment template passes, but the ones values.yaml's header names as
//!   having none, so a new flag cannot be forgotten in the chart;
//! - rendered by a real `helm template` (Helm built once per machine from the Go module
//!   proxy, see `testkit::gobuild::helm`), with the defaults and with most options on,
//!   every object is accepted by the real API server (server-side apply, dry run, strict
//!   field validation), and the Deployment passes the values on as flags;
//! - the uninstall hook passes what keeps it from harming a live instance: `--shadow`
//!   for a `dryRun` release, the right to read the Lease a set `fieldManager` names;
//! - the alerts gate's values pass flags `kumaco run` accepts, with the Prometheus
//!   Secret mounted where they point;
//! - the notifications' values pass files, never a URL: the URL and the sinks' file in a
//!   Secret of the chart (or the operator's), mounted where the flags point, which
//!   kumaco's own flag checks accept;
//! - the notifications' record is granted with or without sinks, and with or without
//!   leader election;
//! - docs/install.md's rights table names every rule the chart grants kumaco, with every
//!   option that adds one on.

use std::path::Path;
use std::process::Command;

use clap::Parser;
use kube::api::DynamicObject;
use testkit::ApiServer;
use testkit::files::{read_repo, repo};
use testkit::manifests::{self, ApplyOptions};

#[test]
fn chart_admission_policy_is_the_base_one() {
    assert!(
        read_repo("charts/kumaco/files/admission-policy.yaml")
            == read_repo("deploy/base/admission-policy.yaml"),
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
    let values = read_repo("charts/kumaco/values.yaml");
    let template = read_repo("charts/kumaco/templates/deployment.yaml");
    // Flags are the `--name` words that start an option line of clap's help.
    let flags: Vec<&str> = help
        .lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .filter_map(|line| {
            line.split([' ', ',', '=', '<'])
                .find(|word| word.starts_with("--"))
        })
        .filter(|flag| *flag != "--help")
        .collect();
    assert!(
        flags.len() > 20 && flags.contains(&"--node-selector"),
        "unexpected help: {help}"
    );
    // A flag is named when it stands as a word: `--silence-matcher` is not named by
    // `--silence-matchers`.
    let names = |text: &str, flag: &str| {
        text.match_indices(flag).any(|(i, _)| {
            !text[i + flag.len()..].starts_with(|c: char| c.is_ascii_lowercase() || c == '-')
        })
    };
    // The flags the chart has no value for, as values.yaml's header says.
    let header: String = values
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let without = header
        .split_once("has a value here but")
        .map(|(_, rest)| rest.split(';').next().unwrap_or_default())
        .unwrap_or_default();
    let omitted: Vec<&str> = flags
        .iter()
        .copied()
        .filter(|flag| names(without, flag))
        .collect();
    let missing: Vec<&&str> = flags
        .iter()
        .filter(|flag| !omitted.contains(flag))
        .filter(|flag| !names(&values, flag) || !names(&template, flag))
        .collect();
    assert!(
        missing.is_empty(),
        "charts/kumaco/values.yaml has no value for {missing:?} (name the flag in the \
         value's comment and pass it in templates/deployment.yaml, or name it in the \
         header as one without a value)"
    );
    let passed: Vec<&&str> = omitted
        .iter()
        .filter(|flag| names(&template, flag))
        .collect();
    assert!(
        passed.is_empty(),
        "values.yaml's header says {passed:?} have no value, but the chart passes them"
    );
    // What the header says, the chart's README says.
    let readme = read_repo("charts/kumaco/README.md");
    for flag in &omitted {
        assert!(
            readme.contains(&format!("but `{flag}`")),
            "charts/kumaco/README.md should say that {flag} has no value"
        );
    }
}

/// `helm template` of the chart with `--set` values, as objects.
fn render(sets: &[&str]) -> Vec<DynamicObject> {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let chart = repo().join("charts/kumaco");
    let mut cmd = Command::new(&helm);
    // Offline, helm assumes Kubernetes 1.20 unless told: the test API server's version.
    cmd.args(["template", "kumaco"]).arg(&chart).args([
        "--namespace",
        "kumaco",
        "--kube-version",
        "1.37.2",
    ]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().expect("running helm template");
    assert!(
        out.status.success(),
        "helm template {sets:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).expect("helm prints UTF-8");
    manifests::parse(&yaml).unwrap_or_else(|e| panic!("helm's output: {e:#}\n{yaml}"))
}

/// `helm template` of the chart with `--set` values that it must refuse: its message.
fn refused(sets: &[&str]) -> String {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let mut cmd = Command::new(&helm);
    cmd.args(["template", "kumaco"])
        .arg(repo().join("charts/kumaco"))
        .args(["--namespace", "kumaco", "--kube-version", "1.37.2"]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().expect("running helm template");
    assert!(!out.status.success(), "helm template {sets:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Server-side apply with strict validation; `dry_run` leaves the cluster unchanged.
/// Helm leaves the namespace out of namespaced objects: the release's, `kumaco`.
async fn apply(client: &kube::Client, obj: &DynamicObject, dry_run: bool) {
    let options = ApplyOptions {
        field_manager: "kumaco-chart-test",
        dry_run,
        default_namespace: Some("kumaco"),
    };
    manifests::apply(client, obj, &options)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

fn kinds(objects: &[DynamicObject]) -> Vec<String> {
    let mut kinds: Vec<String> = objects
        .iter()
        .filter_map(|o| o.types.as_ref().map(|t| t.kind.clone()))
        .collect();
    kinds.sort();
    kinds
}

/// The container args of the rendered Deployment.
fn deployment_args(objects: &[DynamicObject]) -> Vec<String> {
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .expect("a Deployment");
    deployment.data["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("container args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn helm_rendered_chart_is_accepted_by_the_api_server() {
    let client = ApiServer::shared().client().await.unwrap();

    let defaults = render(&[]);
    for kind in [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Role",
        "ServiceAccount",
    ] {
        assert!(
            kinds(&defaults).iter().any(|k| k == kind),
            "no {kind}: {:?}",
            kinds(&defaults)
        );
    }
    let args = deployment_args(&defaults);
    assert!(args.iter().any(|a| a == "--leader-elect=true"), "{args:?}");

    let options = render(&[
        "createNamespaces=true",
        "watchNamespaces={kumaco,maintenance-a}",
        "nodeScope=pool=a",
        "inProgress.enabled=true",
        "inProgress.requireConditions={kured.dev/RebootRequired}",
        "inProgress.maxInProgress=10%",
        "networkPolicy.enabled=true",
        "networkPolicy.metricsPodSelector.app=prometheus",
        "grafanaDashboard.enabled=true",
    ]);
    // The guard rails and the dashboard (the PrometheusRule needs the operator's CRDs:
    // tests/alerts.rs checks it).
    for kind in ["ConfigMap", "NetworkPolicy", "PodDisruptionBudget"] {
        assert!(
            kinds(&options).iter().any(|k| k == kind),
            "no {kind}: {:?}",
            kinds(&options)
        );
    }
    let dashboard = options
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "ConfigMap"))
        .unwrap();
    assert_eq!(
        dashboard.metadata.labels.as_ref().unwrap()["grafana_dashboard"],
        "1"
    );
    let json = dashboard.data["data"]["kumaco.json"]
        .as_str()
        .expect("kumaco.json");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(json).expect("the dashboard is JSON"),
        serde_json::from_str::<serde_json::Value>(&read_repo("charts/kumaco/files/dashboard.json"))
            .unwrap()
    );
    let args = deployment_args(&options);
    for flag in [
        "--namespace=kumaco",
        "--namespace=maintenance-a",
        "--node-selector=pool=a",
        "--in-progress",
        "--require-condition=kured.dev/RebootRequired",
        "--max-in-progress=10%",
    ] {
        assert!(
            args.iter().any(|a| a == flag),
            "{flag} missing from {args:?}"
        );
    }
    // One ConfigMap/event Role per watched namespace.
    let roles = options
        .iter()
        .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "Role"))
        .filter_map(|o| o.metadata.namespace.clone())
        .collect::<Vec<_>>();
    assert!(roles.contains(&"maintenance-a".to_string()), "{roles:?}");

    // Namespaces for real (namespaced dry runs need them), everything else as a dry run.
    for set in [&defaults, &options] {
        for obj in set
            .iter()
            .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "Namespace"))
        {
            apply(&client, obj, false).await;
        }
    }
    for ns in ["kumaco", "maintenance-a"] {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns }
        }))
        .unwrap();
        apply(&client, &obj, false).await;
    }
    for obj in defaults.iter().chain(&options) {
        apply(&client, obj, true).await;
    }
}

/// The NOTES Helm prints after an install suggest a `kumaco status` command: run as the
/// user would (in a shell, against the cluster the release went to), it must work, and
/// show the release's windows and nodes as the release sees them: the namespaces it
/// watches (`--namespace` is required), its node scope and its condition names.
#[tokio::test]
async fn notes_suggest_a_status_command_that_works() {
    let server = ApiServer::shared();
    let client = server.client().await.unwrap();
    for ns in ["kumaco", "maintenance-notes"] {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns }
        }))
        .unwrap();
        apply(&client, &obj, false).await;
    }
    let cases: [(&[&str], &str); 3] = [
        (&[], "kumaco status --namespace kumaco"),
        (
            &[
                "--set",
                "watchNamespaces={kumaco,maintenance-notes}",
                "--set-string",
                r"nodeScope=zone in (a\,b)",
                "--set",
                "defaultTimezone=Europe/Berlin",
            ],
            "kumaco status --namespace kumaco --namespace maintenance-notes \
             --node-selector 'zone in (a,b)' --default-timezone Europe/Berlin",
        ),
        // A release writing the names kured's v2 prototype reads: status must read the
        // nodes under the same names, or it shows none of the release's conditions.
        (
            &[
                "--set",
                "conditionNames.underMaintenance=kured.dev/under-maintenance-window",
                "--set",
                "conditionNames.inProgress=kured.dev/maintenance-in-progress",
            ],
            "kumaco status --namespace kumaco \
             --under-maintenance-condition kured.dev/under-maintenance-window \
             --in-progress-condition kured.dev/maintenance-in-progress",
        ),
    ];
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let chart = repo().join("charts/kumaco");
    let kumaco_dir = Path::new(env!("CARGO_BIN_EXE_kumaco")).parent().unwrap();
    let path = format!(
        "{}:{}",
        kumaco_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (sets, expected) in cases {
        // What `helm install` prints, without installing. (Helm looks for the release's
        // objects in the cluster even so: a release name of its own, and no cluster-wide
        // policy, keep clear of what other tests create.)
        let out = Command::new(&helm)
            .args(["install", "notes-test"])
            .arg(&chart)
            .args(["--namespace", "kumaco", "--dry-run=client"])
            .args(["--set", "admissionPolicy.enabled=false"])
            .args(sets)
            .env("KUBECONFIG", server.kubeconfig())
            .output()
            .expect("running helm install --dry-run");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "helm install --dry-run {sets:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let notes = stdout
            .split_once("NOTES:\n")
            .unwrap_or_else(|| panic!("no NOTES in:\n{stdout}"))
            .1;
        let command = notes
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("kumaco status"))
            .unwrap_or_else(|| panic!("no kumaco status in the NOTES:\n{notes}"));
        assert_eq!(command, expected, "NOTES:\n{notes}");

        let run = Command::new("sh")
            .args(["-c", command])
            .env("PATH", &path)
            .env("KUBECONFIG", server.kubeconfig())
            .output()
            .expect("running the NOTES' kumaco status");
        assert!(
            run.status.success(),
            "`{command}` from the NOTES failed ({}):\n{}{}",
            run.status,
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
}

/// `dryRun` and `nodeEvents` pass their flags; `nodeEvents` adds a Role creating events
/// in `default` (where events about Nodes live) and nothing more, which the API server
/// accepts.
#[tokio::test]
async fn dry_run_and_node_events_values_pass_their_flags_and_rights() {
    let defaults = render(&[]);
    let args = deployment_args(&defaults);
    assert!(
        !args
            .iter()
            .any(|a| a == "--dry-run" || a == "--node-events"),
        "{args:?}"
    );
    assert!(
        !defaults
            .iter()
            .any(|o| o.metadata.namespace.as_deref() == Some("default")),
        "nothing in default without nodeEvents"
    );

    let objects = render(&["dryRun=true", "nodeEvents=true"]);
    let args = deployment_args(&objects);
    for flag in ["--dry-run", "--node-events"] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    let in_default: Vec<&DynamicObject> = objects
        .iter()
        .filter(|o| o.metadata.namespace.as_deref() == Some("default"))
        .collect();
    let mut kinds = kinds(&in_default.iter().map(|o| (*o).clone()).collect::<Vec<_>>());
    kinds.sort();
    assert_eq!(kinds, ["Role", "RoleBinding"]);
    let role = in_default
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Role"))
        .unwrap();
    assert_eq!(
        role.data["rules"],
        serde_json::json!([{
            "apiGroups": ["events.k8s.io"],
            "resources": ["events"],
            "verbs": ["create"],
        }])
    );
    let client = ApiServer::shared().client().await.unwrap();
    for obj in in_default {
        apply(&client, obj, true).await;
    }
}

/// `inProgress.alerts` (with `silences.enabled=false`) passes the gate's flags, which
/// kumaco's own flag checks accept, mounts the Prometheus Secret where the file flags
/// point, and the objects are accepted by the API server; a gate on Alertmanager without
/// its URL is refused by the chart.
#[tokio::test]
async fn alert_gate_values_pass_flags_kumaco_accepts() {
    let objects = render(&[
        "inProgress.enabled=true",
        "silences.alertmanagerUrls={http://alertmanager-operated.monitoring.svc:9093}",
        "silences.enabled=false",
        "silences.matcherSets[0]=instance=~\"{{name}}(:[0-9]+)?\"",
        "inProgress.alerts.alertmanager=true",
        "inProgress.alerts.ignore=^(Watchdog|InfoInhibitor)$",
        "inProgress.alerts.matchers[0]=severity=~\"warning|critical\"",
        "inProgress.alerts.prometheusUrl=http://prometheus-operated.monitoring.svc:9090",
        "inProgress.alerts.queries[0]=ALERTS{alertstate=\"firing\"\\,severity=\"critical\"}",
        "inProgress.alerts.prometheusAuth.secretName=kumaco-prometheus",
        "inProgress.alerts.prometheusAuth.caKey=ca.crt",
        "inProgress.alerts.unreachable=allow",
    ]);
    let args = deployment_args(&objects);
    for flag in [
        "--silences=false",
        "--block-alerts",
        "--block-alerts-ignore=^(Watchdog|InfoInhibitor)$",
        r#"--block-alerts-matcher=severity=~"warning|critical""#,
        "--prometheus-url=http://prometheus-operated.monitoring.svc:9090",
        r#"--block-query=ALERTS{alertstate="firing",severity="critical"}"#,
        "--prometheus-ca-file=/etc/kumaco/prometheus/ca.crt",
        "--block-alerts-interval=15s",
        "--alerts-unreachable=allow",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--silence-lease")),
        "silences.enabled=false passes no flag only holding reads: {args:?}"
    );
    // The container's args start with the subcommand.
    let mut argv = vec!["kumaco".to_string()];
    argv.extend(args);
    let cli = kumaco::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{e}"));
    let kumaco::cli::Command::Run(run) = cli.command else {
        unreachable!("argv starts with run")
    };
    let settings = kumaco::config::Settings::from_args(&run, Some("kumaco".into()), None)
        .unwrap_or_else(|e| panic!("the chart's flags: {e}"));
    assert!(settings.gates.alerts.is_some());
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .unwrap();
    let pod = &deployment.data["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["volumeMounts"][0]["mountPath"],
        "/etc/kumaco/prometheus"
    );
    assert_eq!(
        pod["volumes"][0]["secret"]["secretName"],
        "kumaco-prometheus"
    );
    let client = ApiServer::shared().client().await.unwrap();
    let ns: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "kumaco" }
    }))
    .unwrap();
    apply(&client, &ns, false).await;
    for obj in &objects {
        apply(&client, obj, true).await;
    }

    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let out = Command::new(&helm)
        .args(["template", "kumaco"])
        .arg(repo().join("charts/kumaco"))
        .args(["--kube-version", "1.37.2"])
        .args(["--set", "inProgress.enabled=true"])
        .args(["--set", "inProgress.alerts.alertmanager=true"])
        .output()
        .expect("running helm template");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("inProgress.alerts.alertmanager needs silences.alertmanagerUrls"),
        "{stderr}"
    );
}

/// `inProgress.blockPodSelectors` passes `--block-pod-selector` and grants the pods
/// right (a ClusterRole of its own, read only); without it, nothing about pods.
#[tokio::test]
async fn blocking_pods_value_passes_its_flag_and_grants_pods_only_then() {
    let pods_rules = |objects: &[DynamicObject]| -> Vec<serde_json::Value> {
        objects
            .iter()
            .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "ClusterRole"))
            .flat_map(|o| o.data["rules"].as_array().cloned().unwrap_or_default())
            .filter(|r| r["resources"].to_string().contains("\"pods\""))
            .collect()
    };
    // The PodDisruptionBudget gate lists pods too (its own ClusterRole): off here.
    let without = render(&[
        "inProgress.enabled=true",
        "inProgress.podDisruptionBudgets=false",
    ]);
    assert!(
        pods_rules(&without).is_empty(),
        "pods granted without the value"
    );
    assert!(
        !deployment_args(&without)
            .iter()
            .any(|a| a.starts_with("--block-pod-selector"))
    );
    let with = render(&[
        "inProgress.enabled=true",
        "inProgress.podDisruptionBudgets=false",
        "inProgress.blockPodSelectors={app=postgres}",
        "inProgress.maxInProgressPer={topology.kubernetes.io/zone=1}",
        "inProgress.startInterval=10m",
        "inProgress.completeOnReboot=false",
        "conditionNames.inProgress=kured.dev/maintenance-in-progress",
    ]);
    assert_eq!(
        pods_rules(&with),
        [
            serde_json::json!({ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"] })
        ]
    );
    let args = deployment_args(&with);
    for flag in [
        "--block-pod-selector=app=postgres",
        "--max-in-progress-per=topology.kubernetes.io/zone=1",
        "--start-interval=10m",
        "--count-unavailable=true",
        "--complete-on-reboot=false",
        "--in-progress-condition=kured.dev/maintenance-in-progress",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    // The default names are not repeated as flags.
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--under-maintenance-condition")),
        "{args:?}"
    );
    let client = ApiServer::shared().client().await.unwrap();
    for obj in with
        .iter()
        .filter(|o| o.metadata.name.as_deref() == Some("kumaco-pods"))
    {
        apply(&client, obj, true).await;
    }
}

/// The uninstall hook's arguments and rights: `--ignore-not-found` always (a release that
/// never ran has nothing to remove), `--shadow` with `dryRun` (a shadow wrote nothing),
/// and `get` on Leases only with a `fieldManager` set (it may name another instance's
/// Lease, which the hook must read before removing anything).
#[test]
fn uninstall_hook_passes_shadow_and_reads_the_lease_a_set_field_manager_names() {
    let hook = |objects: &[DynamicObject], kind: &str| {
        objects
            .iter()
            .find(|o| {
                o.types.as_ref().is_some_and(|t| t.kind == kind)
                    && o.metadata.name.as_deref() == Some("kumaco-uninstall")
            })
            .unwrap_or_else(|| panic!("no {kind} kumaco-uninstall"))
            .clone()
    };
    let job_args = |objects: &[DynamicObject]| -> Vec<String> {
        serde_json::from_value(
            hook(objects, "Job").data["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
        )
        .unwrap()
    };
    let reads_leases = |objects: &[DynamicObject]| {
        hook(objects, "ClusterRole").data["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == serde_json::json!(["leases"]))
    };

    let defaults = render(&[]);
    let args = job_args(&defaults);
    assert!(args.iter().any(|a| a == "--ignore-not-found"), "{args:?}");
    assert!(!args.iter().any(|a| a == "--shadow"), "{args:?}");
    assert!(
        !reads_leases(&defaults),
        "Leases read without a fieldManager"
    );

    let shadow = render(&["dryRun=true", "fieldManager=kumaco/kumaco/live"]);
    let args = job_args(&shadow);
    for flag in [
        "--shadow",
        "--ignore-not-found",
        "--field-manager=kumaco/kumaco/live",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    assert!(reads_leases(&shadow), "the named Lease cannot be read");
}

/// docs/install.md's rights table against every rule the chart grants kumaco: by default,
/// with `--in-progress` alone (its PodDisruptionBudget gate is on by default: those rights
/// must be in a row granted with `--in-progress`), and with every option that adds one
/// (blocking pods, an object check, node events, leader election off). A right granted
/// and not in the table is a drift. The uninstall hook's rights are its own
/// (docs/uninstall.md).
#[test]
fn the_install_pages_rights_table_names_every_rule_the_chart_grants() {
    let default = render(&[]);
    let in_progress = render(&["inProgress.enabled=true"]);
    let everything = render(&[
        "leaderElection.enabled=false",
        "inProgress.enabled=true",
        "inProgress.blockPodSelectors={app=postgres}",
        "nodeEvents=true",
        "inProgress.objectChecks[0].apiVersion=ceph.rook.io/v1",
        "inProgress.objectChecks[0].kind=CephCluster",
        "inProgress.objectChecks[0].resource=cephclusters",
        "inProgress.objectChecks[0].namespace=rook-ceph",
        "inProgress.objectChecks[0].name=rook-ceph",
        "inProgress.objectChecks[0].expression=has(object.status)",
    ]);
    let install = read_repo("docs/install.md");
    let table = &install[install
        .find("### Rights")
        .expect("docs/install.md: ### Rights")..];
    // Each row's cells: the right, when it is granted, ...
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| l.trim_start_matches('|').split(" | ").collect())
        .collect();
    assert!(rows.len() >= 8, "{rows:?}");
    let words = |cell: &str| -> Vec<String> {
        cell.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    // kumaco's rules (not the uninstall hook's): (kind, name, resource, verbs).
    let rules = |objects: &[DynamicObject]| -> Vec<(String, String, String, Vec<String>)> {
        let mut out = Vec::new();
        for obj in objects {
            let kind = obj
                .types
                .as_ref()
                .map(|t| t.kind.clone())
                .unwrap_or_default();
            let hook = obj
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("helm.sh/hook"));
            if !matches!(kind.as_str(), "Role" | "ClusterRole") || hook {
                continue;
            }
            for rule in obj.data["rules"].as_array().expect("rules") {
                let verbs: Vec<String> = rule["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                for resource in rule["resources"].as_array().unwrap() {
                    let resource = resource.as_str().unwrap().to_string();
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    out.push((kind.clone(), name, resource, verbs.clone()));
                }
            }
        }
        out
    };
    let by_default = rules(&default);
    let mut checked = 0;
    for (objects, granted_with) in [
        (&default, None),
        (&in_progress, Some("`--in-progress`")),
        (&everything, None),
    ] {
        for (kind, name, resource, verbs) in rules(objects) {
            if granted_with.is_some() && by_default.iter().any(|r| r.2 == resource && r.3 == verbs)
            {
                continue;
            }
            // An object check's resource is whatever the check reads.
            let right = if resource == "cephclusters" {
                "`--block-unless`".to_string()
            } else {
                format!("`{resource}`")
            };
            let row = rows.iter().find(|cells| {
                cells[0].contains(&right)
                    && verbs.iter().all(|v| words(cells[0]).contains(v))
                    && granted_with.is_none_or(|w| cells.get(1).is_some_and(|c| c.contains(w)))
            });
            assert!(
                row.is_some(),
                "docs/install.md's rights table has no row granting {verbs:?} on {right}{} \
                 (the chart's {kind} {name} does)",
                granted_with.map_or(String::new(), |w| format!(" with {w}"))
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "{checked} rules checked");
}

/// The rendered Secret `name`'s keys, decoded.
fn secret_data(
    objects: &[DynamicObject],
    name: &str,
) -> std::collections::BTreeMap<String, String> {
    use base64::Engine;
    let secret = objects
        .iter()
        .find(|o| {
            o.types.as_ref().is_some_and(|t| t.kind == "Secret")
                && o.metadata.name.as_deref() == Some(name)
        })
        .unwrap_or_else(|| panic!("no Secret {name}"));
    secret.data["data"]
        .as_object()
        .expect("data")
        .iter()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap();
            (k.clone(), String::from_utf8(bytes).unwrap())
        })
        .collect()
}

/// The rendered Deployment's Pod spec.
fn pod_spec(objects: &[DynamicObject]) -> serde_json::Value {
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .expect("a Deployment");
    deployment.data["spec"]["template"]["spec"].clone()
}

/// The notifications' values: the URL and the sinks' file go in the chart's Secret (or
/// the operator's), never in the args or a ConfigMap; the Secrets are mounted where the
/// flags point, and kumaco's own flag checks accept what they hold there; a change of
/// them rolls the Pods; without a sink, nothing of it.
#[tokio::test]
async fn notification_values_pass_files_never_urls() {
    let url = "slack://hook:T00000000-B00000000-XXXXXXXXXXXXXXXXXXXXXXXX@webhook";
    let inline = "https://events.example.com/secret-token";
    let sets = [
        format!("notifications.url={url}"),
        "notifications.templates.drain=Draining node %s".to_string(),
        "notifications.transitions=started\\,completed".to_string(),
        "notifications.clusterName=prod-eu1".to_string(),
        "notifications.waitingAfter=2h".to_string(),
        "notifications.config.sinks[0].name=events".to_string(),
        "notifications.config.sinks[0].type=cloudevents".to_string(),
        format!("notifications.config.sinks[0].url={inline}"),
        "notifications.config.sinks[1].name=oncall".to_string(),
        "notifications.config.sinks[1].urlFile=/etc/kumaco/notify/oncall-url".to_string(),
        "notifications.secrets={kumaco-sink-urls}".to_string(),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let objects = render(&sets);
    // No URL in clear anywhere: not in the args, the environment, a ConfigMap.
    let text = serde_json::to_string(&objects).unwrap();
    for secret in [url, inline] {
        assert!(
            !text.contains(secret),
            "{secret} in clear in the chart's objects"
        );
    }
    let args = deployment_args(&objects);
    for flag in [
        "--notify-url-file=/etc/kumaco/notify/url",
        "--message-template-drain=Draining node %s",
        "--notify-transitions=started,completed",
        "--notify-config=/etc/kumaco/notify/config.yaml",
        "--cluster-name=prod-eu1",
        "--notify-waiting-after=2h",
        "--notify-not-back-after=30m",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--notify-url=")),
        "{args:?}"
    );
    let data = secret_data(&objects, "kumaco-notifications");
    assert_eq!(data["url"], url);
    let config: serde_json::Value = serde_saphyr::from_str(&data["config.yaml"]).unwrap();
    assert_eq!(config["sinks"][0]["url"], inline, "{config}");
    let pod = pod_spec(&objects);
    let mount = &pod["containers"][0]["volumeMounts"][0];
    assert_eq!(
        (&mount["name"], &mount["mountPath"], &mount["readOnly"]),
        (
            &serde_json::json!("notifications"),
            &serde_json::json!("/etc/kumaco/notify"),
            &serde_json::json!(true)
        )
    );
    assert_eq!(pod["volumes"][0]["name"], "notifications");
    assert_eq!(
        pod["volumes"][0]["projected"]["sources"],
        serde_json::json!([
            { "secret": { "name": "kumaco-notifications" } },
            { "secret": { "name": "kumaco-sink-urls" } },
        ])
    );

    // What kumaco reads there: the Secrets' keys as the kubelet writes them, in a
    // directory of the test's for /etc/kumaco/notify.
    let mounted = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kumaco-chart-notify-{}", std::process::id()));
    std::fs::create_dir_all(&mounted).unwrap();
    let here = |text: &str| text.replace("/etc/kumaco/notify", &mounted.display().to_string());
    for (key, value) in &data {
        std::fs::write(mounted.join(key), here(value)).unwrap();
    }
    std::fs::write(
        mounted.join("oncall-url"),
        "generic://oncall.example.com/hook",
    )
    .unwrap();
    let mut argv = vec!["kumaco".to_string()];
    argv.extend(args.iter().map(|a| here(a)));
    let cli = kumaco::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{e}"));
    let kumaco::cli::Command::Run(run) = cli.command else {
        unreachable!("argv starts with run")
    };
    let settings = kumaco::config::Settings::from_args(&run, Some("kumaco".into()), None)
        .unwrap_or_else(|e| panic!("the chart's flags: {e}"));
    let sinks: Vec<&str> = (settings.notify.sinks.iter())
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(sinks, ["notify-url", "events", "oncall"]);
    let _ = std::fs::remove_dir_all(&mounted);

    // The API server takes every object.
    let client = ApiServer::shared().client().await.unwrap();
    let ns: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "kumaco" }
    }))
    .unwrap();
    apply(&client, &ns, false).await;
    for obj in &objects {
        apply(&client, obj, true).await;
    }

    // A change of the URL rolls the Pods: kumaco reads it at start-up.
    let checksum = |objects: &[DynamicObject]| {
        objects
            .iter()
            .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
            .unwrap()
            .data["spec"]["template"]["metadata"]["annotations"]["checksum/notifications"]
            .clone()
    };
    let before = checksum(&objects);
    let mut changed = sets.clone();
    changed[0] =
        "notifications.url=slack://hook:T11111111-B11111111-YYYYYYYYYYYYYYYYYYYYYYYY@webhook";
    assert!(before.is_string(), "{before}");
    assert_ne!(checksum(&render(&changed)), before);

    // The operator's Secret: its key is the file, and the chart makes none.
    let own = render(&[
        "notifications.existingSecret=kumaco-notify",
        "notifications.urlKey=slack",
    ]);
    let args = deployment_args(&own);
    assert!(
        args.iter()
            .any(|a| a == "--notify-url-file=/etc/kumaco/notify/slack"),
        "{args:?}"
    );
    assert!(
        !own.iter()
            .any(|o| o.types.as_ref().is_some_and(|t| t.kind == "Secret")),
        "a Secret made beside the operator's"
    );
    assert_eq!(
        pod_spec(&own)["volumes"][0]["projected"]["sources"],
        serde_json::json!([{ "secret": { "name": "kumaco-notify" } }])
    );

    // Without a sink: no flag, no Secret, no mount.
    let defaults = render(&[]);
    let args = deployment_args(&defaults);
    for prefix in ["--notify", "--message-template", "--cluster-name"] {
        assert!(!args.iter().any(|a| a.starts_with(prefix)), "{args:?}");
    }
    assert!(pod_spec(&defaults).get("volumes").is_none());
    assert!(
        !defaults
            .iter()
            .any(|o| o.types.as_ref().is_some_and(|t| t.kind == "Secret"))
    );

    // What kumaco would refuse at start-up, the chart refuses first.
    let both = refused(&["notifications.url=x", "notifications.existingSecret=y"]);
    assert!(
        both.contains("notifications.url and notifications.existingSecret: give one"),
        "{both}"
    );
    let orphan = refused(&["notifications.transitions=started"]);
    assert!(
        orphan.contains("are for the chat of notifications.url or notifications.existingSecret"),
        "{orphan}"
    );
}

/// The notifications' record (`<lease>-notified`): its rule is granted with or without
/// sinks (a leader without any deletes a stale record), follows the Lease's name, and
/// `create` on Leases is there once, in the leader election's Role or without it here.
#[test]
fn the_notifications_record_is_granted_with_or_without_leader_election() {
    let rules_of = |objects: &[DynamicObject], name: &str| -> Vec<serde_json::Value> {
        objects
            .iter()
            .filter(|o| {
                o.types.as_ref().is_some_and(|t| t.kind == "Role")
                    && o.metadata.name.as_deref() == Some(name)
            })
            .flat_map(|o| o.data["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let creates = |objects: &[DynamicObject]| -> Vec<String> {
        objects
            .iter()
            .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "Role"))
            .filter(|o| {
                o.metadata
                    .annotations
                    .as_ref()
                    .is_none_or(|a| !a.contains_key("helm.sh/hook"))
            })
            .filter(|o| {
                o.data["rules"].as_array().unwrap().iter().any(|r| {
                    r["resources"] == serde_json::json!(["leases"])
                        && r["verbs"] == serde_json::json!(["create"])
                })
            })
            .filter_map(|o| o.metadata.name.clone())
            .collect()
    };
    let record = |name: &str| {
        serde_json::json!({
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [name],
            "verbs": ["get", "patch", "delete"],
        })
    };
    let defaults = render(&[]);
    assert_eq!(
        rules_of(&defaults, "kumaco-notifications"),
        [record("kumaco-notified")]
    );
    assert_eq!(creates(&defaults), ["kumaco-leader-election"]);

    let alone = render(&[
        "leaderElection.enabled=false",
        "leaderElection.leaseName=pool-a",
    ]);
    let rules = rules_of(&alone, "kumaco-notifications");
    assert!(rules.contains(&record("pool-a-notified")), "{rules:?}");
    assert_eq!(creates(&alone), ["kumaco-notifications"]);
}
