//! Reconciler benchmarks; prints figures (run: `cargo bench -p egress-proxy-operator --bench reconcile`).
//!
//! 1. 1,000 selected Deployments in 100 namespaces share one source Secret. Time from the
//!    Secret update until every Deployment is patched (patches the server refused with 409
//!    do not count), next to a bare client sending the same 1,000 server-side-apply patches
//!    (the env entries the operator applied, and one changed annotation) with the same
//!    concurrency against the same server; then the same with 10,000 in 1,000 namespaces (one
//!    update).
//! 2. Resident memory of the operator binary with 10,000 Deployments (1,000 selected) and
//!    10,000 unrelated Secrets in the server.
//! 3. A credential rotation (`rotation: Auto`) of the same 1,000 Deployments: time until every
//!    policy reports `Complete`, and the operator's writes next to the minimum (one write per
//!    workload, the managed Secret twice per policy, two status writes per policy).
//! 4. Node churn: 100 nodes joining the known node subnets (and leaving), then 20 joining a
//!    new subnet, with 100 selected Deployments: how many workload patches each causes.
//! 5. Resident memory with realistic workloads (three containers with probes, resources, 30
//!    variables and mounts each, about 6 KB of JSON): 1,000 and 10,000 workloads (80 %
//!    Deployments, 10 % StatefulSets, 10 % DaemonSets), 10 % of each selected, with a Secret
//!    per workload and a ConfigMap per five; the time until all selected are injected, and
//!    the growth per workload.
//! 6. `-- large` alone (not in the default run): 50,000 realistic workloads in 500
//!    namespaces (50,000 Secrets, 10,000 ConfigMaps, 10 % selected): the operator's memory
//!    and its growth per workload against 1,000, the initial injection and one change next
//!    to a bare client, and kube-sim's own memory per workload.
//!
//! The last line is `summary: key=value ...` with the figures measured in this run.
//! `EPO_BENCH_LOG=egress_proxy_operator=debug` logs the in-process operator to stderr.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use egress_proxy_operator::controller::{self, Settings};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube_sim::fixtures::{realistic_kind, realistic_namespace};
use serde_json::json;

const CLUSTER: &str = include_str!("../demo/cluster.yaml");
const WORKERS: u16 = 16;

fn fixtures(
    namespaces: usize,
    selected_per_ns: usize,
    unrelated_per_ns: usize,
    secrets_per_ns: usize,
) -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: proxy-system}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: shared, namespace: proxy-system, annotations: {egressproxy.io/allowed-namespaces: \"*\"}}\n\
         stringData: {httpProxy: \"http://u:first@proxy.corp.example:3128\", httpsProxy: \"http://u:first@proxy.corp.example:3128\"}\n",
    );
    for n in 0..namespaces {
        let ns = format!("team-{n:03}");
        let _ = write!(
            y,
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}, labels: {{egressproxy.io/enabled: \"true\"}}}}\n\
             ---\napiVersion: egressproxy.io/v1alpha1\nkind: EgressProxyPolicy\nmetadata: {{name: outbound, namespace: {ns}}}\n\
             spec:\n  workloadSelector: {{matchLabels: {{egress: proxied}}}}\n  proxy:\n    credentials: [{{name: main, secretRef: {{name: shared, namespace: proxy-system}}}}]\n    active: main\n  rollout: {{maxConcurrent: 1000}}\n"
        );
        for (i, selected) in (0..selected_per_ns)
            .map(|i| (i, true))
            .chain((0..unrelated_per_ns).map(|i| (i, false)))
        {
            let (name, label) = if selected {
                (format!("app-{i}"), "egress: proxied, ")
            } else {
                (format!("other-{i}"), "")
            };
            let _ = write!(
                y,
                "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {ns}, labels: {{{label}app: {name}}}}}\n\
                 spec:\n  replicas: 0\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: main, image: \"registry.internal/app:1\", env: [{{name: MODE, value: prod}}]}}]}}\n"
            );
        }
        for i in 0..secrets_per_ns {
            let _ = write!(
                y,
                "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: unrelated-{i}, namespace: {ns}}}\nstringData: {{token: \"{}\"}}\n",
                "x".repeat(256)
            );
        }
    }
    y
}

async fn sim_with(yaml: &str) -> kube_sim::KubeSimHandle {
    sim_running(yaml, true).await
}

/// kube-sim with `yaml` loaded, with or without its simulated workload controllers.
async fn sim_running(yaml: &str, controllers: bool) -> kube_sim::KubeSimHandle {
    // No seeded ServiceCIDR: the cluster facts bring their own.
    let sim = kube_sim::KubeSim::start(kube_sim::Config {
        controllers,
        seed_service_cidr: Some(false),
        ..Default::default()
    })
    .await
    .expect("kube-sim");
    sim.apply_yaml(CLUSTER).expect("cluster");
    sim.apply_yaml(&egress_proxy_operator::api::crd_yaml().expect("crd"))
        .expect("crd");
    sim.apply_yaml(yaml).expect("fixtures");
    sim
}

fn field_manager_writes(sim: &kube_sim::KubeSimHandle) -> u64 {
    sim.request_counts()
        .by_field_manager
        .get("egress-proxy-operator")
        .copied()
        .unwrap_or(0)
}

/// The operator in-process, with WORKERS concurrent reconciles; send on the first to stop it.
fn start_operator(
    client: &kube::Client,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), controller::RunError>>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let settings = Settings {
        api_host: Some("127.0.0.1".into()),
        workers: WORKERS,
        ..Default::default()
    };
    let op = tokio::spawn(controller::run(client.clone(), settings, async {
        let _ = stopped.await;
    }));
    (stop, op)
}

/// Workload patches the server took so far (Deployments, StatefulSets and DaemonSets).
fn patched(sim: &kube_sim::KubeSimHandle) -> u64 {
    patched_in(&sim.request_counts())
}

/// Workload patches the server took: refused ones (a conflict) are not counted.
fn patched_in(counts: &kube_sim::hooks::RequestCounts) -> u64 {
    WORKLOAD_RESOURCES
        .map(|kind| counts.succeeded("patch", kind))
        .iter()
        .sum()
}

/// Workload patches the server refused.
fn refused_in(counts: &kube_sim::hooks::RequestCounts) -> u64 {
    WORKLOAD_RESOURCES
        .map(|kind| counts.get("patch", kind) - counts.succeeded("patch", kind))
        .iter()
        .sum()
}

const WORKLOAD_RESOURCES: [&str; 3] = ["deployments", "statefulsets", "daemonsets"];

async fn wait_patches(
    sim: &kube_sim::KubeSimHandle,
    from: u64,
    n: u64,
    limit: Duration,
) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if patched(sim) >= from + n {
            return Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// The figures of the `summary:` line, in the order measured.
#[derive(Default)]
struct Summary(Vec<(&'static str, String)>);

impl Summary {
    fn add(&mut self, key: &'static str, value: impl ToString) {
        self.0.push((key, value.to_string()));
    }

    fn line(&self) -> String {
        let kv: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("summary: {}", kv.join(" "))
    }
}

/// `namespaces` namespaces of 10 selected Deployments, one source Secret: the time from
/// its update until every Deployment is patched, next to the bare client, over `rounds`
/// updates (median). Returns the median ratio and writes and Events per change over the
/// minimum.
async fn propagation(namespaces: usize, rounds: usize) -> Option<(f64, f64)> {
    let n = namespaces * 10;
    println!("== {n} selected Deployments in {namespaces} namespaces, one source Secret update ==");
    let sim = sim_with(&fixtures(namespaces, 10, 0, 0)).await;
    let client = sim.client().expect("client");
    let (stop, op) = start_operator(&client);
    let start = Instant::now();
    let limit = Duration::from_secs(60 + n as u64 / 20);
    let first = wait_patches(&sim, 0, n as u64, limit).await;
    println!(
        "initial injection of {n} Deployments: {:?} after operator start",
        first.map(|_| start.elapsed())
    );
    tokio::time::sleep(Duration::from_secs(5)).await;

    let mut ratios = Vec::new();
    let mut per_change = Vec::new();
    for round in 1..=rounds {
        let patches = patched(&sim);
        let refused = refused_in(&sim.request_counts());
        let writes = field_manager_writes(&sim);
        let events = sim.request_counts().get("create", "events");
        let secrets =
            Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "proxy-system");
        let t0 = Instant::now();
        secrets
            .patch("shared", &PatchParams::default(), &Patch::Merge(json!({"stringData": {"httpProxy": format!("http://u:round-{round}@proxy.corp.example:3128")}})))
            .await
            .expect("update secret");
        let Some(_) = wait_patches(&sim, patches, n as u64, limit).await else {
            println!("round {round}: not all Deployments were patched within {limit:?}");
            break;
        };
        let operator = t0.elapsed();
        // Past the status hold (3 s), so the change's last status write is counted.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let total_writes = field_manager_writes(&sim) - writes;
        let new_events = sim.request_counts().get("create", "events") - events;
        let refused = refused_in(&sim.request_counts()) - refused;

        let bare = bare_client(&sim, &client, namespaces, &format!("{round}")).await;
        let ratio = operator.as_secs_f64() / bare.as_secs_f64();
        ratios.push(ratio);
        // The minimum: each workload once, each managed Secret once, one status write and
        // one Event per policy.
        let minimum = n + 3 * namespaces;
        per_change.push((total_writes + new_events) as f64 / minimum as f64);
        println!(
            "round {round}: operator {:.0} ms, bare client {:.0} ms, ratio {ratio:.2}; operator API writes for the change: {total_writes} ({} events, {refused} workload patches refused), minimum {minimum} with the Events",
            operator.as_secs_f64() * 1000.0,
            bare.as_secs_f64() * 1000.0,
            new_events
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let _ = stop.send(());
    let _ = op.await;
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    per_change.sort_by(f64::total_cmp);
    let (ratio, writes) = (ratios[ratios.len() / 2], per_change[per_change.len() / 2]);
    println!(
        "median ratio operator/bare: {ratio:.2}; writes and Events per change over the minimum: {writes:.2}"
    );
    Some((ratio, writes))
}

async fn patch_throughput(summary: &mut Summary) {
    if let Some((ratio, writes)) = propagation(100, 3).await {
        summary.add("propagation_ratio_1k", format!("{ratio:.2}"));
        summary.add("writes_per_change_ratio", format!("{writes:.2}"));
    }
    if let Some((ratio, _)) = propagation(1000, 1).await {
        summary.add("propagation_ratio_10k", format!("{ratio:.2}"));
    }
}

/// Two slots (blue, green) in proxy-system for every namespace, policies rotating `Auto`.
fn rotation_fixtures(namespaces: usize, per_ns: usize) -> String {
    let slots = fixtures(namespaces, per_ns, 0, 0)
        .replace(
            "credentials: [{name: main, secretRef: {name: shared, namespace: proxy-system}}]\n    active: main",
            "credentials: [{name: blue, secretRef: {name: shared, namespace: proxy-system}}, {name: green, secretRef: {name: standby, namespace: proxy-system}}]\n    active: blue\n    rotation: Auto",
        );
    format!(
        "{slots}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: standby, namespace: proxy-system, annotations: {{egressproxy.io/allowed-namespaces: \"*\"}}}}\n\
         stringData: {{httpProxy: \"http://u:green-1@proxy.corp.example:3128\", httpsProxy: \"http://u:green-1@proxy.corp.example:3128\"}}\n"
    )
}

async fn complete(client: &kube::Client, limit: Duration) -> Option<Duration> {
    use egress_proxy_operator::api::{EgressProxyPolicy, RotationPhase};
    let api = Api::<EgressProxyPolicy>::all(client.clone());
    let t = Instant::now();
    while t.elapsed() < limit {
        let all = api.list(&Default::default()).await.expect("policies").items;
        let done = all.iter().all(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.rotation.as_ref())
                .is_some_and(|r| r.phase == RotationPhase::Complete && r.to == "green")
        });
        if done {
            return Some(t.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn rotation() {
    println!("== rotation (Auto) of 1,000 Deployments in 100 namespaces, two shared slots ==");
    let sim = sim_with(&rotation_fixtures(100, 10)).await;
    let client = sim.client().expect("client");
    let (stop, op) = start_operator(&client);
    if wait_patches(&sim, 0, 1000, Duration::from_secs(300))
        .await
        .is_none()
    {
        println!("initial injection did not finish within 300 s");
        return;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = sim.request_counts();
    let (writes, events) = (field_manager_writes(&sim), counts.get("create", "events"));
    let (patches, refused) = (patched_in(&counts), refused_in(&counts));
    let secrets =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "proxy-system");
    let t0 = Instant::now();
    secrets
        .patch("standby", &PatchParams::default(), &Patch::Merge(json!({"stringData": {"httpProxy": "http://u:green-2@proxy.corp.example:3128", "httpsProxy": "http://u:green-2@proxy.corp.example:3128"}})))
        .await
        .expect("write the standby slot");
    let switched = wait_patches(&sim, patches, 1000, Duration::from_secs(300)).await;
    let done = complete(&client, Duration::from_secs(300)).await;
    println!(
        "every Deployment switched: {switched:?}; every policy Complete: {:?}",
        done.map(|_| t0.elapsed())
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let counts = sim.request_counts();
    let total = field_manager_writes(&sim) - writes;
    let minimum = 1000 + 2 * 100 + 2 * 100;
    println!(
        "operator writes for the rotation: {total} (workloads {}, {} refused; minimum {minimum}: ratio {:.2}); events {}",
        patched_in(&counts) - patches,
        refused_in(&counts) - refused,
        total as f64 / minimum as f64,
        counts.get("create", "events") - events
    );
    let bare = bare_client(&sim, &client, 100, "rotation").await;
    if let Some(s) = switched {
        println!(
            "switching time {:.0} ms, bare client {:.0} ms, ratio {:.2}",
            s.as_secs_f64() * 1000.0,
            bare.as_secs_f64() * 1000.0,
            s.as_secs_f64() / bare.as_secs_f64()
        );
    }
    let _ = stop.send(());
    let _ = op.await;
}

/// The bare client: the operator's server-side-apply patches (10 per namespace), WORKERS at
/// a time; see [`bare_patches`].
async fn bare_client(
    sim: &kube_sim::KubeSimHandle,
    client: &kube::Client,
    namespaces: usize,
    tag: &str,
) -> Duration {
    bare_patches(sim, client, (namespaces, |_| "Deployment"), tag).await
}

/// `namespaces` namespaces with a policy, 100 realistic workloads each (10 selected; 80
/// Deployments, 10 StatefulSets, 10 DaemonSets), 100 Secrets and 20 ConfigMaps.
fn realistic_fixtures(namespaces: usize) -> String {
    let mut y = fixtures(namespaces, 0, 0, 0);
    for n in 0..namespaces {
        y.push_str(&realistic_namespace(n));
    }
    y
}

/// How long after its work the operator's RSS is read: its last writes are done, and it
/// has given back the startup's peak (it trims its heap every 10 s).
const SETTLE: Duration = Duration::from_secs(15);

/// The operator binary's memory once every selected Deployment of `namespaces` realistic
/// namespaces is injected, and how long that took.
async fn realistic_rss(namespaces: usize) -> Option<(Rss, Duration)> {
    let sim = sim_with(&realistic_fixtures(namespaces)).await;
    injected_rss(&sim, namespaces, &format!("r{namespaces}")).await
}

/// Starts the operator against `sim`, waits until the selected workloads of `namespaces`
/// realistic namespaces are injected, and reads its memory; stops it.
async fn injected_rss(
    sim: &kube_sim::KubeSimHandle,
    namespaces: usize,
    tag: &str,
) -> Option<(Rss, Duration)> {
    let (mut child, pid, dir) = spawn_operator(sim, tag);
    let t = Instant::now();
    let selected = (namespaces * 10) as u64;
    let done = wait_patches(sim, 0, selected, Duration::from_secs(600)).await;
    tokio::time::sleep(SETTLE).await;
    let rss = Rss::of(pid);
    stop(&mut child, pid).await;
    let _ = std::fs::remove_dir_all(&dir);
    done.map(|_| (rss, t.elapsed()))
}

async fn memory_realistic(summary: &mut Summary) {
    println!("== operator memory with realistic workloads (~6 KB each), 10 % selected ==");
    let mut figures = Vec::new();
    for namespaces in [10, 100] {
        let n = namespaces * 100;
        match realistic_rss(namespaces).await {
            Some((rss, took)) => {
                println!(
                    "{n} workloads + {n} Secrets + {} ConfigMaps: {rss}; all {} selected injected {:.1} s after start",
                    n / 5,
                    n / 10,
                    took.as_secs_f64()
                );
                figures.push((n, rss.total));
            }
            None => println!("{n} workloads: not all selected were injected within 600 s"),
        }
    }
    if let [(n1, r1), (n2, r2)] = figures[..] {
        let per = (r2 - r1) * 1024.0 / (n2 - n1) as f64;
        println!("growth per workload (with its Secret and a fifth of a ConfigMap): {per:.2} KiB");
        summary.add("rss_10k_realistic_mib", format!("{r2:.1}"));
        summary.add("kib_per_workload", format!("{per:.2}"));
    }
}

/// The operator binary as its own process against `sim` (its RSS is then its own): the
/// child, its pid, and the directory holding its kubeconfig.
fn spawn_operator(
    sim: &kube_sim::KubeSimHandle,
    tag: &str,
) -> (tokio::process::Child, u32, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("epo-bench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let kc = dir.join("kubeconfig");
    sim.write_kubeconfig(&kc).expect("kubeconfig");
    // EPO_BENCH_WRAP runs the operator under a profiler, e.g. "heaptrack -o /tmp/epo-{tag}"
    // ({tag} names the scenario's run).
    let wrap = std::env::var("EPO_BENCH_WRAP")
        .unwrap_or_default()
        .replace("{tag}", tag);
    let mut words = wrap.split_whitespace();
    let bin = env!("CARGO_BIN_EXE_egress-proxy-operator");
    let mut cmd = tokio::process::Command::new(words.next().unwrap_or(bin));
    cmd.args(words);
    if !wrap.is_empty() {
        cmd.arg(bin);
    }
    // Its own process group: a profiler's wrapper and the operator under it stop together.
    cmd.process_group(0);
    let child = cmd
        .args(["run", "--kubeconfig"])
        .arg(&kc)
        .args(["--log-level", "warn"])
        .kill_on_drop(true)
        .spawn()
        .expect("start operator");
    let pid = child.id().expect("pid");
    (child, pid, dir)
}

/// Stops the operator started by [`spawn_operator`] and whatever wraps it: SIGTERM to its
/// process group (a profiler writes its data as the operator exits), SIGKILL after 60 s.
async fn stop(child: &mut tokio::process::Child, pid: u32) {
    // SAFETY: killpg only sends a signal to the group this bench started.
    unsafe {
        libc::killpg(pid as libc::pid_t, libc::SIGTERM);
    }
    if tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .is_err()
    {
        // SAFETY: as above.
        unsafe {
            libc::killpg(pid as libc::pid_t, libc::SIGKILL);
        }
        let _ = child.wait().await;
    }
}

/// A process's memory from `/proc/PID/status`, in MiB.
struct Rss {
    total: f64,
    peak: f64,
    /// Heap, stacks: what the process allocated.
    anon: f64,
    /// Pages of the binary and its libraries.
    file: f64,
}

impl Rss {
    fn of(pid: u32) -> Rss {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let mib = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
                / 1024.0
        };
        Rss {
            total: mib("VmRSS:"),
            peak: mib("VmHWM:"),
            anon: mib("RssAnon:"),
            file: mib("RssFile:"),
        }
    }
}

impl std::fmt::Display for Rss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RSS {:.1} MiB (allocated {:.1}, binary and libraries {:.1}; peak {:.1})",
            self.total, self.anon, self.file, self.peak
        )
    }
}

async fn memory() {
    println!(
        "== operator memory: 10,000 Deployments (1,000 selected), 10,000 unrelated Secrets =="
    );
    let sim = sim_with(&fixtures(100, 10, 90, 100)).await;
    let patches = patched(&sim);
    let (mut child, pid, dir) = spawn_operator(&sim, "small");
    let t = Instant::now();
    let done = wait_patches(&sim, patches, 1000, Duration::from_secs(300)).await;
    println!(
        "all 1,000 selected Deployments injected: {:?}",
        done.map(|_| t.elapsed())
    );
    tokio::time::sleep(SETTLE).await;
    println!("operator {}", Rss::of(pid));
    stop(&mut child, pid).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Node of the bench cluster: `ip` its InternalIP, `pod` its pod range.
fn node_json(ip: &str, pod: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("ip-{}", ip.replace('.', "-"))},
        "spec": {"podCIDRs": [pod], "providerID": format!("aws:///eu-west-1a/i-{}", ip.replace('.', ""))},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]}
    })
}

/// Waits until every policy's status reports `n` node addresses: the operator has looked.
async fn nodes_seen(client: &kube::Client, n: usize, limit: Duration) -> bool {
    use egress_proxy_operator::api::EgressProxyPolicy;
    let api = Api::<EgressProxyPolicy>::all(client.clone());
    let t = Instant::now();
    while t.elapsed() < limit {
        let all = api.list(&Default::default()).await.expect("policies").items;
        let seen = all.iter().all(|p| {
            let d = p.status.as_ref().and_then(|s| s.discovered.as_ref());
            d.and_then(|d| d.node_addresses.as_ref())
                .is_some_and(|f| f.values.len() == n)
        });
        if seen {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn node_churn(summary: &mut Summary) {
    use k8s_openapi::api::core::v1::Node;
    println!("== node churn: 100 selected Deployments in 10 namespaces, --pod-cidr set ==");
    let sim = sim_with(&fixtures(10, 10, 0, 0)).await;
    let client = sim.client().expect("client");
    let (stop, tx) = tokio::sync::oneshot::channel::<()>();
    let settings = Settings {
        api_host: Some("127.0.0.1".into()),
        workers: WORKERS,
        overrides: controller::Overrides {
            pod_cidrs: vec!["10.42.0.0/16".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let op = tokio::spawn(controller::run(client.clone(), settings, async {
        let _ = tx.await;
    }));
    let limit = Duration::from_secs(120);
    if wait_patches(&sim, 0, 100, limit).await.is_none() || !nodes_seen(&client, 3, limit).await {
        println!("initial injection did not finish within 120 s");
        return;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let nodes = Api::<Node>::all(client.clone());
    let create = |ip: String, pod: String| {
        let nodes = nodes.clone();
        async move {
            let n = serde_json::from_value(node_json(&ip, &pod)).expect("node");
            nodes
                .create(&Default::default(), &n)
                .await
                .expect("create node");
        }
    };
    let patches = patched(&sim);
    let t = Instant::now();
    for i in 0..100u32 {
        let ip = format!("192.168.{}.{}", 50 + i % 2, 100 + i);
        create(ip, format!("10.42.{}.0/24", 10 + i)).await;
    }
    let seen = nodes_seen(&client, 103, limit).await;
    let rolls = patched(&sim) - patches;
    println!(
        "100 nodes joined the known subnets: seen by every policy in {:?}; workloads patched: {rolls}",
        seen.then(|| t.elapsed())
    );
    summary.add("node_scaleup_rolls", rolls);
    let patches = patched(&sim);
    for i in 0..100u32 {
        let name = format!("ip-192-168-{}-{}", 50 + i % 2, 100 + i);
        nodes
            .delete(&name, &Default::default())
            .await
            .expect("delete node");
    }
    nodes_seen(&client, 3, limit).await;
    let down = patched(&sim) - patches;
    println!("the 100 nodes left again: workloads patched: {down}");
    let patches = patched(&sim);
    for i in 0..20u32 {
        create(
            format!("10.9.0.{}", 10 + i),
            format!("10.42.{}.0/24", 200 + i),
        )
        .await;
    }
    nodes_seen(&client, 23, limit).await;
    wait_patches(&sim, patches, 100, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let burst = patched(&sim) - patches;
    println!("20 nodes joined a new subnet: workloads patched: {burst} (100 selected)");
    let _ = stop.send(());
    let _ = op.await;
}

/// This process's resident memory in MiB, after giving free heap pages back.
fn own_rss() -> f64 {
    // SAFETY: malloc_trim is thread-safe and only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
    Rss::of(std::process::id()).total
}

/// The bare client of the realistic namespaces: one server-side-apply patch to each
/// selected workload (10 per namespace, of their kinds), WORKERS at a time.
async fn bare_client_realistic(
    sim: &kube_sim::KubeSimHandle,
    client: &kube::Client,
    namespaces: usize,
    tag: &str,
) -> Duration {
    bare_patches(sim, client, (namespaces, |i| realistic_kind(i).0), tag).await
}

/// One server-side-apply patch to `app-0` to `app-9` of each namespace, of the kind
/// `kind_of(i)` names, WORKERS at a time; how long they took. Each is the same write as
/// the operator's: the env entries it applied (read before the clock starts, as the
/// operator reads its cache) and one changed template annotation.
async fn bare_patches(
    sim: &kube_sim::KubeSimHandle,
    client: &kube::Client,
    (namespaces, kind_of): (usize, fn(usize) -> &'static str),
    tag: &str,
) -> Duration {
    let targets = (0..namespaces).flat_map(|n| (0..10).map(move |i| (n, i)));
    let apis: Vec<_> = targets
        .map(|(n, i)| (workload_api(client, n, kind_of(i)), format!("app-{i}")))
        .collect();
    let bodies: Vec<_> = futures::stream::iter(&apis)
        .map(|((api, kind), name)| same_write(api, kind, name, tag))
        .buffered(WORKERS as usize)
        .collect()
        .await;
    let before = patched(sim);
    let t1 = Instant::now();
    futures::stream::iter(apis.iter().zip(&bodies))
        .map(|(((api, _), name), body)| async move {
            let params = PatchParams::apply("bare-client").force();
            api.patch(name, &params, &Patch::Apply(body))
                .await
                .expect("bare patch");
        })
        .buffer_unordered(WORKERS as usize)
        .collect::<Vec<_>>()
        .await;
    let bare = t1.elapsed();
    assert_eq!(patched(sim) - before, namespaces as u64 * 10);
    bare
}

/// The API of one workload kind in `team-NNN`, and the kind.
fn workload_api(
    client: &kube::Client,
    n: usize,
    kind: &'static str,
) -> (Api<kube::api::DynamicObject>, &'static str) {
    use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
    use kube::api::ApiResource;
    let resource = match kind {
        "StatefulSet" => ApiResource::erase::<StatefulSet>(&()),
        "DaemonSet" => ApiResource::erase::<DaemonSet>(&()),
        _ => ApiResource::erase::<Deployment>(&()),
    };
    let ns = format!("team-{n:03}");
    (Api::namespaced_with(client.clone(), &ns, &resource), kind)
}

/// An apply of `name` with the env entries the operator applied to each of its containers
/// (those that read the policy's managed Secret or ConfigMap) and the template annotation
/// `bench/round: tag`.
async fn same_write(
    api: &Api<kube::api::DynamicObject>,
    kind: &str,
    name: &str,
    tag: &str,
) -> serde_json::Value {
    // The managed Secret and ConfigMap of policy `outbound`.
    let managed = "egress-proxy-outbound";
    let o = api.get(name).await.expect("read the workload");
    let reads_managed = |e: &&serde_json::Value| {
        ["secretKeyRef", "configMapKeyRef"]
            .iter()
            .any(|r| e.pointer(&format!("/valueFrom/{r}/name")) == Some(&json!(managed)))
    };
    let mut spec = serde_json::Map::new();
    for list in ["initContainers", "containers"] {
        let Some(cs) = o.data.pointer(&format!("/spec/template/spec/{list}")) else {
            continue;
        };
        let cs: Vec<_> = cs
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let env: Vec<_> = c["env"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(reads_managed)
                    .collect();
                json!({"name": c["name"], "env": env})
            })
            .collect();
        spec.insert(list.into(), json!(cs));
    }
    let found = spec
        .values()
        .flat_map(|cs| cs.as_array().into_iter().flatten())
        .any(|c| c["env"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(found, "{name}: no env entry of the operator's to send");
    json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"annotations": {"bench/round": tag}}, "spec": spec}}
    })
}

/// `namespaces` realistic namespaces loaded one at a time (no fixture string of the whole
/// cluster in memory): the server, and kube-sim's own growth per workload in KiB. Without
/// kube-sim's simulated controllers: at this size they fall behind the load and resync every
/// workload again and again (they would add a ReplicaSet, ControllerRevision or Pods per
/// workload, which the operator does not read).
async fn large_sim(namespaces: usize) -> (kube_sim::KubeSimHandle, f64) {
    let before = own_rss();
    let t = Instant::now();
    let sim = sim_running(&fixtures(namespaces, 0, 0, 0), false).await;
    for n in 0..namespaces {
        sim.apply_yaml(&realistic_namespace(n)).expect("fixtures");
    }
    let grown = own_rss() - before;
    let workloads = namespaces * 100;
    let per = grown * 1024.0 / workloads as f64;
    println!(
        "kube-sim (no simulated controllers) with {workloads} workloads + {workloads} Secrets + {} ConfigMaps: loaded in {:.0} s, {grown:.0} MiB ({per:.1} KiB per workload)",
        workloads / 5,
        t.elapsed().as_secs_f64()
    );
    (sim, per)
}

/// The operator against 50,000 realistic workloads (500 namespaces, 10 % selected): its
/// memory and growth per workload (against 1,000), the initial injection and one change
/// next to a bare client, and kube-sim's own memory. Runs only when asked (`-- large`).
async fn large(summary: &mut Summary) {
    const NAMESPACES: usize = 500;
    let n = NAMESPACES * 100;
    let selected = (NAMESPACES * 10) as u64;
    println!("== 50,000 realistic workloads, 50,000 Secrets, 10,000 ConfigMaps, 10 % selected ==");
    let (sim, _) = large_sim(10).await;
    let Some((small, _)) = injected_rss(&sim, 10, "large-1k").await else {
        println!("1,000 workloads: not all selected were injected within 600 s");
        return;
    };
    println!("operator with 1,000 workloads: {small}");
    drop(sim);
    let (sim, sim_per) = large_sim(NAMESPACES).await;
    summary.add("kube_sim_kib_per_workload", format!("{sim_per:.1}"));
    let client = sim.client().expect("client");
    let (mut child, pid, dir) = spawn_operator(&sim, "large");
    let limit = Duration::from_secs(1800);
    let Some(first) = wait_patches(&sim, 0, selected, limit).await else {
        println!("not all {selected} selected were injected within {limit:?}");
        return;
    };
    println!(
        "all {selected} selected injected {:.1} s after start",
        first.as_secs_f64()
    );
    tokio::time::sleep(SETTLE).await;
    let rss = Rss::of(pid);
    let per = (rss.total - small.total) * 1024.0 / (n - 1000) as f64;
    println!("operator with {n} workloads: {rss}; growth per workload {per:.2} KiB");
    summary.add("rss_50k_realistic_mib", format!("{:.1}", rss.total));
    summary.add("kib_per_workload_50k", format!("{per:.2}"));
    let bare = bare_client_realistic(&sim, &client, NAMESPACES, "initial").await;
    println!(
        "bare client, the same {selected} patches: {:.1} s (initial injection / bare: {:.2})",
        bare.as_secs_f64(),
        first.as_secs_f64() / bare.as_secs_f64()
    );
    if let Some(ratio) = large_change(&sim, &client, NAMESPACES, limit).await {
        summary.add("propagation_ratio_50k", format!("{ratio:.2}"));
    }
    println!("operator after the change: {}", Rss::of(pid));
    stop(&mut child, pid).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// One update of the shared source Secret: the time until every selected workload is
/// patched, over the bare client's time for the same patches.
async fn large_change(
    sim: &kube_sim::KubeSimHandle,
    client: &kube::Client,
    namespaces: usize,
    limit: Duration,
) -> Option<f64> {
    let selected = (namespaces * 10) as u64;
    let patches = patched(sim);
    let secrets =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "proxy-system");
    let t0 = Instant::now();
    let url = "http://u:large-change@proxy.corp.example:3128";
    secrets
        .patch(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"httpProxy": url}})),
        )
        .await
        .expect("update secret");
    if wait_patches(sim, patches, selected, limit).await.is_none() {
        println!("the change: not all {selected} were patched within {limit:?}");
        return None;
    }
    let operator = t0.elapsed();
    let bare = bare_client_realistic(sim, client, namespaces, "change").await;
    let ratio = operator.as_secs_f64() / bare.as_secs_f64();
    println!(
        "one change: operator {:.1} s, bare client {:.1} s, ratio {ratio:.2}",
        operator.as_secs_f64(),
        bare.as_secs_f64()
    );
    Some(ratio)
}

fn main() {
    // EPO_BENCH_LOG (an EnvFilter, e.g. "egress_proxy_operator=debug") logs the in-process
    // operator's reconciles to stderr.
    if let Ok(filter) = std::env::var("EPO_BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let mut summary = Summary::default();
    rt.block_on(async {
        // The 50,000 scenario takes longer than the rest together: only by name.
        if only.as_deref() == Some("large") {
            large(&mut summary).await;
            return;
        }
        if only.as_deref().is_none_or(|o| "patch".contains(o)) {
            patch_throughput(&mut summary).await;
        }
        if only.as_deref().is_none_or(|o| "realistic".contains(o)) {
            memory_realistic(&mut summary).await;
        }
        if only.as_deref().is_none_or(|o| "nodes".contains(o)) {
            node_churn(&mut summary).await;
        }
        if only.as_deref().is_none_or(|o| "memory".contains(o)) {
            memory().await;
        }
        if only.as_deref().is_none_or(|o| "rotation".contains(o)) {
            rotation().await;
        }
    });
    println!("{}", summary.line());
}
