//! Who holds an address, and otherwise which pools could hand it out (pure: no client). On a
//! hub, the block leased to a spoke that holds it; on a spoke, a spoke pool's address is not
//! known free or taken here (its blocks live in the hub).

use std::fmt::Write as _;
use std::net::IpAddr;

use kube::ResourceExt;
use serde::Serialize;

use crate::allocator::{Family, NotInPool};
use crate::api::capi::cluster_name;
use crate::api::capi::{IPAddress, IPAddressClaim};
use crate::api::hub::{AddressBlock, SPOKE_LABEL};
use crate::api::keys::CLUSTER_NAME_LABEL;
use crate::feed::{block_pool, granted};
use crate::index::{AddressState, Index, PoolKey};
use crate::preflight::gather::Inventory;
use crate::preflight::spokes::{NOT_KNOWN, spoke_pool_of};

use super::pools::{self, Pool};

/// The answer, in the shape `-o json` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WhoHas {
    pub address: String,
    /// The `IPAddress` objects that record it.
    pub held: Vec<Holding>,
    /// On a hub: the granted `AddressBlock`s that hold it, leased to a spoke.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<BlockHolding>,
    /// Every pool whose ranges hold it, and what each says of it.
    pub pools: Vec<PoolView>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Holding {
    /// `<kind> [<namespace>/]<name>` of the pool its `poolRef` names.
    pub pool: String,
    /// `<namespace>/<name>` of the `IPAddress`.
    pub ip_address: String,
    /// `<namespace>/<name>` of the claim of that name, when it exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The claim's owners, as `<kind>/<name>`.
    pub owners: Vec<String>,
}

/// A block of a hub's pool, leased to a spoke.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BlockHolding {
    /// `<kind> [<namespace>/]<name>` of the hub's pool the block is of.
    pub pool: String,
    /// `<namespace>/<name>` of the `AddressBlock`.
    pub address_block: String,
    /// The block granted (`status.cidr`).
    pub cidr: String,
    /// The spoke: the `hub.ferro-ipam.dev/spoke` label of the block's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    /// The spoke pool that leased it (`spec.spokePool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoke_pool: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PoolView {
    pub pool: String,
    /// `free`, `held`, `reserved` (set aside for its claim), `blocked`, or, in a spoke pool,
    /// `unknown` (whether a block of the hub holds it is not known here).
    pub state: String,
    /// Why it is blocked: excluded, the gateway, a network or broadcast address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
    /// The claims `spec.reservations` keeps it for, and the entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_for: Option<String>,
    /// The released claim the pool remembers it for (sticky), and until when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sticky_for: Option<String>,
    /// A spoke pool: its hub, and that its blocks are not known here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    /// Whether the next claim of the pool could get it.
    pub could_hand_out: bool,
}

fn holding(inventory: &Inventory, address: &IPAddress) -> Holding {
    let namespace = address.namespace().unwrap_or_default();
    let pool = PoolKey::of_address(&namespace, &address.spec.pool_ref, address.annotations()).map_or_else(
        || format!("{} {} (not ferro-ipam's)", address.spec.pool_ref.kind, address.spec.pool_ref.name),
        |key| key.to_string(),
    );
    let claim: Option<&IPAddressClaim> = inventory
        .claims
        .iter()
        .find(|c| c.namespace().as_deref() == Some(namespace.as_str()) && c.name_any() == address.spec.claim_ref.name);
    Holding {
        pool,
        ip_address: format!("{namespace}/{}", address.name_any()),
        claim: claim.map(|c| format!("{namespace}/{}", c.name_any())),
        cluster: claim.and_then(cluster_name).or_else(|| address.labels().get(CLUSTER_NAME_LABEL).cloned()),
        owners: claim
            .map(|c| c.owner_references().iter().map(|o| format!("{}/{}", o.kind, o.name)).collect())
            .unwrap_or_default(),
    }
}

/// Whether `ip` is the gateway the pool writes into its `IPAddress`es (even outside its ranges).
fn is_gateway(pool: &Pool<'_>, ip: IpAddr) -> bool {
    let gateway = pool.spec.settings(Family::of(ip)).and_then(|(_, gateway)| gateway);
    gateway.and_then(|g| g.parse::<IpAddr>().ok()) == Some(ip) && !pool.key.kind.is_prefix()
}

/// The granted block of `block` that holds `ip`, as who-has tells it.
fn block_holding(inventory: &Inventory, block: &AddressBlock, ip: IpAddr) -> Option<BlockHolding> {
    let cidr = granted(block).filter(|cidr| cidr.contains(&ip))?;
    let namespace = block.namespace().unwrap_or_default();
    Some(BlockHolding {
        pool: block_pool(block)
            .map_or_else(|| crate::preflight::spokes::hub_pool_name(&block.spec.pool), |k| k.to_string()),
        address_block: format!("{namespace}/{}", block.name_any()),
        cidr: cidr.to_string(),
        spoke: inventory.namespaces.get(&namespace).and_then(|labels| labels.get(SPOKE_LABEL)).cloned(),
        spoke_pool: Some(block.spec.spoke_pool.clone()).filter(|p| !p.is_empty()),
    })
}

/// What a spoke pool says of `ip`: as its spec is written, since which blocks of the hub it
/// holds is not known here. Held when a holder of the pool holds it; None when it is in the
/// pool's ranges but nobody here holds it (a block of the hub may or may not hold it).
fn spoke_state(index: &Index, pool: &Pool<'_>, ip: IpAddr) -> Option<AddressState> {
    let written = pool.spec.allocators().unwrap_or_default();
    let Some(allocator) = written.iter().find(|a| a.family() == Family::of(ip)) else {
        return Some(AddressState::NotInPool);
    };
    match allocator.check(ip) {
        Err(NotInPool::Outside | NotInPool::WrongFamily) => Some(AddressState::NotInPool),
        Err(why) => Some(AddressState::Blocked(why)),
        Ok(()) if index.outside(&pool.key).contains(&ip) => Some(AddressState::Used),
        Ok(()) => match index.address_state(&pool.key, ip) {
            AddressState::Blocked(_) | AddressState::NotInPool => None,
            state => Some(state),
        },
    }
}

fn pool_view(index: &Index, pool: &Pool<'_>, ip: IpAddr) -> Option<PoolView> {
    let key = &pool.key;
    let hub = pool.spec.hub().map(|hub| format!("{}: {NOT_KNOWN}", spoke_pool_of(hub)));
    let state = if hub.is_some() { spoke_state(index, pool, ip) } else { Some(index.address_state(key, ip)) };
    let state = match state {
        Some(AddressState::NotInPool) if is_gateway(pool, ip) => Some(AddressState::Blocked(NotInPool::Gateway)),
        state => state,
    };
    let report = index.report(key);
    let reservation = report.reservations.iter().find(|(r, _)| r.address == ip);
    let reserved_for = reservation.map(|(r, _)| format!("{} ({})", r.claim, r.field));
    let sticky_for = report
        .remembered
        .iter()
        .find(|(_, remembered, _)| *remembered == ip)
        .map(|(h, _, until)| format!("{h} until {until}"));
    let (state, blocked) = match state {
        // In a spoke pool's ranges, outside the blocks known here (none).
        None => ("unknown", None),
        Some(AddressState::NotServing | AddressState::NotInPool) => return None,
        Some(AddressState::Blocked(why)) => ("blocked", Some(why.to_string())),
        Some(AddressState::Used) if reservation.is_some_and(|(_, holders)| holders.is_empty()) => ("reserved", None),
        Some(AddressState::Used) => ("held", None),
        Some(AddressState::Free) => ("free", None),
    };
    Some(PoolView {
        pool: key.to_string(),
        state: state.to_owned(),
        blocked,
        could_hand_out: state == "free",
        reserved_for,
        sticky_for,
        hub,
    })
}

/// Who holds `ip`, and what every pool whose ranges hold it says of it.
pub(super) fn answer(inventory: &Inventory, index: &Index, ip: IpAddr) -> WhoHas {
    let held = inventory
        .addresses
        .iter()
        .filter(|a| a.spec.address.parse() == Ok(ip))
        .map(|a| holding(inventory, a))
        .collect();
    let blocks = inventory.blocks.iter().filter_map(|b| block_holding(inventory, b, ip)).collect();
    let pools = pools::all(inventory).iter().filter_map(|p| pool_view(index, p, ip)).collect();
    WhoHas { address: ip.to_string(), held, blocks, pools }
}

/// The answer for people.
pub(super) fn text(answer: &WhoHas) -> String {
    let mut out = String::new();
    if answer.held.is_empty() && answer.blocks.is_empty() {
        let _ = writeln!(out, "{}: held by no IPAddress", answer.address);
    }
    for h in &answer.held {
        let _ = writeln!(out, "{}: held by IPAddress {} of {}", answer.address, h.ip_address, h.pool);
        let _ = writeln!(out, "  claim:   {}", h.claim.as_deref().unwrap_or("none (no claim of that name)"));
        let _ = writeln!(out, "  cluster: {}", h.cluster.as_deref().unwrap_or("none"));
        let owners = if h.owners.is_empty() { "none".to_owned() } else { h.owners.join(", ") };
        let _ = writeln!(out, "  owners:  {owners}");
    }
    for b in &answer.blocks {
        let _ =
            writeln!(out, "{}: leased in AddressBlock {} ({}) of {}", answer.address, b.address_block, b.cidr, b.pool);
        let _ = match &b.spoke {
            Some(spoke) => writeln!(out, "  spoke:      {spoke}"),
            None => writeln!(out, "  spoke:      none (its namespace has no {SPOKE_LABEL} label)"),
        };
        let _ = writeln!(out, "  spoke pool: {}", b.spoke_pool.as_deref().unwrap_or("not recorded"));
    }
    if answer.pools.is_empty() {
        let _ = writeln!(out, "no pool's ranges hold it");
    }
    for p in &answer.pools {
        let _ = write!(out, "{}: {}", p.pool, p.state);
        if let Some(why) = &p.blocked {
            let _ = write!(out, " ({why})");
        }
        if let Some(reserved) = &p.reserved_for {
            let _ = write!(out, "; reserved for {reserved}");
        }
        if let Some(sticky) = &p.sticky_for {
            let _ = write!(out, "; remembered for {sticky}");
        }
        if let Some(hub) = &p.hub {
            let _ = write!(out, "; {hub}");
        }
        let _ = writeln!(out, "{}", if p.could_hand_out { "; the next claim could get it" } else { "" });
    }
    out
}
