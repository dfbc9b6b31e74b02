//! Jobs whose Pods kube-sim runs as local processes (`Config::run_images`), driven with
//! kube-rs: environment, termination messages, failures, deadlines, TTL and validation.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube_sim::{Config, KubeSim, KubeSimHandle};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const IMAGE: &str = "shell:1";

async fn start(grace_scale: f64) -> (KubeSimHandle, kube::Client) {
    let config = Config {
        controllers: true,
        grace_scale,
        run_images: BTreeMap::from([(IMAGE.to_string(), PathBuf::from("/bin/sh"))]),
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start kube-sim");
    let client = sim.client().expect("client");
    (sim, client)
}

/// A scratch directory for files the scripts write.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Self {
        let p = std::env::temp_dir().join(format!("kube-sim-jobs-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&p).expect("scratch dir");
        Self(p)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Job running `sh -c script` once (backoffLimit 0 unless `extra` says otherwise).
fn job(name: &str, script: &str, extra: Value) -> Job {
    let mut j = json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": IMAGE, "args": ["-c", script]}]}}},
    });
    json_patch::merge(&mut j, &extra);
    serde_json::from_value(j).expect("job")
}

fn has_condition(j: &Job, ty: &str) -> Option<(String, String)> {
    j.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

async fn wait_condition(jobs: &Api<Job>, name: &str, ty: &str) -> Job {
    let ty = ty.to_string();
    let cond = move |j: Option<&Job>| j.is_some_and(|j| has_condition(j, &ty).is_some());
    tokio::time::timeout(WAIT, await_condition(jobs.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for Job {name}'s condition"))
        .expect("watch")
        .expect("job exists")
}

/// Poll until `check` gives a value (the deadline fails the test).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn job_pods(pods: &Api<Pod>, job: &str) -> Vec<Pod> {
    let lp = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}"));
    let mut list = pods.list(&lp).await.expect("list pods").items;
    list.sort_by_key(|p| p.metadata.creation_timestamp.clone());
    list
}

fn container_state(p: &Pod) -> Value {
    let s = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    serde_json::to_value(&s.expect("container statuses")[0].state).expect("state")
}

fn waiting_of(p: &Pod) -> Option<(String, String)> {
    let w = container_state(p).get("waiting")?.clone();
    Some((
        w["reason"].as_str().unwrap_or_default().to_string(),
        w["message"].as_str().unwrap_or_default().to_string(),
    ))
}

/// A process is gone when /proc has no entry for it, or only a zombie's.
fn process_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn read_when_written(path: &str) -> String {
    eventually(path, || async {
        std::fs::read_to_string(path)
            .ok()
            .filter(|s| s.ends_with('\n'))
    })
    .await
    .trim()
    .to_string()
}

#[tokio::test]
async fn a_job_completes_with_its_environment_and_termination_message() {
    let (_sim, client) = start(0.0).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}}),
    )
    .expect("secret");
    secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("secret");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "settings"}, "data": {"mode": "fast", "level": "3"}}),
    )
    .expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("configmap");
    let env = json!([
        {"name": "GREETING", "value": "hello"},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "COMBINED", "value": "$(GREETING)-$(MODE)"},
        {"name": "ESCAPED", "value": "$$(GREETING)"},
    ]);
    let script = "printf '%s|%s|%s|%s|%s|%s|%s|%s|%s|%s' \"$GREETING\" \"$PASSWORD\" \"$MODE\" \
                  \"$POD\" \"$APP\" \"$COMBINED\" \"$ESCAPED\" \"$CFG_level\" \"${HOME-unset}\" \"$1\" \
                  > /dev/termination-log; echo ran $(GREETING)";
    let extra = json!({"spec": {"template": {
        "metadata": {"labels": {"app": "probe"}},
        "spec": {"containers": [{"name": "main", "image": IMAGE, "env": env,
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
            "args": ["-c", script, "sh", "$(MODE)"]}]}}}});
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job("hello", "", extra))
        .await
        .expect("create job");
    let done = wait_condition(&jobs, "hello", "Complete").await;
    let st = done.status.clone().expect("status");
    assert_eq!(st.succeeded, Some(1));
    assert_eq!((st.active, st.failed), (None, None));
    assert_eq!((st.ready, st.terminating), (Some(0), Some(0)));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    let reason = has_condition(&done, "SuccessCriteriaMet").expect("SuccessCriteriaMet");
    assert_eq!(reason.0, "CompletionsReached");
    assert_eq!(
        has_condition(&done, "Complete").expect("Complete").0,
        "CompletionsReached"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = job_pods(&pods, "hello").await;
    assert_eq!(list.len(), 1);
    let pod = &list[0];
    let pod_name = pod.metadata.name.clone().expect("name");
    let suffix = pod_name
        .strip_prefix("hello-")
        .expect("named after the Job");
    assert!(
        suffix.len() == 5
            && suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    );
    let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Job", "hello"));
    assert_eq!(owner.controller, Some(true));
    let status = pod.status.as_ref().expect("pod status");
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    let t = container_state(pod)["terminated"].clone();
    assert_eq!(
        (t["exitCode"].clone(), t["reason"].clone()),
        (json!(0), json!("Completed"))
    );
    let want = format!("hello|s3cret|fast|{pod_name}|probe|hello-fast|$(GREETING)|3|unset|fast");
    assert_eq!(t["message"], json!(want));
    let ready = status
        .conditions
        .as_ref()
        .expect("conditions")
        .iter()
        .find(|c| c.type_ == "Ready");
    let ready = ready.expect("Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("PodCompleted"))
    );
    let logs = pods
        .logs(&pod_name, &LogParams::default())
        .await
        .expect("logs");
    assert_eq!(logs, "ran hello\n");
}

#[tokio::test]
async fn failures_past_the_backoff_limit_fail_the_job() {
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let fallback = json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
        "image": IMAGE, "terminationMessagePolicy": "FallbackToLogsOnError",
        "args": ["-c", "echo oops; exit 3"]}]}}}});
    jobs.create(&PostParams::default(), &job("once", "", fallback))
        .await
        .expect("create");
    let failed = wait_condition(&jobs, "once", "Failed").await;
    let (reason, message) = has_condition(&failed, "Failed").expect("Failed");
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(message, "Job has reached the specified backoff limit");
    assert!(has_condition(&failed, "FailureTarget").is_some());
    let st = failed.status.expect("status");
    assert_eq!(
        (st.failed, st.succeeded, st.completion_time),
        (Some(1), None, None)
    );
    let list = job_pods(&pods, "once").await;
    assert_eq!(list.len(), 1);
    assert_eq!(
        list[0].status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    let t = container_state(&list[0])["terminated"].clone();
    assert_eq!(
        (t["exitCode"].clone(), t["reason"].clone()),
        (json!(3), json!("Error"))
    );
    assert_eq!(
        t["message"],
        json!("oops\n"),
        "FallbackToLogsOnError uses the output"
    );

    let retry = json!({"spec": {"backoffLimit": 1}});
    jobs.create(&PostParams::default(), &job("twice", "exit 3", retry))
        .await
        .expect("create");
    let failed = wait_condition(&jobs, "twice", "Failed").await;
    assert_eq!(
        has_condition(&failed, "Failed").expect("Failed").0,
        "BackoffLimitExceeded"
    );
    assert_eq!(failed.status.expect("status").failed, Some(2));
    let list = job_pods(&pods, "twice").await;
    assert_eq!(list.len(), 2, "one replacement after the first failure");
    for p in &list {
        let t = container_state(p)["terminated"].clone();
        assert_eq!(t["exitCode"], json!(3));
        assert!(
            t.get("message").is_none(),
            "policy File and an empty file: no message"
        );
    }
}

#[tokio::test]
async fn a_missing_secret_holds_the_container_until_it_exists() {
    let (_sim, client) = start(0.0).await;
    let env =
        json!([{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "late", "key": "token"}}}]);
    let extra = json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
        "image": IMAGE, "env": env, "args": ["-c", "printf %s \"$TOKEN\" > /dev/termination-log"]}]}}}});
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job("wait", "", extra))
        .await
        .expect("create");
    let waiting = |want: &'static str| {
        let pods = pods.clone();
        async move {
            eventually(want, || async {
                let list = job_pods(&pods, "wait").await;
                let w = list.first().and_then(waiting_of)?;
                (w.1 == want).then_some(w)
            })
            .await
        }
    };
    let (reason, _) = waiting("secret \"late\" not found").await;
    assert_eq!(reason, "CreateContainerConfigError");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": "late"}, "stringData": {"other": "hidden-value"}}),
    )
    .expect("secret");
    secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("secret");
    waiting("couldn't find key token in Secret default/late").await;
    let patch = json!({"stringData": {"token": "t0ken"}});
    secrets
        .patch("late", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("add the key");
    wait_condition(&jobs, "wait", "Complete").await;
    let list = job_pods(&pods, "wait").await;
    assert_eq!(
        list.len(),
        1,
        "the same Pod started once the Secret had the key"
    );
    assert_eq!(
        container_state(&list[0])["terminated"]["message"],
        json!("t0ken")
    );
}

#[tokio::test]
async fn an_unmapped_image_is_never_run() {
    let (_sim, client) = start(0.0).await;
    let scratch = Scratch::new();
    let marker = scratch.path("ran");
    let extra = json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
        "image": "busybox:1", "args": ["-c", format!("touch {marker}")]}]}}}});
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &job("unmapped", "", extra))
        .await
        .expect("create");
    let (reason, message) = eventually("ErrImagePull", || async {
        job_pods(&pods, "unmapped")
            .await
            .first()
            .and_then(waiting_of)
    })
    .await;
    assert_eq!(reason, "ErrImagePull");
    assert!(
        message.contains("--run-image") && message.contains("busybox:1"),
        "{message}"
    );
    let list = job_pods(&pods, "unmapped").await;
    assert_eq!(
        list[0].status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert!(!Path::new(&marker).exists(), "nothing ran");
    let j = jobs.get("unmapped").await.expect("job");
    assert_eq!(j.status.expect("status").active, Some(1));
}

#[tokio::test]
async fn the_deadline_kills_the_running_process() {
    let (_sim, client) = start(0.0).await;
    let scratch = Scratch::new();
    let (shell, child) = (scratch.path("shell"), scratch.path("child"));
    let script = format!("echo $$ > {shell}; sleep 60 & echo $! > {child}; wait");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let extra = json!({"spec": {"activeDeadlineSeconds": 1}});
    jobs.create(&PostParams::default(), &job("slow", &script, extra))
        .await
        .expect("create");
    let (shell_pid, child_pid) = (
        read_when_written(&shell).await,
        read_when_written(&child).await,
    );
    let failed = wait_condition(&jobs, "slow", "Failed").await;
    let (reason, message) = has_condition(&failed, "Failed").expect("Failed");
    assert_eq!(reason, "DeadlineExceeded");
    assert_eq!(message, "Job was active longer than specified deadline");
    assert_eq!(failed.status.expect("status").failed, Some(1));
    for pid in [shell_pid, child_pid] {
        eventually("the killed processes to be gone", || async {
            process_gone(&pid).then_some(())
        })
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    assert!(
        job_pods(&pods, "slow").await.is_empty(),
        "the active Pod was deleted"
    );
}

#[tokio::test]
async fn deleting_a_running_pod_sends_sigterm_within_its_grace_period() {
    let (_sim, client) = start(0.1).await;
    let scratch = Scratch::new();
    let (started, termed) = (scratch.path("started"), scratch.path("termed"));
    let script =
        format!("trap 'echo term > {termed}; exit 0' TERM; echo up > {started}; sleep 60 & wait");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let extra = json!({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 30}}}});
    jobs.create(&PostParams::default(), &job("stoppable", &script, extra))
        .await
        .expect("create");
    read_when_written(&started).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let name = job_pods(&pods, "stoppable").await[0]
        .metadata
        .name
        .clone()
        .expect("name");
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("delete pod");
    assert_eq!(read_when_written(&termed).await, "term");
    eventually("the Pod to go once its process exited", || async {
        pods.get_opt(&name)
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn stopping_the_server_kills_what_it_runs() {
    let (sim, client) = start(0.0).await;
    let scratch = Scratch::new();
    let pid_file = scratch.path("pid");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let script = format!("sleep 60 & echo $! > {pid_file}; wait");
    jobs.create(&PostParams::default(), &job("orphan", &script, json!({})))
        .await
        .expect("create");
    let pid = read_when_written(&pid_file).await;
    drop(sim);
    eventually("the process to die with the server", || async {
        process_gone(&pid).then_some(())
    })
    .await;
}

#[tokio::test]
async fn ttl_zero_deletes_the_job_and_its_pods() {
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let extra = json!({"spec": {"ttlSecondsAfterFinished": 0}});
    jobs.create(&PostParams::default(), &job("brief", "true", extra))
        .await
        .expect("create");
    eventually("the Job and its Pods to be deleted", || async {
        let gone = jobs.get_opt("brief").await.expect("get").is_none();
        (gone && job_pods(&pods, "brief").await.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_suspended_job_starts_when_resumed_and_deleting_it_orphans_pods() {
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job("later", "true", json!({"spec": {"suspend": true}})),
    )
    .await
    .expect("create");
    let suspended = wait_condition(&jobs, "later", "Suspended").await;
    assert_eq!(
        has_condition(&suspended, "Suspended").expect("Suspended").0,
        "JobSuspended"
    );
    assert!(job_pods(&pods, "later").await.is_empty());
    let resume = json!({"spec": {"suspend": false}});
    jobs.patch("later", &PatchParams::default(), &Patch::Merge(&resume))
        .await
        .expect("resume");
    wait_condition(&jobs, "later", "Complete").await;
    jobs.delete("later", &DeleteParams::default())
        .await
        .expect("delete");
    assert_eq!(
        job_pods(&pods, "later").await.len(),
        1,
        "batch/v1 orphans by default"
    );
}

#[tokio::test]
async fn validation_and_an_immutable_template() {
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let invalid = |policy: &str| {
        job(
            "bad",
            "true",
            json!({"spec": {"template": {"spec": {"restartPolicy": policy}}}}),
        )
    };
    let err = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.message.clone()),
        other => panic!("expected an API error, got {other:?}"),
    };
    let (code, message) = err(jobs
        .create(&PostParams::default(), &invalid("Always"))
        .await
        .unwrap_err());
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "Job.batch \"bad\" is invalid: spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
    );
    let (code, message) = err(jobs
        .create(&PostParams::default(), &invalid("Sometimes"))
        .await
        .unwrap_err());
    assert_eq!(code, 422);
    assert!(
        message.contains(
            "Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\""
        ),
        "{message}"
    );

    let created = jobs
        .create(
            &PostParams::default(),
            &job("fixed", "true", json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("create");
    let spec = created.spec.expect("spec");
    assert_eq!(
        (spec.completions, spec.parallelism, spec.backoff_limit),
        (Some(1), Some(1), Some(0))
    );
    let uid = created.metadata.uid.expect("uid");
    let labels = spec
        .template
        .metadata
        .expect("template metadata")
        .labels
        .expect("labels");
    assert_eq!(labels.get("batch.kubernetes.io/controller-uid"), Some(&uid));
    assert_eq!(labels.get("job-name").map(String::as_str), Some("fixed"));
    let change = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "other:2"}]}}}});
    let (code, message) = err(jobs
        .patch("fixed", &PatchParams::default(), &Patch::Strategic(&change))
        .await
        .unwrap_err());
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.template: Invalid value") && message.ends_with("field is immutable"),
        "{message}"
    );
    let deadline = json!({"spec": {"activeDeadlineSeconds": 30}});
    jobs.patch("fixed", &PatchParams::default(), &Patch::Merge(&deadline))
        .await
        .expect("other fields may change");
}

#[tokio::test]
async fn command_stands_for_the_image_entrypoint() {
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // The mapped program runs with command[1..] then args: here `sh -c SCRIPT zero one`.
    let extra = json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
        "image": IMAGE, "command": ["/not/run", "-c", "printf '%s %s' \"$0\" \"$1\" > /dev/termination-log"],
        "args": ["zero", "one"]}]}}}});
    jobs.create(&PostParams::default(), &job("entry", "", extra))
        .await
        .expect("create");
    wait_condition(&jobs, "entry", "Complete").await;
    let list = job_pods(&pods, "entry").await;
    assert_eq!(
        container_state(&list[0])["terminated"]["message"],
        json!("zero one")
    );
}

#[tokio::test]
async fn pod_logs_follow_and_tail() {
    use futures::AsyncReadExt;
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let scratch = Scratch::new();
    let go = scratch.path("go");
    let script =
        format!("echo one; echo two; while [ ! -e {go} ]; do sleep 0.05; done; echo three");
    jobs.create(&PostParams::default(), &job("talk", &script, json!({})))
        .await
        .expect("create");
    let name = eventually("a running Pod", || async {
        let list = job_pods(&pods, "talk").await;
        let p = list.first()?;
        let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
        running.then(|| p.metadata.name.clone()).flatten()
    })
    .await;
    let follow = LogParams {
        follow: true,
        ..LogParams::default()
    };
    let mut stream = pods.log_stream(&name, &follow).await.expect("follow");
    std::fs::write(&go, "").expect("let the script finish");
    let mut all = String::new();
    tokio::time::timeout(WAIT, stream.read_to_string(&mut all))
        .await
        .expect("the stream ends with the container")
        .expect("read");
    assert_eq!(all, "one\ntwo\nthree\n");
    let tail = LogParams {
        tail_lines: Some(2),
        ..LogParams::default()
    };
    assert_eq!(pods.logs(&name, &tail).await.expect("tail"), "two\nthree\n");
}

#[tokio::test]
async fn parallel_pods_until_enough_succeed() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, Ordering};
    let (_sim, client) = start(0.0).await;
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let extra = json!({"spec": {"completions": 3, "parallelism": 2}});
    jobs.create(&PostParams::default(), &job("batch", "sleep 0.2", extra))
        .await
        .expect("create");
    let most = Arc::new(AtomicI32::new(0));
    let seen = most.clone();
    let cond = move |j: Option<&Job>| {
        let st = j.and_then(|j| j.status.clone()).unwrap_or_default();
        seen.fetch_max(st.active.unwrap_or(0), Ordering::SeqCst);
        st.succeeded == Some(3)
    };
    tokio::time::timeout(WAIT, await_condition(jobs.clone(), "batch", cond))
        .await
        .expect("three completions")
        .expect("watch");
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "at most parallelism Pods at once"
    );
    let done = wait_condition(&jobs, "batch", "Complete").await;
    assert_eq!(done.status.expect("status").succeeded, Some(3));
    assert_eq!(job_pods(&pods, "batch").await.len(), 3);
}

#[tokio::test]
async fn a_bare_program_name_is_looked_up_and_a_missing_one_fails_to_start() {
    let config = Config {
        controllers: true,
        run_images: BTreeMap::from([
            ("bare:1".to_string(), PathBuf::from("sh")),
            (
                "missing:1".to_string(),
                PathBuf::from("/nonexistent/kube-sim-program"),
            ),
        ]),
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start kube-sim");
    let client = sim.client().expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let with_image = |image: &str| {
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
            "image": image, "args": ["-c", "true"]}]}}}})
    };
    jobs.create(
        &PostParams::default(),
        &job("bare", "", with_image("bare:1")),
    )
    .await
    .expect("create");
    wait_condition(&jobs, "bare", "Complete").await;
    jobs.create(
        &PostParams::default(),
        &job("missing", "", with_image("missing:1")),
    )
    .await
    .expect("create");
    wait_condition(&jobs, "missing", "Failed").await;
    let t = container_state(&job_pods(&pods, "missing").await[0])["terminated"].clone();
    assert_eq!(
        (t["exitCode"].clone(), t["reason"].clone()),
        (json!(128), json!("StartError"))
    );
    let message = t["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("/nonexistent/kube-sim-program"),
        "{message}"
    );
}

/// Where the probe Job mounts the policy's trust ConfigMap.
const TRUST: &str = "/etc/egress-proxy/trust";
const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";

async fn create_configmap(client: &kube::Client, cm: Value) {
    let cm: ConfigMap = serde_json::from_value(cm).expect("configmap");
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
}

/// A Job running `sh -c script args...` with the given volumes, mounts and env.
fn job_with_volumes(name: &str, volumes: Value, mounts: Value, env: Value, args: &[&str]) -> Job {
    let extra = json!({"spec": {"template": {"spec": {"volumes": volumes,
        "containers": [{"name": "main", "image": IMAGE, "env": env,
            "volumeMounts": mounts, "args": args}]}}}});
    job(name, "", extra)
}

/// Wait until the Job completes (a failure fails the test, with what the Pod said).
async fn completed_message(client: &kube::Client, name: &str) -> String {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let done = |j: Option<&Job>| {
        j.is_some_and(|j| {
            has_condition(j, "Complete").is_some() || has_condition(j, "Failed").is_some()
        })
    };
    let j = tokio::time::timeout(WAIT, await_condition(jobs.clone(), name, done))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for Job {name} to finish"))
        .expect("watch")
        .expect("job exists");
    let pod = job_pods(&pods, name).await.pop().expect("a Pod");
    let message = container_state(&pod)["terminated"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pod_name = pod.metadata.name.clone().expect("name");
    let logs = pods.logs(&pod_name, &LogParams::default()).await;
    assert!(
        has_condition(&j, "Complete").is_some(),
        "Job {name} failed: message {message:?}, logs {logs:?}"
    );
    message
}

#[tokio::test]
async fn a_job_reads_mounted_configmap_and_secret_files_through_env_and_args() {
    let (_sim, client) = start(0.0).await;
    create_configmap(
        &client,
        json!({"metadata": {"name": "egress-proxy-p"},
        "data": {"ca-bundle.crt": PEM, "SSL_CERT_FILE": format!("{TRUST}/ca-bundle.crt"),
            "unlisted": "not mounted"},
        "binaryData": {"truststore.p12": "AP8wgg=="}}),
    )
    .await;
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": "token"}, "stringData": {"token": "t0ken"}}),
    )
    .expect("secret");
    Api::<Secret>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &s)
        .await
        .expect("secret");
    let volumes = json!([
        {"name": "egress-proxy-trust", "configMap": {"name": "egress-proxy-p", "items": [
            {"key": "ca-bundle.crt", "path": "ca-bundle.crt"},
            {"key": "truststore.p12", "path": "java/truststore.p12"}]}},
        {"name": "creds", "secret": {"secretName": "token", "defaultMode": 0o440}},
    ]);
    let mounts = json!([
        {"name": "egress-proxy-trust", "mountPath": TRUST, "readOnly": true},
        {"name": "creds", "mountPath": "/var/run/creds"},
        {"name": "creds", "mountPath": "/etc/token", "subPath": "token"},
    ]);
    let env = json!([{"name": "SSL_CERT_FILE", "valueFrom": {"configMapKeyRef":
        {"name": "egress-proxy-p", "key": "SSL_CERT_FILE"}}}]);
    let script = "{ echo \"$SSL_CERT_FILE\"; cat \"$SSL_CERT_FILE\"; \
                  od -An -tx1 \"$1\" | tr -d ' \\n'; echo; cat /var/run/creds/token /etc/token; \
                  echo; stat -c %a /var/run/creds/token; \
                  test -e /etc/egress-proxy/trust/unlisted && echo listed || echo unlisted; \
                  } > /dev/termination-log";
    let arg = format!("{TRUST}/java/truststore.p12");
    let j = job_with_volumes("reader", volumes, mounts, env, &["-c", script, "sh", &arg]);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &j)
        .await
        .expect("create");
    let message = completed_message(&client, "reader").await;
    let (path, rest) = message.split_once('\n').expect("the path first");
    assert!(
        !path.starts_with("/etc/") && path.ends_with("/volumes/egress-proxy-trust/ca-bundle.crt"),
        "SSL_CERT_FILE points into the Pod's volume directory: {path}"
    );
    assert_eq!(rest, format!("{PEM}00ff3082\nt0kent0ken\n440\nunlisted\n"));
    assert!(Path::new(path).exists());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = job_pods(&pods, "reader").await[0].metadata.name.clone();
    pods.delete(&pod.expect("name"), &DeleteParams::default())
        .await
        .expect("delete pod");
    eventually("the Pod's volume files to be removed", || async {
        (!Path::new(path).exists()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_missing_configmap_volume_holds_the_pod_with_failed_mount() {
    use k8s_openapi::api::core::v1::Event;
    let (_sim, client) = start(0.0).await;
    let volumes = json!([{"name": "egress-proxy-trust", "configMap": {"name": "late",
        "items": [{"key": "ca-bundle.crt", "path": "ca-bundle.crt"}]}}]);
    let mounts = json!([{"name": "egress-proxy-trust", "mountPath": TRUST, "readOnly": true}]);
    let script = format!("cat {TRUST}/ca-bundle.crt > /dev/termination-log");
    let j = job_with_volumes("mount", volumes, mounts, json!([]), &["-c", &script]);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &j)
        .await
        .expect("create");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let failed_mount = |why: &'static str| {
        let (events, pods) = (events.clone(), pods.clone());
        async move {
            let want =
                format!("MountVolume.SetUp failed for volume \"egress-proxy-trust\" : {why}");
            eventually(why, || async {
                let pod = job_pods(&pods, "mount").await.pop()?;
                let name = pod.metadata.name.clone()?;
                let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
                let list = events.list(&lp).await.expect("events").items;
                let e = list
                    .into_iter()
                    .find(|e| e.message.as_deref() == Some(&want))?;
                Some((pod, e))
            })
            .await
        }
    };
    let (pod, e) = failed_mount("configmap \"late\" not found").await;
    assert_eq!(
        (e.reason.as_deref(), e.type_.as_deref()),
        (Some("FailedMount"), Some("Warning"))
    );
    assert_eq!(
        e.source.and_then(|s| s.component).as_deref(),
        Some("kubelet")
    );
    assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
    let status = pod.status.clone().expect("status");
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(
        waiting_of(&pod),
        Some(("ContainerCreating".into(), String::new()))
    );
    let sandbox = status.conditions.expect("conditions").into_iter();
    let sandbox = sandbox.filter(|c| c.type_ == "PodReadyToStartContainers");
    assert_eq!(sandbox.map(|c| c.status).collect::<Vec<_>>(), ["False"]);

    create_configmap(
        &client,
        json!({"metadata": {"name": "late"}, "data": {"other": "x"}}),
    )
    .await;
    let (pod, _) =
        failed_mount("configmap references non-existent config key: ca-bundle.crt").await;
    assert_eq!(
        waiting_of(&pod),
        Some(("ContainerCreating".into(), String::new()))
    );
    let add = json!({"data": {"ca-bundle.crt": PEM}});
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .patch("late", &PatchParams::default(), &Patch::Merge(&add))
        .await
        .expect("add the key");
    assert_eq!(completed_message(&client, "mount").await, PEM);
    assert_eq!(
        job_pods(&pods, "mount").await.len(),
        1,
        "the same Pod started"
    );

    let optional = json!([{"name": "maybe", "configMap": {"name": "nowhere", "optional": true}}]);
    let mounts = json!([{"name": "maybe", "mountPath": "/etc/maybe"}]);
    let script = "{ ls -A /etc/maybe; echo end; } > /dev/termination-log";
    let j = job_with_volumes("optional", optional, mounts, json!([]), &["-c", script]);
    jobs.create(&PostParams::default(), &j)
        .await
        .expect("create");
    assert_eq!(completed_message(&client, "optional").await, "end\n");
}

#[tokio::test]
async fn only_whole_paths_under_a_mount_path_are_rewritten() {
    let (_sim, client) = start(0.0).await;
    create_configmap(
        &client,
        json!({"metadata": {"name": "cm"}, "data": {"a": "A"}}),
    )
    .await;
    let volumes = json!([{"name": "egress-proxy-trust", "configMap": {"name": "cm"}}]);
    let mounts = json!([{"name": "egress-proxy-trust", "mountPath": TRUST}]);
    let env = json!([
        {"name": "X", "value": format!("{TRUST}x/file")},
        {"name": "Y", "value": TRUST},
        {"name": "Z", "value": format!("--ca={TRUST}/a")},
    ]);
    let script = "printf '%s|%s|%s|%s|%s|%s' \"$X\" \"$Y\" \"$Z\" \"$1\" \"$2\" \
                  \"$(cat \"${Z#--ca=}\")\" > /dev/termination-log";
    let (other, sibling) = (format!("/opt{TRUST}/a"), format!("{TRUST}.d"));
    let args = ["-c", script, "sh", &other, &sibling];
    let j = job_with_volumes("prefix", volumes, mounts, env, &args);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    jobs.create(&PostParams::default(), &j)
        .await
        .expect("create");
    let message = completed_message(&client, "prefix").await;
    let parts: Vec<&str> = message.split('|').collect();
    let dir = parts[1];
    assert!(
        dir.ends_with("/volumes/egress-proxy-trust") && !dir.starts_with("/etc/"),
        "the mount path itself is rewritten: {message}"
    );
    let want = [
        format!("{TRUST}x/file"),
        dir.to_string(),
        format!("--ca={dir}/a"),
        other,
        sibling,
        "A".to_string(),
    ];
    assert_eq!(parts, want);
}
