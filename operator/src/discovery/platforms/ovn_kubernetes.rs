//! OVN-Kubernetes: the `k8s.ovn.org/node-subnets` Node annotation, each node's Pod subnets.

use std::collections::BTreeMap;

use super::{DiscoverySource, Object, Watched};
use crate::discovery::candidate::{Candidate, Label, Ranked, rank};
use crate::discovery::{ClusterInputs, NodeInputs, PlatformInputs, sources};

/// Per node: after CiliumNodes, before the Node objects' own ranges.
const RANK: u8 = rank::KUBEADM + 20;

pub(super) struct OvnKubernetes;

const ANNOTATIONS: [&str; 1] = ["k8s.ovn.org/node-subnets"];

impl DiscoverySource for OvnKubernetes {
    /// Nothing but Nodes, which discovery reads anyway.
    fn objects(&self) -> &'static [Object] {
        &[]
    }

    fn read(&self, _: &[Watched], _: &mut PlatformInputs) {}

    fn node_annotations(&self) -> &'static [&'static str] {
        &ANNOTATIONS
    }

    fn read_node(&self, annotations: &BTreeMap<String, String>, node: &mut NodeInputs) {
        node.ovn_subnets = annotations.get(ANNOTATIONS[0]).cloned();
    }

    fn pod_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        let ovn = ANNOTATIONS[0];
        let parts: Vec<(String, Vec<String>)> = inp
            .nodes
            .iter()
            .filter_map(|n| {
                let raw = n.ovn_subnets.as_deref()?;
                let what = format!("Node/{} annotation {ovn}", n.name);
                Some((what, sources::ovn_node_subnets(raw).unwrap_or_default()))
            })
            .collect();
        if parts.is_empty() {
            return Vec::new();
        }
        let c = Candidate {
            parts,
            label: Label::Count(format!("Node annotation {ovn}"), "node"),
            absent: Some(format!("no Node's {ovn} has a default network subnet")),
        };
        vec![(RANK, c)]
    }
}
