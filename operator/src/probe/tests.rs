use super::*;
use ExpectedPath::{Blocked, Direct, Proxied};

fn direct() -> Route {
    Route::Direct("NO_PROXY entry .svc".into())
}

fn proxy() -> Route {
    Route::Proxy("http://u:***@proxy:3128".into())
}

fn obs(route: Route, attempt: Outcome) -> Observation {
    Observation {
        route,
        attempt: Some(attempt),
        leak_check: None,
    }
}

fn verdict(got: Got, ok: bool, code: Option<u16>, error: Option<&str>) -> Judgement {
    Judgement {
        got,
        ok,
        status_code: code,
        error: error.map(str::to_owned),
    }
}

#[test]
fn direct_path_is_any_answer_without_the_proxy() {
    let v = judge(Direct, &obs(direct(), Outcome::Response(401)));
    assert_eq!(v, verdict(Got::Direct, true, Some(401), None));
    let v = judge(
        Direct,
        &obs(direct(), Outcome::Unreachable("refused".into())),
    );
    assert_eq!(
        v,
        verdict(
            Got::Failed,
            false,
            None,
            Some("expected direct: no direct connection: refused")
        )
    );
}

#[test]
fn a_no_proxy_that_misses_the_service_fails_the_direct_path() {
    let v = judge(Direct, &obs(proxy(), Outcome::Response(200)));
    assert_eq!(
        v,
        verdict(
            Got::Proxied,
            false,
            Some(200),
            Some(
                "expected direct: the client goes through the proxy http://u:***@proxy:3128; \
                 the proxy let it through (HTTP 200)"
            )
        )
    );
}

#[test]
fn proxied_path_needs_a_2xx_or_3xx_through_the_proxy() {
    for code in [200, 204, 301, 399] {
        let v = judge(Proxied, &obs(proxy(), Outcome::Response(code)));
        assert_eq!(v, verdict(Got::Proxied, true, Some(code), None));
    }
    let v = judge(Proxied, &obs(proxy(), Outcome::Response(404)));
    assert_eq!(
        v,
        verdict(
            Got::Failed,
            false,
            Some(404),
            Some("expected through the proxy: HTTP 404 through the proxy")
        )
    );
}

#[test]
fn rejected_credentials_are_named_not_blocked() {
    for code in [401, 407] {
        for attempt in [Outcome::Response(code), Outcome::TunnelRefused(code)] {
            let v = judge(Proxied, &obs(proxy(), attempt));
            let want =
                format!("expected through the proxy: the proxy rejected the credentials ({code})");
            assert_eq!(v, verdict(Got::Failed, false, Some(code), Some(&want)));
        }
    }
}

#[test]
fn a_refusal_is_blocked_and_a_bad_gateway_is_a_failure() {
    let v = judge(Proxied, &obs(proxy(), Outcome::TunnelRefused(403)));
    assert_eq!(
        v,
        verdict(
            Got::Blocked,
            false,
            Some(403),
            Some("expected through the proxy: the proxy refused it (HTTP 403)")
        )
    );
    let v = judge(Proxied, &obs(proxy(), Outcome::TunnelRefused(502)));
    assert_eq!(v.got, Got::Failed);
    assert_eq!(
        v.error.as_deref(),
        Some("expected through the proxy: the proxy could not reach it (HTTP 502)")
    );
}

#[test]
fn blocked_needs_the_refusal_and_no_direct_way_around() {
    let refused = Outcome::TunnelRefused(403);
    assert!(needs_leak_check(Blocked, &refused));
    assert!(needs_leak_check(Blocked, &Outcome::Response(403)));
    assert!(!needs_leak_check(Blocked, &Outcome::Response(200)));
    assert!(!needs_leak_check(Proxied, &refused));

    let mut o = obs(proxy(), refused.clone());
    o.leak_check = Some(Outcome::Unreachable("refused".into()));
    assert_eq!(
        judge(Blocked, &o),
        verdict(Got::Blocked, true, Some(403), None)
    );

    o.leak_check = Some(Outcome::Response(200));
    let v = judge(Blocked, &o);
    assert_eq!(v.got, Got::Blocked);
    assert!(!v.ok);
    assert_eq!(
        v.error.as_deref(),
        Some(
            "would leak direct: the proxy refuses it, but it answers without the proxy (HTTP 200)"
        )
    );

    o.leak_check = None;
    assert!(
        !judge(Blocked, &o).ok,
        "an unchecked direct path is not a pass"
    );
}

#[test]
fn blocked_that_the_proxy_lets_through_or_the_client_sends_direct_fails() {
    let v = judge(Blocked, &obs(proxy(), Outcome::Response(200)));
    assert_eq!(
        v,
        verdict(
            Got::Proxied,
            false,
            Some(200),
            Some("expected refused by the proxy: the proxy let it through (HTTP 200)")
        )
    );
    let v = judge(Blocked, &obs(direct(), Outcome::Response(200)));
    assert_eq!(
        v.error.as_deref(),
        Some(
            "expected refused by the proxy: the client goes direct (NO_PROXY entry .svc); \
             answered directly (HTTP 200)"
        )
    );
}

#[test]
fn an_undecided_route_fails_with_its_reason() {
    let o = Observation {
        route: Route::Undecided("the clients disagree (direct: curl; proxy: go)".into()),
        attempt: None,
        leak_check: None,
    };
    let v = judge(Proxied, &o);
    assert_eq!(
        v,
        verdict(
            Got::Failed,
            false,
            None,
            Some("the client's route is undecided: the clients disagree (direct: curl; proxy: go)")
        )
    );
}

fn result(i: usize, error: Option<String>) -> EndpointResult {
    EndpointResult {
        url: format!("https://service-{i}.{}.example.org/health", "x".repeat(150)),
        expect: "Proxied".into(),
        got: "Failed".into(),
        ok: false,
        status_code: Some(407),
        via_proxy: true,
        dns: vec![
            "2001:db8::1".into(),
            "2001:db8::2".into(),
            "192.0.2.10".into(),
        ],
        latency_ms: Some(10_000),
        error,
    }
}

#[test]
fn the_termination_message_fits_and_keeps_the_order() {
    let small: Vec<EndpointResult> = (0..2).map(|i| result(i, None)).collect();
    assert_eq!(
        termination_message(&small),
        serde_json::to_string(&small).unwrap(),
        "what fits is kept whole"
    );
    // 20 endpoints plus the automatic one, each with a long URL and error: the most a
    // policy can have.
    let big: Vec<EndpointResult> = (0..21).map(|i| result(i, Some("é".repeat(300)))).collect();
    let text = termination_message(&big);
    assert!(text.len() <= TERMINATION_MESSAGE_LIMIT, "{}", text.len());
    let back: Vec<EndpointResult> = serde_json::from_str(&text).unwrap();
    assert_eq!(back.len(), 21);
    assert!(back.iter().all(|r| !r.ok && r.status_code == Some(407)));
    assert!(back[3].url.starts_with("https://service-3."));
}

#[test]
fn an_answer_inside_the_tunnel_is_the_targets() {
    // The proxy opened the tunnel: a 403 or 401 from the target is not the proxy's refusal.
    let v = judge(Blocked, &obs(proxy(), Outcome::Tunneled(403)));
    assert_eq!(v.got, Got::Proxied);
    assert!(!v.ok, "a target behind an open tunnel is not blocked");
    let v = judge(Proxied, &obs(proxy(), Outcome::Tunneled(401)));
    assert_eq!(
        v,
        verdict(
            Got::Proxied,
            false,
            Some(401),
            Some("expected through the proxy: the target answered HTTP 401 through the proxy")
        )
    );
    let v = judge(Proxied, &obs(proxy(), Outcome::Tunneled(204)));
    assert_eq!(v, verdict(Got::Proxied, true, Some(204), None));
    assert!(!needs_leak_check(Blocked, &Outcome::Tunneled(403)));
}
