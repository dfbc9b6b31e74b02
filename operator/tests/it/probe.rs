//! `egress-proxy-operator probe` run by hand, as from a shell in a Pod: inside an isolated
//! network where only the internal service, the Kubernetes Service and the proxy are
//! reachable, against real tinyproxy and squid. The external and forbidden targets exist only
//! behind the proxy, so `Proxied`, `Blocked` and "would leak direct" are facts of the network.

use crate::common;

use std::net::Ipv4Addr;

use common::net::{Isolated, Proxy, ProxyConfig, ProxyKind, Target, TlsTarget};
use serde_json::Value;

const LOCAL: Ipv4Addr = Ipv4Addr::LOCALHOST;
const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
const SERVICE: &str = "kubernetes.default.svc.cluster.local";
const USER: &str = "probe";
const PASSWORD: &str = "Sentinel-pw-5d1e";

/// The targets, a proxy in front of the external ones, and the client network.
struct World {
    internal: Target,
    external: Target,
    forbidden: Target,
    service: TlsTarget,
    external_tls: TlsTarget,
    proxy: Proxy,
    net: Isolated,
}

impl World {
    /// `leaky`: the forbidden target is also reachable directly.
    fn start(kind: ProxyKind, leaky: bool) -> World {
        let internal = Target::start("internal");
        let external = Target::start("external");
        let forbidden = Target::start("forbidden");
        let service = TlsTarget::start(SERVICE);
        let external_tls = TlsTarget::start("secure.external.test");
        let proxy = Proxy::start(
            kind,
            &ProxyConfig::new(USER, PASSWORD)
                .deny("forbidden.test")
                .connect_port(external_tls.port())
                .resolve("external.test", LOCAL)
                .resolve("secure.external.test", LOCAL)
                .resolve("forbidden.test", LOCAL),
        );
        let mut net = Isolated::builder()
            .port(internal.port())
            .port(proxy.port())
            .alias_at(SERVICE_IP, 443, service.port())
            .host("internal.corp.test", LOCAL)
            .host(SERVICE, SERVICE_IP);
        if leaky {
            net = net.port(forbidden.port()).host("forbidden.test", LOCAL);
        }
        World {
            internal,
            external,
            forbidden,
            service,
            external_tls,
            proxy,
            net: net.start(),
        }
    }

    /// The four paths (the external one over http and over https).
    fn endpoints(&self) -> Vec<String> {
        vec![
            format!("https://{SERVICE}/=Direct"),
            format!("{}=Direct", self.internal.url("internal.corp.test")),
            format!("{}=Proxied", self.external.url("external.test")),
            format!("{}=Proxied", self.external_tls.url("secure.external.test")),
            format!("{}=Blocked", self.forbidden.url("forbidden.test")),
        ]
    }

    /// Runs the probe inside the network with the six variables; returns the exit code, the
    /// results, and everything it wrote (stdout, stderr, termination log).
    fn probe(&self, proxy_url: &str, no_proxy: &str) -> (i32, Vec<Value>, String) {
        let log = self.net.dir().join("termination-log");
        let mut cmd = self
            .net
            .std_command(env!("CARGO_BIN_EXE_egress-proxy-operator"));
        cmd.env_clear()
            .args(["probe", "--dialect", "portable", "--timeout", "5"]);
        for e in self.endpoints() {
            cmd.args(["--endpoint", &e]);
        }
        cmd.arg("--ca-file").arg(self.service.ca_file());
        cmd.arg("--ca-file").arg(self.external_tls.ca_file());
        cmd.arg("--termination-log").arg(&log);
        for (name, value) in [
            ("HTTP_PROXY", proxy_url),
            ("http_proxy", proxy_url),
            ("HTTPS_PROXY", proxy_url),
            ("https_proxy", proxy_url),
            ("NO_PROXY", no_proxy),
            ("no_proxy", no_proxy),
        ] {
            cmd.env(name, value);
        }
        let out = cmd.output().expect("run the probe");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let results: Vec<Value> = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}\n{}", self.proxy.logs()));
        let message = std::fs::read_to_string(&log).expect("termination log");
        let short: Vec<Value> = serde_json::from_str(&message).expect("termination message");
        assert_eq!(
            short, results,
            "the termination message holds the same results"
        );
        let all = format!("{stdout}\n{stderr}\n{message}");
        (out.status.code().unwrap_or(-1), results, all)
    }
}

const NO_PROXY: &str = "internal.corp.test,.cluster.local,localhost,127.0.0.1";

fn summary(results: &[Value]) -> Vec<(String, bool)> {
    results
        .iter()
        .map(|r| (r["got"].as_str().unwrap_or("").to_owned(), r["ok"] == true))
        .collect()
}

fn pass(kind: ProxyKind) {
    let w = World::start(kind, false);
    let (code, results, _) = w.probe(&w.proxy.authed_url(), NO_PROXY);
    let got = summary(&results);
    assert_eq!(
        got,
        [
            ("Direct".into(), true),
            ("Direct".into(), true),
            ("Proxied".into(), true),
            ("Proxied".into(), true),
            ("Blocked".into(), true),
        ],
        "{results:#?}"
    );
    assert_eq!(code, 0);
    assert_eq!(
        results[0]["dns"],
        serde_json::json!([SERVICE_IP.to_string()])
    );
    assert_eq!(results[2]["viaProxy"], true);
    assert_eq!(results[2]["statusCode"], 200);
    assert_eq!(results[4]["statusCode"], 403);
    assert_eq!(
        w.internal.requests(),
        1,
        "the internal service was reached directly"
    );
    assert_eq!(
        w.external.requests(),
        1,
        "the external target was reached through the proxy"
    );
    assert!(w.external.seen()[0].header("proxy-authorization").is_none());
    assert_eq!(
        w.forbidden.requests(),
        0,
        "the forbidden target was never reached"
    );
}

#[test]
fn all_four_paths_pass_through_tinyproxy() {
    pass(ProxyKind::Tinyproxy);
}

#[test]
fn all_four_paths_pass_through_squid() {
    pass(ProxyKind::Squid);
}

fn wrong_password(kind: ProxyKind) {
    let w = World::start(kind, false);
    let wrong = w.proxy.url_with(USER, "Sentinel-wrong-9c2b");
    let (code, results, all) = w.probe(&wrong, NO_PROXY);
    assert_eq!(code, 1);
    let status = kind.wrong_password_status();
    for r in &results[2..4] {
        assert_eq!(
            (r["got"].as_str(), r["ok"].as_bool()),
            (Some("Failed"), Some(false)),
            "{r:#}"
        );
        assert_eq!(r["statusCode"], status);
        assert_eq!(
            r["error"],
            format!("expected through the proxy: the proxy rejected the credentials ({status})")
        );
    }
    assert_eq!(
        results[0]["ok"], true,
        "the direct paths do not depend on the proxy"
    );
    assert!(
        !all.contains("Sentinel-wrong-9c2b"),
        "the password leaked: {all}"
    );
    assert!(!all.contains(PASSWORD));
    assert_eq!(w.external.requests(), 0);
}

#[test]
fn a_wrong_password_is_named_as_rejected_credentials_tinyproxy() {
    wrong_password(ProxyKind::Tinyproxy);
}

#[test]
fn a_wrong_password_is_named_as_rejected_credentials_squid() {
    wrong_password(ProxyKind::Squid);
}

#[test]
fn a_no_proxy_that_misses_the_service_domain_fails_the_first_path() {
    let w = World::start(ProxyKind::Squid, false);
    let (code, results, _) = w.probe(&w.proxy.authed_url(), "internal.corp.test,.svc,localhost");
    assert_eq!(code, 1);
    let r = &results[0];
    assert_eq!(r["ok"], false);
    assert_eq!(r["viaProxy"], true, "{r:#}");
    let error = r["error"].as_str().unwrap_or("");
    assert!(
        error.starts_with("expected direct: the client goes through the proxy http://probe:***@"),
        "{error}"
    );
    assert!(
        results[1..].iter().all(|r| r["ok"] == true),
        "the other paths still pass: {results:#?}"
    );
}

#[test]
fn a_forbidden_target_reachable_directly_would_leak() {
    let w = World::start(ProxyKind::Tinyproxy, true);
    let (code, results, _) = w.probe(&w.proxy.authed_url(), NO_PROXY);
    assert_eq!(code, 1);
    let r = &results[4];
    assert_eq!(
        (r["got"].as_str(), r["ok"].as_bool()),
        (Some("Blocked"), Some(false)),
        "{r:#}"
    );
    assert_eq!(
        r["error"],
        "would leak direct: the proxy refuses it, but it answers without the proxy (HTTP 200)"
    );
    assert_eq!(
        w.forbidden.requests(),
        1,
        "the direct check really reached it"
    );
}

#[test]
fn bad_arguments_get_a_clear_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
        .args(["probe", "--endpoint", "https://example.org/=Sideways"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown path \"Sideways\"; expected Direct, Proxied or Blocked"),
        "{stderr}"
    );
}
