//! What `make demo` applies, shared by the demo and the docs test (`e2e/tests/docs`), whose
//! pages start from the state the demo shows.

use std::time::Duration;

use anyhow::Result;

use crate::ControlPlane;
use crate::plane::repo_root;

/// The flags the demo runs ferro-ipam with (besides the kubeconfig and listen addresses).
pub const PROVIDER_ARGS: [&str; 3] = ["--leader-elect", "--leader-election-namespace", "default"];

/// Applies the quick-start example and the VIP and VM-IP example, and waits until their claims
/// are served, the Cluster has its endpoint and the pools have had a moment to publish counts.
pub fn apply_examples(plane: &ControlPlane) -> Result<()> {
    let examples = repo_root().join("docs/examples/quickstart.yaml");
    println!("Applying {}", examples.display());
    print!("{}", plane.kubectl_ok(&["apply", "-f", &examples.to_string_lossy()])?);
    plane.kubectl_ok(&[
        "wait",
        "-n",
        "demo",
        "--for=condition=Ready",
        "--timeout=60s",
        "ipaddressclaims.ipam.cluster.x-k8s.io",
        "--all",
    ])?;
    // VIPs and VM IPs from labelled pools, and a Cluster whose endpoint ferro-ipam fills in.
    let purpose = repo_root().join("docs/examples/vip-and-vm-ips.yaml");
    println!("Applying {}", purpose.display());
    print!("{}", plane.kubectl_ok(&["apply", "-f", &purpose.to_string_lossy()])?);
    plane.kubectl_ok(&[
        "wait",
        "-n",
        "default",
        "--for=jsonpath={.spec.controlPlaneEndpoint.host}",
        "--timeout=60s",
        "clusters.cluster.x-k8s.io/workload",
    ])?;
    // Give the pool controller a moment to publish its counts.
    std::thread::sleep(Duration::from_secs(2));
    Ok(())
}
