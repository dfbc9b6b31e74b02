//! The canonical intent set: deduplicated, covered entries removed, CIDRs aggregated,
//! deterministic order.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use super::entry::{Intent, NameScope, ParseError, split_list};

/// A canonical set of intents. Building it from the same intents in any order gives the
/// same set and the same [`Display`](fmt::Display) string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntentSet {
    intents: Vec<Intent>,
    /// IPs dropped only because a kept CIDR covers them: rendering brings them back for a
    /// dialect that cannot express that CIDR.
    shadowed: Vec<Intent>,
}

impl IntentSet {
    /// Canonicalizes intents: duplicates and covered intents removed (a host under a kept
    /// domain, an IP inside a kept CIDR, a port-specific intent covered by a port-less one,
    /// everything under `*`), CIDRs aggregated, sorted (names, then CIDRs, then IPs).
    /// Single IPs are not merged into CIDRs here: many clients cannot read CIDRs.
    pub fn new(intents: impl IntoIterator<Item = Intent>) -> IntentSet {
        let mut names: HashSet<NameKey> = HashSet::new();
        let mut ips: HashSet<(IpAddr, Option<u16>)> = HashSet::new();
        let mut nets: Vec<IpNet> = Vec::new();
        for i in intents {
            match i {
                Intent::All => {
                    return IntentSet {
                        intents: vec![Intent::All],
                        shadowed: Vec::new(),
                    };
                }
                Intent::Name { name, scope, port } => {
                    names.insert((name, scope, port));
                }
                Intent::Ip { addr, port } => {
                    ips.insert((addr, port));
                }
                Intent::Cidr(n) => nets.push(n),
            }
        }
        let kept_names = canonical_names(names);
        let nets = IpNet::aggregate(&nets);
        let (kept_ips, shadowed) = canonical_ips(&ips, &nets);
        let mut intents = Vec::with_capacity(kept_names.len() + nets.len() + kept_ips.len());
        intents.extend(
            kept_names
                .into_iter()
                .map(|(name, scope, port)| Intent::Name { name, scope, port }),
        );
        intents.extend(nets.into_iter().map(Intent::Cidr));
        let ip = |(addr, port)| Intent::Ip { addr, port };
        intents.extend(kept_ips.into_iter().map(ip));
        let shadowed = shadowed.into_iter().map(ip).collect();
        IntentSet { intents, shadowed }
    }

    /// Parses entries (each may itself be a comma-separated list, see [`split_list`]) into
    /// a canonical set; the first malformed entry is the error.
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<IntentSet, ParseError> {
        let mut out = Vec::new();
        for arg in entries {
            for e in split_list(arg) {
                out.push(Intent::parse(e)?);
            }
        }
        Ok(IntentSet::new(out))
    }

    /// The canonical intents, in order.
    pub fn intents(&self) -> &[Intent] {
        &self.intents
    }

    /// IPs left out of [`IntentSet::intents`] because a CIDR in the set covers them.
    pub fn shadowed(&self) -> &[Intent] {
        &self.shadowed
    }

    /// Number of canonical intents.
    pub fn len(&self) -> usize {
        self.intents.len()
    }

    /// True when nothing must go direct.
    pub fn is_empty(&self) -> bool {
        self.intents.is_empty()
    }
}

impl fmt::Display for IntentSet {
    /// The canonical comma-separated spelling (not a client dialect: see `render`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, intent) in self.intents.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{intent}")?;
        }
        Ok(())
    }
}

/// A name intent: name, scope, port.
type NameKey = (String, NameScope, Option<u16>);

/// `d` plus `*.d` (same port) merged into `.d`, covered names removed, sorted.
fn canonical_names(mut names: HashSet<NameKey>) -> Vec<NameKey> {
    let pairs: Vec<(String, Option<u16>)> = names
        .iter()
        .filter(|(n, s, p)| {
            *s == NameScope::Subdomains && names.contains(&(n.clone(), NameScope::Host, *p))
        })
        .map(|(n, _, p)| (n.clone(), *p))
        .collect();
    for (n, p) in pairs {
        names.remove(&(n.clone(), NameScope::Host, p));
        names.remove(&(n.clone(), NameScope::Subdomains, p));
        names.insert((n, NameScope::Domain, p));
    }
    // Domains and subdomain wildcards that can cover other names, by (name, port).
    let mut covers: HashMap<&str, Vec<(NameScope, Option<u16>)>> = HashMap::new();
    for (n, s, p) in &names {
        if *s != NameScope::Host {
            covers.entry(n.as_str()).or_default().push((*s, *p));
        }
    }
    let mut kept: Vec<NameKey> = names
        .iter()
        .filter(|(n, s, p)| !covered(&names, &covers, n, *s, *p))
        .cloned()
        .collect();
    kept.sort();
    kept
}

/// Whether another name intent makes this one redundant.
fn covered(
    names: &HashSet<NameKey>,
    covers: &HashMap<&str, Vec<(NameScope, Option<u16>)>>,
    name: &str,
    scope: NameScope,
    port: Option<u16>,
) -> bool {
    let port_ok = |cp: Option<u16>| cp.is_none() || cp == port;
    // Same name: Domain covers Host/Subdomains; port-less covers port-specific.
    if let Some(cs) = covers.get(name) {
        for (cs_scope, cp) in cs {
            let scope_ok = match cs_scope {
                NameScope::Domain => true,
                NameScope::Subdomains => scope == NameScope::Subdomains,
                NameScope::Host => false,
            };
            if scope_ok && port_ok(*cp) && (*cs_scope, *cp) != (scope, port) {
                return true;
            }
        }
    }
    // Strict ancestors: any domain or subdomain wildcard covers everything below.
    let mut rest = name;
    while let Some((_, parent)) = rest.split_once('.') {
        if let Some(cs) = covers.get(parent)
            && cs.iter().any(|(_, cp)| port_ok(*cp))
        {
            return true;
        }
        rest = parent;
    }
    // Host without port covers the same host with a port.
    scope == NameScope::Host
        && port.is_some()
        && names.contains(&(name.to_owned(), NameScope::Host, None))
}

type IpKey = (IpAddr, Option<u16>);

/// The IPs to keep and the ones inside `nets` (both sorted), without port-specific
/// duplicates of a port-less IP.
fn canonical_ips(ips: &HashSet<IpKey>, nets: &[IpNet]) -> (Vec<IpKey>, Vec<IpKey>) {
    let in_nets = |a: &IpAddr| nets.iter().any(|n| n.contains(a));
    let not_dup = |(a, p): &IpKey| p.is_none() || !ips.contains(&(*a, None));
    let (mut kept, mut shadowed): (Vec<IpKey>, Vec<IpKey>) = ips
        .iter()
        .filter(|i| not_dup(i))
        .copied()
        .partition(|(a, _)| !in_nets(a));
    kept.sort();
    shadowed.sort();
    (kept, shadowed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn canon(s: &str) -> String {
        IntentSet::parse([s]).unwrap().to_string()
    }

    #[test]
    fn removes_covered_and_duplicates() {
        assert_eq!(
            canon("a.corp.example,.corp.example,CORP.example.,x.corp.example:8080,.corp.example"),
            ".corp.example"
        );
        assert_eq!(
            canon("*.corp.example,a.corp.example,corp.example"),
            ".corp.example"
        );
        assert_eq!(
            canon("*.corp.example,corp.example:80"),
            "corp.example:80,*.corp.example"
        );
        assert_eq!(canon("h:80,h,h:443"), "h");
        assert_eq!(canon("h:80,h:443"), "h:80,h:443");
        assert_eq!(canon(".d:80,a.d:80,a.d:443"), "a.d:443,.d:80");
        assert_eq!(
            canon("10.1.2.3,10.0.0.0/8,10.9.9.9:80,11.0.0.1:80,11.0.0.1"),
            "10.0.0.0/8,11.0.0.1"
        );
        assert_eq!(canon("a,*,b"), "*");
    }

    #[test]
    fn aggregates_cidrs_but_not_single_ips() {
        assert_eq!(canon("10.0.0.0/9,10.128.0.0/9,10.0.0.0/16"), "10.0.0.0/8");
        assert_eq!(canon("10.0.0.1,10.0.0.0"), "10.0.0.0,10.0.0.1");
        assert_eq!(canon("fd00::/9,fd80::/9,::1"), "fd00::/8,::1");
    }

    #[test]
    fn order_independent() {
        let a = canon("b.example,10.0.0.0/8,.a.example,::1,1.2.3.4");
        let b = canon("::1, 1.2.3.4 ,.a.example,10.0.0.0/8,,b.example");
        assert!(IntentSet::parse(["a b"]).is_err());
        assert!(IntentSet::parse([" "]).unwrap().is_empty());
        assert_eq!(a, b);
        assert_eq!(a, ".a.example,b.example,10.0.0.0/8,1.2.3.4,::1");
    }

    fn entry() -> impl Strategy<Value = String> {
        prop_oneof![
            "(\\*\\.|\\.)?[a-c]{1,2}(\\.[a-c]{1,2}){0,2}(:(80|443))?",
            "10\\.[0-2]\\.[0-2]\\.[0-3](/(8|16|24|30|31)|:80)?",
            "fd00::[0-3](/(8|64|126))?",
            Just("*".to_owned()),
        ]
    }

    proptest! {
        #[test]
        fn canonical_is_order_independent_and_idempotent(
            mut v in proptest::collection::vec(entry(), 0..12),
            seed in any::<u64>(),
        ) {
            let a = IntentSet::parse(v.iter().map(String::as_str)).unwrap();
            // A deterministic shuffle.
            let n = v.len();
            if n > 1 {
                let mut s = seed;
                for i in (1..n).rev() {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    v.swap(i, (s >> 33) as usize % (i + 1));
                }
            }
            let b = IntentSet::parse(v.iter().map(String::as_str)).unwrap();
            prop_assert_eq!(&a, &b);
            let text = a.to_string();
            let again = IntentSet::parse([text.as_str()]).unwrap();
            prop_assert_eq!(again.to_string(), text);
        }
    }
}
