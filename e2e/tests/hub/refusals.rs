//! The hub grants a block only to a spoke's namespace (labelled `hub.ferro-ipam.dev/spoke`) and
//! only of a pool labelled `hub.ferro-ipam.dev/shared: "true"`; any other block stays ungranted,
//! `Granted=False` with its reason. The blocks are made by hand in namespaces no running spoke
//! uses, and of pools the main test does not use, so the other tests see none of them.

use std::time::Instant;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use crate::fleet::fleet;
use crate::look::{self, condition};
use crate::report::Report;
use crate::{POLL, REFUSED_WITHIN, STILL_REFUSED_FOR};

#[tokio::test(flavor = "multi_thread")]
async fn the_hub_grants_no_block_outside_a_spokes_namespace_nor_of_a_pool_not_shared() {
    let fleet = fleet();
    let mut report = Report::new("refusals");
    let plane = fleet.hub.plane;
    let setup = [
        vec!["create", "namespace", "not-a-spoke"],
        vec!["create", "namespace", "spoke-c"],
        vec!["label", "namespace", "spoke-c", "hub.ferro-ipam.dev/spoke=spoke-c"],
    ];
    for args in setup {
        if let Err(error) = plane.kubectl_ok(&args) {
            panic!("{error:#}");
        }
    }
    let private = json!({"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "GlobalInClusterIPPool",
        "metadata": {"name": "private"}, "spec": {"addresses": ["10.21.0.0/24"], "prefix": 24, "gateway": "10.21.0.1"}});
    let pools: Api<DynamicObject> = Api::all_with(plane.client().await, &look::global_pools_resource());
    pools
        .create(&PostParams::default(), &serde_json::from_value(private).unwrap())
        .await
        .expect("the hub's pool that is not shared");

    // (namespace, pool): outside any spoke's namespace; a pool not shared.
    let asks = [("not-a-spoke", "shared"), ("spoke-c", "private")];
    let client = plane.client().await;
    for (namespace, pool) in asks {
        let block = json!({"apiVersion": "hub.ferro-ipam.dev/v1alpha1", "kind": "AddressBlock",
            "metadata": {"name": "asked"}, "spec": {"pool": {"kind": "GlobalInClusterIPPool", "name": pool}, "family": "IPv4", "size": 16}});
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &look::blocks_resource());
        if let Err(error) = api.create(&PostParams::default(), &serde_json::from_value(block).unwrap()).await {
            panic!("the block in {namespace}: {error}");
        }
    }
    for (namespace, pool) in asks {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &look::blocks_resource());
        let began = Instant::now();
        let mut refused = None;
        // Once refused, watched a little longer: a grant right after the refusal fails too.
        let mut refused_at: Option<Instant> = None;
        while began.elapsed() < REFUSED_WITHIN && refused_at.is_none_or(|at| at.elapsed() < STILL_REFUSED_FOR) {
            match api.get("asked").await {
                Ok(block) => {
                    let seen = look::block_seen(&block);
                    if seen.granted || seen.cidr.is_some() {
                        report.fail(format!("the hub granted {namespace}/asked of pool {pool}: {:?}", seen.cidr));
                        break;
                    }
                    if let Some((status, reason, message)) = condition(&block, "Granted")
                        && status == "False"
                    {
                        refused = Some(format!("{reason}: {message}"));
                        refused_at.get_or_insert_with(Instant::now);
                    }
                }
                Err(error) => {
                    report.fail(format!("reading {namespace}/asked: {error}"));
                    break;
                }
            }
            tokio::time::sleep(POLL).await;
        }
        match refused {
            Some(why) => report.note(format!("a block of {pool} in {namespace} is not granted: Granted=False {why}")),
            None => report.fail(format!(
                "a block of {pool} in {namespace}: no Granted=False condition within {REFUSED_WITHIN:?} (it must say why it is not granted)"
            )),
        }
    }
    report.conclude(fleet);
}
