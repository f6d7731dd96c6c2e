//! `make cluster`: the e2e suite's cluster to try things on -- a control plane, one node running
//! real pods, ferro-ipam's image imported and installed with `kubectl apply -k deploy/` -- until
//! Ctrl-C, which removes all of it.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use ferro_ipam_e2e::cluster::Cluster;
use ferro_ipam_e2e::plane::repo_root;

fn main() -> Result<()> {
    let image: PathBuf = std::env::args()
        .nth(1)
        .map(Into::into)
        .context("usage: ferro-ipam-cluster IMAGE.tar (make cluster passes the one `make image` built)")?;
    println!("Starting the control plane and a node (the first run builds them, which takes minutes)...");
    let cluster = Cluster::start()?;
    println!("Importing {}", image.display());
    cluster.import_image(&image)?;
    let deploy = repo_root().join("deploy");
    print!("{}", cluster.kubectl_ok(&["apply", "--server-side", "-k", &deploy.to_string_lossy()])?);
    cluster.kubectl_ok(&[
        "rollout",
        "status",
        "-n",
        "ferro-ipam-system",
        "deployment/ferro-ipam-controller",
        "--timeout=180s",
    ])?;
    print!("{}", cluster.kubectl_ok(&["get", "pods", "-n", "ferro-ipam-system", "-o", "wide"])?);
    let kubeconfig = cluster.plane.kubeconfig.display();
    println!(
        "\nThe cluster is up. In another shell:\n\n  export KUBECONFIG={kubeconfig}\n  kubectl get nodes,pods -A\n  \
         kubectl apply -f docs/examples/quickstart.yaml\n  kubectl get ipaddresses.ipam.cluster.x-k8s.io -A\n\n\
         Logs: {} (control plane, kubelet, containerd, kube-proxy); pods' logs with kubectl logs.\n\
         Press Ctrl-C to stop and remove everything.",
        cluster.plane.dir.display()
    );
    wait_for_interrupt();
    println!("Removing the cluster...");
    drop(cluster);
    Ok(())
}

/// Blocks until SIGINT or SIGTERM.
fn wait_for_interrupt() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    });
}
