//! What a benchmark invocation measures, from environment variables.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use serde::Serialize;

/// Who fulfils the claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A plain client doing ferro-ipam's writes with no allocation logic: the lower bound.
    Floor,
    FerroIpam,
    InCluster,
}

impl Subject {
    pub fn name(self) -> &'static str {
        match self {
            Subject::Floor => "floor",
            Subject::FerroIpam => "ferro-ipam",
            Subject::InCluster => "in-cluster",
        }
    }

    fn parse(name: &str) -> Result<Subject> {
        Ok(match name.trim() {
            "floor" => Subject::Floor,
            "ferro-ipam" => Subject::FerroIpam,
            "in-cluster" => Subject::InCluster,
            other => bail!("unknown subject {other:?}: floor, ferro-ipam or in-cluster"),
        })
    }
}

impl Serialize for Subject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What the pools hand out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolKind {
    /// `InClusterIPPool`s `pool-<i>` handing out addresses (see layout.rs).
    Addresses,
    /// `InClusterPrefixPool`s `pool-<i>` handing out /64 sub-prefixes (see layout.rs).
    Prefixes,
}

impl PoolKind {
    pub fn name(self) -> &'static str {
        match self {
            PoolKind::Addresses => "addresses",
            PoolKind::Prefixes => "prefixes",
        }
    }

    /// The pool kind the claims name.
    pub fn kind(self) -> &'static str {
        match self {
            PoolKind::Addresses => "InClusterIPPool",
            PoolKind::Prefixes => "InClusterPrefixPool",
        }
    }

    /// The resource name of that kind, as the API server's request counters name it.
    pub fn plural(self) -> &'static str {
        match self {
            PoolKind::Addresses => "inclusterippools",
            PoolKind::Prefixes => "inclusterprefixpools",
        }
    }

    fn parse(name: &str) -> Result<PoolKind> {
        Ok(match name.trim() {
            "addresses" => PoolKind::Addresses,
            "prefixes" => PoolKind::Prefixes,
            other => bail!("unknown pool kind {other:?}: addresses or prefixes"),
        })
    }
}

impl Serialize for PoolKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One configuration: `claims` claims created at once over `pools` pools of `kind`, while the
/// pools' specs are edited `edits_per_second` times a second (0: not at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Shape {
    pub kind: PoolKind,
    pub claims: usize,
    pub pools: usize,
    pub edits_per_second: u32,
}

impl Shape {
    /// For log lines and failures: `1000 claims / 10 pools of addresses, 20 pool edits/s`.
    pub fn describe(&self) -> String {
        let storm = match self.edits_per_second {
            0 => String::new(),
            rate => format!(", {rate} pool edits/s"),
        };
        format!("{} claims / {} pools of {}{storm}", self.claims, self.pools, self.kind.name())
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    /// What the pools hand out, each a configuration of its own.
    pub kinds: Vec<PoolKind>,
    /// Claims created at once per run.
    pub sizes: Vec<usize>,
    /// Over how many pools the claims are spread.
    pub pool_counts: Vec<usize>,
    /// More configurations: many pools with one claim each (`BENCH_MANY_POOLS`) and pool-edit
    /// storms (`BENCH_STORM`).
    pub extra: Vec<Shape>,
    /// Runs per (subject, configuration); the report gives medians.
    pub runs: usize,
    pub subjects: Vec<Subject>,
    /// The in-cluster provider runs only in configurations with at most this many claims.
    pub peer_max_claims: usize,
    /// Sizes (`IPAddress` objects) of the start-up cluster, filled in turn (empty: skip it).
    pub startup_sizes: Vec<usize>,
    pub startup_runs: usize,
    /// The in-cluster provider starts only on start-up clusters of at most this many addresses.
    pub peer_max_startup: usize,
    /// Page size of the list floor's paged run.
    pub list_page_size: u32,
    /// The ferro-ipam binary (a release build) and extra flags for it.
    pub ferro_bin: PathBuf,
    pub ferro_args: Vec<String>,
    /// Claim creations in flight at once.
    pub create_concurrency: usize,
    /// Claims the floor client works on at once (ferro-ipam's default `--claim-concurrency`).
    pub floor_concurrency: usize,
    /// Where results.json and report.md go.
    pub out_dir: PathBuf,
    /// Longest wait for one run's claims.
    pub timeout: Duration,
    /// The shared-pool configuration (shared_pool.rs): claims created at once in each
    /// measurement on a spoke pool and on a local pool (0: not run).
    pub shared_claims: usize,
    /// Rounds of it, each one local and one spoke measurement, the order alternating.
    pub shared_rounds: usize,
    /// The spoke pool's `spec.hub.blockSize`.
    pub shared_block_size: u32,
}

/// A list of values, `default` when the variable is unset; an empty value is an empty list.
fn list<T>(value: Option<String>, default: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let value = value.unwrap_or_else(|| default.to_owned());
    value.split(',').filter(|s| !s.trim().is_empty()).map(|s| parse(s.trim())).collect()
}

fn parse_number<T: std::str::FromStr>(s: &str) -> Result<T> {
    s.trim().replace('_', "").parse().ok().with_context(|| format!("{s:?} is not a number"))
}

/// `[kind:]rest`, the kind `addresses` when left out.
fn with_kind(entry: &str) -> Result<(PoolKind, &str)> {
    match entry.split_once(':') {
        Some((kind, rest)) => Ok((PoolKind::parse(kind)?, rest)),
        None => Ok((PoolKind::Addresses, entry)),
    }
}

/// A `BENCH_MANY_POOLS` entry: `[kind:]N`, N claims over one pool and then over N pools (one
/// claim each), the pair whose CPU times many_pools.rs compares; `0`: none.
fn many_pools(entry: &str) -> Result<Vec<Shape>> {
    let (kind, n) = with_kind(entry)?;
    let n: usize = parse_number(n).with_context(|| format!("BENCH_MANY_POOLS entry {entry:?}: [kind:]N"))?;
    let many = Shape { kind, claims: n, pools: n, edits_per_second: 0 };
    Ok(match n {
        0 => Vec::new(),
        _ => vec![crate::many_pools::one_pool(&many), many],
    })
}

/// A `BENCH_STORM` entry: `[kind:]CLAIMSxPOOLS@EDITS_PER_SECOND`; `0`: none.
fn storm(entry: &str) -> Result<Option<Shape>> {
    if entry.trim() == "0" {
        return Ok(None);
    }
    let expected = || format!("BENCH_STORM entry {entry:?}: [kind:]CLAIMSxPOOLS@EDITS_PER_SECOND, e.g. 10000x100@20");
    let (kind, rest) = with_kind(entry)?;
    let (sizes, rate) = rest.split_once('@').with_context(expected)?;
    let (claims, pools) = sizes.split_once('x').with_context(expected)?;
    let shape = Shape {
        kind,
        claims: parse_number(claims).with_context(expected)?,
        pools: parse_number(pools).with_context(expected)?,
        edits_per_second: parse_number(rate).with_context(expected)?,
    };
    ensure!(shape.claims > 0 && shape.pools > 0 && shape.edits_per_second > 0, "{}: all three above 0", expected());
    Ok(Some(shape))
}

/// A spoke pool's block size: one of those the CRD allows.
fn shared_block_size(size: usize) -> Result<u32> {
    let allowed = ferro_ipam::api::hub::BLOCK_SIZES;
    match u32::try_from(size) {
        Ok(size) if allowed.contains(&size) => Ok(size),
        _ => bail!("BENCH_SHARED_BLOCK_SIZE={size}: one of {allowed:?}"),
    }
}

/// The defaults, full or quick (`BENCH_QUICK=1`).
struct Defaults {
    sizes: &'static str,
    runs: usize,
    many_pools: &'static str,
    storm: &'static str,
    startup: &'static str,
    shared_claims: usize,
}

const FULL: Defaults = Defaults {
    sizes: "1000,10000,50000",
    runs: 3,
    many_pools: "10000",
    storm: "10000x100@20",
    startup: "20000,100000",
    shared_claims: 1000,
};

/// Every new path at a small scale: 300 pools (beyond 256, so /24s), a storm over 10 pools, two
/// start-up sizes, 200 claims on a spoke pool and a local one.
const QUICK: Defaults = Defaults {
    sizes: "200,1000",
    runs: 1,
    many_pools: "300",
    storm: "1000x10@20",
    startup: "2000,5000",
    shared_claims: 200,
};

impl Config {
    /// From the process's environment; the ferro-ipam binary must exist.
    pub fn from_env() -> Result<Config> {
        let config = Config::from_vars(|name| std::env::var(name).ok())?;
        if !config.ferro_bin.exists() {
            bail!(
                "{} does not exist: cargo build --release --bin ferro-ipam, or set FERRO_IPAM_BIN",
                config.ferro_bin.display()
            );
        }
        Ok(config)
    }

    /// From variables read with `var`. BENCH_QUICK=1 gives a smoke run (small sizes, one run);
    /// every other variable overrides.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let defaults = if var("BENCH_QUICK").is_some_and(|v| v == "1") { QUICK } else { FULL };
        let number = |name: &str, default: usize| -> Result<usize> {
            match var(name) {
                Some(v) => parse_number(&v).with_context(|| format!("{name}={v:?}")),
                None => Ok(default),
            }
        };
        let runs = number("BENCH_RUNS", defaults.runs)?;
        let mut extra: Vec<Shape> =
            list(var("BENCH_MANY_POOLS"), defaults.many_pools, many_pools)?.into_iter().flatten().collect();
        extra.extend(list(var("BENCH_STORM"), defaults.storm, storm)?.into_iter().flatten());
        let mut startup_sizes: Vec<usize> = list(var("BENCH_STARTUP_ADDRESSES"), defaults.startup, parse_number)?;
        startup_sizes.retain(|&n| n > 0);
        startup_sizes.sort_unstable();
        startup_sizes.dedup();
        let ferro_bin = var("FERRO_IPAM_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| ferro_ipam_e2e::plane::repo_root().join("target/release/ferro-ipam"));
        Ok(Config {
            kinds: list(var("BENCH_KINDS"), "addresses,prefixes", PoolKind::parse)?,
            sizes: list(var("BENCH_N"), defaults.sizes, parse_number)?,
            pool_counts: list(var("BENCH_POOLS"), "1,100", parse_number)?,
            extra,
            runs,
            subjects: list(var("BENCH_SUBJECTS"), "floor,ferro-ipam,in-cluster", Subject::parse)?,
            peer_max_claims: number("BENCH_PEER_MAX_CLAIMS", 10_000)?,
            startup_sizes,
            startup_runs: number("BENCH_STARTUP_RUNS", runs)?,
            peer_max_startup: number("BENCH_PEER_MAX_STARTUP", 20_000)?,
            list_page_size: u32::try_from(number(
                "BENCH_LIST_PAGE_SIZE",
                crate::list_floor::DEFAULT_PAGE_SIZE as usize,
            )?)
            .context("BENCH_LIST_PAGE_SIZE")?,
            ferro_bin,
            ferro_args: var("BENCH_FERRO_ARGS")
                .map(|a| a.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
            create_concurrency: number("BENCH_CREATE_CONCURRENCY", 100)?,
            floor_concurrency: number("BENCH_FLOOR_CONCURRENCY", 64)?,
            out_dir: var("BENCH_OUT")
                .map(PathBuf::from)
                .unwrap_or_else(|| ferro_ipam_e2e::plane::repo_root().join("target/bench")),
            timeout: Duration::from_secs(number("BENCH_TIMEOUT_SECONDS", 3600)? as u64),
            shared_claims: number("BENCH_SHARED_POOL", defaults.shared_claims)?,
            shared_rounds: number("BENCH_SHARED_ROUNDS", runs)?,
            shared_block_size: shared_block_size(number("BENCH_SHARED_BLOCK_SIZE", 16)?)?,
        })
    }

    /// Every configuration, each once: kinds × sizes × pool counts, then the many-pools ones,
    /// then the storms.
    pub fn shapes(&self) -> Vec<Shape> {
        let mut all = Vec::new();
        for &kind in &self.kinds {
            for &claims in &self.sizes {
                for &pools in &self.pool_counts {
                    all.push(Shape { kind, claims, pools, edits_per_second: 0 });
                }
            }
        }
        for shape in &self.extra {
            if !all.contains(shape) {
                all.push(*shape);
            }
        }
        all
    }

    /// Why `subject` does not run `shape`, if it does not.
    pub fn skip(&self, subject: Subject, shape: &Shape) -> Option<String> {
        (subject == Subject::InCluster && shape.claims > self.peer_max_claims)
            .then(|| format!("not run: above BENCH_PEER_MAX_CLAIMS ({})", self.peer_max_claims))
    }

    /// Whether the shared-pool configuration runs: it measures ferro-ipam alone, so only when
    /// ferro-ipam is a subject, and with claims and rounds above 0.
    pub fn shared_pool(&self) -> bool {
        self.shared_claims > 0 && self.shared_rounds > 0 && self.subjects.contains(&Subject::FerroIpam)
    }

    /// Why the in-cluster provider does not start on the start-up cluster of `addresses`, if it
    /// does not.
    pub fn skip_startup(&self, addresses: usize) -> Option<String> {
        (addresses > self.peer_max_startup)
            .then(|| format!("not run: above BENCH_PEER_MAX_STARTUP ({})", self.peer_max_startup))
    }
}

/// The subjects in the order of pass `pass`: as configured in even passes, reversed in odd ones,
/// so that neither goes first on a warmer or busier machine in every pass.
pub fn order(subjects: &[Subject], pass: usize) -> Vec<Subject> {
    let mut ordered = subjects.to_vec();
    if pass % 2 == 1 {
        ordered.reverse();
    }
    ordered
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Config> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Config::from_vars(|name| vars.get(name).cloned())
    }

    fn shape(kind: PoolKind, claims: usize, pools: usize, edits_per_second: u32) -> Shape {
        Shape { kind, claims, pools, edits_per_second }
    }

    #[test]
    fn passes_alternate_the_order_of_the_subjects() {
        let all = [Subject::Floor, Subject::FerroIpam, Subject::InCluster];
        assert_eq!(order(&all, 0), all);
        assert_eq!(order(&all, 1), [Subject::InCluster, Subject::FerroIpam, Subject::Floor]);
        assert_eq!(order(&all, 2), all);
    }

    #[test]
    fn the_defaults_add_many_pools_and_a_storm_to_the_grid() {
        let c = config(&[]).unwrap();
        assert_eq!(c.sizes, [1000, 10_000, 50_000]);
        assert_eq!(c.startup_sizes, [20_000, 100_000]);
        assert_eq!(
            (c.runs, c.startup_runs, c.peer_max_claims, c.peer_max_startup, c.list_page_size),
            (3, 3, 10_000, 20_000, 500)
        );
        let shapes = c.shapes();
        // The many-pools run's one-pool run is in the grid already (10,000 claims over 1 pool).
        assert_eq!(shapes.len(), 2 * 3 * 2 + 2);
        assert_eq!(shapes[0], shape(PoolKind::Addresses, 1000, 1, 0));
        assert!(shapes[..12].contains(&shape(PoolKind::Addresses, 10_000, 1, 0)));
        assert_eq!(shapes[12], shape(PoolKind::Addresses, 10_000, 10_000, 0));
        assert_eq!(shapes[13], shape(PoolKind::Addresses, 10_000, 100, 20));
        assert_eq!((c.shared_claims, c.shared_rounds, c.shared_block_size), (1000, 3, 16));
        assert!(c.shared_pool());
    }

    #[test]
    fn quick_covers_more_than_256_pools_a_storm_and_two_startup_sizes() {
        let c = config(&[("BENCH_QUICK", "1")]).unwrap();
        assert_eq!(c.sizes, [200, 1000]);
        assert_eq!(c.startup_sizes, [2000, 5000]);
        assert_eq!(c.runs, 1);
        let shapes = c.shapes();
        assert!(shapes.contains(&shape(PoolKind::Addresses, 300, 300, 0)));
        assert!(shapes.contains(&shape(PoolKind::Addresses, 1000, 10, 20)));
        assert!(shapes.iter().any(|s| s.pools > crate::layout::MAX_WIDE_POOLS));
        assert_eq!((c.shared_claims, c.shared_rounds), (200, 1));
        assert!(c.shared_pool());
    }

    #[test]
    fn the_shared_pool_runs_alone_when_everything_else_is_off_and_not_without_ferro_ipam() {
        let alone = config(&[
            ("BENCH_N", ""),
            ("BENCH_MANY_POOLS", "0"),
            ("BENCH_STORM", "0"),
            ("BENCH_STARTUP_ADDRESSES", "0"),
            ("BENCH_SHARED_POOL", "500"),
            ("BENCH_SHARED_BLOCK_SIZE", "64"),
        ])
        .unwrap();
        assert!(alone.shapes().is_empty() && alone.startup_sizes.is_empty());
        assert!(alone.shared_pool());
        assert_eq!((alone.shared_claims, alone.shared_rounds, alone.shared_block_size), (500, 3, 64));
        // Its rounds follow BENCH_RUNS unless set.
        assert_eq!(config(&[("BENCH_RUNS", "5")]).unwrap().shared_rounds, 5);
        assert_eq!(config(&[("BENCH_RUNS", "5"), ("BENCH_SHARED_ROUNDS", "2")]).unwrap().shared_rounds, 2);
        assert!(!config(&[("BENCH_SHARED_POOL", "0")]).unwrap().shared_pool());
        assert!(!config(&[("BENCH_SUBJECTS", "floor,in-cluster")]).unwrap().shared_pool());
        assert!(config(&[("BENCH_SHARED_BLOCK_SIZE", "10")]).is_err());
    }

    #[test]
    fn many_pools_and_storms_parse_with_an_optional_kind_and_zero_turns_them_off() {
        let c = config(&[
            ("BENCH_N", ""),
            ("BENCH_MANY_POOLS", "prefixes:500, 2_000"),
            ("BENCH_STORM", "addresses:5000x50@10,prefixes:100x2@1"),
        ])
        .unwrap();
        assert_eq!(
            c.shapes(),
            [
                shape(PoolKind::Prefixes, 500, 1, 0),
                shape(PoolKind::Prefixes, 500, 500, 0),
                shape(PoolKind::Addresses, 2000, 1, 0),
                shape(PoolKind::Addresses, 2000, 2000, 0),
                shape(PoolKind::Addresses, 5000, 50, 10),
                shape(PoolKind::Prefixes, 100, 2, 1),
            ]
        );
        let off = config(&[("BENCH_N", ""), ("BENCH_MANY_POOLS", "0"), ("BENCH_STORM", "0")]).unwrap();
        assert!(off.shapes().is_empty());
        let empty = config(&[("BENCH_N", ""), ("BENCH_MANY_POOLS", ""), ("BENCH_STORM", "")]).unwrap();
        assert!(empty.shapes().is_empty());
        for bad in ["10000x100", "10000@20", "x100@20", "10000x100@0", "dollars:10x1@1", "10000x100@fast"] {
            let error = config(&[("BENCH_STORM", bad)]).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(
                format!("{error:#}").contains("BENCH_STORM") || format!("{error:#}").contains("pool kind"),
                "{error:#}"
            );
        }
        assert!(config(&[("BENCH_MANY_POOLS", "many")]).is_err());
    }

    #[test]
    fn a_grid_configuration_is_not_repeated_by_an_extra_one() {
        let c = config(&[
            ("BENCH_N", "100"),
            ("BENCH_POOLS", "100"),
            ("BENCH_KINDS", "addresses"),
            ("BENCH_MANY_POOLS", "100"),
            ("BENCH_STORM", "0"),
        ])
        .unwrap();
        // The many-pools run brings its one-pool run; the grid's 100 over 100 is not repeated.
        assert_eq!(c.shapes(), [shape(PoolKind::Addresses, 100, 100, 0), shape(PoolKind::Addresses, 100, 1, 0)]);
    }

    #[test]
    fn the_in_cluster_provider_is_skipped_above_its_limits_and_only_it() {
        let c = config(&[("BENCH_PEER_MAX_CLAIMS", "5000"), ("BENCH_PEER_MAX_STARTUP", "3000")]).unwrap();
        let big = shape(PoolKind::Addresses, 5001, 1, 0);
        assert_eq!(c.skip(Subject::InCluster, &big).as_deref(), Some("not run: above BENCH_PEER_MAX_CLAIMS (5000)"));
        assert_eq!(c.skip(Subject::FerroIpam, &big), None);
        assert_eq!(c.skip(Subject::Floor, &big), None);
        assert_eq!(c.skip(Subject::InCluster, &shape(PoolKind::Addresses, 5000, 1, 0)), None);
        assert_eq!(c.skip_startup(3000), None);
        assert_eq!(c.skip_startup(3001).as_deref(), Some("not run: above BENCH_PEER_MAX_STARTUP (3000)"));
    }

    #[test]
    fn startup_sizes_are_a_sorted_list_and_zero_skips_start_up() {
        assert_eq!(config(&[("BENCH_STARTUP_ADDRESSES", "100000,20_000")]).unwrap().startup_sizes, [20_000, 100_000]);
        assert_eq!(config(&[("BENCH_STARTUP_ADDRESSES", "5000")]).unwrap().startup_sizes, [5000]);
        assert!(config(&[("BENCH_STARTUP_ADDRESSES", "0")]).unwrap().startup_sizes.is_empty());
        assert_eq!(config(&[("BENCH_LIST_PAGE_SIZE", "0")]).unwrap().list_page_size, 0);
        // Explicit values still override the quick defaults.
        let c = config(&[("BENCH_QUICK", "1"), ("BENCH_RUNS", "2"), ("BENCH_N", "50")]).unwrap();
        assert_eq!((c.runs, c.startup_runs, c.sizes.as_slice()), (2, 2, &[50][..]));
    }
}
