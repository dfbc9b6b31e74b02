//! Calico: its IP pools (`crd.projectcalico.org/v1`), the Pod network; not those that give
//! Pods no address.

use serde::Deserialize;

use super::{DiscoverySource, Object, Select, Watched, When, all_typed, keep_all, named};
use crate::discovery::candidate::{Candidate, Label, Ranked};
use crate::discovery::{ClusterInputs, PlatformInputs, sorted_by_name};

/// The Pod network: after OpenShift's, before Cilium's.
const RANK: u8 = 30;

pub(super) struct Calico;

const OBJECTS: [Object; 1] = [Object {
    group: "crd.projectcalico.org",
    version: "v1",
    kind: "IPPool",
    resource: "ippools",
    namespace: None,
    select: Select::All,
    when: When::Served,
    keep: keep_all,
}];

impl DiscoverySource for Calico {
    fn objects(&self) -> &'static [Object] {
        &OBJECTS
    }

    fn read(&self, watched: &[Watched], into: &mut PlatformInputs) {
        into.calico_ip_pools = watched[0].as_ref().map(|pools| {
            let mut pools: Vec<(String, IPPoolSpec)> = all_typed(pools, Some("spec"));
            pools.retain(|(_, p)| p.for_pods());
            named(&pools, |p| vec![p.cidr.clone()])
        });
    }

    fn pod_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        let Some(pools) = &inp.platform.calico_ip_pools else {
            return Vec::new();
        };
        let c = Candidate {
            parts: sorted_by_name(pools)
                .into_iter()
                .map(|o| (format!("IPPool/{} spec.cidr", o.name), o.values.clone()))
                .collect(),
            label: Label::Count("Calico IPPool spec.cidr".into(), "pool"),
            absent: Some("no Calico IPPool has a valid spec.cidr".into()),
        };
        vec![(RANK, c)]
    }
}

/// The fields of an IPPool's spec discovery reads.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(rename_all = "camelCase")]
struct IPPoolSpec {
    #[serde(default)]
    cidr: String,
    /// No new addresses are given from a disabled pool.
    #[serde(default)]
    disabled: bool,
    /// What the pool's addresses are for; absent means `Workload` and `Tunnel`.
    #[serde(default)]
    allowed_uses: Option<Vec<String>>,
}

impl IPPoolSpec {
    /// Whether Pods get addresses from this pool.
    fn for_pods(&self) -> bool {
        let uses = self.allowed_uses.as_ref();
        !self.disabled && uses.is_none_or(|u| u.iter().any(|x| x == "Workload"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
