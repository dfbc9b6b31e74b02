//! Cilium: its per-node state (`ciliumnodes.cilium.io`, each node's Pod ranges) and
//! `kube-system/cilium-config` (the cluster-pool IPAM's ranges).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{
    DiscoverySource, Object, Select, Watched, When, all_typed, config_map_data, find, keep_all,
    keep_data, named,
};
use crate::discovery::candidate::{Candidate, Label, Ranked, rank};
use crate::discovery::{ClusterInputs, PlatformInputs, sorted_by_name};

const CILIUM_CONFIG: &str = "ConfigMap kube-system/cilium-config";
/// The cluster pool: after Calico's pools, before k3s' arguments.
const POOL_RANK: u8 = 40;
/// The CiliumNodes: the first per-node source.
const NODES_RANK: u8 = rank::KUBEADM + 10;

pub(super) struct Cilium;

const OBJECTS: [Object; 2] = [
    Object {
        group: "cilium.io",
        version: "v2",
        kind: "CiliumNode",
        resource: "ciliumnodes",
        namespace: None,
        select: Select::All,
        when: When::Served,
        keep: keep_all,
    },
    Object {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        resource: "configmaps",
        namespace: Some("kube-system"),
        select: Select::Name("cilium-config"),
        when: When::Always,
        keep: keep_data,
    },
];

impl DiscoverySource for Cilium {
    fn objects(&self) -> &'static [Object] {
        &OBJECTS
    }

    fn read(&self, watched: &[Watched], into: &mut PlatformInputs) {
        into.cilium_nodes = watched[0].as_ref().map(|nodes| {
            let nodes: Vec<(String, CiliumNodeSpec)> = all_typed(nodes, Some("spec"));
            named(&nodes, |n| n.ipam.pod_cidrs.clone())
        });
        into.cilium_config = find(watched[1].as_ref(), "cilium-config").and_then(config_map_data);
    }

    fn pod_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        let p = &inp.platform;
        let mut cands = Vec::new();
        cands.extend(p.cilium_config.as_ref().map(|c| (POOL_RANK, pool(c))));
        if let Some(nodes) = &p.cilium_nodes {
            let c = Candidate {
                parts: sorted_by_name(nodes)
                    .into_iter()
                    .map(|o| {
                        (
                            format!("CiliumNode/{} spec.ipam.podCIDRs", o.name),
                            o.values.clone(),
                        )
                    })
                    .collect(),
                label: Label::Count("CiliumNode spec.ipam.podCIDRs".into(), "node"),
                absent: Some("no CiliumNode has spec.ipam.podCIDRs".into()),
            };
            cands.push((NODES_RANK, c));
        }
        cands
    }
}

/// Cilium's cluster-pool IPAM (its default mode): the CIDRs its operator carves node ranges from.
fn pool(cfg: &BTreeMap<String, String>) -> Candidate {
    let chained = cfg.get("cni-chaining-mode").map(|m| m.trim());
    if let Some(chain) = chained.filter(|m| !m.is_empty() && *m != "none") {
        // Chained behind another CNI (aws-cni, azure, ...), which gives Pods their addresses.
        let absent = format!(
            "{CILIUM_CONFIG} cni-chaining-mode {chain:?}: the primary CNI gives Pods their addresses"
        );
        return Candidate::one(String::new(), Vec::new(), Label::Names, Some(absent));
    }
    let mode = cfg.get("ipam").map_or("cluster-pool", |m| m.trim());
    if mode != "cluster-pool" {
        let absent = format!("{CILIUM_CONFIG} ipam mode {mode:?} has no cluster-wide pool");
        return Candidate::one(String::new(), Vec::new(), Label::Names, Some(absent));
    }
    let keys = ["cluster-pool-ipv4-cidr", "cluster-pool-ipv6-cidr"];
    Candidate {
        parts: keys
            .iter()
            .map(|k| {
                (
                    format!("{CILIUM_CONFIG} {k}"),
                    cfg.get(*k).cloned().into_iter().collect(),
                )
            })
            .collect(),
        label: Label::Fixed(format!("{CILIUM_CONFIG} cluster-pool")),
        absent: Some(format!(
            "{CILIUM_CONFIG} has no valid cluster-pool-ipv4-cidr"
        )),
    }
}

#[derive(Deserialize, Clone, Debug, Default)]
struct CiliumNodeSpec {
    #[serde(default)]
    ipam: CiliumIpam,
}

#[derive(Deserialize, Clone, Debug, Default)]
struct CiliumIpam {
    #[serde(default, rename = "podCIDRs")]
    pod_cidrs: Vec<String>,
}
