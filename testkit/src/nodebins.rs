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

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::gobuild::{
    CLIENT_GO_VERSION, COMPONENT_BASE_VERSION, cache_root, cached, go, kubernetes_ldflags,
    kubernetes_version, module_copy, module_dir, module_download, run_go,
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
    let node = |dir: &Path| KubeNode {
        kubelet: dir.join("kubelet"),
        controller_manager: dir.join("kube-controller-manager"),
        scheduler: dir.join("kube-scheduler"),
    };
    if let Some(dir) = std::env::var_os("KUMACO_KUBE_NODE_DIR") {
        return overridden("KUMACO_KUBE_NODE_DIR", node(Path::new(&dir)), |n| {
            [&n.kubelet, &n.controller_manager, &n.scheduler]
        });
    }
    let module = module_dir();
    let version = kubernetes_version(&module)?;
    let hash = hash_files(&[module.join("go.mod"), module.join("go.sum")])?;
    let dir = cache_root().join(format!("kube-node-{version}-{}", &hash[..16]));
    let names = KUBE_PROGRAMS.map(|(name, _)| name);
    let what = format!("kubelet, kube-controller-manager and kube-scheduler {version}");
    cached(&what, &dir, &names, |out| {
        // The programs report their version, and the kubelet's skew against the API
        // server is known.
        let ldflags = kubernetes_ldflags(&version, &[CLIENT_GO_VERSION, COMPONENT_BASE_VERSION]);
        let mut build = go();
        build
            .current_dir(module_copy(&dir)?)
            // -mod=mod: Go records the sums of the kubelet's own dependencies in the copy,
            // not in testenv/.
            .env("GOFLAGS", "-mod=mod -buildvcs=false")
            .args(["build", "-trimpath"])
            .arg(format!("-ldflags={ldflags}"))
            .arg("-o")
            .arg(format!("{}/", out.display()))
            .args(KUBE_PROGRAMS.iter().map(|(_, pkg)| *pkg));
        run_go(build, &format!("go build {}", names.join(" ")))
    })?;
    Ok(node(&dir))
}

/// The programs a `KUMACO_..._DIR` override names, if they are all there.
fn overridden<T, const N: usize>(
    var: &str,
    programs: T,
    paths: impl Fn(&T) -> [&PathBuf; N],
) -> Result<T> {
    if let Some(missing) = paths(&programs).into_iter().find(|p| !p.exists()) {
        bail!("{var} names a directory without {}", missing.display());
    }
    Ok(programs)
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
    let containerd = |dir: &Path| Containerd {
        containerd: dir.join("containerd"),
        shim: dir.join("containerd-shim-runc-v2"),
        ctr: dir.join("ctr"),
    };
    if let Some(dir) = std::env::var_os("KUMACO_CONTAINERD_DIR") {
        return overridden("KUMACO_CONTAINERD_DIR", containerd(Path::new(&dir)), |c| {
            [&c.containerd, &c.shim, &c.ctr]
        });
    }
    let dir = cache_root().join(format!("containerd-{CONTAINERD_VERSION}"));
    let what = format!("containerd {CONTAINERD_VERSION}");
    let names = ["containerd", "containerd-shim-runc-v2", "ctr"];
    cached(&what, &dir, &names, |out| {
        let packages = names
            .map(|p| format!("github.com/containerd/containerd/v2/cmd/{p}@{CONTAINERD_VERSION}"));
        let mut install = go();
        install
            .env("GOBIN", out)
            .env("GOFLAGS", "-buildvcs=false")
            // Without cgo the btrfs snapshotter cannot build; the node uses overlayfs.
            .args(["install", "-trimpath", "-tags", "no_btrfs"])
            .arg(format!(
                "-ldflags=-s -w -X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}"
            ))
            .args(&packages);
        run_go(install, &format!("go install {}", packages.join(" ")))
    })?;
    Ok(containerd(&dir))
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
    cached(
        &format!("the pause image {PAUSE_VERSION}"),
        &dir,
        &["pause.tar"],
        |out| {
            let module = module_download(&format!("k8s.io/kubernetes@{version}"))?;
            let source = module.join("build/pause/linux/pause.c");
            let context = out.join("context");
            fs::create_dir_all(&context)?;
            run(Command::new("cc")
                .args(["-Os", "-static", "-s"])
                .arg(format!("-DVERSION={PAUSE_VERSION}"))
                .arg("-o")
                .arg(context.join("pause"))
                .arg(&source))
            .context("compiling pause.c (apt-get install gcc libc6-dev)")?;
            fs::write(context.join("Containerfile"), containerfile)?;
            run(Command::new("podman")
                .args(["build", "-q", "--no-cache", "-f"])
                .arg(context.join("Containerfile"))
                .args(["-t", PAUSE_IMAGE])
                .arg(&context))
            .context("building the pause image (apt-get install podman runc)")?;
            run(Command::new("podman")
                .args(["save", "-q", "-o"])
                .arg(out.join("pause.tar"))
                .arg(PAUSE_IMAGE))
            .context("saving the pause image")
        },
    )?;
    Ok(dir.join("pause.tar"))
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
