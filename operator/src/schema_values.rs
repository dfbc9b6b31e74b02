//! For tests that check a registry against the CRD: the values a JSON schema lists.

use serde_json::Value;

/// Every string a JSON schema lists as a value (`enum`, `const`), in order.
pub(crate) fn listed(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("const", Value::String(s)) => out.push(s.clone()),
                    ("enum", Value::Array(a)) => {
                        out.extend(a.iter().filter_map(|s| s.as_str().map(str::to_owned)))
                    }
                    _ => listed(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| listed(v, out)),
        _ => {}
    }
}
