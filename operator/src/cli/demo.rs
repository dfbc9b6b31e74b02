//! `demo`: the operator against an in-memory cluster, so a newcomer sees it work without one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use super::run::{LogArgs, LogFormat, init_logs, shutdown_signal};
use crate::api::{EgressProxyPolicy, Fact, TrustStatus};
use crate::controller::{self, READY, Settings};
use crate::workloads::kubelet::trust_dir_mount;
use crate::workloads::{CONFIG_HASH, TRUST_BUNDLE};

const CLUSTER: &str = include_str!("../../demo/cluster.yaml");
const EXAMPLES: [(&str, &str); 3] = [
    (
        "examples/single-credential.yaml",
        include_str!("../../../examples/single-credential.yaml"),
    ),
    (
        "examples/two-slot.yaml",
        include_str!("../../../examples/two-slot.yaml"),
    ),
    (
        "examples/trust.yaml",
        include_str!("../../../examples/trust.yaml"),
    ),
];
/// The CA source of examples/trust.yaml, which the demo generates: (namespace, name, key).
const DEMO_CA: (&str, &str, &str) = ("team-d", "corp-proxy-ca", "ca.crt");
/// The subject of the generated CA.
const DEMO_CA_NAME: &str = "Demo Corp TLS Inspection CA";

/// Arguments of `demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Where to write the kubeconfig of the in-memory cluster (for kubectl).
    #[arg(long, default_value = "egress-proxy-demo.kubeconfig")]
    pub kubeconfig: PathBuf,
    /// Manifests (file or directory, repeatable) applied before the operator starts, in
    /// place of the built-in cluster facts and examples: the cluster holds what they contain
    /// and what every API server has (default namespaces, the kubernetes Service), nothing
    /// else (no ServiceCIDR unless they have one). Add `--load examples/` for the examples.
    #[arg(long)]
    pub load: Vec<PathBuf>,
    /// Address of the in-memory API server.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Log filter for the operator's own logs (stderr).
    #[arg(long, default_value = "warn")]
    pub log_level: String,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    init_logs(&LogArgs {
        log_level: args.log_level.clone(),
        log_format: LogFormat::Text,
    })?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(demo(args))
}

async fn demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let sim = start_cluster(args).await?;
    sim.write_kubeconfig(&args.kubeconfig)
        .with_context(|| format!("writing {}", args.kubeconfig.display()))?;

    let client = sim.client()?;
    let settings = Settings {
        api_host: Some(sim.addr().ip().to_string()),
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(controller::run(client.clone(), settings, async {
        let _ = stopped.await;
    }));
    println!("Operator started (namespaces labelled egressproxy.io/enabled=true)\n");

    settle(&client).await;
    report(&client).await?;
    let kc = std::fs::canonicalize(&args.kubeconfig).unwrap_or(args.kubeconfig.clone());
    print_hints(&kc, args.load.is_empty());
    follow_events(&client).await;
    let _ = stop.send(());
    let _ = operator.await;
    println!("Stopped.");
    Ok(ExitCode::SUCCESS)
}

/// kube-sim with its controllers, the CRD, and the built-in cluster facts and examples, or
/// only what `--load` names. kube-sim seeds no ServiceCIDR of its own: the built-in facts have theirs, and a
/// loaded cluster has exactly the ones its files contain.
async fn start_cluster(args: &DemoArgs) -> anyhow::Result<kube_sim::KubeSimHandle> {
    // The CRD goes first, so a user's own policies in `--load` files are served.
    let dir = std::env::temp_dir().join(format!("egress-proxy-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let crd = dir.join("crd.yaml");
    std::fs::write(&crd, crate::api::crd_yaml()?)?;
    let mut load = vec![crd];
    load.extend(args.load.iter().cloned());
    let started = kube_sim::KubeSim::start(kube_sim::Config {
        listen: args.listen,
        load,
        seed_service_cidr: Some(false),
        controllers: true,
        ..Default::default()
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let sim = started.context("starting the in-memory API server")?;
    println!("In-memory Kubernetes API server on {}", sim.base_url());
    if args.load.is_empty() {
        let n = sim.apply_yaml(CLUSTER).context("built-in cluster facts")?;
        println!(
            "  built-in cluster facts: {n} objects (3 AWS nodes, Service network 10.43.0.0/16, domain cluster.corp)"
        );
    } else {
        for p in &args.load {
            println!("  loaded {}", p.display());
        }
        println!(
            "  nothing built in: only what was loaded, the default namespaces and the kubernetes Service"
        );
        return Ok(sim);
    }
    for (name, yaml) in EXAMPLES {
        let n = sim
            .apply_yaml(yaml)
            .with_context(|| format!("applying {name}"))?;
        println!("  applied {name} ({n} objects)");
    }
    let (ns, name, key) = DEMO_CA;
    let (pem, until) = demo_ca()?;
    let config_map = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {key: pem},
    });
    sim.apply_yaml(&config_map.to_string())
        .context("the demo CA's ConfigMap")?;
    println!(
        "  generated the CA of the TLS-inspecting proxy in examples/trust.yaml: CN={DEMO_CA_NAME}, \
         valid until {until}, in ConfigMap {ns}/{name} key {key} (its key is discarded)"
    );
    Ok(sim)
}

/// A CA certificate (PEM) for the trust example and its notAfter (a date): valid from
/// yesterday for a year. Its private key is dropped here: nothing ever signs with it.
fn demo_ca() -> anyhow::Result<(String, String)> {
    use k8s_openapi::jiff::{Timestamp, ToSpan, tz::TimeZone};
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, date_time_ymd,
    };
    let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
    let (from, until) = (today.yesterday()?, today.checked_add(1.year())?);
    let ymd = |d: k8s_openapi::jiff::civil::Date| {
        date_time_ymd(
            i32::from(d.year()),
            d.month().unsigned_abs(),
            d.day().unsigned_abs(),
        )
    };
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let dn = &mut params.distinguished_name;
    dn.push(DnType::CommonName, DEMO_CA_NAME);
    dn.push(DnType::OrganizationName, "Demo Corp");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = ymd(from);
    params.not_after = ymd(until);
    let cert = params.self_signed(&KeyPair::generate()?)?;
    Ok((cert.pem(), until.to_string()))
}

/// How to explore the cluster; the walk through the examples only when they were applied.
fn print_hints(kubeconfig: &std::path::Path, examples: bool) {
    println!("Explore it with kubectl:");
    println!("  export KUBECONFIG={}", kubeconfig.display());
    println!("  kubectl get egressproxypolicies -A -o wide");
    if !examples {
        println!("\nServing until Ctrl-C. Operator events follow:\n");
        return;
    }
    println!(
        "  kubectl -n team-a get deployment api -o yaml        # env from secretKeyRef, config-hash"
    );
    println!("  kubectl -n team-a describe egressproxypolicy outbound");
    println!("Change the proxy password and watch exactly one rollout of team-a/api:");
    println!(
        "  kubectl -n team-a patch secret egress-proxy --type merge -p '{{\"stringData\":{{\"httpProxy\":\"http://team-a:new-password@proxy.corp.example:3128\"}}}}'"
    );
    println!(
        "Rotate team-b's credential as rotation tooling does: write the standby slot, wait until \
         the old one may be revoked:"
    );
    println!(
        "  kubectl -n proxy-system patch secret egress-proxy-green --type merge -p '{{\"stringData\":{{\"httpProxy\":\"http://team-b-green:new-password@proxy.corp.example:3128\",\"httpsProxy\":\"http://team-b-green:new-password@proxy.corp.example:3128\"}}}}'"
    );
    println!(
        "  kubectl -n team-b wait epp/outbound --for=jsonpath='{{.status.rotation.phase}}'=Complete"
    );
    let exe = std::env::current_exe().map_or("egress-proxy-operator".to_owned(), |p| {
        p.display().to_string()
    });
    println!(
        "See the generated CA in every client's form in team-d/reports: its variables, the \
         read-only mount and the bundle's certificates:"
    );
    println!(
        "  {exe} explain --kubeconfig {} --workload team-d/deploy/reports https://pypi.org/",
        kubeconfig.display()
    );
    println!("\nServing until Ctrl-C. Operator events follow:\n");
}

/// Prints the operator's Events as they happen, until Ctrl-C or SIGTERM.
async fn follow_events(client: &Client) {
    let events = Api::<Event>::all(client.clone());
    let start = k8s_openapi::jiff::Timestamp::now();
    let mut stream = std::pin::pin!(watcher(events, watcher::Config::default()).applied_objects());
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            ev = stream.next() => match ev {
                Some(Ok(e)) => {
                    let fresh = e.event_time.as_ref().is_some_and(|t| t.0 > start);
                    if fresh && e.reporting_controller.as_deref() == Some(controller::REPORTER) {
                        print_event(&e);
                    }
                }
                Some(Err(e)) => {
                    let error = controller::describe_watch(&e);
                    tracing::warn!(%error, "event watch");
                }
                None => break,
            }
        }
    }
}

/// Waits until every policy reports on its current generation and nothing is rolling.
async fn settle(client: &Client) {
    let api = Api::<EgressProxyPolicy>::all(client.clone());
    for _ in 0..150 {
        if let Ok(list) = api.list(&ListParams::default()).await {
            let done = !list.items.is_empty()
                && list.items.iter().all(|p| {
                    let st = p.status.clone().unwrap_or_default();
                    st.observed_generation == p.metadata.generation
                        && st
                            .conditions
                            .iter()
                            .any(|c| c.type_ == "Reconciling" && c.status == "False")
                });
            if done {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("(the policies did not settle within 30 s; showing their state now)\n");
}

fn fact_line(name: &str, f: &Option<Fact>) {
    let Some(f) = f else { return };
    if f.values.is_empty() {
        println!(
            "    {name:<15} not found: {}",
            f.message.as_deref().unwrap_or("-")
        );
    } else {
        println!(
            "    {name:<15} {}  (from {})",
            f.values.join(", "),
            f.source.as_deref().unwrap_or("?")
        );
    }
}

async fn report(client: &Client) -> anyhow::Result<()> {
    let mut policies = Api::<EgressProxyPolicy>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    policies.sort_by_key(|p| (p.namespace(), p.name_any()));
    if let Some(d) = policies
        .iter()
        .find_map(|p| p.status.as_ref()?.discovered.clone())
    {
        println!("Discovered from the cluster (never assumed):");
        fact_line("API server", &d.api_server);
        fact_line("Service network", &d.service_network);
        fact_line("Pod network", &d.pod_network);
        fact_line("cluster domain", &d.cluster_domain);
        fact_line("node addresses", &d.node_addresses);
        fact_line("cloud metadata", &d.cloud_metadata);
        println!();
    }
    for p in &policies {
        policy_lines(p);
        workloads_of(client, &p.namespace().unwrap_or_default()).await?;
        println!();
    }
    Ok(())
}

/// Ready, dialect, NO_PROXY, what it leaves out and its warnings.
fn policy_lines(p: &EgressProxyPolicy) {
    let ns = p.namespace().unwrap_or_default();
    let st = p.status.clone().unwrap_or_default();
    let ready = st.conditions.iter().find(|c| c.type_ == READY);
    println!(
        "EgressProxyPolicy {ns}/{}: Ready={} ({}) — {}",
        p.name_any(),
        ready.map_or("Unknown", |c| c.status.as_str()),
        ready.map_or("", |c| c.reason.as_str()),
        ready.map_or("", |c| c.message.as_str()),
    );
    println!(
        "  dialect {}, active credential slot {}",
        p.spec.no_proxy.dialect, p.spec.proxy.active
    );
    println!(
        "  NO_PROXY = {}",
        st.no_proxy.as_deref().unwrap_or("(not computed)")
    );
    if !st.uncovered.is_empty() {
        let entries: Vec<&str> = st.uncovered.iter().map(|u| u.entry.as_str()).collect();
        println!(
            "  left out, some {} client cannot read them (why: kubectl get epp -n {ns} {} -o yaml): {}",
            p.spec.no_proxy.dialect,
            p.name_any(),
            entries.join(", ")
        );
    }
    if let Some(t) = &st.trust {
        trust_lines(t);
    }
    for w in &st.warnings {
        println!("  warning: {w}");
    }
}

/// status.trust: the bundle, its CAs and the roots kept with them.
fn trust_lines(t: &TrustStatus) {
    let roots = match (&t.root_set, t.root_count) {
        (Some(set), Some(n)) => format!("roots {}: {set}, {n} certificates", t.roots),
        _ => format!("roots {}", t.roots),
    };
    println!("  trust bundle {} ({roots})", t.bundle);
    for c in &t.certificates {
        println!(
            "    CA {}, notAfter {} (from {})",
            c.subject, c.not_after.0, c.source
        );
    }
}

/// The Deployments (with their ReplicaSet revisions) and StatefulSets of a namespace.
async fn workloads_of(client: &Client, ns: &str) -> anyhow::Result<()> {
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items;
    let lp = ListParams::default();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items
    {
        let Some(spec) = d.spec.as_ref() else {
            continue;
        };
        let uid = d.uid().unwrap_or_default();
        let mut revisions: Vec<u64> = rs
            .iter()
            .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
            .filter_map(|r| {
                let revision = r.annotations().get("deployment.kubernetes.io/revision")?;
                revision.parse().ok()
            })
            .collect();
        revisions.sort_unstable();
        let revisions: Vec<String> = revisions.iter().map(u64::to_string).collect();
        workload_lines("Deployment", &d.name_any(), &spec.template);
        println!(
            "      rollouts so far: ReplicaSet revision {}",
            revisions.join(", ")
        );
    }
    for s in Api::<StatefulSet>::namespaced(client.clone(), ns)
        .list(&lp)
        .await?
        .items
    {
        if let Some(spec) = s.spec.as_ref() {
            workload_lines("StatefulSet", &s.name_any(), &spec.template);
        }
    }
    Ok(())
}

fn workload_lines(kind: &str, name: &str, t: &PodTemplateSpec) {
    let annotation = |key: &str| {
        let m = t.metadata.as_ref()?;
        m.annotations
            .as_ref()?
            .get(key)
            .map(|v| format!("{key}={v}"))
    };
    let bundle = annotation(TRUST_BUNDLE).map_or(String::new(), |b| format!(", {b}"));
    println!(
        "  {kind}/{name}: {}{bundle}",
        annotation(CONFIG_HASH).unwrap_or_else(|| "not injected".to_owned())
    );
    let Some(spec) = t.spec.as_ref() else { return };
    let containers: Vec<(&str, &Container)> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ("init container", c))
        .chain(spec.containers.iter().map(|c| ("container", c)))
        .collect();
    for (what, c) in containers {
        let mut refs: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for e in c.env.iter().flatten() {
            let src = match e.value_from.as_ref() {
                Some(v) if v.secret_key_ref.is_some() => {
                    let r = v
                        .secret_key_ref
                        .as_ref()
                        .map(|r| format!("Secret {}[{}]", r.name, r.key));
                    r.unwrap_or_default()
                }
                Some(v) if v.config_map_key_ref.is_some() => {
                    let r = v
                        .config_map_key_ref
                        .as_ref()
                        .map(|r| format!("ConfigMap {}[{}]", r.name, r.key));
                    r.unwrap_or_default()
                }
                Some(_) => "fieldRef".into(),
                None => "a plain value".into(),
            };
            refs.entry(src).or_default().push(e.name.as_str());
        }
        for (src, names) in refs {
            println!("      {what} {}: {} <- {src}", c.name, names.join(", "));
        }
        if let Some(m) = trust_dir_mount(c) {
            let access = if m.read_only == Some(true) {
                "read-only"
            } else {
                "read-write"
            };
            println!(
                "      {what} {}: volume {} at {} ({access})",
                c.name, m.name, m.mount_path
            );
        }
    }
}

fn print_event(e: &Event) {
    let regarding = e.regarding.as_ref();
    let who = regarding.map_or(String::new(), |r| {
        format!(
            "{}/{}",
            r.namespace.as_deref().unwrap_or(""),
            r.name.as_deref().unwrap_or("")
        )
    });
    println!(
        "[{}] {} {} {}: {}",
        e.event_time
            .as_ref()
            .map_or(String::new(), |t| t.0.to_string()),
        e.type_.as_deref().unwrap_or(""),
        who,
        e.reason.as_deref().unwrap_or(""),
        e.note.as_deref().unwrap_or("")
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// examples/trust.yaml names the CA source the demo generates, and the CA passes the
    /// checks of a trust source.
    #[test]
    fn the_trust_example_names_the_generated_ca() {
        let (ns, name, key) = DEMO_CA;
        let yaml = EXAMPLES[2].1;
        let policy = serde_yaml_ng::Deserializer::from_str(yaml)
            .map(|d| serde_yaml_ng::Value::deserialize(d).unwrap())
            .find(|d| d["kind"] == "EgressProxyPolicy")
            .expect("a policy");
        let policy: EgressProxyPolicy = serde_yaml_ng::from_value(policy).unwrap();
        assert_eq!(policy.namespace().as_deref(), Some(ns));
        let source = &policy.spec.trust.as_ref().expect("spec.trust").sources[0];
        assert_eq!(source.shown(ns), format!("ConfigMap {ns}/{name} key {key}"));
        let (pem, _) = demo_ca().unwrap();
        let now = k8s_openapi::jiff::Timestamp::now();
        let certs = crate::trust::parse_source("demo", pem.as_bytes(), now).unwrap();
        assert_eq!(certs.len(), 1);
        assert_eq!(certs[0].subject, format!("CN={DEMO_CA_NAME}, O=Demo Corp"));
        assert!(!pem.contains("PRIVATE KEY"));
    }
}
