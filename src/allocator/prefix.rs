//! A prefix pool's definition, validated as the in-cluster provider's prefix-pool webhook
//! validates it, and turned into its allocatable slots: every sub-prefix of
//! `allocation_length` inside `union(prefixes)` that overlaps no excluded entry. The gateway is
//! only written out: it blocks no sub-prefix.

use std::error::Error;
use std::fmt;
use std::net::IpAddr;

use super::entries::{EntryKind, parse_entry};
use super::family::{Family, value_of};
use super::ranges::{self, Span};
use super::spec::{Definition, SpecError, SpecField, parse_all, to_span};

/// Allocation length of a prefix pool that does not set one.
pub const DEFAULT_ALLOCATION_LENGTH: u8 = 64;

/// A prefix pool's definition, borrowed from the pool object.
#[derive(Clone, Copy, Debug)]
pub struct PrefixSpec<'a> {
    /// `spec.prefixes`: network-aligned IPv6 CIDRs.
    pub prefixes: &'a [String],
    /// `spec.excludedPrefixes`: IPv6 addresses, ranges `a-b` or CIDRs.
    pub excluded: &'a [String],
    /// `spec.allocationPrefixLength`, 1 to 128: the length of every handed-out sub-prefix.
    pub allocation_length: u8,
    /// `spec.gateway`; `None` or `Some("")` means no gateway.
    pub gateway: Option<&'a str>,
}

/// Why a prefix pool's definition is refused. Messages name the field and the entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// `prefixes` is empty.
    NoPrefixes,
    /// `allocationPrefixLength` is outside 1 to 128.
    AllocationLength { length: i64 },
    /// `prefixes[index]` is not a CIDR.
    NotCidr { index: usize, entry: String },
    /// `prefixes[index]` is IPv4.
    NotIpv6 { index: usize, entry: String },
    /// `prefixes[index]` has host bits set.
    NotAligned { index: usize, entry: String },
    /// `prefixes[index]` is longer than the allocation length.
    LongerThanAllocation { index: usize, entry: String, allocation_length: u8 },
    /// `gateway` is an IPv4 address.
    GatewayNotIpv6 { gateway: String },
    /// `excludedPrefixes[index]` is IPv4.
    ExcludedNotIpv6 { index: usize, entry: String },
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::NoPrefixes => f.write_str("prefixes is required: list at least one IPv6 CIDR"),
            PrefixError::AllocationLength { length } => {
                write!(
                    f,
                    "allocationPrefixLength {length} is not valid: allocationPrefixLength must be between 1 and 128"
                )
            }
            PrefixError::NotCidr { index, entry } => {
                write!(f, "prefixes[{index}] {entry:?}: provided entry is not a valid IPv6 CIDR")
            }
            PrefixError::NotIpv6 { index, entry } => {
                write!(f, "prefixes[{index}] {entry:?}: only IPv6 prefixes are supported")
            }
            PrefixError::NotAligned { index, entry } => write!(
                f,
                "prefixes[{index}] {entry:?}: CIDR must be network-aligned (write its network address, host bits zero)"
            ),
            PrefixError::LongerThanAllocation { index, entry, allocation_length } => write!(
                f,
                "prefixes[{index}] {entry:?}: CIDR prefix length must be <= allocationPrefixLength ({allocation_length})"
            ),
            PrefixError::GatewayNotIpv6 { gateway } => {
                write!(f, "gateway {gateway:?}: provided gateway must be IPv6")
            }
            PrefixError::ExcludedNotIpv6 { index, entry } => {
                write!(f, "excludedPrefixes[{index}] {entry:?}: only IPv6 excluded prefixes are supported")
            }
        }
    }
}

impl Error for PrefixError {}

impl From<PrefixError> for SpecError {
    fn from(error: PrefixError) -> Self {
        SpecError::Prefix(error)
    }
}

/// The slots (sub-prefix numbers) an address span touches.
fn slots_of(span: Span, shift: u32) -> Span {
    Span::new(span.first >> shift, span.last >> shift)
}

impl Definition {
    /// Validates a prefix pool (in the order the in-cluster webhook checks it) and computes its
    /// allocatable slots.
    pub(super) fn of_prefixes(spec: &PrefixSpec) -> Result<Definition, SpecError> {
        if spec.prefixes.is_empty() {
            return Err(PrefixError::NoPrefixes.into());
        }
        let length = spec.allocation_length;
        if !(1..=128).contains(&length) {
            return Err(PrefixError::AllocationLength { length: i64::from(length) }.into());
        }
        let shift = u32::from(128 - length);
        let mut listed = Vec::with_capacity(spec.prefixes.len());
        for (index, entry) in spec.prefixes.iter().enumerate() {
            listed.push(parse_prefix(index, entry, length)?);
        }
        let gateway = super::spec::parse_gateway(spec.gateway, Family::V6).map_err(|error| match error {
            SpecError::GatewayFamily { gateway, .. } => SpecError::Prefix(PrefixError::GatewayNotIpv6 { gateway }),
            other => other,
        })?;
        let excluded = parse_all(spec.excluded, SpecField::ExcludedPrefixes)?;
        if let Some((index, _)) = excluded.iter().enumerate().find(|(_, e)| e.family() != Family::V6) {
            return Err(PrefixError::ExcludedNotIpv6 { index, entry: spec.excluded[index].clone() }.into());
        }
        let listed = ranges::normalize(listed.into_iter().map(|span| slots_of(span, shift)).collect());
        // A sub-prefix that overlaps an excluded entry in any address is skipped.
        let excluded = ranges::normalize(excluded.iter().map(|e| slots_of(to_span(e), shift)).collect());
        let allocatable = ranges::subtract(&listed, &excluded);
        Ok(Definition {
            family: Family::V6,
            prefix: length,
            gateway,
            shift,
            gateway_blocks: false,
            listed,
            excluded,
            reserved: Vec::new(),
            allocatable,
        })
    }
}

/// One `prefixes` entry as its address span.
fn parse_prefix(index: usize, entry: &str, allocation_length: u8) -> Result<Span, PrefixError> {
    let not_cidr = || PrefixError::NotCidr { index, entry: entry.to_owned() };
    let (address, _) = entry.split_once('/').ok_or_else(not_cidr)?;
    let parsed = parse_entry(entry).map_err(|_| not_cidr())?;
    let EntryKind::Cidr { prefix_len } = parsed.kind() else {
        return Err(not_cidr());
    };
    if parsed.family() != Family::V6 {
        return Err(PrefixError::NotIpv6 { index, entry: entry.to_owned() });
    }
    if address.parse::<IpAddr>().ok() != Some(parsed.first()) {
        return Err(PrefixError::NotAligned { index, entry: entry.to_owned() });
    }
    if prefix_len > allocation_length {
        return Err(PrefixError::LongerThanAllocation { index, entry: entry.to_owned(), allocation_length });
    }
    Ok(Span::new(value_of(parsed.first()), value_of(parsed.last())))
}

#[cfg(test)]
#[path = "prefix_tests.rs"]
mod tests;
