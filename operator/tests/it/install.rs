//! Install shapes: a namespaced install that may only read and write its listed namespaces,
//! and `run` leaving nothing behind when it returns.

use crate::common;

use std::time::Duration;

use common::*;
use egress_proxy_operator::controller::{Overrides, Settings};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};

fn team(ns: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: egress-proxy, namespace: {ns}}}
stringData:
  httpProxy: http://{ns}:pw@proxy.corp.example:3128
  httpsProxy: http://{ns}:pw@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: {ns}}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials: [{{name: main, secretRef: {{name: egress-proxy}}}}]
    active: main
  noProxy:
    discover: {{nodeAddresses: false}}
    cloudMetadata: Omit
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api, namespace: {ns}, labels: {{app: api, egress: proxied}}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec: {{containers: [{{name: api, image: api:1}}]}}
"#
    )
}

/// A Role with what the operator does inside one namespace, bound to its ServiceAccount.
fn role(ns: &str) -> String {
    format!(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: egress-proxy-operator, namespace: {ns}}}
rules:
  - apiGroups: [egressproxy.io]
    resources: [egressproxypolicies, egressproxypolicies/status]
    verbs: [get, list, watch, patch]
  - apiGroups: [apps]
    resources: [deployments, statefulsets, daemonsets]
    verbs: [get, list, watch, patch]
  - apiGroups: [batch]
    resources: [cronjobs]
    verbs: [get, list, watch, patch]
  - apiGroups: [""]
    resources: [secrets, configmaps]
    verbs: [get, list, watch, create, patch, delete]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: egress-proxy-operator, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: egress-proxy-operator}}
subjects: [{{kind: ServiceAccount, name: operator, namespace: egress-proxy-system}}]
"#
    )
}

/// A namespaced install of team-a and team-b; the cluster-scoped facts come from flags.
fn namespaced(env: &Env) -> Settings {
    Settings {
        namespaces: vec!["team-a".into(), "team-b".into()],
        overrides: Overrides {
            cluster_domain: Some("cluster.corp".into()),
            service_cidrs: vec!["10.43.0.0/16".into()],
            pod_cidrs: vec!["10.42.0.0/16".into()],
            ..Default::default()
        },
        discovery_wait: Duration::from_secs(1),
        ..env.settings()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_install_watches_each_listed_namespace_with_only_their_roles() {
    let yaml = [team("team-a"), team("team-b"), team("team-c")].join("---");
    let env = Env::new(&yaml).await;
    env.sim
        .apply_yaml(&format!("{}---{}", role("team-a"), role("team-b")))
        .expect("roles");
    let token = env
        .sim
        .service_account_token("egress-proxy-system", "operator");
    let client = env.sim.client_with_token(&token).expect("client");
    // The token cannot list anything cluster-wide: a cluster-wide watch would never start.
    let denied = Api::<ConfigMap>::all(client.clone())
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(denied, Err(kube::Error::Api(ref s)) if s.code == 403),
        "{denied:?}"
    );
    let settings = namespaced(&env);
    let op = env.start_as(client, settings);
    for ns in ["team-a", "team-b"] {
        let p = wait_reason(&env, ns, "outbound", "Reconciled").await;
        assert_eq!(
            p.status.and_then(|s| s.workloads).map(|w| w.up_to_date),
            Some(1)
        );
        assert!(hash(&env.deployment(ns, "api").await).is_some(), "{ns}");
    }
    // A namespace off the list is not watched at all: its policy never gets a status.
    let c = env.policy("team-c", "outbound").await;
    assert!(c.status.is_none(), "{:?}", c.status);
    assert!(hash(&env.deployment("team-c", "api").await).is_none());
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_one_listed_namespace_wakes_a_policy_of_another() {
    // team-a's policy uses a Secret of team-b, granted to team-a.
    let a = team("team-a").replace(
        "secretRef: {name: egress-proxy}",
        "secretRef: {name: shared, namespace: team-b}",
    );
    let shared = r#"
apiVersion: v1
kind: Secret
metadata:
  name: shared
  namespace: team-b
  annotations: {egressproxy.io/allowed-namespaces: team-a}
stringData:
  httpProxy: http://shared:first@proxy.corp.example:3128
  httpsProxy: http://shared:first@proxy.corp.example:3128
"#;
    let env = Env::new(&[a, team("team-b"), shared.to_owned()].join("---")).await;
    env.sim
        .apply_yaml(&format!("{}---{}", role("team-a"), role("team-b")))
        .expect("roles");
    let token = env
        .sim
        .service_account_token("egress-proxy-system", "operator");
    let client = env.sim.client_with_token(&token).expect("client");
    let settings = Settings {
        // No resync within the test: only the watch of team-b's Secrets can wake team-a.
        resync: Duration::from_secs(3600),
        ..namespaced(&env)
    };
    let op = env.start_as(client, settings);
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let before = hash(&env.deployment("team-a", "api").await);
    assert!(before.is_some());
    env.set_secret(
        "team-b",
        "shared",
        serde_json::json!({"httpProxy": "http://shared:second@proxy.corp.example:3128"}),
    )
    .await;
    eventually("team-a rolled to the new credential", || async {
        let now = hash(&env.deployment("team-a", "api").await);
        (now != before).then_some(())
    })
    .await;
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_start_up_returns_even_if_caches_never_fill() {
    // Listed namespace team-x has no Role: its caches never fill.
    let env = Env::new(&team("team-a")).await;
    env.sim.apply_yaml(&role("team-a")).expect("role");
    env.sim
        .apply_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-x}\n")
        .expect("ns");
    // Policies of team-x may be listed (the start-up check), nothing else.
    env.sim
        .apply_yaml(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: list-policies, namespace: team-x}
rules: [{apiGroups: [egressproxy.io], resources: [egressproxypolicies], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: list-policies, namespace: team-x}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: list-policies}
subjects: [{kind: ServiceAccount, name: operator, namespace: egress-proxy-system}]
"#,
        )
        .expect("role");
    let token = env
        .sim
        .service_account_token("egress-proxy-system", "operator");
    let client = env.sim.client_with_token(&token).expect("client");
    let settings = Settings {
        namespaces: vec!["team-a".into(), "team-x".into()],
        discovery_wait: Duration::from_secs(1),
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
    // The start-up check passed and the watches run (and fail) before the stop.
    eventually("the operator watches", || async {
        (env.count("watch", "deployments") + env.count("list", "deployments") > 0).then_some(())
    })
    .await;
    let _ = stop.send(());
    let returned = tokio::time::timeout(Duration::from_secs(20), task).await;
    assert!(matches!(returned, Ok(Ok(Ok(())))), "{returned:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_watch_outlives_run() {
    let env = Env::new(&team("team-a").replace(
        "metadata: {name: team-a}",
        "metadata: {name: team-a, labels: {egressproxy.io/enabled: \"true\"}}",
    ))
    .await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.stop().await;

    // Our own watch, ended by the server like every other: once it has listed again twice,
    // any watch task of the stopped operator would have listed again too.
    let lists = || {
        env.sim
            .request_counts()
            .by_verb_resource
            .iter()
            .filter(|((v, _), _)| v == "list")
            .map(|(_, n)| *n)
            .sum::<u64>()
    };
    let api = Api::<ConfigMap>::namespaced(env.client.clone(), "kube-system");
    let mut ours =
        std::pin::pin!(watcher(api.clone(), watcher::Config::default()).default_backoff());
    let before = lists();
    for round in 0..3 {
        // Listed; then a marker object proves the watch itself is open before it is ended.
        next_matching(&mut ours, |e| matches!(e, watcher::Event::InitDone)).await;
        let marker = format!("marker-{round}");
        let cm = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(marker.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&kube::api::PostParams::default(), &cm)
            .await
            .expect("marker");
        next_matching(&mut ours, |e| {
            matches!(e, watcher::Event::Apply(c) if c.metadata.name.as_deref() == Some(marker.as_str()))
        })
        .await;
        if round < 2 {
            env.sim.expire_watches();
        }
    }
    assert_eq!(lists() - before, 3, "only our watch listed again");
}

async fn next_matching<S>(s: &mut S, want: impl Fn(&watcher::Event<ConfigMap>) -> bool)
where
    S: futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(Duration::from_secs(20), s.next()).await {
            Ok(Some(Ok(e))) if want(&e) => return,
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("our watch stopped or stalled"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_starting_together_roll_each_workload_once() {
    let env = Env::new(&team("team-a").replace(
        "metadata: {name: team-a}",
        "metadata: {name: team-a, labels: {egressproxy.io/enabled: \"true\"}}",
    ))
    .await;
    // Both instances' first write of the managed Secret is slow, so both decide before
    // either write lands: each would bring its own hash key.
    for verb in ["create", "patch"] {
        env.sim.inject_fault(
            kube_sim::hooks::FaultRule::new(
                Some(verb),
                Some("secrets"),
                kube_sim::hooks::Fault::Latency(Duration::from_millis(1500)),
            )
            .times(2),
        );
    }
    let (a, b) = (env.start(), env.start());
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let replica_sets =
        Api::<k8s_openapi::api::apps::v1::ReplicaSet>::namespaced(env.client.clone(), "team-a")
            .list(&ListParams::default().labels("app=api"))
            .await
            .expect("replica sets");
    let hashes: Vec<_> = replica_sets
        .items
        .iter()
        .map(|rs| {
            let t = rs.spec.as_ref().and_then(|s| s.template.as_ref());
            t.and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get("egressproxy.io/config-hash").cloned())
        })
        .collect();
    assert_eq!(
        hashes.len(),
        2,
        "the original template and exactly one roll: {hashes:?}"
    );
    a.stop().await;
    b.stop().await;
}

/// The chart's RBAC for `watchNamespaces: [team-a, team-b]`: deploy/rbac.yaml (the chart's
/// default rendering) with the operator's ClusterRole bound by a RoleBinding in each listed
/// namespace instead of the ClusterRoleBinding, as `tests/chart/render.py` checks the chart
/// renders it; and the tenant binding in each.
fn chart_namespaced_rbac() -> String {
    let docs: Vec<&str> = include_str!("../../../deploy/rbac.yaml")
        .split("\n---\n")
        .filter(|d| {
            !(d.contains("kind: ClusterRoleBinding")
                && d.contains("\n  name: egress-proxy-operator\n"))
        })
        .collect();
    assert!(
        docs.iter().any(|d| d.contains("kind: ClusterRoleBinding")),
        "metrics-auth stays"
    );
    let mut yaml = docs.join("\n---\n");
    for ns in ["team-a", "team-b"] {
        for (binding, role) in [
            ("egress-proxy-operator-watch", "egress-proxy-operator"),
            ("egress-proxy-operator", "egress-proxy-operator-tenant"),
        ] {
            yaml.push_str(&format!(
                "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n\
                 metadata: {{name: {binding}, namespace: {ns}}}\n\
                 roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\n\
                 subjects: [{{kind: ServiceAccount, name: egress-proxy-operator, namespace: egress-proxy-system}}]\n"
            ));
        }
    }
    yaml
}

/// A policy with every discovery switch on: Node addresses cannot be read namespaced.
const DEFAULTS: &str = r#"
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: defaults, namespace: team-b}
spec:
  workloadSelector: {matchLabels: {egress: none}}
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_runs_namespaced_with_only_the_charts_namespaced_rbac() {
    let yaml = [team("team-a"), team("team-b")].join("---");
    let env = Env::new(&yaml).await;
    env.sim.apply_yaml(&chart_namespaced_rbac()).expect("rbac");
    env.sim.apply_yaml(DEFAULTS).expect("policy");
    let token = env
        .sim
        .service_account_token("egress-proxy-system", "egress-proxy-operator");
    let dir = std::env::temp_dir().join(format!("install-namespaced-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: sim, cluster: {{server: \"{}\"}}}}]\n\
         users: [{{name: operator, user: {{token: \"{token}\"}}}}]\n\
         contexts: [{{name: sim, context: {{cluster: sim, user: operator}}}}]\n\
         current-context: sim\n",
        env.sim.base_url(),
    );
    std::fs::write(&kubeconfig, config).expect("kubeconfig");
    let log = dir.join("operator.log");
    let out = std::fs::File::create(&log).expect("log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
        .args(["run", "--namespace", "team-a", "--namespace", "team-b"])
        .args([
            "--cluster-domain",
            "cluster.corp",
            "--service-cidr",
            "10.43.0.0/16",
        ])
        .args([
            "--pod-cidr",
            "10.42.0.0/16",
            "--log-level",
            "debug",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("start the operator");
    let ready = async {
        for ns in ["team-a", "team-b"] {
            let p = wait_reason(&env, ns, "outbound", "Reconciled").await;
            assert!(
                hash(&env.deployment(ns, "api").await).is_some(),
                "{ns}: {:?}",
                p.status
            );
        }
        wait_reason(&env, "team-b", "defaults", "DiscoveryIncomplete").await
    };
    let defaults = ready.await;
    let _ = child.kill();
    let _ = child.wait();
    let logs = std::fs::read_to_string(&log).expect("log");
    let message = ready_message(&defaults);
    assert!(
        message.contains("nodeAddresses: Nodes not read: a namespaced install"),
        "{message}"
    );
    let denied: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("status_code=403") || l.to_lowercase().contains("forbidden"))
        .collect();
    assert!(
        denied.is_empty(),
        "refused requests:\n{}",
        denied.join("\n")
    );
    assert!(
        logs.contains("namespaced install: Nodes, ServiceCIDRs"),
        "{logs}"
    );
}
