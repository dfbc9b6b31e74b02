//! The reconciler end to end, over HTTP against the in-memory API server and its simulated
//! workload controllers. Write counts come from the server's request accounting.

use crate::common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const BASE: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {egressproxy.io/enabled: "true"}
---
apiVersion: v1
kind: Secret
metadata: {name: egress-proxy, namespace: team-a}
stringData:
  httpProxy: http://team-a:first-password@proxy.corp.example:3128
  httpsProxy: http://team-a:first-password@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: outbound, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: proxied}}
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
  noProxy:
    additional: [.corp.example, 10.20.0.0/16]
    dialect: go
  rollout: {maxConcurrent: 10}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: team-a, labels: {app: api, egress: proxied}}
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      initContainers: [{name: migrate, image: migrate:1}]
      containers:
        - name: api
          image: api:1
          env: [{name: LOG_LEVEL, value: info}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: team-a, labels: {app: db, egress: proxied}}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: db:1}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: team-a, labels: {app: agent, egress: proxied}}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: agent:1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: unrelated, namespace: team-a, labels: {app: unrelated}}
spec:
  replicas: 1
  selector: {matchLabels: {app: unrelated}}
  template:
    metadata: {labels: {app: unrelated}}
    spec: {containers: [{name: app, image: app:1}]}
"#;

fn secret_ref(e: &k8s_openapi::api::core::v1::EnvVar) -> Option<(String, String)> {
    let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
    Some((r.name.clone(), r.key.clone()))
}

fn cm_ref(e: &k8s_openapi::api::core::v1::EnvVar) -> Option<(String, String)> {
    let r = e.value_from.as_ref()?.config_map_key_ref.as_ref()?;
    Some((r.name.clone(), r.key.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injects_all_six_variables_by_reference_into_every_selected_kind() {
    let env = Env::new(BASE).await;
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let st = p.status.clone().expect("status");
    assert_eq!(
        st.workloads.as_ref().map(|w| (w.selected, w.up_to_date)),
        Some((3, 3))
    );
    let managed = "egress-proxy-outbound";

    let api = env.deployment("team-a", "api").await;
    for c in ["api", "migrate"] {
        let c = container(&api, c);
        for v in ["HTTP_PROXY", "http_proxy"] {
            assert_eq!(
                secret_ref(env_of(c, v)),
                Some((managed.into(), "slot.main.HTTP_PROXY".into())),
                "{v}"
            );
        }
        for v in ["HTTPS_PROXY", "https_proxy"] {
            assert_eq!(
                secret_ref(env_of(c, v)),
                Some((managed.into(), "slot.main.HTTPS_PROXY".into())),
                "{v}"
            );
        }
        for v in ["NO_PROXY", "no_proxy"] {
            assert_eq!(
                cm_ref(env_of(c, v)),
                Some((managed.into(), "NO_PROXY".into())),
                "{v}"
            );
        }
        assert!(
            c.env
                .iter()
                .flatten()
                .all(|e| e.value.as_deref().is_none_or(|v| !v.contains("password")))
        );
    }
    assert_eq!(
        env_of(container(&api, "api"), "LOG_LEVEL").value.as_deref(),
        Some("info"),
        "own env kept"
    );
    assert!(hash(&api).is_some_and(|h| h.starts_with("v2-")));

    let db = Api::<StatefulSet>::namespaced(env.client.clone(), "team-a")
        .get("db")
        .await
        .unwrap();
    let agent = Api::<DaemonSet>::namespaced(env.client.clone(), "team-a")
        .get("agent")
        .await
        .unwrap();
    for t in [&db.spec.unwrap().template, &agent.spec.unwrap().template] {
        let names: Vec<_> = t.spec.as_ref().unwrap().containers[0]
            .env
            .iter()
            .flatten()
            .map(|e| e.name.clone())
            .collect();
        assert_eq!(
            names,
            [
                "HTTP_PROXY",
                "http_proxy",
                "HTTPS_PROXY",
                "https_proxy",
                "NO_PROXY",
                "no_proxy"
            ]
        );
    }
    let unrelated = env.deployment("team-a", "unrelated").await;
    assert!(hash(&unrelated).is_none() && container(&unrelated, "app").env.is_none());

    // Managed objects: owned by the policy, labelled, NO_PROXY readable without a Secret.
    let cm = Api::<ConfigMap>::namespaced(env.client.clone(), "team-a")
        .get(managed)
        .await
        .unwrap();
    let no_proxy = cm.data.as_ref().unwrap()["NO_PROXY"].clone();
    assert_eq!(Some(no_proxy.clone()), st.no_proxy);
    for entry in [
        "10.43.0.0/16",
        "10.42.0.0/23",
        "10.42.2.0/24",
        "corp.example",
        "cluster.corp",
        "10.20.0.0/16",
        "169.254.169.254",
    ] {
        assert!(no_proxy.contains(entry), "{entry} in {no_proxy}");
    }
    assert!(
        !no_proxy.contains("10.96.0.0/12") && !no_proxy.contains("cluster.local"),
        "{no_proxy}"
    );
    let secret = Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .get(managed)
        .await
        .unwrap();
    assert_eq!(secret.owner_references()[0].name, "outbound");
    assert_eq!(
        secret.labels()["app.kubernetes.io/managed-by"],
        "egress-proxy-operator"
    );
    assert_eq!(cm.owner_references()[0].kind, "EgressProxyPolicy");

    // Server-side apply under the operator's field manager, and nothing else changed.
    let managers: Vec<String> = api
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == "egress-proxy-operator"),
        "{managers:?}"
    );
    assert_eq!(
        template(&api).spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some("api:1")
    );
    op.stop().await;
}

fn env_of<'a>(
    c: &'a k8s_openapi::api::core::v1::Container,
    name: &str,
) -> &'a k8s_openapi::api::core::v1::EnvVar {
    env(c, name).unwrap_or_else(|| panic!("{} has no {name}", c.name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_change_rolls_each_workload_once_and_nothing_else_writes() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.caught_up(OUTBOUND).await;
    let before = env.deployment("team-a", "api").await;
    let workload_patches = |env: &Env| {
        ["deployments", "statefulsets", "daemonsets"]
            .iter()
            .map(|k| env.count("patch", k))
            .sum::<u64>()
    };
    let (patches, writes) = (workload_patches(&env), env.operator_writes());

    // Resync and unrelated changes: no writes at all.
    let unrelated = env
        .patch_deployment(
            "team-a",
            "unrelated",
            json!({"metadata": {"labels": {"tier": "x"}}}),
        )
        .await;
    Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "other"}, "stringData": {"k": "v"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    // The operator watches Secrets by name and label only: it never sees `other`.
    op.looked(OUTBOUND, &[mark(&unrelated)]).await;
    assert_eq!(
        env.operator_writes(),
        writes,
        "unrelated changes wrote something"
    );
    assert_eq!(
        workload_patches(&env),
        patches + 1,
        "only the test's own patch"
    );

    // Operator restart: zero writes.
    op.stop().await;
    let op = env.start();
    op.caught_up(OUTBOUND).await;
    assert_eq!(env.operator_writes(), writes, "a restart wrote something");

    // A new password rolls every selected workload exactly once.
    let changed = env
        .set_secret(
            "team-a",
            "egress-proxy",
            json!({"httpProxy": "http://team-a:second-password@proxy.corp.example:3128"}),
        )
        .await;
    let after = eventually("api re-hashed", || async {
        let d = env.deployment("team-a", "api").await;
        (hash(&d) != hash(&before)).then_some(d)
    })
    .await;
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.looked(OUTBOUND, &[mark(&changed)]).await;
    assert_eq!(
        workload_patches(&env),
        patches + 1 + 3,
        "one patch per selected workload"
    );
    assert_ne!(hash(&after), hash(&before));
    let secret = Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .get("egress-proxy-outbound")
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&secret.data.unwrap()["slot.main.HTTP_PROXY"].0)
            .contains("second-password")
    );
    // And the annotation does not reveal the password.
    assert!(!hash(&after).unwrap().contains("second"));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_reports_sources_and_a_new_node_re_renders_once() {
    let env = Env::new(BASE).await;
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let d = p.status.unwrap().discovered.unwrap();
    let sn = d.service_network.unwrap();
    assert_eq!(sn.values, ["10.43.0.0/16"]);
    assert!(sn.source.unwrap().contains("ServiceCIDR"));
    let cd = d.cluster_domain.unwrap();
    assert_eq!(cd.values, ["cluster.corp"]);
    assert!(cd.source.unwrap().contains("kubelet-config"));
    assert_eq!(
        d.pod_network.unwrap().values,
        ["10.42.0.0/23", "10.42.2.0/24"]
    );
    let api_values = d.api_server.unwrap().values;
    for ip in ["10.43.0.1", "192.168.50.11", "127.0.0.1"] {
        assert!(api_values.contains(&ip.to_string()), "{api_values:?}");
    }
    assert!(d.cloud_metadata.unwrap().source.unwrap().contains("aws"));
    op.caught_up(OUTBOUND).await;
    let before = env.deployment("team-a", "api").await;
    let patches = env.count("patch", "deployments");

    // A Node heartbeat-like change that alters no fact: nothing written.
    let nodes = Api::<Node>::all(env.client.clone());
    let first = nodes.list(&ListParams::default()).await.unwrap().items[0].name_any();
    let beat = nodes
        .patch(
            &first,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"heartbeat": "1"}}})),
        )
        .await
        .unwrap();
    op.looked(OUTBOUND, &[mark(&beat)]).await;
    assert_eq!(env.count("patch", "deployments"), patches);

    // A node joins with a new pod CIDR: NO_PROXY changes, each workload rolls once.
    let joined = nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "ip-192-168-52-14"},
                "spec": {"podCIDRs": ["10.42.3.0/24"], "providerID": "aws:///eu-west-1a/i-0new"},
                "status": {"addresses": [{"type": "InternalIP", "address": "192.168.52.14"}]}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let p = eventually("pod network re-discovered", || async {
        let p = env.policy("team-a", "outbound").await;
        let np = p.status.as_ref()?.no_proxy.clone()?;
        np.contains("10.42.0.0/22").then_some(p)
    })
    .await;
    // Its address is in a new node subnet: written as that /24, the address in status.
    let s = p.status.unwrap();
    assert!(s.no_proxy.unwrap().contains("192.168.52.0/24"));
    let d = s.discovered.unwrap();
    assert!(
        d.node_addresses
            .unwrap()
            .values
            .contains(&"192.168.52.14".into())
    );
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.looked(OUTBOUND, &[mark(&joined)]).await;
    assert_eq!(
        env.count("patch", "deployments"),
        patches + 1,
        "api patched once"
    );
    assert_ne!(hash(&env.deployment("team-a", "api").await), hash(&before));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_fact_is_reported_never_assumed() {
    let env = Env::new(BASE).await;
    Api::<ConfigMap>::namespaced(env.client.clone(), "kube-system")
        .delete("kubelet-config", &DeleteParams::default())
        .await
        .unwrap();
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "DiscoveryIncomplete").await;
    let msg = ready_message(&p);
    assert!(msg.contains("clusterDomain"), "{msg}");
    let cd = p
        .status
        .unwrap()
        .discovered
        .unwrap()
        .cluster_domain
        .unwrap();
    assert!(cd.values.is_empty() && cd.message.is_some());
    assert!(
        hash(&env.deployment("team-a", "api").await).is_none(),
        "nothing applied"
    );
    // The user states the domain: applied.
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"noProxy": {"clusterDomain": "k8s.example"}}}),
    )
    .await;
    let p = wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert!(p.status.unwrap().no_proxy.unwrap().contains("k8s.example"));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_keep_the_last_good_configuration() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.caught_up(OUTBOUND).await;
    let good = env.deployment("team-a", "api").await;
    let patches = env.count("patch", "deployments");

    env.set_secret(
        "team-a",
        "egress-proxy",
        json!({"httpProxy": "http://team-a:pass@proxy.corp.example:99999"}),
    )
    .await;
    let p = wait_reason(&env, "team-a", "outbound", "InvalidProxyURL").await;
    let msg = ready_message(&p);
    assert!(
        msg.contains("httpProxy") && msg.contains("team-a/egress-proxy"),
        "{msg}"
    );
    let stalled = p
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .unwrap();
    assert_eq!(stalled.status, "True");

    env.patch_policy("team-a", "outbound", json!({"spec": {"proxy": {"credentials": [{"name": "main", "secretRef": {"name": "gone"}}]}}})).await;
    wait_reason(&env, "team-a", "outbound", "SecretNotAvailable").await;

    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "proxy-system"}})).unwrap(),
        )
        .await
        .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), "proxy-system")
        .create(&PostParams::default(), &serde_json::from_value(json!({
            "metadata": {"name": "shared"},
            "stringData": {"httpProxy": "http://u:p@proxy.corp.example:3128", "httpsProxy": "http://u:p@proxy.corp.example:3128"}
        })).unwrap())
        .await
        .unwrap();
    let named = env.patch_policy("team-a", "outbound", json!({"spec": {"proxy": {"credentials": [{"name": "main", "secretRef": {"name": "shared", "namespace": "proxy-system"}}]}}})).await;
    wait_reason(&env, "team-a", "outbound", "SecretNotAvailable").await;
    op.looked(OUTBOUND, &[mark(&named)]).await;
    assert_eq!(
        env.count("patch", "deployments"),
        patches,
        "no workload write while the input is bad"
    );
    assert_eq!(
        template(&env.deployment("team-a", "api").await),
        template(&good),
        "last good config kept"
    );

    // The platform team grants team-a: applied.
    Api::<Secret>::namespaced(env.client.clone(), "proxy-system")
        .patch("shared", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"egressproxy.io/allowed-namespaces": "team-b, team-a"}}})))
        .await
        .unwrap();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert_ne!(hash(&env.deployment("team-a", "api").await), hash(&good));
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_entry_is_reported_and_changes_nothing() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let good = env.deployment("team-a", "api").await;
    let invalid = env
        .patch_policy(
            "team-a",
            "outbound",
            json!({"spec": {"noProxy": {"additional": [".corp.example", "10.0.0.0/33"]}}}),
        )
        .await;
    let p = wait_reason(&env, "team-a", "outbound", "InvalidNoProxyEntry").await;
    assert!(
        ready_message(&p).contains("additional[1]"),
        "{}",
        ready_message(&p)
    );
    op.looked(OUTBOUND, &[mark(&invalid)]).await;
    assert_eq!(
        template(&env.deployment("team-a", "api").await),
        template(&good)
    );
    op.stop().await;
}

const OWN_ENV: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: legacy, namespace: team-a, labels: {app: legacy, egress: proxied}}
spec:
  replicas: 1
  selector: {matchLabels: {app: legacy}}
  template:
    metadata: {labels: {app: legacy}}
    spec:
      containers:
        - name: legacy
          image: legacy:1
          env:
            - {name: HTTP_PROXY, value: "http://own-proxy:8080"}
            - {name: TZ, value: UTC}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_reports_the_conflict_and_override_takes_over_then_restores() {
    let env = Env::new(&format!("{BASE}---{OWN_ENV}")).await;
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "EnvConflict").await;
    assert!(
        ready_message(&p).contains("Deployment/legacy"),
        "{}",
        ready_message(&p)
    );
    let legacy = env.deployment("team-a", "legacy").await;
    let c = container(&legacy, "legacy");
    assert_eq!(
        env_of(c, "HTTP_PROXY").value.as_deref(),
        Some("http://own-proxy:8080")
    );
    assert!(
        common::env(c, "http_proxy").is_none(),
        "the pair stays the container's own"
    );
    assert!(
        common::env(c, "HTTPS_PROXY").is_some(),
        "other pairs applied"
    );

    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"existingEnv": "Override"}}),
    )
    .await;
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let legacy = env.deployment("team-a", "legacy").await;
    let c = container(&legacy, "legacy");
    assert_eq!(
        secret_ref(env_of(c, "HTTP_PROXY")).map(|r| r.1),
        Some("slot.main.HTTP_PROXY".into())
    );
    assert!(env_of(c, "HTTP_PROXY").value.is_none());

    // Deselect: the container gets back exactly what it had before the operator.
    env.patch_deployment(
        "team-a",
        "legacy",
        json!({"metadata": {"labels": {"egress": null}}}),
    )
    .await;
    let restored = eventually("legacy restored", || async {
        let d = env.deployment("team-a", "legacy").await;
        hash(&d).is_none().then_some(d)
    })
    .await;
    let c = container(&restored, "legacy");
    let names: Vec<_> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    assert_eq!(
        names,
        [
            (
                "HTTP_PROXY".to_owned(),
                Some("http://own-proxy:8080".to_owned())
            ),
            ("TZ".to_owned(), Some("UTC".to_owned()))
        ]
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_and_relabelled_workloads_are_picked_up_and_released() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let untouched = env.deployment("team-a", "unrelated").await;
    env.patch_deployment(
        "team-a",
        "unrelated",
        json!({"metadata": {"labels": {"egress": "proxied"}}}),
    )
    .await;
    eventually("unrelated picked up", || async {
        hash(&env.deployment("team-a", "unrelated").await)
    })
    .await;
    env.sim
        .apply_yaml(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: late, namespace: team-a, labels: {app: late, egress: proxied}}
spec:
  replicas: 1
  selector: {matchLabels: {app: late}}
  template:
    metadata: {labels: {app: late}}
    spec: {containers: [{name: late, image: late:1}]}
"#,
        )
        .unwrap();
    eventually("late picked up", || async {
        hash(&env.deployment("team-a", "late").await)
    })
    .await;
    env.patch_deployment(
        "team-a",
        "unrelated",
        json!({"metadata": {"labels": {"egress": null}}}),
    )
    .await;
    let back = eventually("unrelated released", || async {
        let d = env.deployment("team-a", "unrelated").await;
        hash(&d).is_none().then_some(d)
    })
    .await;
    assert_eq!(
        container(&back, "app").env.as_deref().unwrap_or_default(),
        container(&untouched, "app")
            .env
            .as_deref()
            .unwrap_or_default()
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_policy_removes_everything_it_added() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let p = env.policy("team-a", "outbound").await;
    assert!(p.finalizers().iter().any(|f| f == "egressproxy.io/cleanup"));
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-a")
        .delete("outbound", &DeleteParams::default())
        .await
        .unwrap();
    eventually("policy gone", || async {
        Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(
            env.client.clone(),
            "team-a",
        )
        .get_opt("outbound")
        .await
        .unwrap()
        .is_none()
        .then_some(())
    })
    .await;
    let api = env.deployment("team-a", "api").await;
    assert!(hash(&api).is_none());
    assert_eq!(env_names(&api, "api"), ["LOG_LEVEL"]);
    assert!(
        container(&api, "migrate")
            .env
            .as_deref()
            .unwrap_or_default()
            .is_empty()
    );
    eventually("managed objects deleted", || async {
        let s = Api::<Secret>::namespaced(env.client.clone(), "team-a")
            .get_opt("egress-proxy-outbound")
            .await
            .unwrap();
        let c = Api::<ConfigMap>::namespaced(env.client.clone(), "team-a")
            .get_opt("egress-proxy-outbound")
            .await
            .unwrap();
        (s.is_none() && c.is_none()).then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_freezes_everything() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    env.patch_policy("team-a", "outbound", json!({"spec": {"suspend": true}}))
        .await;
    wait_reason(&env, "team-a", "outbound", "Suspended").await;
    let frozen = env.deployment("team-a", "api").await;
    let patches = env.count("patch", "deployments");
    let secret = env
        .set_secret(
            "team-a",
            "egress-proxy",
            json!({"httpProxy": "http://team-a:other@proxy.corp.example:3128"}),
        )
        .await;
    let relabelled = env
        .patch_deployment(
            "team-a",
            "api",
            json!({"metadata": {"labels": {"egress": null}}}),
        )
        .await;
    op.looked(OUTBOUND, &[mark(&secret), mark(&relabelled)])
        .await;
    assert_eq!(
        env.count("patch", "deployments"),
        patches + 1,
        "only the test's relabel"
    );
    assert_eq!(hash(&env.deployment("team-a", "api").await), hash(&frozen));
    env.patch_policy("team-a", "outbound", json!({"spec": {"suspend": false}}))
        .await;
    eventually("released after resume", || async {
        hash(&env.deployment("team-a", "api").await)
            .is_none()
            .then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_policies_do_not_flip_flop() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    // Creation timestamps have one-second resolution: make the newer policy visibly newer,
    // and give it a name that sorts first, so only age can decide.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    env.sim
        .apply_yaml(
            r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: aaa-second, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {app: api}}
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
  noProxy: {dialect: curl}
"#,
        )
        .unwrap();
    let p = wait_reason(&env, "team-a", "aaa-second", "PolicyOverlap").await;
    assert!(ready_message(&p).contains("Deployment/api") && ready_message(&p).contains("outbound"));
    let both = &[("team-a", "outbound"), ("team-a", "aaa-second")];
    op.caught_up(both).await;
    let writes = env.count("patch", "deployments");
    let h = hash(&env.deployment("team-a", "api").await);
    op.caught_up(both).await;
    op.caught_up(both).await;
    assert_eq!(env.count("patch", "deployments"), writes, "no flip-flop");
    assert_eq!(hash(&env.deployment("team-a", "api").await), h);
    assert_eq!(
        common::ready(&env.policy("team-a", "outbound").await)
            .unwrap()
            .1,
        "Reconciled"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_opt_in_is_required_and_events_mark_transitions_only() {
    let env = Env::new(&BASE.replace("egressproxy.io/enabled: \"true\"", "other: label")).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "NamespaceNotEnabled").await;
    assert!(hash(&env.deployment("team-a", "api").await).is_none());
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .patch(
            "team-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"egressproxy.io/enabled": "true"}}})),
        )
        .await
        .unwrap();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.caught_up(OUTBOUND).await;
    let events = || async {
        Api::<Event>::namespaced(env.client.clone(), "team-a")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reporting_controller.as_deref() == Some("egress-proxy-operator"))
            .collect::<Vec<_>>()
    };
    let reasons = |evs: Vec<Event>| {
        let mut r: Vec<String> = evs.into_iter().filter_map(|e| e.reason).collect();
        r.sort();
        r
    };
    // One Event per transition: blocked, applied (the rollout starting), ready.
    assert_eq!(
        reasons(events().await),
        ["ConfigApplied", "NamespaceNotEnabled", "Reconciled"]
    );
    let n = events().await.len();
    // Many reconciles later (each look touches the policy twice): no new events.
    for _ in 0..3 {
        op.caught_up(OUTBOUND).await;
    }
    assert_eq!(events().await.len(), n, "no event without a transition");

    // The admin takes the opt-in back: everything the operator added goes.
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client.clone())
        .patch(
            "team-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"egressproxy.io/enabled": null}}})),
        )
        .await
        .unwrap();
    wait_reason(&env, "team-a", "outbound", "NamespaceNotEnabled").await;
    let api = released_api(&env).await;
    assert_eq!(env_names(&api, "api"), ["LOG_LEVEL"]);
    eventually("managed Secret deleted", || async {
        Api::<Secret>::namespaced(env.client.clone(), "team-a")
            .get_opt("egress-proxy-outbound")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    // The finalizer goes in the same reconcile, after the deletes: wait for it.
    eventually("the finalizer removed: nothing left to clean", || async {
        let p = env.policy("team-a", "outbound").await;
        (!p.finalizers().iter().any(|f| f == "egressproxy.io/cleanup")).then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciles_read_from_caches_not_lists() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.caught_up(OUTBOUND).await;
    let lists = |env: &Env| {
        env.sim
            .request_counts()
            .by_verb_resource
            .iter()
            .filter(|((v, _), _)| v == "list")
            .map(|(_, n)| *n)
            .sum::<u64>()
    };
    let before = lists(&env);
    for _ in 0..5 {
        op.caught_up(OUTBOUND).await;
    }
    assert_eq!(lists(&env), before, "a reconcile listed something");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_with_exactly_the_shipped_rbac() {
    let env = Env::new(BASE).await;
    env.sim
        .apply_yaml(include_str!("../../../deploy/rbac.yaml"))
        .unwrap();
    let token = env
        .sim
        .service_account_token("egress-proxy-system", "egress-proxy-operator");
    let client = env.sim.client_with_token(&token).unwrap();
    // The token really is limited: it may not read what the role leaves out.
    let denied = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone())
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(denied, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{denied:?}"
    );

    let metrics = std::sync::Arc::new(egress_proxy_operator::metrics::Metrics::new());
    let settings = egress_proxy_operator::controller::Settings {
        metrics: metrics.clone(),
        // Only changes wake the policy here.
        resync: Duration::from_secs(600),
        ..env.settings()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(egress_proxy_operator::controller::run(
        client,
        settings,
        async {
            let _ = stopped.await;
        },
    ));
    // Until the namespace's admin binds the tenant role, nothing is written there.
    wait_reason(&env, "team-a", "outbound", "NamespaceNotAuthorized").await;
    assert_eq!(hash(&env.deployment("team-a", "api").await), None);
    // The refused watches of the namespace retry with backoff; a retry refused again is no
    // change of access and wakes nobody: some stretch of two refused retries passes without
    // a reconcile. (Other wakes, such as the first reconcile's own status write, may fall
    // into one stretch on a busy machine; a retry that woke the policy falls into every one.)
    let count = |name: &str, label: &str| {
        let text = metrics.encode(true);
        let line = text
            .lines()
            .find(|l| l.starts_with(name) && l.contains(label));
        line.and_then(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let seen = || {
        (
            count("egress_proxy_reconciles_total", "result=\"success\""),
            count("egress_proxy_watch_restarts_total", "kind=\"Secret\""),
        )
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let mut stretch = seen();
    loop {
        let now = seen();
        if now.1 >= stretch.1 + 2.0 {
            if now.0 == stretch.0 {
                break;
            }
            stretch = now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a refused retry woke the policy: every stretch of two retries had a reconcile"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    env.sim
        .apply_yaml(include_str!("../../../deploy/tenant.yaml"))
        .unwrap();
    let p = wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert_eq!(p.status.unwrap().workloads.unwrap().up_to_date, 3);
    // Deleting the policy exercises the cleanup permissions too.
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-a")
        .delete("outbound", &DeleteParams::default())
        .await
        .unwrap();
    eventually("cleaned up with the shipped role", || async {
        hash(&env.deployment("team-a", "api").await)
            .is_none()
            .then_some(())
    })
    .await;
    let _ = stop.send(());
    let _ = task.await;
}

/// team-a's `api` once it no longer carries a config hash.
async fn released_api(env: &Env) -> Deployment {
    eventually("released", || async {
        let d = env.deployment("team-a", "api").await;
        hash(&d).is_none().then_some(d)
    })
    .await
}

/// The env entry names of one container.
fn env_names(d: &Deployment, name: &str) -> Vec<String> {
    let env = container(d, name).env.iter().flatten();
    env.map(|e| e.name.clone()).collect()
}

async fn injected(env: &Env) -> Vec<&'static str> {
    let mut n = Vec::new();
    for d in ["a", "b", "c"] {
        if hash(&env.deployment("team-r", d).await).is_some() {
            n.push(d);
        }
    }
    n
}

fn hanging(names: &[&str]) -> String {
    let mut y = String::from(
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: team-r, labels: {egressproxy.io/enabled: "true"}}
---
apiVersion: v1
kind: Secret
metadata: {name: egress-proxy, namespace: team-r}
stringData: {httpProxy: "http://u:p@proxy.corp.example:3128", httpsProxy: "http://u:p@proxy.corp.example:3128"}
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: outbound, namespace: team-r}
spec:
  workloadSelector: {matchLabels: {egress: proxied}}
  proxy: {credentials: [{name: main, secretRef: {name: egress-proxy}}], active: main}
  rollout: {maxConcurrent: 1}
"#,
    );
    for n in names {
        y.push_str(&format!(
            r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {n}, namespace: team-r, labels: {{app: {n}, egress: proxied}}, annotations: {{kube-sim.io/rollout: hang}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {n}}}}}
  template:
    metadata: {{labels: {{app: {n}}}}}
    spec: {{containers: [{{name: {n}, image: "{n}:1"}}]}}
"#
        ));
    }
    y
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_max_concurrent_workloads_roll_at_a_time() {
    let env = Env::new(&hanging(&["a", "b", "c"])).await;
    let op = env.start();
    let p = wait_reason(&env, "team-r", "outbound", "RolloutInProgress").await;
    op.caught_up(&[("team-r", "outbound")]).await;
    assert_eq!(injected(&env).await, ["a"], "one at a time, in name order");
    let pending = p.status.unwrap().workloads.unwrap().pending;
    assert!(
        pending.iter().any(|w| w.starts_with("Deployment/b")),
        "{pending:?}"
    );
    // a finishes: b goes next, and only b.
    env.patch_deployment(
        "team-r",
        "a",
        json!({"metadata": {"annotations": {"kube-sim.io/rollout": null}}}),
    )
    .await;
    eventually("b rolls", || async {
        hash(&env.deployment("team-r", "b").await).map(|_| ())
    })
    .await;
    op.caught_up(&[("team-r", "outbound")]).await;
    assert_eq!(injected(&env).await, ["a", "b"]);
    for d in ["b", "c"] {
        env.patch_deployment(
            "team-r",
            d,
            json!({"metadata": {"annotations": {"kube-sim.io/rollout": null}}}),
        )
        .await;
    }
    wait_reason(&env, "team-r", "outbound", "Reconciled").await;
    assert_eq!(injected(&env).await, ["a", "b", "c"]);
    op.stop().await;
}

fn paced(names: &[&str]) -> String {
    let mut y = hanging(&[])
        .replace("team-r", "team-p")
        .replace("rollout: {maxConcurrent: 1}", "rollout: {maxConcurrent: 2}");
    for n in names {
        y.push_str(&format!(
            r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {n}, namespace: team-p, labels: {{app: {n}, egress: proxied}}}}
spec:
  replicas: 2
  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}
  selector: {{matchLabels: {{app: {n}}}}}
  template:
    metadata: {{labels: {{app: {n}}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers: [{{name: {n}, image: "{n}:1"}}]
"#
        ));
    }
    y
}

/// What `kubectl rollout status` calls done.
fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = d.status.clone().unwrap_or_default();
    let updated = st.updated_replicas.unwrap_or(0);
    st.observed_generation >= d.metadata.generation
        && updated >= want
        && st.replicas.unwrap_or(0) <= updated
        && st.available_replicas.unwrap_or(0) >= updated
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_holds_across_paced_rollouts() {
    use futures::StreamExt;
    use kube::api::WatchEvent;
    // Pods take 2 s to get Ready and 5 s to stop; each rollout spans several reconciles.
    let env = Env::paced(&paced(&["a", "b", "c", "d"]), Duration::from_secs(2), 1.0).await;
    let op = env.start();
    wait_reason(&env, "team-p", "outbound", "Reconciled").await;
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), "team-p");
    let listed = api.list(&ListParams::default()).await.expect("list");
    let rv = listed.metadata.resource_version.clone().expect("rv");
    let mut now: std::collections::BTreeMap<String, Deployment> = listed
        .items
        .into_iter()
        .map(|d| (d.name_any(), d))
        .collect();
    let before: std::collections::BTreeMap<String, Option<String>> =
        now.iter().map(|(n, d)| (n.clone(), hash(d))).collect();
    assert!(before.values().all(Option::is_some), "{before:?}");
    let mut events = api
        .watch(&kube::api::WatchParams::default().timeout(290), &rv)
        .await
        .expect("watch")
        .boxed();
    env.set_secret(
        "team-p",
        "egress-proxy",
        json!({"httpProxy": "http://u:second@proxy.corp.example:3128"}),
    )
    .await;
    let mut most = 0;
    let mut started = Vec::new();
    let all_done = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(ev) = events.next().await {
            let (WatchEvent::Added(d) | WatchEvent::Modified(d)) = ev.expect("event") else {
                continue;
            };
            now.insert(d.name_any(), d);
            let moved = |d: &Deployment| hash(d) != before[&d.name_any()];
            for d in now.values().filter(|d| moved(d)) {
                if !started.contains(&d.name_any()) {
                    started.push(d.name_any());
                }
            }
            let rolling = now.values().filter(|d| moved(d) && !rolled_out(d)).count();
            assert!(
                rolling <= 2,
                "{rolling} rolling at once, maxConcurrent is 2"
            );
            most = most.max(rolling);
            if now.values().all(|d| moved(d) && rolled_out(d)) {
                return;
            }
        }
    })
    .await;
    assert!(all_done.is_ok(), "not every Deployment rolled: {started:?}");
    assert_eq!(most, 2, "the budget was used");
    assert_eq!(started, ["a", "b", "c", "d"], "in name order");
    wait_reason(&env, "team-p", "outbound", "Reconciled").await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_rollout_writes_nothing_until_resumed() {
    let env = Env::new(&BASE.replace(
        "rollout: {maxConcurrent: 10}",
        "rollout: {maxConcurrent: 10, paused: true}",
    ))
    .await;
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "RolloutPaused").await;
    assert_eq!(
        p.status
            .as_ref()
            .unwrap()
            .workloads
            .as_ref()
            .unwrap()
            .pending
            .len(),
        3
    );
    assert!(
        p.status.unwrap().no_proxy.is_some(),
        "the value is computed and reported"
    );
    assert!(hash(&env.deployment("team-a", "api").await).is_none());
    let secret = Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .get_opt("egress-proxy-outbound")
        .await
        .unwrap();
    assert!(secret.is_none(), "no managed object while paused");
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"rollout": {"paused": false}}}),
    )
    .await;
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert!(hash(&env.deployment("team-a", "api").await).is_some());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_strips_nothing_and_recovers() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let before = env.deployment("team-a", "api").await;

    // Workload writes fail until the test has looked: the failure is reported, nothing is
    // stripped. (A fault that ends by itself could let a retry land before the look.)
    env.sim.inject_fault(kube_sim::hooks::FaultRule::new(
        Some("patch"),
        Some("deployments"),
        kube_sim::hooks::Fault::Status {
            // 500: kube-rs retries a 503 by itself.
            code: 500,
            retry_after_seconds: None,
        },
    ));
    env.set_secret(
        "team-a",
        "egress-proxy",
        json!({"httpProxy": "http://team-a:during-outage@proxy.corp.example:3128"}),
    )
    .await;
    let p = wait_reason(&env, "team-a", "outbound", "WorkloadUpdateFailed").await;
    assert!(
        ready_message(&p).contains("Deployment/api"),
        "{}",
        ready_message(&p)
    );
    assert_eq!(
        template(&env.deployment("team-a", "api").await),
        template(&before)
    );
    env.sim.clear_faults();
    let after = eventually("new config once writes work again", || async {
        let d = env.deployment("team-a", "api").await;
        (hash(&d) != hash(&before)).then_some(d)
    })
    .await;
    assert_eq!(container(&after, "api").env.iter().flatten().count(), 7);
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;

    // The whole API away: the operator keeps running and catches up afterwards.
    env.sim.api_down_for(Duration::from_secs(3));
    tokio::time::sleep(Duration::from_secs(4)).await;
    env.set_secret(
        "team-a",
        "egress-proxy",
        json!({"httpProxy": "http://team-a:after-outage@proxy.corp.example:3128"}),
    )
    .await;
    eventually("caught up after the outage", || async {
        let d = env.deployment("team-a", "api").await;
        (hash(&d) != hash(&after)).then_some(())
    })
    .await;
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_kind_releases_those_workloads() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"workloadKinds": ["Deployment"]}}),
    )
    .await;
    eventually("StatefulSet and DaemonSet released", || async {
        let db = Api::<StatefulSet>::namespaced(env.client.clone(), "team-a")
            .get("db")
            .await
            .unwrap();
        let agent = Api::<DaemonSet>::namespaced(env.client.clone(), "team-a")
            .get("agent")
            .await
            .unwrap();
        let clean = |t: &k8s_openapi::api::core::v1::PodTemplateSpec| {
            t.spec.as_ref().unwrap().containers[0]
                .env
                .as_deref()
                .unwrap_or_default()
                .is_empty()
        };
        (clean(&db.spec.unwrap().template) && clean(&agent.spec.unwrap().template)).then_some(())
    })
    .await;
    let p = wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert_eq!(p.status.unwrap().workloads.unwrap().selected, 1);
    assert!(hash(&env.deployment("team-a", "api").await).is_some());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_an_override_policy_restores_the_containers_own_values() {
    let yaml = format!("{BASE}---{OWN_ENV}").replace(
        "  proxy:\n    credentials: [{name: main",
        "  existingEnv: Override\n  proxy:\n    credentials: [{name: main",
    );
    let env = Env::new(&yaml).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let legacy = env.deployment("team-a", "legacy").await;
    assert!(
        env_of(container(&legacy, "legacy"), "HTTP_PROXY")
            .value
            .is_none(),
        "overridden"
    );
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-a")
        .delete("outbound", &DeleteParams::default())
        .await
        .unwrap();
    let restored = eventually("restored on deletion", || async {
        let d = env.deployment("team-a", "legacy").await;
        hash(&d).is_none().then_some(d)
    })
    .await;
    let env_now: Vec<_> = container(&restored, "legacy")
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone(), e.value_from.is_some()))
        .collect();
    assert_eq!(
        env_now,
        [
            (
                "HTTP_PROXY".to_owned(),
                Some("http://own-proxy:8080".to_owned()),
                false
            ),
            ("TZ".to_owned(), Some("UTC".to_owned()), false)
        ]
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_policy_takes_over_only_after_the_newer_one_released_the_workload() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    env.sim
        .apply_yaml(
            r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: newer, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {team: x}}
  existingEnv: Override
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: team-a, labels: {app: w, team: x}}
spec:
  replicas: 1
  selector: {matchLabels: {app: w}}
  template:
    metadata: {labels: {app: w}}
    spec: {containers: [{name: w, image: "w:1"}]}
"#,
        )
        .unwrap();
    wait_reason(&env, "team-a", "newer", "Reconciled").await;
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"existingEnv": "Override"}}),
    )
    .await;
    // The older policy now selects w too: it wins, but only after `newer` took its entries out.
    env.patch_deployment(
        "team-a",
        "w",
        json!({"metadata": {"labels": {"egress": "proxied"}}}),
    )
    .await;
    wait_reason(&env, "team-a", "newer", "PolicyOverlap").await;
    let w = eventually("w managed by outbound", || async {
        let d = env.deployment("team-a", "w").await;
        let refs: Vec<String> = container(&d, "w")
            .env
            .iter()
            .flatten()
            .filter_map(|e| secret_ref(e).or_else(|| cm_ref(e)).map(|r| r.0))
            .collect();
        (refs.len() == 6 && refs.iter().all(|r| r == "egress-proxy-outbound")).then_some(d)
    })
    .await;
    assert!(hash(&w).is_some());
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let managed = Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .get("egress-proxy-outbound")
        .await
        .unwrap();
    let originals: Vec<&String> = managed
        .data
        .as_ref()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("original."))
        .collect();
    assert!(
        originals.is_empty(),
        "another policy's entries were remembered as originals: {originals:?}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_grant_or_a_deleted_source_takes_the_credential_away() {
    let shared = r#"
---
apiVersion: v1
kind: Namespace
metadata: {name: proxy-system}
---
apiVersion: v1
kind: Secret
metadata:
  name: shared
  namespace: proxy-system
  annotations: {egressproxy.io/allowed-namespaces: team-a}
stringData:
  httpProxy: http://shared:Withdrawn5ecret@proxy.corp.example:3128
  httpsProxy: http://shared:Withdrawn5ecret@proxy.corp.example:3128
"#;
    let base = BASE.replace(
        "credentials: [{name: main, secretRef: {name: egress-proxy}}]",
        "credentials: [{name: main, secretRef: {name: shared, namespace: proxy-system}}]",
    );
    let env = Env::new(&format!("{base}{shared}")).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let managed = || async {
        Api::<Secret>::namespaced(env.client.clone(), "team-a")
            .get("egress-proxy-outbound")
            .await
            .expect("managed Secret")
    };
    assert!(
        managed()
            .await
            .data
            .unwrap()
            .contains_key("slot.main.HTTP_PROXY")
    );

    // The owner of the shared Secret withdraws the grant.
    let sources = Api::<Secret>::namespaced(env.client.clone(), "proxy-system");
    sources
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"egressproxy.io/allowed-namespaces": "team-b"}}})),
        )
        .await
        .unwrap();
    let p = wait_reason(&env, "team-a", "outbound", "SecretNotAvailable").await;
    assert!(
        ready_message(&p).contains("released"),
        "{}",
        ready_message(&p)
    );
    let api = released_api(&env).await;
    assert_eq!(env_names(&api, "api"), ["LOG_LEVEL"]);
    let data = managed().await.data.unwrap_or_default();
    assert!(
        data.keys()
            .all(|k| k == "hash-key" || k.starts_with("original.")),
        "the copy of the credential is gone: {:?}",
        data.keys().collect::<Vec<_>>()
    );

    // Granted again: injected again.
    sources
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"egressproxy.io/allowed-namespaces": "team-b,team-a"}}})),
        )
        .await
        .unwrap();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert!(hash(&env.deployment("team-a", "api").await).is_some());

    // The source is deleted: the same.
    sources
        .delete("shared", &DeleteParams::default())
        .await
        .unwrap();
    wait_reason(&env, "team-a", "outbound", "SecretNotAvailable").await;
    eventually("released after the deletion", || async {
        hash(&env.deployment("team-a", "api").await)
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        !managed()
            .await
            .data
            .unwrap_or_default()
            .contains_key("slot.main.HTTP_PROXY")
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_no_process_can_start_with_and_a_lost_star_change_nothing() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let good = env.deployment("team-a", "api").await;

    // 700 schema-valid entries of about 200 characters: NO_PROXY over 131,072 bytes.
    let label = "x".repeat(60);
    let long: Vec<String> = (0..700)
        .map(|i| format!("h{i:04}.{label}.{label}.{label}.corp.test"))
        .collect();
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"noProxy": {"additional": long}}}),
    )
    .await;
    let p = wait_reason(&env, "team-a", "outbound", "EnvironmentTooLarge").await;
    assert!(
        ready_message(&p).contains("MAX_ARG_STRLEN"),
        "{}",
        ready_message(&p)
    );
    assert_eq!(
        template(&env.deployment("team-a", "api").await),
        template(&good)
    );

    // `*` in a dialect that cannot say "everything direct".
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"noProxy": {"additional": [".corp.example", "*"], "dialect": "portable"}}}),
    )
    .await;
    let p = wait_reason(&env, "team-a", "outbound", "InvalidNoProxyEntry").await;
    assert!(ready_message(&p).contains("\"*\""), "{}", ready_message(&p));
    assert_eq!(
        template(&env.deployment("team-a", "api").await),
        template(&good)
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_container_name_is_reported_and_restarts_nothing() {
    let env = Env::new(&BASE.replace(
        "  rollout: {maxConcurrent: 10}",
        "  rollout: {maxConcurrent: 10}\n  containers: [ap]",
    ))
    .await;
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "ContainerNotFound").await;
    assert!(ready_message(&p).ends_with(": ap"), "{}", ready_message(&p));
    op.caught_up(OUTBOUND).await;
    assert_eq!(
        env.count("patch", "deployments"),
        0,
        "no annotation-only write"
    );
    assert!(hash(&env.deployment("team-a", "api").await).is_none());
    op.stop().await;
}

/// Issue 31 item 6: a workload write carries the resourceVersion its plan read. With the
/// operator's Deployment cache held at version N (its list and watch refused) while another
/// writer moves the Deployment to N+1, the operator's write is refused with 409 Conflict and
/// changes nothing; no Warning, no failed condition; once the cache catches up, the operator
/// plans again and converges with exactly one more roll, the other change kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_planned_against_an_older_version_is_refused_then_planned_again() {
    use kube_sim::hooks::{Fault, FaultRule};
    let env = Env::new(BASE).await;
    let settings = env.settings();
    let metrics = settings.metrics.clone();
    let op = env.start_with(settings);
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.caught_up(OUTBOUND).await;
    let before = env.deployment("team-a", "api").await;
    let rolls = |env: &Env| {
        let api =
            Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(env.client.clone(), "team-a");
        async move {
            let rs = api.list(&ListParams::default()).await.expect("replicasets");
            rs.items
                .iter()
                .filter(|r| r.owner_references().iter().any(|o| o.name == "api"))
                .count()
        }
    };
    let warnings = |env: &Env| {
        let api = Api::<Event>::namespaced(env.client.clone(), "team-a");
        async move {
            let all = api.list(&ListParams::default()).await.expect("events");
            let w = all
                .items
                .iter()
                .filter(|e| e.type_.as_deref() == Some("Warning"));
            w.map(|e| format!("{:?}: {:?}", e.reason, e.note))
                .collect::<Vec<_>>()
        }
    };
    let (rolls_before, warnings_before) = (rolls(&env).await, warnings(&env).await);

    // Hold the operator's Deployment cache at version N.
    let refuse = |verb| {
        let fault = Fault::Status {
            code: 503,
            retry_after_seconds: None,
        };
        FaultRule::new(Some(verb), Some("deployments"), fault)
    };
    env.sim.inject_fault(refuse("watch"));
    env.sim.inject_fault(refuse("list"));
    env.sim.expire_watches();

    // Another writer moves the Deployment to N+1 (a new image: one roll).
    let other = Api::<Deployment>::namespaced(env.client.clone(), "team-a")
        .patch(
            "api",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "api", "image": "api:2"}]}}}})),
        )
        .await
        .expect("the other writer's patch");
    let patches = env.count("patch", "deployments");

    // A policy change: the operator plans a write to api against N.
    env.patch_policy(
        "team-a",
        "outbound",
        json!({"spec": {"noProxy": {"additional": [".corp.example", "10.20.0.0/16", "extra.example"]}}}),
    )
    .await;
    // Refused, then planned again against the same cache and refused again: the first
    // answer is in by the second attempt. (A write that lands is not sent twice.)
    let held = eventually("two writes to api, or one that landed", || async {
        let d = env.deployment("team-a", "api").await;
        let retried = env.count("patch", "deployments") >= patches + 2;
        (retried || hash(&d) != hash(&before)).then_some(d)
    })
    .await;
    // (The simulated Deployment controller moves its status on: only the template counts.)
    assert_eq!(
        hash(&held),
        hash(&before),
        "a write planned against an older version landed"
    );
    assert_eq!(template(&held), template(&other));
    assert_eq!(container(&held, "api").image.as_deref(), Some("api:2"));
    let p = env.policy("team-a", "outbound").await;
    let conditions = p.status.map(|s| s.conditions).unwrap_or_default();
    assert!(
        !conditions
            .iter()
            .any(|c| c.reason == "WorkloadUpdateFailed"),
        "a refused write is no failure: {conditions:?}"
    );

    // The cache catches up: one write, one roll, the other change kept.
    env.sim.clear_faults();
    let db_hash = eventually("db rolled to the new config", || async {
        let db = Api::<StatefulSet>::namespaced(env.client.clone(), "team-a")
            .get("db")
            .await
            .expect("db");
        let h = db
            .spec?
            .template
            .metadata?
            .annotations?
            .remove("egressproxy.io/config-hash");
        (h != hash(&before)).then_some(h)
    })
    .await;
    let after = eventually("api rolled to the new config", || async {
        let d = env.deployment("team-a", "api").await;
        (hash(&d) == db_hash).then_some(d)
    })
    .await;
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.caught_up(OUTBOUND).await;
    assert_eq!(container(&after, "api").image.as_deref(), Some("api:2"));
    assert_eq!(
        rolls(&env).await,
        rolls_before + 2,
        "the other writer's roll and exactly one of the operator's"
    );
    assert_eq!(warnings(&env).await, warnings_before, "Warning Events");
    let text = metrics.encode(true);
    assert!(
        text.lines()
            .any(|l| l.starts_with("egress_proxy_reconciles_total")
                && l.contains("category=\"conflict\"")),
        "refusals are counted as conflicts:\n{text}"
    );
    op.stop().await;
}
