//! Allocator benchmarks: lowest-free allocation rate, scattered specific allocations, answers
//! on full and nearly full pools, an allocate-and-release cycle under each allocation
//! strategy, and bytes per allocated address (measured by a counting
//! global allocator, compared with `FamilyPool::heap_bytes`).
//!
//! Run: `cargo bench --bench allocator`. The memory report is printed before the timings.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use ferro_ipam::allocator::{FamilyPool, FamilySpec, Strategy};

/// Counts live heap bytes, so memory per address is measured rather than estimated.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc`/`realloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        moved
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const MILLION: u64 = 1_000_000;
const SCATTERED: u64 = 100_000;

/// A pool definition owning its strings.
struct Def {
    addresses: Vec<String>,
    prefix: u8,
    allocate_reserved: bool,
}

impl Def {
    fn new(cidr: &str, prefix: u8, allocate_reserved: bool) -> Def {
        Def { addresses: vec![cidr.to_owned()], prefix, allocate_reserved }
    }

    fn pool(&self) -> FamilyPool {
        let spec = FamilySpec {
            addresses: &self.addresses,
            excluded: &[],
            prefix: self.prefix,
            gateway: None,
            allocate_reserved: self.allocate_reserved,
        };
        FamilyPool::new(&spec).expect("benchmark pool definitions are valid")
    }
}

/// xorshift64*: deterministic, no extra crate.
fn scattered_v6_addresses(count: u64) -> Vec<IpAddr> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..count)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let host = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
            IpAddr::V6(Ipv6Addr::from((0xfd00_u128 << 112) | u128::from(host)))
        })
        .collect()
}

fn v6(s: &str) -> IpAddr {
    s.parse().expect("benchmark address")
}

fn allocate_lowest_n(pool: &mut FamilyPool, n: u64) {
    for _ in 0..n {
        black_box(pool.allocate_lowest());
    }
}

/// A /64 with every address used but one, in the middle: built by two bulk allocations.
fn nearly_full_v6_64() -> FamilyPool {
    let mut pool = Def::new("fd00::/64", 64, true).pool();
    let below = pool.allocate_range(v6("fd00::"), v6("fd00::7fff:ffff:ffff:fffe"));
    let above = pool.allocate_range(v6("fd00::8000:0:0:0"), v6("fd00::ffff:ffff:ffff:ffff"));
    assert_eq!(below.ok().zip(above.ok()).map(|(a, b)| a + b), Some(u128::from(u64::MAX)));
    pool
}

fn full_v4_16() -> FamilyPool {
    let mut pool = Def::new("10.0.0.0/16", 16, false).pool();
    let added = pool.allocate_range("10.0.0.0".parse().unwrap(), "10.0.255.255".parse().unwrap());
    assert_eq!(added, Ok(65_534));
    pool
}

/// Live heap bytes held by what `build` returns, per `count` addresses.
fn measure(label: &str, count: u64, build: impl FnOnce() -> FamilyPool) {
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let pool = build();
    let live = LIVE_BYTES.load(Ordering::Relaxed).saturating_sub(before);
    let estimate = pool.heap_bytes();
    println!(
        "memory {label}: {live} bytes live for {count} addresses = {:.3} bytes/address \
         (heap_bytes() estimates {estimate} = {:.3} bytes/address)",
        live as f64 / count as f64,
        estimate as f64 / count as f64,
    );
    drop(pool);
}

fn report_memory() {
    measure("dense, IPv4 /8, 1,000,000 lowest-free", MILLION, || {
        let mut pool = Def::new("10.0.0.0/8", 8, false).pool();
        allocate_lowest_n(&mut pool, MILLION);
        pool
    });
    measure("dense, IPv6 /48, 1,000,000 lowest-free", MILLION, || {
        let mut pool = Def::new("fd00:1::/48", 48, false).pool();
        allocate_lowest_n(&mut pool, MILLION);
        pool
    });
    // Every `stride`-th address: the densities where chunks are arrays or bitmaps.
    for stride in [2u32, 16, 17, 24, 40] {
        let count = (1u32 << 24) / stride;
        let count = count.min(1_000_000);
        measure(&format!("1 in {stride} addresses of an IPv4 /8"), count.into(), || {
            let mut pool = Def::new("10.0.0.0/8", 8, true).pool();
            for i in 0..count {
                let ip = IpAddr::V4(Ipv4Addr::from((10 << 24) | (i * stride)));
                let _ = black_box(pool.allocate(ip));
            }
            pool
        });
    }
    let addresses = scattered_v6_addresses(SCATTERED);
    measure("sparse, IPv6 /64, 100,000 scattered", SCATTERED, || {
        let mut pool = Def::new("fd00::/64", 64, false).pool();
        for &ip in &addresses {
            let _ = black_box(pool.allocate(ip));
        }
        pool
    });
    measure("nearly full IPv6 /64 (2^64 - 1 used)", u64::MAX, nearly_full_v6_64);
    measure("empty IPv6 /0", 1, || Def::new("::/0", 0, false).pool());
}

fn lowest_free(c: &mut Criterion) {
    let mut group = c.benchmark_group("allocate_lowest");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements(MILLION));
    for (name, def) in
        [("ipv4_/8_1M", Def::new("10.0.0.0/8", 8, false)), ("ipv6_/48_1M", Def::new("fd00:1::/48", 48, false))]
    {
        let empty = def.pool();
        group.bench_function(name, |b| {
            b.iter_batched(
                || empty.clone(),
                |mut pool| {
                    allocate_lowest_n(&mut pool, MILLION);
                    pool
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

fn scattered(c: &mut Criterion) {
    let mut group = c.benchmark_group("allocate_specific");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6))
        .throughput(Throughput::Elements(SCATTERED));
    let addresses = scattered_v6_addresses(SCATTERED);
    let empty = Def::new("fd00::/64", 64, false).pool();
    group.bench_function("ipv6_/64_100k_scattered", |b| {
        b.iter_batched(
            || empty.clone(),
            |mut pool| {
                for &ip in &addresses {
                    let _ = black_box(pool.allocate(ip));
                }
                pool
            },
            BatchSize::PerIteration,
        );
    });
    let mut filled = empty.clone();
    for &ip in &addresses {
        let _ = filled.allocate(ip);
    }
    group.bench_function("ipv6_/64_100k_scattered_is_allocated", |b| {
        b.iter(|| {
            for &ip in &addresses {
                black_box(filled.is_allocated(ip));
            }
        });
    });
    group.bench_function("ipv6_/64_100k_scattered_release_and_reallocate", |b| {
        b.iter(|| {
            for &ip in &addresses {
                let _ = black_box(filled.release(ip));
                let _ = black_box(filled.allocate(ip));
            }
        });
    });
    group.finish();
}

fn full_pools(c: &mut Criterion) {
    let mut group = c.benchmark_group("full_pool");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    let mut full = full_v4_16();
    group.bench_function("ipv4_/16_full_allocate_lowest", |b| {
        b.iter(|| black_box(full.allocate_lowest()));
    });
    let mut nearly_full = nearly_full_v6_64();
    group.bench_function("ipv6_/64_one_free_allocate_lowest", |b| {
        b.iter_batched(
            || nearly_full.clone(),
            |mut pool| (black_box(pool.allocate_lowest()), pool),
            BatchSize::SmallInput,
        );
    });
    group.bench_function("ipv6_/64_one_free_allocate_lowest_and_release", |b| {
        b.iter(|| {
            let ip = black_box(nearly_full.allocate_lowest());
            // Give it back so every iteration finds the one free address again.
            if let Some(ip) = ip {
                let _ = nearly_full.release(ip);
            }
        });
    });
    group.bench_function("ipv6_/64_one_free_counts", |b| {
        b.iter(|| black_box(nearly_full.counts()));
    });
    group.finish();
}

/// One `allocate_next` and one release on a pool already holding `held` addresses, for each
/// strategy: the steady state of a pool whose machines come and go.
fn strategies(c: &mut Criterion) {
    let mut group = c.benchmark_group("strategy_allocate_next_and_release");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for strategy in [Strategy::Lowest, Strategy::LeastRecentlyReleased, Strategy::Random] {
        for (name, def, held) in [
            ("ipv4_/16_50k_held", Def::new("10.0.0.0/16", 16, false), 50_000),
            ("ipv6_/64_100k_held", Def::new("fd00::/64", 64, false), SCATTERED),
        ] {
            let mut pool = def.pool();
            pool.set_strategy(strategy);
            pool.seed(42);
            for _ in 0..held {
                black_box(pool.allocate_next());
            }
            group.bench_function(format!("{strategy}/{name}"), |b| {
                b.iter(|| {
                    if let Some(ip) = black_box(pool.allocate_next()) {
                        let _ = pool.release(ip);
                    }
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, lowest_free, scattered, full_pools, strategies);

fn main() {
    if std::env::args().any(|arg| arg == "--bench") {
        report_memory();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
