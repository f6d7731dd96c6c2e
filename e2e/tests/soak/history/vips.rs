//! The control-plane VIPs over the whole history (no client required): every Cluster, from a
//! watch of its own, and every VIP claim's `IPAddress`, from the `IPAddress` watch, replayed in
//! one order and judged at each moment by the rules of [`vip_rules`].
//!
//! **One order.** The soak's API server serves watches from etcd, so a resourceVersion is
//! etcd's revision, one count for every kind (a deletion's event carries the revision of the
//! deletion). Each watch delivers its kind in that order, and the two arrive side by side. A
//! change is replayed only once both watches have delivered everything up to it, so that each
//! moment is judged with both kinds as they were then; the replay judges the moment after each
//! revision at which a Cluster or a VIP claim's `IPAddress` changed.
//!
//! **Gaps.** A watch refused with 410 Gone lists again at L; what changed since the last
//! revision g it had seen is known only as of L. The moments strictly between g and L are not
//! judged (either kind), moment L and every later one are. A list at the start is such a gap
//! from revision 0.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use ferro_ipam::api::capi::{Cluster, IPAddress};
use ferro_ipam::api::keys::CONTROL_PLANE_VIP_LABEL;
use kube::ResourceExt;

use super::vip_rules::{self, AddressSeen, Breach, ClusterSeen, Key, Moment, Revision, VIP_SUFFIX};

/// An object's resourceVersion as a revision (0 when it cannot be read).
pub fn revision(text: &str) -> Revision {
    text.parse().unwrap_or(0)
}

/// `NAMESPACE/NAME` of an object, as the ledgers key it.
pub fn key_of<K: ResourceExt>(object: &K) -> Key {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

impl ClusterSeen {
    pub fn of(cluster: &Cluster) -> (Key, ClusterSeen) {
        let endpoint = cluster.spec.control_plane_endpoint.as_ref().and_then(|e| e.host.clone());
        let seen = ClusterSeen {
            uid: cluster.uid().unwrap_or_default(),
            revision: revision(&cluster.resource_version().unwrap_or_default()),
            asks: cluster.labels().contains_key(CONTROL_PLANE_VIP_LABEL),
            endpoint: endpoint.filter(|host| !host.is_empty()),
            deleting: cluster.metadata.deletion_timestamp.is_some(),
        };
        (key_of(cluster), seen)
    }
}

impl AddressSeen {
    /// None for an `IPAddress` of no VIP claim.
    pub fn of(address: &IPAddress) -> Option<(Key, AddressSeen)> {
        let key = key_of(address);
        key.ends_with(VIP_SUFFIX).then(|| {
            let seen = AddressSeen {
                uid: address.uid().unwrap_or_default(),
                revision: revision(&address.resource_version().unwrap_or_default()),
                ip: address.spec.address.clone(),
            };
            (key, seen)
        })
    }
}

/// What identifies one state of an object: its uid and the revision it was written at.
trait Versioned: Clone {
    fn version(&self) -> (&str, Revision);
}

impl Versioned for ClusterSeen {
    fn version(&self) -> (&str, Revision) {
        (&self.uid, self.revision)
    }
}

impl Versioned for AddressSeen {
    fn version(&self) -> (&str, Revision) {
        (&self.uid, self.revision)
    }
}

/// One change of a stream, at a revision.
enum Change<T> {
    Set(Key, T),
    Gone(Key),
    /// A list was taken here: the moment after a gap, judged even if nothing changed.
    Listed,
}

/// One watch's kind: its objects as last seen, the changes not replayed yet, and how far the
/// watch has delivered.
struct Stream<T> {
    latest: BTreeMap<Key, T>,
    pending: VecDeque<(Revision, Change<T>)>,
    /// Every change up to this revision has been delivered (None: not listed yet).
    through: Option<Revision>,
}

impl<T> Default for Stream<T> {
    fn default() -> Self {
        Stream { latest: BTreeMap::new(), pending: VecDeque::new(), through: None }
    }
}

impl<T: Versioned> Stream<T> {
    fn pass(&mut self, at: Revision) {
        if let Some(through) = &mut self.through {
            *through = (*through).max(at);
        }
    }

    fn set(&mut self, key: Key, seen: T) {
        let at = seen.version().1;
        self.latest.insert(key.clone(), seen.clone());
        self.pending.push_back((at, Change::Set(key, seen)));
        self.pass(at);
    }

    fn gone(&mut self, key: &str, at: Revision) {
        if self.latest.remove(key).is_some() {
            self.pending.push_back((at, Change::Gone(key.to_owned())));
        }
        self.pass(at);
    }

    /// A list at `at`, the truth at that revision; returns the gap it closes.
    fn listed(&mut self, objects: Vec<(Key, T)>, at: Revision) -> (Revision, Revision) {
        let from = self.through.unwrap_or(0);
        let listed: BTreeMap<Key, T> = objects.into_iter().collect();
        let gone: Vec<Key> = self.latest.keys().filter(|k| !listed.contains_key(*k)).cloned().collect();
        for key in gone {
            self.latest.remove(&key);
            self.pending.push_back((at, Change::Gone(key)));
        }
        for (key, seen) in listed {
            if self.latest.get(&key).is_none_or(|known| known.version() != seen.version()) {
                self.latest.insert(key.clone(), seen.clone());
                self.pending.push_back((at, Change::Set(key, seen)));
            }
        }
        self.pending.push_back((at, Change::Listed));
        self.through = Some(at.max(from));
        (from, at)
    }

    /// What a fresh list says that this stream does not: empty when it has kept up.
    fn differences(&self, objects: &[(Key, T)]) -> Vec<String> {
        let listed: BTreeMap<&Key, &T> = objects.iter().map(|(k, t)| (k, t)).collect();
        let mut differences = Vec::new();
        for (key, known) in &self.latest {
            match listed.get(key) {
                None => differences.push(format!("{key} is in the history, gone from the list")),
                Some(seen) if seen.version() != known.version() => differences.push(format!(
                    "{key} is at resourceVersion {} in the history, {} in the list",
                    known.version().1,
                    seen.version().1
                )),
                Some(_) => {}
            }
        }
        for key in listed.keys().filter(|k| !self.latest.contains_key(**k)) {
            differences.push(format!("{key} is in the list, never seen by the history"));
        }
        differences
    }

    fn next_at(&self) -> Option<Revision> {
        self.pending.front().map(|(at, _)| *at)
    }

    /// Applies to `now` the changes at revision `at`.
    fn apply_at(&mut self, at: Revision, now: &mut BTreeMap<Key, T>) {
        while self.next_at() == Some(at) {
            match self.pending.pop_front().map(|(_, change)| change) {
                Some(Change::Set(key, seen)) => {
                    now.insert(key, seen);
                }
                Some(Change::Gone(key)) => {
                    now.remove(&key);
                }
                Some(Change::Listed) | None => {}
            }
        }
    }
}

/// The VIPs' history: the two streams, the moment replayed up to, and what went wrong.
#[derive(Default)]
pub struct VipLedger {
    clusters: Stream<ClusterSeen>,
    addresses: Stream<AddressSeen>,
    now: Moment,
    /// Revisions strictly between the two are not judged.
    gaps: Vec<(Revision, Revision)>,
    /// Where the Cluster watch may have missed events (a watch refused with 410 Gone, then a
    /// relist), in words; the `IPAddress` watch's are the [`super::ledger::Ledger`]'s.
    pub cluster_gaps: Vec<String>,
    breached: BTreeSet<String>,
    /// Endpoints no longer held by their Cluster's VIP claim's `IPAddress`: failures.
    pub lost: Vec<String>,
    /// VIPs held for two Clusters: failures.
    pub duplicated: Vec<String>,
    /// Clusters that asked for a VIP (their keys by uid), and those whose endpoint was written.
    asked: BTreeMap<String, Key>,
    written: BTreeSet<String>,
    /// Moments judged.
    pub moments: usize,
}

impl VipLedger {
    /// Counts a Cluster that asks for a VIP, and its endpoint once written.
    fn count(&mut self, key: &str, seen: &ClusterSeen) {
        if seen.asks {
            self.asked.insert(seen.uid.clone(), key.to_owned());
            if seen.endpoint.is_some() {
                self.written.insert(seen.uid.clone());
            }
        }
    }

    /// A Cluster's ADDED or MODIFIED event.
    pub fn cluster(&mut self, key: Key, seen: ClusterSeen) {
        self.count(&key, &seen);
        self.clusters.set(key, seen);
        self.replay();
    }

    /// A Cluster's DELETED event, at the revision of the deletion.
    pub fn cluster_gone(&mut self, key: &str, at: Revision) {
        self.clusters.gone(key, at);
        self.replay();
    }

    /// The Clusters listed at `at` (at the start, or after 410 Gone).
    pub fn clusters_listed(&mut self, objects: Vec<(Key, ClusterSeen)>, at: Revision) {
        for (key, seen) in &objects {
            self.count(key, seen);
        }
        let gap = self.clusters.listed(objects, at);
        self.gaps.push(gap);
        self.replay();
    }

    /// An `IPAddress`'s ADDED or MODIFIED event at `at`: kept when it is a VIP claim's.
    pub fn address(&mut self, seen: Option<(Key, AddressSeen)>, at: Revision) {
        match seen {
            Some((key, seen)) => self.addresses.set(key, seen),
            None => self.addresses.pass(at),
        }
        self.replay();
    }

    /// An `IPAddress`'s DELETED event, at the revision of the deletion.
    pub fn address_gone(&mut self, key: &str, at: Revision) {
        self.addresses.gone(key, at);
        self.replay();
    }

    /// The VIP claims' `IPAddress`es of a list of every `IPAddress` at `at`.
    pub fn addresses_listed(&mut self, objects: Vec<(Key, AddressSeen)>, at: Revision) {
        let gap = self.addresses.listed(objects, at);
        self.gaps.push(gap);
        self.replay();
    }

    /// A bookmark, or a fresh list that matched the history: the `IPAddress` watch has
    /// delivered everything up to `at`.
    pub fn addresses_through(&mut self, at: Revision) {
        self.addresses.pass(at);
        self.replay();
    }

    /// The same for the Cluster watch.
    pub fn clusters_through(&mut self, at: Revision) {
        self.clusters.pass(at);
        self.replay();
    }

    /// Replays every change both watches have delivered, judging each moment outside a gap.
    fn replay(&mut self) {
        let (Some(clusters), Some(addresses)) = (self.clusters.through, self.addresses.through) else {
            return;
        };
        let through = clusters.min(addresses);
        loop {
            let next = [self.clusters.next_at(), self.addresses.next_at()].into_iter().flatten().min();
            let Some(at) = next.filter(|at| *at <= through) else { break };
            self.clusters.apply_at(at, &mut self.now.clusters);
            self.addresses.apply_at(at, &mut self.now.addresses);
            if !self.gaps.iter().any(|(from, to)| *from < at && at < *to) {
                self.judge(at);
            }
        }
        self.gaps.retain(|(_, to)| *to > through);
    }

    fn judge(&mut self, at: Revision) {
        self.moments += 1;
        let moment = &self.now;
        let mut record = |breaches: Vec<Breach>, into: &mut Vec<String>| {
            for breach in breaches {
                if self.breached.insert(breach.id) {
                    into.push(format!("at resourceVersion {at}: {}", breach.what));
                }
            }
        };
        record(vip_rules::lost(moment), &mut self.lost);
        record(vip_rules::duplicated(moment), &mut self.duplicated);
    }

    /// Clusters that asked for a VIP, and how many of them had their endpoint written.
    pub fn counts(&self) -> (usize, usize) {
        (self.asked.len(), self.written.len())
    }

    /// The Clusters that asked for a VIP and were never seen with an endpoint.
    pub fn never_written(&self) -> Vec<&Key> {
        self.asked.iter().filter(|(uid, _)| !self.written.contains(*uid)).map(|(_, key)| key).collect()
    }

    /// Changes delivered by one watch and not judged, the other watch having not caught up.
    pub fn unjudged(&self) -> usize {
        self.clusters.pending.len() + self.addresses.pending.len()
    }

    /// What fresh lists of Clusters and VIP claims' `IPAddress`es say that the history does
    /// not. When they agree, the history has everything up to the lists (`at`, one per list):
    /// what is left is replayed.
    pub fn settle(
        &mut self,
        clusters: (&[(Key, ClusterSeen)], Revision),
        addresses: (&[(Key, AddressSeen)], Revision),
    ) -> Vec<String> {
        let mut differences = self.clusters.differences(clusters.0);
        differences.extend(self.addresses.differences(addresses.0));
        if differences.is_empty() {
            self.clusters.pass(clusters.1);
            self.addresses.pass(addresses.1);
            self.replay();
        }
        differences
    }
}

#[cfg(test)]
#[path = "vips_tests.rs"]
mod tests;
