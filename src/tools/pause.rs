//! `kumaco pause` and `kumaco resume`: the emergency stop. Pausing writes the instance's
//! pause Lease ([`crate::pause`]): who, when and why; the controller then starts nothing
//! and every waiting node says so. Resuming deletes it. Both are idempotent, so a
//! pause said twice updates why and who, and a resume of an instance not paused says so
//! and succeeds.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, SelfSubjectReviewStatus};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

use super::{ToolError, api_error};
use crate::cli::{InstanceArgs, PauseArgs};
use crate::kubeclient::Connection;
use crate::pause::{REASON_ANNOTATION, hold, pause_lease};
use crate::peers::LeaseRef;

/// The field manager of the pause Lease's writes.
const FIELD_MANAGER: &str = "kumaco-pause";

/// What a refused pause or resume needs.
const RIGHTS: &str = ". Pausing needs `create` on leases and `get patch delete` on the \
                      pause Lease in the instance's namespace: the chart's and kustomize's \
                      `kumaco-pauser` Role grants them (docs/pause.md, \"Who may pause\")";

/// Runs `kumaco pause`; the report on `out`.
pub async fn pause(args: &PauseArgs, out: &mut impl std::io::Write) -> Result<u8, ToolError> {
    let reason = args.reason.trim();
    if reason.is_empty() {
        return Err(super::flag_err(
            "reason",
            "is empty: say why, e.g. --reason 'incident 4711: storage degraded'",
        ));
    }
    let connection = crate::kubeclient::connect(&args.instance.client).await?;
    let instance = instance(&args.instance);
    let by = match &args.by {
        Some(by) => by.clone(),
        None => who_am_i(&connection)
            .await
            .unwrap_or_else(|| "unknown".into()),
    };
    let lease = set(&connection, &instance, &by, reason, Timestamp::now()).await?;
    let mut write = |text: &str| out.write_all(text.as_bytes()).map_err(ToolError::Write);
    write(&format!(
        "paused the instance of Lease {instance}: no maintenance starts; what is in progress \
         finishes. Waiting nodes show Paused: {}\n",
        hold(&lease).message
    ))?;
    if !instance_exists(&connection, &instance).await? {
        write(&format!(
            "warning: there is no Lease {instance}: no instance runs under that name (check \
             --lease-namespace and --lease-name; `kubectl get leases -A` lists them). The \
             pause is set anyway\n"
        ))?;
    }
    write(&format!(
        "resume with: kumaco resume --lease-namespace {} --lease-name {}\n",
        instance.namespace, instance.name
    ))?;
    Ok(0)
}

/// Runs `kumaco resume`; the report on `out`.
pub async fn resume(args: &InstanceArgs, out: &mut impl std::io::Write) -> Result<u8, ToolError> {
    let connection = crate::kubeclient::connect(&args.client).await?;
    let instance = instance(args);
    let removed = unset(&connection, &instance).await?;
    let text = if removed {
        format!("resumed the instance of Lease {instance}: maintenance may start again\n")
    } else {
        format!("the instance of Lease {instance} was not paused: nothing to do\n")
    };
    out.write_all(text.as_bytes()).map_err(ToolError::Write)?;
    Ok(0)
}

fn instance(args: &InstanceArgs) -> LeaseRef {
    LeaseRef {
        namespace: args.lease_namespace.clone(),
        name: args.lease_name.clone(),
    }
}

/// Pauses the instance of `instance`: its pause Lease says `by`, `now` and `reason`.
/// Returns the Lease as written.
pub async fn set(
    connection: &Connection,
    instance: &LeaseRef,
    by: &str,
    reason: &str,
    now: Timestamp,
) -> Result<Lease, ToolError> {
    let pause = pause_lease(instance);
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(pause.name.clone()),
            namespace: Some(pause.namespace.clone()),
            labels: Some(
                [crate::pause::LABEL, "app.kubernetes.io/managed-by=kumaco"]
                    .iter()
                    .filter_map(|l| l.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            annotations: Some(BTreeMap::from([(
                REASON_ANNOTATION.to_string(),
                reason.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(by.to_string()),
            acquire_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(connection.client.clone(), &pause.namespace)
        .patch(
            &pause.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&lease),
        )
        .await
        .map_err(|e| {
            api_error(
                connection,
                format!("write the pause Lease {pause}"),
                e,
                RIGHTS,
            )
        })
}

/// Ends the pause of the instance of `instance`; whether there was one.
pub async fn unset(connection: &Connection, instance: &LeaseRef) -> Result<bool, ToolError> {
    let pause = pause_lease(instance);
    match Api::<Lease>::namespaced(connection.client.clone(), &pause.namespace)
        .delete(&pause.name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if crate::kubeclient::failure(&e) == crate::gates::Failure::NotFound => Ok(false),
        Err(e) => Err(api_error(
            connection,
            format!("delete the pause Lease {pause}"),
            e,
            RIGHTS,
        )),
    }
}

/// The pause Lease of the instance of `instance`, if it is paused.
pub async fn read(
    connection: &Connection,
    instance: &LeaseRef,
) -> Result<Option<Lease>, kube::Error> {
    let pause = pause_lease(instance);
    Api::<Lease>::namespaced(connection.client.clone(), &pause.namespace)
        .get_opt(&pause.name)
        .await
}

/// Whether the instance's own Lease exists (a refusal to read it counts as yes: this
/// identity may pause without reading it).
async fn instance_exists(connection: &Connection, instance: &LeaseRef) -> Result<bool, ToolError> {
    match Api::<Lease>::namespaced(connection.client.clone(), &instance.namespace)
        .get_opt(&instance.name)
        .await
    {
        Ok(found) => Ok(found.is_some()),
        Err(e) if crate::kubeclient::is_forbidden(&e) => Ok(true),
        Err(e) => Err(api_error(
            connection,
            format!("read Lease {instance}"),
            e,
            "",
        )),
    }
}

/// The user name the API server knows this identity as, if it says.
async fn who_am_i(connection: &Connection) -> Option<String> {
    let review = SelfSubjectReview::default();
    let answer = Api::<SelfSubjectReview>::all(connection.client.clone())
        .create(&PostParams::default(), &review)
        .await
        .ok()?;
    let SelfSubjectReviewStatus { user_info } = answer.status?;
    user_info?.username.filter(|u| !u.is_empty())
}
