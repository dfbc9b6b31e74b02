//! axios 1.21.1 with proxy-from-env 2.1.0: axios lib/adapters/http.js `setProxy` goes
//! direct when proxy-from-env's `getProxyForUrl` returns nothing (`node_proxy_from_env.rs`)
//! OR axios' own lib/helpers/shouldBypassProxy.js says so. Render also writes CIDRs, which
//! only axios' check reads.
//!
//! `shouldBypassProxy` (second chance): same variable; `*` anywhere; CIDR v4/v6; host and
//! entry normalized (brackets and trailing dots removed, IPv6 compressed, IPv4 forms and
//! IPv4-mapped IPv6 unmapped); `.d`/`*.d` subdomains only, `d` and `*d` exact;
//! `[v6]:port`, `host:port`; all loopback names/addresses (`localhost`, `0.0.0.0`, 127/8,
//! `::`, `::1`) are equal to each other.

use std::sync::Arc;

use super::node_proxy_from_env;
use super::{Client, Decide, Expr, Verdict};
use crate::noproxy::entry::Intent;
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{NODE, TrustVar};

#[derive(Clone, Debug)]
pub(crate) struct Model {
    pfe: node_proxy_from_env::Model,
    entries: Vec<(String, axios::AxEntry)>,
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let pfe = node_proxy_from_env::Model::new(env);
        let entries = pfe
            .no_proxy()
            .map(|(_, v)| {
                v.split(|c: char| c.is_whitespace() || c == ',')
                    .filter(|e| !e.is_empty())
                    .map(|e| (e.to_owned(), axios::AxEntry::parse(e)))
                    .collect()
            })
            .unwrap_or_default();
        Model { pfe, entries }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        match self.bypass(t) {
            Some((var, e)) => Verdict::direct_matched(
                var,
                &e,
                format!(
                    "axios shouldBypassProxy: {var} entry {e:?} matches {}",
                    t.host
                ),
            ),
            None => self.pfe.decide(t),
        }
    }

    /// axios lib/helpers/shouldBypassProxy.js, evaluated before proxy-from-env here (both
    /// lead to direct).
    fn bypass(&self, t: &Target) -> Option<(&'static str, String)> {
        let (var, value) = self.pfe.no_proxy()?;
        if value == "*" {
            return Some((var, "*".into()));
        }
        let host = axios::normalize_host(&t.host);
        let host_bytes = axios::ip_bytes(&host);
        let port = u32::from(t.port);
        self.entries
            .iter()
            .find(|(_, e)| e.matches(&host, host_bytes.as_deref(), port))
            .map(|(raw, _)| (var, raw.clone()))
    }
}

mod axios {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use crate::noproxy::target::whatwg_ipv6;

    /// `normalizeIPAddress`: IPv4 in dotted/hex/octal/short forms → dotted decimal.
    fn normalize_ipv4(h: &str) -> Option<String> {
        if h.is_empty()
            || !h
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b'x' || b == b'X')
        {
            return None;
        }
        let parts: Vec<&str> = h.split('.').collect();
        if parts.len() < 2 || parts.len() > 4 || parts.iter().any(|p| p.is_empty()) {
            return None;
        }
        let octet = |t: &str| -> Option<u64> {
            if let Some(x) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                return u64::from_str_radix(x, 16).ok();
            }
            if t.len() > 1 && t.starts_with('0') {
                return u64::from_str_radix(t, 8).ok();
            }
            if t.bytes().all(|b| b.is_ascii_digit()) {
                return t.parse().ok();
            }
            None
        };
        let vals: Vec<u64> = parts.iter().map(|p| octet(p)).collect::<Option<_>>()?;
        let (lit, tail) = vals.split_at(vals.len() - 1);
        if lit.iter().any(|v| *v > 255) {
            return None;
        }
        let slots = 4 - lit.len();
        if tail[0] >= 1u64 << (8 * slots) {
            return None;
        }
        let mut o: Vec<u64> = lit.to_vec();
        for i in (0..slots).rev() {
            o.push((tail[0] >> (8 * i)) & 0xff);
        }
        Some(o.iter().map(u64::to_string).collect::<Vec<_>>().join("."))
    }

    /// `normalizeNoProxyHost`.
    pub fn normalize_host(h: &str) -> String {
        let h = h
            .strip_prefix('[')
            .and_then(|x| x.strip_suffix(']'))
            .unwrap_or(h);
        let t = h.trim_end_matches('.');
        if t.contains(':') {
            return match t.parse::<Ipv6Addr>() {
                Ok(a) => match a.to_ipv4_mapped() {
                    Some(v4) => v4.to_string(),
                    None => whatwg_ipv6(a),
                },
                Err(_) => t.to_owned(),
            };
        }
        normalize_ipv4(t).unwrap_or_else(|| t.to_owned())
    }

    /// `ipToBytes`: strict dotted IPv4 or hex-only IPv6.
    pub fn ip_bytes(h: &str) -> Option<Vec<u8>> {
        if h.contains(':') {
            if h.contains('.') {
                return None;
            }
            return h.parse::<Ipv6Addr>().ok().map(|a| a.octets().to_vec());
        }
        h.parse::<Ipv4Addr>().ok().map(|a| a.octets().to_vec())
    }

    fn is_loopback(h: &str) -> bool {
        if h == "localhost" || h == "0.0.0.0" {
            return true;
        }
        let parts: Vec<&str> = h.split('.').collect();
        if parts.len() == 4
            && parts[0] == "127"
            && parts.iter().all(|p| {
                !p.is_empty()
                    && p.bytes().all(|b| b.is_ascii_digit())
                    && p.parse::<u32>().is_ok_and(|n| n <= 255)
            })
        {
            return true;
        }
        h.parse::<Ipv6Addr>().is_ok_and(|a| {
            a.is_unspecified()
                || a.is_loopback()
                || a.to_ipv4_mapped().is_some_and(|m| m.is_loopback())
        })
    }

    /// `parseCidrEntry` → (bytes, prefix); `Err(())` for a malformed CIDR.
    fn cidr(e: &str) -> Result<(Vec<u8>, u32), ()> {
        let (base, prefix) = e.rsplit_once('/').ok_or(())?;
        let ok_prefix = prefix == "0"
            || (!prefix.is_empty()
                && prefix.len() <= 3
                && !prefix.starts_with('0')
                && prefix.bytes().all(|b| b.is_ascii_digit()));
        if base.is_empty() || !ok_prefix {
            return Err(());
        }
        let mut prefix: u32 = prefix.parse().map_err(|_| ())?;
        let (sb, eb) = (base.starts_with('['), base.ends_with(']'));
        let base = if sb || eb {
            let inner = base
                .strip_prefix('[')
                .and_then(|b| b.strip_suffix(']'))
                .ok_or(())?;
            if !inner.contains(':') || inner.contains(['[', ']']) {
                return Err(());
            }
            inner
        } else if base.contains(['[', ']']) {
            return Err(());
        } else {
            base
        };
        if base.ends_with('.') {
            return Err(());
        }
        let was_v6 = base.contains(':');
        let normalized = if was_v6 {
            let a: Ipv6Addr = base.parse().map_err(|_| ())?;
            match a.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => whatwg_ipv6(a),
            }
        } else {
            let n = normalize_ipv4(base).unwrap_or_else(|| base.to_owned());
            n.parse::<Ipv4Addr>().map_err(|_| ())?;
            n
        };
        if was_v6 && !normalized.contains(':') {
            if prefix < 96 {
                return Err(());
            }
            prefix -= 96;
        }
        let bytes = ip_bytes(&normalized).ok_or(())?;
        if prefix as usize > bytes.len() * 8 {
            return Err(());
        }
        Ok((bytes, prefix))
    }

    fn in_subnet(a: &[u8], n: &[u8], prefix: u32) -> bool {
        let full = (prefix >> 3) as usize;
        if a[..full] != n[..full] {
            return false;
        }
        let rest = prefix & 7;
        if rest != 0 {
            let mask = (0xffu32 << (8 - rest)) as u8;
            return a[full] & mask == n[full] & mask;
        }
        true
    }

    /// One pre-parsed entry of `shouldBypassProxy` (the value is already lowercased).
    #[derive(Clone, Debug)]
    pub enum AxEntry {
        Star,
        /// A CIDR; `None` when malformed (never matches).
        Cidr(Option<(Vec<u8>, u32)>),
        /// Normalized host (leading `*` removed), port (0: any), suffix match.
        Host(String, u32, bool, bool),
        Never,
    }

    impl AxEntry {
        pub fn parse(e: &str) -> AxEntry {
            if e == "*" {
                return AxEntry::Star;
            }
            if e.contains('/') {
                return AxEntry::Cidr(cidr(e).ok());
            }
            // parseNoProxyEntry
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let (eh, ep): (String, u32) = if let Some(rest) = e.strip_prefix('[')
                && let Some(i) = rest.find(']')
            {
                let after = &rest[i + 1..];
                let p = after
                    .strip_prefix(':')
                    .filter(|p| digits(p))
                    .map_or(0, |p| p.parse().unwrap_or(u32::MAX));
                (rest[..i].to_owned(), p)
            } else {
                match e.split_once(':') {
                    Some((h, p)) if e.matches(':').count() == 1 && digits(p) => {
                        (h.to_owned(), p.parse().unwrap_or(u32::MAX))
                    }
                    _ => (e.to_owned(), 0),
                }
            };
            let mut eh = normalize_host(&eh);
            if eh.is_empty() {
                return AxEntry::Never;
            }
            if let Some(x) = eh.strip_prefix('*') {
                eh = x.to_owned();
            }
            let suffix = eh.starts_with('.');
            let lo = is_loopback(&eh);
            AxEntry::Host(eh, ep, suffix, lo)
        }

        /// `host` normalized, `port` effective.
        pub fn matches(&self, host: &str, host_bytes: Option<&[u8]>, port: u32) -> bool {
            match self {
                AxEntry::Star => true,
                AxEntry::Never | AxEntry::Cidr(None) => false,
                AxEntry::Cidr(Some((net, prefix))) => host_bytes
                    .is_some_and(|hb| hb.len() == net.len() && in_subnet(hb, net, *prefix)),
                AxEntry::Host(eh, ep, suffix, lo) => {
                    if *ep != 0 && *ep != port {
                        return false;
                    }
                    if *suffix {
                        return host.ends_with(eh.as_str());
                    }
                    host == eh || (*lo && is_loopback(host))
                }
            }
        }
    }
}

/// Like bare proxy-from-env, plus CIDRs (read by `shouldBypassProxy` only).
pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        Intent::Cidr(net) => Expr::one(net.to_string()),
        other => node_proxy_from_env::express(other),
    }
}

/// The dialect `node-axios`.
pub(crate) struct NodeAxios;

impl Client for NodeAxios {
    fn name(&self) -> &'static str {
        "node-axios"
    }
    fn modelled_version(&self) -> &'static str {
        "axios 1.21.1 with proxy-from-env 2.1.0 (npm)"
    }
    fn reads_variables(&self) -> bool {
        true
    }
    fn separator(&self) -> &'static str {
        ","
    }
    fn cidr_support(&self) -> (bool, bool) {
        (true, true)
    }
    fn matches_subdomains_too(&self, _name: &str) -> bool {
        false
    }
    fn trust_variables(&self) -> &'static [TrustVar] {
        NODE
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
    fn rules() {
        assert_eq!(d(&[("ALL_PROXY", "p:1")], "http://x/"), Decision::Proxy);
        assert_eq!(
            d(&[P, ("no_proxy", ""), ("NO_PROXY", "x")], "http://x/"),
            Decision::Direct
        );
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(
            n("*example.com", "http://badexample.com/"),
            Decision::Direct
        );
        assert_eq!(n("a,*", "http://x/"), Decision::Direct);
        assert_eq!(n("x:8080", "http://x/"), Decision::Proxy);
        assert_eq!(n("[::1]", "http://[0::1]:8080/"), Decision::Direct);
    }

    /// axios' own check adds unbracketed IPv6, CIDR, loopback equivalence and trailing-dot
    /// trimming to what bare proxy-from-env matches.
    #[test]
    fn axios_extras() {
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        assert_eq!(n("::1", "http://[::1]/"), Decision::Direct);
        assert_eq!(n("[0:0::1]", "http://[::1]/"), Decision::Direct);
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Direct);
        assert_eq!(n("fd00::/8", "http://[fd00::1]/"), Decision::Direct);
        assert_eq!(n("localhost", "http://127.0.0.1/"), Decision::Direct);
        assert_eq!(n("*example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("10.0.0.0/33", "http://10.1.1.1/"), Decision::Proxy);
        assert_eq!(n("EXAMPLE.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://example.com./"), Decision::Direct);
    }

    #[test]
    fn cidr_spelled() {
        let net = "fd00::/8".parse().unwrap();
        assert_eq!(
            express(&Intent::Cidr(net)).unwrap().entries,
            vec!["fd00::/8"]
        );
    }
}
