//! One endpoint, end to end: the model's route, the request along it, the verdict.

use std::time::Instant;

use super::net::Requester;
use super::{
    EndpointResult, Got, Observation, Outcome, Route, expect_name, judge, needs_leak_check,
};
use crate::api::ExpectedPath;
use crate::noproxy::{Decision, Matcher, Target, redact};

/// Checks one endpoint with the environment `matcher` was built from.
pub async fn check(
    req: &Requester,
    matcher: &Matcher,
    url: &str,
    expect: ExpectedPath,
) -> EndpointResult {
    let shown = redact(url);
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(e) => return unusable(shown, expect, redact(&e.to_string())),
    };
    let path = request_path(url);
    let resolved = req.resolve(&target).await;
    let dns: Vec<String> = resolved
        .as_ref()
        .map(|a| a.iter().map(|s| s.ip().to_string()).collect())
        .unwrap_or_default();
    let (explained, proxy) = matcher.route(&target, url);
    let route = match (explained.decision, &proxy) {
        (Decision::Direct, _) => Route::Direct(explained.reason.clone()),
        (Decision::Proxy, Some(_)) => Route::Proxy(explained.proxy.clone().unwrap_or_default()),
        _ => Route::Undecided(explained.reason.clone()),
    };
    let started = Instant::now();
    let attempt = match (&route, &proxy, &resolved) {
        (Route::Direct(_), _, Ok(addrs)) => Some(req.direct(&target, &path, addrs).await),
        (Route::Direct(_), _, Err(e)) => Some(Outcome::Unreachable(e.clone())),
        (Route::Proxy(_), Some(p), _) => Some(req.via_proxy(&target, &path, p).await),
        _ => None,
    };
    let latency_ms = started.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
    let leak_check = match (&attempt, &resolved) {
        (Some(a), Ok(addrs)) if needs_leak_check(expect, a) => {
            Some(req.direct(&target, &path, addrs).await)
        }
        (Some(a), Err(e)) if needs_leak_check(expect, a) => Some(Outcome::Unreachable(e.clone())),
        _ => None,
    };
    let via_proxy = matches!(route, Route::Proxy(_)) && attempt.is_some();
    let v = judge(
        expect,
        &Observation {
            route,
            attempt,
            leak_check,
        },
    );
    EndpointResult {
        url: shown,
        expect: expect_name(expect).to_owned(),
        got: v.got.as_str().to_owned(),
        ok: v.ok,
        status_code: v.status_code,
        via_proxy,
        dns,
        latency_ms: Some(latency_ms),
        error: v.error.map(|e| redact(&e)),
    }
}

fn unusable(url: String, expect: ExpectedPath, error: String) -> EndpointResult {
    EndpointResult {
        url,
        expect: expect_name(expect).to_owned(),
        got: Got::Failed.as_str().to_owned(),
        ok: false,
        status_code: None,
        via_proxy: false,
        dns: Vec::new(),
        latency_ms: None,
        error: Some(error),
    }
}

/// The path and query of a URL: the origin-form request target.
fn request_path(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => {
            let q = u.query().map(|q| format!("?{q}")).unwrap_or_default();
            format!("{}{q}", u.path())
        }
        Err(_) => "/".to_owned(),
    }
}
