//! The install commands of README.md and docs/install.md and docs/uninstall.md, run as written with a real
//! kubectl (built from the same Kubernetes module as the test API server, see
//! `testkit::gobuild::kubectl`) and a real helm, against the test API server.
//!
//! A fenced `sh` block preceded by `<!-- tested: NAME -->` is run verbatim by the test
//! named here for NAME, from a scratch copy of the repository's `deploy/` and `charts/`
//! (the commands copy and edit files), with `KUBECONFIG` set to the server's admin
//! kubeconfig. A line with a `# (needs ...)` comment (a kubelet, kind) is shown but not
//! run: nothing here runs Pods. Every marked block must be run by a test below, so the
//! docs and the tests cannot drift apart.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use testkit::ApiServer;
use testkit::cluster::UNDER_MAINTENANCE;
use testkit::docs::{DOCS, block, marked_blocks, runnable};
use testkit::files::{copy_dir, repo};
use testkit::kumaco::{KumacoProcess, Pod, StartOptions};
use testkit::manifests;
use testkit::nodes::{has_status, wait_for_condition};
use testkit::time::{poll_until, whole_second};

/// The longest a docs block may run: the slowest, `helm install`, takes seconds.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

/// A scratch directory holding copies of deploy/ and charts/, and `bin/` with kubectl,
/// helm and kumaco (ahead of anything else on PATH: the machine may have another kubectl).
struct Workdir {
    dir: PathBuf,
    bin: PathBuf,
}

impl Workdir {
    fn new(server: &ApiServer) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = server.dir().join(format!(
            "commands-{}",
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        for sub in ["deploy", "charts"] {
            copy_dir(&repo().join(sub), &dir.join(sub));
        }
        let bin = dir.join(".bin");
        std::fs::create_dir_all(&bin).unwrap();
        let kubectl = testkit::gobuild::kubectl().unwrap_or_else(|e| panic!("{e:#}"));
        let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
        for (name, target) in [
            ("kubectl", kubectl),
            ("helm", helm),
            ("kumaco", PathBuf::from(env!("CARGO_BIN_EXE_kumaco"))),
        ] {
            std::os::unix::fs::symlink(target, bin.join(name)).unwrap();
        }
        Workdir { dir, bin }
    }

    /// Runs `script` with bash (`-euo pipefail`) as a user would in a clone of the
    /// repository; its stdout. Fails the test with both outputs if any command fails, or
    /// if the script is not done within [`BLOCK_TIMEOUT`].
    fn run(&self, server: &ApiServer, name: &str, script: &str) -> String {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let home = self.dir.join(".home");
        std::fs::create_dir_all(&home).unwrap();
        // coreutils' timeout signals the whole process group: kubectl too.
        let out = Command::new("timeout")
            .arg(BLOCK_TIMEOUT.as_secs().to_string())
            .args(["bash", "-euo", "pipefail", "-c", script])
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("HOME", home)
            .env("KUBECONFIG", server.kubeconfig())
            .output()
            .expect("running bash");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_ne!(
            out.status.code(),
            Some(124),
            "block {name} did not finish within {BLOCK_TIMEOUT:?} (a `kubectl delete` of a \
             Namespace waits for ever here: no namespace controller runs):\n{script}\n--- \
             stdout\n{stdout}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "block {name} failed ({}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// Runs the docs' block `name` (its runnable lines).
    fn run_block(&self, server: &ApiServer, name: &str) -> String {
        self.run(server, name, &runnable(&block(name), &[]))
    }
}

/// The object as stored, or `None` if it does not exist; `namespace` for namespaced
/// objects that leave it out (Helm's).
async fn get(client: &kube::Client, obj: &DynamicObject, namespace: &str) -> Option<DynamicObject> {
    let types = obj.types.as_ref().expect("apiVersion and kind");
    let resource = ApiResource::from_gvk(&GroupVersionKind::try_from(types).unwrap());
    let cluster_scoped = [
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    .contains(&types.kind.as_str());
    let api: Api<DynamicObject> = if cluster_scoped {
        Api::all_with(client.clone(), &resource)
    } else {
        let ns = obj.metadata.namespace.as_deref().unwrap_or(namespace);
        Api::namespaced_with(client.clone(), ns, &resource)
    };
    api.get_opt(obj.metadata.name.as_deref().unwrap())
        .await
        .unwrap_or_else(|e| panic!("getting {} {:?}: {e}", types.kind, obj.metadata.name))
}

/// Every object of `installed` is gone after `what`, but the Namespaces, which hold the
/// windows, and the objects labelled `kumaco.dev/uninstall: keep` (the maintenance
/// managers' Role and RoleBinding, who still edit the windows), which stay. No namespace
/// controller runs here to finish deleting a Namespace: one being deleted counts as gone.
async fn assert_gone_but_namespaces(
    client: &kube::Client,
    installed: &[DynamicObject],
    what: &str,
) {
    for obj in installed {
        let left = get(client, obj, "kumaco").await;
        let gone = left
            .as_ref()
            .is_none_or(|o| o.metadata.deletion_timestamp.is_some());
        let is_namespace = obj.types.as_ref().is_some_and(|t| t.kind == "Namespace");
        let kept = obj
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("kumaco.dev/uninstall").map(String::as_str) == Some("keep"));
        assert_eq!(
            gone,
            !(is_namespace || kept),
            "{} after {what}: {}",
            describe(obj),
            if gone { "gone" } else { "left" }
        );
    }
}

fn describe(obj: &DynamicObject) -> String {
    format!(
        "{} {}",
        obj.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("?"),
        obj.metadata.name.as_deref().unwrap_or("?")
    )
}

/// kumaco with `flags`, as Pod `pod` of namespace `kumaco` runs it (here a process in
/// the Pod's place: no kubelet), leader election on.
async fn run_as_pod(server: &ApiServer, flags: &[&str], pod: &str) -> KumacoProcess {
    let options = StartOptions {
        leader: Some(Pod {
            name: pod.into(),
            namespace: "kumaco".into(),
        }),
        ..StartOptions::default()
    };
    KumacoProcess::start_with(env!("CARGO_BIN_EXE_kumaco"), server, flags, &options)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Every block the docs mark is one this file runs: a new marked block needs a test.
#[test]
fn every_marked_block_is_run() {
    let names: Vec<String> = marked_blocks().into_keys().collect();
    assert_eq!(
        names,
        [
            "helm-install",
            "helm-uninstall",
            "helm-upgrade",
            "kustomize-check",
            "kustomize-install",
            "kustomize-uninstall",
            "laptop-install",
            "laptop-watch",
            "laptop-window",
            "readme-install",
        ],
        "marked blocks in {DOCS:?}"
    );
}

#[tokio::test]
async fn kustomize_install_commands_work_as_written() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();

    // README: copy the example overlay, apply it.
    let readme = Workdir::new(&server);
    let applied = readme.run_block(&server, "readme-install");
    assert!(
        applied.contains("deployment.apps/kumaco serverside-applied"),
        "{applied}"
    );

    // docs/install.md: the same, looking first, in a clean copy.
    let ops = Workdir::new(&server);
    let out = ops.run_block(&server, "kustomize-install");
    let rendered = ops.run(
        &server,
        "kustomize",
        "kubectl kustomize deploy/overlays/prod",
    );
    assert!(
        out.starts_with(&rendered),
        "`kubectl kustomize` printed first"
    );
    let objects = manifests::parse(&rendered).unwrap();
    assert!(objects.len() >= 10, "{} objects", objects.len());
    for obj in &objects {
        let stored = get(&client, obj, "kumaco").await;
        assert!(stored.is_some(), "{} was not created", describe(obj));
        assert!(
            out.contains(&format!("{} serverside-applied", kubectl_name(obj))),
            "kubectl did not report {}:\n{out}",
            kubectl_name(obj)
        );
    }
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .unwrap();
    let stored = get(&client, deployment, "kumaco").await.unwrap();
    assert_eq!(
        stored.data["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/platform/kumaco:0.1.0"
    );

    // Once kumaco runs (here as a process in the Pod's place: no kubelet), the Lease
    // command prints the leader's Pod name.
    let pod = "kumaco-7b8c9d6f5-q4w2e";
    let _kumaco = run_as_pod(
        &server,
        &[
            "--namespace=kumaco",
            "--node-selector=!node-role.kubernetes.io/control-plane",
        ],
        pod,
    )
    .await;
    let holder = ops.run_block(&server, "kustomize-check");
    assert_eq!(holder, format!("{pod}\n"));
}

/// docs/uninstall.md's kustomize uninstall after its install, with kumaco running in
/// the Pod's place, a node in maintenance and a window in each of the overlay's
/// namespaces: no kumaco condition is left, every object of the overlay is gone but its
/// namespaces and the maintenance managers' Role and RoleBinding, and every window stays.
#[tokio::test]
async fn kustomize_uninstall_keeps_the_windows_and_their_namespaces() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    let work = Workdir::new(&server);
    work.run_block(&server, "kustomize-install");
    let installed = manifests::parse(&work.run(
        &server,
        "kustomize",
        "kubectl kustomize deploy/overlays/prod",
    ))
    .unwrap();
    let node = "worker-1";
    let obj: Node = serde_json::from_value(json!({ "metadata": { "name": node } })).unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
    let start = whole_second(Timestamp::now() - SignedDuration::from_secs(60));
    let windows = ["kumaco", "maintenance"];
    for ns in windows {
        let window: ConfigMap = serde_json::from_value(json!({
            "metadata": {
                "name": "weekly",
                "labels": { "kured.dev/maintenance-window": "" },
            },
            "data": { "startTime": start.to_string(), "duration": "1h", "nodeSelector": "" },
        }))
        .unwrap();
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &window)
            .await
            .unwrap();
    }
    // The overlay's flags, as its Pod would run them.
    let mut kumaco = run_as_pod(
        &server,
        &[
            "--namespace=kumaco",
            "--namespace=maintenance",
            "--node-selector=!node-role.kubernetes.io/control-plane",
        ],
        "kumaco-7b8c9d6f5-q4w2e",
    )
    .await;
    wait_for_condition(
        &client,
        node,
        UNDER_MAINTENANCE,
        Duration::from_secs(60),
        |c| has_status(c, Some("True")),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));

    // The block, as a user runs it; meanwhile the kubelet's part: once the Deployment is
    // at 0 replicas, its Pod gets SIGTERM (and releases the Lease).
    let (out, stopped) = std::thread::scope(|s| {
        let kubelet = s.spawn(|| {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let client = server.client().await.unwrap();
                let deployments: Api<Deployment> = Api::namespaced(client, "kumaco");
                poll_until(
                    "the Deployment scaled to 0",
                    Duration::from_secs(60),
                    || async { deployments.get("kumaco").await.unwrap().spec.replicas == Some(0) },
                )
                .await;
                kumaco.terminate(Duration::from_secs(10)).await.unwrap()
            })
        });
        let out = work.run_block(&server, "kustomize-uninstall");
        (out, kubelet.join().unwrap())
    });
    assert!(stopped.success(), "kumaco exited {stopped}");
    for line in [
        "removed 1 condition(s) from 1 node(s)",
        "deleted Lease kumaco/kumaco",
        "deployment.apps \"kumaco\" deleted",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }

    let stored = Api::<Node>::all(client.clone()).get(node).await.unwrap();
    assert!(
        testkit::nodes::condition(&stored, UNDER_MAINTENANCE).is_none(),
        "kumaco's condition is left: {:?}",
        stored.status
    );
    assert_gone_but_namespaces(&client, &installed, "the kustomize uninstall").await;
    // The people who edit the kept windows keep their rights.
    for kind in ["Role", "RoleBinding"] {
        let role = installed
            .iter()
            .find(|o| {
                o.metadata.name.as_deref() == Some("maintenance-manager")
                    && o.metadata.namespace.as_deref() == Some("maintenance")
                    && o.types.as_ref().is_some_and(|t| t.kind == kind)
            })
            .unwrap_or_else(|| panic!("the overlay installs the maintenance managers' {kind}"));
        let left = get(&client, role, "maintenance").await;
        assert!(
            left.is_some_and(|o| o.metadata.deletion_timestamp.is_none()),
            "the maintenance managers' {kind} was deleted with kumaco: they could no \
             longer edit the windows kept"
        );
    }
    for ns in windows {
        let window = Api::<ConfigMap>::namespaced(client.clone(), ns)
            .get_opt("weekly")
            .await
            .unwrap();
        assert!(window.is_some(), "the window in {ns} was deleted");
    }
}

/// `kind.group/name` as kubectl names an object in its output.
fn kubectl_name(obj: &DynamicObject) -> String {
    let types = obj.types.as_ref().unwrap();
    let group = types.api_version.rsplit_once('/').map(|(g, _)| g);
    let kind = types.kind.to_lowercase();
    match group {
        Some(group) => format!("{kind}.{group}/{}", obj.metadata.name.as_deref().unwrap()),
        None => format!("{kind}/{}", obj.metadata.name.as_deref().unwrap()),
    }
}

#[tokio::test]
async fn helm_install_upgrade_uninstall_work_as_written() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    let work = Workdir::new(&server);
    let manifest = |work: &Workdir| {
        let text = work.run(
            &server,
            "manifest",
            "helm get manifest kumaco --namespace kumaco",
        );
        manifests::parse(&text).unwrap()
    };

    let notes = work.run_block(&server, "helm-install");
    assert!(notes.contains("STATUS: deployed"), "{notes}");
    let installed = manifest(&work);
    assert!(installed.len() >= 10, "{} objects", installed.len());
    for obj in &installed {
        assert!(
            get(&client, obj, "kumaco").await.is_some(),
            "{} was not created",
            describe(obj)
        );
    }
    let deployment = |objects: &[DynamicObject]| {
        objects
            .iter()
            .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
            .cloned()
            .unwrap()
    };
    let before = get(&client, &deployment(&installed), "kumaco")
        .await
        .unwrap();
    let container = &before.data["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "registry.example.com/platform/kumaco:0.1.0"
    );
    let args = container["args"].to_string();
    assert!(args.contains("--namespace=maintenance"), "{args}");
    assert!(!args.contains("\"--in-progress\""), "{args}");

    let upgraded = work.run_block(&server, "helm-upgrade");
    assert!(upgraded.contains("REVISION: 2"), "{upgraded}");
    let after = get(&client, &deployment(&manifest(&work)), "kumaco")
        .await
        .unwrap();
    let container = &after.data["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "registry.example.com/platform/kumaco:0.1.1"
    );
    let args = container["args"].to_string();
    for flag in [
        "--namespace=maintenance",
        "--in-progress",
        "--require-condition=kured.dev/RebootRequired",
    ] {
        assert!(args.contains(flag), "{flag} missing after upgrade: {args}");
    }

    // helm waits for the chart's pre-delete hook Job; no kubelet runs it here, so the
    // test does (tests/uninstall.rs has it remove a running instance's conditions).
    let (uninstalled, hook) = std::thread::scope(|s| {
        let hook = s.spawn(|| {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(testkit::hooks::run_job(
                    &server,
                    std::path::Path::new(env!("CARGO_BIN_EXE_kumaco")),
                    "kumaco",
                    "kumaco-uninstall",
                    Duration::from_secs(120),
                ))
        });
        let out = work.run_block(&server, "helm-uninstall");
        (out, hook.join().unwrap())
    });
    let hook = hook.unwrap_or_else(|e| panic!("{e:#}"));
    assert!(hook.status.success(), "{}{}", hook.stdout, hook.stderr);
    // No kumaco ran: the hook finds nothing to remove, and that does not fail helm.
    assert!(
        hook.stdout.contains("found nothing to remove")
            && hook.stdout.contains("(--ignore-not-found: done)"),
        "{}{}",
        hook.stdout,
        hook.stderr
    );
    assert!(uninstalled.contains("uninstalled"), "{uninstalled}");
    assert_gone_but_namespaces(&client, &installed, "helm uninstall").await;
}

/// "Try it on a laptop": everything but kind and the kubelet, with kumaco as a process
/// in the Pod's place.
#[tokio::test]
async fn laptop_commands_work_up_to_the_kubelet() {
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    // The one node of `kind create cluster --name kumaco`.
    let node = "kumaco-control-plane";
    let obj: Node = serde_json::from_value(json!({ "metadata": { "name": node } })).unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();

    let work = Workdir::new(&server);
    let out = work.run_block(&server, "laptop-install");
    let base =
        manifests::parse(&work.run(&server, "kustomize", "kubectl kustomize deploy/base")).unwrap();
    for obj in &base {
        assert!(
            get(&client, obj, "kumaco").await.is_some(),
            "{} was not created:\n{out}",
            describe(obj)
        );
    }

    // The base's flags, as the Pod would run them (no --node-selector: every node).
    let _kumaco = run_as_pod(&server, &["--namespace=kumaco"], "kumaco-5f7d8c9b4-h8x2n").await;
    let applied = work.run_block(&server, "laptop-window");
    assert_eq!(applied, "configmap/try-it created\n");
    wait_for_condition(
        &client,
        node,
        UNDER_MAINTENANCE,
        Duration::from_secs(60),
        |c| has_status(c, Some("True")),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    testkit::events::wait_for(
        &client,
        "kumaco",
        "try-it",
        "WindowStarted",
        Duration::from_secs(30),
        |_| true,
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    let watched = work.run_block(&server, "laptop-watch");
    eprintln!("laptop-watch:\n{watched}");
    let lines: Vec<&str> = watched.lines().collect();
    assert!(lines[0].starts_with("NODE ") && lines[0].contains("UNDER-MAINTENANCE"));
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        [node, "True"]
    );
    for reason in ["WindowLoaded", "WindowStarted"] {
        assert!(
            lines.iter().any(|l| l.starts_with(reason)),
            "no {reason} in:\n{watched}"
        );
    }
}
