use super::*;
use crate::api::DiscoverSpec;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

fn named(name: &str, values: &[&str]) -> NamedValues {
    NamedValues {
        name: name.into(),
        values: s(values),
    }
}

fn node(name: &str, pod: &[&str], ips: &[&str], provider: Option<&str>) -> NodeInputs {
    NodeInputs {
        name: name.into(),
        pod_cidrs: s(pod),
        internal_ips: s(ips),
        provider_id: provider.map(str::to_owned),
        ..Default::default()
    }
}

const KUBEADM_YAML: &str = "\
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
networking:
  dnsDomain: kubeadm.example
  serviceSubnet: 10.112.0.0/16,fd00:112::/108
  podSubnet: \"10.244.0.0/16, fd00:244::/56\"
";

/// A realistic dual-stack cluster whose domain is not `cluster.local`.
fn cluster() -> ClusterInputs {
    ClusterInputs {
        api_host: Some("api.prod.example.com".into()),
        kubernetes_service_ips: s(&["10.100.0.1", "fd00:100::1"]),
        kubernetes_service_found: true,
        api_endpoints: vec![named("kubernetes", &["192.168.1.10", "192.168.1.11"])],
        service_cidrs: vec![named("kubernetes", &["10.100.0.0/16", "fd00:100::/108"])],
        kubeadm_config: Some(KUBEADM_YAML.into()),
        kubelet_config: Some("kind: KubeletConfiguration\nclusterDomain: prod.internal\n".into()),
        resolv_conf: Some("search team.svc.resolv.local svc.resolv.local resolv.local\n".into()),
        corefile: Some(".:53 {\n  kubernetes core.local in-addr.arpa {\n  }\n}\n".into()),
        nodes: vec![
            node(
                "n1",
                &["10.244.0.0/24", "fd00:244::/64"],
                &["192.168.1.10", "fd00:1::a"],
                Some("aws:///us-east-1a/i-1"),
            ),
            node(
                "n2",
                &["10.244.1.0/24", "fd00:244:0:1::/64"],
                &["192.168.1.11"],
                Some("aws:///us-east-1b/i-2"),
            ),
        ],
        platform: PlatformInputs::default(),
        overrides: Overrides::default(),
        namespaced_only: false,
    }
}

#[test]
fn a_namespaced_install_says_what_it_did_not_read() {
    let inputs = ClusterInputs {
        namespaced_only: true,
        ..Default::default()
    };
    let f = discover(&inputs);
    let msg = |f: &Option<Fact>| fact(f).message.clone().unwrap_or_default();
    let why = "not read: a namespaced install (run --namespace) reads nothing cluster-wide";
    assert!(
        msg(&f.node_addresses).starts_with(&format!("Nodes {why}")),
        "{}",
        msg(&f.node_addresses)
    );
    assert!(
        msg(&f.pod_network).contains(&format!("Nodes {why}")),
        "{}",
        msg(&f.pod_network)
    );
    assert!(
        msg(&f.service_network).contains(&format!("ServiceCIDRs {why}")),
        "{}",
        msg(&f.service_network)
    );
    assert_eq!(
        msg(&f.cloud_metadata),
        format!("no cloud platform with a metadata service detected (Nodes {why})")
    );
    // Flags still win.
    let flagged = ClusterInputs {
        overrides: Overrides {
            service_cidrs: vec!["10.43.0.0/16".into()],
            pod_cidrs: vec!["10.42.0.0/16".into()],
            ..Default::default()
        },
        ..inputs
    };
    let f = discover(&flagged);
    assert_eq!(fact(&f.service_network).values, ["10.43.0.0/16"]);
    assert_eq!(fact(&f.pod_network).values, ["10.42.0.0/16"]);
}

fn fact(f: &Option<Fact>) -> &Fact {
    f.as_ref().expect("discover always sets every fact")
}

fn missing_all() -> DiscoveredFacts {
    discover(&ClusterInputs::default())
}

#[test]
fn realistic_cluster_facts_and_sources() {
    let f = discover(&cluster());
    let api = fact(&f.api_server);
    assert_eq!(
        api.values,
        s(&[
            "10.100.0.1",
            "192.168.1.10",
            "192.168.1.11",
            "fd00:100::1",
            "api.prod.example.com"
        ])
    );
    assert_eq!(
        api.source.as_deref(),
        Some("Service default/kubernetes, EndpointSlice default/kubernetes, client config host")
    );
    assert_eq!(api.message, None);
    let svc = fact(&f.service_network);
    assert_eq!(svc.values, s(&["10.100.0.0/16", "fd00:100::/108"]));
    assert_eq!(svc.source.as_deref(), Some("ServiceCIDR/kubernetes"));
    // The cluster-wide range wins over the nodes' ranges: a node joining changes nothing.
    let pod = fact(&f.pod_network);
    assert_eq!(pod.values, s(&["10.244.0.0/16", "fd00:244::/56"]));
    assert_eq!(
        pod.source.as_deref(),
        Some("ConfigMap kube-system/kubeadm-config")
    );
    let dom = fact(&f.cluster_domain);
    assert_eq!(dom.values, s(&["prod.internal"]));
    assert_eq!(
        dom.source.as_deref(),
        Some("ConfigMap kube-system/kubelet-config")
    );
    let nodes = fact(&f.node_addresses);
    assert_eq!(
        nodes.values,
        s(&["192.168.1.10", "192.168.1.11", "fd00:1::a"])
    );
    assert_eq!(
        nodes.source.as_deref(),
        Some("Node.status.addresses InternalIP (2 nodes)")
    );
    let cloud = fact(&f.cloud_metadata);
    assert_eq!(cloud.values, s(&["169.254.169.254", "fd00:ec2::254"]));
    assert_eq!(cloud.source.as_deref(), Some("Node.spec.providerID (aws)"));
}

#[test]
fn nothing_found_is_reported_never_defaulted() {
    let f = missing_all();
    for (name, fact) in [
        ("apiServer", &f.api_server),
        ("serviceNetwork", &f.service_network),
        ("podNetwork", &f.pod_network),
        ("clusterDomain", &f.cluster_domain),
        ("nodeAddresses", &f.node_addresses),
        ("cloudMetadata", &f.cloud_metadata),
    ] {
        let fact = fact.as_ref().unwrap();
        assert!(fact.values.is_empty(), "{name}: {:?}", fact.values);
        assert_eq!(fact.source, None, "{name}");
        assert!(
            fact.message.as_deref().is_some_and(|m| !m.is_empty()),
            "{name}"
        );
    }
    assert_eq!(
        fact(&f.api_server).message.as_deref(),
        Some(
            "Service default/kubernetes not found, no EndpointSlice labelled \
             kubernetes.io/service-name=kubernetes in default and the client config has no host"
        )
    );
    assert_eq!(
        fact(&f.service_network).message.as_deref(),
        Some(
            "no ServiceCIDR object and ConfigMap kube-system/kubeadm-config not found \
             (set --service-cidr)"
        )
    );
    assert_eq!(
        fact(&f.cluster_domain).message.as_deref(),
        Some(
            "ConfigMap kube-system/kubelet-config not found, /etc/resolv.conf was not read \
             (not running in a Pod), ConfigMap kube-system/coredns not found or has no Corefile \
             and ConfigMap kube-system/kubeadm-config not found \
             (set --cluster-domain or spec.noProxy.clusterDomain)"
        )
    );
    let p = policy_entries(&f, &NoProxySpec::default());
    assert_eq!(p.entries, s(&[".svc", "localhost", "127.0.0.1", "::1"]));
    let text = format!("{:?}", p.entries);
    assert!(!text.contains("10.96.0.0/12") && !text.contains("cluster.local"));
    assert_eq!(p.missing.len(), 5, "{:?}", p.missing);
    assert!(p.missing[0].starts_with("apiServer: Service default/kubernetes not found"));
    assert_eq!(
        p.missing[2],
        "podNetwork: no Node has spec.podCIDRs and ConfigMap kube-system/kubeadm-config \
         not found (set --pod-cidr)"
    );
}

#[test]
fn api_server_sources_each_count_alone() {
    let only_host = ClusterInputs {
        api_host: Some("127.0.0.1".into()),
        kubernetes_service_found: true,
        ..Default::default()
    };
    let api = discover(&only_host).api_server.unwrap();
    assert_eq!(api.values, s(&["127.0.0.1"]));
    assert_eq!(api.source.as_deref(), Some("client config host"));

    let only_slices = ClusterInputs {
        api_endpoints: vec![
            named("b", &["10.0.0.3"]),
            named("a", &["10.0.0.2", "10.0.0.3"]),
        ],
        ..Default::default()
    };
    let api = discover(&only_slices).api_server.unwrap();
    assert_eq!(api.values, s(&["10.0.0.2", "10.0.0.3"]));
    assert_eq!(
        api.source.as_deref(),
        Some("EndpointSlice default/a, EndpointSlice default/b")
    );

    let headless = ClusterInputs {
        kubernetes_service_found: true,
        api_host: Some("[::1]".into()),
        ..Default::default()
    };
    assert_eq!(discover(&headless).api_server.unwrap().values, s(&["::1"]));

    let only_service = ClusterInputs {
        kubernetes_service_found: true,
        kubernetes_service_ips: s(&["10.0.0.1"]),
        api_host: Some("LocalHost.".into()),
        ..Default::default()
    };
    let api = discover(&only_service).api_server.unwrap();
    assert_eq!(api.values, s(&["10.0.0.1", "localhost"]));
}

#[test]
fn service_network_precedence() {
    let mut c = cluster();
    c.overrides.service_cidrs = s(&["172.20.5.0/16"]);
    let f = discover(&c).service_network.unwrap();
    assert_eq!(f.values, s(&["172.20.0.0/16"]));
    assert_eq!(f.source.as_deref(), Some("flag --service-cidr"));

    let mut c = cluster();
    c.service_cidrs.push(named("extra", &["10.101.0.0/16"]));
    let f = discover(&c).service_network.unwrap();
    assert_eq!(
        f.values,
        s(&["10.100.0.0/16", "10.101.0.0/16", "fd00:100::/108"])
    );
    assert_eq!(
        f.source.as_deref(),
        Some("ServiceCIDR/extra, ServiceCIDR/kubernetes")
    );

    let mut c = cluster();
    c.service_cidrs.clear();
    c.nodes.iter_mut().for_each(|n| n.provider_id = None);
    let f = discover(&c).service_network.unwrap();
    assert_eq!(f.values, s(&["10.112.0.0/16", "fd00:112::/108"]));
    assert_eq!(
        f.source.as_deref(),
        Some("ConfigMap kube-system/kubeadm-config")
    );

    c.kubeadm_config = Some("networking:\n  podSubnet: 10.1.0.0/16\n".into());
    let f = discover(&c).service_network.unwrap();
    assert!(f.values.is_empty());
    assert_eq!(
        f.message.as_deref(),
        Some(
            "no ServiceCIDR object and ConfigMap kube-system/kubeadm-config has no valid \
             networking.serviceSubnet (set --service-cidr)"
        )
    );
}

#[test]
fn invalid_flag_falls_through_and_is_reported() {
    let mut c = cluster();
    c.overrides.service_cidrs = s(&["not-a-cidr"]);
    let f = discover(&c).service_network.unwrap();
    assert_eq!(f.source.as_deref(), Some("ServiceCIDR/kubernetes"));
    assert_eq!(
        f.message.as_deref(),
        Some("skipped invalid values: flag --service-cidr \"not-a-cidr\"")
    );
}

#[test]
fn pod_network_precedence_and_aggregation() {
    let mut c = cluster();
    c.overrides.pod_cidrs = s(&["10.50.0.0/24", "10.50.1.0/24"]);
    let f = discover(&c).pod_network.unwrap();
    assert_eq!(f.values, s(&["10.50.0.0/23"]));
    assert_eq!(f.source.as_deref(), Some("flag --pod-cidr"));

    let c = ClusterInputs {
        nodes: vec![
            node("a", &["10.244.1.0/24"], &[], None),
            node("b", &["10.244.0.0/24"], &[], None),
            node("c", &["10.244.3.0/24"], &[], None),
            node("d", &[], &[], None),
        ],
        ..Default::default()
    };
    let f = discover(&c).pod_network.unwrap();
    assert_eq!(f.values, s(&["10.244.0.0/23", "10.244.3.0/24"]));
    assert_eq!(f.source.as_deref(), Some("Node.spec.podCIDRs (3 nodes)"));

    let mut c = cluster();
    c.nodes.iter_mut().for_each(|n| {
        n.pod_cidrs.clear();
        n.provider_id = None;
    });
    let f = discover(&c).pod_network.unwrap();
    assert_eq!(f.values, s(&["10.244.0.0/16", "fd00:244::/56"]));
    assert_eq!(
        f.source.as_deref(),
        Some("ConfigMap kube-system/kubeadm-config")
    );

    c.kubeadm_config = Some("networking:\n  serviceSubnet: 10.1.0.0/16\n".into());
    let f = discover(&c).pod_network.unwrap();
    assert!(f.values.is_empty());
    let p = policy_entries(
        &DiscoveredFacts {
            pod_network: Some(f),
            ..discover(&cluster())
        },
        &NoProxySpec::default(),
    );
    assert_eq!(
        p.missing,
        s(&[
            "podNetwork: no Node has spec.podCIDRs and ConfigMap kube-system/kubeadm-config \
             has no valid networking.podSubnet (set --pod-cidr)"
        ])
    );
}

#[test]
fn cluster_domain_precedence() {
    let mut c = cluster();
    c.overrides.cluster_domain = Some("Flag.Example.".into());
    let f = discover(&c).cluster_domain.unwrap();
    assert_eq!(
        (f.values, f.source.as_deref()),
        (s(&["flag.example"]), Some("flag --cluster-domain"))
    );

    let mut c = cluster();
    c.kubelet_config = None;
    let f = discover(&c).cluster_domain.unwrap();
    assert_eq!(f.values, s(&["resolv.local"]));
    assert_eq!(f.source.as_deref(), Some("/etc/resolv.conf search path"));

    c.resolv_conf = Some("nameserver 10.0.0.10\nsearch corp.example\n".into());
    let f = discover(&c).cluster_domain.unwrap();
    assert_eq!(f.values, s(&["core.local"]));
    assert_eq!(
        f.source.as_deref(),
        Some("ConfigMap kube-system/coredns Corefile")
    );

    c.corefile = Some(".:53 {\n  forward . /etc/resolv.conf\n}\n".into());
    let f = discover(&c).cluster_domain.unwrap();
    assert_eq!(f.values, s(&["kubeadm.example"]));
    assert_eq!(
        f.source.as_deref(),
        Some("ConfigMap kube-system/kubeadm-config")
    );

    c.kubeadm_config = None;
    let f = discover(&c).cluster_domain.unwrap();
    assert!(f.values.is_empty());
    let m = f.message.unwrap();
    assert!(
        m.contains("the /etc/resolv.conf search path has no svc.<domain>"),
        "{m}"
    );
    assert!(m.contains("Corefile has no kubernetes zone"), "{m}");
}

#[test]
fn invalid_cluster_domain_is_skipped_with_message() {
    let mut c = cluster();
    c.kubelet_config = Some("clusterDomain: \"bad domain!\"\n".into());
    let f = discover(&c).cluster_domain.unwrap();
    assert_eq!(f.values, s(&["resolv.local"]));
    assert_eq!(
        f.message.as_deref(),
        Some("skipped invalid values: ConfigMap kube-system/kubelet-config \"bad domain!\"")
    );
    let only_bad = ClusterInputs {
        overrides: Overrides {
            cluster_domain: Some("*.wild".into()),
            ..Default::default()
        },
        kubelet_config: Some("clusterDomain: 10.0.0.1\n".into()),
        resolv_conf: Some("search svc.-bad-\n".into()),
        corefile: Some(".:53 {\n  kubernetes in..valid\n}\n".into()),
        kubeadm_config: Some("networking:\n  dnsDomain: a:53\n".into()),
        ..Default::default()
    };
    let f = discover(&only_bad).cluster_domain.unwrap();
    assert!(f.values.is_empty());
    let m = f.message.unwrap();
    assert!(
        m.starts_with("no source gave a valid cluster domain (set --cluster-domain"),
        "{m}"
    );
    assert!(m.contains("; skipped invalid values: "), "{m}");
    assert_eq!(m.matches("\", ").count() + 1, 5, "{m}");
}

#[test]
fn parses_resolv_conf() {
    use sources::resolv_conf_domain as r;
    assert_eq!(
        r("search ns.svc.corp.local svc.corp.local corp.local\n").as_deref(),
        Some("corp.local")
    );
    let gke = "# generated\nsearch default.svc.cluster.local svc.cluster.local cluster.local \
               c.proj.internal google.internal\nnameserver 10.0.0.10\noptions ndots:5\n";
    assert_eq!(r(gke).as_deref(), Some("cluster.local"));
    assert_eq!(
        r("search svc.old.local\nsearch a.svc.new.local svc.new.local\n").as_deref(),
        Some("new.local")
    );
    assert_eq!(r("nameserver 8.8.8.8\nsearch example.com\n"), None);
    assert_eq!(r("# search ns.svc.x.local svc.x.local\n"), None);
    assert_eq!(r(""), None);
}

#[test]
fn parses_corefile() {
    use sources::corefile_zone as z;
    let standard = ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       \
                    pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n    }\n    \
                    forward . /etc/resolv.conf\n}\n";
    assert_eq!(z(standard).as_deref(), Some("cluster.local"));
    let reverse_first = ".:53 {\n  kubernetes in-addr.arpa 10.0.0.0/8 k8s.corp {\n  }\n}\n";
    assert_eq!(z(reverse_first).as_deref(), Some("k8s.corp"));
    let block_zone = "dns://team.local:53 {\n  kubernetes {\n  }\n}\n";
    assert_eq!(z(block_zone).as_deref(), Some("team.local"));
    let root_block = ".:53 {\n  kubernetes\n}\n";
    assert_eq!(z(root_block), None);
    let commented = ".:53 {\n  # kubernetes old.local {\n  kubernetes new.local\n}\n";
    assert_eq!(z(commented).as_deref(), Some("new.local"));
    // A nested `kubernetes` word (an option) is not the plugin.
    let nested = ".:53 {\n  rewrite {\n    kubernetes x.local\n  }\n}\n";
    assert_eq!(z(nested), None);
}

#[test]
fn parses_kubeadm_yaml() {
    let k = sources::kubeadm_networking(KUBEADM_YAML).unwrap();
    assert_eq!(
        k.service_subnet.as_deref(),
        Some("10.112.0.0/16,fd00:112::/108")
    );
    assert_eq!(
        k.pod_subnet.as_deref(),
        Some("10.244.0.0/16, fd00:244::/56")
    );
    assert_eq!(k.dns_domain.as_deref(), Some("kubeadm.example"));
    let none = sources::kubeadm_networking("kind: ClusterConfiguration\n").unwrap();
    assert_eq!(none, sources::Kubeadm::default());
    let err = sources::kubeadm_networking("networking: [secret-looking-value\n").unwrap_err();
    assert!(
        err.starts_with("ClusterConfiguration is not valid YAML (line"),
        "{err}"
    );
    assert!(!err.contains("secret-looking-value"), "{err}");

    let c = ClusterInputs {
        kubeadm_config: Some("networking: {\n".into()),
        ..Default::default()
    };
    let m = discover(&c).service_network.unwrap().message.unwrap();
    assert!(
        m.contains("ConfigMap kube-system/kubeadm-config ClusterConfiguration is not valid YAML"),
        "{m}"
    );
}

#[test]
fn node_addresses_sorted_by_ip_and_deduplicated() {
    let c = ClusterInputs {
        nodes: vec![
            node("a", &[], &["10.0.0.10", "FD00:0:0::1"], None),
            node("b", &[], &["10.0.0.9", "10.0.0.10"], None),
            node("c", &[], &["10.0.0.300"], None),
        ],
        ..Default::default()
    };
    let f = discover(&c).node_addresses.unwrap();
    assert_eq!(f.values, s(&["10.0.0.9", "10.0.0.10", "fd00::1"]));
    assert_eq!(
        f.source.as_deref(),
        Some("Node.status.addresses InternalIP (2 nodes)")
    );
    assert_eq!(
        f.message.as_deref(),
        Some("skipped invalid values: Node/c InternalIP \"10.0.0.300\"")
    );
}

#[test]
fn invalid_inputs_are_skipped_and_named() {
    let c = ClusterInputs {
        kubernetes_service_found: true,
        kubernetes_service_ips: s(&["None", "10.0.0.1"]),
        api_host: Some("bad host".into()),
        nodes: vec![node(
            "n1",
            &["10.244.0.0/33", "garbage", "10.244.7.9/24"],
            &["fe80::1%eth0"],
            None,
        )],
        ..Default::default()
    };
    let f = discover(&c);
    let api = fact(&f.api_server);
    assert_eq!(api.values, s(&["10.0.0.1"]));
    assert_eq!(
        api.message.as_deref(),
        Some(
            "skipped invalid values: Service default/kubernetes clusterIP \"None\", \
             client config host \"bad host\""
        )
    );
    let pod = fact(&f.pod_network);
    assert_eq!(pod.values, s(&["10.244.7.0/24"]));
    let m = pod.message.as_deref().unwrap();
    assert!(
        m.contains("Node/n1 spec.podCIDRs \"10.244.0.0/33\"") && m.contains("\"garbage\""),
        "{m}"
    );
    let nodes = fact(&f.node_addresses);
    assert!(nodes.values.is_empty());
    assert_eq!(
        nodes.message.as_deref(),
        Some(
            "no Node has an InternalIP in status.addresses; skipped invalid values: \
             Node/n1 InternalIP \"fe80::1%eth0\""
        )
    );
}

#[test]
fn skipped_list_is_bounded() {
    let c = ClusterInputs {
        nodes: (0..9)
            .map(|i| node(&format!("n{i}"), &[], &["x"], None))
            .collect(),
        ..Default::default()
    };
    let m = discover(&c).node_addresses.unwrap().message.unwrap();
    assert!(m.ends_with(" and 4 more"), "{m}");
    assert_eq!(m.matches("InternalIP \"x\"").count(), 5, "{m}");
}

#[test]
fn provider_id_detection() {
    let cases = [
        (
            "aws:///us-east-1a/i-0abc",
            "aws",
            &["169.254.169.254", "fd00:ec2::254"][..],
        ),
        (
            "gce://proj/europe-west1-b/vm-1",
            "gce",
            &["169.254.169.254", "metadata.google.internal"],
        ),
        (
            "azure:///subscriptions/x/resourceGroups/y/providers/Microsoft.Compute/virtualMachines/z",
            "azure",
            &["169.254.169.254"],
        ),
        ("openstack:///4b2c", "openstack", &["169.254.169.254"]),
        (
            "digitalocean://123456",
            "digitalocean",
            &["169.254.169.254"],
        ),
        (
            "alicloud://cn-hangzhou.i-bp1",
            "alibaba",
            &["100.100.100.200"],
        ),
        (
            "alibabacloud://cn-hangzhou.i-bp1",
            "alibaba",
            &["100.100.100.200"],
        ),
        (
            "oci://ocid1.instance.oc1.phx.abc",
            "oracle",
            &["169.254.169.254"],
        ),
        ("ocid1.instance.oc1.phx.abc", "oracle", &["169.254.169.254"]),
        ("hcloud://1234", "hetzner", &["169.254.169.254"]),
        (
            "AWS:///eu-west-1a/i-1",
            "aws",
            &["169.254.169.254", "fd00:ec2::254"],
        ),
    ];
    for (id, platform, want) in cases {
        let c = ClusterInputs {
            nodes: vec![node("n", &[], &[], Some(id))],
            ..Default::default()
        };
        let f = discover(&c).cloud_metadata.unwrap();
        assert_eq!(f.values, s(want), "{id}");
        assert_eq!(
            f.source,
            Some(format!("Node.spec.providerID ({platform})")),
            "{id}"
        );
        assert_eq!(f.message, None, "{id}");
    }
    for (id, why) in [
        (
            "kind://docker/kind/kind-control-plane",
            "providerID scheme kind",
        ),
        ("k3s://node-1", "providerID scheme k3s"),
        ("vsphere://4201", "providerID scheme vsphere"),
        ("foo-cloud://x", "providerID scheme foo-cloud"),
        ("no-scheme", "providerID of 1 node not recognised"),
    ] {
        let c = ClusterInputs {
            nodes: vec![node("n", &[], &[], Some(id)), node("m", &[], &[], None)],
            ..Default::default()
        };
        let f = discover(&c).cloud_metadata.unwrap();
        assert!(f.values.is_empty(), "{id}");
        assert_eq!(
            f.message,
            Some(format!(
                "no cloud platform with a metadata service detected ({why})"
            )),
            "{id}"
        );
    }
}

#[test]
fn cloud_majority_wins_and_disagreement_is_reported() {
    let c = ClusterInputs {
        nodes: vec![
            node("a", &[], &[], Some("vsphere://1")),
            node("b", &[], &[], Some("gce://p/z/b")),
            node("c", &[], &[], Some("vsphere://2")),
            node("d", &[], &[], None),
        ],
        ..Default::default()
    };
    let f = discover(&c).cloud_metadata.unwrap();
    assert!(f.values.is_empty());
    assert_eq!(
        f.message.as_deref(),
        Some(
            "no cloud platform with a metadata service detected (providerID scheme vsphere); \
             nodes disagree on the platform: gce (1 node), vsphere (2 nodes); using vsphere"
        )
    );
    // A tie goes to the platform with a metadata service.
    let tie = ClusterInputs {
        nodes: vec![
            node("a", &[], &[], Some("k3s://x")),
            node("b", &[], &[], Some("openstack:///y")),
        ],
        ..Default::default()
    };
    let f = discover(&tie).cloud_metadata.unwrap();
    assert_eq!(f.values, s(&["169.254.169.254"]));
    assert_eq!(
        f.message.as_deref(),
        Some("nodes disagree on the platform: k3s (1 node), openstack (1 node); using openstack")
    );
    // Between two platforms with a metadata service, the first name wins.
    let tie = ClusterInputs {
        nodes: vec![
            node("a", &[], &[], Some("gce://p/z/a")),
            node("b", &[], &[], Some("aws:///z/b")),
        ],
        ..Default::default()
    };
    let f = discover(&tie).cloud_metadata.unwrap();
    assert_eq!(f.source.as_deref(), Some("Node.spec.providerID (aws)"));
}

#[test]
fn policy_entries_complete_cluster() {
    let p = policy_entries(&discover(&cluster()), &NoProxySpec::default());
    assert_eq!(p.missing, Vec::<String>::new());
    assert_eq!(
        p.entries,
        s(&[
            "10.100.0.1",
            "192.168.1.10",
            "192.168.1.11",
            "fd00:100::1",
            "api.prod.example.com",
            "10.100.0.0/16",
            "fd00:100::/108",
            "10.244.0.0/16",
            "fd00:244::/56",
            "fd00:1::a",
            ".svc",
            ".prod.internal",
            "169.254.169.254",
            "fd00:ec2::254",
            "localhost",
            "127.0.0.1",
            "::1",
        ])
    );
    for e in &p.entries {
        assert!(Intent::parse(e).is_ok(), "{e}");
    }
}

#[test]
fn discover_switches_and_overrides() {
    let facts = discover(&cluster());
    let spec = NoProxySpec {
        discover: DiscoverSpec {
            api_server: false,
            service_network: true,
            pod_network: false,
            node_addresses: false,
            cluster_domain: true,
        },
        cluster_domain: Some("Spec.Example.".into()),
        cloud_metadata: CloudMetadata::Omit,
        ..Default::default()
    };
    let p = policy_entries(&facts, &spec);
    assert_eq!(
        p.entries,
        s(&[
            "10.100.0.0/16",
            "fd00:100::/108",
            ".svc",
            ".spec.example",
            "localhost",
            "127.0.0.1",
            "::1"
        ])
    );
    // Disabled facts are not reported missing; the explicit domain is never missing.
    let p = policy_entries(&missing_all(), &spec);
    assert_eq!(p.missing.len(), 1, "{:?}", p.missing);
    assert!(p.missing[0].starts_with("serviceNetwork: "));
    assert!(p.entries.contains(&".spec.example".to_owned()));
}

#[test]
fn cloud_metadata_is_never_missing() {
    let mut c = cluster();
    c.nodes
        .iter_mut()
        .for_each(|n| n.provider_id = Some("kind://x".into()));
    let p = policy_entries(&discover(&c), &NoProxySpec::default());
    assert!(p.missing.is_empty(), "{:?}", p.missing);
    assert!(!p.entries.contains(&"169.254.169.254".to_owned()));
}

#[test]
fn facts_absent_or_invalid_are_reported_not_rendered() {
    let facts = DiscoveredFacts {
        api_server: Some(Fact {
            values: s(&["10.0.0.1", "not valid!"]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = policy_entries(&facts, &NoProxySpec::default());
    assert_eq!(
        p.entries,
        s(&["10.0.0.1", ".svc", "localhost", "127.0.0.1", "::1"])
    );
    assert_eq!(
        p.missing[0],
        "apiServer: \"not valid!\" is not a valid NO_PROXY entry"
    );
    assert_eq!(p.missing[1], "serviceNetwork: not discovered");
    assert_eq!(p.missing.len(), 5, "{:?}", p.missing);
}

#[test]
fn deterministic_under_input_reordering() {
    let a = cluster();
    let mut b = cluster();
    b.nodes.reverse();
    b.nodes.iter_mut().for_each(|n| {
        n.pod_cidrs.reverse();
        n.internal_ips.reverse();
    });
    b.kubernetes_service_ips.reverse();
    b.api_endpoints = vec![named("kubernetes", &["192.168.1.11", "192.168.1.10"])];
    b.service_cidrs[0].values.reverse();
    b.nodes
        .push(node("z", &["bad"], &["bad"], Some("kind://z")));
    let mut a2 = a.clone();
    a2.nodes
        .insert(0, node("z", &["bad"], &["bad"], Some("kind://z")));
    assert_eq!(discover(&a2), discover(&b));
    assert_eq!(
        policy_entries(&discover(&a), &NoProxySpec::default()),
        policy_entries(&discover(&b), &NoProxySpec::default())
    );
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[ -~]{0,24}",
            "(10|fd00|::1|a|\\.|/|:|svc\\.|\\[|\\]|\\{|\\}| |\n|kubernetes)+",
            "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}(/[0-9]{1,2})?",
        ]
    }

    proptest! {
        /// Garbage never panics, and every entry produced parses.
        #[test]
        fn arbitrary_inputs(
            host in proptest::option::of(text()),
            vals in proptest::collection::vec(text(), 0..4),
            doc in proptest::option::of(text()),
            provider in proptest::option::of(text()),
        ) {
            let c = ClusterInputs {
                api_host: host,
                kubernetes_service_ips: vals.clone(),
                kubernetes_service_found: true,
                api_endpoints: vec![NamedValues { name: "s".into(), values: vals.clone() }],
                service_cidrs: vec![NamedValues { name: "c".into(), values: vals.clone() }],
                kubeadm_config: doc.clone(),
                kubelet_config: doc.clone(),
                resolv_conf: doc.clone(),
                corefile: doc.clone(),
                nodes: vec![NodeInputs {
                    name: "n".into(),
                    pod_cidrs: vals.clone(),
                    internal_ips: vals.clone(),
                    provider_id: provider,
                    ovn_subnets: doc.clone(),
                    node_args: doc.clone().map(|raw| NodeArgs { annotation: "k3s.io/node-args".into(), raw }),
                }],
                platform: PlatformInputs {
                    openshift_network: Some(OpenShiftNetwork {
                        cluster_network: vals.clone(),
                        service_network: vals.clone(),
                    }),
                    openshift_api_internal_uri: vals.first().cloned(),
                    openshift_corefile: doc.clone(),
                    calico_ip_pools: Some(vec![NamedValues { name: "p".into(), values: vals.clone() }]),
                    cilium_nodes: Some(vec![NamedValues { name: "n".into(), values: vals.clone() }]),
                    cilium_config: Some(vals.iter().map(|v| ("cluster-pool-ipv4-cidr".to_owned(), v.clone())).collect()),
                    apiserver_pods: vec![NamedValues { name: "a".into(), values: vals.clone() }],
                    kube_dns_args: Some(vals.clone()),
                },
                overrides: Overrides { cluster_domain: vals.first().cloned(), ..Default::default() },
                namespaced_only: false,
            };
            let p = policy_entries(&discover(&c), &NoProxySpec::default());
            for e in &p.entries {
                prop_assert!(Intent::parse(e).is_ok(), "{}", e);
            }
        }
    }
}
