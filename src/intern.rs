//! Shared strings for the compact records of the claim store and the `IPAddress` cache.
//!
//! A hundred thousand claims name a handful of namespaces, pools, kinds, API groups, finalizers,
//! label keys and condition reasons. Each record keeps an [`Interned`] (one pointer, one count)
//! instead of a string of its own. Strings nobody holds any more are dropped by [`sweep`], which
//! the claim store runs after every listing, so deleted objects' names do not stay forever.

use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use crate::sync::lock;

/// A string kept once for every record that names it. Compares and hashes as its text.
///
/// One pointer wide: the text's length is kept with the text, behind the shared count, rather
/// than beside the pointer in every record (an `Arc<str>` is two words).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Interned(Arc<Box<str>>);

static TABLE: LazyLock<Mutex<HashSet<Interned>>> = LazyLock::new(Mutex::default);

impl Interned {
    /// The one shared copy of `text`.
    pub fn new(text: &str) -> Interned {
        let mut table = lock(&TABLE);
        if let Some(existing) = table.get(text) {
            return existing.clone();
        }
        let shared = Interned(Arc::new(text.into()));
        table.insert(shared.clone());
        shared
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
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Interned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Drops the strings no record holds any more. Returns how many are left.
pub fn sweep() -> usize {
    let mut table = lock(&TABLE);
    table.retain(|text| Arc::strong_count(&text.0) > 1);
    table.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_text_is_kept_once_and_dropped_when_nobody_holds_it() {
        let a = Interned::new("intern-test-namespace");
        let b = Interned::new("intern-test-namespace");
        assert!(Arc::ptr_eq(&a.0, &b.0), "the second record shares the first one's copy");
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "intern-test-namespace");
        drop((a, b));
        sweep();
        assert!(!lock(&TABLE).contains("intern-test-namespace"), "a string nobody holds is swept");
        let kept = Interned::new("intern-test-kept");
        sweep();
        assert!(lock(&TABLE).contains("intern-test-kept"), "a held string survives the sweep");
        drop(kept);
    }
}
