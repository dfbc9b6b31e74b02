//! Node addresses as the subnets that cover them (`spec.noProxy.nodeSubnets`): a node
//! joining inside a known subnet changes nothing, and a node leaving never changes NO_PROXY
//! by itself. Pure.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::api::{Fact, NodeSubnets};

/// The source written for subnets of `prefix`; a previous fact is kept only when it was
/// computed with the same prefixes.
fn source(prefix: NodeSubnets) -> String {
    format!(
        "Node InternalIPs covered by /{} (IPv4) and /{} (IPv6) subnets",
        prefix.ipv4, prefix.ipv6
    )
}

/// The subnet of `prefix` around one node address value (an address, or a network the
/// addresses were aggregated into, kept when it is wider already).
fn covering(value: &str, prefix: NodeSubnets) -> Option<IpNet> {
    let net = value
        .parse::<IpNet>()
        .ok()
        .or_else(|| value.parse::<IpAddr>().ok().map(IpNet::from))?;
    let len = match net {
        IpNet::V4(_) => prefix.ipv4,
        IpNet::V6(_) => prefix.ipv6,
    };
    if net.prefix_len() <= len {
        return Some(net);
    }
    IpNet::new(net.addr(), len).ok().map(|n| n.trunc())
}

/// The subnets covering the node addresses, aggregated. When `previous` (the status's) was
/// made with the same prefixes and already covers all of them, it stays: only a node in a
/// new subnet changes the list, and then subnets left without nodes go with that change.
pub fn node_subnets(
    addresses: Option<&Fact>,
    prefix: NodeSubnets,
    previous: Option<&Fact>,
) -> Option<Fact> {
    let addresses = addresses.filter(|f| !f.values.is_empty())?;
    let nets: Vec<IpNet> = addresses
        .values
        .iter()
        .filter_map(|v| covering(v, prefix))
        .collect();
    let current: BTreeSet<IpNet> = IpNet::aggregate(&nets).into_iter().collect();
    let source = source(prefix);
    if let Some(prev) = previous.filter(|p| p.source.as_deref() == Some(source.as_str())) {
        let kept: Vec<IpNet> = prev.values.iter().filter_map(|v| v.parse().ok()).collect();
        let covered = current.iter().all(|c| kept.iter().any(|k| k.contains(c)));
        if covered && kept.len() == prev.values.len() {
            return Some(prev.clone());
        }
    }
    Some(Fact {
        values: current.iter().map(IpNet::to_string).collect(),
        source: Some(source),
        message: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact(values: &[&str]) -> Fact {
        Fact {
            values: values.iter().map(|v| v.to_string()).collect(),
            source: Some("Node.status.addresses InternalIP".into()),
            message: None,
        }
    }

    fn values(f: &Option<Fact>) -> Vec<&str> {
        f.iter()
            .flat_map(|f| &f.values)
            .map(String::as_str)
            .collect()
    }

    const P: NodeSubnets = NodeSubnets { ipv4: 24, ipv6: 64 };

    #[test]
    fn addresses_become_their_covering_subnets() {
        let f = node_subnets(
            Some(&fact(&[
                "192.168.1.10/31",
                "192.168.2.7",
                "10.0.0.0/22",
                "fd00::1:5",
            ])),
            P,
            None,
        );
        assert_eq!(
            values(&f),
            [
                "10.0.0.0/22",
                "192.168.1.0/24",
                "192.168.2.0/24",
                "fd00::/64"
            ]
        );
        let exact = NodeSubnets {
            ipv4: 32,
            ipv6: 128,
        };
        let f = node_subnets(Some(&fact(&["192.168.1.10", "192.168.1.12"])), exact, None);
        assert_eq!(values(&f), ["192.168.1.10/32", "192.168.1.12/32"]);
        assert_eq!(node_subnets(Some(&fact(&[])), P, None), None);
    }

    /// 100 nodes joining the known subnet, and nodes leaving, keep the list as it is; a node
    /// in a new subnet changes it, and drops the subnet that has no node left.
    #[test]
    fn joins_in_known_subnets_and_leaves_change_nothing() {
        let first = node_subnets(Some(&fact(&["192.168.1.10", "192.168.5.1"])), P, None);
        let many: Vec<String> = (1..=100).map(|i| format!("192.168.1.{i}")).collect();
        let many: Vec<&str> = many
            .iter()
            .map(String::as_str)
            .chain(["192.168.5.1"])
            .collect();
        let after = node_subnets(Some(&fact(&many)), P, first.as_ref());
        assert_eq!(after, first, "a scale-up inside known subnets");
        let left = node_subnets(Some(&fact(&["192.168.1.10"])), P, first.as_ref());
        assert_eq!(left, first, "192.168.5.0/24 has no node left, and stays");
        let new = node_subnets(Some(&fact(&["192.168.1.10", "10.1.0.4"])), P, left.as_ref());
        assert_eq!(values(&new), ["10.1.0.0/24", "192.168.1.0/24"]);
        let wider = NodeSubnets { ipv4: 16, ipv6: 64 };
        let changed = node_subnets(Some(&fact(&["192.168.1.10"])), wider, first.as_ref());
        assert_eq!(
            values(&changed),
            ["192.168.0.0/16"],
            "a new prefix is applied"
        );
    }
}
