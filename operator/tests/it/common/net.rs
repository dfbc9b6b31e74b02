//! Real networks for tests: HTTP and HTTPS targets, real proxies (tinyproxy and squid) and an
//! isolated client network in which only the ports a test names are reachable, so that "this
//! target is reachable only through the proxy" is a fact of the network and not of a setting.
//!
//! # Layout
//!
//! Everything the harness starts listens on `127.0.0.1` of the test's own network namespace (the
//! host side) on a port the kernel picks. The program under test runs in an [`Isolated`]
//! network: fresh user, network and mount namespaces (`unshare -rnm`) with only loopback, where
//! a TCP port is reachable only if the test bridged it.
//!
//! ```text
//!   isolated namespace (program, e.g. the probe)      host side (the test process)
//!   /etc/hosts = the names the test gave
//!   ADDR:PORT  socat ──► DIR/h<H>.sock (Unix socket) ──► socat ──► 127.0.0.1:H  target / proxy
//!   any other port: connection refused; any other address: unreachable (both curl exit 7)
//!
//!   proxy (tinyproxy or squid, host side, 127.0.0.1:P)
//!   resolves the target names through its own hosts file ──► 127.0.0.1:<target port>
//! ```
//!
//! * A bridge listens inside on `ADDR:PORT` and reaches host port `H`. [`IsolatedBuilder::port`]
//!   bridges a port to the same number on all addresses (`0.0.0.0`); [`IsolatedBuilder::alias`]
//!   offers another port number inside (443 inside ► a [`TlsTarget`]'s random port);
//!   [`IsolatedBuilder::alias_at`] does so on one address only (two services on 443).
//! * Names: the isolated `/etc/hosts` holds `localhost` and the [`IsolatedBuilder::host`]
//!   entries (glibc resolves through `files` first: Debian's nsswitch is `files dns`). IPv4
//!   addresses outside 127/8 named there (a Service IP such as `10.96.0.1`) or in `alias_at`
//!   are added to the isolated loopback, so they exist inside; a port on them is reachable only
//!   if bridged. There is no route anywhere else (unreachable) and no DNS.
//! * The usual setup for the four paths of the probe: bridge the internal target (and the
//!   Kubernetes API or a Service on its IP) and the proxy's port; give the external and
//!   forbidden names in the hosts file or not at all, but never bridge their ports: the only
//!   way to them is the proxy, which resolves them itself ([`ProxyConfig::resolve`]).
//! * The program is exec'd by `operator/tests/net/isolate.sh` once every bridge is in LISTEN
//!   state inside (read with `ss`; the kernel then accepts connections): no race with its first
//!   connection. Its PID (the one the caller spawned), exit status, signals, stdin, stdout,
//!   stderr and environment are its own (plus `PWD`, which `/bin/sh` exports); it runs as uid 0
//!   of the new user namespace (the caller's uid outside). Set-up failures exit 125 with a line
//!   on stderr. The bridges inside die with the program (parent-death signal).
//! * [`Isolated::wrap`] writes a shell script that runs one program inside with `"$@"`, for
//!   places that want a program path (kube-sim mapping an image to a local program).
//!
//! A probe test, say:
//!
//! ```rust,ignore
//! let internal = Target::start("internal");
//! let external = Target::start("external");
//! let forbidden = Target::start("forbidden");
//! let proxy = Proxy::squid(
//!     &ProxyConfig::new("probe", "secret")
//!         .deny("forbidden.test")
//!         .resolve("external.test", Ipv4Addr::LOCALHOST)
//!         .resolve("forbidden.test", Ipv4Addr::LOCALHOST),
//! );
//! let net = Isolated::builder()
//!     .port(internal.port())
//!     .port(proxy.port())
//!     .host("internal.corp.test", Ipv4Addr::LOCALHOST)
//!     .start();
//! let probe = net.wrap(env!("CARGO_BIN_EXE_egress-proxy-operator")); // e.g. kube-sim's image map
//! // HTTP_PROXY=proxy.authed_url(), NO_PROXY=internal.corp.test, targets
//! // internal.url("internal.corp.test"), external.url("external.test"),
//! // forbidden.url("forbidden.test"); then external.requests() == 1, forbidden.requests() == 0.
//! ```
//!
//! # Proxies
//!
//! [`Proxy::tinyproxy`] and [`Proxy::squid`] start the real proxies from a [`ProxyConfig`]: basic
//! authentication with one user, refused host names (exact names, checked after
//! authentication), the ports CONNECT may reach (none if the list is empty), and the names the
//! proxy resolves. Both resolve names from a hosts file the harness writes: squid through its
//! own `hosts_file` directive (it does not use nsswitch), tinyproxy (which resolves through
//! glibc) inside `unshare -rm` with the file bind-mounted over `/etc/hosts`. Squid, started as
//! root, drops to the `proxy` user and so gets a directory owned by `proxy`; no disk cache, and
//! nothing written outside its temporary directory.
//!
//! Status codes the proxies answer, observed with curl against tinyproxy 1.11.1 and squid 5.7
//! (Debian 12) and asserted by `operator/tests/it/net_harness.rs`, the same for a plain-HTTP
//! absolute-form request and for CONNECT (where curl reports it as `%{http_connect}` and
//! exits 56):
//!
//! | request                        | tinyproxy 1.11 | squid 5 |
//! |--------------------------------|----------------|---------|
//! | no credentials                 | 407            | 407     |
//! | wrong password                 | **401**        | 407     |
//! | refused host (right password)  | 403            | 403     |
//! | CONNECT to a port not allowed  | 403            | 403     |
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

// ---------------------------------------------------------------------------------------------
// Proxies

/// The status a proxy answers to a request without credentials (both proxies).
pub const NO_CREDENTIALS_STATUS: u16 = 407;
/// The status a proxy answers for a refused host name or CONNECT port (both proxies).
pub const FORBIDDEN_STATUS: u16 = 403;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyKind {
    Tinyproxy,
    Squid,
}

impl ProxyKind {
    pub fn name(self) -> &'static str {
        match self {
            ProxyKind::Tinyproxy => "tinyproxy",
            ProxyKind::Squid => "squid",
        }
    }

    /// The status the proxy answers to a wrong password, plain request or CONNECT: tinyproxy
    /// 1.11 answers 401 (with `WWW-Authenticate`), squid 407 (a new challenge).
    pub fn wrong_password_status(self) -> u16 {
        match self {
            ProxyKind::Tinyproxy => 401,
            ProxyKind::Squid => 407,
        }
    }
}

/// What a test proxy enforces. Host names and credentials are single words (no blanks, quotes
/// or `#`): they go into the proxies' configuration files as they are. tinyproxy takes user
/// names and passwords of `[-A-Za-z0-9._]` only; squid any (test percent-encoding with squid).
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    pub user: String,
    pub password: String,
    /// Host names refused with 403 (exact names), after authentication.
    pub deny: Vec<String>,
    /// The ports CONNECT may reach; none when empty.
    pub connect_ports: Vec<u16>,
    /// The names the proxy resolves, and to what.
    pub hosts: Vec<(String, IpAddr)>,
}

impl ProxyConfig {
    pub fn new(user: &str, password: &str) -> ProxyConfig {
        ProxyConfig {
            user: user.to_string(),
            password: password.to_string(),
            deny: Vec::new(),
            connect_ports: Vec::new(),
            hosts: Vec::new(),
        }
    }

    pub fn deny(mut self, host: &str) -> Self {
        self.deny.push(host.to_string());
        self
    }

    pub fn connect_port(mut self, port: u16) -> Self {
        self.connect_ports.push(port);
        self
    }

    pub fn resolve(mut self, name: &str, ip: impl Into<IpAddr>) -> Self {
        self.hosts.push((name.to_string(), ip.into()));
        self
    }

    fn check(&self, kind: ProxyKind) {
        let words = [&self.user, &self.password]
            .into_iter()
            .chain(&self.deny)
            .chain(self.hosts.iter().map(|(n, _)| n));
        for w in words {
            assert!(
                !w.is_empty() && !w.contains(|c: char| c.is_whitespace() || "\"'#".contains(c)),
                "proxy config: {w:?} must be one word without quotes or #"
            );
        }
        // tinyproxy's configuration grammar takes BasicAuth words of [-A-Za-z0-9._] only.
        let plain = |w: &str| {
            w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        };
        assert!(
            kind != ProxyKind::Tinyproxy || (plain(&self.user) && plain(&self.password)),
            "tinyproxy takes user names and passwords of [-A-Za-z0-9._] only; squid takes any"
        );
    }
}

/// A real proxy on 127.0.0.1 (random port), killed on drop.
pub struct Proxy {
    daemon: Daemon,
    kind: ProxyKind,
    port: u16,
    config: ProxyConfig,
    dir: TempDir,
}

impl Proxy {
    pub fn tinyproxy(config: &ProxyConfig) -> Proxy {
        Proxy::start(ProxyKind::Tinyproxy, config)
    }

    pub fn squid(config: &ProxyConfig) -> Proxy {
        Proxy::start(ProxyKind::Squid, config)
    }

    pub fn start(kind: ProxyKind, config: &ProxyConfig) -> Proxy {
        config.check(kind);
        let dir = TempDir::new(kind.name());
        write(&dir.join("hosts"), &hosts_file(&config.hosts));
        match kind {
            ProxyKind::Tinyproxy => write(&dir.join("filter"), &lines(&config.deny)),
            ProxyKind::Squid => squid_prepare(&dir, config),
        }
        // The port is free when picked; another process may take it before the proxy binds:
        // then the proxy exits and it is tried again on another port.
        let mut failures = String::new();
        for _ in 0..3 {
            let port = free_port();
            let (mut cmd, ready_file, ready_line) = match kind {
                ProxyKind::Tinyproxy => tinyproxy_command(&dir, config, port),
                ProxyKind::Squid => squid_command(&dir, config, port),
            };
            let _ = fs::remove_file(&ready_file);
            let mut daemon = Daemon::spawn(kind.name(), &mut cmd, dir.join("output.log"));
            let ready = || read(&ready_file).contains(ready_line);
            match daemon.wait_ready(&format!("{} listening", kind.name()), ready) {
                Ok(()) => {
                    let config = config.clone();
                    return Proxy {
                        daemon,
                        kind,
                        port,
                        config,
                        dir,
                    };
                }
                Err(e) => {
                    drop(daemon);
                    let _ = writeln!(failures, "{e}");
                }
            }
        }
        panic!(
            "{} did not start:\n{failures}{}",
            kind.name(),
            Proxy::files(kind, &dir)
        );
    }

    pub fn kind(&self) -> ProxyKind {
        self.kind
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// `http://127.0.0.1:PORT`, no credentials.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://USER:PASSWORD@127.0.0.1:PORT`, both percent-encoded.
    pub fn url_with(&self, user: &str, password: &str) -> String {
        let (user, password) = (percent_encode(user), percent_encode(password));
        format!("http://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// The URL with the configured (right) credentials.
    pub fn authed_url(&self) -> String {
        self.url_with(&self.config.user, &self.config.password)
    }

    /// The configuration and logs, for a failing test's output.
    pub fn logs(&self) -> String {
        Proxy::files(self.kind, &self.dir)
    }

    fn files(kind: ProxyKind, dir: &TempDir) -> String {
        let names: &[&str] = match kind {
            ProxyKind::Tinyproxy => &[
                "tinyproxy.conf",
                "filter",
                "hosts",
                "output.log",
                "tinyproxy.log",
            ],
            ProxyKind::Squid => &[
                "squid.conf",
                "hosts",
                "output.log",
                "cache.log",
                "access.log",
            ],
        };
        sections(dir.path(), names)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{} on port {}:\n{}",
                self.kind.name(),
                self.port,
                self.logs()
            );
        }
    }
}

fn lines<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(|i| format!("{i}\n")).collect()
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// tinyproxy in the foreground, inside `unshare -rm` with its hosts file over /etc/hosts (it
/// resolves through glibc); ready when its log says it accepts connections.
fn tinyproxy_command(
    dir: &TempDir,
    config: &ProxyConfig,
    port: u16,
) -> (Command, PathBuf, &'static str) {
    let d = dir.path().display();
    let mut conf = format!(
        "Port {port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 100\nAllow 127.0.0.1\n\
         LogFile \"{d}/tinyproxy.log\"\nLogLevel Info\n\
         BasicAuth {} {}\n\
         Filter \"{d}/filter\"\nFilterType fnmatch\nFilterDefaultDeny No\n",
        config.user, config.password
    );
    // Without a ConnectPort line tinyproxy allows CONNECT to every port; 0 allows none.
    let ports = if config.connect_ports.is_empty() {
        &[0][..]
    } else {
        &config.connect_ports
    };
    for p in ports {
        let _ = writeln!(conf, "ConnectPort {p}");
    }
    write(&dir.join("tinyproxy.conf"), &conf);
    let mut cmd = Command::new(tool("unshare", "util-linux"));
    cmd.args([
        "-rm",
        "/bin/sh",
        "-c",
        r#"mount --bind "$1" /etc/hosts && shift && exec "$@""#,
        "sh",
    ])
    .arg(dir.join("hosts"))
    .arg(tool("tinyproxy", "tinyproxy"))
    .arg("-d")
    .arg("-c")
    .arg(dir.join("tinyproxy.conf"));
    (cmd, dir.join("tinyproxy.log"), "Starting main loop")
}

/// The password file (Apache MD5, which basic_ncsa_auth reads) and a directory squid's
/// `proxy` user may write when squid starts as root and drops to it.
fn squid_prepare(dir: &TempDir, config: &ProxyConfig) {
    let openssl = tool("openssl", "openssl");
    let hash = run(
        Command::new(openssl).args(["passwd", "-apr1", "-stdin"]),
        &config.password,
    );
    write(
        &dir.join("passwd"),
        &format!("{}:{}\n", config.user, hash.trim()),
    );
    if let Some((uid, gid)) = user_ids("proxy") {
        // Fails when not root; then squid runs as the current user and needs no other owner.
        let _ = std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid));
    }
}

/// squid without daemon (`-N`); ready when cache.log says it accepts HTTP connections.
fn squid_command(
    dir: &TempDir,
    config: &ProxyConfig,
    port: u16,
) -> (Command, PathBuf, &'static str) {
    let d = dir.path().display();
    let helper = Path::new("/usr/lib/squid/basic_ncsa_auth");
    assert!(
        helper.exists(),
        "net harness: {} not found; install it with `apt-get install -y squid`",
        helper.display()
    );
    let connect = if config.connect_ports.is_empty() {
        "http_access deny CONNECT\n".to_string()
    } else {
        format!(
            "acl connect_ports port {}\nhttp_access deny CONNECT !connect_ports\n",
            words(&config.connect_ports)
        )
    };
    let deny = if config.deny.is_empty() {
        String::new()
    } else {
        format!(
            "acl refused dstdomain {}\nhttp_access deny refused\n",
            words(&config.deny)
        )
    };
    let conf = format!(
        "http_port 127.0.0.1:{port}\n\
         visible_hostname egress-proxy-test-squid\n\
         cache_effective_user proxy\n\
         pid_filename {d}/squid.pid\ncache_log {d}/cache.log\naccess_log stdio:{d}/access.log\n\
         cache_store_log none\nnetdb_filename none\npinger_enable off\ncoredump_dir {d}\n\
         cache deny all\ncache_mem 8 MB\nshutdown_lifetime 0 seconds\n\
         hosts_file {d}/hosts\ndns_nameservers 127.0.0.1\n\
         auth_param basic program {} {d}/passwd\n\
         auth_param basic children 2 startup=1\nauth_param basic realm egress-proxy-test\n\
         acl CONNECT method CONNECT\nacl authenticated proxy_auth REQUIRED\n\
         http_access deny !authenticated\n{connect}{deny}http_access allow all\n",
        helper.display()
    );
    write(&dir.join("squid.conf"), &conf);
    let mut cmd = Command::new(tool("squid", "squid"));
    cmd.arg("-N").arg("-f").arg(dir.join("squid.conf"));
    (
        cmd,
        dir.join("cache.log"),
        "Accepting HTTP Socket connections",
    )
}

fn words<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A user's uid and gid from /etc/passwd.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    read(Path::new("/etc/passwd")).lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == user).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

// ---------------------------------------------------------------------------------------------
// The isolated client network

const ISOLATE_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/net/isolate.sh");

#[derive(Clone, Debug)]
struct Bridge {
    address: Ipv4Addr,
    inside: u16,
    host: u16,
}

/// What an [`Isolated`] network offers; [`Isolated::builder`] starts one.
#[derive(Clone, Debug, Default)]
pub struct IsolatedBuilder {
    bridges: Vec<Bridge>,
    hosts: Vec<(String, IpAddr)>,
}

impl IsolatedBuilder {
    /// Host port `port` reachable inside on the same number, on every address.
    pub fn port(self, port: u16) -> Self {
        self.alias(port, port)
    }

    /// Port `inside` (every address) reaching host port `host_port`.
    pub fn alias(self, inside: u16, host_port: u16) -> Self {
        self.alias_at(Ipv4Addr::UNSPECIFIED, inside, host_port)
    }

    /// `address:inside` reaching host port `host_port`; the address is added to lo.
    pub fn alias_at(mut self, address: Ipv4Addr, inside: u16, host_port: u16) -> Self {
        self.bridges.push(Bridge {
            address,
            inside,
            host: host_port,
        });
        self
    }

    /// An /etc/hosts entry inside; an IPv4 address outside 127/8 is added to lo.
    pub fn host(mut self, name: &str, ip: impl Into<IpAddr>) -> Self {
        self.hosts.push((name.to_string(), ip.into()));
        self
    }

    /// Starts the host side of the bridges and writes the scripts; returns once every host
    /// side listens.
    pub fn start(self) -> Isolated {
        for (program, package) in [
            ("socat", "socat"),
            ("ip", "iproute2"),
            ("ss", "iproute2"),
            ("setpriv", "util-linux"),
            ("mount", "mount"),
        ] {
            tool(program, package);
        }
        let unshare = tool("unshare", "util-linux");
        let dir = TempDir::new("isolated");
        write(&dir.join("hosts"), &hosts_file(&self.hosts));
        write(&dir.join("addresses"), &lines(&self.lo_addresses()));
        let socket = |port: u16| dir.join(&format!("h{port}.sock"));
        let bridges: String = self
            .bridges
            .iter()
            .map(|b| format!("{} {} {}\n", b.address, b.inside, socket(b.host).display()))
            .collect();
        write(&dir.join("bridges"), &bridges);
        write(&dir.join("bridge.log"), "");
        let mut host_ports: Vec<u16> = self.bridges.iter().map(|b| b.host).collect();
        host_ports.sort_unstable();
        host_ports.dedup();
        let forwarders = host_ports
            .iter()
            .map(|&port| forward(&dir, &socket(port), port))
            .collect();
        let runner = dir.join("run");
        write_script(&runner, &runner_script(&unshare, &dir, None));
        Isolated {
            forwarders,
            builder: self,
            unshare,
            runner,
            wrapped: AtomicU64::new(0),
            dir,
        }
    }

    fn lo_addresses(&self) -> Vec<Ipv4Addr> {
        let named = self.hosts.iter().filter_map(|(_, ip)| match ip {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        });
        let bridged = self.bridges.iter().map(|b| b.address);
        let mut all: Vec<Ipv4Addr> = named
            .chain(bridged)
            .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// The host side of a bridge: `socat` serving `socket`, forwarding each connection to
/// 127.0.0.1:port; returns once it listens (read from /proc/net/unix: no test connection).
fn forward(dir: &TempDir, socket: &Path, port: u16) -> Daemon {
    let mut cmd = Command::new(tool("socat", "socat"));
    cmd.arg(format!(
        "UNIX-LISTEN:{},fork,unlink-early",
        socket.display()
    ))
    .arg(format!("TCP:127.0.0.1:{port}"));
    let mut daemon = Daemon::spawn("socat", &mut cmd, dir.join(&format!("host-{port}.log")));
    let listening = || unix_listening(socket);
    if let Err(e) = daemon.wait_ready(&format!("bridge to port {port}"), listening) {
        panic!("{e}\n{}", daemon.output());
    }
    daemon
}

/// Whether a Unix stream socket listens on `path` in this network namespace.
fn unix_listening(path: &Path) -> bool {
    // Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 is __SO_ACCEPTCON.
    let path = path.to_string_lossy();
    read(Path::new("/proc/net/unix")).lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 8 && f[7] == path && f[3] == "00010000"
    })
}

/// The script that enters the network: with `program`, runs it with "$@"; without, runs "$@".
fn runner_script(unshare: &Path, dir: &TempDir, program: Option<&Path>) -> String {
    let program = program
        .map(|p| format!(" {}", sh_quote(&p.to_string_lossy())))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n# The isolated network of {} (operator/tests/it/common/net.rs).\n\
         exec {} -rnm /bin/sh {} {}{program} \"$@\"\n",
        dir.path().display(),
        sh_quote(&unshare.to_string_lossy()),
        sh_quote(ISOLATE_SH),
        sh_quote(&dir.path().to_string_lossy()),
    )
}

/// `s` quoted for /bin/sh.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn write_script(path: &Path, content: &str) {
    write(path, content);
    set_mode(path, 0o755);
}

/// An isolated client network (see the module doc): host-side bridges, killed on drop, and the
/// scripts that run programs inside. Programs still running inside when it drops lose their
/// bridged connections.
pub struct Isolated {
    forwarders: Vec<Daemon>,
    builder: IsolatedBuilder,
    unshare: PathBuf,
    runner: PathBuf,
    wrapped: AtomicU64,
    dir: TempDir,
}

impl Isolated {
    pub fn builder() -> IsolatedBuilder {
        IsolatedBuilder::default()
    }

    /// A script that runs its arguments (`PROGRAM ARG...`) inside.
    pub fn runner(&self) -> &Path {
        &self.runner
    }

    /// Writes a script that runs `program` inside with the script's arguments: a program path
    /// to give where a command is expected (kube-sim's image → program mapping).
    pub fn wrap(&self, program: impl AsRef<Path>) -> PathBuf {
        let program = program.as_ref();
        let n = self.wrapped.fetch_add(1, Ordering::Relaxed);
        let base = program
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = self.dir.join(&format!("wrap-{n}-{base}"));
        write_script(
            &path,
            &runner_script(&self.unshare, &self.dir, Some(program)),
        );
        path
    }

    /// `program` to run inside (tokio); add arguments, environment and stdio as usual.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.runner);
        cmd.arg(program);
        cmd
    }

    /// As [`Self::command`], a `std::process::Command`.
    pub fn std_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(&self.runner);
        cmd.arg(program);
        cmd
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The set-up files, the host-side forwarders' and the inside bridges' logs.
    pub fn logs(&self) -> String {
        let mut out = format!("{:#?}\n", self.builder);
        out += &sections(
            self.dir.path(),
            &["hosts", "addresses", "bridges", "bridge.log"],
        );
        for f in &self.forwarders {
            let _ = writeln!(out, "----- {}\n{}", f.output.display(), f.output());
        }
        out
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("isolated network:\n{}", self.logs());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A TLS-intercepting proxy (mitmproxy) and the CAs it signs with

/// A certificate authority made for a test with the openssl CLI: an RSA 2048 key and a
/// self-signed CA certificate (`basicConstraints CA:TRUE`, `keyCertSign`), valid 60 days (so
/// no expiry warning within the operator's default 30 days). The key stays in its directory.
pub struct TestCa {
    name: String,
    dir: TempDir,
}

impl TestCa {
    /// A CA whose subject is `/O=egress-proxy-test/CN=NAME` (NAME: letters, digits, `-`).
    pub fn new(name: &str) -> TestCa {
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "a test CA's name is one word of [-A-Za-z0-9]: {name:?}"
        );
        let dir = TempDir::new("ca");
        let args = format!(
            "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 60 \
             -subj /O=egress-proxy-test/CN={name} \
             -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign"
        );
        run(
            Command::new(tool("openssl", "openssl"))
                .current_dir(dir.path())
                .args(args.split_whitespace()),
            "",
        );
        TestCa {
            name: name.to_string(),
            dir,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The CA certificate (PEM file).
    pub fn cert_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        read(&self.cert_file())
    }

    /// The CA's private key, PEM (for tests of input that must be refused).
    pub fn key_pem(&self) -> String {
        read(&self.dir.join("ca.key"))
    }
}

/// mitmproxy's `mitmdump` on 127.0.0.1 (random port) as a TLS-intercepting proxy, killed on
/// drop: basic proxy authentication with the [`ProxyConfig`]'s user, every HTTPS certificate
/// re-signed with a [`TestCa`], the origins' own certificates verified against one CA file
/// (`ssl_verify_upstream_trusted_ca`, as a corporate proxy verifies public sites), and the
/// config's names resolved from a hosts file bind-mounted over /etc/hosts inside `unshare -rm`
/// (mitmproxy resolves through glibc), as for tinyproxy. It has no refused names and lets
/// CONNECT reach every port: `deny` and `connect_ports` must be empty.
///
/// Observed with mitmproxy 8.1.1 (Debian 12): no credentials → `407` (CONNECT too); a client
/// that does not trust the signing CA fails its handshake (`unknown ca`), logged by mitmdump.
pub struct Interceptor {
    daemon: Daemon,
    port: u16,
    config: ProxyConfig,
    upstream_ca: PathBuf,
    /// The signing CA's name, and how many times mitmdump was started.
    ca: String,
    starts: u32,
    dir: TempDir,
}

impl Interceptor {
    pub fn start(config: &ProxyConfig, ca: &TestCa, upstream_ca: &Path) -> Interceptor {
        assert!(
            config.deny.is_empty() && config.connect_ports.is_empty(),
            "mitmdump here refuses no names and allows CONNECT to every port"
        );
        config.check(ProxyKind::Squid);
        let dir = TempDir::new("mitmdump");
        write(&dir.join("hosts"), &hosts_file(&config.hosts));
        let mut failures = String::new();
        for n in 0..3 {
            let port = free_port();
            match mitmdump(&dir, config, upstream_ca, ca, port, n) {
                Ok(daemon) => {
                    return Interceptor {
                        daemon,
                        port,
                        config: config.clone(),
                        upstream_ca: upstream_ca.to_path_buf(),
                        ca: ca.name().to_string(),
                        starts: n + 1,
                        dir,
                    };
                }
                Err(e) => {
                    let _ = writeln!(failures, "{e}");
                }
            }
        }
        panic!("mitmdump did not start:\n{failures}{}", mitm_files(&dir, 3));
    }

    /// Restarts mitmdump on the same port, re-signing with `ca` from now on. Returns once it
    /// listens again; connections open until then are cut.
    pub fn switch_ca(&mut self, ca: &TestCa) {
        self.daemon.stop();
        let mut failures = String::new();
        // The port was ours a moment ago; another process may take it in between (then fail).
        for _ in 0..3 {
            let n = self.starts;
            self.starts += 1;
            match mitmdump(&self.dir, &self.config, &self.upstream_ca, ca, self.port, n) {
                Ok(daemon) => {
                    self.daemon = daemon;
                    self.ca = ca.name().to_string();
                    return;
                }
                Err(e) => {
                    let _ = writeln!(failures, "{e}");
                }
            }
        }
        panic!(
            "mitmdump did not restart on port {}:\n{failures}{}",
            self.port,
            self.logs()
        );
    }

    /// The name of the CA it signs with now.
    pub fn ca(&self) -> &str {
        &self.ca
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://USER:PASSWORD@127.0.0.1:PORT`, both percent-encoded.
    pub fn url_with(&self, user: &str, password: &str) -> String {
        let (user, password) = (percent_encode(user), percent_encode(password));
        format!("http://{user}:{password}@127.0.0.1:{}", self.port)
    }

    /// The URL with the configured (right) credentials.
    pub fn authed_url(&self) -> String {
        self.url_with(&self.config.user, &self.config.password)
    }

    /// The hosts file and the output of every start, for a failing test's output.
    pub fn logs(&self) -> String {
        mitm_files(&self.dir, self.starts)
    }
}

impl Drop for Interceptor {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "mitmdump on port {} (signing with {}):\n{}",
                self.port,
                self.ca,
                self.logs()
            );
        }
    }
}

impl Daemon {
    /// Kills the process and waits for its end (drop does the same).
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mitm_files(dir: &TempDir, starts: u32) -> String {
    let names: Vec<String> = (0..starts).map(|n| format!("output-{n}.log")).collect();
    let mut all = vec!["hosts"];
    all.extend(names.iter().map(String::as_str));
    sections(dir.path(), &all)
}

/// Start number `n` of mitmdump on `port`, signing with `ca` (its own confdir `ca-N` holding
/// `mitmproxy-ca.pem`, key then certificate, as mitmproxy reads it); ready when it says it
/// listens.
fn mitmdump(
    dir: &TempDir,
    config: &ProxyConfig,
    upstream_ca: &Path,
    ca: &TestCa,
    port: u16,
    n: u32,
) -> Result<Daemon, String> {
    let confdir = dir.join(&format!("ca-{n}"));
    fs::create_dir_all(&confdir).unwrap_or_else(|e| panic!("create {}: {e}", confdir.display()));
    write(
        &confdir.join("mitmproxy-ca.pem"),
        &(ca.key_pem() + &ca.cert_pem()),
    );
    let mut cmd = Command::new(tool("unshare", "util-linux"));
    cmd.args([
        "-rm",
        "/bin/sh",
        "-c",
        r#"mount --bind "$1" /etc/hosts && shift && exec "$@""#,
        "sh",
    ])
    .arg(dir.join("hosts"))
    .arg(tool("mitmdump", "mitmproxy"))
    .args(["--listen-host", "127.0.0.1", "--listen-port"])
    .arg(port.to_string())
    .arg("--set")
    .arg(format!("confdir={}", confdir.display()))
    .arg("--set")
    .arg(format!(
        "ssl_verify_upstream_trusted_ca={}",
        upstream_ca.display()
    ))
    .arg("--set")
    .arg(format!("proxyauth={}:{}", config.user, config.password))
    .args(["--set", "connection_strategy=lazy"])
    .env("HOME", dir.path());
    let output = dir.join(&format!("output-{n}.log"));
    let mut daemon = Daemon::spawn("mitmdump", &mut cmd, output.clone());
    let line = format!("Proxy server listening at 127.0.0.1:{port}");
    daemon
        .wait_ready("mitmdump listening", || read(&output).contains(&line))
        .map(|()| daemon)
}
