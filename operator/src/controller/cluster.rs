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
    ClusterInputs, NamedValues, NodeInputs, PlatformInputs, PlatformSource, platforms,
};

/// Keeps only the Node fields discovery reads: name, pod CIDRs, providerID, addresses and
/// the annotations the platform sources read ([`platforms::node_annotations`]).
pub fn strip_node(n: &mut Node) {
    strip(n);
    n.metadata.labels = None;
    if let Some(a) = n.metadata.annotations.as_mut() {
        a.retain(|k, _| platforms::node_annotations().any(|x| x == k));
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
    let off = &base.overrides.disabled_sources;
    let on: Vec<_> = platforms::all().filter(|id| !off.contains(id)).collect();
    inputs.nodes = src.nodes.iter().map(|n| node_inputs(n, &on)).collect();
    inputs.nodes.sort_by(|a, b| a.name.cmp(&b.name));
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

/// A Node's fields, and the annotations of the platform sources switched `on`.
fn node_inputs(n: &Node, on: &[PlatformSource]) -> NodeInputs {
    let spec = n.spec.clone().unwrap_or_default();
    let mut pod_cidrs = spec.pod_cidrs.unwrap_or_default();
    if pod_cidrs.is_empty() {
        pod_cidrs.extend(spec.pod_cidr);
    }
    let addresses = n.status.as_ref().and_then(|s| s.addresses.as_ref());
    let mut node = NodeInputs {
        name: n.name_any(),
        pod_cidrs,
        internal_ips: addresses
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .map(|a| a.address.clone())
            .collect(),
        provider_id: spec.provider_id,
        ..Default::default()
    };
    let none = Default::default();
    let annotations = n.metadata.annotations.as_ref().unwrap_or(&none);
    for id in on {
        platforms::source(*id).read_node(annotations, &mut node);
    }
    node
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
