//! Realistic fixtures for memory and scale benches (the operator's and kube-sim's own): real
//! workloads carry several containers with probes, resources, dozens of variables and
//! mounts, about 6 KB of JSON each.

use std::fmt::Write as _;

/// One realistic container: image, ports, probes, resources, 30 variables, a mount.
fn realistic_container(name: &str) -> String {
    let mut env = String::new();
    for i in 0..30 {
        let _ = write!(
            env,
            "{{name: SETTING_{i}, value: \"value-{i}-abcdefghijklmnopqrstuvwxyz\"}}, "
        );
    }
    format!(
        "{{name: {name}, image: \"registry.internal/{name}:1.24.3\", command: [/bin/server], \
         args: [--port=8080, --log-format=json], ports: [{{containerPort: 8080, name: http}}], \
         env: [{env}], \
         livenessProbe: {{httpGet: {{path: /healthz, port: 8080}}, periodSeconds: 10, failureThreshold: 3}}, \
         readinessProbe: {{httpGet: {{path: /ready, port: 8080}}, periodSeconds: 5}}, \
         resources: {{requests: {{cpu: 100m, memory: 128Mi}}, limits: {{memory: 256Mi}}}}, \
         volumeMounts: [{{name: config, mountPath: /etc/{name}}}, {{name: cache, mountPath: /var/cache/{name}}}]}}"
    )
}

/// The kind and the kind-specific spec fields of realistic workload `i` of 100: one in ten
/// a StatefulSet or a DaemonSet, selected ones included.
pub fn realistic_kind(i: usize) -> (&'static str, String) {
    match i % 10 {
        8 => (
            "StatefulSet",
            format!("  replicas: 0\n  serviceName: app-{i}\n"),
        ),
        9 => ("DaemonSet", String::new()),
        _ => ("Deployment", "  replicas: 0\n".into()),
    }
}

/// The workloads, Secrets and ConfigMaps of realistic namespace `n` (`team-NNN`, which the
/// caller creates): 100 workloads (80 Deployments and 10 StatefulSets with 0 replicas, 10
/// DaemonSets; the first ten labelled `egress: proxied`), a Secret each and a ConfigMap per
/// five.
pub fn realistic_namespace(n: usize) -> String {
    let containers = ["api", "sidecar", "agent"]
        .map(realistic_container)
        .join(", ");
    let ns = format!("team-{n:03}");
    let mut y = String::new();
    for i in 0..100 {
        let label = if i < 10 { "egress: proxied, " } else { "" };
        let (kind, fields) = realistic_kind(i);
        let _ = write!(
            y,
            "---\napiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: app-{i}, namespace: {ns}, labels: {{{label}app: app-{i}, team: {ns}}}, annotations: {{owner: \"platform@example.com\"}}}}\n\
             spec:\n{fields}  selector: {{matchLabels: {{app: app-{i}}}}}\n  template:\n    metadata: {{labels: {{app: app-{i}, version: v1}}, annotations: {{prometheus.io/scrape: \"true\"}}}}\n    spec:\n      serviceAccountName: app-{i}\n      volumes: [{{name: config, configMap: {{name: config-{}}}}}, {{name: cache, emptyDir: {{}}}}]\n      containers: [{containers}]\n",
            i / 5
        );
        let _ = write!(
            y,
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: secret-{i}, namespace: {ns}}}\nstringData: {{token: \"{}\"}}\n",
            "x".repeat(256)
        );
    }
    for i in 0..20 {
        let _ = write!(
            y,
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: config-{i}, namespace: {ns}}}\ndata: {{app.yaml: \"{}\"}}\n",
            "k: v\\n".repeat(100)
        );
    }
    y
}
