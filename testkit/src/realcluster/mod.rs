//! A real, small cluster: the test API server ([`ApiServer`], in `--cluster` mode) with a
//! kube-controller-manager, a kube-scheduler and one real node, a kubelet on containerd
//! 2.x and runc. Pods are admitted, scheduled, started and probed as on any cluster; the
//! programs are built once per machine ([`crate::nodebins`]).
//!
//! What differs from a production node, and why it does not change what kumaco's tests
//! check:
//!
//! - **Pod network**: Debian's CNI `bridge` + `host-local` plugins give each Pod its own
//!   network namespace and address on a host bridge ([`BRIDGE`], [`POD_SUBNET`]). There is
//!   no kube-proxy: the one Service a Pod here needs, `kubernetes` (the API server, which
//!   the kubelet hands every Pod as `KUBERNETES_SERVICE_HOST=10.0.0.1`,
//!   `KUBERNETES_SERVICE_PORT=443`), is made routable by one DNAT rule, the rule kube-proxy
//!   would write for it, to the API server on 127.0.0.1 (`route_localnet` on the bridge).
//!   kumaco connects to the address, port and certificate name a Pod anywhere gets.
//! - **cgroup v1**: this CI host mounts cgroup v1 controllers (a hybrid layout); a 1.37
//!   kubelet refuses v1 unless its configuration says `failCgroupV1: false`, which it does
//!   here only when the host is on v1. Pods get their cgroups, memory limits and QoS as on
//!   any v1 node.
//! - **OOM scores**: where the host withholds `CAP_SYS_RESOURCE` even from root (this
//!   Firecracker VM does: runc then fails with "failed to update
//!   /proc/self/oom_score_adj: Permission denied"), containerd's `restrict_oom_score_adj`
//!   clamps scores below containerd's own to it. Only which process the kernel kills first
//!   under memory pressure changes.
//! - **Images**: nothing is pulled. The pause image is built here ([`nodebins`]), kumaco's
//!   is `make image`'s, saved by podman and imported into containerd's store with `ctr`
//!   ([`RealCluster::load_image`]), under any extra names a manifest uses.
//!
//! Host-wide state (the bridge, the NAT chain, a cgroup subtree) means one real cluster
//! per machine at a time: [`RealCluster::start`] takes a host-wide lock, and cleans up what
//! a crashed run left. Every program runs under a small wrapper whose stdin is a lifeline:
//! when the test process exits or dies the program gets SIGTERM (SIGKILL 15 s later).
//! Containers outlive a crashed test (containerd's shims keep them), and are killed by the
//! next start. Dropping a [`RealCluster`] stops the kubelet, kills every container of the
//! node, stops containerd and the control plane, unmounts what they mounted under the
//! temporary root and removes it.
//!
//! The parts: `component` (one program under its lifeline), `config` (the audit policy,
//! containerd's and the kubelet's configuration) and `host` (the prerequisites and the
//! host-wide state a start cleans and a stop removes); the cluster's start and stop here.

mod component;
mod config;
mod host;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use crate::ApiServer;
use crate::http::free_port;
use crate::nodebins::{self, Containerd, KubeNode, run};
use crate::process::tail;
use component::Component;
use config::{AUDIT_POLICY, containerd_config, kubelet_config};
use host::{
    cgroup_v2, check_prerequisites, clean_stale, create_cgroup_root, find_program,
    has_cap_sys_resource, iptables, kill_cgroup_processes, kill_shims, remove, remove_shim_sockets,
    reset_host, shim_sockets, unmount_under,
};

/// The real node's name (it is the cluster's only kubelet).
pub const NODE_NAME: &str = "kumaco-worker";
/// The host bridge the Pods' network interfaces are attached to.
pub const BRIDGE: &str = "kumaco0";
/// The Pods' addresses.
pub const POD_SUBNET: &str = "10.244.77.0/24";
const POD_GATEWAY: &str = "10.244.77.1";
/// The `kubernetes` Service's ClusterIP: the first address of testenv's
/// `--service-cluster-ip-range=10.0.0.0/24`.
pub const KUBERNETES_SERVICE_IP: &str = "10.0.0.1";
/// The NAT chain holding the `kubernetes` Service's DNAT rule.
const NAT_CHAIN: &str = "KUMACO-REALNODE";
/// The cgroup (in every hierarchy) under which the kubelet puts its Pods.
const CGROUP_ROOT: &str = "kumaco-realnode";
/// From start to the node being Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a component gets between SIGTERM and SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A running real cluster; dropping it tears everything down.
pub struct RealCluster {
    root: PathBuf,
    server: Option<ApiServer>,
    // In start order; stopped in reverse.
    components: Vec<Component>,
    containerd: Containerd,
    socket: PathBuf,
    audit_log: PathBuf,
    _lock: File,
}

impl RealCluster {
    /// Starts the API server, the controller-manager, the scheduler, containerd and the
    /// kubelet, imports the pause image, and returns once the node is Ready. Waits for any
    /// other real cluster on this machine to finish first.
    pub async fn start() -> Result<RealCluster> {
        check_prerequisites()?;
        let started = Instant::now();
        // Built before the lock: a first build takes minutes and needs no host state.
        let kube = nodebins::kube_node()?;
        let containerd = nodebins::containerd()?;
        let pause = nodebins::pause_image()?;
        let base = std::env::temp_dir().join("kumaco-realnode");
        fs::create_dir_all(&base)?;
        let lock = File::create(base.join(".lock"))?;
        if lock.try_lock().is_err() {
            eprintln!("testkit: waiting for another real cluster on this machine to stop...");
            lock.lock().context("locking the real-cluster host lock")?;
        }
        // Holding the lock: anything of a real cluster left on the host is a crashed run's.
        clean_stale(&base);
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let root = base.join(format!(
            "{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        fs::create_dir_all(root.join("logs"))?;

        let audit_log = root.join("logs/audit.log");
        let audit_policy = root.join("audit-policy.yaml");
        fs::write(&audit_policy, AUDIT_POLICY)?;
        let server = ApiServer::start_fresh_with(&[
            "--cluster".to_string(),
            format!(
                "--apiserver-args=--audit-policy-file={} --audit-log-path={}",
                audit_policy.display(),
                audit_log.display()
            ),
        ])?;
        let socket = root.join("containerd/containerd.sock");
        let mut cluster = RealCluster {
            root,
            server: Some(server),
            components: Vec::new(),
            containerd,
            socket,
            audit_log,
            _lock: lock,
        };
        // From here on, a failure drops `cluster`, which tears down what started.
        cluster.start_control_plane(&kube)?;
        cluster.start_containerd()?;
        cluster.import(&pause)?;
        cluster.setup_network()?;
        cluster.start_kubelet(&kube)?;
        cluster.wait_node_ready().await?;
        eprintln!(
            "testkit: real cluster ready in {:.1}s: node {NODE_NAME}, API server {} (root {})",
            started.elapsed().as_secs_f64(),
            cluster.server().url(),
            cluster.root.display()
        );
        Ok(cluster)
    }

    /// The API server (its admin kubeconfig, URL, directory).
    pub fn server(&self) -> &ApiServer {
        self.server
            .as_ref()
            .expect("the API server runs until drop")
    }

    /// An admin client. Make one per `#[tokio::test]`.
    pub async fn client(&self) -> Result<kube::Client> {
        self.server().client().await
    }

    /// The temporary root holding the node's state and the logs (`logs/`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The API server's audit log (JSON lines): every write to nodes' status, Leases,
    /// events.k8s.io Events and Pod evictions, with the writer's identity (a Pod's
    /// ServiceAccount token names the Pod in `user.extra`).
    pub fn audit_log(&self) -> &Path {
        &self.audit_log
    }

    /// Imports an image archive (docker-archive or OCI) into the node's image store.
    pub fn import(&self, archive: &Path) -> Result<()> {
        self.ctr(&["images", "import", &archive.to_string_lossy()])?;
        Ok(())
    }

    /// Loads a podman image into the node, as `podman save` + `kind load image-archive`
    /// would: saved to an archive, imported with `ctr`, and tagged with `also_as` (the
    /// names manifests give it, e.g. a registry's), so that the kubelet finds it under
    /// each and pulls nothing.
    pub fn load_image(&self, image: &str, also_as: &[&str]) -> Result<()> {
        let archive = self.root.join("image.tar");
        let _ = fs::remove_file(&archive);
        run(Command::new("podman")
            .args(["save", "-q", "-o"])
            .arg(&archive)
            .arg(image))
        .with_context(|| format!("podman save {image} (is it built? `make image`)"))?;
        self.import(&archive)?;
        fs::remove_file(&archive)?;
        for name in also_as {
            self.ctr(&["images", "tag", "--force", image, name])?;
        }
        Ok(())
    }

    /// The names in the node's image store.
    pub fn images(&self) -> Result<Vec<String>> {
        Ok(self
            .ctr(&["images", "list", "-q"])?
            .lines()
            .map(str::to_string)
            .collect())
    }

    fn ctr(&self, args: &[&str]) -> Result<String> {
        let out = Command::new(&self.containerd.ctr)
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"])
            .args(args)
            .output()
            .context("running ctr")?;
        if !out.status.success() {
            bail!(
                "ctr {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The host pid of a container's main process; `container_id` as a Pod's status
    /// gives it (`containerd://ID`).
    pub fn container_pid(&self, container_id: &str) -> Result<u32> {
        let id = container_id
            .strip_prefix("containerd://")
            .unwrap_or(container_id);
        let tasks = self.ctr(&["tasks", "list"])?;
        tasks
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.first() == Some(&id))
            .and_then(|f| f.get(1).and_then(|p| p.parse().ok()))
            .with_context(|| format!("no running task {id} in:\n{tasks}"))
    }

    /// The memory limit of the cgroup process `pid` is in, in bytes.
    pub fn memory_limit(&self, pid: u32) -> Result<u64> {
        let cgroups = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
        let file = cgroups
            .lines()
            .find_map(|line| {
                let mut fields = line.splitn(3, ':');
                let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                let path = path.trim_start_matches('/');
                if controllers.split(',').any(|c| c == "memory") {
                    Some(
                        Path::new("/sys/fs/cgroup/memory")
                            .join(path)
                            .join("memory.limit_in_bytes"),
                    )
                } else if controllers.is_empty() && cgroup_v2() {
                    Some(Path::new("/sys/fs/cgroup").join(path).join("memory.max"))
                } else {
                    None
                }
            })
            .with_context(|| format!("no memory cgroup for pid {pid}:\n{cgroups}"))?;
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{}: {text:?}", file.display()))
    }

    /// What the containers of a Pod printed, from the kubelet's log files (while the Pod
    /// exists: the kubelet removes them with it).
    pub fn pod_log(&self, namespace: &str, pod: &str) -> String {
        let prefix = format!("{namespace}_{pod}_");
        let mut text = String::new();
        let Ok(dirs) = fs::read_dir(self.root.join("pod-logs")) else {
            return text;
        };
        for dir in dirs.flatten() {
            if !dir.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            for container in fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                let mut files: Vec<PathBuf> = fs::read_dir(container.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .collect();
                files.sort();
                for file in files {
                    text.push_str(&fs::read_to_string(&file).unwrap_or_default());
                }
            }
        }
        text
    }

    /// The last `lines` of each component's log, for failure messages.
    pub fn diagnostics(&self, lines: usize) -> String {
        let mut text = String::new();
        for c in &self.components {
            text.push_str(&format!(
                "--- {} ({})\n{}\n",
                c.name,
                c.log.display(),
                tail(&c.log, lines)
            ));
        }
        text.push_str(&format!(
            "--- kube-apiserver\n{}\n",
            self.server().log_tail(lines)
        ));
        text
    }

    /// Fails if a component has exited.
    pub fn check_running(&mut self) -> Result<()> {
        for i in 0..self.components.len() {
            if let Some(status) = self.components[i].exited() {
                let c = &self.components[i];
                bail!(
                    "{} exited ({status}); its log {}:\n{}",
                    c.name,
                    c.log.display(),
                    tail(&c.log, 30)
                );
            }
        }
        Ok(())
    }

    fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    fn start_control_plane(&mut self, kube: &KubeNode) -> Result<()> {
        let server = self.server();
        let pki = server.dir().join("pki");
        let kcm_kubeconfig = server.kubeconfig_for("system:kube-controller-manager", &[])?;
        let scheduler_kubeconfig = server.kubeconfig_for("system:kube-scheduler", &[])?;
        let kcm = Component::spawn(
            "kube-controller-manager",
            &kube.controller_manager,
            &[
                format!("--kubeconfig={}", kcm_kubeconfig.display()),
                // As kubeadm runs it: each controller with its own ServiceAccount's rights.
                "--use-service-account-credentials=true".into(),
                // Published in every namespace as kube-root-ca.crt, which every Pod's
                // projected ServiceAccount volume mounts.
                format!("--root-ca-file={}", pki.join("ca.crt").display()),
                format!(
                    "--service-account-private-key-file={}",
                    pki.join("service-account.key").display()
                ),
                "--leader-elect=false".into(),
                // No HTTPS endpoint: nothing scrapes it, and no port to pick.
                "--secure-port=0".into(),
                "--v=1".into(),
            ],
            self.logs().join("kube-controller-manager.log"),
            &[],
        )?;
        self.components.push(kcm);
        let scheduler = Component::spawn(
            "kube-scheduler",
            &kube.scheduler,
            &[
                format!("--kubeconfig={}", scheduler_kubeconfig.display()),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--v=1".into(),
            ],
            self.logs().join("kube-scheduler.log"),
            &[],
        )?;
        self.components.push(scheduler);
        Ok(())
    }

    fn start_containerd(&mut self) -> Result<()> {
        let dir = self.root.join("containerd");
        fs::create_dir_all(&dir)?;
        let runc = find_program("runc").context("runc (apt-get install runc)")?;
        let config = containerd_config(&self.root, &runc, !has_cap_sys_resource());
        let config_path = dir.join("config.toml");
        fs::write(&config_path, config)?;
        let path = format!(
            "{}:{}",
            self.containerd.dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let component = Component::spawn(
            "containerd",
            &self.containerd.containerd,
            &[format!("--config={}", config_path.display())],
            self.logs().join("containerd.log"),
            // The shim is found on containerd's PATH.
            &[("PATH", path.into())],
        )?;
        self.components.push(component);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.ctr(&["version"]).is_err() {
            self.check_running()?;
            if Instant::now() > deadline {
                bail!(
                    "containerd did not answer on {} within 60 s:\n{}",
                    self.socket.display(),
                    self.diagnostics(30)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// The Pods' bridge, the CNI configuration, and the `kubernetes` Service's DNAT rule.
    fn setup_network(&mut self) -> Result<()> {
        let cni = self.root.join("cni");
        fs::create_dir_all(cni.join("net.d"))?;
        fs::write(
            cni.join("net.d/10-kumaco.conflist"),
            serde_json::to_string_pretty(&serde_json::json!({
                "cniVersion": "1.0.0",
                "name": "kumaco-realnode",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": true,
                        "ipMasq": false,
                        "hairpinMode": true,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{ "subnet": POD_SUBNET, "gateway": POD_GATEWAY }]],
                            "routes": [{ "dst": "0.0.0.0/0" }],
                            "dataDir": cni.join("ipam"),
                        }
                    },
                    { "type": "portmap", "capabilities": { "portMappings": true } }
                ]
            }))?,
        )?;
        // The bridge exists before the first Pod (the plugin adopts it), so that the
        // sysctl can be set on it: route_localnet lets the DNAT below send Pods' packets
        // to 127.0.0.1, where the test API server listens.
        run(Command::new("ip").args(["link", "add", BRIDGE, "type", "bridge"]))?;
        run(Command::new("ip").args(["addr", "add", &format!("{POD_GATEWAY}/24"), "dev", BRIDGE]))?;
        run(Command::new("ip").args(["link", "set", BRIDGE, "up"]))?;
        fs::write(
            format!("/proc/sys/net/ipv4/conf/{BRIDGE}/route_localnet"),
            "1",
        )
        .context("setting route_localnet on the bridge")?;
        let port = self
            .server()
            .url()
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_string();
        iptables(&["-t", "nat", "-N", NAT_CHAIN])?;
        iptables(&["-t", "nat", "-A", "PREROUTING", "-j", NAT_CHAIN])?;
        iptables(&[
            "-t",
            "nat",
            "-A",
            NAT_CHAIN,
            "-d",
            &format!("{KUBERNETES_SERVICE_IP}/32"),
            "-p",
            "tcp",
            "--dport",
            "443",
            "-j",
            "DNAT",
            "--to-destination",
            &format!("127.0.0.1:{port}"),
        ])?;
        Ok(())
    }

    fn start_kubelet(&mut self, kube: &KubeNode) -> Result<()> {
        let dir = self.root.join("kubelet");
        fs::create_dir_all(&dir)?;
        create_cgroup_root()?;
        let server = self.server();
        let ca = server.dir().join("pki/ca.crt");
        let kubeconfig =
            server.kubeconfig_for(&format!("system:node:{NODE_NAME}"), &["system:nodes"])?;
        let config = kubelet_config(&self.root, &self.socket, &ca, free_port()?, free_port()?);
        let config_path = dir.join("config.yaml");
        fs::write(&config_path, config)?;
        let component = Component::spawn(
            "kubelet",
            &kube.kubelet,
            &[
                format!("--config={}", config_path.display()),
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--root-dir={}", dir.join("root").display()),
                format!("--cert-dir={}", dir.join("pki").display()),
                format!("--hostname-override={NODE_NAME}"),
                "--v=1".into(),
            ],
            self.logs().join("kubelet.log"),
            &[],
        )?;
        self.components.push(component);
        Ok(())
    }

    async fn wait_node_ready(&mut self) -> Result<()> {
        let client = self.client().await?;
        let nodes: Api<Node> = Api::all(client);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.check_running()?;
            if let Ok(Some(node)) = nodes.get_opt(NODE_NAME).await
                && crate::nodes::condition(&node, "Ready").is_some_and(|c| c.status == "True")
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "node {NODE_NAME} not Ready after {READY_TIMEOUT:?}:\n{}",
                    self.diagnostics(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        let keep_logs = std::thread::panicking();
        // The kubelet first, so that it restarts nothing; then every container of the
        // node, their shims, containerd and the control plane.
        if let Some(pos) = self.components.iter().position(|c| c.name == "kubelet") {
            let mut kubelet = self.components.remove(pos);
            kubelet.stop();
        }
        let sockets = shim_sockets(&self.root);
        kill_cgroup_processes();
        kill_shims(&self.socket);
        while let Some(mut c) = self.components.pop() {
            c.stop();
        }
        remove_shim_sockets(&sockets);
        self.server = None;
        reset_host();
        unmount_under(&self.root);
        if keep_logs {
            eprintln!(
                "testkit: the real cluster's logs are kept in {}",
                self.logs().display()
            );
            for entry in fs::read_dir(&self.root).into_iter().flatten().flatten() {
                if entry.file_name() != "logs" {
                    let _ = remove(&entry.path());
                }
            }
        } else {
            let _ = remove(&self.root);
        }
    }
}
