//! OpenShift: the cluster Network config (Service and Pod networks), the Infrastructure
//! config (the API server's internal address) and its DNS operator's Corefile (the cluster
//! domain). Read only where `config.openshift.io/v1` serves `networks`.

use kube::core::DynamicObject;
use serde::Deserialize;

use super::{
    DiscoverySource, Object, Select, Watched, When, config_map_data, find, keep_all, keep_data,
};
use crate::discovery::candidate::{Candidate, Domain, Label, Ranked};
use crate::discovery::{ClusterInputs, OpenShiftNetwork, PlatformInputs, sources};

const OPENSHIFT_NETWORK: &str = "Network.config.openshift.io/cluster";
const OPENSHIFT_DNS: &str = "ConfigMap openshift-dns/dns-default";
/// Before the API server's static Pods; the Pod network before every network plugin.
const RANK: u8 = 20;
/// After the cluster's own DNS configs.
const DOMAIN_RANK: u8 = 40;

pub(super) struct Openshift;

const NETWORK: Object = Object {
    group: "config.openshift.io",
    version: "v1",
    kind: "Network",
    resource: "networks",
    namespace: None,
    select: Select::Name("cluster"),
    when: When::Always,
    keep: keep_all,
};

const OBJECTS: [Object; 3] = [
    NETWORK,
    Object {
        group: "config.openshift.io",
        version: "v1",
        kind: "Infrastructure",
        resource: "infrastructures",
        namespace: None,
        select: Select::Name("cluster"),
        when: When::Always,
        keep: keep_all,
    },
    // Its Role is rendered only where the chart sees OpenShift (not under `helm template`).
    Object {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        resource: "configmaps",
        namespace: Some("openshift-dns"),
        select: Select::Name("dns-default"),
        when: When::Readable,
        keep: keep_data,
    },
];

impl DiscoverySource for Openshift {
    fn objects(&self) -> &'static [Object] {
        &OBJECTS
    }

    fn requires(&self) -> Option<&'static Object> {
        Some(&NETWORK)
    }

    fn read(&self, watched: &[Watched], into: &mut PlatformInputs) {
        into.openshift_network = find(watched[0].as_ref(), "cluster").map(network_of);
        into.openshift_api_internal_uri = find(watched[1].as_ref(), "cluster").and_then(|i| {
            let uri = i.data.get("status")?.get("apiServerInternalURI")?;
            uri.as_str().map(str::to_owned)
        });
        into.openshift_corefile = find(watched[2].as_ref(), "dns-default")
            .and_then(config_map_data)
            .and_then(|d| d.get("Corefile").cloned());
    }

    fn service_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        let Some(net) = &inp.platform.openshift_network else {
            return Vec::new();
        };
        vec![(RANK, network(net.service_network.clone(), "serviceNetwork"))]
    }

    fn pod_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        let Some(net) = &inp.platform.openshift_network else {
            return Vec::new();
        };
        vec![(RANK, network(net.cluster_network.clone(), "clusterNetwork"))]
    }

    fn cluster_domain(&self, inp: &ClusterInputs) -> Vec<Ranked<Domain>> {
        let Some(corefile) = inp.platform.openshift_corefile.as_deref() else {
            return Vec::new();
        };
        let d = match sources::corefile_zone(corefile) {
            None => Domain::Looked(format!(
                "the {OPENSHIFT_DNS} Corefile has no kubernetes zone"
            )),
            d => Domain::Found(format!("{OPENSHIFT_DNS} Corefile"), d),
        };
        vec![(DOMAIN_RANK, d)]
    }

    fn api_server(&self, inp: &ClusterInputs) -> Vec<(String, String)> {
        let Some(url) = inp.platform.openshift_api_internal_uri.as_deref() else {
            return Vec::new();
        };
        let what = "Infrastructure.config.openshift.io/cluster apiServerInternalURI";
        let host = sources::url_host(url).unwrap_or_else(|| url.to_owned());
        vec![(what.to_owned(), host)]
    }
}

/// One network field of the Network config.
fn network(values: Vec<String>, field: &str) -> Candidate {
    Candidate::one(
        format!("{OPENSHIFT_NETWORK} {field}"),
        values,
        Label::Fixed(OPENSHIFT_NETWORK.into()),
        Some(format!("{OPENSHIFT_NETWORK} has no {field}")),
    )
}

/// The networks of a Network config's spec or status.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
struct Networks {
    #[serde(default)]
    cluster_network: Vec<ClusterNetworkEntry>,
    #[serde(default)]
    service_network: Vec<String>,
}

#[derive(Deserialize, Clone, Debug, Default)]
struct ClusterNetworkEntry {
    #[serde(default)]
    cidr: String,
}

/// Each field from the status (what runs) where it is set, else from the spec (what was
/// asked for, before the network operator reported).
fn network_of(n: &DynamicObject) -> OpenShiftNetwork {
    let part = |key: &str| -> Networks {
        let v = n.data.get(key).cloned().unwrap_or_default();
        serde_json::from_value(v).unwrap_or_default()
    };
    let (spec, status) = (part("spec"), part("status"));
    let cluster = if status.cluster_network.is_empty() {
        spec.cluster_network
    } else {
        status.cluster_network
    };
    let service = if status.service_network.is_empty() {
        spec.service_network
    } else {
        status.service_network
    };
    OpenShiftNetwork {
        cluster_network: cluster.into_iter().map(|c| c.cidr).collect(),
        service_network: service,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openshift_network_status_wins_field_by_field() {
        let n: DynamicObject = serde_json::from_value(json!({
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
}
