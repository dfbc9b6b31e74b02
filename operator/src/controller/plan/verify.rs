//! Verification from inside the cluster (`spec.verification`): which probe run the target
//! configuration needs, the probe Job that runs it, what its Pod reported, and the gate a
//! switch waits on. Pure.
//!
//! A run is identified by its Job name: a digest of what is checked (slot, configuration
//! hash, dialect, endpoints) plus what asks for a new run of the same thing (the
//! `egressproxy.io/verify` annotation, the `interval` period). The gate looks only at what
//! was checked: a periodic re-run does not close it while it runs.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapKeySelector, Container, EnvVar, EnvVarSource, Pod, PodSecurityContext,
    PodSpec, PodTemplateSpec, ResourceRequirements, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::{Inputs, managed_meta, own_names};
use crate::api::{EndpointCheck, ExpectedPath, VerificationStatus};
use crate::credentials::hex;
use crate::probe::expect_name;
use crate::rotation::Gate;
use crate::workloads;

/// Policy annotation: any new value asks for a verification now.
pub const VERIFY_ANNOTATION: &str = "egressproxy.io/verify";
/// Prefix of every probe Job's name.
pub const JOB_PREFIX: &str = "egress-proxy-verify-";
/// Job annotation: what the run checks (see [`Wanted::key`]).
pub const KEY_ANNOTATION: &str = "egressproxy.io/verification-key";
/// The probe reads the cluster CA (for the Kubernetes Service) from this variable.
pub const CA_ENV: &str = "EGRESS_PROXY_PROBE_CA";
/// The ConfigMap every namespace has with the cluster CA (`ca.crt`).
const ROOT_CA: &str = "kube-root-ca.crt";
/// The kubelet's default `terminationMessagePath`.
const TERMINATION_LOG: &str = "/dev/termination-log";
/// Seconds a probe Job may run, Pod start included.
const DEADLINE: i64 = 300;
/// Seconds a finished probe Job stays for inspection.
const TTL: i32 = 3600;

/// The probe run the target configuration needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// What is checked: slot, configuration hash, dialect and endpoints (hex digest).
    pub key: String,
    pub job_name: String,
    pub slot: String,
    pub hash: String,
    /// Every endpoint in the order checked, the Kubernetes Service first.
    pub endpoints: Vec<(String, ExpectedPath)>,
    /// Why the run is not made: an endpoint outside what a policy may check (see
    /// [`refused`]). The gate stays closed.
    pub refused: Option<String>,
}

/// A probe run as the executor found it.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeRun {
    /// No Job of that name: the plan creates it.
    Missing,
    /// The Job runs; the words say on what it waits, if anything.
    Running(String),
    Finished(Box<VerificationStatus>),
}

/// The run the target needs, when `spec.verification` is set.
pub fn wanted(i: &Inputs, slot: &str, hash: &str, domain: Option<&str>) -> Option<Wanted> {
    let spec = i.policy.spec.verification.as_ref()?;
    // Without a known domain, the Service by the name every cluster resolves.
    let service = match domain {
        Some(d) => format!("https://kubernetes.default.svc.{d}/"),
        None => "https://kubernetes.default.svc/".to_owned(),
    };
    let mut endpoints = vec![(service, ExpectedPath::Direct)];
    endpoints.extend(spec.endpoints.iter().map(|e| (e.url.clone(), e.expect)));
    let refused = spec
        .endpoints
        .iter()
        .find_map(|e| refused(&e.url, i.cluster));
    let dialect = i.policy.spec.no_proxy.dialect.name();
    let mut parts: Vec<&str> = vec!["egressproxy.io/verification/v1", slot, hash, dialect];
    for (url, expect) in &endpoints {
        parts.extend([url.as_str(), expect_name(*expect)]);
    }
    let key = digest(&parts);
    let nonce = i.policy.annotations().get(VERIFY_ANNOTATION).cloned();
    let period = spec
        .interval_seconds()
        .map(|s| (i.unix_now / s).to_string());
    let uid = i.policy.uid().unwrap_or_default();
    let run = digest(&[
        key.as_str(),
        uid.as_str(),
        nonce.as_deref().unwrap_or(""),
        period.as_deref().unwrap_or(""),
    ]);
    Some(Wanted {
        key,
        job_name: format!("{JOB_PREFIX}{run}"),
        slot: slot.to_owned(),
        hash: hash.to_owned(),
        endpoints,
        refused,
    })
}

/// Cloud metadata services and loopback by name.
const REFUSED_NAMES: &[&str] = &[
    "localhost",
    "metadata",
    "metadata.google.internal",
    "metadata.azure.com",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Why a verification endpoint is not checked, if it is not: a loopback, link-local or
/// unspecified address, a cloud metadata service, or one of the API server's addresses or
/// names (the Kubernetes Service itself is always checked). Probing them would tell a policy
/// author about the node and the control plane, which no Pod of theirs is meant to learn.
pub fn refused(url: &str, cluster: &crate::discovery::ClusterInputs) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let why = match parsed.host()? {
        url::Host::Ipv4(a) => refused_ip(a.into()),
        url::Host::Ipv6(a) => refused_ip(a.into()),
        url::Host::Domain(d) => {
            let name = d.trim_end_matches('.').to_ascii_lowercase();
            let local = REFUSED_NAMES.contains(&name.as_str()) || name.ends_with(".localhost");
            local.then_some("a loopback or cloud metadata name")
        }
    };
    let host = parsed
        .host_str()?
        .trim_matches(['[', ']'])
        .trim_end_matches('.');
    let api = cluster
        .api_host
        .iter()
        .chain(&cluster.kubernetes_service_ips);
    let api = api.chain(cluster.api_endpoints.iter().flat_map(|e| &e.values));
    let why = why.or_else(|| {
        api.into_iter()
            .any(|a| a.eq_ignore_ascii_case(host))
            .then_some("an address of the API server")
    })?;
    Some(format!(
        "verification endpoint {} is refused: {why} is never checked (the Kubernetes Service \
         is checked by every run)",
        crate::noproxy::redact(url)
    ))
}

fn refused_ip(ip: std::net::IpAddr) -> Option<&'static str> {
    let ip = match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, Into::into),
        v4 => v4,
    };
    let bad = match ip {
        std::net::IpAddr::V4(a) => a.is_loopback() || a.is_link_local() || a.is_unspecified(),
        std::net::IpAddr::V6(a) => {
            a.is_loopback()
                || a.is_unspecified()
                || a.is_unicast_link_local()
                || a == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        }
    };
    bad.then_some("a loopback, link-local or metadata address")
}

/// 16 hex digits of SHA-256 over length-prefixed parts.
fn digest(parts: &[&str]) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        ctx.update(&(p.len() as u64).to_be_bytes());
        ctx.update(p.as_bytes());
    }
    hex(&ctx.finish().as_ref()[..8])
}

/// The latest finished verification: the one just read, else the one in status.
pub fn latest<'a>(i: &'a Inputs) -> Option<&'a VerificationStatus> {
    match i.probe {
        Some(ProbeRun::Finished(v)) => Some(v.as_ref()),
        _ => i.previous.verification.as_ref(),
    }
}

/// Whether a switch to the target may go ahead.
pub fn gate(i: &Inputs, w: Option<&Wanted>) -> Gate {
    let Some(w) = w else {
        return Gate::NotRequired;
    };
    if i.probe_image.is_none() || w.refused.is_some() {
        return Gate::Failed;
    }
    match latest(i).filter(|v| v.key == w.key) {
        Some(v) if v.passed => Gate::Passed,
        Some(_) => Gate::Failed,
        None => Gate::Pending,
    }
}

/// Whether the executor must look for the run's Job: a run is wanted and its result is not
/// in status yet.
pub fn needs_probe(i: &Inputs, w: &Wanted) -> bool {
    i.probe_image.is_some() && w.refused.is_none() && latest(i).is_none_or(|v| v.job != w.job_name)
}

/// The configuration under test, as values (none is secret).
pub struct ProbeEnv<'a> {
    pub no_proxy: &'a str,
    /// `java`: the options a workload's `JAVA_TOOL_OPTIONS` gets.
    pub java_options: Option<&'a str>,
    /// `spec.trust` under test: the CA sources (PEM) and whether the shipped roots are kept.
    /// The probe trusts them instead of the image's roots. (Not the managed ConfigMap: while
    /// the gate is closed it keeps the last verified bundle.)
    pub trust: Option<(&'a str, bool)>,
}

/// The probe's variable holding the CA sources under test (PEM).
pub const TRUST_ENV: &str = "EGRESS_PROXY_PROBE_TRUST";
/// The probe's variable saying whether the shipped roots are kept (`keep`, `replace`).
pub const TRUST_ROOTS_ENV: &str = "EGRESS_PROXY_PROBE_TRUST_ROOTS";

/// The probe Job for a run: the operator's image running `probe` with the environment a
/// workload gets from the slot under test (credentials by reference only) and the NO_PROXY
/// under test as a value; no ServiceAccount token, non-root, read-only, small.
pub fn job(i: &Inputs, w: &Wanted, values: &ProbeEnv, image: &str) -> Job {
    let mut meta = managed_meta(i.policy);
    meta.name = Some(w.job_name.clone());
    meta.annotations = Some(BTreeMap::from([
        (KEY_ANNOTATION.to_owned(), w.key.clone()),
        (workloads::CONFIG_HASH.to_owned(), w.hash.clone()),
        (
            workloads::CREDENTIAL_SLOT.to_owned(),
            workloads::slot_annotation(&own_names(i.policy), &w.slot),
        ),
    ]));
    let labels = meta.labels.clone();
    Job {
        metadata: meta,
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(DEADLINE),
            ttl_seconds_after_finished: Some(TTL),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(pod_spec(i, w, values, image)),
            },
            ..Default::default()
        }),
        status: None,
    }
}

fn pod_spec(i: &Inputs, w: &Wanted, values: &ProbeEnv, image: &str) -> PodSpec {
    let mut args: Vec<String> = vec![
        "probe".into(),
        "--dialect".into(),
        i.policy.spec.no_proxy.dialect.name().into(),
    ];
    for (url, expect) in &w.endpoints {
        args.extend([
            "--endpoint".into(),
            format!("{}={}", escape_references(url), expect_name(*expect)),
        ]);
    }
    // The container's terminationMessagePath, spelled out for runtimes that map it.
    args.extend(["--termination-log".into(), TERMINATION_LOG.into()]);
    PodSpec {
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            run_as_group: Some(65532),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            ..Default::default()
        }),
        containers: vec![Container {
            name: "probe".into(),
            image: Some(image.to_owned()),
            args: Some(args),
            env: Some(probe_env(i, w, values)),
            resources: Some(resources()),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".into()]),
                    add: None,
                }),
                ..Default::default()
            }),
            termination_message_policy: Some("FallbackToLogsOnError".into()),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `text` with every `$` doubled: the kubelet expands `$(VAR)` in a container's arguments and
/// writes `$$` as `$`, so a URL naming `$(HTTPS_PROXY)` reaches the probe as written instead of
/// with the credential in it.
fn escape_references(text: &str) -> String {
    text.replace('$', "$$")
}

/// The four proxy URL variables from the slot's keys of the managed Secret, NO_PROXY as a
/// value (it is not secret, and the managed ConfigMap keeps the last verified one), and the
/// cluster CA.
fn probe_env(i: &Inputs, w: &Wanted, values: &ProbeEnv) -> Vec<EnvVar> {
    let own = own_names(i.policy);
    let mut env = workloads::proxy_url_entries(&own, &w.slot);
    for name in ["NO_PROXY", "no_proxy"] {
        env.push(EnvVar {
            name: name.into(),
            value: Some(values.no_proxy.to_owned()),
            value_from: None,
        });
    }
    if let Some(options) = values.java_options {
        env.push(EnvVar {
            name: workloads::JAVA_OPTIONS.into(),
            value: Some(options.to_owned()),
            value_from: None,
        });
    }
    if let Some((pem, keep)) = values.trust {
        let roots = if keep { "keep" } else { "replace" };
        for (name, value) in [(TRUST_ENV, pem), (TRUST_ROOTS_ENV, roots)] {
            env.push(EnvVar {
                name: name.into(),
                value: Some(value.to_owned()),
                value_from: None,
            });
        }
    }
    env.push(EnvVar {
        name: CA_ENV.into(),
        value: None,
        value_from: Some(EnvVarSource {
            config_map_key_ref: Some(ConfigMapKeySelector {
                name: ROOT_CA.into(),
                key: "ca.crt".into(),
                optional: Some(true),
            }),
            ..Default::default()
        }),
    });
    env
}

fn resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_owned());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), q("10m")),
            ("memory".to_owned(), q("16Mi")),
        ])),
        limits: Some(BTreeMap::from([
            ("cpu".to_owned(), q("200m")),
            ("memory".to_owned(), q("64Mi")),
        ])),
        ..Default::default()
    }
}

/// No Job for the run yet: create it, unless an earlier probe Job of the policy still runs
/// (one at a time; the run's configuration changed while it ran).
pub fn missing(policy_uid: &str, jobs: &[Job]) -> ProbeRun {
    let running = jobs.iter().find(|j| {
        owned_by(j, policy_uid)
            && j.meta().deletion_timestamp.is_none()
            && j.spec.as_ref().and_then(|s| s.suspend) != Some(true)
            && job_condition(j, "Complete").is_none()
            && job_condition(j, "Failed").is_none()
    });
    match running {
        Some(j) => ProbeRun::Running(format!(
            "waiting for the earlier probe Job {} to finish",
            j.name_any()
        )),
        None => ProbeRun::Missing,
    }
}

/// Whether `job` is the policy's own (its controller owner), not a look-alike.
pub fn owned_by(job: &Job, policy_uid: &str) -> bool {
    job.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == policy_uid)
}

/// The run as its Job and Pods show it. A finished run without results (the Pod never
/// started, the probe crashed) is a failed verification saying why.
pub fn read(w: &Wanted, job: &Job, pods: &[Pod]) -> ProbeRun {
    let finished = job_condition(job, "Complete").or_else(|| job_condition(job, "Failed"));
    let pod = pods
        .iter()
        .filter(|p| p.meta().deletion_timestamp.is_none() || finished.is_some())
        .max_by_key(|p| p.creation_timestamp().map(|t| t.0));
    let Some(done) = finished else {
        return ProbeRun::Running(waiting(pod));
    };
    let terminated = pod
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == "probe"))
        .and_then(|c| c.state.as_ref()?.terminated.as_ref());
    let parsed: Option<Vec<EndpointCheck>> = terminated
        .and_then(|t| t.message.as_deref())
        .and_then(|m| serde_json::from_str(m).ok())
        .filter(|r: &Vec<EndpointCheck>| r.len() == w.endpoints.len())
        .map(|r| r.into_iter().map(coarse).collect());
    let message = match (&parsed, terminated) {
        (Some(r), _) => summary(r),
        (None, Some(t)) => format!(
            "the probe reported no results (exit code {}{})",
            t.exit_code,
            t.reason
                .as_deref()
                .map(|r| format!(", {r}"))
                .unwrap_or_default()
        ),
        (None, None) => format!("the probe Job ended without running the probe: {}", done.1),
    };
    let spec = pod.and_then(|p| p.spec.as_ref());
    ProbeRun::Finished(Box::new(VerificationStatus {
        job: w.job_name.clone(),
        key: w.key.clone(),
        time: done.0,
        slot: w.slot.clone(),
        config_hash: w.hash.clone(),
        passed: parsed.as_ref().is_some_and(|r| r.iter().all(|e| e.ok)),
        message,
        pod: pod.map(|p| p.name_any()),
        node: spec.and_then(|s| s.node_name.clone()),
        image: spec.and_then(|s| s.containers.first()?.image.clone()),
        endpoints: parsed.unwrap_or_default(),
    }))
}

type Finished = (
    Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    String,
);

/// A True `Complete` or `Failed` condition: when, and its reason and message.
fn job_condition(job: &Job, type_: &str) -> Option<Finished> {
    let c = job
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")?;
    let words = [c.reason.as_deref(), c.message.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(": ");
    Some((c.last_transition_time.clone(), words))
}

/// What a running probe's Pod waits on.
fn waiting(pod: Option<&Pod>) -> String {
    let Some(p) = pod else {
        return "the probe Job has no Pod yet".into();
    };
    let w = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first()?.state.as_ref()?.waiting.as_ref());
    match w {
        Some(w) => format!(
            "Pod {} waiting: {}{}",
            p.name_any(),
            w.reason.as_deref().unwrap_or("unknown"),
            w.message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ),
        None => format!("Pod {} running", p.name_any()),
    }
}

/// What status keeps of a probe result: the path taken and whether it was the expected one,
/// with a reason from a closed set. Resolved addresses, latency, error texts and the status
/// code of a direct answer stay in the probe Pod (readable by whoever may read the
/// namespace's Pods): in status, where every policy author reads it, they would make
/// verification a scanner of the cluster network.
pub fn coarse(e: EndpointCheck) -> EndpointCheck {
    let reason = match (e.got.as_str(), e.via_proxy) {
        _ if e.ok => None,
        (_, true) if matches!(e.status_code, Some(401 | 407)) => {
            Some("the proxy rejected the credentials")
        }
        ("Direct", _) => Some("answered directly"),
        ("Proxied", _) => Some("the proxy let it through"),
        ("Blocked", _) if e.expect == "Blocked" => {
            Some("refused by the proxy, but reachable directly")
        }
        ("Blocked", _) => Some("refused by the proxy"),
        (_, true) => Some("no answer through the proxy"),
        (_, false) => Some("no answer directly"),
    };
    let code = match (e.via_proxy, e.status_code) {
        (true, Some(c)) if (400..600).contains(&c) => Some(c),
        _ => None,
    };
    EndpointCheck {
        status_code: code,
        dns: Vec::new(),
        latency_ms: None,
        error: reason.map(|r| match code {
            Some(c) => format!("{r} (HTTP {c})"),
            None => r.to_owned(),
        }),
        ..e
    }
}

/// The first failing endpoint, or what passed.
fn summary(results: &[EndpointCheck]) -> String {
    match results.iter().find(|e| !e.ok) {
        Some(e) => format!(
            "{} (expected {}, got {}): {}",
            e.url,
            e.expect,
            e.got,
            e.error.as_deref().unwrap_or("failed")
        ),
        None => format!("all {} endpoint(s) took their expected path", results.len()),
    }
}
