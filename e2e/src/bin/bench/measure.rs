//! What is measured around a run: the API server's request counters, and a process's peak
//! memory and CPU time.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::Client;

/// API groups whose requests count as the subject's work (its claims, addresses, pools,
/// clusters and events). The benchmark's own requests in them are subtracted by the caller.
const GROUPS: [&str; 3] = ["ipam.cluster.x-k8s.io", "cluster.x-k8s.io", "events.k8s.io"];

/// `apiserver_request_total` summed by "VERB resource[/subresource]", over [`GROUPS`] and core
/// events, WATCH excluded (a watch is counted when it ends, not when it starts).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestCounts(pub BTreeMap<String, f64>);

impl RequestCounts {
    pub async fn scrape(client: &Client) -> Result<RequestCounts> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = client.request_text(request).await.context("reading the API server's /metrics")?;
        Ok(RequestCounts::parse(&text))
    }

    pub fn parse(text: &str) -> RequestCounts {
        let mut counts = BTreeMap::new();
        for line in text.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
            let Some((labels, value)) = line["apiserver_request_total{".len()..].rsplit_once("} ") else { continue };
            let label = |key: &str| {
                labels
                    .split("\",")
                    .find_map(|kv| kv.strip_prefix(&format!("{key}=\"")))
                    .map(|v| v.trim_end_matches('"').to_owned())
                    .unwrap_or_default()
            };
            let (group, resource, verb) = (label("group"), label("resource"), label("verb"));
            let ours = GROUPS.contains(&group.as_str()) || (group.is_empty() && resource == "events");
            if !ours || verb == "WATCH" {
                continue;
            }
            let subresource = label("subresource");
            let key = if subresource.is_empty() {
                format!("{verb} {resource}")
            } else {
                format!("{verb} {resource}/{subresource}")
            };
            *counts.entry(key).or_insert(0.0) += value.trim().parse::<f64>().unwrap_or(0.0);
        }
        RequestCounts(counts)
    }

    /// `self - before`, without zero entries.
    pub fn since(&self, before: &RequestCounts) -> RequestCounts {
        let mut delta = BTreeMap::new();
        for (key, value) in &self.0 {
            let d = value - before.0.get(key).copied().unwrap_or(0.0);
            if d.abs() > 0.0 {
                delta.insert(key.clone(), d);
            }
        }
        RequestCounts(delta)
    }

    /// Takes away `count` requests of `key` (the benchmark's own).
    pub fn without(mut self, key: &str, count: f64) -> RequestCounts {
        if let Some(value) = self.0.get_mut(key) {
            *value -= count;
            if value.abs() < 0.5 {
                self.0.remove(key);
            }
        }
        self
    }
}

/// Waits until the request counters stop moving (the subject has finished its trailing work,
/// such as pool status updates): two scrapes one second apart that agree, at most `limit`.
pub async fn quiescent(client: &Client, limit: Duration) -> Result<RequestCounts> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = RequestCounts::scrape(client).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = RequestCounts::scrape(client).await?;
        if now == last || tokio::time::Instant::now() > deadline {
            return Ok(now);
        }
        last = now;
    }
}

/// Peak and current resident memory and CPU time of a process, from /proc.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcStats {
    /// VmHWM.
    pub peak_rss_mib: f64,
    /// VmRSS.
    pub rss_mib: f64,
    pub cpu_seconds: f64,
}

impl ProcStats {
    pub fn of(pid: u32) -> Result<ProcStats> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let (hwm_kib, rss_kib) = (kib(&status, "VmHWM")?, kib(&status, "VmRSS")?);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command name (which may hold spaces) start at field 3; utime and
        // stime are fields 14 and 15.
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks: f64 = fields.get(11..13).into_iter().flatten().filter_map(|v| v.parse::<f64>().ok()).sum();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Ok(ProcStats { peak_rss_mib: hwm_kib / 1024.0, rss_mib: rss_kib / 1024.0, cpu_seconds: ticks / per_second })
    }
}

/// The value of the line `<field>:   <n> kB` of /proc/PID/status.
fn kib(status: &str, field: &str) -> Result<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|rest| rest.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{field} in /proc/PID/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counts_keep_our_groups_and_drop_watches() {
        let text = r#"apiserver_request_total{code="201",component="apiserver",dry_run="",group="ipam.cluster.x-k8s.io",resource="ipaddresses",scope="resource",subresource="",verb="POST",version="v1beta2"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ipam.cluster.x-k8s.io",resource="ipaddressclaims",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ipam.cluster.x-k8s.io",resource="ipaddressclaims",scope="resource",subresource="status",verb="PATCH",version="v1beta1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="ipam.cluster.x-k8s.io",resource="ipaddresses",scope="cluster",subresource="",verb="WATCH",version="v1beta2"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 9"#;
        let counts = RequestCounts::parse(text);
        assert_eq!(counts.0.get("POST ipaddresses"), Some(&7.0));
        assert_eq!(counts.0.get("PATCH ipaddressclaims/status"), Some(&5.0));
        assert_eq!(counts.0.len(), 2);
    }

    #[test]
    fn peak_and_current_memory_are_read_from_their_own_lines() {
        let status = "Name:\tferro-ipam\nVmPeak:\t  900000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(kib(status, "VmHWM").unwrap(), 20480.0);
        assert_eq!(kib(status, "VmRSS").unwrap(), 10240.0);
        assert!(kib(status, "VmSwap").is_err());
        // This process has both.
        let own = ProcStats::of(std::process::id()).unwrap();
        assert!(own.rss_mib > 0.0 && own.peak_rss_mib >= own.rss_mib, "{own:?}");
    }
}
