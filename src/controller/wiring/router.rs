//! The index's triggers, routed to the controller of the object they name.

use std::future::Future;

use futures::StreamExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::api::{GlobalInClusterIPPool, GlobalInClusterPrefixPool, InClusterIPPool, InClusterPrefixPool};
use crate::index::{PoolKind, Trigger};

use super::claims::ClaimTriggers;
use super::support::drain;

/// The pool controllers' ends of the routes.
pub struct PoolRoutes {
    pub in_cluster: mpsc::UnboundedReceiver<ObjectRef<InClusterIPPool>>,
    pub global: mpsc::UnboundedReceiver<ObjectRef<GlobalInClusterIPPool>>,
    pub in_cluster_prefix: mpsc::UnboundedReceiver<ObjectRef<InClusterPrefixPool>>,
    pub global_prefix: mpsc::UnboundedReceiver<ObjectRef<GlobalInClusterPrefixPool>>,
}

/// Routes `triggers` to `claims` and to the pool controllers, until the
/// index is dropped.
pub fn route(
    triggers: mpsc::UnboundedReceiver<Trigger>,
    claims: ClaimTriggers,
) -> (PoolRoutes, impl Future<Output = ()> + Send) {
    let (in_cluster, in_cluster_rx) = mpsc::unbounded_channel();
    let (global, global_rx) = mpsc::unbounded_channel();
    let (in_cluster_prefix, in_cluster_prefix_rx) = mpsc::unbounded_channel();
    let (global_prefix, global_prefix_rx) = mpsc::unbounded_channel();
    // A send fails only while its controller shuts down.
    let router = drain(UnboundedReceiverStream::new(triggers).map(move |trigger| match trigger {
        Trigger::Claim(holder) => {
            claims.trigger(&holder.namespace, &holder.name);
        }
        Trigger::Pool(key) => match (key.kind, key.namespace) {
            (PoolKind::InCluster, Some(ns)) => {
                let _ = in_cluster.send(ObjectRef::new(&key.name).within(&ns));
            }
            (PoolKind::InClusterPrefix, Some(ns)) => {
                let _ = in_cluster_prefix.send(ObjectRef::new(&key.name).within(&ns));
            }
            (PoolKind::GlobalPrefix, _) => {
                let _ = global_prefix.send(ObjectRef::new(&key.name));
            }
            _ => {
                let _ = global.send(ObjectRef::new(&key.name));
            }
        },
    }));
    let routes = PoolRoutes {
        in_cluster: in_cluster_rx,
        global: global_rx,
        in_cluster_prefix: in_cluster_prefix_rx,
        global_prefix: global_prefix_rx,
    };
    (routes, router)
}
