//! How the watches behave when the API server goes away: how soon they retry, what they tell
//! the health probe, and, for `IPAddress`es, a full relisting after every failure.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event};
use tracing::{debug, info, warn};

use crate::health::Health;
use crate::misconfig::{Misconfig, watch_problem};

use crate::client::api_errors::describe;

/// Retries of a failed watch: 250 ms, doubling up to 4 s, back to the start after a success.
/// (kube's default goes up to 30 s and resets only after two quiet minutes, so after an API
/// server restart the claims watch could stay away for half a minute.)
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    next: Duration,
}

const FIRST_RETRY: Duration = Duration::from_millis(250);
const LONGEST_RETRY: Duration = Duration::from_secs(4);

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff { next: FIRST_RETRY }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (self.next * 2).min(LONGEST_RETRY);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

/// The backoff of a controller's trigger stream: none. Each watch feeding it already backs off
/// with [`WatchBackoff`]; kube's default here (up to 30 s, reset only after two quiet minutes)
/// would hold a recovered watch back for as long again, so that after an API server restart
/// the claims were listed only 15-20 s after the server was ready.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExtraBackoff;

impl Iterator for NoExtraBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

impl Backoff for NoExtraBackoff {
    fn reset(&mut self) {}
}

/// What ERROR lines and `/readyz` call the watch of `kind`.
pub fn watch_object(kind: &str) -> String {
    format!("{WATCH_PREFIX}{kind}")
}

/// How [`watch_object`] names begin.
pub const WATCH_PREFIX: &str = "list/watch of ";

/// The API server's refusal behind a watch error, if it answered.
fn refusal(error: &watcher::Error) -> Option<kube::Error> {
    match error {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            match e {
                kube::Error::Api(status) => Some(kube::Error::Api(status.clone())),
                _ => None,
            }
        }
        watcher::Error::WatchError(status) => Some(kube::Error::Api(status.clone())),
        watcher::Error::NoResourceVersion => None,
    }
}

/// Tells the health probe how a watch fares: its first failure of a streak is a WARN, its
/// recovery an INFO, the retries between them debug. A refusal no retry can fix (RBAC, a kind
/// not served) is a misconfiguration instead: ERROR, metric, not ready.
pub fn watched<S, K>(
    name: &str,
    health: Health,
    misconfig: Misconfig,
    stream: S,
) -> impl Stream<Item = S::Item> + Send + use<S, K>
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
{
    let name = name.to_owned();
    let object = watch_object(&name);
    let mut listing = Listing::default();
    stream.inspect(move |item| match item {
        // A listing's start is not yet a success: its first page may still fail.
        Ok(Event::Init) => listing.started(),
        Ok(event) => {
            listing.saw(event, &name);
            misconfig.resolved(&object);
            if health.watch_ok(&name) {
                info!(watch = %name, "watch recovered");
            }
        }
        Err(error) => {
            let refused = refusal(error);
            if let Some((problem, refused)) = refused.as_ref().and_then(|r| Some((watch_problem(r)?, r))) {
                misconfig.report(problem, &object, "list", &describe(refused));
                health.watch_failed(&name);
            } else if health.watch_failed(&name) {
                warn!(watch = %name, %error, "watch failed; retrying with backoff");
            } else {
                debug!(watch = %name, %error, "watch still failing");
            }
        }
    })
}

/// Events a watch reads ahead of its consumer: two pages of a listing.
pub const READ_AHEAD: usize = 1024;

/// Reads `stream` ahead of its consumer, on a task of its own, holding up to `room` items.
///
/// A watcher asks for a listing's next page only once its consumer has taken every object of
/// the page before: the API server waits while ferro-ipam files a page, and ferro-ipam waits
/// while the API server reads the next one. Read ahead, the next page is on its way while this
/// one is filed. Items keep their order; the task ends when the stream ends or the consumer is
/// dropped (a term that ends), even while the watch waits for its next event.
pub fn read_ahead<S>(stream: S, room: usize) -> impl Stream<Item = S::Item> + Send + use<S>
where
    S: Stream + Send + 'static,
    S::Item: Send + 'static,
{
    futures::stream::once(async move {
        let (sender, receiver) = tokio::sync::mpsc::channel(room);
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            loop {
                let item = tokio::select! {
                    () = sender.closed() => return,
                    item = stream.next() => item,
                };
                let Some(item) = item else { return };
                if sender.send(item).await.is_err() {
                    return;
                }
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(receiver)
    })
    .flatten()
}

/// How long a listing took, and what it brought: said once it ends (at start-up, and after a
/// watch failure), so that a slow start can be told from a slow API server.
#[derive(Default)]
struct Listing {
    started: Option<std::time::Instant>,
    objects: usize,
}

impl Listing {
    fn started(&mut self) {
        *self = Listing { started: Some(std::time::Instant::now()), objects: 0 };
    }

    fn saw<K>(&mut self, event: &Event<K>, watch: &str) {
        match event {
            Event::InitApply(_) => self.objects += 1,
            Event::InitDone => {
                if let Some(started) = self.started.take() {
                    let seconds = format!("{:.2}", started.elapsed().as_secs_f64());
                    info!(watch = %watch, objects = self.objects, seconds = %seconds, "listed");
                }
            }
            _ => {}
        }
    }
}

/// A watch that lists everything again after each failure, instead of resuming: what changed
/// while it was down arrives as one listing whose end (`InitDone`) says the store and the index
/// are whole again. `start` makes a fresh watcher stream.
///
/// A fresh watcher says `Init` before it sends its first request. That `Init` is held back
/// until the listing's first answer: were it passed on before a failed request, it would count
/// as a success and reset the backoff, and the watch would retry at its shortest interval for
/// as long as the API server is away.
pub fn relisting<K: Send + 'static>(
    start: Arc<dyn Fn() -> BoxStream<'static, Result<Event<K>, watcher::Error>> + Send + Sync>,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send {
    type Item<K> = Result<Event<K>, watcher::Error>;
    type State<K> = (Option<BoxStream<'static, Item<K>>>, Option<Item<K>>);
    futures::stream::unfold((None, None), move |(current, pending): State<K>| {
        let start = start.clone();
        async move {
            if let Some(event) = pending {
                return Some((event, (current, None)));
            }
            let fresh = current.is_none();
            let mut stream = current.unwrap_or_else(|| start());
            let event = stream.next().await?;
            match event {
                Ok(Event::Init) if fresh => match stream.next().await {
                    Some(Err(error)) => Some((Err(error), (None, None))),
                    next => Some((Ok(Event::Init), (Some(stream), next))),
                },
                Ok(event) => Some((Ok(event), (Some(stream), None))),
                // Dropped: the next poll (after the backoff) starts over with a full listing.
                Err(error) => Some((Err(error), (None, None))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn retries_start_quick_stay_short_and_start_over_after_a_success() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<Duration> = backoff.by_ref().take(7).collect();
        assert_eq!(delays[0], Duration::from_millis(250));
        assert_eq!(*delays.iter().max().unwrap(), LONGEST_RETRY);
        backoff.reset();
        assert_eq!(backoff.next(), Some(FIRST_RETRY));
    }

    #[tokio::test]
    async fn a_failed_watch_starts_over_with_a_full_listing() {
        let started = Arc::new(AtomicUsize::new(0));
        let counter = started.clone();
        let start: Arc<dyn Fn() -> BoxStream<'static, Result<Event<ConfigMap>, watcher::Error>> + Send + Sync> =
            Arc::new(move || {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let mut events = vec![Ok(Event::Init), Ok(Event::InitDone)];
                if n == 0 {
                    events.push(Err(watcher::Error::NoResourceVersion));
                }
                futures::stream::iter(events).boxed()
            });
        let events: Vec<String> = relisting(start)
            .map(|e| match e {
                Ok(Event::Init) => "init".to_owned(),
                Ok(Event::InitDone) => "done".to_owned(),
                Ok(_) => "other".to_owned(),
                Err(_) => "error".to_owned(),
            })
            .collect()
            .await;
        assert_eq!(events, ["init", "done", "error", "init", "done"]);
        assert_eq!(started.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_listing_that_fails_at_once_shows_no_init_so_the_backoff_keeps_growing() {
        let started = Arc::new(AtomicUsize::new(0));
        let counter = started.clone();
        let start: Arc<dyn Fn() -> BoxStream<'static, Result<Event<ConfigMap>, watcher::Error>> + Send + Sync> =
            Arc::new(move || {
                let events = match counter.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => vec![Ok(Event::Init), Err(watcher::Error::NoResourceVersion)],
                    _ => vec![Ok(Event::Init), Ok(Event::InitDone)],
                };
                futures::stream::iter(events).boxed()
            });
        let events: Vec<&str> = relisting(start)
            .map(|e| match e {
                Ok(Event::Init) => "init",
                Ok(Event::InitDone) => "done",
                Ok(_) => "other",
                Err(_) => "error",
            })
            .collect()
            .await;
        assert_eq!(events, ["error", "error", "init", "done"]);
    }

    #[tokio::test]
    async fn a_read_ahead_stream_takes_the_next_items_before_they_are_asked_for_and_keeps_their_order() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let pulled = Arc::new(AtomicUsize::new(0));
        let counted = pulled.clone();
        let source = futures::stream::iter(0..100).inspect(move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let mut ahead = std::pin::pin!(read_ahead(source, 10));
        assert_eq!(ahead.next().await, Some(0));
        // The task fills the room while the consumer holds the first item.
        tokio::time::timeout(Duration::from_secs(5), async {
            while pulled.load(Ordering::SeqCst) < 11 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the items after the first were read ahead");
        let rest: Vec<i32> = ahead.collect().await;
        assert_eq!(rest, (1..100).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_read_ahead_task_ends_with_its_consumer_while_the_watch_waits() {
        struct Dropped(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let guard = Dropped(dropped.clone());
        // One event, then a watch that waits for ever, holding the guard.
        let source = futures::stream::iter([1]).chain(futures::stream::pending::<i32>().map(move |n| {
            let _ = &guard;
            n
        }));
        let mut ahead = Box::pin(read_ahead(source, 4));
        assert_eq!(ahead.next().await, Some(1));
        drop(ahead);
        tokio::time::timeout(Duration::from_secs(5), async {
            while !dropped.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the watch was dropped with its consumer");
    }
}
