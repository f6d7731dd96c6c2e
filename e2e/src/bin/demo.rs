//! `make demo`: a local control plane, ferro-ipam against it, the quick-start example applied,
//! and what came of it shown through kubectl.

use anyhow::{Context as _, Result};
use ferro_ipam_e2e::{ControlPlane, Provider};

fn show(plane: &ControlPlane, title: &str, args: &[&str]) -> Result<()> {
    println!("\n$ kubectl {}    # {title}", args.join(" "));
    print!("{}", plane.kubectl_ok(args)?);
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let exit_when_done = std::env::args().any(|a| a == "--exit");
    println!("Starting etcd and kube-apiserver on 127.0.0.1 (the first run builds them, which takes minutes)...");
    let plane = ControlPlane::start().context("starting the control plane")?;
    println!("Starting ferro-ipam...");
    let provider = Provider::start(&plane, &ferro_ipam_e2e::demo::PROVIDER_ARGS)?;

    ferro_ipam_e2e::demo::apply_examples(&plane)?;

    show(
        &plane,
        "pools with their Total/Free/Used columns",
        &["get", "inclusterippools,globalinclusterippools,inclusterprefixpools,globalinclusterprefixpools", "-A"],
    )?;
    show(&plane, "claims", &["get", "ipaddressclaims.ipam.cluster.x-k8s.io", "-n", "demo"])?;
    show(
        &plane,
        "the addresses written back",
        &[
            "get",
            "ipaddresses.ipam.cluster.x-k8s.io",
            "-n",
            "demo",
            "-o",
            "custom-columns=NAME:.metadata.name,ADDRESS:.spec.address,PREFIX:.spec.prefix,GATEWAY:.spec.gateway,POOL:.spec.poolRef.name",
        ],
    )?;
    show(
        &plane,
        "the Cluster's control-plane endpoint, from a VIP pool",
        &[
            "get",
            "clusters.cluster.x-k8s.io",
            "workload",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.controlPlaneEndpoint}{\"\\n\"}",
        ],
    )?;
    show(
        &plane,
        "VIP and VM-IP addresses, and the labelled pool each came from",
        &[
            "get",
            "ipaddresses.ipam.cluster.x-k8s.io",
            "-n",
            "default",
            "-o",
            "custom-columns=NAME:.metadata.name,ADDRESS:.spec.address,ASKED:.spec.poolRef.name,FROM:.metadata.annotations.ferro-ipam\\.dev/allocated-from",
        ],
    )?;
    match provider.metrics_text() {
        Some(text) => {
            println!("\n$ curl http://{}/metrics | grep ferro_ipam_pool    # a few metrics", provider.metrics);
            for line in text.lines().filter(|l| l.starts_with("ferro_ipam_pool_addresses")).take(8) {
                println!("{line}");
            }
        }
        None => println!("\n(metrics endpoint at http://{}/metrics did not answer)", provider.metrics),
    }

    println!("\nThe control plane keeps running. Reach it with:\n  export KUBECONFIG={}", plane.kubeconfig.display());
    println!("  {} get ipaddressclaims.ipam.cluster.x-k8s.io -A", plane.tools.bin("kubectl").display());
    println!("ferro-ipam's log: {}", provider.process.log.display());
    if exit_when_done {
        return Ok(());
    }
    println!("Press Ctrl-C to stop everything.");
    tokio::signal::ctrl_c().await?;
    println!("Stopping.");
    Ok(())
}
