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
    apply(plane, "docs/examples/quickstart.yaml")?;
    claims_ready(plane, "demo")?;
    // VIPs and VM IPs from labelled pools, and a Cluster whose endpoint ferro-ipam fills in.
    apply(plane, "docs/examples/vip-and-vm-ips.yaml")?;
    plane.kubectl_ok(&[
        "wait",
        "-n",
        "default",
        "--for=jsonpath={.spec.controlPlaneEndpoint.host}",
        "--timeout=60s",
        "clusters.cluster.x-k8s.io/workload",
    ])?;
    claims_ready(plane, "default")?;
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

/// `kubectl apply -f` of a file of the repository, its output printed.
fn apply(plane: &ControlPlane, file: &str) -> Result<()> {
    let path = repo_root().join(file);
    println!("Applying {}", path.display());
    print!("{}", plane.kubectl_ok(&["apply", "-f", &path.to_string_lossy()])?);
    Ok(())
}

/// Waits until every claim of `namespace` is Ready.
fn claims_ready(plane: &ControlPlane, namespace: &str) -> Result<()> {
    let ready = ["wait", "-n", namespace, "--for=condition=Ready", "--timeout=60s"];
    plane.kubectl_ok(&[&ready[..], &["ipaddressclaims.ipam.cluster.x-k8s.io", "--all"]].concat())?;
    Ok(())
}
