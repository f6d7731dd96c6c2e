//! The write fence: whether this process may write allocation state right now.
//!
//! A leader opens the fence until the renew deadline of its last successful renewal, counted on
//! the local monotonic clock. Once that moment passes, every write is refused, whatever the
//! reconciles in flight believe, and before any other replica can have seen the lease expire.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Shared, cheap to clone.
#[derive(Clone, Debug)]
pub struct Fence {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The origin of the nanosecond offsets below.
    base: Instant,
    /// Writes are allowed while `now - base` is below this many nanoseconds.
    open_until: AtomicU64,
    /// Counts the openings, for [`Fence::wait_open`].
    opened: tokio::sync::watch::Sender<u64>,
}

/// A write was refused: the lease may no longer be ours.
#[derive(Debug, thiserror::Error)]
#[error("write refused: this replica's leader lease is past its renew deadline")]
pub struct Fenced;

/// The fence of a process without leader election: always open.
impl Default for Fence {
    fn default() -> Self {
        Fence::always_open()
    }
}

impl Fence {
    fn with(open_until: u64) -> Fence {
        let (opened, _) = tokio::sync::watch::channel(0);
        Fence { inner: Arc::new(Inner { base: Instant::now(), open_until: AtomicU64::new(open_until), opened }) }
    }

    /// A fence that never closes: the process runs without leader election.
    pub fn always_open() -> Fence {
        Fence::with(u64::MAX)
    }

    /// A closed fence, opened by [`Fence::open_until`] once the lease is held.
    pub fn closed() -> Fence {
        Fence::with(0)
    }

    fn offset(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.inner.base).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Allows writes until `until`.
    pub fn open_until(&self, until: Instant) {
        self.inner.open_until.store(self.offset(until), Ordering::SeqCst);
        self.inner.opened.send_modify(|n| *n += 1);
    }

    /// Waits until writes are allowed. A reconcile of a suspended term waits here rather than
    /// fail its writes; when the term ends instead, the reconcile is dropped with it.
    pub async fn wait_open(&self) {
        let mut opened = self.inner.opened.subscribe();
        while !self.is_open() {
            // The sender lives as long as `self`.
            if opened.changed().await.is_err() {
                return;
            }
        }
    }

    /// Refuses writes from now on.
    pub fn close(&self) {
        self.inner.open_until.store(0, Ordering::SeqCst);
    }

    /// How long writes stay allowed, or None when they are not.
    pub fn remaining(&self) -> Option<Duration> {
        let until = self.inner.open_until.load(Ordering::SeqCst);
        if until == u64::MAX {
            return Some(Duration::MAX);
        }
        let now = self.offset(Instant::now());
        (now < until).then(|| Duration::from_nanos(until - now))
    }

    pub fn is_open(&self) -> bool {
        self.remaining().is_some()
    }

    /// Ok while writes are allowed.
    pub fn check(&self) -> Result<(), Fenced> {
        if self.is_open() { Ok(()) } else { Err(Fenced) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_fence_refuses_and_an_opened_one_allows_until_its_deadline() {
        let fence = Fence::closed();
        assert!(fence.check().is_err());
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(fence.check().is_ok());
        assert!(fence.remaining().unwrap() <= Duration::from_secs(60));
        fence.open_until(Instant::now());
        assert!(fence.check().is_err(), "a deadline that has passed closes the fence by itself");
    }

    #[test]
    fn close_refuses_at_once_and_clones_share_the_state() {
        let fence = Fence::closed();
        let writer = fence.clone();
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(writer.is_open());
        fence.close();
        assert!(!writer.is_open());
    }

    #[tokio::test]
    async fn a_wait_for_the_fence_ends_when_it_opens() {
        let fence = Fence::closed();
        let waiting = tokio::spawn({
            let fence = fence.clone();
            async move { fence.wait_open().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        fence.open_until(Instant::now() + Duration::from_secs(60));
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        Fence::always_open().wait_open().await;
    }

    #[test]
    fn without_leader_election_the_fence_never_closes_by_time() {
        assert_eq!(Fence::always_open().remaining(), Some(Duration::MAX));
    }
}
