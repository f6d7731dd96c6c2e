//! The pool CRDs through a migration: the history a cluster running the in-cluster provider has
//! (an early release stored pools as `v1alpha1`), its v1.1.0 manifests, ferro-ipam's `crds/`
//! replacing them, and back.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use ferro_ipam_e2e::{ControlPlane, peer, plane::repo_root};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::Value;

/// The two IP pool CRDs both providers define.
pub const POOL_CRDS: [&str; 2] =
    ["inclusterippools.ipam.cluster.x-k8s.io", "globalinclusterippools.ipam.cluster.x-k8s.io"];
/// The two prefix pool CRDs both providers define (`v1alpha2` only, no older history).
pub const PREFIX_CRDS: [&str; 2] =
    ["inclusterprefixpools.ipam.cluster.x-k8s.io", "globalinclusterprefixpools.ipam.cluster.x-k8s.io"];

/// Every pool CRD.
fn all_crds() -> impl Iterator<Item = &'static str> {
    POOL_CRDS.into_iter().chain(PREFIX_CRDS)
}

/// The in-cluster provider's v1.1.0 manifest of a CRD (from the tools cache).
pub fn upstream_file(plane: &ControlPlane, name: &str) -> PathBuf {
    peer::crd_file(&plane.tools, name)
}

/// ferro-ipam's manifest of a CRD.
pub fn ours_file(name: &str) -> PathBuf {
    repo_root().join("crds").join(format!("{name}.yaml"))
}

/// A manifest as JSON (kubectl reads the YAML).
pub fn manifest(plane: &ControlPlane, file: &Path) -> Result<Value> {
    let json = plane.kubectl_ok(&["create", "--dry-run=client", "-o", "json", "-f", &file.to_string_lossy()])?;
    Ok(serde_json::from_str(&json)?)
}

/// The same CRD with `version` as the storage version (and served).
pub fn stored_as(mut crd: Value, version: &str) -> Value {
    for entry in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
        let this = entry["name"] == version;
        entry["storage"] = Value::Bool(this);
        if this {
            entry["served"] = Value::Bool(true);
        }
    }
    crd
}

/// The same CRD without `version`.
pub fn without(mut crd: Value, version: &str) -> Value {
    if let Some(versions) = crd["spec"]["versions"].as_array_mut() {
        versions.retain(|v| v["name"] != version);
    }
    crd
}

fn api(client: &Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

/// Writes a CRD as `manager` does with a plain update (clusterctl and `kubectl replace` do so):
/// the whole spec is replaced. With `dry_run`, the API server only validates it.
pub async fn put(client: &Client, manifest: &Value, manager: &str, dry_run: bool) -> Result<CustomResourceDefinition> {
    let mut crd: CustomResourceDefinition = serde_json::from_value(manifest.clone())?;
    let name = crd.metadata.name.clone().context("a CRD name")?;
    let params = PostParams { dry_run, field_manager: Some(manager.to_owned()) };
    match api(client).get_opt(&name).await? {
        None => Ok(api(client).create(&params, &crd).await?),
        Some(existing) => {
            crd.metadata.resource_version = existing.metadata.resource_version;
            Ok(api(client).replace(&name, &params, &crd).await?)
        }
    }
}

/// Waits until the API server serves the CRD's current spec. `Established` is set once per CRD,
/// and a changed spec is served a moment later, so this also waits until discovery lists the
/// kind under exactly the versions the spec serves, and a dry-run create of a `v1alpha2` pool
/// with a `dualStack` block keeps it exactly when the spec's schema has it (ferro-ipam's CRDs do,
/// the in-cluster provider's prune it).
pub fn wait_established(plane: &ControlPlane, name: &str) -> Result<()> {
    plane.kubectl_ok(&["wait", "--for=condition=Established", "--timeout=60s", "crd", name])?;
    let crd: Value = serde_json::from_str(&plane.kubectl_ok(&["get", "crd", name, "-o", "json"])?)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !serves(plane, &crd)? {
        if Instant::now() > deadline {
            bail!("{name}: the API server does not serve the CRD's spec within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Whether the API server answers for `crd` as its spec says.
fn serves(plane: &ControlPlane, crd: &Value) -> Result<bool> {
    let (group, plural, kind) = (&crd["spec"]["group"], &crd["spec"]["names"]["plural"], &crd["spec"]["names"]["kind"]);
    for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
        let path =
            format!("/apis/{}/{}", group.as_str().unwrap_or_default(), version["name"].as_str().unwrap_or_default());
        let listed: Value =
            serde_json::from_slice(&plane.kubectl(&["get", "--raw", &path])?.stdout).unwrap_or_default();
        let has_kind = listed["resources"].as_array().into_iter().flatten().any(|r| r["name"] == *plural);
        if has_kind != (version["served"] == true) {
            return Ok(false);
        }
    }
    let v1alpha2 = crd["spec"]["versions"].as_array().into_iter().flatten().find(|v| v["name"] == "v1alpha2");
    let Some(v1alpha2) = v1alpha2.filter(|v| v["served"] == true) else {
        return Ok(true);
    };
    let spec = &v1alpha2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    if kind.as_str().is_some_and(|k| k.ends_with("PrefixPool")) {
        return serves_prefix_rules(plane, crd, kind, !spec["prefixes"]["items"]["x-kubernetes-validations"].is_null());
    }
    let knows_dual_stack = !spec["dualStack"].is_null();
    let mut probe = serde_json::json!({
        "apiVersion": format!("{}/v1alpha2", group.as_str().unwrap_or_default()), "kind": kind,
        "metadata": {"name": "e2e-schema-probe"},
        "spec": {"addresses": ["10.0.0.1"], "prefix": 24, "dualStack": {"addresses": ["fd00::1"], "prefix": 64}},
    });
    if crd["spec"]["scope"] == "Namespaced" {
        probe["metadata"]["namespace"] = "default".into();
    }
    let file = plane.dir.join(format!("schema-probe-{}.json", plural.as_str().unwrap_or_default()));
    std::fs::write(&file, probe.to_string())?;
    let output = plane.kubectl(&[
        "create",
        "--dry-run=server",
        "--validate=false",
        "-o",
        "json",
        "-f",
        &file.to_string_lossy(),
    ])?;
    if !output.status.success() {
        return Ok(false);
    }
    let stored: Value = serde_json::from_slice(&output.stdout)?;
    Ok(stored["spec"]["dualStack"].is_null() != knows_dual_stack)
}

/// Whether a dry-run create of a prefix pool with a prefix that is not network-aligned is
/// refused exactly when the CRD has CEL rules (ferro-ipam's does, the in-cluster provider's
/// leaves that to its webhook).
fn serves_prefix_rules(plane: &ControlPlane, crd: &Value, kind: &Value, has_rules: bool) -> Result<bool> {
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let mut probe = serde_json::json!({
        "apiVersion": format!("{group}/v1alpha2"), "kind": kind,
        "metadata": {"name": "e2e-schema-probe"}, "spec": {"prefixes": ["fd00::1/64"]},
    });
    if crd["spec"]["scope"] == "Namespaced" {
        probe["metadata"]["namespace"] = "default".into();
    }
    let file = plane.dir.join(format!("schema-probe-{}.json", kind.as_str().unwrap_or_default()));
    std::fs::write(&file, probe.to_string())?;
    let output = plane.kubectl(&["create", "--dry-run=server", "--validate=false", "-f", &file.to_string_lossy()])?;
    Ok(output.status.success() != has_rules)
}

/// `status.storedVersions` of a CRD.
pub async fn stored_versions(client: &Client, name: &str) -> Result<Vec<String>> {
    Ok(api(client).get(name).await?.status.and_then(|s| s.stored_versions).unwrap_or_default())
}

/// Deletes ferro-ipam's pool CRDs the control plane installed, then builds the in-cluster
/// provider's history: its manifests with `v1alpha1` as the storage version (as its early
/// releases had). The caller stores pools while they are installed, then upgrades.
pub async fn install_early_in_cluster(plane: &ControlPlane, client: &Client) -> Result<()> {
    for name in all_crds() {
        plane.kubectl_ok(&["delete", "crd", name, "--wait=true", "--timeout=60s"])?;
    }
    for name in POOL_CRDS {
        let early = stored_as(manifest(plane, &upstream_file(plane, name))?, "v1alpha1");
        put(client, &early, "clusterctl", false).await?;
        wait_established(plane, name)?;
    }
    for name in PREFIX_CRDS {
        put(client, &manifest(plane, &upstream_file(plane, name))?, "clusterctl", false).await?;
        wait_established(plane, name)?;
    }
    Ok(())
}

/// Upgrades (or moves back) to the in-cluster provider's v1.1.0 manifests, as clusterctl would.
pub async fn install_in_cluster(plane: &ControlPlane, client: &Client) -> Result<()> {
    for name in all_crds() {
        put(client, &manifest(plane, &upstream_file(plane, name))?, "clusterctl", false).await?;
        wait_established(plane, name)?;
    }
    Ok(())
}

/// Replaces the pool CRDs with ferro-ipam's, the way the runbook says (`kubectl replace`).
pub fn install_ferro_ipam(plane: &ControlPlane) -> Result<()> {
    for name in all_crds() {
        plane.kubectl_ok(&["replace", "-f", &ours_file(name).to_string_lossy()])?;
        wait_established(plane, name)?;
    }
    Ok(())
}

/// Checks that the API server refuses ferro-ipam's CRD without `v1alpha1` while that version is
/// listed in `status.storedVersions`: the reason ferro-ipam keeps it (not served).
pub async fn dropping_v1alpha1_is_refused(plane: &ControlPlane, client: &Client) -> Result<()> {
    for name in POOL_CRDS {
        let stripped = without(manifest(plane, &ours_file(name))?, "v1alpha1");
        match put(client, &stripped, "e2e", true).await {
            Err(error) if error.to_string().contains("storedVersions") => {}
            Err(error) => bail!("{name} without v1alpha1 was refused for another reason: {error:#}"),
            Ok(_) => bail!("{name} without v1alpha1 was accepted although v1alpha1 is a stored version"),
        }
    }
    Ok(())
}
