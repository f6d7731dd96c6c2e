//! The claims as the watch last saw them: compact records under dense ids, found by namespace
//! and name through a table that holds only the id (the key lives once, in the record).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use kube::runtime::watcher::Event;

use super::bits::Bits;
use super::record::ClaimRecord;
use crate::api::capi::IPAddressClaim;
use crate::store::keyed::{Keyed, Named};
use crate::sync::{read, write};

/// The reading side, cheap to clone.
#[derive(Clone, Default)]
pub struct ClaimStore {
    claims: Arc<RwLock<Claims>>,
    listed: Arc<AtomicBool>,
}

#[derive(Default)]
struct Claims {
    records: Keyed<ClaimRecord>,
    /// The ids seen by the listing in progress: the others are dropped at its end.
    listing: Option<Bits>,
}

/// What an event changed.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// This claim was created or changed.
    Applied(u32),
    /// This claim is gone.
    Deleted(u32),
    /// A listing ended; these claims were not in it.
    Listed(Vec<u32>),
    Nothing,
}

impl Named for ClaimRecord {
    fn namespace(&self) -> &str {
        &self.namespace
    }

    fn name(&self) -> &str {
        &self.name
    }
}

impl ClaimStore {
    /// Follows one event of the claim watch. A listing's claims are applied as they come (a
    /// reconcile may see a newer claim than before, never an older one); the claims it did not
    /// bring are dropped at its end, as kube's reflector drops them.
    pub fn apply(&self, event: &Event<IPAddressClaim>) -> Change {
        let mut claims = write(&self.claims);
        match event {
            Event::Apply(claim) => Change::Applied(claims.records.upsert(ClaimRecord::new(claim))),
            Event::Delete(claim) => {
                let meta = &claim.metadata;
                let found = claims
                    .records
                    .find(meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default());
                found.map_or(Change::Nothing, |id| {
                    claims.records.remove(id);
                    Change::Deleted(id)
                })
            }
            Event::Init => {
                claims.listing = Some(Bits::default());
                Change::Nothing
            }
            Event::InitApply(claim) => {
                let id = claims.records.upsert(ClaimRecord::new(claim));
                if let Some(seen) = claims.listing.as_mut() {
                    seen.insert(id);
                }
                Change::Nothing
            }
            Event::InitDone => {
                let seen = claims.listing.take().unwrap_or_default();
                let gone: Vec<u32> = claims.records.ids().filter(|&id| !seen.contains(id)).collect();
                for &id in &gone {
                    claims.records.remove(id);
                }
                drop(claims);
                self.listed.store(true, Ordering::Release);
                super::record::sweep_shapes();
                crate::intern::sweep();
                Change::Listed(gone)
            }
        }
    }

    /// Whether the first listing has ended.
    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::Acquire)
    }

    /// The id of the claim of this namespace and name.
    pub fn id_of(&self, namespace: &str, name: &str) -> Option<u32> {
        read(&self.claims).records.find(namespace, name)
    }

    /// The claim of this id, as the typed object the claim path reads.
    pub fn object(&self, id: u32) -> Option<Arc<IPAddressClaim>> {
        read(&self.claims).records.get(id).map(|r| Arc::new(r.object()))
    }

    /// The claim of this namespace and name.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<IPAddressClaim>> {
        let claims = read(&self.claims);
        claims.records.get(claims.records.find(namespace, name)?).map(|r| Arc::new(r.object()))
    }

    /// A fact of the record of this id, without making the object.
    #[cfg(test)]
    pub fn with<T>(&self, id: u32, fact: impl FnOnce(&ClaimRecord) -> T) -> Option<T> {
        read(&self.claims).records.get(id).map(fact)
    }

    /// Every id held now.
    pub fn ids(&self) -> Vec<u32> {
        read(&self.claims).records.ids().collect()
    }

    /// The ids of the claims of one namespace.
    pub fn ids_in(&self, namespace: &str) -> Vec<u32> {
        let claims = read(&self.claims);
        claims.records.ids().filter(|id| claims.records.get(*id).is_some_and(|r| &*r.namespace == namespace)).collect()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        read(&self.claims).records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn claim(name: &str) -> IPAddressClaim {
        fixtures::claim(name, "pool")
    }

    #[test]
    fn claims_are_found_by_name_and_keep_their_id_through_changes() {
        let store = ClaimStore::default();
        let Change::Applied(a) = store.apply(&Event::Apply(claim("a"))) else { panic!("applied") };
        let Change::Applied(b) = store.apply(&Event::Apply(claim("b"))) else { panic!("applied") };
        assert_ne!(a, b);
        assert_eq!(store.apply(&Event::Apply(claim("a"))), Change::Applied(a), "a change keeps the id");
        let ns = claim("a").metadata.namespace.unwrap_or_default();
        assert_eq!(store.id_of(&ns, "a"), Some(a));
        assert_eq!(store.get(&ns, "b").map(|c| c.metadata.name.clone()), Some(Some("b".to_owned())));
        assert_eq!(store.apply(&Event::Delete(claim("a"))), Change::Deleted(a));
        assert_eq!(store.id_of(&ns, "a"), None);
        assert_eq!(store.apply(&Event::Delete(claim("a"))), Change::Nothing);
        assert_eq!(store.len(), 1);
        let Change::Applied(c) = store.apply(&Event::Apply(claim("c"))) else { panic!("applied") };
        assert_eq!(c, a, "a freed id is used again");
        assert_eq!(store.id_of(&ns, "c"), Some(c));
        assert_eq!(store.id_of(&ns, "b"), Some(b));
    }

    #[test]
    fn a_listing_drops_the_claims_it_did_not_bring_and_only_then_says_listed() {
        let store = ClaimStore::default();
        let _ = store.apply(&Event::Apply(claim("old")));
        let _ = store.apply(&Event::Apply(claim("kept")));
        assert!(!store.is_listed());
        let _ = store.apply(&Event::Init);
        let _ = store.apply(&Event::InitApply(claim("kept")));
        let _ = store.apply(&Event::InitApply(claim("new")));
        let ns = claim("a").metadata.namespace.unwrap_or_default();
        assert!(store.id_of(&ns, "old").is_some(), "kept until the listing ends");
        let old = store.id_of(&ns, "old");
        assert_eq!(store.apply(&Event::InitDone), Change::Listed(old.into_iter().collect()));
        assert!(store.is_listed());
        assert_eq!(store.id_of(&ns, "old"), None);
        assert!(store.id_of(&ns, "kept").is_some() && store.id_of(&ns, "new").is_some());
        assert_eq!(store.ids().len(), 2);
    }

    #[test]
    fn the_claims_of_one_namespace_are_found_together() {
        let store = ClaimStore::default();
        let mut elsewhere = claim("b");
        elsewhere.metadata.namespace = Some("elsewhere".to_owned());
        let Change::Applied(a) = store.apply(&Event::Apply(claim("a"))) else { panic!("applied") };
        let Change::Applied(b) = store.apply(&Event::Apply(elsewhere)) else { panic!("applied") };
        let Change::Applied(c) = store.apply(&Event::Apply(claim("c"))) else { panic!("applied") };
        let ns = claim("a").metadata.namespace.unwrap_or_default();
        let mut found = store.ids_in(&ns);
        found.sort_unstable();
        assert_eq!(found, [a, c]);
        assert_eq!(store.ids_in("elsewhere"), [b]);
        assert!(store.ids_in("nobody").is_empty());
    }

    #[test]
    fn many_claims_are_each_found_again() {
        let store = ClaimStore::default();
        let ns = claim("a").metadata.namespace.unwrap_or_default();
        for n in 0..2000 {
            let _ = store.apply(&Event::Apply(claim(&format!("c-{n}"))));
        }
        for n in (0..2000).step_by(3) {
            let _ = store.apply(&Event::Delete(claim(&format!("c-{n}"))));
        }
        for n in 0..2000 {
            let id = store.id_of(&ns, &format!("c-{n}"));
            assert_eq!(id.is_some(), n % 3 != 0, "c-{n}");
            if let Some(id) = id {
                assert_eq!(store.with(id, |r| r.name.to_string()), Some(format!("c-{n}")));
            }
        }
    }
}
