//! k3s and RKE2: the server arguments they record on each Node (`k3s.io/node-args`,
//! `rke2.io/node-args`); only the network flags are read.

use std::collections::BTreeMap;

use super::{DiscoverySource, Object, Watched};
use crate::discovery::candidate::{Candidate, Domain, Label, Ranked};
use crate::discovery::{ClusterInputs, NodeArgs, NodeInputs, PlatformInputs, sources};

/// The Service network: after the API server's static Pods.
const SERVICE_RANK: u8 = 40;
/// The Pod network: the last cluster-wide source before kubeadm's config.
const POD_RANK: u8 = 50;
/// The cluster domain: after kube-dns.
const DOMAIN_RANK: u8 = 60;

pub(super) struct K3s;

const ANNOTATIONS: [&str; 2] = ["k3s.io/node-args", "rke2.io/node-args"];

impl DiscoverySource for K3s {
    /// Nothing but Nodes, which discovery reads anyway.
    fn objects(&self) -> &'static [Object] {
        &[]
    }

    fn read(&self, _: &[Watched], _: &mut PlatformInputs) {}

    fn node_annotations(&self) -> &'static [&'static str] {
        &ANNOTATIONS
    }

    fn read_node(&self, annotations: &BTreeMap<String, String>, node: &mut NodeInputs) {
        node.node_args = ANNOTATIONS.iter().find_map(|k| {
            annotations.get(*k).map(|raw| NodeArgs {
                annotation: (*k).to_owned(),
                raw: raw.clone(),
            })
        });
    }

    fn service_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        node_args(inp, "--service-cidr")
            .map(|c| (SERVICE_RANK, c))
            .into_iter()
            .collect()
    }

    fn pod_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        node_args(inp, "--cluster-cidr")
            .map(|c| (POD_RANK, c))
            .into_iter()
            .collect()
    }

    fn cluster_domain(&self, inp: &ClusterInputs) -> Vec<Ranked<Domain>> {
        let flag = "--cluster-domain";
        let mut out = Vec::new();
        for n in &inp.nodes {
            let Some(args) = &n.node_args else { continue };
            let values = sources::node_args(&args.raw).map(|a| sources::flag_values(&a, flag));
            if let Some(d) = values.unwrap_or_default().into_iter().next() {
                let what = format!("Node/{} {} {flag}", n.name, args.annotation);
                out.push((DOMAIN_RANK, Domain::Found(what, Some(d))));
            }
        }
        out
    }
}

/// The values of `flag` in the k3s or RKE2 arguments recorded on the nodes (servers only
/// carry network flags), or nothing when no node has such arguments.
fn node_args(inp: &ClusterInputs, flag: &str) -> Option<Candidate> {
    let mut parts = Vec::new();
    let mut annotation = None;
    for n in &inp.nodes {
        let Some(args) = &n.node_args else { continue };
        annotation.get_or_insert(args.annotation.clone());
        let what = format!("Node/{} {} {flag}", n.name, args.annotation);
        let values = sources::node_args(&args.raw)
            .map(|a| sources::flag_values(&a, flag))
            .unwrap_or_default();
        parts.push((what, values));
    }
    let annotation = annotation?;
    Some(Candidate {
        parts,
        label: Label::Count(format!("Node annotation {annotation} {flag}"), "node"),
        absent: Some(format!("no Node's {annotation} has {flag}")),
    })
}
