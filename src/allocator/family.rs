//! IP families and the conversion between addresses and their 128-bit integer values.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The IP family of an address, a pool or an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// The family of `ip`. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is IPv6.
    #[must_use]
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// Bits in an address of this family: 32 or 128. Also the longest valid prefix.
    #[must_use]
    pub const fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// The highest address of the family as an integer.
    #[must_use]
    pub(super) const fn max_value(self) -> u128 {
        match self {
            Family::V4 => u32::MAX as u128,
            Family::V6 => u128::MAX,
        }
    }

    /// The address whose integer value is `value`; `None` when it does not fit the family.
    #[must_use]
    pub fn address(self, value: u128) -> Option<IpAddr> {
        match self {
            Family::V4 => u32::try_from(value).ok().map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            Family::V6 => Some(IpAddr::V6(Ipv6Addr::from(value))),
        }
    }

    /// First and last value of the subnet `value/prefix` (host bits of `value` ignored).
    /// `prefix` longer than the family allows is treated as the full length.
    #[must_use]
    pub(super) fn subnet(self, value: u128, prefix: u8) -> (u128, u128) {
        let host_bits = u32::from(self.bits().saturating_sub(prefix));
        let host_mask = match 1u128.checked_shl(host_bits) {
            Some(size) => size - 1,
            None => u128::MAX,
        };
        let first = value & !host_mask & self.max_value();
        (first, first | (host_mask & self.max_value()))
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// The integer value of an address (IPv4 in the low 32 bits).
#[must_use]
pub fn value_of(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_displays_as_the_kubernetes_docs_name_it() {
        assert_eq!(Family::V4.to_string(), "IPv4");
        assert_eq!(Family::V6.to_string(), "IPv6");
    }

    #[test]
    fn ipv4_mapped_ipv6_addresses_are_ipv6() {
        let ip: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(Family::of(ip), Family::V6);
    }

    #[test]
    fn subnet_ignores_host_bits_and_handles_prefix_zero() {
        let v = value_of("10.0.0.5".parse().unwrap());
        assert_eq!(Family::V4.subnet(v, 24), (0x0a00_0000, 0x0a00_00ff));
        assert_eq!(Family::V4.subnet(v, 0), (0, u128::from(u32::MAX)));
        assert_eq!(Family::V4.subnet(v, 32), (v, v));
        assert_eq!(Family::V6.subnet(7, 0), (0, u128::MAX));
        assert_eq!(Family::V6.subnet(7, 128), (7, 7));
    }

    #[test]
    fn values_round_trip_and_out_of_family_values_are_refused() {
        for s in ["0.0.0.0", "255.255.255.255", "::", "ffff::1"] {
            let ip: IpAddr = s.parse().unwrap();
            assert_eq!(Family::of(ip).address(value_of(ip)), Some(ip));
        }
        assert_eq!(Family::V4.address(1 << 32), None);
    }
}
