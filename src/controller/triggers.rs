//! What wakes a controller: the objects its watch reports, with relistings handled as a whole.
//!
//! A watch that is restarted (a 410 Gone after an API server restart or an etcd compaction, or
//! any reconnect that must list again) delivers the listing object by object (`InitApply`),
//! but the reflector's store swaps the new listing in only at its end (`InitDone`). A reconcile
//! started for an `InitApply` object looks it up in the store before that swap: an object created
//! while the watch was down is not there yet, so the reconcile is skipped ("not found in local
//! store"), and others are reconciled from their stale versions. Nothing triggers them again once
//! the store is current, so claims created during an outage were never served.
//!
//! Here a listing's objects trigger nothing one by one; its end triggers every object in the
//! store, which by then holds the new listing.

use futures::{Stream, StreamExt, future};
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

/// The objects to reconcile one by one (created, changed or deleted), from a reflector's event stream. At each listing's end
/// `relisted` runs (it sends to `Controller::reconcile_all_on` streams, see [`relistings`]).
pub fn objects<K, S>(
    events: S,
    mut relisted: impl FnMut() + Send,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    K: Send,
{
    events.filter_map(move |event| {
        let object = match event {
            Ok(Event::Apply(object) | Event::Delete(object)) => Some(Ok(object)),
            Ok(Event::InitDone) => {
                relisted();
                None
            }
            Ok(Event::Init | Event::InitApply(_)) => None,
            Err(error) => Some(Err(error)),
        };
        future::ready(object)
    })
}

/// A signal every `period`, for `Controller::reconcile_all_on` (`--sync-period`).
pub fn every(period: std::time::Duration) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}

/// A signal for `Controller::reconcile_all_on`, and the function that sends it.
pub fn relistings() -> (impl Fn() + Clone + Send + Sync + 'static, impl Stream<Item = ()> + Send + 'static) {
    let (tx, rx) = mpsc::unbounded_channel();
    // The receiver is gone only while the controller shuts down.
    let send = move || {
        let _ = tx.send(());
    };
    (send, tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::{self, ObjectRef};

    fn object(name: &str) -> ConfigMap {
        ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() }, ..ConfigMap::default() }
    }

    #[tokio::test]
    async fn objects_of_a_relisting_are_reconciled_only_once_the_store_holds_them() {
        let (store, writer) = reflector::store::<ConfigMap>();
        let (tx, relisted) = relistings();
        // A first listing, a change, then a relisting that brings an object created meanwhile.
        let events = futures::stream::iter(vec![
            Ok(Event::Init),
            Ok(Event::InitApply(object("old"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(object("old"))),
            Ok(Event::Init),
            Ok(Event::InitApply(object("old"))),
            Ok(Event::InitApply(object("created-while-down"))),
            Ok(Event::InitDone),
        ]);
        let mut seen_in_store = Vec::new();
        let tx_keep = tx.clone();
        let emitted: Vec<String> = objects(reflector::reflector(writer, events), tx)
            .map(|o| {
                let o = o.unwrap();
                // What the controller would find when it runs the reconcile.
                seen_in_store.push(store.get(&ObjectRef::from_obj(&o)).is_some());
                o.metadata.name.unwrap()
            })
            .collect()
            .await;
        assert_eq!(emitted, vec!["old"], "only the change is reconciled one by one");
        assert!(seen_in_store.iter().all(|s| *s));
        drop(tx_keep);
        assert_eq!(relisted.take(2).count().await, 2, "each listing's end reconciles all");
        assert!(store.get(&ObjectRef::new("created-while-down")).is_some(), "and by then the store holds it");
    }

    #[tokio::test]
    async fn a_deletion_wakes_the_controller() {
        let (tx, _relisted) = relistings();
        let events = futures::stream::iter(vec![Ok(Event::Delete(object("gone")))]);
        assert_eq!(objects(events, tx).count().await, 1);
    }
}
