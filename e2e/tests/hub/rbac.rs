//! The spoke's credentials in the hub are least privilege: the Role `operator/hub-spoke.sh`
//! binds lets spoke-a keep AddressBlocks and its Lease in its own namespace of the hub, and
//! nothing else: not spoke-b's namespace, not the hub's pool, not Secrets, nothing cluster-wide.

use std::path::Path;
use std::process::{Command, Output};

use crate::fleet::{Fleet, PROVIDER_NAMESPACE, fleet};
use crate::report::Report;

const BLOCKS: &str = "addressblocks.hub.ferro-ipam.dev";
const LEASES: &str = "leases.coordination.k8s.io";
const HUB_POOL: &str = "globalinclusterippools.ipam.cluster.x-k8s.io/shared";

/// `kubectl auth can-i` questions for spoke-a, each with the answer it must get.
const CAN_I: &[(&[&str], bool)] = &[
    (&["create", BLOCKS, "-n", "spoke-a"], true),
    (&["get", BLOCKS, "-n", "spoke-a"], false),
    (&["list", BLOCKS, "-n", "spoke-a"], true),
    (&["watch", BLOCKS, "-n", "spoke-a"], true),
    (&["delete", BLOCKS, "-n", "spoke-a"], true),
    (&["get", LEASES, "-n", "spoke-a"], true),
    (&["create", LEASES, "-n", "spoke-a"], true),
    (&["update", LEASES, "-n", "spoke-a"], true),
    // The hub grants: a spoke never writes a block's status, nor changes a block.
    (&["update", BLOCKS, "-n", "spoke-a"], false),
    (&["patch", BLOCKS, "-n", "spoke-a"], false),
    (&["update", BLOCKS, "--subresource=status", "-n", "spoke-a"], false),
    (&["patch", BLOCKS, "--subresource=status", "-n", "spoke-a"], false),
    (&["delete", LEASES, "-n", "spoke-a"], false),
    // Another spoke's namespace, and any other.
    (&["create", BLOCKS, "-n", "spoke-b"], false),
    (&["list", BLOCKS, "-n", "spoke-b"], false),
    (&["delete", BLOCKS, "-n", "spoke-b"], false),
    (&["update", LEASES, "-n", "spoke-b"], false),
    (&["create", BLOCKS, "-n", "default"], false),
    (&["list", BLOCKS, "--all-namespaces"], false),
    // The hub's pool.
    (&["update", HUB_POOL], false),
    (&["patch", HUB_POOL], false),
    (&["delete", HUB_POOL], false),
    (&["get", HUB_POOL], false),
    // Secrets, and the namespace's own label that says whose it is.
    (&["list", "secrets", "-n", "spoke-a"], false),
    (&["get", "secrets", "-n", "spoke-a"], false),
    (&["list", "secrets", "--all-namespaces"], false),
    (&["get", "secrets", "-n", PROVIDER_NAMESPACE], false),
    (&["patch", "namespaces/spoke-a"], false),
    (&["list", "namespaces"], false),
    (&["create", "roles.rbac.authorization.k8s.io", "-n", "spoke-a"], false),
    (&["create", "rolebindings.rbac.authorization.k8s.io", "-n", "spoke-a"], false),
    (&["create", "serviceaccounts/token", "-n", "spoke-a"], false),
];

/// A block as the spoke asks for one; created with `--dry-run=server`, so never stored.
const BLOCK: &str = "apiVersion: hub.ferro-ipam.dev/v1alpha1
kind: AddressBlock
metadata:
  generateName: rbac-check-
spec:
  pool: {kind: GlobalInClusterIPPool, name: shared}
  family: IPv4
  size: 16
";

#[tokio::test(flavor = "multi_thread")]
async fn a_spokes_credentials_keep_blocks_and_its_lease_in_its_own_hub_namespace_and_nothing_else() {
    let fleet = fleet();
    let mut report = Report::new("rbac");
    // The kubeconfig as spoke-a's ferro-ipam reads it: out of its Secret.
    let spoke = fleet.spoke("spoke-a");
    let template = r#"go-template={{index .data "kubeconfig" | base64decode}}"#;
    let kubeconfig =
        match spoke.plane.kubectl_ok(&["-n", PROVIDER_NAMESPACE, "get", "secret", "hub-kubeconfig", "-o", template]) {
            Ok(text) => text,
            Err(error) => panic!("reading spoke-a's Secret hub-kubeconfig: {error:#}"),
        };
    let file = fleet.work.join("spoke-a-from-secret.kubeconfig");
    std::fs::write(&file, kubeconfig).expect("writing the kubeconfig");
    let block = fleet.work.join("rbac-block.yaml");
    std::fs::write(&block, BLOCK).expect("writing the block");

    match as_spoke(fleet, &file, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]) {
        Ok(output) if stdout(&output) == "system:serviceaccount:spoke-a:ferro-ipam-spoke" => {
            report.note(format!("spoke-a is {} in the hub", stdout(&output)))
        }
        Ok(output) => report.fail(format!("spoke-a's identity in the hub: {}{}", stdout(&output), stderr(&output))),
        Err(error) => report.fail(format!("kubectl auth whoami: {error}")),
    }

    for (question, expected) in CAN_I {
        let mut args = vec!["auth", "can-i"];
        args.extend(*question);
        match as_spoke(fleet, &file, &args) {
            Ok(output) => {
                let answer = stdout(&output);
                if answer != if *expected { "yes" } else { "no" } {
                    report.fail(format!(
                        "kubectl auth can-i {}: {answer:?} ({}), expected {}",
                        question.join(" "),
                        stderr(&output),
                        if *expected { "yes" } else { "no" }
                    ));
                }
            }
            Err(error) => report.fail(format!("kubectl auth can-i {}: {error}", question.join(" "))),
        }
    }
    report.note(format!("{} kubectl auth can-i questions asked", CAN_I.len()));

    // Real requests, through authorisation and admission.
    let path = block.to_string_lossy().into_owned();
    let requests: [(&[&str], bool); 6] = [
        (&["create", "--dry-run=server", "-n", "spoke-a", "-f", &path], true),
        (&["create", "--dry-run=server", "-n", "spoke-b", "-f", &path], false),
        (&["get", "secrets", "-n", "spoke-a"], false),
        (
            &["patch", "globalinclusterippool", "shared", "--type=merge", "-p", r#"{"spec":{"gateway":"10.20.0.2"}}"#],
            false,
        ),
        (&["label", "--overwrite", "namespace", "spoke-a", "hub.ferro-ipam.dev/spoke=spoke-b"], false),
        (&["get", BLOCKS, "-n", "spoke-a"], true),
    ];
    for (request, allowed) in requests {
        match as_spoke(fleet, &file, request) {
            Ok(output) if allowed && !output.status.success() => {
                report.fail(format!("kubectl {}: refused: {}", request.join(" "), stderr(&output)))
            }
            Ok(output) if !allowed && (output.status.success() || !stderr(&output).contains("Forbidden")) => report
                .fail(format!(
                    "kubectl {}: not refused as Forbidden ({}): {}{}",
                    request.join(" "),
                    output.status,
                    stdout(&output),
                    stderr(&output)
                )),
            Ok(_) => {}
            Err(error) => report.fail(format!("kubectl {}: {error}", request.join(" "))),
        }
    }
    report.conclude(fleet);
}

/// Runs the hub's kubectl with spoke-a's kubeconfig.
fn as_spoke(fleet: &Fleet, kubeconfig: &Path, args: &[&str]) -> std::io::Result<Output> {
    Command::new(fleet.hub.plane.tools.bin("kubectl")).arg("--kubeconfig").arg(kubeconfig).args(args).output()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_owned()
}
