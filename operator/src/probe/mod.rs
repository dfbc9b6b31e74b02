//! The probe: checks from inside a Pod that each endpoint takes the path the policy means —
//! direct, through the proxy with the slot's credentials, or refused by the proxy.
//!
//! The route is decided by the dialect's model (the engine behind `explain`), then the
//! request is made for real along that route; [`judge`] turns what happened into a result.
//! Pure here; the network I/O is in `net`.

mod check;
pub mod net;

pub use check::check;

use serde::{Deserialize, Serialize};

use crate::api::ExpectedPath;

/// The path a request actually took.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    /// Answered by the target without the proxy.
    Direct,
    /// Answered by the target through the proxy.
    Proxied,
    /// Refused by the proxy.
    Blocked,
    /// Neither: no answer, or an answer that proves no path.
    Failed,
}

/// What one request attempt produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An HTTP response: the target's when direct or through a tunnel, else the proxy's
    /// relay of it (or the proxy's own refusal: see [`judge`]).
    Response(u16),
    /// The proxy refused a CONNECT tunnel with this status.
    TunnelRefused(u16),
    /// The proxy opened the CONNECT tunnel and the target answered inside it with this
    /// status: the route through the proxy is proven, whatever the target said.
    Tunneled(u16),
    /// No connection (refused, unreachable, DNS, timeout).
    Unreachable(String),
    /// Connected, but the exchange failed (TLS, protocol, timeout).
    Broken(String),
}

/// The route the client model chose for an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Direct; the words say why (for example the NO_PROXY entry that matched).
    Direct(String),
    /// Through the proxy (redacted URL).
    Proxy(String),
    /// The model cannot tell (for example `portable` with clients that disagree).
    Undecided(String),
}

/// What the probe observed for one endpoint: the attempt along the model's route and, for a
/// `Blocked` endpoint the proxy refused, a direct attempt that must not get through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub route: Route,
    pub attempt: Option<Outcome>,
    pub leak_check: Option<Outcome>,
}

/// One endpoint's result, as printed and as stored in the policy's status.
pub type EndpointResult = crate::api::EndpointCheck;

impl Got {
    pub fn as_str(self) -> &'static str {
        match self {
            Got::Direct => "Direct",
            Got::Proxied => "Proxied",
            Got::Blocked => "Blocked",
            Got::Failed => "Failed",
        }
    }
}

/// The name of an expected path, as the spec spells it.
pub fn expect_name(e: ExpectedPath) -> &'static str {
    match e {
        ExpectedPath::Direct => "Direct",
        ExpectedPath::Proxied => "Proxied",
        ExpectedPath::Blocked => "Blocked",
    }
}

/// The verdict for one endpoint: what path was taken, whether that is the expected one, and
/// if not, why in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    pub got: Got,
    pub ok: bool,
    pub status_code: Option<u16>,
    pub error: Option<String>,
}

/// Whether the probe must also try a direct connection: only for a `Blocked` endpoint the
/// proxy refused (a target the proxy refuses must not be reachable around it either).
pub fn needs_leak_check(expect: ExpectedPath, attempt: &Outcome) -> bool {
    expect == ExpectedPath::Blocked
        && path_of(&Route::Proxy(String::new()), attempt).0 == Got::Blocked
}

/// The path an attempt along `route` proves, its status code, and the failure in words.
fn path_of(route: &Route, attempt: &Outcome) -> (Got, Option<u16>, Option<String>) {
    let via_proxy = matches!(route, Route::Proxy(_));
    match (attempt, via_proxy) {
        (Outcome::Response(code), false) => (Got::Direct, Some(*code), None),
        (Outcome::Tunneled(code @ 200..=399), _) => (Got::Proxied, Some(*code), None),
        (Outcome::Tunneled(code), _) => (
            Got::Proxied,
            Some(*code),
            Some(format!("the target answered HTTP {code} through the proxy")),
        ),
        (Outcome::Response(code @ 200..=399), true) => (Got::Proxied, Some(*code), None),
        (Outcome::Response(code) | Outcome::TunnelRefused(code), true) => refusal(*code),
        (Outcome::TunnelRefused(code), false) => (Got::Failed, Some(*code), None),
        (Outcome::Unreachable(e), false) => (
            Got::Failed,
            None,
            Some(format!("no direct connection: {e}")),
        ),
        (Outcome::Unreachable(e), true) => {
            (Got::Failed, None, Some(format!("proxy unreachable: {e}")))
        }
        (Outcome::Broken(e), _) => (Got::Failed, None, Some(e.clone())),
    }
}

/// A non-2xx/3xx answer through the proxy: 401 (tinyproxy) and 407 reject the credentials,
/// 403 is the proxy's refusal, anything else is a failure of the path.
fn refusal(code: u16) -> (Got, Option<u16>, Option<String>) {
    match code {
        401 | 407 => (
            Got::Failed,
            Some(code),
            Some(format!("the proxy rejected the credentials ({code})")),
        ),
        403 => (Got::Blocked, Some(code), None),
        500..=599 => (
            Got::Failed,
            Some(code),
            Some(format!("the proxy could not reach it (HTTP {code})")),
        ),
        _ => (
            Got::Failed,
            Some(code),
            Some(format!("HTTP {code} through the proxy")),
        ),
    }
}

/// Judges one endpoint: the path the observation proves against the one expected.
pub fn judge(expect: ExpectedPath, obs: &Observation) -> Judgement {
    let Some(attempt) = &obs.attempt else {
        let why = match &obs.route {
            Route::Undecided(why) => why.clone(),
            _ => "no request was made".to_owned(),
        };
        return fail(None, format!("the client's route is undecided: {why}"));
    };
    let (got, status_code, problem) = path_of(&obs.route, attempt);
    let wanted = match expect {
        ExpectedPath::Direct => Got::Direct,
        ExpectedPath::Proxied => Got::Proxied,
        ExpectedPath::Blocked => Got::Blocked,
    };
    let error = if got == wanted && problem.is_none() {
        leak(expect, obs.leak_check.as_ref())
    } else {
        Some(mismatch(expect, &obs.route, got, status_code, problem))
    };
    Judgement {
        got,
        ok: error.is_none(),
        status_code,
        error,
    }
}

fn fail(status_code: Option<u16>, error: String) -> Judgement {
    Judgement {
        got: Got::Failed,
        ok: false,
        status_code,
        error: Some(error),
    }
}

/// For a refused `Blocked` endpoint: a direct connection that got an answer is a leak.
fn leak(expect: ExpectedPath, check: Option<&Outcome>) -> Option<String> {
    match (expect, check) {
        (ExpectedPath::Blocked, Some(Outcome::Response(code))) => Some(format!(
            "would leak direct: the proxy refuses it, but it answers without the proxy (HTTP {code})"
        )),
        (ExpectedPath::Blocked, Some(Outcome::Broken(e))) => Some(format!(
            "would leak direct: the proxy refuses it, but a direct connection is accepted ({e})"
        )),
        (ExpectedPath::Blocked, None) => Some("the direct connection was not checked".to_owned()),
        _ => None,
    }
}

/// Why the path taken is not the one expected.
fn mismatch(
    expect: ExpectedPath,
    route: &Route,
    got: Got,
    code: Option<u16>,
    problem: Option<String>,
) -> String {
    let route_fits = match route {
        Route::Direct(_) => expect == ExpectedPath::Direct,
        Route::Proxy(_) => expect != ExpectedPath::Direct,
        Route::Undecided(_) => false,
    };
    let how = match route {
        _ if route_fits => String::new(),
        Route::Direct(why) => format!("the client goes direct ({why}); "),
        Route::Proxy(proxy) => format!("the client goes through the proxy {proxy}; "),
        Route::Undecided(why) => format!("{why}; "),
    };
    let what = match (got, &problem) {
        (_, Some(p)) => p.clone(),
        (Got::Direct, None) => format!("answered directly (HTTP {})", code.unwrap_or(0)),
        (Got::Proxied, None) => format!("the proxy let it through (HTTP {})", code.unwrap_or(0)),
        (Got::Blocked, None) => format!("the proxy refused it (HTTP {})", code.unwrap_or(0)),
        (Got::Failed, None) => "no answer".to_owned(),
    };
    let expected = match expect {
        ExpectedPath::Direct => "expected direct",
        ExpectedPath::Proxied => "expected through the proxy",
        ExpectedPath::Blocked => "expected refused by the proxy",
    };
    format!("{expected}: {how}{what}")
}

/// Most bytes of a container's termination message the kubelet keeps.
pub const TERMINATION_MESSAGE_LIMIT: usize = 4096;

/// The results as JSON that fits the termination message: full when it fits, else with
/// errors shortened and address lists cut, else only the verdict fields.
pub fn termination_message(results: &[EndpointResult]) -> String {
    let full = serde_json::to_string(results).unwrap_or_default();
    if full.len() <= TERMINATION_MESSAGE_LIMIT {
        return full;
    }
    let mut short = results.to_vec();
    for r in &mut short {
        r.dns.truncate(1);
        if let Some(e) = &mut r.error {
            shorten(e, 120);
        }
        shorten(&mut r.url, 200);
    }
    let text = serde_json::to_string(&short).unwrap_or_default();
    if text.len() <= TERMINATION_MESSAGE_LIMIT {
        return text;
    }
    for r in &mut short {
        r.dns.clear();
        if let Some(e) = &mut r.error {
            shorten(e, 16);
        }
        shorten(&mut r.url, 32);
    }
    serde_json::to_string(&short).unwrap_or_default()
}

fn shorten(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
}

#[cfg(test)]
mod tests;
