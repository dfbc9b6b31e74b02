//! Leader election and the admin endpoint, with the operator binary: two instances share
//! one Lease; only the leader writes, a standby takes over after a kill -9 or a SIGTERM
//! without rolling anything twice, and a leader that loses the Lease stops writing. Each
//! instance's /metrics is parsed by the OpenMetrics reference parser. Under
//! `--metrics-auth kubernetes` (the default), /metrics answers only a bearer token allowed to
//! get it, while the probes' paths stay open.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "team-l";
const LEASE_NS: &str = "operators";
const LEASE: &str = "egress-proxy-operator";

/// The namespaces, one proxy Secret, the policy and `n` selected Deployments.
fn fixture(n: usize, max: u32) -> String {
    let mut y = format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {LEASE_NS}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}, labels: {{egressproxy.io/enabled: "true"}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: proxy, namespace: {NS}}}
stringData: {{httpProxy: "http://svc:pw-1@proxy.corp.example:3128", httpsProxy: "http://svc:pw-1@proxy.corp.example:3128"}}
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: {NS}}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials: [{{name: main, secretRef: {{name: proxy}}}}]
    active: main
  rollout: {{maxConcurrent: {max}}}
"#
    );
    for i in 0..n {
        y.push_str(&format!(
            r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: d{i:02}, namespace: {NS}, labels: {{egress: proxied}}}}
spec:
  replicas: 1
  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}
  selector: {{matchLabels: {{app: d{i:02}}}}}
  template:
    metadata: {{labels: {{app: d{i:02}}}}}
    spec:
      containers: [{{name: app, image: "d{i:02}:1"}}]
"#
        ));
    }
    y
}

/// One operator process with leader election and its admin endpoint.
struct Instance {
    name: &'static str,
    child: std::process::Child,
    admin: SocketAddr,
    log: PathBuf,
}

impl Instance {
    /// An instance whose /metrics is open (the election tests scrape it without a token).
    fn start(env: &Env, dir: &Path, name: &'static str) -> Instance {
        Self::start_with(env, dir, name, &["--metrics-auth", "none"])
    }

    fn start_with(env: &Env, dir: &Path, name: &'static str, extra: &[&str]) -> Instance {
        let kubeconfig = dir.join("kubeconfig");
        env.sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let admin = free_port();
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
            .args(["run", "--leader-elect", "--lease-namespace", LEASE_NS])
            .args([
                "--lease-duration",
                "3",
                "--renew-deadline",
                "2",
                "--retry-period",
                "1",
            ])
            .args(["--instance", name, "--admin-addr", &admin.to_string()])
            .args(extra)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("start the operator");
        Instance {
            name,
            child,
            admin,
            log,
        }
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.admin, path, None).await
    }

    /// GET with `Authorization: Bearer <token>`.
    async fn get_as(&self, path: &str, token: &str) -> Option<(u16, String)> {
        http_get(self.admin, path, Some(token)).await
    }

    async fn metrics(&self) -> String {
        match self.get("/metrics").await {
            Some((200, body)) => body,
            other => panic!(
                "{}: /metrics answered {other:?}\n{}",
                self.name,
                self.log_text()
            ),
        }
    }

    /// Whether it says it leads (false while its admin endpoint is not up yet).
    async fn leads(&self) -> bool {
        match self.get("/metrics").await {
            Some((200, body)) => sample(&body, "egress_proxy_leader", &[]) == 1.0,
            _ => false,
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// kill -9: no release, no goodbye.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and its exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        self.child.wait().expect("wait")
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

/// GET over a fresh connection, with a bearer token if given: status code and body.
async fn http_get(addr: SocketAddr, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: admin\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    let code = buf.split(' ').nth(1)?.parse().ok()?;
    Some((code, buf.split_once("\r\n\r\n")?.1.to_owned()))
}

/// The sum of the samples of `name` whose labels include `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, set) = series.split_once('{').unwrap_or((series, ""));
            let all = labels
                .iter()
                .all(|(k, v)| set.contains(&format!("{k}=\"{v}\"")));
            (n == name && all).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Write requests of one instance to everything but its Lease, by outcome.
fn writes_besides_lease(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("egress_proxy_api_writes_total{"))
        .filter(|l| !l.contains("resource=\"leases\""))
        .map(str::to_owned)
        .collect()
}

/// Checks `text` with the OpenMetrics parser of the Prometheus project's Python client
/// (`EPO_PYTHON`, set by scripts/test.sh, has it installed), and that the families are there
/// (API writes only when `wrote`).
fn assert_openmetrics(text: &str, wrote: bool) {
    let python = std::env::var("EPO_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as parse\nprint(' '.join(sorted(f.name for f in parse(sys.stdin.read()))))";
    let mut child = std::process::Command::new(&python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/test.sh, which sets EPO_PYTHON)"));
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python");
    assert!(
        out.status.success(),
        "not valid OpenMetrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let families = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let writes = wrote.then_some("egress_proxy_api_writes");
    for f in writes.into_iter().chain([
        "egress_proxy_leader",
        "egress_proxy_policy_active_slot",
        "egress_proxy_policy_ready",
        "egress_proxy_policy_rotation_phase",
        "egress_proxy_reconcile_duration_seconds",
        "egress_proxy_reconciles",
        "egress_proxy_workloads",
    ]) {
        assert!(
            families.split(' ').any(|n| n == f),
            "{f} not in {families}\n{text}"
        );
    }
}

async fn lease(env: &Env) -> Option<Lease> {
    Api::<Lease>::namespaced(env.client.clone(), LEASE_NS)
        .get_opt(LEASE)
        .await
        .expect("get lease")
}

fn holder(l: &Option<Lease>) -> Option<String> {
    l.as_ref()?.spec.as_ref()?.holder_identity.clone()
}

/// ReplicaSets per Deployment: 1 before any roll, +1 per roll.
async fn revisions(env: &Env) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let api = Api::<ReplicaSet>::namespaced(env.client.clone(), NS);
    for rs in api.list(&ListParams::default()).await.expect("rs").items {
        for o in rs.owner_references() {
            *out.entry(o.name.clone()).or_default() += 1;
        }
    }
    out
}

async fn events(env: &Env, reason: &str) -> usize {
    let api = Api::<Event>::namespaced(env.client.clone(), NS);
    let all = api
        .list(&ListParams::default())
        .await
        .expect("events")
        .items;
    all.iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .count()
}

/// Which of `instances` leads, once exactly one says so.
async fn the_leader<'a>(instances: &[&'a Instance]) -> &'a Instance {
    let mut last = Vec::new();
    for _ in 0..300 {
        last.clear();
        for i in instances {
            if i.leads().await {
                last.push(*i);
            }
        }
        if last.len() == 1 {
            return last[0];
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} leaders", last.len());
}

/// Reconciles of `inst` that ended (successfully) as the leader.
async fn reconciled(inst: &Instance) -> f64 {
    sample(
        &inst.metrics().await,
        "egress_proxy_reconciles_total",
        &[("result", "success")],
    )
}

/// Makes the leader `inst` look at the policy once more, and waits until a reconcile of it
/// has ended since: reconciles of one policy run one at a time, so every write of the
/// earlier ones is done. The touch itself changes nothing the operator writes.
async fn looked(env: &Env, inst: &Instance) {
    let before = reconciled(inst).await;
    let touch = format!("{:?}", std::time::SystemTime::now());
    let patch = json!({"metadata": {"annotations": {"test.example/touch": touch}}});
    env.patch_policy(NS, "outbound", patch).await;
    eventually("a reconcile after the touch", || async {
        (reconciled(inst).await > before).then_some(())
    })
    .await;
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("leader-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_started_together_roll_each_workload_once() {
    let dir = temp_dir("together");
    let env = Env::new(&fixture(4, 10)).await;
    let a = Instance::start(&env, &dir, "op-a");
    let b = Instance::start(&env, &dir, "op-b");
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    let leader = the_leader(&[&a, &b]).await;
    let standby = if leader.name == a.name { &b } else { &a };
    let lease_holder = holder(&lease(&env).await).expect("held");
    assert!(
        lease_holder.starts_with(&format!("{}_", leader.name)),
        "{lease_holder}"
    );
    // Both are ready: the standby's caches are warm and it knows it is the standby.
    for (i, role) in [(leader, "leader"), (standby, "standby")] {
        let r = eventually("ready", || async {
            i.get("/readyz").await.filter(|(c, _)| *c == 200)
        })
        .await;
        assert_eq!(r.1.trim(), format!("ok ({role})"), "{}", i.name);
        assert_eq!(i.get("/healthz").await.map(|r| r.0), Some(200));
    }
    let revs = revisions(&env).await;
    assert_eq!(revs.len(), 4);
    assert!(revs.values().all(|n| *n == 2), "each rolled once: {revs:?}");
    assert_eq!(events(&env, "ConfigApplied").await, 1);
    let (lm, sm) = (leader.metrics().await, standby.metrics().await);
    assert_eq!(
        writes_besides_lease(&sm),
        Vec::<String>::new(),
        "the standby wrote"
    );
    let patched = [
        ("resource", "deployments"),
        ("verb", "patch"),
        ("outcome", "2xx"),
    ];
    assert_eq!(sample(&lm, "egress_proxy_api_writes_total", &patched), 4.0);
    assert_eq!(
        sample(&lm, "egress_proxy_workloads", &[("state", "up_to_date")]),
        4.0
    );
    assert_eq!(
        sample(&sm, "egress_proxy_workloads", &[("state", "up_to_date")]),
        4.0
    );
    let ready = [("namespace", NS), ("policy", "outbound")];
    assert_eq!(sample(&lm, "egress_proxy_policy_ready", &ready), 1.0);
    assert!(
        sample(
            &lm,
            "egress_proxy_reconciles_total",
            &[("result", "success")]
        ) >= 1.0
    );
    assert!(sample(&lm, "egress_proxy_reconcile_duration_seconds_count", &[]) >= 1.0);
    assert!(
        sample(
            &sm,
            "egress_proxy_reconciles_total",
            &[("result", "standby")]
        ) >= 1.0
    );
    assert_eq!(
        sample(
            &sm,
            "egress_proxy_reconciles_total",
            &[("result", "success")]
        ),
        0.0
    );
    assert_openmetrics(&lm, true);
    // A standby has written nothing but, at most, its Lease create that lost the race.
    assert_openmetrics(&sm, false);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_leader_mid_rollout_rolls_nothing_twice_and_skips_nothing() {
    let dir = temp_dir("kill");
    // One workload at a time, each taking a moment to get Ready: a rollout to interrupt.
    let env = Env::paced(&fixture(6, 1), Duration::from_millis(400), 0.0).await;
    let a = Instance::start(&env, &dir, "op-a");
    eventually("op-a leads", || async { a.leads().await.then_some(()) }).await;
    let b = Instance::start(&env, &dir, "op-b");
    eventually("op-b stands by", || async {
        b.get("/readyz").await.filter(|(c, _)| *c == 200)
    })
    .await;
    // Read from the cluster: status tells a rollout's progress at most every 3 s.
    let rolled = || async {
        let revs = revisions(&env).await;
        Some(revs.values().filter(|n| **n == 2).count())
    };
    eventually("part of the rollout done", || async {
        rolled().await.filter(|n| (1..5).contains(n))
    })
    .await;
    a.kill();
    eventually("op-b takes over", || async {
        b.leads().await.then_some(())
    })
    .await;
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    let revs = revisions(&env).await;
    assert_eq!(revs.len(), 6);
    assert!(
        revs.values().all(|n| *n == 2),
        "each rolled exactly once across the failover: {revs:?}\n{}",
        b.log_text()
    );
    let mut hashes = Vec::new();
    for i in 0..6 {
        hashes.push(hash(&env.deployment(NS, &format!("d{i:02}")).await));
    }
    assert!(
        hashes.iter().all(|h| h.is_some() && *h == hashes[0]),
        "{hashes:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_releases_the_lease_and_a_failover_with_nothing_to_do_writes_nothing() {
    let dir = temp_dir("sigterm");
    let env = Env::new(&fixture(3, 10)).await;
    let a = Instance::start(&env, &dir, "op-a");
    eventually("op-a leads", || async { a.leads().await.then_some(()) }).await;
    let b = Instance::start(&env, &dir, "op-b");
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    eventually("op-b stands by", || async {
        b.get("/readyz").await.filter(|(c, _)| *c == 200)
    })
    .await;
    looked(&env, &a).await;
    let before = env.operator_writes();
    let revs = revisions(&env).await;
    let status = a.terminate();
    assert!(status.success(), "{status:?}");
    // Released on the way out: nobody waits for the lease duration.
    let after_exit = holder(&lease(&env).await);
    assert!(
        after_exit.as_deref().is_none_or(|h| h.starts_with("op-b_")),
        "still held by the stopped instance: {after_exit:?}"
    );
    eventually("op-b takes over", || async {
        b.leads().await.then_some(())
    })
    .await;
    // The new leader has looked at the policy (its takeover reconcile, then once more),
    // and wrote nothing.
    eventually("op-b reconciled", || async {
        (reconciled(&b).await >= 1.0).then_some(())
    })
    .await;
    looked(&env, &b).await;
    assert_eq!(env.operator_writes(), before, "{}", b.log_text());
    assert_eq!(revisions(&env).await, revs);
    assert_eq!(
        writes_besides_lease(&b.metrics().await),
        Vec::<String>::new()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The number of reconciles `inst` left to the leader.
async fn stood_by(inst: &Instance) -> f64 {
    sample(
        &inst.metrics().await,
        "egress_proxy_reconciles_total",
        &[("result", "standby")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_the_lease_stops_writing_and_catches_up_when_it_returns() {
    let dir = temp_dir("lost");
    let env = Env::new(&fixture(2, 10)).await;
    let a = Instance::start(&env, &dir, "op-a");
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    looked(&env, &a).await;
    let hash_before = hash(&env.deployment(NS, "d00").await);
    // Someone else takes the Lease (a partitioned peer that came back, an admin).
    let api = Api::<Lease>::namespaced(env.client.clone(), LEASE_NS);
    eventually("the lease stolen", || async {
        let mut l = lease(&env).await.expect("lease");
        let spec = l.spec.as_mut().expect("spec");
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(3600);
        spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            k8s_openapi::jiff::Timestamp::now(),
        ));
        // op-a renews meanwhile: a conflict is retried with the newer Lease.
        api.replace(LEASE, &PostParams::default(), &l).await.ok()
    })
    .await;
    eventually("op-a stands down", || async {
        a.get("/readyz")
            .await
            .filter(|(c, b)| *c == 200 && b.contains("standby"))
    })
    .await;
    let writes = env.operator_writes();
    let before = stood_by(&a).await;
    let url = "http://svc:pw-2@proxy.corp.example:3128";
    env.set_secret(NS, "proxy", json!({"httpProxy": url})).await;
    // It saw the change (a reconcile it left to the leader) and left it alone.
    eventually("op-a looked", || async {
        (stood_by(&a).await > before).then_some(())
    })
    .await;
    assert_eq!(env.operator_writes(), writes, "{}", a.log_text());
    assert_eq!(hash(&env.deployment(NS, "d00").await), hash_before);
    // The intruder's Lease is deleted: op-a, having seen another holder, waits out the lease
    // duration before creating it (that holder might still be acting), then leads again and
    // applies the change it left alone.
    api.delete(LEASE, &Default::default())
        .await
        .expect("delete lease");
    eventually("op-a leads again", || async {
        a.leads().await.then_some(())
    })
    .await;
    eventually("the new password rolled out", || async {
        let h = hash(&env.deployment(NS, "d00").await);
        (h.is_some() && h != hash_before).then_some(())
    })
    .await;
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_holds_writes_back_from_a_non_leader_before_they_are_sent() {
    use egress_proxy_operator::client::{build, is_not_leader};
    use egress_proxy_operator::leader::Leadership;
    use egress_proxy_operator::metrics::Metrics;
    use k8s_openapi::api::core::v1::ConfigMap;
    let env = Env::new(&fixture(0, 1)).await;
    let mut config = kube::Config::new(env.sim.base_url().parse().expect("url"));
    config.auth_info =
        serde_json::from_value(json!({"token": kube_sim::kubeconfig::ADMIN_TOKEN})).expect("auth");
    let metrics = std::sync::Arc::new(Metrics::new());
    let leadership = Leadership::elected();
    let client = build(config, metrics.clone(), Some(leadership)).expect("client");
    let api = Api::<ConfigMap>::namespaced(client, NS);
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).expect("cm");
    let before = env.count("create", "configmaps");
    let err = api
        .create(&PostParams::default(), &cm)
        .await
        .expect_err("refused");
    assert!(is_not_leader(&err), "{err}");
    assert_eq!(
        env.count("create", "configmaps"),
        before,
        "the request reached the server"
    );
    // Reads go through.
    api.list(&ListParams::default()).await.expect("list");
    let m = metrics.encode(false);
    let refused = [
        ("resource", "configmaps"),
        ("verb", "create"),
        ("outcome", "refused"),
    ];
    assert_eq!(
        sample(&m, "egress_proxy_api_writes_total", &refused),
        1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_the_api_stops_at_its_deadline_and_starts_a_new_term_after() {
    let dir = temp_dir("cut-off");
    let env = Env::new(&fixture(1, 10)).await;
    let a = Instance::start(&env, &dir, "op-a");
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    eventually("op-a leads", || async { a.leads().await.then_some(()) }).await;
    let before = reconciled(&a).await;
    // Longer than the renew deadline (2 s): every request gets 503.
    env.sim.api_down_for(Duration::from_secs(5));
    eventually("op-a stops leading", || async {
        a.get("/readyz")
            .await
            .filter(|(c, b)| *c == 200 && b.contains("standby"))
    })
    .await;
    // The elector says why once its round ends (the time check above acts at the deadline).
    eventually("the deadline logged", || async {
        a.log_text()
            .contains("could not renew the lease in time")
            .then_some(())
    })
    .await;
    // Back: its own Lease record is renewed, a new term starts and reconciles.
    eventually("op-a leads again", || async {
        a.leads().await.then_some(())
    })
    .await;
    eventually("op-a reconciled in its new term", || async {
        (reconciled(&a).await > before).then_some(())
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped ClusterRole that lets a scraper get /metrics, from deploy/rbac.yaml.
fn metrics_reader_role() -> &'static str {
    include_str!("../../../deploy/rbac.yaml")
        .split("\n---\n")
        .find(|d| d.contains("name: egress-proxy-operator-metrics-reader"))
        .expect("deploy/rbac.yaml has the metrics-reader ClusterRole")
}

/// A scraper bound to the metrics-reader role, and an account bound to nothing.
const SCRAPERS: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: scraper, namespace: operators}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: stranger, namespace: operators}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scraper-reads-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: egress-proxy-operator-metrics-reader}
subjects: [{kind: ServiceAccount, name: scraper, namespace: operators}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_only_a_token_allowed_to_get_them_and_the_probes_stay_open() {
    let dir = temp_dir("metrics-auth");
    let env = Env::new(&fixture(1, 1)).await;
    env.sim.apply_yaml(metrics_reader_role()).expect("role");
    env.sim.apply_yaml(SCRAPERS).expect("scrapers");
    let scraper = env.sim.service_account_token(LEASE_NS, "scraper");
    let stranger = env.sim.service_account_token(LEASE_NS, "stranger");
    // No --metrics-auth: the default is kubernetes.
    let inst = Instance::start_with(&env, &dir, "op-auth", &[]);
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    eventually("/readyz open", || async {
        inst.get("/readyz").await.filter(|(c, _)| *c == 200)
    })
    .await;
    assert_eq!(inst.get("/healthz").await.map(|r| r.0), Some(200));
    let code = |r: Option<(u16, String)>| r.map(|r| r.0);
    assert_eq!(code(inst.get("/metrics").await), Some(401), "no token");
    assert_eq!(
        code(inst.get_as("/metrics", "not-a-token").await),
        Some(401),
        "a token the API server does not accept"
    );
    assert_eq!(
        code(inst.get_as("/metrics", &stranger).await),
        Some(403),
        "a valid token of an account bound to nothing\n{}",
        inst.log_text()
    );
    let (status, body) = inst.get_as("/metrics", &scraper).await.expect("answer");
    assert_eq!(status, 200, "{body}\n{}", inst.log_text());
    assert_openmetrics(&body, true);
    // Cached: the next scrapes answer the same without new reviews.
    let reviews =
        || env.count("create", "tokenreviews") + env.count("create", "subjectaccessreviews");
    let before = reviews();
    assert_eq!(
        before,
        3 + 2,
        "one TokenReview per token, one SubjectAccessReview per user"
    );
    for _ in 0..3 {
        assert_eq!(code(inst.get_as("/metrics", &scraper).await), Some(200));
        assert_eq!(code(inst.get_as("/metrics", &stranger).await), Some(403));
    }
    assert_eq!(
        reviews(),
        before,
        "scrapes within the cache's time ask nothing"
    );
    let log = inst.log_text();
    for t in [&scraper, &stranger] {
        assert!(!log.contains(t.as_str()), "a token in the log");
    }
}
