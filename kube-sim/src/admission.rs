//! ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1): every binding's policy whose
//! match constraints and match conditions select a write is evaluated with CEL (the `cel`
//! crate with kube-cel's Kubernetes functions; variables `object`, `oldObject`, `request`,
//! `namespaceObject`), and a failed validation of a `Deny` binding rejects the write as the
//! real API server does. Objects are bound without escaping their keys (kube-cel's VAP
//! evaluator escapes every key, so `labels['app.kubernetes.io/name']` would not be found):
//! like the real server, escaping applies to schema property names only.
//!
//! Supported: `matchConstraints.resourceRules` and `excludeResourceRules` (apiGroups,
//! apiVersions, operations, resources with `*` and subresources, resourceNames), the
//! binding's `matchResources` the same way, `matchConditions`, `validations` (`expression`,
//! `message`, `messageExpression`, `reason`), `failurePolicy`. Not supported: `variables`,
//! `paramKind`/`paramRef`, namespace and object selectors, `auditAnnotations`, and the
//! `Warn`/`Audit` actions (only `Deny` acts).

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{self, Context, Program};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::Target;
use crate::resources::GroupResource;
use crate::store::Store;

fn gr(resource: &str) -> GroupResource {
    GroupResource {
        group: "admissionregistration.k8s.io".into(),
        resource: resource.into(),
    }
}

/// One write to admit: `operation` is CREATE, UPDATE or DELETE.
pub(crate) struct Write<'a> {
    pub t: &'a Target,
    pub operation: &'a str,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
}

/// Rejects the write if a `Deny` binding's policy fails on it.
pub(crate) fn admit(store: &Store, w: &Write) -> ApiResult<()> {
    let bindings = store.range(&gr("validatingadmissionpolicybindings"), None, None);
    for (_, binding) in bindings {
        let spec = binding.get("spec").cloned().unwrap_or_default();
        let actions = strs(spec.get("validationActions"));
        if !actions.contains(&"Deny") {
            continue;
        }
        let name = spec.get("policyName").and_then(Value::as_str).unwrap_or("");
        let Some(policy) = store.get(
            &gr("validatingadmissionpolicies"),
            &(String::new(), name.into()),
        ) else {
            continue;
        };
        let pspec = policy.get("spec").cloned().unwrap_or_default();
        let selected = matches(pspec.get("matchConstraints"), w)
            && spec
                .get("matchResources")
                .is_none_or(|m| matches(Some(m), w));
        if !selected {
            continue;
        }
        let binding_name = binding.pointer("/metadata/name").and_then(Value::as_str);
        check(store, &pspec, w, name, binding_name.unwrap_or(""))?;
    }
    Ok(())
}

/// Evaluates one selected policy.
fn check(store: &Store, spec: &Value, w: &Write, policy: &str, binding: &str) -> ApiResult<()> {
    let ctx = context(store, w);
    let fail_closed = spec.get("failurePolicy").and_then(Value::as_str) != Some("Ignore");
    let denied = |message: String, reason: &str| {
        let (code, reason) = match reason {
            "Forbidden" => (403, "Forbidden"),
            "Unauthorized" => (401, "Unauthorized"),
            "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
            _ => (422, "Invalid"),
        };
        let message = format!(
            "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"
        );
        ApiError::new(code, reason, message)
    };
    let conditions: Vec<String> = list(spec.get("matchConditions"))
        .iter()
        .map(expression_of)
        .collect();
    for o in outcomes(&ctx, &conditions) {
        match o {
            Outcome::Passed => {}
            Outcome::False => return Ok(()),
            Outcome::Error(e) if fail_closed => return Err(denied(e, "Invalid")),
            Outcome::Error(_) => return Ok(()),
        }
    }
    let validations = list(spec.get("validations"));
    let expressions: Vec<String> = validations.iter().map(expression_of).collect();
    for (o, v) in outcomes(&ctx, &expressions).into_iter().zip(&validations) {
        let reason = v.get("reason").and_then(Value::as_str).unwrap_or("Invalid");
        match o {
            Outcome::Passed => {}
            Outcome::False => return Err(denied(message(&ctx, v), reason)),
            Outcome::Error(e) if fail_closed => return Err(denied(e, reason)),
            Outcome::Error(_) => {}
        }
    }
    Ok(())
}

enum Outcome {
    Passed,
    False,
    Error(String),
}

/// Each expression's outcome.
fn outcomes(ctx: &Context, expressions: &[String]) -> Vec<Outcome> {
    expressions
        .iter()
        .map(|e| match run(ctx, e) {
            Ok(cel::Value::Bool(true)) => Outcome::Passed,
            Ok(cel::Value::Bool(false)) => Outcome::False,
            // Not the value: it may be part of a Secret.
            Ok(_) => Outcome::Error(format!("expression '{e}' did not return a bool")),
            Err(why) => Outcome::Error(format!("expression '{e}' resulted in error: {why}")),
        })
        .collect()
}

fn run(ctx: &Context, expression: &str) -> Result<cel::Value, String> {
    let program = Program::compile(expression).map_err(|e| e.to_string())?;
    program.execute(ctx).map_err(|e| e.to_string())
}

/// The message of a failed validation: its messageExpression, else its message, else the
/// expression.
fn message(ctx: &Context, v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    if let Some(e) = s("messageExpression")
        && let Ok(cel::Value::String(m)) = run(ctx, e)
    {
        return m.to_string();
    }
    match s("message") {
        Some(m) => m.to_owned(),
        None => format!("failed expression: {}", expression_of(v)),
    }
}

fn expression_of(v: &Value) -> String {
    v.get("expression")
        .and_then(Value::as_str)
        .unwrap_or("false")
        .into()
}

/// The CEL variables of one write.
fn context(store: &Store, w: &Write) -> Context<'static> {
    let rt = &w.t.rt;
    let request = json!({
        "operation": w.operation,
        "name": w.t.name.clone().unwrap_or_default(),
        "namespace": w.t.namespace.clone().unwrap_or_default(),
        "dryRun": false,
        "kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "resource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
        "subResource": w.t.subresource.clone().unwrap_or_default(),
        "userInfo": {"username": w.t.user.clone().unwrap_or_default(), "groups": []},
    });
    let namespaces = GroupResource {
        group: String::new(),
        resource: "namespaces".into(),
    };
    let namespace =
        w.t.namespace
            .as_ref()
            .filter(|_| rt.namespaced)
            .and_then(|ns| store.get(&namespaces, &(String::new(), ns.clone())));
    let mut ctx = Context::default().with_all();
    ctx.add_variable_from_value("object", to_cel(w.object.unwrap_or(&Value::Null)));
    ctx.add_variable_from_value("oldObject", to_cel(w.old.unwrap_or(&Value::Null)));
    ctx.add_variable_from_value("request", to_cel(&request));
    let ns = namespace.map(|n| to_cel(&n)).unwrap_or(cel::Value::Null);
    ctx.add_variable_from_value("namespaceObject", ns);
    ctx
}

/// JSON as CEL sees an object: integers as int, keys as they are.
fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let map: HashMap<Key, cel::Value> = o
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            cel::Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// Whether `constraints` (a policy's matchConstraints or a binding's matchResources)
/// select the write.
fn matches(constraints: Option<&Value>, w: &Write) -> bool {
    let Some(c) = constraints else {
        return false;
    };
    let rules = list(c.get("resourceRules"));
    rules.iter().any(|r| rule_matches(r, w))
        && !list(c.get("excludeResourceRules"))
            .iter()
            .any(|r| rule_matches(r, w))
}

fn rule_matches(rule: &Value, w: &Write) -> bool {
    let rt = &w.t.rt;
    let any = |k: &str, want: &str| strs(rule.get(k)).iter().any(|x| *x == "*" || *x == want);
    let resource = match &w.t.subresource {
        Some(s) => format!("{}/{s}", rt.plural),
        None => rt.plural.clone(),
    };
    let resource_ok = strs(rule.get("resources")).iter().any(|r| {
        *r == "*/*"
            || *r == resource
            || (*r == "*" && w.t.subresource.is_none())
            || r.strip_suffix("/*") == Some(rt.plural.as_str()) && w.t.subresource.is_some()
    });
    let names = strs(rule.get("resourceNames"));
    let name_ok = names.is_empty() || w.t.name.as_deref().is_some_and(|n| names.contains(&n));
    any("apiGroups", &rt.group)
        && any("apiVersions", &rt.version)
        && any("operations", w.operation)
        && resource_ok
        && name_ok
}

fn list(v: Option<&Value>) -> Vec<Value> {
    v.and_then(Value::as_array).cloned().unwrap_or_default()
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
