//! The human-readable report of preflight's findings.

use std::fmt::Write as _;
use std::net::IpAddr;

use super::findings::{Adopted, Features, Findings, PoolFinding};

/// Lines a list shows before it says how many more `-o json` has.
const SHOWN: usize = 20;

/// Sorted addresses as runs: `10.0.0.2-10.0.0.9, 10.0.0.20`.
fn runs(adopted: &[Adopted]) -> String {
    let mut ips: Vec<IpAddr> = adopted.iter().filter_map(|a| a.address.parse().ok()).collect();
    ips.sort();
    ips.dedup();
    let value = |ip: &IpAddr| match ip {
        IpAddr::V4(v4) => u128::from(u32::from(*v4)),
        IpAddr::V6(v6) => u128::from(*v6),
    };
    let mut parts: Vec<String> = Vec::new();
    let mut start = 0;
    for i in 0..ips.len() {
        let run_ends = i + 1 == ips.len()
            || ips[i].is_ipv4() != ips[i + 1].is_ipv4()
            || value(&ips[i]).checked_add(1) != Some(value(&ips[i + 1]));
        if run_ends {
            parts.push(if start == i { ips[i].to_string() } else { format!("{}-{}", ips[start], ips[i]) });
            start = i + 1;
        }
    }
    parts.join(", ")
}

fn pool_name(pool: &PoolFinding) -> String {
    match &pool.namespace {
        Some(ns) => format!("{} {ns}/{}", pool.kind, pool.name),
        None => format!("{} {}", pool.kind, pool.name),
    }
}

fn pool_lines(out: &mut String, pool: &PoolFinding) {
    match &pool.hub {
        Some(hub) => {
            let _ = write!(out, "  {}: {hub}", pool_name(pool));
        }
        None => {
            let _ = write!(out, "  {}: {} of {} free", pool_name(pool), pool.free, pool.total);
        }
    }
    if pool.paused {
        out.push_str(", paused");
    }
    if pool.adopted.is_empty() {
        out.push_str("; adopts no address\n");
    } else {
        let _ = writeln!(out, "; adopts {}: {}", pool.adopted.len(), runs(&pool.adopted));
    }
    for refusal in &pool.refused {
        let _ = writeln!(out, "    ! ferro-ipam's CRD would refuse it: {refusal}");
    }
    if let Some(invalid) = &pool.invalid {
        let _ = writeln!(out, "    ! cannot hand out addresses: {invalid}");
    }
    if !pool.overlaps.is_empty() {
        let _ = writeln!(
            out,
            "    overlaps {} (an address taken in one is never handed out by the other)",
            pool.overlaps.join(", ")
        );
    }
}

/// Writes at most [`SHOWN`] lines of `items`, then how many more there are.
fn limited<T>(out: &mut String, items: &[T], line: impl Fn(&T) -> String) {
    for item in items.iter().take(SHOWN) {
        let _ = writeln!(out, "  {}", line(item));
    }
    if items.len() > SHOWN {
        let _ = writeln!(out, "  ... and {} more (-o json lists them all)", items.len() - SHOWN);
    }
}

/// The report, for a terminal.
pub fn text(findings: &Findings) -> String {
    let mut out = header(findings);
    out.push_str("\nPools\n");
    for pool in &findings.pools {
        pool_lines(&mut out, pool);
    }
    claim_lines(&mut out, findings);
    if !findings.unclaimed.is_empty() {
        let _ = writeln!(
            out,
            "\nIPAddresses without a claim of their name (kept, never handed out): {}",
            findings.unclaimed.len()
        );
        limited(&mut out, &findings.unclaimed, Clone::clone);
    }
    if !findings.unreadable.is_empty() {
        let _ = writeln!(out, "\nObjects ferro-ipam cannot read: {}", findings.unreadable.len());
        limited(&mut out, &findings.unreadable, |u| format!("{} {}: {}", u.kind, u.object, u.error));
    }
    feature_lines(&mut out, &findings.features);
    verdict_line(&mut out, findings);
    out
}

/// What was read, and another provider that would stop ferro-ipam allocating (or that its Lease
/// could not be read).
fn header(findings: &Findings) -> String {
    let s = &findings.summary;
    let mut out = format!(
        "ferro-ipam preflight: {} pools, {} IPAddresses in them (IPAddressClaim and IPAddress served as {})\n",
        s.pools, s.addresses, findings.capi_version
    );
    if let Some(other) = &findings.other_provider {
        let _ = writeln!(
            out,
            "\nAnother IPAM provider is running: Lease {} held by {}, renewed {}. ferro-ipam would allocate nothing until it stops (see docs/migration.md).",
            other.lease, other.holder, other.renewed
        );
    }
    if let Some(unchecked) = &findings.other_provider_unchecked {
        let namespace = unchecked.lease.split_once('/').map_or("its namespace", |(namespace, _)| namespace);
        let _ = writeln!(
            out,
            "\nNot checked whether another IPAM provider is running: reading Lease {} failed: {}. While another provider holds that Lease, ferro-ipam would allocate nothing; let preflight get leases in {namespace} (docs/examples/preflight-job.yaml does) and run it again.",
            unchecked.lease, unchecked.error
        );
    }
    out
}

/// What would happen to the claims: conflicts, claims that would wait, get an address, or be
/// released.
fn claim_lines(out: &mut String, findings: &Findings) {
    let _ = writeln!(out, "\nConflicts: {}", findings.conflicts.len());
    limited(out, &findings.conflicts, |c| {
        let at = [c.pool.clone(), c.address.clone()].into_iter().flatten().collect::<Vec<_>>().join(" ");
        format!("{} {at} [{}]: {}", c.kind.as_str(), c.objects.join(", "), c.message)
    });
    let _ = writeln!(out, "\nClaims that would wait: {}", findings.waiting.len());
    limited(out, &findings.waiting, |w| format!("{} ({}): {}", w.claim, w.reason, w.message));
    let _ = writeln!(out, "\nClaims that would get an address now: {}", findings.to_allocate.len());
    limited(out, &findings.to_allocate, |n| match (&n.pool, &n.address) {
        (Some(pool), Some(address)) => format!("{}: {address} of {pool}", n.claim),
        _ => format!("{}: from a pool labelled for its purpose", n.claim),
    });
    if !findings.spoke_claims.is_empty() {
        let _ = writeln!(out, "\nClaims of spoke pools, {}: {}", super::spokes::NOT_KNOWN, findings.spoke_claims.len());
        limited(out, &findings.spoke_claims, |c| format!("{}: {}, {}", c.claim, c.pool, c.note));
    }
    if findings.summary.releasing > 0 {
        let _ =
            writeln!(out, "\nClaims being deleted, whose addresses would be released: {}", findings.summary.releasing);
    }
}

/// The features in use, so that one ferro-ipam lacks is seen before switching.
fn feature_lines(out: &mut String, f: &Features) {
    let _ = writeln!(
        out,
        "\nFeatures in use: {} dual-stack pools, {} purpose-labelled pools, {} purpose claims, prefix pools: {}",
        f.dual_stack_pools,
        f.purpose_pools,
        f.purpose_claims,
        if f.prefix_pools.served {
            format!(
                "{} InClusterPrefixPool, {} GlobalInClusterPrefixPool",
                f.prefix_pools.in_cluster, f.prefix_pools.global
            )
        } else {
            "none (their CRDs are not installed)".to_owned()
        }
    );
    if f.other_addresses > 0 {
        let _ = writeln!(out, "IPAddresses of other pool kinds, left alone: {}", f.other_addresses);
    }
}

/// Whether the cluster is clean, or how many problems to fix first, and whether a check could
/// not be done.
fn verdict_line(out: &mut String, findings: &Findings) {
    let s = &findings.summary;
    let _ = match findings.problems() {
        0 if findings.other_provider.is_some() => {
            writeln!(out, "\nNot clean: another IPAM provider is running (see above). Stop it before switching.")
        }
        0 if findings.other_provider_unchecked.is_some() => writeln!(
            out,
            "\nNothing conflicts, and {} addresses would be adopted; but whether another IPAM provider is running was not checked (see above).",
            s.adopted
        ),
        0 => writeln!(out, "\nClean: {} addresses would be adopted, nothing conflicts.", s.adopted),
        n => writeln!(
            out,
            "\nNot clean: {n} problems ({} conflicts, {} refused or invalid pools, {} unreadable objects). Fix them before switching.",
            s.conflicts, s.invalid_pools, s.unreadable
        ),
    };
    if findings.problems() > 0 && findings.other_provider_unchecked.is_some() {
        out.push_str("Whether another IPAM provider is running was not checked either (see above).\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adopted(addresses: &[&str]) -> Vec<Adopted> {
        addresses.iter().map(|a| Adopted { claim: "ns/c".into(), address: (*a).into() }).collect()
    }

    #[test]
    fn adopted_addresses_are_shown_as_runs() {
        let shown = runs(&adopted(&["10.0.0.3", "10.0.0.2", "10.0.0.4", "10.0.0.9", "fd00::1", "fd00::2"]));
        assert_eq!(shown, "10.0.0.2-10.0.0.4, 10.0.0.9, fd00::1-fd00::2");
    }

    #[test]
    fn the_last_addresses_of_a_family_end_a_run_without_overflow() {
        assert_eq!(runs(&adopted(&["255.255.255.255", "::"])), "255.255.255.255, ::");
        assert_eq!(
            runs(&adopted(&["ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"])),
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
        );
    }
}
