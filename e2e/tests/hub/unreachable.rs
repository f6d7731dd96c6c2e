//! A spoke pool whose hub cannot be reached (its kubeconfig names a port nobody listens on):
//! with no block leased, a claim of it waits, `Ready=False` with reason `WaitingForHub`, and gets
//! no address. On spoke-b, beside the main test: another pool, another Secret, another namespace
//! of claims, and addresses (10.30.0.0/24) that are not the shared pool's.

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::process::free_port;
use serde_json::json;

use crate::fleet::{PROVIDER_NAMESPACE, fleet};
use crate::report::Report;
use crate::{STAYS_WAITING_FOR, WAITING_FOR_HUB_WITHIN};

const SECRET: &str = "hub-unreachable";
const POOL: &str = "unreachable";

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_of_a_spoke_pool_whose_hub_cannot_be_reached_waits_for_the_hub() {
    let fleet = fleet();
    let mut report = Report::new("unreachable");
    let spoke = fleet.spoke("spoke-b");
    let file = fleet.work.join("unreachable.kubeconfig").to_string_lossy().into_owned();
    let ca = format!("--certificate-authority={}", fleet.work.join("hub-ca.crt").display());
    let server = format!("https://127.0.0.1:{}", free_port());
    let kubeconfig = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", &file, "config"];
        all.extend(args);
        spoke.plane.kubectl_ok(&all)
    };
    let setup = kubeconfig(&["set-cluster", "hub", "--server", &server, &ca, "--embed-certs=true"])
        .and_then(|_| kubeconfig(&["set-credentials", "spoke-b", "--token=not-a-token"]))
        .and_then(|_| kubeconfig(&["set-context", "hub", "--cluster=hub", "--user=spoke-b", "--namespace=spoke-b"]))
        .and_then(|_| kubeconfig(&["use-context", "hub"]))
        .and_then(|_| {
            let from = format!("--from-file=kubeconfig={file}");
            spoke.plane.kubectl_ok(&["-n", PROVIDER_NAMESPACE, "create", "secret", "generic", SECRET, &from])
        });
    if let Err(error) = setup {
        panic!("the Secret {SECRET} on spoke-b: {error:#}");
    }

    let s = Scope::on(spoke.plane, "waiting").await;
    let hub = json!({"kubeconfigSecret": SECRET, "namespace": "spoke-b", "pool": {"kind": "GlobalInClusterIPPool", "name": POOL}});
    let spec = json!({"addresses": ["10.30.0.0/24"], "prefix": 24, "gateway": "10.30.0.1", "hub": hub});
    s.global_pool(POOL, spec).await.expect("the spoke pool");
    s.claim("waits", "GlobalInClusterIPPool", POOL).await.expect("the claim");

    match s.wait_reason("waits", "WaitingForHub", WAITING_FOR_HUB_WITHIN).await {
        Ok(message) => {
            report.note(format!("the claim says WaitingForHub: {message}"));
            match s.claim_ready("waits").await {
                Some((status, _, _)) if status == "False" => {}
                other => report.fail(format!("the claim's Ready is {other:?}, not False")),
            }
        }
        Err(error) => report.fail(format!("{error:#}")),
    }
    let none = s.stays("the waiting claim has no IPAddress", STAYS_WAITING_FOR, || async {
        s.addresses().get_opt("waits").await.is_ok_and(|a| a.is_none())
    });
    if let Err(error) = none.await {
        report.fail(format!("{error:#}"));
    }
    report.conclude(fleet);
}
