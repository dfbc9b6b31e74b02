//! requests 2.34.2: requests/utils.py `should_bypass_proxies`, `is_ipv4_address`,
//! `is_valid_cidr`, `address_in_network`, `resolve_proxies`/`select_proxy`; then (Linux)
//! urllib's `proxy_bypass_environment(hostname)` as a second chance.
//!
//! - Its own check reads `no_proxy`, else `NO_PROXY` (first non-empty); urllib's second check
//!   uses urllib's rules (see python_urllib). Proxies come from urllib's `getproxies()`:
//!   scheme variable, then `all_proxy`/`ALL_PROXY`.
//! - Entries: spaces removed, split at commas. IPv4 hosts (`inet_aton` forms): an entry is
//!   a CIDR with mask 1..=32 or an exact string; ports never match IPv4 hosts. Other hosts
//!   (names, IPv6 without brackets): leading dots removed, `d` matches `d` and subdomains,
//!   with or without `:port` when the URL spells the port. `*` only as the whole value
//!   (via urllib). No IPv6 CIDR. Trailing dots are not ignored.

use std::sync::Arc;

use super::python_urllib::{bypass, express_urllib, getproxies_value, split_names};
use super::{Client, Decide, Expr, Verdict, with_scheme};
use crate::noproxy::entry::Intent;
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{REQUESTS, TrustVar};
use ipnet::IpNet;

/// `socket.inet_aton` (glibc): 1 to 4 parts, decimal, octal (`0..`) or hex (`0x..`).
pub(crate) fn inet_aton(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut vals = Vec::with_capacity(4);
    for p in &parts {
        let v = if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            if h.is_empty() {
                0
            } else {
                u64::from_str_radix(h, 16).ok()?
            }
        } else if p.len() > 1 && p.starts_with('0') {
            u64::from_str_radix(&p[1..], 8).ok()?
        } else {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            p.parse::<u64>().ok()?
        };
        vals.push(v);
    }
    let n = vals.len();
    let mut out: u64 = 0;
    for (i, v) in vals.iter().enumerate() {
        if i + 1 < n {
            if *v > 255 {
                return None;
            }
            out |= v << (8 * (3 - i));
        } else {
            let room = 8 * (4 - i);
            if room < 64 && *v >= (1u64 << room) {
                return None;
            }
            out |= v;
        }
    }
    u32::try_from(out).ok()
}

fn cidr(entry: &str) -> Option<(u32, u32)> {
    if entry.matches('/').count() != 1 {
        return None;
    }
    let (a, m) = entry.split_once('/')?;
    let mask: u32 = m.parse().ok()?;
    if !(1..=32).contains(&mask) {
        return None;
    }
    Some((inet_aton(a)?, mask))
}

/// One entry of requests' own check, pre-parsed.
#[derive(Clone, Debug)]
struct OwnEntry {
    raw: String,
    cidr: Option<(u32, u32)>,
    /// Leading dots removed.
    bare: String,
    /// `.` + `bare`.
    dotted: String,
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    own: Option<(&'static str, Vec<OwnEntry>)>,
    urllib_no: Option<(&'static str, String)>,
    urllib_names: Vec<(String, String)>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
    all: Option<(&'static str, String)>,
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let own = env
            .first_non_empty(&["no_proxy", "NO_PROXY"])
            .map(|(n, v)| {
                let hosts = v
                    .replace(' ', "")
                    .split(',')
                    .filter(|h| !h.is_empty())
                    .map(|h| {
                        let bare = h.trim_start_matches('.').to_owned();
                        OwnEntry {
                            raw: h.to_owned(),
                            cidr: cidr(h),
                            dotted: format!(".{bare}"),
                            bare,
                        }
                    })
                    .collect();
                (n, hosts)
            });
        let urllib_no = getproxies_value(env, "no");
        let urllib_names = urllib_no
            .as_ref()
            .map(|(_, v)| split_names(v))
            .unwrap_or_default();
        Model {
            own,
            urllib_no,
            urllib_names,
            http: getproxies_value(env, "http"),
            https: getproxies_value(env, "https"),
            all: getproxies_value(env, "all"),
        }
    }

    fn own_match(&self, t: &Target) -> Option<(&'static str, &str)> {
        let (var, hosts) = self.own.as_ref()?;
        let hostname = t.raw_host.as_str();
        if let Some(ip) = inet_aton(hostname) {
            return hosts
                .iter()
                .find(|e| match e.cidr {
                    Some((net, bits)) => {
                        let mask = u32::MAX << (32 - bits);
                        ip & mask == net & mask
                    }
                    None => hostname == e.raw,
                })
                .map(|e| (*var, e.raw.as_str()));
        }
        let with_port = match t.explicit_port {
            Some(p) if p != 0 => Some(format!("{hostname}:{p}")),
            _ => None,
        };
        let wp = with_port.as_deref().unwrap_or(hostname);
        hosts
            .iter()
            .find(|e| {
                hostname == e.bare
                    || wp == e.bare
                    || hostname.ends_with(e.dotted.as_str())
                    || wp.ends_with(e.dotted.as_str())
            })
            .map(|e| (*var, e.raw.as_str()))
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if let Some((var, e)) = self.own_match(t) {
            return Verdict::direct_matched(
                var,
                e,
                format!("{var} entry {e:?} matches {}", t.raw_host),
            );
        }
        if let Some((var, value)) = &self.urllib_no
            && let Some(e) = bypass(value, &self.urllib_names, &t.raw_host)
        {
            return Verdict::direct_matched(
                var,
                e,
                format!(
                    "urllib's proxy_bypass: {var} entry {e:?} matches {}",
                    t.raw_host
                ),
            );
        }
        let scheme_proxy = if t.scheme == "https" {
            &self.https
        } else {
            &self.http
        };
        match scheme_proxy.as_ref().or(self.all.as_ref()) {
            Some((pvar, pval)) => Verdict::proxied(
                pvar,
                with_scheme(pval, "http"),
                self.own
                    .as_ref()
                    .map(|(n, _)| *n)
                    .or(self.urllib_no.as_ref().map(|(n, _)| *n)),
            ),
            None => Verdict::no_proxy_for(&t.scheme, "scheme proxy variable and ALL_PROXY"),
        }
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        Intent::Ip {
            addr,
            port: Some(_),
        } if addr.is_ipv4() => Err(
            "requests compares IPv4 hosts without their port (utils.should_bypass_proxies)".into(),
        ),
        Intent::Ip {
            addr,
            port: Some(_),
        } if addr.is_ipv6() => Err(
            "requests cannot match an IPv6 host with a port (it compares ::1:port, urllib [::1])"
                .into(),
        ),
        Intent::Cidr(IpNet::V4(n)) if n.prefix_len() == 0 => {
            Expr::many(vec!["0.0.0.0/1".into(), "128.0.0.0/1".into()])
        }
        Intent::Cidr(IpNet::V4(n)) => Expr::one(n.to_string()),
        Intent::Cidr(IpNet::V6(_)) => {
            Err("requests has no IPv6 CIDR support (utils.is_valid_cidr is IPv4 only)".into())
        }
        other => express_urllib(other, "python-requests", false),
    }
}

/// The dialect `python-requests`.
pub(crate) struct PythonRequests;

impl Client for PythonRequests {
    fn name(&self) -> &'static str {
        "python-requests"
    }
    fn modelled_version(&self) -> &'static str {
        "requests 2.34.2 (PyPI) on CPython 3.11"
    }
    fn reads_variables(&self) -> bool {
        true
    }
    fn separator(&self) -> &'static str {
        ","
    }
    fn cidr_support(&self) -> (bool, bool) {
        (true, false)
    }
    fn matches_subdomains_too(&self, _name: &str) -> bool {
        true
    }
    fn trust_variables(&self) -> &'static [TrustVar] {
        REQUESTS
    }
    fn express(&self, intent: &Intent) -> Result<Expr, String> {
        express(intent)
    }
    fn model(&self, env: &Env) -> Option<Arc<dyn Decide>> {
        Some(Arc::new(Model::new(env)))
    }
}

impl Decide for Model {
    fn decide(&self, t: &Target) -> Verdict {
        Model::decide(self, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noproxy::dialects::Decision;

    fn d(env: &[(&str, &str)], url: &str) -> Decision {
        let m = Model::new(&env.iter().copied().collect());
        m.decide(&Target::parse(url).unwrap()).decision
    }
    const P: (&str, &str) = ("HTTP_PROXY", "http://p:3128");

    #[test]
    fn aton() {
        assert_eq!(inet_aton("127.1"), Some(0x7f00_0001));
        assert_eq!(inet_aton("0x7f.1"), Some(0x7f00_0001));
        assert_eq!(inet_aton("1.2.3.4"), Some(0x0102_0304));
        assert_eq!(inet_aton("1.2.3.256"), None);
        assert_eq!(inet_aton("example"), None);
    }

    #[test]
    fn rules() {
        assert_eq!(d(&[("ALL_PROXY", "p:1")], "https://x/"), Decision::Proxy);
        assert_eq!(
            d(&[P, ("no_proxy", ""), ("NO_PROXY", "x")], "http://x/"),
            Decision::Direct
        );
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        assert_eq!(n("10.0.0.0/8", "http://10.1.2.3/"), Decision::Direct);
        assert_eq!(n("10.0.0.0/0", "http://10.1.2.3/"), Decision::Proxy);
        assert_eq!(n("10.1.2.3:80", "http://10.1.2.3:80/"), Decision::Proxy);
        assert_eq!(n("x:8080", "http://x:8080/"), Decision::Direct);
        assert_eq!(n("x:80", "http://x/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("*.example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(n("*", "http://x/"), Decision::Direct);
        assert_eq!(n("a,*", "http://x/"), Decision::Proxy);
        assert_eq!(n("::1", "http://[::1]:8080/"), Decision::Direct);
        assert_eq!(n("[::1]", "http://[::1]/"), Decision::Proxy);
        assert_eq!(n("fd00::/8", "http://[fd00::1]/"), Decision::Proxy);
        assert_eq!(n("a b", "http://ab/"), Decision::Direct);
    }
}
