//! ClusterIPs for Services, taken from the cluster's ServiceCIDR as a real API server takes them.

use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};
use crate::resources::GroupResource;
use crate::store::Store;

/// The range ClusterIPs come from while no ServiceCIDR object exists. A real API server
/// always has a Service range (its `--service-cluster-ip-range` flag) even where it publishes
/// no ServiceCIDR object (before Kubernetes 1.33, GKE); kube-sim's is kubeadm's default. It is
/// never stored as an object, so nothing can discover it.
pub const DEFAULT_SERVICE_RANGE: &str = "10.96.0.0/12";

/// The most addresses of one range kube-sim hands out (an IPv6 /64 is not walked).
const MAX_OFFSETS: u128 = 1 << 32;

/// A Service range: its network and how many addresses it spans.
struct Range {
    net: IpNet,
    size: u128,
}

impl Range {
    fn parse(cidr: &str) -> Option<Range> {
        let net = cidr.parse::<IpNet>().ok()?.trunc();
        let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
        let size = 1u128.checked_shl(host_bits).unwrap_or(u128::MAX);
        Some(Range { net, size })
    }

    /// Offsets that may be handed out: not the network address, nor an IPv4 broadcast.
    fn usable(&self) -> std::ops::Range<u128> {
        let end = match self.net {
            IpNet::V4(_) => self.size - 1,
            IpNet::V6(_) => self.size,
        };
        1..end.min(MAX_OFFSETS)
    }

    fn address(&self, offset: u128) -> String {
        match self.net {
            IpNet::V4(n) => {
                let ip = u128::from(u32::from(n.network())) + offset;
                Ipv4Addr::from(u32::try_from(ip).unwrap_or(u32::MAX)).to_string()
            }
            IpNet::V6(n) => Ipv6Addr::from(u128::from(n.network()) + offset).to_string(),
        }
    }
}

fn gr(group: &str, resource: &str) -> GroupResource {
    GroupResource {
        group: group.into(),
        resource: resource.into(),
    }
}

/// The primary range of the ServiceCIDR `kubernetes` (the one an API server creates from its
/// flag), else of the first ServiceCIDR by name, else [`DEFAULT_SERVICE_RANGE`].
fn service_range(store: &Store) -> Range {
    let cidrs = gr("networking.k8s.io", "servicecidrs");
    let first_cidr = |o: &Value| {
        let cidrs = o.pointer("/spec/cidrs")?.as_array()?;
        cidrs.iter().find_map(|c| Range::parse(c.as_str()?))
    };
    let named = store
        .range_stored(&cidrs, None, None)
        .find(|(k, _)| k.1 == "kubernetes")
        .and_then(|(_, o)| first_cidr(&o.value()));
    named
        .or_else(|| {
            store
                .range(&cidrs, None, None)
                .find_map(|(_, o)| first_cidr(&o))
        })
        .or_else(|| Range::parse(DEFAULT_SERVICE_RANGE))
        .expect("the default Service range parses")
}

/// The next free ClusterIP of the Service range, after the last one handed out.
pub(crate) fn allocate(store: &mut Store) -> ApiResult<String> {
    let range = service_range(store);
    let ips_of = |o: &Value| -> Vec<String> {
        let one = o.pointer("/spec/clusterIP").into_iter();
        let all = o.pointer("/spec/clusterIPs").and_then(Value::as_array);
        let ips = one.chain(all.into_iter().flatten());
        ips.filter_map(|ip| Some(ip.as_str()?.to_owned())).collect()
    };
    let used: HashSet<String> = store
        .range(&gr("", "services"), None, None)
        .flat_map(|(_, o)| ips_of(&o))
        .collect();
    let usable = range.usable();
    let next = u128::from(store.next_cluster_ip).clamp(usable.start, usable.end.max(1));
    let found = (next..usable.end)
        .chain(usable.start..next)
        .map(|offset| (offset, range.address(offset)))
        .find(|(_, ip)| !used.contains(ip));
    let (offset, ip) = found.ok_or_else(|| {
        ApiError::internal("failed to allocate a serviceIP: range is full".to_string())
    })?;
    store.next_cluster_ip = u32::try_from(offset + 1).unwrap_or(1);
    Ok(ip)
}

#[cfg(test)]
mod tests {
    use super::Range;

    #[test]
    fn ranges_hand_out_their_own_addresses() {
        let r = Range::parse("10.43.7.9/16").unwrap();
        assert_eq!(r.address(1), "10.43.0.1");
        assert_eq!(r.usable(), 1..65_535);
        let r = Range::parse("fd00:10:96::/112").unwrap();
        assert_eq!(r.address(10), "fd00:10:96::a");
        assert_eq!(r.usable(), 1..65_536);
        assert_eq!(
            Range::parse("10.0.0.0/0").unwrap().usable(),
            1..(1 << 32) - 1
        );
        let all = Range::parse("::/0").unwrap();
        assert_eq!((all.address(1).as_str(), all.usable()), ("::1", 1..1 << 32));
        assert!(Range::parse("10.0.0.0/33").is_none());
        assert!(Range::parse("10.0.0.0").is_none());
    }
}
