//! The run's settings, from the environment (`make soak` passes its variables on):
//! `SOAK_MINUTES` (default 3: the whole run, start-up and final checks included), `SOAK_SEED`
//! (default: drawn from the clock, and printed) and `SOAK_REPLICAS` (default 3).

use std::time::Duration;

/// What the run spends besides the chaos: the control plane's start and the final checks.
const OVERHEAD: Duration = Duration::from_secs(45);
/// The shortest chaos worth running.
const SHORTEST: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub struct Settings {
    pub minutes: f64,
    pub seed: u64,
    pub replicas: usize,
    /// How long faults and the workload run.
    pub chaos: Duration,
}

fn variable<T: std::str::FromStr>(name: &str) -> Option<T> {
    let value = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
    match value.trim().parse() {
        Ok(parsed) => Some(parsed),
        Err(_) => panic!("{name}={value:?} is not a number"),
    }
}

impl Settings {
    pub fn from_env() -> Settings {
        let minutes: f64 = variable("SOAK_MINUTES").unwrap_or(3.0);
        let seed = variable("SOAK_SEED").unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.as_nanos() as u64 % 1_000_000
        });
        let replicas: usize = variable("SOAK_REPLICAS").unwrap_or(3);
        assert!(replicas >= 2, "SOAK_REPLICAS={replicas}: a leader and at least one stand-by are needed");
        let chaos = Duration::from_secs_f64(minutes * 60.0).saturating_sub(OVERHEAD).max(SHORTEST);
        Settings { minutes, seed, replicas, chaos }
    }

    /// The command that runs this same soak again.
    pub fn replay(&self) -> String {
        format!("make soak SOAK_SEED={} SOAK_MINUTES={} SOAK_REPLICAS={}", self.seed, self.minutes, self.replicas)
    }
}
