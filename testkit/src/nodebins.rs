//! The programs of the real node ([`crate::realcluster`]), built once per machine and
//! cached like the test API server ([`crate::gobuild`]):
//!
//! - kubelet, kube-controller-manager and kube-scheduler, built from the k8s.io/kubernetes
//!   version testenv/go.mod pins (the test API server's and kubectl's), inside a copy of
//!   that go.mod as kubectl is;
//! - containerd 2.x, its runc shim and `ctr`, by `go install` from containerd's own Go
//!   module (its go.mod has no replace directives and nothing in common with the
//!   Kubernetes build to share; Debian's containerd 1.6 is older than a 1.37 kubelet
//!   accepts);
//! - the pause image (every Pod's sandbox), compiled from Kubernetes' own
//!   `build/pause/linux/pause.c` in the Go module cache and packed `FROM scratch` with
//!   podman, as `make image` packs kumaco: no registry is reachable from CI.
//!
//! runc and the CNI plugins are Debian's (`apt-get install runc containernetworking-plugins`).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::gobuild::{
    CLIENT_GO_VERSION, COMPONENT_BASE_VERSION, cache_root, kubernetes_ldflags, kubernetes_version,
    module_copy, module_dir,
};

/// The containerd release the node runs (2.x: kubelets of 1.36 and later refuse 1.x).
pub const CONTAINERD_VERSION: &str = "v2.4.2";

/// The pause image's version (kubeadm's `PauseVersion` for Kubernetes 1.37).
pub const PAUSE_VERSION: &str = "3.10.2";

/// The name the pause image gets here, and the sandbox image containerd is told to use.
/// A local name: the node pulls nothing.
pub const PAUSE_IMAGE: &str = "localhost/kumaco-test/pause:3.10.2";

/// The Kubernetes programs of the node.
#[derive(Clone, Debug)]
pub struct KubeNode {
    pub kubelet: PathBuf,
    pub controller_manager: PathBuf,
    pub scheduler: PathBuf,
}

const KUBE_PROGRAMS: [(&str, &str); 3] = [
    ("kubelet", "k8s.io/kubernetes/cmd/kubelet"),
    (
        "kube-controller-manager",
        "k8s.io/kubernetes/cmd/kube-controller-manager",
    ),
    ("kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"),
];

/// kubelet, kube-controller-manager and kube-scheduler, built on first use into
/// `<cache>/kube-node-<version>-<hash>/` (the hash is of testenv's go.mod and go.sum, which
/// decide the build). `KUMACO_KUBE_NODE_DIR` names a directory holding the three instead.
pub fn kube_node() -> Result<KubeNode> {
    let (dir, overridden) = match std::env::var_os("KUMACO_KUBE_NODE_DIR") {
        Some(dir) => (PathBuf::from(dir), true),
        None => {
            let module = module_dir();
            let version = kubernetes_version(&module)?;
            let hash = hash_files(&[module.join("go.mod"), module.join("go.sum")])?;
            (
                cache_root().join(format!("kube-node-{version}-{}", &hash[..16])),
                false,
            )
        }
    };
    let node = KubeNode {
        kubelet: dir.join("kubelet"),
        controller_manager: dir.join("kube-controller-manager"),
        scheduler: dir.join("kube-scheduler"),
    };
    let complete = |n: &KubeNode| {
        [&n.kubelet, &n.controller_manager, &n.scheduler]
            .iter()
            .all(|p| p.exists())
    };
    if complete(&node) {
        return Ok(node);
    }
    if overridden {
        bail!(
            "KUMACO_KUBE_NODE_DIR={} lacks kubelet, kube-controller-manager or kube-scheduler",
            dir.display()
        );
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating cache dir {}", dir.display()))?;
    let lock = File::create(dir.join(".lock"))?;
    lock.lock().context("locking the kube-node build cache")?;
    if complete(&node) {
        return Ok(node); // another test binary built them while we waited
    }
    build_kube_node(&dir)?;
    Ok(node)
}

fn build_kube_node(dir: &Path) -> Result<()> {
    let version = kubernetes_version(&module_dir())?;
    let src = module_copy(dir)?;
    eprintln!(
        "testkit: building kubelet, kube-controller-manager and kube-scheduler {version} \
         (first time on this machine: 10-20 minutes on 2 cores)..."
    );
    let started = Instant::now();
    // The programs report their version, and the kubelet's skew against the API server
    // is known.
    let ldflags = kubernetes_ldflags(&version, &[CLIENT_GO_VERSION, COMPONENT_BASE_VERSION]);
    let out = dir.join(".build");
    fs::create_dir_all(&out)?;
    let status = Command::new("go")
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        // -mod=mod: Go records the sums of the kubelet's own dependencies in the copy,
        // not in testenv/.
        .env("GOFLAGS", "-mod=mod -buildvcs=false")
        .args(["build", "-trimpath"])
        .arg(format!("-ldflags={ldflags}"))
        .arg("-o")
        .arg(format!("{}/", out.display()))
        .args(KUBE_PROGRAMS.iter().map(|(_, pkg)| *pkg))
        .status()
        .context("running go build for the kubelet (is Go >= 1.26 on PATH?)")?;
    if !status.success() {
        bail!(
            "`go build` of kubelet, kube-controller-manager and kube-scheduler in {} failed \
             ({status}); see the output above",
            src.display()
        );
    }
    for (name, _) in KUBE_PROGRAMS {
        fs::rename(out.join(name), dir.join(name))
            .with_context(|| format!("go build left no {name}"))?;
    }
    eprintln!(
        "testkit: built the node's Kubernetes programs in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// containerd and the tools the node uses with it.
#[derive(Clone, Debug)]
pub struct Containerd {
    pub containerd: PathBuf,
    /// `containerd-shim-runc-v2`: containerd finds it on its PATH.
    pub shim: PathBuf,
    /// For importing images into the node's store.
    pub ctr: PathBuf,
}

impl Containerd {
    /// The directory of the three (put first on containerd's PATH, for the shim).
    pub fn dir(&self) -> &Path {
        self.containerd.parent().expect("a file in a directory")
    }
}

/// containerd [`CONTAINERD_VERSION`], its runc shim and ctr, built on first use into
/// `<cache>/containerd-<version>/` by `go install …@version` (about 4 minutes cold).
/// `KUMACO_CONTAINERD_DIR` names a directory holding the three instead.
pub fn containerd() -> Result<Containerd> {
    let (dir, overridden) = match std::env::var_os("KUMACO_CONTAINERD_DIR") {
        Some(dir) => (PathBuf::from(dir), true),
        None => (
            cache_root().join(format!("containerd-{CONTAINERD_VERSION}")),
            false,
        ),
    };
    let c = Containerd {
        containerd: dir.join("containerd"),
        shim: dir.join("containerd-shim-runc-v2"),
        ctr: dir.join("ctr"),
    };
    let complete = |c: &Containerd| [&c.containerd, &c.shim, &c.ctr].iter().all(|p| p.exists());
    if complete(&c) {
        return Ok(c);
    }
    if overridden {
        bail!(
            "KUMACO_CONTAINERD_DIR={} lacks containerd, containerd-shim-runc-v2 or ctr",
            dir.display()
        );
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating cache dir {}", dir.display()))?;
    let lock = File::create(dir.join(".lock"))?;
    lock.lock().context("locking the containerd build cache")?;
    if complete(&c) {
        return Ok(c);
    }
    eprintln!(
        "testkit: building containerd {CONTAINERD_VERSION} (first time on this machine, a few \
         minutes)..."
    );
    let started = Instant::now();
    let packages = ["cmd/containerd", "cmd/containerd-shim-runc-v2", "cmd/ctr"]
        .map(|p| format!("github.com/containerd/containerd/v2/{p}@{CONTAINERD_VERSION}"));
    let status = Command::new("go")
        .env("GOBIN", &dir)
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-buildvcs=false")
        // Without cgo the btrfs snapshotter cannot build; the node uses overlayfs.
        .args(["install", "-trimpath", "-tags", "no_btrfs"])
        .arg(format!(
            "-ldflags=-s -w -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"
        ))
        .args(&packages)
        .status()
        .context("running go install for containerd (is Go >= 1.26 on PATH?)")?;
    if !status.success() || !complete(&c) {
        bail!(
            "`go install {}` failed ({status}); see the output above",
            packages.join(" ")
        );
    }
    eprintln!(
        "testkit: built containerd in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(c)
}

/// The pause image as an image archive (`podman save`'s docker-archive) that `ctr images
/// import` loads, built on first use into `<cache>/pause-<version>-<hash>/pause.tar`: the
/// static pause program compiled with the host's C compiler from the Kubernetes module's
/// source, running as 65535, `FROM scratch`.
pub fn pause_image() -> Result<PathBuf> {
    let containerfile =
        "FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT [\"/pause\"]\n";
    // The source is the Kubernetes version's: the key needs no look into the module cache.
    let version = kubernetes_version(&module_dir())?;
    let mut h = Sha256::new();
    h.update(&version);
    h.update(containerfile);
    h.update(PAUSE_IMAGE);
    let hash = format!("{:x}", h.finalize());
    let dir = cache_root().join(format!("pause-{PAUSE_VERSION}-{}", &hash[..16]));
    let archive = dir.join("pause.tar");
    if archive.exists() {
        return Ok(archive);
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating cache dir {}", dir.display()))?;
    let lock = File::create(dir.join(".lock"))?;
    lock.lock().context("locking the pause image cache")?;
    if archive.exists() {
        return Ok(archive);
    }
    let source = pause_source(&version)?;
    let context = dir.join("context");
    fs::create_dir_all(&context)?;
    let binary = context.join("pause");
    run(Command::new("cc")
        .args(["-Os", "-static", "-s"])
        .arg(format!("-DVERSION={PAUSE_VERSION}"))
        .arg("-o")
        .arg(&binary)
        .arg(&source))
    .context("compiling pause.c (apt-get install gcc libc6-dev)")?;
    fs::write(context.join("Containerfile"), containerfile)?;
    run(Command::new("podman")
        .args(["build", "-q", "--no-cache", "-f"])
        .arg(context.join("Containerfile"))
        .args(["-t", PAUSE_IMAGE])
        .arg(&context))
    .context("building the pause image (apt-get install podman runc)")?;
    let tmp = dir.join("pause.tar.tmp");
    let _ = fs::remove_file(&tmp);
    run(Command::new("podman")
        .args(["save", "-q", "-o"])
        .arg(&tmp)
        .arg(PAUSE_IMAGE))
    .context("saving the pause image")?;
    fs::rename(&tmp, &archive)?;
    Ok(archive)
}

/// `build/pause/linux/pause.c` of the Kubernetes module testenv pins, from the module
/// cache (downloaded if missing).
fn pause_source(version: &str) -> Result<PathBuf> {
    let out = Command::new("go")
        .env("GOTOOLCHAIN", "local")
        // Outside any module, so that no go.sum is touched.
        .current_dir(std::env::temp_dir())
        .args(["mod", "download", "-json"])
        .arg(format!("k8s.io/kubernetes@{version}"))
        .output()
        .context("running go mod download (is Go >= 1.26 on PATH?)")?;
    if !out.status.success() {
        bail!(
            "go mod download k8s.io/kubernetes@{version} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let dir = info["Dir"]
        .as_str()
        .context("go mod download named no directory")?;
    let source = Path::new(dir).join("build/pause/linux/pause.c");
    if !source.exists() {
        bail!("{} is missing from the module cache", source.display());
    }
    Ok(source)
}

/// Runs `cmd`, failing with its output when it fails.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

fn hash_files(files: &[PathBuf]) -> Result<String> {
    let mut h = Sha256::new();
    for file in files {
        h.update(fs::read(file).with_context(|| format!("reading {}", file.display()))?);
        h.update([0]);
    }
    Ok(format!("{:x}", h.finalize()))
}
