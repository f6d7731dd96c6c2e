//! The e2e harness: a real kube-apiserver and etcd on loopback, the real `ferro-ipam` binary
//! against it, and helpers the scenarios share. Every process started here is killed when its
//! handle drops, and with the test process at the latest.

pub mod certs;
pub mod clock;
pub mod cluster;
pub mod cluster_writes;
pub mod contract;
pub mod demo;
pub mod gotools;
pub mod https;
pub mod invariants;
pub mod leadership;
pub mod objects;
pub mod peer;
pub mod plane;
pub mod process;
pub mod prometheus;
pub mod provider;
pub mod proxy;

pub use peer::Peer;
pub use plane::{ControlPlane, Tools};
pub use provider::Provider;
