//! What a claim reconcile asks of the work queue when it ends.

use std::time::Duration;

/// Whether and when to reconcile the claim again if nothing triggers it: kube's `Action`, with
/// the delay readable by ferro-ipam's own queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Again after `duration`, unless something triggers it before.
    pub const fn requeue(duration: Duration) -> Action {
        Action { requeue_after: Some(duration) }
    }

    /// Only when something triggers it.
    pub const fn await_change() -> Action {
        Action { requeue_after: None }
    }

    pub const fn requeue_after(self) -> Option<Duration> {
        self.requeue_after
    }
}
