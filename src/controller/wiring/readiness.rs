//! The gate that marks the index ready once every watch feeding it has listed once.
//!
//! The gate counts its own: each [`ReadinessGate::listing`] hands out one [`FirstListing`] for one
//! watch, and the index turns ready when the gate is closed and every handle handed out has
//! reported its first listing. No number of watches is written down anywhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tracing::debug;

use crate::index::Index;

/// Hands out one [`FirstListing`] per watch; the index turns ready after the last has listed.
pub struct ReadinessGate {
    shared: Arc<Shared>,
}

/// One watch's part of the gate: [`FirstListing::listed`] after the watch's first complete listing.
pub struct FirstListing {
    shared: Arc<Shared>,
    done: AtomicBool,
}

struct Shared {
    /// The handles handed out that have not listed yet, plus one for the open gate, so that a
    /// handle listing before the last is handed out cannot make the index ready early.
    pending: AtomicUsize,
    index: Index,
}

impl Shared {
    fn count_down(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.index.set_ready();
            debug!("index complete: claims may allocate");
        }
    }
}

impl ReadinessGate {
    /// An open gate for `index`; nothing is ready before [`ReadinessGate::close`].
    pub fn new(index: &Index) -> Self {
        ReadinessGate { shared: Arc::new(Shared { pending: AtomicUsize::new(1), index: index.clone() }) }
    }

    /// One more watch to wait for.
    pub fn listing(&self) -> FirstListing {
        self.shared.pending.fetch_add(1, Ordering::SeqCst);
        FirstListing { shared: self.shared.clone(), done: AtomicBool::new(false) }
    }

    /// Every watch has its handle: the index turns ready once they have all listed.
    pub fn close(self) {}
}

impl Drop for ReadinessGate {
    fn drop(&mut self) {
        self.shared.count_down();
    }
}

impl FirstListing {
    /// This watch has listed; only its first call counts.
    pub fn listed(&self) {
        if !self.done.swap(true, Ordering::SeqCst) {
            self.shared.count_down();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_index_is_ready_only_once_every_handle_has_listed_and_a_repeat_counts_once() {
        let (index, _triggers) = Index::new(Duration::ZERO);
        let gate = ReadinessGate::new(&index);
        let (first, second, third) = (gate.listing(), gate.listing(), gate.listing());
        gate.close();

        first.listed();
        first.listed();
        second.listed();
        second.listed();
        assert!(!index.is_ready(), "two handles listing twice are still two of three");
        third.listed();
        assert!(index.is_ready());
    }

    #[test]
    fn every_handle_listing_before_the_gate_closes_is_not_yet_ready() {
        let (index, _triggers) = Index::new(Duration::ZERO);
        let gate = ReadinessGate::new(&index);
        gate.listing().listed();
        assert!(!index.is_ready(), "a later watch may still be handed its handle");
        let late = gate.listing();
        gate.close();
        assert!(!index.is_ready(), "the late watch has not listed");
        late.listed();
        assert!(index.is_ready());
    }
}
