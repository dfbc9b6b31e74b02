//! Structural-schema handling for custom resources: pruning of unknown fields, defaulting,
//! and validation of types, required fields, enums and simple bounds.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use serde_json::{Map, Value};

/// One validation failure: (field path, message).
pub type Cause = (String, String);

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    match want {
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => type_name(v) == other,
    }
}

fn flag(schema: &Value, k: &str) -> bool {
    schema.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// Prune, default and validate `v` against `schema` in place.
pub fn apply(schema: &Value, v: &mut Value, path: &str, causes: &mut Vec<Cause>) {
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    if int_or_string {
        if !(v.is_string() || type_ok("integer", v)) {
            causes.push((
                path.into(),
                format!(
                    "Invalid value: \"{}\": {path} in body must be of type int-or-string",
                    type_name(v)
                ),
            ));
        }
        return;
    }
    if let Some(want) = schema.get("type").and_then(Value::as_str)
        && !type_ok(want, v)
    {
        causes.push((
            path.into(),
            format!(
                "Invalid value: \"{}\": {path} in body must be of type {want}: \"{}\"",
                type_name(v),
                type_name(v)
            ),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        causes.push((
            path.into(),
            format!(
                "Unsupported value: {v}: supported values: {}",
                list.join(", ")
            ),
        ));
    }
    bounds(schema, v, path, causes);
    if let Value::String(text) = v {
        string(schema, text, path, causes);
    }
    match v {
        Value::Object(map) => object(schema, map, path, causes),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    apply(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

/// Compiled `pattern`s, shared: a CRD's patterns are checked on every write.
static PATTERNS: LazyLock<Mutex<HashMap<String, Option<Regex>>>> = LazyLock::new(Default::default);

/// `pattern` (RE2 syntax, which the regex crate follows) and the string `format`s the API
/// server checks that custom resources use: `date-time`, `date`, `uuid`, `ipv4`, `ipv6`,
/// `cidr`. Other formats are not checked.
fn string(schema: &Value, text: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        let mut patterns = PATTERNS.lock().unwrap_or_else(|p| p.into_inner());
        let re = patterns
            .entry(pattern.to_owned())
            .or_insert_with(|| Regex::new(pattern).ok());
        if re.as_ref().is_some_and(|re| !re.is_match(text)) {
            causes.push((
                path.into(),
                format!("Invalid value: {text:?}: {path} in body should match '{pattern}'"),
            ));
        }
    }
    let Some(format) = schema.get("format").and_then(Value::as_str) else {
        return;
    };
    let ok = match format {
        "date-time" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "uuid" => uuid::Uuid::parse_str(text).is_ok(),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => cidr(text),
        _ => true,
    };
    if !ok {
        causes.push((
            path.into(),
            format!("Invalid value: {text:?}: {path} in body must be of type {format}: {text:?}"),
        ));
    }
}

/// An address, a slash and a prefix length that fits it.
fn cidr(text: &str) -> bool {
    let Some((addr, len)) = text.split_once('/') else {
        return false;
    };
    let Ok(len) = len.parse::<u8>() else {
        return false;
    };
    match addr.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => len <= 32,
        Ok(std::net::IpAddr::V6(_)) => len <= 128,
        Err(_) => false,
    }
}

fn bounds(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    if let Some(x) = v.as_f64() {
        if let Some(min) = num("minimum")
            && x < min
        {
            causes.push((
                path.into(),
                format!(
                    "Invalid value: {v}: {path} in body should be greater than or equal to {min}"
                ),
            ));
        }
        if let Some(max) = num("maximum")
            && x > max
        {
            causes.push((
                path.into(),
                format!("Invalid value: {v}: {path} in body should be less than or equal to {max}"),
            ));
        }
    }
    let len = match v {
        Value::String(s) => Some((s.chars().count() as f64, "minLength", "maxLength", "chars")),
        Value::Array(a) => Some((a.len() as f64, "minItems", "maxItems", "items")),
        _ => None,
    };
    if let Some((n, lo, hi, unit)) = len {
        if let Some(min) = num(lo)
            && n < min
        {
            causes.push((
                path.into(),
                format!("Invalid value: {v}: {path} in body should have at least {min} {unit}"),
            ));
        }
        if let Some(max) = num(hi)
            && n > max
        {
            causes.push((
                path.into(),
                format!("Too long: {path} in body should have at most {max} {unit}"),
            ));
        }
    }
}

fn object(schema: &Value, map: &mut Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields")
        || schema.get("additionalProperties") == Some(&Value::Bool(true));
    let top = path.is_empty();
    // Nulls in non-nullable fields are dropped, then unknown fields are pruned.
    map.retain(|k, val| {
        if top && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            return true;
        }
        let sub = props.and_then(|p| p.get(k)).or(additional);
        match sub {
            Some(s) => !val.is_null() || flag(s, "nullable"),
            None => preserve,
        }
    });
    if let Some(props) = props {
        for (k, s) in props {
            if !map.contains_key(k)
                && let Some(d) = s.get("default")
            {
                map.insert(k.clone(), d.clone());
            }
        }
    }
    for (k, val) in map.iter_mut() {
        if top && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
            if val.is_null() {
                continue;
            }
            apply(s, val, &join(path, k), causes);
        }
    }
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(r) {
            causes.push((join(path, r), "Required value".into()));
        }
    }
}

/// The openAPIV3Schema of one version of a CRD object.
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .pointer("/schema/openAPIV3Schema")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "port": {"x-kubernetes-int-or-string": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
            "status": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        }})
    }

    #[test]
    fn prunes_defaults_and_accepts_valid() {
        let mut v = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a", "x": 1},
            "spec": {"size": 2, "port": "http", "junk": 1, "free": {"any": [1]}, "labels": {"a": "b"}, "tags": null},
            "extra": true});
        let mut causes = Vec::new();
        apply(&schema(), &mut v, "", &mut causes);
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(v["spec"]["mode"], "a");
        assert!(
            v["spec"].get("junk").is_none()
                && v.get("extra").is_none()
                && v["spec"].get("tags").is_none()
        );
        assert_eq!(v["spec"]["free"]["any"], json!([1]));
        assert_eq!(v["metadata"]["x"], 1);
    }

    #[test]
    fn reports_type_enum_required_and_bounds() {
        let mut v = json!({"spec": {"mode": "c", "port": true, "tags": [1], "labels": {"a": 2}}, "status": {"ok": "yes"}});
        let mut causes = Vec::new();
        apply(&schema(), &mut v, "", &mut causes);
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        for f in [
            "spec.size",
            "spec.mode",
            "spec.port",
            "spec.tags[0]",
            "spec.labels.a",
            "status.ok",
        ] {
            assert!(fields.contains(&f), "{f} missing in {causes:?}");
        }
        let mut v = json!({"spec": {"size": 0}});
        let mut causes = Vec::new();
        apply(&schema(), &mut v, "", &mut causes);
        assert_eq!(causes.len(), 1, "{causes:?}");
    }
}
