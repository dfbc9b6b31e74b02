//! The destination of a request, in the forms the different clients see it.

use std::net::IpAddr;

/// A malformed or unsupported destination URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {url:?}: {reason}")]
pub struct TargetError {
    /// The URL as given.
    pub url: String,
    /// Why it was rejected.
    pub reason: String,
}

/// An `http`/`https` destination, parsed once for every dialect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// `http` or `https`.
    pub scheme: String,
    /// The host as written, lowercased, IPv6 without brackets (what CPython, Go, Ruby,
    /// wget and reqwest compare).
    pub raw_host: String,
    /// `raw_host` before lowercasing (Go compares `localhost` case-sensitively).
    pub raw_host_case: String,
    /// The host as a WHATWG URL parser normalizes it (IPv4 `127.1` → `127.0.0.1`, IPv6
    /// compressed), without brackets (what Node and curl compare).
    pub host: String,
    /// True for an IPv6 literal (`[...]` in the URL).
    pub ipv6: bool,
    /// The host as an IP address, when it is an IP literal (from the normalized host).
    pub ip: Option<IpAddr>,
    /// The port spelled in the URL, even when it is the default (CPython compares it).
    pub explicit_port: Option<u16>,
    /// The port exactly as spelled (`080` stays `080`: Go and CPython compare the text).
    pub raw_port: Option<String>,
    /// The `user[:password]` part as written, lowercased (CPython compares `user@host`).
    pub raw_userinfo: Option<String>,
    /// The port connected to: explicit or the scheme's default.
    pub port: u16,
}

impl Target {
    /// Parses an `http://` or `https://` URL.
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let fail = |reason: &str| TargetError {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let parsed = url::Url::parse(url).map_err(|e| fail(&e.to_string()))?;
        let scheme = parsed.scheme().to_owned();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(fail("only http and https URLs are supported")),
        };
        let (host, ipv6, ip) = match parsed.host() {
            Some(url::Host::Domain(d)) => (d.to_owned(), false, None),
            Some(url::Host::Ipv4(a)) => (a.to_string(), false, Some(IpAddr::V4(a))),
            Some(url::Host::Ipv6(a)) => (whatwg_ipv6(a), true, Some(IpAddr::V6(a))),
            None => return Err(fail("no host")),
        };
        let (raw_userinfo, raw_host_case, raw_port) = raw_authority(url);
        let raw_host = raw_host_case.to_ascii_lowercase();
        let explicit_port = match raw_port {
            Some(p) if !p.is_empty() => Some(p.parse::<u16>().map_err(|_| fail("invalid port"))?),
            _ => None,
        };
        Ok(Target {
            scheme,
            raw_host,
            raw_host_case,
            host,
            ipv6,
            ip,
            explicit_port,
            raw_port: raw_port.filter(|p| !p.is_empty()).map(str::to_owned),
            raw_userinfo: raw_userinfo.map(str::to_ascii_lowercase),
            port: explicit_port.unwrap_or(default_port),
        })
    }

    /// The port only when it is not the scheme's default (httpx's `URL.port`).
    pub fn non_default_port(&self) -> Option<u16> {
        let default = if self.scheme == "https" { 443 } else { 80 };
        self.explicit_port.filter(|p| *p != default)
    }
}

/// The raw userinfo, host (brackets removed) and port text of a URL.
fn raw_authority(url: &str) -> (Option<&str>, String, Option<&str>) {
    let after = url.split_once("://").map_or(url, |(_, r)| r);
    let end = after.find(['/', '?', '#', '\\']).unwrap_or(after.len());
    let auth = &after[..end];
    let (userinfo, hostport) = match auth.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, auth),
    };
    if let Some(rest) = hostport.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').unwrap_or((rest, ""));
        return (userinfo, h.to_owned(), tail.strip_prefix(':'));
    }
    match hostport.rsplit_once(':') {
        Some((h, p)) => (userinfo, h.to_owned(), Some(p)),
        None => (userinfo, hostport.to_owned(), None),
    }
}

/// IPv6 text as the WHATWG URL serializer writes it (hex only, longest zero run
/// compressed), which is what Node's `URL#host` returns.
pub(crate) fn whatwg_ipv6(a: std::net::Ipv6Addr) -> String {
    let seg = a.segments();
    // Longest run of at least two zero pieces, first one on ties.
    let (mut best, mut best_len, mut i) = (None, 1usize, 0usize);
    while i < 8 {
        if seg[i] == 0 {
            let start = i;
            while i < 8 && seg[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best_len = i - start;
                best = Some(start);
            }
        } else {
            i += 1;
        }
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if Some(i) == best {
            out.push_str(if i == 0 { "::" } else { ":" });
            i += best_len;
            continue;
        }
        out.push_str(&format!("{:x}", seg[i]));
        if i < 7 {
            out.push(':');
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_and_ports() {
        let t = Target::parse("http://User:pw@EXAMPLE.com.:80/x").unwrap();
        assert_eq!(t.raw_host, "example.com.");
        assert_eq!(t.host, "example.com.");
        assert_eq!(t.explicit_port, Some(80));
        assert_eq!(t.non_default_port(), None);
        assert_eq!(t.raw_userinfo.as_deref(), Some("user:pw"));
        let t = Target::parse("http://example.com:080/").unwrap();
        assert_eq!(
            (t.explicit_port, t.raw_port.as_deref()),
            (Some(80), Some("080"))
        );
        let t = Target::parse("https://[0:0::1]:8443/").unwrap();
        assert_eq!(
            (t.raw_host.as_str(), t.host.as_str(), t.port),
            ("0:0::1", "::1", 8443)
        );
        assert!(t.ipv6);
        let t = Target::parse("http://127.1/").unwrap();
        assert_eq!(
            (t.raw_host.as_str(), t.host.as_str()),
            ("127.1", "127.0.0.1")
        );
        assert!(Target::parse("ftp://x/").is_err());
        assert!(Target::parse("nonsense").is_err());
    }

    #[test]
    fn whatwg_ipv6_forms() {
        for (i, o) in [
            ("::1", "::1"),
            ("::ffff:1.2.3.4", "::ffff:102:304"),
            ("fd00:0:0:1::", "fd00:0:0:1::"),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:0:2:0:3:0:4:0", "1:0:2:0:3:0:4:0"),
        ] {
            assert_eq!(whatwg_ipv6(i.parse().unwrap()), o);
        }
    }
}
