//! Migration, end to end: a cluster whose addresses the in-cluster provider handed out moves to
//! ferro-ipam, and back, without losing or renumbering anything.
//!
//! Prefix pools of both kinds move along with live claims.
//!
//! One scenario on a control plane of its own (this file is its own test binary): the pool CRDs
//! are replaced twice, which no other scenario could run beside. The runbook it follows is
//! `docs/migration.md`.

#[path = "migration/crds.rs"]
mod crds;
#[path = "migration/fleet.rs"]
mod fleet;
#[path = "migration/prefixes.rs"]
mod prefixes;
#[path = "migration/preflight.rs"]
mod preflight;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::{ControlPlane, Peer, Provider};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::ListParams;

use fleet::{Fleet, GLOBAL, GLOBAL_PREFIX, IN_CLUSTER, PREFIX, Snapshot};

/// Long enough for either provider to work through a few hundred claims on a busy machine.
const SETTLE: Duration = Duration::from_secs(180);
/// How long a check watches for something that must not happen.
const A_WHILE: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread")]
async fn in_cluster_provider_to_ferro_ipam_and_back_keeps_every_address() {
    let plane = ControlPlane::shared();
    let client = plane.client().await;
    let fleet = Fleet::new().await;

    // A cluster as the in-cluster provider leaves it: CRDs upgraded from a release that stored
    // v1alpha1, pools of both versions, several hundred claims, some mid-deletion, one pool paused.
    crds::install_early_in_cluster(plane, &client).await.unwrap();
    fleet.create_legacy_pools().await.unwrap();
    crds::install_in_cluster(plane, &client).await.unwrap();
    for name in crds::POOL_CRDS {
        let stored = crds::stored_versions(&client, name).await.unwrap();
        assert!(
            stored.contains(&"v1alpha1".to_owned()) && stored.contains(&"v1alpha2".to_owned()),
            "{name}: {stored:?}"
        );
    }
    let mut peer = Peer::start(plane, &[]).expect("starting the in-cluster provider");
    fleet.create_pools().await.unwrap();
    let total = fleet.create_claims().await.unwrap();
    settle(&fleet, "the in-cluster provider addresses every claim", |(live, addressed, _)| {
        live == total && addressed == total
    })
    .await;
    let (held_by_pause, held_by_grace) = start_deletions(&fleet, &peer).await.unwrap();
    invariants::check(&client, &fleet.namespaces()).await.expect("the in-cluster provider's pool statuses");
    let before = fleet.snapshot().await.unwrap();
    let counts_before = fleet.pool_counts().await.unwrap();
    assert_eq!(before.addresses.len(), total, "one IPAddress per claim, deleting ones included");
    peer.stop();

    // Step 1 of the runbook: preflight, still on the in-cluster provider's CRDs.
    preflight_before_the_move(plane, &fleet, total, held_by_grace.len()).unwrap();
    preflight::reports_an_injected_duplicate(plane, &fleet).await.unwrap();

    // The move: ferro-ipam's CRDs replace the in-cluster ones, then ferro-ipam starts.
    crds::install_ferro_ipam(plane).unwrap();
    for name in crds::POOL_CRDS {
        assert!(crds::stored_versions(&client, name).await.unwrap().contains(&"v1alpha1".to_owned()));
    }
    crds::dropping_v1alpha1_is_refused(plane, &client).await.unwrap();
    let mut ferro = Provider::start(plane, &[]).expect("starting ferro-ipam");
    // Claims of the paused pool wait (with either provider) until it is unpaused.
    let live = total - held_by_pause.len() - held_by_grace.len();
    let waiting = fleet.groups.iter().find(|g| g.pool == "paused").map_or(0, |g| g.count) - held_by_pause.len();
    settle(&fleet, "ferro-ipam marks every adopted claim Ready", |(l, _, ready)| l == live && ready == live - waiting)
        .await;
    // Everything is as the in-cluster provider left it (the grace-period claims are checked on
    // their own below, against their deletion times).
    let after = fleet.snapshot().await.unwrap();
    let mut settled = before.clone();
    settled.addresses.retain(|key, _| !held_by_grace.contains(key));
    settled.claims.retain(|key, _| !held_by_grace.contains(key));
    assert_eq!(
        fleet::changes(&settled, &after, &BTreeSet::new()),
        Vec::<String>::new(),
        "every IPAddress and claim kept"
    );
    invariants::check(&client, &fleet.namespaces()).await.expect("ferro-ipam's pool statuses");
    // The same counts as the in-cluster provider's, except in the grace-period pool, which
    // grace_period_is_honoured checks against the deletion times.
    let without_grace = |mut counts: std::collections::BTreeMap<String, _>| {
        counts.retain(|pool: &String, _| !pool.ends_with("/grace"));
        counts
    };
    assert_eq!(
        without_grace(fleet.pool_counts().await.unwrap()),
        without_grace(counts_before),
        "the same pool counts as the in-cluster provider's"
    );

    grace_period_is_honoured(&fleet, &before, &held_by_grace).await.unwrap();
    paused_pool_holds_until_unpaused(&fleet, &before, &held_by_pause).await.unwrap();
    let now = fleet.snapshot().await.unwrap();
    new_claims_get_free_addresses(&fleet, &now, "moved").await.unwrap();
    released_addresses_are_handed_out_again(&fleet, IN_CLUSTER, "net", 20).await.unwrap();
    released_addresses_are_handed_out_again(&fleet, PREFIX, "pfx", 6).await.unwrap();
    invariants::check(&client, &fleet.namespaces()).await.expect("after ferro-ipam's own allocations");
    fleet.sub_prefixes_are_distinct_and_aligned().await.unwrap();
    storage_version_cleanup_lets_v1alpha1_go(plane, &client).await.unwrap();

    // And back: the in-cluster provider takes over what ferro-ipam left.
    let before = fleet.snapshot().await.unwrap();
    ferro.stop();
    // Step 1 of the way back: preflight says the state ferro-ipam left is consistent.
    let verdict = preflight::run(plane, "before moving back").unwrap();
    assert_eq!(verdict.status, 0, "{:#}", verdict.findings);
    let addresses = before.addresses.len() as u64;
    assert_eq!(
        [verdict.count("addresses"), verdict.count("adopted"), verdict.count("conflicts"), verdict.count("waiting")],
        [addresses, addresses, 0, 0],
        "{:#}",
        verdict.findings["summary"]
    );
    crds::install_in_cluster(plane, &client).await.unwrap();
    let _peer = Peer::start(plane, &[]).expect("starting the in-cluster provider again");
    new_claims_get_free_addresses(&fleet, &before, "back").await.unwrap();
    let after = fleet.snapshot().await.unwrap();
    assert_eq!(
        fleet::changes(&before, &after, &BTreeSet::new()),
        Vec::<String>::new(),
        "nothing changed on the way back"
    );
    released_addresses_are_handed_out_again(&fleet, IN_CLUSTER, "net", 10).await.unwrap();
    released_addresses_are_handed_out_again(&fleet, PREFIX, "pfx", 4).await.unwrap();
    invariants::check(&client, &fleet.namespaces()).await.expect("the in-cluster provider's pool statuses, back");
    fleet.sub_prefixes_are_distinct_and_aligned().await.unwrap();
}

/// Preflight on the fleet as the in-cluster provider left it: clean, with every address adopted
/// except those of the paused pool (its claims wait) and of the claims waiting out the grace
/// period (released).
fn preflight_before_the_move(plane: &ControlPlane, fleet: &Fleet, total: usize, releasing: usize) -> Result<()> {
    let verdict = preflight::run(plane, "before the move")?;
    ensure!(verdict.status == 0, "preflight exited {}: {:#}", verdict.status, verdict.findings);
    let paused = fleet.groups.iter().find(|g| g.pool == "paused").map_or(0, |g| g.count);
    let expected = [
        // Eight IP pools and two prefix pools.
        ("pools", 10),
        ("invalidPools", 0),
        ("addresses", total),
        ("adopted", total - paused - releasing),
        ("conflicts", 0),
        ("waiting", paused),
        ("toAllocate", 0),
        ("releasing", releasing),
        ("unclaimed", 0),
        ("unreadable", 0),
    ];
    for (key, count) in expected {
        ensure!(verdict.count(key) == count as u64, "summary.{key}: {} != {count}", verdict.findings["summary"]);
    }
    let (a, b) = (fleet.a().ns.as_str(), fleet.b().ns.as_str());
    for (kind, namespace, name, count) in [
        (IN_CLUSTER, Some(a), "net", 150),
        (IN_CLUSTER, Some(b), "net", 100),
        (GLOBAL, None, fleet.shared.as_str(), 120),
        (PREFIX, Some(a), "pfx", 40),
        (GLOBAL_PREFIX, None, fleet.shared_prefixes.as_str(), 16),
        (IN_CLUSTER, Some(a), "grace", 30 - releasing),
        (IN_CLUSTER, Some(a), "paused", 0),
    ] {
        let adopted = verdict.adopted_in(kind, namespace, name);
        ensure!(adopted == count, "{kind} {namespace:?}/{name}: {adopted} adopted, not {count}");
    }
    // The in-cluster provider's prefix pools are counted, and their sub-prefixes adopted above.
    let prefix = &verdict.findings["features"]["prefixPools"];
    ensure!(
        prefix["served"] == true && prefix["inCluster"] == 1 && prefix["global"] == 1,
        "features.prefixPools: {prefix}"
    );
    let waiting = verdict.findings["waiting"].as_array().cloned().unwrap_or_default();
    ensure!(
        waiting.iter().all(|w| w["reason"] == "Held" && w["message"] == "its pool is paused"),
        "every waiting claim is held by the paused pool: {waiting:?}"
    );
    Ok(())
}

/// Polls the fleet's (live, addressed, ready) claim counts until `done` holds.
async fn settle(fleet: &Fleet, what: &str, done: impl Fn((usize, usize, usize)) -> bool) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let progress = fleet.progress().await.unwrap();
        if done(progress) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {SETTLE:?}; (live, addressed, ready) = {progress:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Under the in-cluster provider: pauses the `paused` pool and deletes 5 of its claims (held by
/// the pause), and deletes 8 claims of the `grace` pool (held by its grace period). Returns both
/// sets of (namespace, name) once the provider has said, for each, that it holds it.
async fn start_deletions(
    fleet: &Fleet,
    peer: &Peer,
) -> Result<(BTreeSet<(String, String)>, BTreeSet<(String, String)>)> {
    let a = fleet.a();
    fleet.pause_pool(true).await?;
    let mut paused = BTreeSet::new();
    for n in 0..5 {
        a.delete_claim(&format!("paused-{n}")).await?;
        paused.insert((a.ns.clone(), format!("paused-{n}")));
    }
    let mut grace = BTreeSet::new();
    for n in 0..8 {
        a.delete_claim(&format!("grace-{n}")).await?;
        grace.insert((a.ns.clone(), format!("grace-{n}")));
    }
    // Nothing the API shows changes; its log says it held each claim (`name="<claim>"`).
    let says = |message: &'static str, held: &BTreeSet<(String, String)>| {
        held.iter().all(|(_, name)| peer.process.logged(&[message, &format!("name=\"{name}\"")]))
    };
    a.eventually("the in-cluster provider holds the deleted claims", SETTLE, || async {
        says("references Pool which is paused", &paused) && says("Address reuse grace period active", &grace)
    })
    .await?;
    Ok((paused, grace))
}

/// The claims deleted under the in-cluster provider keep their addresses until the grace period
/// (counted from their deletion) ends; meanwhile a new claim of that pool gets another address.
/// That is checked while the period still runs (the set-up running past its end is a failure,
/// not a pass), and no held claim may go before its period ends.
async fn grace_period_is_honoured(fleet: &Fleet, before: &Snapshot, held: &BTreeSet<(String, String)>) -> Result<()> {
    let a = fleet.a();
    let mut ends: BTreeMap<String, Timestamp> = BTreeMap::new();
    for (_, name) in held {
        let claim = a.claims().get_opt(name).await?.with_context(|| format!("{name} went before the check"))?;
        let deleted = claim.metadata.deletion_timestamp.with_context(|| format!("{name} is not being deleted"))?;
        ends.insert(name.clone(), deleted.0 + SignedDuration::from_secs(fleet::GRACE_SECONDS));
    }
    let first_end = *ends.values().min().context("no held claims")?;
    let held_ips: BTreeSet<String> = held.iter().map(|k| before.addresses[k].address.clone()).collect();
    fleet.claim(0, IN_CLUSTER, "grace", "grace-new").await?;
    let got = a.wait_allocated("grace-new", SETTLE).await?.spec.address;
    let present: BTreeSet<String> = a
        .addresses()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|x| held.iter().any(|(_, name)| x.metadata.name.as_deref() == Some(name)))
        .map(|x| x.spec.address)
        .collect();
    let now = Timestamp::now();
    ensure!(
        now < first_end,
        "the set-up ran past the end of the grace period ({first_end}; now {now}): nothing left to check, raise GRACE_SECONDS"
    );
    eprintln!("migration: grace period checked with {} s of it left", first_end.duration_since(now).as_secs());
    ensure!(present == held_ips, "while the grace period runs the held addresses stay: {present:?} of {held_ips:?}");
    ensure!(!held_ips.contains(&got), "grace-new got {got}, an address held for a deleted claim");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(fleet::GRACE_SECONDS as u64 + 60);
    while !ends.is_empty() {
        let names: BTreeSet<String> =
            a.claims().list(&ListParams::default()).await?.items.into_iter().filter_map(|c| c.metadata.name).collect();
        let now = Timestamp::now();
        for (name, end) in ends.clone() {
            if !names.contains(&name) {
                ensure!(now >= end, "{name} went at {now}, before its grace period ended at {end}");
                ends.remove(&name);
            }
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the held claims {:?} outlived their grace period",
            ends.keys()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for (_, name) in held {
        ensure!(a.addresses().get_opt(name).await?.is_none(), "the IPAddress of {name} outlived its claim");
    }
    Ok(())
}

/// A paused pool holds the deletions that started under the in-cluster provider and allocates
/// nothing; unpaused, it releases them and serves new claims with free addresses.
async fn paused_pool_holds_until_unpaused(
    fleet: &Fleet,
    before: &Snapshot,
    held: &BTreeSet<(String, String)>,
) -> Result<()> {
    let a = fleet.a();
    fleet.claim(0, IN_CLUSTER, "paused", "paused-new").await?;
    a.stays("the paused pool holds its deleted claims and allocates nothing", A_WHILE, || async {
        let mut all_held = true;
        for (_, name) in held {
            all_held &= a.claims().get_opt(name).await.unwrap().is_some()
                && a.addresses().get_opt(name).await.unwrap().is_some();
        }
        all_held && a.addresses().get_opt("paused-new").await.unwrap().is_none()
    })
    .await?;
    fleet.pause_pool(false).await?;
    let got = a.wait_allocated("paused-new", SETTLE).await?.spec.address;
    let in_use: BTreeSet<String> = before
        .addresses
        .iter()
        .filter(|(k, r)| r.pool.2 == "paused" && !held.contains(*k))
        .map(|(_, r)| r.address.clone())
        .collect();
    ensure!(!in_use.contains(&got), "paused-new got {got}, which a live claim holds");
    a.eventually("unpaused, the deleted claims are released", SETTLE, || async {
        let mut gone = true;
        for (_, name) in held {
            gone &= a.claims().get_opt(name).await.unwrap().is_none()
                && a.addresses().get_opt(name).await.unwrap().is_none();
        }
        gone
    })
    .await
}

/// New claims on every pool (two per group) get addresses that nothing held at `before`.
async fn new_claims_get_free_addresses(fleet: &Fleet, before: &Snapshot, tag: &str) -> Result<()> {
    let in_use = before.in_use();
    for group in &fleet.groups {
        for n in 0..2 {
            let name = format!("{}-{tag}-{n}", group.prefix);
            fleet.claim(group.side, group.kind, &group.pool, &name).await?;
        }
    }
    for group in &fleet.groups {
        let scope = &fleet.sides[group.side];
        let pool_ns = if fleet::is_global(group.kind) { String::new() } else { scope.ns.clone() };
        let pool = (group.kind.to_owned(), pool_ns, group.pool.clone());
        for n in 0..2 {
            let name = format!("{}-{tag}-{n}", group.prefix);
            let got = wait_addressed(scope, &name).await?;
            ensure!(
                !in_use.get(&pool).is_some_and(|used| used.contains(&got)),
                "{}/{name} got {got}, already in use in {pool:?}",
                scope.ns
            );
        }
    }
    Ok(())
}

/// Waits until a claim has `status.addressRef` (all either provider writes) and its IPAddress.
async fn wait_addressed(scope: &ferro_ipam_e2e::objects::Scope, name: &str) -> Result<String> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let claim = scope.claims().get(name).await?;
        if claim.status.and_then(|s| s.address_ref).is_some_and(|r| r.name == name)
            && let Some(address) = scope.addresses().get_opt(name).await?
        {
            return Ok(address.spec.address);
        }
        ensure!(tokio::time::Instant::now() < deadline, "{}/{name} got no address within {SETTLE:?}", scope.ns);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the `count` claims holding the lowest addresses of the `kind` pool `pool` in namespace
/// `a`; their addresses are released, and as many new claims get exactly those addresses (lowest
/// first).
async fn released_addresses_are_handed_out_again(fleet: &Fleet, kind: &str, pool: &str, count: usize) -> Result<()> {
    let a = fleet.a();
    let mut held: Vec<(std::net::IpAddr, String)> = a
        .addresses()
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|x| x.spec.pool_ref.kind == kind && x.spec.pool_ref.name == pool)
        .filter_map(|x| Some((x.spec.address.parse().ok()?, x.metadata.name?)))
        .collect();
    held.sort();
    let victims: Vec<(std::net::IpAddr, String)> = held.into_iter().take(count).collect();
    for (_, name) in &victims {
        a.delete_claim(name).await?;
    }
    a.eventually("the deleted claims and their addresses are gone", SETTLE, || async {
        let mut gone = true;
        for (_, name) in &victims {
            gone &= a.claims().get_opt(name).await.unwrap().is_none()
                && a.addresses().get_opt(name).await.unwrap().is_none();
        }
        gone
    })
    .await?;
    let tag = format!("{pool}-again-{}", victims.len());
    let mut got = BTreeSet::new();
    for n in 0..victims.len() {
        let name = format!("{tag}-{n}");
        fleet.claim(0, kind, pool, &name).await?;
        got.insert(wait_addressed(a, &name).await?.parse::<std::net::IpAddr>()?);
    }
    let freed: BTreeSet<std::net::IpAddr> = victims.iter().map(|(ip, _)| *ip).collect();
    ensure!(got == freed, "the released addresses {freed:?} were not handed out again: got {got:?}");
    Ok(())
}

/// The runbook's last step: once every pool has been rewritten in `v1alpha2` (ferro-ipam's status
/// writes do that; a no-op replace does it for the rest), `v1alpha1` can leave `storedVersions`,
/// and a CRD without it is then accepted.
async fn storage_version_cleanup_lets_v1alpha1_go(plane: &ControlPlane, client: &Client) -> Result<()> {
    for name in crds::POOL_CRDS {
        let all = plane.kubectl_ok(&["get", name, "-A", "-o", "json"])?;
        let file = plane.dir.join(format!("{name}-rewrite.json"));
        std::fs::write(&file, all)?;
        plane.kubectl_ok(&["replace", "-f", &file.to_string_lossy()])?;
        plane.kubectl_ok(&[
            "patch",
            "crd",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"storedVersions":["v1alpha2"]}}"#,
        ])?;
        let stripped = crds::without(crds::manifest(plane, &crds::ours_file(name))?, "v1alpha1");
        crds::put(client, &stripped, "e2e", true).await?;
    }
    Ok(())
}
