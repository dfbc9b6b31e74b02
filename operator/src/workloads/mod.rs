//! The desired state of a workload's pod template: which env entries the operator owns, the
//! config-hash annotation, and the one write (server-side apply or strategic merge patch)
//! that gets a template there, or back out. Pure: no I/O.
//!
//! Ownership: an entry is the operator's when it has one of the six proxy variable names and
//! takes its value from the policy's managed Secret (proxy URLs) or ConfigMap (NO_PROXY).
//! Every other entry with one of these names is the container's own. For `java` policies
//! the operator's options are appended to `JAVA_TOOL_OPTIONS` after a marker word naming
//! the managed objects ([`java_part`]); what comes before the marker is the container's own.

mod cleanup;
pub mod hash;
pub mod kinds;
pub mod kubelet;
mod mount;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::api::core::v1::{
    ConfigMapKeySelector, Container, EnvVar, EnvVarSource, PodTemplateSpec, SecretKeySelector,
};
use serde_json::{Map, Value, json};

pub use cleanup::{cleanup_patch, original_key, originals_of};
pub(crate) use kinds::{api_version, at_template, kind_name};
pub use mount::{TRUST_DIR, TrustConflict, TrustMount, VOLUME};

use crate::api::{ExistingEnv, InitContainers, WorkloadKind};
use crate::noproxy::redact_proxy;

/// Pod-template annotation carrying the config hash; its change rolls the pods.
pub const CONFIG_HASH: &str = "egressproxy.io/config-hash";
/// Pod-template annotation naming the credential slot the Pods start with, as
/// `<managed Secret>/<slot>`: Pods carry it, so the operator can tell when no Pod of a slot is
/// left and the slot may be revoked.
pub const CREDENTIAL_SLOT: &str = "egressproxy.io/credential";
/// Pod-template annotation naming the trust bundle (`status.trust.bundle`) the Pods start
/// with: while a CA rotates, it tells which workloads run the new bundle.
pub const TRUST_BUNDLE: &str = "egressproxy.io/trust-bundle";
/// Field manager of every write to a workload.
pub const FIELD_MANAGER: &str = "egress-proxy-operator";
/// The six variables, in pairs: (HTTP_PROXY, http_proxy), (HTTPS_PROXY, https_proxy),
/// (NO_PROXY, no_proxy).
pub const PROXY_VARS: [&str; 6] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// The variable the JVM reads options from; `java` policies append theirs.
pub const JAVA_OPTIONS: &str = "JAVA_TOOL_OPTIONS";

/// The variables that point clients at the trust bundle (`spec.trust`), each read from the
/// managed ConfigMap's key of the same name. Which of them a policy sets depends on its
/// dialect (`crate::trust`).
pub const TRUST_VARS: [&str; 6] = [
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "WGETRC",
];

/// The names an entry of ours can have: [`PROXY_VARS`], [`JAVA_OPTIONS`] and [`TRUST_VARS`].
pub const OWNED_VARS: [&str; 13] = owned_vars();

const fn owned_vars() -> [&'static str; 13] {
    let mut out = [""; 13];
    let mut i = 0;
    while i < PROXY_VARS.len() {
        out[i] = PROXY_VARS[i];
        i += 1;
    }
    out[PROXY_VARS.len()] = JAVA_OPTIONS;
    let mut j = 0;
    while j < TRUST_VARS.len() {
        out[PROXY_VARS.len() + 1 + j] = TRUST_VARS[j];
        j += 1;
    }
    out
}

/// The names whose entries of ours take their value by reference to a managed object
/// ([`PROXY_VARS`] and [`TRUST_VARS`]; not [`JAVA_OPTIONS`]).
pub fn by_reference(name: &str) -> bool {
    PROXY_VARS.contains(&name) || TRUST_VARS.contains(&name)
}

/// The first word of the operator's part of `JAVA_TOOL_OPTIONS`: a system property naming
/// the managed objects, harmless to the JVM.
pub fn java_marker(managed: &str) -> String {
    format!("-Degressproxy.managed={managed}")
}

/// Where the operator's part for `managed` starts in a `JAVA_TOOL_OPTIONS` value: the last
/// whole-word marker (the part is always appended). `None`: all the container's own.
pub fn java_part(value: &str, managed: &str) -> Option<usize> {
    let marker = java_marker(managed);
    value.rmatch_indices(&marker).map(|(at, _)| at).find(|&at| {
        let before = value[..at].chars().next_back();
        let after = value[at + marker.len()..].chars().next();
        before.is_none_or(char::is_whitespace) && after.is_none_or(char::is_whitespace)
    })
}

/// The container's own part of a `JAVA_TOOL_OPTIONS` value: all before the operator's part
/// and the one space that joins them (the admission policy checks the same split).
pub fn java_own<'v>(value: &'v str, managed: &str) -> &'v str {
    match java_part(value, managed) {
        Some(0) => "",
        Some(at) => value[..at].strip_suffix(' ').unwrap_or(&value[..at]),
        None => value,
    }
}

/// A workload the operator may write to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for WorkloadId {
    /// `Deployment/api`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", kind_name(self.kind), self.name)
    }
}

/// What a policy injects, and where.
#[derive(Debug, Clone)]
pub struct Injection<'a> {
    /// Container names; empty: all containers (and init containers unless `Exclude`).
    pub containers: &'a [String],
    pub init_containers: InitContainers,
    pub existing_env: ExistingEnv,
    /// Name of the managed Secret (keys `HTTP_PROXY`, `HTTPS_PROXY`) and of the managed
    /// ConfigMap (key `NO_PROXY`).
    pub managed: &'a str,
    /// The credential slot whose keys the proxy URLs are read from.
    pub slot: &'a str,
    /// Value of the [`CONFIG_HASH`] annotation.
    pub hash: &'a str,
    /// This workload's remembered originals: an entry of ours that must go is replaced by the
    /// container's original instead of deleted.
    pub originals: &'a [Original],
    /// `java` policies: the options appended to each selected container's
    /// `JAVA_TOOL_OPTIONS` (after [`java_marker`]).
    pub java_options: Option<&'a str>,
    /// `spec.trust`: the trust volume and variables.
    pub trust: Option<TrustMount<'a>>,
}

/// How to bring a workload to the desired state.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Already there.
    None,
    /// A server-side apply body (field manager [`FIELD_MANAGER`], force) holding only what
    /// the operator owns.
    Apply(serde_json::Value),
    /// A strategic merge patch: used when a container's own entry is replaced (Override) or
    /// an entry of ours must be removed from a container the policy no longer selects.
    Patch(serde_json::Value),
}

/// The decision for one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplatePlan {
    pub write: Write,
    /// Own entries kept (`Keep`): reported, the pair is not injected in that container.
    pub conflicts: Vec<EnvConflict>,
    /// Own entries the write replaces (`Override`): to be remembered for the cleanup.
    pub overridden: Vec<Original>,
    /// Trust not delivered: the workload uses the volume name or the mount path itself.
    pub trust_conflicts: Vec<TrustConflict>,
}

/// A container that sets a proxy variable itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvConflict {
    pub container: String,
    pub variable: String,
}

impl fmt::Display for EnvConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "container {} sets {} itself",
            self.container, self.variable
        )
    }
}

/// A container's own env entry replaced under `Override`, restored by the cleanup. Its
/// value may hold credentials: `Debug` shows it redacted.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Original {
    pub container: String,
    pub env: EnvVar,
}

impl fmt::Debug for Original {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Original")
            .field("container", &self.container)
            .field("name", &self.env.name)
            .field("value", &self.env.value.as_deref().map(redact_proxy))
            .field("value_from", &self.env.value_from)
            .finish()
    }
}

/// The Secret or ConfigMap key a proxy or trust variable reads, and whether it is in the
/// ConfigMap.
fn source_of(var: &str) -> Option<(&'static str, bool)> {
    match var {
        "HTTP_PROXY" | "http_proxy" => Some(("HTTP_PROXY", false)),
        "HTTPS_PROXY" | "https_proxy" => Some(("HTTPS_PROXY", false)),
        "NO_PROXY" | "no_proxy" => Some(("NO_PROXY", true)),
        _ => TRUST_VARS.iter().find(|t| **t == var).map(|t| (*t, true)),
    }
}

/// Prefix of the managed Secret's keys that belong to a credential slot.
pub const SLOT_PREFIX: &str = "slot.";

/// The managed Secret's key holding `base` (`HTTP_PROXY`, `HTTPS_PROXY`, `source`) of
/// `slot`: `slot.<slot>.<base>`; templates written before slots read the bare name (slot "").
pub fn slot_key(slot: &str, base: &str) -> String {
    if slot.is_empty() {
        base.to_owned()
    } else {
        format!("{SLOT_PREFIX}{slot}.{base}")
    }
}

/// The [`CREDENTIAL_SLOT`] annotation value for a slot of a policy's managed Secret.
pub fn slot_annotation(managed: &str, slot: &str) -> String {
    format!("{managed}/{slot}")
}

/// Our entry for `var`, one of [`PROXY_VARS`] or [`TRUST_VARS`].
fn our_entry(var: &str, managed: &str, slot: &str) -> EnvVar {
    let (key, in_config_map) = source_of(var).unwrap_or(("", false));
    let value_from = if in_config_map {
        EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: managed.to_owned(),
                key: key.to_owned(),
                optional: None,
            }),
            ..Default::default()
        }
    } else {
        EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: managed.to_owned(),
                key: slot_key(slot, key),
                optional: None,
            }),
            ..Default::default()
        }
    };
    EnvVar {
        name: var.to_owned(),
        value: None,
        value_from: Some(value_from),
    }
}

/// The four proxy URL variables as a workload on `slot` reads them (by reference to the
/// managed Secret `managed`).
pub fn proxy_url_entries(managed: &str, slot: &str) -> Vec<EnvVar> {
    PROXY_VARS[..4]
        .iter()
        .map(|v| our_entry(v, managed, slot))
        .collect()
}

/// The credential slot the template's proxy URLs are read from (its first entry of ours).
pub fn slot_of(template: &PodTemplateSpec, managed: &str) -> Option<String> {
    containers(template)
        .flat_map(|(_, c)| c.env.iter().flatten())
        .filter(|e| is_ours(e, managed))
        .find_map(|e| {
            let key = &e.value_from.as_ref()?.secret_key_ref.as_ref()?.key;
            let base = source_of(&e.name)?.0;
            if key == base {
                return Some(String::new());
            }
            let slot = key.strip_prefix(SLOT_PREFIX)?.strip_suffix(base)?;
            slot.strip_suffix('.').map(str::to_owned)
        })
}

/// One of the proxy or trust names, taking its value from our Secret (proxy URLs) or
/// ConfigMap (NO_PROXY, trust paths), whatever the key; or a `JAVA_TOOL_OPTIONS` value
/// carrying our part.
pub fn is_ours(env: &EnvVar, managed: &str) -> bool {
    if env.name == JAVA_OPTIONS {
        let value = env.value.as_deref().filter(|_| env.value_from.is_none());
        return value.is_some_and(|v| java_part(v, managed).is_some());
    }
    let Some((_, in_config_map)) = source_of(&env.name) else {
        return false;
    };
    let from = env.value_from.as_ref();
    if in_config_map {
        from.and_then(|f| f.config_map_key_ref.as_ref())
            .is_some_and(|r| r.name == managed)
    } else {
        from.and_then(|f| f.secret_key_ref.as_ref())
            .is_some_and(|r| r.name == managed)
    }
}

/// Whether any container carries an entry that refers to this policy's managed objects
/// (the annotation alone does not say which policy wrote it).
pub fn has_entries(template: &PodTemplateSpec, managed: &str) -> bool {
    containers(template)
        .flat_map(|(_, c)| c.env.iter().flatten())
        .any(|e| is_ours(e, managed))
}

/// The template's trust-bundle annotation.
pub fn trust_bundle(template: &PodTemplateSpec) -> Option<&str> {
    annotation(template, TRUST_BUNDLE).map(String::as_str)
}

/// The template's config-hash annotation.
pub fn current_hash(template: &PodTemplateSpec) -> Option<&str> {
    annotation(template, CONFIG_HASH).map(String::as_str)
}

fn annotation<'t>(template: &'t PodTemplateSpec, key: &str) -> Option<&'t String> {
    template.metadata.as_ref()?.annotations.as_ref()?.get(key)
}

/// Every container, then every init container, with `true` for init containers.
fn containers(template: &PodTemplateSpec) -> impl Iterator<Item = (bool, &Container)> {
    let spec = template.spec.as_ref();
    let main = spec.into_iter().flat_map(|s| s.containers.iter());
    let init = spec
        .into_iter()
        .flat_map(|s| s.init_containers.iter().flatten());
    main.map(|c| (false, c)).chain(init.map(|c| (true, c)))
}

fn selects(inj: &Injection, init: bool, name: &str) -> bool {
    if inj.containers.is_empty() {
        !init || inj.init_containers == InitContainers::Include
    } else {
        inj.containers.iter().any(|c| c == name)
    }
}

/// What one container needs.
struct ContainerPlan<'t> {
    container: &'t Container,
    init: bool,
    /// Our entries it should carry, in [`PROXY_VARS`] order, then the trust variables.
    desired: Vec<EnvVar>,
    /// Names of our entries it carries but should not.
    stale: Vec<String>,
    /// Our part goes into the container's own `JAVA_TOOL_OPTIONS` value.
    merges: bool,
    /// It should mount the trust volume.
    mount: bool,
    /// It mounts the trust volume but should not.
    stale_mount: bool,
    /// Desired entries (and mount) present exactly, and nothing stale.
    up_to_date: bool,
}

/// Where the conflicts and replaced entries of one template's plan are collected.
#[derive(Default)]
struct Findings {
    conflicts: Vec<EnvConflict>,
    overridden: Vec<Original>,
    trust_conflicts: Vec<TrustConflict>,
}

/// Our entries for one group of variables (a proxy pair, or one trust variable) unless the
/// container sets one of them itself and `Keep` leaves it.
fn group_entries(
    inj: &Injection,
    c: &Container,
    group: &[&str],
    found: &mut Findings,
) -> Vec<EnvVar> {
    let env = c.env.as_deref().unwrap_or_default();
    let own: Vec<&EnvVar> = group
        .iter()
        .flat_map(|v| {
            env.iter()
                .filter(move |e| e.name == *v && !is_ours(e, inj.managed))
        })
        .collect();
    if !own.is_empty() && inj.existing_env == ExistingEnv::Keep {
        found.conflicts.extend(own.iter().map(|e| EnvConflict {
            container: c.name.clone(),
            variable: e.name.clone(),
        }));
        return Vec::new();
    }
    found.overridden.extend(own.iter().map(|e| Original {
        container: c.name.clone(),
        env: (*e).clone(),
    }));
    group
        .iter()
        .map(|v| our_entry(v, inj.managed, inj.slot))
        .collect()
}

/// The trust mount for a selected container, unless it mounts something else at the path.
fn trust_wanted(inj: &Injection, c: &Container, volume_ok: bool, found: &mut Findings) -> bool {
    if inj.trust.is_none() || !volume_ok {
        return false;
    }
    if mount::mount_taken(c) {
        let container = c.name.clone();
        found
            .trust_conflicts
            .push(TrustConflict::Mount { container });
        return false;
    }
    true
}

/// What the template's volume named [`VOLUME`] is: `free` (absent or ours: trust may be
/// delivered) and `ours` (a mount of it at the path is ours to take out).
#[derive(Debug, Clone, Copy)]
struct TemplateVolume {
    free: bool,
    ours: bool,
}

fn plan_container<'t>(
    inj: &Injection,
    init: bool,
    c: &'t Container,
    volume: TemplateVolume,
    found: &mut Findings,
) -> ContainerPlan<'t> {
    let env = c.env.as_deref().unwrap_or_default();
    let ours = |e: &EnvVar| is_ours(e, inj.managed);
    let mut desired = Vec::new();
    let selected = selects(inj, init, &c.name);
    let mount = selected && trust_wanted(inj, c, volume.free, found);
    if selected {
        for pair in PROXY_VARS.chunks(2) {
            desired.extend(group_entries(inj, c, pair, found));
        }
    }
    let merges = selected
        && match java_entry(inj, c, &mut found.conflicts) {
            Some((entry, merges)) => {
                desired.push(entry);
                merges
            }
            None => false,
        };
    if let Some(t) = inj.trust.as_ref().filter(|_| mount) {
        for var in t.vars {
            desired.extend(group_entries(inj, c, &[var.as_str()], found));
        }
    }
    let stale_mount = !mount && volume.ours && mount::has_our_mount(c);
    let stale: Vec<String> = OWNED_VARS
        .iter()
        .filter(|v| env.iter().any(|e| e.name == **v && ours(e)))
        .filter(|v| !desired.iter().any(|d| d.name == **v))
        .map(|v| (*v).to_owned())
        .collect();
    let up_to_date = stale.is_empty()
        && !stale_mount
        && (!mount || mount::mount_current(c))
        && desired.iter().all(|d| {
            env.iter().any(|e| {
                e.name == d.name
                    && e.value.as_deref().unwrap_or("") == d.value.as_deref().unwrap_or("")
                    && e.value_from == d.value_from
            })
        });
    ContainerPlan {
        container: c,
        init,
        desired,
        stale,
        merges,
        mount,
        stale_mount,
        up_to_date,
    }
}

/// The `JAVA_TOOL_OPTIONS` entry a container of a `java` policy should carry, and whether
/// it holds an own part. An own value from a Secret or ConfigMap cannot be merged into: a
/// conflict, the container gets no options.
fn java_entry(
    inj: &Injection,
    c: &Container,
    conflicts: &mut Vec<EnvConflict>,
) -> Option<(EnvVar, bool)> {
    let options = inj.java_options?;
    let ours = format!("{} {options}", java_marker(inj.managed));
    let existing = c.env.iter().flatten().find(|e| e.name == JAVA_OPTIONS);
    let own = match existing {
        Some(e) if e.value_from.is_some() => {
            conflicts.push(EnvConflict {
                container: c.name.clone(),
                variable: JAVA_OPTIONS.to_owned(),
            });
            return None;
        }
        Some(e) => java_own(e.value.as_deref().unwrap_or(""), inj.managed),
        None => "",
    };
    let value = if own.is_empty() {
        ours
    } else {
        format!("{own} {ours}")
    };
    let entry = EnvVar {
        name: JAVA_OPTIONS.to_owned(),
        value: Some(value),
        value_from: None,
    };
    Some((entry, !own.is_empty()))
}

/// What the template's trust volume needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VolumePlan {
    /// Ours, with the policy's files.
    Wanted,
    /// Ours, no longer wanted.
    Stale,
    /// Neither there nor wanted, or the workload's own.
    Absent,
}

/// Decides the write that gives `template` exactly our entries and the annotation `hash`.
pub fn plan(
    id: &WorkloadId,
    template: &PodTemplateSpec,
    inj: &Injection,
) -> Result<TemplatePlan, EncodeError> {
    let mut found = Findings::default();
    let taken = inj.trust.is_some() && mount::volume_taken(template, inj.managed);
    if taken {
        found.trust_conflicts.push(TrustConflict::Volume);
    }
    let has_ours =
        mount::named_volume(template).is_some_and(|v| mount::is_our_volume(v, inj.managed));
    let volume = TemplateVolume {
        free: !taken,
        ours: has_ours,
    };
    let plans: Vec<ContainerPlan> = containers(template)
        .map(|(init, c)| plan_container(inj, init, c, volume, &mut found))
        .collect();
    let volume = match (plans.iter().any(|p| p.mount), has_ours) {
        (true, _) => VolumePlan::Wanted,
        (false, true) => VolumePlan::Stale,
        (false, false) => VolumePlan::Absent,
    };
    let volume_current = match (volume, &inj.trust) {
        (VolumePlan::Wanted, Some(t)) => mount::volume_current(template, inj.managed, t.files),
        (VolumePlan::Stale, _) => false,
        _ => true,
    };
    let bundle = inj.trust.as_ref().map(|t| t.bundle.to_owned());
    let stale_bundle = bundle.is_none() && annotation(template, TRUST_BUNDLE).is_some();
    let replaces = !found.overridden.is_empty()
        || stale_bundle
        || volume == VolumePlan::Stale
        || plans
            .iter()
            .any(|p| !p.stale.is_empty() || p.stale_mount || (p.merges && !p.up_to_date));
    let write = if replaces {
        Write::Patch(patch_body(id, &plans, inj, volume, stale_bundle)?)
    } else if plans.iter().all(|p| p.up_to_date)
        && volume_current
        && annotation(template, TRUST_BUNDLE) == bundle.as_ref()
        && current_hash(template) == Some(inj.hash)
        && annotation(template, CREDENTIAL_SLOT) == Some(&slot_annotation(inj.managed, inj.slot))
    {
        Write::None
    } else {
        Write::Apply(apply_body(id, &plans, inj, volume)?)
    };
    Ok(TemplatePlan {
        write,
        conflicts: found.conflicts,
        overridden: found.overridden,
        trust_conflicts: found.trust_conflicts,
    })
}

/// An env entry that could not be written as JSON. The message names the entry, never its
/// value.
#[derive(Debug, thiserror::Error)]
#[error("encoding the env entry {name} of container {container}: {source}")]
pub struct EncodeError {
    pub container: String,
    pub name: String,
    source: serde_json::Error,
}

/// `value` as JSON. (A `null` in its place would delete the field in a merge patch.)
pub(crate) fn encode<T: serde::Serialize>(
    container: &str,
    name: &str,
    value: &T,
) -> Result<Value, EncodeError> {
    serde_json::to_value(value).map_err(|source| EncodeError {
        container: container.to_owned(),
        name: name.to_owned(),
        source,
    })
}

/// `{"containers": [...], "initContainers": [...], "volumes": [...]}` with the non-empty
/// lists of `{"name", "env": entries(plan), "volumeMounts": mounts(plan)}`, and `volume`.
fn pod_spec(
    plans: &[ContainerPlan],
    entries: impl Fn(&ContainerPlan) -> Result<Vec<Value>, EncodeError>,
    mounts: impl Fn(&ContainerPlan) -> Option<Value>,
    volume: Option<Value>,
) -> Result<Value, EncodeError> {
    let mut spec = Map::new();
    for (init, field) in [(false, "containers"), (true, "initContainers")] {
        let mut list = Vec::new();
        for p in plans.iter().filter(|p| p.init == init) {
            let env = entries(p)?;
            let mount = mounts(p);
            if env.is_empty() && mount.is_none() {
                continue;
            }
            let mut item = json!({"name": p.container.name});
            if !env.is_empty() {
                item["env"] = Value::Array(env);
            }
            if let Some(m) = mount {
                item["volumeMounts"] = json!([m]);
            }
            list.push(item);
        }
        if !list.is_empty() {
            spec.insert(field.to_owned(), Value::Array(list));
        }
    }
    if let Some(v) = volume {
        spec.insert("volumes".to_owned(), json!([v]));
    }
    Ok(Value::Object(spec))
}

/// Our volume as the write should carry it: the item itself, or its delete in a patch.
fn volume_item(inj: &Injection, volume: VolumePlan, patch: bool) -> Option<Value> {
    match (volume, &inj.trust) {
        (VolumePlan::Wanted, Some(t)) => Some(mount::volume_json(inj.managed, t.files)),
        (VolumePlan::Stale, _) if patch => Some(mount::volume_delete()),
        _ => None,
    }
}

/// The annotations every injected template carries, and the trust bundle's; `stale_bundle`:
/// a patch takes the bundle's out.
fn annotations(inj: &Injection, stale_bundle: bool) -> Value {
    let mut out =
        json!({CONFIG_HASH: inj.hash, CREDENTIAL_SLOT: slot_annotation(inj.managed, inj.slot)});
    match &inj.trust {
        Some(t) => out[TRUST_BUNDLE] = json!(t.bundle),
        None if stale_bundle => out[TRUST_BUNDLE] = Value::Null,
        None => {}
    }
    out
}

fn apply_body(
    id: &WorkloadId,
    plans: &[ContainerPlan],
    inj: &Injection,
    volume: VolumePlan,
) -> Result<Value, EncodeError> {
    let spec = pod_spec(
        plans,
        |p| {
            let c = &p.container.name;
            p.desired.iter().map(|e| encode(c, &e.name, e)).collect()
        },
        |p| p.mount.then(mount::mount_json),
        volume_item(inj, volume, false),
    )?;
    let mut body = at_template(
        id.kind,
        json!({"metadata": {"annotations": annotations(inj, false)}, "spec": spec}),
    );
    body["apiVersion"] = json!(api_version(id.kind));
    body["kind"] = json!(kind_name(id.kind));
    body["metadata"] = json!({"name": id.name, "namespace": id.namespace});
    Ok(body)
}

/// A strategic-merge patch value that turns `old` into `new`: keys of `old` missing from
/// `new` are set to null, objects are compared recursively.
fn replacing(old: Option<&Value>, new: &Value) -> Value {
    match (old, new) {
        (Some(Value::Object(old)), Value::Object(new)) => {
            let mut out: Map<String, Value> = new
                .iter()
                .map(|(k, v)| (k.clone(), replacing(old.get(k), v)))
                .collect();
            for k in old.keys().filter(|k| !new.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

/// Our entry as a patch item replacing whatever entry of that name the container has.
fn replacing_entry(c: &Container, desired: &EnvVar) -> Result<Value, EncodeError> {
    let name = &desired.name;
    if desired.value_from.is_none() {
        return Ok(json!({"name": name, "value": desired.value}));
    }
    let old = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == *name)
        .and_then(|e| e.value_from.as_ref())
        .map(|f| encode(&c.name, name, f))
        .transpose()?;
    let new = match &desired.value_from {
        Some(f) => encode(&c.name, name, f)?,
        None => Value::Null,
    };
    Ok(json!({
        "name": name,
        "value": null,
        "valueFrom": replacing(old.as_ref(), &new),
    }))
}

fn patch_body(
    id: &WorkloadId,
    plans: &[ContainerPlan],
    inj: &Injection,
    volume: VolumePlan,
    stale_bundle: bool,
) -> Result<Value, EncodeError> {
    let mounts = |p: &ContainerPlan| match (p.mount, p.stale_mount) {
        (true, _) => Some(mount::mount_json()),
        (false, true) => Some(mount::mount_delete()),
        _ => None,
    };
    let entries = |p: &ContainerPlan| {
        let mut out = Vec::new();
        for d in &p.desired {
            out.push(replacing_entry(p.container, d)?);
        }
        let env = p.container.env.as_deref().unwrap_or_default();
        for n in &p.stale {
            if let Some(ours) = env.iter().find(|e| e.name == *n) {
                out.push(cleanup::removal(
                    ours,
                    n,
                    inj.managed,
                    &p.container.name,
                    inj.originals,
                )?);
            }
        }
        Ok(out)
    };
    let spec = pod_spec(plans, entries, mounts, volume_item(inj, volume, true))?;
    Ok(at_template(
        id.kind,
        json!({"metadata": {"annotations": annotations(inj, stale_bundle)}, "spec": spec}),
    ))
}
