//! The control-plane VIP controller: a `Cluster` labelled `ferro-ipam.dev/control-plane-vip`
//! with no `spec.controlPlaneEndpoint.host` gets an `IPAddressClaim` for "a VIP", owned by the
//! Cluster; its address becomes the endpoint. Load -> plan (pure, `plan.rs`) -> one write.

#[cfg(test)]
mod api_tests;
mod plan;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{ApiResource, DeleteParams, Patch, Preconditions};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tracing::{debug, info};

use crate::api::CapiVersion;
use crate::api::capi::{Cluster, IPAddressClaim};
use crate::api::keys::{
    CLUSTER_NAME_LABEL, CONTROL_PLANE_VIP_FINALIZER, CONTROL_PLANE_VIP_LABEL, GLOBAL_IN_CLUSTER_IP_POOL, IPAM_GROUP,
    VIPS_LABEL, WATCH_FILTER_LABEL,
};

use super::context::Context;
use super::error::{Error, Result, status_code};
use super::finalizers;
use crate::api::capi::cluster_is_paused;
use plan::{Observed, Step, VipAddress};

/// How soon a Cluster whose VIP claim is being served or released is looked at again.
const CLAIM_IN_FLIGHT: Duration = Duration::from_secs(2);

/// Label on the claims this controller makes, so that it watches only those.
pub const ROLE_LABEL: &str = "ferro-ipam.dev/role";
pub const ROLE: &str = "control-plane-vip";

/// The name of a Cluster's VIP claim.
pub fn claim_name(cluster: &str) -> String {
    format!("{cluster}-control-plane-vip")
}

/// The served `Cluster` resource; v1beta2's when none is served.
fn cluster_resource(ctx: &Context) -> ApiResource {
    ctx.kube.cluster_resource.clone().unwrap_or_else(|| CapiVersion::V1Beta2.cluster_resource())
}

/// The VIP claim of a Cluster: a purpose claim for "a VIP", owned by the Cluster.
fn desired_claim(cluster: &Cluster, ctx: &Context) -> Value {
    let name = cluster.name_any();
    let resource = cluster_resource(ctx);
    let mut labels = json!({ CLUSTER_NAME_LABEL: name, ROLE_LABEL: ROLE });
    // An instance with --watch-filter serves only claims carrying its filter: keep the Cluster's.
    if let Some(filter) = cluster.labels().get(WATCH_FILTER_LABEL) {
        labels[WATCH_FILTER_LABEL] = json!(filter);
    }
    let mut spec = json!({
        "poolRef": { "apiGroup": IPAM_GROUP, "kind": GLOBAL_IN_CLUSTER_IP_POOL, "name": VIPS_LABEL },
    });
    if ctx.kube.capi == CapiVersion::V1Beta2 {
        spec["clusterName"] = json!(name);
    }
    json!({
        "apiVersion": ctx.kube.claim_resource.api_version,
        "kind": ctx.kube.claim_resource.kind,
        "metadata": {
            "name": claim_name(&name),
            "namespace": cluster.namespace(),
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": resource.api_version,
                "kind": resource.kind,
                "name": name,
                "uid": cluster.uid(),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// Whether a claim is the VIP claim ferro-ipam made for this Cluster: labelled so, and owned
/// by the Cluster (by UID).
fn is_vip_claim_of(claim: &IPAddressClaim, cluster: &Cluster) -> bool {
    claim.labels().get(ROLE_LABEL).map(String::as_str) == Some(ROLE)
        && claim.owner_references().iter().any(|o| Some(&o.uid) == cluster.metadata.uid.as_ref())
}

/// What the complete address cache says of the claim's address. An `IPAddress` its status
/// names but the cache does not hold, or one that does not name the claim or records no
/// address, is unseen: unknown, never absent.
fn address_of(claim: &IPAddressClaim, ctx: &Context) -> VipAddress {
    let Some(name) = claim.status.as_ref().and_then(|s| s.address_ref.as_ref()).map(|r| r.name.clone()) else {
        return VipAddress::Pending;
    };
    if name.is_empty() {
        return VipAddress::Pending;
    }
    let cached = ctx.cached_address(&claim.namespace().unwrap_or_default(), &name);
    let known = cached
        .filter(|a| a.spec.claim_ref.name == claim.name_any())
        .and_then(|a| a.spec.address.parse::<IpAddr>().ok());
    known.map_or(VipAddress::Unseen, VipAddress::Known)
}

async fn patch_cluster(ctx: &Context, cluster: &Cluster, patch: &Value, what: &str) -> Result<()> {
    let (Some(resource), Some(namespace)) = (&ctx.kube.cluster_resource, cluster.namespace()) else {
        return Ok(());
    };
    kube::Api::<Cluster>::namespaced_with(ctx.kube.client.clone(), &namespace, resource)
        .patch(&cluster.name_any(), &super::write_params(), &Patch::Merge(patch))
        .await
        .map_err(|e| Error::kube(format!("{what} of Cluster {namespace}/{}", cluster.name_any()), e))?;
    Ok(())
}

/// Reconciles one Cluster's control-plane VIP: load, plan, carry the step out. Nothing is
/// judged before the index is complete: until then the address cache may not hold the VIP
/// claim's `IPAddress` yet.
pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action> {
    ctx.index.wait_ready().await;
    let vip = Vip::new(&cluster, &ctx);
    let claim = match vip.load_claim() {
        VipClaim::Claim(claim) => claim,
        VipClaim::NameTaken => {
            vip.say_name_taken().await;
            return Ok(Action::await_change());
        }
    };
    let address = claim.as_deref().map_or(VipAddress::Pending, |c| address_of(c, &ctx));
    let step = plan::plan(&Observed { cluster: &cluster, claim: claim.as_deref(), address });
    // A claim being served or released changes through another watch than the store read here.
    let claim_in_flight = claim
        .as_ref()
        .is_some_and(|c| c.metadata.deletion_timestamp.is_some() || !matches!(address, VipAddress::Known(_)));
    vip.carry_out(step, claim.as_deref(), claim_in_flight).await
}

/// The Cluster's VIP claim as the cache has it.
enum VipClaim {
    /// The Cluster's VIP claim, or none.
    Claim(Option<Arc<IPAddressClaim>>),
    /// A claim that is not this Cluster's VIP claim has its name, and the Cluster asks for a VIP.
    NameTaken,
}

/// One Cluster, and the name of its VIP claim, as the steps of a reconcile need them.
struct Vip<'a> {
    cluster: &'a Cluster,
    ctx: &'a Context,
    namespace: String,
    /// The VIP claim's name.
    name: String,
}

impl<'a> Vip<'a> {
    fn new(cluster: &'a Cluster, ctx: &'a Context) -> Self {
        Vip { cluster, ctx, namespace: cluster.namespace().unwrap_or_default(), name: claim_name(&cluster.name_any()) }
    }

    /// The VIP claim. A claim of that name that is not this Cluster's VIP claim is never
    /// touched: it counts as none, and while the Cluster asks for a VIP it is reported.
    fn load_claim(&self) -> VipClaim {
        match self.ctx.cached_claim(&self.namespace, &self.name) {
            Some(found) if !is_vip_claim_of(&found, self.cluster) => {
                let asks = self.cluster.metadata.deletion_timestamp.is_none()
                    && self.cluster.labels().contains_key(CONTROL_PLANE_VIP_LABEL);
                if asks { VipClaim::NameTaken } else { VipClaim::Claim(None) }
            }
            other => VipClaim::Claim(other),
        }
    }

    /// Warns that another claim has the VIP claim's name, which is the user's to free.
    async fn say_name_taken(&self) {
        let note = format!(
            "IPAddressClaim {} exists and is not this Cluster's VIP claim; delete or rename it to get a control-plane VIP",
            self.name
        );
        self.publish(true, "ControlPlaneVIPClaimNameTaken", note).await;
    }

    /// Carries out the plan's step, then waits for the next change (or, while the claim is in
    /// flight and there is nothing to do, looks again shortly).
    async fn carry_out(&self, step: Step, claim: Option<&IPAddressClaim>, claim_in_flight: bool) -> Result<Action> {
        match (step, claim) {
            (Step::Nothing(why), _) => return Ok(self.nothing_to_do(&why, claim_in_flight)),
            (Step::BadLabel(message), _) => self.publish(true, "InvalidControlPlaneVIPLabel", message).await,
            (Step::AddFinalizer, _) => self.add_finalizer().await?,
            (Step::CreateClaim, _) => self.create_claim().await?,
            (Step::WriteEndpoint { host, port }, _) => self.write_endpoint(&host, port).await?,
            (Step::DeleteClaim(why), Some(claim)) => self.delete_claim(claim, &why).await?,
            // The plan deletes only a claim it was shown.
            (Step::DeleteClaim(_), None) => {}
            (Step::DropFinalizer, _) => return self.drop_finalizer().await,
        }
        Ok(Action::await_change())
    }

    /// Nothing to write. Waiting on the claim, whose last change could be missed by the store
    /// read here, the Cluster is looked at again shortly (unless it is paused).
    fn nothing_to_do(&self, why: &str, claim_in_flight: bool) -> Action {
        debug!(cluster = %self.cluster.name_any(), %why, "control-plane VIP: nothing to do");
        if claim_in_flight && !cluster_is_paused(self.cluster) {
            Action::requeue(CLAIM_IN_FLIGHT)
        } else {
            Action::await_change()
        }
    }

    /// Adds the finalizer that keeps the Cluster until its VIP claim is released.
    async fn add_finalizer(&self) -> Result<()> {
        if let Some(patch) = finalizers::with_finalizer(self.cluster, CONTROL_PLANE_VIP_FINALIZER) {
            patch_cluster(self.ctx, self.cluster, &patch, "adding the control-plane VIP finalizer").await?;
        }
        Ok(())
    }

    /// Creates the VIP claim; one that exists already (409) is left as it is.
    async fn create_claim(&self) -> Result<()> {
        let (namespace, name) = (&self.namespace, &self.name);
        let desired: IPAddressClaim = serde_json::from_value(desired_claim(self.cluster, self.ctx))
            .map_err(|e| Error::Invalid(format!("building the VIP claim {namespace}/{name}: {e}")))?;
        match self.ctx.claim_api(namespace).create(&super::create_params(), &desired).await {
            Ok(_) => info!(cluster = %self.cluster.name_any(), claim = %name, "asked for a control-plane VIP"),
            Err(e) if status_code(&e) == Some(409) => {}
            Err(e) => return Err(Error::kube(format!("creating IPAddressClaim {namespace}/{name}"), e)),
        }
        Ok(())
    }

    /// Writes the claim's address as the Cluster's control-plane endpoint.
    async fn write_endpoint(&self, host: &str, port: i32) -> Result<()> {
        let patch = json!({
            "metadata": { "resourceVersion": self.cluster.resource_version() },
            "spec": { "controlPlaneEndpoint": { "host": host, "port": port } },
        });
        patch_cluster(self.ctx, self.cluster, &patch, "writing the control-plane endpoint").await?;
        info!(cluster = %self.cluster.name_any(), %host, port, "control-plane endpoint written");
        let note = format!("spec.controlPlaneEndpoint is {host}:{port}, from IPAddressClaim {}", self.name);
        self.publish(false, "ControlPlaneVIPAssigned", note).await;
        Ok(())
    }

    /// Deletes the VIP claim judged here, that one only (by UID), which releases its address.
    /// One already gone (404) is fine; a newer claim of its name (409) is looked at again.
    async fn delete_claim(&self, claim: &IPAddressClaim, why: &str) -> Result<()> {
        let (namespace, name) = (&self.namespace, &self.name);
        let exactly = Preconditions { uid: claim.metadata.uid.clone(), resource_version: None };
        let params = DeleteParams { preconditions: Some(exactly), ..DeleteParams::default() };
        self.ctx.kube.fence.wait_open().await;
        match self.ctx.claim_api(namespace).delete(name, &params).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => return Err(Error::kube(format!("deleting IPAddressClaim {namespace}/{name}"), e)),
        }
        info!(cluster = %self.cluster.name_any(), claim = %name, %why, "releasing the control-plane VIP");
        self.publish(false, "ControlPlaneVIPReleased", format!("releasing IPAddressClaim {name}: {why}")).await;
        Ok(())
    }

    /// Drops the finalizer once the VIP claim is gone, as the API server says, not the cache: a
    /// claim not listed yet is not absent. A Cluster already gone (404) is fine.
    async fn drop_finalizer(&self) -> Result<Action> {
        let (namespace, name) = (&self.namespace, &self.name);
        let live = self
            .ctx
            .claim_api(namespace)
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("reading IPAddressClaim {namespace}/{name}"), e))?;
        if live.is_some_and(|claim| is_vip_claim_of(&claim, self.cluster)) {
            debug!(cluster = %self.cluster.name_any(), claim = %name, "the VIP claim exists still; the finalizer stays");
            return Ok(Action::requeue(CLAIM_IN_FLIGHT));
        }
        if let Some(patch) = finalizers::without_finalizer(self.cluster, CONTROL_PLANE_VIP_FINALIZER) {
            match patch_cluster(self.ctx, self.cluster, &patch, "dropping the control-plane VIP finalizer").await {
                Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) => {}
                other => other?,
            }
        }
        Ok(Action::await_change())
    }

    /// Says something about the Cluster as an Event on it.
    async fn publish(&self, warning: bool, reason: &str, note: String) {
        self.ctx.publish(self.cluster, &cluster_resource(self.ctx), warning, reason, note).await;
    }
}
