//! The committed CRD and the Helm chart's copy match the Rust types; the examples pass the
//! schema (defaults, structure, CEL rules, no unknown fields) and refer to objects that exist;
//! invalid policies are rejected with the field and the reason.

use std::collections::BTreeMap;

use egress_proxy_operator::api::{EgressProxyPolicy, crd_yaml};
use egress_proxy_tests::{SchemaCheck, load_documents, repo_root, yaml_files};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use serde_json::Value;

const CRD_FILE: &str = "crds/egressproxypolicies.egressproxy.io.yaml";

fn schema_check() -> SchemaCheck {
    let crd = &load_documents(&repo_root().join(CRD_FILE))[0];
    let schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
    assert!(schema.is_object(), "{CRD_FILE} has no openAPIV3Schema");
    SchemaCheck::new(schema)
}

#[test]
fn committed_crd_matches_the_types() {
    let committed = std::fs::read_to_string(repo_root().join(CRD_FILE)).expect("read CRD file");
    let generated = crd_yaml().expect("render CRD");
    assert!(
        committed == generated,
        "{CRD_FILE} is stale; regenerate it with:\n  cargo run -p egress-proxy-operator -- crd > {CRD_FILE}"
    );
}

/// The Helm chart installs the CRD from its own crds/ (Helm does not template or upgrade it).
const CHART_CRD_FILE: &str =
    "charts/egress-proxy-operator/crds/egressproxypolicies.egressproxy.io.yaml";

#[test]
fn the_charts_crd_matches_the_types() {
    let in_chart =
        std::fs::read_to_string(repo_root().join(CHART_CRD_FILE)).expect("read chart CRD");
    let generated = crd_yaml().expect("render CRD");
    assert!(
        in_chart == generated,
        "{CHART_CRD_FILE} is stale; regenerate it with:\n  cargo run -p egress-proxy-operator -- crd > {CHART_CRD_FILE}"
    );
}

#[derive(Default)]
struct Examples {
    policies: Vec<(String, Value)>,
    secrets: BTreeMap<(String, String), Secret>,
    namespaces: BTreeMap<String, Namespace>,
    workloads: Vec<(String, String, BTreeMap<String, String>)>,
}

fn load_examples() -> Examples {
    let mut out = Examples::default();
    for file in yaml_files(&repo_root().join("examples")) {
        let name = file.display().to_string();
        for doc in load_documents(&file) {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            match kind.as_str() {
                "EgressProxyPolicy" => out.policies.push((name.clone(), doc)),
                "Secret" => {
                    let s: Secret = serde_json::from_value(doc).expect("valid Secret");
                    let key = (
                        s.metadata.namespace.clone().expect("Secret namespace"),
                        s.metadata.name.clone().expect("Secret name"),
                    );
                    out.secrets.insert(key, s);
                }
                "Namespace" => {
                    let ns: Namespace = serde_json::from_value(doc).expect("valid Namespace");
                    out.namespaces
                        .insert(ns.metadata.name.clone().expect("name"), ns);
                }
                "Deployment" | "StatefulSet" | "DaemonSet" => {
                    let meta = match kind.as_str() {
                        "Deployment" => {
                            serde_json::from_value::<Deployment>(doc)
                                .expect("valid Deployment")
                                .metadata
                        }
                        "StatefulSet" => {
                            serde_json::from_value::<StatefulSet>(doc)
                                .expect("valid StatefulSet")
                                .metadata
                        }
                        _ => {
                            serde_json::from_value::<DaemonSet>(doc)
                                .expect("valid DaemonSet")
                                .metadata
                        }
                    };
                    out.workloads.push((
                        kind.clone(),
                        meta.namespace.expect("workload namespace"),
                        meta.labels.unwrap_or_default().into_iter().collect(),
                    ));
                }
                other => panic!("{name}: unexpected kind {other:?} in examples/"),
            }
        }
    }
    out
}

#[test]
fn examples_pass_the_schema_and_refer_to_existing_objects() {
    let check = schema_check();
    let examples = load_examples();
    assert!(
        examples.policies.len() >= 2,
        "examples/ should hold a single-slot and a two-slot policy"
    );
    let mut saw_two_slots = false;
    for (file, doc) in &examples.policies {
        let errors = check.errors(doc);
        assert!(
            errors.is_empty(),
            "{file}: rejected by the schema: {errors:#?}"
        );
        let policy: EgressProxyPolicy =
            serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let ns = policy.metadata.namespace.clone().expect("policy namespace");
        let ns_obj = examples
            .namespaces
            .get(&ns)
            .unwrap_or_else(|| panic!("{file}: namespace {ns} is not in examples/"));
        let opted_in = ns_obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("egressproxy.io/enabled"))
            .is_some_and(|v| v == "true");
        assert!(opted_in, "{file}: namespace {ns} lacks the opt-in label");
        saw_two_slots |= policy.spec.proxy.credentials.len() == 2;
        for slot in &policy.spec.proxy.credentials {
            let secret_ns = slot.secret_ref.namespace.clone().unwrap_or(ns.clone());
            let secret = examples
                .secrets
                .get(&(secret_ns.clone(), slot.secret_ref.name.clone()))
                .unwrap_or_else(|| panic!("{file}: slot {} refers to a missing Secret", slot.name));
            let keys: Vec<&String> = secret.string_data.iter().flat_map(|m| m.keys()).collect();
            for key in ["httpProxy", "httpsProxy"] {
                assert!(keys.iter().any(|k| *k == key), "{file}: Secret lacks {key}");
            }
            if secret_ns != ns {
                let grants = secret
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("egressproxy.io/allowed-namespaces"))
                    .map(|v| v.split(',').any(|n| n.trim() == ns || n.trim() == "*"))
                    .unwrap_or(false);
                assert!(grants, "{file}: Secret in {secret_ns} does not grant {ns}");
            }
        }
        let wanted = policy
            .spec
            .workload_selector
            .match_labels
            .clone()
            .unwrap_or_default();
        let selected = examples.workloads.iter().filter(|(_, wns, labels)| {
            *wns == ns && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
        });
        assert!(
            selected.count() > 0,
            "{file}: the policy selects no example workload"
        );
    }
    assert!(saw_two_slots, "examples/ should hold a two-slot policy");
}

#[test]
fn invalid_policies_are_rejected_naming_field_and_reason() {
    let check = schema_check();
    let files = yaml_files(&repo_root().join("tests/invalid-policies"));
    assert!(
        files.len() >= 15,
        "expected the invalid-policy corpus, found {}",
        files.len()
    );
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let header = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
                .unwrap_or_else(|| panic!("{}: missing '# {key}:' header", file.display()))
                .to_string()
        };
        let (path, message) = (header("expect-path"), header("expect-message"));
        let doc = &load_documents(&file)[0];
        let errors = check.errors(doc);
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with(&format!("{path}: ")) && e.contains(&message)),
            "{}: expected an error at {path} containing {message:?}, got {errors:#?}",
            file.display()
        );
    }
}

#[test]
fn a_minimal_policy_gets_the_documented_defaults() {
    let doc: Value = serde_json::json!({
        "apiVersion": "egressproxy.io/v1alpha1",
        "kind": "EgressProxyPolicy",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "workloadSelector": {"matchLabels": {"a": "b"}},
            "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "s"}}], "active": "main"}
        }
    });
    assert!(schema_check().errors(&doc).is_empty());
    let policy: EgressProxyPolicy = serde_json::from_value(doc).expect("deserialize");
    let spec = &policy.spec;
    assert_eq!(spec.workload_kinds.len(), 3);
    assert_eq!(spec.rollout.max_concurrent, 2);
    assert!(spec.no_proxy.discover.cluster_domain && spec.no_proxy.discover.api_server);
    assert_eq!(spec.no_proxy.dialect.name(), "portable");
    assert!(!spec.suspend);
}
