//! The Service and Pod networks: each source in order of priority, the first with a valid
//! CIDR wins. Cluster-wide sources come before per-node ones, so that a node joining changes
//! nothing.

use std::collections::BTreeSet;

use ipnet::IpNet;

use super::sources::{self, Kubeadm};
use super::{ClusterInputs, KUBEADM, Skipped, add_cidrs, cloud, found, kubeadm_lacks, not_found};
use super::{NamedValues, plural};
use crate::api::Fact;

pub(super) const OPENSHIFT_NETWORK: &str = "Network.config.openshift.io/cluster";
const CILIUM_CONFIG: &str = "ConfigMap kube-system/cilium-config";

type KubeadmResult = Result<Kubeadm, String>;

/// How a found fact names its source.
enum Label {
    /// As given.
    Fixed(String),
    /// `label (N nouns)`: how many of the parts gave a value.
    Count(String, &'static str),
    /// The parts that gave a value, by what they are, comma-separated.
    Names,
}

/// One source: the objects read (what each is, for skipped values, and its raw values).
struct Candidate {
    parts: Vec<(String, Vec<String>)>,
    label: Label,
    /// Where discovery looked, for the "not found" message when nothing was valid.
    absent: Option<String>,
}

impl Candidate {
    fn one(what: String, values: Vec<String>, label: Label, absent: Option<String>) -> Self {
        Candidate {
            parts: vec![(what, values)],
            label,
            absent,
        }
    }
}

/// The first candidate with a valid CIDR, as a fact (aggregated when `aggregate`); else where
/// the candidates that say so looked.
fn first(cands: Vec<Candidate>, sk: &mut Skipped, aggregate: bool) -> Result<Fact, Vec<String>> {
    let mut looked = Vec::new();
    for c in cands {
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
    let mut cands = vec![Candidate::one(
        flag.into(),
        inp.overrides.service_cidrs.clone(),
        Label::Fixed(flag.into()),
        None,
    )];
    cands.push(Candidate {
        parts: super::sorted_by_name(&inp.service_cidrs)
            .into_iter()
            .map(|o| (format!("ServiceCIDR/{}", o.name), o.values.clone()))
            .collect(),
        label: Label::Names,
        absent: None,
    });
    let p = &inp.platform;
    if let Some(net) = &p.openshift_network {
        let absent = format!("{OPENSHIFT_NETWORK} has no serviceNetwork");
        let what = format!("{OPENSHIFT_NETWORK} serviceNetwork");
        let label = Label::Fixed(OPENSHIFT_NETWORK.into());
        cands.push(Candidate::one(
            what,
            net.service_network.clone(),
            label,
            Some(absent),
        ));
    }
    if !p.apiserver_pods.is_empty() {
        cands.push(apiserver_pods(&p.apiserver_pods));
    }
    cands.extend(node_args(inp, "--service-cidr"));
    if let Some(Ok(k)) = kubeadm {
        let what = format!("{KUBEADM} networking.serviceSubnet");
        let values = k.service_subnet.iter().cloned().collect();
        cands.push(Candidate::one(
            what,
            values,
            Label::Fixed(KUBEADM.into()),
            None,
        ));
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

fn apiserver_pods(pods: &[NamedValues]) -> Candidate {
    let flag = "--service-cluster-ip-range";
    Candidate {
        parts: super::sorted_by_name(pods)
            .into_iter()
            .map(|p| {
                let what = format!("Pod kube-system/{} {flag}", p.name);
                (what, sources::flag_values(&p.values, flag))
            })
            .collect(),
        label: Label::Names,
        absent: Some(format!("the kube-apiserver Pods have no valid {flag}")),
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

pub(super) fn pod_network(inp: &ClusterInputs, kubeadm: Option<&KubeadmResult>) -> Fact {
    let mut sk = Skipped::default();
    let flag = "flag --pod-cidr";
    let mut cands = vec![Candidate::one(
        flag.into(),
        inp.overrides.pod_cidrs.clone(),
        Label::Fixed(flag.into()),
        None,
    )];
    cands.extend(cluster_wide_pods(inp));
    if let Some(Ok(k)) = kubeadm {
        let what = format!("{KUBEADM} networking.podSubnet");
        let values = k.pod_subnet.iter().cloned().collect();
        cands.push(Candidate::one(
            what,
            values,
            Label::Fixed(KUBEADM.into()),
            None,
        ));
    }
    cands.extend(per_node_pods(inp));
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

/// Sources that hold the whole Pod network, most specific first.
fn cluster_wide_pods(inp: &ClusterInputs) -> Vec<Candidate> {
    let p = &inp.platform;
    let mut cands = Vec::new();
    if let Some(net) = &p.openshift_network {
        let absent = format!("{OPENSHIFT_NETWORK} has no clusterNetwork");
        let what = format!("{OPENSHIFT_NETWORK} clusterNetwork");
        let label = Label::Fixed(OPENSHIFT_NETWORK.into());
        cands.push(Candidate::one(
            what,
            net.cluster_network.clone(),
            label,
            Some(absent),
        ));
    }
    if let Some(pools) = &p.calico_ip_pools {
        cands.push(Candidate {
            parts: super::sorted_by_name(pools)
                .into_iter()
                .map(|o| (format!("IPPool/{} spec.cidr", o.name), o.values.clone()))
                .collect(),
            label: Label::Count("Calico IPPool spec.cidr".into(), "pool"),
            absent: Some("no Calico IPPool has a valid spec.cidr".into()),
        });
    }
    cands.extend(p.cilium_config.as_ref().map(cilium_pool));
    cands.extend(node_args(inp, "--cluster-cidr"));
    cands
}

/// Cilium's cluster-pool IPAM (its default mode): the CIDRs its operator carves node ranges from.
fn cilium_pool(cfg: &std::collections::BTreeMap<String, String>) -> Candidate {
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

/// Per-node ranges, aggregated: Cilium's, OVN-Kubernetes', then the Node objects' own.
fn per_node_pods(inp: &ClusterInputs) -> Vec<Candidate> {
    let mut cands = Vec::new();
    if let Some(nodes) = &inp.platform.cilium_nodes {
        cands.push(Candidate {
            parts: super::sorted_by_name(nodes)
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
        });
    }
    let ovn = "k8s.ovn.org/node-subnets";
    let ovn_parts: Vec<(String, Vec<String>)> = inp
        .nodes
        .iter()
        .filter_map(|n| {
            let raw = n.ovn_subnets.as_deref()?;
            let what = format!("Node/{} annotation {ovn}", n.name);
            Some((what, sources::ovn_node_subnets(raw).unwrap_or_default()))
        })
        .collect();
    if !ovn_parts.is_empty() {
        cands.push(Candidate {
            parts: ovn_parts,
            label: Label::Count(format!("Node annotation {ovn}"), "node"),
            absent: Some(format!("no Node's {ovn} has a default network subnet")),
        });
    }
    cands.push(Candidate {
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
    });
    cands
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
