//! Real kubectl (plain, 1.27 and 1.33 when installed) against the `kube-sim` binary.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    kubeconfig: PathBuf,
    _dir: TempDir,
}

impl Drop for Server {
    /// SIGTERM first: kube-sim then kills the processes it runs and removes their files.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child's pid; no memory is involved.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "kube-sim-{tag}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&p).expect("temp dir");
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Start the binary the way tooling does and wait for the kubeconfig it writes when ready.
fn start_binary(tag: &str, load: &[PathBuf], extra: &[&str]) -> Server {
    let dir = TempDir::new(tag);
    let kubeconfig = dir.0.join("kubeconfig");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-sim"));
    cmd.arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for l in load {
        cmd.arg("--load").arg(l);
    }
    cmd.args(extra);
    let child = cmd.spawn().expect("spawn kube-sim");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubeconfig.exists() {
        assert!(
            Instant::now() < deadline,
            "kube-sim did not write its kubeconfig"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        child,
        kubeconfig,
        _dir: dir,
    }
}

/// The kubectl binaries to test: plain `kubectl` and the versioned ones beside its real path.
/// Plain `kubectl` plus the oldest and newest installed versions beside its real path
/// (google-cloud-cli ships `kubectl.1.NN`). A missing one fails the test: the fidelity proof
/// must not silently shrink.
fn kubectls() -> Vec<PathBuf> {
    let out = Command::new("sh")
        .arg("-c")
        .arg("readlink -f \"$(command -v kubectl)\"")
        .output()
        .expect("run sh");
    let real = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        real.is_file(),
        "kubectl is not installed; these tests drive the real kubectl"
    );
    let dir = real.parent().expect("kubectl has a directory");
    let mut v = vec![PathBuf::from("kubectl")];
    for name in ["kubectl.1.27", "kubectl.1.33"] {
        let p = dir.join(name);
        assert!(
            p.is_file(),
            "{} is missing (google-cloud-cli ships it)",
            p.display()
        );
        v.push(p);
    }
    v
}

struct Kubectl<'a> {
    bin: &'a Path,
    kubeconfig: &'a Path,
}

impl Kubectl<'_> {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut cmd = Command::new(self.bin);
        cmd.arg("--kubeconfig").arg(self.kubeconfig).args(args);
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kubectl");
        if let Some(input) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        }
        let out = child.wait_with_output().expect("kubectl output");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Run and require success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_in(args, None)
    }

    fn ok_in(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.run(args, stdin);
        assert!(
            ok,
            "{} {args:?} failed:\nstdout: {out}\nstderr: {err}",
            self.bin.display()
        );
        out
    }
}

fn scenario(k: &Kubectl, ns: &str) {
    let root = repo_root();
    // Register the CRDs through kubectl, wait for established, apply the examples.
    let crds = root.join("crds");
    let out = k.ok(&["apply", "-f", crds.to_str().expect("utf8 path")]);
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/egressproxypolicies.egressproxy.io"
        ),
        "{out}"
    );
    let out = k.ok(&[
        "wait",
        "--for",
        "condition=established",
        "crd/egressproxypolicies.egressproxy.io",
        "--timeout=30s",
    ]);
    assert!(out.contains("condition met"), "{out}");
    let examples = root.join("examples");
    let out = k.ok(&["apply", "-f", examples.to_str().expect("utf8 path")]);
    assert!(
        out.contains("egressproxypolicy.egressproxy.io/outbound"),
        "{out}"
    );

    let manifest = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}, labels: {{app: web}}}}\n\
         spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n        env: [{{name: A, value: '1'}}]\n"
    );
    let out = k.ok_in(&["apply", "-f", "-"], Some(&manifest));
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = k.ok_in(&["apply", "-f", "-"], Some(&manifest));
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");

    // get: yaml, label selector, field selector, all namespaces.
    let out = k.ok(&["get", "deploy", "web", "-n", ns, "-o", "yaml"]);
    assert!(
        out.contains("kind: Deployment")
            && out.contains("uid:")
            && out.contains("resourceVersion:"),
        "{out}"
    );
    let out = k.ok(&["get", "deploy", "-A", "-l", "app=web", "-o", "name"]);
    assert!(out.contains("deployment.apps/web"), "{out}");
    let out = k.ok(&[
        "get",
        "deploy",
        "-n",
        ns,
        "-l",
        "app notin (web)",
        "-o",
        "name",
    ]);
    assert!(out.trim().is_empty(), "{out}");
    let out = k.ok(&[
        "get",
        "ns",
        "--field-selector",
        &format!("metadata.name={ns}"),
        "-o",
        "name",
    ]);
    assert_eq!(out.trim(), format!("namespace/{ns}"));

    // label, annotate, and the three patch types.
    k.ok(&["label", "deploy", "web", "-n", ns, "tier=front"]);
    k.ok(&["annotate", "deploy", "web", "-n", ns, "note=hello"]);
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}"#,
    ]);
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    k.ok(&[
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/j","value":"1"}]"#,
    ]);
    let out = k.ok(&[
        "get", "deploy", "web", "-n", ns, "-o",
        "jsonpath={.metadata.labels.tier} {.metadata.annotations.note} {.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].env[0].name} {.metadata.labels.j} {.metadata.generation}",
    ]);
    assert_eq!(out.trim(), "front hello 3 nginx:2 A 1 3");

    // Server-side Table output: built-in columns and the CRD's printer columns.
    let out = k.ok(&["get", "deploy", "web", "-n", ns, "-o", "wide"]);
    let header = out.lines().next().unwrap_or_default();
    assert!(
        header.contains("READY") && header.contains("UP-TO-DATE") && header.contains("IMAGES"),
        "{out}"
    );
    assert!(out.contains("nginx:2"), "{out}");
    let out = k.ok(&["get", "egressproxypolicies", "-A"]);
    let header = out.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("NAMESPACE") && header.contains("READY") && header.contains("AGE"),
        "{out}"
    );
    assert!(out.contains("outbound"), "{out}");

    // diff shows a pending change without applying it (exit code 1 = differences).
    let changed = manifest.replace("nginx:1", "nginx:7");
    let (ok, out, _) = k.run(&["diff", "-f", "-"], Some(&changed));
    assert!(!ok && out.contains("nginx:7"), "{out}");
    let out = k.ok(&[
        "get",
        "deploy",
        "web",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(out.trim(), "nginx:2");

    // explain reads the CRD's schema from /openapi/v3.
    let out = k.ok(&["explain", "egressproxypolicy.spec"]);
    assert!(
        out.contains("KIND:") && out.contains("EgressProxyPolicy") && out.contains("FIELDS:"),
        "{out}"
    );
    // ... and the built-in kinds' schemas, generated from k8s-openapi's types.
    let out = k.ok(&["explain", "deployment.spec.template"]);
    assert!(
        out.contains("FIELD: template <PodTemplateSpec>")
            && out.contains("Template describes the pods that will be created"),
        "{out}"
    );
    let out = k.ok(&["explain", "pods.spec.containers.env.valueFrom.secretKeyRef"]);
    assert!(
        out.contains("<SecretKeySelector>") && out.contains("FIELDS:") && out.contains("key"),
        "{out}"
    );

    // An events.k8s.io Event is served as a core Event too: describe lists it (it selects
    // Events by the object's uid as well).
    let uid = k.ok(&[
        "get",
        "deployment",
        "web",
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let event = format!(
        "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata: {{name: web.seen, namespace: {ns}}}\n\
         regarding: {{apiVersion: apps/v1, kind: Deployment, name: web, namespace: {ns}, uid: {uid}}}\n\
         reason: Inspected\nnote: looked at by a controller\ntype: Normal\naction: Inspect\n\
         reportingController: example.com/inspector\nreportingInstance: inspector-1\n\
         eventTime: \"2026-12-03T10:00:00.000000Z\"\n"
    );
    k.ok_in(&["apply", "-f", "-"], Some(&event));
    let out = k.ok(&["describe", "deployment", "web", "-n", ns]);
    assert!(
        out.contains("Inspected") && out.contains("looked at by a controller"),
        "{out}"
    );
    let out = k.ok(&["get", "events.v1.", "-n", ns, "-o", "name"]);
    assert!(out.contains("event/web.seen"), "{out}");

    // Server-side apply: ownership, conflicts with other writers, --force-conflicts.
    let out = k.ok(&[
        "apply",
        "--server-side",
        "-f",
        examples.to_str().expect("utf8 path"),
    ]);
    assert!(out.contains("serverside-applied"), "{out}");
    let ssa = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa, namespace: {ns}}}\ndata: {{a: '1'}}\n"
    );
    k.ok_in(&["apply", "--server-side", "-f", "-"], Some(&ssa));
    k.ok(&[
        "patch",
        "cm",
        "ssa",
        "-n",
        ns,
        "--type",
        "merge",
        "-p",
        r#"{"data":{"a":"2"}}"#,
    ]);
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", "-"], Some(&ssa));
    assert!(!ok && err.contains("conflict"), "{err}");
    k.ok_in(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&ssa),
    );
    let out = k.ok(&["get", "cm", "ssa", "-n", ns, "-o", "jsonpath={.data.a}"]);
    assert_eq!(out.trim(), "1");

    // Delete with a finalizer held, then released.
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {ns}, finalizers: [example.com/hold]}}\n"
    );
    k.ok_in(&["apply", "-f", "-"], Some(&cm));
    k.ok(&["delete", "cm", "held", "-n", ns, "--wait=false"]);
    let out = k.ok(&[
        "get",
        "cm",
        "held",
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    assert!(!out.trim().is_empty(), "deletionTimestamp set");
    k.ok(&[
        "patch",
        "cm",
        "held",
        "-n",
        ns,
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let (ok, _, err) = k.run(&["get", "cm", "held", "-n", ns], None);
    assert!(!ok && err.contains("NotFound"), "{err}");

    // Deleting the namespace removes what is in it.
    k.ok(&["delete", "ns", ns, "--timeout=30s"]);
    let (ok, _, err) = k.run(&["get", "deploy", "web", "-n", ns], None);
    assert!(!ok && err.contains("NotFound"), "{err}");
}

#[test]
fn kubectl_versions_drive_the_binary() {
    let bins = kubectls();
    let server = start_binary("kubectl", &[], &[]);
    for (i, bin) in bins.iter().enumerate() {
        let k = Kubectl {
            bin,
            kubeconfig: &server.kubeconfig,
        };
        let out = k.ok(&["version", "--client"]);
        eprintln!(
            "scenario with {}: {}",
            bin.display(),
            out.lines().next().unwrap_or_default()
        );
        scenario(&k, &format!("conf-{i}"));
    }
}

#[test]
fn kubectl_watch_sees_a_change() {
    let server = start_binary("watch", &[], &[]);
    for (i, bin) in kubectls().iter().enumerate() {
        watch_sees_a_change(bin, &server.kubeconfig, &format!("w{i}"));
    }
}

/// `kubectl get -w` prints the existing object, then one created afterwards.
fn watch_sees_a_change(bin: &Path, kubeconfig: &Path, prefix: &str) {
    let k = Kubectl { bin, kubeconfig };
    let first_cm = format!("{prefix}-first");
    let later_cm = format!("{prefix}-later");
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {first_cm}}}\n"
        )),
    );
    let mut watch = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "cm", "-w", "-o", "name", "--request-timeout=60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl -w");
    let stdout = watch.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // The initial listing arrives first, then the change made afterwards.
    let mut initial = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        initial.push(line);
    }
    assert!(
        initial.contains(&format!("configmap/{first_cm}")),
        "{}: initial listing {initial:?}",
        bin.display()
    );
    k.ok_in(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {later_cm}}}\n"
        )),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = false;
    while Instant::now() < deadline && !seen {
        if let Ok(line) = rx.recv_timeout(Duration::from_secs(1)) {
            seen = line == format!("configmap/{later_cm}");
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        seen,
        "{}: kubectl get -w printed the new object",
        bin.display()
    );
}

#[test]
fn kubectl_rollouts_with_simulated_controllers() {
    let bins = kubectls();
    let server = start_binary("rollout", &[], &["--controllers"]);
    for (i, bin) in bins.iter().enumerate() {
        let k = Kubectl {
            bin,
            kubeconfig: &server.kubeconfig,
        };
        let ns = format!("roll-{i}");
        let manifest = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\n\
             spec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n"
        );
        k.ok_in(&["apply", "-f", "-"], Some(&manifest));
        let status = [
            "rollout",
            "status",
            "deploy/web",
            "-n",
            &ns,
            "--timeout=30s",
        ];
        assert!(k.ok(&status).contains("successfully rolled out"));
        k.ok(&["set", "image", "deploy/web", "web=nginx:2", "-n", &ns]);
        assert!(k.ok(&status).contains("successfully rolled out"));
        let image = [
            "get",
            "deploy",
            "web",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ];
        assert_eq!(k.ok(&image).trim(), "nginx:2");
        k.ok(&["rollout", "undo", "deploy/web", "-n", &ns]);
        assert!(k.ok(&status).contains("successfully rolled out"));
        assert_eq!(k.ok(&image).trim(), "nginx:1");
        k.ok(&["rollout", "restart", "deploy/web", "-n", &ns]);
        assert!(k.ok(&status).contains("successfully rolled out"));
        // Two ReplicaSets hold templates nginx:1 (undo reused the first) plus the restart's.
        let rs = k.ok(&["get", "rs", "-n", &ns, "-o", "name"]);
        assert_eq!(rs.lines().count(), 3, "{rs}");
        if i == 0 {
            // A rollout can be made to hang or fail on purpose, then released.
            k.ok(&[
                "annotate",
                "deploy",
                "web",
                "-n",
                &ns,
                "kube-sim.io/rollout=hang",
            ]);
            k.ok(&["set", "image", "deploy/web", "web=nginx:3", "-n", &ns]);
            let (ok, out, _) = k.run(
                &["rollout", "status", "deploy/web", "-n", &ns, "--timeout=2s"],
                None,
            );
            // maxSurge 1, maxUnavailable 0: one new Pod that never gets Ready, two old ones.
            assert!(
                !ok && out.contains("1 out of 2 new replicas have been updated"),
                "{out}"
            );
            k.ok(&[
                "annotate",
                "deploy",
                "web",
                "-n",
                &ns,
                "kube-sim.io/rollout=fail",
                "--overwrite",
            ]);
            let (ok, _, err) = k.run(
                &[
                    "rollout",
                    "status",
                    "deploy/web",
                    "-n",
                    &ns,
                    "--timeout=30s",
                ],
                None,
            );
            assert!(
                !ok && err.contains("exceeded its progress deadline"),
                "{err}"
            );
            k.ok(&[
                "annotate",
                "deploy",
                "web",
                "-n",
                &ns,
                "kube-sim.io/rollout-",
            ]);
            assert!(k.ok(&status).contains("successfully rolled out"));
        }
        // StatefulSet and DaemonSet rollouts.
        let workloads = format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db, namespace: {ns}}}\n\
             spec:\n  replicas: 2\n  serviceName: db\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    metadata: {{labels: {{app: db}}}}\n    spec: {{containers: [{{name: db, image: db:1}}]}}\n---\n\
             apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: agent, namespace: {ns}}}\n\
             spec:\n  selector: {{matchLabels: {{app: agent}}}}\n  template:\n    metadata: {{labels: {{app: agent}}}}\n    spec: {{containers: [{{name: agent, image: agent:1}}]}}\n"
        );
        k.ok_in(&["apply", "-f", "-"], Some(&workloads));
        k.ok(&["set", "image", "sts/db", "db=db:2", "-n", &ns]);
        let out = k.ok(&["rollout", "status", "sts/db", "-n", &ns, "--timeout=30s"]);
        assert!(out.contains("roll out complete"), "{out}");
        let out = k.ok(&[
            "get",
            "pod",
            "db-1",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ]);
        assert_eq!(out.trim(), "db:2");
        k.ok(&["rollout", "restart", "ds/agent", "-n", &ns]);
        let out = k.ok(&["rollout", "status", "ds/agent", "-n", &ns, "--timeout=30s"]);
        assert!(out.contains("successfully rolled out"), "{out}");
        let pods = k.ok(&[
            "get",
            "pods",
            "-n",
            &ns,
            "--field-selector",
            "status.phase=Running",
            "-o",
            "name",
        ]);
        assert_eq!(pods.lines().count(), 5, "2 web, 2 db, 1 agent: {pods}");
    }
}

/// `kubectl rollout status` follows a paced rollout step by step, and sees old Pods
/// Terminating for their grace period.
#[test]
fn kubectl_follows_a_paced_rollout() {
    let bins = kubectls();
    let server = start_binary("paced", &[], &["--controllers", "--grace-scale", "1"]);
    for (i, bin) in bins.iter().enumerate() {
        let k = Kubectl {
            bin,
            kubeconfig: &server.kubeconfig,
        };
        let ns = format!("paced-{i}");
        let manifest = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\n\
             metadata: {{name: web, namespace: {ns}, annotations: {{kube-sim.io/ready-after: 1s}}}}\n\
             spec:\n  replicas: 3\n  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}\n\
             \x20 selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n\
             \x20   spec:\n      terminationGracePeriodSeconds: 30\n      containers:\n      - name: web\n        image: nginx:1\n"
        );
        k.ok_in(&["apply", "-f", "-"], Some(&manifest));
        let status = [
            "rollout",
            "status",
            "deploy/web",
            "-n",
            &ns,
            "--timeout=60s",
        ];
        assert!(k.ok(&status).contains("successfully rolled out"));
        k.ok(&["set", "image", "deploy/web", "web=nginx:2", "-n", &ns]);
        let out = k.ok(&status);
        let steps = [
            "1 out of 3 new replicas have been updated",
            "2 out of 3 new replicas have been updated",
            "successfully rolled out",
        ];
        let mut at = 0;
        for step in steps {
            let found = out[at..].find(step);
            assert!(
                found.is_some(),
                "{}: no {step:?} in order:\n{out}",
                bin.display()
            );
            at += found.unwrap_or_default();
        }
        // The three old Pods are still Terminating (30 s grace period) after the rollout.
        let pods = k.ok(&["get", "pods", "-n", &ns, "-o", "wide"]);
        let terminating = pods.lines().filter(|l| l.contains("Terminating")).count();
        assert_eq!(terminating, 3, "{}:\n{pods}", bin.display());
    }
}

/// `kubectl auth can-i --as` (protobuf SelfSubjectAccessReviews and SelfSubjectRulesReviews
/// through impersonation) proves what the shipped RBAC lets the operator's ServiceAccount do,
/// and kubectl's typed `create` commands (protobuf bodies) work.
#[test]
fn kubectl_auth_can_i_checks_the_shipped_rbac() {
    let root = repo_root();
    let fixtures = TempDir::new("can-i-fixtures");
    std::fs::write(
        fixtures.0.join("namespaces.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: platform}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n",
    )
    .expect("fixtures");
    let server = start_binary(
        "can-i",
        &[root.join("crds"), fixtures.0.clone(), root.join("deploy")],
        &[],
    );
    let sa = "system:serviceaccount:egress-proxy-system:egress-proxy-operator";
    for bin in kubectls() {
        let k = Kubectl {
            bin: &bin,
            kubeconfig: &server.kubeconfig,
        };
        let can = |args: &[&str]| {
            let mut all = vec!["auth", "can-i"];
            all.extend_from_slice(args);
            all.extend_from_slice(&["--as", sa]);
            let (_, out, err) = k.run(&all, None);
            match out.trim() {
                "yes" => true,
                "no" => false,
                _ => panic!("{}: can-i {args:?}: {out} {err}", bin.display()),
            }
        };
        assert!(!can(&["list", "secrets", "-A"]), "no Secret cluster-wide");
        assert!(
            can(&["list", "secrets", "-n", "team-a"]),
            "opted-in namespace"
        );
        assert!(!can(&["list", "secrets", "-n", "default"]));
        assert!(can(&["patch", "deployments.apps", "-n", "team-a"]));
        assert!(!can(&["update", "deployments.apps", "-n", "team-a"]));
        assert!(
            can(&["get", "secret/corp-proxy", "-n", "platform"]),
            "granted"
        );
        assert!(!can(&["get", "secret/other", "-n", "platform"]));
        assert!(can(&["list", "egressproxypolicies.egressproxy.io", "-A"]));
        let list = k.ok(&["auth", "can-i", "--list", "-n", "team-a", "--as", sa]);
        let row = |r: &str| list.lines().any(|l| l.split_whitespace().next() == Some(r));
        assert!(row("secrets") && row("deployments.apps"), "{list}");
        // Typed create commands send protobuf bodies.
        let name = format!(
            "creds-{}",
            bin.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("k")
                .replace('.', "-")
        );
        k.ok(&[
            "create",
            "secret",
            "generic",
            &name,
            "-n",
            "team-a",
            "--from-literal=password=hunter2",
        ]);
        let out = k.ok(&[
            "get",
            "secret",
            &name,
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.password}",
        ]);
        assert_eq!(out.trim(), "aHVudGVyMg==");
        k.ok(&[
            "create",
            "configmap",
            &name,
            "-n",
            "team-a",
            "--from-literal=a=b",
        ]);
        k.ok(&["create", "namespace", &name]);
        let token = k.ok(&[
            "create",
            "token",
            "egress-proxy-operator",
            "-n",
            "egress-proxy-system",
        ]);
        assert!(token.trim().len() > 20, "{token}");
        // Workloads and RBAC objects, with the fields the generators set.
        let ns = ["-n", "team-a"];
        // The namespace goes first: a job's command follows `--`.
        let create = |args: &[&str]| k.ok(&[&["create"], &ns[..], args].concat());
        create(&[
            "deployment",
            &name,
            "--image=nginx:1",
            "--port=8080",
            "--replicas=2",
        ]);
        let get = |kind: &str, path: &str| {
            let jsonpath = format!("jsonpath={path}");
            k.ok(&["get", kind, &name, "-n", "team-a", "-o", &jsonpath])
        };
        let d = get(
            "deployment",
            "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort} {.spec.selector.matchLabels.app}",
        );
        assert_eq!(d.trim(), format!("2 nginx:1 8080 {name}"));
        create(&["job", &name, "--image=busybox:1", "--", "echo", "hi"]);
        let j = get("job", "{.spec.template.spec.containers[0].command}");
        assert_eq!(j.trim(), r#"["echo","hi"]"#);
        create(&["role", &name, "--verb=get,list", "--resource=pods"]);
        assert_eq!(get("role", "{.rules[0].verbs}").trim(), r#"["get","list"]"#);
        create(&[
            "rolebinding",
            &name,
            &format!("--role={name}"),
            "--user=alice",
        ]);
        assert_eq!(
            get("rolebinding", "{.roleRef.name} {.subjects[0].name}").trim(),
            format!("{name} alice")
        );
        k.ok(&[
            "create",
            "clusterrole",
            &name,
            "--verb=list",
            "--resource=nodes",
        ]);
        k.ok(&[
            "create",
            "clusterrolebinding",
            &name,
            &format!("--clusterrole={name}"),
            "--group=devs",
        ]);
        let out = k.ok(&[
            "auth",
            "can-i",
            "list",
            "nodes",
            "--as",
            "bob",
            "--as-group",
            "devs",
        ]);
        assert_eq!(out.trim(), "yes", "the created binding is used");
    }
}

#[test]
fn kubectl_runs_jobs_with_mapped_images() {
    let bins = kubectls();
    let server = start_binary(
        "jobs",
        &[],
        &["--controllers", "--run-image", "shell:1=/bin/sh"],
    );
    for (i, bin) in bins.iter().enumerate() {
        let k = Kubectl {
            bin,
            kubeconfig: &server.kubeconfig,
        };
        let ns = format!("jobs-{i}");
        let manifest = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n\
             apiVersion: batch/v1\nkind: Job\nmetadata: {{name: probe, namespace: {ns}}}\n\
             spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: shell:1\n        args: ['-c', 'echo probing; echo ok > /dev/termination-log']\n"
        );
        k.ok_in(&["apply", "-f", "-"], Some(&manifest));
        let out = k.ok(&[
            "wait",
            "--for=condition=complete",
            "job/probe",
            "-n",
            &ns,
            "--timeout=60s",
        ]);
        assert!(out.contains("condition met"), "{out}");
        let out = k.ok(&["get", "jobs", "-n", &ns]);
        let mut lines = out.lines();
        let header: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(
            header,
            ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
            "{out}"
        );
        let row: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(row[..3], ["probe", "Complete", "1/1"], "{out}");
        let out = k.ok(&["logs", "job/probe", "-n", &ns]);
        assert_eq!(out, "probing\n");
        let out = k.ok(&["get", "pods", "-n", &ns, "-l", "job-name=probe"]);
        assert!(out.contains("Completed"), "{out}");
        let message = k.ok(&[
            "get",
            "pods",
            "-n",
            &ns,
            "-l",
            "batch.kubernetes.io/job-name=probe",
            "-o",
            "jsonpath={.items[0].status.containerStatuses[0].state.terminated.message}",
        ]);
        assert_eq!(message, "ok\n");
    }
}
