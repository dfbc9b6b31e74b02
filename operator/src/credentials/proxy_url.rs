//! Validation of one proxy URL. Messages describe the problem without quoting any part of
//! the value: in a malformed URL any part (even the "port" or "host") may be a password.

use std::net::Ipv6Addr;

/// Schemes named in messages; any other scheme is described, never quoted.
const KNOWN_SCHEMES: &[&str] = &[
    "socks", "socks4", "socks4a", "socks5", "socks5h", "ftp", "ftps", "ws", "wss", "file", "tcp",
    "tls", "ssh", "ssl",
];

const SHAPE: &str = "a proxy URL is http(s)://[user:password@]host[:port]";
const ENCODE: &str = "reserved characters must be percent-encoded (@ as %40, : in the user \
                      name as %3A, / as %2F, ? as %3F, # as %23, % as %25, [ ] as %5B %5D)";

/// Longest proxy URL accepted, in bytes: far beyond a real one, and small next to the
/// environment limits of a process.
pub const MAX_URL: usize = 2048;
/// DNS limits (RFC 1035): a name of at most 253 characters, labels of at most 63.
const MAX_HOST: usize = 253;
const MAX_LABEL: usize = 63;

/// Checks a trimmed proxy URL; the error is a reason that never contains part of `value`.
pub(super) fn validate(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("the value is empty".into());
    }
    if value.len() > MAX_URL {
        return Err(format!(
            "it is {} bytes long; at most {MAX_URL} are accepted",
            value.len()
        ));
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "it contains whitespace or a control character (only leading and trailing \
             whitespace is ignored)"
                .into(),
        );
    }
    let Some((scheme, rest)) = value.split_once("://") else {
        return Err(format!("it has no scheme: {SHAPE}"));
    };
    check_scheme(scheme)?;
    // The user info ends at the last '@': an unencoded '@', '/', '?' or '#' in a password
    // is then reported as such instead of as a strange path or host.
    let hostpart = match rest.rsplit_once('@') {
        Some((userinfo, hostpart)) => {
            check_userinfo(userinfo)?;
            hostpart
        }
        None => rest,
    };
    let end = hostpart.find(['/', '?', '#']).unwrap_or(hostpart.len());
    let (hostport, tail) = hostpart.split_at(end);
    check_tail(tail)?;
    check_hostport(hostport)?;
    // A last check by a full URL parser; its messages are fixed texts without the input.
    match url::Url::parse(value) {
        Ok(u) if u.host().is_some() => Ok(()),
        Ok(_) => Err(format!("it has no host: {SHAPE}")),
        Err(e) => Err(format!("{e}: {SHAPE}")),
    }
}

fn check_scheme(scheme: &str) -> Result<(), String> {
    let lower = scheme.to_ascii_lowercase();
    if lower == "http" || lower == "https" {
        return Ok(());
    }
    if KNOWN_SCHEMES.contains(&lower.as_str()) {
        return Err(format!(
            "scheme {lower} is not supported: use http:// or https:// (the proxy protocols \
             HTTP clients read from HTTP_PROXY and HTTPS_PROXY)"
        ));
    }
    let well_formed = lower.starts_with(|c: char| c.is_ascii_alphabetic())
        && lower
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if well_formed {
        Err(format!("its scheme is not http or https: {SHAPE}"))
    } else {
        Err(format!("its scheme is malformed: {SHAPE}"))
    }
}

fn check_userinfo(userinfo: &str) -> Result<(), String> {
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    if user.is_empty() {
        return Err(match password {
            Some(_) => format!("it has a password but no user name: {SHAPE}"),
            None => format!("it has '@' but no user name before it: {SHAPE}"),
        });
    }
    if !userinfo_part_ok(user, false) {
        return Err(format!(
            "the user name contains a character that is not allowed there; {ENCODE}"
        ));
    }
    if let Some(p) = password
        && !userinfo_part_ok(p, true)
    {
        return Err(format!(
            "the password contains a character that is not allowed there; {ENCODE}"
        ));
    }
    Ok(())
}

/// RFC 3986 user info: unreserved, sub-delims, `%XX`, and `:` inside the password.
fn userinfo_part_ok(part: &str, colon_ok: bool) -> bool {
    let b = part.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex2 = b
                    .get(i + 1..i + 3)
                    .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
                if !hex2 {
                    return false;
                }
                i += 3;
                continue;
            }
            c if c.is_ascii_alphanumeric() => {}
            b'-' | b'.' | b'_' | b'~' => {}
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' => {}
            b':' if colon_ok => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

fn check_tail(tail: &str) -> Result<(), String> {
    let after_slash = tail.strip_prefix('/').unwrap_or(tail);
    match after_slash.chars().next() {
        None => Ok(()),
        Some('?') => Err(format!("it has a query ('?'): {SHAPE}")),
        Some('#') => Err(format!("it has a fragment ('#'): {SHAPE}")),
        Some(_) => Err(format!("it has a path (only \"/\" is allowed): {SHAPE}")),
    }
}

fn check_hostport(hostport: &str) -> Result<(), String> {
    let (host_ok, port) = if let Some(inner) = hostport.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return Err(format!("its IPv6 address has no closing ']': {SHAPE}"));
        };
        if addr.parse::<Ipv6Addr>().is_err() {
            return Err(format!("its IPv6 address is not valid: {SHAPE}"));
        }
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("it has characters after the IPv6 address: {SHAPE}")),
        };
        (true, port)
    } else {
        let (host, port) = match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        };
        if host.is_empty() {
            return Err(format!("it has no host: {SHAPE}"));
        }
        if host.len() > MAX_HOST {
            return Err(format!(
                "its host name is {} characters long; DNS allows at most {MAX_HOST}",
                host.len()
            ));
        }
        if host.split('.').any(|l| l.len() > MAX_LABEL) {
            return Err(format!(
                "a label of its host name is longer than the {MAX_LABEL} characters DNS allows"
            ));
        }
        let ok = host
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
        (ok, port)
    };
    if !host_ok {
        return Err(format!(
            "its host may contain only letters, digits, '-', '.' and '_' (or be an IPv6 \
             address in brackets); a password with reserved characters must be \
             percent-encoded: {SHAPE}"
        ));
    }
    match port {
        None => Ok(()),
        Some("") => Err(format!("it has ':' but no port number after it: {SHAPE}")),
        Some(p) if !p.bytes().all(|c| c.is_ascii_digit()) => {
            Err(format!("its port is not a number: {SHAPE}"))
        }
        Some(p) => match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => Ok(()),
            _ => Err("its port is not between 1 and 65535".into()),
        },
    }
}

/// The URL with every user-info byte outside RFC 3986 unreserved characters and `%XX`
/// percent-encoded (`$` as `%24`, `(` as `%28`, `:` inside the password as `%3A`), so the
/// value holds nothing a shell or the kubelet's `$(VAR)` expansion could read as code. The
/// clients decode user info before sending it, so the credentials stay the same. `value` must
/// have passed [`validate`]; the rest of the URL is kept as written.
pub(super) fn encode_userinfo(value: &str) -> String {
    let Some((scheme, rest)) = value.split_once("://") else {
        return value.to_owned();
    };
    let Some((userinfo, hostpart)) = rest.rsplit_once('@') else {
        return value.to_owned();
    };
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (userinfo, None),
    };
    let mut out = format!("{scheme}://{}", encode_part(user));
    if let Some(p) = password {
        out.push(':');
        out.push_str(&encode_part(p));
    }
    out.push('@');
    out.push_str(hostpart);
    out
}

/// Percent-encodes every byte of `part` but unreserved characters and valid `%XX`.
fn encode_part(part: &str) -> String {
    let b = part.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let escape = b[i] == b'%'
            && b.get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
        match b[i] {
            _ if escape => out.push_str(&part[i..i + 3]),
            c if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') => {
                out.push(c as char)
            }
            c => out.push_str(&format!("%{c:02X}")),
        }
        i += if escape { 3 } else { 1 };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{encode_userinfo, validate};

    #[test]
    fn accepts_proxy_urls() {
        for ok in [
            "http://proxy:3128",
            "http://proxy.corp.example:3128/",
            "https://proxy.corp",
            "HTTP://Proxy:8080",
            "http://user:pass@proxy:3128",
            "http://user@proxy:3128",
            "http://us.er-1:p%40ss%2Fw%3Ard!$&'()*+,;=:x@proxy:3128",
            "http://10.0.0.1:3128",
            "http://[fd00::1]:3128",
            "http://[fd00::1]",
            "http://proxy:1",
            "http://proxy:65535",
            "http://my_proxy:3128",
        ] {
            assert_eq!(validate(ok), Ok(()), "{ok}");
        }
    }

    fn reason(value: &str) -> String {
        validate(value).expect_err(value)
    }

    #[test]
    fn limits_length_host_and_labels() {
        let label = "a".repeat(63);
        let host = [label.as_str(); 3].join(".");
        assert_eq!(validate(&format!("http://{host}:3128")), Ok(()));
        let long_host = [label.as_str(); 5].join(".");
        assert!(reason(&format!("http://{long_host}:3128")).contains("at most 253"));
        let long_label = "a".repeat(64);
        assert!(reason(&format!("http://{long_label}.corp:3128")).contains("63"));
        let password = "p".repeat(200 * 1024);
        let huge = format!("http://u:{password}@proxy:3128");
        let r = reason(&huge);
        assert!(
            r.contains("at most 2048") && !r.contains("ppp"),
            "{}",
            &r[..80.min(r.len())]
        );
    }

    #[test]
    fn rejects_with_a_precise_reason() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("http://pro xy:3128", "whitespace"),
            ("http://proxy:3128\n", "control"),
            ("proxy:3128", "no scheme"),
            ("socks5://proxy:1080", "scheme socks5 is not supported"),
            ("SOCKS5H://proxy:1080", "scheme socks5h is not supported"),
            ("gopher://proxy:70", "scheme is not http or https"),
            ("1http://proxy", "scheme is malformed"),
            ("http://", "no host"),
            ("http://:3128", "no host"),
            ("http://user:pw@", "no host"),
            ("http://@proxy", "no user name"),
            ("http://:pw@proxy", "password but no user name"),
            ("http://proxy:", "no port number"),
            ("http://proxy:0", "between 1 and 65535"),
            ("http://proxy:65536", "between 1 and 65535"),
            ("http://proxy:99999999999999999999", "between 1 and 65535"),
            ("http://proxy:31a8", "port is not a number"),
            ("http://proxy:-1", "port is not a number"),
            ("http://proxy:3128/x", "path"),
            ("http://proxy:3128/?a", "query"),
            ("http://proxy:3128?a", "query"),
            ("http://proxy:3128#a", "fragment"),
            ("http://[fd00::1", "no closing"),
            ("http://[zz::1]:1", "IPv6 address is not valid"),
            ("http://[fd00::1]x", "after the IPv6"),
            ("http://pro!xy:3128", "host may contain only"),
            ("http://user:p@ss@proxy:3128", "password contains"),
            ("http://user:p/ss@proxy:3128", "password contains"),
            ("http://user:p?ss@proxy:3128", "password contains"),
            ("http://user:p#ss@proxy:3128", "password contains"),
            ("http://user:p%ss@proxy:3128", "password contains"),
            ("http://user:p%4@proxy:3128", "password contains"),
            ("http://user:p\\ss@proxy:3128", "password contains"),
            ("http://us/er:pw@proxy:3128", "user name contains"),
        ];
        for (value, expected) in cases {
            let r = reason(value);
            assert!(r.contains(expected), "{value:?}: {r}");
        }
        assert!(reason("http://user:p@ss@proxy:3128").contains("%40"));
    }

    #[test]
    fn user_info_is_written_without_shell_characters() {
        let cases = [
            ("http://proxy:3128", "http://proxy:3128"),
            ("http://u:p@proxy:3128/", "http://u:p@proxy:3128/"),
            (
                "http://svc:x$(touch$IFS'PWNED')@proxy.corp.example:3128",
                "http://svc:x%24%28touch%24IFS%27PWNED%27%29@proxy.corp.example:3128",
            ),
            (
                "http://us.er-1:p%40ss%2Fw%3Ard!$&'()*+,;=:x@proxy:3128",
                "http://us.er-1:p%40ss%2Fw%3Ard%21%24%26%27%28%29%2A%2B%2C%3B%3D%3Ax@proxy:3128",
            ),
            (
                "http://a~b:x=y*@[fd00::1]:1",
                "http://a~b:x%3Dy%2A@[fd00::1]:1",
            ),
            ("https://user@proxy", "https://user@proxy"),
        ];
        for (given, written) in cases {
            assert_eq!(validate(given), Ok(()), "{given}");
            let encoded = encode_userinfo(given);
            assert_eq!(encoded, written);
            assert_eq!(validate(&encoded), Ok(()), "{encoded}");
            assert_eq!(
                encode_userinfo(&encoded),
                encoded,
                "encoding twice changes it"
            );
            let userinfo = encoded.split_once("://").unwrap().1.rsplit_once('@');
            let safe = |c: char| c.is_ascii_alphanumeric() || "-._~%:".contains(c);
            assert!(
                userinfo.is_none_or(|(u, _)| u.chars().all(safe)),
                "{encoded}"
            );
        }
    }
}
