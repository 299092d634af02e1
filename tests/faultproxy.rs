//! testkit's fault proxy (`testkit::faultproxy`) against the real API server: what each
//! fault does to a kube client's requests through it, and `kumaco run` behind it landing
//! an edge that fell during each fault once the fault is lifted.
//!
//! Recovery times are printed as `PROXY_RECOVERY_MS <n> ...` lines for collection
//! (`cargo test --test faultproxy -- --nocapture 2>&1 | grep _MS`).
//!
//! The sleeps are observation periods ("still nothing after a second") and waits until a
//! chosen instant (an edge); everything else polls with a deadline.

use std::future::Future;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use jiff::SignedDuration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, WatchEvent, WatchParams};

use testkit::cluster::{Cluster, UNDER_MAINTENANCE};
use testkit::faultproxy::{Fault, FaultProxy, proxied, proxied_kubeconfig, upstream_of};
use testkit::kumaco::{KumacoProcess, SHORT_LEASE, StartOptions, metric};
use testkit::nodes::condition;
use testkit::time::{EDGE_BOUND, edge_in, poll_showing, until};
use testkit::{ApiServer, Scope, client_from_kubeconfig};

/// A request through a healthy proxy on a loaded 2-core machine.
const ANSWER: Duration = Duration::from_secs(10);
/// How long a request that must not be answered is watched.
const QUIET: Duration = Duration::from_secs(1);
/// As `tests/faults.rs`: a missed edge lands within 5 s of the API server's return
/// (kumaco's write retries back off to at most 4 s).
const RECOVERY_BOUND: Duration = Duration::from_secs(5);
/// kumaco gives up on a node write after 10 s (`WRITE_TIMEOUT` in the controller): a
/// write sent into a blackhole is retried only then.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Waits with no documented bound.
const SOON: Duration = Duration::from_secs(15);

/// The kumaco under test.
const KUMACO: &str = env!("CARGO_BIN_EXE_kumaco");

// ---------------------------------------------------------------------------------------
// The faults, seen by a kube client

#[tokio::test]
async fn none_forwards_tls_untouched() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let direct = server.client().await.unwrap();
    let via = client_via(server, &proxy, "none").await;
    let version = answered(via.apiserver_version())
        .await
        .expect("GET /version");
    assert_eq!(
        version.git_version,
        direct.apiserver_version().await.unwrap().git_version
    );
    let stats = proxy.stats();
    assert!(stats.connections >= 1, "{stats:?}");
    assert!(stats.bytes_up > 0 && stats.bytes_down > 0, "{stats:?}");
    assert_eq!(
        (stats.resets, stats.refused, stats.blackholed),
        (0, 0, 0),
        "{stats:?}"
    );
}

#[tokio::test]
async fn latency_delays_every_chunk_both_ways() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let via = client_via(server, &proxy, "latency").await;
    // A pooled connection first: the timed request is one chunk up and one down, not a
    // TLS handshake's several.
    answered(via.apiserver_version()).await.unwrap();
    let delay = Duration::from_millis(300);
    proxy.set(Fault::Latency(delay));
    let started = Instant::now();
    answered(via.apiserver_version()).await.unwrap();
    let took = started.elapsed();
    assert!(
        took >= 2 * delay,
        "a request and its answer each wait {delay:?}, the round trip took {took:?}"
    );
}

#[tokio::test]
async fn stall_holds_open_and_new_connections_and_lifting_it_resumes_them() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let pooled = client_via(server, &proxy, "stall-pooled").await;
    answered(pooled.apiserver_version()).await.unwrap();
    proxy.set(Fault::Stall);
    let on_open = tokio::spawn(async move { pooled.apiserver_version().await });
    let fresh = client_via(server, &proxy, "stall-fresh").await;
    let on_new = tokio::spawn(async move { fresh.apiserver_version().await });
    tokio::time::sleep(QUIET).await;
    assert!(!on_open.is_finished(), "a stalled open connection answered");
    assert!(!on_new.is_finished(), "a stalled new connection answered");

    proxy.set(Fault::None);
    for (what, request) in [("open", on_open), ("new", on_new)] {
        let answer = tokio::time::timeout(ANSWER, request)
            .await
            .unwrap_or_else(|_| panic!("the {what} connection did not resume"))
            .unwrap();
        answer.unwrap_or_else(|e| panic!("the {what} connection's request failed: {e}"));
    }
    assert_eq!(proxy.stats().resets, 0);
}

#[tokio::test]
async fn reset_mid_response_fails_requests_until_lifted() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let via = client_via(server, &proxy, "reset").await;
    answered(via.apiserver_version()).await.unwrap();
    let before = proxy.stats();
    proxy.set(Fault::ResetMidResponse);
    let failed = answered(via.apiserver_version()).await;
    assert!(failed.is_err(), "answered through a reset: {failed:?}");
    let after = proxy.stats();
    assert!(after.resets > before.resets, "{after:?}");
    // The request went through whole, and part of the answer came back.
    assert!(after.bytes_up > before.bytes_up, "{after:?}");
    assert!(after.bytes_down > before.bytes_down, "{after:?}");

    proxy.set(Fault::None);
    answered(via.apiserver_version())
        .await
        .expect("a request after the fault is lifted");
}

#[tokio::test]
async fn blackhole_silences_connections_for_good_and_new_ones_work_once_lifted() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let pooled = client_via(server, &proxy, "blackhole-pooled").await;
    answered(pooled.apiserver_version()).await.unwrap();
    proxy.set(Fault::Blackhole);
    let on_open = tokio::spawn(async move { pooled.apiserver_version().await });
    let fresh = client_via(server, &proxy, "blackhole-fresh").await;
    let on_new = tokio::spawn(async move { fresh.apiserver_version().await });
    tokio::time::sleep(QUIET).await;
    assert!(
        !on_open.is_finished(),
        "a blackholed open connection answered"
    );
    assert!(
        !on_new.is_finished(),
        "a blackholed new connection answered"
    );
    let stats = proxy.stats();
    assert!(stats.blackholed >= 2, "{stats:?}");
    assert_eq!(stats.resets, 0, "a blackhole resets nothing: {stats:?}");

    // Lifted: what it swallowed stays silent, new connections are answered.
    proxy.set(Fault::None);
    let later = client_via(server, &proxy, "blackhole-later").await;
    answered(later.apiserver_version())
        .await
        .expect("a new connection after the blackhole is lifted");
    tokio::time::sleep(QUIET).await;
    assert!(!on_open.is_finished(), "a swallowed connection came back");
    assert!(!on_new.is_finished(), "a swallowed connection came back");
    on_open.abort();
    on_new.abort();
}

#[tokio::test]
async fn partition_resets_open_connections_and_refuses_new_ones() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let watching = client_via(server, &proxy, "partition-watch").await;
    let namespaces = Api::<Namespace>::all(watching);
    // A watch from "0" starts with the namespaces that exist, so its first event proves
    // the connection is up before the partition.
    let mut watch = Box::pin(
        answered(namespaces.watch(&WatchParams::default(), "0"))
            .await
            .unwrap(),
    );
    let first = answered(watch.try_next()).await.unwrap();
    assert!(matches!(first, Some(WatchEvent::Added(_))), "{first:?}");
    let before = proxy.stats();

    proxy.set(Fault::Partition);
    let started = Instant::now();
    // The watch ends or fails at once (events already read and buffered may come first;
    // the time taken is checked below).
    while let Ok(Some(_)) = answered(watch.try_next()).await {}
    let fresh = client_via(server, &proxy, "partition-fresh").await;
    let refused = answered(fresh.apiserver_version()).await;
    assert!(
        refused.is_err(),
        "answered through a partition: {refused:?}"
    );
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "a partition is felt at once, not by a timeout: {took:?}"
    );
    let after = proxy.stats();
    assert!(after.resets > before.resets, "{after:?}");
    assert!(after.refused > before.refused, "{after:?}");

    proxy.set(Fault::None);
    answered(fresh.apiserver_version())
        .await
        .expect("a request after the partition is lifted");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_port_and_connections() {
    let server = ApiServer::shared();
    let proxy = proxy(server);
    let via = client_via(server, &proxy, "drop").await;
    answered(via.apiserver_version()).await.unwrap();
    proxy.set(Fault::Stall);
    let held = tokio::spawn(async move { via.apiserver_version().await });
    tokio::time::sleep(QUIET).await;
    assert!(!held.is_finished());
    let addr = proxy.addr();
    drop(proxy);
    // The held connection is closed under the client, and the port listens no more.
    let answer = tokio::time::timeout(ANSWER, held)
        .await
        .expect("a connection held by a dropped proxy stayed open")
        .unwrap();
    assert!(answer.is_err(), "{answer:?}");
    let connect = tokio::net::TcpStream::connect(addr).await;
    assert!(connect.is_err(), "the dropped proxy's port still accepts");
}

// ---------------------------------------------------------------------------------------
// kumaco behind the proxy: the edge that fell during a fault lands once it is lifted

/// Each fault in turn spans a window's start edge; each window has a node of its own.
/// The fault starts a second before the edge and is lifted two seconds after it.
#[tokio::test]
async fn kumaco_lands_an_edge_missed_during_each_fault_once_it_is_lifted() {
    let server = ApiServer::shared();
    let c = Cluster::new(server, "proxied", KUMACO).await;
    let (proxy, kubeconfig) = proxied(server, c.scope.value()).expect("a fault proxy");
    let kumaco = c.kumaco_as(&kubeconfig, &[]).await;

    let faults = [
        ("stall", Fault::Stall),
        ("reset", Fault::ResetMidResponse),
        ("partition", Fault::Partition),
        // Last: the connections it swallows (kumaco's watches among them) stay silent
        // until kube's watch idle timeout, minutes later, so a later window would not be
        // seen in time.
        ("blackhole", Fault::Blackhole),
    ];
    for (windows, (name, fault)) in faults.into_iter().enumerate() {
        let node = c.node(name, &[("fault", name)]).await;
        let start = edge_in(4);
        c.put_one_shot(name, start, "1h", &format!("fault={name}"))
            .await;
        // kumaco has the window before its network fails (its own /metrics are not
        // behind the proxy).
        poll_metric(&kumaco, "kumaco_windows", (windows + 1) as f64).await;
        tokio::time::sleep(until(start - SignedDuration::from_secs(1))).await;
        proxy.set(fault.clone());
        tokio::time::sleep(until(start + SignedDuration::from_secs(2))).await;
        // Under a reset the write reaches the server and only its answer is lost; the
        // others hold it back.
        if fault != Fault::ResetMidResponse {
            let now = Api::<Node>::all(c.client.clone()).get(&node).await.unwrap();
            let cond = condition(&now, UNDER_MAINTENANCE);
            assert!(
                cond.is_none(),
                "{name}: the edge landed through the fault: {cond:?}"
            );
        }
        proxy.set(Fault::None);
        let lifted = Instant::now();
        // Into a blackhole, kumaco's write waits for its timeout before it is retried.
        let bound = match fault {
            Fault::Blackhole => WRITE_TIMEOUT + RECOVERY_BOUND,
            _ => RECOVERY_BOUND,
        };
        c.wait_status(&node, Some("True"), bound + SOON).await;
        let recovery = lifted.elapsed();
        eprintln!(
            "PROXY_RECOVERY_MS {} fault={name} (edge 2 s before the fault was lifted)",
            recovery.as_millis()
        );
        assert!(
            recovery <= bound,
            "{name}: the missed edge landed {recovery:?} after the fault was lifted (bound \
             {bound:?}); kumaco log {}",
            kumaco.log_path().display()
        );
    }
    let stats = proxy.stats();
    assert!(stats.resets >= 1 && stats.blackholed >= 1, "{stats:?}");
}

/// A blackhole swallows kumaco's watch connections; once it is lifted kumaco must see
/// changes again without waiting for kube's default watch timeout (290 s + 5 s, the
/// delay before the fix): a window created after the blackhole is seen within kumaco's
/// watch timeout (40 s) plus kube's 5 s margin.
#[tokio::test]
async fn kumaco_sees_changes_again_soon_after_a_blackhole_swallowed_its_watches() {
    let server = ApiServer::shared();
    let c = Cluster::new(server, "blackwatch", KUMACO).await;
    let (proxy, kubeconfig) = proxied(server, c.scope.value()).expect("a fault proxy");
    let kumaco = c.kumaco_as(&kubeconfig, &[]).await;
    let node = c.node("a", &[("zone", "a")]).await;
    // The node's creation reached kumaco: its watch is up, with nothing after it.
    poll_metric(&kumaco, "kumaco_nodes_in_scope", 1.0).await;
    let blind_from = Instant::now();
    proxy.set(Fault::Blackhole);
    tokio::time::sleep(QUIET).await;
    proxy.set(Fault::None);
    c.put_active_window("w", "zone=a").await;
    let bound = Duration::from_secs(40 + 5) + RECOVERY_BOUND;
    c.wait_status(&node, Some("True"), bound + SOON).await;
    let blind = blind_from.elapsed();
    eprintln!(
        "PROXY_RECOVERY_MS {} blackhole of the watches, to a new window applied",
        blind.as_millis()
    );
    assert!(
        blind <= bound,
        "kumaco saw the window {blind:?} after its watches were swallowed (bound {bound:?}); \
         kumaco log {}",
        kumaco.log_path().display()
    );
    assert!(proxy.stats().blackholed >= 2, "{:?}", proxy.stats());
}

/// A list the network swallows as kumaco starts is asked for again on new connections
/// after `LIST_STALL` (15 s), not after the read timeout (here `--watch-timeout` 5 m +
/// 10 s). The chaos run caught a leader blackholed as it started: its lists hung for the
/// read timeout (50 s by default) while it held the Lease, and it missed a window edge.
#[tokio::test]
async fn a_list_the_network_swallowed_is_asked_for_again_on_new_connections() {
    const LIST_STALL: Duration = Duration::from_secs(15);
    let server = ApiServer::shared();
    let c = Cluster::new(server, "blacklist", KUMACO).await;
    let node = c.node("a", &[("zone", "a")]).await;
    c.put_active_window("w", "zone=a").await;
    let (proxy, kubeconfig) = proxied(server, c.scope.value()).expect("a fault proxy");
    proxy.set(Fault::Blackhole);
    let options = StartOptions {
        kubeconfig: Some(kubeconfig),
        healthy_is_enough: true,
        ..StartOptions::default()
    };
    let kumaco = c.kumaco_with(&["--watch-timeout=5m"], &options).await;
    // The node list and the window list, each on a connection of its own, swallowed.
    poll_showing("both lists swallowed", SOON, || async {
        let stats = proxy.stats();
        if stats.blackholed >= 2 {
            Ok(())
        } else {
            Err(format!("{stats:?}"))
        }
    })
    .await;
    proxy.set(Fault::None);
    let lifted = Instant::now();
    c.wait_status(&node, Some("True"), LIST_STALL + SOON).await;
    eprintln!(
        "PROXY_RECOVERY_MS {} lists swallowed at start, to the node marked",
        lifted.elapsed().as_millis()
    );
    let log = std::fs::read_to_string(kumaco.log_path()).unwrap();
    assert!(
        log.contains("the list got no answer"),
        "kumaco log {}",
        kumaco.log_path().display()
    );
}

/// A leader whose connections a blackhole swallowed keeps its Lease once the fault is
/// lifted: its renewals go on connections of their own, so the first one after the fault
/// times out on its one dead connection and the next opens a new one. Sharing the
/// controller's pool, a replica in the chaos run failed to renew for 1 min 44 s after a
/// 7 s blackhole: each renewal drew another of the dead connections an edge's writes had
/// left idle, and waited out its timeout on it.
#[tokio::test]
async fn a_leader_renews_its_lease_soon_after_a_blackhole() {
    const LEASE: &str = "blacklease";
    let server = ApiServer::shared();
    let c = Cluster::new(server, "blacklease", KUMACO).await;
    let (proxy, kubeconfig) = proxied(server, c.scope.value()).expect("a fault proxy");
    // 40 nodes entering a window at once: 32 writes in flight, their connections then
    // idle in the controller's pool.
    for i in 0..40 {
        c.node(&format!("n{i:02}"), &[("zone", "a")]).await;
    }
    let lease_name = format!("--lease-name={LEASE}");
    let args = [&[lease_name.as_str()][..], &SHORT_LEASE].concat();
    let options = StartOptions {
        kubeconfig: Some(kubeconfig),
        leader: Some(c.pod("leader")),
        ..StartOptions::default()
    };
    let kumaco = c.kumaco_with(&args, &options).await;
    c.put_active_window("w", "zone=a").await;
    poll_metric(&kumaco, "kumaco_nodes_under_maintenance", 40.0).await;
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), &c.ns);
    let renewed = async || {
        let lease = leases.get(LEASE).await.unwrap();
        let spec = lease.spec.unwrap_or_default();
        (spec.holder_identity, spec.renew_time.map(|t| t.0))
    };
    assert_eq!(renewed().await.0.as_deref(), Some("leader"));

    proxy.set(Fault::Blackhole);
    tokio::time::sleep(QUIET).await;
    proxy.set(Fault::None);
    let lifted = Instant::now();
    let lifted_at = jiff::Timestamp::now();
    // One renewal timing out (1 s) and the next on a new connection; past the renew
    // deadline (3 s) the leader would step down, past the lease duration (4 s) a standby
    // would take over.
    let bound = Duration::from_secs(4);
    loop {
        let (holder, at) = renewed().await;
        if at.is_some_and(|t| t > lifted_at) {
            assert_eq!(holder.as_deref(), Some("leader"));
            break;
        }
        assert!(
            lifted.elapsed() <= bound,
            "no renewal within {bound:?} of the blackhole's end; kumaco log {}",
            kumaco.log_path().display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "PROXY_RECOVERY_MS {} blackhole, to the Lease renewed",
        lifted.elapsed().as_millis()
    );
    assert!(proxy.stats().blackholed >= 2, "{:?}", proxy.stats());
}

/// Under added latency kumaco keeps its edges, each late by a few round trips at most.
#[tokio::test]
async fn kumaco_keeps_edges_under_latency() {
    let server = ApiServer::shared();
    let c = Cluster::new(server, "latency", KUMACO).await;
    let (proxy, kubeconfig) = proxied(server, c.scope.value()).expect("a fault proxy");
    let kumaco = c.kumaco_as(&kubeconfig, &[]).await;
    let node = c.node("a", &[("zone", "a")]).await;
    let delay = Duration::from_millis(250);
    proxy.set(Fault::Latency(delay));

    let start = edge_in(4);
    c.put_one_shot("w", start, "4s", "zone=a").await;
    let end = start + SignedDuration::from_secs(4);
    // A write is one chunk up and one down; a new connection's TLS handshake adds two
    // round trips.
    let bound = EDGE_BOUND + 6 * delay;
    for (edge, status) in [(start, "True"), (end, "False")] {
        c.wait_status(&node, Some(status), until(edge) + bound + SOON)
            .await;
        let late = Duration::try_from(jiff::Timestamp::now().duration_since(edge)).unwrap();
        eprintln!(
            "PROXY_RECOVERY_MS {} latency={delay:?} edge to {status}",
            late.as_millis()
        );
        assert!(
            late <= bound,
            "under {delay:?} of latency the edge to {status} landed {late:?} after it (bound \
             {bound:?}); kumaco log {}",
            kumaco.log_path().display()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Helpers

fn proxy(server: &ApiServer) -> FaultProxy {
    FaultProxy::start(upstream_of(server).unwrap()).expect("starting a fault proxy")
}

/// An admin client whose connections go through `proxy`.
async fn client_via(server: &ApiServer, proxy: &FaultProxy, name: &str) -> kube::Client {
    let path = proxied_kubeconfig(server, proxy, Scope::new(name).value()).unwrap();
    client_from_kubeconfig(&path).await.unwrap()
}

/// `request`'s outcome, failing the test if it has none within [`ANSWER`].
async fn answered<T>(request: impl Future<Output = kube::Result<T>>) -> kube::Result<T> {
    tokio::time::timeout(ANSWER, request)
        .await
        .unwrap_or_else(|_| panic!("no answer, not even an error, within {ANSWER:?}"))
}

/// Polls kumaco's `/metrics` until `name` reads `value`.
async fn poll_metric(kumaco: &KumacoProcess, name: &str, value: f64) {
    poll_showing(
        &format!("kumaco's {name} to read {value}"),
        SOON,
        || async {
            let text = kumaco.metrics_text().await.unwrap();
            let now = metric(&text, name, &[]).map_err(|e| format!("{e:#}"))?;
            if now == value {
                Ok(())
            } else {
                Err(format!("it is {now}"))
            }
        },
    )
    .await;
}
