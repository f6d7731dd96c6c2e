//! What `make demo` applies, shared by the demo and the docs test (`e2e/tests/docs`), whose
//! pages start from the state the demo shows.

use anyhow::Result;

use crate::ControlPlane;
use crate::plane::repo_root;

/// The flags the demo runs ferro-ipam with (besides the kubeconfig and listen addresses).
pub const PROVIDER_ARGS: [&str; 3] = ["--leader-elect", "--leader-election-namespace", "default"];

/// Applies the quick-start example and the VIP and VM-IP example, and waits until their claims
/// are served, the Cluster has its endpoint and the pools' status counts them.
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
    plane.kubectl_ok(&[
        "wait",
        "-n",
        "default",
        "--for=condition=Ready",
        "--timeout=60s",
        "ipaddressclaims.ipam.cluster.x-k8s.io",
        "--all",
    ])?;
    // The pools' counts, as the pool controller publishes them a moment later.
    for (pool, used) in [
        ("-n=demo inclusterippool/nodes-v4", 2),
        ("globalinclusterippool/shared-v6", 1),
        ("-n=default inclusterippool/node-ips", 2),
        ("globalinclusterippool/shared-vips", 1),
    ] {
        let condition = format!("--for=jsonpath={{.status.ipAddresses.used}}={used}");
        let mut args = vec!["wait", "--timeout=60s", &condition];
        args.extend(pool.split(' '));
        plane.kubectl_ok(&args)?;
    }
    Ok(())
}
