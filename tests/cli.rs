//! The kumaco command line against a real API server: how every subcommand finds it (as
//! kubectl does: `--kubeconfig`, a `KUBECONFIG` list merged, `--context`,
//! `~/.kube/config`), what it says when it cannot, and `kumaco run`'s text logs in a
//! file, a pipe and a terminal.
//!
//! The kubeconfigs are made from the test API server's admin one, plus a cluster
//! `nowhere` at a port where nothing listens: a client that picks the wrong entry fails.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;
use serde_json::{Value, json};

use testkit::ApiServer;
use testkit::cluster::TestCluster;
use testkit::process::Owned;

const NOWHERE: &str = "https://127.0.0.1:1";

/// A test's own directory of kubeconfigs (and a home without any).
fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kumaco-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("home")).unwrap();
    dir
}

/// The admin kubeconfig's cluster and user, as JSON values.
fn admin_parts(server: &ApiServer) -> (Value, Value) {
    let admin = Kubeconfig::read_from(server.kubeconfig()).expect("admin kubeconfig");
    let cluster = serde_json::to_value(admin.clusters[0].cluster.as_ref().unwrap()).unwrap();
    let user = serde_json::to_value(admin.auth_infos[0].auth_info.as_ref().unwrap()).unwrap();
    (cluster, user)
}

/// Clusters `testenv` (the real one) and `nowhere`, user `admin`, contexts `admin` and
/// `nowhere`, with `current` as the current context if given.
fn credentials(server: &ApiServer, current: Option<&str>) -> Value {
    let (cluster, user) = admin_parts(server);
    let mut config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            { "name": "testenv", "cluster": cluster },
            { "name": "nowhere", "cluster": { "server": NOWHERE, "insecure-skip-tls-verify": true } },
        ],
        "users": [{ "name": "admin", "user": user }],
        "contexts": [
            { "name": "admin", "context": { "cluster": "testenv", "user": "admin" } },
            { "name": "nowhere", "context": { "cluster": "nowhere", "user": "admin" } },
        ],
    });
    if let Some(c) = current {
        config["current-context"] = json!(c);
    }
    config
}

fn write(path: &Path, config: &Value) -> PathBuf {
    // JSON is YAML: any kubeconfig reader takes it.
    std::fs::write(path, serde_json::to_vec_pretty(config).unwrap()).unwrap();
    path.to_path_buf()
}

/// The environment a kumaco process gets: no developer's KUBECONFIG, cluster or colour
/// preference leaks in, and HOME is the test's (without a kubeconfig unless it writes one).
fn command(home: &Path, kubeconfig_env: Option<&OsString>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kumaco"));
    cmd.env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NO_COLOR")
        .env("HOME", home);
    if let Some(value) = kubeconfig_env {
        cmd.env("KUBECONFIG", value);
    }
    cmd
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(mut cmd: Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("running kumaco");
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// `kumaco status --namespace NS --no-nodes ARGS...`.
fn status(home: &Path, kubeconfig_env: Option<&OsString>, ns: &str, args: &[&str]) -> Run {
    let mut cmd = command(home, kubeconfig_env);
    cmd.args(["status", "--no-nodes", "--namespace", ns])
        .args(args);
    run(cmd)
}

async fn create_window(client: &kube::Client, ns: &str, name: &str) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kured.dev/maintenance-window": "" } },
        "data": { "startTime": "0 2 * * 6", "duration": "3h", "nodeSelector": "" },
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("creating window {name}: {e}"));
}

fn assert_shows_window(run: &Run, name: &str) {
    assert_eq!(
        run.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout.lines().any(|l| l.contains(&format!(" {name} "))),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn a_kubeconfig_list_is_merged_as_kubectl_merges_it() {
    let server = ApiServer::shared();
    let cluster = TestCluster::new(server, "cli-merge").await;
    create_window(&cluster.client, &cluster.ns, "merged").await;
    let dir = dir("merge");
    let home = dir.join("home");
    // The cluster and the user in one file, the current context in another (as a tool
    // that switches contexts writes it), which also defines a context `admin` of its own
    // that points nowhere: the first file to define a name wins, so it is ignored.
    let creds = write(&dir.join("creds.yaml"), &credentials(server, None));
    let current = write(
        &dir.join("current.yaml"),
        &json!({
            "contexts": [{ "name": "admin", "context": { "cluster": "nowhere", "user": "admin" } }],
            "current-context": "admin",
        }),
    );
    let missing = dir.join("missing.yaml");

    // A missing file in the list is skipped, as kubectl skips it.
    let list = std::env::join_paths([&missing, &creds, &current]).unwrap();
    assert_shows_window(&status(&home, Some(&list), &cluster.ns, &[]), "merged");

    // The other order: current.yaml's `admin` (nowhere) comes first and wins.
    let list = std::env::join_paths([&current, &creds]).unwrap();
    let r = status(&home, Some(&list), &cluster.ns, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.starts_with(&format!(
            "kumaco status: cannot list ConfigMaps in namespace {} at {NOWHERE}: ",
            cluster.ns
        )),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("Connection refused"), "{}", r.stderr);
    println!(
        "$ KUBECONFIG=current.yaml:creds.yaml kumaco status ...\n{}",
        r.stderr
    );

    // Only missing files: a sentence naming them.
    let list = std::env::join_paths([&missing, &dir.join("gone.yaml")]).unwrap();
    let r = status(&home, Some(&list), &cluster.ns, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "kumaco status: KUBECONFIG={}:{}: none of these files exists\n",
            missing.display(),
            dir.join("gone.yaml").display()
        )
    );

    // --kubeconfig wins over KUBECONFIG, and reads its file alone.
    let list = std::env::join_paths([&current, &creds]).unwrap();
    let flag = write(&dir.join("flag.yaml"), &credentials(server, Some("admin")));
    let flag_arg = flag.display().to_string();
    assert_shows_window(
        &status(
            &home,
            Some(&list),
            &cluster.ns,
            &["--kubeconfig", &flag_arg],
        ),
        "merged",
    );
}

#[tokio::test]
async fn context_picks_another_context_in_every_subcommand() {
    let server = ApiServer::shared();
    let cluster = TestCluster::new(server, "cli-context").await;
    create_window(&cluster.client, &cluster.ns, "ctx").await;
    let dir = dir("context");
    let home = dir.join("home");
    // The current context points nowhere; --context admin reaches the server.
    let file = write(
        &dir.join("config.yaml"),
        &credentials(server, Some("nowhere")),
    );
    let file_arg = file.display().to_string();

    let r = status(&home, None, &cluster.ns, &["--kubeconfig", &file_arg]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(" at {NOWHERE}: ")),
        "{}",
        r.stderr
    );
    let ctx = ["--kubeconfig", &file_arg, "--context", "admin"];
    assert_shows_window(&status(&home, None, &cluster.ns, &ctx), "ctx");

    // In a merged KUBECONFIG too.
    let list = OsString::from(&file);
    assert_shows_window(
        &status(&home, Some(&list), &cluster.ns, &["--context", "admin"]),
        "ctx",
    );

    // A context that does not exist: which ones do.
    let r = status(
        &home,
        None,
        &cluster.ns,
        &["--kubeconfig", &file_arg, "--context", "prod"],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "kumaco status: --kubeconfig {file_arg} has no context \"prod\"; its contexts: admin, nowhere\n"
        )
    );

    // plan, reading the nodes from the cluster.
    let windows = dir.join("windows.yaml");
    std::fs::write(
        &windows,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: w\n  labels: {kured.dev/maintenance-window: \"\"}\n\
         data: {startTime: \"@daily\", duration: \"1h\", nodeSelector: \"\"}\n",
    )
    .unwrap();
    let mut cmd = command(&home, None);
    cmd.args(["plan", "--windows"])
        .arg(&windows)
        .args(["--for", "1d", "--node-selector", &cluster.scope.selector()])
        .args(ctx);
    let r = run(cmd);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.starts_with("START "), "{}", r.stdout);

    // run: it logs which server, from where, in which context, and gets ready.
    let log = run_until_ready(command(&home, None), &cluster, &ctx, Stderr::Pipe);
    println!("{log}");
    assert!(
        log.contains(&format!(
            "using the API server server={} from=--kubeconfig {file_arg} context=admin",
            server.url()
        )),
        "{log}"
    );
}

#[tokio::test]
async fn without_flag_or_variable_the_home_kubeconfig_is_read_by_every_subcommand() {
    let server = ApiServer::shared();
    let cluster = TestCluster::new(server, "cli-home").await;
    create_window(&cluster.client, &cluster.ns, "home").await;
    let dir = dir("home");
    let home = dir.join("home");

    // No kubeconfig anywhere, not in a cluster: what was tried.
    let r = status(&home, None, &cluster.ns, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "kumaco status: no API server configured: --kubeconfig is not given, KUBECONFIG is \
             not set, kumaco is not running in a cluster (KUBERNETES_SERVICE_HOST is not set), \
             and {}/.kube/config does not exist\n",
            home.display()
        )
    );
    let mut cmd = command(&home, None);
    cmd.args(["run", "--leader-elect=false"]);
    let r = run(cmd);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .starts_with("kumaco run: no API server configured: --kubeconfig is not given"),
        "{}",
        r.stderr
    );
    // A missing --kubeconfig file is named.
    let mut cmd = command(&home, None);
    cmd.args(["run", "--kubeconfig", "/nonexistent/kubeconfig"]);
    let r = run(cmd);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "kumaco run: cannot read kubeconfig /nonexistent/kubeconfig (--kubeconfig): No such file \
         or directory (os error 2)\n"
    );

    std::fs::create_dir_all(home.join(".kube")).unwrap();
    write(
        &home.join(".kube/config"),
        &credentials(server, Some("admin")),
    );
    assert_shows_window(&status(&home, None, &cluster.ns, &[]), "home");
    let log = run_until_ready(command(&home, None), &cluster, &[], Stderr::Pipe);
    let from = format!("from={}/.kube/config", home.display());
    assert!(log.contains(&from), "{log}");
}

/// Where `kumaco run`'s stderr goes.
#[derive(Clone, Copy, PartialEq)]
enum Stderr {
    /// A pipe to this test.
    Pipe,
    /// A terminal: `script` runs kumaco on a pseudo-terminal.
    Terminal,
}

/// Starts `kumaco run` (text logs, `--exit-on-config-change`) confined to `cluster`, reads
/// its log until it is ready, then creates a window so that it exits by itself; returns
/// everything it logged.
fn run_until_ready(
    mut cmd: Command,
    cluster: &TestCluster,
    extra: &[&str],
    output: Stderr,
) -> String {
    let mut args: Vec<String> = [
        "run",
        "--leader-elect=false",
        "--log-format=text",
        "--exit-on-config-change",
        "--metrics-address=127.0.0.1:0",
        "--health-address=127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(cluster.scope_args());
    args.extend(extra.iter().map(|s| s.to_string()));
    cmd.env("RUST_LOG", "info");
    let mut child = match output {
        Stderr::Pipe => {
            cmd.args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            Owned::spawn("kumaco run", cmd, None).expect("starting kumaco run")
        }
        Stderr::Terminal => {
            // `script -qec CMD /dev/null`: CMD on a pseudo-terminal, its output on ours.
            let line = std::iter::once(env!("CARGO_BIN_EXE_kumaco").to_string())
                .chain(args)
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(" ");
            let program = cmd.get_program().to_owned();
            assert_eq!(program, env!("CARGO_BIN_EXE_kumaco"));
            let mut script = Command::new("script");
            script.args(["-qec", &line, "/dev/null"]);
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => script.env(k, v),
                    None => script.env_remove(k),
                };
            }
            script
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            Owned::spawn("script", script, None).expect("starting script")
        }
    };
    let reader: Box<dyn Read + Send> = match output {
        Stderr::Pipe => Box::new(child.take_stderr().unwrap()),
        Stderr::Terminal => Box::new(child.take_stdout().unwrap()),
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut ready = false;
    while std::time::Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                log.push_str(&line);
                log.push('\n');
                if line.trim_end().ends_with("ready") && !ready {
                    ready = true;
                    // A new window changes the configuration: kumaco exits by itself. This
                    // thread blocks the test's runtime, so the write goes through a
                    // runtime and a client of its own.
                    let ns = cluster.ns.clone();
                    std::thread::spawn(move || {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .unwrap()
                            .block_on(async {
                                let client = ApiServer::shared().client().await.unwrap();
                                create_window(&client, &ns, "exit-now").await
                            })
                    });
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Its output has ended (or the deadline passed): it exits now, or is stuck (and is
    // killed as `child` drops).
    if child
        .exit_within_blocking(Duration::from_secs(10))
        .is_none()
    {
        panic!("kumaco run did not exit (ready: {ready}); its log:\n{log}");
    }
    assert!(ready, "kumaco run never got ready; its log:\n{log}");
    log
}

fn script_available() -> bool {
    Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn text_logs_are_coloured_only_on_a_terminal_and_never_with_no_color() {
    let server = ApiServer::shared();
    let cluster = TestCluster::new(server, "cli-colour").await;
    let dir = dir("colour");
    let home = dir.join("home");
    let kubeconfig = server.kubeconfig().display().to_string();
    let flags = ["--kubeconfig", kubeconfig.as_str()];

    // A pipe (and so a file, a container log): no escape codes.
    let log = run_until_ready(command(&home, None), &cluster, &flags, Stderr::Pipe);
    assert!(log.contains(" INFO "), "{log}");
    assert!(!log.contains('\x1b'), "escape codes in a pipe:\n{log:?}");

    // A missing prerequisite is a loud failure, never a silent skip.
    assert!(
        script_available(),
        "`script` (util-linux) is needed to run kumaco on a pseudo-terminal: apt-get install bsdutils"
    );
    // Control: on a terminal, colour (so the assertions above can fail).
    let cluster = TestCluster::new(server, "cli-colour-tty").await;
    let log = run_until_ready(command(&home, None), &cluster, &flags, Stderr::Terminal);
    assert!(log.contains("\x1b["), "no colour on a terminal:\n{log:?}");
    // NO_COLOR, any non-empty value: none, even on a terminal.
    let cluster = TestCluster::new(server, "cli-colour-no-color").await;
    let mut cmd = command(&home, None);
    cmd.env("NO_COLOR", "1");
    let log = run_until_ready(cmd, &cluster, &flags, Stderr::Terminal);
    assert!(log.contains(" INFO "), "{log}");
    assert!(
        !log.contains('\x1b'),
        "escape codes with NO_COLOR=1:\n{log:?}"
    );
}
