//! A hub and a spoke for the shared-pool configuration: two control planes on loopback, each
//! with a ferro-ipam (the benchmark's binary and flags), set up as docs/shared-pools.md has an
//! operator do it. On the hub: the shared pool, labelled `hub.ferro-ipam.dev/shared: "true"`,
//! and the spoke's namespace, labelled `hub.ferro-ipam.dev/spoke`, with a ServiceAccount whose
//! Role may keep AddressBlocks and its Lease there and nothing else. On the spoke: a kubeconfig
//! for the hub holding that account's token, in the Secret `hub-kubeconfig` of ferro-ipam's own
//! namespace. The spoke pools and the local pools are made per measurement (shared_pool.rs).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use ferro_ipam::api::hub::{KUBECONFIG_KEY, SHARED_LABEL, SPOKE_LABEL};
use ferro_ipam_e2e::ControlPlane;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::config::Config;
use crate::measure::ProcStats;
use crate::subject::Running;

/// The spoke's name: its namespace in the hub and the value of its label there.
pub const SPOKE: &str = "spoke";
/// ferro-ipam's own namespace on both clusters (`--leader-election-namespace`, with no leader
/// election): the spoke reads its Secret there.
pub const PROVIDER_NAMESPACE: &str = "ferro-ipam-system";
/// The Secret on the spoke holding the hub's kubeconfig.
pub const SECRET: &str = "hub-kubeconfig";
/// The hub's pool and its kind.
pub const HUB_POOL: &str = "shared";
pub const HUB_POOL_KIND: &str = "GlobalInClusterIPPool";
/// The hub pool's range: the spoke pools state the same addresses, prefix and gateway. A /16
/// holds 4,096 blocks of 16, far more than any measurement leases.
pub const SHARED_RANGE: &str = "10.20.0.0/16";
pub const SHARED_GATEWAY: &str = "10.20.0.1";
/// The local pools' range: as large, apart from the shared one.
pub const LOCAL_RANGE: &str = "10.21.0.0/16";
pub const LOCAL_GATEWAY: &str = "10.21.0.1";
pub const PREFIX: u8 = 16;

/// The two clusters and their ferro-ipam processes (killed when dropped, before the planes:
/// fields drop in order).
pub struct HubPair {
    pub spoke_ferro: Running,
    pub hub_ferro: Running,
    pub hub_client: Client,
    pub spoke_client: Client,
    pub hub: ControlPlane,
    pub spoke: ControlPlane,
}

impl HubPair {
    /// Starts both planes side by side, sets them up, starts a ferro-ipam on each and waits
    /// until both are ready.
    pub async fn start(config: &Config) -> Result<HubPair> {
        let (hub, spoke) = tokio::task::block_in_place(|| {
            std::thread::scope(|scope| {
                let hub = scope.spawn(ControlPlane::start);
                let spoke = scope.spawn(ControlPlane::start);
                (hub.join().expect("a plane's start does not panic"), spoke.join().expect("ditto"))
            })
        });
        let (hub, spoke) = (hub.context("the hub's control plane")?, spoke.context("the spoke's control plane")?);
        let (hub_client, spoke_client) = (hub.client().await, spoke.client().await);
        set_up_hub(&hub_client).await.context("setting up the hub")?;
        let kubeconfig = spoke_kubeconfig(&hub).context("the spoke's kubeconfig for the hub")?;
        set_up_spoke(&spoke_client, &kubeconfig).await.context("setting up the spoke")?;
        let own = ["--leader-election-namespace", PROVIDER_NAMESPACE];
        let mut hub_ferro = Running::ferro_ipam(config, &hub, &own)?;
        let mut spoke_ferro = Running::ferro_ipam(config, &spoke, &own)?;
        tokio::task::block_in_place(|| -> Result<()> {
            hub_ferro.wait_ready(Duration::from_secs(120)).context("ferro-ipam on the hub")?;
            spoke_ferro.wait_ready(Duration::from_secs(120)).context("ferro-ipam on the spoke")
        })?;
        Ok(HubPair { spoke_ferro, hub_ferro, hub_client, spoke_client, hub, spoke })
    }

    /// The spoke's ferro-ipam's `/metrics`, as text.
    pub fn spoke_metrics(&self) -> Result<String> {
        metrics_of(&self.spoke)
    }

    /// CPU time of both ferro-ipam processes: (hub, spoke).
    pub fn cpu(&mut self) -> Result<(ProcStats, ProcStats)> {
        Ok((self.hub_ferro.stats()?, self.spoke_ferro.stats()?))
    }

    /// Both ferro-ipam processes still run; else what the one that stopped said.
    pub fn check_running(&mut self) -> Result<()> {
        for (name, running) in [("hub", &mut self.hub_ferro), ("spoke", &mut self.spoke_ferro)] {
            let process = running.process();
            if !process.is_running() {
                bail!("ferro-ipam on the {name} exited:\n{}", process.tail(30));
            }
        }
        Ok(())
    }

    pub fn stop(&mut self) {
        self.spoke_ferro.stop();
        self.hub_ferro.stop();
    }
}

/// The `/metrics` of the ferro-ipam started on `plane` (see [`Running::ferro_ipam`]).
pub fn metrics_of(plane: &ControlPlane) -> Result<String> {
    let address = std::fs::read_to_string(plane.dir.join("ferro-ipam.metrics-address"))?;
    ferro_ipam_e2e::process::http_get(&address, "/metrics").with_context(|| format!("GET {address}/metrics"))
}

/// An object of JSON through the API, created.
async fn create<K>(api: &Api<K>, object: serde_json::Value) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object)?;
    api.create(&PostParams::default(), &object).await.map(drop).map_err(anyhow::Error::from)
}

async fn namespace(client: &Client, name: &str, labels: BTreeMap<&str, &str>) -> Result<()> {
    create(&Api::<Namespace>::all(client.clone()), json!({"metadata": {"name": name, "labels": labels}})).await
}

/// The hub's administrator: the shared pool; the spoke's namespace, identity and Role.
async fn set_up_hub(hub: &Client) -> Result<()> {
    namespace(hub, PROVIDER_NAMESPACE, BTreeMap::new()).await?;
    let gvk = GroupVersionKind::gvk("ipam.cluster.x-k8s.io", "v1alpha2", HUB_POOL_KIND);
    let pools: Api<DynamicObject> = Api::all_with(hub.clone(), &ApiResource::from_gvk(&gvk));
    create(
        &pools,
        json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": HUB_POOL_KIND,
            "metadata": {"name": HUB_POOL, "labels": {SHARED_LABEL: "true"}},
            "spec": {"addresses": [SHARED_RANGE], "prefix": PREFIX, "gateway": SHARED_GATEWAY},
        }),
    )
    .await
    .context("the hub's shared pool")?;
    namespace(hub, SPOKE, BTreeMap::from([(SPOKE_LABEL, SPOKE)])).await?;
    create(&Api::<ServiceAccount>::namespaced(hub.clone(), SPOKE), json!({"metadata": {"name": "ferro-ipam-spoke"}}))
        .await?;
    // The Role of docs/shared-pools.md (deploy/ and e2e/tests/hub give the same).
    create(
        &Api::<Role>::namespaced(hub.clone(), SPOKE),
        json!({
            "metadata": {"name": "ferro-ipam-spoke"},
            "rules": [
                {"apiGroups": ["hub.ferro-ipam.dev"], "resources": ["addressblocks"],
                 "verbs": ["list", "watch", "create", "delete"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "verbs": ["get", "create", "update"]},
            ],
        }),
    )
    .await?;
    create(
        &Api::<RoleBinding>::namespaced(hub.clone(), SPOKE),
        json!({
            "metadata": {"name": "ferro-ipam-spoke"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ferro-ipam-spoke"},
            "subjects": [{"kind": "ServiceAccount", "name": "ferro-ipam-spoke", "namespace": SPOKE}],
        }),
    )
    .await?;
    Ok(())
}

/// A kubeconfig for the hub with the spoke's token (`kubectl create token`) and the hub's CA
/// embedded, as the page's `kubectl config set-*` lines write it.
fn spoke_kubeconfig(hub: &ControlPlane) -> Result<String> {
    let token = hub.kubectl_ok(&["-n", SPOKE, "create", "token", "ferro-ipam-spoke", "--duration=24h"])?;
    let ca = std::fs::read(&hub.credentials.ca_cert).context("the hub's CA")?;
    // ByteString serialises as base64, as certificate-authority-data holds it.
    let ca = serde_json::to_value(ByteString(ca))?;
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "hub", "cluster": {"server": hub.server, "certificate-authority-data": ca}}],
        "users": [{"name": SPOKE, "user": {"token": token.trim()}}],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": SPOKE, "namespace": SPOKE}}],
        "current-context": "hub",
    });
    // JSON is YAML.
    Ok(serde_json::to_string_pretty(&kubeconfig)?)
}

/// The spoke's administrator: the hub's kubeconfig as a Secret of ferro-ipam's namespace.
async fn set_up_spoke(spoke: &Client, kubeconfig: &str) -> Result<()> {
    namespace(spoke, PROVIDER_NAMESPACE, BTreeMap::new()).await?;
    create(
        &Api::<Secret>::namespaced(spoke.clone(), PROVIDER_NAMESPACE),
        json!({"metadata": {"name": SECRET}, "stringData": {KUBECONFIG_KEY: kubeconfig}}),
    )
    .await
}

/// The spec of a pool of [`PREFIX`] on the spoke: a local pool, or a spoke pool leasing blocks
/// of `block_size` from the hub's pool.
pub fn pool_spec(spoke_pool: bool, block_size: u32) -> serde_json::Value {
    if spoke_pool {
        json!({
            "addresses": [SHARED_RANGE], "prefix": PREFIX, "gateway": SHARED_GATEWAY,
            "hub": {"kubeconfigSecret": SECRET, "namespace": SPOKE,
                    "pool": {"kind": HUB_POOL_KIND, "name": HUB_POOL}, "blockSize": block_size},
        })
    } else {
        json!({"addresses": [LOCAL_RANGE], "prefix": PREFIX, "gateway": LOCAL_GATEWAY})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spoke_pool_and_a_local_pool_are_as_large_and_apart() {
        let (spoke, local) = (pool_spec(true, 16), pool_spec(false, 16));
        assert_eq!(spoke["hub"]["namespace"], SPOKE);
        assert_eq!(spoke["hub"]["blockSize"], 16);
        assert_eq!(spoke["hub"]["pool"]["name"], HUB_POOL);
        assert!(local.get("hub").is_none());
        assert_eq!(spoke["prefix"], local["prefix"]);
        assert_ne!(spoke["addresses"], local["addresses"]);
    }
}
