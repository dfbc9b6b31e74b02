//! `explain --workload NAMESPACE/KIND/NAME URL`: the live workload's containers, each with
//! its proxy variables resolved as the kubelet would ([`crate::workloads::kubelet`]) and
//! each dialect's decision for the URL. The dialect is `--dialect`'s, else that of the
//! EgressProxyPolicy whose managed objects the container's variables come from, else of the
//! policy that selects the workload, else every dialect.
//!
//! Trust (`spec.trust`): each container's trust variables, what is mounted at the trust
//! directory and the certificates of the bundle there, and whether the template carries the
//! bundle its policy delivers now.
//!
//! Pure: parsing, the choice of dialects, the report and its text. I/O: [`read`].

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, PodTemplateSpec, Secret, Volume, VolumeMount,
};
use k8s_openapi::jiff::Timestamp;
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use crate::api::{EgressProxyPolicy, WorkloadKind};
use crate::credentials::managed_name;
use crate::noproxy::dialects::java;
use crate::noproxy::{Decision, Dialect, Env, Explanation, Matcher, Target, redact};
use crate::trust::{BUNDLE_KEY, Certificate, RootSet, TRUST_DIR, VOLUME};
use crate::workloads::kinds::{self, Kind, Visit};
use crate::workloads::kubelet::{
    self, ContainerEnv, Fetched, ObjectKind, Objects, Source, Variable,
};
use crate::workloads::{TRUST_BUNDLE, is_ours, kind_name, trust_bundle};

/// A workload named on the command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkloadRef {
    pub namespace: String,
    #[serde(serialize_with = "serialize_kind")]
    pub kind: WorkloadKind,
    pub name: String,
}

fn serialize_kind<S: serde::Serializer>(k: &WorkloadKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind_name(*k))
}

impl std::fmt::Display for WorkloadRef {
    /// `Deployment shop/web`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}/{}",
            kind_name(self.kind),
            self.namespace,
            self.name
        )
    }
}

/// Parses `NAMESPACE/KIND/NAME`; KIND is case-insensitive, singular, plural or short
/// (`deploy`, `sts`, `ds`, `cj`), optionally with `.apps` (`.batch` for CronJob).
pub fn parse_workload(s: &str) -> anyhow::Result<WorkloadRef> {
    let parts: Vec<&str> = s.split('/').collect();
    let [namespace, kind, name] = parts[..] else {
        anyhow::bail!("--workload {s:?}: expected NAMESPACE/KIND/NAME, e.g. shop/deploy/web");
    };
    anyhow::ensure!(
        !namespace.is_empty() && !name.is_empty(),
        "--workload {s:?}: expected NAMESPACE/KIND/NAME, e.g. shop/deploy/web"
    );
    let kind = parse_kind(kind)
        .with_context(|| format!("--workload {s:?}: kind {kind:?} is not {}", kinds_listed()))?;
    Ok(WorkloadRef {
        namespace: namespace.to_owned(),
        kind,
        name: name.to_owned(),
    })
}

fn parse_kind(kind: &str) -> Option<WorkloadKind> {
    let k = kind.to_ascii_lowercase();
    kinds::ALL.into_iter().find(|w| {
        let i = kinds::info(*w);
        let k = k.strip_suffix(&format!(".{}", i.group)).unwrap_or(&k);
        k == i.kind.to_ascii_lowercase() || k == i.plural || i.short_names.contains(&k)
    })
}

/// `Deployment, StatefulSet, DaemonSet or CronJob`.
fn kinds_listed() -> String {
    let names = kinds::ALL.map(kind_name);
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// `--dialect`: one dialect or `all`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DialectFlag {
    All,
    One(Dialect),
}

impl DialectFlag {
    fn dialects(self) -> Vec<Dialect> {
        match self {
            DialectFlag::All => Dialect::ALL.to_vec(),
            DialectFlag::One(d) => vec![d],
        }
    }
}

/// What was read from the cluster. (No `Debug`: a template's literal values may hold
/// credentials.)
pub struct Live {
    pub workload: WorkloadRef,
    /// The workload's own labels (what policies select on).
    pub labels: BTreeMap<String, String>,
    pub template: PodTemplateSpec,
    pub objects: Objects,
    /// The namespace's policies, or why they could not be listed.
    pub policies: Result<Vec<EgressProxyPolicy>, String>,
    /// When it was read (what an expired certificate is told by).
    pub now: Timestamp,
}

/// The dialects that explain one container, and why those.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialectChoice {
    pub dialects: Vec<Dialect>,
    pub from: String,
}

/// `--dialect` wins; then the policies whose managed Secret or ConfigMap this container's
/// proxy variables come from; then the policies that select the workload; else every
/// dialect. Several policies with different dialects: each of their dialects.
pub fn choose_dialects(
    flag: Option<DialectFlag>,
    live: &Live,
    container: Option<&Container>,
) -> DialectChoice {
    if let Some(f) = flag {
        return DialectChoice {
            dialects: f.dialects(),
            from: "given with --dialect".into(),
        };
    }
    let policies = match &live.policies {
        Ok(p) => p,
        Err(why) => {
            return DialectChoice {
                dialects: Dialect::ALL.to_vec(),
                from: format!("EgressProxyPolicies could not be listed ({why})"),
            };
        }
    };
    let manages = |p: &&EgressProxyPolicy| {
        let managed = managed_name(&p.name_any());
        container.is_some_and(|c| c.env.iter().flatten().any(|e| is_ours(e, &managed)))
    };
    let managing: Vec<&EgressProxyPolicy> = policies.iter().filter(manages).collect();
    if !managing.is_empty() {
        return from_policies(
            &managing,
            "its proxy variables come from the managed objects of",
        );
    }
    let selecting: Vec<&EgressProxyPolicy> = policies
        .iter()
        .filter(|p| selects(p, live.workload.kind, &live.labels))
        .collect();
    if !selecting.is_empty() {
        return from_policies(
            &selecting,
            "no policy sets its variables; the workload is selected by",
        );
    }
    DialectChoice {
        dialects: Dialect::ALL.to_vec(),
        from: "no EgressProxyPolicy manages or selects this workload".into(),
    }
}

fn from_policies(policies: &[&EgressProxyPolicy], why: &str) -> DialectChoice {
    let used: Vec<Dialect> = policies.iter().map(|p| p.spec.no_proxy.dialect).collect();
    let names: Vec<String> = policies
        .iter()
        .map(|p| format!("{} ({})", p.name_any(), p.spec.no_proxy.dialect))
        .collect();
    DialectChoice {
        dialects: Dialect::ALL
            .into_iter()
            .filter(|d| used.contains(d))
            .collect(),
        from: format!("{why} EgressProxyPolicy {}", names.join(", ")),
    }
}

/// Whether `p` selects a workload of `kind` with `labels` (an empty or invalid selector
/// selects nothing), as the operator decides it.
fn selects(p: &EgressProxyPolicy, kind: WorkloadKind, labels: &BTreeMap<String, String>) -> bool {
    Selector::try_from(p.spec.workload_selector.clone()).is_ok_and(|s| {
        !s.selects_all() && p.spec.workload_kinds.contains(&kind) && s.matches(labels)
    })
}

/// The answer, every value redacted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub workload: WorkloadRef,
    pub url: String,
    /// The trust bundle of the workload's policy against the template's (`null`: no policy
    /// delivers trust and the template names no bundle).
    pub trust: Option<WorkloadTrust>,
    pub containers: Vec<ContainerReport>,
}

/// One container's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerReport {
    pub name: String,
    pub init: bool,
    /// Why the kubelet would not start it; then there is no decision.
    pub failure: Option<String>,
    pub variables: Vec<VariableReport>,
    pub notes: Vec<String>,
    /// Why these dialects.
    pub dialect_from: String,
    pub explanations: Vec<Explanation>,
    /// Its trust setup (`null`: no trust variable, no JVM truststore, nothing mounted at the
    /// trust directory).
    pub trust: Option<ContainerTrust>,
}

/// A proxy variable with its value redacted (`null`: unknown, see the notes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableReport {
    pub name: String,
    pub value: Option<String>,
    pub source: Source,
}

/// The report for `url` (already parsed as `target`).
pub fn report(live: &Live, flag: Option<DialectFlag>, target: &Target, url: &str) -> Report {
    let envs = kubelet::resolve(&live.template, &live.workload.namespace, &live.objects);
    let containers = envs
        .iter()
        .map(|c| {
            let spec = container_spec(&live.template, c);
            let mut r = container_report(c, choose_dialects(flag, live, spec), target, url);
            r.trust = container_trust(live, c, spec);
            r
        })
        .collect();
    Report {
        workload: live.workload.clone(),
        url: redact(url),
        trust: workload_trust(live),
        containers,
    }
}

fn container_spec<'t>(t: &'t PodTemplateSpec, c: &ContainerEnv) -> Option<&'t Container> {
    let spec = t.spec.as_ref()?;
    let list = if c.init {
        spec.init_containers.as_deref().unwrap_or_default()
    } else {
        &spec.containers
    };
    list.iter().find(|x| x.name == c.name)
}

fn container_report(
    c: &ContainerEnv,
    choice: DialectChoice,
    target: &Target,
    url: &str,
) -> ContainerReport {
    let env: Env = c.env();
    let variables = variable_reports(&c.variables, &env);
    let explanations = if c.failure.is_some() {
        Vec::new()
    } else {
        choice
            .dialects
            .iter()
            .map(|d| Matcher::new(*d, &env).decide(target, url))
            .collect()
    };
    ContainerReport {
        name: c.name.clone(),
        init: c.init,
        failure: c.failure.clone(),
        variables,
        notes: c.notes.clone(),
        dialect_from: choice.from,
        explanations,
        trust: None,
    }
}

/// The variables with their values redacted, and any proxy URL of `env` they quote too.
fn variable_reports(vars: &[Variable], env: &Env) -> Vec<VariableReport> {
    let secrets = env.proxy_secrets();
    vars.iter()
        .map(|v| VariableReport {
            name: v.name.clone(),
            value: v.redacted_value().map(|val| {
                secrets
                    .iter()
                    .fold(val, |acc, (raw, red)| acc.replace(raw.as_str(), red))
            }),
            source: v.source.clone(),
        })
        .collect()
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let mut out = format!("{}, URL {}\n", r.workload, r.url);
    if let Some(t) = &r.trust {
        out.push_str(&workload_trust_text(t));
    }
    for c in &r.containers {
        let what = if c.init {
            "init container"
        } else {
            "container"
        };
        out.push_str(&format!("\n{what} {}\n", c.name));
        if let Some(f) = &c.failure {
            out.push_str(&format!("  would not start: {f}\n"));
        }
        let width = c.variables.iter().map(|v| v.name.len()).max().unwrap_or(0);
        for v in &c.variables {
            let value = v.value.as_deref().unwrap_or("(unknown)");
            let value = if value.is_empty() { "\"\"" } else { value };
            out.push_str(&format!("  {:width$}  {value}  ({})\n", v.name, v.source));
        }
        if c.variables.is_empty() && c.failure.is_none() {
            out.push_str("  no proxy variables\n");
        }
        for n in &c.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
        if c.failure.is_none() {
            let names: Vec<&str> = c.explanations.iter().map(|x| x.dialect.name()).collect();
            let names = if names.len() == Dialect::ALL.len() {
                "all".to_owned()
            } else {
                names.join(", ")
            };
            out.push_str(&format!("  dialect: {names} ({})\n", c.dialect_from));
            out.push_str(&decisions(&c.explanations, "  "));
        }
        if let Some(t) = &c.trust {
            out.push_str(&trust_text(t));
        }
    }
    out.push_str(
        "\nNot visible here: variables the image sets (ENV in its Dockerfile) and proxy \
         settings the program makes itself.\n",
    );
    out
}

/// Each dialect's decision on one line and its reason on the next, indented by `indent`.
pub(super) fn decisions(results: &[Explanation], indent: &str) -> String {
    let mut out = String::new();
    let width = results
        .iter()
        .map(|r| r.dialect.name().len())
        .max()
        .unwrap_or(0);
    for r in results {
        let what = match (r.decision, &r.proxy) {
            (Decision::Proxy, Some(p)) => format!("proxy   via {p}"),
            (Decision::Proxy, None) => "proxy".to_owned(),
            (Decision::Direct, _) => "direct".to_owned(),
            (Decision::Error, _) => "ERROR".to_owned(),
        };
        out.push_str(&format!("{indent}{:width$}  {what}\n", r.dialect.name()));
        out.push_str(&format!("{indent}{:width$}    {}\n", "", r.reason));
    }
    out
}

/// How many of a bundle's certificates are listed (the CA sources come first in the
/// bundles the operator writes, the root set after them).
const SHOWN_CERTIFICATES: usize = 3;

/// The trust bundle the workload's policy delivers against the one its template names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadTrust {
    /// The EgressProxyPolicy with `spec.trust` whose managed objects the template uses, else
    /// one that selects the workload (`null`: none).
    pub policy: Option<String>,
    /// Its `status.trust.bundle` (`null`: not computed, e.g. a source is invalid).
    pub bundle: Option<String>,
    /// The template's annotation `egressproxy.io/trust-bundle`: the bundle its Pods start with.
    pub template: Option<String>,
    /// The template carries the policy's bundle.
    pub current: bool,
}

/// One container's trust setup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerTrust {
    /// The trust variables (SSL_CERT_FILE, CURL_CA_BUNDLE...), resolved as the kubelet would.
    pub variables: Vec<VariableReport>,
    /// The JVM's truststore as its `-D` options set it (`javax.net.ssl.trustStore`, with
    /// `javax.net.ssl.trustStoreType` in parentheses).
    pub java_trust_store: Option<String>,
    /// What is mounted at the trust directory.
    pub mount: TrustMount,
    /// The bundle file there, when a configMap volume is mounted.
    pub bundle: Option<BundleReport>,
    pub notes: Vec<String>,
}

/// What is mounted at the trust directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum TrustMount {
    /// Nothing.
    None,
    /// The operator's: the trust volume, a configMap volume of a policy's managed ConfigMap.
    #[serde(rename_all = "camelCase")]
    Operator {
        volume: String,
        config_map: String,
        policy: String,
        read_only: bool,
    },
    /// Another volume: the workload's own.
    #[serde(rename_all = "camelCase")]
    Other {
        volume: String,
        /// What the volume is, e.g. `ConfigMap corp-ca`, `hostPath /etc/ssl`.
        source: String,
        read_only: bool,
    },
}

/// The `ca-bundle.crt` of a mounted ConfigMap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleReport {
    pub config_map: String,
    /// The key mounted as `ca-bundle.crt` (`null`: none is).
    pub key: Option<String>,
    /// First 16 hex digits of its SHA-256, as `status.trust.bundle` names a bundle.
    pub id: Option<String>,
    /// How many certificates it holds (`null`: not read, see `problem`).
    pub count: Option<usize>,
    /// The first few of them, in order.
    pub certificates: Vec<CertificateReport>,
    /// Why it could not be read or listed.
    pub problem: Option<String>,
}

/// One certificate of a bundle (certificates are public).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateReport {
    pub subject: String,
    /// SHA-256 of the DER, lowercase hex.
    pub sha256: String,
    /// RFC 3339.
    pub not_after: String,
    pub expired: bool,
}

/// The policy delivering trust to the workload, its bundle and the template's; `None`
/// when no policy delivers trust and the template names no bundle.
fn workload_trust(live: &Live) -> Option<WorkloadTrust> {
    let template = trust_bundle(&live.template).map(str::to_owned);
    let policies: &[EgressProxyPolicy] = live.policies.as_deref().unwrap_or_default();
    let refs = kubelet::referenced(&live.template);
    let used = |p: &&EgressProxyPolicy| {
        let managed = managed_name(&p.name_any());
        refs.get(&ObjectKind::ConfigMap)
            .is_some_and(|names| names.contains(&managed))
    };
    let trusting = || policies.iter().filter(|p| p.spec.trust.is_some());
    let policy = trusting()
        .find(used)
        .or_else(|| trusting().find(|p| selects(p, live.workload.kind, &live.labels)));
    if policy.is_none() && template.is_none() {
        return None;
    }
    let bundle = policy.and_then(|p| Some(p.status.as_ref()?.trust.as_ref()?.bundle.clone()));
    Some(WorkloadTrust {
        policy: policy.map(|p| p.name_any()),
        current: bundle.is_some() && bundle == template,
        bundle,
        template,
    })
}

/// The container's trust setup; `None` when it has none at all.
fn container_trust(
    live: &Live,
    c: &ContainerEnv,
    spec: Option<&Container>,
) -> Option<ContainerTrust> {
    let env = c.env();
    let variables = variable_reports(&c.trust, &env);
    let java_trust_store = java_trust_store(&env);
    let at = spec.and_then(kubelet::trust_dir_mount);
    let volume = at.and_then(|m| kubelet::volume(&live.template, &m.name));
    let mount = at.map_or(TrustMount::None, |m| mount_report(live, m, volume));
    if variables.is_empty() && java_trust_store.is_none() && mount == TrustMount::None {
        return None;
    }
    let sub_path = at.and_then(|m| m.sub_path.as_deref());
    let bundle = volume
        .and_then(|v| v.config_map.as_ref())
        .map(|cm| bundle_report(live, cm, sub_path));
    let mut paths: Vec<(&str, &str)> = variables
        .iter()
        .filter_map(|v| Some((v.name.as_str(), v.value.as_deref()?)))
        .collect();
    if let Some(store) = &java_trust_store {
        paths.push(("the JVM truststore", store));
    }
    let notes = trust_notes(live, &paths, &mount, volume);
    Some(ContainerTrust {
        variables,
        java_trust_store,
        mount,
        bundle,
        notes,
    })
}

/// The truststore the JVM's `-D` options name, the last one winning as the JVM reads them.
fn java_trust_store(env: &Env) -> Option<String> {
    let mut props = HashMap::new();
    for var in java::OPTION_VARS {
        if let Some(Ok(options)) = env.get(var).map(java::split_options) {
            props.extend(java::properties(&options));
        }
    }
    let store = props.get("javax.net.ssl.trustStore")?;
    Some(match props.get("javax.net.ssl.trustStoreType") {
        Some(kind) => format!("{store} ({kind})"),
        None => store.clone(),
    })
}

fn mount_report(live: &Live, m: &VolumeMount, v: Option<&Volume>) -> TrustMount {
    let read_only = m.read_only == Some(true);
    let volume = m.name.clone();
    let cm = v.and_then(|v| v.config_map.as_ref());
    let policy = cm
        .filter(|_| m.name == VOLUME)
        .and_then(|cm| policy_managing(live, &cm.name));
    match (cm, policy) {
        (Some(cm), Some(policy)) => TrustMount::Operator {
            volume,
            config_map: cm.name.clone(),
            policy,
            read_only,
        },
        _ => TrustMount::Other {
            volume,
            source: volume_source(v),
            read_only,
        },
    }
}

/// The policy whose managed ConfigMap is `config_map`.
fn policy_managing(live: &Live, config_map: &str) -> Option<String> {
    let policies = live.policies.as_ref().ok()?;
    policies
        .iter()
        .map(|p| p.name_any())
        .find(|n| managed_name(n) == config_map)
}

/// What a volume is, in a few words.
fn volume_source(v: Option<&Volume>) -> String {
    let Some(v) = v else {
        return "no volume of that name in the pod template".into();
    };
    if let Some(c) = &v.config_map {
        format!("ConfigMap {}", c.name)
    } else if let Some(s) = &v.secret {
        format!("Secret {}", s.secret_name.as_deref().unwrap_or_default())
    } else if let Some(h) = &v.host_path {
        format!("hostPath {}", h.path)
    } else if let Some(c) = &v.persistent_volume_claim {
        format!("PersistentVolumeClaim {}", c.claim_name)
    } else if v.empty_dir.is_some() {
        "emptyDir".into()
    } else if v.projected.is_some() {
        "projected".into()
    } else {
        "a volume of another type".into()
    }
}

/// The key of `cm` that appears as `ca-bundle.crt` in the trust directory, a mount of
/// `sub_path` of the volume: with `items`, the item of that path; without, the key of
/// that name at the volume's top.
fn bundle_key(cm: &ConfigMapVolumeSource, sub_path: Option<&str>) -> Option<String> {
    let file = match sub_path
        .map(|s| s.trim_matches('/'))
        .filter(|s| !s.is_empty())
    {
        Some(dir) => format!("{dir}/{BUNDLE_KEY}"),
        None => BUNDLE_KEY.to_owned(),
    };
    match cm.items.as_deref() {
        Some(items) if !items.is_empty() => items
            .iter()
            .find(|i| i.path.trim_start_matches("./") == file)
            .map(|i| i.key.clone()),
        _ => (!file.contains('/')).then_some(file),
    }
}

/// The bundle file of a mounted configMap volume: its certificates, read as a root set is
/// (certificates only, each a CA, validity not checked: an expired one is listed as such).
fn bundle_report(live: &Live, cm: &ConfigMapVolumeSource, sub_path: Option<&str>) -> BundleReport {
    let key = bundle_key(cm, sub_path);
    let mut r = BundleReport {
        config_map: cm.name.clone(),
        key: key.clone(),
        id: None,
        count: None,
        certificates: Vec::new(),
        problem: None,
    };
    let pem = match key {
        Some(key) => mounted_value(&live.objects, cm, &key),
        None => Err(format!("the volume mounts no {BUNDLE_KEY} there")),
    };
    let pem = match pem {
        Ok(pem) => pem,
        Err(why) => {
            r.problem = Some(why);
            return r;
        }
    };
    r.id = Some(bundle_id(pem));
    let ns = &live.workload.namespace;
    let label = format!(
        "ConfigMap {ns}/{} key {}",
        cm.name,
        r.key.as_deref().unwrap_or_default()
    );
    match RootSet::from_pem(&label, pem.as_bytes()) {
        Ok(set) => {
            r.count = Some(set.certs.len());
            r.certificates = set
                .certs
                .iter()
                .take(SHOWN_CERTIFICATES)
                .map(|c| certificate_report(c, live.now))
                .collect();
        }
        Err(e) => r.problem = Some(e.to_string()),
    }
    r
}

/// The value of `key` in the mounted ConfigMap, or why the file is not there.
fn mounted_value<'o>(
    objects: &'o Objects,
    cm: &ConfigMapVolumeSource,
    key: &str,
) -> Result<&'o str, String> {
    let name = &cm.name;
    let optional = cm.optional == Some(true);
    match objects.config_maps.get(name) {
        Some(Fetched::Found(data)) => match data.get(key) {
            Some(v) => Ok(v),
            None if optional => Err(format!("ConfigMap {name} has no key {key} (optional)")),
            None => Err(format!(
                "ConfigMap {name} has no key {key}: the Pod would not start (FailedMount)"
            )),
        },
        Some(Fetched::NotFound) if optional => Err(format!(
            "ConfigMap {name} does not exist (optional): the directory is empty"
        )),
        Some(Fetched::NotFound) => Err(format!(
            "ConfigMap {name} not found: the Pod would not start (FailedMount)"
        )),
        Some(Fetched::Unreadable(why)) => {
            Err(format!("ConfigMap {name} could not be read ({why})"))
        }
        None => Err(format!("ConfigMap {name} was not looked up")),
    }
}

/// First 16 hex digits of the SHA-256 of the bundle, as `status.trust.bundle`.
fn bundle_id(pem: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, pem.as_bytes());
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn certificate_report(c: &Certificate, now: Timestamp) -> CertificateReport {
    CertificateReport {
        subject: c.subject.clone(),
        sha256: c.sha256.clone(),
        not_after: c.not_after.to_string(),
        expired: c.not_after < now,
    }
}

/// What does not fit together: paths into the trust directory with nothing of the
/// operator's mounted there.
fn trust_notes(
    live: &Live,
    paths: &[(&str, &str)],
    mount: &TrustMount,
    volume: Option<&Volume>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let into: Vec<&str> = paths
        .iter()
        .filter(|(_, p)| {
            p.strip_prefix(TRUST_DIR)
                .is_some_and(|r| r.starts_with('/'))
        })
        .map(|(n, _)| *n)
        .collect();
    match mount {
        TrustMount::None if !into.is_empty() => notes.push(format!(
            "{} point(s) into {TRUST_DIR}, where nothing is mounted: the clients find no file",
            into.join(", ")
        )),
        TrustMount::Other { volume: name, .. } => {
            let config_map = volume.is_some_and(|v| v.config_map.is_some());
            if let (true, Err(why)) = (name == VOLUME && config_map, &live.policies) {
                notes.push(format!(
                    "EgressProxyPolicies could not be listed ({why}): whether volume \
                     {VOLUME} is the operator's is not known"
                ));
                return notes;
            }
            notes.push(format!(
                "{TRUST_DIR} holds the workload's own volume {name}: the operator mounts no \
                 bundle over it"
            ));
        }
        _ => {}
    }
    notes
}

/// The workload's trust line.
fn workload_trust_text(t: &WorkloadTrust) -> String {
    let template = t.template.as_deref().unwrap_or("none");
    let Some(policy) = &t.policy else {
        return format!(
            "trust bundle: the template names {template} ({TRUST_BUNDLE}), but no \
             EgressProxyPolicy with spec.trust manages or selects the workload\n"
        );
    };
    let bundle = t.bundle.as_deref().unwrap_or("none yet");
    let verdict = if t.current {
        "current"
    } else {
        "not current (the Pods start with another bundle until the workload rolls)"
    };
    format!(
        "trust bundle: EgressProxyPolicy {policy} delivers {bundle}, the template names \
         {template} ({TRUST_BUNDLE}): {verdict}\n"
    )
}

/// A container's trust block.
fn trust_text(t: &ContainerTrust) -> String {
    let mut out = String::from("  trust:\n");
    let width = t.variables.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for v in &t.variables {
        let value = v.value.as_deref().unwrap_or("(unknown)");
        let value = if value.is_empty() { "\"\"" } else { value };
        out.push_str(&format!("    {:width$}  {value}  ({})\n", v.name, v.source));
    }
    if let Some(store) = &t.java_trust_store {
        out.push_str(&format!("    JVM truststore  {store}\n"));
    }
    let access = |ro: bool| if ro { "read-only" } else { "read-write" };
    out.push_str(&match &t.mount {
        TrustMount::None => format!("    mount  nothing at {TRUST_DIR}\n"),
        TrustMount::Operator {
            volume,
            config_map,
            policy,
            read_only,
        } => format!(
            "    mount  {TRUST_DIR}: volume {volume}, ConfigMap {config_map} of \
             EgressProxyPolicy {policy}, {}\n",
            access(*read_only)
        ),
        TrustMount::Other {
            volume,
            source,
            read_only,
        } => format!(
            "    mount  {TRUST_DIR}: another volume, {volume} ({source}), {}\n",
            access(*read_only)
        ),
    });
    if let Some(b) = &t.bundle {
        out.push_str(&bundle_text(b));
    }
    for n in &t.notes {
        out.push_str(&format!("    note: {n}\n"));
    }
    out
}

fn bundle_text(b: &BundleReport) -> String {
    let mut out = format!("    bundle {BUNDLE_KEY} from ConfigMap {}", b.config_map);
    if let Some(key) = b.key.as_deref().filter(|k| *k != BUNDLE_KEY) {
        out.push_str(&format!(" key {key}"));
    }
    if let Some(id) = &b.id {
        out.push_str(&format!(" ({id})"));
    }
    if let Some(count) = b.count {
        out.push_str(&format!(": {count} certificate(s)"));
    }
    out.push('\n');
    for c in &b.certificates {
        let expired = if c.expired { ", EXPIRED" } else { "" };
        out.push_str(&format!(
            "      {}  (notAfter {}{expired})\n",
            c.subject, c.not_after
        ));
    }
    let more = b.count.unwrap_or(0).saturating_sub(b.certificates.len());
    if more > 0 {
        out.push_str(&format!("      and {more} more\n"));
    }
    if let Some(p) = &b.problem {
        out.push_str(&format!("      cannot list it: {p}\n"));
    }
    out
}

/// Reads the workload, the Secrets and ConfigMaps its containers refer to, and the
/// namespace's policies.
pub async fn read(client: Client, w: &WorkloadRef) -> anyhow::Result<Live> {
    let ns = &w.namespace;
    let found = kinds::visit(w.kind, Get { client: &client, w }).await?;
    let (labels, template) = found.with_context(|| format!("{w} not found"))?;
    let template = template.unwrap_or_default();
    let mut objects = Objects::default();
    for (kind, names) in kubelet::referenced(&template) {
        for name in names {
            let fetched = match kind {
                ObjectKind::Secret => fetch_secret(&client, ns, &name).await,
                ObjectKind::ConfigMap => fetch_config_map(&client, ns, &name).await,
            };
            match kind {
                ObjectKind::Secret => objects.secrets.insert(name, fetched),
                ObjectKind::ConfigMap => objects.config_maps.insert(name, fetched),
            };
        }
    }
    let policies = Api::<EgressProxyPolicy>::namespaced(client, ns)
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .map_err(|e| crate::controller::describe(&e));
    Ok(Live {
        workload: w.clone(),
        labels,
        template,
        objects,
        policies,
        now: Timestamp::now(),
    })
}

/// Reads the workload of its kind: its labels and pod template, `None` when not found.
struct Get<'a> {
    client: &'a Client,
    w: &'a WorkloadRef,
}

type Found = Option<(BTreeMap<String, String>, Option<PodTemplateSpec>)>;

impl<'a> Visit for Get<'a> {
    type Out = BoxFuture<'a, anyhow::Result<Found>>;
    fn visit<K: Kind>(self) -> Self::Out {
        let Get { client, w } = self;
        Box::pin(async move {
            let o = Api::<K>::namespaced(client.clone(), &w.namespace)
                .get_opt(&w.name)
                .await
                .map_err(|e| anyhow::anyhow!("reading {w}: {}", crate::controller::describe(&e)))?;
            Ok(o.map(|o| (o.labels().clone(), o.pod_template().cloned())))
        })
    }
}

async fn fetch_secret(client: &Client, ns: &str, name: &str) -> Fetched {
    match Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
    {
        Ok(Some(s)) => Fetched::Found(
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect(),
        ),
        Ok(None) => Fetched::NotFound,
        Err(e) => Fetched::Unreadable(crate::controller::describe(&e)),
    }
}

async fn fetch_config_map(client: &Client, ns: &str, name: &str) -> Fetched {
    match Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
    {
        Ok(Some(m)) => Fetched::Found(m.data.unwrap_or_default()),
        Ok(None) => Fetched::NotFound,
        Err(e) => Fetched::Unreadable(crate::controller::describe(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const PW: &str = "Sentinel-Pw-7f3a9";

    fn policy(name: &str, dialect: &str, labels: Value) -> EgressProxyPolicy {
        serde_json::from_value(json!({
            "apiVersion": "egressproxy.io/v1alpha1",
            "kind": "EgressProxyPolicy",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {
                "workloadSelector": {"matchLabels": labels},
                "proxy": {"credentials": [{"name": "main", "secretRef": {"name": "creds"}}],
                          "active": "main"},
                "noProxy": {"dialect": dialect},
            },
        }))
        .unwrap()
    }

    /// `app` has the entries the operator writes for policy `outbound`; the init container
    /// `setup` its own literal proxy; `side` nothing.
    fn live(policies: Result<Vec<EgressProxyPolicy>, String>) -> Live {
        let mut env = crate::workloads::proxy_url_entries("egress-proxy-outbound", "main");
        env.push(
            serde_json::from_value(json!({"name": "NO_PROXY", "valueFrom":
                {"configMapKeyRef": {"name": "egress-proxy-outbound", "key": "NO_PROXY"}}}))
            .unwrap(),
        );
        let template = serde_json::from_value(json!({"spec": {
            "containers": [{"name": "app", "env": env}, {"name": "side"}],
            "initContainers": [{"name": "setup", "env": [
                {"name": "https_proxy", "value": format!("http://me:{PW}@own.proxy:8080")},
            ]}],
        }}))
        .unwrap();
        let proxy = format!("http://u:{PW}@proxy.corp:3128");
        let secret = [
            ("slot.main.HTTP_PROXY".to_owned(), proxy.clone()),
            ("slot.main.HTTPS_PROXY".to_owned(), proxy),
        ];
        let cm = [("NO_PROXY".to_owned(), ".svc,.corp.example".to_owned())];
        Live {
            workload: parse_workload("shop/deploy/web").unwrap(),
            labels: [("egress".to_owned(), "proxied".to_owned())].into(),
            template,
            objects: Objects {
                secrets: [(
                    "egress-proxy-outbound".to_owned(),
                    Fetched::Found(secret.into()),
                )]
                .into(),
                config_maps: [(
                    "egress-proxy-outbound".to_owned(),
                    Fetched::Found(cm.into()),
                )]
                .into(),
            },
            policies,
            now: "2026-06-01T00:00:00Z".parse().unwrap(),
        }
    }

    /// A self-signed CA certificate (PEM) named `cn`, valid from Jan 1st of `from` to Jan 1st
    /// of `to`.
    fn ca_pem(cn: &str, from: i32, to: i32) -> String {
        crate::trust::testing::ca_pem(cn, (from, 1, 1), (to, 1, 1))
    }

    const TRUST_FILE: &str = "/etc/egress-proxy/trust/ca-bundle.crt";

    /// Trust as the operator writes it for a `java` policy in `app`; `own` has its own
    /// volume at the trust directory; the init container `setup` points into it unmounted.
    fn trust_live(template_bundle: &str) -> (Live, String) {
        let pem = [
            ca_pem("Corp CA", 2025, 2030),
            ca_pem("Old CA", 2020, 2021),
            ca_pem("Root 3", 2025, 2040),
            ca_pem("Root 4", 2025, 2040),
        ]
        .concat();
        let id = bundle_id(&pem);
        let template = serde_json::from_value(json!({
            "metadata": {"annotations": {"egressproxy.io/trust-bundle": template_bundle}},
            "spec": {
                "volumes": [
                    {"name": "egress-proxy-trust", "configMap": {"name": "egress-proxy-outbound",
                     "items": [{"key": "ca-bundle.crt", "path": "ca-bundle.crt"},
                               {"key": "truststore.p12", "path": "truststore.p12"}]}},
                    {"name": "host-certs", "hostPath": {"path": "/etc/ssl"}},
                ],
                "containers": [
                    {"name": "app",
                     "volumeMounts": [{"name": "egress-proxy-trust",
                         "mountPath": "/etc/egress-proxy/trust", "readOnly": true}],
                     "env": [
                        {"name": "SSL_CERT_FILE", "valueFrom": {"configMapKeyRef":
                            {"name": "egress-proxy-outbound", "key": "SSL_CERT_FILE"}}},
                        {"name": "JAVA_TOOL_OPTIONS", "value": "-Djavax.net.ssl.trustStore=\
                            /etc/egress-proxy/trust/truststore.p12 \
                            -Djavax.net.ssl.trustStoreType=PKCS12"},
                     ]},
                    {"name": "own",
                     "volumeMounts": [{"name": "host-certs",
                         "mountPath": "/etc/egress-proxy/trust"}],
                     "env": [{"name": "CURL_CA_BUNDLE", "value": TRUST_FILE}]},
                ],
                "initContainers": [{"name": "setup",
                    "env": [{"name": "NODE_EXTRA_CA_CERTS", "value": TRUST_FILE}]}],
            },
        }))
        .unwrap();
        let mut p = policy("outbound", "java", json!({"egress": "proxied"}));
        p.spec.trust = serde_json::from_value(
            json!({"sources": [{"configMap": {"name": "corp-ca", "key": "ca.crt"}}]}),
        )
        .unwrap();
        p.status = serde_json::from_value(
            json!({"trust": {"bundle": id, "roots": "Keep", "upToDate": 0}}),
        )
        .unwrap();
        let cm = [
            ("SSL_CERT_FILE".to_owned(), TRUST_FILE.to_owned()),
            ("ca-bundle.crt".to_owned(), pem),
        ];
        let live = Live {
            template,
            objects: Objects {
                config_maps: [(
                    "egress-proxy-outbound".to_owned(),
                    Fetched::Found(cm.into()),
                )]
                .into(),
                ..Default::default()
            },
            ..live(Ok(vec![p]))
        };
        (live, id)
    }

    #[test]
    fn trust_per_container_and_the_bundle_against_the_policy() {
        let (l, id) = trust_live("0000000000000000");
        let url = "https://api.example.com/";
        let r = report(&l, None, &Target::parse(url).unwrap(), url);
        assert_eq!(
            r.trust,
            Some(WorkloadTrust {
                policy: Some("outbound".into()),
                bundle: Some(id.clone()),
                template: Some("0000000000000000".into()),
                current: false,
            })
        );
        let v = serde_json::to_value(&r).unwrap();
        let key = |k: &str| {
            json!({"from": "keyRef", "kind": "ConfigMap",
                                   "name": "egress-proxy-outbound", "key": k})
        };
        let app = &v["containers"][0]["trust"];
        assert_eq!(
            app["variables"],
            json!([{"name": "SSL_CERT_FILE", "value": TRUST_FILE,
                    "source": key("SSL_CERT_FILE")}])
        );
        assert_eq!(
            app["javaTrustStore"],
            "/etc/egress-proxy/trust/truststore.p12 (PKCS12)"
        );
        assert_eq!(
            app["mount"],
            json!({"kind": "operator", "volume": "egress-proxy-trust",
                   "configMap": "egress-proxy-outbound", "policy": "outbound",
                   "readOnly": true})
        );
        let bundle = &app["bundle"];
        assert_eq!(
            (&bundle["key"], &bundle["id"], &bundle["count"]),
            (&json!("ca-bundle.crt"), &json!(id), &json!(4))
        );
        let listed: Vec<(&str, &str, bool)> = bundle["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let subject = c["subject"].as_str().unwrap();
                (
                    subject,
                    c["notAfter"].as_str().unwrap(),
                    c["expired"] == true,
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("CN=Corp CA", "2030-01-01T00:00:00Z", false),
                ("CN=Old CA", "2021-01-01T00:00:00Z", true),
                ("CN=Root 3", "2040-01-01T00:00:00Z", false),
            ]
        );
        assert_eq!(app["notes"], json!([]));
        let own = &v["containers"][1]["trust"];
        assert_eq!(
            own["mount"],
            json!({"kind": "other", "volume": "host-certs", "source": "hostPath /etc/ssl",
                   "readOnly": false})
        );
        assert_eq!(own["bundle"], Value::Null);
        assert_eq!(
            own["notes"],
            json!([
                "/etc/egress-proxy/trust holds the workload's own volume host-certs: \
                    the operator mounts no bundle over it"
            ])
        );
        let setup = &v["containers"][2]["trust"];
        assert_eq!(setup["mount"], json!({"kind": "none"}));
        assert_eq!(
            setup["notes"],
            json!([
                "NODE_EXTRA_CA_CERTS point(s) into /etc/egress-proxy/trust, where nothing \
                    is mounted: the clients find no file"
            ])
        );

        // The template with the policy's bundle is current.
        let (l, id) = trust_live("");
        let mut l = l;
        let annotations = l.template.metadata.as_mut().unwrap().annotations.as_mut();
        annotations.unwrap().insert(TRUST_BUNDLE.into(), id.clone());
        let r = report(&l, None, &Target::parse(url).unwrap(), url);
        assert!(r.trust.as_ref().is_some_and(|t| t.current), "{:?}", r.trust);
        let t = text(&r);
        let want = format!(
            "\
Deployment shop/web, URL https://api.example.com/
trust bundle: EgressProxyPolicy outbound delivers {id}, the template names {id} \
(egressproxy.io/trust-bundle): current
"
        );
        assert!(t.starts_with(&want), "{t}");
        let block = format!(
            "\
  trust:
    SSL_CERT_FILE  /etc/egress-proxy/trust/ca-bundle.crt  (ConfigMap egress-proxy-outbound key SSL_CERT_FILE)
    JVM truststore  /etc/egress-proxy/trust/truststore.p12 (PKCS12)
    mount  /etc/egress-proxy/trust: volume egress-proxy-trust, ConfigMap egress-proxy-outbound of EgressProxyPolicy outbound, read-only
    bundle ca-bundle.crt from ConfigMap egress-proxy-outbound ({id}): 4 certificate(s)
      CN=Corp CA  (notAfter 2030-01-01T00:00:00Z)
      CN=Old CA  (notAfter 2021-01-01T00:00:00Z, EXPIRED)
      CN=Root 3  (notAfter 2040-01-01T00:00:00Z)
      and 1 more

container own
"
        );
        assert!(t.contains(&block), "{t}");
        let setup = "\
  trust:
    NODE_EXTRA_CA_CERTS  /etc/egress-proxy/trust/ca-bundle.crt  (value)
    mount  nothing at /etc/egress-proxy/trust
    note: NODE_EXTRA_CA_CERTS point(s) into /etc/egress-proxy/trust, where nothing is mounted: \
the clients find no file
";
        assert!(t.contains(setup), "{t}");
    }

    /// Where the bundle file comes from in a configMap volume, and why it may be missing.
    #[test]
    fn the_bundle_file_behind_the_mount() {
        let cm = |items: Value| -> ConfigMapVolumeSource {
            serde_json::from_value(json!({"name": "m", "items": items})).unwrap()
        };
        let all = ConfigMapVolumeSource {
            name: "m".into(),
            ..Default::default()
        };
        assert_eq!(bundle_key(&all, None).as_deref(), Some("ca-bundle.crt"));
        assert_eq!(bundle_key(&all, Some("sub")), None);
        let mapped = cm(json!([{"key": "pem", "path": "ca-bundle.crt"}]));
        assert_eq!(bundle_key(&mapped, None).as_deref(), Some("pem"));
        let nested = cm(json!([{"key": "pem", "path": "sub/ca-bundle.crt"}]));
        assert_eq!(bundle_key(&nested, Some("/sub/")).as_deref(), Some("pem"));
        assert_eq!(bundle_key(&nested, None), None);

        let mut objects = Objects::default();
        let gone = mounted_value(&objects, &all, "ca-bundle.crt").unwrap_err();
        assert_eq!(gone, "ConfigMap m was not looked up");
        objects.config_maps.insert("m".into(), Fetched::NotFound);
        let gone = mounted_value(&objects, &all, "ca-bundle.crt").unwrap_err();
        assert_eq!(
            gone,
            "ConfigMap m not found: the Pod would not start (FailedMount)"
        );
        let mut optional = all.clone();
        optional.optional = Some(true);
        let gone = mounted_value(&objects, &optional, "ca-bundle.crt").unwrap_err();
        assert!(
            gone.ends_with("(optional): the directory is empty"),
            "{gone}"
        );
        objects.config_maps.insert(
            "m".into(),
            Fetched::Found([("other".to_owned(), "x".to_owned())].into()),
        );
        let gone = mounted_value(&objects, &all, "ca-bundle.crt").unwrap_err();
        assert_eq!(
            gone,
            "ConfigMap m has no key ca-bundle.crt: the Pod would not start (FailedMount)"
        );

        // A file that is not a bundle: the reason, never its bytes.
        let (mut l, _) = trust_live("x");
        l.objects.config_maps.insert(
            "egress-proxy-outbound".into(),
            Fetched::Found([("ca-bundle.crt".to_owned(), "not-pem-Sentinel".to_owned())].into()),
        );
        let mounted = cm(json!([{"key": "ca-bundle.crt", "path": "ca-bundle.crt"}]));
        let mounted = ConfigMapVolumeSource {
            name: "egress-proxy-outbound".into(),
            ..mounted
        };
        let b = bundle_report(&l, &mounted, None);
        assert_eq!(
            (b.count, b.problem.as_deref()),
            (
                None,
                Some(
                    "ConfigMap shop/egress-proxy-outbound key ca-bundle.crt: not PEM (no \
                     -----BEGIN block)"
                )
            )
        );
        assert!(!bundle_text(&b).contains("Sentinel"));
    }

    #[test]
    fn workload_names() {
        for (arg, kind) in [
            ("shop/Deployment/web", WorkloadKind::Deployment),
            ("shop/deploy/web", WorkloadKind::Deployment),
            ("shop/deployments.apps/web", WorkloadKind::Deployment),
            ("shop/STS/web", WorkloadKind::StatefulSet),
            ("shop/statefulset/web", WorkloadKind::StatefulSet),
            ("shop/ds/web", WorkloadKind::DaemonSet),
            ("shop/DaemonSets/web", WorkloadKind::DaemonSet),
            ("shop/cj/web", WorkloadKind::CronJob),
            ("shop/CronJobs.batch/web", WorkloadKind::CronJob),
        ] {
            let w = parse_workload(arg).unwrap();
            assert_eq!(
                (w.namespace.as_str(), w.kind, w.name.as_str()),
                ("shop", kind, "web")
            );
        }
        assert_eq!(
            parse_workload("shop/sts/db").unwrap().to_string(),
            "StatefulSet shop/db"
        );
        for (arg, err) in [
            ("shop/web", "expected NAMESPACE/KIND/NAME"),
            ("shop/deploy/web/x", "expected NAMESPACE/KIND/NAME"),
            ("/deploy/web", "expected NAMESPACE/KIND/NAME"),
            ("shop/job/web", "kind \"job\" is not Deployment"),
        ] {
            let e = parse_workload(arg).unwrap_err().to_string();
            assert!(e.contains(err), "{arg}: {e}");
        }
    }

    #[test]
    fn the_dialect_comes_from_the_flag_then_the_managing_then_the_selecting_policy() {
        let l = live(Ok(vec![
            policy("other", "python-requests", json!({"app": "else"})),
            policy("outbound", "go", json!({"egress": "proxied"})),
        ]));
        let spec = l.template.spec.as_ref().unwrap();
        let (app, side) = (&spec.containers[0], &spec.containers[1]);
        assert_eq!(
            choose_dialects(None, &l, Some(app)),
            DialectChoice {
                dialects: vec![Dialect::Go],
                from: "its proxy variables come from the managed objects of EgressProxyPolicy \
                       outbound (go)"
                    .into()
            }
        );
        assert_eq!(
            choose_dialects(None, &l, Some(side)),
            DialectChoice {
                dialects: vec![Dialect::Go],
                from: "no policy sets its variables; the workload is selected by \
                       EgressProxyPolicy outbound (go)"
                    .into()
            }
        );
        let flag = Some(DialectFlag::One(Dialect::PythonHttpx));
        assert_eq!(
            choose_dialects(flag, &l, Some(app)),
            DialectChoice {
                dialects: vec![Dialect::PythonHttpx],
                from: "given with --dialect".into()
            }
        );
        assert_eq!(
            choose_dialects(Some(DialectFlag::All), &l, Some(app)).dialects,
            Dialect::ALL
        );
        // Two selecting policies with different dialects: both, in the usual order.
        let l = live(Ok(vec![
            policy("b", "ruby", json!({"egress": "proxied"})),
            policy("a", "curl", json!({"egress": "proxied"})),
        ]));
        assert_eq!(
            choose_dialects(None, &l, Some(app)).dialects,
            [Dialect::Curl, Dialect::Ruby]
        );
        let l = live(Ok(vec![policy("x", "go", json!({"app": "else"}))]));
        assert_eq!(
            choose_dialects(None, &l, Some(side)),
            DialectChoice {
                dialects: Dialect::ALL.to_vec(),
                from: "no EgressProxyPolicy manages or selects this workload".into()
            }
        );
        let l = live(Err(
            "404 NotFound: the server could not find the requested resource".into(),
        ));
        assert_eq!(
            choose_dialects(None, &l, Some(app)).from,
            "EgressProxyPolicies could not be listed (404 NotFound: the server \
             could not find the requested resource)"
        );
    }

    #[test]
    fn report_per_container_with_every_value_redacted() {
        let l = live(Ok(vec![policy(
            "outbound",
            "go",
            json!({"egress": "proxied"}),
        )]));
        let url = "https://api.example.com/";
        let r = report(&l, None, &Target::parse(url).unwrap(), url);
        let v = serde_json::to_value(&r).unwrap();
        assert!(!v.to_string().contains(PW), "{v}");
        assert!(!text(&r).contains(PW));
        let proxy = "http://u:***@proxy.corp:3128";
        let key = |kind: &str, key: &str| json!({"from": "keyRef", "kind": kind, "name": "egress-proxy-outbound", "key": key});
        let secret_var =
            |name: &str, k: &str| json!({"name": name, "value": proxy, "source": key("Secret", k)});
        let go = |decision: &str, proxy: Value, variable: Value, reason: &str| {
            json!([{"dialect": "go", "url": url, "decision": decision, "proxy": proxy,
                    "matched": null, "variable": variable, "reason": reason}])
        };
        let selected = "no policy sets its variables; the workload is selected by \
                        EgressProxyPolicy outbound (go)";
        let expected = json!({
            "workload": {"namespace": "shop", "kind": "Deployment", "name": "web"},
            "url": url,
            "trust": null,
            "containers": [
                {
                    "name": "app", "init": false, "failure": null,
                    "variables": [
                        secret_var("HTTP_PROXY", "slot.main.HTTP_PROXY"),
                        secret_var("http_proxy", "slot.main.HTTP_PROXY"),
                        secret_var("HTTPS_PROXY", "slot.main.HTTPS_PROXY"),
                        secret_var("https_proxy", "slot.main.HTTPS_PROXY"),
                        {"name": "NO_PROXY", "value": ".svc,.corp.example",
                         "source": key("ConfigMap", "NO_PROXY")},
                    ],
                    "notes": [],
                    "dialectFrom": "its proxy variables come from the managed objects of \
                                    EgressProxyPolicy outbound (go)",
                    "explanations": go("proxy", json!(proxy), json!("NO_PROXY"),
                        "no entry of NO_PROXY matches; using HTTPS_PROXY"),
                    "trust": null,
                },
                {
                    "name": "side", "init": false, "failure": null, "variables": [],
                    "notes": [], "dialectFrom": selected,
                    "explanations": go("direct", json!(null), json!(null),
                        "no proxy configured for https URLs (read: HTTPS_PROXY, https_proxy)"),
                    "trust": null,
                },
                {
                    "name": "setup", "init": true, "failure": null,
                    "variables": [{"name": "https_proxy",
                                   "value": "http://me:***@own.proxy:8080",
                                   "source": {"from": "value", "expanded": []}}],
                    "notes": [], "dialectFrom": selected,
                    "explanations": go("proxy", json!("http://me:***@own.proxy:8080"),
                        json!(null), "no NO_PROXY variable in effect; using https_proxy"),
                    "trust": null,
                },
            ],
        });
        assert_eq!(v, expected, "{}", serde_json::to_string_pretty(&v).unwrap());
    }

    #[test]
    fn text_per_container() {
        let mut l = live(Ok(vec![policy(
            "outbound",
            "go",
            json!({"egress": "proxied"}),
        )]));
        l.objects
            .config_maps
            .insert("egress-proxy-outbound".into(), Fetched::NotFound);
        let url = "http://api.corp.example/";
        let flag = Some(DialectFlag::One(Dialect::PythonRequests));
        let t = text(&report(&l, flag, &Target::parse(url).unwrap(), url));
        let want = "\
Deployment shop/web, URL http://api.corp.example/

container app
  would not start: CreateContainerConfigError: configmap \"egress-proxy-outbound\" not found

container side
  no proxy variables
  dialect: python-requests (given with --dialect)
  python-requests  direct
                     no proxy configured for http URLs (read: scheme proxy variable and ALL_PROXY)

init container setup
  https_proxy  http://me:***@own.proxy:8080  (value)
  dialect: python-requests (given with --dialect)
  python-requests  direct
                     no proxy configured for http URLs (read: scheme proxy variable and ALL_PROXY)

Not visible here: variables the image sets (ENV in its Dockerfile) and proxy settings the \
program makes itself.
";
        assert_eq!(t, want, "{t}");
    }
}
