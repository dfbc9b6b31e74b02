//! Ruby 3.1.2 (Debian 12) Net::HTTP with the default `p_addr = :ENV`: net/http.rb
//! `Net::HTTP#proxy_uri` calls `URI::HTTP.new("http", nil, address, port, ...).find_proxy`,
//! uri/generic.rb `URI::Generic#find_proxy` and `URI::Generic.use_proxy?`.
//!
//! - Net::HTTP always asks for `http_proxy` (then `HTTP_PROXY`), also for https requests.
//!   Lowercase wins when set, even empty (empty: no proxy). Same for `no_proxy`/`NO_PROXY`
//!   (an empty `no_proxy` hides `NO_PROXY`). CGI (`REQUEST_METHOD` set): only lowercase
//!   `http_proxy`, else `CGI_HTTP_PROXY`.
//! - The host is resolved (`IPSocket.getaddress`); a 127.x or ::1 address never uses the
//!   proxy. Modelled assumption: IP literals "resolve" to themselves, `localhost` to
//!   127.0.0.1 (/etc/hosts), and other names to some non-loopback IPv4 address that is
//!   unknown here: only `0.0.0.0/0` surely contains it, so other IP/CIDR entries apply to
//!   IP-literal URLs only. (Ruby really applies them to the resolved address.)
//! - A proxy value without `scheme://` makes `URI.parse` raise (request error).
//! - Entries are scanned with `/([^:,\s]+)(?::(\d+))?/`: `d` matches `d` and subdomains,
//!   `.d` only subdomains, `*` and `*.d` nothing; `:port` compares with the URL port or the
//!   default. IPv4 and IPv4 CIDR (IPAddr) apply to the resolved address. IPv6 entries are
//!   cut at every `:` into pieces (`fd00::1` → `fd00`, `1`) that match as names.

use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::{Client, Decide, Expr, Verdict};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{SSL_CERT, TrustVar};

#[derive(Clone, Debug)]
struct Token {
    host: String,
    port: Option<u32>,
    net: Option<IpNet>,
}

#[derive(Clone, Debug)]
pub(crate) struct Model {
    no_proxy: Option<&'static str>,
    tokens: Vec<Token>,
    proxy: Option<(&'static str, String)>,
}

/// `no_proxy.scan(/([^:,\s]+)(?::(\d+))?/)`.
fn scan(value: &str) -> Vec<Token> {
    let sep = |c: char| c == ':' || c == ',' || c.is_ascii_whitespace() || c == '\x0b';
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find(|c: char| !sep(c)) {
        rest = &rest[start..];
        let end = rest.find(sep).unwrap_or(rest.len());
        let host = &rest[..end];
        rest = &rest[end..];
        let mut port = None;
        if let Some(after) = rest.strip_prefix(':') {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            if n > 0 {
                port = Some(after[..n].parse::<u32>().unwrap_or(u32::MAX));
                rest = &after[n..];
            }
        }
        out.push(Token {
            host: host.to_lowercase(),
            port,
            net: ipaddr_new(host),
        });
    }
    out
}

/// `IPAddr.new(p_host)`: an address or a network (`/len` or `/mask`), else invalid.
fn ipaddr_new(s: &str) -> Option<IpNet> {
    if let Ok(n) = s.parse::<IpNet>() {
        return Some(n.trunc());
    }
    s.parse::<IpAddr>().ok().map(IpNet::from)
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let cgi = env.contains("REQUEST_METHOD");
        let proxy = if cgi {
            env.get("http_proxy")
                .map(|v| ("http_proxy", v))
                .or_else(|| env.get("CGI_HTTP_PROXY").map(|v| ("CGI_HTTP_PROXY", v)))
        } else {
            env.first_set(&["http_proxy", "HTTP_PROXY"])
        };
        let np = env.first_set(&["no_proxy", "NO_PROXY"]);
        Model {
            no_proxy: np.map(|(n, _)| n),
            tokens: np.map(|(_, v)| scan(v)).unwrap_or_default(),
            proxy: proxy
                .filter(|(_, v)| !v.is_empty())
                .map(|(n, v)| (n, v.to_owned())),
        }
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        let Some((pvar, pval)) = &self.proxy else {
            return Verdict::no_proxy_for(
                &t.scheme,
                "http_proxy, HTTP_PROXY (Net::HTTP reads these for https too)",
            );
        };
        let hostname = t.raw_host.as_str();
        let addr: Option<IpAddr> = if hostname == "localhost" {
            Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
        } else {
            hostname.parse().ok()
        };
        let loopback = match addr {
            Some(IpAddr::V4(a)) => a.octets()[0] == 127,
            Some(IpAddr::V6(a)) => a.is_loopback(),
            None => false,
        };
        if loopback {
            return Verdict::direct(
                "Ruby resolves the host to a loopback address and never proxies it (URI::Generic#find_proxy)",
            );
        }
        let port = u32::from(t.port);
        let dothost = format!(".{hostname}");
        let hit = self.tokens.iter().find(|tok| {
            if tok.port.is_some_and(|p| p != port) {
                return false;
            }
            let name_hit = if tok.host.starts_with('.') {
                hostname.ends_with(tok.host.as_str())
            } else {
                dothost.len() > tok.host.len()
                    && dothost.ends_with(tok.host.as_str())
                    && dothost.as_bytes()[dothost.len() - tok.host.len() - 1] == b'.'
            };
            let net_hit = match (addr, tok.net) {
                (Some(a), Some(n)) => n.contains(&a),
                // An unknown resolved IPv4 address: only a /0 surely contains it.
                (None, Some(IpNet::V4(n))) => n.prefix_len() == 0,
                _ => false,
            };
            name_hit || net_hit
        });
        if let Some(tok) = hit {
            let var = self.no_proxy.unwrap_or("no_proxy");
            let entry = match tok.port {
                Some(p) => format!("{}:{p}", tok.host),
                None => tok.host.clone(),
            };
            return Verdict::direct_matched(
                var,
                &entry,
                format!("{var} entry {entry:?} matches {hostname}:{port}"),
            );
        }
        if !pval.contains("://") {
            return Verdict::error(format!(
                "URI::InvalidURIError: {pvar} has no scheme (URI.parse in find_proxy)"
            ));
        }
        Verdict::proxied(pvar, pval.clone(), self.no_proxy)
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    let port = |p: &Option<u16>| p.map(|p| format!(":{p}")).unwrap_or_default();
    match i {
        Intent::All => {
            Err("Ruby has no wildcard: `*` is compared as a name (URI::Generic.use_proxy?)".into())
        }
        Intent::Name {
            name,
            scope,
            port: p,
        } => match scope {
            NameScope::Host | NameScope::Domain => Expr::one(format!("{name}{}", port(p))),
            NameScope::Subdomains => Expr::one(format!(".{name}{}", port(p))),
        },
        Intent::Ip {
            addr: IpAddr::V4(a),
            port: p,
        } => Expr::one(format!("{a}{}", port(p))),
        Intent::Ip {
            addr: IpAddr::V6(_),
            ..
        }
        | Intent::Cidr(IpNet::V6(_)) => Err(
            "Ruby cuts NO_PROXY entries at every `:` (URI::Generic.use_proxy?), so an IPv6 entry \
             never matches and its pieces match other names"
                .into(),
        ),
        // Ruby also applies it to names that resolve into it (see the module notes).
        Intent::Cidr(n @ IpNet::V4(_)) => Expr::one(n.to_string()),
    }
}

/// The dialect `ruby`.
pub(crate) struct Ruby;

impl Client for Ruby {
    fn name(&self) -> &'static str {
        "ruby"
    }
    fn modelled_version(&self) -> &'static str {
        "Ruby 3.1.2 net/http + uri (Debian 12 package ruby 1:3.1)"
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
            d(&[("HTTPS_PROXY", "http://p:1")], "https://x/"),
            Decision::Direct
        );
        assert_eq!(
            d(&[("HTTP_PROXY", "http://p:1")], "https://x/"),
            Decision::Proxy
        );
        assert_eq!(
            d(
                &[("http_proxy", ""), ("HTTP_PROXY", "http://p:1")],
                "http://x/"
            ),
            Decision::Direct
        );
        assert_eq!(
            d(&[P, ("no_proxy", ""), ("NO_PROXY", "x")], "http://x/"),
            Decision::Proxy
        );
        assert_eq!(d(&[P], "http://localhost:8080/"), Decision::Direct);
        assert_eq!(d(&[P], "http://127.0.0.9/"), Decision::Direct);
        let n = |np: &str, url: &str| d(&[P, ("NO_PROXY", np)], url);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://badexample.com/"), Decision::Proxy);
        assert_eq!(n(".example.com", "http://example.com/"), Decision::Proxy);
        assert_eq!(n("*.example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(n("*", "http://x/"), Decision::Proxy);
        assert_eq!(n("x:80", "http://x/"), Decision::Direct);
        assert_eq!(n("x:8080", "http://x/"), Decision::Proxy);
        assert_eq!(n("10.0.0.0/8", "http://10.1.2.3/"), Decision::Direct);
        assert_eq!(
            n("10.1.2.3:8080", "http://10.1.2.3:8080/"),
            Decision::Direct
        );
        assert_eq!(n("fd00::1", "http://10.0.0.1/"), Decision::Direct);
        assert_eq!(n("fd00::1", "http://[fd00::1]/"), Decision::Proxy);
        assert_eq!(n("a b", "http://b/"), Decision::Direct);
        assert_eq!(n("0.0.0.0/0", "http://example.com/"), Decision::Direct);
        assert_eq!(d(&[("http_proxy", "p:3128")], "http://x/"), Decision::Error);
    }
}
