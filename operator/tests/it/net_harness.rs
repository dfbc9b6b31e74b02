//! The network harness of `common::net` (targets, real proxies, the isolated client network),
//! proven with the real curl running inside the isolated network: what is bridged is reachable,
//! what is not is refused, and the proxies authenticate, refuse and tunnel as documented there.

use crate::common;

use std::net::Ipv4Addr;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use common::net::{
    FORBIDDEN_STATUS, Isolated, NO_CREDENTIALS_STATUS, Proxy, ProxyConfig, ProxyKind, Target,
    TlsTarget, tool,
};

const LOCAL: Ipv4Addr = Ipv4Addr::LOCALHOST;
const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// What curl did: its exit code, the response's status, the CONNECT status and the body.
#[derive(Debug)]
struct Curl {
    exit: i32,
    status: u16,
    connect: u16,
    body: String,
    stderr: String,
}

/// curl inside `net` with `args`, without the test's environment (no proxy variables, no
/// .curlrc).
async fn curl(net: &Isolated, args: &[&str]) -> Curl {
    let out = net
        .command(tool("curl", "curl"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["-q", "-sS", "--max-time", "10"])
        .args(["-w", "\n%{http_code} %{http_connect}"])
        .args(args)
        .output()
        .await
        .expect("run curl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, codes) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    let mut codes = codes.split(' ').map(|c| c.parse().unwrap_or(0));
    Curl {
        exit: out.status.code().unwrap_or(-1),
        status: codes.next().unwrap_or(0),
        connect: codes.next().unwrap_or(0),
        body: body.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn direct_paths_reach_only_what_is_bridged() {
    let internal = Target::start("internal");
    let external = Target::start("external");
    let net = Isolated::builder()
        .port(internal.port())
        .alias_at(SERVICE_IP, 443, internal.port())
        .host("internal.corp.test", LOCAL)
        .host("external.test", LOCAL)
        .host("kubernetes.default.svc", SERVICE_IP)
        .start();

    let ok = curl(&net, &[&internal.url("internal.corp.test")]).await;
    assert_eq!((ok.exit, ok.status), (0, 200), "{ok:?}");
    assert_eq!(ok.body, "target internal request 1\n");
    assert_eq!(internal.requests(), 1);

    // A Service IP exists inside and reaches what it is bridged to, by address and by name.
    let service = curl(&net, &["http://kubernetes.default.svc:443/"]).await;
    assert_eq!((service.exit, service.status), (0, 200), "{service:?}");
    let by_ip = curl(&net, &[&format!("http://{SERVICE_IP}:443/")]).await;
    assert_eq!((by_ip.exit, by_ip.status), (0, 200), "{by_ip:?}");
    assert_eq!(internal.requests(), 3);
    let other_port = curl(&net, &[&format!("http://{SERVICE_IP}:80/")]).await;
    assert_eq!(other_port.exit, 7, "{other_port:?}");
    let nowhere = curl(&net, &["http://10.96.0.2/"]).await;
    assert_eq!(
        nowhere.exit, 7,
        "no route to an address not given: {nowhere:?}"
    );

    // The external target resolves inside but its port is not bridged: refused, never served.
    let refused = curl(&net, &[&external.url("external.test")]).await;
    assert_eq!(refused.exit, 7, "{refused:?}");
    assert!(refused.stderr.contains("Failed to connect"), "{refused:?}");
    let refused = curl(&net, &[&external.url("127.0.0.1")]).await;
    assert_eq!(refused.exit, 7, "{refused:?}");
    assert_eq!(external.requests(), 0);
}

/// The external target through the proxy (plain HTTP and CONNECT), with right, wrong and no
/// credentials, and the forbidden target refused; none of the targets is bridged.
async fn proxy_paths(kind: ProxyKind, password: &str) {
    let external = Target::start("external");
    let forbidden = Target::start("forbidden");
    let tls = TlsTarget::start("external.test");
    let config = ProxyConfig::new("probe", password)
        .deny("forbidden.test")
        .connect_port(tls.port())
        .resolve("external.test", LOCAL)
        .resolve("forbidden.test", LOCAL);
    let proxy = Proxy::start(kind, &config);
    let net = Isolated::builder()
        .port(proxy.port())
        .host("external.test", LOCAL)
        .host("forbidden.test", LOCAL)
        .start();
    let (authed, wrong) = (proxy.authed_url(), proxy.url_with("probe", "wrong"));
    let ext = external.url("external.test");

    let direct = curl(&net, &[&ext]).await;
    assert_eq!(direct.exit, 7, "{direct:?}");

    let ok = curl(&net, &["-x", &authed, &ext]).await;
    assert_eq!((ok.exit, ok.status), (0, 200), "{ok:?}");
    assert_eq!(ok.body, "target external request 1\n");
    let seen = &external.seen()[0];
    assert_eq!(seen.uri, "/", "origin form from the proxy");
    assert!(seen.header("via").is_some(), "{seen:?}");
    assert!(seen.header("proxy-authorization").is_none(), "{seen:?}");

    let bad = curl(&net, &["-x", &wrong, &ext]).await;
    assert_eq!(
        (bad.exit, bad.status),
        (0, kind.wrong_password_status()),
        "{bad:?}"
    );
    let anonymous = curl(&net, &["-x", &proxy.url(), &ext]).await;
    assert_eq!(anonymous.status, NO_CREDENTIALS_STATUS, "{anonymous:?}");
    assert_eq!(external.requests(), 1);

    let refused = curl(&net, &["-x", &authed, &forbidden.url("forbidden.test")]).await;
    assert_eq!(
        (refused.exit, refused.status),
        (0, FORBIDDEN_STATUS),
        "{refused:?}"
    );
    assert_eq!(forbidden.requests(), 0);

    // HTTPS through CONNECT: curl reports the proxy's answer as http_connect and exits 56.
    let ca = tls.ca_file();
    let ca = ca.to_str().expect("utf-8 path");
    let https = tls.url("external.test");
    let tunnel = curl(&net, &["--cacert", ca, "-x", &authed, &https]).await;
    assert_eq!(
        (tunnel.exit, tunnel.connect, tunnel.status),
        (0, 200, 200),
        "{tunnel:?}"
    );
    let bad = curl(&net, &["--cacert", ca, "-x", &wrong, &https]).await;
    assert_eq!(
        (bad.exit, bad.connect),
        (56, kind.wrong_password_status()),
        "{bad:?}"
    );
    let anonymous = curl(&net, &["--cacert", ca, "-x", &proxy.url(), &https]).await;
    assert_eq!(
        (anonymous.exit, anonymous.connect),
        (56, NO_CREDENTIALS_STATUS),
        "{anonymous:?}"
    );
    let refused = curl(
        &net,
        &["--cacert", ca, "-x", &authed, &tls.url("forbidden.test")],
    )
    .await;
    assert_eq!(
        (refused.exit, refused.connect),
        (56, FORBIDDEN_STATUS),
        "{refused:?}"
    );
    let port = format!("https://external.test:{}/", external.port());
    let port = curl(&net, &["-x", &authed, &port]).await;
    assert_eq!(
        (port.exit, port.connect),
        (56, FORBIDDEN_STATUS),
        "{port:?}"
    );
    let direct = curl(&net, &["--cacert", ca, &https]).await;
    assert_eq!(direct.exit, 7, "{direct:?}");
    assert_eq!((external.requests(), forbidden.requests()), (1, 0));
}

#[tokio::test]
async fn tinyproxy_authenticates_refuses_and_tunnels() {
    proxy_paths(ProxyKind::Tinyproxy, "s3cret.pw").await;
}

#[tokio::test]
async fn squid_authenticates_refuses_and_tunnels() {
    // A password that must be percent-encoded in the proxy URL.
    proxy_paths(ProxyKind::Squid, "s3cret:/@%").await;
}

#[tokio::test]
async fn port_alias_offers_the_tls_target_on_443_by_name() {
    let tls = TlsTarget::start("external.test");
    let net = Isolated::builder()
        .alias(443, tls.port())
        .host("external.test", LOCAL)
        .start();
    let ca = tls.ca_file();
    let ca = ca.to_str().expect("utf-8 path");
    let ok = curl(&net, &["--cacert", ca, "https://external.test/"]).await;
    assert_eq!((ok.exit, ok.status), (0, 200), "{ok:?}");
    // Its real port is not bridged.
    let direct = curl(&net, &["--cacert", ca, &tls.url("external.test")]).await;
    assert_eq!(direct.exit, 7, "{direct:?}");
}

#[tokio::test]
async fn wrapped_program_keeps_its_pid_status_output_and_environment() {
    let target = Target::start("internal");
    let net = Isolated::builder().port(target.port()).start();
    let sh = net.wrap("/bin/sh");

    // The bridges inside are the program's children (it is the shell that set them up, after
    // its exec): print them, its PID, and exit with a status of its own.
    // (`read` is a builtin: no child of its own in the list.)
    let script =
        "echo \"pid $$\"; read -r c </proc/$$/task/$$/children; echo $c; echo err >&2; exit 3";
    let child = tokio::process::Command::new(&sh)
        .args(["-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run wrapped sh");
    let pid = child.id().expect("pid");
    let out = child.wait_with_output().await.expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(format!("pid {pid}").as_str()),
        "{stdout}"
    );
    let bridges: Vec<String> = lines
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect();
    assert_eq!(bridges.len(), 1, "one bridge: {stdout}");
    // They die with the program (gone or a zombie waiting for init).
    common::eventually("the bridge inside to end with the program", || async {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", bridges[0]));
        stat.map_or(true, |s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
        .then_some(())
    })
    .await;

    let killed = tokio::process::Command::new(&sh)
        .args(["-c", "kill -TERM $$"])
        .status()
        .await
        .expect("run wrapped sh");
    assert_eq!(killed.signal(), Some(15), "{killed:?}");

    let env = tokio::process::Command::new(net.wrap("/usr/bin/env"))
        .env_clear()
        .env("ONLY", "this")
        .output()
        .await
        .expect("run wrapped env");
    let env = String::from_utf8_lossy(&env.stdout);
    let vars: Vec<&str> = env.lines().filter(|l| !l.starts_with("PWD=")).collect();
    assert_eq!(vars, ["ONLY=this"], "{env}");
}
