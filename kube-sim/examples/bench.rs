//! Rough figures (not a timed test): `cargo run --release -p kube-sim --example bench`.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n_objects: usize = std::env::var("BENCH_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let sim = kube_sim::KubeSim::start(kube_sim::Config::default()).await?;
    let client = sim.client()?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let t = Instant::now();
    stream::iter(0..n_objects)
        .map(|i| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}"), "labels": {"i": (i % 10).to_string()}}, "data": {"k": "v"}}))?;
                cms.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    println!(
        "create {n_objects} ConfigMaps over HTTP: {:?} ({:.0}/s), RSS {:.0} MiB",
        t.elapsed(),
        n_objects as f64 / t.elapsed().as_secs_f64(),
        rss_mib()
    );

    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
    for i in 0..10_000 {
        let d: Deployment = serde_json::from_value(
            json!({"metadata": {"name": format!("d-{i}")}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        )?;
        deploys.create(&PostParams::default(), &d).await?;
    }
    let t = Instant::now();
    let list = deploys.list(&ListParams::default()).await?;
    println!(
        "LIST of {} Deployments: {:?}",
        list.items.len(),
        t.elapsed()
    );
    let t = Instant::now();
    let sel = cms.list(&ListParams::default().labels("i=3")).await?;
    println!(
        "LIST {} of {n_objects} ConfigMaps by label: {:?}",
        sel.items.len(),
        t.elapsed()
    );

    // 20 watchers each receiving 10,000 events.
    let rv = sim.resource_version().to_string();
    let mut watchers = Vec::new();
    for _ in 0..20 {
        let cms = cms.clone();
        let rv = rv.clone();
        watchers.push(tokio::spawn(async move {
            let mut s = cms
                .watch(&WatchParams::default().timeout(290), &rv)
                .await?
                .boxed();
            let mut n = 0;
            while let Some(ev) = s.try_next().await? {
                if matches!(ev, WatchEvent::Modified(_)) {
                    n += 1;
                    if n == 10_000 {
                        break;
                    }
                }
            }
            anyhow::Ok(n)
        }));
    }
    let t = Instant::now();
    stream::iter(0..10_000)
        .map(|i| {
            let cms = cms.clone();
            async move {
                cms.patch(
                    &format!("cm-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"k": "w"}})),
                )
                .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    println!(
        "10,000 merge patches: {:?} ({:.0}/s)",
        t.elapsed(),
        10_000.0 / t.elapsed().as_secs_f64()
    );
    let mut total = 0;
    for w in watchers {
        total += w.await??;
    }
    println!(
        "20 watchers received {total} events in {:?}; RSS {:.0} MiB",
        t.elapsed(),
        rss_mib()
    );
    Ok(())
}
