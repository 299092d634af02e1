//! `kumaco run`'s flags: the controller's, its policy's, its silences' and its gates'.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{ClientArgs, ConditionNameArgs, LogFormat, WindowArgs};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    #[command(flatten)]
    pub condition_names: ConditionNameArgs,

    /// Namespace watched for window ConfigMaps (repeatable). Default: the namespace kumaco
    /// runs in (POD_NAMESPACE), else `default`.
    #[arg(long = "namespace", value_name = "NS")]
    pub namespaces: Vec<String>,

    #[command(flatten)]
    pub window_args: WindowArgs,

    /// Label selector of the nodes this instance manages; kumaco never writes to another
    /// node. Empty: every node.
    #[arg(long, value_name = "SEL", default_value = "")]
    pub node_selector: String,

    /// Exit when the window configuration changes, instead of regenerating state in
    /// process (the original kumaco behaviour; Kubernetes restarts the pod).
    #[arg(long)]
    pub exit_on_config_change: bool,

    /// Server-side apply field manager: who owns the conditions this instance writes.
    /// Default: `kumaco/<namespace>/<lease name>`, unique per instance (replicas of one
    /// instance share it). Nodes outside `--node-selector` lose every True condition this
    /// manager owns, so two instances must never share one.
    #[arg(long, value_name = "NAME")]
    pub field_manager: Option<String>,

    #[command(flatten)]
    pub policy: PolicyArgs,

    /// Set MaintenancePlanned=True on the nodes a window will select this long before it
    /// starts, until their maintenance begins (Go duration, e.g. 1h).
    #[arg(long, value_name = "DURATION")]
    pub planned_lead_time: Option<String>,

    /// With --in-progress: least time between two forecasts of the rollout (the
    /// kumaco_forecast_* metrics, docs/forecast.md; Go duration, its least value in
    /// docs/configuration.md). 0: none.
    #[arg(long, value_name = "DURATION", default_value = "1m")]
    pub forecast_interval: String,

    /// Elect a leader through a Lease; only the leader writes.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Name of the leader-election Lease, in kumaco's own namespace.
    #[arg(long, value_name = "NAME", default_value = "kumaco")]
    pub lease_name: String,

    /// How long a Lease holder is trusted without renewing (Go duration). Failover takes
    /// up to this long.
    #[arg(long, value_name = "DURATION", default_value = "15s")]
    pub lease_duration: String,

    /// The leader stops writing when it could not renew for this long (Go duration; less
    /// than --lease-duration, the margin covers clock-rate differences).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub lease_renew_deadline: String,

    /// How often candidates try to acquire and the leader renews (Go duration).
    #[arg(long, value_name = "DURATION", default_value = "2s")]
    pub lease_retry_period: String,

    /// Address serving /metrics.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_address: SocketAddr,

    /// Address serving /healthz and /readyz.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8081")]
    pub health_address: SocketAddr,

    /// Interval of the full resync that guards against missed events (Go duration).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub resync_interval: String,

    /// Server-side limit of each watch request (Go duration, whole seconds). Bounds how
    /// long a watch connection the network silently swallowed goes unnoticed, and how
    /// long a request on a silent connection waits (docs/design.md).
    #[arg(long, value_name = "DURATION", default_value = "40s")]
    pub watch_timeout: String,

    /// Log format (level by RUST_LOG).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Shadow mode: compute every decision, log and export (kumaco_dry_run_*) the writes
    /// and events it would make, and write nothing: no node patch, no event, no Lease
    /// (it never takes part in leader election, whatever --leader-elect says).
    #[arg(long)]
    pub dry_run: bool,

    /// Also post events on the Nodes (in namespace `default`, where `kubectl describe
    /// node` finds them) when a condition this instance owns changes: maintenance started,
    /// completed, waiting for a slot, blocked. Needs `create events` in `default`.
    #[arg(long, env = "KUMACO_NODE_EVENTS")]
    pub node_events: bool,

    #[command(flatten)]
    pub silences: SilenceArgs,

    #[command(flatten)]
    pub gates: GateArgs,

    #[command(flatten)]
    pub notify: NotifyArgs,
}

/// The notifications: a message for each maintenance transition
/// (docs/notifications.md).
#[derive(Clone, Debug, Default, Args)]
pub struct NotifyArgs {
    /// kured v1's flag, unchanged: a shoutrrr URL (slack://, teams://, googlechat://,
    /// mattermost://, discord://, generic://) that gets a chat message for each
    /// transition (repeatable). The URL holds a secret: prefer --notify-url-file.
    // The variable's value is a URL holding a secret: `--help` names it, never shows it.
    #[arg(
        long = "notify-url",
        value_name = "URL",
        env = "KUMACO_NOTIFY_URL",
        hide_env_values = true
    )]
    pub notify_urls: Vec<String>,

    /// A file holding a --notify-url (a mounted Secret's key), read at start-up.
    // From the environment too: kustomize's `notifications` component sets it there, where
    // an overlay that replaces the args list keeps it.
    #[arg(long, value_name = "FILE", env = "KUMACO_NOTIFY_URL_FILE")]
    pub notify_url_file: Option<PathBuf>,

    /// kured v1's flag, unchanged: the message when a node's maintenance starts (%s: the
    /// node's name).
    #[arg(long, value_name = "TEMPLATE")]
    pub message_template_drain: Option<String>,

    /// kured v1's flag, accepted and unused: kumaco does not see the moment between the
    /// drain and the reboot.
    #[arg(long, value_name = "TEMPLATE")]
    pub message_template_reboot: Option<String>,

    /// kured v1's flag, unchanged: the message when a node's maintenance completed (%s:
    /// the node's name).
    #[arg(long, value_name = "TEMPLATE")]
    pub message_template_uncordon: Option<String>,

    /// The transitions --notify-url's chat is told of, comma-separated: planned, started,
    /// completed, ended, waiting, not-back, window-opened, window-closed, or all.
    #[arg(long, value_name = "LIST", default_value = "all")]
    pub notify_transitions: String,

    /// A YAML file of sinks: chats, CloudEvents webhooks, Alertmanager, each with its
    /// transitions, template and pace (docs/notifications.md).
    #[arg(long, value_name = "FILE")]
    pub notify_config: Option<PathBuf>,

    /// The cluster's name in every message.
    #[arg(long, value_name = "NAME", default_value = "kubernetes")]
    pub cluster_name: String,

    /// Tell of a node waiting to start this long in its window, once per wait (Go
    /// duration; 0: never).
    #[arg(long, value_name = "DURATION", default_value = "1h")]
    pub notify_waiting_after: String,

    /// Tell of a node not Ready this long after its maintenance completed (Go duration;
    /// 0: never).
    #[arg(long, value_name = "DURATION", default_value = "30m")]
    pub notify_not_back_after: String,
}

/// The health gates: what the cluster shows beyond a node that holds its start
/// (docs/health-gates.md). Each holds new starts only, never a
/// maintenance in progress. Only with --in-progress.
#[derive(Clone, Debug, Default, Args)]
pub struct GateArgs {
    /// Start a node only if every pod a drain would evict can be evicted now: every
    /// PodDisruptionBudget selecting it allows one more disruption, shared with the nodes
    /// in progress and those started with it (reason PodDisruptionBudget). Needs `list`
    /// on pods and `list watch` on poddisruptionbudgets cluster-wide. Default true. Only
    /// with --in-progress.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub pod_disruption_budgets: Option<bool>,

    /// Start no node unless a CEL expression holds over a Kubernetes object (repeatable):
    /// 'API_VERSION KIND [NAMESPACE/]NAME: EXPRESSION', or 'API_VERSION KIND [NAMESPACE]
    /// -l SELECTOR: EXPRESSION' (every object matching must satisfy it), the object as
    /// `object`, e.g. 'ceph.rook.io/v1 CephCluster rook-ceph/rook-ceph:
    /// object.status.ceph.health == "HEALTH_OK"' (reason HealthCheckFailed). Needs `get
    /// list watch` on the resource. Only with --in-progress.
    #[arg(long = "block-unless", value_name = "SPEC")]
    pub block_unless: Vec<String>,

    /// Start no node while an alert fires in the --alertmanager-url Alertmanager (reason
    /// AlertFiring): an alert whose labels match a node's --silence-matchers sets holds
    /// that node only, one naming no node in scope every node. An alert a person
    /// silenced does not hold; one muted only by kumaco's own maintenance silences does.
    /// Only with --in-progress.
    #[arg(long)]
    pub block_alerts: bool,

    /// With --block-alerts: alerts whose alertname this regular expression matches
    /// (anywhere in the name, as kured's --alert-filter-regexp) do not hold, e.g.
    /// '^(Watchdog|InfoInhibitor)$'.
    #[arg(long, value_name = "REGEX")]
    pub block_alerts_ignore: Option<String>,

    /// With --block-alerts: only alerts whose alertname this regular expression matches
    /// (anywhere in the name) hold (kured's --alert-filter-match-only).
    #[arg(long, value_name = "REGEX")]
    pub block_alerts_only: Option<String>,

    /// With --block-alerts: only alerts matching this matcher hold (repeatable: all of
    /// them), in Alertmanager's syntax, e.g. 'severity=~"warning|critical"'.
    #[arg(long = "block-alerts-matcher", value_name = "MATCHER")]
    pub block_alerts_matchers: Vec<String>,

    /// Prometheus (or a Prometheus-compatible API) the --block-query queries are sent
    /// to, e.g. http://prometheus-operated.monitoring.svc:9090.
    #[arg(long, value_name = "URL")]
    pub prometheus_url: Option<String>,

    /// File holding a bearer token sent to --prometheus-url (read again for every
    /// query).
    #[arg(long, value_name = "FILE")]
    pub prometheus_bearer_token_file: Option<PathBuf>,

    /// PEM file of the CA(s) --prometheus-url's certificate is checked against, instead
    /// of the system's.
    #[arg(long, value_name = "FILE")]
    pub prometheus_ca_file: Option<PathBuf>,

    /// Start no node while this PromQL instant query returns a series (repeatable; reason
    /// AlertFiring), e.g. 'ALERTS{alertstate="firing",severity="critical"}'. A series
    /// whose labels match a node's --silence-matchers sets holds that node only. Needs
    /// --prometheus-url. Only with --in-progress.
    #[arg(long = "block-query", value_name = "PROMQL")]
    pub block_queries: Vec<String>,

    /// How often the alerts (--block-alerts) and queries (--block-query) are read (Go
    /// duration; its default and bounds: docs/configuration.md).
    #[arg(long, value_name = "DURATION")]
    pub block_alerts_interval: Option<String>,

    /// What to do when Alertmanager or Prometheus does not answer (no connection, a
    /// timeout, a 5xx) past the staleness bound: `block` (no maintenance starts, reason
    /// GateUnavailable) or `allow` (go on without the gate). An answer that says kumaco
    /// is misconfigured (401, 403, 404, a TLS failure, an answer that does not decode, a
    /// query refused) always blocks. Default block.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub alerts_unreachable: Option<AlertsUnreachable>,

    /// With --block-alerts: an Alertmanager that started less than this long ago lists
    /// only the alerts sent to it since; its answer counts only beside one of a peer up
    /// longer, and alone it is no reading (Go duration; the default is what Prometheus
    /// takes to send every firing alert again: docs/configuration.md). Zero trusts any
    /// answer.
    #[arg(long, value_name = "DURATION")]
    pub block_alerts_warm_up: Option<String>,
}

/// `--alerts-unreachable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlertsUnreachable {
    /// No maintenance starts until the alerts can be read again.
    Block,
    /// Maintenance goes on as if nothing fired while the source does not answer.
    Allow,
}

/// `--alertmanager-url` and the silences kumaco holds there for the nodes in maintenance
/// (docs/silences.md).
#[derive(Clone, Debug, Default, Args)]
pub struct SilenceArgs {
    /// Alertmanager to hold silences in for the nodes in maintenance (repeatable: the
    /// peers of one HA set; a silence goes to the first that answers and gossips to the
    /// others, --block-alerts reads every one). Off without it.
    #[arg(long = "alertmanager-url", value_name = "URL")]
    pub alertmanager_urls: Vec<String>,

    /// File holding a bearer token sent to Alertmanager (read again for every round, so
    /// a rotated token is used).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "alertmanager_basic_auth_file"
    )]
    pub alertmanager_bearer_token_file: Option<PathBuf>,

    /// File holding one line `user:password` for basic authentication to Alertmanager.
    #[arg(long, value_name = "FILE")]
    pub alertmanager_basic_auth_file: Option<PathBuf>,

    /// PEM file of the CA(s) Alertmanager's certificate is checked against, instead of
    /// the system's.
    #[arg(long, value_name = "FILE")]
    pub alertmanager_ca_file: Option<PathBuf>,

    /// PEM client certificate for Alertmanager (with --alertmanager-key-file).
    #[arg(long, value_name = "FILE", requires = "alertmanager_key_file")]
    pub alertmanager_cert_file: Option<PathBuf>,

    /// PEM private key of --alertmanager-cert-file.
    #[arg(long, value_name = "FILE", requires = "alertmanager_cert_file")]
    pub alertmanager_key_file: Option<PathBuf>,

    /// How far ahead a held silence ends (Go duration; default and least value:
    /// docs/configuration.md). It is pushed back when less than half remains, so a
    /// stopped kumaco leaves a node silenced at most this long.
    #[arg(long, value_name = "DURATION")]
    pub silence_lease: Option<String>,

    /// How long a node's silence is kept after its maintenance ends (Go duration;
    /// default: docs/configuration.md).
    #[arg(long, value_name = "DURATION")]
    pub silence_tail: Option<String>,

    /// Also keep a node's silence while it recovers from its maintenance: NotReady or
    /// cordoned without a break since the maintenance ended. A node seen back once gets
    /// no silence when it fails again later.
    #[arg(long)]
    pub silence_while_recovering: bool,

    /// With --silence-while-recovering: the longest a node is silenced after its
    /// maintenance ended while it does not come back (Go duration; default:
    /// docs/configuration.md). Past it, the node's own alerts page: it did not recover.
    #[arg(long, value_name = "DURATION", requires = "silence_while_recovering")]
    pub silence_max_recovery: Option<String>,

    /// A label, KEY=VALUE, that this cluster's alerts carry and other clusters' do not
    /// (what Prometheus' external_labels add; repeatable), for an Alertmanager shared by
    /// several clusters: added to every silence's matchers, and with --block-alerts only
    /// the alerts carrying it hold starts.
    #[arg(long = "cluster-label", value_name = "KEY=VALUE")]
    pub cluster_labels: Vec<String>,

    /// One more silence for each node in maintenance (repeatable: a silence per SET),
    /// held besides the default node="{{name}}". SET: matchers separated by commas, all
    /// of which an alert must match, each LABEL OP "VALUE" with OP one of = != =~ !~;
    /// the value may name the node, {{name}}, and its labels, {{label:KEY}}. E.g.
    /// 'instance=~"{{name}}(:[0-9]+)?"' for node-exporter's alerts.
    #[arg(long = "silence-matchers", value_name = "SET")]
    pub silence_matcher_sets: Vec<String>,

    /// Hold the default silence for each node in maintenance, node="{{name}}" (the label
    /// of kube-state-metrics' alerts such as KubeNodeNotReady); default true. false: only
    /// the --silence-matchers sets.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub silence_default_matchers: Option<bool>,

    /// The older form of --silence-matchers (repeatable): all --silence-matcher flags
    /// together are one set, held instead of the default node="{{name}}".
    #[arg(
        long = "silence-matcher",
        value_name = "MATCHER",
        conflicts_with_all = ["silence_matcher_sets", "silence_default_matchers"]
    )]
    pub silence_matchers: Vec<String>,

    /// Most silences created per minute (default 60); the others wait.
    #[arg(long, value_name = "N")]
    pub silence_max_creates_per_minute: Option<u32>,

    /// With --alertmanager-url: hold the silences (default true). false uses Alertmanager
    /// for --block-alerts only (the --silence-matchers sets then only say which node an
    /// alert is about).
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub silences: Option<bool>,
}

/// `--in-progress` and its policy: the brain's rules, the same for `kumaco run` and
/// `kumaco plan --forecast` (which plays them forward).
#[derive(Clone, Debug, Default, Args)]
pub struct PolicyArgs {
    /// Also decide `MaintenanceInProgress` (the nodes that may be disrupted now).
    #[arg(long)]
    pub in_progress: bool,

    /// Node condition type that must be True before maintenance starts (repeatable),
    /// e.g. kured.dev/RebootRequired.
    #[arg(long = "require-condition", value_name = "TYPE")]
    pub require_conditions: Vec<String>,

    /// Node condition type that, when True, prevents maintenance from starting
    /// (repeatable).
    #[arg(long = "block-condition", value_name = "TYPE")]
    pub block_conditions: Vec<String>,

    /// Most nodes in progress at once: a number, or a percentage of the nodes in scope
    /// (rounded down, at least 1). Default 1. Only with --in-progress.
    #[arg(long, value_name = "N|P%")]
    pub max_in_progress: Option<String>,

    /// End every in-progress maintenance when its window ends. Only with --in-progress.
    #[arg(long)]
    pub stop_at_window_end: bool,

    /// Start no new maintenance when less than this remains of the window (Go duration).
    /// Default: none. Only with --in-progress.
    #[arg(long, value_name = "DURATION")]
    pub start_cutoff: Option<String>,

    /// Count unavailable nodes (NotReady, Ready Unknown, cordoned) against the ceilings
    /// with the nodes in progress: a node that completed holds its slot until it is back.
    /// Default true. Only with --in-progress.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub count_unavailable: Option<bool>,

    /// End a node's maintenance when the node reboots (its status.nodeInfo.bootID
    /// changes), whatever its required conditions still show, and start the next one only
    /// once they are confirmed after the reboot. Set false for maintenance that reboots a
    /// node more than once. Default true. Only with --in-progress.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub complete_on_reboot: Option<bool>,

    /// A node matching this label selector does not start maintenance (repeatable).
    /// Only with --in-progress.
    #[arg(long = "block-node-selector", value_name = "SEL")]
    pub block_node_selectors: Vec<String>,

    /// A node where a pod matching this label selector is scheduled and not finished
    /// does not start maintenance (repeatable; pods in every namespace; needs `list
    /// watch` on pods cluster-wide). Only with --in-progress.
    #[arg(long = "block-pod-selector", value_name = "SEL")]
    pub block_pod_selectors: Vec<String>,

    /// A ceiling per value of a node label, e.g. topology.kubernetes.io/zone=1 (a number
    /// or a percentage of the group, at least 1), in addition to --max-in-progress;
    /// nodes without the label form one group (repeatable for several keys). Only with
    /// --in-progress.
    #[arg(long = "max-in-progress-per", value_name = "KEY=N|P%")]
    pub max_in_progress_per: Vec<String>,

    /// The least time between a start or an end of maintenance and the next start in
    /// this instance's scope (Go duration). Only with --in-progress.
    #[arg(long, value_name = "DURATION")]
    pub start_interval: Option<String>,
}
