//! Go 1.19.8 net/http `ProxyFromEnvironment` (Debian 12 golang): vendor
//! golang.org/x/net/http/httpproxy/proxy.go `FromEnvironment`, `config.init`, `useProxy`.
//!
//! - Uppercase first, then lowercase; an empty value counts as unset (`getEnvAny`).
//!   `HTTP_PROXY` for http, `HTTPS_PROXY` for https (no fallback); no `ALL_PROXY`.
//! - With `REQUEST_METHOD` set (CGI), an http request with a proxy fails.
//! - `localhost` and loopback IPs never use the proxy, whatever NO_PROXY says.
//! - Entries split at commas and trimmed. `*` anywhere matches everything. CIDR v4/v6.
//!   IPs (IPv6 unbracketed, or `[v6]:port`) optionally with a port. `d` matches `d` and
//!   subdomains; `.d` and `*.d` only subdomains. Ports compare with the URL's port or the
//!   scheme's default. Lowercased; trailing dots are not ignored. A bracketed IPv6 without a
//!   port (`[::1]`) is read as a name and never matches.

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::{Client, Decide, Expr, Verdict, with_scheme};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{SSL_CERT, TrustVar};

#[derive(Clone, Debug)]
enum Matcher {
    All,
    Cidr(IpNet),
    Ip(IpAddr, String),
    Domain {
        host: String,
        port: String,
        match_host: bool,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<&'static str>,
    ips: Vec<(Matcher, String)>,
    domains: Vec<(Matcher, String)>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
    cgi: bool,
}

/// Go's `net.SplitHostPort`, for the cases NO_PROXY entries hit.
fn split_host_port(p: &str) -> Option<(&str, &str)> {
    if let Some(rest) = p.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        let port = tail.strip_prefix(':')?;
        return Some((h, port));
    }
    let (h, port) = p.rsplit_once(':')?;
    if h.contains(':') || h.contains('[') || h.contains(']') {
        return None;
    }
    Some((h, port))
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let no_proxy = env.first_non_empty(&["NO_PROXY", "no_proxy"]);
        let (mut ips, mut domains) = (Vec::new(), Vec::new());
        if let Some((_, value)) = no_proxy {
            for raw in value.split(',') {
                let p = raw.trim().to_ascii_lowercase();
                if p.is_empty() {
                    continue;
                }
                if p == "*" {
                    ips = vec![(Matcher::All, p.clone())];
                    domains = vec![(Matcher::All, p)];
                    break;
                }
                if let Ok(net) = p.parse::<IpNet>() {
                    ips.push((Matcher::Cidr(net.trunc()), p));
                    continue;
                }
                let (mut phost, pport) = match split_host_port(&p) {
                    Some((h, port)) => {
                        if h.is_empty() {
                            continue;
                        }
                        (h.to_owned(), port.to_owned())
                    }
                    None => (p.clone(), String::new()),
                };
                if let Some(ip) = parse_ip(&phost) {
                    ips.push((Matcher::Ip(ip, pport), p));
                    continue;
                }
                if let Some(rest) = phost.strip_prefix("*.") {
                    phost = format!(".{rest}");
                }
                let match_host = !phost.starts_with('.');
                if match_host {
                    phost = format!(".{phost}");
                }
                domains.push((
                    Matcher::Domain {
                        host: phost,
                        port: pport,
                        match_host,
                    },
                    p,
                ));
            }
        }
        let own =
            |names: &[&'static str]| env.first_non_empty(names).map(|(n, v)| (n, v.to_owned()));
        Model {
            no_proxy: no_proxy.map(|(n, _)| n),
            ips,
            domains,
            http: own(&["HTTP_PROXY", "http_proxy"]),
            https: own(&["HTTPS_PROXY", "https_proxy"]),
            cgi: env.get("REQUEST_METHOD").is_some_and(|v| !v.is_empty()),
        }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        let (proxy, vars) = if t.scheme == "https" {
            (&self.https, "HTTPS_PROXY, https_proxy")
        } else {
            (&self.http, "HTTP_PROXY, http_proxy")
        };
        let Some((pvar, pval)) = proxy else {
            return Verdict::no_proxy_for(&t.scheme, vars);
        };
        if t.scheme == "http" && self.cgi {
            return Verdict::error(
                "refusing to use HTTP_PROXY value in CGI environment (REQUEST_METHOD is set)",
            );
        }
        let host = t.raw_host.as_str();
        // net.IP.To4: an IPv4-mapped IPv6 address is matched as IPv4.
        let ip = parse_ip(host).map(|a| match a {
            IpAddr::V6(v) => v.to_ipv4_mapped().map_or(a, IpAddr::V4),
            v4 => v4,
        });
        if t.raw_host_case == "localhost" {
            return Verdict::direct("Go never proxies localhost (httpproxy useProxy)");
        }
        if let Some(a) = ip {
            let lo = match a {
                IpAddr::V4(v) => v.is_loopback(),
                IpAddr::V6(v) => {
                    v.is_loopback() || v.to_ipv4_mapped().is_some_and(|m| m.is_loopback())
                }
            };
            if lo {
                return Verdict::direct("Go never proxies loopback addresses (httpproxy useProxy)");
            }
        }
        // canonicalAddr: the port text as written (`080` is not `80`), else the default.
        let port = t.raw_port.clone().unwrap_or_else(|| t.port.to_string());
        let hit = |m: &Matcher| match m {
            Matcher::All => true,
            Matcher::Cidr(n) => ip.is_some_and(|a| n.contains(&a)),
            Matcher::Ip(a, p) => {
                ip.is_some_and(|b| ip_equal(*a, b)) && (p.is_empty() || *p == port)
            }
            Matcher::Domain {
                host: h,
                port: p,
                match_host,
            } => {
                (host.ends_with(h.as_str()) || (*match_host && host == &h[1..]))
                    && (p.is_empty() || *p == port)
            }
        };
        let var = self.no_proxy.unwrap_or("NO_PROXY");
        let ip_hit = if ip.is_some() {
            self.ips.iter().find(|(m, _)| hit(m))
        } else {
            None
        };
        if let Some((_, e)) = ip_hit.or_else(|| self.domains.iter().find(|(m, _)| hit(m))) {
            return Verdict::direct_matched(
                var,
                e,
                format!("{var} entry {e:?} matches {host}:{port}"),
            );
        }
        Verdict::proxied(pvar, with_scheme(pval, "http"), self.no_proxy)
    }
}

/// `net.IP.Equal`: an IPv4 address equals its IPv4-mapped IPv6 form.
fn ip_equal(a: IpAddr, b: IpAddr) -> bool {
    let canon = |x: IpAddr| match x {
        IpAddr::V6(v) => v.to_ipv4_mapped().map_or(x, IpAddr::V4),
        v4 => v4,
    };
    canon(a) == canon(b)
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
            NameScope::Subdomains => Expr::one(format!(".{name}{}", port(p))),
        },
        // Go reads a bracketed IPv6 without a port as a name: write it bare.
        Intent::Ip { addr, port: None } => Expr::one(addr.to_string()),
        Intent::Ip {
            addr,
            port: Some(p),
        } => Expr::one(match addr {
            IpAddr::V4(a) => format!("{a}:{p}"),
            IpAddr::V6(a) => format!("[{a}]:{p}"),
        }),
        Intent::Cidr(n) => Expr::one(n.to_string()),
    }
}

/// The dialect `go`.
pub(crate) struct Go;

impl Client for Go {
    fn name(&self) -> &'static str {
        "go"
    }
    fn modelled_version(&self) -> &'static str {
        "Go 1.19.8 net/http (Debian 12 package golang 2:1.19~1)"
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
        true
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
    use crate::noproxy::dialects::Decision;

    fn d(env: &[(&str, &str)], url: &str) -> Decision {
        let m = Model::new(&env.iter().copied().collect());
        m.decide(&Target::parse(url).unwrap()).decision
    }
    const P: (&str, &str) = ("HTTP_PROXY", "http://p:3128");

    #[test]
    fn variables() {
        assert_eq!(d(&[("http_proxy", "p:1")], "http://x/"), Decision::Proxy);
        assert_eq!(
            d(&[("HTTP_PROXY", ""), ("http_proxy", "p:1")], "http://x/"),
            Decision::Proxy
        );
        assert_eq!(d(&[("HTTP_PROXY", "p:1")], "https://x/"), Decision::Direct);
        assert_eq!(d(&[("ALL_PROXY", "p:1")], "http://x/"), Decision::Direct);
        assert_eq!(
            d(&[P, ("NO_PROXY", ""), ("no_proxy", "x")], "http://x/"),
            Decision::Direct
        );
        assert_eq!(
            d(&[P, ("NO_PROXY", "y"), ("no_proxy", "x")], "http://x/"),
            Decision::Proxy
        );
        assert_eq!(
            d(&[P, ("REQUEST_METHOD", "GET")], "http://x/"),
            Decision::Error
        );
        assert_eq!(d(&[P], "http://localhost/"), Decision::Direct);
        assert_eq!(d(&[P], "http://LOCALHOST/"), Decision::Proxy);
        assert_eq!(
            d(
                &[P, ("NO_PROXY", "10.0.0.0/8")],
                "http://[::ffff:10.1.2.3]/"
            ),
            Decision::Direct
        );
        assert_eq!(d(&[P], "http://127.0.0.2/"), Decision::Direct);
        assert_eq!(d(&[P], "http://[::1]/"), Decision::Direct);
    }

    #[test]
    fn entries() {
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Proxy);
        assert_eq!(
            n("*.example.com", "http://a.example.com/"),
            Decision::Direct
        );
        assert_eq!(n("a, *", "http://x/"), Decision::Direct);
        assert_eq!(n("example.com:80", "http://example.com/"), Decision::Direct);
        assert_eq!(
            n("example.com:8080", "http://example.com/"),
            Decision::Proxy
        );
        assert_eq!(n("10.0.0.0/8", "http://10.1.2.3/"), Decision::Direct);
        assert_eq!(n("fd00::/8", "http://[fd00::1]/"), Decision::Direct);
        assert_eq!(n("fd00::1", "http://[fd00:0::1]/"), Decision::Direct);
        assert_eq!(n("[fd00::1]", "http://[fd00::1]/"), Decision::Proxy);
        assert_eq!(n("[fd00::1]:80", "http://[fd00::1]/"), Decision::Direct);
        assert_eq!(n("10.1.2.3:8080", "http://10.1.2.3/"), Decision::Proxy);
        assert_eq!(n("EXAMPLE.com", "http://example.com./"), Decision::Proxy);
        assert_eq!(n("example.com.", "http://example.com./"), Decision::Direct);
    }
}
