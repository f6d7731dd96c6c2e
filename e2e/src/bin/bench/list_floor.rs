//! The list floor: the least a provider must do before it can serve claims on a big cluster. A
//! plain client lists what ferro-ipam lists at its start (every `IPAddressClaim`, `IPAddress`,
//! pool of the four kinds at v1alpha2 and `Cluster`, cluster-wide), all seven in parallel, paged
//! as kube-runtime's watcher pages (500 objects a page), parses each page into minimal records of
//! the fields a provider reads (records.rs; `managedFields` and the rest are skipped, not
//! stored), counts them and throws them away.
//!
//! It runs as a process of its own (`ferro-ipam-bench list-floor ...`) like a provider; the
//! benchmark times it from process start until it exits. On success it prints one line,
//! `list-floor: {json}`, with the objects it listed, its own time from `main` until every list
//! was done, its peak RSS and its CPU time.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context as _, Result};
use ferro_ipam::api::{GlobalInClusterIPPool, GlobalInClusterPrefixPool, InClusterIPPool, InClusterPrefixPool};
use ferro_ipam_e2e::objects::capi;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, Request};
use kube::{Client, Config};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::records::{Address, Claim, Page, Whole};

/// kube-runtime's `watcher::Config::default().page_size`.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

/// What the list floor prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Listed {
    /// Objects listed, by kind.
    pub objects: BTreeMap<String, usize>,
    /// From `main` until every list was done (the benchmark's own time, from process start to
    /// exit, is the one reported).
    pub seconds: f64,
    /// Requests made (pages).
    pub pages: usize,
    pub peak_rss_mib: f64,
    pub cpu_seconds: f64,
}

/// The prefix of the line the list floor prints.
pub const LINE: &str = "list-floor: ";

/// `list-floor --kubeconfig PATH [--page-size N]` (0: one unpaged list per kind).
pub async fn main(args: &[String]) -> Result<()> {
    let started = Instant::now();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let kubeconfig = Kubeconfig::read_from(flag("--kubeconfig").context("--kubeconfig is required")?)?;
    let client = Client::try_from(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)?;
    let page_size: u32 = match flag("--page-size") {
        Some(size) => size.parse().with_context(|| format!("--page-size {size}"))?,
        None => DEFAULT_PAGE_SIZE,
    };
    let pools = |resource: ApiResource| list::<Whole>(&client, resource, page_size);
    let (claims, addresses, ip, global_ip, prefix, global_prefix, clusters) = tokio::try_join!(
        list::<Claim>(&client, capi().claim_resource(), page_size),
        list::<Address>(&client, capi().address_resource(), page_size),
        pools(ApiResource::erase::<InClusterIPPool>(&())),
        pools(ApiResource::erase::<GlobalInClusterIPPool>(&())),
        pools(ApiResource::erase::<InClusterPrefixPool>(&())),
        pools(ApiResource::erase::<GlobalInClusterPrefixPool>(&())),
        list::<Whole>(&client, capi().cluster_resource(), page_size),
    )?;
    let seconds = started.elapsed().as_secs_f64();
    let all = [
        ("IPAddressClaim", claims),
        ("IPAddress", addresses),
        ("InClusterIPPool", ip),
        ("GlobalInClusterIPPool", global_ip),
        ("InClusterPrefixPool", prefix),
        ("GlobalInClusterPrefixPool", global_prefix),
        ("Cluster", clusters),
    ];
    let (peak_rss_mib, cpu_seconds) = own_usage();
    let listed = Listed {
        objects: all.iter().map(|(kind, (objects, _))| ((*kind).to_owned(), *objects)).collect(),
        pages: all.iter().map(|(_, (_, pages))| pages).sum(),
        seconds,
        peak_rss_mib,
        cpu_seconds,
    };
    println!("{LINE}{}", serde_json::to_string(&listed)?);
    Ok(())
}

/// Lists every object of `resource`, cluster-wide, in pages of `page_size` (0: unpaged), parsing
/// each page into records `R` and dropping it; returns the objects and the pages.
async fn list<R: DeserializeOwned>(client: &Client, resource: ApiResource, page_size: u32) -> Result<(usize, usize)> {
    let path = match resource.group.as_str() {
        "" => format!("/api/{}/{}", resource.version, resource.plural),
        _ => format!("/apis/{}/{}", resource.api_version, resource.plural),
    };
    let request = Request::new(path);
    let mut params = ListParams::default();
    if page_size > 0 {
        params = params.limit(page_size);
    }
    let (mut objects, mut pages) = (0, 0);
    loop {
        let page: Page<R> = client.request(request.list(&params)?).await?;
        objects += page.items.len();
        pages += 1;
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok((objects, pages)),
        }
    }
}

/// This process's peak RSS (MiB) and CPU time (s).
fn own_usage() -> (f64, f64) {
    // SAFETY: getrusage writes into the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (usage.ru_maxrss as f64 / 1024.0, seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// The last line the list floor printed into its log, if it printed one.
pub fn parse_log(log: &str) -> Option<Listed> {
    log.lines().rev().find_map(|l| l.strip_prefix(LINE)).and_then(|json| serde_json::from_str(json).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_line_is_read_back_from_the_log() {
        let listed = Listed {
            objects: BTreeMap::from([("IPAddress".to_owned(), 20_000)]),
            seconds: 3.5,
            pages: 41,
            peak_rss_mib: 80.0,
            cpu_seconds: 2.0,
        };
        let log = format!("some warning\n{LINE}{}\n", serde_json::to_string(&listed).unwrap());
        let read = parse_log(&log).unwrap();
        assert_eq!(read.objects["IPAddress"], 20_000);
        assert_eq!(read.pages, 41);
        assert!(parse_log("list-floor exited\n").is_none());
    }
}
