//! What the checker found: the rules (rules.rs) and the counts (counts.rs) both add to it.

/// Findings are fatal (they cannot be a moment of catching up) or pending (statuses and
/// deletions the controllers may still be writing), looked at again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    pub fatal: Vec<String>,
    pub pending: Vec<String>,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.fatal.is_empty() && self.pending.is_empty()
    }
}
