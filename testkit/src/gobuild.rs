//! Building the Go test programs in `testenv/` once per machine.
//!
//! The binaries are cached outside the repository, each keyed by a hash of the module's
//! go.mod, go.sum and its own Go sources (the oracle's are `testenv/oracle/`, the API
//! server's the rest), so only the first build on a machine (or after a change to those
//! sources) pays: a new oracle request does not rebuild the API server. Concurrent test
//! binaries coordinate through a file lock ([`cached`], which the other programs the
//! tests build go through too).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// The Go programs `testenv/` builds.
#[derive(Clone, Copy, Debug)]
pub enum Program {
    /// `testenv/`: etcd + kube-apiserver in one process.
    ApiServer,
    /// `testenv/oracle`: the Go code kumaco's parsers must agree with.
    Oracle,
}

impl Program {
    fn package(self) -> &'static str {
        match self {
            Program::ApiServer => ".",
            Program::Oracle => "./oracle",
        }
    }
    fn name(self) -> &'static str {
        match self {
            Program::ApiServer => "testenv",
            Program::Oracle => "oracle",
        }
    }
    /// Whether `rel` (a path inside testenv/) is one of this program's own sources;
    /// go.mod and go.sum belong to both.
    fn owns(self, rel: &Path) -> bool {
        let in_oracle = rel.starts_with("oracle");
        let shared = rel == Path::new("go.mod") || rel == Path::new("go.sum");
        shared
            || match self {
                Program::ApiServer => !in_oracle,
                Program::Oracle => in_oracle,
            }
    }
}

/// The `testenv/` Go module in this repository.
pub fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testenv")
}

/// Where built programs are kept: `$KUMACO_CACHE_DIR`, else `$XDG_CACHE_HOME/kumaco`,
/// else `~/.cache/kumaco`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUMACO_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("kumaco");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache/kumaco")
}

/// Returns the path of `program`, building it first if this version of testenv/ has not
/// been built on this machine. `KUMACO_TESTENV_BIN` / `KUMACO_ORACLE_BIN` override.
pub fn binary(program: Program) -> Result<PathBuf> {
    let override_var = match program {
        Program::ApiServer => "KUMACO_TESTENV_BIN",
        Program::Oracle => "KUMACO_ORACLE_BIN",
    };
    if let Some(path) = std::env::var_os(override_var) {
        return Ok(PathBuf::from(path));
    }
    let module = module_dir();
    let hash = source_hash(&module, program)?;
    let name = program.name();
    let dir = cache_root().join(format!("{name}-{}", &hash[..16]));
    cached(name, &dir, &[name], |out| {
        // The API server reports its version from /version.
        let version = kubernetes_version(&module)?;
        let ldflags = kubernetes_ldflags(&version, &[COMPONENT_BASE_VERSION]);
        let mut build = go();
        build
            .current_dir(&module)
            .args(["build", "-trimpath"])
            .arg(format!("-ldflags={ldflags}"))
            .arg("-o")
            .arg(out.join(name))
            .arg(program.package());
        run_go(
            build,
            &format!("go build {} in {}", program.package(), module.display()),
        )
    })?;
    Ok(dir.join(name))
}

/// The Helm release the chart tests render with (its go.mod builds with Go 1.26).
pub const HELM_VERSION: &str = "v3.22.0";

/// Returns the path of `helm`, building it once per machine from the Go module proxy
/// (`go install helm.sh/helm/v3/cmd/helm@HELM_VERSION`) into the cache. `KUMACO_HELM_BIN`
/// overrides.
pub fn helm() -> Result<PathBuf> {
    go_install(
        "helm",
        "helm.sh/helm/v3/cmd/helm",
        HELM_VERSION,
        "KUMACO_HELM_BIN",
    )
}

/// Returns the path of `kubectl` built from the k8s.io/kubernetes version testenv/go.mod
/// pins (the test API server's), once per machine, into `<cache>/kubectl-<version>`.
/// `KUMACO_KUBECTL_BIN` overrides.
///
/// Built inside a copy of testenv's module ([`module_copy`]).
pub fn kubectl() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("KUMACO_KUBECTL_BIN") {
        return Ok(PathBuf::from(path));
    }
    let version = kubernetes_version(&module_dir())?;
    let dir = cache_root().join(format!("kubectl-{version}"));
    cached(&format!("kubectl {version}"), &dir, &["kubectl"], |out| {
        // kubectl reports its version, and warns about skew without it.
        let ldflags = kubernetes_ldflags(&version, &[CLIENT_GO_VERSION, COMPONENT_BASE_VERSION]);
        let mut build = go();
        build
            .current_dir(module_copy(&dir)?)
            .env("GOFLAGS", "-mod=mod")
            .args(["build", "-trimpath"])
            .arg(format!("-ldflags={ldflags}"))
            .arg("-o")
            .arg(out.join("kubectl"))
            .arg("k8s.io/kubernetes/cmd/kubectl");
        run_go(build, "go build k8s.io/kubernetes/cmd/kubectl")
    })?;
    Ok(dir.join("kubectl"))
}

/// The Prometheus release whose promtool checks and unit-tests kumaco's alert rules
/// (the Go module's v0.316.0 is Prometheus 3.16.0).
pub const PROMTOOL_VERSION: &str = "v0.316.0";

/// Returns the path of `promtool`, building it once per machine from the Go module proxy
/// (`go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@PROMTOOL_VERSION`)
/// into the cache. `KUMACO_PROMTOOL_BIN` overrides. The tag leaves out the cloud service
/// discoveries (AWS, Azure, GCE, ...), most of the build, which rule checks and tests
/// never use; the first build still downloads Prometheus' dependencies and takes minutes.
pub fn promtool() -> Result<PathBuf> {
    go_install_with(
        "promtool",
        "github.com/prometheus/prometheus/cmd/promtool",
        PROMTOOL_VERSION,
        "KUMACO_PROMTOOL_BIN",
        &["-tags", "remove_all_sd"],
    )
}

/// Returns the path of `prometheus` from the same release as promtool, built once per
/// machine like it (`go install -tags remove_all_sd
/// github.com/prometheus/prometheus/cmd/prometheus@PROMTOOL_VERSION`), for the alerts
/// gate's queries (tests/alert_gate.rs). `KUMACO_PROMETHEUS_BIN` overrides. Without the
/// `builtinassets` tag its web UI is read from disk, and the tests never load it.
pub fn prometheus() -> Result<PathBuf> {
    go_install_with(
        "prometheus",
        "github.com/prometheus/prometheus/cmd/prometheus",
        PROMTOOL_VERSION,
        "KUMACO_PROMETHEUS_BIN",
        &["-tags", "remove_all_sd"],
    )
}

/// The Alertmanager release the silence tests run (tests/silences.rs).
pub const ALERTMANAGER_VERSION: &str = "v0.35.0";

/// Returns the path of `alertmanager`, built once per machine into the cache from the
/// module on the Go module proxy. `KUMACO_ALERTMANAGER_BIN` overrides.
///
/// Not `go install`: the module embeds its web UI's build output (`ui/app/dist`), which
/// the module's zip leaves out, so the package does not compile as published. It is built
/// in a copy of the module (in the cache) with an empty page in place of the UI, which
/// the tests never load.
pub fn alertmanager() -> Result<PathBuf> {
    const MODULE: &str = "github.com/prometheus/alertmanager";
    if let Some(path) = std::env::var_os("KUMACO_ALERTMANAGER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let dir = cache_root().join(format!("alertmanager-{ALERTMANAGER_VERSION}"));
    let what = format!("alertmanager {ALERTMANAGER_VERSION}");
    cached(&what, &dir, &["alertmanager"], |out| {
        let module = module_download(&format!("{MODULE}@{ALERTMANAGER_VERSION}"))?;
        let src = dir.join("module");
        let _ = fs::remove_dir_all(&src);
        let copied = Command::new("cp")
            .args(["-r", "--no-preserve=mode"])
            .arg(&module)
            .arg(&src)
            .status()?;
        if !copied.success() {
            bail!("copying {} to {}", module.display(), src.display());
        }
        for ui in ["elm", "mantine"] {
            let page = src.join("ui/app/dist").join(ui);
            fs::create_dir_all(&page)?;
            fs::write(
                page.join("index.html"),
                "<!doctype html><title>alertmanager</title>\n",
            )?;
        }
        let mut build = go();
        build
            .current_dir(&src)
            .args(["build", "-trimpath", "-ldflags=-s -w", "-o"])
            .arg(out.join("alertmanager"))
            .arg("./cmd/alertmanager");
        run_go(build, "go build ./cmd/alertmanager")?;
        // The copy was only needed to build.
        let _ = fs::remove_dir_all(&src);
        Ok(())
    })?;
    Ok(dir.join("alertmanager"))
}

/// `amtool` from the same release, which checks Alertmanager configurations (the
/// inhibition recipe's, tests/alerts.rs). `KUMACO_AMTOOL_BIN` overrides.
pub fn amtool() -> Result<PathBuf> {
    go_install(
        "amtool",
        "github.com/prometheus/alertmanager/cmd/amtool",
        ALERTMANAGER_VERSION,
        "KUMACO_AMTOOL_BIN",
    )
}

/// `go install package@version` into `<cache>/<name>-<version>/<name>`, once per machine
/// (under a file lock, so concurrent test binaries build it once); `override_var` names
/// a binary to use instead.
fn go_install(name: &str, package: &str, version: &str, override_var: &str) -> Result<PathBuf> {
    go_install_with(name, package, version, override_var, &[])
}

/// [`go_install`] with more `go install` flags (build tags).
fn go_install_with(
    name: &str,
    package: &str,
    version: &str,
    override_var: &str,
    flags: &[&str],
) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Ok(PathBuf::from(path));
    }
    let dir = cache_root().join(format!("{name}-{version}"));
    cached(&format!("{name} {version}"), &dir, &[name], |out| {
        let mut install = go();
        install
            .env("GOBIN", out)
            .args(["install", "-trimpath", "-ldflags=-s -w"])
            .args(flags)
            .arg(format!("{package}@{version}"));
        run_go(install, &format!("go install {package}@{version}"))
    })?;
    Ok(dir.join(name))
}

/// `files` in `dir`, a directory of the cache, built once per machine: when one is
/// missing, `build(out)` makes them all in a fresh directory `out`, and they are moved
/// into `dir` when it is done (a build cut short leaves nothing that looks built). Under
/// a file lock in `dir`, so that concurrent test binaries build once: whoever waited
/// finds them built. `what` names the build in messages.
pub(crate) fn cached(
    what: &str,
    dir: &Path,
    files: &[&str],
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let complete = || files.iter().all(|f| dir.join(f).exists());
    if complete() {
        return Ok(());
    }
    fs::create_dir_all(dir).with_context(|| format!("creating cache dir {}", dir.display()))?;
    let lock = File::create(dir.join(".lock"))?;
    lock.lock()
        .with_context(|| format!("locking the build cache of {what}"))?;
    if complete() {
        return Ok(());
    }
    eprintln!(
        "testkit: building {what} (first time on this machine; docs/development.md, Caches, says how long)..."
    );
    let started = Instant::now();
    let out = dir.join(".build");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out)?;
    build(&out).with_context(|| format!("building {what}"))?;
    for file in files {
        fs::rename(out.join(file), dir.join(file))
            .with_context(|| format!("building {what} left no {file}"))?;
    }
    let _ = fs::remove_dir_all(&out);
    eprintln!(
        "testkit: built {what} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `go`, as every build here runs it: no cgo (static programs), the toolchain on PATH.
pub(crate) fn go() -> Command {
    let mut go = Command::new("go");
    go.env("CGO_ENABLED", "0").env("GOTOOLCHAIN", "local");
    go
}

/// Runs a `go` command whose output goes to the test's, failing with `what`.
pub(crate) fn run_go(mut command: Command, what: &str) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {what} (is Go >= 1.26 on PATH?)"))?;
    if !status.success() {
        bail!("`{what}` failed ({status}); see the output above");
    }
    Ok(())
}

/// The directory of `module@version` in Go's module cache, downloaded if missing.
pub(crate) fn module_download(module_at_version: &str) -> Result<PathBuf> {
    let out = Command::new("go")
        .env("GOTOOLCHAIN", "local")
        // Outside any module, so that no go.sum is touched.
        .current_dir(std::env::temp_dir())
        .args(["mod", "download", "-json", module_at_version])
        .output()
        .context("running go mod download (is Go >= 1.26 on PATH?)")?;
    if !out.status.success() {
        bail!(
            "go mod download {module_at_version} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let dir = info["Dir"]
        .as_str()
        .context("go mod download named no directory")?;
    Ok(PathBuf::from(dir))
}

/// The k8s.io/kubernetes version testenv/go.mod requires (`v1.37.2`).
pub(crate) fn kubernetes_version(module: &Path) -> Result<String> {
    let gomod = fs::read_to_string(module.join("go.mod"))?;
    gomod
        .lines()
        .filter_map(|l| l.trim().strip_prefix("k8s.io/kubernetes v"))
        .map(|v| format!("v{}", v.split_whitespace().next().unwrap_or(v)))
        .next()
        .context("testenv/go.mod does not require k8s.io/kubernetes")
}

/// Kubernetes' version packages: a program reports the version stamped into them, and
/// v0.0.0-master without it.
pub(crate) const CLIENT_GO_VERSION: &str = "k8s.io/client-go/pkg/version";
/// See [`CLIENT_GO_VERSION`].
pub(crate) const COMPONENT_BASE_VERSION: &str = "k8s.io/component-base/version";

/// `-ldflags` for a Kubernetes program: stripped (`-s -w`), with `version` (`v1.37.2`)
/// stamped into each of the version `packages` it reports from.
pub(crate) fn kubernetes_ldflags(version: &str, packages: &[&str]) -> String {
    let minor = version.split('.').nth(1).unwrap_or("0");
    let mut flags = String::from("-s -w");
    for pkg in packages {
        flags.push_str(&format!(
            " -X {pkg}.gitVersion={version} -X {pkg}.gitMajor=1 -X {pkg}.gitMinor={minor}"
        ));
    }
    flags
}

/// A copy of testenv's go.mod and go.sum in `dir/module`, to build k8s.io/kubernetes
/// programs in: it cannot be `go install`ed (its go.mod replaces the staging modules with
/// local paths), and testenv's go.mod requires it with those replacements pinned; built
/// with `-mod=mod`, Go adds the sums of the program's own dependencies to the copy, not
/// to testenv/.
pub(crate) fn module_copy(dir: &Path) -> Result<PathBuf> {
    let module = module_dir();
    let src = dir.join("module");
    fs::create_dir_all(&src)?;
    for file in ["go.mod", "go.sum"] {
        fs::copy(module.join(file), src.join(file))
            .with_context(|| format!("copying testenv/{file}"))?;
    }
    Ok(src)
}

/// Hash of everything that decides what `program` builds.
fn source_hash(module: &Path, program: Program) -> Result<String> {
    let mut files = Vec::new();
    collect(module, module, &mut files)?;
    files.retain(|rel| program.owns(rel));
    files.sort();
    let mut h = Sha256::new();
    for rel in files {
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(fs::read(module.join(&rel))?);
        h.update([0]);
    }
    Ok(format!("{:x}", h.finalize()))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir)
        .with_context(|| format!("reading {} (testenv/ missing?)", dir.display()))?
    {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if let Some(name) = path.file_name().and_then(|n| n.to_str())
            && (name.ends_with(".go") || name == "go.mod" || name == "go.sum")
        {
            out.push(path.strip_prefix(root)?.to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldflags_stamp_the_version_into_each_package() {
        assert_eq!(
            kubernetes_ldflags("v1.37.2", &[COMPONENT_BASE_VERSION]),
            "-s -w -X k8s.io/component-base/version.gitVersion=v1.37.2 \
             -X k8s.io/component-base/version.gitMajor=1 \
             -X k8s.io/component-base/version.gitMinor=37"
        );
        let both = kubernetes_ldflags("v1.37.2", &[CLIENT_GO_VERSION, COMPONENT_BASE_VERSION]);
        assert_eq!(both.matches("-X k8s.io/client-go/pkg/version.").count(), 3);
        assert_eq!(both.matches("-X k8s.io/component-base/version.").count(), 3);
    }
}
