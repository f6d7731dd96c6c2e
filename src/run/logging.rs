//! Structured logs, as text or JSON.

use tracing_subscriber::{EnvFilter, fmt};

use crate::cli::LogFormat;

/// Installs the global subscriber. `filter` uses RUST_LOG syntax.
pub fn init(format: LogFormat, filter: &str) -> anyhow::Result<()> {
    let filter =
        EnvFilter::try_new(filter).map_err(|e| anyhow::anyhow!("log filter {filter:?} (--log-level or --v): {e}"))?;
    // Colours only for a terminal: a pod's log or a file gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = fmt().with_env_filter(filter).with_target(false).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    }
    .map_err(|e| anyhow::anyhow!("installing the logger: {e}"))
}
