//! undici 7.30.2 `EnvHttpProxyAgent` (lib/dispatcher/env-http-proxy-agent.js: constructor,
//! `#getProxyAgentForUrl`, `#shouldProxy`, `#parseNoProxy`). The latest undici, 8.14.0,
//! requires node >= 22.19 and does not load on this machine's node 20, so the 7.x line that
//! runs here is modelled. (8.x differs: brackets and trailing dots are stripped, `*` works
//! anywhere, `*.d` is subdomains only, bare IPv6 entries are read whole.)
//!
//! - `no_proxy ?? NO_PROXY`: lowercase wins when set, even empty (empty: always proxy).
//!   `http_proxy ?? HTTP_PROXY`, `https_proxy ?? HTTPS_PROXY`; an https request without an
//!   https proxy uses the http one. No `ALL_PROXY`. An unparsable proxy URL throws in the
//!   constructor.
//! - `*` only as the whole value. Entries split at commas and whitespace, `/^(.+):(\d+)$/`
//!   splits a port (so `::1` reads as host `:` port 1), one leading `.` or `*.` removed,
//!   lowercased: `d`, `.d`, `*.d` all match `d` and subdomains. Ports compare with the URL
//!   port or the scheme's default.
//! - The host is the WHATWG `URL#host` without port, lowercased: IPv6 keeps its brackets
//!   (`[::1]`, normalized), trailing dots are kept. No CIDR.

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
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<&'static str>,
    star: bool,
    entries: Vec<Entry>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
    ctor_error: Option<String>,
}

fn parse_entry(e: &str) -> Entry {
    let (host, port) = match e.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            (h, p.parse::<u32>().unwrap_or(u32::MAX))
        }
        _ => (e, 0),
    };
    let host = host
        .strip_prefix("*.")
        .or_else(|| host.strip_prefix('.'))
        .unwrap_or(host);
    Entry {
        raw: e.to_owned(),
        host: host.to_lowercase(),
        port,
    }
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let np = env.first_set(&["no_proxy", "NO_PROXY"]);
        let entries = np
            .map(|(_, v)| {
                v.split(|c: char| c == ',' || c.is_whitespace())
                    .filter(|e| !e.is_empty())
                    .map(parse_entry)
                    .collect()
            })
            .unwrap_or_default();
        let pick = |names: &[&'static str]| {
            env.first_set(names)
                .filter(|(_, v)| !v.is_empty())
                .map(|(n, v)| (n, v.to_owned()))
        };
        let http = pick(&["http_proxy", "HTTP_PROXY"]);
        let https = pick(&["https_proxy", "HTTPS_PROXY"]);
        let ctor_error =
            [&http, &https]
                .into_iter()
                .flatten()
                .find_map(|(n, v)| match url::Url::parse(v) {
                    Ok(u) if u.has_host() => None,
                    _ => Some(format!("new ProxyAgent() throws: {n} is not a valid URL")),
                });
        Model {
            no_proxy: np.map(|(n, _)| n),
            star: np.is_some_and(|(_, v)| v == "*"),
            entries,
            http,
            https,
            ctor_error,
        }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if let Some(e) = &self.ctor_error {
            return Verdict::error(e.clone());
        }
        let host = if t.ipv6 {
            format!("[{}]", t.host)
        } else {
            t.host.to_lowercase()
        };
        let port = u32::from(t.port);
        let hit = if self.star {
            self.entries.first()
        } else {
            self.entries.iter().find(|e| {
                (e.port == 0 || e.port == port)
                    && (host == e.host
                        || (host.len() > e.host.len()
                            && host.ends_with(e.host.as_str())
                            && host.as_bytes()[host.len() - e.host.len() - 1] == b'.'))
            })
        };
        let var = self.no_proxy.unwrap_or("no_proxy");
        if let Some(e) = hit {
            return Verdict::direct_matched(
                var,
                &e.raw,
                format!("{var} entry {:?} matches {host}:{port}", e.raw),
            );
        }
        let proxy = if t.scheme == "https" {
            self.https.as_ref().or(self.http.as_ref())
        } else {
            self.http.as_ref()
        };
        match proxy {
            Some((pvar, p)) => Verdict::proxied(pvar, p.clone(), self.no_proxy),
            None => Verdict::no_proxy_for(
                &t.scheme,
                "http_proxy/HTTP_PROXY and https_proxy/HTTPS_PROXY",
            ),
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
        } => match scope {
            NameScope::Host | NameScope::Domain => Expr::one(format!("{name}{}", port(p))),
            NameScope::Subdomains => Ok(Expr::one(format!(".{name}{}", port(p)))?.warn(format!(
                "undici 7 has no subdomains-only form: .{name} also sends {name} direct"
            ))),
        },
        Intent::Ip { addr, port: p } => Expr::one(match addr {
            std::net::IpAddr::V4(a) => format!("{a}{}", port(p)),
            std::net::IpAddr::V6(a) => format!("[{}]{}", whatwg_ipv6(*a), port(p)),
        }),
        Intent::Cidr(_) => Err(
            "undici compares host names as text, no CIDR (EnvHttpProxyAgent #shouldProxy)".into(),
        ),
    }
}

/// The dialect `node-undici`.
pub(crate) struct NodeUndici;

impl Client for NodeUndici {
    fn name(&self) -> &'static str {
        "node-undici"
    }
    fn modelled_version(&self) -> &'static str {
        "undici 7.30.2 EnvHttpProxyAgent on node v20.20.2 (npm; 8.14.0 needs node >= 22.19)"
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
        true
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
        assert_eq!(d(&[P], "https://x/"), Decision::Proxy);
        assert_eq!(
            d(&[("ALL_PROXY", "http://p:1")], "http://x/"),
            Decision::Direct
        );
        assert_eq!(
            d(&[P, ("no_proxy", ""), ("NO_PROXY", "x")], "http://x/"),
            Decision::Proxy
        );
        assert_eq!(d(&[("HTTP_PROXY", "p:3128")], "http://x/"), Decision::Error);
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(n("*.example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("none.invalid, *", "http://x/"), Decision::Proxy);
        assert_eq!(n("*", "http://x/"), Decision::Direct);
        assert_eq!(n("x:80", "http://x/"), Decision::Direct);
        assert_eq!(n("::1", "http://[::1]/"), Decision::Proxy);
        assert_eq!(n("[::1]", "http://[0::1]/"), Decision::Direct);
        assert_eq!(n("[::1]:8080", "http://[::1]:8080/"), Decision::Direct);
        assert_eq!(n("example.com", "http://example.com./"), Decision::Proxy);
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Proxy);
    }
}
