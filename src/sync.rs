//! Locks taken whether or not they are poisoned.
//!
//! A lock is poisoned when a thread panicked while holding it. Every critical section in
//! ferro-ipam leaves its data consistent at each point it could panic, so the data behind a
//! poisoned lock is as good as any; and a panic in one reconcile or watch must not stop every
//! other part of the controller that shares the lock (for the index: every allocation).

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// `mutex` locked, poisoned or not (see the module).
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `rwlock` read-locked, poisoned or not (see the module).
pub(crate) fn read<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    rwlock.read().unwrap_or_else(PoisonError::into_inner)
}

/// `rwlock` write-locked, poisoned or not (see the module).
pub(crate) fn write<T: ?Sized>(rwlock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    rwlock.write().unwrap_or_else(PoisonError::into_inner)
}
