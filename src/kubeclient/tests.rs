use super::*;

fn args(kubeconfig: Option<&Path>, context: Option<&str>) -> ClientArgs {
    ClientArgs {
        kubeconfig: kubeconfig.map(Path::to_path_buf),
        context: context.map(str::to_string),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kumaco-kubeclient-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Two clusters, two users, two contexts; `current` names the current context.
fn kubeconfig(current: Option<&str>) -> String {
    let mut text = String::from(
        "apiVersion: v1\nkind: Config\n\
         clusters:\n\
         - {name: one, cluster: {server: 'https://one.example:6443'}}\n\
         - {name: two, cluster: {server: 'https://two.example:6443'}}\n\
         users:\n- {name: u, user: {token: t}}\n\
         contexts:\n\
         - {name: a, context: {cluster: one, user: u}}\n\
         - {name: b, context: {cluster: two, user: u}}\n",
    );
    if let Some(c) = current {
        text.push_str(&format!("current-context: {c}\n"));
    }
    text
}

/// The server chosen and where from, in a "pod" whose service account points at
/// `https://in-cluster.example` (used only when `env.in_cluster`).
async fn server(args: &ClientArgs, env: &Environment) -> Result<String, String> {
    let pod = || {
        Ok(kube::Config::new(
            "https://in-cluster.example".parse().unwrap(),
        ))
    };
    config(args, env, pod)
        .await
        .map(|(c, from, _)| format!("{} from {from}", c.cluster_url))
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn the_flag_wins_and_context_picks_another_context() {
    let dir = tempdir("flag");
    let file = write(&dir, "config", &kubeconfig(Some("a")));
    let env = Environment {
        kubeconfig: Some(OsString::from("/nowhere")),
        in_cluster: true,
        home_kubeconfig: None,
    };
    let shown = file.display();
    assert_eq!(
        server(&args(Some(&file), None), &env).await.unwrap(),
        format!("https://one.example:6443/ from --kubeconfig {shown}")
    );
    assert_eq!(
        server(&args(Some(&file), Some("b")), &env).await.unwrap(),
        format!("https://two.example:6443/ from --kubeconfig {shown}")
    );
    let err = server(&args(Some(&file), Some("c")), &env)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!("--kubeconfig {shown} has no context \"c\"; its contexts: a, b")
    );
    let missing = dir.join("missing");
    let err = server(&args(Some(&missing), None), &env).await.unwrap_err();
    assert_eq!(
        err,
        format!(
            "cannot read kubeconfig {} (--kubeconfig): No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[tokio::test]
async fn kubeconfig_lists_merge_first_wins_and_skip_missing_files() {
    let dir = tempdir("env");
    // The first file defines the clusters and contexts but no current context; the
    // second sets the current context and redefines context `a` (ignored: the first
    // file to define a name wins).
    let creds = write(&dir, "creds", &kubeconfig(None));
    let current = write(
        &dir,
        "current",
        "contexts:\n- {name: a, context: {cluster: two, user: u}}\ncurrent-context: a\n",
    );
    let missing = dir.join("missing");
    let list = std::env::join_paths([&missing, &creds, &current]).unwrap();
    let env = Environment {
        kubeconfig: Some(list.clone()),
        in_cluster: true,
        home_kubeconfig: None,
    };
    let from = format!("KUBECONFIG={}", list.to_string_lossy());
    assert_eq!(
        server(&args(None, None), &env).await.unwrap(),
        format!("https://one.example:6443/ from {from}")
    );
    // The other order: the second file's `a` now comes first.
    let env = Environment {
        kubeconfig: Some(std::env::join_paths([&current, &creds]).unwrap()),
        ..env
    };
    assert!(
        server(&args(None, None), &env)
            .await
            .unwrap()
            .starts_with("https://two.example:6443/ from KUBECONFIG="),
    );
    // Only missing files: an error naming them.
    let env = Environment {
        kubeconfig: Some(std::env::join_paths([&missing, &dir.join("gone")]).unwrap()),
        ..env
    };
    assert_eq!(
        server(&args(None, None), &env).await.unwrap_err(),
        format!(
            "KUBECONFIG={}:{}: none of these files exists",
            missing.display(),
            dir.join("gone").display()
        )
    );
}

#[tokio::test]
async fn without_flag_or_variable_in_cluster_then_home() {
    let dir = tempdir("home");
    let home = write(&dir, "config", &kubeconfig(Some("b")));
    // Not in a cluster: the home kubeconfig.
    let env = Environment {
        kubeconfig: None,
        in_cluster: false,
        home_kubeconfig: Some(home.clone()),
    };
    assert_eq!(
        server(&args(None, None), &env).await.unwrap(),
        format!("https://two.example:6443/ from {}", home.display())
    );
    // Nothing at all: what was tried.
    let env = Environment {
        home_kubeconfig: Some(dir.join("none")),
        ..env
    };
    assert_eq!(
        server(&args(None, None), &env).await.unwrap_err(),
        format!(
            "no API server configured: --kubeconfig is not given, KUBECONFIG is not set, \
             kumaco is not running in a cluster (KUBERNETES_SERVICE_HOST is not set), and {} \
             does not exist",
            dir.join("none").display()
        )
    );
    // "In a cluster" without a service account (not a real pod): that error, and the
    // home kubeconfig that was tried too.
    let env = Environment {
        in_cluster: true,
        ..env
    };
    let no_account = || Err("no token file".to_string());
    let err = config(&args(None, None), &env, no_account)
        .await
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        format!(
            "running in a cluster (KUBERNETES_SERVICE_HOST is set) but its configuration is \
             unusable: no token file; and {} does not exist",
            dir.join("none").display()
        )
    );
    // In a pod, the in-cluster configuration wins over a kubeconfig in the image's
    // home; --context means the kubeconfig.
    let env = Environment {
        home_kubeconfig: Some(home.clone()),
        ..env
    };
    assert_eq!(
        server(&args(None, None), &env).await.unwrap(),
        "https://in-cluster.example/ from the in-cluster configuration"
    );
    assert_eq!(
        server(&args(None, Some("a")), &env).await.unwrap(),
        format!("https://one.example:6443/ from {}", home.display())
    );
    // A pod whose service account is unusable falls back to the home kubeconfig, as
    // controller-runtime does.
    let from = config(&args(None, None), &env, no_account)
        .await
        .map(|(_, from, _)| from)
        .unwrap();
    assert_eq!(from, Source::Home(home.clone()));
}

#[tokio::test]
async fn broken_kubeconfigs_are_named_with_line_and_column() {
    let dir = tempdir("broken");
    let bad = write(&dir, "bad", "clusters: [\n");
    let err = server(&args(Some(&bad), None), &Environment::default())
        .await
        .unwrap_err();
    assert!(
        err.starts_with(&format!("{}:1:", bad.display())) && err.contains(": not a kubeconfig: "),
        "{err}"
    );
    assert!(!err.contains('\n'), "one line: {err}");
    let no_current = write(&dir, "nocurrent", &kubeconfig(None));
    let err = server(&args(Some(&no_current), None), &Environment::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!(
            "--kubeconfig {} sets no current-context: choose one with --context (its contexts: a, b)",
            no_current.display()
        )
    );
    let dangling = write(
        &dir,
        "dangling",
        "contexts:\n- {name: x, context: {cluster: gone, user: u}}\ncurrent-context: x\n",
    );
    let err = server(&args(Some(&dangling), None), &Environment::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        format!(
            "--kubeconfig {}: context \"x\" names cluster \"gone\", which is not in it",
            dangling.display()
        )
    );
}

#[test]
fn api_refusals_read_as_the_server_says_them() {
    let status: kube::core::Status = serde_json::from_value(serde_json::json!({
        "status": "Failure",
        "message": "nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope",
        "reason": "Forbidden",
        "code": 403,
    }))
    .unwrap();
    let e = kube::Error::Api(Box::new(status));
    assert!(is_forbidden(&e));
    assert_eq!(
        describe(&e),
        "nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope (HTTP 403 Forbidden)"
    );
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    let e = kube::Error::ReadEvents(io);
    assert_eq!(describe(&e), "Error reading events stream: refused");
    assert_eq!(strip_type_prefix("HyperError: x: y"), "x: y");
    assert_eq!(strip_type_prefix("no API here: x"), "no API here: x");
}
