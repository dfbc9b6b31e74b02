//! curl 7.88.1 (Debian 12): lib/url.c `create_conn_helper_init_proxy` + `detect_proxy`,
//! lib/noproxy.c `Curl_check_noproxy`.
//!
//! - lib/getenv.c `curl_getenv` returns NULL for an empty value: empty means unset.
//! - `no_proxy`, else `NO_PROXY`.
//! - `http_proxy` only (uppercase `HTTP_PROXY` is ignored on purpose); `https_proxy`, else
//!   `HTTPS_PROXY`; if neither, `all_proxy`, else `ALL_PROXY`.
//! - `*` only as the whole value. Entries separated by commas and/or blanks.
//! - Names: one leading and one trailing dot ignored (entry and host), so `.d` and `d` both
//!   match `d` and its subdomains; `*.d` matches nothing. Case-insensitive. Ports: an entry
//!   with `:port` never matches (compared with the host name only).
//! - IPv4 hosts: exact or CIDR (`/0` is read as an exact address).
//! - IPv6 hosts: url.c strips the brackets before the check, so they are compared as names:
//!   an IPv6 entry matches only in curl's normalized text form, IPv6 CIDRs never match.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use ipnet::{IpNet, Ipv4Net};

use super::{Client, Decide, Expr, PORT_NAME_ONLY, Verdict, with_scheme};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{CURL, TrustVar};

/// One NO_PROXY token, pre-parsed for both host types.
#[derive(Clone, Debug)]
struct Token {
    raw: String,
    /// For names: one trailing then one leading dot removed.
    name: String,
    /// For IPv4 hosts: (network, bits) as `Curl_cidr4_match` reads it, `None` = no match.
    v4: Option<(Ipv4Addr, u32)>,
}

fn token(raw: &str) -> Token {
    let mut name = raw.strip_suffix('.').unwrap_or(raw);
    name = name.strip_prefix('.').unwrap_or(name);
    let v4 = if raw.len() >= 128 {
        None
    } else {
        let (addr, bits) = match raw.split_once('/') {
            Some((a, b)) => (a, atoi(b)),
            None => (raw, 0),
        };
        match (addr.parse::<Ipv4Addr>(), u32::try_from(bits)) {
            (Ok(a), Ok(b)) if b <= 32 => Some((a, b)),
            _ => None,
        }
    };
    Token {
        raw: raw.to_owned(),
        name: name.to_owned(),
        v4,
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<(&'static str, String)>,
    tokens: Vec<Token>,
    http: Option<(&'static str, String)>,
    https: Option<(&'static str, String)>,
}

fn proxy_var(env: &Env, names: &[&'static str]) -> Option<(&'static str, String)> {
    // detect_proxy: the scheme variable, else all_proxy/ALL_PROXY (curl_getenv: empty = unset).
    env.first_non_empty(names)
        .or_else(|| env.first_non_empty(&["all_proxy", "ALL_PROXY"]))
        .map(|(n, v)| (n, v.to_owned()))
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let no_proxy = env
            .first_non_empty(&["no_proxy", "NO_PROXY"])
            .map(|(n, v)| (n, v.to_owned()));
        let tokens = match &no_proxy {
            Some((_, v)) => v
                .split([',', ' ', '\t'])
                .filter(|t| !t.is_empty())
                .map(token)
                .collect(),
            None => Vec::new(),
        };
        Model {
            no_proxy,
            tokens,
            http: proxy_var(env, &["http_proxy"]),
            https: proxy_var(env, &["https_proxy", "HTTPS_PROXY"]),
        }
    }

    fn check(&self, t: &Target) -> Option<&str> {
        let (_, value) = self.no_proxy.as_ref()?;
        if value.is_empty() {
            return None;
        }
        if value == "*" {
            return Some("*");
        }
        let v4 = match t.ip {
            Some(IpAddr::V4(a)) if !t.ipv6 => Some(a),
            _ => None,
        };
        // IPv6 hosts reach Curl_check_noproxy without brackets: compared as a name.
        let v6_text;
        let mut name = if t.ipv6 {
            v6_text = t.ip.map(|a| a.to_string()).unwrap_or_default();
            v6_text.as_str()
        } else {
            t.host.as_str()
        };
        if v4.is_none() {
            name = name.strip_suffix('.').unwrap_or(name);
        }
        self.tokens
            .iter()
            .find(|tok| match v4 {
                Some(a) => tok.v4.is_some_and(|(net, bits)| cidr4_match(a, net, bits)),
                None => name_match(name, &tok.name),
            })
            .map(|t| t.raw.as_str())
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if let Some(entry) = self.check(t) {
            let var = self.no_proxy.as_ref().map_or("no_proxy", |(n, _)| n);
            return Verdict::direct_matched(
                var,
                entry,
                format!("{var} entry {entry:?} matches {}", t.host),
            );
        }
        let (proxy, vars) = if t.scheme == "https" {
            (
                &self.https,
                "https_proxy, HTTPS_PROXY, all_proxy, ALL_PROXY",
            )
        } else {
            (
                &self.http,
                "http_proxy (curl ignores HTTP_PROXY), all_proxy, ALL_PROXY",
            )
        };
        match proxy {
            Some((n, v)) if !v.is_empty() => Verdict::proxied(
                n,
                with_scheme(v, "http"),
                self.no_proxy.as_ref().map(|(n, _)| *n),
            ),
            _ => Verdict::no_proxy_for(&t.scheme, vars),
        }
    }
}

/// Case A/B of `Curl_check_noproxy` for names (`tok` already without its dots).
fn name_match(name: &str, tok: &str) -> bool {
    let (n, k) = (name.as_bytes(), tok.as_bytes());
    if k.len() == n.len() {
        n.eq_ignore_ascii_case(k)
    } else if k.len() < n.len() {
        n[n.len() - k.len() - 1] == b'.' && n[n.len() - k.len()..].eq_ignore_ascii_case(k)
    } else {
        false
    }
}

/// C `atoi`: optional blanks and sign, then digits; 0 when none.
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        n = n.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg { -n } else { n }
}

/// `Curl_cidr4_match` (bits 0 and 32 mean an exact address).
fn cidr4_match(host: Ipv4Addr, net: Ipv4Addr, bits: u32) -> bool {
    if bits != 0 && bits != 32 {
        let mask = u32::MAX << (32 - bits);
        return (u32::from(host) ^ u32::from(net)) & mask == 0;
    }
    host == net
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        Intent::All => Expr::one("*"),
        Intent::Name { port: Some(_), .. } | Intent::Ip { port: Some(_), .. } => Err(format!(
            "curl {PORT_NAME_ONLY} (lib/noproxy.c Curl_check_noproxy)"
        )),
        Intent::Name { name, scope, .. } => match scope {
            NameScope::Host => Expr::one(name.clone()),
            NameScope::Domain => Expr::one(format!(".{name}")),
            NameScope::Subdomains => Ok(Expr::one(format!(".{name}"))?.warn(format!(
                "curl has no subdomains-only form: .{name} also sends {name} direct"
            ))),
        },
        Intent::Ip { addr, .. } => Expr::one(addr.to_string()),
        Intent::Cidr(IpNet::V4(n)) if n.prefix_len() == 0 => {
            // Curl_cidr4_match reads /0 as an exact address: write the two halves.
            let halves = ["0.0.0.0/1", "128.0.0.0/1"].map(str::to_owned).to_vec();
            Expr::many(halves)
        }
        Intent::Cidr(IpNet::V4(n)) => Expr::one(Ipv4Net::to_string(n)),
        Intent::Cidr(IpNet::V6(_)) => Err(
            "curl 7.88.1 compares IPv6 hosts as text (lib/url.c strips the brackets before \
             Curl_check_noproxy), so an IPv6 CIDR never matches"
                .to_owned(),
        ),
    }
}

/// The dialect `curl`.
pub(crate) struct Curl;

impl Client for Curl {
    fn name(&self) -> &'static str {
        "curl"
    }
    fn modelled_version(&self) -> &'static str {
        "curl 7.88.1 (Debian 12 package 7.88.1-10+deb12u15)"
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
        CURL
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

    fn run(env: &[(&str, &str)], url: &str) -> (Decision, Option<String>) {
        let m = Model::new(&env.iter().copied().collect());
        let v = m.decide(&Target::parse(url).unwrap());
        (v.decision, v.matched)
    }
    const P: (&str, &str) = ("http_proxy", "http://p:3128");
    const PS: (&str, &str) = ("https_proxy", "http://p:3128");

    #[test]
    fn variables() {
        // Uppercase HTTP_PROXY is ignored; HTTPS_PROXY is read; ALL_PROXY is a fallback.
        assert_eq!(
            run(&[("HTTP_PROXY", "http://p:1")], "http://x/").0,
            Decision::Direct
        );
        assert_eq!(
            run(&[("HTTPS_PROXY", "http://p:1")], "https://x/").0,
            Decision::Proxy
        );
        assert_eq!(
            run(&[("ALL_PROXY", "http://p:1")], "http://x/").0,
            Decision::Proxy
        );
        // Empty means unset (curl_getenv): falls through to the next variable.
        assert_eq!(
            run(&[("https_proxy", ""), ("ALL_PROXY", "p:1")], "https://x/").0,
            Decision::Proxy
        );
        assert_eq!(
            run(&[("https_proxy", ""), ("HTTPS_PROXY", "p:1")], "https://x/").0,
            Decision::Proxy
        );
        assert_eq!(
            run(&[P, ("no_proxy", ""), ("NO_PROXY", "x")], "http://x/").0,
            Decision::Direct
        );
        assert_eq!(
            run(&[P, ("NO_PROXY", "x")], "http://x/").0,
            Decision::Direct
        );
    }

    #[test]
    fn names() {
        let d = |np: &str, url: &str| run(&[P, PS, ("no_proxy", np)], url).0;
        assert_eq!(d(".example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(d("example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(d("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(d("*.example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(d("EXAMPLE.com.", "http://example.COM./"), Decision::Direct);
        assert_eq!(d("example.com:80", "http://example.com/"), Decision::Proxy);
        assert_eq!(d("*", "http://x/"), Decision::Direct);
        assert_eq!(d("a,*", "http://x/"), Decision::Proxy);
        assert_eq!(d(" *", "http://x/"), Decision::Proxy);
        assert_eq!(d("a b\tx", "http://x/"), Decision::Direct);
    }

    #[test]
    fn ips() {
        let d = |np: &str, url: &str| run(&[P, ("no_proxy", np)], url).0;
        assert_eq!(d("10.0.0.0/8", "http://10.1.2.3/"), Decision::Direct);
        assert_eq!(d("10.0.0.0/33", "http://10.0.0.0/"), Decision::Proxy);
        assert_eq!(d("0.0.0.0/0", "http://10.0.0.1/"), Decision::Proxy);
        assert_eq!(d("10.1.2.3:80", "http://10.1.2.3/"), Decision::Proxy);
        assert_eq!(d("::1", "http://[0:0::1]/"), Decision::Direct);
        assert_eq!(d("[::1]", "http://[::1]/"), Decision::Proxy);
        assert_eq!(d("::/0", "http://[::1]/"), Decision::Proxy);
        assert_eq!(d("fd00::/8", "http://[fd00::1]/"), Decision::Proxy);
    }

    #[test]
    fn spelling() {
        let e = |s: &str| express(&Intent::parse(s).unwrap()).map(|e| e.entries.join(","));
        assert_eq!(e(".d").unwrap(), ".d");
        assert_eq!(e("0.0.0.0/0").unwrap(), "0.0.0.0/1,128.0.0.0/1");
        assert!(e("d:80").is_err());
        assert!(e("fd00::/8").is_err());
    }
}
