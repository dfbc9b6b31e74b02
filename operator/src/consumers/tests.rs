use serde_json::{Value, json};

use super::*;

fn given(entries: &[&str]) -> Facts {
    Facts {
        origin: "--no-proxy".to_owned(),
        set: IntentSet::parse(entries.iter().copied()).expect("entries"),
        widen: Widen::Deny,
    }
}

#[test]
fn systemd_dropin_for_containerd() {
    let facts = given(&[".svc", "10.96.0.0/12", "*.corp.example"]);
    let (out, r) = systemd_dropin(Daemon::Containerd, &facts, DEFAULT_ENV_FILE).unwrap();
    assert_eq!(
        out,
        "\
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
[Service]
EnvironmentFile=/etc/egress-proxy/proxy.env
Environment=\"NO_PROXY=.corp.example,.corp.example.,svc,svc.,10.96.0.0/12\" \"no_proxy=.corp.example,.corp.example.,svc,svc.,10.96.0.0/12\"
"
    );
    assert!(r.uncovered.is_empty() && r.warnings.is_empty(), "{r:?}");
}

#[test]
fn systemd_dropin_per_daemon() {
    let facts = given(&["localhost"]);
    for (d, unit, note) in [
        (Daemon::Crio, "crio", "conmon"),
        (Daemon::Docker, "docker", "live-restore"),
        (Daemon::Kubelet, "kubelet", "Running Pods keep running"),
    ] {
        let (out, r) = systemd_dropin(d, &facts, "/run/proxy/100%.env").unwrap();
        let path = format!("# Install as /etc/systemd/system/{unit}.service.d/http-proxy.conf ");
        assert!(out.contains(&path), "{out}");
        let restart = format!("#   systemctl daemon-reload && systemctl restart {unit}\n");
        assert!(out.contains(&restart), "{out}");
        assert!(out.contains(note), "{out}");
        // `%` is a specifier in a unit file: doubled in the directive, not in the comment.
        assert!(
            out.contains("\nEnvironmentFile=/run/proxy/100%%.env\n"),
            "{out}"
        );
        assert!(out.contains("read from /run/proxy/100%.env\n"), "{out}");
        // Go has no exact-host form: the warning is in the file and returned.
        assert!(
            out.contains("\n# Warning: go has no exact-host form"),
            "{out}"
        );
        assert_eq!(r.warnings.len(), 1, "{r:?}");
    }
}

#[test]
fn env_file_must_be_absolute_and_plain() {
    let facts = given(&["localhost"]);
    for bad in ["proxy.env", "/etc/my proxy.env", "/etc/a\nb"] {
        let err = systemd_dropin(Daemon::Kubelet, &facts, bad).unwrap_err();
        assert!(err.to_string().contains("--proxy-env-file"), "{err}");
        assert!(shell_snippet(Dialect::Curl, &facts, bad).is_err());
        assert!(env_file_template(bad).is_err());
    }
}

#[test]
fn env_file_template_has_placeholders_only() {
    let out = env_file_template("/etc/egress-proxy/proxy.env").unwrap();
    assert_eq!(
        out,
        "\
# egress-proxy-operator render env-file: the proxy URLs, with credentials.
# Install as /etc/egress-proxy/proxy.env (root, mode 0600) and replace the placeholders.
# Read by the systemd drop-ins (EnvironmentFile=) and the shell snippet. One
# NAME=value per line, no quotes, no blanks; percent-encode the user and password
# (@ is %40, : is %3A, % is %25, / is %2F).
HTTP_PROXY=http://USER:PASSWORD@PROXY-HOST:PORT
HTTPS_PROXY=http://USER:PASSWORD@PROXY-HOST:PORT
http_proxy=http://USER:PASSWORD@PROXY-HOST:PORT
https_proxy=http://USER:PASSWORD@PROXY-HOST:PORT
"
    );
}

#[test]
fn shell_snippet_reads_the_file_when_sourced() {
    let facts = given(&[".svc", "*.corp.example"]);
    let (out, r) = shell_snippet(Dialect::Portable, &facts, "/home/op/it's.env").unwrap();
    assert_eq!(
        out,
        "\
# egress-proxy-operator render shell --dialect portable
# NO_PROXY from --no-proxy, dialect portable.
# Source it in a POSIX shell (. ./egress-proxy.sh); do not run it. The proxy
# URLs, with credentials, are read from /home/op/it's.env each time.
# Not in NO_PROXY (dialect portable cannot express them; requests to them use the proxy):
#   *.corp.example: curl, python-urllib, python-requests, node-undici, rust-reqwest cannot send only the subdomains of corp.example direct: `.corp.example` would send corp.example itself direct too (spec.noProxy.widen: Allow writes it anyway)
export NO_PROXY='svc,.svc,svc.,.svc.'
export no_proxy=\"$NO_PROXY\"
egress_proxy_file='/home/op/it'\\''s.env'
if [ -r \"$egress_proxy_file\" ]; then
    while IFS= read -r egress_proxy_line || [ -n \"$egress_proxy_line\" ]; do
        case $egress_proxy_line in
            HTTP_PROXY=*|HTTPS_PROXY=*|http_proxy=*|https_proxy=*) export \"$egress_proxy_line\" ;;
        esac
    done < \"$egress_proxy_file\"
else
    echo \"egress-proxy: cannot read $egress_proxy_file: HTTP_PROXY and HTTPS_PROXY not set\" >&2
fi
unset egress_proxy_file egress_proxy_line
"
    );
    assert_eq!(r.uncovered.len(), 1);
}

#[test]
fn ci_blocks_reference_secrets() {
    let facts = given(&[".svc", "10.0.0.0/8"]);
    let (out, _) = ci_env(CiFormat::Github, Dialect::Go, &facts);
    assert_eq!(
        out,
        "\
# egress-proxy-operator render ci --format github --dialect go
# NO_PROXY from --no-proxy, dialect go.
# GitHub Actions: the env of a workflow, job or step.
# HTTP_PROXY and HTTPS_PROXY are repository or organization secrets of
# those names (Settings > Secrets and variables > Actions).
env:
  NO_PROXY: \"svc,svc.,10.0.0.0/8\"
  no_proxy: \"svc,svc.,10.0.0.0/8\"
  HTTP_PROXY: ${{ secrets.HTTP_PROXY }}
  HTTPS_PROXY: ${{ secrets.HTTPS_PROXY }}
  http_proxy: ${{ secrets.HTTP_PROXY }}
  https_proxy: ${{ secrets.HTTPS_PROXY }}
"
    );
    let (out, _) = ci_env(CiFormat::Gitlab, Dialect::Go, &facts);
    assert_eq!(
        out,
        "\
# egress-proxy-operator render ci --format gitlab --dialect go
# NO_PROXY from --no-proxy, dialect go.
# GitLab CI/CD: the variables of the pipeline or of a job.
# HTTP_PROXY and HTTPS_PROXY are masked CI/CD variables of the project or
# group (Settings > CI/CD > Variables), which GitLab gives every job.
variables:
  NO_PROXY: \"svc,svc.,10.0.0.0/8\"
  no_proxy: \"svc,svc.,10.0.0.0/8\"
  http_proxy: $HTTP_PROXY
  https_proxy: $HTTPS_PROXY
"
    );
}

/// A policy of generation 1 in dialect go whose status is `status`.
fn policy(status: Value) -> EgressProxyPolicy {
    serde_json::from_value(json!({
        "apiVersion": "egressproxy.io/v1alpha1",
        "kind": "EgressProxyPolicy",
        "metadata": {"name": "outbound", "namespace": "shop", "generation": 1},
        "spec": {
            "workloadSelector": {"matchLabels": {"egress": "proxied"}},
            "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "egress-proxy"}}],
                      "active": "main"},
            "noProxy": {"additional": [".corp.example"], "dialect": "go",
                        "cloudMetadata": "Omit"},
        },
        "status": status,
    }))
    .expect("policy")
}

fn discovered() -> Value {
    json!({
        "apiServer": {"values": ["10.96.0.1"]},
        "serviceNetwork": {"values": ["10.96.0.0/12"]},
        "podNetwork": {"values": ["10.244.0.0/16"]},
        "clusterDomain": {"values": ["cluster.local"]},
        "nodeAddresses": {"values": ["192.168.1.10"]},
    })
}

const GO_VALUE: &str = "cluster.local,cluster.local.,corp.example,corp.example.,localhost,\
localhost.,svc,svc.,10.96.0.0/12,10.244.0.0/16,127.0.0.1,192.168.1.10,::1";

#[test]
fn policy_facts_rederive_the_status_value() {
    let p = policy(json!({"observedGeneration": 1, "noProxy": GO_VALUE,
                          "discovered": discovered()}));
    let f = policy_facts(&p).unwrap();
    assert_eq!(f.origin, "EgressProxyPolicy shop/outbound");
    assert_eq!(f.render(Dialect::Go).value, GO_VALUE);
    assert_eq!(
        f.render(Dialect::Curl).value,
        ".cluster.local,.corp.example,localhost,.svc,::1,10.96.0.0/12,10.244.0.0/16,127.0.0.1,192.168.1.10"
    );
}

/// A java policy's status.noProxy is the portable value the variables carry.
#[test]
fn a_java_policys_status_is_its_portable_value() {
    let mut p = policy(json!({"observedGeneration": 1, "discovered": discovered()}));
    p.spec.no_proxy.dialect = Dialect::Java;
    let portable = Facts {
        origin: String::new(),
        set: IntentSet::new(
            discovery::policy_intents(
                &serde_json::from_value(discovered()).unwrap(),
                &p.spec.no_proxy,
            )
            .unwrap(),
        ),
        widen: p.spec.no_proxy.widen,
    }
    .render(Dialect::Portable)
    .value;
    p.status.as_mut().unwrap().no_proxy = Some(portable.clone());
    let f = policy_facts(&p).unwrap();
    assert_eq!(f.render(Dialect::Portable).value, portable);
    assert!(f.render(Dialect::Java).value.contains("|*.corp.example|"));
}

#[test]
fn policy_facts_refuse_a_missing_or_stale_status() {
    let err = |status: Value| policy_facts(&policy(status)).unwrap_err().to_string();
    let e = err(json!({"conditions": [{"type": "Ready", "status": "False",
        "reason": "DiscoveryIncomplete", "message": "not found: podNetwork",
        "lastTransitionTime": "2024-01-01T00:00:00Z"}]}));
    assert_eq!(
        e,
        "EgressProxyPolicy shop/outbound has no computed NO_PROXY (status.noProxy is not set) \
         (Ready is False: DiscoveryIncomplete: not found: podNetwork): render once the \
         operator has reconciled it, or give the entries with --no-proxy"
    );
    let e = err(json!({"observedGeneration": 0, "noProxy": GO_VALUE, "discovered": discovered()}));
    assert!(
        e.contains("status.noProxy is of generation 0, the policy is at generation 1"),
        "{e}"
    );
    let e = err(json!({"observedGeneration": 1, "noProxy": GO_VALUE}));
    assert!(e.contains("no status.discovered"), "{e}");
    let e = err(json!({"observedGeneration": 1, "noProxy": "svc",
                       "discovered": discovered()}));
    assert!(
        e.contains(
            "status.noProxy is not what status.discovered and spec.noProxy give in dialect go"
        ),
        "{e}"
    );
    let mut partial = discovered();
    partial["podNetwork"] = json!({"message": "no Node has spec.podCIDRs"});
    let e = err(json!({"observedGeneration": 1, "noProxy": GO_VALUE, "discovered": partial}));
    assert!(
        e.contains("DiscoveryIncomplete: not found: podNetwork"),
        "{e}"
    );
}
