//! A kumaco replica: its process (a new identity at each start, as a Deployment's new
//! pod), its fault proxy to the API server, its wall clock, its logs; and how it is
//! stopped.

use std::path::{Path, PathBuf};

use anyhow::Result;
use testkit::ApiServer;
use testkit::chaos::clock::FakeClock;
use testkit::faultproxy::FaultProxy;
use testkit::kumaco::{KumacoProcess, Pod, StartOptions};

use crate::NAMESPACE;

pub(crate) struct Replica {
    pub(crate) index: usize,
    pub(crate) incarnation: u32,
    pub(crate) identity: String,
    pub(crate) process: Option<KumacoProcess>,
    pub(crate) proxy: FaultProxy,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) clock: Option<FakeClock>,
    pub(crate) logs: Vec<PathBuf>,
}

impl Replica {
    pub(crate) async fn start(
        &mut self,
        kumaco: &Path,
        server: &ApiServer,
        args: &[String],
    ) -> Result<()> {
        self.incarnation += 1;
        self.identity = format!("chaos-r{}-{}", self.index, self.incarnation);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let options = StartOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            leader: Some(Pod {
                name: self.identity.clone(),
                namespace: NAMESPACE.into(),
            }),
            healthy_is_enough: true,
            env: self.clock.as_ref().map(FakeClock::env).unwrap_or_default(),
            rust_log: Some("info".into()),
        };
        let process = KumacoProcess::start_with(kumaco, server, &args, &options).await?;
        self.logs.push(process.log_path().to_path_buf());
        self.process = Some(process);
        Ok(())
    }
}

/// How a replica is stopped: SIGKILL, or SIGTERM with a pod's grace period.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Signal {
    Kill,
    Term,
}
