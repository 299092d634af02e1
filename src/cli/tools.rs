//! The tools' flags: `kumaco validate`, `plan`, `status`, `pause`, `resume` and
//! `uninstall`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{ClientArgs, ConditionNameArgs, ForecastArgs, WindowArgs};

/// Which instance `kumaco pause` and `kumaco resume` act on: its Lease.
#[derive(Debug, Args)]
pub struct InstanceArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    /// The instance's namespace, where its Lease is (for a Helm release, its namespace).
    /// No namespace is assumed.
    #[arg(long, value_name = "NS")]
    pub lease_namespace: String,

    /// The instance's Lease name (its `--lease-name`; for a Helm release, its full name).
    #[arg(long, value_name = "NAME", default_value = "kumaco")]
    pub lease_name: String,
}

/// `kumaco pause`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    #[command(flatten)]
    pub instance: InstanceArgs,

    /// Why: shown on every node that waits, and by `kumaco status`.
    #[arg(long, value_name = "TEXT")]
    pub reason: String,

    /// Who pauses, as the nodes show it. Default: the user the API server knows this
    /// identity as (a SelfSubjectReview), else `unknown`.
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
}

/// `kumaco uninstall`.
#[derive(Debug, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(flatten)]
    pub condition_names: ConditionNameArgs,

    /// The instance's namespace, where its Lease (and Deployment) are. Default: the
    /// namespace --field-manager names; no other namespace is assumed.
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,

    /// The instance's Lease name (its `--lease-name`). Default: the Lease --field-manager
    /// names, else `kumaco`.
    #[arg(long, value_name = "NAME")]
    pub lease_name: Option<String>,

    /// The instance's field manager, if it runs with `--field-manager`. Default:
    /// `kumaco/<lease namespace>/<lease name>`, as `kumaco run` derives it. While the
    /// instance whose Lease it names runs (another than this one's), nothing is removed.
    #[arg(long, value_name = "NAME")]
    pub field_manager: Option<String>,

    /// Remove the conditions (and delete the instance's Lease). Without it: only show
    /// what would be removed.
    #[arg(long)]
    pub yes: bool,

    /// With --yes: first scale this Deployment (in the lease namespace) to 0 replicas,
    /// so that the instance stops.
    #[arg(long, value_name = "NAME")]
    pub stop_deployment: Option<String>,

    /// With --yes: how long to wait for the instance to stop (its Lease released, or
    /// not renewed for its duration), as a Go duration.
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub wait: String,

    /// Exit 0 when there is nothing to remove (no Lease and no condition of the field
    /// manager), and when --stop-deployment's Deployment does not exist. Without it
    /// that is exit 3: a mistyped namespace or name is not reported as success.
    #[arg(long)]
    pub ignore_not_found: bool,

    /// The instance runs with --dry-run (shadow mode): it wrote nothing, so nothing is
    /// removed, stopped or deleted; only says so. The chart passes it for a `dryRun`
    /// release.
    #[arg(long)]
    pub shadow: bool,

    /// With --yes, while nodes are in maintenance: how long to wait for them to end (new
    /// starts paused meanwhile, the instance still running to end them), as a Go
    /// duration. When they do not end in time, nothing is removed and the nodes are
    /// named.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub wait_for_maintenance: String,

    /// With --yes: remove the conditions without waiting for the nodes in maintenance,
    /// even mid-drain (the executor then takes their maintenance for ended).
    #[arg(long)]
    pub force: bool,
}

/// `kumaco validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Manifest files (multi-document YAML or JSON; `kind: List` accepted); `-` reads
    /// standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    #[command(flatten)]
    pub window_args: WindowArgs,

    /// The time lint warnings are computed for (RFC 3339; default: now). For
    /// reproducible output.
    #[arg(long, value_name = "TIME")]
    pub now: Option<String>,
}

/// Output format of `kumaco plan`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PlanOutput {
    #[default]
    Table,
    Json,
    Svg,
}

/// `kumaco plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Window manifest files (as for validate); invalid windows are an error.
    #[arg(
        long,
        required_unless_present = "namespaces",
        conflicts_with = "namespaces",
        num_args = 1..,
        value_name = "FILE"
    )]
    pub windows: Vec<PathBuf>,

    /// Read the window ConfigMaps from this namespace of the cluster (repeatable), instead
    /// of --windows files; invalid windows are an error.
    #[arg(long = "namespace", short = 'n', value_name = "NS")]
    pub namespaces: Vec<String>,

    /// Nodes file (a NodeList or multi-document Nodes, YAML or JSON; for a plan only
    /// names and labels matter, for a forecast their conditions, readiness and cordon
    /// too: `kubectl get nodes -o yaml`). Without it, nodes are listed from the cluster.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "context", "namespaces"])]
    pub nodes: Option<PathBuf>,

    /// When nodes come from the cluster: how to reach it.
    #[command(flatten)]
    pub client: ClientArgs,

    /// Start of the period (RFC 3339; default: now).
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,

    /// Length of the period: a Go duration, optionally preceded by days (e.g. 7d, 1d12h, 36h).
    #[arg(long = "for", value_name = "DURATION", default_value = "7d")]
    pub for_: String,

    /// Label selector of the nodes in scope (as kumaco run's). Empty: every node.
    #[arg(long, value_name = "SEL", default_value = "")]
    pub node_selector: String,

    #[command(flatten)]
    pub window_args: WindowArgs,

    /// Also show the nodes MaintenancePlanned holds with `kumaco run --planned-lead-time`
    /// (Go duration, e.g. 1h): from this long before a window's start until the start.
    #[arg(long, value_name = "DURATION")]
    pub planned_lead_time: Option<String>,

    #[command(flatten)]
    pub forecast: ForecastArgs,

    #[command(flatten)]
    pub condition_names: ConditionNameArgs,

    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = PlanOutput::Table)]
    pub output: PlanOutput,
}

/// Output format of `kumaco status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum StatusOutput {
    #[default]
    Table,
    Wide,
    Json,
}

/// `kumaco status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(flatten)]
    pub condition_names: ConditionNameArgs,

    /// With --forecast (and the instance's policy flags): each node's expected start or
    /// end, and the rollout's.
    #[command(flatten)]
    pub forecast: ForecastArgs,

    /// Namespace holding window ConfigMaps (repeatable).
    #[arg(long = "namespace", short = 'n', required = true, value_name = "NS")]
    pub namespaces: Vec<String>,

    /// Label selector of the nodes in scope. Empty: every node.
    #[arg(long, value_name = "SEL", default_value = "")]
    pub node_selector: String,

    /// Show the windows only: no node is listed (for those who may not list nodes).
    #[arg(long, conflicts_with = "node_selector")]
    pub no_nodes: bool,

    /// Also count the disrupted nodes (in progress or unavailable) per value of this node
    /// label (repeatable), as `--max-in-progress-per` groups them.
    #[arg(long = "group-by", value_name = "KEY")]
    pub group_by: Vec<String>,

    /// Output format: `table`, `wide` (also each window's schedule, duration and
    /// selector, more node names, each node's next window), or `json` (every name, a
    /// stable schema: docs/tools.md).
    #[arg(long, short = 'o', value_enum, default_value_t = StatusOutput::Table)]
    pub output: StatusOutput,

    #[command(flatten)]
    pub window_args: WindowArgs,
}
