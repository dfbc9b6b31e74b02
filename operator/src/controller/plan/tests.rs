//! Plan tests: build the inputs, assert the exact plan and report. No server.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Value, json};

use super::*;
use crate::api::{RotationPhase, WorkloadKind};
use crate::controller::objects::{JobView, Owned, Rollout};
use crate::credentials::{CredentialError, ProxyUrls};
use crate::discovery::{NodeInputs, Overrides};
use crate::workloads::{CONFIG_HASH, CREDENTIAL_SLOT, TRUST_BUNDLE};
use verify::ProbeRun;

const NS: &str = "team-a";
const OWN: &str = "egress-proxy-outbound";
const URL: &str = "http://u:pw@proxy.corp.example:3128";
const KEY: [u8; 32] = [7; 32];
const PROBE_IMAGE: &str = "registry.example/egress-proxy-operator:test";

fn policy(name: &str, created: &str, spec: Value) -> EgressProxyPolicy {
    let mut base = json!({
        "workloadSelector": {"matchLabels": {"egress": "proxied"}},
        "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "egress-proxy"}}],
                  "active": "main"},
    });
    merge(&mut base, spec);
    serde_json::from_value(json!({
        "apiVersion": "egressproxy.io/v1alpha1",
        "kind": "EgressProxyPolicy",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"),
                     "generation": 1, "creationTimestamp": created,
                     "finalizers": ["egressproxy.io/cleanup"]},
        "spec": base,
    }))
    .expect("policy")
}

fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn deployment(name: &str, labels: Value, containers: Value) -> WorkloadView {
    workload(WorkloadKind::Deployment, name, labels, containers)
}

fn workload(kind: WorkloadKind, name: &str, labels: Value, containers: Value) -> WorkloadView {
    WorkloadView {
        id: WorkloadId {
            kind,
            namespace: NS.into(),
            name: name.into(),
        },
        labels: serde_json::from_value(labels).expect("labels"),
        template: serde_json::from_value(json!({"spec": {"containers": containers}}))
            .expect("template"),
        resource_version: Some("10".into()),
        rollout: Rollout::RolledOut,
        owned: None,
    }
}

fn proxied(name: &str) -> WorkloadView {
    deployment(
        name,
        json!({"egress": "proxied"}),
        json!([{"name": "app", "image": "app:1", "env": [{"name": "LOG", "value": "1"}]}]),
    )
}

/// A cluster where every fact is found.
fn cluster() -> ClusterInputs {
    ClusterInputs {
        kubernetes_service_found: true,
        kubernetes_service_ips: vec!["10.43.0.1".into()],
        nodes: vec![NodeInputs {
            name: "n1".into(),
            pod_cidrs: vec!["10.42.0.0/24".into()],
            internal_ips: vec!["192.168.1.10".into()],
            provider_id: None,
            ..Default::default()
        }],
        overrides: Overrides {
            cluster_domain: Some("cluster.corp".into()),
            service_cidrs: vec!["10.43.0.0/16".into()],
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The managed ConfigMap's data without trust.
fn no_proxy_data(value: &str) -> ConfigMapData {
    ConfigMapData {
        data: BTreeMap::from([("NO_PROXY".into(), value.into())]),
        binary: BTreeMap::new(),
    }
}

fn urls(url: &str) -> Result<ProxyUrls, CredentialError> {
    Ok(ProxyUrls {
        http_proxy: url.into(),
        https_proxy: url.into(),
    })
}

/// Everything a reconcile knows, owned; `plan()` borrows it.
struct World {
    policy: EgressProxyPolicy,
    others: Vec<EgressProxyPolicy>,
    admitted: bool,
    denied: Option<String>,
    cluster: ClusterInputs,
    credentials: Option<Result<ProxyUrls, CredentialError>>,
    /// The second slot's read, for two-slot policies.
    second: Option<Result<ProxyUrls, CredentialError>>,
    pods: Option<BTreeMap<String, usize>>,
    secret: Observed<SecretData>,
    config_map: Observed<ConfigMapData>,
    workloads: Vec<WorkloadView>,
    jobs: Vec<JobView>,
    recent: BTreeMap<WorkloadId, Marker>,
    previous: EgressProxyPolicyStatus,
    new_key: Vec<u8>,
    probe_image: Option<String>,
    probe: Option<ProbeRun>,
    unix_now: u64,
    /// The trust sources as the executor read them (`spec.trust`).
    trust: Option<Vec<SourceRead>>,
    root_set: crate::trust::RootSet,
}

impl World {
    /// A new policy `outbound` (no status, no managed objects) and the given workloads.
    fn new(spec: Value, workloads: Vec<WorkloadView>) -> World {
        World {
            policy: policy("outbound", "2026-01-02T00:00:00Z", spec),
            others: Vec::new(),
            admitted: true,
            denied: None,
            cluster: cluster(),
            credentials: Some(urls(URL)),
            second: None,
            pods: None,
            secret: Observed::default(),
            config_map: Observed::default(),
            workloads,
            jobs: Vec::new(),
            recent: BTreeMap::new(),
            previous: EgressProxyPolicyStatus::default(),
            new_key: KEY.to_vec(),
            probe_image: Some(PROBE_IMAGE.into()),
            probe: None,
            unix_now: 1_800_000_000,
            trust: None,
            root_set: crate::trust::RootSet {
                name: "test roots".into(),
                certs: Vec::new(),
            },
        }
    }

    /// The policy's slots as the executor reads them: `main` from `credentials`, and the
    /// second slot of the spec from `second`.
    fn slots(&self) -> Option<Vec<SlotRead>> {
        let first = self.credentials.as_ref()?;
        let reads = [Some(first), self.second.as_ref()];
        let spec = &self.policy.spec.proxy.credentials;
        Some(
            spec.iter()
                .zip(reads)
                .filter_map(|(slot, c)| {
                    let c = c?;
                    let r = &slot.secret_ref;
                    let source = format!("{}/{}", r.namespace.as_deref().unwrap_or(NS), r.name);
                    let content = match c {
                        Ok(u) => Some(format!("{}|{}", u.http_proxy, u.https_proxy).into_bytes()),
                        Err(e) if e.withdrawn() => None,
                        Err(_) => Some(b"malformed".to_vec()),
                    };
                    Some(SlotRead {
                        name: slot.name.clone(),
                        source,
                        content,
                        urls: c.clone(),
                    })
                })
                .collect(),
        )
    }

    fn plan(&self) -> Plan {
        let others: Vec<&EgressProxyPolicy> = self.others.iter().collect();
        let slots = self.slots();
        plan(&Inputs {
            policy: &self.policy,
            others: &others,
            admitted: self.admitted,
            admission: "namespace selector \"egressproxy.io/enabled=true\"",
            denied: self.denied.as_deref(),
            cluster: &self.cluster,
            slots: slots.as_deref(),
            trust: self.trust.as_deref(),
            root_set: &self.root_set,
            pods: self.pods.as_ref(),
            secret: &self.secret,
            config_map: &self.config_map,
            workloads: &self.workloads,
            jobs: &self.jobs,
            recent: &self.recent,
            previous: &self.previous,
            new_key: &self.new_key,
            probe_image: self.probe_image.as_deref(),
            probe: self.probe.as_ref(),
            unix_now: self.unix_now,
        })
    }

    /// Plays the plan as a successful executor and the cluster would: managed objects
    /// written, workloads written and rolled out, status stored.
    fn settle(&mut self) -> Plan {
        let p = self.plan();
        match &p.secret {
            Change::Apply(d) | Change::Create(d) => {
                self.secret = observed(d.clone(), managed_meta(&self.policy));
            }
            Change::Delete => self.secret = Observed::default(),
            Change::Keep => {}
        }
        match &p.config_map {
            Change::Apply(d) | Change::Create(d) => {
                self.config_map = observed(d.clone(), managed_meta(&self.policy));
            }
            Change::Delete => self.config_map = Observed::default(),
            Change::Keep => {}
        }
        for w in &p.writes {
            let v = self
                .workloads
                .iter_mut()
                .find(|v| v.id == w.id)
                .expect("written");
            v.template = written(&v.template, &w.write);
            v.rollout = Rollout::RolledOut;
        }
        if let Some(s) = p.report(&[], &now()).status {
            self.previous = s;
        }
        p
    }

    fn workload(&mut self, name: &str) -> &mut WorkloadView {
        self.workloads
            .iter_mut()
            .find(|v| v.id.name == name)
            .expect("workload")
    }
}

fn observed<T>(data: T, meta: ObjectMeta) -> Observed<T> {
    Observed {
        data: Some(data),
        meta: Some(meta),
    }
}

fn now() -> Time {
    Time("2026-03-01T00:00:00Z".parse().expect("time"))
}

/// The template after a write, for the fields the operator touches (a small stand-in for
/// the API server's apply and strategic merge, enough for these tests).
fn written(t: &PodTemplateSpec, w: &Write) -> PodTemplateSpec {
    let body = match w {
        Write::Apply(b) | Write::Patch(b) => b,
        Write::None => return t.clone(),
    };
    let mut out = serde_json::to_value(t).expect("template");
    let spec = &body["spec"];
    let tpl = match spec.get("jobTemplate") {
        Some(job) => &job["spec"]["template"],
        None => &spec["template"],
    };
    let ann = &mut out["metadata"]["annotations"];
    for key in [CONFIG_HASH, CREDENTIAL_SLOT, TRUST_BUNDLE] {
        if key == TRUST_BUNDLE && tpl["metadata"]["annotations"].get(key).is_none() {
            continue;
        }
        let value = tpl["metadata"]["annotations"][key].clone();
        if value.is_null() {
            if let Some(a) = ann.as_object_mut() {
                a.remove(key);
            }
        } else {
            merge(ann, json!({ key: value }));
        }
    }
    for field in ["containers", "initContainers"] {
        for c in tpl["spec"][field].as_array().into_iter().flatten() {
            let list = out["spec"][field].as_array_mut().expect("containers");
            let target = list.iter_mut().find(|x| x["name"] == c["name"]).expect("c");
            for e in c["env"].as_array().into_iter().flatten() {
                set_env(target, e);
            }
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                set_item(target, "volumeMounts", "mountPath", m);
            }
        }
    }
    for v in tpl["spec"]["volumes"].as_array().into_iter().flatten() {
        set_item(&mut out["spec"], "volumes", "name", v);
    }
    serde_json::from_value(out).expect("template")
}

/// Replaces (or with `$patch: delete` removes) the item of `list` with the same `key`.
fn set_item(parent: &mut Value, list: &str, key: &str, item: &Value) {
    if !parent[list].is_array() {
        parent[list] = json!([]);
    }
    let items = parent[list].as_array_mut().expect("list");
    items.retain(|x| x[key] != item[key]);
    if item["$patch"] != "delete" {
        items.push(item.clone());
    }
}

fn set_env(container: &mut Value, e: &Value) {
    if !container["env"].is_array() {
        container["env"] = json!([]);
    }
    let env = container["env"].as_array_mut().expect("env");
    env.retain(|x| x["name"] != e["name"]);
    if e["$patch"] != "delete" {
        let mut e = e.clone();
        if let Some(o) = e.as_object_mut() {
            o.retain(|_, v| !v.is_null());
        }
        env.push(e);
    }
}

fn env_names(v: &WorkloadView, container: &str) -> Vec<String> {
    let spec = v.template.spec.as_ref().expect("spec");
    let c = spec
        .containers
        .iter()
        .find(|c| c.name == container)
        .expect("c");
    c.env.iter().flatten().map(|e| e.name.clone()).collect()
}

fn ids(p: &Plan) -> Vec<String> {
    p.writes.iter().map(|w| w.id.to_string()).collect()
}

fn ready(r: &Report) -> (String, String) {
    let s = r.status.as_ref().expect("status written");
    let c = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    (c.status.clone(), c.reason.clone())
}

fn events(r: &Report) -> Vec<(bool, String)> {
    r.events
        .iter()
        .map(|e| (e.warning, e.reason.clone()))
        .collect()
}

fn hash_of(v: &WorkloadView) -> Option<String> {
    workloads::current_hash(&v.template).map(str::to_owned)
}

/// In the default `portable` dialect: the CIDRs and `::1` are uncovered.
/// The node address 192.168.1.10 is written as its /24.
const NO_PROXY: &str = "cluster.corp,.cluster.corp,cluster.corp.,.cluster.corp.,localhost,localhost.,svc,.svc,svc.,.svc.,10.42.0.0/24,10.43.0.1,10.43.0.0/16,192.168.1.0/24,127.0.0.1";

// --- the first reconcile and the steady state ---

#[test]
fn a_new_policy_writes_its_managed_objects_then_injects() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    w.policy.metadata.finalizers = None;
    let p = w.plan();
    assert!(p.add_finalizer);
    // Created, not applied: a second instance starting at the same time cannot replace the
    // hash key this one wrote.
    let Change::Create(secret) = &p.secret else {
        panic!("secret {:?}", p.secret)
    };
    let keys: Vec<&str> = secret.0.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "hash-key",
            "slot.main.HTTPS_PROXY",
            "slot.main.HTTP_PROXY",
            "slot.main.source"
        ]
    );
    assert_eq!(secret.0["hash-key"].0, KEY.to_vec());
    assert_eq!(p.config_map, Change::Create(no_proxy_data(NO_PROXY)));
    assert_eq!(ids(&p), ["Deployment/api"]);
    let Write::Apply(body) = &p.writes[0].write else {
        panic!("server-side apply")
    };
    let env = &body["spec"]["template"]["spec"]["containers"][0]["env"];
    let names: Vec<&str> = env
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "HTTP_PROXY",
            "http_proxy",
            "HTTPS_PROXY",
            "https_proxy",
            "NO_PROXY",
            "no_proxy"
        ]
    );
    assert_eq!(env[0]["valueFrom"]["secretKeyRef"]["name"], OWN);
    assert_eq!(env[4]["valueFrom"]["configMapKeyRef"]["name"], OWN);
    assert!(!p.remove_finalizer);
    let r = p.report(&[], &now());
    assert_eq!(
        ready(&r),
        ("False".into(), reason::ROLLOUT_IN_PROGRESS.into())
    );
    assert_eq!(r.requeue, Requeue::Soon);
    let status = r.status.clone().expect("status");
    assert_eq!(status.no_proxy.as_deref(), Some(NO_PROXY));
    assert_eq!(status.active_credential.as_deref(), Some("main"));
    let counts = status.workloads.expect("counts");
    assert_eq!((counts.selected, counts.up_to_date), (1, 0));
    assert_eq!(counts.pending, ["Deployment/api"]);
    // Ready turning False for the rollout is told by ConfigApplied alone.
    assert_eq!(events(&r), [(false, "ConfigApplied".into())]);
}

#[test]
fn the_steady_state_plans_no_write_status_or_event() {
    let mut w = World::new(json!({}), vec![proxied("api"), proxied("web")]);
    w.settle();
    let p = w.settle();
    assert_eq!(ids(&p), Vec::<String>::new(), "the rollout round");
    let p = w.plan();
    assert!(!p.add_finalizer && !p.remove_finalizer);
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    assert!(p.writes.is_empty());
    let r = p.report(&[], &now());
    assert_eq!(r.status, None, "status unchanged");
    assert!(r.events.is_empty());
    assert_eq!(r.requeue, Requeue::Resync);
    assert_eq!(env_names(&w.workloads[0], "app")[0], "LOG");
}

#[test]
fn settling_reports_ready_once() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    w.settle();
    let r = w.plan().report(&[], &now());
    assert_eq!(ready(&r), ("True".into(), reason::RECONCILED.into()));
    assert_eq!(events(&r), [(false, reason::RECONCILED.into())]);
}

#[test]
fn workloads_are_planned_in_id_order_whatever_the_cache_order() {
    let w = World::new(json!({}), vec![proxied("b"), proxied("a")]);
    assert_eq!(ids(&w.plan()), ["Deployment/a", "Deployment/b"]);
    let mut reversed = World::new(json!({}), vec![proxied("a"), proxied("b")]);
    reversed.new_key = w.new_key.clone();
    assert_eq!(w.plan(), reversed.plan());
}

#[test]
fn the_hash_key_in_the_managed_secret_is_kept() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    w.settle();
    let before = hash_of(&w.workloads[0]);
    w.new_key = vec![9; 32];
    let p = w.plan();
    assert_eq!(p.secret, Change::Keep);
    assert!(p.writes.is_empty(), "same key, same hash");
    assert!(before.is_some());
}

#[test]
fn a_credential_change_rolls_every_workload_once() {
    let mut w = World::new(json!({}), vec![proxied("api"), proxied("web")]);
    w.settle();
    let old = hash_of(&w.workloads[0]);
    w.credentials = Some(urls("http://u:new@proxy.corp.example:3128"));
    let p = w.plan();
    assert!(matches!(p.secret, Change::Apply(_)));
    assert_eq!(p.config_map, Change::Keep, "NO_PROXY did not change");
    assert_eq!(ids(&p), ["Deployment/api", "Deployment/web"]);
    assert_ne!(Some(p.writes[0].marker.clone()), old.map(Marker::Hash));
    w.settle();
    assert!(w.plan().writes.is_empty());
}

#[test]
fn a_managed_object_without_our_owner_or_labels_is_applied_again() {
    let mut w = World::new(json!({}), vec![]);
    w.settle();
    if let Some(m) = w.config_map.meta.as_mut() {
        m.owner_references = None;
    }
    if let Some(m) = w.secret.meta.as_mut()
        && let Some(l) = m.labels.as_mut()
    {
        l.remove(crate::credentials::MANAGED_BY_LABEL);
    }
    let p = w.plan();
    assert!(matches!(p.config_map, Change::Apply(_)));
    assert!(matches!(p.secret, Change::Apply(_)));
    let owner = &managed_meta(&w.policy).owner_references.expect("owner")[0];
    assert_eq!(
        (
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("uid-outbound", Some(true), Some(true))
    );
}

#[test]
fn lookups_and_credential_reads_happen_only_when_they_can_matter() {
    let w = World::new(json!({}), vec![]);
    let unknown: Observed<ConfigMapData> = Observed::default();
    assert!(needs_lookup(w.slots().as_deref(), &unknown));
    assert!(
        !needs_lookup(None, &unknown),
        "credentials not read: nothing is written"
    );
    let mut bad = w.slots().expect("slots");
    bad[0].urls = Err(unavailable("x/y"));
    assert!(!needs_lookup(Some(&bad), &unknown));
    let known = observed(ConfigMapData::default(), ObjectMeta::default());
    assert!(!needs_lookup(w.slots().as_deref(), &known));
    assert!(needs_credentials(&w.policy, true, &w.cluster));
    assert!(
        !needs_credentials(&w.policy, false, &w.cluster),
        "not admitted"
    );
    let mut bad_entry = w.policy.clone();
    bad_entry.spec.no_proxy.additional = vec!["a..b".into()];
    assert!(
        !needs_credentials(&bad_entry, true, &w.cluster),
        "the entry is reported first"
    );
    let mut no_domain = w.cluster.clone();
    no_domain.overrides.cluster_domain = None;
    assert!(
        !needs_credentials(&w.policy, true, &no_domain),
        "the missing fact first"
    );
}

#[test]
fn no_credential_reaches_status_or_events() {
    let mut w = World::new(json!({"existingEnv": "Override"}), own_proxy());
    let mut reports = Vec::new();
    reports.push(w.settle().report(&[], &now()));
    w.credentials = Some(urls("http://u:Sentinel9Pw@proxy.corp.example:3128"));
    let p = w.plan();
    let failed = [(p.writes[0].id.clone(), "500 InternalError: boom".to_owned())];
    reports.push(p.report(&failed, &now()));
    reports.push(p.report(&[], &now()));
    w.workload("api").labels.clear();
    reports.push(w.plan().report(&[], &now()));
    w.credentials = Some(Err(CredentialError::InvalidProxyUrl {
        secret: "team-a/egress-proxy".into(),
        key: "httpProxy".into(),
        reason: "bad port".into(),
    }));
    reports.push(w.plan().report(&[], &now()));
    for r in reports {
        let status = serde_json::to_string(&r.status).unwrap_or_default();
        let text = format!("{:?}{status}", r.events);
        for secret in ["Sentinel9Pw", ":pw@", "own:3128"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}

// --- the rollout budget ---

fn five() -> Vec<WorkloadView> {
    ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| proxied(n))
        .collect()
}

#[test]
fn at_most_max_concurrent_workloads_are_written() {
    let w = World::new(json!({"rollout": {"maxConcurrent": 2}}), five());
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/a", "Deployment/b"]);
    let r = p.report(&[], &now());
    let pending = r.status.expect("status").workloads.expect("w").pending;
    assert_eq!(
        pending,
        [
            "Deployment/a",
            "Deployment/b",
            "Deployment/c (waiting)",
            "Deployment/d (waiting)",
            "Deployment/e (waiting)"
        ]
    );
}

#[test]
fn rolling_workloads_hold_their_slots() {
    let mut w = World::new(json!({"rollout": {"maxConcurrent": 2}}), five());
    let p = w.plan();
    for wr in &p.writes {
        let v = w.workloads.iter_mut().find(|v| v.id == wr.id).expect("v");
        v.template = written(&v.template, &wr.write);
        v.rollout = Rollout::Rolling;
    }
    assert!(w.plan().writes.is_empty(), "two rolling, no slot free");
    w.workload("a").rollout = Rollout::RolledOut;
    assert_eq!(ids(&w.plan()), ["Deployment/c"]);
}

/// One change is one Event: the next steps of a paced rollout and a workload that joins
/// the configuration are in status only. Each step's status only tells of the
/// rollout, so it may wait (`rolling`); the last one does not.
#[test]
fn a_paced_rollout_is_one_event_and_its_steps_may_wait() {
    let mut w = World::new(json!({"rollout": {"maxConcurrent": 2}}), five());
    w.settle();
    w.credentials = Some(urls("http://u:second@proxy.corp.example:3128"));
    let first = w.settle();
    let r = first.report(&[], &now());
    assert_eq!(ids(&first), ["Deployment/a", "Deployment/b"]);
    // Changed in place: one Warning, which tells the rollout too.
    assert_eq!(events(&r), [(true, "CredentialChangedInPlace".into())]);
    let message = &r.events[0].message;
    assert!(
        message.contains("; rolling 2 workload(s) to config "),
        "{message}"
    );
    assert!(r.rolling, "{:?}", ready(&r));
    let next = w.settle();
    let r = next.report(&[], &now());
    assert_eq!(ids(&next), ["Deployment/c", "Deployment/d"]);
    assert_eq!(events(&r), [], "the same change");
    assert!(r.rolling);
    let last = w.settle();
    assert_eq!(ids(&last), ["Deployment/e"]);
    let done = w.plan().report(&[], &now());
    assert!(!done.rolling, "Ready: the final status is written at once");
    assert_eq!(ready(&done).0, "True");
    w.workloads.push(proxied("f"));
    let joined = w.plan();
    assert_eq!(ids(&joined), ["Deployment/f"]);
    assert_eq!(
        events(&joined.report(&[], &now())),
        [],
        "f joins the configuration"
    );
}

#[test]
fn a_rollout_that_cannot_progress_holds_no_slot() {
    for stuck in [
        Rollout::Stalled,
        Rollout::Paused,
        Rollout::WaitingForManualRestart,
    ] {
        let mut w = World::new(json!({"rollout": {"maxConcurrent": 1}}), five());
        let p = w.plan();
        let v = w.workload("a");
        v.template = written(&v.template, &p.writes[0].write);
        v.rollout = stuck;
        let p = w.plan();
        assert_eq!(ids(&p), ["Deployment/b"], "{stuck:?}");
        let r = p.report(&[], &now());
        let pending = r.status.expect("status").workloads.expect("w").pending;
        assert_eq!(pending[0], format!("Deployment/a{}", stuck.note()));
    }
}

#[test]
fn a_write_the_cache_has_not_seen_is_not_repeated_and_holds_its_slot() {
    let mut w = World::new(json!({"rollout": {"maxConcurrent": 2}}), five());
    let p = w.plan();
    for wr in &p.writes {
        w.recent.insert(wr.id.clone(), wr.marker.clone());
    }
    let again = w.plan();
    assert!(again.writes.is_empty(), "{:?}", again.writes);
}

#[test]
fn paused_writes_nothing_but_the_finalizer_and_says_so() {
    let mut w = World::new(json!({"rollout": {"paused": true}}), vec![proxied("api")]);
    w.policy.metadata.finalizers = None;
    let p = w.plan();
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    assert!(p.writes.is_empty());
    assert!(
        p.add_finalizer,
        "the workloads may carry entries from before the pause"
    );
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("False".into(), reason::ROLLOUT_PAUSED.into()));
}

#[test]
fn on_delete_workloads_are_pending_with_a_note() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    w.settle();
    w.workload("api").rollout = Rollout::WaitingForManualRestart;
    let r = w.plan().report(&[], &now());
    assert_eq!(r.requeue, Requeue::Resync, "nothing progresses by itself");
    let s = r.status.expect("status");
    assert_eq!(
        s.workloads.expect("w").pending,
        ["Deployment/api (OnDelete: waits for its Pods to be deleted)"]
    );
}

// --- what blocks a policy (the workloads keep their last good configuration) ---

fn assert_blocked(w: &World, reason: &str, message: &str) {
    let p = w.plan();
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    assert!(p.writes.is_empty(), "{:?}", p.writes);
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("False".into(), reason.into()));
    let s = r.status.expect("status");
    let stalled = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .expect("S");
    assert_eq!(stalled.status, "True");
    assert!(stalled.message.contains(message), "{}", stalled.message);
    assert_eq!(r.requeue, Requeue::Resync);
}

fn settled(spec: Value) -> World {
    let mut w = World::new(spec, vec![proxied("api")]);
    w.settle();
    w.settle();
    w
}

#[test]
fn an_invalid_selector_blocks() {
    let mut w = settled(json!({}));
    w.policy.spec.workload_selector = serde_json::from_value(json!(
        {"matchExpressions": [{"key": "egress", "operator": "Bogus", "values": ["x"]}]}
    ))
    .expect("selector");
    assert_blocked(&w, reason::INVALID_SELECTOR, "spec.workloadSelector");
}

#[test]
fn an_invalid_entry_blocks_with_its_index() {
    let mut w = settled(json!({}));
    w.policy.spec.no_proxy.additional = vec![".corp.example".into(), "a..b".into()];
    assert_blocked(
        &w,
        reason::INVALID_NO_PROXY_ENTRY,
        "spec.noProxy.additional[1]",
    );
}

#[test]
fn a_missing_fact_blocks_and_is_named() {
    let mut w = settled(json!({}));
    w.cluster.overrides.cluster_domain = None;
    assert_blocked(&w, reason::DISCOVERY_INCOMPLETE, "clusterDomain");
}

fn unavailable(secret: &str) -> CredentialError {
    CredentialError::NotAvailable {
        secret: secret.into(),
        namespace: NS.into(),
    }
}

#[test]
fn a_malformed_credential_keeps_the_last_good_configuration() {
    let secret = "team-a/egress-proxy".to_owned();
    let cases = [
        (
            CredentialError::InvalidProxyUrl {
                secret: secret.clone(),
                key: "httpProxy".into(),
                reason: "bad port".into(),
            },
            reason::INVALID_PROXY_URL,
        ),
        (
            CredentialError::MissingKey {
                secret: secret.clone(),
                key: "httpsProxy".into(),
            },
            reason::SECRET_INVALID,
        ),
    ];
    for (err, reason) in cases {
        let mut w = settled(json!({}));
        w.credentials = Some(Err(err));
        assert_blocked(&w, reason, &secret);
    }
}

#[test]
fn a_spec_naming_an_unavailable_secret_keeps_the_credential_in_use() {
    // The team points the slot at a Secret it may not use: its own mistake.
    let mut w = settled(json!({}));
    w.policy.spec.proxy.credentials[0].secret_ref.name = "typo".into();
    w.credentials = Some(Err(unavailable("team-a/typo")));
    assert_blocked(&w, reason::SECRET_NOT_AVAILABLE, "team-a/typo");
}

#[test]
fn a_withdrawn_source_takes_the_credential_away_at_once() {
    let mut w = settled(json!({}));
    w.credentials = Some(Err(unavailable("team-a/egress-proxy")));
    let p = w.plan();
    let Change::Apply(stripped) = &p.secret else {
        panic!("the credential leaves the managed Secret: {:?}", p.secret)
    };
    let keys: Vec<&str> = stripped.0.keys().map(String::as_str).collect();
    assert_eq!(keys, ["hash-key"]);
    assert_eq!(p.config_map, Change::Keep);
    assert_eq!(ids(&p), ["Deployment/api"]);
    assert!(p.writes[0].is_release());
    assert!(!p.remove_finalizer && !p.add_finalizer);
    let r = p.report(&[], &now());
    assert_eq!(
        ready(&r),
        ("False".into(), reason::SECRET_NOT_AVAILABLE.into())
    );
    let s = r.status.clone().expect("status");
    assert!(
        s.conditions[0]
            .message
            .contains("the workloads were released")
    );
    assert_eq!(s.active_credential, None);
    assert_eq!(
        events(&r),
        [
            (false, "ConfigRemoved".into()),
            (true, reason::SECRET_NOT_AVAILABLE.into())
        ]
    );
    // Settled: nothing more to do, and nothing flips back.
    w.settle();
    let p = w.plan();
    assert!(p.writes.is_empty() && p.secret == Change::Keep);
    assert_eq!(p.report(&[], &now()).status, None);
    // The grant comes back: injected again with the same hash key.
    let before = w.secret.data.clone().expect("data").0["hash-key"].clone();
    w.credentials = Some(urls(URL));
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    let Change::Apply(data) = &p.secret else {
        panic!("credential back")
    };
    assert_eq!(data.0["hash-key"], before);
    assert_eq!(
        data.0["slot.main.source"].0,
        b"team-a/egress-proxy".to_vec()
    );
}

#[test]
fn a_foreign_object_with_the_managed_name_is_never_taken_over() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    w.secret.meta = Some(ObjectMeta {
        name: Some(OWN.into()),
        ..Default::default()
    });
    assert_blocked(
        &w,
        reason::MANAGED_OBJECT_CONFLICT,
        "Secret team-a/egress-proxy-outbound",
    );
}

// --- Keep and Override ---

fn own_proxy() -> Vec<WorkloadView> {
    vec![deployment(
        "api",
        json!({"egress": "proxied"}),
        json!([{"name": "app", "image": "app:1",
                "env": [{"name": "HTTP_PROXY", "value": "http://own:3128"}]}]),
    )]
}

#[test]
fn keep_leaves_the_containers_own_pair_and_reports_it() {
    let w = World::new(json!({}), own_proxy());
    let p = w.plan();
    let Write::Apply(body) = &p.writes[0].write else {
        panic!("apply")
    };
    let env = body["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .iter()
        .filter_map(|e| e["name"].as_str().map(str::to_owned))
        .collect::<Vec<_>>();
    assert_eq!(env, ["HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"]);
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("False".into(), reason::ENV_CONFLICT.into()));
}

fn restores(p: &Plan, value: &str) -> bool {
    let Write::Patch(body) = &p.writes[0].write else {
        return false;
    };
    let env = &body["spec"]["template"]["spec"]["containers"][0]["env"];
    env.as_array()
        .into_iter()
        .flatten()
        .any(|e| e["name"] == "HTTP_PROXY" && e["value"] == value)
}

const ORIGINAL: &str = "original.Deployment.team-a.api.app.HTTP_PROXY";

fn secret_keys(p: &Plan, w: &World) -> Vec<String> {
    let data = match &p.secret {
        Change::Apply(d) | Change::Create(d) => d.clone(),
        _ => w.secret.data.clone().unwrap_or_default(),
    };
    data.0.keys().cloned().collect()
}

#[test]
fn override_replaces_and_remembers_the_original_then_restores_it() {
    let mut w = World::new(json!({"existingEnv": "Override"}), own_proxy());
    let p = w.plan();
    assert!(matches!(p.writes[0].write, Write::Patch(_)));
    assert!(secret_keys(&p, &w).contains(&ORIGINAL.to_owned()));
    w.settle();
    // Deselected: the original comes back...
    w.workload("api").labels.clear();
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    assert!(restores(&p, "http://own:3128"));
    assert_eq!(
        p.secret,
        Change::Keep,
        "kept until the cache shows the release"
    );
    // ...and is forgotten once the cache shows the release.
    w.settle();
    assert_eq!(env_names(&w.workloads[0], "app"), ["HTTP_PROXY"]);
    let p = w.plan();
    assert!(p.writes.is_empty());
    assert!(!secret_keys(&p, &w).contains(&ORIGINAL.to_owned()));
    assert!(matches!(p.secret, Change::Apply(_)));
}

#[test]
fn a_failed_or_unseen_release_keeps_the_originals_and_restores_again() {
    let mut w = World::new(json!({"existingEnv": "Override"}), own_proxy());
    w.settle();
    w.workload("api").labels.clear();
    let p = w.plan();
    let failed = [(p.writes[0].id.clone(), "422 Invalid: no".to_owned())];
    let r = p.report(&failed, &now());
    assert_eq!(ready(&r).1, reason::WORKLOAD_UPDATE_FAILED);
    assert!(events(&r).iter().all(|(_, r)| r != "ConfigRemoved"));
    // The retry, or a cache that still shows our entries after the memory of the write is
    // gone: the same restore, never a delete of the container's own value.
    let again = w.plan();
    assert!(restores(&again, "http://own:3128"));
    assert!(secret_keys(&again, &w).contains(&ORIGINAL.to_owned()));
}

// --- selection, release, overlap, handover ---

#[test]
fn a_deselected_workload_is_released_once() {
    let mut w = settled(json!({}));
    w.workload("api").labels.clear();
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    assert!(p.writes[0].is_release());
    let r = p.report(&[], &now());
    assert!(events(&r).contains(&(false, "ConfigRemoved".into())));
    assert_eq!(ready(&r), ("True".into(), reason::NO_WORKLOADS.into()));
    w.recent.insert(p.writes[0].id.clone(), Marker::Released);
    assert!(
        w.plan().writes.is_empty(),
        "the cache lags: no second release"
    );
    w.recent.clear();
    w.settle();
    assert_eq!(env_names(&w.workloads[0], "app"), ["LOG"]);
    assert_eq!(hash_of(&w.workloads[0]), None);
}

#[test]
fn dropping_a_kind_releases_those_workloads() {
    let ds = workload(
        WorkloadKind::DaemonSet,
        "agent",
        json!({"egress": "proxied"}),
        json!([{"name": "agent", "image": "a:1"}]),
    );
    let mut w = World::new(json!({}), vec![proxied("api"), ds]);
    w.settle();
    w.policy.spec.workload_kinds = vec![WorkloadKind::Deployment];
    let p = w.plan();
    assert_eq!(ids(&p), ["DaemonSet/agent"]);
    assert!(p.writes[0].is_release());
}

#[test]
fn an_empty_selector_selects_nothing() {
    let w = World::new(
        json!({"workloadSelector": {"matchLabels": null}}),
        vec![proxied("api")],
    );
    let p = w.plan();
    assert!(p.writes.is_empty());
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("True".into(), reason::NO_WORKLOADS.into()));
}

#[test]
fn an_older_policy_wins_an_overlap() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    w.others = vec![policy("first", "2026-01-01T00:00:00Z", json!({}))];
    let p = w.plan();
    assert!(p.writes.is_empty());
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("False".into(), reason::POLICY_OVERLAP.into()));
    let s = r.status.expect("status");
    let msg = &s.conditions[0].message;
    assert!(
        msg.contains("Deployment/api (managed by EgressProxyPolicy first)"),
        "{msg}"
    );
}

#[test]
fn a_newer_policy_releases_what_an_older_one_now_manages() {
    let mut w = settled(json!({}));
    w.others = vec![policy("first", "2026-01-01T00:00:00Z", json!({}))];
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    assert!(p.writes[0].is_release());
}

#[test]
fn entries_the_operator_does_not_own_are_never_released() {
    // The same overlap, but the workload's managedFields say the operator owns none of the
    // entries that name this policy's managed objects: the team wrote them itself.
    let mut w = settled(json!({}));
    w.others = vec![policy("first", "2026-01-01T00:00:00Z", json!({}))];
    for v in &mut w.workloads {
        v.owned = Some(Owned::default());
    }
    assert_eq!(ids(&w.plan()), Vec::<String>::new());
    w.others.clear();
    w.policy.spec.workload_selector =
        serde_json::from_value(json!({"matchLabels": {"egress": "nothing"}})).expect("selector");
    assert_eq!(
        ids(&w.plan()),
        Vec::<String>::new(),
        "not left behind either"
    );
}

#[test]
fn a_workload_still_carrying_another_policys_entries_waits_for_its_release() {
    // `first` injected `api`, then stopped selecting it; `outbound` is the only one now.
    let mut first = World::new(json!({}), vec![proxied("api")]);
    first.policy = policy("first", "2026-01-01T00:00:00Z", json!({}));
    first.settle();
    let mut w = World::new(json!({}), first.workloads.clone());
    let mut gone = first.policy.clone();
    gone.spec.workload_selector =
        serde_json::from_value(json!({"matchLabels": {"x": "y"}})).expect("selector");
    w.others = vec![gone];
    let p = w.plan();
    assert!(p.writes.is_empty(), "no handover before the release");
    let r = p.report(&[], &now());
    let s = r.status.expect("status");
    assert_eq!(
        s.workloads.expect("w").pending,
        ["Deployment/api (waiting for EgressProxyPolicy first to release it)"]
    );
}

#[test]
fn a_hash_annotation_another_policy_accounts_for_is_left_alone() {
    let mut w = settled(json!({}));
    w.workload("api").labels.clear();
    // A policy that selects by another label owns the workload now.
    let mut other = policy("other", "2026-01-03T00:00:00Z", json!({}));
    other.spec.workload_selector =
        serde_json::from_value(json!({"matchLabels": {"app": "api"}})).expect("s");
    w.others = vec![other];
    w.workload("api").labels = BTreeMap::from([("app".into(), "api".into())]);
    let own = OWN.to_owned();
    // Entries of ours are still released...
    assert_eq!(ids(&w.plan()), ["Deployment/api"]);
    // ...but once they are gone, the annotation alone is the other policy's business.
    w.settle();
    let v = w.workload("api");
    assert!(!workloads::has_entries(&v.template, &own));
    v.template = written(
        &v.template,
        &Write::Apply(json!({"spec": {"template": {
            "metadata": {"annotations": {CONFIG_HASH: "v1-other"}}, "spec": {}}}})),
    );
    assert!(w.plan().writes.is_empty());
}

// --- suspension, opt-in, deletion ---

#[test]
fn suspended_plans_nothing_but_its_status() {
    let mut w = settled(json!({}));
    w.policy.spec.suspend = true;
    w.workload("api").labels.clear();
    let p = w.plan();
    assert!(p.writes.is_empty() && !p.remove_finalizer);
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("False".into(), reason::SUSPENDED.into()));
    assert_eq!(r.requeue, Requeue::AwaitChange);
}

#[test]
fn a_namespace_that_is_not_admitted_is_cleaned_up() {
    let mut w = settled(json!({}));
    w.admitted = false;
    w.credentials = None;
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    assert_eq!(
        (&p.secret, &p.config_map),
        (&Change::Delete, &Change::Delete)
    );
    assert!(p.remove_finalizer);
    let r = p.report(&[], &now());
    assert_eq!(
        ready(&r),
        ("False".into(), reason::NAMESPACE_NOT_ENABLED.into())
    );
    let s = r.status.clone().expect("status");
    assert!(
        s.conditions[0].message.starts_with(
            "namespace team-a is not admitted by the operator's namespace selector \"egressproxy.io/enabled=true\"; nothing is injected (restored Deployment/api)"
        ),
        "{}",
        s.conditions[0].message
    );
    assert_eq!(
        events(&r),
        [
            (false, "ConfigRemoved".into()),
            (true, reason::NAMESPACE_NOT_ENABLED.into())
        ]
    );
    assert_eq!(
        p.completion(&[]),
        Completion {
            delete_secret: true,
            delete_config_map: true,
            remove_finalizer: true
        }
    );
}

#[test]
fn deletion_releases_everything_then_removes_the_finalizer() {
    let mut w = settled(json!({}));
    w.policy.metadata.deletion_timestamp = Some(now());
    w.credentials = None;
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    let r = p.report(&[], &now());
    assert_eq!(r.status, None, "a deleted policy gets no status");
    assert_eq!(events(&r), [(false, "ConfigRemoved".into())]);
    assert!(p.completion(&[]).remove_finalizer);
    // A failed release keeps the managed objects (and the originals in them) and the
    // finalizer, so the retry can finish the job.
    let failed = [(p.writes[0].id.clone(), "500".to_owned())];
    assert_eq!(
        p.completion(&failed),
        Completion {
            delete_secret: false,
            delete_config_map: false,
            remove_finalizer: false
        }
    );
}

#[test]
fn deletion_never_deletes_another_policys_object() {
    let mut w = settled(json!({}));
    w.policy.metadata.deletion_timestamp = Some(now());
    if let Some(m) = w.secret.meta.as_mut() {
        m.labels = Some(BTreeMap::from([(
            crate::credentials::POLICY_LABEL.into(),
            "someone-else".into(),
        )]));
    }
    let p = w.plan();
    assert_eq!(p.secret, Change::Keep);
    assert_eq!(p.config_map, Change::Delete);
}

// --- reporting ---

#[test]
fn a_failed_write_is_reported_and_not_announced_as_applied() {
    let w = World::new(json!({}), vec![proxied("api"), proxied("web")]);
    let p = w.plan();
    let failed = [(p.writes[0].id.clone(), "403 Forbidden: no".to_owned())];
    let r = p.report(&failed, &now());
    assert_eq!(
        ready(&r),
        ("False".into(), reason::WORKLOAD_UPDATE_FAILED.into())
    );
    let s = r.status.expect("status");
    assert!(
        s.conditions[0]
            .message
            .contains("Deployment/api: 403 Forbidden: no")
    );
    let applied = r
        .events
        .iter()
        .find(|e| e.reason == "ConfigApplied")
        .expect("e");
    assert!(
        applied.message.ends_with(": Deployment/web"),
        "{}",
        applied.message
    );
}

#[test]
fn transition_times_move_only_when_a_condition_flips() {
    let mut w = settled(json!({}));
    let first = w.previous.conditions[0].last_transition_time.clone();
    w.credentials = Some(urls("http://u:new@proxy.corp.example:3128"));
    let r = w
        .plan()
        .report(&[], &Time("2026-04-01T00:00:00Z".parse().expect("t")));
    let s = r.status.expect("status");
    let ready = &s.conditions[0];
    assert_eq!(ready.status, "False");
    assert_ne!(ready.last_transition_time, first);
    let stalled = s
        .conditions
        .iter()
        .find(|c| c.type_ == "Stalled")
        .expect("s");
    assert_eq!(
        stalled.last_transition_time,
        w.previous.conditions[2].last_transition_time
    );
}

#[test]
fn pending_lists_are_bounded() {
    let many: Vec<WorkloadView> = (0..30).map(|n| proxied(&format!("w{n:02}"))).collect();
    let w = World::new(json!({"rollout": {"maxConcurrent": 1}}), many);
    let r = w.plan().report(&[], &now());
    let s = r.status.expect("status");
    assert_eq!(s.workloads.as_ref().expect("w").pending.len(), 20);
    assert!(
        s.conditions[0].message.ends_with("and 10 more"),
        "{}",
        s.conditions[0].message
    );
}

fn node(i: u32, subnet: &str) -> NodeInputs {
    NodeInputs {
        name: format!("n-{subnet}-{i}"),
        pod_cidrs: vec![format!("10.42.{}.0/24", i + 1)],
        internal_ips: vec![format!("{subnet}.{i}")],
        provider_id: None,
        ..Default::default()
    }
}

/// With a cluster-wide pod network, 100 nodes joining the known node subnet and leaving it
/// again write nothing but status; a node in a new subnet rolls each workload once, and its
/// leaving rolls nothing.
#[test]
fn node_churn_in_known_subnets_rolls_nothing() {
    let mut w = settled(json!({"noProxy": {"dialect": "go"}}));
    w.cluster.overrides.pod_cidrs = vec!["10.42.0.0/16".into()];
    w.settle();
    let before = w.config_map.data.clone();
    let one = w.cluster.nodes.clone();
    w.cluster
        .nodes
        .extend((11..111).map(|i| node(i, "192.168.1")));
    let p = w.settle();
    assert!(p.writes.is_empty(), "{:?}", ids(&p));
    assert_eq!(p.config_map, Change::Keep);
    let facts = w.previous.discovered.clone().expect("discovered");
    assert_eq!(facts.node_addresses.expect("addresses").values.len(), 101);
    assert_eq!(
        facts.node_subnets.expect("subnets").values,
        ["192.168.1.0/24"]
    );
    w.cluster.nodes = one.clone();
    assert!(w.settle().writes.is_empty(), "scale-down");
    // A new subnet: one roll, however many nodes join it.
    w.cluster
        .nodes
        .extend((1..=20).map(|i| node(i, "192.168.7")));
    assert_eq!(ids(&w.settle()), ["Deployment/api"]);
    w.cluster
        .nodes
        .extend((21..=40).map(|i| node(i, "192.168.7")));
    assert!(w.settle().writes.is_empty(), "the rest of the burst");
    w.cluster.nodes = one;
    let p = w.settle();
    assert!(
        p.writes.is_empty() && p.config_map == Change::Keep,
        "its nodes left"
    );
    assert_ne!(w.config_map.data, before, "192.168.7.0/24 is kept");
}

#[test]
fn a_node_joining_re_renders_once_and_rolls_every_workload() {
    let mut w = settled(json!({"noProxy": {"dialect": "go"}}));
    w.cluster.nodes.push(NodeInputs {
        name: "n2".into(),
        pod_cidrs: vec!["10.42.1.0/24".into()],
        internal_ips: vec!["192.168.1.11".into()],
        provider_id: None,
        ..Default::default()
    });
    let p = w.plan();
    let Change::Apply(cm) = &p.config_map else {
        panic!("NO_PROXY changes: {:?}", p.config_map)
    };
    // Both nodes' pod CIDRs, aggregated (no cluster-wide pod network is known); the node
    // subnet 192.168.1.0/24 covers both addresses.
    assert_eq!(
        cm.data["NO_PROXY"],
        "cluster.corp,cluster.corp.,localhost,localhost.,svc,svc.,10.42.0.0/23,10.43.0.0/16,127.0.0.1,192.168.1.0/24,::1"
    );
    assert_eq!(ids(&p), ["Deployment/api"]);
    w.settle();
    assert!(w.plan().writes.is_empty(), "once");
}

#[test]
fn deleting_an_override_policy_restores_the_containers_own_values() {
    let mut w = World::new(json!({"existingEnv": "Override"}), own_proxy());
    w.settle();
    w.policy.metadata.deletion_timestamp = Some(now());
    w.credentials = None;
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api"]);
    assert!(restores(&p, "http://own:3128"));
    assert_eq!(p.secret, Change::Delete);
    w.settle();
    assert_eq!(env_names(&w.workloads[0], "app"), ["HTTP_PROXY"]);
    assert_eq!(hash_of(&w.workloads[0]), None);
}

// --- what a process can start with ---

/// `n` distinct host entries of 19 bytes each (with the comma, 20 in NO_PROXY).
fn hosts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("h{i:06}.corp.example")).collect()
}

#[test]
fn a_no_proxy_a_process_cannot_start_with_blocks_and_writes_nothing() {
    let mut w = settled(json!({"noProxy": {"dialect": "go"}}));
    w.policy.spec.no_proxy.additional = hosts(7000);
    assert_blocked(&w, reason::ENVIRONMENT_TOO_LARGE, "over 131072 bytes");
}

#[test]
fn the_six_variables_together_stay_within_the_budget() {
    let mut w = settled(json!({"noProxy": {"dialect": "go"}}));
    // NO_PROXY alone fits one environment string, but twice with two long proxy URLs not.
    // (Each name is written twice, also with a trailing dot.)
    w.policy.spec.no_proxy.additional = hosts(3040);
    let long = format!("http://u:{}@proxy.corp.example:3128", "p".repeat(2000));
    w.credentials = Some(urls(&long));
    assert_blocked(&w, reason::ENVIRONMENT_TOO_LARGE, "262144 bytes");
    w.credentials = Some(urls(URL));
    assert!(
        matches!(w.plan().config_map, Change::Apply(_)),
        "fits with a short URL"
    );
}

#[test]
fn everything_direct_is_written_where_the_dialect_can_say_it_and_refused_elsewhere() {
    let mut w = settled(json!({}));
    w.policy.spec.no_proxy.additional = vec![".corp.example".into(), "*".into()];
    assert_blocked(
        &w,
        reason::INVALID_NO_PROXY_ENTRY,
        "additional[1] \"*\" sends every host direct, and dialect portable cannot say so",
    );
    w.policy.spec.no_proxy.dialect = crate::noproxy::Dialect::Go;
    let p = w.plan();
    assert_eq!(p.config_map, Change::Apply(no_proxy_data("*")));
}

#[test]
fn a_container_name_no_workload_has_is_reported_and_rolls_nothing() {
    let sidecar = deployment(
        "web",
        json!({"egress": "proxied"}),
        json!([{"name": "app", "image": "app:1"}, {"name": "proxy", "image": "p:1"}]),
    );
    let w = World::new(
        json!({"containers": ["ap", "proxy"]}),
        vec![proxied("api"), sidecar],
    );
    let p = w.plan();
    // Only the workload that has a named container is written; no annotation-only write.
    assert_eq!(ids(&p), ["Deployment/web"]);
    let r = p.report(&[], &now());
    assert_eq!(
        ready(&r),
        ("False".into(), reason::CONTAINER_NOT_FOUND.into())
    );
    let s = r.status.expect("status");
    assert!(
        s.conditions[0].message.ends_with(": ap"),
        "{}",
        s.conditions[0].message
    );
}

#[test]
fn a_namespace_that_refuses_the_operator_is_reported_and_nothing_is_written() {
    let mut w = settled(json!({}));
    w.denied = Some("listing failed: 403 Forbidden: secrets is forbidden".into());
    w.credentials = None;
    let p = w.plan();
    assert_eq!(ids(&p), Vec::<String>::new());
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    let r = p.report(&[], &now());
    assert_eq!(
        ready(&r),
        ("False".into(), reason::NAMESPACE_NOT_AUTHORIZED.into())
    );
    let message = &r.status.expect("status").conditions[0].message;
    assert!(
        message.contains("namespace team-a (listing failed: 403")
            && message.contains("egress-proxy-operator-tenant"),
        "{message}"
    );
}

#[test]
fn a_deleted_policy_whose_namespace_refuses_the_operator_does_not_hang() {
    let mut w = settled(json!({}));
    w.policy.metadata.deletion_timestamp = Some(now());
    w.denied = Some("403".into());
    w.credentials = None;
    let p = w.plan();
    assert_eq!(ids(&p), Vec::<String>::new());
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    assert!(p.completion(&[]).remove_finalizer);
}

#[test]
fn deletion_never_deletes_an_object_this_policy_does_not_own() {
    let mut w = settled(json!({}));
    w.policy.metadata.deletion_timestamp = Some(now());
    // Labelled for this policy, but owned by another UID (an earlier policy of that name,
    // or a hand-made copy): not ours to delete.
    if let Some(m) = w.secret.meta.as_mut() {
        for r in m.owner_references.iter_mut().flatten() {
            r.uid = "uid-of-someone-else".into();
        }
    }
    if let Some(m) = w.config_map.meta.as_mut() {
        m.owner_references = None;
    }
    let p = w.plan();
    assert_eq!((&p.secret, &p.config_map), (&Change::Keep, &Change::Keep));
    assert!(p.remove_finalizer);
}

// --- rotation ---

fn slot_of_workload(v: &WorkloadView) -> Option<String> {
    workloads::slot_of(&v.template, OWN)
}

fn rotation_of(r: &Report) -> crate::api::RotationStatus {
    r.status
        .as_ref()
        .and_then(|s| s.rotation.clone())
        .expect("rotation")
}

#[test]
fn an_auto_rotation_switches_within_the_budget_and_keeps_the_old_slot_until_no_pod_uses_it() {
    let spec = json!({
        "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "egress-proxy"}},
                                  {"name": "green", "secretRef": {"name": "egress-proxy-green"}}],
                  "active": "main", "rotation": "Auto"},
        "rollout": {"maxConcurrent": 1},
    });
    let mut w = World::new(spec, vec![proxied("a"), proxied("b")]);
    w.second = Some(urls("http://u:green-1@proxy.corp.example:3128"));
    for _ in 0..3 {
        w.settle();
    }
    assert!(
        w.workloads
            .iter()
            .all(|v| slot_of_workload(v).as_deref() == Some("main"))
    );
    assert_eq!(w.previous.rotation, None);
    // Rotation tooling writes the standby slot: one workload at a time switches to it.
    w.second = Some(urls("http://u:green-2@proxy.corp.example:3128"));
    let p = w.settle();
    assert_eq!(ids(&p), ["Deployment/a"]);
    let Change::Apply(data) = &p.secret else {
        panic!("both slots in the managed Secret: {:?}", p.secret)
    };
    assert!(
        data.0.contains_key("slot.main.HTTP_PROXY") && data.0.contains_key("slot.green.HTTP_PROXY")
    );
    let r = p.report(&[], &now());
    let rot = rotation_of(&r);
    assert_eq!(
        (rot.phase, rot.from.as_str(), rot.to.as_str()),
        (RotationPhase::Rolling, "main", "green")
    );
    assert!(events(&r).contains(&(false, "RotationStarted".into())));
    assert_eq!(
        slot_of_workload(&w.workloads[1]).as_deref(),
        Some("main"),
        "b waits"
    );
    let p = w.settle();
    assert_eq!(ids(&p), ["Deployment/b"]);
    // Every template is on green: the Pods decide.
    let p = w.plan();
    assert!(p.needs_pods && p.writes.is_empty());
    w.pods = Some(BTreeMap::from([("main".into(), 1), ("green".into(), 2)]));
    let p = w.settle();
    assert_eq!(
        w.previous.rotation.as_ref().map(|r| r.phase),
        Some(RotationPhase::Draining)
    );
    assert_eq!(p.secret, Change::Keep, "main stays while a Pod runs it");
    assert_eq!(
        p.report(&[], &now()).requeue,
        Requeue::Soon,
        "Pods stopping wake nothing: look again soon"
    );
    w.pods = Some(BTreeMap::from([("green".into(), 2)]));
    let p = w.plan();
    let r = p.report(&[], &now());
    let rot = rotation_of(&r);
    assert_eq!(
        (rot.phase, rot.revocable.clone()),
        (RotationPhase::Complete, vec!["main".to_string()])
    );
    assert!(events(&r).contains(&(false, "CredentialRevocable".into())));
    let Change::Apply(data) = &p.secret else {
        panic!("main leaves the managed Secret: {:?}", p.secret)
    };
    assert!(data.0.keys().all(|k| !k.starts_with("slot.main.")));
    w.settle();
    w.pods = None;
    let p = w.plan();
    assert!(!p.needs_pods && p.writes.is_empty() && p.secret == Change::Keep);
    assert_eq!(p.report(&[], &now()).status, None, "settled");
}

#[test]
fn overwriting_the_slot_in_use_warns_once() {
    let mut w = World::new(json!({}), vec![proxied("api")]);
    for _ in 0..2 {
        w.settle();
    }
    w.credentials = Some(urls("http://u:overwritten@proxy.corp.example:3128"));
    let p = w.settle();
    let r = p.report(&[], &now());
    assert!(
        events(&r).contains(&(true, "CredentialChangedInPlace".into())),
        "{:?}",
        events(&r)
    );
    assert_eq!(
        ids(&p),
        ["Deployment/api"],
        "it still rolls, as before slots"
    );
    let r = w.plan().report(&[], &now());
    assert!(
        !events(&r).iter().any(|e| e.1 == "CredentialChangedInPlace"),
        "once"
    );
}

fn two_slots(extra: Value) -> Value {
    let mut spec = json!({
        "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "egress-proxy"}},
                                  {"name": "green", "secretRef": {"name": "egress-proxy-green"}}],
                  "active": "main", "rotation": "Auto"},
    });
    merge(&mut spec, extra);
    spec
}

#[test]
fn a_recreated_managed_secret_starts_no_rotation() {
    let mut w = World::new(two_slots(json!({})), vec![proxied("api")]);
    w.second = Some(urls("http://u:green-1@proxy.corp.example:3128"));
    for _ in 0..3 {
        w.settle();
    }
    // The managed Secret (and its hash key) is gone: every fingerprint would differ.
    w.secret = Observed::default();
    w.new_key = vec![42; 32];
    let p = w.plan();
    let r = p.report(&[], &now());
    assert!(
        r.status.as_ref().is_none_or(|s| s.rotation.is_none()),
        "{:?}",
        r.status
    );
    assert!(
        !events(&r)
            .iter()
            .any(|e| e.1.starts_with("Rotation") || e.1 == "CredentialChangedInPlace")
    );
    let switched = p.writes.iter().any(|w| match &w.write {
        Write::Apply(b) | Write::Patch(b) => b.to_string().contains("slot.green."),
        Write::None => false,
    });
    assert!(!switched, "no workload moves to the standby slot");
}

#[test]
fn a_workload_without_the_named_containers_does_not_hold_a_rotation() {
    let extra = json!({"containers": ["app"]});
    let other = deployment(
        "z",
        json!({"egress": "proxied"}),
        json!([{"name": "db", "image": "db:1"}]),
    );
    let mut w = World::new(two_slots(extra), vec![proxied("api"), other]);
    w.second = Some(urls("http://u:green-1@proxy.corp.example:3128"));
    for _ in 0..3 {
        w.settle();
    }
    w.second = Some(urls("http://u:green-2@proxy.corp.example:3128"));
    for _ in 0..3 {
        w.settle();
    }
    w.pods = Some(BTreeMap::from([("green".into(), 1)]));
    w.settle();
    let rot = w.previous.rotation.clone().expect("rotation");
    assert_eq!(
        (rot.phase, rot.workloads.total),
        (RotationPhase::Complete, 1),
        "{rot:?}"
    );
}

#[test]
fn switching_back_from_a_blocked_slot_reconciles() {
    let spec = json!({
        "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "egress-proxy"}},
                                  {"name": "b", "secretRef": {"name": "not-granted", "namespace": "vault"}}],
                  "active": "main"},
    });
    let mut w = World::new(spec, vec![proxied("api")]);
    w.second = Some(Err(unavailable("vault/not-granted")));
    for _ in 0..2 {
        w.settle();
    }
    w.policy.spec.proxy.active = "b".into();
    w.policy.metadata.generation = Some(2);
    let r = w.settle().report(&[], &now());
    assert_eq!(ready(&r).1, reason::SECRET_NOT_AVAILABLE);
    w.policy.spec.proxy.active = "main".into();
    w.policy.metadata.generation = Some(3);
    let p = w.settle();
    let r = p.report(&[], &now());
    assert_eq!(
        ready(&r).1,
        reason::RECONCILED,
        "{:?}",
        r.status.as_ref().map(|s| &s.conditions)
    );
}

mod verification {
    use k8s_openapi::api::batch::v1::Job;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;
    use crate::api::{EndpointCheck, VerificationStatus};
    use verify::Wanted;

    const EXTERNAL: &str = "https://status.example.com/";

    fn spec(extra: Value) -> Value {
        let mut s =
            json!({"verification": {"endpoints": [{"url": EXTERNAL, "expect": "Proxied"}]}});
        merge(&mut s, extra);
        s
    }

    fn finished(w: &Wanted, passed: bool) -> ProbeRun {
        let check = |(url, expect): &(String, crate::api::ExpectedPath), ok: bool| EndpointCheck {
            url: url.clone(),
            expect: crate::probe::expect_name(*expect).into(),
            got: if ok { "Proxied" } else { "Failed" }.into(),
            ok,
            status_code: Some(if ok { 200 } else { 407 }),
            via_proxy: true,
            dns: Vec::new(),
            latency_ms: Some(3),
            error: (!ok).then(|| "the proxy rejected the credentials (407)".into()),
        };
        let endpoints: Vec<EndpointCheck> = w
            .endpoints
            .iter()
            .enumerate()
            .map(|(n, e)| check(e, passed || n == 0))
            .collect();
        ProbeRun::Finished(Box::new(VerificationStatus {
            job: w.job_name.clone(),
            key: w.key.clone(),
            time: Some(now()),
            slot: w.slot.clone(),
            config_hash: w.hash.clone(),
            passed,
            message: "m".into(),
            pod: Some("p".into()),
            node: Some("n1".into()),
            image: Some(PROBE_IMAGE.into()),
            endpoints,
        }))
    }

    /// One reconcile as the executor runs it: when the plan asks about the probe run, look
    /// it up (`run` gives what the cluster shows) and plan again; then settle.
    fn reconcile(w: &mut World, run: impl Fn(&Wanted) -> ProbeRun) -> Plan {
        w.probe = None;
        if let Some(wanted) = w.plan().needs_probe {
            w.probe = Some(run(&wanted));
        }
        let p = w.settle();
        w.probe = None;
        p
    }

    fn condition(r: &Report, type_: &str) -> (String, String, String) {
        let s = r.status.as_ref().expect("status");
        let c = s.conditions.iter().find(|c| c.type_ == type_).expect(type_);
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    fn job_env(job: &Job) -> Vec<(String, String)> {
        let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        pod.containers[0]
            .env
            .iter()
            .flatten()
            .map(|e| {
                let from = e
                    .value_from
                    .as_ref()
                    .map(|f| serde_json::to_string(f).unwrap());
                (e.name.clone(), e.value.clone().or(from).unwrap_or_default())
            })
            .collect()
    }

    #[test]
    fn nothing_is_written_to_workloads_until_the_probe_passes() {
        let mut w = World::new(spec(json!({})), vec![proxied("api")]);
        let first = w.plan();
        let wanted = first.needs_probe.clone().expect("the run is looked up");
        assert!(
            wanted.job_name.starts_with("egress-proxy-verify-"),
            "{}",
            wanted.job_name
        );
        assert_eq!(
            wanted
                .endpoints
                .iter()
                .map(|(u, _)| u.as_str())
                .collect::<Vec<_>>(),
            ["https://kubernetes.default.svc.cluster.corp/", EXTERNAL],
            "the Kubernetes Service first, by its discovered domain"
        );
        assert!(first.writes.is_empty() && first.create_probe.is_none());

        w.probe = Some(ProbeRun::Missing);
        let p = w.plan();
        let job = p.create_probe.clone().expect("the Job is created");
        assert!(p.writes.is_empty(), "{:?}", ids(&p));
        assert!(
            matches!(p.config_map, Change::Create(_)),
            "NO_PROXY is written for later"
        );
        let r = p.report(&[], &now());
        assert_eq!(
            ready(&r),
            ("False".into(), reason::VERIFICATION_PENDING.into())
        );
        assert_eq!(condition(&r, "Verified").1, reason::VERIFICATION_PENDING);
        assert_eq!(
            r.requeue,
            Requeue::Soon,
            "the running probe is looked at again soon"
        );

        let env = job_env(&job);
        let text = serde_json::to_string(&job).unwrap();
        assert!(!text.contains("u:pw"), "no credential in the Job: {text}");
        assert_eq!(
            env.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            [
                "HTTP_PROXY",
                "http_proxy",
                "HTTPS_PROXY",
                "https_proxy",
                "NO_PROXY",
                "no_proxy",
                verify::CA_ENV
            ]
        );
        assert!(
            env[0].1.contains("slot.main.HTTP_PROXY") && env[0].1.contains(OWN),
            "{env:?}"
        );
        assert_eq!(env[4].1, NO_PROXY, "the NO_PROXY under test, as a value");
        let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        assert_eq!(pod.automount_service_account_token, Some(false));
        assert_eq!(pod.containers[0].image.as_deref(), Some(PROBE_IMAGE));
        assert_eq!(
            pod.containers[0].args.as_ref().unwrap()[..3],
            ["probe".to_owned(), "--dialect".into(), "portable".into()]
        );

        let p = reconcile(&mut w, |wanted| {
            ProbeRun::Running(format!("Pod of {}", wanted.job_name))
        });
        assert!(p.writes.is_empty() && p.create_probe.is_none());

        let p = reconcile(&mut w, |wanted| finished(wanted, true));
        assert_eq!(ids(&p), ["Deployment/api"], "written once verified");
        let v = w.previous.verification.clone().expect("recorded");
        assert!(v.passed && v.job == wanted.job_name);
        let r = p.report(&[], &now());
        assert_eq!(condition(&r, "Verified").0, "True");
        w.settle();
        assert!(
            w.plan().needs_probe.is_none(),
            "a recorded run is not looked up again"
        );
        let r = w.plan().report(&[], &now());
        assert!(r.status.is_none(), "steady: nothing to write");
    }

    #[test]
    fn a_failed_probe_keeps_every_workload_and_the_no_proxy_where_they_are() {
        let mut w = World::new(json!({}), vec![proxied("api")]);
        w.settle();
        w.settle();
        let before = hash_of(&w.workloads[0]);
        let cm = w.config_map.data.clone();
        // Verification is turned on together with a new entry: the new NO_PROXY waits.
        w.policy.spec = serde_json::from_value(
            serde_json::to_value(
                policy(
                    "outbound",
                    "2026-01-02T00:00:00Z",
                    spec(json!({"noProxy": {"additional": ["db.corp"]}})),
                )
                .spec,
            )
            .unwrap(),
        )
        .unwrap();
        w.policy.metadata.generation = Some(2);
        let p = reconcile(&mut w, |_| ProbeRun::Missing);
        assert!(p.create_probe.is_some());
        let job = p.create_probe.unwrap();
        assert!(
            job_env(&job)[4].1.contains("db.corp"),
            "the probe tests the new NO_PROXY"
        );
        assert_eq!(
            p.config_map,
            Change::Keep,
            "workloads' NO_PROXY waits for the verification"
        );
        let p = reconcile(&mut w, |wanted| finished(wanted, false));
        assert!(p.writes.is_empty());
        assert_eq!(hash_of(&w.workloads[0]), before);
        assert_eq!(w.config_map.data, cm);
        let r = p.report(&[], &now());
        let (status, why, message) = condition(&r, "Ready");
        assert_eq!(
            (status.as_str(), why.as_str()),
            ("False", reason::VERIFICATION_FAILED)
        );
        assert!(
            message.contains("1 workload(s) wait for the verification"),
            "{message}"
        );
        assert_eq!(condition(&r, "Stalled").0, "True");
        assert_eq!(condition(&r, "Verified").0, "False");
        let v = w.previous.verification.clone().unwrap();
        assert!(!v.passed && v.endpoints[1].error.is_some());
        // Nothing more happens until something changes: no new run, no write.
        let p = reconcile(&mut w, |_| panic!("no lookup"));
        assert!(p.writes.is_empty() && p.create_probe.is_none());
    }

    #[test]
    fn a_rotation_waits_for_the_new_slot_to_pass() {
        let mut w = World::new(two_slots(spec(json!({}))), vec![proxied("api")]);
        w.second = Some(urls("http://u:green-1@proxy.corp.example:3128"));
        for _ in 0..3 {
            reconcile(&mut w, |wanted| finished(wanted, true));
        }
        assert_eq!(w.previous.active_credential.as_deref(), Some("main"));
        w.second = Some(urls("http://u:green-2@proxy.corp.example:3128"));
        let p = reconcile(&mut w, |_| ProbeRun::Missing);
        let job = p.create_probe.expect("the new slot is probed");
        assert!(job_env(&job)[0].1.contains("slot.green.HTTP_PROXY"));
        assert!(p.writes.is_empty());
        assert_eq!(
            w.previous.rotation.as_ref().unwrap().phase,
            RotationPhase::Verifying
        );
        reconcile(&mut w, |wanted| finished(wanted, false));
        assert_eq!(
            w.previous.rotation.as_ref().unwrap().phase,
            RotationPhase::Blocked
        );
        assert_eq!(w.previous.active_credential.as_deref(), Some("main"));
        // A new attempt on demand: the annotation asks for a new run of the same thing.
        w.policy
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(verify::VERIFY_ANNOTATION.into(), "2".into());
        let p = reconcile(&mut w, |wanted| finished(wanted, true));
        assert_eq!(ids(&p), ["Deployment/api"], "switched once the slot passed");
        assert!(written_slot(&w.workloads[0]).contains("green"));
    }

    fn written_slot(v: &WorkloadView) -> String {
        v.template
            .metadata
            .as_ref()
            .unwrap()
            .annotations
            .as_ref()
            .unwrap()[CREDENTIAL_SLOT]
            .clone()
    }

    #[test]
    fn a_periodic_or_requested_run_does_not_close_the_gate() {
        let mut w = World::new(
            spec(json!({"verification": {"interval": "1h"}})),
            vec![proxied("api")],
        );
        for _ in 0..2 {
            reconcile(&mut w, |wanted| finished(wanted, true));
        }
        let first = w.previous.verification.clone().unwrap().job;
        w.unix_now += 3600;
        w.workloads.push(proxied("web"));
        let p = reconcile(&mut w, |_| ProbeRun::Missing);
        assert!(
            p.create_probe
                .as_ref()
                .is_some_and(|j| j.metadata.name.as_deref() != Some(first.as_str()))
        );
        assert_eq!(
            ids(&p),
            ["Deployment/web"],
            "the configuration passed: a new workload gets it"
        );
    }

    #[test]
    fn without_a_probe_image_nothing_is_switched_and_it_says_why() {
        let mut w = World::new(spec(json!({})), vec![proxied("api")]);
        w.probe_image = None;
        let p = reconcile(&mut w, |_| panic!("no lookup"));
        assert!(p.writes.is_empty() && p.create_probe.is_none());
        let r = p.report(&[], &now());
        assert!(condition(&r, "Verified").2.contains("--probe-image"));
        assert_eq!(ready(&r).1, reason::VERIFICATION_FAILED);
    }

    fn job_with(condition: Option<(&str, &str)>) -> Job {
        let mut status = json!({});
        if let Some((type_, reason)) = condition {
            status = json!({"conditions": [{"type": type_, "status": "True", "reason": reason,
                "message": "m", "lastTransitionTime": "2026-03-01T00:00:00Z"}]});
        }
        serde_json::from_value(json!({"metadata": {"name": "j"}, "status": status})).unwrap()
    }

    fn pod_with(state: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "j-abcde", "creationTimestamp": "2026-03-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "probe", "image": PROBE_IMAGE}]},
            "status": {"containerStatuses": [{"name": "probe", "image": PROBE_IMAGE, "imageID": "",
                "ready": false, "restartCount": 0, "state": state}]},
        }))
        .unwrap()
    }

    fn wanted() -> Wanted {
        let w = World::new(spec(json!({})), vec![proxied("api")]);
        w.plan().needs_probe.unwrap()
    }

    #[test]
    fn a_finished_pod_reports_its_results() {
        let w = wanted();
        let ProbeRun::Finished(expected) = finished(&w, false) else {
            unreachable!()
        };
        let message = serde_json::to_string(&expected.endpoints).unwrap();
        let pod =
            pod_with(json!({"terminated": {"exitCode": 1, "reason": "Error", "message": message}}));
        let ProbeRun::Finished(v) = verify::read(
            &w,
            &job_with(Some(("Failed", "BackoffLimitExceeded"))),
            &[pod],
        ) else {
            panic!("finished")
        };
        assert!(!v.passed);
        let coarse: Vec<_> = expected.endpoints.into_iter().map(verify::coarse).collect();
        assert_eq!(v.endpoints, coarse, "status keeps the coarse form");
        assert_eq!(
            (v.pod.as_deref(), v.node.as_deref()),
            (Some("j-abcde"), Some("n1"))
        );
        assert_eq!(
            v.message,
            "https://status.example.com/ (expected Proxied, got Failed): the proxy rejected the \
             credentials (HTTP 407)"
        );
    }

    #[test]
    fn one_probe_job_runs_at_a_time() {
        let owner = json!([{"apiVersion": "egressproxy.io/v1alpha1", "kind": "EgressProxyPolicy",
            "name": "outbound", "uid": "uid-outbound", "controller": true}]);
        let mut running = job_with(None);
        running.metadata.name = Some("egress-proxy-verify-earlier".into());
        let look_alike = running.clone();
        running.metadata.owner_references = serde_json::from_value(owner).unwrap();
        assert_eq!(
            verify::missing("uid-outbound", &[running.clone()]),
            ProbeRun::Running(
                "waiting for the earlier probe Job egress-proxy-verify-earlier to finish".into()
            )
        );
        assert_eq!(
            verify::missing("uid-outbound", &[look_alike]),
            ProbeRun::Missing,
            "a Job the policy does not own holds nothing"
        );
        let mut suspended = running;
        suspended.spec.get_or_insert_default().suspend = Some(true);
        assert_eq!(
            verify::missing("uid-outbound", &[suspended]),
            ProbeRun::Missing
        );
        let done = job_with(Some(("Complete", "CompletionsReached")));
        let failed = job_with(Some(("Failed", "DeadlineExceeded")));
        assert_eq!(
            verify::missing("uid-outbound", &[done, failed]),
            ProbeRun::Missing
        );
    }

    #[test]
    fn a_run_without_results_fails_and_says_why() {
        let w = wanted();
        let garbage = pod_with(
            json!({"terminated": {"exitCode": 2, "reason": "Error", "message": "error: boom"}}),
        );
        let ProbeRun::Finished(v) = verify::read(
            &w,
            &job_with(Some(("Failed", "BackoffLimitExceeded"))),
            &[garbage],
        ) else {
            panic!()
        };
        assert!(!v.passed && v.endpoints.is_empty());
        assert_eq!(
            v.message,
            "the probe reported no results (exit code 2, Error)"
        );
        let ProbeRun::Finished(v) =
            verify::read(&w, &job_with(Some(("Failed", "DeadlineExceeded"))), &[])
        else {
            panic!()
        };
        assert_eq!(
            v.message,
            "the probe Job ended without running the probe: DeadlineExceeded: m"
        );
        let pulling =
            pod_with(json!({"waiting": {"reason": "ErrImagePull", "message": "not found"}}));
        assert_eq!(
            verify::read(&w, &job_with(None), &[pulling]),
            ProbeRun::Running("Pod j-abcde waiting: ErrImagePull (not found)".into())
        );
    }

    #[test]
    fn endpoints_on_the_node_or_the_control_plane_are_refused() {
        let mut c = cluster();
        c.api_endpoints = vec![crate::discovery::NamedValues {
            name: "default/kubernetes".into(),
            values: vec!["192.168.1.10".into()],
        }];
        for (url, refused) in [
            ("http://169.254.169.254/latest/meta-data/", true),
            ("http://[fe80::1]:8080/", true),
            ("http://[::ffff:169.254.169.254]/", true),
            ("http://[fd00:ec2::254]/", true),
            ("http://127.0.0.1:10250/pods", true),
            ("http://0.0.0.0:2379/", true),
            ("http://metadata.google.internal./computeMetadata/v1/", true),
            ("http://LOCALHOST:9090/", true),
            ("http://grafana.localhost/", true),
            ("https://10.43.0.1:443/", true),
            ("https://192.168.1.10:2379/", true),
            ("https://status.example.com/", false),
            ("http://10.43.0.2/", false),
            ("http://metadata.example.com/", false),
        ] {
            let why = verify::refused(url, &c);
            assert_eq!(why.is_some(), refused, "{url}: {why:?}");
        }

        let s = spec(json!({"verification": {"endpoints":
            [{"url": "http://169.254.169.254/latest/meta-data/", "expect": "Blocked"}]}}));
        let mut w = World::new(s, vec![proxied("api")]);
        let p = w.plan();
        assert!(
            p.needs_probe.is_none() && p.create_probe.is_none(),
            "no probe runs"
        );
        assert!(p.writes.is_empty(), "nothing is switched: {:?}", ids(&p));
        let r = p.report(&[], &now());
        let (status, why, message) = condition(&r, "Verified");
        assert_eq!(
            (status.as_str(), why.as_str()),
            ("False", reason::VERIFICATION_FAILED)
        );
        assert!(
            message.contains("169.254.169.254/latest/meta-data/ is refused"),
            "{message}"
        );
        w.probe = Some(ProbeRun::Missing);
        assert!(w.plan().create_probe.is_none(), "not even when asked");
    }

    #[test]
    fn status_keeps_the_path_and_a_coarse_reason_only() {
        let probe = |got: &str, via_proxy: bool, code: Option<u16>, expect: &str| EndpointCheck {
            url: "http://10.0.0.5:6379/".into(),
            expect: expect.into(),
            got: got.into(),
            ok: got == expect,
            status_code: code,
            via_proxy,
            dns: vec!["10.0.0.5".into()],
            latency_ms: Some(12),
            error: (got != expect)
                .then(|| "tcp connect error: Connection refused (os error 111)".into()),
        };
        let cases = [
            (
                probe("Failed", false, None, "Direct"),
                Some("no answer directly"),
                None,
            ),
            (
                probe("Direct", false, Some(500), "Blocked"),
                Some("answered directly"),
                None,
            ),
            (
                probe("Failed", true, Some(407), "Proxied"),
                Some("the proxy rejected the credentials (HTTP 407)"),
                Some(407),
            ),
            (
                probe("Blocked", true, Some(403), "Proxied"),
                Some("refused by the proxy (HTTP 403)"),
                Some(403),
            ),
            (
                probe("Failed", true, None, "Proxied"),
                Some("no answer through the proxy"),
                None,
            ),
            (probe("Proxied", true, Some(200), "Proxied"), None, None),
        ];
        for (given, error, code) in cases {
            let c = verify::coarse(given.clone());
            assert_eq!(c.error.as_deref(), error, "{given:?}");
            assert_eq!(c.status_code, code, "{given:?}");
            assert!(c.dns.is_empty() && c.latency_ms.is_none(), "{c:?}");
            assert_eq!((&c.url, &c.got, c.ok), (&given.url, &given.got, given.ok));
        }
    }

    #[test]
    fn a_url_cannot_expand_a_variable_into_the_probe_arguments() {
        let url = "https://collector.example/$(HTTPS_PROXY)/$$x";
        let extra = json!({"verification": {"endpoints": [{"url": url, "expect": "Proxied"}]}});
        let mut s = spec(json!({}));
        merge(&mut s, extra);
        let mut w = World::new(s, vec![proxied("api")]);
        w.plan();
        w.probe = Some(ProbeRun::Missing);
        let job = w.plan().create_probe.expect("the Job is created");
        let pod = job.spec.unwrap().template.spec.unwrap();
        let args = pod.containers[0].args.clone().unwrap();
        assert!(
            args.contains(&"https://collector.example/$$(HTTPS_PROXY)/$$$$x=Proxied".to_owned()),
            "the kubelet reads $$ as $: {args:?}"
        );
    }
}

// --- CronJobs ---

fn nightly() -> WorkloadView {
    workload(
        WorkloadKind::CronJob,
        "nightly",
        json!({"egress": "proxied"}),
        json!([{"name": "report", "image": "report:1"}]),
    )
}

/// A policy for CronJobs (and Deployments), settled with `nightly` and `api` injected.
fn cron_world() -> World {
    let spec = json!({"workloadKinds": ["Deployment", "CronJob"]});
    let mut w = World::new(spec, vec![nightly(), proxied("api")]);
    w.settle();
    w.settle();
    w
}

fn job(name: &str, cron_job: Option<&str>, hash: Option<&str>, labels: Value) -> JobView {
    JobView {
        name: name.into(),
        labels: serde_json::from_value(labels).expect("labels"),
        cron_job: cron_job.map(str::to_owned),
        hash: hash.map(str::to_owned),
        running: true,
    }
}

#[test]
fn a_cron_job_is_written_at_its_job_template_and_has_no_rollout_to_wait_for() {
    let spec = json!({"workloadKinds": ["CronJob"]});
    let mut w = World::new(spec, vec![nightly(), proxied("api")]);
    let p = w.plan();
    assert_eq!(
        ids(&p),
        ["CronJob/nightly"],
        "the Deployment is not a kind listed"
    );
    let Write::Apply(body) = &p.writes[0].write else {
        panic!("server-side apply")
    };
    assert_eq!(
        (&body["apiVersion"], &body["kind"]),
        (&json!("batch/v1"), &json!("CronJob"))
    );
    assert!(body["spec"].get("template").is_none(), "{body}");
    let tpl = &body["spec"]["jobTemplate"]["spec"]["template"];
    assert!(tpl["metadata"]["annotations"][CONFIG_HASH].is_string());
    let env = tpl["spec"]["containers"][0]["env"].as_array().expect("env");
    assert_eq!(env.len(), 6);
    assert_eq!(env[0]["valueFrom"]["secretKeyRef"]["name"], OWN);
    w.settle();
    w.settle();
    let counts = w.previous.workloads.clone().expect("counts");
    assert_eq!(
        (counts.selected, counts.up_to_date),
        (1, 1),
        "up to date once written"
    );
    assert!(counts.pending.is_empty());
    // Steady: nothing to write, no early requeue.
    let p = w.plan();
    assert!(p.writes.is_empty());
    assert_eq!(p.report(&[], &now()).requeue, Requeue::Resync);
    assert_eq!(hash_of(&w.workloads[1]), None);
}

#[test]
fn running_jobs_on_an_old_configuration_are_reported_and_never_written() {
    let mut w = cron_world();
    let current = hash_of(w.workload("nightly")).expect("nightly injected");
    let mut finished = job("nightly-1", Some("nightly"), Some("old"), json!({}));
    finished.running = false;
    w.jobs = vec![
        job("nightly-2", Some("nightly"), Some("old"), json!({})),
        job("nightly-3", Some("nightly"), Some(&current), json!({})),
        finished,
        job("adhoc", None, None, json!({"egress": "proxied"})),
        job("other-1", Some("other"), None, json!({"egress": "proxied"})),
        job("plain", None, None, json!({"app": "plain"})),
        job(
            "egress-proxy-verify-1",
            None,
            None,
            json!({"egress": "proxied", MANAGED_BY_LABEL: MANAGED_BY}),
        ),
    ];
    let p = w.plan();
    assert!(
        p.writes.is_empty(),
        "a Job is never written: {:?}",
        p.writes
    );
    let r = p.report(&[], &now());
    assert_eq!(ready(&r), ("True".into(), reason::RECONCILED.into()));
    let status = r.status.expect("status");
    assert_eq!(
        status.workloads.expect("counts").old_jobs,
        ["Job/adhoc", "Job/nightly-2 (CronJob/nightly)"]
    );
    let message = &status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready")
        .message;
    assert_eq!(
        message,
        "2 workload(s) run the current proxy configuration; 2 running Job(s) cannot change and \
         finish with the previous proxy configuration: Job/adhoc, Job/nightly-2 (CronJob/nightly)"
    );
}

#[test]
fn a_released_cron_job_is_patched_at_its_job_template() {
    let mut w = cron_world();
    w.workload("nightly").labels.clear();
    let p = w.plan();
    assert_eq!(ids(&p), ["CronJob/nightly"]);
    assert!(p.writes[0].is_release());
    let Write::Patch(body) = &p.writes[0].write else {
        panic!("strategic merge patch")
    };
    let tpl = &body["spec"]["jobTemplate"]["spec"]["template"];
    assert_eq!(tpl["metadata"]["annotations"][CONFIG_HASH], Value::Null);
    assert!(tpl["metadata"]["annotations"].get(CONFIG_HASH).is_some());
    let env = tpl["spec"]["containers"][0]["env"].as_array().expect("env");
    assert!(env.iter().all(|e| e["$patch"] == "delete"), "{env:?}");
    assert_eq!(env.len(), 6);
    w.settle();
    assert_eq!(hash_of(w.workload("nightly")), None);
    assert!(env_names(w.workload("nightly"), "report").is_empty());
}

#[test]
fn a_java_policy_appends_its_options_and_sets_the_variables_as_portable() {
    let mut w = settled(json!({"noProxy": {"dialect": "java"}}));
    assert!(w.plan().writes.is_empty(), "settled");
    let s = w.previous.clone();
    let options = s.java_options.expect("javaOptions");
    assert!(
        options.starts_with("-Dhttp.proxyHost=proxy.corp.example -Dhttp.proxyPort=3128 ")
            && options.contains(" -Dhttp.nonProxyHosts=cluster.corp|*.cluster.corp|"),
        "{options}"
    );
    assert!(!options.contains("pw"), "no credentials: {options}");
    // NO_PROXY for the other programs is the portable rendering, not the java one.
    assert!(!s.no_proxy.as_deref().unwrap_or("").contains('|'));
    assert!(
        s.warnings
            .iter()
            .any(|x| x == super::report::JAVA_CREDENTIALS)
    );
    assert!(s.uncovered.iter().any(|u| u.entry == "10.43.0.0/16"));
    let v = &w.workloads[0];
    let app = v.template.spec.as_ref().unwrap().containers[0].clone();
    let java = app
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "JAVA_TOOL_OPTIONS");
    let expected = format!("-Degressproxy.managed=egress-proxy-outbound {options}");
    assert_eq!(
        java.and_then(|e| e.value.as_deref()),
        Some(expected.as_str())
    );
    // A new entry changes the options, the hash, and rolls the workload once.
    w.policy
        .spec
        .no_proxy
        .additional
        .push("*.example.org".into());
    assert_eq!(ids(&w.plan()), ["Deployment/api"]);
    w.settle();
    assert!(w.plan().writes.is_empty(), "once");
    // An https:// proxy is something the JDK cannot use: the policy blocks.
    w.credentials = Some(urls("https://proxy.corp.example:3129"));
    assert_blocked(&w, reason::INVALID_PROXY_URL, "dialect java");
}

#[path = "trust_tests.rs"]
mod trust_tests;
