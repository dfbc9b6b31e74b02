//! kube-sim's own memory with realistic workloads; prints figures, asserts nothing.
//! Run: `cargo bench -p kube-sim --bench store` (`KUBE_SIM_BENCH_WORKLOADS=1000,10000` to
//! pick the sizes; default 1,000, 10,000 and 50,000).
//!
//! One server with the simulated controllers, the demo cluster's three Nodes, and realistic
//! namespaces as the operator's reconcile bench makes them: 100 workloads of about 6 KB of
//! JSON each (80 Deployments and 10 StatefulSets with 0 replicas, 10 DaemonSets, so 30
//! Pods), 100 Secrets, 20 ConfigMaps and one EgressProxyPolicy (a minimal CRD). Namespaces
//! are added in steps, each step's as one `apply_yaml`; the load time of a step runs from
//! the apply until the controllers have stopped writing for a second (that second not
//! counted). After each step the process RSS is read
//! (also after `malloc_trim`, which gives back freed pages), and the growth between two
//! steps divided by the workloads added is kube-sim's own KiB per realistic workload.
//! A step that would not fit the machine's available memory is skipped.
//!
//! The last line is `summary: kube_sim_kib_per_workload=X load_50k_s=Y`.

use std::time::{Duration, Instant};

const CLUSTER: &str = include_str!("../../operator/demo/cluster.yaml");

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: egressproxypolicies.egressproxy.io}
spec:
  group: egressproxy.io
  scope: Namespaced
  names: {plural: egressproxypolicies, singular: egressproxypolicy, kind: EgressProxyPolicy, shortNames: [epp]}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

/// Namespace `n` with its policy, 100 realistic workloads, 100 Secrets and 20 ConfigMaps.
fn realistic_namespace(n: usize) -> String {
    let ns = format!("team-{n:03}");
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}, labels: {{egressproxy.io/enabled: \"true\"}}}}\n\
         ---\napiVersion: egressproxy.io/v1alpha1\nkind: EgressProxyPolicy\nmetadata: {{name: outbound, namespace: {ns}}}\n\
         spec:\n  workloadSelector: {{matchLabels: {{egress: proxied}}}}\n  proxy:\n    credentials: [{{name: main, secretRef: {{name: shared, namespace: proxy-system}}}}]\n    active: main\n  rollout: {{maxConcurrent: 1000}}\n{}",
        kube_sim::fixtures::realistic_namespace(n)
    )
}

/// A line of /proc/self/status or /proc/meminfo, in KiB.
fn kib(file: &str, key: &str) -> f64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn rss_mib() -> f64 {
    kib("/proc/self/status", "VmRSS:") / 1024.0
}

fn trim() {
    // SAFETY: malloc_trim only gives free pages back to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Wait until the controllers stop writing: the resourceVersion unchanged for 1 s.
async fn settle(sim: &kube_sim::KubeSimHandle) {
    let mut last = sim.resource_version();
    let mut since = Instant::now();
    while since.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rv = sim.resource_version();
        if rv != last {
            last = rv;
            since = Instant::now();
        }
    }
}

fn sizes() -> Vec<usize> {
    std::env::var("KUBE_SIM_BENCH_WORKLOADS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 50_000])
}

struct Step {
    workloads: usize,
    rss: f64,
    trimmed: f64,
}

#[tokio::main]
async fn main() {
    let sim = kube_sim::KubeSim::start(kube_sim::Config {
        controllers: true,
        seed_service_cidr: Some(false),
        ..Default::default()
    })
    .await
    .expect("kube-sim");
    sim.apply_yaml(CLUSTER).expect("cluster");
    sim.apply_yaml(CRD).expect("crd");
    sim.apply_yaml(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: proxy-system}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: shared, namespace: proxy-system}\n\
         stringData: {httpProxy: \"http://u:first@proxy.corp.example:3128\"}\n",
    )
    .expect("proxy-system");
    settle(&sim).await;
    trim();
    println!(
        "== kube-sim memory with realistic workloads (~6 KB each, a Secret each, a ConfigMap per five) =="
    );
    println!("empty server: RSS {:.1} MiB (after malloc_trim)", rss_mib());
    let mut steps: Vec<Step> = Vec::new();
    let mut loaded_ns = 0;
    let mut load_total = Duration::ZERO;
    let mut load_50k = None;
    for workloads in sizes() {
        let target_ns = workloads / 100;
        if target_ns <= loaded_ns {
            continue;
        }
        let added = (target_ns - loaded_ns) * 100;
        if let [.., a, b] = &steps[..] {
            let per_kib = (b.trimmed - a.trimmed) * 1024.0 / (b.workloads - a.workloads) as f64;
            let need_mib = per_kib * added as f64 / 1024.0 * 1.3;
            let available = kib("/proc/meminfo", "MemAvailable:") / 1024.0;
            if need_mib > available {
                println!(
                    "{workloads} workloads: skipped, would need about {need_mib:.0} MiB more, {available:.0} MiB available"
                );
                break;
            }
        }
        // One manifest per step, as a test applies its fixtures.
        let yaml = (loaded_ns..target_ns)
            .map(realistic_namespace)
            .collect::<Vec<_>>()
            .join("---\n");
        let t = Instant::now();
        sim.apply_yaml(&yaml).expect("fixtures");
        let applied = t.elapsed();
        drop(yaml);
        settle(&sim).await;
        let took = t.elapsed() - Duration::from_secs(1);
        load_total += took;
        loaded_ns = target_ns;
        let rss = rss_mib();
        trim();
        let trimmed = rss_mib();
        println!(
            "{workloads} workloads: RSS {rss:.1} MiB, {trimmed:.1} MiB after malloc_trim; \
             {added} loaded in {:.1} s (apply {:.1} s, controllers until quiet the rest)",
            took.as_secs_f64(),
            applied.as_secs_f64()
        );
        if workloads == 50_000 {
            load_50k = Some(load_total);
        }
        steps.push(Step {
            workloads,
            rss,
            trimmed,
        });
    }
    let mut per_workload = None;
    for w in steps.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let n = (b.workloads - a.workloads) as f64;
        let per = (b.trimmed - a.trimmed) * 1024.0 / n;
        println!(
            "growth {} -> {}: {per:.1} KiB per workload after malloc_trim ({:.1} KiB untrimmed)",
            a.workloads,
            b.workloads,
            (b.rss - a.rss) * 1024.0 / n
        );
        per_workload = Some(per);
    }
    let fmt = |v: Option<f64>| v.map_or_else(|| "na".to_string(), |v| format!("{v:.1}"));
    println!(
        "summary: kube_sim_kib_per_workload={} load_50k_s={}",
        fmt(per_workload),
        fmt(load_50k.map(|d| d.as_secs_f64()))
    );
}
