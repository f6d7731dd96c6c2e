//! Which cached versions of a claim this instance has already written over.
//!
//! After a write, the watch cache still holds the version that was written over until the watch
//! delivers the new one. A reconcile of that cached version would repeat the write: a finalizer
//! patch guarded by the old `resourceVersion` meets `409 Conflict`, a status patch is sent again.
//! Such a reconcile can wait instead: the watch delivers the write and triggers the claim again.
//!
//! Resource versions are opaque: only equality is used. Any other version, ours or someone
//! else's, is acted on, and so is every version once the memory of a write is older than
//! `max_age` (nothing waits forever on a watch that lags).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::sync::lock;

/// How many outdated versions are kept per claim (one reconcile writes at most twice).
const VERSIONS_PER_CLAIM: usize = 4;

struct Written {
    /// Versions written over, oldest first.
    outdated: Vec<String>,
    /// When the last of them was written over.
    at: Instant,
}

/// Outdated versions per claim UID. Shared by all reconciles.
pub struct OwnWrites {
    max_age: Duration,
    claims: Mutex<HashMap<String, Written>>,
}

impl OwnWrites {
    pub fn new(max_age: Duration) -> Self {
        OwnWrites { max_age, claims: Mutex::default() }
    }

    fn claims(&self) -> MutexGuard<'_, HashMap<String, Written>> {
        // The map holds no invariant a panicking holder could break.
        lock(&self.claims)
    }

    /// Whether `version` of claim `uid` is one this instance wrote over recently: the watch has
    /// not caught up with the write yet, and will trigger the claim again when it does.
    pub fn outdated(&self, uid: &str, version: &str) -> bool {
        self.outdated_at(uid, version, Instant::now())
    }

    fn outdated_at(&self, uid: &str, version: &str, now: Instant) -> bool {
        let mut claims = self.claims();
        let Some(written) = claims.get(uid) else {
            return false;
        };
        if now.saturating_duration_since(written.at) <= self.max_age && written.outdated.iter().any(|v| v == version) {
            return true;
        }
        // The cache caught up (or someone else wrote, or the memory is too old): act, and forget.
        claims.remove(uid);
        false
    }

    /// A write of claim `uid` replaced version `acted_on` by version `written`.
    pub fn wrote(&self, uid: &str, acted_on: &str, written: &str) {
        self.wrote_at(uid, acted_on, written, Instant::now());
    }

    fn wrote_at(&self, uid: &str, acted_on: &str, written: &str, now: Instant) {
        // A write that changed nothing brings no watch event: nothing to wait for.
        if uid.is_empty() || acted_on.is_empty() || acted_on == written {
            return;
        }
        let mut claims = self.claims();
        let entry = claims.entry(uid.to_owned()).or_insert_with(|| Written { outdated: Vec::new(), at: now });
        if now.saturating_duration_since(entry.at) > self.max_age {
            entry.outdated.clear();
        }
        if !entry.outdated.iter().any(|v| v == acted_on) {
            if entry.outdated.len() == VERSIONS_PER_CLAIM {
                entry.outdated.remove(0);
            }
            entry.outdated.push(acted_on.to_owned());
        }
        entry.at = now;
    }

    /// Forgets a claim (released or gone).
    pub fn forget(&self, uid: &str) {
        self.claims().remove(uid);
    }

    /// Forgets every memory older than `max_age` (claims deleted without a reconcile).
    pub fn expire(&self) {
        self.expire_at(Instant::now());
    }

    fn expire_at(&self, now: Instant) {
        let max_age = self.max_age;
        self.claims().retain(|_, w| now.saturating_duration_since(w.at) <= max_age);
    }

    /// How many claims are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.claims().len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGE: Duration = Duration::from_secs(30);

    #[test]
    fn the_version_written_over_waits_and_any_other_proceeds() {
        let writes = OwnWrites::new(AGE);
        let t = Instant::now();
        assert!(!writes.outdated_at("u", "1", t));
        writes.wrote_at("u", "1", "2", t);
        assert!(writes.outdated_at("u", "1", t));
        assert!(!writes.outdated_at("other", "1", t));
        // Our own write, or anyone else's: act on it, and the memory is gone.
        assert!(!writes.outdated_at("u", "2", t));
        assert!(!writes.outdated_at("u", "1", t));
        assert!(writes.is_empty());
    }

    #[test]
    fn both_versions_of_a_reconcile_that_wrote_twice_wait() {
        let writes = OwnWrites::new(AGE);
        let t = Instant::now();
        writes.wrote_at("u", "1", "2", t); // finalizer
        writes.wrote_at("u", "2", "3", t); // status, on the object the finalizer patch returned
        assert!(writes.outdated_at("u", "1", t));
        assert!(writes.outdated_at("u", "2", t));
        assert!(!writes.outdated_at("u", "3", t));
    }

    #[test]
    fn a_write_that_changed_nothing_or_has_no_version_is_not_remembered() {
        let writes = OwnWrites::new(AGE);
        let t = Instant::now();
        writes.wrote_at("u", "5", "5", t);
        writes.wrote_at("u", "", "6", t);
        writes.wrote_at("", "5", "6", t);
        assert!(writes.is_empty());
        assert!(!writes.outdated_at("u", "5", t));
    }

    #[test]
    fn an_old_memory_never_holds_a_claim() {
        let writes = OwnWrites::new(AGE);
        let t = Instant::now();
        writes.wrote_at("u", "1", "2", t);
        assert!(!writes.outdated_at("u", "1", t + AGE + Duration::from_millis(1)));
        writes.wrote_at("v", "1", "2", t);
        writes.wrote_at("w", "1", "2", t + AGE);
        writes.expire_at(t + AGE + Duration::from_millis(1));
        assert_eq!(writes.len(), 1);
        assert!(writes.outdated_at("w", "1", t + AGE));
    }

    #[test]
    fn a_new_write_after_an_old_one_starts_afresh() {
        let writes = OwnWrites::new(AGE);
        let t = Instant::now();
        writes.wrote_at("u", "1", "2", t);
        writes.wrote_at("u", "7", "8", t + AGE * 2);
        assert!(!writes.outdated_at("u", "1", t + AGE * 2));
        writes.wrote_at("u", "7", "8", t + AGE * 2);
        assert!(writes.outdated_at("u", "7", t + AGE * 2));
    }

    #[test]
    fn released_claims_are_forgotten_and_versions_stay_bounded() {
        let writes = OwnWrites::new(AGE);
        let t = Instant::now();
        for v in 0..10 {
            writes.wrote_at("u", &v.to_string(), &(v + 1).to_string(), t);
        }
        assert!(!writes.outdated_at("u", "0", t));
        for v in 0..10 {
            writes.wrote_at("u", &v.to_string(), &(v + 1).to_string(), t);
        }
        assert!(writes.outdated_at("u", "9", t));
        writes.forget("u");
        assert!(writes.is_empty());
    }
}
