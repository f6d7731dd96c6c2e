//! The pool-edit storm: while the claims of a run are served, a task edits the pools' specs at a
//! steady rate, round-robin over the pools, each edit toggling the pool's last address in and
//! out of its excluded list (see [`Layout::edit`]). Every subject gets the same edits, so the
//! API server carries the same load for all of them.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::layout::Layout;

/// Edits in flight at most: past that the storm waits, and its rate drops (the report gives the
/// rate achieved).
const IN_FLIGHT: usize = 64;

/// The edits a storm made.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Edits {
    /// Edit requests sent (each a PATCH of one pool; all of them succeeded, or the run failed).
    pub made: usize,
    /// From the first edit until the storm was stopped.
    pub seconds: f64,
}

/// A running storm; [`Storm::stop`] ends it.
pub struct Storm {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<usize>>,
    started: Instant,
}

impl Storm {
    /// Starts editing the pools of `layout` through `api` (the pools' kind in the benchmark's
    /// namespace), `per_second` edits a second.
    pub fn start(api: Api<DynamicObject>, layout: Layout, per_second: u32) -> Storm {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let period = Duration::from_secs_f64(1.0 / f64::from(per_second.max(1)));
            // The default (burst) catches up on ticks missed on a busy machine, so the count
            // keeps to the rate.
            let mut ticks = tokio::time::interval(period);
            let mut stopped = stopped;
            let mut in_flight = FuturesUnordered::new();
            let (mut sent, mut failed, mut first_error) = (0usize, 0usize, None);
            loop {
                tokio::select! {
                    biased;
                    _ = &mut stopped => break,
                    Some(result) = in_flight.next(), if !in_flight.is_empty() => {
                        if let Err(error) = result {
                            failed += 1;
                            first_error.get_or_insert(error);
                        }
                    }
                    _ = ticks.tick(), if in_flight.len() < IN_FLIGHT => {
                        let (pool, nth) = round_robin(sent, layout.pools);
                        let patch = layout.edit(pool, nth);
                        let api = api.clone();
                        in_flight.push(async move {
                            let name = format!("pool-{pool}");
                            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop)
                        });
                        sent += 1;
                    }
                }
            }
            while let Some(result) = in_flight.next().await {
                if let Err(error) = result {
                    failed += 1;
                    first_error.get_or_insert(error);
                }
            }
            if let Some(error) = first_error {
                bail!("{failed} of {sent} pool edits failed, the first: {error}");
            }
            Ok(sent)
        });
        Storm { stop, task, started: Instant::now() }
    }

    /// Stops the storm, waits for the edits in flight, and says how many were made.
    pub async fn stop(self) -> Result<Edits> {
        let _ = self.stop.send(());
        let made = self.task.await.map_err(|e| anyhow!("the storm's task: {e}"))??;
        Ok(Edits { made, seconds: self.started.elapsed().as_secs_f64() })
    }
}

/// The pool of the `n`-th edit (counted from 0), and how many edits of that pool came before.
pub fn round_robin(n: usize, pools: usize) -> (usize, usize) {
    (n % pools, n / pools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PoolKind;

    #[test]
    fn edits_go_round_robin_and_each_pool_alternates_between_excluding_and_not() {
        let layout = Layout::new(PoolKind::Addresses, 3).unwrap();
        let edits: Vec<(usize, usize)> = (0..7).map(|n| round_robin(n, 3)).collect();
        assert_eq!(edits, [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]);
        // Pool 1's edits exclude, clear, exclude, ...
        let of_pool_1: Vec<usize> = (0..9)
            .map(|n| round_robin(n, 3))
            .filter(|(pool, _)| *pool == 1)
            .map(|(pool, nth)| layout.edit(pool, nth)["spec"]["excludedAddresses"].as_array().unwrap().len())
            .collect();
        assert_eq!(of_pool_1, [1, 0, 1]);
    }
}
