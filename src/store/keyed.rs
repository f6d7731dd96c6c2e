//! Records under dense ids, found by namespace and name: the shape of both the claim store and
//! the `IPAddress` cache.
//!
//! The records live in fixed-size chunks, so the table never holds more than one chunk of room
//! it does not use, and growing it never copies a record (a `Vec` doubles: at 20,000 records it
//! would hold room for 32,768). The lookup table holds only the id, four bytes a slot; the
//! namespace and name live once, in the record.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

/// Records in a chunk: 1,024 of about a hundred bytes or two, a few hundred kilobytes.
const CHUNK: usize = 1024;

/// What a record is found by.
pub trait Named {
    fn namespace(&self) -> &str;
    fn name(&self) -> &str;
}

/// Records of type `R` under dense ids.
pub struct Keyed<R> {
    chunks: Vec<Box<[Option<R>]>>,
    /// Ids of emptied slots, used again before the table grows.
    free: Vec<u32>,
    /// One past the highest id ever handed out.
    end: u32,
    ids: HashTable<u32>,
    hasher: RandomState,
}

impl<R: Named> Default for Keyed<R> {
    fn default() -> Self {
        Keyed { chunks: Vec::new(), free: Vec::new(), end: 0, ids: HashTable::new(), hasher: RandomState::new() }
    }
}

fn at(id: u32) -> (usize, usize) {
    (id as usize / CHUNK, id as usize % CHUNK)
}

impl<R: Named> Keyed<R> {
    fn slot(&self, id: u32) -> Option<&Option<R>> {
        let (chunk, offset) = at(id);
        self.chunks.get(chunk).map(|c| &c[offset])
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Option<R>> {
        let (chunk, offset) = at(id);
        self.chunks.get_mut(chunk).map(|c| &mut c[offset])
    }

    /// The record of this id.
    pub fn get(&self, id: u32) -> Option<&R> {
        self.slot(id)?.as_ref()
    }

    /// The id of the record of this namespace and name.
    pub fn find(&self, namespace: &str, name: &str) -> Option<u32> {
        self.find_hashed(self.hasher.hash_one((namespace, name)), namespace, name)
    }

    fn find_hashed(&self, hash: u64, namespace: &str, name: &str) -> Option<u32> {
        self.ids.find(hash, |&id| self.get(id).is_some_and(|r| r.namespace() == namespace && r.name() == name)).copied()
    }

    /// Files `record`, in place of the one of its namespace and name if there is one; its id.
    pub fn upsert(&mut self, record: R) -> u32 {
        let hash = self.hasher.hash_one((record.namespace(), record.name()));
        if let Some(id) = self.find_hashed(hash, record.namespace(), record.name()) {
            if let Some(slot) = self.slot_mut(id) {
                *slot = Some(record);
            }
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = self.end;
                self.end = id.checked_add(1).expect("fewer than 2^32 records");
                if at(id).0 == self.chunks.len() {
                    self.chunks.push(std::iter::repeat_with(|| None).take(CHUNK).collect());
                }
                id
            }
        };
        if let Some(slot) = self.slot_mut(id) {
            *slot = Some(record);
        }
        let Keyed { chunks, ids, hasher, .. } = self;
        ids.insert_unique(hash, id, |&id| {
            let (chunk, offset) = at(id);
            let record = chunks[chunk][offset].as_ref().expect("every id in the table has a record");
            hasher.hash_one((record.namespace(), record.name()))
        });
        id
    }

    /// Takes the record of this id out; its id is free for another.
    pub fn remove(&mut self, id: u32) -> Option<R> {
        let record = self.slot_mut(id)?.take()?;
        let hash = self.hasher.hash_one((record.namespace(), record.name()));
        if let Ok(entry) = self.ids.find_entry(hash, |&other| other == id) {
            entry.remove();
        }
        self.free.push(id);
        Some(record)
    }

    /// Every id that has a record, in order.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.end).filter(|&id| self.get(id).is_some())
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rec(&'static str, String, u32);

    impl Named for Rec {
        fn namespace(&self) -> &str {
            self.0
        }
        fn name(&self) -> &str {
            &self.1
        }
    }

    #[test]
    fn records_keep_their_id_are_found_by_name_and_freed_ids_are_used_again() {
        let mut table = Keyed::default();
        let a = table.upsert(Rec("ns", "a".into(), 1));
        let b = table.upsert(Rec("other", "a".into(), 2));
        assert_ne!(a, b, "the same name in another namespace is another record");
        assert_eq!(table.upsert(Rec("ns", "a".into(), 3)), a, "a change keeps the id");
        assert_eq!(table.get(a).map(|r| r.2), Some(3));
        assert_eq!(table.find("ns", "a"), Some(a));
        assert_eq!(table.find("other", "a"), Some(b));
        assert_eq!(table.find("ns", "b"), None);
        assert_eq!(table.remove(a).map(|r| r.2), Some(3));
        assert_eq!(table.remove(a).map(|r| r.2), None, "removed once");
        assert_eq!(table.find("ns", "a"), None);
        assert_eq!(table.upsert(Rec("ns", "c".into(), 4)), a, "a freed id is used again");
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn thousands_of_records_across_chunks_are_each_found_again() {
        let mut table = Keyed::default();
        let count = CHUNK * 3 + 7;
        let ids: Vec<u32> = (0..count).map(|n| table.upsert(Rec("ns", format!("c-{n}"), n as u32))).collect();
        for n in (0..count).step_by(3) {
            assert!(table.remove(ids[n]).is_some());
        }
        for (n, &id) in ids.iter().enumerate() {
            let found = table.find("ns", &format!("c-{n}"));
            assert_eq!(found.is_some(), n % 3 != 0, "c-{n}");
            if found.is_some() {
                assert_eq!(found, Some(id));
                assert_eq!(table.get(id).map(|r| r.2), Some(n as u32));
            }
        }
        assert_eq!(table.ids().count(), table.len());
        assert_eq!(table.chunks.len(), count.div_ceil(CHUNK), "room for one chunk at most beyond the records");
    }
}
