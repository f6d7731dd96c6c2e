//! One `IPAddress` as the cache keeps it: a compact record rather than the object, and the
//! lean object made again from it when a reconcile asks.
//!
//! A served `IPAddress` in memory is a whole `ObjectMeta` of `String`s, `BTreeMap`s and `Vec`s:
//! about 1,200 bytes. Most of its text is either the same for every address (the namespace,
//! the pool, the kinds, the finalizer, the label keys) or a number spelled out (the UID, the
//! resource version, the address). The record keeps the first kind once for everyone
//! ([`Interned`]) and the second as the number, with the text kept verbatim when it has no
//! exact compact form, so that what [`Record::materialise`] gives back is the object it was
//! made from, field for field.
//!
//! Kept, because a caller reads them (the claim controller, its deletion, purpose claims and
//! the cluster VIP): `uid` (a delete's precondition), `resourceVersion` (a patch's guard),
//! `ownerReferences` whole (the adoption patch writes them back), `finalizers`, `labels`,
//! `annotations` (those `lean` leaves), `deletionTimestamp` and all of `spec`; and `generation`
//! and `creationTimestamp`, which cost little and keep the object recognisable in a log.
//!
//! Not kept, because nothing reads them from the cache: `apiVersion` and `kind`, `managedFields`
//! and `selfLink` (which the lean parse, `controller::lean`, never reads),
//! `generateName`, `deletionGracePeriodSeconds` and `status` (an `IPAddress` has none). The
//! namespace and the name are the cache's keys, so the record holds neither.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::capi::{AddressSpec, IPAddress, LocalReference, PoolReference};
use crate::controller::compact::{Stamp, Uid, Verbatim, Version};
use crate::intern::Interned;

/// `spec.address` or `spec.gateway`: the address when the text is its canonical spelling
/// (`10.0.0.1`, `fd00::1`), else the text as it came (`010.0.0.1`, `FD00::1`).
#[derive(Debug)]
enum Address {
    Ip(IpAddr),
    Verbatim(Verbatim),
}

impl Address {
    fn new(text: &str) -> Address {
        match text.parse::<IpAddr>() {
            Ok(ip) if ip.to_string() == text => Address::Ip(ip),
            _ => Address::Verbatim(Verbatim::new(text)),
        }
    }

    fn text(&self) -> String {
        match self {
            Address::Ip(ip) => ip.to_string(),
            Address::Verbatim(text) => text.as_str().to_owned(),
        }
    }
}

/// A name that is usually the object's own: the claim an address is for (`spec.claimRef`), the
/// claim that owns it. That case is a flag, not a second copy.
#[derive(Debug)]
enum Name<T> {
    Own,
    Other(T),
}

impl<T: AsRef<str>> Name<T> {
    fn new(text: &str, own: &str, other: impl FnOnce(&str) -> T) -> Name<T> {
        if text == own { Name::Own } else { Name::Other(other(text)) }
    }

    fn text(&self, own: &str) -> String {
        match self {
            Name::Own => own.to_owned(),
            Name::Other(text) => text.as_ref().to_owned(),
        }
    }
}

impl AsRef<str> for Verbatim {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// An owner reference. The claim's name is the address's own; a pool's is one of few, shared.
#[derive(Debug)]
struct Owner {
    api_version: Interned,
    kind: Interned,
    name: Name<Interned>,
    uid: Uid,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

/// `spec.poolRef`: a handful of pools serve every address.
#[derive(Debug)]
struct Pool {
    api_group: Option<Interned>,
    kind: Interned,
    name: Interned,
}

/// Labels or annotations: the keys shared, the values (a cluster's name, a pool's) not.
type Pairs = Box<[(Interned, Box<str>)]>;

/// One `IPAddress` without its namespace and name (see the module).
#[derive(Debug)]
pub(super) struct Record {
    uid: Option<Uid>,
    resource_version: Option<Version>,
    generation: Option<i64>,
    created: Stamp,
    deleted: Stamp,
    owners: Option<Box<[Owner]>>,
    labels: Option<Pairs>,
    annotations: Option<Pairs>,
    finalizers: Option<Box<[Interned]>>,
    claim: Name<Verbatim>,
    pool: Pool,
    address: Address,
    gateway: Option<Address>,
    prefix: i32,
}

impl Record {
    /// The record of `address`, whose name is `name` (the key it is filed under).
    pub(super) fn of(address: &IPAddress, name: &str) -> Record {
        let (meta, spec) = (&address.metadata, &address.spec);
        Record {
            uid: meta.uid.as_deref().map(Uid::new),
            resource_version: meta.resource_version.as_deref().map(Version::new),
            generation: meta.generation,
            created: Stamp::new(meta.creation_timestamp.as_ref()),
            deleted: Stamp::new(meta.deletion_timestamp.as_ref()),
            owners: meta.owner_references.as_deref().map(|owners| owners.iter().map(|o| Owner::of(o, name)).collect()),
            labels: meta.labels.as_ref().map(pairs),
            annotations: meta.annotations.as_ref().map(pairs),
            finalizers: meta.finalizers.as_deref().map(|all| all.iter().map(|f| Interned::new(f)).collect()),
            claim: Name::new(&spec.claim_ref.name, name, Verbatim::new),
            pool: Pool {
                api_group: spec.pool_ref.api_group.as_deref().map(Interned::new),
                kind: Interned::new(&spec.pool_ref.kind),
                name: Interned::new(&spec.pool_ref.name),
            },
            address: Address::new(&spec.address),
            gateway: spec.gateway.as_deref().map(Address::new),
            prefix: spec.prefix,
        }
    }

    /// The lean `IPAddress` this record was made from, in `namespace` under `name`.
    pub(super) fn materialise(&self, namespace: &str, name: &str) -> IPAddress {
        let metadata = ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            uid: self.uid.as_ref().map(Uid::text),
            resource_version: self.resource_version.as_ref().map(Version::text),
            generation: self.generation,
            creation_timestamp: self.created.time(),
            deletion_timestamp: self.deleted.time(),
            owner_references: self.owners.as_deref().map(|owners| owners.iter().map(|o| o.reference(name)).collect()),
            labels: self.labels.as_deref().map(map),
            annotations: self.annotations.as_deref().map(map),
            finalizers: self.finalizers.as_deref().map(|all| all.iter().map(|f| f.as_str().to_owned()).collect()),
            ..ObjectMeta::default()
        };
        let spec = AddressSpec {
            claim_ref: LocalReference { name: self.claim.text(name) },
            pool_ref: PoolReference {
                api_group: self.pool.api_group.as_deref().map(str::to_owned),
                kind: self.pool.kind.as_str().to_owned(),
                name: self.pool.name.as_str().to_owned(),
            },
            address: self.address.text(),
            prefix: self.prefix,
            gateway: self.gateway.as_ref().map(Address::text),
        };
        IPAddress { types: None, metadata, spec, status: None }
    }
}

impl Owner {
    fn of(reference: &OwnerReference, own: &str) -> Owner {
        Owner {
            api_version: Interned::new(&reference.api_version),
            kind: Interned::new(&reference.kind),
            name: Name::new(&reference.name, own, Interned::new),
            uid: Uid::new(&reference.uid),
            controller: reference.controller,
            block_owner_deletion: reference.block_owner_deletion,
        }
    }

    fn reference(&self, own: &str) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.as_str().to_owned(),
            kind: self.kind.as_str().to_owned(),
            name: self.name.text(own),
            uid: self.uid.text(),
            controller: self.controller,
            block_owner_deletion: self.block_owner_deletion,
        }
    }
}

fn pairs(map: &BTreeMap<String, String>) -> Pairs {
    map.iter().map(|(key, value)| (Interned::new(key), value.as_str().into())).collect()
}

fn map(pairs: &[(Interned, Box<str>)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(key, value)| (key.as_str().to_owned(), value.to_string())).collect()
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
