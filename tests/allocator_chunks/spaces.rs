//! The address spaces of `allocator_chunks`, and offsets drawn where the allocator changes form:
//! around chunk boundaries and at either end of a space.

use std::net::IpAddr;

use proptest::prelude::*;

/// Offsets per chunk of the allocator's bitmap.
pub const CHUNK: u128 = 1 << 16;

#[derive(Clone, Copy, Debug)]
pub enum Space {
    /// 10.0.0.0/12: 2^20 addresses, network and broadcast reserved.
    V4,
    /// fd00::/64.
    V6Net,
    /// ::/0, all 2^128 addresses.
    V6All,
}

impl Space {
    pub fn host_bits(self) -> u32 {
        match self {
            Space::V4 => 20,
            Space::V6Net => 64,
            Space::V6All => 128,
        }
    }

    pub fn last(self) -> u128 {
        if self.host_bits() == 128 { u128::MAX } else { (1u128 << self.host_bits()) - 1 }
    }

    pub fn ip(self, offset: u128) -> IpAddr {
        match self {
            Space::V4 => IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000u32 + offset as u32)),
            Space::V6Net => IpAddr::from(std::net::Ipv6Addr::from((0xfd00u128 << 112) + offset)),
            Space::V6All => IpAddr::from(std::net::Ipv6Addr::from(offset)),
        }
    }

    pub fn offset(self, ip: IpAddr) -> u128 {
        match (self, ip) {
            (Space::V4, IpAddr::V4(v4)) => u128::from(u32::from(v4) - 0x0a00_0000),
            (_, IpAddr::V6(v6)) => u128::from(v6) - if matches!(self, Space::V6Net) { 0xfd00u128 << 112 } else { 0 },
            _ => panic!("{ip} is not of {self:?}"),
        }
    }

    pub fn prefix(self) -> u8 {
        (if matches!(self, Space::V4) { 32 } else { 128 }) - self.host_bits() as u8
    }
}

/// An offset around the boundaries of the first chunks, near either end, or anywhere.
pub fn offset(space: Space) -> impl Strategy<Value = u128> {
    let last = space.last();
    prop_oneof![
        3 => (0u128..6, -64i64..64).prop_map(move |(chunk, d)| (chunk * CHUNK).saturating_add_signed(d.into()).min(last)),
        2 => (0u128..300).prop_map(move |d| last - d),
        1 => 0u128..300,
        1 => any::<u128>().prop_map(move |v| v & last),
    ]
}
