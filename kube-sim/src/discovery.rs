//! Discovery documents: /version, /api, /apis and per group-version resource lists.

use serde_json::{Value, json};

use crate::resources::Registry;

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-kube-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": server_address }],
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
        .collect();
    json!({ "name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null) })
}

pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let (g, vs) = reg.groups().into_iter().find(|(g, _)| g == name)?;
    let mut doc = group_doc(&g, &vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    if !reg.group_has_version(group, version) {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources = Vec::new();
    for t in reg.in_group_version(group, version) {
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs(),
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        if t.status {
            resources.push(json!({
                "name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                "kind": t.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if t.scale {
            resources.push(json!({
                "name": format!("{}/scale", t.plural), "singularName": "", "namespaced": t.namespaced,
                "group": "autoscaling", "version": "v1",
                "kind": "Scale", "verbs": ["get", "patch", "update"],
            }));
        }
    }
    Some(
        json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources }),
    )
}
