//! What every dialect must have: these fail when a new one is only partly added.

use std::collections::HashSet;

use serde_json::Value;

use super::*;
use crate::schema_values::listed;
use crate::trust::Effect;

fn names() -> Vec<&'static str> {
    Dialect::ALL.iter().map(|d| d.name()).collect()
}

/// `ALL` holds every variant serde and the API schema know, in the enum's order, each once.
/// (A variant without its arm in [`client`] does not compile.)
#[test]
fn all_is_every_variant() {
    let schema = serde_json::to_value(schemars::schema_for!(Dialect)).expect("schema");
    let mut variants = Vec::new();
    listed(&schema, &mut variants);
    let all: Vec<String> = Dialect::ALL
        .iter()
        .map(|d| serde_json::to_value(d).expect("name"))
        .map(|v| v.as_str().expect("string").to_owned())
        .collect();
    assert_eq!(all, variants);
    let unique: HashSet<Dialect> = Dialect::ALL.into_iter().collect();
    assert_eq!(unique.len(), Dialect::ALL.len(), "a dialect twice in ALL");
}

/// Each dialect's name is its serde (API) name, unique, and parses back to it; its file
/// says which version it models.
#[test]
fn names_are_the_api_names() {
    for d in Dialect::ALL {
        let name = client(d).name();
        assert_eq!(serde_json::to_value(d).expect("name"), name, "{d:?}");
        let back: Dialect = serde_json::from_value(Value::from(name)).expect("parses");
        assert_eq!(back, d);
        assert_eq!(Dialect::from_name(name), Some(d));
        assert_eq!(d.to_string(), name);
        assert!(!d.modelled_version().is_empty(), "{d:?}");
    }
    let unique: HashSet<&str> = names().into_iter().collect();
    assert_eq!(
        unique.len(),
        Dialect::ALL.len(),
        "two dialects share a name"
    );
}

/// The committed CRD (regenerated after a new variant) lists exactly the dialects.
#[test]
fn the_crd_lists_every_dialect() {
    let crd: Value = serde_yaml_ng::from_str(include_str!(
        "../../../../crds/egressproxypolicies.egressproxy.io.yaml"
    ))
    .expect("CRD");
    let dialect = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/noProxy/properties/dialect")
        .expect("spec.noProxy.dialect");
    let mut listed_names = Vec::new();
    listed(dialect, &mut listed_names);
    assert_eq!(listed_names, names());
}

/// Every dialect but `portable` has a client model; the clients `portable` is written for
/// are the dialects that read the proxy variables, and those write their own dialect.
#[test]
fn each_client_has_a_model() {
    let env: Env = [("NO_PROXY", "a.example"), ("HTTP_PROXY", "http://p:3128")]
        .into_iter()
        .collect();
    for d in Dialect::ALL {
        assert_eq!(
            Model::new(d, &env).is_some(),
            d != Dialect::Portable,
            "{d:?}"
        );
        let reads = client(d).reads_variables();
        assert_eq!(Dialect::clients().any(|c| c == d), reads, "{d:?}");
        assert_eq!(d.for_variables() == d, reads || d == Dialect::Portable);
    }
    assert!(Dialect::clients().count() > 1);
}

/// The admission policy lets a probe Job run `probe --dialect` with every dialect.
#[test]
fn the_probe_admission_rule_names_every_dialect() {
    let admission = include_str!("../../../../deploy/admission.yaml");
    let start = admission
        .find("a in ['probe',")
        .expect("the probe's argument list");
    let list = &admission[start..];
    let list = &list[..list.find(']').expect("end of the list")];
    let allowed: HashSet<&str> = list.split('\'').skip(1).step_by(2).collect();
    for name in names() {
        assert!(
            allowed.contains(name),
            "{name} not in the probe's arguments"
        );
    }
}

/// The CRD's rule for `trust.roots: Replace` lists exactly the dialects none of whose
/// trust variables only adds to the client's roots (what `trust::build` refuses).
#[test]
fn the_replace_rule_lists_the_dialects_that_can_drop_roots() {
    let crd = include_str!("../../../../crds/egressproxypolicies.egressproxy.io.yaml");
    let rule = "self.noProxy.dialect in [";
    let start = crd.find(rule).expect("the roots: Replace rule") + rule.len();
    let list = &crd[start..];
    let list = &list[..list.find(']').expect("end of the list")];
    let in_rule: Vec<&str> = list.split("''").skip(1).step_by(2).collect();
    let can_replace: Vec<&str> = Dialect::ALL
        .into_iter()
        .filter(|d| {
            let vars = client(*d).trust_variables();
            vars.iter().all(|v| v.effect != Effect::AlwaysAdds)
        })
        .map(Dialect::name)
        .collect();
    assert_eq!(in_rule, can_replace);
    // The messages name them too, in their own order.
    let named = |text: &str, after: &str| -> HashSet<String> {
        let list = &text[text.find(after).expect(after) + after.len()..];
        let list = &list[..list.find(')').expect("end of the list")];
        list.split(", ").map(str::to_owned).collect()
    };
    let can_replace: HashSet<String> = can_replace.into_iter().map(str::to_owned).collect();
    assert_eq!(named(crd, "can drop their own roots ("), can_replace);
    let refused = crate::trust::TrustError::ReplaceUnsupported {
        dialect: Dialect::Curl,
        variable: "CURL_CA_BUNDLE",
    };
    assert_eq!(
        named(&refused.to_string(), "can drop their roots ("),
        can_replace
    );
}
