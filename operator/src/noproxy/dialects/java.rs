//! The JDK's `HttpURLConnection` and `java.net.http.HttpClient` through the default
//! `ProxySelector` (OpenJDK 17: `sun.net.spi.DefaultProxySelector` `select`,
//! `determineProxies`, `toPattern`, `disjunctToRegex`; HotSpot `arguments.cpp`
//! `parse_options_buffer` for `JAVA_TOOL_OPTIONS`).
//!
//! - The JDK never reads the proxy variables. It reads system properties; from the
//!   environment only `JAVA_TOOL_OPTIONS` sets them: split at whitespace, `'…'`/`"…"` keep
//!   blanks (an unmatched quote stops the JVM), `-Dname=value` (last one wins, `-Dname` is
//!   empty).
//! - Proxy host: `http.proxyHost`, else `proxyHost`, else `socksProxyHost` (https:
//!   `https.proxyHost` first); empty is unset. Port: the same prefix's `…Port`, else the
//!   other prefix's, else 80 for http and **443** for https.
//! - `http.nonProxyHosts` serves http and https. Unset: `localhost|127.*|[::1]|0.0.0.0|[::0]`;
//!   empty: nothing; otherwise the value plus that default. Split at `|`, empty parts skipped,
//!   lowercased, no trimming; `*` alone matches everything, a leading and/or trailing `*` is
//!   a wildcard, any other character is literal. The whole host must match.
//! - The host is the URI's, lowercased, IPv6 with its brackets as written; trailing dots are
//!   kept. No ports, no CIDR. Proxy userinfo does not exist here: credentials need an
//!   application `Authenticator`, and Basic is refused for HTTPS tunnels by default
//!   (`jdk.http.auth.tunneling.disabledSchemes=Basic`).

use std::collections::HashMap;

use super::{Expr, Verdict};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;

/// The variable the JVM reads its options from.
pub const TOOL_OPTIONS: &str = "JAVA_TOOL_OPTIONS";
/// The property holding the bypass list, for http and https.
pub const NON_PROXY_HOSTS: &str = "http.nonProxyHosts";
/// What the JDK bypasses when `http.nonProxyHosts` is unset, and adds to a non-empty one.
pub const DEFAULT_NON_PROXY: &str = "localhost|127.*|[::1]|0.0.0.0|[::0]";

#[derive(Clone, Debug)]
pub(crate) struct Model {
    props: HashMap<String, String>,
    /// Why the JVM does not start (an unmatched quote).
    broken: Option<String>,
}

/// `JAVA_TOOL_OPTIONS` split the way HotSpot splits it, or the error that stops the JVM.
pub fn split_options(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut token = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_ascii_whitespace()) {
            if c != '\'' && c != '"' {
                token.push(c);
                continue;
            }
            loop {
                match chars.next() {
                    Some(q) if q == c => break,
                    Some(x) => token.push(x),
                    None => return Err(format!("Unmatched quote in {TOOL_OPTIONS}")),
                }
            }
        }
        out.push(token);
    }
}

/// The `-D` properties of an options list, last one winning.
pub fn properties(options: &[String]) -> HashMap<String, String> {
    options
        .iter()
        .filter_map(|o| o.strip_prefix("-D"))
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (p.to_owned(), String::new()),
        })
        .collect()
}

/// The options that make the JDK use `http_proxy` and `https_proxy` (URLs; their userinfo
/// is left out: the JDK has no property for it) and bypass `non_proxy_hosts`. `Err` names
/// what the JDK cannot use.
pub fn options(
    http_proxy: &str,
    https_proxy: &str,
    non_proxy_hosts: &str,
) -> Result<String, String> {
    let mut out = Vec::new();
    for (prefix, value) in [("http", http_proxy), ("https", https_proxy)] {
        let url = url::Url::parse(value)
            .map_err(|e| format!("the {prefix} proxy URL does not parse: {e}"))?;
        if url.scheme() != "http" {
            return Err(format!(
                "the JDK speaks plain HTTP to a proxy; a {}:// proxy URL cannot be used",
                url.scheme()
            ));
        }
        let host = url.host_str().filter(|h| !h.is_empty());
        let host = host.ok_or_else(|| format!("the {prefix} proxy URL has no host"))?;
        let port = url.port_or_known_default().unwrap_or(80);
        out.push(format!(
            "-D{prefix}.proxyHost={host} -D{prefix}.proxyPort={port}"
        ));
    }
    out.push(format!("-D{NON_PROXY_HOSTS}={non_proxy_hosts}"));
    Ok(out.join(" "))
}

/// `JAVA_TOOL_OPTIONS` fit for printing: the value of every `-D` property whose name says
/// it is secret (password, secret, token, credential) is `***`, URLs lose their password.
pub fn redact_options(value: &str) -> String {
    let secret = |name: &str| {
        let n = name.to_ascii_lowercase();
        ["password", "secret", "token", "credential"]
            .iter()
            .any(|w| n.contains(w))
    };
    let words: Vec<String> = value
        .split(' ')
        .map(
            |w| match w.strip_prefix("-D").and_then(|p| p.split_once('=')) {
                Some((name, _)) if secret(name) => format!("-D{name}=***"),
                _ => crate::noproxy::redact(w),
            },
        )
        .collect();
    words.join(" ")
}

/// One `nonProxyHosts` part as the JDK's regex would match a lowercased host.
fn disjunct_matches(part: &str, host: &str) -> bool {
    if part == "*" {
        return true;
    }
    let (lead, rest) = match part.strip_prefix('*') {
        Some(r) => (true, r),
        None => (false, part),
    };
    let (trail, core) = match rest.strip_suffix('*') {
        Some(c) => (true, c),
        None => (false, rest),
    };
    match (lead, trail) {
        (true, true) => host.contains(core),
        (true, false) => host.ends_with(core),
        (false, true) => host.starts_with(core),
        (false, false) => host == core,
    }
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let (props, broken) = match env.get(TOOL_OPTIONS).map(split_options) {
            None => (HashMap::new(), None),
            Some(Ok(options)) => (properties(&options), None),
            Some(Err(e)) => (HashMap::new(), Some(e)),
        };
        Model { props, broken }
    }

    fn prop(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(String::as_str)
    }

    /// The proxy for `scheme` (`host:port`, the property naming the host), if one is set.
    fn proxy(&self, scheme: &str) -> Option<(String, &'static str)> {
        let prefixes: [&'static str; 3] = if scheme == "https" {
            ["https.proxy", "proxy", "socksProxy"]
        } else {
            ["http.proxy", "proxy", "socksProxy"]
        };
        let (j, host) = prefixes.iter().enumerate().find_map(|(j, p)| {
            let h = self.prop(&format!("{p}Host")).filter(|h| !h.is_empty())?;
            Some((j, h))
        })?;
        let port_of = |p: &str| {
            self.prop(&format!("{p}Port"))
                .and_then(|v| v.trim().parse::<u16>().ok())
                .filter(|p| *p != 0)
        };
        let port = port_of(prefixes[j])
            .or_else(|| (j < 2).then(|| port_of(prefixes[1 - j])).flatten())
            .unwrap_or(match (j, scheme) {
                (2, _) => 1080,
                (_, "https") => 443,
                _ => 80,
            });
        let kind = if j == 2 { "socks" } else { "http" };
        let var = [
            if scheme == "https" {
                "https.proxyHost"
            } else {
                "http.proxyHost"
            },
            "proxyHost",
            "socksProxyHost",
        ][j];
        Some((format!("{kind}://{host}:{port}"), var))
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if let Some(e) = &self.broken {
            return Verdict::error(format!("{e}: the JVM does not start"));
        }
        let Some((proxy, var)) = self.proxy(&t.scheme) else {
            return Verdict::no_proxy_for(
                &t.scheme,
                &format!(
                    "{}.proxyHost, proxyHost, socksProxyHost from {TOOL_OPTIONS}; the JDK never \
                     reads HTTP_PROXY or NO_PROXY",
                    t.scheme
                ),
            );
        };
        let list = match self.prop(NON_PROXY_HOSTS) {
            None => DEFAULT_NON_PROXY.to_owned(),
            Some("") => String::new(),
            Some(v) => format!("{v}|{DEFAULT_NON_PROXY}"),
        };
        let host = if t.ipv6 {
            format!("[{}]", t.raw_host)
        } else {
            t.raw_host.clone()
        };
        let hit = list
            .split('|')
            .filter(|p| !p.is_empty())
            .find(|p| disjunct_matches(&p.to_lowercase(), &host));
        if let Some(p) = hit {
            return Verdict::direct_matched(
                NON_PROXY_HOSTS,
                p,
                format!("{NON_PROXY_HOSTS} part {p:?} matches {host}"),
            );
        }
        Verdict::proxied(var, proxy, Some(NON_PROXY_HOSTS))
    }
}

pub(crate) fn express(i: &Intent) -> Result<Expr, String> {
    match i {
        Intent::All => Expr::one("*"),
        Intent::Name { port: Some(_), .. } | Intent::Ip { port: Some(_), .. } => Err(
            "the JDK compares http.nonProxyHosts with the host only, so an entry with a port \
             cannot be written (DefaultProxySelector)"
                .into(),
        ),
        Intent::Name { name, scope, .. } => match scope {
            NameScope::Host => Expr::one(name.clone()),
            NameScope::Domain => Expr::many(vec![name.clone(), format!("*.{name}")]),
            NameScope::Subdomains => Expr::one(format!("*.{name}")),
        },
        Intent::Ip { addr, .. } if addr.is_ipv6() => Expr::one(format!("[{addr}]")).map(|e| {
            e.warn(format!(
                "the JDK compares IPv6 hosts as written in the URL: only [{addr}] matches"
            ))
        }),
        Intent::Ip { addr, .. } => Expr::one(addr.to_string()),
        Intent::Cidr(_) => {
            Err("http.nonProxyHosts has host patterns only, no CIDR (DefaultProxySelector)".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noproxy::dialects::Decision;

    fn d(opts: &str, url: &str) -> Verdict {
        let env: Env = [(TOOL_OPTIONS, opts)].into_iter().collect();
        Model::new(&env).decide(&Target::parse(url).unwrap())
    }
    const P: &str = "-Dhttp.proxyHost=p -Dhttp.proxyPort=3128 -Dhttps.proxyHost=p";

    #[test]
    fn options_split_like_hotspot() {
        assert_eq!(
            split_options("  -Da=1\t-Db='x y'z \"-Dc=|\"").unwrap(),
            ["-Da=1", "-Db=x yz", "-Dc=|"]
        );
        assert!(split_options("-Da='x").is_err());
        let p = properties(&split_options("-Da=1 -Da=2 -Db -Xmx1g").unwrap());
        assert_eq!((p["a"].as_str(), p["b"].as_str(), p.len()), ("2", "", 2));
    }

    #[test]
    fn the_variables_are_not_read() {
        let env: Env = [("HTTP_PROXY", "http://p:1"), ("http_proxy", "http://p:1")]
            .into_iter()
            .collect();
        let v = Model::new(&env).decide(&Target::parse("http://x/").unwrap());
        assert_eq!(v.decision, Decision::Direct);
    }

    #[test]
    fn proxy_host_and_port() {
        assert_eq!(d(P, "http://x/").proxy.as_deref(), Some("http://p:3128"));
        // https.proxyPort unset: 443, not http.proxyPort.
        assert_eq!(d(P, "https://x/").proxy.as_deref(), Some("http://p:443"));
        let v = d("-DproxyHost=q -Dhttp.proxyPort=8", "https://x/");
        assert_eq!(v.proxy.as_deref(), Some("http://q:443"));
        let v = d("-Dhttp.proxyHost= -DproxyHost=q -DproxyPort=9", "http://x/");
        assert_eq!(v.proxy.as_deref(), Some("http://q:9"));
        assert_eq!(d("-Da='x", "http://x/").decision, Decision::Error);
    }

    #[test]
    fn non_proxy_hosts() {
        let n = |np: &str, url: &str| d(&format!("{P} -Dhttp.nonProxyHosts={np}"), url).decision;
        assert_eq!(n("example.com", "http://example.com/"), Decision::Direct);
        assert_eq!(n("example.com", "http://a.example.com/"), Decision::Proxy);
        assert_eq!(
            n("*.example.com", "http://a.example.com/"),
            Decision::Direct
        );
        assert_eq!(n("*.example.com", "http://example.com/"), Decision::Proxy);
        assert_eq!(
            n("*example.com", "http://badexample.com/"),
            Decision::Direct
        );
        assert_eq!(n("10.*", "http://10.1.2.3/"), Decision::Direct);
        assert_eq!(n("a*b", "http://axb/"), Decision::Proxy);
        assert_eq!(n("EXAMPLE.com", "https://Example.COM/"), Decision::Direct);
        assert_eq!(n("x| y", "http://y/"), Decision::Proxy);
        assert_eq!(n("x||y", "http://y/"), Decision::Direct);
        assert_eq!(n("example.com", "http://example.com./"), Decision::Proxy);
        assert_eq!(n("10.0.0.0/8", "http://10.1.1.1/"), Decision::Proxy);
        assert_eq!(n("[::1]", "http://[::1]:8080/"), Decision::Direct);
        assert_eq!(n("::1", "http://[::1]/"), Decision::Direct, "default list");
        assert_eq!(n("x", "http://[::2]/"), Decision::Proxy);
        // The default list is added to a set value, and dropped by an empty one.
        assert_eq!(n("x", "http://localhost/"), Decision::Direct);
        assert_eq!(n("", "http://localhost/"), Decision::Proxy);
        assert_eq!(d(P, "http://127.9.9.9/").decision, Decision::Direct);
        assert_eq!(d(P, "http://x/").decision, Decision::Proxy);
    }

    #[test]
    fn options_for_proxy_urls() {
        let o = options("http://u:pw@p:3128", "http://p", "a|*.b").unwrap();
        assert_eq!(
            o,
            "-Dhttp.proxyHost=p -Dhttp.proxyPort=3128 -Dhttps.proxyHost=p -Dhttps.proxyPort=80 \
             -Dhttp.nonProxyHosts=a|*.b"
        );
        assert!(!o.contains("pw"));
        assert!(
            options("https://p", "http://p", "")
                .unwrap_err()
                .contains("https://")
        );
        assert_eq!(d(&o, "https://x.b/").decision, Decision::Direct);
        assert_eq!(d(&o, "https://b/").proxy.as_deref(), Some("http://p:80"));
    }

    #[test]
    fn secrets_in_options_are_redacted() {
        assert_eq!(
            redact_options("-Xmx1g -Dhttp.proxyPassword=pw -Da.Token=t -Du=http://u:pw@h/ -Dx=1"),
            "-Xmx1g -Dhttp.proxyPassword=*** -Da.Token=*** -Du=http://u:***@h/ -Dx=1"
        );
    }

    #[test]
    fn disjuncts() {
        assert!(disjunct_matches("*", ""));
        assert!(disjunct_matches("**", "anything"));
        assert!(disjunct_matches("*mid*", "amidb"));
        assert!(!disjunct_matches("*mid*", "mi"));
    }
}
