//! httpx 0.29.0: httpx/_utils.py `get_environment_proxies`, `URLPattern`; httpx/_client.py
//! `Client.__init__` (mounts sorted by `URLPattern.priority`) and `_transport_for_url`.
//!
//! - Variables via urllib's `getproxies()` (lowercase non-empty wins; empty lowercase hides
//!   uppercase); mounts `http://`, `https://`, `all://` (ALL_PROXY is a fallback).
//! - Entries split at commas and stripped. `*` anywhere: no proxy at all. IPv4 (also a CIDR,
//!   read as `all://10.0.0.0/8`, i.e. the single address 10.0.0.0 with path /8), IPv6
//!   unbracketed (`all://[::1]`, any port), `localhost` exact, everything else `all://*entry`:
//!   `d` matches `d` and subdomains (`^(.+\.)?d$`, not `badd`), `.d` only subdomains, `*.d`
//!   nothing. `d:port` matches only a non-default port (httpx drops default ports).
//! - A URL host starting with `xn--` is compared in its Unicode form, so punycode entries
//!   never match it (`URL.host`).
//! - A pattern that does not parse as a URL makes `httpx.Client()` raise `InvalidURL`:
//!   bracketed IPv6 (`[::1]`, `[::1]:443`), IPv6 CIDR, non-numeric port, non-ASCII.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnet::IpNet;

use super::python_urllib::getproxies_value;
use super::{Client, Decide, Decision, Expr, Verdict};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{SSL_CERT, TrustVar};

type ProxyVar = Option<(&'static str, String)>;

#[derive(Clone, Debug)]
enum HostRe {
    Any,
    Exact(String),
    /// `*.d`: at least one label before `.d`.
    Sub(String),
    /// `*d`: `d` or anything ending in `.d`.
    SelfOrSub(String),
}

#[derive(Clone, Debug)]
struct Pattern {
    scheme: String,
    host: HostRe,
    host_len: usize,
    port: Option<u32>,
    /// `None`: direct (a no_proxy mount); `Some((var, url))`: a proxy mount.
    proxy: Option<(&'static str, String)>,
    entry: String,
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    mounts: Result<Vec<Pattern>, String>,
    no_proxy: Option<&'static str>,
}

/// `URLPattern(pattern)`: `Err` when httpx's URL parser rejects it.
fn pattern(
    key: &str,
    proxy: Option<(&'static str, String)>,
    entry: &str,
) -> Result<Pattern, String> {
    let bad = |why: &str| {
        Err(format!(
            "httpx.Client() raises InvalidURL for NO_PROXY entry {entry:?}: {why}"
        ))
    };
    let Some((scheme, rest)) = key.split_once("://") else {
        return bad("not a URL pattern");
    };
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let auth = &rest[..end];
    let hostport = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    if !hostport.is_ascii() {
        return bad("invalid IDNA hostname");
    }
    let (host, port_text) = if let Some(inner) = hostport.strip_prefix('[') {
        let Some((h, tail)) = inner.split_once(']') else {
            return bad("invalid IPv6 address");
        };
        if h.parse::<Ipv6Addr>().is_err() {
            return bad("invalid IPv6 address");
        }
        (h.to_owned(), tail.strip_prefix(':').unwrap_or(tail))
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h.to_owned(), p),
            None => (hostport.to_owned(), ""),
        }
    };
    let port = if port_text.is_empty() {
        None
    } else if port_text.bytes().all(|b| b.is_ascii_digit()) {
        match port_text.parse::<u32>() {
            Ok(p) => Some(p),
            Err(_) => return bad("invalid port"),
        }
    } else {
        return bad(&format!("invalid port {port_text:?}"));
    };
    let default = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let port = port.filter(|p| Some(*p) != default);
    // httpx lowercases names but keeps an IPv6 literal as written.
    let host = if hostport.starts_with('[') {
        host
    } else {
        host.to_ascii_lowercase()
    };
    let (re, host_len) = if host.is_empty() || host == "*" {
        (HostRe::Any, 0)
    } else if let Some(d) = host.strip_prefix("*.") {
        (HostRe::Sub(d.to_owned()), host.len())
    } else if let Some(d) = host.strip_prefix('*') {
        (HostRe::SelfOrSub(d.to_owned()), host.len())
    } else {
        (HostRe::Exact(host.clone()), host.len())
    };
    Ok(Pattern {
        scheme: if scheme == "all" {
            String::new()
        } else {
            scheme
        },
        host: re,
        host_len,
        port,
        proxy,
        entry: entry.to_owned(),
    })
}

impl Pattern {
    fn priority(&self) -> (u8, isize, isize) {
        (
            u8::from(self.port.is_none()),
            -(self.host_len as isize),
            -(self.scheme.len() as isize),
        )
    }

    /// `host` is `None` for a host httpx decodes to Unicode (see `Model::decide`).
    fn matches(&self, scheme: &str, host: Option<&str>, port: Option<u32>) -> bool {
        if !self.scheme.is_empty() && self.scheme != scheme {
            return false;
        }
        let Some(host) = host else {
            return matches!(self.host, HostRe::Any) && (self.port.is_none() || self.port == port);
        };
        let ok = match &self.host {
            HostRe::Any => true,
            HostRe::Exact(h) => host == h,
            HostRe::Sub(d) => {
                host.len() > d.len() + 1
                    && host.ends_with(d.as_str())
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.'
            }
            HostRe::SelfOrSub(d) => {
                host == d
                    || (host.len() > d.len() + 1
                        && host.ends_with(d.as_str())
                        && host.as_bytes()[host.len() - d.len() - 1] == b'.')
            }
        };
        ok && (self.port.is_none() || self.port == port)
    }
}

impl Model {
    pub fn new(env: &Env) -> Model {
        // (mount key, proxy or None for direct, NO_PROXY entry it came from)
        let mut keys: Vec<(String, ProxyVar, String)> = Vec::new();
        for scheme in ["http", "https", "all"] {
            if let Some((var, v)) = getproxies_value(env, scheme) {
                let url = if v.contains("://") {
                    v.clone()
                } else {
                    format!("http://{v}")
                };
                keys.push((format!("{scheme}://"), Some((var, url)), String::new()));
            }
        }
        let no = getproxies_value(env, "no");
        let mut wildcard = false;
        if let Some((_, value)) = &no {
            for h in value.split(',').map(str::trim) {
                if h == "*" {
                    wildcard = true;
                    break;
                }
                if h.is_empty() {
                    continue;
                }
                let base = h.split('/').next().unwrap_or(h);
                let key = if h.contains("://") {
                    h.to_owned()
                } else if base.parse::<Ipv4Addr>().is_ok() {
                    format!("all://{h}")
                } else if base.parse::<Ipv6Addr>().is_ok() {
                    format!("all://[{h}]")
                } else if h.eq_ignore_ascii_case("localhost") {
                    format!("all://{h}")
                } else {
                    format!("all://*{h}")
                };
                // A later duplicate key replaces the earlier one (dict semantics).
                keys.retain(|(k, _, _)| *k != key);
                keys.push((key, None, h.to_owned()));
            }
        }
        let no_proxy = no.as_ref().map(|(n, _)| *n);
        if wildcard {
            return Model {
                mounts: Ok(Vec::new()),
                no_proxy,
            };
        }
        // Client() builds a Proxy for every proxy mount: a bad URL raises for every request.
        if let Some((_, Some((var, _)), _)) = keys
            .iter()
            .find(|(_, p, _)| p.as_ref().is_some_and(|(_, u)| !super::valid_proxy_url(u)))
        {
            return Model {
                mounts: Err(format!(
                    "httpx.Client() raises InvalidURL: {var} is not a valid proxy URL"
                )),
                no_proxy,
            };
        }
        let mounts: Result<Vec<Pattern>, String> = keys
            .into_iter()
            .map(|(k, p, e)| pattern(&k, p, &e))
            .collect();
        let mounts = mounts.map(|mut m| {
            m.sort_by_key(Pattern::priority);
            m
        });
        Model { mounts, no_proxy }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        let mounts = match &self.mounts {
            Ok(m) => m,
            Err(e) => return Verdict::error(e.clone()),
        };
        if mounts.is_empty() && self.no_proxy.is_some() {
            // `*` in the list: get_environment_proxies returned {}.
            let var = self.no_proxy.unwrap_or("NO_PROXY");
            return Verdict::direct_matched(
                var,
                "*",
                format!("{var} contains `*`: httpx uses no proxy"),
            );
        }
        let port = t.non_default_port().map(u32::from);
        // httpx/_urls.py URL.host decodes a host that starts with `xn--` to Unicode, while
        // every NO_PROXY pattern keeps its ASCII (punycode) form: such hosts never match.
        let host = (!t.raw_host.starts_with("xn--")).then_some(t.raw_host.as_str());
        match mounts.iter().find(|p| p.matches(&t.scheme, host, port)) {
            Some(p) => match &p.proxy {
                Some((var, url)) => Verdict::proxied(var, url.clone(), self.no_proxy),
                None => {
                    let var = self.no_proxy.unwrap_or("NO_PROXY");
                    Verdict::direct_matched(
                        var,
                        &p.entry,
                        format!("{var} entry {:?} matches {}", p.entry, t.raw_host),
                    )
                }
            },
            None => {
                let mut v = Verdict::no_proxy_for(&t.scheme, "scheme proxy variable and ALL_PROXY");
                v.decision = Decision::Direct;
                v
            }
        }
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        Intent::All => Expr::one("*"),
        Intent::Name { port: Some(p), .. } | Intent::Ip { port: Some(p), .. }
            if *p == 80 || *p == 443 =>
        {
            Err(format!(
                "httpx drops the scheme's default port from the URL, so an entry with :{p} does not \
             match it (httpx/_utils.py URLPattern.matches)"
            ))
        }
        Intent::Name { name, scope, .. }
            if name.starts_with("xn--") && *scope != NameScope::Subdomains =>
        {
            Err(format!(
                "httpx compares a host that starts with xn-- in its Unicode form, so {name} never \
             matches a NO_PROXY entry (httpx/_urls.py URL.host)"
            ))
        }
        Intent::Name { name, scope, port } => {
            let p = port.map(|p| format!(":{p}")).unwrap_or_default();
            let e = match scope {
                NameScope::Host | NameScope::Domain => Expr::one(format!("{name}{p}"))?,
                NameScope::Subdomains => Expr::one(format!(".{name}{p}"))?,
            };
            Ok(if name == "localhost" && *scope == NameScope::Domain {
                e.warn("httpx matches `localhost` exactly, not its subdomains")
            } else {
                e
            })
        }
        Intent::Ip { addr, port: None } => Expr::one(addr.to_string()),
        Intent::Ip {
            addr,
            port: Some(p),
        } if addr.is_ipv4() => Expr::one(format!("{addr}:{p}")),
        Intent::Ip { .. } => Err(
            "httpx.Client() raises InvalidURL for a bracketed IPv6 entry such as [::1]:443".into(),
        ),
        Intent::Cidr(IpNet::V4(n)) => Err(format!(
            "httpx has no CIDR support: it reads {n} as the single address {}",
            n.network()
        )),
        Intent::Cidr(IpNet::V6(_)) => {
            Err("httpx.Client() raises InvalidURL for an IPv6 CIDR entry".into())
        }
    }
}

/// The dialect `python-httpx`.
pub(crate) struct PythonHttpx;

impl Client for PythonHttpx {
    fn name(&self) -> &'static str {
        "python-httpx"
    }
    fn modelled_version(&self) -> &'static str {
        "httpx 0.29.0 (PyPI) on CPython 3.11"
    }
    fn reads_variables(&self) -> bool {
        true
    }
    fn separator(&self) -> &'static str {
        ","
    }
    fn cidr_support(&self) -> (bool, bool) {
        (false, false)
    }
    fn matches_subdomains_too(&self, name: &str) -> bool {
        name != "localhost"
    }
    fn trust_variables(&self) -> &'static [TrustVar] {
        SSL_CERT
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

    fn d(np: &str, url: &str) -> Decision {
        let env: Env = [
            ("HTTP_PROXY", "http://p:3128"),
            ("HTTPS_PROXY", "http://p:3128"),
            ("NO_PROXY", np),
        ]
        .into_iter()
        .collect();
        Model::new(&env)
            .decide(&Target::parse(url).unwrap())
            .decision
    }

    // Every row was observed with httpx 0.29.0 (Client()._transport_for_url).
    #[test]
    fn observed() {
        use Decision::*;
        for (np, url, want) in [
            ("example.com", "http://badexample.com/", Proxy),
            ("example.com", "http://a.example.com/", Direct),
            (".example.com", "http://example.com/", Proxy),
            ("*.example.com", "http://a.example.com/", Proxy),
            ("[::1]", "http://[::1]/", Error),
            ("::1", "http://[::1]:8080/", Direct),
            ("fd00::/8", "http://[fd00::1]/", Error),
            ("10.0.0.0/8", "http://10.1.2.3/", Proxy),
            ("10.0.0.0/8", "http://10.0.0.0/", Direct),
            ("10.0.0.1:8080", "http://10.0.0.1:8080/", Direct),
            ("example.com:80", "http://example.com:80/", Proxy),
            ("example.com:8080", "http://example.com:8080/", Direct),
            ("example.com", "http://example.com./", Proxy),
            ("example.com.", "http://example.com./", Direct),
            ("EXAMPLE.com", "http://example.com/", Direct),
            ("a.com, *", "http://x.com/", Direct),
            ("[::1]:8080", "http://[::1]:8080/", Error),
            ("localhost", "http://LOCALHOST/", Direct),
            ("*example.com", "http://badexample.com/", Proxy),
            ("0:0::1", "http://[::1]/", Proxy),
            ("example.com", "https://example.com:443/", Direct),
            ("10.0.0.1", "http://10.0.0.1:8080/", Direct),
            ("*:80", "http://x/", Proxy),
            ("http://x", "http://x/", Direct),
            ("é.com", "http://xn--9ca.com/", Error),
            ("example.com:abc", "http://x/", Error),
            ("u@h", "http://h/", Direct),
            ("127.1", "http://127.1/", Direct),
            ("127.0.0.1", "http://127.1/", Proxy),
            ("2001:DB8::1", "http://[2001:db8::1]/", Proxy),
            ("xn--exmple-cua.com", "http://xn--exmple-cua.com/", Proxy),
            ("*", "http://xn--exmple-cua.com/", Direct),
        ] {
            assert_eq!(d(np, url), want, "{np} {url}");
        }
    }
}
