//! URL parsing into discovery requests and resource targets.

use std::collections::HashMap;

use crate::error::{ApiError, ApiResult};
use crate::object::Target;
use crate::resources::Registry;

#[derive(Debug)]
pub enum Route {
    Version,
    Health,
    CoreVersions,
    GroupList,
    Group(String),
    ResourceList {
        group: String,
        version: String,
    },
    /// A resource path; `watch` is set for the legacy `/watch/` prefix.
    Resource {
        target: Target,
        legacy_watch: bool,
    },
    OpenApiRoot,
    OpenApiGroupVersion {
        group: String,
        version: String,
    },
    OpenApiV2,
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

pub fn parse_query(q: Option<&str>) -> HashMap<String, String> {
    url::form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

pub fn route(reg: &Registry, path: &str) -> ApiResult<Route> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match segs.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["healthz" | "readyz" | "livez", ..] => return Ok(Route::Health),
        ["openapi", "v3"] => return Ok(Route::OpenApiRoot),
        ["openapi", "v3", "api", v] => {
            return Ok(Route::OpenApiGroupVersion {
                group: String::new(),
                version: v.to_string(),
            });
        }
        ["openapi", "v3", "apis", g, v] => {
            return Ok(Route::OpenApiGroupVersion {
                group: g.to_string(),
                version: v.to_string(),
            });
        }
        ["openapi", ..] => return Ok(Route::OpenApiV2),
        ["api"] => return Ok(Route::CoreVersions),
        ["apis"] => return Ok(Route::GroupList),
        ["apis", g] => return Ok(Route::Group(g.to_string())),
        ["api", v] => {
            return Ok(Route::ResourceList {
                group: String::new(),
                version: v.to_string(),
            });
        }
        ["apis", g, v] => {
            return Ok(Route::ResourceList {
                group: g.to_string(),
                version: v.to_string(),
            });
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found()),
    };
    let (legacy_watch, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let lookup = |plural: &str| reg.get(group, version, plural).ok_or_else(not_found);
    let target = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if reg
                .get(group, version, plural)
                .is_some_and(|t| t.namespaced) =>
        {
            let rt = lookup(plural)?;
            let (name, sub) = match tail {
                [] => (None, None),
                [n] => (Some(n.to_string()), None),
                [n, s] => (Some(n.to_string()), Some(s.to_string())),
                _ => return Err(not_found()),
            };
            Target {
                rt,
                namespace: Some(ns.to_string()),
                name,
                subresource: sub,
                manager: None,
                user: None,
            }
        }
        [plural, tail @ ..] => {
            let rt = lookup(plural)?;
            let (name, sub) = match tail {
                [] => (None, None),
                [n] => (Some(n.to_string()), None),
                [n, s] => (Some(n.to_string()), Some(s.to_string())),
                _ => return Err(not_found()),
            };
            if rt.namespaced && name.is_some() {
                return Err(not_found());
            }
            Target {
                rt,
                namespace: None,
                name,
                subresource: sub,
                manager: None,
                user: None,
            }
        }
        [] => return Err(not_found()),
    };
    Ok(Route::Resource {
        target,
        legacy_watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(path: &str) -> Target {
        match route(&Registry::with_builtins(), path).unwrap() {
            Route::Resource { target, .. } => target,
            other => panic!("not a resource route: {other:?}"),
        }
    }

    #[test]
    fn routes() {
        let t = target("/api/v1/namespaces/ns1/pods/p/status");
        assert_eq!(
            (
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            (Some("ns1"), Some("p"), Some("status"))
        );
        let t = target("/api/v1/namespaces/ns1");
        assert_eq!(
            (t.rt.kind.as_str(), t.name.as_deref()),
            ("Namespace", Some("ns1"))
        );
        let t = target("/api/v1/namespaces/ns1/status");
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = target("/apis/apps/v1/deployments");
        assert!(t.namespace.is_none() && t.name.is_none());
        assert!(route(&Registry::with_builtins(), "/apis/apps/v1/deployments/x").is_err());
        assert!(route(&Registry::with_builtins(), "/apis/nope/v1/things").is_err());
    }
}
