//! Simulated controllers (opt-in): Deployment -> ReplicaSets (by pod-template hash) -> Pods,
//! StatefulSet -> Pods `name-0..n` one ordinal at a time, DaemonSet -> one Pod per Node,
//! Job -> Pods until enough succeed, and a kubelet that makes Pods Ready after a delay and
//! removes deleted Pods after their grace period. Pods with restartPolicy Never or OnFailure
//! (Job Pods) are run as local processes instead when their image is mapped (`run`).
//! Rollouts are paced the way the real controllers pace them (`rolling`), and status carries
//! the fields `kubectl rollout status` reads.
//!
//! Everything runs on the store's change stream plus timers (`Ctl::timers`) and the exits of
//! the processes: a Pod that becomes Ready later, a Pod whose grace period ends, a ReplicaSet
//! whose Pods reach `minReadySeconds`, a Deployment whose progress deadline passes, a Job whose
//! deadline or TTL passes.

mod daemon;
mod deployment;
mod env;
mod job;
mod pods;
mod procs;
mod replicaset;
pub(crate) mod rolling;
mod run;
mod stateful;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::api;
use crate::object::Target;
use crate::resources::GroupResource;
use crate::shared::Shared;
use crate::store::{Broadcast, Change, EventType, Store};

pub use pods::{READY_AFTER_ANNOTATION, ROLLOUT_ANNOTATION};
pub(crate) use run::Images;

const MANAGER: &str = "kube-controller-manager";

/// How fast simulated Pods start and stop.
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// How long a new Pod takes to become Ready (a workload's `kube-sim.io/ready-after`
    /// annotation overrides it).
    pub ready_after: Duration,
    /// Factor applied to a deleted Pod's grace period before it is removed (0: at once).
    pub grace_scale: f64,
}

/// What a timer wakes up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Wake {
    Pod(String, String),
    Workload(&'static str, String, String),
}

/// Controller state kept between events: timers and the instants the API does not store
/// with enough precision.
pub(crate) struct Ctl {
    pacing: Pacing,
    timers: BTreeSet<(Instant, Wake)>,
    /// Pod uid -> when it became Ready (for `minReadySeconds`).
    ready_since: HashMap<String, Instant>,
    /// Pod uid -> when it becomes Ready.
    ready_due: HashMap<String, Instant>,
    /// Pod uid -> when the kubelet removes it.
    gone_due: HashMap<String, Instant>,
    /// Deployment uid -> (last progress, what the progress was measured on).
    progress: HashMap<String, (Instant, Value)>,
    /// Processes of executed Pods.
    procs: procs::Procs,
    /// Images mapped to local programs.
    images: Images,
    /// Executed Pods waiting for a Secret or ConfigMap: (namespace, name).
    config_waiting: BTreeSet<(String, String)>,
    /// Job uid -> when it started and when it finished (the API keeps whole seconds).
    job_times: HashMap<String, job::Times>,
    /// Finished Pods a Job has counted (by Pod uid).
    counted: HashSet<String>,
}

impl Ctl {
    fn new(pacing: Pacing, procs: procs::Procs, images: Images) -> Self {
        Self {
            pacing,
            timers: BTreeSet::new(),
            ready_since: HashMap::new(),
            ready_due: HashMap::new(),
            gone_due: HashMap::new(),
            progress: HashMap::new(),
            procs,
            images,
            config_waiting: BTreeSet::new(),
            job_times: HashMap::new(),
            counted: HashSet::new(),
        }
    }

    fn wake_at(&mut self, at: Instant, w: Wake) {
        self.timers.insert((at, w));
    }

    fn forget(&mut self, uid: &str) {
        self.ready_since.remove(uid);
        self.ready_due.remove(uid);
        self.gone_due.remove(uid);
        self.progress.remove(uid);
        self.job_times.remove(uid);
    }

    /// The timers due by `now`, removed.
    fn due(&mut self, now: Instant) -> Vec<Wake> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.timers.first() {
            if *at > now {
                break;
            }
            if let Some((_, w)) = self.timers.pop_first() {
                out.push(w);
            }
        }
        out
    }
}

fn target(
    store: &Store,
    group: &str,
    plural: &str,
    ns: &str,
    name: Option<&str>,
) -> Option<Target> {
    Some(Target {
        rt: store.registry.get(group, "v1", plural)?,
        namespace: if ns.is_empty() {
            None
        } else {
            Some(ns.to_string())
        },
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

/// Write `status` of an object when it differs from what is stored.
fn put_status(store: &mut Store, group: &str, plural: &str, obj: &Value, status: Value) {
    if obj.get("status") == Some(&status) {
        return;
    }
    let Some(t) = target(store, group, plural, &namespace(obj), Some(&name(obj))) else {
        return;
    };
    let mut o = obj.clone();
    set(&mut o, &["status"], status);
    let st = Target {
        subresource: Some("status".into()),
        ..t
    };
    put(store, &st, o);
}

/// Set `spec.replicas` of a ReplicaSet.
fn scale(store: &mut Store, rs: &Value, n: i64) {
    if replicas(rs) == n {
        return;
    }
    let mut rs = rs.clone();
    set(&mut rs, &["spec", "replicas"], json!(n));
    if let Some(t) = target(
        store,
        "apps",
        "replicasets",
        &namespace(&rs),
        Some(&name(&rs)),
    ) {
        put(store, &t, rs);
    }
}

fn gr(group: &str, plural: &str) -> GroupResource {
    GroupResource {
        group: group.into(),
        resource: plural.into(),
    }
}

fn str_at(o: &Value, ptr: &str) -> String {
    o.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn uid(o: &Value) -> String {
    str_at(o, "/metadata/uid")
}

fn name(o: &Value) -> String {
    str_at(o, "/metadata/name")
}

fn namespace(o: &Value) -> String {
    str_at(o, "/metadata/namespace")
}

fn annotation<'a>(o: &'a Value, key: &str) -> Option<&'a str> {
    o.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn int_at(o: &Value, ptr: &str) -> i64 {
    o.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

fn terminating(o: &Value) -> bool {
    o.pointer("/metadata/deletionTimestamp").is_some()
}

fn generation(o: &Value) -> Value {
    o.pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1))
}

fn owner_ref(kind: &str, o: &Value) -> Value {
    let api_version = if kind == "Job" { "batch/v1" } else { "apps/v1" };
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

/// The hash of a Pod template, as the label values and object names the controllers use.
fn template_hash(template: &Value) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut t = crate::object::canonical(template).unwrap_or(json!({}));
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(deployment::HASH_LABEL);
        labels.remove(stateful::REVISION_LABEL);
    }
    for b in t.to_string().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 6)) % ALPHABET.len() as u64) as usize] as char)
        .collect()
}

/// Objects of a kind that `owner_uid` owns, terminating ones included when asked.
fn owned(store: &Store, plural: &str, owner_uid: &str, with_terminating: bool) -> Vec<Value> {
    let group = match plural {
        "pods" => "",
        "jobs" => "batch",
        _ => "apps",
    };
    let gr = gr(group, plural);
    let mut out: Vec<Value> = store
        .dependents_of(owner_uid)
        .into_iter()
        .filter(|(g, _)| *g == gr)
        .filter_map(|(g, k)| store.get(&g, &k))
        .filter(|o| with_terminating || !terminating(o))
        .map(|o| (*o).clone())
        .collect();
    out.sort_by_key(name);
    out
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

/// Reconcile one workload by its plural.
fn reconcile(store: &mut Store, ctl: &mut Ctl, plural: &str, ns: &str, n: &str) {
    match plural {
        "deployments" => deployment::reconcile(store, ctl, ns, n),
        "replicasets" => replicaset::reconcile(store, ctl, ns, n),
        "statefulsets" => stateful::reconcile(store, ctl, ns, n),
        "daemonsets" => daemon::reconcile(store, ctl, ns, n),
        "jobs" => job::reconcile(store, ctl, ns, n),
        _ => {}
    }
}

/// Reconcile the workloads that own `o`.
fn reconcile_owners(store: &mut Store, ctl: &mut Ctl, o: &Value) {
    let ns = namespace(o);
    for (kind, plural) in [
        ("ReplicaSet", "replicasets"),
        ("Deployment", "deployments"),
        ("StatefulSet", "statefulsets"),
        ("DaemonSet", "daemonsets"),
        ("Job", "jobs"),
    ] {
        for owner in owners(o, kind) {
            reconcile(store, ctl, plural, &ns, &owner);
            // A Pod that finally went may change what its ReplicaSet's Deployment waits for
            // (Recreate), without changing the ReplicaSet's status.
            if kind == "ReplicaSet"
                && let Some(rs) = store.get(&gr("apps", "replicasets"), &(ns.clone(), owner))
            {
                for d in owners(&rs, "Deployment") {
                    deployment::reconcile(store, ctl, &ns, &d);
                }
            }
        }
    }
}

/// What a change should trigger.
fn handle(store: &mut Store, ctl: &mut Ctl, c: &Change) {
    let ns = c.namespace.as_str();
    let object = c.object.value();
    let n = name(&object);
    let deleted = c.kind == EventType::Deleted;
    if deleted {
        ctl.forget(&uid(&object));
    }
    match (c.gr.group.as_str(), c.gr.resource.as_str()) {
        ("apps", plural @ ("deployments" | "statefulsets" | "daemonsets")) if !deleted => {
            reconcile(store, ctl, plural, ns, &n)
        }
        ("apps", "replicasets") => {
            if !deleted {
                replicaset::reconcile(store, ctl, ns, &n);
            }
            reconcile_owners(store, ctl, &object);
        }
        ("batch", "jobs") if !deleted => job::reconcile(store, ctl, ns, &n),
        ("", "pods") => {
            if deleted {
                run::pod_gone(ctl, &object);
                job::count_deleted(store, ctl, &object);
            } else {
                pods::kubelet(store, ctl, ns, &n);
            }
            // A Pod the controllers just created changes nothing they do not know.
            if c.kind != EventType::Added {
                reconcile_owners(store, ctl, &object);
            }
        }
        ("", "nodes") if c.kind != EventType::Modified => daemon::reconcile_all(store, ctl),
        ("", "secrets" | "configmaps") if !deleted => run::retry_config(store, ctl, ns),
        _ => {}
    }
}

/// Reconcile every workload and Pod (at start-up and after missing events).
fn resync(store: &mut Store, ctl: &mut Ctl) {
    let waiting: Vec<(String, String)> = store
        .range(&gr("", "pods"), None, None)
        .filter(|(_, p)| terminating(p) || !pods::ready(p))
        .map(|(k, _)| k.clone())
        .collect();
    for (ns, n) in waiting {
        pods::kubelet(store, ctl, &ns, &n);
    }
    for (group, plural) in [
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
    ] {
        let keys: Vec<(String, String)> = store
            .range_stored(&gr(group, plural), None, None)
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, n) in keys {
            reconcile(store, ctl, plural, &ns, &n);
        }
    }
}

fn fire(store: &mut Store, ctl: &mut Ctl, w: Wake) {
    match w {
        Wake::Pod(ns, n) => {
            pods::kubelet(store, ctl, &ns, &n);
        }
        Wake::Workload(plural, ns, n) => reconcile(store, ctl, plural, &ns, &n),
    }
}

/// What wakes the controller loop.
enum Msg {
    Change(Result<Broadcast, broadcast::error::RecvError>),
    Timer,
    Exit(procs::Exit),
}

/// Run the controllers until the channel closes; dropping the future kills every process it
/// started.
pub async fn run(shared: Arc<Shared>, pacing: Pacing, images: Images) {
    let (exits_tx, mut exits) = tokio::sync::mpsc::unbounded_channel();
    let procs = procs::Procs::new(exits_tx, shared.logs.clone());
    let mut ctl = Ctl::new(pacing, procs, images);
    let mut rx = {
        let mut store = shared.lock();
        let rx = store.subscribe();
        resync(&mut store, &mut ctl);
        rx
    };
    loop {
        let next = ctl.timers.first().map(|(at, _)| *at);
        let msg = tokio::select! {
            m = rx.recv() => Msg::Change(m),
            Some(e) = exits.recv() => Msg::Exit(e),
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => Msg::Timer,
        };
        let mut store = shared.lock();
        match msg {
            Msg::Timer => {
                for w in ctl.due(Instant::now()) {
                    fire(&mut store, &mut ctl, w);
                }
            }
            Msg::Exit(e) => run::exited(&mut store, &mut ctl, e),
            Msg::Change(Ok(Broadcast::Change(c))) => handle(&mut store, &mut ctl, &c),
            Msg::Change(Ok(Broadcast::Expire)) => {}
            Msg::Change(Err(broadcast::error::RecvError::Lagged(n))) => {
                tracing::warn!(missed = n, "controllers fell behind; resyncing");
                resync(&mut store, &mut ctl);
            }
            Msg::Change(Err(broadcast::error::RecvError::Closed)) => return,
        }
    }
}

/// The kubelet's final delete of a Pod whose containers stopped.
pub(super) fn remove_pod(store: &mut Store, ns: &str, pod: &str) {
    if let Some(t) = target(store, "", "pods", ns, Some(pod)) {
        let opts = api::DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        if let Err(e) = api::delete(store, &t, &opts) {
            tracing::warn!(error = %e, "kubelet: removing a terminated Pod");
        }
    }
}
