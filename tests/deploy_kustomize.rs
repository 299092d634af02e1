//! The kustomize install path, `kubectl apply --server-side -k deploy/overlays/example`,
//! on a real API server that, like most clusters, has no Prometheus Operator CRDs:
//!
//! - the example overlay, rendered by a real `kubectl kustomize` (the kustomize built into
//!   kubectl, which `kubectl apply -k` runs; see `testkit::gobuild::kubectl`), holds only built-in
//!   kinds, and the API server accepts every object (server-side apply, strict field
//!   validation, for real: namespaces first, as kustomize orders them);
//! - its patches took effect (image, flags);
//! - the optional ServiceMonitor component, added the way docs/install.md shows, adds
//!   a Service and a ServiceMonitor, and the ServiceMonitor is exactly what a cluster
//!   without the CRDs refuses;
//! - the notifications component, on an overlay that replaces the args list, mounts the
//!   Secret `kumaco-notify` and points `--notify-url-file` at its key through the
//!   environment; the URL the docs' `kubectl create secret` stores there is one kumaco's
//!   flags accept, and the component creates no Secret of its own;
//! - the NetworkPolicy component applies, and the PrometheusRule component renders (and
//!   is refused the same way without the CRDs);
//! - the kured v2 overlay applies the same way, passes flags kumaco accepts as kured v2's
//!   brain, and grants what they need: the API server's authorizer lets kumaco's
//!   ServiceAccount read the PodDisruptionBudgets and list pods cluster-wide, and post
//!   events about Nodes.

use std::path::Path;
use std::process::Command;

use kube::api::DynamicObject;
use testkit::ApiServer;
use testkit::files::{copy_dir, repo};
use testkit::manifests::{self, ApplyOptions};
use testkit::time::poll_until;

const APPLY: ApplyOptions = ApplyOptions {
    field_manager: "kumaco-kustomize-test",
    dry_run: false,
    default_namespace: None,
};

/// `kubectl kustomize DIR` (what `kubectl apply -k` renders), as objects.
fn build(dir: &Path) -> Vec<DynamicObject> {
    let kubectl = testkit::gobuild::kubectl().unwrap_or_else(|e| panic!("{e:#}"));
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("running kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).expect("kustomize prints UTF-8");
    manifests::parse(&yaml).unwrap_or_else(|e| panic!("kustomize's output: {e:#}\n{yaml}"))
}

fn api_version_and_kind(obj: &DynamicObject) -> (String, String) {
    let types = obj.types.as_ref().expect("apiVersion and kind");
    (types.api_version.clone(), types.kind.clone())
}

fn kinds(objects: &[DynamicObject]) -> Vec<String> {
    objects.iter().map(|o| api_version_and_kind(o).1).collect()
}

/// Only kinds every cluster has: core, apps, RBAC, admission policies.
fn assert_built_in_kinds(objects: &[DynamicObject], overlay: &str) {
    for obj in objects {
        let (api_version, kind) = api_version_and_kind(obj);
        assert!(
            matches!(
                api_version.as_str(),
                "v1" | "apps/v1"
                    | "policy/v1"
                    | "rbac.authorization.k8s.io/v1"
                    | "admissionregistration.k8s.io/v1"
            ),
            "the {overlay} overlay renders {api_version} {kind}, which a plain cluster may \
             not have: put it in an optional component"
        );
    }
}

#[tokio::test]
async fn example_overlay_applies_to_a_cluster_without_the_prometheus_operator() {
    let objects = build(&repo().join("deploy/overlays/example"));
    assert_built_in_kinds(&objects, "example");
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "Deployment",
        "PodDisruptionBudget",
        "ValidatingAdmissionPolicy",
    ] {
        assert!(
            kinds(&objects).iter().any(|k| k == kind),
            "no {kind}: {:?}",
            kinds(&objects)
        );
    }

    // The overlay's patches: its image and its flags.
    let deployment = objects
        .iter()
        .find(|o| api_version_and_kind(o).1 == "Deployment")
        .unwrap();
    let container = &deployment.data["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"], "registry.example.com/platform/kumaco:0.1.0",
        "{container}"
    );
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    for flag in [
        "--namespace=maintenance",
        "--node-selector=!node-role.kubernetes.io/control-plane",
    ] {
        assert!(args.contains(&flag), "{flag} missing from {args:?}");
    }

    // What `kubectl apply --server-side -k` does with them, on an API server without the
    // monitoring.coreos.com CRDs.
    let client = ApiServer::shared().client().await.expect("admin client");
    for obj in &objects {
        manifests::apply(&client, obj, &APPLY)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }

    // The optional component, added the way docs/install.md shows: a copy of the
    // example overlay next to it, with `components:` added (in a copy of deploy/, so the
    // relative paths are the real ones).
    let deploy = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kumaco-kustomize-{}", std::process::id()))
        .join("deploy");
    let _ = std::fs::remove_dir_all(&deploy);
    copy_dir(&repo().join("deploy"), &deploy);
    let prod = deploy.join("overlays/prod");
    copy_dir(&deploy.join("overlays/example"), &prod);
    let mut kustomization = std::fs::read_to_string(prod.join("kustomization.yaml")).unwrap();
    kustomization.push_str("components:\n  - ../../components/servicemonitor\n");
    std::fs::write(prod.join("kustomization.yaml"), kustomization).unwrap();
    let monitored = build(&prod);
    let added: Vec<String> = kinds(&monitored)
        .into_iter()
        .filter(|k| !kinds(&objects).contains(k))
        .collect();
    assert_eq!(
        added,
        ["Service", "ServiceMonitor"],
        "{:?}",
        kinds(&monitored)
    );
    let service_monitor = monitored
        .iter()
        .find(|o| api_version_and_kind(o).1 == "ServiceMonitor")
        .unwrap();
    let refused = manifests::apply(&client, service_monitor, &APPLY)
        .await
        .expect_err("this API server has no ServiceMonitor CRD");
    assert!(
        format!("{refused:#}").contains("404"),
        "a missing kind is a 404: {refused:#}"
    );

    // The node-events component on the same overlay, whose patch replaces the args list:
    // the flag comes through its environment variable, and the Role is in `default`.
    let mut kustomization = std::fs::read_to_string(prod.join("kustomization.yaml")).unwrap();
    kustomization.push_str("  - ../../components/node-events\n");
    std::fs::write(prod.join("kustomization.yaml"), kustomization).unwrap();
    let with_events = build(&prod);
    let deployment = with_events
        .iter()
        .find(|o| api_version_and_kind(o).1 == "Deployment")
        .unwrap();
    let env = &deployment.data["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "KUMACO_NODE_EVENTS" && e["value"] == "true"),
        "{env}"
    );
    let role = with_events
        .iter()
        .find(|o| {
            o.metadata.name.as_deref() == Some("kumaco-node-events")
                && api_version_and_kind(o).1 == "Role"
        })
        .expect("the node-events Role");
    assert_eq!(role.metadata.namespace.as_deref(), Some("default"));
    for obj in with_events
        .iter()
        .filter(|o| o.metadata.name.as_deref() == Some("kumaco-node-events"))
    {
        manifests::apply(&client, obj, &APPLY)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    // What the Role grants kumaco's ServiceAccount, as the API server's authorizer says:
    // creating events in `default`, and nothing more there. The RBAC authorizer reads
    // Roles and RoleBindings from its own informers, so a grant applied a moment ago
    // shows up a moment later: wait (with a deadline) for the grant, then check the
    // refusals against an authorizer that has seen both objects.
    poll_until(
        "the authorizer to let kumaco's ServiceAccount create events in default",
        std::time::Duration::from_secs(30),
        || may(&client, "create", "default"),
    )
    .await;
    for (verb, namespace, allowed) in [
        ("delete", "default", false),
        ("list", "default", false),
        ("create", "kube-system", false),
    ] {
        assert_eq!(
            may(&client, verb, namespace).await,
            allowed,
            "kumaco's ServiceAccount may {verb} events in {namespace}"
        );
    }

    notifications_component(&client, &prod, &with_events).await;

    // The guard-rail and alert components: a NetworkPolicy every cluster accepts, and a
    // PrometheusRule that needs the operator (tests/alerts.rs checks its rules).
    let guarded = deploy.join("overlays/guarded");
    copy_dir(&deploy.join("overlays/example"), &guarded);
    let mut kustomization = std::fs::read_to_string(guarded.join("kustomization.yaml")).unwrap();
    kustomization.push_str(
        "components:\n  - ../../components/networkpolicy\n  - ../../components/prometheusrule\n",
    );
    std::fs::write(guarded.join("kustomization.yaml"), kustomization).unwrap();
    let guarded = build(&guarded);
    let mut added: Vec<String> = kinds(&guarded)
        .into_iter()
        .filter(|k| !kinds(&objects).contains(k))
        .collect();
    added.sort();
    assert_eq!(
        added,
        ["NetworkPolicy", "PrometheusRule"],
        "{:?}",
        kinds(&guarded)
    );
    for obj in &guarded {
        match api_version_and_kind(obj).1.as_str() {
            "NetworkPolicy" => {
                manifests::apply(&client, obj, &APPLY)
                    .await
                    .unwrap_or_else(|e| panic!("{e:#}"));
            }
            "PrometheusRule" => {
                let refused = manifests::apply(&client, obj, &APPLY)
                    .await
                    .expect_err("this API server has no PrometheusRule CRD");
                assert!(format!("{refused:#}").contains("404"), "{refused:#}");
            }
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(deploy.parent().unwrap());
}

/// The notifications component added to `overlay` (whose patch replaces the args list),
/// built without it as `without`.
async fn notifications_component(client: &kube::Client, overlay: &Path, without: &[DynamicObject]) {
    use clap::Parser;
    use k8s_openapi::api::core::v1::Secret;

    let mut kustomization = std::fs::read_to_string(overlay.join("kustomization.yaml")).unwrap();
    kustomization.push_str("  - ../../components/notifications\n");
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).unwrap();
    let objects = build(overlay);
    assert_eq!(
        kinds(&objects),
        kinds(without),
        "the component adds no object: the Secret is the operator's"
    );
    let deployment = objects
        .iter()
        .find(|o| api_version_and_kind(o).1 == "Deployment")
        .unwrap();
    let pod = &deployment.data["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let env: Vec<(String, String)> = (container["env"].as_array().unwrap().iter())
        .filter_map(|e| Some((e["name"].as_str()?.into(), e["value"].as_str()?.into())))
        .collect();
    let file = env
        .iter()
        .find(|(name, _)| name == "KUMACO_NOTIFY_URL_FILE")
        .map(|(_, value)| value.clone())
        .unwrap_or_else(|| panic!("no KUMACO_NOTIFY_URL_FILE in {env:?}"));
    let mount = (container["volumeMounts"].as_array().unwrap().iter())
        .find(|m| m["name"] == "notifications")
        .unwrap_or_else(|| panic!("no notifications mount: {container}"));
    assert_eq!(mount["readOnly"], true, "{mount}");
    let dir = mount["mountPath"].as_str().unwrap();
    let key = file
        .strip_prefix(&format!("{dir}/"))
        .unwrap_or_else(|| panic!("{file} is not in the mount {dir}"));
    let volume = (pod["volumes"].as_array().unwrap().iter())
        .find(|v| v["name"] == "notifications")
        .unwrap_or_else(|| panic!("no notifications volume: {pod}"));
    assert_eq!(volume["secret"]["secretName"], "kumaco-notify", "{volume}");
    // The overlay's own flags are all still there.
    for flag in ["--namespace=maintenance", "--log-format=json"] {
        assert!(
            container["args"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == flag),
            "{flag} lost: {container}"
        );
    }

    // The Secret as docs/notifications.md creates it (`kubectl create secret generic
    // kumaco-notify --from-literal=url=...`), and its key where the kubelet would put it.
    let url = "slack://hook:T00000000-B00000000-XXXXXXXXXXXXXXXXXXXXXXXX@webhook";
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "kumaco-notify", "namespace": "kumaco" },
        "stringData": { "url": url },
    }))
    .unwrap();
    let secrets = kube::Api::<Secret>::namespaced(client.clone(), "kumaco");
    let _ = secrets.delete("kumaco-notify", &Default::default()).await;
    secrets.create(&Default::default(), &secret).await.unwrap();
    manifests::apply(client, deployment, &APPLY)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let stored = secrets.get("kumaco-notify").await.unwrap();
    let value = &stored
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .expect("the key")
        .0;
    let mounted = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kumaco-notify-{}", std::process::id()));
    std::fs::create_dir_all(&mounted).unwrap();
    std::fs::write(mounted.join(key), value).unwrap();
    // The variable's value, as the flag it is the default of.
    let mut argv = vec!["kumaco".to_string()];
    argv.extend(
        (container["args"].as_array().unwrap().iter()).filter_map(|a| a.as_str().map(String::from)),
    );
    argv.push(format!("--notify-url-file={}", mounted.join(key).display()));
    let cli = kumaco::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{e}"));
    let kumaco::cli::Command::Run(run) = cli.command else {
        panic!("the args start with `run`: {argv:?}")
    };
    let settings = kumaco::config::Settings::from_args(&run, Some("kumaco".into()), None)
        .unwrap_or_else(|e| panic!("the component's flags: {e}"));
    let sinks: Vec<&str> = (settings.notify.sinks.iter())
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(sinks, ["notify-url"]);
    let _ = std::fs::remove_dir_all(&mounted);
}

/// Whether the API server authorizes kumaco's ServiceAccount to `verb` events.k8s.io
/// events in `namespace` (a SubjectAccessReview).
async fn may(client: &kube::Client, verb: &str, namespace: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("system:serviceaccount:kumaco:kumaco".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                group: Some("events.k8s.io".into()),
                resource: Some("events".into()),
                verb: Some(verb.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    kube::Api::<SubjectAccessReview>::all(client.clone())
        .create(&Default::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}

/// `deploy/overlays/kured-v2`: kumaco as kured v2's brain in one overlay.
#[tokio::test]
async fn kured_v2_overlay_applies_and_grants_what_its_flags_need() {
    use clap::Parser;

    let objects = build(&repo().join("deploy/overlays/kured-v2"));
    assert_built_in_kinds(&objects, "kured-v2");
    let deployment = objects
        .iter()
        .find(|o| api_version_and_kind(o).1 == "Deployment")
        .unwrap();
    let container = &deployment.data["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"], "registry.example.com/platform/kumaco:0.1.0",
        "{container}"
    );
    let env = container["env"].as_array().expect("env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "KUMACO_NODE_EVENTS" && e["value"] == "true"),
        "node events: {env:?}"
    );
    // The flags, as kumaco reads them: the brain, its required and blocking conditions,
    // its ceilings, and the PodDisruptionBudget gate on by default.
    let mut argv = vec!["kumaco".to_string()];
    argv.extend(
        container["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(|a| a.as_str().map(String::from)),
    );
    let cli = kumaco::cli::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{e}"));
    let kumaco::cli::Command::Run(run) = cli.command else {
        panic!("the args start with `run`: {argv:?}")
    };
    let settings = kumaco::config::Settings::from_args(&run, Some("kumaco".into()), None)
        .unwrap_or_else(|e| panic!("the overlay's flags: {e}"));
    assert!(settings.in_progress.is_some(), "--in-progress: {argv:?}");
    assert!(
        settings.gates.budgets,
        "the PodDisruptionBudget gate: {argv:?}"
    );
    for flag in [
        "--require-condition=kured.dev/RebootRequired",
        "--block-condition=kured.dev/RebootBlocked",
        "--max-in-progress-per=topology.kubernetes.io/zone=1",
    ] {
        assert!(argv.iter().any(|a| a == flag), "{flag} missing: {argv:?}");
    }

    // Applied to a cluster of its own, the rights its flags need are granted.
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.expect("admin client");
    for obj in &objects {
        manifests::apply(&client, obj, &APPLY)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    for (verb, group, resource, namespace) in [
        ("list", "policy", "poddisruptionbudgets", ""),
        ("watch", "policy", "poddisruptionbudgets", ""),
        ("list", "", "pods", ""),
        ("create", "events.k8s.io", "events", "default"),
        ("patch", "", "nodes/status", ""),
    ] {
        poll_until(
            &format!("kumaco's ServiceAccount may {verb} {resource} in {namespace:?}"),
            std::time::Duration::from_secs(30),
            || may_on(&client, verb, group, resource, namespace),
        )
        .await;
    }
    assert!(
        !may_on(&client, "watch", "", "pods", "").await,
        "without --block-pod-selector kumaco watches no pod"
    );
}

/// Whether the API server authorizes kumaco's ServiceAccount (namespace `kumaco`) to
/// `verb` `resource` (a subresource after `/`) in `namespace` (empty: cluster-wide).
async fn may_on(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: &str,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let (resource, subresource) = match resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (resource, None),
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("system:serviceaccount:kumaco:kumaco".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource,
                verb: Some(verb.into()),
                namespace: (!namespace.is_empty()).then(|| namespace.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    kube::Api::<SubjectAccessReview>::all(client.clone())
        .create(&Default::default(), &review)
        .await
        .expect("a SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}
