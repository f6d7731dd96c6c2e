//! Leader election's decisions, as client-go's leader election makes them (pure). Leader
//! election (`run`) and the watch of other providers' Leases (`other_provider`) both judge a
//! Lease this way, so the module stands apart from both.
//!
//! Wall-clock times in the Lease are written by whichever replica holds it, on its own clock, so
//! they are never compared with the local clock. A replica instead notes, on its own monotonic
//! clock, when it first saw the Lease record as it is now; a record that stays unchanged for a
//! whole lease duration after that belongs to a holder that stopped renewing.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// What this replica may do with the Lease as last observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// This replica holds it: renew.
    Ours,
    /// Nobody holds it (never held, or released): take it.
    Free,
    /// Its holder has not renewed it for a whole lease duration: take it.
    Expired,
    /// Another replica holds it, for at least this long yet.
    HeldBy { holder: String, left: Duration },
}

impl Verdict {
    /// Who holds the lease, as a log line names them.
    pub fn holder(&self) -> &str {
        match self {
            Verdict::HeldBy { holder, .. } => holder,
            _ => "another replica",
        }
    }
}

impl Verdict {
    pub fn may_take(&self) -> bool {
        !matches!(self, Verdict::HeldBy { .. })
    }
}

/// The Lease record as last observed, and since when it has looked like that.
#[derive(Debug, Default)]
pub struct Observer {
    seen: Option<(LeaseSpec, Instant)>,
}

impl Observer {
    /// Notes the record as read (or written) at `now`.
    pub fn observe(&mut self, spec: &LeaseSpec, now: Instant) {
        match &self.seen {
            Some((record, _)) if record == spec => {}
            _ => self.seen = Some((spec.clone(), now)),
        }
    }

    /// Forgets the record, so that the next read starts the count again.
    pub fn forget(&mut self) {
        self.seen = None;
    }

    /// What `me` may do, at `now`, with the last observed record.
    pub fn verdict(&self, me: &str, now: Instant) -> Verdict {
        let Some((record, since)) = &self.seen else {
            return Verdict::Free;
        };
        match record.holder_identity.as_deref() {
            None | Some("") => Verdict::Free,
            Some(holder) if holder == me => Verdict::Ours,
            Some(holder) => {
                let duration =
                    Duration::from_secs(u64::try_from(record.lease_duration_seconds.unwrap_or(1)).unwrap_or(1).max(1));
                let expires = *since + duration;
                if now >= expires {
                    Verdict::Expired
                } else {
                    Verdict::HeldBy { holder: holder.to_owned(), left: expires - now }
                }
            }
        }
    }
}

/// The record `me` writes to take or renew the Lease at wall-clock time `now` (informational:
/// no replica compares these times with its own clock).
pub fn claimed(current: Option<&LeaseSpec>, me: &str, duration: Duration, now: Timestamp) -> LeaseSpec {
    let previous = current.and_then(|c| c.holder_identity.as_deref()).filter(|h| !h.is_empty());
    let renewing = previous == Some(me);
    let transitions = current.and_then(|c| c.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_owned()),
        lease_duration_seconds: Some(i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)),
        acquire_time: match current {
            Some(c) if renewing => c.acquire_time.clone(),
            _ => Some(MicroTime(now)),
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if renewing || previous.is_none() { transitions } else { transitions + 1 }),
        ..LeaseSpec::default()
    }
}

/// The record that gives the Lease up: no holder, so the next replica takes it at once.
pub fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(now)),
        ..current.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(4);

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(4),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_lease_renewed_by_its_holder_is_never_taken() {
        let start = Instant::now();
        let mut observer = Observer::default();
        for n in 0..10 {
            let now = start + Duration::from_secs(2 * n);
            observer.observe(&held_by("other", 1000 + 2 * n as i64), now);
            assert!(!observer.verdict("me", now + Duration::from_millis(3900)).may_take(), "renewal {n}");
        }
    }

    #[test]
    fn a_record_unchanged_for_a_lease_duration_on_the_local_clock_has_expired() {
        let start = Instant::now();
        let mut observer = Observer::default();
        observer.observe(&held_by("other", 1000), start);
        // Seeing the same record again does not restart the count.
        observer.observe(&held_by("other", 1000), start + Duration::from_secs(3));
        assert_eq!(
            observer.verdict("me", start + Duration::from_secs(3)),
            Verdict::HeldBy { holder: "other".into(), left: Duration::from_secs(1) }
        );
        assert_eq!(observer.verdict("me", start + LEASE), Verdict::Expired);
    }

    #[test]
    fn wall_clock_times_in_the_record_are_never_compared_with_the_local_clock() {
        // A renewTime far in the past (or a standby whose clock runs far ahead) changes nothing:
        // only the time the record stayed unchanged counts.
        let start = Instant::now();
        let mut observer = Observer::default();
        observer.observe(&held_by("other", 0), start);
        assert!(!observer.verdict("me", start + Duration::from_secs(1)).may_take());
        let mut ahead = Observer::default();
        ahead.observe(&held_by("other", i64::from(i32::MAX)), start);
        assert_eq!(ahead.verdict("me", start + LEASE), Verdict::Expired);
    }

    #[test]
    fn a_released_or_unheld_lease_is_free_and_our_own_is_ours() {
        let now = Instant::now();
        let mut observer = Observer::default();
        assert_eq!(observer.verdict("me", now), Verdict::Free);
        observer.observe(&released(&held_by("other", 5), Timestamp::UNIX_EPOCH), now);
        assert_eq!(observer.verdict("me", now), Verdict::Free);
        observer.observe(&held_by("me", 5), now);
        assert_eq!(observer.verdict("me", now), Verdict::Ours);
    }

    #[test]
    fn taking_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let t0 = Timestamp::from_second(100).unwrap();
        let t1 = Timestamp::from_second(102).unwrap();
        let mut theirs = held_by("other", 90);
        theirs.lease_transitions = Some(3);
        let taken = claimed(Some(&theirs), "me", LEASE, t0);
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        assert_eq!(taken.lease_transitions, Some(4));
        assert_eq!(taken.acquire_time, Some(MicroTime(t0)));
        let renewed = claimed(Some(&taken), "me", LEASE, t1);
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.acquire_time, Some(MicroTime(t0)));
        assert_eq!(renewed.renew_time, Some(MicroTime(t1)));
        assert_ne!(renewed, taken, "a renewal changes the record, which is how standbys see it alive");
        let first = claimed(None, "me", LEASE, t0);
        assert_eq!(first.lease_transitions, Some(0));
        assert_eq!(first.lease_duration_seconds, Some(4));
    }
}
