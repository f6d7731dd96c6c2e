//! Pools by use, the fastest-filling first (pure: no client).
//!
//! Counts come from each pool's status (as the controller wrote it); the filling rate from the
//! `IPAddress` objects of the pool created in the last hour, or, when the metrics endpoint is
//! given, from its allocation and release counters over a few seconds. On a hub, each shared
//! pool's blocks leased to each spoke, from the granted `AddressBlock`s.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use serde::Serialize;

use crate::api::hub::{SHARED_LABEL, SPOKE_LABEL};
use crate::feed::{PoolObject, block_pool, granted};
use crate::index::PoolKey;
use crate::preflight::gather::Inventory;

use super::pools::{self, Pool};

/// How far back the filling rate looks.
const WINDOW: SignedDuration = SignedDuration::from_hours(1);

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Top {
    pub pools: Vec<Row>,
    /// On a hub: each shared pool with the blocks its spokes hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<Shared>,
}

/// A hub's pool shared with spokes (labelled `hub.ferro-ipam.dev/shared`, or holding granted
/// blocks).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Shared {
    pub pool: String,
    /// Each spoke holding blocks of it, by its namespace in the hub.
    pub spokes: Vec<SpokeUsage>,
}

/// What one spoke holds of a shared pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SpokeUsage {
    /// The spoke: the `hub.ferro-ipam.dev/spoke` label of its namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    /// Its namespace in the hub, where its `AddressBlock`s are.
    pub namespace: String,
    /// Granted blocks.
    pub blocks: usize,
    /// Addresses in those blocks.
    pub addresses: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Row {
    pub pool: String,
    pub strategy: String,
    /// From `status.ipAddresses`; absent until the controller has written the pool's status.
    pub total: Option<i64>,
    pub used: Option<i64>,
    pub free: Option<i64>,
    pub reserved: Option<i64>,
    /// `used / total`, in percent.
    pub percent_used: Option<f64>,
    /// `IPAddress` objects of the pool created in the last hour.
    pub last_hour: usize,
    /// Net addresses gained per hour (allocations minus releases), from the metrics endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_per_hour: Option<f64>,
    /// Hours until no address is free: at the metrics' net rate when given, else at the last
    /// hour's.
    pub hours_to_full: Option<f64>,
    /// The pool's `Ready` condition: reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
}

fn row(pool: &Pool<'_>, created_lately: usize, net_per_hour: Option<f64>) -> Row {
    let counts = pool.status.and_then(|s| s.ip_addresses.as_ref());
    let percent_used = counts.filter(|c| c.total > 0).map(|c| 100.0 * c.used as f64 / c.total as f64);
    // The metrics' rate, when given, is the newer and counts releases too.
    let per_hour = net_per_hour.unwrap_or(created_lately as f64);
    let hours_to_full = counts.filter(|_| per_hour > 0.0).map(|c| c.free.max(0) as f64 / per_hour);
    let ready = pool.status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready")).map(|c| c.reason.clone());
    Row {
        pool: pool.key.to_string(),
        strategy: pool.spec.strategy().to_string(),
        total: counts.map(|c| c.total),
        used: counts.map(|c| c.used),
        free: counts.map(|c| c.free),
        reserved: counts.and_then(|c| c.reserved),
        percent_used,
        last_hour: created_lately,
        net_per_hour,
        hours_to_full,
        ready,
    }
}

/// Fastest-filling first (fewest hours to full), then the fullest.
fn order(a: &Row, b: &Row) -> Ordering {
    let to_full = |r: &Row| r.hours_to_full.unwrap_or(f64::INFINITY);
    to_full(a)
        .total_cmp(&to_full(b))
        .then_with(|| b.percent_used.unwrap_or(-1.0).total_cmp(&a.percent_used.unwrap_or(-1.0)))
        .then_with(|| a.pool.cmp(&b.pool))
}

/// The pools (of `namespace` only, when given), ordered; `filling` is each pool's net gain per
/// hour from the metrics endpoint, when it was read.
pub(super) fn answer(
    inventory: &Inventory,
    namespace: Option<&str>,
    now: Timestamp,
    filling: Option<&BTreeMap<String, f64>>,
) -> Top {
    let since = now.checked_sub(WINDOW).unwrap_or(now);
    let created_lately = |key: &PoolKey| {
        inventory
            .addresses
            .iter()
            .filter(|a| a.metadata.creation_timestamp.as_ref().is_some_and(|t| t.0 >= since))
            .filter(|a| {
                let ns = a.namespace().unwrap_or_default();
                PoolKey::of_address(&ns, &a.spec.pool_ref, a.annotations()).as_ref() == Some(key)
            })
            .count()
    };
    let mut rows: Vec<Row> = pools::all(inventory)
        .iter()
        .filter(|p| namespace.is_none_or(|ns| p.key.namespace.as_deref() == Some(ns)))
        .map(|p| {
            let net = filling.map(|rates| rates.get(&p.key.to_string()).copied().unwrap_or(0.0));
            row(p, created_lately(&p.key), net)
        })
        .collect();
    rows.sort_by(order);
    Top { pools: rows, shared: shared(inventory, namespace) }
}

/// Each shared pool (of `namespace` only, when given) with its spokes' granted blocks.
fn shared(inventory: &Inventory, namespace: Option<&str>) -> Vec<Shared> {
    let mut pools: BTreeMap<PoolKey, BTreeMap<String, SpokeUsage>> = BTreeMap::new();
    let labelled = inventory
        .in_cluster_pools
        .iter()
        .filter(|p| p.labels().contains_key(SHARED_LABEL))
        .map(|p| p.key())
        .chain(inventory.global_pools.iter().filter(|p| p.labels().contains_key(SHARED_LABEL)).map(|p| p.key()));
    for key in labelled {
        pools.entry(key).or_default();
    }
    for block in &inventory.blocks {
        let (Some(pool), Some(cidr)) = (block_pool(block), granted(block)) else { continue };
        let spoke_namespace = block.namespace().unwrap_or_default();
        let usage = pools.entry(pool).or_default().entry(spoke_namespace.clone()).or_insert_with(|| SpokeUsage {
            spoke: inventory.namespaces.get(&spoke_namespace).and_then(|l| l.get(SPOKE_LABEL)).cloned(),
            namespace: spoke_namespace,
            ..SpokeUsage::default()
        });
        usage.blocks += 1;
        let bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
        usage.addresses = usage.addresses.saturating_add(1u64.checked_shl(bits).unwrap_or(u64::MAX));
    }
    pools
        .into_iter()
        .filter(|(key, _)| namespace.is_none_or(|ns| key.namespace.as_deref() == Some(ns)))
        .map(|(key, spokes)| Shared { pool: key.to_string(), spokes: spokes.into_values().collect() })
        .collect()
}

fn cell<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The table for people.
pub(super) fn text(top: &Top) -> String {
    let mut lines = vec![[
        "POOL".to_owned(),
        "STRATEGY".into(),
        "TOTAL".into(),
        "USED".into(),
        "FREE".into(),
        "RESERVED".into(),
        "USE%".into(),
        "LAST HOUR".into(),
        "NET/H".into(),
        "FULL IN".into(),
        "READY".into(),
    ]];
    for r in &top.pools {
        lines.push([
            r.pool.clone(),
            r.strategy.clone(),
            cell(r.total),
            cell(r.used),
            cell(r.free),
            cell(r.reserved),
            cell(r.percent_used.map(|p| format!("{p:.1}"))),
            format!("+{}", r.last_hour),
            cell(r.net_per_hour.map(|n| format!("{n:+.0}"))),
            cell(r.hours_to_full.map(|h| if h < 1.0 { format!("{:.0}m", h * 60.0) } else { format!("{h:.1}h") })),
            cell(r.ready.clone()),
        ]);
    }
    let mut out = columns(&lines);
    if top.pools.is_empty() {
        out.push_str("no pools\n");
    }
    if !top.shared.is_empty() {
        out.push('\n');
        out.push_str(&shared_table(&top.shared));
    }
    out
}

/// Cells as columns, each as wide as its widest cell.
fn columns<const N: usize>(lines: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N).map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// The shared pools' table: a line per spoke, or a line saying no block is leased.
fn shared_table(shared: &[Shared]) -> String {
    let mut lines =
        vec![["SHARED POOL".to_owned(), "SPOKE".into(), "NAMESPACE".into(), "BLOCKS".into(), "ADDRESSES".into()]];
    for pool in shared {
        if pool.spokes.is_empty() {
            lines.push([pool.pool.clone(), "-".into(), "-".into(), "0".into(), "0".into()]);
        }
        for spoke in &pool.spokes {
            lines.push([
                pool.pool.clone(),
                cell(spoke.spoke.clone()),
                spoke.namespace.clone(),
                spoke.blocks.to_string(),
                spoke.addresses.to_string(),
            ]);
        }
    }
    columns(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pool: &str, percent_used: Option<f64>, hours_to_full: Option<f64>) -> Row {
        Row { pool: pool.into(), percent_used, hours_to_full, ..Row::default() }
    }

    #[test]
    fn the_fastest_filling_pool_comes_first_then_the_fullest() {
        let mut rows = [
            row("quiet-full", Some(95.0), None),
            row("slow", Some(10.0), Some(40.0)),
            row("no-status", None, None),
            row("fast", Some(50.0), Some(2.5)),
            row("quiet-empty", Some(0.0), None),
        ];
        rows.sort_by(order);
        let names: Vec<&str> = rows.iter().map(|r| r.pool.as_str()).collect();
        assert_eq!(names, ["fast", "slow", "quiet-full", "quiet-empty", "no-status"]);
    }

    #[test]
    fn the_table_shows_a_dash_for_what_the_status_lacks() {
        let table = text(&Top { pools: vec![row("InClusterIPPool ns/p", None, None)], ..Top::default() });
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("POOL") && lines[0].ends_with("READY"), "{table}");
        assert!(lines[1].starts_with("InClusterIPPool ns/p") && lines[1].contains("  -  "), "{table}");
        assert_eq!(text(&Top::default()).lines().last(), Some("no pools"));
    }
}
