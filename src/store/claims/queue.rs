//! The claim controller's work queue, keyed by the claim store's dense ids.
//!
//! The same policy as kube's controller runner: an id is queued at most once (a bitset says
//! whether it is), never reconciled twice at once (a trigger that arrives meanwhile runs it
//! again right after), and a requeue after a delay is dropped when the id is reconciled before
//! it falls due. Two lanes:
//! - **urgent**: claims triggered by their watch events, the index, their Cluster, or a
//!   requeue falling due: new and changed claims;
//! - **background**: claims already settled (their `IPAddress` held in the index, consistent
//!   with the claim) that are verified by a full reconcile once nothing urgent is queued, at
//!   most `background_per_second`. A trigger moves a background id to the urgent lane.
//!
//! Per claim it keeps four bits and a 32-bit epoch; only queued ids take a slot of a lane.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::bits::Bits;
use crate::sync::lock;

/// Background verifications in a burst, after a pause.
const BACKGROUND_BURST: f64 = 50.0;

pub struct WorkQueue {
    state: Mutex<State>,
    wake: Notify,
}

struct State {
    urgent: VecDeque<u32>,
    background: VecDeque<u32>,
    in_urgent: Bits,
    in_background: Bits,
    running: Bits,
    /// Triggered while running: urgent again once the reconcile ends.
    again: Bits,
    /// Bumped when an id's reconcile starts: a requeue of an older epoch is dropped.
    epochs: Vec<u32>,
    timers: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Background tokens: refilled at `per_second`, up to [`BACKGROUND_BURST`].
    tokens: f64,
    per_second: f64,
    refilled: Instant,
}

impl WorkQueue {
    pub fn new(background_per_second: u32) -> Arc<WorkQueue> {
        Arc::new(WorkQueue {
            state: Mutex::new(State {
                urgent: VecDeque::new(),
                background: VecDeque::new(),
                in_urgent: Bits::default(),
                in_background: Bits::default(),
                running: Bits::default(),
                again: Bits::default(),
                epochs: Vec::new(),
                timers: BinaryHeap::new(),
                tokens: BACKGROUND_BURST,
                per_second: f64::from(background_per_second.max(1)),
                refilled: Instant::now(),
            }),
            wake: Notify::new(),
        })
    }

    /// Queues `id` in the urgent lane.
    pub fn trigger(&self, id: u32) {
        lock(&self.state).trigger(id);
        self.wake.notify_one();
    }

    /// Queues `id` for a background verification, unless it is queued or running already.
    pub fn defer(&self, id: u32) {
        lock(&self.state).defer(id);
        self.wake.notify_one();
    }

    /// Runs `work` on queued ids, at most `concurrency` at once, until `shutdown`; then waits
    /// for the reconciles running. `work` returns the requeue it asks for.
    pub async fn run<F, Fut>(self: Arc<Self>, concurrency: usize, shutdown: impl Future<Output = ()>, work: F)
    where
        F: Fn(u32) -> Fut,
        Fut: Future<Output = Option<Duration>>,
    {
        let concurrency = concurrency.max(1);
        let mut running = FuturesUnordered::new();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut stopping = false;
        loop {
            let deadline = {
                let mut state = lock(&self.state);
                let now = Instant::now();
                while !stopping && running.len() < concurrency {
                    let Some(id) = state.pop(now) else { break };
                    let work = work(id);
                    running.push(async move { (id, work.await) });
                }
                state.deadline()
            };
            if stopping && running.is_empty() {
                return;
            }
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some((id, requeue)) = running.next(), if !running.is_empty() => {
                    lock(&self.state).done(id, requeue, Instant::now());
                }
                () = self.wake.notified(), if !stopping => {}
                () = sleep, if !stopping => {}
                () = &mut shutdown, if !stopping => stopping = true,
            }
        }
    }
}

impl State {
    fn trigger(&mut self, id: u32) {
        if self.running.contains(id) {
            self.again.insert(id);
        } else if self.in_urgent.insert(id) {
            // A stale background entry is skipped when it comes up.
            self.in_background.remove(id);
            self.urgent.push_back(id);
        }
    }

    fn defer(&mut self, id: u32) {
        if !self.running.contains(id) && !self.in_urgent.contains(id) && self.in_background.insert(id) {
            self.background.push_back(id);
        }
    }

    fn epoch(&mut self, id: u32) -> &mut u32 {
        let at = id as usize;
        if at >= self.epochs.len() {
            self.epochs.resize(at + 1, 0);
        }
        &mut self.epochs[at]
    }

    /// The next id to reconcile now: a due requeue or a trigger first, then a background one if
    /// nothing urgent waits and a token is left.
    fn pop(&mut self, now: Instant) -> Option<u32> {
        while let Some(&Reverse((at, id, epoch))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if *self.epoch(id) == epoch {
                self.trigger(id);
            }
        }
        while let Some(id) = self.urgent.pop_front() {
            if self.in_urgent.remove(id) {
                return Some(self.start(id));
            }
        }
        self.refill(now);
        while self.tokens >= 1.0 {
            let id = self.background.pop_front()?;
            if self.in_background.remove(id) {
                self.tokens -= 1.0;
                return Some(self.start(id));
            }
        }
        None
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(BACKGROUND_BURST);
        self.refilled = now;
    }

    fn start(&mut self, id: u32) -> u32 {
        self.running.insert(id);
        let epoch = self.epoch(id);
        *epoch = epoch.wrapping_add(1);
        id
    }

    fn done(&mut self, id: u32, requeue: Option<Duration>, now: Instant) {
        self.running.remove(id);
        if self.again.remove(id) {
            self.trigger(id);
        } else if let Some(after) = requeue {
            let epoch = *self.epoch(id);
            self.timers.push(Reverse((now + after, id, epoch)));
        }
    }

    /// When `pop` may next have something without a new trigger.
    fn deadline(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|Reverse((at, _, _))| *at);
        let token = (!self.background.is_empty() && self.urgent.is_empty() && self.tokens < 1.0)
            .then(|| self.refilled + Duration::from_secs_f64((1.0 - self.tokens) / self.per_second));
        match (timer, token) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::mpsc;

    fn state() -> State {
        Arc::into_inner(WorkQueue::new(10)).expect("one owner").state.into_inner().expect("not poisoned")
    }

    #[test]
    fn an_id_is_queued_once_and_urgent_work_goes_before_background_work() {
        let mut s = state();
        let now = Instant::now();
        s.defer(1);
        s.defer(1);
        s.trigger(2);
        s.trigger(2);
        s.defer(2);
        assert_eq!(s.pop(now), Some(2), "the trigger goes first");
        assert_eq!(s.pop(now), Some(1));
        assert_eq!(s.pop(now), None, "each was queued once");
    }

    #[test]
    fn a_trigger_moves_a_background_id_to_the_urgent_lane() {
        let mut s = state();
        let now = Instant::now();
        s.defer(5);
        s.defer(6);
        s.trigger(6);
        assert_eq!(s.pop(now), Some(6));
        assert_eq!(s.pop(now), Some(5));
        assert_eq!(s.pop(now), None, "the stale background entry of 6 is skipped");
    }

    #[test]
    fn a_trigger_while_running_runs_it_again_after_and_never_twice_at_once() {
        let mut s = state();
        let now = Instant::now();
        s.trigger(3);
        assert_eq!(s.pop(now), Some(3));
        s.trigger(3);
        assert_eq!(s.pop(now), None, "not while it runs");
        s.done(3, Some(Duration::from_secs(60)), now);
        assert_eq!(s.pop(now), Some(3), "right after");
        s.done(3, None, now);
        assert_eq!(s.pop(now + Duration::from_secs(61)), None, "the dropped requeue does not fire");
    }

    #[test]
    fn a_requeue_fires_when_due_unless_the_id_ran_before() {
        let mut s = state();
        let now = Instant::now();
        s.trigger(4);
        s.trigger(8);
        assert_eq!(s.pop(now), Some(4));
        assert_eq!(s.pop(now), Some(8));
        s.done(4, Some(Duration::from_secs(5)), now);
        s.done(8, Some(Duration::from_secs(5)), now);
        assert_eq!(s.deadline(), Some(now + Duration::from_secs(5)));
        assert_eq!(s.pop(now + Duration::from_secs(4)), None);
        s.trigger(8);
        assert_eq!(s.pop(now + Duration::from_secs(4)), Some(8), "8 ran before its requeue");
        s.done(8, None, now + Duration::from_secs(4));
        assert_eq!(s.pop(now + Duration::from_secs(5)), Some(4), "4's requeue fell due");
        assert_eq!(s.pop(now + Duration::from_secs(5)), None, "8's requeue was dropped");
    }

    #[test]
    fn background_work_is_paced_and_waits_for_the_urgent_lane() {
        let mut s = state();
        let now = Instant::now();
        s.refilled = now;
        for id in 0..100 {
            s.defer(id);
        }
        s.trigger(500);
        assert_eq!(s.pop(now), Some(500));
        let burst = std::iter::from_fn(|| s.pop(now)).count();
        assert_eq!(burst as f64, BACKGROUND_BURST, "a burst, then nothing until tokens come back");
        let later = now + Duration::from_secs(1);
        assert_eq!(std::iter::from_fn(|| s.pop(later)).count(), 10, "ten a second");
        assert!(s.deadline().is_some_and(|at| at > later), "the next token is in the future");
    }

    #[tokio::test(start_paused = true)]
    async fn run_keeps_to_its_concurrency_and_ends_after_the_running_work() {
        let queue = WorkQueue::new(1000);
        for id in 0..20 {
            queue.trigger(id);
        }
        let (in_flight, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let runner = {
            let (in_flight, most) = (in_flight.clone(), most.clone());
            tokio::spawn(queue.clone().run(4, async move { stop_rx.await.unwrap_or(()) }, move |id| {
                let (in_flight, most, done_tx) = (in_flight.clone(), most.clone(), done_tx.clone());
                async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let _ = done_tx.send(id);
                    None
                }
            }))
        };
        let mut seen = Vec::new();
        while seen.len() < 20 {
            seen.push(done_rx.recv().await.expect("work reports"));
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..20).collect::<Vec<_>>(), "every id once");
        assert_eq!(most.load(Ordering::SeqCst), 4);
        let _ = stop_tx.send(());
        runner.await.expect("the runner ends on shutdown");
    }
}
