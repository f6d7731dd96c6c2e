//! How long a claim waited for its address, from the first time the claim controller saw it
//! without one until its `IPAddress` was written (the allocation latency histogram).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::index::HolderKey;
use crate::sync::lock;

/// When each claim still waiting for its address was first seen.
#[derive(Default)]
pub struct Latency {
    first_seen: Mutex<HashMap<HolderKey, Instant>>,
}

impl Latency {
    /// Notes the first time a claim without an address is seen.
    pub fn seen(&self, holder: &HolderKey) {
        let mut seen = lock(&self.first_seen);
        seen.entry(holder.clone()).or_insert_with(Instant::now);
    }

    /// How long a claim has waited since it was first seen, forgetting it.
    pub fn waited(&self, holder: &HolderKey) -> Option<Duration> {
        let mut seen = lock(&self.first_seen);
        seen.remove(holder).map(|since| since.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_measured_once_from_the_first_sight() {
        let latency = Latency::default();
        let holder = HolderKey::new("ns", "c");
        assert_eq!(latency.waited(&holder), None, "never seen");
        latency.seen(&holder);
        std::thread::sleep(Duration::from_millis(20));
        latency.seen(&holder);
        let waited = latency.waited(&holder).expect("seen");
        assert!(waited >= Duration::from_millis(20), "counted from the first sight: {waited:?}");
        assert_eq!(latency.waited(&holder), None, "forgotten once measured");
    }
}
