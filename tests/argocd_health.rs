//! `deploy/argocd/health.lua`, the Argo CD health check for EgressProxyPolicy, run by Lua 5.1
//! (the language of Argo CD's interpreter) on the statuses the operator writes.

use egress_proxy_tests::repo_root;
use serde_json::{Value, json};

/// A JSON value as a Lua table constructor.
fn lua(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!("{{{}}}", a.iter().map(lua).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => {
            let fields: Vec<String> = o
                .iter()
                .map(|(k, v)| format!("[{k:?}] = {}", lua(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
    }
}

/// Runs the health check on a policy with `generation` and `status`: (status, message).
fn health(generation: i64, status: Option<Value>) -> (String, String) {
    let mut policy = json!({"apiVersion": "egressproxy.io/v1alpha1", "kind": "EgressProxyPolicy",
        "metadata": {"name": "outbound", "namespace": "team-a", "generation": generation}});
    if let Some(s) = status {
        policy["status"] = s;
    }
    let script = repo_root().join("deploy/argocd/health.lua");
    let program = format!(
        "obj = {}\nlocal hs = assert(loadfile({:?}))()\nio.write(hs.status, \"\\n\", hs.message)",
        lua(&policy),
        script.display().to_string()
    );
    let out = std::process::Command::new("lua5.1")
        .args(["-e", &program])
        .output()
        .expect("lua5.1 (scripts/test.sh installs Debian's lua5.1)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let (s, m) = text.split_once('\n').expect("two lines");
    (s.to_owned(), m.to_owned())
}

fn cond(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": "2026-12-03T10:00:00Z", "observedGeneration": 2})
}

fn status(observed: i64, conditions: Vec<Value>) -> Option<Value> {
    Some(json!({"observedGeneration": observed, "conditions": conditions}))
}

#[test]
fn argocd_health_follows_the_conditions() {
    let h = |g, s| health(g, s);
    assert_eq!(h(1, None).0, "Progressing");
    let ready = cond("Ready", "True", "Reconciled", "4 of 4 workloads up to date");
    let done = cond("Reconciling", "False", "Reconciled", "");
    let fine = cond("Stalled", "False", "Reconciled", "");
    assert_eq!(
        h(
            2,
            status(2, vec![ready.clone(), done.clone(), fine.clone()])
        ),
        ("Healthy".into(), "4 of 4 workloads up to date".into())
    );
    // A newer generation than the status describes.
    let (s, m) = h(3, status(2, vec![ready, done, fine.clone()]));
    assert_eq!(
        (s.as_str(), m.contains("generation 3")),
        ("Progressing", true)
    );
    // Rolling out.
    let rolling = cond(
        "Ready",
        "False",
        "RolloutInProgress",
        "2 of 4 workloads up to date",
    );
    let busy = cond(
        "Reconciling",
        "True",
        "RolloutInProgress",
        "rolling d00, d01",
    );
    assert_eq!(
        h(2, status(2, vec![rolling, busy, fine.clone()])),
        ("Progressing".into(), "rolling d00, d01".into())
    );
    // Bad input: not ready and nothing running.
    let invalid = cond(
        "Ready",
        "False",
        "SecretInvalid",
        "Secret team-a/proxy: key httpProxy is not a URL",
    );
    let idle = cond("Reconciling", "False", "SecretInvalid", "");
    assert_eq!(h(2, status(2, vec![invalid, idle, fine])).0, "Degraded");
    // Stalled wins over everything.
    let stuck = cond(
        "Stalled",
        "True",
        "DiscoveryIncomplete",
        "service network: not found",
    );
    let waiting = cond("Reconciling", "True", "RolloutInProgress", "");
    assert_eq!(
        h(2, status(2, vec![waiting, stuck])),
        ("Degraded".into(), "service network: not found".into())
    );
}
