//! The host the node runs on: its prerequisites, and the host-wide state (cgroups,
//! containerd's shims, the bridge and NAT rules) a start cleans and a stop removes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::{BRIDGE, CGROUP_ROOT, NAT_CHAIN};

/// Where Debian's containernetworking-plugins puts the CNI plugins.
pub(super) const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// Everything the node needs from the host, checked at once: a missing piece fails
/// loudly, naming the command that installs it.
pub(super) fn check_prerequisites() -> Result<()> {
    let mut problems = Vec::new();
    let uid = fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Uid:")
                .map(|v| v.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false);
    if !uid {
        problems.push(
            "the real node (kubelet, containerd) needs root; run the tests as root".to_string(),
        );
    }
    for (program, package) in [
        ("runc", "runc"),
        ("iptables", "iptables"),
        ("ip", "iproute2"),
        ("podman", "podman"),
        ("cc", "gcc"),
    ] {
        if find_program(program).is_none() {
            problems.push(format!(
                "`{program}` is missing: apt-get install -y {package}"
            ));
        }
    }
    for plugin in ["bridge", "host-local", "loopback", "portmap"] {
        if !Path::new(CNI_BIN_DIR).join(plugin).exists() {
            problems.push(format!(
                "the CNI plugin {CNI_BIN_DIR}/{plugin} is missing: apt-get install -y \
                 containernetworking-plugins"
            ));
        }
    }
    if !fs::read_to_string("/proc/filesystems")
        .unwrap_or_default()
        .contains("overlay")
    {
        problems.push(
            "the kernel has no overlayfs (containerd's snapshotter): modprobe overlay".to_string(),
        );
    }
    if cgroup_mounts().is_empty() {
        problems.push("no cgroup filesystem is mounted under /sys/fs/cgroup".to_string());
    }
    if !problems.is_empty() {
        bail!(
            "the real test node cannot start on this machine:\n  - {}\n(`bash .ci/run` installs \
             the packages: apt-get install -y runc iptables iproute2 podman gcc \
             containernetworking-plugins)",
            problems.join("\n  - ")
        );
    }
    Ok(())
}

/// `name` on PATH, or in /usr/sbin and /sbin (root's tools).
pub(super) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin"])
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
}

/// Whether this process may lower OOM scores (bit 24 of the capability bounding set).
pub(super) fn has_cap_sys_resource() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

pub(super) fn cgroup_v2() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// Mount points of cgroup filesystems (v1 hierarchies and the unified v2 one).
pub(super) fn cgroup_mounts() -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .filter(|(_, fstype)| fstype == "cgroup" || fstype == "cgroup2")
        .map(|(point, _)| point)
        .collect()
}

/// Every mount of this mount namespace: (mount point, filesystem type).
pub(super) fn mounts() -> Vec<(PathBuf, String)> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = fields.get(4)?;
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(sep + 1)?;
            Some((
                PathBuf::from(point.replace("\\040", " ")),
                fstype.to_string(),
            ))
        })
        .collect()
}

/// The kubelet requires its `cgroupRoot` to exist in every hierarchy.
pub(super) fn create_cgroup_root() -> Result<()> {
    for mount in cgroup_mounts() {
        let dir = mount.join(CGROUP_ROOT);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// SIGKILL to every process in the node's cgroup subtree: the containers of its Pods.
pub(super) fn kill_cgroup_processes() {
    for _ in 0..50 {
        let mut pids = Vec::new();
        for mount in cgroup_mounts() {
            collect_procs(&mount.join(CGROUP_ROOT), &mut pids);
        }
        pids.sort_unstable();
        pids.dedup();
        if pids.is_empty() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(super) fn collect_procs(dir: &Path, pids: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.split_whitespace().map(str::to_string));
    }
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_procs(&entry.path(), pids);
        }
    }
}

/// SIGKILL to the containerd shims serving `socket` (found by their command line): with
/// their containers gone they would otherwise wait for a containerd that is stopping.
pub(super) fn kill_shims(socket: &Path) {
    let needle = socket.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_shim = args
            .first()
            .is_some_and(|a| a.ends_with("containerd-shim-runc-v2"));
        if is_shim && args.contains(&needle) {
            pids.push(name);
        }
    }
    if !pids.is_empty() {
        let _ = Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
    }
}

/// The socket files of `root`'s shims, which containerd 2.x keeps in a fixed directory
/// (`/run/containerd/s/`, each named by a SHA-256 of the containerd socket, the namespace
/// and the task id); a SIGKILLed shim leaves its own behind.
pub(super) fn shim_sockets(root: &Path) -> Vec<PathBuf> {
    let socket = root.join("containerd/containerd.sock");
    let tasks = root.join("containerd/state/io.containerd.runtime.v2.task");
    let mut sockets = Vec::new();
    for namespace in fs::read_dir(&tasks).into_iter().flatten().flatten() {
        for task in fs::read_dir(namespace.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let address = socket
                .join(namespace.file_name())
                .join(task.file_name())
                .to_string_lossy()
                .into_owned();
            let name = format!("{:x}", Sha256::digest(address.as_bytes()));
            sockets.push(Path::new(SHIM_SOCKETS).join(name));
        }
    }
    sockets
}

pub(super) fn remove_shim_sockets(sockets: &[PathBuf]) {
    for socket in sockets {
        let _ = fs::remove_file(socket);
    }
    // Only if empty: another containerd may use them.
    let _ = fs::remove_dir(SHIM_SOCKETS);
    let _ = fs::remove_dir(Path::new(SHIM_SOCKETS).parent().unwrap());
}

/// Where containerd 2.x shims put their sockets, whatever containerd's configuration.
pub(super) const SHIM_SOCKETS: &str = "/run/containerd/s";

/// Removes the host-wide pieces: the bridge, the NAT chain, the cgroup subtree, and the
/// chains the kubelet adds for kube-proxy's benefit (a canary, a hint, and KUBE-FIREWALL,
/// which drops connections to 127.0.0.0/8 from other addresses except DNAT'ed ones).
pub(super) fn reset_host() {
    let _ = Command::new("ip")
        .args(["link", "del", BRIDGE])
        .stderr(Stdio::null())
        .status();
    while iptables(&["-t", "nat", "-D", "PREROUTING", "-j", NAT_CHAIN]).is_ok() {}
    let _ = iptables(&["-t", "nat", "-F", NAT_CHAIN]);
    let _ = iptables(&["-t", "nat", "-X", NAT_CHAIN]);
    for program in ["iptables", "ip6tables"] {
        for builtin in ["INPUT", "OUTPUT"] {
            while xtables(
                program,
                &["-t", "filter", "-D", builtin, "-j", "KUBE-FIREWALL"],
            )
            .is_ok()
            {}
        }
        for table in ["filter", "nat", "mangle"] {
            for chain in ["KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"] {
                let _ = xtables(program, &["-t", table, "-F", chain]);
                let _ = xtables(program, &["-t", table, "-X", chain]);
            }
        }
    }
    for mount in cgroup_mounts() {
        remove_cgroup(&mount.join(CGROUP_ROOT));
    }
}

/// rmdir, depth first (cgroup directories cannot be removed recursively).
pub(super) fn remove_cgroup(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup(&entry.path());
        }
    }
    let _ = fs::remove_dir(dir);
}

/// Unmounts everything mounted under `root` (the kubelet's bind mount of its root
/// directory, Pods' volumes, containers' root filesystems, network namespaces), deepest
/// first.
pub(super) fn unmount_under(root: &Path) {
    let mut points: Vec<PathBuf> = mounts()
        .into_iter()
        .map(|(point, _)| point)
        .filter(|p| p.starts_with(root))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    points.dedup();
    for point in points {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&point)
            .stderr(Stdio::null())
            .status();
    }
}

/// Clears what crashed runs left: their containers, shims, mounts and directories, and
/// the host-wide pieces. Called with the host lock held.
pub(super) fn clean_stale(base: &Path) {
    kill_cgroup_processes();
    for entry in fs::read_dir(base).into_iter().flatten().flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let sockets = shim_sockets(&path);
        kill_shims(&path.join("containerd/containerd.sock"));
        remove_shim_sockets(&sockets);
        unmount_under(&path);
        let _ = remove(&path);
    }
    reset_host();
}

pub(super) fn remove(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

pub(super) fn iptables(args: &[&str]) -> Result<()> {
    xtables("iptables", args)
}

pub(super) fn xtables(program: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(program)
        .args(["-w", "5"])
        .args(args)
        .output()
        .with_context(|| format!("running {program} (apt-get install iptables)"))?;
    if !out.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
