//! Pools shared by many management clusters through a hub: the hub grants `AddressBlock`s
//! of its shared pools ([`grant`]); a spoke leases blocks for its spoke pools and returns
//! empty ones ([`spoke`]).

pub mod grant;
pub mod spoke;
