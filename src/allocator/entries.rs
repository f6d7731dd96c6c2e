//! Parsing of pool entries (`addresses` and `excludedAddresses`), as the in-cluster provider
//! reads them: an entry containing `-` is a range `first-last`, one containing `/` is a CIDR
//! (host bits allowed: `10.0.0.5/24` is the network 10.0.0.0/24), anything else a single address.

use std::error::Error;
use std::fmt;
use std::net::IpAddr;

use super::family::{Family, value_of};

/// How an entry was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// `10.0.0.1`
    Single,
    /// `10.0.0.1-10.0.0.9`
    Range,
    /// `10.0.0.0/24`; `prefix_len` as written.
    Cidr { prefix_len: u8 },
}

/// A parsed entry: the inclusive address range `first..=last` of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryRange {
    first: IpAddr,
    last: IpAddr,
    kind: EntryKind,
}

impl EntryRange {
    /// Lowest address of the entry (the network address for a CIDR).
    #[must_use]
    pub fn first(&self) -> IpAddr {
        self.first
    }

    /// Highest address of the entry.
    #[must_use]
    pub fn last(&self) -> IpAddr {
        self.last
    }

    #[must_use]
    pub fn kind(&self) -> EntryKind {
        self.kind
    }

    #[must_use]
    pub fn family(&self) -> Family {
        Family::of(self.first)
    }

    /// Whether `ip` lies in the entry.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        Family::of(ip) == self.family() && (value_of(self.first)..=value_of(self.last)).contains(&value_of(ip))
    }

    /// The entry's bounds as integers.
    #[must_use]
    pub(super) fn values(&self) -> (u128, u128) {
        (value_of(self.first), value_of(self.last))
    }
}

impl fmt::Display for EntryRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            EntryKind::Single => write!(f, "{}", self.first),
            EntryKind::Range => write!(f, "{}-{}", self.first, self.last),
            EntryKind::Cidr { prefix_len } => write!(f, "{}/{prefix_len}", self.first),
        }
    }
}

/// Why an entry does not parse. Every message quotes the entry and says what to write instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryError {
    /// The entry is the empty string.
    Empty,
    /// Neither a range, a CIDR nor an address.
    NotAnAddress { entry: String },
    /// One end of a range `first-last` is not an address.
    BadRangeEnd { entry: String, end: String },
    /// The two ends of a range are of different families.
    RangeMixesFamilies { entry: String },
    /// The range ends before it starts.
    RangeReversed { entry: String },
    /// The part before `/` is not an address.
    BadCidrAddress { entry: String },
    /// The part after `/` is not a prefix length valid for the family.
    BadPrefixLength { entry: String, family: Family },
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryError::Empty => write!(f, "\"\" is empty: write an IP address, a range a-b, or a CIDR"),
            EntryError::NotAnAddress { entry } => {
                write!(f, "{entry:?} is not an IP address, a range a-b, or a CIDR")
            }
            EntryError::BadRangeEnd { entry, end } => write!(
                f,
                "{entry:?} is not a valid range: {end:?} is not an IP address \
                 (write a range as <first IP>-<last IP>, no spaces)"
            ),
            EntryError::RangeMixesFamilies { entry } => write!(
                f,
                "{entry:?} is not a valid range: one end is IPv4 and the other IPv6 \
                 (both ends must be of one family)"
            ),
            EntryError::RangeReversed { entry } => write!(
                f,
                "{entry:?} is not a valid range: it ends before it starts \
                 (write the lower address first)"
            ),
            EntryError::BadCidrAddress { entry } => {
                write!(f, "{entry:?} is not a valid CIDR: the part before '/' is not an IP address")
            }
            EntryError::BadPrefixLength { entry, family } => write!(
                f,
                "{entry:?} is not a valid CIDR: the prefix length must be a number from 0 to {} \
                 for {family}",
                family.bits()
            ),
        }
    }
}

impl Error for EntryError {}

/// Parses one `addresses` or `excludedAddresses` entry.
///
/// IPv6 zones (`fe80::1%eth0`) and IPv4 octets with leading zeros are refused.
pub fn parse_entry(entry: &str) -> Result<EntryRange, EntryError> {
    if entry.is_empty() {
        return Err(EntryError::Empty);
    }
    if let Some((first, last)) = entry.split_once('-') {
        return parse_range(entry, first, last);
    }
    if let Some((address, prefix_len)) = entry.split_once('/') {
        return parse_cidr(entry, address, prefix_len);
    }
    match entry.parse::<IpAddr>() {
        Ok(ip) => Ok(EntryRange { first: ip, last: ip, kind: EntryKind::Single }),
        Err(_) => Err(EntryError::NotAnAddress { entry: entry.to_owned() }),
    }
}

fn parse_range(entry: &str, first: &str, last: &str) -> Result<EntryRange, EntryError> {
    let end = |text: &str| {
        text.parse::<IpAddr>().map_err(|_| EntryError::BadRangeEnd { entry: entry.to_owned(), end: text.to_owned() })
    };
    let (first, last) = (end(first)?, end(last)?);
    if Family::of(first) != Family::of(last) {
        return Err(EntryError::RangeMixesFamilies { entry: entry.to_owned() });
    }
    if value_of(first) > value_of(last) {
        return Err(EntryError::RangeReversed { entry: entry.to_owned() });
    }
    Ok(EntryRange { first, last, kind: EntryKind::Range })
}

fn parse_cidr(entry: &str, address: &str, prefix_len: &str) -> Result<EntryRange, EntryError> {
    let ip = address.parse::<IpAddr>().map_err(|_| EntryError::BadCidrAddress { entry: entry.to_owned() })?;
    let family = Family::of(ip);
    let prefix_len =
        parse_prefix_len(prefix_len, family).ok_or(EntryError::BadPrefixLength { entry: entry.to_owned(), family })?;
    let (first, last) = family.subnet(value_of(ip), prefix_len);
    match (family.address(first), family.address(last)) {
        (Some(first), Some(last)) => Ok(EntryRange { first, last, kind: EntryKind::Cidr { prefix_len } }),
        _ => Err(EntryError::BadCidrAddress { entry: entry.to_owned() }),
    }
}

/// A decimal prefix length without sign or leading zeros, at most the family's bits (as Go's
/// `netip.ParsePrefix` accepts it).
fn parse_prefix_len(text: &str, family: Family) -> Option<u8> {
    let digits_only = !text.is_empty() && text.len() <= 3 && text.bytes().all(|b| b.is_ascii_digit());
    if !digits_only || (text.len() > 1 && text.starts_with('0')) {
        return None;
    }
    text.parse::<u8>().ok().filter(|len| *len <= family.bits())
}

/// Entries split by family, in their original order, for dual-stack pools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FamilySplit {
    pub v4: Vec<String>,
    pub v6: Vec<String>,
}

impl FamilySplit {
    /// The entries of `family`.
    #[must_use]
    pub fn of(&self, family: Family) -> &[String] {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }
}

/// Splits entries by family; on the first entry that does not parse, returns its index and why.
pub fn split_by_family(entries: &[String]) -> Result<FamilySplit, (usize, EntryError)> {
    let mut split = FamilySplit::default();
    for (index, entry) in entries.iter().enumerate() {
        let parsed = parse_entry(entry).map_err(|error| (index, error))?;
        match parsed.family() {
            Family::V4 => split.v4.push(entry.clone()),
            Family::V6 => split.v6.push(entry.clone()),
        }
    }
    Ok(split)
}

#[cfg(test)]
#[path = "entries_tests.rs"]
mod tests;
