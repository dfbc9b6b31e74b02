//! reqwest 0.13.5 (system proxy = hyper-util 0.1.21 client/proxy/matcher.rs
//! `Builder::from_env`, `get_first_env`, `NoProxy::from_string`, `DomainMatcher::contains`).
//!
//! - Uppercase first, then lowercase; the first that is set wins, even empty.
//!   `HTTP_PROXY`/`HTTPS_PROXY`, each falling back to `ALL_PROXY`; a value that does not
//!   parse is ignored. With `REQUEST_METHOD` set (CGI) no proxy is used at all.
//! - Entries split at commas and trimmed. IP hosts are compared only with IP entries
//!   (address or CIDR v4/v6, unbracketed); names only with name entries: `d` and `.d` match
//!   `d` and subdomains, `*` matches every name (not IP literals), `*.d` nothing.
//!   Case-insensitive. Entries with a port never match; trailing dots are not ignored.

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::{Client, Decide, Expr, PORT_NAME_ONLY, Verdict, with_scheme};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{SSL_CERT, TrustVar};

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<&'static str>,
    ips: Vec<(IpNet, String)>,
    domains: Vec<String>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
    cgi: bool,
}

/// `parse_env_uri`: http(s)/socks URLs or `host:port` without scheme; anything else is
/// ignored (as if unset).
fn parse_env_uri(v: &str) -> bool {
    if v.is_empty() || v.contains(char::is_whitespace) {
        return false;
    }
    match v.split_once("://") {
        Some((s, _)) => {
            matches!(
                s,
                "http" | "https" | "socks4" | "socks4a" | "socks5" | "socks5h"
            ) && super::valid_proxy_url(v)
        }
        None => super::valid_proxy_url(&format!("http://{v}")),
    }
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let np = env.first_set(&["NO_PROXY", "no_proxy"]);
        let (mut ips, mut domains) = (Vec::new(), Vec::new());
        if let Some((_, v)) = np {
            for part in v.split(',').map(str::trim) {
                if let Ok(n) = part.parse::<IpNet>() {
                    ips.push((n, part.to_owned()));
                } else if let Ok(a) = part.parse::<IpAddr>() {
                    ips.push((IpNet::from(a), part.to_owned()));
                } else if !part.is_empty() {
                    domains.push(part.to_owned());
                }
            }
        }
        let get = |names: &[&'static str]| {
            env.first_set(names)
                .filter(|(_, v)| parse_env_uri(v))
                .map(|(n, v)| (n, v.to_owned()))
        };
        let all = get(&["ALL_PROXY", "all_proxy"]);
        Model {
            no_proxy: np.map(|(n, _)| n),
            ips,
            domains,
            http: get(&["HTTP_PROXY", "http_proxy"]).or_else(|| all.clone()),
            https: get(&["HTTPS_PROXY", "https_proxy"]).or(all),
            cgi: env.contains("REQUEST_METHOD"),
        }
    }

    fn domain_hit(&self, domain: &str) -> Option<&str> {
        let dl = domain.len();
        self.domains
            .iter()
            .find(|d| {
                if d.eq_ignore_ascii_case(domain)
                    || d.strip_prefix('.')
                        .is_some_and(|s| s.eq_ignore_ascii_case(domain))
                {
                    true
                } else if domain
                    .get(dl.saturating_sub(d.len())..)
                    .is_some_and(|s| s.eq_ignore_ascii_case(d))
                {
                    d.starts_with('.')
                        || (dl > d.len() && domain.as_bytes()[dl - d.len() - 1] == b'.')
                } else {
                    d.as_str() == "*"
                }
            })
            .map(String::as_str)
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if self.cgi {
            return Verdict::direct(
                "REQUEST_METHOD is set (CGI): reqwest uses no proxy from the environment",
            );
        }
        let var = self.no_proxy.unwrap_or("NO_PROXY");
        let hit = match t.raw_host.parse::<IpAddr>() {
            Ok(a) => self
                .ips
                .iter()
                .find(|(n, _)| n.contains(&a))
                .map(|(_, e)| e.as_str()),
            Err(_) => self.domain_hit(&t.raw_host),
        };
        if let Some(e) = hit {
            return Verdict::direct_matched(
                var,
                e,
                format!("{var} entry {e:?} matches {}", t.raw_host),
            );
        }
        let proxy = if t.scheme == "https" {
            &self.https
        } else {
            &self.http
        };
        match proxy {
            Some((n, v)) => Verdict::proxied(n, with_scheme(v, "http"), self.no_proxy),
            None => Verdict::no_proxy_for(&t.scheme, "scheme proxy variable and ALL_PROXY"),
        }
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        // `*` covers names only; IP literals need the two catch-all networks.
        Intent::All => Expr::many(vec!["*".into(), "0.0.0.0/0".into(), "::/0".into()]),
        Intent::Name { port: Some(_), .. } | Intent::Ip { port: Some(_), .. } => Err(format!(
            "reqwest {PORT_NAME_ONLY} (hyper-util client/proxy/matcher.rs NoProxy::contains)"
        )),
        Intent::Name { name, scope, .. } => match scope {
            NameScope::Host | NameScope::Domain => Expr::one(name.clone()),
            NameScope::Subdomains => Ok(Expr::one(format!(".{name}"))?.warn(format!(
                "reqwest has no subdomains-only form: .{name} also sends {name} direct"
            ))),
        },
        Intent::Ip { addr, .. } => Expr::one(addr.to_string()),
        Intent::Cidr(n) => Expr::one(n.to_string()),
    }
}

/// The dialect `rust-reqwest`.
pub(crate) struct RustReqwest;

impl Client for RustReqwest {
    fn name(&self) -> &'static str {
        "rust-reqwest"
    }
    fn modelled_version(&self) -> &'static str {
        "reqwest 0.13.5 with hyper-util 0.1.21 (crates.io)"
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
    const P: (&str, &str) = ("http_proxy", "http://p:3128");

    #[test]
    fn rules() {
        assert_eq!(
            d(&[("ALL_PROXY", "http://p:1")], "https://x/"),
            Decision::Proxy
        );
        assert_eq!(
            d(&[P, ("NO_PROXY", ""), ("no_proxy", "x")], "http://x/"),
            Decision::Proxy
        );
        assert_eq!(
            d(&[P, ("REQUEST_METHOD", "GET")], "http://x/"),
            Decision::Direct
        );
        assert_eq!(
            d(&[("HTTP_PROXY", "http://[::1")], "http://x/"),
            Decision::Direct
        );
        let n = |np: &str, url: &str| d(&[P, ("no_proxy", np)], url);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(n("*.example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(n("a, *", "http://x/"), Decision::Direct);
        assert_eq!(n("*", "http://10.0.0.1/"), Decision::Proxy);
        assert_eq!(n("x:80", "http://x/"), Decision::Proxy);
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Direct);
        assert_eq!(n("fd00::/8", "http://[fd00::1]/"), Decision::Direct);
        assert_eq!(n("[::1]", "http://[::1]/"), Decision::Proxy);
        assert_eq!(n("::1", "http://[::1]/"), Decision::Direct);
        assert_eq!(n("example.com", "http://example.com./"), Decision::Proxy);
        assert_eq!(n("localhost", "http://localhost/"), Decision::Direct);
    }
}
