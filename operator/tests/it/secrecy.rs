//! A sentinel password, planted in valid and invalid proxy URLs, must appear nowhere but in
//! Secrets: not in debug logs, Events, status, annotations, pod templates or error messages.

use crate::common;

use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde::Serialize;
use serde_json::json;

const SENTINEL: &str = "Sentinel-pw-7f3a9c";

async fn dump<K>(env: &Env) -> String
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Serialize,
{
    let items = Api::<K>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list")
        .items;
    serde_json::to_string(&items).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_appears_only_in_secrets() {
    let logs = common::logs::capture();

    let yaml = format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: team-s, labels: {{egressproxy.io/enabled: "true"}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: vault}}
---
apiVersion: v1
kind: Secret
metadata: {{name: proxy, namespace: team-s}}
stringData:
  httpProxy: http://svc-user:{SENTINEL}@proxy.corp.example:3128
  httpsProxy: http://svc-user:{SENTINEL}@proxy.corp.example:3128
---
apiVersion: v1
kind: Secret
metadata: {{name: not-granted, namespace: vault}}
stringData:
  httpProxy: http://svc-user:{SENTINEL}@proxy.corp.example:3128
  httpsProxy: http://svc-user:{SENTINEL}@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: team-s}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  existingEnv: Override
  proxy:
    credentials:
      - {{name: a, secretRef: {{name: proxy}}}}
      - {{name: b, secretRef: {{name: not-granted, namespace: vault}}}}
    active: a
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app, namespace: team-s, labels: {{app: app, egress: proxied}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: app}}}}
  template:
    metadata: {{labels: {{app: app}}}}
    spec:
      containers:
        - name: app
          image: app:1
          env: [{{name: HTTPS_PROXY, value: "http://legacy:{SENTINEL}@old-proxy:3128"}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: store, namespace: team-s, labels: {{app: store, egress: proxied}}}}
spec:
  serviceName: store
  replicas: 1
  selector: {{matchLabels: {{app: store}}}}
  template:
    metadata: {{labels: {{app: store}}}}
    spec: {{containers: [{{name: store, image: store:1}}]}}
"#
    );
    let env = Env::new(&yaml).await;
    let op = env.start();
    wait_reason(&env, "team-s", "outbound", "Reconciled").await;

    // Every error path, each with the password inside the bad value.
    let bad = [
        (
            format!("http://svc-user:{SENTINEL}@proxy.corp.example:99999"),
            "InvalidProxyURL",
        ),
        (
            format!("socks5://svc-user:{SENTINEL}@proxy.corp.example:1080"),
            "InvalidProxyURL",
        ),
        (
            format!("http://svc-user:{SENTINEL}@x@proxy.corp.example:3128"),
            "InvalidProxyURL",
        ),
        (
            format!("http://svc-user:{SENTINEL}@proxy corp:3128"),
            "InvalidProxyURL",
        ),
        (
            format!("http://svc-user:{SENTINEL}@proxy.corp.example:3128/path?q=1"),
            "InvalidProxyURL",
        ),
    ];
    let mut seen: Vec<String> = Vec::new();
    for (url, reason) in &bad {
        env.set_secret("team-s", "proxy", json!({"httpProxy": url}))
            .await;
        // Each bad URL has its own message: wait for this one to be reported.
        let p = eventually("the next bad URL reported", || async {
            let p = env.policy("team-s", "outbound").await;
            let fresh = common::ready(&p).is_some_and(|r| r.1 == *reason)
                && !seen.contains(&ready_message(&p));
            fresh.then_some(p)
        })
        .await;
        seen.push(ready_message(&p));
    }
    assert_eq!(seen.len(), bad.len());
    env.set_secret(
        "team-s",
        "proxy",
        json!({"httpProxy": format!("http://svc-user:{SENTINEL}2@proxy.corp.example:3128")}),
    )
    .await;
    wait_reason(&env, "team-s", "outbound", "Reconciled").await;
    env.patch_policy(
        "team-s",
        "outbound",
        json!({"spec": {"proxy": {"active": "b"}}}),
    )
    .await;
    wait_reason(&env, "team-s", "outbound", "SecretNotAvailable").await;
    env.patch_policy(
        "team-s",
        "outbound",
        json!({"spec": {"proxy": {"active": "a"}}}),
    )
    .await;
    wait_reason(&env, "team-s", "outbound", "Reconciled").await;
    env.sim.api_down_for(std::time::Duration::from_secs(2));
    env.set_secret(
        "team-s",
        "proxy",
        json!({"httpProxy": format!("http://svc-user:{SENTINEL}3@proxy.corp.example:3128")}),
    )
    .await;
    // The change made during the outage reaches the managed Secret once the API is back.
    let third = format!("{SENTINEL}3");
    eventually("the new password in the managed Secret", || async {
        let managed =
            Api::<k8s_openapi::api::core::v1::Secret>::namespaced(env.client.clone(), "team-s")
                .get_opt("egress-proxy-outbound")
                .await
                .ok()??;
        let data = managed.data.unwrap_or_default();
        data.values()
            .any(|v| String::from_utf8_lossy(&v.0).contains(&third))
            .then_some(())
    })
    .await;
    wait_reason(&env, "team-s", "outbound", "Reconciled").await;
    // Status and Events of the whole run, before the policy goes.
    let statuses = dump::<egress_proxy_operator::api::EgressProxyPolicy>(&env).await;
    assert!(statuses.contains("\"noProxy\""), "the status was captured");
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-s")
        .delete("outbound", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("cleanup", || async {
        hash(&env.deployment("team-s", "app").await)
            .is_none()
            .then_some(())
    })
    .await;
    op.stop().await;

    let captured = logs.text();
    let mut places = vec![
        ("logs", captured),
        ("events", dump::<Event>(&env).await),
        ("policy status", statuses),
        ("messages seen", seen.join("\n")),
        ("configmaps", dump::<ConfigMap>(&env).await),
        ("replicasets", dump::<ReplicaSet>(&env).await),
        ("pods", dump::<Pod>(&env).await),
        ("statefulsets", dump::<StatefulSet>(&env).await),
    ];
    places.push(("deployments", dump::<Deployment>(&env).await));
    // The user's own legacy value lives in its pod templates (and is restored there after
    // the operator leaves); it is theirs, so it is cut out before looking.
    let legacy = format!("http://legacy:{SENTINEL}@old-proxy:3128");
    for (_, text) in places.iter_mut().skip(1) {
        *text = text.replace(&legacy, "");
    }
    let logs_len = places[0].1.len();
    assert!(
        logs_len > 10_000,
        "debug logs were captured ({logs_len} bytes)"
    );
    assert!(
        places[0].1.contains("egress_proxy_operator"),
        "the operator's own logs were captured"
    );
    for (what, text) in &places {
        assert!(!text.contains(SENTINEL), "the password leaked into {what}");
    }
}
