//! Test harness: the in-memory API server with its workload controllers, the cluster facts
//! of the demo, the CRD, and the operator running against it over HTTP.
#![allow(dead_code)]

pub mod logs;
pub mod net;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use egress_proxy_operator::activity::Activity;
use egress_proxy_operator::api::EgressProxyPolicy;
use egress_proxy_operator::controller::{self, Settings};
use egress_proxy_operator::metrics::Metrics;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodTemplateSpec};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use kube_sim::{KubeSim, KubeSimHandle};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The policy most tests' fixtures define.
pub const OUTBOUND: &[(&str, &str)] = &[("team-a", "outbound")];

pub const CLUSTER: &str = include_str!("../../../demo/cluster.yaml");

pub struct Operator {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), controller::RunError>>,
    activity: Option<Arc<Activity>>,
    /// The test's own client, for the touches of [`Operator::looked`].
    admin: Client,
}

/// Distinct values for the touches of [`Operator::looked`].
static TOUCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A version of an object the operator must have seen: as a write or read returned it.
#[derive(Debug, Clone)]
pub struct Mark {
    kind: String,
    namespace: String,
    name: String,
    resource_version: u64,
}

/// `o` as it is now, for [`Operator::looked`].
pub fn mark<K: Resource<DynamicType = ()>>(o: &K) -> Mark {
    let m = o.meta();
    Mark {
        kind: K::kind(&()).into_owned(),
        namespace: m.namespace.clone().unwrap_or_default(),
        name: m.name.clone().unwrap_or_default(),
        resource_version: rv(m.resource_version.as_deref()).expect("a resourceVersion"),
    }
}

/// kube-sim's resourceVersions are one counter: they compare as numbers.
fn rv(v: Option<&str>) -> Option<u64> {
    v?.parse().ok()
}

impl Operator {
    /// Whether the operator's task has ended (it returned or panicked).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits until the operator has looked at `marks` and acted on them: its caches applied
    /// each at its version or later, then two reconciles of each of `policies` ran, the first
    /// started after that and the second after the first ended. What a change leads to is
    /// then written; what it did not lead to will not be. Each reconcile is called for by
    /// touching the policy (an annotation; no resync is relied on). Needs [`Env::settings`]'
    /// metrics.
    pub async fn looked(&self, policies: &[(&str, &str)], marks: &[Mark]) {
        let activity = self
            .activity
            .as_ref()
            .expect("started with Env::settings' metrics");
        self.applied(marks).await;
        for &(ns, name) in policies {
            let mut since = 0;
            for _ in 0..2 {
                let touched = self.touch(ns, name).await;
                let event = self.applied(&[touched]).await;
                let what = format!("a reconcile of {ns}/{name} after cache event {event}");
                let pass = eventually(&what, || async {
                    activity.first_pass(ns, name, event, since)
                })
                .await;
                since = pass.ended;
            }
        }
    }

    /// [`Operator::looked`] with nothing changed: whatever the operator had still to do about
    /// `policies` is done.
    pub async fn caught_up(&self, policies: &[(&str, &str)]) {
        self.looked(policies, &[]).await
    }

    /// Waits until the caches applied `marks`; the count of cache events by then.
    async fn applied(&self, marks: &[Mark]) -> u64 {
        let activity = self
            .activity
            .as_ref()
            .expect("started with Env::settings' metrics");
        eventually("the operator's caches to apply the changes", || async {
            let mut latest = 0;
            for m in marks {
                let a = activity.object(&m.kind, &m.namespace, &m.name)?;
                let seen = rv(a.resource_version.as_deref()).unwrap_or(0);
                (seen >= m.resource_version || a.deleted).then_some(())?;
                latest = latest.max(a.event);
            }
            Some(latest)
        })
        .await
    }

    /// Changes an annotation of the policy, which calls for a reconcile.
    async fn touch(&self, ns: &str, name: &str) -> Mark {
        let n = TOUCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let patch =
            json!({"metadata": {"annotations": {"test.egressproxy.io/look": n.to_string()}}});
        let p = Api::<EgressProxyPolicy>::namespaced(self.admin.clone(), ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("touch policy");
        mark(&p)
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
    }
}

pub struct Env {
    pub sim: KubeSimHandle,
    pub client: Client,
}

impl Env {
    /// A cluster with the demo facts, the CRD and `yaml`.
    pub async fn new(yaml: &str) -> Env {
        Self::with_config(yaml, Duration::ZERO, 0.0).await
    }

    /// As `new`, with Pods that take `ready_after` to become Ready and stay Terminating for
    /// their grace period times `grace_scale`.
    pub async fn paced(yaml: &str, ready_after: Duration, grace_scale: f64) -> Env {
        Self::with_config(yaml, ready_after, grace_scale).await
    }

    /// As `new`, with Job Pods whose image is a key of `images` run as that local program.
    pub async fn running(yaml: &str, images: &[(&str, std::path::PathBuf)]) -> Env {
        let config = kube_sim::Config {
            controllers: true,
            run_images: images
                .iter()
                .map(|(image, path)| ((*image).to_owned(), path.clone()))
                .collect(),
            ..Default::default()
        };
        Self::started(config, yaml).await
    }

    async fn with_config(yaml: &str, ready_after: Duration, grace_scale: f64) -> Env {
        let config = kube_sim::Config {
            controllers: true,
            ready_after,
            grace_scale,
            ..Default::default()
        };
        Self::started(config, yaml).await
    }

    /// kube-sim seeds no ServiceCIDR: the cluster facts bring their own.
    async fn started(config: kube_sim::Config, yaml: &str) -> Env {
        let config = kube_sim::Config {
            seed_service_cidr: Some(false),
            ..config
        };
        let sim = KubeSim::start(config).await.expect("start kube-sim");
        sim.apply_yaml(CLUSTER).expect("cluster facts");
        sim.apply_yaml(&egress_proxy_operator::api::crd_yaml().expect("crd"))
            .expect("crd");
        if !yaml.is_empty() {
            sim.apply_yaml(yaml).expect("fixtures");
        }
        let client = sim.client().expect("client");
        Env { sim, client }
    }

    pub fn settings(&self) -> Settings {
        Settings {
            api_host: Some("127.0.0.1".into()),
            discovery_wait: Duration::from_secs(5),
            // Real resyncs inside every test's waiting time: they must write nothing.
            resync: Duration::from_secs(1),
            metrics: Arc::new(Metrics::recording(Arc::default())),
            ..Default::default()
        }
    }

    pub fn start(&self) -> Operator {
        self.start_with(self.settings())
    }

    pub fn start_with(&self, settings: Settings) -> Operator {
        self.start_as(self.client.clone(), settings)
    }

    /// The operator with another client (a ServiceAccount's token).
    pub fn start_as(&self, client: Client, settings: Settings) -> Operator {
        let (stop, stopped) = oneshot::channel::<()>();
        let activity = settings.metrics.activity().cloned();
        let task = tokio::spawn(controller::run(client, settings, async {
            let _ = stopped.await;
        }));
        Operator {
            stop: Some(stop),
            task,
            activity,
            admin: self.client.clone(),
        }
    }

    pub async fn policy(&self, ns: &str, name: &str) -> EgressProxyPolicy {
        Api::<EgressProxyPolicy>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .expect("get policy")
    }

    pub async fn deployment(&self, ns: &str, name: &str) -> Deployment {
        Api::<Deployment>::namespaced(self.client.clone(), ns)
            .get(name)
            .await
            .expect("get deployment")
    }

    /// Writes by the operator so far: everything under its field manager (workloads, managed
    /// objects, status, finalizers) and the Events it creates (only the operator creates them).
    pub fn operator_writes(&self) -> u64 {
        let counts = self.sim.request_counts();
        counts
            .by_field_manager
            .get("egress-proxy-operator")
            .copied()
            .unwrap_or(0)
            + counts.get("create", "events")
    }

    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.sim.request_counts().get(verb, resource)
    }

    /// Merge-patches a Secret's stringData (as a user or rotation tool would).
    pub async fn set_secret(
        &self,
        ns: &str,
        name: &str,
        string_data: Value,
    ) -> k8s_openapi::api::core::v1::Secret {
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(self.client.clone(), ns)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"stringData": string_data})),
            )
            .await
            .expect("patch secret")
    }

    pub async fn patch_policy(&self, ns: &str, name: &str, patch: Value) -> EgressProxyPolicy {
        Api::<EgressProxyPolicy>::namespaced(self.client.clone(), ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch policy")
    }

    pub async fn patch_deployment(&self, ns: &str, name: &str, patch: Value) -> Deployment {
        Api::<Deployment>::namespaced(self.client.clone(), ns)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch deployment")
    }
}

/// Polls `check` until it returns Some, or panics after 30 s with `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..300 {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// The Ready condition as (status, reason).
pub fn ready(p: &EgressProxyPolicy) -> Option<(String, String)> {
    let st = p.status.as_ref()?;
    if st.observed_generation != p.metadata.generation {
        return None;
    }
    st.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

pub fn ready_message(p: &EgressProxyPolicy) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Waits until the policy reports `reason` for its current generation.
/// On a timeout the panic shows the last Ready condition seen.
pub async fn wait_reason(env: &Env, ns: &str, name: &str, reason: &str) -> EgressProxyPolicy {
    let last = std::sync::Mutex::new(String::new());
    let waited = async {
        for _ in 0..300 {
            let p = env.policy(ns, name).await;
            if ready(&p).map(|r| r.1).as_deref() == Some(reason) {
                return Some(p);
            }
            if let Ok(mut l) = last.lock() {
                *l = format!("{:?}: {}", ready(&p), ready_message(&p));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    };
    match waited.await {
        Some(p) => p,
        None => panic!(
            "timed out waiting for: {ns}/{name} Ready reason {reason}; last seen {}",
            last.lock().map(|l| l.clone()).unwrap_or_default()
        ),
    }
}

pub fn template(d: &Deployment) -> &PodTemplateSpec {
    &d.spec.as_ref().expect("spec").template
}

pub fn hash(d: &Deployment) -> Option<String> {
    template(d)
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get("egressproxy.io/config-hash")
        .cloned()
}

pub fn container<'a>(d: &'a Deployment, name: &str) -> &'a Container {
    let spec = template(d).spec.as_ref().expect("pod spec");
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .expect("container")
}

pub fn env<'a>(c: &'a Container, name: &str) -> Option<&'a EnvVar> {
    c.env.iter().flatten().find(|e| e.name == name)
}
