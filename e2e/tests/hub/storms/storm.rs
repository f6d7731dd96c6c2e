//! A storm of claims on one cluster: created at a steady rate on the test's pool, each retried
//! until the API server takes it (a claim that already exists counts as created), so that a
//! storm rides through a fault as a real client would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use ferro_ipam_e2e::objects::Scope;
use tokio::task::JoinSet;

use crate::fleet::POOL_KIND;

/// How long one claim's creation is retried.
const CREATE_PATIENCE: Duration = Duration::from_secs(120);
/// Creates in flight at most.
const IN_FLIGHT: usize = 20;

pub struct Storm {
    task: tokio::task::JoinHandle<Result<Instant>>,
}

impl Storm {
    /// Creates `total` claims `<prefix>-<n>` of the `GlobalInClusterIPPool` `pool`, `per_second`.
    pub fn start(s: &Scope, pool: &str, prefix: &str, total: usize, per_second: u32) -> Storm {
        let scope =
            Arc::new(Scope { plane: s.plane, client: s.client.clone(), ns: s.ns.clone(), filter: s.filter.clone() });
        let (pool, prefix) = (pool.to_owned(), prefix.to_owned());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
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
        Storm { task }
    }

    /// Waits until every claim exists; returns when the last was created.
    pub async fn finish(self) -> Result<Instant> {
        self.task.await.map_err(|e| anyhow!("the storm failed: {e}"))?
    }
}

/// Creates a claim, retrying while its API server is away.
pub async fn create(s: &Scope, name: &str, pool: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        match s.claim(name, POOL_KIND, pool).await {
            Ok(()) => return Ok(()),
            Err(error) => {
                if let Some(kube::Error::Api(status)) = error.downcast_ref::<kube::Error>()
                    && status.code == 409
                {
                    return Ok(());
                }
                if started.elapsed() > CREATE_PATIENCE {
                    return Err(anyhow!("claim {}/{name} on {}: {error:#}", s.ns, s.plane.server));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
