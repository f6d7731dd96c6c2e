//! Why a claim is pending, or how it got its address (pure but for the provider look-up of a
//! purpose claim): the claim controller's own decision (preflight's `decide`), the pool's
//! reservations and strategy, and for purpose claims the candidate pools in the controller's
//! order with the controller's reason for passing each over.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use kube::ResourceExt;
use serde::Serialize;

use crate::api::capi::IPAddressClaim;
use crate::api::conditions::ClaimReason;
use crate::api::keys::REQUESTED_ADDRESS_ANNOTATION;
use crate::contract::{Target, passed_over, request_of, tenancy};
use crate::index::{HolderKey, Index, PoolKey};
use crate::preflight::claims::{Decision, decide};
use crate::preflight::gather::Inventory;
use crate::preflight::spokes::{NOT_KNOWN, spoke_pool_of};
use crate::selection::{self, Purpose};

/// The answer, in the shape `-o json` prints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Explain {
    pub claim: String,
    /// `served`, `pending`, `releasing`, `notFound`, or `notFerroIpams`.
    pub state: String,
    /// The claim's `Ready` condition as its status has it: `<status> <reason>: <message>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The pool's allocation strategy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// How the address was chosen: a reservation, the requested-address annotation, or the
    /// strategy (or the claim's sticky address, which is not recorded once taken).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Why it waits, as the claim controller would say it: `<reason>: <message>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<String>,
    /// The claim's pool is a spoke pool (`spec.hub`): the hub's pool and namespace it leases
    /// blocks from, whose addresses are the only ones it serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    /// The message of the claim's `Ready` condition when its reason is `WaitingForHub`: it
    /// says what keeps the spoke from the hub, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for_hub: Option<String>,
    /// A purpose claim's candidate pools, in the order they are tried.
    pub candidates: Vec<Candidate>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Candidate {
    pub pool: String,
    /// `chosen`, `passed over: <why>`, or `not tried`.
    pub verdict: String,
}

/// The message of the claim's `Ready` condition, when it waits for its hub.
fn waiting_for_hub(claim: &IPAddressClaim) -> Option<String> {
    let ready = claim.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Ready")?;
    (ready.reason.as_deref() == Some(ClaimReason::WaitingForHub.as_str()))
        .then(|| ready.message.clone().unwrap_or_default())
}

/// What a spoke pool serves, when `pool` is one.
fn hub_of(index: &Index, pool: &PoolKey) -> Option<String> {
    let hub = index.pool_spec(pool)?.hub()?.clone();
    Some(format!("{pool} is {}: it serves only addresses of the blocks the hub leased it", spoke_pool_of(&hub)))
}

fn ready_of(claim: &IPAddressClaim) -> Option<String> {
    let ready = claim.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Ready")?;
    Some(format!(
        "{} {}: {}",
        ready.status,
        ready.reason.clone().unwrap_or_default(),
        ready.message.clone().unwrap_or_default()
    ))
}

/// How a served claim's address was chosen.
fn origin(index: &Index, claim: &IPAddressClaim, holder: &HolderKey, pool: &PoolKey, ip: IpAddr) -> String {
    let owners = request_of(claim, false).map(|r| r.owners).unwrap_or_default();
    let report = index.report(pool);
    if let Some((reserved, _)) =
        report.reservations.iter().find(|(r, _)| r.address == ip && r.claim.matches(holder, &owners))
    {
        return format!("reserved for it by {}", reserved.field);
    }
    let requested = claim.annotations().get(REQUESTED_ADDRESS_ANNOTATION).and_then(|a| a.trim().parse::<IpAddr>().ok());
    if requested == Some(ip) {
        return format!("requested with the {REQUESTED_ADDRESS_ANNOTATION} annotation");
    }
    "the pool's allocation strategy, or the address a deleted claim of this name had (sticky)".to_owned()
}

/// A purpose claim's candidates, in the controller's order, with the controller's verdicts.
fn candidates(
    index: &Index,
    purpose: Purpose,
    asker: (&str, Option<&BTreeMap<String, String>>),
    provider: Option<&str>,
    chosen: Option<&PoolKey>,
) -> Vec<Candidate> {
    let (namespace, labels) = asker;
    let labelled = index.pools_labelled(purpose.label());
    let found = selection::candidates(purpose, namespace, provider, labelled.iter().map(|(k, l)| (k, l)));
    let mut reached = chosen.is_none();
    let mut out = Vec::new();
    for pool in found.order() {
        let verdict = if Some(pool) == chosen {
            reached = true;
            "chosen".to_owned()
        } else if reached && chosen.is_some() {
            "not tried".to_owned()
        } else {
            let facts = index.pool_facts(pool);
            let skipped = passed_over(pool, false, facts.as_ref())
                .or_else(|| tenancy::not_selected(pool, facts.as_ref(), namespace, labels));
            let spoke = index.pool_spec(pool).is_some_and(|s| s.hub().is_some());
            match skipped {
                Some(why) => format!("passed over: {why}"),
                None if !index.has_room(pool) && spoke => format!("would be tried: {NOT_KNOWN}"),
                None if !index.has_room(pool) => "passed over: no free address".to_owned(),
                None => "would be tried".to_owned(),
            }
        };
        out.push(Candidate { pool: pool.to_string(), verdict });
    }
    for pool in found.blocked_global() {
        out.push(Candidate {
            pool: pool.to_string(),
            verdict: format!("not tried: no namespaced pool allows overflow ({})", purpose.overflow_label()),
        });
    }
    for refusal in &found.refused {
        let serves = refusal.serves.as_deref().unwrap_or("no provider");
        out.push(Candidate { pool: refusal.pool.to_string(), verdict: format!("not a candidate: serves {serves}") });
    }
    out
}

/// The claim's story, `provider` being the claim's infrastructure provider (purpose claims).
pub(super) fn answer(inventory: &Inventory, index: &Index, holder: &HolderKey, provider: Option<&str>) -> Explain {
    let mut answer = Explain { claim: holder.to_string(), ..Explain::default() };
    let Some(claim) = inventory
        .claims
        .iter()
        .find(|c| c.namespace().as_deref() == Some(holder.namespace.as_str()) && *c.name_any() == *holder.name)
    else {
        answer.state = "notFound".to_owned();
        return answer;
    };
    answer.ready = ready_of(claim);
    answer.waiting_for_hub = waiting_for_hub(claim);
    let Some(target) = Target::of(claim) else {
        answer.state = "notFerroIpams".to_owned();
        answer.waits = Some(format!(
            "its poolRef names {} {:?}, not a ferro-ipam pool or purpose",
            claim.spec.pool_ref.kind, claim.spec.pool_ref.name
        ));
        return answer;
    };
    let chosen = tell_decision(&mut answer, index, claim, holder, decision_of(index, inventory, holder));
    let pool = match &target {
        Target::Pool(key) => Some(key),
        Target::Purpose(_) => chosen.as_ref(),
    };
    answer.hub = pool.and_then(|key| hub_of(index, key));
    if let Target::Purpose(purpose) = target {
        let asker = (&*holder.namespace, inventory.namespaces.get(&*holder.namespace));
        answer.candidates = candidates(index, purpose, asker, provider, chosen.as_ref());
    } else if let Target::Pool(key) = &target
        && answer.strategy.is_none()
    {
        answer.strategy = index.pool_spec(key).map(|s| s.strategy().to_string());
    }
    answer
}

/// What the claim controller would decide for the claim, as preflight's `decide` says it.
fn decision_of(index: &Index, inventory: &Inventory, holder: &HolderKey) -> Option<Decision> {
    let name = holder.to_string();
    decide(index, inventory).decisions.into_iter().find(|d| match d {
        Decision::Adopt { claim, .. } => *claim == name,
        Decision::Wait(w) => w.claim == name,
        Decision::Allocate(n) => n.claim == name,
        Decision::FromHub(c) => c.claim == name,
        Decision::Refuse(c) => c.objects.contains(&name),
        Decision::Release => false,
    })
}

/// Writes the claim's state, and why it waits or how it was served, from the decision; the
/// pool that serves it is returned, to mark it among a purpose claim's candidates.
fn tell_decision(
    answer: &mut Explain,
    index: &Index,
    claim: &IPAddressClaim,
    holder: &HolderKey,
    decision: Option<Decision>,
) -> Option<PoolKey> {
    match decision {
        _ if claim.metadata.deletion_timestamp.is_some() => answer.state = "releasing".to_owned(),
        Some(Decision::Adopt { pool, ip, .. }) => {
            answer.state = "served".to_owned();
            answer.address = Some(ip.to_string());
            answer.strategy = index.pool_spec(&pool).map(|s| s.strategy().to_string());
            answer.origin = Some(origin(index, claim, holder, &pool, ip));
            answer.pool = Some(pool.to_string());
            return Some(pool);
        }
        Some(Decision::Wait(w)) => {
            answer.state = "pending".to_owned();
            answer.pool = w.pool;
            answer.waits = Some(format!("{}: {}", w.reason, w.message));
        }
        Some(Decision::Refuse(c)) => {
            answer.state = "pending".to_owned();
            answer.pool = c.pool;
            answer.waits = Some(format!("AllocationFailed: {}", c.message));
        }
        Some(Decision::Allocate(n)) => {
            answer.state = "pending".to_owned();
            answer.waits = Some(match (&n.pool, &n.address) {
                (Some(pool), Some(ip)) => format!("not served yet: the controller's next pass hands it {ip} of {pool}"),
                _ => "not served yet: the controller's next pass chooses among the candidates below".to_owned(),
            });
            answer.pool = n.pool;
        }
        Some(Decision::FromHub(c)) => {
            answer.state = "pending".to_owned();
            answer.waits = Some(format!("not served yet; its pool is {NOT_KNOWN}"));
            answer.pool = Some(c.pool);
        }
        Some(Decision::Release) | None => answer.state = "pending".to_owned(),
    }
    None
}

/// The answer for people.
pub(super) fn text(answer: &Explain) -> String {
    let mut out = format!("claim {}: {}\n", answer.claim, answer.state);
    let lines = [
        ("ready", &answer.ready),
        ("pool", &answer.pool),
        ("address", &answer.address),
        ("strategy", &answer.strategy),
        ("chosen by", &answer.origin),
        ("waits", &answer.waits),
        ("hub", &answer.hub),
        ("hub wait", &answer.waiting_for_hub),
    ];
    for (label, value) in lines {
        if let Some(value) = value {
            let _ = writeln!(out, "  {label:<10} {value}");
        }
    }
    if !answer.candidates.is_empty() {
        out.push_str("  candidates, in order:\n");
        for (i, c) in answer.candidates.iter().enumerate() {
            let _ = writeln!(out, "    {}. {}: {}", i + 1, c.pool, c.verdict);
        }
    }
    out
}
