//! The Service and Pod networks: each source in order of priority, the first with a valid
//! CIDR wins. Cluster-wide sources come before per-node ones, so that a node joining changes
//! nothing.

use std::collections::BTreeSet;

use ipnet::IpNet;

use super::candidate::{Candidate, Label, Ranked, rank};
use super::sources::Kubeadm;
use super::{ClusterInputs, KUBEADM, Skipped, add_cidrs, cloud, found, kubeadm_lacks, not_found};
use super::{platforms, plural};
use crate::api::Fact;

type KubeadmResult = Result<Kubeadm, String>;

/// The first candidate with a valid CIDR, by rank, as a fact (aggregated when `aggregate`);
/// else where the candidates that say so looked.
fn first(
    mut cands: Vec<Ranked<Candidate>>,
    sk: &mut Skipped,
    aggregate: bool,
) -> Result<Fact, Vec<String>> {
    cands.sort_by_key(|(rank, _)| *rank);
    let mut looked = Vec::new();
    for (_, c) in cands {
        let mut nets = BTreeSet::new();
        let mut gave = Vec::new();
        for (what, raws) in &c.parts {
            let raws: Vec<String> = raws
                .iter()
                .flat_map(|r| r.split_whitespace())
                .map(str::to_owned)
                .collect();
            if add_cidrs(&raws, what, &mut nets, sk) {
                gave.push(what.clone());
            }
        }
        if gave.is_empty() {
            looked.extend(c.absent);
            continue;
        }
        let source = match c.label {
            Label::Fixed(s) => s,
            Label::Count(label, noun) => format!("{label} ({})", plural(gave.len(), noun)),
            Label::Names => gave.join(", "),
        };
        let nets: Vec<IpNet> = nets.into_iter().collect();
        let nets = if aggregate {
            IpNet::aggregate(&nets)
        } else {
            nets
        };
        return Ok(found(nets, source, sk));
    }
    Err(looked)
}

/// `base` and the other places looked at, the platform's advice, and the flag to set.
fn missing(
    mut parts: Vec<String>,
    looked: Vec<String>,
    hint: Option<String>,
    flag: &str,
) -> String {
    let last = parts.pop();
    parts.extend(looked);
    parts.extend(last);
    let mut msg = super::join_and(&parts);
    if let Some(h) = hint {
        msg.push_str(&format!("; {h}"));
    }
    msg.push_str(&format!(" (set {flag})"));
    msg
}

pub(super) fn service_network(inp: &ClusterInputs, kubeadm: Option<&KubeadmResult>) -> Fact {
    let mut sk = Skipped::default();
    let flag = "flag --service-cidr";
    let mut cands = vec![(
        rank::FLAG,
        Candidate::one(
            flag.into(),
            inp.overrides.service_cidrs.clone(),
            Label::Fixed(flag.into()),
            None,
        ),
    )];
    let service_cidrs = Candidate {
        parts: super::sorted_by_name(&inp.service_cidrs)
            .into_iter()
            .map(|o| (format!("ServiceCIDR/{}", o.name), o.values.clone()))
            .collect(),
        label: Label::Names,
        absent: None,
    };
    cands.push((rank::SERVICE_CIDR, service_cidrs));
    for id in platforms::all() {
        cands.extend(platforms::source(id).service_network(inp));
    }
    if let Some(Ok(k)) = kubeadm {
        let what = format!("{KUBEADM} networking.serviceSubnet");
        let values = k.service_subnet.iter().cloned().collect();
        let c = Candidate::one(what, values, Label::Fixed(KUBEADM.into()), None);
        cands.push((rank::KUBEADM, c));
    }
    let looked = match first(cands, &mut sk, false) {
        Ok(fact) => return fact,
        Err(looked) => looked,
    };
    let objects = if inp.namespaced_only {
        format!("ServiceCIDRs {}", super::NAMESPACED_ONLY)
    } else if inp.service_cidrs.is_empty() {
        "no ServiceCIDR object".to_owned()
    } else {
        "no ServiceCIDR object has valid spec.cidrs".to_owned()
    };
    let base = vec![objects, kubeadm_lacks(kubeadm, "serviceSubnet")];
    let hint = service_hint(cloud::platform(&inp.nodes).as_deref());
    not_found(missing(base, looked, hint, "--service-cidr"), &sk)
}

pub(super) fn pod_network(inp: &ClusterInputs, kubeadm: Option<&KubeadmResult>) -> Fact {
    let mut sk = Skipped::default();
    let flag = "flag --pod-cidr";
    let mut cands = vec![(
        rank::FLAG,
        Candidate::one(
            flag.into(),
            inp.overrides.pod_cidrs.clone(),
            Label::Fixed(flag.into()),
            None,
        ),
    )];
    for id in platforms::all() {
        cands.extend(platforms::source(id).pod_network(inp));
    }
    if let Some(Ok(k)) = kubeadm {
        let what = format!("{KUBEADM} networking.podSubnet");
        let values = k.pod_subnet.iter().cloned().collect();
        let c = Candidate::one(what, values, Label::Fixed(KUBEADM.into()), None);
        cands.push((rank::KUBEADM, c));
    }
    cands.push((rank::NODE_POD_CIDRS, node_pod_cidrs(inp)));
    let looked = match first(cands, &mut sk, true) {
        Ok(fact) => return fact,
        Err(looked) => looked,
    };
    let nodes = if inp.namespaced_only {
        format!("Nodes {}", super::NAMESPACED_ONLY)
    } else {
        "no Node has spec.podCIDRs".to_owned()
    };
    let base = vec![nodes, kubeadm_lacks(kubeadm, "podSubnet")];
    let hint = pod_hint(cloud::platform(&inp.nodes).as_deref());
    not_found(missing(base, looked, hint, "--pod-cidr"), &sk)
}

/// The Node objects' own ranges, aggregated: the last source of the Pod network.
fn node_pod_cidrs(inp: &ClusterInputs) -> Candidate {
    Candidate {
        parts: inp
            .nodes
            .iter()
            .map(|n| {
                (
                    format!("Node/{} spec.podCIDRs", n.name),
                    n.pod_cidrs.clone(),
                )
            })
            .collect(),
        label: Label::Count("Node.spec.podCIDRs".into(), "node"),
        absent: None,
    }
}

/// What a platform that does not reveal its Pod network offers instead.
fn pod_hint(platform: Option<&str>) -> Option<String> {
    let hint = match platform? {
        "aws" => {
            "on EKS with the Amazon VPC CNI, Pods take addresses from VPC subnets (the nodes' \
             own, or with custom networking those its ENIConfigs name, often in a secondary \
             CIDR) and no object holds their ranges: set every CIDR of the VPC (aws ec2 \
             describe-vpcs --vpc-ids VPC --query \
             'Vpcs[].CidrBlockAssociationSet[].CidrBlock')"
        }
        "azure" => {
            "on AKS with Azure CNI, Pods take addresses from the VNet subnet; with kubenet or \
             CNI Overlay the range is networkProfile.podCidr (az aks show -g GROUP -n CLUSTER \
             --query networkProfile.podCidr)"
        }
        "gce" => {
            "on GKE the range is the cluster's clusterIpv4Cidr (gcloud container clusters \
             describe CLUSTER --format='value(clusterIpv4Cidr)')"
        }
        _ => return None,
    };
    Some(hint.to_owned())
}

/// What a platform that does not reveal its Service network offers instead.
fn service_hint(platform: Option<&str>) -> Option<String> {
    let hint = match platform? {
        "aws" => {
            "EKS does not publish the Service range in the cluster: it is \
             kubernetesNetworkConfig.serviceIpv4Cidr (aws eks describe-cluster --name CLUSTER \
             --query cluster.kubernetesNetworkConfig.serviceIpv4Cidr)"
        }
        "gce" => {
            "GKE before 1.33 has no ServiceCIDR object: the range is the cluster's \
             servicesIpv4Cidr (gcloud container clusters describe CLUSTER \
             --format='value(servicesIpv4Cidr)')"
        }
        "k3s" | "rke2" => {
            "k3s and RKE2 record --service-cidr only when it was given, and then use their \
             built-in range: set the server's --service-cidr"
        }
        "azure" => {
            "AKS does not publish the Service range in the cluster: it is \
             networkProfile.serviceCidr (az aks show -g GROUP -n CLUSTER \
             --query networkProfile.serviceCidr)"
        }
        _ => return None,
    };
    Some(hint.to_owned())
}
