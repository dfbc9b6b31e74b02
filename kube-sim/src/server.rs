//! The HTTP server: request dispatch to discovery, verbs and watches.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use crate::accept::Output;
use crate::api::{self, DeleteOptions};
use crate::discovery;
use crate::error::{ApiError, ApiResult};
use crate::list::{self, ListParams};
use crate::object::Target;
use crate::patch::PatchKind;
use crate::routing::{Route, parse_query, route};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::watch;

pub use crate::shared::{Body, Shared};

fn json_response(code: u16, v: &Value) -> Response<Body> {
    bytes_response(code, Bytes::from(v.to_string()))
}

/// A response with an already-encoded JSON body.
fn bytes_response(code: u16, encoded: Bytes) -> Response<Body> {
    let body = Full::new(encoded).map_err(|e| match e {}).boxed_unsync();
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = json_response(e.code, &e.to_status());
    if let Some(s) = e.retry_after_seconds
        && let Ok(v) = hyper::header::HeaderValue::from_str(&s.to_string())
    {
        r.headers_mut().insert(hyper::header::RETRY_AFTER, v);
    }
    r
}

/// `fieldManager`, else the User-Agent up to its first '/', as the real server does.
fn field_manager(q: &HashMap<String, String>, req: &Request<Incoming>) -> String {
    if let Some(m) = q.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.clone();
    }
    let ua = req
        .headers()
        .get(hyper::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let prefix: String = ua
        .split('/')
        .next()
        .unwrap_or_default()
        .chars()
        .take(128)
        .collect();
    if prefix.is_empty() {
        "unknown".into()
    } else {
        prefix
    }
}

/// The Kubernetes verb of a resource request.
fn verb_of(method: &Method, t: &Target, watch: bool) -> &'static str {
    match (method.as_str(), t.name.is_some()) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("GET" | "HEAD", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", false) => "deletecollection",
        ("DELETE", true) => "delete",
        _ => "unknown",
    }
}

/// For a resource path the registry does not know (`/api/v1/...`, `/apis/GROUP/VERSION/...`):
/// the 403 RBAC gives the user, if it does not allow the request. Other paths pass.
fn unknown_resource_allowed(
    store: &crate::store::Store,
    user: &crate::auth::User,
    method: &Method,
    path: &str,
    (watch, field_selector): (bool, Option<&str>),
) -> ApiResult<()> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return Ok(()),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, more @ ..] if !more.is_empty() => (Some((*ns).to_owned()), more),
        _ => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [r] => (*r, None, None),
        [r, n] => (*r, Some((*n).to_owned()), None),
        [r, n, sub] => (*r, Some((*n).to_owned()), Some(*sub)),
        _ => return Ok(()),
    };
    let verb = match (method.as_str(), name.is_some()) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("GET" | "HEAD", true) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", false) => "deletecollection",
        ("DELETE", true) => "delete",
        _ => return Ok(()),
    };
    // A list or watch of one name by field selector is checked against resourceNames.
    let name = name.or_else(|| {
        let selector = field_selector?;
        let one = selector
            .strip_prefix("metadata.name==")
            .or_else(|| selector.strip_prefix("metadata.name="))?;
        (matches!(verb, "list" | "watch") && !one.contains(',')).then(|| one.to_owned())
    });
    let a = crate::auth::Attributes {
        verb: verb.into(),
        group: group.into(),
        resource: sub.map_or_else(|| resource.to_owned(), |s| format!("{resource}/{s}")),
        name,
        namespace,
    };
    if crate::auth::decide(store, user, &a).is_some() {
        return Ok(());
    }
    let scope = match &a.namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".into(),
    };
    let gr = if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    };
    Err(ApiError::new(
        403,
        "Forbidden",
        format!(
            "{gr} is forbidden: User \"{}\" cannot {verb} resource \"{}\" in API group \"{group}\"{scope}",
            user.name(),
            a.resource
        ),
    ))
}

/// The target RBAC checks: a list or watch whose field selector is exactly one
/// `metadata.name` match is checked against `resourceNames` with that name, as the real
/// API server's request info does.
fn authorized_as(t: &Target, verb: &str, q: &HashMap<String, String>) -> Target {
    let mut t = t.clone();
    if t.name.is_none() && matches!(verb, "list" | "watch") {
        let selector = q
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default();
        let name = selector
            .strip_prefix("metadata.name==")
            .or_else(|| selector.strip_prefix("metadata.name="))
            .filter(|n| !n.is_empty() && !n.contains([',', '=', '!']));
        t.name = name.map(str::to_string);
    }
    t
}

/// The verb and resource (with its subresource) a request is counted as.
fn counted_as(method: &Method, t: &Target, watch: bool) -> (&'static str, String) {
    let resource = match &t.subresource {
        Some(s) => format!("{}/{s}", t.rt.plural),
        None => t.rt.plural.clone(),
    };
    (verb_of(method, t, watch), resource)
}

/// Count the request and apply injected faults; returns a watch drop delay if one applies.
async fn apply_hooks(
    shared: &Shared,
    method: &Method,
    t: &Target,
    watch: bool,
    q: &HashMap<String, String>,
) -> ApiResult<Option<Duration>> {
    let (verb, resource) = counted_as(method, t, watch);
    let manager = q
        .get("fieldManager")
        .map(String::as_str)
        .filter(|_| !matches!(verb, "get" | "list" | "watch"));
    let faults = shared.hooks().on_request(verb, &resource, manager);
    let mut drop_after = None;
    for f in faults {
        match f {
            crate::hooks::Fault::Latency(d) => tokio::time::sleep(d).await,
            crate::hooks::Fault::DropWatch(d) => drop_after = Some(d),
            crate::hooks::Fault::Status {
                code,
                retry_after_seconds,
            } => {
                let msg = format!("injected fault for {verb} {resource}");
                let mut e = ApiError::new(code, crate::hooks::reason(code), msg);
                e.retry_after_seconds = retry_after_seconds;
                return Err(e);
            }
        }
    }
    Ok(drop_after)
}

pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = match dispatch(&shared, req).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    Ok(resp)
}

async fn read_body(shared: &Shared, req: Request<Incoming>) -> ApiResult<Bytes> {
    let ct = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if ct.contains("cbor") {
        return Err(ApiError::unsupported_media_type(format!(
            "kube-sim accepts JSON, YAML and protobuf request bodies, not {ct:?}"
        )));
    }
    let protobuf = ct.contains("protobuf");
    let limited = http_body_util::Limited::new(req.into_body(), shared.max_body_bytes);
    let body = limited.collect().await.map(|c| c.to_bytes()).map_err(|e| {
        if e.is::<http_body_util::LengthLimitError>() {
            crate::limits::body_too_large()
        } else {
            ApiError::bad_request(format!("request body could not be read: {e}"))
        }
    })?;
    if !protobuf {
        return Ok(body);
    }
    let v = crate::protobuf::decode(&body).map_err(ApiError::unsupported_media_type)?;
    Ok(Bytes::from(v.to_string()))
}

fn parse_json_body(body: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .or_else(|_| serde_yaml_ng::from_slice(body))
        .map_err(|e| ApiError::bad_request(format!("the request body could not be decoded: {e}")))
}

fn flag(q: &HashMap<String, String>, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

fn list_params(q: &HashMap<String, String>, kind: &str) -> ApiResult<ListParams> {
    let num = |k: &str| -> ApiResult<Option<u64>> {
        q.get(k)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?}")))
            })
            .transpose()
    };
    Ok(ListParams {
        labels: LabelSelector::parse(
            q.get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )?,
        fields: FieldSelector::parse(
            q.get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
            kind,
        )?,
        limit: num("limit")?.map(|l| l as usize),
        continue_token: q.get("continue").filter(|c| !c.is_empty()).cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        watch: flag(q, "watch"),
        allow_bookmarks: flag(q, "allowWatchBookmarks"),
        send_initial_events: flag(q, "sendInitialEvents"),
        timeout_seconds: num("timeoutSeconds")?,
        drop_after: None,
    })
}

fn dry_run(q: &HashMap<String, String>) -> ApiResult<bool> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "unsupported dryRun value {other:?}: only \"All\" is supported"
        ))),
    }
}

async fn dispatch(shared: &Arc<Shared>, req: Request<Incoming>) -> ApiResult<Response<Body>> {
    let method = req.method().clone();
    let q = parse_query(req.uri().query());
    let auth_header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let (r, user) = {
        let store = shared.lock();
        let user = crate::auth::authenticate(&store, auth_header)?;
        let header = |k: &str| {
            req.headers()
                .get_all(k)
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect::<Vec<String>>()
        };
        let as_user = header("impersonate-user").into_iter().next();
        let user = crate::auth::impersonate(
            &store,
            user,
            as_user.as_deref(),
            header("impersonate-group"),
        )?;
        let routed = route(&store.registry, req.uri().path());
        if let Err(e) = &routed
            && e.code == 404
        {
            // A real API server authorizes before it looks the resource up: a user the
            // request is not allowed for hears 403, whether the resource exists or not.
            let query = (
                flag(&q, "watch"),
                q.get("fieldSelector").map(String::as_str),
            );
            unknown_resource_allowed(&store, &user, req.method(), req.uri().path(), query)?;
        }
        (routed?, user)
    };
    let read_only = method == Method::GET || method == Method::HEAD;
    match r {
        Route::Resource {
            target,
            legacy_watch,
        } => resource(shared, req, target, legacy_watch, q, user).await,
        _ if !read_only => Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on this path"
        ))),
        Route::Version => Ok(json_response(200, &discovery::version())),
        Route::Health => {
            let mut r = Response::new(
                Full::new(Bytes::from_static(b"ok"))
                    .map_err(|e| match e {})
                    .boxed_unsync(),
            );
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain"),
            );
            Ok(r)
        }
        Route::OpenApiV2 => Ok(openapi_v2(&req)),
        Route::OpenApiRoot => Ok(json_response(
            200,
            &crate::openapi::root(&shared.lock().registry),
        )),
        Route::OpenApiGroupVersion { group, version } => {
            let store = shared.lock();
            let schema_of = |t: &crate::resources::ResourceType| {
                let crd_gr = crate::resources::GroupResource {
                    group: "apiextensions.k8s.io".into(),
                    resource: "customresourcedefinitions".into(),
                };
                let crd = store.get(&crd_gr, &(String::new(), t.crd.clone()?))?;
                crate::schema::version_schema(&crd, &t.version).cloned()
            };
            crate::openapi::group_version(&store.registry, &group, &version, &schema_of)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| {
                    ApiError::new(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    )
                })
        }
        Route::CoreVersions => Ok(json_response(
            200,
            &discovery::core_versions(&shared.addr.to_string()),
        )),
        Route::GroupList => Ok(json_response(
            200,
            &discovery::group_list(&shared.lock().registry),
        )),
        Route::Group(g) => discovery::group(&shared.lock().registry, &g)
            .map(|d| json_response(200, &d))
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            }),
        Route::ResourceList { group, version } => {
            discovery::resource_list(&shared.lock().registry, &group, &version)
                .map(|d| json_response(200, &d))
                .ok_or_else(|| {
                    ApiError::new(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    )
                })
        }
    }
}

async fn resource(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    t: Target,
    legacy_watch: bool,
    q: HashMap<String, String>,
    user: crate::auth::User,
) -> ApiResult<Response<Body>> {
    let method = req.method().clone();
    let mut t = t;
    t.manager = Some(field_manager(&q, &req));
    t.user = Some(user.name());
    let watching = legacy_watch || flag(&q, "watch");
    let (verb, counted) = counted_as(&method, &t, watching);
    crate::auth::authorize(&shared.lock(), &user, verb, &authorized_as(&t, verb, &q))?;
    let served = match apply_hooks(shared, &method, &t, watching, &q).await {
        Ok(drop_after) => serve(shared, req, t, (legacy_watch, drop_after), q, user).await,
        Err(e) => Err(e),
    };
    if served.is_err() {
        shared.hooks().on_refused(verb, &counted);
    }
    served
}

/// A resource request, authorized and counted: whether it came by the legacy watch path,
/// and the delay after which an injected fault drops its watch.
async fn serve(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    t: Target,
    (legacy_watch, drop_after): (bool, Option<Duration>),
    q: HashMap<String, String>,
    user: crate::auth::User,
) -> ApiResult<Response<Body>> {
    let method = req.method().clone();
    if t.rt.is_review() {
        if method != Method::POST || t.name.is_some() || t.subresource.is_some() {
            return Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on {}",
                t.rt.plural
            )));
        }
        let body = parse_json_body(&read_body(shared, req).await?)?;
        let v = crate::reviews::answer(&shared.lock(), &user, &t, body)?;
        return Ok(json_response(201, &v));
    }
    match t.subresource.as_deref() {
        None => {}
        Some("status") if t.rt.status => {}
        Some("scale") if t.rt.scale => return scale(shared, req, &t, &q).await,
        Some("log") if t.rt.group.is_empty() && t.rt.plural == "pods" && method == Method::GET => {
            return crate::podlog::get(shared, &t, &q);
        }
        Some("token")
            if t.rt.group.is_empty()
                && t.rt.plural == "serviceaccounts"
                && method == Method::POST =>
        {
            return token_request(shared, req, &t).await;
        }
        Some(_) => {
            return Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ));
        }
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let output = Output::negotiate(accept);
    let render = renderer(
        shared,
        &t,
        output,
        q.get("includeObject").cloned().unwrap_or_default(),
    );
    let collection = t.name.is_none();
    if collection && t.rt.namespaced && t.namespace.is_none() && method != Method::GET {
        return Err(ApiError::method_not_allowed(format!(
            "{method} on all-namespaces {} is not allowed; use a namespaced path",
            t.rt.plural
        )));
    }
    if t.subresource.is_some() && !matches!(method, Method::GET | Method::PUT | Method::PATCH) {
        return Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on subresources"
        )));
    }
    let (code, v) = match (method.clone(), collection) {
        (Method::GET, true) => {
            let mut p = list_params(&q, &t.rt.kind)?;
            p.drop_after = drop_after;
            if p.watch || legacy_watch {
                let rx = watch::start(&shared.store, t, p, shared.bookmark_interval, render);
                return Ok(watch_response(rx));
            }
            let v = match output {
                Output::Object => {
                    let encoded = list::list_json(&shared.lock(), &t, &p)?;
                    return Ok(bytes_response(200, Bytes::from(encoded)));
                }
                Output::PartialObjectMetadataList(_) => {
                    list::list_metadata(&shared.lock(), &t, &p)?
                }
                Output::Table(api) => {
                    let v = list::list(&shared.lock(), &t, &p)?;
                    let items = v["items"].as_array().cloned().unwrap_or_default();
                    render_many(shared, &t, api, &q, &items, v["metadata"].clone())
                }
                Output::PartialObjectMetadata(_) => list::list(&shared.lock(), &t, &p)?,
            };
            (200, v)
        }
        (Method::GET, false) => {
            if legacy_watch || flag(&q, "watch") {
                let mut p = list_params(&q, &t.rt.kind)?;
                p.drop_after = drop_after;
                p.fields = FieldSelector::parse(
                    &format!("metadata.name={}", t.name.as_deref().unwrap_or_default()),
                    "",
                )?;
                let rx = watch::start(
                    &shared.store,
                    Target { name: None, ..t },
                    p,
                    shared.bookmark_interval,
                    render,
                );
                return Ok(watch_response(rx));
            }
            if output == Output::Object {
                let encoded = api::get_json(&shared.lock(), &t)?;
                return Ok(bytes_response(200, encoded));
            }
            let obj = api::get(&shared.lock(), &t)?;
            match output {
                Output::Table(api) if t.subresource.is_none() => (
                    200,
                    render_many(shared, &t, api, &q, &[obj], serde_json::json!({})),
                ),
                _ => (200, obj),
            }
        }
        (Method::POST, true) => {
            let dry = dry_run(&q)?;
            let body = parse_json_body(&read_body(shared, req).await?)?;
            (201, api::create(&mut shared.lock(), &t, body, dry)?)
        }
        (Method::PUT, false) => {
            let dry = dry_run(&q)?;
            let body = parse_json_body(&read_body(shared, req).await?)?;
            (200, api::update(&mut shared.lock(), &t, body, dry)?)
        }
        (Method::PATCH, false) => {
            let dry = dry_run(&q)?;
            let ct = req
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let kind = PatchKind::from_content_type(&ct)?;
            let body = read_body(shared, req).await?;
            if kind == PatchKind::Apply {
                let manager = q.get("fieldManager").map(String::as_str);
                let force = flag(&q, "force");
                let mut store = shared.lock();
                let existed = store.contains(&t.gr(), &t.key());
                let v = api::apply(&mut store, &t, &body, manager, force, dry, &user)?;
                (if existed { 200 } else { 201 }, v)
            } else {
                (200, api::patch(&mut shared.lock(), &t, kind, &body, dry)?)
            }
        }
        (Method::DELETE, false) => {
            let mut opts = DeleteOptions::from_body(&read_body(shared, req).await?)?;
            if let Some(p) = q.get("propagationPolicy") {
                opts.propagation = Some(p.clone());
            }
            if let Some(g) = q.get("gracePeriodSeconds") {
                opts.grace_period_seconds = Some(g.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds: {g:?}"))
                })?);
            }
            opts.dry_run |= dry_run(&q)?;
            api::delete(&mut shared.lock(), &t, &opts)?
        }
        (Method::DELETE, true) => {
            let p = list_params(&q, &t.rt.kind)?;
            let mut opts = DeleteOptions::from_body(&read_body(shared, req).await?)?;
            if let Some(pp) = q.get("propagationPolicy") {
                opts.propagation = Some(pp.clone());
            }
            opts.dry_run |= dry_run(&q)?;
            let mut store = shared.lock();
            let listed = list::list(
                &store,
                &t,
                &ListParams {
                    limit: None,
                    continue_token: None,
                    ..p
                },
            )?;
            let items = listed["items"].as_array().cloned().unwrap_or_default();
            let mut out = Vec::new();
            for item in items {
                let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
                    continue;
                };
                let ns = item
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                let one = Target {
                    name: Some(name.to_string()),
                    namespace: ns.or(t.namespace.clone()),
                    ..t.clone()
                };
                if let Ok((_, v)) = api::delete(&mut store, &one, &opts) {
                    out.push(v);
                }
            }
            let mut v = listed;
            v["items"] = Value::Array(out);
            (200, v)
        }
        (m, _) => {
            return Err(ApiError::method_not_allowed(format!(
                "{m} is not supported on {} {}",
                if collection {
                    "the collection"
                } else {
                    "a single"
                },
                t.rt.plural
            )));
        }
    };
    // Metadata-only responses, for every verb as on the real server (kube-rs also sends
    // `as=PartialObjectMetadata` for PATCH on an `Api<PartialObjectMeta<K>>`).
    Ok(json_response(code, &output.metadata_only(v)?))
}

/// The CRD defining a custom resource type (for its printer columns).
fn crd_of(shared: &Shared, t: &Target) -> Option<Value> {
    let name = t.rt.crd.as_ref()?;
    let gr = crate::resources::GroupResource {
        group: "apiextensions.k8s.io".into(),
        resource: "customresourcedefinitions".into(),
    };
    shared
        .lock()
        .get(&gr, &(String::new(), name.clone()))
        .map(|o| (*o).clone())
}

fn render_many(
    shared: &Shared,
    t: &Target,
    table_api: &str,
    q: &HashMap<String, String>,
    objs: &[Value],
    meta: Value,
) -> Value {
    let include = q
        .get("includeObject")
        .map(String::as_str)
        .unwrap_or_default();
    let crd = crd_of(shared, t);
    crate::table::render(&t.rt, crd.as_ref(), objs, meta, include, table_api)
}

/// Watch events (bookmarks included) carry objects as-is, one-row Tables, or
/// PartialObjectMetadata, as the client asked.
fn renderer(shared: &Shared, t: &Target, output: Output, include: String) -> watch::Render {
    let api = match output {
        Output::Object => return None,
        Output::PartialObjectMetadata(api) => {
            return Some(Arc::new(move |v| {
                crate::accept::partial_object_metadata(&v, api)
            }));
        }
        // The real server fails to turn single objects into lists and sends them unchanged.
        Output::PartialObjectMetadataList(_) => return None,
        Output::Table(api) => api,
    };
    let rt = t.rt.clone();
    let crd = crd_of(shared, t);
    Some(Arc::new(move |v| {
        crate::table::render(
            &rt,
            crd.as_ref(),
            &[v],
            serde_json::json!({}),
            &include,
            api,
        )
    }))
}

/// An empty OpenAPI v2 document (kubectl 1.27 apply needs one; it then falls back to built-in schemas).
fn openapi_v2(req: &Request<Incoming>) -> Response<Body> {
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if accept.contains("json") && !accept.contains("protobuf") {
        return json_response(200, &crate::openapi::v2_json());
    }
    let body = Full::new(Bytes::from(crate::openapi::v2_protobuf()))
        .map_err(|e| match e {})
        .boxed_unsync();
    let mut r = Response::new(body);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
        ),
    );
    r
}

/// POST serviceaccounts/{name}/token (TokenRequest).
async fn token_request(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    t: &Target,
) -> ApiResult<Response<Body>> {
    let body = read_body(shared, req).await?;
    let spec = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::json!({})
    } else {
        parse_json_body(&body)?
            .get("spec")
            .cloned()
            .unwrap_or(serde_json::json!({}))
    };
    let mut store = shared.lock();
    let sa = Target {
        subresource: None,
        ..t.clone()
    };
    api::get(&store, &sa)?;
    let ns = t.namespace.clone().unwrap_or_default();
    let token = store.issue_token(&ns, t.name.as_deref().unwrap_or_default());
    // The real server accepts 10 minutes up to 2^32 seconds.
    let secs = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600)
        .clamp(600, 1 << 32);
    let expires = chrono::Utc::now() + chrono::Duration::seconds(secs);
    Ok(json_response(
        201,
        &serde_json::json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": { "name": t.name, "namespace": ns },
            "spec": { "audiences": spec.get("audiences").cloned().unwrap_or(serde_json::json!([])), "expirationSeconds": secs },
            "status": { "token": token, "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true) },
        }),
    ))
}

async fn scale(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    t: &Target,
    q: &HashMap<String, String>,
) -> ApiResult<Response<Body>> {
    match req.method().clone() {
        Method::GET => Ok(json_response(200, &crate::scale::get(&shared.lock(), t)?)),
        Method::PUT => {
            let dry = dry_run(q)?;
            let body = parse_json_body(&read_body(shared, req).await?)?;
            Ok(json_response(
                200,
                &crate::scale::update(&mut shared.lock(), t, body, dry)?,
            ))
        }
        Method::PATCH => {
            let dry = dry_run(q)?;
            let ct = req
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let kind = PatchKind::from_content_type(&ct)?;
            let body = read_body(shared, req).await?;
            Ok(json_response(
                200,
                &crate::scale::patch(&mut shared.lock(), t, kind, &body, dry)?,
            ))
        }
        m => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on the scale subresource"
        ))),
    }
}

fn watch_response(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    })
    .boxed();
    let mut r = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
