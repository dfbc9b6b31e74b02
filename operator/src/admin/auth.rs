//! Who may read `/metrics` (`run --metrics-auth kubernetes`), as kube-rbac-proxy decides it:
//! a TokenReview names the user of the request's bearer token, and a SubjectAccessReview says
//! whether that user may `get` the non-resource URL `/metrics` (the ClusterRole
//! `<release>-metrics-reader` of the chart grants it). Decisions are cached per SHA-256 digest
//! of the token, so a scrape every 15 s costs one review a minute. No token is ever logged,
//! kept or answered: only its digest is.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::HeaderMap;
use http::header::AUTHORIZATION;
use k8s_openapi::api::authentication::v1::{TokenReview, UserInfo};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

/// The non-resource URL and verb a scraper must be allowed.
pub const PATH: &str = "/metrics";
pub const VERB: &str = "get";

/// How long an allowed token is trusted without asking again.
pub const TTL_ALLOWED: Duration = Duration::from_secs(60);
/// How long a refused token stays refused: short, so a scraper bound a moment ago gets in soon.
pub const TTL_DENIED: Duration = Duration::from_secs(10);
/// Cached decisions at most (one per distinct token).
pub const CACHE_MAX: usize = 1024;
/// Reviews in flight at once; more requests wait (a flood of bad tokens cannot flood the API).
const IN_FLIGHT: usize = 4;

/// The decision about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// 200: the token's user may get `/metrics`.
    Allowed,
    /// 401: no bearer token, or one the API server does not accept.
    Unauthenticated,
    /// 403: a valid token whose user may not get `/metrics`.
    Forbidden,
}

/// The bearer token of a request, if it has one (`Authorization: Bearer <token>`).
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The user a TokenReview's answer names, or `None` when the token was not accepted.
pub fn reviewed_user(review: &TokenReview) -> Option<UserInfo> {
    let status = review.status.as_ref()?;
    let error = status.error.as_deref().unwrap_or_default();
    let user = status.user.as_ref()?;
    let named = user.username.as_deref().is_some_and(|n| !n.is_empty());
    (status.authenticated == Some(true) && error.is_empty() && named).then(|| user.clone())
}

/// The TokenReview of `token` (the API server's default audiences).
pub fn token_review(token: &str) -> TokenReview {
    // Built from JSON: `spec.token` changes type across k8s-openapi's Kubernetes versions.
    serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "metadata": {},
        "spec": { "token": token },
    }))
    .expect("a TokenReview")
}

/// The SubjectAccessReview of `user` for `get /metrics`.
pub fn access_review(user: &UserInfo) -> SubjectAccessReview {
    serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {
            "user": user.username,
            "uid": user.uid,
            "groups": user.groups,
            "extra": user.extra,
            "nonResourceAttributes": { "path": PATH, "verb": VERB },
        },
    }))
    .expect("a SubjectAccessReview")
}

/// Whether a SubjectAccessReview's answer allows.
pub fn allowed(review: &SubjectAccessReview) -> bool {
    review
        .status
        .as_ref()
        .is_some_and(|s| s.allowed && s.denied != Some(true))
}

type Digest = [u8; 32];

fn digest(token: &str) -> Digest {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Decisions by token digest, each until it expires; at most `max` of them.
#[derive(Debug)]
pub struct Cache {
    max: usize,
    entries: HashMap<Digest, (Instant, Access)>,
}

impl Cache {
    pub fn new(max: usize) -> Cache {
        Cache {
            max: max.max(1),
            entries: HashMap::new(),
        }
    }

    pub fn get(&self, token: &str, now: Instant) -> Option<Access> {
        let (until, v) = self.entries.get(&digest(token))?;
        (now < *until).then_some(*v)
    }

    /// Keeps `v` for its TTL. When full, expired entries go first, then the one expiring
    /// soonest.
    pub fn put(&mut self, token: &str, v: Access, now: Instant) {
        let ttl = match v {
            Access::Allowed => TTL_ALLOWED,
            Access::Unauthenticated | Access::Forbidden => TTL_DENIED,
        };
        let key = digest(token);
        if !self.entries.contains_key(&key) && self.entries.len() >= self.max {
            self.entries.retain(|_, (until, _)| now < *until);
            if self.entries.len() >= self.max {
                let soonest = self.entries.iter().min_by_key(|(_, (u, _))| *u);
                if let Some(k) = soonest.map(|(k, _)| *k) {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (now + ttl, v));
    }
}

/// The reviews could not be made (API unreachable, or the operator may not create them).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ReviewFailed(String);

/// Asks the API server, through its own client (not the leader-gated one: reviews are
/// creates that every replica must make), and caches the answers.
pub struct Reviewer {
    client: Client,
    cache: Mutex<Cache>,
    in_flight: tokio::sync::Semaphore,
}

impl Reviewer {
    pub fn new(client: Client) -> Reviewer {
        Reviewer {
            client,
            cache: Mutex::new(Cache::new(CACHE_MAX)),
            in_flight: tokio::sync::Semaphore::new(IN_FLIGHT),
        }
    }

    /// The decision for a request with these headers.
    pub async fn check(&self, headers: &HeaderMap) -> Result<Access, ReviewFailed> {
        let Some(token) = bearer(headers) else {
            return Ok(Access::Unauthenticated);
        };
        if let Some(v) = self.cached(token) {
            return Ok(v);
        }
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| ReviewFailed("closed".into()))?;
        // Another request with the same token may have asked meanwhile.
        if let Some(v) = self.cached(token) {
            return Ok(v);
        }
        let v = self.review(token).await?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.put(token, v, Instant::now());
        Ok(v)
    }

    fn cached(&self, token: &str) -> Option<Access> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(token, Instant::now())
    }

    async fn review(&self, token: &str) -> Result<Access, ReviewFailed> {
        let pp = PostParams::default();
        let tokens = Api::<TokenReview>::all(self.client.clone());
        let answer = tokens.create(&pp, &token_review(token)).await;
        let review = answer.map_err(|e| failed("TokenReview", &e))?;
        let Some(user) = reviewed_user(&review) else {
            tracing::debug!("admin endpoint: /metrics with a token the API server does not accept");
            return Ok(Access::Unauthenticated);
        };
        let access = Api::<SubjectAccessReview>::all(self.client.clone());
        let answer = access.create(&pp, &access_review(&user)).await;
        let review = answer.map_err(|e| failed("SubjectAccessReview", &e))?;
        if allowed(&review) {
            return Ok(Access::Allowed);
        }
        let name = user.username.unwrap_or_default();
        tracing::debug!(user = %name, "admin endpoint: /metrics refused, the user may not get it");
        Ok(Access::Forbidden)
    }
}

/// A failed review, said in one line (the API's status, never the request).
fn failed(kind: &str, e: &kube::Error) -> ReviewFailed {
    let why = match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    };
    ReviewFailed(format!("creating a {kind}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn the_bearer_token_is_read_from_the_authorization_header_only() {
        assert_eq!(bearer(&headers("Bearer abc.def")), Some("abc.def"));
        assert_eq!(bearer(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&headers("Basic dXNlcjpwdw==")), None);
        assert_eq!(bearer(&headers("Bearer ")), None);
        assert_eq!(bearer(&headers("Bearer")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    fn token_answer(status: serde_json::Value) -> TokenReview {
        serde_json::from_value(json!({"metadata": {}, "spec": {}, "status": status})).unwrap()
    }

    #[test]
    fn only_an_authenticated_review_without_error_names_a_user() {
        let user = json!({"username": "system:serviceaccount:mon:prom", "groups": ["system:serviceaccounts"]});
        let ok = token_answer(json!({"authenticated": true, "user": user}));
        assert_eq!(
            reviewed_user(&ok).and_then(|u| u.username).as_deref(),
            Some("system:serviceaccount:mon:prom")
        );
        for status in [
            json!({"authenticated": false, "user": {}}),
            json!({"authenticated": true, "error": "token expired", "user": user}),
            json!({"authenticated": true, "user": {"username": ""}}),
            json!({}),
        ] {
            assert_eq!(
                reviewed_user(&token_answer(status.clone())),
                None,
                "{status}"
            );
        }
    }

    #[test]
    fn the_access_review_asks_about_the_reviewed_user_for_get_metrics() {
        let user: UserInfo = serde_json::from_value(json!({
            "username": "u", "uid": "1", "groups": ["g"], "extra": {"k": ["v"]}
        }))
        .unwrap();
        let sar = serde_json::to_value(access_review(&user)).unwrap();
        assert_eq!(
            sar["spec"],
            json!({"user": "u", "uid": "1", "groups": ["g"], "extra": {"k": ["v"]},
                   "nonResourceAttributes": {"path": "/metrics", "verb": "get"}})
        );
        let t = serde_json::to_value(token_review("secret-token")).unwrap();
        assert_eq!(t["spec"], json!({"token": "secret-token"}));
    }

    #[test]
    fn allowed_needs_allowed_and_not_denied() {
        let sar = |s: serde_json::Value| -> SubjectAccessReview {
            serde_json::from_value(json!({"metadata": {}, "spec": {}, "status": s})).unwrap()
        };
        assert!(allowed(&sar(json!({"allowed": true}))));
        assert!(!allowed(&sar(json!({"allowed": false}))));
        assert!(!allowed(&sar(json!({"allowed": true, "denied": true}))));
    }

    #[test]
    fn decisions_expire_and_the_cache_stays_bounded() {
        let t0 = Instant::now();
        let mut c = Cache::new(2);
        c.put("a", Access::Allowed, t0);
        c.put("b", Access::Forbidden, t0);
        assert_eq!(c.get("a", t0 + TTL_DENIED), Some(Access::Allowed));
        assert_eq!(
            c.get("b", t0 + TTL_DENIED),
            None,
            "a refusal is kept briefly"
        );
        assert_eq!(c.get("a", t0 + TTL_ALLOWED), None);
        // Full: the entry expiring soonest ("b") makes room.
        c.put("c", Access::Unauthenticated, t0 + Duration::from_secs(1));
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.get("a", t0), Some(Access::Allowed));
        assert_eq!(c.get("b", t0), None);
        // Only digests are kept.
        assert!(!format!("{c:?}").contains("\"a\""));
    }
}
