use super::*;
use clap::CommandFactory;

#[test]
fn cli_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn run_defaults() {
    let cli = Cli::try_parse_from(["kumaco", "run"]).unwrap();
    let Command::Run(args) = cli.command else {
        panic!("not run")
    };
    assert_eq!(
        args.window_args.window_selector,
        "kured.dev/maintenance-window"
    );
    assert_eq!(
        args.policy.max_in_progress, None,
        "the default (1) is applied with --in-progress"
    );
    assert!(args.leader_elect);
    assert_eq!(args.log_format, LogFormat::Text);
}

#[test]
fn leader_elect_can_be_turned_off_and_lists_repeat() {
    let cli = Cli::try_parse_from([
        "kumaco",
        "run",
        "--leader-elect=false",
        "--namespace=a",
        "--namespace=b",
        "--require-condition=kured.dev/RebootRequired",
        "--block-condition=x",
        "--block-condition=y",
    ])
    .unwrap();
    let Command::Run(args) = cli.command else {
        panic!("not run")
    };
    assert!(!args.leader_elect);
    assert_eq!(args.namespaces, ["a", "b"]);
    assert_eq!(args.policy.block_conditions, ["x", "y"]);
}

#[test]
fn every_api_subcommand_takes_kubeconfig_and_context() {
    for sub in [
        &["run"][..],
        &["status", "--namespace=ops"],
        &["plan", "--windows=w.yaml"],
        &["uninstall"],
        &["pause", "--lease-namespace=kumaco", "--reason=why"],
        &["resume", "--lease-namespace=kumaco"],
    ] {
        let mut argv = vec!["kumaco"];
        argv.extend_from_slice(sub);
        argv.extend(["--kubeconfig=k.yaml", "--context=other"]);
        let client = match Cli::try_parse_from(&argv).unwrap().command {
            Command::Run(a) => a.client,
            Command::Status(a) => a.client,
            Command::Plan(a) => a.client,
            Command::Uninstall(a) => a.client,
            Command::Pause(a) => a.instance.client,
            Command::Resume(a) => a.client,
            Command::Validate(_) => unreachable!(),
        };
        assert_eq!(client.kubeconfig, Some(PathBuf::from("k.yaml")), "{sub:?}");
        assert_eq!(client.context.as_deref(), Some("other"), "{sub:?}");
    }
    // A nodes file means no cluster: a context would be silently unused.
    let err = Cli::try_parse_from([
        "kumaco",
        "plan",
        "--windows=w.yaml",
        "--nodes=n.yaml",
        "--context=other",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("--context"), "{err}");
}

#[test]
fn version_names_the_bundled_tzdata() {
    let version = Cli::command().render_version();
    let tzdata = crate::schedule::bundled_tzdata_version().unwrap();
    assert_eq!(
        version,
        format!(
            "kumaco {} (bundled tzdata {tzdata})\n",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn tzdata_is_a_flag_of_every_subcommand() {
    let cli = Cli::try_parse_from(["kumaco", "validate", "--tzdata=system", "-"]).unwrap();
    assert_eq!(
        cli.command.window_args().unwrap().tzdata,
        TzdataSource::System
    );
    let cli = Cli::try_parse_from(["kumaco", "run"]).unwrap();
    assert_eq!(
        cli.command.window_args().unwrap().tzdata,
        TzdataSource::Bundled
    );
    let err = Cli::try_parse_from(["kumaco", "run", "--tzdata=host"]).unwrap_err();
    assert!(err.to_string().contains("bundled, system"), "{err}");
}

#[test]
fn as_a_kubectl_plugin_it_is_named_as_typed() {
    let cli = Cli::try_parse_argv(
        [
            "/home/me/.krew/bin/kubectl-kumaco",
            "status",
            "-n",
            "ops",
            "-o",
            "wide",
        ]
        .map(Into::into),
    )
    .unwrap();
    let Command::Status(args) = cli.command else {
        panic!("not status")
    };
    assert_eq!(args.namespaces, ["ops"]);
    assert_eq!(args.output, StatusOutput::Wide);
    let help = Cli::try_parse_argv(["kubectl-kumaco", "status", "--help"].map(Into::into))
        .unwrap_err()
        .to_string();
    assert!(help.contains("Usage: kubectl kumaco status"), "{help}");
    let help = Cli::try_parse_argv(["kumaco", "status", "--help"].map(Into::into))
        .unwrap_err()
        .to_string();
    assert!(help.contains("Usage: kumaco status"), "{help}");
}

#[test]
fn bad_log_format_is_rejected() {
    let err = Cli::try_parse_from(["kumaco", "run", "--log-format=xml"]).unwrap_err();
    assert!(err.to_string().contains("xml"), "{err}");
}

#[test]
fn a_notify_url_from_the_environment_never_shows_and_its_file_may_come_from_there() {
    let cli = Cli::command();
    let run = cli.find_subcommand("run").expect("run");
    let arg = |id: &str| {
        run.get_arguments()
            .find(|a| a.get_id() == id)
            .unwrap_or_else(|| panic!("no argument {id}"))
    };
    let url = arg("notify_urls");
    assert_eq!(
        url.get_env(),
        Some(std::ffi::OsStr::new("KUMACO_NOTIFY_URL"))
    );
    assert!(
        url.is_hide_env_values_set(),
        "`kumaco run --help` would show the URL, a secret, taken from KUMACO_NOTIFY_URL"
    );
    assert_eq!(
        arg("notify_url_file").get_env(),
        Some(std::ffi::OsStr::new("KUMACO_NOTIFY_URL_FILE"))
    );
}
