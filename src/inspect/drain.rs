//! `ferro-ipam hub drain`: returns every `AddressBlock` of a spoke gone for good, run against
//! the hub. The one command here that writes: it deletes the blocks of one spoke namespace, and
//! only once it has judged that the namespace is a spoke's and that the spoke no longer renews
//! its Lease there.
//!
//! look (client required: the Namespace, the spoke's Lease, the hub's time) -> judge (pure) ->
//! list and delete the namespace's blocks, each with its UID as a precondition (client
//! required) -> print.
//!
//! The spoke writes its Lease's `renewTime` on its own clock; the API server stamps the time of
//! each write in the Lease's `managedFields` on the hub's. The latest of them is taken as the
//! last renewal, and the spoke counts as answering until a lease duration and a margin after it
//! on the hub's clock (read from the `Date` of its answers): a clock that runs behind or ahead
//! on either side can only make drain refuse longer, never return the blocks of a live spoke.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::{Client, ResourceExt};
use serde::Serialize;

use crate::api::hub::{AddressBlock, SPOKE_LABEL, SPOKE_LEASE};
use crate::client::api_errors::{describe, status_code};
use crate::feed::{block_pool, granted};

/// Exit status when drain refuses: the namespace is no spoke's, or the spoke still answers.
pub const REFUSED: i32 = 1;

/// The lease duration a spoke writes (`leaseDurationSeconds`), taken when its Lease has none.
const SPOKE_LEASE_SECONDS: i64 = 40;
/// How long past its Lease's expiry a spoke still counts as answering: the hub's time is read
/// from the `Date` of its answers, truncated to the second, and the renewal may be on its way.
const MARGIN: SignedDuration = SignedDuration::from_secs(5);

/// What drain did, in the shape `-o json` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Drain {
    /// The spoke's namespace in the hub.
    pub namespace: String,
    /// The spoke: the namespace's `hub.ferro-ipam.dev/spoke` label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoke: Option<String>,
    /// `drained` or `refused`.
    pub state: String,
    /// Why drain refused, and what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The spoke's last renewal of its Lease, as far as the Lease tells (none: no Lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_renewed: Option<String>,
    /// The `AddressBlock`s deleted.
    pub returned: Vec<Returned>,
    /// The deletion that failed, stopping drain (the blocks before it are returned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One block returned to the hub.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Returned {
    /// `<namespace>/<name>` of the `AddressBlock`.
    pub address_block: String,
    /// The hub's pool it was of.
    pub pool: String,
    /// The block granted; none when it was never granted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// The spoke pool that leased it (`spec.spokePool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spoke_pool: Option<String>,
}

/// What the namespace and its Lease say of the spoke (no client required).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Judgement {
    /// The namespace does not exist, or carries no spoke label: why, and what to do.
    NotASpoke(String),
    /// The spoke renewed its Lease lately: it still answers until `until` (hub time).
    Answers { spoke: String, renewed: Timestamp, until: Timestamp, now: Timestamp },
    /// The spoke's Lease is missing or lapsed: its blocks may be returned.
    Gone { spoke: String, renewed: Option<Timestamp> },
}

/// The latest sign of life of a Lease: its holder's `renewTime` and `acquireTime` (the spoke's
/// clock), the times the API server stamped on its writes, and its creation (the hub's clock).
fn last_renewed(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref();
    let written = lease.metadata.managed_fields.iter().flatten().filter_map(|f| f.time.as_ref().map(|t| t.0));
    [
        spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
        spec.and_then(|s| s.acquire_time.as_ref()).map(|t| t.0),
        lease.metadata.creation_timestamp.as_ref().map(|t| t.0),
    ]
    .into_iter()
    .flatten()
    .chain(written)
    .max()
}

/// Whether `namespace` (as read; None: it does not exist) is a spoke's, and whether the spoke
/// still answers at `now` (hub time), judged from its Lease (None: it has none).
pub(super) fn judge(
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Judgement {
    let Some(labels) = labels else {
        return Judgement::NotASpoke(format!(
            "namespace {namespace} does not exist in this cluster: name the spoke's namespace of the hub \
             (its spoke pools' spec.hub.namespace; `kubectl get namespaces -l {SPOKE_LABEL}` lists them)"
        ));
    };
    let Some(spoke) = labels.get(SPOKE_LABEL).filter(|s| !s.is_empty()).cloned() else {
        return Judgement::NotASpoke(format!(
            "namespace {namespace} is not labelled {SPOKE_LABEL}: it is no spoke's, and drain returns only \
             a spoke's blocks; name the spoke's namespace (`kubectl get namespaces -l {SPOKE_LABEL}` lists them)"
        ));
    };
    let Some(lease) = lease else { return Judgement::Gone { spoke, renewed: None } };
    let Some(renewed) = last_renewed(lease) else { return Judgement::Gone { spoke, renewed: None } };
    let seconds = lease.spec.as_ref().and_then(|s| s.lease_duration_seconds).map_or(SPOKE_LEASE_SECONDS, i64::from);
    let until = renewed
        .saturating_add(SignedDuration::from_secs(seconds.max(1)))
        .and_then(|t| t.saturating_add(MARGIN))
        .unwrap_or(Timestamp::MAX);
    if now < until {
        Judgement::Answers { spoke, renewed, until, now }
    } else {
        Judgement::Gone { spoke, renewed: Some(renewed) }
    }
}

/// The refusal of a spoke that still answers, saying what to do.
fn still_answers(namespace: &str, spoke: &str, renewed: Timestamp, until: Timestamp, now: Timestamp) -> String {
    let mut why = format!(
        "spoke {spoke} still answers: its Lease {namespace}/{SPOKE_LEASE} was renewed at {renewed}, and counts \
         until {until} (the hub's time is {now}). drain returns the blocks of a spoke gone for good only: stop \
         the spoke's ferro-ipam or delete its cluster, wait until its Lease lapses, and run drain again; a spoke \
         that runs returns its empty blocks itself"
    );
    if renewed > now {
        let _ = write!(
            why,
            ". Its renewal is later than the hub's time, so the spoke's clock runs ahead: if it is gone for good, \
             delete the Lease (kubectl -n {namespace} delete lease {SPOKE_LEASE}) and run drain again"
        );
    }
    why
}

/// A failed read or write, in words that say what drain needs.
fn looking(what: &str, namespace: &str, error: &kube::Error) -> anyhow::Error {
    let mut message = format!("{what}: {}", describe(error));
    if status_code(error) == Some(403) {
        let _ = write!(
            message,
            "; hub drain needs get on namespaces, get on leases and list and delete on \
             addressblocks.hub.ferro-ipam.dev in {namespace}"
        );
    }
    anyhow::anyhow!(message)
}

/// The block as drain prints it.
fn returned(block: &AddressBlock) -> Returned {
    Returned {
        address_block: format!("{}/{}", block.namespace().unwrap_or_default(), block.name_any()),
        pool: block_pool(block)
            .map_or_else(|| crate::preflight::spokes::hub_pool_name(&block.spec.pool), |key| key.to_string()),
        cidr: granted(block).map(|c| c.to_string()),
        spoke_pool: Some(block.spec.spoke_pool.clone()).filter(|p| !p.is_empty()),
    }
}

/// Judges the spoke of `namespace` and, gone, deletes its blocks; `hub_now` reads the hub's
/// time (client required).
pub(super) async fn drain(client: &Client, namespace: &str, hub_now: impl Fn() -> Timestamp) -> anyhow::Result<Drain> {
    let read = Api::<Namespace>::all(client.clone())
        .get_opt(namespace)
        .await
        .map_err(|e| looking(&format!("reading Namespace {namespace}"), namespace, &e))?;
    let labels = read.map(|n| n.labels().clone());
    let spoke = labels.as_ref().is_some_and(|l| l.get(SPOKE_LABEL).is_some_and(|s| !s.is_empty()));
    let lease = match spoke {
        true => Api::<Lease>::namespaced(client.clone(), namespace)
            .get_opt(SPOKE_LEASE)
            .await
            .map_err(|e| looking(&format!("reading Lease {namespace}/{SPOKE_LEASE}"), namespace, &e))?,
        false => None,
    };
    let mut answer = Drain { namespace: namespace.to_owned(), ..Drain::default() };
    let renewed = match judge(namespace, labels.as_ref(), lease.as_ref(), hub_now()) {
        Judgement::NotASpoke(why) => {
            answer.state = "refused".to_owned();
            answer.refused = Some(why);
            return Ok(answer);
        }
        Judgement::Answers { spoke, renewed, until, now } => {
            answer.state = "refused".to_owned();
            answer.refused = Some(still_answers(namespace, &spoke, renewed, until, now));
            answer.last_renewed = Some(renewed.to_string());
            answer.spoke = Some(spoke);
            return Ok(answer);
        }
        Judgement::Gone { spoke, renewed } => {
            answer.spoke = Some(spoke);
            renewed
        }
    };
    answer.last_renewed = renewed.map(|t| t.to_string());
    let blocks = Api::<AddressBlock>::namespaced(client.clone(), namespace);
    let listed = blocks.list(&ListParams::default()).await.map_err(|e| match status_code(&e) {
        Some(404) => anyhow::anyhow!(
            "listing AddressBlocks in {namespace}: the API server serves no AddressBlock \
             (hub.ferro-ipam.dev/v1alpha1): this cluster is no hub; run drain against the hub"
        ),
        _ => looking(&format!("listing AddressBlocks in {namespace}"), namespace, &e),
    })?;
    answer.state = "drained".to_owned();
    for block in &listed.items {
        // The block judged, no other: a block of the same name made meanwhile is refused (409).
        let preconditions = Preconditions { uid: block.uid(), resource_version: None };
        let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
        match blocks.delete(&block.name_any(), &params).await {
            Ok(_) => answer.returned.push(returned(block)),
            // Gone meanwhile (returned by the spoke, or by another drain).
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => {
                let what = format!("deleting AddressBlock {namespace}/{}", block.name_any());
                answer.error = Some(looking(&what, namespace, &e).to_string());
                break;
            }
        }
    }
    Ok(answer)
}

/// The exit status of what drain did: 0 drained, 1 refused, 2 a deletion failed.
pub(super) fn exit_status(answer: &Drain) -> i32 {
    match (&answer.refused, &answer.error) {
        (Some(_), _) => REFUSED,
        (None, Some(_)) => crate::preflight::FAILED,
        (None, None) => super::ANSWERED,
    }
}

/// The answer for people.
pub(super) fn text(answer: &Drain) -> String {
    let mut out = String::new();
    if let Some(why) = &answer.refused {
        let _ = writeln!(out, "refused: {why}");
        return out;
    }
    let spoke = answer.spoke.as_deref().unwrap_or_default();
    let _ = match &answer.last_renewed {
        Some(renewed) => writeln!(
            out,
            "spoke {spoke} (namespace {}): its Lease {SPOKE_LEASE} lapsed (last renewed {renewed}); returning its blocks",
            answer.namespace
        ),
        None => writeln!(
            out,
            "spoke {spoke} (namespace {}): no Lease {SPOKE_LEASE}; returning its blocks",
            answer.namespace
        ),
    };
    for r in &answer.returned {
        let _ = write!(out, "deleted AddressBlock {}: ", r.address_block);
        let _ = match &r.cidr {
            Some(cidr) => write!(out, "{cidr} of {}", r.pool),
            None => write!(out, "not granted, of {}", r.pool),
        };
        let _ = match &r.spoke_pool {
            Some(spoke_pool) => writeln!(out, " (spoke pool {spoke_pool})"),
            None => writeln!(out),
        };
    }
    let _ = writeln!(out, "returned {} blocks to the hub", answer.returned.len());
    if let Some(error) = &answer.error {
        let _ = writeln!(out, "stopped: {error}");
    }
    out
}

#[cfg(test)]
#[path = "drain_tests.rs"]
mod tests;
