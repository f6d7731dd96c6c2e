//! The standard `process_*` metrics of Prometheus clients (CPU time, memory, file descriptors,
//! start time), read from `/proc` at each scrape, as the Go client does. Where `/proc` is missing
//! (not Linux), none is exported.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second in `/proc` times: the kernel's USER_HZ, 100 on every architecture
/// ferro-ipam is built for.
const TICKS_PER_SECOND: f64 = 100.0;

/// What `/proc` says about this process, in the units the metrics use.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: Option<f64>,
    virtual_memory_bytes: Option<f64>,
    resident_memory_bytes: Option<f64>,
    start_time_seconds: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    virtual_memory_max_bytes: Option<f64>,
}

/// From `/proc/self/stat`: (user + system CPU seconds, start in ticks after boot, virtual size).
fn parse_stat(stat: &str) -> Option<(f64, f64, f64)> {
    // The command name (field 2) may hold spaces and parentheses: count fields after its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    let cpu = (field(14)? + field(15)?) / TICKS_PER_SECOND;
    Some((cpu, field(22)?, field(23)?))
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
fn parse_boot_time(stat: &str) -> Option<f64> {
    stat.lines().find_map(|line| line.strip_prefix("btime ")?.trim().parse().ok())
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn parse_resident(status: &str) -> Option<f64> {
    let kib: f64 =
        status.lines().find_map(|line| line.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024.0)
}

/// The soft limit of a `/proc/self/limits` line; "unlimited" as the largest 64-bit value.
fn parse_limit(limits: &str, name: &str) -> Option<f64> {
    let rest = limits.lines().find_map(|line| line.strip_prefix(name))?;
    match rest.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX as f64),
        soft => soft.parse().ok(),
    }
}

fn sample() -> Sample {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let stat = read("/proc/self/stat").and_then(|s| parse_stat(&s));
    let boot = read("/proc/stat").and_then(|s| parse_boot_time(&s));
    let limits = read("/proc/self/limits");
    Sample {
        cpu_seconds: stat.map(|s| s.0),
        virtual_memory_bytes: stat.map(|s| s.2),
        start_time_seconds: stat.zip(boot).map(|(s, boot)| boot + s.1 / TICKS_PER_SECOND),
        resident_memory_bytes: read("/proc/self/status").and_then(|s| parse_resident(&s)),
        open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|dir| dir.count() as f64),
        max_fds: limits.as_deref().and_then(|l| parse_limit(l, "Max open files")),
        virtual_memory_max_bytes: limits.as_deref().and_then(|l| parse_limit(l, "Max address space")),
    }
}

/// The `process_*` collector.
#[derive(Debug)]
pub(crate) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let sample = sample();
        if let Some(seconds) = sample.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            ("process_resident_memory_bytes", "Resident memory size in bytes", sample.resident_memory_bytes),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", sample.virtual_memory_bytes),
            (
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes",
                sample.virtual_memory_max_bytes,
            ),
            ("process_open_fds", "Number of open file descriptors", sample.open_fds),
            ("process_max_fds", "Maximum number of open file descriptors", sample.max_fds),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                sample.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name_whatever_it_holds() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
        // cutime cstime priority nice threads itrealvalue starttime vsize rss ...
        let stat = "4242 (ferro (ipam) x) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 150 0 0 20 0 9 0 12345 \
                    104857600 2560 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((4.0, 12345.0, 104857600.0)));
        assert_eq!(parse_stat("4242 (truncated"), None);
    }

    #[test]
    fn boot_time_resident_memory_and_limits_are_read_in_their_units() {
        assert_eq!(parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), Some(1_700_000_000.0));
        assert_eq!(parse_resident("Name:\tferro-ipam\nVmRSS:\t   51200 kB\nVmData:\t 1 kB\n"), Some(52_428_800.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         unlimited            unlimited            bytes\n\
                      Max open files            1024                 1048576              files\n";
        assert_eq!(parse_limit(limits, "Max open files"), Some(1024.0));
        assert_eq!(parse_limit(limits, "Max address space"), Some(u64::MAX as f64));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_is_sampled_on_linux() {
        let sample = sample();
        assert!(sample.resident_memory_bytes.is_some_and(|b| b > 1_000_000.0), "{sample:?}");
        assert!(sample.open_fds.is_some_and(|n| n >= 3.0), "{sample:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(sample.start_time_seconds.is_some_and(|t| t <= now + 1.0 && t > now - 86_400.0), "{sample:?}");
    }
}
