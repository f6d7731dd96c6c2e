//! The invariants of pools shared through a hub, over several management clusters at once: the
//! hub, which grants `AddressBlock`s of its pool, and its spokes, which hand out addresses of the
//! blocks granted to them. A pure function over what a test collected from every cluster; it
//! parses addresses and CIDRs itself and asks nothing of ferro-ipam's code.
//!
//! - no address appears twice across the clusters;
//! - every claim is bound exactly once: one `IPAddress` names it, its `status.addressRef` names
//!   that one, and it is Ready; every `IPAddress` of a collected namespace has its claim;
//! - every address of a spoke lies inside a block granted to that spoke's namespace of the hub,
//!   and no address of the hub lies inside any granted block;
//! - a granted block has a CIDR of exactly its size, aligned, inside the hub's pool, and no two
//!   granted blocks overlap.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

pub use super::findings::Findings;

/// One cluster's objects.
#[derive(Clone, Debug, Default)]
pub struct ClusterLook {
    /// For messages: `hub`, `spoke-a`, ...
    pub name: String,
    /// A spoke's namespace in the hub, whose granted blocks are its own; `None` for the hub.
    pub hub_namespace: Option<String>,
    /// The namespaces whose claims were all collected: every `IPAddress` there has its claim.
    pub claim_namespaces: BTreeSet<String>,
    pub claims: Vec<ClaimSeen>,
    /// The `IPAddress`es of the pool (or pools) under test, of every namespace.
    pub addresses: Vec<AddressSeen>,
}

/// An `IPAddressClaim`, as the checker needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimSeen {
    pub namespace: String,
    pub name: String,
    /// `Ready=True`.
    pub ready: bool,
    /// `status.addressRef.name`, if set.
    pub address_ref: Option<String>,
}

/// An `IPAddress`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressSeen {
    pub namespace: String,
    pub name: String,
    /// `spec.claimRef.name`.
    pub claim: String,
    /// `spec.address`.
    pub address: String,
}

/// An `AddressBlock` of the hub.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockSeen {
    pub namespace: String,
    pub name: String,
    /// `spec.size`.
    pub size: u32,
    /// `status.cidr`, once granted.
    pub cidr: Option<String>,
    /// `Granted=True`.
    pub granted: bool,
}

/// One look at every cluster.
#[derive(Clone, Debug, Default)]
pub struct SharedLook {
    pub clusters: Vec<ClusterLook>,
    /// Every `AddressBlock` of the hub, every namespace.
    pub blocks: Vec<BlockSeen>,
    /// The hub pool's `spec.addresses` (CIDRs, ranges `a-b`, single addresses); empty: unchecked.
    pub hub_pool: Vec<String>,
}

/// A run of addresses of one family, as numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    v6: bool,
    first: u128,
    last: u128,
}

impl Span {
    fn contains(&self, ip: (bool, u128)) -> bool {
        self.v6 == ip.0 && self.first <= ip.1 && ip.1 <= self.last
    }

    fn within(&self, other: &Span) -> bool {
        self.v6 == other.v6 && other.first <= self.first && self.last <= other.last
    }

    fn overlaps(&self, other: &Span) -> bool {
        self.v6 == other.v6 && self.first <= other.last && other.first <= self.last
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", show(self.v6, self.first), show(self.v6, self.last))
    }
}

fn number(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (true, u128::from(v6)),
    }
}

fn show(v6: bool, n: u128) -> String {
    if v6 {
        std::net::Ipv6Addr::from(n).to_string()
    } else {
        std::net::Ipv4Addr::from(u32::try_from(n).unwrap_or(u32::MAX)).to_string()
    }
}

fn parse_ip(text: &str) -> Option<(bool, u128)> {
    text.trim().parse::<IpAddr>().ok().map(number)
}

/// A CIDR whose host bits are all zero, as a span.
fn parse_cidr(text: &str) -> Result<Span, String> {
    let (ip, bits) = text.split_once('/').ok_or_else(|| format!("{text:?} is not a CIDR"))?;
    let (v6, base) = parse_ip(ip).ok_or_else(|| format!("{text:?}: {ip:?} is not an IP address"))?;
    let width: u32 = if v6 { 128 } else { 32 };
    let bits: u32 = bits.parse().ok().filter(|b| *b <= width).ok_or_else(|| format!("{text:?}: bad prefix length"))?;
    let host_bits = width - bits;
    let host_mask: u128 = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
    if base & host_mask != 0 {
        return Err(format!("{text:?} is not aligned: host bits set"));
    }
    Ok(Span { v6, first: base, last: base | host_mask })
}

/// A pool's entry: a CIDR, a range `a-b`, or one address.
fn parse_entry(text: &str) -> Result<Span, String> {
    if text.contains('/') {
        // A pool may write a CIDR with host bits set (10.0.0.5/24 means the /24).
        let (ip, bits) = text.split_once('/').unwrap_or_default();
        let (v6, base) = parse_ip(ip).ok_or_else(|| format!("pool entry {text:?}"))?;
        let width: u32 = if v6 { 128 } else { 32 };
        let bits: u32 = bits.parse().ok().filter(|b| *b <= width).ok_or_else(|| format!("pool entry {text:?}"))?;
        let host_bits = width - bits;
        let host_mask: u128 = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
        return Ok(Span { v6, first: base & !host_mask, last: base | host_mask });
    }
    if let Some((a, b)) = text.split_once('-') {
        let (a, b) = (parse_ip(a), parse_ip(b));
        return match (a, b) {
            (Some(a), Some(b)) if a.0 == b.0 && a.1 <= b.1 => Ok(Span { v6: a.0, first: a.1, last: b.1 }),
            _ => Err(format!("pool entry {text:?}")),
        };
    }
    let (v6, n) = parse_ip(text).ok_or_else(|| format!("pool entry {text:?}"))?;
    Ok(Span { v6, first: n, last: n })
}

/// A granted block, parsed.
struct Granted<'a> {
    block: &'a BlockSeen,
    span: Span,
}

impl Granted<'_> {
    fn label(&self) -> String {
        format!(
            "AddressBlock {}/{} ({})",
            self.block.namespace,
            self.block.name,
            self.block.cidr.as_deref().unwrap_or("")
        )
    }
}

/// Every violation of one look. Fatal: an address twice, a claim bound twice, blocks that
/// overlap, an address outside its spoke's blocks, a bad block. Pending (a controller may still
/// be writing): a claim not bound yet, not Ready, or whose `addressRef` is not written yet; an
/// `IPAddress` whose claim is gone.
pub fn findings(look: &SharedLook) -> Findings {
    let mut found = Findings::default();
    let granted = granted_blocks(look, &mut found);
    overlapping_blocks(&granted, &mut found);
    let mut holders: BTreeMap<(bool, u128), Vec<String>> = BTreeMap::new();
    for cluster in &look.clusters {
        for address in &cluster.addresses {
            let who = format!("{} IPAddress {}/{}", cluster.name, address.namespace, address.name);
            let Some(ip) = parse_ip(&address.address) else {
                found.fatal.push(format!("{who}: {:?} is not an IP address", address.address));
                continue;
            };
            holders.entry(ip).or_default().push(who.clone());
            within_blocks(cluster, &who, ip, &granted, &mut found);
        }
        bindings(cluster, &mut found);
    }
    for ((v6, n), who) in holders {
        if who.len() > 1 {
            found.fatal.push(format!("{} is held {} times: {}", show(v6, n), who.len(), who.join(", ")));
        }
    }
    found
}

/// The blocks granted, each checked: a CIDR of its size, aligned, in the hub's pool.
fn granted_blocks<'a>(look: &'a SharedLook, found: &mut Findings) -> Vec<Granted<'a>> {
    let pool: Vec<Span> = look
        .hub_pool
        .iter()
        .filter_map(|entry| parse_entry(entry).map_err(|e| found.fatal.push(format!("the hub's pool: {e}"))).ok())
        .collect();
    let mut granted = Vec::new();
    for block in look.blocks.iter().filter(|b| b.granted) {
        let label = format!("AddressBlock {}/{}", block.namespace, block.name);
        let Some(cidr) = &block.cidr else {
            found.fatal.push(format!("{label} is Granted without a status.cidr"));
            continue;
        };
        let span = match parse_cidr(cidr) {
            Ok(span) => span,
            Err(error) => {
                found.fatal.push(format!("{label}: {error}"));
                continue;
            }
        };
        if span.last - span.first + 1 != u128::from(block.size) {
            found.fatal.push(format!(
                "{label}: {cidr} holds {} addresses, not its size {}",
                span.last - span.first + 1,
                block.size
            ));
        }
        if !pool.is_empty() && !pool.iter().any(|p| span.within(p)) {
            found.fatal.push(format!("{label}: {cidr} is not inside the hub's pool {:?}", look.hub_pool));
        }
        granted.push(Granted { block, span });
    }
    granted
}

/// No two granted blocks share an address, whatever their namespaces.
fn overlapping_blocks(granted: &[Granted], found: &mut Findings) {
    let mut sorted: Vec<&Granted> = granted.iter().collect();
    sorted.sort_by_key(|g| g.span);
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            if b.span.v6 != a.span.v6 || b.span.first > a.span.last {
                break;
            }
            if a.span.overlaps(&b.span) {
                found.fatal.push(format!("{} and {} overlap", a.label(), b.label()));
            }
        }
    }
}

/// A spoke's address lies in a block granted to its namespace; the hub's in none.
fn within_blocks(cluster: &ClusterLook, who: &str, ip: (bool, u128), granted: &[Granted], found: &mut Findings) {
    let containing: Vec<&Granted> = granted.iter().filter(|g| g.span.contains(ip)).collect();
    let shown = show(ip.0, ip.1);
    match &cluster.hub_namespace {
        None => {
            if let Some(block) = containing.first() {
                found.fatal.push(format!("{who} holds {shown}, inside {} granted to a spoke", block.label()));
            }
        }
        Some(namespace) => {
            if containing.iter().any(|g| &g.block.namespace == namespace) {
                return;
            }
            let elsewhere = match containing.first() {
                Some(block) => format!("; it is inside {}", block.label()),
                None => String::new(),
            };
            found.fatal.push(format!("{who} holds {shown}, in no block granted to namespace {namespace}{elsewhere}"));
        }
    }
}

/// Every claim bound exactly once, and every `IPAddress` of a collected namespace with its claim.
fn bindings(cluster: &ClusterLook, found: &mut Findings) {
    let mut by_claim: BTreeMap<(&str, &str), Vec<&AddressSeen>> = BTreeMap::new();
    for address in &cluster.addresses {
        by_claim.entry((&address.namespace, &address.claim)).or_default().push(address);
    }
    let claims: BTreeSet<(&str, &str)> =
        cluster.claims.iter().map(|c| (c.namespace.as_str(), c.name.as_str())).collect();
    for claim in &cluster.claims {
        let who = format!("{} claim {}/{}", cluster.name, claim.namespace, claim.name);
        let addresses =
            by_claim.get(&(claim.namespace.as_str(), claim.name.as_str())).map(Vec::as_slice).unwrap_or(&[]);
        match addresses {
            [] => found.pending.push(format!("{who} has no IPAddress")),
            [address] => {
                if claim.address_ref.as_deref() != Some(address.name.as_str()) {
                    found.pending.push(format!(
                        "{who}: status.addressRef is {:?}, its IPAddress is {}",
                        claim.address_ref, address.name
                    ));
                }
                if !claim.ready {
                    found.pending.push(format!("{who} has its IPAddress {} but is not Ready", address.name));
                }
            }
            many => {
                let names: Vec<String> = many.iter().map(|a| format!("{} ({})", a.name, a.address)).collect();
                found.fatal.push(format!("{who} is bound {} times: {}", many.len(), names.join(", ")));
            }
        }
    }
    for address in &cluster.addresses {
        if cluster.claim_namespaces.contains(&address.namespace)
            && !claims.contains(&(address.namespace.as_str(), address.claim.as_str()))
        {
            found.pending.push(format!(
                "{} IPAddress {}/{} ({}) names claim {}, which does not exist",
                cluster.name, address.namespace, address.name, address.address, address.claim
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(ns: &str, name: &str) -> ClaimSeen {
        ClaimSeen { namespace: ns.into(), name: name.into(), ready: true, address_ref: Some(name.into()) }
    }

    fn address(ns: &str, name: &str, ip: &str) -> AddressSeen {
        AddressSeen { namespace: ns.into(), name: name.into(), claim: name.into(), address: ip.into() }
    }

    fn block(ns: &str, name: &str, cidr: &str, size: u32) -> BlockSeen {
        BlockSeen { namespace: ns.into(), name: name.into(), size, cidr: Some(cidr.into()), granted: true }
    }

    fn cluster(name: &str, hub_namespace: Option<&str>, bound: &[(&str, &str)]) -> ClusterLook {
        ClusterLook {
            name: name.into(),
            hub_namespace: hub_namespace.map(Into::into),
            claim_namespaces: ["work".to_owned()].into(),
            claims: bound.iter().map(|(n, _)| claim("work", n)).collect(),
            addresses: bound.iter().map(|(n, ip)| address("work", n, ip)).collect(),
        }
    }

    /// The hub holds 10.20.0.2; spoke-a two addresses of its block 10.20.0.16/28, spoke-b one of
    /// 10.20.0.32/28.
    fn clean() -> SharedLook {
        SharedLook {
            clusters: vec![
                cluster("hub", None, &[("h-0", "10.20.0.2")]),
                cluster("spoke-a", Some("spoke-a"), &[("c-0", "10.20.0.16"), ("c-1", "10.20.0.17")]),
                cluster("spoke-b", Some("spoke-b"), &[("c-0", "10.20.0.40")]),
            ],
            blocks: vec![
                block("spoke-a", "a-1", "10.20.0.16/28", 16),
                block("spoke-b", "b-1", "10.20.0.32/28", 16),
                BlockSeen { namespace: "spoke-b".into(), name: "b-asked".into(), size: 16, cidr: None, granted: false },
            ],
            hub_pool: vec!["10.20.0.0/20".into()],
        }
    }

    fn fatal_containing(look: &SharedLook, text: &str) -> bool {
        let found = findings(look);
        found.fatal.iter().any(|f| f.contains(text))
    }

    #[test]
    fn a_clean_look_has_no_findings() {
        assert_eq!(findings(&clean()), Findings::default());
    }

    #[test]
    fn an_address_held_on_two_spokes_is_fatal() {
        let mut look = clean();
        // spoke-b hands out spoke-a's 10.20.0.17 too, and holds a block of it as well.
        look.blocks.push(block("spoke-b", "b-2", "10.20.0.16/28", 16));
        look.clusters[2].claims.push(claim("work", "c-1"));
        look.clusters[2].addresses.push(address("work", "c-1", "10.20.0.17"));
        let found = findings(&look);
        assert!(
            found.fatal.iter().any(|f| f.starts_with("10.20.0.17 is held 2 times")
                && f.contains("spoke-a IPAddress work/c-1")
                && f.contains("spoke-b IPAddress work/c-1")),
            "{found:?}"
        );
    }

    #[test]
    fn an_address_held_by_the_hub_and_a_spoke_is_fatal() {
        let mut look = clean();
        look.clusters[0].claims.push(claim("work", "h-1"));
        look.clusters[0].addresses.push(address("work", "h-1", "10.20.0.16"));
        assert!(fatal_containing(&look, "10.20.0.16 is held 2 times"));
        assert!(fatal_containing(&look, "hub IPAddress work/h-1 holds 10.20.0.16, inside AddressBlock spoke-a/a-1"));
    }

    #[test]
    fn overlapping_blocks_are_fatal_across_namespaces_and_within_one() {
        let mut look = clean();
        // 10.20.0.0-63: over spoke-a's block and spoke-b's own.
        look.blocks.push(block("spoke-b", "b-2", "10.20.0.0/26", 64));
        let found = findings(&look);
        assert!(
            found.fatal.iter().any(|f| f.contains("spoke-b/b-2") && f.contains("spoke-a/a-1") && f.contains("overlap")),
            "{found:?}"
        );
        assert!(
            found.fatal.iter().any(|f| f.contains("spoke-b/b-2") && f.contains("spoke-b/b-1") && f.contains("overlap")),
            "{found:?}"
        );

        let mut same = clean();
        same.blocks.push(block("spoke-a", "a-2", "10.20.0.16/28", 16));
        assert!(fatal_containing(&same, "overlap"));
    }

    #[test]
    fn adjacent_blocks_and_ungranted_ones_do_not_overlap() {
        let mut look = clean();
        look.blocks.push(block("spoke-a", "a-2", "10.20.0.48/28", 16));
        look.blocks.push(BlockSeen {
            namespace: "spoke-a".into(),
            name: "asked".into(),
            size: 16,
            cidr: Some("10.20.0.16/28".into()),
            granted: false,
        });
        assert_eq!(findings(&look), Findings::default());
    }

    #[test]
    fn a_spoke_address_outside_its_own_blocks_is_fatal() {
        let mut look = clean();
        // In no block at all.
        look.clusters[1].addresses[1].address = "10.20.1.1".into();
        assert!(fatal_containing(
            &look,
            "spoke-a IPAddress work/c-1 holds 10.20.1.1, in no block granted to namespace spoke-a"
        ));
        // In the other spoke's block.
        look.clusters[1].addresses[1].address = "10.20.0.33".into();
        assert!(fatal_containing(
            &look,
            "in no block granted to namespace spoke-a; it is inside AddressBlock spoke-b/b-1"
        ));
    }

    #[test]
    fn a_block_of_the_wrong_size_misaligned_or_outside_the_pool_is_fatal() {
        let mut look = clean();
        look.blocks[0].size = 8;
        assert!(fatal_containing(&look, "holds 16 addresses, not its size 8"));
        let mut look = clean();
        look.blocks[1].cidr = Some("10.20.0.36/28".into());
        assert!(fatal_containing(&look, "not aligned"));
        let mut look = clean();
        look.blocks[1].cidr = Some("10.21.0.32/28".into());
        assert!(fatal_containing(&look, "not inside the hub's pool"));
        let mut look = clean();
        look.blocks[1].cidr = None;
        assert!(fatal_containing(&look, "Granted without a status.cidr"));
    }

    #[test]
    fn a_claim_bound_twice_is_fatal_and_one_unbound_is_pending() {
        let mut look = clean();
        look.clusters[1].addresses.push(AddressSeen {
            namespace: "work".into(),
            name: "c-0-again".into(),
            claim: "c-0".into(),
            address: "10.20.0.18".into(),
        });
        assert!(fatal_containing(&look, "spoke-a claim work/c-0 is bound 2 times"));

        let mut look = clean();
        look.clusters[2].claims.push(ClaimSeen {
            namespace: "work".into(),
            name: "c-9".into(),
            ready: false,
            address_ref: None,
        });
        let found = findings(&look);
        assert!(found.fatal.is_empty(), "{found:?}");
        assert_eq!(found.pending, vec!["spoke-b claim work/c-9 has no IPAddress".to_owned()]);
    }

    #[test]
    fn a_bound_claim_not_ready_or_naming_another_address_and_an_orphan_address_are_pending() {
        let mut look = clean();
        look.clusters[1].claims[0].ready = false;
        look.clusters[1].claims[1].address_ref = None;
        look.clusters[2].claims.clear();
        let found = findings(&look);
        assert!(found.fatal.is_empty(), "{found:?}");
        assert_eq!(found.pending.len(), 3, "{found:?}");
        assert!(found.pending.iter().any(|p| p.contains("work/c-0 has its IPAddress c-0 but is not Ready")));
        assert!(found.pending.iter().any(|p| p.contains("work/c-1: status.addressRef is None")));
        assert!(
            found
                .pending
                .iter()
                .any(|p| p.contains("spoke-b IPAddress work/c-0 (10.20.0.40) names claim c-0, which does not exist"))
        );
    }

    #[test]
    fn ipv6_blocks_and_addresses_are_checked_alike() {
        let look = SharedLook {
            clusters: vec![cluster("spoke-a", Some("spoke-a"), &[("c-0", "fd00::11"), ("c-1", "fd00::21")])],
            blocks: vec![block("spoke-a", "a-1", "fd00::10/124", 16), block("spoke-b", "b-1", "fd00::/123", 32)],
            hub_pool: vec!["fd00::/120".into()],
        };
        let found = findings(&look);
        assert!(found.fatal.iter().any(|f| f.contains("overlap")), "{found:?}");
        assert!(
            found.fatal.iter().any(|f| f.contains("holds fd00::21, in no block granted to namespace spoke-a")),
            "{found:?}"
        );
    }

    #[test]
    fn pool_entries_parse_as_cidrs_ranges_and_single_addresses() {
        assert_eq!(parse_entry("10.0.0.5/24"), Ok(Span { v6: false, first: 0x0a00_0000, last: 0x0a00_00ff }));
        assert_eq!(parse_entry("10.0.0.1-10.0.0.3"), Ok(Span { v6: false, first: 0x0a00_0001, last: 0x0a00_0003 }));
        assert_eq!(parse_entry("10.0.0.7"), Ok(Span { v6: false, first: 0x0a00_0007, last: 0x0a00_0007 }));
        assert!(parse_entry("10.0.0.3-10.0.0.1").is_err());
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("::/0").is_ok_and(|s| s.last == u128::MAX));
    }
}
