//! An order-statistics index over a bitmap's used chunks, for the `Random` strategy: which
//! free offset is the k-th, in O(log n) expected for n used chunks.
//!
//! Each item is a partial chunk or a run of full chunks, keyed by its first chunk, with how
//! many offsets it covers and how many of them are used. Items live in a treap (a binary
//! search tree balanced by random priorities) whose nodes also carry the used count of their
//! subtree: the free offsets before an item's first offset are its first offset minus the used
//! offsets of every item before it. Chunks in no item are empty.

use std::cmp::Ordering;

use super::container::CHUNK_BITS;
use super::tally::Tally;

/// A partial chunk or a run of full chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) chunk: u128,
    pub(super) size: Tally,
    pub(super) used: Tally,
}

/// Where the k-th free offset lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// The `nth` free value (0-based) of the partial chunk `chunk`.
    InChunk { chunk: u128, nth: u32 },
    /// This offset, in an empty chunk.
    Offset(u128),
}

type Link = Option<Box<Node>>;

#[derive(Clone, Debug)]
struct Node {
    item: Item,
    priority: u64,
    subtree_used: Tally,
    left: Link,
    right: Link,
}

fn used(link: &Link) -> Tally {
    link.as_ref().map_or(Tally::ZERO, |node| node.subtree_used)
}

impl Node {
    fn new(item: Item) -> Box<Node> {
        Box::new(Node { item, priority: priority_of(item.chunk), subtree_used: item.used, left: None, right: None })
    }

    fn refresh(&mut self) {
        self.subtree_used = used(&self.left).add(self.item.used).add(used(&self.right));
    }
}

/// A priority spread from the key (splitmix64's finaliser): chunk numbers are not chosen by an
/// adversary, and the same index always has the same shape.
fn priority_of(chunk: u128) -> u64 {
    let mut z = (chunk as u64) ^ ((chunk >> 64) as u64).rotate_left(17);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `(keys < key, keys >= key)`.
fn split(link: Link, key: u128) -> (Link, Link) {
    let Some(mut node) = link else {
        return (None, None);
    };
    if node.item.chunk < key {
        let (middle, right) = split(node.right.take(), key);
        node.right = middle;
        node.refresh();
        (Some(node), right)
    } else {
        let (left, middle) = split(node.left.take(), key);
        node.left = middle;
        node.refresh();
        (left, Some(node))
    }
}

/// Joins two treaps, every key of `left` below every key of `right`.
fn merge(left: Link, right: Link) -> Link {
    match (left, right) {
        (None, other) | (other, None) => other,
        (Some(mut l), Some(mut r)) => match l.priority.cmp(&r.priority) {
            Ordering::Greater | Ordering::Equal => {
                l.right = merge(l.right.take(), Some(r));
                l.refresh();
                Some(l)
            }
            Ordering::Less => {
                r.left = merge(Some(l), r.left.take());
                r.refresh();
                Some(r)
            }
        },
    }
}

#[derive(Clone, Debug, Default)]
pub(super) struct RankIndex {
    root: Link,
}

impl RankIndex {
    /// Replaces the items keyed `first..=last` by `items` (ascending, inside that range).
    pub(super) fn replace(&mut self, first: u128, last: u128, items: impl IntoIterator<Item = Item>) {
        let (before, rest) = split(self.root.take(), first);
        let after = match last.checked_add(1) {
            Some(end) => split(rest, end).1,
            None => None,
        };
        let middle = items.into_iter().fold(None, |tree, item| merge(tree, Some(Node::new(item))));
        self.root = merge(merge(before, middle), after);
    }

    /// Where the `k`-th free offset (0-based) lies; `k` must be below the number of free offsets.
    pub(super) fn find_free(&self, k: u128) -> Found {
        let mut link = &self.root;
        let mut used_before = Tally::ZERO;
        while let Some(node) = link {
            let used_before_node = used_before.add(used(&node.left));
            let start = node.item.chunk << CHUNK_BITS;
            let free_before_node = start.saturating_sub(used_before_node.saturating());
            if k < free_before_node {
                link = &node.left;
                continue;
            }
            let free_here = node.item.size.sub(node.item.used).saturating();
            let nth = k - free_before_node;
            if nth < free_here {
                return Found::InChunk { chunk: node.item.chunk, nth: nth as u32 };
            }
            used_before = used_before_node.add(node.item.used);
            link = &node.right;
        }
        Found::Offset(k.saturating_add(used_before.saturating()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(chunk: u128, size: u128, used: u128) -> Item {
        Item { chunk, size: Tally::of(size), used: Tally::of(used) }
    }

    #[test]
    fn free_offsets_are_counted_past_used_items_and_inside_partial_ones() {
        let mut index = RankIndex::default();
        // Chunk 0 full, chunk 1 has 65,535 used (one free), chunks 2.. empty.
        index.replace(0, 1, [item(0, 65_536, 65_536), item(1, 65_536, 65_535)]);
        assert_eq!(index.find_free(0), Found::InChunk { chunk: 1, nth: 0 });
        assert_eq!(index.find_free(1), Found::Offset(2 << 16));
        index.replace(1, 1, []);
        assert_eq!(index.find_free(0), Found::Offset(1 << 16), "chunk 1 is empty now");
    }

    #[test]
    fn a_thousand_items_keep_every_rank_in_place() {
        let mut index = RankIndex::default();
        // Every even chunk full; odd chunks empty.
        for chunk in (0..2000).step_by(2) {
            index.replace(chunk, chunk, [item(chunk, 65_536, 65_536)]);
        }
        assert_eq!(index.find_free(0), Found::Offset(1 << 16));
        assert_eq!(index.find_free(65_536), Found::Offset(3 << 16));
        assert_eq!(index.find_free(65_536 * 999 + 5), Found::Offset((1999 << 16) + 5));
    }
}
