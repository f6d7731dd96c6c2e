//! spoke-a restored from a backup of its etcd taken before it gave blocks back to the hub, one
//! of which spoke-b has taken since:
//!
//! 1. spoke-a makes 120 claims and spoke-b 60 (fewer than the other fault tests: this test has
//!    many steps, each waited for), all Ready;
//! 2. a backup of spoke-a's etcd (etcd stopped, its data directory copied, started again);
//! 3. on spoke-a, 20 new claims; then every claim holding an address of four of its blocks from
//!    before the backup is deleted, and spoke-a gives back the emptied blocks it can spare (it
//!    keeps half a block free at hand), at least two;
//! 4. spoke-b's claims, one at a time, until spoke-b holds an address of one of them, X (the hub
//!    grants the lowest free block); the others stay free;
//! 5. spoke-a restored: its ferro-ipam stopped, kube-apiserver and etcd stopped, the backup put
//!    back, all started again. Its deleted claims are back with their `IPAddress`es, the 20 new
//!    ones are gone. Its ferro-ipam asks the hub again for exactly the blocks of its addresses
//!    outside its blocks (`spec.cidr`).
//!
//! 6. spoke-b goes on serving: 16 more claims, which it may serve from X.
//!
//! What must hold afterwards: a block that stayed free is granted to spoke-a again and its claims
//! are served; X stays spoke-b's, and no address is on both spokes (the checker over the three
//! clusters); the blocks spoke-a took after the backup, which hold nothing of the restored spoke,
//! go back; every other claim is served; spoke-a's restored claims of X are not Ready with
//! addresses of spoke-b's block. The test reports what became of each restored claim of the
//! blocks given back.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ferro_ipam_e2e::objects::Scope;
use kube::Client;

use super::SERVED_WITHIN;
use super::rig::{self, BLOCK_SIZE, HUB_SECRET, Part, TestPool, in_cidr, since};
use super::storm::{self, Storm};
use crate::PROVIDER_READY_WITHIN;
use crate::fleet::Fleet;
use crate::look;
use crate::report::Report;

const POOL: TestPool = TestPool { name: "restore", cidr: "10.44.0.0/22", prefix: 22, gateway: "10.44.0.1" };
const A_CLAIMS: usize = 120;
const B_CLAIMS: usize = 60;
/// Claims spoke-a makes after the backup (gone again once it is restored).
const A_NEW: usize = 20;
/// Claims spoke-b makes at most, one at a time, to reach an address of X.
const B_MORE_AT_MOST: usize = 100;
/// Blocks of spoke-a emptied after the backup: it keeps free addresses at hand, so it gives
/// back fewer; two must go back.
const EMPTIED_BLOCKS: usize = 4;
/// How long each step may take (claims served, blocks returned or granted).
const STEP_WITHIN: Duration = Duration::from_secs(90);
/// The blocks given back are all back once no more goes for this long.
const QUIET_FOR: Duration = Duration::from_secs(3);

/// The pool's blocks in the hub as (namespace, name, granted, CIDR).
async fn block_states(hub: &Client) -> Result<BTreeSet<(String, String, bool, Option<String>)>> {
    Ok(rig::pool_blocks(hub, POOL.name, None)
        .await?
        .iter()
        .map(look::block_seen)
        .map(|b| (b.namespace, b.name, b.granted, b.cidr))
        .collect())
}

/// The `candidates` spoke-a no longer holds, once two are gone and none more goes for
/// [`QUIET_FOR`] (it gives back one block a step, each after 10 s empty).
async fn given_back(hub: &Client, candidates: &[String]) -> Result<Vec<String>> {
    let began = Instant::now();
    let mut last = Vec::new();
    let mut quiet_since = Instant::now();
    loop {
        let kept = rig::granted_cidrs(hub, POOL.name, "spoke-a").await?;
        let now: Vec<String> = candidates.iter().filter(|c| !kept.contains(c)).cloned().collect();
        if now != last {
            last = now;
            quiet_since = Instant::now();
        } else if last.len() >= 2 && quiet_since.elapsed() >= QUIET_FOR {
            return Ok(last);
        }
        if began.elapsed() > STEP_WITHIN {
            return Err(anyhow!("spoke-a gave back {last:?} of {candidates:?} within {STEP_WITHIN:?}: two are needed"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Creates `count` claims `<prefix>-<n>` on `part` at once and waits until all of `part`'s
/// `expected` claims are Ready.
async fn claims_ready(fleet: &Fleet, part: &Part, hub: &Client, prefix: &str, count: usize) -> Result<()> {
    Storm::start(&part.scope, POOL.name, prefix, count, 200).finish().await?;
    let expected = [Part { on: part.on, scope: clone_scope(&part.scope), claims: part.claims }];
    rig::wait_all_ready(fleet, &expected, hub, Instant::now() + STEP_WITHIN, "restore").await
}

fn clone_scope(s: &Scope) -> Scope {
    Scope { plane: s.plane, client: s.client.clone(), ns: s.ns.clone(), filter: s.filter.clone() }
}

/// The `Ready` condition of each claim of `s`, by name.
async fn readiness(s: &Scope) -> BTreeMap<String, (String, String, String)> {
    look::claims(&s.client, &s.ns)
        .await
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let name = c.metadata.name.clone().unwrap_or_default();
            (
                name,
                look::condition(c, "Ready").unwrap_or_else(|| ("-".into(), "no Ready condition".into(), String::new())),
            )
        })
        .collect()
}

/// The lines of `log` that contain `part`, at most `max`.
fn log_lines(log: &std::path::Path, parts: &[&str], max: usize) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| parts.iter().any(|p| l.contains(p)))
        .take(max)
        .map(str::to_owned)
        .collect()
}

/// The restored claims of the blocks given back, grouped by (block, Ready status, reason,
/// whether spoke-b holds the same address), each as `claim address`.
async fn fates(
    a: &Scope,
    b: &Scope,
    doomed: &[(String, String)],
    x: &str,
    free: &[String],
) -> BTreeMap<(String, String, String, bool), Vec<String>> {
    let ready_a = readiness(a).await;
    let bound_a = rig::bound(a).await;
    let b_holds: BTreeMap<String, String> = rig::bound(b).await.into_iter().map(|(c, ip)| (ip, c)).collect();
    let mut fates: BTreeMap<(String, String, String, bool), Vec<String>> = BTreeMap::new();
    for (claim, ip) in doomed {
        let block = if in_cidr(ip, x) {
            format!("X {x} (spoke-b's)")
        } else if let Some(f) = free.iter().find(|f| in_cidr(ip, f)) {
            format!("{f} (was free)")
        } else {
            "a block spoke-a kept".to_owned()
        };
        let (status, reason, _) = ready_a.get(claim).cloned().unwrap_or_default();
        let now_ip = bound_a.get(claim).cloned().unwrap_or_else(|| "no IPAddress".into());
        let moved = if &now_ip == ip { String::new() } else { format!(" (was {ip})") };
        fates
            .entry((block, status, reason, b_holds.contains_key(&now_ip)))
            .or_default()
            .push(format!("{claim} {now_ip}{moved}"));
    }
    fates
}

/// At most `max` items of a list, and how many more.
fn shorten_list(items: &[String], max: usize) -> String {
    let shown = items.iter().take(max).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > max { format!("{shown}, ... ({} more)", items.len() - max) } else { shown }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spoke_restored_from_an_etcd_backup_is_never_served_an_address_another_spoke_holds() {
    let mut fleet = rig::lend().await;
    let began = Instant::now();
    let mut report = Report::new("restore");
    if let Err(error) = POOL.create(&fleet, [HUB_SECRET; 2]).await {
        panic!("the pools: {error:#}");
    }
    let hub = fleet.hub.plane.client().await;
    let mut parts = rig::parts(&fleet, "restore", [0, A_CLAIMS, B_CLAIMS]).await;

    // 1. The claims, all Ready.
    let storms = vec![
        Storm::start(&parts[1].scope, POOL.name, "c", A_CLAIMS, 200),
        Storm::start(&parts[2].scope, POOL.name, "c", B_CLAIMS, 200),
    ];
    if let Err(error) = rig::finish(storms).await {
        panic!("{error:#}");
    }
    if let Err(error) = rig::wait_all_ready(&fleet, &parts, &hub, Instant::now() + STEP_WITHIN, "restore").await {
        panic!("the first claims: {error:#}");
    }

    // 2. The backup.
    let (a, b) = (clone_scope(&parts[1].scope), clone_scope(&parts[2].scope));
    let in_backup = rig::bound(&a).await;
    let blocks_in_backup = rig::granted_cidrs(&hub, POOL.name, "spoke-a").await.unwrap_or_default();
    let spoke_a_plane = fleet.spokes[0].plane;
    let backup = spoke_a_plane.dir.join(format!("etcd-backup-{}", std::process::id()));
    if let Err(error) = tokio::task::block_in_place(|| spoke_a_plane.snapshot_etcd(&backup)) {
        panic!("backing up spoke-a's etcd: {error:#}");
    }
    report.note(format!(
        "backup of spoke-a's etcd: {} claims bound, {} blocks granted to spoke-a: {}",
        in_backup.len(),
        blocks_in_backup.len(),
        blocks_in_backup.join(" ")
    ));

    // 3. New claims on spoke-a, then the claims of four blocks deleted and the blocks given back.
    parts[1].claims = A_CLAIMS + A_NEW;
    if let Err(error) = claims_ready(&fleet, &parts[1], &hub, "n", A_NEW).await {
        panic!("spoke-a's new claims: {error:#}");
    }
    let now = rig::bound(&a).await;
    let mut candidates: Vec<String> = blocks_in_backup
        .iter()
        .filter(|block| {
            let holders: Vec<&String> = now.iter().filter(|(_, ip)| in_cidr(ip, block)).map(|(c, _)| c).collect();
            !holders.is_empty() && holders.iter().all(|c| c.starts_with("c-"))
        })
        .cloned()
        .collect();
    candidates.truncate(EMPTIED_BLOCKS);
    let doomed: Vec<(String, String)> = now
        .iter()
        .filter(|(_, ip)| candidates.iter().any(|block| in_cidr(ip, block)))
        .map(|(c, ip)| (c.clone(), ip.clone()))
        .collect();
    for (claim, _) in &doomed {
        if let Err(error) = a.delete_claim(claim).await {
            panic!("deleting {claim}: {error:#}");
        }
    }
    parts[1].claims = A_CLAIMS + A_NEW - doomed.len();
    let deleted = Instant::now();
    // The emptied blocks spoke-a gives back (it keeps some free addresses at hand, so not
    // necessarily all), lowest first: at least two, then no change for a while.
    let returned = match given_back(&hub, &candidates).await {
        Ok(returned) => returned,
        Err(error) => {
            report.fail(format!("after deleting the claims of {candidates:?}: {error:#}"));
            return rig::conclude(report, &fleet, &[]);
        }
    };
    report.note(format!(
        "the {} claims of {candidates:?} deleted on spoke-a; {} later it had given back {returned:?}",
        doomed.len(),
        since(deleted)
    ));

    // 4. spoke-b takes the lowest block returned, X.
    let mut taken = None;
    let mut made = 0;
    while made < B_MORE_AT_MOST && taken.is_none() {
        let name = format!("x-{made}");
        made += 1;
        let served = match storm::create(&b, &name, POOL.name).await {
            Ok(()) => b.wait_allocated(&name, STEP_WITHIN).await,
            Err(error) => Err(error),
        };
        match served {
            Ok(address) => {
                taken = returned.iter().find(|block| in_cidr(&address.spec.address, block)).cloned();
            }
            Err(error) => {
                report.fail(format!("spoke-b's claim {name}: {error:#}"));
                break;
            }
        }
    }
    parts[2].claims = B_CLAIMS + made;
    let Some(x) = taken else {
        report.fail(format!("spoke-b took none of {returned:?} in {made} claims"));
        return rig::conclude(report, &fleet, &[]);
    };
    let states = block_states(&hub).await.unwrap_or_default();
    let free: Vec<String> = returned
        .iter()
        .filter(|block| !states.iter().any(|(_, _, _, cidr)| cidr.as_deref() == Some(block.as_str())))
        .cloned()
        .collect();
    let b_holds: BTreeMap<String, String> = rig::bound(&b).await.into_iter().map(|(c, ip)| (ip, c)).collect();
    let b_in_x: Vec<&String> = b_holds.keys().filter(|ip| in_cidr(ip, &x)).collect();
    let collide = doomed.iter().filter(|(_, ip)| b_holds.contains_key(ip)).count();
    report.note(format!(
        "spoke-b made {made} claims one at a time: it holds X = {x} (addresses {b_in_x:?}); still free in the hub: {free:?}; \
         {collide} of the deleted spoke-a claims' addresses are spoke-b's now"
    ));
    if free.is_empty() {
        report.fail(format!("no block spoke-a gave back stayed free: {returned:?}"));
        return rig::conclude(report, &fleet, &[]);
    }

    // 5. spoke-a restored from the backup.
    let blocks_before_restore = rig::granted_cidrs(&hub, POOL.name, "spoke-a").await.unwrap_or_default();
    let old_log = fleet.spokes[0].provider.process.log.clone();
    let restored = tokio::task::block_in_place(|| {
        fleet.spokes[0].provider.stop();
        spoke_a_plane
            .restore_etcd(&backup)
            .and_then(|()| rig::relaunch(&mut fleet.spokes[0]))
            .and_then(|_| fleet.spokes[0].provider.wait_ready(PROVIDER_READY_WITHIN))
    });
    if let Err(error) = restored {
        report.fail(format!("restoring spoke-a: {error:#}"));
        return rig::conclude(report, &fleet, &[("spoke-a's ferro-ipam before the restore".into(), old_log)]);
    }
    let restored_at = Instant::now();
    let _ = std::fs::remove_dir_all(&backup);
    let after_restore = rig::bound(&a).await;
    let claims_after = readiness(&a).await;
    report.note(format!(
        "spoke-a restored: {} claims and {} IPAddresses (the backup's {}), the {A_NEW} new claims {}",
        claims_after.len(),
        after_restore.len(),
        in_backup.len(),
        if claims_after.keys().any(|c| c.starts_with("n-")) { "still there" } else { "gone" }
    ));
    if after_restore != in_backup {
        report.fail(format!(
            "spoke-a's addresses after the restore are not the backup's: moved {:?}",
            rig::moved(&in_backup, &after_restore)
        ));
    }
    parts[1].claims = A_CLAIMS;

    // What spoke-a asks of the hub again: the blocks it gave back, by spec.cidr.
    let spoke_a_ns = "spoke-a";
    let mut asks: BTreeMap<String, String> = BTreeMap::new();
    while restored_at.elapsed() < STEP_WITHIN {
        asks.clear();
        for block in rig::pool_blocks(&hub, POOL.name, Some(spoke_a_ns)).await.unwrap_or_default() {
            let Some(cidr) = block.data["spec"]["cidr"].as_str() else { continue };
            let (status, reason, message) = look::condition(&block, "Granted").unwrap_or_default();
            let name = block.metadata.name.clone().unwrap_or_default();
            asks.insert(cidr.to_owned(), format!("{name} Granted={status} {reason}: {message}"));
        }
        let decided =
            |cidr: &String| asks.get(cidr).is_some_and(|s| s.contains("Granted=True") || s.contains("Granted=False"));
        if returned.iter().all(decided) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    report.note(format!("{} after the restore, spoke-a's blocks asked by spec.cidr: {asks:?}", since(restored_at)));
    for block in &free {
        match asks.get(block) {
            Some(state) if state.contains("Granted=True") => {
                report.note(format!("{block}, free in the hub, granted to spoke-a again"))
            }
            other => report.fail(format!("{block} was free in the hub, yet spoke-a's ask for it is {other:?}")),
        }
    }
    match asks.get(&x) {
        Some(state) if state.contains("Granted=True") => {
            report.fail(format!("X ({x}) is spoke-b's, yet the hub granted it to spoke-a too: {state}"))
        }
        Some(state) => report.note(format!("X ({x}), spoke-b's: spoke-a's ask is {state}")),
        None => report.note(format!("spoke-a did not ask again for X ({x})")),
    }
    let new_log = fleet.spokes[0].provider.process.log.clone();
    for line in log_lines(&new_log, &["outside its blocks", "conflict", "Conflict"], 8) {
        report.note(format!("spoke-a's log: {line}"));
    }
    let returned_parts: Vec<&str> = returned.iter().map(String::as_str).collect();
    for line in log_lines(&fleet.hub.provider.process.log, &returned_parts, 12) {
        report.note(format!("the hub's log: {line}"));
    }

    // Liveness: every claim served but those of X, which must not be Ready with an address spoke-b holds.
    let of_x: BTreeSet<String> = doomed.iter().filter(|(_, ip)| in_cidr(ip, &x)).map(|(c, _)| c.clone()).collect();
    let deadline = restored_at + SERVED_WITHIN;
    let mut unserved = Vec::new();
    loop {
        unserved.clear();
        for (part, skip) in [(&a, &of_x), (&b, &BTreeSet::new())] {
            for (claim, (status, reason, _)) in readiness(part).await {
                if status != "True" && !skip.contains(&claim) {
                    unserved.push(format!("{}/{claim} Ready={status} {reason}", part.ns));
                }
            }
        }
        if unserved.is_empty() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if unserved.is_empty() {
        let x_ready =
            readiness(&a).await.iter().filter(|(c, (status, _, _))| of_x.contains(*c) && status == "True").count();
        report.note(format!(
            "every claim of both spokes Ready {} after the restore (spoke-a's {} claims of X not waited for; {x_ready} of them Ready)",
            since(restored_at),
            of_x.len()
        ));
    } else {
        report.fail(format!("claims not served within {SERVED_WITHIN:?} of the restore: {unserved:?}"));
    }

    // What became of each deleted-then-restored claim of the blocks given back. Those of X held
    // addresses of a block that is spoke-b's: none may be Ready with an address of X, whether or
    // not spoke-b has handed out the same address yet (given another address, it may be).
    let fates = fates(&a, &b, &doomed, &x, &free).await;
    for ((block, status, reason, on_b), claims) in &fates {
        let on_b = if *on_b { ", the same address held by spoke-b" } else { "" };
        report.note(format!(
            "{} restored claims that held addresses of {block} in the backup: now Ready={status} {reason}{on_b}: {}",
            claims.len(),
            shorten_list(claims, 6)
        ));
    }
    let (ready_a, bound_a) = (readiness(&a).await, rig::bound(&a).await);
    let readdressed: Vec<String> = doomed
        .iter()
        .filter_map(|(claim, ip)| {
            let now = bound_a.get(claim)?;
            (now != ip).then(|| format!("{claim} {ip} -> {now}"))
        })
        .collect();
    if !readdressed.is_empty() {
        report.note(format!(
            "{} restored claims were given another address than the backup's (their block is spoke-b's): {}",
            readdressed.len(),
            shorten_list(&readdressed, 6)
        ));
    }
    let ready_in_x: Vec<String> = doomed
        .iter()
        .filter(|(claim, _)| ready_a.get(claim).is_some_and(|(status, _, _)| status == "True"))
        .filter_map(|(claim, _)| Some(format!("{claim} {}", bound_a.get(claim).filter(|ip| in_cidr(ip, &x))?)))
        .collect();
    if !ready_in_x.is_empty() {
        report.fail(format!(
            "{} of spoke-a's restored claims are Ready with addresses of X ({x}), which the hub refused to spoke-a and \
             granted to spoke-b: {}",
            ready_in_x.len(),
            shorten_list(&ready_in_x, 6)
        ));
    }

    // The blocks spoke-a took after the backup held nothing of the restored spoke: each goes
    // back, unless spoke-a has put a claim in it since (a restored claim given another address).
    let taken_after: Vec<&String> = blocks_before_restore.iter().filter(|c| !blocks_in_backup.contains(c)).collect();
    let (mut empty_kept, mut in_use) = (Vec::new(), Vec::new());
    while restored_at.elapsed() < STEP_WITHIN {
        let held = rig::granted_cidrs(&hub, POOL.name, spoke_a_ns).await.unwrap_or_default();
        let addresses = rig::bound(&a).await;
        (in_use, empty_kept) = taken_after
            .iter()
            .filter(|c| held.contains(c))
            .map(|c| c.to_string())
            .partition(|c| addresses.values().any(|ip| in_cidr(ip, c)));
        if empty_kept.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if taken_after.is_empty() {
        report.note("spoke-a took no block after the backup: its new claims fitted its blocks");
    } else if empty_kept.is_empty() {
        report.note(format!(
            "of the {} blocks spoke-a took after the backup, {} went back within {} of the restore, {in_use:?} holds its claims now",
            taken_after.len(),
            taken_after.len() - in_use.len(),
            since(restored_at)
        ));
    } else {
        report.fail(format!(
            "blocks spoke-a took after the backup, holding none of its addresses since the restore, still granted {STEP_WITHIN:?} later: {empty_kept:?}"
        ));
    }

    // spoke-b goes on serving: as many new claims as X has addresses. Whatever spoke-b hands
    // out that the restored spoke-a holds is a duplicate made after the restore.
    let more = BLOCK_SIZE as usize;
    parts[2].claims += more;
    if let Err(error) = claims_ready(&fleet, &parts[2], &hub, "after", more).await {
        report.fail(format!("spoke-b's {more} claims after the restore: {error:#}"));
    }
    let handed: Vec<String> =
        rig::bound(&b).await.into_iter().filter(|(c, _)| c.starts_with("after-")).map(|(_, ip)| ip).collect();
    let held_by_a: BTreeMap<String, String> = rig::bound(&a).await.into_iter().map(|(c, ip)| (ip, c)).collect();
    let twice: Vec<String> =
        handed.iter().filter_map(|ip| held_by_a.get(ip).map(|c| format!("{ip} (spoke-a's {c})"))).collect();
    report.note(format!(
        "spoke-b served {} more claims after the restore: {}; {} of them addresses spoke-a holds: {}",
        handed.len(),
        shorten_list(&handed, 16),
        twice.len(),
        shorten_list(&twice, 16)
    ));
    if !twice.is_empty() {
        report.fail(format!(
            "after the restore spoke-b handed out {} addresses the restored spoke-a holds: {}",
            twice.len(),
            shorten_list(&twice, 16)
        ));
    }

    rig::check(&fleet, &parts, &hub, POOL.name, "after the restore", false, &mut report).await;
    rig::no_leak(&fleet, &parts, &hub, &POOL, &mut report).await;
    report.note(format!("the test took {}", since(began)));
    rig::conclude(report, &fleet, &[("spoke-a's ferro-ipam before the restore".into(), old_log)]);
}
