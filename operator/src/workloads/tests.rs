use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use serde_json::{Value, json};

use super::*;

const S: &str = "egress-proxy-corp";
const HASH: &str = "v2-00112233445566778899aabbccddeeff";
const CREDENTIAL: &str = "egress-proxy-corp/main";
const PW: &str = "Sentinel9Pw";

/// The module's `plan`, for templates that always encode.
fn plan(id: &WorkloadId, t: &PodTemplateSpec, inj: &Injection) -> TemplatePlan {
    super::plan(id, t, inj).expect("encodes")
}

fn cleanup_patch(t: &PodTemplateSpec, m: &str, o: &[Original]) -> Option<Value> {
    super::cleanup_patch(crate::api::WorkloadKind::Deployment, t, m, o).expect("encodes")
}

fn id() -> WorkloadId {
    WorkloadId {
        kind: WorkloadKind::Deployment,
        namespace: "team-a".into(),
        name: "api".into(),
    }
}

fn inj<'a>(containers: &'a [String], hash: &'a str) -> Injection<'a> {
    Injection {
        containers,
        init_containers: InitContainers::Include,
        existing_env: ExistingEnv::Keep,
        managed: S,
        slot: "main",
        hash,
        originals: &[],
        java_options: None,
        trust: None,
    }
}

fn template(v: Value) -> PodTemplateSpec {
    serde_json::from_value(v).unwrap()
}

/// A template with containers `app` (env LOG=1) and `sidecar`, init container `migrate`.
fn basic() -> PodTemplateSpec {
    template(json!({
        "metadata": {"labels": {"app": "api"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "LOG", "value": "1"}]},
                {"name": "sidecar", "image": "side:1"},
            ],
            "initContainers": [{"name": "migrate", "image": "app:1"}],
        },
    }))
}

fn secret_entry(name: &str, key: &str) -> Value {
    json!({"name": name, "valueFrom": {"secretKeyRef": {"name": S, "key": key}}})
}

fn ours_json() -> Vec<Value> {
    vec![
        secret_entry("HTTP_PROXY", "slot.main.HTTP_PROXY"),
        secret_entry("http_proxy", "slot.main.HTTP_PROXY"),
        secret_entry("HTTPS_PROXY", "slot.main.HTTPS_PROXY"),
        secret_entry("https_proxy", "slot.main.HTTPS_PROXY"),
        json!({"name": "NO_PROXY", "valueFrom": {"configMapKeyRef": {"name": S, "key": "NO_PROXY"}}}),
        json!({"name": "no_proxy", "valueFrom": {"configMapKeyRef": {"name": S, "key": "NO_PROXY"}}}),
    ]
}

/// Applies a strategic merge patch (or the template part of an apply body) the way the API
/// server does for the fields involved: objects merge, null deletes, `containers`,
/// `initContainers`, `env` and `volumes` merge by `name`, `volumeMounts` by `mountPath`,
/// `$patch: delete` removes an item.
fn merge(target: &mut Value, patch: &Value) {
    let (Value::Object(t), Value::Object(p)) = (&mut *target, patch) else {
        *target = strip_nulls(patch);
        return;
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else if matches!(
            k.as_str(),
            "containers" | "initContainers" | "env" | "volumes" | "volumeMounts"
        ) {
            let key = if k == "volumeMounts" {
                "mountPath"
            } else {
                "name"
            };
            let list = t.entry(k.clone()).or_insert_with(|| json!([]));
            let items = list.as_array_mut().unwrap();
            for item in v.as_array().unwrap() {
                let pos = items.iter().position(|i| i[key] == item[key]);
                match (pos, item.get("$patch")) {
                    (Some(i), Some(_)) => {
                        items.remove(i);
                    }
                    (None, Some(_)) => {}
                    (Some(i), None) => merge(&mut items[i], item),
                    (None, None) => items.push(strip_nulls(item)),
                }
            }
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The template after a write.
fn after(t: &PodTemplateSpec, write: &Write) -> PodTemplateSpec {
    let mut v = serde_json::to_value(t).unwrap();
    match write {
        Write::None => {}
        Write::Apply(body) => merge(&mut v, &body["spec"]["template"]),
        Write::Patch(p) => merge(&mut v, &p["spec"]["template"]),
    }
    template(v)
}

fn env_of(t: &PodTemplateSpec, container: &str) -> Vec<EnvVar> {
    containers(t)
        .find(|(_, c)| c.name == container)
        .and_then(|(_, c)| c.env.clone())
        .unwrap_or_default()
}

#[test]
fn apply_body_holds_only_our_fields() {
    let p = plan(&id(), &basic(), &inj(&[], HASH));
    assert!(p.conflicts.is_empty() && p.overridden.is_empty());
    let Write::Apply(body) = &p.write else {
        panic!("{:?}", p.write)
    };
    let expected = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "team-a"},
        "spec": {"template": {
            "metadata": {"annotations": {CONFIG_HASH: HASH, CREDENTIAL_SLOT: CREDENTIAL}},
            "spec": {
                "containers": [
                    {"name": "app", "env": ours_json()},
                    {"name": "sidecar", "env": ours_json()},
                ],
                "initContainers": [{"name": "migrate", "env": ours_json()}],
            },
        }},
    });
    assert_eq!(body, &expected);
    // Deterministic, down to the serialized bytes.
    let Write::Apply(again) = plan(&id(), &basic(), &inj(&[], HASH)).write else {
        panic!()
    };
    assert_eq!(again.to_string(), body.to_string());
}

#[test]
fn applied_template_needs_no_write() {
    let t = basic();
    let p = plan(&id(), &t, &inj(&[], HASH));
    let t2 = after(&t, &p.write);
    assert_eq!(env_of(&t2, "app")[0].name, "LOG", "other entries stay");
    assert!(has_entries(&t2, S) && current_hash(&t2).is_some());
    assert_eq!(current_hash(&t2), Some(HASH));
    assert_eq!(plan(&id(), &t2, &inj(&[], HASH)).write, Write::None);

    // A new hash: the same entries, the new annotation.
    let p = plan(&id(), &t2, &inj(&[], "v2-new"));
    let Write::Apply(body) = &p.write else {
        panic!("{:?}", p.write)
    };
    assert_eq!(
        body["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH],
        "v2-new"
    );
    assert_eq!(
        body["spec"]["template"]["spec"]["containers"][0]["env"],
        json!(ours_json())
    );

    // An entry of ours with a wrong key is rewritten.
    let mut v = serde_json::to_value(&t2).unwrap();
    v["spec"]["containers"][0]["env"][1]["valueFrom"]["secretKeyRef"]["key"] =
        json!("slot.main.HTTPS_PROXY");
    let broken = template(v);
    assert!(matches!(
        plan(&id(), &broken, &inj(&[], HASH)).write,
        Write::Apply(_)
    ));
    // A missing annotation alone is written.
    let mut v = serde_json::to_value(&t2).unwrap();
    v["metadata"]["annotations"] = json!({});
    assert!(matches!(
        plan(&id(), &template(v), &inj(&[], HASH)).write,
        Write::Apply(_)
    ));
}

#[test]
fn container_filter_and_init_exclude() {
    let names = vec!["app".to_owned(), "migrate".to_owned()];
    let p = plan(&id(), &basic(), &inj(&names, HASH));
    let Write::Apply(body) = &p.write else {
        panic!()
    };
    let spec = &body["spec"]["template"]["spec"];
    assert_eq!(spec["containers"].as_array().unwrap().len(), 1);
    assert_eq!(spec["containers"][0]["name"], "app");
    assert_eq!(
        spec["initContainers"][0]["name"], "migrate",
        "named: included"
    );

    let mut i = inj(&[], HASH);
    i.init_containers = InitContainers::Exclude;
    let p = plan(&id(), &basic(), &i);
    let Write::Apply(body) = &p.write else {
        panic!()
    };
    let spec = &body["spec"]["template"]["spec"];
    assert_eq!(spec["containers"].as_array().unwrap().len(), 2);
    assert!(spec.get("initContainers").is_none());
    let t = after(&basic(), &p.write);
    assert!(env_of(&t, "migrate").is_empty());
    assert_eq!(plan(&id(), &t, &i).write, Write::None);

    // Unknown names select nothing; the annotation is still written.
    let none = vec!["nope".to_owned()];
    let Write::Apply(body) = plan(&id(), &basic(), &inj(&none, HASH)).write else {
        panic!()
    };
    assert_eq!(body["spec"]["template"]["spec"], json!({}));
}

#[test]
fn deselected_container_loses_our_entries_by_patch() {
    let t = after(&basic(), &plan(&id(), &basic(), &inj(&[], HASH)).write);
    let names = vec!["app".to_owned()];
    let p = plan(&id(), &t, &inj(&names, HASH));
    let Write::Patch(patch) = &p.write else {
        panic!("{:?}", p.write)
    };
    let spec = &patch["spec"]["template"]["spec"];
    let deletes: Vec<Value> = PROXY_VARS
        .iter()
        .map(|v| json!({"name": v, "$patch": "delete"}))
        .collect();
    assert_eq!(
        spec["containers"][1],
        json!({"name": "sidecar", "env": deletes})
    );
    assert_eq!(spec["initContainers"][0]["env"], json!(deletes));
    let t2 = after(&t, &p.write);
    assert!(env_of(&t2, "sidecar").is_empty());
    assert_eq!(env_of(&t2, "app").len(), 7);
    assert_eq!(plan(&id(), &t2, &inj(&names, HASH)).write, Write::None);
}

fn with_own(own: Value) -> PodTemplateSpec {
    template(json!({
        "spec": {"containers": [
            {"name": "app", "env": own},
            {"name": "sidecar"},
        ]},
    }))
}

#[test]
fn keep_reports_conflicts_per_pair() {
    let t = with_own(json!([
        {"name": "http_proxy", "value": format!("http://u:{PW}@old:3128")},
        {"name": "NO_PROXY", "value": "a"},
        {"name": "no_proxy", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "NO_PROXY"}}},
    ]));
    let p = plan(&id(), &t, &inj(&[], HASH));
    assert_eq!(
        p.conflicts,
        vec![
            EnvConflict {
                container: "app".into(),
                variable: "http_proxy".into()
            },
            EnvConflict {
                container: "app".into(),
                variable: "NO_PROXY".into()
            },
            EnvConflict {
                container: "app".into(),
                variable: "no_proxy".into()
            },
        ]
    );
    assert_eq!(
        p.conflicts[0].to_string(),
        "container app sets http_proxy itself"
    );
    assert!(p.overridden.is_empty());
    let Write::Apply(body) = &p.write else {
        panic!()
    };
    let c = &body["spec"]["template"]["spec"]["containers"];
    assert_eq!(c[0]["env"], json!(ours_json()[2..4]), "only the HTTPS pair");
    assert_eq!(
        c[1]["env"],
        json!(ours_json()),
        "other container unaffected"
    );
    let t2 = after(&t, &p.write);
    assert_eq!(
        env_of(&t2, "app")[0].value.as_deref(),
        Some(&*format!("http://u:{PW}@old:3128"))
    );
    let again = plan(&id(), &t2, &inj(&[], HASH));
    assert_eq!(again.write, Write::None);
    assert_eq!(again.conflicts.len(), 3, "still reported");
}

#[test]
fn override_patches_once_and_cleanup_restores() {
    let own = json!([
        {"name": "LOG", "value": "1"},
        {"name": "HTTP_PROXY", "value": format!("http://u:{PW}@old:3128")},
        {"name": "no_proxy", "valueFrom": {"configMapKeyRef": {"name": "mine", "key": "np", "optional": true}}},
    ]);
    let t = with_own(own.clone());
    let mut i = inj(&[], HASH);
    i.existing_env = ExistingEnv::Override;
    let p = plan(&id(), &t, &i);
    assert!(p.conflicts.is_empty());
    assert_eq!(p.overridden.len(), 2);
    assert_eq!(p.overridden[0].container, "app");
    assert_eq!(p.overridden[0].env.name, "HTTP_PROXY");
    assert_eq!(p.overridden[1].env.name, "no_proxy");
    let shown = format!("{p:?}");
    assert!(!shown.contains(PW), "{shown}");
    assert!(shown.contains("old:3128"));

    let Write::Patch(patch) = &p.write else {
        panic!("{:?}", p.write)
    };
    let app = &patch["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(app["name"], "app");
    assert_eq!(
        app["env"][0],
        json!({"name": "HTTP_PROXY", "value": null,
               "valueFrom": {"secretKeyRef": {"name": S, "key": "slot.main.HTTP_PROXY"}}})
    );
    assert_eq!(
        app["env"][5],
        json!({"name": "no_proxy", "value": null,
               "valueFrom": {"configMapKeyRef": {"name": S, "key": "NO_PROXY", "optional": null}}})
    );
    assert_eq!(
        patch["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH],
        HASH
    );
    assert!(!patch.to_string().contains(PW));

    let t2 = after(&t, &p.write);
    let env = env_of(&t2, "app");
    assert_eq!(env.len(), 7);
    for e in env.iter().filter(|e| e.name != "LOG") {
        assert!(is_ours(e, S) && e.value.is_none(), "{e:?}");
    }
    let again = plan(&id(), &t2, &i);
    assert_eq!(again.write, Write::None);
    assert!(again.overridden.is_empty());

    // Cleanup puts the own entries back and deletes the rest.
    let patch = cleanup_patch(&t2, S, &p.overridden).unwrap();
    let t3 = after(&t2, &Write::Patch(patch.clone()));
    assert_eq!(
        env_of(&t3, "app"),
        serde_json::from_value::<Vec<EnvVar>>(own).unwrap()
    );
    assert!(env_of(&t3, "sidecar").is_empty());
    assert_eq!(current_hash(&t3), None);
    assert!(!has_entries(&t3, S) && current_hash(&t3).is_none());
    assert_eq!(cleanup_patch(&t3, S, &p.overridden), None);
}

#[test]
fn override_of_a_value_from_ref_nulls_the_other_source() {
    let t = with_own(json!([
        {"name": "https_proxy", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]));
    let mut i = inj(&[], HASH);
    i.existing_env = ExistingEnv::Override;
    let Write::Patch(patch) = plan(&id(), &t, &i).write else {
        panic!()
    };
    assert_eq!(
        patch["spec"]["template"]["spec"]["containers"][0]["env"][3]["valueFrom"],
        json!({"secretKeyRef": {"name": S, "key": "slot.main.HTTPS_PROXY"}, "fieldRef": null})
    );
}

#[test]
fn cleanup_patch_exact() {
    let t = after(&basic(), &plan(&id(), &basic(), &inj(&[], HASH)).write);
    let originals = [Original {
        container: "migrate".into(),
        env: EnvVar {
            name: "NO_PROXY".into(),
            value: Some("localhost".into()),
            value_from: None,
        },
    }];
    let patch = cleanup_patch(&t, S, &originals).unwrap();
    let deletes = |skip: Option<&str>| -> Vec<Value> {
        PROXY_VARS
            .iter()
            .map(|v| match skip {
                Some(s) if s == *v => {
                    json!({"name": v, "value": "localhost", "valueFrom": null})
                }
                _ => json!({"name": v, "$patch": "delete"}),
            })
            .collect()
    };
    assert_eq!(
        patch,
        json!({"spec": {"template": {
            "metadata": {"annotations": {CONFIG_HASH: null, CREDENTIAL_SLOT: null}},
            "spec": {
                "containers": [
                    {"name": "app", "env": deletes(None)},
                    {"name": "sidecar", "env": deletes(None)},
                ],
                "initContainers": [{"name": "migrate", "env": deletes(Some("NO_PROXY"))}],
            },
        }}})
    );
    let t2 = after(&t, &Write::Patch(patch));
    assert_eq!(env_of(&t2, "app").len(), 1);
    assert_eq!(
        env_of(&t2, "migrate")[0].value.as_deref(),
        Some("localhost")
    );

    assert_eq!(cleanup_patch(&basic(), S, &[]), None);
    // The annotation alone is removed too; foreign entries are left alone.
    let t = template(json!({
        "metadata": {"annotations": {CONFIG_HASH: HASH}},
        "spec": {"containers": [{"name": "app", "env": [
            {"name": "HTTP_PROXY", "valueFrom": {"secretKeyRef": {"name": "other", "key": "HTTP_PROXY"}}},
        ]}]},
    }));
    assert_eq!(
        cleanup_patch(&t, S, &[]),
        Some(
            json!({"spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: null, CREDENTIAL_SLOT: null}}}}})
        )
    );
}

#[test]
fn ownership() {
    let e = |v: Value| serde_json::from_value::<EnvVar>(v).unwrap();
    assert!(is_ours(&e(secret_entry("http_proxy", "HTTP_PROXY")), S));
    assert!(!is_ours(
        &e(secret_entry("http_proxy", "HTTP_PROXY")),
        "other"
    ));
    assert!(!is_ours(&e(secret_entry("FOO", "HTTP_PROXY")), S));
    assert!(
        !is_ours(&e(secret_entry("NO_PROXY", "NO_PROXY")), S),
        "NO_PROXY is in the ConfigMap"
    );
    let from_cm = |cm: &str| {
        e(
            json!({"name": "no_proxy", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "NO_PROXY"}}}),
        )
    };
    assert!(is_ours(&from_cm(S), S));
    assert!(!is_ours(&from_cm("other"), S));
    assert!(!is_ours(
        &e(json!({"name": "HTTP_PROXY", "value": "http://p:1"})),
        S
    ));
    assert!(!has_entries(&basic(), S) && current_hash(&basic()).is_none());
}

#[test]
fn display() {
    assert_eq!(id().to_string(), "Deployment/api");
    let ss = WorkloadId {
        kind: WorkloadKind::StatefulSet,
        ..id()
    };
    assert_eq!(ss.to_string(), "StatefulSet/api");
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[test]
fn original_keys() {
    let k = original_key(&id(), "app", "HTTP_PROXY");
    assert_eq!(k, "original.Deployment.team-a.api.app.HTTP_PROXY");
    let mut keys = std::collections::BTreeSet::new();
    let long = WorkloadId {
        name: "n".repeat(253),
        ..id()
    };
    let dotted = WorkloadId {
        name: "a.b".into(),
        ..id()
    };
    let ds = WorkloadId {
        kind: WorkloadKind::DaemonSet,
        ..id()
    };
    for w in [id(), long.clone(), dotted, ds] {
        for c in ["app", "b.app", "x".repeat(63).as_str()] {
            for v in PROXY_VARS {
                let k = original_key(&w, c, v);
                assert!(valid_key(&k), "{k}");
                assert!(k.starts_with("original."));
                assert!(keys.insert(k), "unique");
            }
        }
    }
    assert_eq!(
        original_key(&long, "app", "no_proxy"),
        original_key(&long, "app", "no_proxy")
    );
    assert_eq!(
        original_key(&long, "app", "no_proxy").len(),
        "original.".len() + 40
    );
    // `a.b` + `c` and `a` + `b.c` never share a key.
    let a = original_key(
        &WorkloadId {
            name: "a.b".into(),
            ..id()
        },
        "c",
        "NO_PROXY",
    );
    let b = original_key(
        &WorkloadId {
            name: "a".into(),
            ..id()
        },
        "b.c",
        "NO_PROXY",
    );
    assert_ne!(a, b);
}

#[test]
fn originals_round_trip_through_secret_data() {
    let t = with_own(json!([{"name": "HTTP_PROXY", "value": "http://old:1"}]));
    let mut i = inj(&[], HASH);
    i.existing_env = ExistingEnv::Override;
    let p = plan(&id(), &t, &i);
    let mut data: BTreeMap<String, ByteString> = p
        .overridden
        .iter()
        .map(|o| {
            let key = original_key(&id(), &o.container, &o.env.name);
            (key, ByteString(serde_json::to_vec(o).unwrap()))
        })
        .collect();
    data.insert("HTTP_PROXY".into(), ByteString(b"x".to_vec()));
    let found = originals_of(&id(), &t, &data);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "original.Deployment.team-a.api.app.HTTP_PROXY");
    assert_eq!(found[0].1, p.overridden[0]);
    let other = WorkloadId {
        name: "web".into(),
        ..id()
    };
    assert!(originals_of(&other, &t, &data).is_empty());
}

#[test]
fn a_container_leaving_the_selection_gets_its_overridden_original_back() {
    // `app` had its own HTTP_PROXY; Override replaced it and remembered the original.
    let t = with_own(json!([{"name": "HTTP_PROXY", "value": "http://own:8080"}]));
    let mut i = inj(&[], HASH);
    i.existing_env = ExistingEnv::Override;
    let p = plan(&id(), &t, &i);
    let originals = p.overridden.clone();
    let t = after(&t, &p.write);
    // Now only `sidecar` is selected: `app` must get its own value back, not lose it.
    let names = vec!["sidecar".to_owned()];
    let mut i = inj(&names, HASH);
    i.existing_env = ExistingEnv::Override;
    i.originals = &originals;
    let p = plan(&id(), &t, &i);
    let t2 = after(&t, &p.write);
    let app = env_of(&t2, "app");
    assert_eq!(app.len(), 1, "{app:?}");
    assert_eq!(app[0].name, "HTTP_PROXY");
    assert_eq!(app[0].value.as_deref(), Some("http://own:8080"));
    assert!(app[0].value_from.is_none());
    // Without the originals the entry is simply removed.
    i.originals = &[];
    let t3 = after(&t, &plan(&id(), &t, &i).write);
    assert!(env_of(&t3, "app").is_empty());
}

#[test]
fn the_slot_a_template_reads_comes_from_its_secret_key() {
    let p = plan(&id(), &basic(), &inj(&[], HASH));
    let t = after(&basic(), &p.write);
    assert_eq!(slot_of(&t, S).as_deref(), Some("main"));
    let one = |key: &str| {
        template(json!({"spec": {"containers": [
            {"name": "app", "env": [secret_entry("HTTP_PROXY", key)]}]}}))
    };
    assert_eq!(
        slot_of(&one("HTTP_PROXY"), S).as_deref(),
        Some(""),
        "before slots"
    );
    assert_eq!(
        slot_of(&one("slot.a.b.HTTP_PROXY"), S).as_deref(),
        Some("a.b")
    );
    assert_eq!(slot_of(&one("something"), S), None);
    assert_eq!(slot_of(&basic(), S), None);
    assert_eq!(slot_of(&t, "another-policy"), None);
}

const JAVA: &str = "-Dhttp.proxyHost=p -Dhttp.proxyPort=3128 -Dhttp.nonProxyHosts=*.svc";

/// The `JAVA_TOOL_OPTIONS` value of container `app`.
fn java_value(t: &PodTemplateSpec) -> Option<String> {
    let c = t
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "app")?;
    let e = c.env.iter().flatten().find(|e| e.name == JAVA_OPTIONS)?;
    e.value.clone()
}

fn with_own_java(value: Value) -> PodTemplateSpec {
    let mut t = basic();
    let own: EnvVar = serde_json::from_value(value).unwrap();
    t.spec.as_mut().unwrap().containers[0]
        .env
        .as_mut()
        .unwrap()
        .push(own);
    t
}

#[test]
fn java_options_are_added_then_nothing_to_do() {
    let names = ["app".to_owned()];
    let mut i = inj(&names, HASH);
    i.java_options = Some(JAVA);
    let p = plan(&id(), &basic(), &i);
    assert!(matches!(p.write, Write::Apply(_)), "{:?}", p.write);
    let t = after(&basic(), &p.write);
    let ours = format!("-Degressproxy.managed={S} {JAVA}");
    assert_eq!(java_value(&t).as_deref(), Some(ours.as_str()));
    assert_eq!(plan(&id(), &t, &i).write, Write::None);
    // The cleanup takes the whole entry out: the container had none.
    let clean = after(&t, &Write::Patch(cleanup_patch(&t, S, &[]).unwrap()));
    assert_eq!(java_value(&clean), None);
}

#[test]
fn java_options_merge_into_the_containers_own_value_and_leave_it_on_cleanup() {
    let names = ["app".to_owned()];
    let mut i = inj(&names, HASH);
    i.java_options = Some(JAVA);
    let own = with_own_java(json!({"name": JAVA_OPTIONS, "value": "-Xmx1g -Dx=$(LOG)"}));
    let p = plan(&id(), &own, &i);
    assert!(matches!(p.write, Write::Patch(_)), "{:?}", p.write);
    assert!(p.conflicts.is_empty() && p.overridden.is_empty());
    let t = after(&own, &p.write);
    let merged = format!("-Xmx1g -Dx=$(LOG) -Degressproxy.managed={S} {JAVA}");
    assert_eq!(java_value(&t).as_deref(), Some(merged.as_str()));
    assert_eq!(plan(&id(), &t, &i).write, Write::None);
    // A new NO_PROXY replaces only our part.
    let newer = "-Dhttp.proxyHost=p -Dhttp.proxyPort=3128 -Dhttp.nonProxyHosts=*.svc|*.local";
    i.java_options = Some(newer);
    let t2 = after(&t, &plan(&id(), &t, &i).write);
    let merged2 = format!("-Xmx1g -Dx=$(LOG) -Degressproxy.managed={S} {newer}");
    assert_eq!(java_value(&t2).as_deref(), Some(merged2.as_str()));
    // Cleanup and a policy that is no longer `java` give the own value back.
    let clean = after(&t2, &Write::Patch(cleanup_patch(&t2, S, &[]).unwrap()));
    assert_eq!(java_value(&clean).as_deref(), Some("-Xmx1g -Dx=$(LOG)"));
    i.java_options = None;
    let back = after(&t2, &plan(&id(), &t2, &i).write);
    assert_eq!(java_value(&back).as_deref(), Some("-Xmx1g -Dx=$(LOG)"));
}

#[test]
fn java_options_from_a_secret_are_a_conflict() {
    let names = ["app".to_owned()];
    let mut i = inj(&names, HASH);
    i.java_options = Some(JAVA);
    let own = with_own_java(json!({"name": JAVA_OPTIONS,
        "valueFrom": {"secretKeyRef": {"name": "jvm", "key": "opts"}}}));
    let p = plan(&id(), &own, &i);
    assert_eq!(
        p.conflicts,
        [EnvConflict {
            container: "app".into(),
            variable: JAVA_OPTIONS.into()
        }]
    );
    let t = after(&own, &p.write);
    assert_eq!(java_value(&t), None, "the own entry is untouched");
    assert!(has_entries(&t, S), "the six variables are still injected");
}

#[test]
fn the_java_marker_is_a_whole_word() {
    let m = java_marker(S);
    assert_eq!(java_part(&format!("-Xmx1g {m} -Da=1"), S), Some(7));
    assert_eq!(java_part(&format!("{m}2 -Da=1"), S), None);
    assert_eq!(java_part(&format!("-X{m}"), S), None);
    assert_eq!(java_own(&format!("-Xmx1g  {m} -Da=1"), S), "-Xmx1g ");
    assert_eq!(java_own(&format!("{m} -Da=1"), S), "");
    assert_eq!(java_own("-Xmx1g", S), "-Xmx1g");
}

const BUNDLE: &str = "00112233aabbccdd";

fn trust_vars() -> Vec<String> {
    vec!["SSL_CERT_FILE".into(), "NODE_EXTRA_CA_CERTS".into()]
}

fn trust_files() -> Vec<String> {
    vec!["ca-bundle.crt".into()]
}

fn with_trust<'a>(i: Injection<'a>, vars: &'a [String], files: &'a [String]) -> Injection<'a> {
    Injection {
        trust: Some(TrustMount {
            vars,
            files,
            bundle: BUNDLE,
        }),
        ..i
    }
}

fn config_map_entry(name: &str) -> Value {
    json!({"name": name, "valueFrom": {"configMapKeyRef": {"name": S, "key": name}}})
}

fn ours_with_trust() -> Vec<Value> {
    let mut env = ours_json();
    env.extend([
        config_map_entry("SSL_CERT_FILE"),
        config_map_entry("NODE_EXTRA_CA_CERTS"),
    ]);
    env
}

fn mounts_of(t: &PodTemplateSpec, container: &str) -> Vec<Value> {
    let c = containers(t).find(|(_, c)| c.name == container).unwrap().1;
    let m = c.volume_mounts.clone().unwrap_or_default();
    m.iter().map(|m| serde_json::to_value(m).unwrap()).collect()
}

fn volumes_of(t: &PodTemplateSpec) -> Vec<Value> {
    let v = t.spec.as_ref().unwrap().volumes.clone().unwrap_or_default();
    v.iter().map(|v| serde_json::to_value(v).unwrap()).collect()
}

#[test]
fn trust_adds_the_volume_mounts_variables_and_annotation_then_nothing_to_do() {
    let (vars, files) = (trust_vars(), trust_files());
    let i = with_trust(inj(&[], HASH), &vars, &files);
    let p = plan(&id(), &basic(), &i);
    assert!(p.trust_conflicts.is_empty());
    let Write::Apply(body) = &p.write else {
        panic!("{:?}", p.write)
    };
    let mount = json!([{"name": VOLUME, "mountPath": TRUST_DIR, "readOnly": true}]);
    let expected = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "api", "namespace": "team-a"},
        "spec": {"template": {
            "metadata": {"annotations": {
                CONFIG_HASH: HASH, CREDENTIAL_SLOT: CREDENTIAL, TRUST_BUNDLE: BUNDLE}},
            "spec": {
                "containers": [
                    {"name": "app", "env": ours_with_trust(), "volumeMounts": mount},
                    {"name": "sidecar", "env": ours_with_trust(), "volumeMounts": mount},
                ],
                "initContainers": [
                    {"name": "migrate", "env": ours_with_trust(), "volumeMounts": mount}],
                "volumes": [{"name": VOLUME, "configMap": {"name": S,
                    "items": [{"key": "ca-bundle.crt", "path": "ca-bundle.crt"}]}}],
            },
        }},
    });
    assert_eq!(body, &expected);
    let t = after(&basic(), &p.write);
    assert_eq!(plan(&id(), &t, &i).write, Write::None);
    // The API server's defaults change nothing.
    let mut defaulted = serde_json::to_value(&t).unwrap();
    defaulted["spec"]["volumes"][0]["configMap"]["defaultMode"] = json!(420);
    assert_eq!(plan(&id(), &template(defaulted), &i).write, Write::None);
}

#[test]
fn a_bundle_with_other_files_is_applied_again() {
    let (vars, files) = (trust_vars(), trust_files());
    let t = after(
        &basic(),
        &plan(&id(), &basic(), &with_trust(inj(&[], HASH), &vars, &files)).write,
    );
    let java_files = vec!["ca-bundle.crt".to_owned(), "truststore.p12".to_owned()];
    let i = with_trust(inj(&[], HASH), &vars, &java_files);
    let p = plan(&id(), &t, &i);
    let Write::Apply(body) = &p.write else {
        panic!("{:?}", p.write)
    };
    let items = &body["spec"]["template"]["spec"]["volumes"][0]["configMap"]["items"];
    assert_eq!(items.as_array().map(Vec::len), Some(2));
    assert_eq!(plan(&id(), &after(&t, &p.write), &i).write, Write::None);
}

#[test]
fn trust_taken_out_removes_volume_mounts_variables_and_annotation() {
    let (vars, files) = (trust_vars(), trust_files());
    let t = after(
        &basic(),
        &plan(&id(), &basic(), &with_trust(inj(&[], HASH), &vars, &files)).write,
    );
    let p = plan(&id(), &t, &inj(&[], HASH));
    let Write::Patch(patch) = &p.write else {
        panic!("{:?}", p.write)
    };
    let tpl = &patch["spec"]["template"];
    assert_eq!(tpl["metadata"]["annotations"][TRUST_BUNDLE], Value::Null);
    assert!(tpl["metadata"]["annotations"].get(TRUST_BUNDLE).is_some());
    assert_eq!(
        tpl["spec"]["volumes"],
        json!([{"name": VOLUME, "$patch": "delete"}])
    );
    assert_eq!(
        tpl["spec"]["containers"][0]["volumeMounts"],
        json!([{"mountPath": TRUST_DIR, "$patch": "delete"}])
    );
    let t2 = after(&t, &p.write);
    assert!(volumes_of(&t2).is_empty());
    assert!(mounts_of(&t2, "app").is_empty());
    assert_eq!(
        env_of(&t2, "app").len(),
        1 + 6,
        "LOG and the proxy variables"
    );
    assert_eq!(trust_bundle(&t2), None);
    assert_eq!(plan(&id(), &t2, &inj(&[], HASH)).write, Write::None);
}

#[test]
fn the_workloads_own_volume_or_mount_is_a_conflict_never_replaced() {
    let (vars, files) = (trust_vars(), trust_files());
    let own_volume = template(json!({"spec": {
        "containers": [{"name": "app"}],
        "volumes": [{"name": VOLUME, "emptyDir": {}}],
    }}));
    for existing_env in [ExistingEnv::Keep, ExistingEnv::Override] {
        let mut i = with_trust(inj(&[], HASH), &vars, &files);
        i.existing_env = existing_env;
        let p = plan(&id(), &own_volume, &i);
        assert_eq!(p.trust_conflicts, [TrustConflict::Volume]);
        let t = after(&own_volume, &p.write);
        assert_eq!(volumes_of(&t), [json!({"name": VOLUME, "emptyDir": {}})]);
        assert!(mounts_of(&t, "app").is_empty());
        assert_eq!(env_of(&t, "app").len(), 6, "the proxy variables only");
    }
    let own_mount = template(json!({"spec": {
        "containers": [
            {"name": "app", "volumeMounts": [{"name": "certs", "mountPath": "/etc/egress-proxy/trust/"}]},
            {"name": "sidecar"},
        ],
        "volumes": [{"name": "certs", "secret": {"secretName": "certs"}}],
    }}));
    let i = with_trust(inj(&[], HASH), &vars, &files);
    let p = plan(&id(), &own_mount, &i);
    assert_eq!(
        p.trust_conflicts,
        [TrustConflict::Mount {
            container: "app".into()
        }]
    );
    let t = after(&own_mount, &p.write);
    assert_eq!(mounts_of(&t, "app").len(), 1, "its own mount stays");
    assert_eq!(mounts_of(&t, "app")[0]["name"], json!("certs"));
    assert_eq!(
        env_of(&t, "app").len(),
        6,
        "no trust variables where the files are not"
    );
    assert_eq!(env_of(&t, "sidecar").len(), 8);
    assert_eq!(volumes_of(&t).len(), 2);
    assert_eq!(
        p.trust_conflicts[0].to_string(),
        "container app mounts another volume at /etc/egress-proxy/trust"
    );
}

#[test]
fn an_own_trust_variable_is_kept_or_overridden_and_restored() {
    let (vars, files) = (trust_vars(), trust_files());
    let t = with_own(json!([{"name": "SSL_CERT_FILE", "value": "/etc/ssl/mine.pem"}]));
    let p = plan(&id(), &t, &with_trust(inj(&[], HASH), &vars, &files));
    assert_eq!(
        p.conflicts,
        [EnvConflict {
            container: "app".into(),
            variable: "SSL_CERT_FILE".into()
        }]
    );
    let kept = after(&t, &p.write);
    let value = |t: &PodTemplateSpec, n: &str| env_of(t, "app").into_iter().find(|e| e.name == n);
    assert_eq!(
        value(&kept, "SSL_CERT_FILE").and_then(|e| e.value),
        Some("/etc/ssl/mine.pem".into())
    );
    assert!(value(&kept, "NODE_EXTRA_CA_CERTS").is_some());

    let mut i = with_trust(inj(&[], HASH), &vars, &files);
    i.existing_env = ExistingEnv::Override;
    let p = plan(&id(), &t, &i);
    assert_eq!(p.overridden.len(), 1);
    assert_eq!(p.overridden[0].env.name, "SSL_CERT_FILE");
    let replaced = after(&t, &p.write);
    assert_eq!(
        value(&replaced, "SSL_CERT_FILE").and_then(|e| e.value_from),
        Some(
            serde_json::from_value(json!({"configMapKeyRef": {"name": S, "key": "SSL_CERT_FILE"}}))
                .unwrap()
        )
    );
    let patch = cleanup_patch(&replaced, S, &p.overridden).unwrap();
    let restored = after(&replaced, &Write::Patch(patch));
    assert_eq!(
        value(&restored, "SSL_CERT_FILE").and_then(|e| e.value),
        Some("/etc/ssl/mine.pem".into())
    );
    assert!(value(&restored, "NODE_EXTRA_CA_CERTS").is_none());
    assert!(volumes_of(&restored).is_empty());
    assert!(mounts_of(&restored, "app").is_empty());
    assert_eq!(trust_bundle(&restored), None);
}

#[test]
fn the_cleanup_takes_out_the_trust_volume_mounts_and_annotation() {
    let (vars, files) = (trust_vars(), trust_files());
    let t = after(
        &basic(),
        &plan(&id(), &basic(), &with_trust(inj(&[], HASH), &vars, &files)).write,
    );
    let patch = cleanup_patch(&t, S, &[]).unwrap();
    let tpl = &patch["spec"]["template"];
    assert_eq!(
        tpl["metadata"]["annotations"],
        json!({CONFIG_HASH: null, CREDENTIAL_SLOT: null, TRUST_BUNDLE: null})
    );
    assert_eq!(
        tpl["spec"]["volumes"],
        json!([{"name": VOLUME, "$patch": "delete"}])
    );
    let t2 = after(&t, &Write::Patch(patch));
    assert_eq!(serde_json::to_value(&t2).unwrap(), {
        let mut b = serde_json::to_value(basic()).unwrap();
        b["spec"]["volumes"] = json!([]);
        b["spec"]["containers"][1]["env"] = json!([]);
        b["spec"]["containers"][1]["volumeMounts"] = json!([]);
        b["spec"]["containers"][0]["volumeMounts"] = json!([]);
        b["spec"]["initContainers"][0]["env"] = json!([]);
        b["spec"]["initContainers"][0]["volumeMounts"] = json!([]);
        b["metadata"]["annotations"] = json!({});
        b
    });
    // Another policy's volume of the same name is not ours to remove.
    assert_eq!(
        cleanup_patch(&t, "egress-proxy-other", &[])
            .map(|p| p["spec"]["template"]["spec"].get("volumes").is_some()),
        Some(false)
    );
}

#[test]
fn a_workloads_own_volume_of_our_name_at_our_path_is_never_taken_out() {
    let own = template(json!({"spec": {
        "containers": [{"name": "app", "volumeMounts": [
            {"name": VOLUME, "mountPath": TRUST_DIR, "readOnly": true}]}],
        "volumes": [{"name": VOLUME, "hostPath": {"path": "/etc/pki"}}],
    }}));
    let (vars, files) = (trust_vars(), trust_files());
    for i in [inj(&[], HASH), with_trust(inj(&[], HASH), &vars, &files)] {
        let p = plan(&id(), &own, &i);
        assert!(matches!(p.write, Write::Apply(_)), "{:?}", p.write);
        let t = after(&own, &p.write);
        assert_eq!(mounts_of(&t, "app").len(), 1, "its mount stays");
        assert_eq!(volumes_of(&t)[0]["hostPath"], json!({"path": "/etc/pki"}));
        let patch = cleanup_patch(&t, S, &[]).unwrap();
        let tpl = &patch["spec"]["template"]["spec"];
        assert!(tpl.get("volumes").is_none(), "{patch}");
        assert!(
            tpl["containers"][0].get("volumeMounts").is_none(),
            "{patch}"
        );
    }
}

#[test]
fn owned_vars_are_the_proxy_variables_java_options_and_the_trust_variables() {
    let want: Vec<&str> = PROXY_VARS
        .iter()
        .chain([&JAVA_OPTIONS])
        .chain(TRUST_VARS.iter())
        .copied()
        .collect();
    assert_eq!(OWNED_VARS.to_vec(), want);
    assert!(OWNED_VARS.iter().all(|v| !v.is_empty()));
}
