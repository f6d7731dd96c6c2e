//! A claim as its steps see it: loaded once per reconcile (who holds, what it targets, its
//! Cluster, its pool), and the pool that serves it as the index knows it. The one place a
//! claim takes an address is here.

use std::net::IpAddr;
use std::sync::Arc;

use kube::ResourceExt;

use crate::allocator::Family;
use crate::api::capi::{Cluster, IPAddressClaim, PoolReference};
use crate::api::conditions::ClaimReason;
use crate::index::{AllocError, HolderKey, PoolFacts, PoolKey, PoolSpec};
use crate::metrics::PoolLabels;

use super::address::PoolSide;
use super::gate::ClusterState;
use super::purpose::{self, Target};
use super::{Failure, request};
use crate::api::capi::cluster_name;
use crate::controller::context::Context;

/// One claim and what every step reads of it.
pub struct Loaded {
    pub claim: Arc<IPAddressClaim>,
    pub holder: HolderKey,
    pub target: Target,
    /// The Cluster the claim belongs to, by name, and as the watch last saw it.
    pub cluster_name: Option<String>,
    pub cluster: Option<Arc<Cluster>>,
    /// The pool it uses, once known: a purpose claim's is chosen when it is served.
    pub pool: Option<PoolKey>,
}

impl Loaded {
    /// The claim's holder and target, or None when it is not for ferro-ipam.
    pub fn identify(claim: &IPAddressClaim) -> Option<(HolderKey, Target)> {
        let target = Target::of(claim)?;
        Some((HolderKey::new(&claim.namespace().unwrap_or_default(), &claim.name_any()), target))
    }

    /// Reads what the steps need from the stores and the index (complete by now).
    pub fn load(claim: Arc<IPAddressClaim>, holder: HolderKey, target: Target, ctx: &Context) -> Loaded {
        let cluster_name = cluster_name(&claim);
        let cluster = cluster_name.as_deref().and_then(|name| ctx.cached_cluster(&holder.namespace, name));
        let pool = match &target {
            Target::Pool(key) => Some(key.clone()),
            Target::Purpose(purpose) => purpose::known_pool(ctx, *purpose, &holder),
        };
        Loaded { claim, holder, target, cluster_name, cluster, pool }
    }

    /// The same claim as a write returned it.
    pub fn with_claim(self, claim: IPAddressClaim) -> Loaded {
        Loaded { claim: Arc::new(claim), ..self }
    }

    /// Whether and how its Cluster holds it back (none when the API server serves no Cluster).
    pub fn cluster_state(&self, ctx: &Context) -> ClusterState {
        match &ctx.clusters {
            Some(_) => ClusterState::of(self.cluster_name.clone(), self.cluster.as_deref()),
            None => ClusterState::Unnamed,
        }
    }

    /// What the index knows of its pool, once known.
    pub fn pool_facts(&self, ctx: &Context) -> Option<PoolFacts> {
        self.pool.as_ref().and_then(|key| ctx.index.pool_facts(key))
    }

    /// The purpose reference an address of a purpose claim repeats in its `poolRef`.
    pub fn via(&self) -> Option<PoolReference> {
        matches!(self.target, Target::Purpose(_)).then(|| self.claim.spec.pool_ref.clone())
    }

    /// Takes an address for the claim in `pool`: its existing hold there, or a new one. Every
    /// allocation of the claim controller goes through here. The outer error is a claim that
    /// cannot ask (a bad request annotation); the inner one, the pool's refusal.
    pub fn take_address(&self, pool: &Serving, ctx: &Context) -> Result<Result<IpAddr, AllocError>, Failure> {
        let request = request::of(&self.claim, pool.spec.is_dual_stack())
            .map_err(|message| Failure::NotReady(ClaimReason::AllocationFailed, message))?;
        let taken = ctx.index.allocate(&pool.key, &self.holder, request);
        if let Err(AllocError::Exhausted(_)) = &taken {
            ctx.metrics.exhaustions.get_or_create(&PoolLabels::of(&pool.key)).inc();
        }
        Ok(taken)
    }
}

/// A pool about to serve a claim, as the index knows it.
pub struct Serving {
    pub key: PoolKey,
    /// The purpose reference, when the pool was chosen by its labels.
    pub via: Option<PoolReference>,
    pub facts: PoolFacts,
    pub spec: PoolSpec,
}

impl Serving {
    /// The pool `key` if it may hand out addresses now; None while it waits for its deletion
    /// protection (the claim waits with it); otherwise why it cannot serve.
    pub fn check(
        key: PoolKey,
        via: Option<PoolReference>,
        loaded: &Loaded,
        ctx: &Context,
    ) -> Result<Option<Serving>, Failure> {
        let facts = match ctx.index.pool_facts(&key) {
            None => return Err(Failure::NotReady(ClaimReason::PoolNotReady, format!("{key} not found"))),
            Some(facts) => facts,
        };
        // Confined to one namespace, this instance cannot see a global pool's addresses elsewhere.
        if key.kind.is_global()
            && let Some(namespace) = &ctx.only_namespace
        {
            return Err(Failure::NotReady(
                ClaimReason::PoolNotReady,
                format!(
                    "{key}: this ferro-ipam runs with --namespace {namespace} and cannot see the pool's addresses in other namespaces; \
                     serve global pools from an instance that watches every namespace"
                ),
            ));
        }
        if facts.deleting {
            ctx.index.drop_unwritten(&key, &loaded.holder);
            return Err(Failure::NotReady(ClaimReason::PoolNotReady, format!("{key} is being deleted")));
        }
        // An address is only ever written into a pool that deletion protection already holds.
        if !facts.protected {
            ctx.index.wait_for_pool(&key, &loaded.holder);
            return Ok(None);
        }
        // Facts and spec come and go together (see `PoolState`).
        let Some(spec) = ctx.index.pool_spec(&key) else {
            return Err(Failure::NotReady(ClaimReason::PoolNotReady, format!("{key} not found")));
        };
        Ok(Some(Serving { key, via, facts, spec }))
    }

    /// What the pool writes into an address of its first family.
    pub fn side(&self) -> PoolSide {
        let (prefix, gateway) = self.spec.first_settings();
        PoolSide { key: self.key.clone(), via: self.via.clone(), uid: self.facts.uid.clone(), prefix, gateway }
    }

    /// What the pool writes into an address `ip`: the prefix and gateway of its family.
    pub fn side_for(&self, ip: IpAddr) -> PoolSide {
        let side = self.side();
        match self.spec.settings(Family::of(ip)) {
            Some((prefix, gateway)) => PoolSide { prefix, gateway, ..side },
            None => side,
        }
    }
}
