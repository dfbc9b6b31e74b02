//! `render systemd|env-file|shell|ci`: exact outputs from --no-proxy and from a policy the
//! operator reconciled in the in-memory API server; the containerd drop-in checked with
//! `systemd-analyze verify`; the shell snippet sourced by real shells; no credential printed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use egress_proxy_operator::api::EgressProxyPolicyStatus;

const SENTINEL: &str = "Sentinel-Pw-7f3a9";

fn bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
        .args(args)
        .env_clear()
        .output()
        .expect("run egress-proxy-operator")
}

/// Runs the binary off the runtime's threads (the API server runs on them).
async fn bin_async(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        bin(&refs)
    })
    .await
    .expect("join")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("epo-render-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

const ENTRIES: &str = ".svc,10.96.0.0/12,*.corp.example,registry.corp:5000";

const CONTAINERD: &str = "\
# egress-proxy-operator render systemd --daemon containerd
# NO_PROXY from --no-proxy, in Go syntax (containerd is a Go program).
#
# Install as /etc/systemd/system/containerd.service.d/http-proxy.conf (root, mode 0644),
# then apply it: it takes effect only when the daemon restarts.
#   systemctl daemon-reload && systemctl restart containerd
# Running containers keep running across a containerd restart (their shims are separate processes).
# HTTP_PROXY and HTTPS_PROXY, with the credentials, are read from /etc/egress-proxy/proxy.env
# (root, mode 0600), which must exist: write it from the template of
#   egress-proxy-operator render env-file
# Warning: go has no exact-host form: subdomains of these hosts also go direct: registry.corp
[Service]
EnvironmentFile=/etc/egress-proxy/proxy.env
Environment=\"NO_PROXY=.corp.example,.corp.example.,registry.corp:5000,registry.corp.:5000,svc,svc.,10.96.0.0/12\" \"no_proxy=.corp.example,.corp.example.,registry.corp:5000,registry.corp.:5000,svc,svc.,10.96.0.0/12\"
";

#[test]
fn systemd_dropin_from_flags() {
    let out = bin(&[
        "render",
        "systemd",
        "--daemon",
        "containerd",
        "--no-proxy",
        ENTRIES,
    ]);
    assert_eq!(stdout(&out), CONTAINERD);
    assert_eq!(
        stderr(&out),
        "warning: go has no exact-host form: subdomains of these hosts also go direct: registry.corp\n"
    );
    // The same entries split over several flags give the same file.
    let split = bin(&[
        "render",
        "systemd",
        "--daemon",
        "containerd",
        "--no-proxy",
        ".svc, 10.96.0.0/12",
        "--no-proxy",
        "*.corp.example,registry.corp:5000,",
    ]);
    assert_eq!(stdout(&split), CONTAINERD);
    for (daemon, unit) in [
        ("crio", "crio"),
        ("docker", "docker"),
        ("kubelet", "kubelet"),
    ] {
        let out = stdout(&bin(&[
            "render",
            "systemd",
            "--daemon",
            daemon,
            "--proxy-env-file",
            "/etc/kubernetes/proxy.env",
            "--no-proxy",
            ENTRIES,
        ]));
        let tail = CONTAINERD
            .split_once("[Service]\n")
            .expect("section")
            .1
            .replace("/etc/egress-proxy/proxy.env", "/etc/kubernetes/proxy.env");
        assert!(out.ends_with(&format!("[Service]\n{tail}")), "{out}");
        let install = format!("# Install as /etc/systemd/system/{unit}.service.d/http-proxy.conf ");
        assert!(out.contains(&install), "{out}");
        let restart = format!("\n#   systemctl daemon-reload && systemctl restart {unit}\n");
        assert!(out.contains(&restart), "{out}");
    }
}

#[test]
fn env_file_shell_and_ci_from_flags() {
    let out = stdout(&bin(&["render", "env-file"]));
    assert!(out.ends_with(
        "HTTP_PROXY=http://USER:PASSWORD@PROXY-HOST:PORT\n\
         HTTPS_PROXY=http://USER:PASSWORD@PROXY-HOST:PORT\n\
         http_proxy=http://USER:PASSWORD@PROXY-HOST:PORT\n\
         https_proxy=http://USER:PASSWORD@PROXY-HOST:PORT\n"
    ));
    assert!(out.contains("# Install as /etc/egress-proxy/proxy.env (root, mode 0600)"));

    let out = bin(&[
        "render",
        "shell",
        "--dialect",
        "curl",
        "--no-proxy",
        ENTRIES,
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("\nexport NO_PROXY='.svc,10.96.0.0/12'\n"),
        "{text}"
    );
    assert!(text.contains("\negress_proxy_file='/etc/egress-proxy/proxy.env'\n"));

    let out = bin(&["render", "ci", "--format", "github", "--no-proxy", ENTRIES]);
    assert_eq!(
        stdout(&out),
        "\
# egress-proxy-operator render ci --format github --dialect portable
# NO_PROXY from --no-proxy, dialect portable.
# GitHub Actions: the env of a workflow, job or step.
# HTTP_PROXY and HTTPS_PROXY are repository or organization secrets of
# those names (Settings > Secrets and variables > Actions).
# Not in NO_PROXY (dialect portable cannot express them; requests to them use the proxy):
#   *.corp.example: curl, python-urllib, python-requests, node-undici, rust-reqwest cannot send only the subdomains of corp.example direct: `.corp.example` would send corp.example itself direct too (spec.noProxy.widen: Allow writes it anyway)
#   registry.corp:5000: not every client can express it; curl: curl compares NO_PROXY entries with the host name only, so an entry with a port never matches (lib/noproxy.c Curl_check_noproxy); wget: wget compares NO_PROXY entries with the host name only, so an entry with a port never matches (src/retr.c no_proxy_match); rust-reqwest: reqwest compares NO_PROXY entries with the host name only, so an entry with a port never matches (hyper-util client/proxy/matcher.rs NoProxy::contains)
# In NO_PROXY, but ignored by some clients (they use the proxy for them):
#   10.96.0.0/12: written; wget, python-urllib, python-httpx, node-proxy-from-env, node-undici send it through the proxy (no client sends anything outside it direct); wget: wget matches NO_PROXY as name suffixes only, no CIDR (src/host.c sufmatch); python-urllib: python-urllib has no CIDR support in NO_PROXY (urllib.request.proxy_bypass_environment); python-httpx: httpx has no CIDR support: it reads 10.96.0.0/12 as the single address 10.96.0.0; node-proxy-from-env: proxy-from-env compares host names as text, no CIDR (index.js shouldProxy); node-undici: undici compares host names as text, no CIDR (EnvHttpProxyAgent #shouldProxy)
env:
  NO_PROXY: \"svc,.svc,svc.,.svc.,10.96.0.0/12\"
  no_proxy: \"svc,.svc,svc.,.svc.,10.96.0.0/12\"
  HTTP_PROXY: ${{ secrets.HTTP_PROXY }}
  HTTPS_PROXY: ${{ secrets.HTTPS_PROXY }}
  http_proxy: ${{ secrets.HTTP_PROXY }}
  https_proxy: ${{ secrets.HTTPS_PROXY }}
"
    );
    assert!(stderr(&out).starts_with("uncovered: *.corp.example: "));
    let out = stdout(&bin(&[
        "render",
        "ci",
        "--format",
        "gitlab",
        "--dialect",
        "go",
        "--widen",
        "allow",
        "--no-proxy",
        ".svc",
    ]));
    assert!(out.ends_with(
        "variables:\n  NO_PROXY: \"svc,svc.\"\n  no_proxy: \"svc,svc.\"\n  \
         http_proxy: $HTTP_PROXY\n  https_proxy: $HTTPS_PROXY\n"
    ));
}

#[test]
fn bad_arguments_fail_clearly() {
    let fails = |args: &[&str], want: &str| {
        let out = bin(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    };
    let systemd = ["render", "systemd", "--daemon", "containerd"];
    fails(&systemd, "<--policy <NAMESPACE/NAME>|--no-proxy <ENTRIES>>");
    fails(
        &[&systemd[..], &["--policy", "a/b", "--no-proxy", "x"]].concat(),
        "cannot be used with",
    );
    fails(
        &[&systemd[..], &["--no-proxy", "10.0.0.0/33"]].concat(),
        "\"10.0.0.0/33\"",
    );
    fails(
        &[&systemd[..], &["--no-proxy", " "]].concat(),
        "empty entry",
    );
    for (flag, value) in [("--kubeconfig", "/k"), ("--context", "c")] {
        fails(
            &[&systemd[..], &["--no-proxy", "a", flag, value]].concat(),
            "cannot be used with",
        );
    }
    fails(
        &[&systemd[..], &["--policy", "a/b", "--widen", "allow"]].concat(),
        "cannot be used with",
    );
    fails(
        &[
            &systemd[..],
            &["--no-proxy", "a", "--proxy-env-file", "p.env"],
        ]
        .concat(),
        "--proxy-env-file \"p.env\": must be an absolute path",
    );
    fails(
        &["render", "systemd", "--daemon", "podman", "--no-proxy", "a"],
        "invalid value 'podman'",
    );
    fails(
        &["render", "shell", "--dialect", "klingon", "--no-proxy", "a"],
        "unknown dialect \"klingon\"",
    );
    fails(
        &[
            "render",
            "ci",
            "--format",
            "github",
            "--dialect",
            "java",
            "--no-proxy",
            "a",
        ],
        "--dialect java: the JVM reads no proxy variable",
    );
    fails(
        &["render", "ci", "--format", "jenkins", "--no-proxy", "a"],
        "invalid value 'jenkins'",
    );
    fails(
        &[&systemd[..], &["--policy", "just-a-name"]].concat(),
        "--policy \"just-a-name\": expected NAMESPACE/NAME",
    );
}

#[test]
fn help_documents_each_output() {
    let out = stdout(&bin(&["render", "--help"]));
    for sub in ["systemd", "env-file", "shell", "ci"] {
        assert!(out.contains(&format!("\n  {sub} ")), "{out}");
    }
    assert!(out.contains("docs/consumers.md"), "{out}");
    let out = stdout(&bin(&["render", "systemd", "--help"]));
    for flag in [
        "--daemon",
        "--proxy-env-file",
        "--policy",
        "--kubeconfig",
        "--context",
        "--no-proxy",
    ] {
        assert!(out.contains(flag), "{out}");
    }
}

/// `systemd-analyze verify` of a stub `containerd.service` (its ExecStart an existing
/// program) with `dropin` as `containerd.service.d/http-proxy.conf`, found through
/// SYSTEMD_UNIT_PATH. verify exits 0 even when it ignores a malformed line, so what counts
/// is its report: the problems it printed (empty: the drop-in loaded cleanly).
fn systemd_verify(dir: &Path, dropin: &str) -> String {
    let found = Command::new("systemd-analyze").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "systemd-analyze is missing: install it (apt-get install systemd), as scripts/test.sh does"
    );
    let unit = dir.join("containerd.service");
    let d = dir.join("containerd.service.d");
    std::fs::create_dir_all(&d).expect("drop-in dir");
    std::fs::write(
        &unit,
        "[Unit]\nDescription=stub containerd\n[Service]\nExecStart=/bin/true\n",
    )
    .expect("unit");
    std::fs::write(d.join("http-proxy.conf"), dropin).expect("drop-in");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
        .env("SYSTEMD_LOG_COLOR", "0")
        .output()
        .expect("run systemd-analyze");
    assert!(out.status.success(), "{}", stderr(&out));
    format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out))
}

#[test]
fn containerd_dropin_passes_systemd_analyze_verify() {
    let dir = tmp_dir("verify");
    let file = "/etc/egress-proxy/100%-proxy.env";
    let out = bin(&[
        "render",
        "systemd",
        "--daemon",
        "containerd",
        "--proxy-env-file",
        file,
        "--no-proxy",
        ENTRIES,
    ]);
    let dropin = stdout(&out);
    assert!(dropin.contains("\nEnvironmentFile=/etc/egress-proxy/100%%-proxy.env\n"));
    assert_eq!(systemd_verify(&dir, &dropin), "");

    // The check sees a broken drop-in: an unknown key, an unterminated quote, a `%` that
    // is not a specifier.
    for (bad, want) in [
        ("Environmet=\"NO_PROXY=a\"\n", "Unknown key 'Environmet'"),
        ("Environment=\"NO_PROXY=a\n", "Invalid syntax"),
        (
            "Environment=\"NO_PROXY=a%z\"\n",
            "Failed to resolve specifiers",
        ),
    ] {
        let report = systemd_verify(&dir, &format!("{dropin}{bad}"));
        assert!(
            report.contains("containerd.service.d/http-proxy.conf:15: ") && report.contains(want),
            "{bad:?}: {report}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sources the snippet in `shell` and prints the proxy variables it set.
fn source_in(shell: &str, snippet: &Path) -> String {
    let script = format!(
        ". '{}'; printf '%s\\n' \"$NO_PROXY\" \"$no_proxy\" \"$HTTP_PROXY\" \"$HTTPS_PROXY\" \
         \"$http_proxy\" \"$https_proxy\" \"${{egress_proxy_file-unset}}\"",
        snippet.display()
    );
    let out = Command::new(shell)
        .args(["-c", &script])
        .env_clear()
        .output()
        .expect("run shell");
    format!("{}{}", stdout(&out), stderr(&out))
}

#[test]
fn shell_snippet_sourced_by_sh_and_bash() {
    let dir = tmp_dir("shell");
    let creds = dir.join("proxy.env");
    let url = format!("http://ops:{SENTINEL}@proxy.corp.example:3128");
    std::fs::write(
        &creds,
        format!("# comment\nHTTP_PROXY={url}\nHTTPS_PROXY={url}\nhttp_proxy={url}\nPATH=/evil\nhttps_proxy={url}"),
    )
    .expect("creds");
    let creds_path = creds.to_string_lossy().into_owned();
    let out = bin(&[
        "render",
        "shell",
        "--proxy-env-file",
        &creds_path,
        "--no-proxy",
        ".svc,10.96.0.0/12",
        "--dialect",
        "curl",
    ]);
    let snippet = stdout(&out);
    assert!(!snippet.contains(SENTINEL));
    let path = dir.join("egress-proxy.sh");
    std::fs::write(&path, &snippet).expect("snippet");
    let value = ".svc,10.96.0.0/12";
    let want = format!("{value}\n{value}\n{url}\n{url}\n{url}\n{url}\nunset\n");
    for shell in ["sh", "bash"] {
        assert_eq!(source_in(shell, &path), want, "{shell}");
    }
    std::fs::remove_file(&creds).expect("rm");
    let missing = format!(
        "{value}\n{value}\n\n\n\n\nunset\negress-proxy: cannot read {creds_path}: HTTP_PROXY and HTTPS_PROXY not set\n"
    );
    assert_eq!(source_in("sh", &path), missing);
    let _ = std::fs::remove_dir_all(&dir);
}

const CLUSTER_YAML: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {egressproxy.io/enabled: "true"}
---
apiVersion: v1
kind: Secret
metadata: {name: egress-proxy, namespace: shop}
stringData:
  httpProxy: http://shop:Sentinel-Pw-7f3a9@proxy.corp.example:3128
  httpsProxy: http://shop:Sentinel-Pw-7f3a9@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: outbound, namespace: shop}
spec:
  workloadSelector: {matchLabels: {egress: proxied}}
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
  noProxy:
    additional: [.corp.example, registry.corp:5000]
    dialect: curl
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: broken, namespace: shop}
spec:
  workloadSelector: {matchLabels: {egress: other}}
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
  noProxy:
    additional: [10.0.0.0/33]
"#;

/// `--policy`: the outputs carry what the operator computed: status.noProxy in the policy's
/// dialect; in Go, the same intents (status.noProxy plus what curl could not express).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renders_from_a_policy_in_the_cluster() {
    let c = policy_cluster("policy").await;
    let status = &c.status;
    let curl_value = status.no_proxy.clone().expect("status.noProxy");
    let policy = ["--policy", "shop/outbound", "--kubeconfig", c.kc.as_str()];
    let mut outputs = Vec::new();

    // The shell snippet in the policy's own dialect carries status.noProxy exactly.
    let out = bin_async(&[&["render", "shell", "--dialect", "curl"], &policy[..]].concat()).await;
    let text = stdout(&out);
    assert!(text.contains("\n# NO_PROXY from EgressProxyPolicy shop/outbound, dialect curl.\n"));
    let quoted = format!("\nexport NO_PROXY='{curl_value}'\n");
    assert!(text.contains(&quoted), "{text}\nwant {quoted}");
    outputs.push(out);

    // The drop-in: the same intents in Go. Given the intents as --no-proxy (status.noProxy
    // and the registry curl left out), render gives the same file but for its origin.
    let out = bin_async(
        &[
            &["render", "systemd", "--daemon", "containerd"],
            &policy[..],
        ]
        .concat(),
    )
    .await;
    let from_policy = stdout(&out);
    outputs.push(out);
    let uncovered: Vec<&str> = status.uncovered.iter().map(|u| u.entry.as_str()).collect();
    assert_eq!(uncovered, ["registry.corp:5000"]);
    let entries = format!("{curl_value},registry.corp:5000");
    let given = stdout(
        &bin_async(&[
            "render",
            "systemd",
            "--daemon",
            "containerd",
            "--no-proxy",
            &entries,
        ])
        .await,
    );
    assert_eq!(
        from_policy,
        given.replace(
            "NO_PROXY from --no-proxy,",
            "NO_PROXY from EgressProxyPolicy shop/outbound,"
        )
    );
    assert!(
        from_policy.contains(",registry.corp:5000,registry.corp.:5000,"),
        "{from_policy}"
    );
    // The demo cluster's facts (kube-sim), in Go syntax.
    let go = "cluster.corp,cluster.corp.,corp.example,corp.example.,localhost,localhost.,\
registry.corp:5000,registry.corp.:5000,svc,svc.,10.42.0.0/23,10.42.2.0/24,10.43.0.0/16,\
127.0.0.1,169.254.169.254,192.168.50.0/23,::1,fd00:ec2::254";
    assert!(
        from_policy.ends_with(&format!(
            "\n# Warning: go has no exact-host form: subdomains of these hosts also go direct: \
             localhost, registry.corp\n[Service]\nEnvironmentFile=/etc/egress-proxy/proxy.env\n\
             Environment=\"NO_PROXY={go}\" \"no_proxy={go}\"\n"
        )),
        "{from_policy}"
    );
    assert_eq!(systemd_verify(&c.dir, &from_policy), "");

    no_credential_in(&outputs);
    let _ = std::fs::remove_dir_all(&c.dir);
}

/// Every output from a policy, and the errors of a policy without a computed NO_PROXY and of
/// a missing one; the password of the policy's Secret is in none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_errors_and_no_credential_in_any_output() {
    let c = policy_cluster("policy-errors").await;
    let kc = c.kc.clone();
    let policy = ["--policy", "shop/outbound", "--kubeconfig", kc.as_str()];
    let mut outputs = Vec::new();
    for args in [
        &["render", "systemd", "--daemon", "kubelet"][..],
        &["render", "shell"][..],
        &["render", "ci", "--format", "github"][..],
        &["render", "ci", "--format", "gitlab", "--dialect", "go"][..],
        &["render", "env-file"][..],
    ] {
        let a = if args[1] == "env-file" {
            args.to_vec()
        } else {
            [args, &policy[..]].concat()
        };
        let out = bin_async(&a).await;
        assert!(out.status.success(), "{a:?}: {}", stderr(&out));
        outputs.push(out);
    }

    // A policy without a computed NO_PROXY, and one that does not exist.
    let out = bin_async(&[
        "render",
        "ci",
        "--format",
        "github",
        "--policy",
        "shop/broken",
        "--kubeconfig",
        &kc,
    ])
    .await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.starts_with(
            "error: EgressProxyPolicy shop/broken has no computed NO_PROXY (status.noProxy is \
             not set) (Ready is False: InvalidNoProxyEntry: spec.noProxy.additional[0] \
             \"10.0.0.0/33\""
        ),
        "{err}"
    );
    outputs.push(out);
    let out = bin_async(&[
        "render",
        "shell",
        "--policy",
        "shop/nope",
        "--kubeconfig",
        &kc,
    ])
    .await;
    assert_eq!(
        stderr(&out),
        "error: EgressProxyPolicy shop/nope not found\n"
    );
    outputs.push(out);

    no_credential_in(&outputs);
    let _ = std::fs::remove_dir_all(&c.dir);
}

fn no_credential_in(outputs: &[Output]) {
    for out in outputs {
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(out));
        assert!(!all.contains(SENTINEL), "credential printed: {all}");
    }
}

struct PolicyCluster {
    _env: Env,
    dir: PathBuf,
    kc: String,
    status: EgressProxyPolicyStatus,
}

/// CLUSTER_YAML reconciled by the operator (then stopped), and a kubeconfig for it.
async fn policy_cluster(tag: &str) -> PolicyCluster {
    assert!(CLUSTER_YAML.contains(SENTINEL));
    let env = Env::new(CLUSTER_YAML).await;
    let op = env.start();
    let p = wait_reason(&env, "shop", "outbound", "NoWorkloadsSelected").await;
    wait_reason(&env, "shop", "broken", "InvalidNoProxyEntry").await;
    op.stop().await;
    let dir = tmp_dir(tag);
    let kc = dir.join("kubeconfig");
    env.sim.write_kubeconfig(&kc).expect("kubeconfig");
    PolicyCluster {
        kc: kc.to_string_lossy().into_owned(),
        _env: env,
        dir,
        status: p.status.expect("status"),
    }
}
