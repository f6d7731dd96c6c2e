//! What the migration checks of prefix pools beyond the snapshot comparison: every sub-prefix
//! handed out (by either provider) is a /64 network inside its pool, outside its exclusions,
//! and no two claims hold the same one. (The invariant checker covers address pools only.)

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use anyhow::{Result, ensure};
use kube::api::ListParams;

use crate::fleet::{Fleet, GLOBAL_PREFIX, PREFIX};

/// The network of `address/length`, as a number.
fn network(address: u128, length: u32) -> u128 {
    address & !(u128::MAX >> length)
}

fn within(address: u128, cidr: &str) -> bool {
    let (ip, length) = cidr.split_once('/').expect("a CIDR");
    let (ip, length): (Ipv6Addr, u32) = (ip.parse().expect("an IPv6 network"), length.parse().expect("a length"));
    network(address, length) == u128::from(ip)
}

impl Fleet {
    pub async fn sub_prefixes_are_distinct_and_aligned(&self) -> Result<()> {
        let mut holders: BTreeMap<(String, u128), Vec<String>> = BTreeMap::new();
        for side in &self.sides {
            for address in side.addresses().list(&ListParams::default()).await?.items {
                let kind = address.spec.pool_ref.kind.as_str();
                let (space, inside, excluded) = match kind {
                    PREFIX => (format!("{}/pfx", side.ns), "fd00:50::/56", Some("fd00:50:0:3::/64")),
                    GLOBAL_PREFIX => (self.shared_prefixes.clone(), "fd00:60::/59", None),
                    _ => continue,
                };
                let name = format!("{}/{}", side.ns, address.metadata.name.clone().unwrap_or_default());
                let ip: Ipv6Addr = address.spec.address.parse()?;
                let value = u128::from(ip);
                ensure!(
                    address.spec.prefix == 64,
                    "{name}: prefix {} is not the allocation length",
                    address.spec.prefix
                );
                ensure!(network(value, 64) == value, "{name}: {ip} is not a /64 network address");
                ensure!(within(value, inside), "{name}: {ip}/64 is outside {inside}");
                ensure!(!excluded.is_some_and(|e| within(value, e)), "{name}: {ip}/64 is excluded");
                holders.entry((space, value)).or_default().push(name);
            }
        }
        let twice: Vec<String> = holders
            .iter()
            .filter(|(_, names)| names.len() > 1)
            .map(|((space, value), names)| format!("{} in {space}: {names:?}", Ipv6Addr::from(*value)))
            .collect();
        ensure!(twice.is_empty(), "sub-prefixes held twice: {twice:?}");
        ensure!(holders.len() >= 56, "only {} sub-prefixes found", holders.len());
        Ok(())
    }
}
