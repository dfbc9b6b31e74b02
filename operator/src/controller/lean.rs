//! What the workload caches keep of each object: only what [`Workload::view`] and the plan
//! read. Real Deployments carry several containers with images, probes, resources, dozens of
//! variables and volumes; none of it decides anything here, and at 10,000 workloads it is
//! most of the operator's memory.
//!
//! Kept: name, namespace, labels, resourceVersion, generation and the operator's own
//! managedFields (as far as they are read); the pod template's labels and annotations, each
//! container's and init container's name, its entries of the variables the operator owns and
//! its mount at the trust path, the trust volume; the spec and status fields of the rollout
//! state.

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ObjectMeta};
use kube::Resource;
use serde_json::{Map, Value, json};

use crate::trust::{BUNDLE_KEY, TRUSTSTORE_KEY};
use crate::workloads::kinds::{self, Kind, template_fields};
use crate::workloads::{CONFIG_HASH, FIELD_MANAGER, OWNED_VARS, TRUST_DIR, VOLUME};

/// What the object's metadata keeps.
fn meta(m: &mut ObjectMeta) {
    *m = ObjectMeta {
        name: m.name.take(),
        namespace: m.namespace.take(),
        labels: m.labels.take(),
        resource_version: m.resource_version.take(),
        generation: m.generation.take(),
        managed_fields: m.managed_fields.take(),
        ..Default::default()
    };
}

fn container(c: Container) -> Container {
    let env = c.env.map(|env| {
        env.into_iter()
            .filter(|e| OWNED_VARS.contains(&e.name.as_str()))
            .collect()
    });
    let mounts: Option<Vec<_>> = c.volume_mounts.map(|m| {
        m.into_iter()
            .filter(|m| m.mount_path.trim_end_matches('/') == TRUST_DIR)
            .collect()
    });
    Container {
        name: c.name,
        env,
        volume_mounts: mounts.filter(|m| !m.is_empty()),
        ..Default::default()
    }
}

/// The pod template: its labels and annotations, the containers' names and our variables.
pub fn template(t: &mut PodTemplateSpec) {
    if let Some(m) = t.metadata.as_mut() {
        *m = ObjectMeta {
            labels: m.labels.take(),
            annotations: m.annotations.take(),
            ..Default::default()
        };
    }
    if let Some(spec) = t.spec.as_mut() {
        let containers = std::mem::take(&mut spec.containers);
        let init = spec.init_containers.take();
        let volumes: Option<Vec<_>> = spec
            .volumes
            .take()
            .map(|v| v.into_iter().filter(|v| v.name == VOLUME).collect());
        *spec = PodSpec {
            containers: containers.into_iter().map(container).collect(),
            init_containers: init.map(|c| c.into_iter().map(container).collect()),
            volumes: volumes.filter(|v| !v.is_empty()),
            ..Default::default()
        };
    }
}

/// A cached workload: its metadata, the lean template and the fields its rollout reads.
pub fn workload<K: Kind>(o: &mut K) {
    strip_workload(o);
    meta(o.meta_mut());
    if let Some(t) = o.pod_template_mut() {
        template(t);
    }
    o.drop_unread();
}

/// [`strip`], but keeps the operator's own managedFields entries of the object itself
/// (what `WorkloadView::owned` reads); an object that had managedFields keeps an empty list.
pub fn strip_workload<K: Resource>(o: &mut K) {
    let meta = o.meta_mut();
    let ours = meta.managed_fields.take().map(|entries| {
        entries
            .into_iter()
            .filter(|e| e.manager.as_deref() == Some(FIELD_MANAGER) && e.subresource.is_none())
            .map(|mut e| {
                e.fields_v1 = e.fields_v1.map(|f| FieldsV1(owned_fields(&f.0)));
                e.time = None;
                e
            })
            .collect::<Vec<_>>()
    });
    strip(o);
    o.meta_mut().managed_fields = ours;
}

/// Drops what the operator never reads from cached objects: `managedFields` and the
/// client-side-apply copy of the whole object.
pub fn strip<K: Resource>(o: &mut K) {
    let meta = o.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// A cached managed ConfigMap: [`strip`], and the trust bundle and truststore replaced by
/// their digests ([`digest_text`], [`digest_bytes`]): at hundreds of KB each they would be
/// most of the cache, and the plan only asks whether they changed.
pub fn managed_config_map(c: &mut k8s_openapi::api::core::v1::ConfigMap) {
    strip(c);
    if let Some(v) = c.data.as_mut().and_then(|d| d.get_mut(BUNDLE_KEY)) {
        *v = digest_text(v);
    }
    if let Some(v) = c
        .binary_data
        .as_mut()
        .and_then(|d| d.get_mut(TRUSTSTORE_KEY))
    {
        v.0 = digest_bytes(&v.0);
    }
}

/// `sha256:<hex>` of a text value; a digest stays as it is.
pub fn digest_text(v: &str) -> String {
    if v.starts_with(DIGEST) {
        return v.to_owned();
    }
    let d = ring::digest::digest(&ring::digest::SHA256, v.as_bytes());
    format!("{DIGEST}{}", crate::credentials::hex(d.as_ref()))
}

/// [`digest_text`] for binary values.
pub fn digest_bytes(v: &[u8]) -> Vec<u8> {
    if v.starts_with(DIGEST.as_bytes()) {
        return v.to_vec();
    }
    let d = ring::digest::digest(&ring::digest::SHA256, v);
    format!("{DIGEST}{}", crate::credentials::hex(d.as_ref())).into_bytes()
}

const DIGEST: &str = "sha256:";

/// Of the fields an entry names, what `objects::owned` reads: the config-hash annotation
/// and the env entries' keys per container (their `valueFrom` is most of an entry's size).
pub(super) fn owned_fields(f: &Value) -> Value {
    let paths = kinds::ALL.map(template_fields);
    let Some((path, tpl)) = paths.iter().find_map(|p| Some((p, f.pointer(p)?))) else {
        return json!({});
    };
    let mut out = Map::new();
    let hash = format!("f:{CONFIG_HASH}");
    if let Some(a) = tpl.pointer("/f:metadata/f:annotations")
        && a.get(&hash).is_some()
    {
        out.insert("f:metadata".into(), json!({"f:annotations": {hash: {}}}));
    }
    let mut spec = Map::new();
    for list in ["f:containers", "f:initContainers"] {
        let containers = tpl.get("f:spec").and_then(|s| s.get(list));
        let kept: Map<String, Value> = containers
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(key, c)| {
                let env = c.get("f:env")?.as_object()?;
                let env: Map<String, Value> = env.keys().map(|k| (k.clone(), json!({}))).collect();
                Some((key.clone(), json!({ "f:env": env })))
            })
            .collect();
        if !kept.is_empty() {
            spec.insert(list.into(), Value::Object(kept));
        }
    }
    if !spec.is_empty() {
        out.insert("f:spec".into(), Value::Object(spec));
    }
    // Back at the template's place.
    path.rsplit('/')
        .filter(|s| !s.is_empty())
        .fold(Value::Object(out), |v, key| json!({ key: v }))
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
    use k8s_openapi::api::batch::v1::CronJob;
    use serde_json::{Value, json};

    use super::*;
    use crate::api::{ExistingEnv, InitContainers};
    use crate::controller::objects::Workload;
    use crate::workloads::{self, Injection};

    /// A container as real ones look: image, ports, probes, resources, 30 variables (one of
    /// them a proxy variable of its own), mounts.
    fn container(name: &str) -> Value {
        let mut env: Vec<Value> = (0..29)
            .map(|i| json!({"name": format!("SETTING_{i}"), "value": format!("value-{i}-{}", "x".repeat(20))}))
            .collect();
        env.push(json!({"name": "NO_PROXY", "value": ".own.example"}));
        let probe = json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10});
        json!({"name": name, "image": format!("registry.example/{name}:1.2.3"),
            "command": ["/bin/server"], "args": ["--port=8080", "--verbose"],
            "ports": [{"containerPort": 8080, "name": "http"}],
            "env": env, "livenessProbe": probe, "readinessProbe": probe,
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]})
    }

    pub(crate) fn realistic(kind: &str) -> Value {
        let template = json!({
            "metadata": {"labels": {"app": "api"}, "annotations": {"team": "a"}},
            "spec": {"containers": [container("api"), container("sidecar"), container("agent")],
                     "initContainers": [container("migrate")],
                     "volumes": [{"name": "config", "configMap": {"name": "api-config"}}],
                     "serviceAccountName": "api", "nodeSelector": {"pool": "general"}}});
        let spec = match kind {
            "CronJob" => {
                json!({"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}})
            }
            _ => {
                json!({"replicas": 3, "selector": {"matchLabels": {"app": "api"}}, "template": template})
            }
        };
        json!({"metadata": {"name": "api", "namespace": "team-a", "generation": 4,
                            "resourceVersion": "77", "labels": {"egress": "proxied"},
                            "annotations": {"deployment.kubernetes.io/revision": "9"},
                            "uid": "0b1c", "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": spec,
               "status": {"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3,
                          "readyReplicas": 3, "availableReplicas": 3,
                          "currentRevision": "r1", "updateRevision": "r1",
                          "desiredNumberScheduled": 3, "updatedNumberScheduled": 3,
                          "numberAvailable": 3,
                          "conditions": [{"type": "Available", "status": "True"},
                                         {"type": "Progressing", "status": "True"}]}})
    }

    /// The lean object gives the same view and the same writes, at a fraction of the size.
    fn same_decisions<K>(kind: &str)
    where
        K: Workload + serde::Serialize + serde::de::DeserializeOwned,
    {
        let full: K = serde_json::from_value(realistic(kind)).expect("object");
        let mut lean = full.clone();
        lean.lean();
        let (a, b) = (full.view().expect("view"), lean.view().expect("view"));
        assert_eq!((&a.id, &a.labels, a.rollout), (&b.id, &b.labels, b.rollout));
        assert_eq!(a.resource_version, b.resource_version);
        let vars = vec!["SSL_CERT_FILE".to_owned()];
        let files = vec!["ca-bundle.crt".to_owned()];
        let trusts = [
            None,
            Some(workloads::TrustMount {
                vars: &vars,
                files: &files,
                bundle: "0123456789abcdef",
            }),
        ];
        for (existing_env, names, trust) in [
            (ExistingEnv::Keep, vec![], &trusts[0]),
            (ExistingEnv::Override, vec!["api".to_owned()], &trusts[0]),
            (ExistingEnv::Keep, vec![], &trusts[1]),
            (ExistingEnv::Override, vec!["api".to_owned()], &trusts[1]),
        ] {
            let inj = Injection {
                containers: &names,
                init_containers: InitContainers::Include,
                existing_env,
                managed: "egress-proxy-corp",
                slot: "main",
                hash: "v2-1",
                originals: &[],
                java_options: Some("-Dhttp.proxyHost=p -Dhttp.proxyPort=1"),
                trust: trust.clone(),
            };
            let pa = workloads::plan(&a.id, &a.template, &inj).expect("plan");
            let pb = workloads::plan(&b.id, &b.template, &inj).expect("plan");
            assert_eq!(pa, pb, "{kind} {existing_env:?}");
        }
        let size = |o: &K| serde_json::to_vec(o).expect("json").len();
        assert!(
            size(&lean) * 8 < size(&full),
            "{kind}: {} of {}",
            size(&lean),
            size(&full)
        );
    }

    #[test]
    fn the_lean_workload_decides_the_same() {
        same_decisions::<Deployment>("Deployment");
        same_decisions::<StatefulSet>("StatefulSet");
        same_decisions::<DaemonSet>("DaemonSet");
        same_decisions::<CronJob>("CronJob");
    }

    #[test]
    fn a_cached_managed_config_map_keeps_digests_of_the_bundle_and_truststore() {
        let mut c: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "egress-proxy-corp", "managedFields": [{"manager": "x"}]},
            "data": {"NO_PROXY": ".svc", "ca-bundle.crt": "PEM", "SSL_CERT_FILE": "/p"},
            "binaryData": {"truststore.p12": "AAEC"},
        }))
        .expect("ConfigMap");
        managed_config_map(&mut c);
        let data = c.data.clone().expect("data");
        assert_eq!(data["NO_PROXY"], ".svc");
        assert_eq!(data["SSL_CERT_FILE"], "/p");
        assert_eq!(data["ca-bundle.crt"], digest_text("PEM"));
        assert!(data["ca-bundle.crt"].starts_with("sha256:") && data["ca-bundle.crt"].len() == 71);
        let binary = c.binary_data.clone().expect("binary");
        assert_eq!(binary["truststore.p12"].0, digest_bytes(&[0, 1, 2]));
        assert_eq!(c.metadata.managed_fields, None);
        let again = c.clone();
        managed_config_map(&mut c);
        assert_eq!(c, again, "digesting twice changes nothing");
    }
}
