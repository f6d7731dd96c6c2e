//! A loopback TCP proxy that partitions one client (a provider) from the API server without
//! touching either: it forwards bytes both ways until told to blackhole, cut or heal.
//!
//! - [`Proxy::blackhole`]: every connection, open or new, stops forwarding. Bytes already sent
//!   stay unread in the kernel's buffers; nobody sees an error or a reset, only silence, as
//!   across a dropped network link. New connections are accepted but never reach the server.
//! - [`Proxy::heal`]: forwarding again, for connections opened from now on. The connections held
//!   through the blackhole are reset, their held bytes dropped (never delivered late), as
//!   connections that timed out during the partition would be.
//! - [`Proxy::refuse`]: resets every connection, open or new, at once, as a host that rejects
//!   (or a server that is down) would: the client sees errors at once, not silence. Until
//!   [`Proxy::heal`].
//! - [`Proxy::cut`]: resets every open connection at once; new ones forward (or are held, while
//!   blackholed).
//! - [`Proxy::slow`]: holds every chunk the server sends for a delay before passing it on, as an
//!   overloaded server would answer late; `Duration::ZERO` ends it. Requests go through at once:
//!   a write held up longer than the lease's `D - R` is a limit of leader election itself
//!   (docs/high-availability.md), not a fault to test.
//!
//! It runs on a runtime of its own, so that it keeps forwarding whatever the test's runtime does.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Forwarding,
    Blackholed,
    Refusing,
}

/// What every connection must do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Mode {
    link: Link,
    /// Connections accepted under an older generation are reset.
    generation: u64,
    /// How long each chunk from the server waits before it is passed on.
    delay: Duration,
}

/// A running proxy; it stops (and resets its connections) when dropped.
pub struct Proxy {
    /// Where clients connect.
    pub address: SocketAddr,
    mode: watch::Sender<Mode>,
    accepted: Arc<AtomicUsize>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Result<Proxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("e2e-proxy")
            .enable_all()
            .build()?;
        let (mode, watching) = watch::channel(Mode { link: Link::Forwarding, generation: 0, delay: Duration::ZERO });
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((client, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(client, upstream, watching.clone()));
            }
        });
        Ok(Proxy { address, mode, accepted, runtime: Some(runtime) })
    }

    /// The server URL of this proxy for a kubeconfig.
    pub fn server(&self) -> String {
        format!("https://{}", self.address)
    }

    /// How many connections clients have opened through the proxy so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Stops forwarding on every connection, open or new: silence, no error.
    pub fn blackhole(&self) {
        self.mode.send_modify(|m| m.link = Link::Blackholed);
    }

    /// Resets every connection, open or new: errors at once.
    pub fn refuse(&self) {
        self.mode.send_modify(|m| {
            m.link = Link::Refusing;
            m.generation += 1;
        });
    }

    /// Forwards again; the connections held until now are reset.
    pub fn heal(&self) {
        self.mode.send_modify(|m| {
            m.link = Link::Forwarding;
            m.generation += 1;
        });
    }

    /// Resets every open connection.
    pub fn cut(&self) {
        self.mode.send_modify(|m| m.generation += 1);
    }

    /// Holds every chunk from the server for `delay` before passing it on (`Duration::ZERO`: at once).
    pub fn slow(&self, delay: Duration) {
        self.mode.send_modify(|m| m.delay = delay);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// How a connection ended.
enum End {
    /// Both directions closed by their sender.
    Closed,
    /// Reset by the proxy (cut or heal), or by an error on either side.
    Reset,
}

/// One client connection: held while blackholed, then forwarded until it ends or is reset.
async fn serve(client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let generation = mode.borrow().generation;
    let end = match connect_when_forwarding(upstream, &mut mode, generation).await {
        Some(server) => {
            let end = forward(&client, &server, &mut mode, generation).await;
            if matches!(end, End::Reset) {
                let _ = server.set_zero_linger();
            }
            end
        }
        None => End::Reset,
    };
    if matches!(end, End::Reset) {
        let _ = client.set_zero_linger();
    }
}

/// Waits while blackholed, then connects to the server; None when the connection is reset first.
async fn connect_when_forwarding(
    upstream: SocketAddr,
    mode: &mut watch::Receiver<Mode>,
    generation: u64,
) -> Option<TcpStream> {
    loop {
        let now = *mode.borrow_and_update();
        if now.generation != generation {
            return None;
        }
        match now.link {
            Link::Forwarding => return TcpStream::connect(upstream).await.ok(),
            Link::Refusing => return None,
            Link::Blackholed => mode.changed().await.ok()?,
        }
    }
}

/// Copies both ways until both directions are closed, or the connection is reset. While
/// blackholed, nothing is read, so whatever the peers send waits in the kernel's buffers. While
/// slowed, each chunk from the server waits out the delay before it is written.
async fn forward(client: &TcpStream, server: &TcpStream, mode: &mut watch::Receiver<Mode>, generation: u64) -> End {
    let mut upstream_open = true;
    let mut downstream_open = true;
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    while upstream_open || downstream_open {
        let now = *mode.borrow_and_update();
        if now.generation != generation {
            return End::Reset;
        }
        let forwarding = now.link == Link::Forwarding;
        tokio::select! {
            changed = mode.changed() => if changed.is_err() { return End::Reset },
            read = read_some(client, &mut up), if forwarding && upstream_open => match read {
                Some(0) => { upstream_open = false; shutdown_write(server); }
                Some(n) => if !relay(server, &up[..n], mode, generation, Duration::ZERO).await { return End::Reset },
                None => return End::Reset,
            },
            read = read_some(server, &mut down), if forwarding && downstream_open => match read {
                Some(0) => { downstream_open = false; shutdown_write(client); }
                Some(n) => if !relay(client, &down[..n], mode, generation, now.delay).await { return End::Reset },
                None => return End::Reset,
            },
        }
    }
    End::Closed
}

/// Reads what is there; None on an error.
async fn read_some(stream: &TcpStream, buffer: &mut [u8]) -> Option<usize> {
    loop {
        stream.readable().await.ok()?;
        match stream.try_read(buffer) {
            Ok(n) => return Some(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return None,
        }
    }
}

/// Writes all of `bytes`; false on an error.
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        if stream.writable().await.is_err() {
            return false;
        }
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return false,
        }
    }
    true
}

/// Passes the end of one direction on (a FIN), keeping the other open.
fn shutdown_write(stream: &TcpStream) {
    // SAFETY: shutdown(2) on a socket this task owns; it frees nothing.
    unsafe {
        libc::shutdown(stream.as_raw_fd(), libc::SHUT_WR);
    }
}

/// Writes `bytes` after `delay`, unless the connection is reset meanwhile (a peer that stopped
/// reading must not keep the connection from being cut). False when the connection is to be reset.
async fn relay(
    stream: &TcpStream,
    bytes: &[u8],
    mode: &mut watch::Receiver<Mode>,
    generation: u64,
    delay: Duration,
) -> bool {
    let write = async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        write_all(stream, bytes).await
    };
    tokio::pin!(write);
    loop {
        tokio::select! {
            written = &mut write => return written,
            changed = mode.changed() => {
                if changed.is_err() || mode.borrow_and_update().generation != generation {
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use super::*;

    /// An echo server on loopback.
    fn echo() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 1024];
                    while let Ok(n) = stream.read(&mut buffer) {
                        if n == 0 || stream.write_all(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        address
    }

    fn connect(proxy: &Proxy) -> TcpStream {
        let stream = TcpStream::connect(proxy.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        stream
    }

    /// Sends `text` and reads what comes back within the read timeout.
    fn round_trip(stream: &mut TcpStream, text: &str) -> std::io::Result<String> {
        stream.write_all(text.as_bytes())?;
        let mut buffer = vec![0u8; text.len()];
        stream.read_exact(&mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    #[test]
    fn a_blackhole_is_silent_and_healing_resets_the_held_connections_only() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut old = connect(&proxy);
        assert_eq!(round_trip(&mut old, "hello").unwrap(), "hello");

        proxy.blackhole();
        std::thread::sleep(Duration::from_millis(50));
        let silence = round_trip(&mut old, "lost").unwrap_err();
        assert!(matches!(silence.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{silence}");
        let mut during = connect(&proxy);
        assert!(round_trip(&mut during, "held").is_err(), "a connection opened while blackholed is held");

        proxy.heal();
        for held in [&mut old, &mut during] {
            let mut buffer = [0u8; 16];
            let end = held.read(&mut buffer);
            assert!(matches!(end, Ok(0) | Err(_)), "a held connection ends at heal: {end:?}");
        }
        let mut fresh = connect(&proxy);
        assert_eq!(round_trip(&mut fresh, "again").unwrap(), "again");
        assert_eq!(proxy.accepted(), 3);
    }

    #[test]
    fn refusing_resets_open_and_new_connections_until_healed() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut open = connect(&proxy);
        assert_eq!(round_trip(&mut open, "one").unwrap(), "one");
        proxy.refuse();
        assert!(round_trip(&mut open, "two").is_err(), "an open connection is reset");
        let mut refused = connect(&proxy);
        let error = round_trip(&mut refused, "three").unwrap_err();
        assert!(
            !matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            "not silence: {error}"
        );
        proxy.heal();
        let mut next = connect(&proxy);
        assert_eq!(round_trip(&mut next, "four").unwrap(), "four");
    }

    #[test]
    fn a_slowed_proxy_delays_each_answer_until_sped_up_again() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut stream = connect(&proxy);
        proxy.slow(Duration::from_millis(250));
        let sent = std::time::Instant::now();
        assert_eq!(round_trip(&mut stream, "slow").unwrap(), "slow");
        let slowed = sent.elapsed();
        assert!(slowed >= Duration::from_millis(250), "a round trip through a 250 ms delay took {slowed:?}");
        proxy.slow(Duration::ZERO);
        let sent = std::time::Instant::now();
        assert_eq!(round_trip(&mut stream, "fast").unwrap(), "fast");
        assert!(sent.elapsed() < Duration::from_millis(150), "back to speed: {:?}", sent.elapsed());
    }

    #[test]
    fn a_cut_resets_open_connections_and_new_ones_forward() {
        let proxy = Proxy::start(echo()).unwrap();
        let mut open = connect(&proxy);
        assert_eq!(round_trip(&mut open, "one").unwrap(), "one");
        proxy.cut();
        let mut buffer = [0u8; 16];
        let end = open.read(&mut buffer);
        assert!(matches!(&end, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset), "reset: {end:?}");
        let mut next = connect(&proxy);
        assert_eq!(round_trip(&mut next, "two").unwrap(), "two");
    }
}
