//! Raw HTTP edge cases: every error is a Status with the real code; scale; foreground deletion.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube_sim::{Config, KubeSim, KubeSimHandle};
use serde_json::json;

async fn start() -> (KubeSimHandle, kube::Client) {
    let sim = KubeSim::start(Config::default())
        .await
        .expect("start kube-sim");
    let client = sim.client().expect("client");
    (sim, client)
}

async fn status_of(
    client: &kube::Client,
    method: &str,
    path: &str,
    ct: &str,
    body: &str,
) -> (u16, String) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", ct)
        .body(body.as_bytes().to_vec())
        .expect("request");
    match client.request_text(req).await {
        Ok(text) => (200, text),
        Err(kube::Error::Api(s)) => (s.code, s.reason.clone()),
        Err(e) => panic!("{method} {path}: expected a Status, got {e:?}"),
    }
}

#[tokio::test]
async fn errors_are_status_objects() {
    let (_sim, client) = start().await;
    let j = "application/json";
    assert_eq!(
        status_of(&client, "GET", "/apis/nope.example.com/v1/things", j, "").await,
        (404, "NotFound".into())
    );
    assert_eq!(
        status_of(
            &client,
            "GET",
            "/api/v1/namespaces/default/pods/a/b/c",
            j,
            ""
        )
        .await
        .0,
        404
    );
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            j,
            "{not json"
        )
        .await,
        (400, "BadRequest".into())
    );
    assert_eq!(
        status_of(
            &client,
            "PUT",
            "/api/v1/namespaces/default/configmaps",
            j,
            "{}"
        )
        .await
        .0,
        405
    );
    assert_eq!(
        status_of(&client, "POST", "/api/v1/configmaps", j, "{}")
            .await
            .0,
        405
    );
    assert_eq!(status_of(&client, "POST", "/version", j, "{}").await.0, 405);
    assert_eq!(
        status_of(
            &client,
            "GET",
            "/api/v1/namespaces/default/configmaps?limit=abc",
            j,
            ""
        )
        .await
        .0,
        400
    );
    assert_eq!(
        status_of(
            &client,
            "GET",
            "/api/v1/namespaces/default/configmaps?continue=%%%",
            j,
            ""
        )
        .await
        .0,
        400
    );
    assert_eq!(
        status_of(
            &client,
            "GET",
            "/api/v1/namespaces/default/configmaps?fieldSelector=spec.x%3Dy",
            j,
            ""
        )
        .await
        .0,
        400
    );
    let body = r#"{"metadata":{"name":"a"}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            j,
            body
        )
        .await
        .0,
        200
    );
    assert_eq!(
        status_of(
            &client,
            "PATCH",
            "/api/v1/namespaces/default/configmaps/a",
            "text/plain",
            "{}"
        )
        .await,
        (415, "UnsupportedMediaType".into())
    );
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/vnd.kubernetes.protobuf",
            "x"
        )
        .await
        .0,
        415
    );
    // Body namespace must match the URL; kind must match the resource.
    let other = r#"{"metadata":{"name":"b","namespace":"kube-system"}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            j,
            other
        )
        .await
        .0,
        400
    );
    let wrong_kind = r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"c"}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            j,
            wrong_kind
        )
        .await
        .0,
        400
    );
    let no_name = r#"{"metadata":{}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            j,
            no_name
        )
        .await,
        (422, "Invalid".into())
    );
    let negative =
        r#"{"metadata":{"name":"d"},"spec":{"replicas":-1,"selector":{},"template":{}}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/apis/apps/v1/namespaces/default/deployments",
            j,
            negative
        )
        .await
        .0,
        422
    );
    // TokenRequest with an absurd expiry is clamped, not a crash.
    let sa = r#"{"metadata":{"name":"sa"}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts",
            j,
            sa
        )
        .await
        .0,
        200
    );
    let tr = r#"{"spec":{"expirationSeconds":9223372036854775807}}"#;
    assert_eq!(
        status_of(
            &client,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/sa/token",
            j,
            tr
        )
        .await
        .0,
        200
    );
    // Discovery documents.
    let (code, text) = status_of(&client, "GET", "/apis/apps/v1", j, "").await;
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    let names: Vec<&str> = doc["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"deployments")
            && names.contains(&"deployments/status")
            && names.contains(&"deployments/scale")
    );
    let (_, text) = status_of(&client, "GET", "/version", j, "").await;
    assert!(text.contains("gitVersion"));
}

#[tokio::test]
async fn scale_subresource() {
    let (_sim, client) = start().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    }))
    .expect("deployment");
    deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    let s = deploys.get_scale("web").await.expect("get scale");
    assert_eq!(s.spec.and_then(|s| s.replicas), Some(1));
    assert_eq!(s.status.map(|s| s.selector), Some(Some("app=web".into())));
    let s = deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .expect("patch scale");
    assert_eq!(s.spec.and_then(|s| s.replicas), Some(4));
    let d = deploys.get("web").await.expect("get");
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(4));
    assert_eq!(d.metadata.generation, Some(2));
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm");
    let owner = cms
        .create(&PostParams::default(), &owner)
        .await
        .expect("owner");
    let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid, "blockOwnerDeletion": true}]);
    let free: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "free", "ownerReferences": oref}}))
            .expect("cm");
    let held: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "held", "ownerReferences": oref, "finalizers": ["t/hold"]}}),
    )
    .expect("cm");
    cms.create(&PostParams::default(), &free)
        .await
        .expect("free");
    cms.create(&PostParams::default(), &held)
        .await
        .expect("held");

    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    cms.delete("owner", &dp).await.expect("foreground delete");
    // The owner waits (foregroundDeletion finalizer) while a dependent is still there.
    let o = cms.get("owner").await.expect("owner still present");
    assert!(o.metadata.deletion_timestamp.is_some());
    assert!(
        o.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_string())
    );
    assert!(cms.get_opt("free").await.expect("get").is_none());
    assert!(
        cms.get("held")
            .await
            .expect("held")
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // Releasing the dependent completes the owner's deletion.
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    assert!(cms.get_opt("held").await.expect("get").is_none());
    assert!(cms.get_opt("owner").await.expect("get").is_none());
}

#[tokio::test]
async fn request_accounting_and_retry_after() {
    use kube_sim::hooks::{Fault, FaultRule};
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}})).expect("cm");
    sim.reset_request_counts();
    let pp = PostParams {
        field_manager: Some("tester".into()),
        ..Default::default()
    };
    cms.create(&pp, &cm).await.expect("create");
    let same = Patch::Merge(json!({"data": {"k": "v"}}));
    let rv_before = cms.get("a").await.expect("get").metadata.resource_version;
    for _ in 0..3 {
        cms.patch(
            "a",
            &PatchParams {
                field_manager: Some("tester".into()),
                ..Default::default()
            },
            &same,
        )
        .await
        .expect("no-op patch");
    }
    assert_eq!(
        cms.get("a").await.expect("get").metadata.resource_version,
        rv_before,
        "no-op patches store nothing"
    );
    let c = sim.request_counts();
    assert_eq!(c.get("create", "configmaps"), 1);
    assert_eq!(c.get("patch", "configmaps"), 3);
    assert_eq!(c.get("get", "configmaps"), 2);
    assert_eq!(c.writes(), 4);
    assert_eq!(c.noop_writes, 3);
    assert_eq!(c.by_field_manager.get("tester"), Some(&4));
    assert!(c.refused.is_empty(), "{:?}", c.refused);

    // A write fenced by an old resourceVersion is sent, refused and counted as both.
    let stale = Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"k": "w"}}));
    let e = cms.patch("a", &PatchParams::default(), &stale).await;
    assert!(
        matches!(e, Err(kube::Error::Api(ref s)) if s.code == 409),
        "{e:?}"
    );
    let c = sim.request_counts();
    assert_eq!(c.get("patch", "configmaps"), 4);
    assert_eq!(c.succeeded("patch", "configmaps"), 3);
    assert_eq!(c.succeeded("get", "configmaps"), 2);

    sim.inject_fault(
        FaultRule::new(
            Some("get"),
            None,
            Fault::Status {
                code: 429,
                retry_after_seconds: Some(7),
            },
        )
        .times(1),
    );
    // Raw HTTP: the kube client itself would honour Retry-After and retry.
    let raw = raw_get(
        sim.addr(),
        "/api/v1/namespaces/default/configmaps/a",
        Some(kube_sim::kubeconfig::ADMIN_TOKEN),
        None,
    )
    .await;
    assert!(raw.starts_with("HTTP/1.1 429"), "{raw}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: 7"), "{raw}");
    assert!(raw.contains("\"reason\":\"TooManyRequests\""), "{raw}");
    // The rule was used up.
    assert!(cms.get("a").await.is_ok());
    let c = sim.request_counts();
    assert_eq!(
        c.get("get", "configmaps") - c.succeeded("get", "configmaps"),
        1
    );
}

/// A GET over a bare TCP connection, with the admin token or none (`token: None`), and an
/// optional `Accept` header.
async fn raw_get(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
    accept: Option<&str>,
) -> String {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: kube-sim\r\n{auth}{accept}Connection: close\r\n\r\n");
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(req.as_bytes()).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    })
    .await
    .expect("join")
}

#[tokio::test]
async fn rbac_for_service_account_tokens() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
    let (sim, admin) = start().await;
    sim.apply_yaml(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-reader, namespace: default}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [configmaps], verbs: [patch], resourceNames: [mine]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: op-cm, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}
subjects: [{kind: ServiceAccount, name: op, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ns-lister}
rules: [{apiGroups: [""], resources: [namespaces], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: op-ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ns-lister}
subjects: [{kind: Group, name: "system:serviceaccounts:default"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: mine, namespace: default}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: default}
"#,
    )
    .expect("rbac objects");

    // A token from the TokenRequest API.
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let tr: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).expect("token request");
    let tr = sas
        .create_token_request("op", &PostParams::default(), &tr)
        .await
        .expect("token");
    let token = tr.status.expect("status").token;
    let client = sim.client_with_token(&token).expect("client");

    let code = |r: Result<(), kube::Error>| match r {
        Ok(()) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("unexpected {e:?}"),
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert_eq!(code(cms.list(&Default::default()).await.map(|_| ())), 200);
    assert_eq!(code(cms.get("other").await.map(|_| ())), 200);
    let merge = Patch::Merge(json!({"data": {"a": "b"}}));
    assert_eq!(
        code(
            cms.patch("mine", &PatchParams::default(), &merge)
                .await
                .map(|_| ())
        ),
        200
    );
    assert_eq!(
        code(
            cms.patch("other", &PatchParams::default(), &merge)
                .await
                .map(|_| ())
        ),
        403
    );
    let new: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "new"}})).expect("cm");
    match cms.create(&PostParams::default(), &new).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
            assert!(
                s.message.contains("system:serviceaccount:default:op")
                    && s.message.contains("cannot create"),
                "{}",
                s.message
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    let sys: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    assert_eq!(code(sys.list(&Default::default()).await.map(|_| ())), 403);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        code(secrets.list(&Default::default()).await.map(|_| ())),
        403
    );
    let nss: Api<Namespace> = Api::all(client.clone());
    assert_eq!(code(nss.list(&Default::default()).await.map(|_| ())), 200);
    assert_eq!(code(nss.get("default").await.map(|_| ())), 403);

    // Unknown tokens are 401; requests without credentials are the admin (kubectl over HTTP).
    let bad = sim.client_with_token("nope").expect("client");
    let bad_cms: Api<ConfigMap> = Api::namespaced(bad, "default");
    assert_eq!(
        code(bad_cms.list(&Default::default()).await.map(|_| ())),
        401
    );
    let anon = raw_get(
        sim.addr(),
        "/api/v1/namespaces/default/configmaps",
        None,
        None,
    )
    .await;
    assert!(anon.starts_with("HTTP/1.1 200"), "{anon}");
    let anon = raw_get(sim.addr(), "/version", None, None).await;
    assert!(anon.starts_with("HTTP/1.1 200"), "{anon}");
}

/// A request over a bare TCP connection with a bearer token: the status code and the body.
async fn raw_send(
    addr: std::net::SocketAddr,
    (method, path): (&str, &str),
    token: &str,
    content_type: &str,
    body: &str,
) -> (u16, String) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: kube-sim\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let out = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.write_all(req.as_bytes()).expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        out
    })
    .await
    .expect("join");
    let code = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {out}"));
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    (code, body.to_string())
}

/// A server-side apply that creates the object is authorized as `create` too, as upstream's
/// patch handler does (`withAuthorization` around the create validation); an apply to an
/// existing object needs only `patch`, and an apply never creates through a subresource.
#[tokio::test]
async fn apply_that_creates_needs_create() {
    let (sim, admin) = start().await;
    sim.apply_yaml(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: patcher, namespace: default}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: creator, namespace: default}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: create-only, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-patch, namespace: default}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, patch]}
- {apiGroups: [""], resources: [configmaps], verbs: [create], resourceNames: [named]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-patch-create, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, patch, create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-create, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: patcher, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-patch}
subjects: [{kind: ServiceAccount, name: patcher, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: creator, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-patch-create}
subjects: [{kind: ServiceAccount, name: creator, namespace: default}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: create-only, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-create}
subjects: [{kind: ServiceAccount, name: create-only, namespace: default}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: existing, namespace: default}
data: {a: "1"}
"#,
    )
    .expect("rbac objects");
    let addr = sim.addr();
    let apply = |name: &str, query: &str| {
        (
            format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=test{query}"),
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}},"data":{{"a":"2"}}}}"#
            ),
        )
    };
    let ct = "application/apply-patch+yaml";
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let patcher = sim.service_account_token("default", "patcher");
    let creator = sim.service_account_token("default", "creator");
    let create_only = sim.service_account_token("default", "create-only");

    // patch alone: creating by apply is forbidden, as a create, and nothing is stored.
    let (path, body) = apply("new", "");
    let (code, status) = raw_send(addr, ("PATCH", &path), &patcher, ct, &body).await;
    assert_eq!(code, 403, "{status}");
    let status: serde_json::Value = serde_json::from_str(&status).expect("Status");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "configmaps \"new\" is forbidden: User \"system:serviceaccount:default:patcher\" \
         cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    assert!(cms.get_opt("new").await.expect("get").is_none());
    // A dry run that would create is authorized the same way.
    let (path, body) = apply("new", "&dryRun=All");
    let (code, status) = raw_send(addr, ("PATCH", &path), &patcher, ct, &body).await;
    assert_eq!(code, 403, "{status}");
    // `create` limited by resourceNames allows the apply that creates that name: the name is
    // known when an apply is authorized, unlike a POST.
    let (path, body) = apply("named", "");
    let (code, status) = raw_send(addr, ("PATCH", &path), &patcher, ct, &body).await;
    assert_eq!(code, 201, "{status}");
    // patch alone is enough for an object that exists (taking `a` over from the loader).
    let (path, body) = apply("existing", "&force=true");
    let (code, status) = raw_send(addr, ("PATCH", &path), &patcher, ct, &body).await;
    assert_eq!(code, 200, "{status}");
    let cm = cms.get("existing").await.expect("existing");
    assert_eq!(cm.data.expect("data")["a"], "2");

    // patch and create: the apply creates the object.
    let (path, body) = apply("new", "");
    let (code, status) = raw_send(addr, ("PATCH", &path), &creator, ct, &body).await;
    assert_eq!(code, 201, "{status}");
    assert!(cms.get_opt("new").await.expect("get").is_some());

    // create without patch: the request itself is a patch and is refused as one.
    let (path, body) = apply("other", "");
    let (code, status) = raw_send(addr, ("PATCH", &path), &create_only, ct, &body).await;
    assert_eq!(code, 403, "{status}");
    assert!(status.contains("cannot patch resource"), "{status}");
    assert!(cms.get_opt("other").await.expect("get").is_none());

    // An apply to the status of an object that does not exist is 404 and creates nothing
    // (upstream subresource stores never create on update).
    let deploys: Api<Deployment> = Api::namespaced(admin.clone(), "default");
    let status_apply = Patch::Apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "ghost"}, "status": {"replicas": 1}
    }));
    let r = deploys
        .patch_status("ghost", &PatchParams::apply("test"), &status_apply)
        .await;
    match r {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (404, "NotFound")),
        other => panic!("expected 404, got {other:?}"),
    }
    assert!(deploys.get_opt("ghost").await.expect("get").is_none());
}

/// `Accept: application/json;as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1`, as sent by
/// kube-rs `Api<PartialObjectMeta<K>>`: GET, LIST, PATCH and WATCH answer metadata only.
#[tokio::test]
async fn metadata_only_responses() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::ResourceExt;
    use kube::api::ListParams;
    use kube::core::PartialObjectMeta;

    const ONE: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    // base64 of "supersecret"
    const VALUE: &str = "c3VwZXJzZWNyZXQ=";
    let sim = KubeSim::start(Config {
        bookmark_interval: std::time::Duration::from_millis(200),
        ..Config::default()
    })
    .await
    .expect("start kube-sim");
    let client = sim.client().expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for (name, tier) in [("a", "db"), ("b", "web"), ("c", "db")] {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"tier": tier}, "annotations": {"note": name}},
            "data": {"password": VALUE},
        }))
        .expect("secret");
        secrets
            .create(&PostParams::default(), &s)
            .await
            .expect("create");
    }
    let metas: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), "default");

    // GET, through Api<PartialObjectMeta<K>> and through get_metadata on a typed Api.
    let a = metas.get("a").await.expect("get");
    let types = a.types.clone().expect("types");
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );
    assert_eq!(a.labels().get("tier").map(String::as_str), Some("db"));
    assert_eq!(a.annotations().get("note").map(String::as_str), Some("a"));
    assert!(a.uid().is_some() && a.resource_version().is_some());
    let a2 = secrets.get_metadata("a").await.expect("get_metadata");
    assert_eq!(a2.resource_version(), a.resource_version());
    assert_eq!(a2.types.expect("types").kind, "PartialObjectMetadata");

    // LIST with a label selector, and paging with list_metadata.
    let db = metas
        .list(&ListParams::default().labels("tier=db"))
        .await
        .expect("list");
    assert_eq!(db.types.kind, "PartialObjectMetadataList");
    assert_eq!(db.types.api_version, "meta.k8s.io/v1");
    assert!(db.metadata.resource_version.is_some());
    let names: Vec<String> = db.items.iter().map(|o| o.name_any()).collect();
    assert_eq!(names, ["a", "c"]);
    assert!(db.items.iter().all(|o| {
        o.types
            .as_ref()
            .is_some_and(|t| t.kind == "PartialObjectMetadata")
    }));
    let page = secrets
        .list_metadata(&ListParams::default().labels("tier=db").limit(1))
        .await
        .expect("page 1");
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.metadata.remaining_item_count, Some(1));
    let token = page.metadata.continue_.clone().expect("continue");
    let rest = secrets
        .list_metadata(
            &ListParams::default()
                .labels("tier=db")
                .limit(1)
                .continue_token(&token),
        )
        .await
        .expect("page 2");
    assert_eq!(rest.items[0].name_any(), "c");
    assert!(rest.metadata.continue_.is_none());

    // Raw bytes: no data and no secret value, the metadata is there.
    let path = "/api/v1/namespaces/default/secrets";
    let raw = raw_get(sim.addr(), &format!("{path}/a"), None, Some(ONE)).await;
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains(r#""kind":"PartialObjectMetadata""#), "{raw}");
    assert!(raw.contains(r#""apiVersion":"meta.k8s.io/v1""#), "{raw}");
    assert!(
        raw.contains(r#""tier":"db""#) && raw.contains(r#""note":"a""#),
        "{raw}"
    );
    assert!(raw.contains(r#""resourceVersion":"#), "{raw}");
    assert!(
        !raw.contains(r#""data":"#) && !raw.contains("c3VwZXJzZWNyZXQ"),
        "{raw}"
    );
    let raw = raw_get(
        sim.addr(),
        &format!("{path}?labelSelector=tier%3Ddb"),
        None,
        Some(LIST),
    )
    .await;
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(
        raw.contains(r#""kind":"PartialObjectMetadataList""#),
        "{raw}"
    );
    assert!(
        raw.contains(r#""name":"a""#) && raw.contains(r#""name":"c""#),
        "{raw}"
    );
    assert!(!raw.contains(r#""name":"b""#), "{raw}");
    assert!(
        !raw.contains(r#""data":"#) && !raw.contains("c3VwZXJzZWNyZXQ"),
        "{raw}"
    );
    // v1beta1 and a list of alternatives (client-go's metadata client), first usable one wins.
    let raw = raw_get(
        sim.addr(),
        &format!("{path}/a"),
        None,
        Some(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1,\
             application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1,application/json",
        ),
    )
    .await;
    assert!(
        raw.contains(r#""apiVersion":"meta.k8s.io/v1beta1""#),
        "{raw}"
    );
    assert!(!raw.contains("c3VwZXJzZWNyZXQ"), "{raw}");
    // An unknown version falls back to the next alternative: the full object.
    let raw = raw_get(
        sim.addr(),
        &format!("{path}/a"),
        None,
        Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v9, application/json"),
    )
    .await;
    assert!(
        raw.contains(r#""kind":"Secret""#) && raw.contains(VALUE),
        "{raw}"
    );
    // The single form for a list (and the other way round) is 406, as on the real server.
    let raw = raw_get(sim.addr(), path, None, Some(ONE)).await;
    assert!(raw.starts_with("HTTP/1.1 406"), "{raw}");
    assert!(raw.contains(r#""reason":"NotAcceptable""#), "{raw}");
    let raw = raw_get(sim.addr(), &format!("{path}/a"), None, Some(LIST)).await;
    assert!(raw.starts_with("HTTP/1.1 406"), "{raw}");
    // Tables are unchanged.
    let raw = raw_get(
        sim.addr(),
        path,
        None,
        Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
    )
    .await;
    assert!(raw.contains(r#""kind":"Table""#), "{raw}");
    assert!(!raw.contains("c3VwZXJzZWNyZXQ"), "{raw}");

    // PATCH through Api<PartialObjectMeta<K>> answers metadata only; the data is kept.
    // (after all three creations)
    let rv = db.metadata.resource_version.clone().expect("rv");
    let patched = metas
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"patched": "yes"}}})),
        )
        .await
        .expect("patch");
    assert_eq!(
        patched.types.as_ref().expect("types").kind,
        "PartialObjectMetadata"
    );
    assert_eq!(
        patched.annotations().get("patched").map(String::as_str),
        Some("yes")
    );
    let full = secrets.get("a").await.expect("get");
    assert!(full.data.expect("data").contains_key("password"));

    // WATCH: every event's object (bookmarks too) is PartialObjectMetadata.
    secrets
        .delete("c", &DeleteParams::default())
        .await
        .expect("delete");
    let raw = raw_get(
        sim.addr(),
        &format!(
            "{path}?watch=true&resourceVersion={rv}&labelSelector=tier%3Ddb\
             &allowWatchBookmarks=true&timeoutSeconds=1"
        ),
        None,
        Some(ONE),
    )
    .await;
    assert!(
        !raw.contains(r#""data":"#) && !raw.contains("c3VwZXJzZWNyZXQ"),
        "{raw}"
    );
    let events: Vec<serde_json::Value> = raw
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    let seen: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            assert_eq!(e["object"]["kind"], "PartialObjectMetadata", "{e}");
            assert_eq!(e["object"]["apiVersion"], "meta.k8s.io/v1", "{e}");
            (
                e["type"].as_str().unwrap_or_default(),
                e["object"]["metadata"]["name"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(seen[..2], [("MODIFIED", "a"), ("DELETED", "c")], "{raw}");
    assert!(seen[2..].iter().all(|(t, _)| *t == "BOOKMARK"), "{raw}");
    assert!(seen.len() > 2, "a bookmark within 1s: {raw}");
    assert!(events[2]["object"]["metadata"]["resourceVersion"].is_string());
    // ERROR events stay Status objects.
    sim.compact();
    let raw = raw_get(
        sim.addr(),
        &format!("{path}?watch=true&resourceVersion={rv}"),
        None,
        Some(ONE),
    )
    .await;
    assert!(raw.contains(r#""type":"ERROR""#), "{raw}");
    assert!(
        raw.contains(r#""kind":"Status""#) && raw.contains(r#""code":410"#),
        "{raw}"
    );
}

/// `resourceNames` authorizes a list or watch only with a `metadata.name` field selector
/// naming an allowed object, as on a real API server (how a Secret's owner grants one
/// Secret and nothing else).
#[tokio::test]
async fn resource_names_authorize_a_list_or_watch_by_name() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{ListParams, WatchParams};
    let (sim, _admin) = start().await;
    sim.apply_yaml(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: one-secret, namespace: default}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get, list, watch], resourceNames: [shared]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: op-one-secret, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: one-secret}
subjects: [{kind: ServiceAccount, name: op, namespace: default}]
---
apiVersion: v1
kind: Secret
metadata: {name: shared, namespace: default}
stringData: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: default}
stringData: {c: d}
"#,
    )
    .expect("objects");
    let token = sim.service_account_token("default", "op");
    let client = sim.client_with_token(&token).expect("client");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let code = |r: Result<usize, kube::Error>| match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("unexpected {e:?}"),
    };
    let list = |fields: &str| ListParams::default().fields(fields);
    let listed = secrets.list(&list("metadata.name=shared")).await;
    assert_eq!(listed.as_ref().map(|l| l.items.len()).ok(), Some(1));
    let n = |r: Result<kube::core::ObjectList<Secret>, kube::Error>| r.map(|l| l.items.len());
    assert_eq!(
        code(n(secrets.list(&list("metadata.name==shared")).await)),
        200
    );
    assert_eq!(code(n(secrets.list(&ListParams::default()).await)), 403);
    assert_eq!(
        code(n(secrets.list(&list("metadata.name=other")).await)),
        403
    );
    let both = list("metadata.name=shared,metadata.namespace=default");
    assert_eq!(code(n(secrets.list(&both).await)), 403);
    let watch = |fields: &str| WatchParams::default().fields(fields).timeout(1);
    let watched = secrets.watch(&watch("metadata.name=shared"), "0").await;
    assert_eq!(code(watched.map(|_| 0)), 200);
    let watched = secrets.watch(&watch("metadata.name=other"), "0").await;
    assert_eq!(code(watched.map(|_| 0)), 403);
    assert_eq!(code(secrets.get("shared").await.map(|_| 0)), 200);
    assert_eq!(code(secrets.get("other").await.map(|_| 0)), 403);
}

/// ValidatingAdmissionPolicy: match conditions select, validations deny with the real
/// message, messageExpression and failurePolicy behave as on a real API server.
#[tokio::test]
async fn validating_admission_policies_deny_what_they_select() {
    let (sim, admin) = start().await;
    sim.apply_yaml(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: labelled}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  matchConditions:
  - {name: not-exempt, expression: "!object.metadata.name.startsWith('exempt-')"}
  validations:
  - expression: "has(object.metadata.labels) && 'app.kubernetes.io/team' in object.metadata.labels && object.metadata.labels['app.kubernetes.io/team'] == 'a'"
    messageExpression: "'configmap ' + object.metadata.name + ' needs the team label'"
  - expression: "object.data.missing == 'x'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: labelled}
spec: {policyName: labelled, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: lenient}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  validations:
  - expression: "object.nothing.here == 1"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: lenient}
spec: {policyName: lenient, validationActions: [Deny]}
"#,
    )
    .expect("policies");
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let cm = |name: &str, labels: serde_json::Value, data: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data}))
            .expect("cm")
    };
    let pp = PostParams::default();
    match cms.create(&pp, &cm("plain", json!({}), json!({}))).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            assert_eq!(
                s.message,
                "ValidatingAdmissionPolicy 'labelled' with binding 'labelled' denied request: configmap plain needs the team label"
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    // Labelled, but the second validation's field is missing: an error, and failurePolicy
    // defaults to Fail.
    let team = json!({"app.kubernetes.io/team": "a"});
    match cms
        .create(&pp, &cm("labelled", team.clone(), json!({})))
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("resulted in error"), "{}", s.message);
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    cms.create(&pp, &cm("ok", team, json!({"missing": "x"})))
        .await
        .expect("passes every validation");
    cms.create(&pp, &cm("exempt-one", json!({}), json!({})))
        .await
        .expect("not selected by the match condition");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin, "default");
    let s = serde_json::from_value(json!({"metadata": {"name": "s"}})).expect("secret");
    secrets
        .create(&pp, &s)
        .await
        .expect("an error under failurePolicy Ignore admits");
}

#[tokio::test]
async fn size_limits_are_the_real_servers() {
    let (_sim, client) = start().await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(client.clone());
    let secret = |name: &str, bytes: usize| -> k8s_openapi::api::core::v1::Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "stringData": {"big": "x".repeat(bytes)},
        }))
        .expect("secret")
    };
    // Secret data over 1 MiB: 422 with the real message; exactly 1 MiB is stored.
    let pp = PostParams::default();
    let (code, reason, message) = api_error(
        secrets
            .create(&pp, &secret("too-big", 1024 * 1024 + 1))
            .await,
    );
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        "Secret \"too-big\" is invalid: data: Too long: must have at most 1048576 bytes"
    );
    secrets
        .create(&pp, &secret("fits", 1024 * 1024))
        .await
        .expect("1 MiB fits");
    // Annotations over 256 KiB.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "noted", "annotations": {"a": "y".repeat(256 * 1024)}},
    }))
    .expect("cm");
    let (code, _, message) = api_error(cms.create(&pp, &cm).await);
    assert_eq!(code, 422);
    assert!(
        message.contains("metadata.annotations: Too long: must have at most 262144 bytes"),
        "{message}"
    );
    // A body over 3 MiB is refused before it is decoded.
    let body = json!({"metadata": {"name": "huge"}, "data": {"a": "z".repeat(3 * 1024 * 1024)}});
    let (code, reason) = status_of(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &body.to_string(),
    )
    .await;
    assert_eq!((code, reason.as_str()), (413, "RequestEntityTooLarge"));
    // An object over etcd's 1.5 MiB: 413.
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "wide"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": (0..8).map(|i| json!({"name": format!("c{i}"), "image": "i",
                                  "env": [{"name": "V", "value": "w".repeat(200 * 1024)}]})).collect::<Vec<_>>()}}},
    }))
    .expect("deployment");
    let deploys: Api<Deployment> = Api::default_namespaced(client);
    let (code, reason, message) = api_error(deploys.create(&pp, &d).await);
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (
            413,
            "RequestEntityTooLarge",
            "etcdserver: request is too large"
        )
    );
}

fn api_error<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> (u16, String, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason, s.message),
        other => panic!("expected a Status, got {other:?}"),
    }
}

/// A client for `token` (None: the admin) that impersonates `user` and `groups`.
fn impersonating(
    sim: &KubeSimHandle,
    token: Option<&str>,
    user: &str,
    groups: &[&str],
) -> kube::Client {
    let mut config = kube::Config::new(sim.base_url().parse().expect("url"));
    config.default_namespace = "default".into();
    let mut auth = json!({ "as": user, "as-groups": groups });
    if let Some(t) = token {
        auth["token"] = json!(t);
    }
    config.auth_info = serde_json::from_value(auth).expect("auth info");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn access_reviews_and_impersonation_follow_rbac() {
    use k8s_openapi::api::authorization::v1::{
        LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview,
        SubjectAccessReview,
    };
    use k8s_openapi::api::core::v1::Pod;
    let (sim, admin) = start().await;
    sim.apply_yaml(
        r#"
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: x}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: admin-helper, namespace: x}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: x}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader-pods, namespace: x}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: x}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: impersonator}
rules: [{apiGroups: [""], resources: [users, groups], verbs: [impersonate]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: helper-impersonates}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonator}
subjects: [{kind: ServiceAccount, name: admin-helper, namespace: x}]
"#,
    )
    .expect("rbac");
    let reader = "system:serviceaccount:x:reader";
    let attrs = |verb: &str, ns: &str| json!({"resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}});
    let pp = PostParams::default();

    // SelfSubjectAccessReview as the reader (admin impersonating it), with the RBAC reason.
    let as_reader = impersonating(&sim, None, reader, &[]);
    let ssar: Api<SelfSubjectAccessReview> = Api::all(as_reader.clone());
    let review = |spec: serde_json::Value| -> SelfSubjectAccessReview {
        serde_json::from_value(json!({"spec": spec})).expect("review")
    };
    let st = ssar
        .create(&pp, &review(attrs("list", "x")))
        .await
        .expect("ssar")
        .status
        .expect("status");
    assert!(st.allowed);
    assert_eq!(
        st.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"reader-pods/x\" of Role \"pod-reader\" to ServiceAccount \"reader/x\""
        )
    );
    for spec in [attrs("delete", "x"), attrs("list", "default")] {
        let st = ssar
            .create(&pp, &review(spec))
            .await
            .expect("ssar")
            .status
            .expect("status");
        assert!(!st.allowed);
    }
    let both = json!({"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/api", "verb": "get"}});
    let (code, _, message) = api_error(ssar.create(&pp, &review(both)).await);
    assert_eq!(code, 422, "{message}");
    let url = json!({"nonResourceAttributes": {"path": "/apis/apps", "verb": "get"}});
    assert!(
        ssar.create(&pp, &review(url))
            .await
            .expect("ssar")
            .status
            .expect("status")
            .allowed
    );

    // SubjectAccessReview and LocalSubjectAccessReview name the user instead.
    let sar: Api<SubjectAccessReview> = Api::all(admin.clone());
    let spec = |verb: &str| {
        let mut s = attrs(verb, "x");
        s["user"] = json!(reader);
        s
    };
    let sar_of = |verb: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": spec(verb)})).expect("sar")
    };
    assert!(
        sar.create(&pp, &sar_of("get"))
            .await
            .expect("sar")
            .status
            .expect("status")
            .allowed
    );
    assert!(
        !sar.create(&pp, &sar_of("create"))
            .await
            .expect("sar")
            .status
            .expect("status")
            .allowed
    );
    let lsar: Api<LocalSubjectAccessReview> = Api::namespaced(admin.clone(), "default");
    let local: LocalSubjectAccessReview =
        serde_json::from_value(json!({"spec": spec("get")})).expect("lsar");
    assert_eq!(
        api_error(lsar.create(&pp, &local).await).0,
        422,
        "namespace must match the path"
    );

    // SelfSubjectRulesReview lists the bound rules.
    let rules: Api<SelfSubjectRulesReview> = Api::all(as_reader.clone());
    let ssrr: SelfSubjectRulesReview =
        serde_json::from_value(json!({"spec": {"namespace": "x"}})).expect("ssrr");
    let st = rules
        .create(&pp, &ssrr)
        .await
        .expect("ssrr")
        .status
        .expect("status");
    assert!(
        st.resource_rules.iter().any(
            |r| r.resources.as_deref() == Some(&["pods".to_string()][..])
                && r.verbs == ["get", "list"]
        ),
        "{st:?}"
    );

    // The impersonated user's rights apply to ordinary requests too.
    let pods: Api<Pod> = Api::namespaced(as_reader.clone(), "x");
    pods.list(&Default::default())
        .await
        .expect("the reader lists pods in x");
    let elsewhere: Api<Pod> = Api::namespaced(as_reader, "default");
    let (code, _, message) = api_error(elsewhere.list(&Default::default()).await);
    assert_eq!(code, 403);
    assert!(
        message.contains("User \"system:serviceaccount:x:reader\" cannot list resource \"pods\""),
        "{message}"
    );

    // Impersonation needs the impersonate verb.
    let token = |name: &str| sim.service_account_token("x", name);
    let denied = impersonating(&sim, Some(&token("reader")), "alice", &[]);
    let (code, _, message) = api_error(
        Api::<Pod>::namespaced(denied, "x")
            .list(&Default::default())
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "users \"alice\" is forbidden: User \"system:serviceaccount:x:reader\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let helper = impersonating(&sim, Some(&token("admin-helper")), "alice", &["devs"]);
    let ssar: Api<SelfSubjectAccessReview> = Api::all(helper);
    let st = ssar
        .create(&pp, &review(attrs("list", "x")))
        .await
        .expect("ssar")
        .status
        .expect("status");
    assert!(!st.allowed, "alice has no rights of her own");
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn bytes_field(no: u64, b: &[u8], out: &mut Vec<u8>) {
    varint(no << 3 | 2, out);
    varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

/// DeleteOptions as client-go's typed clients send it: the protobuf envelope with the
/// resource's group version (Helm deletes its release Secrets this way).
fn delete_options_protobuf(uid: Option<&str>, dry_run: bool) -> Vec<u8> {
    let mut opts = Vec::new();
    if let Some(uid) = uid {
        let mut pre = Vec::new();
        bytes_field(1, uid.as_bytes(), &mut pre);
        bytes_field(2, &pre, &mut opts);
    }
    bytes_field(4, b"Background", &mut opts);
    if dry_run {
        bytes_field(5, b"All", &mut opts);
    }
    let mut type_meta = Vec::new();
    bytes_field(1, b"v1", &mut type_meta);
    bytes_field(2, b"DeleteOptions", &mut type_meta);
    let mut body = b"k8s\0".to_vec();
    bytes_field(1, &type_meta, &mut body);
    bytes_field(2, &opts, &mut body);
    body
}

#[tokio::test]
async fn protobuf_delete_options_are_read() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "a"}})).expect("cm");
    let uid = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create")
        .metadata
        .uid
        .expect("uid");
    let delete = |body: Vec<u8>| {
        let client = client.clone();
        async move {
            let req = http::Request::builder()
                .method("DELETE")
                .uri("/api/v1/namespaces/default/configmaps/a")
                .header("content-type", "application/vnd.kubernetes.protobuf")
                .body(body)
                .expect("request");
            match client.request_text(req).await {
                Ok(_) => 200,
                Err(kube::Error::Api(s)) => s.code,
                Err(e) => panic!("expected a Status, got {e:?}"),
            }
        }
    };
    // A precondition on another UID is a conflict; a dry run deletes nothing.
    assert_eq!(
        delete(delete_options_protobuf(Some("other"), false)).await,
        409
    );
    assert_eq!(delete(delete_options_protobuf(Some(&uid), true)).await, 200);
    assert!(cms.get_opt("a").await.expect("get").is_some());
    assert_eq!(
        delete(delete_options_protobuf(Some(&uid), false)).await,
        200
    );
    assert!(cms.get_opt("a").await.expect("get").is_none());
}

/// As a real API server: authorization comes before the resource is looked up, so a user who
/// may not make a request hears 403 even for a resource the server does not serve, and one
/// who may hears 404 (here: OpenShift's Network config, named in RBAC, on a plain cluster).
#[tokio::test]
async fn forbidden_before_not_found_for_resources_the_server_does_not_serve() {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let (sim, admin) = start().await;
    sim.apply_yaml(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: op, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: network-reader}
rules:
- {apiGroups: [config.openshift.io], resources: [networks], resourceNames: [cluster], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: op-network}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: network-reader}
subjects: [{kind: ServiceAccount, name: op, namespace: default}]
"#,
    )
    .expect("rbac objects");
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    let tr: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": []}})).expect("token request");
    let token = sas
        .create_token_request("op", &PostParams::default(), &tr)
        .await
        .expect("token")
        .status
        .expect("status")
        .token;
    let op = sim.client_with_token(&token).expect("client");
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "Network");
    let networks = |c: &kube::Client| -> Api<DynamicObject> {
        Api::all_with(c.clone(), &ApiResource::from_gvk(&gvk))
    };
    let code = |r: Result<(), kube::Error>| match r {
        Ok(()) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("unexpected {e:?}"),
    };
    let every = ListParams::default();
    let by_name = ListParams::default().fields("metadata.name=cluster");
    let list = |api: Api<DynamicObject>, lp: ListParams| async move {
        api.list_metadata(&lp).await.map(|_| ())
    };
    assert_eq!(code(list(networks(&op), every.clone()).await), 403);
    assert_eq!(code(list(networks(&op), by_name).await), 404);
    assert_eq!(code(networks(&op).get("cluster").await.map(|_| ())), 404);
    assert_eq!(code(networks(&op).get("other").await.map(|_| ())), 403);
    assert_eq!(code(list(networks(&admin), every).await), 404);
    // Discovery stays open to every user: a group the server does not serve is a 404.
    let served = op.list_api_group_resources("config.openshift.io/v1").await;
    assert!(matches!(served, Err(kube::Error::Api(s)) if s.code == 404));
}
