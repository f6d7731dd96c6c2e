//! A claim as its steps see it, read once per reconcile (who holds, what it targets, its
//! Cluster, its pool), and the verdict on the pool that is to serve it. Reads only: nothing here
//! changes the index or calls the API server (no client required).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use kube::ResourceExt;

use crate::allocator::Family;
use crate::api::capi::{Cluster, IPAddressClaim, PoolReference, cluster_name};
use crate::contract::address::PoolSide;
use crate::contract::{Admission, ClusterState, Target, admission};
use crate::controller::context::Context;
use crate::index::{HolderKey, PoolFacts, PoolKey, PoolSpec};

use super::purpose;

/// One claim and what every step reads of it.
pub struct Loaded {
    pub claim: Arc<IPAddressClaim>,
    pub holder: HolderKey,
    pub target: Target,
    /// The Cluster the claim belongs to, by name, and as the watch last saw it.
    pub cluster_name: Option<String>,
    pub cluster: Option<Arc<Cluster>>,
    /// The pool it uses, once known: a purpose claim's is chosen when it is fulfilled.
    pub pool: Option<PoolKey>,
    /// The index's count of pool changes before anything of the pools was read (see
    /// [`crate::index::Index::pool_changes`]).
    pub pool_changes: u64,
}

impl Loaded {
    /// The claim's holder and target, or None when it is not for ferro-ipam.
    pub fn identify(claim: &IPAddressClaim) -> Option<(HolderKey, Target)> {
        let target = Target::of(claim)?;
        Some((HolderKey::new(&claim.namespace().unwrap_or_default(), &claim.name_any()), target))
    }

    /// Reads what the steps need from the stores and the index (complete by now).
    pub fn load(claim: Arc<IPAddressClaim>, holder: HolderKey, target: Target, ctx: &Context) -> Loaded {
        let pool_changes = ctx.index.pool_changes();
        let cluster_name = cluster_name(&claim);
        let cluster = cluster_name.as_deref().and_then(|name| ctx.cached_cluster(&holder.namespace, name));
        let pool = match &target {
            Target::Pool(key) => Some(key.clone()),
            Target::Purpose(purpose) => purpose::known_pool(ctx, *purpose, &holder),
        };
        Loaded { claim, holder, target, cluster_name, cluster, pool, pool_changes }
    }

    /// The same claim as a write returned it.
    pub fn with_claim(self, claim: IPAddressClaim) -> Loaded {
        Loaded { claim: Arc::new(claim), ..self }
    }

    /// Whether and how its Cluster holds it back (none when the API server serves no Cluster).
    pub fn cluster_state(&self, ctx: &Context) -> ClusterState {
        match &ctx.caches.clusters {
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
}

/// Whether a pool may hand an address to a claim now.
pub enum Verdict {
    /// It may.
    Serve(Box<ReadyPool>),
    /// Not yet: its deletion protection is not in place (moments after it appeared).
    Unprotected,
    /// It is being deleted: it serves no new claim.
    Deleting(String),
    /// It cannot serve this claim: the message for the claim's `Ready` condition.
    Refused(String),
    /// Its namespace selector does not select the claim's namespace: the message.
    NotSelected(String),
    /// It has a namespace selector, and the labels of the claim's Namespace are not known yet.
    NamespaceUnknown,
}

/// Who asks a pool for an address: the claim's namespace and that Namespace's labels (None: not
/// known yet), the one namespace this instance serves (`--namespace`), if any, and whether the
/// claim's `IPAddress` already holds an address of the pool.
pub struct Asker<'a> {
    pub namespace: &'a str,
    pub labels: Option<&'a BTreeMap<String, String>>,
    pub only_namespace: Option<&'a str>,
    /// A namespace selector admits new claims; a claim already bound keeps its address when the
    /// selector stops selecting its namespace, as preflight and the docs say.
    pub bound: bool,
}

impl Verdict {
    /// The verdict on pool `key` as the index knows it, for a claim of `asker`.
    pub fn of(
        key: PoolKey,
        via: Option<PoolReference>,
        facts: Option<PoolFacts>,
        spec: Option<PoolSpec>,
        asker: &Asker<'_>,
    ) -> Verdict {
        // Facts and spec come and go together (see `PoolState`).
        let (Some(facts), Some(spec)) = (facts, spec) else {
            return Verdict::Refused(format!("{key} not found"));
        };
        // Confined to one namespace, this instance cannot see a global pool's addresses elsewhere.
        if key.kind.is_global()
            && let Some(namespace) = asker.only_namespace
        {
            return Verdict::Refused(format!(
                "{key}: this ferro-ipam runs with --namespace {namespace} and cannot see the pool's addresses in other namespaces; \
                 serve global pools from an instance that watches every namespace"
            ));
        }
        let admitted =
            if asker.bound { Admission::Admitted } else { admission(&key, &facts, asker.namespace, asker.labels) };
        match admitted {
            Admission::Admitted => {}
            Admission::NotSelected(why) => return Verdict::NotSelected(format!("{key}: {why}")),
            Admission::Unknown => return Verdict::NamespaceUnknown,
        }
        if facts.deleting {
            return Verdict::Deleting(format!("{key} is being deleted"));
        }
        // An address is only ever written into a pool that deletion protection already holds.
        if !facts.protected {
            return Verdict::Unprotected;
        }
        Verdict::Serve(Box::new(ReadyPool { key, via, facts, spec }))
    }

    /// The verdict on pool `key` for `loaded`, read from the index.
    pub fn read(key: PoolKey, loaded: &Loaded, ctx: &Context) -> Verdict {
        let (facts, spec) = (ctx.index.pool_facts(&key), ctx.index.pool_spec(&key));
        let bound = ctx.index.object_hold(&key, &loaded.holder).is_some();
        // Only a global pool's namespace selector reads the Namespace's labels, and only for a
        // claim not bound yet.
        let selects = facts.as_ref().is_some_and(|f| f.namespace_selector.is_some() && key.kind.is_global());
        let labels = (selects && !bound).then(|| ctx.namespace_labels(&loaded.holder.namespace)).flatten();
        let asker = Asker {
            namespace: &loaded.holder.namespace,
            labels: labels.as_ref(),
            only_namespace: ctx.only_namespace.as_deref(),
            bound,
        };
        Verdict::of(key, loaded.via(), facts, spec, &asker)
    }
}

/// A pool that may hand out addresses now, as the index knows it.
pub struct ReadyPool {
    pub key: PoolKey,
    /// The purpose reference, when the pool was chosen by its labels.
    pub via: Option<PoolReference>,
    pub facts: PoolFacts,
    pub spec: PoolSpec,
}

impl ReadyPool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pool::IPPoolSpec;

    fn facts(protected: bool, deleting: bool) -> Option<PoolFacts> {
        Some(PoolFacts { protected, deleting, ..PoolFacts::default() })
    }

    fn verdict(key: PoolKey, facts: Option<PoolFacts>, one_namespace: Option<&str>) -> Verdict {
        let asker =
            Asker { namespace: "ns", labels: Some(&BTreeMap::new()), only_namespace: one_namespace, bound: false };
        Verdict::of(key, None, facts, Some(PoolSpec::Addresses(IPPoolSpec::default())), &asker)
    }

    #[test]
    fn a_pool_serves_only_once_protected_and_not_while_deleted() {
        let key = PoolKey::in_cluster("ns", "p");
        assert!(matches!(verdict(key.clone(), facts(true, false), None), Verdict::Serve(_)));
        assert!(matches!(verdict(key.clone(), facts(false, false), None), Verdict::Unprotected));
        assert!(matches!(verdict(key.clone(), facts(true, true), None), Verdict::Deleting(_)));
        assert!(matches!(verdict(key, None, None), Verdict::Refused(m) if m.ends_with("not found")));
    }

    #[test]
    fn a_global_pool_is_refused_by_an_instance_of_one_namespace() {
        let key = PoolKey::global("g");
        assert!(matches!(verdict(key.clone(), facts(true, false), None), Verdict::Serve(_)));
        let refused = verdict(key, facts(true, false), Some("team-a"));
        assert!(matches!(refused, Verdict::Refused(m) if m.contains("--namespace team-a")));
    }

    #[test]
    fn a_global_pool_refuses_a_namespace_its_selector_does_not_select_and_waits_for_unknown_labels() {
        let selector = crate::api::NamespaceSelector {
            match_labels: Some(BTreeMap::from([("team".to_owned(), "a".to_owned())])),
            ..Default::default()
        };
        let facts = Some(PoolFacts { protected: true, namespace_selector: Some(selector), ..PoolFacts::default() });
        let spec = || Some(PoolSpec::Addresses(IPPoolSpec::default()));
        let team = |t: &str| BTreeMap::from([("team".to_owned(), t.to_owned())]);
        let (a, b) = (team("a"), team("b"));
        let asker = |labels| Asker { namespace: "ns", labels, only_namespace: None, bound: false };
        let key = PoolKey::global("g");
        assert!(matches!(Verdict::of(key.clone(), None, facts.clone(), spec(), &asker(Some(&a))), Verdict::Serve(_)));
        let refused = Verdict::of(key.clone(), None, facts.clone(), spec(), &asker(Some(&b)));
        assert!(matches!(refused, Verdict::NotSelected(m) if m.contains("team=a")));
        assert!(matches!(
            Verdict::of(key.clone(), None, facts.clone(), spec(), &asker(None)),
            Verdict::NamespaceUnknown
        ));

        // A claim whose IPAddress already holds an address of the pool keeps it, selected or not.
        for labels in [Some(&b), None] {
            let bound = Asker { namespace: "ns", labels, only_namespace: None, bound: true };
            assert!(matches!(Verdict::of(key.clone(), None, facts.clone(), spec(), &bound), Verdict::Serve(_)));
        }
    }
}
