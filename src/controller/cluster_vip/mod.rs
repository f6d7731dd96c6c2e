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
use kube::api::{DeleteParams, Patch};
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
use plan::{Observed, Step};

/// How soon a Cluster whose VIP claim is being served or released is looked at again.
const CLAIM_IN_FLIGHT: Duration = Duration::from_secs(2);

/// Label on the claims this controller makes, so that it watches only those.
pub const ROLE_LABEL: &str = "ferro-ipam.dev/role";
pub const ROLE: &str = "control-plane-vip";

/// The name of a Cluster's VIP claim.
pub fn claim_name(cluster: &str) -> String {
    format!("{cluster}-control-plane-vip")
}

/// The VIP claim of a Cluster: a purpose claim for "a VIP", owned by the Cluster.
fn desired_claim(cluster: &Cluster, ctx: &Context) -> Value {
    let name = cluster.name_any();
    let resource = ctx.kube.cluster_resource.clone().unwrap_or_else(|| CapiVersion::V1Beta2.cluster_resource());
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

/// The claim's address, once its `IPAddress` is written.
fn address_of(claim: &IPAddressClaim, ctx: &Context) -> Option<IpAddr> {
    let name = claim.status.as_ref()?.address_ref.as_ref()?.name.clone();
    let address = ctx.cached_address(&claim.namespace().unwrap_or_default(), &name)?;
    address.spec.address.parse().ok()
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

/// Reconciles one Cluster's control-plane VIP.
pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = claim_name(&cluster.name_any());
    let claim = ctx.cached_claim(&namespace, &name);
    // A claim of that name that is not this Cluster's VIP claim is never touched.
    let claim = match claim {
        Some(found) if !is_vip_claim_of(&found, &cluster) => {
            if cluster.metadata.deletion_timestamp.is_none() && cluster.labels().contains_key(CONTROL_PLANE_VIP_LABEL) {
                let note = format!(
                    "IPAddressClaim {name} exists and is not this Cluster's VIP claim; delete or rename it to get a control-plane VIP"
                );
                let resource =
                    ctx.kube.cluster_resource.clone().unwrap_or_else(|| CapiVersion::V1Beta2.cluster_resource());
                ctx.publish(cluster.as_ref(), &resource, true, "ControlPlaneVIPClaimNameTaken", note).await;
                return Ok(Action::await_change());
            }
            None
        }
        other => other,
    };
    let address = claim.as_deref().and_then(|c| address_of(c, &ctx));
    let step = plan::plan(&Observed { cluster: &cluster, claim: claim.as_deref(), address });
    let resource = ctx.kube.cluster_resource.clone().unwrap_or_else(|| CapiVersion::V1Beta2.cluster_resource());
    match step {
        Step::Nothing(why) => {
            debug!(cluster = %cluster.name_any(), %why, "control-plane VIP: nothing to do");
            // Waiting on the claim, whose changes arrive through another watch than the store
            // read here: look again shortly rather than miss the last one.
            let in_flight =
                claim.as_ref().is_some_and(|c| c.metadata.deletion_timestamp.is_some() || address.is_none());
            if in_flight && !cluster_is_paused(&cluster) {
                return Ok(Action::requeue(CLAIM_IN_FLIGHT));
            }
        }
        Step::BadLabel(message) => {
            ctx.publish(cluster.as_ref(), &resource, true, "InvalidControlPlaneVIPLabel", message).await;
        }
        Step::AddFinalizer => {
            if let Some(patch) = finalizers::with_finalizer(cluster.as_ref(), CONTROL_PLANE_VIP_FINALIZER) {
                patch_cluster(&ctx, &cluster, &patch, "adding the control-plane VIP finalizer").await?;
            }
        }
        Step::CreateClaim => {
            let desired: IPAddressClaim = serde_json::from_value(desired_claim(&cluster, &ctx))
                .map_err(|e| Error::Invalid(format!("building the VIP claim {namespace}/{name}: {e}")))?;
            match ctx.claim_api(&namespace).create(&super::create_params(), &desired).await {
                Ok(_) => info!(cluster = %cluster.name_any(), claim = %name, "asked for a control-plane VIP"),
                Err(e) if status_code(&e) == Some(409) => {}
                Err(e) => return Err(Error::kube(format!("creating IPAddressClaim {namespace}/{name}"), e)),
            }
        }
        Step::WriteEndpoint { host, port } => {
            let patch = json!({
                "metadata": { "resourceVersion": cluster.resource_version() },
                "spec": { "controlPlaneEndpoint": { "host": host, "port": port } },
            });
            patch_cluster(&ctx, &cluster, &patch, "writing the control-plane endpoint").await?;
            info!(cluster = %cluster.name_any(), %host, port, "control-plane endpoint written");
            let note = format!("spec.controlPlaneEndpoint is {host}:{port}, from IPAddressClaim {name}");
            ctx.publish(cluster.as_ref(), &resource, false, "ControlPlaneVIPAssigned", note).await;
        }
        Step::DeleteClaim(why) => {
            match ctx.claim_api(&namespace).delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => return Err(Error::kube(format!("deleting IPAddressClaim {namespace}/{name}"), e)),
            }
            info!(cluster = %cluster.name_any(), claim = %name, %why, "releasing the control-plane VIP");
            let note = format!("releasing IPAddressClaim {name}: {why}");
            ctx.publish(cluster.as_ref(), &resource, false, "ControlPlaneVIPReleased", note).await;
        }
        Step::DropFinalizer => {
            if let Some(patch) = finalizers::without_finalizer(cluster.as_ref(), CONTROL_PLANE_VIP_FINALIZER) {
                match patch_cluster(&ctx, &cluster, &patch, "dropping the control-plane VIP finalizer").await {
                    Err(Error::Kube { source, .. }) if status_code(&source) == Some(404) => {}
                    other => other?,
                }
            }
        }
    }
    Ok(Action::await_change())
}
