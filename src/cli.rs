//! Command-line interface: the subcommands and the flags they share; `kumaco run`'s own
//! flags in `run`, the tools' in `tools` (docs/configuration.md lists them all).
//!
//! Flags are validated by clap into typed values where the type is simple; flags whose
//! syntax is Go's (durations, selectors) are checked by kumaco's own Go-compatible
//! parsers when the controller starts.

use std::path::PathBuf;
use std::sync::LazyLock;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod run;
mod tools;

pub use run::{AlertsUnreachable, GateArgs, NotifyArgs, PolicyArgs, RunArgs, SilenceArgs};
pub use tools::{
    InstanceArgs, PauseArgs, PlanArgs, PlanOutput, StatusArgs, StatusOutput, UninstallArgs,
    ValidateArgs,
};

/// kumaco: the Kubernetes Maintenance Controller.
///
/// Maintenance windows are ConfigMaps (a cron `startTime`, a Go `duration`, a label
/// `nodeSelector`); kumaco sets the node condition `kured.dev/UnderMaintenance` on every
/// node inside an active window and, optionally, `MaintenanceInProgress` on the nodes
/// that may be disrupted now.
#[derive(Debug, Parser)]
#[command(name = "kumaco", version = VERSION.as_str(), about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The file name kubectl looks for on the PATH to run `kubectl kumaco ...`: installed
/// under it (a copy or a symlink), kumaco is a kubectl plugin.
pub const KUBECTL_PLUGIN: &str = "kubectl-kumaco";

impl Cli {
    /// Parses `args` (the first is the program, as in `std::env::args_os`). Invoked as
    /// [`KUBECTL_PLUGIN`], usage and errors name the command as the user typed it,
    /// `kubectl kumaco`; kubectl passes the arguments after `kumaco` unchanged.
    pub fn try_parse_argv(
        args: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let args: Vec<std::ffi::OsString> = args.into_iter().collect();
        let mut command = Cli::command();
        if args.first().is_some_and(|a| is_kubectl_plugin(a.as_ref())) {
            command = command.bin_name("kubectl kumaco");
        }
        let matches = command.try_get_matches_from(args)?;
        Cli::from_arg_matches(&matches)
    }
}

fn is_kubectl_plugin(program: &std::path::Path) -> bool {
    program
        .file_stem()
        .is_some_and(|name| name == KUBECTL_PLUGIN)
}

/// `kumaco --version`: the release and the IANA time zone database built in, which
/// decides what a `CRON_TZ=` schedule means where zone rules changed.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} (bundled tzdata {})",
        env!("CARGO_PKG_VERSION"),
        crate::schedule::bundled_tzdata_version().unwrap_or("of unknown version")
    )
});

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller.
    Run(Box<RunArgs>),
    /// Validate window ConfigMap manifests offline (for GitOps CI). Exit 0: all valid;
    /// 1: some window is invalid; 2: a file is unreadable or not YAML.
    Validate(ValidateArgs),
    /// Show which nodes are in maintenance when, over a period.
    Plan(Box<PlanArgs>),
    /// Show the windows and the nodes' kumaco conditions in a live cluster.
    Status(Box<StatusArgs>),
    /// Start no new maintenance (an emergency stop): what is in progress finishes, every
    /// node that waits shows Paused with the reason, until `kumaco resume`.
    Pause(PauseArgs),
    /// End a pause: maintenance may start again.
    Resume(InstanceArgs),
    /// Remove every node condition a kumaco instance owns (by its field manager), to
    /// uninstall it without leaving conditions behind. Shows what it would remove; acts
    /// only with --yes, once the instance has stopped.
    Uninstall(UninstallArgs),
}

impl Command {
    /// The window flags, which every subcommand that reads windows has.
    pub fn window_args(&self) -> Option<&WindowArgs> {
        match self {
            Command::Run(args) => Some(&args.window_args),
            Command::Validate(args) => Some(&args.window_args),
            Command::Plan(args) => Some(&args.window_args),
            Command::Status(args) => Some(&args.window_args),
            Command::Pause(_) | Command::Resume(_) | Command::Uninstall(_) => None,
        }
    }
}

/// Which IANA time zone database zones are read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TzdataSource {
    /// The copy built into kumaco: the same answer on every image and node.
    #[default]
    Bundled,
    /// The directory $TZDIR, else /usr/share/zoneinfo: the same data as the other
    /// programs on the image.
    System,
}

/// Log output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// How a subcommand reaches the API server: the same flags, and the same order of
/// sources (`kubeclient`), for every subcommand that talks to it.
#[derive(Clone, Debug, Default, Args)]
pub struct ClientArgs {
    /// Kubeconfig file, read alone. Without it: the files of KUBECONFIG (`:`-separated,
    /// merged as kubectl merges them), else the in-cluster configuration, else
    /// ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use instead of the current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

/// The names kumaco's conditions carry on the nodes (`node::names`): the same flags for
/// the controller and for `kumaco status`, which reads what it writes.
#[derive(Clone, Debug, Args)]
pub struct ConditionNameArgs {
    /// The condition type kumaco writes while a window is active, for executors that read
    /// another name (kured's v2 prototype: kured.dev/under-maintenance-window).
    #[arg(
        long,
        value_name = "TYPE",
        default_value = "kured.dev/UnderMaintenance"
    )]
    pub under_maintenance_condition: String,

    /// The condition type kumaco writes for the nodes that may be disrupted now, for
    /// executors that read another name (kured's v2 prototype:
    /// kured.dev/maintenance-in-progress).
    #[arg(long, value_name = "TYPE", default_value = "MaintenanceInProgress")]
    pub in_progress_condition: String,
}

/// `--forecast` and what it plays forward: the brain's policy (the flags of `kumaco run
/// --in-progress`) and the durations, for `kumaco plan` and `kumaco status`.
#[derive(Clone, Debug, Default, Args)]
pub struct ForecastArgs {
    /// Forecast when each node needing maintenance will start and end, and when the
    /// rollout is done, as `kumaco run --in-progress` with the policy flags given here
    /// would decide (docs/forecast.md). Durations from what the nodes record, or
    /// --maintenance-duration and --recovery-duration.
    #[arg(long)]
    pub forecast: bool,

    /// With --forecast: how long one maintenance takes (Go duration, e.g. 15m), instead
    /// of the median and 90th percentile the nodes record.
    #[arg(long, value_name = "DURATION")]
    pub maintenance_duration: Option<String>,

    /// With --forecast: how long a node takes to be Ready and uncordoned again after its
    /// maintenance ends (Go duration), instead of what the nodes record.
    #[arg(long, value_name = "DURATION")]
    pub recovery_duration: Option<String>,

    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// How ConfigMaps are recognised and read as windows: the same for every subcommand.
#[derive(Clone, Debug, Args)]
pub struct WindowArgs {
    /// Label selector a ConfigMap must match to be a window.
    #[arg(
        long,
        value_name = "SEL",
        default_value = "kured.dev/maintenance-window"
    )]
    pub window_selector: String,

    /// Time zone of schedules without a CRON_TZ=/TZ= prefix (IANA name). The tools also
    /// show times in it.
    #[arg(long, value_name = "ZONE", default_value = "UTC")]
    pub default_timezone: String,

    /// Time zone database: `bundled` (built in; the same answer on every image) or
    /// `system` ($TZDIR, else /usr/share/zoneinfo: the data the image's other programs
    /// read).
    #[arg(long, value_enum, env = "KUMACO_TZDATA", default_value_t = TzdataSource::Bundled)]
    pub tzdata: TzdataSource,
}

#[cfg(test)]
mod tests;
