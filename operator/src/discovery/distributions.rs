//! Discovery on real distributions and network plugins, with their objects' fields as the
//! real APIs have them; and what a platform does not reveal, reported, never guessed.

use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

fn named(name: &str, values: &[&str]) -> NamedValues {
    NamedValues {
        name: name.into(),
        values: s(values),
    }
}

fn node(name: &str, provider: &str) -> NodeInputs {
    NodeInputs {
        name: name.into(),
        internal_ips: vec![format!("10.0.1.{}", name.len())],
        provider_id: Some(provider.into()),
        ..Default::default()
    }
}

fn fact(f: Option<Fact>) -> (Vec<String>, Option<String>, Option<String>) {
    let f = f.expect("every fact is set");
    (f.values, f.source, f.message)
}

const OPENSHIFT_COREFILE: &str = "\
.:5353 {
    bufsize 1232
    errors
    log . {
        class error
    }
    health {
        lameduck 20s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    prometheus 127.0.0.1:9153
    forward . /etc/resolv.conf {
        policy sequential
    }
    cache 900 {
        denial 9984 30
    }
    reload
}
";

/// OpenShift 4 on AWS with OVN-Kubernetes: no ServiceCIDR, no kubeadm, no kube-system DNS.
fn openshift() -> ClusterInputs {
    let mut nodes = vec![
        node("ip-10-0-1-10", "aws:///us-east-1a/i-0a"),
        node("ip-10-0-1-11", "aws:///us-east-1b/i-0b"),
    ];
    nodes[0].ovn_subnets = Some(r#"{"default":["10.128.0.0/23"]}"#.into());
    nodes[1].ovn_subnets = Some(r#"{"default":["10.128.2.0/23"]}"#.into());
    ClusterInputs {
        kubernetes_service_found: true,
        kubernetes_service_ips: s(&["172.30.0.1"]),
        api_host: Some("api.ocp.example.com".into()),
        nodes,
        platform: PlatformInputs {
            openshift_network: Some(OpenShiftNetwork {
                cluster_network: s(&["10.128.0.0/14"]),
                service_network: s(&["172.30.0.0/16"]),
            }),
            openshift_api_internal_uri: Some("https://api-int.ocp.example.com:6443".into()),
            openshift_corefile: Some(OPENSHIFT_COREFILE.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn openshift_networks_domain_and_internal_api_come_from_its_configs() {
    let f = discover(&openshift());
    let net = "Network.config.openshift.io/cluster";
    assert_eq!(
        fact(f.pod_network),
        (s(&["10.128.0.0/14"]), Some(net.into()), None)
    );
    assert_eq!(
        fact(f.service_network),
        (s(&["172.30.0.0/16"]), Some(net.into()), None)
    );
    assert_eq!(
        fact(f.cluster_domain),
        (
            s(&["cluster.local"]),
            Some("ConfigMap openshift-dns/dns-default Corefile".into()),
            None
        )
    );
    let (api, source, _) = fact(f.api_server);
    assert_eq!(
        api,
        s(&[
            "172.30.0.1",
            "api-int.ocp.example.com",
            "api.ocp.example.com"
        ])
    );
    assert_eq!(
        source.as_deref(),
        Some(
            "Service default/kubernetes, client config host, \
             Infrastructure.config.openshift.io/cluster apiServerInternalURI"
        )
    );
}

#[test]
fn on_openshift_a_node_joining_changes_no_network() {
    let before = discover(&openshift());
    let mut c = openshift();
    let mut n = node("ip-10-0-1-12", "aws:///us-east-1c/i-0c");
    n.ovn_subnets = Some(r#"{"default":["10.128.4.0/23"]}"#.into());
    c.nodes.push(n);
    let after = discover(&c);
    assert_eq!(before.pod_network, after.pod_network);
    assert_eq!(before.service_network, after.service_network);
}

#[test]
fn openshift_spec_is_read_while_the_status_is_empty() {
    // The edge passes the spec when the status has no networks; an empty config says so.
    let mut c = openshift();
    c.platform.openshift_network = Some(OpenShiftNetwork::default());
    c.nodes.iter_mut().for_each(|n| n.ovn_subnets = None);
    let (values, _, message) = fact(discover(&c).pod_network);
    assert!(values.is_empty());
    assert_eq!(
        message.as_deref(),
        Some(
            "no Node has spec.podCIDRs, Network.config.openshift.io/cluster has no \
             clusterNetwork and ConfigMap kube-system/kubeadm-config not found; on EKS with \
             the Amazon VPC CNI, Pods take addresses from VPC subnets (the nodes' own, or with \
             custom networking those its ENIConfigs name, often in a secondary CIDR) and no \
             object holds their ranges: set every CIDR of the VPC (aws ec2 describe-vpcs \
             --vpc-ids VPC --query 'Vpcs[].CidrBlockAssociationSet[].CidrBlock') (set \
             --pod-cidr)"
        )
    );
}

#[test]
fn ovn_kubernetes_node_subnets_are_aggregated_in_both_formats() {
    let mut a = node("a", "kind://docker/kind/a");
    a.ovn_subnets = Some(r#"{"default":["10.244.0.0/24","fd00:10:244:1::/64"]}"#.into());
    let mut b = node("b", "kind://docker/kind/b");
    b.ovn_subnets = Some(r#"{"default":"10.244.1.0/24"}"#.into());
    let mut bad = node("c", "kind://docker/kind/c");
    bad.ovn_subnets = Some("not json".into());
    let c = ClusterInputs {
        nodes: vec![a, b, bad],
        ..Default::default()
    };
    assert_eq!(
        fact(discover(&c).pod_network),
        (
            s(&["10.244.0.0/23", "fd00:10:244:1::/64"]),
            Some("Node annotation k8s.ovn.org/node-subnets (2 nodes)".into()),
            None
        )
    );
}

#[test]
fn calico_pools_win_over_kubeadm_and_the_nodes() {
    // A kubeadm cluster whose Calico allocates from its own pool, not from podSubnet.
    let mut n = node("worker-1", "openstack:///5f2c");
    n.pod_cidrs = s(&["10.244.1.0/24"]);
    let c = ClusterInputs {
        kubeadm_config: Some("networking:\n  podSubnet: 10.244.0.0/16\n".into()),
        nodes: vec![n],
        platform: PlatformInputs {
            calico_ip_pools: Some(vec![
                named("default-ipv4-ippool", &["192.168.0.0/16"]),
                named("default-ipv6-ippool", &["fd5f:1e2d:3c4b::/48"]),
            ]),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        fact(discover(&c).pod_network),
        (
            s(&["192.168.0.0/16", "fd5f:1e2d:3c4b::/48"]),
            Some("Calico IPPool spec.cidr (2 pools)".into()),
            None
        )
    );
}

#[test]
fn cilium_cluster_pool_then_its_nodes() {
    let cfg = |pairs: &[(&str, &str)]| {
        Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    };
    let mut c = ClusterInputs {
        nodes: vec![node("a", "gce://p/us-central1-a/a")],
        platform: PlatformInputs {
            cilium_config: cfg(&[
                ("ipam", "cluster-pool"),
                ("cluster-pool-ipv4-cidr", "10.0.0.0/9 10.128.0.0/9"),
                ("cluster-pool-ipv6-cidr", "fd02::/104"),
            ]),
            cilium_nodes: Some(vec![named("a", &["10.0.1.0/24"])]),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        fact(discover(&c).pod_network),
        (
            s(&["10.0.0.0/8", "fd02::/104"]),
            Some("ConfigMap kube-system/cilium-config cluster-pool".into()),
            None
        )
    );
    // ENI mode: no cluster-wide pool; the CiliumNodes' ranges, aggregated.
    c.platform.cilium_config = cfg(&[("ipam", "eni")]);
    c.platform.cilium_nodes = Some(vec![
        named("a", &["10.0.1.0/24"]),
        named("b", &["10.0.0.0/24"]),
    ]);
    assert_eq!(
        fact(discover(&c).pod_network),
        (
            s(&["10.0.0.0/23"]),
            Some("CiliumNode spec.ipam.podCIDRs (2 nodes)".into()),
            None
        )
    );
    c.platform.cilium_nodes = Some(vec![named("a", &[])]);
    let (_, _, message) = fact(discover(&c).pod_network);
    assert_eq!(
        message.as_deref(),
        Some(
            "no Node has spec.podCIDRs, ConfigMap kube-system/cilium-config ipam mode \"eni\" \
             has no cluster-wide pool, no CiliumNode has spec.ipam.podCIDRs and ConfigMap \
             kube-system/kubeadm-config not found; on GKE the range is the cluster's \
             clusterIpv4Cidr (gcloud container clusters describe CLUSTER \
             --format='value(clusterIpv4Cidr)') (set --pod-cidr)"
        )
    );
}

#[test]
fn cilium_chained_behind_another_cni_has_no_pool_of_its_own() {
    // Helm still writes the default pool when Cilium is chained behind the VPC CNI.
    let cfg = [
        ("cni-chaining-mode", "aws-cni"),
        ("ipam", "cluster-pool"),
        ("cluster-pool-ipv4-cidr", "10.0.0.0/8"),
    ];
    let c = ClusterInputs {
        nodes: vec![node("ip-10-1-0-5", "aws:///eu-west-1a/i-1")],
        platform: PlatformInputs {
            cilium_config: Some(
                cfg.iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let (values, _, message) = fact(discover(&c).pod_network);
    assert!(values.is_empty(), "{values:?}");
    assert!(message.unwrap().contains(
        "ConfigMap kube-system/cilium-config cni-chaining-mode \"aws-cni\": the primary \
             CNI gives Pods their addresses"
    ));
}

#[test]
fn rke2_server_arguments_give_networks_and_domain() {
    let mut server = node("server-1", "rke2://server-1");
    server.node_args = Some(NodeArgs {
        annotation: "rke2.io/node-args".into(),
        raw: r#"["server","--cni","canal","--cluster-cidr","10.42.0.0/16,fd42::/56","--service-cidr=10.43.0.0/16","--cluster-domain","rke2.internal","--token","********"]"#.into(),
    });
    let mut agent = node("agent-1", "rke2://agent-1");
    agent.node_args = Some(NodeArgs {
        annotation: "rke2.io/node-args".into(),
        raw: r#"["agent","--server","https://server-1:9345","--token","********"]"#.into(),
    });
    agent.pod_cidrs = s(&["10.42.7.0/24"]);
    let c = ClusterInputs {
        nodes: vec![agent, server],
        ..Default::default()
    };
    let f = discover(&c);
    assert_eq!(
        fact(f.pod_network),
        (
            s(&["10.42.0.0/16", "fd42::/56"]),
            Some("Node annotation rke2.io/node-args --cluster-cidr (1 node)".into()),
            None
        )
    );
    assert_eq!(
        fact(f.service_network),
        (
            s(&["10.43.0.0/16"]),
            Some("Node annotation rke2.io/node-args --service-cidr (1 node)".into()),
            None
        )
    );
    assert_eq!(
        fact(f.cluster_domain),
        (
            s(&["rke2.internal"]),
            Some("Node/server-1 rke2.io/node-args --cluster-domain".into()),
            None
        )
    );
}

#[test]
fn k3s_without_network_flags_reports_the_service_network_missing() {
    let mut server = node("k3s-server", "k3s://k3s-server");
    server.node_args = Some(NodeArgs {
        annotation: "k3s.io/node-args".into(),
        raw: r#"["server","--write-kubeconfig-mode","0644"]"#.into(),
    });
    server.pod_cidrs = s(&["10.42.0.0/24"]);
    let c = ClusterInputs {
        nodes: vec![server],
        ..Default::default()
    };
    let f = discover(&c);
    assert_eq!(
        fact(f.pod_network).1.as_deref(),
        Some("Node.spec.podCIDRs (1 node)")
    );
    let (values, _, message) = fact(f.service_network);
    assert!(values.is_empty());
    assert_eq!(
        message.as_deref(),
        Some(
            "no ServiceCIDR object, no Node's k3s.io/node-args has --service-cidr and \
             ConfigMap kube-system/kubeadm-config not found; k3s and RKE2 record \
             --service-cidr only when it was given, and then use their built-in range: set \
             the server's --service-cidr (set --service-cidr)"
        )
    );
}

#[test]
fn the_kube_apiserver_static_pod_gives_the_service_network() {
    let c = ClusterInputs {
        platform: PlatformInputs {
            apiserver_pods: vec![named(
                "kube-apiserver-cp-1",
                &[
                    "kube-apiserver",
                    "--advertise-address=192.168.10.5",
                    "--service-cluster-ip-range=10.96.0.0/12,fd00:96::/112",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                ],
            )],
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        fact(discover(&c).service_network),
        (
            s(&["10.96.0.0/12", "fd00:96::/112"]),
            Some("Pod kube-system/kube-apiserver-cp-1 --service-cluster-ip-range".into()),
            None
        )
    );
}

#[test]
fn gke_domain_from_kube_dns_and_its_service_network_reported_missing() {
    let mut n = node("gke-pool-1-abc", "gce://proj/europe-west1-b/gke-pool-1-abc");
    n.pod_cidrs = s(&["10.8.0.0/24"]);
    let c = ClusterInputs {
        nodes: vec![n],
        kubernetes_service_found: true,
        kubernetes_service_ips: s(&["34.118.224.1"]),
        platform: PlatformInputs {
            kube_dns_args: Some(s(&[
                "/kube-dns",
                "--domain=cluster.local.",
                "--dns-port=10053",
                "--config-dir=/kube-dns-config",
                "--v=2",
            ])),
            ..Default::default()
        },
        ..Default::default()
    };
    let f = discover(&c);
    assert_eq!(
        fact(f.cluster_domain),
        (
            s(&["cluster.local"]),
            Some("Deployment kube-system/kube-dns --domain".into()),
            None
        )
    );
    let (values, _, message) = fact(f.service_network);
    assert!(
        values.is_empty(),
        "never guessed from the kubernetes Service IP"
    );
    assert_eq!(
        message.as_deref(),
        Some(
            "no ServiceCIDR object and ConfigMap kube-system/kubeadm-config not found; GKE \
             before 1.33 has no ServiceCIDR object: the range is the cluster's \
             servicesIpv4Cidr (gcloud container clusters describe CLUSTER \
             --format='value(servicesIpv4Cidr)') (set --service-cidr)"
        )
    );
}

#[test]
fn eks_with_the_vpc_cni_reports_both_networks_missing_with_where_to_look() {
    let c = ClusterInputs {
        nodes: vec![
            node("ip-10-0-1-10.ec2.internal", "aws:///us-east-1a/i-0a"),
            node("ip-10-0-2-10.ec2.internal", "aws:///us-east-1b/i-0b"),
        ],
        corefile: Some(
            ".:53 {\n  kubernetes cluster.local in-addr.arpa ip6.arpa {\n  }\n}\n".into(),
        ),
        kubernetes_service_found: true,
        kubernetes_service_ips: s(&["172.20.0.1"]),
        ..Default::default()
    };
    let facts = discover(&c);
    let p = policy_entries(&facts, &NoProxySpec::default());
    assert_eq!(
        p.missing,
        s(&[
            "serviceNetwork: no ServiceCIDR object and ConfigMap kube-system/kubeadm-config not \
             found; EKS does not publish the Service range in the cluster: it is \
             kubernetesNetworkConfig.serviceIpv4Cidr (aws eks describe-cluster --name CLUSTER \
             --query cluster.kubernetesNetworkConfig.serviceIpv4Cidr) (set --service-cidr)",
            "podNetwork: no Node has spec.podCIDRs and ConfigMap kube-system/kubeadm-config not \
             found; on EKS with the Amazon VPC CNI, Pods take addresses from VPC subnets (the \
             nodes' own, or with custom networking those its ENIConfigs name, often in a \
             secondary CIDR) and no object holds their ranges: set every CIDR of the VPC (aws \
             ec2 describe-vpcs --vpc-ids VPC --query \
             'Vpcs[].CidrBlockAssociationSet[].CidrBlock') (set --pod-cidr)",
        ])
    );
    assert_eq!(
        fact(facts.cluster_domain).1.as_deref(),
        Some("ConfigMap kube-system/coredns Corefile")
    );
}

#[test]
fn parsers_of_arguments_and_annotations() {
    let args = s(&["a", "--x=1", "--x", "2", "--xy=3", "--x"]);
    assert_eq!(sources::flag_values(&args, "--x"), s(&["1", "2"]));
    assert!(sources::node_args("{}").is_err());
    assert_eq!(
        sources::ovn_node_subnets(r#"{"red":["10.1.0.0/24"]}"#),
        Err("has no default network".into())
    );
    assert_eq!(
        sources::url_host("https://[fd00::1]:6443").as_deref(),
        Some("fd00::1")
    );
    assert_eq!(sources::url_host("api-int:6443/"), None);
}
