//! `explain --workload NAMESPACE/KIND/NAME URL`: the live workload's containers, each with
//! its proxy variables resolved as the kubelet would ([`crate::workloads::kubelet`]) and
//! each dialect's decision for the URL. The dialect is `--dialect`'s, else that of the
//! EgressProxyPolicy whose managed objects the container's variables come from, else of the
//! policy that selects the workload, else every dialect.
//!
//! Pure: parsing, the choice of dialects, the report and its text. I/O: [`read`].

use std::collections::BTreeMap;

use anyhow::Context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodTemplateSpec, Secret};
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use crate::api::{EgressProxyPolicy, WorkloadKind};
use crate::credentials::managed_name;
use crate::noproxy::{Decision, Dialect, Env, Explanation, Matcher, Target, redact};
use crate::workloads::kubelet::{self, ContainerEnv, Fetched, ObjectKind, Objects, Source};
use crate::workloads::{is_ours, kind_name};

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
    let kind = parse_kind(kind).with_context(|| {
        format!(
            "--workload {s:?}: kind {kind:?} is not Deployment, StatefulSet, DaemonSet or CronJob"
        )
    })?;
    Ok(WorkloadRef {
        namespace: namespace.to_owned(),
        kind,
        name: name.to_owned(),
    })
}

fn parse_kind(kind: &str) -> Option<WorkloadKind> {
    let k = kind.to_ascii_lowercase();
    let k = k.strip_suffix(".apps").unwrap_or(&k);
    match k {
        "deployment" | "deployments" | "deploy" => Some(WorkloadKind::Deployment),
        "statefulset" | "statefulsets" | "sts" => Some(WorkloadKind::StatefulSet),
        "daemonset" | "daemonsets" | "ds" => Some(WorkloadKind::DaemonSet),
        _ => match k.strip_suffix(".batch").unwrap_or(k) {
            "cronjob" | "cronjobs" | "cj" => Some(WorkloadKind::CronJob),
            _ => None,
        },
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
            container_report(c, choose_dialects(flag, live, spec), target, url)
        })
        .collect();
    Report {
        workload: live.workload.clone(),
        url: redact(url),
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
    let secrets = env.proxy_secrets();
    let variables = c
        .variables
        .iter()
        .map(|v| VariableReport {
            name: v.name.clone(),
            value: v.redacted_value().map(|val| {
                secrets
                    .iter()
                    .fold(val, |acc, (raw, red)| acc.replace(raw.as_str(), red))
            }),
            source: v.source.clone(),
        })
        .collect();
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
    }
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let mut out = format!("{}, URL {}\n", r.workload, r.url);
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

/// Reads the workload, the Secrets and ConfigMaps its containers refer to, and the
/// namespace's policies.
pub async fn read(client: Client, w: &WorkloadRef) -> anyhow::Result<Live> {
    let ns = &w.namespace;
    let found = match w.kind {
        WorkloadKind::Deployment => get::<Deployment>(&client, w)
            .await?
            .map(|d| (d.labels().clone(), d.spec.map(|s| s.template))),
        WorkloadKind::StatefulSet => get::<StatefulSet>(&client, w)
            .await?
            .map(|d| (d.labels().clone(), d.spec.map(|s| s.template))),
        WorkloadKind::DaemonSet => get::<DaemonSet>(&client, w)
            .await?
            .map(|d| (d.labels().clone(), d.spec.map(|s| s.template))),
        WorkloadKind::CronJob => get::<CronJob>(&client, w).await?.map(|c| {
            let labels = c.labels().clone();
            let job = c.spec.and_then(|s| s.job_template.spec);
            (labels, job.map(|j| j.template))
        }),
    };
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
    })
}

async fn get<K>(client: &Client, w: &WorkloadRef) -> anyhow::Result<Option<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), &w.namespace)
        .get_opt(&w.name)
        .await
        .map_err(|e| anyhow::anyhow!("reading {w}: {}", crate::controller::describe(&e)))
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
        }
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
                },
                {
                    "name": "side", "init": false, "failure": null, "variables": [],
                    "notes": [], "dialectFrom": selected,
                    "explanations": go("direct", json!(null), json!(null),
                        "no proxy configured for https URLs (read: HTTPS_PROXY, https_proxy)"),
                },
                {
                    "name": "setup", "init": true, "failure": null,
                    "variables": [{"name": "https_proxy",
                                   "value": "http://me:***@own.proxy:8080",
                                   "source": {"from": "value", "expanded": []}}],
                    "notes": [], "dialectFrom": selected,
                    "explanations": go("proxy", json!("http://me:***@own.proxy:8080"),
                        json!(null), "no NO_PROXY variable in effect; using https_proxy"),
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
