//! Watches over real HTTP: kube-runtime watcher and Controller, bookmarks, 410 Expired and recovery.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher::{self, Event};
use kube_sim::{Config, KubeSim, KubeSimHandle};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(30);

async fn start() -> (KubeSimHandle, kube::Client) {
    let config = Config {
        bookmark_interval: Duration::from_millis(200),
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start kube-sim");
    let client = sim.client().expect("client");
    (sim, client)
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "t"}}, "data": {"v": value}}),
    )
    .expect("cm")
}

/// Wait until `pred` holds for an item received on `rx`.
async fn wait_for<T, F: FnMut(&T) -> bool>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    what: &str,
    mut pred: F,
) -> T {
    timeout(WAIT, async {
        loop {
            let item = rx.recv().await.expect("stream ended");
            if pred(&item) {
                return item;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[derive(Debug)]
enum Seen {
    Init,
    Apply(String, String),
    Delete(String),
}

fn spawn_watcher(api: Api<ConfigMap>, cfg: watcher::Config) -> mpsc::UnboundedReceiver<Seen> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, cfg).boxed();
        while let Some(ev) = s.next().await {
            let seen = match ev {
                Ok(Event::Init) => Seen::Init,
                Ok(Event::Apply(o) | Event::InitApply(o)) => {
                    let v = o
                        .data
                        .as_ref()
                        .and_then(|d| d.get("v"))
                        .cloned()
                        .unwrap_or_default();
                    Seen::Apply(o.name_any(), v)
                }
                Ok(Event::Delete(o)) => Seen::Delete(o.name_any()),
                Ok(Event::InitDone) | Err(_) => continue,
            };
            if tx.send(seen).is_err() {
                return;
            }
        }
    });
    rx
}

async fn watcher_sees_changes(cfg: watcher::Config) {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("before", "0"))
        .await
        .expect("create");
    let mut rx = spawn_watcher(cms.clone(), cfg);
    wait_for(
        &mut rx,
        "initial object",
        |s| matches!(s, Seen::Apply(n, _) if n == "before"),
    )
    .await;

    cms.create(&PostParams::default(), &cm("after", "1"))
        .await
        .expect("create");
    wait_for(
        &mut rx,
        "created",
        |s| matches!(s, Seen::Apply(n, v) if n == "after" && v == "1"),
    )
    .await;
    cms.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch");
    wait_for(
        &mut rx,
        "changed",
        |s| matches!(s, Seen::Apply(n, v) if n == "after" && v == "2"),
    )
    .await;
    cms.delete("after", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(
        &mut rx,
        "deleted",
        |s| matches!(s, Seen::Delete(n) if n == "after"),
    )
    .await;
}

#[tokio::test]
async fn watcher_list_watch_sees_later_changes() {
    watcher_sees_changes(watcher::Config::default()).await;
}

#[tokio::test]
async fn watcher_streaming_list_sees_later_changes() {
    watcher_sees_changes(watcher::Config::default().streaming_lists()).await;
}

type MetaSeen = (&'static str, PartialObjectMeta<Secret>);

/// A kube-runtime watcher over `Api<PartialObjectMeta<Secret>>`: events with their object.
fn spawn_metadata_watcher(
    api: Api<PartialObjectMeta<Secret>>,
    cfg: watcher::Config,
) -> mpsc::UnboundedReceiver<MetaSeen> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, cfg).boxed();
        while let Some(ev) = s.next().await {
            let seen = match ev {
                Ok(Event::Apply(o) | Event::InitApply(o)) => ("apply", o),
                Ok(Event::Delete(o)) => ("delete", o),
                Ok(Event::Init | Event::InitDone) | Err(_) => continue,
            };
            if tx.send(seen).is_err() {
                return;
            }
        }
    });
    rx
}

/// Wait for `event` on `name` (with annotation `v`, if given) and check it is metadata only;
/// an object named `forbidden` on the way fails the test.
async fn wait_for_meta(
    rx: &mut mpsc::UnboundedReceiver<MetaSeen>,
    what: &str,
    (event, name, v): (&str, &str, Option<&str>),
    forbidden: Option<&str>,
) -> PartialObjectMeta<Secret> {
    let (_, o) = wait_for(rx, what, |(e, o): &MetaSeen| {
        assert!(
            forbidden.is_none_or(|f| o.name_any() != f),
            "outside the selector: {o:?}"
        );
        *e == event
            && o.name_any() == name
            && v.is_none_or(|v| o.annotations().get("v").map(String::as_str) == Some(v))
    })
    .await;
    let types = o.types.clone().expect("types");
    assert_eq!(
        (types.kind.as_str(), types.api_version.as_str()),
        ("PartialObjectMetadata", "meta.k8s.io/v1")
    );
    assert!(o.metadata.resource_version.is_some());
    o
}

/// Metadata-only watches: objects arrive as PartialObjectMetadata, selectors apply.
async fn metadata_watcher_sees_changes(cfg: watcher::Config) {
    let (_sim, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = |name: &str, app: &str, v: &str| -> Secret {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": app}, "annotations": {"v": v}},
            "stringData": {"password": "supersecret"},
        }))
        .expect("secret")
    };
    secrets
        .create(&PostParams::default(), &secret("before", "t", "0"))
        .await
        .expect("create");
    secrets
        .create(&PostParams::default(), &secret("other", "x", "0"))
        .await
        .expect("create");
    let metas: Api<PartialObjectMeta<Secret>> = Api::namespaced(client.clone(), "default");
    let mut rx = spawn_metadata_watcher(metas, cfg.labels("app=t"));
    let not_other = Some("other");
    let o = wait_for_meta(
        &mut rx,
        "initial object",
        ("apply", "before", Some("0")),
        not_other,
    )
    .await;
    assert_eq!(o.labels().get("app").map(String::as_str), Some("t"));

    secrets
        .create(&PostParams::default(), &secret("after", "t", "1"))
        .await
        .expect("create");
    wait_for_meta(&mut rx, "added", ("apply", "after", Some("1")), not_other).await;
    let annotate = |v: &str| Patch::Merge(json!({"metadata": {"annotations": {"v": v}}}));
    secrets
        .patch("after", &PatchParams::default(), &annotate("2"))
        .await
        .expect("patch");
    wait_for_meta(
        &mut rx,
        "modified",
        ("apply", "after", Some("2")),
        not_other,
    )
    .await;
    // Selector transitions: entering is an ADDED, leaving a DELETED.
    let label = |app: &str| Patch::Merge(json!({"metadata": {"labels": {"app": app}}}));
    secrets
        .patch("other", &PatchParams::default(), &label("t"))
        .await
        .expect("label");
    wait_for_meta(&mut rx, "enters selector", ("apply", "other", None), None).await;
    secrets
        .patch("other", &PatchParams::default(), &label("x"))
        .await
        .expect("unlabel");
    wait_for_meta(&mut rx, "leaves selector", ("delete", "other", None), None).await;
    secrets
        .delete("after", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for_meta(&mut rx, "deleted", ("delete", "after", Some("2")), None).await;
}

#[tokio::test]
async fn metadata_watcher_list_watch_sees_changes() {
    metadata_watcher_sees_changes(watcher::Config::default()).await;
}

#[tokio::test]
async fn metadata_watcher_streaming_list_sees_changes() {
    metadata_watcher_sees_changes(watcher::Config::default().streaming_lists()).await;
}

#[tokio::test]
async fn watcher_with_label_selector_sees_transitions() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut rx = spawn_watcher(cms.clone(), watcher::Config::default().labels("sel=yes"));
    wait_for(&mut rx, "init", |s| matches!(s, Seen::Init)).await;
    cms.create(&PostParams::default(), &cm("x", "1"))
        .await
        .expect("create");
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"sel": "yes"}}})),
    )
    .await
    .expect("label");
    wait_for(
        &mut rx,
        "enters selector",
        |s| matches!(s, Seen::Apply(n, _) if n == "x"),
    )
    .await;
    cms.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"sel": null}}})),
    )
    .await
    .expect("unlabel");
    wait_for(
        &mut rx,
        "leaves selector",
        |s| matches!(s, Seen::Delete(n) if n == "x"),
    )
    .await;
}

#[tokio::test]
async fn raw_watch_bookmarks_timeout_and_410() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &cm("a", "1"))
        .await
        .expect("create");
    let rv = first.resource_version().expect("rv");

    // Resume from a resourceVersion: history replays later changes, then bookmarks arrive.
    cms.create(&PostParams::default(), &cm("b", "1"))
        .await
        .expect("create");
    let wp = WatchParams::default().timeout(2);
    let mut stream = cms.watch(&wp, &rv).await.expect("watch").boxed();
    let ev = timeout(WAIT, stream.try_next())
        .await
        .expect("event")
        .expect("ok")
        .expect("some");
    assert!(
        matches!(&ev, WatchEvent::Added(o) if o.name_any() == "b"),
        "{ev:?}"
    );
    let mut bookmark = None;
    while let Some(ev) = timeout(WAIT, stream.try_next())
        .await
        .expect("bookmark in time")
        .expect("ok")
    {
        if let WatchEvent::Bookmark(b) = ev {
            bookmark = Some(b.metadata.resource_version);
            break;
        }
    }
    let bookmark: u64 = bookmark.expect("bookmark").parse().expect("numeric");
    assert!(bookmark > rv.parse::<u64>().expect("rv"));
    // timeoutSeconds ends the stream.
    let drained = timeout(WAIT, async {
        while stream.try_next().await.expect("ok").is_some() {}
    })
    .await;
    assert!(drained.is_ok(), "stream ended by timeoutSeconds");

    // After compaction, resuming from the old resourceVersion is 410 Expired.
    sim.compact();
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    match timeout(WAIT, stream.try_next()).await.expect("event") {
        Ok(Some(WatchEvent::Error(e))) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        Ok(other) => panic!("expected ERROR 410, got {other:?}"),
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 410),
        Err(e) => panic!("expected ERROR 410, got {e:?}"),
    }
}

#[tokio::test]
async fn watcher_recovers_from_expired_watch() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(&PostParams::default(), &cm("one", "1"))
        .await
        .expect("create");
    let mut rx = spawn_watcher(cms.clone(), watcher::Config::default());
    wait_for(&mut rx, "first init", |s| matches!(s, Seen::Init)).await;
    wait_for(
        &mut rx,
        "initial object",
        |s| matches!(s, Seen::Apply(n, _) if n == "one"),
    )
    .await;
    // Seeing a later change proves the watch request is open.
    cms.create(&PostParams::default(), &cm("marker", "m"))
        .await
        .expect("create");
    wait_for(
        &mut rx,
        "watch open",
        |s| matches!(s, Seen::Apply(n, _) if n == "marker"),
    )
    .await;

    // Every open watch gets ERROR 410 and history is gone: the watcher must re-list.
    sim.expire_watches();
    wait_for(&mut rx, "re-list after 410", |s| matches!(s, Seen::Init)).await;
    wait_for(
        &mut rx,
        "object re-listed",
        |s| matches!(s, Seen::Apply(n, _) if n == "one"),
    )
    .await;
    cms.create(&PostParams::default(), &cm("two", "2"))
        .await
        .expect("create");
    wait_for(
        &mut rx,
        "change after recovery",
        |s| matches!(s, Seen::Apply(n, v) if n == "two" && v == "2"),
    )
    .await;
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed")]
struct ReconcileError;

#[tokio::test]
async fn controller_reconciles_objects_created_changed_deleted_after_start() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Option<String>, bool)>();
    let ctx = Arc::new(tx);
    let controller = Controller::new(cms.clone(), watcher::Config::default())
        .run(
            |obj: Arc<ConfigMap>,
             ctx: Arc<mpsc::UnboundedSender<(String, Option<String>, bool)>>| async move {
                let v = obj
                    .data
                    .as_ref()
                    .and_then(|d: &BTreeMap<String, String>| d.get("v"))
                    .cloned();
                let deleting = obj.metadata.deletion_timestamp.is_some();
                ctx.send((obj.name_any(), v, deleting))
                    .map_err(|_| ReconcileError)?;
                Ok::<_, ReconcileError>(Action::await_change())
            },
            |_obj, _err, _ctx| Action::requeue(Duration::from_secs(1)),
            ctx,
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);

    cms.create(&PostParams::default(), &cm("c1", "a"))
        .await
        .expect("create");
    wait_for(&mut rx, "reconcile of created", |(n, v, _)| {
        n == "c1" && v.as_deref() == Some("a")
    })
    .await;
    cms.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "b"}})),
    )
    .await
    .expect("patch");
    wait_for(&mut rx, "reconcile of change", |(n, v, _)| {
        n == "c1" && v.as_deref() == Some("b")
    })
    .await;
    // A finalizer keeps the object so the deletion itself is reconciled.
    cms.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["t/hold"]}})),
    )
    .await
    .expect("add finalizer");
    cms.delete("c1", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(&mut rx, "reconcile of deletion", |(n, _, deleting)| {
        n == "c1" && *deleting
    })
    .await;
    cms.patch(
        "c1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    timeout(WAIT, async {
        while cms.get_opt("c1").await.expect("get").is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("object gone");
    task.abort();
}

#[tokio::test]
async fn controller_survives_injected_faults() {
    use kube_sim::hooks::{Fault, FaultRule};
    let (sim, client) = start().await;
    let status = |code| Fault::Status {
        code,
        retry_after_seconds: Some(1),
    };
    sim.inject_fault(FaultRule::new(Some("list"), Some("configmaps"), status(500)).times(1));
    sim.inject_fault(FaultRule::new(Some("watch"), Some("configmaps"), status(410)).times(1));
    sim.inject_fault(
        FaultRule::new(
            Some("watch"),
            Some("configmaps"),
            Fault::DropWatch(Duration::from_millis(300)),
        )
        .times(2),
    );
    sim.inject_fault(FaultRule::new(Some("get"), Some("configmaps"), status(429)).times(2));

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Option<String>)>();
    let ctx = Arc::new((tx, cms.clone()));
    type Ctx = (
        mpsc::UnboundedSender<(String, Option<String>)>,
        Api<ConfigMap>,
    );
    let controller = Controller::new(cms.clone(), watcher::Config::default())
        .run(
            |obj: Arc<ConfigMap>, ctx: Arc<Ctx>| async move {
                // A fresh read, which the injected 429s hit first.
                let fresh = ctx
                    .1
                    .get(&obj.name_any())
                    .await
                    .map_err(|_| ReconcileError)?;
                let v = fresh.data.as_ref().and_then(|d| d.get("v")).cloned();
                ctx.0
                    .send((fresh.name_any(), v))
                    .map_err(|_| ReconcileError)?;
                Ok::<_, ReconcileError>(Action::await_change())
            },
            |_obj, _err, _ctx| Action::requeue(Duration::from_millis(200)),
            ctx,
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);

    cms.create(&PostParams::default(), &cm("f1", "a"))
        .await
        .expect("create");
    wait_for(&mut rx, "reconcile despite faults", |(n, v)| {
        n == "f1" && v.as_deref() == Some("a")
    })
    .await;
    // API down for a moment: writes from the test wait until it is back.
    sim.api_down_for(Duration::from_millis(500));
    let created = timeout(WAIT, async {
        loop {
            match cms.create(&PostParams::default(), &cm("f2", "b")).await {
                Ok(_) => return,
                Err(kube::Error::Api(s)) if s.code == 503 => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(e) => panic!("unexpected error {e:?}"),
            }
        }
    })
    .await;
    assert!(created.is_ok(), "API came back");
    wait_for(&mut rx, "reconcile after API outage", |(n, v)| {
        n == "f2" && v.as_deref() == Some("b")
    })
    .await;
    task.abort();

    let counts = sim.request_counts();
    assert!(
        counts.get("list", "configmaps") >= 2,
        "re-listed after the 500/410: {counts:?}"
    );
    assert!(
        counts.get("watch", "configmaps") >= 3,
        "re-watched after drops: {counts:?}"
    );
    assert!(
        counts.get("get", "configmaps") >= 4,
        "retried after 429s: {counts:?}"
    );
}

#[tokio::test]
async fn deployment_controller_rolls_out() {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::core::v1::Pod;
    let config = Config {
        controllers: true,
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start");
    let client = sim.client().expect("client");
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "img:1"}]}}},
    }))
    .expect("deployment");
    deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create");

    // Wait until the rollout of `image` is complete the way `kubectl rollout status` decides it.
    let rolled_out = |image: &'static str| {
        let (deploys, pods) = (deploys.clone(), pods.clone());
        async move {
            timeout(WAIT, async {
                loop {
                    let d = deploys.get("web").await.expect("get");
                    let st = d.status.clone().unwrap_or_default();
                    let done = st.observed_generation == d.metadata.generation
                        && st.updated_replicas == Some(2)
                        && st.replicas == Some(2)
                        && st.available_replicas == Some(2);
                    let running: Vec<Pod> =
                        pods.list(&Default::default()).await.expect("pods").items;
                    let images_ok = running.len() == 2
                        && running.iter().all(|p| {
                            p.spec.as_ref().map(|s| s.containers[0].image.as_deref())
                                == Some(Some(image))
                        });
                    if done && images_ok {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("rollout of {image} did not complete"));
        }
    };
    rolled_out("img:1").await;
    deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img:2"}]}}}})),
        )
        .await
        .expect("new image");
    rolled_out("img:2").await;
    let sets = rss
        .list(&Default::default())
        .await
        .expect("replicasets")
        .items;
    assert_eq!(sets.len(), 2);
    let scaled: Vec<i32> = sets
        .iter()
        .map(|rs| rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1))
        .collect();
    assert!(scaled.contains(&0) && scaled.contains(&2), "{scaled:?}");
    let d = deploys.get("web").await.expect("get");
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    // Deleting the Deployment garbage-collects its ReplicaSets and Pods.
    deploys
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        rss.list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    assert!(
        pods.list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
}

/// A list read in pages is one snapshot at the first page's version, and a watch from the
/// list's version brings what changed meanwhile, also on the pages already read (a
/// reflector that lists in pages then watches misses nothing).
#[tokio::test]
async fn paged_list_then_watch_misses_no_change() {
    let (_sim, client) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(name, "1"))
            .await
            .expect("create");
    }
    let first = api
        .list(&kube::api::ListParams::default().limit(1))
        .await
        .expect("first page");
    assert_eq!(first.items[0].name_any(), "a");
    // Changed after the first page: "a" (read already) and "b" (not yet).
    for name in ["a", "b"] {
        api.replace(name, &PostParams::default(), &cm_at(&api, name, "2").await)
            .await
            .expect("update");
    }
    let mut token = first.metadata.continue_.clone();
    let mut seen = vec![("a".to_string(), value_of(&first.items[0]))];
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = api
            .list(&kube::api::ListParams::default().limit(1).continue_token(&t))
            .await
            .expect("page");
        assert_eq!(
            page.metadata.resource_version,
            first.metadata.resource_version
        );
        seen.extend(page.items.iter().map(|c| (c.name_any(), value_of(c))));
        token = page.metadata.continue_;
    }
    let v = |n: &str, x: &str| (n.to_string(), x.to_string());
    assert_eq!(seen, [v("a", "1"), v("b", "1"), v("c", "1")]);
    let rv = first.metadata.resource_version.expect("version");
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .expect("watch")
        .boxed();
    let mut changed = Vec::new();
    while changed.len() < 2 {
        let e = timeout(WAIT, events.try_next()).await.expect("in time");
        if let Some(WatchEvent::Modified(c)) = e.expect("event") {
            changed.push(v(&c.name_any(), &value_of(&c)));
        }
    }
    assert_eq!(changed, [v("a", "2"), v("b", "2")]);
}

fn value_of(c: &ConfigMap) -> String {
    c.data
        .as_ref()
        .and_then(|d| d.get("v"))
        .cloned()
        .unwrap_or_default()
}

/// `name` as stored now with data `v: value`, ready to replace it.
async fn cm_at(api: &Api<ConfigMap>, name: &str, value: &str) -> ConfigMap {
    let mut c = api.get(name).await.expect("get");
    c.data = Some(BTreeMap::from([("v".to_string(), value.to_string())]));
    c
}
