//! CronJobs as a workload kind, end to end against the in-memory API server: the proxy
//! settings go into `spec.jobTemplate.spec.template`, running Jobs (their template is
//! immutable) are reported and never written, and a release takes everything back out.
//! kube-sim does not schedule CronJobs: the test creates a "scheduled" Job itself.

use crate::common;

use common::*;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Container, PodTemplateSpec, Secret};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const BASE: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {egressproxy.io/enabled: "true"}
---
apiVersion: v1
kind: Secret
metadata: {name: egress-proxy, namespace: team-a}
stringData:
  httpProxy: http://team-a:first-password@proxy.corp.example:3128
  httpsProxy: http://team-a:first-password@proxy.corp.example:3128
---
apiVersion: egressproxy.io/v1alpha1
kind: EgressProxyPolicy
metadata: {name: outbound, namespace: team-a}
spec:
  workloadSelector: {matchLabels: {egress: proxied}}
  workloadKinds: [Deployment, CronJob]
  proxy:
    credentials: [{name: main, secretRef: {name: egress-proxy}}]
    active: main
  noProxy:
    additional: [.corp.example]
    dialect: go
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: team-a, labels: {egress: proxied}}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
            - name: report
              image: report:1
              env: [{name: LOG_LEVEL, value: info}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: unrelated, namespace: team-a, labels: {app: unrelated}}
spec:
  schedule: "0 4 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: app, image: app:1}]
"#;

const MANAGED: &str = "egress-proxy-outbound";

async fn cron_job(env: &Env, name: &str) -> CronJob {
    Api::<CronJob>::namespaced(env.client.clone(), "team-a")
        .get(name)
        .await
        .expect("get cronjob")
}

fn pod_template(c: &CronJob) -> &PodTemplateSpec {
    let job = c.spec.as_ref().expect("spec").job_template.spec.as_ref();
    &job.expect("job spec").template
}

fn cj_hash(c: &CronJob) -> Option<String> {
    let meta = pod_template(c).metadata.as_ref()?;
    meta.annotations
        .as_ref()?
        .get("egressproxy.io/config-hash")
        .cloned()
}

fn report_container(c: &CronJob) -> &Container {
    &pod_template(c).spec.as_ref().expect("pod spec").containers[0]
}

fn env_names(c: &CronJob) -> Vec<String> {
    let env = report_container(c).env.iter().flatten();
    env.map(|e| e.name.clone()).collect()
}

/// Where each of the six variables reads its value: (object, key).
fn references(c: &CronJob) -> Vec<(String, String, String)> {
    let env = report_container(c).env.iter().flatten();
    env.filter_map(|e| {
        let from = e.value_from.as_ref()?;
        let (name, key) = match (&from.secret_key_ref, &from.config_map_key_ref) {
            (Some(s), _) => (s.name.clone(), s.key.clone()),
            (_, Some(m)) => (m.name.clone(), m.key.clone()),
            _ => return None,
        };
        Some((e.name.clone(), name, key))
    })
    .collect()
}

/// A Job as the CronJob controller would start it (kube-sim schedules nothing), and one
/// created by hand that the selector matches directly.
async fn create_jobs(env: &Env) -> Api<Job> {
    let cj = cron_job(env, "nightly").await;
    let jobs = Api::<Job>::namespaced(env.client.clone(), "team-a");
    let template = serde_json::to_value(pod_template(&cj)).unwrap();
    let scheduled = json!({
        "metadata": {"name": "nightly-29000000", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
            "uid": cj.uid().unwrap(), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"template": template},
    });
    let adhoc = json!({
        "metadata": {"name": "adhoc", "labels": {"egress": "proxied"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "once", "image": "once:1"}]}}},
    });
    for j in [scheduled, adhoc] {
        let job: Job = serde_json::from_value(j).unwrap();
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    jobs
}

fn old_jobs(p: &egress_proxy_operator::api::EgressProxyPolicy) -> Vec<String> {
    let w = p.status.as_ref().and_then(|s| s.workloads.clone());
    w.map(|w| w.old_jobs).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_gets_the_variables_and_its_running_jobs_are_reported_untouched() {
    let env = Env::new(BASE).await;
    let jobs = create_jobs(&env).await;
    // A Job's spec as written (its status moves on while kube-sim's Job controller runs it).
    let versions = |jobs: Vec<Job>| -> Vec<(String, Option<i64>, String)> {
        let v = jobs.into_iter().map(|j| {
            let spec = serde_json::to_string(&j.spec).unwrap();
            (j.name_any(), j.metadata.generation, spec)
        });
        v.collect()
    };
    let before = versions(jobs.list(&Default::default()).await.unwrap().items);
    let op = env.start();
    let p = wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    let counts = p.status.as_ref().and_then(|s| s.workloads.clone()).unwrap();
    assert_eq!((counts.selected, counts.up_to_date), (1, 1));
    assert!(
        env.count("list", "jobs") > 0,
        "the namespace's Jobs are read"
    );

    let cj = cron_job(&env, "nightly").await;
    let slot = |k: &str| (MANAGED.to_owned(), format!("slot.main.{k}"));
    let cm = (MANAGED.to_owned(), "NO_PROXY".to_owned());
    let want: Vec<(String, String, String)> = [
        ("HTTP_PROXY", slot("HTTP_PROXY")),
        ("http_proxy", slot("HTTP_PROXY")),
        ("HTTPS_PROXY", slot("HTTPS_PROXY")),
        ("https_proxy", slot("HTTPS_PROXY")),
        ("NO_PROXY", cm.clone()),
        ("no_proxy", cm),
    ]
    .into_iter()
    .map(|(v, (n, k))| (v.to_owned(), n, k))
    .collect();
    let mut got = references(&cj);
    got.sort();
    let mut want_sorted = want;
    want_sorted.sort();
    assert_eq!(got, want_sorted, "the six variables, by reference");
    assert!(env_names(&cj).contains(&"LOG_LEVEL".to_owned()));
    let first = cj_hash(&cj).expect("config-hash annotation");
    assert_eq!(cj_hash(&cron_job(&env, "unrelated").await), None);

    // The running Jobs cannot change: named in status and Ready, never written.
    assert_eq!(
        old_jobs(&p),
        ["Job/adhoc", "Job/nightly-29000000 (CronJob/nightly)"]
    );
    let message = ready_message(&p);
    assert!(
        message.contains("2 running Job(s) cannot change and finish with the previous"),
        "{message}"
    );

    // Nothing changed: nothing is written.
    op.caught_up(OUTBOUND).await;
    let (writes, patches) = (env.operator_writes(), env.count("patch", "cronjobs"));
    op.caught_up(OUTBOUND).await;
    assert_eq!(env.operator_writes(), writes, "an idle policy wrote");

    // A new password: the CronJob's template is written once, and nothing else.
    let changed = env
        .set_secret(
            "team-a",
            "egress-proxy",
            json!({"httpProxy": "http://team-a:second-password@proxy.corp.example:3128"}),
        )
        .await;
    let cj = eventually("nightly re-hashed", || async {
        let c = cron_job(&env, "nightly").await;
        (cj_hash(&c).as_deref() != Some(first.as_str())).then_some(c)
    })
    .await;
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    op.looked(OUTBOUND, &[mark(&changed)]).await;
    assert_eq!(env.count("patch", "cronjobs"), patches + 1, "one write");
    assert_eq!(env.count("patch", "jobs"), 0, "Jobs are never written");
    let after = versions(jobs.list(&Default::default()).await.unwrap().items);
    assert_eq!(after, before, "the Jobs are untouched");
    assert!(cj_hash(&cj).is_some());

    // A Job that finished is no longer named.
    jobs.delete("adhoc", &DeleteParams::default())
        .await
        .unwrap();
    env.set_secret("team-a", "egress-proxy", json!({"unrelated": "x"}))
        .await;
    eventually("adhoc no longer named", || async {
        let p = env.policy("team-a", "outbound").await;
        (old_jobs(&p) == ["Job/nightly-29000000 (CronJob/nightly)"]).then_some(())
    })
    .await;

    // The credential is withdrawn (its Secret deleted): taken out of the CronJob too.
    Api::<Secret>::namespaced(env.client.clone(), "team-a")
        .delete("egress-proxy", &DeleteParams::default())
        .await
        .unwrap();
    wait_reason(&env, "team-a", "outbound", "SecretNotAvailable").await;
    let cj = eventually("nightly released", || async {
        let c = cron_job(&env, "nightly").await;
        cj_hash(&c).is_none().then_some(c)
    })
    .await;
    assert_eq!(env_names(&cj), ["LOG_LEVEL"]);
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_policy_removes_what_it_added_to_the_cron_job() {
    let env = Env::new(BASE).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "Reconciled").await;
    assert!(cj_hash(&cron_job(&env, "nightly").await).is_some());
    Api::<egress_proxy_operator::api::EgressProxyPolicy>::namespaced(env.client.clone(), "team-a")
        .delete("outbound", &DeleteParams::default())
        .await
        .unwrap();
    let cj = eventually("nightly released", || async {
        let c = cron_job(&env, "nightly").await;
        cj_hash(&c).is_none().then_some(c)
    })
    .await;
    assert_eq!(env_names(&cj), ["LOG_LEVEL"]);
    let meta = pod_template(&cj).metadata.clone().unwrap_or_default();
    let annotations = meta.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key("egressproxy.io/credential"),
        "{annotations:?}"
    );
    op.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_jobs_are_left_alone_unless_workload_kinds_lists_them() {
    let yaml = BASE.replace("  workloadKinds: [Deployment, CronJob]\n", "");
    let env = Env::new(&yaml).await;
    let op = env.start();
    wait_reason(&env, "team-a", "outbound", "NoWorkloadsSelected").await;
    op.caught_up(OUTBOUND).await;
    assert_eq!(cj_hash(&cron_job(&env, "nightly").await), None);
    assert_eq!(env.count("patch", "cronjobs"), 0);
    assert_eq!(
        env.count("list", "jobs"),
        0,
        "Jobs are listed only for CronJobs"
    );
    op.stop().await;
}
