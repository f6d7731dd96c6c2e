//! The Kubernetes client every part of the process shares, with its guard: writes fenced by the
//! leader lease, every non-watch request bounded in time, and the server's clock observed.

pub mod api_errors;
mod clock;
pub mod discovery;
mod fence;
mod guard;
pub mod providers;
mod ratelimit;

use std::time::Duration;

use anyhow::Context as _;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

pub use clock::ServerClock;
pub use fence::{Fence, Fenced};
use guard::GuardLayer;

pub use guard::Timeouts;
use ratelimit::RateLimitLayer;

/// How long opening a connection to the API server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A client and the state its guard shares with the rest of the process.
#[derive(Clone)]
pub struct Connection {
    pub client: Client,
    pub fence: Fence,
    pub clock: ServerClock,
}

/// Reads the kubeconfig at `path`, else finds one ($KUBECONFIG, ~/.kube/config, in-cluster).
pub async fn config(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
    let mut config = match path {
        Some(path) => {
            let kubeconfig =
                Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await.context("finding a kubeconfig or in-cluster service account")?,
    };
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    Ok(config)
}

/// A client whose writes pass `fence`, limited to `rate` (requests per second, and burst) when
/// given; and, beside it, an unlimited client for the Lease, so that a busy leader's renewals
/// never queue behind its own writes.
pub fn connect(
    config: Config,
    fence: Fence,
    timeouts: Timeouts,
    rate: Option<(f32, u32)>,
) -> anyhow::Result<(Connection, Client)> {
    let clock = ServerClock::default();
    let layer = GuardLayer { fence: fence.clone(), clock: clock.clone(), timeouts };
    let lease =
        ClientBuilder::try_from(config.clone()).context("building the Kubernetes client")?.with_layer(&layer).build();
    let builder = ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    let client = match rate {
        // The limiter holds requests back in their own futures, so it needs a service it can
        // clone: a buffer in front of the connection stack.
        Some((qps, burst)) => builder
            .with_layer(&tower::buffer::BufferLayer::new(1024))
            .with_layer(&RateLimitLayer::new(qps, burst))
            .with_layer(&layer)
            .build(),
        None => builder.with_layer(&layer).build(),
    };
    Ok((Connection { client, fence, clock }, lease))
}

/// A client of its own for the reviews of the metrics endpoint's scrapers (TokenReviews and
/// SubjectAccessReviews), limited to `qps` and `burst`: however many scrapers come, their reviews
/// never take from the controllers' `--kube-api-qps`, nor wait behind it.
pub fn reviews(config: Config, qps: f32, burst: u32) -> anyhow::Result<Client> {
    let layer =
        GuardLayer { fence: Fence::always_open(), clock: ServerClock::default(), timeouts: Timeouts::default() };
    Ok(ClientBuilder::try_from(config)
        .context("building the Kubernetes client for reviews")?
        .with_layer(&tower::buffer::BufferLayer::new(64))
        .with_layer(&RateLimitLayer::new(qps, burst))
        .with_layer(&layer)
        .build())
}
