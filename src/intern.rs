//! Shared strings and shapes for the compact records of the claim store and the `IPAddress`
//! cache, and for the index's holder keys.
//!
//! A hundred thousand claims name a handful of namespaces, pools, kinds, API groups, finalizers,
//! label keys and condition reasons. Each record keeps an [`Interned`] (one pointer) instead of a
//! string of its own. A claim's name is interned too: the claim's record, the record of its
//! `IPAddress` (which has the same name) and the index's [`HolderKey`](crate::index::HolderKey)s
//! of the two share one copy.
//!
//! Whole parts of a record are shared the same way: a [`Shared`] value (a record's *shape*: its
//! pool, finalizers, owner kinds, labels, ...) is kept once for every record whose part is equal,
//! in a table of its own type (see [`Shape`]).
//!
//! Values nobody holds any more are dropped by a sweep: the stores run [`sweep`] (and
//! [`sweep_shapes`]) after every listing, and each table sweeps itself whenever it has doubled
//! since its last sweep, so the names of deleted claims go without a listing, and a table never
//! holds more dead values than live ones (and at least a thousand before it looks).

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use arcstr::ArcStr;

use crate::sync::lock;

/// A string kept once for every record that names it. Compares and hashes as its text.
///
/// One pointer wide, one allocation: the count and the length are kept with the text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Interned(ArcStr);

/// A table stops to sweep at this size at the earliest.
const FIRST_SWEEP: usize = 1024;

/// A value a table keeps: it knows whether anybody but the table holds it.
pub trait Counted {
    fn held_elsewhere(&self) -> bool;
}

impl Counted for Interned {
    fn held_elsewhere(&self) -> bool {
        // The table's own copy is one count; a literal (no count) is never dropped anyway.
        ArcStr::strong_count(&self.0).is_none_or(|count| count > 1)
    }
}

/// Every value of one kind, and how many were left after the last sweep.
pub struct Table<K> {
    values: HashSet<K>,
    swept_to: usize,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table { values: HashSet::new(), swept_to: 0 }
    }
}

impl<K: Clone + Eq + Hash + Counted> Table<K> {
    fn find<Q: Hash + Eq + ?Sized>(&self, value: &Q) -> Option<K>
    where
        K: Borrow<Q>,
    {
        self.values.get(value).cloned()
    }

    /// Keeps `value`, which [`Table::find`] did not find.
    fn add(&mut self, value: K) -> K {
        if self.values.len() >= (2 * self.swept_to).max(FIRST_SWEEP) {
            self.sweep();
        }
        self.values.insert(value.clone());
        value
    }

    fn sweep(&mut self) -> usize {
        self.values.retain(Counted::held_elsewhere);
        self.swept_to = self.values.len();
        self.swept_to
    }
}

impl Table<Interned> {
    fn intern(&mut self, text: &str) -> Interned {
        match self.find(text) {
            Some(found) => found,
            None => self.add(Interned(ArcStr::from(text))),
        }
    }
}

static TABLE: LazyLock<Mutex<Table<Interned>>> = LazyLock::new(Mutex::default);

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

impl Borrow<str> for Interned {
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

/// A part of a record that many records have the same, kept once for all of them. Compares
/// and hashes as the value. One pointer wide.
pub struct Shared<T>(Arc<T>);

/// A kind of value kept as [`Shared`]: it names the table its values are kept in.
pub trait Shape: Hash + Eq + Send + Sync + Sized + 'static {
    fn table() -> &'static Mutex<Table<Shared<Self>>>;
}

impl<T: Shape> Shared<T> {
    /// The one shared copy of `value`.
    pub fn new(value: T) -> Shared<T> {
        let mut table = lock(T::table());
        match table.find(&value) {
            Some(found) => found,
            None => table.add(Shared(Arc::new(value))),
        }
    }
}

/// Drops the values of `T` no record holds any more. Returns how many are left. Run before
/// [`sweep`]: a shape holds strings.
pub fn sweep_shapes<T: Shape>() -> usize {
    lock(T::table()).sweep()
}

impl<T> Counted for Shared<T> {
    fn held_elsewhere(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Borrow<T> for Shared<T> {
    fn borrow(&self) -> &T {
        &self.0
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl<T: Eq> Eq for Shared<T> {}

impl<T: Hash> Hash for Shared<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq, Hash)]
    struct TestShape(u32, Interned);

    impl Shape for TestShape {
        fn table() -> &'static Mutex<Table<Shared<Self>>> {
            static TABLE: LazyLock<Mutex<Table<Shared<TestShape>>>> = LazyLock::new(Mutex::default);
            &TABLE
        }
    }

    #[test]
    fn equal_shapes_are_kept_once_and_dropped_when_nobody_holds_them() {
        let a = Shared::new(TestShape(1, Interned::new("intern-test-shape")));
        let b = Shared::new(TestShape(1, Interned::new("intern-test-shape")));
        let c = Shared::new(TestShape(2, Interned::new("intern-test-shape")));
        assert!(Arc::ptr_eq(&a.0, &b.0), "the second record shares the first one's shape");
        assert!(!Arc::ptr_eq(&a.0, &c.0) && a != c, "another value is another shape");
        assert_eq!(sweep_shapes::<TestShape>(), 2);
        drop((a, b));
        assert_eq!(sweep_shapes::<TestShape>(), 1, "a shape nobody holds is swept, a held one kept");
        assert_eq!(c.0.0, 2);
    }

    #[test]
    fn one_text_is_kept_once_and_dropped_when_nobody_holds_it() {
        let a = Interned::new("intern-test-namespace");
        let b = Interned::new("intern-test-namespace");
        assert!(ArcStr::ptr_eq(&a.0, &b.0), "the second record shares the first one's copy");
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "intern-test-namespace");
        drop((a, b));
        sweep();
        assert!(!lock(&TABLE).values.contains("intern-test-namespace"), "a string nobody holds is swept");
        let kept = Interned::new("intern-test-kept");
        sweep();
        assert!(lock(&TABLE).values.contains("intern-test-kept"), "a held string survives the sweep");
        drop(kept);
    }

    /// Claims come and go between listings: the names of the deleted ones must not pile up.
    #[test]
    fn a_table_that_doubled_sweeps_itself_and_keeps_what_is_held() {
        let mut table = Table::default();
        let held: Vec<Interned> = (0..FIRST_SWEEP / 2).map(|n| table.intern(&format!("held-{n}"))).collect();
        for n in 0..10 * FIRST_SWEEP {
            drop(table.intern(&format!("gone-{n}")));
            assert!(table.values.len() <= FIRST_SWEEP.max(2 * held.len()), "{} strings after {n}", table.values.len());
        }
        assert!(!table.values.contains("gone-0"), "the first dead name was swept");
        for (n, text) in held.iter().enumerate() {
            assert!(ArcStr::ptr_eq(&table.intern(&format!("held-{n}")).0, &text.0), "a held string is the same copy");
        }
    }
}
