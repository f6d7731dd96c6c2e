//! Where the pools of a run lie and what the k-th claim of a pool gets, in one place: the pool
//! specs the benchmark creates, the floor's addresses, the start-up fill's addresses and the
//! storm's edits all follow from it.
//!
//! - Address pools, at most 256 of them: pool `i` holds `10.<i>.0.0/16` (prefix 16, gateway
//!   `10.<i>.0.1`).
//! - Address pools, more than 256 (up to 65,536): pool `i` holds `10.<i/256>.<i%256>.0/24`
//!   (prefix 24, gateway `.1`).
//! - Prefix pools (up to 65,536): pool `i` holds `fd00:<i:x>::/48` and hands out /64s (gateway
//!   `fd00:<i:x>::1`).
//!
//! The k-th claim of a pool gets the pool's (k + 2)-th address (or /64), counted from the
//! network address: the network address and the gateway come before it. The pool's last
//! address that a provider may hand out ([`Layout::last`]) is never the k-th of a claim: the
//! storm excludes it and includes it again, which changes the spec without taking an address
//! from a claim, since providers hand out the lowest free address first.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};

use crate::config::PoolKind;

/// Pools of `10.<i>.0.0/16` up to this many; /24s beyond.
pub const MAX_WIDE_POOLS: usize = 256;
/// Pools a layout can hold: 256 × 256 /24s in 10/8, or 65,536 /48s under `fd00::/16`.
pub const MAX_POOLS: usize = 65_536;

/// The pools of one run: `pools` pools `pool-<i>` of `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub kind: PoolKind,
    pub pools: usize,
}

impl Layout {
    pub fn new(kind: PoolKind, pools: usize) -> Result<Layout> {
        ensure!(pools >= 1, "at least one pool");
        ensure!(pools <= MAX_POOLS, "{pools} pools of {}: at most {MAX_POOLS}", kind.name());
        Ok(Layout { kind, pools })
    }

    /// Whether address pools are /24s (more than [`MAX_WIDE_POOLS`]).
    fn narrow(&self) -> bool {
        self.kind == PoolKind::Addresses && self.pools > MAX_WIDE_POOLS
    }

    /// The prefix length of pool's CIDR.
    fn cidr_length(&self) -> u32 {
        match self.kind {
            PoolKind::Prefixes => 48,
            PoolKind::Addresses if self.narrow() => 24,
            PoolKind::Addresses => 16,
        }
    }

    /// The prefix written to each `IPAddress`: the pool's prefix for addresses, 64 for prefixes.
    pub fn address_prefix(&self) -> i32 {
        match self.kind {
            PoolKind::Prefixes => 64,
            PoolKind::Addresses => self.cidr_length() as i32,
        }
    }

    /// The network address of pool `i`, as a number.
    fn base(&self, i: usize) -> u128 {
        assert!(i < self.pools, "pool {i} of {}", self.pools);
        let i = i as u128;
        match self.kind {
            PoolKind::Prefixes => (0xfd00 << 112) | (i << 96),
            PoolKind::Addresses if self.narrow() => (10 << 24) | (i << 8),
            PoolKind::Addresses => (10 << 24) | (i << 16),
        }
    }

    /// How far apart the handed-out addresses (or /64s) lie.
    fn step(&self) -> u128 {
        match self.kind {
            PoolKind::Prefixes => 1 << 64,
            PoolKind::Addresses => 1,
        }
    }

    /// How many addresses (or /64s) the pool's CIDR holds.
    fn size(&self) -> u128 {
        match self.kind {
            PoolKind::Prefixes => 1 << 16,
            PoolKind::Addresses => 1 << (32 - self.cidr_length()),
        }
    }

    fn ip(&self, value: u128) -> IpAddr {
        match self.kind {
            PoolKind::Prefixes => IpAddr::V6(Ipv6Addr::from(value)),
            PoolKind::Addresses => IpAddr::V4(Ipv4Addr::from(value as u32)),
        }
    }

    /// Pool `i`'s CIDR, e.g. `10.3.0.0/16`.
    pub fn cidr(&self, i: usize) -> String {
        format!("{}/{}", self.ip(self.base(i)), self.cidr_length())
    }

    /// Pool `i`'s gateway: the address after the network address.
    pub fn gateway(&self, i: usize) -> IpAddr {
        self.ip(self.base(i) + 1)
    }

    /// Pool `i`'s spec as the benchmark creates it.
    pub fn spec(&self, i: usize) -> Value {
        let gateway = self.gateway(i).to_string();
        match self.kind {
            PoolKind::Addresses => {
                json!({"addresses": [self.cidr(i)], "prefix": self.address_prefix(), "gateway": gateway})
            }
            PoolKind::Prefixes => json!({"prefixes": [self.cidr(i)], "gateway": gateway}),
        }
    }

    /// How many claims one pool can hold: the k-th for k below this lies after the gateway and
    /// before [`Layout::last`].
    pub fn capacity(&self) -> usize {
        // The network address, the gateway, the last address (and for IPv4 the broadcast
        // address) are never the k-th of a claim.
        let reserved = match self.kind {
            PoolKind::Addresses => 4,
            PoolKind::Prefixes => 3,
        };
        (self.size() - reserved) as usize
    }

    /// What a provider counts as pool `i`'s total (`status.ipAddresses.total`): every address
    /// but the network, broadcast and gateway addresses; every /64 (a prefix pool's gateway
    /// blocks none).
    pub fn provider_total(&self) -> u128 {
        match self.kind {
            PoolKind::Addresses => self.size() - 3,
            PoolKind::Prefixes => self.size(),
        }
    }

    /// The family the pools hand out, as a pool's `status.families` names it.
    pub fn family(&self) -> &'static str {
        match self.kind {
            PoolKind::Addresses => "IPv4",
            PoolKind::Prefixes => "IPv6",
        }
    }

    /// How many claims pool `i` gets in a run of `claims` claims (claim k on pool k mod pools),
    /// the warm-up claim on pool 0 included.
    pub fn claims_in(&self, i: usize, claims: usize) -> usize {
        let spread = claims / self.pools + usize::from(i < claims % self.pools);
        spread + usize::from(i == 0)
    }

    /// The address (or /64) of the k-th claim of pool `i`; `None` past [`Layout::capacity`].
    pub fn kth(&self, i: usize, k: usize) -> Option<IpAddr> {
        (k < self.capacity()).then(|| self.ip(self.base(i) + (k as u128 + 2) * self.step()))
    }

    /// The last address (or /64) of pool `i` a provider may hand out: the one before the
    /// broadcast address, or the pool's last /64.
    pub fn last(&self, i: usize) -> IpAddr {
        let last = match self.kind {
            PoolKind::Addresses => self.size() - 2,
            PoolKind::Prefixes => self.size() - 1,
        };
        self.ip(self.base(i) + last * self.step())
    }

    /// Fails unless `claims` claims spread over the pools (claim k on pool k mod pools), plus
    /// one more claim on pool 0 (the warm-up or start-up probe), fit in every pool.
    pub fn check_fits(&self, claims: usize) -> Result<()> {
        let most = claims.div_ceil(self.pools) + 1;
        if most > self.capacity() {
            bail!(
                "{claims} claims over {} pool(s) of {} put up to {most} claims in a pool, but a pool holds {} \
                 ({}, less the network, gateway and last address)",
                self.pools,
                self.kind.name(),
                self.capacity(),
                self.cidr(0)
            );
        }
        Ok(())
    }

    /// The spec field the storm edits.
    pub fn excluded_field(&self) -> &'static str {
        match self.kind {
            PoolKind::Addresses => "excludedAddresses",
            PoolKind::Prefixes => "excludedPrefixes",
        }
    }

    /// The entry the storm puts into the excluded list of pool `i`: its last address, or its
    /// last /64.
    pub fn excluded_entry(&self, i: usize) -> String {
        match self.kind {
            PoolKind::Addresses => self.last(i).to_string(),
            PoolKind::Prefixes => format!("{}/64", self.last(i)),
        }
    }

    /// The merge patch of the `nth` edit (counted from 0) of pool `i`: even edits exclude the
    /// pool's last address, odd ones clear the list again. Either way every address a claim
    /// gets stays in the pool.
    pub fn edit(&self, i: usize, nth: usize) -> Value {
        let excluded: Vec<String> = if nth.is_multiple_of(2) { vec![self.excluded_entry(i)] } else { Vec::new() };
        json!({"spec": {self.excluded_field(): excluded}})
    }

    /// Pool `i`'s index from its name `pool-<i>`.
    pub fn index(&self, name: &str) -> Result<usize> {
        let i: usize = name
            .strip_prefix("pool-")
            .and_then(|i| i.parse().ok())
            .with_context(|| format!("pool {name:?} is not pool-<i>"))?;
        ensure!(i < self.pools, "pool {name} is not one of the {} pools", self.pools);
        Ok(i)
    }
}

/// An address range `[low, high]` of one family, as numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    v6: bool,
    low: u128,
    high: u128,
}

fn number(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (true, u128::from(v6)),
    }
}

/// `a`, `a-b` or `a/len`.
fn span(entry: &str) -> Option<Span> {
    let entry = entry.trim();
    if let Some((low, high)) = entry.split_once('-') {
        let ((v6, low), (v6_high, high)) = (number(low.trim().parse().ok()?), number(high.trim().parse().ok()?));
        return (v6 == v6_high).then_some(Span { v6, low, high });
    }
    if let Some((address, length)) = entry.split_once('/') {
        let (v6, value) = number(address.parse().ok()?);
        let bits = if v6 { 128 } else { 32 };
        let length: u32 = length.parse().ok()?;
        if length > bits {
            return None;
        }
        let host = 1u128.checked_shl(bits - length).map_or(u128::MAX, |size| size - 1);
        return Some(Span { v6, low: value & !host, high: (value & !host) | host });
    }
    let (v6, value) = number(entry.parse().ok()?);
    Some(Span { v6, low: value, high: value })
}

/// The excluded entry (address, range or CIDR) that what an `IPAddress` hands out overlaps: the
/// address itself in an address pool, the sub-prefix `address/prefix` in a prefix pool.
pub fn excluded_hit<'a>(kind: PoolKind, excluded: &'a [String], address: &str, prefix: i32) -> Option<&'a str> {
    let handed_out = match kind {
        PoolKind::Addresses => span(address)?,
        PoolKind::Prefixes => span(&format!("{address}/{prefix}"))?,
    };
    excluded.iter().map(String::as_str).find(|entry| {
        span(entry).is_some_and(|e| e.v6 == handed_out.v6 && e.low <= handed_out.high && handed_out.low <= e.high)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within(layout: &Layout, i: usize, ip: IpAddr) -> bool {
        let pool = span(&layout.cidr(i)).unwrap();
        let (v6, value) = number(ip);
        v6 == pool.v6 && pool.low <= value && value <= pool.high
    }

    /// Every k-th address of pool `i` lies in the pool, after its gateway, never on the storm's
    /// excluded entry, and the k-th are all different.
    fn check_pool(layout: &Layout, i: usize, ks: impl Iterator<Item = usize>) {
        let excluded = [layout.excluded_entry(i)];
        let gateway = layout.gateway(i);
        assert!(within(layout, i, gateway), "{gateway} in {}", layout.cidr(i));
        assert!(within(layout, i, layout.last(i)), "{} in {}", layout.last(i), layout.cidr(i));
        let mut seen = std::collections::HashSet::new();
        for k in ks {
            let ip = layout.kth(i, k).unwrap_or_else(|| panic!("pool {i}: k = {k} below the capacity"));
            assert!(within(layout, i, ip), "{ip} in {}", layout.cidr(i));
            assert_ne!(ip, gateway, "pool {i}, k = {k}");
            assert!(ip > gateway, "{ip} after the gateway {gateway}");
            let hit = excluded_hit(layout.kind, &excluded, &ip.to_string(), layout.address_prefix());
            assert_eq!(hit, None, "pool {i}, k = {k}: {ip}");
            assert!(seen.insert(ip), "{ip} twice");
        }
    }

    #[test]
    fn up_to_256_address_pools_keep_their_slash_16s() {
        let layout = Layout::new(PoolKind::Addresses, 256).unwrap();
        assert_eq!(layout.spec(0), json!({"addresses": ["10.0.0.0/16"], "prefix": 16, "gateway": "10.0.0.1"}));
        assert_eq!(layout.spec(255), json!({"addresses": ["10.255.0.0/16"], "prefix": 16, "gateway": "10.255.0.1"}));
        assert_eq!(layout.kth(7, 0), Some("10.7.0.2".parse().unwrap()));
        assert_eq!(layout.kth(7, 300), Some("10.7.1.46".parse().unwrap()));
        assert_eq!(layout.last(7), "10.7.255.254".parse::<IpAddr>().unwrap());
        assert_eq!(layout.capacity(), 65_532);
        assert_eq!(layout.kth(7, 65_531), Some("10.7.255.253".parse().unwrap()));
        assert_eq!(layout.kth(7, 65_532), None);
        for i in [0, 1, 100, 255] {
            check_pool(&layout, i, (0..2000).chain(65_000..65_532));
        }
        // One pool is a /16 as well.
        assert_eq!(Layout::new(PoolKind::Addresses, 1).unwrap().cidr(0), "10.0.0.0/16");
    }

    #[test]
    fn beyond_256_address_pools_are_slash_24s_of_their_own() {
        let layout = Layout::new(PoolKind::Addresses, 10_000).unwrap();
        assert_eq!(layout.spec(0), json!({"addresses": ["10.0.0.0/24"], "prefix": 24, "gateway": "10.0.0.1"}));
        assert_eq!(layout.spec(9_999), json!({"addresses": ["10.39.15.0/24"], "prefix": 24, "gateway": "10.39.15.1"}));
        assert_eq!(layout.address_prefix(), 24);
        assert_eq!(layout.capacity(), 252);
        assert_eq!(layout.kth(300, 0), Some("10.1.44.2".parse().unwrap()));
        assert_eq!(layout.kth(300, 251), Some("10.1.44.253".parse().unwrap()));
        assert_eq!(layout.kth(300, 252), None);
        assert_eq!(layout.last(300), "10.1.44.254".parse::<IpAddr>().unwrap());
        for i in [0, 255, 256, 257, 9_999] {
            check_pool(&layout, i, 0..layout.capacity());
        }
        // No two pools overlap: neighbours' ranges are disjoint, each a /24 of its own.
        let spans: Vec<Span> = (0..10_000).map(|i| span(&layout.cidr(i)).unwrap()).collect();
        assert!(spans.windows(2).all(|w| w[0].high < w[1].low));
        // 257 pools already take the /24 scheme, 65,536 is the most.
        assert_eq!(Layout::new(PoolKind::Addresses, 257).unwrap().cidr(256), "10.1.0.0/24");
        assert_eq!(Layout::new(PoolKind::Addresses, 65_536).unwrap().cidr(65_535), "10.255.255.0/24");
        assert!(Layout::new(PoolKind::Addresses, 65_537).is_err());
        assert!(Layout::new(PoolKind::Addresses, 0).is_err());
    }

    #[test]
    fn prefix_pools_hand_out_slash_64s_of_their_slash_48() {
        let layout = Layout::new(PoolKind::Prefixes, 1_000).unwrap();
        assert_eq!(layout.spec(0), json!({"prefixes": ["fd00::/48"], "gateway": "fd00::1"}));
        assert_eq!(layout.spec(999), json!({"prefixes": ["fd00:3e7::/48"], "gateway": "fd00:3e7::1"}));
        assert_eq!(layout.kth(999, 0), Some("fd00:3e7:0:2::".parse().unwrap()));
        assert_eq!(layout.last(999), "fd00:3e7:0:ffff::".parse::<IpAddr>().unwrap());
        assert_eq!(layout.capacity(), 65_533);
        assert_eq!(layout.kth(999, 65_532), Some("fd00:3e7:0:fffe::".parse().unwrap()));
        assert_eq!(layout.kth(999, 65_533), None);
        assert_eq!(layout.address_prefix(), 64);
        check_pool(&layout, 999, (0..1000).chain(65_000..65_533));
        // The storm's entry for a prefix pool is its last /64, which the (k-th) /64 next to it
        // does not overlap.
        assert_eq!(layout.excluded_entry(1), "fd00:1:0:ffff::/64");
    }

    #[test]
    fn claims_that_would_not_fit_are_refused_with_the_numbers() {
        let narrow = Layout::new(PoolKind::Addresses, 300).unwrap();
        // 251 claims per pool, plus the warm-up claim in pool 0: 252, just fits.
        assert!(narrow.check_fits(300 * 251).is_ok());
        let error = narrow.check_fits(300 * 252).unwrap_err().to_string();
        assert!(error.contains("up to 253 claims in a pool, but a pool holds 252 (10.0.0.0/24"), "{error}");
        assert!(Layout::new(PoolKind::Addresses, 10_000).unwrap().check_fits(10_000).is_ok());
        assert!(Layout::new(PoolKind::Addresses, 1).unwrap().check_fits(65_531).is_ok());
        assert!(Layout::new(PoolKind::Addresses, 1).unwrap().check_fits(65_532).is_err());
        assert!(Layout::new(PoolKind::Prefixes, 1).unwrap().check_fits(50_000).is_ok());
    }

    #[test]
    fn the_storm_toggles_the_last_address_in_and_out_of_the_excluded_list() {
        let layout = Layout::new(PoolKind::Addresses, 100).unwrap();
        assert_eq!(layout.edit(42, 0), json!({"spec": {"excludedAddresses": ["10.42.255.254"]}}));
        assert_eq!(layout.edit(42, 1), json!({"spec": {"excludedAddresses": []}}));
        assert_eq!(layout.edit(42, 2), layout.edit(42, 0));
        let prefixes = Layout::new(PoolKind::Prefixes, 10).unwrap();
        assert_eq!(prefixes.edit(3, 0), json!({"spec": {"excludedPrefixes": ["fd00:3:0:ffff::/64"]}}));
        assert_eq!(prefixes.edit(3, 1), json!({"spec": {"excludedPrefixes": []}}));
        // The excluded entry is in the pool and hit by an address on it.
        let excluded = [layout.excluded_entry(42)];
        assert_eq!(excluded_hit(PoolKind::Addresses, &excluded, "10.42.255.254", 16), Some("10.42.255.254"));
        assert_eq!(excluded_hit(PoolKind::Addresses, &excluded, "10.42.255.253", 16), None);
        let excluded = [prefixes.excluded_entry(3)];
        assert!(excluded_hit(PoolKind::Prefixes, &excluded, "fd00:3:0:ffff::", 64).is_some());
        assert!(excluded_hit(PoolKind::Prefixes, &excluded, "fd00:3:0:fffe::", 64).is_none());
    }

    #[test]
    fn excluded_entries_are_addresses_ranges_or_cidrs() {
        let excluded = ["10.0.0.5".to_owned(), "10.0.1.0-10.0.1.9".to_owned(), "10.0.2.0/30".to_owned()];
        let hit = |address: &str| excluded_hit(PoolKind::Addresses, &excluded, address, 16);
        assert_eq!(hit("10.0.0.5"), Some("10.0.0.5"));
        assert_eq!(hit("10.0.0.6"), None);
        assert_eq!(hit("10.0.1.9"), Some("10.0.1.0-10.0.1.9"));
        assert_eq!(hit("10.0.1.10"), None);
        assert_eq!(hit("10.0.2.3"), Some("10.0.2.0/30"));
        assert_eq!(hit("10.0.2.4"), None);
        // Another family never matches.
        assert_eq!(excluded_hit(PoolKind::Addresses, &["::/0".to_owned()], "10.0.0.5", 16), None);
        // A prefix pool's /64 overlaps a single excluded address inside it.
        assert!(excluded_hit(PoolKind::Prefixes, &["fd00:0:0:7::9".to_owned()], "fd00:0:0:7::", 64).is_some());
    }

    #[test]
    fn claims_spread_round_robin_and_pool_0_gets_the_warm_up_too() {
        let layout = Layout::new(PoolKind::Addresses, 3).unwrap();
        let per_pool: Vec<usize> = (0..3).map(|i| layout.claims_in(i, 7)).collect();
        assert_eq!(per_pool, [4, 2, 2]);
        assert_eq!(per_pool.iter().sum::<usize>(), 7 + 1);
        let many = Layout::new(PoolKind::Addresses, 300).unwrap();
        assert_eq!((many.claims_in(0, 300), many.claims_in(299, 300)), (2, 1));
        assert_eq!(many.provider_total(), 253);
        assert_eq!(Layout::new(PoolKind::Addresses, 1).unwrap().provider_total(), 65_533);
        assert_eq!(Layout::new(PoolKind::Prefixes, 1).unwrap().provider_total(), 65_536);
    }

    #[test]
    fn a_pool_index_comes_from_its_name() {
        let layout = Layout::new(PoolKind::Addresses, 300).unwrap();
        assert_eq!(layout.index("pool-299").unwrap(), 299);
        assert!(layout.index("pool-300").is_err());
        assert!(layout.index("other").is_err());
    }
}
