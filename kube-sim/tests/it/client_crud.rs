//! kube-rs client against kube-sim over real HTTP: CRUD, paging, selectors, status, finalizers, conflicts.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Discovery;
use kube_sim::{Config, KubeSim, KubeSimHandle};
use serde_json::json;

async fn start() -> (KubeSimHandle, kube::Client) {
    let sim = KubeSim::start(Config::default())
        .await
        .expect("start kube-sim");
    let client = sim.client().expect("client");
    (sim, client)
}

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "data": {"k": "v"},
    }))
    .expect("configmap")
}

fn err_code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn crud_metadata_and_errors() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &cm("a", &[("app", "x")]))
        .await
        .expect("create");
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    let rv1: u64 = meta
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric rv");

    // AlreadyExists, NotFound, Invalid, BadRequest.
    assert_eq!(
        err_code(
            cms.create(&PostParams::default(), &cm("a", &[]))
                .await
                .unwrap_err()
        ),
        (409, "AlreadyExists".into())
    );
    assert_eq!(
        err_code(cms.get("nope").await.unwrap_err()),
        (404, "NotFound".into())
    );
    assert_eq!(
        err_code(
            cms.create(&PostParams::default(), &cm("Bad_Name", &[]))
                .await
                .unwrap_err()
        )
        .0,
        422
    );
    let other_ns: Api<ConfigMap> = Api::namespaced(client.clone(), "missing-ns");
    assert_eq!(
        err_code(
            other_ns
                .create(&PostParams::default(), &cm("a", &[]))
                .await
                .unwrap_err()
        )
        .0,
        404
    );

    // generateName.
    let mut g = cm("", &[]);
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let g = cms
        .create(&PostParams::default(), &g)
        .await
        .expect("generateName");
    let gname = g.metadata.name.expect("generated name");
    assert!(gname.starts_with("gen-") && gname.len() == 9, "{gname}");

    // Update bumps resourceVersion; stale resourceVersion conflicts.
    let mut a = cms.get("a").await.expect("get");
    a.data = Some(BTreeMap::from([("k".into(), "w".into())]));
    let updated = cms
        .replace("a", &PostParams::default(), &a)
        .await
        .expect("replace");
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("rv");
    assert!(rv2 > rv1);
    let stale = cms
        .replace("a", &PostParams::default(), &a)
        .await
        .unwrap_err();
    assert_eq!(err_code(stale), (409, "Conflict".into()));

    // Patches: merge, JSON, strategic.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
    )
    .await
    .expect("merge patch");
    let p: Patch<()> = Patch::Json(
        serde_json::from_value(json!([{"op": "add", "path": "/data/j", "value": "2"}]))
            .expect("json patch"),
    );
    cms.patch("a", &PatchParams::default(), &p)
        .await
        .expect("json patch");
    let a = cms.get("a").await.expect("get");
    assert_eq!(a.labels().get("m").map(String::as_str), Some("1"));
    assert_eq!(
        a.data.as_ref().and_then(|d| d.get("j")).map(String::as_str),
        Some("2")
    );

    // Secret stringData is stored base64-encoded in data.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"pw": "hunter2"}}))
            .expect("secret");
    let s = secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("create secret");
    assert_eq!(s.data.expect("data")["pw"].0, b"hunter2".to_vec());
    assert!(s.string_data.is_none());

    // Plain delete.
    cms.delete(&gname, &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(err_code(cms.get(&gname).await.unwrap_err()).0, 404);
}

use kube::ResourceExt;

#[tokio::test]
async fn list_paging_and_selectors() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..7 {
        let tier = if i % 2 == 0 { "front" } else { "back" };
        let mut labels = vec![("tier", tier), ("app", "shop")];
        if i == 3 {
            labels.push(("special", "yes"));
        }
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), &labels))
            .await
            .expect("create");
    }
    let sys: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    sys.create(&PostParams::default(), &cm("sys", &[("app", "shop")]))
        .await
        .expect("create");

    // Paging with limit/continue returns every object exactly once.
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = cms.list(&lp).await.expect("list page");
        assert!(page.metadata.resource_version.is_some());
        pages += 1;
        names.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());

    let count = |sel: &'static str| {
        let cms = cms.clone();
        async move {
            cms.list(&ListParams::default().labels(sel))
                .await
                .expect("list")
                .items
                .len()
        }
    };
    assert_eq!(count("tier=front").await, 4);
    assert_eq!(count("tier==back").await, 3);
    assert_eq!(count("tier!=front").await, 3);
    assert_eq!(count("tier in (front,back)").await, 7);
    assert_eq!(count("tier notin (front)").await, 3);
    assert_eq!(count("special").await, 1);
    assert_eq!(count("!special").await, 6);
    assert_eq!(count("app=shop,tier=back,!special").await, 2);

    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=cm-2"))
        .await
        .expect("list");
    assert_eq!(by_name.items.len(), 1);
    let all: Api<ConfigMap> = Api::all(client.clone());
    let everywhere = all
        .list(&ListParams::default().labels("app=shop"))
        .await
        .expect("list all");
    assert_eq!(everywhere.items.len(), 8);
    let in_sys = all
        .list(&ListParams::default().fields("metadata.namespace=kube-system"))
        .await
        .expect("list");
    assert_eq!(in_sys.items.len(), 1);
    let bad = cms
        .list(&ListParams::default().labels("tier in (front"))
        .await
        .unwrap_err();
    assert_eq!(err_code(bad).0, 400);
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "img:1", "env": [{"name": "A", "value": "1"}]}]}},
        },
    }))
    .expect("deployment")
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let (_sim, client) = start().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let mut with_status = deployment("web");
    with_status.status =
        Some(serde_json::from_value(json!({"readyReplicas": 42})).expect("status"));
    let d = deploys
        .create(&PostParams::default(), &with_status)
        .await
        .expect("create");
    assert_eq!(d.metadata.generation, Some(1));
    assert!(
        d.status.as_ref().and_then(|s| s.ready_replicas).is_none(),
        "status given on create is dropped: {:?}",
        d.status
    );

    // Status through the status subresource changes only status.
    let st = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 3}, "spec": {"replicas": 9}})),
        )
        .await
        .expect("patch status");
    assert_eq!(st.status.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(st.spec.as_ref().and_then(|s| s.replicas), Some(1));
    assert_eq!(st.metadata.generation, Some(1));

    // Status in a main-resource write is ignored; spec changes bump generation, metadata changes don't.
    let p = Patch::Merge(json!({"status": {"replicas": 7}, "metadata": {"labels": {"x": "y"}}}));
    let d = deploys
        .patch("web", &PatchParams::default(), &p)
        .await
        .expect("patch");
    assert_eq!(d.status.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(d.metadata.generation, Some(1));
    let p = Patch::Strategic(
        json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img:2"}]}}}}),
    );
    let d = deploys
        .patch("web", &PatchParams::default(), &p)
        .await
        .expect("strategic patch");
    assert_eq!(d.metadata.generation, Some(2));
    let c = &d
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod spec")
        .containers[0];
    assert_eq!(c.image.as_deref(), Some("img:2"));
    assert_eq!(
        c.env.as_ref().map(Vec::len),
        Some(1),
        "env kept by strategic merge"
    );

    let mut whole = deploys.get("web").await.expect("get");
    whole.status.as_mut().expect("status").replicas = Some(0);
    let st = deploys
        .replace_status("web", &PostParams::default(), &whole)
        .await
        .expect("replace status");
    assert_eq!(st.status.and_then(|s| s.replicas), Some(0));
}

#[tokio::test]
async fn finalizers_preconditions_and_gc() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let held = cms
        .create(&PostParams::default(), &held)
        .await
        .expect("create");

    // Precondition mismatch is a conflict.
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    assert_eq!(err_code(cms.delete("held", &dp).await.unwrap_err()).0, 409);

    // With a finalizer, delete only sets deletionTimestamp.
    let r = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let pending = r.left().expect("object still present");
    assert!(pending.metadata.deletion_timestamp.is_some());
    let still = cms.get("held").await.expect("still there");
    assert!(still.metadata.deletion_timestamp.is_some());
    // Removing the last finalizer removes the object.
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    assert_eq!(err_code(cms.get("held").await.unwrap_err()).0, 404);

    // Owner references: background deletion removes dependents; orphan keeps them.
    let owner = cms
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .expect("owner");
    let oref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]);
    for n in ["dep1", "dep2"] {
        let mut d = cm(n, &[]);
        d.metadata.owner_references = Some(serde_json::from_value(oref.clone()).expect("refs"));
        cms.create(&PostParams::default(), &d)
            .await
            .expect("dependent");
    }
    cms.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    assert_eq!(err_code(cms.get("dep1").await.unwrap_err()).0, 404);
    assert_eq!(err_code(cms.get("dep2").await.unwrap_err()).0, 404);

    let owner = cms
        .create(&PostParams::default(), &cm("owner2", &[]))
        .await
        .expect("owner2");
    let mut d = cm("dep3", &[]);
    d.metadata.owner_references = Some(serde_json::from_value(json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner2", "uid": owner.metadata.uid}])).expect("refs"));
    cms.create(&PostParams::default(), &d).await.expect("dep3");
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    cms.delete("owner2", &dp).await.expect("orphan delete");
    let d3 = cms.get("dep3").await.expect("orphan kept");
    assert!(d3.metadata.owner_references.unwrap_or_default().is_empty());
    let _ = held;
}

#[tokio::test]
async fn crd_served_with_status_subresource() {
    let (_sim, client) = start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                          "subresources": {"status": {}}}],
        },
    }))
    .expect("crd");
    let crd = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let conds = crd.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let (ar, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
        .expect("Widget discovered");
    assert_eq!(ar.plural, "widgets");
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status")
    );

    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget")),
    );
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 1}, "status": {"ready": true},
    }))
    .expect("widget");
    let w = api
        .create(&PostParams::default(), &w)
        .await
        .expect("create widget");
    assert!(w.data.get("status").is_none(), "status dropped on create");
    let w = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 5}})),
        )
        .await
        .expect("status");
    assert_eq!(w.data["status"]["ready"], true);
    assert_eq!(w.data["spec"]["size"], 1);
    let strategic = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 2}})),
        )
        .await;
    assert_eq!(err_code(strategic.unwrap_err()).0, 415);

    // Deleting the CRD stops serving its resources.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .expect("delete crd");
    assert_eq!(err_code(api.get("w1").await.unwrap_err()).0, 404);
}

#[tokio::test]
async fn namespace_deletion_removes_contents() {
    let (_sim, client) = start().await;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": "scratch"}})).expect("ns");
    let ns = nss
        .create(&PostParams::default(), &ns)
        .await
        .expect("create ns");
    assert_eq!(ns.status.and_then(|s| s.phase).as_deref(), Some("Active"));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "scratch");
    cms.create(&PostParams::default(), &cm("x", &[]))
        .await
        .expect("cm");
    nss.delete("scratch", &DeleteParams::default())
        .await
        .expect("delete ns");
    assert_eq!(err_code(nss.get("scratch").await.unwrap_err()).0, 404);
    assert_eq!(err_code(cms.get("x").await.unwrap_err()).0, 404);
}

#[tokio::test]
async fn written_kubeconfig_works_with_kube_rs() {
    let (sim, _client) = start().await;
    let path = std::env::temp_dir().join(format!(
        "kube-sim-kc-{}-{}",
        std::process::id(),
        sim.addr().port()
    ));
    sim.write_kubeconfig(&path).expect("write kubeconfig");
    let kc = kube::config::Kubeconfig::read_from(&path).expect("read kubeconfig");
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("config from kubeconfig");
    assert_eq!(config.default_namespace, "default");
    let client = kube::Client::try_from(config).expect("client");
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let _ = std::fs::remove_file(&path);
}

/// Creates the namespaced CRD `PLURAL.example.com` (v1) whose `spec` has `spec_schema`;
/// its objects in `default`.
async fn spec_crd(
    client: &kube::Client,
    plural: &str,
    kind: &str,
    spec_schema: serde_json::Value,
) -> Api<DynamicObject> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": spec_schema},
            }}}],
        },
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", kind));
    Api::namespaced_with(client.clone(), "default", &ar)
}

#[tokio::test]
async fn crd_schema_prunes_defaults_and_validates() {
    let (_sim, client) = start().await;
    let api = spec_crd(
        &client,
        "gadgets",
        "Gadget",
        json!({"type": "object", "required": ["size"], "properties": {
            "size": {"type": "integer"},
            "mode": {"type": "string", "enum": ["fast", "slow"], "default": "slow"},
        }}),
    )
    .await;
    let obj = |spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec}))
            .expect("gadget")
    };
    let g = api
        .create(
            &PostParams::default(),
            &obj(json!({"size": 1, "unknown": true})),
        )
        .await
        .expect("valid gadget");
    assert_eq!(
        g.data["spec"],
        json!({"size": 1, "mode": "slow"}),
        "pruned and defaulted"
    );
    api.delete("g", &DeleteParams::default())
        .await
        .expect("delete");
    for bad in [
        json!({"size": "big"}),
        json!({"mode": "fast"}),
        json!({"size": 1, "mode": "warp"}),
    ] {
        let e = api
            .create(&PostParams::default(), &obj(bad.clone()))
            .await
            .unwrap_err();
        assert_eq!(err_code(e), (422, "Invalid".into()), "{bad}");
    }
}

#[tokio::test]
async fn crd_cel_rules_reject_with_the_rule_message() {
    let (_sim, client) = start().await;
    let api = spec_crd(
        &client,
        "ranges",
        "Range",
        json!({
            "type": "object",
            "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"}
            ],
        }),
    )
    .await;
    let obj = |min: i64, max: i64| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Range",
            "metadata": {"name": "r"}, "spec": {"min": min, "max": max}}))
        .expect("range")
    };
    api.create(&PostParams::default(), &obj(1, 2))
        .await
        .expect("a valid range is accepted");
    let e = api
        .replace("r", &PostParams::default(), &obj(3, 2))
        .await
        .unwrap_err();
    let (code, message) = match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("unexpected error {other}"),
    };
    assert_eq!(code, 422);
    assert!(
        message.contains("spec: Invalid value") && message.contains("min must not exceed max"),
        "{message}"
    );
}

#[tokio::test]
async fn crd_transition_rules_compare_with_the_stored_object() {
    let (_sim, client) = start().await;
    let api = spec_crd(
        &client,
        "volumes",
        "Volume",
        json!({
            "type": "object",
            "properties": {
                "class": {"type": "string",
                          "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "class is immutable"}]},
                "size": {"type": "integer",
                         "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "size may only grow"}]},
            },
        }),
    )
    .await;
    let obj = |class: &str, size: i64| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Volume",
            "metadata": {"name": "v"}, "spec": {"class": class, "size": size}}))
        .expect("volume")
    };
    // Creation has no old object: transition rules do not apply.
    api.create(&PostParams::default(), &obj("fast", 10))
        .await
        .expect("created");
    let replace = |class: &'static str, size: i64| {
        let api = api.clone();
        async move {
            let mut o = obj(class, size);
            o.metadata.resource_version =
                api.get("v").await.expect("get").metadata.resource_version;
            api.replace("v", &PostParams::default(), &o).await
        }
    };
    replace("fast", 20).await.expect("growing is allowed");
    for (class, size, field, message) in [
        ("slow", 20, "spec.class", "class is immutable"),
        ("fast", 5, "spec.size", "size may only grow"),
    ] {
        let e = replace(class, size).await.unwrap_err();
        let (code, text) = match e {
            kube::Error::Api(s) => (s.code, s.message),
            other => panic!("unexpected error {other}"),
        };
        assert_eq!(code, 422, "{text}");
        assert!(
            text.contains(&format!("{field}: Invalid value")) && text.contains(message),
            "{text}"
        );
    }
}

#[tokio::test]
async fn crd_patterns_and_formats_are_checked() {
    let (_sim, client) = start().await;
    let api = spec_crd(
        &client,
        "hosts",
        "Host",
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                "at": {"type": "string", "format": "date-time"},
                "net": {"type": "string", "format": "cidr"},
                "note": {"type": "string", "format": "not-checked"},
            },
        }),
    )
    .await;
    let obj = |name: &str, spec: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Host",
            "metadata": {"name": name}, "spec": spec}))
        .expect("host")
    };
    let good =
        json!({"name": "web-1", "at": "2026-12-03T10:00:00Z", "net": "10.0.0.0/8", "note": "x"});
    api.create(&PostParams::default(), &obj("good", good))
        .await
        .expect("a valid object is accepted");
    let bad = json!({"name": "Web_1", "at": "yesterday", "net": "10.0.0.0/33"});
    let e = api
        .create(&PostParams::default(), &obj("bad", bad))
        .await
        .unwrap_err();
    let (code, message) = match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("unexpected error {other}"),
    };
    assert_eq!(code, 422);
    for expected in [
        r#"spec.name: Invalid value: "Web_1": spec.name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"#,
        r#"spec.at: Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday""#,
        r#"spec.net: Invalid value: "10.0.0.0/33": spec.net in body must be of type cidr: "10.0.0.0/33""#,
    ] {
        assert!(message.contains(expected), "{expected}\nin: {message}");
    }
}

fn managers(obj: &kube::api::ObjectMeta) -> Vec<(String, String)> {
    obj.managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| {
            (
                m.manager.unwrap_or_default(),
                m.operation.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn server_side_apply_ownership_conflicts_and_removal() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let apply = |m: &'static str| PatchParams::apply(m);
    let cfg = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data}),
        )
    };
    // Apply creates the object and records ownership.
    let c = cms
        .patch("ssa", &apply("alice"), &cfg(json!({"a": "1", "b": "2"})))
        .await
        .expect("create by apply");
    assert_eq!(
        managers(&c.metadata),
        [("alice".to_string(), "Apply".to_string())]
    );
    let fields = c
        .metadata
        .managed_fields
        .as_ref()
        .and_then(|m| m[0].fields_v1.clone())
        .expect("fieldsV1")
        .0;
    assert_eq!(fields["f:data"], json!({"f:a": {}, "f:b": {}}));

    // Another manager applying a different value conflicts, unless forced.
    let e = cms
        .patch("ssa", &apply("bob"), &cfg(json!({"a": "9"})))
        .await
        .unwrap_err();
    match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert!(
                s.message.contains("conflict with \"alice\"") && s.message.contains(".data.a"),
                "{}",
                s.message
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Same value: shared ownership, no conflict.
    cms.patch("ssa", &apply("bob"), &cfg(json!({"b": "2"})))
        .await
        .expect("shared field");
    let c = cms
        .patch(
            "ssa",
            &apply("bob").force(),
            &cfg(json!({"a": "9", "b": "2"})),
        )
        .await
        .expect("forced");
    assert_eq!(
        c.data.as_ref().and_then(|d| d.get("a")).map(String::as_str),
        Some("9")
    );

    // alice stops applying everything: `a` now belongs to bob and `b` is shared, so both stay.
    let c = cms
        .patch("ssa", &apply("alice"), &cfg(json!({"c": "3"})))
        .await
        .expect("alice reapplies");
    let data = c.data.clone().unwrap_or_default();
    assert_eq!(
        (data.get("a"), data.get("b"), data.get("c")),
        (Some(&"9".into()), Some(&"2".into()), Some(&"3".into()))
    );
    // bob stops applying `b`: nobody owns it any more, so it is removed.
    let c = cms
        .patch("ssa", &apply("bob"), &cfg(json!({"a": "9"})))
        .await
        .expect("bob reapplies");
    let data = c.data.unwrap_or_default();
    assert!(
        !data.contains_key("b") && data.contains_key("a") && data.contains_key("c"),
        "{data:?}"
    );
    // Ownership from ordinary writes (operation Update) conflicts too.
    let mut cur = cms.get("ssa").await.expect("get");
    cur.data
        .get_or_insert_default()
        .insert("c".into(), "changed".into());
    let pp = PostParams {
        field_manager: Some("ctrl".into()),
        ..Default::default()
    };
    let cur = cms.replace("ssa", &pp, &cur).await.expect("update by ctrl");
    assert!(managers(&cur.metadata).contains(&("ctrl".to_string(), "Update".to_string())));
    let e = cms
        .patch("ssa", &apply("alice"), &cfg(json!({"c": "3"})))
        .await
        .unwrap_err();
    assert_eq!(err_code(e).0, 409);
    // A field manager is required.
    let e = cms
        .patch("ssa", &PatchParams::default(), &cfg(json!({})))
        .await
        .unwrap_err();
    assert_eq!(err_code(e).0, 422);
}

#[tokio::test]
async fn server_side_apply_of_a_container_subset_is_no_conflict() {
    let (_sim, client) = start().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    // alice creates the Deployment (an Update) with an env var in the container.
    let pp = PostParams {
        field_manager: Some("alice".into()),
        ..PostParams::default()
    };
    deploys
        .create(&pp, &deployment("shared"))
        .await
        .expect("create");
    // bob applies the same container without env: the container item is shared, and only
    // its leaves are compared, so this is not a conflict and alice's env stays.
    let cfg = |image: &str| {
        Patch::Apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shared"},
            "spec": {"selector": {"matchLabels": {"app": "shared"}},
                     "template": {"metadata": {"labels": {"app": "shared"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}},
        }))
    };
    let d = deploys
        .patch("shared", &PatchParams::apply("bob"), &cfg("img:1"))
        .await
        .expect("subset apply is no conflict");
    let c = &d
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec")
        .containers[0];
    assert_eq!(c.env.as_ref().map(Vec::len), Some(1), "alice's env kept");
    // A different value for a leaf alice owns is still a conflict.
    let e = deploys
        .patch("shared", &PatchParams::apply("bob"), &cfg("img:2"))
        .await
        .unwrap_err();
    match e {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(s.message.contains(".image"), "{}", s.message);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[tokio::test]
async fn server_side_apply_merges_lists_by_key() {
    let (_sim, client) = start().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let cfg = |containers: serde_json::Value| {
        Patch::Apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}}},
        }))
    };
    deploys
        .patch(
            "web",
            &PatchParams::apply("app"),
            &cfg(json!([{"name": "app", "image": "app:1"}])),
        )
        .await
        .expect("app");
    let sidecar = Patch::Apply(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "proxy:1"}]}}},
    }));
    let d = deploys
        .patch("web", &PatchParams::apply("injector"), &sidecar)
        .await
        .expect("sidecar");
    let names = |d: &Deployment| -> Vec<String> {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|p| p.containers.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(names(&d), ["app", "proxy"]);
    // The app manager's container change keeps the injected sidecar.
    let d = deploys
        .patch(
            "web",
            &PatchParams::apply("app"),
            &cfg(json!([{"name": "app", "image": "app:2"}])),
        )
        .await
        .expect("app v2");
    assert_eq!(names(&d), ["app", "proxy"]);
    assert_eq!(d.metadata.generation, Some(3));
    // The injector stops applying its container: it is removed.
    let empty = Patch::Apply(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}),
    );
    let d = deploys
        .patch("web", &PatchParams::apply("injector"), &empty)
        .await
        .expect("injector withdraws");
    assert_eq!(names(&d), ["app"]);
}

#[tokio::test]
async fn server_side_apply_to_status() {
    let (_sim, client) = start().await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deploys
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    let status = |s: serde_json::Value| {
        Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "status": s}))
    };
    let pp = PatchParams::apply("ctrl");
    let d = deploys
        .patch_status(
            "web",
            &pp,
            &status(
                json!({"replicas": 2, "conditions": [{"type": "Available", "status": "True"}]}),
            ),
        )
        .await
        .expect("apply status");
    let st = d.status.clone().expect("status");
    assert_eq!(
        (st.replicas, st.conditions.map(|c| c.len())),
        (Some(2), Some(1))
    );
    let entry = d
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.manager.as_deref() == Some("ctrl"))
        .expect("ctrl entry");
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    // The condition is no longer applied: it is removed; spec is untouched.
    let d = deploys
        .patch_status("web", &pp, &status(json!({"replicas": 2})))
        .await
        .expect("re-apply");
    assert!(
        d.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(1));
    assert_eq!(d.metadata.generation, Some(1));
}

#[tokio::test]
async fn fields_a_manager_stops_applying_leave_no_empty_parent() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let pp = PatchParams::apply("tool").force();
    let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prune"},
                       "data": {"a": "1", "b": "2"}});
    cms.patch("prune", &pp, &Patch::Apply(&first))
        .await
        .expect("apply");
    let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prune"}});
    let cm = cms
        .patch("prune", &pp, &Patch::Apply(&second))
        .await
        .expect("apply");
    assert_eq!(
        cm.data, None,
        "data went with its last field, not left as {{}}"
    );
}

#[tokio::test]
async fn pod_disruption_budgets_and_network_policies_are_served() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let (_sim, client) = start().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("create pdb");
    let netpols: Api<NetworkPolicy> = Api::namespaced(client.clone(), "default");
    let np: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Egress"],
                 "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
                             "ports": [{"port": 6443, "protocol": "TCP"}]}]},
    }))
    .expect("netpol");
    netpols
        .create(&PostParams::default(), &np)
        .await
        .expect("create netpol");
    let got = netpols.get("web").await.expect("get netpol");
    assert_eq!(got.spec, np.spec);
    assert_eq!(
        pdbs.list(&Default::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );

    let discovery = Discovery::new(client).run().await.expect("discovery");
    let served = |group: &str, plural: &str| {
        discovery
            .groups()
            .filter(|g| g.name() == group)
            .flat_map(|g| g.recommended_resources())
            .any(|(ar, _)| ar.plural == plural)
    };
    assert!(served("policy", "poddisruptionbudgets"));
    assert!(served("networking.k8s.io", "networkpolicies"));
}
