//! The registry against what ships with it: the chart's RBAC grants every object a source
//! reads, the chart names every source; and sources read their objects as the real
//! distributions write them.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::api::NoProxySpec;
use crate::discovery::{ClusterInputs, discover, policy_entries};

/// The RBAC the chart renders with its default values (every source on).
const RBAC: &str = include_str!("../../../../deploy/rbac.yaml");
const RBAC_TEMPLATE: &str =
    include_str!("../../../../charts/egress-proxy-operator/templates/rbac.yaml");
const VALUES: &str = include_str!("../../../../charts/egress-proxy-operator/values.yaml");
const SCHEMA: &str = include_str!("../../../../charts/egress-proxy-operator/values.schema.json");
const HELPERS: &str =
    include_str!("../../../../charts/egress-proxy-operator/templates/_helpers.tpl");
/// The ClusterRole the operator's ServiceAccount is bound to cluster-wide (the tenant role is
/// bound per namespace by its admin, so it does not count).
const CLUSTER_ROLE: &str = "egress-proxy-operator";

/// The name of a source on the command line.
fn name(id: PlatformSource) -> String {
    let value = clap::ValueEnum::to_possible_value(&id).expect("no source is hidden");
    value.get_name().to_owned()
}

/// `kube-apiserver` → `kubeApiserver`, as the chart's `discoverySources` keys are written.
fn chart_key(id: PlatformSource) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name(id).chars() {
        match c {
            '-' => upper = true,
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

fn strings(v: &Value) -> Vec<&str> {
    let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(Value::as_str).collect()
}

/// Whether a Role in the object's namespace, or the operator's ClusterRole, lets it list and
/// watch the object (by name where it is read by name; rules naming other objects do not).
fn granted(docs: &[Value], o: &Object) -> bool {
    let roles = docs
        .iter()
        .filter(|d| match (d["kind"].as_str(), o.namespace) {
            (Some("ClusterRole"), _) => d["metadata"]["name"] == CLUSTER_ROLE,
            (Some("Role"), Some(ns)) => d["metadata"]["namespace"] == ns,
            _ => false,
        });
    let rules = roles.flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default());
    rules.into_iter().any(|rule| {
        let names = strings(&rule["resourceNames"]);
        let by_name = match o.select {
            Select::Name(n) => names.is_empty() || names.contains(&n),
            _ => names.is_empty(),
        };
        let verbs = strings(&rule["verbs"]);
        strings(&rule["apiGroups"]).contains(&o.group)
            && strings(&rule["resources"]).contains(&o.resource)
            && ["list", "watch"].iter().all(|v| verbs.contains(v))
            && by_name
    })
}

#[test]
fn the_chart_grants_every_object_a_source_reads() {
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(RBAC)
        .map(|d| serde::Deserialize::deserialize(d).expect("deploy/rbac.yaml parses"))
        .collect();
    let mut missing = Vec::new();
    for id in all() {
        for o in source(id).objects() {
            let ok = if o.when == When::Readable {
                // Rendered only where the chart sees the platform: not in deploy/rbac.yaml.
                let Select::Name(n) = o.select else {
                    panic!("{} is read if readable, so by name", o.kind)
                };
                let ns = o.namespace.expect("a Readable object is namespaced");
                RBAC_TEMPLATE.contains(&format!("namespace: {ns}\n"))
                    && RBAC_TEMPLATE.contains(&format!("resourceNames: [{n}]"))
            } else {
                granted(&docs, o)
            };
            if !ok {
                missing.push(format!(
                    "{}: {} {:?} in {:?}",
                    name(id),
                    o.resource,
                    o.select,
                    o.namespace
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "no list/watch in the chart for {missing:?}"
    );
}

/// The check above can fail: an object the chart does not grant is found missing.
#[test]
fn an_object_without_rbac_is_found_missing() {
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(RBAC)
        .map(|d| serde::Deserialize::deserialize(d).expect("deploy/rbac.yaml parses"))
        .collect();
    let secret = Object {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        resource: "configmaps",
        namespace: Some("kube-system"),
        select: Select::Name("not-granted"),
        when: When::Always,
        keep: keep_data,
    };
    assert!(!granted(&docs, &secret));
    let pools = &source(PlatformSource::Calico).objects()[0];
    assert!(granted(&docs, pools));
    let every_config_map = Object {
        select: Select::All,
        ..source(PlatformSource::Cilium).objects()[1]
    };
    assert!(
        !granted(&docs, &every_config_map),
        "a rule naming cilium-config does not grant every kube-system ConfigMap"
    );
}

#[test]
fn the_chart_names_every_source() {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap();
    let values: Value = serde_yaml_ng::from_str(VALUES).unwrap();
    for id in all() {
        let (flag, key) = (name(id), chart_key(id));
        assert_eq!(values["discoverySources"][&key], true, "values.yaml {key}");
        let property = &schema["properties"]["discoverySources"]["properties"][&key];
        assert!(property.is_object(), "values.schema.json {key}");
        assert!(
            HELPERS.contains(&format!("{key:?} {flag:?}")),
            "_helpers.tpl maps {key} to --disable-discovery-source={flag}"
        );
    }
}

#[test]
fn node_annotations_are_the_sources() {
    let all: Vec<&str> = node_annotations().collect();
    assert_eq!(
        all,
        [
            "k8s.ovn.org/node-subnets",
            "k3s.io/node-args",
            "rke2.io/node-args"
        ]
    );
}

/// An object as the watch delivers it: stripped, then kept as the source says.
fn cached(o: &Object, v: Value) -> Arc<DynamicObject> {
    let mut d: DynamicObject = serde_json::from_value(v).unwrap();
    strip_meta(&mut d);
    (o.keep)(&mut d);
    Arc::new(d)
}

/// Whether a watch of `o` would deliver an object with these labels.
fn selected(o: &Object, labels: &Value) -> bool {
    match o.select {
        Select::Labels(selectors) => selectors.iter().any(|s| {
            let (k, v) = s.split_once('=').expect("key=value");
            labels[k] == v
        }),
        _ => true,
    }
}

/// Talos's API server static Pod, as Talos writes it (v1.8): label `k8s-app`, not kubeadm's
/// `component`; the Service range in its args.
fn talos_apiserver_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "kube-apiserver-talos-cp-1",
            "namespace": "kube-system",
            "labels": {"k8s-app": "kube-apiserver", "tier": "control-plane"},
            "annotations": {
                "kubernetes.io/config.source": "file",
                "talos.dev/config-version": "1",
                "talos.dev/secrets-version": "2"
            },
            "managedFields": [{"manager": "kubelet", "operation": "Update"}]
        },
        "spec": {
            "priorityClassName": "system-cluster-critical",
            "hostNetwork": true,
            "containers": [{
                "name": "kube-apiserver",
                "image": "registry.k8s.io/kube-apiserver:v1.31.4",
                "command": ["/usr/local/bin/kube-apiserver"],
                "args": [
                    "--admission-control-config-file=/system/config/kubernetes/kube-apiserver/admission-control-config.yaml",
                    "--advertise-address=192.168.1.10",
                    "--allow-privileged=true",
                    "--enable-bootstrap-token-auth=true",
                    "--etcd-servers=https://localhost:2379",
                    "--secure-port=6443",
                    "--service-account-issuer=https://192.168.1.10:6443",
                    "--service-cluster-ip-range=10.96.0.0/12",
                    "--tls-min-version=VersionTLS12"
                ],
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "volumeMounts": [{"name": "secrets", "mountPath": "/system/secrets/kubernetes/kube-apiserver", "readOnly": true}]
            }],
            "volumes": [{"name": "secrets", "hostPath": {"path": "/system/secrets/kubernetes/kube-apiserver"}}]
        },
        "status": {"phase": "Running", "podIP": "192.168.1.10"}
    })
}

/// A Talos cluster without ServiceCIDRs: its API server's static Pod is watched (its label is
/// one of the source's selectors) and gives the Service network.
#[test]
fn a_talos_api_server_static_pod_gives_the_service_network() {
    let apiserver = source(PlatformSource::KubeApiserver);
    let o = &apiserver.objects()[0];
    let pod = talos_apiserver_pod();
    assert!(
        selected(o, &pod["metadata"]["labels"]),
        "the Talos Pod is watched"
    );
    let kept = cached(o, pod);
    assert_eq!(
        kept.data.get("status"),
        None,
        "only the containers' commands are cached"
    );
    let mut inputs = ClusterInputs::default();
    apiserver.read(&[Some(vec![kept])], &mut inputs.platform);
    let facts = discover(&inputs);
    let f = facts.service_network.clone().expect("every fact is set");
    assert_eq!(f.values, ["10.96.0.0/12"]);
    assert_eq!(
        f.source.as_deref(),
        Some("Pod kube-system/kube-apiserver-talos-cp-1 --service-cluster-ip-range")
    );
    let p = policy_entries(&facts, &NoProxySpec::default());
    assert!(!p.missing.iter().any(|m| m.starts_with("serviceNetwork")));
}

/// kube-dns' Deployment keeps its containers' command and args through the cache.
#[test]
fn the_kube_dns_domain_survives_the_cache() {
    let kube_dns = source(PlatformSource::KubeDns);
    let d = cached(
        &kube_dns.objects()[0],
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"}}, "template": {
                "metadata": {"labels": {"k8s-app": "kube-dns"}},
                "spec": {"containers": [
                    {"name": "kubedns", "image": "gke.gcr.io/k8s-dns-kube-dns:1.23.0",
                     "args": ["--domain=cluster.local.", "--dns-port=10053"],
                     "env": [{"name": "PROMETHEUS_PORT", "value": "10055"}]},
                    {"name": "sidecar", "image": "gke.gcr.io/k8s-dns-sidecar:1.23.0"}
                ]}
            }},
            "status": {"replicas": 2}
        }),
    );
    let mut into = PlatformInputs::default();
    kube_dns.read(&[Some(vec![d])], &mut into);
    assert_eq!(
        into.kube_dns_args,
        Some(vec![
            "--domain=cluster.local.".to_owned(),
            "--dns-port=10053".to_owned()
        ])
    );
}
