//! Why a prefix pool's definition is refused. It lives apart from `prefix` so that `spec`, whose
//! `SpecError` wraps it, and `prefix`, which builds on `spec`, do not import each other.

use std::error::Error;
use std::fmt;

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
