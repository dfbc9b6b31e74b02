//! Credential rotation through two slots, end to end against the in-memory API server with
//! paced rollouts (Pods take a moment to get Ready and stay Terminating for their grace
//! period): what rotation tooling sees in status, and that the old slot is never declared
//! revocable while a template or a Pod still uses it.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use egress_proxy_operator::api::{EgressProxyPolicy, RotationPhase, RotationStatus};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const NS: &str = "team-r";
const MANAGED: &str = "egress-proxy-outbound";

/// Namespace, the two slot Secrets, the policy (`mode`, `maxConcurrent`) and workloads.
fn fixture(mode: &str, max: u32, deployments: usize, extra: &str) -> String {
    let mut y = format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}, labels: {{egressproxy.io/enabled: "true"}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: proxy-blue, namespace: {NS}}}
stringData: {{httpProxy: "http://svc:blue-1@proxy.corp.example:3128", httpsProxy: "http://svc:blue-1@proxy.corp.example:3128"}}
---
apiVersion: v1
kind: Secret
metadata: {{name: proxy-green, namespace: {NS}}}
stringData: {{httpProxy: "http://svc:green-1@proxy.corp.example:3128", httpsProxy: "http://svc:green-1@proxy.corp.example:3128"}}
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {{name: outbound, namespace: {NS}}}
spec:
  workloadSelector: {{matchLabels: {{egress: proxied}}}}
  proxy:
    credentials:
      - {{name: blue, secretRef: {{name: proxy-blue}}}}
      - {{name: green, secretRef: {{name: proxy-green}}}}
    active: blue
    rotation: {mode}
  rollout: {{maxConcurrent: {max}}}
"#
    );
    for n in 0..deployments {
        y.push_str(&workload(
            "Deployment",
            &format!("d{n:02}"),
            "replicas: 1\n  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n  ",
            3,
        ));
    }
    y.push_str(extra);
    y
}

/// A selected workload whose Pods take `grace` seconds to stop.
fn workload(kind: &str, name: &str, spec_extra: &str, grace: u32) -> String {
    format!(
        r#"---
apiVersion: apps/v1
kind: {kind}
metadata: {{name: {name}, namespace: {NS}, labels: {{egress: proxied}}}}
spec:
  {spec_extra}selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: {grace}
      containers: [{{name: app, image: "{name}:1"}}]
"#
    )
}

/// The cluster with Pods that take `ready_ms` to get Ready and `grace_scale` times their grace
/// period to stop, and the operator, once the policy is Reconciled.
async fn started(yaml: &str, ready_ms: u64, grace_scale: f64) -> (Env, Operator) {
    let env = Env::paced(yaml, Duration::from_millis(ready_ms), grace_scale).await;
    let op = env.start();
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    (env, op)
}

/// Sets `spec.proxy.active`.
async fn switch(env: &Env, slot: &str) {
    let patch = json!({"spec": {"proxy": {"active": slot}}});
    env.patch_policy(NS, "outbound", patch).await;
}

async fn rotation(env: &Env) -> Option<RotationStatus> {
    env.policy(NS, "outbound").await.status?.rotation
}

/// Waits (up to two minutes) until the rotation satisfies `pred`.
async fn wait_for(env: &Env, what: &str, pred: impl Fn(&RotationStatus) -> bool) -> RotationStatus {
    for _ in 0..1200 {
        if let Some(r) = rotation(env).await.filter(|r| pred(r)) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "rotation never reached {what}; last: {:?}",
        rotation(env).await
    );
}

async fn wait_phase(env: &Env, phase: RotationPhase) -> RotationStatus {
    wait_for(env, &format!("{phase:?}"), |r| r.phase == phase).await
}

/// Waits until the rotation to `to` is complete.
async fn completed(env: &Env, to: &str) -> RotationStatus {
    wait_for(env, &format!("Complete to {to}"), |r| {
        r.phase == RotationPhase::Complete && r.to == to
    })
    .await
}

/// The credential slot each workload's template reads, by `Kind/name`.
async fn slots(env: &Env) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let key = |t: &k8s_openapi::api::core::v1::PodTemplateSpec| {
        t.spec.as_ref()?.containers[0]
            .env
            .iter()
            .flatten()
            .find(|e| e.name == "HTTP_PROXY")?
            .value_from
            .as_ref()?
            .secret_key_ref
            .as_ref()
            .map(|r| r.key.clone())
    };
    let c = env.client.clone();
    for d in Api::<Deployment>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
    {
        out.insert(
            format!("Deployment/{}", d.name_any()),
            key(&d.spec.expect("spec").template).unwrap_or_default(),
        );
    }
    for s in Api::<StatefulSet>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
    {
        out.insert(
            format!("StatefulSet/{}", s.name_any()),
            key(&s.spec.expect("spec").template).unwrap_or_default(),
        );
    }
    for s in Api::<DaemonSet>::namespaced(c, NS)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
    {
        out.insert(
            format!("DaemonSet/{}", s.name_any()),
            key(&s.spec.expect("spec").template).unwrap_or_default(),
        );
    }
    out
}

/// Pods (Terminating ones included) per credential-slot annotation.
async fn pods_per_slot(env: &Env) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in Api::<Pod>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
    {
        let slot = p
            .annotations()
            .get("egressproxy.io/credential")
            .cloned()
            .unwrap_or_default();
        *out.entry(slot).or_default() += 1;
    }
    out
}

/// ReplicaSets per Deployment and ControllerRevisions per StatefulSet/DaemonSet.
async fn revisions(env: &Env) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let c = env.client.clone();
    for rs in Api::<ReplicaSet>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("rs")
        .items
    {
        for o in rs.owner_references() {
            *out.entry(format!("{}/{}", o.kind, o.name)).or_default() += 1;
        }
    }
    for cr in Api::<ControllerRevision>::namespaced(c, NS)
        .list(&ListParams::default())
        .await
        .expect("cr")
        .items
    {
        for o in cr.owner_references() {
            *out.entry(format!("{}/{}", o.kind, o.name)).or_default() += 1;
        }
    }
    out
}

/// Each Deployment's `deployment.kubernetes.io/revision`: it goes up by one per rollout, also
/// when a rollout returns to an earlier template (whose ReplicaSet is reused).
async fn deployment_revisions(env: &Env) -> BTreeMap<String, usize> {
    Api::<Deployment>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("deployments")
        .items
        .into_iter()
        .map(|d| {
            let rev = d
                .annotations()
                .get("deployment.kubernetes.io/revision")
                .and_then(|r| r.parse().ok());
            (format!("Deployment/{}", d.name_any()), rev.unwrap_or(0))
        })
        .collect()
}

async fn events(env: &Env, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}

async fn set_slot(env: &Env, slot: &str, password: &str) {
    let url = format!("http://svc:{password}@proxy.corp.example:3128");
    env.set_secret(
        NS,
        &format!("proxy-{slot}"),
        json!({"httpProxy": url, "httpsProxy": url}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_rotation_switches_each_workload_once_and_revokes_only_when_no_pod_is_left() {
    let extra = format!(
        "{}{}",
        workload(
            "StatefulSet",
            "ledger",
            "replicas: 2\n  serviceName: ledger\n  ",
            0,
        ),
        // A DaemonSet replaces a node's Pod only once the old one is gone: its Pods stop at
        // once, so the Deployments' old Pods (3 s) are what the rotation drains.
        workload("DaemonSet", "agent", "", 0)
    );
    let (env, op) = started(&fixture("Auto", 3, 18, &extra), 200, 1.0).await;
    let before = revisions(&env).await;
    assert_eq!(before.len(), 20, "{before:?}");
    assert!(
        slots(&env)
            .await
            .values()
            .all(|k| k == "slot.blue.HTTP_PROXY")
    );
    assert!(rotation(&env).await.is_none(), "nothing rotated yet");

    // Rotation tooling writes a new credential into the standby slot.
    let policies: Api<EgressProxyPolicy> = Api::namespaced(env.client.clone(), NS);
    let rv = policies
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let mut watch = policies
        .watch(&WatchParams::default().timeout(290), &rv)
        .await
        .expect("watch")
        .boxed();
    set_slot(&env, "green", "green-2").await;
    let mut phases = Vec::new();
    let done = tokio::time::timeout(Duration::from_secs(180), async {
        while let Some(ev) = watch.next().await {
            let (WatchEvent::Added(p) | WatchEvent::Modified(p)) = ev.expect("event") else {
                continue;
            };
            let Some(r) = p.status.and_then(|s| s.rotation) else {
                continue;
            };
            if phases.last() != Some(&r.phase) {
                phases.push(r.phase);
            }
            if !r.revocable.is_empty() {
                // Revocable is monotone: once said, no template and no Pod uses blue.
                let pods = pods_per_slot(&env).await;
                assert_eq!(
                    pods.get(&format!("{MANAGED}/blue")),
                    None,
                    "blue Pods left: {pods:?}"
                );
                assert!(
                    slots(&env)
                        .await
                        .values()
                        .all(|k| k == "slot.green.HTTP_PROXY")
                );
                return r;
            }
        }
        panic!("watch ended");
    })
    .await
    .expect("the rotation completes");
    assert_eq!(done.phase, RotationPhase::Complete);
    assert_eq!((done.from.as_str(), done.to.as_str()), ("blue", "green"));
    assert_eq!(done.revocable, ["blue"]);
    assert!(done.revocable_since.is_some() && done.started_at.is_some());
    assert_eq!(
        (
            done.workloads.total,
            done.workloads.switched,
            done.workloads.rolled_out
        ),
        (20, 20, 20)
    );
    assert_eq!(phases.first(), Some(&RotationPhase::Rolling), "{phases:?}");
    assert!(
        phases.contains(&RotationPhase::Draining),
        "old Pods stop for 3 s: {phases:?}"
    );
    // Each workload rolled exactly once.
    let after = revisions(&env).await;
    for (w, n) in &before {
        assert_eq!(after.get(w), Some(&(n + 1)), "{w}");
    }
    // The old slot's copy is gone from the managed Secret; status says who is active.
    let managed = Api::<Secret>::namespaced(env.client.clone(), NS)
        .get(MANAGED)
        .await
        .expect("managed");
    let keys: Vec<String> = managed.data.unwrap_or_default().into_keys().collect();
    assert!(
        keys.iter().all(|k| !k.starts_with("slot.blue.")),
        "{keys:?}"
    );
    let st = env.policy(NS, "outbound").await.status.expect("status");
    assert_eq!(st.active_credential.as_deref(), Some("green"));
    assert_eq!(events(&env, "RotationStarted").await.len(), 1);
    let revocable = events(&env, "CredentialRevocable").await;
    assert_eq!(revocable.len(), 1, "{revocable:?}");
    assert!(revocable[0].contains("slot blue"), "{revocable:?}");
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_switch_to_a_broken_slot_is_blocked_and_touches_nothing() {
    let (env, op) = started(&fixture("Manual", 2, 3, ""), 100, 1.0).await;
    let before = revisions(&env).await;
    // The standby's Secret is malformed; the team switches to it anyway.
    env.set_secret(NS, "proxy-green", json!({"httpProxy": "not a url"}))
        .await;
    switch(&env, "green").await;
    let r = wait_phase(&env, RotationPhase::Blocked).await;
    assert!(
        r.message
            .as_deref()
            .unwrap_or_default()
            .contains("proxy-green"),
        "{r:?}"
    );
    let p = wait_reason(&env, NS, "outbound", "InvalidProxyURL").await;
    assert_eq!(
        p.status.expect("status").active_credential.as_deref(),
        Some("blue")
    );
    assert!(
        slots(&env)
            .await
            .values()
            .all(|k| k == "slot.blue.HTTP_PROXY")
    );
    assert_eq!(revisions(&env).await, before, "nothing rolled");
    assert_eq!(events(&env, "RotationBlocked").await.len(), 1);
    // Fixed: the same rotation goes on and completes.
    set_slot(&env, "green", "green-2").await;
    let r = completed(&env, "green").await;
    assert_eq!(r.revocable, ["blue"]);
    assert!(
        slots(&env)
            .await
            .values()
            .all(|k| k == "slot.green.HTTP_PROXY")
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_rollout_stops_the_rotation_and_nothing_is_revocable() {
    let (env, op) = started(&fixture("Manual", 1, 2, ""), 100, 0.0).await;
    // d00's next rollout exceeds its progress deadline.
    env.patch_deployment(
        NS,
        "d00",
        json!({"metadata": {"annotations": {"kube-sim.io/rollout": "fail"}}}),
    )
    .await;
    switch(&env, "green").await;
    let r = wait_phase(&env, RotationPhase::Stalled).await;
    assert!(r.revocable.is_empty());
    assert!(
        r.message
            .as_deref()
            .unwrap_or_default()
            .contains("Deployment/d00 exceeded the progress deadline"),
        "{r:?}"
    );
    let s = slots(&env).await;
    assert_eq!(
        s["Deployment/d01"], "slot.blue.HTTP_PROXY",
        "nothing more is switched: {s:?}"
    );
    assert_eq!(events(&env, "RotationStalled").await.len(), 1);
    // Going back: d00 rolls back to blue, and green is the slot left behind.
    env.patch_deployment(
        NS,
        "d00",
        json!({"metadata": {"annotations": {"kube-sim.io/rollout": null}}}),
    )
    .await;
    switch(&env, "blue").await;
    let r = completed(&env, "blue").await;
    assert_eq!(
        (r.from.as_str(), r.revocable.clone()),
        ("green", vec!["green".to_string()])
    );
    assert!(
        slots(&env)
            .await
            .values()
            .all(|k| k == "slot.blue.HTTP_PROXY")
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_back_and_forth_rolls_each_workload_once_per_rotation() {
    let (env, op) = started(&fixture("Manual", 2, 3, ""), 100, 1.0).await;
    let start = deployment_revisions(&env).await;
    for (round, (to, from)) in [("green", "blue"), ("blue", "green"), ("green", "blue")]
        .into_iter()
        .enumerate()
    {
        switch(&env, to).await;
        let r = completed(&env, to).await;
        assert_eq!(
            (r.from.as_str(), r.revocable.clone()),
            (from, vec![from.to_string()])
        );
        let now = deployment_revisions(&env).await;
        for (w, n) in &start {
            assert_eq!(
                now.get(w),
                Some(&(n + round + 1)),
                "{w} after round {round}"
            );
        }
    }
    assert_eq!(events(&env, "RotationStarted").await.len(), 3);
    assert_eq!(events(&env, "CredentialRevocable").await.len(), 3);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_added_or_deselected_mid_rotation() {
    let (env, op) = started(&fixture("Manual", 1, 3, ""), 600, 1.0).await;
    switch(&env, "green").await;
    wait_for(&env, "Rolling", |r| {
        r.phase == RotationPhase::Rolling && r.workloads.switched >= 1
    })
    .await;
    // A new workload lands on the target directly; a deselected one is released.
    env.sim
        .apply_yaml(&workload("Deployment", "late", "replicas: 1\n  ", 0))
        .expect("late workload");
    env.patch_deployment(NS, "d02", json!({"metadata": {"labels": {"egress": null}}}))
        .await;
    let r = completed(&env, "green").await;
    assert_eq!(r.revocable, ["blue"]);
    assert_eq!(r.workloads.total, 3, "d00, d01 and late: {r:?}");
    let s = slots(&env).await;
    assert_eq!(s["Deployment/late"], "slot.green.HTTP_PROXY");
    assert_eq!(s["Deployment/d02"], "", "released: {s:?}");
    // late never ran blue: none of its ReplicaSets reads the blue slot.
    let sets = Api::<ReplicaSet>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("rs")
        .items;
    for rs in sets.iter().filter(|rs| rs.name_any().starts_with("late-")) {
        let t = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .expect("template");
        let json = serde_json::to_string(t).expect("json");
        assert!(!json.contains("slot.blue."), "{json}");
    }
    op.stop().await;
}

/// The operator binary against the in-memory API server, as an admin.
struct Binary {
    child: std::process::Child,
    kubeconfig: std::path::PathBuf,
}

impl Binary {
    fn start(env: &Env, dir: &std::path::Path) -> Binary {
        let kubeconfig = dir.join("kubeconfig");
        env.sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(dir.join("operator.log"))
            .expect("log");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"))
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("start the operator");
        Binary { child, kubeconfig }
    }

    /// kill -9.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Plain kubectl and the oldest and newest installed beside its real path.
fn kubectls() -> Vec<std::path::PathBuf> {
    let out = std::process::Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v kubectl)\""])
        .output()
        .expect("sh");
    let real = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let dir = real.parent().expect("kubectl is installed").to_path_buf();
    let mut v = vec![std::path::PathBuf::from("kubectl")];
    v.extend(["kubectl.1.27", "kubectl.1.33"].map(|n| dir.join(n)));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_rolling_and_while_draining_rolls_nobody_twice() {
    let dir = std::env::temp_dir().join(format!("rotation-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // Old Pods stop for 6 s, so the rotation drains long enough to be killed there.
    let mut yaml = fixture("Manual", 2, 0, "");
    for n in 0..6 {
        let strategy =
            "replicas: 1\n  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n  ";
        yaml.push_str(&workload("Deployment", &format!("d{n:02}"), strategy, 6));
    }
    let env = Env::paced(&yaml, Duration::from_millis(300), 1.0).await;
    let op = Binary::start(&env, &dir);
    wait_reason(&env, NS, "outbound", "Reconciled").await;
    let before = revisions(&env).await;
    switch(&env, "green").await;
    wait_for(&env, "Rolling, part switched", |r| {
        r.phase == RotationPhase::Rolling && r.workloads.switched >= 1 && r.workloads.switched < 6
    })
    .await;
    op.kill();
    let op = Binary::start(&env, &dir);
    let r = wait_phase(&env, RotationPhase::Draining).await;
    assert!(r.revocable.is_empty());
    assert!(
        pods_per_slot(&env)
            .await
            .contains_key(&format!("{MANAGED}/blue"))
    );
    op.kill();
    let op = Binary::start(&env, &dir);
    // Rotation tooling waits with one command.
    for kubectl in kubectls() {
        let mut cmd = std::process::Command::new(&kubectl);
        cmd.arg("--kubeconfig")
            .arg(&op.kubeconfig)
            .args(["wait", "-n", NS, "epp/outbound", "--timeout=120s"])
            .arg("--for=jsonpath={.status.rotation.phase}=Complete");
        // Off the runtime's threads: the in-process API server keeps serving meanwhile.
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .expect("join")
            .expect("kubectl wait");
        if !out.status.success() {
            let log = std::fs::read_to_string(dir.join("operator.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "{}: {}\nrotation: {:?}\noperator log (last lines, newest first):\n{}",
                kubectl.display(),
                String::from_utf8_lossy(&out.stderr),
                rotation(&env).await,
                tail.join("\n")
            );
        }
    }
    assert!(
        !pods_per_slot(&env)
            .await
            .contains_key(&format!("{MANAGED}/blue")),
        "Complete only once the blue Pods are gone"
    );
    let r = rotation(&env).await.expect("rotation");
    assert_eq!(r.revocable, ["blue"]);
    let after = revisions(&env).await;
    for (w, n) in &before {
        assert_eq!(
            after.get(w),
            Some(&(n + 1)),
            "{w} rolled once despite two kills"
        );
    }
    assert_eq!(events(&env, "CredentialRevocable").await.len(), 1);
    op.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
