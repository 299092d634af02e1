use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use kumaco::cli::{Cli, Command, RunArgs};
use kumaco::config::Settings;
use kumaco::controller::{self, Exit};
use kumaco::leader::{self, Leadership};
use kumaco::metrics::{self, Metrics};
use kumaco::telemetry;
use kumaco::tools;
use kumaco::tzdata::{self, Tzdata};

fn main() -> Result<()> {
    let cli = Cli::parse();
    // Before anything loads a zone (flags, windows), for every subcommand alike: a
    // refused --tzdata is a usage error.
    let tzdir = std::env::var_os("TZDIR").map(std::path::PathBuf::from);
    let tzdata = match tzdata::install(cli.command.window_args().tzdata, tzdir.as_deref()) {
        Ok(tzdata) => tzdata,
        Err(e) => {
            eprintln!("kumaco: {e}");
            std::process::exit(2);
        }
    };
    match cli.command {
        Command::Run(args) => {
            // One thread: kumaco's work is a few API calls and a pass of arithmetic, and
            // every extra thread costs a malloc arena (tens of MiB of RSS at 5,000 nodes).
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(run(*args, tzdata))
        }
        Command::Validate(args) => {
            let code = tools::validate::run(&args, &mut std::io::stdout(), &mut std::io::stderr());
            std::process::exit(code.into())
        }
        Command::Plan(args) => tool("plan", tools::plan::run(&args, &mut std::io::stdout())),
        Command::Status(args) => tool("status", tools::status::run(&args, &mut std::io::stdout())),
    }
}

/// Runs a tool to completion; a failure is printed and sets the exit status the tool
/// chose (2 for usage and unreadable input, 1 otherwise).
fn tool(name: &str, work: impl Future<Output = Result<(), tools::ToolError>>) -> Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    if let Err(e) = runtime.block_on(work) {
        eprintln!("kumaco {name}: {e}");
        std::process::exit(e.exit_code().into());
    }
    Ok(())
}

async fn run(args: RunArgs, tzdata: Tzdata) -> Result<()> {
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
    // The addresses bound, not those asked for: with port 0 the log says which port
    // (the test harnesses start kumaco that way).
    let (metrics_address, health_address) =
        metrics::serve(metrics.clone(), args.metrics_address, args.health_address)
            .await
            .context("binding the metrics/health addresses")?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), tzdata = %tzdata,
                   metrics = %metrics_address, health = %health_address, "kumaco starting");
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
