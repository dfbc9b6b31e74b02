//! Real networks for tests: HTTP and HTTPS targets that count what they serve, for now; real
//! proxies and an isolated client network come next.
//!
//! # Failing tests
//!
//! Every daemon is killed when its owner drops. An owner dropped while the thread panics prints
//! its configuration and logs to stderr and keeps its temporary directory.
//!
//! A missing tool fails the test with the Debian package to install (`scripts/test.sh` installs
//! them). The constructors block for the daemon's start (well under a second), waiting on a
//! condition with a deadline; they can be called from async tests.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// How long a daemon or a bridge may take to start.
const START: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(10);

// ---------------------------------------------------------------------------------------------
// Tools, temporary directories, daemons

/// The path of `program`, from PATH or the sbin directories; panics naming the Debian package
/// to install when it is missing.
pub fn tool(program: &str, package: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| {
            panic!(
                "net harness: `{program}` not found; install it with \
                 `apt-get install -y {package}` (scripts/test.sh installs it)"
            )
        })
}

/// A directory under the system's temporary directory, removed on drop, kept (and its path
/// printed) when dropped during a panic.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("epo-net-{}-{n}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        // Traversable by squid's `proxy` user whatever the umask.
        set_mode(&path, 0o755);
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("net harness: kept {} for inspection", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
}

/// Writes a file readable by everyone (squid's helpers run as `proxy`).
fn write(path: &Path, content: &str) {
    fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    set_mode(path, 0o644);
}

/// A file's text, empty when it does not exist (yet).
fn read(path: &Path) -> String {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A port the kernel just gave out on 127.0.0.1 and took back, for programs that want a port
/// in their configuration. A start that fails on it is retried with another one.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Runs a short command to its end; panics with its output when it fails.
fn run(cmd: &mut Command, stdin: &str) -> String {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

enum Poll {
    Ready,
    Pending,
    Failed(String),
}

/// Polls `check` until it is ready, fails, or START passes.
fn wait_until(what: &str, mut check: impl FnMut() -> Poll) -> Result<(), String> {
    let deadline = Instant::now() + START;
    loop {
        match check() {
            Poll::Ready => return Ok(()),
            Poll::Failed(why) => return Err(format!("{what}: {why}")),
            Poll::Pending if Instant::now() >= deadline => {
                return Err(format!("{what}: not after {START:?}"));
            }
            Poll::Pending => std::thread::sleep(POLL),
        }
    }
}

/// A child process killed (and reaped) on drop, its stdout and stderr in one file.
struct Daemon {
    name: String,
    child: Child,
    output: PathBuf,
}

impl Daemon {
    fn spawn(name: &str, cmd: &mut Command, output: PathBuf) -> Daemon {
        let out = fs::File::create(&output)
            .unwrap_or_else(|e| panic!("create {}: {e}", output.display()));
        let err = out.try_clone().expect("dup log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({cmd:?}): {e}"));
        Daemon {
            name: name.to_string(),
            child,
            output,
        }
    }

    /// Pending while it runs, Failed once it exited.
    fn running(&mut self) -> Poll {
        match self.child.try_wait() {
            Ok(None) => Poll::Pending,
            Ok(Some(status)) => Poll::Failed(format!("{} exited ({status})", self.name)),
            Err(e) => Poll::Failed(format!("{}: {e}", self.name)),
        }
    }

    /// Waits until `ready` holds while the daemon runs.
    fn wait_ready(&mut self, what: &str, ready: impl Fn() -> bool) -> Result<(), String> {
        wait_until(what, || match self.running() {
            Poll::Pending if ready() => Poll::Ready,
            other => other,
        })
    }

    fn output(&self) -> String {
        read(&self.output)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Named files of a directory, one section each, for a failing test's output.
fn sections(dir: &Path, names: &[&str]) -> String {
    let mut out = String::new();
    for name in names {
        let _ = writeln!(out, "----- {name}\n{}", read(&dir.join(name)));
    }
    out
}

fn hosts_file(entries: &[(String, IpAddr)]) -> String {
    let mut out = String::from("127.0.0.1 localhost\n::1 localhost\n");
    for (name, ip) in entries {
        let _ = writeln!(out, "{ip} {name}");
    }
    out
}

// ---------------------------------------------------------------------------------------------
// HTTP and HTTPS targets

/// One request a [`Target`] answered.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    /// The request target as received (origin form `/path` from a proxy or a direct client).
    pub uri: String,
    pub headers: Vec<(String, String)>,
}

impl Seen {
    /// The first value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP/1.1 server on 127.0.0.1 (random port) that answers every request `200` with the
/// body `target NAME request N\n` (N counts from 1) and the header `x-target: NAME`, and
/// records what it answered. It runs on its own thread and runtime, so it answers while the
/// test blocks (sync tests, current-thread runtimes).
pub struct Target {
    name: String,
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Target {
    pub fn start(name: &str) -> Target {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind target");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("local addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("target-{name}"))
            .spawn({
                let (name, seen) = (name.to_string(), seen.clone());
                move || serve(listener, name, seen, stopped)
            })
            .expect("spawn target thread");
        Target {
            name: name.to_string(),
            port,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://HOST:PORT/` for this target under the name `host`.
    pub fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/", self.port)
    }

    /// How many requests it answered.
    pub fn requests(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "target {} (port {}) answered {:#?}",
                self.name,
                self.port,
                self.seen()
            );
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(
    listener: TcpListener,
    name: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    mut stopped: oneshot::Receiver<()>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("target runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("target listener");
        loop {
            let stream = tokio::select! {
                _ = &mut stopped => return,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
            };
            let (name, seen) = (name.clone(), seen.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req| std::future::ready(answer(&req, &name, &seen)));
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}

fn answer(
    req: &Request<Incoming>,
    name: &str,
    seen: &Mutex<Vec<Seen>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let headers = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let n = match seen.lock() {
        Ok(mut seen) => {
            seen.push(Seen {
                method: req.method().to_string(),
                uri: req.uri().to_string(),
                headers,
            });
            seen.len()
        }
        Err(_) => 0,
    };
    let response = Response::builder()
        .header("content-type", "text/plain")
        .header("x-target", name)
        .body(Full::new(Bytes::from(format!(
            "target {name} request {n}\n"
        ))))
        .expect("response");
    Ok(response)
}

/// An HTTPS server (`openssl s_server -www`, real OpenSSL) on 127.0.0.1 (random port), its
/// certificate issued for one DNS name and for 127.0.0.1 by a CA made for it ([`Self::ca_file`]).
/// It answers `GET /` with `200` and an HTML status page; it does not count requests.
pub struct TlsTarget {
    daemon: Daemon,
    name: String,
    port: u16,
    dir: TempDir,
}

impl TlsTarget {
    pub fn start(dns_name: &str) -> TlsTarget {
        let openssl = tool("openssl", "openssl");
        let dir = TempDir::new("tls");
        issue_certificates(&openssl, &dir, dns_name);
        let mut cmd = Command::new(&openssl);
        cmd.current_dir(dir.path()).args([
            "s_server",
            "-www",
            "-accept",
            "127.0.0.1:0",
            "-cert",
            "server.crt",
            "-key",
            "server.key",
        ]);
        let mut daemon = Daemon::spawn("openssl s_server", &mut cmd, dir.join("s_server.log"));
        // It prints the port the kernel gave it: `ACCEPT 127.0.0.1:PORT`.
        let output = daemon.output.clone();
        let port = || {
            read(&output).lines().find_map(|l| {
                l.strip_prefix("ACCEPT 127.0.0.1:")?
                    .trim()
                    .parse::<u16>()
                    .ok()
            })
        };
        if let Err(e) = daemon.wait_ready("openssl s_server listening", || port().is_some()) {
            panic!("{e}\n{}", daemon.output());
        }
        let port = port().expect("port");
        TlsTarget {
            daemon,
            name: dns_name.to_string(),
            port,
            dir,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA certificate (PEM) that issued the server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// `https://HOST:PORT/` for this target under the name `host`.
    pub fn url(&self, host: &str) -> String {
        format!("https://{host}:{}/", self.port)
    }

    pub fn logs(&self) -> String {
        format!("----- openssl s_server\n{}", self.daemon.output())
    }
}

impl Drop for TlsTarget {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "tls target {} (port {}):\n{}",
                self.name,
                self.port,
                self.logs()
            );
        }
    }
}

/// ca.crt/ca.key and server.crt/server.key (P-256) in `dir`, the server's for `dns_name` and
/// 127.0.0.1, valid for two days.
fn issue_certificates(openssl: &Path, dir: &TempDir, dns_name: &str) {
    assert!(
        !dns_name.is_empty() && !dns_name.contains(|c: char| c.is_whitespace() || c == ','),
        "a TLS target's name is one DNS name: {dns_name:?}"
    );
    // Every argument is one word: the commands are written as lines.
    let ssl = |args: &str| {
        let mut cmd = Command::new(openssl);
        run(
            cmd.current_dir(dir.path()).args(args.split_whitespace()),
            "",
        );
    };
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    ssl(&format!(
        "req -x509 {key} -keyout ca.key -out ca.crt -days 2 -subj /CN=egress-proxy-test-ca \
         -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
    ));
    ssl(&format!(
        "req {key} -keyout server.key -out server.csr -subj /CN={dns_name}"
    ));
    write(
        &dir.join("server.ext"),
        &format!(
            "subjectAltName=DNS:{dns_name},IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             extendedKeyUsage=serverAuth\n"
        ),
    );
    ssl(
        "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
         -days 2 -extfile server.ext",
    );
}
