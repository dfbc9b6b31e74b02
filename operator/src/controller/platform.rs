//! Discovery sources of distributions and network plugins: the fields read from their objects
//! (typed here, only what discovery reads), whether the cluster serves them, and their caches.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::channel::mpsc;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, CustomResource, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;

use super::objects::strip;
use super::watches::{by_name, cache, config, ping};
use crate::discovery::{NamedValues, OpenShiftNetwork, PlatformInputs, PlatformSource};
use crate::metrics::Metrics;

/// OpenShift's cluster network configuration (`networks.config.openshift.io`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(group = "config.openshift.io", version = "v1", kind = "Network")]
#[kube(schema = "disabled", status = "NetworkStatus")]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    #[serde(default)]
    pub cluster_network: Vec<ClusterNetworkEntry>,
    #[serde(default)]
    pub service_network: Vec<String>,
}

/// The network OpenShift runs (the status), as configured (the spec).
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    #[serde(default)]
    pub cluster_network: Vec<ClusterNetworkEntry>,
    #[serde(default)]
    pub service_network: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct ClusterNetworkEntry {
    #[serde(default)]
    pub cidr: String,
}

/// OpenShift's infrastructure description (`infrastructures.config.openshift.io`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(group = "config.openshift.io", version = "v1", kind = "Infrastructure")]
#[kube(schema = "disabled", status = "InfrastructureStatus")]
pub struct InfrastructureSpec {}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureStatus {
    #[serde(default, rename = "apiServerInternalURI")]
    pub api_server_internal_uri: Option<String>,
}

/// Calico's IP pools (`ippools.crd.projectcalico.org`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(group = "crd.projectcalico.org", version = "v1", kind = "IPPool")]
#[kube(schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct IPPoolSpec {
    #[serde(default)]
    pub cidr: String,
    /// No new addresses are given from a disabled pool.
    #[serde(default)]
    pub disabled: bool,
    /// What the pool's addresses are for; absent means `Workload` and `Tunnel`.
    #[serde(default)]
    pub allowed_uses: Option<Vec<String>>,
}

impl IPPoolSpec {
    /// Whether Pods get addresses from this pool.
    fn for_pods(&self) -> bool {
        let uses = self.allowed_uses.as_ref();
        !self.disabled && uses.is_none_or(|u| u.iter().any(|x| x == "Workload"))
    }
}

/// Cilium's per-node state (`ciliumnodes.cilium.io`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default)]
#[kube(group = "cilium.io", version = "v2", kind = "CiliumNode")]
#[kube(schema = "disabled")]
pub struct CiliumNodeSpec {
    #[serde(default)]
    pub ipam: CiliumIpam,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
pub struct CiliumIpam {
    #[serde(default, rename = "podCIDRs")]
    pub pod_cidrs: Vec<String>,
}

/// The caches of the platform sources that are switched on and served.
#[derive(Clone, Default)]
pub(crate) struct PlatformCaches {
    networks: Option<Store<Network>>,
    infrastructures: Option<Store<Infrastructure>>,
    ip_pools: Option<Store<IPPool>>,
    cilium_nodes: Option<Store<CiliumNode>>,
    config_maps: Vec<Store<ConfigMap>>,
    /// One cache per label the distributions give the API server's static Pods.
    apiserver_pods: Vec<Store<Pod>>,
    kube_dns: Option<Store<Deployment>>,
}

/// Whether the cluster serves `K`, asked of API discovery (readable by every authenticated
/// user): a list would answer 403 before 404 where RBAC names the objects, as for OpenShift's
/// configs. A discovery error counts as not served, and says so.
async fn served<K>(client: &Client) -> bool
where
    K: Resource<DynamicType = ()>,
{
    let (group_version, plural) = (K::api_version(&()), K::plural(&()));
    match client.list_api_group_resources(&group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == plural),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            let error = super::errors::describe(&e);
            tracing::info!(%group_version, %error, "discovery source not read: API discovery failed");
            false
        }
    }
}

/// Whether the operator may read the ConfigMap `ns/name`: where the chart could not tell that
/// a namespace exists (OpenShift's `openshift-dns` under `helm template`), its Role may be
/// missing, and a watch would then be refused for ever.
async fn readable(client: &Client, ns: &str, name: &str) -> bool {
    match Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
    {
        Ok(_) => true,
        Err(e) => {
            let error = super::errors::describe(&e);
            tracing::info!(configmap = %format!("{ns}/{name}"), %error, "discovery source not read");
            false
        }
    }
}

/// The pieces [`start`] needs from the caller.
pub(crate) struct Start<'a> {
    pub tasks: &'a mut JoinSet<()>,
    pub metrics: &'a Arc<Metrics>,
    pub client: &'a Client,
    pub changed: &'a [mpsc::UnboundedSender<()>],
    pub disabled: &'a BTreeSet<PlatformSource>,
    /// False for a namespaced install: the CRD sources (all cluster-scoped) are not read.
    pub cluster_wide: bool,
}

/// Starts a cache for each source that is switched on and, for CRDs, served. A CRD installed
/// later is read after the operator restarts.
pub(crate) async fn start(s: Start<'_>) -> PlatformCaches {
    let on = |src| !s.disabled.contains(&src);
    let mut out = PlatformCaches::default();
    // A namespaced install has no right to the CRDs' objects (all cluster-scoped): not read.
    let wide = s.cluster_wide;
    macro_rules! crd {
        ($ty:ty, $cfg:expr) => {{
            let api = Api::<$ty>::all(s.client.clone());
            let events = watcher(api, $cfg);
            Some(cache(s.tasks, s.metrics, events, strip, ping(s.changed)))
        }};
    }
    if on(PlatformSource::Openshift) && served::<Network>(s.client).await {
        if wide {
            out.networks = crd!(Network, by_name("cluster"));
            out.infrastructures = crd!(Infrastructure, by_name("cluster"));
        }
        if readable(s.client, "openshift-dns", "dns-default").await {
            let dns = Api::<ConfigMap>::namespaced(s.client.clone(), "openshift-dns");
            let events = watcher(dns, by_name("dns-default"));
            out.config_maps
                .push(cache(s.tasks, s.metrics, events, strip, ping(s.changed)));
        }
    }
    if on(PlatformSource::Calico) && wide && served::<IPPool>(s.client).await {
        out.ip_pools = crd!(IPPool, config());
    }
    if on(PlatformSource::Cilium) {
        if wide && served::<CiliumNode>(s.client).await {
            out.cilium_nodes = crd!(CiliumNode, config());
        }
        let ks = Api::<ConfigMap>::namespaced(s.client.clone(), "kube-system");
        let events = watcher(ks, by_name("cilium-config"));
        out.config_maps
            .push(cache(s.tasks, s.metrics, events, strip, ping(s.changed)));
    }
    let ks_pods = Api::<Pod>::namespaced(s.client.clone(), "kube-system");
    if on(PlatformSource::KubeApiserver) {
        for label in APISERVER_LABELS {
            let events = watcher(ks_pods.clone(), config().labels(label));
            let pods = cache(s.tasks, s.metrics, events, strip_pod, ping(s.changed));
            out.apiserver_pods.push(pods);
        }
    }
    if on(PlatformSource::KubeDns) {
        let api = Api::<Deployment>::namespaced(s.client.clone(), "kube-system");
        let events = watcher(api, by_name("kube-dns"));
        out.kube_dns = Some(cache(
            s.tasks,
            s.metrics,
            events,
            strip_deployment,
            ping(s.changed),
        ));
    }
    out
}

/// Keeps only a Pod's containers' command and args.
fn strip_pod(p: &mut Pod) {
    strip(p);
    p.status = None;
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes = None;
        spec.init_containers = None;
        spec.ephemeral_containers = None;
        for c in &mut spec.containers {
            *c = k8s_openapi::api::core::v1::Container {
                name: std::mem::take(&mut c.name),
                command: c.command.take(),
                args: c.args.take(),
                ..Default::default()
            };
        }
    }
}

/// Keeps only a Deployment's containers' command and args.
fn strip_deployment(d: &mut Deployment) {
    strip(d);
    d.status = None;
    if let Some(spec) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        spec.volumes = None;
        spec.init_containers = None;
        for c in &mut spec.containers {
            *c = k8s_openapi::api::core::v1::Container {
                name: std::mem::take(&mut c.name),
                command: c.command.take(),
                args: c.args.take(),
                ..Default::default()
            };
        }
    }
}

impl PlatformCaches {
    /// Every store, for waiting until each has listed once.
    pub(crate) async fn wait_ready(&self) {
        macro_rules! wait {
            ($($s:expr),*) => {$(if let Some(s) = &$s { let _ = s.wait_until_ready().await; })*};
        }
        wait!(
            self.networks,
            self.infrastructures,
            self.ip_pools,
            self.cilium_nodes
        );
        wait!(self.kube_dns);
        for s in &self.config_maps {
            let _ = s.wait_until_ready().await;
        }
        for s in &self.apiserver_pods {
            let _ = s.wait_until_ready().await;
        }
    }

    /// What the caches hold, as discovery inputs.
    pub(crate) fn inputs(&self) -> PlatformInputs {
        let cm = |ns: &str, name: &str| {
            let all = self.config_maps.iter().flat_map(|s| s.state());
            let mut found =
                all.filter(|c| c.name_any() == name && c.namespace().as_deref() == Some(ns));
            found.next().and_then(|c| c.data.clone())
        };
        PlatformInputs {
            openshift_network: self.networks.as_ref().and_then(openshift_network),
            openshift_api_internal_uri: self.infrastructures.as_ref().and_then(|s| {
                let infra = s.state().into_iter().find(|i| i.name_any() == "cluster")?;
                infra.status.as_ref()?.api_server_internal_uri.clone()
            }),
            openshift_corefile: cm("openshift-dns", "dns-default")
                .and_then(|d| d.get("Corefile").cloned()),
            calico_ip_pools: self.ip_pools.as_ref().map(|s| {
                let pools: Vec<Arc<IPPool>> = s
                    .state()
                    .into_iter()
                    .filter(|p| p.spec.for_pods())
                    .collect();
                named(&pools, |p| vec![p.spec.cidr.clone()])
            }),
            cilium_nodes: self
                .cilium_nodes
                .as_ref()
                .map(|s| named(&s.state(), |n| n.spec.ipam.pod_cidrs.clone())),
            cilium_config: cm("kube-system", "cilium-config"),
            apiserver_pods: apiserver_pods(&self.apiserver_pods),
            kube_dns_args: self.kube_dns.as_ref().and_then(|s| {
                let d = s.state().into_iter().find(|d| d.name_any() == "kube-dns")?;
                let spec = d.spec.as_ref()?.template.spec.as_ref();
                Some(pod_command(spec))
            }),
        }
    }
}

/// How distributions label the API server's static Pods: kubeadm (and most others)
/// `component=kube-apiserver`, Talos `k8s-app=kube-apiserver`.
const APISERVER_LABELS: [&str; 2] = ["component=kube-apiserver", "k8s-app=kube-apiserver"];

/// The static Pods of every label, each once (a Pod may carry both labels).
fn apiserver_pods(caches: &[Store<Pod>]) -> Vec<NamedValues> {
    let mut pods: Vec<Arc<Pod>> = caches.iter().flat_map(|s| s.state()).collect();
    pods.sort_by_key(|p| p.name_any());
    pods.dedup_by_key(|p| p.name_any());
    named(&pods, |p| pod_command(p.spec.as_ref()))
}

/// `status` (what runs), else `spec` (what was asked for) of the `cluster` Network.
fn openshift_network(s: &Store<Network>) -> Option<OpenShiftNetwork> {
    let n = s.state().into_iter().find(|n| n.name_any() == "cluster")?;
    Some(network_of(&n))
}

/// Each field from the status (what runs) where it is set, else from the spec (what was
/// asked for, before the network operator reported).
fn network_of(n: &Network) -> OpenShiftNetwork {
    let status = n.status.clone().unwrap_or_default();
    let cluster = if status.cluster_network.is_empty() {
        &n.spec.cluster_network
    } else {
        &status.cluster_network
    };
    let service = if status.service_network.is_empty() {
        &n.spec.service_network
    } else {
        &status.service_network
    };
    OpenShiftNetwork {
        cluster_network: cluster.iter().map(|c| c.cidr.clone()).collect(),
        service_network: service.clone(),
    }
}

/// Every container's command then args, in order.
fn pod_command(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> Vec<String> {
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    containers
        .iter()
        .flat_map(|c| {
            let cmd = c.command.iter().flatten();
            cmd.chain(c.args.iter().flatten()).cloned()
        })
        .collect()
}

fn named<K: Resource>(objects: &[Arc<K>], values: impl Fn(&K) -> Vec<String>) -> Vec<NamedValues> {
    let mut out: Vec<NamedValues> = objects
        .iter()
        .map(|o| NamedValues {
            name: o.meta().name.clone().unwrap_or_default(),
            values: values(o).into_iter().filter(|v| !v.is_empty()).collect(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openshift_network_status_wins_field_by_field() {
        let n: Network = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Network",
            "metadata": {"name": "cluster"},
            "spec": {"clusterNetwork": [{"cidr": "10.128.0.0/14", "hostPrefix": 23}],
                     "serviceNetwork": ["172.30.0.0/16"]},
            "status": {"clusterNetwork": [{"cidr": "10.132.0.0/14", "hostPrefix": 23}]}
        }))
        .unwrap();
        let got = network_of(&n);
        assert_eq!(got.cluster_network, ["10.132.0.0/14"]);
        assert_eq!(got.service_network, ["172.30.0.0/16"]);
    }

    #[test]
    fn calico_pools_that_give_pods_no_addresses_are_not_the_pod_network() {
        let pool = |spec: serde_json::Value| serde_json::from_value::<IPPoolSpec>(spec).unwrap();
        assert!(pool(json!({"cidr": "10.244.0.0/16"})).for_pods());
        assert!(pool(json!({"cidr": "10.244.0.0/16", "allowedUses": ["Workload"]})).for_pods());
        assert!(!pool(json!({"cidr": "192.168.0.0/16", "disabled": true})).for_pods());
        let lb = json!({"cidr": "10.9.0.0/24", "allowedUses": ["LoadBalancer"]});
        assert!(!pool(lb).for_pods());
    }
}
