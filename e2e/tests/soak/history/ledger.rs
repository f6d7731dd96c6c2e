//! The history checker's ledger (no client required): every `IPAddress` alive at this point of
//! the history, and every moment two of them held one address in pools that share addresses.
//! It is fed watch events and relists in the order the watch delivers them, and judges each at
//! once: a duplicate found after the fact is still a moment of the history, not of the end.
//!
//! Which pool an address is in, and which pools share addresses, are the invariant checker's
//! rules ([`invariants::attribution`], [`PoolId::shares_addresses_with`]), read from the objects
//! alone; nothing of ferro-ipam's allocator or index.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ferro_ipam::api::capi::IPAddress;
use ferro_ipam_e2e::invariants::{self, HAND_MADE_LABEL, PoolId};
use kube::ResourceExt;

/// `namespace/name` of an `IPAddress`.
pub type Key = String;

/// An `IPAddress` as the ledger reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub key: Key,
    pub uid: String,
    pub resource_version: String,
    pub ip: IpAddr,
    pub pool: PoolId,
    /// Made by the workload by hand, not by ferro-ipam.
    pub hand_made: bool,
}

impl Observed {
    /// None for an address of no pool of ours, or one that cannot be read (the end check
    /// reports those).
    pub fn of(address: &IPAddress) -> Option<Observed> {
        let pool = invariants::attribution(address).ok()??;
        Some(Observed {
            key: format!("{}/{}", address.namespace().unwrap_or_default(), address.name_any()),
            uid: address.uid().unwrap_or_default(),
            resource_version: address.resource_version().unwrap_or_default(),
            ip: address.spec.address.parse().ok()?,
            pool,
            hand_made: address.labels().contains_key(HAND_MADE_LABEL),
        })
    }

    fn describe(&self) -> String {
        let by = if self.hand_made { "made by hand" } else { "made by ferro-ipam" };
        format!("IPAddress {} ({by}, {}, resourceVersion {})", self.key, self.pool, self.resource_version)
    }
}

#[derive(Default)]
pub struct Ledger {
    live: BTreeMap<Key, Observed>,
    by_ip: BTreeMap<IpAddr, BTreeSet<Key>>,
    judged: BTreeSet<(Key, Key)>,
    /// Two live addresses of sharing pools, one handed out while the other held it: failures.
    pub duplicates: Vec<String>,
    /// The workload made an address by hand that ferro-ipam had already handed out (its own
    /// doing, not ferro-ipam's): reported, not failed.
    pub collisions: Vec<String>,
    /// Where the history may have missed events (a watch refused with 410 Gone, then a relist).
    pub gaps: Vec<String>,
    /// Addresses ferro-ipam handed out, and all addresses deleted, as seen.
    pub handed_out: usize,
    pub deleted: usize,
    pub events: usize,
}

impl Ledger {
    /// An ADDED or MODIFIED event (or an object of a relist that is new or changed), seen `how`.
    pub fn upsert(&mut self, seen: Observed, how: &str) {
        self.events += 1;
        if let Some(known) = self.live.get_mut(&seen.key)
            && known.uid == seen.uid
            && known.ip == seen.ip
        {
            known.resource_version = seen.resource_version;
            return;
        }
        self.forget(&seen.key);
        if !seen.hand_made {
            self.handed_out += 1;
        }
        let holders: Vec<Key> = self.by_ip.get(&seen.ip).into_iter().flatten().cloned().collect();
        for other in holders.iter().filter_map(|k| self.live.get(k)) {
            let sharing = seen.pool.shares_addresses_with(&other.pool);
            if !sharing || (seen.hand_made && other.hand_made) {
                continue;
            }
            let pair = if seen.key < other.key {
                (seen.key.clone(), other.key.clone())
            } else {
                (other.key.clone(), seen.key.clone())
            };
            if !self.judged.insert(pair) {
                continue;
            }
            let moment = format!("{} held by {} and, since {how}, by {}", seen.ip, other.describe(), seen.describe());
            if seen.hand_made { self.collisions.push(moment) } else { self.duplicates.push(moment) }
        }
        self.by_ip.entry(seen.ip).or_default().insert(seen.key.clone());
        self.live.insert(seen.key.clone(), seen);
    }

    /// A DELETED event.
    pub fn delete(&mut self, key: &str) {
        self.events += 1;
        if self.forget(key) {
            self.deleted += 1;
        }
    }

    fn forget(&mut self, key: &str) -> bool {
        let Some(gone) = self.live.remove(key) else { return false };
        if let Some(keys) = self.by_ip.get_mut(&gone.ip) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_ip.remove(&gone.ip);
            }
        }
        true
    }

    /// A list at `resource_version`: the whole truth at that point. What the ledger holds and
    /// the list lacks was deleted meanwhile; what the list has anew was added (in the order of
    /// the objects' resourceVersions, the closest to their order of creation a list tells).
    /// Returns how many objects it deleted and added.
    pub fn relist(&mut self, mut objects: Vec<Observed>, resource_version: &str) -> (usize, usize) {
        let listed: BTreeSet<&Key> = objects.iter().map(|o| &o.key).collect();
        let gone: Vec<Key> = self.live.keys().filter(|k| !listed.contains(k)).cloned().collect();
        for key in &gone {
            self.delete(key);
        }
        objects.sort_by_key(|o| o.resource_version.parse::<u64>().unwrap_or(u64::MAX));
        let mut added = 0;
        for object in objects {
            let known = self.live.get(&object.key).is_some_and(|k| k.uid == object.uid && k.ip == object.ip);
            if !known {
                added += 1;
            }
            self.upsert(object, &format!("the relist at resourceVersion {resource_version}"));
        }
        (gone.len(), added)
    }

    /// What the ledger holds and a fresh list does not, and the reverse: empty when the history
    /// kept up with every change.
    pub fn differences(&self, objects: &[Observed]) -> Vec<String> {
        let listed: BTreeMap<&Key, &Observed> = objects.iter().map(|o| (&o.key, o)).collect();
        let mut differences = Vec::new();
        for (key, held) in &self.live {
            match listed.get(key) {
                None => differences.push(format!("{key} ({}) is live in the history, gone from the list", held.ip)),
                Some(o) if o.uid != held.uid || o.ip != held.ip => {
                    differences.push(format!("{key} is {} in the history, {} in the list", held.ip, o.ip))
                }
                Some(_) => {}
            }
        }
        for key in listed.keys().filter(|k| !self.live.contains_key(**k)) {
            differences.push(format!("{key} is in the list, never seen added by the history"));
        }
        differences
    }

    pub fn live(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
