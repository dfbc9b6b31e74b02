//! What kube-sim creates at start on its own: what every API server has (the default
//! namespaces, the `kubernetes` Service), and the default ServiceCIDR only for a bare start or
//! when asked, never beside loaded objects that lack one.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::api::{Api, ListParams, PostParams};
use kube_sim::{Config, DEFAULT_SERVICE_RANGE, KubeSim};
use serde_json::json;

const WORKLOADS: &str = "\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: kube-system}
data: {k: v}
";

/// A Service before the ServiceCIDR in file order: the range is in place before any Service.
const WITH_RANGE: &str = "\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata: {name: services}
spec: {cidrs: [172.20.0.0/16, 'fd00:20::/108']}
";

struct TempDir(PathBuf);

impl TempDir {
    fn with_file(tag: &str, yaml: &str) -> (TempDir, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "kube-sim-seeding-{tag}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("cluster.yaml");
        std::fs::write(&file, yaml).expect("write manifest");
        (TempDir(dir), file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each ServiceCIDR as `name=cidr,cidr`, sorted by name.
async fn service_cidrs(client: &kube::Client) -> Vec<String> {
    let list = Api::<ServiceCIDR>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list ServiceCIDRs");
    list.items
        .iter()
        .map(|c| {
            let cidrs = c
                .spec
                .as_ref()
                .and_then(|s| s.cidrs.clone())
                .unwrap_or_default();
            format!(
                "{}={}",
                c.metadata.name.as_deref().unwrap_or(""),
                cidrs.join(",")
            )
        })
        .collect()
}

async fn cluster_ip(client: &kube::Client, name: &str) -> String {
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .expect("get Service");
    svc.spec.and_then(|s| s.cluster_ip).unwrap_or_default()
}

/// What every API server has, whatever was loaded.
async fn assert_builtins(client: &kube::Client) {
    let names: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list namespaces")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.iter().any(|n| n == ns), "{ns} in {names:?}");
    }
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service");
    assert_eq!(svc.metadata.labels.unwrap()["component"], "apiserver");
}

async fn started(config: Config) -> (kube_sim::KubeSimHandle, kube::Client) {
    let sim = KubeSim::start(config).await.expect("start kube-sim");
    let client = sim.client().expect("client");
    assert_builtins(&client).await;
    (sim, client)
}

#[tokio::test]
async fn a_bare_start_has_the_default_service_cidr() {
    assert_eq!(DEFAULT_SERVICE_RANGE, "10.96.0.0/12");
    let (_sim, client) = started(Config::default()).await;
    assert_eq!(service_cidrs(&client).await, ["kubernetes=10.96.0.0/12"]);
    assert_eq!(cluster_ip(&client, "kubernetes").await, "10.96.0.1");
}

#[tokio::test]
async fn loaded_objects_without_a_service_cidr_get_none() {
    let (_dir, file) = TempDir::with_file("none", WORKLOADS);
    let config = Config {
        load: vec![file],
        ..Config::default()
    };
    let (_sim, client) = started(config).await;
    assert_eq!(service_cidrs(&client).await, Vec::<String>::new());
    // ClusterIPs still come from the server's own range, which no object publishes.
    assert_eq!(cluster_ip(&client, "kubernetes").await, "10.96.0.1");
    assert_eq!(cluster_ip(&client, "web").await, "10.96.0.2");
}

#[tokio::test]
async fn a_loaded_service_cidr_is_the_only_one_and_services_take_its_addresses() {
    let (_dir, file) = TempDir::with_file("one", WITH_RANGE);
    let config = Config {
        load: vec![file],
        ..Config::default()
    };
    let (_sim, client) = started(config).await;
    assert_eq!(
        service_cidrs(&client).await,
        ["services=172.20.0.0/16,fd00:20::/108"]
    );
    assert_eq!(cluster_ip(&client, "kubernetes").await, "172.20.0.1");
    assert_eq!(cluster_ip(&client, "web").await, "172.20.0.2");
    let api = Api::<Service>::namespaced(client.clone(), "default");
    let later = serde_json::from_value(json!({
        "metadata": {"name": "later"}, "spec": {"ports": [{"port": 80}]}
    }))
    .expect("Service");
    api.create(&PostParams::default(), &later)
        .await
        .expect("create");
    assert_eq!(cluster_ip(&client, "later").await, "172.20.0.3");
}

#[tokio::test]
async fn the_caller_decides_explicitly() {
    // Asked for: seeded beside loaded objects, with or without their own ServiceCIDR.
    let (_dir, file) = TempDir::with_file("yes", WORKLOADS);
    let config = Config {
        load: vec![file],
        seed_service_cidr: Some(true),
        ..Config::default()
    };
    let (_sim, client) = started(config).await;
    assert_eq!(service_cidrs(&client).await, ["kubernetes=10.96.0.0/12"]);
    let (_dir, file) = TempDir::with_file("both", WITH_RANGE);
    let config = Config {
        load: vec![file],
        seed_service_cidr: Some(true),
        ..Config::default()
    };
    let (_sim, client) = started(config).await;
    assert_eq!(
        service_cidrs(&client).await,
        [
            "kubernetes=10.96.0.0/12",
            "services=172.20.0.0/16,fd00:20::/108"
        ]
    );
    assert_eq!(cluster_ip(&client, "kubernetes").await, "10.96.0.1");

    // Refused: a bare start without one.
    let config = Config {
        seed_service_cidr: Some(false),
        ..Config::default()
    };
    let (_sim, client) = started(config).await;
    assert_eq!(service_cidrs(&client).await, Vec::<String>::new());
}

/// The binary, killed when dropped.
struct Binary {
    child: Child,
    kubeconfig: PathBuf,
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_binary(dir: &Path, args: &[&str]) -> Binary {
    let kubeconfig = dir.join(format!("kubeconfig-{}", uuid::Uuid::new_v4()));
    let child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kube-sim");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubeconfig.exists() {
        assert!(Instant::now() < deadline, "kube-sim wrote no kubeconfig");
        std::thread::sleep(Duration::from_millis(20));
    }
    Binary { child, kubeconfig }
}

async fn client_of(b: &Binary) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(&b.kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("client config");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn the_binary_flag_both_ways() {
    let (dir, file) = TempDir::with_file("binary", WORKLOADS);
    let file = file.to_str().expect("utf-8 path");
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--load", file], &[]),
        (
            &["--load", file, "--seed-service-cidr"],
            &["kubernetes=10.96.0.0/12"],
        ),
        (&[], &["kubernetes=10.96.0.0/12"]),
        (&["--seed-service-cidr=false"], &[]),
    ];
    for (args, expected) in cases {
        let server = start_binary(&dir.0, args);
        let client = client_of(&server).await;
        assert_eq!(service_cidrs(&client).await, expected, "{args:?}");
    }
    let refused = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args([
            "--kubeconfig",
            "/nonexistent/kc",
            "--seed-service-cidr=maybe",
        ])
        .output()
        .expect("run kube-sim");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--seed-service-cidr"),
        "{refused:?}"
    );
}
