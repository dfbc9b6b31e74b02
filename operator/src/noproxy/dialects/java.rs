//! The JDK's `HttpURLConnection` and `java.net.http.HttpClient` through the default
//! `ProxySelector` (OpenJDK 17: `sun.net.spi.DefaultProxySelector` `select`,
//! `determineProxies`, `toPattern`, `disjunctToRegex`; HotSpot `arguments.cpp`
//! `parse_options_buffer` for `JAVA_TOOL_OPTIONS`).
//!
//! - The JDK never reads the proxy variables. It reads system properties, which the
//!   environment sets through `JAVA_TOOL_OPTIONS`, then `JDK_JAVA_OPTIONS` (the `java`
//!   launcher's), then `_JAVA_OPTIONS`: each split at C `isspace` (vertical tab included),
//!   `'…'`/`"…"` keep blanks (an unmatched quote stops the JVM), `-Dname=value` (the last one
//!   wins, `-Dname` is empty).
//! - Proxy host: `http.proxyHost`, else `proxyHost`, else `socksProxyHost` (https:
//!   `https.proxyHost` first); empty is unset. Port (`Integer.decode`: `0x`/`#` hex, a leading
//!   `0` octal, no blanks; what does not decode, and 0, is unset): the same prefix's `…Port`,
//!   else the other prefix's, else 80 for http and **443** for https; one outside 1–65535
//!   fails the request.
//! - `http.nonProxyHosts` serves http and https. Unset: `localhost|127.*|[::1]|0.0.0.0|[::0]`;
//!   empty: nothing; otherwise the value plus that default. Split at `|`, empty parts skipped,
//!   lowercased, no trimming; `*` alone matches everything, a leading and/or trailing `*` is
//!   a wildcard, any other character is literal. The whole host must match.
//! - The host is the URI's, lowercased, IPv6 with its brackets as written; trailing dots are
//!   kept. No ports, no CIDR. Proxy userinfo does not exist here: credentials need an
//!   application `Authenticator`, and Basic is refused for HTTPS tunnels by default
//!   (`jdk.http.auth.tunneling.disabledSchemes=Basic`).

use std::collections::HashMap;
use std::sync::Arc;

use super::{Client, Decide, Expr, Verdict};
use crate::noproxy::entry::{Intent, NameScope};
use crate::noproxy::env::Env;
use crate::noproxy::target::Target;
use crate::trust::dialects::{ALL, TrustVar};

/// The variable the JVM reads its options from, and the one the operator writes.
pub const TOOL_OPTIONS: &str = "JAVA_TOOL_OPTIONS";
/// Every variable options come from, in the order they apply (a later property wins).
pub const OPTION_VARS: [&str; 3] = [TOOL_OPTIONS, "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"];
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

/// C `isspace` in the C locale.
fn space(c: &char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// `JAVA_TOOL_OPTIONS` split the way HotSpot splits it, or the error that stops the JVM.
pub fn split_options(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        while chars.next_if(space).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut token = String::new();
        while let Some(c) = chars.next_if(|c| !space(c)) {
            if c != '\'' && c != '"' {
                token.push(c);
                continue;
            }
            loop {
                match chars.next() {
                    Some(q) if q == c => break,
                    Some(x) => token.push(x),
                    None => return Err("Unmatched quote".to_owned()),
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

/// Options fit for printing, one word per option as the JVM splits them: the value of every
/// `-D` property whose name says it is secret (password, passwd, pwd, secret, token,
/// credential, key, jaas) is `***`, URLs lose their password. A value the JVM cannot split
/// (an unmatched quote) is not shown at all.
pub fn redact_options(value: &str) -> String {
    let secret = |name: &str| {
        let n = name.to_ascii_lowercase();
        let words = [
            "passw",
            "pwd",
            "secret",
            "token",
            "credential",
            "key",
            "jaas",
        ];
        words.iter().any(|w| n.contains(w))
    };
    let Ok(options) = split_options(value) else {
        return "*** (unmatched quote)".to_owned();
    };
    let words: Vec<String> = options
        .iter()
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

/// Java's `Integer.decode`: an optional sign, then `0x`, `0X` or `#` for hex, a leading `0`
/// for octal, else decimal; `None` where it throws.
pub fn decode(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = rest.strip_prefix("0x").or(rest.strip_prefix("0X")) {
        (16, h)
    } else if let Some(h) = rest.strip_prefix('#') {
        (16, h)
    } else if rest.len() > 1 && rest.starts_with('0') {
        (8, &rest[1..])
    } else {
        (10, rest)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let v = i64::from_str_radix(digits, radix).ok()?;
    let v = if negative { -v } else { v };
    i32::try_from(v).ok().map(i64::from)
}

impl Model {
    pub fn new(env: &Env) -> Model {
        let mut props = HashMap::new();
        for var in OPTION_VARS {
            match env.get(var).map(split_options) {
                None => {}
                Some(Ok(options)) => props.extend(properties(&options)),
                Some(Err(e)) => {
                    let broken = Some(format!("{e} in {var}"));
                    return Model { props, broken };
                }
            }
        }
        Model {
            props,
            broken: None,
        }
    }

    fn prop(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(String::as_str)
    }

    /// The proxy for `scheme` (`host:port`, the property naming the host), if one is set;
    /// `Err` for a port the JDK refuses.
    fn proxy(&self, scheme: &str) -> Option<Result<(String, &'static str), String>> {
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
                .and_then(decode)
                .filter(|p| *p != 0)
        };
        let port = port_of(prefixes[j])
            .or_else(|| (j < 2).then(|| port_of(prefixes[1 - j])).flatten())
            .unwrap_or(match (j, scheme) {
                (2, _) => 1080,
                (_, "https") => 443,
                _ => 80,
            });
        if !(1..=65535).contains(&port) {
            return Some(Err(format!("port out of range:{port}")));
        }
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
        Some(Ok((format!("{kind}://{host}:{port}"), var)))
    }

    pub fn decide(&self, t: &Target) -> Verdict {
        if let Some(e) = &self.broken {
            return Verdict::error(format!("{e}: the JVM does not start"));
        }
        let (proxy, var) = match self.proxy(&t.scheme) {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                return Verdict::error(format!("IllegalArgumentException: {e}: the request fails"));
            }
            None => {
                return Verdict::no_proxy_for(
                    &t.scheme,
                    &format!(
                        "{}.proxyHost, proxyHost, socksProxyHost from {}; the JDK never reads \
                         HTTP_PROXY or NO_PROXY",
                        t.scheme,
                        OPTION_VARS.join(", ")
                    ),
                );
            }
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

/// The dialect `java`.
pub(crate) struct Java;

impl Client for Java {
    fn name(&self) -> &'static str {
        "java"
    }
    fn modelled_version(&self) -> &'static str {
        "OpenJDK 17.0 HttpURLConnection (Debian 12 package openjdk-17-jdk-headless)"
    }
    fn reads_variables(&self) -> bool {
        false
    }
    fn separator(&self) -> &'static str {
        "|"
    }
    fn cidr_support(&self) -> (bool, bool) {
        (false, false)
    }
    fn matches_subdomains_too(&self, _name: &str) -> bool {
        false
    }
    fn trust_variables(&self) -> &'static [TrustVar] {
        ALL
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
        assert_eq!(split_options("-Da=1\x0b-Db=2").unwrap(), ["-Da=1", "-Db=2"]);
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
        // Integer.decode: hex and octal, no blanks; 0 and what does not decode are unset.
        let port = |p: &str| {
            d(
                &format!("-Dhttp.proxyHost=q -Dhttp.proxyPort={p}"),
                "http://x/",
            )
        };
        assert_eq!(port("0x7A31").proxy.as_deref(), Some("http://q:31281"));
        assert_eq!(port("#50").proxy.as_deref(), Some("http://q:80"));
        assert_eq!(port("0100").proxy.as_deref(), Some("http://q:64"));
        assert_eq!(port("031281").proxy.as_deref(), Some("http://q:80"));
        assert_eq!(port("' 3128'").proxy.as_deref(), Some("http://q:80"));
        assert_eq!(port("99999").decision, Decision::Error);
        assert_eq!(port("-5").decision, Decision::Error);
        assert_eq!(port("99999999999").proxy.as_deref(), Some("http://q:80"));
    }

    #[test]
    fn the_launchers_and_the_override_variable_come_later() {
        let env: Env = [
            (TOOL_OPTIONS, "-Dhttp.proxyHost=a -Dhttp.nonProxyHosts=x"),
            ("JDK_JAVA_OPTIONS", "-Dhttp.nonProxyHosts=y"),
        ]
        .into_iter()
        .collect();
        let v = Model::new(&env).decide(&Target::parse("http://x/").unwrap());
        assert_eq!(v.decision, Decision::Proxy, "JDK_JAVA_OPTIONS wins");
        let env: Env = [("_JAVA_OPTIONS", "-Dhttp.proxyHost=b")]
            .into_iter()
            .collect();
        let v = Model::new(&env).decide(&Target::parse("http://x/").unwrap());
        assert_eq!(v.proxy.as_deref(), Some("http://b:80"));
        let env: Env = [("JDK_JAVA_OPTIONS", "'")].into_iter().collect();
        let v = Model::new(&env).decide(&Target::parse("http://x/").unwrap());
        assert_eq!(v.decision, Decision::Error);
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
        assert_eq!(
            redact_options("-Xmx1g\t'-Ddb.pwd=a b' -Dp.passwd=\"c d\" -Dapi.key=k"),
            "-Xmx1g -Ddb.pwd=*** -Dp.passwd=*** -Dapi.key=***"
        );
        assert_eq!(redact_options("-Ddb.password='x"), "*** (unmatched quote)");
    }

    #[test]
    fn disjuncts() {
        assert!(disjunct_matches("*", ""));
        assert!(disjunct_matches("**", "anything"));
        assert!(disjunct_matches("*mid*", "amidb"));
        assert!(!disjunct_matches("*mid*", "mi"));
    }
}
