//! The configuration files the cluster's programs read: the API server's audit policy,
//! containerd's and the kubelet's.

use std::path::Path;

use super::CGROUP_ROOT;
use super::host::{CNI_BIN_DIR, cgroup_v2};
use crate::nodebins::PAUSE_IMAGE;

pub(super) const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # The kubelet's heartbeats.
  - level: None
    namespaces: [kube-node-lease]
  # Leader election: the request says who takes, renews or releases a Lease.
  - level: Request
    verbs: [create, update, patch, delete]
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  - level: Metadata
    verbs: [create, update, patch, delete]
    resources:
      - group: ""
        resources: [nodes/status, pods/eviction]
      - group: events.k8s.io
        resources: [events]
  - level: None
"#;

pub(super) fn containerd_config(root: &Path, runc: &Path, restrict_oom_score_adj: bool) -> String {
    let r = root.display();
    let restrict = if restrict_oom_score_adj {
        "# This host withholds CAP_SYS_RESOURCE: scores below containerd's own are clamped to it.\n  \
         restrict_oom_score_adj = true\n"
    } else {
        ""
    };
    format!(
        r#"# containerd for kumaco's real test node (testkit::realcluster): every path under
# {r}, nothing pulled.
version = 3
root = "{r}/containerd/root"
state = "{r}/containerd/state"
[grpc]
  address = "{r}/containerd/containerd.sock"
[ttrpc]
  address = "{r}/containerd/containerd.sock.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "{r}/containerd/opt"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  {restrict}  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{r}/containerd/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{r}/cni/net.d"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#,
        runc = runc.display(),
    )
}

pub(super) fn kubelet_config(
    root: &Path,
    socket: &Path,
    ca: &Path,
    port: u16,
    healthz: u16,
) -> String {
    let r = root.display();
    let fail_cgroup_v1 = if cgroup_v2() {
        ""
    } else {
        "# This host mounts cgroup v1 controllers; 1.35+ kubelets refuse them unless told.\n\
         failCgroupV1: false\n"
    };
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
{fail_cgroup_v1}cgroupDriver: cgroupfs
cgroupRoot: /{CGROUP_ROOT}
containerRuntimeEndpoint: unix://{socket}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
podLogsDir: {r}/pod-logs
failSwapOn: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
# No cluster DNS here: Pods use the host's resolver.
resolvConf: /etc/resolv.conf
# A shared CI disk: never evict kumaco or collect the imported images for lack of space.
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%"
  imagefs.available: "1%"
  nodefs.inodesFree: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
        socket = socket.display(),
        ca = ca.display(),
    )
}
