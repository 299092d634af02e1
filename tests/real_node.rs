//! kumaco installed as operators install it, on a real node: the README's and the docs'
//! install commands run verbatim (a real kubectl and helm) against a real cluster
//! (`testkit::realcluster`: the test API server, a kube-controller-manager, a
//! kube-scheduler, and one kubelet on containerd 2.x and runc), with `make image`'s image
//! loaded into the node's store. The Deployment's Pods are scheduled, admitted (Pod
//! Security `restricted`, the ServiceAccount plugin's projected token), started and
//! probed by the kubelet; nothing here stands in for it.
//!
//! - `readme_install_runs_on_a_real_node`: the README's kustomize install and the docs'
//!   check (`kubectl rollout status`, the Lease's holder); each Pod's process runs as the
//!   manifests say (uid, capabilities, no_new_privs, seccomp, read-only root, memory
//!   limit, token); the probes pass on the ports they name; a window's edge reaches the
//!   real node and the test's fake nodes within the usual bound, written by the leader
//!   only.
//! - `helm_upgrade_rolls_across_edges_with_one_writer_and_the_pdb_holds`: the docs' `helm
//!   install`, then their `helm upgrade` (a new image tag and new flags) while an `@every`
//!   window opens and closes every 3 s: every edge on time on every node, no other
//!   change, and at no time two Pods writing (the API server's audit log names the Pod
//!   of every write); then the PodDisruptionBudget: a second eviction refused while the
//!   first Pod's replacement is not Ready, the only replica's eviction allowed; every
//!   stopped Pod's kumaco exits 0 on the kubelet's SIGTERM; the docs' `helm uninstall`
//!   runs the chart's pre-delete hook as a real Job, which leaves no kumaco condition on
//!   any node, and keeps the windows' namespace.
//!
//! The two tests take the host's one real cluster in turn (about 20 s to start each).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, EvictParams, ListParams};
use kube::runtime::watcher;
use serde_json::Value;
use testkit::Scope;
use testkit::cluster::UNDER_MAINTENANCE;
use testkit::docs;
use testkit::http;
use testkit::kumaco::metric;
use testkit::nodes::{create_node, has_status, set_labels, wait_for_condition};
use testkit::realcluster::{KUBERNETES_SERVICE_IP, NODE_NAME, RealCluster};
use testkit::time::{edge_in, poll_until, until};

/// What `make image` tags: the full name of the base's `kumaco:VERSION`.
const IMAGE: &str = concat!("docker.io/library/kumaco:", env!("CARGO_PKG_VERSION"));
/// The image the README's overlay and the docs' `helm install` name (an operator's
/// registry), and the tag their `helm upgrade` moves to: loaded on the node under each.
const REGISTRY_IMAGES: [&str; 2] = [
    "registry.example.com/platform/kumaco:0.1.0",
    "registry.example.com/platform/kumaco:0.1.1",
];
const NAMESPACE: &str = "kumaco";
/// The usual bound: a window's edge reaches a node within 2 s (tests/controller.rs).
const EDGE_BOUND: Duration = Duration::from_secs(2);
/// The label the README's overlay and the docs' chart values scope kumaco to.
const WORKER: &str = "node-role.kubernetes.io/worker";
/// The docs' scope is `!node-role.kubernetes.io/control-plane`: the outsider carries it.
const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
/// The Deployment's memory limit (deploy/base/deployment.yaml, the chart's values).
const MEMORY_LIMIT: u64 = 128 * 1024 * 1024;
const SA_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The ```sh block marked `<!-- tested: NAME ... -->`, with the commands a real node
/// runs (tests/deploy_commands.rs checks every marked block is run somewhere).
fn block(name: &str) -> String {
    docs::runnable(&docs::block(name), &["a kubelet"])
}

/// A scratch copy of deploy/ and charts/ with kubectl and helm first on PATH: where the
/// docs' commands run, as in a clone of the repository.
struct Workdir {
    dir: PathBuf,
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Workdir {
    fn new(cluster: &RealCluster) -> Self {
        let dir = cluster.root().join("work");
        for sub in ["deploy", "charts"] {
            copy_dir(&repo().join(sub), &dir.join(sub));
        }
        let bin = dir.join(".bin");
        std::fs::create_dir_all(&bin).unwrap();
        let kubectl = testkit::gobuild::kubectl().unwrap_or_else(|e| panic!("{e:#}"));
        let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
        std::os::unix::fs::symlink(kubectl, bin.join("kubectl")).unwrap();
        std::os::unix::fs::symlink(helm, bin.join("helm")).unwrap();
        Workdir {
            dir,
            bin,
            kubeconfig: cluster.server().kubeconfig().to_path_buf(),
        }
    }

    /// Runs `script` with bash (`-euo pipefail`); its stdout. Fails the test with both
    /// outputs if a command fails. Async: the test's watches keep running meanwhile.
    async fn run(&self, name: &str, script: &str) -> String {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let home = self.dir.join(".home");
        std::fs::create_dir_all(&home).unwrap();
        let started = Instant::now();
        let out = tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(&self.dir)
            .env("PATH", path)
            .env("HOME", home)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .await
            .expect("running bash");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{name} failed ({}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "{name}: {:.1} s\n{}",
            started.elapsed().as_secs_f64(),
            stdout.trim_end()
        );
        stdout
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Fails loudly, naming the command that fixes it, when `make image` has not run or ran
/// before the last change to kumaco's sources (the test would run yesterday's kumaco).
fn require_image() {
    let out = Command::new("podman")
        .args(["image", "inspect", "--format", "{{.Created}}", IMAGE])
        .output()
        .unwrap_or_else(|e| {
            panic!("podman is needed ({e}): apt-get install -y podman runc, then `make image`")
        });
    assert!(
        out.status.success(),
        "image {IMAGE} not found: build it with `make image` (`make test` does)"
    );
    // `2026-12-01 22:21:38.364958369 +0000 UTC`
    let created = String::from_utf8_lossy(&out.stdout);
    let mut fields = created.split_whitespace();
    let created: Timestamp = format!(
        "{}T{}Z",
        fields.next().unwrap_or_default(),
        fields.next().unwrap_or_default()
    )
    .parse()
    .unwrap_or_else(|e| panic!("the image's creation time {created:?}: {e}"));
    let mut pending: Vec<PathBuf> = ["src", "core", "Cargo.toml", "Cargo.lock"]
        .iter()
        .map(|p| repo().join(p))
        .filter(|p| p.exists())
        .collect();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let modified = Timestamp::try_from(path.metadata().unwrap().modified().unwrap()).unwrap();
        assert!(
            modified <= created,
            "{IMAGE} (built {created}) is older than {} (changed {modified}): run `make image`",
            path.display()
        );
    }
}

/// A started cluster with kumaco's image on the node, under its own and the registry
/// names, the real node labelled a worker (as an operator would: the kubelet may not
/// give itself `node-role` labels), and the test's fake nodes.
struct Setup {
    cluster: RealCluster,
    client: kube::Client,
    /// The real node and the fake workers: every node the install manages.
    workers: Vec<String>,
    /// A fake node outside the scope.
    outsider: String,
}

async fn setup(test: &str) -> Setup {
    require_image();
    let cluster = RealCluster::start()
        .await
        .unwrap_or_else(|e| panic!("starting the real cluster: {e:#}"));
    let started = Instant::now();
    cluster
        .load_image(IMAGE, &REGISTRY_IMAGES)
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!(
        "image {IMAGE} loaded on the node in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let client = cluster.client().await.unwrap();
    set_labels(&client, NODE_NAME, &[(WORKER, Some(""))])
        .await
        .unwrap();
    let scope = Scope::new(test);
    let mut workers = vec![NODE_NAME.to_string()];
    for short in ["fake-1", "fake-2"] {
        let node = create_node(&client, &scope, short, &[(WORKER, "")], &[])
            .await
            .unwrap();
        workers.push(node.metadata.name.unwrap());
    }
    let outsider = create_node(&client, &scope, "cp", &[(CONTROL_PLANE, "")], &[])
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();
    Setup {
        cluster,
        client,
        workers,
        outsider,
    }
}

/// The Deployment's Pods that are not being deleted.
async fn kumaco_pods(client: &kube::Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=kumaco"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn pod_ip(pod: &Pod) -> std::net::IpAddr {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .expect("a Pod IP")
        .parse()
        .unwrap()
}

async fn lease_holder(client: &kube::Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get_opt("kumaco")
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// `/proc/PID/status` field `key`.
fn proc_status(pid: u32, key: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
        .trim()
        .to_string()
}

/// The kernel's view of a Pod's kumaco process, checked against the manifests: uid and
/// gid 65532, no capabilities, no_new_privs, seccomp filtering (RuntimeDefault), a
/// read-only root filesystem, the memory limit as its cgroup's, the projected
/// ServiceAccount token where in-cluster clients look for it, and the `kubernetes`
/// Service in its environment.
fn assert_runs_as_written(cluster: &RealCluster, pod: &Pod) {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .expect("a container status");
    let id = status.container_id.as_deref().expect("a container id");
    let pid = cluster
        .container_pid(id)
        .unwrap_or_else(|e| panic!("{e:#}"));
    let who = format!("{} (pid {pid})", name(pod));
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "kumaco", "{who}");
    for key in ["Uid", "Gid"] {
        let ids: Vec<String> = proc_status(pid, key)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(ids, ["65532"; 4], "{who}: {key}");
    }
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(proc_status(pid, key), "0000000000000000", "{who}: {key}");
    }
    assert_eq!(proc_status(pid, "NoNewPrivs"), "1", "{who}: no_new_privs");
    assert_eq!(proc_status(pid, "Seccomp"), "2", "{who}: seccomp filter");
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root = mountinfo
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f.get(4) == Some(&"/"))
        .expect("a root mount");
    assert!(
        root[5].split(',').any(|o| o == "ro"),
        "{who}: the root filesystem is not read-only: {}",
        root.join(" ")
    );
    assert_eq!(
        cluster
            .memory_limit(pid)
            .unwrap_or_else(|e| panic!("{e:#}")),
        MEMORY_LIMIT,
        "{who}: memory limit"
    );
    let token = PathBuf::from(format!("/proc/{pid}/root")).join(SA_DIR);
    for file in ["token", "ca.crt", "namespace"] {
        assert!(token.join(file).exists(), "{who}: no {SA_DIR}/{file}");
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    let env: Vec<&str> = environ.split('\0').collect();
    for var in [
        format!("KUBERNETES_SERVICE_HOST={KUBERNETES_SERVICE_IP}"),
        "KUBERNETES_SERVICE_PORT=443".to_string(),
        format!("POD_NAME={}", name(pod)),
        format!("POD_NAMESPACE={NAMESPACE}"),
    ] {
        assert!(env.contains(&var.as_str()), "{who}: no {var} in {env:?}");
    }
}

/// One write of kumaco's, from the audit log.
#[derive(Debug)]
struct Write {
    /// When the API server received it.
    received: Timestamp,
    /// When it answered.
    at: Timestamp,
    pod: String,
    what: String,
}

/// kumaco's successful writes to nodes' status and to events, in order, each with the
/// Pod whose token made it (`authentication.kubernetes.io/pod-name`, which the API
/// server takes from the bound token).
fn kumaco_writes(cluster: &RealCluster) -> Vec<Write> {
    let text = std::fs::read_to_string(cluster.audit_log()).unwrap();
    let mut writes: Vec<Write> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| e["user"]["username"] == "system:serviceaccount:kumaco:kumaco")
        .filter(|e| {
            e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
        })
        .filter_map(|e| {
            let r = &e["objectRef"];
            let what = match (r["resource"].as_str()?, r["subresource"].as_str()) {
                ("nodes", Some("status")) => format!("node {}", r["name"].as_str()?),
                ("events", None) => "event".to_string(),
                _ => return None,
            };
            let pod = e["user"]["extra"]["authentication.kubernetes.io/pod-name"][0]
                .as_str()
                .unwrap_or_else(|| panic!("a write without a Pod name: {e}"))
                .to_string();
            let at: Timestamp = e["stageTimestamp"].as_str()?.parse().ok()?;
            let received: Timestamp = e["requestReceivedTimestamp"].as_str()?.parse().ok()?;
            Some(Write {
                received,
                at,
                pod,
                what,
            })
        })
        .collect();
    writes.sort_by_key(|w| w.at);
    writes
}

/// The successful writes of the Lease `kumaco/kumaco`, in the order the API server
/// committed them: when, and the holder each names (`None`: released).
fn lease_writes(cluster: &RealCluster) -> Vec<(Timestamp, Option<String>)> {
    let text = std::fs::read_to_string(cluster.audit_log()).unwrap();
    let mut writes: Vec<(Timestamp, Option<String>)> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            let r = &e["objectRef"];
            r["resource"] == "leases" && r["namespace"] == NAMESPACE && r["name"] == "kumaco"
        })
        .filter(|e| {
            e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
        })
        .map(|e| {
            assert!(
                matches!(e["verb"].as_str(), Some("create" | "update")),
                "a Lease write this test cannot read: {e}"
            );
            let holder = e["requestObject"]["spec"]["holderIdentity"]
                .as_str()
                .filter(|h| !h.is_empty())
                .map(str::to_string);
            let at: Timestamp = e["stageTimestamp"].as_str().unwrap().parse().unwrap();
            (at, holder)
        })
        .collect();
    writes.sort_by_key(|w| w.0);
    writes
}

/// The Lease's word on every write: each was sent while its Pod held the Lease (the last
/// Lease write committed before the API server received it names that Pod).
fn assert_writes_under_the_lease(writes: &[Write], leases: &[(Timestamp, Option<String>)]) {
    for w in writes {
        let holder = leases
            .iter()
            .take_while(|l| l.0 < w.received)
            .last()
            .and_then(|l| l.1.as_deref());
        assert_eq!(
            holder,
            Some(w.pod.as_str()),
            "{w:?} was sent while the Lease named {holder:?}; the Lease's writes: {leases:#?}"
        );
    }
}

/// The Pods that wrote, in order, one entry per run of consecutive writes. A Pod that
/// appears twice wrote again after another had written: two writers at once.
fn writer_runs(writes: &[Write]) -> Vec<String> {
    let mut runs: Vec<String> = Vec::new();
    for w in writes {
        if runs.last() != Some(&w.pod) {
            runs.push(w.pod.clone());
        }
    }
    runs
}

fn assert_one_writer_at_a_time(writes: &[Write]) {
    let runs = writer_runs(writes);
    let mut seen = std::collections::BTreeSet::new();
    for pod in &runs {
        assert!(
            seen.insert(pod),
            "{pod} wrote again after another Pod had written: {runs:?}\n{writes:#?}"
        );
    }
}

#[tokio::test]
async fn readme_install_runs_on_a_real_node() {
    let Setup {
        cluster,
        client,
        workers,
        outsider,
    } = setup("readme").await;
    let work = Workdir::new(&cluster);

    // README: copy the example overlay, apply it.
    let applied = work.run("readme-install", &block("readme-install")).await;
    assert!(
        applied.contains("deployment.apps/kumaco serverside-applied"),
        "{applied}"
    );
    // docs/install.md: wait for the Pods, see which one leads.
    let started = Instant::now();
    let checked = work.run("kustomize-check", &block("kustomize-check")).await;
    eprintln!(
        "apply to rolled out and led: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // `rollout status` prints its progress, then the Lease command the holder.
    let lines: Vec<&str> = checked.lines().collect();
    assert!(lines.len() >= 2, "{checked}");
    assert_eq!(
        lines[lines.len() - 2],
        "deployment \"kumaco\" successfully rolled out",
        "{checked}"
    );
    let leader = lines.last().copied().unwrap_or_default().to_string();

    let pods = kumaco_pods(&client).await;
    assert_eq!(pods.len(), 2, "the Deployment's two replicas");
    assert!(
        pods.iter().any(|p| name(p) == leader),
        "the Lease holder {leader:?} is not one of the Pods"
    );
    let mut leaders = 0.0;
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(NODE_NAME));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some(REGISTRY_IMAGES[0])
        );
        assert!(is_ready(pod), "{} not Ready", name(pod));
        let status = &pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(status.restart_count, 0, "{}", name(pod));
        assert_runs_as_written(&cluster, pod);
        // The probes' endpoints and the metrics port, where the manifests name them.
        let ip = pod_ip(pod);
        for path in ["/readyz", "/healthz"] {
            let (code, _) = http::get(SocketAddr::new(ip, 8081), path).await.unwrap();
            assert_eq!(code, 200, "{} {path}", name(pod));
        }
        let (code, metrics) = http::get(SocketAddr::new(ip, 8080), "/metrics")
            .await
            .unwrap();
        assert_eq!(code, 200);
        leaders += metric(&metrics, "kumaco_leader", &[]).unwrap();
        let log = cluster.pod_log(NAMESPACE, &name(pod));
        assert!(
            log.contains("the in-cluster configuration"),
            "{} did not use its ServiceAccount:\n{log}",
            name(pod)
        );
    }
    assert_eq!(leaders, 1.0, "kumaco_leader over both Pods");
    // The API server reaches the kubelet for logs (docs/install.md, "Check the install").
    let logs = work
        .run(
            "logs",
            "kubectl -n kumaco logs deploy/kumaco | grep -E 'ready|became leader'",
        )
        .await;
    assert!(!logs.is_empty());

    // A window in the overlay's second namespace, opening in a few seconds on every node
    // in scope: the real node and the fake workers, within the usual bound.
    let edge = edge_in(5);
    testkit::fleet::put_window(
        &client,
        "maintenance",
        "maintenance-manager",
        "real-node",
        &[
            ("startTime", &edge.to_string()),
            ("duration", "1h"),
            ("nodeSelector", ""),
        ],
    )
    .await
    .unwrap();
    for node in &workers {
        let seen = wait_for_condition(
            &client,
            node,
            UNDER_MAINTENANCE,
            until(edge) + EDGE_BOUND,
            |c| has_status(c, Some("True")),
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", cluster.diagnostics(20)));
        let late = Timestamp::now().duration_since(edge);
        eprintln!("EDGE_LATENCY_MS {} node={node}", late.as_millis());
        let c = testkit::nodes::condition(&seen, UNDER_MAINTENANCE).unwrap();
        let at = c.last_transition_time.as_ref().unwrap().0;
        assert!(at >= edge, "{node}: True at {at}, before the edge {edge}");
    }
    let events = testkit::events::wait_for(
        &client,
        "maintenance",
        "real-node",
        "WindowStarted",
        Duration::from_secs(10),
        |_| true,
    )
    .await
    .unwrap();
    for event in testkit::events::with_reason(&events, "WindowStarted") {
        assert_eq!(event.reporting_instance.as_deref(), Some(leader.as_str()));
    }
    let outside = Api::<Node>::all(client.clone())
        .get(&outsider)
        .await
        .unwrap();
    assert!(
        testkit::nodes::condition(&outside, UNDER_MAINTENANCE).is_none(),
        "kumaco wrote to {outsider}, outside its --node-selector"
    );

    // Every write came from the leader's Pod: the standby wrote nothing.
    let writes = kumaco_writes(&cluster);
    assert!(
        writes.iter().any(|w| w.what == format!("node {NODE_NAME}")),
        "no write to {NODE_NAME} in the audit log"
    );
    assert_eq!(writer_runs(&writes), [leader], "{writes:#?}");
    assert_writes_under_the_lease(&writes, &lease_writes(&cluster));
}

/// An admin client that takes each answer as it comes (kube's default retries 429s).
async fn no_retry_client(cluster: &RealCluster) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.server().kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// How each of kumaco's containers ended (exit code, reason), as the kubelet reports it
/// in the Pod's status before the Pod goes.
struct Exits {
    seen: Arc<Mutex<BTreeMap<String, (i32, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Exits {
    async fn start(client: &kube::Client) -> Exits {
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut listed_tx = Some(listed_tx);
                let mut events = watcher(api, watcher::Config::default()).boxed();
                while let Some(event) = events.next().await {
                    match event {
                        Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                            let terminated = pod
                                .status
                                .as_ref()
                                .and_then(|s| s.container_statuses.as_ref())
                                .and_then(|cs| cs.first())
                                .and_then(|c| c.state.as_ref())
                                .and_then(|s| s.terminated.as_ref());
                            if let Some(t) = terminated {
                                seen.lock().unwrap().insert(
                                    name(&pod),
                                    (t.exit_code, t.reason.clone().unwrap_or_default()),
                                );
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(15), listed)
            .await
            .expect("listing Pods")
            .unwrap();
        Exits { seen, task }
    }

    /// Waits until at least `n` exits are seen (the kubelet reports the last one a
    /// moment after the replacement leads), for at most `timeout`.
    async fn wait_for(&self, n: usize, timeout: Duration) {
        let seen = self.seen.clone();
        poll_until(&format!("{n} container exits"), timeout, || {
            let seen = seen.clone();
            async move { seen.lock().unwrap().len() >= n }
        })
        .await;
    }

    fn stop(self) -> BTreeMap<String, (i32, String)> {
        self.task.abort();
        self.seen.lock().unwrap().clone()
    }
}

/// Every change of one condition type on some nodes, as a watch sees it: (when seen,
/// node, status, lastTransitionTime).
type Change = (Timestamp, String, Option<String>, Option<Timestamp>);

struct Recorder {
    changes: Arc<Mutex<Vec<Change>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start(client: &kube::Client, nodes: &[String], type_: &'static str) -> Recorder {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let watched: Vec<String> = nodes.to_vec();
        let task = tokio::spawn({
            let changes = changes.clone();
            let api: Api<Node> = Api::all(client.clone());
            async move {
                let mut last: BTreeMap<String, Option<String>> = BTreeMap::new();
                let mut listed_tx = Some(listed_tx);
                let mut events = watcher(api, watcher::Config::default()).boxed();
                while let Some(event) = events.next().await {
                    match event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            let node = n.metadata.name.clone().unwrap_or_default();
                            if !watched.contains(&node) {
                                continue;
                            }
                            let c = testkit::nodes::condition(&n, type_);
                            let status = c.map(|c| c.status.clone());
                            if last.get(&node) != Some(&status) {
                                last.insert(node.clone(), status.clone());
                                let ltt =
                                    c.and_then(|c| c.last_transition_time.as_ref()).map(|t| t.0);
                                changes
                                    .lock()
                                    .unwrap()
                                    .push((Timestamp::now(), node, status, ltt));
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = listed_tx.take() {
                                let _ = tx.send(());
                            }
                        }
                        _ => {}
                    }
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(15), listed)
            .await
            .expect("listing nodes")
            .unwrap();
        Recorder { changes, task }
    }

    fn stop(self) -> Vec<Change> {
        self.task.abort();
        self.changes.lock().unwrap().clone()
    }
}

/// Checks the recorded changes of one node against an `@every PERIOD` window of
/// `duration` (epoch-anchored): from `from` (after its first edge) to `to`, each edge's
/// change is seen within [`EDGE_BOUND`] of it, not before, and nothing else changes.
/// Returns the edges checked.
fn check_edges(
    node: &str,
    changes: &[Change],
    period: i64,
    duration: i64,
    from: Timestamp,
    to: Timestamp,
) -> Vec<Timestamp> {
    let bound = SignedDuration::try_from(EDGE_BOUND).unwrap();
    let mut edges = Vec::new();
    let mut k = from.as_second() / period;
    loop {
        for (offset, status) in [(0, "True"), (duration, "False")] {
            let edge = Timestamp::from_second(k * period + offset).unwrap();
            if edge > from && edge + bound < to {
                edges.push((edge, status));
            }
        }
        if Timestamp::from_second(k * period).unwrap() > to {
            break;
        }
        k += 1;
    }
    let first = edges.first().expect("edges to check").0;
    // From the first edge checked: a change seen earlier is an earlier edge's.
    let mine: Vec<&Change> = changes
        .iter()
        .filter(|c| c.1 == node && c.0 >= first)
        .collect();
    for (edge, status) in &edges {
        let change = mine
            .iter()
            .find(|c| c.0 >= *edge && c.0 <= *edge + bound)
            .unwrap_or_else(|| {
                panic!("{node}: no change within {EDGE_BOUND:?} of the {status} edge at {edge}: {mine:#?}")
            });
        assert_eq!(
            change.2.as_deref(),
            Some(*status),
            "{node}: the change after the edge at {edge}: {mine:#?}"
        );
        let ltt = change.3.expect("lastTransitionTime");
        assert!(
            ltt >= *edge,
            "{node}: {status} at {ltt}, before the edge at {edge}"
        );
    }
    let last_checked = edges.last().map(|e| e.0 + bound).unwrap_or(from);
    for change in mine.iter().filter(|c| c.0 <= last_checked) {
        assert!(
            edges
                .iter()
                .any(|(edge, _)| change.0 >= *edge && change.0 <= *edge + bound),
            "{node}: a change at no edge (a flap): {change:?}\nall: {mine:#?}"
        );
    }
    edges.into_iter().map(|e| e.0).collect()
}

#[tokio::test]
async fn helm_upgrade_rolls_across_edges_with_one_writer_and_the_pdb_holds() {
    let Setup {
        cluster,
        client,
        workers,
        outsider: _,
    } = setup("helm").await;
    let work = Workdir::new(&cluster);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // Evictions answered 429 are retried by kube's default client until allowed: this
    // one shows each answer.
    let evictions: Api<Pod> = Api::namespaced(no_retry_client(&cluster).await, NAMESPACE);

    let installed = work.run("helm-install", &block("helm-install")).await;
    assert!(installed.contains("STATUS: deployed"), "{installed}");
    let rollout = "kubectl -n kumaco rollout status deploy/kumaco --timeout=180s";
    work.run("rollout", rollout).await;
    let first_leader = lease_holder(&client).await;
    let before = kumaco_pods(&client).await;
    assert_eq!(before.len(), 2);
    assert!(
        before.iter().any(|p| Some(name(p)) == first_leader),
        "{first_leader:?} leads"
    );
    for pod in &before {
        assert_runs_as_written(&cluster, pod);
    }

    // A window in `maintenance` that opens every 6 s for 3 s: an edge every 3 s on every
    // node in scope, before, during and after the rolling update.
    let (period, duration) = (6, 3);
    testkit::fleet::put_window(
        &client,
        "maintenance",
        "maintenance-manager",
        "rolling",
        &[
            ("startTime", &format!("@every {period}s")),
            ("duration", &format!("{duration}s")),
            ("nodeSelector", ""),
        ],
    )
    .await
    .unwrap();
    let recorder = Recorder::start(&client, &workers, UNDER_MAINTENANCE).await;
    let exits = Exits::start(&client).await;
    // Check from the first edge after the window is surely loaded.
    let from = edge_in(2);
    // The upgrade starts 1 s before an edge (edges fall on whole multiples of 3 s), so
    // that the Pods are replaced across it.
    let next_edge = Timestamp::from_second((from.as_second() / duration + 2) * duration).unwrap();
    tokio::time::sleep(until(next_edge).saturating_sub(Duration::from_secs(1))).await;

    let upgrade_started = Timestamp::now();
    let upgraded = work.run("helm-upgrade", &block("helm-upgrade")).await;
    assert!(upgraded.contains("REVISION: 2"), "{upgraded}");
    work.run("rollout", rollout).await;
    let upgrade_done = Timestamp::now();
    eprintln!(
        "rolling update: {:.1} s",
        upgrade_done.duration_since(upgrade_started).as_secs_f64()
    );
    // Two more periods after the rollout, then compare.
    tokio::time::sleep(Duration::from_secs(2 * period as u64)).await;
    let to = Timestamp::now();
    let changes = recorder.stop();

    let after = kumaco_pods(&client).await;
    assert_eq!(after.len(), 2);
    for pod in &after {
        assert!(
            before.iter().all(|b| name(b) != name(pod)),
            "{} was not replaced",
            name(pod)
        );
        let container = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(container.image.as_deref(), Some(REGISTRY_IMAGES[1]));
        assert!(
            container
                .args
                .as_ref()
                .unwrap()
                .iter()
                .any(|a| a == "--in-progress"),
            "{:?}",
            container.args
        );
        assert!(is_ready(pod));
        assert_runs_as_written(&cluster, pod);
    }
    for node in &workers {
        let edges = check_edges(node, &changes, period, duration, from, to);
        let during = edges
            .iter()
            .filter(|e| **e >= upgrade_started && **e <= upgrade_done)
            .count();
        eprintln!(
            "{node}: {} edges on time, {during} of them during the rolling update",
            edges.len()
        );
        assert!(during > 0, "no edge fell during the rolling update");
    }
    let writes = kumaco_writes(&cluster);
    let runs = writer_runs(&writes);
    eprintln!("writers, in turn: {runs:?}");
    assert_one_writer_at_a_time(&writes);
    assert_writes_under_the_lease(&writes, &lease_writes(&cluster));
    assert!(
        runs.len() >= 2 && after.iter().any(|p| runs.last() == Some(&name(p))),
        "the new Pods took over writing: {runs:?}"
    );

    // The PodDisruptionBudget: with both replicas Ready one eviction is allowed; a second
    // one at once is refused (429) until the first Pod's replacement is Ready.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
    let allowed = |expected: i32| {
        let pdbs = pdbs.clone();
        async move {
            pdbs.get("kumaco")
                .await
                .ok()
                .and_then(|p| p.status)
                .is_some_and(|s| {
                    s.expected_pods == Some(expected) && s.disruptions_allowed == Some(1)
                })
        }
    };
    poll_until(
        "the PDB to allow one disruption of 2",
        Duration::from_secs(60),
        || allowed(2),
    )
    .await;
    let (a, b) = (name(&after[0]), name(&after[1]));
    evictions.evict(&a, &EvictParams::default()).await.unwrap();
    match evictions.evict(&b, &EvictParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 429, "{status:?}");
            assert!(status.message.contains("disruption budget"), "{status:?}");
        }
        other => panic!("the second eviction was not refused: {other:?}"),
    }
    poll_until("a Ready replacement", Duration::from_secs(90), || {
        let client = client.clone();
        let (a, b) = (a.clone(), b.clone());
        async move {
            kumaco_pods(&client)
                .await
                .iter()
                .any(|p| name(p) != a && name(p) != b && is_ready(p))
        }
    })
    .await;
    poll_until(
        "the PDB to allow the second eviction",
        Duration::from_secs(60),
        || allowed(2),
    )
    .await;
    evictions.evict(&b, &EvictParams::default()).await.unwrap();
    work.run("rollout", rollout).await;

    // One replica: its eviction is allowed (a drain is never blocked for good), and the
    // replacement takes the Lease.
    work.run(
        "one replica",
        "helm upgrade kumaco charts/kumaco --namespace kumaco --reuse-values --set replicaCount=1 \
         && kubectl -n kumaco rollout status deploy/kumaco --timeout=180s",
    )
    .await;
    // Once the scaled-down Pod is gone and the remaining one leads.
    poll_until("one Pod, leading", Duration::from_secs(90), || {
        let (client, pods_api) = (client.clone(), pods_api.clone());
        async move {
            let all = pods_api.list(&ListParams::default()).await.unwrap().items;
            all.len() == 1 && lease_holder(&client).await == all[0].metadata.name
        }
    })
    .await;
    poll_until(
        "the PDB to allow one disruption of 1",
        Duration::from_secs(60),
        || allowed(1),
    )
    .await;
    let only = name(&kumaco_pods(&client).await[0]);
    evictions
        .evict(&only, &EvictParams::default())
        .await
        .unwrap_or_else(|e| panic!("evicting the only replica: {e}"));
    poll_until("a replacement to lead", Duration::from_secs(90), || {
        let client = client.clone();
        let only = only.clone();
        async move {
            let holder = lease_holder(&client).await;
            holder.as_ref().is_some_and(|h| *h != only)
                && kumaco_pods(&client)
                    .await
                    .iter()
                    .any(|p| Some(name(p)) == holder)
        }
    })
    .await;
    let writes = kumaco_writes(&cluster);
    assert_one_writer_at_a_time(&writes);
    assert_writes_under_the_lease(&writes, &lease_writes(&cluster));
    // Every Pod stopped on the way (2 by the upgrade, 2 evicted, 1 scaled down, the only
    // replica evicted) ended as the kubelet's SIGTERM asks: kumaco exited 0.
    exits.wait_for(6, Duration::from_secs(60)).await;
    let exits = exits.stop();
    eprintln!("container exits: {exits:?}");
    for (pod, (code, reason)) in &exits {
        assert_eq!(*code, 0, "{pod} exited {code} ({reason})");
    }

    // The docs' uninstall: the chart's pre-delete hook runs as a real Job (the image's
    // `kumaco uninstall --yes`): it stops kumaco and takes its conditions off every node.
    // The namespace holding the windows stays, windows and all.
    let uninstalled = work.run("helm-uninstall", &block("helm-uninstall")).await;
    assert!(uninstalled.contains("uninstalled"), "{uninstalled}");
    for node in Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        let kumaco_conditions: Vec<_> = node
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .filter(|c| {
                [
                    "kured.dev/UnderMaintenance",
                    "MaintenanceInProgress",
                    "MaintenancePlanned",
                ]
                .contains(&c.type_.as_str())
            })
            .map(|c| c.type_.clone())
            .collect();
        assert!(
            kumaco_conditions.is_empty(),
            "{} keeps {kumaco_conditions:?} after helm uninstall",
            node.metadata.name.as_deref().unwrap_or_default()
        );
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let kept = namespaces.get("maintenance").await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "helm uninstall deleted the windows' namespace"
    );
    poll_until("kumaco's Pods to be gone", Duration::from_secs(60), || {
        let pods_api = pods_api.clone();
        async move {
            pods_api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        }
    })
    .await;
}
