//! A TCP fault proxy between workers and a server: black-hole or delay replies, cut every
//! connection, or partition for a while — faults of the network, which no adapter can fake.
//!
//! The proxy runs on its own thread and runtime, so it keeps forwarding whatever runtime the
//! run uses, and its switches are plain atomics a test flips from anywhere. Dropping the proxy
//! stops it and closes every connection.
//!
//! Lost replies are never dropped *inside* a live stream: a protocol that matches replies to
//! requests by order (Redis, PostgreSQL) would hand a later reply to the wrong call. Replies are
//! black-holed while the fault lasts (callers time out: `info`), and healing cuts the
//! connections, so the stream the client sees is always a prefix of the true one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy's switches, shared with its connections.
#[derive(Debug)]
struct Switches {
    epoch: Instant,
    black_hole_replies: AtomicBool,
    reply_delay_us: AtomicU64,
    /// Nanoseconds since `epoch` until which nothing crosses (0: no partition).
    partitioned_until_ns: AtomicU64,
    cut: watch::Sender<u64>,
}

impl Switches {
    fn partition_left(&self) -> Option<Duration> {
        let until_ns = self.partitioned_until_ns.load(Ordering::Relaxed);
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        (now_ns < until_ns).then(|| Duration::from_nanos(until_ns - now_ns))
    }
}

/// A running proxy from a loopback port to one upstream server.
pub struct FaultProxy {
    port: u16,
    switches: Arc<Switches>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts forwarding a free loopback port to `upstream`.
    pub fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (cut, _) = watch::channel(0);
        let switches = Arc::new(Switches {
            epoch: Instant::now(),
            black_hole_replies: AtomicBool::new(false),
            reply_delay_us: AtomicU64::new(0),
            partitioned_until_ns: AtomicU64::new(0),
            cut,
        });
        let (shutdown, stopped) = tokio::sync::oneshot::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread_switches = Arc::clone(&switches);
        let thread = std::thread::Builder::new()
            .name(format!("fencer-proxy-{port}"))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        biased;
                        _ = stopped => {}
                        () = accept_loop(listener, upstream, thread_switches) => {}
                    }
                });
            })?;
        Ok(FaultProxy {
            port,
            switches,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The loopback port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// From now on the server's replies vanish (requests still reach it and are applied).
    pub fn black_hole_replies(&self) {
        self.switches
            .black_hole_replies
            .store(true, Ordering::Relaxed);
    }

    /// Replies flow again; connections that lost replies are cut so no client reads a stream
    /// with a hole in it.
    pub fn heal_replies(&self) {
        self.switches
            .black_hole_replies
            .store(false, Ordering::Relaxed);
        self.cut_connections();
    }

    /// Delays every reply by `delay` (zero: no delay).
    pub fn delay_replies(&self, delay: Duration) {
        self.switches
            .reply_delay_us
            .store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    /// Closes every open connection at once (both directions).
    pub fn cut_connections(&self) {
        self.switches.cut.send_modify(|generation| *generation += 1);
    }

    /// Nothing crosses in either direction for `duration`; bytes wait, as TCP retransmits would.
    pub fn partition_for(&self, duration: Duration) {
        let until_ns = (self.switches.epoch.elapsed() + duration).as_nanos() as u64;
        self.switches
            .partitioned_until_ns
            .fetch_max(until_ns, Ordering::Relaxed);
    }

    /// Carries out `action` if it is a fault of the network (partition, delayed, dropped or
    /// healed replies, cut connections) and says whether it was: every server behind a proxy
    /// takes these the same way, whatever else it takes.
    #[must_use]
    pub fn take(&self, action: &fencer_nemesis::ServerAction) -> bool {
        use fencer_nemesis::ServerAction;
        match *action {
            ServerAction::Partition(duration) => self.partition_for(duration),
            ServerAction::DelayReplies(delay) => self.delay_replies(delay),
            ServerAction::DropReplies => self.black_hole_replies(),
            ServerAction::HealReplies => self.heal_replies(),
            ServerAction::Cut => self.cut_connections(),
            ServerAction::Pause
            | ServerAction::Resume
            | ServerAction::Kill
            | ServerAction::Start
            | ServerAction::JumpClock(_) => return false,
        }
        true
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, switches: Arc<Switches>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors or similar: back off rather than spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let switches = Arc::clone(&switches);
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                forward(client, server, switches).await;
            }
        });
    }
}

/// Which way bytes flow.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

async fn forward(client: TcpStream, server: TcpStream, switches: Arc<Switches>) {
    let cut = switches.cut.subscribe();
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    // Either direction ending (EOF, error, cut) ends the connection: both halves drop here.
    tokio::select! {
        biased;
        () = pump(client_read, server_write, &switches, Direction::Request, cut.clone()) => {}
        () = pump(server_read, client_write, &switches, Direction::Reply, cut) => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    switches: &Switches,
    direction: Direction,
    mut cut: watch::Receiver<u64>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = tokio::select! {
            biased;
            _ = cut.changed() => return,
            read = from.read(&mut buffer) => read,
        };
        let bytes = match read {
            Ok(0) | Err(_) => return,
            Ok(bytes) => bytes,
        };
        while let Some(left) = switches.partition_left() {
            tokio::select! {
                biased;
                _ = cut.changed() => return,
                () = tokio::time::sleep(left) => {}
            }
        }
        if direction == Direction::Reply {
            if switches.black_hole_replies.load(Ordering::Relaxed) {
                continue;
            }
            let delay_us = switches.reply_delay_us.load(Ordering::Relaxed);
            if delay_us > 0 {
                tokio::time::sleep(Duration::from_micros(delay_us)).await;
            }
        }
        if to.write_all(&buffer[..bytes]).await.is_err() {
            return;
        }
    }
}
