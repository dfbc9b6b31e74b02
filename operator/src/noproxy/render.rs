//! Render: a canonical intent set → the NO_PROXY value in one dialect, the intents it
//! cannot express, and warnings.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use serde::Serialize;

use super::Dialect;
use super::dialects::{self, Decision, Expr, Model, java};
use super::entry::{Intent, NameScope};
use super::env::Env;
use super::set::IntentSet;
use super::shape::Shape;
use super::target::Target;

/// Linux `MAX_ARG_STRLEN` (include/uapi/linux/binfmts.h: `PAGE_SIZE * 32` = 131072 bytes with
/// 4 KiB pages): the longest single `NAME=value` string (NUL included) `execve` accepts; a
/// longer one fails with E2BIG and the container does not start. This is the binding limit:
/// the whole argv+envp may use a quarter of RLIMIT_STACK (fs/exec.c `bprm_stack_limits`,
/// 2 MiB with the default 8 MiB stack) and a Secret 1 MiB (Kubernetes `MaxSecretSize`,
/// pkg/apis/core/validation), and both NO_PROXY and no_proxy together stay far below those
/// while each is under this one.
pub const MAX_ARG_STRLEN: usize = 131_072;

/// Above this size a value is reported as large: half of [`MAX_ARG_STRLEN`].
pub const LARGE_VALUE: usize = MAX_ARG_STRLEN / 2;

/// An intent a dialect cannot express, or (`portable`) one written that some clients do not
/// honour.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Uncovered {
    /// The intent in canonical spelling.
    pub entry: String,
    /// Why it is not in the value, or which clients ignore it and why.
    pub reason: String,
    /// Empty: not written, no client sends it direct. Otherwise it is written and only these
    /// clients send it through the proxy (`portable`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
}

/// The result of rendering an intent set for one dialect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rendered {
    /// The NO_PROXY value (comma-separated).
    pub value: String,
    /// Intents left out, with the reason.
    pub uncovered: Vec<Uncovered>,
    /// Things to know about the value (over-matching, size).
    pub warnings: Vec<String>,
}

/// Bytes `execve` counts for the environment string `NAME=value`, its NUL included; over
/// [`MAX_ARG_STRLEN`] the process does not start.
pub fn env_string_len(name: &str, value: &str) -> usize {
    name.len() + 1 + value.len() + 1
}

/// Entries in first-seen order, without repeats.
#[derive(Default)]
struct Entries {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Entries {
    fn extend(&mut self, entries: Vec<String>) {
        for e in entries {
            if self.seen.insert(e.clone()) {
                self.list.push(e);
            }
        }
    }
}

/// Whether a spelling that sends more hosts direct than the intent may be written.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub enum Widen {
    /// Never: an intent the dialect can only express more widely is left out and reported
    /// as uncovered (its hosts go through the proxy).
    #[default]
    Deny,
    /// Write the wider spelling and list the extra hosts that go direct in the warnings.
    Allow,
}

/// Renders `set` for `dialect`, never sending a host direct that the intents route through
/// the proxy. Deterministic: the same set gives the same value.
pub fn render(dialect: Dialect, set: &IntentSet) -> Rendered {
    render_with(dialect, set, Widen::Deny)
}

/// [`render`], with the choice of writing wider spellings.
pub fn render_with(dialect: Dialect, set: &IntentSet, widen: Widen) -> Rendered {
    render_checked(dialect, set, widen, &mut Checks::memoized())
}

/// The answers of the model checks on name intents, kept per [`Shape`] for one render.
struct Checks {
    memo: bool,
    leaky: HashMap<Shape, Vec<&'static str>>,
    dots: HashMap<Shape, Dots>,
}

impl Checks {
    fn memoized() -> Checks {
        Checks {
            memo: true,
            leaky: HashMap::new(),
            dots: HashMap::new(),
        }
    }

    /// The shape to memoize the checks of `intent` spelled as `es` under, if any.
    fn shape(&self, intent: &Intent, es: &[String]) -> Option<Shape> {
        match intent {
            Intent::Name { name, scope, port } if self.memo => Shape::of(name, *scope, *port, es),
            _ => None,
        }
    }
}

/// The answer of `f` for `shape`, asked once per shape (every time without one).
fn memoized<T: Clone>(
    memo: &mut HashMap<Shape, T>,
    shape: Option<&Shape>,
    f: impl FnOnce() -> T,
) -> T {
    let Some(shape) = shape else {
        return f();
    };
    if let Some(v) = memo.get(shape) {
        return v.clone();
    }
    let v = f();
    memo.insert(shape.clone(), v.clone());
    v
}

fn render_checked(
    dialect: Dialect,
    set: &IntentSet,
    widen: Widen,
    checks: &mut Checks,
) -> Rendered {
    let mut entries = Entries::default();
    let mut uncovered = Vec::new();
    let mut warnings = Vec::new();
    let mut host_and_subs: Vec<String> = Vec::new();
    for intent in merge_ips(dialect, set.intents()) {
        match express(dialect, &intent) {
            Ok(Expr {
                entries: es,
                warning,
            }) => {
                let shape = checks.shape(&intent, &es);
                let (es, warning) =
                    match widened(dialect, &intent, es, warning, widen, checks, shape.as_ref()) {
                        Ok(kept) => kept,
                        Err(reason) => {
                            uncovered.push(Uncovered {
                                entry: intent.to_string(),
                                reason,
                                clients: Vec::new(),
                            });
                            continue;
                        }
                    };
                let (dots, dot_warning) = dotted(dialect, &intent, &es, checks, shape.as_ref());
                entries.extend(es);
                entries.extend(dots);
                warnings.extend(warning);
                warnings.extend(dot_warning);
                if let Intent::Name {
                    name,
                    scope: NameScope::Host,
                    ..
                } = &intent
                    && dialects::client(dialect).matches_subdomains_too(name)
                {
                    host_and_subs.push(name.clone());
                }
            }
            Err(reason) => {
                // IPs inside a CIDR this dialect cannot express (or some clients ignore) are
                // written one by one.
                if let Intent::Cidr(net) = &intent {
                    entries.extend(shadowed_ips(dialect, set, net));
                }
                let partial = (dialect == Dialect::Portable)
                    .then(|| portable_in_part(&intent))
                    .flatten();
                let (reason, clients) = match partial {
                    Some(p) => {
                        entries.extend(p.entries);
                        (p.reason, p.ignored_by)
                    }
                    None => (reason, Vec::new()),
                };
                uncovered.push(Uncovered {
                    entry: intent.to_string(),
                    reason,
                    clients,
                });
            }
        }
    }
    warnings.extend(subdomain_warning(dialect, &host_and_subs));
    let value = entries.list.join(dialect.separator());
    warnings.extend(size_warning(&value));
    Rendered {
        value,
        uncovered,
        warnings,
    }
}

/// For a subdomains-only intent (`*.d`): whether the spelling also sends the apex `d`
/// direct, asked of the dialect's own model (of every client, for `portable`). Such a
/// spelling is refused (the reason), or with [`Widen::Allow`] kept with a warning naming the
/// apex instead of the dialect's own.
fn widened(
    dialect: Dialect,
    intent: &Intent,
    entries: Vec<String>,
    warning: Option<String>,
    widen: Widen,
    checks: &mut Checks,
    shape: Option<&Shape>,
) -> Result<(Vec<String>, Option<String>), String> {
    let Intent::Name {
        name,
        scope: NameScope::Subdomains,
        port,
    } = intent
    else {
        return Ok((entries, warning));
    };
    let value = entries.join(dialect.separator());
    let leaky = memoized(&mut checks.leaky, shape, || {
        leaky_clients(dialect, name, *port, &value)
    });
    if leaky.is_empty() {
        return Ok((entries, warning));
    }
    let who = leaky.join(", ");
    match widen {
        Widen::Deny => Err(format!(
            "{who} cannot send only the subdomains of {name} direct: `{value}` would send \
             {name} itself direct too (spec.noProxy.widen: Allow writes it anyway)"
        )),
        Widen::Allow => Ok((
            entries,
            Some(format!(
                "`{value}` for {intent} also sends {name} itself direct in {who} \
                 (spec.noProxy.widen: Allow)"
            )),
        )),
    }
}

/// The clients of `dialect` that send the apex `name` (with `port`) direct with
/// NO_PROXY=`value`.
fn leaky_clients(
    dialect: Dialect,
    name: &str,
    port: Option<u16>,
    value: &str,
) -> Vec<&'static str> {
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    let apex = format!("http://{name}{port}/");
    clients_of(dialect)
        .iter()
        .filter(|d| direct(**d, value, &apex))
        .map(|d| d.name())
        .collect()
}

/// What the trailing-dot check decided for a name intent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dots {
    /// The plain spelling already sends the dotted names direct.
    Plain,
    /// The dotted spellings are added.
    Added,
    /// The dotted names go through the proxy (a warning says so).
    Proxied,
}

/// Names written with a trailing dot (`kubernetes.default.svc.cluster.local.`, which skips
/// the resolver's search list) are compared literally by most clients, so the plain
/// spelling does not send them direct. Returns the dotted spellings to add where they make
/// the dotted forms go direct without sending any other host direct, else a warning.
fn dotted(
    dialect: Dialect,
    intent: &Intent,
    es: &[String],
    checks: &mut Checks,
    shape: Option<&Shape>,
) -> (Vec<String>, Option<String>) {
    let Intent::Name { name, scope, port } = intent else {
        return (Vec::new(), None);
    };
    let check = || dots_check(dialect, name, *scope, *port, es);
    match memoized(&mut checks.dots, shape, check) {
        Dots::Plain => (Vec::new(), None),
        Dots::Added => (es.iter().map(|e| with_dot(e)).collect(), None),
        Dots::Proxied => {
            let warning =
                format!("{dialect}: {name}. (with a trailing dot) goes through the proxy");
            (Vec::new(), Some(warning))
        }
    }
}

/// The models' part of [`dotted`].
fn dots_check(
    dialect: Dialect,
    name: &str,
    scope: NameScope,
    port: Option<u16>,
    es: &[String],
) -> Dots {
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    let url = |host: &str| format!("http://{host}{port}/");
    let covered: Vec<String> = match scope {
        NameScope::Host => vec![url(&format!("{name}."))],
        NameScope::Domain => vec![url(&format!("{name}.")), url(&format!("x.{name}."))],
        NameScope::Subdomains => vec![url(&format!("x.{name}."))],
    };
    // Hosts the plain spelling leaves to the proxy must stay there.
    let mut outside = vec![url(&format!("x{name}.")), url(&format!("x{name}"))];
    if scope == NameScope::Subdomains {
        outside.extend([url(&format!("{name}.")), url(name)]);
    }
    let models = clients_of(dialect);
    let all_direct = |value: &str, urls: &[String]| {
        models
            .iter()
            .all(|m| urls.iter().all(|u| direct(*m, value, u)))
    };
    let sep = dialect.separator();
    let plain = es.join(sep);
    if all_direct(&plain, &covered) {
        return Dots::Plain;
    }
    let dots: Vec<String> = es.iter().map(|e| with_dot(e)).collect();
    let value = format!("{plain}{sep}{}", dots.join(sep));
    let kept_out = |v: &str| {
        outside
            .iter()
            .filter(|u| !models.iter().any(|m| direct(*m, &plain, u)))
            .all(|u| !models.iter().any(|m| direct(*m, v, u)))
    };
    if all_direct(&value, &covered) && kept_out(&value) {
        return Dots::Added;
    }
    Dots::Proxied
}

/// `entry` with a trailing dot on its name, before any port.
fn with_dot(entry: &str) -> String {
    match entry.rsplit_once(':') {
        Some((host, p)) if p.chars().all(|c| c.is_ascii_digit()) && !host.contains(':') => {
            format!("{host}.:{p}")
        }
        _ => format!("{entry}."),
    }
}

/// The clients whose decisions a value in `dialect` must get right: every client for
/// `portable`, else the dialect's own.
fn clients_of(dialect: Dialect) -> Vec<Dialect> {
    if dialect == Dialect::Portable {
        Dialect::clients().collect()
    } else {
        vec![dialect]
    }
}

/// All four proxy variables set, and NO_PROXY/no_proxy = `value`.
fn proxied_env(value: &str) -> Env {
    let proxy = "http://proxy.invalid:3128";
    let java_options = java::options(proxy, proxy, value).unwrap_or_default();
    [
        ("http_proxy", proxy),
        ("HTTP_PROXY", proxy),
        ("https_proxy", proxy),
        ("HTTPS_PROXY", proxy),
        ("no_proxy", value),
        ("NO_PROXY", value),
        (java::TOOL_OPTIONS, &java_options),
    ]
    .into_iter()
    .collect()
}

/// Whether `dialect`'s model sends `url` direct with NO_PROXY=`value` and a proxy set.
fn direct(dialect: Dialect, value: &str, url: &str) -> bool {
    let Ok(target) = Target::parse(url) else {
        return false;
    };
    let env = proxied_env(value);
    Model::new(dialect, &env).is_some_and(|m| m.decide(&target).decision == Decision::Direct)
}

/// The entries of the IPs inside `net` that the canonical set folded into it.
fn shadowed_ips(dialect: Dialect, set: &IntentSet, net: &IpNet) -> Vec<String> {
    let mut out = Vec::new();
    for ip in set.shadowed() {
        if let Intent::Ip { addr, .. } = ip
            && net.contains(addr)
            && let Ok(Expr { entries: es, .. }) = express(dialect, ip)
        {
            out.extend(es);
        }
    }
    out
}

fn subdomain_warning(dialect: Dialect, hosts: &[String]) -> Option<String> {
    const SHOWN: usize = 50;
    if hosts.is_empty() {
        return None;
    }
    let more = hosts.len().saturating_sub(SHOWN);
    let mut list = hosts[..hosts.len().min(SHOWN)].join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    Some(format!(
        "{dialect} has no exact-host form: subdomains of these hosts also go direct: {list}"
    ))
}

fn size_warning(value: &str) -> Option<String> {
    if env_string_len("no_proxy", value) > MAX_ARG_STRLEN {
        Some(format!(
            "the value is {} bytes: NO_PROXY={{value}} exceeds Linux MAX_ARG_STRLEN ({MAX_ARG_STRLEN} \
             bytes), execve fails with E2BIG and the container cannot start",
            value.len()
        ))
    } else if value.len() > LARGE_VALUE {
        Some(format!(
            "the value is {} bytes, more than half of Linux MAX_ARG_STRLEN ({MAX_ARG_STRLEN} bytes \
             per environment string); aggregate addresses into CIDRs where the dialect allows",
            value.len()
        ))
    } else {
        None
    }
}

fn express(dialect: Dialect, intent: &Intent) -> Result<Expr, String> {
    dialects::client(dialect).express(intent)
}

/// For dialects that read CIDRs, port-less single IPs are merged with the CIDRs
/// (`IpNet::aggregate`): same decisions, shorter value.
fn merge_ips(dialect: Dialect, intents: &[Intent]) -> Vec<Intent> {
    let (v4, v6) = dialects::client(dialect).cidr_support();
    if !v4 && !v6 {
        return intents.to_vec();
    }
    let mergeable = |i: &Intent| match i {
        Intent::Ip { addr, port: None } => (addr.is_ipv4() && v4) || (addr.is_ipv6() && v6),
        Intent::Cidr(n) => matches!(n, IpNet::V4(_)) && v4 || matches!(n, IpNet::V6(_)) && v6,
        _ => false,
    };
    let nets: Vec<IpNet> = intents
        .iter()
        .filter(|i| mergeable(i))
        .filter_map(|i| match i {
            Intent::Ip { addr, .. } => Some(IpNet::from(*addr)),
            Intent::Cidr(n) => Some(*n),
            _ => None,
        })
        .collect();
    let mut out: Vec<Intent> = intents.iter().filter(|i| !mergeable(i)).cloned().collect();
    out.extend(IpNet::aggregate(&nets).into_iter().map(|n| {
        if n.prefix_len() == n.max_prefix_len() {
            Intent::Ip {
                addr: n.addr(),
                port: None,
            }
        } else {
            Intent::Cidr(n)
        }
    }));
    out
}

/// An address or network written for `portable` although some clients ignore it.
struct Partial {
    entries: Vec<String>,
    reason: String,
    ignored_by: Vec<String>,
}

/// `portable` for an address or network not every client can express: written as the clients
/// that can express it spell it, when no client then sends anything outside it direct (or
/// fails on the value). The clients that do not send all of it direct are named; they use
/// the proxy for it, as they would without the entry.
fn portable_in_part(intent: &Intent) -> Option<Partial> {
    if !matches!(intent, Intent::Ip { .. } | Intent::Cidr(_)) {
        return None;
    }
    let mut entries: Vec<String> = Vec::new();
    let mut why: Vec<(Dialect, String)> = Vec::new();
    for d in Dialect::clients() {
        match express(d, intent) {
            Ok(e) => {
                for x in e.entries {
                    if !entries.contains(&x) {
                        entries.push(x);
                    }
                }
            }
            Err(reason) => why.push((d, reason)),
        }
    }
    let value = entries.join(",");
    let (inside, mut outside) = probes(intent);
    outside.extend(piece_probes(intent, &entries));
    let mut ignored_by = Vec::new();
    let mut reasons = Vec::new();
    for d in Dialect::clients() {
        // A value the client cannot even read fails it: not portable.
        let model = Model::new(d, &proxied_env(&value))?;
        let decide =
            |u: &String| Target::parse(u).map_or(Decision::Error, |t| model.decide(&t).decision);
        let out: Vec<Decision> = outside.iter().map(decide).collect();
        let ins: Vec<Decision> = inside.iter().map(decide).collect();
        if out
            .iter()
            .chain(&ins)
            .any(|x| *x != Decision::Direct && *x != Decision::Proxy)
            || out.contains(&Decision::Direct)
        {
            return None;
        }
        if ins.contains(&Decision::Proxy) {
            ignored_by.push(d.name().to_owned());
            let own = why.iter().find(|(w, _)| *w == d);
            let reason = own.map_or("sends only part of it direct", |(_, r)| r.as_str());
            reasons.push(format!("{d}: {reason}"));
        }
    }
    if entries.is_empty() || ignored_by.len() == Dialect::clients().count() {
        return None;
    }
    Some(Partial {
        entries,
        reason: format!(
            "written; {} send it through the proxy (no client sends anything outside it \
             direct); {}",
            ignored_by.join(", "),
            reasons.join("; ")
        ),
        ignored_by,
    })
}

/// Hosts no address entry may send direct: an unrelated name, and each piece of a spelling
/// (a client that cuts entries at `:` or `/` matches the pieces as names) that is not
/// inside the intent.
fn piece_probes(intent: &Intent, entries: &[String]) -> Vec<String> {
    let inside = |a: IpAddr| match intent {
        Intent::Ip { addr, .. } => *addr == a,
        Intent::Cidr(net) => net.contains(&a),
        _ => false,
    };
    let mut out = vec!["http://example.org/".to_owned()];
    let cut = |c: char| matches!(c, ':' | '/' | '[' | ']');
    for piece in entries.iter().flat_map(|e| e.split(cut)) {
        if piece.is_empty() || piece.parse::<IpAddr>().is_ok_and(inside) {
            continue;
        }
        let url = format!("http://{piece}/");
        if !out.contains(&url) {
            out.push(url);
        }
    }
    out
}

/// `http://` URL of an address, with a port when given.
fn ip_url(a: IpAddr, port: Option<u16>) -> String {
    let host = match a {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    match port {
        Some(p) => format!("http://{host}:{p}/"),
        None => format!("http://{host}/"),
    }
}

/// The address just above (`up`) or below `a`, if any.
fn neighbour(a: IpAddr, up: bool) -> Option<IpAddr> {
    match a {
        IpAddr::V4(v) => {
            let n = u32::from(v);
            let m = if up {
                n.checked_add(1)
            } else {
                n.checked_sub(1)
            }?;
            Some(Ipv4Addr::from(m).into())
        }
        IpAddr::V6(v) => {
            let n = u128::from(v);
            let m = if up {
                n.checked_add(1)
            } else {
                n.checked_sub(1)
            }?;
            Some(Ipv6Addr::from(m).into())
        }
    }
}

/// URLs inside an address or network intent, and just outside it (the neighbouring
/// addresses, another port).
fn probes(intent: &Intent) -> (Vec<String>, Vec<String>) {
    let around = |lo: IpAddr, hi: IpAddr, port: Option<u16>| -> Vec<String> {
        [neighbour(lo, false), neighbour(hi, true)]
            .into_iter()
            .flatten()
            .map(|a| ip_url(a, port))
            .collect()
    };
    match intent {
        Intent::Ip {
            addr,
            port: Some(p),
        } => {
            let other = if *p == u16::MAX { p - 1 } else { p + 1 };
            let mut outside = around(*addr, *addr, Some(*p));
            outside.push(ip_url(*addr, Some(other)));
            (vec![ip_url(*addr, Some(*p))], outside)
        }
        Intent::Ip { addr, port: None } => (
            vec![ip_url(*addr, None), ip_url(*addr, Some(8443))],
            around(*addr, *addr, None),
        ),
        Intent::Cidr(net) => {
            let (first, last) = (net.network(), net.broadcast());
            let mut inside = vec![ip_url(first, None), ip_url(last, Some(8443))];
            inside.extend(neighbour(first, true).map(|a| ip_url(a, None)));
            (inside, around(first, last, None))
        }
        Intent::All | Intent::Name { .. } => (Vec::new(), Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(d: Dialect, entries: &str) -> Rendered {
        render(d, &IntentSet::parse([entries]).unwrap())
    }

    fn decide_all(value: &str, url: &str) -> Vec<(Dialect, Decision)> {
        let env = proxied_env(value);
        let t = Target::parse(url).unwrap();
        Dialect::clients()
            .map(|d| (d, Model::new(d, &env).unwrap().decide(&t).decision))
            .collect()
    }

    #[test]
    fn portable_keeps_only_what_no_client_misroutes() {
        let out = r(
            Dialect::Portable,
            ".corp.example,registry.internal,*.apps.example,10.0.0.7,10.96.0.0/12,::1,r.example:5000,*",
        );
        assert_eq!(out.value, "");
        assert_eq!(out.uncovered[0].entry, "*");
        assert!(out.uncovered[0].reason.contains("wget"));
        let out = r(
            Dialect::Portable,
            ".corp.example,registry.internal,*.apps.example,10.0.0.7,10.96.0.0/12,fd00::1,r.example:5000",
        );
        // The IPv4 CIDR is written: some clients ignore it (and use the proxy), none sends
        // anything outside it direct.
        assert_eq!(
            out.value,
            "corp.example,.corp.example,corp.example.,.corp.example.,registry.internal,\
             registry.internal.,10.96.0.0/12,10.0.0.7"
        );
        let uncovered: Vec<(&str, &[String])> = out
            .uncovered
            .iter()
            .map(|u| (u.entry.as_str(), u.clients.as_slice()))
            .collect();
        // `*.apps.example`: some clients would send apps.example itself direct too;
        // `fd00::1`: Ruby cuts it into pieces that match other names.
        let ignoring = [
            "wget",
            "python-urllib",
            "python-httpx",
            "node-proxy-from-env",
            "node-undici",
        ]
        .map(String::from);
        assert_eq!(
            uncovered,
            [
                ("*.apps.example", &[][..]),
                ("r.example:5000", &[][..]),
                ("10.96.0.0/12", &ignoring[..]),
                ("fd00::1", &[][..]),
            ]
        );
        assert!(out.uncovered[0].reason.contains("apps.example itself"));
        assert!(out.uncovered[2].reason.starts_with(
            "written; wget, python-urllib, python-httpx, node-proxy-from-env, node-undici send it"
        ));
        assert!(out.uncovered[3].reason.contains("Ruby cuts"));
        for (d, dec) in decide_all(&out.value, "http://10.100.0.1/") {
            let honours = !ignoring.contains(&d.name().to_owned());
            let want = if honours {
                Decision::Direct
            } else {
                Decision::Proxy
            };
            assert_eq!(dec, want, "{d}");
        }
        // Every kept intent: every client sends it direct; a neighbour still goes via proxy.
        for url in [
            "http://corp.example/",
            "https://a.b.corp.example/",
            "http://registry.internal/",
            "http://10.0.0.7/",
        ] {
            for (d, dec) in decide_all(&out.value, url) {
                assert_eq!(dec, Decision::Direct, "{d} {url}");
            }
        }
        for url in [
            "http://badcorp.example/",
            "http://10.0.0.8/",
            "https://example.org/",
        ] {
            for (d, dec) in decide_all(&out.value, url) {
                assert_eq!(dec, Decision::Proxy, "{d} {url}");
            }
        }
    }

    #[test]
    fn each_dialect_value_sends_its_intents_direct() {
        let entries = ".corp.example,registry.internal,10.0.0.7,10.96.0.0/12,fd00::1,r.example:5000,fd00:10::/64";
        let urls = [
            (".corp.example", "http://corp.example/"),
            (".corp.example", "http://a.corp.example/"),
            ("registry.internal", "http://registry.internal/"),
            ("10.0.0.7", "http://10.0.0.7/"),
            ("10.96.0.0/12", "http://10.96.3.4/"),
            ("fd00::1", "http://[fd00::1]/"),
            ("r.example:5000", "http://r.example:5000/"),
            ("fd00:10::/64", "http://[fd00:10::5]:8080/"),
        ];
        for d in Dialect::clients() {
            let out = r(d, entries);
            let env: Env = [
                ("HTTP_PROXY", "http://p:1"),
                ("http_proxy", "http://p:1"),
                ("NO_PROXY", out.value.as_str()),
                ("no_proxy", out.value.as_str()),
            ]
            .into_iter()
            .collect();
            let m = Model::new(d, &env).unwrap();
            for (intent, url) in urls {
                let dec = m.decide(&Target::parse(url).unwrap()).decision;
                if out.uncovered.iter().any(|u| u.entry == intent) {
                    continue;
                }
                assert_eq!(dec, Decision::Direct, "{d}: {url} with {}", out.value);
            }
            assert_eq!(
                m.decide(&Target::parse("http://example.org/").unwrap())
                    .decision,
                Decision::Proxy,
                "{d}"
            );
        }
    }

    #[test]
    fn ips_under_an_uncovered_cidr_come_back() {
        // Written for the clients that read it, and the IP for those that ignore it.
        let out = r(Dialect::Portable, "10.96.0.0/12,10.96.0.1,10.97.0.1:443");
        assert_eq!(out.value, "10.96.0.1,10.96.0.0/12");
        assert_eq!(out.uncovered[0].entry, "10.96.0.0/12");
        for (d, dec) in decide_all(&out.value, "http://10.96.0.1/") {
            assert_eq!(dec, Decision::Direct, "{d}");
        }
        assert_eq!(
            r(Dialect::Go, "10.96.0.0/12,10.96.0.1").value,
            "10.96.0.0/12"
        );
    }

    #[test]
    fn dialect_spellings() {
        // axios trims trailing dots; bare proxy-from-env needs the dotted spellings too.
        assert_eq!(r(Dialect::NodeAxios, ".d").value, "d,.d");
        assert_eq!(r(Dialect::NodeProxyFromEnv, ".d").value, "d,.d,d.,.d.");
        // CIDRs: only axios' own check reads them.
        let pfe = r(Dialect::NodeProxyFromEnv, "10.0.0.0/8,10.0.0.1");
        assert_eq!((pfe.value.as_str(), pfe.uncovered.len()), ("10.0.0.1", 1));
        assert_eq!(
            r(Dialect::NodeAxios, "10.0.0.0/8,fd00::/8,10.0.0.1").value,
            "10.0.0.0/8,fd00::/8"
        );
        let undici = r(Dialect::NodeUndici, "*.d");
        assert_eq!((undici.value.as_str(), undici.uncovered.len()), ("", 1));
        assert_eq!(
            r(Dialect::Go, "[fd00::1],[fd00::2]:443").value,
            "[fd00::2]:443,fd00::1"
        );
        assert_eq!(r(Dialect::PythonUrllib, "fd00::1").value, "[fd00::1]");
        assert_eq!(r(Dialect::RustReqwest, "*").value, "*,0.0.0.0/0,::/0");
        assert_eq!(
            r(Dialect::Go, "10.0.0.0,10.0.0.1,10.0.0.2").value,
            "10.0.0.0/31,10.0.0.2"
        );
        assert_eq!(
            r(Dialect::PythonUrllib, "10.0.0.0,10.0.0.1").value,
            "10.0.0.0,10.0.0.1"
        );
        let h = r(Dialect::PythonHttpx, "fd00::/8,10.0.0.0/8,d:443");
        assert_eq!(h.value, "");
        assert_eq!(h.uncovered.len(), 3);
    }

    /// Policies that wrote `node-proxy-from-env` for axios before the split get the bare
    /// package's value now: it still gives axios the intended decisions.
    #[test]
    fn proxy_from_env_values_hold_in_axios() {
        let out = r(
            Dialect::NodeProxyFromEnv,
            ".corp.example,registry.internal,10.0.0.7,fd00::1,r.example:5000,*.sub.example",
        );
        for (url, want) in [
            ("http://corp.example./", true),
            ("http://a.corp.example/", true),
            ("http://registry.internal./", true),
            ("http://10.0.0.7/", true),
            ("http://[fd00::1]/", true),
            ("http://r.example:5000/", true),
            ("http://a.sub.example./", true),
            ("http://sub.example/", false),
            ("http://xregistry.internal/", false),
            ("http://r.example/", false),
            ("http://example.org/", false),
        ] {
            assert_eq!(
                direct(Dialect::NodeAxios, &out.value, url),
                want,
                "{url} {}",
                out.value
            );
        }
    }

    /// `*.corp.example` (the apex routes through the proxy): each dialect writes it only
    /// where its model sends the subdomains direct and the apex through the proxy; the others
    /// report it uncovered, or with `Widen::Allow` write the wider spelling and say so.
    #[test]
    fn subdomains_only_never_widens_unless_allowed() {
        let set = IntentSet::parse(["*.corp.example"]).unwrap();
        let mut exact = Vec::new();
        for d in Dialect::ALL {
            let out = render(d, &set);
            let models = clients_of(d);
            if out.uncovered.is_empty() {
                exact.push(d.name());
                for m in models {
                    assert!(
                        !direct(m, &out.value, "http://corp.example/"),
                        "{d} via {m}"
                    );
                    assert!(
                        direct(m, &out.value, "http://a.corp.example/"),
                        "{d} via {m}"
                    );
                }
            } else {
                assert_eq!(out.value, "", "{d}");
                assert!(
                    out.uncovered[0].reason.contains("corp.example itself"),
                    "{d}"
                );
                let wide = render_with(d, &set, Widen::Allow);
                assert!(!wide.value.is_empty() && wide.uncovered.is_empty(), "{d}");
                assert!(
                    wide.warnings
                        .iter()
                        .any(|w| w.contains("corp.example itself")),
                    "{d}: {:?}",
                    wide.warnings
                );
            }
        }
        assert_eq!(
            exact,
            [
                "wget",
                "go",
                "python-httpx",
                "node-axios",
                "node-proxy-from-env",
                "ruby",
                "java"
            ]
        );
    }

    /// Dotted names (`x.cluster.local.`) go direct in every dialect, and no lookalike does.
    #[test]
    fn trailing_dot_names_go_direct_too() {
        let set = IntentSet::parse([".cluster.local,registry.internal"]).unwrap();
        for d in Dialect::ALL {
            let out = render(d, &set);
            let models = clients_of(d);
            for m in models {
                for url in [
                    "http://kubernetes.default.svc.cluster.local./",
                    "http://cluster.local./",
                    "http://registry.internal./",
                ] {
                    assert!(
                        direct(m, &out.value, url),
                        "{d} via {m}: {url} {}",
                        out.value
                    );
                }
                for url in ["http://xcluster.local./", "http://xregistry.internal./"] {
                    assert!(
                        !direct(m, &out.value, url),
                        "{d} via {m}: {url} {}",
                        out.value
                    );
                }
            }
        }
        assert_eq!(
            with_dot("registry.internal:5000"),
            "registry.internal.:5000"
        );
        assert_eq!(with_dot(".corp.example"), ".corp.example.");
    }

    proptest::proptest! {
        /// Every parsable entry list renders in every dialect without panicking, and the
        /// value never contains an intent reported as uncovered verbatim.
        #[test]
        fn render_never_panics(v in proptest::collection::vec(
            "(\\*\\.|\\.)?[a-c]{1,3}(\\.[a-c]{1,3})?(:[0-9]{2,4})?|10\\.[0-9]\\.0\\.[0-9](/[0-9]{1,2})?|fd00::[0-9a-f](/[0-9]{1,3})?|\\[::[0-9]\\]:[0-9]{2}|\\*",
            0..10,
        )) {
            if let Ok(set) = IntentSet::parse(v.iter().map(String::as_str)) {
                for d in Dialect::ALL {
                    let out = render(d, &set);
                    proptest::prop_assert!(!out.value.contains(' '));
                }
            }
        }
    }

    /// Renders `set` asking the models for every intent, as before the memo.
    fn unmemoized(d: Dialect, set: &IntentSet, widen: Widen) -> Rendered {
        let mut checks = Checks::memoized();
        checks.memo = false;
        render_checked(d, set, widen, &mut checks)
    }

    /// One label: plain ones (varied, of few lengths, so names share shapes) and every kind
    /// a model treats specially.
    const LABEL: &str = "[g-wyz][a-z0-9]{0,2}|[a-fx0-9]{1,3}|0x[0-9a-f]{0,2}|localhost|ocalhost|\
                         xn--[a-z0-9]{1,4}|n--[a-z]|[a-z]_[a-z]|[a-z]{1,2}--[a-z]";

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Memoizing the model checks per shape changes no byte of any render: random names,
        /// each with a sibling whose plain labels are respelled (same shape).
        #[test]
        fn memo_changes_nothing(
            names in proptest::collection::vec(
                (
                    "|\\.|\\*\\.",
                    proptest::collection::vec(LABEL, 1..4),
                    "(:(80|443|8080))?",
                    "[g-wyz]",
                ),
                1..6,
            ),
        ) {
            let mut entries = Vec::new();
            for (lead, labels, port, letter) in &names {
                let respelled: Vec<String> = labels
                    .iter()
                    .map(|l| if crate::noproxy::shape::plain(l) {
                        format!("{letter}{}", &l[1..])
                    } else {
                        l.clone()
                    })
                    .collect();
                for ls in [labels, &respelled] {
                    entries.push(format!("{lead}{}{port}", ls.join(".")));
                }
            }
            let entries: Vec<String> = entries
                .into_iter()
                .filter(|e| Intent::parse(e).is_ok())
                .collect();
            let set = IntentSet::parse(entries.iter().map(String::as_str)).unwrap();
            for d in Dialect::ALL {
                for widen in [Widen::Deny, Widen::Allow] {
                    proptest::prop_assert_eq!(
                        render_with(d, &set, widen),
                        unmemoized(d, &set, widen),
                        "{} {:?}: {:?}", d, widen, entries
                    );
                }
            }
        }
    }

    #[test]
    fn warns_about_size() {
        let many: Vec<String> = (0..20_000u32).map(|i| format!("h{i}.example")).collect();
        let set = IntentSet::parse(many.iter().map(String::as_str)).unwrap();
        let out = render(Dialect::Curl, &set);
        assert!(out.value.len() > MAX_ARG_STRLEN);
        assert!(out.warnings.iter().any(|w| w.contains("E2BIG")));
        assert!(r(Dialect::Curl, ".a,10.0.0.1").warnings.is_empty());
        assert!(r(Dialect::Curl, "a.example").warnings[0].contains("a.example"));
        assert!(
            r(Dialect::NodeProxyFromEnv, "a.example")
                .warnings
                .is_empty()
        );
    }
}
