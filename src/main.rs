use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use kumaco::cli::{Cli, Command, RunArgs};
use kumaco::config::Settings;
use kumaco::controller::{self, Exit};
use kumaco::leader::{self, Leadership};
use kumaco::metrics::{self, Metrics};
use kumaco::telemetry;

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => {
            let runtime = tokio::runtime::Runtime::new()?;
            runtime.block_on(run(*args))
        }
    }
}

async fn run(args: RunArgs) -> Result<()> {
    telemetry::init(args.log_format);
    let settings = Settings::from_args(
        &args,
        std::env::var("POD_NAMESPACE").ok(),
        std::env::var("POD_NAME").ok(),
    )?;
    let client = client(&args).await?;
    let metrics = Arc::new(Metrics::new());
    let leadership = match &settings.election {
        Some(election) => leader::spawn(client.clone(), election.clone(), metrics.clone()),
        None => {
            metrics.leader.set(1);
            Leadership::always()
        }
    };
    metrics::serve(metrics.clone(), args.metrics_address, args.health_address)
        .await
        .context("binding the metrics/health addresses")?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), metrics = %args.metrics_address,
                   health = %args.health_address, "kumaco starting");
    match controller::run(client, settings, metrics, leadership).await? {
        Exit::Signal => Ok(()),
        Exit::ConfigChanged => {
            tracing::info!(
                "exiting because the window configuration changed (--exit-on-config-change)"
            );
            Ok(())
        }
    }
}

async fn client(args: &RunArgs) -> Result<kube::Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?
        }
        None => kube::Config::incluster().context(
            "no --kubeconfig/KUBECONFIG and not running in a cluster (KUBERNETES_SERVICE_HOST unset)",
        )?,
    };
    Ok(kube::Client::try_from(config)?)
}
