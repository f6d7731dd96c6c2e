//! Who holds which address in one pool: each holder's holds, found by holder and by address.
//!
//! A holder (a claim and the `IPAddress` of its name) holds at most two addresses: the one its
//! object records and the one its claim was given, nearly always the same. Both lookups, by
//! holder and by address, lead to one slot per holder, so the holder's key and its addresses
//! are kept once:
//!
//! - slots in chunks of 1,024 (the first grows as a `Vec` does, so a pool of a few claims
//!   keeps room for a few), a holder's address kept once when object and claim agree;
//! - two tables of 4-byte slot ids, one hashed by holder, one by address (an entry for each
//!   distinct address of a slot, which of its two the entry's low bit says).
//!
//! Two maps, holder to holds and address to holders, took about 180 bytes per holder at 20,000
//! (by a heap profile; see docs/perf-notes.md for how to take one); by the sizes above, this keeps
//! about 60.

use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;

use hashbrown::HashTable;

use super::keys::HolderKey;

/// Slots in a chunk, past the first.
const CHUNK: usize = 1024;

/// A holder's holds: the address its `IPAddress` object records, and the one its claim holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    pub object: Option<IpAddr>,
    pub claim: Option<IpAddr>,
}

impl Holds {
    /// Whether either hold is on `ip`.
    pub fn uses(&self, ip: IpAddr) -> bool {
        self.object == Some(ip) || self.claim == Some(ip)
    }

    /// The addresses held, each once.
    pub fn addresses(self) -> impl Iterator<Item = IpAddr> {
        let object = self.object;
        object.into_iter().chain(self.claim.filter(move |claim| Some(*claim) != object))
    }
}

/// Holds as a slot keeps them: one address when object and claim agree or only one holds,
/// two (in an allocation of their own, as seldom as a conflict) when they differ.
#[derive(Debug)]
enum Packed {
    Object(IpAddr),
    Claim(IpAddr),
    Both(IpAddr),
    Apart(Box<[IpAddr; 2]>),
}

impl Packed {
    /// None for no holds at all: such a holder has no slot.
    fn of(holds: Holds) -> Option<Packed> {
        Some(match (holds.object, holds.claim) {
            (None, None) => return None,
            (Some(object), None) => Packed::Object(object),
            (None, Some(claim)) => Packed::Claim(claim),
            (Some(object), Some(claim)) if object == claim => Packed::Both(object),
            (Some(object), Some(claim)) => Packed::Apart(Box::new([object, claim])),
        })
    }

    fn holds(&self) -> Holds {
        match self {
            Packed::Object(ip) => Holds { object: Some(*ip), claim: None },
            Packed::Claim(ip) => Holds { object: None, claim: Some(*ip) },
            Packed::Both(ip) => Holds { object: Some(*ip), claim: Some(*ip) },
            Packed::Apart(both) => Holds { object: Some(both[0]), claim: Some(both[1]) },
        }
    }

    /// The slot's distinct addresses: the first (`which` 0), and the claim's when it differs (1).
    fn address(&self, which: u32) -> Option<IpAddr> {
        match (self, which) {
            (Packed::Object(ip) | Packed::Claim(ip) | Packed::Both(ip), 0) => Some(*ip),
            (Packed::Apart(both), 0) => Some(both[0]),
            (Packed::Apart(both), 1) => Some(both[1]),
            _ => None,
        }
    }

    /// The slot's distinct addresses with their `which`, without borrowing the slot.
    fn addresses(&self) -> impl Iterator<Item = (u32, IpAddr)> + use<> {
        [0, 1].map(|which| self.address(which).map(|ip| (which, ip))).into_iter().flatten()
    }
}

#[derive(Debug)]
struct Slot {
    holder: HolderKey,
    holds: Packed,
}

/// An entry of the address table: a slot id and which of its addresses.
fn entry(id: u32, which: u32) -> u32 {
    id << 1 | which
}

fn split(entry: u32) -> (u32, u32) {
    (entry >> 1, entry & 1)
}

/// The holds of one pool's holders.
pub struct Holdings {
    chunks: Vec<Vec<Option<Slot>>>,
    /// Ids of emptied slots, used again before a new one.
    free: Vec<u32>,
    by_holder: HashTable<u32>,
    by_address: HashTable<u32>,
    /// How many distinct addresses are held.
    addresses: usize,
    hasher: RandomState,
}

impl Default for Holdings {
    fn default() -> Self {
        Holdings {
            chunks: Vec::new(),
            free: Vec::new(),
            by_holder: HashTable::new(),
            by_address: HashTable::new(),
            addresses: 0,
            hasher: RandomState::new(),
        }
    }
}

fn at(id: u32) -> (usize, usize) {
    (id as usize / CHUNK, id as usize % CHUNK)
}

fn slot_in(chunks: &[Vec<Option<Slot>>], id: u32) -> Option<&Slot> {
    let (chunk, offset) = at(id);
    chunks.get(chunk)?.get(offset)?.as_ref()
}

impl Holdings {
    fn slot(&self, id: u32) -> Option<&Slot> {
        slot_in(&self.chunks, id)
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Option<Slot>> {
        let (chunk, offset) = at(id);
        self.chunks.get_mut(chunk)?.get_mut(offset)
    }

    fn find(&self, hash: u64, holder: &HolderKey) -> Option<u32> {
        self.by_holder.find(hash, |&id| self.slot(id).is_some_and(|s| s.holder == *holder)).copied()
    }

    /// The holds of `holder`; none when it holds nothing.
    pub fn get(&self, holder: &HolderKey) -> Holds {
        self.find(self.hasher.hash_one(holder), holder)
            .and_then(|id| self.slot(id))
            .map_or_else(Holds::default, |slot| slot.holds.holds())
    }

    /// Sets the holds of `holder`; no holds forgets it.
    pub fn set(&mut self, holder: &HolderKey, holds: Holds) {
        let hash = self.hasher.hash_one(holder);
        let found = self.find(hash, holder);
        let packed = Packed::of(holds);
        let id = match (found, packed.is_some()) {
            (None, false) => return,
            (Some(id), _) => {
                self.unlist_addresses(id);
                id
            }
            (None, true) => self.new_slot(hash, holder),
        };
        match packed {
            Some(packed) => {
                if let Some(Some(slot)) = self.slot_mut(id) {
                    slot.holds = packed;
                }
                self.list_addresses(id);
            }
            None => {
                if let Ok(found) = self.by_holder.find_entry(hash, |&other| other == id) {
                    found.remove();
                }
                if let Some(slot) = self.slot_mut(id) {
                    *slot = None;
                }
                self.free.push(id);
            }
        }
    }

    /// A slot for a holder not held yet, found by holder from now on; its holds follow.
    fn new_slot(&mut self, hash: u64, holder: &HolderKey) -> u32 {
        // Whatever holds it, a slot's first value is replaced at once.
        let placeholder = Slot { holder: holder.clone(), holds: Packed::Object(IpAddr::from([0, 0, 0, 0])) };
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.slot_mut(id) {
                    *slot = Some(placeholder);
                }
                id
            }
            None => {
                if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
                    // The first chunk grows as a Vec does; later ones are made whole.
                    let room = if self.chunks.is_empty() { 0 } else { CHUNK };
                    self.chunks.push(Vec::with_capacity(room));
                }
                let chunk = self.chunks.len() - 1;
                let last = &mut self.chunks[chunk];
                last.push(Some(placeholder));
                u32::try_from(chunk * CHUNK + last.len() - 1).expect("fewer than 2^31 holders in a pool")
            }
        };
        let Holdings { chunks, by_holder, hasher, .. } = self;
        by_holder.insert_unique(hash, id, |&id| {
            hasher.hash_one(&slot_in(chunks, id).expect("every id in the table has a slot").holder)
        });
        id
    }

    /// Files the slot's addresses in the address table.
    fn list_addresses(&mut self, id: u32) {
        let Some(slot) = self.slot(id) else { return };
        for (which, ip) in slot.holds.addresses() {
            if self.users_of(ip) == 0 {
                self.addresses += 1;
            }
            let hash = self.hasher.hash_one(ip);
            let Holdings { chunks, by_address, hasher, .. } = self;
            by_address.insert_unique(hash, entry(id, which), |&e| {
                let (id, which) = split(e);
                let slot = slot_in(chunks, id).expect("every entry in the table has a slot");
                hasher.hash_one(slot.holds.address(which).expect("every entry names an address of its slot"))
            });
        }
    }

    /// Takes the slot's addresses out of the address table.
    fn unlist_addresses(&mut self, id: u32) {
        let Some(slot) = self.slot(id) else { return };
        for (which, ip) in slot.holds.addresses() {
            let wanted = entry(id, which);
            if let Ok(found) = self.by_address.find_entry(self.hasher.hash_one(ip), |&e| e == wanted) {
                found.remove();
            }
            if self.users_of(ip) == 0 {
                self.addresses -= 1;
            }
        }
    }

    /// The holders of `ip`.
    pub fn users(&self, ip: IpAddr) -> impl Iterator<Item = &HolderKey> + '_ {
        self.by_address.iter_hash(self.hasher.hash_one(ip)).filter_map(move |&e| {
            let (id, which) = split(e);
            self.slot(id).filter(|slot| slot.holds.address(which) == Some(ip)).map(|slot| &slot.holder)
        })
    }

    /// How many holders hold `ip`.
    pub fn users_of(&self, ip: IpAddr) -> usize {
        self.users(ip).count()
    }

    /// How many distinct addresses are held.
    pub fn address_count(&self) -> usize {
        self.addresses
    }

    /// Every held address, once each, in order.
    pub fn addresses(&self) -> Vec<IpAddr> {
        let mut all: Vec<IpAddr> = self.slots().flat_map(|slot| slot.holds.addresses().map(|(_, ip)| ip)).collect();
        all.sort_unstable();
        all.dedup();
        all
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.chunks.iter().flatten().flatten()
    }

    /// Every holder with its holds.
    pub fn iter(&self) -> impl Iterator<Item = (&HolderKey, Holds)> + '_ {
        self.slots().map(|slot| (&slot.holder, slot.holds.holds()))
    }

    /// Whether no holder holds anything.
    pub fn is_empty(&self) -> bool {
        self.by_holder.is_empty()
    }
}

#[cfg(test)]
#[path = "holdings_tests.rs"]
mod tests;
