//! A prefix pool's definition, validated as the in-cluster provider's prefix-pool webhook
//! validates it, and turned into its allocatable slots: every sub-prefix of
//! `allocation_length` inside `union(prefixes)` that overlaps no excluded entry. The gateway is
//! only written out: it blocks no sub-prefix.

use std::net::IpAddr;

use super::entries::{EntryKind, parse_entry};
use super::family::{Family, value_of};
use super::prefix_error::PrefixError;
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
