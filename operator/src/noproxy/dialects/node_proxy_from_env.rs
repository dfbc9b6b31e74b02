//! The bare proxy-from-env 2.1.0 package (index.js `getProxyForUrl`, `shouldProxy`,
//! `getEnv`), as used directly or through libraries other than axios. axios 1.21 adds its
//! own check in front (`node_axios.rs`); render writes what bare proxy-from-env understands.
//!
//! - `getEnv`: lowercase, else uppercase, first non-empty. Proxy: `<scheme>_proxy`, then
//!   `all_proxy`; a value without `://` gets the request's scheme.
//! - NO_PROXY lowercased; `*` as the whole value; split at commas and whitespace.
//!   `host:port` compares with the URL port or the scheme's default. No leading `.`/`*`:
//!   exact match only (`d` does not match `a.d`). Leading `.`: suffix (`.d` matches `a.d`,
//!   not `d`). Leading `*`: removed, then suffix (`*.d` = `.d`; `*d` also matches `badd`;
//!   `*` inside a list matches everything).
//! - The host is the WHATWG `URL#host` without port, compared as text: IPv6 keeps its
//!   brackets and is normalized (`[::1]`), so an unbracketed `::1` entry never matches;
//!   trailing dots are kept (`d` does not match `d.`); `localhost` is not `127.0.0.1`.
//!   No CIDR (`10.0.0.0/8` is a string no host equals).

use std::sync::Arc;

use super::{Client, Decide, Expr, Verdict};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::{Target, whatwg_ipv6};
use crate::trust::dialects::{NODE, TrustVar};

#[derive(Clone, Debug)]
struct Entry {
    raw: String,
    host: String,
    port: u32,
    /// Starts with `.` or `*`: suffix match on `host` (with one leading `*` removed).
    suffix: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<(&'static str, String)>,
    entries: Vec<Entry>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
    all: Option<(&'static str, String)>,
}

fn get(env: &Env, lower: &'static str, upper: &'static str) -> Option<(&'static str, String)> {
    env.first_non_empty(&[lower, upper])
        .map(|(n, v)| (n, v.to_owned()))
}

/// JS `parseInt` of a digit string (never NaN here); saturates like a large Number.
fn parse_int(s: &str) -> u32 {
    s.parse::<u32>().unwrap_or(u32::MAX)
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let no_proxy = get(env, "no_proxy", "NO_PROXY").map(|(n, v)| (n, v.to_lowercase()));
        let mut entries = Vec::new();
        if let Some((_, v)) = &no_proxy {
            for e in v.split(|c: char| c == ',' || c.is_whitespace()) {
                if e.is_empty() {
                    continue;
                }
                // /^(.+):(\d+)$/
                let (host, port) = match e.rsplit_once(':') {
                    Some((h, p))
                        if !h.is_empty()
                            && !p.is_empty()
                            && p.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        (h, parse_int(p))
                    }
                    _ => (e, 0),
                };
                let suffix = host.starts_with(['.', '*']);
                let host = if suffix {
                    host.strip_prefix('*').unwrap_or(host)
                } else {
                    host
                };
                entries.push(Entry {
                    raw: e.to_owned(),
                    host: host.to_owned(),
                    port,
                    suffix,
                });
            }
        }
        Model {
            no_proxy,
            entries,
            http: get(env, "http_proxy", "HTTP_PROXY"),
            https: get(env, "https_proxy", "HTTPS_PROXY"),
            all: get(env, "all_proxy", "ALL_PROXY"),
        }
    }

    /// The NO_PROXY variable in effect (`no_proxy`, else `NO_PROXY`) and its lowercased value.
    pub fn no_proxy(&self) -> Option<(&'static str, &str)> {
        self.no_proxy.as_ref().map(|(n, v)| (*n, v.as_str()))
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        let host = if t.ipv6 {
            format!("[{}]", t.host)
        } else {
            t.host.clone()
        };
        if let Some((var, value)) = &self.no_proxy {
            if value == "*" {
                return Verdict::direct_matched(var, "*", format!("{var} is `*`"));
            }
            let port = u32::from(t.port);
            let hit = self.entries.iter().find(|e| {
                (e.port == 0 || e.port == port)
                    && if e.suffix {
                        host.ends_with(e.host.as_str())
                    } else {
                        host == e.host
                    }
            });
            if let Some(e) = hit {
                return Verdict::direct_matched(
                    var,
                    &e.raw,
                    format!("{var} entry {:?} matches {host}:{port}", e.raw),
                );
            }
        }
        let scheme_proxy = if t.scheme == "https" {
            &self.https
        } else {
            &self.http
        };
        match scheme_proxy.as_ref().or(self.all.as_ref()) {
            Some((pvar, p)) => {
                let url = if p.contains("://") {
                    p.clone()
                } else {
                    format!("{}://{p}", t.scheme)
                };
                Verdict::proxied(pvar, url, self.no_proxy.as_ref().map(|(n, _)| *n))
            }
            None => Verdict::no_proxy_for(&t.scheme, "scheme proxy variable and ALL_PROXY"),
        }
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    let port = |p: &Option<u16>| p.map(|p| format!(":{p}")).unwrap_or_default();
    match i {
        Intent::All => Expr::one("*"),
        Intent::Name {
            name,
            scope,
            port: p,
        } => {
            let p = port(p);
            match scope {
                NameScope::Host => Expr::one(format!("{name}{p}")),
                // Bare is exact only, `.d` is subdomains only: both are needed.
                NameScope::Domain => Expr::many(vec![format!("{name}{p}"), format!(".{name}{p}")]),
                NameScope::Subdomains => Expr::one(format!(".{name}{p}")),
            }
        }
        Intent::Ip { addr, port: p } => Expr::one(match addr {
            std::net::IpAddr::V4(a) => format!("{a}{}", port(p)),
            std::net::IpAddr::V6(a) => format!("[{}]{}", whatwg_ipv6(*a), port(p)),
        }),
        Intent::Cidr(_) => {
            Err("proxy-from-env compares host names as text, no CIDR (index.js shouldProxy)".into())
        }
    }
}

/// The dialect `node-proxy-from-env`.
pub(crate) struct NodeProxyFromEnv;

impl Client for NodeProxyFromEnv {
    fn name(&self) -> &'static str {
        "node-proxy-from-env"
    }
    fn modelled_version(&self) -> &'static str {
        "proxy-from-env 2.1.0 (npm), without axios"
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
            n("*.example.com", "http://a.example.com/"),
            Decision::Direct
        );
        assert_eq!(
            n("*example.com", "http://badexample.com/"),
            Decision::Direct
        );
        assert_eq!(n("a,*", "http://x/"), Decision::Direct);
        assert_eq!(n("a x", "http://x/"), Decision::Direct);
        assert_eq!(n("x:80", "http://x/"), Decision::Direct);
        assert_eq!(n("x:8080", "http://x/"), Decision::Proxy);
        assert_eq!(n("[::1]", "http://[0::1]:8080/"), Decision::Direct);
        assert_eq!(n("*example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("EXAMPLE.com", "http://example.com/"), Decision::Direct);
    }

    /// What axios' own check adds is absent from the bare package: entries and hosts are
    /// compared as text.
    #[test]
    fn text_only_no_axios_extras() {
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        // no loopback equivalence
        assert_eq!(n("localhost", "http://127.0.0.1/"), Decision::Proxy);
        assert_eq!(n("127.0.0.1", "http://localhost/"), Decision::Proxy);
        assert_eq!(n("localhost", "http://localhost/"), Decision::Direct);
        // no CIDR
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Proxy);
        assert_eq!(n("fd00::/8", "http://[fd00::1]/"), Decision::Proxy);
        // IPv6: the URL host is bracketed and normalized, the entry is taken as written
        assert_eq!(n("::1", "http://[::1]/"), Decision::Proxy);
        assert_eq!(n("[0:0::1]", "http://[::1]/"), Decision::Proxy);
        assert_eq!(n("[::1]:8080", "http://[::1]:8080/"), Decision::Direct);
        // trailing dots are kept on both sides
        assert_eq!(n("example.com", "http://example.com./"), Decision::Proxy);
        assert_eq!(n("example.com.", "http://example.com./"), Decision::Direct);
        assert_eq!(n("example.com.", "http://example.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://a.example.com./"), Decision::Proxy);
        // no IPv4 normalization of the entry (the URL's own forms are normalized by WHATWG)
        assert_eq!(n("127.1", "http://127.0.0.1/"), Decision::Proxy);
        assert_eq!(n("127.0.0.1", "http://127.1/"), Decision::Direct);
    }

    #[test]
    fn no_cidr_spelling() {
        let net = "10.0.0.0/8".parse().unwrap();
        assert!(express(&Intent::Cidr(net)).is_err());
    }
}
