//! What `top --metrics` reads from the leader's metrics endpoint: the net number of addresses
//! each pool gained per hour, from `ferro_ipam_allocations_total` and `ferro_ipam_releases_total`
//! scraped twice, an interval apart (parsing: no client; scraping: client required).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// How the metrics endpoint is reached.
pub struct Endpoint {
    /// `http(s)://HOST:PORT/PATH`.
    pub url: String,
    /// A bearer token, for the HTTPS endpoint of `deploy/` (a reader's ServiceAccount token).
    pub token: Option<String>,
    /// Accept a serving certificate nobody signed for us (the endpoint's own, by default).
    pub insecure: bool,
}

/// Allocations and releases of one pool, as counted by the provider since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub allocations: f64,
    pub releases: f64,
}

/// The pool a series is about, written as [`crate::index::PoolKey`] displays it.
fn pool_of(labels: &str) -> Option<String> {
    let mut kind = None;
    let mut namespace = "";
    let mut pool = None;
    for pair in labels.split(',') {
        let (name, value) = pair.split_once('=')?;
        let value = value.trim().strip_prefix('"')?.strip_suffix('"')?;
        match name.trim() {
            "kind" => kind = Some(value),
            "namespace" => namespace = value,
            "pool" => pool = Some(value),
            _ => {}
        }
    }
    let (kind, pool) = (kind?, pool?);
    Some(if namespace.is_empty() { format!("{kind} {pool}") } else { format!("{kind} {namespace}/{pool}") })
}

/// The counts per pool in a Prometheus text exposition.
pub fn parse(text: &str) -> BTreeMap<String, Counts> {
    let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let Ok(value) = value.trim().parse::<f64>() else { continue };
        let Some((name, labels)) = series.split_once('{') else { continue };
        let Some(pool) = labels.strip_suffix('}').and_then(pool_of) else { continue };
        match name {
            "ferro_ipam_allocations_total" => counts.entry(pool).or_default().allocations = value,
            "ferro_ipam_releases_total" => counts.entry(pool).or_default().releases = value,
            _ => {}
        }
    }
    counts
}

/// Net addresses gained per hour by each pool between two scrapes `interval` apart. A pool whose
/// counters went down (the provider restarted, or another replica answered) has no rate.
pub fn rates(
    before: &BTreeMap<String, Counts>,
    after: &BTreeMap<String, Counts>,
    interval: Duration,
) -> BTreeMap<String, f64> {
    let hours = interval.as_secs_f64() / 3600.0;
    after
        .iter()
        .filter(|_| hours > 0.0)
        .filter_map(|(pool, now)| {
            let then = before.get(pool).copied().unwrap_or_default();
            let (allocated, released) = (now.allocations - then.allocations, now.releases - then.releases);
            (allocated >= 0.0 && released >= 0.0).then(|| (pool.clone(), (allocated - released) / hours))
        })
        .collect()
}

/// Reads the endpoint once.
async fn scrape(endpoint: &Endpoint) -> anyhow::Result<String> {
    let url: http::Uri = endpoint.url.parse().with_context(|| format!("--metrics {:?} is not a URL", endpoint.url))?;
    let Some(authority) = url.authority() else { bail!("--metrics {:?} names no host", endpoint.url) };
    let base: http::Uri = format!("{}://{authority}", url.scheme_str().unwrap_or("http")).parse()?;
    let mut config = kube::Config::new(base);
    config.accept_invalid_certs = endpoint.insecure;
    config.auth_info.token = endpoint.token.clone().map(Into::into);
    let client = kube::Client::try_from(config).context("a client for the metrics endpoint")?;
    let path = url.path_and_query().map_or("/metrics", |p| p.as_str()).to_owned();
    let request = http::Request::get(path).body(Vec::new())?;
    client.request_text(request).await.with_context(|| format!("scraping {}", endpoint.url))
}

/// Scrapes twice, `interval` apart, and gives each pool's net addresses gained per hour.
pub async fn filling(endpoint: &Endpoint, interval: Duration) -> anyhow::Result<BTreeMap<String, f64>> {
    let before = parse(&scrape(endpoint).await?);
    let started = std::time::Instant::now();
    tokio::time::sleep(interval).await;
    let after = parse(&scrape(endpoint).await?);
    Ok(rates(&before, &after, started.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# HELP ferro_ipam_allocations Addresses allocated to claims.
# TYPE ferro_ipam_allocations counter
ferro_ipam_allocations_total{kind="InClusterIPPool",namespace="ns",pool="nodes"} 12
ferro_ipam_allocations_total{kind="GlobalInClusterIPPool",namespace="",pool="shared"} 3
ferro_ipam_releases_total{kind="InClusterIPPool",namespace="ns",pool="nodes"} 2
ferro_ipam_pool_addresses{kind="InClusterIPPool",namespace="ns",pool="nodes",family="IPv4",state="free"} 40
"#;

    #[test]
    fn counters_are_read_per_pool_and_other_series_ignored() {
        let counts = parse(SCRAPE);
        assert_eq!(counts.len(), 2, "{counts:?}");
        assert_eq!(counts["InClusterIPPool ns/nodes"], Counts { allocations: 12.0, releases: 2.0 });
        assert_eq!(counts["GlobalInClusterIPPool shared"], Counts { allocations: 3.0, releases: 0.0 });
    }

    #[test]
    fn the_rate_is_net_per_hour_and_a_counter_that_went_down_gives_none() {
        let before = parse(SCRAPE);
        let mut after = before.clone();
        after.get_mut("InClusterIPPool ns/nodes").unwrap().allocations = 22.0;
        after.get_mut("InClusterIPPool ns/nodes").unwrap().releases = 4.0;
        after.get_mut("GlobalInClusterIPPool shared").unwrap().allocations = 1.0;
        after.insert("InClusterIPPool ns/new".into(), Counts { allocations: 1.0, releases: 0.0 });
        let rates = rates(&before, &after, Duration::from_secs(36));
        assert_eq!(rates["InClusterIPPool ns/nodes"], 800.0, "(10 - 2) in 1/100 h");
        assert_eq!(rates["InClusterIPPool ns/new"], 100.0);
        assert!(!rates.contains_key("GlobalInClusterIPPool shared"), "a restarted counter has no rate");
    }
}
