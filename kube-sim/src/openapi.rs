//! `/openapi/v3`: per group-version documents with the schemas of the built-in kinds and of
//! CRDs, so `kubectl explain` works; PATCH operations carry `fieldValidation`, so kubectl
//! leaves field validation to the server.

use serde_json::{Map, Value, json};

use crate::resources::{Registry, ResourceType};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash(reg: &Registry, group: &str, version: &str) -> String {
    // Changes whenever the set of served kinds changes.
    let mut h: u64 = 0xcbf29ce484222325;
    for t in reg.in_group_version(group, version) {
        for b in t.plural.bytes().chain(t.kind.bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
    }
    format!("{h:016X}")
}

pub fn root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (g, vs) in reg.groups() {
        gvs.extend(vs.into_iter().map(|v| (g.clone(), v)));
    }
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        let url = format!("/openapi/v3/{p}?hash={}", hash(reg, &g, &v));
        paths.insert(p, json!({ "serverRelativeURL": url }));
    }
    json!({ "paths": paths })
}

fn schema_name(t: &ResourceType) -> String {
    let g = if t.group.is_empty() {
        "core".to_string()
    } else {
        t.group.clone()
    };
    format!("{g}.{}.{}", t.version, t.kind)
}

/// The group-version document; `schema_of` supplies a type's schema when one is known (CRDs).
pub fn group_version(
    reg: &Registry,
    group: &str,
    version: &str,
    schema_of: &dyn Fn(&ResourceType) -> Option<Value>,
) -> Option<Value> {
    if !reg.group_has_version(group, version) {
        return None;
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for t in reg.in_group_version(group, version) {
        let gvk = json!([{ "group": t.group, "version": t.version, "kind": t.kind }]);
        let base = if t.namespaced {
            format!(
                "/{}/namespaces/{{namespace}}/{}/{{name}}",
                gv_path(group, version),
                t.plural
            )
        } else {
            format!("/{}/{}/{{name}}", gv_path(group, version), t.plural)
        };
        let params = json!([
            { "name": "dryRun", "in": "query", "schema": { "type": "string" } },
            { "name": "fieldManager", "in": "query", "schema": { "type": "string" } },
            { "name": "fieldValidation", "in": "query", "schema": { "type": "string" } },
            { "name": "force", "in": "query", "schema": { "type": "boolean" } },
        ]);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", t.kind),
                "parameters": params,
                "responses": { "200": { "description": "OK" } },
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk[0],
            })
        };
        paths.insert(base, json!({ "get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete") }));
        if t.crd.is_none()
            && let Some(k) = crate::builtin_schemas::of(&t.group, &t.version, &t.kind)
        {
            for (name, def) in &k.definitions {
                schemas.entry(name.clone()).or_insert_with(|| def.clone());
            }
            if let Some(s) = schemas.get_mut(&k.name) {
                s["x-kubernetes-group-version-kind"] = gvk;
            }
            continue;
        }
        let mut schema = schema_of(&t).unwrap_or_else(
            || json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }),
        );
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            let s = |d: &str| json!({ "type": "string", "description": d });
            props.entry("apiVersion").or_insert_with(|| {
                s("APIVersion defines the versioned schema of this representation of an object.")
            });
            props.entry("kind").or_insert_with(|| {
                s("Kind is a string value representing the REST resource this object represents.")
            });
            props.entry("metadata").or_insert_with(
                || json!({ "type": "object", "description": "Standard object's metadata." }),
            );
        }
        schema["x-kubernetes-group-version-kind"] = gvk;
        schemas.insert(schema_name(&t), schema);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes (kube-sim)", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": schemas },
    }))
}

const V2_TITLE: &str = "Kubernetes (kube-sim)";
const V2_VERSION: &str = "v1.33.0";

pub fn v2_json() -> Value {
    json!({ "swagger": "2.0", "info": { "title": V2_TITLE, "version": V2_VERSION }, "paths": {} })
}

/// The same document as a gnostic `openapi_v2.Document` protobuf: swagger (1) and info (2).
pub fn v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
        out.push((tag << 3) | 2);
        // All our payloads are shorter than 128 bytes, so the length is one varint byte.
        out.push(bytes.len() as u8);
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 1, V2_TITLE.as_bytes());
    field(&mut info, 2, V2_VERSION.as_bytes());
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    doc
}
