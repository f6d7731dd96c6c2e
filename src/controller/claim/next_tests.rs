//! What each outcome waits for, and the sign-up that cannot miss a pool change.

use std::sync::Arc;

use crate::store::claims::Action;

use super::loaded::Loaded;
use super::next::{Outcome, RECHECK, SHORTLY, Unfulfilled, Wake, after, plan};
use crate::api::conditions::ClaimReason;
use crate::contract::Target;
use crate::controller::mock_api::World;
use crate::fixtures;
use crate::index::{PoolFacts, PoolKey, Trigger};
use crate::selection::Purpose;

fn pool() -> PoolKey {
    PoolKey::in_cluster("ns", "pool")
}

fn not_ready() -> Outcome {
    Outcome::Unfulfilled(Unfulfilled::not_ready(ClaimReason::PoolNotReady, "ns/pool not found"))
}

#[test]
fn a_claim_of_a_named_pool_waits_on_that_pool() {
    let target = Target::Pool(pool());
    assert_eq!(plan(&target, Some(&pool()), &Outcome::Held), (Wake::Pool(pool()), Action::await_change()));
    assert_eq!(plan(&target, Some(&pool()), &not_ready()), (Wake::Pool(pool()), Action::requeue(RECHECK)));
}

#[test]
fn a_purpose_claim_waits_on_its_pool_once_known_and_on_every_labelled_pool_before() {
    let target = Target::Purpose(Purpose::Vip);
    assert_eq!(plan(&target, None, &not_ready()), (Wake::PurposePools(Vec::new()), Action::requeue(RECHECK)));
    assert_eq!(plan(&target, None, &Outcome::Held), (Wake::PurposePools(Vec::new()), Action::await_change()));
    assert_eq!(plan(&target, Some(&pool()), &not_ready()), (Wake::Pool(pool()), Action::requeue(RECHECK)));
    let exhausted = Outcome::Unfulfilled(Unfulfilled::PurposeExhausted {
        message: "full".into(),
        event_reason: "VipPoolsExhausted",
        refused: vec![pool()],
    });
    assert_eq!(plan(&target, None, &exhausted), (Wake::PurposePools(vec![pool()]), Action::requeue(RECHECK)));
}

#[test]
fn what_settles_within_moments_is_looked_at_again_shortly() {
    let target = Target::Pool(pool());
    let unprotected = Outcome::Unfulfilled(Unfulfilled::Unprotected(pool()));
    assert_eq!(plan(&target, Some(&pool()), &unprotected), (Wake::Pool(pool()), Action::requeue(SHORTLY)));
    let recreating = Outcome::Unfulfilled(Unfulfilled::Recreating);
    assert_eq!(plan(&target, Some(&pool()), &recreating), (Wake::Nothing, Action::requeue(SHORTLY)));
    let fulfilled = Outcome::Fulfilled("10.0.0.10".parse().unwrap());
    assert_eq!(plan(&target, Some(&pool()), &fulfilled), (Wake::Nothing, Action::await_change()));
}

/// Loads claim `ns/c` of `ns/pool`, whose pool exists but is not yet protected.
fn loaded_before_protection(world: &World) -> Loaded {
    let spec: crate::api::IPPoolSpec =
        serde_json::from_value(serde_json::json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24})).unwrap();
    world.ctx.index.upsert_pool(&pool(), &spec, PoolFacts { uid: "u".into(), ..PoolFacts::default() }, &[]);
    let claim = Arc::new(fixtures::claim("c", "pool"));
    let (holder, target) = Loaded::identify(&claim).unwrap();
    Loaded::load(claim, holder, target, &world.ctx)
}

fn protect(world: &World) {
    let spec: crate::api::IPPoolSpec =
        serde_json::from_value(serde_json::json!({"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24})).unwrap();
    let facts = PoolFacts { uid: "u".into(), protected: true, ..PoolFacts::default() };
    world.ctx.index.upsert_pool(&pool(), &spec, facts, &[]);
}

fn claim_triggered(world: &mut World) -> bool {
    let mut triggered = false;
    while let Ok(trigger) = world.triggers.try_recv() {
        triggered |= matches!(trigger, Trigger::Claim(holder) if &*holder.name == "c");
    }
    triggered
}

#[tokio::test]
async fn a_pool_change_after_the_sign_up_wakes_the_claim() {
    let mut world = World::new(crate::controller::mock_api::MockApi::client(Vec::new()).0);
    let loaded = loaded_before_protection(&world);
    after(&world.ctx, &loaded, &Outcome::Unfulfilled(Unfulfilled::Unprotected(pool())));
    assert!(!claim_triggered(&mut world), "nothing changed since the claim was loaded");
    protect(&world);
    assert!(claim_triggered(&mut world), "the pool's protection wakes the claim waiting for it");
}

#[tokio::test]
async fn a_pool_change_between_the_load_and_the_sign_up_is_not_missed() {
    let mut world = World::new(crate::controller::mock_api::MockApi::client(Vec::new()).0);
    let loaded = loaded_before_protection(&world);
    // The pool changes while the claim's reconcile is under way: nobody waits on it yet.
    protect(&world);
    assert!(!claim_triggered(&mut world));
    after(&world.ctx, &loaded, &Outcome::Unfulfilled(Unfulfilled::Unprotected(pool())));
    assert!(claim_triggered(&mut world), "the claim read the pool before it changed: it must look again");
}
