//! f. An `IPAddress` named like a claim that holds another claim's address (or the gateway, or
//! an address outside the pool) is not adopted: the claim is `Ready=False` (`AddressConflict`
//! with a Warning Event naming the other holder, for another claim's address), nothing is
//! served twice, and once the foreign object is gone the claim gets an address of its own.

use std::time::Duration;

use anyhow::anyhow;
use ferro_ipam::api::keys::PROTECT_ADDRESS_FINALIZER;
use ferro_ipam_e2e::objects::{Scope, capi};
use kube::api::DeleteParams;
use serde_json::json;

use crate::PROMPTLY;
use crate::rig::{Findings, ReplicaSpec, Rig};

/// How long a test watches for something that must not happen.
const A_WHILE: Duration = Duration::from_secs(3);
const GATEWAY: &str = "10.96.0.10";

/// Whether the claim is `Ready=True` or carries an `addressRef`: served.
async fn served(s: &Scope, claim: &str) -> bool {
    let ready = s.claim_ready(claim).await.is_some_and(|(status, _, _)| status == "True");
    let referenced = s.claims().get_opt(claim).await.ok().flatten().and_then(|c| c.status?.address_ref).is_some();
    ready || referenced
}

/// Checks that `claim` is reported `Ready=False` and stays unserved for a while.
async fn refused(s: &Scope, claim: &str, findings: &mut Findings) {
    let reported = s
        .eventually(&format!("{claim} is Ready=False"), PROMPTLY, || async {
            s.claim_ready(claim).await.is_some_and(|(status, _, _)| status == "False")
        })
        .await;
    findings.expect(&format!("{claim} reported"), reported);
    let unserved = s.stays(&format!("{claim} is not served"), A_WHILE, || async { !served(s, claim).await }).await;
    findings.expect(&format!("{claim} not served"), unserved);
}

/// Takes a hand-made `IPAddress` away (with the finalizer ferro-ipam put on it, if it adopted it).
async fn remove(s: &Scope, name: &str) {
    s.remove_finalizer(&capi().address_resource(), name, PROTECT_ADDRESS_FINALIZER).await.unwrap();
    s.addresses().delete(name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_address_named_like_a_claim_holding_anothers_address_is_reported_and_never_served_twice() {
    let rig = Rig::shared_plane("address-conflict").await;
    let (a, b) = (rig.replica("a", ReplicaSpec::default()), rig.replica("b", ReplicaSpec::default()));
    let replicas = [&a, &b];
    rig.leader(&replicas, PROMPTLY).await;
    let s = &rig.s;
    let mut findings = Findings::new("address-conflict");
    s.pool("pool", json!({"addresses": ["10.96.0.10-10.96.0.29"], "prefix": 24, "gateway": GATEWAY})).await.unwrap();
    s.claim("owner", "InClusterIPPool", "pool").await.unwrap();
    let taken = s.wait_allocated("owner", PROMPTLY).await.unwrap().spec.address;

    for (name, ip) in [("intruder", taken.as_str()), ("at-gateway", GATEWAY), ("outside", "10.97.0.5")] {
        s.hand_made_address(name, "pool", ip, 24).await.unwrap();
        s.claim(name, "InClusterIPPool", "pool").await.unwrap();
    }
    let conflict = s.wait_reason("intruder", "AddressConflict", PROMPTLY).await;
    findings.expect("intruder's reason", conflict.map(drop));
    for claim in ["intruder", "at-gateway", "outside"] {
        refused(s, claim, &mut findings).await;
    }
    let events = s.events_about("IPAddressClaim", "intruder").await.unwrap_or_default();
    let named = events.iter().any(|(kind, _, note)| kind == "Warning" && note.contains("owner"));
    findings.ensure(named, || format!("no Warning Event on intruder names the other holder, owner: {events:?}"));
    s.claim("bystander", "InClusterIPPool", "pool").await.unwrap();
    let bystander = s.wait_allocated("bystander", PROMPTLY).await.map(|a| a.spec.address);
    findings.ensure(bystander.as_ref().is_ok_and(|ip| *ip != taken && ip != GATEWAY), || {
        format!("bystander got {bystander:?}; {taken} is owner's and {GATEWAY} the gateway")
    });

    // Once the foreign objects are gone, the claims get addresses of their own.
    for name in ["intruder", "at-gateway", "outside"] {
        remove(s, name).await;
    }
    for claim in ["intruder", "at-gateway", "outside"] {
        let own = s.wait_allocated(claim, PROMPTLY).await.map(|a| a.spec.address);
        findings.expect(
            &format!("{claim} once the conflict is resolved"),
            match own {
                Ok(ip) if ip != taken && ip != GATEWAY => Ok(()),
                Ok(ip) => Err(anyhow!("got {ip} again")),
                Err(error) => Err(error),
            },
        );
    }
    rig.check_after_fault(&replicas, &mut findings).await;
    findings.conclude(&replicas);
}
