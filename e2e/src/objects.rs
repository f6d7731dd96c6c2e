//! Creating and reading the objects of a scenario, each scenario in its own namespace.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use ferro_ipam::api::capi::{IPAddress, IPAddressClaim};
use ferro_ipam::api::{
    GlobalInClusterIPPool, GlobalInClusterPrefixPool, IPPoolStatus, InClusterIPPool, InClusterPrefixPool,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

pub use crate::contract::{capi, cluster_api_version, ipam_api_version};
use crate::plane::ControlPlane;
use crate::provider::Provider;

/// One scenario's namespace and client.
///
/// Scenarios run in parallel on one control plane, each with its own ferro-ipam. A scenario
/// that stays in its namespace runs the provider with `--namespace`; one that spans namespaces
/// or uses global pools runs it with `--watch-filter` and labels its claims, pools and clusters.
pub struct Scope {
    pub plane: &'static ControlPlane,
    pub client: Client,
    pub ns: String,
    /// The watch-filter value, for a scenario that spans namespaces.
    pub filter: Option<String>,
}

fn unique(hint: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let hint: String =
        hint.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).take(40).collect();
    format!("{hint}-{}-{n}", std::process::id() % 10000)
}

impl Scope {
    /// A fresh namespace on the shared control plane.
    pub async fn new(hint: &str) -> Scope {
        Scope::on(ControlPlane::shared(), hint).await
    }

    /// A fresh namespace on `plane` (a plane of the test's own, see [`ControlPlane::leak`]).
    pub async fn on(plane: &'static ControlPlane, hint: &str) -> Scope {
        let client = plane.client().await;
        let ns = unique(hint);
        Api::<Namespace>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a namespace"),
            )
            .await
            .expect("creating the scenario's namespace");
        Scope { plane, client, ns, filter: None }
    }

    /// A fresh namespace whose scenario may span namespaces and global pools: its provider sees
    /// every namespace, filtered by the `cluster.x-k8s.io/watch-filter` label.
    pub async fn wide(hint: &str) -> Scope {
        let mut scope = Scope::new(hint).await;
        scope.filter = Some(scope.ns.clone());
        scope
    }

    /// Another namespace of the same scenario (same filter, same provider).
    pub async fn sibling(&self, hint: &str) -> Scope {
        let mut other = Scope::new(hint).await;
        other.filter = self.filter.clone();
        other
    }

    /// A unique name for a cluster-scoped object of this scenario.
    pub fn global_name(&self, name: &str) -> String {
        format!("{}-{name}", self.ns)
    }

    /// ferro-ipam for this scenario: this namespace only, or everything with the scenario's label.
    pub fn provider(&self) -> Provider {
        Provider::start(self.plane, &self.provider_args()).expect("starting ferro-ipam")
    }

    /// The flags that scope a provider to this scenario.
    pub fn provider_args(&self) -> Vec<&str> {
        match &self.filter {
            Some(filter) => vec!["--watch-filter", filter],
            None => vec!["--namespace", &self.ns],
        }
    }

    fn dynamic(&self, resource: &ApiResource, namespaced: bool) -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(self.client.clone(), &self.ns, resource)
        } else {
            Api::all_with(self.client.clone(), resource)
        }
    }

    /// Creates any object from JSON (apiVersion and kind included) in this namespace.
    pub async fn create(&self, object: Value) -> Result<DynamicObject> {
        let api_version = object["apiVersion"].as_str().context("apiVersion")?.to_owned();
        let kind = object["kind"].as_str().context("kind")?.to_owned();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version.as_str()));
        let namespaced = !matches!(
            kind.as_str(),
            "GlobalInClusterIPPool" | "GlobalInClusterPrefixPool" | "Namespace" | "CustomResourceDefinition"
        );
        let resource = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(group, version, &kind));
        let mut object = object;
        if let Some(filter) = &self.filter
            && matches!(
                kind.as_str(),
                "IPAddressClaim"
                    | "InClusterIPPool"
                    | "GlobalInClusterIPPool"
                    | "InClusterPrefixPool"
                    | "GlobalInClusterPrefixPool"
                    | "Cluster"
            )
        {
            object["metadata"]["labels"][ferro_ipam::api::keys::WATCH_FILTER_LABEL] = json!(filter);
        }
        let object: DynamicObject = serde_json::from_value(object)?;
        Ok(self.dynamic(&resource, namespaced).create(&PostParams::default(), &object).await?)
    }

    /// An `InClusterIPPool` with `spec` in this namespace.
    pub async fn pool(&self, name: &str, spec: Value) -> Result<()> {
        self.create(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool", "metadata": {"name": name}, "spec": spec})).await.map(drop)
    }

    /// A `GlobalInClusterIPPool` named `name` (use [`Scope::global_name`] for uniqueness).
    pub async fn global_pool(&self, name: &str, spec: Value) -> Result<()> {
        self.create(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool", "metadata": {"name": name}, "spec": spec})).await.map(drop)
    }

    /// An `InClusterPrefixPool` with `spec` in this namespace.
    pub async fn prefix_pool(&self, name: &str, spec: Value) -> Result<()> {
        self.create(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterPrefixPool", "metadata": {"name": name}, "spec": spec})).await.map(drop)
    }

    /// A `GlobalInClusterPrefixPool` named `name` (use [`Scope::global_name`] for uniqueness).
    pub async fn global_prefix_pool(&self, name: &str, spec: Value) -> Result<()> {
        self.create(json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterPrefixPool", "metadata": {"name": name}, "spec": spec})).await.map(drop)
    }

    pub fn prefix_pools(&self) -> Api<InClusterPrefixPool> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn global_prefix_pools(&self) -> Api<GlobalInClusterPrefixPool> {
        Api::all(self.client.clone())
    }

    /// A claim (at the contract's version) on a pool of `kind` named `pool`.
    pub async fn claim(&self, name: &str, kind: &str, pool: &str) -> Result<()> {
        self.claim_with(name, kind, pool, json!({})).await
    }

    /// A claim with extra metadata (labels, annotations, ownerReferences).
    pub async fn claim_with(&self, name: &str, kind: &str, pool: &str, metadata: Value) -> Result<()> {
        let mut meta = metadata;
        meta["name"] = json!(name);
        self.create(json!({
            "apiVersion": ipam_api_version(),
            "kind": "IPAddressClaim",
            "metadata": meta,
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": kind, "name": pool}},
        }))
        .await
        .map(drop)
    }

    /// An `IPAddress` made by hand (labelled so, see [`crate::invariants::HAND_MADE_LABEL`]),
    /// naming `claim` and the `InClusterIPPool` `pool`, holding `ip` with `prefix`.
    pub async fn hand_made_address(&self, claim: &str, pool: &str, ip: &str, prefix: u8) -> Result<()> {
        let pool_ref = json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": pool});
        let labels = json!({crate::invariants::HAND_MADE_LABEL: "true"});
        let spec = json!({"claimRef": {"name": claim}, "poolRef": pool_ref, "address": ip, "prefix": prefix});
        let metadata = json!({"name": claim, "labels": labels});
        let address =
            json!({"apiVersion": ipam_api_version(), "kind": "IPAddress", "metadata": metadata, "spec": spec});
        self.create(address).await.map(drop)
    }

    /// A Cluster (at the contract's version), paused or not.
    pub async fn cluster(&self, name: &str, paused: bool) -> Result<()> {
        self.create(json!({
            "apiVersion": cluster_api_version(),
            "kind": "Cluster",
            "metadata": {"name": name},
            "spec": {"paused": paused},
        }))
        .await
        .map(drop)
    }

    pub fn claims(&self) -> Api<IPAddressClaim> {
        Api::namespaced_with(self.client.clone(), &self.ns, &capi().claim_resource())
    }

    pub fn addresses(&self) -> Api<IPAddress> {
        Api::namespaced_with(self.client.clone(), &self.ns, &capi().address_resource())
    }

    pub fn pools(&self) -> Api<InClusterIPPool> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    pub fn global_pools(&self) -> Api<GlobalInClusterIPPool> {
        Api::all(self.client.clone())
    }

    /// `status.ipAddresses.used` of this namespace's pool `name`, once written.
    pub async fn pool_used(&self, name: &str) -> Option<i64> {
        self.pools().get(name).await.ok()?.status?.ip_addresses.map(|c| c.used)
    }

    /// `status.ipAddresses.used` of the global pool `name`, once written.
    pub async fn global_pool_used(&self, name: &str) -> Option<i64> {
        self.global_pools().get(name).await.ok()?.status?.ip_addresses.map(|c| c.used)
    }

    /// Merge-patches any object of this namespace by resource.
    pub async fn patch(&self, resource: &ApiResource, namespaced: bool, name: &str, patch: Value) -> Result<()> {
        self.dynamic(resource, namespaced).patch(name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        Ok(())
    }

    /// Deletes a claim (its finalizer lets ferro-ipam release the address first).
    pub async fn delete_claim(&self, name: &str) -> Result<()> {
        self.claims().delete(name, &DeleteParams::default()).await?;
        Ok(())
    }

    /// The `Ready` condition of a claim: (status, reason, message).
    pub async fn claim_ready(&self, name: &str) -> Option<(String, String, String)> {
        let claim = self.claims().get_opt(name).await.ok()??;
        let conditions = claim.status?.conditions;
        let ready = conditions.into_iter().find(|c| c.type_ == "Ready")?;
        Some((ready.status, ready.reason.unwrap_or_default(), ready.message.unwrap_or_default()))
    }

    /// Waits until a claim is Ready and returns its address.
    pub async fn wait_allocated(&self, name: &str, timeout: Duration) -> Result<IPAddress> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some((status, _, _)) = self.claim_ready(name).await
                && status == "True"
                && let Some(address) = self.addresses().get_opt(name).await?
            {
                return Ok(address);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(anyhow!(
                    "claim {}/{name} not Ready after {timeout:?}; condition: {:?}",
                    self.ns,
                    self.claim_ready(name).await
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the claim's `Ready` condition has `reason`.
    pub async fn wait_reason(&self, name: &str, reason: &str, timeout: Duration) -> Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some((_, r, message)) = self.claim_ready(name).await
                && r == reason
            {
                return Ok(message);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(anyhow!(
                    "claim {}/{name} never got reason {reason}; condition: {:?}",
                    self.ns,
                    self.claim_ready(name).await
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `check` holds, polling every 100 ms.
    pub async fn eventually<F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        while !check().await {
            if tokio::time::Instant::now() > deadline {
                return Err(anyhow!("{what}: not reached within {timeout:?}"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Checks for `timeout` that `check` keeps holding (for "nothing happens" assertions).
    pub async fn stays<F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if !check().await {
                return Err(anyhow!("{what}: no longer holds"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// The addresses of this namespace, by claim name.
    pub async fn address_map(&self) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(self
            .addresses()
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|a| (a.metadata.name.clone().unwrap_or_default(), a.spec.address))
            .collect())
    }
}

/// A `Ready` condition as (status, reason, message).
pub type Readiness = (String, String, String);

/// The `Ready` condition of a pool's status, either kind.
fn readiness(status: Option<IPPoolStatus>) -> Option<Readiness> {
    let ready = status?.conditions.into_iter().find(|c| c.type_ == "Ready")?;
    Some((ready.status, ready.reason, ready.message))
}

impl Scope {
    /// The `Ready` condition of an `InClusterIPPool` of this namespace.
    pub async fn pool_ready(&self, name: &str) -> Option<Readiness> {
        readiness(self.pools().get_opt(name).await.ok()??.status)
    }

    /// The `Ready` condition of the `GlobalInClusterIPPool` `name`.
    pub async fn global_pool_ready(&self, name: &str) -> Option<Readiness> {
        readiness(self.global_pools().get_opt(name).await.ok()??.status)
    }

    /// The Events (`events.k8s.io/v1`) of this namespace about the object `kind`/`name`, as
    /// (type, reason, note).
    pub async fn events_about(&self, kind: &str, name: &str) -> Result<Vec<(String, String, String)>> {
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(self.client.clone(), &self.ns);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
            })
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect())
    }

    /// Drops one finalizer from an object of this namespace, as the controller that put it there
    /// would; the others stay.
    pub async fn remove_finalizer(&self, resource: &ApiResource, name: &str, finalizer: &str) -> Result<()> {
        let api = self.dynamic(resource, true);
        for _ in 0..10 {
            let object = api.get(name).await?;
            let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
            let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
            if kept.len() == finalizers.len() {
                return Ok(());
            }
            let patch = json!({"metadata": {
                "resourceVersion": object.metadata.resource_version,
                "finalizers": kept,
            }});
            match api.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await {
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                other => return other.map(drop).map_err(Into::into),
            }
        }
        Err(anyhow!("{name}: finalizer {finalizer} kept conflicting"))
    }
}

impl Scope {
    /// How many claims of this namespace are `Ready=True`.
    pub async fn ready_claims(&self) -> usize {
        let claims = self.claims().list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
        claims
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .is_some_and(|st| st.conditions.iter().any(|k| k.type_ == "Ready" && k.status == "True"))
            })
            .count()
    }
}
