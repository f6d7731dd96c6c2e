//! A storm of claims: created at a steady rate in one pool, each retried until the API server
//! takes it, so that a storm rides through a fault as a real client would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ferro_ipam_e2e::objects::Scope;
use kube::api::ListParams;
use tokio::task::JoinSet;

/// How long one claim's creation is retried (through the longest fault of the suite).
const CREATE_PATIENCE: Duration = Duration::from_secs(120);
/// Creates in flight at most: while the API server is away, the storm waits (as a client that
/// retries would), and resumes at its rate when the server is back.
const IN_FLIGHT: usize = 20;

pub struct Storm {
    pub total: usize,
    task: tokio::task::JoinHandle<Result<Instant>>,
}

impl Storm {
    /// Creates `total` claims named `<prefix>-<n>` on the `InClusterIPPool` `pool`, `per_second`.
    pub fn start(s: &Scope, pool: &str, prefix: &str, total: usize, per_second: u32) -> Storm {
        let scope =
            Arc::new(Scope { plane: s.plane, client: s.client.clone(), ns: s.ns.clone(), filter: s.filter.clone() });
        let (pool, prefix) = (pool.to_owned(), prefix.to_owned());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut creates = JoinSet::new();
            let mut last = Instant::now();
            for n in 0..total {
                tick.tick().await;
                while creates.len() >= IN_FLIGHT {
                    if let Some(done) = creates.join_next().await {
                        last = last.max(done??);
                    }
                }
                let (scope, pool) = (scope.clone(), pool.clone());
                let name = format!("{prefix}-{n}");
                creates.spawn(async move {
                    create(&scope, &name, &pool).await?;
                    Ok::<Instant, anyhow::Error>(Instant::now())
                });
            }
            while let Some(done) = creates.join_next().await {
                last = last.max(done??);
            }
            Ok(last)
        });
        Storm { total, task }
    }

    /// Waits until every claim exists; returns when the last was created.
    pub async fn finish(self) -> Instant {
        match self.task.await {
            Ok(Ok(last)) => last,
            Ok(Err(error)) => panic!("the storm could not create its claims: {error:#}"),
            Err(error) => panic!("the storm failed: {error}"),
        }
    }
}

/// Creates a claim, retrying while the API server is away; a claim that already exists (a create
/// stored just before the connection broke) counts as created.
async fn create(s: &Scope, name: &str, pool: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        match s.claim(name, "InClusterIPPool", pool).await {
            Ok(()) => return Ok(()),
            Err(error) => {
                if let Some(kube::Error::Api(status)) = error.downcast_ref::<kube::Error>()
                    && status.code == 409
                {
                    return Ok(());
                }
                if started.elapsed() > CREATE_PATIENCE {
                    return Err(anyhow!("claim {name}: {error:#}"));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many `IPAddress`es the namespace holds (0 while the API server is away).
pub async fn addresses(s: &Scope) -> usize {
    s.addresses().list(&ListParams::default()).await.map(|l| l.items.len()).unwrap_or(0)
}

/// Waits until `at_least` addresses exist: the leader is busy with the storm.
pub async fn wait_addresses(s: &Scope, at_least: usize, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let now = addresses(s).await;
        if now >= at_least {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "only {now} of {at_least} addresses after {within:?}: the storm is not served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Liveness: waits until `total` claims of the namespace are Ready, at the latest at `deadline`.
pub async fn all_served(s: &Scope, total: usize, deadline: Instant) -> Result<()> {
    loop {
        let ready = s.ready_claims().await;
        if ready >= total {
            return Ok(());
        }
        if Instant::now() > deadline {
            let unserved = unserved(s).await;
            return Err(anyhow!(
                "{ready} of {total} claims Ready at the deadline; still not Ready a moment later: {} (first: {:?})",
                unserved.len(),
                unserved.iter().take(5).collect::<Vec<_>>()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The claims not Ready, with their Ready condition's reason.
async fn unserved(s: &Scope) -> Vec<String> {
    let claims = s.claims().list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    claims
        .iter()
        .filter_map(|c| {
            let conditions = c.status.as_ref().map(|st| st.conditions.clone()).unwrap_or_default();
            let ready = conditions.iter().find(|k| k.type_ == "Ready");
            if ready.is_some_and(|k| k.status == "True") {
                return None;
            }
            let name = c.metadata.name.clone().unwrap_or_default();
            Some(format!(
                "{name} ({})",
                ready.map(|k| k.reason.clone().unwrap_or_default()).unwrap_or("no condition".into())
            ))
        })
        .collect()
}
