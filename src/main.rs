#![forbid(unsafe_code)]

use ferro_ipam::cli::{Cli, Command, HubCommand};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::from_args(std::env::args_os()).unwrap_or_else(|error| error.exit());
    if let Some(Command::Preflight { kubeconfig, output }) = &cli.command {
        let kubeconfig = kubeconfig.as_deref().or(cli.run.kubeconfig.as_deref());
        let status = ferro_ipam::preflight::run(kubeconfig, *output).await.unwrap_or_else(|error| {
            eprintln!("ferro-ipam preflight: {error:#}");
            ferro_ipam::preflight::FAILED
        });
        std::process::exit(status);
    }
    if let Some(Command::WhoHas { address, kubeconfig, output }) = &cli.command {
        let kubeconfig = kubeconfig.as_deref().or(cli.run.kubeconfig.as_deref());
        std::process::exit(ferro_ipam::inspect::who_has(kubeconfig, *address, *output).await);
    }
    if let Some(Command::Explain { claim, kubeconfig, output }) = &cli.command {
        let kubeconfig = kubeconfig.as_deref().or(cli.run.kubeconfig.as_deref());
        std::process::exit(ferro_ipam::inspect::explain(kubeconfig, claim, *output).await);
    }
    if let Some(Command::Top {
        namespace,
        kubeconfig,
        output,
        metrics,
        metrics_interval,
        metrics_token_file,
        metrics_insecure_skip_tls_verify,
    }) = &cli.command
    {
        let kubeconfig = kubeconfig.as_deref().or(cli.run.kubeconfig.as_deref());
        let metrics = metrics.as_ref().map(|url| ferro_ipam::inspect::MetricsSource {
            url: url.clone(),
            token_file: metrics_token_file.clone(),
            insecure: *metrics_insecure_skip_tls_verify,
            interval: *metrics_interval,
        });
        std::process::exit(ferro_ipam::inspect::top(kubeconfig, namespace.as_deref(), metrics, *output).await);
    }
    if let Some(Command::Hub { command: HubCommand::Drain { namespace, kubeconfig, output } }) = &cli.command {
        let kubeconfig = kubeconfig.as_deref().or(cli.run.kubeconfig.as_deref());
        std::process::exit(ferro_ipam::inspect::hub_drain(kubeconfig, namespace, *output).await);
    }
    if let Some(Command::Crds { output_dir }) = cli.command {
        match output_dir {
            None => print!("{}", ferro_ipam::api::crdgen::all_yaml()),
            Some(dir) => {
                for (name, yaml) in ferro_ipam::api::crdgen::files() {
                    std::fs::write(dir.join(&name), yaml)?;
                }
            }
        }
        return Ok(());
    }
    ferro_ipam::run::init_logging(cli.run.log_format, &cli.run.log_filter())?;
    if let Err(error) = ferro_ipam::run::run(cli.run).await {
        // Once, at ERROR, with every cause: what stopped the provider and what to fix.
        tracing::error!("ferro-ipam cannot run: {error:#}");
        std::process::exit(1);
    }
    Ok(())
}
