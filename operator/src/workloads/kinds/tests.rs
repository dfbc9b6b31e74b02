use serde_json::{Value, json};

use super::*;
use crate::schema_values::listed;

/// `ALL` holds every variant the CRD accepts, in order, each once.
#[test]
fn all_is_every_variant() {
    let schema = serde_json::to_value(schemars::schema_for!(WorkloadKind)).expect("schema");
    let mut variants = Vec::new();
    listed(&schema, &mut variants);
    let all: Vec<String> = ALL
        .iter()
        .map(|k| serde_json::to_value(k).expect("name"))
        .map(|v| v.as_str().expect("string").to_owned())
        .collect();
    assert_eq!(all, variants);
    for (k, name) in ALL.iter().zip(&all) {
        assert_eq!(info(*k).kind, name, "the kind is spelled as the variant");
    }
}

/// The names as the API server and `kubectl` spell them (what the writes and the command
/// line used before the kinds had one place each).
#[test]
fn names() {
    let rows: Vec<(&str, &str, &str, &str, &[&str])> = ALL
        .map(info)
        .iter()
        .map(|i| (i.kind, i.api_version, i.group, i.plural, i.short_names))
        .collect();
    assert_eq!(
        rows,
        [
            (
                "Deployment",
                "apps/v1",
                "apps",
                "deployments",
                &["deploy"][..]
            ),
            (
                "StatefulSet",
                "apps/v1",
                "apps",
                "statefulsets",
                &["sts"][..]
            ),
            ("DaemonSet", "apps/v1", "apps", "daemonsets", &["ds"][..]),
            ("CronJob", "batch/v1", "batch", "cronjobs", &["cj"][..]),
        ]
    );
    assert_eq!(
        template_fields(WorkloadKind::CronJob),
        "/f:spec/f:jobTemplate/f:spec/f:template"
    );
    assert_eq!(
        template_fields(WorkloadKind::Deployment),
        "/f:spec/f:template"
    );
}

/// `TEMPLATE` (what patches and managedFields use) and `pod_template` (what the view reads)
/// name the same place.
struct SamePlace;

impl Visit for SamePlace {
    type Out = ();
    fn visit<K: Kind>(self) {
        let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [
            {"name": "app", "env": [{"name": "NO_PROXY", "value": ".svc"}]}]}});
        let mut body = at_template(K::VARIANT, template.clone());
        body["metadata"] = json!({"name": "a", "namespace": "n"});
        let mut o: K = serde_json::from_value(body).expect("object");
        let read = serde_json::to_value(o.pod_template()).expect("template");
        assert_eq!(read, template, "{:?}", K::VARIANT);
        assert!(o.rollout().is_some(), "{:?}", K::VARIANT);
        let t = o.pod_template_mut().expect("template");
        t.metadata = None;
        let back = serde_json::to_value(&o).expect("object");
        let pointer: String = K::TEMPLATE.iter().map(|k| format!("/{k}")).collect();
        assert_eq!(
            back.pointer(&pointer),
            Some(&json!({"spec": template["spec"]}))
        );
        let mut empty: K = serde_json::from_value(json!({"metadata": {"name": "a"}})).expect("o");
        assert_eq!(empty.pod_template(), None);
        assert_eq!(empty.pod_template_mut(), None);
        assert_eq!(empty.rollout(), None);
    }
}

#[test]
fn the_template_path_is_where_the_template_is() {
    for k in ALL {
        visit(k, SamePlace);
    }
}

/// The YAML documents of a generated manifest.
fn documents(yaml: &str) -> Vec<Value> {
    yaml.split("\n---\n")
        .map(|d| serde_yaml_ng::from_str::<Value>(d).expect("YAML"))
        .filter(|d| d.is_object())
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The verbs the ClusterRole `role` grants on the kind's resource.
fn granted(docs: &[Value], role: &str, i: &Info) -> Vec<String> {
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == role)
        .unwrap_or_else(|| panic!("ClusterRole {role}"));
    let rules = role["rules"].as_array().into_iter().flatten();
    rules
        .filter(|r| strings(&r["apiGroups"]).contains(&i.group))
        .filter(|r| strings(&r["resources"]).contains(&i.plural))
        .flat_map(|r| strings(&r["verbs"]))
        .map(str::to_owned)
        .collect()
}

/// The chart (as generated into deploy/, which the chart test keeps equal to it) lets the
/// operator read every kind everywhere and patch it where a tenant binds it.
#[test]
fn the_chart_grants_every_kind() {
    let docs = documents(include_str!("../../../../deploy/rbac.yaml"));
    for i in ALL.map(info) {
        let read = granted(&docs, "egress-proxy-operator", &i);
        for verb in ["get", "list", "watch"] {
            assert!(
                read.iter().any(|v| v == verb),
                "{} {verb}: {read:?}",
                i.plural
            );
        }
        let write = granted(&docs, "egress-proxy-operator-tenant", &i);
        assert!(write.iter().any(|v| v == "patch"), "{} patch", i.plural);
    }
}

/// The admission policy sees the operator's updates of every kind, and one of its rules
/// reads the kind's pod template.
#[test]
fn the_admission_policy_covers_every_kind() {
    let docs = documents(include_str!("../../../../deploy/admission.yaml"));
    let policy = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("policy");
    let rules = policy["spec"]["matchConstraints"]["resourceRules"]
        .as_array()
        .expect("rules");
    let validations = policy["spec"]["validations"]
        .as_array()
        .expect("validations");
    for i in ALL.map(info) {
        let any = |v: &Value, want: &str| strings(v).iter().any(|s| *s == want || *s == "*");
        let matched = rules.iter().any(|r| {
            any(&r["apiGroups"], i.group)
                && any(&r["apiVersions"], i.version)
                && any(&r["resources"], i.plural)
                && any(&r["operations"], "UPDATE")
        });
        assert!(matched, "no resourceRule matches UPDATE of {}", i.plural);
        let guards = [
            format!("request.resource.group != '{}'", i.group),
            format!("request.resource.resource != '{}'", i.plural),
        ];
        let template = format!("object.{}", i.template.join("."));
        let checked = validations.iter().any(|v| {
            let e = v["expression"].as_str().unwrap_or_default();
            e.contains(&template) && guards.iter().any(|g| e.contains(g))
        });
        assert!(checked, "no validation reads {template} of {}", i.plural);
    }
}

/// A policy may list every kind: the CRD's `workloadKinds` holds as many as `ALL` (its
/// `maxItems` is written in `api/spec.rs`, which cannot import this module).
#[test]
fn a_policy_may_list_every_kind() {
    let crd = crate::api::crd_yaml().expect("crd");
    let crd: Value = serde_yaml_ng::from_str(&crd).expect("YAML");
    let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";
    let max = crd.pointer(&format!("{spec}/workloadKinds/maxItems"));
    assert_eq!(max, Some(&json!(ALL.len())));
}
