//! CPython 3.11.7 urllib.request: `getproxies_environment`, `proxy_bypass_environment`,
//! `ProxyHandler.proxy_open` (Lib/urllib/request.py), `_splitport` (Lib/urllib/parse.py).
//!
//! - For each `<x>_proxy`: lowercase wins when non-empty; a set but empty lowercase variable
//!   removes the uppercase one too; uppercase is used only when lowercase is unset. With
//!   `REQUEST_METHOD` set (CGI), uppercase `HTTP_PROXY` is ignored. No `all_proxy` for http(s).
//! - `*` only as the whole value. Entries split at commas, stripped, leading dots removed,
//!   lowercased: `d`, `.d` match `d` and subdomains; `*.d` never matches.
//! - The host is compared as written in the URL, with and without its port: `d:8080`
//!   matches only when the URL spells `:8080`; IPv6 hosts keep their brackets (`[::1]`).
//!   No CIDR. Trailing dots are not ignored.

use std::sync::Arc;

use super::{Client, Decide, Expr, Verdict, with_scheme};
use crate::noproxy::entry::Intent;
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{SSL_CERT, TrustVar};

/// One `<x>_proxy` value as `getproxies_environment` leaves it: (variable, value).
pub(crate) fn getproxies_value(env: &Env, key: &str) -> Option<(&'static str, String)> {
    let (lower, upper): (&'static str, &'static str) = match key {
        "no" => ("no_proxy", "NO_PROXY"),
        "http" => ("http_proxy", "HTTP_PROXY"),
        "https" => ("https_proxy", "HTTPS_PROXY"),
        _ => ("all_proxy", "ALL_PROXY"),
    };
    match env.get(lower) {
        Some("") => None,
        Some(v) => Some((lower, v.to_owned())),
        None => {
            if key == "http" && env.contains("REQUEST_METHOD") {
                return None;
            }
            env.get(upper)
                .filter(|v| !v.is_empty())
                .map(|v| (upper, v.to_owned()))
        }
    }
}

/// `_splitport`: `host:digits` → (host, Some(port)); otherwise (host, None).
pub(crate) fn splitport(host: &str) -> (&str, Option<&str>) {
    match host.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, Some(p)),
        _ => (host, None),
    }
}

/// `proxy_bypass_environment(host)` with a pre-split list; returns the matching entry.
pub(crate) fn bypass<'a>(
    value: &str,
    names: &'a [(String, String)],
    host: &str,
) -> Option<&'a str> {
    if value == "*" {
        return Some("*");
    }
    let host = host.to_lowercase();
    let (hostonly, _) = splitport(&host);
    names
        .iter()
        .find(|(name, dotted)| {
            hostonly == name
                || host == *name
                || hostonly.ends_with(dotted.as_str())
                || host.ends_with(dotted.as_str())
        })
        .map(|(n, _)| n.as_str())
}

/// The entries of a no_proxy value as `proxy_bypass_environment` reads them:
/// (name, ".name"), stripped, leading dots removed, lowercased.
pub(crate) fn split_names(value: &str) -> Vec<(String, String)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            let n = n.trim_start_matches('.').to_lowercase();
            let dotted = format!(".{n}");
            (n, dotted)
        })
        .collect()
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<(&'static str, String)>,
    names: Vec<(String, String)>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let no_proxy = getproxies_value(env, "no");
        let names = no_proxy
            .as_ref()
            .map(|(_, v)| split_names(v))
            .unwrap_or_default();
        Model {
            no_proxy,
            names,
            http: getproxies_value(env, "http"),
            https: getproxies_value(env, "https"),
        }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        let (proxy, vars) = if t.scheme == "https" {
            (&self.https, "https_proxy, HTTPS_PROXY")
        } else {
            (&self.http, "http_proxy, HTTP_PROXY")
        };
        let Some((pvar, pval)) = proxy else {
            return Verdict::no_proxy_for(&t.scheme, vars);
        };
        // Request.host: the authority as written (userinfo, IPv6 in brackets, the port text
        // if spelled), lowercased by proxy_bypass_environment.
        let mut host = t
            .raw_userinfo
            .as_ref()
            .map(|u| format!("{u}@"))
            .unwrap_or_default();
        if t.ipv6 {
            host.push_str(&format!("[{}]", t.raw_host));
        } else {
            host.push_str(&t.raw_host);
        }
        if let Some(p) = &t.raw_port {
            host.push_str(&format!(":{p}"));
        }
        if let Some((var, value)) = &self.no_proxy
            && let Some(e) = bypass(value, &self.names, &host)
        {
            return Verdict::direct_matched(var, e, format!("{var} entry {e:?} matches {host}"));
        }
        Verdict::proxied(
            pvar,
            with_scheme(pval, &t.scheme),
            self.no_proxy.as_ref().map(|(n, _)| *n),
        )
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    express_urllib(i, "python-urllib", true)
}

/// Shared by urllib and requests (which also consults urllib). `bracket_v6`: urllib keeps
/// IPv6 brackets in the compared host.
pub(crate) fn express_urllib(i: &Intent, who: &str, bracket_v6: bool) -> Result<Expr, String> {
    let default_port = |p: u16| {
        if p == 80 || p == 443 {
            Err(format!(
                "{who} compares the port only when the URL spells it, so :{p} does not match \
                 a URL that leaves out its default port"
            ))
        } else {
            Ok(())
        }
    };
    match i {
        Intent::All => Expr::one("*"),
        Intent::Name { name, port, .. } => match port {
            Some(p) => {
                default_port(*p)?;
                Expr::one(format!("{name}:{p}"))
            }
            None => Expr::one(name.clone()),
        },
        Intent::Ip { addr, port } => {
            let a = if addr.is_ipv6() && bracket_v6 {
                format!("[{addr}]")
            } else {
                addr.to_string()
            };
            let warn_v6 = addr.is_ipv6();
            let e = match port {
                Some(p) => {
                    default_port(*p)?;
                    Expr::one(format!("{a}:{p}"))?
                }
                None => Expr::one(a)?,
            };
            Ok(if warn_v6 {
                e.warn(format!(
                    "{who} compares IPv6 hosts as written in the URL: only [{addr}] matches"
                ))
            } else {
                e
            })
        }
        Intent::Cidr(_) => Err(format!(
            "{who} has no CIDR support in NO_PROXY (urllib.request.proxy_bypass_environment)"
        )),
    }
}

/// The dialect `python-urllib`.
pub(crate) struct PythonUrllib;

impl Client for PythonUrllib {
    fn name(&self) -> &'static str {
        "python-urllib"
    }
    fn modelled_version(&self) -> &'static str {
        "CPython 3.11.7 urllib.request"
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
    fn variables() {
        assert_eq!(d(&[("HTTP_PROXY", "p:1")], "http://x/"), Decision::Proxy);
        assert_eq!(
            d(&[("HTTP_PROXY", "p:1"), ("http_proxy", "")], "http://x/"),
            Decision::Direct
        );
        assert_eq!(
            d(
                &[("HTTP_PROXY", "p:1"), ("REQUEST_METHOD", "GET")],
                "http://x/"
            ),
            Decision::Direct
        );
        assert_eq!(d(&[("HTTP_PROXY", "p:1")], "https://x/"), Decision::Direct);
        assert_eq!(d(&[("ALL_PROXY", "p:1")], "http://x/"), Decision::Direct);
        assert_eq!(
            d(&[P, ("NO_PROXY", "x"), ("no_proxy", "")], "http://x/"),
            Decision::Proxy
        );
        assert_eq!(d(&[P, ("NO_PROXY", "x")], "http://x/"), Decision::Direct);
    }

    #[test]
    fn entries() {
        let n = |np: &str, url: &str| d(&[P, ("no_proxy", np)], url);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://a.EXAMPLE.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(n("*.example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(n("*", "http://x/"), Decision::Direct);
        assert_eq!(n("a, *", "http://x/"), Decision::Proxy);
        assert_eq!(n(" x ,a", "http://x/"), Decision::Direct);
        assert_eq!(n("x:8080", "http://x:8080/"), Decision::Direct);
        assert_eq!(n("x:80", "http://x/"), Decision::Proxy);
        assert_eq!(n("x:80", "http://x:80/"), Decision::Direct);
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Proxy);
        assert_eq!(n("[::1]", "http://[::1]:8080/"), Decision::Direct);
        assert_eq!(n("::1", "http://[::1]/"), Decision::Proxy);
        assert_eq!(n("example.com", "http://example.com./"), Decision::Proxy);
    }
}
