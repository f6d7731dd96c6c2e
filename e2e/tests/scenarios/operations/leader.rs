//! Two replicas with leader election, as deploy/ runs them: only the Lease holder allocates;
//! SIGKILL of the leader in the middle of a storm of claims hands over to the other replica,
//! which finishes without losing or duplicating an address.

use std::time::Duration;

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::{Provider, invariants};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::PROMPTLY;

const CLAIMS: usize = 300;

/// Log lines of successful allocations (`info!(..., "allocated")` after the IPAddress is created).
fn allocations_logged(provider: &Provider) -> usize {
    provider.log_tail(1_000_000).lines().filter(|l| l.contains(" allocated ") || l.ends_with(" allocated")).count()
}

/// The metric `ferro_ipam_leader` of a replica.
fn leader_gauge(provider: &Provider) -> Option<f64> {
    provider
        .metrics_text()?
        .lines()
        .find_map(|l| l.strip_prefix("ferro_ipam_leader ").and_then(|v| v.trim().parse().ok()))
}

async fn holder(s: &Scope, lease: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    leases.get_opt(lease).await.ok()??.spec?.holder_identity
}

/// Which of the two replicas the identity names (identities end with `-<pid>`).
fn which(identity: &str, replicas: &[&Provider; 2]) -> Option<usize> {
    replicas.iter().position(|p| p.process.pid().is_some_and(|pid| identity.ends_with(&format!("-{pid}"))))
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_leader_allocates_and_a_killed_leader_hands_over_mid_storm() {
    let s = Scope::new("leader-election").await;
    let lease = "ferro-ipam-e2e-leader";
    let mut args = s.provider_args();
    args.extend([
        "--leader-elect",
        "--leader-election-namespace",
        &s.ns,
        "--leader-election-id",
        lease,
        "--leader-elect-lease-duration",
        "4",
        "--leader-elect-renew-margin",
        "2",
    ]);
    let first = Provider::start(s.plane, &args).unwrap();
    let second = Provider::start(s.plane, &args).unwrap();
    s.eventually("a replica holds the lease", PROMPTLY, || async { holder(&s, lease).await.is_some() }).await.unwrap();
    let identity = holder(&s, lease).await.unwrap();
    let leader_index = which(&identity, &[&first, &second]).unwrap_or_else(|| panic!("{identity} is neither replica"));
    let (mut leader, follower) = if leader_index == 0 { (first, second) } else { (second, first) };
    s.eventually("the leader says so in its metrics", PROMPTLY, || async { leader_gauge(&leader) == Some(1.0) })
        .await
        .unwrap();
    assert_eq!(leader_gauge(&follower), Some(0.0), "the replica standing by is not the leader");

    s.pool("pool", json!({"addresses": ["10.80.0.0/23"], "prefix": 23, "gateway": "10.80.0.1"})).await.unwrap();
    futures::stream::iter(0..CLAIMS)
        .map(|n| {
            let s = &s;
            async move { s.claim(&format!("c-{n}"), "InClusterIPPool", "pool").await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    s.eventually("the leader has written some addresses", Duration::from_secs(60), || async {
        s.addresses().list(&ListParams::default()).await.unwrap().items.len() >= 60
    })
    .await
    .unwrap();
    assert_eq!(allocations_logged(&follower), 0, "the replica standing by allocated:\n{}", follower.log_tail(40));
    leader.kill();
    let by_leader = allocations_logged(&leader);
    let written = s.addresses().list(&ListParams::default()).await.unwrap().items.len();
    assert!(written < CLAIMS, "the kill should land mid-storm ({written} addresses already)");
    assert!(by_leader > 0);

    s.eventually("the other replica takes the lease", Duration::from_secs(30), || async {
        holder(&s, lease).await.as_deref().and_then(|h| which(h, &[&leader, &follower])) == Some(1)
    })
    .await
    .unwrap();
    s.eventually("all claims are Ready", Duration::from_secs(120), || async { s.ready_claims().await == CLAIMS })
        .await
        .unwrap();
    assert_eq!(leader_gauge(&follower), Some(1.0));
    let by_follower = allocations_logged(&follower);
    assert!(by_follower > 0, "the new leader allocated the rest");
    assert_eq!(s.address_map().await.unwrap().len(), CLAIMS, "exactly one address per claim");
    // Each address was created once, by one replica or the other. The killed leader may have
    // had some creates stored without living to log them (at most --claim-concurrency, 64); its
    // successor adopts those addresses instead of allocating again.
    let logged = by_leader + by_follower;
    assert!(
        logged <= CLAIMS && logged + 64 >= CLAIMS,
        "{by_leader} + {by_follower} allocations logged for {CLAIMS} claims"
    );
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_whose_lease_is_taken_stops_allocating_and_stops_reporting_pools() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::{Patch, PatchParams};

    let s = Scope::new("lease-taken").await;
    let lease = "ferro-ipam-e2e-taken";
    let mut args = s.provider_args();
    args.extend([
        "--leader-elect",
        "--leader-election-namespace",
        &s.ns,
        "--leader-election-id",
        lease,
        "--leader-elect-lease-duration",
        "4",
        "--leader-elect-renew-margin",
        "2",
    ]);
    let provider = Provider::start(s.plane, &args).unwrap();
    s.pool("pool", json!({"addresses": ["10.81.0.10-10.81.0.20"], "prefix": 24})).await.unwrap();
    s.claim("before", "InClusterIPPool", "pool").await.unwrap();
    s.wait_allocated("before", PROMPTLY).await.unwrap();
    s.eventually("the leader reports the pool", PROMPTLY, || async {
        provider.metrics_text().is_some_and(|m| m.contains(r#"pool="pool",family="IPv4",state="used"} 1"#))
    })
    .await
    .unwrap();

    // Someone else takes the Lease for an hour (as a replica would after this one stalled).
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.ns);
    let take = || async {
        let now = serde_json::to_value(MicroTime(k8s_openapi::jiff::Timestamp::now())).unwrap();
        let intruder = json!({"spec": {"holderIdentity": "intruder", "acquireTime": now, "renewTime": now, "leaseDurationSeconds": 3600}});
        leases.patch(lease, &PatchParams::default(), &Patch::Merge(&intruder)).await.unwrap();
    };
    take().await;
    // A renewal that misses its deadline under load suspends the term (gauge 0, pools still
    // reported); the intruder's record ends it.
    s.eventually("the replica notices at its next renewal and ends its term", PROMPTLY, || async {
        leader_gauge(&provider) == Some(0.0)
            && provider.metrics_text().is_some_and(|m| !m.contains("ferro_ipam_pool_addresses{"))
    })
    .await
    .unwrap();
    // Renewals are conditional on the Lease's resourceVersion: the intruder's record stands.
    let holder_now = holder(&s, lease).await;
    assert_eq!(holder_now.as_deref(), Some("intruder"), "a renewal overwrote the new holder");
    let metrics = provider.metrics_text().unwrap();
    assert!(!metrics.contains("ferro_ipam_pool_addresses{"), "a replica standing by reports no pool:\n{metrics}");
    assert!(provider.log_tail(200).contains("lost the leadership"));

    s.claim("after", "InClusterIPPool", "pool").await.unwrap();
    s.stays("nothing is allocated without the lease", crate::A_WHILE, || async {
        s.addresses().get_opt("after").await.unwrap().is_none() && s.claim_ready("after").await.is_none()
    })
    .await
    .unwrap();
    provider.wait_ready(Duration::from_secs(1)).expect("standing by is ready");
    // Once nobody holds the Lease, a replica takes it and serves the claim that waited.
    leases.delete(lease, &Default::default()).await.unwrap();
    let _next = Provider::start(s.plane, &args).unwrap();
    s.wait_allocated("after", PROMPTLY).await.unwrap();
}
