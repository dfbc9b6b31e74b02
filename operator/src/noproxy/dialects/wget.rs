//! GNU Wget 1.21.3 (Debian 12): src/init.c `defaults` (reads `no_proxy`), src/retr.c
//! `getproxy` / `no_proxy_match`, src/host.c `sufmatch`, src/utils.c `sepstring`.
//!
//! - Only lowercase variables: `no_proxy`, `http_proxy`, `https_proxy`; uppercase ones and
//!   `all_proxy` are ignored. Empty means unset.
//! - Entries split at commas; blanks after a comma are skipped, blanks before one are kept
//!   (and then never match).
//! - Suffix match, case-insensitive: `d` matches `d` and `*.d`; `.d` only subdomains. No
//!   wildcard, no ports, no CIDR; IPs are compared as text. Trailing dots are not ignored.

use std::sync::Arc;

use super::{Client, Decide, Expr, PORT_NAME_ONLY, Verdict, with_scheme};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{TrustVar, WGET};

#[derive(Clone, Debug)]
pub(crate) struct Model {
    list: Option<Vec<String>>,
    http: Option<String>,
    https: Option<String>,
}

/// `sepstring`: split at commas, skipping whitespace right after each comma.
fn sepstring(s: &str) -> Vec<String> {
    s.split(',')
        .enumerate()
        .map(|(i, p)| {
            if i == 0 {
                p.to_owned()
            } else {
                p.trim_start_matches(|c: char| c.is_ascii_whitespace())
                    .to_owned()
            }
        })
        .collect()
}

/// `sufmatch` for one list element.
fn sufmatch(entry: &str, host: &str) -> bool {
    let (e, h) = (entry.as_bytes(), host.as_bytes());
    if h.len() < e.len() || !h[h.len() - e.len()..].eq_ignore_ascii_case(e) {
        return false;
    }
    let k = h.len() - e.len();
    k == 0 || h[k - 1] == b'.' || e.first() == Some(&b'.')
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let get = |n: &str| env.get(n).filter(|v| !v.is_empty()).map(str::to_owned);
        Model {
            list: get("no_proxy").map(|v| sepstring(&v)),
            http: get("http_proxy"),
            https: get("https_proxy"),
        }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if let Some(list) = &self.list
            && let Some(e) = list.iter().find(|e| sufmatch(e, &t.raw_host))
        {
            return Verdict::direct_matched(
                "no_proxy",
                e,
                format!("no_proxy entry {e:?} is a suffix of {}", t.raw_host),
            );
        }
        let (proxy, var) = if t.scheme == "https" {
            (&self.https, "https_proxy")
        } else {
            (&self.http, "http_proxy")
        };
        match proxy {
            Some(p) => Verdict::proxied(
                var,
                with_scheme(p, "http"),
                self.list.as_ref().map(|_| "no_proxy"),
            ),
            None => Verdict::no_proxy_for(&t.scheme, &format!("{var}; wget never reads uppercase")),
        }
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        Intent::All => {
            Err("wget has no wildcard: `*` is compared as a host name (src/host.c sufmatch)".into())
        }
        Intent::Name { port: Some(_), .. } | Intent::Ip { port: Some(_), .. } => {
            Err(format!("wget {PORT_NAME_ONLY} (src/retr.c no_proxy_match)"))
        }
        Intent::Name { name, scope, .. } => match scope {
            NameScope::Host | NameScope::Domain => Expr::one(name.clone()),
            NameScope::Subdomains => Expr::one(format!(".{name}")),
        },
        Intent::Ip { addr, .. } => {
            let e = Expr::one(addr.to_string())?;
            Ok(if addr.is_ipv6() {
                e.warn(format!(
                    "wget compares IPv6 hosts as written in the URL: only [{addr}] matches"
                ))
            } else {
                e
            })
        }
        Intent::Cidr(_) => {
            Err("wget matches NO_PROXY as name suffixes only, no CIDR (src/host.c sufmatch)".into())
        }
    }
}

/// The dialect `wget`.
pub(crate) struct Wget;

impl Client for Wget {
    fn name(&self) -> &'static str {
        "wget"
    }
    fn modelled_version(&self) -> &'static str {
        "GNU Wget 1.21.3 (Debian 12 package 1.21.3-1+deb12u1)"
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
        WGET
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
            d(&[("HTTP_PROXY", "http://p:1")], "http://x/"),
            Decision::Direct
        );
        assert_eq!(d(&[P, ("NO_PROXY", "x")], "http://x/"), Decision::Proxy);
        let n = |np: &str, url: &str| d(&[P, ("no_proxy", np)], url);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(n("*", "http://x/"), Decision::Proxy);
        assert_eq!(n("*.example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(n("a, x", "http://x/"), Decision::Direct);
        assert_eq!(n("x ,a", "http://x/"), Decision::Proxy);
        assert_eq!(n("example.com", "http://example.com./"), Decision::Proxy);
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Proxy);
        assert_eq!(n("10.1.1.1", "http://10.1.1.1:8080/"), Decision::Direct);
        assert_eq!(n("x:80", "http://x/"), Decision::Proxy);
        assert_eq!(n("::1", "http://[::1]/"), Decision::Direct);
    }
}
