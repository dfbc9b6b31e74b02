//! Simulated controllers (opt-in): Deployment -> ReplicaSets (by pod-template hash) -> Pods,
//! StatefulSet -> Pods `name-0..n`, DaemonSet -> one Pod; Pods are Running and Ready at once,
//! and status carries the fields `kubectl rollout status` reads. Rollouts complete in one step
//! (old ReplicaSets are scaled to zero once the new one is ready; old Pods are replaced).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::api;
use crate::object::{Target, now};
use crate::resources::GroupResource;
use crate::server::Shared;
use crate::store::{Broadcast, Change, EventType, Store};

const MANAGER: &str = "kube-controller-manager";
const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";

fn target(
    store: &Store,
    group: &str,
    plural: &str,
    ns: &str,
    name: Option<&str>,
) -> Option<Target> {
    Some(Target {
        rt: store.registry.get(group, "v1", plural)?,
        namespace: Some(ns.to_string()),
        name: name.map(str::to_string),
        subresource: None,
        manager: Some(MANAGER.into()),
        user: None,
    })
}

/// Set a nested field, turning non-objects on the way into objects.
fn set(obj: &mut Value, path: &[&str], v: Value) {
    let mut cur = obj;
    for (i, seg) in path.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(m) = cur.as_object_mut() else { return };
        if i + 1 == path.len() {
            m.insert(seg.to_string(), v);
            return;
        }
        cur = m.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
}

/// Unconditional update (the controller works on the latest state under the lock).
fn put(store: &mut Store, t: &Target, mut obj: Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    if let Err(e) = api::update(store, t, obj, false) {
        tracing::warn!(error = %e, "controller update failed");
    }
}

fn gr(group: &str, plural: &str) -> GroupResource {
    GroupResource {
        group: group.into(),
        resource: plural.into(),
    }
}

fn uid(o: &Value) -> String {
    o.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn name(o: &Value) -> String {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn owned_by(o: &Value, owner_uid: &str) -> bool {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(owner_uid))
        })
}

fn owner_ref(kind: &str, api_version: &str, o: &Value) -> Value {
    json!([{ "apiVersion": api_version, "kind": kind, "name": name(o), "uid": uid(o),
             "controller": true, "blockOwnerDeletion": true }])
}

/// Desired replicas, bounded so a huge value cannot make the simulator spin.
fn replicas(o: &Value) -> i64 {
    o.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .clamp(0, MAX_PODS)
}

/// Upper bound on Pods per workload.
const MAX_PODS: i64 = 10_000;

/// Drop nulls and empty objects/arrays, so a template round-tripped through typed clients
/// (as `kubectl rollout undo` does) hashes the same.
fn canonical(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Object(m) => {
            let m: serde_json::Map<String, Value> = m
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), canonical(v)?)))
                .collect();
            (!m.is_empty()).then_some(Value::Object(m))
        }
        Value::Array(a) => {
            let a: Vec<Value> = a.iter().filter_map(canonical).collect();
            (!a.is_empty()).then_some(Value::Array(a))
        }
        other => Some(other.clone()),
    }
}

fn template_hash(template: &Value) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut t = canonical(template).unwrap_or(json!({}));
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(HASH_LABEL);
    }
    for b in t.to_string().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 6)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

fn owned(store: &Store, group: &str, plural: &str, ns: &str, owner: &str) -> Vec<Value> {
    store
        .range(&gr(group, plural), Some(ns), None)
        .filter(|(_, o)| owned_by(o, owner) && o.pointer("/metadata/deletionTimestamp").is_none())
        .map(|(_, o)| (**o).clone())
        .collect()
}

/// Bring a Deployment's ReplicaSets and status in line with its spec.
fn reconcile_deployment(store: &mut Store, ns: &str, dname: &str) {
    let Some(d) = store.get(&gr("apps", "deployments"), &(ns.into(), dname.into())) else {
        return;
    };
    let d = (*d).clone();
    if d.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let hash = template_hash(&template);
    let rss = owned(store, "apps", "replicasets", ns, &uid(&d));
    let revision = |rs: &Value| -> i64 {
        rs.pointer("/metadata/annotations")
            .and_then(|a| a.get(REVISION))
            .and_then(Value::as_str)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0)
    };
    let max_rev = rss.iter().map(revision).max().unwrap_or(0);
    let want = replicas(&d);
    let current = rss.iter().find(|rs| {
        rs.pointer(&format!("/metadata/labels/{HASH_LABEL}"))
            .and_then(Value::as_str)
            == Some(hash.as_str())
    });
    let mode = rollout_mode(&d);
    let new_rs = match current {
        Some(rs) => {
            let mut rs = rs.clone();
            let mut changed = false;
            if replicas(&rs) != want {
                set(&mut rs, &["spec", "replicas"], json!(want));
                changed = true;
            }
            // Rolling back to an older template makes its ReplicaSet the newest revision.
            if revision(&rs) < max_rev {
                set(
                    &mut rs,
                    &["metadata", "annotations", REVISION],
                    json!((max_rev + 1).to_string()),
                );
                changed = true;
            }
            // The Deployment's rollout mode is passed on to its current ReplicaSet.
            if rollout_mode(&rs) != mode {
                match &mode {
                    Some(m) => set(
                        &mut rs,
                        &["metadata", "annotations", ROLLOUT_ANNOTATION],
                        json!(m),
                    ),
                    None => {
                        if let Some(a) = rs
                            .pointer_mut("/metadata/annotations")
                            .and_then(Value::as_object_mut)
                        {
                            a.remove(ROLLOUT_ANNOTATION);
                        }
                    }
                }
                changed = true;
            }
            if changed && let Some(t) = target(store, "apps", "replicasets", ns, Some(&name(&rs))) {
                put(store, &t, rs.clone());
            }
            rs
        }
        None => {
            let mut tpl = template.clone();
            set(&mut tpl, &["metadata", "labels", HASH_LABEL], json!(hash));
            let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
            set(&mut selector, &["matchLabels", HASH_LABEL], json!(hash));
            let mut labels = tpl
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(json!({}));
            set(&mut labels, &[HASH_LABEL], json!(hash));
            let rs = json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": { "name": format!("{dname}-{hash}"), "namespace": ns, "labels": labels,
                              "annotations": { REVISION: (max_rev + 1).to_string() },
                              "ownerReferences": owner_ref("Deployment", "apps/v1", &d) },
                "spec": { "replicas": want, "selector": selector, "template": tpl },
            });
            let mut rs = rs;
            if let Some(m) = &mode {
                set(
                    &mut rs,
                    &["metadata", "annotations", ROLLOUT_ANNOTATION],
                    json!(m),
                );
            }
            let Some(t) = target(store, "apps", "replicasets", ns, None) else {
                return;
            };
            match api::create(store, &t, rs, false) {
                Ok(rs) => rs,
                Err(e) => {
                    tracing::warn!(error = %e, "deployment controller: creating ReplicaSet");
                    return;
                }
            }
        }
    };
    let new_name = name(&new_rs);
    let ready = |rs: &Value| {
        rs.pointer("/status/readyReplicas")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let new_ready = ready(&new_rs);
    // Old ReplicaSets go to zero once the new one is fully ready.
    let mut old_replicas = 0;
    let mut old_ready = 0;
    for rs in rss.iter().filter(|rs| name(rs) != new_name) {
        let have = rs
            .pointer("/status/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        old_replicas += have;
        old_ready += ready(rs);
        if new_ready >= want && replicas(rs) != 0 {
            let mut rs = rs.clone();
            set(&mut rs, &["spec", "replicas"], json!(0));
            if let Some(t) = target(store, "apps", "replicasets", ns, Some(&name(&rs))) {
                put(store, &t, rs);
            }
        }
    }
    let new_replicas = new_rs
        .pointer("/status/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let complete = new_ready >= want && new_replicas == want && old_replicas == 0;
    let ts = now();
    let cond = |ty: &str, reason: &str, msg: String| {
        json!({ "type": ty, "status": "True", "reason": reason, "message": msg,
                "lastUpdateTime": ts, "lastTransitionTime": ts })
    };
    let mut status = json!({
        "observedGeneration": d.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "replicas": new_replicas + old_replicas,
        "updatedReplicas": new_replicas,
        "readyReplicas": new_ready + old_ready,
        "availableReplicas": new_ready + old_ready,
        "conditions": [
            if new_ready + old_ready >= want {
                cond("Available", "MinimumReplicasAvailable", "Deployment has minimum availability.".into())
            } else {
                json!({ "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                        "message": "Deployment does not have minimum availability.", "lastUpdateTime": ts, "lastTransitionTime": ts })
            },
            if complete {
                cond("Progressing", "NewReplicaSetAvailable", format!("ReplicaSet \"{new_name}\" has successfully progressed."))
            } else if mode.as_deref() == Some("fail") {
                json!({ "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                        "message": format!("ReplicaSet \"{new_name}\" has timed out progressing."),
                        "lastUpdateTime": ts, "lastTransitionTime": ts })
            } else {
                cond("Progressing", "ReplicaSetUpdated", format!("ReplicaSet \"{new_name}\" is progressing."))
            },
        ],
    });
    if want - new_ready - old_ready > 0 {
        status["unavailableReplicas"] = json!(want - new_ready - old_ready);
    }
    // Keep condition timestamps stable when nothing else changed, so status writes converge.
    if let Some(old) = d.get("status") {
        let strip = |s: &Value| {
            let mut s = s.clone();
            if let Some(cs) = s.get_mut("conditions").and_then(Value::as_array_mut) {
                for c in cs {
                    if let Some(m) = c.as_object_mut() {
                        m.remove("lastUpdateTime");
                        m.remove("lastTransitionTime");
                    }
                }
            }
            s
        };
        if strip(old) == strip(&status) {
            status = old.clone();
        }
    }
    let Some(t) = target(store, "apps", "deployments", ns, Some(dname)) else {
        return;
    };
    let rev = json!(revision(&new_rs).to_string());
    if d.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        != Some(&rev)
    {
        let mut d2 = d.clone();
        set(&mut d2, &["metadata", "annotations", REVISION], rev);
        put(store, &t, d2);
    }
    if d.get("status") != Some(&status) {
        let mut d2 = d.clone();
        set(&mut d2, &["status"], status);
        let st = Target {
            subresource: Some("status".into()),
            ..t
        };
        put(store, &st, d2);
    }
}

fn pod_ip() -> String {
    let b = uuid::Uuid::new_v4().into_bytes();
    format!("10.244.{}.{}", b[0], b[1].max(2))
}

enum PodName {
    Exact(String),
    Generate(String),
}

/// Create a Running, Ready Pod from a template, owned by `owner`.
/// How a controller wants a Pod created.
struct NewPod<'a> {
    template: &'a Value,
    name: PodName,
    owner_kind: &'a str,
    owner: &'a Value,
    extra_labels: &'a Value,
    ready: bool,
}

fn create_pod(store: &mut Store, ns: &str, new: NewPod) -> Option<Value> {
    let NewPod {
        template,
        name,
        owner_kind,
        owner,
        extra_labels,
        ready,
    } = new;
    let containers = template
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            json!({ "name": c.get("name").cloned().unwrap_or(json!("")), "image": c.get("image").cloned().unwrap_or(json!("")),
                    "ready": true, "started": true, "restartCount": 0, "state": { "running": { "startedAt": now() } } })
        })
        .collect();
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    set(&mut spec, &["nodeName"], json!("kube-sim-node"));
    let mut labels = template
        .pointer("/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    for (k, v) in extra_labels.as_object().into_iter().flatten() {
        set(&mut labels, &[k], v.clone());
    }
    let mut meta = json!({
        "namespace": ns, "labels": labels,
        "annotations": template.pointer("/metadata/annotations").cloned().unwrap_or(json!({})),
        "ownerReferences": owner_ref(owner_kind, "apps/v1", owner),
    });
    match name {
        PodName::Exact(n) => set(&mut meta, &["name"], json!(n)),
        PodName::Generate(p) => set(&mut meta, &["generateName"], json!(p)),
    }
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
        "status": pod_status(statuses, ready),
    });
    if !ready {
        set(&mut pod, &["status", "podIP"], Value::Null);
    }
    let t = target(store, "", "pods", ns, None)?;
    match api::create(store, &t, pod, false) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(error = %e, "controller: creating Pod");
            None
        }
    }
}

/// Pod status: Running and Ready, or Pending with containers that never start.
fn pod_status(mut statuses: Vec<Value>, ready: bool) -> Value {
    let flag = if ready { "True" } else { "False" };
    if !ready {
        for s in &mut statuses {
            set(s, &["ready"], json!(false));
            set(s, &["started"], json!(false));
            set(
                s,
                &["state"],
                json!({ "waiting": { "reason": "ContainerCreating" } }),
            );
        }
    }
    json!({ "phase": if ready { "Running" } else { "Pending" }, "podIP": pod_ip(), "startTime": now(),
            "conditions": [{ "type": "Ready", "status": flag }, { "type": "ContainersReady", "status": flag }],
            "containerStatuses": statuses })
}

fn pod_ready(p: &Value) -> bool {
    p.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type") == Some(&json!("Ready")) && c.get("status") == Some(&json!("True"))
            })
        })
}

/// `kube-sim.io/rollout` on a Deployment: `hang` (new Pods never become Ready) or `fail`
/// (also reports ProgressDeadlineExceeded).
pub const ROLLOUT_ANNOTATION: &str = "kube-sim.io/rollout";

fn rollout_mode(o: &Value) -> Option<String> {
    o.pointer("/metadata/annotations")
        .and_then(|a| a.get(ROLLOUT_ANNOTATION))
        .and_then(Value::as_str)
        .filter(|m| matches!(*m, "hang" | "fail"))
        .map(str::to_string)
}

fn delete_pod(store: &mut Store, ns: &str, pod: &Value) {
    if let Some(t) = target(store, "", "pods", ns, Some(&name(pod))) {
        let _ = api::delete(store, &t, &api::DeleteOptions::default());
    }
}

const REVISION_LABEL: &str = "controller-revision-hash";

/// StatefulSets (Pods `name-0..n`) and DaemonSets (one Pod on the single node): Pods of an
/// older template are replaced at once, and status reports a finished rollout.
fn reconcile_workload(store: &mut Store, plural: &str, ns: &str, wname: &str) {
    let Some(w) = store.get(&gr("apps", plural), &(ns.into(), wname.into())) else {
        return;
    };
    let w = (*w).clone();
    if w.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let kind = if plural == "statefulsets" {
        "StatefulSet"
    } else {
        "DaemonSet"
    };
    let template = w.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let revision = format!("{wname}-{}", template_hash(&template));
    let want: Vec<Option<String>> = if kind == "StatefulSet" {
        (0..replicas(&w).max(0))
            .map(|i| Some(format!("{wname}-{i}")))
            .collect()
    } else {
        vec![None]
    };
    let mut pods = owned(store, "", "pods", ns, &uid(&w));
    // Pods of an older revision or beyond the wanted names go.
    pods.retain(|p| {
        let current = p
            .pointer("/metadata/labels")
            .and_then(|l| l.get(REVISION_LABEL))
            .and_then(Value::as_str)
            == Some(revision.as_str());
        let wanted = kind == "DaemonSet" || want.iter().flatten().any(|n| *n == name(p));
        if !(current && wanted) {
            delete_pod(store, ns, p);
        }
        current && wanted
    });
    let extra = json!({ REVISION_LABEL: revision });
    for n in &want {
        let exists = match n {
            Some(n) => pods.iter().any(|p| name(p) == *n),
            None => !pods.is_empty(),
        };
        if exists {
            continue;
        }
        let pod_name = match n {
            Some(n) => PodName::Exact(n.clone()),
            None => PodName::Generate(format!("{wname}-")),
        };
        match create_pod(
            store,
            ns,
            NewPod {
                template: &template,
                name: pod_name,
                owner_kind: kind,
                owner: &w,
                extra_labels: &extra,
                ready: true,
            },
        ) {
            Some(p) => pods.push(p),
            None => return,
        }
    }
    let n = pods.len() as i64;
    let generation = w
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let status = if kind == "StatefulSet" {
        json!({ "observedGeneration": generation, "replicas": n, "readyReplicas": n, "currentReplicas": n,
                "updatedReplicas": n, "availableReplicas": n, "currentRevision": revision,
                "updateRevision": revision, "collisionCount": 0 })
    } else {
        json!({ "observedGeneration": generation, "desiredNumberScheduled": 1, "currentNumberScheduled": n,
                "numberReady": n, "numberAvailable": n, "updatedNumberScheduled": n, "numberMisscheduled": 0 })
    };
    if w.get("status") != Some(&status)
        && let Some(t) = target(store, "apps", plural, ns, Some(wname))
    {
        let mut w2 = w.clone();
        set(&mut w2, &["status"], status);
        put(
            store,
            &Target {
                subresource: Some("status".into()),
                ..t
            },
            w2,
        );
    }
}

/// Create or delete Pods for a ReplicaSet and report its status.
fn reconcile_replicaset(store: &mut Store, ns: &str, rsname: &str) {
    let Some(rs) = store.get(&gr("apps", "replicasets"), &(ns.into(), rsname.into())) else {
        return;
    };
    let rs = (*rs).clone();
    if rs.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let want = replicas(&rs).max(0) as usize;
    let mut pods = owned(store, "", "pods", ns, &uid(&rs));
    pods.sort_by_key(name);
    while pods.len() > want {
        let Some(p) = pods.pop() else { break };
        if let Some(t) = target(store, "", "pods", ns, Some(&name(&p))) {
            let _ = api::delete(store, &t, &api::DeleteOptions::default());
        }
    }
    let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let stuck = rollout_mode(&rs).is_some();
    while pods.len() < want {
        let name = PodName::Generate(format!("{rsname}-"));
        let new = NewPod {
            template: &template,
            name,
            owner_kind: "ReplicaSet",
            owner: &rs,
            extra_labels: &json!({}),
            ready: !stuck,
        };
        match create_pod(store, ns, new) {
            Some(p) => pods.push(p),
            None => return,
        }
    }
    // Once the rollout is no longer held, waiting Pods become Ready.
    if !stuck {
        for p in pods.iter_mut().filter(|p| !pod_ready(p)) {
            let statuses = p
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let statuses = statuses
                .into_iter()
                .map(|mut s| {
                    set(&mut s, &["ready"], json!(true));
                    set(&mut s, &["started"], json!(true));
                    set(
                        &mut s,
                        &["state"],
                        json!({ "running": { "startedAt": now() } }),
                    );
                    s
                })
                .collect();
            set(p, &["status"], pod_status(statuses, true));
            if let Some(t) = target(store, "", "pods", ns, Some(&name(p))) {
                put(
                    store,
                    &Target {
                        subresource: Some("status".into()),
                        ..t
                    },
                    p.clone(),
                );
            }
        }
    }
    let n = pods.len() as i64;
    let ready = pods.iter().filter(|p| pod_ready(p)).count() as i64;
    let mut rs2 = rs.clone();
    let generation = rs
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    let status = if n == 0 {
        json!({ "replicas": 0, "observedGeneration": generation })
    } else {
        json!({ "replicas": n, "readyReplicas": ready, "availableReplicas": ready,
                "fullyLabeledReplicas": n, "observedGeneration": generation })
    };
    set(&mut rs2, &["status"], status);
    if rs2 != rs
        && let Some(t) = target(store, "apps", "replicasets", ns, Some(rsname))
    {
        let st = Target {
            subresource: Some("status".into()),
            ..t
        };
        put(store, &st, rs2);
    }
}

/// What a change should trigger.
fn handle(store: &mut Store, c: &Change) {
    let ns = c.namespace.as_str();
    let n = name(&c.object);
    match (c.gr.group.as_str(), c.gr.resource.as_str()) {
        ("apps", "deployments") if c.kind != EventType::Deleted => {
            reconcile_deployment(store, ns, &n)
        }
        ("apps", "replicasets") => {
            if c.kind != EventType::Deleted {
                reconcile_replicaset(store, ns, &n);
            }
            for owner in owners(&c.object, "Deployment") {
                reconcile_deployment(store, ns, &owner);
            }
        }
        ("apps", plural @ ("statefulsets" | "daemonsets")) if c.kind != EventType::Deleted => {
            reconcile_workload(store, plural, ns, &n)
        }
        ("", "pods") if c.kind == EventType::Deleted => {
            for owner in owners(&c.object, "ReplicaSet") {
                reconcile_replicaset(store, ns, &owner);
            }
            for owner in owners(&c.object, "StatefulSet") {
                reconcile_workload(store, "statefulsets", ns, &owner);
            }
            for owner in owners(&c.object, "DaemonSet") {
                reconcile_workload(store, "daemonsets", ns, &owner);
            }
        }
        _ => {}
    }
}

fn owners(o: &Value, kind: &str) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter(|r| r.get("kind").and_then(Value::as_str) == Some(kind))
                .filter_map(|r| r.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reconcile every workload (at start-up and after missing events).
fn resync(store: &mut Store) {
    for plural in ["deployments", "statefulsets", "daemonsets"] {
        let keys: Vec<(String, String)> = store
            .range(&gr("apps", plural), None, None)
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, n) in keys {
            match plural {
                "deployments" => reconcile_deployment(store, &ns, &n),
                _ => reconcile_workload(store, plural, &ns, &n),
            }
        }
    }
}

/// Run the controllers until the channel closes.
pub async fn run(shared: Arc<Shared>) {
    let mut rx = {
        let mut store = shared.lock();
        let rx = store.subscribe();
        resync(&mut store);
        rx
    };
    loop {
        match rx.recv().await {
            Ok(Broadcast::Change(c)) => {
                let mut store = shared.lock();
                handle(&mut store, &c);
            }
            Ok(Broadcast::Expire) => {}
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "controllers fell behind; resyncing");
                resync(&mut shared.lock());
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
