//! Child processes that never outlive the test run: each is started with a parent-death signal
//! from one long-lived thread (the signal fires when the *thread* that forked ends), killed on
//! drop, and logs to a file.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("e2e-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The channel lives in a static, so this thread only ends with the process.
                loop {
                    std::thread::park();
                }
            })
            .expect("starting the spawner thread");
        Mutex::new(tx)
    })
}

/// A running child process, killed when dropped.
pub struct Process {
    pub name: String,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// Starts `command`, its stdout and stderr going to `log` (appended to, so that a process
    /// started again keeps one log).
    pub fn start(name: &str, mut command: Command, log: PathBuf) -> io::Result<Process> {
        let out = File::options().create(true).append(true).open(&log)?;
        command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (reply, answer) = mpsc::channel();
        spawner().lock().unwrap_or_else(|e| e.into_inner()).send((command, reply)).map_err(io::Error::other)?;
        let child = answer.recv().map_err(io::Error::other)??;
        Ok(Process { name: name.to_owned(), log, child: Some(child) })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Sends a signal.
    pub fn signal(&self, signal: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: sending a signal to our own child.
            unsafe {
                libc::kill(pid as i32, signal);
            }
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status if it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }

    /// Whether one line of the log contains every one of `parts`.
    pub fn logged(&self, parts: &[&str]) -> bool {
        std::fs::read_to_string(&self.log)
            .is_ok_and(|log| log.lines().any(|line| parts.iter().all(|part| line.contains(part))))
    }

    /// The last lines of the log, for failure messages.
    pub fn tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }
}

/// The last lines of a log file.
pub fn tail(log: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nobody listens on right now, for a process about to be started.
///
/// Ports come from below the kernel's ephemeral range (32768 and up), handed out in turn: a port
/// the kernel picked for `:0` could be picked again for any outgoing connection before the
/// process binds it, and one test's client would steal another's probe port. Each test binary
/// starts at an offset of its own, and a port some other program holds is skipped.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = NEXT.compare_exchange(u32::MAX, (std::process::id() * 997) % SPAN, Ordering::SeqCst, Ordering::SeqCst);
    for _ in 0..SPAN {
        let port = (FIRST + NEXT.fetch_add(1, Ordering::SeqCst) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {FIRST} and {}", FIRST + SPAN)
}

/// A plain HTTP GET on loopback; returns the status code.
pub fn http_status(address: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// A plain HTTP POST of a JSON body on loopback; returns the status code and the body.
pub fn http_post_json(address: &str, path: &str, body: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.split_whitespace().nth(1)?.parse().ok()?, body.to_owned()))
}

/// A plain HTTP GET on loopback; returns the body when the status is 200.
pub fn http_get(address: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1)? == "200").then(|| body.to_owned())
}

/// Polls `check` every 100 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
