//! Helpers shared by the workspace-level tests: loading manifests and checking objects against
//! a CRD's schema the way the API server would (defaults, structural schema, CEL rules), plus
//! kubectl's strict unknown-field check.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Every YAML document of one file, as JSON values (empty documents skipped).
pub fn load_documents(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .filter_map(|doc| {
            let value: Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
            (!value.is_null()).then_some(value)
        })
        .collect()
}

/// The `*.yaml` files of a directory, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}

/// Checks custom resources against one version's `openAPIV3Schema`.
pub struct SchemaCheck {
    schema: Value,
    strict: jsonschema::Validator,
}

impl SchemaCheck {
    /// Builds the checker from the schema of a CRD version.
    pub fn new(open_api_v3_schema: Value) -> Self {
        let mut strict_schema = open_api_v3_schema.clone();
        forbid_unknown_fields(&mut strict_schema, true);
        let strict = jsonschema::options()
            .should_validate_formats(false)
            .build(&strict_schema)
            .expect("the CRD schema is a valid JSON schema");
        SchemaCheck {
            schema: open_api_v3_schema,
            strict,
        }
    }

    /// Errors for `object` as `field.path: message`, empty when the API server (with
    /// `fieldValidation=Strict`) would accept it. Defaults are applied first, as admission does.
    pub fn errors(&self, object: &Value) -> Vec<String> {
        let defaulted = kube_cel::apply_defaults(&self.schema, object);
        let mut errors: Vec<String> = self
            .strict
            .iter_errors(&defaulted)
            .map(|e| format!("{}: {}", field_path(&e.instance_path().to_string()), e))
            .collect();
        if let Err(cel_errors) = kube_cel::validate(&self.schema, &defaulted, None) {
            errors.extend(cel_errors.iter().map(|e| e.to_string()));
        }
        errors
    }
}

/// Adds `additionalProperties: false` to every object schema with `properties`, so unknown
/// fields are errors as with kubectl's strict field validation. The root's `apiVersion`, `kind`
/// and `metadata` are allowed as they are (the API server checks ObjectMeta itself).
fn forbid_unknown_fields(schema: &mut Value, root: bool) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for (_, sub) in props.iter_mut() {
            forbid_unknown_fields(sub, false);
        }
        if root {
            for key in ["apiVersion", "kind", "metadata"] {
                props.insert(key.into(), serde_json::json!({}));
            }
        }
        map.entry("additionalProperties")
            .or_insert(Value::Bool(false));
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub @ Value::Object(_)) = map.get_mut(key) {
            forbid_unknown_fields(sub, false);
        }
    }
}

/// `/spec/proxy/credentials/0/name` → `spec.proxy.credentials[0].name`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').filter(|s| !s.is_empty()) {
        if segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    if out.is_empty() { "<root>".into() } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_pointers_become_field_paths() {
        assert_eq!(
            field_path("/spec/proxy/credentials/0/name"),
            "spec.proxy.credentials[0].name"
        );
        assert_eq!(field_path(""), "<root>");
        assert_eq!(field_path("/metadata/labels/a~1b"), "metadata.labels.a/b");
    }
}
