//! Shared strings for the compact records of the claim store and the `IPAddress` cache, and
//! for the index's holder keys.
//!
//! A hundred thousand claims name a handful of namespaces, pools, kinds, API groups, finalizers,
//! label keys and condition reasons. Each record keeps an [`Interned`] (one pointer) instead of a
//! string of its own. A claim's name is interned too: the claim's record, the record of its
//! `IPAddress` (which has the same name) and the index's [`HolderKey`](crate::index::HolderKey)s
//! of the two share one copy.
//!
//! Strings nobody holds any more are dropped by a sweep: the stores run [`sweep`] after every
//! listing, and the table sweeps itself whenever it has doubled since its last sweep, so the
//! names of deleted claims go without a listing, and the table never holds more dead strings
//! than live ones (and at least a thousand before it looks).

use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::{LazyLock, Mutex};

use arcstr::ArcStr;

use crate::sync::lock;

/// A string kept once for every record that names it. Compares and hashes as its text.
///
/// One pointer wide, one allocation: the count and the length are kept with the text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Interned(ArcStr);

/// The table stops to sweep at this size at the earliest.
const FIRST_SWEEP: usize = 1024;

/// Every interned string, and how many were left after the last sweep.
#[derive(Default)]
struct Table {
    strings: HashSet<Interned>,
    swept_to: usize,
}

impl Table {
    fn intern(&mut self, text: &str) -> Interned {
        if let Some(existing) = self.strings.get(text) {
            return existing.clone();
        }
        if self.strings.len() >= (2 * self.swept_to).max(FIRST_SWEEP) {
            self.sweep();
        }
        let shared = Interned(ArcStr::from(text));
        self.strings.insert(shared.clone());
        shared
    }

    fn sweep(&mut self) -> usize {
        // The table's own copy is one count; a literal (no count) is never dropped anyway.
        self.strings.retain(|text| ArcStr::strong_count(&text.0).is_none_or(|count| count > 1));
        self.swept_to = self.strings.len();
        self.swept_to
    }
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

impl Interned {
    /// The one shared copy of `text`.
    pub fn new(text: &str) -> Interned {
        lock(&TABLE).intern(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Interned {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Interned {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Interned {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Drops the strings no record holds any more. Returns how many are left.
pub fn sweep() -> usize {
    lock(&TABLE).sweep()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_is_kept_once_and_dropped_when_nobody_holds_it() {
        let a = Interned::new("intern-test-namespace");
        let b = Interned::new("intern-test-namespace");
        assert!(ArcStr::ptr_eq(&a.0, &b.0), "the second record shares the first one's copy");
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "intern-test-namespace");
        drop((a, b));
        sweep();
        assert!(!lock(&TABLE).strings.contains("intern-test-namespace"), "a string nobody holds is swept");
        let kept = Interned::new("intern-test-kept");
        sweep();
        assert!(lock(&TABLE).strings.contains("intern-test-kept"), "a held string survives the sweep");
        drop(kept);
    }

    /// Claims come and go between listings: the names of the deleted ones must not pile up.
    #[test]
    fn a_table_that_doubled_sweeps_itself_and_keeps_what_is_held() {
        let mut table = Table::default();
        let held: Vec<Interned> = (0..FIRST_SWEEP / 2).map(|n| table.intern(&format!("held-{n}"))).collect();
        for n in 0..10 * FIRST_SWEEP {
            drop(table.intern(&format!("gone-{n}")));
            assert!(
                table.strings.len() <= FIRST_SWEEP.max(2 * held.len()),
                "{} strings after {n}",
                table.strings.len()
            );
        }
        assert!(!table.strings.contains("gone-0"), "the first dead name was swept");
        for (n, text) in held.iter().enumerate() {
            assert!(ArcStr::ptr_eq(&table.intern(&format!("held-{n}")).0, &text.0), "a held string is the same copy");
        }
    }
}
