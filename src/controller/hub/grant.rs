//! The hub's side: each `AddressBlock` a spoke asks for is granted from the hub's pool, or
//! refused with a reason. A grant is a pipeline: the block's namespace must be a spoke's, its
//! pool shared; the index leases a free aligned block under the pool's lock (so no claim of
//! the hub and no other block can take an address of it); the status records it. A grant is
//! final: it is never changed or taken back while the object stands.

use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tracing::{debug, info};

use crate::allocator::Family;
use crate::api::hub::{AddressBlock, BlockFamily, SHARED_LABEL, SPOKE_LABEL};
use crate::controller::context::Context;
use crate::controller::error::{Error, Result};
use crate::feed::{block_holder, block_pool, granted};
use crate::index::{AllocError, PoolKey};

/// The condition a block's status carries.
pub const GRANTED: &str = "Granted";

/// How soon a refused block is looked at again: one that may pass by itself (no room yet), and
/// one that waits for someone to act (a label to set), which nothing else would wake.
const PASSING_RETRY: Duration = Duration::from_secs(15);
const LASTING_RETRY: Duration = Duration::from_secs(60);

/// Why a block is not granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
    /// Whether asking again later may succeed without anyone changing the object.
    pub passing: bool,
}

impl Refusal {
    fn lasting(reason: &'static str, message: String) -> Self {
        Refusal { reason, message, passing: false }
    }
}

/// What the hub is asked: which pool, family and block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ask {
    pub pool: PoolKey,
    pub family: Family,
    pub size: u32,
    pub requested: Option<IpNet>,
}

/// The checks before the index is asked (pure): the namespace's labels (None while not
/// listed), the pool's labels (None when the hub has no such pool).
pub fn vet(
    block: &AddressBlock,
    namespace_labels: Option<&std::collections::BTreeMap<String, String>>,
    pool_labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Ask, Refusal> {
    let namespace = block.namespace().unwrap_or_default();
    let Some(labels) = namespace_labels else {
        return Err(Refusal {
            reason: "NamespaceUnknown",
            message: format!("the hub has not listed Namespace {namespace} yet"),
            passing: true,
        });
    };
    if labels.get(SPOKE_LABEL).is_none_or(|s| s.is_empty()) {
        return Err(Refusal::lasting(
            "NotASpokeNamespace",
            format!(
                "Namespace {namespace} is not labelled {SPOKE_LABEL}: the hub's administrator labels each spoke's namespace with the spoke's name"
            ),
        ));
    }
    let Some(pool) = block_pool(block) else {
        return Err(Refusal::lasting(
            "PoolNotShared",
            format!("spec.pool: kind {} is not an IP pool kind", block.spec.pool.kind),
        ));
    };
    let Some(pool_labels) = pool_labels else {
        return Err(Refusal { reason: "PoolNotFound", message: format!("the hub has no {pool}"), passing: true });
    };
    if pool_labels.get(SHARED_LABEL).map(String::as_str) != Some("true") {
        return Err(Refusal::lasting(
            "PoolNotShared",
            format!(
                "{pool} is not labelled {SHARED_LABEL}: \"true\"; the hub's administrator shares a pool with spokes by labelling it"
            ),
        ));
    }
    let family = match block.spec.family {
        BlockFamily::IPv4 => Family::V4,
        BlockFamily::IPv6 => Family::V6,
    };
    let requested = match block.spec.cidr.as_deref() {
        None => None,
        Some(cidr) => Some(
            cidr.parse::<IpNet>()
                .map_err(|_| Refusal::lasting("InvalidBlock", format!("spec.cidr {cidr} is not a CIDR")))?,
        ),
    };
    Ok(Ask { pool, family, size: block.spec.size, requested })
}

/// Grants or refuses one block.
pub async fn reconcile(block: Arc<AddressBlock>, ctx: Arc<Context>) -> Result<Action> {
    if block.meta().deletion_timestamp.is_some() || granted(&block).is_some() {
        return Ok(Action::await_change());
    }
    if !ctx.index.is_ready() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let namespace = block.namespace().unwrap_or_default();
    let namespace_labels = ctx.namespace_labels(&namespace);
    let pool_labels = block_pool(&block).and_then(|pool| ctx.index.pool_facts(&pool)).map(|facts| facts.labels);
    let ask = match vet(&block, namespace_labels.as_ref(), pool_labels.as_ref()) {
        Ok(ask) => ask,
        Err(refusal) => return refuse(&ctx, &block, refusal).await,
    };
    let holder = block_holder(&block);
    match ctx.index.lease_block(&ask.pool, &holder, ask.family, ask.size, ask.requested) {
        Ok(cidr) => {
            if let Err(error) = write_grant(&ctx, &block, &ask, cidr).await {
                // Not recorded: the block is not the spoke's, so the addresses go back.
                ctx.index.drop_block(&ask.pool, &holder);
                return Err(error);
            }
            info!(block = %holder, %cidr, pool = %ask.pool, "granted an address block");
            Ok(Action::await_change())
        }
        Err(AllocError::Exhausted(family)) => {
            let message = format!("{} has no free aligned block of {} {family} addresses", ask.pool, ask.size);
            refuse(&ctx, &block, Refusal { reason: "PoolExhausted", message, passing: true }).await
        }
        Err(AllocError::PoolMissing) => {
            let message = format!("the hub has no {}", ask.pool);
            refuse(&ctx, &block, Refusal { reason: "PoolNotFound", message, passing: true }).await
        }
        Err(error) => refuse(&ctx, &block, Refusal::lasting("BlockNotFree", error.to_string())).await,
    }
}

fn condition(status: &str, reason: &str, message: String, ctx: &Context, block: &AddressBlock) -> Condition {
    Condition {
        type_: GRANTED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: crate::api::bounded::truncate(&message, crate::api::bounded::CONDITION_MESSAGE),
        last_transition_time: Time(ctx.kube.clock.now()),
        observed_generation: block.meta().generation,
    }
}

fn api(ctx: &Context, block: &AddressBlock) -> Api<AddressBlock> {
    Api::namespaced(ctx.kube.client.clone(), &block.namespace().unwrap_or_default())
}

/// Records the grant, only over the version read: a status someone wrote meanwhile wins.
async fn write_grant(ctx: &Context, block: &AddressBlock, ask: &Ask, cidr: IpNet) -> Result<()> {
    let settings = ctx.index.pool_spec(&ask.pool).and_then(|spec| spec.settings(ask.family));
    let (prefix, gateway) = settings.map_or((None, None), |(p, g)| (Some(p), g));
    let granted = condition("True", "Granted", format!("{cidr} of {} is the spoke's", ask.pool), ctx, block);
    let patch = json!({
        "metadata": { "resourceVersion": block.resource_version() },
        "status": { "cidr": cidr.to_string(), "prefix": prefix, "gateway": gateway, "conditions": [granted] },
    });
    api(ctx, block)
        .patch_status(&block.name_any(), &crate::controller::write_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("granting AddressBlock {}", block_holder(block)), e))?;
    Ok(())
}

/// Says why the block is not granted (once per reason), and when to look again.
async fn refuse(ctx: &Context, block: &AddressBlock, refusal: Refusal) -> Result<Action> {
    let again = Action::requeue(if refusal.passing { PASSING_RETRY } else { LASTING_RETRY });
    let current = block.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == GRANTED));
    if current.is_some_and(|c| c.reason == refusal.reason && c.message == refusal.message) {
        return Ok(again);
    }
    debug!(block = %block_holder(block), reason = refusal.reason, "refusing an address block");
    let refused = condition("False", refusal.reason, refusal.message.clone(), ctx, block);
    let patch = json!({
        "metadata": { "resourceVersion": block.resource_version() },
        "status": { "conditions": [refused] },
    });
    api(ctx, block)
        .patch_status(&block.name_any(), &crate::controller::write_params(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Error::kube(format!("refusing AddressBlock {}", block_holder(block)), e))?;
    ctx.publish(block, &(), true, refusal.reason, refusal.message).await;
    Ok(again)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::hub::{AddressBlockSpec, HubPoolReference};

    fn block(cidr: Option<&str>) -> AddressBlock {
        let mut block = AddressBlock::new(
            "b1",
            AddressBlockSpec {
                pool: HubPoolReference { kind: "GlobalInClusterIPPool".into(), name: "shared".into(), namespace: None },
                family: BlockFamily::IPv4,
                size: 16,
                cidr: cidr.map(str::to_owned),
                spoke_pool: String::new(),
            },
        );
        block.metadata.namespace = Some("spoke-a".into());
        block
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn only_a_spoke_namespace_leases_and_only_from_a_shared_pool() {
        let spoke = labels(&[(SPOKE_LABEL, "a")]);
        let shared = labels(&[(SHARED_LABEL, "true")]);
        let ask = vet(&block(None), Some(&spoke), Some(&shared)).expect("granted");
        assert_eq!(ask.pool, PoolKey::global("shared"));
        assert_eq!((ask.family, ask.size, ask.requested), (Family::V4, 16, None));

        let refused = vet(&block(None), Some(&labels(&[])), Some(&shared)).unwrap_err();
        assert_eq!(refused.reason, "NotASpokeNamespace");
        assert!(!refused.passing);
        let refused = vet(&block(None), Some(&spoke), Some(&labels(&[(SHARED_LABEL, "yes")]))).unwrap_err();
        assert_eq!(refused.reason, "PoolNotShared");
        let refused = vet(&block(None), Some(&spoke), None).unwrap_err();
        assert!(refused.passing && refused.reason == "PoolNotFound", "{refused:?}");
        assert!(
            vet(&block(None), None, Some(&shared)).unwrap_err().passing,
            "an unlisted namespace is unknown, not refused"
        );
    }

    #[test]
    fn a_requested_block_must_be_a_cidr() {
        let spoke = labels(&[(SPOKE_LABEL, "a")]);
        let shared = labels(&[(SHARED_LABEL, "true")]);
        let ask = vet(&block(Some("10.0.0.16/28")), Some(&spoke), Some(&shared)).expect("granted");
        assert_eq!(ask.requested, Some("10.0.0.16/28".parse().unwrap()));
        assert_eq!(vet(&block(Some("10.0.0.16")), Some(&spoke), Some(&shared)).unwrap_err().reason, "InvalidBlock");
    }
}
