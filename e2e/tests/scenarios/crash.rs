//! Crashes: the provider killed with SIGKILL, again and again, in the middle of a storm of claims.

use std::collections::BTreeMap;
use std::time::Duration;

use ferro_ipam_e2e::invariants;
use ferro_ipam_e2e::objects::Scope;
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::ListParams;
use serde_json::json;

const CLAIMS: usize = 500;
/// Each life is killed once it has written this many more addresses than the last one left.
const PROGRESS: usize = 25;
/// Lives killed at most, looking for a kill that lands while writes are in flight.
const MOST_KILLS: usize = 6;

/// Creates `count` claims named `<prefix>-<n>` on `pool`, 32 requests at a time.
async fn storm(s: &Scope, prefix: &str, pool: &str, count: usize) {
    futures::stream::iter(0..count)
        .map(|n| async move { s.claim(&format!("{prefix}-{n}"), "InClusterIPPool", pool).await })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("creating the claims");
}

/// What a kill left behind.
struct Kill {
    /// Every `IPAddress` there was, by (namespace, name).
    addresses: BTreeMap<(String, String), String>,
    /// Claims whose `IPAddress` was written but whose status was not: writes cut in the middle.
    in_flight: Vec<String>,
    /// Claims that had their status.
    served: usize,
}

impl Kill {
    async fn look(s: &Scope) -> Kill {
        let addresses = invariants::addresses(&s.client, &[&s.ns]).await.unwrap();
        let claims = s.claims().list(&ListParams::default()).await.unwrap().items;
        let has_status = |c: &ferro_ipam::api::capi::IPAddressClaim| {
            c.status.as_ref().and_then(|st| st.address_ref.as_ref()).is_some_and(|r| !r.name.is_empty())
        };
        let in_flight = claims
            .iter()
            .filter(|c| !has_status(c) && addresses.contains_key(&(s.ns.clone(), c.name_any())))
            .map(ResourceExt::name_any)
            .collect();
        Kill { addresses, in_flight, served: claims.iter().filter(|c| has_status(c)).count() }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_in_the_middle_of_500_claims_loses_nothing_and_duplicates_nothing() {
    let s = Scope::new("sigkill-storm").await;
    s.pool("a", json!({"addresses": ["10.40.0.0/23"], "prefix": 23, "gateway": "10.40.0.1"})).await.unwrap();
    s.pool("b", json!({"addresses": ["fd00:40::/120"], "prefix": 120})).await.unwrap();
    let mut provider = s.provider();
    futures::join!(storm(&s, "a", "a", 300), storm(&s, "b", "b", 200));

    // Each life works until it has written some addresses, and is killed. Until a kill has cut
    // writes in the middle (an IPAddress without its claim's status), another life follows.
    let mut kills: Vec<Kill> = Vec::new();
    while kills.len() < 2 || (kills.len() < MOST_KILLS && kills.iter().all(|k| k.in_flight.is_empty())) {
        let before = kills.last().map_or(0, |k| k.addresses.len());
        s.eventually("the provider writes more addresses", Duration::from_secs(60), || async {
            s.addresses().list(&ListParams::default()).await.unwrap().items.len() >= before + PROGRESS
        })
        .await
        .unwrap();
        provider.kill();
        let kill = Kill::look(&s).await;
        let n = kills.len() + 1;
        assert!(kill.served < CLAIMS, "kill {n} came after every claim was served: it hit nothing");
        eprintln!(
            "kill {n}: {} addresses, {} claims served, {} writes in flight",
            kill.addresses.len(),
            kill.served,
            kill.in_flight.len()
        );
        kills.push(kill);
        provider = s.provider();
    }
    assert!(
        kills.iter().any(|k| !k.in_flight.is_empty()),
        "none of {} kills landed while an IPAddress waited for its claim's status",
        kills.len()
    );

    // The last life finishes. Nothing present at any kill is renumbered or lost: looked at all
    // along the way, so that a renumbering shows as such even if the work then stalls.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        // Claims first: a claim Ready now has its IPAddress in the listing that follows.
        let ready = s.ready_claims().await;
        let now = invariants::addresses(&s.client, &[&s.ns]).await.unwrap();
        for (n, kill) in kills.iter().enumerate() {
            let changed = invariants::changed_since(&kill.addresses, &now);
            assert!(changed.is_empty(), "after kill {}: {changed:#?}", n + 1);
        }
        if ready == CLAIMS {
            assert_eq!(now.len(), CLAIMS, "exactly one address per claim");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{ready} of {CLAIMS} claims Ready after 180 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    invariants::check(&s.client, &[&s.ns]).await.unwrap();
}
