//! Discovery sources of distributions and network plugins against the in-memory API server:
//! OpenShift's configs and Calico's IP pools served as CRDs with their real field names,
//! watched live, and switched off with `--disable-discovery-source`.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use egress_proxy_operator::api::Fact;
use egress_proxy_operator::controller::{Overrides, PlatformSource, Settings};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

/// A cluster-scoped CRD that keeps every field, as the real ones (for what is read) do.
fn crd(group: &str, kind: &str, plural: &str, version: &str) -> String {
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  scope: Cluster
  names: {{kind: {kind}, plural: {plural}, singular: {singular}, listKind: {kind}List}}
  versions:
    - name: {version}
      served: true
      storage: true
      schema:
        openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#,
        singular = kind.to_lowercase()
    )
}

fn fixtures() -> String {
    let crds = [
        crd("config.openshift.io", "Network", "networks", "v1"),
        crd(
            "config.openshift.io",
            "Infrastructure",
            "infrastructures",
            "v1",
        ),
        crd("crd.projectcalico.org", "IPPool", "ippools", "v1"),
    ];
    format!(
        r#"{}
---
apiVersion: config.openshift.io/v1
kind: Network
metadata: {{name: cluster}}
spec:
  clusterNetwork: [{{cidr: 10.128.0.0/14, hostPrefix: 23}}]
  serviceNetwork: [172.30.0.0/16]
  networkType: OVNKubernetes
status:
  clusterNetwork: [{{cidr: 10.128.0.0/14, hostPrefix: 23}}]
  serviceNetwork: [172.30.0.0/16]
  networkType: OVNKubernetes
  clusterNetworkMTU: 8901
---
apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata: {{name: cluster}}
spec: {{platformSpec: {{type: AWS}}}}
status:
  apiServerURL: https://api.ocp.example.com:6443
  apiServerInternalURI: https://api-int.ocp.example.com:6443
  infrastructureName: ocp-x7k2p
  platformStatus: {{type: AWS, aws: {{region: eu-west-1}}}}
---
apiVersion: crd.projectcalico.org/v1
kind: IPPool
metadata: {{name: default-ipv4-ippool}}
spec: {{cidr: 192.168.0.0/16, ipipMode: Always, natOutgoing: true, nodeSelector: all()}}
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {{egressproxy.io/enabled: "true"}}
---
apiVersion: v1
kind: Secret
metadata: {{name: egress-proxy, namespace: team-a}}
stringData:
  httpProxy: http://team-a:pw@proxy.corp.example:3128
  httpsProxy: http://team-a:pw@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: team-a}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials: [{{name: main, secretRef: {{name: egress-proxy}}}}]
    active: main
  noProxy: {{dialect: go}}
"#,
        crds.join("---\n")
    )
}

async fn pod_network(env: &Env, source: &str) -> Fact {
    eventually(&format!("pod network from {source}"), || async {
        let p = env.policy("team-a", "outbound").await;
        let f = p.status?.discovered?.pod_network?;
        (f.source.as_deref() == Some(source)).then_some(f)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_sources_are_watched_and_can_be_switched_off() {
    let env = Env::new(&fixtures()).await;
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "NoWorkloadsSelected").await;
    let d = p.status.unwrap().discovered.unwrap();
    let pod = d.pod_network.unwrap();
    assert_eq!(pod.values, ["10.128.0.0/14"]);
    assert_eq!(
        pod.source.as_deref(),
        Some("Network.config.openshift.io/cluster")
    );
    let api = d.api_server.unwrap();
    assert!(
        api.values.contains(&"api-int.ocp.example.com".to_owned()),
        "{api:?}"
    );
    assert!(
        api.source
            .unwrap()
            .ends_with("Infrastructure.config.openshift.io/cluster apiServerInternalURI")
    );
    op.stop().await;

    // OpenShift switched off: Calico's pool is the next cluster-wide source, read live.
    let settings = Settings {
        overrides: Overrides {
            disabled_sources: BTreeSet::from([PlatformSource::Openshift]),
            ..Default::default()
        },
        ..env.settings()
    };
    let op = env.start_with(settings.clone());
    let pod = pod_network(&env, "Calico IPPool spec.cidr (1 pool)").await;
    assert_eq!(pod.values, ["192.168.0.0/16"]);
    let gvk = GroupVersionKind::gvk("crd.projectcalico.org", "v1", "IPPool");
    let pools: Api<DynamicObject> = Api::all_with(env.client.clone(), &ApiResource::from_gvk(&gvk));
    let pool: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
        "metadata": {"name": "default-ipv6-ippool"},
        "spec": {"cidr": "fd5f:1e2d:3c4b::/48", "natOutgoing": false}
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let pod = pod_network(&env, "Calico IPPool spec.cidr (2 pools)").await;
    assert_eq!(pod.values, ["192.168.0.0/16", "fd5f:1e2d:3c4b::/48"]);
    let p = wait_reason(&env, "team-a", "outbound", "NoWorkloadsSelected").await;
    let np = p.status.unwrap().no_proxy.unwrap();
    let entries: Vec<&str> = np.split(',').collect();
    for pool in ["192.168.0.0/16", "fd5f:1e2d:3c4b::/48"] {
        assert!(entries.contains(&pool), "{np}");
    }
    op.stop().await;

    // Calico off too: back to the nodes' own ranges.
    let mut settings = settings;
    settings
        .overrides
        .disabled_sources
        .insert(PlatformSource::Calico);
    let op = env.start_with(settings);
    let pod = pod_network(&env, "Node.spec.podCIDRs (3 nodes)").await;
    assert!(!pod.values.is_empty());
    op.stop().await;
}

/// Talos labels its API server's static Pod `k8s-app=kube-apiserver`, not kubeadm's
/// `component=kube-apiserver`: its Service range is read all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_talos_api_server_pod_gives_the_service_network() {
    let policy = fixtures();
    let policy = &policy[policy
        .find("apiVersion: v1\nkind: Namespace")
        .expect("namespace")..];
    let env = Env::new(policy).await;
    // Without a ServiceCIDR the static Pod is the first source.
    Api::<k8s_openapi::api::networking::v1::ServiceCIDR>::all(env.client.clone())
        .delete("kubernetes", &Default::default())
        .await
        .expect("delete the ServiceCIDR");
    let pod = json!({
        "metadata": {
            "name": "kube-apiserver-talos-cp-1",
            "labels": {"k8s-app": "kube-apiserver", "tier": "control-plane"}
        },
        "spec": {"containers": [{
            "name": "kube-apiserver",
            "image": "registry.k8s.io/kube-apiserver:v1.31.4",
            "command": ["/usr/local/bin/kube-apiserver"],
            "args": ["--service-cluster-ip-range=10.96.0.0/12", "--secure-port=6443"]
        }]}
    });
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(env.client.clone(), "kube-system")
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod).unwrap(),
        )
        .await
        .expect("create the static Pod");
    let op = env.start();
    let source = "Pod kube-system/kube-apiserver-talos-cp-1 --service-cluster-ip-range";
    let f = eventually("service network from the Talos static Pod", || async {
        let p = env.policy("team-a", "outbound").await;
        let f = p.status?.discovered?.service_network?;
        (f.source.as_deref() == Some(source)).then_some(f)
    })
    .await;
    assert_eq!(f.values, ["10.96.0.0/12"]);
    op.stop().await;
}
