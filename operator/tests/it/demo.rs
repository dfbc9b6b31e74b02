//! `egress-proxy-operator demo` run as a user would: read its report, explore it with real
//! kubectl, change a proxy password, see the rollout it reports, stop it with Ctrl-C.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Demo {
    /// `demo --kubeconfig KC ARGS...`, its stdout read line by line; the returned thread
    /// yields its logs (stderr) once it exits.
    fn start(kc: &Path, args: &[&std::ffi::OsStr]) -> (Demo, std::thread::JoinHandle<Vec<String>>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
            .args(["demo", "--kubeconfig"])
            .arg(kc)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start demo");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let logs = std::thread::spawn(move || {
            BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let demo = Demo {
            child,
            lines,
            seen: Vec::new(),
        };
        (demo, logs)
    }

    /// Reads stdout until a line contains `marker`; returns everything read so far.
    fn until(&mut self, marker: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let hit = line.contains(marker);
                    self.seen.push(line);
                    if hit {
                        return self.seen.join("\n");
                    }
                }
                Err(_) => panic!(
                    "demo never printed {marker:?}; output so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn kubectl(kc: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .output()
        .expect("kubectl is installed (the test command installs it)");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One field of a Deployment, through kubectl's jsonpath.
fn deployment_field(kc: &Path, ns: &str, name: &str, jsonpath: &str) -> String {
    let jsonpath = format!("jsonpath={jsonpath}");
    kubectl(kc, &["-n", ns, "get", "deployment", name, "-o", &jsonpath])
}

const HASH: &str = "{.spec.template.metadata.annotations.egressproxy\\.io/config-hash}";

#[test]
fn demo_reports_what_it_did_and_kubectl_sees_it() {
    let dir = std::env::temp_dir().join(format!("epo-demo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let kc = dir.join("kubeconfig");
    let (mut demo, logs) = Demo::start(&kc, &[]);
    let report = demo.until("Serving until Ctrl-C");

    // The report explains itself: facts with sources, the value, the workloads it changed.
    for expected in [
        "Service network 10.43.0.0/16  (from ServiceCIDR/kubernetes)",
        "cluster domain  cluster.corp  (from ConfigMap kube-system/kubelet-config)",
        "Pod network     10.42.0.0/23, 10.42.2.0/24  (from Node.spec.podCIDRs (3 nodes))",
        "cloud metadata  169.254.169.254",
        "EgressProxyPolicy team-a/outbound: Ready=True (Reconciled)",
        "EgressProxyPolicy team-b/outbound: Ready=True (Reconciled)",
        "Deployment/api: egressproxy.io/config-hash=v2-",
        "container api: HTTP_PROXY, http_proxy <- Secret egress-proxy-outbound[slot.main.HTTP_PROXY]",
        "init container migrate: HTTP_PROXY, http_proxy <- Secret egress-proxy-outbound[slot.blue.HTTP_PROXY]",
        "NO_PROXY, no_proxy <- ConfigMap egress-proxy-outbound[NO_PROXY]",
        "StatefulSet/ledger: egressproxy.io/config-hash=v2-",
        // The trust example: a CA generated at start, delivered as a read-only mount.
        "generated the CA of the TLS-inspecting proxy in examples/trust.yaml: \
         CN=Demo Corp TLS Inspection CA",
        "EgressProxyPolicy team-d/outbound: Ready=True (Reconciled)",
        "(roots Keep: webpki-root-certs ",
        "    CA CN=Demo Corp TLS Inspection CA, O=Demo Corp, notAfter ",
        "(from ConfigMap team-d/corp-proxy-ca key ca.crt)",
        "Deployment/reports: egressproxy.io/config-hash=v2-",
        ", egressproxy.io/trust-bundle=",
        "container reports: SSL_CERT_FILE <- ConfigMap egress-proxy-outbound[SSL_CERT_FILE]",
        "container reports: volume egress-proxy-trust at /etc/egress-proxy/trust (read-only)",
    ] {
        assert!(
            report.contains(expected),
            "report lacks {expected:?}:\n{report}"
        );
    }
    // Every example policy reaches Ready.
    let policies: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("EgressProxyPolicy "))
        .collect();
    assert_eq!(policies.len(), 3, "{report}");
    assert!(
        policies.iter().all(|l| l.contains(": Ready=True ")),
        "{report}"
    );
    assert!(!report.contains("PRIVATE KEY"), "{report}");
    assert!(
        !report.contains("example-password") && !report.contains("10.96.0.0/12"),
        "{report}"
    );

    // kubectl sees the same cluster.
    let wide = kubectl(&kc, &["get", "egressproxypolicies", "-A", "-o", "wide"]);
    assert!(
        wide.contains("team-a") && wide.contains("Reconciled"),
        "{wide}"
    );
    kubectl(
        &kc,
        &[
            "-n",
            "team-a",
            "wait",
            "--for=condition=Ready",
            "egressproxypolicy/outbound",
            "--timeout=20s",
        ],
    );
    let refs = deployment_field(
        &kc,
        "team-a",
        "api",
        "{.spec.template.spec.containers[0].env[*].valueFrom.secretKeyRef.name}",
    );
    assert!(refs.contains("egress-proxy-outbound"), "{refs}");
    let hash_before = deployment_field(&kc, "team-a", "api", HASH);
    trust_example_is_delivered(&kc, &report);

    // A new password: the demo reports the rollout, the hash changes, team-b is untouched.
    let team_b = deployment_field(&kc, "team-b", "billing", "{.metadata.generation}");
    kubectl(
        &kc,
        &[
            "-n",
            "team-a",
            "patch",
            "secret",
            "egress-proxy",
            "--type",
            "merge",
            "-p",
            r#"{"stringData":{"httpProxy":"http://team-a:rotated-password@proxy.corp.example:3128"}}"#,
        ],
    );
    // One Event: the in-place change's Warning, which names the rollout.
    let after = demo.until("rolling 1 workload(s) to config");
    assert!(
        after
            .lines()
            .last()
            .unwrap_or_default()
            .contains("team-a/outbound"),
        "{after}"
    );
    let hash_after = deployment_field(&kc, "team-a", "api", HASH);
    assert_ne!(hash_before, hash_after);
    assert_eq!(
        team_b,
        deployment_field(&kc, "team-b", "billing", "{.metadata.generation}")
    );

    // Rotation as the guide shows it: new credentials in team-b's standby slot; the Events
    // follow the rotation to the point where blue may be revoked, and kubectl waits for it.
    let hint = report
        .lines()
        .find(|l| l.contains("patch secret egress-proxy-green"))
        .expect("the guide shows the rotation command")
        .trim()
        .to_owned();
    assert!(
        hint.starts_with("kubectl -n proxy-system patch secret"),
        "{hint}"
    );
    kubectl(
        &kc,
        &[
            "-n",
            "proxy-system",
            "patch",
            "secret",
            "egress-proxy-green",
            "--type",
            "merge",
            "-p",
            r#"{"stringData":{"httpProxy":"http://team-b-green:rotated@proxy.corp.example:3128","httpsProxy":"http://team-b-green:rotated@proxy.corp.example:3128"}}"#,
        ],
    );
    let rotated = demo.until("CredentialRevocable");
    assert!(rotated.contains("RotationStarted"), "{rotated}");
    assert!(
        rotated
            .lines()
            .last()
            .unwrap_or_default()
            .contains("team-b/outbound")
            && rotated.contains("slot blue"),
        "{rotated}"
    );
    kubectl(
        &kc,
        &[
            "-n",
            "team-b",
            "wait",
            "epp/outbound",
            "--for=jsonpath={.status.rotation.phase}=Complete",
            "--timeout=30s",
        ],
    );

    // kubectl describe shows the operator's Events (served as core/v1 Events too).
    let described = kubectl(
        &kc,
        &["-n", "team-b", "describe", "egressproxypolicy", "outbound"],
    );
    assert!(
        described.contains("RotationStarted") && described.contains("CredentialRevocable"),
        "{described}"
    );

    // Ctrl-C stops it cleanly.
    let pid = demo.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("kill")
            .success()
    );
    demo.until("Stopped.");
    let status = demo.child.wait().expect("wait");
    assert!(status.success(), "{status}");
    // A happy path logs no warning, and no log line dumps an API Status in Debug form.
    let logs = logs.join().expect("log reader");
    let bad: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("Status {"))
        .collect();
    assert!(bad.is_empty(), "{}", logs.join("\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// team-d/reports runs the bundle status.trust names, mounted read-only, and the `explain`
/// command the demo suggests shows it.
fn trust_example_is_delivered(kc: &Path, report: &str) {
    let bundle = kubectl(
        kc,
        &[
            "-n",
            "team-d",
            "get",
            "epp",
            "outbound",
            "-o",
            "jsonpath={.status.trust.bundle}",
        ],
    );
    assert_eq!(bundle.len(), 16, "{bundle:?}");
    let annotation = "{.spec.template.metadata.annotations.egressproxy\\.io/trust-bundle}";
    assert_eq!(
        deployment_field(kc, "team-d", "reports", annotation),
        bundle
    );
    let mount = deployment_field(
        kc,
        "team-d",
        "reports",
        "{.spec.template.spec.containers[0].volumeMounts[0]}",
    );
    let mount: serde_json::Value = serde_json::from_str(&mount).expect("mount JSON");
    assert_eq!(
        mount,
        serde_json::json!({"name": "egress-proxy-trust",
                           "mountPath": "/etc/egress-proxy/trust", "readOnly": true})
    );
    let volume = deployment_field(
        kc,
        "team-d",
        "reports",
        "{.spec.template.spec.volumes[?(@.name==\"egress-proxy-trust\")].configMap.name}",
    );
    assert_eq!(volume, "egress-proxy-outbound");

    // The hint runs as printed, with JSON output.
    let hint = report
        .lines()
        .map(str::trim)
        .find(|l| l.contains(" explain --kubeconfig "))
        .expect("the guide shows explain");
    let words: Vec<&str> = hint.split_whitespace().collect();
    let out = Command::new(words[0])
        .args(&words[1..])
        .args(["--output", "json"])
        .output()
        .expect("run the explain hint");
    assert!(out.status.success(), "{hint}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["trust"]["current"], true, "{v}");
    assert_eq!(v["trust"]["bundle"], bundle.as_str());
    let t = &v["containers"][0]["trust"];
    assert_eq!(t["mount"]["kind"], "operator", "{t}");
    assert_eq!(t["bundle"]["id"], bundle.as_str(), "{t}");
    assert_eq!(
        t["bundle"]["certificates"][0]["subject"],
        "CN=Demo Corp TLS Inspection CA, O=Demo Corp"
    );
}

/// The demo's built-in cluster facts without their ServiceCIDR, as a cluster that publishes
/// none (GKE before 1.33, Kubernetes before 1.33 without the feature) would be exported.
fn facts_without_service_cidr() -> String {
    let docs: Vec<&str> = include_str!("../../demo/cluster.yaml")
        .split("\n---\n")
        .filter(|doc| !doc.contains("kind: ServiceCIDR"))
        .collect();
    docs.join("\n---\n")
}

#[test]
fn a_loaded_cluster_without_a_service_cidr_reports_it_missing() {
    let dir = std::env::temp_dir().join(format!("epo-demo-load-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let kc = dir.join("kubeconfig");
    let facts = dir.join("cluster.yaml");
    let yaml = facts_without_service_cidr();
    assert!(yaml.contains("kind: Node") && !yaml.contains("ServiceCIDR"));
    std::fs::write(&facts, yaml).expect("write the facts");
    // The examples are loaded by hand: with --load, the demo adds nothing of its own.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let single = examples.join("single-credential.yaml");
    let two = examples.join("two-slot.yaml");
    let load = ["--load", "--load", "--load"].map(std::ffi::OsStr::new);
    let args = [
        load[0],
        facts.as_os_str(),
        load[1],
        single.as_os_str(),
        load[2],
        two.as_os_str(),
    ];
    let (mut demo, logs) = Demo::start(&kc, &args);
    let report = demo.until("Serving until Ctrl-C");

    // The loaded facts are used; the Service network is missing, and nothing stands in for it.
    for expected in [
        "nothing built in: only what was loaded",
        "Service network not found: no ServiceCIDR object and ConfigMap kube-system/kubeadm-config not found",
        "cluster domain  cluster.corp  (from ConfigMap kube-system/kubelet-config)",
        "EgressProxyPolicy team-a/outbound: Ready=False (DiscoveryIncomplete)",
        "EgressProxyPolicy team-b/outbound: Ready=False (DiscoveryIncomplete)",
    ] {
        assert!(
            report.contains(expected),
            "report lacks {expected:?}:\n{report}"
        );
    }
    assert!(!report.contains("10.96."), "{report}");

    // The cluster has no ServiceCIDR, and the policies' status says what is missing.
    let cidrs = kubectl(&kc, &["get", "servicecidrs", "-o", "name"]);
    assert_eq!(cidrs.trim(), "", "no ServiceCIDR was loaded");
    let policies = kubectl(&kc, &["get", "egressproxypolicies", "-A", "-o", "json"]);
    assert!(!policies.contains("10.96."), "{policies}");
    let get = |path: &str| {
        let jsonpath = format!("jsonpath={path}");
        kubectl(
            &kc,
            &["-n", "team-a", "get", "epp", "outbound", "-o", &jsonpath],
        )
    };
    let fact = get("{.status.discovered.serviceNetwork}");
    assert!(
        fact.contains("no ServiceCIDR object") && !fact.contains("\"values\":[\""),
        "{fact}"
    );
    let ready = get("{.status.conditions[?(@.type==\"Ready\")].message}");
    assert!(ready.contains("serviceNetwork"), "{ready}");

    let pid = demo.child.id().to_string();
    let stopped = Command::new("kill").args(["-INT", &pid]).status();
    assert!(stopped.expect("kill").success());
    demo.until("Stopped.");
    assert!(demo.child.wait().expect("wait").success());
    let logs = logs.join().expect("log reader").join("\n");
    assert!(!logs.contains("10.96."), "{logs}");
    let _ = std::fs::remove_dir_all(&dir);
}
