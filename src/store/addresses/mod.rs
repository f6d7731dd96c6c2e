//! The `IPAddress` objects as the watch last saw them, by namespace and name.
//!
//! kube's reflector store keys every object by a full `ObjectRef`: the resource's group,
//! version, kind and plural, the object's namespace, name, uid and `resourceVersion`, nine
//! strings per object, in a table whose slots are over 200 bytes wide. Nothing else reads this
//! store but [`AddressCache::get`], by namespace and name, and no controller is built on it, so
//! it files records in a [`Keyed`] table instead: the namespace and the name shared (the name
//! with the claim of the same name), and a four-byte slot in the lookup table.
//! And it keeps no object either, but a compact [`Record`] of each, from which `get` makes the
//! lean object again (see `record`): at 100,000 claims the cache is a few hundred bytes an
//! address, where whole objects were over a kilobyte.

mod record;

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::runtime::watcher::Event;

use crate::api::capi::IPAddress;
use crate::intern::{self, Interned};
use crate::store::keyed::{Keyed, Named};
use crate::sync::{read, write};

use record::Record;

/// One address: its namespace and name, and its record.
struct Entry {
    namespace: Interned,
    /// Interned: the one copy the claim of the same name and the index share.
    name: Interned,
    record: Record,
}

impl Named for Entry {
    fn namespace(&self) -> &str {
        &self.namespace
    }

    fn name(&self) -> &str {
        &self.name
    }
}

type Entries = Keyed<Entry>;

/// The reading side. Cheap to clone.
#[derive(Clone, Default)]
pub struct AddressCache {
    objects: Arc<RwLock<Entries>>,
}

impl AddressCache {
    /// The cache and the writer that fills it from watch events.
    pub fn new() -> (AddressCache, AddressCacheWriter) {
        let cache = AddressCache::default();
        (cache.clone(), AddressCacheWriter { cache, listing: None })
    }

    fn read(&self) -> RwLockReadGuard<'_, Entries> {
        // Every write leaves the table whole: a panic cannot leave it half-updated.
        read(&self.objects)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Entries> {
        write(&self.objects)
    }

    /// The `IPAddress` of this namespace and name, as the watch last saw it (less what `lean`
    /// drops), made afresh from its record.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<IPAddress>> {
        let objects = self.read();
        let entry = objects.get(objects.find(namespace, name)?)?;
        Some(Arc::new(entry.record.materialise(namespace, name)))
    }

    /// How many objects it holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.read().len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

/// Applies watch events to an [`AddressCache`]. A listing is gathered aside and replaces the
/// whole cache at its end, as kube's reflector does, so that objects deleted while the watch was
/// down are gone and readers never see half a listing.
pub struct AddressCacheWriter {
    cache: AddressCache,
    listing: Option<Entries>,
}

impl AddressCacheWriter {
    pub fn apply(&mut self, event: &Event<IPAddress>) {
        match event {
            Event::Apply(address) => insert(&mut self.cache.write(), address),
            Event::Delete(address) => remove(&mut self.cache.write(), address),
            Event::Init => self.listing = Some(Entries::default()),
            Event::InitApply(address) => match self.listing.as_mut() {
                Some(listing) => insert(listing, address),
                None => insert(&mut self.cache.write(), address),
            },
            Event::InitDone => {
                if let Some(listing) = self.listing.take() {
                    let replaced = std::mem::replace(&mut *self.cache.write(), listing);
                    // The names only the replaced records held (objects deleted while the watch
                    // was down, namespaces emptied) are dropped with them.
                    drop(replaced);
                    record::sweep_shapes();
                    intern::sweep();
                }
            }
        }
    }
}

fn insert(objects: &mut Entries, address: &IPAddress) {
    let (Some(namespace), Some(name)) = (address.metadata.namespace.as_deref(), address.metadata.name.as_deref())
    else {
        return;
    };
    let record = Record::of(address, name);
    objects.upsert(Entry { namespace: Interned::new(namespace), name: Interned::new(name), record });
}

fn remove(objects: &mut Entries, address: &IPAddress) {
    let (Some(namespace), Some(name)) = (address.metadata.namespace.as_deref(), address.metadata.name.as_deref())
    else {
        return;
    };
    if let Some(id) = objects.find(namespace, name) {
        objects.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(namespace: &str, name: &str, ip: &str) -> IPAddress {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": namespace, "name": name},
            "spec": {"claimRef": {"name": name}, "poolRef": {"kind": "InClusterIPPool", "name": "p"},
                     "address": ip, "prefix": 24},
        }))
        .expect("an address parses")
    }

    fn ip_of(cache: &AddressCache, namespace: &str, name: &str) -> Option<String> {
        cache.get(namespace, name).map(|a| a.spec.address.clone())
    }

    #[test]
    fn changes_land_at_once_and_a_listing_replaces_everything_at_its_end() {
        let (cache, mut writer) = AddressCache::new();
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(address("a", "vm-0", "10.0.0.1")));
        assert!(cache.is_empty(), "half a listing is never seen");
        writer.apply(&Event::InitApply(address("b", "vm-0", "10.0.0.2")));
        writer.apply(&Event::InitDone);
        assert_eq!(ip_of(&cache, "a", "vm-0").as_deref(), Some("10.0.0.1"));
        assert_eq!(ip_of(&cache, "b", "vm-0").as_deref(), Some("10.0.0.2"), "same name, other namespace");

        writer.apply(&Event::Apply(address("a", "vm-0", "10.0.0.9")));
        writer.apply(&Event::Delete(address("b", "vm-0", "10.0.0.2")));
        assert_eq!(ip_of(&cache, "a", "vm-0").as_deref(), Some("10.0.0.9"));
        assert_eq!(ip_of(&cache, "b", "vm-0"), None);

        // A relisting after a failure: vm-0 was deleted meanwhile, vm-1 made.
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(address("a", "vm-1", "10.0.0.3")));
        assert_eq!(ip_of(&cache, "a", "vm-0").as_deref(), Some("10.0.0.9"), "kept until the listing ends");
        writer.apply(&Event::InitDone);
        assert_eq!(ip_of(&cache, "a", "vm-0"), None, "not listed again: gone");
        assert_eq!(ip_of(&cache, "a", "vm-1").as_deref(), Some("10.0.0.3"));
        assert_eq!(cache.len(), 1);
    }
}
