//! Undoing an injection, and where replaced own entries are remembered.

use std::collections::BTreeMap;
use std::ops::Bound;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use serde_json::{Map, Value, json};

use super::{
    CONFIG_HASH, CREDENTIAL_SLOT, EncodeError, JAVA_OPTIONS, OWNED_VARS, Original, TRUST_BUNDLE,
    WorkloadId, by_reference, containers, encode, is_ours, java_own, kind_name, mount, replacing,
};
use crate::api::WorkloadKind;
use crate::credentials::hex;

/// Prefix of the managed Secret's data keys holding [`Original`]s.
const ORIGINAL_PREFIX: &str = "original.";
const MAX_KEY: usize = 253;

/// A strategic merge patch that removes our entries and trust mounts from every container
/// and init container, restores the [`Original`] of an entry instead when there is one (for
/// this workload: pass only its originals), removes our trust volume and the config-hash and
/// credential-slot annotations. `None` when
/// the template carries nothing of ours. The patch may contain restored values: never log it.
pub fn cleanup_patch(
    kind: WorkloadKind,
    template: &PodTemplateSpec,
    managed: &str,
    originals: &[Original],
) -> Result<Option<serde_json::Value>, EncodeError> {
    let mut spec = Map::new();
    let mut any = false;
    let volume = mount::named_volume(template);
    let ours_volume = volume.is_some_and(|v| mount::is_our_volume(v, managed));
    for (init, field) in [(false, "containers"), (true, "initContainers")] {
        let mut list = Vec::new();
        for (_, c) in containers(template).filter(|(i, _)| *i == init) {
            let env = c.env.as_deref().unwrap_or_default();
            let mut items: Vec<Value> = Vec::new();
            for var in OWNED_VARS {
                let ours = env.iter().find(|e| e.name == var && is_ours(e, managed));
                if let Some(ours) = ours {
                    items.push(removal(ours, var, managed, &c.name, originals)?);
                }
            }
            let mut item = json!({"name": c.name});
            if !items.is_empty() {
                item["env"] = Value::Array(items);
            }
            if ours_volume && mount::has_our_mount(c) {
                item["volumeMounts"] = json!([mount::mount_delete()]);
            }
            if item.as_object().is_some_and(|o| o.len() > 1) {
                list.push(item);
            }
        }
        if !list.is_empty() {
            any = true;
            spec.insert(field.to_owned(), Value::Array(list));
        }
    }
    if ours_volume {
        any = true;
        spec.insert("volumes".to_owned(), json!([mount::volume_delete()]));
    }
    if !any && super::current_hash(template).is_none() {
        return Ok(None);
    }
    let mut tpl = json!({"metadata": {"annotations": {CONFIG_HASH: null, CREDENTIAL_SLOT: null}}});
    if super::trust_bundle(template).is_some() {
        tpl["metadata"]["annotations"][TRUST_BUNDLE] = Value::Null;
    }
    if !spec.is_empty() {
        tpl["spec"] = Value::Object(spec);
    }
    Ok(Some(super::at_template(kind, tpl)))
}

/// The patch entry that takes our `var` out of `container`: the container's original entry
/// when one is remembered, otherwise a delete.
pub(crate) fn removal(
    ours: &EnvVar,
    var: &str,
    managed: &str,
    container: &str,
    originals: &[Original],
) -> Result<Value, EncodeError> {
    if var == JAVA_OPTIONS {
        let own = java_own(ours.value.as_deref().unwrap_or(""), managed);
        if !own.is_empty() {
            return Ok(json!({"name": var, "value": own}));
        }
    }
    let original = originals
        .iter()
        .find(|o| o.container == container && o.env.name == var);
    let Some(o) = original else {
        return Ok(json!({"name": var, "$patch": "delete"}));
    };
    let old = ours
        .value_from
        .as_ref()
        .map(|f| encode(container, var, f))
        .transpose()?;
    // The original had no valueFrom: null removes ours.
    let value_from = match &o.env.value_from {
        Some(f) => replacing(old.as_ref(), &encode(container, var, f)?),
        None => Value::Null,
    };
    Ok(json!({"name": var, "value": o.env.value, "valueFrom": value_from}))
}

/// Key of the managed Secret's data under which the [`Original`] of `variable` in
/// `container` of workload `id` is stored:
/// `original.<Kind>.<namespace>.<name>.<container>.<variable>`, or, when that would not be
/// a valid key of at most 253 characters or could be read two ways,
/// `original.<40 hex of SHA-256>`.
pub fn original_key(id: &WorkloadId, container: &str, variable: &str) -> String {
    let kind = kind_name(id.kind);
    let plain = format!(
        "{ORIGINAL_PREFIX}{kind}.{}.{}.{container}.{variable}",
        id.namespace, id.name
    );
    let key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    // Only the name may contain dots: the other parts are then read back unambiguously.
    let dotless = [id.namespace.as_str(), container, variable]
        .iter()
        .all(|p| !p.is_empty() && !p.contains('.'));
    if plain.len() <= MAX_KEY && dotless && plain.chars().all(key_char) {
        return plain;
    }
    let mut input = Vec::new();
    for part in [kind, &id.namespace, &id.name, container, variable] {
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part.as_bytes());
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, &input);
    format!("{ORIGINAL_PREFIX}{}", &hex(digest.as_ref())[..40])
}

/// The reverse lookup: the [`Original`]s of workload `id` stored in `data` (the managed
/// Secret's data), for the containers of `template`, with their keys. Entries that do not
/// parse are skipped.
pub fn originals_of(
    id: &WorkloadId,
    template: &PodTemplateSpec,
    data: &BTreeMap<String, ByteString>,
) -> Vec<(String, Original)> {
    let mut out = Vec::new();
    // Most managed Secrets hold no originals: then no key need be computed.
    let from = (Bound::Included(ORIGINAL_PREFIX), Bound::Unbounded);
    let any = data.range::<str, _>(from).next();
    if !any.is_some_and(|(k, _)| k.starts_with(ORIGINAL_PREFIX)) {
        return out;
    }
    for (_, c) in containers(template) {
        for var in OWNED_VARS.into_iter().filter(|v| by_reference(v)) {
            let key = original_key(id, &c.name, var);
            let found = data
                .get(&key)
                .and_then(|b| serde_json::from_slice::<Original>(&b.0).ok())
                .filter(|o| o.container == c.name && o.env.name == var);
            if let Some(o) = found {
                out.push((key, o));
            }
        }
    }
    out
}
