//! The trust volume in a pod template: the managed ConfigMap's trust files mounted read-only
//! at [`TRUST_DIR`] in each selected container, and what of it is ours.
//!
//! Ownership: the volume named [`VOLUME`] is ours when it is a configMap volume of the
//! managed ConfigMap; a mount is ours when it mounts [`VOLUME`] at [`TRUST_DIR`]. A volume of
//! that name from anything else, or another volume mounted at [`TRUST_DIR`], is the
//! workload's own: reported as a conflict, never replaced (`existingEnv: Override` included:
//! the application may read it).

use std::fmt;

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, KeyToPath, PodTemplateSpec, Volume, VolumeMount,
};
use serde_json::{Value, json};

pub use crate::trust::{TRUST_DIR, VOLUME};

/// What a policy's trust adds to a template.
#[derive(Debug, Clone)]
pub struct TrustMount<'a> {
    /// The trust variables, each read by `configMapKeyRef` from the managed ConfigMap's key
    /// of the same name.
    pub vars: &'a [String],
    /// The managed ConfigMap's keys mounted as files of the same name.
    pub files: &'a [String],
    /// The bundle's identity, for the [`super::TRUST_BUNDLE`] annotation.
    pub bundle: &'a str,
}

/// Trust that could not be delivered because the workload uses the name or the path itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustConflict {
    /// The pod template has its own volume named [`VOLUME`]: no trust in this workload.
    Volume,
    /// The container mounts another volume at [`TRUST_DIR`]: no trust in this container.
    Mount { container: String },
}

impl fmt::Display for TrustConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrustConflict::Volume => write!(f, "the pod template has its own volume {VOLUME}"),
            TrustConflict::Mount { container } => {
                write!(
                    f,
                    "container {container} mounts another volume at {TRUST_DIR}"
                )
            }
        }
    }
}

/// The volume named [`VOLUME`], if any.
pub(super) fn named_volume(template: &PodTemplateSpec) -> Option<&Volume> {
    let spec = template.spec.as_ref()?;
    spec.volumes.iter().flatten().find(|v| v.name == VOLUME)
}

/// Whether `v` is the trust volume of the managed ConfigMap `managed`.
pub(super) fn is_our_volume(v: &Volume, managed: &str) -> bool {
    v.name == VOLUME && v.config_map.as_ref().is_some_and(|c| c.name == managed)
}

/// The template's volume named [`VOLUME`] is the workload's own.
pub(super) fn volume_taken(template: &PodTemplateSpec, managed: &str) -> bool {
    named_volume(template).is_some_and(|v| !is_our_volume(v, managed))
}

/// The container's mount at [`TRUST_DIR`].
fn mount_at_dir(c: &Container) -> Option<&VolumeMount> {
    c.volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == TRUST_DIR)
}

/// The container mounts [`VOLUME`] at [`TRUST_DIR`].
pub(super) fn has_our_mount(c: &Container) -> bool {
    mount_at_dir(c).is_some_and(|m| m.name == VOLUME)
}

/// The container mounts something else at [`TRUST_DIR`].
pub(super) fn mount_taken(c: &Container) -> bool {
    mount_at_dir(c).is_some_and(|m| m.name != VOLUME)
}

/// Our mount exactly: read-only.
pub(super) fn mount_current(c: &Container) -> bool {
    mount_at_dir(c).is_some_and(|m| m.name == VOLUME && m.read_only == Some(true))
}

/// Our volume as it should be: the managed ConfigMap's `files`.
pub(super) fn trust_volume(managed: &str, files: &[String]) -> Volume {
    Volume {
        name: VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: managed.to_owned(),
            items: Some(
                files
                    .iter()
                    .map(|f| KeyToPath {
                        key: f.clone(),
                        path: f.clone(),
                        mode: None,
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Whether the template's volume is ours with exactly these files (the API server's
/// defaults, such as `defaultMode`, aside).
pub(super) fn volume_current(template: &PodTemplateSpec, managed: &str, files: &[String]) -> bool {
    let want = trust_volume(managed, files);
    named_volume(template).is_some_and(|v| {
        let (have, want) = (v.config_map.as_ref(), want.config_map.as_ref());
        is_our_volume(v, managed)
            && have.map(|c| &c.items) == want.map(|c| &c.items)
            && have.and_then(|c| c.optional).is_none()
    })
}

/// Our volume as a JSON list item.
pub(super) fn volume_json(managed: &str, files: &[String]) -> Value {
    let items: Vec<Value> = files.iter().map(|f| json!({"key": f, "path": f})).collect();
    json!({"name": VOLUME, "configMap": {"name": managed, "items": items}})
}

/// Our mount as a JSON list item.
pub(super) fn mount_json() -> Value {
    json!({"name": VOLUME, "mountPath": TRUST_DIR, "readOnly": true})
}

/// The patch item that deletes our mount.
pub(super) fn mount_delete() -> Value {
    json!({"mountPath": TRUST_DIR, "$patch": "delete"})
}

/// The patch item that deletes our volume.
pub(super) fn volume_delete() -> Value {
    json!({"name": VOLUME, "$patch": "delete"})
}
