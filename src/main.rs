use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use kumaco::cli::{Cli, Command, RunArgs};
use kumaco::config::{FlagError, Settings};
use kumaco::controller::{self, ControllerError, Exit};
use kumaco::kubeclient;
use kumaco::leader::{self, Leadership};
use kumaco::metrics::{self, Metrics};
use kumaco::telemetry;
use kumaco::tools;
use kumaco::tzdata::{self, Tzdata};

fn main() {
    let cli = Cli::try_parse_argv(std::env::args_os()).unwrap_or_else(|e| e.exit());
    // Before anything loads a zone (flags, windows), for every subcommand alike: a
    // refused --tzdata is a usage error.
    let tzdir = std::env::var_os("TZDIR").map(std::path::PathBuf::from);
    let tzdata = match tzdata::install(
        cli.command
            .window_args()
            .map_or(Default::default(), |a| a.tzdata),
        tzdir.as_deref(),
    ) {
        Ok(tzdata) => tzdata,
        Err(e) => {
            eprintln!("kumaco: {e}");
            std::process::exit(2);
        }
    };
    let code = match cli.command {
        Command::Run(args) => match run_controller(*args, tzdata) {
            Ok(()) => 0,
            Err(e) => {
                // `{:#}` is the message and its causes on one line; `{:?}` would add a
                // backtrace when RUST_BACKTRACE is set, which is not for users.
                eprintln!("kumaco run: {e:#}");
                // A flag kumaco cannot use is a usage error, as clap's own are.
                if e.downcast_ref::<FlagError>().is_some() {
                    2
                } else {
                    1
                }
            }
        },
        Command::Validate(args) => {
            tools::validate::run(&args, &mut std::io::stdout(), &mut std::io::stderr())
        }
        Command::Plan(args) => tool("plan", async {
            tools::plan::run(&args, &mut std::io::stdout()).await?;
            Ok(0)
        }),
        Command::Status(args) => tool("status", async {
            let outcome =
                tools::status::run(&args, &mut std::io::stdout(), &mut std::io::stderr()).await?;
            Ok(outcome.exit_code())
        }),
        Command::Pause(args) => tool("pause", tools::pause::pause(&args, &mut std::io::stdout())),
        Command::Resume(args) => tool(
            "resume",
            tools::pause::resume(&args, &mut std::io::stdout()),
        ),
        Command::Uninstall(args) => tool(
            "uninstall",
            tools::uninstall::run(&args, &mut std::io::stdout()),
        ),
    };
    std::process::exit(code.into())
}

/// Runs a tool to completion and returns its exit status; a failure is printed and sets
/// the status the tool chose (2 for usage and unreadable input, 1 otherwise).
fn tool(name: &str, work: impl Future<Output = Result<u8, tools::ToolError>>) -> u8 {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kumaco {name}: cannot start the async runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(work) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kumaco {name}: {e}");
            e.exit_code()
        }
    }
}

fn run_controller(args: RunArgs, tzdata: Tzdata) -> Result<()> {
    // One thread: kumaco's work is a few API calls and a pass of arithmetic, and every
    // extra thread costs a malloc arena (tens of MiB of RSS at 5,000 nodes).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run(args, tzdata))
}

async fn run(args: RunArgs, tzdata: Tzdata) -> Result<()> {
    telemetry::init(args.log_format);
    let shutdown = controller::Shutdown::listen().context("listening for SIGTERM and SIGINT")?;
    let settings = Settings::from_args(
        &args,
        std::env::var("POD_NAMESPACE").ok(),
        std::env::var("POD_NAME").ok(),
    )?;
    let connection = kubeclient::connect(&args.client).await?;
    tracing::info!(server = %connection.server, from = %connection.from,
                   context = %connection.context.as_deref().unwrap_or("-"), "using the API server");
    let metrics = Arc::new(Metrics::new());
    let (leadership, campaign) = match &settings.election {
        Some(election) => {
            // The Lease on connections of its own, as kube-controller-manager gives leader
            // election its own client: renewals never queue behind a burst of node writes,
            // and after the network swallowed connections (a blackhole, a lost conntrack
            // entry) a renewal finds no dead pooled connection left by the controller's
            // traffic, where each would cost a request timeout until the pool expired it as
            // idle (docs/design.md, "Connections the network swallows": what the chaos run
            // measured).
            let lease_client = connection.new_client(None)?;
            let (leadership, campaign) =
                leader::spawn(lease_client, election.clone(), metrics.clone());
            (leadership, Some(campaign))
        }
        None => {
            // A shadow leads nothing: a "no leader" alert must not count it.
            metrics.leader.set(i64::from(!settings.dry_run));
            (Leadership::always(), None)
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
    // No answer on a healthy connection is silent longer than a watch may be (the API
    // server ends each after --watch-timeout), so this bounds how long a request can hang
    // on a connection the network swallowed.
    let read_timeout = Duration::from_secs(u64::from(settings.watch_timeout_secs) + 10);
    let connect: controller::Connect = Arc::new(move || connection.new_client(Some(read_timeout)));
    let exit = controller::run(connect, settings, metrics, leadership, shutdown).await;
    // The loop has returned: nothing writes any more, so a standby may take over now.
    if let Some(campaign) = campaign {
        campaign.release().await;
    }
    match exit.map_err(readable)? {
        Exit::Signal => Ok(()),
        Exit::ConfigChanged => {
            tracing::info!(
                "exiting because the window configuration changed (--exit-on-config-change)"
            );
            Ok(())
        }
    }
}

/// The controller's error as one sentence: kube's `Display` of an API refusal embeds a
/// `Debug` dump, and the error's own causes repeat its message.
fn readable(e: ControllerError) -> anyhow::Error {
    match e {
        ControllerError::Kube(k) => anyhow!("Kubernetes API: {}", kubeclient::describe(&k)),
        other => anyhow!("{other}"),
    }
}
