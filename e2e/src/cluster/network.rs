//! The node's network: a network namespace of its own, joined to this machine by a veth pair.
//!
//! ```text
//!   this machine (kube-apiserver, the tests)          node namespace (kubelet, containerd,
//!   HOST_ADDRESS 10.77.0.1/30  <--- veth --->          kube-proxy, the pods' bridge)
//!   routes: pods and Services via NODE_ADDRESS         NODE_ADDRESS 10.77.0.2/30, default via HOST
//! ```
//!
//! kubelet refuses a loopback node address, and kube-proxy's rules and the CNI bridge would
//! otherwise change this machine's own tables; in a namespace they go with it. Nothing here
//! leaves the machine: both ends of the veth, the bridge and the pods are local.

use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// This machine's end of the veth: where kube-apiserver listens for the node and the pods.
pub const HOST_ADDRESS: &str = "10.77.0.1";
/// The node's end: its InternalIP, where kubelet serves (logs, exec).
pub const NODE_ADDRESS: &str = "10.77.0.2";
/// The pods' addresses, on the node's bridge.
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The Services' addresses; `10.96.0.1` is the `kubernetes` Service.
pub const SERVICE_CIDR: &str = "10.96.0.0/24";

/// Names shared by every cluster of this machine: one runs at a time (see `super::lock`).
pub const NAMESPACE: &str = "ferro-ipam-node";
const HOST_LINK: &str = "ferro-host";
const NODE_LINK: &str = "ferro-node";

/// Runs `ip` (or, with `in_node`, `ip` inside the node's namespace) and fails with its message.
fn ip(in_node: bool, args: &[&str]) -> Result<()> {
    let mut command = Command::new("ip");
    if in_node {
        command.args(["-n", NAMESPACE]);
    }
    let output = command.args(args).output().context("running ip (Debian: iproute2)")?;
    if !output.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

fn sysctl_in_node(key: &str, value: &str) -> Result<()> {
    let output = Command::new("ip")
        .args(["netns", "exec", NAMESPACE, "sysctl", "-q", "-w", &format!("{key}={value}")])
        .output()?;
    if !output.status.success() {
        bail!("sysctl {key}={value} in the node's namespace: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(())
}

/// Makes the namespace, the veth pair, the addresses and the routes.
pub fn create() -> Result<()> {
    ip(false, &["netns", "add", NAMESPACE])?;
    ip(false, &["link", "add", HOST_LINK, "type", "veth", "peer", "name", NODE_LINK, "netns", NAMESPACE])?;
    ip(false, &["addr", "add", &format!("{HOST_ADDRESS}/30"), "dev", HOST_LINK])?;
    ip(false, &["link", "set", HOST_LINK, "up"])?;
    ip(true, &["addr", "add", &format!("{NODE_ADDRESS}/30"), "dev", NODE_LINK])?;
    ip(true, &["link", "set", NODE_LINK, "up"])?;
    ip(true, &["link", "set", "lo", "up"])?;
    ip(true, &["route", "add", "default", "via", HOST_ADDRESS])?;
    // The tests reach pods and Services (metrics through the Service) through the node.
    for cidr in [POD_CIDR, SERVICE_CIDR] {
        ip(false, &["route", "add", cidr, "via", NODE_ADDRESS])?;
    }
    // The node routes between its pods, its Services and this machine; bridged pod-to-pod
    // traffic passes iptables, so that a Service whose pod is on the same bridge answers.
    sysctl_in_node("net.ipv4.ip_forward", "1")?;
    sysctl_in_node("net.bridge.bridge-nf-call-iptables", "1")
        .context("the br_netfilter module must be loaded (modprobe br_netfilter)")?;
    Ok(())
}

/// Removes the namespace, and with it the veth pair and the routes through it. Idempotent.
pub fn delete() {
    let _ = Command::new("ip").args(["link", "delete", HOST_LINK]).output();
    let _ = Command::new("ip").args(["netns", "delete", NAMESPACE]).output();
}

/// Whether the namespace exists (a cluster's, running or left behind).
pub fn exists() -> bool {
    std::path::Path::new("/run/netns").join(NAMESPACE).exists()
}

/// `program` run inside the node's network namespace, and only that namespace: unlike `ip
/// netns exec`, nsenter keeps this machine's mounts, which kubelet and containerd must share.
pub fn in_node(program: &std::path::Path) -> Command {
    let mut command = Command::new("nsenter");
    command.arg(format!("--net=/run/netns/{NAMESPACE}")).arg("--").arg(program);
    command
}
