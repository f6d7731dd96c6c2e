//! The shared index driven from several threads at once, as the claim workers drive it: claims
//! of overlapping pools (two of one namespace, a global pool over both, and a pool of another
//! namespace with the same addresses) allocate and release concurrently. A ledger of the holds
//! the index has granted and not yet taken back must never show one address held twice where
//! two pools share addresses, nor an address outside its pool. The sharing rule and the ranges
//! are the test's own, not the index's.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use ferro_ipam::api::IPPoolSpec;
use ferro_ipam::index::{AllocError, HoldKind, HolderKey, Index, PoolFacts, PoolKey, Request};

const THREADS: u64 = 4;
const ROUNDS: usize = 4000;

/// A pool of the test: its namespace (None: global), name and range of 10.9.0.<first..=last>.
struct Pool {
    namespace: Option<&'static str>,
    name: &'static str,
    first: u8,
    last: u8,
}

const POOLS: [Pool; 4] = [
    Pool { namespace: Some("x"), name: "a", first: 1, last: 40 },
    Pool { namespace: Some("x"), name: "b", first: 20, last: 60 },
    Pool { namespace: None, name: "g", first: 30, last: 80 },
    Pool { namespace: Some("y"), name: "a", first: 1, last: 40 },
];

impl Pool {
    fn key(&self) -> PoolKey {
        match self.namespace {
            Some(ns) => PoolKey::in_cluster(ns, self.name),
            None => PoolKey::global(self.name),
        }
    }

    /// One address must never be in both: pools of one namespace, or a global pool and any.
    fn shares_addresses_with(&self, other: &Pool) -> bool {
        self.namespace.is_none() || other.namespace.is_none() || self.namespace == other.namespace
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let [a, b, c, d] = match ip {
            IpAddr::V4(v4) => v4.octets(),
            IpAddr::V6(_) => return false,
        };
        [a, b, c] == [10, 9, 0] && (self.first..=self.last).contains(&d)
    }

    fn spec(&self) -> IPPoolSpec {
        serde_json::from_value(serde_json::json!({
            "addresses": [format!("10.9.0.{}-10.9.0.{}", self.first, self.last)], "prefix": 24,
        }))
        .expect("a pool spec")
    }
}

/// Granted holds not yet given back: address -> (pool index, holder).
type Ledger = Mutex<HashMap<IpAddr, Vec<(usize, HolderKey)>>>;

/// A small xorshift, so that each thread's choices differ and repeat from run to run.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, sides: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % sides as u64) as usize
    }
}

#[derive(Default)]
struct Tally {
    granted: usize,
    exhausted: usize,
    violations: Vec<String>,
}

fn worker(index: &Index, ledger: &Ledger, thread: u64) -> Tally {
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ (thread + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    let mut tally = Tally::default();
    let mut live: Vec<(usize, HolderKey, IpAddr)> = Vec::new();
    for round in 0..ROUNDS {
        if !live.is_empty() && dice.roll(100) < 45 {
            let (pool, holder, ip) = live.swap_remove(dice.roll(live.len()));
            // Out of the ledger first: the ledger never holds what the index has let go.
            ledger.lock().unwrap().get_mut(&ip).expect("in the ledger").retain(|(p, h)| (*p, h) != (pool, &holder));
            index.release_claim(&POOLS[pool].key(), &holder);
            index.set_hold(&POOLS[pool].key(), &holder, HoldKind::Object, None);
            continue;
        }
        let pool = dice.roll(POOLS.len());
        let namespace = POOLS[pool].namespace.unwrap_or(if dice.roll(2) == 0 { "x" } else { "y" });
        let holder = HolderKey::new(namespace, &format!("t{thread}-{round}"));
        let ip = match index.allocate(&POOLS[pool].key(), &holder, Request::default()) {
            Ok(ip) => ip,
            Err(AllocError::Exhausted(_)) => {
                tally.exhausted += 1;
                continue;
            }
            Err(other) => panic!("{}: {other}", POOLS[pool].key()),
        };
        // Its IPAddress object is written, as the claim controller does next.
        index.set_hold(&POOLS[pool].key(), &holder, HoldKind::Object, Some(ip));
        tally.granted += 1;
        if !POOLS[pool].contains(ip) {
            tally.violations.push(format!("{ip} handed out by {}, outside its range", POOLS[pool].key()));
        }
        let mut ledger = ledger.lock().unwrap();
        let holders = ledger.entry(ip).or_default();
        for (other, other_holder) in holders.iter().filter(|(p, _)| POOLS[*p].shares_addresses_with(&POOLS[pool])) {
            tally.violations.push(format!(
                "{ip} handed to {holder} in {} while {other_holder} holds it in {}",
                POOLS[pool].key(),
                POOLS[*other].key()
            ));
        }
        holders.push((pool, holder.clone()));
        live.push((pool, holder, ip));
    }
    tally
}

#[test]
fn overlapping_pools_never_hand_one_address_to_two_claims_from_several_threads() {
    let (index, _triggers) = Index::new(Duration::ZERO);
    for pool in &POOLS {
        index.upsert_pool(&pool.key(), &pool.spec(), PoolFacts::default(), &[]);
    }
    index.set_ready();
    let ledger = Ledger::default();
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let (index, ledger) = (&index, &ledger);
        let workers: Vec<_> = (0..THREADS).map(|thread| scope.spawn(move || worker(index, ledger, thread))).collect();
        workers.into_iter().map(|w| w.join().expect("a worker panicked")).collect()
    });
    let violations: Vec<&String> = tallies.iter().flat_map(|t| &t.violations).collect();
    assert!(
        violations.is_empty(),
        "{} violations, the first: {:#?}",
        violations.len(),
        &violations[..violations.len().min(10)]
    );
    // The threads did contend: many grants, and pools full often enough to matter.
    let granted: usize = tallies.iter().map(|t| t.granted).sum();
    let exhausted: usize = tallies.iter().map(|t| t.exhausted).sum();
    assert!(granted > 4000 && exhausted > 100, "granted {granted}, exhausted {exhausted}");
}
