//! Helm hook Jobs on an API server with no kubelet or job controller: the test plays both
//! for one Job, running its container's arguments with the real binary, under the Job's
//! ServiceAccount (so that the chart's RBAC for the hook is what is exercised), then
//! recording the outcome in the Job's status as the job controller would, so that `helm`
//! waiting on the hook goes on.

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::ApiServer;

/// A kubeconfig for ServiceAccount `namespace/name` (a client certificate for its user
/// name and groups: RBAC bindings to the ServiceAccount match it), for running a Pod's
/// process as the Pod would run.
pub fn service_account_kubeconfig(
    server: &ApiServer,
    namespace: &str,
    name: &str,
) -> Result<std::path::PathBuf> {
    server.kubeconfig_for(
        &format!("system:serviceaccount:{namespace}:{name}"),
        &[
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{namespace}"),
        ],
    )
}

/// What the hook's container did.
#[derive(Debug)]
pub struct HookRun {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// The Job's pod spec, as helm created it.
    pub pod_spec: serde_json::Value,
}

/// Waits (polling, up to `timeout`) for Job `name` in `namespace`, runs its first
/// container's `args` with `bin` as the Job's ServiceAccount, and marks the Job Complete
/// or Failed by the exit status.
pub async fn run_job(
    server: &ApiServer,
    bin: &Path,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<HookRun> {
    let client = server.client().await?;
    let jobs: Api<Job> = Api::namespaced(client, namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    let job = loop {
        if let Some(job) = jobs.get_opt(name).await? {
            break job;
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("no Job {namespace}/{name} after {timeout:?}: did helm run the hook?");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let pod_spec = serde_json::to_value(
        job.spec
            .and_then(|s| s.template.spec)
            .context("the Job has no pod spec")?,
    )?;
    let args: Vec<String> = serde_json::from_value(pod_spec["containers"][0]["args"].clone())
        .context("the Job's container has no args")?;
    let account = pod_spec["serviceAccountName"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let kubeconfig = service_account_kubeconfig(server, namespace, &account)?;
    let mut command = std::process::Command::new(bin);
    command.args(&args).arg("--kubeconfig").arg(&kubeconfig);
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let out = crate::process::output("the hook", command, left)
        .await
        .with_context(|| format!("the hook {} {args:?}", bin.display()))?;

    let now = Timestamp::now().to_string();
    let condition = |type_: &str| json!({ "type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now });
    let status = if out.status.success() {
        json!({
            "startTime": now,
            "completionTime": now,
            "succeeded": 1,
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")],
        })
    } else {
        json!({
            "startTime": now,
            "failed": 1,
            "conditions": [condition("FailureTarget"), condition("Failed")],
        })
    };
    jobs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .with_context(|| format!("marking Job {namespace}/{name} finished"))?;
    Ok(HookRun {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        pod_spec,
    })
}
