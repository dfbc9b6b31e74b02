//! Paced rollouts and terminating Pods in the simulated controllers, watched over HTTP with
//! kube-rs: every step a real controller takes is visible as a watch event.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Resource, ResourceExt};
use kube_sim::{Config, KubeSim, KubeSimHandle};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(60);

async fn start(ready_after: Duration, grace_scale: f64) -> (KubeSimHandle, kube::Client) {
    let config = Config {
        controllers: true,
        ready_after,
        grace_scale,
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start kube-sim");
    let client = sim.client().expect("client");
    (sim, client)
}

/// Every change of a kind from now on.
async fn watch<K>(api: &Api<K>) -> impl Stream<Item = WatchEvent<K>> + Unpin
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + 'static,
{
    let rv = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let wp = WatchParams::default().timeout(290);
    api.watch(&wp, &rv)
        .await
        .expect("watch")
        .map(|e| e.expect("watch event"))
        .boxed()
}

/// Feed events to `step` until it returns true.
async fn follow<K, S, F>(stream: &mut S, what: &str, mut step: F)
where
    S: Stream<Item = WatchEvent<K>> + Unpin,
    F: FnMut(WatchEvent<K>) -> bool,
{
    timeout(WAIT, async {
        while let Some(ev) = stream.next().await {
            if step(ev) {
                return;
            }
        }
        panic!("watch ended while waiting for {what}");
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

fn object<K: Clone>(ev: &WatchEvent<K>) -> Option<K> {
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => Some(o.clone()),
        _ => None,
    }
}

fn deployment(replicas: i32, strategy: Value, extra: Value) -> Deployment {
    let mut d = json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas, "strategy": strategy,
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}}},
    });
    json_patch::merge(&mut d, &extra);
    serde_json::from_value(d).expect("deployment")
}

/// `kubectl rollout status`'s test for a finished Deployment rollout.
fn rolled_out(d: &Deployment) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let st = d.status.clone().unwrap_or_default();
    st.observed_generation == d.metadata.generation
        && st.updated_replicas == Some(want)
        && st.replicas == Some(want)
        && st.available_replicas == Some(want)
}

/// Wait until the named object satisfies `pred`.
async fn until<K, F>(api: &Api<K>, name: &str, what: &str, pred: F)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + 'static,
    F: Fn(&K) -> bool,
{
    let mut events = watch(api).await;
    if pred(&api.get(name).await.expect("get")) {
        return;
    }
    follow(&mut events, what, |ev| {
        object(&ev).is_some_and(|o| o.meta().name.as_deref() == Some(name) && pred(&o))
    })
    .await;
}

async fn wait_rolled_out(api: &Api<Deployment>, name: &str) {
    until(api, name, "the rollout to finish", rolled_out).await;
}

async fn set_image<K>(api: &Api<K>, name: &str, container: &str, image: &str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": container, "image": image}]}}}});
    api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("set image");
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn image_of(rs: &ReplicaSet) -> String {
    rs.spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
        .and_then(|s| s.containers[0].image.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn deployment_rolls_one_pod_at_a_time_within_surge_and_unavailable() {
    let (_sim, client) = start(Duration::from_millis(150), 0.0).await;
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    deploys
        .create(&PostParams::default(), &deployment(4, strategy, json!({})))
        .await
        .expect("create");
    wait_rolled_out(&deploys, "web").await;
    let mut events = watch(&rss).await;
    let mut sets: BTreeMap<String, ReplicaSet> = rss
        .list(&ListParams::default())
        .await
        .expect("replicasets")
        .items
        .into_iter()
        .map(|rs| (rs.name_any(), rs))
        .collect();
    set_image(&deploys, "web", "web", "web:2").await;
    // Follow every ReplicaSet write until the old one is at zero and the new one available.
    let mut new_steps: Vec<i32> = Vec::new();
    follow(&mut events, "the ReplicaSets to finish", |ev| {
        let Some(rs) = object(&ev) else { return false };
        sets.insert(rs.name_any(), rs.clone());
        let total: i32 = sets.values().map(spec_replicas).sum();
        let available: i32 = sets
            .values()
            .map(|r| {
                r.status
                    .as_ref()
                    .and_then(|s| s.available_replicas)
                    .unwrap_or(0)
            })
            .sum();
        assert!(
            total <= 5,
            "more than replicas + maxSurge Pods wanted: {total}"
        );
        assert!(
            available >= 4,
            "fewer than replicas - maxUnavailable available: {available}"
        );
        if image_of(&rs) == "web:2" && new_steps.last() != Some(&spec_replicas(&rs)) {
            new_steps.push(spec_replicas(&rs));
        }
        let done = |img: &str, n: i32| {
            sets.values().any(|r| {
                image_of(r) == img
                    && spec_replicas(r) == n
                    && r.status
                        .as_ref()
                        .and_then(|s| s.available_replicas)
                        .unwrap_or(0)
                        == n
            })
        };
        done("web:2", 4)
            && sets
                .values()
                .any(|r| image_of(r) == "web:1" && spec_replicas(r) == 0)
    })
    .await;
    assert_eq!(
        new_steps,
        [1, 2, 3, 4],
        "the new ReplicaSet grows one Pod per step"
    );
    wait_rolled_out(&deploys, "web").await;
}

#[tokio::test]
async fn a_stuck_rollout_passes_its_progress_deadline_and_recreate_waits_for_old_pods() {
    let (_sim, client) = start(Duration::ZERO, 1.0).await;
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let extra = json!({"spec": {"progressDeadlineSeconds": 1,
                                "template": {"spec": {"terminationGracePeriodSeconds": 1}}}});
    deploys
        .create(
            &PostParams::default(),
            &deployment(1, json!({"type": "RollingUpdate"}), extra),
        )
        .await
        .expect("create");
    wait_rolled_out(&deploys, "web").await;
    // New Pods never get Ready: after a second without progress the deadline is exceeded.
    let hang = json!({"metadata": {"annotations": {kube_sim::ROLLOUT_ANNOTATION: "hang"}}});
    deploys
        .patch("web", &PatchParams::default(), &Patch::Merge(hang))
        .await
        .expect("hang");
    let mut events = watch(&deploys).await;
    set_image(&deploys, "web", "web", "web:2").await;
    follow(&mut events, "ProgressDeadlineExceeded", |ev| {
        object(&ev).is_some_and(|d| {
            d.status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| {
                    c.type_ == "Progressing"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
                })
        })
    })
    .await;
    // Released, the rollout finishes and the condition says so.
    let release = json!({"metadata": {"annotations": {kube_sim::ROLLOUT_ANNOTATION: null}}});
    deploys
        .patch("web", &PatchParams::default(), &Patch::Merge(release))
        .await
        .expect("release");
    wait_rolled_out(&deploys, "web").await;

    // Recreate: the new Pod is created only after every old one (grace period 1 s) is gone.
    let recreate = json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}});
    deploys
        .patch("web", &PatchParams::default(), &Patch::Merge(recreate))
        .await
        .expect("recreate");
    wait_rolled_out(&deploys, "web").await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut events = watch(&pods).await;
    let mut running: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert!(!running.is_empty());
    set_image(&deploys, "web", "web", "web:3").await;
    follow(&mut events, "the new Pod", |ev| {
        match &ev {
            WatchEvent::Deleted(p) => running.retain(|n| *n != p.name_any()),
            WatchEvent::Added(_) => {
                assert!(
                    running.is_empty(),
                    "a Recreate Pod started while {running:?} ran"
                );
                return true;
            }
            _ => {}
        }
        false
    })
    .await;
}

#[tokio::test]
async fn old_pods_stay_terminating_for_their_grace_period() {
    let (_sim, client) = start(Duration::ZERO, 1.0).await;
    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let rss: Api<ReplicaSet> = Api::default_namespaced(client.clone());
    let extra = json!({"spec": {"template": {"spec": {"terminationGracePeriodSeconds": 5}}}});
    deploys
        .create(
            &PostParams::default(),
            &deployment(1, json!({"type": "RollingUpdate"}), extra),
        )
        .await
        .expect("create");
    wait_rolled_out(&deploys, "web").await;
    let old = pods.list(&ListParams::default()).await.expect("pods").items;
    let old_name = old[0].name_any();
    let mut events = watch(&pods).await;
    set_image(&deploys, "web", "web", "web:2").await;
    // MODIFIED with a deletionTimestamp first ...
    let mut marked = None;
    follow(
        &mut events,
        "the old Pod to be marked for deletion",
        |ev| match ev {
            WatchEvent::Modified(p)
                if p.name_any() == old_name && p.metadata.deletion_timestamp.is_some() =>
            {
                assert_eq!(p.metadata.deletion_grace_period_seconds, Some(5));
                marked = Some(Instant::now());
                true
            }
            WatchEvent::Deleted(p) if p.name_any() == old_name => {
                panic!("deleted without a grace period")
            }
            _ => false,
        },
    )
    .await;
    // ... while its ReplicaSet already reports no replicas and the rollout is complete ...
    wait_rolled_out(&deploys, "web").await;
    let sets = rss.list(&ListParams::default()).await.expect("rs").items;
    let old_rs = sets
        .iter()
        .find(|r| image_of(r) == "web:1")
        .expect("old rs");
    assert_eq!(old_rs.status.as_ref().map(|s| s.replicas), Some(0));
    let still = pods
        .get(&old_name)
        .await
        .expect("the terminating Pod is still there");
    assert!(still.metadata.deletion_timestamp.is_some());
    // ... then DELETED once the grace period is over.
    follow(
        &mut events,
        "the old Pod to go",
        |ev| matches!(ev, WatchEvent::Deleted(p) if p.name_any() == old_name),
    )
    .await;
    let took = marked.expect("marked").elapsed();
    assert!(
        took >= Duration::from_secs(4),
        "removed after {took:?}, before its grace period"
    );

    // A delete's own gracePeriodSeconds wins; 0 removes at once.
    let pod = pods.list(&ListParams::default()).await.expect("pods").items[0].name_any();
    pods.delete(&pod, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete");
    assert!(
        pods.get_opt(&pod).await.expect("get").is_none(),
        "grace 0 removes at once"
    );
}

#[tokio::test]
async fn statefulset_updates_from_the_highest_ordinal_down_to_its_partition() {
    let (_sim, client) = start(Duration::from_millis(100), 0.0).await;
    let sts: Api<StatefulSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let s: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [{"name": "db", "image": "db:1"}]}}},
    }))
    .expect("sts");
    let mut events = watch(&pods).await;
    sts.create(&PostParams::default(), &s)
        .await
        .expect("create");
    // OrderedReady: db-1 is created only after db-0 is Ready, db-2 after db-1.
    let mut created = Vec::new();
    let mut ready = Vec::new();
    follow(&mut events, "three Pods", |ev| {
        match &ev {
            WatchEvent::Added(p) => {
                created.push(p.name_any());
                assert_eq!(
                    created.len(),
                    ready.len() + 1,
                    "created before its predecessor was Ready"
                );
            }
            WatchEvent::Modified(p) if is_ready(p) && !ready.contains(&p.name_any()) => {
                ready.push(p.name_any())
            }
            _ => {}
        }
        ready.len() == 3
    })
    .await;
    assert_eq!(created, ["db-0", "db-1", "db-2"]);
    let db0 = pods.get("db-0").await.expect("db-0").uid();
    set_image(&sts, "db", "db", "db:2").await;
    let mut deleted = Vec::new();
    follow(&mut events, "the update down to the partition", |ev| {
        if let WatchEvent::Deleted(p) = &ev {
            deleted.push(p.name_any());
        }
        deleted.len() == 2
            && matches!(&ev, WatchEvent::Modified(p) if p.name_any() == "db-1" && is_ready(p))
    })
    .await;
    assert_eq!(deleted, ["db-2", "db-1"], "highest ordinal first");
    until(&sts, "db", "two updated replicas", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.updated_replicas == Some(2) && st.ready_replicas == Some(3))
    })
    .await;
    assert_eq!(
        pods.get("db-0").await.expect("db-0").uid(),
        db0,
        "the partition keeps db-0"
    );
    let mut images = Vec::new();
    for i in 0..3 {
        let p = pods.get(&format!("db-{i}")).await.expect("pod");
        images.push(
            p.spec
                .and_then(|s| s.containers[0].image.clone())
                .unwrap_or_default(),
        );
    }
    assert_eq!(images, ["db:1", "db:2", "db:2"]);
    let st = sts.get("db").await.expect("get").status.expect("status");
    assert_ne!(
        st.current_revision, st.update_revision,
        "db-0 still runs the old revision"
    );
    let revs: Api<ControllerRevision> = Api::default_namespaced(client.clone());
    assert_eq!(
        revs.list(&ListParams::default())
            .await
            .expect("revisions")
            .items
            .len(),
        2
    );
    // Partition 0: db-0 follows, and the current revision becomes the update revision.
    sts.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}})),
    )
    .await
    .expect("partition 0");
    until(&sts, "db", "currentRevision to move", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.current_revision == st.update_revision && st.updated_replicas == Some(3)
        })
    })
    .await;
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[tokio::test]
async fn daemonset_runs_one_pod_per_node_and_replaces_them_within_max_unavailable() {
    let (sim, client) = start(Duration::from_millis(100), 0.0).await;
    for n in ["node-a", "node-b", "node-c"] {
        sim.apply_yaml(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n"
        ))
        .expect("node");
    }
    let ds: Api<DaemonSet> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let d: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}},
    }))
    .expect("ds");
    ds.create(&PostParams::default(), &d).await.expect("create");
    let available = |d: &DaemonSet, image: &str| {
        let st = d.status.clone().unwrap_or_default();
        let tpl_image = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.containers[0].image.clone());
        tpl_image.as_deref() == Some(image)
            && st.desired_number_scheduled == 3
            && st.updated_number_scheduled == Some(3)
            && st.number_available == Some(3)
    };
    until(&ds, "agent", "three Pods", |d| available(d, "agent:1")).await;
    let mut events = watch(&pods).await;
    set_image(&ds, "agent", "agent", "agent:2").await;
    // At most one node without a Ready Pod at any time (maxUnavailable 1).
    let mut ready: BTreeMap<String, bool> = BTreeMap::new();
    let mut nodes_seen = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.expect("pods").items {
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        ready.insert(node, is_ready(&p));
    }
    follow(&mut events, "every node on agent:2", |ev| {
        let Some(p) = object(&ev) else { return false };
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let image = p
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].image.clone())
            .unwrap_or_default();
        let up = !matches!(ev, WatchEvent::Deleted(_))
            && p.metadata.deletion_timestamp.is_none()
            && is_ready(&p);
        ready.insert(node.clone(), up);
        assert!(
            ready.values().filter(|r| !**r).count() <= 1,
            "two nodes down at once: {ready:?}"
        );
        if up && image == "agent:2" {
            nodes_seen.insert(node, ());
        }
        nodes_seen.len() == 3
    })
    .await;
    assert_eq!(
        nodes_seen.keys().collect::<Vec<_>>(),
        ["node-a", "node-b", "node-c"]
    );
}
