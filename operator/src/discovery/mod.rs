//! Cluster discovery (pure): inputs the controller already fetched → facts with their
//! sources → the NO_PROXY entries of one policy. A fact that is not found is reported as not
//! found with where it was looked for; it is never replaced by a textbook default.

mod candidate;
mod cloud;
#[cfg(test)]
mod distributions;
mod networks;
mod nodes;
pub(crate) mod platforms;
mod sources;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::api::reasons::reason;
use crate::api::{CloudMetadata, DiscoveredFacts, Fact, NoProxySpec};
use crate::noproxy::{Intent, NameScope};

/// Everything discovery reads, already fetched (plain data, no kube types).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterInputs {
    /// Host of the operator's own client URL (IP literal or DNS name, no port, no brackets).
    pub api_host: Option<String>,
    /// `default/kubernetes` Service spec.clusterIPs (empty if the Service is missing or headless).
    pub kubernetes_service_ips: Vec<String>,
    /// Whether the `default/kubernetes` Service exists at all.
    pub kubernetes_service_found: bool,
    /// Endpoint addresses from EndpointSlices labelled kubernetes.io/service-name=kubernetes in
    /// `default`, with the slice name.
    pub api_endpoints: Vec<NamedValues>,
    /// ServiceCIDR objects (networking.k8s.io/v1): name + spec.cidrs.
    pub service_cidrs: Vec<NamedValues>,
    /// kube-system/kubeadm-config data["ClusterConfiguration"].
    pub kubeadm_config: Option<String>,
    /// kube-system/kubelet-config data["kubelet"] (KubeletConfiguration YAML).
    pub kubelet_config: Option<String>,
    /// The operator's own /etc/resolv.conf (only read when running in-cluster).
    pub resolv_conf: Option<String>,
    /// kube-system/coredns data["Corefile"].
    pub corefile: Option<String>,
    pub nodes: Vec<NodeInputs>,
    /// What other distributions and network plugins publish.
    pub platform: PlatformInputs,
    /// Operator flags; each wins over the cluster when set.
    pub overrides: Overrides,
    /// A namespaced install (`run --namespace`): cluster-scoped objects (Nodes, ServiceCIDRs,
    /// the platforms' cluster configs) are not read, and facts not found say so.
    pub namespaced_only: bool,
}

/// Why a namespaced install lacks what only cluster-scoped objects hold.
pub(crate) const NAMESPACED_ONLY: &str =
    "not read: a namespaced install (run --namespace) reads nothing cluster-wide";

/// Sources of distributions and network plugins. `None` (or empty) where the API is not
/// served or the source is switched off; such a source is not named in "not found" messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformInputs {
    /// OpenShift `networks.config.openshift.io/cluster` (its status, else its spec).
    pub openshift_network: Option<OpenShiftNetwork>,
    /// OpenShift `infrastructures.config.openshift.io/cluster` status.apiServerInternalURI.
    pub openshift_api_internal_uri: Option<String>,
    /// `openshift-dns/dns-default` data["Corefile"] (the OpenShift DNS operator's CoreDNS).
    pub openshift_corefile: Option<String>,
    /// Calico `ippools.crd.projectcalico.org`: name and spec.cidr.
    pub calico_ip_pools: Option<Vec<NamedValues>>,
    /// Cilium `ciliumnodes.cilium.io`: name and spec.ipam.podCIDRs.
    pub cilium_nodes: Option<Vec<NamedValues>>,
    /// `kube-system/cilium-config` data.
    pub cilium_config: Option<std::collections::BTreeMap<String, String>>,
    /// The API server's static Pods in kube-system (`component=kube-apiserver` or
    /// `k8s-app=kube-apiserver`): name and command plus args.
    pub apiserver_pods: Vec<NamedValues>,
    /// The `kube-system/kube-dns` Deployment: its containers' command plus args.
    pub kube_dns_args: Option<Vec<String>>,
}

/// A discovery source of a distribution or network plugin, each switched on by default
/// (`run --disable-discovery-source`: the value names and help are these variants'). Each is
/// implemented once in `platforms/` ([`platforms::source`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum PlatformSource {
    /// OpenShift's Network and Infrastructure configs and its DNS operator's Corefile.
    Openshift,
    /// OVN-Kubernetes' `k8s.ovn.org/node-subnets` Node annotations.
    OvnKubernetes,
    /// Calico's IPPools (`crd.projectcalico.org/v1`).
    Calico,
    /// Cilium's CiliumNodes and `kube-system/cilium-config`.
    Cilium,
    /// The server arguments k3s and RKE2 record on Nodes.
    K3s,
    /// The kube-apiserver static Pods in kube-system (`--service-cluster-ip-range`).
    KubeApiserver,
    /// The `kube-system/kube-dns` Deployment (`--domain`).
    KubeDns,
}

/// The networks of OpenShift's cluster Network config.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenShiftNetwork {
    /// clusterNetwork[].cidr
    pub cluster_network: Vec<String>,
    /// serviceNetwork[]
    pub service_network: Vec<String>,
}

/// The arguments k3s or RKE2 recorded on a Node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeArgs {
    /// `k3s.io/node-args` or `rke2.io/node-args`.
    pub annotation: String,
    /// The annotation's value (a JSON array).
    pub raw: String,
}

/// A named object and the values read from it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NamedValues {
    pub name: String,
    pub values: Vec<String>,
}

/// The Node fields discovery reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInputs {
    pub name: String,
    pub pod_cidrs: Vec<String>,
    pub internal_ips: Vec<String>,
    pub provider_id: Option<String>,
    /// OVN-Kubernetes `k8s.ovn.org/node-subnets`, as written.
    pub ovn_subnets: Option<String>,
    /// k3s or RKE2 server arguments.
    pub node_args: Option<NodeArgs>,
}

/// Operator flags that override what the cluster says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub cluster_domain: Option<String>,
    pub service_cidrs: Vec<String>,
    pub pod_cidrs: Vec<String>,
    /// Sources switched off: not watched, and their Node annotations not read.
    pub disabled_sources: BTreeSet<PlatformSource>,
}

/// NO_PROXY entries one policy gets from the facts, and the enabled facts that are missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyEntries {
    /// Entries parseable by [`Intent::parse`] (deterministic order).
    pub entries: Vec<String>,
    /// One line per enabled fact that was not found (`"podNetwork: <where it looked>"`).
    /// Empty = complete.
    pub missing: Vec<String>,
}

const KUBEADM: &str = "ConfigMap kube-system/kubeadm-config";
const KUBELET: &str = "ConfigMap kube-system/kubelet-config";
const COREDNS: &str = "ConfigMap kube-system/coredns";

/// The six facts, every one `Some` (node subnets are a policy's, see [`node_subnets`]): sorted, deduplicated, canonical values and their source,
/// or empty values and a message saying where discovery looked.
pub fn discover(inputs: &ClusterInputs) -> DiscoveredFacts {
    let kubeadm = inputs
        .kubeadm_config
        .as_deref()
        .map(sources::kubeadm_networking);
    DiscoveredFacts {
        api_server: Some(api_server(inputs)),
        service_network: Some(networks::service_network(inputs, kubeadm.as_ref())),
        pod_network: Some(networks::pod_network(inputs, kubeadm.as_ref())),
        cluster_domain: Some(cluster_domain(inputs, kubeadm.as_ref())),
        node_addresses: Some(node_addresses(inputs)),
        node_subnets: None,
        cloud_metadata: Some(cloud::cloud_metadata(&inputs.nodes, inputs.namespaced_only)),
    }
}

pub use nodes::node_subnets;

/// The node entries: the covering subnets, or the addresses where a status written before
/// subnets has none.
fn node_entries(facts: &DiscoveredFacts) -> &Option<Fact> {
    match &facts.node_subnets {
        Some(_) => &facts.node_subnets,
        None => &facts.node_addresses,
    }
}

/// Why a policy has no NO_PROXY intents: a status condition reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoIntents {
    pub reason: &'static str,
    pub message: String,
}

/// The NO_PROXY intents of a policy from the discovered facts (the operator's at reconcile
/// time, or `status.discovered` read back by `render`): the facts' entries, then
/// `spec.noProxy.additional`. Entries are checked before missing facts are reported.
pub fn policy_intents(
    facts: &DiscoveredFacts,
    spec: &NoProxySpec,
) -> Result<Vec<Intent>, NoIntents> {
    let found = policy_entries(facts, spec);
    // Discovery only produces entries that parse (`PolicyEntries::entries`).
    let mut intents: Vec<Intent> = found
        .entries
        .iter()
        .filter_map(|e| Intent::parse(e).ok())
        .collect();
    for (n, e) in spec.additional.iter().enumerate() {
        match Intent::parse(e) {
            Ok(intent) => intents.push(intent),
            Err(err) => {
                return Err(NoIntents {
                    reason: reason::INVALID_NO_PROXY_ENTRY,
                    message: format!("spec.noProxy.additional[{n}] {e:?}: {err}"),
                });
            }
        }
    }
    if !found.missing.is_empty() {
        return Err(NoIntents {
            reason: reason::DISCOVERY_INCOMPLETE,
            message: format!(
                "not found: {}. Set the fact in spec.noProxy (clusterDomain) or as an operator flag, or turn its discovery off in spec.noProxy.discover",
                found.missing.join("; ")
            ),
        });
    }
    Ok(intents)
}

/// The entries one policy gets: for each enabled `discover` switch the fact's values
/// (`clusterDomain` gives `.svc` and `.<domain>`, where `spec.clusterDomain` wins over the
/// discovered one), the cloud metadata addresses when `cloudMetadata: Direct`, and always
/// `localhost`, `127.0.0.1`, `::1`. Cloud metadata is never reported missing.
pub fn policy_entries(facts: &DiscoveredFacts, spec: &NoProxySpec) -> PolicyEntries {
    let d = &spec.discover;
    let mut out = EntryList::default();
    let plain = [
        (d.api_server, "apiServer", &facts.api_server),
        (d.service_network, "serviceNetwork", &facts.service_network),
        (d.pod_network, "podNetwork", &facts.pod_network),
        (d.node_addresses, "nodeAddresses", node_entries(facts)),
    ];
    for (enabled, name, fact) in plain {
        if enabled {
            out.fact(name, fact.as_ref(), "", true);
        }
    }
    if d.cluster_domain {
        out.push("clusterDomain", ".svc");
        let explicit = spec.cluster_domain.as_deref().map(str::trim);
        match explicit.filter(|s| !s.is_empty()) {
            Some(raw) => match valid_name(raw) {
                Some(domain) => out.push("clusterDomain", &format!(".{domain}")),
                None => out.missing.push(format!(
                    "clusterDomain: spec.noProxy.clusterDomain {raw:?} is not a valid domain"
                )),
            },
            None => out.fact("clusterDomain", facts.cluster_domain.as_ref(), ".", true),
        }
    }
    if spec.cloud_metadata == CloudMetadata::Direct {
        out.fact("cloudMetadata", facts.cloud_metadata.as_ref(), "", false);
    }
    for lo in ["localhost", "127.0.0.1", "::1"] {
        out.push("loopback", lo);
    }
    PolicyEntries {
        entries: out.entries,
        missing: out.missing,
    }
}

#[derive(Default)]
struct EntryList {
    entries: Vec<String>,
    seen: HashSet<String>,
    missing: Vec<String>,
}

impl EntryList {
    fn push(&mut self, fact: &str, entry: &str) {
        if Intent::parse(entry).is_err() {
            self.missing
                .push(format!("{fact}: {entry:?} is not a valid NO_PROXY entry"));
        } else if self.seen.insert(entry.to_owned()) {
            self.entries.push(entry.to_owned());
        }
    }

    fn fact(&mut self, name: &str, fact: Option<&Fact>, prefix: &str, required: bool) {
        let values = fact.map(|f| f.values.as_slice()).unwrap_or_default();
        for v in values {
            self.push(name, &format!("{prefix}{v}"));
        }
        if values.is_empty() && required {
            let why = fact.and_then(|f| f.message.as_deref());
            self.missing
                .push(format!("{name}: {}", why.unwrap_or("not discovered")));
        }
    }
}

/// An IP address or a host name; IPs sort first (by address), then names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(ip) => ip.fmt(f),
            Host::Name(n) => f.write_str(n),
        }
    }
}

fn parse_ip(raw: &str) -> Option<IpAddr> {
    let s = raw.trim();
    let s = s
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(s);
    s.parse().ok()
}

fn parse_host(raw: &str) -> Option<Host> {
    parse_ip(raw)
        .map(Host::Ip)
        .or_else(|| valid_name(raw).map(Host::Name))
}

fn parse_cidr(raw: &str) -> Option<IpNet> {
    raw.trim().parse::<IpNet>().ok().map(|n| n.trunc())
}

/// A host or domain name, lowercase, without trailing dot; `None` if it is not one (IPs,
/// wildcards, ports and malformed names are rejected).
fn valid_name(raw: &str) -> Option<String> {
    match Intent::parse(raw.trim()) {
        Ok(Intent::Name {
            name,
            scope: NameScope::Host,
            port: None,
        }) => Some(name),
        _ => None,
    }
}

/// Invalid input values, reported in the fact's message (at most [`Skipped::SHOWN`] listed).
#[derive(Default)]
struct Skipped(Vec<String>);

impl Skipped {
    const SHOWN: usize = 5;

    fn add(&mut self, what: &str, value: &str) {
        let short: String = value.chars().take(64).collect();
        self.0.push(format!("{what} {short:?}"));
    }

    /// Sorted, so that the message does not depend on the order of the inputs.
    fn note(&self) -> Option<String> {
        let mut all = self.0.clone();
        all.sort();
        all.dedup();
        if all.is_empty() {
            return None;
        }
        let mut s = format!(
            "skipped invalid values: {}",
            all[..all.len().min(Self::SHOWN)].join(", ")
        );
        if all.len() > Self::SHOWN {
            s.push_str(&format!(" and {} more", all.len() - Self::SHOWN));
        }
        Some(s)
    }
}

fn found<T: ToString>(values: impl IntoIterator<Item = T>, source: String, sk: &Skipped) -> Fact {
    Fact {
        values: values.into_iter().map(|v| v.to_string()).collect(),
        source: Some(source),
        message: sk.note(),
    }
}

fn not_found(message: String, sk: &Skipped) -> Fact {
    let message = match sk.note() {
        Some(n) => format!("{message}; {n}"),
        None => message,
    };
    Fact {
        values: Vec::new(),
        source: None,
        message: Some(message),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Valid CIDRs of `raws` into `into`; invalid ones go to `sk`. True if any was valid.
fn add_cidrs(raws: &[String], what: &str, into: &mut BTreeSet<IpNet>, sk: &mut Skipped) -> bool {
    let mut any = false;
    for raw in raws.iter().flat_map(|r| r.split(',')) {
        if raw.trim().is_empty() {
            continue;
        }
        match parse_cidr(raw) {
            Some(net) => {
                into.insert(net);
                any = true;
            }
            None => sk.add(what, raw.trim()),
        }
    }
    any
}

fn sorted_by_name(v: &[NamedValues]) -> Vec<&NamedValues> {
    let mut v: Vec<&NamedValues> = v.iter().collect();
    v.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.values.cmp(&b.values)));
    v
}

fn api_server(inp: &ClusterInputs) -> Fact {
    let mut sk = Skipped::default();
    let mut values = BTreeSet::new();
    let mut from = Vec::new();
    let mut add = |raw: &str, what: &str, ip_only: bool, sk: &mut Skipped| {
        let host = if ip_only {
            parse_ip(raw).map(Host::Ip)
        } else {
            parse_host(raw)
        };
        match host {
            Some(h) => {
                values.insert(h);
                true
            }
            None => {
                sk.add(what, raw);
                false
            }
        }
    };
    let svc = "Service default/kubernetes";
    let mut any = false;
    for ip in &inp.kubernetes_service_ips {
        any |= add(ip, &format!("{svc} clusterIP"), true, &mut sk);
    }
    if any {
        from.push(svc.to_owned());
    }
    for slice in sorted_by_name(&inp.api_endpoints) {
        let what = format!("EndpointSlice default/{}", slice.name);
        let mut any = false;
        for a in &slice.values {
            any |= add(a, &format!("{what} address"), false, &mut sk);
        }
        if any {
            from.push(what);
        }
    }
    if let Some(h) = inp.api_host.as_deref()
        && add(h, "client config host", false, &mut sk)
    {
        from.push("client config host".to_owned());
    }
    for id in platforms::all() {
        for (what, host) in platforms::source(id).api_server(inp) {
            if add(&host, &what, false, &mut sk) {
                from.push(what);
            }
        }
    }
    if !values.is_empty() {
        return found(values, from.join(", "), &sk);
    }
    let service = if !inp.kubernetes_service_found {
        format!("{svc} not found")
    } else {
        format!("{svc} has no ClusterIP")
    };
    let slices = if inp.api_endpoints.is_empty() {
        "no EndpointSlice labelled kubernetes.io/service-name=kubernetes in default"
    } else {
        "its EndpointSlices have no address"
    };
    let host = if inp.api_host.is_none() {
        "the client config has no host"
    } else {
        "the client config host is not valid"
    };
    not_found(join_and(&[service, slices.into(), host.into()]), &sk)
}

/// How the kubeadm ClusterConfiguration lacks a field, for "not found" messages.
fn kubeadm_lacks(kubeadm: Option<&Result<sources::Kubeadm, String>>, field: &str) -> String {
    match kubeadm {
        None => format!("{KUBEADM} not found"),
        Some(Err(e)) => format!("{KUBEADM} {e}"),
        Some(Ok(_)) => format!("{KUBEADM} has no valid networking.{field}"),
    }
}

fn cluster_domain(inp: &ClusterInputs, kubeadm: Option<&Result<sources::Kubeadm, String>>) -> Fact {
    use candidate::Domain::{self, Found, Looked};
    use candidate::rank;
    let mut ranked: Vec<candidate::Ranked<Domain>> = Vec::new();
    let flag = inp.overrides.cluster_domain.as_deref().map(str::trim);
    if let Some(f) = flag.filter(|f| !f.is_empty()) {
        ranked.push((
            rank::FLAG,
            Found("flag --cluster-domain".into(), Some(f.to_owned())),
        ));
    }
    let kubelet = match inp
        .kubelet_config
        .as_deref()
        .map(sources::kubelet_cluster_domain)
    {
        None => Looked(format!("{KUBELET} not found")),
        Some(Err(e)) => Looked(format!("{KUBELET} {e}")),
        Some(Ok(None)) => Looked(format!("{KUBELET} has no clusterDomain")),
        Some(Ok(d)) => Found(KUBELET.into(), d),
    };
    ranked.push((rank::KUBELET, kubelet));
    let resolv = match inp.resolv_conf.as_deref().map(sources::resolv_conf_domain) {
        None => Looked("/etc/resolv.conf was not read (not running in a Pod)".into()),
        Some(None) => Looked("the /etc/resolv.conf search path has no svc.<domain>".into()),
        Some(d) => Found("/etc/resolv.conf search path".into(), d),
    };
    ranked.push((rank::RESOLV_CONF, resolv));
    let coredns = match inp.corefile.as_deref().map(sources::corefile_zone) {
        None => Looked(format!("{COREDNS} not found or has no Corefile")),
        Some(None) => Looked(format!("the {COREDNS} Corefile has no kubernetes zone")),
        Some(d) => Found(format!("{COREDNS} Corefile"), d),
    };
    ranked.push((rank::COREDNS, coredns));
    for id in platforms::all() {
        ranked.extend(platforms::source(id).cluster_domain(inp));
    }
    let kubeadm = match kubeadm {
        Some(Ok(k)) if k.dns_domain.is_some() => Found(KUBEADM.into(), k.dns_domain.clone()),
        other => Looked(kubeadm_lacks(other, "dnsDomain")),
    };
    ranked.push((rank::KUBEADM, kubeadm));
    ranked.sort_by_key(|(rank, _)| *rank);
    let mut sk = Skipped::default();
    let mut looked = Vec::new();
    let mut candidates = Vec::new();
    for (_, c) in ranked {
        match c {
            Found(source, raw) => candidates.push((source, raw)),
            Looked(l) => looked.push(l),
        }
    }
    for (source, raw) in candidates {
        let raw = raw.unwrap_or_default();
        match valid_name(&raw) {
            Some(domain) => return found([domain], source, &sk),
            None => sk.add(&source, &raw),
        }
    }
    if looked.is_empty() {
        looked.push("no source gave a valid cluster domain".into());
    }
    let msg = format!(
        "{} (set --cluster-domain or spec.noProxy.clusterDomain)",
        join_and(&looked)
    );
    not_found(msg, &sk)
}

fn node_addresses(inp: &ClusterInputs) -> Fact {
    let mut sk = Skipped::default();
    let mut ips = BTreeSet::new();
    let mut count = 0;
    for node in &inp.nodes {
        let mut any = false;
        for raw in &node.internal_ips {
            match parse_ip(raw) {
                Some(ip) => {
                    ips.insert(ip);
                    any = true;
                }
                None => sk.add(&format!("Node/{} InternalIP", node.name), raw),
            }
        }
        count += usize::from(any);
    }
    if ips.is_empty() && inp.namespaced_only {
        let m = format!(
            "Nodes {NAMESPACED_ONLY}; turn spec.noProxy.discover.nodeAddresses off and list the nodes' networks in spec.noProxy.additional"
        );
        return not_found(m, &sk);
    }
    if ips.is_empty() {
        return not_found("no Node has an InternalIP in status.addresses".into(), &sk);
    }
    let source = format!(
        "Node.status.addresses InternalIP ({})",
        plural(count, "node")
    );
    found(ips, source, &sk)
}
