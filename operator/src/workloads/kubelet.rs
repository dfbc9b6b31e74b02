//! The proxy variables a container starts with, resolved from its pod template the way the
//! kubelet does (`makeEnvironmentVariables` in `pkg/kubelet/kubelet_pods.go`): `envFrom`
//! first, in order, then `env` in order, each variable overriding an earlier one of the same
//! name; a `value` has its `$(VAR)` references to earlier variables expanded; a missing
//! Secret, ConfigMap or key that is not `optional` keeps the container from starting
//! (`CreateContainerConfigError`). Pure: the Secrets and ConfigMaps are passed in.
//!
//! Only the variables the client models read ([`READ_VARS`]) and the trust variables
//! ([`TRUST_VARS`], kept apart) are kept; the others are resolved only as far as a `$(VAR)`
//! in one of those needs them. Values may hold credentials: `Debug` shows them redacted, and
//! no note or failure message quotes a value.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, EnvVarSource, PodTemplateSpec, Volume, VolumeMount,
};
use serde::Serialize;

use super::{TRUST_DIR, TRUST_VARS};
use crate::noproxy::dialects::java;
use crate::noproxy::{Env, READ_VARS, holds_proxy_url, redact, redact_proxy};

/// A Secret's or ConfigMap's data as read for the resolution.
#[derive(Clone, PartialEq, Eq)]
pub enum Fetched {
    /// Its data (a Secret's values decoded, lossily where they are not UTF-8).
    Found(BTreeMap<String, String>),
    /// It does not exist.
    NotFound,
    /// It could not be read (forbidden, unreachable): why.
    Unreadable(String),
}

impl fmt::Debug for Fetched {
    /// Keys only: values may be credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fetched::Found(data) => f.debug_tuple("Found").field(&data.keys()).finish(),
            Fetched::NotFound => f.write_str("NotFound"),
            Fetched::Unreadable(why) => f.debug_tuple("Unreadable").field(why).finish(),
        }
    }
}

/// The Secrets and ConfigMaps of the workload's namespace, by name. A name that is absent
/// was not looked up and counts as unreadable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Objects {
    pub secrets: BTreeMap<String, Fetched>,
    pub config_maps: BTreeMap<String, Fetched>,
}

/// Secret or ConfigMap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ObjectKind {
    Secret,
    ConfigMap,
}

impl ObjectKind {
    /// As the kubelet's not-found message spells it: `secret "x" not found`.
    fn lower(self) -> &'static str {
        match self {
            ObjectKind::Secret => "secret",
            ObjectKind::ConfigMap => "configmap",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjectKind::Secret => "Secret",
            ObjectKind::ConfigMap => "ConfigMap",
        })
    }
}

/// What a lookup in [`Objects`] gives.
enum Lookup<'a> {
    Found(&'a BTreeMap<String, String>),
    NotFound,
    Unreadable(&'a str),
}

impl Objects {
    fn get(&self, kind: ObjectKind, name: &str) -> Lookup<'_> {
        let map = match kind {
            ObjectKind::Secret => &self.secrets,
            ObjectKind::ConfigMap => &self.config_maps,
        };
        match map.get(name) {
            Some(Fetched::Found(data)) => Lookup::Found(data),
            Some(Fetched::NotFound) => Lookup::NotFound,
            Some(Fetched::Unreadable(why)) => Lookup::Unreadable(why),
            None => Lookup::Unreadable("not looked up"),
        }
    }
}

/// Every Secret and ConfigMap the template's containers refer to (`envFrom`, `valueFrom`,
/// and the ConfigMap of a configMap volume mounted at [`TRUST_DIR`]), sorted: what the
/// reader must fetch.
pub fn referenced(template: &PodTemplateSpec) -> BTreeMap<ObjectKind, Vec<String>> {
    let mut out: BTreeMap<ObjectKind, Vec<String>> = BTreeMap::new();
    for c in super::containers(template).map(|(_, c)| c) {
        let from = c.env_from.iter().flatten().filter_map(env_from_ref);
        let refs = c
            .env
            .iter()
            .flatten()
            .filter_map(|e| e.value_from.as_ref().and_then(key_ref));
        let trust = trust_dir_mount(c)
            .and_then(|m| volume(template, &m.name)?.config_map.as_ref())
            .map(|m| (ObjectKind::ConfigMap, m.name.clone()));
        for (kind, name) in from
            .map(|r| (r.kind, r.name))
            .chain(refs.map(|r| (r.kind, r.name)))
            .chain(trust)
        {
            let names = out.entry(kind).or_default();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    for names in out.values_mut() {
        names.sort();
    }
    out
}

/// The container's mount at [`TRUST_DIR`], where the operator mounts the trust files.
pub fn trust_dir_mount(c: &Container) -> Option<&VolumeMount> {
    c.volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path.trim_end_matches('/') == TRUST_DIR)
}

/// The template's volume named `name`.
pub fn volume<'t>(template: &'t PodTemplateSpec, name: &str) -> Option<&'t Volume> {
    let spec = template.spec.as_ref()?;
    spec.volumes.iter().flatten().find(|v| v.name == name)
}

/// Where a variable's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "from", rename_all = "camelCase")]
pub enum Source {
    /// `value`, with the names of the variables its `$(VAR)` references expanded to.
    #[serde(rename_all = "camelCase")]
    Value { expanded: Vec<String> },
    /// `valueFrom.secretKeyRef` or `valueFrom.configMapKeyRef`.
    #[serde(rename_all = "camelCase")]
    KeyRef {
        kind: ObjectKind,
        name: String,
        key: String,
    },
    /// `envFrom` (the variable is the key with the prefix in front).
    #[serde(rename_all = "camelCase")]
    EnvFrom {
        kind: ObjectKind,
        name: String,
        key: String,
    },
    /// `valueFrom.fieldRef` or `valueFrom.resourceFieldRef`: the Pod's own fields, which a
    /// template does not have.
    #[serde(rename_all = "camelCase")]
    Downward { field: String },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Value { expanded } if expanded.is_empty() => f.write_str("value"),
            Source::Value { expanded } => {
                let refs: Vec<String> = expanded.iter().map(|v| format!("$({v})")).collect();
                write!(f, "value, expanding {}", refs.join(", "))
            }
            Source::KeyRef { kind, name, key } => write!(f, "{kind} {name} key {key}"),
            Source::EnvFrom { kind, name, key } => write!(f, "envFrom {kind} {name} key {key}"),
            Source::Downward { field } => write!(f, "{field} of the Pod"),
        }
    }
}

/// One variable as the container starts with it.
#[derive(Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    /// The value; `None` when it cannot be known from here (see the container's notes).
    pub value: Option<String>,
    pub source: Source,
}

impl Variable {
    /// The value fit for printing: proxy URLs without their password.
    pub fn redacted_value(&self) -> Option<String> {
        self.value.as_deref().map(|v| {
            if holds_proxy_url(&self.name) {
                redact_proxy(v)
            } else if java::OPTION_VARS.contains(&self.name.as_str()) {
                java::redact_options(v)
            } else {
                redact(v)
            }
        })
    }
}

impl fmt::Debug for Variable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Variable")
            .field("name", &self.name)
            .field("value", &self.redacted_value())
            .field("source", &self.source)
            .finish()
    }
}

/// One container's proxy variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerEnv {
    pub name: String,
    pub init: bool,
    /// Why the kubelet would not start it (`CreateContainerConfigError`), as the Pod's
    /// status would say.
    pub failure: Option<String>,
    /// The [`READ_VARS`] it has, in that order (empty when it would not start).
    pub variables: Vec<Variable>,
    /// The [`TRUST_VARS`] it has, in that order (empty when it would not start).
    pub trust: Vec<Variable>,
    /// What could not be resolved or was skipped, naming variables and objects, never
    /// values.
    pub notes: Vec<String>,
}

impl ContainerEnv {
    /// The environment the client models read (the variables whose value is known).
    pub fn env(&self) -> Env {
        self.variables
            .iter()
            .filter_map(|v| v.value.as_ref().map(|val| (v.name.clone(), val.clone())))
            .collect()
    }
}

/// Every container, then every init container, resolved against `objects`.
pub fn resolve(
    template: &PodTemplateSpec,
    namespace: &str,
    objects: &Objects,
) -> Vec<ContainerEnv> {
    super::containers(template)
        .map(|(init, c)| resolve_container(c, init, namespace, objects))
        .collect()
}

/// A variable during resolution: its value, or why it is unknown.
#[derive(Clone)]
struct Slot {
    value: Result<String, String>,
    source: Source,
}

/// The kubelet's refusal to start the container.
struct Refusal(String);

fn resolve_container(c: &Container, init: bool, ns: &str, objects: &Objects) -> ContainerEnv {
    let mut vars: BTreeMap<String, Slot> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut run = || -> Result<(), Refusal> {
        for from in c.env_from.iter().flatten() {
            env_from(from, objects, &mut vars, &mut notes)?;
        }
        for e in c.env.iter().flatten() {
            if let Some(slot) = entry(e, ns, objects, &vars, &mut notes)? {
                vars.insert(e.name.clone(), slot);
            }
        }
        Ok(())
    };
    let failure = run().err().map(|Refusal(m)| m);
    let (mut variables, mut trust) = (Vec::new(), Vec::new());
    if failure.is_none() {
        variables = kept(&vars, &READ_VARS, &mut notes);
        trust = kept(&vars, &TRUST_VARS, &mut notes);
    }
    ContainerEnv {
        name: c.name.clone(),
        init,
        failure,
        variables,
        trust,
        notes,
    }
}

/// The variables among `names` the container has, in that order; a note for each unknown.
fn kept(vars: &BTreeMap<String, Slot>, names: &[&str], notes: &mut Vec<String>) -> Vec<Variable> {
    let mut out = Vec::new();
    for name in names {
        let Some(slot) = vars.get(*name) else {
            continue;
        };
        if let Err(why) = &slot.value {
            notes.push(format!("{name} is unknown: {why}; it is treated as unset"));
        }
        out.push(Variable {
            name: (*name).to_owned(),
            value: slot.value.clone().ok(),
            source: slot.source.clone(),
        });
    }
    out
}

/// A variable the result keeps, whose skipped entries are noted.
fn watched(var: &str) -> bool {
    READ_VARS.contains(&var) || TRUST_VARS.contains(&var)
}

/// A reference to a Secret or ConfigMap, from `envFrom` or `valueFrom`.
struct Ref {
    kind: ObjectKind,
    name: String,
    key: String,
    optional: bool,
}

fn env_from_ref(from: &EnvFromSource) -> Option<Ref> {
    let (kind, name, optional) = match (&from.secret_ref, &from.config_map_ref) {
        (Some(s), _) => (ObjectKind::Secret, &s.name, s.optional),
        (None, Some(m)) => (ObjectKind::ConfigMap, &m.name, m.optional),
        (None, None) => return None,
    };
    Some(Ref {
        kind,
        name: name.clone(),
        key: from.prefix.clone().unwrap_or_default(),
        optional: optional == Some(true),
    })
}

fn key_ref(from: &EnvVarSource) -> Option<Ref> {
    let (kind, name, key, optional) = match (&from.secret_key_ref, &from.config_map_key_ref) {
        (Some(s), _) => (ObjectKind::Secret, &s.name, &s.key, s.optional),
        (None, Some(m)) => (ObjectKind::ConfigMap, &m.name, &m.key, m.optional),
        (None, None) => return None,
    };
    Some(Ref {
        kind,
        name: name.clone(),
        key: key.clone(),
        optional: optional == Some(true),
    })
}

/// `envFrom`: every key of the object, with the prefix (in `Ref::key`) in front.
fn env_from(
    from: &EnvFromSource,
    objects: &Objects,
    vars: &mut BTreeMap<String, Slot>,
    notes: &mut Vec<String>,
) -> Result<(), Refusal> {
    let Some(r) = env_from_ref(from) else {
        return Ok(());
    };
    let (kind, name) = (r.kind, &r.name);
    match objects.get(kind, name) {
        Lookup::Found(data) => {
            for (key, value) in data {
                let source = Source::EnvFrom {
                    kind,
                    name: name.clone(),
                    key: key.clone(),
                };
                let slot = Slot {
                    value: Ok(value.clone()),
                    source,
                };
                vars.insert(format!("{}{key}", r.key), slot);
            }
        }
        Lookup::NotFound if r.optional => {
            notes.push(format!(
                "envFrom {kind} {name} does not exist (optional): skipped"
            ));
        }
        Lookup::NotFound => return Err(not_found(kind, name)),
        Lookup::Unreadable(why) => notes.push(format!(
            "envFrom {kind} {name} could not be read ({why}): the variables it sets are unknown"
        )),
    }
    Ok(())
}

fn not_found(kind: ObjectKind, name: &str) -> Refusal {
    Refusal(format!(
        "CreateContainerConfigError: {} \"{name}\" not found",
        kind.lower()
    ))
}

/// One `env` entry: its new slot, `None` when it sets nothing (a missing optional
/// reference), or the refusal to start.
fn entry(
    e: &EnvVar,
    ns: &str,
    objects: &Objects,
    vars: &BTreeMap<String, Slot>,
    notes: &mut Vec<String>,
) -> Result<Option<Slot>, Refusal> {
    let value = e.value.as_deref().unwrap_or_default();
    if !value.is_empty() {
        return Ok(Some(expand_entry(&e.name, value, vars, notes)));
    }
    let Some(from) = &e.value_from else {
        let source = Source::Value { expanded: vec![] };
        return Ok(Some(Slot {
            value: Ok(String::new()),
            source,
        }));
    };
    if let Some(r) = key_ref(from) {
        return key_entry(&e.name, &r, ns, objects, notes);
    }
    let field = match (&from.field_ref, &from.resource_field_ref) {
        (Some(f), _) => format!("fieldRef {}", f.field_path),
        (None, Some(r)) => format!("resourceFieldRef {}", r.resource),
        (None, None) => "an empty valueFrom".to_owned(),
    };
    Ok(Some(Slot {
        value: Err(format!(
            "it is set from {field}, which a template does not have"
        )),
        source: Source::Downward { field },
    }))
}

fn key_entry(
    var: &str,
    r: &Ref,
    ns: &str,
    objects: &Objects,
    notes: &mut Vec<String>,
) -> Result<Option<Slot>, Refusal> {
    let (kind, name, key) = (r.kind, &r.name, &r.key);
    let source = Source::KeyRef {
        kind,
        name: name.clone(),
        key: key.clone(),
    };
    let kept_var = watched(var);
    match objects.get(kind, name) {
        Lookup::Found(data) => match data.get(key) {
            Some(v) => Ok(Some(Slot {
                value: Ok(v.clone()),
                source,
            })),
            None if r.optional => {
                if kept_var {
                    notes.push(format!(
                        "{var}: {kind} {name} has no key {key} (optional): not set by this entry"
                    ));
                }
                Ok(None)
            }
            None => Err(Refusal(format!(
                "CreateContainerConfigError: couldn't find key {key} in {kind} {ns}/{name}"
            ))),
        },
        Lookup::NotFound if r.optional => {
            if kept_var {
                notes.push(format!(
                    "{var}: {kind} {name} does not exist (optional): not set by this entry"
                ));
            }
            Ok(None)
        }
        Lookup::NotFound => Err(not_found(kind, name)),
        Lookup::Unreadable(why) => Ok(Some(Slot {
            value: Err(format!("{kind} {name} could not be read ({why})")),
            source,
        })),
    }
}

/// A `value` with its references expanded. A reference to an unknown variable makes the
/// value unknown; one to an undefined variable stays as written, as the kubelet leaves it
/// (unless a Service link variable has that name, which is not resolved here).
fn expand_entry(
    var: &str,
    value: &str,
    vars: &BTreeMap<String, Slot>,
    notes: &mut Vec<String>,
) -> Slot {
    let mut expanded = Vec::new();
    let mut undefined = Vec::new();
    let mut unknown = None;
    let out = expand(value, |name| match vars.get(name) {
        Some(slot) => {
            if !expanded.iter().any(|e| e == name) {
                expanded.push(name.to_owned());
            }
            match &slot.value {
                Ok(v) => Some(v.clone()),
                Err(_) => {
                    unknown.get_or_insert_with(|| name.to_owned());
                    Some(String::new())
                }
            }
        }
        None => {
            if !undefined.iter().any(|e| e == name) {
                undefined.push(name.to_owned());
            }
            None
        }
    });
    if watched(var) {
        for u in &undefined {
            notes.push(format!(
                "{var}: $({u}) is not a variable defined before it: left as written \
                 (a Service link variable of that name is not resolved here)"
            ));
        }
    }
    let source = Source::Value { expanded };
    match unknown {
        Some(name) => Slot {
            value: Err(format!("its value expands $({name}), which is unknown")),
            source,
        },
        None => Slot {
            value: Ok(out),
            source,
        },
    }
}

/// Kubernetes' `$(VAR)` expansion (`third_party/forked/golang/expansion`): `$$` is a
/// literal `$`, `$(NAME)` is replaced by `lookup(NAME)` or kept as written when that is
/// `None`, an unclosed `$(` and any other `$` are kept.
pub fn expand(input: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            out.push('$');
            rest = escaped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(containers: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(json!({"spec": {"containers": containers}})).unwrap()
    }

    fn data(pairs: &[(&str, &str)]) -> Fetched {
        Fetched::Found(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn var(name: &str, value: Option<&str>, source: Source) -> Variable {
        Variable {
            name: name.into(),
            value: value.map(str::to_owned),
            source,
        }
    }

    fn key_ref(kind: ObjectKind, name: &str, key: &str) -> Source {
        Source::KeyRef {
            kind,
            name: name.into(),
            key: key.into(),
        }
    }

    fn literal(expanded: &[&str]) -> Source {
        Source::Value {
            expanded: expanded.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn one(t: &PodTemplateSpec, objects: &Objects) -> ContainerEnv {
        let mut all = resolve(t, "shop", objects);
        assert_eq!(all.len(), 1);
        all.remove(0)
    }

    const PROXY: &str = "http://u:pw@proxy.corp:3128";

    /// The entries the operator writes: every variable by reference to its managed objects.
    #[test]
    fn entries_the_operator_writes() {
        let mut env = super::super::proxy_url_entries("egress-proxy-web", "blue");
        env.extend(["NO_PROXY", "no_proxy"].map(|n| {
            serde_json::from_value::<EnvVar>(json!({"name": n, "valueFrom": {"configMapKeyRef":
                {"name": "egress-proxy-web", "key": "NO_PROXY"}}}))
            .unwrap()
        }));
        let t = template(json!([{"name": "app", "env": env}]));
        let objects = Objects {
            secrets: [(
                "egress-proxy-web".to_owned(),
                data(&[
                    ("slot.blue.HTTP_PROXY", PROXY),
                    ("slot.blue.HTTPS_PROXY", PROXY),
                    ("slot.green.HTTPS_PROXY", "http://other"),
                ]),
            )]
            .into(),
            config_maps: [(
                "egress-proxy-web".to_owned(),
                data(&[("NO_PROXY", ".svc,10.0.0.0/8")]),
            )]
            .into(),
        };
        assert_eq!(
            referenced(&t),
            [
                (ObjectKind::Secret, vec!["egress-proxy-web".to_owned()]),
                (ObjectKind::ConfigMap, vec!["egress-proxy-web".to_owned()]),
            ]
            .into()
        );
        let s = |k: &str| key_ref(ObjectKind::Secret, "egress-proxy-web", k);
        let m = key_ref(ObjectKind::ConfigMap, "egress-proxy-web", "NO_PROXY");
        assert_eq!(
            one(&t, &objects),
            ContainerEnv {
                name: "app".into(),
                init: false,
                failure: None,
                variables: vec![
                    var("HTTP_PROXY", Some(PROXY), s("slot.blue.HTTP_PROXY")),
                    var("http_proxy", Some(PROXY), s("slot.blue.HTTP_PROXY")),
                    var("HTTPS_PROXY", Some(PROXY), s("slot.blue.HTTPS_PROXY")),
                    var("https_proxy", Some(PROXY), s("slot.blue.HTTPS_PROXY")),
                    var("NO_PROXY", Some(".svc,10.0.0.0/8"), m.clone()),
                    var("no_proxy", Some(".svc,10.0.0.0/8"), m),
                ],
                trust: vec![],
                notes: vec![],
            }
        );
        let env = one(&t, &objects).env();
        assert_eq!(env.get("https_proxy"), Some(PROXY));
        assert_eq!(env.iter().count(), 6);
    }

    /// The trust variables are kept apart, with their sources; the ConfigMap of a configMap
    /// volume mounted at the trust directory is one the reader must fetch, another
    /// volume's or one mounted elsewhere is not.
    #[test]
    fn trust_variables_and_the_trust_volume() {
        let t: PodTemplateSpec = serde_json::from_value(json!({"spec": {
            "volumes": [
                {"name": "egress-proxy-trust", "configMap": {"name": "trust-files"}},
                {"name": "own", "configMap": {"name": "app-config"}},
                {"name": "certs", "secret": {"secretName": "tls"}},
            ],
            "containers": [{"name": "app",
                "volumeMounts": [
                    {"name": "egress-proxy-trust", "mountPath": "/etc/egress-proxy/trust/",
                     "readOnly": true},
                    {"name": "own", "mountPath": "/etc/app"},
                ],
                "env": [
                    {"name": "TRUST_DIR", "value": "/etc/egress-proxy/trust"},
                    {"name": "SSL_CERT_FILE", "valueFrom": {"configMapKeyRef":
                        {"name": "egress-proxy-web", "key": "SSL_CERT_FILE"}}},
                    {"name": "NODE_EXTRA_CA_CERTS", "value": "$(TRUST_DIR)/ca-bundle.crt"},
                    {"name": "WGETRC", "value": "$(HOME)/.wgetrc"},
                    {"name": "REQUESTS_CA_BUNDLE", "valueFrom": {"configMapKeyRef":
                        {"name": "egress-proxy-web", "key": "gone", "optional": true}}},
                    {"name": "HTTPS_PROXY", "value": "http://p:1"},
                ]}],
            "initContainers": [{"name": "setup", "volumeMounts":
                [{"name": "certs", "mountPath": "/etc/egress-proxy/trust"}]}],
        }}))
        .unwrap();
        assert_eq!(
            referenced(&t),
            [(
                ObjectKind::ConfigMap,
                vec!["egress-proxy-web".to_owned(), "trust-files".to_owned()]
            )]
            .into()
        );
        let objects = Objects {
            config_maps: [(
                "egress-proxy-web".to_owned(),
                data(&[("SSL_CERT_FILE", "/etc/egress-proxy/trust/ca-bundle.crt")]),
            )]
            .into(),
            ..Default::default()
        };
        let all = resolve(&t, "shop", &objects);
        let c = &all[0];
        assert_eq!(
            c.variables,
            [var("HTTPS_PROXY", Some("http://p:1"), literal(&[]))]
        );
        assert_eq!(
            c.trust,
            [
                var(
                    "SSL_CERT_FILE",
                    Some("/etc/egress-proxy/trust/ca-bundle.crt"),
                    key_ref(ObjectKind::ConfigMap, "egress-proxy-web", "SSL_CERT_FILE")
                ),
                var(
                    "NODE_EXTRA_CA_CERTS",
                    Some("/etc/egress-proxy/trust/ca-bundle.crt"),
                    literal(&["TRUST_DIR"])
                ),
                var("WGETRC", Some("$(HOME)/.wgetrc"), literal(&[])),
            ]
        );
        assert_eq!(
            c.notes,
            [
                "WGETRC: $(HOME) is not a variable defined before it: left as written \
                 (a Service link variable of that name is not resolved here)",
                "REQUESTS_CA_BUNDLE: ConfigMap egress-proxy-web has no key gone (optional): \
                 not set by this entry",
            ]
        );
        // The trust variables are not part of the proxy environment.
        assert_eq!(c.env().iter().count(), 1);
        let setup = &all[1];
        assert_eq!(
            trust_dir_mount(&t.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0])
                .map(|m| m.name.as_str()),
            Some("certs")
        );
        assert_eq!((setup.trust.len(), setup.notes.len()), (0, 0));
    }

    /// envFrom first (later sources win, prefix in front), then env in order; `$(VAR)`
    /// expands earlier variables only, `$$` escapes, an undefined reference stays.
    #[test]
    fn env_from_then_env_with_expansion() {
        let t = template(json!([{
            "name": "app",
            "envFrom": [
                {"configMapRef": {"name": "base"}},
                {"secretRef": {"name": "creds"}, "prefix": "PROXY_"},
            ],
            "env": [
                {"name": "HTTPS_PROXY", "value": "http://$(PROXY_USER):$(PROXY_PASS)@$(HOST):3128"},
                {"name": "HOST", "value": "late.example"},
                {"name": "no_proxy", "value": "$$(NO_PROXY),$(NO_PROXY),.corp"},
                {"name": "http_proxy", "value": ""},
            ],
        }]));
        let objects = Objects {
            secrets: [("creds".to_owned(), data(&[("USER", "u"), ("PASS", "pw")]))].into(),
            config_maps: [(
                "base".to_owned(),
                data(&[("NO_PROXY", ".svc"), ("HTTPS_PROXY", "http://base:1")]),
            )]
            .into(),
        };
        let c = one(&t, &objects);
        assert_eq!(
            c.variables,
            vec![
                var("http_proxy", Some(""), literal(&[])),
                var(
                    "HTTPS_PROXY",
                    Some("http://u:pw@$(HOST):3128"),
                    literal(&["PROXY_USER", "PROXY_PASS"])
                ),
                var(
                    "NO_PROXY",
                    Some(".svc"),
                    Source::EnvFrom {
                        kind: ObjectKind::ConfigMap,
                        name: "base".into(),
                        key: "NO_PROXY".into()
                    }
                ),
                var(
                    "no_proxy",
                    Some("$(NO_PROXY),.svc,.corp"),
                    literal(&["NO_PROXY"])
                ),
            ]
        );
        assert_eq!(
            c.notes,
            [
                "HTTPS_PROXY: $(HOST) is not a variable defined before it: left as written \
              (a Service link variable of that name is not resolved here)"
            ]
        );
        // The helper variables the expansion used are not part of the result.
        assert_eq!(c.env().get("PROXY_PASS"), None);
    }

    #[test]
    fn a_missing_required_reference_keeps_the_container_from_starting() {
        let objects = Objects {
            secrets: [("present".to_owned(), data(&[("a", "b")]))].into(),
            config_maps: [("gone".to_owned(), Fetched::NotFound)].into(),
        };
        let secret = |name: &str, key: &str| {
            json!([{"name": "app", "env": [{"name": "HTTPS_PROXY", "valueFrom":
                {"secretKeyRef": {"name": name, "key": key}}}]}])
        };
        let failure = |t| one(&template(t), &objects).failure;
        assert_eq!(
            failure(secret("egress-proxy-web", "HTTPS_PROXY")),
            // Not looked up: unknown, not a refusal.
            None
        );
        let objects = Objects {
            secrets: [
                ("present".to_owned(), data(&[("a", "b")])),
                ("egress-proxy-web".to_owned(), Fetched::NotFound),
            ]
            .into(),
            ..objects
        };
        let failure = |t| one(&template(t), &objects).failure;
        assert_eq!(
            failure(secret("egress-proxy-web", "HTTPS_PROXY")).as_deref(),
            Some("CreateContainerConfigError: secret \"egress-proxy-web\" not found")
        );
        assert_eq!(
            failure(secret("present", "HTTPS_PROXY")).as_deref(),
            Some(
                "CreateContainerConfigError: couldn't find key HTTPS_PROXY in Secret shop/present"
            )
        );
        // Any entry counts, not only the proxy variables.
        assert_eq!(
            failure(json!([{"name": "app", "envFrom": [{"configMapRef": {"name": "gone"}}]}]))
                .as_deref(),
            Some("CreateContainerConfigError: configmap \"gone\" not found")
        );
        let c = one(
            &template(json!([{"name": "app", "env": [
                {"name": "LOG", "valueFrom": {"configMapKeyRef": {"name": "gone", "key": "k"}}},
                {"name": "HTTPS_PROXY", "value": "http://p:1"},
            ]}])),
            &objects,
        );
        assert_eq!(
            (c.failure.as_deref(), c.variables.len()),
            (
                Some("CreateContainerConfigError: configmap \"gone\" not found"),
                0
            )
        );
    }

    #[test]
    fn a_missing_optional_reference_sets_nothing() {
        let t = template(json!([{"name": "app",
        "envFrom": [{"secretRef": {"name": "gone", "optional": true}}],
        "env": [
            {"name": "HTTPS_PROXY", "value": "http://first:1"},
            {"name": "HTTPS_PROXY", "valueFrom":
                {"secretKeyRef": {"name": "gone", "key": "k", "optional": true}}},
            {"name": "NO_PROXY", "valueFrom":
                {"configMapKeyRef": {"name": "cm", "key": "k", "optional": true}}},
        ]}]));
        let objects = Objects {
            secrets: [("gone".to_owned(), Fetched::NotFound)].into(),
            config_maps: [("cm".to_owned(), data(&[]))].into(),
        };
        let c = one(&t, &objects);
        assert_eq!(c.failure, None);
        assert_eq!(
            c.variables,
            [var("HTTPS_PROXY", Some("http://first:1"), literal(&[]))]
        );
        assert_eq!(
            c.notes,
            [
                "envFrom Secret gone does not exist (optional): skipped",
                "HTTPS_PROXY: Secret gone does not exist (optional): not set by this entry",
                "NO_PROXY: ConfigMap cm has no key k (optional): not set by this entry",
            ]
        );
    }

    #[test]
    fn what_cannot_be_known_is_noted_and_left_out_of_the_env() {
        let t = template(json!([{"name": "app", "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NO_PROXY", "value": "$(POD).local"},
            {"name": "HTTPS_PROXY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ]}]));
        let objects = Objects {
            secrets: [("s".to_owned(), Fetched::Unreadable("403 Forbidden".into()))].into(),
            ..Default::default()
        };
        let c = one(&t, &objects);
        assert_eq!(c.failure, None);
        assert_eq!(
            c.variables,
            [
                var("HTTPS_PROXY", None, key_ref(ObjectKind::Secret, "s", "k")),
                var("NO_PROXY", None, literal(&["POD"])),
            ]
        );
        assert_eq!(
            c.notes,
            [
                "HTTPS_PROXY is unknown: Secret s could not be read (403 Forbidden); it is treated as unset",
                "NO_PROXY is unknown: its value expands $(POD), which is unknown; it is treated as unset",
            ]
        );
        assert_eq!(c.env(), Env::new());
    }

    #[test]
    fn init_containers_follow_the_containers() {
        let t: PodTemplateSpec = serde_json::from_value(json!({"spec": {
            "initContainers": [{"name": "setup", "env": [{"name": "http_proxy", "value": "http://i:1"}]}],
            "containers": [{"name": "app"}],
        }}))
        .unwrap();
        let all = resolve(&t, "shop", &Objects::default());
        let names: Vec<(&str, bool, usize)> = all
            .iter()
            .map(|c| (c.name.as_str(), c.init, c.variables.len()))
            .collect();
        assert_eq!(names, [("app", false, 0), ("setup", true, 1)]);
    }

    #[test]
    fn expansion_as_kubernetes_does_it() {
        let lookup = |n: &str| (n == "A").then(|| "x".to_owned());
        for (input, want) in [
            ("$(A)", "x"),
            ("$(A)$(A)-$(B)", "xx-$(B)"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$x"),
            ("$A $", "$A $"),
            ("$(A", "$(A"),
            ("$()", "$()"),
            ("é$(A)é", "éxé"),
            ("", ""),
        ] {
            assert_eq!(expand(input, lookup), want, "{input}");
        }
    }

    #[test]
    fn debug_never_shows_a_value() {
        let v = var("HTTPS_PROXY", Some(PROXY), literal(&[]));
        let f = data(&[("k", "pw")]);
        let text = format!("{v:?} {f:?}");
        assert!(!text.contains("pw@"), "{text}");
        assert!(!text.contains("\"pw\""), "{text}");
        assert!(text.contains("u:***@proxy.corp:3128"), "{text}");
    }
}
