//! The kubelet for Pods whose restartPolicy is Never or OnFailure (Job Pods): their containers
//! run as local processes when their image is mapped to a program (`Config::run_images`).
//! Pods of Deployments and the other workloads keep the delay-based simulation in `pods`.
//! Their configMap, secret and emptyDir volumes are simulated by `volumes`.

mod volumes;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::env::{LOCAL_IP, argv, container_vars};
use super::procs::{Exit, Procs, Spec};
use super::{Ctl, gr, int_at, name, namespace, put_status, str_at, terminating, uid};
use crate::object::now;
use crate::store::Store;

const CONFIG_ERROR: &str = "CreateContainerConfigError";
/// Containers not created yet (also while the Pod's volumes cannot be set up).
const CREATING: &str = "ContainerCreating";
const DEFAULT_MESSAGE_PATH: &str = "/dev/termination-log";

/// Pods whose containers kube-sim executes.
pub(super) fn executes(spec: &Value) -> bool {
    matches!(
        spec.get("restartPolicy").and_then(Value::as_str),
        Some("Never" | "OnFailure")
    )
}

fn containers(p: &Value) -> Vec<Value> {
    p.pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn container_status(c: &Value, state: Value, ready: bool, started: bool) -> Value {
    json!({ "name": c.get("name").cloned().unwrap_or(json!("")),
            "image": c.get("image").cloned().unwrap_or(json!("")),
            "ready": ready, "started": started, "restartCount": 0, "state": state })
}

/// Pod conditions; a condition whose status did not change keeps its transition time.
fn conditions(old: &Value, phase: &str, ready: bool, unready: &[String], sandbox: bool) -> Value {
    let ts = now();
    let not_ready = (
        "ContainersNotReady",
        format!("containers with unready status: [{}]", unready.join(" ")),
    );
    let (ready_reason, containers_reason) = match phase {
        "Succeeded" => (
            Some(("PodCompleted", String::new())),
            Some(("PodCompleted", String::new())),
        ),
        "Failed" => (Some(("PodFailed", String::new())), Some(not_ready.clone())),
        _ if ready => (None, None),
        _ => (Some(not_ready.clone()), Some(not_ready)),
    };
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let flag = |b: bool| if b { "True" } else { "False" };
    let list = [
        (
            "PodReadyToStartContainers",
            flag(sandbox && !terminal),
            None,
        ),
        (
            "Initialized",
            "True",
            (phase == "Succeeded").then_some(("PodCompleted", String::new())),
        ),
        ("Ready", flag(ready), ready_reason),
        ("ContainersReady", flag(ready), containers_reason),
        ("PodScheduled", "True", None),
    ];
    let before = old.pointer("/status/conditions").and_then(Value::as_array);
    let out: Vec<Value> = list
        .into_iter()
        .map(|(ty, status, why)| {
            let prev = before
                .into_iter()
                .flatten()
                .find(|c| c.get("type") == Some(&json!(ty)) && c.get("status") == Some(&json!(status)));
            let at = prev
                .and_then(|c| c.get("lastTransitionTime").cloned())
                .unwrap_or(json!(ts));
            let mut c = json!({ "type": ty, "status": status, "lastProbeTime": null, "lastTransitionTime": at });
            if let Some((reason, message)) = why {
                c["reason"] = json!(reason);
                if !message.is_empty() {
                    c["message"] = json!(message);
                }
            }
            c
        })
        .collect();
    Value::Array(out)
}

/// A Pod status around the given container statuses.
fn pod_status(p: &Value, phase: &str, statuses: Vec<Value>) -> Value {
    let ready = phase == "Running" && statuses.iter().all(|s| s["ready"] == json!(true));
    let unready: Vec<String> = statuses
        .iter()
        .filter(|s| s["ready"] != json!(true))
        .map(|s| s["name"].as_str().unwrap_or_default().to_string())
        .collect();
    // Before its containers are created a Pod has no sandbox (the kubelet sets the volumes
    // up first).
    let creating = |s: &Value| s.pointer("/state/waiting/reason") == Some(&json!(CREATING));
    let sandbox = !statuses.iter().all(creating);
    let start = p
        .pointer("/status/startTime")
        .cloned()
        .unwrap_or(json!(now()));
    json!({
        "phase": phase,
        "conditions": conditions(p, phase, ready, &unready, sandbox),
        "hostIP": LOCAL_IP, "hostIPs": [{ "ip": LOCAL_IP }],
        "podIP": LOCAL_IP, "podIPs": [{ "ip": LOCAL_IP }],
        "startTime": start,
        "containerStatuses": statuses,
    })
}

/// The status a new executed Pod is created with: containers not created yet.
pub(super) fn pending_status(spec: &Value) -> Value {
    let pod = json!({ "spec": spec });
    let waiting = json!({ "waiting": { "reason": CREATING } });
    let statuses = containers(&pod)
        .iter()
        .map(|c| container_status(c, waiting.clone(), false, false))
        .collect();
    pod_status(&pod, "Pending", statuses)
}

/// Why a Pod's containers cannot start yet.
struct Waiting {
    reason: &'static str,
    /// For ContainerCreating, the FailedMount Event's message (the status shows none).
    message: String,
}

impl Waiting {
    fn config(message: String) -> Self {
        Self {
            reason: CONFIG_ERROR,
            message,
        }
    }

    fn mount(message: String) -> Self {
        Self {
            reason: CREATING,
            message,
        }
    }
}

fn write_waiting(store: &mut Store, p: &Value, w: &Waiting) {
    let state = match w.reason {
        CREATING => json!({ "waiting": { "reason": w.reason } }),
        _ => json!({ "waiting": { "reason": w.reason, "message": w.message } }),
    };
    let statuses = containers(p)
        .iter()
        .map(|c| container_status(c, state.clone(), false, false))
        .collect();
    put_status(store, "", "pods", p, pod_status(p, "Pending", statuses));
}

/// The kubelet's sync of an executed Pod that is not being deleted.
pub(super) fn sync(store: &mut Store, ctl: &mut Ctl, p: &Value) {
    let id = uid(p);
    let key = (namespace(p), name(p));
    let phase = str_at(p, "/status/phase");
    if matches!(phase.as_str(), "Succeeded" | "Failed") || ctl.procs.started(&id) {
        return;
    }
    let started = prepare(store, ctl, p).and_then(|ready| {
        let dir = Procs::pod_dir(&id);
        if let Err(message) = volumes::write(&dir.join(volumes::DIR), &ready.volumes) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(Waiting::mount(message));
        }
        Ok(ctl.procs.start(&id, ready.specs))
    });
    match started {
        Err(w) => {
            if matches!(w.reason, CONFIG_ERROR | CREATING) {
                ctl.config_waiting.insert(key);
            }
            if w.reason == CREATING {
                volumes::record_failed_mount(store, p, &w.message);
            }
            write_waiting(store, p, &w);
        }
        Ok(failed) => {
            ctl.config_waiting.remove(&key);
            write_started(store, p, failed);
        }
    }
}

/// What starting a Pod takes: its volumes' files, then its containers' processes.
struct Ready {
    volumes: Vec<volumes::Volume>,
    specs: Vec<Spec>,
}

/// Everything needed to start the Pod's containers, or why they cannot start. Volumes come
/// first, as the kubelet mounts them before it creates containers.
fn prepare(store: &Store, ctl: &Ctl, p: &Value) -> Result<Ready, Waiting> {
    let volumes = volumes::pod_volumes(store, p).map_err(Waiting::mount)?;
    runnable(ctl, p)?;
    let dir = Procs::pod_dir(&uid(p));
    let specs = containers(p)
        .iter()
        .enumerate()
        .map(|(i, c)| container_spec(store, ctl, p, (i, c), &dir))
        .collect::<Result<_, _>>()?;
    Ok(Ready { volumes, specs })
}

/// Whether kube-sim can run the Pod's containers at all.
fn runnable(ctl: &Ctl, p: &Value) -> Result<(), Waiting> {
    for c in &containers(p) {
        let image = str_at(c, "/image");
        if !ctl.images.contains_key(&image) {
            let message = format!(
                "kube-sim runs only images mapped to a local program with --run-image \
                 (Config::run_images); image {image:?} is not mapped"
            );
            return Err(Waiting {
                reason: "ErrImagePull",
                message,
            });
        }
    }
    if p.pointer("/spec/initContainers")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
    {
        let message = "kube-sim does not run initContainers".to_string();
        return Err(Waiting {
            reason: "CreateContainerError",
            message,
        });
    }
    Ok(())
}

/// How to start container number `i`: its environment and arguments with each mount path
/// (and the termination message path) rewritten to the Pod's scratch directory `dir`.
fn container_spec(
    store: &Store,
    ctl: &Ctl,
    p: &Value,
    (i, c): (usize, &Value),
    dir: &Path,
) -> Result<Spec, Waiting> {
    let vars = container_vars(store, p, c).map_err(Waiting::config)?;
    let mut paths =
        volumes::mounts(p, c, &vars, &dir.join(volumes::DIR)).map_err(Waiting::config)?;
    // Named by position: a container name is not checked to be a safe file name.
    let message_file = dir.join(format!("termination-log-{i}"));
    let path = match str_at(c, "/terminationMessagePath") {
        s if s.is_empty() => DEFAULT_MESSAGE_PATH.to_string(),
        s => s,
    };
    paths.push((path, message_file.to_string_lossy().into_owned()));
    let swap = |s: String| volumes::rewrite(&s, &paths);
    let args = argv(c, &vars).into_iter().map(swap).collect();
    let mut env = std::collections::BTreeMap::new();
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_default(),
    );
    env.insert("HOSTNAME".to_string(), name(p));
    env.extend(vars.into_iter().map(|(k, v)| (k, swap(v))));
    Ok(Spec {
        program: ctl
            .images
            .get(&str_at(c, "/image"))
            .cloned()
            .unwrap_or_default(),
        container: str_at(c, "/name"),
        args,
        env,
        message_file,
        fallback_to_logs: str_at(c, "/terminationMessagePolicy") == "FallbackToLogsOnError",
    })
}

/// Running (or, for a container that could not be started, terminated with StartError).
fn write_started(store: &mut Store, p: &Value, failed: Vec<(String, String)>) {
    let ts = now();
    let statuses: Vec<Value> = containers(p)
        .iter()
        .map(
            |c| match failed.iter().find(|(n, _)| *n == str_at(c, "/name")) {
                Some((_, message)) => {
                    let state = json!({ "terminated": { "exitCode": 128, "reason": "StartError",
                    "message": message, "startedAt": ts, "finishedAt": ts } });
                    container_status(c, state, false, false)
                }
                None => container_status(c, json!({ "running": { "startedAt": ts } }), true, true),
            },
        )
        .collect();
    let phase = phase_of(&statuses);
    put_status(store, "", "pods", p, pod_status(p, phase, statuses));
}

/// Running until every container has terminated; then Succeeded only if all exited 0.
fn phase_of(statuses: &[Value]) -> &'static str {
    let codes: Vec<Option<i64>> = statuses
        .iter()
        .map(|s| {
            s.pointer("/state/terminated/exitCode")
                .and_then(Value::as_i64)
        })
        .collect();
    if codes.iter().any(Option::is_none) {
        "Running"
    } else if codes.iter().all(|c| *c == Some(0)) {
        "Succeeded"
    } else {
        "Failed"
    }
}

/// A container's process ended: record it in the Pod's status.
pub(super) fn exited(store: &mut Store, ctl: &mut Ctl, exit: Exit) {
    ctl.procs.exited(&exit.pod_uid);
    let Some(p) = store.by_uid(&exit.pod_uid) else {
        return;
    };
    let p = (*p).clone();
    let statuses: Vec<Value> = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut s| {
            if s["name"] == json!(exit.container) {
                let started = s.pointer("/state/running/startedAt").cloned();
                let mut t = json!({ "exitCode": exit.code,
                    "reason": if exit.code == 0 { "Completed" } else { "Error" },
                    "startedAt": started, "finishedAt": exit.finished_at });
                if !exit.message.is_empty() {
                    t["message"] = json!(exit.message);
                }
                s["state"] = json!({ "terminated": t });
                s["ready"] = json!(false);
                s["started"] = json!(false);
            }
            s
        })
        .collect();
    let phase = phase_of(&statuses);
    put_status(store, "", "pods", &p, pod_status(&p, phase, statuses));
    if terminating(&p) && ctl.procs.running(&exit.pod_uid) == 0 {
        super::remove_pod(store, &namespace(&p), &name(&p));
    }
}

/// A deleted Pod is stopping: SIGTERM now, SIGKILL after its scaled grace period. True when
/// nothing runs any more and the Pod was removed.
pub(super) fn stop(store: &mut Store, ctl: &mut Ctl, p: &Value) -> bool {
    let id = uid(p);
    let grace = int_at(p, "/metadata/deletionGracePeriodSeconds").max(0) as f64;
    let scaled = Duration::try_from_secs_f64(grace * ctl.pacing.grace_scale).unwrap_or_default();
    ctl.procs.stop(&id, scaled);
    if ctl.procs.running(&id) > 0 {
        return false;
    }
    super::remove_pod(store, &namespace(p), &name(p));
    true
}

/// The Pod is gone: kill what still runs and clean up.
pub(super) fn pod_gone(ctl: &mut Ctl, p: &Value) {
    ctl.config_waiting.remove(&(namespace(p), name(p)));
    ctl.procs.pod_gone(&uid(p), Duration::ZERO);
}

/// A Secret or ConfigMap changed: Pods waiting for one in its namespace try again.
pub(super) fn retry_config(store: &mut Store, ctl: &mut Ctl, ns: &str) {
    let waiting: Vec<(String, String)> = ctl
        .config_waiting
        .iter()
        .filter(|(n, _)| n == ns)
        .cloned()
        .collect();
    for (ns, pod) in waiting {
        if let Some(p) = store.get(&gr("", "pods"), &(ns.clone(), pod.clone())) {
            let p = (*p).clone();
            if !terminating(&p) {
                sync(store, ctl, &p);
            }
        } else {
            ctl.config_waiting.remove(&(ns, pod));
        }
    }
}

/// The program an image is mapped to.
pub(crate) type Images = std::collections::BTreeMap<String, PathBuf>;
