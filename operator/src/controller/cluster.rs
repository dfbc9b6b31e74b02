//! The discovery inputs read from the caches: Nodes (as far as discovery reads them), the
//! `kubernetes` Service and its EndpointSlices, ServiceCIDRs, kube-system ConfigMaps and the
//! platforms' objects, into [`ClusterInputs`]. No I/O.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::{Resource, ResourceExt};

use super::lean::strip;
use crate::discovery::{
    ClusterInputs, NamedValues, NodeArgs, NodeInputs, PlatformInputs, PlatformSource,
};

/// The Node annotations discovery reads: OVN-Kubernetes' subnets, k3s' and RKE2's arguments.
pub const NODE_ANNOTATIONS: [&str; 3] = [
    "k8s.ovn.org/node-subnets",
    "k3s.io/node-args",
    "rke2.io/node-args",
];

/// Keeps only the Node fields discovery reads: name, pod CIDRs, providerID, addresses and
/// [`NODE_ANNOTATIONS`].
pub fn strip_node(n: &mut Node) {
    strip(n);
    n.metadata.labels = None;
    if let Some(a) = n.metadata.annotations.as_mut() {
        a.retain(|k, _| NODE_ANNOTATIONS.contains(&k.as_str()));
    }
    n.metadata.owner_references = None;
    n.spec = n.spec.take().map(|s| k8s_openapi::api::core::v1::NodeSpec {
        pod_cidr: s.pod_cidr,
        pod_cidrs: s.pod_cidrs,
        provider_id: s.provider_id,
        ..Default::default()
    });
    n.status = n
        .status
        .take()
        .map(|s| k8s_openapi::api::core::v1::NodeStatus {
            addresses: s.addresses,
            ..Default::default()
        });
}

/// The discovery objects, read from the caches.
pub struct DiscoverySources<'a> {
    pub nodes: &'a [Arc<Node>],
    pub services: &'a [Arc<Service>],
    pub slices: &'a [Arc<EndpointSlice>],
    pub service_cidrs: &'a [Arc<ServiceCIDR>],
    pub config_maps: &'a [Arc<ConfigMap>],
    pub platform: PlatformInputs,
}

/// Turns cached objects into discovery inputs (sorted, so the result is deterministic).
pub fn cluster_inputs(src: &DiscoverySources, base: &ClusterInputs) -> ClusterInputs {
    let mut inputs = base.clone();
    let svc = src
        .services
        .iter()
        .find(|s| s.name_any() == "kubernetes" && s.namespace().as_deref() == Some("default"));
    inputs.kubernetes_service_found = svc.is_some();
    inputs.kubernetes_service_ips = svc
        .and_then(|s| s.spec.as_ref())
        .map(|spec| {
            let mut ips = spec.cluster_ips.clone().unwrap_or_default();
            if ips.is_empty() {
                ips.extend(spec.cluster_ip.clone());
            }
            ips.retain(|ip| !ip.is_empty() && ip != "None");
            ips
        })
        .unwrap_or_default();
    inputs.api_endpoints = named(src.slices, |s| {
        s.endpoints
            .iter()
            .flat_map(|e| e.addresses.iter().cloned())
            .collect()
    });
    inputs.service_cidrs = named(src.service_cidrs, |c| {
        c.spec
            .as_ref()
            .and_then(|s| s.cidrs.clone())
            .unwrap_or_default()
    });
    let cm = |name: &str, key: &str| {
        src.config_maps
            .iter()
            .find(|c| c.name_any() == name)
            .and_then(|c| c.data.as_ref()?.get(key).cloned())
    };
    inputs.kubeadm_config = cm("kubeadm-config", "ClusterConfiguration");
    inputs.kubelet_config = cm("kubelet-config", "kubelet");
    inputs.corefile = cm("coredns", "Corefile");
    inputs.nodes = src.nodes.iter().map(|n| node_inputs(n)).collect();
    inputs.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let off = &base.overrides.disabled_sources;
    for n in &mut inputs.nodes {
        if off.contains(&PlatformSource::OvnKubernetes) {
            n.ovn_subnets = None;
        }
        if off.contains(&PlatformSource::K3s) {
            n.node_args = None;
        }
    }
    inputs.platform = src.platform.clone();
    inputs
}

/// Each object's name and the values read from it, sorted by name.
fn named<K: Resource>(objects: &[Arc<K>], values: impl Fn(&K) -> Vec<String>) -> Vec<NamedValues> {
    let mut out: Vec<NamedValues> = objects
        .iter()
        .map(|o| NamedValues {
            name: o.name_any(),
            values: values(o),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn node_inputs(n: &Node) -> NodeInputs {
    let spec = n.spec.clone().unwrap_or_default();
    let mut pod_cidrs = spec.pod_cidrs.unwrap_or_default();
    if pod_cidrs.is_empty() {
        pod_cidrs.extend(spec.pod_cidr);
    }
    let addresses = n.status.as_ref().and_then(|s| s.addresses.as_ref());
    NodeInputs {
        name: n.name_any(),
        pod_cidrs,
        internal_ips: addresses
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| a.address.clone())
            .collect(),
        provider_id: spec.provider_id,
        ovn_subnets: annotation(n, NODE_ANNOTATIONS[0]),
        node_args: NODE_ANNOTATIONS[1..].iter().find_map(|k| {
            annotation(n, k).map(|raw| NodeArgs {
                annotation: (*k).to_owned(),
                raw,
            })
        }),
    }
}

fn annotation(n: &Node, key: &str) -> Option<String> {
    n.metadata.annotations.as_ref()?.get(key).cloned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A Node as OVN-Kubernetes on k3s annotates it, among annotations discovery never reads.
    fn annotated_node() -> Arc<Node> {
        let mut n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "annotations": {
                "k8s.ovn.org/node-subnets": "{\"default\":[\"10.244.0.0/24\"]}",
                "k3s.io/node-args": "[\"server\",\"--cluster-cidr\",\"10.42.0.0/16\"]",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"
            }}
        }))
        .unwrap();
        strip_node(&mut n);
        let kept: Vec<&String> = n.metadata.annotations.as_ref().unwrap().keys().collect();
        assert_eq!(kept, ["k3s.io/node-args", "k8s.ovn.org/node-subnets"]);
        Arc::new(n)
    }

    #[test]
    fn node_annotations_are_read_unless_their_source_is_switched_off() {
        let nodes = [annotated_node()];
        let src = DiscoverySources {
            nodes: &nodes,
            services: &[],
            slices: &[],
            service_cidrs: &[],
            config_maps: &[],
            platform: PlatformInputs::default(),
        };
        let on = cluster_inputs(&src, &ClusterInputs::default());
        assert_eq!(
            on.nodes[0].ovn_subnets.as_deref(),
            Some("{\"default\":[\"10.244.0.0/24\"]}")
        );
        let args = on.nodes[0].node_args.as_ref().unwrap();
        assert_eq!(args.annotation, "k3s.io/node-args");
        let mut base = ClusterInputs::default();
        base.overrides.disabled_sources =
            [PlatformSource::OvnKubernetes, PlatformSource::K3s].into();
        let off = cluster_inputs(&src, &base);
        assert_eq!(off.nodes[0].ovn_subnets, None);
        assert_eq!(off.nodes[0].node_args, None);
    }
}
