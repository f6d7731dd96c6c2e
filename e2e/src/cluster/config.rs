//! The node's configuration files: containerd's, the CNI network's, kubelet's and kube-proxy's.
//! Each setting that differs from a stock node says why.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::network::{NODE_ADDRESS, POD_CIDR};

/// The node's name, also its hostname to kubelet and kube-proxy.
pub const NODE_NAME: &str = "ferro-node";
/// The sandbox image, built from e2e/tools/node/pause (no registry is reachable here).
pub const SANDBOX_IMAGE: &str = "ferro-ipam.local/pause:e2e";
/// Where kubelet puts every pod's cgroups, under each cgroup v1 hierarchy: one directory that
/// the harness removes as a whole.
pub const CGROUP_ROOT: &str = "/ferro-ipam-node";

/// The node's directories, all under one root that is removed with the cluster.
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }
    pub fn containerd_socket(&self) -> PathBuf {
        self.path("containerd/containerd.sock")
    }
}

fn write(path: &Path, text: &str) -> Result<PathBuf> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)?;
    Ok(path.to_path_buf())
}

/// containerd 2's configuration (version 3), and the CNI network its CRI plugin sets up.
pub fn containerd(layout: &Layout, node_tools: &Path) -> Result<PathBuf> {
    let cni_conf = layout.path("cni/net.d");
    write(
        &cni_conf.join("10-ferro-ipam.conflist"),
        &format!(
            r#"{{"cniVersion": "1.0.0", "name": "ferro-ipam-node", "plugins": [
  {{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
    "ipam": {{"type": "host-local", "ranges": [[{{"subnet": "{POD_CIDR}"}}]],
             "routes": [{{"dst": "0.0.0.0/0"}}], "dataDir": "{ipam}"}}}},
  {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
]}}
"#,
            ipam = layout.path("cni/ipam").display()
        ),
    )?;
    write(
        &layout.path("containerd/config.toml"),
        &format!(
            r#"version = 3
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[plugins.'io.containerd.cri.v1.runtime']
  # This machine withholds CAP_SYS_RESOURCE, so no process may lower its oom_score_adj below
  # containerd's own (0). kubelet asks -998 for every sandbox and -997 for Guaranteed pods,
  # which runc then fails to write. This option makes containerd ask for containerd's own
  # score instead of a lower one: the node's pods are then as killable as containerd, which
  # is what an unprivileged runtime can promise.
  restrict_oom_score_adj = true
  # Pods' network namespaces under the state directory, removed with the node.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        # cgroup v1 and no systemd here: kubelet's cgroupDriver is cgroupfs too.
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{SANDBOX_IMAGE}"
"#,
            root = layout.path("containerd/root").display(),
            state = layout.path("containerd/state").display(),
            socket = layout.containerd_socket().display(),
            runc = node_tools.join("bin/runc").display(),
            cni_bin = node_tools.join("cni").display(),
            cni_conf = cni_conf.display(),
        ),
    )
}

/// kubelet's configuration file.
pub fn kubelet(layout: &Layout, ca: &Path, serving: (&Path, &Path)) -> Result<PathBuf> {
    write(
        &layout.path("kubelet/config.yaml"),
        &format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine runs cgroup v1, which kubelet 1.35 and later refuse unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {CGROUP_ROOT}
containerRuntimeEndpoint: unix://{socket}
address: {NODE_ADDRESS}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {ca}
authorization:
  mode: Webhook
tlsCertFile: {cert}
tlsPrivateKeyFile: {key}
podLogsDir: {logs}
# The machine is shared with the control plane and the tests: no eviction for disk or memory
# that the machine's other users take, and no image garbage collection of the imported images.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
failSwapOn: false
# kubelet would lower its own oom_score_adj to -999; this machine forbids lowering it.
oomScoreAdj: 0
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
shutdownGracePeriod: 0s
"#,
            socket = layout.containerd_socket().display(),
            ca = ca.display(),
            cert = serving.0.display(),
            key = serving.1.display(),
            logs = layout.path("pod-logs").display(),
        ),
    )
}

/// kube-proxy's configuration file: iptables rules inside the node's namespace.
pub fn kube_proxy(layout: &Layout, kubeconfig: &Path) -> Result<PathBuf> {
    write(
        &layout.path("kube-proxy/config.yaml"),
        &format!(
            r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: {NODE_NAME}
clusterCIDR: {POD_CIDR}
clientConnection:
  kubeconfig: {kubeconfig}
# nf_conntrack_max is one value for the whole machine: leave it alone.
conntrack:
  maxPerCore: 0
iptables:
  # Service traffic leaves with the node's address, so that a reply from a pod on the same
  # bridge, or from this machine, comes back through the node's rules.
  masqueradeAll: true
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
"#,
            kubeconfig = kubeconfig.display()
        ),
    )
}
