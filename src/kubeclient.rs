//! How every subcommand finds the API server: one function, [`connect`], for `run`,
//! `status` and `plan`, so that they always agree on which cluster they talk to.
//!
//! The order is controller-runtime's `GetConfig` (what most Kubernetes controllers do),
//! with kubectl's reading of kubeconfig files:
//!
//! 1. `--kubeconfig FILE`: that file alone; it must exist.
//! 2. `KUBECONFIG`: a `:`-separated list of files, merged as kubectl merges them (the
//!    first file to set a value wins, `current-context` included). Files that do not
//!    exist are skipped, as kubectl skips them, but one at least must exist.
//! 3. The in-cluster configuration (the pod's service account), when
//!    `KUBERNETES_SERVICE_HOST` is set and no `--context` is given: in a pod, kumaco needs
//!    no flag, and a `~/.kube/config` baked into an image cannot redirect it.
//! 4. `~/.kube/config` (`$HOME/.kube/config`).
//!
//! `--context NAME` picks a context of the kubeconfig instead of its `current-context`.
//! A context exists only in a kubeconfig, so with `--context` the in-cluster step is
//! skipped rather than the flag ignored.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

use crate::cli::ClientArgs;
use crate::gates::Failure;

/// What the process environment says about where the API server is. Read once and
/// passed in, so that the choice is testable without touching the environment.
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// `KUBECONFIG`.
    pub kubeconfig: Option<OsString>,
    /// `KUBERNETES_SERVICE_HOST` is set: kumaco runs in a pod.
    pub in_cluster: bool,
    /// `$HOME/.kube/config`, when `HOME` is set (client-go reads `HOME` too).
    pub home_kubeconfig: Option<PathBuf>,
}

impl Environment {
    pub fn from_process() -> Self {
        let nonempty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        Environment {
            kubeconfig: nonempty("KUBECONFIG"),
            in_cluster: nonempty("KUBERNETES_SERVICE_HOST").is_some(),
            home_kubeconfig: nonempty("HOME").map(|h| PathBuf::from(h).join(".kube/config")),
        }
    }
}

/// Where the configuration came from: said in logs and in every error about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig FILE`.
    Flag(PathBuf),
    /// `KUBECONFIG`, its non-empty entries in order.
    Env(Vec<PathBuf>),
    /// The pod's service account.
    InCluster,
    /// `$HOME/.kube/config`.
    Home(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(p) => write!(f, "--kubeconfig {}", p.display()),
            Source::Env(paths) => write!(f, "KUBECONFIG={}", join(paths)),
            Source::InCluster => f.write_str("the in-cluster configuration"),
            Source::Home(p) => write!(f, "{}", p.display()),
        }
    }
}

fn join(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(":")
}

/// Why no client could be built. Every message names what was read (or tried) and, where
/// there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read kubeconfig {path} ({via}): {error}")]
    Read {
        path: PathBuf,
        via: &'static str,
        error: std::io::Error,
    },
    #[error("{at}: not a kubeconfig: {message}")]
    Parse { at: String, message: String },
    #[error("{from}: none of these files exists")]
    NoEnvFile { from: Source },
    #[error("{from}: cannot merge {path} into the files before it: {error}")]
    Merge {
        from: Source,
        path: PathBuf,
        error: KubeconfigError,
    },
    #[error("{from} has no context {context:?}; its contexts: {available}")]
    NoContext {
        from: Source,
        context: String,
        available: String,
    },
    #[error(
        "{from} sets no current-context: choose one with --context (its contexts: {available})"
    )]
    NoCurrentContext { from: Source, available: String },
    #[error("{from}: context {context:?} names cluster {cluster:?}, which is not in it")]
    NoCluster {
        from: Source,
        context: String,
        cluster: String,
    },
    #[error("{from}: {error}")]
    Kubeconfig {
        from: Source,
        error: KubeconfigError,
    },
    #[error(
        "running in a cluster (KUBERNETES_SERVICE_HOST is set) but its configuration is unusable: {error}; and {home} does not exist"
    )]
    InCluster { error: String, home: String },
    #[error(
        "no API server configured: --kubeconfig is not given, KUBECONFIG is not set, {in_cluster}, and {home} does not exist"
    )]
    Nothing { in_cluster: String, home: String },
    #[error("building a client for {server} (from {from}): {message}")]
    Client {
        server: String,
        from: Source,
        message: String,
    },
}

/// A client, and what it talks to.
pub struct Connection {
    pub client: kube::Client,
    /// The API server's URL.
    pub server: String,
    pub from: Source,
    /// The kubeconfig context used (none in-cluster).
    pub context: Option<String>,
    config: kube::Config,
}

impl Connection {
    /// Another client to the same API server with the same identity, on connections of
    /// its own: requests on one client never wait behind, or land on a dead connection
    /// of, another's pool.
    ///
    /// With `read_timeout`, a connection silent that long after a request was written on
    /// it, or while it sits idle in the pool, is closed. A connection the network
    /// swallowed (no byte, no FIN, no RST) otherwise holds a request sent on it forever:
    /// kube's lists and the start of a watch have no timeout of their own, and the pool
    /// hands out idle connections for up to 90 s.
    pub fn new_client(&self, read_timeout: Option<Duration>) -> Result<kube::Client, ClientError> {
        let mut config = self.config.clone();
        if read_timeout.is_some() {
            config.read_timeout = read_timeout;
            config.reset_reader_on_write = true;
        }
        kube::Client::try_from(config).map_err(|e| ClientError::Client {
            server: self.server.clone(),
            from: self.from.clone(),
            message: describe(&e),
        })
    }
}

/// A client for the API server the flags and the environment designate (see the module
/// documentation for the order).
pub async fn connect(args: &ClientArgs) -> Result<Connection, ClientError> {
    connect_with(args, &Environment::from_process()).await
}

/// [`connect`] with the environment given.
pub async fn connect_with(args: &ClientArgs, env: &Environment) -> Result<Connection, ClientError> {
    let (config, from, context) = config(args, env, || {
        kube::Config::incluster().map_err(|e| e.to_string())
    })
    .await?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config.clone()).map_err(|e| ClientError::Client {
        server: server.clone(),
        from: from.clone(),
        message: describe(&e),
    })?;
    Ok(Connection {
        client,
        server: server.trim_end_matches('/').to_string(),
        from,
        context,
        config,
    })
}

/// The configuration and where it came from; `in_cluster` loads the pod's (a parameter
/// so that tests can play a pod).
async fn config(
    args: &ClientArgs,
    env: &Environment,
    in_cluster: impl FnOnce() -> Result<kube::Config, String>,
) -> Result<(kube::Config, Source, Option<String>), ClientError> {
    if let Some(path) = &args.kubeconfig {
        let from = Source::Flag(path.clone());
        let kc = read(path, "--kubeconfig")?;
        return from_kubeconfig(kc, from, args.context.as_deref()).await;
    }
    if let Some(value) = &env.kubeconfig {
        // Empty entries (`a::b`, a trailing `:`) are ignored, as kubectl ignores them.
        let paths: Vec<PathBuf> = std::env::split_paths(value)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            let from = Source::Env(paths.clone());
            let mut merged: Option<Kubeconfig> = None;
            for path in &paths {
                if !path.exists() {
                    continue;
                }
                let kc = read(path, "in KUBECONFIG")?;
                merged = Some(match merged {
                    None => kc,
                    Some(m) => m.merge(kc).map_err(|error| ClientError::Merge {
                        from: from.clone(),
                        path: path.clone(),
                        error,
                    })?,
                });
            }
            let merged = merged.ok_or(ClientError::NoEnvFile { from: from.clone() })?;
            return from_kubeconfig(merged, from, args.context.as_deref()).await;
        }
    }
    let home = env.home_kubeconfig.clone();
    let home_shown = home
        .as_ref()
        .map_or("$HOME/.kube/config (HOME is not set)".into(), |p| {
            p.display().to_string()
        });
    let in_cluster = if env.in_cluster && args.context.is_none() {
        match in_cluster() {
            Ok(config) => return Ok((config, Source::InCluster, None)),
            Err(e) => Some(e),
        }
    } else {
        None
    };
    match home.filter(|p| p.exists()) {
        Some(path) => {
            let kc = read(&path, "the default kubeconfig")?;
            from_kubeconfig(kc, Source::Home(path), args.context.as_deref()).await
        }
        None => Err(match in_cluster {
            Some(error) => ClientError::InCluster {
                error,
                home: home_shown,
            },
            None => ClientError::Nothing {
                in_cluster: if env.in_cluster {
                    // Only reachable with --context: say why in-cluster was not used.
                    "--context names a kubeconfig context (so the in-cluster configuration does not apply)".into()
                } else {
                    "kumaco is not running in a cluster (KUBERNETES_SERVICE_HOST is not set)".into()
                },
                home: home_shown,
            },
        }),
    }
}

/// Reads one kubeconfig file, with its path in every error (kube's parse error has none).
fn read(path: &Path, via: &'static str) -> Result<Kubeconfig, ClientError> {
    Kubeconfig::read_from(path).map_err(|e| match e {
        KubeconfigError::ReadConfig(error, _) => ClientError::Read {
            path: path.to_path_buf(),
            via,
            error,
        },
        KubeconfigError::Parse(error) => {
            let (at, message) = crate::yaml::error_at(&path.display().to_string(), &error);
            ClientError::Parse { at, message }
        }
        // Nothing else comes out of reading and parsing; said as kube says it.
        other => ClientError::Parse {
            at: path.display().to_string(),
            message: other.to_string(),
        },
    })
}

async fn from_kubeconfig(
    kc: Kubeconfig,
    from: Source,
    context: Option<&str>,
) -> Result<(kube::Config, Source, Option<String>), ClientError> {
    let available = || {
        let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let chosen = match context {
        Some(c) => c.to_string(),
        None => match &kc.current_context {
            Some(c) if !c.is_empty() => c.clone(),
            _ => {
                return Err(ClientError::NoCurrentContext {
                    from,
                    available: available(),
                });
            }
        },
    };
    let Some(named) = kc.contexts.iter().find(|c| c.name == chosen) else {
        return Err(ClientError::NoContext {
            from,
            context: chosen,
            available: available(),
        });
    };
    if let Some(cluster) = named.context.as_ref().map(|c| &c.cluster)
        && !kc.clusters.iter().any(|c| &c.name == cluster)
    {
        return Err(ClientError::NoCluster {
            from,
            context: chosen.clone(),
            cluster: cluster.clone(),
        });
    }
    let options = KubeConfigOptions {
        context: Some(chosen.clone()),
        ..Default::default()
    };
    match kube::Config::from_custom_kubeconfig(kc, &options).await {
        Ok(config) => Ok((config, from, Some(chosen))),
        Err(error) => Err(ClientError::Kubeconfig { from, error }),
    }
}

/// A kube error as a sentence. kube's own `Display` of an API refusal appends the
/// `Debug` form of the whole `Status`; people need the API server's message, which names
/// the user and the permission, and the HTTP code. Other errors are their chain of
/// causes, each said once.
pub fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let message = if s.message.is_empty() {
                "no message".to_string()
            } else {
                s.message.clone()
            };
            match s.reason.as_str() {
                "" => format!("{message} (HTTP {})", s.code),
                reason => format!("{message} (HTTP {} {reason})", s.code),
            }
        }
        other => chain(other),
    }
}

/// Whether the API server refused for lack of permission or credentials (401, 403).
pub fn is_forbidden(e: &kube::Error) -> bool {
    failure(e) == Failure::Forbidden
}

/// What the failure policy of the health gates makes of a kube error
/// ([`crate::gates::Failure`]): a refusal, a kind or object not served, an outage (no
/// answer, 429, 5xx), or anything else kumaco cannot use.
pub fn failure(e: &kube::Error) -> Failure {
    match e {
        kube::Error::Api(s) => Failure::of_status(s.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            Failure::Unreachable
        }
        _ => Failure::Invalid,
    }
}

/// An error and its causes, `a: b: c`, leaving out a cause the text before already says
/// (kube's messages embed their source) and kube's `HyperError: `-style type prefixes.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = strip_type_prefix(&e.to_string()).to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(strip_type_prefix(&said));
        }
        cause = c.source();
    }
    text
}

fn strip_type_prefix(message: &str) -> &str {
    match message.split_once(": ") {
        Some((head, rest))
            if head.ends_with("Error")
                && !head.contains(' ')
                && head.starts_with(|c: char| c.is_ascii_uppercase()) =>
        {
            rest
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests;
