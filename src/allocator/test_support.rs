//! Owned pool definitions for unit tests (a `FamilySpec` borrows its strings).

use std::net::IpAddr;

use super::{FamilyPool, FamilySpec, SpecError};

#[derive(Clone, Debug, Default)]
pub(super) struct Def {
    pub(super) addresses: Vec<String>,
    pub(super) excluded: Vec<String>,
    pub(super) prefix: u8,
    pub(super) gateway: Option<String>,
    pub(super) allocate_reserved: bool,
}

/// A definition with `addresses` and `prefix`, no gateway, nothing excluded.
pub(super) fn def(addresses: &[&str], prefix: u8) -> Def {
    Def { addresses: addresses.iter().map(|s| (*s).to_owned()).collect(), prefix, ..Def::default() }
}

impl Def {
    pub(super) fn gateway(mut self, gateway: &str) -> Def {
        self.gateway = Some(gateway.to_owned());
        self
    }

    pub(super) fn excluding(mut self, excluded: &[&str]) -> Def {
        self.excluded = excluded.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    pub(super) fn reserved_allowed(mut self) -> Def {
        self.allocate_reserved = true;
        self
    }

    pub(super) fn spec(&self) -> FamilySpec<'_> {
        FamilySpec {
            addresses: &self.addresses,
            excluded: &self.excluded,
            prefix: self.prefix,
            gateway: self.gateway.as_deref(),
            allocate_reserved: self.allocate_reserved,
        }
    }

    pub(super) fn pool(&self) -> FamilyPool {
        FamilyPool::new(&self.spec()).expect("test definition is valid")
    }

    pub(super) fn error(&self) -> SpecError {
        FamilyPool::new(&self.spec()).expect_err("test definition is invalid")
    }
}

/// Every allocatable address, lowest first, by draining a clone.
pub(super) fn allocatable(pool: &FamilyPool) -> Vec<IpAddr> {
    let mut drained = pool.clone();
    std::iter::from_fn(|| drained.allocate_lowest()).collect()
}
