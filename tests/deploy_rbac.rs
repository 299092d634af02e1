//! The RBAC of `deploy/base` is enough and no more, on a real API server with RBAC on:
//!
//! - kumaco, running as the base's ServiceAccount (a TokenRequest token, as a pod would
//!   have), with leader election, works end to end: it holds its Lease, reads windows,
//!   posts events and sets `kured.dev/UnderMaintenance` on the nodes in its scope; with a
//!   notification sink it writes its notifications' record (`kumaco-notified`), and
//!   restarted without one it deletes that record;
//! - that identity can do nothing else that matters: no Secrets, no node spec or labels,
//!   no ConfigMaps outside the watched namespace, no writes to ConfigMaps, no other Lease;
//! - a maintenance manager who may only write ConfigMaps in the watched namespace cannot
//!   reach a node outside the instance's `--node-selector`, nor use another namespace.
//!
//! The manifests are read from `deploy/base/kustomization.yaml`'s `resources:` and applied
//! as they are (the base is plain YAML, so this is what `kubectl kustomize` outputs).

use std::path::PathBuf;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Secret, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::json;

use kumaco::conditions::UNDER_MAINTENANCE;
use kumaco::notify::record::Record;
use testkit::files::{read, repo};
use testkit::kumaco::{KumacoProcess, Pod, StartOptions};
use testkit::manifests::{self, ApplyOptions};
use testkit::nodes::{condition, create_node, has_status, managers, wait_for_condition};
use testkit::receiver::{Answer, Receiver};
use testkit::time::{poll_for, poll_until};
use testkit::{ApiServer, Scope, client_from_kubeconfig};

/// kumaco's namespace in the base manifests.
const NS: &str = "kumaco";
const OTHER_NS: &str = "not-watched";
const POD_NAME: &str = "kumaco-rbac-0";
/// The notifications' record of the base's instance (Lease `kumaco`).
const RECORD: &str = "kumaco-notified";
/// The field manager of the base's instance.
const MANAGER: &str = "kumaco/kumaco/kumaco";
const SOON: Duration = Duration::from_secs(30);

#[tokio::test]
async fn base_rbac_is_enough_for_kumaco_and_no_more() {
    let server = ApiServer::shared();
    let admin = server.client().await.expect("admin client");
    for obj in base_manifests() {
        apply(&admin, &obj).await;
    }
    create_namespace(&admin, OTHER_NS).await;

    // The token a pod of the Deployment would get (the API server has no
    // ServiceAccount admission here, so the ServiceAccount comes from the manifests).
    let token = Api::<ServiceAccount>::namespaced(admin.clone(), NS)
        .create_token_request(
            "kumaco",
            &PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("TokenRequest for the kumaco ServiceAccount")
        .status
        .expect("a token")
        .token
        .expect("a token");
    let kubeconfig = token_kubeconfig(server, &token);
    let sa = client_from_kubeconfig(&kubeconfig)
        .await
        .expect("SA client");

    // The maintenance manager: may write ConfigMaps in the watched namespace, nothing else.
    let alice_kubeconfig = server.kubeconfig_for("alice", &[]).expect("alice");
    let alice = client_from_kubeconfig(&alice_kubeconfig).await.unwrap();
    grant_window_editor(&admin, "alice").await;

    let scope = Scope::new("rbac");
    let outside = Scope::new("rbac-outside");
    let inside_node = create_node(&admin, &scope, "in", &[], &[]).await.unwrap();
    let outside_node = create_node(&admin, &outside, "out", &[], &[])
        .await
        .unwrap();
    let inside_name = inside_node.metadata.name.clone().unwrap();
    let outside_name = outside_node.metadata.name.clone().unwrap();

    // (a) kumaco as the ServiceAccount, with leader election, as the Deployment runs it,
    // and a notification sink.
    let receiver = Receiver::start(Answer::Status(202)).await.unwrap();
    let sinks = server.dir().join("rbac-sinks.yaml");
    std::fs::write(
        &sinks,
        format!(
            "sinks:\n  - name: events\n    type: cloudevents\n    url: {}/events\n",
            receiver.url()
        ),
    )
    .unwrap();
    let node_selector = format!("--node-selector={}", scope.selector());
    let with_sink = format!("--notify-config={}", sinks.display());
    let mut kumaco = start_as_service_account(
        server,
        &kubeconfig,
        &[&node_selector, "--resync-interval=1s", &with_sink],
    )
    .await;

    // Alice declares a window selecting every node; it started a minute ago.
    let start = (Timestamp::now() - SignedDuration::from_secs(60)).to_string();
    let window: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": "everything", "labels": { "kured.dev/maintenance-window": "" } },
        "data": { "startTime": start, "duration": "1h", "nodeSelector": "" },
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(alice.clone(), NS)
        .create(&PostParams::default(), &window)
        .await
        .expect("alice may create windows in the watched namespace");

    wait_for_condition(&admin, &inside_name, UNDER_MAINTENANCE, SOON, |c| {
        has_status(c, Some("True"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nkumaco log:\n{}", kumaco.log_tail(30)));

    let lease = poll_for("kumaco's Lease", SOON, || async {
        let lease = Api::<Lease>::namespaced(admin.clone(), NS)
            .get_opt("kumaco")
            .await
            .ok()??;
        let holder = lease.spec.as_ref()?.holder_identity.clone()?;
        (holder == POD_NAME).then_some(lease)
    })
    .await;
    assert!(lease.spec.unwrap().renew_time.is_some());

    // Events on the window: kumaco may create them in the watched namespace.
    poll_for("a WindowLoaded event", SOON, || async {
        let events = Api::<Event>::namespaced(admin.clone(), NS)
            .list(&ListParams::default().fields("regarding.name=everything"))
            .await
            .ok()?;
        events
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("WindowLoaded"))
    })
    .await;

    // (c) The window selects everything, but kumaco is confined to its scope: a few
    // passes later the outside node still has nothing from kumaco.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let outside_now = Api::<Node>::all(admin.clone())
        .get(&outside_name)
        .await
        .unwrap();
    assert!(
        condition(&outside_now, UNDER_MAINTENANCE).is_none(),
        "kumaco wrote to {outside_name}, outside its --node-selector: {:?}",
        outside_now.status
    );
    let managers = managers(&outside_now);
    assert!(!managers.contains(&"kumaco"), "managers: {managers:?}");

    // The notifications' record, written by the leader as its field manager.
    let leases = Api::<Lease>::namespaced(admin.clone(), NS);
    let record = poll_for("the notifications' record", SOON, || async {
        let lease = leases.get_opt(RECORD).await.ok()??;
        Record::of(&lease)
            .sinks
            .contains_key("events")
            .then_some(lease)
    })
    .await;
    let writers: Vec<String> = (record.metadata.managed_fields.iter().flatten())
        .filter_map(|f| f.manager.clone())
        .collect();
    assert_eq!(writers, [MANAGER], "the record's writers");

    let log = std::fs::read_to_string(kumaco.log_path()).unwrap_or_default();
    assert!(
        !log.contains("forbidden") && !log.contains("Forbidden"),
        "kumaco hit a permission error with the base RBAC:\n{}",
        kumaco.log_tail(30)
    );

    // (b) What the ServiceAccount must not do.
    let secrets = Api::<Secret>::namespaced(sa.clone(), NS);
    forbidden("list secrets", secrets.list(&ListParams::default()).await);
    forbidden("get a secret", secrets.get("anything").await);
    forbidden(
        "list secrets cluster-wide",
        Api::<Secret>::all(sa.clone())
            .list(&ListParams::default())
            .await,
    );
    let nodes = Api::<Node>::all(sa.clone());
    forbidden(
        "patch node labels",
        nodes
            .patch(
                &inside_name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "metadata": { "labels": { "evil": "yes" } } })),
            )
            .await,
    );
    forbidden(
        "cordon a node (spec)",
        nodes
            .patch(
                &inside_name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "unschedulable": true } })),
            )
            .await,
    );
    forbidden(
        "delete a node",
        nodes.delete(&inside_name, &Default::default()).await,
    );
    forbidden(
        "get configmaps in another namespace",
        Api::<ConfigMap>::namespaced(sa.clone(), OTHER_NS)
            .list(&ListParams::default())
            .await,
    );
    forbidden(
        "list configmaps cluster-wide",
        Api::<ConfigMap>::all(sa.clone())
            .list(&ListParams::default())
            .await,
    );
    let own_cms = Api::<ConfigMap>::namespaced(sa.clone(), NS);
    forbidden(
        "create a configmap",
        own_cms.create(&PostParams::default(), &window).await,
    );
    forbidden(
        "edit a window",
        own_cms
            .patch(
                "everything",
                &PatchParams::default(),
                &Patch::Merge(json!({ "data": { "duration": "9h" } })),
            )
            .await,
    );
    // Another instance's Lease, by name, anywhere: read (is that instance running?),
    // never written.
    match Api::<Lease>::namespaced(sa.clone(), OTHER_NS)
        .get_opt("another-instance")
        .await
    {
        Ok(None) => {}
        other => panic!("reading another instance's Lease: expected 404, got {other:?}"),
    }
    let mut someone_elses: Lease = serde_json::from_value(json!({
        "metadata": { "name": "someone-else", "namespace": NS },
        "spec": { "holderIdentity": "them" },
    }))
    .unwrap();
    forbidden(
        "update another lease",
        Api::<Lease>::namespaced(sa.clone(), NS)
            .replace("someone-else", &PostParams::default(), &someone_elses)
            .await,
    );
    someone_elses.metadata.namespace = Some(OTHER_NS.into());
    forbidden(
        "create a lease in another namespace",
        Api::<Lease>::namespaced(sa.clone(), OTHER_NS)
            .create(&PostParams::default(), &someone_elses)
            .await,
    );
    forbidden(
        "delete another lease",
        Api::<Lease>::namespaced(sa.clone(), NS)
            .delete("someone-else", &Default::default())
            .await,
    );
    forbidden(
        "list leases",
        Api::<Lease>::namespaced(sa.clone(), NS)
            .list(&ListParams::default())
            .await,
    );
    // Its own Lease by name, as the standby's watch asks for it: allowed.
    Api::<Lease>::namespaced(sa.clone(), NS)
        .list(&ListParams::default().fields("metadata.name=kumaco"))
        .await
        .expect("listing its own Lease by name (the standby's watch) is allowed");
    let event: Event = serde_json::from_value(json!({
        "metadata": { "name": "probe" },
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "kumaco",
        "reportingInstance": POD_NAME,
        "action": "Probe",
        "reason": "Probe",
        "type": "Normal",
    }))
    .unwrap();
    forbidden(
        "post events in another namespace",
        Api::<Event>::namespaced(sa.clone(), OTHER_NS)
            .create(&PostParams::default(), &event)
            .await,
    );

    // Restarted without a sink, the leader deletes the record its instance wrote.
    let stopped = kumaco.terminate(SOON).await.unwrap();
    assert!(stopped.success(), "kumaco exited {stopped}");
    let kumaco = start_as_service_account(
        server,
        &kubeconfig,
        &[&node_selector, "--resync-interval=1s"],
    )
    .await;
    poll_until(
        "the record deleted by a leader without sinks",
        SOON,
        || async { matches!(leases.get_opt(RECORD).await, Ok(None)) },
    )
    .await;
    let log = std::fs::read_to_string(kumaco.log_path()).unwrap_or_default();
    assert!(
        log.contains("notifications: no sink, the record deleted")
            && !log.contains("forbidden")
            && !log.contains("Forbidden"),
        "kumaco without a sink, with the base RBAC:\n{}",
        kumaco.log_tail(30)
    );

    // (c) Alice: windows in the watched namespace only.
    forbidden(
        "alice creates a window in another namespace",
        Api::<ConfigMap>::namespaced(alice.clone(), OTHER_NS)
            .create(&PostParams::default(), &window)
            .await,
    );
    forbidden(
        "alice patches node status",
        Api::<Node>::all(alice.clone())
            .patch_status(
                &outside_name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "conditions": [] } })),
            )
            .await,
    );
}

/// kumaco as the base's Deployment runs it: as its ServiceAccount (`kubeconfig`), leading
/// as a Pod of namespace `kumaco`, with `args`.
async fn start_as_service_account(
    server: &ApiServer,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> KumacoProcess {
    KumacoProcess::start_with(
        env!("CARGO_BIN_EXE_kumaco"),
        server,
        args,
        &StartOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            leader: Some(Pod {
                name: POD_NAME.into(),
                namespace: NS.into(),
            }),
            healthy_is_enough: false,
            ..StartOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Passes when the call was refused by authorization (403), with what was attempted in
/// the failure message otherwise.
fn forbidden<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({ "metadata": { "name": name } })).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

/// The Role a cluster admin gives a maintenance manager: window ConfigMaps in kumaco's
/// watched namespace (docs/install.md shows the same).
async fn grant_window_editor(client: &kube::Client, user: &str) {
    let objects = [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": { "name": "maintenance-manager", "namespace": NS },
            "rules": [{
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": "maintenance-manager", "namespace": NS },
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "maintenance-manager",
            },
            "subjects": [{
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "User",
                "name": user,
            }],
        }),
    ];
    for obj in objects {
        apply(client, &serde_json::from_value(obj).unwrap()).await;
    }
}

/// Server-side apply with strict field validation, as `kubectl apply --server-side` does.
async fn apply(client: &kube::Client, obj: &DynamicObject) {
    let options = ApplyOptions {
        field_manager: "kumaco-deploy-test",
        dry_run: false,
        default_namespace: None,
    };
    manifests::apply(client, obj, &options)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
}

/// A kubeconfig for the API server with a bearer token and no client certificate.
fn token_kubeconfig(server: &ApiServer, token: &str) -> PathBuf {
    let admin = kube::config::Kubeconfig::read_from(server.kubeconfig()).expect("admin kubeconfig");
    let cluster = admin.clusters[0]
        .cluster
        .clone()
        .expect("the admin kubeconfig names its cluster");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "test", "cluster": {
            "server": server.url(),
            "certificate-authority-data": cluster.certificate_authority_data,
            "certificate-authority": cluster.certificate_authority,
        }}],
        "users": [{ "name": "kumaco", "user": { "token": token } }],
        "contexts": [{ "name": "kumaco", "context": { "cluster": "test", "user": "kumaco" } }],
        "current-context": "kumaco",
    });
    // JSON is YAML: any kubeconfig reader takes it.
    let path = server.dir().join("kumaco-sa.kubeconfig");
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    path
}

/// The base as `kubectl kustomize deploy/base` outputs it: every document of every file
/// under `resources:`, in order. The base has no generators or patches (its
/// kustomization.yaml says why), so nothing else changes them.
fn base_manifests() -> Vec<DynamicObject> {
    #[derive(Deserialize)]
    struct Kustomization {
        resources: Vec<String>,
    }
    let dir = repo().join("deploy/base");
    let kustomization: Kustomization =
        serde_saphyr::from_str(&read(dir.join("kustomization.yaml")))
            .expect("parsing kustomization.yaml");
    kustomization
        .resources
        .iter()
        .flat_map(|file| manifests::read(&dir.join(file)).unwrap_or_else(|e| panic!("{e:#}")))
        .collect()
}
