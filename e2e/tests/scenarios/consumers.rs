//! Claims created exactly as the infrastructure providers create them (CAPV, CAPIC, CAPMOX,
//! CAPM3): their names, labels, annotations, owner references and finalizers, and the way each
//! lets go of a claim. The owners (VSphereVM, IonosCloudMachine, ProxmoxMachine, Metal3Data)
//! have no CRD here: an owner reference with a made-up uid is enough, as no garbage collector runs.

use std::time::Duration;

use ferro_ipam::api::capi::IPAddress;
use ferro_ipam::api::keys::{CLUSTER_NAME_LABEL, PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::{Scope, capi};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::{A_WHILE, PROMPTLY};

const IN_CLUSTER: &str = "InClusterIPPool";

fn owner(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid})
}

/// What `controllerutil.SetControllerReference` writes.
fn controller_owner(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    let mut owner = owner(api_version, kind, name, uid);
    owner["controller"] = json!(true);
    owner["blockOwnerDeletion"] = json!(true);
    owner
}

/// Waits until the claim is served and checks what every consumer reads: `status.addressRef`
/// naming the claim's `IPAddress`, `Ready=True`, and an `IPAddress` that names the claim and
/// its pool. Returns the `IPAddress`.
async fn served(s: &Scope, claim: &str, pool: &str) -> IPAddress {
    let address = s.wait_allocated(claim, PROMPTLY).await.unwrap();
    let status = s.claims().get(claim).await.unwrap().status.unwrap();
    assert_eq!(status.address_ref.map(|r| r.name).as_deref(), Some(claim), "status.addressRef of {claim}");
    assert_eq!(address.spec.claim_ref.name, claim);
    assert_eq!(address.spec.pool_ref.name, pool);
    assert_eq!(address.spec.pool_ref.kind, IN_CLUSTER);
    assert_eq!(address.spec.pool_ref.api_group.as_deref(), Some("ipam.cluster.x-k8s.io"));
    address
}

/// The fields a consumer reads from an `IPAddress`.
fn read(address: &IPAddress) -> (&str, i32, Option<&str>) {
    (address.spec.address.as_str(), address.spec.prefix, address.spec.gateway.as_deref())
}

/// The `IPAddress` carries the claim's cluster, is owned by the claim (controller) and the pool,
/// and is protected by ferro-ipam's finalizer.
fn check_address_metadata(address: &IPAddress, claim: &str, pool: &str, cluster: &str) {
    assert_eq!(
        address.labels().get(CLUSTER_NAME_LABEL).map(String::as_str),
        Some(cluster),
        "cluster-name label of IPAddress {claim}"
    );
    assert!(address.finalizers().iter().any(|f| f == PROTECT_ADDRESS_FINALIZER));
    let owners: Vec<(&str, &str, Option<bool>, Option<bool>)> = address
        .owner_references()
        .iter()
        .map(|o| (o.kind.as_str(), o.name.as_str(), o.controller, o.block_owner_deletion))
        .collect();
    assert_eq!(
        owners,
        [("IPAddressClaim", claim, Some(true), Some(true)), (IN_CLUSTER, pool, Some(false), Some(true)),],
        "owner references of IPAddress {claim}"
    );
}

/// The claim keeps what its consumer wrote (owner references, labels, annotations and its own
/// finalizer) next to ferro-ipam's finalizer.
async fn check_claim_untouched(s: &Scope, claim: &str, written: &Value, consumer_finalizer: Option<&str>) {
    let object = s.claims().get(claim).await.unwrap();
    let meta = serde_json::to_value(&object.metadata).unwrap();
    for field in ["ownerReferences", "labels", "annotations"] {
        assert_eq!(meta.get(field), written.get(field), "metadata.{field} of claim {claim}");
    }
    let finalizers = object.finalizers();
    assert!(finalizers.iter().any(|f| f == RELEASE_ADDRESS_FINALIZER));
    if let Some(theirs) = consumer_finalizer {
        assert!(finalizers.iter().any(|f| f == theirs), "claim {claim} lost {theirs}: {finalizers:?}");
    }
}

async fn claim_gone(s: &Scope, claim: &str) -> bool {
    s.claims().get_opt(claim).await.unwrap().is_none()
}

async fn address_gone(s: &Scope, claim: &str) -> bool {
    s.addresses().get_opt(claim).await.unwrap().is_none()
}

/// CAPV (`VSphereVM.spec.network.devices[].addressesFromPools`): a claim `<vm>-<device>-<pool>`
/// per pool of each device, owned by the VSphereVM without controller flag, the cluster only as
/// label, CAPV's finalizer. CAPV reads address, prefix and gateway. When the VM goes, CAPV drops
/// its finalizer and the garbage collector deletes the claims.
#[tokio::test(flavor = "multi_thread")]
async fn capv_claims_named_vm_device_pool_get_addresses_with_prefix_and_gateway() {
    const CAPV_FINALIZER: &str = "vspherevm.infrastructure.cluster.x-k8s.io/ip-claim-protection";
    let s = Scope::new("capv").await;
    let _p = s.provider();
    s.cluster("capv-wl", false).await.unwrap();
    s.pool("capv-v4", json!({"addresses": ["10.40.0.10-10.40.0.50"], "prefix": 24, "gateway": "10.40.0.1"}))
        .await
        .unwrap();
    s.pool("capv-v6", json!({"addresses": ["fd00:40::/120"], "prefix": 64, "gateway": "fd00:40::1"})).await.unwrap();
    s.pool("capv-storage", json!({"addresses": ["172.16.40.100-172.16.40.110"], "prefix": 26})).await.unwrap();

    let vm = "capv-wl-md-0-x7k2p";
    let vm_owner =
        owner("infrastructure.cluster.x-k8s.io/v1beta1", "VSphereVM", vm, "6f1c2a4e-3b7d-4c1e-9a55-0c1d2e3f4a5b");
    // Device 0 takes addresses from capv-v4 and capv-v6, device 1 from capv-storage.
    let claims = [
        (format!("{vm}-0-0"), "capv-v4", ("10.40.0.10", 24, Some("10.40.0.1"))),
        // fd00:40:: is the network's own address, fd00:40::1 the gateway.
        (format!("{vm}-0-1"), "capv-v6", ("fd00:40::2", 64, Some("fd00:40::1"))),
        (format!("{vm}-1-0"), "capv-storage", ("172.16.40.100", 26, None)),
    ];
    let metadata = json!({
        "labels": {CLUSTER_NAME_LABEL: "capv-wl"},
        "ownerReferences": [vm_owner],
        "finalizers": [CAPV_FINALIZER],
    });
    for (name, pool, _) in &claims {
        s.claim_with(name, IN_CLUSTER, pool, metadata.clone()).await.unwrap();
    }
    for (name, pool, expected) in &claims {
        let address = served(&s, name, pool).await;
        assert_eq!(read(&address), *expected, "what CAPV reads from {name}");
        check_address_metadata(&address, name, pool, "capv-wl");
        check_claim_untouched(&s, name, &metadata, Some(CAPV_FINALIZER)).await;
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();

    // The VM is deleted: CAPV drops its finalizer, then the garbage collector deletes the claims.
    for (name, _, _) in &claims {
        s.remove_finalizer(&capi().claim_resource(), name, CAPV_FINALIZER).await.unwrap();
        s.delete_claim(name).await.unwrap();
    }
    for (name, _, _) in &claims {
        s.eventually("the claim and its IPAddress go", PROMPTLY, || async {
            claim_gone(&s, name).await && address_gone(&s, name).await
        })
        .await
        .unwrap();
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// CAPIC (`ipv4PoolRef`/`ipv6PoolRef` of the primary NIC and of additional networks): claims
/// `nic-<machine>-ipv4` and `nic-<machine>-ipv6` (`nic-<machine>-<network>-ipv4` for an
/// additional network), owned by the IonosCloudMachine as controller, the cluster as label,
/// CAPIC's machine finalizer. CAPIC reads the address.
#[tokio::test(flavor = "multi_thread")]
async fn capic_machine_gets_ipv4_and_ipv6_from_two_pools() {
    const CAPIC_FINALIZER: &str = "ionoscloudmachine.infrastructure.cluster.x-k8s.io";
    let s = Scope::new("capic").await;
    let _p = s.provider();
    s.cluster("ionos-wl", false).await.unwrap();
    s.pool("ionos-v4", json!({"addresses": ["192.168.50.10-192.168.50.20"], "prefix": 24, "gateway": "192.168.50.1"}))
        .await
        .unwrap();
    s.pool(
        "ionos-v6",
        json!({"addresses": ["2001:db8:50::100-2001:db8:50::1ff"], "prefix": 64, "gateway": "2001:db8:50::1"}),
    )
    .await
    .unwrap();

    let machine = "ionos-wl-cp-4kq9z";
    let metadata = json!({
        "labels": {CLUSTER_NAME_LABEL: "ionos-wl"},
        "ownerReferences": [controller_owner(
            "infrastructure.cluster.x-k8s.io/v1alpha1",
            "IonosCloudMachine",
            machine,
            "2a8e4f10-77c3-4b0e-8d2f-5e6a7b8c9d01",
        )],
        "finalizers": [CAPIC_FINALIZER],
    });
    let claims = [
        (format!("nic-{machine}-ipv4"), "ionos-v4", "192.168.50.10"),
        (format!("nic-{machine}-ipv6"), "ionos-v6", "2001:db8:50::100"),
        (format!("nic-{machine}-3-ipv4"), "ionos-v4", "192.168.50.11"),
    ];
    // CAPIC creates the primary NIC's claims first, then those of additional networks.
    for (name, pool, _) in &claims {
        s.claim_with(name, IN_CLUSTER, pool, metadata.clone()).await.unwrap();
        s.wait_allocated(name, PROMPTLY).await.unwrap();
    }
    for (name, pool, expected) in &claims {
        let address = served(&s, name, pool).await;
        assert_eq!(address.spec.address, *expected, "what CAPIC reads from {name}");
        check_address_metadata(&address, name, pool, "ionos-wl");
        check_claim_untouched(&s, name, &metadata, Some(CAPIC_FINALIZER)).await;
    }
    let v6 = s.addresses().get(&claims[1].0).await.unwrap();
    assert_eq!((v6.spec.prefix, v6.spec.gateway.as_deref()), (64, Some("2001:db8:50::1")));
    invariants::check(&s.client, &[&s.ns]).await.unwrap();

    // The machine is deleted: the claims are deleted while CAPIC's finalizer is still on them.
    // ferro-ipam releases the addresses and drops only its own finalizer; CAPIC drops its own.
    for (name, _, _) in &claims {
        s.delete_claim(name).await.unwrap();
    }
    for (name, _, _) in &claims {
        s.eventually("the address is released", PROMPTLY, || async {
            let claim = s.claims().get(name).await.unwrap();
            address_gone(&s, name).await && claim.finalizers() == [CAPIC_FINALIZER]
        })
        .await
        .unwrap();
        s.remove_finalizer(&capi().claim_resource(), name, CAPIC_FINALIZER).await.unwrap();
        s.eventually("the claim goes", PROMPTLY, || claim_gone(&s, name)).await.unwrap();
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// The `InClusterIPPool` CAPMOX creates for a ProxmoxCluster's `ipv4Config`: named
/// `<cluster>-v4-icip`, owned by the ProxmoxCluster, with its ip-family and gateway-metric
/// annotations, its zone label, and `addressReuseGracePeriodSeconds: 60`.
fn capmox_pool(cluster: &str, addresses: &[&str], grace: i32) -> Value {
    json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
        "kind": IN_CLUSTER,
        "metadata": {
            "name": format!("{cluster}-v4-icip"),
            "annotations": {
                "ipam.capmox.cluster.x-k8s.io/ip-family": "ipv4",
                "ipam.capmox.cluster.x-k8s.io/gateway-metric": "",
            },
            "labels": {"topology.kubernetes.io/proxmox-zone": "default"},
            "ownerReferences": [controller_owner(
                "infrastructure.cluster.x-k8s.io/v1alpha2",
                "ProxmoxCluster",
                cluster,
                "9b0d7c55-1e2f-4a3b-8c4d-6e7f8091a2b3",
            )],
        },
        "spec": {
            "addresses": addresses,
            "prefix": 24,
            "gateway": "10.50.0.1",
            "addressReuseGracePeriodSeconds": grace,
        },
    })
}

/// A claim as CAPMOX creates it for the first pool of a machine's `net0`:
/// `<machine>-net0-00-inet`, owned by the ProxmoxMachine as controller, with the cluster and
/// the pool's zone as labels and CAPMOX's pool-offset and default-gateway annotations.
fn capmox_claim_metadata(cluster: &str, machine: &str) -> Value {
    json!({
        "labels": {
            CLUSTER_NAME_LABEL: cluster,
            "topology.kubernetes.io/proxmox-zone": "default",
        },
        "annotations": {
            "ipam.capmox.cluster.x-k8s.io/pool-ref-counter": "0",
            "ipam.capmox.cluster.x-k8s.io/default-gateway": "true",
        },
        "ownerReferences": [controller_owner(
            "infrastructure.cluster.x-k8s.io/v1alpha2",
            "ProxmoxMachine",
            machine,
            &format!("5c3e1a2b-0000-4000-8000-{:0>12}", machine.len()),
        )],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn capmox_pool_created_as_capmox_creates_it_serves_its_claims() {
    let s = Scope::new("capmox").await;
    let p = s.provider();
    s.cluster("mox-wl", false).await.unwrap();
    let pool = capmox_pool("mox-wl", &["10.50.0.10-10.50.0.20"], 60);
    s.create(pool.clone()).await.unwrap();
    let pool_name = "mox-wl-v4-icip";

    let machines = ["mox-wl-control-plane-x2b9k", "mox-wl-workers-f8h3n"];
    for (i, machine) in machines.iter().enumerate() {
        let claim = format!("{machine}-net0-00-inet");
        let metadata = capmox_claim_metadata("mox-wl", machine);
        s.claim_with(&claim, IN_CLUSTER, pool_name, metadata.clone()).await.unwrap();
        let address = served(&s, &claim, pool_name).await;
        let expected = format!("10.50.0.{}", 10 + i);
        assert_eq!(read(&address), (expected.as_str(), 24, Some("10.50.0.1")));
        check_address_metadata(&address, &claim, pool_name, "mox-wl");
        check_claim_untouched(&s, &claim, &metadata, None).await;
    }
    // CAPMOX reads the pool's annotations through the IPAddress's poolRef: they are as it wrote
    // them, and so are its owner reference and label.
    let written = s.pools().get(pool_name).await.unwrap();
    let meta = serde_json::to_value(&written.metadata).unwrap();
    for field in ["annotations", "labels", "ownerReferences"] {
        assert_eq!(meta.get(field), pool["metadata"].get(field), "pool metadata.{field}");
    }
    assert_eq!(written.spec.address_reuse_grace_period_seconds, Some(60));
    s.eventually("the pool is Ready", PROMPTLY, || async {
        s.pool_ready(pool_name).await.is_some_and(|(status, _, _)| status == "True")
    })
    .await
    .unwrap();

    // The first machine goes: its claim is deleted, but the address stays reserved for the
    // pool's 60 s grace period. The next machine gets another address.
    let gone = format!("{}-net0-00-inet", machines[0]);
    s.delete_claim(&gone).await.unwrap();
    let next = "mox-wl-workers-q4v7m";
    let claim = format!("{next}-net0-00-inet");
    s.claim_with(&claim, IN_CLUSTER, pool_name, capmox_claim_metadata("mox-wl", next)).await.unwrap();
    assert_eq!(served(&s, &claim, pool_name).await.spec.address, "10.50.0.12");
    // The provider has seen the deletion, and says it holds the address for the grace period.
    let holder = format!("claim={}/{gone}", s.ns);
    s.eventually("the provider holds the address for the grace period", PROMPTLY, || async {
        p.logged(&["holding the address for the pool's reuse grace period", &holder])
    })
    .await
    .unwrap();
    s.stays("the address is held for the grace period", A_WHILE, || async {
        let address = s.addresses().get_opt(&gone).await.unwrap();
        let claim = s.claims().get_opt(&gone).await.unwrap();
        address.is_some_and(|a| a.spec.address == "10.50.0.10")
            && claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await
    .unwrap();
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn capmox_claim_address_is_released_once_the_grace_period_has_passed() {
    const GRACE: u64 = 3;
    let s = Scope::new("capmox-grace").await;
    let _p = s.provider();
    s.cluster("mox-wl", false).await.unwrap();
    // CAPMOX's pool with its 60 s grace period shortened, and a single address.
    s.create(capmox_pool("mox-wl", &["10.50.0.10"], GRACE as i32)).await.unwrap();
    let pool_name = "mox-wl-v4-icip";
    let first = "mox-wl-control-plane-x2b9k-net0-00-inet";
    let second = "mox-wl-control-plane-m5t8w-net0-00-inet";
    s.claim_with(first, IN_CLUSTER, pool_name, capmox_claim_metadata("mox-wl", "mox-wl-control-plane-x2b9k"))
        .await
        .unwrap();
    assert_eq!(served(&s, first, pool_name).await.spec.address, "10.50.0.10");
    s.claim_with(second, IN_CLUSTER, pool_name, capmox_claim_metadata("mox-wl", "mox-wl-control-plane-m5t8w"))
        .await
        .unwrap();
    s.wait_reason(second, "PoolExhausted", PROMPTLY).await.unwrap();

    let deleted = tokio::time::Instant::now();
    s.delete_claim(first).await.unwrap();
    // deletionTimestamp has whole seconds: the grace period ends at least GRACE - 1 s from now.
    let held = Duration::from_secs(GRACE - 1) - Duration::from_millis(300);
    s.stays("the address is held for the grace period", held, || async {
        s.addresses().get_opt(first).await.unwrap().is_some()
            && s.claim_ready(second).await.is_some_and(|(status, _, _)| status == "False")
    })
    .await
    .unwrap();
    s.eventually("the IPAddress goes after the grace period", PROMPTLY, || address_gone(&s, first)).await.unwrap();
    let waited = deleted.elapsed();
    assert!(
        waited >= Duration::from_secs(GRACE - 1),
        "released after {waited:?}, before the grace period of {GRACE} s"
    );
    s.eventually("the claim goes", PROMPTLY, || claim_gone(&s, first)).await.unwrap();
    assert_eq!(served(&s, second, pool_name).await.spec.address, "10.50.0.10");
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}

/// CAPM3 (Metal3DataTemplate `fromPoolRef`): a claim `<metal3data>-<pool>` owned by the
/// Metal3Data as controller but without blockOwnerDeletion, the Metal3Data's labels copied,
/// its finalizer. CAPM3 reads address, prefix and gateway; to release, it drops its finalizer
/// and deletes the claim.
#[tokio::test(flavor = "multi_thread")]
async fn capm3_claims_with_controller_owner_without_block_owner_deletion() {
    const CAPM3_FINALIZER: &str = "metal3data.infrastructure.cluster.x-k8s.io";
    let s = Scope::new("capm3").await;
    let _p = s.provider();
    s.cluster("m3-wl", false).await.unwrap();
    s.pool("provisioning-pool", json!({"addresses": ["172.22.0.100-172.22.0.200"], "prefix": 24})).await.unwrap();
    s.pool(
        "baremetalv4-pool",
        json!({"addresses": ["192.168.111.100-192.168.111.200"], "prefix": 24, "gateway": "192.168.111.1"}),
    )
    .await
    .unwrap();

    let data_metadata = |data: &str, uid: &str| {
        json!({
            "labels": {
                CLUSTER_NAME_LABEL: "m3-wl",
                "cluster.x-k8s.io/deployment-name": "m3-wl-workers",
            },
            "ownerReferences": [{
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "Metal3Data",
                "name": data,
                "uid": uid,
                "controller": true,
            }],
            "finalizers": [CAPM3_FINALIZER],
        })
    };
    let data = "m3-wl-workers-template-0";
    let metadata = data_metadata(data, "c0ffee00-1234-4abc-9def-000000000000");
    let claims = [
        (format!("{data}-provisioning-pool"), "provisioning-pool", ("172.22.0.100", 24, None)),
        (format!("{data}-baremetalv4-pool"), "baremetalv4-pool", ("192.168.111.100", 24, Some("192.168.111.1"))),
    ];
    for (name, pool, _) in &claims {
        s.claim_with(name, IN_CLUSTER, pool, metadata.clone()).await.unwrap();
    }
    for (name, pool, expected) in &claims {
        let address = served(&s, name, pool).await;
        assert_eq!(read(&address), *expected, "what CAPM3 reads from {name}");
        check_address_metadata(&address, name, pool, "m3-wl");
        // Still exactly CAPM3's owner reference: no blockOwnerDeletion added.
        check_claim_untouched(&s, name, &metadata, Some(CAPM3_FINALIZER)).await;
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();

    // CAPM3 releases: drops its finalizer, deletes the claim. The addresses are free again and
    // the next Metal3Data gets them.
    for (name, _, _) in &claims {
        s.remove_finalizer(&capi().claim_resource(), name, CAPM3_FINALIZER).await.unwrap();
        s.delete_claim(name).await.unwrap();
    }
    for (name, _, _) in &claims {
        s.eventually("the claim and its IPAddress go", PROMPTLY, || async {
            claim_gone(&s, name).await && address_gone(&s, name).await
        })
        .await
        .unwrap();
    }
    let next = "m3-wl-workers-template-1";
    let metadata = data_metadata(next, "c0ffee00-1234-4abc-9def-000000000001");
    for (_, pool, (expected, _, _)) in &claims {
        let name = format!("{next}-{pool}");
        s.claim_with(&name, IN_CLUSTER, pool, metadata.clone()).await.unwrap();
        assert_eq!(served(&s, &name, pool).await.spec.address, *expected);
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
