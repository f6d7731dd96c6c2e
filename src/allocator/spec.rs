//! A pool family's definition, validated as the in-cluster provider's webhook validates it,
//! and turned into its allocatable set:
//! `union(addresses) - excluded - gateway - reserved`, where reserved is (unless
//! `allocate_reserved`) the network address of `<lowest address>/<prefix>` and, for IPv4 only,
//! its broadcast address.

use std::error::Error;
use std::fmt;
use std::net::IpAddr;

use super::entries::{EntryError, EntryRange, parse_entry};
use super::family::{Family, value_of};
use super::outcome::NotInPool;
use super::prefix_error::PrefixError;
use super::ranges::{self, Span};

/// One family's pool definition, borrowed from the pool object.
#[derive(Clone, Copy, Debug)]
pub struct FamilySpec<'a> {
    /// `spec.addresses`: single IPs, ranges `a-b`, CIDRs.
    pub addresses: &'a [String],
    /// `spec.excludedAddresses`, same forms.
    pub excluded: &'a [String],
    /// `spec.prefix`, handed out with each address and used to find the reserved addresses.
    pub prefix: u8,
    /// `spec.gateway`; `None` or `Some("")` means no gateway.
    pub gateway: Option<&'a str>,
    /// `spec.allocateReservedIPAddresses`.
    pub allocate_reserved: bool,
}

/// The field of a pool spec an error points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpecField {
    Addresses,
    ExcludedAddresses,
    /// A prefix pool's `prefixes`.
    Prefixes,
    /// A prefix pool's `excludedPrefixes`.
    ExcludedPrefixes,
}

impl fmt::Display for SpecField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpecField::Addresses => "addresses",
            SpecField::ExcludedAddresses => "excludedAddresses",
            SpecField::Prefixes => "prefixes",
            SpecField::ExcludedPrefixes => "excludedPrefixes",
        })
    }
}

/// Why a pool definition is refused. Messages name the field, the entry and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecError {
    /// `addresses` is empty.
    NoAddresses,
    /// An entry does not parse.
    BadEntry { field: SpecField, index: usize, error: EntryError },
    /// `addresses[index]` is of another family than `addresses[0]`.
    MixedFamilies { index: usize, entry: String, family: Family, expected: Family },
    /// `prefix` is longer than the family allows.
    PrefixTooLong { prefix: u8, family: Family },
    /// `gateway` is not an IP address.
    BadGateway { gateway: String },
    /// `gateway` is of another family than the addresses.
    GatewayFamily { gateway: String, family: Family, expected: Family },
    /// `excludedAddresses[index]` is of another family than the addresses.
    ExcludedFamily { index: usize, entry: String, family: Family, expected: Family },
    /// `addresses[index]` is not inside `subnet`, the lowest address's `/prefix`.
    OutsideSubnet { index: usize, entry: String, subnet: String, prefix: u8 },
    /// `FamilyPool::with_spec` was asked to switch family while addresses are in use.
    FamilyChanged { from: Family, to: Family, in_use: u128 },
    /// A prefix pool's definition is refused (see [`PrefixError`]).
    Prefix(PrefixError),
    /// `FamilyPool::with_spec` was asked to change the length of the handed-out prefixes.
    GranularityChanged { from: u8, to: u8 },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NoAddresses => {
                f.write_str("addresses is empty: list at least one IP address, range a-b, or CIDR")
            }
            SpecError::BadEntry { field, index, error } => write!(f, "{field}[{index}] {error}"),
            SpecError::MixedFamilies { index, entry, family, expected } => write!(
                f,
                "addresses[{index}] {entry:?} is {family} but addresses[0] is {expected}: \
                 all addresses of a pool must be of one family"
            ),
            SpecError::PrefixTooLong { prefix, family } => {
                write!(f, "prefix {prefix} is not valid for {family} addresses: use 0 to {}", family.bits())
            }
            SpecError::BadGateway { gateway } => write!(
                f,
                "gateway {gateway:?} is not an IP address: write a single address, or leave \
                 gateway empty"
            ),
            SpecError::GatewayFamily { gateway, family, expected } => write!(
                f,
                "gateway {gateway:?} is {family} but the addresses are {expected}: use a gateway \
                 of the addresses' family"
            ),
            SpecError::ExcludedFamily { index, entry, family, expected } => write!(
                f,
                "excludedAddresses[{index}] {entry:?} is {family} but the addresses are \
                 {expected}: exclude only addresses of the pool's family"
            ),
            SpecError::OutsideSubnet { index, entry, subnet, prefix } => write!(
                f,
                "addresses[{index}] {entry:?} is outside {subnet}, the subnet of the lowest \
                 address with prefix {prefix}: shorten the prefix or move the entry into it"
            ),
            SpecError::FamilyChanged { from, to, in_use } => write!(
                f,
                "the pool's addresses changed from {from} to {to} while {in_use} {from} \
                 addresses are in use: release them first, or keep the {from} addresses"
            ),
            SpecError::Prefix(error) => error.fmt(f),
            SpecError::GranularityChanged { from, to } => write!(
                f,
                "allocationPrefixLength changed from {from} to {to}: it is immutable; build a new pool instead"
            ),
        }
    }
}

impl Error for SpecError {}

impl From<PrefixError> for SpecError {
    fn from(error: PrefixError) -> Self {
        SpecError::Prefix(error)
    }
}

/// A validated definition: what is allocatable, and why the rest is not.
///
/// Its sets hold *slots*: an address pool's slot is one address (`shift` 0); a prefix pool's
/// slot is one sub-prefix of length `prefix`, numbered by its network address shifted right by
/// `shift = 128 - prefix` bits, so that a /64 out of a /32 is one of 2^32 slots.
#[derive(Clone, Debug)]
pub(super) struct Definition {
    pub(super) family: Family,
    pub(super) prefix: u8,
    pub(super) gateway: Option<IpAddr>,
    /// Host bits of a slot: 0 for address pools, `128 - allocationPrefixLength` for prefix pools.
    pub(super) shift: u32,
    /// Whether the gateway is held back (address pools) or only written out (prefix pools).
    pub(super) gateway_blocks: bool,
    /// union(addresses)
    pub(super) listed: Vec<Span>,
    pub(super) excluded: Vec<Span>,
    /// Network (and, for IPv4, broadcast) values held back; empty with `allocate_reserved`.
    pub(super) reserved: Vec<u128>,
    pub(super) allocatable: Vec<Span>,
}

impl Definition {
    /// Validates `spec` (in the order the in-cluster webhook checks it) and computes the
    /// allocatable set.
    pub(super) fn new(spec: &FamilySpec) -> Result<Definition, SpecError> {
        let entries = parse_all(spec.addresses, SpecField::Addresses)?;
        let Some(first) = entries.first() else {
            return Err(SpecError::NoAddresses);
        };
        let family = first.family();
        if let Some((index, entry)) = entries.iter().enumerate().find(|(_, e)| e.family() != family) {
            return Err(SpecError::MixedFamilies {
                index,
                entry: spec.addresses[index].clone(),
                family: entry.family(),
                expected: family,
            });
        }
        if spec.prefix > family.bits() {
            return Err(SpecError::PrefixTooLong { prefix: spec.prefix, family });
        }
        let gateway = parse_gateway(spec.gateway, family)?;
        let excluded = parse_all(spec.excluded, SpecField::ExcludedAddresses)?;
        if let Some((index, entry)) = excluded.iter().enumerate().find(|(_, e)| e.family() != family) {
            return Err(SpecError::ExcludedFamily {
                index,
                entry: spec.excluded[index].clone(),
                family: entry.family(),
                expected: family,
            });
        }
        let listed = ranges::normalize(entries.iter().map(to_span).collect());
        let lowest = listed.first().map_or(0, |span| span.first);
        let subnet = Span::from(family.subnet(lowest, spec.prefix));
        check_within(&entries, spec, subnet, family)?;

        let reserved = if spec.allocate_reserved {
            Vec::new()
        } else if family == Family::V4 {
            vec![subnet.first, subnet.last]
        } else {
            vec![subnet.first]
        };
        let mut removed: Vec<Span> = excluded.iter().map(to_span).collect();
        removed.extend(gateway.map(|ip| Span::new(value_of(ip), value_of(ip))));
        removed.extend(reserved.iter().map(|&value| Span::new(value, value)));
        let allocatable = ranges::subtract(&listed, &ranges::normalize(removed));
        Ok(Definition {
            family,
            prefix: spec.prefix,
            gateway,
            shift: 0,
            gateway_blocks: true,
            listed,
            excluded: ranges::normalize(excluded.iter().map(to_span).collect()),
            reserved,
            allocatable,
        })
    }

    /// Whether slot `value` (of the pool's family) is allocatable, and if not, why.
    pub(super) fn classify(&self, value: u128) -> Result<(), NotInPool> {
        if !ranges::contains(&self.listed, value) {
            Err(NotInPool::Outside)
        } else if self.gateway_blocks && self.gateway.is_some_and(|ip| value_of(ip) == value) {
            Err(NotInPool::Gateway)
        } else if ranges::contains(&self.excluded, value) {
            Err(NotInPool::Excluded)
        } else if self.reserved.contains(&value) {
            Err(NotInPool::Reserved)
        } else {
            Ok(())
        }
    }

    pub(super) fn heap_bytes(&self) -> usize {
        (self.listed.capacity() + self.excluded.capacity() + self.allocatable.capacity()) * std::mem::size_of::<Span>()
            + self.reserved.capacity() * std::mem::size_of::<u128>()
    }
}

pub(super) fn to_span(entry: &EntryRange) -> Span {
    Span::from(entry.values())
}

pub(super) fn parse_all(entries: &[String], field: SpecField) -> Result<Vec<EntryRange>, SpecError> {
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| parse_entry(entry).map_err(|error| SpecError::BadEntry { field, index, error }))
        .collect()
}

pub(super) fn parse_gateway(gateway: Option<&str>, family: Family) -> Result<Option<IpAddr>, SpecError> {
    let Some(text) = gateway.filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    let ip: IpAddr = text.parse().map_err(|_| SpecError::BadGateway { gateway: text.to_owned() })?;
    if Family::of(ip) != family {
        return Err(SpecError::GatewayFamily { gateway: text.to_owned(), family: Family::of(ip), expected: family });
    }
    Ok(Some(ip))
}

/// Every `addresses` entry must lie in the subnet of the lowest address (excluded entries and
/// the gateway are not checked, as in the in-cluster webhook).
fn check_within(entries: &[EntryRange], spec: &FamilySpec, subnet: Span, family: Family) -> Result<(), SpecError> {
    let outside = entries.iter().enumerate().find(|(_, entry)| {
        let (first, last) = entry.values();
        first < subnet.first || last > subnet.last
    });
    match outside {
        None => Ok(()),
        Some((index, _)) => Err(SpecError::OutsideSubnet {
            index,
            entry: spec.addresses[index].clone(),
            subnet: match family.address(subnet.first) {
                Some(network) => format!("{network}/{}", spec.prefix),
                None => format!("the /{} subnet", spec.prefix),
            },
            prefix: spec.prefix,
        }),
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
