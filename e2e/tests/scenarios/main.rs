//! End-to-end scenarios: the real `ferro-ipam` binary against a real kube-apiserver and etcd.
//! Each scenario has its own namespace (and provider); all share one control plane.

mod addresses;
mod answers;
mod consumers;
mod crash;
mod extensions;
mod in_cluster;
mod lifecycle;
mod operations;
mod prefix;
mod prefix_status;
mod providers;
mod purpose;
mod reservations;
mod strategy;
mod tenancy;
mod validation;
mod vip;

use std::time::Duration;

/// How long a scenario waits for something ferro-ipam should do promptly.
pub const PROMPTLY: Duration = Duration::from_secs(20);
/// How long a scenario watches for something that must not happen.
pub const A_WHILE: Duration = Duration::from_secs(3);
