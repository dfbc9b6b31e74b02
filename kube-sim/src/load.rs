//! Loading YAML manifests (files or directories) into the store, CRDs first.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::api;
use crate::error::ApiError;
use crate::object::Target;
use crate::store::{Store, Stored};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {path}: {source}")]
    Yaml {
        path: PathBuf,
        source: serde_yaml_ng::Error,
    },
    #[error("{path}: {what}")]
    Object { path: PathBuf, what: String },
    #[error("{path}: {name}: {source}")]
    Api {
        path: PathBuf,
        name: String,
        source: Box<ApiError>,
    },
}

fn yaml_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            if e.is_dir()
                || e.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            {
                yaml_files(&e, out)?;
            }
        }
    } else {
        std::fs::metadata(path).map_err(io)?;
        out.push(path.to_path_buf());
    }
    Ok(())
}

/// Parse every YAML document (expanding `List` kinds) under the given paths.
pub fn read_documents(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Value)>, LoadError> {
    let mut files = Vec::new();
    for p in paths {
        yaml_files(p, &mut files)?;
    }
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|source| LoadError::Io {
            path: f.clone(),
            source,
        })?;
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc).map_err(|source| LoadError::Yaml {
                path: f.clone(),
                source,
            })?;
            push_doc(&f, v, &mut docs);
        }
    }
    Ok(docs)
}

fn push_doc(path: &Path, v: Value, docs: &mut Vec<(PathBuf, Value)>) {
    if v.is_null() {
        return;
    }
    let is_list = v
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    match v.get("items").and_then(Value::as_array) {
        Some(items) if is_list => {
            for i in items {
                push_doc(path, i.clone(), docs);
            }
        }
        _ => docs.push((path.to_path_buf(), v)),
    }
}

fn is_crd(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
}

/// Objects a cluster has before its first Service: CRDs, Namespaces and ServiceCIDRs (the
/// range the `kubernetes` Service's ClusterIP comes from).
pub fn precedes_services(v: &Value) -> bool {
    let kind = v.get("kind").and_then(Value::as_str);
    is_crd(v) || matches!(kind, Some("Namespace" | "ServiceCIDR"))
}

/// The order objects are loaded in: CRDs, then Namespaces, then everything else.
fn rank(v: &Value) -> u8 {
    match v.get("kind").and_then(Value::as_str) {
        _ if is_crd(v) => 0,
        Some("Namespace") => 1,
        _ => 2,
    }
}

/// Create (or replace) each object: CRDs, then Namespaces, then everything else.
pub fn apply_documents(store: &mut Store, docs: Vec<(PathBuf, Value)>) -> Result<usize, LoadError> {
    let mut docs = docs;
    docs.sort_by_key(|(_, v)| rank(v));
    let mut n = 0;
    for (path, v) in docs {
        apply_one(store, &path, v)?;
        n += 1;
    }
    Ok(n)
}

/// Documents of one source kept encoded until their turn (a large manifest's decoded values
/// take several times its text), in the order they are loaded.
pub struct Encoded(Vec<(u8, Stored)>);

impl Encoded {
    /// Encode the documents (nulls skipped); the first error stops.
    pub fn new<E>(values: impl IntoIterator<Item = Result<Value, E>>) -> Result<Self, E> {
        let mut docs = Vec::new();
        for v in values {
            let v = v?;
            if !v.is_null() {
                docs.push((rank(&v), Stored::encode(&v)));
            }
        }
        docs.sort_by_key(|(r, _)| *r);
        Ok(Self(docs))
    }
}

/// [`apply_documents`] for encoded documents from one source.
pub fn apply_encoded(store: &mut Store, path: &Path, docs: Encoded) -> Result<usize, LoadError> {
    for (_, doc) in &docs.0 {
        apply_one(store, path, doc.value())?;
    }
    Ok(docs.0.len())
}

/// Create or replace one object.
fn apply_one(store: &mut Store, path: &Path, v: Value) -> Result<(), LoadError> {
    let what = |w: &str| LoadError::Object {
        path: path.to_path_buf(),
        what: w.to_string(),
    };
    let api_version = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| what("apiVersion is missing"))?;
    let kind = v
        .get("kind")
        .and_then(Value::as_str)
        .ok_or_else(|| what("kind is missing"))?;
    let rt = store
        .registry
        .by_kind(api_version, kind)
        .ok_or_else(|| what(&format!("no resource serves {api_version} {kind}")))?;
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let ns = v
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let t = Target {
        rt: rt.clone(),
        namespace: rt.namespaced.then_some(ns),
        name: Some(name.clone()),
        subresource: None,
        manager: Some("kube-sim-load".into()),
        user: None,
    };
    let result = if store.contains(&t.gr(), &t.key()) {
        api::update(store, &t, v, false)
    } else {
        api::create(store, &Target { name: None, ..t }, v, false)
    };
    result.map_err(|source| LoadError::Api {
        path: path.to_path_buf(),
        name,
        source: Box::new(source),
    })?;
    Ok(())
}
