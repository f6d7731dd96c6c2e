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
//! and `selfLink` (which the lean parse, `store::lean`, never reads),
//! `generateName`, `deletionGracePeriodSeconds` and `status` (an `IPAddress` has none). The
//! namespace and the name are the cache's keys, so the record holds neither.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{LazyLock, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api::capi::{AddressSpec, IPAddress, LocalReference, PoolReference};
use crate::intern::{self, Interned, Shared, Table};
use crate::store::compact::{Kept, Stamp, Uid, Verbatim, uuid_bytes, uuid_text, version_number};

/// `spec.address` or `spec.gateway`: the address when the text is its canonical spelling
/// (`10.0.0.1`, `fd00::1`), else the text as it came (`010.0.0.1`, `FD00::1`).
#[derive(Debug, PartialEq, Eq, Hash)]
enum Address {
    Ip(IpAddr),
    Verbatim(Verbatim),
}

/// The address, when `text` is its canonical spelling.
fn canonical_ip(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>().ok().filter(|ip| ip.to_string() == text)
}

impl Address {
    fn new(text: &str) -> Address {
        match canonical_ip(text) {
            Some(ip) => Address::Ip(ip),
            None => Address::Verbatim(Verbatim::new(text)),
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
#[derive(Debug, PartialEq, Eq, Hash)]
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

/// An owner reference's uid: the claim's, different for every address, is kept in the record;
/// any other (a pool's, shared by its addresses) in the shape.
#[derive(Debug, PartialEq, Eq, Hash)]
enum OwnerUid {
    InRecord,
    Here(Uid),
}

/// An owner reference. The claim's name is the address's own; a pool's is one of few, shared.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Owner {
    api_version: Interned,
    kind: Interned,
    name: Name<Interned>,
    uid: OwnerUid,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

/// `spec.poolRef`: a handful of pools serve every address.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Pool {
    api_group: Option<Interned>,
    kind: Interned,
    name: Interned,
}

/// Labels or annotations: the keys shared, the values (a cluster's name, a pool's) not.
type Pairs = Box<[(Interned, Box<str>)]>;

/// What addresses have in common (see the module). Where the record's own fields are to be
/// read, and the text of those that had no exact compact form, are part of it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Shape {
    uid: Kept,
    resource_version: Kept,
    /// Set when `spec.address` is not spelled canonically: the record's address is then unused.
    odd_address: Option<Verbatim>,
    generation: Option<i64>,
    deleted: Stamp,
    owners: Option<Box<[Owner]>>,
    labels: Option<Pairs>,
    annotations: Option<Pairs>,
    finalizers: Option<Box<[Interned]>>,
    claim: Name<Verbatim>,
    pool: Pool,
    gateway: Option<Address>,
    prefix: i32,
}

impl intern::Shape for Shape {
    fn table() -> &'static Mutex<Table<Shared<Self>>> {
        static TABLE: LazyLock<Mutex<Table<Shared<Shape>>>> = LazyLock::new(Mutex::default);
        &TABLE
    }
}

/// One `IPAddress` without its namespace and name (see the module).
#[derive(Debug)]
pub(super) struct Record {
    shape: Shared<Shape>,
    /// The uid's bytes, when the shape says the record keeps it.
    uid: [u8; 16],
    /// The uid of the owner the shape says the record keeps (the claim's).
    owner_uid: [u8; 16],
    /// The `resourceVersion`'s number, when the shape says the record keeps it.
    resource_version: u64,
    created: Stamp,
    /// `spec.address`, unless the shape keeps its text.
    address: IpAddr,
}

impl Record {
    /// The record of `address`, whose name is `name` (the key it is filed under).
    pub(super) fn of(address: &IPAddress, name: &str) -> Record {
        let (meta, spec) = (&address.metadata, &address.spec);
        let (uid_kept, uid) = Kept::of(meta.uid.as_deref(), uuid_bytes);
        let (version_kept, resource_version) = Kept::of(meta.resource_version.as_deref(), version_number);
        let ip = canonical_ip(&spec.address);
        let mut owner_uid = None;
        let owners = meta.owner_references.as_deref().map(|owners| {
            owners
                .iter()
                .map(|o| {
                    let name = Name::new(&o.name, name, Interned::new);
                    // The first owner named as the address itself (its claim) keeps its uid in the record.
                    let uid = match (&name, owner_uid, uuid_bytes(&o.uid)) {
                        (Name::Own, None, Some(bytes)) => {
                            owner_uid = Some(bytes);
                            OwnerUid::InRecord
                        }
                        _ => OwnerUid::Here(Uid::new(&o.uid)),
                    };
                    Owner {
                        api_version: Interned::new(&o.api_version),
                        kind: Interned::new(&o.kind),
                        name,
                        uid,
                        controller: o.controller,
                        block_owner_deletion: o.block_owner_deletion,
                    }
                })
                .collect()
        });
        let shape = Shape {
            uid: uid_kept,
            resource_version: version_kept,
            odd_address: ip.is_none().then(|| Verbatim::new(&spec.address)),
            generation: meta.generation,
            deleted: Stamp::new(meta.deletion_timestamp.as_ref()),
            owners,
            labels: meta.labels.as_ref().map(pairs),
            annotations: meta.annotations.as_ref().map(pairs),
            finalizers: meta.finalizers.as_deref().map(|all| all.iter().map(|f| Interned::new(f)).collect()),
            claim: Name::new(&spec.claim_ref.name, name, Verbatim::new),
            pool: Pool {
                api_group: spec.pool_ref.api_group.as_deref().map(Interned::new),
                kind: Interned::new(&spec.pool_ref.kind),
                name: Interned::new(&spec.pool_ref.name),
            },
            gateway: spec.gateway.as_deref().map(Address::new),
            prefix: spec.prefix,
        };
        Record {
            shape: Shared::new(shape),
            uid: uid.unwrap_or_default(),
            owner_uid: owner_uid.unwrap_or_default(),
            resource_version: resource_version.unwrap_or_default(),
            created: Stamp::new(meta.creation_timestamp.as_ref()),
            address: ip.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
        }
    }

    /// The lean `IPAddress` this record was made from, in `namespace` under `name`.
    pub(super) fn materialise(&self, namespace: &str, name: &str) -> IPAddress {
        let shape = &*self.shape;
        let metadata = ObjectMeta {
            namespace: Some(namespace.to_owned()),
            name: Some(name.to_owned()),
            uid: shape.uid.text(self.uid, uuid_text),
            resource_version: shape.resource_version.text(self.resource_version, |n| n.to_string()),
            generation: shape.generation,
            creation_timestamp: self.created.time(),
            deletion_timestamp: shape.deleted.time(),
            owner_references: shape
                .owners
                .as_deref()
                .map(|owners| owners.iter().map(|o| o.reference(name, self.owner_uid)).collect()),
            labels: shape.labels.as_deref().map(map),
            annotations: shape.annotations.as_deref().map(map),
            finalizers: shape.finalizers.as_deref().map(|all| all.iter().map(|f| f.as_str().to_owned()).collect()),
            ..ObjectMeta::default()
        };
        let spec = AddressSpec {
            claim_ref: LocalReference { name: shape.claim.text(name) },
            pool_ref: PoolReference {
                api_group: shape.pool.api_group.as_deref().map(str::to_owned),
                kind: shape.pool.kind.as_str().to_owned(),
                name: shape.pool.name.as_str().to_owned(),
            },
            address: match &shape.odd_address {
                Some(text) => text.as_str().to_owned(),
                None => self.address.to_string(),
            },
            prefix: shape.prefix,
            gateway: shape.gateway.as_ref().map(Address::text),
        };
        IPAddress { types: None, metadata, spec, status: None }
    }
}

/// Drops the shapes no record holds any more.
pub(super) fn sweep_shapes() {
    intern::sweep_shapes::<Shape>();
}

impl Owner {
    fn reference(&self, own: &str, uid_in_record: [u8; 16]) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.as_str().to_owned(),
            kind: self.kind.as_str().to_owned(),
            name: self.name.text(own),
            uid: match &self.uid {
                OwnerUid::InRecord => uuid_text(uid_in_record),
                OwnerUid::Here(uid) => uid.text(),
            },
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
