//! The book's page on shared pools (`docs/shared-pools.md`) shows the set-up of a hub and a
//! spoke as `sh,norun` blocks (the book's own test has one cluster). They run here, word for
//! word, on a hub and a spoke of their own (the page's pool and namespace would collide with the
//! other tests' pool on the shared hub): the blocks under "Set up a hub" on the hub, those under
//! "Set up a spoke" on the spoke, in a directory where `docs/` is the repository's. Then the
//! spoke's claims on the page's pool are served from blocks granted to the page's namespace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ferro_ipam_e2e::objects::Scope;
use ferro_ipam_e2e::plane::repo_root;
use ferro_ipam_e2e::{ControlPlane, Provider};
use futures::{StreamExt, TryStreamExt};

use crate::fleet::{Cluster, POOL_KIND, PROVIDER_NAMESPACE, logs};
use crate::look::{self, Side};
use crate::report::{Report, shorten};
use crate::{DOCS_CLAIMS, DOCS_READY_WITHIN, POLL, PROVIDER_READY_WITHIN};

/// The page, its sections whose blocks run on the hub and on the spoke.
const PAGE: &str = "docs/shared-pools.md";
const HUB_SECTION: &str = "## Set up a hub";
const SPOKE_SECTION: &str = "## Set up a spoke";
/// The page's pool (on both sides) and the spoke's namespace in the hub.
const PAGE_POOL: &str = "datacenter-vlan-20";
const PAGE_NAMESPACE: &str = "spoke-east";

/// The `sh` blocks (run or not) of the section headed `heading`, in order.
fn section_blocks(page: &str, heading: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut inside = false;
    let mut block: Option<Vec<&str>> = None;
    for line in page.lines() {
        if let Some(lines) = block.as_mut() {
            if line.trim() == "```" {
                blocks.push(lines.join("\n"));
                block = None;
            } else {
                lines.push(line);
            }
            continue;
        }
        if line.starts_with("## ") {
            inside = line.trim() == heading;
        } else if inside && line.trim_start().starts_with("```sh") {
            block = Some(Vec::new());
        }
    }
    blocks
}

/// Runs a block with `bash -euo pipefail` in `work`, as the admin of `kubeconfig`, the plane's
/// kubectl first on `PATH`.
fn run_block(work: &Path, plane: &ControlPlane, kubeconfig: &Path, block: &str) -> Result<String, String> {
    let kubectl_dir = plane.tools.bin("kubectl").parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!("{}:{}", kubectl_dir.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", block])
        .current_dir(work)
        .env("KUBECONFIG", kubeconfig)
        .env("PATH", path)
        .output()
        .map_err(|e| format!("running bash: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if output.status.success() { Ok(text) } else { Err(format!("{}:\n{text}", output.status)) }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_set_up_the_shared_pools_page_shows_serves_a_spokes_claims() {
    let page = std::fs::read_to_string(repo_root().join(PAGE)).expect("the page");
    let (hub_blocks, spoke_blocks) = (section_blocks(&page, HUB_SECTION), section_blocks(&page, SPOKE_SECTION));
    assert!(
        !hub_blocks.is_empty() && !spoke_blocks.is_empty(),
        "{PAGE}: no sh blocks under {HUB_SECTION:?} or {SPOKE_SECTION:?}"
    );

    let planes = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..2).map(|_| scope.spawn(ControlPlane::start)).collect();
        starts.into_iter().map(|s| s.join().expect("a plane's start does not panic")).collect::<Vec<_>>()
    });
    let planes: Vec<&'static ControlPlane> =
        planes.into_iter().map(|p| p.unwrap_or_else(|e| panic!("starting a plane: {e:#}")).leak()).collect();
    let (hub_plane, spoke_plane) = (planes[0], planes[1]);
    let mut report = Report::new("docs page");

    // Where the page's commands run: `docs/` is the repository's, the files they write stay here.
    let work = hub_plane.dir.join("docs-page");
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::symlink(repo_root().join("docs"), work.join("docs")).unwrap();
    // The hub's admin kubeconfig with its CA inline, as most kubeconfigs have it.
    let flat = hub_plane.kubectl_ok(&["config", "view", "--flatten"]).expect("the hub's kubeconfig, flattened");
    let hub_kubeconfig: PathBuf = work.join("hub-admin.kubeconfig");
    std::fs::write(&hub_kubeconfig, flat).unwrap();
    // ferro-ipam as installed: its namespace, then the process.
    for plane in &planes {
        plane.kubectl_ok(&["create", "namespace", PROVIDER_NAMESPACE]).expect("ferro-ipam's namespace");
    }
    let args = ["--leader-elect", "--leader-election-namespace", PROVIDER_NAMESPACE];
    let start = |name, plane: &'static ControlPlane, hub_namespace| Cluster {
        name,
        plane,
        provider: Provider::launch(plane, &plane.kubeconfig, &args).expect("starting ferro-ipam"),
        hub_namespace,
    };
    let hub = start("docs hub", hub_plane, None);
    let spoke = start("docs spoke", spoke_plane, Some(PAGE_NAMESPACE));
    for cluster in [&hub, &spoke] {
        if let Err(error) = cluster.provider.wait_ready(PROVIDER_READY_WITHIN) {
            panic!("{}: {error:#}", cluster.name);
        }
    }
    let logs = |lines| logs([&hub, &spoke].into_iter(), lines);

    let runs = hub_blocks.iter().map(|b| (&hub, hub_kubeconfig.as_path(), b));
    let runs = runs.chain(spoke_blocks.iter().map(|b| (&spoke, spoke_plane.kubeconfig.as_path(), b)));
    for (cluster, kubeconfig, block) in runs {
        if let Err(error) = run_block(&work, cluster.plane, kubeconfig, block) {
            report.fail(format!("{PAGE}, a block on the {}:\n{block}\nfailed: {error}", cluster.name));
            report.conclude_with(logs);
            return;
        }
    }
    report.note(format!("{PAGE}: {} blocks ran on the hub, {} on the spoke", hub_blocks.len(), spoke_blocks.len()));

    let s = Scope::on(spoke_plane, "east-claims").await;
    let created = futures::stream::iter(0..DOCS_CLAIMS)
        .map(|n| {
            let s = &s;
            async move { s.claim(&format!("c-{n}"), POOL_KIND, PAGE_POOL).await }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await;
    created.expect("the spoke's claims");
    let began = Instant::now();
    while s.ready_claims().await < DOCS_CLAIMS && began.elapsed() < DOCS_READY_WITHIN {
        tokio::time::sleep(POLL).await;
    }
    let claims = look::claims(&s.client, &s.ns).await.unwrap_or_default();
    if s.ready_claims().await == DOCS_CLAIMS {
        report.note(format!(
            "{DOCS_CLAIMS} claims of the page's spoke pool Ready in {:.1} s",
            began.elapsed().as_secs_f64()
        ));
    } else {
        report.fail(format!(
            "the page's spoke pool: not every claim Ready within {DOCS_READY_WITHIN:?}: {}",
            look::standing(&claims)
        ));
    }

    let hub_client = hub_plane.client().await;
    let sides = [Side { cluster: &spoke, client: s.client.clone(), claims_namespace: s.ns.clone() }];
    match look::look_at(&sides, &hub_client, PAGE_POOL).await {
        Ok(look) => {
            let found = ferro_ipam_e2e::invariants::shared::findings(&look);
            let granted = look.blocks.iter().filter(|b| b.granted && b.namespace == PAGE_NAMESPACE).count();
            if found.is_empty() && granted > 0 {
                report.note(format!("the invariants hold: {granted} blocks granted to {PAGE_NAMESPACE}"));
            } else {
                let listing: Vec<String> = found.fatal.iter().chain(&found.pending).cloned().collect();
                report.fail(format!(
                    "the invariants on the page's hub and spoke ({granted} blocks granted to {PAGE_NAMESPACE}):\n  {}",
                    shorten(&listing.join("\n  "), 20)
                ));
            }
        }
        Err(error) => report.fail(format!("looking at the page's hub and spoke: {error:#}")),
    }
    report.conclude_with(logs);
    drop((hub, spoke));
    for plane in planes {
        plane.halt();
    }
}
