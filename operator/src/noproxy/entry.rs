//! Intents: what must go direct, parsed from one NO_PROXY-style entry.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Which names a name intent sends direct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NameScope {
    /// Exactly this host (`registry.internal`). Clients that also send its subdomains
    /// direct are fine: subdomains of a host are not part of the intent.
    Host,
    /// The domain and every subdomain (`.corp.example`).
    Domain,
    /// Subdomains only (`*.corp.example`); the apex is not part of the intent.
    Subdomains,
}

/// One thing that must go direct (not through the proxy).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Intent {
    /// Everything (`*`).
    All,
    /// A host name or domain, lowercase, without trailing dot, optionally one port only.
    Name {
        /// Lowercase ASCII name without leading `.`/`*.` and without trailing dot.
        name: String,
        /// Host, domain or subdomains.
        scope: NameScope,
        /// Only this destination port, when set.
        port: Option<u16>,
    },
    /// One IP address, optionally one port only.
    Ip {
        /// The address.
        addr: IpAddr,
        /// Only this destination port, when set.
        port: Option<u16>,
    },
    /// An IP network (prefix shorter than the address length), host bits cleared.
    Cidr(IpNet),
}

/// A malformed entry: the entry as given and why it was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid NO_PROXY entry {entry:?}: {reason}")]
pub struct ParseError {
    /// The entry as given.
    pub entry: String,
    /// Why it was rejected.
    pub reason: String,
}

fn err(entry: &str, reason: impl Into<String>) -> ParseError {
    ParseError {
        entry: entry.to_owned(),
        reason: reason.into(),
    }
}

impl Intent {
    /// Parses one entry: `*`, `host`, `.domain`, `*.domain`, any of these with `:port`,
    /// IPv4, IPv6 (`::1`, `[::1]`, `[::1]:443`), `10.0.0.0/8`, `fd00::/8`. Surrounding
    /// ASCII whitespace is ignored; a trailing dot is dropped; names are lowercased.
    pub fn parse(raw: &str) -> Result<Intent, ParseError> {
        let entry = raw.trim_matches(|c: char| c.is_ascii_whitespace());
        if entry.is_empty() {
            return Err(err(raw, "empty entry"));
        }
        if !entry.is_ascii() {
            return Err(err(
                raw,
                "non-ASCII characters; write the name in its punycode (xn--) form",
            ));
        }
        if entry.contains("://") {
            return Err(err(
                raw,
                "looks like a URL; write only the host (and optionally :port)",
            ));
        }
        if let Some(c) = entry
            .chars()
            .find(|c| c.is_ascii_whitespace() || c.is_ascii_control())
        {
            return Err(err(
                raw,
                format!("contains {c:?}; entries are separated by commas"),
            ));
        }
        if entry == "*" {
            return Ok(Intent::All);
        }
        if let Some(rest) = entry.strip_prefix('[') {
            return parse_bracketed(raw, rest);
        }
        if let Some((addr, prefix)) = entry.split_once('/') {
            return parse_cidr(raw, addr, prefix);
        }
        let colons = entry.matches(':').count();
        if colons >= 2 {
            return match entry.parse::<Ipv6Addr>() {
                Ok(a) => Ok(Intent::Ip {
                    addr: IpAddr::V6(a),
                    port: None,
                }),
                Err(_) => Err(err(
                    raw,
                    "not a valid IPv6 address (write an IPv6 address with a port as [addr]:port)",
                )),
            };
        }
        let (host, port) = match entry.split_once(':') {
            Some((h, p)) => (h, Some(parse_port(raw, p)?)),
            None => (entry, None),
        };
        if host.is_empty() {
            return Err(err(raw, "missing host before the port"));
        }
        if host == "*" {
            return Err(err(raw, "a port on `*` is not supported"));
        }
        if let Ok(v4) = host.parse::<Ipv4Addr>() {
            return Ok(Intent::Ip {
                addr: IpAddr::V4(v4),
                port,
            });
        }
        let (scope, name) = if let Some(n) = host.strip_prefix("*.") {
            (NameScope::Subdomains, n)
        } else if let Some(n) = host.strip_prefix('.') {
            (NameScope::Domain, n)
        } else {
            (NameScope::Host, host)
        };
        let name = validate_name(raw, name)?;
        Ok(Intent::Name { name, scope, port })
    }

    /// The port this intent is limited to, if any.
    pub fn port(&self) -> Option<u16> {
        match self {
            Intent::Name { port, .. } | Intent::Ip { port, .. } => *port,
            Intent::All | Intent::Cidr(_) => None,
        }
    }
}

fn parse_port(raw: &str, p: &str) -> Result<u16, ParseError> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err(raw, format!("port {p:?} is not a number")));
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => Err(err(raw, format!("port {p} is outside 1..=65535"))),
        Ok(n) => Ok(n),
    }
}

fn parse_bracketed(raw: &str, rest: &str) -> Result<Intent, ParseError> {
    let Some((inner, after)) = rest.split_once(']') else {
        return Err(err(raw, "missing closing `]`"));
    };
    if inner.contains('/') {
        return Err(err(
            raw,
            "write an IPv6 CIDR without brackets, e.g. fd00::/8",
        ));
    }
    let addr = inner
        .parse::<Ipv6Addr>()
        .map_err(|_| err(raw, "not a valid IPv6 address inside `[...]`"))?;
    let port = match after {
        "" => None,
        p => match p.strip_prefix(':') {
            Some(p) => Some(parse_port(raw, p)?),
            None => return Err(err(raw, "unexpected text after `]`")),
        },
    };
    Ok(Intent::Ip {
        addr: IpAddr::V6(addr),
        port,
    })
}

fn parse_cidr(raw: &str, addr: &str, prefix: &str) -> Result<Intent, ParseError> {
    let ip: IpAddr = addr.parse().map_err(|_| {
        err(
            raw,
            format!("{addr:?} is not an IP address (CIDR notation)"),
        )
    })?;
    let max = match ip {
        IpAddr::V4(_) => 32u8,
        IpAddr::V6(_) => 128u8,
    };
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) || prefix.len() > 3 {
        return Err(err(
            raw,
            format!("prefix length {prefix:?} is not a number"),
        ));
    }
    let len: u8 = prefix
        .parse()
        .map_err(|_| err(raw, format!("prefix length {prefix} is too large")))?;
    if len > max {
        return Err(err(
            raw,
            format!("prefix length {len} exceeds {max} for this address family"),
        ));
    }
    if len == max {
        return Ok(Intent::Ip {
            addr: ip,
            port: None,
        });
    }
    let net = IpNet::new(ip, len).map_err(|e| err(raw, e.to_string()))?;
    Ok(Intent::Cidr(net.trunc()))
}

fn validate_name(raw: &str, name: &str) -> Result<String, ParseError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(err(raw, "empty domain name"));
    }
    if name.len() > 253 {
        return Err(err(raw, "name longer than 253 characters"));
    }
    let mut all_numeric = true;
    for label in name.split('.') {
        if label.is_empty() {
            return Err(err(raw, "empty label (`..` or a leading/trailing dot)"));
        }
        if label.len() > 63 {
            return Err(err(
                raw,
                format!("label {label:?} is longer than 63 characters"),
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            let why = if c == '*' {
                "`*` is only allowed alone or as a leading `*.`".to_owned()
            } else {
                format!("character {c:?} is not allowed in a host name")
            };
            return Err(err(raw, why));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(err(raw, format!("label {label:?} starts or ends with `-`")));
        }
        all_numeric &= label.bytes().all(|b| b.is_ascii_digit());
    }
    if all_numeric {
        return Err(err(raw, "not a valid IPv4 address"));
    }
    Ok(name.to_ascii_lowercase())
}

/// Splits a list at commas, trimming ASCII whitespace around each piece and skipping
/// empty pieces (`"a, b,,c "` → `a`, `b`, `c`). Whitespace inside a piece is kept, so
/// `"a b"` stays one (malformed) entry.
pub fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(',')
        .map(|s| s.trim_matches(|c: char| c.is_ascii_whitespace()))
        .filter(|s| !s.is_empty())
}

/// Formats an IPv6 address with an optional port: `::1` or `[::1]:443`.
pub(crate) fn fmt_ip(addr: IpAddr, port: Option<u16>) -> String {
    match (addr, port) {
        (a, None) => a.to_string(),
        (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
    }
}

impl fmt::Display for Intent {
    /// The canonical spelling; parsing it gives the same intent back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Intent::All => f.write_str("*"),
            Intent::Name { name, scope, port } => {
                let lead = match scope {
                    NameScope::Host => "",
                    NameScope::Domain => ".",
                    NameScope::Subdomains => "*.",
                };
                match port {
                    Some(p) => write!(f, "{lead}{name}:{p}"),
                    None => write!(f, "{lead}{name}"),
                }
            }
            Intent::Ip { addr, port } => f.write_str(&fmt_ip(*addr, *port)),
            Intent::Cidr(net) => write!(f, "{net}"),
        }
    }
}

impl std::str::FromStr for Intent {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Intent::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        Intent::parse(s).unwrap().to_string()
    }

    #[test]
    fn parses_every_form() {
        assert_eq!(ok("Example.COM."), "example.com");
        assert_eq!(ok(".corp.example"), ".corp.example");
        assert_eq!(ok("*.corp.example"), "*.corp.example");
        assert_eq!(ok("*"), "*");
        assert_eq!(ok("registry.internal:5000"), "registry.internal:5000");
        assert_eq!(ok(" 10.1.2.3 "), "10.1.2.3");
        assert_eq!(ok("10.1.2.3:8080"), "10.1.2.3:8080");
        assert_eq!(ok("0:0::1"), "::1");
        assert_eq!(ok("[::1]"), "::1");
        assert_eq!(ok("[FD00::1]:443"), "[fd00::1]:443");
        assert_eq!(ok("10.1.2.3/8"), "10.0.0.0/8");
        assert_eq!(ok("10.1.2.3/32"), "10.1.2.3");
        assert_eq!(ok("fd00::/8"), "fd00::/8");
        assert_eq!(ok("_svc.example"), "_svc.example");
        assert_eq!(ok("xn--9ca.com"), "xn--9ca.com");
    }

    #[test]
    fn rejects_malformed_with_reason() {
        for (e, why) in [
            ("10.0.0.0/33", "exceeds 32"),
            ("fd00::/129", "exceeds 128"),
            ("http://x", "URL"),
            ("a b", "separated by commas"),
            ("", "empty"),
            ("  ", "empty"),
            ("é.com", "punycode"),
            ("example.com:0", "outside"),
            ("example.com:99999", "outside"),
            ("example.com:http", "not a number"),
            ("a..b", "empty label"),
            ("a*.com", "`*`"),
            ("*:80", "port on `*`"),
            ("10.0.0", "IPv4"),
            ("10.0.0.256", "IPv4"),
            ("[::1", "closing"),
            ("[::1]x", "after `]`"),
            ("fd00::zz", "IPv6"),
            ("-a.com", "starts or ends"),
            (".", "empty domain"),
            ("x/8", "not an IP"),
        ] {
            let got = Intent::parse(e).unwrap_err();
            assert_eq!(got.entry, e);
            assert!(got.reason.contains(why), "{e:?}: {}", got.reason);
            assert!(got.to_string().contains(&format!("{e:?}")));
        }
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = Intent::parse(&s);
        }

        #[test]
        fn parse_never_panics_on_entry_like(s in "[-*.:/\\[\\]a-f0-9 ,_]{0,30}") {
            if let Ok(i) = Intent::parse(&s) {
                // The canonical spelling parses back to the same intent.
                proptest::prop_assert_eq!(Intent::parse(&i.to_string()).unwrap(), i);
            }
        }
    }
}
