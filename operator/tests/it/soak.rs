//! Fault soak: a credential change every round and continuous workload churn while kube-sim
//! answers with 409, 410 (watch expired), 429 with Retry-After, 500, slow responses and
//! dropped watches, and the API is down once (60 s when the soak runs 5 minutes or longer,
//! a fifth of the soak otherwise). At the end every selected workload carries the latest
//! credential, each stable workload rolled exactly once per change, the operator is still
//! running, and its accepted writes are within 1.1x the minimum.
//!
//! `EPO_SOAK_SECONDS` sets how long changes go on (default 40, as CI runs it); by hand:
//! `EPO_SOAK_SECONDS=600 cargo test --release -p egress-proxy-operator --test soak -- --nocapture`.

use crate::common;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use common::{Env, hash};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use kube_sim::hooks::{Fault, FaultRule};

const NAMESPACES: usize = 5;
/// Selected Deployments per namespace that live through the whole soak.
const STABLE: usize = 4;
/// How long one change may take to reach every workload (an outage included).
const CONVERGE: Duration = Duration::from_secs(150);

fn fixtures() -> String {
    let mut y = String::from("apiVersion: v1\nkind: Namespace\nmetadata: {name: proxy-system}\n");
    y.push_str(&source_secret(0));
    for n in 0..NAMESPACES {
        let ns = format!("soak-{n}");
        y.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}, labels: {{egressproxy.io/enabled: \"true\"}}}}\n\
             ---\napiVersion: egressproxy.io/v1alpha1\nkind: EgressProxyPolicy\nmetadata: {{name: outbound, namespace: {ns}}}\n\
             spec:\n  workloadSelector: {{matchLabels: {{egress: proxied}}}}\n  proxy:\n    credentials: [{{name: main, secretRef: {{name: shared, namespace: proxy-system}}}}]\n    active: main\n"
        ));
        for i in 0..STABLE {
            y.push_str(&deployment(&ns, &format!("app-{i}"), true));
        }
    }
    y
}

fn source_secret(round: usize) -> String {
    let url = format!("http://u:round-{round}@proxy.corp.example:3128");
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: shared, namespace: proxy-system, annotations: {{egressproxy.io/allowed-namespaces: \"*\"}}}}\n\
         stringData: {{httpProxy: \"{url}\", httpsProxy: \"{url}\"}}\n"
    )
}

fn deployment(ns: &str, name: &str, selected: bool) -> String {
    let label = if selected { "egress: proxied, " } else { "" };
    format!(
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: {ns}, labels: {{{label}app: {name}}}}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{containers: [{{name: main, image: \"registry.internal/{name}:1\"}}]}}\n"
    )
}

/// The faults of the whole soak, each at a low rate: the writes a fault refuses are sent
/// again, and the soak holds those resends to 10 % over the minimum.
fn faults() -> Vec<FaultRule> {
    let status = |code, retry_after_seconds| Fault::Status {
        code,
        retry_after_seconds,
    };
    let rule = |verb, resource, fault, p| FaultRule::new(verb, resource, fault).probability(p);
    vec![
        rule(Some("patch"), Some("deployments"), status(409, None), 0.02),
        rule(Some("patch"), Some("deployments"), status(500, None), 0.01),
        rule(
            Some("patch"),
            Some("deployments"),
            status(429, Some(1)),
            0.01,
        ),
        rule(Some("patch"), Some("secrets"), status(429, Some(1)), 0.02),
        rule(
            Some("patch"),
            Some("egressproxypolicies/status"),
            status(500, None),
            0.02,
        ),
        rule(Some("list"), None, status(500, None), 0.05),
        rule(Some("watch"), None, status(410, None), 0.05),
        rule(
            Some("watch"),
            None,
            Fault::DropWatch(Duration::from_secs(3)),
            0.1,
        ),
        rule(None, None, Fault::Latency(Duration::from_millis(150)), 0.1),
    ]
}

/// Polls `check` every 200 ms until it returns Some or `limit` passes.
async fn within<T, F, Fut>(limit: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(v) = check().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// Whether every selected Deployment of every namespace carries round `round`'s credential:
/// the managed Secret holds it and every selected Deployment has rolled out one config hash
/// that is not the previous round's. Returns the hashes by namespace. Reads that an
/// injected fault answers count as "not yet".
async fn converged(
    env: &Env,
    round: usize,
    before: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    let mut hashes = BTreeMap::new();
    for n in 0..NAMESPACES {
        let ns = format!("soak-{n}");
        let secret = Api::<Secret>::namespaced(env.client.clone(), &ns)
            .get("egress-proxy-outbound")
            .await
            .ok()?;
        let data = secret.data.unwrap_or_default();
        let wanted = format!("round-{round}@");
        let holds = |k: &str| {
            data.get(k)
                .is_some_and(|v| String::from_utf8_lossy(&v.0).contains(&wanted))
        };
        if !holds("slot.main.HTTP_PROXY") {
            return None;
        }
        let selected = ListParams::default().labels("egress=proxied");
        let list = Api::<Deployment>::namespaced(env.client.clone(), &ns)
            .list(&selected)
            .await
            .ok()?;
        let mut seen = None;
        for d in &list.items {
            let h = hash(d)?;
            if before.get(&ns) == Some(&h) || seen.as_ref().is_some_and(|s| *s != h) {
                return None;
            }
            let status = d.status.as_ref()?;
            if status.observed_generation != d.metadata.generation
                || status.updated_replicas != Some(1)
            {
                return None;
            }
            seen = Some(h);
        }
        hashes.insert(ns, seen?);
    }
    Some(hashes)
}

/// Creates and deletes workloads (selected and not) until `stop`; returns how many
/// selected ones it created and deleted. Deletes an injected fault refuses are sent again.
async fn churn(env: &Env, stop: tokio::sync::watch::Receiver<bool>) -> (u64, u64) {
    let (mut created, mut deleted) = (0, 0);
    let mut i = 0usize;
    let selected = |i: usize| i.is_multiple_of(2);
    while !*stop.borrow() {
        let ns = format!("soak-{}", i % NAMESPACES);
        env.sim
            .apply_yaml(&deployment(&ns, &format!("churn-{i}"), selected(i)))
            .expect("create a churn workload");
        created += u64::from(selected(i));
        if let Some(old) = i.checked_sub(6) {
            let ns = format!("soak-{}", old % NAMESPACES);
            let api = Api::<Deployment>::namespaced(env.client.clone(), &ns);
            let name = format!("churn-{old}");
            within(CONVERGE, || async {
                api.delete(&name, &DeleteParams::default()).await.ok()
            })
            .await
            .expect("delete a churn workload");
            deleted += u64::from(selected(old));
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    (created, deleted)
}

/// The operator's writes the server accepted (its field manager's, and the Events it
/// created), and how many it sent in all.
fn writes(env: &Env) -> (u64, u64) {
    let c = env.sim.request_counts();
    let of = |m: &BTreeMap<String, u64>| m.get("egress-proxy-operator").copied().unwrap_or(0);
    let events = c.get("create", "events");
    let sent = of(&c.by_field_manager) + events;
    (sent - of(&c.refused_by_field_manager), sent)
}

fn soak_seconds() -> u64 {
    std::env::var("EPO_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

/// The selected churn workloads injected now (they roll again on the next change).
async fn injected_churn(env: &Env) -> usize {
    let selected = ListParams::default().labels("egress=proxied");
    let list = within(CONVERGE, || async {
        Api::<Deployment>::all(env.client.clone())
            .list(&selected)
            .await
            .ok()
    })
    .await
    .expect("list the selected workloads");
    list.items
        .iter()
        .filter(|d| {
            d.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("churn-"))
        })
        .filter(|d| hash(d).is_some())
        .count()
}

/// Every stable workload's revision: one for its creation, one for the first injection,
/// one per change.
async fn revisions(env: &Env) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for n in 0..NAMESPACES {
        for i in 0..STABLE {
            let ns = format!("soak-{n}");
            let d = env.deployment(&ns, &format!("app-{i}")).await;
            let rev = d
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("deployment.kubernetes.io/revision"))
                .and_then(|r| r.parse().ok())
                .unwrap_or(0);
            out.insert(format!("{ns}/app-{i}"), rev);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_churn_under_faults_converge_with_minimal_writes() {
    let seconds = soak_seconds();
    let outage = Duration::from_secs(if seconds >= 300 { 60 } else { seconds / 5 });
    let env = Env::new(&fixtures()).await;
    let op = env.start();
    let none = BTreeMap::new();
    let hashes = within(CONVERGE, || converged(&env, 0, &none))
        .await
        .expect("the first injection");
    let names: Vec<String> = (0..NAMESPACES).map(|n| format!("soak-{n}")).collect();
    let policies: Vec<(&str, &str)> = names.iter().map(|ns| (ns.as_str(), "outbound")).collect();
    op.caught_up(&policies).await;
    let (accepted0, sent0) = writes(&env);
    let c0 = env.sim.request_counts();

    for rule in faults() {
        env.sim.inject_fault(rule);
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let rounds = async {
        let done = changes(&env, seconds, outage, hashes).await;
        let _ = stop.send(true);
        done
    };
    let ((created, deleted), (round, rerolled, mut took)) =
        tokio::join!(churn(&env, stopped), rounds);
    env.sim.clear_faults();
    // The writes a change still leads to are counted; the last round's are all done.
    op.caught_up(&policies).await;
    assert!(!op.is_finished(), "the operator is still running");
    let c = env.sim.request_counts();
    let (accepted, sent) = writes(&env);
    let (accepted, sent) = (accepted - accepted0, sent - sent0);
    op.stop().await;

    let stable = (NAMESPACES * STABLE) as u64;
    let wanted = 2 + round as i64;
    let revs = revisions(&env).await;
    assert!(
        revs.values().all(|r| *r == wanted),
        "each stable workload rolled once per change ({wanted} revisions): {revs:?}"
    );
    // Per change: each workload once, the managed Secret, one status write and one Event per
    // policy; per selected churn workload: its injection with a status write (joining a
    // configuration is no Event), and a status write when it goes.
    let per_policy = 3 * NAMESPACES as u64;
    let minimum = round as u64 * (stable + per_policy) + rerolled + 2 * created + deleted;
    let ratio = accepted as f64 / minimum as f64;
    took.sort();
    let delta = |verb, resource| c.get(verb, resource) - c0.get(verb, resource);
    println!(
        "operator writes by kind: {} Deployment patches, {} Secret patches, {} status patches, \
         {} Events",
        delta("patch", "deployments"),
        delta("patch", "secrets"),
        delta("patch", "egressproxypolicies/status"),
        delta("create", "events"),
    );
    println!(
        "soak {seconds} s: {round} changes, {created} selected churn workloads ({deleted} deleted), outage {outage:?}; \
         convergence median {:?}, max {:?}; requests refused by faults: {}; operator writes \
         accepted {accepted} (sent {sent}), minimum {minimum}: ratio {ratio:.2}",
        took[took.len() / 2],
        took[took.len() - 1],
        c.faulted - c0.faulted,
    );
    assert!(ratio <= 1.1, "writes {accepted} over the minimum {minimum}");
}

/// A credential change per round until `seconds` pass, each waited for on every workload,
/// the outage once halfway and every watch expired every fourth round. Returns the rounds,
/// the selected churn workloads the changes rolled again, and each change's time to reach
/// every workload.
async fn changes(
    env: &Env,
    seconds: u64,
    outage: Duration,
    mut hashes: BTreeMap<String, String>,
) -> (usize, u64, Vec<Duration>) {
    let start = Instant::now();
    let (mut round, mut rerolled, mut took) = (0, 0, Vec::new());
    let mut outage_at = Some(Duration::from_secs(seconds / 2));
    while start.elapsed() < Duration::from_secs(seconds) || outage_at.is_some() {
        round += 1;
        rerolled += injected_churn(env).await as u64;
        env.sim
            .apply_yaml(&source_secret(round))
            .expect("change the credential");
        let t = Instant::now();
        if outage_at.is_some_and(|at| start.elapsed() >= at) {
            outage_at = None;
            env.sim.api_down_for(outage);
        }
        if round % 4 == 0 {
            env.sim.expire_watches();
        }
        hashes = within(CONVERGE, || converged(env, round, &hashes))
            .await
            .unwrap_or_else(|| panic!("round {round} did not reach every workload"));
        took.push(t.elapsed());
    }
    (round, rerolled, took)
}
