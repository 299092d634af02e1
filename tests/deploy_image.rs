//! kumaco's container image, built by `make image`, run the way a kubelet runs the chart's
//! Pod: in-cluster configuration (the ServiceAccount's token, the cluster CA and the
//! namespace mounted where Kubernetes mounts them, `KUBERNETES_SERVICE_HOST/PORT`), the
//! chart's RBAC and nothing more, the Deployment's exact security context, args and
//! environment, the probes polled, and a SIGTERM at the end.
//!
//! The engine is podman with runc (Debian's packages). Two work-arounds for this CI
//! machine, where a kubelet would not need them:
//! - `--runtime runc`: podman's default runtime, crun, refuses cgroups in hybrid mode
//!   (v1 + v2), which this machine has.
//! - `--ulimit nofile/nproc`: podman asks for root's default limits, which exceed the
//!   hard limits here ("setrlimit RLIMIT_NOFILE: Operation not permitted").
//!
//! And one difference from a Pod: the container shares the host's network (the test API
//! server listens on 127.0.0.1 only, with a certificate for that address), so kumaco's
//! ports are moved to free ones through the chart's own values.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use testkit::ApiServer;
use testkit::cluster::UNDER_MAINTENANCE;
use testkit::http;
use testkit::manifests::{self, ApplyOptions};
use testkit::nodes::{create_node, has_status, wait_for_condition};
use testkit::time::whole_second;

/// What `make image` tags: the full name of the manifests' `kumaco:VERSION`.
const IMAGE: &str = concat!("docker.io/library/kumaco:", env!("CARGO_PKG_VERSION"));
/// Where Kubernetes mounts a Pod's ServiceAccount credentials.
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const NAMESPACE: &str = "kumaco";
/// The Pod's name, as the Downward API would give it (POD_NAME).
const POD_NAME: &str = "kumaco-6c9f8d7b5-x2k4p";
/// The image's size target (the static binary is most of it). The health gates (a CEL
/// interpreter, the alert and query clients) took it from 12.5 to 16.9 MB; a second TLS
/// stack or HTTP client pulled in by accident (about 5 MB) would still cross it.
const MAX_IMAGE_BYTES: u64 = 20_000_000;

/// `podman ARGS`, with the CI machine's runtime work-around (see the header).
fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.args(["--runtime", "runc"]);
    cmd
}

/// `podman run` with the limits work-around (see the header).
fn podman_run() -> Command {
    let mut cmd = podman();
    cmd.args([
        "run",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
    ]);
    cmd
}

fn output(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e} (apt-get install podman runc)"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Fails loudly, with the command that fixes it, when the image is not built.
fn require_image() {
    let exists = Command::new("podman")
        .args(["image", "exists", IMAGE])
        .status();
    match exists {
        Ok(s) if s.success() => {}
        Ok(_) => panic!(
            "image {IMAGE} not found: build it with `make image` (`make test` does it first)"
        ),
        Err(e) => panic!(
            "podman is needed to run kumaco's image ({e}): apt-get install -y podman runc, \
             then `make image`"
        ),
    }
}

/// Fails when a source file of the binary changed after the image was built: the test
/// would run yesterday's kumaco.
fn require_fresh_image(image: &Value) {
    let created: Timestamp = image["Created"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("the image's creation time");
    let mut newest = (std::time::SystemTime::UNIX_EPOCH, PathBuf::new());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pending = vec![
        root.join("src"),
        root.join("Cargo.lock"),
        root.join("Cargo.toml"),
    ];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            let modified = path.metadata().and_then(|m| m.modified()).unwrap();
            if modified > newest.0 {
                newest = (modified, path);
            }
        }
    }
    let newest_at = Timestamp::try_from(newest.0).unwrap();
    assert!(
        newest_at <= created,
        "{IMAGE} (built {created}) is older than {} (changed {newest_at}): run `make image`",
        newest.1.display()
    );
}

/// The image's metadata, as `podman image inspect` gives it.
fn inspect() -> Value {
    let text = output(podman().args(["image", "inspect", IMAGE]));
    let list: Vec<Value> = serde_json::from_str(&text).expect("inspect JSON");
    list.into_iter().next().expect("one image")
}

/// True when an ELF file asks for a dynamic loader (a `PT_INTERP` program header): such a
/// binary cannot start in a `FROM scratch` image.
fn elf_has_interpreter(elf: &[u8]) -> bool {
    assert!(
        elf.starts_with(b"\x7fELF") && elf[4] == 2,
        "not a 64-bit ELF file"
    );
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let header = phoff + i * phentsize;
        u32::from_le_bytes(elf[header..header + 4].try_into().unwrap()) == 3 // PT_INTERP
    })
}

#[test]
fn image_is_static_non_root_small_and_reports_its_version() {
    require_image();
    let image = inspect();
    require_fresh_image(&image);
    let config = &image["Config"];
    assert_eq!(config["User"], "65532:65532", "{config:#}");
    assert_eq!(config["Entrypoint"], json!(["/usr/local/bin/kumaco"]));
    assert_eq!(config["Cmd"], json!(["run"]));
    let size = image["Size"].as_u64().expect("image size");
    eprintln!(
        "image {IMAGE}: {size} bytes ({:.1} MB)",
        size as f64 / 1_000_000.0
    );
    assert!(
        size <= MAX_IMAGE_BYTES,
        "the image is {size} bytes, more than {MAX_IMAGE_BYTES}"
    );

    // Every file of the image: the binary and a CA bundle, nothing else.
    let container = format!("kumaco-files-{}", std::process::id());
    output(podman().args(["create", "--name", &container, IMAGE]));
    let export = podman().args(["export", &container]).output();
    let dir = std::env::temp_dir().join(&container);
    std::fs::create_dir_all(&dir).unwrap();
    let copied = podman()
        .args(["cp", &format!("{container}:/usr/local/bin/kumaco")])
        .arg(&dir)
        .status();
    output(podman().args(["rm", &container]));
    let export = export.expect("podman export");
    assert!(export.status.success(), "podman export failed");
    let listing = tar_listing(&export.stdout);
    assert_eq!(
        listing,
        ["etc/ssl/certs/ca-certificates.crt", "usr/local/bin/kumaco"],
        "the image's files"
    );
    assert!(copied.is_ok_and(|s| s.success()), "podman cp failed");
    let binary = std::fs::read(dir.join("kumaco")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !elf_has_interpreter(&binary),
        "kumaco in the image is dynamically linked"
    );

    // The image's kumaco is this source's: the same version line as the test build.
    let from_image = output(podman_run().args(["--rm", IMAGE, "--version"]));
    let local = output(Command::new(env!("CARGO_BIN_EXE_kumaco")).arg("--version"));
    eprintln!("from the image: {}", from_image.trim());
    assert!(from_image.starts_with("kumaco "), "{from_image:?}");
    assert_eq!(
        from_image, local,
        "the image is another version: run `make image`"
    );
}

/// Regular files in a tar stream (a tar of a container holds a few empty mount points,
/// such as /etc/hosts, that the engine creates: only files with content count).
fn tar_listing(tar: &[u8]) -> Vec<String> {
    let mut files = Vec::new();
    let mut offset = 0;
    while offset + 512 <= tar.len() && tar[offset] != 0 {
        let header = &tar[offset..offset + 512];
        let field = |range: std::ops::Range<usize>| {
            let raw = &header[range];
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).trim().to_string()
        };
        let name = field(0..100);
        let prefix = field(345..500);
        let size = u64::from_str_radix(&field(124..136), 8).unwrap_or(0) as usize;
        let kind = header[156];
        if (kind == b'0' || kind == 0) && size > 0 {
            let path = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            files.push(path.trim_start_matches("./").to_string());
        }
        offset += 512 + size.div_ceil(512) * 512;
    }
    files.sort();
    files
}

/// `helm template` of the chart with its defaults except `sets`.
fn render_chart(sets: &[String]) -> Vec<DynamicObject> {
    let helm = testkit::gobuild::helm().unwrap_or_else(|e| panic!("{e:#}"));
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/kumaco");
    let mut cmd = Command::new(helm);
    cmd.args(["template", "kumaco"]).arg(chart).args([
        "--namespace",
        NAMESPACE,
        "--kube-version",
        "1.37.2",
    ]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    manifests::parse(&output(&mut cmd)).expect("helm's output")
}

/// The container of the rendered Deployment's Pod template, and the Pod spec.
fn pod_spec(objects: &[DynamicObject]) -> (Value, Value) {
    let deployment = objects
        .iter()
        .find(|o| o.types.as_ref().is_some_and(|t| t.kind == "Deployment"))
        .expect("the chart renders a Deployment");
    let spec = deployment.data["spec"]["template"]["spec"].clone();
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    (spec.clone(), containers[0].clone())
}

/// podman flags for the Pod's and the container's security context. A field this does
/// not know fails the test rather than being left out: the container must run exactly as
/// the Deployment says.
fn security_flags(pod: &Value, container: &Value) -> Vec<String> {
    let pod_sc = pod["securityContext"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let c_sc = container["securityContext"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    // The container's settings win over the Pod's, as in Kubernetes.
    let mut merged = pod_sc.clone();
    merged.extend(c_sc.clone());
    let mut flags = Vec::new();
    for (key, value) in &merged {
        match (key.as_str(), value) {
            ("runAsUser" | "runAsGroup", _) => {}
            ("runAsNonRoot", Value::Bool(true)) => {
                // The kubelet refuses to start a container whose user is root.
                assert_ne!(merged["runAsUser"], json!(0), "runAsNonRoot with uid 0");
            }
            ("seccompProfile", p) if p["type"] == "RuntimeDefault" => {
                // podman applies its default seccomp profile unless told otherwise.
            }
            ("readOnlyRootFilesystem", Value::Bool(true)) => {
                // No tmpfs on /tmp and /run either: a Pod gets none.
                flags.extend(["--read-only".into(), "--read-only-tmpfs=false".into()]);
            }
            ("allowPrivilegeEscalation", Value::Bool(false)) => {
                flags.extend(["--security-opt".into(), "no-new-privileges".into()]);
            }
            ("capabilities", caps) if caps == &json!({ "drop": ["ALL"] }) => {
                flags.push("--cap-drop=ALL".into());
            }
            _ => panic!("the test cannot run securityContext {key}: {value} with podman"),
        }
    }
    let user = merged.get("runAsUser").expect("runAsUser");
    let group = merged.get("runAsGroup").expect("runAsGroup");
    flags.push(format!("--user={user}:{group}"));
    flags
}

/// `--env` flags for the container's environment, the Downward API resolved.
fn env_flags(container: &Value) -> Vec<String> {
    let mut flags = Vec::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().expect("env name");
        let value = if let Some(v) = var["value"].as_str() {
            v.to_string()
        } else {
            match var["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.namespace") => NAMESPACE.into(),
                Some("metadata.name") => POD_NAME.into(),
                other => panic!("the test cannot resolve env {name} from {other:?}"),
            }
        };
        flags.push(format!("--env={name}={value}"));
    }
    flags
}

/// The port of a probe's `httpGet` (a number, or the name of a container port) and path.
fn probe(container: &Value, probe: &str) -> (u16, String) {
    let get = &container[probe]["httpGet"];
    let port = match &get["port"] {
        Value::Number(n) => n.as_u64().unwrap() as u16,
        Value::String(name) => container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name.as_str())
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("{probe}: no container port named {name}"))
            as u16,
        other => panic!("{probe}: port {other}"),
    };
    (port, get["path"].as_str().expect("probe path").to_string())
}

/// The ServiceAccount's credentials as the kubelet mounts them: a bound token from the
/// TokenRequest API, the cluster's CA, the namespace. Returns the directory.
async fn service_account_files(server: &ApiServer, client: &kube::Client) -> PathBuf {
    let request = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": { "expirationSeconds": 3600 }
    });
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let token: TokenRequest = api
        .create_subresource("token", "kumaco", &PostParams::default(), &request)
        .await
        .expect("TokenRequest for the chart's ServiceAccount");
    let token = token.status.and_then(|s| s.token).expect("a token");
    let dir = server.dir().join("serviceaccount");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), token).unwrap();
    std::fs::copy(server.dir().join("pki/ca.crt"), dir.join("ca.crt")).unwrap();
    std::fs::write(dir.join("namespace"), NAMESPACE).unwrap();
    // Readable by uid 65532 (the kubelet makes them so through the Pod's fsGroup, or
    // gives them mode 0644).
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(&dir).unwrap() {
        std::fs::set_permissions(
            entry.unwrap().path(),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The server's directory is private to root: the container's user needs a way in.
    std::fs::set_permissions(server.dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The running container; removed (forcibly) when dropped, so a failing test leaves none.
struct Container {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Container {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman()
            .args(["rm", "--force", "--time", "0", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

/// Polls `path` on `port` until it answers 200, as a readiness probe would (only faster,
/// to measure when); the time from `since`.
async fn wait_ok(container: &mut Container, port: u16, path: &str, since: Instant) -> Duration {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = since + Duration::from_secs(120);
    loop {
        if let Ok((200, _)) = http::get(address, path).await {
            return since.elapsed();
        }
        if let Ok(Some(status)) = container.child.try_wait() {
            panic!(
                "the container exited ({status}) before {path} answered 200:\n{}",
                container.log()
            );
        }
        assert!(
            Instant::now() < deadline,
            "{path} not 200 after 120 s:\n{}",
            container.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn image_runs_in_cluster_as_the_chart_deploys_it() {
    require_image();
    require_fresh_image(&inspect());
    // A server of its own: the chart's default scope is every node, and its admission
    // policy is cluster-wide.
    let server = ApiServer::start_fresh().expect("test API server");
    let client = server.client().await.unwrap();
    let api_port = server
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .expect("the API server's port");

    let free_port = || http::free_port().expect("a free port");
    let (metrics_port, health_port) = (free_port(), free_port());
    let objects = render_chart(&[
        format!("metricsAddress=0.0.0.0:{metrics_port}"),
        format!("healthAddress=0.0.0.0:{health_port}"),
    ]);
    let namespace: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE }
    }))
    .unwrap();
    let options = ApplyOptions {
        field_manager: "helm",
        dry_run: false,
        default_namespace: Some(NAMESPACE),
    };
    // Everything the chart installs, as installed: the ServiceAccount, its RBAC (the only
    // rights the container gets), the admission policy, the Deployment (that no kubelet
    // runs here: this test is its kubelet).
    for obj in std::iter::once(&namespace).chain(&objects) {
        manifests::apply(&client, obj, &options)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
    let sa_dir = service_account_files(&server, &client).await;

    let (pod, spec) = pod_spec(&objects);
    let args: Vec<String> = spec["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    let memory_limit = spec["resources"]["limits"]["memory"]
        .as_str()
        .map(|m| m.replace("Mi", "m"));
    let (ready_port, ready_path) = probe(&spec, "readinessProbe");
    let (live_port, live_path) = probe(&spec, "livenessProbe");
    assert_eq!(ready_port, health_port);

    // A node for kumaco to manage, and a window that opens once kumaco is running.
    let scope = testkit::Scope::new("image");
    let node = create_node(&client, &scope, "worker", &[], &[])
        .await
        .unwrap()
        .metadata
        .name
        .unwrap();

    let name = format!("kumaco-image-test-{}", std::process::id());
    let log = server.dir().join("container.log");
    let mut cmd = podman_run();
    cmd.args(["--name", &name, "--network", "host"])
        .args(security_flags(&pod, &spec))
        .args(env_flags(&spec))
        .arg("--env=KUBERNETES_SERVICE_HOST=127.0.0.1")
        .arg(format!("--env=KUBERNETES_SERVICE_PORT={api_port}"))
        .arg(format!("--volume={}:{SA_DIR}:ro", sa_dir.display()));
    if let Some(limit) = &memory_limit {
        cmd.arg(format!("--memory={limit}"));
    }
    let out = std::fs::File::create(&log).unwrap();
    cmd.arg(IMAGE)
        .args(&args)
        .stderr(out.try_clone().unwrap())
        .stdout(out);
    eprintln!("{cmd:?}");
    let started = Instant::now();
    let mut container = Container {
        name,
        child: cmd.spawn().expect("podman run"),
        log,
    };

    let to_ready = wait_ok(&mut container, ready_port, &ready_path, started).await;
    eprintln!(
        "container start to ready ({ready_path} 200): {:.2} s",
        to_ready.as_secs_f64()
    );
    let (code, _) = http::get(SocketAddr::from(([127, 0, 0, 1], live_port)), &live_path)
        .await
        .unwrap();
    assert_eq!(code, 200, "liveness {live_path}");
    let text = container.log();
    assert!(
        text.contains("the in-cluster configuration"),
        "kumaco did not use the in-cluster configuration:\n{text}"
    );

    // The window: opens a few seconds from now, on the node.
    let start = whole_second(Timestamp::now() + SignedDuration::from_secs(4));
    testkit::fleet::put_window(
        &client,
        NAMESPACE,
        "maintenance-manager",
        "image-test",
        &[
            ("startTime", &start.to_string()),
            ("duration", "1h"),
            ("nodeSelector", &scope.selector()),
        ],
    )
    .await
    .unwrap();
    let node_now = wait_for_condition(
        &client,
        &node,
        UNDER_MAINTENANCE,
        Duration::from_secs(30),
        |c| has_status(c, Some("True")),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", container.log()));
    let condition = testkit::nodes::condition(&node_now, UNDER_MAINTENANCE).unwrap();
    assert!(
        condition
            .message
            .as_deref()
            .unwrap_or("")
            .contains("kumaco/image-test"),
        "{condition:?}"
    );
    let events = testkit::events::wait_for(
        &client,
        NAMESPACE,
        "image-test",
        "WindowStarted",
        Duration::from_secs(30),
        |e| e.reporting_instance.as_deref() == Some(POD_NAME),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", container.log()));
    assert_eq!(testkit::events::count(&events, "WindowLoaded"), 1);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = leases
        .get("kumaco")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some(POD_NAME));

    // Still alive and ready while it works, and scraped where the chart says.
    for (port, path) in [(live_port, &live_path), (ready_port, &ready_path)] {
        let (code, _) = http::get(SocketAddr::from(([127, 0, 0, 1], port)), path)
            .await
            .unwrap();
        assert_eq!(code, 200, "{path} while leading");
    }
    let (code, metrics) = http::get(SocketAddr::from(([127, 0, 0, 1], metrics_port)), "/metrics")
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert_eq!(
        testkit::kumaco::metric(&metrics, "kumaco_leader", &[]).unwrap(),
        1.0,
        "{metrics}"
    );

    // Shutdown as the kubelet does it: SIGTERM, SIGKILL after the grace period.
    let stopping = Instant::now();
    output(podman().args(["stop", "--time", &grace.to_string(), &container.name]));
    let status = container.child.wait().expect("podman run's exit");
    let stopped_in = stopping.elapsed();
    eprintln!("SIGTERM to exit: {:.2} s", stopped_in.as_secs_f64());
    assert!(
        status.success(),
        "kumaco exited with {status} on SIGTERM:\n{}",
        container.log()
    );
    assert!(
        stopped_in < Duration::from_secs(grace),
        "shutdown took {stopped_in:?}, the grace period is {grace} s"
    );
    let holder = leases
        .get("kumaco")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder, None, "the Lease is released at shutdown");
}
