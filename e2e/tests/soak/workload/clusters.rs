//! Clusters that ask for a control-plane VIP (client required), made and deleted while the
//! chaos lasts: a new one every 2 to 6 s while fewer than six are alive, each living 10 to
//! 40 s, one in four asking for port 8443 rather than 6443. A deletion waits for the Cluster to
//! go: ferro-ipam deletes its VIP claim, waits for the address to be released, then drops its
//! finalizer. A Cluster counts as alive until it is gone.
//!
//! Each Cluster's pause, life and port are drawn in order from the seed, whatever the faults do
//! to the timing. A create the API server refuses is not retried (the Cluster's life goes on as
//! if it had been made, so that one whose create landed after all is deleted too); a delete it
//! refuses is tried again until it is taken. When the chaos ends, the Clusters alive stay, and a
//! deletion still waited for is left to the liveness check.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ferro_ipam::api::CapiVersion;
use ferro_ipam::api::keys::{CONTROL_PLANE_VIP_LABEL, PROVIDER_LABEL};
use ferro_ipam_e2e::objects::{Scope, capi, cluster_api_version};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::Counters;
use crate::rng::Rng;
use crate::timeline::Timeline;

/// The most Clusters alive (made and not yet gone) at once.
const MOST: usize = 6;
/// Between two tries of a delete the API server refused, and two looks for a Cluster to go.
const AGAIN: Duration = Duration::from_millis(500);
/// How long a deletion is waited for before the timeline says the Cluster is slow to go.
const PATIENCE: Duration = Duration::from_secs(60);

/// The made-up infrastructure provider of the soak's Clusters: a CRD of its cluster kind,
/// labelled with the provider's name as clusterctl labels a provider's CRDs. The VIP pool serves
/// every provider (`cluster-api-allow-all-providers`), so a failed lookup of it changes nothing.
const INFRA_GROUP: &str = "infrastructure.soak.ferro-ipam.dev";
const INFRA_KIND: &str = "SoakCluster";
const INFRA_PROVIDER: &str = "infrastructure-soak";

/// Installs the infrastructure provider's cluster kind.
pub async fn install_infrastructure(a: &Scope) {
    let plural = format!("{}s", INFRA_KIND.to_lowercase());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{INFRA_GROUP}"), "labels": {PROVIDER_LABEL: INFRA_PROVIDER}},
        "spec": {
            "group": INFRA_GROUP, "scope": "Namespaced",
            "names": {"kind": INFRA_KIND, "plural": plural, "singular": INFRA_KIND.to_lowercase(),
                "listKind": format!("{INFRA_KIND}List")},
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .expect("a CRD");
    Api::<CustomResourceDefinition>::all(a.client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("creating the soak's infrastructure kind");
}

/// A Cluster's `spec.infrastructureRef` to the soak's kind, at the contract under test.
fn infrastructure_ref(name: &str) -> Value {
    match capi() {
        CapiVersion::V1Beta2 => json!({"apiGroup": INFRA_GROUP, "kind": INFRA_KIND, "name": name}),
        CapiVersion::V1Beta1 => {
            json!({"apiVersion": format!("{INFRA_GROUP}/v1beta1"), "kind": INFRA_KIND, "name": name})
        }
    }
}

/// One Cluster of the plan: its name, what its opt-in label says, and how long it lives.
struct Planned {
    name: String,
    label: &'static str,
    life: Duration,
}

pub struct VipClusters {
    pub a: Arc<Scope>,
    pub counters: Arc<Counters>,
    pub timeline: Timeline,
}

impl VipClusters {
    pub async fn run(self: Arc<Self>, mut rng: Rng, mut stop: watch::Receiver<bool>) {
        let mut alive: JoinSet<()> = JoinSet::new();
        let mut n = 0usize;
        while !*stop.borrow() {
            n += 1;
            let pause = rng.seconds(2.0, 6.0);
            let label = if rng.percent(25) { "8443" } else { "true" };
            let planned = Planned { name: format!("vip-{n}"), label, life: rng.seconds(10.0, 40.0) };
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep(pause) => {}
            }
            while alive.len() >= MOST {
                tokio::select! {
                    _ = stop.changed() => return,
                    _ = alive.join_next() => {}
                }
            }
            alive.spawn(self.clone().live(planned, stop.clone()));
        }
    }

    /// One Cluster's life: made, alive for its while, deleted, and gone.
    async fn live(self: Arc<Self>, planned: Planned, mut stop: watch::Receiver<bool>) {
        self.create(&planned).await;
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(planned.life) => {}
        }
        if self.delete(&planned.name, &mut stop).await != Some(true) {
            return;
        }
        if let Some(waited) = self.gone(&planned.name, &mut stop).await {
            self.counters.vip_clusters_gone.fetch_add(1, Ordering::SeqCst);
            self.timeline.note(format!(
                "Cluster {} gone {:.1} s after its deletion",
                planned.name,
                waited.as_secs_f64()
            ));
        }
    }

    async fn create(&self, planned: &Planned) {
        let name = &planned.name;
        let cluster = json!({
            "apiVersion": cluster_api_version(), "kind": "Cluster",
            "metadata": {"name": name, "labels": {CONTROL_PLANE_VIP_LABEL: planned.label}},
            "spec": {"infrastructureRef": infrastructure_ref(name)},
        });
        match self.a.create(cluster).await {
            Ok(_) => {
                self.counters.vip_clusters.fetch_add(1, Ordering::SeqCst);
                self.timeline.note(format!("Cluster {name} made, asking for a VIP ({})", planned.label));
            }
            Err(_) => {
                self.counters.refused.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    fn clusters(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.a.client.clone(), &self.a.ns, &capi().cluster_resource())
    }

    /// Deletes the Cluster, trying again until the API server takes it: whether there was one
    /// to delete (none: its create was refused), or None when stopped first.
    async fn delete(&self, name: &str, stop: &mut watch::Receiver<bool>) -> Option<bool> {
        loop {
            match self.clusters().delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    self.counters.vip_clusters_deleted.fetch_add(1, Ordering::SeqCst);
                    return Some(true);
                }
                Err(kube::Error::Api(status)) if status.code == 404 => return Some(false),
                Err(_) => {
                    self.counters.refused.fetch_add(1, Ordering::SeqCst);
                }
            }
            tokio::select! {
                _ = stop.changed() => return None,
                _ = tokio::time::sleep(AGAIN) => {}
            }
        }
    }

    /// Waits until the Cluster is gone; how long that took, or None when stopped first. Past
    /// [`PATIENCE`] the timeline says so, and the wait goes on.
    async fn gone(&self, name: &str, stop: &mut watch::Receiver<bool>) -> Option<Duration> {
        let began = Instant::now();
        let mut said = false;
        loop {
            if let Ok(None) = self.clusters().get_opt(name).await {
                return Some(began.elapsed());
            }
            if !said && began.elapsed() > PATIENCE {
                said = true;
                self.timeline.note(format!("Cluster {name} is not gone {} s after its deletion", PATIENCE.as_secs()));
            }
            tokio::select! {
                _ = stop.changed() => return None,
                _ = tokio::time::sleep(AGAIN) => {}
            }
        }
    }
}
