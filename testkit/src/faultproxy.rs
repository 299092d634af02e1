//! A fault-injecting TCP proxy between one kumaco replica and the API server: the network
//! lying to kumaco, for the fault tests and the chaos harness.
//!
//! The API, for users of this module:
//!
//! ```text
//! pub struct FaultProxy { .. }                  // Drop stops it: listener, connections, thread
//! impl FaultProxy {
//!     pub fn start(upstream: SocketAddr) -> anyhow::Result<FaultProxy>;
//!     pub fn addr(&self) -> SocketAddr;         // 127.0.0.1:<free port>
//!     pub fn set(&self, fault: Fault);          // replaces the current fault, from any thread
//!     pub fn fault(&self) -> Fault;             // the current fault
//!     pub fn stats(&self) -> ProxyStats;        // counters since start
//! }
//! pub enum Fault { None, Latency(Duration), Stall, ResetMidResponse, Blackhole, Partition }
//! pub struct ProxyStats { connections, active, bytes_up, bytes_down, resets, refused, blackholed }
//! pub fn upstream_of(server: &ApiServer) -> anyhow::Result<SocketAddr>;
//! pub fn kubeconfig_via(kubeconfig: &Path, proxy: SocketAddr, out: &Path) -> anyhow::Result<()>;
//! pub fn proxied(server: &ApiServer, name: &str) -> anyhow::Result<(FaultProxy, PathBuf)>;
//! pub fn proxied_kubeconfig(server: &ApiServer, proxy: &FaultProxy, name: &str)
//!     -> anyhow::Result<PathBuf>;
//! ```
//!
//! It forwards bytes and nothing else: TLS passes through untouched. The API server's
//! serving certificate is for 127.0.0.1, the proxy's host too, so a kubeconfig whose
//! `server` is the proxy's address ([`kubeconfig_via`]) verifies as the original does.
//!
//! What each [`Fault`] does, to connections open when it is set and to new ones:
//!
//! | fault              | open connections                         | new connections          |
//! |--------------------|------------------------------------------|--------------------------|
//! | `None`             | forwarded                                | forwarded                |
//! | `Latency(d)`       | each chunk held `d` before it is written | same                     |
//! | `Stall`            | nothing forwarded, held open; resumes    | same                     |
//! | `ResetMidResponse` | the next bytes from the server: the first half forwarded, then RST | same |
//! | `Blackhole`        | silent forever (no byte, no FIN, no RST) | accepted, silent forever |
//! | `Partition`        | reset (RST)                              | reset at once            |
//!
//! `Stall` is a pause: when it is lifted, held bytes flow again. `Blackhole` is a loss:
//! a connection it touched stays silent even after the fault is lifted, until the client
//! gives up and closes it, so only the client's own timeouts get it out (a conntrack entry
//! lost, a peer that vanished). Requests still reach the server under `ResetMidResponse`:
//! a write may be applied while its answer is lost.
//!
//! It runs on a thread of its own with a single-threaded tokio runtime, so it forwards
//! even while the test's runtime is busy or blocked; dropping the proxy ends the runtime,
//! which closes every socket it holds, and joins the thread.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

use crate::ApiServer;

/// What the proxy does to the traffic (see the module's table).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    #[default]
    None,
    /// Added before each chunk is written, both ways.
    Latency(Duration),
    /// Nothing is forwarded, connections are held open; lifting it resumes them.
    Stall,
    /// The next bytes from the server: half forwarded, then the connection is reset.
    ResetMidResponse,
    /// New connections are accepted and never answered; open ones go silent. Both stay
    /// silent after the fault is lifted.
    Blackhole,
    /// New connections are reset at once; open ones are reset.
    Partition,
}

/// Counters since the proxy started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted from clients.
    pub connections: u64,
    /// Connections open now (forwarding or held).
    pub active: u64,
    /// Bytes forwarded client → server.
    pub bytes_up: u64,
    /// Bytes forwarded server → client.
    pub bytes_down: u64,
    /// Connections reset by `ResetMidResponse` or `Partition` (open ones).
    pub resets: u64,
    /// New connections reset at once under `Partition`.
    pub refused: u64,
    /// Connections made silent by `Blackhole` (new or open).
    pub blackholed: u64,
}

/// The fault, and how many times a fault that kills open connections was set: a
/// connection compares these counts with those at its birth, so even a `Partition` set
/// and lifted again before it woke up reaches it.
#[derive(Clone, Debug, Default)]
struct State {
    fault: Fault,
    partitions: u64,
    blackholes: u64,
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    active: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    resets: AtomicU64,
    refused: AtomicU64,
    blackholed: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// A running proxy. Dropping it stops it.
pub struct FaultProxy {
    addr: SocketAddr,
    state: watch::Sender<State>,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream`, with no fault.
    pub fn start(upstream: SocketAddr) -> Result<FaultProxy> {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("binding the fault proxy")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building the fault proxy's runtime")?;
        let (state, _) = watch::channel(State::default());
        let counters = Arc::new(Counters::default());
        let (stop, stopped) = oneshot::channel();
        let proxy = Proxy {
            upstream,
            state: state.clone(),
            counters: counters.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("faultproxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(e) => {
                            eprintln!("faultproxy {addr}: cannot listen: {e}");
                            return;
                        }
                    };
                    tokio::select! {
                        _ = stopped => {}
                        () = proxy.accept_loop(listener) => {}
                    }
                });
                // Dropping the runtime here drops every connection task, and with them
                // their sockets.
            })
            .context("starting the fault proxy's thread")?;
        Ok(FaultProxy {
            addr,
            state,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the current fault; open connections react at once.
    pub fn set(&self, fault: Fault) {
        self.state.send_modify(|state| {
            match fault {
                Fault::Partition => state.partitions += 1,
                Fault::Blackhole => state.blackholes += 1,
                _ => {}
            }
            state.fault = fault;
        });
    }

    /// The current fault.
    pub fn fault(&self) -> Fault {
        self.state.borrow().fault.clone()
    }

    /// Counters since the proxy started.
    pub fn stats(&self) -> ProxyStats {
        let c = &self.counters;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ProxyStats {
            connections: get(&c.connections),
            active: get(&c.active),
            bytes_up: get(&c.bytes_up),
            bytes_down: get(&c.bytes_down),
            resets: get(&c.resets),
            refused: get(&c.refused),
            blackholed: get(&c.blackholed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `server`'s address, the upstream of a proxy in front of it.
pub fn upstream_of(server: &ApiServer) -> Result<SocketAddr> {
    let url = server.url();
    url.strip_prefix("https://")
        .and_then(|rest| rest.trim_end_matches('/').parse().ok())
        .with_context(|| format!("the API server's URL {url} is not https://IP:PORT"))
}

/// Writes to `out` a copy of `kubeconfig` whose clusters are reached through `proxy`.
pub fn kubeconfig_via(kubeconfig: &Path, proxy: SocketAddr, out: &Path) -> Result<()> {
    let mut config = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    for named in &mut config.clusters {
        if let Some(cluster) = named.cluster.as_mut() {
            cluster.server = Some(format!("https://{proxy}"));
        }
    }
    // JSON is YAML: every kubeconfig reader takes it.
    let text = serde_json::to_string_pretty(&config)?;
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))
}

/// A proxy in front of `server`, and a kubeconfig like its admin one through it
/// ([`proxied_kubeconfig`]).
pub fn proxied(server: &ApiServer, name: &str) -> Result<(FaultProxy, PathBuf)> {
    let proxy = FaultProxy::start(upstream_of(server)?)?;
    let kubeconfig = proxied_kubeconfig(server, &proxy, name)?;
    Ok((proxy, kubeconfig))
}

/// A kubeconfig like `server`'s admin one, through `proxy`: `proxied-NAME.kubeconfig` in
/// the server's directory (`name` unique on the server: a scope's value).
pub fn proxied_kubeconfig(server: &ApiServer, proxy: &FaultProxy, name: &str) -> Result<PathBuf> {
    let path = server.dir().join(format!("proxied-{name}.kubeconfig"));
    kubeconfig_via(server.kubeconfig(), proxy.addr(), &path)?;
    Ok(path)
}

/// The proxy's side of the thread: what every connection task shares.
#[derive(Clone)]
struct Proxy {
    upstream: SocketAddr,
    state: watch::Sender<State>,
    counters: Arc<Counters>,
}

/// How a connection's forwarding ended.
enum End {
    /// Both sides closed normally.
    Closed,
    /// Reset both sides (a fault, or an error on one side passed on as a reset).
    Reset,
    /// Go silent (`Blackhole`).
    Silent,
}

/// Which way bytes flow.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Up,
    Down,
}

impl Proxy {
    async fn accept_loop(self, listener: TcpListener) {
        loop {
            let client = match listener.accept().await {
                Ok((client, _)) => client,
                // Out of descriptors and the like: the client sees nothing; try again.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            bump(&self.counters.connections, 1);
            tokio::spawn(self.clone().connection(client));
        }
    }

    async fn connection(self, client: TcpStream) {
        bump(&self.counters.active, 1);
        let _active = Decrement(&self.counters.active);
        let mut faults = self.state.subscribe();
        let born = faults.borrow_and_update().clone();
        match born.fault {
            Fault::Partition => {
                bump(&self.counters.refused, 1);
                reset(client);
                return;
            }
            Fault::Blackhole => {
                bump(&self.counters.blackholed, 1);
                self.silent(client, born, faults).await;
                return;
            }
            _ => {}
        }
        let Ok(upstream) = TcpStream::connect(self.upstream).await else {
            // The server is down: the client sees its connection refused, as it would
            // without the proxy.
            reset(client);
            return;
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let (mut client_read, mut client_write) = client.into_split();
        let (mut upstream_read, mut upstream_write) = upstream.into_split();
        let end = {
            let up = self.pump(
                &mut client_read,
                &mut upstream_write,
                Way::Up,
                &born,
                faults.clone(),
            );
            let down = self.pump(
                &mut upstream_read,
                &mut client_write,
                Way::Down,
                &born,
                faults.clone(),
            );
            tokio::pin!(up, down);
            let (mut up_done, mut down_done) = (false, false);
            loop {
                let end = tokio::select! {
                    end = &mut up, if !up_done => { up_done = true; end }
                    end = &mut down, if !down_done => { down_done = true; end }
                };
                match end {
                    // A half-close: the other way may still carry bytes.
                    End::Closed if !(up_done && down_done) => continue,
                    end => break end,
                }
            }
        };
        match end {
            End::Closed => {}
            End::Reset => {
                bump(&self.counters.resets, 1);
                let _ = client_write.as_ref().set_zero_linger();
                let _ = upstream_write.as_ref().set_zero_linger();
            }
            End::Silent => {
                bump(&self.counters.blackholed, 1);
                drop((upstream_read, upstream_write));
                let client = client_read
                    .reunite(client_write)
                    .expect("halves of one stream");
                self.silent(client, born, faults).await;
            }
        }
    }

    /// Holds `client` open and answers nothing, reading and dropping what it sends, until
    /// it closes or a `Partition` resets it.
    async fn silent(&self, mut client: TcpStream, born: State, mut faults: watch::Receiver<State>) {
        let mut sink = vec![0; 16 * 1024];
        loop {
            tokio::select! {
                read = client.read(&mut sink) => match read {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
                changed = faults.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if faults.borrow_and_update().partitions > born.partitions {
                        bump(&self.counters.resets, 1);
                        reset(client);
                        return;
                    }
                }
            }
        }
    }

    /// Forwards one way until end of stream, an error, or a fault that ends the
    /// connection.
    async fn pump(
        &self,
        from: &mut OwnedReadHalf,
        to: &mut OwnedWriteHalf,
        way: Way,
        born: &State,
        mut faults: watch::Receiver<State>,
    ) -> End {
        let mut buf = vec![0; 16 * 1024];
        loop {
            let n = loop {
                tokio::select! {
                    read = from.read(&mut buf) => match read {
                        Ok(0) => {
                            let _ = to.shutdown().await;
                            return End::Closed;
                        }
                        Ok(n) => break n,
                        Err(_) => return End::Reset,
                    },
                    changed = faults.changed() => {
                        if changed.is_err() {
                            return End::Reset;
                        }
                        if let Some(end) = killed(&faults.borrow_and_update(), born) {
                            return end;
                        }
                    }
                }
            };
            let chunk = &buf[..n];
            // Deliver the chunk as the fault of the moment says; a change of fault while
            // it waits is obeyed at once.
            loop {
                let state = faults.borrow_and_update().clone();
                if let Some(end) = killed(&state, born) {
                    return end;
                }
                let fault = state.fault;
                let delay = match fault {
                    Fault::Latency(delay) => delay,
                    Fault::Stall => {
                        if faults.changed().await.is_err() {
                            return End::Reset;
                        }
                        continue;
                    }
                    Fault::ResetMidResponse if way == Way::Down => {
                        let half = n.div_ceil(2);
                        if to.write_all(&chunk[..half]).await.is_ok() {
                            self.count(way, half);
                        }
                        return End::Reset;
                    }
                    _ => Duration::ZERO,
                };
                if !delay.is_zero() {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        changed = faults.changed() => {
                            if changed.is_err() {
                                return End::Reset;
                            }
                            continue;
                        }
                    }
                }
                // Written piece by piece, each write cancel-safe: a peer that reads
                // nothing blocks the write, and a connection-killing fault must still
                // reach it.
                let mut written = 0;
                while written < n {
                    tokio::select! {
                        wrote = to.write(&chunk[written..]) => match wrote {
                            Ok(0) | Err(_) => return End::Reset,
                            Ok(k) => {
                                written += k;
                                self.count(way, k);
                            }
                        },
                        changed = faults.changed() => {
                            if changed.is_err() {
                                return End::Reset;
                            }
                            if let Some(end) = killed(&faults.borrow_and_update(), born) {
                                return end;
                            }
                        }
                    }
                }
                break;
            }
        }
    }

    fn count(&self, way: Way, bytes: usize) {
        let counter = match way {
            Way::Up => &self.counters.bytes_up,
            Way::Down => &self.counters.bytes_down,
        };
        bump(counter, bytes as u64);
    }
}

/// Whether a connection born at `born` must end now: a `Partition` or `Blackhole` was set
/// since.
fn killed(state: &State, born: &State) -> Option<End> {
    if state.partitions > born.partitions {
        Some(End::Reset)
    } else if state.blackholes > born.blackholes {
        Some(End::Silent)
    } else {
        None
    }
}

/// Closes `stream` with an RST instead of a FIN: the peer's next read fails with
/// "connection reset".
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// Decrements a gauge when a connection ends, however it ends.
struct Decrement<'a>(&'a AtomicU64);

impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
