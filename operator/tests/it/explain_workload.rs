//! `explain --workload` against the in-memory API server: the operator injects a Deployment
//! the real way, then the binary explains it (and workloads the operator does not manage)
//! with a kubeconfig, as a user would.

use crate::common;

use std::path::PathBuf;
use std::process::Output;

use common::*;
use serde_json::{Value, json};

const SENTINEL: &str = "Sentinel-Pw-7f3a9";

fn base() -> String {
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {{egressproxy.io/enabled: "true"}}
---
apiVersion: v1
kind: Secret
metadata: {{name: egress-proxy, namespace: shop}}
stringData:
  httpProxy: http://shop:{SENTINEL}@proxy.corp.example:3128
  httpsProxy: http://shop:{SENTINEL}@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: shop}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials: [{{name: main, secretRef: {{name: egress-proxy}}}}]
    active: main
  noProxy:
    additional: [.corp.example]
    dialect: go
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop, labels: {{app: web, egress: proxied}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      initContainers: [{{name: migrate, image: migrate:1}}]
      containers: [{{name: app, image: python:3.11}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: legacy, namespace: shop, labels: {{app: legacy}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: legacy}}}}
  template:
    metadata: {{labels: {{app: legacy}}}}
    spec:
      containers:
        - name: app
          image: legacy:1
          env:
            - {{name: PROXY_PASSWORD, valueFrom: {{secretKeyRef: {{name: egress-proxy, key: httpsProxy}}}}}}
            - {{name: HTTPS_PROXY, value: "http://legacy:{SENTINEL}@old-proxy.example:8080"}}
            - {{name: NO_PROXY, value: "localhost,.cluster.corp"}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: broken, namespace: shop, labels: {{app: broken}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: broken}}}}
  template:
    metadata: {{labels: {{app: broken}}}}
    spec:
      containers:
        - name: app
          image: broken:1
          env:
            - {{name: HTTPS_PROXY, valueFrom: {{secretKeyRef: {{name: proxy-creds, key: url}}}}}}
"#
    )
}

/// Runs the binary (off the runtime's threads: the API server runs on them).
async fn explain(kubeconfig: &str, args: &[&str]) -> Output {
    let mut all = vec!["explain", "--kubeconfig", kubeconfig];
    all.extend_from_slice(args);
    let all: Vec<String> = all.into_iter().map(str::to_owned).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
            .args(&all)
            .env_clear()
            .output()
            .expect("run egress-proxy-operator")
    })
    .await
    .expect("join")
}

fn all_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        all_text(out)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn container<'v>(report: &'v Value, name: &str) -> &'v Value {
    report["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name} in {report}"))
}

/// The one explanation of a container explained with one dialect.
fn only(c: &Value) -> &Value {
    let xs = c["explanations"].as_array().expect("explanations");
    assert_eq!(xs.len(), 1, "{c}");
    &xs[0]
}

struct Cluster {
    env: Env,
    dir: PathBuf,
    kubeconfig: String,
}

async fn cluster() -> Cluster {
    let env = Env::new(&base()).await;
    let op = env.start();
    wait_reason(&env, "shop", "outbound", "Reconciled").await;
    op.stop().await;
    let dir = std::env::temp_dir().join(format!(
        "epo-explain-workload-{}-{}",
        std::process::id(),
        env.sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).expect("tmp");
    let kc = dir.join("kubeconfig");
    env.sim.write_kubeconfig(&kc).expect("kubeconfig");
    let kubeconfig = kc.to_string_lossy().into_owned();
    Cluster {
        env,
        dir,
        kubeconfig,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_each_container_of_a_live_workload() {
    let c = cluster().await;
    let kc = c.kubeconfig.as_str();
    let mut outputs = Vec::new();

    // A Service URL: direct, by the cluster domain the operator discovered, in the policy's dialect.
    let svc = "http://orders.shop.svc.cluster.corp:8080/";
    let out = explain(
        kc,
        &["--workload", "shop/deploy/web", "--output", "json", svc],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    assert_eq!(
        v["workload"],
        json!({"namespace": "shop", "kind": "Deployment", "name": "web"})
    );
    assert_eq!(v["url"], svc);
    let names: Vec<(&str, bool)> = v["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| (c["name"].as_str().expect("name"), c["init"] == true))
        .collect();
    assert_eq!(names, [("app", false), ("migrate", true)]);
    for name in ["app", "migrate"] {
        let app = container(&v, name);
        assert_eq!(
            app["dialectFrom"],
            "its proxy variables come from the managed objects of EgressProxyPolicy outbound (go)"
        );
        assert_eq!(app["failure"], Value::Null);
        assert_eq!(app["notes"], json!([]));
        let vars: Vec<&str> = app["variables"]
            .as_array()
            .expect("variables")
            .iter()
            .map(|v| v["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            vars,
            [
                "HTTP_PROXY",
                "http_proxy",
                "HTTPS_PROXY",
                "https_proxy",
                "NO_PROXY",
                "no_proxy"
            ]
        );
        let https = &app["variables"][2];
        assert_eq!(https["value"], "http://shop:***@proxy.corp.example:3128");
        assert_eq!(
            https["source"],
            json!({"from": "keyRef", "kind": "Secret", "name": "egress-proxy-outbound",
                   "key": "slot.main.HTTPS_PROXY"})
        );
        assert_eq!(
            app["variables"][4]["source"],
            json!({"from": "keyRef", "kind": "ConfigMap", "name": "egress-proxy-outbound",
                   "key": "NO_PROXY"})
        );
        let x = only(app);
        assert_eq!(x["dialect"], "go");
        assert_eq!(x["decision"], "direct", "{x}");
        assert_eq!(x["variable"], "NO_PROXY", "{x}");
        assert_eq!(x["matched"], "cluster.corp", "{x}");
    }

    // An external URL: through the policy's proxy, credentials redacted.
    let out = explain(
        kc,
        &[
            "--workload",
            "shop/Deployment/web",
            "--output",
            "json",
            "https://pypi.org/simple/",
        ],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    let x = only(container(&v, "app"));
    assert_eq!(x["decision"], "proxy", "{x}");
    assert_eq!(x["proxy"], "http://shop:***@proxy.corp.example:3128");
    assert_eq!(x["matched"], Value::Null);

    // --dialect wins over the policy's.
    let out = explain(
        kc,
        &[
            "--workload",
            "shop/deploy/web",
            "--dialect",
            "python-requests",
            "--output",
            "json",
            svc,
        ],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    let app = container(&v, "app");
    assert_eq!(app["dialectFrom"], "given with --dialect");
    assert_eq!(only(app)["dialect"], "python-requests");

    // A workload no policy touches, with its own literal proxy: every dialect, its values.
    let out = explain(
        kc,
        &[
            "--workload",
            "shop/deploy/legacy",
            "--output",
            "json",
            "https://pypi.org/",
        ],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    let app = container(&v, "app");
    assert_eq!(
        app["dialectFrom"],
        "no EgressProxyPolicy manages or selects this workload"
    );
    assert_eq!(
        app["variables"],
        json!([
            {"name": "HTTPS_PROXY", "value": "http://legacy:***@old-proxy.example:8080",
             "source": {"from": "value", "expanded": []}},
            {"name": "NO_PROXY", "value": "localhost,.cluster.corp",
             "source": {"from": "value", "expanded": []}},
        ])
    );
    let xs = app["explanations"].as_array().expect("explanations");
    assert_eq!(xs.len(), 13, "{app}");
    let go = xs.iter().find(|x| x["dialect"] == "go").expect("go");
    assert_eq!(go["proxy"], "http://legacy:***@old-proxy.example:8080");
    // Only an uppercase HTTPS_PROXY: wget reads only lowercase and Ruby's Net::HTTP reads
    // http_proxy for https too, so both go direct; the others use it; `portable` says so.
    // A JVM reads no variable at all: direct.
    let decisions: Vec<(&str, &str)> = xs
        .iter()
        .map(|x| {
            (
                x["dialect"].as_str().unwrap(),
                x["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("portable", "error"),
            ("curl", "proxy"),
            ("wget", "direct"),
            ("go", "proxy"),
            ("python-urllib", "proxy"),
            ("python-requests", "proxy"),
            ("python-httpx", "proxy"),
            ("node-axios", "proxy"),
            ("node-proxy-from-env", "proxy"),
            ("node-undici", "proxy"),
            ("ruby", "direct"),
            ("rust-reqwest", "proxy"),
            ("java", "direct"),
        ]
    );
    let portable = xs[0]["reason"].as_str().unwrap();
    assert!(portable.ends_with("direct: wget, ruby)"), "{portable}");

    // A missing required Secret: the container would not start.
    let out = explain(
        kc,
        &[
            "--workload",
            "shop/deploy/broken",
            "--output",
            "json",
            "https://pypi.org/",
        ],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    let app = container(&v, "app");
    assert_eq!(
        app["failure"],
        "CreateContainerConfigError: secret \"proxy-creds\" not found"
    );
    assert_eq!(app["explanations"], json!([]));
    assert_eq!(app["variables"], json!([]));

    // Text output: the same facts, for a person.
    for (workload, url) in [
        ("shop/deploy/web", "https://pypi.org/"),
        ("shop/deploy/legacy", svc),
        ("shop/deploy/broken", svc),
    ] {
        let out = explain(kc, &["--workload", workload, url]).await;
        assert!(out.status.success(), "{}", all_text(&out));
        outputs.push(out);
    }
    let text = String::from_utf8_lossy(&outputs[outputs.len() - 3].stdout).into_owned();
    assert!(
        text.starts_with("Deployment shop/web, URL https://pypi.org/\n"),
        "{text}"
    );
    assert!(text.contains("\ncontainer app\n"), "{text}");
    assert!(text.contains("\ninit container migrate\n"), "{text}");
    assert!(
        text.contains(
            "  HTTPS_PROXY  http://shop:***@proxy.corp.example:3128  \
             (Secret egress-proxy-outbound key slot.main.HTTPS_PROXY)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  go  proxy   via http://shop:***@proxy.corp.example:3128\n"),
        "{text}"
    );
    let text = String::from_utf8_lossy(&outputs[outputs.len() - 1].stdout).into_owned();
    assert!(
        text.contains(
            "  would not start: CreateContainerConfigError: secret \"proxy-creds\" not found\n"
        ),
        "{text}"
    );

    // The password of the Secret and of the literal value never leaves the process.
    for out in &outputs {
        assert!(!all_text(out).contains(SENTINEL), "{}", all_text(out));
    }
    let _ = std::fs::remove_dir_all(&c.dir);
    drop(c.env);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_missing_workloads_fail_clearly() {
    let c = cluster().await;
    let kc = c.kubeconfig.as_str();
    for (args, expected) in [
        (
            &["--workload", "shop/cronjob/x", "https://pypi.org/"][..],
            "CronJob shop/x not found",
        ),
        (
            &["--workload", "shop/deploy/nope", "https://pypi.org/"][..],
            "Deployment shop/nope not found",
        ),
        (
            &["--workload", "shop/job/x", "https://pypi.org/"][..],
            "is not Deployment, StatefulSet, DaemonSet or CronJob",
        ),
        (
            &[
                "--workload",
                "shop/deploy/web",
                "--dialect",
                "cobol",
                "https://pypi.org/",
            ][..],
            "unknown dialect \"cobol\"",
        ),
        (
            &["--workload", "shop/deploy/web", "ftp://pypi.org/"][..],
            "ftp",
        ),
        (
            &[
                "--workload",
                "shop/deploy/web",
                "--env",
                "A=b",
                "https://pypi.org/",
            ][..],
            "cannot be used with",
        ),
    ] {
        let out = explain(kc, args).await;
        assert!(!out.status.success(), "{args:?} succeeded");
        let text = all_text(&out);
        assert!(text.contains(expected), "{args:?}: {text}");
    }
    // --kubeconfig only makes sense with --workload.
    let out = tokio::task::spawn_blocking(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
            .args(["explain", "--kubeconfig", "/x", "https://pypi.org/"])
            .env_clear()
            .output()
            .expect("run")
    })
    .await
    .expect("join");
    assert!(!out.status.success());
    assert!(all_text(&out).contains("--workload"), "{}", all_text(&out));
    let _ = std::fs::remove_dir_all(&c.dir);
}

/// A self-signed CA certificate (PEM) for the trust tests.
fn ca_pem(cn: &str) -> String {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().expect("key");
    params.self_signed(&key).expect("self-signed").pem()
}

/// A `java` policy with trust from ConfigMap `corp-ca`; `web` is selected, `own` (not
/// selected) mounts `corp-ca` itself at the trust directory, its key `ca.crt` as the bundle.
fn trust_yaml() -> String {
    let ca = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "corp-ca", "namespace": "shop"},
        "data": {"ca.crt": ca_pem("Explain Test CA")}});
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {{egressproxy.io/enabled: "true"}}
---
apiVersion: v1
kind: Secret
metadata: {{name: egress-proxy, namespace: shop}}
stringData:
  httpProxy: http://shop:{SENTINEL}@proxy.corp.example:3128
  httpsProxy: http://shop:{SENTINEL}@proxy.corp.example:3128
---
{ca}
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: shop}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials: [{{name: main, secretRef: {{name: egress-proxy}}}}]
    active: main
  noProxy: {{dialect: java}}
  trust:
    sources: [{{configMap: {{name: corp-ca, key: ca.crt}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: shop, labels: {{app: web, egress: proxied}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: app, image: temurin:21}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: own, namespace: shop, labels: {{app: own}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: own}}}}
  template:
    metadata: {{labels: {{app: own}}}}
    spec:
      volumes:
        - name: certs
          configMap: {{name: corp-ca, items: [{{key: ca.crt, path: ca-bundle.crt}}]}}
      containers:
        - name: app
          image: own:1
          volumeMounts: [{{name: certs, mountPath: /etc/egress-proxy/trust}}]
          env: [{{name: SSL_CERT_FILE, value: /etc/egress-proxy/trust/ca-bundle.crt}}]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_a_containers_trust_and_whether_its_bundle_is_current() {
    let env = Env::new(&trust_yaml()).await;
    let op = env.start();
    let policy = wait_reason(&env, "shop", "outbound", "Reconciled").await;
    let status = policy.status.and_then(|s| s.trust).expect("status.trust");
    let bundle = status.bundle.clone();
    eventually("web carries the policy's bundle", || async {
        let d = env.deployment("shop", "web").await;
        let a = template(&d).metadata.as_ref()?.annotations.as_ref()?;
        (a.get("egressproxy.io/trust-bundle") == Some(&bundle)).then_some(())
    })
    .await;
    op.stop().await;
    let dir = std::env::temp_dir().join(format!(
        "epo-explain-trust-{}-{}",
        std::process::id(),
        env.sim.addr().port()
    ));
    std::fs::create_dir_all(&dir).expect("tmp");
    let kc = dir.join("kubeconfig");
    env.sim.write_kubeconfig(&kc).expect("kubeconfig");
    let kc = kc.to_string_lossy().into_owned();
    let url = "https://pypi.org/simple/";
    let mut outputs = Vec::new();

    let out = explain(
        &kc,
        &["--workload", "shop/deploy/web", "--output", "json", url],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    assert_eq!(
        v["trust"],
        json!({"policy": "outbound", "bundle": bundle, "template": bundle, "current": true})
    );
    let t = &container(&v, "app")["trust"];
    let vars: Vec<(&str, &Value, &Value)> = t["variables"]
        .as_array()
        .expect("variables")
        .iter()
        .map(|x| {
            (
                x["name"].as_str().expect("name"),
                &x["value"],
                &x["source"]["key"],
            )
        })
        .collect();
    let file = json!("/etc/egress-proxy/trust/ca-bundle.crt");
    assert_eq!(
        vars,
        [
            ("SSL_CERT_FILE", &file, &json!("SSL_CERT_FILE")),
            ("CURL_CA_BUNDLE", &file, &json!("CURL_CA_BUNDLE")),
            ("REQUESTS_CA_BUNDLE", &file, &json!("REQUESTS_CA_BUNDLE")),
            ("NODE_EXTRA_CA_CERTS", &file, &json!("NODE_EXTRA_CA_CERTS")),
            (
                "WGETRC",
                &json!("/etc/egress-proxy/trust/wgetrc"),
                &json!("WGETRC")
            ),
        ]
    );
    assert_eq!(
        t["javaTrustStore"],
        "/etc/egress-proxy/trust/truststore.p12 (PKCS12)"
    );
    assert_eq!(
        t["mount"],
        json!({"kind": "operator", "volume": "egress-proxy-trust",
               "configMap": "egress-proxy-outbound", "policy": "outbound", "readOnly": true})
    );
    // The mounted bundle is the one status names: the CA first, then the root set.
    let b = &t["bundle"];
    assert_eq!(b["id"], json!(bundle), "{b}");
    let roots = status.root_count.expect("rootCount") as u64;
    assert_eq!(b["count"], json!(1 + roots), "{b}");
    assert_eq!(b["certificates"][0]["subject"], "CN=Explain Test CA");
    assert_eq!(
        b["certificates"][0]["sha256"],
        json!(status.certificates[0].sha256)
    );
    assert_eq!(t["notes"], json!([]));

    // The workload's own volume at the trust directory: its bundle is read too.
    let out = explain(
        &kc,
        &["--workload", "shop/deploy/own", "--output", "json", url],
    )
    .await;
    let v = json_of(&out);
    outputs.push(out);
    assert_eq!(v["trust"], Value::Null);
    let t = &container(&v, "app")["trust"];
    assert_eq!(
        t["mount"],
        json!({"kind": "other", "volume": "certs", "source": "ConfigMap corp-ca",
               "readOnly": false})
    );
    let b = &t["bundle"];
    assert_eq!(
        (&b["key"], &b["count"]),
        (&json!("ca.crt"), &json!(1)),
        "{b}"
    );
    assert_eq!(b["certificates"][0]["subject"], "CN=Explain Test CA");
    assert_eq!(
        t["notes"],
        json!([
            "/etc/egress-proxy/trust holds the workload's own volume certs: the operator \
                mounts no bundle over it"
        ])
    );

    // A template on another bundle is not current (the operator is stopped: nothing rolls).
    env.patch_deployment(
        "shop",
        "web",
        json!({"spec": {"template": {"metadata": {"annotations":
            {"egressproxy.io/trust-bundle": "0123456789abcdef"}}}}}),
    )
    .await;
    let out = explain(&kc, &["--workload", "shop/deploy/web", url]).await;
    assert!(out.status.success(), "{}", all_text(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    outputs.push(out);
    for expected in [
        format!(
            "trust bundle: EgressProxyPolicy outbound delivers {bundle}, the template names \
             0123456789abcdef (egressproxy.io/trust-bundle): not current"
        ),
        "\n  trust:\n    SSL_CERT_FILE        /etc/egress-proxy/trust/ca-bundle.crt  \
         (ConfigMap egress-proxy-outbound key SSL_CERT_FILE)\n"
            .to_owned(),
        "    JVM truststore  /etc/egress-proxy/trust/truststore.p12 (PKCS12)\n".to_owned(),
        "    mount  /etc/egress-proxy/trust: volume egress-proxy-trust, ConfigMap \
         egress-proxy-outbound of EgressProxyPolicy outbound, read-only\n"
            .to_owned(),
        format!(
            "    bundle ca-bundle.crt from ConfigMap egress-proxy-outbound ({bundle}): {} \
             certificate(s)\n      CN=Explain Test CA  (notAfter ",
            1 + roots
        ),
    ] {
        assert!(text.contains(&expected), "lacks {expected:?}:\n{text}");
    }
    for out in &outputs {
        assert!(!all_text(out).contains(SENTINEL), "{}", all_text(out));
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(env);
}
