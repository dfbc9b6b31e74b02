//! Parsers for the configuration texts discovery reads: kubeadm ClusterConfiguration,
//! KubeletConfiguration, resolv.conf and the CoreDNS Corefile. Values come back raw (the
//! caller validates them); YAML errors say where, never what (no content is echoed).

use serde_yaml_ng::Value;

/// The `networking` fields of a kubeadm ClusterConfiguration.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Kubeadm {
    pub service_subnet: Option<String>,
    pub pod_subnet: Option<String>,
    pub dns_domain: Option<String>,
}

fn yaml(text: &str, key: &str) -> Result<Value, String> {
    serde_yaml_ng::from_str(text).map_err(|e| match e.location() {
        Some(l) => format!(
            "{key} is not valid YAML (line {}, column {})",
            l.line(),
            l.column()
        ),
        None => format!("{key} is not valid YAML"),
    })
}

fn string_at(v: &Value, path: &[&str]) -> Option<String> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    cur.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// `networking.serviceSubnet`, `podSubnet` and `dnsDomain` of a ClusterConfiguration.
pub(super) fn kubeadm_networking(text: &str) -> Result<Kubeadm, String> {
    let doc = yaml(text, "ClusterConfiguration")?;
    Ok(Kubeadm {
        service_subnet: string_at(&doc, &["networking", "serviceSubnet"]),
        pod_subnet: string_at(&doc, &["networking", "podSubnet"]),
        dns_domain: string_at(&doc, &["networking", "dnsDomain"]),
    })
}

/// `clusterDomain` of a KubeletConfiguration.
pub(super) fn kubelet_cluster_domain(text: &str) -> Result<Option<String>, String> {
    Ok(string_at(&yaml(text, "kubelet")?, &["clusterDomain"]))
}

/// The cluster domain from the pod search path kubelet writes
/// (`<ns>.svc.<domain> svc.<domain> <domain>`): the part after `svc.`. The last
/// `search`/`domain` line wins, as in the resolver.
pub(super) fn resolv_conf_domain(text: &str) -> Option<String> {
    let search = text
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("search" | "domain") => Some(words.collect::<Vec<_>>()),
                _ => None,
            }
        })
        .next_back()?;
    search
        .iter()
        .find_map(|w| w.strip_prefix("svc."))
        .map(str::to_owned)
}

/// The first forward zone of the `kubernetes` plugin (`kubernetes cluster.local in-addr.arpa
/// ip6.arpa {`); without zones on the plugin line, the zones of its server block.
pub(super) fn corefile_zone(text: &str) -> Option<String> {
    // Corefile blocks, named once so that the nesting below reads as what it counts.
    const OPEN: char = '{';
    const CLOSE: char = '}';
    let mut depth = 0usize;
    let mut block_zones: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let head = line.split(OPEN).next().unwrap_or_default();
        let words: Vec<&str> = head.split_whitespace().collect();
        if depth == 0 && line.contains(OPEN) {
            block_zones = words.iter().map(|w| server_key_zone(w)).collect();
        }
        if depth == 1 && words.first() == Some(&"kubernetes") {
            let own: Vec<String> = words[1..].iter().map(|w| (*w).to_owned()).collect();
            let zones = if own.is_empty() { &block_zones } else { &own };
            let forward = zones.iter().find(|z| is_forward_zone(z));
            if let Some(z) = forward {
                return Some(z.clone());
            }
        }
        depth += line.matches(OPEN).count();
        depth = depth.saturating_sub(line.matches(CLOSE).count());
    }
    None
}

/// `dns://cluster.local:53` → `cluster.local`.
fn server_key_zone(key: &str) -> String {
    let key = key.split_once("://").map_or(key, |(_, rest)| rest);
    match key.rsplit_once(':') {
        Some((zone, port)) if port.bytes().all(|b| b.is_ascii_digit()) => zone.to_owned(),
        _ => key.to_owned(),
    }
}

fn is_forward_zone(zone: &str) -> bool {
    let z = zone.trim_end_matches('.').to_ascii_lowercase();
    !(z.is_empty() || z == "arpa" || z.ends_with(".arpa") || z.contains('/'))
}

/// Every value of `flag` in a command line, as `--flag=value` or `--flag value`.
pub(super) fn flag_values(args: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut words = args.iter().map(|a| a.trim());
    while let Some(word) = words.next() {
        if word == flag {
            out.extend(words.next().map(str::to_owned));
        } else if let Some(v) = word.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            out.push(v.to_owned());
        }
    }
    out
}

/// The arguments k3s and RKE2 record on each Node (`k3s.io/node-args`, `rke2.io/node-args`):
/// a JSON array of strings.
pub(super) fn node_args(raw: &str) -> Result<Vec<String>, String> {
    serde_json::from_str(raw).map_err(|_| "is not a JSON array of strings".to_owned())
}

/// The default network's subnets of an OVN-Kubernetes `k8s.ovn.org/node-subnets` annotation:
/// `{"default":["10.128.0.0/23"]}`, or a single string (`{"default":"10.128.0.0/23"}`) as
/// older releases write it.
pub(super) fn ovn_node_subnets(raw: &str) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Subnets {
        One(String),
        Many(Vec<String>),
    }
    let all: std::collections::BTreeMap<String, Subnets> =
        serde_json::from_str(raw).map_err(|_| "is not a JSON object of subnets".to_owned())?;
    match all.get("default") {
        Some(Subnets::One(s)) => Ok(vec![s.clone()]),
        Some(Subnets::Many(v)) => Ok(v.clone()),
        None => Err("has no default network".to_owned()),
    }
}

/// The host of a URL such as OpenShift's `apiServerInternalURI` (`https://api-int.x:6443`).
pub(super) fn url_host(raw: &str) -> Option<String> {
    let url = url::Url::parse(raw.trim()).ok()?;
    let host = url.host_str()?;
    Some(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned(),
    )
}
