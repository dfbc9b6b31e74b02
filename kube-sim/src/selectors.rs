//! Label and field selectors.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Requirement>);

/// Split on commas that are not inside parentheses.
fn split_terms(s: &str) -> ApiResult<Vec<&str>> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(ApiError::bad_request(format!(
                "unable to parse requirement: unbalanced parentheses in {s:?}"
            )));
        }
    }
    if depth != 0 {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: unbalanced parentheses in {s:?}"
        )));
    }
    out.push(&s[start..]);
    Ok(out
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect())
}

fn check_key(key: &str) -> ApiResult<String> {
    let ok = !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && key.matches('/').count() <= 1;
    if ok {
        Ok(key.to_string())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label key {key:?}"
        )))
    }
}

fn check_value(v: &str) -> ApiResult<String> {
    let v = v.trim();
    if v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        Ok(v.to_string())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label value {v:?}"
        )))
    }
}

fn parse_set(s: &str) -> ApiResult<Vec<String>> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: expected (values), got {s:?}"
            ))
        })?;
    inner.split(',').map(check_value).collect()
}

/// Find a set operator (` in ` / ` notin `) separated by whitespace.
fn split_set_op(term: &str) -> Option<(&str, bool, &str)> {
    let mut parts = term.splitn(2, char::is_whitespace);
    let key = parts.next()?;
    let rest = parts.next()?.trim_start();
    if let Some(r) = rest.strip_prefix("notin") {
        return Some((key, false, r));
    }
    rest.strip_prefix("in").map(|r| (key, true, r))
}

impl LabelSelector {
    pub fn parse(s: &str) -> ApiResult<Self> {
        let mut reqs = Vec::new();
        for term in split_terms(s)? {
            let req = if let Some(k) = term.strip_prefix('!') {
                Requirement {
                    key: check_key(k.trim())?,
                    op: Op::NotExists,
                }
            } else if let Some((k, is_in, set)) = split_set_op(term) {
                let vals = parse_set(set)?;
                let op = if is_in { Op::In(vals) } else { Op::NotIn(vals) };
                Requirement {
                    key: check_key(k)?,
                    op,
                }
            } else if let Some((k, v)) = term.split_once("!=") {
                Requirement {
                    key: check_key(k.trim())?,
                    op: Op::NotEq(check_value(v)?),
                }
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement {
                    key: check_key(k.trim())?,
                    op: Op::Eq(check_value(v)?),
                }
            } else if let Some((k, v)) = term.split_once('>') {
                let n = v
                    .trim()
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid integer in {term:?}")))?;
                Requirement {
                    key: check_key(k.trim())?,
                    op: Op::Gt(n),
                }
            } else if let Some((k, v)) = term.split_once('<') {
                let n = v
                    .trim()
                    .parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid integer in {term:?}")))?;
                Requirement {
                    key: check_key(k.trim())?,
                    op: Op::Lt(n),
                }
            } else {
                Requirement {
                    key: check_key(term)?,
                    op: Op::Exists,
                }
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| {
            let v = labels.get(&r.key);
            match &r.op {
                Op::Eq(x) => v == Some(x),
                Op::NotEq(x) => v != Some(x),
                Op::In(xs) => v.is_some_and(|v| xs.contains(v)),
                Op::NotIn(xs) => v.is_none_or(|v| !xs.contains(v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
                Op::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *n),
                Op::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *n),
            }
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels: BTreeMap<String, String> = obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.matches_labels(&labels)
    }
}

/// A parsed field selector (`a=b`, `a==b`, `a!=b`, comma-separated).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// Fields the real server accepts beyond metadata.name / metadata.namespace.
fn allowed_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "Pod" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "Event" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "reportingController",
        ],
        "Secret" => &["type"],
        "Node" => &["spec.unschedulable"],
        "Namespace" => &["status.phase"],
        "Job" => &["status.successful"],
        "ReplicaSet" | "ReplicationController" => &["status.replicas"],
        _ => &[],
    }
}

impl FieldSelector {
    pub fn parse(s: &str, kind: &str) -> ApiResult<Self> {
        let mut out = Vec::new();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                )));
            };
            let field = field.trim();
            if !(field == "metadata.name"
                || field == "metadata.namespace"
                || allowed_fields(kind).contains(&field))
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            out.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self(out))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(field, eq, want)| {
            let ptr = format!("/{}", field.replace('.', "/"));
            let got = match obj.pointer(&ptr) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            (got == *want) == *eq
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether every field is under `metadata` (an object's metadata decides a match).
    pub fn metadata_only(&self) -> bool {
        self.0.iter().all(|(f, _, _)| f.starts_with("metadata."))
    }

    /// The namespace or name pinned by `metadata.namespace=` / `metadata.name=`, if any.
    pub fn pinned(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, eq, _)| f == field && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// `matchLabels`/`matchExpressions` rendered as a selector string.
pub(crate) fn selector_string(sel: &Value) -> String {
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let vals: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e
            .get("operator")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "In" => parts.push(format!("{key} in ({})", vals.join(","))),
            "NotIn" => parts.push(format!("{key} notin ({})", vals.join(","))),
            "Exists" => parts.push(key.to_string()),
            "DoesNotExist" => parts.push(format!("!{key}")),
            _ => {}
        }
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "front", "n": "5"}));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m("app=web"));
        assert!(m("app==web"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, db)"));
        assert!(!m("app notin (web,db)"));
        assert!(m("tier,app"));
        assert!(!m("!tier"));
        assert!(m("!missing"));
        assert!(m("missing notin (x)"));
        assert!(!m("missing in (x)"));
        assert!(m("app=web,tier in (front),!x"));
        assert!(m("n>4") && !m("n<4"));
        assert!(m(""));
    }

    #[test]
    fn label_errors() {
        assert!(LabelSelector::parse("app in (a").is_err());
        assert!(LabelSelector::parse("a b c").is_err());
        assert!(LabelSelector::parse("=x").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let f =
            FieldSelector::parse("metadata.name=a,metadata.namespace!=other", "ConfigMap").unwrap();
        assert!(f.matches(&o));
        assert_eq!(f.pinned("metadata.name"), Some("a"));
        assert!(
            !FieldSelector::parse("metadata.name==b", "ConfigMap")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("spec.foo=a", "ConfigMap").is_err());
        assert!(FieldSelector::parse("status.phase=Running", "Pod").is_ok());
    }
}
